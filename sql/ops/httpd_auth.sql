-- op: httpd_auth
-- roles: httpd
-- args: bytea
-- scope: none
-- Bearer authentication: $1 is the SHA-256 of the token (httpd hashes it;
-- the token never leaves httpd).  One row, {id, name, display_name,
-- projects: {project id: role}, expires_in: the token's seconds left or
-- null} as JSON, only when the token exists, is not revoked, has not
-- expired and its user is not disabled; no row for every other reason
-- alike.  The roles feed httpd's own first authorization check (every
-- operation checks again); expires_in bounds how long httpd caches the
-- answer.  last_used_at is written at most once a minute per token, in the
-- same statement.
WITH t AS (
	SELECT t.id, t.last_used_at, t.expires_at, u.id AS user_id, u.name, u.display_name
	FROM api_tokens t JOIN users u ON u.id = t.user_id
	WHERE t.token_hash = $1 AND t.revoked_at IS NULL
	  AND (t.expires_at IS NULL OR t.expires_at > now()) AND u.disabled_at IS NULL
), used AS (
	UPDATE api_tokens SET last_used_at = now()
	FROM t
	WHERE api_tokens.id = t.id
	  AND (t.last_used_at IS NULL OR t.last_used_at <= now() - interval '1 minute')
)
SELECT json_build_object('id', user_id, 'name', name, 'display_name', display_name,
       'expires_in', floor(extract(epoch FROM t.expires_at - now()))::bigint,
       'projects', (SELECT coalesce(json_object_agg(m.project_id, m.role), '{}')
                    FROM memberships m WHERE m.user_id = t.user_id))::text AS j
FROM t
