-- op: proxy_usage
-- roles: proxy
-- args: uuid text int4 text text int8 int8 int8 int8 int8
-- One model call's usage and cost, for the run whose channel it came on.
SELECT proxy_usage($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
