-- The revision a run checks out (the template's workspace.ref; DESIGN
-- 3.8).  A template names it as a literal ref, judged when the template is
-- compiled (tmpl/ref.c), or as text holding ${params.NAME} of string
-- parameters; at submit that is expanded with the run's params and judged
-- here by the same rules (ref_problem), so that a ref that reaches the git
-- helper is never an option, a revision expression or a path trick.  The
-- run keeps it in runs.ref (NULL: the remote's default branch); run_setup
-- gives it to the supervisor with the repository connection's id; and
-- run_checked_out records in the event workspace.ready which ref the
-- checkout resolved.  Tested in tests/integration/test_ref_sql.sh (with
-- the cases of tests/ref_cases.txt, which tests/unit/test_tmpl.c checks
-- against the C rules too) and test_api_runs.sh.

-- ref_problem(ref) -> NULL when ref may name the revision a run checks
-- out, else why not: tmpl_ref_problem's rules (tmpl/tmpl.h) and reasons,
-- judged in the same order.  A full commit id (40 or 64 lower-case hex
-- digits), or a git ref name, optionally prefixed refs/heads/ or
-- refs/tags/: 1 to 255 bytes; no control character or DEL, no space, none
-- of ~ ^ : ? * [ \; not starting with '-' (after the prefix neither) or
-- '/'; not ending with '/' or '.'; no "//", "..", "@{"; not "@" (after the
-- prefix neither); no component starting with '.' or ending with ".lock".
-- NULL for NULL: no ref, nothing to judge.
CREATE FUNCTION ref_problem(p_ref text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
	v_rest text;
	c      text;
BEGIN
	IF p_ref = '' THEN
		RETURN 'must not be empty';
	ELSIF octet_length(p_ref) > 255 THEN
		RETURN 'must be at most 255 bytes';
	ELSIF p_ref ~ '^([0-9a-f]{40}|[0-9a-f]{64})$' THEN
		RETURN NULL;
	ELSIF p_ref ~ '[\x01-\x1f\x7f]' THEN
		RETURN 'must not contain control characters';
	ELSIF strpos(p_ref, ' ') > 0 THEN
		RETURN 'must not contain a space';
	END IF;
	FOREACH c IN ARRAY ARRAY['~', '^', ':', '?', '*', '[', '\'] LOOP
		IF strpos(p_ref, c) > 0 THEN
			RETURN format('must not contain ''%s''', c);
		END IF;
	END LOOP;
	v_rest := CASE WHEN left(p_ref, 11) = 'refs/heads/' THEN substr(p_ref, 12)
	               WHEN left(p_ref, 10) = 'refs/tags/' THEN substr(p_ref, 11)
	               ELSE p_ref END;
	RETURN CASE
	    WHEN left(p_ref, 1) = '-' OR left(v_rest, 1) = '-' THEN 'must not start with ''-'''
	    WHEN left(p_ref, 1) = '/' THEN 'must not start with ''/'''
	    WHEN right(p_ref, 1) = '/' THEN 'must not end with ''/'''
	    WHEN right(p_ref, 1) = '.' THEN 'must not end with ''.'''
	    WHEN strpos(p_ref, '//') > 0 THEN 'must not contain ''//'''
	    WHEN strpos(p_ref, '..') > 0 THEN 'must not contain ''..'''
	    WHEN strpos(p_ref, '@{') > 0 THEN 'must not contain ''@{'''
	    WHEN v_rest = '@' THEN 'must not be ''@'''
	    WHEN p_ref ~ '(^|/)\.' THEN 'must not have a component starting with ''.'''
	    WHEN p_ref ~ '\.lock(/|$)' THEN 'must not have a component ending with ''.lock'''
	    END;
END
$$;

-- The run's ref as submitted; NULL: the remote's default branch.  The
-- CHECK is ref_problem's rules in one regular expression (the lookaheads
-- refuse what may not start, end or occur anywhere, the class the
-- characters), so that a row written by anything but api_submit_run keeps
-- them too.
ALTER TABLE runs ADD COLUMN ref text CONSTRAINT runs_ref_check CHECK (
	octet_length(ref) <= 255 AND
	ref ~ ('^(?!-|/|\.|refs/(heads|tags)/-|(refs/(heads|tags)/)?@$)'
	       '(?!.*(//|\.\.|@\{|/\.|\.lock/|\.lock$|[/.]$))'
	       '[^\x01-\x20\x7f~^:?*[\\]+$'));

-- tmpl_expand(text, params) -> text with each ${params.NAME} replaced by
-- that parameter's value in params (a string as it is, a number or a bool
-- as JSON writes it, nothing when it has none), exactly as the runner's
-- expand() does; other text as it is.  NULL for NULL text.
CREATE FUNCTION tmpl_expand(p_text text, p_params jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
	v_out  text := '';
	v_rest text := p_text;
	i      integer;
	j      integer;
BEGIN
	IF p_text IS NULL THEN
		RETURN NULL;
	END IF;
	LOOP
		i := strpos(v_rest, '${params.');
		EXIT WHEN i = 0;
		j := strpos(substr(v_rest, i + 9), '}');
		EXIT WHEN j = 0;
		v_out := v_out || left(v_rest, i - 1) ||
		         coalesce(p_params->>substr(v_rest, i + 9, j - 1), '');
		v_rest := substr(v_rest, i + 9 + j);
	END LOOP;
	RETURN v_out || v_rest;
END
$$;

-- tmpl_ref_names(text) -> the names of the parameters text refers to
-- (${params.NAME}), each once, in the order they first appear: a jsonb
-- array, empty for none (and for NULL).
CREATE FUNCTION tmpl_ref_names(p_text text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT coalesce(jsonb_agg(x.name ORDER BY x.first), '[]')
	FROM (SELECT m[1] AS name, min(n) AS first
	      FROM regexp_matches(p_text, '\$\{params\.([^}]*)\}', 'g') WITH ORDINALITY AS r(m, n)
	      GROUP BY m[1]) x
$$;

-- The run as the API shows it (0006's), with its ref beside its base commit.
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
	    'base_commit', r.base_commit, 'ref', r.ref, 'error', r.error,
	    'last_event_seq', r.next_event_seq - 1,
	    'created_at', api_ts(r.created_at), 'started_at', api_ts(r.started_at),
	    'finished_at', api_ts(r.finished_at))
$$;

------------------------------------------------------------------------
-- Submitting a run: 0003's api_submit_run, restated whole with the ref
------------------------------------------------------------------------

-- api_submit_run(user, project, template, params, idempotency_key, remote)
-- In one transaction: the caller is an admin or member of the project; the
-- latest version of the template; params checked against its declarations
-- (every unknown, missing or mistyped one reported in "details"), defaults
-- filled in, repoRef params resolved to a repository connection of THIS
-- project only; the template's workspace.ref expanded with those params
-- and judged by the ref rules (a bad one is a 422 invalid_ref naming the
-- field and the parameters it is made from; an empty one, or none, is the
-- remote's default branch: NULL); the resource manifest resolved against this project's
-- grants and pinned (a required resource not granted, or granted but not
-- registered, is a named 422); the run inserted queued with its first
-- event 'run.queued' and an audit row; NOTIFY run_queued '<run>'.
-- With an idempotency key, a run of the same project with the same key is
-- returned as it is (200) when it was submitted with the same template and
-- the same params once defaults are filled in, and refused (409
-- idempotency_conflict) otherwise; a retry is checked like a first submit
-- (an invalid one is a 422); two racing submits with one key make one run.
CREATE OR REPLACE FUNCTION api_submit_run(p_user uuid, p_project uuid, p_template text, p_params jsonb,
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
	v_reftext  text;
	v_ref      text;
	v_why      text;
	v_names    jsonb;
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

	-- the revision to check out, from the params as they are stored
	v_reftext := v_tmpl.compiled->'workspace'->>'ref';
	v_ref := nullif(tmpl_expand(v_reftext, v_params), '');
	v_why := ref_problem(v_ref);
	IF v_why IS NOT NULL THEN
		v_names := tmpl_ref_names(v_reftext);
		RETURN api_err(422, 'invalid_ref', 'workspace.ref: ' || v_why ||
		    CASE jsonb_array_length(v_names) WHEN 0 THEN ''
		         WHEN 1 THEN ' (made from parameter ' || (v_names->>0) || ')'
		         ELSE ' (made from parameters ' || (SELECT string_agg(n, ', ')
		                                            FROM jsonb_array_elements_text(v_names) n) || ')'
		    END,
		    jsonb_build_object('field', 'workspace.ref', 'params', v_names) ||
		    CASE WHEN jsonb_array_length(v_names) > 0
		         THEN jsonb_build_object('param', v_names->0) ELSE '{}' END);
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
		                  manifest, submitted_by, idempotency_key, budget_usd_micros, ref)
		VALUES (p_project, v_tmpl.id, v_tmpl.name, v_tmpl.version, v_params, v_manifest,
		        p_user, p_idem, (v_tmpl.compiled->'budget'->>'usd_micros')::bigint, v_ref)
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

------------------------------------------------------------------------
-- The supervisor's part: setting a run up, recording its checkout
------------------------------------------------------------------------

-- run_setup(run): 0005's, with two more columns after the others:
-- repo_id, the id of the workspace's repository connection (NULL when the
-- template names none, or it no longer exists: repo_missing), and ref, the
-- run's ref (NULL: the remote's default branch).  Its row type changes, so
-- it is dropped and made again.
DROP FUNCTION run_setup(uuid);
CREATE FUNCTION run_setup(p_run uuid)
RETURNS TABLE (status text, url text, token_ciphertext bytea, token_nonce bytea,
               access text, base_commit text, repo_missing boolean, repo_id uuid, ref text)
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
	ref := r.ref;
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
			repo_id := c.id;
		END IF;
	END IF;
	RETURN NEXT;
END
$$;

-- run_checked_out(run, owner, base, ref) -> recorded?  The base commit of
-- the run's workspace, once, with the event workspace.ready {base_commit,
-- ref}, ref being the ref the checkout resolved (the default branch's
-- name, the tag, the commit id itself ...) as the supervisor gives it, ''
-- included.  In place of 0005's run_checked_out(run, owner, base).
DROP FUNCTION run_checked_out(uuid, text, text);
CREATE FUNCTION run_checked_out(p_run uuid, p_owner text, p_base text, p_ref text)
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
	    jsonb_build_object('base_commit', p_base, 'ref', p_ref));
	RETURN true;
END
$$;
