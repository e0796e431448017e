-- op: ctl_grant_remove
-- roles: ctl
-- args: text text text
-- scope: none
-- agrippactl grant remove PROJECT skill|mcp NAME: $2 is the resource kind
-- (skill or mcp_server).  The resource itself need not exist any more.
-- Always one row: project_id NULL when there is no such project, grant_id
-- NULL when there was no such grant (nothing is written then).
WITH p AS (
	SELECT id, name FROM projects WHERE name = $1
), g AS (
	DELETE FROM grants USING p
	WHERE grants.project_id = p.id AND grants.resource_kind = $2
	  AND grants.resource_name = $3
	RETURNING grants.id, grants.project_id, grants.resource_kind, grants.resource_name
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'grant.remove', 'grant', g.id::text, g.project_id, 'control socket',
	       jsonb_build_object('project', p.name, 'kind', g.resource_kind,
	                          'name', g.resource_name)
	FROM g, p
)
SELECT (SELECT id::text FROM p) AS project_id, (SELECT id::text FROM g) AS grant_id
