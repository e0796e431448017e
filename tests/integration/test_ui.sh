#!/bin/sh
# The dashboard in a real browser against the real daemon: Debian's chromium
# driven by playwright-core (tests/browser/ui.mjs; both installed by make
# deps, no browser downloaded).  Sign in with a token; a run opened while it
# runs shows its earlier and new events once each and in order, also after
# httpd (so the stream) is killed mid-run; approve and reject checkpoints
# from the page; hostile text (command output, a param, a checkpoint's
# message, a patch) is text and runs nothing; the cookie alone, a wrong CSRF
# token or another origin changes nothing; a viewer has no buttons and the
# API refuses them; an admin raises the budget a run stopped on, which a
# member may not; the runs filter by day; a revoked token shows "sign in
# again"; no dialog, console
# error or CSP violation on any page.  Screenshots go to $BUILD/ui-shots/.
. tests/integration/lib.sh
need_root ui
if [ ! -x /usr/bin/chromium ] || [ ! -f tests/browser/node_modules/playwright-core/package.json ] ||
	! command -v node >/dev/null 2>&1; then
	notok "chromium, node and playwright-core are installed (make deps)"
	finish ui
	exit 1
fi
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
ui_dir: $ROOT/ui
engine: { concurrency: 4, lease: 5, sweep: 1 }
EOC
start_daemon_or_finish ui

mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
BASE=$("$TOOLS/mkrepo" "$T/repos/clean")
chmod -R a+rX "$T/repos"
# A run that prints for a while (markup among its output), changes a file
# (markup in the patch), then waits at a checkpoint whose message is markup.
cat >"$T/tmpl/ui.yaml" <<'EOF'
name: ui-demo
version: 1
params:
  repo: { type: repoRef, required: true }
  note: { type: string, default: "" }
  lines: { type: int, default: 8 }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: work
    steps:
      - id: slow
        kind: command
        run: >-
          i=0; while [ $i -lt ${params.lines} ]; do i=$((i+1)); echo "line $i"; sleep 1; done;
          echo '<script>window.__xss=1;alert(1)</script><img src=x onerror=alert(2)>';
          echo '<img src=x onerror=alert(5)>' >> README.md
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch, required: true } ] }
      - { id: gate, kind: checkpoint, message: "Ship it? <img src=x onerror=alert(3)>", expires_in: 1h }
      - { id: after, kind: command, run: "echo approved" }
EOF
# A run whose budget (0) stops it before its agent step: an admin raises it
# from the page (no model provider here: the step fails, allowed to).
cat >"$T/tmpl/ui-budget.yaml" <<'EOF'
name: ui-budget
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readWrite }
budget: { usd: 0 }
phases:
  - name: work
    steps:
      - { id: think, kind: agent, prompt: "x", allow_failure: true }
      - { id: after, kind: command, run: "echo after the budget" }
EOF
ctl template load "$T/tmpl/ui.yaml" && ctl template load "$T/tmpl/ui-budget.yaml" &&
	ctl project add p1 && ctl user add alice && ctl user add vic && ctl user add ada &&
	ctl member add p1 alice member && ctl member add p1 vic viewer && ctl member add p1 ada admin &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null
TA=$(new_token alice)
TV=$(new_token vic)
TD=$(new_token ada)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: templates, project, users, repository" [ -n "$BASE" -a -n "$TA" -a -n "$TV" -a -n "$TD" -a -n "$P1" ]

