#!/bin/sh
# The core schema (sql/migrations/0002_core.sql) against a throwaway
# PostgreSQL: the migrations apply with psql and through the real daemon
# (same schema both ways); bad rows are refused by the constraint meant to
# refuse them; and the atomic operations hold their contracts, including
# under concurrency (8 clients appending to one run; two people deciding
# one approval at the same instant).
. tests/integration/lib.sh
need_root schema
make_env

. tests/integration/pg_lib.sh

U1=00000000-0000-0000-0000-0000000000a1 # alice
U2=00000000-0000-0000-0000-0000000000a2 # bob
U3=00000000-0000-0000-0000-0000000000a3 # carol, disabled
P1=00000000-0000-0000-0000-0000000000b1 # alpha
P2=00000000-0000-0000-0000-0000000000b2 # beta
TPL=00000000-0000-0000-0000-0000000000c1
R_SEQ=00000000-0000-0000-0000-0000000000d1
R_CONC=00000000-0000-0000-0000-0000000000d2
R_TR=00000000-0000-0000-0000-0000000000d3
R_FIN=00000000-0000-0000-0000-0000000000d4
R_CAN=00000000-0000-0000-0000-0000000000d5
R_APPR=00000000-0000-0000-0000-0000000000d6
R_WAIT=00000000-0000-0000-0000-0000000000d7
R_Q=00000000-0000-0000-0000-0000000000d8
R_B=00000000-0000-0000-0000-0000000000d9
HEX32="decode(repeat('00', 32), 'hex')"
RUNCOLS="project_id, template_id, template_name, template_version, submitted_by"
RUNVALS="'$P1', '$TPL', 'fix-failing-test', 1, '$U1'"

psql_db postgres -c "CREATE DATABASE schematest" -c "CREATE DATABASE daemondb"
check "test databases created" [ $? -eq 0 ]

### Migrations, by psql and by the daemon
migrate "migrations apply in order with psql -v ON_ERROR_STOP=1"

DB_SPEC="{ url: \"postgresql://agrippa@/daemondb?host=$DBD/run\", pool: 2 }"
sed -i "s|^database: .*|database: $DB_SPEC|" "$CONF"
if start_daemon; then
	ok "daemon starts on the test database"
	# Its exit status is test_daemon.sh's and test_extdb.sh's business.
	stop_daemon
else
	notok "daemon starts on the test database"
	tail -40 "$LOG"
fi
n=$(psql_db daemondb -c "SELECT string_agg(version || ':' || name, ' ' ORDER BY version) FROM schema_migrations WHERE version <= 2")
check "the daemon applied 0001 and 0002 (schema_migrations: $n)" [ "$n" = "1:0001_init 2:0002_core" ]
# (pg_dump's \restrict lines carry a random key per dump.)
for db in daemondb schematest; do
	"$PGBIN/pg_dump" -s -h "$DBD/run" -U agrippa -T schema_migrations "$db" |
		grep -v '^\\\(un\)\{0,1\}restrict ' >"$T/$db.dump"
done
check "the daemon's schema is the psql-applied one" cmp -s "$T/daemondb.dump" "$T/schematest.dump"

sq -f "$SQLDIR/schema_fixtures.sql" >/dev/null
check "fixtures (one valid row of every table) are accepted" [ $? -eq 0 ]

### Constraints: each bad row is refused by the constraint meant for it
refused "user name: upper case" users_name_check \
	"INSERT INTO users (name) VALUES ('Alice')"
refused "user name: unique" users_name_key \
	"INSERT INTO users (name) VALUES ('alice')"
refused "display name: no control characters" users_display_name_check \
	"INSERT INTO users (name, display_name) VALUES ('dave', E'x\\ny')"
refused "api token: hash is 32 bytes" api_tokens_token_hash_check \
	"INSERT INTO api_tokens (user_id, token_hash, prefix) VALUES ('$U1', decode(repeat('00', 31), 'hex'), 'agr_')"
refused "api token: hash unique" api_tokens_token_hash_key \
	"INSERT INTO api_tokens (user_id, token_hash, prefix) VALUES ('$U2', sha256('tok-alice'), 'agr_')"
refused "api token: expiry after creation" api_tokens_check \
	"INSERT INTO api_tokens (user_id, token_hash, prefix, expires_at) VALUES ('$U2', $HEX32, 'agr_', now() - interval '1 s')"
