#!/bin/sh
# The engine end to end against the real daemon, its database, sandboxes and
# local git repositories: a submitted run is claimed at once, checked out by
# the git helper, walked step by step by its runner (command output as
# events, allow_failure, retries, timeouts, "when", checkpoints decided over
# the API, a pull_request step with nothing to push skipped), every event in
# order on the stream; a
# cancel kills the running command; kill -9 of the runner, of the engine and
# of the whole daemon mid-step: the run completes after, the interrupted
# step ran again (also with retry 0), no event lost or duplicated; a runner
# whose lease is lost is killed at once; a hostile
# repository cannot reach outside its workspace.
. tests/integration/lib.sh
need_root engine
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1 }
sandbox: { artifact_max: 1M }
EOC

start_daemon_or_finish engine
# the sweep tells a host that is gone by its engines' heartbeats (0015)
hb_host() { [ "$(psql_q "select string_agg(coalesce(host_id, 'null'), ',') from engine_heartbeats")" = "$(cat "$T/state/host-id")" ]; }
wait_for 10 hb_host
check "the engine's heartbeat names this host (STATE/host-id)" hb_host

MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
BASE=$("$MKREPO" "$T/repos/clean")
HBASE=$("$MKREPO" "$T/repos/hostile" hostile)
chmod -R a+rX "$T/repos"
check "test repositories made" [ -n "$BASE" -a -n "$HBASE" ]

# tmpl NAME BODY: a template file with the usual head.
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf '  n: { type: int, default: 0 }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}

tmpl basic <<'EOF'
  - name: build
    steps:
      - { id: first, kind: command, run: "echo hello; echo oops >&2; cat README.md" }
      - { id: failing, kind: command, run: "exit 3", allow_failure: true }
      - { id: retried, kind: command, retry: 2, run: "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 2 ]" }
  - name: review
    steps:
      - { id: gate, kind: checkpoint, message: "Look at it", expires_in: 1h }
      - { id: after, kind: command, run: "echo approved; ls -a" }
      - { id: never, kind: command, run: "echo no", when: failure }
EOF
tmpl fails <<'EOF'
  - name: one
    steps:
      - { id: bad, kind: command, run: "echo try; exit 7", retry: 1 }
      - { id: skipped, kind: command, run: "echo no" }
      - { id: cleanup, kind: command, run: "echo cleaning", when: always }
      - { id: onfail, kind: command, run: "echo failed-path", when: failure }
EOF
tmpl slow <<'EOF'
  - name: one
    steps:
      - { id: sleepy, kind: command, timeout: 1s, run: "sleep 30" }
EOF
tmpl pr <<'EOF'
  - name: one
    steps:
      - { id: open-pr, kind: pull_request, title: "t", body: "b" }
EOF
tmpl long <<'EOF'
  - name: one
    steps:
      - { id: mark, kind: command, run: "echo $$ >> runs; sleep 4; echo done" }
      - { id: end, kind: command, run: "cat runs | wc -l" }
EOF
# hold: a command that would run far longer than any wait of the cancel
# check, telling the test when it is running (file "started")
tmpl hold <<'EOF'
  - name: one
    steps:
      - { id: mark, kind: command, run: "touch started; sleep 30; echo done" }
EOF
tmpl hostile <<'EOF'
  - name: one
    steps:
      - { id: look, kind: command, run: "ls -la; ls -la .agrippa .claude .mcp.json 2>&1; echo end" }
      - id: relink
        kind: command
        run: "mkdir -p /tmp/a/artifacts && echo x > /tmp/a/artifacts/t.txt && rm -rf .agrippa && ln -s /tmp/a .agrippa && ln -s /etc/passwd pw"
        produces: [ { key: t, kind: text } ]
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch } ] }
EOF

