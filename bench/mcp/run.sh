#!/bin/sh
# bench/mcp/run.sh [BUILD]: the MCP benchmark: what a stdio MCP server's
# sandbox costs its client, beside the TypeScript SDK's own client talking
# to the same server directly, in one run of this script.
#
# The server: @modelcontextprotocol/server-everything (pinned in
# tests/browser/package-lock.json) on the machine's Node (/usr/bin/node),
# registered with agrippactl mcp add, a credential in its environment
# (API_TOKEN) so that the relay's redaction is on the measured path.
# Ours: agrippactl mcp test against the real daemon (BUILD, default build:
# the hardened tree) on the embedded database: the supervisor builds the
# server's sandbox (namespaces, seccomp, cgroup, the sandbox user), whose
# first process (agrippa-sandbox mcp) starts the server on pipes and relays
# its lines, every credential value masked; the client is agrippa-mcpc, the
# runner's own MCP client code (runner/mcp.c), on the other end of the
# channel.  The sandbox has the daemon's default limits (sandbox.cpu: one
# CPU's worth per 100 ms for the server and its relay together), as a run's
# would.  The peer: bench/mcp/sdk.mjs, @modelcontextprotocol/sdk's Client
# and StdioClientTransport, the server its child on two pipes, unlimited.
# On a loaded machine the figures spread (the load average is printed before
# and after): ours has one process more on the path, the relay, to schedule.
#
# The figures, each beside its peer:
#   round trip  BENCH_MCP_CALLS (default 1,000) calls of the server's echo
#               tool one after the other on one connection, each from the
#               client's call to its result (ours timed by agrippa-mcpc,
#               mcp test -c echo -n N; the SDK's around callTool); the
#               median of each round, BENCH_N (default 3) rounds, who goes
#               first alternating; target: the median of our rounds'
#               medians <= 1.2x the SDK's.  Beside both, what the sandbox
#               itself costs: the same agrippa-mcpc on the server's stdio
#               with no sandbox between (bench/mcp/direct.py), in the same
#               rounds.
#   start-up    BENCH_MCP_STARTS (default 10) times: from nothing running
#               to a listed tool set, ours the wall time of agrippactl mcp
#               test (the control socket, the database, the sandbox, the
#               server's start, the handshake, tools/list), the SDK's from
#               its transport's creation to listTools' answer (the server's
#               start, the handshake, tools/list); medians, no target (the
#               issue asks for the figures); with ours split into the
#               client's own part (agrippa-mcpc's start to its listing) and
#               the rest.
#
# Tunables (environment): BENCH_N, BENCH_MCP_CALLS, BENCH_MCP_STARTS,
# KEEP (keep the directory).  Needs root, node and tests/browser's npm
# packages (make deps), python3.  bench/run.sh runs it unless BENCH_MCP=0;
# alone:
#   make && sh bench/mcp/run.sh build
set -eu
BUILD=${1:-${BUILD:-build}}
ROOT=$(pwd)
export BUILD ROOT
N=${BENCH_N:-3}
CALLS=${BENCH_MCP_CALLS:-1000}
STARTS=${BENCH_MCP_STARTS:-10}
BENCH=bench/mcp
START=$(date +%s)
. "$ROOT/bench/lib/bigrepo.sh"
bench_preflight node python3 curl
for v in "$N" "$CALLS" "$STARTS"; do
	case "$v" in '' | *[!0-9]*) die "BENCH_N, BENCH_MCP_CALLS and BENCH_MCP_STARTS are counts" ;; esac
done
[ "$N" -ge 1 ] && [ "$CALLS" -ge 1 ] && [ "$CALLS" -le 10000 ] && [ "$STARTS" -ge 1 ] ||
	die "BENCH_N and BENCH_MCP_STARTS are at least 1, BENCH_MCP_CALLS 1 to 10000"
for exe in agrippa-sandbox agrippa-mcpc agrippactl; do
	[ -x "$ROOT/$BUILD/$exe" ] || die "no $BUILD/$exe (make first)"
done
NM=$ROOT/tests/browser/node_modules
SE=$NM/@modelcontextprotocol/server-everything/dist/index.js
[ -f "$SE" ] && [ -f "$NM/@modelcontextprotocol/sdk/package.json" ] ||
	die "tests/browser's npm packages are not installed (make deps)"
NODE=/usr/bin/node # the sandbox binds /usr: the server's node must be there
[ -x "$NODE" ] || die "no $NODE (the sandbox runs the host's /usr/bin/node)"
SDKV=$(sed -n 's/^ *"version": "\(.*\)".*/\1/p' "$NM/@modelcontextprotocol/sdk/package.json" | head -n 1)
SEV=$(sed -n 's/^ *"version": "\(.*\)".*/\1/p' "$NM/@modelcontextprotocol/server-everything/package.json" | head -n 1)

sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
trap cleanup_env EXIT
trap 'exit 1' INT TERM HUP
"$AGRIPPAD" -d -f "$CONF" >>"$LOG" 2>&1 &
SUP_PID=$!
up() { alive || { cat "$LOG" >&2; die "the daemon did not start"; }; [ "$(healthz_code)" = 200 ]; }
wait_for 60 up || { cat "$LOG" >&2; die "the daemon did not start"; }

