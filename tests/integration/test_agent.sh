#!/bin/sh
# Agent steps end to end against the real daemon and a fake model provider
# on loopback (tests/fakes/fake_model.py, the real Anthropic Messages and
# OpenAI Chat Completions wire formats, streamed and not):
#  - the tool-use loop reads and writes the workspace through the sandbox,
#    leaves its artifact, and records usage and cost equal to what the
#    provider reported; its events are agent.message, agent.tool_call,
#    agent.tool_result and agent.usage;
#  - the provider key goes to the provider in its header, and nowhere else:
#    not in the runner's or the sandbox's environment or memory, the
#    events, the stored conversation, the database, the logs;
#  - hostile tool calls (/proc/1/environ, ../outside, env, the key file,
#    the network) get errors or nothing, and a secret the model echoes is
#    redacted;
#  - a step whose budget cannot cover the next call's worst case stops
#    before the call, with budget.exceeded;
#  - a runner killed between two turns resumes, and the provider sees each
#    earlier turn once;
#  - 429 with retry-after (seconds or an HTTP date; too long a wait fails
#    at once), 500, a timeout, a malformed body and a stream cut
#    short are retried; when retries run out the step fails, saying why;
#  - max_turns; read-only steps get no bash.
. tests/integration/lib.sh
need_root agent
make_env
trap 'kill $FAKE_PID 2>/dev/null; cleanup_env' EXIT

PY=$(python3 -c 'import sys; print(sys.executable)')
FAKE_LOG="$T/fake.log"
SCRIPT="$T/script.json"
echo '[]' >"$SCRIPT"
mkdir -p "$T/keys"
chmod 0700 "$T/keys"
KEY="sk-ant-test-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
OKEY="sk-oai-test-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$KEY" >"$T/keys/provider.key"
printf '%s' "$OKEY" >"$T/keys/openai.key"
chmod 0600 "$T/keys/provider.key" "$T/keys/openai.key"
"$PY" tests/fakes/fake_model.py --port-file "$T/fake.port" --log "$FAKE_LOG" \
	--script "$SCRIPT" 2>>"$T/fake.err" &
FAKE_PID=$!
wait_for 10 test -s "$T/fake.port"
FPORT=$(cat "$T/fake.port")
check "the fake provider listens ($FPORT)" [ -n "$FPORT" ]

BASECONF=$(cat "$CONF")
# conf PROVIDER [STREAM] [TIMEOUT] [RETRIES] [FIELD]: the daemon's
# configuration with that agent provider (FIELD: oai's max_tokens_field)
conf() {
	cat >"$CONF" <<EOC
$BASECONF
engine: { concurrency: 4, lease: 5, sweep: 1 }
providers:
  - name: fake
    kind: anthropic
    base_url: "http://${FAKEHOST:-127.0.0.1}:$FPORT/"
    key_file: $T/keys/provider.key
    timeout: ${3:-5}
    retries: ${4:-2}
    stream: ${2:-true}
    models:
      - { name: fake-model, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 }
  - name: oai
    kind: openai
    base_url: "http://localhost:$FPORT/v1"
    key_file: $T/keys/openai.key
    timeout: ${3:-5}
    retries: ${4:-2}
    stream: ${2:-true}
    max_tokens_field: ${5:-max_tokens}
    models:
      - { name: gpt-fake, input: 2, output: 8, cache_read: 1 }
agent: { provider: $1, model: $([ "$1" = oai ] && echo gpt-fake || echo fake-model), max_tokens: 1000, tool_output_max: 2K }
EOC
}
conf fake

start_daemon_or_finish agent
# reload ARGS: conf ARGS, applied (agrippactl reload answers once it is)
reload() {
	conf "$@"
	"$AGRIPPACTL" -s "$CTL" reload >"$T/reload.out" 2>&1 ||
		notok "agrippactl reload ($*): $(cat "$T/reload.out")"
}

MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
"$MKREPO" "$T/repos/clean" >/dev/null
chmod -R a+rX "$T/repos"
tmpl() { # tmpl NAME ACCESS STEPYAML [BUDGET]: one phase, one agent step
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: %s }\n' "$2"
		[ -n "${4:-}" ] && printf '%s\n' "$4"
		printf 'phases:\n  - name: one\n    steps:\n      - %s\n' "$3"
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
tmpl diag readWrite '{ id: think, kind: agent, prompt: "Diagnose ${params.repo}.", produces: [ { key: diagnosis, kind: md, required: true } ] }'
tmpl plain readWrite '{ id: think, kind: agent, prompt: "Do it." }'
tmpl turns2 readWrite '{ id: think, kind: agent, prompt: "Loop.", max_turns: 2 }'
tmpl ro readOnly '{ id: think, kind: agent, prompt: "Look." }'
tmpl poor readWrite '{ id: think, kind: agent, prompt: "Spend." }' 'budget: { usd: 0.001 }'
tmpl modest readWrite '{ id: think, kind: agent, prompt: "Spend some." }' 'budget: { usd: 0.05 }'
tmpl mcpuser readWrite '{ id: think, kind: agent, prompt: "Use gh.", requires: { mcp_servers: [ { name: gh, optional: true } ] } }'
tmpl skilled readWrite '{ id: think, kind: agent, prompt: "Style.", requires: { skills: [ tidy ] } }'
printf '# tidy\nVERSION-ONE-RULES: keep it tidy.\n' >"$T/tidy1.md"
printf '# tidy\nVERSION-TWO-RULES: newer.\n' >"$T/tidy2.md"
chmod 0644 "$T/tidy1.md" "$T/tidy2.md"
ctl user add alice && ctl project add p1 && ctl member add p1 alice admin &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null && ctl skill add tidy "$T/tidy1.md" &&
	ctl grant add p1 skill tidy &&
	printf '{"transport": "stdio", "command": ["gh-mcp"], "env": {"GH_TOKEN": "${credentials.token}", "GH_HOST_KEY": "${credentials.other}"}}' >"$T/gh.json" &&
	chmod 0644 "$T/gh.json" &&
	MCPA="mcp-token-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" &&
	MCPB="mcp-other-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" &&
	printf '{"token": "%s", "other": "%s"}' "$MCPA" "$MCPB" | ctl mcp add gh "$T/gh.json" &&
	ctl grant add p1 mcp gh
