#!/bin/sh
# The runs part of the /v1 API against the real daemon and its database:
# RBAC of every /v1 route (admin, member, viewer, non-member; revoked and
# expired tokens), submitting runs (manifest pinning, parameter defaults,
# Idempotency-Key, also under a race; a workspace.ref made from a parameter,
# stored and shown, a bad one refused), tenant isolation of repositories and
# grants, bad input that changes nothing, pagination, cancelling, approvals
# (also under a race), artifact downloads, member management with its audit
# trail, usage, and that no repository token ever leaves the database.
. tests/integration/lib.sh
need_root api_runs
make_env
# runs stay as the API leaves them: this host executes none
# and none changes under the checks: no sweep (expiring approvals, ending
# cancelled runs) runs during the test
echo "engine: { concurrency: 0, sweep: 3600 }" >>"$CONF"
trap cleanup_env EXIT

start_daemon_or_finish api_runs

# new_token USER [DAYS]: prints the token (shown once by agrippactl).
: >"$T/bodies"
# api TOKEN METHOD PATH [curl args...]: sets CODE, BODY; headers in $T/hdrs.
# Every body is kept in $T/bodies (searched for secrets at the end).
api() {
	tok=$1 m=$2 p=$3
	shift 3
	[ -n "$tok" ] && set -- -H "Authorization: Bearer $tok" "$@"
	rm -f "$T/body" # curl creates it only when a body arrives
	CODE=$(curl -s -o "$T/body" -D "$T/hdrs" -w '%{http_code}' -g --max-time 10 -X "$m" "$@" \
		"http://127.0.0.1:$PORT$p" </dev/null)
	[ -f "$T/body" ] || : >"$T/body"
	BODY=$(cat "$T/body")
	cat "$T/body" >>"$T/bodies"
	echo >>"$T/bodies"
}
J='Content-Type: application/json'
# post TOKEN PATH JSON [curl args...]
post() {
	tok=$1 p=$2 b=$3
	shift 3
	api "$tok" POST "$p" -H "$J" --data-binary "$b" "$@"
}
# submit TOKEN PROJECT TEMPLATE REPO [curl args...]: sets RUN too.
submit() {
	tok=$1 sp=$2 st=$3 sr=$4
	shift 4
	post "$tok" "/v1/projects/$sp/runs" "{\"template\": \"$st\", \"params\": {\"repo\": \"$sr\"}}" "$@"
	RUN=$(val "d['id']")
}
# stream TOKEN RUN[?QUERY] [curl args...]: the event stream, at most 3 seconds.
stream() {
	tok=$1 sr=${2%%\?*} sq=""
	case $2 in *\?*) sq="?${2#*\?}" ;; esac
	shift 2
	rm -f "$T/body"
	CODE=$(curl -s -N -o "$T/body" -D "$T/hdrs" -w '%{http_code}' --max-time 3 \
		-H "Authorization: Bearer $tok" "$@" "http://127.0.0.1:$PORT/v1/runs/$sr/events/stream$sq" </dev/null)
	[ -f "$T/body" ] || : >"$T/body"
	BODY=$(cat "$T/body")
	cat "$T/body" >>"$T/bodies"
	echo >>"$T/bodies"
}
# expect CODE PYEXPR DESCRIPTION: the status is CODE and the Python
# expression holds for d, the JSON body.
expect() {
	if [ "$CODE" = "$1" ] && printf '%s' "$BODY" | "$PY" -c \
		"import json,sys,re; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)" 2>/dev/null; then
		ok "$3"
	else
		notok "$3 (got $CODE: $(printf '%s' "$BODY" | head -c 400))"
	fi
}
# val PYEXPR: the expression on the JSON body, printed.
val() { printf '%s' "$BODY" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>/dev/null; }
# Row counts and fingerprints of what the API may change.
counts() {
	psql_q "select concat_ws(' ',
	    (select count(*) from users), (select count(*) from memberships),
	    (select md5(coalesce(string_agg(id::text || role, ',' order by id), '')) from memberships),
	    (select count(*) from runs), (select count(*) from run_events),
	    (select count(*) from audit_log), (select count(*) from approvals),
	    (select count(*) from artifacts), (select count(*) from grants),
	    (select count(*) from token_usage),
	    (select md5(coalesce(string_agg(id::text || status || coalesce(cancel_requested_at::text, '') ||
	                 coalesce(budget_usd_micros::text, '') || phase_budgets::text,
	                 ',' order by id), '')) from runs),
	    (select md5(coalesce(string_agg(id::text || status, ',' order by id), '')) from approvals))"
}
# short PATH: the path with its ids named, for the descriptions
short() {
	printf '%s' "$1" | sed -e "s/$P1/P1/g" -e "s/$P2/P2/g" -e "s/${R:-@@}/RUN/g" -e "s/${ART:-@@}/ART/g" \
		-e "s/${AP:-@@}/APPROVAL/g" -e "s/${MEX:-@@}/MEMBERSHIP/g" -e "s/${RP2:-@@}/P2RUN/g" -e "s/$U0/UNKNOWN/g"
}
# the interpreter itself, not a version manager's shim: it runs hundreds of times
PY=$(python3 -c 'import sys; print(sys.executable)')
U0=00000000-0000-4000-8000-000000000000
NOW_MONTH=$(date -u +%Y-%m)

# --- set-up ------------------------------------------------------------------------
printf '# C style\n\nIndent with tabs; keep functions short.\n' >"$T/c-style.md"
printf '{"transport": "stdio", "command": ["mcp-github", "--stdio"]}\n' >"$T/github.json"
ctl user add alice "Alice Admin" && ctl user add mona && ctl user add vic && ctl user add nora &&
	ctl user add mona2 && ctl user add extra1 && ctl user add zed &&
	TA=$(new_token alice) && TM=$(new_token mona) && TV=$(new_token vic) && TN=$(new_token nora) &&
	TM2=$(new_token mona2) && TZ=$(new_token zed) &&
	TR=$(new_token alice) && TE=$(new_token alice 1) && ctl token revoke "$(prefix "$TR")" &&
	ctl project add p1 && ctl project add p2 &&
	ctl member add p1 alice admin && ctl member add p1 mona member && ctl member add p1 vic viewer &&
	ctl member add p2 nora admin &&
	ctl template load templates/run-tests.yaml && ctl template load templates/fix-failing-test.yaml &&
	printf 'secret-token-XYZ' | ctl repo add p1 myrepo https://example.com/x.git &&
	ctl repo add p2 otherrepo /tmp/x </dev/null &&
	ctl skill add c-style "$T/c-style.md" && ctl grant add p1 skill c-style &&
	ctl mcp add github "$T/github.json" </dev/null && ctl grant add p1 mcp github
check "set-up: users, tokens, projects, members, templates, repos, a skill and an mcp server" [ $? -eq 0 ]
psql_q "update api_tokens set created_at = now() - interval '2 days',
        expires_at = now() - interval '1 day' where prefix = '$(prefix "$TE")'" >/dev/null
check "set-up: one of alice's tokens has expired" \
	[ "$(psql_q "select expires_at < now() from api_tokens where prefix = '$(prefix "$TE")'")" = t ]
P1=$(psql_q "select id from projects where name = 'p1'")
P2=$(psql_q "select id from projects where name = 'p2'")
uid() { psql_q "select id from users where name = '$1'"; }
UA=$(uid alice) UM=$(uid mona) UN=$(uid nora)
TID=$(psql_q "select id from templates where name = 'run-tests'")
TSHA=$(psql_q "select encode(sha256, 'hex') from templates where name = 'run-tests'")
FID=$(psql_q "select id from templates where name = 'fix-failing-test'")
REPO1=$(psql_q "select id from repo_connections where name = 'myrepo'")
REPO2=$(psql_q "select id from repo_connections where name = 'otherrepo'")
SKID=$(psql_q "select id from skills where name = 'c-style'")
SKSHA=$(psql_q "select encode(sha256, 'hex') from skills where name = 'c-style'")
MCPID=$(psql_q "select id from mcp_servers where name = 'github'")
check "the template's pinned sha256 is the digest of its source" \
	[ "$TSHA" = "$(sha256sum templates/run-tests.yaml | cut -d' ' -f1)" ]
check "the skill's sha256 is the digest of its file" [ "$SKSHA" = "$(sha256sum "$T/c-style.md" | cut -d' ' -f1)" ]
# a run that is running (moved by hand: no engine runs it here)
running() { [ "$(psql_q "select transition_run('$1', 'queued', 'running')")" = t ]; }

# --- submitting runs ---------------------------------------------------------------
submit "$TA" "$P1" run-tests myrepo
R=$RUN
expect 201 "d['status'] == 'queued' and d['project_id'] == '$P1' and len(d['id']) == 36 and
	d['template'] == {'name': 'run-tests', 'version': 1} and
	d['params'] == {'repo': 'myrepo', 'test_command': 'make test'} and
	d['manifest'] == {'template': {'id': '$TID', 'name': 'run-tests', 'version': 1, 'sha256': '$TSHA'},
	                  'skills': [], 'mcp_servers': [], 'repos': {'repo': {'id': '$REPO1', 'name': 'myrepo'}}} and
	d['submitted_by'] == '$UA' and d['cancel_requested'] is False and d['last_event_seq'] == 1 and
	d['started_at'] is None and d['finished_at'] is None and d['error'] is None and
	d['spent_usd_micros'] == 0 and d['budget_usd_micros'] == 0 and
	re.match(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$', d['created_at'])" \
	"submit run-tests: 201, queued, defaults filled in, the manifest pins template and repo"
cp "$T/body" "$T/submitted.json"
api "$TV" GET "/v1/runs/$R"
check "GET /v1/runs/ID (a viewer) answers the run exactly as submitted" \
	"$PY" -c "import json,sys; sys.exit(json.load(open('$T/submitted.json')) != json.load(open('$T/body')))"
api "$TM" GET "/v1/runs/$R/events"
expect 200 "d['events'] == [{'seq': 1, 'type': 'run.queued', 'created_at': d['events'][0]['created_at'],
	'payload': {'template': 'run-tests', 'version': 1, 'submitted_by': '$UA'}}] and
	d['last_seq'] == 1 and d['finished'] is False" "the run's first event: seq 1 run.queued"
