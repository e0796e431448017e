#!/bin/sh
# Browser sessions against the real daemon (docs/api.md, "Sessions"): an
# API token traded for an HttpOnly, SameSite=Strict cookie (Secure, with the
# __Host- prefix, when public_url is https); only its hash stored; every
# state-changing request with the cookie refused with 403, and nothing
# changed, without its X-CSRF-Token, with a wrong one or one of another
# session, or from another origin; sessions that expire, end with DELETE,
# and die at once with their token or user; all of it audited, no secret in
# the log.  Failed logins are limited per client address and for all
# together: a burst of wrong tokens (sent at once) gets 429 with
# Retry-After, a right token from that address too, one from another address
# works, bearer tokens are untouched, one audit row per episode, and the
# Retry-After is honest.  Also the dashboard's static files: the strict CSP and the other
# headers, strong ETags and 304s, nothing outside the loaded files.
. tests/integration/lib.sh
need_root api_session
make_env
echo "ui_dir: $ROOT/ui" >>"$CONF"
echo "engine: { concurrency: 0, sweep: 3600 }" >>"$CONF"
trap cleanup_env EXIT

start_daemon_or_finish api_session
URL="http://127.0.0.1:$PORT"
ORIGIN="Origin: $URL"

# req METHOD PATH [curl args...]: sets CODE, BODY; headers in $T/hdrs.
req() {
	m=$1 p=$2
	shift 2
	rm -f "$T/body"
	CODE=$(curl -s -o "$T/body" -D "$T/hdrs" -w '%{http_code}' -g --max-time 10 -X "$m" "$@" \
		"$URL$p")
	BODY=$(cat "$T/body" 2>/dev/null)
}
# login TOKEN [curl args]: POST /v1/session; sets CODE, BODY, COOKIE (the
# whole name=value), CSRF.
login() {
	tok=$1
	shift
	req POST /v1/session -H 'Content-Type: application/json' -d "{\"token\": \"$tok\"}" "$@"
	COOKIE=$(header Set-Cookie | cut -d';' -f1)
	CSRF=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("csrf_token",""))' 2>/dev/null)
}
jget() { printf '%s' "$BODY" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>/dev/null; }
errcode() { jget "d['error']['code']"; }
members() { psql_q "select count(*) from memberships"; }

ctl user add alice && ctl user add bob && ctl user add carol && ctl project add p1 &&
	ctl member add p1 alice admin && ctl member add p1 carol admin
check "set-up" [ $? -eq 0 ]
P1=$(psql_q "select id from projects where name = 'p1'")
TA=$(new_token alice)
TC=$(new_token carol)

# --- logging in ----------------------------------------------------------------------------
login agr_notavalidtokenatall
check "a wrong token: 401 unauthorized, no cookie, nothing stored" \
	[ "$CODE" = 401 -a "$(errcode)" = unauthorized -a -z "$COOKIE" \
	  -a "$(psql_q 'select count(*) from browser_sessions')" = 0 ]
login "not a token"
check "a malformed token: 401" [ "$CODE" = 401 -a -z "$COOKIE" ]
req POST /v1/session -H 'Content-Type: application/json' -d '{"token": "x", "extra": 1}'
check "an unknown member in the login body: 422 unknown_field" [ "$CODE" = 422 ]
login "$TA" -H "Origin: http://evil.example"
check "a login from another origin: 403 cross_origin, nothing stored" \
	[ "$CODE" = 403 -a "$(errcode)" = cross_origin -a -z "$COOKIE" \
	  -a "$(psql_q 'select count(*) from browser_sessions')" = 0 ]
login "$TA" -H "Sec-Fetch-Site: cross-site"
check "a login a browser calls cross-site: 403" [ "$CODE" = 403 -a -z "$COOKIE" ]

