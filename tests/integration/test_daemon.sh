#!/bin/sh
# The real daemon on the embedded PostgreSQL in a temporary state directory:
# privilege separation, secrets, restarts, protocol violations, control
# socket, reload and a clean stop.
. tests/integration/lib.sh
need_root daemon
make_env
trap cleanup_env EXIT

# --- configuration checks change nothing ---------------------------------
out=$("$AGRIPPAD" -n -f "$CONF" 2>&1)
check "agrippad -n accepts a valid config" [ "$out" = "configuration OK" ]
BAD="$T/bad.yaml"
printf 'state_dir: %s/state\nuser: _agrippa\nlisten: [ "127.0.0.1:99999" ]\nbogus: 1\n' "$T" >"$BAD"
out=$("$AGRIPPAD" -n -f "$BAD" 2>&1)
rc=$?
check "a broken config exits 1" [ "$rc" -eq 1 ]
check "the error names file:line:col of the bad port" sh -c "echo '$out' | grep -q '^$BAD:3:[0-9]*: '"
check "the error names file:line:col of the unknown key" sh -c "echo '$out' | grep -q '^$BAD:4:1: '"
"$AGRIPPAD" -d -f "$BAD" >/dev/null 2>&1
check "starting on a broken config exits non-zero" [ $? -ne 0 ]
check "a broken config created nothing" [ ! -e "$T/state" ] && [ ! -e "$T/keys" ]

# --- start -----------------------------------------------------------------
if ! start_daemon; then
	notok "daemon starts and /healthz answers 200"
	cat "$LOG"
	finish daemon
	exit 1
