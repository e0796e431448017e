#!/bin/sh
# bench/egress/run.sh [BUILD]: the egress benchmark: what the proxy costs a
# sandbox's connections, beside the same connections made directly, in one
# run of this script.
#
# The network: the whole benchmark runs in a network and mount namespace
# of its own (it re-executes itself under unshare, as
# tests/integration/test_egress_proxy.sh does): the test server listens on
# 10.79.0.1 (a dummy interface in that namespace, or its loopback where the
# kernel has no dummy driver), the daemon's egress.allow_cidrs opens
# 10.79.0.0/24 and a hosts file bound over /etc/hosts in that mount
# namespace names it bench.test.  No traffic leaves the namespace.
#
# The server and the client: bench/egress/ebench.c, built static here, so
# that the very same program runs inside the sandbox (through the proxy, a
# CONNECT to bench.test) and outside it (the peer: straight to 10.79.0.1).
#
# The peer: a direct transfer cannot be made from inside the sandbox (it
# has no route out, by design), so the peer is the same client outside it
# under what the sandbox puts on its client: the sandbox's seccomp filter
# (bench/egress/sbxexec.c loads the very filter, privsep/seccomp_sandbox.c)
# and its CPU limit (a cgroup next to the sandbox's, with the sandbox's own
# quota copied: sandbox.cpu, 100% of one CPU by default).  Both legs talk
# over loopback (the sandbox's own lo; 10.79.0.1 is a local address of the
# bench's namespace, routed through its lo: no veth on either), with the
# namespace's default congestion control on the server's side.  The same
# client bare (no filter, no quota) is measured too and shown beside it, so
# that what the filter and the quota cost is a figure, not a guess.
# The daemon: the real one (BUILD, default build: the hardened tree) on the
# embedded database, one run of a template allowing bench.test:9000-9002;
# its command step runs bench/egress/sandbox.sh in a real sandbox, sample
# by sample in step with this script (files in the run's workspace), the
# peer and the proxy taking turns, who goes first alternating.
#
# The figures, each beside its peer:
#   throughput  one transfer of BENCH_EGRESS_BYTES (default 1 GiB) per
#               sample, request to last byte, in MB/s; target: the proxy's
#               median >= 0.8x the peer's median.  Beside it the CPU
#               seconds per GiB of the client, the server and egress.
#   plain HTTP  the same transfer as an absolute-form GET through the proxy
#               (as apt sends it: no tunnel; egress judges the request and
#               splices the answer), beside the same GET direct; no target
#               (the issue's is the tunnel's), the ratio and egress's CPU
#               per GiB for it are shown.
#   latency     BENCH_EGRESS_PINGS (default 200) new connections per sample,
#               each from the start of connect() to the server's first
#               byte (through the proxy: connect to 127.0.0.1:3128, CONNECT,
#               egress's decision, its connect to the checked address, the
#               200, the byte); target: the medians' difference <= 1 ms.
#   memory      the egress process's resident memory (VmRSS and Pss from
#               /proc) with BENCH_EGRESS_HOLD (default 1,000) idle tunnels
#               open, beside the same process with none; no target (the
#               issue asks for the figure), per tunnel in KiB.
#
# Congestion control: a network namespace starts with the host's default
# (net.ipv4.tcp_congestion_control), the bench's and the sandbox's alike;
# egress sets reno on the sandbox's side of every tunnel (egress/conn.c: a
# pacing algorithm such as BBR costs most of a loopback tunnel's CPU).  The
# figures depend on the server's algorithm, so it is printed;
# BENCH_EGRESS_CC=NAME sets the bench namespace's default (the server and
# the direct clients; reno or bbr: a namespace other than the host's may
# only take those net.ipv4.tcp_allowed_congestion_control lists).
#
# Tunables (environment): BENCH_N (samples, default 5), BENCH_EGRESS_BYTES,
# BENCH_EGRESS_PINGS, BENCH_EGRESS_HOLD, BENCH_EGRESS_CC, BENCH_EGRESS_PERF (a file: perf
# record -g of the egress process during the samples goes there, for
# perf report), VERBOSE (the daemon's -v flags:
# every tunnel is then a log line, which costs latency), KEEP (keep the
# directory).  Needs root, cc (with a static libc), git, ip, unshare, ss,
# nsenter and libseccomp's development files.
# bench/run.sh runs it unless BENCH_EGRESS=0; alone:
#   make && sh bench/egress/run.sh build
set -eu
if [ -z "${AGRIPPA_EGRESS_BENCH_NS:-}" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "bench/egress: run as root" >&2; exit 1; }
	AGRIPPA_EGRESS_BENCH_NS=1 exec unshare -n -m --propagation private sh "$0" "$@"
