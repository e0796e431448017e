-- op: sup_run_mcp_secrets
-- roles: ctl
-- args: uuid
-- scope: none
-- The supervisor, starting a runner: the sealed credentials of the MCP
-- servers pinned in the run's manifest, to redact them from what it writes.
SELECT m.credentials_ciphertext, m.credentials_nonce
FROM runs r, jsonb_array_elements(r.manifest->'mcp_servers') x
JOIN mcp_servers m ON m.id = (x->>'id')::uuid
WHERE r.id = $1 AND m.credentials_ciphertext IS NOT NULL
