-- op: sup_run_fail
-- roles: ctl
-- args: uuid text text
-- scope: none
-- The supervisor ends a run it could not set up (checkout failed): failed, or cancelled when a cancel came first.
SELECT run_finish($1, $2, 'failed', $3)
