-- op: ctl_mcp_test
-- roles: ctl
-- args: text int4?
-- scope: none
-- agrippactl mcp test NAME [VERSION]: one version of an MCP server (the
-- latest without VERSION) with its sealed credentials, which the
-- supervisor opens only to put them in the server's environment.  No row
-- when there is no such server or version.
SELECT version::text AS version, spec::text AS spec,
       credentials_ciphertext, credentials_nonce
FROM mcp_servers
WHERE name = $1 AND ($2::int4 IS NULL OR version = $2)
ORDER BY version DESC
LIMIT 1
