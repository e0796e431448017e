#!/bin/sh
# docs/openapi.yaml against the real daemon: tests/browser/openapi.mjs
# sends requests to every operation of the spec (and errors of every kind:
# 400, 401, 403 forbidden/csrf/cross_origin, 404, 405, 409, 415, 422) and
# checks each answer against the spec: the path matches one of its
# templates, the status is one the operation declares, the media type one
# the response declares, the body and the declared headers validate against
# their schemas (ajv, JSON Schema 2020-12, strict); request bodies the daemon
# takes validate against the operation's requestBody schema, and those it
# refuses with a 422 body error do not.  Every operation must answer at
# least one success that matches.  Whether the file is valid OpenAPI 3.1 is
# test_docs.sh's check; whether its routes are the router's, test_router's.
. tests/integration/lib.sh
need_root openapi
if [ ! -f tests/browser/node_modules/ajv/package.json ] ||
	[ ! -f tests/browser/node_modules/@seriousme/openapi-schema-validator/package.json ] ||
	! command -v node >/dev/null 2>&1; then
	notok "node and tests/browser's npm packages are installed (make deps)"
	finish openapi
	exit 1
fi
make_env
# runs stay as the test leaves them: this host executes none, and no sweep
# (expiring approvals, ending cancelled runs) changes them under the checks
echo "engine: { concurrency: 0, sweep: 3600 }" >>"$CONF"
trap cleanup_env EXIT
start_daemon_or_finish openapi

printf '# C style\n\nIndent with tabs.\n' >"$T/c-style.md"
ctl user add alice "Alice Admin" && ctl user add vic && ctl user add nora &&
	TA=$(new_token alice) && TV=$(new_token vic) &&
	ctl project add p1 && ctl member add p1 alice admin && ctl member add p1 vic viewer &&
	ctl template load templates/run-tests.yaml &&
	printf 'secret-token-XYZ' | ctl repo add p1 myrepo https://example.com/x.git &&
	ctl skill add c-style "$T/c-style.md" && ctl grant add p1 skill c-style
check "set-up: users, tokens, a project, a template, a repository, a granted skill" [ $? -eq 0 ]
P1=$(psql_q "select id from projects where name = 'p1'")

# submit: prints the new run's id
submit() {
	curl -s --max-time 10 -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
		--data-binary '{"template": "run-tests", "params": {"repo": "myrepo"}}' \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" </dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
# A run as an engine would have left it at its checkpoint (no engine runs
# here): running, one step attempt with a model call and an artifact, then
# waiting on an approval with its approval.requested event.
RW=$(submit)
RR=$(submit)
psql_q "select transition_run('$RW', 'queued', 'running'), transition_run('$RR', 'queued', 'running')" >/dev/null
psql_q "insert into run_steps (run_id, phase_name, step_id, attempt) values ('$RW', 'test', 'run-tests', 1)" >/dev/null
psql_q "insert into token_usage (run_id, step_id, attempt, provider, model, input_tokens, output_tokens, cost_usd_micros)
        values ('$RW', 'run-tests', 1, 'anthropic', 'claude-test', 10, 20, 1234)" >/dev/null
psql_q "update runs set spent_usd_micros = 1234, tokens_in = 10, tokens_out = 20 where id = '$RW'" >/dev/null
ART=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
	values ('$RW', 'run-tests', 1, 'test-log', 'text', 3, sha256(convert_to(E'ok\n', 'UTF8')), convert_to(E'ok\n', 'UTF8')) returning id" | head -1)
AP=$(psql_q "insert into approvals (run_id, step_id, expires_at) values ('$RW', 'review', now() + interval '1 hour')
	returning id" | head -1)
psql_q "select append_run_event('$RW', 'approval.requested', jsonb_build_object('step_id', 'review',
          'approval_id', '$AP', 'message', 'The tests have run'));
        select transition_run('$RW', 'running', 'waiting_approval')" >/dev/null
check "set-up: a run waiting on an approval, with a step, a model call and an artifact; a running run" \
	[ "$(psql_q "select (select status from runs where id = '$RW') || ' ' || (select status from runs where id = '$RR')
	             || ' ' || (select count(*) from artifacts where id = '$ART')")" = "waiting_approval running 1" ]

out=$(URL="http://127.0.0.1:$PORT" TOKEN="$TA" VIEWER="$TV" P1="$P1" RUN_WAITING="$RW" RUN_RUNNING="$RR" \
	ARTIFACT="$ART" timeout 120 node tests/browser/openapi.mjs live docs/openapi.yaml 2>&1)
rc=$?
printf '%s\n' "$out"
T_PASS=$((T_PASS + $(printf '%s\n' "$out" | grep -c '^ok - ')))
T_FAIL=$((T_FAIL + $(printf '%s\n' "$out" | grep -c '^not ok - ')))
nfail=$(printf '%s\n' "$out" | grep -c '^not ok - ')
check "openapi.mjs live exits 0 exactly when nothing failed (exit $rc)" \
	[ "$rc" -eq 0 -a "$nfail" -eq 0 -o "$rc" -ne 0 -a "$nfail" -gt 0 ]
check "... and checked many answers" [ "$(printf '%s\n' "$out" | grep -c '^ok - ')" -ge 80 ]

check "/healthz is 200 at the end" [ "$(healthz_code)" = 200 ]
check "the daemon log holds no token" sh -c "! grep -qF -e '$TA' -e '$TV' -e 'ags_' '$LOG'"
stop_daemon
check "the daemon stops cleanly (exit 0)" [ "$DAEMON_STATUS" -eq 0 ]
if grep -q "ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer" "$LOG"; then
	notok "no sanitizer report in the daemon's log"
	grep -A20 "ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer" "$LOG" | head -60
else
	ok "no sanitizer report in the daemon's log"
fi
finish openapi
