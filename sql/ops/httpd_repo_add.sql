-- op: httpd_repo_add
-- roles: httpd
-- args: uuid uuid text text bytea? bytea? text? text? text?
-- scope: none
-- POST /v1/projects/{id}/repos: api_repo_add(user $1, project $2, name $3,
-- url $4, sealed token $5 with nonce $6 (both NULL for none), remote $7,
-- forge $8 (NULL: from the URL's host), API URL $9 (NULL: the forge's)).
-- One row: the api_* envelope.
SELECT api_repo_add($1, $2, $3, $4, $5, $6, $7, $8, $9)::text AS j
