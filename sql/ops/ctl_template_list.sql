-- op: ctl_template_list
-- roles: ctl
-- args:
-- scope: none
-- agrippactl template list: every loaded template version.
SELECT name, version::text AS version,
       to_char(loaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS loaded_at,
       substr(encode(sha256, 'hex'), 1, 12) AS sha256
FROM templates
ORDER BY name, version
LIMIT 10000
