-- op: httpd_run_cancel
-- roles: httpd
-- args: uuid uuid text?
-- scope: none
-- POST /v1/runs/{id}/cancel: api_cancel_run(user $1, run $2, remote $3),
-- one row: the api_* envelope.
SELECT api_cancel_run($1, $2, $3)::text AS j
