#!/bin/sh
# bench/engine/run.sh [BUILD]: the engine benchmark.  Starts its own daemon
# (BUILD, default build: the optimized tree) on the embedded database in a
# temporary state directory, with engine { concurrency: 8, lease: 30,
# sweep: 5 }, and prints figures ("engine: NAME: VALUE"), never pass/fail:
#   1. submit -> first step: LAT_N (100) runs one after the other of a
#      template whose first command is "date +%s.%N".  Per run: the clock
#      that command printed (read from its step.output event on the run's
#      stream) minus the client's clock right after POST /v1/.../runs
#      answered; median, p90, max.  Beside it, from run_events.created_at
#      (the inserting transaction's start), how far the claim
#      (run.started), the checkout (workspace.ready) and step.started were
#      from the same client clock; and the peer: "agrippactl sandbox run --
#      date +%s.%N" (SBX_N, 20 samples), the command's clock minus the
#      clock before agrippactl was spawned, with the ratio of the medians.
#      Per run also the gaps between them: claim -> checkout, checkout ->
#      step.started (the sandbox, the runner, its load), step.started ->
#      the command's clock.
#   2. throughput: THR_N (200) runs of a two-command template submitted
#      from THR_THREADS (8) client threads at once: wall time from the
#      first submit to the last run's finished_at, runs/s, how many
#      succeeded, and the peak number of runs in 'running' seen by a poll
#      every 50 ms (the concurrency is 8; more would be a bug).
# Figures are from one pass each (medians over the samples).  Needs root
# and python3 (bench/engine/engine.py does the HTTP calls and timing).
# Tunables (environment): LAT_N, SBX_N, THR_N, THR_THREADS; SBX_N=0 or
# THR_N=0 leaves that part out.  LAT_OUT=FILE appends each measured run's
# "command claim checkout step.started" (ms after the POST answered) to
# FILE; TURN_IN, TURN_OUT and TURN_EVERY make the measured runs take turns
# with another daemon's (bench/engine/engine.py).  The script runs the tree it is started in (its lib.sh, its
# BUILD): bench/engine/compare.sh starts it in an older tree to compare.
set -eu
BUILD=${1:-build}
ROOT=$(pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
export BUILD ROOT
LAT_N=${LAT_N:-100}
SBX_N=${SBX_N:-20}
THR_N=${THR_N:-200}
THR_THREADS=${THR_THREADS:-8}
CONCURRENCY=8
[ "$(id -u)" -eq 0 ] || { echo "bench/engine: run as root" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "bench/engine: python3 is not installed" >&2; exit 1; }
[ -x "$ROOT/$BUILD/agrippad" ] || { echo "bench/engine: no $BUILD/agrippad (make first)" >&2; exit 1; }
[ -x "$ROOT/$BUILD/tests/tools/mkrepo" ] ||
	{ echo "bench/engine: no $BUILD/tests/tools/mkrepo (make BUILD=$BUILD tests)" >&2; exit 1; }
sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
echo "engine: { concurrency: $CONCURRENCY, lease: 30, sweep: 5 }" >>"$CONF"
MONPID=""
bench_cleanup() {
	if [ -n "$MONPID" ]; then kill -KILL "$MONPID" 2>/dev/null || true; fi
	cleanup_env
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP
die() {
	echo "bench/engine: $*" >&2
	exit 1
}
HELPER="python3 $HERE/engine.py"
alive() { kill -0 "$SUP_PID" 2>/dev/null; }
# died WHAT: the daemon is gone; what we have, the end of its log, status 1.
died() {
	[ -z "${RATIO:-}" ] || print_latency
	echo "bench/engine: the daemon (supervisor pid $SUP_PID) died during $1; the end of $LOG:" >&2
	tail -n 25 "$LOG" >&2
	exit 1
}

start_daemon || {
	cat "$LOG"
	die "daemon did not start"
}

# --- set-up: a repository, two templates, alice, her token, p1 ------------------
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
"$TOOLS/mkrepo" "$T/repos/r" >/dev/null || die "mkrepo failed"
chmod -R a+rX "$T/repos"
# tmpl NAME: a template from stdin's steps, one phase, on the repository.
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n  - name: one\n    steps:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml" || die "template $1"
}
tmpl first <<'EOF'
      - { id: clock, kind: command, run: "date +%s.%N" }
EOF
tmpl two <<'EOF'
      - { id: a, kind: command, run: "true" }
      - { id: b, kind: command, run: "echo ok" }
EOF
ctl user add alice || die "user add"
TOKEN=$(new_token alice) || die "token create"
ctl project add p1 || die "project add"
ctl member add p1 alice admin || die "member add"
ctl repo add p1 r "$T/repos/r" </dev/null || die "repo add"
P1=$(psql_q "select id from projects where name = 'p1'")
BASE="http://127.0.0.1:$PORT"

# stats: "median p90 max" of the numbers on stdin (nearest rank; the lower
# middle when the count is even), to 1 decimal.
stats() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (!NR) { print "- - -"; exit }
			p = int(NR * 0.9); if (p < NR * 0.9) p++
			printf "%.1f %.1f %.1f\n", v[int((NR + 1) / 2)], v[p], v[NR]
		}'
}
field() { echo "$1" | cut -d' ' -f"$2"; }

