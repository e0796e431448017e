#!/bin/sh
# The git helper against the real daemon: agrippactl repo test has the
# supervisor open the repository's sealed token and hand it to a transient
# agrippa-git process that clones into a scratch workspace and reports the
# commit.  It runs as the service user (a repository only root can read
# fails), leaves no scratch directory and no process behind, refuses what it
# should, and no copy of the token stays in the supervisor's memory.
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
wait_for 10 no_scratch
check "no scratch workspace is left behind" no_scratch
check "no git helper is left running" [ -z "$(pgrep -f "$T" -a 2>/dev/null | grep agrippa-git)" ]

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

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish git_helper
