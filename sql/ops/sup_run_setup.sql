-- op: sup_run_setup
-- roles: ctl
-- args: uuid
-- scope: none
-- The supervisor, starting a runner: the workspace's repository and access (run_setup).
SELECT status, url, token_ciphertext, token_nonce, access, base_commit, repo_missing FROM run_setup($1)
