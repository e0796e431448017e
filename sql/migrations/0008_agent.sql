-- Agent steps (issue: the model proxy and the tool-use loop).
--
-- An agent step's conversation is kept here, one row per message, written
-- after every model response and every round of tool results, so that a
-- runner killed mid-step resumes the same conversation (DESIGN 3.4: the
-- executor session) instead of starting over and paying again for the
-- turns it already had.  The session's id is the attempt's
-- run_steps.executor_session; a crashed attempt's successor adopts it.

CREATE TABLE agent_messages (
	run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	session    text NOT NULL CHECK (session ~ '^[a-z0-9_-]{1,64}\.[0-9]{1,9}$'),
	seq        integer NOT NULL CHECK (seq >= 0),
	message    jsonb NOT NULL CHECK (jsonb_typeof(message) = 'object'
	                                 AND coalesce(message->>'role' IN ('user', 'assistant'),
	                                              false)),
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, session, seq)
);

-- What a runner may append on its own, now with the agent loop's events
-- and the in-step budget stop.
CREATE OR REPLACE FUNCTION runner_event_type_ok(p_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_type IN ('step.output', 'artifact.rejected', 'agent.message', 'agent.tool_call',
	                  'agent.tool_result', 'agent.usage', 'budget.exceeded')
$$;

-- Whether user message p_new is p_old with more tool results after the
-- ones it had: a round of tool results is stored after each result.
CREATE FUNCTION agent_results_extend(p_old jsonb, p_new jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT coalesce(p_old->>'role' = 'user' AND p_new->>'role' = 'user'
	    AND jsonb_typeof(p_old->'content') = 'array' AND jsonb_typeof(p_new->'content') = 'array'
	    AND jsonb_array_length(p_new->'content') > jsonb_array_length(p_old->'content')
	    AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_new->'content') e
	                    WHERE e->>'type' IS DISTINCT FROM 'tool_result')
	    AND p_old->'content' = (SELECT jsonb_agg(x.e ORDER BY x.i)
	                            FROM jsonb_array_elements(p_new->'content') WITH ORDINALITY x(e, i)
	                            WHERE x.i <= jsonb_array_length(p_old->'content')), false)
$$;

-- agent_turn(run, owner, step, attempt, session, seq, message, events) ->
-- true, or false when the lease is lost (nothing written).  One step of
-- the conversation, in one transaction: the message is stored as number
-- seq of the session, the running attempt is marked as using the session,
-- and the events (a JSON array of {type, payload}, runner event types
-- only) are appended in order.  A seq already stored is an error (the
-- runner never writes a message twice), except a round of tool results
-- growing by the next result (agent_results_extend).
--
-- Its commit does not wait for the disk (synchronous_commit off, for this
-- transaction only): a turn is stored two or three times a second per
-- running agent, and the write-ahead log is one sequence, so whatever
-- survives a crash of the database is a prefix of what was written, and
-- the next synchronous commit (the proxy's usage of the next call, any
-- step change) makes every earlier turn durable.  A crash of the database
-- host can lose at most the last few hundred milliseconds of turns; the
-- runner, whose operations then fail, ends, and its successor asks the
-- model again for those turns.  The spend of every call is recorded
-- synchronously (proxy_usage), so nothing paid is ever lost.
CREATE FUNCTION agent_turn(p_run uuid, p_owner text, p_step text, p_attempt integer,
                           p_session text, p_seq integer, p_message jsonb, p_events jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	e jsonb;
BEGIN
	IF coalesce(jsonb_typeof(p_events), '') <> 'array' THEN
		RAISE EXCEPTION 'agent_turn: events must be an array'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_session !~ '^[a-z0-9_-]{1,64}\.[0-9]{1,9}$' THEN
		RAISE EXCEPTION 'agent_turn: % is not a session id', p_session
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	SET LOCAL synchronous_commit TO off;
	UPDATE run_steps SET executor_session = p_session
	WHERE run_id = p_run AND step_id = p_step AND attempt = p_attempt AND status = 'running'
	  AND executor_session IS DISTINCT FROM p_session;
	IF p_message IS NOT NULL AND EXISTS (SELECT 1 FROM agent_messages m
	       WHERE m.run_id = p_run AND m.session = p_session AND m.seq = p_seq
	         AND agent_results_extend(m.message, p_message)) THEN
		UPDATE agent_messages SET message = p_message
		WHERE run_id = p_run AND session = p_session AND seq = p_seq;
	ELSIF p_message IS NOT NULL THEN
		INSERT INTO agent_messages (run_id, session, seq, message)
		VALUES (p_run, p_session, p_seq, p_message);
	END IF;
	FOR e IN SELECT value FROM jsonb_array_elements(p_events) LOOP
		IF NOT coalesce(runner_event_type_ok(e->>'type')
		                AND jsonb_typeof(e->'payload') = 'object', false) THEN
			RAISE EXCEPTION 'agent_turn: % is not a runner event', e->>'type'
			    USING ERRCODE = 'invalid_parameter_value';
		END IF;
		PERFORM append_run_event(p_run, e->>'type', e->'payload');
	END LOOP;
	RETURN true;
END
$$;

-- agent_session(run, owner, session) -> the session's messages in order
-- (seq, message), when the lease holds; none otherwise.
CREATE FUNCTION agent_session(p_run uuid, p_owner text, p_session text)
RETURNS TABLE (seq integer, message jsonb) LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY SELECT m.seq, m.message FROM agent_messages m
	    WHERE m.run_id = p_run AND m.session = p_session ORDER BY m.seq;
END
$$;

-- proxy_usage(run, step, attempt, provider, model, input, output,
-- cache_read, cache_write, cost) -> the usage row's id.  The proxy records
-- every model call it made for a run's channel, whatever became of the
-- run's lease: the call was paid for.  A run that already finished refuses
-- it (token_usage_run_open), so its totals stay what finalize_run summed.
CREATE FUNCTION proxy_usage(p_run uuid, p_step text, p_attempt integer, p_provider text,
                            p_model text, p_input bigint, p_output bigint, p_cache_read bigint,
                            p_cache_write bigint, p_cost bigint)
RETURNS uuid LANGUAGE sql AS $$
	INSERT INTO token_usage (run_id, step_id, attempt, provider, model, input_tokens,
	                         output_tokens, cache_read_tokens, cache_write_tokens,
	                         cost_usd_micros)
	VALUES (p_run, p_step, p_attempt, p_provider, p_model, p_input, p_output, p_cache_read,
	        p_cache_write, p_cost)
	RETURNING id
$$;

-- runner_skills(run, owner, names) -> (name, version, body) of the skills
-- named (a JSON array of names) that the run's pinned manifest holds, in the order named; none
-- when the lease is lost.  A skill is resolved only through the manifest
-- (DESIGN 3.7), never from the registry by name.
CREATE FUNCTION runner_skills(p_run uuid, p_owner text, p_names jsonb)
RETURNS TABLE (name text, version integer, body text) LANGUAGE plpgsql AS $$
DECLARE
	r runs;
BEGIN
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY SELECT s.name, s.version, s.body
	    FROM jsonb_array_elements_text(p_names) WITH ORDINALITY AS n(name, ord)
	    JOIN jsonb_array_elements(r.manifest->'skills') m ON m->>'name' = n.name
	    JOIN skills s ON s.id = (m->>'id')::uuid
	    ORDER BY n.ord;
END
$$;
