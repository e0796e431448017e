-- op: httpd_login_limited
-- roles: httpd
-- args: text text? int8
-- scope: none
-- POST /v1/session refused by httpd's login limit (httpd/loginlimit.c):
-- $1 the bucket that is empty ("address": the client's, or "all"), $2
-- the client's address, $3 the Retry-After it was told, in seconds.
-- Audited (httpd asks at most once a minute for each of its buckets):
-- session.rate_limited, by the system, the object the client's address.
-- One row {audited: true}.
WITH a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	VALUES ('system', 'session.rate_limited', 'client', left($2, 128), left($2, 128),
	        jsonb_build_object('scope', $1, 'retry_after', $3))
	RETURNING id
)
SELECT json_build_object('audited', EXISTS (SELECT 1 FROM a))::text AS j