refused "project name: slug" projects_name_check \
	"INSERT INTO projects (name) VALUES ('Bad_Name')"
refused "project quota: not negative" projects_monthly_quota_usd_micros_check \
	"INSERT INTO projects (name, monthly_quota_usd_micros) VALUES ('gamma', -1)"
refused "membership: bad role" memberships_role_check \
	"INSERT INTO memberships (project_id, user_id, role) VALUES ('$P2', '$U2', 'owner')"
refused "membership: one per project and user" memberships_project_id_user_id_key \
	"INSERT INTO memberships (project_id, user_id, role) VALUES ('$P1', '$U1', 'viewer')"
refused "repo url: plain http" repo_connections_url_check \
	"INSERT INTO repo_connections (project_id, name, url) VALUES ('$P1', 'x', 'http://git.example.com/a.git')"
refused "repo url: no credentials in the URL" repo_connections_url_check \
	"INSERT INTO repo_connections (project_id, name, url) VALUES ('$P1', 'x', 'https://u:tok@git.example.com/a.git')"
refused "repo url: relative path" repo_connections_url_check \
	"INSERT INTO repo_connections (project_id, name, url) VALUES ('$P1', 'x', 'srv/a.git')"
refused "repo connection: name unique per project" repo_connections_project_id_name_key \
	"INSERT INTO repo_connections (project_id, name, url) VALUES ('$P1', 'main', '/srv/b.git')"
accepted "repo connection: same name in another project" \
	"INSERT INTO repo_connections (project_id, name, url) VALUES ('$P2', 'main', '/srv/b.git')"
refused "repo token: ciphertext without nonce" repo_connections_token_pair \
	"INSERT INTO repo_connections (project_id, name, url, token_ciphertext) VALUES ('$P1', 'x', '/a', $HEX32)"
refused "repo token: nonce without ciphertext" repo_connections_token_pair \
	"INSERT INTO repo_connections (project_id, name, url, token_nonce) VALUES ('$P1', 'x', '/a', decode(repeat('00', 24), 'hex'))"
refused "repo token: nonce is 24 bytes" repo_connections_token_nonce_check \
	"INSERT INTO repo_connections (project_id, name, url, token_ciphertext, token_nonce) VALUES ('$P1', 'x', '/a', $HEX32, decode(repeat('00', 23), 'hex'))"
refused "mcp credentials: nonce is 24 bytes" mcp_servers_credentials_nonce_check \
	"INSERT INTO mcp_servers (name, version, spec, credentials_ciphertext, credentials_nonce) VALUES ('x', 1, '{}', $HEX32, decode(repeat('00', 25), 'hex'))"
refused "mcp spec: an object" mcp_servers_spec_check \
	"INSERT INTO mcp_servers (name, version, spec) VALUES ('x', 1, '[]')"
refused "skill: version >= 1" skills_version_check \
	"INSERT INTO skills (name, version, body, sha256) VALUES ('x', 0, '', $HEX32)"
refused "skill: (name, version) unique" skills_name_version_key \
	"INSERT INTO skills (name, version, body, sha256) VALUES ('c-style', 1, '', $HEX32)"
refused "grant: bad resource kind" grants_resource_kind_check \
	"INSERT INTO grants (project_id, resource_kind, resource_name) VALUES ('$P1', 'template', 'x')"
refused "grant: unique per project and resource" grants_project_id_resource_kind_resource_name_key \
	"INSERT INTO grants (project_id, resource_kind, resource_name) VALUES ('$P1', 'skill', 'c-style')"
refused "template: version in 1..1000000" templates_version_check \
	"INSERT INTO templates (name, version, source, compiled, sha256) VALUES ('x', 0, '', '{}', $HEX32)"
refused "run: bad status" runs_status_check \
	"INSERT INTO runs ($RUNCOLS, status) VALUES ($RUNVALS, 'done')"
refused "run: terminal without finished_at" runs_finished_iff_terminal \
	"INSERT INTO runs ($RUNCOLS, status, started_at) VALUES ($RUNVALS, 'succeeded', now())"
refused "run: finished_at on a live run" runs_finished_iff_terminal \
	"INSERT INTO runs ($RUNCOLS, status, finished_at) VALUES ($RUNVALS, 'queued', now())"
refused "run: running without started_at" runs_live_started \
	"INSERT INTO runs ($RUNCOLS, status) VALUES ($RUNVALS, 'running')"
