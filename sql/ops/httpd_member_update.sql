-- op: httpd_member_update
-- roles: httpd
-- args: uuid uuid text text?
-- scope: none
-- PATCH /v1/memberships/{id}: user $1 (an admin of its project) gives
-- membership $2 role $3; remote $4.  One row: the api_* envelope.
SELECT api_member_change($1, NULL, $2, NULL, $3, $4)::text AS j
