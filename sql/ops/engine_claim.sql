-- op: engine_claim
-- roles: engine
-- args: text int4
-- scope: instance
-- The next run this engine may start, under a lease (claim_run).
SELECT run_id, previous_status FROM claim_run($1, $2)
