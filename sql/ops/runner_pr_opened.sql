-- op: runner_pr_opened
-- roles: runner
-- args: uuid text text int4 int8 text bool bool text?
-- scope: run
-- The forge opened or updated the run's pull request (pr_opened).
SELECT pr_opened($1, $2, $3, $4, $5, $6, $7, $8, $9)
