-- op: httpd_project_get
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/projects/{id}: project $2 as seen by user $1, one JSON object
-- {id, name, role, monthly_quota_usd_micros, created_at}.  No row unless
-- $1 is an enabled member of $2: a project the user may not see and one
-- that does not exist look the same.
SELECT json_build_object('id', p.id, 'name', p.name, 'role', m.role,
       'monthly_quota_usd_micros', p.monthly_quota_usd_micros,
       'created_at', to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))::text AS j
FROM memberships m
JOIN users u ON u.id = m.user_id AND u.disabled_at IS NULL
JOIN projects p ON p.id = m.project_id
WHERE m.user_id = $1 AND m.project_id = $2
