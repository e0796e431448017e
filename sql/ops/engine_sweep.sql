-- op: engine_sweep
-- roles: engine
-- args: int4
-- scope: none
-- Expired approvals, cancelled runs nobody runs, and runs whose host has
-- had no engine for engine.host_grace seconds ($1) (sweep_runs); and the
-- metrics' deltas moved into their sums (metrics_compact, 0016).
SELECT sweep_runs($1) AS swept, metrics_compact() AS compacted