refused "run: lease owner without expiry" runs_lease_pair \
	"INSERT INTO runs ($RUNCOLS, status, started_at, lease_owner) VALUES ($RUNVALS, 'running', now(), 'e1')"
refused "run: no lease on a queued run" runs_lease_live \
	"INSERT INTO runs ($RUNCOLS, lease_owner, lease_expires_at) VALUES ($RUNVALS, 'e1', now())"
refused "run: error only on failed/cancelled" runs_error_failed \
	"INSERT INTO runs ($RUNCOLS, status, started_at, finished_at, error) VALUES ($RUNVALS, 'succeeded', now(), now(), 'x')"
refused "run: template snapshot must match the template" runs_template_snapshot_fkey \
	"INSERT INTO runs ($RUNCOLS) VALUES ('$P1', '$TPL', 'fix-failing-test', 2, '$U1')"
refused "run: base commit is 40 or 64 hex" runs_base_commit_check \
	"INSERT INTO runs ($RUNCOLS, base_commit) VALUES ($RUNVALS, repeat('a', 41))"
refused "run: next_event_seq >= 1" runs_next_event_seq_check \
	"INSERT INTO runs ($RUNCOLS, next_event_seq) VALUES ($RUNVALS, 0)"
refused "run: budget not negative" runs_budget_usd_micros_check \
	"INSERT INTO runs ($RUNCOLS, budget_usd_micros) VALUES ($RUNVALS, -1)"
refused "run: idempotency key unique per project" runs_idempotency_idx \
	"INSERT INTO runs ($RUNCOLS, idempotency_key) VALUES ($RUNVALS, 'submit-1')"
accepted "run: same idempotency key in another project" \
	"INSERT INTO runs ($RUNCOLS, idempotency_key) VALUES ('$P2', '$TPL', 'fix-failing-test', 1, '$U1', 'submit-1')"
accepted "run: several runs without idempotency key" \
	"INSERT INTO runs ($RUNCOLS) VALUES ($RUNVALS), ($RUNVALS)"
refused "step: bad status" run_steps_status_check \
	"INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at) VALUES ('$R_Q', 'p', 's', 1, 'paused', now())"
refused "step: attempt >= 1" run_steps_attempt_check \
	"INSERT INTO run_steps (run_id, phase_name, step_id, attempt) VALUES ('$R_Q', 'p', 's', 0)"
refused "step: (run, step, attempt) unique" run_steps_run_id_step_id_attempt_key \
	"INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at) VALUES ('$R_Q', 'diagnose', 'run-tests', 1, 'failed', now())"
refused "step: one running attempt per step" run_steps_one_running_idx \
	"INSERT INTO run_steps (run_id, phase_name, step_id, attempt) VALUES ('$R_FIN', 'fix', 'implement', 3)"
refused "step: finished status needs finished_at" run_steps_finished_iff_done \
	"INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status) VALUES ('$R_Q', 'p', 's', 1, 'succeeded')"
refused "event: type format" run_events_type_check \
	"INSERT INTO run_events (run_id, seq, type) VALUES ('$R_Q', 1, 'started')"
refused "event: payload is an object" run_events_payload_check \
	"INSERT INTO run_events (run_id, seq, type, payload) VALUES ('$R_Q', 1, 'run.started', '1')"
refused "approval: two pending on one run" approvals_one_pending_idx \
	"INSERT INTO approvals (run_id, step_id, expires_at) VALUES ('$R_WAIT', 'review', now() + interval '1 h')"
refused "approval: decided without a decision time" approvals_decided_iff_not_pending \
	"INSERT INTO approvals (run_id, step_id, status, decided_by, expires_at) VALUES ('$R_Q', 'r', 'approved', '$U1', now() + interval '1 h')"
refused "approval: pending with decision fields" approvals_decided_iff_not_pending \
	"INSERT INTO approvals (run_id, step_id, decided_by, decided_at, expires_at) VALUES ('$R_Q', 'r', '$U1', now(), now() + interval '1 h')"
refused "approval: approved needs the person" approvals_decider_iff_decision \
	"INSERT INTO approvals (run_id, step_id, status, decided_at, expires_at) VALUES ('$R_Q', 'r', 'approved', now(), now() + interval '1 h')"
refused "approval: expired names no person" approvals_decider_iff_decision \
	"INSERT INTO approvals (run_id, step_id, status, decided_by, decided_at, expires_at) VALUES ('$R_Q', 'r', 'expired', '$U1', now(), now() + interval '1 h')"