fi
ok "daemon starts and /healthz answers 200"
body=$(healthz_body)
check "/healthz reports the database up" sh -c "echo '$body' | grep -q '\"database\":\"up\"'"
check "/healthz reports the version" sh -c "echo '$body' | grep -q '\"version\":\"'"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/nope")
check "an unknown route is 404" [ "$code" = 404 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/healthz")
check "POST /healthz is 405" [ "$code" = 405 ]

AUID=$(id -u _agrippa)
check "the supervisor runs as root" [ "$(status_field "$SUP_PID" Uid)" = "0 0 0 0" ]
for role in engine httpd proxy egress; do
	pid=$(child_pid $role)
	if [ -z "$pid" ]; then
		notok "$role is running"
		continue
	fi
	eval "PID_$role=$pid"
	check "$role runs as _agrippa (real, effective, saved, fs)" \
		[ "$(status_field "$pid" Uid)" = "$AUID $AUID $AUID $AUID" ]
	check "$role has NoNewPrivs: 1" [ "$(status_field "$pid" NoNewPrivs)" = 1 ]
	check "$role has Seccomp: 2" [ "$(status_field "$pid" Seccomp)" = 2 ]
	check "$role has no effective capabilities" [ "$(status_field "$pid" CapEff)" = 0000000000000000 ]
	check "$role has no permitted capabilities" [ "$(status_field "$pid" CapPrm)" = 0000000000000000 ]
	if [ "$role" = proxy ]; then
		# it resolves provider names and reads CA certificates (DESIGN 1)
		check "proxy is not chrooted, and its working directory is /" \
			[ "$(readlink "/proc/$pid/root")" = / -a "$(readlink "/proc/$pid/cwd")" = / ]
	else
		check "$role is chrooted to the empty directory" [ "$(readlink "/proc/$pid/root")" = "$T/empty" ]
	fi
	check "$role has only its fixed descriptors open" [ "$(ls "/proc/$pid/fd" | wc -l)" -le 12 ]
done

# --- secrets never reach a child --------------------------------------------
KEY="$T/keys/master.key"
check "the master key was created mode 0600" [ "$(stat -c %a "$KEY")" = 600 ]
check "the master key holds 32 bytes" [ "$(stat -c %s "$KEY")" = 32 ]
check "the key directory is mode 0700" [ "$(stat -c %a "$T/keys")" = 700 ]
KEYHEX=$(od -An -v -tx1 "$KEY" | tr -d ' \n')
PWHEX=$(od -An -v -tx1 "$T/state/db.password" | tr -d ' \n')
check "db.password is mode 0600, owned by root" [ "$(stat -c '%a %u' "$T/state/db.password")" = "600 0" ]
check "memgrep finds the master key in the supervisor (control)" "$TOOLS/memgrep" "$SUP_PID" "$KEYHEX" >/dev/null
check "memgrep finds the database password in the supervisor (control)" "$TOOLS/memgrep" "$SUP_PID" "$PWHEX" >/dev/null
for role in engine httpd proxy egress; do
	pid=$(child_pid $role)
	"$TOOLS/memgrep" "$pid" "$KEYHEX" "$PWHEX"
	check "$role's memory and environment hold neither the key nor the db password" [ $? -eq 1 ]
	check "$role's environment is built, not inherited" sh -c "! tr '\0' '\n' </proc/$pid/environ | grep -q '^HOME='"
done
check "the database directories are 0700 and owned by _agrippadb" \
	[ "$(stat -c '%a %U' "$T/state/pg") $(stat -c '%a %U' "$T/state/pgrun")" = "700 _agrippadb 700 _agrippadb" ]

# --- database: migrations and heartbeats -------------------------------------
check "postgres listens on no TCP address" [ -z "$(psql_q 'show listen_addresses')" ]
check "migrations are recorded" [ "$(psql_q 'select max(version) from schema_migrations')" -ge 1 ]
wait_for 10 sh -c "[ \"\$(PGPASSWORD=\$(cat '$T/state/db.password') psql -X -A -t -h '$T/state/pgrun' -U agrippa agrippa -c 'select count(*) from engine_heartbeats')\" -ge 1 ]"
check "the engine heartbeats through a named op" [ $? -eq 0 ]
check "the postgres socket directory refuses the service user" \
	sh -c "! setpriv --reuid=_agrippa --regid=_agrippa --clear-groups ls '$T/state/pgrun' >/dev/null 2>&1"

# --- control socket ------------------------------------------------------------
check "the control socket is mode 0600" [ "$(stat -c %a "$CTL")" = 600 ]
st=$("$AGRIPPACTL" -s "$CTL" status)
check "agrippactl status lists engine, httpd, proxy running" \
	sh -c "echo '$st' | grep -q '^engine .* running' && echo '$st' | grep -q '^httpd .* running' && echo '$st' | grep -q '^proxy .* running'"
check "agrippactl status shows the database up" sh -c "echo '$st' | grep -q '^database: up'"
check "agrippactl status shows no mirror on a new host" sh -c "echo '$st' | grep -qx 'mirrors: 0 (0 B)'"
js=$("$AGRIPPACTL" -j -s "$CTL" status)
check "agrippactl -j status prints JSON" sh -c "echo '$js' | grep -q '\"processes\"' && echo '$js' | grep -q '\"ok\": true'"
check "... with the mirrors' count and bytes" sh -c "echo '$js' | python3 -c '
import json, sys
assert json.load(sys.stdin)[\"data\"][\"mirrors\"] == {\"count\": 0, \"bytes\": 0}'"
check "agrippactl log verbose" "$AGRIPPACTL" -s "$CTL" log verbose
err=$("$AGRIPPACTL" -s "$CTL" log loud 2>&1)
rc=$?
check "the daemon rejects a bad log level with its usage (exit 1)" sh -c "[ $rc -eq 1 ] && echo '$err' | grep -q 'usage: log verbose|brief'"
"$AGRIPPACTL" -s "$CTL" frobnicate >/dev/null 2>&1
check "agrippactl rejects an unknown command (exit 2)" [ $? -eq 2 ]
"$AGRIPPACTL" -s "$T/nosuch.sock" status >/dev/null 2>&1
check "agrippactl without a daemon exits 2" [ $? -eq 2 ]
check "a non-root user cannot reach the control socket" \
	sh -c "! setpriv --reuid=_agrippa --regid=_agrippa --clear-groups '$AGRIPPACTL' -s '$CTL' status >/dev/null 2>&1"
# SO_PEERCRED, not only the file mode: open the socket's mode up and a
# non-root peer must still be turned away without an answer.
chmod 0666 "$CTL"
out=$(setpriv --reuid=_agrippa --regid=_agrippa --clear-groups "$AGRIPPACTL" -s "$CTL" status 2>&1)
rc=$?
chmod 0600 "$CTL"
check "a non-root peer is refused by SO_PEERCRED even when the mode lets it connect" \
	sh -c "[ $rc -eq 2 ] && ! echo '$out' | grep -q running"
wait_for 5 grep -q "control: refused connection from uid $(id -u _agrippa)" "$LOG"
check "... and the refusal is logged with the uid" [ $? -eq 0 ]
for kind in garbage oversized wrongtype badbody unknowncmd badargs; do
	r=$("$TOOLS/ctlraw" "$CTL" $kind)
	check "control: a $kind request gets an error reply ($r)" [ $? -eq 0 ]
done
check "control: the daemon still answers after bad requests" "$AGRIPPACTL" -s "$CTL" status >/dev/null
for role in engine httpd proxy egress; do
	eval "old=\$PID_$role"
	check "control: bad requests left $role alone" [ "$(child_pid $role)" = "$old" ]
done

# --- restarts --------------------------------------------------------------------
for role in engine httpd proxy egress; do
	old=$(child_pid $role)
	kill -KILL "$old"
	wait_for 10 sh -c "p=\$(. tests/integration/lib.sh; SUP_PID=$SUP_PID; child_pid $role); [ -n \"\$p\" ] && [ \"\$p\" != $old ]"
	check "SIGKILL of $role gets it restarted" [ $? -eq 0 ]
	wait_for 10 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ]"
	check "/healthz answers 200 again after $role was killed" [ $? -eq 0 ]
done

# --- the embedded postgres is supervised too ---------------------------------------
PM=$(head -1 "$T/state/pg/postmaster.pid")
kill -KILL "$PM"
wait_for 40 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ] && [ \"\$(head -1 '$T/state/pg/postmaster.pid' 2>/dev/null)\" != $PM ]"
check "SIGKILL of postgres gets it restarted and /healthz answers 200 again" [ $? -eq 0 ]
check "status counts the postgres restart" sh -c "'$AGRIPPACTL' -s '$CTL' status | grep -q '^postgres .* 1  running'"

# An idle supervisor sleeps, even after its children's channels and its
# database connections were closed
# (a prepared sandbox, cloned before, must not keep them registered in the
# event loop, where a dead peer's socket is ready for ever)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
sleep 1
c0=$(cpu_ticks "$SUP_PID")
sleep 3
c1=$(cpu_ticks "$SUP_PID")
check "the idle supervisor used $((c1 - c0)) of 300 clock ticks in 3 s after the restarts of its children and postgres (at most 30)" \
	[ $((c1 - c0)) -le 30 ]


# --- protocol violations from a compromised child ----------------------------------
inject() { # inject ROLE KIND: the child loses its channel and is restarted
	role=$1
	victim=$(child_pid "$role")
	others=""
	for r in engine httpd proxy egress; do [ "$r" = "$role" ] || others="$others $r:$(child_pid $r)"; done
	"$TOOLS/chaninject" "$victim" "$2"
	wait_for 10 sh -c "p=\$(. tests/integration/lib.sh; SUP_PID=$SUP_PID; child_pid $role); [ -n \"\$p\" ] && [ \"\$p\" != $victim ]"
	check "$role sending a $2 frame is restarted" [ $? -eq 0 ]
	for o in $others; do
		check "... and ${o%%:*} keeps running" [ "$(child_pid "${o%%:*}")" = "${o#*:}" ]
	done
	wait_for 10 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ]"
	check "... and /healthz answers 200 again" [ $? -eq 0 ]
}
# proc_age PID: whole seconds since the process started (/proc/PID/stat
# field 22, in clock ticks since boot).  The supervisor's p->started is
# time(NULL) when it forked the child, so the same instant.
proc_age() {
	awk -v hz="$(getconf CLK_TCK)" -v up="$(cut -d' ' -f1 /proc/uptime)" \
		'{ sub(/^.*\) /, ""); print int(up - $20 / hz) }' "/proc/$1/stat"
}
inject httpd forbidden
# The engine's second failure (the first was its SIGKILL above): its restart
# delay doubles to 2 s, unless this engine had been up SUP_STABLE_SECS (60)
# when the supervisor reaped it (supervisor/proc.c proc_reaped), which a slow
# machine can reach here; then its backoff starts again at 1 s.  Its age at
# the reaping is between its age before the injection and that plus the
# time the injection and restart took (+1 for the whole seconds).
EPID=$(child_pid engine)
EAGE_MIN=$(proc_age "$EPID")
ET0=$(date +%s)
inject engine garbage
EAGE_MAX=$((EAGE_MIN + $(date +%s) - ET0 + 1))
if [ "$EAGE_MAX" -lt 59 ]; then
	EDELAY=2
