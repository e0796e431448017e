#!/bin/sh
# make demo: install what is missing, build, start agrippad in the foreground
# on the embedded database in a local state directory, show it working, and
# stop cleanly on Ctrl-C (or after $DEMO_SECONDS seconds when set).
#
# Agent steps talk to a model provider.  Without a key the demo starts the
# scripted fake provider of the tests (tests/fakes/fake_model.py, playing
# scripts/demo-model.json); with DEMO_ANTHROPIC_KEY_FILE=FILE (a file holding
# an Anthropic API key) it uses the real Messages API and DEMO_MODEL
# (default claude-sonnet-4-5).
set -eu
ROOT=$(pwd)
if [ "$(id -u)" -eq 0 ]; then
	sh scripts/deps.sh
	sh scripts/mkusers.sh
else
	echo "demo: not root: development mode (no chroot, no user switch)"
fi
make -s all

DEMO="$ROOT/demo"
# The embedded PostgreSQL runs as _agrippadb and must reach its directory.
if [ "$(id -u)" -eq 0 ] && ! setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups \
    test -x "$ROOT" 2>/dev/null; then
	DEMO=/var/tmp/agrippa-demo
	echo "demo: $ROOT is not reachable by _agrippadb; using $DEMO"
fi
mkdir -p "$DEMO/empty"
chmod 0755 "$DEMO" "$DEMO/empty"
PORT=${DEMO_PORT:-8480}
CONF="$DEMO/agrippad.yaml"
mkdir -p "$DEMO/keys"
chmod 0700 "$DEMO/keys"
FAKE_PID=""
if [ -n "${DEMO_ANTHROPIC_KEY_FILE:-}" ]; then
	# the key file must be the daemon's own and private: a copy made so
	cp "$DEMO_ANTHROPIC_KEY_FILE" "$DEMO/keys/anthropic.key"
	chmod 0600 "$DEMO/keys/anthropic.key"
	MODEL=${DEMO_MODEL:-claude-sonnet-4-5}
	PROVIDER="  - { name: anthropic, kind: anthropic, base_url: \"https://api.anthropic.com\",
      key_file: $DEMO/keys/anthropic.key,
      models: [ { name: $MODEL, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 } ] }"
	echo "demo: agent steps use the Anthropic API, model $MODEL"
else
	rm -f "$DEMO/fake.port"
	python3 tests/fakes/fake_model.py --port-file "$DEMO/fake.port" --log "$DEMO/fake-model.log" \
		--script scripts/demo-model.json &
	FAKE_PID=$!
	i=0
	until [ -s "$DEMO/fake.port" ] || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
	MODEL=claude-sonnet-4-5
	PROVIDER="  - { name: anthropic, kind: anthropic, base_url: \"http://127.0.0.1:$(cat "$DEMO/fake.port")\",
      models: [ { name: $MODEL, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 } ] }"
	echo "demo: no DEMO_ANTHROPIC_KEY_FILE: agent steps talk to a scripted fake provider on loopback"
