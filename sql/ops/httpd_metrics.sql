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
-- (0014_metrics.sql); the steps and the models are the sums the triggers
-- of 0016_metrics_sums.sql keep, with the deltas not yet compacted into
-- them (both read from this statement's one snapshot); the runs are an
-- aggregate over runs.
WITH sb AS (
	SELECT status, k, sum(n) AS n, sum(total) AS total
	FROM (SELECT status, k, n, seconds AS total FROM metrics_step_sums
	      UNION ALL
	      SELECT status, k, 1, seconds FROM metrics_step_deltas) a
	GROUP BY 1, 2
),
mb AS (
	SELECT provider, model, sum(calls) AS calls, sum(i) AS i, sum(o) AS o, sum(cr) AS cr,
	       sum(cw) AS cw, sum(c) AS c
	FROM (SELECT provider, model, calls, input_tokens AS i, output_tokens AS o,
	             cache_read_tokens AS cr, cache_write_tokens AS cw, cost_usd_micros AS c
	      FROM metrics_model_sums
	      UNION ALL
	      SELECT provider, model, 1, input_tokens, output_tokens, cache_read_tokens,
	             cache_write_tokens, cost_usd_micros
	      FROM metrics_model_deltas) a
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
SELECT 'model', mb.provider, mb.model, mb.calls::text, mb.i::text, mb.o::text, mb.cr::text,
       mb.cw::text, mb.c::text
FROM mb
UNION ALL
SELECT 'budget', '', '', count(*)::text, '0', '0', '0', '0', '0'
FROM run_events e
WHERE e.type = 'budget.exceeded'
