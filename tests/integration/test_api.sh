#!/bin/sh
# The /v1 API foundation against the real daemon: bearer authentication
# (every refusal the same 401), RBAC in the SQL of each operation (a project
# one is not a member of is a 404 like an unknown one), routing (404, 405
# with Allow), request bodies (413, 415, 400, 422), template validation, and
# that bad requests change nothing and no token reaches the log.
. tests/integration/lib.sh
need_root api
make_env
trap cleanup_env EXIT

start_daemon_or_finish api

# new_token USER [DAYS]: prints the token (shown once by agrippactl).
# api TOKEN METHOD PATH [curl args...]: sets CODE, BODY; headers in $T/hdrs.
api() {
	tok=$1 m=$2 p=$3
	shift 3
	[ -n "$tok" ] && set -- -H "Authorization: Bearer $tok" "$@"
	rm -f "$T/body" # curl creates it only when a body arrives
	CODE=$(curl -s -o "$T/body" -D "$T/hdrs" -w '%{http_code}' -g --max-time 10 -X "$m" "$@" \
		"http://127.0.0.1:$PORT$p")
	BODY=$(cat "$T/body" 2>/dev/null)
}
# expect CODE PYEXPR DESCRIPTION: the status is CODE and the Python
# expression holds for d, the JSON body.
expect() {
	if [ "$CODE" = "$1" ] && printf '%s' "$BODY" | python3 -c \
		"import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)" 2>/dev/null; then
		ok "$3"
	else
		notok "$3 (got $CODE: $(printf '%s' "$BODY" | head -c 400))"
	fi
}
counts() {
	psql_q "select (select count(*) from users) || ' ' || (select count(*) from projects) || ' ' ||
	        (select count(*) from memberships) || ' ' || (select count(*) from audit_log) || ' ' ||
	        (select count(*) from templates) || ' ' || (select count(*) from api_tokens)"
}
ERR401="d['error']['code'] == 'unauthorized' and set(d) == {'error'}"

# --- set-up ------------------------------------------------------------------------
ctl user add alice "Alice Liddell" && ctl user add bob && ctl user add carol &&
	TA=$(new_token alice) && TB=$(new_token bob) && TC=$(new_token carol) &&
	TR=$(new_token bob) && TE=$(new_token bob 1) &&
	ctl token revoke "$(prefix "$TR")" && ctl user disable carol &&
	ctl project add p1 && ctl project add p2 &&
	ctl member add p1 alice admin && ctl member add p1 bob viewer && ctl member add p2 alice member &&
	ctl template load templates/run-tests.yaml
check "set-up: users, tokens, projects, members, a template" [ $? -eq 0 ]
psql_q "update api_tokens set created_at = now() - interval '2 days',
        expires_at = now() - interval '1 day' where prefix = '$(prefix "$TE")'" >/dev/null
check "set-up: one of bob's tokens has expired" \
	[ "$(psql_q "select expires_at < now() from api_tokens where prefix = '$(prefix "$TE")'")" = t ]
P1=$(psql_q "select id from projects where name = 'p1'")
P2=$(psql_q "select id from projects where name = 'p2'")
BEFORE=$(counts)

# --- authentication ------------------------------------------------------------------
api "" GET /v1/me
expect 401 "$ERR401" "no Authorization header: 401 unauthorized"
check "... with WWW-Authenticate: Bearer" [ "$(header WWW-Authenticate)" = Bearer ]
FIRST401=$BODY
for h in "Basic YWxpY2U6cHc=" "Bearer" "Bearer " "Bearer $TA extra" "Token $TA" "Bearer xyz_abc" \
	"Bearer agr_" "Bearer agr_!!!!"; do
	api "" GET /v1/me -H "Authorization: $h"
	expect 401 "$ERR401" "malformed header '$(printf '%s' "$h" | cut -c1-16)...': 401"