refused "approval: bad status" approvals_status_check \
	"INSERT INTO approvals (run_id, step_id, status, decided_at, expires_at) VALUES ('$R_Q', 'r', 'maybe', now(), now() + interval '1 h')"
refused "approval: expiry after request" approvals_expiry_after_request \
	"INSERT INTO approvals (run_id, step_id, expires_at) VALUES ('$R_Q', 'r', now())"
ART="INSERT INTO artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline, store_path) VALUES ('$R_Q', 'run-tests', 1"
SHA_OK="sha256('ok')"
PATH_OK="substr(encode(sha256('ok'), 'hex'), 1, 2) || '/' || encode(sha256('ok'), 'hex')"
refused "artifact: both inline and store_path" artifacts_one_location \
	"$ART, 'a', 'text', 2, $SHA_OK, 'ok', $PATH_OK)"
refused "artifact: neither inline nor store_path" artifacts_one_location \
	"$ART, 'a', 'text', 2, $SHA_OK, NULL, NULL)"
refused "artifact: store_path derived from the digest" artifacts_store_path_digest \
	"$ART, 'a', 'text', 2, $SHA_OK, NULL, '../../etc/passwd')"
refused "artifact: inline size matches" artifacts_inline_size \
	"$ART, 'a', 'text', 3, $SHA_OK, 'ok', NULL)"
refused "artifact: not empty" artifacts_size_check \
	"$ART, 'a', 'text', 0, $SHA_OK, '', NULL)"
refused "artifact: sha256 is 32 bytes" artifacts_sha256_check \
	"$ART, 'a', 'text', 2, decode('00', 'hex'), 'ok', NULL)"
refused "artifact: bad kind" artifacts_kind_check \
	"$ART, 'a', 'exe', 2, $SHA_OK, 'ok', NULL)"
refused "artifact: (run, key, attempt) unique" artifacts_run_id_key_attempt_key \
	"$ART, 'test-log', 'text', 2, $SHA_OK, 'ok', NULL)"
refused "artifact: of an attempt that exists" artifacts_attempt_fkey \
	"INSERT INTO artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline) VALUES ('$R_Q', 'run-tests', 2, 'a', 'text', 2, $SHA_OK, 'ok')"
refused "token usage: tokens not negative" token_usage_output_tokens_check \
	"INSERT INTO token_usage (run_id, step_id, attempt, provider, model, output_tokens) VALUES ('$R_FIN', 'implement', 2, 'p', 'm', -1)"
refused "budget: month is a first day" budget_reservations_month_check \
	"INSERT INTO budget_reservations (project_id, run_id, step_id, attempt, month, amount_usd_micros) VALUES ('$P1', '$R_FIN', 'implement', 3, '2026-01-02', 1)"
refused "budget: amount > 0" budget_reservations_amount_usd_micros_check \
	"INSERT INTO budget_reservations (project_id, run_id, step_id, attempt, month, amount_usd_micros) VALUES ('$P1', '$R_FIN', 'implement', 3, '2026-01-01', 0)"
refused "budget: charged to the run's own project" budget_reservations_run_project_fkey \
	"INSERT INTO budget_reservations (project_id, run_id, step_id, attempt, month, amount_usd_micros) VALUES ('$P2', '$R_FIN', 'implement', 3, '2026-01-01', 1)"
refused "budget: one reservation per attempt" budget_reservations_run_id_step_id_attempt_key \
	"INSERT INTO budget_reservations (project_id, run_id, step_id, attempt, month, amount_usd_micros) VALUES ('$P1', '$R_FIN', 'implement', 2, '2026-01-01', 1)"
refused "budget: settled time and amount together" budget_reservations_settled_pair \
	"UPDATE budget_reservations SET settled_at = now() WHERE run_id = '$R_FIN'"
refused "audit: a user action names the user" audit_log_actor_user \
	"INSERT INTO audit_log (actor_kind, action, object_kind) VALUES ('user', 'run.submit', 'run')"
refused "audit: an operator action names no user" audit_log_actor_user \
	"INSERT INTO audit_log (actor_user_id, actor_kind, action, object_kind) VALUES ('$U1', 'operator', 'run.submit', 'run')"
refused "audit_log: UPDATE refused" "audit_log: UPDATE is not allowed" \
	"UPDATE audit_log SET action = 'x.y'"