fi
BUILD=${1:-${BUILD:-build}}
ROOT=$(pwd)
export BUILD ROOT
N=${BENCH_N:-5}
BYTES=${BENCH_EGRESS_BYTES:-1073741824}
K=${BENCH_EGRESS_PINGS:-200}
HOLD=${BENCH_EGRESS_HOLD:-1000}
VERBOSE=${VERBOSE:-}
BENCH=bench/egress
START=$(date +%s)
. "$ROOT/bench/lib/bigrepo.sh"
bench_preflight cc git ip unshare ss nsenter pkg-config
for v in "$N" "$BYTES" "$K" "$HOLD"; do
	case "$v" in '' | *[!0-9]*) die "BENCH_N, BENCH_EGRESS_BYTES, BENCH_EGRESS_PINGS and BENCH_EGRESS_HOLD are counts" ;; esac
done
[ "$N" -ge 1 ] && [ "$K" -ge 1 ] && [ "$BYTES" -ge 1 ] || die "BENCH_N, BENCH_EGRESS_BYTES and BENCH_EGRESS_PINGS are at least 1"
[ "$HOLD" -le 1024 ] || die "BENCH_EGRESS_HOLD is at most 1024 (egress.tunnels_per_run)"

# --- 1. the namespace's network, the server, the daemon ---------------------------------
ip link set lo up
CC_HOST=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
if [ -n "${BENCH_EGRESS_CC:-}" ]; then
	echo "$BENCH_EGRESS_CC" >/proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null ||
		die "BENCH_EGRESS_CC=$BENCH_EGRESS_CC: this namespace may take only one of: $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)"
fi
CC_NS=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
if ip link add dummy0 type dummy 2>/dev/null; then
	ip addr add 10.79.0.1/24 dev dummy0 && ip link set dummy0 up
else
	ip addr add 10.79.0.1/24 dev lo
