-- op: ctl_user_add
-- roles: ctl
-- args: text text
-- scope: none
-- agrippactl user add NAME [DISPLAY]: the user and its audit row in one
-- statement.  A taken name is a unique violation (users_name_key).
WITH u AS (
	INSERT INTO users (name, display_name) VALUES ($1, $2)
	RETURNING id, name, display_name
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'user.add', 'user', u.id::text, 'control socket',
	       jsonb_build_object('name', u.name, 'display_name', u.display_name)
	FROM u
)
SELECT id::text AS id, name FROM u
