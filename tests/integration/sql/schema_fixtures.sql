-- Fixtures for tests/integration/test_schema.sh: fixed ids so the test can
-- name rows.  Ids: users ...a1 (alice), ...a2 (bob), ...a3 (carol,
-- disabled); projects ...b1 (alpha), ...b2 (beta); template ...c1; runs
-- ...d1-...d9 (see below).  Every row here must be accepted: the test
-- applies this file with ON_ERROR_STOP=1 and checks that first.
INSERT INTO users (id, name, display_name, disabled_at) VALUES
	('00000000-0000-0000-0000-0000000000a1', 'alice', 'Alice A.', NULL),
	('00000000-0000-0000-0000-0000000000a2', 'bob', 'Bob B.', NULL),
	('00000000-0000-0000-0000-0000000000a3', 'carol', '', now());

INSERT INTO api_tokens (user_id, token_hash, prefix, expires_at) VALUES
	('00000000-0000-0000-0000-0000000000a1', sha256('tok-alice'), 'agr_abcd', now() + interval '30 days');

INSERT INTO projects (id, name, monthly_quota_usd_micros) VALUES
	('00000000-0000-0000-0000-0000000000b1', 'alpha', 50000000),
	('00000000-0000-0000-0000-0000000000b2', 'beta', NULL);

INSERT INTO memberships (project_id, user_id, role) VALUES
	('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000a1', 'admin'),
	('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000a2', 'member'),
	('00000000-0000-0000-0000-0000000000b2', '00000000-0000-0000-0000-0000000000a1', 'viewer');

INSERT INTO repo_connections (project_id, name, url, token_ciphertext, token_nonce) VALUES
	('00000000-0000-0000-0000-0000000000b1', 'main', 'https://git.example.com/alpha.git',
	 decode(repeat('ab', 40), 'hex'), decode(repeat('01', 24), 'hex')),
	('00000000-0000-0000-0000-0000000000b1', 'local', 'file:///srv/git/alpha.git', NULL, NULL),
	('00000000-0000-0000-0000-0000000000b1', 'path', '/srv/git/alpha.git', NULL, NULL);

INSERT INTO skills (name, version, body, sha256) VALUES
	('c-style', 1, '# C style', sha256('# C style'));
INSERT INTO mcp_servers (name, version, spec, credentials_ciphertext, credentials_nonce) VALUES
	('github', 1, '{"command": "gh-mcp"}', decode(repeat('cd', 32), 'hex'), decode(repeat('02', 24), 'hex'));
INSERT INTO grants (project_id, resource_kind, resource_name) VALUES
	('00000000-0000-0000-0000-0000000000b1', 'skill', 'c-style'),
	('00000000-0000-0000-0000-0000000000b1', 'mcp_server', 'github');

INSERT INTO templates (id, name, version, source, compiled, sha256) VALUES
	('00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'name: fix-failing-test',
	 '{"phases": []}', sha256('name: fix-failing-test'));

