-- op: ctl_user_list
-- roles: ctl
-- args:
-- scope: none
-- agrippactl user list: every user, by name.
SELECT u.name,
       nullif(u.display_name, '') AS display_name,
       CASE WHEN u.disabled_at IS NULL THEN 'active' ELSE 'disabled' END AS state,
       (SELECT count(*) FROM api_tokens t
        WHERE t.user_id = u.id AND t.revoked_at IS NULL
          AND (t.expires_at IS NULL OR t.expires_at > now()))::text AS tokens,
       to_char(u.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created
FROM users u
ORDER BY u.name
LIMIT 10000
