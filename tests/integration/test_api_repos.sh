#!/bin/sh
# Repository connections over the API: admins add them with a token that
# is write-only.  httpd holds no key: the supervisor seals the token
# (IMSG_REPO_SEAL) and httpd stores only ciphertext and nonce; the token is
# in no response, no log line, no audit row, and no longer in httpd's or
# the supervisor's memory once the request is answered.  Bad names and URLs
# (credentials in a URL included) are refused by field, and a refusal
# writes nothing.
. tests/integration/lib.sh
need_root api_repos
make_env
trap cleanup_env EXIT

start_daemon_or_finish api_repos

: >"$T/bodies"
# api TOKEN METHOD PATH [curl args]: CODE and BODY (every body kept)
api() {
	tok=$1 m=$2 p=$3
	shift 3
	rm -f "$T/body"
	CODE=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 10 -X "$m" \
		-H "Authorization: Bearer $tok" "$@" "http://127.0.0.1:$PORT$p")
	BODY=$(cat "$T/body" 2>/dev/null)
	printf '%s\n' "$BODY" >>"$T/bodies"
}
jq_() { printf '%s' "$BODY" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)" 2>/dev/null; }
expect() { # expect CODE PYEXPR DESCRIPTION
	if [ "$CODE" = "$1" ] && jq_ "$2"; then ok "$3"; else notok "$3 (got $CODE: $(printf '%s' "$BODY" | head -c 300))"; fi
}
J='Content-Type: application/json'
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
counts() { psql_q "select (select count(*) from repo_connections) || ' ' || (select count(*) from audit_log)"; }

ctl user add alice && ctl user add mona && ctl user add vic && ctl user add nora &&
	TA=$(new_token alice) && TM=$(new_token mona) && TV=$(new_token vic) && TN=$(new_token nora) &&
	ctl project add p1 && ctl project add p2 && ctl member add p1 alice admin &&
	ctl member add p1 mona member && ctl member add p1 vic viewer && ctl member add p2 nora admin
check "set-up" [ $? -eq 0 ]
P1=$(psql_q "select id from projects where name = 'p1'")
SECRET="ghp_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# the memory searches look for its last 32 characters: a freed copy loses
# its first bytes to the allocator's bookkeeping, not its tail
TAIL=$(printf '%s' "$SECRET" | cut -c21-)

# --- refusals first: nothing written -----------------------------------------------------
BEFORE=$(counts)
api "$TM" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"web\",\"url\":\"https://g.example/a.git\",\"token\":\"$SECRET\"}"
expect 403 "d['error']['code'] == 'forbidden'" "a member may not add a repository: 403"
api "$TV" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"https://g.example/a.git"}'
expect 403 "d['error']['code'] == 'forbidden'" "a viewer may not: 403"
api "$TN" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"https://g.example/a.git"}'
expect 404 "d['error']['code'] == 'not_found'" "an admin of another project: 404"
for u in "https://user:pw@g.example/a.git" "http://g.example/a.git" "ssh://g.example/a.git" \
	"relative/path" "https://g.example/a b" "" "git@g.example:a.git"; do
	api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"web\",\"url\":\"$u\"}"
	expect 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'url'" \
		"url '$u': 422 invalid_field url"
done
for n in "Web" "-web" "" "a/b" "$(printf 'n%.0s' $(seq 65))"; do
	api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"$n\",\"url\":\"/srv/x\"}"
	expect 422 "d['error']['field'] == 'name'" "name '$(printf '%s' "$n" | cut -c1-10)': 422 invalid_field name"
done
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"/srv/x","token":""}'
expect 422 "d['error']['field'] == 'token'" "an empty token: 422 invalid_field token"
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" \
	-d "{\"name\":\"web\",\"url\":\"/srv/x\",\"token\":\"$(head -c 4097 /dev/zero | tr '\0' 'x')\"}"
expect 422 "d['error']['field'] == 'token'" "a token over 4096 bytes: 422"
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"/srv/x","token":5}'
expect 422 "d['error']['code'] == 'invalid_field'" "a token that is not a string: 422"
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"/srv/x","user":"x"}'
expect 422 "d['error']['code'] == 'unknown_field'" "an unknown member: 422"
for f in '"GitHub"' '"bitbucket"' '""'; do
	api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"web\",\"url\":\"/srv/x\",\"forge\":$f}"
	expect 422 "d['error']['field'] == 'forge'" "forge $f: 422 invalid_field forge"
done
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"/srv/x","forge":1}'
expect 422 "d['error']['code'] == 'invalid_field'" "a forge that is not a string: 422"
for u in http://h.example/api https://u:p@h.example/api "https://h.example/api?x=1" "https://h.example/api#f" \
	"https://h.example/%41pi" "https://h.example/../x" https:// ""; do
	api "$TA" POST "/v1/projects/$P1/repos" -H "$J" \
		-d "{\"name\":\"web\",\"url\":\"https://g.example/o/r.git\",\"forge\":\"github\",\"api_url\":\"$u\"}"
	expect 422 "d['error']['field'] == 'api_url' and 'api_url' in d['error']['message']" "api_url '$u': 422 invalid_field api_url"
