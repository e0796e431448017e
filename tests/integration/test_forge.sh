#!/bin/sh
# The git helper's forge client (githelper/forge.c) against a fake GitHub
# and GitLab on loopback (tests/fakes/forge.py) that keeps pull requests,
# answers with the forges' real error bodies, and can be told to fail.
#
# tests/tools/forgereq calls gh_forge_pr as the git helper will (the token
# on standard input, in sodium_malloc'd memory), in a mount namespace where
# the test CA is the system's bundle (git_lib.sh): libcurl verifies the
# fake's certificate as it would GitHub's.  The fake logs every request as
# a JSON line (all headers but Authorization, whether Authorization was
# right, whether the token was seen anywhere else, the status it gave);
# GET /_state shows the pull requests it holds.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
. tests/integration/git_lib.sh
need_root forge
need_progs forge openssl python3 unshare curl
make_env
FORGE_PID=""
stop_forge() { [ -z "$FORGE_PID" ] || kill "$FORGE_PID" 2>/dev/null; FORGE_PID=""; }
trap 'stop_forge; cleanup_env' EXIT

FORGEREQ="$TOOLS/forgereq"
TOKEN="tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BAD="bad-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
UA="agrippa/$(sed -n 's/^VERSION *:= *//p' "$ROOT/Makefile")"

check "a throwaway CA and server certificate" make_ca
printf '%s\n' "$TOKEN" >"$T/token"
chmod 0600 "$T/token"
python3 "$ROOT/tests/fakes/forge.py" --cert "$T/tls/srv.crt" --key "$T/tls/srv.key" \
	--token-file "$T/token" --log "$T/forge.log" --ports "$T/fport" \
	--github-repo octo/hello --gitlab-project group/sub/proj >"$T/forge.out" 2>&1 &
FORGE_PID=$!
touch "$T/forge.log"
if ! wait_for 10 test -s "$T/fport"; then
	notok "the fake forge starts"
	cat "$T/forge.out"
	finish forge
	exit 1
fi
ok "the fake forge starts"
read -r FPORT <"$T/fport"
H="127.0.0.1:$FPORT"
GH_API="https://$H/api/v3/"
GH_REPO="https://$H/octo/hello.git"
GL_API="https://$H/api/v4"
GL_REPO="https://$H/group/sub/proj.git"
printf 'What changed, and why.\n' >"$T/body"

# trusted CMD...: CMD in a mount namespace where the test CA is the bundle.
trusted() {
	# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
	unshare -m --propagation private sh -c \
		'mount --bind "$0" "$1" && shift && exec "$@"' "$T/tls/ca.crt" "$BUNDLE" "$@"
}
# pr FORGE API REPO HEAD BASE TITLE BODY_FILE DRAFT NUMBER: forgereq with
# $TOK (the right token unless set), trusted; OUT (stdout), RC; stderr in
# $T/err; every output kept for the token search at the end.
pr() {
	printf '%s\n' "${TOK:-$TOKEN}" | trusted "$FORGEREQ" "$@" >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	cat "$T/out" "$T/err" >>"$T/all-output"
}
gh() { pr github "$GH_API" "$GH_REPO" "$@"; }
gl() { pr gitlab "$GL_API" "$GL_REPO" "$@"; }
# knobs JSON: the fake's knobs (POST /_control).
knobs() { curl -s -f --cacert "$T/tls/ca.crt" -X POST --data "$1" "https://$H/_control"; }
# st EXPR: a Python expression on s, the fake's state (GET /_state), printed.
st() {
	curl -s -f --cacert "$T/tls/ca.crt" "https://$H/_state" >"$T/state.json" &&
		python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
			"$T/state.json" "$1"
}
# mark; logq EXPR: a Python expression on L, the fake's log entries since the mark.
mark() { M=$(wc -l <"$T/forge.log" | tr -d ' '); }
logq() {
	tail -n +"$((M + 1))" "$T/forge.log" | python3 -c '
import json, sys
L = [json.loads(l) for l in sys.stdin if l.strip()]
print(eval(sys.argv[1]))' "$1"
}
is() { [ "$(logq "$1")" = True ]; }
stis() { [ "$(st "$1")" = True ]; }
one_line() { [ "$(printf '%s\n' "$OUT" | wc -l)" -eq 1 ]; }
GHPRS='s["github:octo/hello"]'
GLMRS='s["gitlab:group/sub/proj"]'

