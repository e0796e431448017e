-- op: engine_claim
-- roles: engine
-- args: text int4
-- scope: instance
-- The next run this engine may start, under a lease, with its event (claim_run_started).
SELECT run_id, previous_status FROM claim_run_started($1, $2)