elif [ "$EAGE_MIN" -ge 61 ]; then
	EDELAY=1
else
	EDELAY="[12]" # reaped about 60 s after its start: either is right
fi
inject proxy oversized
check "restarts back off exponentially: the engine's second failure, up $EAGE_MIN..$EAGE_MAX s, waits $EDELAY s (2 s, or 1 s after 60 s up)" \
	grep -q "engine (pid $EPID) .*restarting in $EDELAY s" "$LOG"
hp=$(child_pid httpd)
"$TOOLS/chaninject" "$hp" denied-op
wait_for 5 grep -q "not permitted for httpd" "$LOG"
check "an op the role may not call is refused" [ $? -eq 0 ]
check "... without taking the daemon down" [ "$(healthz_code)" = 200 ]

# --- reload ---------------------------------------------------------------------
cp "$CONF" "$T/good.yaml"
echo "listen: 42" >>"$CONF"
kill -HUP "$SUP_PID"
wait_for 5 grep -q "configuration not changed" "$LOG"
check "SIGHUP with a broken config keeps the old one" [ $? -eq 0 ]
check "... and keeps serving" [ "$(healthz_code)" = 200 ]
err=$("$AGRIPPACTL" -s "$CTL" reload 2>&1)
rc=$?
check "agrippactl reload of a broken config exits 1 and names file:line:col" \
	sh -c "[ $rc -eq 1 ] && echo '$err' | grep -q '$CONF:[0-9]*:[0-9]*: '"
