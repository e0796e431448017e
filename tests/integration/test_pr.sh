#!/bin/sh
# The pull_request step end to end (runner/step_pr.c, the git helper's push
# and forge client) against the real daemon, real `git http-backend` over
# https (tests/fakes/git_https.py) and a stateful fake GitHub
# (tests/fakes/forge.py), both on loopback with a throwaway CA that only
# the daemon's mount namespace trusts:
#  - a run that changes its workspace opens one draft pull request with the
#    template's head, base, title and body (an artifact's text in it); the
#    pushed commit is the base commit plus exactly the run's patch, by the
#    configured author; pull_request.pushed and .opened are events and GET
#    /v1/runs/{id} shows it;
#  - a second pull_request step of the run pushes over its own commit (the
#    lease) and updates the same pull request;
#  - SIGKILL of the runner after the push, while the forge makes it wait:
#    the resumed run opens exactly one pull request;
#  - a branch someone else pushed to: the step fails saying so, and their
#    commit is still the branch's head; a pre-receive hook that declines:
#    the step fails with the server's reason;
#  - a connection without a forge: the branch is pushed, nothing is opened;
#  - a workspace whose .git points elsewhere changes nothing of the push;
#  - a title holding the token reaches the forge with it starred out;
#  - the token is in no event, log line or database row, and the fake forge
#    saw it only in Authorization.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
. tests/integration/git_lib.sh
need_root pr
need_progs pr openssl git python3 unshare curl
make_env
SRV_PID=""
FORGE_PID=""
stop_forge() { [ -z "$FORGE_PID" ] || kill "$FORGE_PID" 2>/dev/null; FORGE_PID=""; }
trap 'stop_forge; stop_git_server; cleanup_env' EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 10, sweep: 1 }
git: { author: "Fix Bot <fixbot@agrippa.test>" }
EOC

TOKEN="tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
mkdir -p "$T/tls" "$T/srv/octo" "$T/up" "$T/tmpl"
chmod 0755 "$T/up" "$T/srv" "$T/srv/octo"
G="git -c user.name=t -c user.email=t@example.com"

