#!/bin/sh
# Two daemons (two engines) on one external PostgreSQL race for the same
# queued runs: every run is claimed by exactly one engine (one run.started,
# one attempt per step, nothing run twice), both engines take part, and
# every run ends succeeded; runs parked at a checkpoint are taken up again
# by the host whose state holds their workspace.  First, on one database
# connection, a run whose
# repository connection was removed while it was queued fails cleanly (the
# supervisor submits an operation from the callback of the one that just
# answered, on that same connection).
. tests/integration/lib.sh
need_root two_engines
make_env
PID2=""
stop_second() {
	if [ -n "$PID2" ]; then
		kids=$(children_of "$PID2")
		kill -KILL "$PID2" 2>/dev/null
		for p in $kids; do kill -KILL "$p" 2>/dev/null; done
	fi
	return 0
}
trap 'stop_second; pg_ctl_ext stop -m immediate >/dev/null 2>&1; cleanup_env' EXIT

. tests/integration/extpg_lib.sh
ext_pg_init -c max_connections=50
check "external PostgreSQL started" [ $? -eq 0 ]
q() { PGPASSWORD=$EXTPW "$PGBIN/psql" -X -A -t -h "$EXT/run" -U extuser postgres -c "$1"; }

sed -i "s|^database: .*|database: $(ext_url 1)|" "$CONF"
echo "engine: { concurrency: 2, lease: 10, sweep: 1 }" >>"$CONF"
start_daemon_or_finish two_engines

mkdir -p "$T/repos"
chmod 0755 "$T/repos"
"$TOOLS/mkrepo" "$T/repos/r" >/dev/null
chmod -R a+rX "$T/repos"
cat >"$T/race.yaml" <<'EOF'
name: race
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: one
    steps:
      - { id: a, kind: command, run: "echo $$ >> marks; sleep 0.2" }
      - { id: b, kind: command, run: "wc -l < marks" }
EOF
# a hold lasts 10 s: the third run must still find both slots taken after
# a submit, two queries and a DELETE on a loaded machine
sed -e 's/^name: race/name: hold/' -e 's/sleep 0.2/sleep 10/' "$T/race.yaml" >"$T/hold.yaml"
cat >"$T/gated.yaml" <<'EOF'
name: gated
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: one
    steps:
      - { id: a, kind: command, run: "echo $$ >> marks" }
      - { id: gate, kind: checkpoint, message: "go?" }
      - { id: b, kind: command, run: "wc -l < marks" }
EOF
ctl user add alice && ctl project add p1 && ctl member add p1 alice admin &&
	ctl repo add p1 r "$T/repos/r" </dev/null && ctl repo add p1 r2 "$T/repos/r" </dev/null &&
	ctl template load "$T/race.yaml" && ctl template load "$T/hold.yaml" &&
	ctl template load "$T/gated.yaml"
TA=$(new_token alice)
P1=$(q "select id from projects where name = 'p1'")
check "set-up" [ -n "$TA" -a -n "$P1" ]

# submit PORT TEMPLATE REPO: prints the run's id
submit() {
	curl -s --max-time 10 -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
		--data-binary "{\"template\": \"$2\", \"params\": {\"repo\": \"$3\"}}" \
		"http://127.0.0.1:$1/v1/projects/$P1/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
H1=$(submit "$PORT" hold r)
H2=$(submit "$PORT" hold r)
two_running() { [ "$(q "select count(*) from runs where status = 'running'")" = 2 ]; }
wait_for 30 two_running
G=$(submit "$PORT" race r2)
check "with both slots taken, a third run stays queued" [ "$(q "select status from runs where id = '$G'")" = queued ]
R2ID=$(q "select id from repo_connections where name = 'r2'")
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X DELETE -H "Authorization: Bearer $TA" \
	"http://127.0.0.1:$PORT/v1/repos/$R2ID")
check "its repository connection is removed meanwhile ($CODE)" [ "$CODE" = 200 -o "$CODE" = 204 ]
g_failed() { [ "$(q "select status from runs where id = '$G'")" = failed ]; }
wait_for 30 g_failed
check "once claimed, it fails: the connection no longer exists" \
	[ "$(q "select error from runs where id = '$G'")" = "the workspace's repository connection no longer exists" ]
held_done() { [ "$(q "select count(*) from runs where id in ('$H1', '$H2') and status = 'succeeded'")" = 2 ]; }
wait_for 60 held_done
check "the other runs succeed" held_done
check "the daemon lives on with its one database connection" [ "$(healthz_code)" = 200 ]
q "delete from runs" >/dev/null

# The second daemon: its own state, socket, port and pidfile; the same
# database and master key (both open the repositories' tokens).
PORT2=$((PORT + 1))
CONF2="$T/agrippad2.yaml"
sed -e "s|^state_dir: .*|state_dir: $T/state2|" -e "s|^listen: .*|listen: [ \"127.0.0.1:$PORT2\" ]|" \
	-e "s|^control_socket: .*|control_socket: $T/ctl2.sock|" \
	-e "s|^pidfile: .*|pidfile: $T/agrippad2.pid|" "$CONF" >"$CONF2"
