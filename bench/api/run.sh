#!/bin/sh
# bench/api/run.sh [BUILD]: the HTTP API benchmark.  Starts its own daemon
# (BUILD, default build: the optimized tree) on the embedded database in a
# temporary state directory and prints figures, never pass/fail:
#   1. wrk on loopback: authenticated GET /v1/runs/{id} beside GET /healthz
#      (one database round trip, no authentication): requests/s and p99;
#   2. resident memory of httpd with 0 and with SSE_N (10,000) idle SSE
#      clients on one run (bench/api/sse_fanout.c holds the streams);
#   3. delay from append (clock_timestamp in the event's payload) to
#      delivery with DELAY_N (1,000) streams on the run, TICKS (200) events
#      appended one per transaction ~20 ms apart: p50/p99/max over all
#      (client, event) pairs.
# Each figure is the median of RUNS (3) runs.  Needs root and wrk.
# Tunables (environment): RUNS, WRK_D (seconds, 10), WRK_C (64), SSE_N,
# DELAY_N, TICKS.
set -eu
BUILD=${1:-build}
ROOT=$(pwd)
export BUILD ROOT
RUNS=${RUNS:-3}
WRK_D=${WRK_D:-10}
WRK_C=${WRK_C:-64}
SSE_N=${SSE_N:-10000}
DELAY_N=${DELAY_N:-1000}
TICKS=${TICKS:-200}
[ "$(id -u)" -eq 0 ] || { echo "bench/api: run as root" >&2; exit 1; }
command -v wrk >/dev/null 2>&1 || { echo "bench/api: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$ROOT/$BUILD/agrippad" ] || { echo "bench/api: no $BUILD/agrippad (make first)" >&2; exit 1; }
# Descriptors: httpd sets its own limit to 65536 clamped to the hard limit
# it inherits from us, and the SSE client needs one per stream.
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -H -n)"
NOFILE=$(ulimit -n)
if [ "$NOFILE" -lt $((SSE_N + 200)) ]; then
	echo "bench/api: RLIMIT_NOFILE $NOFILE is too low for $SSE_N streams; using $((NOFILE - 200))" >&2
	SSE_N=$((NOFILE - 200))
fi
sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
# runs stay as the API leaves them: this host executes none
echo "engine: { concurrency: 0 }" >>"$CONF"
# one token makes every request: the per-user limit (api.user_rate) would
# answer most of them 429; what is measured is the API's own cost
echo "api: { user_rate: 0 }" >>"$CONF"
FANPID=""
bench_cleanup() {
	if [ -n "$FANPID" ]; then kill -KILL "$FANPID" 2>/dev/null || true; fi
	cleanup_env
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP
die() {
	echo "bench/api: $*" >&2
	exit 1
}

cc -O2 -o "$T/sse_fanout" bench/api/sse_fanout.c || die "cannot build bench/api/sse_fanout.c"
start_daemon || {
	cat "$LOG"
	die "daemon did not start"
}

# --- set-up: alice, her token, p1 (alice admin), run-tests, a repo, one run --------
ctl() { "$AGRIPPACTL" -s "$CTL" "$@" >"$T/ctl.out" 2>&1 || die "agrippactl $*: $(cat "$T/ctl.out")"; }
ctl user add alice
ctl token create alice
TOKEN=$(tail -n 1 "$T/ctl.out")
ctl project add p1
ctl member add p1 alice admin
ctl template load templates/run-tests.yaml
"$AGRIPPACTL" -s "$CTL" repo add p1 myrepo /tmp/x </dev/null >"$T/ctl.out" 2>&1 ||
	die "agrippactl repo add: $(cat "$T/ctl.out")"
P1=$(psql_q "select id from projects where name = 'p1'")
AUTH="Authorization: Bearer $TOKEN"
BASE="http://127.0.0.1:$PORT"
code=$(curl -s -o "$T/submit.json" -w '%{http_code}' --max-time 10 -X POST -H "$AUTH" \
	-H 'Content-Type: application/json' -d '{"template":"run-tests","params":{"repo":"myrepo"}}' \
	"$BASE/v1/projects/$P1/runs")
[ "$code" = 201 ] || die "submit: $code $(cat "$T/submit.json")"
RUN=$(psql_q "select id from runs where project_id = '$P1'")
grep -q "\"$RUN\"" "$T/submit.json" || die "submit: the run id is not in $(cat "$T/submit.json")"
[ "$(psql_q "select transition_run('$RUN', 'queued', 'running')")" = t ] || die "transition_run failed"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H "$AUTH" "$BASE/v1/runs/$RUN")
[ "$code" = 200 ] || die "GET /v1/runs/$RUN: $code"
HTTPD=$(child_pid httpd) || die "no httpd process"
last_seq() { psql_q "select next_event_seq - 1 from runs where id = '$RUN'"; }

