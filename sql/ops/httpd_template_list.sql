-- op: httpd_template_list
-- roles: httpd
-- args: uuid
-- scope: none
-- GET /v1/templates: the latest version of every template, by name, one
-- JSON object {name, version, description, loaded_at} per row.  Templates
-- are not per project: any enabled user $1 may list them; no row for a
-- disabled or unknown user.
SELECT DISTINCT ON (t.name)
       json_build_object('name', t.name, 'version', t.version,
       'description', coalesce(t.compiled->>'description', ''),
       'loaded_at', to_char(t.loaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))::text AS j
FROM templates t
WHERE EXISTS (SELECT 1 FROM users u WHERE u.id = $1 AND u.disabled_at IS NULL)
ORDER BY t.name, t.version DESC
LIMIT 10000
