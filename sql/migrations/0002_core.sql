-- Core schema: the entities of DESIGN.md 3.2 and the atomic operations of
-- 3.3 and 3.5 (append an event, change a run's status, finish a run, decide
-- an approval).  Applied by supervisor/migrate.c inside one transaction
-- together with its schema_migrations row, so this file must not BEGIN or
-- COMMIT itself.
--
-- Conventions used throughout:
--  * uuid primary keys (gen_random_uuid(), core since PostgreSQL 13),
--    timestamptz, snake_case.
--  * Names that end up in URLs, paths, logs or templates are restricted to
--    small character sets by CHECK, so a bad value is unrepresentable
--    rather than merely rejected by whichever C path wrote it.
--  * Money is integer micro-dollars (bigint); never floating point.
--  * Multi-column constraints are named (table_what), so a violation can
--    be mapped to the field it concerns and tests can tell them apart.
--  * Secrets are libsodium crypto_secretbox output: ciphertext (MAC + data,
--    so at least 17 bytes) and a 24-byte nonce, both set or both NULL.
--  * ON DELETE: configuration owned by a project or user cascades with it;
--    history (runs, who submitted or decided what) restricts, because
--    users are disabled rather than deleted and a project with runs must be
--    purged deliberately; a run's own rows cascade with the run.
--  * Status changes of runs and approvals go through the functions at the
--    end of this file, which are compare-and-swap on the previous status.

------------------------------------------------------------------------
-- Identity
------------------------------------------------------------------------

-- A person using the HTTP API.  Never deleted once they did anything
-- (runs, approvals reference them with RESTRICT): disabled_at switches the
-- account off instead.  display_name is shown in the dashboard and logs,
-- hence no control characters.
CREATE TABLE users (
	id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name         text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
	display_name text NOT NULL DEFAULT ''
	             CHECK (length(display_name) <= 200 AND display_name !~ '[[:cntrl:]]'),
	disabled_at  timestamptz,
	created_at   timestamptz NOT NULL DEFAULT now()
);

-- Bearer tokens.  Only the SHA-256 of the token is stored (32 bytes, unique
-- so authentication is one index lookup); prefix is the first characters of
-- the token, kept only so a user can tell their tokens apart.
CREATE TABLE api_tokens (
	id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	token_hash   bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
	prefix       text NOT NULL CHECK (prefix ~ '^[A-Za-z0-9_.-]{1,16}$'),
	created_at   timestamptz NOT NULL DEFAULT now(),
	expires_at   timestamptz CHECK (expires_at > created_at),
	revoked_at   timestamptz,
	last_used_at timestamptz
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);

-- A project: the unit of membership, grants, repositories and quota.
-- monthly_quota_usd_micros NULL means no quota.
CREATE TABLE projects (
	id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name                     text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,63}$'),
	monthly_quota_usd_micros bigint CHECK (monthly_quota_usd_micros >= 0),
	created_at               timestamptz NOT NULL DEFAULT now()
);

