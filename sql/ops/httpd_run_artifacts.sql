-- op: httpd_run_artifacts
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/runs/{id}/artifacts: the committed artifacts of run $2 (never
-- their bytes), for a member $1 of its project.  One row: the api_*
-- envelope, body {artifacts: [{id, step_id, attempt, key, kind, size,
-- sha256, created_at}]}, or 404.
SELECT coalesce(
    (SELECT api_ok(200, jsonb_build_object('artifacts', coalesce(
         (SELECT jsonb_agg(jsonb_build_object('id', x.id, 'step_id', x.step_id,
              'attempt', x.attempt, 'key', x.key, 'kind', x.kind, 'size', x.size,
              'sha256', encode(x.sha256, 'hex'), 'created_at', api_ts(x.created_at))
              ORDER BY x.created_at, x.key)
          FROM artifacts x WHERE x.run_id = r.id), '[]')))
        || jsonb_build_object('role', m.role)
     FROM runs r JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
     WHERE r.id = $2),
    api_err(404, 'not_found', 'no such run'))::text AS j
