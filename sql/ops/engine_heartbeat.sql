-- op: engine_heartbeat
-- roles: engine
-- args: text text int4
-- scope: instance
INSERT INTO engine_heartbeats (instance_id, hostname, pid)
VALUES ($1, $2, $3)
ON CONFLICT (instance_id) DO UPDATE
	SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, last_seen = now()
RETURNING instance_id, last_seen