# --- GitHub: open, then the same again, then by number ---------------------
mark
gh agrippa/run-1 main "Fix the failing test" "$T/body" 1 0
expect 0 "^ok 1 https://$H/octo/hello/pull/1 opened draft$" "GitHub: a draft pull request is opened"
check "... the fake holds exactly it: head, base, title, body, draft" stis \
	"len($GHPRS) == 1 and $GHPRS[0]['head'] == 'agrippa/run-1' and $GHPRS[0]['base'] == 'main' and $GHPRS[0]['title'] == 'Fix the failing test' and $GHPRS[0]['body'] == 'What changed, and why.\n' and $GHPRS[0]['draft'] is True"
check "... with one POST /api/v3/repos/octo/hello/pulls" is \
	"[(e['method'], e['path'], e['status']) for e in L] == [('POST', '/api/v3/repos/octo/hello/pulls', 201)]"
check "... carrying User-Agent $UA, the API version and GitHub's media type" is \
	"all(e['headers'].get('User-Agent') == '$UA' and e['headers'].get('X-GitHub-Api-Version') == '2022-11-28' and e['headers'].get('Accept') == 'application/vnd.github+json' and e['headers'].get('Content-Type') == 'application/json' for e in L)"
check "... and Authorization: Bearer TOKEN" is "all(e['auth'] == 'ok' for e in L)"

mark
gh agrippa/run-1 main "Fix the failing test, again" "$T/body" 1 0
expect 0 "^ok 1 https://$H/octo/hello/pull/1 updated draft$" \
	"GitHub: the same head again updates pull request 1 (opened 0)"
check "... still exactly one pull request, with the new title" stis \
	"len($GHPRS) == 1 and $GHPRS[0]['title'] == 'Fix the failing test, again'"
check "... after 422 'already exists', a list by head=octo:agrippa/run-1, then PATCH" is \
	"[(e['method'], e['path'].split('?')[0], e['status']) for e in L] == [('POST', '/api/v3/repos/octo/hello/pulls', 422), ('GET', '/api/v3/repos/octo/hello/pulls', 200), ('PATCH', '/api/v3/repos/octo/hello/pulls/1', 200)]"
check "... the list asked for head=OWNER:BRANCH, base and state=open" is \
	"L[1]['path'] == '/api/v3/repos/octo/hello/pulls?head=octo%3Aagrippa%2Frun-1&base=main&state=open'"

mark
printf 'Third body.\n' >"$T/body3"
gh agrippa/run-1 main "Third title" "$T/body3" 1 1
expect 0 "^ok 1 https://$H/octo/hello/pull/1 updated draft$" "GitHub: number 1 given: pull request 1 is updated"
check "... read, then patched, never POSTed" is \
	"[(e['method'], e['path']) for e in L] == [('GET', '/api/v3/repos/octo/hello/pulls/1'), ('PATCH', '/api/v3/repos/octo/hello/pulls/1')]"
check "... title and body are the new ones" stis \
	"len($GHPRS) == 1 and $GHPRS[0]['title'] == 'Third title' and $GHPRS[0]['body'] == 'Third body.\n'"

knobs '{"set_state": {"repo": "octo/hello", "number": 1, "state": "closed"}}'
mark
gh agrippa/run-1 main "Fourth title" "$T/body" 1 1
expect 1 "^error: reading pull request #1: it was closed on GitHub; agrippa neither reopens it nor opens another$" \
	"GitHub: a recorded pull request that was closed is an error, not updated"
check "... it was only read" is "[e['method'] for e in L] == ['GET']"
check "... and keeps its title" stis "$GHPRS[0]['title'] == 'Third title'"
knobs '{"set_state": {"repo": "octo/hello", "number": 1, "state": "merged"}}'
gh agrippa/run-1 main "Fourth title" "$T/body" 1 1
expect 1 "it was merged on GitHub" "GitHub: a merged one too"
gh agrippa/run-9 main "Fourth title" "$T/body" 1 1
expect 1 "error: reading pull request #1: it was merged" "GitHub: a recorded number on another branch is refused (here: merged first)"
knobs '{"set_state": {"repo": "octo/hello", "number": 1, "state": "open"}}'
gh agrippa/run-9 main "Fourth title" "$T/body" 1 1
expect 1 "^error: reading pull request #1: it is for the branch agrippa/run-1, not agrippa/run-9$" \
	"GitHub: a recorded number whose head is another branch is refused"
