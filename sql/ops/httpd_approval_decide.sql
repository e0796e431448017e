-- op: httpd_approval_decide
-- roles: httpd
-- args: uuid uuid text text? text?
-- scope: none
-- POST /v1/approvals/{id}/decide: api_decide_approval(user $1, approval
-- $2, decision $3, comment $4, remote $5), one row: the api_* envelope.
SELECT api_decide_approval($1, $2, $3, $4, $5)::text AS j