echo "bench/engine: $(nproc) cores, $BUILD, engine concurrency $CONCURRENCY," \
	"$LAT_N latency runs, $THR_N throughput runs from $THR_THREADS threads"

# --- 1. submit -> first step ---------------------------------------------------------
# one warm-up run (first clone of the repository, first runner) not counted
TURN_IN= TURN_OUT= $HELPER latency "$BASE" "$TOKEN" "$P1" first r 1 "$T/warm" || { alive || died "the warm-up run"; die "warm-up run failed"; }
WARM=$(cut -d' ' -f1 "$T/warm")
T0=$(date +%s)
$HELPER latency "$BASE" "$TOKEN" "$P1" first r "$LAT_N" "$T/lat" || { alive || died "the latency runs"; die "latency runs failed"; }
T1=$(date +%s)
LAT_OK=$(awk '$4 == "run.succeeded"' "$T/lat" | wc -l)
# server-side event times of the measured runs: "run type epoch"
psql_q "select e.run_id || ' ' || e.type || ' ' || extract(epoch from e.created_at)
	from run_events e join runs r on r.id = e.run_id
	where r.template_name = 'first' and e.type in ('run.started', 'workspace.ready', 'step.started')
	order by e.run_id, e.seq" >"$T/lat.ev"
# per run: claim checkout step.started command (ms after the POST answered)
awk 'NR == FNR { if (!($1 "/" $2 in t)) t[$1 "/" $2] = $3; next }
	{
		printf "%.3f %.3f %.3f %.3f\n", (t[$1 "/run.started"] - $2) * 1000,
			(t[$1 "/workspace.ready"] - $2) * 1000, (t[$1 "/step.started"] - $2) * 1000,
			($3 - $2) * 1000
	}' "$T/lat.ev" "$T/lat" >"$T/lat.ms"
