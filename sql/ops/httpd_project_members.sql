-- op: httpd_project_members
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/projects/{id}/members: the members of project $2, by name, one
-- JSON object {membership_id, id, name, display_name, role, disabled, since} per row, when
-- user $1 is an enabled member of it (any role may read).  No row
-- otherwise; a member always sees at least their own row.
SELECT json_build_object('membership_id', m.id, 'id', u.id, 'name', u.name, 'display_name', u.display_name,
       'role', m.role, 'disabled', u.disabled_at IS NOT NULL,
       'since', to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))::text AS j
FROM memberships me
JOIN users a ON a.id = me.user_id AND a.disabled_at IS NULL
JOIN memberships m ON m.project_id = me.project_id
JOIN users u ON u.id = m.user_id
WHERE me.user_id = $1 AND me.project_id = $2
ORDER BY u.name
LIMIT 10000
