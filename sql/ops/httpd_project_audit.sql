-- op: httpd_project_audit
-- roles: httpd
-- args: uuid uuid int8 int4
-- scope: none
-- GET /v1/projects/{id}/audit?after=&limit=: project $2's audit rows with
-- id > $3, oldest first, at most $4 (1..1000), for an admin $1 of it (403
-- for other members, 404 for everyone else).  One row: the api_* envelope,
-- body {entries, next_after} (next_after null when this page is the last).
WITH a AS (
	SELECT (SELECT role FROM api_members WHERE user_id = $1 AND project_id = $2) AS role
), page AS (
	SELECT l.*, u.name AS actor_name FROM audit_log l LEFT JOIN users u ON u.id = l.actor_user_id
	WHERE l.project_id = $2 AND l.id > $3 ORDER BY l.id LIMIT $4 + 1
)
SELECT (CASE
    WHEN (SELECT role FROM a) IS NULL THEN api_err(404, 'not_found', 'no such project')
    WHEN (SELECT role FROM a) <> 'admin'
    THEN api_err(403, 'forbidden', 'only a project admin may read its audit log')
    ELSE api_ok(200, jsonb_build_object(
        'entries', coalesce((SELECT jsonb_agg(jsonb_build_object('id', p.id, 'at', api_ts(p.at),
            'actor', jsonb_build_object('kind', p.actor_kind, 'user_id', p.actor_user_id,
                                        'name', p.actor_name),
            'action', p.action, 'object_kind', p.object_kind, 'object_id', p.object_id,
            'remote_addr', p.remote_addr, 'detail', p.detail) ORDER BY p.id)
            FROM (SELECT * FROM page ORDER BY id LIMIT $4) p), '[]'),
        'next_after', CASE WHEN (SELECT count(*) FROM page) > $4
                           THEN (SELECT max(id) FROM (SELECT id FROM page ORDER BY id LIMIT $4) q)
                      END))
    END || jsonb_build_object('role', (SELECT role FROM a)))::text AS j
