-- op: httpd_run_get
-- roles: httpd
-- args: uuid uuid
-- scope: none
-- GET /v1/runs/{id}: run $2 as user $1 may see it, one row: the api_*
-- envelope, 200 with the run and the user's "role" in its project, or 404
-- when the run does not exist or the user is not an enabled member of its
-- project (the two look the same).
SELECT coalesce(
    (SELECT api_ok(200, run_json(r), m.role)
     FROM runs r JOIN api_members m ON m.project_id = r.project_id AND m.user_id = $1
     WHERE r.id = $2),
    api_err(404, 'not_found', 'no such run'))::text AS j
