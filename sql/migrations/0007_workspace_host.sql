-- A run's workspace lives in the state directory of the host that first
-- claimed it (STATE/runs/RUN).  Hosts sharing one database must therefore
-- take a run up again (after a checkpoint, a budget stop, a dead runner)
-- only where its workspace is: the first claim pins the run to its host
-- (runs.workspace_host, the host's STATE/host-id) and claim_run only
-- offers a pinned run to that host.  Tested in test_engine_sql.sh and
-- test_two_engines.sh.

ALTER TABLE runs ADD COLUMN workspace_host text
	CHECK (workspace_host ~ '^[0-9a-f]{32}$');

DROP FUNCTION IF EXISTS claim_run_started(text, integer);
DROP FUNCTION IF EXISTS claim_run(text, integer);

-- claim_run(owner, lease_secs, host) -> (run_id, previous_status), or no
-- row.  As 0004's claim_run (the oldest run this engine may start, under
-- a lease, FOR UPDATE SKIP LOCKED), except that a run pinned to a host is
-- only offered to that host, and the claim pins an unpinned run to the
-- claiming host.  host NULL claims unpinned runs only and pins nothing.
CREATE FUNCTION claim_run(p_owner text, p_lease_secs integer, p_host text DEFAULT NULL)
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
	  AND (r.workspace_host IS NULL OR r.workspace_host = p_host)
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
	    lease_owner = p_owner, lease_expires_at = now() + make_interval(secs => p_lease_secs),
	    workspace_host = coalesce(workspace_host, p_host)
	WHERE id = v_id;
	run_id := v_id;
	previous_status := v_status;
	RETURN NEXT;
END
$$;

-- claim_run_started(owner, lease_secs, host): claim_run and the claim's
-- event (run.started or run.resumed {from}) in the same transaction, as in
-- 0005.
CREATE FUNCTION claim_run_started(p_owner text, p_lease_secs integer, p_host text DEFAULT NULL)
RETURNS TABLE (run_id uuid, previous_status text) LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	SELECT * INTO c FROM claim_run(p_owner, p_lease_secs, p_host);
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