fi
cat >"$CONF" <<EOC
# Written by scripts/demo.sh
state_dir: $DEMO/state
user: _agrippa
listen: [ "127.0.0.1:$PORT" ]
control_socket: $DEMO/agrippad.sock
database: embedded
master_key: $DEMO/keys/master.key
pidfile: $DEMO/agrippad.pid
chroot: $DEMO/empty
ui_dir: $ROOT/ui
providers:
$PROVIDER
agent: { provider: anthropic, model: $MODEL }
EOC
# A pull request needs a forge: as root the demo serves the repository of
# its second run with real `git http-backend` over https and a fake GitHub
# beside it (tests/fakes/git_https.py, tests/fakes/forge.py), both on
# loopback with a throwaway CA that only agrippad's own mount namespace
# trusts (the system's bundle plus that CA, bound over the bundle).
FORGE_PID=""
GIT_PID=""
PR_DEMO=""
if [ "$(id -u)" -eq 0 ] && command -v openssl >/dev/null && command -v unshare >/dev/null; then
	TLS="$DEMO/tls"
	mkdir -p "$TLS" "$DEMO/srv/demo"
	if [ ! -s "$TLS/srv.crt" ]; then
		(
			cd "$TLS" &&
			openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
				-subj /CN=agrippa-demo-ca -addext basicConstraints=critical,CA:TRUE \
				-addext keyUsage=critical,keyCertSign,cRLSign &&
			openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
			printf '%s\n' 'subjectAltName=DNS:127.0.0.1,IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
				'extendedKeyUsage=serverAuth' >ext &&
			openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
				-extfile ext -out srv.crt
		) >"$TLS/log" 2>&1
	fi
	cat /etc/ssl/certs/ca-certificates.crt "$TLS/ca.crt" >"$TLS/bundle.crt"
	head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DEMO/srv/token"
	chmod 0600 "$DEMO/srv/token"
	rm -f "$DEMO/git.ports" "$DEMO/forge.port"
	python3 tests/fakes/git_https.py --root "$DEMO/srv" --cert "$TLS/srv.crt" --key "$TLS/srv.key" \
		--token-file "$DEMO/srv/token" --log "$DEMO/git-requests.log" --ports "$DEMO/git.ports" \
		--hold "$DEMO/no-hold" --hold-push "$DEMO/no-hold" >"$DEMO/git-server.log" 2>&1 &
	GIT_PID=$!
	i=0
	until [ -s "$DEMO/git.ports" ] || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
	GIT_PORT=$(cut -d' ' -f1 "$DEMO/git.ports" 2>/dev/null || true)
	python3 tests/fakes/forge.py --cert "$TLS/srv.crt" --key "$TLS/srv.key" \
		--token-file "$DEMO/srv/token" --log "$DEMO/forge.log" --ports "$DEMO/forge.port" \
		--github-repo demo/calc --web-host "127.0.0.1:$GIT_PORT" >"$DEMO/forge.out" 2>&1 &
	FORGE_PID=$!
	i=0
	until [ -s "$DEMO/forge.port" ] || [ $i -gt 100 ]; do sleep 0.1; i=$((i + 1)); done
	FORGE_PORT=$(cat "$DEMO/forge.port" 2>/dev/null || true)
	[ -n "$GIT_PORT" ] && [ -n "$FORGE_PORT" ] && PR_DEMO=1
fi
./build/agrippad -n -f "$CONF"
if [ -n "$PR_DEMO" ]; then
	# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
	unshare -m --propagation private sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' \
		"$DEMO/tls/bundle.crt" /etc/ssl/certs/ca-certificates.crt \
		./build/agrippad -d -f "$CONF" &
else
	./build/agrippad -d -f "$CONF" &
fi
PID=$!
stop() {
	trap - INT TERM
	echo
	echo "demo: stopping agrippad"
	kill -TERM "$PID" 2>/dev/null || true
	wait "$PID" || true
	for p in $FAKE_PID $GIT_PID $FORGE_PID; do kill -TERM "$p" 2>/dev/null || true; done
	echo "demo: stopped cleanly"
	exit 0
}
trap stop INT TERM
i=0
until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 600 ] || ! kill -0 "$PID" 2>/dev/null; then
		echo "demo: agrippad did not come up" >&2
		kill -TERM "$PID" 2>/dev/null || true
		exit 1
	fi
	sleep 0.1
done
echo
echo "demo: \$ curl http://127.0.0.1:$PORT/healthz"
curl -s "http://127.0.0.1:$PORT/healthz"
echo "demo: \$ agrippactl -s $DEMO/agrippad.sock status"
./build/agrippactl -s "$DEMO/agrippad.sock" status
echo
echo "demo: what an agent's command sees: a sandbox with its own user, no network, a fresh root"
echo "demo: \$ agrippactl sandbox run -- sh -c 'id; ls /; ...'"
./build/agrippactl -s "$DEMO/agrippad.sock" sandbox run -- sh -c \
	'id; echo "root: $(ls / | tr "\n" " ")"; echo "network: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " ")";
	 echo "processes: $(ls /proc | grep -c "^[0-9]")"; touch /etc/x 2>&1 | sed "s/^/refused: /"' || true
