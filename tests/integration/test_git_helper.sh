#!/bin/sh
# The git helper against the real daemon: agrippactl repo test has the
# supervisor open the repository's sealed token and hand it to a transient
# agrippa-git process that clones into a scratch workspace and reports the
# commit.  It runs as the service user (a repository only root can read
# fails), leaves no scratch directory and no process behind, refuses what it
# should, and no copy of the token stays in the supervisor's memory.
# repo list and status show the connections' mirrors (size, last fetch),
# the same after a restart of the daemon.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
need_root git_helper
make_env
trap cleanup_env EXIT

start_daemon_or_finish git_helper

run() { "$AGRIPPACTL" -s "$CTL" "$@" >"$T/out" 2>&1; RC=$?; OUT=$(cat "$T/out"); }
MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos"
chmod 0755 "$T/repos"
BASE=$("$MKREPO" "$T/repos/clean")
HBASE=$("$MKREPO" "$T/repos/hostile" hostile)
check "test repositories made" [ -n "$BASE" -a -n "$HBASE" ]
chmod -R a+rX "$T/repos"
TOKEN="tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"

run project add p1
printf '%s' "$TOKEN" | "$AGRIPPACTL" -s "$CTL" repo add p1 clean "$T/repos/clean" >/dev/null 2>&1
"$AGRIPPACTL" -s "$CTL" repo add p1 url "file://$T/repos/clean" </dev/null >/dev/null 2>&1
"$AGRIPPACTL" -s "$CTL" repo add p1 hostile "$T/repos/hostile" </dev/null >/dev/null 2>&1
"$AGRIPPACTL" -s "$CTL" repo add p1 missing "$T/repos/none" </dev/null >/dev/null 2>&1
check "set-up: a project and four repositories" [ "$(psql_q "select count(*) from repo_connections")" = 4 ]

run repo test p1 clean
check "repo test of a local repository (with a token): exit 0 ($OUT)" [ $RC -eq 0 ]
check "... it names the commit it checked out" [ "$OUT" = "repo clean: checked out commit $BASE" ]
run repo test p1 url
check "a file:// URL works the same way" [ $RC -eq 0 -a "$OUT" = "repo url: checked out commit $BASE" ]
run repo test p1 hostile
check "a repository shipping .claude, .mcp.json and .agrippa -> /: checked out ($OUT)" \
	[ $RC -eq 0 -a "$OUT" = "repo hostile: checked out commit $HBASE" ]
check "... / is intact" [ -f /etc/passwd ]
# the scratch workspace is removed in the background once the helper is done
no_scratch() { [ -z "$(ls -A "$T/state/work" 2>/dev/null)" ]; }
wait_for 60 no_scratch
check "no scratch workspace is left behind" no_scratch
# Spares: helpers started ahead while the daemon is busy, waiting for a
# request; they hold nothing, and an idle daemon drops them before they
# would give up waiting.
spares() { pgrep -P "$SUP_PID" -x agrippa-git | wc -l; }
run repo test p1 clean
has_spares() { [ "$(spares)" -ge 1 ]; }
wait_for 5 has_spares
check "after the helper, spares wait for the next request ($(spares))" has_spares
SPARE=$(pgrep -P "$SUP_PID" -x agrippa-git | head -1)
check "... as the service user, with no_new_privs, holding fd 3 and nothing else beyond stdio" \
	[ "$(stat -c %U "/proc/$SPARE")" = _agrippa ] &&
	grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$SPARE/status" &&
	[ "$(ls "/proc/$SPARE/fd" | sort -n | tr '\n' ' ')" = "0 1 2 3 " ]
check "... with nothing in its environment but PATH, HOME and the sanitizers' options" \
	[ -z "$(tr '\0' '\n' <"/proc/$SPARE/environ" | grep -v -e '^PATH=' -e '^HOME=/nonexistent$' -e '^[A-Z]*SAN_OPTIONS=')" ]
no_spares() { [ "$(spares)" = 0 ]; }
wait_for 12 no_spares
check "an idle daemon has dropped its spares" no_spares
check "... before they gave up waiting (nothing in the log from them)" \
	eval '! grep -q "no request from the supervisor" "$LOG"'
check "no git helper is left running" [ -z "$(pgrep -P "$SUP_PID" -x agrippa-git)" ]

run repo test p1 missing
check "a repository that does not exist: exit 1 with libgit2's reason ($OUT)" \
	[ $RC -eq 1 -a "$(printf '%s' "$OUT" | grep -c '^agrippactl: repo missing: clone: ')" = 1 ]
run repo test p1 nosuch
check "an unknown repository: exit 1, named" \
	[ $RC -eq 1 -a "$OUT" = "agrippactl: repo test: no repository nosuch in project p1" ]
run repo test nope clean
check "an unknown project: exit 1" [ $RC -eq 1 ]
run repo test p1
check "a missing argument: exit 1 (usage)" [ $RC -ne 0 ]

# The helper is the service user, not root: a repository only root may read
# cannot be cloned.
"$MKREPO" "$T/repos/rootonly" >/dev/null
chmod -R go-rwx "$T/repos/rootonly"
"$AGRIPPACTL" -s "$CTL" repo add p1 rootonly "$T/repos/rootonly" </dev/null >/dev/null 2>&1
run repo test p1 rootonly
check "a repository only root can read fails: the helper is not root ($OUT)" [ $RC -eq 1 ]
chmod -R go+rX "$T/repos/rootonly"
run repo test p1 rootonly
check "... and works once the service user may read it" [ $RC -eq 0 ]

