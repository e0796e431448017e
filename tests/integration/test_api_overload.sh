#!/bin/sh
# httpd under a database that does not answer: with PostgreSQL stopped
# (SIGSTOP), requests wait for it; once as many wait as httpd lets wait
# (CHILD_DB_PENDING_MAX, 4096), the next ones are refused at once with
# 429 too_many_requests and Retry-After, and the waiting ones get 503
# after the 5 s database timeout.  When PostgreSQL runs again, so does the
# API, with nothing left behind.
. tests/integration/lib.sh
need_root api_overload
make_env
PG=""
# shellcheck disable=SC2086
trap '[ -n "$PG" ] && kill -CONT $PG 2>/dev/null; cleanup_env' EXIT
ulimit -n 16384 2>/dev/null

start_daemon_or_finish api_overload
# the postmaster of this test's cluster and every backend it started
PM=$(pgrep -u _agrippadb -f "postgres -D $T/state/pg")
PG="$PM $(pgrep -P "$PM" | tr '\n' ' ')"
check "the embedded PostgreSQL's processes are known" [ -n "$PM" -a "$(echo $PG | wc -w)" -gt 4 ]
# shellcheck disable=SC2086
kill -STOP $PG
python3 tests/tools/http_flood.py "$PORT" 4600 /healthz >"$T/flood" 2>&1
rc=$?
# shellcheck disable=SC2086
kill -CONT $PG
cat "$T/flood" | sed 's/^/# /'
count() { awk -v k="$1" '$1 == k { print $2 }' "$T/flood"; }
check "every connection got an answer" [ "$rc" = 0 -a "$(count closed)" = 0 ]
check "4096 waited and got 503 after the database timeout" [ "$(count 503)" = 4096 ]
check "the rest were refused at once: 429" [ "$(count 429)" = 504 ]
check "... each with Retry-After: 1" [ "$(count retry-after)" = 504 ]
check "nothing answered 200 while the database was stopped" [ -z "$(count 200)" ]
i=0
while [ "$(healthz_code)" != 200 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
check "the API answers again once the database does" [ "$(healthz_code)" = 200 ]
python3 tests/tools/http_flood.py "$PORT" 500 /healthz >"$T/flood" 2>&1
check "... 500 requests at once: all 200" [ "$(count 200)" = 500 ]
check "httpd was not restarted" [ "$(grep -c 'httpd (pid [0-9]*) exited' "$LOG")" = 0 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish api_overload
