#!/bin/sh
# bench/agent/run.sh [BUILD]: the agent-step benchmark.  Starts its own
# daemon (BUILD, from the argument or the environment, default build: the
# optimized tree) on the embedded database in a temporary state directory,
# and the fake model provider (tests/fakes/fake_model.py, through
# bench/agent/fake_timed.py, which adds a stopwatch and changes nothing it
# answers) on loopback, answering at once.  It prints figures ("agent:
# NAME: VALUE"), never pass/fail:
#   1. memory: one run of an agent step of MEM_TURNS (200) turns (MEM_TURNS-1
#      answers each calling read_file on a 6-byte file, then a text answer).
#      /proc is read every 20 ms while it runs; the largest VmHWM (peak
#      RSS) and VmRSS seen, in KiB, of the runner ("agrippad -P runner"),
#      the proxy ("agrippad -P proxy") and every agrippa-sandbox process of
#      the daemon.  The runner's and the sandbox's lives are the run's; the
#      proxy's VmHWM covers its whole life (start-up, a 20-turn warm-up run,
#      this run), so its resident size before the run is printed beside it.
#   2. per turn: PASSES (2) runs of one agent step of TURNS (1000, the most
#      max_turns allows) turns, TURNS-1 read_file calls then a text answer.
#      A turn k is the time from the fake's reply k (its last byte written)
#      to the arrival of request k+1: the proxy reading and relaying the
#      answer, the runner storing it, the read_file call through the
#      sandbox, storing its result, and the next request (the whole
#      conversation) built and sent.  Median, p90 and max over the TURNS-1
#      turns of each pass; beside it the end-to-end time per turn (request
#      k -> request k+1, nothing subtracted), the fake's own time per
#      request, the same arithmetic on the fake's own log (whose "time" has
#      1 ms resolution and whose "ms" stops before its log write and its
#      reply), and the median by tenths of the step (the conversation
#      grows by two messages a turn).  Beside them, per model call: write
#      transactions (xids assigned) and WAL bytes of the database, and the
#      CPU each process used (from /proc, in 10 ms ticks over the run: the
#      runner and the sandbox counted when the supervisor reaps them).
#   3. the fake's own cost seen by a client with no overhead: the request
#      bodies of the last pass replayed to a second fake from python
#      (REPLAY_N, default all; REPLAY=0 skips it).
# Needs root and python3.  Tunables (environment): TURNS, MEM_TURNS, PASSES,
# REPLAY, REPLAY_N, STREAM (true: streamed answers, the default),
# VERBOSE (the daemon's -v flags, default none), KEEP (keep the directory).
set -eu
BUILD=${1:-${BUILD:-build}}
ROOT=$(pwd)
export BUILD ROOT
TURNS=${TURNS:-1000}
MEM_TURNS=${MEM_TURNS:-200}
PASSES=${PASSES:-2}
REPLAY=${REPLAY:-1}
REPLAY_N=${REPLAY_N:-$TURNS}
STREAM=${STREAM:-true}
VERBOSE=${VERBOSE:-}
WARM_TURNS=20
[ "$(id -u)" -eq 0 ] || { echo "bench/agent: run as root" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "bench/agent: python3 is not installed" >&2; exit 1; }
[ -x "$ROOT/$BUILD/agrippad" ] || { echo "bench/agent: no $BUILD/agrippad (make first)" >&2; exit 1; }
[ -x "$ROOT/$BUILD/tests/tools/mkrepo" ] ||
	{ echo "bench/agent: no $BUILD/tests/tools/mkrepo (make BUILD=$BUILD tests)" >&2; exit 1; }
[ "$TURNS" -ge 2 ] && [ "$TURNS" -le 1000 ] && [ "$MEM_TURNS" -ge 2 ] && [ "$MEM_TURNS" -le 1000 ] ||
	{ echo "bench/agent: TURNS and MEM_TURNS are 2 to 1000 (max_turns)" >&2; exit 1; }
sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
FAKE_PID=""
FAKE2_PID=""
bench_cleanup() {
	for p in $FAKE_PID $FAKE2_PID; do kill -TERM "$p" 2>/dev/null || true; done
	cleanup_env
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP
die() {
	echo "bench/agent: $*" >&2
	exit 1
}
HELPER="python3 $ROOT/bench/agent/agent.py"
START=$(date +%s)

# --- the fake provider ------------------------------------------------------------------
# fake PORTFILE LOG: starts one, its pid in FAKE_STARTED
fake() {
	python3 "$ROOT/bench/agent/fake_timed.py" --port-file "$1" --log "$2" 2>>"$T/fake.err" &
	FAKE_STARTED=$!
	wait_for 10 test -s "$1" || die "the fake provider did not start: $(cat "$T/fake.err")"
}
fake "$T/fake.port" "$T/fake.log"
FAKE_PID=$FAKE_STARTED
FAKE="http://127.0.0.1:$(cat "$T/fake.port")"

mkdir -p "$T/keys"
chmod 0700 "$T/keys"
printf 'sk-ant-bench-%s\n' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$T/keys/provider.key"
chmod 0600 "$T/keys/provider.key"
# retries: 0, so that a failed call fails the run instead of hiding in a figure
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 30, sweep: 5 }
providers:
  - name: fake
    kind: anthropic
    base_url: "$FAKE/"
    key_file: $T/keys/provider.key
    timeout: 60
    retries: 0
    stream: $STREAM
    models:
      - { name: fake-model, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }
agent: { provider: fake, model: fake-model, max_tokens: 1000 }
EOC

# lib.sh's start_daemon runs -vvvv; a benchmark runs the daemon as it is
# deployed, its verbosity chosen by VERBOSE.
"$AGRIPPAD" -d $VERBOSE -f "$CONF" >>"$LOG" 2>&1 &
SUP_PID=$!
i=0
until [ "$(healthz_code)" = 200 ]; do
	i=$((i + 1))
	if [ $i -gt 600 ] || ! kill -0 "$SUP_PID" 2>/dev/null; then
		cat "$LOG"
		die "daemon did not start"
	fi
	sleep 0.1
done
alive() { kill -0 "$SUP_PID" 2>/dev/null; }
died() {
	echo "bench/agent: the daemon (supervisor pid $SUP_PID) died during $1; the end of $LOG:" >&2
	tail -n 25 "$LOG" >&2
	exit 1
}

# --- set-up: a repository, templates, alice, her token, p1 --------------------------
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
"$TOOLS/mkrepo" "$T/repos/r" >/dev/null || die "mkrepo failed"
chmod -R a+rX "$T/repos"
# tmpl NAME MAX_TURNS: one phase, one agent step (read-write: every tool offered)
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n  - name: one\n    steps:\n'
		printf '      - { id: think, kind: agent, prompt: "Read README.md until told to stop.", max_turns: %s }\n' "$2"
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml" || die "template $1"
}
tmpl warm "$WARM_TURNS"
tmpl mem "$MEM_TURNS"
tmpl turns "$TURNS"
ctl user add alice || die "user add"
TOKEN=$(new_token alice) || die "token create"
ctl project add p1 || die "project add"
ctl member add p1 alice admin || die "member add"
ctl repo add p1 r "$T/repos/r" </dev/null || die "repo add"
P1=$(psql_q "select id from projects where name = 'p1'")
BASE="http://127.0.0.1:$PORT"
SBX_EXE="$ROOT/$BUILD/agrippa-sandbox"
PG_PID=$(head -n 1 "$T/state/pg/postmaster.pid") || die "no postmaster.pid"