check "an audit row run.submit with the remote address" [ "$(psql_q "select count(*) from audit_log
	where action = 'run.submit' and object_kind = 'run' and object_id = '$R' and actor_kind = 'user'
	and actor_user_id = '$UA' and project_id = '$P1' and remote_addr = '127.0.0.1'
	and detail->>'template' = 'run-tests'")" = 1 ]
check "the run is stored, queued" \
	[ "$(psql_q "select status from runs where id = '$R'")" = queued ]
post "$TM" "/v1/projects/$P1/runs" '{"template": "run-tests", "params": {"repo": "myrepo", "test_command": "make check"}}'
expect 201 "d['params'] == {'repo': 'myrepo', 'test_command': 'make check'} and d['submitted_by'] == '$UM'" \
	"a member submits, a given param overrides its default"
post "$TM" "/v1/projects/$P1/runs" '{"template": "run-tests", "params": {"repo": "myrepo", "test_command": null}}'
expect 201 "d['params'] == {'repo': 'myrepo', 'test_command': 'make test'}" "a null param takes its default"
submit "$TM" "$P1" fix-failing-test myrepo
expect 201 "d['manifest']['template'] == {'id': '$FID', 'name': 'fix-failing-test', 'version': 1,
	'sha256': '$(sha256sum templates/fix-failing-test.yaml | cut -d' ' -f1)'} and
	d['manifest']['skills'] == [{'name': 'c-style', 'version': 1, 'id': '$SKID', 'sha256': '$SKSHA', 'optional': False}] and
	d['manifest']['mcp_servers'] == [{'name': 'github', 'version': 1, 'id': '$MCPID', 'optional': True}] and
	d['budget_usd_micros'] == 2000000" \
	"submit fix-failing-test: the skill c-style (version, digest) and the optional mcp server github pinned"

# Idempotency-Key
K="key-$$-one"
BODY1='{"template": "run-tests", "params": {"repo": "myrepo"}}'
post "$TM" "/v1/projects/$P1/runs" "$BODY1" -H "Idempotency-Key: $K"
expect 201 "d['status'] == 'queued'" "a submit with an Idempotency-Key: 201"
RK=$(val "d['id']")
post "$TM" "/v1/projects/$P1/runs" "$BODY1" -H "Idempotency-Key: $K"
expect 200 "d['id'] == '$RK' and d['status'] == 'queued'" "the same key and request again: 200 with the same run"
post "$TA" "/v1/projects/$P1/runs" "$BODY1" -H "Idempotency-Key: $K"
expect 200 "d['id'] == '$RK'" "... also from another member of the project"
post "$TM" "/v1/projects/$P1/runs" '{"template": "run-tests", "params": {"repo": "myrepo", "test_command": "make x"}}' \
	-H "Idempotency-Key: $K"
expect 409 "d['error']['code'] == 'idempotency_conflict' and d['error']['run_id'] == '$RK'" \
	"the same key with different params: 409 idempotency_conflict naming the run"
post "$TM" "/v1/projects/$P1/runs" '{"template": "fix-failing-test", "params": {"repo": "myrepo"}}' \
	-H "Idempotency-Key: $K"
expect 409 "d['error']['code'] == 'idempotency_conflict'" "the same key with another template: 409"
# a run first submitted with a non-default parameter, retried without it:
# the defaults would make another run, so it is not the same request
K2="key-$$-two"
post "$TM" "/v1/projects/$P1/runs" '{"template": "run-tests", "params": {"repo": "myrepo", "test_command": "make x"}}' \
	-H "Idempotency-Key: $K2"
expect 201 "d['params']['test_command'] == 'make x'" "a submit with a non-default parameter and a key: 201"
post "$TM" "/v1/projects/$P1/runs" "$BODY1" -H "Idempotency-Key: $K2"
expect 409 "d['error']['code'] == 'idempotency_conflict'" \
	"the same key without that parameter (the default differs): 409, not the old run"
post "$TM" "/v1/projects/$P1/runs" '{"template": "run-tests"}' -H "Idempotency-Key: $K2"
expect 422 "d['error']['code'] == 'invalid_params'" \
	"the same key with the required parameter missing: 422 like any invalid submit"
check "one run only with that key" [ "$(psql_q "select count(*) from runs where idempotency_key = '$K'")" = 1 ]
check "... with one run.queued event and one audit row" [ "$(psql_q "select (select count(*) from run_events
	where run_id = '$RK') || ' ' || (select count(*) from audit_log where object_id = '$RK')")" = "1 1" ]
submit "$TN" "$P2" run-tests otherrepo -H "Idempotency-Key: $K"
expect 201 "d['id'] != '$RK' and d['project_id'] == '$P2' and d['submitted_by'] == '$UN'" "another project may use the same key: a new run (201)"
RP2=$RUN
K128=$(printf 'k%.0s' $(seq 128))
post "$TM" "/v1/projects/$P1/runs" "$BODY1" -H "Idempotency-Key: $K128"
expect 201 "True" "a 128-character Idempotency-Key is accepted"
# four concurrent submits with one key
KR="race-$$"
pids=""
for n in 1 2 3 4; do
	curl -s -o "$T/race$n.body" -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $TM" -H "$J" \
		-H "Idempotency-Key: $KR" --data-binary "$BODY1" "http://127.0.0.1:$PORT/v1/projects/$P1/runs" \
		>"$T/race$n.code" </dev/null &
	pids="$pids $!"
done
wait $pids
cat "$T"/race?.body >>"$T/bodies"
codes=$(for n in 1 2 3 4; do cat "$T/race$n.code"; echo; done | sort | tr '\n' ' ')
check "four concurrent submits with one key: one 201 and three 200 ($codes)" [ "$codes" = "200 200 200 201 " ]
check "... all answering the same run" "$PY" -c "import json,sys
ids = {json.load(open('$T/race%d.body' % n))['id'] for n in (1, 2, 3, 4)}
sys.exit(len(ids) != 1)"
check "... and one run in the database, with one event and one audit row" \
	[ "$(psql_q "select count(*) || ' ' || (select count(*) from run_events e join runs r on r.id = e.run_id
	where r.idempotency_key = '$KR') || ' ' || (select count(*) from audit_log a join runs r on a.object_id = r.id::text
	where r.idempotency_key = '$KR') from runs where idempotency_key = '$KR'")" = "1 1 1" ]

# --- the revision a run checks out (workspace.ref) ---------------------------------
cat >"$T/on-branch.yaml" <<'EOF'
name: on-branch
version: 1
params:
  repo: { type: repoRef, required: true }
  branch: { type: string, default: main }
workspace: { repo: "${params.repo}", ref: "${params.branch}" }
phases: [ { name: p, steps: [ { id: a, kind: command, run: "git log -1" } ] } ]
EOF
check "a template whose workspace.ref is \${params.branch} loads" ctl template load "$T/on-branch.yaml"
api "$TV" GET "/v1/templates/on-branch"
expect 200 "d['template']['workspace'] == {'repo': '\${params.repo}', 'ref': '\${params.branch}', 'access': 'readWrite'}" \
	"... its compiled workspace holds the ref as written"
api "$TV" GET "/v1/templates/run-tests"
expect 200 "d['template']['workspace']['ref'] is None" "... and a template without one has ref null"
post "$TM" "/v1/projects/$P1/runs" '{"template": "on-branch", "params": {"repo": "myrepo"}}'
expect 201 "d['ref'] == 'main' and d['params'] == {'repo': 'myrepo', 'branch': 'main'} and d['base_commit'] is None" \
	"submit without branch: the default makes ref main"
RB1=$(val "d['id']")
check "... stored in runs.ref" [ "$(psql_q "select ref from runs where id = '$RB1'")" = main ]
post "$TM" "/v1/projects/$P1/runs" '{"template": "on-branch", "params": {"repo": "myrepo", "branch": "release/1.0"}}'
expect 201 "d['ref'] == 'release/1.0'" "submit with branch release/1.0: ref release/1.0"
RB2=$(val "d['id']")
api "$TV" GET "/v1/runs/$RB2"
expect 200 "d['ref'] == 'release/1.0' and d['base_commit'] is None" "GET /v1/runs/ID shows the ref"
api "$TV" GET "/v1/projects/$P1/runs?template=on-branch"
expect 200 "[(r['id'], r['ref']) for r in d['runs']] == [('$RB2', 'release/1.0'), ('$RB1', 'main')]" \
	"the list shows each run's ref"
api "$TV" GET "/v1/runs/$R"
expect 200 "'ref' in d and d['ref'] is None" "a run of a template without a ref: ref null"
BEFORE=$(counts)
for bad in "--upload-pack=x" "a..b" "x.lock" "main~1" "refs/heads/"; do
	post "$TM" "/v1/projects/$P1/runs" "{\"template\": \"on-branch\", \"params\": {\"repo\": \"myrepo\", \"branch\": \"$bad\"}}"
	expect 422 "d['error']['code'] == 'invalid_ref' and d['error']['field'] == 'workspace.ref' and
		d['error']['param'] == 'branch' and d['error']['params'] == ['branch'] and
		d['error']['message'].startswith('workspace.ref: must not ') and
		d['error']['message'].endswith('(made from parameter branch)')" \
		"branch $bad: 422 invalid_ref naming workspace.ref and branch"
done
check "the refused refs stored nothing (runs, events, audit, ...)" [ "$(counts)" = "$BEFORE" ]
check "... and no run has such a ref" \
	[ "$(psql_q "select count(*) from runs where ref is not null and ref not in ('main', 'release/1.0')")" = 0 ]

# --- tenant isolation --------------------------------------------------------------
BEFORE=$(counts)
submit "$TA" "$P1" run-tests otherrepo
expect 422 "d['error']['code'] == 'invalid_params' and
	d['error']['details'] == [{'param': 'repo', 'code': 'unknown_repo', 'message': d['error']['details'][0]['message']}]" \
	"p1 cannot use p2's repository: 422 invalid_params, unknown_repo"
submit "$TN" "$P2" run-tests myrepo
expect 422 "d['error']['code'] == 'invalid_params' and d['error']['details'][0]['code'] == 'unknown_repo'" \
	"p2 cannot use p1's repository either"
submit "$TN" "$P2" fix-failing-test otherrepo
expect 422 "d['error']['code'] == 'resource_not_granted' and 'c-style' in d['error']['message'] and
	[(x['kind'], x['name'], x['code']) for x in d['error']['details']] == [('skill', 'c-style', 'resource_not_granted')]" \
	"a required skill granted to p1 only: 422 resource_not_granted naming skill c-style (the optional github is no error)"
