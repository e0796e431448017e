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
WITH sb AS (
	-- one pass over the finished attempts: per status and bucket, how many
	-- and their seconds (date_part is float8; extract's numeric is slower,
	-- and a binary search in width_bucket cheaper than a CASE of 12)
	SELECT s.status,
	       -- the bucket of the least bound >= d (le): 12 less the bounds >= d,
	       -- which width_bucket counts as the negated bounds <= -d
	       12 - width_bucket(-x.d, '{-14400,-7200,-3600,-1800,-600,-300,-120,-60,-30,-10,-5,-1}'::float8[]) AS k,
	       count(*) AS n, sum(x.d) AS total
	FROM run_steps s,
	     LATERAL (SELECT date_part('epoch', s.finished_at - s.started_at) AS d) x
	WHERE s.finished_at IS NOT NULL
	GROUP BY 1, 2
)
SELECT 'runs', r.template_name, r.status, count(*)::text, '0', '0', '0', '0', '0'
FROM runs r
GROUP BY r.template_name, r.status
UNION ALL
SELECT 'queue', '', '', count(*)::text,
       greatest(coalesce(extract(epoch FROM now() - min(q.created_at)), 0), 0)::numeric(20, 3)::text,
       '0', '0', '0', '0'
FROM runs q
WHERE q.status = 'queued'
UNION ALL
SELECT 'step', sb.status, sb.k::text, sb.n::text, '0', '0', '0', '0', '0'
FROM sb
UNION ALL
SELECT 'step_sum', sb.status, '', sum(sb.total)::numeric(24, 3)::text, sum(sb.n)::text,
       '0', '0', '0', '0'
FROM sb
GROUP BY sb.status
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
