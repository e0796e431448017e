#!/bin/sh
# The MCP servers of agent steps, end to end against the real daemon, a
# fake model provider on loopback (tests/fakes/fake_model.py) and real MCP
# servers from the npm registry (tests/browser/package-lock.json), each in
# a sandbox of its own:
#  - @modelcontextprotocol/server-everything over stdio: its tools are
#    offered as mcp__everything__TOOL; echo, get-sum and get-env answer the
#    model; the events name the server; get-env prints the server's
#    environment, whose credential reaches neither the model, nor the
#    events, nor the database, nor the runner's memory;
#  - @modelcontextprotocol/server-filesystem with workspace: read lists and
#    reads the run's workspace, cannot reach a path outside it, cannot write;
#  - the agent's sandbox sees no process, environment or credential of the
#    server's, and the server's sandbox none of the agent's;
#  - an optional server that is not granted is absent; a required server
#    that cannot start fails the step with its stderr's tail; one whose
#    connection breaks is started once more, then its tools answer with an
#    error; a server of 10,000 tools is cut at agent.mcp_tools_max; one
#    that announces 500 changes of its tools at once is listed at most
#    three times, not 500; of two servers' tools with one model name
#    (server col__x's say and server col's x__say) the first is offered and
#    called, the other dropped and named; of a step's 16 servers (the most
#    it may have), one whose connection breaks while it lives on until it
#    is killed is started again at once; a server that never answers
#    initialize times out, and a cancel while it starts ends the run at
#    once, not after its startup_timeout; the daemon stays healthy and no
#    server's sandbox is left;
#  - a server whose spec lists a network reaches an allowed test host
#    through egress with its own list, and nothing else; its decisions
#    are the run's network events, naming the server;
#  - a runner killed in the middle of a call resumes: the new attempt's
#    server is a fresh one, and the interrupted call is not made again.
#
# The whole test runs in a network and mount namespace of its own (it
# re-executes itself under unshare), as test_egress_proxy does: the test
# host is a dummy interface on 10.77.0.0/24, its names come from a hosts
# file bound over /etc/hosts there.  No traffic leaves it.
if [ -z "$AGRIPPA_MCP_NS" ]; then
	[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP agent_mcp: needs root"; exit 0; }
	AGRIPPA_MCP_NS=1 exec unshare -n -m --propagation private sh "$0" "$@"
fi
. tests/integration/lib.sh
need_root agent_mcp
ip link set lo up
if ip link add dummy0 type dummy 2>/dev/null; then
	ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up
else
	ip addr add 10.77.0.1/24 dev lo
fi

NM=$ROOT/tests/browser/node_modules
SE=$NM/@modelcontextprotocol/server-everything/dist/index.js
SF=$NM/@modelcontextprotocol/server-filesystem/dist/index.js
NODE=$(command -v node)
if [ ! -f "$SE" ] || [ ! -f "$SF" ] || [ -z "$NODE" ]; then
	notok "node, server-everything and server-filesystem are installed (make deps)"
	finish agent_mcp
	exit 1
fi
case $NODE in
/usr/*) ;;
*) NODE=/usr/bin/node ;;
esac
make_env
trap 'kill $FAKE_PID $SRV $MCPH 2>/dev/null; cleanup_env' EXIT
printf '127.0.0.1 localhost\n10.77.0.1 allowed.test denied.test\n' >"$T/hosts"
chmod 0644 "$T/hosts"
mount --bind "$T/hosts" /etc/hosts
mkdir -p "$T/www" && echo "hello from allowed.test" >"$T/www/hello"
(cd "$T/www" && exec python3 -m http.server --bind 10.77.0.1 8080) >"$T/www.log" 2>&1 &
SRV=$!
wait_for 10 sh -c "curl -s --noproxy '*' http://10.77.0.1:8080/hello | grep -q hello"

PY=$(python3 -c 'import sys; print(sys.executable)')
FAKE_LOG="$T/fake.log"
SCRIPT="$T/script.json"
echo '[]' >"$SCRIPT"
mkdir -p "$T/keys"
chmod 0700 "$T/keys"
KEY="sk-ant-test-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$KEY" >"$T/keys/provider.key"
chmod 0600 "$T/keys/provider.key"
"$PY" tests/fakes/fake_model.py --port-file "$T/fake.port" --log "$FAKE_LOG" \
	--script "$SCRIPT" 2>>"$T/fake.err" &
FAKE_PID=$!
wait_for 10 test -s "$T/fake.port"
FPORT=$(cat "$T/fake.port")
check "the fake provider listens ($FPORT)" [ -n "$FPORT" ]

cat >>"$CONF" <<EOC
engine: { concurrency: 2, lease: 5, sweep: 1 }
providers:
  - name: fake
    kind: anthropic
    base_url: "http://127.0.0.1:$FPORT/"
    key_file: $T/keys/provider.key
    timeout: 30
    retries: 0
    stream: false
    models:
      - { name: fake-model, input: 3, output: 15 }
agent: { provider: fake, model: fake-model, max_tokens: 1000, tool_output_max: 4K, mcp_tools_max: 20 }
egress: { allow_cidrs: [ 10.77.0.0/24 ] }
EOC
start_daemon_or_finish agent_mcp

MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl" "$T/outside"
chmod 0755 "$T/repos"
"$MKREPO" "$T/repos/clean" >/dev/null
chmod -R a+rX "$T/repos"
OUTSIDE_SECRET="outside-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$OUTSIDE_SECRET" >"$T/outside/secret.txt"
chmod -R a+rX "$T/outside"

tmpl() { # tmpl NAME MCP-SERVERS-YAML [PROMPT]: one phase, one agent step
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n  - name: one\n    steps:\n'
		printf '      - { id: think, kind: agent, prompt: "%s", requires: { mcp_servers: %s } }\n' \
			"${3:-Use the tools.}" "$2"
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
# spec NAME JSON-FIELDS: $T/NAME.json, a stdio server
spec() { printf '{"transport":"stdio",%s}\n' "$2" >"$T/$1.json"; chmod 0644 "$T/$1.json"; }

RND=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
SECRET="mcpsecret_${RND}_x"
spec everything "\"command\":[\"$NODE\",\"$SE\",\"stdio\"],\"paths\":[\"$NM\"],\"env\":{\"API_TOKEN\":\"\${credentials.token}\"}"
spec files "\"command\":[\"$NODE\",\"$SF\",\"/workspace\"],\"paths\":[\"$NM\"],\"workspace\":\"read\""
FAKE="$ROOT/tests/fakes/fake_mcp.py"
spec crashy "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"crash-on-call\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec broken "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"exit\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec many "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"many\",\"10000\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec churn "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"churn\",\"500\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec col__x "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"ok\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec col "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"named\",\"x__say\",\"other\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec linger "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"linger\"],\"paths\":[\"$ROOT/tests/fakes\"]"
FIFTEEN=""
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
	spec "p$i" "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"ok\"],\"paths\":[\"$ROOT/tests/fakes\"]"
	FIFTEEN="$FIFTEEN p$i,"
done
spec hush "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"silent\"],\"paths\":[\"$ROOT/tests/fakes\"],\"startup_timeout\":60"
spec silent "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"silent\"],\"paths\":[\"$ROOT/tests/fakes\"],\"startup_timeout\":2"
spec ungranted "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"ok\"],\"paths\":[\"$ROOT/tests/fakes\"]"
spec netty "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"ok\"],\"paths\":[\"$ROOT/tests/fakes\"],\"network\":{\"allow\":[\"allowed.test:8080\"]}"
spec offline "\"command\":[\"/usr/bin/python3\",\"$FAKE\",\"ok\"],\"paths\":[\"$ROOT/tests/fakes\"]"
# a remote (http) server: the hostile fake of test_mcp_http, on loopback
python3 tests/fakes/mcp_http.py --port 0 --port-file "$T/mcph.port" --log "$T/mcph.log" \
	>"$T/mcph.out" 2>&1 &
MCPH=$!
wait_for 10 test -s "$T/mcph.port"
RSECRET="remote_${RND}_token"
printf '{"transport":"http","url":"http://127.0.0.1:%s/mcp","headers":{"Authorization":"Bearer ${credentials.token}"}}\n' \
	"$(cat "$T/mcph.port")" >"$T/remote.json"
chmod 0644 "$T/remote.json"
ctl user add alice && ctl project add p1 && ctl member add p1 alice admin &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null &&
	printf '{"token": "%s"}' "$SECRET" | ctl mcp add everything "$T/everything.json" &&
	ctl mcp add files "$T/files.json" </dev/null &&
	ctl mcp add crashy "$T/crashy.json" </dev/null &&
	ctl mcp add broken "$T/broken.json" </dev/null &&
	ctl mcp add many "$T/many.json" </dev/null &&
	ctl mcp add silent "$T/silent.json" </dev/null &&
	ctl mcp add churn "$T/churn.json" </dev/null &&
	ctl mcp add col__x "$T/col__x.json" </dev/null &&
	ctl mcp add col "$T/col.json" </dev/null &&
	ctl mcp add linger "$T/linger.json" </dev/null &&
	ctl mcp add hush "$T/hush.json" </dev/null &&
	for s in $FIFTEEN; do
		ctl mcp add "${s%,}" "$T/${s%,}.json" </dev/null && ctl grant add p1 mcp "${s%,}" || exit 1
	done &&
	ctl mcp add ungranted "$T/ungranted.json" </dev/null &&
	ctl mcp add netty "$T/netty.json" </dev/null &&
	ctl mcp add offline "$T/offline.json" </dev/null &&
	printf '{"token": "%s"}' "$RSECRET" | ctl mcp add remote "$T/remote.json" &&
	for s in everything files crashy broken many silent churn col__x col linger hush netty offline remote; do ctl grant add p1 mcp $s || exit 1; done
SETUP=$?
tmpl every '[ everything ]'
tmpl files '[ files ]'
tmpl crashy '[ crashy ]'
tmpl broken '[ broken ]'
tmpl many '[ many, everything ]'
tmpl silent '[ silent ]'
tmpl churn '[ churn ]'
tmpl collide '[ col__x, col ]'
tmpl hush '[ hush, everything ]'
tmpl sixteen "[ linger,${FIFTEEN%,} ]"
tmpl optional '[ { name: ungranted, optional: true }, everything ]'
tmpl net '[ netty, offline ]'
tmpl remote '[ remote ]'
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: 30 MCP servers, 29 granted, 13 templates" [ "$SETUP" = 0 -a -n "$TA" ]

J='Content-Type: application/json'
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"clean\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
ended() { case "$(run_status "$1")" in succeeded | failed | cancelled) return 0 ;; esac; return 1; }
step_err() { psql_q "select coalesce(error, '') from run_steps where run_id = '$1' order by attempt desc limit 1"; }
payloads() { psql_q "select coalesce(json_agg(payload order by seq), '[]') from run_events where run_id = '$1' and type = '$2'"; }
pyj() { printf '%s' "$1" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)"; }
script() { printf '%s' "$1" >"$SCRIPT.tmp" && mv "$SCRIPT.tmp" "$SCRIPT"; : >"$FAKE_LOG"; }
flog() {
	"$PY" -c "import json,sys; L=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; sys.exit(0 if ($1) else 1)" "$FAKE_LOG"
}
flog_print() {
	"$PY" -c "import json,sys; L=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; print($1)" "$FAKE_LOG" 2>&1 | head -c 200
}
# results N: the tool results the model got in call N (0-based) as {id: (text, is_error)}
RES='{b["tool_use_id"]: (b.get("content", ""), b.get("is_error", False)) for m in L[N]["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"}'
res() { echo "$RES" | sed "s/N/$1/"; }
sandboxes() { "$AGRIPPACTL" -s "$CTL" -j status 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"]["sandboxes"])'; }
no_sandbox_left() {
	i=0
	while [ "$(sandboxes)" != 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ "$(sandboxes)" = 0 ]
}
healthy() { [ "$(healthz_code)" = 200 ] && kill -0 "$SUP_PID"; }

# --- 1. server-everything: tools offered, called, redacted ----------------------------
script '[
 {"reply": {"tool_calls": [
   {"id": "c_echo", "name": "mcp__everything__echo", "input": {"message": "hello mcp"}},
   {"id": "c_sum", "name": "mcp__everything__get-sum", "input": {"a": 2, "b": 3}},
   {"id": "c_env", "name": "mcp__everything__get-env", "input": {}},
   {"id": "c_bad", "name": "mcp__everything__get-sum", "input": {"a": "two"}},
   {"id": "c_img", "name": "mcp__everything__get-tiny-image", "input": {}},
   {"id": "c_ps", "name": "bash", "input": {"command": "echo TOKEN=$(cat /proc/[0-9]*/environ 2>/dev/null | tr \"\\\\0\" \"\\\\n\" | grep -c API_TOKEN) NODE=$(ps ax -o comm= 2>/dev/null | grep -cx node) NODES=$(for p in /proc/[0-9]*; do readlink $p/exe; done 2>/dev/null | grep -c node)"}}]}},
 {"reply": {"text": "done"}}]'
