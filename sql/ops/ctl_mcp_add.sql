-- op: ctl_mcp_add
-- roles: ctl
-- args: text jsonb bytea? bytea?
-- scope: none
-- agrippactl mcp add NAME SPEC: the spec (a JSON object), and the
-- credentials' ciphertext and nonce (sealed by the supervisor under
-- "mcpcreds"), both NULL without credentials.  Every add is a new version
-- max(version)+1; the audit row says only whether there are credentials.
-- Two adds of the same name at once: one of them is a unique violation
-- (mcp_servers_name_version_key) and stores nothing.
WITH ins AS (
	INSERT INTO mcp_servers (name, version, spec, credentials_ciphertext, credentials_nonce)
	SELECT $1, coalesce(max(version), 0) + 1, $2, $3, $4 FROM mcp_servers WHERE name = $1
	RETURNING id, name, version, credentials_ciphertext IS NOT NULL AS has_credentials
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'mcp.add', 'mcp_server', ins.id::text, 'control socket',
	       jsonb_build_object('name', ins.name, 'version', ins.version,
	                          'credentials', ins.has_credentials)
	FROM ins
)
SELECT version::text AS version FROM ins
