-- op: runner_pr_artifacts
-- roles: runner
-- args: uuid text
-- scope: run
-- A pull_request step's body may include artifacts' texts
-- (${artifacts.KEY}): the run's artifacts of kind text, md or json held in
-- the database, the latest attempt of each key, base64, while the lease $2
-- holds.  At most 64 of them, each at most 256 KiB (a larger one is left
-- out, and the body says so).
SELECT DISTINCT ON (a.key) a.key, encode(a.inline, 'base64') AS text
FROM artifacts a JOIN runs r ON r.id = a.run_id
WHERE a.run_id = $1 AND r.lease_owner = $2 AND r.lease_expires_at > now()
  AND a.kind IN ('text', 'md', 'json') AND a.inline IS NOT NULL AND a.size <= 262144
ORDER BY a.key, a.attempt DESC
LIMIT 64