gh agrippa/run-1 main "T" "$T/body" 1 7
expect 1 "^error: reading pull request #7: GitHub answered 404: Not Found" "GitHub: a recorded number the forge does not know: 404 with its message"

# --- drafts not supported ----------------------------------------------------
knobs '{"drafts_unsupported": true}'
mark
gh agrippa/run-2 main "Second change" "$T/body" 1 0
expect 0 "^ok 2 https://$H/octo/hello/pull/2 opened ready$" \
	"GitHub: drafts unsupported: opened as a normal pull request"
check "... with a note that says so" has \
	"^note: drafts are not supported in this repository: opened as a normal pull request$"
check "... after exactly two POSTs (draft true: 422, draft false: 201)" is \
	"[(e['method'], e['status']) for e in L] == [('POST', 422), ('POST', 201)]"
check "... the fake holds it as no draft" stis "$GHPRS[1]['draft'] is False and len($GHPRS) == 2"
knobs '{"drafts_unsupported": false}'

# --- the forge's refusals ----------------------------------------------------
mark
TOK=$BAD gh agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: opening the pull request: GitHub answered 401: Bad credentials (the connection's token is not valid" \
	"GitHub 401: the forge's own message and the status"
check "... one line" one_line
check "... not retried: one request, whose Authorization the fake refused" is \
	"len(L) == 1 and L[0]['auth'] == 'bad'"

mark
curl -s --cacert "$T/tls/ca.crt" -H "User-Agent:" -H "Authorization: Bearer $TOKEN" \
	-o "$T/noua" -w '%{http_code}' "https://$H/api/v3/repos/octo/hello" >"$T/noua.code"
noua_refused() {
	[ "$(cat "$T/noua.code")" = 403 ] &&
		grep -q "Please make sure your request has a User-Agent header" "$T/noua"
}
check "the fake refuses a request without User-Agent as GitHub does (403, its text)" noua_refused
check "... and logged it without one" is "len(L) == 1 and 'User-Agent' not in L[0]['headers']"
knobs '{"faults": [{"status": 403, "count": 1}]}'
mark
gh agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: opening the pull request: GitHub answered 403: fault 403 (the token may not do this" \
	"GitHub 403 (not a rate limit): a failure with the message, not retried"
check "... after one request" is "len(L) == 1"

mark
pr github "$GH_API" "https://$H/octo/nope.git" agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: opening the pull request: GitHub answered 404: Not Found (no such repository, or the token cannot see it)$" \
	"GitHub 404 (an unknown repository): its message and a hint"

knobs '{"no_commits": ["agrippa/empty"]}'
gh agrippa/empty main "T" "$T/body" 0 0
expect 1 "^error: opening the pull request: nothing to propose: agrippa/empty has no commit that main lacks" \
	"GitHub 422 'No commits between': a clear failure"
check "... and no pull request for it" stis "all(p['head'] != 'agrippa/empty' for p in $GHPRS)"

# --- retries -------------------------------------------------------------------
knobs '{"faults": [{"status": 429, "count": 1, "retry_after": "1"}]}'
mark
gh agrippa/run-4 main "Rate limited" "$T/body" 0 0
expect 0 "^ok 3 .* opened ready$" "GitHub 429 with Retry-After: 1, then success"
check "... two POSTs, 429 then 201" is "[(e['method'], e['status']) for e in L] == [('POST', 429), ('POST', 201)]"
check "... at least 1 s apart (Retry-After honoured), under 3 s" is \
	"1.0 <= L[1]['t'] - L[0]['t'] < 3.0"

knobs '{"faults": [{"status": 403, "count": 1, "ratelimit_reset_in": 1}]}'
mark
gh agrippa/run-5 main "Primary rate limit" "$T/body" 0 0
expect 0 "^ok 4 .* opened ready$" "GitHub 403 with x-ratelimit-remaining 0: a rate limit, waited for until x-ratelimit-reset"
check "... 403 then 201, the retry not before the x-ratelimit-reset second, within 3 s" is \
	"[e['status'] for e in L] == [403, 201] and L[1]['t'] >= L[0]['ratelimit_reset'] and L[1]['t'] - L[0]['t'] < 3.0"

knobs '{"faults": [{"status": 500, "count": 2}]}'
mark
gh agrippa/run-6 main "Flaky forge" "$T/body" 0 0
expect 0 "^ok 5 .* opened ready$" "GitHub 500 twice, then success"
check "... three POSTs: 500, 500, 201" is "[e['status'] for e in L] == [500, 500, 201]"
check "... with a backoff between them" is "L[1]['t'] - L[0]['t'] >= 0.25 and L[2]['t'] - L[1]['t'] >= 0.5"
check "... and exactly one pull request for the head" stis \
	"len([p for p in $GHPRS if p['head'] == 'agrippa/run-6']) == 1"

knobs '{"faults": [{"status": 500, "count": -1}]}'
mark
gh agrippa/run-7 main "Broken forge" "$T/body" 0 0
expect 1 "^error: POST /repos/octo/hello/pulls: GitHub answered 500: Server Error (5 tries, giving up)$" \
	"GitHub 500 every time: a failure after the bounded attempts"
check "... exactly 5 requests" is "len(L) == 5"
knobs '{"faults": []}'

knobs '{"faults": [{"status": 429, "count": 1, "retry_after": "3600"}]}'
mark
t0=$(date +%s)
gh agrippa/run-7 main "Too long a wait" "$T/body" 0 0
t1=$(date +%s)
expect 1 "it asks to wait 3600 s before trying again, more than the 60 s agrippa waits" \
	"GitHub 429 with Retry-After: 3600: an immediate, clear failure"
check "... after one request, in under 30 s (the 60 s wait not waited)" [ "$(logq 'len(L)')" = 1 -a $((t1 - t0)) -lt 30 ]
knobs '{"faults": []}'

# --- malformed answers -------------------------------------------------------
knobs '{"malformed": {"count": 1, "kind": "json"}}'
gh agrippa/run-8 main "Broken answer" "$T/body" 0 0
expect 1 "^error: opening the pull request: GitHub's answer is malformed: the answer is not JSON" \
	"a malformed JSON answer is a clear error"
mark
gh agrippa/run-8 main "Broken answer" "$T/body" 0 0
expect 0 "^ok 6 .* updated ready$" "... its retry finds the pull request the broken answer was about, and updates it"
check "... exactly one pull request for that head" stis \
	"len([p for p in $GHPRS if p['head'] == 'agrippa/run-8']) == 1"
knobs '{"malformed": {"count": 1, "kind": "url"}}'
gh agrippa/run-8 main "Bad link" "$T/body" 0 6
expect 1 "malformed: html_url must be an https://HOST/... URL" "an answer whose link is not https is refused"
knobs '{"malformed": {"count": 1, "kind": "number"}}'
gh agrippa/run-8 main "Bad number" "$T/body" 0 6
expect 1 "malformed: it has no positive integer \"number\"" "an answer whose number is not positive is refused"

# --- a long body ---------------------------------------------------------------
python3 -c 'import sys; sys.stdout.write("\u00e9" * 70000)' >"$T/long"
gh agrippa/run-10 main "Long body" "$T/long" 0 0
expect 0 "^ok 7 .* opened ready$" "a body of 70000 characters is accepted (the forge takes 65536)"
check "... cut to exactly 65536 characters, on a character boundary, the marker last" stis \
	"[p for p in $GHPRS if p['head'] == 'agrippa/run-10'][0]['body'].endswith('[... cut by agrippa: longer than the forge accepts ...]\n') and len([p for p in $GHPRS if p['head'] == 'agrippa/run-10'][0]['body']) == 65536 and [p for p in $GHPRS if p['head'] == 'agrippa/run-10'][0]['body'].startswith('\u00e9' * 1000)"

# --- no proxy, whatever the environment says ----------------------------------
printf '%s\n' "$TOKEN" | https_proxy=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
	ALL_PROXY=http://127.0.0.1:9 trusted "$FORGEREQ" github "$GH_API" "$GH_REPO" \
	agrippa/run-10 main "Via no proxy" "$T/body" 0 0 >"$T/out" 2>&1
RC=$?
OUT=$(cat "$T/out")
cat "$T/out" >>"$T/all-output"
expect 0 "^ok 7 .* updated ready$" "https_proxy and ALL_PROXY in the environment are ignored"

# --- GitLab --------------------------------------------------------------------
mark
gl agrippa/run-1 main "Fix it on GitLab" "$T/body" 1 0
expect 0 "^ok 1 https://$H/group/sub/proj/-/merge_requests/1 opened draft$" "GitLab: a draft merge request is opened"
check "... titled 'Draft: ...', with source and target branches and description" stis \
	"len($GLMRS) == 1 and $GLMRS[0]['title'] == 'Draft: Fix it on GitLab' and $GLMRS[0]['head'] == 'agrippa/run-1' and $GLMRS[0]['base'] == 'main' and $GLMRS[0]['body'] == 'What changed, and why.\n' and $GLMRS[0]['draft'] is True"
check "... POST /api/v4/projects/group%2Fsub%2Fproj/merge_requests, Bearer token, our User-Agent, no GitHub header" is \
	"[(e['method'], e['path'], e['status']) for e in L] == [('POST', '/api/v4/projects/group%2Fsub%2Fproj/merge_requests', 201)] and L[0]['auth'] == 'ok' and L[0]['headers'].get('User-Agent') == '$UA' and 'X-GitHub-Api-Version' not in L[0]['headers']"
mark
gl agrippa/run-1 main "Fix it on GitLab, again" "$T/body" 1 0
expect 0 "^ok 1 https://$H/group/sub/proj/-/merge_requests/1 updated draft$" "GitLab: the same branch again: 409, and the open one is updated"
check "... POST 409, GET by source and target branch, PUT" is \
	"[(e['method'], e['path'], e['status']) for e in L] == [('POST', '/api/v4/projects/group%2Fsub%2Fproj/merge_requests', 409), ('GET', '/api/v4/projects/group%2Fsub%2Fproj/merge_requests?source_branch=agrippa%2Frun-1&target_branch=main&state=opened', 200), ('PUT', '/api/v4/projects/group%2Fsub%2Fproj/merge_requests/1', 200)]"
check "... still one merge request, still a draft, with the new title" stis \
	"len($GLMRS) == 1 and $GLMRS[0]['title'] == 'Draft: Fix it on GitLab, again' and $GLMRS[0]['draft'] is True"
mark
gl agrippa/run-1 main "Third GitLab title" "$T/body3" 0 1
expect 0 "^ok 1 .* updated draft$" "GitLab: number given: merge request 1 updated (its draft state kept)"
check "... GET then PUT" is "[e['method'] for e in L] == ['GET', 'PUT']"
check "... title and description are the new ones" stis \
	"$GLMRS[0]['title'] == 'Draft: Third GitLab title' and $GLMRS[0]['body'] == 'Third body.\n'"
gl agrippa/run-2 main "Ready one" "$T/body" 0 0
expect 0 "^ok 2 .* opened ready$" "GitLab: a merge request that is no draft"
check "... has no Draft: prefix" stis "$GLMRS[1]['title'] == 'Ready one' and $GLMRS[1]['draft'] is False"
TOK=$BAD gl agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: opening the merge request: GitLab answered 401: 401 Unauthorized" "GitLab 401: its message"
pr gitlab "$GL_API" "https://$H/group/nope.git" agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: opening the merge request: GitLab answered 404: 404 Project Not Found" "GitLab 404: its message"
knobs '{"faults": [{"status": 502, "count": 1}]}'
gl agrippa/run-3 main "After a 502" "$T/body" 0 0
expect 0 "^ok 3 .* opened ready$" "GitLab 502 once, then success"

# --- bad requests are refused before anything is sent ------------------------------
mark
pr github "http://$H/api/v3" "$GH_REPO" agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: api_url must be an https://HOST/... URL$" "an http:// api_url is refused with a clear error"
pr github "https://$H/api/v3?x=1" "$GH_REPO" agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "^error: api_url must have no query and no fragment$" "an api_url with a query is refused"
pr github "$GH_API" "https://$H/octo/hello/extra.git" agrippa/run-3 main "T" "$T/body" 0 0
expect 1 "OWNER/REPO" "a GitHub repository URL of three segments is refused"
check "... and none of them reached the forge" is "len(L) == 0"

# --- the token -------------------------------------------------------------------
check "the token is in none of forgereq's outputs" sh -c '! grep -q -F -e "$1" -e "$2" "$3"' _ \
	"$TOKEN" "$BAD" "$T/all-output"
M=0
check "the fake saw the token only in Authorization (nowhere in a URL, another header or a body)" is \
	"len(L) > 40 and not any(e['token_elsewhere'] for e in L)"
check "... and its log holds no trace of it" sh -c '! grep -q -F -e "$1" "$2"' _ "$TOKEN" "$T/forge.log"
check "every request from forgereq carried User-Agent $UA (the one without was curl's)" is \
	"[e['headers'].get('User-Agent') for e in L].count(None) == 1 and all(e['headers'].get('User-Agent') in (None, '$UA') for e in L)"

finish forge
