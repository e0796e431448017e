-- op: runner_load
-- roles: runner
-- args: uuid text
-- scope: run
-- The runner's view of its run, when its lease holds (runner_load).
SELECT cancel, template, params, steps, approvals FROM runner_load($1, $2)
