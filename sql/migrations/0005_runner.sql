-- What a runner does to its run (DESIGN 3.3-3.5; the engine issue), and
-- what the supervisor needs to set a run up.  Every runner function takes
-- the run and the lease owner the runner acts for (the supervisor checks
-- both against the runner's channel) and changes nothing unless that lease
-- still holds: it locks the run row first, so a claim by another engine
-- (FOR UPDATE SKIP LOCKED) can never interleave with it, and a runner whose
-- lease expired finds out at its next write and stops.
-- Tested in tests/integration/test_engine_sql.sh and end to end.

-- run_lock(run, owner) -> the run, locked, when owner's lease holds on a
-- running run; NULL otherwise.
CREATE FUNCTION run_lock(p_run uuid, p_owner text) RETURNS runs
LANGUAGE plpgsql AS $$
DECLARE
	r runs;
BEGIN
	SELECT * INTO r FROM runs WHERE id = p_run FOR UPDATE;
	IF NOT FOUND OR r.status <> 'running' OR r.lease_owner IS DISTINCT FROM p_owner
	   OR r.lease_expires_at <= now() THEN
		RETURN NULL;
	END IF;
	RETURN r;
END
$$;

-- runner_load(run, owner) -> one row when the lease holds:
--  cancel: a cancel was requested; template: the compiled template of the
--  run's pinned version; params; steps: every attempt so far, oldest first
--  ([{step_id, attempt, status, session, exit_status}]); approvals: every
--  approval, oldest first ([{id, step_id, status}]).
CREATE FUNCTION runner_load(p_run uuid, p_owner text)
RETURNS TABLE (cancel boolean, template jsonb, params jsonb, steps jsonb, approvals jsonb)
LANGUAGE plpgsql AS $$
DECLARE
	r runs;
BEGIN
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL THEN
		RETURN;
	END IF;
	cancel := r.cancel_requested_at IS NOT NULL;
	SELECT t.compiled INTO template FROM templates t WHERE t.id = r.template_id;
	params := r.params;
	SELECT coalesce(jsonb_agg(jsonb_build_object('step_id', s.step_id, 'attempt', s.attempt,
	           'status', s.status, 'session', s.executor_session,
	           'exit_status', s.exit_status) ORDER BY s.started_at, s.attempt), '[]')
	INTO steps FROM run_steps s WHERE s.run_id = p_run;
	SELECT coalesce(jsonb_agg(jsonb_build_object('id', a.id, 'step_id', a.step_id,
	           'status', a.status) ORDER BY a.requested_at, a.id), '[]')
	INTO approvals FROM approvals a WHERE a.run_id = p_run;
	RETURN NEXT;
END
$$;

-- The event types a runner may append on its own: output, and artifacts
-- it refused.  The rest are
-- written with the state change they describe, by the functions below.
CREATE FUNCTION runner_event_type_ok(p_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_type IN ('step.output', 'artifact.rejected')
$$;

-- runner_event(run, owner, type, payload) -> seq, or NULL (lease lost).
CREATE FUNCTION runner_event(p_run uuid, p_owner text, p_type text, p_payload jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	IF NOT runner_event_type_ok(p_type) THEN
		RAISE EXCEPTION 'runner_event: % is not a runner event', p_type
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN append_run_event(p_run, p_type, p_payload);
END
$$;

-- phase_start(run, phase): the event phase.started, when no step of the
-- phase has an attempt yet (the caller holds the run's lock).
CREATE FUNCTION phase_start(p_run uuid, p_phase text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM run_steps WHERE run_id = p_run AND phase_name = p_phase) THEN
		PERFORM append_run_event(p_run, 'phase.started', jsonb_build_object('phase', p_phase));
	END IF;
END
$$;

-- step_begin(run, owner, phase, step, attempt, kind) -> 'ok' | 'lost' |
-- 'cancelled'.  A new attempt row (running) and its event step.started,
-- unless the lease is lost or a cancel was requested (no new work then).
CREATE FUNCTION step_begin(p_run uuid, p_owner text, p_phase text, p_step text,
                           p_attempt integer, p_kind text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r runs;
BEGIN
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL THEN
		RETURN 'lost';
	ELSIF r.cancel_requested_at IS NOT NULL THEN
		RETURN 'cancelled';
	END IF;
	PERFORM phase_start(p_run, p_phase);
	INSERT INTO run_steps (run_id, phase_name, step_id, attempt)
	VALUES (p_run, p_phase, p_step, p_attempt);
	PERFORM append_run_event(p_run, 'step.started', jsonb_build_object('phase', p_phase,
	    'step_id', p_step, 'attempt', p_attempt, 'kind', p_kind));
	RETURN 'ok';
END
$$;

-- step_end(run, owner, step, attempt, status, exit_status, error, extra)
-- -> done?  The attempt's end and its event step.finished ({step_id,
-- attempt, status, exit_status, error} plus what extra holds), CAS on the
-- attempt still running.  crashed is step_crash's; running is no end.
-- extra.phase_done (the phase's name, taken out of the payload): the step
-- was its phase's last, so phase.finished follows in the same transaction.
-- artifacts: [{key, kind, size, sha256 (hex), inline (base64) or none (the
-- file is in the store under its digest)}], committed here with the event
-- artifact.stored each, so that only an attempt that ended keeps any.
CREATE FUNCTION step_end(p_run uuid, p_owner text, p_step text, p_attempt integer,
                         p_status text, p_exit integer, p_error text, p_extra jsonb,
                         p_artifacts jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	a    jsonb;
	v_id uuid;
BEGIN
	IF p_status NOT IN ('succeeded', 'failed', 'skipped', 'cancelled', 'timed_out') THEN
		RAISE EXCEPTION 'step_end: % is not an end', p_status
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	UPDATE run_steps SET status = p_status, exit_status = p_exit, error = p_error,
	                     finished_at = greatest(now(), started_at)
	WHERE run_id = p_run AND step_id = p_step AND attempt = p_attempt AND status = 'running';
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM append_run_event(p_run, 'step.finished', (coalesce(p_extra, '{}') - 'phase_done') ||
	    jsonb_build_object('step_id', p_step, 'attempt', p_attempt, 'status', p_status,
	                       'exit_status', p_exit, 'error', p_error));
	-- the attempt's artifacts, committed with its end: inline bytes
	-- (base64) or a file the supervisor already put in the store
	IF jsonb_typeof(p_artifacts) = 'array' AND jsonb_array_length(p_artifacts) > 0 THEN
		IF p_status NOT IN ('succeeded', 'failed') THEN
			RAISE EXCEPTION 'step_end: artifacts only with an end that has results'
			    USING ERRCODE = 'invalid_parameter_value';
		END IF;
		FOR a IN SELECT * FROM jsonb_array_elements(p_artifacts) LOOP
			INSERT INTO artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline,
			                       store_path)
			VALUES (p_run, p_step, p_attempt, a->>'key', a->>'kind', (a->>'size')::bigint,
			        decode(a->>'sha256', 'hex'),
			        CASE WHEN a ? 'inline' THEN decode(a->>'inline', 'base64') END,
			        CASE WHEN a ? 'inline' THEN NULL
			             ELSE substr(a->>'sha256', 1, 2) || '/' || (a->>'sha256') END)
			RETURNING id INTO v_id;
			IF a ? 'inline' AND sha256(decode(a->>'inline', 'base64')) <> decode(a->>'sha256', 'hex') THEN
				RAISE EXCEPTION 'step_end: artifact % does not match its digest', a->>'key'
				    USING ERRCODE = 'data_exception';
			END IF;
			PERFORM append_run_event(p_run, 'artifact.stored', jsonb_build_object(
			    'artifact_id', v_id, 'step_id', p_step, 'attempt', p_attempt,
			    'key', a->>'key', 'kind', a->>'kind', 'size', (a->>'size')::bigint,
			    'sha256', a->>'sha256'));
		END LOOP;
	END IF;
	IF p_extra ? 'phase_done' THEN
		PERFORM append_run_event(p_run, 'phase.finished',
		    jsonb_build_object('phase', p_extra->>'phase_done'));
	END IF;
	RETURN true;
END
$$;

-- step_crash(run, owner, step, attempt) -> done?  An attempt a dead
-- runner left running: crashed, with the event step.crashed.  It is run
-- again without counting as a retry.
CREATE FUNCTION step_crash(p_run uuid, p_owner text, p_step text, p_attempt integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	UPDATE run_steps SET status = 'crashed', finished_at = greatest(now(), started_at)
	WHERE run_id = p_run AND step_id = p_step AND attempt = p_attempt AND status = 'running';
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM append_run_event(p_run, 'step.crashed',
	    jsonb_build_object('step_id', p_step, 'attempt', p_attempt));
	RETURN true;
END
$$;

-- checkpoint_wait(run, owner, step, attempt, message, expires_s) -> the
-- approval's id, or NULL (lease lost, or a cancel requested).  In one
-- transaction: the pending approval, its event approval.requested, and
-- the run parked (waiting_approval, lease handed back) so that claim_run
-- resumes it on a new runner once the approval is decided or expires.
-- The checkpoint's attempt stays running until that runner ends it.
CREATE FUNCTION checkpoint_wait(p_run uuid, p_owner text, p_step text, p_attempt integer,
                                p_message text, p_expires_s integer)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
	r   runs;
	v_a approvals;
BEGIN
	IF p_expires_s IS NULL OR p_expires_s < 1 THEN
		RAISE EXCEPTION 'checkpoint_wait: expiry must be positive'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL OR r.cancel_requested_at IS NOT NULL THEN
		RETURN NULL;
	END IF;
	INSERT INTO approvals (run_id, step_id, expires_at)
	VALUES (p_run, p_step, now() + make_interval(secs => p_expires_s))
	RETURNING * INTO v_a;
	PERFORM append_run_event(p_run, 'approval.requested', jsonb_build_object(
	    'approval_id', v_a.id, 'step_id', p_step, 'attempt', p_attempt,
	    'message', p_message, 'expires_at', api_ts(v_a.expires_at)));
	IF NOT wait_for_approval(p_run, p_owner) THEN
		RAISE EXCEPTION 'checkpoint_wait: the run could not be parked';
	END IF;
	PERFORM append_run_event(p_run, 'run.waiting_approval',
	    jsonb_build_object('approval_id', v_a.id, 'step_id', p_step));
	RETURN v_a.id;
END
$$;

-- run_finish(run, owner, status, error) -> the status the run ended with,
-- or NULL (lease lost).  succeeded or failed, with its event run.succeeded
-- / run.failed ({error}); but when a cancel was requested first the run
-- ends cancelled (run.cancelled {by: "runner"}) whatever was asked: a
-- cancel that committed first always wins.  'cancelled' is asked for when
-- the runner stopped for a cancel.
CREATE FUNCTION run_finish(p_run uuid, p_owner text, p_status text, p_error text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r runs;
BEGIN
	IF p_status NOT IN ('succeeded', 'failed', 'cancelled') THEN
		RAISE EXCEPTION 'run_finish: % is not an end', p_status
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL THEN
		RETURN NULL;
	END IF;
	IF r.cancel_requested_at IS NOT NULL OR p_status = 'cancelled' THEN
		IF r.cancel_requested_at IS NULL THEN
			RAISE EXCEPTION 'run_finish: no cancel was requested'
			    USING ERRCODE = 'invalid_parameter_value';
		END IF;
		PERFORM finalize_run(p_run, 'running', 'cancelled', NULL, 'run.cancelled',
		                     jsonb_build_object('by', 'runner'));
		RETURN 'cancelled';
	END IF;
	PERFORM finalize_run(p_run, 'running', p_status, p_error, 'run.' || p_status,
	    CASE WHEN p_error IS NULL THEN '{}'::jsonb
	         ELSE jsonb_build_object('error', p_error) END);
	RETURN p_status;
END
$$;

-- release_lease(run, owner) -> released?  The engine gives a running
-- run's lease up at once (its runner died or stopped for a drain) so that
-- the next claim takes it without waiting for the expiry.
CREATE FUNCTION release_lease(p_run uuid, p_owner text) RETURNS boolean
LANGUAGE sql AS $$
	UPDATE runs SET lease_expires_at = now() - interval '1 second'
	WHERE id = p_run AND lease_owner = p_owner AND status = 'running'
	RETURNING true
$$;

-- A decided (or expired) approval makes its run claimable again: wake the
-- engines as a submit does.
CREATE FUNCTION notify_approval_decided() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('run_queued', NEW.run_id::text);
	RETURN NULL;
END
$$;
CREATE TRIGGER approvals_decided_notify AFTER UPDATE OF status ON approvals
	FOR EACH ROW WHEN (OLD.status = 'pending' AND NEW.status <> 'pending')
	EXECUTE FUNCTION notify_approval_decided();

-- run_setup(run) -> what the supervisor needs to start a runner: the
-- workspace's repository connection (url and sealed token, or NULLs for a
-- template without one; repo_missing when it names a connection that no
-- longer exists), the access mode, the base commit recorded by an earlier
-- checkout, the status.  A workspace repo of the form ${params.NAME}
-- resolves through the manifest pinned at submit; any other value names a
-- connection of the run's project.  Only connections of the run's own
-- project are ever found.
CREATE FUNCTION run_setup(p_run uuid)
RETURNS TABLE (status text, url text, token_ciphertext bytea, token_nonce bytea,
               access text, base_commit text, repo_missing boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
	r      runs;
	v_ws   jsonb;
	v_repo text;
	v_id   uuid;
	c      repo_connections;
BEGIN
	SELECT * INTO r FROM runs WHERE id = p_run;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	SELECT t.compiled->'workspace' INTO v_ws FROM templates t WHERE t.id = r.template_id;
	status := r.status;
	access := coalesce(v_ws->>'access', 'readWrite');
	base_commit := r.base_commit;
	repo_missing := false;
	v_repo := coalesce(v_ws->>'repo', '');
	IF v_repo <> '' THEN
		IF v_repo ~ '^\$\{params\.[a-z_][a-z0-9_]*\}$' THEN
			v_id := (r.manifest->'repos'->substr(v_repo, 10, length(v_repo) - 10)->>'id')::uuid;
			SELECT * INTO c FROM repo_connections
			WHERE id = v_id AND project_id = r.project_id;
		ELSE
			SELECT * INTO c FROM repo_connections
			WHERE name = v_repo AND project_id = r.project_id;
		END IF;
		IF c.id IS NULL THEN
			repo_missing := true;
		ELSE
			url := c.url;
			token_ciphertext := c.token_ciphertext;
			token_nonce := c.token_nonce;
		END IF;
	END IF;
	RETURN NEXT;
END
$$;

-- run_checked_out(run, owner, base) -> recorded?  The base commit of the
-- run's workspace, once, with the event workspace.ready.
CREATE FUNCTION run_checked_out(p_run uuid, p_owner text, p_base text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	UPDATE runs SET base_commit = p_base WHERE id = p_run AND base_commit IS NULL;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM append_run_event(p_run, 'workspace.ready',
	    jsonb_build_object('base_commit', p_base));
	RETURN true;
END
$$;

-- step_skip(run, owner, phase, step, when, phase_done) -> done?  A step
-- whose "when" does not hold: one attempt row, skipped, and the event
-- step.skipped; with phase_done, phase.finished too.
CREATE FUNCTION step_skip(p_run uuid, p_owner text, p_phase text, p_step text, p_when text,
                          p_phase_done boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	IF EXISTS (SELECT 1 FROM run_steps WHERE run_id = p_run AND step_id = p_step) THEN
		RETURN false;
	END IF;
	PERFORM phase_start(p_run, p_phase);
	INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at)
	VALUES (p_run, p_phase, p_step, 1, 'skipped', now());
	PERFORM append_run_event(p_run, 'step.skipped', jsonb_build_object('phase', p_phase,
	    'step_id', p_step, 'when', p_when));
	IF p_phase_done THEN
		PERFORM append_run_event(p_run, 'phase.finished', jsonb_build_object('phase', p_phase));
	END IF;
	RETURN true;
END
$$;

-- claim_run_started(owner, lease_secs) -> (run_id, previous_status), or no
-- row: claim_run (0004) and the claim's event in the same transaction:
-- run.started {owner} for a queued run, run.resumed {owner, from} for a
-- run taken up again (from: "running", its lease had expired; or
-- "waiting_approval", its approval was decided).
CREATE FUNCTION claim_run_started(p_owner text, p_lease_secs integer)
RETURNS TABLE (run_id uuid, previous_status text) LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	SELECT * INTO c FROM claim_run(p_owner, p_lease_secs);
	IF NOT FOUND THEN
		RETURN;
	END IF;
	IF c.previous_status = 'queued' THEN
		PERFORM append_run_event(c.run_id, 'run.started', jsonb_build_object('owner', p_owner));
	ELSE
		PERFORM append_run_event(c.run_id, 'run.resumed',
		    jsonb_build_object('owner', p_owner, 'from', c.previous_status));
	END IF;
	run_id := c.run_id;
	previous_status := c.previous_status;
	RETURN NEXT;
END
$$;
