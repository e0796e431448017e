-- op: httpd_run_budget
-- roles: httpd
-- args: uuid uuid text? int8 text?
-- scope: none
-- POST /v1/runs/{id}/budget: api_set_budget(user $1, run $2, phase $3,
-- micro-dollars $4, remote $5), one row: the api_* envelope.
SELECT api_set_budget($1, $2, $3, $4, $5)::text AS j
