-- op: sup_key_repo_reseal
-- roles: ctl
-- args: uuid bytea bytea
-- scope: none
-- A rotation's new sealing of repository token $1: ciphertext $2, nonce $3.
UPDATE repo_connections SET token_ciphertext = $2, token_nonce = $3 WHERE id = $1