check "the refused submits created nothing (runs, events, audit, ...)" [ "$(counts)" = "$BEFORE" ]
ctl grant add p2 skill c-style
submit "$TN" "$P2" fix-failing-test otherrepo
expect 201 "d['manifest']['skills'][0]['name'] == 'c-style' and d['manifest']['mcp_servers'] == [] and
	d['manifest']['repos'] == {'repo': {'id': '$REPO2', 'name': 'otherrepo'}}" \
	"once p2 has c-style: 201, and p1's grant of github is not in p2's manifest"
check "... nor anywhere in p2's runs in the database" \
	[ "$(psql_q "select count(*) from runs where project_id = '$P2' and manifest::text like '%github%'")" = 0 ]
api "$TN" GET "/v1/projects/$P2/grants"
expect 200 "[(g['kind'], g['name'], g['latest_version']) for g in d['grants']] == [('skill', 'c-style', 1)]" \
	"p2's grants list only its own"
api "$TV" GET "/v1/projects/$P1/grants"
expect 200 "[(g['kind'], g['name'], g['latest_version']) for g in d['grants']] == [('mcp_server', 'github', 1), ('skill', 'c-style', 1)]" \
	"p1's grants: github and c-style"
api "$TN" GET "/v1/runs/$R"
NOTMINE=$BODY
expect 404 "d['error']['code'] == 'not_found'" "nora cannot see p1's run"
api "$TN" GET "/v1/runs/$U0"
check "... exactly as a run that does not exist" [ "$BODY" = "$NOTMINE" ]
api "$TA" GET "/v1/runs/$RP2"
expect 404 "d['error']['code'] == 'not_found'" "alice cannot see p2's run"
api "$TN" GET "/v1/projects/$P1/runs"
expect 404 "d['error']['code'] == 'not_found'" "nora cannot list p1's runs"
api "$TN" GET "/v1/projects/$P2/runs"
expect 200 "len(d['runs']) == 2 and all(r['project_id'] == '$P2' for r in d['runs'])" "p2's list has p2's runs only"

# --- cancel ------------------------------------------------------------------------
submit "$TM" "$P1" run-tests myrepo
RQ=$RUN
api "$TM" POST "/v1/runs/$RQ/cancel"
expect 200 "d['id'] == '$RQ' and d['status'] == 'cancelled' and d['cancel_requested'] is True and
	d['finished_at'] is not None and d['last_event_seq'] == 2" "cancel a queued run: 200, cancelled"
api "$TV" GET "/v1/runs/$RQ/events"
expect 200 "[(e['seq'], e['type']) for e in d['events']] == [(1, 'run.queued'), (2, 'run.cancelled')] and
	d['events'][1]['payload'] == {'by': '$UM'} and d['finished'] is True and d['last_seq'] == 2" \
	"... with the terminal event run.cancelled"
check "... and an audit row run.cancel" [ "$(psql_q "select count(*) from audit_log where action = 'run.cancel'
	and object_id = '$RQ' and actor_user_id = '$UM' and remote_addr = '127.0.0.1'")" = 1 ]
BEFORE=$(counts)
api "$TA" POST "/v1/runs/$RQ/cancel"
expect 409 "d['error']['code'] == 'run_finished' and d['error']['status'] == 'cancelled'" \
	"cancelling it again: 409 run_finished"
check "... which wrote nothing" [ "$(counts)" = "$BEFORE" ]
# sse_is PATTERN: the status is 200 and the stream, its lines joined by |, matches
sse_is() { [ "$CODE" = 200 ] && tr '\n' '|' <"$T/body" | grep -q -e "$1"; }
stream "$TV" "$RQ"
check "the stream of the cancelled run replays both events and ends ($CODE)" \
	sse_is '^retry: 2000||id: 1|event: run.queued|data: {[^|]*}||id: 2|event: run.cancelled|data: {[^|]*}||$'

check "... as text/event-stream" [ "$(header Content-Type)" = text/event-stream ]
stream "$TV" "$RQ" -H "Last-Event-ID: 2"
check "Last-Event-ID of the terminal event: 204 ($CODE)" [ "$CODE" = 204 ]
stream "$TV" "$RQ" -H "Last-Event-ID: 1"
check "Last-Event-ID 1: only event 2 ($CODE)" sse_is '^retry: 2000||id: 2|event: run.cancelled|data: {[^|]*}||$'
stream "$TV" "$RQ" -H "Last-Event-ID: 3"
expect 400 "d['error']['code'] == 'invalid_query'" "Last-Event-ID beyond the last event: 400"
stream "$TV" "$RQ" -H "Last-Event-ID: x"
expect 400 "d['error']['code'] == 'invalid_header'" "a malformed Last-Event-ID: 400 invalid_header"
stream "$TV" "$RQ?after=9"
expect 400 "d['error']['code'] == 'invalid_query'" "?after= beyond the last event: 400"
stream "$TV" "$RQ?after=9" -H "Last-Event-ID: 1"
check "Last-Event-ID wins over ?after= ($CODE)" sse_is '^retry: 2000||id: 2|event: run.cancelled|'
stream "$TV" "$RQ?after=1"
check "?after=1: only event 2 ($CODE)" sse_is '^retry: 2000||id: 2|event: run.cancelled|data: {[^|]*}||$'

# two cancels of a queued run at once: one wins
submit "$TM" "$P1" run-tests myrepo
RQ2=$RUN
curl -s -o "$T/c1.body" -w '%{http_code}' --max-time 10 -X POST -H "Authorization: Bearer $TA" \
	"http://127.0.0.1:$PORT/v1/runs/$RQ2/cancel" >"$T/c1.code" </dev/null &
c1=$!
curl -s -o "$T/c2.body" -w '%{http_code}' --max-time 10 -X POST -H "Authorization: Bearer $TM" \
	"http://127.0.0.1:$PORT/v1/runs/$RQ2/cancel" >"$T/c2.code" </dev/null &
c2=$!
wait $c1 $c2
cat "$T/c1.body" "$T/c2.body" >>"$T/bodies"
codes=$( (cat "$T/c1.code"; echo; cat "$T/c2.code"; echo) | sort | tr '\n' ' ')
check "two concurrent cancels of a queued run: one 200, one 409 ($codes)" [ "$codes" = "200 409 " ]
check "... one run.cancelled event and one audit row" [ "$(psql_q "select (select count(*) from run_events
	where run_id = '$RQ2' and type = 'run.cancelled') || ' ' || (select count(*) from audit_log
	where action = 'run.cancel' and object_id = '$RQ2')")" = "1 1" ]

submit "$TM" "$P1" run-tests myrepo
RR=$RUN
check "a run moved to running with transition_run" running "$RR"
api "$TA" POST "/v1/runs/$RR/cancel"
expect 202 "d['status'] == 'running' and d['cancel_requested'] is True and d['finished_at'] is None and
	d['last_event_seq'] == 2" "cancel a running run: 202, cancel_requested"
api "$TA" GET "/v1/runs/$RR/events"
expect 200 "d['events'][-1]['type'] == 'run.cancel_requested' and d['events'][-1]['seq'] == 2 and
	d['events'][-1]['payload'] == {'by': '$UA'} and d['finished'] is False" "... with the event run.cancel_requested"
api "$TM" POST "/v1/runs/$RR/cancel"
expect 202 "d['cancel_requested'] is True and d['last_event_seq'] == 2" "cancelling it again: 202"
check "... with no new event and one audit row only" [ "$(psql_q "select (select count(*) from run_events
	where run_id = '$RR') || ' ' || (select count(*) from audit_log where action = 'run.cancel' and object_id = '$RR')")" = "2 1" ]
check "a late finalize_run to succeeded returns NULL: the committed cancel wins" \
	[ "$(psql_q "select coalesce(finalize_run('$RR', 'running', 'succeeded', null, 'run.succeeded', '{}')::text, 'NULL')")" = NULL ]
check "... and transition_run refuses to move it on" \
	[ "$(psql_q "select transition_run('$RR', 'running', 'waiting_approval')")" = f ]
check "... the run is still running with two events" \
	[ "$(psql_q "select status || ' ' || next_event_seq from runs where id = '$RR'")" = "running 3" ]
check "finalize_run to cancelled (the engine's part) gives seq 3" \
	[ "$(psql_q "select finalize_run('$RR', 'running', 'cancelled', null, 'run.cancelled', '{}')")" = 3 ]
api "$TM" POST "/v1/runs/$RR/cancel"
expect 409 "d['error']['code'] == 'run_finished'" "... then cancel is 409 run_finished"

# a run waiting for an approval is finalized at once, its approval expired
submit "$TM" "$P1" run-tests myrepo
RW=$RUN
running "$RW"
APW=$(psql_q "insert into approvals (run_id, step_id, expires_at) values ('$RW', 'review', now() + interval '1 hour') returning id" | head -1)
psql_q "select transition_run('$RW', 'running', 'waiting_approval')" >/dev/null
api "$TM" POST "/v1/runs/$RW/cancel"
expect 200 "d['status'] == 'cancelled' and d['finished_at'] is not None" "cancel a run waiting for approval: 200 cancelled"
api "$TV" GET "/v1/runs/$RW/approvals"
expect 200 "[(a['id'], a['status']) for a in d['approvals']] == [('$APW', 'expired')]" "... its approval is expired"
post "$TM" "/v1/approvals/$APW/decide" '{"decision": "approved"}'
expect 409 "d['error']['code'] == 'not_pending' and d['error']['status'] == 'expired'" \
	"deciding the approval of a finished run: 409 not_pending"

# a stream that is open when the run ends gets the terminal event and ends
submit "$TM" "$P1" run-tests myrepo
RS=$RUN
t0=$(date +%s)
curl -s -N -o "$T/live.body" --max-time 15 -H "Authorization: Bearer $TV" \
	"http://127.0.0.1:$PORT/v1/runs/$RS/events/stream" </dev/null &
spid=$!
sleep 1
api "$TM" POST "/v1/runs/$RS/cancel"
wait "$spid"
src=$?
t1=$(date +%s)
cat "$T/live.body" >>"$T/bodies"
check "an open stream gets run.cancelled and ends cleanly (curl $src, $((t1 - t0)) s)" sh -c \
	"[ $src -eq 0 ] && [ $((t1 - t0)) -lt 10 ] && tr '\n' '|' <'$T/live.body' | grep -q 'id: 1|event: run.queued|.*id: 2|event: run.cancelled|'"

