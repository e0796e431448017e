-- op: httpd_run_list
-- roles: httpd
-- args: uuid uuid text? text? uuid? int4
-- scope: none
-- GET /v1/projects/{id}/runs: the runs of project $2 for user $1, newest
-- first, at most $6 (1..200), optionally only status $3 and template $4,
-- after cursor $5 (the id of the last run of the previous page, which must
-- be a run of this project).  One row: the api_* envelope, body {runs,
-- next_cursor} where next_cursor is null on the last page.
WITH a AS (
	SELECT (SELECT role FROM api_members WHERE user_id = $1 AND project_id = $2) AS role
), c AS (
	SELECT created_at, id FROM runs WHERE id = $5 AND project_id = $2
), page AS (
	SELECT r FROM runs r, a
	WHERE a.role IS NOT NULL AND r.project_id = $2
	  AND ($3 IS NULL OR r.status = $3) AND ($4 IS NULL OR r.template_name = $4)
	  AND ($5 IS NULL OR (r.created_at, r.id) < (SELECT created_at, id FROM c))
	ORDER BY r.created_at DESC, r.id DESC
	LIMIT $6 + 1
), numbered AS (
	SELECT page.r AS p,
	       row_number() OVER (ORDER BY (page.r).created_at DESC, (page.r).id DESC) AS n
	FROM page
)
SELECT (CASE
    WHEN (SELECT role FROM a) IS NULL THEN api_err(404, 'not_found', 'no such project')
    WHEN $5 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM c)
    THEN api_err(400, 'invalid_cursor', 'the cursor names no run of this project')
    ELSE api_ok(200, jsonb_build_object(
        'runs', coalesce((SELECT jsonb_agg(run_json(n.p) - 'manifest' ORDER BY n.n)
                          FROM numbered n WHERE n.n <= $6), '[]'),
        'next_cursor', (SELECT (n.p).id FROM numbered n WHERE n.n = $6
                        AND EXISTS (SELECT 1 FROM numbered m WHERE m.n = $6 + 1))))
    END || jsonb_build_object('role', (SELECT role FROM a)))::text AS j