# run_agent TEMPLATE N OUT [sample]: one run whose step takes N turns
run_agent() {
	$HELPER script "$FAKE" "$2" || die "script"
	: >"$T/fake.log"
	if [ "${4:-}" = sample ]; then
		$HELPER run "$BASE" "$TOKEN" "$P1" "$1" r "$3" "$SUP_PID" "$SBX_EXE" || { alive || died "a run of $1"; die "a run of $1 failed"; }
	else
		$HELPER run "$BASE" "$TOKEN" "$P1" "$1" r "$3" || { alive || died "a run of $1"; die "a run of $1 failed"; }
	fi
	R_ID=$(cut -d' ' -f1 "$3")
	R_STATUS=$(cut -d' ' -f2 "$3")
	R_WALL=$(cut -d' ' -f3 "$3")
	R_REQS=$(grep -c . "$T/fake.log" || true)
	[ "$R_STATUS" = succeeded ] ||
		echo "bench/agent: warning: run $R_ID ($1) $R_STATUS: $(psql_q "select coalesce(error, '') from run_steps where run_id = '$R_ID' order by attempt desc limit 1")" >&2
	[ "$R_REQS" -eq "$2" ] || echo "bench/agent: warning: $R_REQS requests reached the fake, not $2" >&2
}
# pgstat: "next_xid wal_bytes" (exact at once, unlike pg_stat_*, which
# backends flush up to seconds later)
pgstat() {
	psql_q "select txid_snapshot_xmax(txid_current_snapshot()) || ' ' || (pg_current_wal_lsn() - '0/0'::pg_lsn)"
}

PGSYNC=$(psql_q "select 'fsync ' || current_setting('fsync') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', ' || current_setting('wal_sync_method')")
PY=$(python3 -c 'import sys; print(sys.version.split()[0])')
echo "bench/agent: $(nproc) cores, $BUILD ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), stream: $STREAM," \
	"$PASSES passes of $TURNS turns, memory over $MEM_TURNS turns, python $PY"
echo "bench/agent: load average before: $(cut -d' ' -f1-3 /proc/loadavg); the database: $PGSYNC"

# --- warm-up: the first checkout, the proxy's first connection ------------------------
run_agent warm "$WARM_TURNS" "$T/warm.run"
rm -f "$T/warm.run.mem"
$HELPER turns "$FAKE" "$T/fake.log" "$T/warm.turns" || die "warm-up timings"

# --- 1. memory ----------------------------------------------------------------------------
PROXY_PID=$(child_pid proxy) || die "no proxy process"
PROXY_BEFORE=$(status_field "$PROXY_PID" VmRSS | awk '{ print $1 }')
PROXY_HWM_BEFORE=$(status_field "$PROXY_PID" VmHWM | awk '{ print $1 }')
run_agent mem "$MEM_TURNS" "$T/mem.run" sample
$HELPER turns "$FAKE" "$T/fake.log" "$T/mem.turns" || die "memory-run timings"
MEM_STATUS=$R_STATUS
MEM_WALL=$R_WALL
MEM_REQS=$R_REQS

# --- 2. per turn ----------------------------------------------------------------------------
i=1
while [ "$i" -le "$PASSES" ]; do
	S0=$(pgstat)
	$HELPER cpu "$SUP_PID" "$FAKE_PID" "$PG_PID" "$T/pass$i.cpu0"
	run_agent turns "$TURNS" "$T/pass$i.run"
	S1=$(pgstat)
	$HELPER cpu "$SUP_PID" "$FAKE_PID" "$PG_PID" "$T/pass$i.cpu1"
	$HELPER turns "$FAKE" "$T/fake.log" "$T/pass$i.turns" || die "pass $i timings"
	eval "P${i}_ID=\$R_ID P${i}_STATUS=\$R_STATUS P${i}_WALL=\$R_WALL P${i}_REQS=\$R_REQS P${i}_S0=\"\$S0\" P${i}_S1=\"\$S1\""
	i=$((i + 1))
done

