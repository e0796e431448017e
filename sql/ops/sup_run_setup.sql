-- op: sup_run_setup
-- roles: ctl
-- args: uuid
-- scope: none
-- The supervisor, starting a runner: the workspace's repository and access,
-- the repository connection's id and the run's ref (run_setup).
SELECT status, url, token_ciphertext, token_nonce, access, base_commit, repo_missing, repo_id, ref FROM run_setup($1)
