-- op: health
-- roles: httpd engine
-- args:
-- scope: none
SELECT 1