echo
echo "demo: the API: an operator sets up a user, a project and a repository, then the user"
echo "demo: submits a run of templates/run-tests.yaml, approves it and reads its events"
CTLS="./build/agrippactl -s $DEMO/agrippad.sock"
# The state directory outlives a demo: what exists already is kept.
$CTLS user add demo "Demo User" >/dev/null 2>&1 || true
$CTLS project add demo >/dev/null 2>&1 || true
$CTLS member add demo demo admin >/dev/null 2>&1 || true
$CTLS repo add demo self "$ROOT" </dev/null >/dev/null 2>&1 || true
$CTLS template list 2>/dev/null | grep -q '^run-tests ' || $CTLS template load templates/run-tests.yaml
TOKEN=$($CTLS token create demo 1 | tail -n 1)
API="http://127.0.0.1:$PORT"
AUTH="Authorization: Bearer $TOKEN"
PROJ=$(curl -s -H "$AUTH" "$API/v1/me" | sed -n 's/.*"projects":\[{"id":"\([0-9a-f-]*\)".*/\1/p')
BODY='{"template":"run-tests","params":{"repo":"self","test_command":"ls && git log --oneline | wc -l && git log -1 --format=%s"}}'
echo "demo: \$ curl -H 'Authorization: Bearer agr_...' -d '$BODY' $API/v1/projects/$PROJ/runs"
RUN_JSON=$(curl -s -H "$AUTH" -H 'Content-Type: application/json' -d "$BODY" "$API/v1/projects/$PROJ/runs")
echo "$RUN_JSON" | head -c 300
echo " ..."
RUN=$(echo "$RUN_JSON" | sed -n 's/^{"id":"\([0-9a-f-]*\)".*/\1/p')
# run_status: the run's status from the API
run_status() { curl -s -H "$AUTH" "$API/v1/runs/$RUN" | sed -n 's/.*"status":"\([a-z_]*\)".*/\1/p'; }
# wait_status STATUS...: up to 60 s for the run to reach one of them
wait_status() {
	i=0
	while [ $i -lt 600 ]; do
		st=$(run_status)
		for want in "$@"; do [ "$st" = "$want" ] && return 0; done
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
# approve: approve the run's pending approval, if any, and wait for its end
approve() {
	APPROVAL=$(curl -s -H "$AUTH" "$API/v1/runs/$RUN/approvals" |
		sed -n 's/.*"id":"\([0-9a-f-]*\)".*"status":"pending".*/\1/p')
	[ -n "$APPROVAL" ] || return 0
	echo "demo: \$ curl -d '{\"decision\":\"approved\"}' $API/v1/approvals/$APPROVAL/decide"
	curl -s -o /dev/null -H "$AUTH" -H 'Content-Type: application/json' \
		-d '{"decision":"approved"}' "$API/v1/approvals/$APPROVAL/decide"
	wait_status succeeded failed cancelled || true
}
# demo_run NAME REPO: load $DEMO/NAME.yaml unless a template NAME is stored,
# submit a run of it on REPO (RUN names it) and wait for its end; 1 when it
# did not end
demo_run() {
	chmod 0644 "$DEMO/$1.yaml"
	$CTLS template list 2>/dev/null | grep -q "^$1 " || $CTLS template load "$DEMO/$1.yaml"
	BODY="{\"template\":\"$1\",\"params\":{\"repo\":\"$2\"}}"
	echo "demo: \$ curl -H 'Authorization: Bearer agr_...' -d '$BODY' $API/v1/projects/$PROJ/runs"
	RUN=$(curl -s -H "$AUTH" -H 'Content-Type: application/json' -d "$BODY" "$API/v1/projects/$PROJ/runs" |
		sed -n 's/^{"id":"\([0-9a-f-]*\)".*/\1/p')
	[ -n "$RUN" ] && wait_status succeeded failed
}
if [ -n "$RUN" ]; then
	echo "demo: the engine claims it, the git helper brings the repository's mirror up to"
	echo "demo: date and writes the workspace from it (its .git borrows the mirror's objects,"
	echo "demo: read-only in the sandbox: git log sees the whole history, nothing is copied);"
	echo "demo: the runner runs the test command in the run's sandbox, makes the patch and"
	echo "demo: waits for an approval"
	if wait_status waiting_approval succeeded failed; then
		echo "demo: the workspace: $(du -sh "$DEMO/state/runs/$RUN/disk/ws/.git" "$DEMO/state/runs/$RUN/ws/.git" 2>/dev/null |
			cut -f1 | head -1) in its .git, beside the mirror's $(du -sh "$DEMO/state/mirrors" 2>/dev/null | cut -f1)"
		approve
	fi
	echo "demo: the run is $(run_status); its events:"
	echo "demo: \$ curl -N $API/v1/runs/$RUN/events/stream"
	curl -s -N --max-time 5 -H "$AUTH" "$API/v1/runs/$RUN/events/stream" | grep '^event:\|^data:' |
		cut -c1-160 || true
	echo "demo: \$ curl $API/v1/runs/$RUN/artifacts"
	curl -s -H "$AUTH" "$API/v1/runs/$RUN/artifacts" | head -c 400
	echo
	echo
	echo "demo: the same through agrippa, the users' CLI (agrippa(1); the token from AGRIPPA_TOKEN)"
	echo "demo: \$ agrippa -u $API runs"
	AGRIPPA_TOKEN=$TOKEN ./build/agrippa -u "$API" runs 2>&1 | head -5 || true
	echo "demo: \$ agrippa -u $API run watch $RUN    (the run replayed; exit status from its outcome)"
	AGRIPPA_TOKEN=$TOKEN timeout 20 ./build/agrippa -u "$API" run watch "$RUN" 2>&1 | tail -12 || true
