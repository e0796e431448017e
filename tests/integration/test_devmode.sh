#!/bin/sh
# Development mode: agrippad started by an ordinary user keeps the same
# process split, skips chroot and setuid with one warning, and still confines
# every child (no_new_privs, seccomp, no capabilities).  Also: daemon mode
# (no -d) writes its pidfile and cleans up on SIGTERM.
. tests/integration/lib.sh
need_root devmode
make_env
trap cleanup_env EXIT
DEV=_agrippa
chown -R "$DEV" "$T"
sed -i -e '/^user:/d' -e '/^chroot:/d' "$CONF"
as_dev() { setpriv --reuid="$DEV" --regid="$DEV" --clear-groups --inh-caps=-all "$@"; }

setpriv --reuid="$DEV" --regid="$DEV" --clear-groups --inh-caps=-all \
	"$AGRIPPAD" -d -f "$CONF" >>"$LOG" 2>&1 &
SUP_PID=$!
wait_for 60 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ]"
check "an ordinary user runs the daemon (development mode)" [ $? -eq 0 ]
check "it warns exactly once that privileges are not dropped" \
	[ "$(grep -c 'development mode' "$LOG")" -ge 1 ]
DUID=$(id -u "$DEV")
for role in engine httpd proxy; do
	pid=$(child_pid $role)
	check "dev: $role runs as the starting user" [ "$(status_field "$pid" Uid)" = "$DUID $DUID $DUID $DUID" ]
	check "dev: $role has NoNewPrivs: 1 and Seccomp: 2" \
		[ "$(status_field "$pid" NoNewPrivs) $(status_field "$pid" Seccomp)" = "1 2" ]
	check "dev: $role has no capabilities" [ "$(status_field "$pid" CapEff)" = 0000000000000000 ]
	check "dev: $role is not chrooted" [ "$(readlink "/proc/$pid/root")" = / ]
done
st=$(as_dev "$AGRIPPACTL" -s "$CTL" status)
check "dev: the daemon's own user may use the control socket" sh -c "echo '$st' | grep -q 'development mode'"
as_dev "$AGRIPPACTL" -s "$CTL" sandbox run -- sh -c 'id -u; cat /proc/self/uid_map;
	grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status; touch /workspace/x && echo WROTE;
	touch /x 2>/dev/null || echo ROOT-RO' >"$T/dev-sbx.out" 2>&1
check "dev: a sandbox runs, as uid 1000 mapped to the starting user" \
	sh -c "head -1 '$T/dev-sbx.out' | grep -qx 1000 && grep -Eq '^ *1000 +$DUID +1\$' '$T/dev-sbx.out'"
check "dev: ... with no capabilities, no_new_privs and its seccomp filter" sh -c \
	"[ \$(grep -Ec '^(CapEff|CapBnd):.*0000000000000000|^NoNewPrivs:.*1|^Seccomp:.*2' '$T/dev-sbx.out') = 4 ]"
check "dev: ... a writable fresh workspace and a read-only root" \
	sh -c "grep -qx WROTE '$T/dev-sbx.out' && grep -qx ROOT-RO '$T/dev-sbx.out'"
check "dev: ... and no cgroup limits is said once, not as a warning" \
	sh -c "[ \$(grep -c 'no usable cgroup' '$LOG') -le 1 ]"
stop_daemon
check "dev: SIGTERM exits 0" [ "$DAEMON_STATUS" -eq 0 ]
check "dev: nothing is left" [ -z "$(our_processes)" ]

# --- daemon mode, as root --------------------------------------------------------
chown root "$T" "$T/empty"
make_env_daemon() { sed -i "s/^database: .*/database: embedded/" "$CONF"; }
make_env_daemon
printf 'user: _agrippa\nchroot: %s/empty\n' "$T" >>"$CONF"
rm -rf "$T/keys"
"$AGRIPPAD" -f "$CONF" >"$T/fail.out" 2>&1
rc=$?
cat "$T/fail.out"
check "a start-up error after detaching still reaches the terminal, exit 1" \
	sh -c "[ $rc -eq 1 ] && grep -q 'embedded database: .*must be' '$T/fail.out'"
check "... and changes no ownership in the state directory" \
	[ "$(stat -c %U "$T/state" "$T/state/pg" "$T/state/pgrun" | sort -u)" = "$DEV" ]
check "... and leaves no process behind" [ -z "$(our_processes)" ]
rm -rf "$T/state" "$T/keys"
chown root "$T"
"$AGRIPPAD" -f "$CONF" >"$T/daemon.out" 2>&1
check "without -d the daemon detaches and the starter exits 0" [ $? -eq 0 ]
wait_for 60 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ]"
check "the detached daemon serves /healthz" [ $? -eq 0 ]
PIDF="$T/agrippad.pid"
SUP_PID=$(cat "$PIDF" 2>/dev/null)
check "the pidfile names the running supervisor" sh -c "[ -n '$SUP_PID' ] && [ \"\$(readlink /proc/$SUP_PID/exe)\" = '$AGRIPPAD' ]"
"$AGRIPPAD" -f "$CONF" >"$T/second.out" 2>&1
check "a second daemon on the same pidfile refuses to start" \
	sh -c "[ $? -ne 0 ] && grep -q 'already running' '$T/second.out'"
check "the detached daemon printed nothing but the new key's notice" \
	sh -c "! grep -v 'created a new master key' '$T/daemon.out'"
[ -s "$T/daemon.out" ] && cat "$T/daemon.out"
kill -TERM "$SUP_PID"
wait_for 30 sh -c "! kill -0 $SUP_PID 2>/dev/null"
check "SIGTERM stops the detached daemon" [ $? -eq 0 ]
SUP_PID=""
check "daemon mode: no process, socket or pidfile is left" \
	sh -c "[ -z \"\$(. tests/integration/lib.sh; AGRIPPAD='$AGRIPPAD'; our_processes)\" ] && [ ! -e '$CTL' ] && [ ! -e '$PIDF' ]"
[ "$T_FAIL" -eq 0 ] || { echo "--- log"; tail -40 "$LOG"; }
finish devmode