submit every
R1=$RUN
wait_for 60 ended "$R1"
check "a step with server-everything succeeds ($(run_status "$R1"): $(step_err "$R1"))" is_status "$R1" succeeded
check "its tools are offered as mcp__everything__TOOL after the built-in ones" \
	flog "[t['name'] for t in L[0]['body']['tools']][:7] == ['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep', 'bash'] and {'mcp__everything__echo', 'mcp__everything__get-sum', 'mcp__everything__get-env'} <= {t['name'] for t in L[0]['body']['tools']}"
check "a tool the server registers after initialization (list_changed) is offered by the next call at the latest" \
	flog "'mcp__everything__simulate-research-query' in [t['name'] for t in L[-1]['body']['tools']]"
check "... with their descriptions and input schemas" \
	flog "[t for t in L[0]['body']['tools'] if t['name'] == 'mcp__everything__get-sum'][0]['input_schema']['properties'].keys() >= {'a', 'b'}"
check "... at most agent.mcp_tools_max (20) of them" \
	flog "len([t for t in L[0]['body']['tools'] if t['name'].startswith('mcp__')]) <= 20"
check "echo answers the model" flog "$(res 1)['c_echo'] == ('Echo: hello mcp', False)"
check "get-sum answers 5" flog "'5' in $(res 1)['c_sum'][0] and not $(res 1)['c_sum'][1]"
check "a call with bad arguments is a tool error the model sees" flog "$(res 1)['c_bad'][1]"
IMG='[b for m in L[1]["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("tool_use_id") == "c_img"][0]["content"]'
check "an image result reaches the model as text and an image block" \
	flog "isinstance($IMG, list) and $IMG[0]['type'] == 'text' and '[image: image/png' in $IMG[0]['text'] and any(b['type'] == 'image' and b['source']['media_type'] == 'image/png' and len(b['source']['data']) > 100 for b in $IMG)"