login "$TA" -H "$ORIGIN"
SC=$(header Set-Cookie)
check "login: 200 with a CSRF token and the user" \
	[ "$CODE" = 200 -a ${#CSRF} -eq 43 -a "$(jget "d['user']")" = alice ]
check "the cookie: agrippa_session=ags_..., HttpOnly, SameSite=Strict, Path=/, Max-Age, no Secure ($SC)" \
	sh -c "printf '%s' '$SC' | grep -Eq '^agrippa_session=ags_[A-Za-z0-9_-]{43}; Path=/; Max-Age=4(3200|319[0-9]); HttpOnly; SameSite=Strict$'"
check "no cache may keep the login's answer" [ "$(header Cache-Control)" = no-store ]
SECRET=${COOKIE#agrippa_session=}
check "only the session's SHA-256 is stored, never the secret" \
	[ "$(psql_q "select count(*) from browser_sessions where octet_length(session_hash) = 32
	             and user_id = (select id from users where name = 'alice')")" = 1 \
	  -a "$(psql_q "select count(*) from browser_sessions where position('$SECRET'::bytea in session_hash) > 0")" = 0 ]
check "the login is audited (session.create, by alice)" \
	[ "$(psql_q "select count(*) from audit_log a join users u on u.id = a.actor_user_id
	             where a.action = 'session.create' and u.name = 'alice'")" = 1 ]

# --- the cookie authenticates every /v1 route -------------------------------------------------
req GET /v1/me -H "Cookie: $COOKIE"
check "GET /v1/me with the cookie: 200, alice" [ "$CODE" = 200 -a "$(jget "d['name']")" = alice ]
req GET "/v1/projects/$P1/members" -H "Cookie: other=1; $COOKIE; x=y"
check "the cookie among others: 200" [ "$CODE" = 200 ]
req GET /v1/session -H "Cookie: $COOKIE"
check "GET /v1/session gives the page its CSRF token again" \
	[ "$CODE" = 200 -a "$(jget "d['csrf_token']")" = "$CSRF" -a "$(jget "d['session']")" = True ]
for how in "Authorization: Bearer $TA" "Cookie: agrippa_session=ags_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" "X-None: 1"; do
	req GET /v1/session -H "$how"
	check "GET /v1/session with ${how%%:*} but no good session: 200 {\"session\": false}" \
		[ "$CODE" = 200 -a "$BODY" = '{"session":false}' ]
done
req GET /v1/me -H "Cookie: agrippa_session=ags_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
check "a forged cookie: 401" [ "$CODE" = 401 -a "$(errcode)" = unauthorized ]
req GET /v1/me -H "Cookie: agrippa_session=${SECRET}x"
check "a cookie too long: 401" [ "$CODE" = 401 ]
req GET /v1/me -H "Cookie: $COOKIE" -H "Authorization: Bearer $TC"
check "a bearer token wins over the cookie" [ "$CODE" = 200 -a "$(jget "d['name']")" = carol ]

# --- CSRF and Origin on state-changing requests -------------------------------------------------
add_bob() { # add_bob [curl args]: POST a membership with alice's cookie
	req POST "/v1/projects/$P1/members" -H "Cookie: $COOKIE" -H 'Content-Type: application/json' \
		-d '{"user": "bob", "role": "viewer"}' "$@"
}
before=$(members)
add_bob -H "$ORIGIN"
check "no X-CSRF-Token: 403 csrf" [ "$CODE" = 403 -a "$(errcode)" = csrf ]
add_bob -H "$ORIGIN" -H "X-CSRF-Token: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
check "a wrong X-CSRF-Token: 403 csrf" [ "$CODE" = 403 -a "$(errcode)" = csrf ]
add_bob -H "$ORIGIN" -H "X-CSRF-Token: ${CSRF}A"
check "a CSRF token too long: 403" [ "$CODE" = 403 ]
saved_cookie=$COOKIE saved_csrf=$CSRF
login "$TA"
other_csrf=$CSRF
COOKIE=$saved_cookie CSRF=$saved_csrf
add_bob -H "$ORIGIN" -H "X-CSRF-Token: $other_csrf"
check "the CSRF token of another session of the same user: 403" [ "$CODE" = 403 ]
add_bob -H "Origin: http://evil.example" -H "X-CSRF-Token: $CSRF"
check "another Origin: 403 cross_origin" [ "$CODE" = 403 -a "$(errcode)" = cross_origin ]
add_bob -H "Origin: null" -H "X-CSRF-Token: $CSRF"
check "Origin: null: 403" [ "$CODE" = 403 ]
add_bob -H "X-CSRF-Token: $CSRF"
check "neither Origin nor Sec-Fetch-Site: 403" [ "$CODE" = 403 -a "$(errcode)" = cross_origin ]
add_bob -H "Sec-Fetch-Site: same-site" -H "X-CSRF-Token: $CSRF"
check "Sec-Fetch-Site: same-site: 403" [ "$CODE" = 403 ]
add_bob -H "$ORIGIN" -H "Sec-Fetch-Site: cross-site" -H "X-CSRF-Token: $CSRF"
check "our Origin but Sec-Fetch-Site: cross-site: 403" [ "$CODE" = 403 ]
check "none of the refused requests changed anything" [ "$(members)" = "$before" ]
add_bob -H "$ORIGIN" -H "X-CSRF-Token: $CSRF"
check "the CSRF token and our Origin: 201, bob added" [ "$CODE" = 201 -a "$(members)" = $((before + 1)) ]
req DELETE "/v1/memberships/$(jget "d['membership_id']")" -H "Cookie: $COOKIE" -H "Sec-Fetch-Site: same-origin" \
	-H "X-CSRF-Token: $CSRF"
check "Sec-Fetch-Site: same-origin without Origin: accepted ($CODE)" [ "$CODE" = 200 -a "$(members)" = "$before" ]
req POST "/v1/projects/$P1/members" -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
	-d '{"user": "bob", "role": "viewer"}' -H "Origin: http://evil.example"
check "a bearer token needs neither CSRF token nor Origin" [ "$CODE" = 201 ]

# --- ending: DELETE, expiry, a revoked token, a disabled user ---------------------------------------
req DELETE /v1/session -H "Cookie: $COOKIE"
check "DELETE /v1/session without the CSRF token: 403, the session lives on" \
	[ "$CODE" = 403 -a "$(curl -s -o /dev/null -w '%{http_code}' -H "Cookie: $COOKIE" "$URL/v1/me")" = 200 ]
req DELETE /v1/session -H "Cookie: $COOKIE" -H "$ORIGIN" -H "X-CSRF-Token: $CSRF"
check "DELETE /v1/session: 200, the cookie cleared" \
	[ "$CODE" = 200 -a "$(jget "d['ended']")" = True ] && \
	check "the clearing Set-Cookie has Max-Age=0" sh -c "tr -d '\r' <'$T/hdrs' | grep -q '^Set-Cookie: agrippa_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict$'"
req GET /v1/me -H "Cookie: $COOKIE"
check "an ended session: 401 at once (its answer was cached)" [ "$CODE" = 401 ]
check "the end is audited (session.end)" \
	[ "$(psql_q "select count(*) from audit_log where action = 'session.end'")" = 1 ]

login "$TA" -H "$ORIGIN"
req GET /v1/me -H "Cookie: $COOKIE"
a=$CODE
psql_q "update browser_sessions set expires_at = now() where ended_at is null" >/dev/null
req GET /v1/me -H "Cookie: $COOKIE"
check "an expired session: 401 at once ($a before)" [ "$a" = 200 -a "$CODE" = 401 ]

psql_q "update browser_sessions set expires_at = now() - interval '2 days', created_at = now() - interval '3 days'
        where expires_at <= now()" >/dev/null
n=$(psql_q "select count(*) from browser_sessions")
login "$TA" -H "$ORIGIN"
check "a login deletes its user's sessions dead for over a day ($n before, then $(psql_q "select count(*) from browser_sessions"))" \
	[ "$(psql_q "select count(*) from browser_sessions where expires_at < now() - interval '1 day'")" = 0 ]
req GET /v1/me -H "Cookie: $COOKIE"
a=$CODE
ctl token revoke "$(prefix "$TA")"
req GET /v1/me -H "Cookie: $COOKIE"
check "its token revoked: the session is refused at once ($a before)" [ "$a" = 200 -a "$CODE" = 401 ]
login "$TA"
check "a revoked token cannot log in" [ "$CODE" = 401 -a -z "$COOKIE" ]

login "$TC" -H "$ORIGIN"
req GET /v1/me -H "Cookie: $COOKIE"
a=$CODE
ctl user disable carol
req GET /v1/me -H "Cookie: $COOKIE"
check "its user disabled: refused at once ($a before)" [ "$a" = 200 -a "$CODE" = 401 ]

# --- the dashboard's files ---------------------------------------------------------------------
req GET /
CSP=$(header Content-Security-Policy)
check "GET /: 200 text/html" [ "$CODE" = 200 -a "$(header Content-Type)" = "text/html; charset=utf-8" ]
check "the CSP: default-src 'self', no inline script or eval, frame-ancestors 'none' ($CSP)" \
	sh -c "printf '%s' \"\$1\" | grep -q \"^default-src 'self'; script-src 'self';\" &&
	       printf '%s' \"\$1\" | grep -q \"frame-ancestors 'none'\" &&
	       ! printf '%s' \"\$1\" | grep -q unsafe" sh "$CSP"
check "nosniff and no-referrer" \
	[ "$(header X-Content-Type-Options)" = nosniff -a "$(header Referrer-Policy)" = no-referrer ]
ETAG=$(header ETag)
check "a strong ETag ($ETAG)" sh -c "printf '%s' '$ETAG' | grep -Eq '^\"[0-9a-f]{32}\"$'"
req GET / -H "If-None-Match: $ETAG"
check "If-None-Match with it: 304, no body" [ "$CODE" = 304 -a -z "$BODY" ]
req GET / -H "If-None-Match: \"x\", $ETAG"
check "If-None-Match with a list holding it: 304" [ "$CODE" = 304 ]
req GET / -H "If-None-Match: W/$ETAG"
check "a weak validator does not match a strong one" [ "$CODE" = 200 ]
req GET /ui/app.js
check "a module: text/javascript, the CSP too" \
	[ "$CODE" = 200 -a "$(header Content-Type)" = "text/javascript; charset=utf-8" -a -n "$(header Content-Security-Policy)" ]
for p in /ui/nothing.js /ui/../agrippad.yaml /ui/%2e%2e/agrippad.yaml /ui/ /ui/.hidden /index.html; do
	req GET "$p"
	check "GET $p: 404" [ "$CODE" = 404 ]
done
req POST / -H 'Content-Type: application/json' -d '{}'
check "POST /: 405" [ "$CODE" = 405 ]

# --- the login limit: failed logins per address and for all -----------------------------------
# from (client address) and a token: the status, the Retry-After and the
# error code, on one line
# (from_send ADDRESS TOKEN TAG sends only, from_show TAG says: a few
# requests can then go within the bucket's 6 s, however slow the parsing)
from_send() {
	curl -s -o "$T/lim.$3" -D "$T/limh.$3" -w '%{http_code}' --max-time 10 --interface "$1" \
		-H 'Content-Type: application/json' -d "{\"token\": \"$2\"}" "$URL/v1/session" >"$T/limc.$3"
}
from_show() {
	ra=$(tr -d '\r' <"$T/limh.$1" | sed -n 's/^Retry-After: //Ip')
	printf '%s %s %s\n' "$(cat "$T/limc.$1")" "${ra:--}" \
		"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error", {}).get("code", "-"))' "$T/lim.$1" 2>/dev/null)"
}
from() {
	from_send "$1" "$2" "$1"
	from_show "$1"
}
WRONG=agr_0000000000000000000000000000000000000000000
TL=$(new_token alice)
SESS0=$(psql_q "select count(*) from browser_sessions")
# 30 wrong tokens from 127.0.0.3 at once (the burst is 10)
: >"$T/burst"
i=0
pids=""
while [ $i -lt 30 ]; do
	curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 --interface 127.0.0.3 -H 'Content-Type: application/json' \
		-d "{\"token\": \"$WRONG\"}" "$URL/v1/session" >>"$T/burst" &
	pids="$pids $!"
	i=$((i + 1))
done
# shellcheck disable=SC2086 # pids: a list
wait $pids
from_send 127.0.0.3 "$WRONG" wrong3
from_send 127.0.0.3 "$TL" right3
check "a burst of 30 wrong tokens sent at once from one address: 10 are looked at (401), 20 refused (429) ($(sort "$T/burst" | uniq -c | tr '\n' ' '))" \
	[ "$(grep -c '^401$' "$T/burst")" = 10 -a "$(grep -c '^429$' "$T/burst")" = 20 ]
set -- $(from_show wrong3)
case "$2" in [1-6]) ra=whole ;; *) ra=bad ;; esac
check "another: 429 too_many_logins with Retry-After in whole seconds, 1 to 6 ($*)" \
	[ "$1 $3 $ra" = "429 too_many_logins whole" ]
