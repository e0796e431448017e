-- op: ctl_repo_list
-- roles: ctl
-- args: text
-- scope: none
-- agrippactl repo list PROJECT: never the token, only whether there is one.
-- No row when there is no such project; one row with a NULL name when it
-- has no repository.  The last column, the connection's id, names its
-- mirror: the supervisor replaces it with what this host has of that.
SELECT r.name, r.url,
       CASE WHEN r.id IS NULL THEN NULL
            WHEN r.token_ciphertext IS NULL THEN 'no' ELSE 'yes' END AS has_token,
       r.forge, r.api_url,
       to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created,
       r.id::text AS id
FROM projects p LEFT JOIN repo_connections r ON r.project_id = p.id
WHERE p.name = $1
ORDER BY r.name
LIMIT 10000