done
check "... with WWW-Authenticate: Bearer" [ "$(header WWW-Authenticate)" = Bearer ]
UNKNOWN=agr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
for t in "unknown:$UNKNOWN" "revoked:$TR" "expired:$TE" "disabled user:$TC"; do
	api "${t#*:}" GET /v1/me
	expect 401 "$ERR401" "${t%%:*} token: 401"
	check "... the same body as every other refusal" [ "$BODY" = "$FIRST401" ]
	check "... with WWW-Authenticate: Bearer" [ "$(header WWW-Authenticate)" = Bearer ]
done
api "" POST /v1/templates/validate -H 'Content-Type: text/plain' -d 'x'
expect 401 "$ERR401" "authentication comes before body checks"

# --- me and projects -----------------------------------------------------------------
api "$TA" GET /v1/me
expect 200 "d['name'] == 'alice' and d['display_name'] == 'Alice Liddell' and len(d['id']) == 36 and
	sorted((p['name'], p['role']) for p in d['projects']) == [('p1', 'admin'), ('p2', 'member')] and
	all(set(p) == {'id', 'name', 'role'} for p in d['projects'])" "/v1/me for alice: her projects and roles"
check "... last_used_at of alice's token is set" \
	[ "$(psql_q "select last_used_at is not null from api_tokens where prefix = '$(prefix "$TA")'")" = t ]
api "$TB" GET /v1/me
expect 200 "d['name'] == 'bob' and d['display_name'] == '' and
	[(p['id'], p['name'], p['role']) for p in d['projects']] == [('$P1', 'p1', 'viewer')]" \
	"/v1/me for bob: p1 as viewer only"
api "$TA" GET /v1/projects
expect 200 "[(p['name'], p['role']) for p in d['projects']] == [('p1', 'admin'), ('p2', 'member')]" \
	"/v1/projects for alice: p1 and p2"
api "$TB" GET /v1/projects
expect 200 "[(p['id'], p['role']) for p in d['projects']] == [('$P1', 'viewer')]" "/v1/projects for bob: p1 only"
api "$TB" GET "/v1/projects/$P1"
expect 200 "d['id'] == '$P1' and d['name'] == 'p1' and d['role'] == 'viewer'" "/v1/projects/P1 for bob"
api "$TB" GET "/v1/projects/$(printf '%s' "$P1" | tr a-f A-F)"
expect 200 "d['id'] == '$P1'" "... also with the UUID in upper case"
api "$TB" GET "/v1/projects/$P2"
expect 404 "d['error']['code'] == 'not_found'" "/v1/projects/P2 is 404 for bob (not a member)"
NOTMEMBER=$BODY
api "$TB" GET /v1/projects/00000000-0000-4000-8000-000000000000
expect 404 "d['error']['code'] == 'not_found'" "an unknown project id is 404"
check "... exactly like a project bob may not see" [ "$BODY" = "$NOTMEMBER" ]
api "$TA" GET "/v1/projects/$P2"
expect 200 "d['name'] == 'p2' and d['role'] == 'member'" "/v1/projects/P2 for alice"
api "$TB" GET "/v1/projects/$P1/members"
expect 200 "[(m['name'], m['role']) for m in d['members']] == [('alice', 'admin'), ('bob', 'viewer')]" \
	"a viewer reads the members of p1"
api "$TB" GET "/v1/projects/$P2/members"
expect 404 "d['error']['code'] == 'not_found'" "the members of p2 are 404 for bob"
for bad in not-a-uuid "${P1}0" "$(printf '%s' "$P1" | cut -c1-35)" "$(printf '%s' "$P1" | tr - _)" \
	"{$P1}" "$(printf '%s' "$P1" | sed 's/^./g/')"; do
	api "$TA" GET "/v1/projects/$bad"
	expect 404 "d['error']['code'] == 'not_found'" "a bad project id '$bad' is 404"
done

# --- routing -------------------------------------------------------------------------
for p in /v1 /v1/nope /v1/projects/ "/v1/projects/$P1/" "/v1/projects/$P1/members/x" /V1/me //v1/me; do
	api "$TA" GET "$p"
	expect 404 "d['error']['code'] == 'not_found' and 'message' in d['error']" "unknown route $p is 404"