fi
. tests/integration/lib.sh
make_env
SRV_PID=""
PEER_CG=""
bench_cleanup() {
	[ -z "$SRV_PID" ] || kill "$SRV_PID" 2>/dev/null || true
	[ -z "$PEER_CG" ] || rmdir "$PEER_CG" 2>/dev/null || true
	cleanup_env
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP
printf '127.0.0.1 localhost\n10.79.0.1 bench.test\n' >"$T/hosts"
# no name server: bench.test is in the hosts file, and nothing else is asked
printf 'nameserver 127.0.0.1\n' >"$T/resolv.conf"
chmod 0644 "$T/hosts" "$T/resolv.conf"
mount --bind "$T/hosts" /etc/hosts
mount --bind "$T/resolv.conf" /etc/resolv.conf
cat >>"$CONF" <<EOC
sandbox: { open_files: 4096, exec_timeout: 7200 }
egress: { allow_cidrs: [ 10.79.0.0/24 ], tunnels_per_run: 1024, bytes_per_run: 1024G }
EOC
cc -O2 -static -o "$T/ebench" bench/egress/ebench.c 2>"$T/cc.out" || die "cannot build bench/egress/ebench.c: $(cat "$T/cc.out")"
# shellcheck disable=SC2046 # pkg-config: zero or more flags
cc -O2 -I"$ROOT" -o "$T/sbxexec" bench/egress/sbxexec.c privsep/seccomp_sandbox.c common/log.c \
	$(pkg-config --libs libseccomp) 2>"$T/cc.out" || die "cannot build bench/egress/sbxexec.c: $(cat "$T/cc.out")"
"$T/ebench" serve 10.79.0.1 9000 "$T/srv.ready" >"$T/srv.out" 2>&1 &
SRV_PID=$!
wait_for 10 test -e "$T/srv.ready" || die "the test server did not start: $(cat "$T/srv.out")"
sh scripts/mkusers.sh
# shellcheck disable=SC2086 # VERBOSE: zero or more flags
"$AGRIPPAD" -d $VERBOSE -f "$CONF" >>"$LOG" 2>&1 &
SUP_PID=$!
up() { alive || { cat "$LOG" >&2; die "the daemon did not start"; }; [ "$(healthz_code)" = 200 ]; }
wait_for 60 up || { cat "$LOG" >&2; die "the daemon did not start"; }
EG=$(child_pid egress) || die "no egress process"

# the repository the run works on: the client and its script
mkdir -p "$T/repo" "$T/tmpl"
cp "$T/ebench" bench/egress/sandbox.sh "$T/repo/"
git -C "$T/repo" init -q -b main
git -C "$T/repo" add ebench sandbox.sh
git -C "$T/repo" -c user.name=bench -c user.email=bench@example.org commit -qm "bench/egress"
chmod -R a+rX "$T/repo"
# shellcheck disable=SC2016 # ${params.repo} is the template's
{
	printf 'name: ebench\nversion: 1\n'
	printf 'params:\n  repo: { type: repoRef, required: true }\n'
	printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
	printf 'network: { allow: [ "bench.test:9000", "bench.test:9001", "bench.test:9002" ] }\n'
	printf 'phases:\n  - name: one\n    steps:\n'
	printf '      - { id: bench, kind: command, timeout: 2h, run: "sh sandbox.sh %s %s %s %s" }\n' "$N" "$K" "$HOLD" "$BYTES"
} >"$T/tmpl/ebench.yaml"
ctl template load "$T/tmpl/ebench.yaml" || die "template ebench"
ctl user add alice || die "user add"
TOKEN=$(new_token alice) || die "token create"
ctl project add p1 || die "project add"
ctl member add p1 alice admin || die "member add"
ctl repo add p1 bench "$T/repo" </dev/null || die "repo add"
P1=$(psql_q "select id from projects where name = 'p1'")

# --- 2. the samples ----------------------------------------------------------------------
kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/${3:-status}"; }
mem() { echo "$(kb "$EG" VmRSS) $(kb "$EG" Pss smaps_rollup)"; }
MEM0=$(mem)
RUN=$(curl -s --max-time 30 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
	--data-binary '{"template": "ebench", "params": {"repo": "bench"}}' \
	"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
	python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))' 2>/dev/null) || RUN=""