done
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"web","url":"/srv/x","api_url":"https://h.example/api"}'
expect 422 "d['error']['field'] == 'api_url'" "an api_url without a forge (none for a path): 422"
for u in /srv/x https://g.example/only-one.git https://g.example/a/b/c.git; do
	api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"web\",\"url\":\"$u\",\"forge\":\"github\"}"
	expect 422 "d['error']['field'] == 'url'" "a GitHub connection whose url names no OWNER/REPO ($u): 422 invalid_field url"
done
check "no refusal wrote anything" [ "$(counts)" = "$BEFORE" ]

# --- an admin adds one with a token ----------------------------------------------------------
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"web\",\"url\":\"https://g.example/a.git\",\"token\":\"$SECRET\"}"
expect 201 "d['name'] == 'web' and d['has_token'] is True and set(d) == {'id','name','url','has_token','forge','api_url','created_at'} and d['forge'] == 'none' and d['api_url'] is None" \
	"an admin adds a repository with a token: 201, has_token, no token, forge none"
RID=$(printf '%s' "$BODY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# right away, before other requests reuse the memory that held it
HTTPD=$(child_pid httpd)
if "$TOOLS/memgrep" "$HTTPD" "$(hex 'application/json')" >/dev/null; then
	ok "memgrep finds a known string in httpd"
else notok "memgrep finds a known string in httpd"; fi
if "$TOOLS/memgrep" "$HTTPD" "$(hex "$TAIL")"; then
	notok "no copy of the token is left in httpd's memory"
else ok "no copy of the token is left in httpd's memory"; fi
if "$TOOLS/memgrep" "$SUP_PID" "$(hex "$TAIL")"; then
	notok "no copy of the token is left in the supervisor's memory"
else ok "no copy of the token is left in the supervisor's memory"; fi
check "stored sealed: ciphertext is the token's length + 16, a 24-byte nonce, not the token" \
	[ "$(psql_q "select octet_length(token_ciphertext) = ${#SECRET} + 16 and octet_length(token_nonce) = 24
	             and position(convert_to('$SECRET', 'UTF8') in token_ciphertext) = 0
	             from repo_connections where id = '$RID'")" = t ]
check "two sealings never share a nonce" [ "$(psql_q "select count(distinct token_nonce) = count(token_nonce) from repo_connections")" = t ]
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d "{\"name\":\"web\",\"url\":\"/srv/y\"}"
expect 409 "d['error']['code'] == 'repo_exists'" "the same name again: 409 repo_exists"
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"local","url":"file:///srv/repo"}'
expect 201 "d['has_token'] is False" "one without a token: 201, has_token false"
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" -d '{"name":"gh","url":"https://github.com/o/r.git"}'
expect 201 "d['forge'] == 'github' and d['api_url'] is None" "one on github.com: forge github"
api "$TA" POST "/v1/projects/$P1/repos" -H "$J" \
	-d '{"name":"gl","url":"https://git.example/g/p.git","forge":"gitlab","api_url":"https://Git.Example:443/api/v4/"}'
expect 201 "d['forge'] == 'gitlab' and d['api_url'] == 'https://git.example/api/v4'" "a self-hosted GitLab with its API, normalised"
api "$TV" GET "/v1/projects/$P1/repos"
expect 200 "sorted(r['name'] for r in d['repos']) == ['gh', 'gl', 'local', 'web'] and all('token' not in r for r in d['repos']) and [r['forge'] for r in d['repos']] == ['github', 'gitlab', 'none', 'none']" \
	"a viewer lists them, without tokens, with their forges"
check "the audit rows say whether there is a token, not what it is" \
	[ "$(psql_q "select string_agg(detail->>'token', ',' order by id) from audit_log where action = 'repo.add'")" = "true,false,false,false" ]

# --- the token is nowhere it should not be -----------------------------------------------------
check "... nor in any response" [ "$(grep -c "$SECRET" "$T/bodies")" = 0 ]
check "... nor in the log" [ "$(grep -c "$SECRET" "$LOG")" = 0 ]
check "... nor in the audit log" [ "$(psql_q "select count(*) from audit_log where detail::text like '%$SECRET%'")" = 0 ]

# --- removal ------------------------------------------------------------------------------------
api "$TM" DELETE "/v1/repos/$RID"
expect 403 "d['error']['code'] == 'forbidden'" "a member may not remove it: 403"
api "$TN" DELETE "/v1/repos/$RID"
expect 404 "d['error']['code'] == 'not_found'" "an admin of another project: 404"
api "$TA" DELETE "/v1/repos/$RID"
expect 200 "d == {'removed': '$RID'}" "the admin removes it: 200"
api "$TA" DELETE "/v1/repos/$RID"
expect 404 "True" "removing it again: 404"
check "... with an audit row" [ "$(psql_q "select count(*) from audit_log where action = 'repo.remove' and object_id = '$RID'")" = 1 ]

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish api_repos
