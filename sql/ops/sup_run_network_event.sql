-- op: sup_run_network_event
-- roles: ctl
-- args: uuid text jsonb
-- scope: none
-- The supervisor records what the egress process reported for a run it
-- serves (network.allowed, network.denied, network.closed), while the run
-- runs: never after its terminal event.
SELECT append_run_event(r.id, $2, $3)
FROM (SELECT id FROM runs WHERE id = $1 AND status IN ('running', 'waiting_approval')
      FOR UPDATE) r
WHERE $2 IN ('network.allowed', 'network.denied', 'network.closed')