submit() { # submit LINES: prints the run's id
	curl -s --max-time 10 -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
		--data-binary "{\"template\": \"ui-demo\", \"params\": {\"repo\": \"clean\", \"lines\": $1,
		  \"note\": \"<b>bold</b><img src=x onerror=alert(4)>\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
RUN_REJECT=$(submit 0)
RUN_VIEW=$(submit 0)
two_waiting() { [ "$(psql_q "select count(*) from runs where status = 'waiting_approval'")" = 2 ]; }
check "two runs wait at their checkpoint" wait_for 60 two_waiting
# what an agent step would write, hostile and long, on a run the viewer opens
LONG=$(python3 -c 'print("The model says <script>window.__xss=2</script> " + "x" * 2000)')
psql_q "select append_run_event('$RUN_VIEW', 'agent.message', jsonb_build_object('step_id', 'gate', 'attempt', 1,
          'turn', 1, 'text', '$LONG', 'truncated', false));
        select append_run_event('$RUN_VIEW', 'agent.tool_call', '{\"step_id\": \"gate\", \"attempt\": 1, \"turn\": 1,
          \"id\": \"t1\", \"name\": \"read_file\", \"input\": {\"path\": \"<img src=x onerror=alert(7)>\"}}');
        select append_run_event('$RUN_VIEW', 'agent.tool_result', jsonb_build_object('step_id', 'gate', 'attempt', 1,
          'turn', 1, 'id', 't1', 'name', 'read_file', 'is_error', false, 'content', '$LONG', 'bytes', 2050));
        select append_run_event('$RUN_VIEW', 'future.kind', '{\"what\": \"a type the page does not know\"}')" >/dev/null
check "agent events (and one of a type no page knows) appended to a waiting run" \
	[ "$(psql_q "select count(*) from run_events where run_id = '$RUN_VIEW' and type like 'agent.%'")" = 3 ]
RUN_LIVE=$(submit 30) # still running when the page opens after the list's checks, on a slow machine too
RUN_BUDGET=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
	--data-binary '{"template": "ui-budget", "params": {"repo": "clean"}}' \
	"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# what the date filter is tried on: the rejected run was made ten days ago
# (its day and today's in the browser's time zone, which is this host's)
psql_q "update runs set created_at = created_at - interval '10 days' where id = '$RUN_REJECT'" >/dev/null
OLD_DAY=$(date -d "@$(psql_q "select extract(epoch from created_at)::bigint from runs where id = '$RUN_REJECT'")" +%Y-%m-%d)
TODAY=$(date +%Y-%m-%d)
budget_parked() { is_status "$RUN_BUDGET" waiting_approval; }
check "a run of budget 0 parks before its agent step" wait_for 60 budget_parked

# the commands the browser test runs: kill httpd (the supervisor starts it
# again), revoke alice's token
cat >"$T/kill_httpd.sh" <<EOF
. tests/integration/lib.sh
SUP_PID=$SUP_PID AGRIPPAD=$AGRIPPAD
pid=\$(child_pid httpd) && kill -KILL "\$pid"
EOF
# and one that expires vic's sessions
cat >"$T/expire.sh" <<EOF
PGPASSWORD=\$(cat "$T/state/db.password") psql -X -q -A -t -h "$T/state/pgrun" -U agrippa agrippa -c \\
	"update browser_sessions set expires_at = now() where user_id = (select id from users where name = 'vic')"
EOF
SHOTS="$ROOT/$BUILD/ui-shots"
rm -rf "$SHOTS"
out=$(URL="http://127.0.0.1:$PORT" TOKEN="$TA" VIEWER="$TV" RUN_LIVE="$RUN_LIVE" RUN_REJECT="$RUN_REJECT" \
	RUN_VIEW="$RUN_VIEW" RUN_BUDGET="$RUN_BUDGET" ADMIN="$TD" OLD_DAY="$OLD_DAY" TODAY="$TODAY" \
	P1="$P1" KILL_HTTPD="sh $T/kill_httpd.sh" SHOTS="$SHOTS" \
	REVOKE="$AGRIPPACTL -s $CTL token revoke $(prefix "$TA")" \
	EXPIRE="sh $T/expire.sh" \
	timeout 300 node tests/browser/ui.mjs 2>&1)
printf '%s\n' "$out"
T_PASS=$((T_PASS + $(printf '%s\n' "$out" | grep -c '^ok - ')))
T_FAIL=$((T_FAIL + $(printf '%s\n' "$out" | grep -c '^not ok - ')))
printf '%s\n' "$out" | grep -q '^ok - ' || notok "the browser test printed results"

check "the live run succeeded" is_status "$RUN_LIVE" succeeded
check "the rejected run failed" is_status "$RUN_REJECT" failed
check "the run the refused requests aimed at still waits" is_status "$RUN_VIEW" waiting_approval
check "the budget raised from the page: 300000, by ada, audited, the approval approved by her, the run succeeded" \
	[ "$(psql_q "select r.budget_usd_micros || ' ' || r.status || ' ' ||
		(select count(*) from audit_log l join users u on u.id = l.actor_user_id where l.action = 'run.budget'
		   and l.object_id = r.id::text and u.name = 'ada' and (l.detail->>'to')::bigint = 300000) || ' ' ||
		(select string_agg(a.kind || ':' || a.status || ':' || u.name, ',') from approvals a
		   join users u on u.id = a.decided_by where a.run_id = r.id)
		from runs r where r.id = '$RUN_BUDGET'")" = "300000 succeeded 1 budget:approved:ada" ]
check "... its budget.changed event from 0 to 300000, once" \
	[ "$(psql_q "select string_agg((payload->>'from') || ' ' || (payload->>'to'), ',') from run_events
		where run_id = '$RUN_BUDGET' and type = 'budget.changed'")" = "0 300000" ]
check "the approval was decided by alice with the page's comment, stored as sent" \
	[ "$(psql_q "select a.comment from approvals a join users u on u.id = a.decided_by
	             where a.run_id = '$RUN_LIVE' and u.name = 'alice'")" = 'looks good <img src=x onerror=alert(6)>' ]
n=$(ls "$SHOTS"/*.png 2>/dev/null | wc -l)
check "screenshots saved ($n in $SHOTS)" [ "$n" -ge 13 ]
check "no token or session secret in the log" sh -c "! grep -qF -e '$TA' -e '$TV' -e 'ags_' '$LOG'"
stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" -eq 0 ]
finish ui
