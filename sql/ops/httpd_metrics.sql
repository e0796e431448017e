-- op: httpd_metrics
-- roles: httpd
-- args:
-- scope: none
-- GET /metrics (on metrics_listen only): counts and sums, never a user, a
-- project or a run.  Rows of nine text columns, none null:
--   kind, label1, label2, v1 .. v6
--   runs      template, status, runs
--   queue     '', '', queued runs, age of the oldest in seconds
--   step      status, bucket, attempts: finished step attempts whose duration
--             falls in that bucket of 1 5 10 30 60 120 300 600 1800 3600
--             7200 14400 seconds (le; bucket 12: longer), not cumulated
--   step_sum  status, '', the attempts' seconds, attempts
--   model     provider, model, calls, input, output, cache read and cache
--             write tokens, cost in micro-dollars
--   budget    '', '', budget.exceeded events
-- The queue uses runs_queue_idx and the budget stops their partial index
-- (0014_metrics.sql); the rest are aggregates over runs, run_steps and
-- token_usage.
WITH b(neg) AS (SELECT ARRAY[-14400, -7200, -3600, -1800, -600, -300, -120, -60, -30, -10, -5, -1]::float8[]),
steps AS (
	SELECT s.status,
	       extract(epoch FROM s.finished_at - s.started_at)::float8 AS d
	FROM run_steps s
	WHERE s.finished_at IS NOT NULL
)
SELECT 'runs', r.template_name, r.status, count(*)::text, '0', '0', '0', '0', '0'
FROM runs r
GROUP BY r.template_name, r.status
UNION ALL
SELECT 'queue', '', '', count(*)::text,
       coalesce(extract(epoch FROM now() - min(q.created_at)), 0)::numeric(20, 3)::text,
       '0', '0', '0', '0'
FROM runs q
WHERE q.status = 'queued'
UNION ALL
SELECT 'step', st.status, (12 - width_bucket(-st.d, b.neg))::text, count(*)::text,
       '0', '0', '0', '0', '0'
FROM steps st, b
GROUP BY st.status, 12 - width_bucket(-st.d, b.neg)
UNION ALL
SELECT 'step_sum', st.status, '', sum(st.d)::numeric(24, 3)::text, count(*)::text,
       '0', '0', '0', '0'
FROM steps st
GROUP BY st.status
UNION ALL
SELECT 'model', u.provider, u.model, count(*)::text, sum(u.input_tokens)::text,
       sum(u.output_tokens)::text, sum(u.cache_read_tokens)::text,
       sum(u.cache_write_tokens)::text, sum(u.cost_usd_micros)::text
FROM token_usage u
GROUP BY u.provider, u.model
UNION ALL
SELECT 'budget', '', '', count(*)::text, '0', '0', '0', '0', '0'
FROM run_events e
WHERE e.type = 'budget.exceeded'
