-- op: ctl_grant_add
-- roles: ctl
-- args: text text text
-- scope: none
-- agrippactl grant add PROJECT skill|mcp NAME: $2 is the resource kind
-- (skill or mcp_server).  Always one row: project_id NULL when there is no
-- such project, resource false when there is no such resource (nothing is
-- written then); grant_id NULL when the grant existed already.
WITH p AS (
	SELECT id, name FROM projects WHERE name = $1
), r AS (
	SELECT 1 AS found
	WHERE ($2 = 'skill' AND EXISTS (SELECT 1 FROM skills WHERE name = $3))
	   OR ($2 = 'mcp_server' AND EXISTS (SELECT 1 FROM mcp_servers WHERE name = $3))
), g AS (
	INSERT INTO grants (project_id, resource_kind, resource_name)
	SELECT p.id, $2, $3 FROM p, r
	ON CONFLICT (project_id, resource_kind, resource_name) DO NOTHING
	RETURNING id, project_id, resource_kind, resource_name
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'grant.add', 'grant', g.id::text, g.project_id, 'control socket',
	       jsonb_build_object('project', p.name, 'kind', g.resource_kind,
	                          'name', g.resource_name)
	FROM g, p
)
SELECT (SELECT id::text FROM p) AS project_id, EXISTS (SELECT 1 FROM r) AS resource,
       (SELECT id::text FROM g) AS grant_id