-- One role per user and project.
CREATE TABLE memberships (
	id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
	user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	role       text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
	created_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (project_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id);

-- A git repository a project may run against.  The URL never carries
-- credentials (no userinfo in https URLs): the token lives encrypted beside
-- it and is only decrypted for the git helper of a run of this project.
CREATE TABLE repo_connections (
	id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	project_id       uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
	name             text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
	url              text NOT NULL CHECK (
	                     length(url) <= 2048 AND url !~ '[[:space:][:cntrl:]]' AND
	                     (url ~ '^https://[^/@]+(/|$)' OR url ~ '^file:///' OR url ~ '^/')),
	token_ciphertext bytea CHECK (octet_length(token_ciphertext) > 16),
	token_nonce      bytea CHECK (octet_length(token_nonce) = 24),
	created_at       timestamptz NOT NULL DEFAULT now(),
	UNIQUE (project_id, name),
	CONSTRAINT repo_connections_token_pair
	    CHECK ((token_ciphertext IS NULL) = (token_nonce IS NULL))
);

------------------------------------------------------------------------
-- Registry: versioned, immutable rows; a new version is a new row.
------------------------------------------------------------------------

-- A skill: markdown instructions given to agents.  sha256 of body lets a
-- run's manifest pin exactly what it used.
CREATE TABLE skills (
	id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name       text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
	version    integer NOT NULL CHECK (version >= 1),
	body       text NOT NULL CHECK (octet_length(body) <= 1048576),
	sha256     bytea NOT NULL CHECK (octet_length(sha256) = 32),
	created_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (name, version)
);

-- An MCP server definition; its credentials are encrypted like repo tokens.
CREATE TABLE mcp_servers (
	id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name                   text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
	version                integer NOT NULL CHECK (version >= 1),
	spec                   jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
	credentials_ciphertext bytea CHECK (octet_length(credentials_ciphertext) > 16),
	credentials_nonce      bytea CHECK (octet_length(credentials_nonce) = 24),
	created_at             timestamptz NOT NULL DEFAULT now(),
	UNIQUE (name, version),
	CONSTRAINT mcp_servers_credentials_pair
	    CHECK ((credentials_ciphertext IS NULL) = (credentials_nonce IS NULL))
);

-- A project may use a resource (every version of it, by name).  By name
-- rather than foreign key: the version is chosen and pinned into the run's
-- manifest at submit (DESIGN 3.7), and a grant may precede the resource.
CREATE TABLE grants (
	id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
	resource_kind text NOT NULL CHECK (resource_kind IN ('skill', 'mcp_server')),
	resource_name text NOT NULL CHECK (resource_name ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
	created_at    timestamptz NOT NULL DEFAULT now(),
	UNIQUE (project_id, resource_kind, resource_name)
);

-- A loaded template version: the YAML as written and what it compiled to.
-- Limits mirror agrippa-template(5): name set, version 1..1000000, 256 KiB.
-- UNIQUE (id, name, version) exists so runs can snapshot name and version
-- under a foreign key that keeps the snapshot truthful.
CREATE TABLE templates (
	id        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name      text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,63}$'),
	version   integer NOT NULL CHECK (version BETWEEN 1 AND 1000000),
	source    text NOT NULL CHECK (octet_length(source) <= 262144),
	compiled  jsonb NOT NULL CHECK (jsonb_typeof(compiled) = 'object'),
	sha256    bytea NOT NULL CHECK (octet_length(sha256) = 32),
	loaded_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (name, version),
	UNIQUE (id, name, version)
);

------------------------------------------------------------------------
-- Runs
------------------------------------------------------------------------

-- One execution of a template for a project (DESIGN 3.3-3.6).
--  * status changes only through transition_run / finalize_run; the CHECKs
--    tie the timestamps to the status so that no path can leave a terminal
--    run without finished_at or a live run with one.
--  * next_event_seq is the event sequence: append_run_event takes it and
--    bumps it in the same statement as the insert into run_events.
--  * a lease (owner + expiry, both or neither) exists only while the run is
--    running or waiting for approval; finalize_run clears it.
--  * idempotency_key: a resubmission with the same key in the same project
--    finds the existing run; other projects may reuse the key.
--  * totals (spent, tokens) are written by finalize_run from token_usage.
--  * UNIQUE (id, project_id) lets budget_reservations name both under one
--    foreign key, so a reservation can never be charged to another project.
CREATE TABLE runs (
	id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	project_id          uuid NOT NULL REFERENCES projects (id) ON DELETE RESTRICT,
	template_id         uuid NOT NULL,
	template_name       text NOT NULL,
	template_version    integer NOT NULL,
	status              text NOT NULL DEFAULT 'queued' CHECK (status IN
	                        ('queued', 'running', 'waiting_approval',
	                         'succeeded', 'failed', 'cancelled')),
	params              jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(params) = 'object'),
	manifest            jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(manifest) = 'object'),
	submitted_by        uuid NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
	idempotency_key     text CHECK (idempotency_key ~ '^[[:graph:]]{1,128}$'),
	lease_owner         text CHECK (lease_owner ~ '^[[:graph:]]{1,128}$'),
	lease_expires_at    timestamptz,
	next_event_seq      bigint NOT NULL DEFAULT 1 CHECK (next_event_seq >= 1),
	cancel_requested_at timestamptz,
	budget_usd_micros   bigint CHECK (budget_usd_micros >= 0),
	spent_usd_micros    bigint NOT NULL DEFAULT 0 CHECK (spent_usd_micros >= 0),
	tokens_in           bigint NOT NULL DEFAULT 0 CHECK (tokens_in >= 0),
	tokens_out          bigint NOT NULL DEFAULT 0 CHECK (tokens_out >= 0),
	base_commit         text CHECK (base_commit ~ '^([0-9a-f]{40}|[0-9a-f]{64})$'),
	error               text CHECK (length(error) <= 8192),
	created_at          timestamptz NOT NULL DEFAULT now(),
	started_at          timestamptz,
	finished_at         timestamptz,
	UNIQUE (id, project_id),
	CONSTRAINT runs_template_snapshot_fkey
	    FOREIGN KEY (template_id, template_name, template_version)
	    REFERENCES templates (id, name, version) ON DELETE RESTRICT,
	CONSTRAINT runs_finished_iff_terminal
	    CHECK ((finished_at IS NOT NULL) = (status IN ('succeeded', 'failed', 'cancelled'))),
	CONSTRAINT runs_queued_not_started CHECK (started_at IS NULL OR status <> 'queued'),
	CONSTRAINT runs_live_started
	    CHECK (started_at IS NOT NULL OR status NOT IN ('running', 'waiting_approval')),
	CONSTRAINT runs_time_order
	    CHECK (started_at >= created_at AND finished_at >= coalesce(started_at, created_at)),
	CONSTRAINT runs_lease_pair CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
	CONSTRAINT runs_lease_live
	    CHECK (lease_owner IS NULL OR status IN ('running', 'waiting_approval')),
	CONSTRAINT runs_error_failed CHECK (error IS NULL OR status IN ('failed', 'cancelled'))
);
CREATE UNIQUE INDEX runs_idempotency_idx ON runs (project_id, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_project_idx ON runs (project_id, created_at DESC);
CREATE INDEX runs_queue_idx ON runs (created_at) WHERE status = 'queued';
CREATE INDEX runs_lease_idx ON runs (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX runs_template_idx ON runs (template_id);
CREATE INDEX runs_submitted_by_idx ON runs (submitted_by);

-- One row per attempt of a step.  A crashed attempt stays (status
-- 'crashed') and the re-execution is a new attempt; at most one attempt of
-- a step is running at a time.  finished_at is set exactly when the
-- attempt is no longer running.
CREATE TABLE run_steps (
	id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	run_id           uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	phase_name       text NOT NULL CHECK (phase_name ~ '^[a-z0-9_-]{1,64}$'),
	step_id          text NOT NULL CHECK (step_id ~ '^[a-z0-9_-]{1,64}$'),
	attempt          integer NOT NULL CHECK (attempt >= 1),
	status           text NOT NULL DEFAULT 'running' CHECK (status IN
	                     ('running', 'succeeded', 'failed', 'crashed',
	                      'skipped', 'cancelled', 'timed_out')),
	executor_session text CHECK (length(executor_session) BETWEEN 1 AND 256),
	started_at       timestamptz NOT NULL DEFAULT now(),
	finished_at      timestamptz,
	exit_status      integer CHECK (exit_status BETWEEN 0 AND 255),
	error            text CHECK (length(error) <= 8192),
	UNIQUE (run_id, step_id, attempt),
	CONSTRAINT run_steps_finished_iff_done CHECK ((finished_at IS NULL) = (status = 'running')),
	CONSTRAINT run_steps_time_order CHECK (finished_at >= started_at)
);
CREATE UNIQUE INDEX run_steps_one_running_idx ON run_steps (run_id, step_id)
	WHERE status = 'running';

-- The ordered, gap-free event log of a run (DESIGN 3.5).  Rows are written
-- only by append_run_event / finalize_run, which take seq from
-- runs.next_event_seq; they are immutable afterwards (the SSE replay relies
-- on an event never changing), but go away with their run.
CREATE TABLE run_events (
	run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	seq        bigint NOT NULL CHECK (seq >= 1),
	type       text NOT NULL CHECK (length(type) <= 64 AND type ~ '^[a-z_]+(\.[a-z_]+)+$'),
	payload    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(payload) = 'object'),
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (run_id, seq)
);

-- A checkpoint waiting for a person.  Decision fields follow the status:
-- pending has none; approved/rejected name who and when; expired (by the
-- sweeper or by finalize_run) has a time but no person.  One pending
-- approval per run at a time.
CREATE TABLE approvals (
	id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	run_id       uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	step_id      text NOT NULL CHECK (step_id ~ '^[a-z0-9_-]{1,64}$'),
	status       text NOT NULL DEFAULT 'pending' CHECK (status IN
	                 ('pending', 'approved', 'rejected', 'expired')),
	requested_at timestamptz NOT NULL DEFAULT now(),
	expires_at   timestamptz NOT NULL,
	decided_by   uuid REFERENCES users (id) ON DELETE RESTRICT,
	decided_at   timestamptz,
	comment      text CHECK (length(comment) <= 4096),
	CONSTRAINT approvals_expiry_after_request CHECK (expires_at > requested_at),
	CONSTRAINT approvals_decided_iff_not_pending CHECK ((decided_at IS NULL) = (status = 'pending')),
	CONSTRAINT approvals_decider_iff_decision
	    CHECK ((decided_by IS NOT NULL) = (status IN ('approved', 'rejected'))),
	CONSTRAINT approvals_comment_with_decision
	    CHECK (comment IS NULL OR status IN ('approved', 'rejected')),
	CONSTRAINT approvals_time_order CHECK (decided_at >= requested_at)
);
CREATE UNIQUE INDEX approvals_one_pending_idx ON approvals (run_id) WHERE status = 'pending';
CREATE INDEX approvals_run_idx ON approvals (run_id, requested_at);
CREATE INDEX approvals_expiry_idx ON approvals (expires_at) WHERE status = 'pending';
CREATE INDEX approvals_decided_by_idx ON approvals (decided_by) WHERE decided_by IS NOT NULL;

-- A committed artifact of a step attempt (DESIGN 4: non-empty, digested).
-- The bytes are either inline (small, size must match) or in the
-- content-addressed store, whose relative path is derived from the digest
-- ("ab/abcdef...") so a row can never name a file outside the store.
CREATE TABLE artifacts (
	id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	run_id     uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	step_id    text NOT NULL,
	attempt    integer NOT NULL CHECK (attempt >= 1),
	key        text NOT NULL CHECK (key ~ '^[a-z0-9_-]{1,64}$'),
	kind       text NOT NULL CHECK (kind IN ('text', 'md', 'json', 'patch')),
	size       bigint NOT NULL CHECK (size > 0),
	sha256     bytea NOT NULL CHECK (octet_length(sha256) = 32),
	inline     bytea CHECK (octet_length(inline) <= 1048576),
	store_path text,
	created_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (run_id, key, attempt),
	CONSTRAINT artifacts_attempt_fkey FOREIGN KEY (run_id, step_id, attempt)
	    REFERENCES run_steps (run_id, step_id, attempt) ON DELETE CASCADE,
	CONSTRAINT artifacts_one_location CHECK (num_nonnulls(inline, store_path) = 1),
	CONSTRAINT artifacts_inline_size CHECK (inline IS NULL OR octet_length(inline) = size),
	CONSTRAINT artifacts_store_path_digest CHECK (store_path IS NULL OR store_path =
	    substr(encode(sha256, 'hex'), 1, 2) || '/' || encode(sha256, 'hex'))
);
CREATE INDEX artifacts_sha256_idx ON artifacts (sha256) WHERE store_path IS NOT NULL;

-- One model call's usage and cost, attributed to the step attempt that
-- made it.  A run's totals are summed from here by finalize_run; a row for
-- a finished run is refused (trigger below) so those totals stay exact.
CREATE TABLE token_usage (
	id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	run_id             uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	step_id            text NOT NULL,
	attempt            integer NOT NULL CHECK (attempt >= 1),
	provider           text NOT NULL CHECK (provider ~ '^[a-z0-9][a-z0-9_-]{0,31}$'),
	model              text NOT NULL CHECK (model ~ '^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$'),
	input_tokens       bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
	output_tokens      bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
	cache_read_tokens  bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
	cache_write_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
	cost_usd_micros    bigint NOT NULL DEFAULT 0 CHECK (cost_usd_micros >= 0),
	created_at         timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT token_usage_attempt_fkey FOREIGN KEY (run_id, step_id, attempt)
	    REFERENCES run_steps (run_id, step_id, attempt) ON DELETE CASCADE
);
CREATE INDEX token_usage_run_idx ON token_usage (run_id);

-- Spend a step attempt may make, reserved against its project's monthly
-- quota before it starts and settled with the real cost when it ends
-- (DESIGN 3.6).  One reservation per attempt, so a retried reserve is
-- idempotent and a resumed run never reserves an attempt twice; the
-- composite key to runs pins the project to the run's own project.
CREATE TABLE budget_reservations (
	id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	project_id         uuid NOT NULL,
	run_id             uuid NOT NULL,
	step_id            text NOT NULL CHECK (step_id ~ '^[a-z0-9_-]{1,64}$'),
	attempt            integer NOT NULL CHECK (attempt >= 1),
	month              date NOT NULL CHECK (extract(day FROM month) = 1),
	amount_usd_micros  bigint NOT NULL CHECK (amount_usd_micros > 0),
	created_at         timestamptz NOT NULL DEFAULT now(),
	settled_at         timestamptz,
	settled_usd_micros bigint CHECK (settled_usd_micros >= 0),
	UNIQUE (run_id, step_id, attempt),
	CONSTRAINT budget_reservations_run_project_fkey
	    FOREIGN KEY (run_id, project_id) REFERENCES runs (id, project_id) ON DELETE CASCADE,
	CONSTRAINT budget_reservations_settled_pair
	    CHECK ((settled_at IS NULL) = (settled_usd_micros IS NULL))
);
CREATE INDEX budget_reservations_month_idx ON budget_reservations (project_id, month);

------------------------------------------------------------------------
-- Audit
------------------------------------------------------------------------

-- Who did what, append-only (UPDATE, DELETE and TRUNCATE are refused by
-- triggers).  No foreign keys on purpose: the log outlives what it talks
-- about (it records the deletion of a project, say).  actor_user_id is
-- set exactly for actor_kind 'user'; operators act over the control socket
-- and the system on its own.
CREATE TABLE audit_log (
	id            bigserial PRIMARY KEY,
	at            timestamptz NOT NULL DEFAULT now(),
	actor_user_id uuid,
	actor_kind    text NOT NULL CHECK (actor_kind IN ('user', 'operator', 'system')),
	action        text NOT NULL CHECK (length(action) <= 64 AND action ~ '^[a-z_]+(\.[a-z_]+)+$'),
	object_kind   text NOT NULL CHECK (object_kind ~ '^[a-z_]{1,32}$'),
	object_id     text CHECK (length(object_id) <= 256),
	project_id    uuid,
	remote_addr   text CHECK (length(remote_addr) <= 128),
	detail        jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
	CONSTRAINT audit_log_actor_user CHECK ((actor_user_id IS NOT NULL) = (actor_kind = 'user'))
);
CREATE INDEX audit_log_project_idx ON audit_log (project_id, at) WHERE project_id IS NOT NULL;
CREATE INDEX audit_log_actor_idx ON audit_log (actor_user_id, at) WHERE actor_user_id IS NOT NULL;
CREATE INDEX audit_log_object_idx ON audit_log (object_kind, object_id);

------------------------------------------------------------------------
-- Guards
------------------------------------------------------------------------

-- Raises for any change to a row of an append-only or immutable table.
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '%: % is not allowed', TG_TABLE_NAME, TG_OP
	    USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
	FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
	FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER run_events_immutable BEFORE UPDATE ON run_events
	FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- Usage may only be recorded while its run is unfinished.  The row lock
-- (FOR KEY SHARE) orders this against finalize_run's FOR UPDATE: either
-- the usage commits first and is counted in the totals, or the run is
-- finished first and the usage is refused; never counted nowhere.
CREATE FUNCTION token_usage_run_open() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM runs WHERE id = NEW.run_id AND finished_at IS NULL FOR KEY SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'token_usage: run % is finished or does not exist', NEW.run_id
		    USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER token_usage_run_open BEFORE INSERT ON token_usage
	FOR EACH ROW EXECUTE FUNCTION token_usage_run_open();

------------------------------------------------------------------------
-- Atomic operations
------------------------------------------------------------------------

-- append_run_event(run, type, payload) -> seq
-- Takes seq from runs.next_event_seq and inserts the event in ONE
-- statement (a data-modifying CTE): the UPDATE's row lock serialises
-- concurrent appenders of a run, and if the INSERT fails (bad type,
-- payload not an object) the bump rolls back with it, so seqs are 1..N
-- without gaps or collisions.  Then NOTIFY run_events '<run>:<seq>'
-- (delivered at commit; listeners replay from the table, DESIGN 3.5).
-- Raises no_data_found for an unknown run and
-- object_not_in_prerequisite_state for a finished run: the terminal event
-- written by finalize_run is always the last one.  payload NULL = '{}'.
CREATE FUNCTION append_run_event(p_run uuid, p_type text, p_payload jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
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

-- transition_run(run, from, to) -> changed?
-- Compare-and-swap between the non-terminal states of DESIGN 3.3:
-- queued -> running, running -> waiting_approval, waiting_approval ->
-- running.  Any other pair raises (a caller bug); terminal statuses raise
-- too: those go through finalize_run, which writes the terminal event with
-- them.  Returns false, changing nothing, when the run is not in `from`
-- (or does not exist) or a cancel has been requested: once a cancel is
-- asked for, no new work starts and the run is to be finalized as
-- cancelled.  started_at is set on the first queued -> running.
CREATE FUNCTION transition_run(p_run uuid, p_from text, p_to text)
RETURNS boolean LANGUAGE plpgsql AS $$
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

-- finalize_run(run, from, to, error, event_type, event_payload) -> seq
-- The terminal change of DESIGN 3.3, all in this one transaction: status,
-- finished_at, totals summed from token_usage, lease cleared, open step
-- attempts closed (cancelled, or crashed if the run ends otherwise),
-- a pending approval expired, and the terminal event appended (its seq is
-- returned, NOTIFY as for append_run_event).
-- Legal: queued -> failed | cancelled; running -> succeeded | failed |
-- cancelled; waiting_approval -> failed | cancelled.  Other pairs raise.
-- Returns NULL and changes nothing when the run is not in `from` (or does
-- not exist), or when a cancel was requested and `to` is not cancelled:
-- a cancel that committed first always wins over a late success.
-- The run row is locked FOR UPDATE first, which also waits out in-flight
-- token_usage inserts (their FOR KEY SHARE) so the totals are complete.
CREATE FUNCTION finalize_run(p_run uuid, p_from text, p_to text, p_error text,
                             p_event_type text, p_event_payload jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
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

-- decide_approval(approval, decision, user, comment [, remote_addr]) -> decided?
-- Compare-and-swap on a pending, unexpired approval of an unfinished run.
-- On success, in the same transaction: the decision, the event
-- 'approval.approved' / 'approval.rejected' (append_run_event) and one
-- audit_log row.  Returns false and writes nothing when the approval is
-- unknown, no longer pending, past expires_at, or its run is finished.
-- Raises for a decision other than approved/rejected and for an unknown or
-- disabled user.  Authorization (who may decide in which project) is the
-- caller's.  Locks the run before the approval, the same order as
-- finalize_run, so the two cannot deadlock.
CREATE FUNCTION decide_approval(p_approval uuid, p_decision text, p_user uuid,
                                p_comment text, p_remote_addr text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
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
