-- op: httpd_template_get
-- roles: httpd
-- args: uuid text
-- scope: none
-- GET /v1/templates/{name}: the latest version of template $2 for any
-- enabled user $1, one JSON object {name, version, description, loaded_at,
-- sha256, template} where template is the compiled form.  No row when
-- there is no such template (or no such enabled user).
SELECT json_build_object('name', t.name, 'version', t.version,
       'description', coalesce(t.compiled->>'description', ''),
       'loaded_at', to_char(t.loaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       'sha256', encode(t.sha256, 'hex'), 'template', t.compiled)::text AS j
FROM templates t
WHERE t.name = $2
  AND EXISTS (SELECT 1 FROM users u WHERE u.id = $1 AND u.disabled_at IS NULL)
ORDER BY t.version DESC
LIMIT 1
