-- op: httpd_run_get
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/runs/{id}: run $2 as user $1 may see it, one row: the api_*
-- envelope, 200 with the run and the user's "role" in its project, or 404
-- when the run does not exist or the user is not an enabled member of its
-- project (the two look the same).
SELECT coalesce(
    (SELECT api_ok(200, run_json(r), api_role($1, r.project_id))
     FROM runs r WHERE r.id = $2 AND api_role($1, r.project_id) IS NOT NULL),
    api_err(404, 'not_found', 'no such run'))::text AS j