-- d1 append sequence, d2 concurrency, d3 transitions, d4 finalize,
-- d5 cancel wins, d6 approvals, d7 finalize closes steps/approvals,
-- d8 constraint playground (alpha), d9 queued in beta.
INSERT INTO runs (id, project_id, template_id, template_name, template_version, status,
                  submitted_by, started_at, lease_owner, lease_expires_at, idempotency_key) VALUES
	('00000000-0000-0000-0000-0000000000d1', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'running',
	 '00000000-0000-0000-0000-0000000000a1', now(), NULL, NULL, NULL),
	('00000000-0000-0000-0000-0000000000d2', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'running',
	 '00000000-0000-0000-0000-0000000000a1', now(), NULL, NULL, NULL),
	('00000000-0000-0000-0000-0000000000d3', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'queued',
	 '00000000-0000-0000-0000-0000000000a1', NULL, NULL, NULL, NULL),
	('00000000-0000-0000-0000-0000000000d4', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'running',
	 '00000000-0000-0000-0000-0000000000a1', now(), 'engine-1', now() + interval '1 minute', NULL),
	('00000000-0000-0000-0000-0000000000d5', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'running',
	 '00000000-0000-0000-0000-0000000000a1', now(), NULL, NULL, NULL),
	('00000000-0000-0000-0000-0000000000d6', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'waiting_approval',
	 '00000000-0000-0000-0000-0000000000a1', now(), NULL, NULL, NULL),
	('00000000-0000-0000-0000-0000000000d7', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'waiting_approval',
	 '00000000-0000-0000-0000-0000000000a1', now(), NULL, NULL, NULL),
	('00000000-0000-0000-0000-0000000000d8', '00000000-0000-0000-0000-0000000000b1',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'queued',
	 '00000000-0000-0000-0000-0000000000a1', NULL, NULL, NULL, 'submit-1'),
	('00000000-0000-0000-0000-0000000000d9', '00000000-0000-0000-0000-0000000000b2',
	 '00000000-0000-0000-0000-0000000000c1', 'fix-failing-test', 1, 'queued',
	 '00000000-0000-0000-0000-0000000000a1', NULL, NULL, NULL, NULL);

INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at, exit_status) VALUES
	('00000000-0000-0000-0000-0000000000d4', 'fix', 'implement', 1, 'crashed', now(), NULL),
	('00000000-0000-0000-0000-0000000000d4', 'fix', 'implement', 2, 'running', NULL, NULL),
	('00000000-0000-0000-0000-0000000000d4', 'diagnose', 'run-tests', 1, 'succeeded', now(), 0),
	('00000000-0000-0000-0000-0000000000d6', 'fix', 'review', 1, 'running', NULL, NULL),
	('00000000-0000-0000-0000-0000000000d7', 'fix', 'review', 1, 'running', NULL, NULL),
	('00000000-0000-0000-0000-0000000000d8', 'diagnose', 'run-tests', 1, 'succeeded', now(), 1);

-- d4 spent 3000 + 4000 micro-dollars over two calls: finalize_run must total them.
INSERT INTO token_usage (run_id, step_id, attempt, provider, model, input_tokens, output_tokens,
                         cache_read_tokens, cost_usd_micros) VALUES
	('00000000-0000-0000-0000-0000000000d4', 'implement', 1, 'anthropic', 'claude-sonnet-4-5', 100, 10, 5, 3000),
	('00000000-0000-0000-0000-0000000000d4', 'implement', 2, 'anthropic', 'claude-sonnet-4-5', 200, 20, 0, 4000);

INSERT INTO approvals (run_id, step_id, expires_at) VALUES
	('00000000-0000-0000-0000-0000000000d7', 'review', now() + interval '1 day');

INSERT INTO artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline) VALUES
	('00000000-0000-0000-0000-0000000000d8', 'run-tests', 1, 'test-log', 'text', 2, sha256('ok'), 'ok');
INSERT INTO artifacts (run_id, step_id, attempt, key, kind, size, sha256, store_path) VALUES
	('00000000-0000-0000-0000-0000000000d8', 'run-tests', 1, 'big-log', 'text', 5, sha256('hello'),
	 substr(encode(sha256('hello'), 'hex'), 1, 2) || '/' || encode(sha256('hello'), 'hex'));

INSERT INTO budget_reservations (project_id, run_id, step_id, attempt, month, amount_usd_micros) VALUES
	('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000d4', 'implement', 2,
	 date_trunc('month', now())::date, 500000);

INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind, object_id, project_id, remote_addr)
VALUES ('00000000-0000-0000-0000-0000000000a1', 'user', 'project.create', 'project',
        '00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000b1', '192.0.2.1');
INSERT INTO audit_log (actor_kind, action, object_kind) VALUES ('operator', 'key.rotate', 'key');
