-- op: ctl_member_role
-- roles: ctl
-- args: text text text
-- scope: none
-- agrippactl member role PROJECT USER ROLE.  Always one row: project_id or
-- user_id NULL when that one does not exist, old_role NULL when the user is
-- not a member; changed = false when the role was ROLE already (nothing is
-- written then).
WITH p AS (
	SELECT id, name FROM projects WHERE name = $1
), u AS (
	SELECT id, name FROM users WHERE name = $2
), o AS (
	SELECT ms.id, ms.project_id, ms.role FROM memberships ms, p, u
	WHERE ms.project_id = p.id AND ms.user_id = u.id
), c AS (
	UPDATE memberships SET role = $3 FROM o
	WHERE memberships.id = o.id AND o.role <> $3
	RETURNING memberships.id, memberships.project_id, o.role AS old_role, memberships.role
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'member.role', 'membership', c.id::text, c.project_id,
	       'control socket', jsonb_build_object('project', p.name, 'user', u.name,
	                                            'old_role', c.old_role, 'role', c.role)
	FROM c, p, u
)
SELECT (SELECT id::text FROM p) AS project_id, (SELECT id::text FROM u) AS user_id,
       (SELECT role FROM o) AS old_role, EXISTS (SELECT 1 FROM c) AS changed
