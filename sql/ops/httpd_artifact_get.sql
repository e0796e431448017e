-- op: httpd_artifact_get
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/artifacts/{id}: artifact $2 for a member $1 of its run's
-- project.  One row: the api_* envelope, 200 with body {id, run_id, key,
-- kind, size, sha256} and either "inline" (the bytes, base64) or "stored"
-- true (the bytes are in the supervisor's content-addressed store), or 404.
SELECT coalesce(
    (SELECT api_ok(200, jsonb_build_object('id', x.id, 'run_id', x.run_id, 'key', x.key,
         'kind', x.kind, 'size', x.size, 'sha256', encode(x.sha256, 'hex'),
         'stored', x.store_path IS NOT NULL)
         || CASE WHEN x.inline IS NOT NULL
                 THEN jsonb_build_object('inline', translate(encode(x.inline, 'base64'), E'\n', ''))
                 ELSE '{}' END)
        || jsonb_build_object('role', m.role)
     FROM artifacts x JOIN runs r ON r.id = x.run_id
     JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
     WHERE x.id = $2),
    api_err(404, 'not_found', 'no such artifact'))::text AS j
