-- op: httpd_project_grants
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/projects/{id}/grants: the registry resources granted to project
-- $2, with the latest registered version of each (null when none is), for
-- a member $1.  One row: the api_* envelope, body {grants: [...]}, or 404.
SELECT (CASE WHEN a.role IS NULL THEN api_err(404, 'not_found', 'no such project')
    ELSE api_ok(200, jsonb_build_object('grants', coalesce(
        (SELECT jsonb_agg(jsonb_build_object('id', g.id, 'kind', g.resource_kind,
             'name', g.resource_name,
             'latest_version', CASE g.resource_kind
                 WHEN 'skill' THEN (SELECT max(version) FROM skills WHERE name = g.resource_name)
                 ELSE (SELECT max(version) FROM mcp_servers WHERE name = g.resource_name) END,
             'created_at', api_ts(g.created_at)) ORDER BY g.resource_kind, g.resource_name)
         FROM grants g WHERE g.project_id = $2), '[]')))
    END || jsonb_build_object('role', a.role))::text AS j
FROM (SELECT (SELECT role FROM api_members WHERE user_id = $1 AND project_id = $2) AS role) a
