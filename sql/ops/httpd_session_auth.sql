-- op: httpd_session_auth
-- roles: httpd
-- args: bytea
-- scope: none
-- Cookie authentication: $1 is the SHA-256 of the session secret.  One row,
-- the same JSON as httpd_auth's ({id, name, display_name, projects,
-- expires_in}: here the seconds until the session or its token expires,
-- whichever is first), only when the session has neither ended nor expired,
-- its token is neither revoked nor expired and its user is not disabled; no
-- row for every other reason alike.
SELECT json_build_object('id', u.id, 'name', u.name, 'display_name', u.display_name,
       'expires_in', floor(extract(epoch FROM
                     least(s.expires_at, coalesce(t.expires_at, 'infinity')) - now()))::bigint,
       'projects', (SELECT coalesce(json_object_agg(m.project_id, m.role), '{}')
                    FROM memberships m WHERE m.user_id = u.id))::text AS j
FROM browser_sessions s
JOIN api_tokens t ON t.id = s.token_id
JOIN users u ON u.id = s.user_id
WHERE s.session_hash = $1 AND s.ended_at IS NULL AND s.expires_at > now()
  AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
  AND u.disabled_at IS NULL
