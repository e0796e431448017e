-- op: httpd_stream_events
-- roles: httpd
-- args: uuid int8 int4
-- scope: none
-- The event stream's replay (GET /v1/runs/{id}/events/stream): the events
-- of run $1 with seq > $2, in order, at most $3 (1..1000), one row each:
-- seq, type, payload (JSON text), and final (true on the run's terminal
-- event).  Whether the user may see the run was decided by
-- httpd_run_events when the stream was opened; a replay serves every
-- client of the run at once, so it names no user.
SELECT e.seq::text, e.type, e.payload::text,
       (r.finished_at IS NOT NULL AND e.seq = r.next_event_seq - 1)::text AS final
FROM runs r JOIN run_events e ON e.run_id = r.id
WHERE r.id = $1 AND e.seq > $2
ORDER BY e.seq
LIMIT $3
