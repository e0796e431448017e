-- op: ctl_repo_secret
-- roles: ctl
-- args: text text
-- scope: none
-- agrippactl repo test PROJECT NAME: the connection's URL, its sealed
-- token (ciphertext and nonce, both NULL without one) and its id (its
-- mirror's name) for the supervisor,
-- which alone can open it and hands it to a git helper only.  No row when
-- the project or the connection does not exist.
SELECT c.url, c.token_ciphertext, c.token_nonce, c.id
FROM repo_connections c JOIN projects p ON p.id = c.project_id
WHERE p.name = $1 AND c.name = $2
