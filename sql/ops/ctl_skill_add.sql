-- op: ctl_skill_add
-- roles: ctl
-- args: text text bytea
-- scope: none
-- agrippactl skill add NAME FILE: body and its sha256.  Stores version
-- max(version)+1, unless the latest version has this very content.  Always
-- one row: version = the new version, or NULL when nothing was stored; then
-- latest = the latest version (which has this content).  Two adds of the
-- same name at once: one of them is a unique violation
-- (skills_name_version_key) and stores nothing.
WITH latest AS (
	SELECT version, sha256 FROM skills WHERE name = $1 ORDER BY version DESC LIMIT 1
), ins AS (
	INSERT INTO skills (name, version, body, sha256)
	SELECT $1, coalesce((SELECT version FROM latest), 0) + 1, $2, $3
	WHERE NOT EXISTS (SELECT 1 FROM latest WHERE sha256 = $3)
	RETURNING id, name, version
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'skill.add', 'skill', ins.id::text, 'control socket',
	       jsonb_build_object('name', ins.name, 'version', ins.version,
	                          'sha256', encode($3, 'hex'))
	FROM ins
)
SELECT (SELECT version::text FROM ins) AS version, (SELECT version::text FROM latest) AS latest