fi

if [ "$(id -u)" -eq 0 ]; then
	echo
	echo "demo: the way out: a template's network list opens only what it names, through the"
	echo "demo: egress proxy outside the sandbox; a name off the list is refused before it is"
	echo "demo: ever resolved, and a connection around the proxy has no route (nothing here"
	echo "demo: leaves this machine: the one name allowed is never asked for)"
	cat >"$DEMO/egress-demo.yaml" <<'EOT'
name: egress-demo
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readWrite }
network: { allow: [ "packages.example.test" ] }
phases:
  - name: net
    steps:
      - { id: proxy, kind: command, run: "env | grep '^HTTPS_PROXY='" }
      - { id: off-list, kind: command, allow_failure: true,
          run: "curl -sS --max-time 5 -w 'the proxy answered %{http_code}' http://elsewhere.example.test/" }
      - { id: around, kind: command, allow_failure: true,
          run: "curl -sS --noproxy '*' --max-time 5 http://192.0.2.1/ 2>&1; echo \"curl exit $?\"" }
EOT
	if demo_run egress-demo self; then
		curl -s -H "$AUTH" "$API/v1/runs/$RUN/events?limit=200" | python3 -c '
import json, sys
out, denied = {}, []
for e in json.load(sys.stdin)["events"]:
    p = e["payload"]
    if e["type"] == "step.output":
        out[p["step_id"]] = out.get(p["step_id"], "") + p["text"]
    elif e["type"] == "network.denied":
        denied.append("  event    network.denied %s:%s: %s" % (p["host"], p["port"], p["reason"]))
for step, text in out.items():
    print("  %-8s %s" % (step, " / ".join(l for l in text.splitlines() if l)[:120]))
print("\n".join(denied))
' || true
		echo "demo: the run is $(run_status)"
	else
		echo "demo: the egress run did not end: $(run_status)"
	fi
fi

echo
echo "demo: an agent at work: templates/fix-failing-test.yaml on a small repository whose"
echo "demo: test fails.  The agent reads the test log, diagnoses, fixes the code in the"
echo "demo: run's sandbox and checks its fix; the patch waits for an approval"
CALC="$DEMO/calc"
if [ ! -d "$CALC/.git" ]; then
	mkdir -p "$CALC"
	printf 'test:\n\tsh test.sh\n' >"$CALC/Makefile"
	printf '#!/bin/sh\n# add A B: print the sum of two integers\necho $(( $1 - $2 ))\n' >"$CALC/add.sh"
	printf '#!/bin/sh\n[ "$(sh add.sh 2 3)" = 5 ] || { echo "FAIL: add.sh 2 3 gives $(sh add.sh 2 3), not 5"; exit 1; }\necho ok\n' >"$CALC/test.sh"
	git -C "$CALC" init -q && git -C "$CALC" add -A &&
		git -C "$CALC" -c user.name=demo -c user.email=demo@example.org commit -q -m "add.sh"
	chmod -R a+rX "$CALC"
