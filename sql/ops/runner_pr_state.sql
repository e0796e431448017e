-- op: runner_pr_state
-- roles: runner
-- args: uuid text
-- scope: run
-- A pull_request step's start: what the run pushed and opened so far, the
-- ref it checked out and its creation time in seconds (pr_state), while
-- the lease $2 holds (no row when it does not).
SELECT s.branch, s.pushed_commit, s.number, s.checked_out_ref, s.created
FROM pr_state($1) s JOIN runs r ON r.id = $1
WHERE r.lease_owner = $2 AND r.lease_expires_at > now()
