#!/bin/sh
# httpd caches token lookups for a few seconds (httpd/authcache.c); every
# change that could make a cached answer wrong must reach httpd at once
# through NOTIFY auth_changed: a token revoked or expired, a user disabled,
# a membership added or removed, and the LISTEN connection coming back
# after notifications were lost.  Each check uses a token that was just
# used successfully (so its answer is cached) and asks again right after
# the change.
. tests/integration/lib.sh
need_root auth_cache
make_env
# runs stay as the API leaves them: this host executes none
# and none changes under the checks: no sweep (expiring approvals, ending
# cancelled runs) runs during the test
echo "engine: { concurrency: 0, sweep: 3600 }" >>"$CONF"
trap cleanup_env EXIT

start_daemon_or_finish auth_cache

code() { # code TOKEN PATH [curl args]
	tok=$1 p=$2
	shift 2
	curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $tok" "$@" \
		"http://127.0.0.1:$PORT$p"
}
PSQL="psql -X -q -A -t -v ON_ERROR_STOP=1 -h $T/state/pgrun -U agrippa agrippa"
export PGPASSWORD
PGPASSWORD=$(cat "$T/state/db.password")

ctl user add alice && ctl user add bob && ctl user add carol && ctl project add p1 &&
	ctl member add p1 alice admin && ctl member add p1 carol member
check "set-up" [ $? -eq 0 ]
P1=$(psql_q "select id from projects where name = 'p1'")

# --- a token revoked right after use: 401 at once, ten times over -------------------------
bad=0
for i in 1 2 3 4 5 6 7 8 9 10; do
	t=$(new_token alice)
	a=$(code "$t" /v1/me)
	b=$(code "$t" /v1/me)
	ctl token revoke "$(prefix "$t")"
	c=$(code "$t" /v1/me)
	[ "$a $b $c" = "200 200 401" ] || { bad=$((bad + 1)); echo "# round $i: $a $b $c"; }
done
check "a token used twice (cached), then revoked: 401 on the very next request (10 rounds)" [ $bad -eq 0 ]

# --- a user disabled ---------------------------------------------------------------------
TB=$(new_token bob)
a=$(code "$TB" /v1/me)
ctl user disable bob
check "a user disabled right after a request: 401 on the next ($a, then $(code "$TB" /v1/me))" \
	[ "$a" = 200 -a "$(code "$TB" /v1/me)" = 401 ]

# --- memberships --------------------------------------------------------------------------
ctl user add dave
TD=$(new_token dave)
a=$(code "$TD" "/v1/projects/$P1")
ctl member add p1 dave viewer
check "a member added right after a cached lookup without that project: 200 at once ($a first)" \
	[ "$a" = 404 -a "$(code "$TD" "/v1/projects/$P1")" = 200 ]
TC=$(new_token carol)
TA=$(new_token alice)
a=$(code "$TC" "/v1/projects/$P1/runs")
MC=$(psql_q "select m.id from memberships m join users u on u.id = m.user_id where u.name = 'carol'")
r=$(code "$TA" "/v1/memberships/$MC" -X DELETE)
check "a member removed over the API (200) right after a cached lookup: 404 at once" \
	[ "$a" = 200 -a "$r" = 200 -a "$(code "$TC" "/v1/projects/$P1/runs")" = 404 ]
a=$(code "$TD" "/v1/projects/$P1/audit")
ctl member role p1 dave admin
check "a role raised right after a cached lookup: the new role at once (403, then 200)" \
	[ "$a" = 403 -a "$(code "$TD" "/v1/projects/$P1/audit")" = 200 ]

# --- expiry -------------------------------------------------------------------------------
TE=$(new_token alice)
$PSQL -c "update api_tokens set expires_at = now() + interval '5 seconds'
          where prefix = '$(prefix "$TE")'"
a=$(code "$TE" /v1/me)
b=$(code "$TE" /v1/me)
sleep 5.5
check "a token that expires while cached: 200 before, 401 after ($a $b)" \
	[ "$a $b" = "200 200" -a "$(code "$TE" /v1/me)" = 401 ]

# --- notifications lost while the LISTEN connection was down ------------------------------
TL=$(new_token alice)
a=$(code "$TL" /v1/me)
n0=$(grep -c 'notify: listening' "$LOG")
# the connection goes, and the token is revoked before it is back
$PSQL -c "select pg_terminate_backend(pid) from pg_stat_activity where query like 'LISTEN %'" >/dev/null
$PSQL -c "update api_tokens set revoked_at = now() where prefix = '$(prefix "$TL")'"
i=0
while [ "$(grep -c 'notify: listening' "$LOG")" -le "$n0" ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
check "the LISTEN connection came back" [ "$(grep -c 'notify: listening' "$LOG")" -gt "$n0" ]
# its flush goes to httpd just after it logs that: refused within 3 s of
# it, well before the cache's 10 s
refused_tl() { [ "$a" = 200 ] && [ "$(code "$TL" /v1/me)" = 401 ]; }
check "a token revoked while it was down: 401 once it is back, not after the cache's 10 s ($a first)" \
	wait_for 3 refused_tl

# --- the cache changes nothing else -------------------------------------------------------
TU=$(new_token alice)
code "$TU" /v1/me >/dev/null
check "last_used_at is still written" \
	[ "$(psql_q "select last_used_at is not null from api_tokens where prefix = '$(prefix "$TU")'")" = t ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish auth_cache
