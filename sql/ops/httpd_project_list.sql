-- op: httpd_project_list
-- roles: httpd
-- args: uuid
-- scope: none
-- GET /v1/projects and /v1/me: the projects user $1 is a member of, by
-- name, one JSON object {id, name, role, created_at} per row.  No row for
-- a disabled or unknown user.
SELECT json_build_object('id', p.id, 'name', p.name, 'role', m.role,
       'created_at', to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))::text AS j
FROM memberships m
JOIN users u ON u.id = m.user_id AND u.disabled_at IS NULL
JOIN projects p ON p.id = m.project_id
WHERE m.user_id = $1
ORDER BY p.name
LIMIT 10000
