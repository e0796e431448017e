-- op: runner_step_reserve
-- roles: runner
-- args: uuid text text text int4 int8
-- scope: run
-- Before an agent step attempt: its reservation, or the run parked on a budget approval (step_reserve).
SELECT outcome, amount FROM step_reserve($1, $2, $3, $4, $5, $6)