[ -n "$RUN" ] || die "submit failed"
st() { psql_q "select status from runs where id = '$RUN'"; }
running() { [ "$(psql_q "select count(*) from run_events where run_id = '$RUN' and type = 'step.started'")" = 1 ]; }
wait_for 300 running || die "the run did not start its step ($(st)): $(psql_q "select coalesce(error, '') from runs where id = '$RUN'")"
WS=$(run_ws "$RUN")
# the sandbox: its pid (the supervisor's log line), its CPU limit copied to
# a cgroup of the peer's, next to the sandbox's
SBX_PID=$(sed -n 's/.*sandbox sbx-[0-9a-f]* started (pid \([0-9]*\),.*/\1/p' "$LOG" | tail -n 1)
[ -n "$SBX_PID" ] && [ -e "/proc/$SBX_PID/cgroup" ] || die "no sandbox process in the daemon's log"
peer_cgroup() {
	pc_rel=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpu\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' "/proc/$SBX_PID/cgroup")
	if [ -n "$pc_rel" ]; then
		pc_mnt=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
		pc_dir=$pc_mnt$pc_rel
		[ -e "$pc_dir/cpu.cfs_quota_us" ] || return 0
		PEER_CG=$(dirname "$pc_dir")/ebench-peer.$$
		mkdir "$PEER_CG" || die "cannot make the peer's cgroup $PEER_CG"
		cat "$pc_dir/cpu.cfs_period_us" >"$PEER_CG/cpu.cfs_period_us"
		cat "$pc_dir/cpu.cfs_quota_us" >"$PEER_CG/cpu.cfs_quota_us"
		PEER_LIM="cpu.cfs_quota_us $(cat "$PEER_CG/cpu.cfs_quota_us") of cpu.cfs_period_us $(cat "$PEER_CG/cpu.cfs_period_us")"
		return 0
	fi
	pc_rel=$(sed -n 's/^0::\(.*\)$/\1/p' "/proc/$SBX_PID/cgroup")
	pc_mnt=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	pc_dir=$pc_mnt$pc_rel
	[ -n "$pc_rel" ] && [ -e "$pc_dir/cpu.max" ] || return 0
	PEER_CG=$(dirname "$pc_dir")/ebench-peer.$$
	mkdir "$PEER_CG" || die "cannot make the peer's cgroup $PEER_CG"
	cat "$pc_dir/cpu.max" >"$PEER_CG/cpu.max"
	PEER_LIM="cpu.max $(cat "$PEER_CG/cpu.max")"
}
PEER_LIM="none (the sandbox has no cgroup CPU limit on this host)"
peer_cgroup
SBX_LIM=$(if [ -n "$PEER_CG" ]; then echo "$PEER_LIM"; else echo none; fi)
# fair CMD...: CMD as the peer: in the peer's cgroup, under the sandbox's filter
fair() {
	sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs" || exit 1; shift; exec "$@"' sh "$PEER_CG" "$T/sbxexec" "$@"
}
# step FILE SECS: wait for the sandbox's FILE in the workspace
step() {
	wait_for "$2" test -e "$WS/$1" && return 0
	alive || died "the run's step"
	die "no $1 from the sandbox after $2 s (run $(st)); its output: $(psql_q "select string_agg(payload->>'text', '' order by seq) from run_events where run_id = '$RUN' and type = 'step.output'")"
}
: >"$T/proxy.tput"
: >"$T/direct.tput"
: >"$T/bare.tput"
: >"$T/proxy.http"
: >"$T/direct.http"
: >"$T/proxy.ping"
: >"$T/direct.ping"
: >"$T/proxy.srv"
: >"$T/direct.srv"
: >"$T/bare.srv"
# srv LEG: the server's CPU seconds for the transfer just made, to LEG.srv
srv() { tail -n 1 "$T/srv.out" | awk '$1 == "sent" { print $3 + $4 }' >>"$T/$1.srv"; }
peer() {
	fair "$T/ebench" get 10.79.0.1 9000 "$BYTES" >>"$T/direct.tput" 2>"$T/peer.err" || die "the direct transfer: $(cat "$T/peer.err")"
	srv direct
	fair "$T/ebench" hget 10.79.0.1 9000 "$BYTES" >>"$T/direct.http" 2>"$T/peer.err" || die "the direct plain-HTTP transfer: $(cat "$T/peer.err")"
	fair "$T/ebench" ping 10.79.0.1 9000 "$K" >>"$T/direct.ping" 2>"$T/peer.err" || die "the direct connections: $(cat "$T/peer.err")"
}
bare() {
	"$T/ebench" get 10.79.0.1 9000 "$BYTES" >>"$T/bare.tput" 2>"$T/peer.err" || die "the bare direct transfer: $(cat "$T/peer.err")"
	srv bare
}
# ticks: the egress process's CPU time so far (utime + stime, clock ticks)
ticks() { awk '{ print $14 + $15 }' "/proc/$EG/stat"; }
: >"$T/egress.cpu"
proxy() {
	c0=$(ticks)
	touch "$WS/go.$1"
	step "got.$1" 600
	c1=$(ticks)
	touch "$WS/pings.$1"
	step "done.$1" 600
	grep -q '^fail' "$WS/tput.$1" && die "the transfer through the proxy: $(cat "$WS/tput.$1")"
	grep -q '^fail' "$WS/ping.$1" && die "the tunnels through the proxy: $(cat "$WS/ping.$1")"
	srv proxy # the tunnel's transfer: the last the server made (the pings print nothing)
	c2=$(ticks)
	touch "$WS/hgo.$1"
	step "hgot.$1" 600
	grep -q '^fail' "$WS/http.$1" && die "the plain-HTTP transfer through the proxy: $(cat "$WS/http.$1")"
	echo "$c0 $c1 $c2 $(ticks)" >>"$T/egress.cpu"
	cat "$WS/tput.$1" >>"$T/proxy.tput"
	cat "$WS/ping.$1" >>"$T/proxy.ping"
	cat "$WS/http.$1" >>"$T/proxy.http"
}
echo "bench/egress: $(nproc) cores, $BUILD ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), $N samples of" \
	"$BYTES bytes and $K new connections each, $HOLD idle tunnels; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench/egress: congestion control: $CC_NS on the server's side and the direct clients' (the host's default: $CC_HOST);" \
	"the sandbox's CPU limit: $SBX_LIM, the peer's the same, under the sandbox's seccomp filter"