# --- an upstream, served with a token; a fake GitHub for it ---------------------
(
	cd "$T/up" && git init -q -b main src && cd src &&
	printf 'one\ntwo\n' >README.md && mkdir lib && echo 'x = 1' >lib/a.py &&
	$G add -A && $G commit -q -m "first" && echo 'y = 2' >>lib/a.py && $G commit -qam second
) >"$T/up.log" 2>&1
UP="$T/up/src"
BASE0=$(git -C "$UP" rev-parse HEAD)
make_ca
git clone -q --bare "$UP" "$T/srv/octo/hello.git" >/dev/null 2>&1
git -C "$T/srv/octo/hello.git" config http.receivepack true
mkdir -p "$T/srv/octo/hello.git/hooks"
cat >"$T/srv/octo/hello.git/hooks/pre-receive" <<'EOH'
#!/bin/sh
while read -r old new ref; do
	case $ref in refs/heads/protected/*) echo "agrippa-test: $ref is protected" >&2; exit 1 ;; esac
done
exit 0
EOH
chmod 0755 "$T/srv/octo/hello.git/hooks/pre-receive"
chmod -R a+rwX "$T/srv"
printf '%s\n' "$TOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"
start_git_server
check "the fake git server starts" [ -n "${PORT_TLS:-}" ]
GIT_HOST="127.0.0.1:$PORT_TLS"
URL="https://$GIT_HOST/octo/hello.git"
python3 "$ROOT/tests/fakes/forge.py" --cert "$T/tls/srv.crt" --key "$T/tls/srv.key" \
	--token-file "$T/srv/token" --log "$T/forge.log" --ports "$T/fport" \
	--github-repo octo/hello --web-host "$GIT_HOST" >"$T/forge.out" 2>&1 &
FORGE_PID=$!
wait_for 10 test -s "$T/fport"
read -r FPORT <"$T/fport"
check "the fake forge starts" [ -n "$FPORT" ]
FORGE="https://127.0.0.1:$FPORT"
knobs() { curl -s -f --cacert "$T/tls/ca.crt" -X POST --data "$1" "$FORGE/_control" >/dev/null; }
# st EXPR: a Python expression on s, the fake's state (GET /_state).
st() {
	curl -s -f --cacert "$T/tls/ca.crt" "$FORGE/_state" >"$T/state.json" &&
		python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
			"$T/state.json" "$1"
}

start_trusting_daemon pr

tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf '  branch: { type: string, default: "" }\n'
		printf '  title: { type: string, default: "Fix the tests" }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
tmpl fix <<'EOF'
  - name: one
    steps:
      - id: change
        kind: command
        run: |
          printf 'one\nTWO\n' >README.md
          echo 'z = 3' >lib/b.py
          rm -f lib/a.py
          mkdir -p .agrippa/artifacts && echo "the cause was two" >.agrippa/artifacts/why.txt
          git config remote.origin.pushurl /tmp/elsewhere
          git config remote.origin.url /tmp/elsewhere
        produces: [ { key: why, kind: text } ]
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch, required: true } ] }
      - id: open-pr
        kind: pull_request
        branch: "${params.branch}"
        title: "${params.title}"
        body: "Why: ${artifacts.why}"
      - { id: more, kind: command, run: "echo four >>README.md" }
      - id: update-pr
        kind: pull_request
        branch: "${params.branch}"
        title: "Fix the tests, again"
        body: "Why: ${artifacts.why}"
        draft: false
EOF
tmpl once <<'EOF'
  - name: one
    steps:
      - { id: change, kind: command, run: "echo changed >>README.md" }
      - { id: open-pr, kind: pull_request, branch: "${params.branch}", title: "${params.title}" }
EOF

ctl project add p1 && ctl user add alice && ctl member add p1 alice admin
printf '%s' "$TOKEN" | ctl repo add p1 gh "$URL" github "$FORGE/api/v3"
printf '%s' "$TOKEN" | ctl repo add p1 plain "$URL" none
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: a project, a user, a GitHub connection and one without a forge" \
	[ -n "$TA" -a "$(psql_q "select string_agg(name || ':' || forge, ' ' order by name) from repo_connections")" = "gh:github plain:none" ]

J='Content-Type: application/json'
# submit TEMPLATE REPO [BRANCH [TITLE]]: RUN set
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"$2\", \"branch\": \"${3:-}\", \"title\": \"${4:-Fix the tests}\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))' 2>/dev/null)
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
ended() { case "$(run_status "$1")" in succeeded|failed|cancelled) return 0 ;; esac; return 1; }
ev() { # ev RUN TYPE: the payloads of the run's events of TYPE, one a line
	psql_q "select payload::text from run_events where run_id = '$1' and type = '$2' order by seq"
}
remote_head() { git --git-dir="$T/srv/octo/hello.git" rev-parse -q --verify "refs/heads/$1"; }
step_error() { psql_q "select error from run_steps where run_id = '$1' and step_id = '$2' order by attempt desc limit 1"; }

# --- a run opens one draft pull request, and updates it -------------------------
submit fix gh
R1=$RUN
wait_for 90 ended "$R1"
check "the run succeeds ($(run_status "$R1"): $(psql_q "select error from runs where id = '$R1'"))" is_status "$R1" succeeded
B1="agrippa/$(printf '%.8s' "$R1")"
check "one pull request on the forge" [ "$(st "len(s['github:octo/hello'])")" = 1 ]
check "... head $B1, base main, the template's title" \
	[ "$(st "[(p['head'], p['base'], p['title']) for p in s['github:octo/hello']]")" = "[('$B1', 'main', 'Fix the tests, again')]" ]
check "... a draft (an update does not change that)" [ "$(st "s['github:octo/hello'][0]['draft']")" = True ]
check "... its body holds the artifact's text" \
	[ "$(st "s['github:octo/hello'][0]['body']")" = "Why: the cause was two" ]
check "pull_request.opened then .updated, for number 1" \
	[ "$(psql_q "select string_agg(type || ':' || (payload->>'number'), ' ' order by seq) from run_events where run_id = '$R1' and type like 'pull_request.%ed' and type <> 'pull_request.pushed'")" = "pull_request.opened:1 pull_request.updated:1" ]
check "the forge saw one POST, then a GET and a PATCH of that pull request" \
	[ "$(python3 -c 'import json, sys
print(" ".join(l["method"] + ":" + l["path"].rsplit("/", 1)[-1] for l in map(json.loads, open(sys.argv[1]))))' "$T/forge.log")" = "POST:pulls GET:1 PATCH:1" ]
C2=$(remote_head "$B1")
check "GET /v1/runs/{id} shows the pull request at the branch's head" \
	[ "$(curl -s -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/runs/$R1" | python3 -c '
import json, sys
p = json.load(sys.stdin)["pull_request"]
print(p["branch"], p["commit"], p["number"], p["url"], p["draft"])')" = "$B1 $C2 1 https://$GIT_HOST/octo/hello/pull/1 True" ]
C1=$(ev "$R1" pull_request.pushed | head -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["commit"])')
check "two pushes: the second replaced the run's own first commit (lease)" \
	[ -n "$C1" -a "$C1" != "$C2" -a "$(ev "$R1" pull_request.pushed | wc -l)" = 2 ]
SG="git --git-dir=$T/srv/octo/hello.git"
check "the first commit is the base plus exactly the run's patch" \
	[ "$($SG rev-parse "$C1^")" = "$BASE0" -a \
	  "$($SG diff --name-status "$BASE0" "$C1" | tr '\t\n' ' |')" = "M README.md|D lib/a.py|A lib/b.py|" -a \
	  "$($SG show "$C1:README.md" | tr '\n' '|')" = "one|TWO|" ]
check "... the artifact directory and the workspace's .git are not in it" \
	[ -z "$($SG ls-tree -r --name-only "$C1" | grep -e '^\.agrippa' -e '^\.git/')" ]
check "the second: base plus both changes, parent the base again" \
	[ "$($SG rev-parse "$C2^")" = "$BASE0" -a "$($SG show "$C2:README.md" | tr '\n' '|')" = "one|TWO|four|" ]
check "the author is git.author, at the run's creation" \
	[ "$($SG log -1 --format='%an <%ae>|%cn' "$C2")" = "Fix Bot <fixbot@agrippa.test>|Fix Bot" -a \
	  "$($SG log -1 --format=%at "$C2")" = "$(psql_q "select extract(epoch from date_trunc('second', created_at))::bigint from runs where id = '$R1'")" ]
check "the message names the run" $SG log -1 --format=%B "$C2" | grep -q "run $R1"
check "the workspace's .git (its remote moved to /tmp/elsewhere) changed nothing" [ ! -e /tmp/elsewhere ]

# --- SIGKILL of the runner after the push, before the pull request ------------------
knobs '{"faults": [{"status": 429, "count": 1, "retry_after": "4"}]}'
submit once gh "killed/one" "After a kill"
R2=$RUN
pushed_yet() { [ -n "$(psql_q "select 1 from run_events where run_id = '$1' and type = 'pull_request.pushed'")" ]; }
wait_for 60 pushed_yet "$R2"
RPID=$(child_pid runner)
[ -n "$RPID" ] && kill -9 "$RPID"
check "the runner is killed after the push, while the forge makes it wait" [ -n "$RPID" ]
wait_for 90 ended "$R2"
check "the resumed run succeeds ($(run_status "$R2"))" is_status "$R2" succeeded
check "... with exactly one pull request for its branch" \
	[ "$(st "len([p for p in s['github:octo/hello'] if p['head'] == 'killed/one'])")" = 1 ]
check "... the second push found its own commit there" \
	[ "$(ev "$R2" pull_request.pushed | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["already"])')" = True ]

# --- someone else's commit on the branch; a hook that declines ---------------------
git clone -q "$UP" "$T/human" && (cd "$T/human" && echo human >human.txt && $G add human.txt &&
	$G commit -q -m human && git push -q "$T/srv/octo/hello.git" HEAD:refs/heads/taken/x) >/dev/null 2>&1
HUMAN=$(remote_head taken/x)
submit once gh "taken/x"
R3=$RUN
wait_for 60 ended "$R3"
check "a branch someone else pushed to: the run fails ($(run_status "$R3"))" is_status "$R3" failed
check "... saying so ($(step_error "$R3" open-pr))" sh -c "printf '%s' \"\$0\" | grep -q 'taken/x'" "$(step_error "$R3" open-pr)"
check "... and their commit is still the head" [ "$(remote_head taken/x)" = "$HUMAN" ]
submit once gh "protected/x"
R4=$RUN
wait_for 60 ended "$R4"
check "a pre-receive hook declines: the run fails ($(run_status "$R4"))" is_status "$R4" failed
check "... with the server's reason ($(step_error "$R4" open-pr))" \
	sh -c "printf '%s' \"\$0\" | grep -q 'refs/heads/protected/x is protected'" "$(step_error "$R4" open-pr)"
check "... and no such branch" [ -z "$(remote_head protected/x)" ]

# --- no forge: pushed, nothing opened ---------------------------------------------
N0=$(st "len(s['github:octo/hello'])")
submit once plain "plain/x"
R5=$RUN
wait_for 60 ended "$R5"
check "a connection without a forge: the run succeeds ($(run_status "$R5"))" is_status "$R5" succeeded
check "... the branch is pushed" [ -n "$(remote_head plain/x)" ]
check "... and no pull request opened" [ "$(st "len(s['github:octo/hello'])")" = "$N0" ]

# --- a secret in the title or body is starred out before the forge sees it -----------
submit once gh "secret/x" "about $TOKEN here"
R6=$RUN
wait_for 60 ended "$R6"
check "a run whose title holds the repository token succeeds ($(run_status "$R6"))" is_status "$R6" succeeded
check "... the forge got the title with the token starred out" \
	[ "$(st "[p['title'] for p in s['github:octo/hello'] if p['head'] == 'secret/x']")" = "['about $(printf '%s' "$TOKEN" | tr -c '' '*') here']" ]

# --- the token -----------------------------------------------------------------------
check "the token is in no log line" [ "$(grep -c "$TOKEN" "$LOG")" = 0 ]
check "... no event, run or step row" \
	[ "$(psql_q "select count(*) from run_events where payload::text like '%$TOKEN%'") $(psql_q "select count(*) from run_steps where coalesce(error, '') like '%$TOKEN%'")" = "0 0" ]
check "the forge saw it only in Authorization" \
	python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert lines and all(not l["token_elsewhere"] for l in lines)
assert all(l["auth"] == "ok" for l in lines), [l for l in lines if l["auth"] != "ok"]' "$T/forge.log"
check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish pr