set -- $(from_show right3)
RA=$2
check "the right token from that address is refused as well, nothing stored ($*)" \
	[ "$1" = 429 -a "$(psql_q "select count(*) from browser_sessions")" = "$SESS0" ]
set -- $(from 127.0.0.4 "$TL")
check "the right token from another address logs in ($*)" [ "$1" = 200 ]
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --interface 127.0.0.3 -H "Authorization: Bearer $TL" "$URL/v1/me")
check "bearer tokens from the limited address still work ($CODE)" [ "$CODE" = 200 ]
check "one audit row (session.rate_limited, the address, scope address), not one per refusal" \
	[ "$(psql_q "select count(*) from audit_log where action = 'session.rate_limited' and actor_kind = 'system'
		and object_kind = 'client' and object_id = '127.0.0.3' and remote_addr = '127.0.0.3'
		and detail->>'scope' = 'address' and (detail->>'retry_after')::int between 1 and 6")" = 1 ]
sleep "$RA"
set -- $(from 127.0.0.3 "$TL")
check "after Retry-After ($RA s), the right token from that address logs in ($*)" [ "$1" = 200 ]

# For all addresses together: 14 addresses with 10 wrong tokens each (each
# under its own limit, 140 over the limit of all), then at once the right
# token from 5 addresses never seen: the limit of all refuses them (a token
# that came back meanwhile, one every 0.6 s, can let one through).  The 5
# go from one curl, in parallel, so that they arrive together: sent by 5
# processes on a loaded machine, they came one after another, and a right
# token let through gives its token back before the next one arrived.
pids=""
j=1
while [ $j -le 14 ]; do
	(k=0; while [ $k -lt 10 ]; do
		curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 --interface "127.1.0.$j" \
			-H 'Content-Type: application/json' -d "{\"token\": \"$WRONG\"}" "$URL/v1/session"
		k=$((k + 1))
	done >"$T/flood.$j") &
	pids="$pids $!"
	j=$((j + 1))
