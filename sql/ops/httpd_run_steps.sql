-- op: httpd_run_steps
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/runs/{id}/steps: every attempt of every step of run $2, in the
-- order they started, for a member $1 of its project.  One row: the api_*
-- envelope, body {steps: [...]}, or 404.
SELECT coalesce(
    (SELECT api_ok(200, jsonb_build_object('steps', coalesce(
         (SELECT jsonb_agg(jsonb_build_object('id', s.id, 'phase', s.phase_name,
              'step_id', s.step_id, 'attempt', s.attempt, 'status', s.status,
              'exit_status', s.exit_status, 'error', s.error,
              'started_at', api_ts(s.started_at), 'finished_at', api_ts(s.finished_at))
              ORDER BY s.started_at, s.step_id, s.attempt)
          FROM run_steps s WHERE s.run_id = r.id), '[]')))
        || jsonb_build_object('role', m.role)
     FROM runs r JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
     WHERE r.id = $2),
    api_err(404, 'not_found', 'no such run'))::text AS j
