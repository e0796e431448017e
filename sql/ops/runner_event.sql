-- op: runner_event
-- roles: runner
-- args: uuid text text jsonb
-- scope: run
-- An event of the runner's own (runner_event: phase and output events).
SELECT runner_event($1, $2, $3, $4)
