-- op: httpd_member_add
-- roles: httpd
-- args: uuid uuid text text text?
-- scope: none
-- POST /v1/projects/{id}/members: user $1 (a project admin) adds user
-- named $3 to project $2 with role $4; remote $5.  One row: the api_*
-- envelope of api_member_change.
SELECT api_member_change($1, $2, NULL, $3, $4, $5)::text AS j