done
api "$TA" DELETE /v1/projects
expect 405 "d['error']['code'] == 'method_not_allowed'" "DELETE /v1/projects is 405"
check "... with Allow: GET, HEAD" [ "$(header Allow)" = "GET, HEAD" ]
api "$TA" PUT /v1/templates/validate -H 'Content-Type: application/json' -d '{}'
expect 405 "d['error']['code'] == 'method_not_allowed'" "PUT /v1/templates/validate is 405"
check "... with Allow: GET, HEAD, POST" [ "$(header Allow)" = "GET, HEAD, POST" ]
api "" POST /healthz
expect 405 "d['error']['code'] == 'method_not_allowed'" "POST /healthz is still 405"

# --- templates -----------------------------------------------------------------------
api "$TB" GET /v1/templates
expect 200 "[(t['name'], t['version']) for t in d['templates']] == [('run-tests', 1)] and
	d['templates'][0]['description'].startswith('Run the test suite') and d['templates'][0]['loaded_at']" \
	"/v1/templates lists run-tests 1"
api "$TB" GET /v1/templates/run-tests
expect 200 "d['name'] == 'run-tests' and d['version'] == 1 and d['template']['name'] == 'run-tests' and
	d['template']['phases'][0]['steps'][0]['id'] == 'run-tests'" "/v1/templates/run-tests: the compiled template"
for n in nosuch validate; do
	api "$TB" GET "/v1/templates/$n"
	expect 404 "d['error']['code'] == 'not_found'" "/v1/templates/$n is 404"
done
for n in Run-tests -x run_tests "$(printf 'a%.0s' $(seq 65))"; do
	api "$TB" GET "/v1/templates/$n"
	expect 404 "d['error']['code'] == 'not_found'" "a bad template name '$(printf '%s' "$n" | cut -c1-12)' is 404"
done

# --- request bodies ------------------------------------------------------------------
V=/v1/templates/validate
J='Content-Type: application/json'
python3 -c "import json; print(json.dumps({'source': 'x' * (1024 * 1024)}))" >"$T/big.json"
api "$TA" POST "$V" -H "$J" --data-binary @"$T/big.json"
check "a body over 1 MiB is 413 ($CODE)" [ "$CODE" = 413 ]
api "$TA" POST "$V" -H 'Content-Type: text/plain' -d '{"source": ""}'
expect 415 "d['error']['code'] == 'unsupported_media_type'" "Content-Type text/plain is 415"
api "$TA" POST "$V" -d '{"source": ""}'
expect 415 "d['error']['code'] == 'unsupported_media_type'" "a form content type is 415"
api "$TA" POST "$V" -H 'Content-Type: application/jsonx' -d '{"source": ""}'
expect 415 "d['error']['code'] == 'unsupported_media_type'" "application/jsonx is 415"
api "$TA" POST "$V" -H "$J" --data-binary "$(printf '{\n  "source": nope}')"
expect 400 "d['error']['code'] == 'bad_json' and 'line 2' in d['error']['message'] and 'column' in d['error']['message']" \
	"malformed JSON is 400 bad_json with line and column"
for b in '' '[]' '"x"' '{"source": "a", "source": "b"}' '{"source": "a"} {}' "$(printf '{"source": "\377"}')"; do
	api "$TA" POST "$V" -H "$J" --data-binary "$b"
	expect 400 "d['error']['code'] == 'bad_json'" "body '$b' is 400 bad_json"
done
api "$TA" POST "$V" -H "$J" -d '{"source": "x", "extra": 1}'
expect 422 "d['error']['code'] == 'unknown_field' and d['error']['field'] == 'extra' and 'extra' in d['error']['message']" \
	"an unknown field is 422 unknown_field naming it"
api "$TA" POST "$V" -H "$J" -d '{}'
expect 422 "d['error']['code'] == 'missing_field' and d['error']['field'] == 'source'" "a missing field is 422"
api "$TA" POST "$V" -H "$J" -d '{"source": 5}'
expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'source'" "a field of the wrong type is 422"

