#!/bin/sh
# make bench: start the real daemon (hardened build) on the embedded database
# in a temporary state directory, then print
#   - idle resident memory of all our processes (sum of Pss from smaps_rollup)
#   - the named-op round trip beside a direct libpq round trip (bench/dbop.c)
# then runs bench/api, bench/metrics (GET /metrics on 10,000 runs),
# bench/engine, bench/agent, bench/checkout (the checkout benchmark: a
# generated repository of a real project's size, see its header;
# BENCH_CHECKOUT=0 skips it) and bench/pr (push + pull request
# of a one-file change on that repository; BENCH_PR=0 skips it) and
# bench/ui (the dashboard in chromium; BENCH_UI=0 skips it) and
# bench/egress (the egress proxy beside direct connections: throughput,
# a new tunnel's latency, memory with 1,000 idle tunnels; BENCH_EGRESS=0
# skips it) and bench/mcp (a stdio MCP server in its sandbox beside the
# TypeScript SDK's client on the server's stdio: a tool call's round trip,
# start-up; BENCH_MCP=0 skips it), each starting its own daemon.
set -eu
BUILD=${1:-build}
ROOT=$(pwd)
export BUILD ROOT
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root" >&2; exit 1; }
sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
trap cleanup_env EXIT
start_daemon || { echo "bench: daemon did not start"; cat "$LOG"; exit 1; }
sleep 3 # let start-up settle

pss() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
total=0
echo "idle Pss (kB):"
for p in $SUP_PID $(child_pid engine) $(child_pid httpd) $(child_pid proxy); do
	v=$(pss "$p")
	printf '  %-10s pid %-7s %6s kB\n' "$(tr '\0' ' ' </proc/$p/cmdline | awk '{print ($2=="-P")?$3:"supervisor"}')" "$p" "$v"
	total=$((total + v))
done
pgtotal=0
PM=$(head -1 "$T/state/pg/postmaster.pid")
for p in $PM $(pgrep -P "$PM" || true); do
	[ -r "/proc/$p/smaps_rollup" ] || continue
	pgtotal=$((pgtotal + $(pss "$p")))
done
echo "  agrippad processes together: $total kB"
echo "  embedded postgres (all its processes): $pgtotal kB"
echo
echo "named op round trip (N=${BENCH_N:-10000}):"
"$ROOT/$BUILD/bench/dbop" "$PORT" "$T/state/pgrun" "$T/state/db.password" "${BENCH_N:-10000}"
echo
echo "sandbox (N=${BENCH_N:-1000}):"
mkdir -p "$T/benchws"
chmod 0755 "$T/benchws"
command -v bwrap >/dev/null 2>&1 ||
	echo "  hint: bwrap is not installed (apt-get install bubblewrap); no comparison"
"$ROOT/$BUILD/bench/sandbox" "$CTL" "$T/benchws" "${BENCH_N:-1000}"
echo
# The tool server's memory while a command runs in its sandbox (its Pss:
# pages shared with other processes are split among them).
"$ROOT/$BUILD/agrippactl" -s "$CTL" sandbox run -- sleep 5 >/dev/null 2>&1 &
SBXRUN=$!
sleep 2
for d in /proc/[0-9]*; do
	[ "$(readlink "$d/exe" 2>/dev/null)" = "$ROOT/$BUILD/agrippa-sandbox" ] || continue
	echo "sandbox tool server (agrippa-sandbox) Pss while serving: $(pss "${d#/proc/}") kB"
done
wait "$SBXRUN" || true
stop_daemon
echo
echo "HTTP API:"
sh bench/api/run.sh "$BUILD"
echo
echo "metrics:"
sh bench/metrics/run.sh "$BUILD"
echo
echo "engine:"
sh bench/engine/run.sh "$BUILD"
echo
echo "agent steps:"
sh bench/agent/run.sh "$BUILD"
echo
echo "checkout:"
if [ "${BENCH_CHECKOUT:-1}" = 0 ]; then
	echo "checkout: skipped (BENCH_CHECKOUT=0)"
else
	sh bench/checkout/run.sh "$BUILD"
fi
echo
echo "pull request:"
if [ "${BENCH_PR:-1}" = 0 ]; then
	echo "pr: skipped (BENCH_PR=0)"
else
	sh bench/pr/run.sh "$BUILD"
fi
echo
echo "dashboard:"
if [ "${BENCH_UI:-1}" = 0 ]; then
	echo "ui: skipped (BENCH_UI=0)"
else
	sh bench/ui/run.sh "$BUILD"
fi
echo
echo "egress:"
if [ "${BENCH_EGRESS:-1}" = 0 ]; then
	echo "egress: skipped (BENCH_EGRESS=0)"
else
	sh bench/egress/run.sh "$BUILD"
fi
echo
echo "MCP servers:"
if [ "${BENCH_MCP:-1}" = 0 ]; then
	echo "mcp: skipped (BENCH_MCP=0)"
else
	sh bench/mcp/run.sh "$BUILD"
fi