"$AGRIPPAD" -d -f "$CONF2" >>"$T/agrippad2.log" 2>&1 &
PID2=$!
up2() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PORT2/healthz")" = 200 ]; }
wait_for 60 up2
check "a second daemon starts on the same database" up2 || cat "$T/agrippad2.log"

N=30
i=0
while [ $i -lt $N ]; do
	# alternate the daemon that takes the submit: both are woken by NOTIFY
	port=$PORT
	[ $((i % 2)) -eq 1 ] && port=$PORT2
	curl -s -o /dev/null --max-time 10 -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
		--data-binary '{"template": "race", "params": {"repo": "r"}}' \
		"http://127.0.0.1:$port/v1/projects/$P1/runs"
	i=$((i + 1))
done
check "$N runs submitted" [ "$(q "select count(*) from runs")" = $N ]
all_done() { [ "$(q "select count(*) from runs where finished_at is not null")" = $N ]; }
wait_for 180 all_done
check "every run ended" all_done
check "... succeeded ($(q "select string_agg(status || ':' || n, ' ') from (select status, count(*) n from runs group by 1) s"))" \
	[ "$(q "select count(*) from runs where status = 'succeeded'")" = $N ]
check "each run was claimed once: one run.started, no run.resumed" \
	[ "$(q "select count(*) from run_events where type = 'run.started'")" = $N -a \
	  "$(q "select count(*) from run_events where type = 'run.resumed'")" = 0 ]
check "each step ran once (one attempt, none crashed)" \
	[ "$(q "select count(*) from run_steps")" = $((2 * N)) -a "$(q "select max(attempt) from run_steps")" = 1 ]
check "each workspace saw its first step once" \
	[ "$(q "select count(*) from run_events where type = 'step.output' and payload->>'step_id' = 'b' and btrim(payload->>'text', E' \n') = '1'")" = $N ]
check "both engines ran runs ($(q "select string_agg(o || ':' || n, ' ') from (select payload->>'owner' o, count(*) n from run_events where type = 'run.started' group by 1) s"))" \
	[ "$(q "select count(distinct payload->>'owner') from run_events where type = 'run.started'")" = 2 ]
check "no run is left with a lease" [ "$(q "select count(*) from runs where lease_owner is not null")" = 0 ]

# Runs parked at a checkpoint and approved: each is taken up again by the
# host whose state directory holds its workspace, never by the other one
# (where it would find no workspace and fail).
check "the two daemons have their own host ids" \
	[ -s "$T/state/host-id" -a -s "$T/state2/host-id" -a "$(cat "$T/state/host-id")" != "$(cat "$T/state2/host-id")" ]
q "delete from runs" >/dev/null
N=10
i=0
while [ $i -lt $N ]; do
	port=$PORT
	[ $((i % 2)) -eq 1 ] && port=$PORT2
	submit "$port" gated r >/dev/null
	i=$((i + 1))
done
all_parked() { [ "$(q "select count(*) from runs where status = 'waiting_approval'")" = $N ]; }
wait_for 120 all_parked
check "$N gated runs parked at their checkpoint" all_parked
check "... pinned to the host that claimed each, both hosts among them" \
	[ "$(q "select count(distinct workspace_host) from runs where workspace_host is not null")" = 2 -a \
	  "$(q "select count(*) from runs where workspace_host is null")" = 0 ]
i=0
for a in $(q "select id from approvals where status = 'pending'"); do
	port=$PORT
	[ $((i % 2)) -eq 0 ] && port=$PORT2
	curl -s -o /dev/null --max-time 10 -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
		--data-binary '{"decision": "approved"}' "http://127.0.0.1:$port/v1/approvals/$a/decide"
	i=$((i + 1))
done
wait_for 180 all_done
check "every approved run ended ($(q "select string_agg(status || ':' || n, ' ') from (select status, count(*) n from runs group by 1) s"))" \
	[ "$(q "select count(*) from runs where status = 'succeeded'")" = $N ]
check "... each resumed by the engine that started it (its host's)" \
	[ "$(q "select count(*) from runs r where (select payload->>'owner' from run_events where run_id = r.id and type = 'run.started') = (select payload->>'owner' from run_events where run_id = r.id and type = 'run.resumed')")" = $N ]
check "... in its own workspace: its first step's mark is there" \
	[ "$(q "select count(*) from run_events where type = 'step.output' and payload->>'step_id' = 'b' and btrim(payload->>'text', E' \n') = '1'")" = $N ]

stop_second
PID2=""
stop_daemon
check "the first daemon stops cleanly" [ "$DAEMON_STATUS" = 0 ]
finish two_engines
