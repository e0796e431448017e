-- A host's liveness (issue of hosts sharing one database): a run pinned to
-- a host (runs.workspace_host, 0007) can be taken up only there, so a host
-- that is gone would leave its runs parked forever.  Engine heartbeats now
-- say which host they run on (STATE/host-id), and sweep_runs, given the
-- grace (engine.host_grace, seconds), fails every unfinished run pinned to
-- a host none of whose engines has been heard for that long, and that no
-- engine holds, with a clear error.  Tested in test_engine_sql.sh.
ALTER TABLE engine_heartbeats ADD COLUMN host_id text CHECK (host_id ~ '^[0-9a-f]{32}$');
CREATE INDEX engine_heartbeats_host_idx ON engine_heartbeats (host_id, last_seen);

DROP FUNCTION IF EXISTS sweep_runs();
CREATE FUNCTION sweep_runs(p_host_grace integer DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	a   record;
	r   record;
	n   integer := 0;
BEGIN
	IF p_host_grace IS NOT NULL AND p_host_grace NOT BETWEEN 60 AND 31536000 THEN
		RAISE EXCEPTION 'sweep_runs: host grace must be 60 to 31536000 seconds'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
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
	IF p_host_grace IS NULL THEN
		RETURN n;
	END IF;
	-- runs whose host is gone: nobody holds them (no live lease), and no
	-- engine of their host has been heard within the grace
	FOR r IN
		SELECT ru.id, ru.status, ru.workspace_host FROM runs ru
		WHERE ru.finished_at IS NULL AND ru.workspace_host IS NOT NULL
		  AND ru.status IN ('queued', 'running', 'waiting_approval')
		  AND (ru.lease_expires_at IS NULL OR ru.lease_expires_at < now())
		  AND NOT EXISTS (SELECT 1 FROM engine_heartbeats h
		                  WHERE h.host_id = ru.workspace_host
		                    AND h.last_seen > now() - make_interval(secs => p_host_grace))
		FOR UPDATE OF ru SKIP LOCKED
	LOOP
		IF finalize_run(r.id, r.status, 'failed',
		        format('the host %s, which holds its workspace, has had no engine for %s s '
		               '(engine.host_grace): no other host can take the run up',
		               r.workspace_host, p_host_grace),
		        'run.failed',
		        jsonb_build_object('reason', 'host_gone', 'host', r.workspace_host))
		        IS NOT NULL THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END
$$;
