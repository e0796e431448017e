-- op: httpd_run_events
-- roles: httpd
-- args: uuid uuid int8 int4
-- scope: none
-- GET /v1/runs/{id}/events?after=&limit=, and the event stream's check at
-- connect: the events of run $2 with seq > $3, in order, at most $4
-- (0..1000), for a member $1 of its project.  One row: the api_*
-- envelope, body {events: [{seq, type, payload, created_at}], last_seq,
-- finished}, or 404.  last_seq is the run's latest seq and finished whether
-- the run has ended (its terminal event is then last_seq).
SELECT coalesce(
    (SELECT api_ok(200, jsonb_build_object(
         'events', coalesce(
             (SELECT jsonb_agg(jsonb_build_object('seq', e.seq, 'type', e.type,
                  'payload', e.payload, 'created_at', api_ts(e.created_at)) ORDER BY e.seq)
              FROM (SELECT * FROM run_events WHERE run_id = r.id AND seq > $3
                    ORDER BY seq LIMIT $4) e), '[]'),
         'last_seq', r.next_event_seq - 1, 'finished', r.finished_at IS NOT NULL))
        || jsonb_build_object('role', m.role)
     FROM runs r JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
     WHERE r.id = $2),
    api_err(404, 'not_found', 'no such run'))::text AS j