refused "audit_log: DELETE refused" "audit_log: DELETE is not allowed" \
	"DELETE FROM audit_log"
refused "audit_log: TRUNCATE refused" "audit_log: TRUNCATE is not allowed" \
	"TRUNCATE audit_log"
is "audit_log rows all still there" "SELECT count(*) FROM audit_log" 2
refused "a project with runs cannot be deleted" runs_project_id_fkey \
	"DELETE FROM projects WHERE id = '$P1'"
refused "a user who submitted runs cannot be deleted" runs_submitted_by_fkey \
	"DELETE FROM users WHERE id = '$U1'"

### append_run_event
for i in 1 2 3 4 5; do
	s=$(val "SELECT append_run_event('$R_SEQ', 'step.output', '{\"i\": $i}')")
	[ "$s" = "$i" ] || notok "append_run_event #$i returned '$s'"
done
is "append_run_event: seqs 1..5 in order" \
	"SELECT string_agg(seq::text, ',' ORDER BY seq) FROM run_events WHERE run_id = '$R_SEQ'" "1,2,3,4,5"
refused "run_events: UPDATE refused (events are immutable)" "run_events: UPDATE is not allowed" \
	"UPDATE run_events SET type = 'x.y' WHERE run_id = '$R_SEQ'"
refused "append_run_event: bad type raises" run_events_type_check \
	"SELECT append_run_event('$R_SEQ', 'Bad Type', '{}')"
refused "append_run_event: non-object payload raises" run_events_payload_check \
	"SELECT append_run_event('$R_SEQ', 'step.output', '[1]')"
refused "append_run_event: unknown run raises" "no run" \
	"SELECT append_run_event('00000000-0000-0000-0000-00000000ffff', 'step.output', '{}')"
is "a failed append leaves no gap" "SELECT append_run_event('$R_SEQ', 'step.output', NULL)" 6
is "... and next_event_seq follows" "SELECT next_event_seq FROM runs WHERE id = '$R_SEQ'" 7
sq -c "BEGIN" -c "SELECT append_run_event('$R_SEQ', 'step.output', '{}')" -c "ROLLBACK" >/dev/null
is "a rolled-back append leaves no gap" "SELECT append_run_event('$R_SEQ', 'step.output', '{}')" 7
out=$(sq -c "LISTEN run_events" -c "SELECT append_run_event('$R_SEQ', 'step.output', '{}')" 2>&1)
case $out in
*"notification \"run_events\" with payload \"$R_SEQ:8\""*) ok "append_run_event notifies run_events '<run>:<seq>'" ;;
*) notok "append_run_event notifies run_events '<run>:<seq>': $out" ;;
esac

# 8 clients x 500 appends to one run, each append its own transaction
# (psql autocommit).  A barrier (an advisory lock held until all 8 wait on
# it) starts them together so that they really interleave.
awk -v run="$R_CONC" -v dir="$T" 'BEGIN {
	for (c = 1; c <= 8; c++) {
		f = sprintf("%s/conc%d.sql", dir, c)
		print "SELECT pg_advisory_lock_shared(4242);" > f
		for (i = 1; i <= 500; i++)
			printf("SELECT append_run_event(%c%s%c, %cstep.output%c, %c{\"c\": %d, \"i\": %d}%c);\n",
			    39, run, 39, 39, 39, 39, c, i, 39) > f
		close(f)
	}
}'
WAIT8="DO \$\$ BEGIN FOR i IN 1..400 LOOP EXIT WHEN (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted) >= 8; PERFORM pg_sleep(0.025); END LOOP; END \$\$"
t0=$(date +%s)
sq -c "SELECT pg_advisory_lock(4242)" -c "$WAIT8" >/dev/null &
HOLDER=$!
wait_for 10 held 4242
pids=""
for c in 1 2 3 4 5 6 7 8; do
	sq -f "$T/conc$c.sql" >/dev/null 2>"$T/conc$c.err" &
	pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
wait "$HOLDER"
t1=$(date +%s)
check "8 concurrent clients appended without error ($((t1 - t0))s)" [ $rc -eq 0 ]
is "4000 events with seq exactly 1..4000" \
	"SELECT count(*) || ' ' || count(DISTINCT seq) || ' ' || min(seq) || ' ' || max(seq) FROM run_events WHERE run_id = '$R_CONC'" \
	"4000 4000 1 4000"