RND=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
API_TOKEN="bench_${RND}_x"
export API_TOKEN # the peer's server gets it too
printf '{"transport":"stdio","command":["%s","%s","stdio"],"paths":["%s"],"env":{"API_TOKEN":"${credentials.token}"},"startup_timeout":60}\n' \
	"$NODE" "$SE" "$NM" >"$T/everything.json"
printf '{"token":"%s"}' "$API_TOKEN" | "$AGRIPPACTL" -s "$CTL" mcp add everything "$T/everything.json" >"$T/add.out" 2>&1 ||
	die "mcp add: $(cat "$T/add.out")"
MSG="bench-mcp"

# ours CALLS: one mcp test -c echo -n CALLS; "median min p90 p99 max" (us)
ours_calls() {
	"$AGRIPPACTL" -s "$CTL" -j mcp test -c echo -a "{\"message\":\"$MSG\"}" -n "$1" everything >"$T/ours.json" 2>&1 ||
		die "mcp test -c echo: $(cat "$T/ours.json")"
	python3 - "$T/ours.json" "$1" "Echo: $MSG" <<'PY' || die "mcp test -c echo: a wrong answer: $(cat "$T/ours.json")"
import json, sys
d = json.load(open(sys.argv[1]))["data"]
c = d["call"]
assert c["count"] == int(sys.argv[2]) and c["errors"] == 0 and c["text"] == sys.argv[3], c
u = c["us"]
print(u["median"], u["min"], u["p90"], u["p99"], u["max"])
PY
}
# direct CALLS: our client on the server's stdio, no sandbox
direct_calls() {
	python3 bench/mcp/direct.py "$ROOT/$BUILD/agrippa-mcpc" "$NODE" "$SE" "$1" "$MSG" >"$T/direct.json" 2>&1 ||
		die "our client without the sandbox: $(cat "$T/direct.json")"
	python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["call"]; assert c["errors"] == 0, c; u = c["us"]; print(u["median"], u["min"], u["p90"], u["p99"], u["max"])' "$T/direct.json"
}
# peer CALLS: the same from the SDK's client
peer_calls() {
	node bench/mcp/sdk.mjs call "$NODE" "$SE" "$1" "$MSG" >"$T/peer.json" 2>&1 ||
		die "the SDK's calls: $(cat "$T/peer.json")"
	python3 -c 'import json,sys; u = json.load(open(sys.argv[1]))["us"]; print(u["median"], u["min"], u["p90"], u["p99"], u["max"])' "$T/peer.json"
}
# ours_start: "wall_us client_listed_us tools" of one mcp test
ours_start() {
	t0=$(date +%s%N)
	"$AGRIPPACTL" -s "$CTL" -j mcp test everything >"$T/start.json" 2>&1 || die "mcp test: $(cat "$T/start.json")"
	t1=$(date +%s%N)
	python3 -c 'import json,sys; d = json.load(open(sys.argv[1]))["data"]; print((int(sys.argv[3]) - int(sys.argv[2])) // 1000, d["listed_us"], d["listed"])' \
		"$T/start.json" "$t0" "$t1"
}

echo "bench/mcp: $(nproc) cores, $BUILD ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), node $("$NODE" --version)," \
	"server-everything $SEV, @modelcontextprotocol/sdk $SDKV; $N rounds of $CALLS echo calls, $STARTS start-ups each;" \
	"load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# a first start of each, not counted: the page cache and the daemon's warm state
ours_start >/dev/null
node bench/mcp/sdk.mjs start "$NODE" "$SE" 1 >/dev/null 2>&1 || die "the SDK's client cannot start the server"
: >"$T/ours.calls"
: >"$T/peer.calls"
: >"$T/direct.calls"
i=1
while [ "$i" -le "$N" ]; do
	if [ $((i % 2)) = 1 ]; then
		peer_calls "$CALLS" >>"$T/peer.calls"
		ours_calls "$CALLS" >>"$T/ours.calls"
		direct_calls "$CALLS" >>"$T/direct.calls"
	else
		direct_calls "$CALLS" >>"$T/direct.calls"
		ours_calls "$CALLS" >>"$T/ours.calls"
		peer_calls "$CALLS" >>"$T/peer.calls"
	fi
	echo "bench/mcp: round $i: echo median ours $(tail -n 1 "$T/ours.calls" | cut -d' ' -f1) us," \
		"SDK $(tail -n 1 "$T/peer.calls" | cut -d' ' -f1) us," \
		"our client without the sandbox $(tail -n 1 "$T/direct.calls" | cut -d' ' -f1) us"
	i=$((i + 1))
done
: >"$T/ours.start"
: >"$T/peer.start"
i=1
while [ "$i" -le "$STARTS" ]; do
	if [ $((i % 2)) = 1 ]; then
		node bench/mcp/sdk.mjs start "$NODE" "$SE" 1 >"$T/peer1.json" 2>&1 || die "the SDK's start-up: $(cat "$T/peer1.json")"
		ours_start >>"$T/ours.start"
	else
		ours_start >>"$T/ours.start"
		node bench/mcp/sdk.mjs start "$NODE" "$SE" 1 >"$T/peer1.json" 2>&1 || die "the SDK's start-up: $(cat "$T/peer1.json")"
	fi
	python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["us"]["median"], d["tools"])' "$T/peer1.json" >>"$T/peer.start"
	i=$((i + 1))