tmpl arts <<'EOF'
  - name: one
    steps:
      - id: make
        kind: command
        run: |
          mkdir -p .agrippa/artifacts && cd .agrippa/artifacts &&
          echo '# notes' > notes.md && ln -s /proc/self/environ env.txt &&
          ln -s ../../README.md outside.txt && : > empty.txt &&
          head -c 300000 /dev/zero | tr '\0' a > big.txt &&
          head -c 2000000 /dev/zero > huge.txt && echo x > extra.txt &&
          echo '{}' > report.md
        produces:
          - { key: notes, kind: md }
          - { key: env, kind: text }
          - { key: outside, kind: text }
          - { key: empty, kind: text }
          - { key: big, kind: text }
          - { key: huge, kind: text }
          - { key: report, kind: json }
      - id: stale
        kind: command
        retry: 1
        run: |
          if [ -f marker ]; then exit 0; fi
          touch marker; mkdir -p .agrippa/artifacts; echo '{"a": 1}' > .agrippa/artifacts/stale.json; exit 1
        produces: [ { key: stale, kind: json } ]
EOF
tmpl contract <<'EOF'
  - name: one
    steps:
      - id: need
        kind: command
        run: "mkdir -p .agrippa/artifacts; echo '{}' > .agrippa/artifacts/report.md"
        produces: [ { key: report, kind: json, required: true } ]
EOF
tmpl patch <<'EOF'
  - name: one
    steps:
      - { id: edit, kind: command, run: "echo changed >> README.md; echo new > newfile.txt; rm src/main.c; mkdir -p .agrippa/artifacts; echo no > .agrippa/artifacts/x.txt" }
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch, required: true } ] }
      - { id: review, kind: checkpoint, message: "ok?", expires_in: 1h }
EOF
tmpl nopatch <<'EOF'
  - name: one
    steps:
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch, required: true } ] }
EOF

tmpl leak <<'EOF'
  - name: one
    steps:
      - { id: say, kind: command, run: "echo before tok-REDACT-me-123456 after" }
      - { id: bin, kind: command, run: "printf 'a\\377b\\000c\\342\\202'" }
      - { id: split, kind: command, run: "head -c 16383 /dev/zero | tr '\\0' a; printf '\\342\\202\\254'" }
EOF
ctl project add p1 && ctl user add alice && ctl member add p1 alice admin
ctl repo add p1 clean "$T/repos/clean" </dev/null
ctl repo add p1 hostile "$T/repos/hostile" </dev/null
ctl repo add p1 gone "$T/repos/none" </dev/null
printf 'tok-REDACT-me-123456' | ctl repo add p1 secretrepo "$T/repos/clean"
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: project, user, token, repositories" [ -n "$TA" -a -n "$P1" ]

