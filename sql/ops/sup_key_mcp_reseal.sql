-- op: sup_key_mcp_reseal
-- roles: ctl
-- args: uuid bytea bytea
-- scope: none
-- A rotation's new sealing of MCP server version $1's credentials.
UPDATE mcp_servers SET credentials_ciphertext = $2, credentials_nonce = $3 WHERE id = $1
