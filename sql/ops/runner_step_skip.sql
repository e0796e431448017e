-- op: runner_step_skip
-- roles: runner
-- args: uuid text text text text bool
-- scope: run
-- A step whose "when" does not hold is skipped (step_skip).
SELECT step_skip($1, $2, $3, $4, $5, $6)
