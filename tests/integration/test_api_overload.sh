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
# A waiting request's slot is freed by its 5 s timeout, so one that httpd
# takes after the first timeout (a slow flood: ASan, a loaded machine) may
# wait and get 503 too: at least 4096 get 503, and the split is exact
# when the flood is quick.  The bound is the peak: the 503s answered
# within 3 s (under the 5 s they wait) all waited at the same time, so
# there are never more than 4096 of them, however slow the flood; when
# all of them came within 3 s, that makes the split exactly 4096 / 504.
n503=$(count 503)
n429=$(count 429)
check "at least 4096 waited and got 503 after the database timeout ($n503)" [ "${n503:-0}" -ge 4096 ]
check "the rest were refused at once: 429 ($n429)" \
	[ "${n429:-0}" -gt 0 -a $((${n503:-0} + ${n429:-0})) = 4600 ]
check "... each with Retry-After: 1" [ "$(count retry-after)" = "${n429:-0}" ]
check "never more than 4096 waited at once: at most 4096 503s within 3 s ($(count peak-503))" \
	[ "$(count peak-503)" -le 4096 ] 2>/dev/null
if [ "$(count peak-503)" = "$n503" ]; then
	check "... every 503 within 3 s: exactly 4096 waited, 504 were refused" \
		[ "$n503 $n429" = "4096 504" ]
else
	ok "... every 503 within 3 s: exactly 4096 waited, 504 were refused # SKIP the flood outlasted the timeout"
fi
check "nothing answered 200 while the database was stopped" [ -z "$(count 200)" ]
i=0
while [ "$(healthz_code)" != 200 ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
check "the API answers again once the database does" [ "$(healthz_code)" = 200 ]
python3 tests/tools/http_flood.py "$PORT" 500 /healthz >"$T/flood" 2>&1
check "... 500 requests at once: all 200" [ "$(count 200)" = 500 ]
check "httpd was not restarted" [ "$(grep -c 'httpd (pid [0-9]*) exited' "$LOG")" = 0 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish api_overload
