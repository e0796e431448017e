-- op: httpd_run_submit
-- roles: httpd
-- args: uuid uuid text jsonb text? text?
-- scope: none
-- POST /v1/projects/{id}/runs: api_submit_run(user $1, project $2,
-- template $3, params $4, Idempotency-Key $5, remote address $6), one row:
-- the api_* envelope {status, body | error} (sql/migrations/0003_api.sql).
SELECT api_submit_run($1, $2, $3, $4, $5, $6)::text AS j
