--
-- PostgreSQL database dump
--

\restrict IHW95ZYUmHxXwfYeteR207kNdPYn7SMtXFzwVSnWrArUfWno3eJtXLpaGctmXrS

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: agent_results_extend(jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.agent_results_extend(p_old jsonb, p_new jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT coalesce(p_old->>'role' = 'user' AND p_new->>'role' = 'user'
	    AND jsonb_typeof(p_old->'content') = 'array' AND jsonb_typeof(p_new->'content') = 'array'
	    AND jsonb_array_length(p_new->'content') > jsonb_array_length(p_old->'content')
	    AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_new->'content') e
	                    WHERE e->>'type' IS DISTINCT FROM 'tool_result')
	    AND p_old->'content' = (SELECT jsonb_agg(x.e ORDER BY x.i)
	                            FROM jsonb_array_elements(p_new->'content') WITH ORDINALITY x(e, i)
	                            WHERE x.i <= jsonb_array_length(p_old->'content')), false)
$$;


--
-- Name: agent_session(uuid, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.agent_session(p_run uuid, p_owner text, p_session text) RETURNS TABLE(seq integer, message jsonb)
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF (run_lock(p_run, p_owner)).id IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY SELECT m.seq, m.message FROM agent_messages m
	    WHERE m.run_id = p_run AND m.session = p_session ORDER BY m.seq;
END
$$;


--
-- Name: agent_turn(uuid, text, text, integer, text, integer, jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.agent_turn(p_run uuid, p_owner text, p_step text, p_attempt integer, p_session text, p_seq integer, p_message jsonb, p_events jsonb) RETURNS boolean
    LANGUAGE plpgsql
    AS $_$
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
$_$;


--
-- Name: api_cancel_run(uuid, uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_cancel_run(p_user uuid, p_run uuid, p_remote text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: api_decide_approval(uuid, uuid, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_decide_approval(p_user uuid, p_approval uuid, p_decision text, p_comment text, p_remote text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: api_err(integer, text, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_err(p_status integer, p_code text, p_message text, p_extra jsonb DEFAULT '{}'::jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT jsonb_build_object('status', p_status, 'error',
	    jsonb_build_object('code', p_code, 'message', p_message) || coalesce(p_extra, '{}'))
$$;


--
-- Name: api_member_change(uuid, uuid, uuid, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_member_change(p_user uuid, p_project uuid, p_membership uuid, p_name text, p_role text, p_remote text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: api_ok(integer, jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_ok(p_status integer, p_body jsonb, p_role text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT jsonb_build_object('status', p_status, 'body', p_body, 'role', p_role)
$$;


--
-- Name: api_repo_add(uuid, uuid, text, text, bytea, bytea, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_repo_add(p_user uuid, p_project uuid, p_name text, p_url text, p_ct bytea, p_nonce bytea, p_remote text, p_forge text, p_api_url text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
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
$_$;


--
-- Name: api_repo_remove(uuid, uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_repo_remove(p_user uuid, p_repo uuid, p_remote text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: api_role(uuid, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_role(p_user uuid, p_project uuid) RETURNS text
    LANGUAGE sql STABLE
    AS $$
	SELECT role FROM api_members WHERE user_id = p_user AND project_id = p_project
$$;


--
-- Name: api_set_budget(uuid, uuid, text, bigint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_set_budget(p_user uuid, p_run uuid, p_phase text, p_usd bigint, p_remote text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: ref_problem(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ref_problem(p_ref text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $_$
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
$_$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    template_id uuid NOT NULL,
    template_name text NOT NULL,
    template_version integer NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    manifest jsonb DEFAULT '{}'::jsonb NOT NULL,
    submitted_by uuid NOT NULL,
    idempotency_key text,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    next_event_seq bigint DEFAULT 1 NOT NULL,
    cancel_requested_at timestamp with time zone,
    budget_usd_micros bigint,
    spent_usd_micros bigint DEFAULT 0 NOT NULL,
    tokens_in bigint DEFAULT 0 NOT NULL,
    tokens_out bigint DEFAULT 0 NOT NULL,
    base_commit text,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    phase_budgets jsonb DEFAULT '{}'::jsonb NOT NULL,
    workspace_host text,
    ref text,
    checked_out_ref text,
    CONSTRAINT runs_base_commit_check CHECK ((base_commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'::text)),
    CONSTRAINT runs_budget_usd_micros_check CHECK ((budget_usd_micros >= 0)),
    CONSTRAINT runs_checked_out_ref_check CHECK (((checked_out_ref IS NULL) OR ((checked_out_ref <> ''::text) AND (public.ref_problem(checked_out_ref) IS NULL)))),
    CONSTRAINT runs_error_check CHECK ((length(error) <= 8192)),
    CONSTRAINT runs_error_failed CHECK (((error IS NULL) OR (status = ANY (ARRAY['failed'::text, 'cancelled'::text])))),
    CONSTRAINT runs_finished_iff_terminal CHECK (((finished_at IS NOT NULL) = (status = ANY (ARRAY['succeeded'::text, 'failed'::text, 'cancelled'::text])))),
    CONSTRAINT runs_idempotency_key_check CHECK ((idempotency_key ~ '^[[:graph:]]{1,128}$'::text)),
    CONSTRAINT runs_lease_live CHECK (((lease_owner IS NULL) OR (status = ANY (ARRAY['running'::text, 'waiting_approval'::text])))),
    CONSTRAINT runs_lease_owner_check CHECK ((lease_owner ~ '^[[:graph:]]{1,128}$'::text)),
    CONSTRAINT runs_lease_pair CHECK (((lease_owner IS NULL) = (lease_expires_at IS NULL))),
    CONSTRAINT runs_live_started CHECK (((started_at IS NOT NULL) OR (status <> ALL (ARRAY['running'::text, 'waiting_approval'::text])))),
    CONSTRAINT runs_manifest_check CHECK ((jsonb_typeof(manifest) = 'object'::text)),
    CONSTRAINT runs_next_event_seq_check CHECK ((next_event_seq >= 1)),
    CONSTRAINT runs_params_check CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT runs_phase_budgets_check CHECK ((jsonb_typeof(phase_budgets) = 'object'::text)),
    CONSTRAINT runs_queued_not_started CHECK (((started_at IS NULL) OR (status <> 'queued'::text))),
    CONSTRAINT runs_ref_check CHECK (((octet_length(ref) <= 255) AND (ref ~ '^(?!-|/|\.|refs/(heads|tags)/-|(refs/(heads|tags)/)?@$)(?!.*(//|\.\.|@\{|/\.|\.lock/|\.lock$|[/.]$))[^\x01-\x20\x7f~^:?*[\\]+$'::text))),
    CONSTRAINT runs_spent_usd_micros_check CHECK ((spent_usd_micros >= 0)),
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'waiting_approval'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text]))),
    CONSTRAINT runs_time_order CHECK (((started_at >= created_at) AND (finished_at >= COALESCE(started_at, created_at)))),
    CONSTRAINT runs_tokens_in_check CHECK ((tokens_in >= 0)),
    CONSTRAINT runs_tokens_out_check CHECK ((tokens_out >= 0)),
    CONSTRAINT runs_workspace_host_check CHECK ((workspace_host ~ '^[0-9a-f]{32}$'::text))
);


--
-- Name: api_submit_replay(public.runs, text, jsonb, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_submit_replay(r public.runs, p_template text, p_params jsonb, p_role text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
	SELECT CASE WHEN r.template_name = p_template AND r.params = p_params
	            THEN api_ok(200, run_json(r), p_role)
	            ELSE api_err(409, 'idempotency_conflict',
	                         'this Idempotency-Key was used for a different request',
	                         jsonb_build_object('run_id', r.id)) END
$$;


--
-- Name: api_submit_run(uuid, uuid, text, jsonb, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_submit_run(p_user uuid, p_project uuid, p_template text, p_params jsonb, p_idem text, p_remote text) RETURNS jsonb
    LANGUAGE plpgsql
    AS $_$
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
$_$;


--
-- Name: api_ts(timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.api_ts(t timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
	SELECT (to_json(date_trunc('second', t AT TIME ZONE 'UTC')) #>> '{}') || 'Z'
$$;


--
-- Name: append_run_event(uuid, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.append_run_event(p_run uuid, p_type text, p_payload jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_seq bigint;
BEGIN
	WITH s AS (
		UPDATE runs SET next_event_seq = next_event_seq + 1
		WHERE id = p_run AND finished_at IS NULL
		RETURNING id, next_event_seq - 1 AS seq
	)
	INSERT INTO run_events (run_id, seq, type, payload)
	SELECT s.id, s.seq, p_type, coalesce(p_payload, '{}') FROM s
	RETURNING seq INTO v_seq;
	IF v_seq IS NULL THEN
		IF EXISTS (SELECT 1 FROM runs WHERE id = p_run) THEN
			RAISE EXCEPTION 'append_run_event: run % is finished', p_run
			    USING ERRCODE = 'object_not_in_prerequisite_state';
		END IF;
		RAISE EXCEPTION 'append_run_event: no run %', p_run USING ERRCODE = 'no_data_found';
	END IF;
	PERFORM pg_notify('run_events', p_run::text || ':' || v_seq);
	RETURN v_seq;
END
$$;


--
-- Name: approvals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approvals (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    decided_by uuid,
    decided_at timestamp with time zone,
    comment text,
    kind text DEFAULT 'checkpoint'::text NOT NULL,
    CONSTRAINT approvals_comment_check CHECK ((length(comment) <= 4096)),
    CONSTRAINT approvals_comment_with_decision CHECK (((comment IS NULL) OR (status = ANY (ARRAY['approved'::text, 'rejected'::text])))),
    CONSTRAINT approvals_decided_iff_not_pending CHECK (((decided_at IS NULL) = (status = 'pending'::text))),
    CONSTRAINT approvals_decider_iff_decision CHECK (((decided_by IS NOT NULL) = (status = ANY (ARRAY['approved'::text, 'rejected'::text])))),
    CONSTRAINT approvals_expiry_after_request CHECK ((expires_at > requested_at)),
    CONSTRAINT approvals_kind_check CHECK ((kind = ANY (ARRAY['checkpoint'::text, 'budget'::text]))),
    CONSTRAINT approvals_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'approved'::text, 'rejected'::text, 'expired'::text]))),
    CONSTRAINT approvals_step_id_check CHECK ((step_id ~ '^[a-z0-9_-]{1,64}$'::text)),
    CONSTRAINT approvals_time_order CHECK ((decided_at >= requested_at))
);


--
-- Name: approval_json(public.approvals); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approval_json(a public.approvals) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
	SELECT jsonb_build_object('id', a.id, 'run_id', a.run_id, 'step_id', a.step_id,
	    'kind', a.kind, 'status', a.status, 'requested_at', api_ts(a.requested_at),
	    'expires_at', api_ts(a.expires_at), 'decided_by', a.decided_by,
	    'decided_at', api_ts(a.decided_at), 'comment', a.comment)
$$;


--
-- Name: approval_wait(uuid, text, text, integer, text, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approval_wait(p_run uuid, p_owner text, p_step text, p_attempt integer, p_kind text, p_message text, p_expires_s integer) RETURNS uuid
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: budget_wait(uuid, text, text, integer, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.budget_wait(p_run uuid, p_owner text, p_step text, p_attempt integer, p_detail jsonb) RETURNS void
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: checkpoint_wait(uuid, text, text, integer, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.checkpoint_wait(p_run uuid, p_owner text, p_step text, p_attempt integer, p_message text, p_expires_s integer) RETURNS uuid
    LANGUAGE sql
    AS $$
	SELECT approval_wait(p_run, p_owner, p_step, p_attempt, 'checkpoint', p_message, p_expires_s)
$$;


--
-- Name: claim_run(text, integer, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.claim_run(p_owner text, p_lease_secs integer, p_host text DEFAULT NULL::text) RETURNS TABLE(run_id uuid, previous_status text)
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: claim_run_started(text, integer, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.claim_run_started(p_owner text, p_lease_secs integer, p_host text DEFAULT NULL::text) RETURNS TABLE(run_id uuid, previous_status text)
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: decide_approval(uuid, text, uuid, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decide_approval(p_approval uuid, p_decision text, p_user uuid, p_comment text, p_remote_addr text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_run     uuid;
	v_project uuid;
	v_step    text;
BEGIN
	IF p_decision IS NULL OR p_decision NOT IN ('approved', 'rejected') THEN
		RAISE EXCEPTION 'decide_approval: decision must be approved or rejected'
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM 1 FROM users WHERE id = p_user AND disabled_at IS NULL;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'decide_approval: no active user %', p_user
		    USING ERRCODE = 'insufficient_privilege';
	END IF;
	SELECT run_id INTO v_run FROM approvals WHERE id = p_approval;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	SELECT project_id INTO v_project FROM runs
	WHERE id = v_run AND finished_at IS NULL FOR NO KEY UPDATE;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	UPDATE approvals
	SET status = p_decision, decided_by = p_user, decided_at = greatest(now(), requested_at),
	    comment = p_comment
	WHERE id = p_approval AND status = 'pending' AND expires_at > now()
	RETURNING step_id INTO v_step;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	PERFORM append_run_event(v_run, 'approval.' || p_decision,
	    jsonb_build_object('approval_id', p_approval, 'step_id', v_step,
	                       'decision', p_decision, 'decided_by', p_user,
	                       'comment', p_comment));
	INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id,
	                       project_id, remote_addr, detail)
	VALUES (p_user, 'user', 'approval.decide', 'approval', p_approval::text,
	        v_project, p_remote_addr,
	        jsonb_build_object('run_id', v_run, 'step_id', v_step, 'decision', p_decision));
	RETURN true;
END
$$;


--
-- Name: finalize_run(uuid, text, text, text, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.finalize_run(p_run uuid, p_from text, p_to text, p_error text, p_event_type text, p_event_payload jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
	v_status text;
	v_cancel timestamptz;
	v_seq    bigint;
BEGIN
	IF NOT coalesce((p_from, p_to) IN (('queued', 'failed'), ('queued', 'cancelled'),
	                                   ('running', 'succeeded'), ('running', 'failed'),
	                                   ('running', 'cancelled'), ('waiting_approval', 'failed'),
	                                   ('waiting_approval', 'cancelled')), false) THEN
		RAISE EXCEPTION 'finalize_run: illegal transition % -> %', p_from, p_to
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT status, cancel_requested_at INTO v_status, v_cancel
	FROM runs WHERE id = p_run FOR UPDATE;
	IF NOT FOUND OR v_status <> p_from OR (v_cancel IS NOT NULL AND p_to <> 'cancelled') THEN
		RETURN NULL;
	END IF;

	UPDATE run_steps
	SET status = CASE WHEN p_to = 'cancelled' THEN 'cancelled' ELSE 'crashed' END,
	    finished_at = greatest(now(), started_at)
	WHERE run_id = p_run AND status = 'running';
	UPDATE approvals SET status = 'expired', decided_at = greatest(now(), requested_at)
	WHERE run_id = p_run AND status = 'pending';

	WITH tot AS (
		SELECT coalesce(sum(cost_usd_micros), 0) AS cost,
		       coalesce(sum(input_tokens), 0) AS tin,
		       coalesce(sum(output_tokens), 0) AS tout
		FROM token_usage WHERE run_id = p_run
	), r AS (
		UPDATE runs
		SET status = p_to, finished_at = greatest(now(), coalesce(started_at, created_at)),
		    error = p_error, lease_owner = NULL, lease_expires_at = NULL,
		    spent_usd_micros = tot.cost, tokens_in = tot.tin, tokens_out = tot.tout,
		    next_event_seq = next_event_seq + 1
		FROM tot
		WHERE id = p_run
		RETURNING id, next_event_seq - 1 AS seq
	)
	INSERT INTO run_events (run_id, seq, type, payload)
	SELECT r.id, r.seq, p_event_type, coalesce(p_event_payload, '{}') FROM r
	RETURNING seq INTO v_seq;
	PERFORM pg_notify('run_events', p_run::text || ':' || v_seq);
	RETURN v_seq;
END
$$;


--
-- Name: forge_api_url_ok(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.forge_api_url_ok(p_url text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $_$
	SELECT p_url IS NULL OR (length(p_url) <= 512 AND p_url !~ '[[:space:][:cntrl:]]' AND
	    p_url ~ '^https://[^/@?#]+(/[^?#]*[^/?#])?$')
$_$;


--
-- Name: forge_of_url(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.forge_of_url(p_url text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT CASE WHEN lower(p_url) ~ '^https://github\.com/' THEN 'github'
	            WHEN lower(p_url) ~ '^https://gitlab\.com/' THEN 'gitlab'
	            ELSE 'none' END
$$;


--
-- Name: memberships; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.memberships (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    user_id uuid NOT NULL,
    role text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT memberships_role_check CHECK ((role = ANY (ARRAY['admin'::text, 'member'::text, 'viewer'::text])))
);


--
-- Name: membership_json(public.memberships); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.membership_json(m public.memberships) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
	SELECT jsonb_build_object('membership_id', m.id, 'id', u.id, 'name', u.name,
	    'display_name', u.display_name, 'role', m.role, 'disabled', u.disabled_at IS NOT NULL,
	    'since', api_ts(m.created_at))
	FROM users u WHERE u.id = m.user_id
$$;


--
-- Name: notify_approval_decided(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_approval_decided() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM pg_notify('run_queued', NEW.run_id::text);
	RETURN NULL;
END
$$;


--
-- Name: notify_auth_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.notify_auth_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM pg_notify('auth_changed', '');
	RETURN NULL;
END
$$;


--
-- Name: phase_budget(public.runs, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.phase_budget(r public.runs, p_phase text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
	SELECT coalesce((r.phase_budgets->>p_phase)::bigint,
	                (SELECT (ph->'budget'->>'usd_micros')::bigint
	                 FROM templates t, jsonb_array_elements(t.compiled->'phases') ph
	                 WHERE t.id = r.template_id AND ph->>'name' = p_phase))
$$;


--
-- Name: phase_start(uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.phase_start(p_run uuid, p_phase text) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM run_steps WHERE run_id = p_run AND phase_name = p_phase) THEN
		PERFORM append_run_event(p_run, 'phase.started', jsonb_build_object('phase', p_phase));
	END IF;
END
$$;


--
-- Name: pr_branch_ok(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.pr_branch_ok(p_branch text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $_$
	SELECT p_branch IS NOT NULL AND ref_problem(p_branch) IS NULL AND p_branch !~ '^refs/' AND
	       p_branch !~ '^([0-9a-f]{40}|[0-9a-f]{64})$' AND p_branch <> 'HEAD'
$_$;


--
-- Name: pr_opened(uuid, text, text, integer, bigint, text, boolean, boolean, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.pr_opened(p_run uuid, p_owner text, p_step text, p_attempt integer, p_number bigint, p_url text, p_opened boolean, p_draft boolean, p_note text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: pr_pushed(uuid, text, text, integer, text, text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.pr_pushed(p_run uuid, p_owner text, p_step text, p_attempt integer, p_branch text, p_commit text, p_already boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: pr_state(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.pr_state(p_run uuid) RETURNS TABLE(branch text, pushed_commit text, number bigint, checked_out_ref text, created bigint)
    LANGUAGE sql STABLE
    AS $$
	SELECT p.branch, p.pushed_commit, p.number, r.checked_out_ref,
	       extract(epoch FROM date_trunc('second', r.created_at))::bigint
	FROM runs r LEFT JOIN run_pull_requests p ON p.run_id = r.id
	WHERE r.id = p_run
$$;


--
-- Name: project_month_spend(uuid, date); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.project_month_spend(p_project uuid, p_month date) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: proxy_usage(uuid, text, integer, text, text, bigint, bigint, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.proxy_usage(p_run uuid, p_step text, p_attempt integer, p_provider text, p_model text, p_input bigint, p_output bigint, p_cache_read bigint, p_cache_write bigint, p_cost bigint) RETURNS uuid
    LANGUAGE sql
    AS $$
	INSERT INTO token_usage (run_id, step_id, attempt, provider, model, input_tokens,
	                         output_tokens, cache_read_tokens, cache_write_tokens,
	                         cost_usd_micros)
	VALUES (p_run, p_step, p_attempt, p_provider, p_model, p_input, p_output, p_cache_read,
	        p_cache_write, p_cost)
	RETURNING id
$$;


--
-- Name: refuse_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	RAISE EXCEPTION '%: % is not allowed', TG_TABLE_NAME, TG_OP
	    USING ERRCODE = 'insufficient_privilege';
END
$$;


--
-- Name: release_lease(uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.release_lease(p_run uuid, p_owner text) RETURNS boolean
    LANGUAGE sql
    AS $$
	UPDATE runs SET lease_expires_at = now() - interval '1 second'
	WHERE id = p_run AND lease_owner = p_owner AND status = 'running'
	RETURNING true
$$;


--
-- Name: renew_lease(uuid, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.renew_lease(p_run uuid, p_owner text, p_lease_secs integer) RETURNS boolean
    LANGUAGE sql
    AS $$
	UPDATE runs SET lease_expires_at = now() + make_interval(secs => p_lease_secs)
	WHERE id = p_run AND lease_owner = p_owner AND lease_expires_at > now()
	  AND status IN ('running', 'waiting_approval') AND p_lease_secs BETWEEN 1 AND 3600
	RETURNING true
$$;


--
-- Name: repo_connections; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.repo_connections (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    name text NOT NULL,
    url text NOT NULL,
    token_ciphertext bytea,
    token_nonce bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    forge text DEFAULT 'none'::text NOT NULL,
    api_url text,
    CONSTRAINT repo_connections_api_url_check CHECK (public.forge_api_url_ok(api_url)),
    CONSTRAINT repo_connections_forge_check CHECK ((forge = ANY (ARRAY['none'::text, 'github'::text, 'gitlab'::text]))),
    CONSTRAINT repo_connections_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'::text)),
    CONSTRAINT repo_connections_token_ciphertext_check CHECK ((octet_length(token_ciphertext) > 16)),
    CONSTRAINT repo_connections_token_nonce_check CHECK ((octet_length(token_nonce) = 24)),
    CONSTRAINT repo_connections_token_pair CHECK (((token_ciphertext IS NULL) = (token_nonce IS NULL))),
    CONSTRAINT repo_connections_url_check CHECK (((length(url) <= 2048) AND (url !~ '[[:space:][:cntrl:]]'::text) AND ((url ~ '^https://[^/@]+(/|$)'::text) OR (url ~ '^file:///'::text) OR (url ~ '^/'::text))))
);


--
-- Name: repo_json(public.repo_connections); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.repo_json(c public.repo_connections) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
	SELECT jsonb_build_object('id', c.id, 'name', c.name, 'url', c.url,
	    'has_token', c.token_nonce IS NOT NULL, 'forge', c.forge, 'api_url', c.api_url,
	    'created_at', api_ts(c.created_at))
$$;


--
-- Name: reserve_budget(uuid, text, integer, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.reserve_budget(p_run uuid, p_step text, p_attempt integer, p_amount bigint) RETURNS text
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: run_checked_out(uuid, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.run_checked_out(p_run uuid, p_owner text, p_base text, p_ref text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: run_finish(uuid, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.run_finish(p_run uuid, p_owner text, p_status text, p_error text) RETURNS text
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: run_json(public.runs); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.run_json(r public.runs) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: run_lock(uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.run_lock(p_run uuid, p_owner text) RETURNS public.runs
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: run_setup(uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.run_setup(p_run uuid) RETURNS TABLE(status text, url text, token_ciphertext bytea, token_nonce bytea, access text, base_commit text, repo_missing boolean, repo_id uuid, ref text, forge text, api_url text)
    LANGUAGE plpgsql STABLE
    AS $_$
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
$_$;


--
-- Name: runner_event(uuid, text, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.runner_event(p_run uuid, p_owner text, p_type text, p_payload jsonb) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: runner_event_type_ok(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.runner_event_type_ok(p_type text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
	SELECT p_type IN ('step.output', 'artifact.rejected', 'agent.message', 'agent.tool_call',
	                  'agent.tool_result', 'agent.usage', 'budget.exceeded',
	                  'pull_request.skipped')
$$;


--
-- Name: runner_load(uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.runner_load(p_run uuid, p_owner text) RETURNS TABLE(cancel boolean, template jsonb, params jsonb, steps jsonb, approvals jsonb)
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: runner_skills(uuid, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.runner_skills(p_run uuid, p_owner text, p_names jsonb) RETURNS TABLE(name text, version integer, body text)
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: settle_budget(uuid, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.settle_budget(p_run uuid, p_step text, p_attempt integer) RETURNS bigint
    LANGUAGE sql
    AS $$
	UPDATE budget_reservations b
	SET settled_at = now(),
	    settled_usd_micros = (SELECT coalesce(sum(cost_usd_micros), 0) FROM token_usage u
	                          WHERE u.run_id = b.run_id AND u.step_id = b.step_id
	                            AND u.attempt = b.attempt)
	WHERE b.run_id = p_run AND b.step_id = p_step AND b.attempt = p_attempt
	  AND b.settled_at IS NULL
	RETURNING settled_usd_micros
$$;


--
-- Name: settle_ended_attempt(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.settle_ended_attempt() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM settle_budget(NEW.run_id, NEW.step_id, NEW.attempt);
	RETURN NULL;
END
$$;


--
-- Name: settle_finished_run(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.settle_finished_run() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM settle_budget(b.run_id, b.step_id, b.attempt)
	FROM budget_reservations b WHERE b.run_id = NEW.id AND b.settled_at IS NULL;
	RETURN NULL;
END
$$;


--
-- Name: step_begin(uuid, text, text, text, integer, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.step_begin(p_run uuid, p_owner text, p_phase text, p_step text, p_attempt integer, p_kind text) RETURNS text
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: step_crash(uuid, text, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.step_crash(p_run uuid, p_owner text, p_step text, p_attempt integer) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: step_end(uuid, text, text, integer, text, integer, text, jsonb, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.step_end(p_run uuid, p_owner text, p_step text, p_attempt integer, p_status text, p_exit integer, p_error text, p_extra jsonb, p_artifacts jsonb) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: step_reserve(uuid, text, text, text, integer, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.step_reserve(p_run uuid, p_owner text, p_phase text, p_step text, p_attempt integer, p_default bigint) RETURNS TABLE(outcome text, amount bigint)
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: step_skip(uuid, text, text, text, text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.step_skip(p_run uuid, p_owner text, p_phase text, p_step text, p_when text, p_phase_done boolean) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: sweep_runs(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sweep_runs() RETURNS integer
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: tmpl_expand(text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tmpl_expand(p_text text, p_params jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $_$
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
$_$;


--
-- Name: tmpl_ref_names(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tmpl_ref_names(p_text text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
	SELECT coalesce(jsonb_agg(x.name ORDER BY x.first), '[]')
	FROM (SELECT m[1] AS name, min(n) AS first
	      FROM regexp_matches(p_text, '\$\{params\.([^}]*)\}', 'g') WITH ORDINALITY AS r(m, n)
	      GROUP BY m[1]) x
$_$;


--
-- Name: token_usage_run_open(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.token_usage_run_open() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	PERFORM 1 FROM runs WHERE id = NEW.run_id AND finished_at IS NULL FOR KEY SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'token_usage: run % is finished or does not exist', NEW.run_id
		    USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	RETURN NEW;
END
$$;


--
-- Name: transition_run(uuid, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.transition_run(p_run uuid, p_from text, p_to text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF p_to IN ('succeeded', 'failed', 'cancelled') THEN
		RAISE EXCEPTION 'transition_run: % is terminal, use finalize_run', p_to
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT coalesce((p_from, p_to) IN (('queued', 'running'), ('running', 'waiting_approval'),
	                                   ('waiting_approval', 'running')), false) THEN
		RAISE EXCEPTION 'transition_run: illegal transition % -> %', p_from, p_to
		    USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE runs SET status = p_to, started_at = coalesce(started_at, now())
	WHERE id = p_run AND status = p_from AND cancel_requested_at IS NULL;
	RETURN FOUND;
END
$$;


--
-- Name: wait_for_approval(uuid, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wait_for_approval(p_run uuid, p_owner text) RETURNS boolean
    LANGUAGE sql
    AS $$
	UPDATE runs SET status = 'waiting_approval', lease_owner = NULL, lease_expires_at = NULL
	WHERE id = p_run AND status = 'running' AND lease_owner = p_owner
	  AND lease_expires_at > now() AND cancel_requested_at IS NULL
	RETURNING true
$$;


--
-- Name: agent_messages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.agent_messages (
    run_id uuid NOT NULL,
    session text NOT NULL,
    seq integer NOT NULL,
    message jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_messages_message_check CHECK (((jsonb_typeof(message) = 'object'::text) AND COALESCE(((message ->> 'role'::text) = ANY (ARRAY['user'::text, 'assistant'::text])), false))),
    CONSTRAINT agent_messages_seq_check CHECK ((seq >= 0)),
    CONSTRAINT agent_messages_session_check CHECK ((session ~ '^[a-z0-9_-]{1,64}\.[0-9]{1,9}$'::text))
);


--
-- Name: users; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.users (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    display_name text DEFAULT ''::text NOT NULL,
    disabled_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT users_display_name_check CHECK (((length(display_name) <= 200) AND (display_name !~ '[[:cntrl:]]'::text))),
    CONSTRAINT users_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'::text))
);


--
-- Name: api_members; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.api_members AS
 SELECT m.user_id,
    m.project_id,
    m.role
   FROM (public.memberships m
     JOIN public.users u ON ((u.id = m.user_id)))
  WHERE (u.disabled_at IS NULL);


--
-- Name: api_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_tokens (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid NOT NULL,
    token_hash bytea NOT NULL,
    prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_tokens_check CHECK ((expires_at > created_at)),
    CONSTRAINT api_tokens_prefix_check CHECK ((prefix ~ '^[A-Za-z0-9_.-]{1,16}$'::text)),
    CONSTRAINT api_tokens_token_hash_check CHECK ((octet_length(token_hash) = 32))
);


--
-- Name: artifacts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.artifacts (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    key text NOT NULL,
    kind text NOT NULL,
    size bigint NOT NULL,
    sha256 bytea NOT NULL,
    inline bytea,
    store_path text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT artifacts_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT artifacts_inline_check CHECK ((octet_length(inline) <= 1048576)),
    CONSTRAINT artifacts_inline_size CHECK (((inline IS NULL) OR (octet_length(inline) = size))),
    CONSTRAINT artifacts_key_check CHECK ((key ~ '^[a-z0-9_-]{1,64}$'::text)),
    CONSTRAINT artifacts_kind_check CHECK ((kind = ANY (ARRAY['text'::text, 'md'::text, 'json'::text, 'patch'::text]))),
    CONSTRAINT artifacts_one_location CHECK ((num_nonnulls(inline, store_path) = 1)),
    CONSTRAINT artifacts_sha256_check CHECK ((octet_length(sha256) = 32)),
    CONSTRAINT artifacts_size_check CHECK ((size > 0)),
    CONSTRAINT artifacts_store_path_digest CHECK (((store_path IS NULL) OR (store_path = ((substr(encode(sha256, 'hex'::text), 1, 2) || '/'::text) || encode(sha256, 'hex'::text)))))
);


--
-- Name: audit_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor_user_id uuid,
    actor_kind text NOT NULL,
    action text NOT NULL,
    object_kind text NOT NULL,
    object_id text,
    project_id uuid,
    remote_addr text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT audit_log_action_check CHECK (((length(action) <= 64) AND (action ~ '^[a-z_]+(\.[a-z_]+)+$'::text))),
    CONSTRAINT audit_log_actor_kind_check CHECK ((actor_kind = ANY (ARRAY['user'::text, 'operator'::text, 'system'::text]))),
    CONSTRAINT audit_log_actor_user CHECK (((actor_user_id IS NOT NULL) = (actor_kind = 'user'::text))),
    CONSTRAINT audit_log_detail_check CHECK ((jsonb_typeof(detail) = 'object'::text)),
    CONSTRAINT audit_log_object_id_check CHECK ((length(object_id) <= 256)),
    CONSTRAINT audit_log_object_kind_check CHECK ((object_kind ~ '^[a-z_]{1,32}$'::text)),
    CONSTRAINT audit_log_remote_addr_check CHECK ((length(remote_addr) <= 128))
);


--
-- Name: audit_log_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: audit_log_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.audit_log_id_seq OWNED BY public.audit_log.id;


--
-- Name: browser_sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.browser_sessions (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    session_hash bytea NOT NULL,
    token_id uuid NOT NULL,
    user_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    remote_addr text,
    CONSTRAINT browser_sessions_check CHECK ((expires_at > created_at)),
    CONSTRAINT browser_sessions_remote_addr_check CHECK ((length(remote_addr) <= 128)),
    CONSTRAINT browser_sessions_session_hash_check CHECK ((octet_length(session_hash) = 32))
);


--
-- Name: budget_reservations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.budget_reservations (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    month date NOT NULL,
    amount_usd_micros bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    settled_at timestamp with time zone,
    settled_usd_micros bigint,
    CONSTRAINT budget_reservations_amount_usd_micros_check CHECK ((amount_usd_micros > 0)),
    CONSTRAINT budget_reservations_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT budget_reservations_month_check CHECK ((EXTRACT(day FROM month) = (1)::numeric)),
    CONSTRAINT budget_reservations_settled_pair CHECK (((settled_at IS NULL) = (settled_usd_micros IS NULL))),
    CONSTRAINT budget_reservations_settled_usd_micros_check CHECK ((settled_usd_micros >= 0)),
    CONSTRAINT budget_reservations_step_id_check CHECK ((step_id ~ '^[a-z0-9_-]{1,64}$'::text))
);


--
-- Name: engine_heartbeats; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.engine_heartbeats (
    instance_id text NOT NULL,
    hostname text NOT NULL,
    pid integer NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT engine_heartbeats_hostname_check CHECK (((length(hostname) >= 1) AND (length(hostname) <= 255))),
    CONSTRAINT engine_heartbeats_instance_id_check CHECK ((instance_id ~ '^[a-z0-9-]{1,64}$'::text)),
    CONSTRAINT engine_heartbeats_pid_check CHECK ((pid > 0))
);


--
-- Name: grants; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.grants (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    project_id uuid NOT NULL,
    resource_kind text NOT NULL,
    resource_name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT grants_resource_kind_check CHECK ((resource_kind = ANY (ARRAY['skill'::text, 'mcp_server'::text]))),
    CONSTRAINT grants_resource_name_check CHECK ((resource_name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'::text))
);


--
-- Name: mcp_servers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mcp_servers (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    version integer NOT NULL,
    spec jsonb NOT NULL,
    credentials_ciphertext bytea,
    credentials_nonce bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT mcp_servers_credentials_ciphertext_check CHECK ((octet_length(credentials_ciphertext) > 16)),
    CONSTRAINT mcp_servers_credentials_nonce_check CHECK ((octet_length(credentials_nonce) = 24)),
    CONSTRAINT mcp_servers_credentials_pair CHECK (((credentials_ciphertext IS NULL) = (credentials_nonce IS NULL))),
    CONSTRAINT mcp_servers_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'::text)),
    CONSTRAINT mcp_servers_spec_check CHECK ((jsonb_typeof(spec) = 'object'::text)),
    CONSTRAINT mcp_servers_version_check CHECK ((version >= 1))
);


--
-- Name: projects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.projects (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    monthly_quota_usd_micros bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT projects_monthly_quota_usd_micros_check CHECK ((monthly_quota_usd_micros >= 0)),
    CONSTRAINT projects_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9-]{0,63}$'::text))
);


--
-- Name: run_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_events (
    run_id uuid NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    payload jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT run_events_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT run_events_seq_check CHECK ((seq >= 1)),
    CONSTRAINT run_events_type_check CHECK (((length(type) <= 64) AND (type ~ '^[a-z_]+(\.[a-z_]+)+$'::text)))
);


--
-- Name: run_pull_requests; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_pull_requests (
    run_id uuid NOT NULL,
    branch text NOT NULL,
    pushed_commit text NOT NULL,
    number bigint,
    url text,
    draft boolean,
    pushed_at timestamp with time zone DEFAULT now() NOT NULL,
    opened_at timestamp with time zone,
    CONSTRAINT run_pull_requests_branch_check CHECK (public.pr_branch_ok(branch)),
    CONSTRAINT run_pull_requests_check CHECK (((number IS NULL) = (url IS NULL))),
    CONSTRAINT run_pull_requests_number_check CHECK ((number > 0)),
    CONSTRAINT run_pull_requests_pushed_commit_check CHECK ((pushed_commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'::text)),
    CONSTRAINT run_pull_requests_url_check CHECK (((url IS NULL) OR ((length(url) <= 1024) AND (url ~ '^https://[^[:space:][:cntrl:]]+$'::text))))
);


--
-- Name: run_steps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_steps (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    run_id uuid NOT NULL,
    phase_name text NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    status text DEFAULT 'running'::text NOT NULL,
    executor_session text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    exit_status integer,
    error text,
    CONSTRAINT run_steps_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT run_steps_error_check CHECK ((length(error) <= 8192)),
    CONSTRAINT run_steps_executor_session_check CHECK (((length(executor_session) >= 1) AND (length(executor_session) <= 256))),
    CONSTRAINT run_steps_exit_status_check CHECK (((exit_status >= 0) AND (exit_status <= 255))),
    CONSTRAINT run_steps_finished_iff_done CHECK (((finished_at IS NULL) = (status = 'running'::text))),
    CONSTRAINT run_steps_phase_name_check CHECK ((phase_name ~ '^[a-z0-9_-]{1,64}$'::text)),
    CONSTRAINT run_steps_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'crashed'::text, 'skipped'::text, 'cancelled'::text, 'timed_out'::text]))),
    CONSTRAINT run_steps_step_id_check CHECK ((step_id ~ '^[a-z0-9_-]{1,64}$'::text)),
    CONSTRAINT run_steps_time_order CHECK ((finished_at >= started_at))
);


--
-- Name: schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: skills; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.skills (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    version integer NOT NULL,
    body text NOT NULL,
    sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT skills_body_check CHECK ((octet_length(body) <= 1048576)),
    CONSTRAINT skills_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'::text)),
    CONSTRAINT skills_sha256_check CHECK ((octet_length(sha256) = 32)),
    CONSTRAINT skills_version_check CHECK ((version >= 1))
);


--
-- Name: templates; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.templates (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    version integer NOT NULL,
    source text NOT NULL,
    compiled jsonb NOT NULL,
    sha256 bytea NOT NULL,
    loaded_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT templates_compiled_check CHECK ((jsonb_typeof(compiled) = 'object'::text)),
    CONSTRAINT templates_name_check CHECK ((name ~ '^[a-z0-9][a-z0-9-]{0,63}$'::text)),
    CONSTRAINT templates_sha256_check CHECK ((octet_length(sha256) = 32)),
    CONSTRAINT templates_source_check CHECK ((octet_length(source) <= 262144)),
    CONSTRAINT templates_version_check CHECK (((version >= 1) AND (version <= 1000000)))
);


--
-- Name: token_usage; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.token_usage (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    input_tokens bigint DEFAULT 0 NOT NULL,
    output_tokens bigint DEFAULT 0 NOT NULL,
    cache_read_tokens bigint DEFAULT 0 NOT NULL,
    cache_write_tokens bigint DEFAULT 0 NOT NULL,
    cost_usd_micros bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT token_usage_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT token_usage_cache_read_tokens_check CHECK ((cache_read_tokens >= 0)),
    CONSTRAINT token_usage_cache_write_tokens_check CHECK ((cache_write_tokens >= 0)),
    CONSTRAINT token_usage_cost_usd_micros_check CHECK ((cost_usd_micros >= 0)),
    CONSTRAINT token_usage_input_tokens_check CHECK ((input_tokens >= 0)),
    CONSTRAINT token_usage_model_check CHECK ((model ~ '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$'::text)),
    CONSTRAINT token_usage_output_tokens_check CHECK ((output_tokens >= 0)),
    CONSTRAINT token_usage_provider_check CHECK ((provider ~ '^[a-z0-9][a-z0-9_-]{0,31}$'::text))
);


--
-- Name: audit_log id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log ALTER COLUMN id SET DEFAULT nextval('public.audit_log_id_seq'::regclass);


--
-- Data for Name: agent_messages; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.agent_messages (run_id, session, seq, message, created_at) FROM stdin;
\.


--
-- Data for Name: api_tokens; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.api_tokens (id, user_id, token_hash, prefix, created_at, expires_at, revoked_at, last_used_at) FROM stdin;
aa37aa44-f708-47ca-b7d9-91ac8fd53611	508fd3e0-3c15-42cb-bb10-73a121027fe1	\\xa501321504031b59a2f72edc1369a8db262993583c51600cd13d6bfc39e3098b	agr_I5m_YbfK	2026-12-01 19:05:41.546083+00	\N	\N	2026-12-01 19:05:41.63421+00
\.


--
-- Data for Name: approvals; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.approvals (id, run_id, step_id, status, requested_at, expires_at, decided_by, decided_at, comment, kind) FROM stdin;
\.


--
-- Data for Name: artifacts; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.artifacts (id, run_id, step_id, attempt, key, kind, size, sha256, inline, store_path, created_at) FROM stdin;
815c672b-4cdb-4537-9d05-5be02b3e828d	ea742d06-817f-4825-a731-55c5dacb602a	greet	1	note	md	21	\\x0e68b1db059560749c96c6dff8d7d13c2b41afb9a4731db3d424e576d17204cc	\\x6772656574696e6720666f7220757067726164650a	\N	2026-12-01 19:05:41.939437+00
\.


--
-- Data for Name: audit_log; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.audit_log (id, at, actor_user_id, actor_kind, action, object_kind, object_id, project_id, remote_addr, detail) FROM stdin;
1	2026-12-01 19:05:41.397419+00	\N	operator	user.add	user	508fd3e0-3c15-42cb-bb10-73a121027fe1	\N	control socket	{"name": "alice", "display_name": ""}
2	2026-12-01 19:05:41.402606+00	\N	operator	user.add	user	222c3a2e-78b6-4f2b-a2c7-addff2775ae5	\N	control socket	{"name": "bob", "display_name": ""}
3	2026-12-01 19:05:41.408721+00	\N	operator	project.add	project	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"name": "p1"}
4	2026-12-01 19:05:41.414265+00	\N	operator	member.add	membership	4ec9aecf-1a81-4694-ac1d-048c0095953f	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"role": "admin", "user": "alice", "project": "p1"}
5	2026-12-01 19:05:41.430724+00	\N	operator	member.add	membership	19d26d1e-1497-454c-ba43-a942d94e8170	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"role": "viewer", "user": "bob", "project": "p1"}
6	2026-12-01 19:05:41.441243+00	\N	operator	repo.add	repo_connection	262c036b-c7d2-4ed9-89bc-93eb9e495fe9	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"url": "/tmp/agrippa-test.vx03QR/repos/clean", "name": "clean", "forge": "none", "token": false, "api_url": null, "project": "p1"}
7	2026-12-01 19:05:41.477994+00	\N	operator	repo.add	repo_connection	586ef5c0-5514-4da0-911c-3653e3790031	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"url": "https://git.invalid/o/r.git", "name": "remote", "forge": "none", "token": true, "api_url": null, "project": "p1"}
8	2026-12-01 19:05:41.486227+00	\N	operator	skill.add	skill	22be3e80-b3a1-4a3d-915d-85c7dc6d5b7b	\N	control socket	{"name": "tidy", "sha256": "12e0acf2376fb143091335b34f74cdd2f1f8ab39ada73734e35c4ba1f75f4258", "version": 1}
9	2026-12-01 19:05:41.496602+00	\N	operator	grant.add	grant	6ba9d506-1440-4458-a807-bdea8facefb0	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"kind": "skill", "name": "tidy", "project": "p1"}
10	2026-12-01 19:05:41.507873+00	\N	operator	mcp.add	mcp_server	61cec0ba-f05b-447d-a3ae-fcdedc73ec07	\N	control socket	{"name": "gh", "version": 1, "credentials": true}
11	2026-12-01 19:05:41.527556+00	\N	operator	grant.add	grant	002b4766-df3a-44bf-b4cf-0b9200d3a5e2	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	control socket	{"kind": "mcp_server", "name": "gh", "project": "p1"}
12	2026-12-01 19:05:41.532048+00	\N	operator	template.load	template	d8863840-4d0f-49b9-85fc-056fc425b413	\N	control socket	{"name": "hello", "sha256": "edb98b16a359076a391e888759bb3bd12c95bf0c27713c71d1d6e63603384349", "version": 1}
13	2026-12-01 19:05:41.546083+00	\N	operator	token.create	api_token	aa37aa44-f708-47ca-b7d9-91ac8fd53611	\N	control socket	{"user": "alice", "prefix": "agr_I5m_YbfK", "expires_at": null}
14	2026-12-01 19:05:41.636953+00	508fd3e0-3c15-42cb-bb10-73a121027fe1	user	run.submit	run	ea742d06-817f-4825-a731-55c5dacb602a	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	127.0.0.1	{"version": 1, "template": "hello", "idempotency_key": null}
15	2026-12-01 19:05:42.143588+00	508fd3e0-3c15-42cb-bb10-73a121027fe1	user	session.create	browser_session	a2185b01-55dc-49c9-9564-987f768ed7ca	\N	127.0.0.1	{"token": "aa37aa44-f708-47ca-b7d9-91ac8fd53611", "expires_at": "2026-12-02T07:05:42.143588+00:00"}
\.


--
-- Data for Name: browser_sessions; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.browser_sessions (id, session_hash, token_id, user_id, created_at, expires_at, ended_at, remote_addr) FROM stdin;
a2185b01-55dc-49c9-9564-987f768ed7ca	\\xef60ba0b83429bfcf417e23772d39e8c763fa4bfe60a30d1bcd4105bc0f4e339	aa37aa44-f708-47ca-b7d9-91ac8fd53611	508fd3e0-3c15-42cb-bb10-73a121027fe1	2026-12-01 19:05:42.143588+00	2026-12-02 07:05:42.143588+00	\N	127.0.0.1
\.


--
-- Data for Name: budget_reservations; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.budget_reservations (id, project_id, run_id, step_id, attempt, month, amount_usd_micros, created_at, settled_at, settled_usd_micros) FROM stdin;
\.


--
-- Data for Name: engine_heartbeats; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.engine_heartbeats (instance_id, hostname, pid, started_at, last_seen) FROM stdin;
engine-a799ffed1742ef45	vm	21189	2026-12-01 19:05:41.297946+00	2026-12-01 19:05:41.297946+00
\.


--
-- Data for Name: grants; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.grants (id, project_id, resource_kind, resource_name, created_at) FROM stdin;
6ba9d506-1440-4458-a807-bdea8facefb0	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	skill	tidy	2026-12-01 19:05:41.496602+00
002b4766-df3a-44bf-b4cf-0b9200d3a5e2	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	mcp_server	gh	2026-12-01 19:05:41.527556+00
\.


--
-- Data for Name: mcp_servers; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.mcp_servers (id, name, version, spec, credentials_ciphertext, credentials_nonce, created_at) FROM stdin;
61cec0ba-f05b-447d-a3ae-fcdedc73ec07	gh	1	{"env": {"TOKEN": "${credentials.token}"}, "paths": [], "command": ["/bin/cat"], "network": null, "transport": "stdio", "workspace": "none", "call_timeout": 60, "startup_timeout": 30}	\\x7a74460fc070e08f7e7310efc4130de05b9a061f64c71b9d4b62b254dc6279f2c1f195921fe96c9aebdb5c22ce71e86f3dc35eed1bfa73c1	\\xe07f34183d2e3e52cbe0e6ecd76a9a42fd5f71ef1b781cac	2026-12-01 19:05:41.507873+00
\.


--
-- Data for Name: memberships; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.memberships (id, project_id, user_id, role, created_at) FROM stdin;
4ec9aecf-1a81-4694-ac1d-048c0095953f	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	508fd3e0-3c15-42cb-bb10-73a121027fe1	admin	2026-12-01 19:05:41.414265+00
19d26d1e-1497-454c-ba43-a942d94e8170	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	222c3a2e-78b6-4f2b-a2c7-addff2775ae5	viewer	2026-12-01 19:05:41.430724+00
\.


--
-- Data for Name: projects; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.projects (id, name, monthly_quota_usd_micros, created_at) FROM stdin;
63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	p1	\N	2026-12-01 19:05:41.408721+00
\.


--
-- Data for Name: repo_connections; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.repo_connections (id, project_id, name, url, token_ciphertext, token_nonce, created_at, forge, api_url) FROM stdin;
262c036b-c7d2-4ed9-89bc-93eb9e495fe9	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	clean	/tmp/agrippa-test.vx03QR/repos/clean	\N	\N	2026-12-01 19:05:41.441243+00	none	\N
586ef5c0-5514-4da0-911c-3653e3790031	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	remote	https://git.invalid/o/r.git	\\x63e1dd1abf16461d87cef87a7bb2c5fcdab358bd2843ffdd049a07ca2ffeb99cf95de470fb384015e37dcf53eb81d5b4	\\xa0b1ea50cd843f3a2d68b5eb983e96f64aa8e6e91ee04587	2026-12-01 19:05:41.477994+00	none	\N
\.


--
-- Data for Name: run_events; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.run_events (run_id, seq, type, payload, created_at) FROM stdin;
ea742d06-817f-4825-a731-55c5dacb602a	1	run.queued	{"version": 1, "template": "hello", "submitted_by": "508fd3e0-3c15-42cb-bb10-73a121027fe1"}	2026-12-01 19:05:41.636953+00
ea742d06-817f-4825-a731-55c5dacb602a	2	run.started	{"owner": "engine-a799ffed1742ef45"}	2026-12-01 19:05:41.651749+00
ea742d06-817f-4825-a731-55c5dacb602a	3	workspace.ready	{"ref": "master", "base_commit": "d9238f0e67bc3a8dc4d97ac3c2b500853bba97f8"}	2026-12-01 19:05:41.88642+00
ea742d06-817f-4825-a731-55c5dacb602a	4	phase.started	{"phase": "one"}	2026-12-01 19:05:41.925969+00
ea742d06-817f-4825-a731-55c5dacb602a	5	step.started	{"kind": "command", "phase": "one", "attempt": 1, "step_id": "greet"}	2026-12-01 19:05:41.925969+00
ea742d06-817f-4825-a731-55c5dacb602a	6	step.output	{"text": "hello upgrade\\n", "stream": "stdout", "attempt": 1, "step_id": "greet"}	2026-12-01 19:05:41.935248+00
ea742d06-817f-4825-a731-55c5dacb602a	7	step.finished	{"error": null, "status": "succeeded", "attempt": 1, "step_id": "greet", "duration_ms": 2, "exit_status": 0, "output_truncated": false}	2026-12-01 19:05:41.939437+00
ea742d06-817f-4825-a731-55c5dacb602a	8	artifact.stored	{"key": "note", "kind": "md", "size": 21, "sha256": "0e68b1db059560749c96c6dff8d7d13c2b41afb9a4731db3d424e576d17204cc", "attempt": 1, "step_id": "greet", "artifact_id": "815c672b-4cdb-4537-9d05-5be02b3e828d"}	2026-12-01 19:05:41.939437+00
ea742d06-817f-4825-a731-55c5dacb602a	9	phase.finished	{"phase": "one"}	2026-12-01 19:05:41.939437+00
ea742d06-817f-4825-a731-55c5dacb602a	10	run.succeeded	{}	2026-12-01 19:05:41.95369+00
\.


--
-- Data for Name: run_pull_requests; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.run_pull_requests (run_id, branch, pushed_commit, number, url, draft, pushed_at, opened_at) FROM stdin;
\.


--
-- Data for Name: run_steps; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.run_steps (id, run_id, phase_name, step_id, attempt, status, executor_session, started_at, finished_at, exit_status, error) FROM stdin;
9ffdfb2a-6bd7-4b01-9240-cc60031090df	ea742d06-817f-4825-a731-55c5dacb602a	one	greet	1	succeeded	\N	2026-12-01 19:05:41.925969+00	2026-12-01 19:05:41.939437+00	0	\N
\.


--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.runs (id, project_id, template_id, template_name, template_version, status, params, manifest, submitted_by, idempotency_key, lease_owner, lease_expires_at, next_event_seq, cancel_requested_at, budget_usd_micros, spent_usd_micros, tokens_in, tokens_out, base_commit, error, created_at, started_at, finished_at, phase_budgets, workspace_host, ref, checked_out_ref) FROM stdin;
ea742d06-817f-4825-a731-55c5dacb602a	63ac9d99-5cd3-4cf2-be58-4fa098b98e2c	d8863840-4d0f-49b9-85fc-056fc425b413	hello	1	succeeded	{"who": "upgrade", "repo": "clean"}	{"repos": {"repo": {"id": "262c036b-c7d2-4ed9-89bc-93eb9e495fe9", "name": "clean"}}, "skills": [], "template": {"id": "d8863840-4d0f-49b9-85fc-056fc425b413", "name": "hello", "sha256": "edb98b16a359076a391e888759bb3bd12c95bf0c27713c71d1d6e63603384349", "version": 1}, "mcp_servers": []}	508fd3e0-3c15-42cb-bb10-73a121027fe1	\N	\N	\N	11	\N	\N	0	0	0	d9238f0e67bc3a8dc4d97ac3c2b500853bba97f8	\N	2026-12-01 19:05:41.636953+00	2026-12-01 19:05:41.651749+00	2026-12-01 19:05:41.95369+00	{}	6bc99d21b502e6d58f69fb52389c0d58	\N	master
\.


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.schema_migrations (version, name, applied_at) FROM stdin;
1	0001_init	2026-12-01 19:05:40.87553+00
2	0002_core	2026-12-01 19:05:40.882347+00
3	0003_api	2026-12-01 19:05:41.109013+00
4	0004_engine	2026-12-01 19:05:41.116712+00
5	0005_runner	2026-12-01 19:05:41.119238+00
6	0006_budget	2026-12-01 19:05:41.123235+00
7	0007_workspace_host	2026-12-01 19:05:41.128616+00
8	0008_agent	2026-12-01 19:05:41.134925+00
9	0009_ref	2026-12-01 19:05:41.146185+00
10	0010_pull_request	2026-12-01 19:05:41.151275+00
11	0011_sessions	2026-12-01 19:05:41.163358+00
\.


--
-- Data for Name: skills; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.skills (id, name, version, body, sha256, created_at) FROM stdin;
22be3e80-b3a1-4a3d-915d-85c7dc6d5b7b	tidy	1	# tidy\nkeep it tidy\n	\\x12e0acf2376fb143091335b34f74cdd2f1f8ab39ada73734e35c4ba1f75f4258	2026-12-01 19:05:41.486227+00
\.


--
-- Data for Name: templates; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.templates (id, name, version, source, compiled, sha256, loaded_at) FROM stdin;
d8863840-4d0f-49b9-85fc-056fc425b413	hello	1	name: hello\nversion: 1\nparams:\n  repo: { type: repoRef, required: true }\n  who: { type: string, default: world }\nworkspace: { repo: "${params.repo}", access: readWrite }\nphases:\n  - name: one\n    steps:\n      - id: greet\n        kind: command\n        run: 'echo "hello ${params.who}"; mkdir -p .agrippa/artifacts; echo "greeting for ${params.who}" > .agrippa/artifacts/note.md'\n        produces: [ { key: note, kind: md, required: true } ]\n	{"name": "hello", "budget": null, "params": {"who": {"type": "string", "default": "world", "required": false, "description": ""}, "repo": {"type": "repoRef", "default": null, "required": true, "description": ""}}, "phases": [{"name": "one", "steps": [{"id": "greet", "run": "echo \\"hello ${params.who}\\"; mkdir -p .agrippa/artifacts; echo \\"greeting for ${params.who}\\" > .agrippa/artifacts/note.md", "kind": "command", "when": "success", "retry": 0, "network": null, "produces": [{"key": "note", "file": "note.md", "kind": "md", "required": true}], "requires": {"skills": [], "mcp_servers": []}, "timeout_s": 3600, "allow_failure": false}], "budget": null}], "network": null, "version": 1, "workspace": {"ref": null, "repo": "${params.repo}", "access": "readWrite"}, "description": ""}	\\xedb98b16a359076a391e888759bb3bd12c95bf0c27713c71d1d6e63603384349	2026-12-01 19:05:41.532048+00
\.


--
-- Data for Name: token_usage; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.token_usage (id, run_id, step_id, attempt, provider, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd_micros, created_at) FROM stdin;
\.


--
-- Data for Name: users; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.users (id, name, display_name, disabled_at, created_at) FROM stdin;
508fd3e0-3c15-42cb-bb10-73a121027fe1	alice		\N	2026-12-01 19:05:41.397419+00
222c3a2e-78b6-4f2b-a2c7-addff2775ae5	bob		\N	2026-12-01 19:05:41.402606+00
\.


--
-- Name: audit_log_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.audit_log_id_seq', 15, true);


--
-- Name: agent_messages agent_messages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agent_messages
    ADD CONSTRAINT agent_messages_pkey PRIMARY KEY (run_id, session, seq);


--
-- Name: api_tokens api_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);


--
-- Name: api_tokens api_tokens_token_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);


--
-- Name: approvals approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_pkey PRIMARY KEY (id);


--
-- Name: artifacts artifacts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (id);


--
-- Name: artifacts artifacts_run_id_key_attempt_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_run_id_key_attempt_key UNIQUE (run_id, key, attempt);


--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);


--
-- Name: browser_sessions browser_sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.browser_sessions
    ADD CONSTRAINT browser_sessions_pkey PRIMARY KEY (id);


--
-- Name: browser_sessions browser_sessions_session_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.browser_sessions
    ADD CONSTRAINT browser_sessions_session_hash_key UNIQUE (session_hash);


--
-- Name: budget_reservations budget_reservations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_pkey PRIMARY KEY (id);


--
-- Name: budget_reservations budget_reservations_run_id_step_id_attempt_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_run_id_step_id_attempt_key UNIQUE (run_id, step_id, attempt);


--
-- Name: engine_heartbeats engine_heartbeats_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.engine_heartbeats
    ADD CONSTRAINT engine_heartbeats_pkey PRIMARY KEY (instance_id);


--
-- Name: grants grants_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_pkey PRIMARY KEY (id);


--
-- Name: grants grants_project_id_resource_kind_resource_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_project_id_resource_kind_resource_name_key UNIQUE (project_id, resource_kind, resource_name);


--
-- Name: mcp_servers mcp_servers_name_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_servers
    ADD CONSTRAINT mcp_servers_name_version_key UNIQUE (name, version);


--
-- Name: mcp_servers mcp_servers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mcp_servers
    ADD CONSTRAINT mcp_servers_pkey PRIMARY KEY (id);


--
-- Name: memberships memberships_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_pkey PRIMARY KEY (id);


--
-- Name: memberships memberships_project_id_user_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_project_id_user_id_key UNIQUE (project_id, user_id);


--
-- Name: projects projects_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_name_key UNIQUE (name);


--
-- Name: projects projects_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);


--
-- Name: repo_connections repo_connections_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.repo_connections
    ADD CONSTRAINT repo_connections_pkey PRIMARY KEY (id);


--
-- Name: repo_connections repo_connections_project_id_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.repo_connections
    ADD CONSTRAINT repo_connections_project_id_name_key UNIQUE (project_id, name);


--
-- Name: run_events run_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_events
    ADD CONSTRAINT run_events_pkey PRIMARY KEY (run_id, seq);


--
-- Name: run_pull_requests run_pull_requests_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_pull_requests
    ADD CONSTRAINT run_pull_requests_pkey PRIMARY KEY (run_id);


--
-- Name: run_steps run_steps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_steps
    ADD CONSTRAINT run_steps_pkey PRIMARY KEY (id);


--
-- Name: run_steps run_steps_run_id_step_id_attempt_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_steps
    ADD CONSTRAINT run_steps_run_id_step_id_attempt_key UNIQUE (run_id, step_id, attempt);


--
-- Name: runs runs_id_project_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_id_project_id_key UNIQUE (id, project_id);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: skills skills_name_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.skills
    ADD CONSTRAINT skills_name_version_key UNIQUE (name, version);


--
-- Name: skills skills_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.skills
    ADD CONSTRAINT skills_pkey PRIMARY KEY (id);


--
-- Name: templates templates_id_name_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_id_name_version_key UNIQUE (id, name, version);


--
-- Name: templates templates_name_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_name_version_key UNIQUE (name, version);


--
-- Name: templates templates_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_pkey PRIMARY KEY (id);


--
-- Name: token_usage token_usage_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.token_usage
    ADD CONSTRAINT token_usage_pkey PRIMARY KEY (id);


--
-- Name: users users_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_name_key UNIQUE (name);


--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);


--
-- Name: api_tokens_user_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_tokens_user_idx ON public.api_tokens USING btree (user_id);


--
-- Name: approvals_decided_by_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_decided_by_idx ON public.approvals USING btree (decided_by) WHERE (decided_by IS NOT NULL);


--
-- Name: approvals_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_expiry_idx ON public.approvals USING btree (expires_at) WHERE (status = 'pending'::text);


--
-- Name: approvals_one_pending_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX approvals_one_pending_idx ON public.approvals USING btree (run_id) WHERE (status = 'pending'::text);


--
-- Name: approvals_run_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_run_idx ON public.approvals USING btree (run_id, requested_at);


--
-- Name: artifacts_sha256_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX artifacts_sha256_idx ON public.artifacts USING btree (sha256) WHERE (store_path IS NOT NULL);


--
-- Name: audit_log_actor_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_actor_idx ON public.audit_log USING btree (actor_user_id, at) WHERE (actor_user_id IS NOT NULL);


--
-- Name: audit_log_object_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_object_idx ON public.audit_log USING btree (object_kind, object_id);


--
-- Name: audit_log_project_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_project_idx ON public.audit_log USING btree (project_id, at) WHERE (project_id IS NOT NULL);


--
-- Name: browser_sessions_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX browser_sessions_expiry_idx ON public.browser_sessions USING btree (expires_at) WHERE (ended_at IS NULL);


--
-- Name: browser_sessions_token_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX browser_sessions_token_idx ON public.browser_sessions USING btree (token_id);


--
-- Name: budget_reservations_month_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX budget_reservations_month_idx ON public.budget_reservations USING btree (project_id, month);


--
-- Name: memberships_user_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX memberships_user_idx ON public.memberships USING btree (user_id);


--
-- Name: run_steps_one_running_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX run_steps_one_running_idx ON public.run_steps USING btree (run_id, step_id) WHERE (status = 'running'::text);


--
-- Name: runs_idempotency_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_idempotency_idx ON public.runs USING btree (project_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);


--
-- Name: runs_lease_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_lease_idx ON public.runs USING btree (lease_expires_at) WHERE (lease_expires_at IS NOT NULL);


--
-- Name: runs_project_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_project_idx ON public.runs USING btree (project_id, created_at DESC);


--
-- Name: runs_queue_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_queue_idx ON public.runs USING btree (created_at) WHERE (status = 'queued'::text);


--
-- Name: runs_submitted_by_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_submitted_by_idx ON public.runs USING btree (submitted_by);


--
-- Name: runs_template_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_template_idx ON public.runs USING btree (template_id);


--
-- Name: token_usage_run_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX token_usage_run_idx ON public.token_usage USING btree (run_id);


--
-- Name: api_tokens api_tokens_auth_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER api_tokens_auth_changed AFTER DELETE OR UPDATE OF token_hash, user_id, expires_at, revoked_at ON public.api_tokens FOR EACH STATEMENT EXECUTE FUNCTION public.notify_auth_changed();


--
-- Name: approvals approvals_decided_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approvals_decided_notify AFTER UPDATE OF status ON public.approvals FOR EACH ROW WHEN (((old.status = 'pending'::text) AND (new.status <> 'pending'::text))) EXECUTE FUNCTION public.notify_approval_decided();


--
-- Name: audit_log audit_log_append_only; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_log_append_only BEFORE DELETE OR UPDATE ON public.audit_log FOR EACH ROW EXECUTE FUNCTION public.refuse_change();


--
-- Name: audit_log audit_log_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON public.audit_log FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_change();


--
-- Name: browser_sessions browser_sessions_auth_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER browser_sessions_auth_changed AFTER UPDATE OF ended_at, expires_at ON public.browser_sessions FOR EACH STATEMENT EXECUTE FUNCTION public.notify_auth_changed();


--
-- Name: memberships memberships_auth_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER memberships_auth_changed AFTER INSERT OR DELETE OR UPDATE ON public.memberships FOR EACH STATEMENT EXECUTE FUNCTION public.notify_auth_changed();


--
-- Name: run_events run_events_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER run_events_immutable BEFORE UPDATE ON public.run_events FOR EACH ROW EXECUTE FUNCTION public.refuse_change();


--
-- Name: run_steps run_steps_settle; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER run_steps_settle AFTER UPDATE OF status ON public.run_steps FOR EACH ROW WHEN (((old.status = 'running'::text) AND (new.status <> 'running'::text))) EXECUTE FUNCTION public.settle_ended_attempt();


--
-- Name: runs runs_settle; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_settle AFTER UPDATE OF finished_at ON public.runs FOR EACH ROW WHEN (((old.finished_at IS NULL) AND (new.finished_at IS NOT NULL))) EXECUTE FUNCTION public.settle_finished_run();


--
-- Name: token_usage token_usage_run_open; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER token_usage_run_open BEFORE INSERT ON public.token_usage FOR EACH ROW EXECUTE FUNCTION public.token_usage_run_open();


--
-- Name: users users_auth_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER users_auth_changed AFTER DELETE OR UPDATE OF name, display_name, disabled_at ON public.users FOR EACH STATEMENT EXECUTE FUNCTION public.notify_auth_changed();


--
-- Name: agent_messages agent_messages_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agent_messages
    ADD CONSTRAINT agent_messages_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: api_tokens api_tokens_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


--
-- Name: approvals approvals_decided_by_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_decided_by_fkey FOREIGN KEY (decided_by) REFERENCES public.users(id) ON DELETE RESTRICT;


--
-- Name: approvals approvals_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: artifacts artifacts_attempt_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_attempt_fkey FOREIGN KEY (run_id, step_id, attempt) REFERENCES public.run_steps(run_id, step_id, attempt) ON DELETE CASCADE;


--
-- Name: artifacts artifacts_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.artifacts
    ADD CONSTRAINT artifacts_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: browser_sessions browser_sessions_token_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.browser_sessions
    ADD CONSTRAINT browser_sessions_token_id_fkey FOREIGN KEY (token_id) REFERENCES public.api_tokens(id) ON DELETE CASCADE;


--
-- Name: browser_sessions browser_sessions_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.browser_sessions
    ADD CONSTRAINT browser_sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


--
-- Name: budget_reservations budget_reservations_run_project_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_run_project_fkey FOREIGN KEY (run_id, project_id) REFERENCES public.runs(id, project_id) ON DELETE CASCADE;


--
-- Name: grants grants_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;


--
-- Name: memberships memberships_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;


--
-- Name: memberships memberships_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


--
-- Name: repo_connections repo_connections_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.repo_connections
    ADD CONSTRAINT repo_connections_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;


--
-- Name: run_events run_events_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_events
    ADD CONSTRAINT run_events_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: run_pull_requests run_pull_requests_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_pull_requests
    ADD CONSTRAINT run_pull_requests_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: run_steps run_steps_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_steps
    ADD CONSTRAINT run_steps_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: runs runs_project_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE RESTRICT;


--
-- Name: runs runs_submitted_by_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_submitted_by_fkey FOREIGN KEY (submitted_by) REFERENCES public.users(id) ON DELETE RESTRICT;


--
-- Name: runs runs_template_snapshot_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_template_snapshot_fkey FOREIGN KEY (template_id, template_name, template_version) REFERENCES public.templates(id, name, version) ON DELETE RESTRICT;


--
-- Name: token_usage token_usage_attempt_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.token_usage
    ADD CONSTRAINT token_usage_attempt_fkey FOREIGN KEY (run_id, step_id, attempt) REFERENCES public.run_steps(run_id, step_id, attempt) ON DELETE CASCADE;


--
-- Name: token_usage token_usage_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.token_usage
    ADD CONSTRAINT token_usage_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict IHW95ZYUmHxXwfYeteR207kNdPYn7SMtXFzwVSnWrArUfWno3eJtXLpaGctmXrS