PERF_PID=""
if [ -n "${BENCH_EGRESS_PERF:-}" ]; then
	perf record -q -g -p "$EG" -o "$BENCH_EGRESS_PERF" >"$T/perf.out" 2>&1 &
	PERF_PID=$!
fi
i=1
while [ "$i" -le "$N" ]; do
	# the peer and the proxy take turns going first; the bare client goes
	# on the other side of the proxy
	if [ $((i % 2)) = 1 ]; then
		peer
		proxy "$i"
		bare
	else
		bare
		proxy "$i"
		peer
	fi
	echo "bench/egress: sample $i: proxy $(tail -n 1 "$T/proxy.tput" | cut -d' ' -f1) s," \
		"direct $(tail -n 1 "$T/direct.tput" | cut -d' ' -f1) s (bare $(tail -n 1 "$T/bare.tput" | cut -d' ' -f1) s) for the transfer"
	i=$((i + 1))
done
if [ -n "$PERF_PID" ]; then
	kill -INT "$PERF_PID"
	wait "$PERF_PID" || true
	echo "bench/egress: perf record of the egress process during the samples: $BENCH_EGRESS_PERF"
fi
MEM1=$(mem)
touch "$WS/go.hold"
step held 300
sleep 1 # what egress allocated for the last of them is in its counters
MEM2=$(mem)
# the sandbox's side of the held tunnels: their congestion control
CC_SBX=$(nsenter -t "$SBX_PID" -n ss -tin state established '( sport = :3128 )' 2>/dev/null |
	awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(reno|cubic|bbr|bbr2|htcp|vegas|dctcp|westwood)$/) n[$i]++ }
	END { for (k in n) { printf "%s%s %d", s, k, n[k]; s = ", " } }')
TUN=$("$AGRIPPACTL" -s "$CTL" status | sed -n 's/^egress: .* \([0-9]*\) tunnels open$/\1/p')
touch "$WS/release"
step done.hold 60
grep -q '^held' "$WS/hold.out" || die "holding the tunnels: $(cat "$WS/hold.out")"
touch "$WS/bye"
ended() { case "$(st)" in succeeded | failed | cancelled) return 0 ;; esac; return 1; }
wait_for 120 ended || die "the run did not end"
[ "$(st)" = succeeded ] || die "the run $(st): $(psql_q "select coalesce(error, '') from runs where id = '$RUN'")"
[ "$(child_pid egress)" = "$EG" ] || die "the egress process changed during the benchmark (it died)"

