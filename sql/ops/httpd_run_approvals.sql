-- op: httpd_run_approvals
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/runs/{id}/approvals: the approvals of run $2, oldest first, for
-- a member $1 of its project.  One row: the api_* envelope, body
-- {approvals: [...]}, or 404.
SELECT coalesce(
    (SELECT api_ok(200, jsonb_build_object('approvals', coalesce(
         (SELECT jsonb_agg(approval_json(a) ORDER BY a.requested_at, a.id)
          FROM approvals a WHERE a.run_id = r.id), '[]')))
        || jsonb_build_object('role', m.role)
     FROM runs r JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
     WHERE r.id = $2),
    api_err(404, 'not_found', 'no such run'))::text AS j
