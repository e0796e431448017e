#!/bin/sh
# The per-user request limit (agrippad.conf(5) api): one user flooding the
# API with 600 requests at once gets the burst through and 429
# too_many_requests with Retry-After for the rest, while another user's
# requests, made meanwhile, are all answered; after a pause the flooding
# user is served again at the rate; a reload that changes the limit
# restarts httpd with the new one, and user_rate 0 sets none.
. tests/integration/lib.sh
need_root api_userlimit
make_env
trap cleanup_env EXIT
ulimit -n 4096 2>/dev/null
cat >>"$CONF" <<EOC
api: { user_rate: 5, user_burst: 40 }
EOC
start_daemon_or_finish api_userlimit
ctl user add alice && ctl user add bob && ctl project add p1 && ctl member add p1 alice member &&
	ctl member add p1 bob member
TA=$(new_token alice)
TB=$(new_token bob)
check "set-up: two users, each with a token" [ -n "$TA" -a -n "$TB" ]

# her token looked up once before (it takes one of her 40): the flood's
# requests are then limited as they come, not as 600 lookups come back
curl -s -o /dev/null -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/me"
python3 tests/tools/http_flood.py "$PORT" 600 /v1/projects "Authorization: Bearer $TA" >"$T/flood" 2>&1 &
FLOOD=$!
# bob, while alice floods: one request every 50 ms
: >"$T/bob"
i=0
while [ $i -lt 20 ]; do
	curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $TB" \
		"http://127.0.0.1:$PORT/v1/projects" >>"$T/bob"
	sleep 0.05
	i=$((i + 1))
done
wait $FLOOD
sed 's/^/# alice: /' "$T/flood"
count() { awk -v k="$1" '$1 == k { print $2 }' "$T/flood"; }
OK=$(count 200)
check "the flooding user gets her burst and what the rate adds, no more (${OK:-0} of 600 answered 200)" \
	[ "${OK:-0}" -ge 39 -a "${OK:-0}" -le 59 ]
check "... and 429 for every other request" [ "$(count 429)" = $((600 - ${OK:-0})) ]
check "... each 429 with Retry-After" [ "$(count retry-after)" = "$(count 429)" ]
check "the other user's 20 requests, made meanwhile, are all answered 200" \
	[ "$(grep -c '^200$' "$T/bob")" = 20 ]
# the bucket emptied, then requests one by one until one is refused: a
# request made a fifth of a second after the flood finds a new token
python3 tests/tools/http_flood.py "$PORT" 60 /v1/projects "Authorization: Bearer $TA" >/dev/null 2>&1
i=0
while [ $i -lt 20 ]; do
	curl -s -D "$T/hdrs" -o "$T/body" -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/projects"
	head -1 "$T/hdrs" | grep -q ' 429' && break
	i=$((i + 1))
done
check "a refused request: 429 too_many_requests, Retry-After in seconds" \
	sh -c "head -1 '$T/hdrs' | grep -q ' 429' && grep -q '\"too_many_requests\"' '$T/body' && [ \"\$(tr -d '\r' <'$T/hdrs' | sed -n 's/^Retry-After: //p')\" -ge 1 ]"
sleep 2
check "after 2 s the flooding user is served again (10 more at 5 a second)" \
	[ "$(python3 tests/tools/http_flood.py "$PORT" 30 /v1/projects "Authorization: Bearer $TA" | awk '$1 == 200 { print $2 }')" -ge 9 ]

# a reload to no limit: httpd restarts with it
sed -i 's/^api: .*/api: { user_rate: 0, user_burst: 1 }/' "$CONF"
OLD=$(child_pid httpd)
"$AGRIPPACTL" -s "$CTL" reload >/dev/null 2>&1
wait_for 10 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ]"
NEW=$(child_pid httpd)
check "a reload changing api restarts httpd ($OLD -> $NEW)" [ -n "$NEW" -a "$NEW" != "$OLD" ]
python3 tests/tools/http_flood.py "$PORT" 300 /v1/projects "Authorization: Bearer $TA" >"$T/flood" 2>&1
check "with user_rate 0 no request of the user is refused ($(count 200) of 300)" [ "$(count 200)" = 300 ]
finish api_userlimit
