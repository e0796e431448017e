-- op: ctl_template_load
-- roles: ctl
-- args: text int4 text jsonb bytea
-- scope: none
-- agrippactl template load FILE: name, version, source, compiled, sha256 of
-- source.  A loaded name+version is never changed.  Always one row:
-- inserted (the new id) when stored; otherwise same tells whether the
-- stored version has this very source (true: nothing to do) or other
-- content (false); both NULL when another load of the same name+version
-- won a race (nothing written here).
WITH old AS (
	SELECT sha256 FROM templates WHERE name = $1 AND version = $2
), ins AS (
	INSERT INTO templates (name, version, source, compiled, sha256)
	SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM old)
	ON CONFLICT (name, version) DO NOTHING
	RETURNING id, name, version
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'template.load', 'template', ins.id::text, 'control socket',
	       jsonb_build_object('name', ins.name, 'version', ins.version,
	                          'sha256', encode($5, 'hex'))
	FROM ins
)
SELECT (SELECT id::text FROM ins) AS inserted, (SELECT sha256 = $5 FROM old) AS same
