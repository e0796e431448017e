-- op: ctl_skill_list
-- roles: ctl
-- args:
-- scope: none
-- agrippactl skill list: every skill with its latest version.
SELECT DISTINCT ON (name) name, version::text AS version,
       substr(encode(sha256, 'hex'), 1, 12) AS sha256,
       to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created
FROM skills
ORDER BY name, version DESC
LIMIT 10000
