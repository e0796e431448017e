-- op: sup_key_mcp_rows
-- roles: ctl
-- args:
-- scope: none
-- Every MCP server version's sealed credentials, locked for the
-- rotation's transaction.
SELECT id::text AS id, name, version::text AS version, credentials_ciphertext,
       credentials_nonce
FROM mcp_servers
WHERE credentials_ciphertext IS NOT NULL
ORDER BY id
FOR UPDATE
