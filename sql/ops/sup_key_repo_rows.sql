-- op: sup_key_repo_rows
-- roles: ctl
-- args:
-- scope: none
-- Every sealed repository token, locked for the rotation's transaction:
-- its id, the names an operator knows it by, ciphertext and nonce.
SELECT c.id::text AS id, p.name AS project, c.name AS name, c.token_ciphertext, c.token_nonce
FROM repo_connections c JOIN projects p ON p.id = c.project_id
WHERE c.token_ciphertext IS NOT NULL
ORDER BY c.id
FOR UPDATE OF c
