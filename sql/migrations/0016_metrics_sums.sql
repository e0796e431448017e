-- GET /metrics summed every finished step attempt (run_steps) and every
-- model call (token_usage) at each scrape: tables that only grow, by tens
-- of rows per agent run, read whole every 15 seconds for as long as the
-- daemon runs.  The sums are kept instead:
--  - a trigger writes one row into a deltas table for each attempt that
--    finishes and each model call recorded: an insert of its own, so that
--    no two transactions wait for one counter's row (or deadlock on two);
--  - metrics_compact(), called by the engines' sweep (engine.sweep
--    seconds), moves the deltas into the sums in one statement; one
--    compaction at a time (a transaction-level advisory lock: another
--    engine's sweep meanwhile skips it rather than wait), so none counts a
--    delta twice or loses one;
--  - the scrape adds the sums and the deltas not yet moved, both from one
--    snapshot: a compaction that commits meanwhile changes neither.
-- The sums are counters: a run deleted later does not lower them.  They
-- start from what the tables hold when this migration runs.

CREATE TABLE metrics_step_sums (
	status  text NOT NULL,
	k       integer NOT NULL CHECK (k BETWEEN 0 AND 12),
	n       bigint NOT NULL CHECK (n >= 0),
	seconds float8 NOT NULL,
	PRIMARY KEY (status, k)
);
CREATE TABLE metrics_step_deltas (
	status  text NOT NULL,
	k       integer NOT NULL CHECK (k BETWEEN 0 AND 12),
	seconds float8 NOT NULL
);
CREATE TABLE metrics_model_sums (
	provider           text NOT NULL,
	model              text NOT NULL,
	calls              bigint NOT NULL,
	input_tokens       bigint NOT NULL,
	output_tokens      bigint NOT NULL,
	cache_read_tokens  bigint NOT NULL,
	cache_write_tokens bigint NOT NULL,
	cost_usd_micros    bigint NOT NULL,
	PRIMARY KEY (provider, model)
);
CREATE TABLE metrics_model_deltas (
	provider           text NOT NULL,
	model              text NOT NULL,
	input_tokens       bigint NOT NULL,
	output_tokens      bigint NOT NULL,
	cache_read_tokens  bigint NOT NULL,
	cache_write_tokens bigint NOT NULL,
	cost_usd_micros    bigint NOT NULL
);

-- The histogram bucket of a duration d in seconds: the index of the least
-- of the bounds 1 5 10 30 60 120 300 600 1800 3600 7200 14400 that is >= d
-- (le), 12 for a longer one: 12 less the bounds >= d, which width_bucket
-- counts as the negated bounds <= -d.
CREATE FUNCTION metrics_step_bucket(d float8) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
	SELECT 12 - width_bucket(-d, '{-14400,-7200,-3600,-1800,-600,-300,-120,-60,-30,-10,-5,-1}'::float8[])
$$;

-- An attempt finishes when its finished_at is set (run_steps_finished_iff_done):
-- by an UPDATE from running, or inserted finished (a skipped step).
CREATE FUNCTION metrics_step_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	d float8;
BEGIN
	IF NEW.finished_at IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.finished_at IS NULL) THEN
		d := date_part('epoch', NEW.finished_at - NEW.started_at);
		INSERT INTO metrics_step_deltas (status, k, seconds)
		VALUES (NEW.status, metrics_step_bucket(d), d);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER run_steps_metrics AFTER INSERT OR UPDATE OF finished_at ON run_steps
	FOR EACH ROW EXECUTE FUNCTION metrics_step_finished();

CREATE FUNCTION metrics_model_called() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO metrics_model_deltas (provider, model, input_tokens, output_tokens,
	                                  cache_read_tokens, cache_write_tokens, cost_usd_micros)
	VALUES (NEW.provider, NEW.model, NEW.input_tokens, NEW.output_tokens,
	        NEW.cache_read_tokens, NEW.cache_write_tokens, NEW.cost_usd_micros);
	RETURN NULL;
END
$$;
CREATE TRIGGER token_usage_metrics AFTER INSERT ON token_usage
	FOR EACH ROW EXECUTE FUNCTION metrics_model_called();

-- The deltas into the sums; returns how many deltas it moved (0 when
-- another compaction is at work: 7242362 is its advisory lock's key, beside
-- the migrations' 7242361).
CREATE FUNCTION metrics_compact() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	s bigint;
	m bigint;
BEGIN
	IF NOT pg_try_advisory_xact_lock(7242362) THEN
		RETURN 0;
	END IF;
	WITH d AS (DELETE FROM metrics_step_deltas RETURNING status, k, seconds),
	     g AS (SELECT status, k, count(*) AS n, sum(seconds) AS seconds FROM d GROUP BY 1, 2),
	     u AS (INSERT INTO metrics_step_sums AS t (status, k, n, seconds)
	           SELECT status, k, n, seconds FROM g ORDER BY status, k
	           ON CONFLICT (status, k) DO UPDATE
	               SET n = t.n + EXCLUDED.n, seconds = t.seconds + EXCLUDED.seconds
	           RETURNING 1)
	SELECT coalesce(sum(n), 0) INTO s FROM g;
	WITH d AS (DELETE FROM metrics_model_deltas
	           RETURNING provider, model, input_tokens, output_tokens, cache_read_tokens,
	                     cache_write_tokens, cost_usd_micros),
	     g AS (SELECT provider, model, count(*) AS calls, sum(input_tokens) AS i,
	                  sum(output_tokens) AS o, sum(cache_read_tokens) AS cr,
	                  sum(cache_write_tokens) AS cw, sum(cost_usd_micros) AS c
	           FROM d GROUP BY 1, 2),
	     u AS (INSERT INTO metrics_model_sums AS t (provider, model, calls, input_tokens,
	               output_tokens, cache_read_tokens, cache_write_tokens, cost_usd_micros)
	           SELECT provider, model, calls, i, o, cr, cw, c FROM g ORDER BY provider, model
	           ON CONFLICT (provider, model) DO UPDATE
	               SET calls = t.calls + EXCLUDED.calls,
	                   input_tokens = t.input_tokens + EXCLUDED.input_tokens,
	                   output_tokens = t.output_tokens + EXCLUDED.output_tokens,
	                   cache_read_tokens = t.cache_read_tokens + EXCLUDED.cache_read_tokens,
	                   cache_write_tokens = t.cache_write_tokens + EXCLUDED.cache_write_tokens,
	                   cost_usd_micros = t.cost_usd_micros + EXCLUDED.cost_usd_micros
	           RETURNING 1)
	SELECT coalesce(sum(calls), 0) INTO m FROM g;
	RETURN s + m;
END
$$;

-- What the tables hold now (the triggers, made above, hold their locks
-- until this commits: nothing is written between the two).
INSERT INTO metrics_step_sums (status, k, n, seconds)
SELECT s.status, metrics_step_bucket(x.d), count(*), sum(x.d)
FROM run_steps s, LATERAL (SELECT date_part('epoch', s.finished_at - s.started_at) AS d) x
WHERE s.finished_at IS NOT NULL
GROUP BY 1, 2;
INSERT INTO metrics_model_sums (provider, model, calls, input_tokens, output_tokens,
                                cache_read_tokens, cache_write_tokens, cost_usd_micros)
SELECT provider, model, count(*), sum(input_tokens), sum(output_tokens),
       sum(cache_read_tokens), sum(cache_write_tokens), sum(cost_usd_micros)
FROM token_usage
GROUP BY 1, 2;
