-- op: ctl_member_remove
-- roles: ctl
-- args: text text
-- scope: none
-- agrippactl member remove PROJECT USER.  Always one row: project_id or
-- user_id NULL when that one does not exist, role NULL when the user was
-- not a member (nothing is written then).
WITH p AS (
	SELECT id, name FROM projects WHERE name = $1
), u AS (
	SELECT id, name FROM users WHERE name = $2
), m AS (
	DELETE FROM memberships USING p, u
	WHERE memberships.project_id = p.id AND memberships.user_id = u.id
	RETURNING memberships.id, memberships.project_id, memberships.role
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'member.remove', 'membership', m.id::text, m.project_id,
	       'control socket', jsonb_build_object('project', p.name, 'user', u.name, 'role', m.role)
	FROM m, p, u
)
SELECT (SELECT id::text FROM p) AS project_id, (SELECT id::text FROM u) AS user_id,
       (SELECT role FROM m) AS role
