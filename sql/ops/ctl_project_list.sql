-- op: ctl_project_list
-- roles: ctl
-- args:
-- scope: none
-- agrippactl project list: every project, by name.
SELECT p.name,
       (SELECT count(*) FROM memberships m WHERE m.project_id = p.id)::text AS members,
       to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created
FROM projects p
ORDER BY p.name
LIMIT 10000
