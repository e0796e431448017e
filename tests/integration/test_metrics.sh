#!/bin/sh
# GET /metrics on metrics_listen (agrippad.conf(5)): off by default (nothing
# listens); a metrics_listen equal to a listen address or malformed is
# refused by agrippad -n with its name; on, the output passes promtool check
# metrics, is text/plain version 0.0.4, and its values are what the test did
# (runs of two templates, a failing run, a budget stop, API replies 200, 404
# and 401, an open event stream, an engine killed and restarted); it names no
# user, project, run or token; every other path and method there is 404, and
# the API's own address answers /metrics 404.
. tests/integration/lib.sh
need_root metrics
make_env
trap cleanup_env EXIT
PROMTOOL=$(command -v promtool || true)
MPORT=$((PORT + 1))
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1 }
EOC
cp "$CONF" "$T/base.yaml"

# ---- off by default ----------------------------------------------------------
start_daemon_or_finish metrics
mcode() { curl -s -o "$T/m.out" -D "$T/hdrs" -w '%{http_code}' --max-time 10 "$@"; }
check "without metrics_listen nothing listens on the metrics port" \
	[ "$(mcode "http://127.0.0.1:$MPORT/metrics")" = 000 ]
check "the API's address answers /metrics 404" \
	[ "$(mcode "http://127.0.0.1:$PORT/metrics")" = 404 ]
stop_daemon

# ---- bad values: a clear error naming the key, nothing started ---------------
bad() { # bad VALUE EXPECTED-MESSAGE
	cp "$T/base.yaml" "$T/bad.yaml"
	printf 'metrics_listen: "%s"\n' "$1" >>"$T/bad.yaml"
	out=$("$AGRIPPAD" -n -f "$T/bad.yaml" 2>&1)
	rc=$?
	if [ "$rc" -ne 0 ] && printf '%s' "$out" | grep -q "metrics_listen: $2"; then
		ok "metrics_listen \"$1\" is refused: $2"
	else
		notok "metrics_listen \"$1\" is refused: $2 (rc $rc: $out)"
	fi
}
bad "127.0.0.1:$PORT" "the same address as listen\[0\]"
bad "127.0.0.1" "expected \"host:port\""
bad "127.0.0.1:0" "port must be a number"
bad "example.com:9100" "host must be"

printf 'metrics_listen: "127.0.0.1:%s"\n' "$MPORT" >>"$CONF"
check "agrippad -n takes metrics_listen" "$AGRIPPAD" -n -f "$CONF"
start_daemon_or_finish metrics

# ---- what the test does --------------------------------------------------------
MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
"$MKREPO" "$T/repos/clean" >/dev/null
chmod -R a+rX "$T/repos"
tmpl() { # tmpl NAME BUDGET-LINE STEPS...
	n=$1 b=$2
	shift 2
	{
		printf 'name: %s\nversion: 1\n' "$n"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		[ -n "$b" ] && printf '%s\n' "$b"
		printf 'phases:\n  - name: one\n    steps:\n'
		for s in "$@"; do printf '      - %s\n' "$s"; done
	} >"$T/tmpl/$n.yaml"
	ctl template load "$T/tmpl/$n.yaml"
}
tmpl tpl-alpha '' '{ id: hello, kind: command, run: "echo hello" }' &&
	tmpl tpl-beta '' '{ id: hello, kind: command, run: "echo hello" }' &&
	tmpl tpl-fails '' '{ id: bad, kind: command, run: "exit 3" }' &&
	tmpl tpl-budget 'budget: { usd: 0 }' '{ id: think, kind: agent, prompt: "x" }'
TMPL=$?
ctl user add zoyamarlowe && ctl project add projquokka && ctl member add projquokka zoyamarlowe admin &&
	ctl repo add projquokka clean "$T/repos/clean" </dev/null
SETUP=$?
TOK=$(new_token zoyamarlowe)
P=$(psql_q "select id from projects where name = 'projquokka'")
check "set-up: four templates, a user, a project, a repository, a token" \
	[ "$TMPL" = 0 -a "$SETUP" = 0 -a -n "$TOK" -a -n "$P" ]

RUNS=""
submit() {
	r=$(curl -s --max-time 10 -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"clean\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
	RUNS="$RUNS $r"
	echo "$r"
}
for _ in 1 2 3; do submit tpl-alpha >/dev/null; done
for _ in 1 2; do submit tpl-beta >/dev/null; done
RFAIL=$(submit tpl-fails)
RBUD=$(submit tpl-budget)
RUNS="$RUNS $RFAIL $RBUD" # submit ran in a subshell for these two
check "seven runs submitted" [ "$(echo $RUNS | wc -w)" = 7 ]
settled() {
	[ "$(psql_q "select count(*) from runs where status in ('succeeded', 'failed', 'cancelled')
		or (status = 'waiting_approval' and id = '$RBUD')")" = 7 ]
}
check "every run ends (the budget run waits on its approval)" wait_for 240 settled

api() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
C200=0
for _ in 1 2 3 4 5; do
	[ "$(api -H "Authorization: Bearer $TOK" "http://127.0.0.1:$PORT/v1/me")" = 200 ] && C200=$((C200 + 1))
done
C404=$(api "http://127.0.0.1:$PORT/v1/no-such-thing")
C401=$(api "http://127.0.0.1:$PORT/v1/me")
check "API replies: 5 x 200 on /v1/me, a 404, a 401" [ "$C200" = 5 -a "$C404" = 404 -a "$C401" = 401 ]

# a model call's usage on the parked run, as proxy_usage records it
# (no model is called here: the step stopped at its budget first)
psql_q "insert into run_steps (run_id, phase_name, step_id, attempt, status, finished_at)
	values ('$RBUD', 'one', 'probe', 1, 'succeeded', now());
	insert into token_usage (run_id, step_id, attempt, provider, model, input_tokens,
	output_tokens, cache_read_tokens, cache_write_tokens, cost_usd_micros)
	values ('$RBUD', 'probe', 1, 'fakeprov', 'm-1.5', 100, 20, 3, 4, 1234567)" >/dev/null
# costs exact at both ends: 5 millionths, and 2^53 + 1 of them, which a
# double would round
psql_q "insert into token_usage (run_id, step_id, attempt, provider, model, cost_usd_micros)
	values ('$RBUD', 'probe', 1, 'fakeprov', 'm-tiny', 5),
	       ('$RBUD', 'probe', 1, 'fakeprov', 'm-huge', 9007199254740993)" >/dev/null
# attempts on the buckets' bounds (le: a bound's own value is in its bucket),
# as the only ones of their status
psql_q "insert into run_steps (run_id, phase_name, step_id, attempt, status, started_at, finished_at)
	select '$RBUD', 'one', 'edge-' || g, 1, 'timed_out', now() - d * interval '1 second', now()
	from unnest(array[1, 5, 5.5, 20000]) with ordinality as t(d, g)" >/dev/null

# an event stream of the parked run stays open
curl -s -N --max-time 60 -H "Authorization: Bearer $TOK" \
	"http://127.0.0.1:$PORT/v1/runs/$RBUD/events/stream" >"$T/sse.out" 2>&1 &
SSE=$!
# counted by then: httpd writes the stream's first bytes once it has joined
wait_for 15 test -s "$T/sse.out"

# ---- the scrape ------------------------------------------------------------------
CODE=$(mcode "http://127.0.0.1:$MPORT/metrics")
M="$T/m.out"
cp "$M" "$T/scrape1"
check "GET /metrics is 200" [ "$CODE" = 200 ]
check "Content-Type: text/plain; version=0.0.4; charset=utf-8" \
	[ "$(header Content-Type)" = "text/plain; version=0.0.4; charset=utf-8" ]
if [ -n "$PROMTOOL" ]; then
	if out=$("$PROMTOOL" check metrics <"$M" 2>&1); then
		ok "promtool check metrics passes"
	else
		notok "promtool check metrics passes: $out"
	fi
else
	notok "promtool check metrics passes (promtool is not installed: make deps)"
fi
check "the body holds no NUL byte" [ "$(tr -d '\000' <"$M" | wc -c)" = "$(wc -c <"$M")" ]
# v 'name{labels}': the sample's value ("" when absent)
v() { awk -v k="$1" 'index($0, k " ") == 1 { print $NF }' "$T/scrape1"; }
want() { # want SAMPLE VALUE
	if [ "$(v "$1")" = "$2" ]; then ok "$1 is $2"; else notok "$1 is $2 (got '$(v "$1")')"; fi
}
want 'agrippa_runs{template="tpl-alpha",status="succeeded"}' 3
want 'agrippa_runs{template="tpl-beta",status="succeeded"}' 2
want 'agrippa_runs{template="tpl-fails",status="failed"}' 1
want 'agrippa_runs{template="tpl-budget",status="waiting_approval"}' 1
want 'agrippa_queue_runs' 0
want 'agrippa_queue_oldest_age_seconds' 0.000
want 'agrippa_budget_stops_total' 1
want 'agrippa_sse_clients' 1
for st in succeeded failed; do
	n=$(psql_q "select count(*) from run_steps where status = '$st'")
	want "agrippa_step_duration_seconds_count{status=\"$st\"}" "$n"
	want "agrippa_step_duration_seconds_bucket{status=\"$st\",le=\"+Inf\"}" "$n"
done
want 'agrippa_step_duration_seconds_bucket{status="timed_out",le="1"}' 1
want 'agrippa_step_duration_seconds_bucket{status="timed_out",le="5"}' 2
want 'agrippa_step_duration_seconds_bucket{status="timed_out",le="10"}' 3
want 'agrippa_step_duration_seconds_bucket{status="timed_out",le="14400"}' 3
want 'agrippa_step_duration_seconds_bucket{status="timed_out",le="+Inf"}' 4
want 'agrippa_step_duration_seconds_sum{status="timed_out"}' 20011.500
want 'agrippa_step_duration_seconds_count{status="timed_out"}' 4
want 'agrippa_model_calls_total{provider="fakeprov",model="m-1.5"}' 1
want 'agrippa_model_tokens_total{provider="fakeprov",model="m-1.5",kind="input"}' 100
want 'agrippa_model_tokens_total{provider="fakeprov",model="m-1.5",kind="output"}' 20
want 'agrippa_model_tokens_total{provider="fakeprov",model="m-1.5",kind="cache_read"}' 3
want 'agrippa_model_tokens_total{provider="fakeprov",model="m-1.5",kind="cache_write"}' 4
want 'agrippa_model_cost_usd_total{provider="fakeprov",model="m-1.5"}' 1.234567
want 'agrippa_model_cost_usd_total{provider="fakeprov",model="m-tiny"}' 0.000005
want 'agrippa_model_cost_usd_total{provider="fakeprov",model="m-huge"}' 9007199254.740993
want 'agrippa_http_requests_total{method="GET",route="/v1/me",code="200"}' 5
want 'agrippa_http_requests_total{method="GET",route="/v1/me",code="401"}' 1
want 'agrippa_http_requests_total{method="POST",route="/v1/projects/{id}/runs",code="201"}' 7
check "agrippa_http_requests_total counts the 404 without a route" \
	[ "$(v 'agrippa_http_requests_total{method="any",route="none",code="404"}')" -ge 1 ]
S=$(v agrippa_sandboxes_started_total)
check "agrippa_sandboxes_started_total is at least the 6 runs that ran a command ($S)" [ "${S:-0}" -ge 6 ]
want 'agrippa_egress_decisions_total{decision="denied"}' 0
want 'agrippa_child_restarts_total{child="engine"}' 0
want 'agrippa_ipc_protocol_errors_total{child="httpd"}' 0
want 'agrippa_db_pool_connections{state="configured"}' 4
OKS=$(v 'agrippa_db_operations_total{result="ok"}')
ERRS=$(v 'agrippa_db_operations_total{result="error"}')
UNAV=$(v 'agrippa_db_operations_total{result="unavailable"}')
check "database operations counted ($OKS ok), the latency histogram's count is their sum" \
	[ "${OKS:-0}" -gt 50 -a "$(v agrippa_db_operation_duration_seconds_count)" = $((OKS + ERRS + UNAV)) ]

# ---- no user data ------------------------------------------------------------------
leak=""
for w in zoyamarlowe projquokka "$P" $RUNS "$(prefix "$TOK")" agr_ "$T"; do
	grep -qF -- "$w" "$M" && leak="$leak $w"
done
check "the scrape names no user, project, run id, token or path" [ -z "$leak" ]

# ---- the sums the scrape reads (0016_metrics_sums.sql) -------------------------------
# fam FILE: the step and model families of a scrape
fam() { grep -E '^agrippa_(step_duration_seconds|model_)' "$1"; }
deltas() { psql_q "select (select count(*) from metrics_step_deltas) + (select count(*) from metrics_model_deltas)"; }
compacted() { [ "$(deltas)" = 0 ]; }
check "the engine's sweep moves the metrics' deltas into their sums" wait_for 30 compacted
mcode "http://127.0.0.1:$MPORT/metrics" >/dev/null
cp "$M" "$T/scrape2"
check "... and a scrape after it says the same ($(fam "$T/scrape2" | wc -l) samples)" \
	[ -n "$(fam "$T/scrape1")" -a "$(fam "$T/scrape1")" = "$(fam "$T/scrape2")" ]
RDEL=$(psql_q "select id from runs where template_name = 'tpl-alpha' and status = 'succeeded' limit 1")
psql_q "delete from runs where id = '$RDEL'" >/dev/null
check "a run deleted is gone with its steps ($RDEL)" \
	[ -n "$RDEL" -a "$(psql_q "select count(*) from run_steps where run_id = '$RDEL'")" = 0 ]
mcode "http://127.0.0.1:$MPORT/metrics" >/dev/null
cp "$M" "$T/scrape3"
check "... and the counters of its steps do not go down" [ "$(fam "$T/scrape1")" = "$(fam "$T/scrape3")" ]

# ---- only GET /metrics there, and only there ---------------------------------------
for p in / /metrics/ /metrics.txt /v1/me /healthz "/metrics?x=1" /ui/ "/../metrics"; do
	c=$(mcode --path-as-is "http://127.0.0.1:$MPORT$p")
	check "metrics socket: GET $p is 404" [ "$c" = 404 ]
done
for m in POST PUT DELETE OPTIONS; do
	c=$(mcode -X "$m" "http://127.0.0.1:$MPORT/metrics")
	check "metrics socket: $m /metrics is 404" [ "$c" = 404 ]
done
check "metrics socket: HEAD /metrics is 200" \
	[ "$(curl -s -o /dev/null -I -w '%{http_code}' --max-time 10 "http://127.0.0.1:$MPORT/metrics")" = 200 ]
check "the API's address still answers /metrics 404" [ "$(mcode "http://127.0.0.1:$PORT/metrics")" = 404 ]
check "... and with a token too" \
	[ "$(mcode -H "Authorization: Bearer $TOK" "http://127.0.0.1:$PORT/metrics")" = 404 ]

# ---- a restart is counted ------------------------------------------------------------
kill "$SSE" 2>/dev/null
wait "$SSE" 2>/dev/null
EP=$(child_pid engine)
check "the engine's pid found ($EP)" [ -n "$EP" ]
kill -KILL "$EP"
restarted() { # not n: wait_for counts with it
	ne=$(child_pid engine) && [ "$ne" != "$EP" ] &&
		mcode "http://127.0.0.1:$MPORT/metrics" >/dev/null &&
		grep -qx 'agrippa_child_restarts_total{child="engine"} 1' "$T/m.out"
}
check "an engine killed is restarted and counted: agrippa_child_restarts_total{child=\"engine\"} 1" \
	wait_for 30 restarted
closed() { mcode "http://127.0.0.1:$MPORT/metrics" >/dev/null && grep -qx 'agrippa_sse_clients 0' "$T/m.out"; }
check "the closed event stream is no longer counted" wait_for 10 closed

# ---- reload: a metrics_listen that cannot be bound changes nothing, listen included ----
BPORT=$((PORT + 3))
APORT=$((PORT + 4))
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(60)' "$BPORT" &
BLOCKER=$!
wait_for 10 sh -c "ss -ltn | grep -q '127.0.0.1:$BPORT '"
cp "$CONF" "$T/conf.before"
sed -i "s/^listen: .*/listen: [ \"127.0.0.1:$APORT\" ]/; s/^metrics_listen: .*/metrics_listen: \"127.0.0.1:$BPORT\"/" "$CONF"
RL=$(ctl reload 2>&1)
RRC=$?
check "a reload moving listen with a metrics_listen in use is refused, saying so ($RL)" \
	sh -c "[ $RRC -ne 0 ] && printf '%s' \"\$1\" | grep -q 'listen 127.0.0.1:$BPORT: Address already in use; configuration not changed'" _ "$RL"
HC=$(healthz_code)
NEWP=$(ss -ltn | grep -c "127.0.0.1:$APORT ")
check "... listen did not move: the API answers where it did ($HC), nothing listens on the new port ($NEWP)" \
	[ "$HC" = 200 -a "$NEWP" = 0 ]
check "... metrics_listen did not move either" [ "$(mcode "http://127.0.0.1:$MPORT/metrics")" = 200 ]
kill "$BLOCKER" 2>/dev/null
wait "$BLOCKER" 2>/dev/null
cp "$T/conf.before" "$CONF"

# ---- reload: a new address moves it, none turns it off -------------------------------
MPORT2=$((PORT + 2))
sed -i "s/^metrics_listen: .*/metrics_listen: \"127.0.0.1:$MPORT2\"/" "$CONF"
check "agrippactl reload with metrics_listen moved" ctl reload
moved() { [ "$(mcode "http://127.0.0.1:$MPORT2/metrics")" = 200 ]; }
check "after the reload the new address serves /metrics" wait_for 30 moved
check "... and the old one is closed" [ "$(mcode "http://127.0.0.1:$MPORT/metrics")" = 000 ]
sed -i "/^metrics_listen: /d" "$CONF"
check "agrippactl reload without metrics_listen" ctl reload
gone() { [ "$(mcode "http://127.0.0.1:$MPORT2/metrics")" = 000 ] && [ "$(healthz_code)" = 200 ]; }
check "after it nothing listens for /metrics, the API still answers" wait_for 30 gone

stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" = 0 ]
if grep -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$LOG" >/dev/null; then
	notok "no sanitizer report in the log"
	grep -E -A5 "Sanitizer|runtime error:" "$LOG" | head -40
else
	ok "no sanitizer report in the log"
fi
finish metrics