done
# shellcheck disable=SC2086 # pids: a list
wait $pids
set --
for j in 1 2 3 4 5; do
	[ $j = 1 ] || set -- "$@" --next
	set -- "$@" -s -o "$T/fresh.$j" -w "$j %{http_code} %header{retry-after}\\n" --max-time 10 \
		--interface "127.2.0.$j" -H 'Content-Type: application/json' -d "{\"token\": \"$TL\"}" "$URL/v1/session"
done
curl -s --parallel --parallel-immediate --parallel-max 5 "$@" >"$T/fresh"
while read -r j code ra; do
	printf '%s %s %s\n' "$code" "${ra:--}" \
		"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("error", {}).get("code", "-"))' "$T/fresh.$j" 2>/dev/null)"
done <"$T/fresh" >"$T/fresh.all"
FLOOD=$(cat "$T"/flood.* | sort | uniq -c | tr '\n' ' ')
FRESH=$(tr '\n' ',' <"$T/fresh.all")
check "140 wrong tokens from 14 addresses ($FLOOD), then the right token from 5 new ones: 4 or 5 are 429 with Retry-After 1 ($FRESH)" \
	[ "$(cat "$T"/flood.* | grep -c '^429$')" -ge 30 -a "$(grep -c '^429 1 too_many_logins$' "$T/fresh.all")" -ge 4 ]
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $TL" "$URL/v1/me")
check "bearer tokens still work meanwhile ($CODE)" [ "$CODE" = 200 ]
check "audited once: session.rate_limited, scope all" \
	[ "$(psql_q "select count(*) from audit_log where action = 'session.rate_limited'
		and detail->>'scope' = 'all' and (detail->>'retry_after')::int = 1")" = 1 ]
