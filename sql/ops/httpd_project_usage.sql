-- op: httpd_project_usage
-- roles: httpd
-- args: uuid uuid text
-- scope: none
-- GET /v1/projects/{id}/usage?month=YYYY-MM: project $2's spend in month
-- $3 (UTC) for a member $1: the quota, the recorded cost and tokens of
-- model calls made in that month, what is reserved and not yet settled,
-- and the runs created in it by status; the cost per day of the month
-- (UTC, days with calls only) and its five costliest runs, for the
-- dashboard's chart.  One row: the api_* envelope, or 404.  httpd checks the month's form; here it is only cast.
WITH m AS (
	SELECT to_date($3, 'YYYY-MM') AS first,
	       to_date($3, 'YYYY-MM')::timestamp AT TIME ZONE 'UTC' AS t0,
	       (to_date($3, 'YYYY-MM') + interval '1 month') AT TIME ZONE 'UTC' AS t1
), u AS (
	SELECT coalesce(sum(t.cost_usd_micros), 0) AS cost,
	       coalesce(sum(t.input_tokens), 0) AS tin, coalesce(sum(t.output_tokens), 0) AS tout,
	       count(*) AS calls
	FROM token_usage t JOIN runs r ON r.id = t.run_id, m
	WHERE r.project_id = $2 AND t.created_at >= m.t0 AND t.created_at < m.t1
)
SELECT (CASE WHEN a.role IS NULL THEN api_err(404, 'not_found', 'no such project')
    ELSE api_ok(200, jsonb_build_object('month', $3,
        'quota_usd_micros', (SELECT monthly_quota_usd_micros FROM projects WHERE id = $2),
        'spent_usd_micros', u.cost, 'tokens_in', u.tin, 'tokens_out', u.tout,
        'model_calls', u.calls,
        'reserved_usd_micros', (SELECT coalesce(sum(b.amount_usd_micros), 0)
            FROM budget_reservations b WHERE b.project_id = $2 AND b.month = m.first
            AND b.settled_at IS NULL),
        'runs', (SELECT coalesce(jsonb_object_agg(s.status, s.n), '{}')
            FROM (SELECT r.status, count(*) AS n FROM runs r
                  WHERE r.project_id = $2 AND r.created_at >= m.t0 AND r.created_at < m.t1 GROUP BY r.status) s),
        'days', (SELECT coalesce(jsonb_agg(jsonb_build_object('day', d.day, 'usd_micros', d.cost)
                                           ORDER BY d.day), '[]')
            FROM (SELECT to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                         sum(t.cost_usd_micros) AS cost
                  FROM token_usage t JOIN runs r ON r.id = t.run_id
                  WHERE r.project_id = $2 AND t.created_at >= m.t0 AND t.created_at < m.t1
                  GROUP BY 1) d),
        'costliest', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id,
                                      'template', c.template_name, 'status', c.status,
                                      'spent_usd_micros', c.spent_usd_micros)
                                      ORDER BY c.spent_usd_micros DESC, c.id), '[]')
            FROM (SELECT r.id, r.template_name, r.status, r.spent_usd_micros FROM runs r
                  WHERE r.project_id = $2 AND r.created_at >= m.t0 AND r.created_at < m.t1
                    AND r.spent_usd_micros > 0
                  ORDER BY r.spent_usd_micros DESC, r.id LIMIT 5) c)))
    END || jsonb_build_object('role', a.role))::text AS j
FROM m, u, (SELECT (SELECT role FROM api_members WHERE user_id = $1 AND project_id = $2) AS role) a