SETUP=$?
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: a user, a token, a project, a repository, five templates" [ "$SETUP" = 0 -a -n "$TA" ]

J='Content-Type: application/json'
submit() { # submit TEMPLATE: RUN set
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"clean\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	RUNS="${RUNS:-} $RUN"
}
run_status() { psql_q "select status from runs where id = '$1'"; }
# failed_with RUN REGEX: the run failed, its last attempt's error matching
failed_with() { [ "$(run_status "$1")" = failed ] && step_err "$1" | grep -q -- "$2"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
ended() { case "$(run_status "$1")" in succeeded | failed | cancelled) return 0 ;; esac; return 1; }
step_err() { psql_q "select coalesce(error, '') from run_steps where run_id = '$1' order by attempt desc limit 1"; }
nevents() { psql_q "select count(*) from run_events where run_id = '$1' and type = '$2'"; }
payloads() { psql_q "select coalesce(json_agg(payload order by seq), '[]') from run_events where run_id = '$1' and type = '$2'"; }
pyj() { printf '%s' "$1" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)"; }
# script JSON: the fake's next requests; its log restarts empty
script() { printf '%s' "$1" >"$SCRIPT.tmp" && mv "$SCRIPT.tmp" "$SCRIPT"; : >"$FAKE_LOG"; }
# flog PYEXPR: the expression holds for L, the fake's log (a list)
flog() {
	"$PY" -c "import json,sys; L=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; sys.exit(0 if ($1) else 1)" "$FAKE_LOG"
}
flog_print() { "$PY" -c "import json,sys; L=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; print($1)" "$FAKE_LOG"; }

# --- 1. a whole step: read, write, the artifact, usage and cost ----------------------
script '[
 {"reply": {"text": "Let me look.", "tool_calls": [{"name": "read_file", "input": {"path": "README.md"}}],
            "usage": {"input": 1200, "output": 80, "cache_read": 1000, "cache_write": 100}}},
 {"reply": {"tool_calls": [{"name": "write_file", "input": {"path": ".agrippa/artifacts/diagnosis.md", "content": "# Diagnosis\nthe README says hello\n"}}],
            "usage": {"input": 1500, "output": 120}}},
 {"reply": {"text": "Done: the diagnosis is written.", "usage": {"input": 1700, "output": 30}}}]'
submit diag
R1=$RUN
wait_for 30 ended "$R1"
check "a three-turn agent step succeeds ($(run_status "$R1"): $(step_err "$R1"))" is_status "$R1" succeeded
check "the provider got three calls, with 1, 3 and 5 messages" flog "[e['messages'] for e in L] == [1, 3, 5]"
check "each at /v1/messages with the key in x-api-key and anthropic-version set" \
	flog "all(e['path'] == '/v1/messages' and e['headers'].get('x-api-key') == '$KEY' and e['headers'].get('anthropic-version') == '2023-06-01' for e in L)"
check "the key is in no request body, only in its header" \
	flog "all('$KEY' not in json.dumps(e['body']) and '$KEY' not in e['path'] for e in L)"
check "streamed, with the configured model and max_tokens" \
	flog "all(e['stream'] and e['body']['model'] == 'fake-model' and e['body']['max_tokens'] == 1000 for e in L)"
check "the prompt has its params expanded; the system prompt names the artifact's exact file" \
	flog "L[0]['body']['messages'][0]['content'][0]['text'] == 'Diagnose clean.' and '.agrippa/artifacts/diagnosis.md' in L[0]['body']['system']"
check "tools offered: read_file write_file edit_file list_dir glob grep bash" \
	flog "[t['name'] for t in L[0]['body']['tools']] == ['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep', 'bash']"
check "the second call carries the file's content as the tool result" \
	flog "L[1]['body']['messages'][2]['content'][0]['type'] == 'tool_result' and L[1]['body']['messages'][2]['content'][0]['content'] == 'hello\\n'"
