-- op: ctl_token_revoke
-- roles: ctl
-- args: text
-- scope: none
-- agrippactl token revoke PREFIX: revokes the one token whose prefix starts
-- with $1.  Returns one row per matching token (matches, the user, whether
-- it was revoked before); when several match, nothing is changed.
WITH m AS (
	SELECT t.id, t.prefix, t.revoked_at, u.name AS user_name
	FROM api_tokens t JOIN users u ON u.id = t.user_id
	WHERE starts_with(t.prefix, $1)
), r AS (
	UPDATE api_tokens SET revoked_at = now()
	WHERE id IN (SELECT id FROM m) AND (SELECT count(*) FROM m) = 1 AND revoked_at IS NULL
	RETURNING id, prefix
), a AS (
	INSERT INTO audit_log (actor_kind, action, object_kind, object_id, remote_addr, detail)
	SELECT 'operator', 'token.revoke', 'api_token', r.id::text, 'control socket',
	       jsonb_build_object('user', m.user_name, 'prefix', r.prefix)
	FROM r JOIN m ON m.id = r.id
)
SELECT (SELECT count(*) FROM m)::text AS matches, m.prefix, m.user_name,
       m.revoked_at IS NOT NULL AS was_revoked
FROM m ORDER BY m.prefix