NEWPORT=$((PORT + 1))
sed "s/\"127.0.0.1:$PORT\"/\"127.0.0.1:$PORT\", \"127.0.0.1:$NEWPORT\"/" "$T/good.yaml" >"$CONF"
check "agrippactl reload adding a listen address" "$AGRIPPACTL" -s "$CTL" reload
wait_for 15 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$NEWPORT/healthz)\" = 200 ]"
check "reload adds the new listen address" [ $? -eq 0 ]
check "... and keeps the one it already held" [ "$(healthz_code)" = 200 ]
sed "s/127.0.0.1:$PORT/127.0.0.1:$NEWPORT/" "$T/good.yaml" >"$CONF"
check "agrippactl reload dropping the first address" "$AGRIPPACTL" -s "$CTL" reload
wait_for 15 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 000 ]"
check "reload closes the address no longer listed" [ $? -eq 0 ]
check "... and httpd serves the one that stays" [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$NEWPORT/healthz)" = 200 ]

# --- stop --------------------------------------------------------------------
check "agrippactl stop" "$AGRIPPACTL" -s "$CTL" stop
i=0
while kill -0 "$SUP_PID" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
wait "$SUP_PID"
rc=$?
SUP_PID=""
check "the daemon exits 0 on stop" [ $rc -eq 0 ]
check "no process of ours is left" [ -z "$(our_processes)" ]
check "no postgres of ours is left" sh -c "! pgrep -u _agrippadb -f '$T/state/pg' >/dev/null"
check "the control socket is removed" [ ! -e "$CTL" ]
check "the pidfile is removed" [ ! -e "$T/agrippad.pid" ]

