-- op: engine_heartbeat
-- roles: engine
-- args: text text int4 text?
-- scope: instance
-- An engine is alive: its instance, hostname, pid and the host it runs on
-- (STATE/host-id; NULL before its configuration came), which the sweep
-- reads to tell a host that is gone (sweep_runs).
INSERT INTO engine_heartbeats (instance_id, hostname, pid, host_id)
VALUES ($1, $2, $3, $4)
ON CONFLICT (instance_id) DO UPDATE
	SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid,
	    host_id = coalesce(EXCLUDED.host_id, engine_heartbeats.host_id), last_seen = now()
RETURNING instance_id, last_seen