# --- 3. the figures ----------------------------------------------------------------------
fld() { echo "$1" | cut -d' ' -f"$2"; }
# mbps FILE: "seconds bytes" lines into MB/s lines
mbps() { awk '{ printf "%.1f\n", $2 / $1 / 1e6 }' "$1"; }
mbps "$T/proxy.tput" >"$T/proxy.mbps"
mbps "$T/direct.tput" >"$T/direct.mbps"
mbps "$T/bare.tput" >"$T/bare.mbps"
mbps "$T/proxy.http" >"$T/proxyh.mbps"
mbps "$T/direct.http" >"$T/directh.mbps"
hp=$(bench_stats 1 "$T/proxyh.mbps")
hd=$(bench_stats 1 "$T/directh.mbps")
tb=$(bench_stats 1 "$T/bare.mbps")
tp=$(bench_stats 1 "$T/proxy.mbps")
td=$(bench_stats 1 "$T/direct.mbps")
lp=$(bench_stats 1 "$T/proxy.ping")
ld=$(bench_stats 1 "$T/direct.ping")
tv=$(awk -v a="$(fld "$tp" 1)" -v b="$(fld "$td" 1)" 'BEGIN { r = a / b; printf "%.2f %s\n", r, (r >= 0.8) ? "PASS" : "FAIL" }')
lv=$(awk -v a="$(fld "$lp" 1)" -v b="$(fld "$ld" 1)" 'BEGIN { d = (a - b) / 1000; printf "+%.3f %s %.1f\n", d, (d <= 1) ? "PASS" : "FAIL", a / b }')
row() { printf '%-30s %16s %22s %10s %10s  %s\n' "$1" "$2" "$3" "$4" "$5" "$6"; }
echo
echo "egress: medians (proxy: from inside a sandbox through egress; peer: the same client, direct, with the sandbox's filter and CPU limit)"
row case proxy peer ratio target verdict
row "throughput, $((BYTES / 1048576)) MiB" "$(fld "$tp" 1) MB/s" "$(fld "$td" 1) MB/s (direct)" "$(fld "$tv" 1)x" ">= 0.8x" "$(fld "$tv" 2)"
row "  the same client bare" "-" "$(fld "$tb" 1) MB/s (bare)" \
	"$(awk -v a="$(fld "$td" 1)" -v b="$(fld "$tb" 1)" 'BEGIN { printf "%.2f", a / b }')x" "-" "info (peer / bare)"
row "plain HTTP GET, $((BYTES / 1048576)) MiB" "$(fld "$hp" 1) MB/s" "$(fld "$hd" 1) MB/s (direct)" \
	"$(awk -v a="$(fld "$hp" 1)" -v b="$(fld "$hd" 1)" 'BEGIN { printf "%.2f", a / b }')x" "-" "info"
row "new tunnel to first byte" "$(fld "$lp" 1) us" "$(fld "$ld" 1) us (connect)" "$(fld "$lv" 1) ms" "<= 1 ms" "$(fld "$lv" 2)"
row "egress memory, $HOLD tunnels" "$(fld "$MEM2" 1) kB RSS" "$(fld "$MEM1" 1) kB (none open)" \
	"$(awk -v a="$(fld "$MEM2" 1)" -v b="$(fld "$MEM1" 1)" -v n="$HOLD" 'BEGIN { printf "%.1f", (a - b) / n }') kB/t" "-" "info"
echo
# line LABEL FILE UNIT: median, min-max, the samples
line() {
	s=$(bench_stats 1 "$2")
	printf 'egress: %-34s median %s %s, min-max %s-%s, %s samples' "$1" "$(fld "$s" 1)" "$3" "$(fld "$s" 2)" "$(fld "$s" 3)" "$(fld "$s" 4)"
	if [ "$(fld "$s" 4)" -le 10 ]; then printf ': %s' "$(tr '\n' ' ' <"$2")"; fi
	echo
}
line "throughput through the proxy" "$T/proxy.mbps" MB/s
line "throughput direct (the peer)" "$T/direct.mbps" MB/s
line "throughput direct, bare" "$T/bare.mbps" MB/s
line "plain HTTP through the proxy" "$T/proxyh.mbps" MB/s
line "plain HTTP direct (the peer)" "$T/directh.mbps" MB/s
line "new tunnel to first byte, proxy" "$T/proxy.ping" us
line "connect to first byte, direct" "$T/direct.ping" us
pct() { sort -g "$1" | awk -v p="$2" '{ v[NR] = $1 } END { i = int(NR * p + 0.5); if (i < 1) i = 1; print v[i] }'; }
echo "egress: latency p90/p99: proxy $(pct "$T/proxy.ping" 0.9)/$(pct "$T/proxy.ping" 0.99) us," \
	"direct $(pct "$T/direct.ping" 0.9)/$(pct "$T/direct.ping" 0.99) us; the medians' ratio $(fld "$lv" 3)x"
# CPU seconds egress spent per GiB relayed (the transfer alone), and per
# new tunnel (the pings: microseconds each, to a clock tick over K of them)
awk -v hz="$(getconf CLK_TCK)" -v b="$BYTES" '{ printf "%.3f\n", ($2 - $1) / hz / (b / 1073741824) }' \
	"$T/egress.cpu" >"$T/egress.cpug"