check "the artifact diagnosis is stored with the agent's text" \
	[ "$(psql_q "select convert_from(inline, 'UTF8') from artifacts where run_id = '$R1' and key = 'diagnosis'")" = "# Diagnosis
the README says hello" ]
# cost: ceil((in*3 + out*15 + cr*0.3 + cw*3.75) micro-dollars)
check "usage recorded per call equals the provider's, cost at the price table" \
	[ "$(psql_q "select string_agg(concat_ws(':', provider, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd_micros), ' ' order by created_at) from token_usage where run_id = '$R1'")" = \
	  "fake:fake-model:1200:80:1000:100:5475 fake:fake-model:1500:120:0:0:6300 fake:fake-model:1700:30:0:0:5550" ]
check "the run's totals sum them" [ "$(psql_q "select spent_usd_micros from runs where id = '$R1'")" = 17325 ]
check "events: 2 agent.message, 2 agent.tool_call, 2 agent.tool_result, 3 agent.usage" \
	[ "$(nevents "$R1" agent.message):$(nevents "$R1" agent.tool_call):$(nevents "$R1" agent.tool_result):$(nevents "$R1" agent.usage)" = 2:2:2:3 ]
check "agent.tool_call names the tool and its input" pyj "$(payloads "$R1" agent.tool_call)" \
	"d[0]['name'] == 'read_file' and d[0]['input'] == {'path': 'README.md'} and d[0]['step_id'] == 'think' and d[0]['attempt'] == 1"
check "agent.tool_result carries the result" pyj "$(payloads "$R1" agent.tool_result)" \
	"d[0]['content'] == 'hello\\n' and not d[0]['is_error'] and d[1]['name'] == 'write_file'"
check "agent.usage: tokens and cost of each call" pyj "$(payloads "$R1" agent.usage)" \
	"[(u['input_tokens'], u['cost_usd_micros']) for u in d] == [(1200, 5475), (1500, 6300), (1700, 5550)] and d[2]['spent_usd_micros'] == 17325"
check "agent.message: the model's text" pyj "$(payloads "$R1" agent.message)" \
	"[m['text'] for m in d] == ['Let me look.', 'Done: the diagnosis is written.']"
check "the conversation is stored: 6 messages in session think.1" \
	[ "$(psql_q "select count(*) || ':' || min(session) from agent_messages where run_id = '$R1'")" = "6:think.1" ]
check "the reservation is settled at what was spent" \
	[ "$(psql_q "select settled_usd_micros from budget_reservations where run_id = '$R1'")" = 17325 ]

# --- 2. hostile tool calls, and an echoed secret -------------------------------------
script "[
 {\"reply\": {\"tool_calls\": [
   {\"name\": \"read_file\", \"input\": {\"path\": \"/proc/1/environ\"}},
   {\"name\": \"read_file\", \"input\": {\"path\": \"../../../../proc/self/environ\"}},
   {\"name\": \"write_file\", \"input\": {\"path\": \"../outside\", \"content\": \"x\"}},
   {\"name\": \"read_file\", \"input\": {\"path\": \"$T/keys/provider.key\"}},
   {\"name\": \"bash\", \"input\": {\"command\": \"env; cat $T/keys/provider.key; od -c /proc/1/environ\"}},
   {\"name\": \"bash\", \"input\": {\"command\": \"curl -s -m 3 http://127.0.0.1:$FPORT/_health && echo REACHED\"}},
   {\"name\": \"bash\", \"input\": {\"command\": \"grep -r -l -s '$KEY' /etc /tmp /run /var /home /root . /proc/[0-9]*/environ /proc/[0-9]*/cmdline; echo searched\"}},
   {\"name\": \"no_such_tool\", \"input\": {}},
   {\"name\": \"read_file\", \"input\": {}}]}},
 {\"reply\": {\"text\": \"I found your key: $KEY and $OKEY, see?\"}}]"
submit plain
R2=$RUN
wait_for 60 ended "$R2"
check "the hostile step ends (the model gave up) ($(run_status "$R2"): $(step_err "$R2"))" is_status "$R2" succeeded
RES=$(payloads "$R2" agent.tool_result)
check "/proc/1/environ, a path out of the workspace and an absolute key path: tool errors" pyj "$RES" \
	"d[0]['is_error'] and d[1]['is_error'] and d[2]['is_error'] and d[3]['is_error']"
check "../outside was not written" [ ! -e "$T/state/runs/outside" -a ! -e "$T/state/outside" ]
check "env, cat of the key file, /proc/1/environ from bash: no key in the output" pyj "$RES" \
	"'$KEY' not in d[4]['content'] and 'PATH=' in d[4]['content'] and 'No such file' in d[4]['content']"
check "the network is unreachable from bash" pyj "$RES" "'REACHED' not in d[5]['content']"
check "a search of the sandbox's files, environments and command lines finds no key" pyj "$RES" "d[6]['content'].endswith('searched\\n')"
check "an unknown tool and missing arguments: tool errors" pyj "$RES" \
	"d[7]['is_error'] and 'no_such_tool' in d[7]['content'] and d[8]['is_error'] and 'missing' in d[8]['content']"
check "the provider got the results of all nine calls" \
	flog "len(L) == 2 and len(L[1]['body']['messages'][2]['content']) == 9"
check "the key the model echoed is redacted in agent.message" pyj "$(payloads "$R2" agent.message)" \
	"'$KEY' not in d[0]['text'] and '$OKEY' not in d[0]['text'] and '*' * ${#KEY} in d[0]['text']"

# an MCP server's credentials, echoed by the model: each value redacted
script "[{\"reply\": {\"text\": \"creds: $MCPA, see? $MCPB\"}}]"
submit mcpuser
RM=$RUN
wait_for 30 ended "$RM"
check "a step of a run with an optional MCP server that cannot start succeeds ($(run_status "$RM"))" is_status "$RM" succeeded
check "the MCP server's credentials the model echoed are redacted in agent.message" \
	pyj "$(payloads "$RM" agent.message)" "'$MCPA' not in d[0]['text'] and d[0]['text'] == 'creds: ' + '*' * ${#MCPA} + ', see? ' + '*' * ${#MCPB}"
check "... and in the stored conversation" \
	[ "$(psql_q "select count(*) from agent_messages where run_id = '$RM' and (message::text like '%$MCPA%' or message::text like '%$MCPB%')")" = 0 ]

# --- 3. the key is nowhere but where it belongs ------------------------------------------
# a run that waits on the model (for 12 s, under a 20 s timeout), so its
# runner and sandbox can be searched while the call is in flight
reload fake true 20
script '[{"delay": 12, "reply": {"text": "slow"}}]'
submit plain
R3=$RUN
wait_for 20 flog "len(L) == 1"
RPID=$(child_pid runner)
SPIDS=$(find /proc/[0-9]*/exe -maxdepth 0 -lname "$ROOT/$BUILD/agrippa-sandbox" 2>/dev/null | cut -d/ -f3)
check "the hostile run had ended before: the only runner is this run's" is_status "$R2" succeeded
KHEX=$(printf '%s' "$KEY" | od -An -tx1 | tr -d ' \n')
check "a runner is waiting on the model ($RPID)" [ -n "$RPID" ]
check "the key is not in the runner's memory or environment" sh -c "! '$TOOLS/memgrep' $RPID $KHEX >/dev/null"
nos=0
for p in $SPIDS; do "$TOOLS/memgrep" "$p" "$KHEX" >/dev/null && nos=$((nos + 1)); done
check "nor in any sandbox process's ($(echo $SPIDS | wc -w) searched)" [ -n "$SPIDS" -a "$nos" = 0 ]
check "the proxy holds it (the search works)" eval '"$TOOLS/memgrep" "$(child_pid proxy)" "$KHEX" >/dev/null'
check "... and the call was still in flight: the searched processes were the live ones" \
	eval '[ "$(run_status "$R3")" = running ] && kill -0 $RPID $SPIDS'
wait_for 30 ended "$R3"
check "the slow call still ends the step ($(run_status "$R3"))" is_status "$R3" succeeded
check "the key is in no table of the database" [ "$(psql_q "select count(*) from run_events where payload::text like '%$KEY%'") $(psql_q "select count(*) from agent_messages where message::text like '%$KEY%'") $(psql_q "select count(*) from runs where row_to_json(runs)::text like '%$KEY%'")" = "0 0 0" ]
PGPASSWORD=$(cat "$T/state/db.password") pg_dump -h "$T/state/pgrun" -U agrippa agrippa >"$T/dump.sql" 2>/dev/null
check "a whole dump of the database holds neither key" eval '[ -s "$T/dump.sql" ] && ! grep -q -e "$KEY" -e "$OKEY" "$T/dump.sql"'
check "nor does the daemon's log" sh -c "! grep -q -e '$KEY' -e '$OKEY' '$LOG'"
reload fake

# --- 4. a budget smaller than the next call's worst case -----------------------------
script '[{"reply": {"text": "never"}}]'
submit poor
R4=$RUN
wait_for 30 ended "$R4"
check "the step fails before any call ($(run_status "$R4"): $(step_err "$R4"))" \
	failed_with "$R4" 'budget would be exceeded by the next model call'
check "the provider saw no call" flog "len(L) == 0"
check "budget.exceeded, scope step, with the reservation and the worst case" pyj "$(payloads "$R4" budget.exceeded)" \
	"len(d) == 1 and d[0]['scope'] == 'step' and d[0]['reserved_usd_micros'] == 1000 and d[0]['next_call_usd_micros'] > 1000 and d[0]['spent_usd_micros'] == 0"
check "no usage recorded, not retried" [ "$(psql_q "select count(*) from token_usage where run_id = '$R4'"):$(psql_q "select count(*) from run_steps where run_id = '$R4'")" = 0:1 ]

# the first call fits, and spends so much that the second one could not
script '[{"reply": {"tool_calls": [{"name": "list_dir", "input": {}}], "usage": {"input": 5000, "output": 1500}}},
 {"reply": {"text": "never"}}]'
submit modest
R4B=$RUN
wait_for 30 ended "$R4B"
check "a budget spent by the first call stops the step before the second ($(step_err "$R4B"))" \
	eval 'failed_with "$R4B" "budget would be exceeded by the next model call" && flog "len(L) == 1"'
check "budget.exceeded at turn 1: spent 37500 of 50000, the next call's worst case over the 12500 left" \
	pyj "$(payloads "$R4B" budget.exceeded)" \
	"d[0]['turn'] == 1 and d[0]['spent_usd_micros'] == 37500 and d[0]['reserved_usd_micros'] == 50000 and d[0]['next_call_usd_micros'] > 12500"
check "the call made is recorded at its cost" \
	[ "$(psql_q "select sum(cost_usd_micros) from token_usage where run_id = '$R4B'")" = 37500 ]

# --- 5. a runner killed between two turns ----------------------------------------------
# the first answer asks for three calls: the runner dies during the second
script '[
 {"reply": {"tool_calls": [{"name": "read_file", "input": {"path": "README.md"}},
                           {"name": "bash", "input": {"command": "echo started >> marks; sleep 30"}},
                           {"name": "read_file", "input": {"path": "marks"}}]}},
 {"reply": {"tool_calls": [{"name": "read_file", "input": {"path": "marks"}}]}},
 {"reply": {"text": "finished"}}]'
submit plain
R5=$RUN
wait_for 20 flog "len(L) == 1"
wait_for 10 eval '[ "$(psql_q "select count(*) from agent_messages where run_id = '"'"'$R5'"'"'")" = 3 ]'
# the command of the second call has begun: its mark is written
wait_for 10 test -s "$(run_ws "$R5")/marks"
RPID=$(child_pid runner)
check "the first call's result was stored before the second call ended" \
	[ "$(psql_q "select jsonb_array_length(message->'content') from agent_messages where run_id = '$R5' and seq = 2")" = 1 ]
kill -KILL "$RPID"
check "the runner was killed while the first turn's command ran ($RPID)" [ -n "$RPID" ]
wait_for 60 ended "$R5"
check "the run resumes and succeeds ($(run_status "$R5"): $(step_err "$R5"))" is_status "$R5" succeeded
check "attempts: crashed, then succeeded, in one session" \
	[ "$(psql_q "select string_agg(status || ':' || coalesce(executor_session, '-'), ' ' order by attempt) from run_steps where run_id = '$R5'")" = "crashed:think.1 succeeded:think.1" ]
check "the provider saw each turn once: 1, 3, 5 messages" flog "[e['messages'] for e in L] == [1, 3, 5]"
check "the round's answered call kept its result; the interrupted command was not run again, the model was told; the call after it ran" \
	flog "[r['content'] for r in L[1]['body']['messages'][2]['content']][0::2] == ['hello\\n', 'started\\n'] and 'interrupted' in L[1]['body']['messages'][2]['content'][1]['content'] and L[1]['body']['messages'][2]['content'][1]['is_error']"
check "the command had run once (marks: one line)" pyj "$(payloads "$R5" agent.tool_result)" "d[-1]['content'] == 'started\\n'"
check "README.md was read once: its result came from the stored round" \
	[ "$(psql_q "select count(*) from run_events where run_id = '$R5' and type = 'agent.tool_result' and payload->>'content' = 'hello' || chr(10)")" = 1 ]
check "usage: three calls recorded, none twice" [ "$(psql_q "select count(*) from token_usage where run_id = '$R5'")" = 3 ]

# --- 5b. the proxy dies: the runner waits for the new one and goes on ---------------------
# during a call (made again, whole, to the new proxy), then while a command runs
script '[{"delay": 3, "reply": {"text": "never delivered"}},
 {"reply": {"tool_calls": [{"name": "bash", "input": {"command": "touch m2; sleep 4; echo slept"}}]}},
 {"reply": {"text": "done after two proxies"}}]'
submit plain
RP=$RUN
wait_for 20 flog "len(L) == 1"
PX1=$(child_pid proxy)
kill -KILL "$PX1"
wait_for 30 test -e "$(run_ws "$RP")/m2"
PX2=$(child_pid proxy)
kill -KILL "$PX2"
wait_for 60 ended "$RP"
check "a proxy killed during a call, then one killed while a command runs: the step succeeds ($(run_status "$RP"): $(step_err "$RP"))" \
	is_status "$RP" succeeded
check "... in its first attempt: the runner did not die" \
	[ "$(psql_q "select string_agg(status, ' ' order by attempt) from run_steps where run_id = '$RP'")" = succeeded ]
check "... under three proxies ($PX1, $PX2, $(child_pid proxy))" \
	[ -n "$PX1" -a -n "$PX2" -a "$PX1" != "$PX2" -a -n "$(child_pid proxy)" -a "$(child_pid proxy)" != "$PX2" ]
check "the unanswered call was made again, whole (system prompt, tools, the first message), then the next one" \
	flog "len(L) == 3 and [e['messages'] for e in L] == [1, 1, 3] and L[1]['body']['messages'] == L[0]['body']['messages'] and L[1]['body']['system'] == L[0]['body']['system'] and L[1]['body']['tools'] == L[0]['body']['tools']"
check "the command ran once, and its result reached the model" \
	flog "L[2]['body']['messages'][2]['content'][0]['content'] == 'exit status 0\\nslept\\n'"
check "usage: the two answered calls, not the one the dead proxy never answered" \
	[ "$(psql_q "select count(*) from token_usage where run_id = '$RP'")" = 2 ]
check "the runner said it waited for, then took, a new model channel" \
	eval 'grep -q "the model channel is gone; waiting for the proxy" "$LOG" && grep -q "a new model channel: the call is made again" "$LOG"'

# a cancel while the runner waits for a proxy ends the step at once (the
# proxy, failing again within a minute, comes back only after 4 s)
script '[{"delay": 3, "reply": {"text": "never delivered"}}, {"reply": {"text": "never asked"}}]'
submit plain
RPC=$RUN
wait_for 20 flog "len(L) == 1"
nwait=$(grep -c "the model channel is gone; waiting for the proxy" "$LOG")
kill -KILL "$(child_pid proxy)"
wait_for 10 eval '[ "$(grep -c "the model channel is gone; waiting for the proxy" "$LOG")" -gt $nwait ]'
curl -s -o /dev/null --max-time 10 -X POST -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/runs/$RPC/cancel"
wait_for 20 ended "$RPC"
check "a cancel while the runner waits for a new proxy: cancelled at once, the call not made again ($(run_status "$RPC"))" \
	eval 'is_status "$RPC" cancelled && flog "len(L) == 1"'
wait_for 20 eval '[ -n "$(child_pid proxy)" ]'

# --- 6. provider errors ------------------------------------------------------------------
reload fake true 2 5
script '[{"status": 429, "headers": {"retry-after": "2"}}, {"status": 500}, {"malformed": true}, {"cut": true},
 {"delay": 4, "reply": {"text": "late"}}, {"reply": {"text": "at last", "usage": {"input": 7, "output": 3}}}]'
submit plain
R6=$RUN
wait_for 90 ended "$R6"
check "429, 500, malformed, cut, timeout: each retried, then the step succeeds ($(run_status "$R6"): $(step_err "$R6"))" is_status "$R6" succeeded
check "six requests reached the provider" flog "len(L) == 6"
check "the retry after the 429 waited its retry-after (2 s)" flog "L[1]['time'] - L[0]['time'] >= 1.9"
check "only the answered call is recorded: 7 in, 3 out" \
	[ "$(psql_q "select string_agg(input_tokens || ':' || output_tokens, ' ') from token_usage where run_id = '$R6'")" = "7:3" ]
reload fake false 2 1
script '[{"status": 500}, {"status": 503}]'
submit plain
R7=$RUN
wait_for 60 ended "$R7"
check "500s until retries run out: the step fails, saying why ($(step_err "$R7"))" \
	failed_with "$R7" 'HTTP 503.*after every retry'
script '[{"malformed": true}, {"malformed": true}]'
submit plain
R8=$RUN
wait_for 60 ended "$R8"
check "malformed answers (not streamed) until retries run out: a clear failure ($(step_err "$R8"))" \
	failed_with "$R8" 'could not be read'
script '[{"delay": 4}, {"delay": 4}]'
submit plain
R9=$RUN
wait_for 60 ended "$R9"
check "timeouts until retries run out: a clear failure ($(step_err "$R9"))" \
	failed_with "$R9" 'did not answer within 2 s'
script '[{"status": 400, "body": {"type": "error", "error": {"type": "invalid_request_error", "message": "bad thing"}}}]'
submit plain
R10=$RUN
wait_for 30 ended "$R10"
check "a 400 is not retried: one call, the provider's message in the error ($(step_err "$R10"))" \
	eval 'failed_with "$R10" "HTTP 400: invalid_request_error: bad thing" && flog "len(L) == 1"'

# a redirect could carry the key to another place: it is not followed
script "[{\"status\": 307, \"headers\": {\"location\": \"http://127.0.0.1:$FPORT/v1/messages?stolen=1\"}, \"body\": \"moved\"}, {\"reply\": {\"text\": \"followed\"}}]"
submit plain
R10B=$RUN
wait_for 30 ended "$R10B"
check "a redirect is not followed: one request, the step fails on HTTP 307 ($(step_err "$R10B"))" \
	eval 'failed_with "$R10B" "HTTP 307" && flog "len(L) == 1"'

# retry-after as an HTTP date: one in the past retries at once (not after
# the backoff of at least 1 s); one years ahead, or delay-seconds over 300, fails clearly
script '[{"status": 429, "headers": {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}}, {"reply": {"text": "ok"}}]'
submit plain
R10C=$RUN
wait_for 30 ended "$R10C"
check "a 429 with a retry-after date in the past: retried at once (not after the backoff), then the step succeeds ($(step_err "$R10C"))" \
	eval 'is_status "$R10C" succeeded && flog "len(L) == 2" && grep -q "run $R10C: .*HTTP 429.*retrying in 0 ms" "$LOG"'
for ra in "Fri, 31 Dec 2060 23:59:59 GMT" 301; do
	script "[{\"status\": 429, \"headers\": {\"retry-after\": \"$ra\"}}, {\"reply\": {\"text\": \"waited\"}}]"
	submit plain
	R=$RUN
	wait_for 30 ended "$R"
	check "a 429 asking to wait too long ($ra): one request, the step fails saying so ($(step_err "$R"))" \
		eval 'failed_with "$R" "HTTP 429.*; the provider asks to wait [0-9]* s, over the 300 s" && flog "len(L) == 1"'
done

# --- 7. OpenAI Chat Completions, streamed and not --------------------------------------
for stream in true false; do
	# streamed, the output limit is max_tokens; not streamed, max_completion_tokens
	field=$([ $stream = true ] && echo max_tokens || echo max_completion_tokens)
	other=$([ $stream = true ] && echo max_completion_tokens || echo max_tokens)
	reload oai $stream 5 2 $field
	script '[{"reply": {"tool_calls": [{"name": "list_dir", "input": {"path": "."}}, {"name": "read_file", "input": "oops"}], "usage": {"input": 100, "output": 10, "cache_read": 50}}},
	 {"reply": {"text": "listed"}}]'
	submit plain
	R=$RUN
	wait_for 30 ended "$R"
	check "openai (stream: $stream): the step succeeds ($(run_status "$R"): $(step_err "$R"))" is_status "$R" succeeded
	check "openai (stream: $stream): Bearer key, /v1/chat/completions, a tool result with the listing" \
		flog "all(e['path'] == '/v1/chat/completions' and e['headers'].get('authorization') == 'Bearer $OKEY' for e in L) and len(L) == 2 and L[1]['body']['messages'][-2]['role'] == 'tool' and 'README.md' in L[1]['body']['messages'][-2]['content']"
	check "openai (stream: $stream): the output limit is $field: 1000, and there is no $other" \
		flog "all(e['body'].get('$field') == 1000 and '$other' not in e['body'] for e in L)"
	check "openai (stream: $stream): arguments that are no JSON object get a tool error, and the conversation goes on" \
		flog "L[1]['body']['messages'][-1]['role'] == 'tool' and 'must be a JSON object' in L[1]['body']['messages'][-1]['content']"
	check "openai (stream: $stream): usage 100 in (50 cached), cost 100*2 + 10*8 + 50*1" \
		[ "$(psql_q "select input_tokens || ':' || cache_read_tokens || ':' || cost_usd_micros from token_usage where run_id = '$R' order by created_at limit 1")" = "100:50:330" ]
done

# --- 8. max_turns and read-only steps --------------------------------------------------
reload fake true
script '[{"repeat": 5, "reply": {"tool_calls": [{"name": "glob", "input": {"pattern": "**/*.c"}}]}}]'
submit turns2
R11=$RUN
wait_for 30 ended "$R11"
check "max_turns 2: the step fails after two calls ($(step_err "$R11"))" \
	eval 'failed_with "$R11" "max_turns (2)" && flog "len(L) == 2"'
check "glob found src/main.c" pyj "$(payloads "$R11" agent.tool_result)" "'src/main.c' in d[0]['content']"
script '[{"reply": {"tool_calls": [{"name": "bash", "input": {"command": "touch x"}}, {"name": "write_file", "input": {"path": "x", "content": "y"}}]}},
 {"reply": {"text": "ok"}}]'
submit ro
R12=$RUN
wait_for 30 ended "$R12"
check "a read-only step succeeds; no bash offered ($(run_status "$R12"): $(step_err "$R12"))" \
	eval 'is_status "$R12" succeeded && flog "\"bash\" not in [t[\"name\"] for t in L[0][\"body\"][\"tools\"]]"'
check "... bash and a write outside the artifacts refused" pyj "$(payloads "$R12" agent.tool_result)" \
	"d[0]['is_error'] and d[1]['is_error']"

# --- 8b. answers too large to store or to show ------------------------------------------
# bigscript BYTES: one write_file of BYTES bytes of content, then a text answer
bigscript() {
	"$PY" -c 'import json, sys
print(json.dumps([{"reply": {"tool_calls": [{"name": "write_file", "input": {"path": "big.txt", "content": "x" * int(sys.argv[1])}}]}},
                  {"reply": {"text": "wrote it"}}]))' "$1" >"$SCRIPT.tmp" && mv "$SCRIPT.tmp" "$SCRIPT"
	: >"$FAKE_LOG"
}
bigscript 100000
submit plain
R16=$RUN
wait_for 30 ended "$R16"
check "a 100 KB tool call is run ($(run_status "$R16"): $(step_err "$R16"))" is_status "$R16" succeeded
check "... and shown in agent.tool_call cut to 16 KiB, saying so and how long it was" pyj "$(payloads "$R16" agent.tool_call)" \
	"d[0]['input_truncated'] and d[0]['input_bytes'] > 100000 and len(d[0]['input']) <= 16384 and d[0]['name'] == 'write_file'"
bigscript 1200000
submit plain
R17=$RUN
wait_for 30 ended "$R17"
check "an answer over 1 MiB fails the step, saying why, without killing its runner ($(step_err "$R17" | cut -c1-80)...)" \
	eval 'failed_with "$R17" "more than the 1048576 one message may be" && [ "$(psql_q "select string_agg(status, '"' '"') from run_steps where run_id = '"'"'$R17'"'"'")" = failed ]'
check "... the call it paid for is recorded" [ "$(psql_q "select count(*) from token_usage where run_id = '$R17'")" = 1 ]

# --- 9. skills, truncation, cancel -------------------------------------------------------
# The skill pinned at submit is the one the agent gets, even when a newer
# version is registered before the step runs.
script '[{"delay": 1, "reply": {"tool_calls": [{"name": "bash", "input": {"command": "head -c 5000 /dev/zero | tr \\\\0 a > big.txt"}}]}},
 {"reply": {"tool_calls": [{"name": "read_file", "input": {"path": "big.txt"}}]}},
 {"reply": {"text": "read"}}]'
submit skilled
R13=$RUN
ctl skill add tidy "$T/tidy2.md"
wait_for 30 ended "$R13"
check "a step with a skill succeeds ($(run_status "$R13"): $(step_err "$R13"))" is_status "$R13" succeeded
check "the system prompt holds the skill pinned at submit (version 1), not the newer one" \
	flog "'VERSION-ONE-RULES' in L[0]['body']['system'] and 'VERSION-TWO-RULES' not in L[0]['body']['system'] and '## tidy (version 1)' in L[0]['body']['system']"
check "a long file is cut at tool_output_max (2K) with a marker saying how much was shown" \
	flog "L[2]['body']['messages'][4]['content'][0]['content'].endswith('[truncated: the first 2048 of 5000 bytes are shown]') and L[2]['body']['messages'][4]['content'][0]['content'].startswith('a' * 2048 + chr(10))"
check "agent.tool_result shows at most 4 KiB, says it was cut and how long the result was" pyj "$(payloads "$R13" agent.tool_result)" \
	"len(d[1]['content']) <= 4096 and d[1]['bytes'] > 2048"
script '[{"reply": {"tool_calls": [{"name": "bash", "input": {"command": "sleep 60"}}]}}, {"reply": {"text": "never"}}]'
submit plain
R14=$RUN
wait_for 20 flog "len(L) == 1"
sleep 1
curl -s -o /dev/null --max-time 10 -X POST -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/runs/$R14/cancel"
wait_for 20 ended "$R14"
check "a cancel while the agent's command runs ends the run cancelled at once ($(run_status "$R14"))" is_status "$R14" cancelled
check "... and the model is not asked again" flog "len(L) == 1"

for r in $RUNS; do
	check "event seqs of run $r are 1..N" [ "$(psql_q "select count(*) = max(seq) from run_events where run_id = '$r'")" = t ]
done

# --- 10. key files the supervisor refuses -------------------------------------------------
check "no warning about keys in clear for providers on loopback" sh -c "! grep -q 'crosses the network in clear' '$LOG'"
FAKEHOST=192.0.2.1 reload fake
check "a key sent over plain http to another host is warned about" \
	grep -q 'provider fake: base_url is plain http to another host: its key crosses the network in clear' "$LOG"
reload fake
# a reload with a bad key file changes nothing; a start with one fails, naming it
chmod 0644 "$T/keys/provider.key"
check "a reload with a key file readable by others is refused, naming the file" \
	eval '! "$AGRIPPACTL" -s "$CTL" reload >"$T/reload.out" 2>&1 && grep -q "provider key: $T/keys/provider.key: mode 0644" "$T/reload.out" && grep -q "reload: configuration not changed: provider key: $T/keys/provider.key: mode 0644" "$LOG"'
script '[{"reply": {"text": "still served"}}]'
submit plain
R15=$RUN
wait_for 30 ended "$R15"
check "... and the running configuration still serves agent steps ($(run_status "$R15"))" is_status "$R15" succeeded
stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" = 0 ]
# refused KEYFILE-SETUP EXPECTED: the daemon does not start, saying EXPECTED
refused() {
	out=$("$AGRIPPAD" -d -f "$CONF" 2>&1)
	st=$?
	if [ "$st" != 0 ] && printf '%s' "$out" | grep -q -- "$1"; then ok "$2"; else
		notok "$2 (status $st: $(printf '%s' "$out" | tail -n 2))"; fi
}
refused "provider key: $T/keys/provider.key: mode 0644" "start: a key file readable by others is refused"
chmod 0600 "$T/keys/provider.key"
mv "$T/keys/provider.key" "$T/keys/real.key"
ln -s "$T/keys/real.key" "$T/keys/provider.key"
refused "provider key: $T/keys/provider.key: is a symbolic link" "start: a key file that is a symbolic link is refused"
rm "$T/keys/provider.key"
printf 'two words\n' >"$T/keys/provider.key"
chmod 0600 "$T/keys/provider.key"
refused "provider key: $T/keys/provider.key: a key is 1 to 4096 printable" "start: a key with a space is refused"
printf '' >"$T/keys/provider.key"
refused "provider key: $T/keys/provider.key: 0 bytes" "start: an empty key file is refused"
rm "$T/keys/provider.key"
refused "provider key: $T/keys/provider.key: No such file" "start: a missing key file is refused"
# none_left: no process of our binary started with this test's configuration
none_left() {
	for p in $(our_processes); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$CONF" && return 1
	done
	return 0
}
check "no daemon was left running by the refused starts" none_left
finish agent