fi
printf '# c-style\nKeep a fix as small as the bug; keep the file'"'"'s style.\n' >"$DEMO/c-style.md"
$CTLS skill list 2>/dev/null | grep -q '^c-style ' || $CTLS skill add c-style "$DEMO/c-style.md" >/dev/null
$CTLS grant add demo skill c-style >/dev/null 2>&1 || true
$CTLS repo add demo calc "$CALC" </dev/null >/dev/null 2>&1 || true
$CTLS template list 2>/dev/null | grep -q '^fix-failing-test ' || $CTLS template load templates/fix-failing-test.yaml
if [ -n "$PR_DEMO" ]; then
	# the repository on the demo's git server, and a connection to it with its
	# forge (made again each time: the servers' ports change)
	rm -rf "$DEMO/srv/demo/calc.git"
	git clone -q --bare "$CALC" "$DEMO/srv/demo/calc.git"
	git -C "$DEMO/srv/demo/calc.git" config http.receivepack true
	chmod -R a+rwX "$DEMO/srv"
	OLD=$(curl -s -H "$AUTH" "$API/v1/projects/$PROJ/repos" | python3 -c '
import json, sys
print(" ".join(r["id"] for r in json.load(sys.stdin)["repos"] if r["name"] == "calc-gh"))')
	for id in $OLD; do curl -s -o /dev/null -X DELETE -H "$AUTH" "$API/v1/repos/$id"; done
	$CTLS repo add demo calc-gh "https://127.0.0.1:$GIT_PORT/demo/calc.git" github \
		"https://127.0.0.1:$FORGE_PORT/api/v3" <"$DEMO/srv/token" >/dev/null
	echo "demo: the repository is served over https (git http-backend) with a token, beside a"
	echo "demo: fake GitHub; once the patch is approved the run pushes a branch and opens a"
	echo "demo: pull request (set DEMO_SECONDS, or see README.md for a real GitHub repository)"
	BODY='{"template":"fix-failing-test","params":{"repo":"calc-gh","open_pr":true}}'
else
	echo "demo: (not root: no local forge, so the run stops at the approved patch)"
	BODY='{"template":"fix-failing-test","params":{"repo":"calc","open_pr":false}}'
fi
echo "demo: \$ curl -H 'Authorization: Bearer agr_...' -d '$BODY' $API/v1/projects/$PROJ/runs"
RUN_JSON=$(curl -s -H "$AUTH" -H 'Content-Type: application/json' -d "$BODY" "$API/v1/projects/$PROJ/runs")
RUN=$(echo "$RUN_JSON" | sed -n 's/^{"id":"\([0-9a-f-]*\)".*/\1/p')
if [ -n "$RUN" ] && wait_status waiting_approval succeeded failed; then
	echo "demo: what the agent said and did:"
	curl -s -H "$AUTH" "$API/v1/runs/$RUN/events?limit=500" | python3 -c '
import json, sys
for e in json.load(sys.stdin)["events"]:
    p = e["payload"]
    if e["type"] == "agent.message":
        print("  %-9s says: %s" % (p["step_id"], p["text"][:100]))
    elif e["type"] == "agent.tool_call":
        print("  %-9s calls %s %s" % (p["step_id"], p["name"], json.dumps(p["input"])[:90]))
    elif e["type"] == "step.finished":
        print("  %-9s %s" % (p["step_id"], p.get("status", "")))
' || true
	echo "demo: the patch is approved over the API"
	approve
	echo "demo: the run is $(run_status); it spent $(curl -s -H "$AUTH" "$API/v1/runs/$RUN" |
		sed -n 's/.*"spent_usd_micros":\([0-9]*\).*/\1/p') micro-dollars; its patch:"
	PATCH_ID=$(curl -s -H "$AUTH" "$API/v1/runs/$RUN/artifacts" |
		sed -n 's/.*"id":"\([0-9a-f-]*\)","key":"patch".*/\1/p')
	[ -z "$PATCH_ID" ] || curl -s -H "$AUTH" "$API/v1/artifacts/$PATCH_ID" | sed 's/^/  /'
	if [ -n "$PR_DEMO" ]; then
		echo "demo: its pull request (GET /v1/runs/$RUN .pull_request):"
		curl -s -H "$AUTH" "$API/v1/runs/$RUN" | python3 -c '