# --- approvals ---------------------------------------------------------------------
submit "$TM" "$P1" run-tests myrepo
RA=$RUN
running "$RA"
AP=$(psql_q "insert into approvals (run_id, step_id, expires_at) values ('$RA', 'review', now() + interval '1 hour') returning id" | head -1)
check "waiting_approval" [ "$(psql_q "select transition_run('$RA', 'running', 'waiting_approval')")" = t ]
api "$TV" GET "/v1/runs/$RA/approvals"
expect 200 "len(d['approvals']) == 1 and d['approvals'][0]['id'] == '$AP' and d['approvals'][0]['status'] == 'pending' and
	d['approvals'][0]['step_id'] == 'review' and d['approvals'][0]['run_id'] == '$RA' and
	d['approvals'][0]['decided_by'] is None and d['approvals'][0]['decided_at'] is None" \
	"GET /v1/runs/ID/approvals lists the pending approval"
api "$TM" GET /v1/approvals
expect 200 "[(a['id'], a['run_id'], a['status'], a['project']['id'], a['template'], a['message']) for a in d['approvals']] ==
	[('$AP', '$RA', 'pending', '$P1', 'run-tests', None)]" "GET /v1/approvals: the member's inbox holds it, with its project"
api "$TV" GET /v1/approvals
expect 200 "d['approvals'] == []" "... a viewer's inbox does not (a viewer cannot decide)"
api "$TN" GET /v1/approvals
expect 200 "d['approvals'] == []" "... nor a non-member's"
BEFORE=$(counts)
post "$TV" "/v1/approvals/$AP/decide" '{"decision": "approved"}'
expect 403 "d['error']['code'] == 'forbidden'" "a viewer may not decide: 403"
post "$TN" "/v1/approvals/$AP/decide" '{"decision": "approved"}'
expect 404 "d['error']['code'] == 'not_found'" "a non-member: 404"
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "maybe"}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'decision'" "decision maybe: 422 invalid_field"
post "$TM" "/v1/approvals/$AP/decide" "{\"decision\": \"approved\", \"comment\": \"$(printf 'c%.0s' $(seq 4097))\"}"
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'comment'" "a comment over 4096 bytes: 422"
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "approved", "comment": 5}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'comment'" "a comment that is not a string: 422"
post "$TM" "/v1/approvals/$AP/decide" '{"comment": "x"}'
expect 422 "d['error']['code'] == 'missing_field' and d['error']['field'] == 'decision'" "no decision: 422 missing_field"
check "the refused decisions changed nothing" [ "$(counts)" = "$BEFORE" ]
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "approved", "comment": "looks good\nship it\r"}'
expect 200 "d['id'] == '$AP' and d['status'] == 'approved' and d['decided_by'] == '$UM' and
	d['comment'] == 'looks good\nship it\r' and d['decided_at'] is not None and d['run_id'] == '$RA'" \
	"a member approves with a comment: 200 approved"
api "$TM" GET /v1/approvals
expect 200 "'$AP' not in [a['id'] for a in d['approvals']]" "... and it left the inbox"
api "$TV" GET "/v1/runs/$RA/events"
expect 200 "d['events'][-1]['type'] == 'approval.approved' and d['events'][-1]['payload']['approval_id'] == '$AP' and
	d['events'][-1]['payload']['decided_by'] == '$UM' and d['events'][-1]['payload']['comment'] == 'looks good\nship it\r'" \
	"... the event approval.approved"
stream "$TV" "$RA" -m 2
check "... streamed with the comment's newline escaped in one data line" \
	sse_is '|id: 2|event: approval.approved|data: {[^|]*looks good\\nship it\\r[^|]*}||$'

check "... one audit row approval.decide with the remote address" [ "$(psql_q "select count(*) from audit_log
	where action = 'approval.decide' and object_id = '$AP' and actor_user_id = '$UM' and remote_addr = '127.0.0.1'
	and detail->>'decision' = 'approved'")" = 1 ]
BEFORE=$(counts)
post "$TA" "/v1/approvals/$AP/decide" '{"decision": "rejected"}'
expect 409 "d['error']['code'] == 'not_pending' and d['error']['status'] == 'approved'" "deciding again: 409 not_pending"
check "... which wrote nothing" [ "$(counts)" = "$BEFORE" ]
# an expired approval
submit "$TM" "$P1" run-tests myrepo
RX=$RUN
running "$RX"
APX=$(psql_q "insert into approvals (run_id, step_id, requested_at, expires_at)
	values ('$RX', 'review', now() - interval '2 hours', now() - interval '1 hour') returning id" | head -1)
BEFORE=$(counts)
post "$TA" "/v1/approvals/$APX/decide" '{"decision": "approved"}'
expect 409 "d['error']['code'] == 'not_pending' and d['error']['status'] == 'pending' and 'expired' in d['error']['message']" \
	"an approval past expires_at: 409 not_pending"
check "... which wrote nothing" [ "$(counts)" = "$BEFORE" ]
# concurrent decisions
submit "$TM" "$P1" run-tests myrepo
RC=$RUN
running "$RC"
for round in 1 2 3; do
	APC=$(psql_q "insert into approvals (run_id, step_id, expires_at) values ('$RC', 'review', now() + interval '1 hour') returning id" | head -1)
	curl -s -o "$T/d1.body" -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary '{"decision": "approved"}' "http://127.0.0.1:$PORT/v1/approvals/$APC/decide" >"$T/d1.code" </dev/null &
	d1=$!
	curl -s -o "$T/d2.body" -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $TM" -H "$J" \
		--data-binary '{"decision": "rejected"}' "http://127.0.0.1:$PORT/v1/approvals/$APC/decide" >"$T/d2.code" </dev/null &
	d2=$!
	wait $d1 $d2
	cat "$T/d1.body" "$T/d2.body" >>"$T/bodies"
	codes="$(cat "$T/d1.code") $(cat "$T/d2.code")"
	case $codes in "200 409") won=approved ;; "409 200") won=rejected ;; *) won=none ;; esac
	check "race $round: an approve and a reject at once: one 200 and one 409 ($codes)" [ "$won" != none ]
	check "... the approval has the winner's decision" \
		[ "$(psql_q "select status from approvals where id = '$APC'")" = "$won" ]
	check "... exactly one approval.* event and one audit row" [ "$(psql_q "select (select count(*) from run_events
		where run_id = '$RC' and type like 'approval.%' and payload->>'approval_id' = '$APC') || ' ' ||
		(select count(*) from audit_log where action = 'approval.decide' and object_id = '$APC')")" = "1 1" ]
done

# --- artifacts ---------------------------------------------------------------------
submit "$TM" "$P1" run-tests myrepo
RART=$RUN
running "$RART"
printf 'diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n' >"$T/patch.want"
"$PY" -c "import sys; open(sys.argv[1], 'wb').write(b'\x00\xff\r\nbinary\n' + bytes(range(256)))" "$T/blob.want"
hex() { "$PY" -c "import sys; print(open(sys.argv[1], 'rb').read().hex())" "$1"; }
PHEX=$(hex "$T/patch.want") BHEX=$(hex "$T/blob.want")
PSHA=$(sha256sum "$T/patch.want" | cut -d' ' -f1)
BSHA=$(sha256sum "$T/blob.want" | cut -d' ' -f1)
psql_q "insert into run_steps (run_id, phase_name, step_id, attempt) values ('$RART', 'test', 's1', 1)" >/dev/null
ART=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
	values ('$RART', 's1', 1, 'patch', 'patch', $(wc -c <"$T/patch.want"), sha256(decode('$PHEX', 'hex')),
	        decode('$PHEX', 'hex')) returning id" | head -1)
ARTB=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
	values ('$RART', 's1', 1, 'blob', 'text', $(wc -c <"$T/blob.want"), sha256(decode('$BHEX', 'hex')),
	        decode('$BHEX', 'hex')) returning id" | head -1)
ARTX=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, inline)
	values ('$RART', 's1', 1, 'bad', 'json', 7, sha256('other'::bytea), '{\"a\":1}'::bytea) returning id" | head -1)
ARTS=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, store_path)
	values ('$RART', 's1', 1, 'stored', 'md', 5, sha256('hello'::bytea),
	        substr(encode(sha256('hello'::bytea), 'hex'), 1, 2) || '/' || encode(sha256('hello'::bytea), 'hex'))
	returning id" | head -1)
check "set-up: a step attempt and four artifacts" \
	[ "$(printf '%s\n' "$ART" "$ARTB" "$ARTX" "$ARTS" | grep -c '^[0-9a-f-]\{36\}$')" = 4 ]
api "$TV" GET "/v1/runs/$RART/artifacts"
expect 200 "[(a['id'], a['key'], a['kind'], a['size'], a['sha256'], a['step_id'], a['attempt']) for a in d['artifacts']][:2] ==
	[('$ART', 'patch', 'patch', $(wc -c <"$T/patch.want"), '$PSHA', 's1', 1),
	 ('$ARTB', 'blob', 'text', $(wc -c <"$T/blob.want"), '$BSHA', 's1', 1)] and len(d['artifacts']) == 4 and
	all('inline' not in a for a in d['artifacts'])" \
	"GET /v1/runs/ID/artifacts: sizes and sha256 hex, never the bytes"
api "$TV" GET "/v1/runs/$RART/steps"
expect 200 "[(s['phase'], s['step_id'], s['attempt'], s['status']) for s in d['steps']] == [('test', 's1', 1, 'running')]" \
	"GET /v1/runs/ID/steps lists the attempt"
api "$TV" GET "/v1/artifacts/$ART"
check "GET /v1/artifacts/ID: 200 ($CODE)" [ "$CODE" = 200 ]
check "... exactly the bytes" cmp -s "$T/body" "$T/patch.want"
check "... ETag is the quoted sha256" [ "$(header ETag)" = "\"$PSHA\"" ]
check "... Content-Disposition: attachment; filename=\"patch.patch\"" \
	[ "$(header Content-Disposition)" = 'attachment; filename="patch.patch"' ]
