-- op: ctl_mcp_list
-- roles: ctl
-- args:
-- scope: none
-- agrippactl mcp list: every MCP server with its latest version; never the
-- credentials, only whether that version has some.
SELECT DISTINCT ON (name) name, version::text AS version,
       CASE WHEN credentials_ciphertext IS NULL THEN 'no' ELSE 'yes' END AS has_credentials,
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created
FROM mcp_servers
ORDER BY name, version DESC
LIMIT 10000
