-- Budgets in the runner (DESIGN 3.6; the engine issue): before an agent
-- step attempt (the one kind of step that spends) the runner reserves what
-- it may spend, against the run's and the phase's budgets and atomically
-- against the project's monthly quota; the reservation is settled when the
-- attempt ends, whatever ends it.  A step that cannot have its reservation
-- parks the run like a checkpoint does, on an approval of kind 'budget':
-- raising the budget over the API (or approving the approval, say once the
-- quota was raised) resumes it; a rejection or an expiry fails the step.
-- Tested in tests/integration/test_engine_sql.sh and test_budget.sh.

-- What an approval waits for: a checkpoint step, or more money for a step.
ALTER TABLE approvals ADD COLUMN kind text NOT NULL DEFAULT 'checkpoint'
	CHECK (kind IN ('checkpoint', 'budget'));

-- A run's own phase budgets, set over the API: {phase: micro-dollars},
-- each in place of the template's budget for that phase.
ALTER TABLE runs ADD COLUMN phase_budgets jsonb NOT NULL DEFAULT '{}'
	CHECK (jsonb_typeof(phase_budgets) = 'object');

CREATE OR REPLACE FUNCTION approval_json(a approvals) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object('id', a.id, 'run_id', a.run_id, 'step_id', a.step_id,
	    'kind', a.kind, 'status', a.status, 'requested_at', api_ts(a.requested_at),
	    'expires_at', api_ts(a.expires_at), 'decided_by', a.decided_by,
	    'decided_at', api_ts(a.decided_at), 'comment', a.comment)
$$;

CREATE OR REPLACE FUNCTION run_json(r runs) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
	    'id', r.id, 'project_id', r.project_id,
	    'template', jsonb_build_object('name', r.template_name, 'version', r.template_version),
	    'status', r.status, 'params', r.params, 'manifest', r.manifest,
	    'submitted_by', r.submitted_by,
	    'cancel_requested', r.cancel_requested_at IS NOT NULL,
	    'budget_usd_micros', r.budget_usd_micros, 'phase_budgets', r.phase_budgets,
	    'spent_usd_micros', r.spent_usd_micros,
	    'tokens_in', r.tokens_in, 'tokens_out', r.tokens_out,
	    'base_commit', r.base_commit, 'error', r.error,
	    'last_event_seq', r.next_event_seq - 1,
	    'created_at', api_ts(r.created_at), 'started_at', api_ts(r.started_at),
	    'finished_at', api_ts(r.finished_at))
$$;

-- phase_budget(run, phase) -> the phase's budget in micro-dollars (the
-- run's own, else the template's), or NULL for none.
CREATE FUNCTION phase_budget(r runs, p_phase text) RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT coalesce((r.phase_budgets->>p_phase)::bigint,
	                (SELECT (ph->'budget'->>'usd_micros')::bigint
	                 FROM templates t, jsonb_array_elements(t.compiled->'phases') ph
	                 WHERE t.id = r.template_id AND ph->>'name' = p_phase))
$$;

-- Settling: an attempt's reservation when the attempt ends (succeeded,
-- failed, crashed, cancelled ...: any change out of running), and every
-- reservation still open when the run ends (one made for an attempt that
-- never began), in the transaction that ends them.
CREATE FUNCTION settle_ended_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM settle_budget(NEW.run_id, NEW.step_id, NEW.attempt);
	RETURN NULL;
END
$$;
CREATE TRIGGER run_steps_settle AFTER UPDATE OF status ON run_steps
	FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status <> 'running')
	EXECUTE FUNCTION settle_ended_attempt();

CREATE FUNCTION settle_finished_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM settle_budget(b.run_id, b.step_id, b.attempt)
	FROM budget_reservations b WHERE b.run_id = NEW.id AND b.settled_at IS NULL;
	RETURN NULL;
END
$$;
CREATE TRIGGER runs_settle AFTER UPDATE OF finished_at ON runs
	FOR EACH ROW WHEN (OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL)
	EXECUTE FUNCTION settle_finished_run();

