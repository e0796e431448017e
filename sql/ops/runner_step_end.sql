-- op: runner_step_end
-- roles: runner
-- args: uuid text text int4 text int4? text? jsonb? jsonb?
-- scope: run
-- A step attempt ends, with step.finished and its artifacts (step_end).
SELECT step_end($1, $2, $3, $4, $5, $6, $7, $8, $9)