# median: the middle line of the numbers on stdin (the lower middle when even).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
rss() { status_field "$HTTPD" VmRSS | awk '{ print $1 }'; }
pss() { awk '/^Pss:/ { print $2 }' "/proc/$HTTPD/smaps_rollup"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

echo "bench/api: $(nproc) cores, $BUILD, httpd pid $HTTPD, RLIMIT_NOFILE $NOFILE," \
	"run $RUN, $RUNS runs per figure (median)"

# fan_start OUT ARGS...: the SSE client in the background, until "ready".
fan_start() {
	out=$1
	shift
	"$T/sse_fanout" "$PORT" "$@" >"$out" 2>"$out.err" &
	FANPID=$!
	while ! grep -q '^ready ' "$out"; do
		kill -0 "$FANPID" 2>/dev/null || {
			wait "$FANPID" || true
			FANPID=""
			die "sse_fanout failed: $(cat "$out.err")"
		}
		sleep 0.1
	done
}

# --- 2. SSE memory (first, on a fresh httpd) --------------------------------------
# Per round: httpd's VmRSS before, with SSE_N streams open and answered
# (Pss too), and after they closed; and the client's connect time.
R0=$(rss)
P0=$(pss)
NEED=$(last_seq)
: >"$T/mem"
i=1
while [ $i -le "$RUNS" ]; do
	before=$(rss)
	fan_start "$T/fan.out" "/v1/runs/$RUN/events/stream" "$TOKEN" "$SSE_N" "$NEED" 0 60
	sleep 1 # what is in flight settles
	[ -d "/proc/$HTTPD" ] || die "httpd is gone"
	with="$(rss) $(pss)"
	kill -TERM "$FANPID"
	wait "$FANPID" || true
	FANPID=""
	sleep 2 # httpd sees the streams close
	echo "$before $with $(rss) $(awk '{ print $3 }' "$T/fan.out")" >>"$T/mem"
	i=$((i + 1))
done
R1=$(awk 'NR == 1 { print $2 }' "$T/mem")
P1SS=$(awk 'NR == 1 { print $3 }' "$T/mem")
KEPT=$(awk '{ print $4 - $1 }' "$T/mem" | median)
CONNECT=$(awk '{ print $5 }' "$T/mem" | median)

# --- 1. wrk: GET /v1/runs/{id} and GET /healthz -----------------------------------
# wrk_one OUT URL [HEADER]: one wrk run; prints "req/s p99_ms non2xx".
wrk_one() {
	out=$1 url=$2
	shift 2
	if [ $# -gt 0 ]; then
		wrk -t2 -c"$WRK_C" -d"${WRK_D}s" --latency -H "$1" "$url" >"$out" 2>&1
	else
		wrk -t2 -c"$WRK_C" -d"${WRK_D}s" --latency "$url" >"$out" 2>&1
	fi || die "wrk failed: $(cat "$out")"
	awk '
		function ms(v) {
			if (v ~ /us$/) return v * 0.001
			if (v ~ /ms$/) return v + 0
			if (v ~ /m$/) return v * 60000
			if (v ~ /s$/) return v * 1000
			return v
		}
		$1 == "99%" && p99 == "" { p99 = ms($2) }
		/^Requests\/sec:/ { rps = $2 }
		/Non-2xx or 3xx responses:/ { bad = $NF }
		/Socket errors:/ { err = $0 }
		END { printf "%s %.2f %d\n", rps, p99, bad + 0 }' "$out"
}
: >"$T/wrk.runs"
: >"$T/wrk.health"
i=1
while [ $i -le "$RUNS" ]; do
	wrk_one "$T/wrk.out" "$BASE/v1/runs/$RUN" "$AUTH" >>"$T/wrk.runs"
	wrk_one "$T/wrk.out" "$BASE/healthz" >>"$T/wrk.health"
	i=$((i + 1))
done
for f in runs health; do
	bad=$(awk '{ s += $3 } END { print s + 0 }' "$T/wrk.$f")
	[ "$bad" -eq 0 ] || echo "bench/api: warning: $bad non-2xx responses in the $f runs" >&2
done
RPS_RUN=$(awk '{ print $1 }' "$T/wrk.runs" | median)
P99_RUN=$(awk '{ print $2 }' "$T/wrk.runs" | median)
RPS_HZ=$(awk '{ print $1 }' "$T/wrk.health" | median)
P99_HZ=$(awk '{ print $2 }' "$T/wrk.health" | median)

# --- 3. delivery delay with DELAY_N streams ----------------------------------------
{
	n=0
	while [ $n -lt "$TICKS" ]; do
		echo "select append_run_event('$RUN', 'bench.tick', jsonb_build_object('t', extract(epoch from clock_timestamp())));"
		echo "select pg_sleep(0.02);"
		n=$((n + 1))
	done
} >"$T/ticks.sql"
: >"$T/delay"
i=1
while [ $i -le "$RUNS" ]; do
	# ?after=: only the events of this run are delivered (no replay).
	fan_start "$T/fan.out" "/v1/runs/$RUN/events/stream?after=$(last_seq)" "$TOKEN" "$DELAY_N" 0 "$TICKS" 45
	PGPASSWORD=$(cat "$T/state/db.password") psql -X -q -o /dev/null -v ON_ERROR_STOP=1 \
		-h "$T/state/pgrun" -U agrippa agrippa -f "$T/ticks.sql" || die "appending events failed"
	wait "$FANPID" || die "sse_fanout: $(cat "$T/fan.out.err")"
	FANPID=""
	line=$(grep '^delay ' "$T/fan.out") || die "sse_fanout: no result: $(cat "$T/fan.out.err")"
	echo "$line" | cut -d' ' -f2- >>"$T/delay"
	[ ! -s "$T/fan.out.err" ] || sed 's/^/  /' "$T/fan.out.err" >&2
	i=$((i + 1))
done
D50=$(awk '{ print $2 }' "$T/delay" | median)
D99=$(awk '{ print $3 }' "$T/delay" | median)
DMAX=$(awk '{ print $4 }' "$T/delay" | median)
DMISS=$(awk '{ s += $5 } END { print s + 0 }' "$T/delay")
DCPU=$(awk '{ print $6 }' "$T/delay" | median)
R3=$(rss)

# --- the table ---------------------------------------------------------------------
echo
printf 'wrk -t2 -c%s -d%ss, loopback (median of %s)   req/s      p99 ms\n' "$WRK_C" "$WRK_D" "$RUNS"
printf '  GET /v1/runs/{id} (bearer token)        %10.0f  %10.2f\n' "$RPS_RUN" "$P99_RUN"
printf '  GET /healthz (no authentication)        %10.0f  %10.2f\n' "$RPS_HZ" "$P99_HZ"
awk -v a="$RPS_RUN" -v b="$RPS_HZ" 'BEGIN { printf "  /v1/runs/{id} : /healthz                 %10.2f\n", a / b }'
printf '  runs (req/s p99_ms non2xx):  %s\n' "$(tr '\n' ';' <"$T/wrk.runs")"
printf '  healthz (req/s p99_ms non2xx): %s\n' "$(tr '\n' ';' <"$T/wrk.health")"
echo
echo "httpd memory, idle SSE clients on one run              VmRSS            Pss"
printf '  0 clients (fresh httpd)                  %8s kB %6s MiB %8s kB\n' "$R0" "$(mib "$R0")" "$P0"
printf '  %s clients (first round)              %8s kB %6s MiB %8s kB\n' "$SSE_N" "$R1" "$(mib "$R1")" "$P1SS"
per() { awk -v k="$1" -v n="$SSE_N" 'BEGIN { printf "%.0f", k * 1024 / n }'; }
printf '  growth with %s clients (first round)  %8s kB  (%s bytes/client)\n' \
	"$SSE_N" "$((R1 - R0))" "$(per $((R1 - R0)))"
printf '  kept after they all closed               %8s kB  (%s bytes/client, median of %s rounds)\n' \
	"$KEPT" "$(per "$KEPT")" "$RUNS"
printf '  %s streams opened and answered in %s s (median)\n' "$SSE_N" "$CONNECT"
printf '  rounds (rss_before rss_with pss_with rss_after connect_s): %s\n' "$(tr '\n' ';' <"$T/mem")"
echo
echo "delay append -> delivery, $DELAY_N streams, $TICKS events ~20 ms apart (median of $RUNS)"
printf '  p50 %s ms   p99 %s ms   max %s ms   undelivered %s   client CPU %s%%\n' \
	"$D50" "$D99" "$DMAX" "$DMISS" "$DCPU"
printf '  runs (n p50 p99 max missing cpu%%): %s\n' "$(tr '\n' ';' <"$T/delay")"
printf '  httpd VmRSS afterwards: %s kB\n' "$R3"
stop_daemon