# --- second start on the same state; SIGTERM ---------------------------------------
cp "$T/good.yaml" "$CONF"
KEYSUM=$(sha256sum "$KEY")
if start_daemon; then ok "a second start on the same state directory works"; else notok "a second start on the same state directory works"; fi
check "the master key is reused, not replaced" [ "$(sha256sum "$KEY")" = "$KEYSUM" ]
HOSTID=$(cat "$T/state/host-id")
check "the host id is made once and kept: 32 lower-case hex digits" \
	sh -c "printf '%s\n' '$HOSTID' | grep -Eqx '[0-9a-f]{32}'"
stop_daemon
check "SIGTERM: exit status 0" [ "$DAEMON_STATUS" -eq 0 ]
check "SIGTERM: no process of ours is left" [ -z "$(our_processes)" ]
check "SIGTERM: no postgres of ours is left" sh -c "! pgrep -u _agrippadb -f '$T/state/pg' >/dev/null"
check "SIGTERM: no stale socket or pidfile" [ ! -e "$CTL" ] && [ ! -e "$T/agrippad.pid" ]

# --- a host id that is not one: a clear refusal, nothing started ------------------
# start_bad WHAT: the daemon refuses to start, naming STATE/host-id
start_bad() {
	"$AGRIPPAD" -d -f "$CONF" >"$T/bad.log" 2>&1 &
	p=$!
	i=0
	while kill -0 "$p" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 "$p" 2>/dev/null; then
		kill -KILL "$p" $(children_of "$p") 2>/dev/null
		notok "$1: the daemon did not refuse to start"
		return
	fi
	wait "$p"
	rc=$?
	check "$1: the daemon refuses to start ($rc), naming the file ($(grep -m1 host-id "$T/bad.log"))" \
		sh -c "[ $rc -ne 0 ] && grep -q '$T/state/host-id' '$T/bad.log'"
	check "$1: ... and left nothing running" [ -z "$(our_processes)" ]
}
printf 'not-a-host-id\n' >"$T/state/host-id"
start_bad "a host-id of other characters"
printf '%s' "$HOSTID" >"$T/state/host-id"
start_bad "a host-id without its newline"
printf '%s\n' "$HOSTID" | tr a-f A-F >"$T/state/host-id"
start_bad "a host-id in upper case"
rm -f "$T/state/host-id"
printf '%s\n' "$HOSTID" >"$T/hostid.elsewhere"
ln -s "$T/hostid.elsewhere" "$T/state/host-id"
start_bad "a host-id that is a symbolic link"
check "... which was not followed or changed" [ "$(cat "$T/hostid.elsewhere")" = "$HOSTID" ]
rm -f "$T/state/host-id"
printf '%s\n' "$HOSTID" >"$T/state/host-id"
if start_daemon; then ok "with its host id put back the daemon starts"; else notok "with its host id put back the daemon starts"; fi
stop_daemon

if grep -q "ERROR: AddressSanitizer\|runtime error:" "$LOG"; then
	notok "no sanitizer report in the daemon log"
	grep -A20 "AddressSanitizer\|runtime error:" "$LOG" | head -60
else
	ok "no sanitizer report in the daemon log"
fi
[ "$T_FAIL" -eq 0 ] || { echo "--- daemon log"; tail -80 "$LOG"; }
finish daemon