check "get-env shows the server's environment, API_TOKEN in it" flog "'API_TOKEN' in $(res 1)['c_env'][0]"
check "... the credential redacted before the model saw it" \
	flog "'$RND' not in json.dumps(L) and '*' * ${#SECRET} in $(res 1)['c_env'][0]"
check "... and nowhere in the run's events or conversation" \
	[ "$(psql_q "select count(*) from run_events where payload::text like '%$RND%'") $(psql_q "select count(*) from agent_messages where message::text like '%$RND%'")" = "0 0" ]
check "agent.tool_call names the server" pyj "$(payloads "$R1" agent.tool_call)" \
	"[c.get('server') for c in d] == ['everything'] * 5 + [None]"
check "agent.tool_result names the server" pyj "$(payloads "$R1" agent.tool_result)" \
	"[c.get('server') for c in d] == ['everything'] * 5 + [None] and d[0]['content'] == 'Echo: hello mcp'"
check "agent.mcp_server says it was ready, with its protocol" pyj "$(payloads "$R1" agent.mcp_server)" \
	"len(d) == 1 and d[0]['server'] == 'everything' and d[0]['status'] == 'ready' and d[0]['protocol_version'] == '2025-11-25'"
check "the agent's sandbox sees no process of the server, and no API_TOKEN" \
	flog "'TOKEN=0 NODE=0 NODES=0' in $(res 1)['c_ps'][0]"
