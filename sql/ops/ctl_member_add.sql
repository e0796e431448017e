-- op: ctl_member_add
-- roles: ctl
-- args: text text text
-- scope: none
-- agrippactl member add PROJECT USER ROLE.  Always one row: project_id or
-- user_id NULL when that one does not exist (then nothing is written).  An
-- existing membership is a unique violation
-- (memberships_project_id_user_id_key).
WITH p AS (
	SELECT id, name FROM projects WHERE name = $1
), u AS (
	SELECT id, name FROM users WHERE name = $2
), m AS (
	INSERT INTO memberships (project_id, user_id, role)
	SELECT p.id, u.id, $3 FROM p, u
	RETURNING id, project_id, role
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
	                       remote_addr, detail)
	SELECT 'operator', 'member.add', 'membership', m.id::text, m.project_id,
	       'control socket', jsonb_build_object('project', p.name, 'user', u.name, 'role', m.role)
	FROM m, p, u
)
SELECT (SELECT id::text FROM p) AS project_id, (SELECT id::text FROM u) AS user_id,
       (SELECT id::text FROM m) AS membership_id
