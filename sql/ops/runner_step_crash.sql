-- op: runner_step_crash
-- roles: runner
-- args: uuid text text int4
-- scope: run
-- An attempt a dead runner left running is marked crashed (step_crash).
SELECT step_crash($1, $2, $3, $4)
