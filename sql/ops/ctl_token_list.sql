-- op: ctl_token_list
-- roles: ctl
-- args: text
-- scope: none
-- agrippactl token list USER: never the hash.  No row when there is no such
-- user; one row with a NULL prefix when the user has no token.
SELECT t.prefix,
       to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created,
       to_char(t.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS expires,
       to_char(t.revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS revoked,
       to_char(t.last_used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_used
FROM users u LEFT JOIN api_tokens t ON t.user_id = u.id
WHERE u.name = $1
ORDER BY t.created_at, t.prefix
LIMIT 10000
