-- op: ctl_user_disable
-- roles: ctl
-- args: text
-- scope: none
-- agrippactl user disable NAME.  One row when the user exists, with
-- changed = false when it was disabled already (then nothing is written);
-- no row when there is no such user.
WITH d AS (
	UPDATE users SET disabled_at = now()
	WHERE name = $1 AND disabled_at IS NULL
	RETURNING id, name
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'user.disable', 'user', d.id::text, 'control socket',
	       jsonb_build_object('name', d.name)
	FROM d
)
SELECT u.id::text AS id, EXISTS (SELECT 1 FROM d) AS changed
FROM users u WHERE u.name = $1
