-- The scheduler's atomic operations (DESIGN 3.3, 3.4, 3.6; the engine
-- issue): claiming a run under a lease, renewing and handing back the
-- lease, the sweeps (expired approvals, cancelled runs nobody is running),
-- and budget reservations against a project's monthly quota.  Each is one
-- function so that its atomicity is visible here and testable in SQL
-- (tests/integration/test_engine_sql.sh).

-- claim_run(owner, lease_secs) -> (run_id, previous_status), or no row
-- The oldest run this engine may start, taken under a lease in one
-- statement with FOR UPDATE SKIP LOCKED, so that two engines never take
-- the same run:
--  * a queued run (not cancelled) -> running, started_at set;
--  * a running run whose lease expired (its runner or engine died): the
--    same status, a new owner; the new runner finds the interrupted step
--    attempt and marks it crashed;
--  * a run waiting for approval with no pending approval left and at least
--    one decided (approved, rejected or expired) whose lease is free ->
--    running: a new runner resumes it and reads the decision.
-- A run with a cancel requested is never claimed (sweep_runs ends it).
CREATE FUNCTION claim_run(p_owner text, p_lease_secs integer)
RETURNS TABLE (run_id uuid, previous_status text) LANGUAGE plpgsql AS $$
DECLARE
	v_id     uuid;
	v_status text;
BEGIN
	IF p_lease_secs IS NULL OR p_lease_secs NOT BETWEEN 1 AND 3600 THEN
		RAISE EXCEPTION 'claim_run: lease must be 1 to 3600 seconds'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT r.id, r.status INTO v_id, v_status
	FROM runs r
	WHERE r.cancel_requested_at IS NULL
	  AND (r.status = 'queued'
	       OR (r.status = 'running' AND r.lease_expires_at < now())
	       OR (r.status = 'waiting_approval'
	           AND (r.lease_expires_at IS NULL OR r.lease_expires_at < now())
	           AND NOT EXISTS (SELECT 1 FROM approvals a
	                           WHERE a.run_id = r.id AND a.status = 'pending')
	           AND EXISTS (SELECT 1 FROM approvals a
	                       WHERE a.run_id = r.id AND a.status <> 'pending')))
	ORDER BY r.created_at, r.id
	LIMIT 1
	FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	UPDATE runs
	SET status = 'running', started_at = coalesce(started_at, now()),
	    lease_owner = p_owner, lease_expires_at = now() + make_interval(secs => p_lease_secs)
	WHERE id = v_id;
	run_id := v_id;
	previous_status := v_status;
	RETURN NEXT;
END
$$;

-- renew_lease(run, owner, lease_secs) -> still held?
-- Only the owner, only while its lease has not expired: a runner that
-- lost its lease (another engine claimed the run) must stop, not renew.
CREATE FUNCTION renew_lease(p_run uuid, p_owner text, p_lease_secs integer)
RETURNS boolean LANGUAGE sql AS $$
	UPDATE runs SET lease_expires_at = now() + make_interval(secs => p_lease_secs)
	WHERE id = p_run AND lease_owner = p_owner AND lease_expires_at > now()
	  AND status IN ('running', 'waiting_approval') AND p_lease_secs BETWEEN 1 AND 3600
	RETURNING true
$$;

-- wait_for_approval(run, owner) -> done?
-- The runner that reached a checkpoint (its approval row already written)
-- parks the run: running -> waiting_approval and the lease handed back in
-- one statement, so claim_run can resume it once the approval is decided.
CREATE FUNCTION wait_for_approval(p_run uuid, p_owner text)
RETURNS boolean LANGUAGE sql AS $$
	UPDATE runs SET status = 'waiting_approval', lease_owner = NULL, lease_expires_at = NULL
	WHERE id = p_run AND status = 'running' AND lease_owner = p_owner
	  AND lease_expires_at > now() AND cancel_requested_at IS NULL
	RETURNING true
$$;

-- sweep_runs() -> how many rows it changed
-- What no runner will do:
--  * pending approvals past their expiry become expired (a CAS on pending,
--    so a decision committed first wins and one committed after finds it
--    expired), each with the event approval.expired and a system audit
--    row; the run is then claimable and its runner reads the expiry.  A
--    run another transaction holds (a decision in progress) is skipped and
--    left to the next sweep;
--  * a run with a cancel requested and no live runner (queued, waiting
--    for approval, or running with an expired lease) is finalized
--    cancelled with its terminal event.
CREATE FUNCTION sweep_runs() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	a   record;
	r   record;
	n   integer := 0;
