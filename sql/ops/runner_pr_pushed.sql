-- op: runner_pr_pushed
-- roles: runner
-- args: uuid text text int4 text text bool
-- scope: run
-- The git helper pushed (or found already there) the run's commit on its
-- branch: recorded before the pull request is opened (pr_pushed).
SELECT pr_pushed($1, $2, $3, $4, $5, $6, $7)