CMD=$(awk '{ print $4 }' "$T/lat.ms" | stats)
CLAIM=$(awk '{ print $1 }' "$T/lat.ms" | stats)
READY=$(awk '{ print $2 }' "$T/lat.ms" | stats)
STEP=$(awk '{ print $3 }' "$T/lat.ms" | stats)
GAP_CO=$(awk '{ printf "%.3f\n", $2 - $1 }' "$T/lat.ms" | stats)
GAP_RS=$(awk '{ printf "%.3f\n", $3 - $2 }' "$T/lat.ms" | stats)
GAP_SC=$(awk '{ printf "%.3f\n", $4 - $3 }' "$T/lat.ms" | stats)
[ -z "${LAT_OUT:-}" ] || awk '{ print $4, $1, $2, $3 }' "$T/lat.ms" >>"$LAT_OUT"
# the run's own duration, from the database
RUNDUR=$(psql_q "select extract(epoch from finished_at - created_at) * 1000 from runs
	where template_name = 'first' and id <> '$WARM'" | stats)

# the peer: a sandbox alone
: >"$T/sbx"
[ "$SBX_N" -eq 0 ] || $HELPER sandbox "$AGRIPPACTL" "$CTL" "$SBX_N" "$T/sbx" || { alive || died "the sandbox runs"; die "sandbox runs failed"; }
SBX=$(awk '$1 != "fail" { printf "%.3f\n", ($2 - $1) * 1000 }' "$T/sbx" | stats)
SBXALL=$(awk '$1 != "fail" { printf "%.3f\n", ($3 - $1) * 1000 }' "$T/sbx" | stats)
SBXFAIL=$(grep -c '^fail ' "$T/sbx" || true)
RATIO=$(awk -v a="$(field "$CMD" 1)" -v b="$(field "$SBX" 1)" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')

print_latency() {
	echo
	echo "submit -> first step, $LAT_N runs one at a time ($LAT_OK succeeded, $((T1 - T0)) s), ms after POST answered: median p90 max"
	echo "engine: submit_to_first_step_ms: $CMD  (target: median < 100)"
	echo "engine:   run.started (claim)_ms: $CLAIM"
	echo "engine:   workspace.ready (checkout)_ms: $READY"
	echo "engine:   step.started_ms: $STEP"
	echo "engine:   claim -> checkout_ms: $GAP_CO"
	echo "engine:   checkout -> step.started_ms: $GAP_RS"
	echo "engine:   step.started -> command_ms: $GAP_SC"
	echo "engine:   run created -> finished_ms: $RUNDUR"
	echo "engine: sandbox_start_ms (agrippactl sandbox run -- date, $SBX_N, $SBXFAIL failed): $SBX"
	[ "$SBXFAIL" -eq 0 ] || sed -n 's/^fail /engine:   sandbox run failed: status /p' "$T/sbx" | sort | uniq -c | sed 's/^ *\([0-9]*\) \(.*\)/\2 (x\1)/'
	echo "engine:   sandbox run whole (spawn -> agrippactl exit)_ms: $SBXALL"
	echo "engine: first_step : sandbox_start (medians): $RATIO"
}

if [ "$THR_N" -eq 0 ]; then
	print_latency
	stop_daemon
	exit 0
fi

# --- 2. throughput ------------------------------------------------------------------
# The poll: runs in 'running' every 50 ms until told to stop.
: >"$T/running"
(
	while [ ! -e "$T/thr.stop" ]; do
		psql_q "select count(*) from runs where status = 'running'" >>"$T/running" 2>/dev/null || true
		sleep 0.05
	done
) &
MONPID=$!
SUBMIT=$($HELPER throughput "$BASE" "$TOKEN" "$P1" two r "$THR_N" "$THR_THREADS" "$T/thr.ids") ||
	{ alive || died "the throughput submissions"; die "throughput submissions failed"; }
unfinished() { psql_q "select count(*) from runs where template_name = 'two' and finished_at is null"; }
i=0
while [ "$(unfinished)" != 0 ]; do
	alive || died "the throughput runs"
	i=$((i + 1))
	[ $i -lt 1800 ] || { echo "bench/engine: warning: $(unfinished) runs not finished after 180 s" >&2; break; }
	sleep 0.1
done
touch "$T/thr.stop"
wait "$MONPID" || true
MONPID=""
THR_DONE=$(psql_q "select count(*) from runs where template_name = 'two' and finished_at is not null")
THR_OK=$(psql_q "select count(*) from runs where template_name = 'two' and status = 'succeeded'")
LAST=$(psql_q "select extract(epoch from max(finished_at)) from runs where template_name = 'two'")
WALL=$(awk -v a="$(field "$SUBMIT" 1)" -v b="$LAST" 'BEGIN { printf "%.2f", b - a }')
SUBWALL=$(awk -v a="$(field "$SUBMIT" 1)" -v b="$(field "$SUBMIT" 2)" 'BEGIN { printf "%.2f", b - a }')
RPS=$(awk -v w="$WALL" -v n="$THR_DONE" 'BEGIN { printf "%.1f", n / w }')
PEAK=$(sort -n "$T/running" | tail -n 1)
POLLS=$(wc -l <"$T/running")
THRDUR=$(psql_q "select extract(epoch from finished_at - created_at) * 1000 from runs
	where template_name = 'two'" | stats)
THRWAIT=$(psql_q "select extract(epoch from started_at - created_at) * 1000 from runs
	where template_name = 'two'" | stats)
WARN=$(grep -c 'warn\|error\|fatal' "$LOG" || true)

# --- the figures ----------------------------------------------------------------------
print_latency
echo
echo "throughput, $THR_N two-command runs from $THR_THREADS threads, concurrency $CONCURRENCY"
echo "engine: throughput_wall_s (first submit -> last finished_at): $WALL  (submitting took $SUBWALL s)"
echo "engine: throughput_runs_per_s: $RPS"
echo "engine: throughput_succeeded: $THR_OK/$THR_N  (finished: $THR_DONE)"
echo "engine: throughput_peak_running: $PEAK  (limit $CONCURRENCY; $POLLS polls)"
echo "engine:   queued -> started_ms: $THRWAIT"
echo "engine:   created -> finished_ms: $THRDUR"
echo "engine: log lines with warn/error/fatal: $WARN"
[ "$THR_OK" -eq "$THR_N" ] || echo "bench/engine: warning: only $THR_OK of $THR_N runs succeeded" >&2
[ "$PEAK" -le "$CONCURRENCY" ] || echo "bench/engine: warning: $PEAK runs running at once, above $CONCURRENCY" >&2
stop_daemon
