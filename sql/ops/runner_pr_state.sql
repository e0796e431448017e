-- op: runner_pr_state
-- roles: runner
-- args: uuid
-- scope: run
-- A pull_request step's start: what the run pushed and opened so far, the
-- ref it checked out and its creation time in seconds (pr_state).
SELECT branch, pushed_commit, number, checked_out_ref, created FROM pr_state($1)
