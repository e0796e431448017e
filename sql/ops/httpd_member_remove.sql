-- op: httpd_member_remove
-- roles: httpd
-- args: uuid uuid text?
-- scope: none
-- DELETE /v1/memberships/{id}: user $1 (an admin of its project) removes
-- membership $2; remote $3.  One row: the api_* envelope.
SELECT api_member_change($1, NULL, $2, NULL, NULL, $3)::text AS j
