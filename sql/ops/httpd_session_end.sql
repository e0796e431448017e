-- op: httpd_session_end
-- roles: httpd
-- args: uuid bytea text?
-- scope: none
-- DELETE /v1/session: user $1 ends the session whose secret hashes to $2
-- (the cookie of the request); $3 the client's address.  Audited
-- (session.end).  One row {ended: true|false}: false when no such live
-- session of that user exists.
WITH e AS (
	UPDATE browser_sessions SET ended_at = now()
	WHERE session_hash = $2 AND user_id = $1 AND ended_at IS NULL
	RETURNING id
), a AS (
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       remote_addr)
	SELECT $1, 'user', 'session.end', 'browser_session', e.id::text, left($3, 128)
	FROM e
)
SELECT json_build_object('ended', EXISTS (SELECT 1 FROM e))::text AS j