done
alive || died "the benchmark"

# --- the figures ---------------------------------------------------------------------------
fld() { echo "$1" | cut -d' ' -f"$2"; }
ms() { awk -v v="$1" 'BEGIN { printf "%.3f", v / 1000 }'; }
rc=$(bench_stats 1 "$T/ours.calls")
pc=$(bench_stats 1 "$T/peer.calls")
dc=$(bench_stats 1 "$T/direct.calls")
rs=$(bench_stats 1 "$T/ours.start")
rl=$(bench_stats 2 "$T/ours.start")
ps=$(bench_stats 1 "$T/peer.start")
cv=$(awk -v a="$(fld "$rc" 1)" -v b="$(fld "$pc" 1)" 'BEGIN { r = a / b; printf "%.2f %s\n", r, (r <= 1.2) ? "PASS" : "FAIL" }')
sv=$(awk -v a="$(fld "$rs" 1)" -v b="$(fld "$ps" 1)" 'BEGIN { printf "%.2f\n", a / b }')
row() { printf '%-34s %14s %22s %8s %8s  %s\n' "$1" "$2" "$3" "$4" "$5" "$6"; }
echo
echo "mcp: medians (ours: agrippa-mcpc -> the server's sandbox and its relay -> server-everything;" \
	"peer: the TypeScript SDK's client on the server's own stdio)"
row case ours peer ratio target verdict
row "echo round trip, $CALLS calls x $N" "$(ms "$(fld "$rc" 1)") ms" "$(ms "$(fld "$pc" 1)") ms (SDK)" "$(fld "$cv" 1)x" "<= 1.2x" "$(fld "$cv" 2)"
row "echo, the sandbox's own cost" "$(ms "$(fld "$rc" 1)") ms" "$(ms "$(fld "$dc" 1)") ms (no sandbox)" \
	"$(awk -v a="$(fld "$rc" 1)" -v b="$(fld "$dc" 1)" 'BEGIN { printf "%.2f", a / b }')x" "-" "info"
row "start-up to a listed tool set" "$(ms "$(fld "$rs" 1)") ms" "$(ms "$(fld "$ps" 1)") ms (SDK)" "${sv}x" "-" "info"
echo
# pcts LABEL FILE: each round's "median min p90 p99 max"
pcts() {
	awk -v l="$1" '{ printf "mcp: %-24s round %d: median %.3f, min %.3f, p90 %.3f, p99 %.3f, max %.3f ms\n", l, NR, $1 / 1000, $2 / 1000, $3 / 1000, $4 / 1000, $5 / 1000 }' "$2"
}
pcts "echo, ours" "$T/ours.calls"
pcts "echo, SDK" "$T/peer.calls"
pcts "echo, ours, no sandbox" "$T/direct.calls"
echo "mcp: echo: the medians' difference, ours less the SDK's $(awk -v a="$(fld "$rc" 1)" -v b="$(fld "$pc" 1)" 'BEGIN { printf "%+.1f", a - b }') us" \
	"per call; the sandbox's (the relay's hop, its redaction, the seccomp filter, the cgroup)" \
	"$(awk -v a="$(fld "$rc" 1)" -v b="$(fld "$dc" 1)" 'BEGIN { printf "%+.1f", a - b }') us"
# the fastest call of each: what a loaded machine adds least to
mins() { awk '{ print $2 }' "$1" | sort -g | head -n 1; }
echo "mcp: echo: the fastest call, ours $(ms "$(mins "$T/ours.calls")") ms, SDK $(ms "$(mins "$T/peer.calls")") ms," \
	"ours without the sandbox $(ms "$(mins "$T/direct.calls")") ms"
echo "mcp: start-up, ours: median $(ms "$(fld "$rs" 1)") ms, min-max $(ms "$(fld "$rs" 2)")-$(ms "$(fld "$rs" 3)") ms;" \
	"of it the client's own, from its start to the listing: median $(ms "$(fld "$rl" 1)") ms (the rest: agrippactl, the" \
	"control socket, the database, the sandbox's construction, the client's start)"
echo "mcp: start-up, SDK: median $(ms "$(fld "$ps" 1)") ms, min-max $(ms "$(fld "$ps" 2)")-$(ms "$(fld "$ps" 3)") ms;" \
	"tools listed: ours $(tail -n 1 "$T/ours.start" | cut -d' ' -f3), SDK $(tail -n 1 "$T/peer.start" | cut -d' ' -f2)"
echo "mcp: daemon log lines with warn/error/fatal: $(grep -c -i 'warn\|error\|fatal' "$LOG" || true)"
echo "mcp: load average after: $(cut -d' ' -f1-3 /proc/loadavg); the benchmark took $(($(date +%s) - START)) s"
stop_daemon
