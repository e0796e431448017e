-- op: engine_claim
-- roles: engine
-- args: text int4 text
-- scope: instance
-- The next run this engine may start, under a lease, with its event (claim_run_started); $3 is this host's id (STATE/host-id).
SELECT run_id, previous_status FROM claim_run_started($1, $2, $3)
