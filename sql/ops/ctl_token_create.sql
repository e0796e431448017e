-- op: ctl_token_create
-- roles: ctl
-- args: text bytea text int4?
-- scope: none
-- agrippactl token create USER [DAYS]: $2 is the SHA-256 of the token
-- (the token itself never reaches the database), $3 its display prefix,
-- $4 the lifetime in days or NULL for none.  One row when the user exists:
-- disabled = true and no token when the user is disabled; no row when there
-- is no such user.
WITH u AS (
	SELECT id, name, disabled_at IS NOT NULL AS disabled FROM users WHERE name = $1
), t AS (
	INSERT INTO api_tokens (user_id, token_hash, prefix, expires_at)
	SELECT u.id, $2, $3, now() + make_interval(days => $4)
	FROM u WHERE NOT u.disabled
	RETURNING id, user_id, prefix, expires_at
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'token.create', 'api_token', t.id::text, 'control socket',
	       jsonb_build_object('user', u.name, 'prefix', t.prefix, 'expires_at', t.expires_at)
	FROM t JOIN u ON u.id = t.user_id
)
SELECT u.disabled, t.id::text AS id,
       to_char(t.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS expires
FROM u LEFT JOIN t ON true