awk -v hz="$(getconf CLK_TCK)" -v k="$K" '{ printf "%.1f\n", ($3 - $2) / hz / k * 1e6 }' \
	"$T/egress.cpu" >"$T/egress.cput"
awk -v hz="$(getconf CLK_TCK)" -v b="$BYTES" '{ printf "%.3f\n", ($4 - $3) / hz / (b / 1073741824) }' \
	"$T/egress.cpu" >"$T/egress.cpuh"
echo "egress: the egress process's CPU per GiB relayed: median $(bench_stats 1 "$T/egress.cpug" | cut -d' ' -f1) s" \
	"(user + system); the client's, through the proxy $(bench_stats 3 "$T/proxy.tput" | cut -d' ' -f1) s," \
	"direct $(bench_stats 3 "$T/direct.tput" | cut -d' ' -f1) s, bare $(bench_stats 3 "$T/bare.tput" | cut -d' ' -f1) s per transfer ($(nproc) cores for server, proxy and client)"
# gib FILE COL: the median of COL per GiB transferred
gib() { awk -v c="$2" -v b="$BYTES" '$1 != "fail" { printf "%.3f\n", $c / (b / 1073741824) }' "$1" >"$1.g"; bench_stats 1 "$1.g" | cut -d' ' -f1; }
echo "egress: CPU seconds per GiB, medians: client through the proxy $(gib "$T/proxy.tput" 3), direct $(gib "$T/direct.tput" 3)," \
	"bare $(gib "$T/bare.tput" 3); the server's for those $(gib "$T/proxy.srv" 1), $(gib "$T/direct.srv" 1), $(gib "$T/bare.srv" 1);" \
	"egress $(bench_stats 1 "$T/egress.cpug" | cut -d' ' -f1) (and $(bench_stats 1 "$T/egress.cput" | cut -d' ' -f1) us per new tunnel)"
echo "egress: plain HTTP: egress's CPU per GiB of the answer, median $(bench_stats 1 "$T/egress.cpuh" | cut -d' ' -f1) s;" \
	"the client's through the proxy $(gib "$T/proxy.http" 3) s, direct $(gib "$T/direct.http" 3) s"
# the whole path's CPU per GiB: what bounds the ratio when the cores are
# busy with other work too (then each leg gets a share of them)
pc=$(awk -v a="$(gib "$T/proxy.tput" 3)" -v b="$(gib "$T/proxy.srv" 1)" -v c="$(bench_stats 1 "$T/egress.cpug" | cut -d' ' -f1)" 'BEGIN { printf "%.3f", a + b + c }')
dc=$(awk -v a="$(gib "$T/direct.tput" 3)" -v b="$(gib "$T/direct.srv" 1)" 'BEGIN { printf "%.3f", a + b }')
echo "egress: the whole path's CPU per GiB (client + server + egress): through the proxy $pc s, the peer's $dc s;" \
	"their ratio $(awk -v a="$pc" -v b="$dc" 'BEGIN { printf "%.2f", b / a }')x (what the throughput ratio tends to when other load takes the cores)"
echo "egress: congestion control of the sandbox's side of the $HOLD held tunnels (ss in the sandbox's namespace): ${CC_SBX:-?}"
case "$CC_NS" in
bbr*)
	echo "egress: note: the server's side is $CC_NS, which paces every segment (loopback has no fq qdisc: TCP paces by itself), the direct transfer's as" \
		"much as the proxied one's; BENCH_EGRESS_CC=reno measures both against a server that does not pace" ;;
esac
echo "egress: memory of the egress process (VmRSS / Pss, kB): at start $(fld "$MEM0" 1) / $(fld "$MEM0" 2)," \
	"after the transfers $(fld "$MEM1" 1) / $(fld "$MEM1" 2), with $HOLD idle tunnels open $(fld "$MEM2" 1) / $(fld "$MEM2" 2)" \
	"(agrippactl status: ${TUN:-?} tunnels open)"
echo "egress: daemon log lines with warn/error/fatal: $(grep -c -i 'warn\|error\|fatal' "$LOG" || true)"
echo "egress: load average after: $(cut -d' ' -f1-3 /proc/loadavg); the benchmark took $(($(date +%s) - START)) s"
stop_daemon
