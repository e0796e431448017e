-- op: ctl_grant_list
-- roles: ctl
-- args: text
-- scope: none
-- agrippactl grant list PROJECT: kind (skill or mcp, as agrippactl spells
-- it), name, and the latest version of the resource (NULL when it is gone).
-- No row when there is no such project; one row with a NULL kind when it
-- has no grant.
SELECT CASE g.resource_kind WHEN 'mcp_server' THEN 'mcp' ELSE g.resource_kind END AS kind,
       g.resource_name AS name,
       CASE g.resource_kind
            WHEN 'skill' THEN (SELECT max(version) FROM skills s
                               WHERE s.name = g.resource_name)::text
            WHEN 'mcp_server' THEN (SELECT max(version) FROM mcp_servers m
                                    WHERE m.name = g.resource_name)::text
       END AS latest,
       to_char(g.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created
FROM projects p LEFT JOIN grants g ON g.project_id = p.id
WHERE p.name = $1
ORDER BY g.resource_kind, g.resource_name
LIMIT 10000
