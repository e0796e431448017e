-- op: sup_run_checked_out
-- roles: ctl
-- args: uuid text text
-- scope: none
-- The supervisor records the base commit of a run's checkout (run_checked_out).
SELECT run_checked_out($1, $2, $3)