check "... Content-Type text/x-diff" [ "$(header Content-Type)" = "text/x-diff; charset=utf-8" ]
api "$TV" GET "/v1/artifacts/$ART" -H "If-None-Match: \"$PSHA\""
check "If-None-Match with the ETag: 304 with no body ($CODE)" sh -c "[ '$CODE' = 304 ] && [ ! -s '$T/body' ]"
api "$TV" GET "/v1/artifacts/$ART" -H "If-None-Match: \"$BSHA\""
check "If-None-Match with another ETag: 200 and the bytes ($CODE)" sh -c "[ '$CODE' = 200 ] && cmp -s '$T/body' '$T/patch.want'"
api "$TA" GET "/v1/artifacts/$ARTB"
check "a binary text artifact (NUL, 0xff, CR): exactly its bytes ($CODE)" sh -c \
	"[ '$CODE' = 200 ] && [ \"\$(sha256sum <'$T/body' | cut -d' ' -f1)\" = '$BSHA' ]"
check "... as blob.txt" [ "$(header Content-Disposition)" = 'attachment; filename="blob.txt"' ]
api "$TN" GET "/v1/artifacts/$ART"
expect 404 "d['error']['code'] == 'not_found'" "a non-member: 404 for the artifact"
api "$TN" GET "/v1/runs/$RART/artifacts"
expect 404 "d['error']['code'] == 'not_found'" "... and for the run's artifact list"
api "$TM" GET "/v1/artifacts/$ARTX"
expect 500 "d['error']['code'] == 'internal'" "an artifact whose bytes do not match its digest is not served (500)"
check "... and logged" grep -q "artifact $ARTX: its bytes do not match its digest" "$LOG"
# artifacts in the content-addressed store, STATE/artifacts/ab/abcdef...
HSHA=$(printf hello | sha256sum | cut -d' ' -f1)
api "$TM" GET "/v1/artifacts/$ARTS"
check "a stored artifact whose file is missing is not served ($CODE)" sh -c "[ '$CODE' = 500 ] || [ '$CODE' = 503 ]"
mkdir -p "$T/state/artifacts/$(printf '%s' "$HSHA" | cut -c1-2)"
printf hello >"$T/state/artifacts/$(printf '%s' "$HSHA" | cut -c1-2)/$HSHA"
api "$TM" GET "/v1/artifacts/$ARTS"
check "a stored artifact: 200 and exactly its bytes ($CODE)" sh -c "[ '$CODE' = 200 ] && [ \"\$(cat '$T/body')\" = hello ]"
check "... ETag and Content-Disposition stored.md" \
	[ "$(header ETag) $(header Content-Disposition)" = "\"$HSHA\" attachment; filename=\"stored.md\"" ]
