-- op: httpd_session_create
-- roles: httpd
-- args: bytea bytea int8 text?
-- scope: none
-- POST /v1/session: $1 is the SHA-256 of an API token, $2 that of a new
-- session secret (httpd made both; neither secret leaves httpd), $3 the
-- session's lifetime in seconds, $4 the client's address.  When the token
-- is good (as for httpd_auth: not revoked, not expired, its user not
-- disabled) the session is stored, never past the token's own expiry, and
-- audited (session.create); one row {id, user, expires_in}.  No row, and
-- nothing stored, for every other reason alike.  The same statement
-- deletes the user's sessions that ended or expired more than a day ago,
-- so that they do not pile up.
WITH t AS (
	SELECT t.id, t.expires_at, u.id AS user_id, u.name
	FROM api_tokens t JOIN users u ON u.id = t.user_id
	WHERE t.token_hash = $1 AND t.revoked_at IS NULL
	  AND (t.expires_at IS NULL OR t.expires_at > now()) AND u.disabled_at IS NULL
), s AS (
	INSERT INTO browser_sessions (session_hash, token_id, user_id, expires_at, remote_addr)
	SELECT $2, t.id, t.user_id,
	       least(now() + make_interval(secs => $3), coalesce(t.expires_at, 'infinity')),
	       left($4, 128)
	FROM t
	RETURNING id, user_id, expires_at
), gc AS (
	DELETE FROM browser_sessions b USING t
	WHERE b.user_id = t.user_id AND coalesce(b.ended_at, b.expires_at) < now() - interval '1 day'
), a AS (
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       remote_addr, detail)
	SELECT s.user_id, 'user', 'session.create', 'browser_session', s.id::text, left($4, 128),
	       jsonb_build_object('token', t.id, 'expires_at', s.expires_at)
	FROM s JOIN t ON t.user_id = s.user_id
)
SELECT json_build_object('id', s.id, 'user', t.name,
       'expires_in', floor(extract(epoch FROM s.expires_at - now()))::bigint)::text AS j
FROM s JOIN t ON t.user_id = s.user_id