-- approval_wait(run, owner, step, attempt, kind, message, expires_s) ->
-- the approval's id, or NULL (lease lost, or a cancel requested).  In one
-- transaction: a pending approval of that kind, its event
-- approval.requested, and the run parked (waiting_approval, lease handed
-- back) with run.waiting_approval, so that claim_run resumes it on a new
-- runner once the approval is decided or expires.  What a checkpoint does
-- (checkpoint_wait, from 0005, is now this with kind checkpoint) and what
-- a spent budget does (budget_wait).
CREATE FUNCTION approval_wait(p_run uuid, p_owner text, p_step text, p_attempt integer,
                              p_kind text, p_message text, p_expires_s integer)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
	r   runs;
	v_a approvals;
BEGIN
	IF p_expires_s IS NULL OR p_expires_s < 1 THEN
		RAISE EXCEPTION 'approval_wait: expiry must be positive'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL OR r.cancel_requested_at IS NOT NULL THEN
		RETURN NULL;
	END IF;
	INSERT INTO approvals (run_id, step_id, kind, expires_at)
	VALUES (p_run, p_step, p_kind, now() + make_interval(secs => p_expires_s))
	RETURNING * INTO v_a;
	PERFORM append_run_event(p_run, 'approval.requested', jsonb_build_object(
	    'approval_id', v_a.id, 'step_id', p_step, 'attempt', p_attempt, 'kind', p_kind,
	    'message', p_message, 'expires_at', api_ts(v_a.expires_at)));
	IF NOT wait_for_approval(p_run, p_owner) THEN
		RAISE EXCEPTION 'approval_wait: the run could not be parked';
	END IF;
	PERFORM append_run_event(p_run, 'run.waiting_approval',
	    jsonb_build_object('approval_id', v_a.id, 'step_id', p_step, 'kind', p_kind));
	RETURN v_a.id;
END
$$;

CREATE OR REPLACE FUNCTION checkpoint_wait(p_run uuid, p_owner text, p_step text,
                                           p_attempt integer, p_message text,
                                           p_expires_s integer)
RETURNS uuid LANGUAGE sql AS $$
	SELECT approval_wait(p_run, p_owner, p_step, p_attempt, 'checkpoint', p_message, p_expires_s)
$$;