# --- template validation -------------------------------------------------------------
for f in templates/*.yaml; do
	python3 -c "import json,sys; print(json.dumps({'source': open(sys.argv[1]).read()}))" "$f" >"$T/t.json"
	api "$TB" POST "$V" -H 'Content-Type: application/json; charset=utf-8' --data-binary @"$T/t.json"
	expect 200 "d['valid'] is True and d['template']['name'] == '$(basename "$f" .yaml)'" \
		"validate accepts the shipped $f"
done
cat >"$T/bad.yaml" <<'EOY'
name: Bad
version: 0
workspace: { repo: "${params.nope}" }
phases:
  - name: p
    steps:
      - { id: a, kind: command, run: "echo ${env.HOME}", prompt: "x" }
      - { id: a, kind: teleport }
EOY
python3 -c "import json,sys; print(json.dumps({'source': open(sys.argv[1]).read()}))" "$T/bad.yaml" >"$T/t.json"
api "$TA" POST "$V" -H "$J" --data-binary @"$T/t.json"
"$AGRIPPACTL" template check "$T/bad.yaml" 2>&1 | sed "s|^$T/bad.yaml:|template:|" >"$T/want"
expect 422 "d['error']['code'] == 'invalid_template' and len(d['error']['details']) >= 6 and
	all(__import__('re').match(r'^template:[0-9]+:[0-9]+: ', e) for e in d['error']['details']) and
	d['error']['details'] == open('$T/want').read().splitlines()" \
	"a broken template is 422 invalid_template with every error, as agrippactl template check reports them"
api "$TA" POST "$V" -H "$J" -d '{"source": "name: [unclosed"}'
expect 422 "d['error']['code'] == 'invalid_template' and d['error']['details'][0].startswith('template:')" \
	"a YAML syntax error is 422 with its position"

# --- clients that hang up while their database call is in flight ---------------------
python3 - "$PORT" "$TA" "$P1" <<'EOP'
import socket, sys
port, tok, p1 = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(50):
    c = socket.create_connection(("127.0.0.1", port))
    path = ["/v1/me", "/v1/projects/" + p1 + "/members", "/v1/templates"][i % 3]
    c.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % (path, tok)).encode())
    c.close()
EOP
check "requests from clients that hung up were sent" [ $? -eq 0 ]
sleep 1
api "$TA" GET /v1/me
expect 200 "d['name'] == 'alice'" "httpd still answers after clients hung up mid-request"

# --- nothing changed, nothing leaked, still healthy -----------------------------------
check "the bad requests changed nothing (users projects memberships audit_log templates tokens)" \
	[ "$(counts)" = "$BEFORE" ]
ROUTES=$(sed -n 's/^[[:space:]]*{ EVHTTP_REQ_\([A-Z]*\), *"\(\/[^"]*\)".*/\1 \2/p' httpd/router.c)
check "the router table has routes" [ -n "$ROUTES" ]
missing=$(printf '%s\n' "$ROUTES" | while read -r m p; do grep -qF "$m $p" docs/api.md || echo "$m $p"; done)
check "every route of the router table is in docs/api.md${missing:+ (missing: $missing)}" [ -z "$missing" ]
for c in unauthorized not_found method_not_allowed too_large unsupported_media_type bad_json \
	unknown_field missing_field invalid_field invalid_template unavailable internal; do
	check "docs/api.md documents the error code $c" grep -q "\`$c\`" docs/api.md
done
check "/healthz is 200 at the end" [ "$(healthz_code)" = 200 ]
check "the daemon log holds no token" sh -c "! grep -q -e '$TA' -e '$TB' -e '$TC' -e '$TR' -e '$TE' '$LOG'"
stop_daemon
check "the daemon stops cleanly (exit 0)" [ "$DAEMON_STATUS" -eq 0 ]
if grep -q "ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer" "$LOG"; then
	notok "no sanitizer report in the daemon log"
	grep -A30 "Sanitizer\|runtime error:" "$LOG" | head -60
else
	ok "no sanitizer report in the daemon log"
fi
check "httpd was never killed (by seccomp or otherwise) nor restarted" \
	sh -c "[ \"\$(grep -c 'httpd started' '$LOG')\" = 1 ] && ! grep -q 'killed by signal' '$LOG'"
[ "$T_FAIL" -eq 0 ] || { echo "--- daemon log"; tail -60 "$LOG"; }
finish api