J='Content-Type: application/json'
# submit TEMPLATE REPO: RUN set
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"$2\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
}
run_status() { psql_q "select status from runs where id = '$1'"; }
# step_running RUN: one of its steps has an attempt running (a function, so
# that wait_for asks again each time)
step_running() { [ "$(psql_q "select count(*) from run_steps where run_id = '$1' and status = 'running'")" = 1 ]; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
# no runner process (a runner exits after its last database write commits,
# and the supervisor then reaps it)
no_runner() { [ -z "$(child_pid runner)" ]; }
# run_dir_gone RUN: the run's directory is removed (when its runner is reaped)
run_dir_gone() { [ ! -e "$T/state/runs/$1" ]; }
# events RUN: "type step_id/status ..." one line per event, in seq order
events() {
	psql_q "select seq || ' ' || type || ' ' || coalesce(payload->>'step_id', payload->>'phase', '') ||
		coalesce('/' || (payload->>'status'), '') || coalesce('#' || (payload->>'attempt'), '')
		from run_events where run_id = '$1' order by seq"
}
# seq_ok RUN: seqs are 1..N without gaps
seq_ok() {
	[ "$(psql_q "select count(*) = max(seq) and count(distinct seq) = count(*) from run_events where run_id = '$1'")" = t ]
}

# --- a run end to end ---------------------------------------------------------
submit basic clean
R1=$RUN
check "basic run submitted" [ -n "$R1" ]
wait_for 30 is_status "$R1" waiting_approval
check "the run reaches its checkpoint: waiting_approval ($(run_status "$R1"))" is_status "$R1" waiting_approval
check "its base commit is the repository's ($BASE)" \
	[ "$(psql_q "select base_commit from runs where id = '$R1'")" = "$BASE" ]
events "$R1" >"$T/ev1"
check "events so far, in order" [ "$(cut -d' ' -f2- "$T/ev1" | tr '\n' '|')" = \
"run.queued |run.started |workspace.ready |phase.started build|step.started first#1|step.output first#1|step.output first#1|step.finished first/succeeded#1|step.started failing#1|step.finished failing/failed#1|step.started retried#1|step.finished retried/failed#1|step.started retried#2|step.finished retried/succeeded#2|phase.finished build|phase.started review|step.started gate#1|approval.requested gate#1|run.waiting_approval gate|" ]
check "the checkpoint's approval and its events are of kind checkpoint" \
	[ "$(psql_q "select string_agg(coalesce(payload->>'kind', 'none'), ',' order by seq) from run_events
		where run_id = '$R1' and type in ('approval.requested', 'run.waiting_approval')")" = checkpoint,checkpoint -a \
	  "$(psql_q "select kind from approvals where run_id = '$R1'")" = checkpoint ]
out_of() { # out_of RUN STEP STREAM: the step's output on that stream
	psql_q "select string_agg(payload->>'text', '' order by seq) from run_events
		where run_id = '$1' and type = 'step.output' and payload->>'step_id' = '$2' and payload->>'stream' = '$3'"
}
check "stdout as output events" [ "$(out_of "$R1" first stdout)" = "hello
hello" ]
check "stderr as output events" [ "$(out_of "$R1" first stderr)" = oops ]
check "the failing step records its exit status 3" \
	[ "$(psql_q "select exit_status || status from run_steps where run_id = '$R1' and step_id = 'failing'")" = 3failed ]
wait_for 10 no_runner
check "no runner left while the run waits" no_runner

APPROVAL=$(psql_q "select id from approvals where run_id = '$R1'")
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
	--data-binary '{"decision": "approved"}' "http://127.0.0.1:$PORT/v1/approvals/$APPROVAL/decide")
check "approval over the API: 200 ($CODE)" [ "$CODE" = 200 ]
wait_for 30 is_status "$R1" succeeded
check "the run resumes and succeeds ($(run_status "$R1"))" is_status "$R1" succeeded
events "$R1" >"$T/ev1"
check "the rest of the events, in order" [ "$(cut -d' ' -f2- "$T/ev1" | tail -n +20 | tr '\n' '|')" = \
"approval.approved gate|run.resumed |step.finished gate/succeeded#1|step.started after#1|step.output after#1|step.finished after/succeeded#1|step.skipped never|phase.finished review|run.succeeded |" ]
check "event seqs are 1..N" seq_ok "$R1"
check "the workspace as the commands left it (.git of the clone, count, README.md)" \
	[ "$(psql_q "select payload->>'text' from run_events where run_id = '$R1' and type = 'step.output' and payload->>'step_id' = 'after'")" = "approved
.
..
.git
README.md
count
src" ]
wait_for 60 run_dir_gone "$R1"
check "a finished run's directory is removed" run_dir_gone "$R1"
if ! run_dir_gone "$R1"; then # what stays, and what the daemon said of it
	ls -laR "$T/state/runs/$R1" 2>&1 | sed 's/^/# left: /'
	grep -E "$R1|remov|disk" "$LOG" | tail -n 40 | sed 's/^/# log: /'
fi

# the stream shows the same events, and ends after the terminal one
curl -s -N --max-time 10 -H "Authorization: Bearer $TA" \
	"http://127.0.0.1:$PORT/v1/runs/$R1/events/stream" >"$T/sse1"
check "the SSE stream carries every event in order and ends" [ "$(grep '^event: ' "$T/sse1" | cut -d' ' -f2 | tr '\n' '|')" = \
"$(cut -d' ' -f2 "$T/ev1" | tr '\n' '|')" ]

# --- failure, retries exhausted, when --------------------------------------------
submit fails clean
R2=$RUN
wait_for 30 is_status "$R2" failed
check "a step failing past its retries fails the run" is_status "$R2" failed
check "... with the step's error" [ "$(psql_q "select error from runs where id = '$R2'")" = "step bad: exited with status 7" ]
check "... after 2 attempts, skipping 'success' steps and running 'always' and 'failure' ones" \
	[ "$(events "$R2" | cut -d' ' -f2- | grep -E '^step\.(finished|skipped)' | tr '\n' '|')" = \
	"step.finished bad/failed#1|step.finished bad/failed#2|step.skipped skipped|step.finished cleanup/succeeded#1|step.finished onfail/succeeded#1|" ]

submit slow clean
R3=$RUN
wait_for 30 is_status "$R3" failed
check "a command past its timeout is killed: the step timed_out and the run failed" \
	[ "$(psql_q "select status from run_steps where run_id = '$R3'")" = timed_out -a "$(run_status "$R3")" = failed ]

submit pr clean
R4=$RUN
wait_for 30 is_status "$R4" succeeded
check "a pull_request step with no change to push succeeds ($(run_status "$R4"))" is_status "$R4" succeeded
check "... with pull_request.skipped, nothing pushed" \
	[ "$(psql_q "select payload->>'reason' from run_events where run_id = '$R4' and type = 'pull_request.skipped'")" = "no changes" -a \
	  "$(psql_q "select count(*) from run_pull_requests where run_id = '$R4'")" = 0 ]

submit basic gone
R5=$RUN
wait_for 30 is_status "$R5" failed
check "a repository that cannot be cloned fails the run at checkout" \
	eval "psql_q \"select error from runs where id = '$R5'\" | grep -q '^checkout failed: '"
# its runner was started as the checkout began, and waited for its run
wait_for 10 no_runner
check "... its runner, started during the checkout, is gone without a step" \
	eval "no_runner && [ \"\$(psql_q \"select count(*) from run_events where run_id = '$R5' and type like 'step.%'\")\" = 0 ]"

# --- artifacts ---------------------------------------------------------------------
BIGSHA=$(head -c 300000 /dev/zero | tr '\0' a | sha256sum | cut -d' ' -f1)
submit arts clean
R8=$RUN
wait_for 30 is_status "$R8" succeeded
check "a run producing artifacts succeeds ($(run_status "$R8"))" is_status "$R8" succeeded
check "only the contracted, regular, non-empty files under the cap are stored: notes (inline), big (store)" \
	[ "$(psql_q "select string_agg(key || ':' || size || ':' || (inline is not null) || ':' || coalesce(store_path, '-'), ' ' order by key) from artifacts where run_id = '$R8'")" = \
	"big:300000:false:$(echo "$BIGSHA" | cut -c1-2)/$BIGSHA notes:8:true:-" ]
check "the stored file is in the store under its digest" \
	[ "$(sha256sum <"$T/state/artifacts/$(echo "$BIGSHA" | cut -c1-2)/$BIGSHA" | cut -d' ' -f1)" = "$BIGSHA" ]
check "the inline one's digest is its content's" \
	[ "$(psql_q "select encode(sha256, 'hex') = encode(sha256(inline), 'hex') from artifacts where run_id = '$R8' and key = 'notes'")" = t ]
psql_q "select payload->>'key' || ': ' || (payload->>'reason') from run_events where run_id = '$R8' and type = 'artifact.rejected' order by seq" >"$T/rej"
check "a link to /proc/self/environ is rejected" grep -q '^env: ' "$T/rej"
check "a link to a file of the workspace is rejected" grep -q '^outside: ' "$T/rej"
check "an empty file is rejected" grep -q '^empty: ' "$T/rej"
check "a file over sandbox.artifact_max is rejected" grep -q '^huge: ' "$T/rej"
check "a near miss (report.md for a json artifact) is missing, not stored; an uncontracted file is never read" \
	[ "$(psql_q "select count(*) from artifacts where run_id = '$R8' and key in ('report', 'extra')")" = 0 -a "$(wc -l <"$T/rej")" = 4 ]
check "a stale file of a failed attempt is not stored for the next" \
	[ "$(psql_q "select count(*) from artifacts where run_id = '$R8' and step_id = 'stale'")" = 0 -a \
	  "$(psql_q "select string_agg(status, ',' order by attempt) from run_steps where run_id = '$R8' and step_id = 'stale'")" = failed,succeeded ]
check "artifact.stored events name each stored artifact" \
	[ "$(psql_q "select string_agg(payload->>'key', ',' order by seq) from run_events where run_id = '$R8' and type = 'artifact.stored'")" = notes,big ]

submit contract clean
R9=$RUN
wait_for 30 is_status "$R9" failed
check "a required artifact missing after success fails the step: contract_violation" \
	eval "psql_q \"select error from run_steps where run_id = '$R9'\" | grep -q '^contract_violation: artifact report (report.json): missing'"

# --- patch -----------------------------------------------------------------------------
submit patch clean
R10=$RUN
wait_for 30 is_status "$R10" waiting_approval
check "a patch step stores the workspace's patch (the run waits at its checkpoint)" \
	[ "$(psql_q "select key || ':' || kind from artifacts where run_id = '$R10'")" = patch:patch ]
ART=$(psql_q "select id from artifacts where run_id = '$R10' and key = 'patch'")
curl -s --max-time 10 -H "Authorization: Bearer $TA" -o "$T/patch" "http://127.0.0.1:$PORT/v1/artifacts/$ART"
check "the patch downloads with the recorded sha256" \
	[ "$(sha256sum <"$T/patch" | cut -d' ' -f1)" = "$(psql_q "select encode(sha256, 'hex') from artifacts where id = '$ART'")" ]
check "it holds the change, the new file and the deletion" \
	[ "$(grep -c -e '^+changed$' -e '^+new$' -e '^deleted file mode' "$T/patch")" = 3 ]
check "... and nothing of .agrippa" [ "$(grep -c 'agrippa' "$T/patch")" = 0 ]

submit nopatch clean
R11=$RUN
wait_for 30 is_status "$R11" failed
check "a required patch of an unchanged workspace: contract_violation" \
	eval "psql_q \"select error from run_steps where run_id = '$R11'\" | grep -q '^contract_violation: artifact patch'"

# --- redaction --------------------------------------------------------------------------
submit leak secretrepo
R12=$RUN
wait_for 30 is_status "$R12" succeeded
check "the repository token in a command's output is redacted before it is stored" \
	[ "$(out_of "$R12" say stdout)" = "before ******************** after" ]
check "output that is not UTF-8 (and NUL) arrives as U+FFFD, a cut sequence at the end too" \
	[ "$(psql_q "select payload->>'text' = E'a\\uFFFDb\\uFFFDc\\uFFFD\\uFFFD' from run_events where run_id = '$R12' and type = 'step.output' and payload->>'step_id' = 'bin'")" = t ]
check "a character cut between two output events arrives whole" \
	[ "$(psql_q "select string_agg(payload->>'text', '' order by seq) = repeat('a', 16383) || E'\\u20AC' from run_events where run_id = '$R12' and type = 'step.output' and payload->>'step_id' = 'split'")" = t ]
check "... and is in no event of the run" [ "$(psql_q "select count(*) from run_events where run_id = '$R12' and payload::text like '%REDACT%'")" = 0 ]

# --- hostile repository -----------------------------------------------------------
submit hostile hostile
R6=$RUN
wait_for 30 is_status "$R6" succeeded
check "a repository shipping .claude, .mcp.json, .agrippa -> /: none is in the workspace" \
	[ "$(psql_q "select string_agg(payload->>'text', '' order by seq) from run_events where run_id = '$R6' and type = 'step.output'" | grep -c 'No such file')" = 3 ]
check "an .agrippa the run turned into a link out of the workspace: its artifact is refused, not read" \
	[ "$(psql_q "select count(*) from artifacts where run_id = '$R6' and key = 't'")" = 0 -a \
	  "$(psql_q "select count(*) from run_events where run_id = '$R6' and type = 'artifact.rejected' and payload->>'key' = 't'")" = 1 ]
ART=$(psql_q "select id from artifacts where run_id = '$R6' and key = 'patch'")
curl -s --max-time 10 -H "Authorization: Bearer $TA" -o "$T/patch6" "http://127.0.0.1:$PORT/v1/artifacts/$ART"
check "its patch has the link pw as a link (no content of /etc/passwd) and nothing under .agrippa" \
	[ "$(grep -c '^+/etc/passwd' "$T/patch6")" = 1 -a "$(grep -c 'root:' "$T/patch6")" = 0 -a "$(grep -c 'agrippa' "$T/patch6")" = 0 ]

# --- cancel -------------------------------------------------------------------------
submit hold clean
R7=$RUN
wait_for 30 step_running "$R7"
# its command is running (it made "started" in the workspace)
wait_for 10 test -e "$(run_ws "$R7")/started"
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST -H "Authorization: Bearer $TA" \
	"http://127.0.0.1:$PORT/v1/runs/$R7/cancel")
check "cancel of a running run: 202 ($CODE)" [ "$CODE" = 202 ]
# The command sleeps 30 s and the runner ends the run only once its
# command has exited: cancelled well within 15 s, by the runner (not by the
# engine's sweep, {"by": "sweep"}, after a lapsed lease), with no "done",
# is the command killed at once.
wait_for 15 is_status "$R7" cancelled
check "the running command is killed and the run ends cancelled at once, by its runner, the command cut short" \
	[ "$(run_status "$R7")" = cancelled -a \
	  "$(psql_q "select payload->>'by' from run_events where run_id = '$R7' and type = 'run.cancelled'")" = runner -a \
	  "$(out_of "$R7" mark stdout | grep -c done)" = 0 ]
check "... its step cancelled, the terminal event last" [ "$(psql_q "select status from run_steps where run_id = '$R7'")" = cancelled -a \
	"$(events "$R7" | tail -n 1 | cut -d' ' -f2)" = run.cancelled ]

# --- crash recovery ------------------------------------------------------------------
# kill_mid WHAT: start a run of "long", kill WHAT while its first step runs,
# and check that it completes with that step run again.
kill_mid() {
	submit long clean
	R=$RUN
	wait_for 30 step_running "$R"
	# the command has run "echo $$ >> runs" (step_running is true from the
	# step's start, before its command runs)
	wait_for 10 test -s "$(run_ws "$R")/runs"
	case $1 in
	runner) kill -9 "$(child_pid runner)" ;;
	engine) kill -9 "$(child_pid engine)" ;;
	esac
	wait_for 60 is_status "$R" succeeded
	check "kill -9 of the $1 mid-step: the run completes ($(run_status "$R"))" is_status "$R" succeeded
	check "... the step crashed once and ran again (retry 0)" [ "$(psql_q "select string_agg(status, ',' order by attempt) from run_steps where run_id = '$R' and step_id = 'mark'")" = crashed,succeeded ]
	check "... both attempts ran in the same workspace" [ "$(psql_q "select payload->>'text' from run_events where run_id = '$R' and type = 'step.output' and payload->>'step_id' = 'end'" | tr -d ' ')" = 2 ]
	check "... event seqs 1..N, one terminal event" seq_ok "$R"
	check "... no event twice" [ "$(psql_q "select count(*) from (select type, payload from run_events where run_id = '$R' group by 1, 2 having count(*) > 1) d")" = 0 ]
}
kill_mid runner
kill_mid engine

