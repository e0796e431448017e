-- op: ctl_mcp_show
-- roles: ctl
-- args: text int4?
-- scope: none
-- agrippactl mcp show NAME [VERSION]: one version of an MCP server (the
-- latest without VERSION): its spec, which names credentials only by
-- reference, and whether it has credentials, never them.  No row when
-- there is no such server or version.
SELECT version::text AS version, spec::text AS spec,
       credentials_ciphertext IS NOT NULL AS has_credentials,
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created
FROM mcp_servers
WHERE name = $1 AND ($2::int4 IS NULL OR version = $2)
ORDER BY version DESC
LIMIT 1