is "next_event_seq = 4001" "SELECT next_event_seq FROM runs WHERE id = '$R_CONC'" 4001
is "500 events per client" \
	"SELECT string_agg(n::text, ',') FROM (SELECT count(*) AS n FROM run_events WHERE run_id = '$R_CONC' GROUP BY payload->>'c') x" \
	"500,500,500,500,500,500,500,500"
is "each client's events are in its own order" \
	"SELECT count(*) FROM (SELECT (payload->>'i')::int AS i, row_number() OVER (PARTITION BY payload->>'c' ORDER BY seq) AS r FROM run_events WHERE run_id = '$R_CONC') x WHERE i <> r" 0
sw=$(val "SELECT count(*) FROM (SELECT payload->>'c' AS c, lag(payload->>'c') OVER (ORDER BY seq) AS p FROM run_events WHERE run_id = '$R_CONC') x WHERE c <> p")
check "the clients really interleaved ($sw switches between clients)" [ "$sw" -ge 50 ]

### transition_run
is "transition_run queued -> running" "SELECT transition_run('$R_TR', 'queued', 'running')" t
is "... sets started_at" "SELECT status || ' ' || (started_at IS NOT NULL) FROM runs WHERE id = '$R_TR'" "running true"
is "transition_run from a stale status is false" "SELECT transition_run('$R_TR', 'queued', 'running')" f
is "transition_run running -> waiting_approval" "SELECT transition_run('$R_TR', 'running', 'waiting_approval')" t
is "transition_run waiting_approval -> running" "SELECT transition_run('$R_TR', 'waiting_approval', 'running')" t
is "transition_run on an unknown run is false" \
	"SELECT transition_run('00000000-0000-0000-0000-00000000ffff', 'queued', 'running')" f
refused "transition_run: illegal pair raises" "illegal transition" \
	"SELECT transition_run('$R_TR', 'queued', 'waiting_approval')"
refused "transition_run: running -> queued raises" "illegal transition" \
	"SELECT transition_run('$R_TR', 'running', 'queued')"
refused "transition_run: NULL status raises" "illegal transition" \
	"SELECT transition_run('$R_TR', NULL, 'running')"
refused "transition_run: terminal status raises (finalize_run)" "use finalize_run" \
	"SELECT transition_run('$R_TR', 'running', 'succeeded')"
sq -c "UPDATE runs SET cancel_requested_at = now() WHERE id = '$R_TR'"
is "transition_run after a cancel request is false" \
	"SELECT transition_run('$R_TR', 'running', 'waiting_approval')" f
is "... and the status is unchanged" "SELECT status FROM runs WHERE id = '$R_TR'" running

### finalize_run
sq -c "SELECT append_run_event('$R_FIN', 'run.started', '{}')" >/dev/null
refused "finalize_run: illegal pair raises" "illegal transition" \
	"SELECT finalize_run('$R_FIN', 'queued', 'succeeded', NULL, 'run.succeeded', '{}')"
refused "finalize_run: a failing event insert raises" run_events_type_check \
	"SELECT finalize_run('$R_FIN', 'running', 'succeeded', NULL, 'Bad', '{}')"
is "... and changed nothing (status, finished_at, seq)" \
	"SELECT status || ' ' || (finished_at IS NULL) || ' ' || next_event_seq FROM runs WHERE id = '$R_FIN'" "running true 2"
is "finalize_run from a stale status returns NULL" \
	"SELECT coalesce(finalize_run('$R_FIN', 'waiting_approval', 'failed', 'x', 'run.failed', '{}')::text, 'null')" null
is "finalize_run running -> succeeded returns the event's seq" \
	"SELECT finalize_run('$R_FIN', 'running', 'succeeded', NULL, 'run.succeeded', '{\"ok\": true}')" 2
is "... status, finish time, totals from token_usage, lease cleared" \
	"SELECT status || ' ' || (finished_at IS NOT NULL) || ' ' || spent_usd_micros || ' ' || tokens_in || ' ' || tokens_out || ' ' || (lease_owner IS NULL) FROM runs WHERE id = '$R_FIN'" \
	"succeeded true 7000 300 30 true"
is "... the terminal event is the last one" \
	"SELECT seq || ' ' || type FROM run_events WHERE run_id = '$R_FIN' ORDER BY seq DESC LIMIT 1" "2 run.succeeded"
is "... an open step attempt was closed as crashed" \
	"SELECT status FROM run_steps WHERE run_id = '$R_FIN' AND step_id = 'implement' AND attempt = 2" crashed
