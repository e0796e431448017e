-- op: sup_run_checked_out
-- roles: ctl
-- args: uuid text text text
-- scope: none
-- The supervisor records the base commit of a run's checkout and the ref
-- it resolved (run_checked_out).
SELECT run_checked_out($1, $2, $3, $4)