# a step whose runner keeps dying: after RUNNER_CRASH_MAX (3) crashes the
# next attempt fails it, and the run with it
submit long clean
R=$RUN
attempt_running() { [ "$(psql_q "select count(*) from run_steps where run_id = '$1' and attempt = $2 and status = 'running'")" = 1 ]; }
for k in 1 2 3; do
	wait_for 30 attempt_running "$R" $k
	sleep 0.5
	kill -9 "$(child_pid runner)" 2>/dev/null
done
wait_for 60 is_status "$R" failed
check "a step whose runner died 3 times fails: its attempts and the run's error" \
	[ "$(psql_q "select string_agg(status, ',' order by attempt) from run_steps where run_id = '$R' and step_id = 'mark'")" = crashed,crashed,crashed,failed -a \
	  "$(psql_q "select error from runs where id = '$R'")" = "step mark: its runner died 3 times" ]


# a lease lost mid-step (another engine took the run: here a row changed
# under the engine): the engine cannot renew it and its runner is killed at
# once, with its command, before the step could finish or write anything;
# once that lease lapses the run is taken up again and completes
submit long clean
R=$RUN
wait_for 30 step_running "$R"
psql_q "update runs set lease_owner = 'thief', lease_expires_at = now() + interval '1 hour' where id = '$R'" >/dev/null
wait_for 5 no_runner
check "a lease lost mid-step: the runner is gone within 5 s" no_runner
sleep 3
check "... its step never finished and wrote nothing after (the attempt still running, no 'done')" \
	[ "$(psql_q "select string_agg(status, ',') from run_steps where run_id = '$R'")" = running -a \
	  "$(out_of "$R" mark stdout | grep -c done)" = 0 ]