is "finalize_run a second time returns NULL" \
	"SELECT coalesce(finalize_run('$R_FIN', 'running', 'failed', 'x', 'run.failed', '{}')::text, 'null')" null
refused "no event after the terminal one" "is finished" \
	"SELECT append_run_event('$R_FIN', 'step.output', '{}')"
refused "no token usage on a finished run" "is finished" \
	"INSERT INTO token_usage (run_id, step_id, attempt, provider, model) VALUES ('$R_FIN', 'implement', 2, 'p', 'm')"

sq -c "UPDATE runs SET cancel_requested_at = now() WHERE id = '$R_CAN'"
is "a late success loses to an earlier cancel (NULL)" \
	"SELECT coalesce(finalize_run('$R_CAN', 'running', 'succeeded', NULL, 'run.succeeded', '{}')::text, 'null')" null
is "... so does a late failure" \
	"SELECT coalesce(finalize_run('$R_CAN', 'running', 'failed', 'boom', 'run.failed', '{}')::text, 'null')" null
is "... nothing was written" \
	"SELECT status || ' ' || next_event_seq || ' ' || (SELECT count(*) FROM run_events WHERE run_id = '$R_CAN') FROM runs WHERE id = '$R_CAN'" \
	"running 1 0"
is "the cancel itself finalizes" \
	"SELECT finalize_run('$R_CAN', 'running', 'cancelled', 'cancelled by alice', 'run.cancelled', '{}')" 1
is "... as cancelled" "SELECT status FROM runs WHERE id = '$R_CAN'" cancelled

is "finalize_run waiting_approval -> cancelled" \
	"SELECT finalize_run('$R_WAIT', 'waiting_approval', 'cancelled', NULL, 'run.cancelled', '{}')" 1
is "... closes the open step and expires the pending approval" \
	"SELECT (SELECT status FROM run_steps WHERE run_id = '$R_WAIT') || ' ' || (SELECT status FROM approvals WHERE run_id = '$R_WAIT')" \
	"cancelled expired"

# Usage being recorded while the run is finalized: finalize_run waits for
# it (the usage insert holds a key-share lock on the run) and counts it.
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt) VALUES ('$R_TR', 'fix', 'implement', 1)"
sq -c "BEGIN" \
	-c "INSERT INTO token_usage (run_id, step_id, attempt, provider, model, input_tokens, cost_usd_micros) VALUES ('$R_TR', 'implement', 1, 'p', 'm', 11, 1234)" \
	-c "SELECT pg_sleep(1)" -c "COMMIT" >/dev/null &
USAGE=$!
sleeping() { [ "$(val "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")" -ge 1 ]; }
wait_for 10 sleeping
is "finalize_run concurrent with an uncommitted usage row" \
	"SELECT finalize_run('$R_TR', 'running', 'cancelled', NULL, 'run.cancelled', '{}')" 1
wait "$USAGE"
is "... waited for it and counted it in the totals" \
	"SELECT spent_usd_micros || ' ' || tokens_in FROM runs WHERE id = '$R_TR'" "1234 11"

### decide_approval
newappr() { # newappr EXPIRES -> approval id (pending, on R_APPR)
	sq -c "INSERT INTO approvals (run_id, step_id, requested_at, expires_at) VALUES ('$R_APPR', 'review', least(now(), $1 - interval '1 h'), $1) RETURNING id"
}
A=$(newappr "now() + interval '1 day'")
refused "decide_approval: bad decision raises" "must be approved or rejected" \
	"SELECT decide_approval('$A', 'maybe', '$U1', NULL)"
refused "decide_approval: a disabled user raises" "no active user" \
	"SELECT decide_approval('$A', 'approved', '$U3', NULL)"
is "decide_approval: unknown approval is false" \
	"SELECT decide_approval('00000000-0000-0000-0000-00000000ffff', 'approved', '$U1', NULL)" f
is "... still pending, nothing written" \
	"SELECT status || ' ' || (SELECT count(*) FROM run_events WHERE run_id = '$R_APPR') FROM approvals WHERE id = '$A'" "pending 0"

