-- The API's operations that change several rows or decide with several
-- lookups (submit a run, cancel it, decide an approval, manage members).
-- Each takes the acting user and checks, itself, that the user is an
-- enabled member of the object's project with a role that may act, so the
-- rule holds whoever calls (httpd checks too, but is not trusted to).
--
-- Each api_* function answers one jsonb document:
--   {"status": 200|201|202, "body": {...}, "role": R} on success, R the
--                                                      user's role there
--   {"status": 4xx, "error": {"code": "...", "message": "...", ...}}
-- so that refusals are data, never exceptions, and an API request maps to
-- exactly one statement.  A refusal writes nothing.

------------------------------------------------------------------------
-- Helpers
------------------------------------------------------------------------

-- The API's time format: UTC, seconds, "Z" ("2026-01-02T03:04:05Z").
-- to_json writes ISO 8601 whatever the session's DateStyle, and costs a
-- third of to_char: this runs several times for every run shown.
CREATE FUNCTION api_ts(t timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT (to_json(date_trunc('second', t AT TIME ZONE 'UTC')) #>> '{}') || 'Z'
$$;

-- The enabled members of every project: what each op joins to decide
-- what the acting user may see (a view, so the planner joins it in).
CREATE VIEW api_members AS
	SELECT m.user_id, m.project_id, m.role
	FROM memberships m JOIN users u ON u.id = m.user_id
	WHERE u.disabled_at IS NULL;

-- The role of user p_user in project p_project, or NULL when the user is
-- not an enabled member of it (or either does not exist).
CREATE FUNCTION api_role(p_user uuid, p_project uuid) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT role FROM api_members WHERE user_id = p_user AND project_id = p_project
$$;

CREATE FUNCTION api_err(p_status integer, p_code text, p_message text,
                        p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
	SELECT jsonb_build_object('status', p_status, 'error',
	    jsonb_build_object('code', p_code, 'message', p_message) || coalesce(p_extra, '{}'))
$$;

-- role: the acting user's role in the object's project, which httpd
-- checks again before it answers.
CREATE FUNCTION api_ok(p_status integer, p_body jsonb, p_role text DEFAULT NULL) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
	SELECT jsonb_build_object('status', p_status, 'body', p_body, 'role', p_role)
$$;

-- A run as the API shows it.  The manifest names what was pinned (ids,
-- versions, digests), never a secret.
CREATE FUNCTION run_json(r runs) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
	    'id', r.id, 'project_id', r.project_id,
	    'template', jsonb_build_object('name', r.template_name, 'version', r.template_version),
	    'status', r.status, 'params', r.params, 'manifest', r.manifest,
	    'submitted_by', r.submitted_by,
	    'cancel_requested', r.cancel_requested_at IS NOT NULL,
	    'budget_usd_micros', r.budget_usd_micros, 'spent_usd_micros', r.spent_usd_micros,
	    'tokens_in', r.tokens_in, 'tokens_out', r.tokens_out,
	    'base_commit', r.base_commit, 'error', r.error,
	    'last_event_seq', r.next_event_seq - 1,
	    'created_at', api_ts(r.created_at), 'started_at', api_ts(r.started_at),
	    'finished_at', api_ts(r.finished_at))
$$;

------------------------------------------------------------------------
-- Submitting a run (DESIGN 3.7)
------------------------------------------------------------------------

-- api_submit_run(user, project, template, params, idempotency_key, remote)
-- In one transaction: the caller is an admin or member of the project; the
-- latest version of the template; params checked against its declarations
-- (every unknown, missing or mistyped one reported in "details"), defaults
-- filled in, repoRef params resolved to a repository connection of THIS
-- project only; the resource manifest resolved against this project's
-- grants and pinned (a required resource not granted, or granted but not
-- registered, is a named 422); the run inserted queued with its first
-- event 'run.queued' and an audit row; NOTIFY run_queued '<run>'.
-- With an idempotency key, a run of the same project with the same key is
-- returned as it is (200) when it was submitted with the same template and
-- the same params once defaults are filled in, and refused (409
-- idempotency_conflict) otherwise; a retry is checked like a first submit
-- (an invalid one is a 422); two racing submits with one key make one run.
CREATE FUNCTION api_submit_run(p_user uuid, p_project uuid, p_template text, p_params jsonb,
                               p_idem text, p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_role     text;
	v_tmpl     templates%ROWTYPE;
	v_decl     jsonb;
	v_params   jsonb := '{}';
	v_repos    jsonb := '{}';
	v_details  jsonb := '[]';
	v_skills   jsonb := '[]';
	v_mcps     jsonb := '[]';
	v_manifest jsonb;
	v_run      runs%ROWTYPE;
	k          text;
	v          jsonb;
	d          jsonb;
	t          text;
	rc         repo_connections%ROWTYPE;
	need       record;
BEGIN
	v_role := api_role(p_user, p_project);
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found', 'no such project');
	ELSIF v_role NOT IN ('admin', 'member') THEN
		RETURN api_err(403, 'forbidden', 'a viewer may not submit runs');
	END IF;
	IF p_params IS NULL OR jsonb_typeof(p_params) <> 'object' THEN
		RETURN api_err(422, 'invalid_field', 'params must be an object',
		               '{"field":"params"}');
	END IF;

	SELECT * INTO v_tmpl FROM templates WHERE name = p_template ORDER BY version DESC LIMIT 1;
	IF NOT FOUND THEN
		RETURN api_err(422, 'unknown_template', format('no template named %s', p_template),
		               '{"field":"template"}');
	END IF;
	v_decl := v_tmpl.compiled->'params';

	-- params: unknown names, then each declared one
	FOR k IN SELECT jsonb_object_keys(p_params) ORDER BY 1 LOOP
		IF NOT v_decl ? k THEN
			v_details := v_details || jsonb_build_object('param', left(k, 64),
			    'code', 'unknown_param', 'message', 'the template declares no such parameter');
		END IF;
	END LOOP;
	FOR k, d IN SELECT key, value FROM jsonb_each(v_decl) ORDER BY key LOOP
		v := p_params->k;
		IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
			v := nullif(d->'default', 'null'::jsonb);
			IF v IS NULL THEN
				IF (d->>'required')::boolean THEN
					v_details := v_details || jsonb_build_object('param', k,
					    'code', 'missing_param', 'message', 'the parameter is required');
				END IF;
				CONTINUE;
			END IF;
		END IF;
		t := d->>'type';
		IF t = 'int' THEN
			IF jsonb_typeof(v) <> 'number' OR v::text !~ '^-?[0-9]{1,18}$' THEN
				v_details := v_details || jsonb_build_object('param', k,
				    'code', 'invalid_param', 'message', 'expected an integer');
				CONTINUE;
			END IF;
		ELSIF t = 'bool' THEN
			IF jsonb_typeof(v) <> 'boolean' THEN
				v_details := v_details || jsonb_build_object('param', k,
				    'code', 'invalid_param', 'message', 'expected true or false');
				CONTINUE;
			END IF;
		ELSIF jsonb_typeof(v) <> 'string' OR octet_length(v#>>'{}') > 4096
		      OR (v#>>'{}') ~ '[[:cntrl:]]' THEN
			v_details := v_details || jsonb_build_object('param', k, 'code', 'invalid_param',
			    'message', 'expected a string of at most 4096 bytes without control characters');
			CONTINUE;
		ELSIF t = 'repoRef' THEN
			-- only this project's connections: another project's name is
			-- simply not found here
			SELECT * INTO rc FROM repo_connections
			WHERE project_id = p_project AND name = v#>>'{}';
			IF NOT FOUND THEN
				v_details := v_details || jsonb_build_object('param', k,
				    'code', 'unknown_repo',
				    'message', 'no repository connection of this project has that name');
				CONTINUE;
			END IF;
			v_repos := v_repos || jsonb_build_object(k,
			    jsonb_build_object('id', rc.id, 'name', rc.name));
		END IF;
		v_params := v_params || jsonb_build_object(k, v);
	END LOOP;
	IF jsonb_array_length(v_details) > 0 THEN
		RETURN api_err(422, 'invalid_params', v_details->0->>'param' || ': ' ||
		               (v_details->0->>'message'), jsonb_build_object('details', v_details));
	END IF;

	-- a retried submit: the same key, template and (resolved) params
	IF p_idem IS NOT NULL THEN
		SELECT * INTO v_run FROM runs WHERE project_id = p_project AND idempotency_key = p_idem;
		IF FOUND THEN
			RETURN api_submit_replay(v_run, p_template, v_params, v_role);
		END IF;
	END IF;

	-- the manifest: every resource any step requires, required when any
	-- step requires it without "optional"
	FOR need IN
		SELECT x.kind, x.name, bool_and(x.optional) AS optional
		FROM (SELECT 'skill' AS kind, s->>'name' AS name, (s->>'optional')::boolean AS optional
		      FROM jsonb_array_elements(v_tmpl.compiled->'phases') ph,
		           jsonb_array_elements(ph->'steps') st,
		           jsonb_array_elements(st->'requires'->'skills') s
		      UNION ALL
		      SELECT 'mcp_server', s->>'name', (s->>'optional')::boolean
		      FROM jsonb_array_elements(v_tmpl.compiled->'phases') ph,
		           jsonb_array_elements(ph->'steps') st,
		           jsonb_array_elements(st->'requires'->'mcp_servers') s) x
		GROUP BY x.kind, x.name ORDER BY x.kind, x.name
	LOOP
		IF NOT EXISTS (SELECT 1 FROM grants WHERE project_id = p_project
		               AND resource_kind = need.kind AND resource_name = need.name) THEN
			IF NOT need.optional THEN
				v_details := v_details || jsonb_build_object('kind', need.kind,
				    'name', need.name, 'code', 'resource_not_granted',
				    'message', format('%s %s is required but not granted to this project',
				                      replace(need.kind, '_', ' '), need.name));
			END IF;
			CONTINUE;
		END IF;
		IF need.kind = 'skill' THEN
			SELECT jsonb_build_object('name', name, 'version', version, 'id', id,
			                          'sha256', encode(sha256, 'hex'))
			INTO v FROM skills WHERE name = need.name ORDER BY version DESC LIMIT 1;
		ELSE
			SELECT jsonb_build_object('name', name, 'version', version, 'id', id)
			INTO v FROM mcp_servers WHERE name = need.name ORDER BY version DESC LIMIT 1;
		END IF;
		IF v IS NULL THEN
			IF NOT need.optional THEN
				v_details := v_details || jsonb_build_object('kind', need.kind,
				    'name', need.name, 'code', 'resource_unavailable',
				    'message', format('%s %s is granted but not registered',
				                      replace(need.kind, '_', ' '), need.name));
			END IF;
			CONTINUE;
		END IF;
		v := v || jsonb_build_object('optional', need.optional);
		IF need.kind = 'skill' THEN
			v_skills := v_skills || v;
		ELSE
			v_mcps := v_mcps || v;
		END IF;
	END LOOP;
	IF jsonb_array_length(v_details) > 0 THEN
		RETURN api_err(422, v_details->0->>'code', v_details->0->>'message',
		               jsonb_build_object('details', v_details));
	END IF;
	v_manifest := jsonb_build_object(
	    'template', jsonb_build_object('id', v_tmpl.id, 'name', v_tmpl.name,
	                                   'version', v_tmpl.version,
	                                   'sha256', encode(v_tmpl.sha256, 'hex')),
	    'skills', v_skills, 'mcp_servers', v_mcps, 'repos', v_repos);

	BEGIN
		INSERT INTO runs (project_id, template_id, template_name, template_version, params,
		                  manifest, submitted_by, idempotency_key, budget_usd_micros)
		VALUES (p_project, v_tmpl.id, v_tmpl.name, v_tmpl.version, v_params, v_manifest,
		        p_user, p_idem, (v_tmpl.compiled->'budget'->>'usd_micros')::bigint)
		RETURNING * INTO v_run;
	EXCEPTION WHEN unique_violation THEN
		-- a concurrent submit with the same key committed first
		SELECT * INTO v_run FROM runs WHERE project_id = p_project AND idempotency_key = p_idem;
		RETURN api_submit_replay(v_run, p_template, v_params, v_role);
	END;
	PERFORM append_run_event(v_run.id, 'run.queued',
	    jsonb_build_object('template', v_tmpl.name, 'version', v_tmpl.version,
	                       'submitted_by', p_user));
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'run.submit', 'run', v_run.id::text, p_project, p_remote,
	        jsonb_build_object('template', v_tmpl.name, 'version', v_tmpl.version,
	                           'idempotency_key', p_idem));
	PERFORM pg_notify('run_queued', v_run.id::text);
	SELECT * INTO v_run FROM runs WHERE id = v_run.id;
	RETURN api_ok(201, run_json(v_run), v_role);
END
$$;

-- The answer to a submit whose idempotency key names run r: r itself when
-- the request is the same (template name, and params equal once defaults
-- are filled in), a conflict otherwise.
CREATE FUNCTION api_submit_replay(r runs, p_template text, p_params jsonb, p_role text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN r.template_name = p_template AND r.params = p_params
	            THEN api_ok(200, run_json(r), p_role)
	            ELSE api_err(409, 'idempotency_conflict',
	                         'this Idempotency-Key was used for a different request',
	                         jsonb_build_object('run_id', r.id)) END
$$;

------------------------------------------------------------------------
-- Cancelling a run (DESIGN 3.3)
------------------------------------------------------------------------

-- api_cancel_run(user, run, remote)
-- Admins and members.  A queued run or one waiting for an approval has no
-- live runner: it is finalized cancelled here (200, terminal event
-- written).  A running run gets cancel_requested_at (which makes every
-- later transition_run and non-cancel finalize_run refuse), the event
-- 'run.cancel_requested' and NOTIFY run_cancel '<run>' for the engine
-- (202).  Asking again is harmless (202, nothing new written); a finished
-- run is 409.
CREATE FUNCTION api_cancel_run(p_user uuid, p_run uuid, p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_run  runs%ROWTYPE;
	v_role text;
	v_code integer := 202;
BEGIN
	SELECT * INTO v_run FROM runs WHERE id = p_run FOR NO KEY UPDATE;
	v_role := CASE WHEN FOUND THEN api_role(p_user, v_run.project_id) END;
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found', 'no such run');
	ELSIF v_role NOT IN ('admin', 'member') THEN
		RETURN api_err(403, 'forbidden', 'a viewer may not cancel runs');
	ELSIF v_run.finished_at IS NOT NULL THEN
		RETURN api_err(409, 'run_finished', format('the run has already ended (%s)', v_run.status),
		               jsonb_build_object('status', v_run.status));
	ELSIF v_run.cancel_requested_at IS NOT NULL THEN
		RETURN api_ok(202, run_json(v_run), v_role);
	END IF;
	UPDATE runs SET cancel_requested_at = now() WHERE id = p_run;
	IF v_run.status IN ('queued', 'waiting_approval') THEN
		PERFORM finalize_run(p_run, v_run.status, 'cancelled', NULL, 'run.cancelled',
		                     jsonb_build_object('by', p_user));
		v_code := 200;
	ELSE
		PERFORM append_run_event(p_run, 'run.cancel_requested', jsonb_build_object('by', p_user));
		PERFORM pg_notify('run_cancel', p_run::text);
	END IF;
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'run.cancel', 'run', p_run::text, v_run.project_id, p_remote,
	        jsonb_build_object('status', v_run.status));
	SELECT * INTO v_run FROM runs WHERE id = p_run;
	RETURN api_ok(v_code, run_json(v_run), v_role);
END
$$;

------------------------------------------------------------------------
-- Deciding an approval
------------------------------------------------------------------------

-- api_decide_approval(user, approval, decision, comment, remote)
-- Admins and members of the run's project; decide_approval does the
-- compare-and-swap, the event and the audit row.  Losing the race, an
-- expired approval, a finished run: 409 with the approval's status.
CREATE FUNCTION api_decide_approval(p_user uuid, p_approval uuid, p_decision text,
                                    p_comment text, p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_role text;
	v_a    approvals%ROWTYPE;
BEGIN
	SELECT api_role(p_user, r.project_id) INTO v_role
	FROM approvals a JOIN runs r ON r.id = a.run_id WHERE a.id = p_approval;
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found', 'no such approval');
	ELSIF v_role NOT IN ('admin', 'member') THEN
		RETURN api_err(403, 'forbidden', 'a viewer may not decide approvals');
	ELSIF p_decision IS NULL OR p_decision NOT IN ('approved', 'rejected') THEN
		RETURN api_err(422, 'invalid_field', 'decision must be "approved" or "rejected"',
		               '{"field":"decision"}');
	ELSIF octet_length(p_comment) > 4096 THEN
		RETURN api_err(422, 'invalid_field', 'comment is longer than 4096 bytes',
		               '{"field":"comment"}');
	END IF;
	IF NOT decide_approval(p_approval, p_decision, p_user, p_comment, p_remote) THEN
		SELECT * INTO v_a FROM approvals WHERE id = p_approval;
		RETURN api_err(409, 'not_pending', CASE v_a.status
		    WHEN 'pending' THEN 'the approval has expired or its run has finished'
		    ELSE format('the approval is already %s', v_a.status) END,
		    jsonb_build_object('status', v_a.status));
	END IF;
	SELECT * INTO v_a FROM approvals WHERE id = p_approval;
	RETURN api_ok(200, approval_json(v_a), v_role);
END
$$;

CREATE FUNCTION approval_json(a approvals) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object('id', a.id, 'run_id', a.run_id, 'step_id', a.step_id,
	    'status', a.status, 'requested_at', api_ts(a.requested_at),
	    'expires_at', api_ts(a.expires_at), 'decided_by', a.decided_by,
	    'decided_at', api_ts(a.decided_at), 'comment', a.comment)
$$;

------------------------------------------------------------------------
-- Members
------------------------------------------------------------------------

CREATE FUNCTION membership_json(m memberships) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object('membership_id', m.id, 'id', u.id, 'name', u.name,
	    'display_name', u.display_name, 'role', m.role, 'disabled', u.disabled_at IS NOT NULL,
	    'since', api_ts(m.created_at))
	FROM users u WHERE u.id = m.user_id
$$;

-- api_member_change(user, project, membership, target_user_name, role, remote)
-- Project admins only.  Adds (membership NULL: target_user_name, role), changes a
-- role (role set) or removes (role NULL) a membership of the project.  The
-- project row is locked before anything is checked, so concurrent changes
-- cannot together remove or demote the last admin (409 last_admin), nor
-- can an admin being demoted make one more change.  Giving a membership
-- the role it has changes nothing and writes no audit row.
CREATE FUNCTION api_member_change(p_user uuid, p_project uuid, p_membership uuid,
                                  p_name text, p_role text, p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_role    text;
	v_m       memberships%ROWTYPE;
	v_target  uuid;
	v_action  text;
	v_code    integer := 200;
BEGIN
	IF p_membership IS NOT NULL THEN
		SELECT project_id INTO p_project FROM memberships WHERE id = p_membership;
	END IF;
	-- Everything below is decided under the project's lock: the caller's
	-- own role cannot change between the check and the change.
	PERFORM 1 FROM projects WHERE id = p_project FOR UPDATE;
	IF p_membership IS NOT NULL AND
	   NOT EXISTS (SELECT 1 FROM memberships WHERE id = p_membership) THEN
		p_project := NULL; -- removed meanwhile
	END IF;
	v_role := api_role(p_user, p_project);
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found',
		               CASE WHEN p_membership IS NULL THEN 'no such project'
		                    ELSE 'no such membership' END);
	ELSIF v_role <> 'admin' THEN
		RETURN api_err(403, 'forbidden', 'only a project admin may manage members');
	ELSIF p_role IS NOT NULL AND p_role NOT IN ('admin', 'member', 'viewer') THEN
		RETURN api_err(422, 'invalid_field', 'role must be admin, member or viewer',
		               '{"field":"role"}');
	END IF;

	IF p_membership IS NULL THEN
		SELECT id INTO v_target FROM users WHERE name = p_name;
		IF NOT FOUND THEN
			RETURN api_err(422, 'unknown_user', 'no user has that name', '{"field":"user"}');
		END IF;
		INSERT INTO memberships (project_id, user_id, role)
		VALUES (p_project, v_target, p_role)
		ON CONFLICT (project_id, user_id) DO NOTHING
		RETURNING * INTO v_m;
		IF NOT FOUND THEN
			RETURN api_err(409, 'already_member', 'the user is already a member');
		END IF;
		v_action := 'member.add';
		v_code := 201;
	ELSE
		SELECT * INTO v_m FROM memberships WHERE id = p_membership;
		IF v_m.role = p_role THEN
			RETURN api_ok(200, membership_json(v_m), v_role); -- nothing to change
		END IF;
		IF v_m.role = 'admin' AND coalesce(p_role, '') <> 'admin' AND
		   (SELECT count(*) FROM memberships WHERE project_id = p_project
		    AND role = 'admin') = 1 THEN
			RETURN api_err(409, 'last_admin', 'a project keeps at least one admin');
		END IF;
		IF p_role IS NULL THEN
			DELETE FROM memberships WHERE id = p_membership;
			v_action := 'member.remove';
		ELSE
			UPDATE memberships SET role = p_role WHERE id = p_membership RETURNING * INTO v_m;
			v_action := 'member.role';
		END IF;
	END IF;
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', v_action, 'membership', v_m.id::text, p_project, p_remote,
	        jsonb_build_object('user_id', v_m.user_id, 'role', p_role));
	IF v_action = 'member.remove' THEN
		RETURN api_ok(200, jsonb_build_object('removed', v_m.id), v_role);
	END IF;
	RETURN api_ok(v_code, membership_json(v_m), v_role);
END
$$;

------------------------------------------------------------------------
-- Repository connections
------------------------------------------------------------------------

CREATE FUNCTION repo_json(c repo_connections) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object('id', c.id, 'name', c.name, 'url', c.url,
	    'has_token', c.token_nonce IS NOT NULL, 'created_at', api_ts(c.created_at))
$$;

-- api_repo_add(user, project, name, url, ciphertext, nonce, remote)
-- Project admins.  The token arrives sealed (the supervisor sealed it for
-- httpd; ciphertext and nonce both NULL for none) and is never returned;
-- the audit row says only whether there is one.  Names and URLs are
-- checked here with errors that name the field (the table's CHECKs are
-- the same rules, as a last line); a taken name is 409 repo_exists.
CREATE FUNCTION api_repo_add(p_user uuid, p_project uuid, p_name text, p_url text,
                             p_ct bytea, p_nonce bytea, p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_role text := api_role(p_user, p_project);
	v_c    repo_connections%ROWTYPE;
BEGIN
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found', 'no such project');
	ELSIF v_role <> 'admin' THEN
		RETURN api_err(403, 'forbidden', 'only a project admin may add repositories');
	ELSIF p_name IS NULL OR p_name !~ '^[a-z0-9][a-z0-9_-]{0,63}$' THEN
		RETURN api_err(422, 'invalid_field',
		    'name must be 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit',
		    '{"field":"name"}');
	ELSIF p_url IS NULL OR length(p_url) > 2048 OR p_url ~ '[[:space:][:cntrl:]]' OR
	      NOT (p_url ~ '^https://[^/@]+(/|$)' OR p_url ~ '^file:///' OR p_url ~ '^/') THEN
		RETURN api_err(422, 'invalid_field',
		    'url must be https://HOST/... without credentials, file:///... or an absolute path',
		    '{"field":"url"}');
	ELSIF (p_ct IS NULL) <> (p_nonce IS NULL) THEN
		RAISE EXCEPTION 'api_repo_add: ciphertext and nonce go together'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	INSERT INTO repo_connections (project_id, name, url, token_ciphertext, token_nonce)
	VALUES (p_project, p_name, p_url, p_ct, p_nonce)
	ON CONFLICT (project_id, name) DO NOTHING
	RETURNING * INTO v_c;
	IF NOT FOUND THEN
		RETURN api_err(409, 'repo_exists', 'the project has a repository of that name',
		               '{"field":"name"}');
	END IF;
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'repo.add', 'repo_connection', v_c.id::text, p_project, p_remote,
	        jsonb_build_object('name', v_c.name, 'url', v_c.url, 'token', p_ct IS NOT NULL));
	RETURN api_ok(201, repo_json(v_c), v_role);
END
$$;

-- api_repo_remove(user, repo, remote): project admins.  Runs already
-- submitted keep the connection's id in their manifest; they fail to
-- check out once it is gone.
CREATE FUNCTION api_repo_remove(p_user uuid, p_repo uuid, p_remote text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_c    repo_connections%ROWTYPE;
	v_role text;
BEGIN
	SELECT * INTO v_c FROM repo_connections WHERE id = p_repo FOR UPDATE;
	v_role := CASE WHEN FOUND THEN api_role(p_user, v_c.project_id) END;
	IF v_role IS NULL THEN
		RETURN api_err(404, 'not_found', 'no such repository');
	ELSIF v_role <> 'admin' THEN
		RETURN api_err(403, 'forbidden', 'only a project admin may remove repositories');
	END IF;
	DELETE FROM repo_connections WHERE id = p_repo;
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'repo.remove', 'repo_connection', p_repo::text, v_c.project_id,
	        p_remote, jsonb_build_object('name', v_c.name));
	RETURN api_ok(200, jsonb_build_object('removed', p_repo), v_role);
END
$$;

------------------------------------------------------------------------
-- Authentication changes
------------------------------------------------------------------------

-- httpd caches token lookups for a few seconds (httpd/authcache.c).  Any
-- change that could make a cached answer wrong NOTIFYs auth_changed in its
-- own transaction (delivered at commit, once per transaction), and the
-- supervisor's LISTEN connection tells httpd to forget everything.
CREATE FUNCTION notify_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('auth_changed', '');
	RETURN NULL;
END
$$;
CREATE TRIGGER api_tokens_auth_changed
	AFTER UPDATE OF token_hash, user_id, expires_at, revoked_at OR DELETE ON api_tokens
	FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_changed();
CREATE TRIGGER users_auth_changed
	AFTER UPDATE OF name, display_name, disabled_at OR DELETE ON users
	FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_changed();
CREATE TRIGGER memberships_auth_changed
	AFTER INSERT OR UPDATE OR DELETE ON memberships
	FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_changed();