import json, sys
p = json.load(sys.stdin).get("pull_request") or {}
print("  branch %s, commit %s" % (p.get("branch"), p.get("commit")))
print("  pull request #%s%s: %s" % (p.get("number"), " (draft)" if p.get("draft") else "", p.get("url")))' || true
		echo "demo: and what the fake GitHub holds:"
		curl -s --cacert "$DEMO/tls/ca.crt" "https://127.0.0.1:$FORGE_PORT/_state" | python3 -c '
import json, sys
for repo, prs in json.load(sys.stdin).items():
    for p in prs:
        print("  %s #%d %s <- %s: %s" % (repo, p["number"], p["base"], p["head"], p["title"]))' || true
	fi
else
	echo "demo: the run did not get to its approval: $(run_status)"
fi
SE="$ROOT/tests/browser/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE=$(command -v node || true)
if [ -f "$SE" ] && [ -n "$NODE" ] && [ "$(id -u)" -eq 0 ]; then
	echo
	echo "demo: MCP: an agent step uses the tools of an MCP server its project was granted"
	echo "demo: (@modelcontextprotocol/server-everything over stdio), started for the step in a"
	echo "demo: sandbox of its own with its credential in its environment alone"
	printf '{"transport":"stdio","command":["%s","%s","stdio"],"paths":["%s"],"env":{"API_TOKEN":"${credentials.token}"}}\n' \
		"$NODE" "$SE" "$ROOT/tests/browser/node_modules" >"$DEMO/everything.json"
	chmod 0644 "$DEMO/everything.json"
	$CTLS mcp list 2>/dev/null | grep -q '^everything ' ||
		printf '{"token": "demo-credential-%s"}' "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" |
		$CTLS mcp add everything "$DEMO/everything.json" >/dev/null
	$CTLS grant add demo mcp everything >/dev/null 2>&1 || true
	cat >"$DEMO/ask-everything.yaml" <<'EOT'
name: ask-everything
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readOnly }
phases:
  - name: ask
    steps:
      - { id: ask, kind: agent, max_turns: 4,
          prompt: "Use the MCP server's get-sum tool to add 2 and 3, and its echo tool to say hello.",
          requires: { mcp_servers: [ everything ] } }
EOT
	if demo_run ask-everything calc; then
		curl -s -H "$AUTH" "$API/v1/runs/$RUN/events?limit=200" | python3 -c '
import json, sys
for e in json.load(sys.stdin)["events"]:
    p = e["payload"]
    if e["type"] == "agent.mcp_server":
        print("  server %s: %s (protocol %s)" % (p["server"], p["status"], p.get("protocol_version", "-")))
    elif e["type"] == "agent.tool_call" and p.get("server"):
        print("  the agent calls %s on %s: %s" % (p["name"], p["server"], json.dumps(p["input"])))
    elif e["type"] == "agent.tool_result" and p.get("server"):
        print("  ... %s answers: %s" % (p["server"], p["content"][:80]))
    elif e["type"] == "agent.message":
        print("  the agent says: %s" % p["text"][:100])
' || true
		echo "demo: the run is $(run_status)"
	else
		echo "demo: the MCP run did not end: $(run_status)"
	fi
fi
$CTLS token revoke "$(printf '%s' "$TOKEN" | cut -c1-12)" >/dev/null 2>&1 || true
UI_TOKEN=$($CTLS token create demo 1 | tail -n 1)
echo
echo "demo: the dashboard (the files of $ROOT/ui, as httpd loaded them):"
echo "demo:   open   $API/"
echo "demo:   token  $UI_TOKEN   (user demo, valid for a day; the page trades it for a session cookie)"
echo "demo: agrippad is running (state in $DEMO/state). Press Ctrl-C to stop."
if [ -n "${DEMO_SECONDS:-}" ]; then
	sleep "$DEMO_SECONDS"
	stop
fi
wait "$PID" || true