-- budget_wait(run, owner, step, attempt, detail): the event
-- budget.exceeded (detail, with the step and a message), then the run
-- parked on an approval of kind budget expiring in 7 days.  The caller
-- holds the run's lock and lease, and no cancel was requested.
CREATE FUNCTION budget_wait(p_run uuid, p_owner text, p_step text, p_attempt integer,
                            p_detail jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	v_msg text;
BEGIN
	v_msg := CASE p_detail->>'scope'
	    WHEN 'quota' THEN format('step %s needs %s micro-dollars, more than the project''s '
	                             'monthly quota of %s has left (%s spent or reserved)', p_step,
	                             p_detail->>'needed_usd_micros', p_detail->>'quota_usd_micros',
	                             p_detail->>'month_spent_usd_micros')
	    WHEN 'phase' THEN format('the budget of phase %s (%s micro-dollars) is spent (%s)',
	                             p_detail->>'phase', p_detail->>'budget_usd_micros',
	                             p_detail->>'spent_usd_micros')
	    ELSE format('the run''s budget (%s micro-dollars) is spent (%s)',
	                p_detail->>'budget_usd_micros', p_detail->>'spent_usd_micros') END;
	PERFORM append_run_event(p_run, 'budget.exceeded', p_detail ||
	    jsonb_build_object('step_id', p_step, 'attempt', p_attempt, 'message', v_msg));
	IF approval_wait(p_run, p_owner, p_step, p_attempt, 'budget', v_msg, 7 * 86400) IS NULL THEN
		RAISE EXCEPTION 'budget_wait: the run could not be parked';
	END IF;
END
$$;

-- step_reserve(run, owner, phase, step, attempt, default) -> (outcome,
-- amount).  Before an agent step attempt begins, what it may spend:
--  * 'lost' (the lease is gone) or 'cancelled' (a cancel was requested):
--    nothing is written;
--  * 'exists': the attempt was reserved before (a runner that died between
--    its reservation and the attempt's start): that amount, nothing new;
--  * 'refused': the step's latest budget approval was rejected or expired
--    and it has had no reservation since: the step is to fail;
--  * 'paused': the run's or the phase's budget is spent (what its model
--    calls recorded), or the project's monthly quota cannot take the
--    reservation: budget_wait parked the run;
--  * 'reserved': amount = what is left of the tighter of the run's and the
--    phase's budgets, or `default` when neither has one, reserved against
--    the month's quota (reserve_budget: serialised on the project's row),
--    with the event budget.reserved.
-- The run's spend counts its recorded model calls once: the reservations
-- of its earlier attempts are settled (the triggers above), so a resumed
-- run is never stopped by its own earlier spend counted twice.
CREATE FUNCTION step_reserve(p_run uuid, p_owner text, p_phase text, p_step text,
                             p_attempt integer, p_default bigint)
RETURNS TABLE (outcome text, amount bigint) LANGUAGE plpgsql AS $$
DECLARE
	r        runs;
	v_last   approvals;
	v_spent  bigint;
	v_pspent bigint;
	v_phase  bigint;
	v_left   bigint;
	v_scope  text := 'default';
	v_detail jsonb;
	v_quota  bigint;
	v_month  date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
BEGIN
	IF p_default IS NULL OR p_default < 1 THEN
		RAISE EXCEPTION 'step_reserve: the default reservation must be positive'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	r := run_lock(p_run, p_owner);
	IF r.id IS NULL THEN
		outcome := 'lost';
		RETURN NEXT;
		RETURN;
	ELSIF r.cancel_requested_at IS NOT NULL THEN
		outcome := 'cancelled';
		RETURN NEXT;
		RETURN;
	END IF;
	SELECT b.amount_usd_micros INTO amount FROM budget_reservations b
	WHERE b.run_id = p_run AND b.step_id = p_step AND b.attempt = p_attempt;
	IF FOUND THEN
		outcome := 'exists';
		RETURN NEXT;
		RETURN;
	END IF;
	SELECT * INTO v_last FROM approvals a
	WHERE a.run_id = p_run AND a.step_id = p_step AND a.kind = 'budget'
	ORDER BY a.requested_at DESC, a.id DESC LIMIT 1;
	IF v_last.status IN ('rejected', 'expired')
	   AND NOT EXISTS (SELECT 1 FROM budget_reservations b WHERE b.run_id = p_run
	                   AND b.step_id = p_step AND b.created_at > v_last.requested_at) THEN
		outcome := 'refused';
		RETURN NEXT;
		RETURN;
	END IF;

	SELECT coalesce(sum(u.cost_usd_micros), 0),
	       coalesce(sum(u.cost_usd_micros) FILTER (WHERE s.phase_name = p_phase), 0)
	INTO v_spent, v_pspent
	FROM token_usage u JOIN run_steps s
	    ON s.run_id = u.run_id AND s.step_id = u.step_id AND s.attempt = u.attempt
	WHERE u.run_id = p_run;
	v_left := p_default;
	IF r.budget_usd_micros IS NOT NULL THEN
		v_left := r.budget_usd_micros - v_spent;
		v_scope := 'run';
		v_detail := jsonb_build_object('scope', 'run', 'budget_usd_micros', r.budget_usd_micros,
		                               'spent_usd_micros', v_spent);
	END IF;
	v_phase := phase_budget(r, p_phase);
	IF v_phase IS NOT NULL AND (v_scope = 'default' OR v_phase - v_pspent < v_left) THEN
		v_left := v_phase - v_pspent;
		v_scope := 'phase';
		v_detail := jsonb_build_object('scope', 'phase', 'phase', p_phase,
		                               'budget_usd_micros', v_phase, 'spent_usd_micros', v_pspent);
	END IF;
	IF v_left <= 0 THEN
		PERFORM budget_wait(p_run, p_owner, p_step, p_attempt, v_detail);
		outcome := 'paused';
		RETURN NEXT;
		RETURN;
	END IF;
	CASE reserve_budget(p_run, p_step, p_attempt, v_left)
	WHEN 'reserved' THEN
		NULL;
	WHEN 'quota_exceeded' THEN
		SELECT monthly_quota_usd_micros INTO v_quota FROM projects WHERE id = r.project_id;
		PERFORM budget_wait(p_run, p_owner, p_step, p_attempt, jsonb_build_object(
		    'scope', 'quota', 'quota_usd_micros', v_quota,
		    'month_spent_usd_micros', project_month_spend(r.project_id, v_month),
		    'needed_usd_micros', v_left));
		outcome := 'paused';
		RETURN NEXT;
		RETURN;
	ELSE
		RAISE EXCEPTION 'step_reserve: the reservation of run % step % attempt % failed',
		    p_run, p_step, p_attempt;
	END CASE;
	PERFORM append_run_event(p_run, 'budget.reserved', jsonb_build_object(
	    'step_id', p_step, 'attempt', p_attempt, 'usd_micros', v_left, 'scope', v_scope));
	outcome := 'reserved';
	amount := v_left;
	RETURN NEXT;
END
$$;

-- api_set_budget(user, run, phase, usd, remote) -> api_* envelope.
-- Admins of the run's project.  Sets the run's budget (phase NULL) or its
-- budget for one phase of its template to usd micro-dollars (0 to
-- 100000000000, the templates' range), with the event budget.changed
-- ({by, phase, from, to}) and an audit row; a run waiting on an approval
-- of kind budget has it approved in the same transaction (so it resumes
-- and reserves again under the new budget).  A finished run is 409.
CREATE FUNCTION api_set_budget(p_user uuid, p_run uuid, p_phase text, p_usd bigint,
                               p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_run  runs%ROWTYPE;
	v_role text;
	v_from bigint;
	v_a    uuid;
BEGIN
	SELECT * INTO v_run FROM runs WHERE id = p_run FOR NO KEY UPDATE;
	v_role := CASE WHEN FOUND THEN api_role(p_user, v_run.project_id) END;
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found', 'no such run');
	ELSIF v_role <> 'admin' THEN
		RETURN api_err(403, 'forbidden', 'only an admin of the project may change a run''s budget');
	ELSIF v_run.finished_at IS NOT NULL THEN
		RETURN api_err(409, 'run_finished', format('the run has already ended (%s)', v_run.status),
		               jsonb_build_object('status', v_run.status));
	ELSIF p_usd IS NULL OR p_usd NOT BETWEEN 0 AND 100000000000 THEN
		RETURN api_err(422, 'invalid_field',
		               'usd_micros must be an integer from 0 to 100000000000',
		               jsonb_build_object('field', 'usd_micros'));
	END IF;
	IF p_phase IS NULL THEN
		v_from := v_run.budget_usd_micros;
		UPDATE runs SET budget_usd_micros = p_usd WHERE id = p_run;
	ELSE
		IF NOT EXISTS (SELECT 1 FROM templates t, jsonb_array_elements(t.compiled->'phases') ph
		               WHERE t.id = v_run.template_id AND ph->>'name' = p_phase) THEN
			RETURN api_err(422, 'invalid_field',
			               format('the run''s template has no phase %s', p_phase),
			               jsonb_build_object('field', 'phase'));
		END IF;
		v_from := phase_budget(v_run, p_phase);
		UPDATE runs SET phase_budgets = phase_budgets || jsonb_build_object(p_phase, p_usd)
		WHERE id = p_run;
	END IF;
	PERFORM append_run_event(p_run, 'budget.changed', jsonb_build_object(
	    'by', p_user, 'phase', p_phase, 'from', v_from, 'to', p_usd));
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'run.budget', 'run', p_run::text, v_run.project_id, p_remote,
	        jsonb_build_object('phase', p_phase, 'from', v_from, 'to', p_usd));
	SELECT id INTO v_a FROM approvals
	WHERE run_id = p_run AND status = 'pending' AND kind = 'budget';
	IF FOUND THEN
		PERFORM decide_approval(v_a, 'approved', p_user, 'the budget was changed', p_remote);
	END IF;
	SELECT * INTO v_run FROM runs WHERE id = p_run;
	RETURN api_ok(200, run_json(v_run), v_role);
END
$$;