# --- 3. the fake alone --------------------------------------------------------------------
if [ "$REPLAY" != 0 ]; then
	cp "$T/fake.log" "$T/replay.src"
	fake "$T/fake2.port" "$T/fake2.log"
	FAKE2_PID=$FAKE_STARTED
	$HELPER replay "$T/replay.src" "http://127.0.0.1:$(cat "$T/fake2.port")" "$REPLAY_N" "$T/replay.out" >"$T/replay.txt" ||
		echo "bench/agent: warning: the replay failed" >&2
fi

# --- the figures ----------------------------------------------------------------------------
echo
echo "memory, one run of $MEM_TURNS turns ($MEM_STATUS, $MEM_REQS requests, $MEM_WALL s submit -> end), KiB:"
awk -v pb="$PROXY_BEFORE" -v phb="$PROXY_HWM_BEFORE" '
	$1 == "runner" { r = r sprintf(" %s pid %s: VmHWM %d, VmRSS max %d", "", $2, $3, $4); nr++ }
	$1 == "proxy" { p = sprintf("pid %s: VmHWM %d, VmRSS max %d (before the run: VmRSS %d, VmHWM %d)", $2, $3, $4, pb, phb) }
	$1 == "sandbox" { ns++; sh += $3; sr += $4; if ($3 > mx) mx = $3; s = s sprintf(" %s:%d", $2, $3) }
	END {
		printf "agent: runner_peak_kib:%s%s\n", r, nr == 1 ? "" : sprintf("  (%d runner processes seen)", nr)
		printf "agent: proxy_peak_kib: %s\n", p
		printf "agent: sandbox_peak_kib: %d processes, VmHWM sum %d, largest %d, VmRSS max sum %d  (pid:VmHWM%s)\n", ns, sh, mx, sr, s
	}' "$T/mem.run.mem"
$HELPER figures "$T/mem.turns" "mem" | grep -e 'overhead_per_turn' -e 'end_to_end' | sed 's/^/  (memory run, sampled every 20 ms) /'

i=1
while [ "$i" -le "$PASSES" ]; do
	eval "ID=\$P${i}_ID STATUS=\$P${i}_STATUS WALL=\$P${i}_WALL REQS=\$P${i}_REQS S0=\$P${i}_S0 S1=\$P${i}_S1"
	echo
	echo "per turn, pass $i of $PASSES: one agent step of $TURNS turns ($STATUS, $REQS requests, $WALL s submit -> end), ms:"
	$HELPER figures "$T/pass$i.turns" "pass$i"
	echo "$S0 $S1" | awk -v n="$TURNS" -v p="agent[pass$i]" -v s="$PGSYNC" '{
		printf "%s:   database, all of the daemon during the run: %.2f write transactions (%s; the conversation commits without waiting for its WAL flush, the usage waits) and %.0f bytes of WAL per model call (%d, %d over the run)\n",
			p, ($3 - $1) / n, s, ($4 - $2) / n, $3 - $1, $4 - $2 }'
	$HELPER cpudiff "$T/pass$i.cpu0" "$T/pass$i.cpu1" "$TURNS" "pass$i"
	echo "agent[pass$i]:   rows: $(psql_q "select count(*) from agent_messages where run_id = '$ID'") agent_messages," \
		"$(psql_q "select count(*) from run_events where run_id = '$ID'") run_events," \
		"$(psql_q "select count(*) from token_usage where run_id = '$ID'") token_usage"
	i=$((i + 1))
done
if [ "$REPLAY" != 0 ] && [ -s "$T/replay.txt" ]; then
	echo
	cat "$T/replay.txt"
fi
echo
echo "agent: daemon log lines with warn/error/fatal: $(grep -c -i 'warn\|error\|fatal' "$LOG" || true)"
echo "agent: load average after: $(cut -d' ' -f1-3 /proc/loadavg); the benchmark took $(($(date +%s) - START)) s"
stop_daemon