BEGIN
	FOR a IN
		SELECT ap.id, ap.run_id, ap.step_id, ru.project_id
		FROM approvals ap JOIN runs ru ON ru.id = ap.run_id
		WHERE ap.status = 'pending' AND ap.expires_at <= now() AND ru.finished_at IS NULL
		ORDER BY ap.expires_at
		FOR UPDATE OF ru, ap SKIP LOCKED
	LOOP
		UPDATE approvals SET status = 'expired', decided_at = greatest(now(), requested_at)
		WHERE id = a.id AND status = 'pending';
		IF FOUND THEN
			PERFORM append_run_event(a.run_id, 'approval.expired',
			    jsonb_build_object('approval_id', a.id, 'step_id', a.step_id));
			INSERT INTO audit_log (actor_kind, action, object_kind, object_id, project_id,
			                       detail)
			VALUES ('system', 'approval.expire', 'approval', a.id::text, a.project_id,
			        jsonb_build_object('run_id', a.run_id, 'step_id', a.step_id));
			n := n + 1;
		END IF;
	END LOOP;
	FOR r IN
		SELECT id, status FROM runs
		WHERE cancel_requested_at IS NOT NULL AND finished_at IS NULL
		  AND (status IN ('queued', 'waiting_approval')
		       OR (status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < now())))
		FOR UPDATE SKIP LOCKED
	LOOP
		IF finalize_run(r.id, r.status, 'cancelled', NULL, 'run.cancelled',
		                jsonb_build_object('by', 'sweep')) IS NOT NULL THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END
$$;

------------------------------------------------------------------------
-- Budgets (DESIGN 3.6)
------------------------------------------------------------------------

-- project_month_spend(project, month) -> micro-dollars counted against the
-- month's quota: what model calls recorded that month, except that an
-- attempt with an unsettled reservation counts the larger of its
-- reservation and what it has recorded so far (never both).
CREATE FUNCTION project_month_spend(p_project uuid, p_month date) RETURNS bigint
LANGUAGE sql STABLE AS $$
	WITH b AS (
		SELECT p_month::timestamp AT TIME ZONE 'UTC' AS t0,
		       (p_month + interval '1 month') AT TIME ZONE 'UTC' AS t1
	), open_res AS (
		SELECT r.run_id, r.step_id, r.attempt, r.amount_usd_micros
		FROM budget_reservations r
		WHERE r.project_id = p_project AND r.month = p_month AND r.settled_at IS NULL
	), usage AS (
		SELECT u.run_id, u.step_id, u.attempt, u.cost_usd_micros
		FROM token_usage u JOIN runs ru ON ru.id = u.run_id, b
		WHERE ru.project_id = p_project AND u.created_at >= b.t0 AND u.created_at < b.t1
	)
	SELECT (coalesce((SELECT sum(cost_usd_micros) FROM usage x
	                  WHERE NOT EXISTS (SELECT 1 FROM open_res o WHERE o.run_id = x.run_id
	                                    AND o.step_id = x.step_id AND o.attempt = x.attempt)), 0)
	      + coalesce((SELECT sum(greatest(o.amount_usd_micros,
	                      coalesce((SELECT sum(x.cost_usd_micros) FROM usage x
	                                WHERE x.run_id = o.run_id AND x.step_id = o.step_id
	                                  AND x.attempt = o.attempt), 0)))
	                  FROM open_res o), 0))::bigint
$$;

-- reserve_budget(run, step, attempt, amount) -> 'reserved' | 'exists' |
-- 'quota_exceeded' | 'no_run'
-- Before a step attempt may spend, atomically against its project's
-- monthly quota (reservations + recorded spend <= quota): the project row
-- is locked, so concurrent reservations of one project are serialised and
-- can never jointly overspend.  One reservation per attempt: asking again
-- for the same attempt (a retried message, a resumed runner) is 'exists'
-- and changes nothing, so a resumed run never counts its own spend twice.
-- A project without a quota always gets its reservation (recorded all the
-- same).  The month is the current one, UTC.
CREATE FUNCTION reserve_budget(p_run uuid, p_step text, p_attempt integer, p_amount bigint)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	v_project uuid;
	v_quota   bigint;
	v_month   date := date_trunc('month', now() AT TIME ZONE 'UTC')::date;
BEGIN
	SELECT project_id INTO v_project FROM runs WHERE id = p_run AND finished_at IS NULL;
	IF NOT FOUND THEN
		RETURN 'no_run';
	END IF;
	SELECT monthly_quota_usd_micros INTO v_quota FROM projects WHERE id = v_project FOR UPDATE;
	IF EXISTS (SELECT 1 FROM budget_reservations
	           WHERE run_id = p_run AND step_id = p_step AND attempt = p_attempt) THEN
		RETURN 'exists';
	END IF;
	IF v_quota IS NOT NULL AND project_month_spend(v_project, v_month) + p_amount > v_quota THEN
		RETURN 'quota_exceeded';
	END IF;
	INSERT INTO budget_reservations (project_id, run_id, step_id, attempt, month,
	                                 amount_usd_micros)
	VALUES (v_project, p_run, p_step, p_attempt, v_month, p_amount);
	RETURN 'reserved';
END
$$;

-- settle_budget(run, step, attempt) -> what the attempt spent, or NULL when
-- it had no open reservation.  From now on the month counts the attempt's
-- recorded usage instead of its reservation.
CREATE FUNCTION settle_budget(p_run uuid, p_step text, p_attempt integer)
RETURNS bigint LANGUAGE sql AS $$
	UPDATE budget_reservations b
	SET settled_at = now(),
	    settled_usd_micros = (SELECT coalesce(sum(cost_usd_micros), 0) FROM token_usage u
	                          WHERE u.run_id = b.run_id AND u.step_id = b.step_id
	                            AND u.attempt = b.attempt)
	WHERE b.run_id = p_run AND b.step_id = p_step AND b.attempt = p_attempt
	  AND b.settled_at IS NULL
	RETURNING settled_usd_micros
$$;