# Two people decide at the same instant, three rounds: both sessions block
# on an advisory lock that is released once both are waiting.
WAIT2="DO \$\$ BEGIN FOR i IN 1..400 LOOP EXIT WHEN (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4343 AND NOT granted) >= 2; PERFORM pg_sleep(0.01); END LOOP; END \$\$"
race_ok=0
for round in 1 2 3; do
	sq -c "SELECT pg_advisory_lock(4343)" -c "$WAIT2" >/dev/null &
	HOLDER=$!
	wait_for 10 held 4343
	sq -c "SELECT pg_advisory_lock_shared(4343)" \
		-c "SELECT decide_approval('$A', 'approved', '$U1', 'lgtm', '192.0.2.1')" >"$T/d1" 2>&1 &
	D1=$!
	sq -c "SELECT pg_advisory_lock_shared(4343)" \
		-c "SELECT decide_approval('$A', 'rejected', '$U2', 'no', '192.0.2.2')" >"$T/d2" 2>&1 &
	D2=$!
	wait "$D1"
	wait "$D2"
	wait "$HOLDER"
	w1=$(grep -cx t "$T/d1")
	w2=$(grep -cx t "$T/d2")
	f1=$(grep -cx f "$T/d1")
	f2=$(grep -cx f "$T/d2")
	if [ "$w1" = 1 ] && [ "$f2" = 1 ]; then
		want="approved $U1"
	elif [ "$w2" = 1 ] && [ "$f1" = 1 ]; then
		want="rejected $U2"
	else
		notok "race $round: exactly one decision wins (got: $(cat "$T/d1" "$T/d2" | tr '\n' ' '))"
		continue
	fi
	got=$(val "SELECT status || ' ' || decided_by FROM approvals WHERE id = '$A'")
	na=$(val "SELECT count(*) FROM audit_log WHERE object_kind = 'approval' AND object_id = '$A'")
	ne=$(val "SELECT count(*) FROM run_events WHERE run_id = '$R_APPR' AND payload->>'approval_id' = '$A'")
	if [ "$got" = "$want" ] && [ "$na" = 1 ] && [ "$ne" = 1 ]; then
		race_ok=$((race_ok + 1))
	else
		notok "race $round: winner '$want' but row '$got', $na audit rows, $ne events"
	fi
	A=$(newappr "now() + interval '1 day'")
done
check "concurrent decide_approval: exactly one true, its decision stored, one event, one audit row (3 races)" \
	[ "$race_ok" = 3 ]
is "... the decision event carries seq, type and decider" \
	"SELECT string_agg(seq || ':' || (type IN ('approval.approved', 'approval.rejected')), ',' ORDER BY seq) FROM run_events WHERE run_id = '$R_APPR'" \
	"1:true,2:true,3:true"
is "... the audit row says who, from where, in which project" \
	"SELECT count(*) FROM audit_log WHERE action = 'approval.decide' AND actor_kind = 'user' AND project_id = '$P1' AND remote_addr LIKE '192.0.2.%'" 3
is "deciding a decided approval is false" \
	"SELECT decide_approval(id, 'rejected', '$U2', NULL) FROM approvals WHERE run_id = '$R_APPR' AND status <> 'pending' LIMIT 1" f
sq -c "DELETE FROM approvals WHERE id = '$A'"
A=$(newappr "now() - interval '1 minute'")
is "deciding an expired (still pending) approval is false" \
	"SELECT decide_approval('$A', 'approved', '$U1', NULL)" f
is "... and wrote nothing" \
	"SELECT status || ' ' || (SELECT count(*) FROM audit_log WHERE object_id = '$A') || ' ' || (SELECT next_event_seq FROM runs WHERE id = '$R_APPR') FROM approvals WHERE id = '$A'" \
	"pending 0 4"
sq -c "DELETE FROM approvals WHERE id = '$A'"
A=$(newappr "now() + interval '1 day'")
sq -c "SELECT finalize_run('$R_APPR', 'waiting_approval', 'failed', 'gave up', 'run.failed', '{}')" >/dev/null
is "deciding on a finished run is false" "SELECT decide_approval('$A', 'approved', '$U1', NULL)" f

### Cascades: a run's rows go with it
sq -c "DELETE FROM runs WHERE id = '$R_Q'"
is "deleting a run removes its steps and artifacts" \
	"SELECT (SELECT count(*) FROM run_steps WHERE run_id = '$R_Q') + (SELECT count(*) FROM artifacts WHERE run_id = '$R_Q')" 0

[ "$T_FAIL" -eq 0 ] || { echo "--- postgres log"; tail -20 "$DBD/log"; }
finish schema