api "$TM" GET "/v1/artifacts/$ARTS" -H "If-None-Match: \"$HSHA\""
check "... If-None-Match: 304 ($CODE)" sh -c "[ '$CODE' = 304 ] && [ ! -s '$T/body' ]"
api "$TN" GET "/v1/artifacts/$ARTS"
expect 404 "d['error']['code'] == 'not_found'" "... a non-member: 404"
# a store entry that is a symbolic link (to a file of the right size) is refused
printf 'world' >"$T/outside"
WSHA=$(printf world | sha256sum | cut -d' ' -f1)
mkdir -p "$T/state/artifacts/$(printf '%s' "$WSHA" | cut -c1-2)"
ln -s "$T/outside" "$T/state/artifacts/$(printf '%s' "$WSHA" | cut -c1-2)/$WSHA"
ARTL=$(psql_q "insert into artifacts (run_id, step_id, attempt, key, kind, size, sha256, store_path)
	values ('$RART', 's1', 1, 'linked', 'text', 5, sha256('world'::bytea),
	        substr(encode(sha256('world'::bytea), 'hex'), 1, 2) || '/' || encode(sha256('world'::bytea), 'hex'))
	returning id" | head -1)
api "$TM" GET "/v1/artifacts/$ARTL"
check "a store entry that is a symlink is not followed ($CODE)" sh -c "[ '$CODE' = 500 ] && ! grep -q world '$T/body'"
api "$TM" GET "/v1/artifacts/$U0"
expect 404 "d['error']['code'] == 'not_found'" "an unknown artifact: 404"

# --- RBAC matrix -------------------------------------------------------------------
for p in "/v1/projects/$P1" "/v1/projects/$P1/members" "/v1/projects/$P1/grants" "/v1/projects/$P1/repos" \
	"/v1/projects/$P1/usage" "/v1/projects/$P1/runs" "/v1/runs/$R" "/v1/runs/$R/steps" "/v1/runs/$R/events" \
	"/v1/runs/$R/approvals" "/v1/runs/$R/artifacts" "/v1/artifacts/$ART"; do
	for who in "admin:$TA" "member:$TM" "viewer:$TV"; do
		api "${who#*:}" GET "$p"
		if [ "$p" = "/v1/artifacts/$ART" ]; then
			check "GET $(short "$p") as ${who%%:*}: 200 and the bytes ($CODE)" \
				sh -c "[ '$CODE' = 200 ] && cmp -s '$T/body' '$T/patch.want'"
		else
			expect 200 "not isinstance(d.get('error'), dict)" "GET $(short "$p") as ${who%%:*}: 200"
		fi
	done
	for who in "non-member:$TN" "user of no project:$TZ"; do
		api "${who#*:}" GET "$p"
		expect 404 "d['error']['code'] == 'not_found'" "GET $(short "$p") as ${who%%:*}: 404"
	done
done
api "$TA" GET "/v1/projects/$P1/audit"
expect 200 "len(d['entries']) > 0" "GET audit as admin: 200"
for who in "member:$TM" "viewer:$TV"; do
	api "${who#*:}" GET "/v1/projects/$P1/audit"
	expect 403 "d['error']['code'] == 'forbidden'" "GET audit as ${who%%:*}: 403"
done
for who in "non-member:$TN" "user of no project:$TZ"; do
	api "${who#*:}" GET "/v1/projects/$P1/audit"
	expect 404 "d['error']['code'] == 'not_found'" "GET audit as ${who%%:*}: 404"
done
for who in "admin:$TA" "member:$TM" "viewer:$TV"; do
	stream "${who#*:}" "$RQ"
	check "stream of a p1 run as ${who%%:*}: 200 with its events ($CODE)" sse_is '|event: run.cancelled|'
done
for who in "non-member:$TN" "user of no project:$TZ"; do
	stream "${who#*:}" "$RQ"
	expect 404 "d['error']['code'] == 'not_found'" "stream of a p1 run as ${who%%:*}: 404"
done
# what changes things: every refusal first, and it must change nothing
submit "$TM" "$P1" run-tests myrepo
RC1=$RUN
submit "$TM" "$P1" run-tests myrepo
RC2=$RUN
submit "$TM" "$P1" run-tests myrepo
RD=$RUN
running "$RD"
AP1=$(psql_q "insert into approvals (run_id, step_id, expires_at) values ('$RD', 'review', now() + interval '1 hour') returning id" | head -1)
MEX=""
BEFORE=$(counts)
# forbidden 403, not_found 404
ecode() { [ "$1" = 403 ] && echo forbidden || echo not_found; }
for who in "member:$TM:403" "viewer:$TV:403" "non-member:$TN:404" "user of no project:$TZ:404"; do
	n=${who%%:*} rest=${who#*:}
	tk=${rest%:*} want=${rest##*:}
	post "$tk" "/v1/projects/$P1/members" '{"user": "extra1", "role": "viewer"}'
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "POST members as $n: $want"
	# a run's budget is an admin's to change
	post "$tk" "/v1/runs/$RD/budget" '{"usd_micros": 5000000}'
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "POST budget as $n: $want"
done
for who in "viewer:$TV:403" "non-member:$TN:404" "user of no project:$TZ:404"; do
	n=${who%%:*} rest=${who#*:}
	tk=${rest%:*} want=${rest##*:}
	submit "$tk" "$P1" run-tests myrepo
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "POST runs as $n: $want"
	api "$tk" POST "/v1/runs/$RC1/cancel"
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "POST cancel as $n: $want"
	post "$tk" "/v1/approvals/$AP1/decide" '{"decision": "approved"}'
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "POST decide as $n: $want"
done
check "the refused requests changed nothing" [ "$(counts)" = "$BEFORE" ]
post "$TA" "/v1/runs/$RD/budget" '{"usd_micros": 5000000}'
expect 200 "d['id'] == '$RD' and d['budget_usd_micros'] == 5000000" "POST budget as admin: 200"
post "$TA" "/v1/projects/$P1/members" '{"user": "extra1", "role": "viewer"}'
expect 201 "d['name'] == 'extra1' and d['role'] == 'viewer'" "POST members as admin: 201"
MEX=$(val "d['membership_id']")
BEFORE=$(counts)
for who in "member:$TM:403" "viewer:$TV:403" "non-member:$TN:404" "user of no project:$TZ:404"; do
	n=${who%%:*} rest=${who#*:}
	tk=${rest%:*} want=${rest##*:}
	api "$tk" PATCH "/v1/memberships/$MEX" -H "$J" -d '{"role": "member"}'
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "PATCH membership as $n: $want"
	api "$tk" DELETE "/v1/memberships/$MEX"
	expect "$want" "d['error']['code'] == '$(ecode "$want")'" "DELETE membership as $n: $want"
done
check "... changed nothing either" [ "$(counts)" = "$BEFORE" ]
api "$TA" PATCH "/v1/memberships/$MEX" -H "$J" -d '{"role": "member"}'
expect 200 "d['membership_id'] == '$MEX' and d['role'] == 'member'" "PATCH membership as admin: 200"
NAUD=$(psql_q "select count(*) from audit_log where action = 'member.role'")
api "$TA" PATCH "/v1/memberships/$MEX" -H "$J" -d '{"role": "member"}'
expect 200 "d['role'] == 'member'" "PATCH to the role it has: 200"
check "... and no audit row for a change that changed nothing" \
	[ "$(psql_q "select count(*) from audit_log where action = 'member.role'")" = "$NAUD" ]
api "$TA" DELETE "/v1/memberships/$MEX"
expect 200 "d == {'removed': '$MEX'}" "DELETE membership as admin: 200"
submit "$TA" "$P1" run-tests myrepo
expect 201 "d['submitted_by'] == '$UA'" "POST runs as admin: 201"
submit "$TM" "$P1" run-tests myrepo
expect 201 "d['submitted_by'] == '$UM'" "POST runs as member: 201"
api "$TM" POST "/v1/runs/$RC1/cancel"
expect 200 "d['status'] == 'cancelled'" "POST cancel as member: 200"
api "$TA" POST "/v1/runs/$RC2/cancel"
expect 200 "d['status'] == 'cancelled'" "POST cancel as admin: 200"
post "$TM" "/v1/approvals/$AP1/decide" '{"decision": "approved"}'
expect 200 "d['status'] == 'approved' and d['decided_by'] == '$UM'" "POST decide as member: 200"
AP2=$(psql_q "insert into approvals (run_id, step_id, expires_at) values ('$RD', 'review', now() + interval '1 hour') returning id" | head -1)
post "$TA" "/v1/approvals/$AP2/decide" '{"decision": "rejected"}'
expect 200 "d['status'] == 'rejected' and d['decided_by'] == '$UA'" "POST decide as admin: 200"
# a viewer here who is admin elsewhere: p1's objects are decided by p1's role
ctl member add p2 vic admin
api "$TV" POST "/v1/runs/$R/cancel"
expect 403 "d['error']['code'] == 'forbidden'" "vic (p1 viewer, p2 admin) still may not cancel p1's run: 403"
ctl member remove p2 vic
# revoked and expired tokens: 401 everywhere, before anything else
BEFORE=$(counts)
ROUTES401="DELETE /v1/session
GET /v1/me
GET /v1/projects
GET /v1/projects/$P1
GET /v1/projects/$P1/members
POST /v1/projects/$P1/members
PATCH /v1/memberships/$MEX
DELETE /v1/memberships/$MEX
GET /v1/projects/$P1/grants
GET /v1/projects/$P1/repos
POST /v1/projects/$P1/repos
DELETE /v1/repos/$MEX
GET /v1/projects/$P1/usage
GET /v1/projects/$P1/audit
GET /v1/projects/$P1/runs
POST /v1/projects/$P1/runs
GET /v1/runs/$R
POST /v1/runs/$R/cancel
POST /v1/runs/$R/budget
GET /v1/runs/$R/steps
GET /v1/runs/$R/events
GET /v1/runs/$R/events/stream
GET /v1/runs/$R/approvals
GET /v1/approvals
POST /v1/approvals/$AP/decide
GET /v1/runs/$R/artifacts
GET /v1/artifacts/$ART
GET /v1/templates
POST /v1/templates/validate
GET /v1/templates/run-tests"
while read -r m p; do
	for t in "revoked:$TR" "expired:$TE"; do
		if [ "$m" = POST ] || [ "$m" = PATCH ]; then
			api "${t#*:}" "$m" "$p" -H "$J" -d '{}'
		else
			api "${t#*:}" "$m" "$p"
		fi
		expect 401 "d['error']['code'] == 'unauthorized' and set(d) == {'error'}" "${t%%:*} token: $m $(short "$p") is 401"
	done
done <<EOR
$ROUTES401
EOR
check "the 401s changed nothing" [ "$(counts)" = "$BEFORE" ]
check "the revoked and expired tokens were never marked used" [ "$(psql_q "select count(*) from api_tokens
	where prefix in ('$(prefix "$TR")', '$(prefix "$TE")') and last_used_at is not null")" = 0 ]
# every route that requires authentication (auth 1: not POST /v1/session,
# which takes a token in its body, nor GET /v1/session, where it is optional;
# test_api_session.sh has those)
NV1=$(grep -c '^[[:space:]]*{ EVHTTP_REQ_[A-Z]*, *"/v1[^"]*", *[a-z_]*, *1,' httpd/router.c)
check "every authenticated /v1 route of the router table was tried with revoked and expired tokens ($NV1)" \
	[ "$(printf '%s\n' "$ROUTES401" | wc -l)" -eq "$NV1" ]

# --- bad input ---------------------------------------------------------------------
RUNS="/v1/projects/$P1/runs"
BEFORE=$(counts)
post "$TM" "$RUNS" '{"template": '
expect 400 "d['error']['code'] == 'bad_json'" "submit: malformed JSON is 400 bad_json"
post "$TM" "$RUNS" '{"template": "run-tests", "template": "run-tests"}'
expect 400 "d['error']['code'] == 'bad_json'" "submit: a duplicate member is 400 bad_json"
post "$TM" "$RUNS" '[]'
expect 400 "d['error']['code'] == 'bad_json'" "submit: a JSON array is 400 bad_json"
post "$TM" "$RUNS" '{"template": 5}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'template'" "submit: template not a string: 422 invalid_field"
for pv in '[]' '"x"' '1' 'null' 'true'; do
	post "$TM" "$RUNS" "{\"template\": \"run-tests\", \"params\": $pv}"
	expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'params'" "submit: params $pv: 422 invalid_field"
done
post "$TM" "$RUNS" '{"template": "run-tests", "params": {"repo": "myrepo"}, "priority": 1}'
expect 422 "d['error']['code'] == 'unknown_field' and d['error']['field'] == 'priority'" "submit: an unknown field: 422 unknown_field"
post "$TM" "$RUNS" '{"params": {"repo": "myrepo"}}'
expect 422 "d['error']['code'] == 'missing_field' and d['error']['field'] == 'template'" "submit: no template: 422 missing_field"
for tn in nosuch Run-tests "a b" ""; do
	post "$TM" "$RUNS" "{\"template\": \"$tn\", \"params\": {\"repo\": \"myrepo\"}}"
	expect 422 "d['error']['code'] == 'unknown_template' and d['error']['field'] == 'template'" "submit: template '$tn': 422 unknown_template"
done
post "$TM" "$RUNS" '{"template": "run-tests", "params": {"repo": "myrepo", "nope": 1, "test_command": 5}}'
expect 422 "d['error']['code'] == 'invalid_params' and
	sorted((x['param'], x['code']) for x in d['error']['details']) == [('nope', 'unknown_param'), ('test_command', 'invalid_param')]" \
	"submit: an unknown and a mistyped param, both reported"
post "$TM" "$RUNS" '{"template": "run-tests"}'
expect 422 "d['error']['code'] == 'invalid_params' and [(x['param'], x['code']) for x in d['error']['details']] == [('repo', 'missing_param')]" \
	"submit: a missing required param: 422 missing_param"
post "$TM" "$RUNS" '{"template": "run-tests", "params": {"repo": "myrepo", "test_command": "make\u0007test"}}'
expect 422 "d['error']['details'][0]['code'] == 'invalid_param'" "submit: a param with a control character: 422"
post "$TM" "$RUNS" "{\"template\": \"run-tests\", \"params\": {\"repo\": \"myrepo\", \"test_command\": \"$(printf 'x%.0s' $(seq 4097))\"}}"
expect 422 "d['error']['details'][0]['code'] == 'invalid_param'" "submit: a param over 4096 bytes: 422"
"$PY" -c "import json; print(json.dumps({'template': 'run-tests', 'params': {'repo': 'myrepo', 'test_command': 'x' * (1024 * 1024)}}))" >"$T/big.json"
api "$TM" POST "$RUNS" -H "$J" --data-binary @"$T/big.json"
check "submit: a body over 1 MiB is 413 ($CODE)" [ "$CODE" = 413 ]
api "$TM" POST "$RUNS" -H 'Content-Type: text/plain' --data-binary "$BODY1"
expect 415 "d['error']['code'] == 'unsupported_media_type'" "submit: Content-Type text/plain is 415"
api "$TM" POST "$RUNS" --data-binary "$BODY1"
expect 415 "d['error']['code'] == 'unsupported_media_type'" "submit: a form content type is 415"
post "$TM" "$RUNS" "$BODY1" -H "Idempotency-Key: $(printf 'k%.0s' $(seq 200))"
expect 400 "d['error']['code'] == 'invalid_header'" "submit: a 200-character Idempotency-Key: 400 invalid_header"
post "$TM" "$RUNS" "$BODY1" -H "Idempotency-Key: $(printf 'k%.0s' $(seq 129))"
expect 400 "d['error']['code'] == 'invalid_header'" "submit: a 129-character Idempotency-Key: 400"
post "$TM" "$RUNS" "$BODY1" -H "Idempotency-Key: a b"
expect 400 "d['error']['code'] == 'invalid_header'" "submit: an Idempotency-Key with a space: 400"
api "$TA" GET "$RUNS?template=run-tests%00x"
expect 400 "d['error']['code'] == 'invalid_query'" "list: %00 in a query value: 400, not a shorter value"
api "$TA" GET "$RUNS?template=run%0A"
expect 400 "d['error']['code'] == 'invalid_query'" "list: a control character in a query value: 400"
post "$TM" "$RUNS" "$BODY1" -H "Idempotency-Key;"
expect 400 "d['error']['code'] == 'invalid_header'" "submit: an empty Idempotency-Key: 400"
post "$TM" "/v1/runs/$R/cancel" '{"x": 1}'
expect 422 "d['error']['code'] == 'unknown_field' and d['error']['field'] == 'x'" "cancel with a body member: 422 unknown_field (and not cancelled)"
post "$TA" "/v1/projects/$P1/members" '{"user": "extra1"}'
expect 422 "d['error']['code'] == 'missing_field' and d['error']['field'] == 'role'" "add member without a role: 422 missing_field"
post "$TA" "/v1/projects/$P1/members" '{"user": "extra1", "role": "owner"}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'role'" "add member with role owner: 422 invalid_field"
post "$TA" "/v1/projects/$P1/members" '{"user": "nobody-here", "role": "viewer"}'
expect 422 "d['error']['code'] == 'unknown_user' and d['error']['field'] == 'user'" "add an unknown user: 422 unknown_user"
# bad and unknown ids
for p in /v1/runs/not-a-uuid "/v1/runs/${R}0" "/v1/runs/$(printf '%s' "$R" | cut -c1-35)" "/v1/runs/$(printf '%s' "$R" | tr - _)" \
	"/v1/runs/$R/events/x" /v1/artifacts/abc "/v1/projects/x/runs" "/v1/runs/$U0" "/v1/runs/$U0/events" \
	"/v1/runs/$U0/approvals" "/v1/artifacts/$U0" "/v1/projects/$U0/runs" "/v1/runs/$U0/events/stream"; do
	api "$TA" GET "$p"
	expect 404 "d['error']['code'] == 'not_found'" "GET $(short "$p"): 404"
done
while read -r p b; do
	post "$TA" "$p" "$b"
	expect 404 "d['error']['code'] == 'not_found'" "POST $(short "$p"): 404"
done <<EOP
/v1/runs/zzz/cancel
/v1/runs/$U0/cancel
/v1/approvals/zzz/decide {"decision": "approved"}
/v1/approvals/$U0/decide {"decision": "approved"}
/v1/projects/$U0/runs $BODY1
/v1/projects/$U0/members {"user": "mona2", "role": "viewer"}
EOP
for m in PATCH DELETE; do
	for id in zzz "$U0"; do
		api "$TA" "$m" "/v1/memberships/$id" -H "$J" -d '{"role": "member"}'
		expect 404 "d['error']['code'] == 'not_found'" "$m /v1/memberships/$id: 404"
	done
done
# query strings
for q in "limit=100000" "limit=-1" "limit=0" "limit=201" "limit=1.5" "limit=01" "limit=" "status=bogus" \
	"template=Bad" "foo=1" "limit=3&limit=3" "status=queued&status=queued"; do
	api "$TV" GET "$RUNS?$q"
	expect 400 "d['error']['code'] == 'invalid_query'" "runs ?$q: 400 invalid_query"
done
for q in "cursor=not-a-uuid" "cursor=$U0" "cursor=$RP2"; do
	api "$TV" GET "$RUNS?$q"
	expect 400 "d['error']['code'] == 'invalid_cursor'" "runs ?$(short "$q"): 400 invalid_cursor"
done
api "$TV" GET "$RUNS?limit=200"
expect 200 "'runs' in d" "runs ?limit=200 (the maximum): 200"
for q in "after=abc" "after=-1" "limit=0" "limit=1001" "limit=100000" "after=1&after=2" "x=1"; do
	api "$TV" GET "/v1/runs/$R/events?$q"
	expect 400 "d['error']['code'] == 'invalid_query'" "events ?$q: 400 invalid_query"
done
api "$TA" GET "/v1/projects/$P1/audit?after=9223372036854775807"
expect 200 "d == {'entries': [], 'next_after': None}" "audit ?after=2^63-1: an empty page"
for q in "limit=0" "after=abc" "limit=1001" "month=$NOW_MONTH" "after=9223372036854775808"; do
	api "$TA" GET "/v1/projects/$P1/audit?$q"
	expect 400 "d['error']['code'] == 'invalid_query'" "audit ?$q: 400 invalid_query"
done
for q in "month=2026-13" "month=2026-00" "month=2026-1" "month=abcd-ef" "month=2026-01-01" "limit=1" \
	"month=2026-01&month=2026-02"; do
	api "$TV" GET "/v1/projects/$P1/usage?$q"
	expect 400 "d['error']['code'] == 'invalid_query'" "usage ?$q: 400 invalid_query"
done
for p in "/v1/runs/$R?x=1" "/v1/projects/$P1/members?limit=1" "/v1/artifacts/$ART?download=1" "/v1/runs/$R/approvals?status=pending"; do
	api "$TV" GET "$p"
	expect 400 "d['error']['code'] == 'invalid_query'" "GET $(short "$p"): a route without query parameters: 400"
done
# routes and methods
for p in /v1/runs "/v1/runs/$R/nope" "/v1/approvals/$AP" /v1/artifacts "/v1/runs/$R/" "/v1/runs/$R/cancel/x" \
	"/v1/projects/$P1/runs/$R" /v1/memberships; do
	api "$TA" GET "$p"
	expect 404 "d['error']['code'] == 'not_found'" "unknown route GET $(short "$p"): 404"
done
while read -r m p allow; do
	api "$TA" "$m" "$p"
	expect 405 "d['error']['code'] == 'method_not_allowed'" "$m $(short "$p"): 405"
	check "... Allow: $allow ($(header Allow))" [ "$(header Allow)" = "$allow" ]
done <<EOM
PUT /v1/runs/$R GET, HEAD
DELETE /v1/runs/$R GET, HEAD
GET /v1/runs/$R/cancel POST
GET /v1/approvals/$AP/decide POST
GET /v1/memberships/$MEX PATCH, DELETE
POST /v1/memberships/$MEX PATCH, DELETE
DELETE /v1/projects/$P1/runs GET, HEAD, POST
PATCH /v1/projects/$P1/members GET, HEAD, POST
POST /v1/artifacts/$ART GET, HEAD
POST /v1/runs/$R/events/stream GET, HEAD
DELETE /v1/projects/$P1/audit GET, HEAD
EOM
CODE=$(curl -s -I -o /dev/null -D "$T/hdrs" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $TV" \
	"http://127.0.0.1:$PORT/v1/runs/$R/events/stream")
check "HEAD of the event stream: 405 ($CODE)" [ "$CODE" = 405 ]
check "... with an Allow header ($(header Allow))" [ -n "$(header Allow)" ]
check "the bad requests changed nothing" [ "$(counts)" = "$BEFORE" ]

# --- pagination --------------------------------------------------------------------
for _ in 1 2 3 4 5 6 7; do
	post "$TM" "$RUNS" '{"template": "fix-failing-test", "params": {"repo": "myrepo"}}'
done
check "seven more runs submitted ($CODE)" [ "$CODE" = 201 ]
# walk QUERY: follows next_cursor at limit 3; prints the ids, one a line
walk() {
	: >"$T/walk"
	cur="" pages=0 bad=0
	while [ $pages -lt 100 ]; do
		api "$TV" GET "$RUNS?limit=3$1${cur:+&cursor=$cur}"
		[ "$CODE" = 200 ] || { bad=1; break; }
		# appends the page's ids; prints "COUNT NEXT_CURSOR"; fails on a manifest
		# shellcheck disable=SC2046 # split into count and cursor
		set -- "$1" $("$PY" -c "import json,sys
d = json.load(open(sys.argv[1]))
open(sys.argv[2], 'a').write(''.join(r['id'] + '\n' for r in d['runs']))
print(len(d['runs']), d['next_cursor'] or '')
sys.exit(any('manifest' in r for r in d['runs']))" "$T/body" "$T/walk" || echo bad)
		n=$2 cur=${3:-}
		[ "$n" != bad ] && [ "${3:-}" != bad ] && [ "${4:-}" != bad ] || { bad=1; break; }
		[ "$n" -le 3 ] || bad=1
		pages=$((pages + 1))
		[ -n "$cur" ] || break
		[ "$n" = 3 ] || bad=1
	done
	return $bad
}
dbids() { psql_q "select id from runs where project_id = '$P1' $1 order by created_at desc, id desc"; }
check "walk the runs of p1 3 at a time, following next_cursor" walk ""
dbids "" >"$T/want"
check "every run of p1 exactly once, newest first ($(wc -l <"$T/walk") of $(wc -l <"$T/want"))" cmp -s "$T/walk" "$T/want"
check "... no duplicate" [ "$(sort "$T/walk" | uniq -d | wc -l)" -eq 0 ]
api "$TV" GET "$RUNS?limit=200"
check "created_at never increases down the list" "$PY" -c "import json,sys
r = json.load(open('$T/body'))['runs']
sys.exit(not (len(r) > 10 and all(a['created_at'] >= b['created_at'] for a, b in zip(r, r[1:]))))"
for s in queued running waiting_approval cancelled; do
	walk "&status=$s"
	dbids "and status = '$s'" >"$T/want"
	check "?status=$s: exactly the $s runs ($(wc -l <"$T/walk"))" sh -c "[ -s '$T/want' ] && cmp -s '$T/walk' '$T/want'"
done
walk "&status=succeeded"
check "?status=succeeded: none" [ ! -s "$T/walk" ]
walk "&template=fix-failing-test"
dbids "and template_name = 'fix-failing-test'" >"$T/want"
check "?template=fix-failing-test: exactly those runs ($(wc -l <"$T/walk"))" sh -c "[ \$(wc -l <'$T/want') -ge 8 ] && cmp -s '$T/walk' '$T/want'"
walk "&template=fix-failing-test&status=queued"
dbids "and template_name = 'fix-failing-test' and status = 'queued'" >"$T/want"
check "?template= and ?status= together" cmp -s "$T/walk" "$T/want"
api "$TV" GET "$RUNS?template=nosuch"
expect 200 "d == {'runs': [], 'next_cursor': None}" "?template=nosuch: an empty page"
LAST=$(tail -n 1 "$T/want")
api "$TV" GET "$RUNS?cursor=$LAST"
expect 200 "d['next_cursor'] is None and '$LAST' not in [r['id'] for r in d['runs']]" "the cursor run itself is not repeated"
api "$TV" GET "/v1/runs/$RR/events?after=1&limit=1"
expect 200 "[e['seq'] for e in d['events']] == [2] and d['last_seq'] == 3 and d['finished'] is True" "events ?after=1&limit=1: seq 2 only"
api "$TA" GET "/v1/projects/$P1/audit?limit=2"
expect 200 "len(d['entries']) == 2 and d['next_after'] == d['entries'][1]['id']" "audit ?limit=2: two entries and next_after"

# --- members over HTTP -------------------------------------------------------------
MA=$(psql_q "select m.id from memberships m join users u on u.id = m.user_id where u.name = 'alice' and m.project_id = '$P1'")
api "$TM2" GET "/v1/projects/$P1"
expect 404 "d['error']['code'] == 'not_found'" "mona2 does not see p1 yet"
post "$TA" "/v1/projects/$P1/members" '{"user": "mona2", "role": "viewer"}'
expect 201 "d['name'] == 'mona2' and d['role'] == 'viewer' and len(d['membership_id']) == 36 and d['disabled'] is False" \
	"alice adds mona2 as viewer: 201"
M2=$(val "d['membership_id']")
api "$TM2" GET "/v1/projects/$P1"
expect 200 "d['role'] == 'viewer'" "mona2 now sees p1 as viewer"
submit "$TM2" "$P1" run-tests myrepo
expect 403 "d['error']['code'] == 'forbidden'" "... and may not submit"
BEFORE=$(counts)
post "$TA" "/v1/projects/$P1/members" '{"user": "mona2", "role": "member"}'
expect 409 "d['error']['code'] == 'already_member'" "adding her again: 409 already_member"
api "$TA" PATCH "/v1/memberships/$M2" -H "$J" -d '{"role": "boss"}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'role'" "PATCH role boss: 422"
api "$TA" PATCH "/v1/memberships/$M2" -H "$J" -d '{"role": 1}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'role'" "PATCH role 1: 422 invalid_field"
api "$TA" PATCH "/v1/memberships/$M2" -H "$J" -d '{}'
expect 422 "d['error']['code'] == 'missing_field'" "PATCH without a role: 422 missing_field"
api "$TA" PATCH "/v1/memberships/$MA" -H "$J" -d '{"role": "member"}'
expect 409 "d['error']['code'] == 'last_admin'" "the last admin cannot demote herself: 409 last_admin"
api "$TA" DELETE "/v1/memberships/$MA"
expect 409 "d['error']['code'] == 'last_admin'" "the last admin cannot remove herself: 409 last_admin"
check "the refusals changed nothing" [ "$(counts)" = "$BEFORE" ]
api "$TA" PATCH "/v1/memberships/$M2" -H "$J" -d '{"role": "member"}'
expect 200 "d['membership_id'] == '$M2' and d['role'] == 'member' and d['name'] == 'mona2'" "PATCH role member: 200"
submit "$TM2" "$P1" run-tests myrepo
expect 201 "d['submitted_by'] == '$(uid mona2)'" "mona2 as member may submit now"
api "$TM" GET "/v1/projects/$P1/members"
expect 200 "[(m['name'], m['role']) for m in d['members']] == [('alice', 'admin'), ('mona', 'member'), ('mona2', 'member'), ('vic', 'viewer')]" \
	"the members of p1"
api "$TA" DELETE "/v1/memberships/$M2"
expect 200 "d == {'removed': '$M2'}" "DELETE the membership: 200"
api "$TM2" GET "/v1/projects/$P1"
expect 404 "d['error']['code'] == 'not_found'" "mona2 then gets 404 on p1"
api "$TM2" GET "/v1/runs/$R"
expect 404 "d['error']['code'] == 'not_found'" "... and on its runs"
api "$TA" DELETE "/v1/memberships/$M2"
expect 404 "d['error']['code'] == 'not_found'" "deleting it again: 404"
api "$TA" GET "/v1/me"
expect 200 "[(p['name'], p['role']) for p in d['projects']] == [('p1', 'admin')]" "alice is still p1's admin"
# the audit trail, read page by page
: >"$T/audit"
after=0 pages=0
while [ $pages -lt 50 ]; do
	api "$TA" GET "/v1/projects/$P1/audit?limit=7&after=$after"
	[ "$CODE" = 200 ] || break
	cat "$T/body" >>"$T/audit"
	echo >>"$T/audit"
	after=$(val "d['next_after'] or ''")
	pages=$((pages + 1))
	[ -n "$after" ] || break
done
check "the audit log read page by page ($pages pages)" [ "$CODE" = 200 ]
check "... every row of p1 once, in order, and no other project's" "$PY" -c "import json,sys
e = [x for l in open('$T/audit') if l.strip() for x in json.loads(l)['entries']]
ids = [x['id'] for x in e]
sys.exit(not (ids == sorted(set(ids)) and len(ids) == int(sys.argv[1])))" \
	"$(psql_q "select count(*) from audit_log where project_id = '$P1'")"
for a in member.add member.role member.remove; do
	check "... has $a of mona2's membership by alice from 127.0.0.1" "$PY" -c "import json,sys
e = [x for l in open('$T/audit') if l.strip() for x in json.loads(l)['entries']]
sys.exit(not any(x['action'] == '$a' and x['object_id'] == '$M2' and x['object_kind'] == 'membership' and
                 x['actor'] == {'kind': 'user', 'user_id': '$UA', 'name': 'alice'} and x['remote_addr'] == '127.0.0.1'
                 for x in e))"
done
check "... and run.submit, run.cancel and approval.decide rows" "$PY" -c "import json,sys
e = [x for l in open('$T/audit') if l.strip() for x in json.loads(l)['entries']]
sys.exit(not {'run.submit', 'run.cancel', 'approval.decide'} <= {x['action'] for x in e})"
api "$TN" GET "/v1/projects/$P2/audit"
expect 200 "[x['id'] for x in d['entries']] == [$(psql_q "select string_agg(id::text, ', ' order by id) from audit_log where project_id = '$P2'")] and
	all(x['object_id'] not in ('$M2', '$R') for x in d['entries'])" \
	"p2's audit log is exactly p2's rows, none of p1's"

# --- usage -------------------------------------------------------------------------
dbruns() { psql_q "select coalesce(jsonb_object_agg(status, n), '{}') from (select status, count(*) n
	from runs where project_id = '$1' group by status) s"; }
api "$TV" GET "/v1/projects/$P1/usage"
expect 200 "d['month'] == '$NOW_MONTH' and d['runs'] == $(dbruns "$P1") and d['spent_usd_micros'] == 0 and
	d['tokens_in'] == 0 and d['tokens_out'] == 0 and d['model_calls'] == 0 and d['quota_usd_micros'] is None and
	d['reserved_usd_micros'] == 0 and d['days'] == [] and d['costliest'] == []" \
	"usage (this month by default): the runs by status, nothing spent"
psql_q "insert into token_usage (run_id, step_id, attempt, provider, model, input_tokens, output_tokens, cost_usd_micros)
	values ('$RART', 's1', 1, 'anthropic', 'claude-x', 1000, 200, 12345),
	       ('$RART', 's1', 1, 'anthropic', 'claude-x', 500, 50, 655)" >/dev/null
api "$TV" GET "/v1/projects/$P1/usage?month=$NOW_MONTH"
expect 200 "d['month'] == '$NOW_MONTH' and d['spent_usd_micros'] == 13000 and d['tokens_in'] == 1500 and
	d['tokens_out'] == 250 and d['model_calls'] == 2 and d['runs'] == $(dbruns "$P1")" \
	"usage ?month=this month: the model calls' cost and tokens"
api "$TV" GET "/v1/projects/$P1/usage?month=2001-01"
expect 200 "d['month'] == '2001-01' and d['spent_usd_micros'] == 0 and d['tokens_in'] == 0 and d['tokens_out'] == 0 and
	d['model_calls'] == 0 and d['runs'] == {}" "usage of a month with nothing: zeros"
api "$TN" GET "/v1/projects/$P2/usage"
expect 200 "d['spent_usd_micros'] == 0 and d['model_calls'] == 0 and d['runs'] == $(dbruns "$P2")" \
	"p2's usage counts none of p1's spend"
check "finalize the run with usage: succeeded" \
	[ -n "$(psql_q "select finalize_run('$RART', 'running', 'succeeded', null, 'run.succeeded', '{}')")" ]
api "$TV" GET "/v1/runs/$RART"
expect 200 "d['status'] == 'succeeded' and d['spent_usd_micros'] == 13000 and d['tokens_in'] == 1500 and
	d['tokens_out'] == 250 and d['finished_at'] is not None" "the finished run shows its totals"
api "$TV" GET "/v1/runs/$RART/steps"
expect 200 "[s['status'] for s in d['steps']] == ['crashed']" "... its open step attempt was closed"
api "$TV" GET "/v1/projects/$P1/usage"
expect 200 "d['runs'].get('succeeded') == 1 and d['runs'] == $(dbruns "$P1")" "usage counts the succeeded run"
expect 200 "[(c['id'], c['spent_usd_micros'], c['template'], c['status']) for c in d['costliest']][0] ==
	('$RART', 13000, 'run-tests', 'succeeded') and len(d['days']) == 1 and
	d['days'][0]['day'] == '$(date -u +%Y-%m-%d)' and d['days'][0]['usd_micros'] == d['spent_usd_micros'] > 0" \
	"... its costliest run and the spend of today"

# --- secrets -----------------------------------------------------------------------
api "$TV" GET "/v1/projects/$P1/repos"
expect 200 "[(r['name'], r['url'], r['has_token']) for r in d['repos']] == [('myrepo', 'https://example.com/x.git', True)] and
	all(set(r) == {'id', 'name', 'url', 'has_token', 'forge', 'api_url', 'created_at'} for r in d['repos'])" \
	"GET repos: has_token true, no token"
api "$TN" GET "/v1/projects/$P2/repos"
expect 200 "[(r['name'], r['has_token']) for r in d['repos']] == [('otherrepo', False)]" "p2's repos: its own, without a token"
check "the response bodies were collected ($(wc -c <"$T/bodies") bytes)" [ "$(wc -c <"$T/bodies")" -gt 50000 ]
check "the repository token is in no response body" sh -c "! grep -q 'secret-token-XYZ' '$T/bodies'"
check "... nor in the daemon log" sh -c "! grep -q 'secret-token-XYZ' '$LOG'"
check "... nor in the audit log, nor any run's manifest or params" [ "$(psql_q "select
	(select count(*) from audit_log where detail::text like '%secret-token%') +
	(select count(*) from runs where manifest::text like '%secret-token%' or params::text like '%secret-token%')")" = 0 ]
check "... and it is stored encrypted only" [ "$(psql_q "select count(*) from repo_connections
	where position('secret-token-XYZ'::bytea in token_ciphertext) > 0")" = 0 ]
check "the daemon log holds no API token" sh -c "! grep -q -e '$TA' -e '$TM' -e '$TV' -e '$TN' -e '$TR' -e '$TE' -e '$TZ' -e '$TM2' '$LOG'"

# --- still healthy -----------------------------------------------------------------
check "/healthz is 200 at the end" [ "$(healthz_code)" = 200 ]
check "the daemon log has no sanitizer report" [ "$(grep -c "runtime error\|AddressSanitizer\|LeakSanitizer" "$LOG")" -eq 0 ]
check "... and no ERROR line" [ "$(grep -c "ERROR" "$LOG")" -eq 0 ]
check "httpd was never killed nor restarted" \
	sh -c "[ \"\$(grep -c 'httpd started' '$LOG')\" = 1 ] && ! grep -q 'killed by signal' '$LOG'"
stop_daemon
check "the daemon stops cleanly (exit 0)" [ "$DAEMON_STATUS" -eq 0 ]
check "no sanitizer report after the stop" [ "$(grep -c "runtime error\|AddressSanitizer\|LeakSanitizer" "$LOG")" -eq 0 ]
[ "$T_FAIL" -eq 0 ] || { echo "--- daemon log"; tail -60 "$LOG"; }
finish api_runs
