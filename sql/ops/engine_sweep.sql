-- op: engine_sweep
-- roles: engine
-- args: 
-- scope: none
-- Expired approvals, cancelled runs nobody runs (sweep_runs).
SELECT sweep_runs()
