-- op: ctl_project_add
-- roles: ctl
-- args: text
-- scope: none
-- agrippactl project add NAME.  A taken name is a unique violation
-- (projects_name_key).
WITH p AS (
	INSERT INTO projects (name) VALUES ($1) RETURNING id, name
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'project.add', 'project', p.id::text, p.id, 'control socket',
	       jsonb_build_object('name', p.name)
	FROM p
)
SELECT id::text AS id, name FROM p
