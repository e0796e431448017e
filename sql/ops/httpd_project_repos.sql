-- op: httpd_project_repos
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/projects/{id}/repos: the repository connections of project $2
-- for a member $1 (repo_json): name, URL, whether a token is set (never the
-- token itself), the forge and its API URL.  One row: the api_* envelope, or 404.
SELECT (CASE WHEN a.role IS NULL THEN api_err(404, 'not_found', 'no such project')
    ELSE api_ok(200, jsonb_build_object('repos', coalesce(
        (SELECT jsonb_agg(repo_json(c) ORDER BY c.name)
         FROM repo_connections c WHERE c.project_id = $2), '[]')))
    END || jsonb_build_object('role', a.role))::text AS j
FROM (SELECT (SELECT role FROM api_members WHERE user_id = $1 AND project_id = $2) AS role) a
