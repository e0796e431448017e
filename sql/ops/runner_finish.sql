-- op: runner_finish
-- roles: runner
-- args: uuid text text text?
-- scope: run
-- The run's end (run_finish); a cancel requested first wins.
SELECT run_finish($1, $2, $3, $4)