check "... the run still belongs to the other owner" \
	[ "$(psql_q "select status || ' ' || lease_owner from runs where id = '$R'")" = "running thief" ]
psql_q "update runs set lease_expires_at = now() - interval '1 second' where id = '$R'" >/dev/null
wait_for 60 is_status "$R" succeeded
check "... once that lease lapsed: taken up again, the step crashed and ran again" \
	[ "$(run_status "$R")" = succeeded -a \
	  "$(psql_q "select string_agg(status, ',' order by attempt) from run_steps where run_id = '$R' and step_id = 'mark'")" = crashed,succeeded ]
check "... event seqs 1..N" seq_ok "$R"

# a run cancelled while it waits for an approval keeps its directory until
# the next start (no runner holds it)
curl -s -o /dev/null --max-time 10 -X POST -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/runs/$R10/cancel"
check "a parked run cancelled: cancelled, its directory still there" \
	[ "$(run_status "$R10")" = cancelled -a -d "$T/state/runs/$R10" ]

# the whole daemon
submit long clean
R=$RUN
wait_for 30 step_running "$R"
sleep 1
kill -9 "$SUP_PID" $(children_of "$SUP_PID") 2>/dev/null
pkill -KILL -u _agrippadb -f "$T/state/pg" 2>/dev/null
wait "$SUP_PID" 2>/dev/null
SUP_PID=""
PGPID=$(head -n 1 "$T/state/pg/postmaster.pid" 2>/dev/null)
pg_gone() { ! pgrep -u _agrippadb -f "$T/state/pg" >/dev/null && ! kill -0 "${PGPID:-0}" 2>/dev/null; }
wait_for 20 pg_gone
start_daemon_or_finish engine
wait_for 60 is_status "$R" succeeded
check "kill -9 of the whole daemon mid-step: the run completes after a restart" is_status "$R" succeeded
ATT=$(psql_q "select string_agg(status, ',' order by attempt) from run_steps where run_id = '$R' and step_id = 'mark'")
# (a slow restart may cost its first new runner the lease too: crashed again)
check "... the interrupted attempt crashed and the step ran again to success ($ATT)" \
	eval "echo '$ATT' | grep -Eqx 'crashed(,crashed)*,succeeded'"
check "... event seqs 1..N" seq_ok "$R"
wait_for 60 run_dir_gone "$R10" # removed in the background
check "the directory of the run that ended while no runner held it is removed at start" run_dir_gone "$R10"

stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" = 0 ]
check "no runner or sandbox process left" [ -z "$(our_processes)" ]
finish engine