check "no server's sandbox is left after the step" no_sandbox_left

# --- 2. the credential is not in the runner's memory while a call runs ------------------
script '[
 {"reply": {"tool_calls": [{"id": "c_env", "name": "mcp__everything__get-env", "input": {}}]}},
 {"delay": 20, "reply": {"text": "slow"}}]'
submit every
R2=$RUN
wait_for 30 flog "len(L) == 2"
RPID=$(child_pid runner)
SHEX=$(printf '%s' "$SECRET" | od -An -tx1 | tr -d ' \n')
check "a runner waits on the model after get-env ($RPID)" [ -n "$RPID" ]
check "the credential is not in the runner's memory or environment" sh -c "! '$TOOLS/memgrep' $RPID $SHEX >/dev/null"
SPIDS=$(for p in /proc/[0-9]*; do [ "$(readlink $p/exe 2>/dev/null)" = "$NODE" ] && echo ${p#/proc/}; done)
found=0
for p in $SPIDS; do "$TOOLS/memgrep" "$p" "$SHEX" >/dev/null && found=1; done
check "... while the server, in its sandbox, holds it (the search works)" [ "$found" = 1 ]
wait_for 60 ended "$R2"
check "the run ends ($(run_status "$R2"))" is_status "$R2" succeeded

# --- 3. server-filesystem with workspace: read ---------------------------------------
script "[
 {\"reply\": {\"tool_calls\": [
   {\"id\": \"f_list\", \"name\": \"mcp__files__list_directory\", \"input\": {\"path\": \"/workspace\"}},
   {\"id\": \"f_read\", \"name\": \"mcp__files__read_text_file\", \"input\": {\"path\": \"/workspace/README.md\"}},
   {\"id\": \"f_out\", \"name\": \"mcp__files__read_text_file\", \"input\": {\"path\": \"$T/outside/secret.txt\"}},
   {\"id\": \"f_up\", \"name\": \"mcp__files__read_text_file\", \"input\": {\"path\": \"/workspace/../etc/passwd\"}},
   {\"id\": \"f_write\", \"name\": \"mcp__files__write_file\", \"input\": {\"path\": \"/workspace/pwned.txt\", \"content\": \"x\"}}]}},
 {\"reply\": {\"text\": \"done\"}}]"
submit files
R3=$RUN
wait_for 60 ended "$R3"
check "a step with server-filesystem succeeds ($(run_status "$R3"): $(step_err "$R3"))" is_status "$R3" succeeded
check "it lists the workspace" flog "'README.md' in $(res 1)['f_list'][0] and not $(res 1)['f_list'][1]"
check "it reads the workspace's file" flog "$(res 1)['f_read'] == ('hello\\n', False) or $(res 1)['f_read'][0].startswith('hello')"
check "it cannot read a file outside the workspace" flog "$(res 1)['f_out'][1] and '$OUTSIDE_SECRET' not in json.dumps(L)"
check "... nor climb out of it" flog "$(res 1)['f_up'][1] and 'root:' not in $(res 1)['f_up'][0]"
check "with workspace: read it cannot write" flog "$(res 1)['f_write'][1]"
check "... and nothing was written" [ "$(psql_q "select count(*) from run_events where run_id = '$R3' and payload::text like '%pwned%' and type = 'step.output'")" = 0 ]

# --- 4. optional and absent; required and broken ----------------------------------------
script '[{"reply": {"text": "fine"}}]'
submit optional
R4=$RUN
wait_for 60 ended "$R4"
check "an optional server not granted is absent, the step goes on ($(run_status "$R4"))" is_status "$R4" succeeded
check "... agent.mcp_server says absent for it and ready for the other" pyj "$(payloads "$R4" agent.mcp_server)" \
	"sorted((e['server'], e['status']) for e in d) == [('everything', 'ready'), ('ungranted', 'absent')]"
check "... and its tools are not offered" flog "not any(t['name'].startswith('mcp__ungranted__') for t in L[0]['body']['tools'])"

script '[{"reply": {"text": "never"}}]'
submit broken
R5=$RUN
wait_for 60 ended "$R5"
check "a required server that exits at once fails the step ($(run_status "$R5"))" is_status "$R5" failed
check "... with the end of its stderr in the error ($(step_err "$R5" | cut -c1-160))" \
	sh -c "printf '%s' \"\$0\" | grep -q 'required MCP server broken failed.*FAKE_MCP_NEEDS is not set'" "$(step_err "$R5")"
check "... before any model call" flog "len(L) == 0"

script '[{"reply": {"text": "never"}}]'
submit silent
R6=$RUN
wait_for 60 ended "$R6"
check "a server that never answers initialize fails the step after its startup_timeout ($(step_err "$R6" | cut -c1-120))" \
	sh -c "[ \"\$1\" = failed ] && printf '%s' \"\$0\" | grep -q 'required MCP server silent failed'" "$(step_err "$R6")" "$(run_status "$R6")"

# a cancel while a server starts (its startup_timeout is 60 s)
script '[{"reply": {"text": "never"}}]'
MCPSTARTS='sandbox sbx-[0-9a-f]* started.*an MCP server'
N0=$(grep -c "$MCPSTARTS" "$LOG")
submit hush
R6b=$RUN
wait_for 30 sh -c '[ "$(grep -c "$1" "$2")" -ge $(($3 + 2)) ]' - "$MCPSTARTS" "$LOG" "$N0"
sleep 1
T0=$(date +%s)
curl -s -o /dev/null --max-time 10 -X POST -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/runs/$R6b/cancel"
wait_for 45 ended "$R6b"
T1=$(date +%s)
check "a cancel while a server starts ends the run at once, not after its startup_timeout ($(run_status "$R6b") after $((T1 - T0)) s)" \
	[ "$(run_status "$R6b")" = cancelled -a $((T1 - T0)) -le 30 ]
check "... before any model call" flog "len(L) == 0"
check "... and no server's sandbox is left" no_sandbox_left

# --- 5. a server that breaks: started once more, then its tools answer with an error -----
script '[
 {"reply": {"tool_calls": [{"id": "k1", "name": "mcp__crashy__say", "input": {"text": "a"}}]}},
 {"reply": {"tool_calls": [{"id": "k2", "name": "mcp__crashy__say", "input": {"text": "b"}}]}},
 {"reply": {"tool_calls": [{"id": "k3", "name": "mcp__crashy__say", "input": {"text": "c"}}]}},
 {"reply": {"text": "gave up"}}]'
submit crashy
R7=$RUN
wait_for 60 ended "$R7"
check "a step whose server crashes on each call still ends ($(run_status "$R7"): $(step_err "$R7"))" is_status "$R7" succeeded
check "the first call answers with the broken connection" flog "$(res 1)['k1'][1]"
check "the second too, from the server started again" flog "$(res 2)['k2'][1]"
check "the third says the server is not available, with its stderr" \
	flog "$(res 3)['k3'][1] and 'not available' in $(res 3)['k3'][0] and 'crashing on purpose' in $(res 3)['k3'][0]"
check "agent.mcp_server: ready, restarting, ready, failed" pyj "$(payloads "$R7" agent.mcp_server)" \
	"[e['status'] for e in d] == ['ready', 'restarting', 'ready', 'failed']"

# --- 6. 10,000 tools -----------------------------------------------------------------------
script '[{"reply": {"text": "so many"}}]'
submit many
R8=$RUN
wait_for 60 ended "$R8"
check "a server of 10,000 tools does not fail the step ($(run_status "$R8"))" is_status "$R8" succeeded
check "the model is offered 20 MCP tools, the first of many" \
	flog "[t['name'] for t in L[0]['body']['tools'] if t['name'].startswith('mcp__')] == ['mcp__many__t%d' % i for i in range(20)]"
check "agent.mcp_tools_dropped names what was left out, and the other server's are all dropped" \
	pyj "$(payloads "$R8" agent.mcp_tools_dropped)" \
	"any(e['server'] == 'many' and e['dropped'] >= 9980 for e in d) and any(e['server'] == 'everything' for e in d)"

# --- 6b. 500 changes at once ----------------------------------------------------------------
script '[
 {"reply": {"tool_calls": [{"id": "ch", "name": "mcp__churn__churn", "input": {}}]}},
 {"reply": {"tool_calls": [{"id": "ls", "name": "mcp__churn__lists", "input": {}}]}},
 {"reply": {"text": "listed"}}]'
submit churn
R8b=$RUN
wait_for 60 ended "$R8b"
check "a server that announces 500 changes of its tools at once does not fail the step ($(run_status "$R8b"): $(step_err "$R8b"))" \
	is_status "$R8b" succeeded
check "... and is asked for its tools at most 3 times meanwhile, not 500 ($(flog_print "$(res 2)['ls'][0]"))" \
	flog "$(res 2)['ls'][0] in ('lists 1', 'lists 2', 'lists 3')"

# --- 6c. one model name, two servers' tools -------------------------------------------------
script '[
 {"reply": {"tool_calls": [
   {"id": "cx", "name": "mcp__col__x__say", "input": {"text": "hi"}},
   {"id": "co", "name": "mcp__col__other", "input": {"text": "ho"}}]}},
 {"reply": {"text": "said"}}]'
submit collide
R8c=$RUN
wait_for 60 ended "$R8c"
check "two servers' tools with one model name do not fail the step ($(run_status "$R8c"): $(step_err "$R8c"))" \
	is_status "$R8c" succeeded
check "... mcp__col__x__say is offered once" \
	flog "[t['name'] for t in L[0]['body']['tools']].count('mcp__col__x__say') == 1 and 'mcp__col__other' in [t['name'] for t in L[0]['body']['tools']]"
check "... and is server col__x's say, the first server's ($(flog_print "$(res 1)['cx'][0]"))" \
	flog "$(res 1)['cx'] == ('said: hi', False) and $(res 1)['co'] == ('other: ho', False)"
check "... server col's x__say is dropped, named, with its reason" \
	pyj "$(payloads "$R8c" agent.mcp_tools_dropped)" \
	"[(e['server'], [(t['name'], t['reason']) for t in e['tools']]) for e in d] == [('col', [('x__say', \"another server's tool has the same model name\")])]"

# --- 6d. a server that lingers, among 16 -----------------------------------------------------
script '[
 {"reply": {"tool_calls": [{"id": "lg", "name": "mcp__linger__say", "input": {"text": "x"}}]}},
 {"reply": {"tool_calls": [{"id": "lg2", "name": "mcp__linger__say", "input": {"text": "y"}}]}},
 {"reply": {"text": "lingered"}}]'
submit sixteen
R8d=$RUN
wait_for 90 ended "$R8d"
check "a step with 16 servers ends ($(run_status "$R8d"): $(step_err "$R8d" | cut -c1-160))" is_status "$R8d" succeeded
check "... the one whose connection broke while it lived on was started again at once, not refused for the 16 ($(payloads "$R8d" agent.mcp_server | "$PY" -c 'import json,sys; print([(e["server"], e["status"], (e.get("error") or "")[:80]) for e in json.load(sys.stdin) if e["server"] == "linger"])'))" \
	pyj "$(payloads "$R8d" agent.mcp_server)" \
	"[e['status'] for e in d if e['server'] == 'linger'] == ['ready', 'restarting', 'ready', 'failed']"

# --- 7. a server's own network, through egress ---------------------------------------------
script '[
 {"reply": {"tool_calls": [
   {"id": "n_ok", "name": "mcp__netty__fetch", "input": {"url": "http://allowed.test:8080/hello"}},
   {"id": "n_port", "name": "mcp__netty__fetch", "input": {"url": "http://allowed.test:8081/hello"}},
   {"id": "n_deny", "name": "mcp__netty__fetch", "input": {"url": "http://denied.test:8080/hello"}},
   {"id": "n_direct", "name": "mcp__netty__fetch", "input": {"url": "http://10.77.0.1:8080/hello", "direct": true}},
   {"id": "n_none", "name": "mcp__offline__fetch", "input": {"url": "http://allowed.test:8080/hello"}},
   {"id": "n_probe", "name": "mcp__offline__probe", "input": {}}]}},
 {"reply": {"text": "fetched"}}]'
: >"$T/www.log"
submit net
R10=$RUN
wait_for 60 ended "$R10"
check "a step with a networked server succeeds ($(run_status "$R10"): $(step_err "$R10"))" is_status "$R10" succeeded
check "the server reaches the allowed test host through egress" flog "$(res 1)['n_ok'] == ('200 hello from allowed.test\\n', False)"
check "... not the allowed name on another port" flog "$(res 1)['n_port'][1]"
check "... nor a name not on its list" flog "$(res 1)['n_deny'][1]"
check "... nor the host directly, around the proxy (no route)" flog "$(res 1)['n_direct'][1]"
check "a server without a network reaches nothing, even a name another server may" flog "$(res 1)['n_none'][1]"
PROBE="json.loads($(res 1)['n_probe'][0])"
check "a server's sandbox sees its own two processes only, none of the agent's or the other server's" \
	flog "[p.split()[0:2] for p in $PROBE['procs']] == [['agrippa-sandbox', 'mcp'], ['/usr/bin/python3', '$FAKE']]"
check "... and, with workspace none, an empty /workspace, not the run's" flog "$PROBE['workspace'] == []"
check "the test host saw one request, the allowed one" [ "$(grep -c 'GET /hello' "$T/www.log")" = 1 ]
check "network.allowed is the run's, naming the server" pyj "$(payloads "$R10" network.allowed)" \
	"[(e['host'], e['port'], e.get('mcp_server')) for e in d] == [('allowed.test', 8080, 'netty')]"
check "network.denied names the server and why" pyj "$(payloads "$R10" network.denied)" \
	"sorted((e['host'], e['port'], e.get('mcp_server')) for e in d) == [('allowed.test', 8081, 'netty'), ('denied.test', 8080, 'netty')]"

# --- 8. a remote (http) server, called by the proxy ---------------------------------------
script '[
 {"reply": {"tool_calls": [
   {"id": "h_ok", "name": "mcp__remote__ok", "input": {}},
   {"id": "h_echo", "name": "mcp__remote__echo", "input": {}},
   {"id": "h_bad", "name": "mcp__remote__badjson", "input": {}}]}},
 {"reply": {"text": "remote done"}}]'
submit remote
R11=$RUN
wait_for 60 ended "$R11"
check "a step with a remote MCP server succeeds ($(run_status "$R11"): $(step_err "$R11"))" is_status "$R11" succeeded
check "its tools are offered and answer through the proxy" flog "$(res 1)['h_ok'] == ('ok', False)"
check "the server got the credential in its header, and the model sees it redacted" \
	flog "'Bearer ' + '*' * ${#RSECRET} in $(res 1)['h_echo'][0] and '$RSECRET' not in json.dumps(L)"
check "a malformed answer is a tool error the model sees" flog "$(res 1)['h_bad'][1]"
check "agent.mcp_server: ready, over the legacy protocol" pyj "$(payloads "$R11" agent.mcp_server)" \
	"d[0]['server'] == 'remote' and d[0]['status'] == 'ready'"
NSEC=$(psql_q "select count(*) from run_events where payload::text like '%$RSECRET%'")$(psql_q "select count(*) from agent_messages where message::text like '%$RSECRET%'")
check "the credential is in no event, no message, no log" sh -c "[ '$NSEC' = 00 ] && ! grep -q '$RSECRET' '$LOG'"
check "the session was ended (DELETE) when the step ended" wait_for 10 grep -q '"DELETE"' "$T/mcph.log"

# --- 9. a runner killed in the middle of a call ---------------------------------------------
script '[
 {"reply": {"tool_calls": [{"id": "long", "name": "mcp__everything__trigger-long-running-operation", "input": {"duration": 6, "steps": 6}}]}},
 {"reply": {"text": "after the restart"}}]'
submit every
R9=$RUN
wait_for 30 sh -c "grep -c 'run $R9: mcp server everything' '$LOG' | grep -qx 1"
# the call made (its event follows the model's turn stored), well inside its 6 s
called9() { [ "$(psql_q "select count(*) from run_events where run_id = '$R9' and type = 'agent.tool_call'")" -ge 1 ]; }
wait_for 30 called9
sleep 1
RPID=$(child_pid runner)
check "a runner is in the middle of the long call ($RPID)" [ -n "$RPID" ]
kill -9 "$RPID"
wait_for 60 ended "$R9"
check "the run resumes and succeeds ($(run_status "$R9"): $(step_err "$R9"))" is_status "$R9" succeeded
check "the new attempt's server is a fresh one (two sandboxes in the log)" \
	[ "$(grep "run $R9: mcp server everything version" "$LOG" | sed 's/.*sandbox //' | sort -u | wc -l)" = 2 ]
check "the interrupted call is not made again: the model is told it was interrupted" \
	flog "$(res 1)['long'][1] and 'interrupted' in $(res 1)['long'][0]"

check "the daemon is healthy after all of it" healthy
check "no server's sandbox is left" no_sandbox_left
check "the credential is not in the daemon's log" sh -c "! grep -q '$RND' '$LOG'"
finish agent_mcp