sleep 1
set -- $(from 127.2.1.1 "$TL")
check "a second later a right token logs in again ($*)" [ "$1" = 200 ]

# --- public_url https: Secure and __Host- -------------------------------------------------------
stop_daemon
echo "public_url: https://Agrippa.Example:8443/" >>"$CONF"
start_daemon_or_finish api_session
TB=$(new_token bob)
login "$TB" -H "$ORIGIN"
check "over https, a login from the http origin is refused" [ "$CODE" = 403 ]
login "$TB" -H "Origin: https://agrippa.example:8443"
SC=$(header Set-Cookie)
check "over https: __Host-agrippa_session ... ; Secure ($SC)" \
	sh -c "printf '%s' '$SC' | grep -Eq '^__Host-agrippa_session=ags_[A-Za-z0-9_-]{43}; Path=/; Max-Age=[0-9]+; HttpOnly; SameSite=Strict; Secure$'"
req GET /v1/me -H "Cookie: $COOKIE"
check "the __Host- cookie authenticates" [ "$CODE" = 200 ]
req GET /v1/me -H "Cookie: agrippa_session=${COOKIE#*=}"
check "the same secret under the plain name does not" [ "$CODE" = 401 ]

# --- configuration --------------------------------------------------------------------------
for bad in "public_url: ftp://x.example" "public_url: https://x.example/app" \
	"public_url: https://u@x.example" "public_url: https://x.example:0" "session_lifetime: 59" \
	"ui_dir: relative/ui"; do
	sed -e '/^public_url:/d' -e '/^ui_dir:/d' "$CONF" >"$T/bad.yaml"
	echo "$bad" >>"$T/bad.yaml"
	out=$("$AGRIPPAD" -n -f "$T/bad.yaml" 2>&1)
	key=${bad%%:*}
	check "agrippad -n refuses '$bad', naming $key" sh -c "printf '%s' \"\$1\" | grep -q \":[0-9]*:[0-9]*: $key: \"" sh "$out"
done

check "no token and no session secret in the log" \
	sh -c "! grep -qF -e '$TA' -e '$TC' -e '$TB' -e '$SECRET' '$LOG'"
stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" -eq 0 ]
finish api_session
