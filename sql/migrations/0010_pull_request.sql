-- Pull requests (the template step kind pull_request; DESIGN 3.8).  A
-- repository connection names its forge (github, gitlab or none: push the
-- branch, open nothing) and the forge's API (NULL: the forge's public
-- one, common/forge.h); the run keeps the ref its checkout resolved, so
-- that a pull request's base defaults to it after a restart too; and
-- run_pull_requests records, as each happens, the branch and commit a
-- run pushed and the pull request it opened, so that a runner killed
-- between the push and the pull request, or a retried step, finishes the
-- same one (the git helper's push takes the recorded commit as its lease).
-- Tested in tests/integration/test_pr_sql.sh and test_pr.sh.

------------------------------------------------------------------------
-- Connections: the forge
------------------------------------------------------------------------

-- An API URL as common/forge.c leaves it after its check: https, a host,
-- maybe a path, no credentials, query, fragment or trailing slash.
CREATE FUNCTION forge_api_url_ok(p_url text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_url IS NULL OR (length(p_url) <= 512 AND p_url !~ '[[:space:][:cntrl:]]' AND
	    p_url ~ '^https://[^/@?#]+(/[^?#]*[^/?#])?$')
$$;

ALTER TABLE repo_connections
    ADD COLUMN forge text NOT NULL DEFAULT 'none' CHECK (forge IN ('none', 'github', 'gitlab')),
    ADD COLUMN api_url text CHECK (forge_api_url_ok(api_url));

-- The forge a connection has unless it names one: GitHub's and GitLab's
-- public hosts are theirs; anything else opens nothing.
CREATE FUNCTION forge_of_url(p_url text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN lower(p_url) ~ '^https://github\.com/' THEN 'github'
	            WHEN lower(p_url) ~ '^https://gitlab\.com/' THEN 'gitlab'
	            ELSE 'none' END
$$;

UPDATE repo_connections SET forge = forge_of_url(url);

CREATE OR REPLACE FUNCTION repo_json(c repo_connections) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object('id', c.id, 'name', c.name, 'url', c.url,
	    'has_token', c.token_nonce IS NOT NULL, 'forge', c.forge, 'api_url', c.api_url,
	    'created_at', api_ts(c.created_at))
$$;

-- api_repo_add(user, project, name, url, ciphertext, nonce, remote, forge,
-- api_url): 0003's, with the forge (NULL: forge_of_url) and its API URL
-- (NULL: the forge's public API).  httpd has checked both with
-- common/forge.c; these checks are the last line, naming the field.
DROP FUNCTION api_repo_add(uuid, uuid, text, text, bytea, bytea, text);
CREATE FUNCTION api_repo_add(p_user uuid, p_project uuid, p_name text, p_url text,
                             p_ct bytea, p_nonce bytea, p_remote text, p_forge text,
                             p_api_url text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_role  text := api_role(p_user, p_project);
	v_forge text := coalesce(p_forge, forge_of_url(p_url));
	v_c     repo_connections%ROWTYPE;
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
	ELSIF v_forge NOT IN ('none', 'github', 'gitlab') THEN
		RETURN api_err(422, 'invalid_field', 'forge must be github, gitlab or none',
		    '{"field":"forge"}');
	ELSIF NOT forge_api_url_ok(p_api_url) OR (p_api_url IS NOT NULL AND v_forge = 'none') THEN
		RETURN api_err(422, 'invalid_field',
		    'api_url must be https://HOST[/PATH] without credentials, query or fragment, '
		    'and only with a forge', '{"field":"api_url"}');
	ELSIF (p_ct IS NULL) <> (p_nonce IS NULL) THEN
		RAISE EXCEPTION 'api_repo_add: ciphertext and nonce go together'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	INSERT INTO repo_connections (project_id, name, url, token_ciphertext, token_nonce, forge,
	                              api_url)
	VALUES (p_project, p_name, p_url, p_ct, p_nonce, v_forge, p_api_url)
	ON CONFLICT (project_id, name) DO NOTHING
	RETURNING * INTO v_c;
	IF NOT FOUND THEN
		RETURN api_err(409, 'repo_exists', 'the project has a repository of that name',
		               '{"field":"name"}');
	END IF;
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'repo.add', 'repo_connection', v_c.id::text, p_project, p_remote,
	        jsonb_build_object('name', v_c.name, 'url', v_c.url, 'token', p_ct IS NOT NULL,
	                           'forge', v_c.forge, 'api_url', v_c.api_url));
	RETURN api_ok(201, repo_json(v_c), v_role);
END
$$;

-- run_setup(run): 0009's, with the connection's forge and API URL after
-- the others.
DROP FUNCTION run_setup(uuid);
CREATE FUNCTION run_setup(p_run uuid)
RETURNS TABLE (status text, url text, token_ciphertext bytea, token_nonce bytea,
               access text, base_commit text, repo_missing boolean, repo_id uuid, ref text,
               forge text, api_url text)
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
			forge := c.forge;
			api_url := c.api_url;
		END IF;
	END IF;
	RETURN NEXT;
END
$$;

------------------------------------------------------------------------
-- Runs: the ref checked out, and the pull request
------------------------------------------------------------------------

ALTER TABLE runs ADD COLUMN checked_out_ref text
    CHECK (checked_out_ref IS NULL OR (checked_out_ref <> '' AND ref_problem(checked_out_ref) IS NULL));

-- run_checked_out(run, owner, base, ref): 0009's, keeping the ref too.
CREATE OR REPLACE FUNCTION run_checked_out(p_run uuid, p_owner text, p_base text, p_ref text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	UPDATE runs SET base_commit = p_base,
	                checked_out_ref = CASE WHEN p_ref <> '' AND ref_problem(p_ref) IS NULL
	                                       THEN p_ref END
	WHERE id = p_run AND base_commit IS NULL;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM append_run_event(p_run, 'workspace.ready',
	    jsonb_build_object('base_commit', p_base, 'ref', p_ref));
	RETURN true;
END
$$;

-- A branch a run pushes: a ref name by ref_problem's rules that names a
-- branch by its short name (no refs/ prefix, no commit id).
CREATE FUNCTION pr_branch_ok(p_branch text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_branch IS NOT NULL AND ref_problem(p_branch) IS NULL AND p_branch !~ '^refs/' AND
	       p_branch !~ '^([0-9a-f]{40}|[0-9a-f]{64})$' AND p_branch <> 'HEAD'
$$;

-- What a run pushed and opened.  pushed_commit is the lease of the next
-- push; number and url are set once the pull request exists (never for a
-- connection whose forge is none).
CREATE TABLE run_pull_requests (
	run_id        uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	branch        text NOT NULL CHECK (pr_branch_ok(branch)),
	pushed_commit text NOT NULL CHECK (pushed_commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
	number        bigint CHECK (number > 0),
	url           text CHECK (url IS NULL OR (length(url) <= 1024 AND
	                                         url ~ '^https://[^[:space:][:cntrl:]]+$')),
	draft         boolean,
	pushed_at     timestamptz NOT NULL DEFAULT now(),
	opened_at     timestamptz,
	CHECK ((number IS NULL) = (url IS NULL))
);

-- pr_state(run) -> one row: what is recorded (branch, pushed_commit,
-- number; NULL for nothing yet), the ref the run checked out, and the
-- run's creation time in seconds (the pushed commit's time: the same
-- change makes the same commit, so a push that was not recorded is
-- recognised by the next attempt).
CREATE FUNCTION pr_state(p_run uuid)
RETURNS TABLE (branch text, pushed_commit text, number bigint, checked_out_ref text,
               created bigint)
LANGUAGE sql STABLE AS $$
	SELECT p.branch, p.pushed_commit, p.number, r.checked_out_ref,
	       extract(epoch FROM date_trunc('second', r.created_at))::bigint
	FROM runs r LEFT JOIN run_pull_requests p ON p.run_id = r.id
	WHERE r.id = p_run
$$;

-- pr_pushed(run, owner, step, attempt, branch, commit, already) -> recorded?
-- (false: the lease is lost).  The branch and commit, and the event
-- pull_request.pushed {step_id, attempt, branch, commit, already}.  A run
-- keeps one branch: another one is refused.
CREATE FUNCTION pr_pushed(p_run uuid, p_owner text, p_step text, p_attempt integer,
                          p_branch text, p_commit text, p_already boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	INSERT INTO run_pull_requests AS p (run_id, branch, pushed_commit)
	VALUES (p_run, p_branch, p_commit)
	ON CONFLICT (run_id) DO UPDATE SET pushed_commit = excluded.pushed_commit,
	                                   pushed_at = now()
	    WHERE p.branch = excluded.branch;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'pr_pushed: the run pushed branch %, not %',
		    (SELECT branch FROM run_pull_requests WHERE run_id = p_run), p_branch
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM append_run_event(p_run, 'pull_request.pushed', jsonb_build_object(
	    'step_id', p_step, 'attempt', p_attempt, 'branch', p_branch, 'commit', p_commit,
	    'already', p_already));
	RETURN true;
END
$$;

-- pr_opened(run, owner, step, attempt, number, url, opened, draft, note)
-- -> recorded?  The pull request, after pr_pushed, and the event
-- pull_request.opened (opened) or pull_request.updated {step_id, attempt,
-- number, url, draft, note (when there is one)}.
CREATE FUNCTION pr_opened(p_run uuid, p_owner text, p_step text, p_attempt integer,
                          p_number bigint, p_url text, p_opened boolean, p_draft boolean,
                          p_note text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN false;
	END IF;
	UPDATE run_pull_requests SET number = p_number, url = p_url, draft = p_draft,
	                             opened_at = coalesce(opened_at, now())
	WHERE run_id = p_run;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'pr_opened: the run pushed nothing'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM append_run_event(p_run,
	    CASE WHEN p_opened THEN 'pull_request.opened' ELSE 'pull_request.updated' END,
	    jsonb_build_object('step_id', p_step, 'attempt', p_attempt, 'number', p_number,
	                       'url', p_url, 'draft', p_draft)
	    || CASE WHEN coalesce(p_note, '') <> '' THEN jsonb_build_object('note', p_note)
	            ELSE '{}' END);
	RETURN true;
END
$$;

-- A runner may say on its own that a pull request step had nothing to do.
CREATE OR REPLACE FUNCTION runner_event_type_ok(p_type text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_type IN ('step.output', 'artifact.rejected', 'agent.message', 'agent.tool_call',
	                  'agent.tool_result', 'agent.usage', 'budget.exceeded',
	                  'pull_request.skipped')
$$;

-- The run as the API shows it: 0009's, with the ref its checkout resolved
-- and its pull request (null until it pushed).
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
	    'base_commit', r.base_commit, 'ref', r.ref, 'checked_out_ref', r.checked_out_ref,
	    'error', r.error,
	    'pull_request', (SELECT jsonb_build_object('branch', p.branch,
	                         'commit', p.pushed_commit, 'number', p.number, 'url', p.url,
	                         'draft', p.draft, 'pushed_at', api_ts(p.pushed_at),
	                         'opened_at', api_ts(p.opened_at))
	                     FROM run_pull_requests p WHERE p.run_id = r.id),
	    'last_event_seq', r.next_event_seq - 1,
	    'created_at', api_ts(r.created_at), 'started_at', api_ts(r.started_at),
	    'finished_at', api_ts(r.finished_at))
$$;
