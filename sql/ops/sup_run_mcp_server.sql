-- op: sup_run_mcp_server
-- roles: ctl
-- args: uuid text
-- scope: none
-- The supervisor, starting an MCP server a run's step asked for by name:
-- the version pinned in the run's manifest (DESIGN 3.7), never the
-- registry's latest, with its sealed credentials, which the supervisor
-- opens only to put them in the server's environment.  No row when the run
-- has no such server pinned (an optional one that was not granted).
SELECT m.spec::text AS spec, m.credentials_ciphertext, m.credentials_nonce,
       m.version::text AS version
FROM runs r, jsonb_array_elements(r.manifest->'mcp_servers') x
JOIN mcp_servers m ON m.id = (x->>'id')::uuid
WHERE r.id = $1 AND x->>'name' = $2
LIMIT 1