# The token passed through the supervisor only for these checkouts.
TOKHEX=$(printf '%s' "$TOKEN" | cut -c9- | od -An -tx1 | tr -d ' \n')
if "$TOOLS/memgrep" "$SUP_PID" "$TOKHEX"; then
	notok "no copy of the token is left in the supervisor's memory"
else ok "no copy of the token is left in the supervisor's memory"; fi
check "the token is in no log line" [ "$(grep -c "$TOKEN" "$LOG")" = 0 ]

# agrippa-git itself refuses to be used by hand.
"$ROOT/$BUILD/agrippa-git" x >/dev/null 2>&1
check "agrippa-git with an argument: usage, exit 2" [ $? -eq 2 ]
"$ROOT/$BUILD/agrippa-git" </dev/null >/dev/null 2>&1 3</dev/null
check "agrippa-git without a request from the supervisor: fails" [ $? -ne 0 ]

# --- the mirrors in repo list and status ----------------------------------------
M="$T/state/mirrors"
CLEAN_ID=$(psql_q "select id from repo_connections where name = 'clean'")
run -j repo list p1
printf '%s\n' "$OUT" >"$T/list.json"
# the stamp of each mirror, as repo list should show it: NAME SIZE FETCHED
python3 - "$T/list.json" "$M" "$(psql_q "select name || '=' || id from repo_connections" | tr '\n' ' ')" >"$T/list.check" <<'PY'
import json, os, sys, time
d = json.load(open(sys.argv[1]))["data"]
ids = dict(x.split("=") for x in sys.argv[3].split())
def size(b):
    if b < 1024:
        return "%d B" % b
    u, units = 0, ["KiB", "MiB", "GiB", "TiB"]
    while True:
        rest, b = (b % 1024) * 10 // 1024, b // 1024
        if b < 1024:
            return "%d.%d %s" % (b, rest, units[u])
        u += 1
bad = 0
for r in d["rows"]:
    p = os.path.join(sys.argv[2], ids[r[0]])
    if os.path.isdir(p):
        when, b = open(os.path.join(p, "agrippa-fetched")).read().split()
        want = [size(int(b)), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(when)))]
    else:
        want = ["none", "never"]
    if r[6:] != want:
        bad += 1
        print("# %s: %s, not %s" % (r[0], r[6:], want))
print("mismatches %d" % bad)
PY
check "repo list shows each mirror's size and last fetch from its stamp ($(tail -1 "$T/list.check"))" \
	grep -qx 'mismatches 0' "$T/list.check"
run repo list p1
printf '%s\n' "$OUT" >"$T/list.before"
check "... a connection whose fetch never succeeded: none, never" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^missing  .*  none  *never$'" "$OUT"
check "... a mirror fetched here: a size in KiB and a time in UTC" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^clean  .*  [0-9]*\.[0-9] KiB  *20[0-9-]*T[0-9:]*Z$'" "$OUT"
read -r WHEN BYTES <"$M/$CLEAN_ID/agrippa-fetched"
DU=$(du -s -B1 "$M/$CLEAN_ID" | cut -f1)
check "the stamp's size ($BYTES) is the mirror's on disk ($DU, less the stamp itself)" \
	[ "$BYTES" -le "$DU" -a "$((DU - BYTES))" -le 8192 ]
check "... and its time is this test's" [ "$WHEN" -le "$(date +%s)" -a "$WHEN" -ge "$(($(date +%s) - 600))" ]
NM=$(ls "$M" | grep -c '^[0-9a-f-]*$')
SUM=0
for f in "$M"/*/agrippa-fetched; do read -r _ b <"$f"; SUM=$((SUM + b)); done
run -j status
check "status -j counts the mirrors ($NM) and their bytes ($SUM)" sh -c "printf '%s\n' \"\$0\" | python3 -c '
import json, sys
m = json.load(sys.stdin)[\"data\"][\"mirrors\"]
assert m == {\"count\": $NM, \"bytes\": $SUM}, m'" "$OUT"
run status
check "status prints them as a line ($(printf '%s\n' "$OUT" | grep '^mirrors:'))" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^mirrors: $NM ([0-9.]* [KM]iB)$'" "$OUT"
printf '%s\n' "$OUT" | grep '^mirrors:' >"$T/status.before"
# The figures are on disk: a restart of the daemon shows the same.
stop_daemon
check "the daemon stops" [ "$DAEMON_STATUS" -eq 0 ]
start_daemon_or_finish git_helper
run repo list p1
printf '%s\n' "$OUT" >"$T/list.after"
check "after a restart repo list shows the same mirrors, sizes and times" cmp -s "$T/list.before" "$T/list.after"
run status
check "... and status the same total" \
	[ "$(printf '%s\n' "$OUT" | grep '^mirrors:')" = "$(cat "$T/status.before")" ]
# a planted stamp that is not a regular file, or not a stamp, is no figure
rm -f "$M/$CLEAN_ID/agrippa-fetched"
mkfifo "$M/$CLEAN_ID/agrippa-fetched"
run repo list p1
check "a FIFO for a stamp neither blocks nor counts: the size and time are unknown (-)" \
	sh -c "[ $RC -eq 0 ] && printf '%s\n' \"\$0\" | grep -q '^clean  .*  -  *-$'" "$OUT"
rm -f "$M/$CLEAN_ID/agrippa-fetched"
printf '12 34 56\n' >"$M/$CLEAN_ID/agrippa-fetched"
run repo list p1
check "... nor does a malformed stamp" sh -c "printf '%s\n' \"\$0\" | grep -q '^clean  .*  -  *-$'" "$OUT"
run repo test p1 clean
run repo list p1
check "the next fetch stamps the mirror again" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^clean  .*  [0-9]*\.[0-9] KiB  *20[0-9-]*T[0-9:]*Z$'" "$OUT"

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish git_helper
