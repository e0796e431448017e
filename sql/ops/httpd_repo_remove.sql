-- op: httpd_repo_remove
-- roles: httpd
-- args: uuid uuid text?
-- scope: none
-- DELETE /v1/repos/{id}: api_repo_remove(user $1, repo $2, remote $3).
-- One row: the api_* envelope.
SELECT api_repo_remove($1, $2, $3)::text AS j
