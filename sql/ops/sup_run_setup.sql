-- op: sup_run_setup
-- roles: ctl
-- args: uuid
-- scope: none
-- The supervisor, starting a runner: the workspace's repository and access,
-- the repository connection's id, the run's ref, and the connection's
-- forge and its API URL (run_setup).
SELECT status, url, token_ciphertext, token_nonce, access, base_commit, repo_missing, repo_id, ref, forge, api_url FROM run_setup($1)
