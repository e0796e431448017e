# Shared helpers for the integration tests (POSIX sh, sourced).
# Each test prints "ok - ..." / "not ok - ..." and ends with
# "NAME: N passed, M failed".

: "${BUILD:=build-san}"
: "${ROOT:=$(pwd)}"
AGRIPPAD="$ROOT/$BUILD/agrippad"
AGRIPPACTL="$ROOT/$BUILD/agrippactl"
TOOLS="$ROOT/$BUILD/tests/tools"
T_PASS=0
T_FAIL=0
SUP_PID=""

ok() {
	T_PASS=$((T_PASS + 1))
	echo "ok - $*"
}

notok() {
	T_FAIL=$((T_FAIL + 1))
	echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else notok "$desc"; fi
}

finish() {
	echo "$1: $T_PASS passed, $T_FAIL failed"
	[ "$T_FAIL" -eq 0 ]
}

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "ok - $1 # SKIP needs root (CI runs as root)"
		echo "$1: 0 passed, 0 failed, 1 skipped"
		exit 0
	fi
}

# A fresh test directory (traversable by the service users) and a config.
make_env() {
	T=$(mktemp -d /tmp/agrippa-test.XXXXXX)
	chmod 0755 "$T"
	mkdir -p "$T/empty"
	# Below the kernel's ephemeral range (32768 and up by default), where
	# a client connection of another test could already hold the port.
	lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$lo" -gt 11000 ] 2>/dev/null || lo=32768
	PORT=$((10000 + $$ % (lo - 11000)))
	CONF="$T/agrippad.yaml"
	CTL="$T/ctl.sock"
	LOG="$T/agrippad.log"
	cat >"$CONF" <<EOC
state_dir: $T/state
user: _agrippa
listen: [ "127.0.0.1:$PORT" ]
control_socket: $CTL
database: ${DB_SPEC:-embedded}
master_key: $T/keys/master.key
pidfile: $T/agrippad.pid
chroot: $T/empty
EOC
}

start_daemon() {
	# -vvvv: more levels than IPC carries (0..3); children must still start.
	"$AGRIPPAD" -d -vvvv -f "$CONF" >>"$LOG" 2>&1 &
	SUP_PID=$!
	i=0
	while [ $i -lt 600 ]; do
		[ "$(healthz_code)" = 200 ] && return 0
		kill -0 "$SUP_PID" 2>/dev/null || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

stop_daemon() {
	[ -n "$SUP_PID" ] || return 0
	kill -TERM "$SUP_PID" 2>/dev/null
	i=0
	while kill -0 "$SUP_PID" 2>/dev/null && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$SUP_PID" 2>/dev/null; then
		# not stopped within 60 s: a failure the caller sees in
		# DAEMON_STATUS, and no daemon left behind to spin on the host
		echo "# the daemon (pid $SUP_PID) did not stop within 60 s; killing it"
		kids=$(children_of "$SUP_PID")
		kill -KILL "$SUP_PID" $kids 2>/dev/null
	fi
	wait "$SUP_PID" 2>/dev/null
	DAEMON_STATUS=$?
	SUP_PID=""
}

healthz_code() {
	curl -s -o /dev/null -w '%{http_code}' --max-time 8 "http://127.0.0.1:$PORT/healthz"
}

healthz_body() {
	curl -s --max-time 8 "http://127.0.0.1:$PORT/healthz"
}

# wait_for SECONDS COMMAND...: poll until the command succeeds.
wait_for() {
	n=$(($1 * 10))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# child_pid ROLE: pid of the supervisor's child running that role.
# (one pgrep: a loop over /proc forks for each process, which takes a
# second on a loaded machine, in the middle of what a test times)
child_pid() {
	pgrep -P "$SUP_PID" -f "^agrippad -P $1 " | head -n 1 | grep .
}

status_field() { # status_field PID FIELD
	awk -v f="$2:" '$1 == f { $1 = ""; sub(/^ /, ""); print; exit }' "/proc/$1/status"
}

# Every process whose executable is our agrippad binary.
our_processes() {
	for d in /proc/[0-9]*; do
		[ "$(readlink "$d/exe" 2>/dev/null)" = "$AGRIPPAD" ] && echo "${d#/proc/}"
	done
	return 0
}

# Children of one process (by PPid).
children_of() {
	for d in /proc/[0-9]*; do
		[ "$(awk '/^PPid:/ { print $2 }' "$d/status" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
	done
	return 0
}

# psql_q SQL: one query on the daemon's embedded database (tuples only,
# unaligned), as the daemon's own database role.
# Start the daemon, or fail the whole test NAME with its log.
start_daemon_or_finish() {
	if start_daemon; then
		ok "daemon starts"
		return 0
	fi
	notok "daemon starts"
	cat "$LOG"
	finish "$1"
	exit 1
}

# --- helpers of the tests that drive the daemon with agrippactl and HTTP ---
# ctl ARGS: agrippactl on this test's daemon, its output in $T/ctl.out
# (printed, and the status 1, when it fails).
ctl() { "$AGRIPPACTL" -s "$CTL" "$@" >"$T/ctl.out" 2>&1 || { echo "agrippactl $*: $(cat "$T/ctl.out")"; return 1; }; }
# new_token USER [DAYS]: prints a new API token (shown once by agrippactl).
new_token() { ctl token create "$@" </dev/null && tail -n 1 "$T/ctl.out"; }
# prefix TOKEN: what agrippactl token revoke takes.
prefix() { printf '%s' "$1" | cut -c1-12; }
# header NAME: that response header from $T/hdrs (curl -D).
header() { tr -d '\r' <"$T/hdrs" | grep -i "^$1: " | head -1 | cut -d' ' -f2-; }

psql_q() {
	PGPASSWORD=$(cat "$T/state/db.password") psql -X -A -t -h "$T/state/pgrun" -U agrippa agrippa -c "$1"
}

# run_ws RUN: the run's workspace (on its own disk when it has one)
run_ws() {
	if [ -d "$T/state/runs/$1/disk/ws" ]; then echo "$T/state/runs/$1/disk/ws"; else echo "$T/state/runs/$1/ws"; fi
}

cleanup_env() {
	# Written to be safe under `set -e` (bench/run.sh): no bare && chains.
	# Only this test's daemon and its children: another test run on the
	# host (another build directory, a benchmark) keeps its own.
	if [ -n "$SUP_PID" ]; then
		kids=$(children_of "$SUP_PID")
		kill -KILL "$SUP_PID" 2>/dev/null || true
		for p in $kids; do kill -KILL "$p" 2>/dev/null || true; done
	fi
	if [ -n "${T:-}" ] && [ -d "$T/state/pgrun" ]; then
		pkill -KILL -u _agrippadb -f "$T/state/pg" 2>/dev/null || true
	fi
	# the runs' own disks (sandbox.disk) the daemon left mounted
	if [ -n "${T:-}" ]; then
		for m in $(awk -v t="$T/" 'index($2, t) == 1 { print $2 }' /proc/mounts); do
			umount -l "$m" 2>/dev/null || true
		done
	fi
	if [ -z "${KEEP:-}" ] && [ -n "${T:-}" ]; then rm -rf "$T"; fi
	return 0
}
