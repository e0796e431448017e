#!/bin/sh
# Budgets of agent steps end to end against the real daemon (DESIGN 3.6,
# sql/migrations/0006_budget.sql): before each attempt an agent step
# reserves the tighter of its run's and its phase's budgets (else
# engine.step_budget) against the project's monthly quota; a spent budget or
# a full quota parks the run on an approval of kind budget.  POST
# /v1/runs/{id}/budget (admins only; bad input changes nothing) raises a
# run's or a phase's budget and resumes it without running a finished step
# again; approving the approval as it is resumes under the same limits
# (parked again while they still bind); rejecting it fails the step; a
# cancel ends a parked run.  Every reservation is settled in the end and
# every run's event seqs are 1..N.
. tests/integration/lib.sh
need_root budget
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1, step_budget: 0.25 }
EOC

start_daemon_or_finish budget

MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
BASE=$("$MKREPO" "$T/repos/clean")
chmod -R a+rX "$T/repos"
check "test repository made" [ -n "$BASE" ]

# tmpl NAME BUDGET: a template file with the usual head, BUDGET (a line
# such as "budget: { usd: 0 }", or empty) between workspace and phases,
# the phases on standard input.
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		[ -n "$2" ] && printf '%s\n' "$2"
		printf 'phases:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}

# mark counts the executions of the first step; count reads it at the end
cat >"$T/three.yaml" <<'EOF'
  - name: one
    steps:
      - { id: mark, kind: command, run: "echo $$ >> marks" }
      - { id: think, kind: agent, prompt: "x", allow_failure: true }
      - { id: count, kind: command, run: "wc -l < marks" }
EOF
tmpl runzero 'budget: { usd: 0 }' <"$T/three.yaml"
tmpl nobudget '' <"$T/three.yaml"
tmpl phasezero '' <<'EOF'
  - name: prep
    steps:
      - { id: mark, kind: command, run: "echo $$ >> marks" }
  - name: plan
    budget: { usd: 0 }
    steps:
      - { id: think, kind: agent, prompt: "x", allow_failure: true }
      - { id: count, kind: command, run: "wc -l < marks" }
EOF
tmpl strict 'budget: { usd: 0 }' <<'EOF'
  - name: one
    steps:
      - { id: think, kind: agent, prompt: "x" }
      - { id: after, kind: command, run: "echo after" }
EOF
# run 1 USD, phase 0.5 USD: the phase is the tighter; a checkpoint first
tmpl gated 'budget: { usd: 1 }' <<'EOF'
  - name: one
    budget: { usd: 0.5 }
    steps:
      - { id: gate, kind: checkpoint, message: "go?", expires_in: 1h }
      - { id: think, kind: agent, prompt: "x", allow_failure: true }
EOF
tmpl both 'budget: { usd: 1 }' <<'EOF'
  - name: one
    budget: { usd: 0.5 }
    steps:
      - { id: think, kind: agent, prompt: "x", allow_failure: true }
EOF

ctl user add alice && ctl user add mona && ctl user add vic &&
	ctl project add p1 && ctl project add pq &&
	ctl member add p1 alice admin && ctl member add p1 mona member && ctl member add p1 vic viewer &&
	ctl member add pq alice admin && ctl member add pq mona member &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null && ctl repo add pq clean "$T/repos/clean" </dev/null
SETUP=$?
TA=$(new_token alice)
TM=$(new_token mona)
TV=$(new_token vic)
P1=$(psql_q "select id from projects where name = 'p1'")
PQ=$(psql_q "select id from projects where name = 'pq'")
UA=$(psql_q "select id from users where name = 'alice'")
UM=$(psql_q "select id from users where name = 'mona'")
psql_q "update projects set monthly_quota_usd_micros = 100000 where id = '$PQ'" >/dev/null
check "set-up: users, tokens, projects (pq with a quota of 100000), repositories" \
	[ "$SETUP" = 0 -a -n "$TA" -a -n "$TM" -a -n "$TV" -a -n "$P1" -a -n "$PQ" -a \
	  "$(psql_q "select monthly_quota_usd_micros from projects where id = '$PQ'")" = 100000 ]

PY=$(python3 -c 'import sys; print(sys.executable)')
J='Content-Type: application/json'
U0=00000000-0000-4000-8000-000000000000
# api TOKEN METHOD PATH [curl args...]: sets CODE and BODY
api() {
	tok=$1 m=$2 p=$3
	shift 3
	rm -f "$T/body"
	CODE=$(curl -s -o "$T/body" -w '%{http_code}' -g --max-time 10 -X "$m" \
		-H "Authorization: Bearer $tok" "$@" "http://127.0.0.1:$PORT$p" </dev/null)
	[ -f "$T/body" ] || : >"$T/body"
	BODY=$(cat "$T/body")
}
# post TOKEN PATH JSON
post() { api "$1" POST "$2" -H "$J" --data-binary "$3"; }
# expect CODE PYEXPR DESCRIPTION: the status is CODE and the expression
# holds for d, the JSON body.
expect() {
	if [ "$CODE" = "$1" ] && printf '%s' "$BODY" | "$PY" -c \
		"import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)" 2>/dev/null; then
		ok "$3"
	else
		notok "$3 (got $CODE: $(printf '%s' "$BODY" | head -c 400))"
	fi
}
val() { printf '%s' "$BODY" | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>/dev/null; }

RUNS=""
# submit PROJECT TEMPLATE: RUN set
submit() {
	post "$TA" "/v1/projects/$1/runs" "{\"template\": \"$2\", \"params\": {\"repo\": \"clean\"}}"
	RUN=$(val "d['id']")
	RUNS="$RUNS $RUN"
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
# events RUN: "type step_id/status#attempt" one line per event, in seq order
events() {
	psql_q "select type || ' ' || coalesce(payload->>'step_id', payload->>'phase', '') ||
		coalesce('/' || (payload->>'status'), '') || coalesce('#' || (payload->>'attempt'), '')
		from run_events where run_id = '$1' order by seq"
}
ev_line() { events "$1" | tr '\n' '|'; }
# payload RUN TYPE [N]: the Nth (default 1st) payload of that type
payload() {
	psql_q "select payload from run_events where run_id = '$1' and type = '$2' order by seq offset ${3:-1} - 1 limit 1"
}
# pyj JSON PYEXPR: the expression holds for d, the JSON
pyj() { printf '%s' "$1" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)" 2>/dev/null; }
seq_ok() {
	[ "$(psql_q "select count(*) = max(seq) and count(distinct seq) = count(*) from run_events where run_id = '$1'")" = t ]
}
out_of() { # out_of RUN STEP: the step's stdout
	psql_q "select string_agg(payload->>'text', '' order by seq) from run_events
		where run_id = '$1' and type = 'step.output' and payload->>'step_id' = '$2' and payload->>'stream' = 'stdout'"
}
# nevents RUN TYPE: how many events of that type
nevents() { psql_q "select count(*) from run_events where run_id = '$1' and type = '$2'"; }
# approvals RUN: "kind:status" of each, oldest first
approvals() { psql_q "select string_agg(kind || ':' || status, ',' order by requested_at, id) from approvals where run_id = '$1'"; }
# reservations RUN: "step#attempt:amount:settled:settled_amount" of each
reservations() {
	psql_q "select string_agg(step_id || '#' || attempt || ':' || amount_usd_micros || ':' ||
		(settled_at is not null) || ':' || coalesce(settled_usd_micros::text, '-'), ',' order by created_at)
		from budget_reservations where run_id = '$1'"
}
# bstate RUN: what a refused budget call must leave as it was
bstate() {
	psql_q "select concat_ws(' ', r.status, coalesce(r.budget_usd_micros::text, 'null'), r.phase_budgets::text,
		r.next_event_seq, (select count(*) from audit_log where object_id = r.id::text and action = 'run.budget'),
		(select string_agg(a.kind || ':' || a.status, ',') from approvals a where a.run_id = r.id))
		from runs r where r.id = '$1'"
}
# parked_twice RUN: parked on its second budget approval
parked_twice() {
	is_status "$1" waiting_approval && [ "$(approvals "$1")" = "budget:approved,budget:pending" ]
}

# --- 1. a run budget of 0 ------------------------------------------------------------
submit "$P1" runzero
R1=$RUN
expect 201 "d['budget_usd_micros'] == 0 and d['phase_budgets'] == {}" \
	"a run of a template with budget 0: 201, budget_usd_micros 0, phase_budgets {}"
wait_for 30 is_status "$R1" waiting_approval
check "the run parks before its agent step: waiting_approval ($(run_status "$R1"))" is_status "$R1" waiting_approval
check "its events in order: budget.exceeded, approval.requested, run.waiting_approval after the first step ($(ev_line "$R1"))" \
	[ "$(ev_line "$R1")" = \
"run.queued |run.started |workspace.ready |phase.started one|step.started mark#1|step.finished mark/succeeded#1|budget.exceeded think#1|approval.requested think#1|run.waiting_approval think|" ]
check "budget.exceeded: scope run, budget_usd_micros 0, spent 0, a message" \
	pyj "$(payload "$R1" budget.exceeded)" "d['scope'] == 'run' and d['budget_usd_micros'] == 0 and
	d['spent_usd_micros'] == 0 and d['step_id'] == 'think' and d['attempt'] == 1 and 'spent' in d['message']"
AP1=$(psql_q "select id from approvals where run_id = '$R1'")
check "approval.requested and run.waiting_approval are of kind budget, naming the approval" \
	sh -c "[ \"\$1\" = 1 ] && [ \"\$2\" = 1 ]" - \
	"$(psql_q "select count(*) from run_events where run_id = '$R1' and type = 'approval.requested'
		and payload->>'kind' = 'budget' and payload->>'approval_id' = '$AP1'")" \
	"$(psql_q "select count(*) from run_events where run_id = '$R1' and type = 'run.waiting_approval'
		and payload->>'kind' = 'budget' and payload->>'approval_id' = '$AP1'")"
check "the agent step never started: no attempt, no reservation" \
	[ "$(psql_q "select count(*) from run_steps where run_id = '$R1' and step_id = 'think'")" = 0 -a \
	  "$(psql_q "select count(*) from budget_reservations where run_id = '$R1'")" = 0 ]
api "$TV" GET "/v1/runs/$R1/approvals"
expect 200 "[(a['id'], a['kind'], a['status'], a['step_id']) for a in d['approvals']] == [('$AP1', 'budget', 'pending', 'think')]" \
	"GET /v1/runs/ID/approvals (a viewer): one pending approval of kind budget for think"
no_runner() { [ -z "$(child_pid runner)" ]; }
wait_for 10 no_runner
check "no runner left while the run waits" no_runner

# refused budget calls change nothing
S1=$(bstate "$R1")
# refused DESC CODE PYEXPR: the last call answered CODE (and PYEXPR holds)
# and the run is as it was
refused() {
	expect "$2" "$3" "$1: $2"
	check "... the run unchanged: still waiting, budget 0, no budget.changed" \
		[ "$(bstate "$R1")" = "$S1" -a "$(nevents "$R1" budget.changed)" = 0 ]
}
post "$TM" "/v1/runs/$R1/budget" '{"usd_micros": 300000}'
refused "a member raising the budget" 403 "d['error']['code'] == 'forbidden'"
post "$TV" "/v1/runs/$R1/budget" '{"usd_micros": 300000}'
refused "a viewer raising the budget" 403 "d['error']['code'] == 'forbidden'"
api "" POST "/v1/runs/$R1/budget" -H "$J" --data-binary '{"usd_micros": 300000}'
check "no token: 401 ($CODE)" [ "$CODE" = 401 ]
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": "5"}'
refused "usd_micros a string" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5.5}'
refused "usd_micros a fraction" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{}'
refused "no usd_micros" 422 "d['error']['code'] == 'missing_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"phase": "one"}'
refused "a phase without usd_micros" 422 "d['error']['code'] == 'missing_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": null}'
refused "usd_micros null" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": -1}'
refused "usd_micros -1" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 100000000001}'
refused "usd_micros 100000000001" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 9223372036854775807}'
refused "usd_micros the largest int64" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'usd_micros'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 99999999999999999999}'
refused "usd_micros past int64" 400 "d['error']['code'] == 'bad_json'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5, "phase": "nope"}'
refused "a phase the template lacks" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'phase'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5, "phase": "NOT A NAME"}'
refused "a phase that is no phase name" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'phase'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5, "phase": "one\u0000x"}'
refused "a phase with a NUL inside (not the phase one)" 400 "d['error']['code'] == 'bad_json'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5, "phase": 3}'
refused "phase a number" 422 "d['error']['code'] == 'invalid_field' and d['error']['field'] == 'phase'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5, "extra": 1}'
refused "an unknown field" 422 "d['error']['code'] == 'unknown_field' and d['error']['field'] == 'extra'"
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 5'
refused "a body that is no JSON" 400 "d['error']['code'] == 'bad_json'"
post "$TA" "/v1/runs/$R1/budget" '[5]'
refused "a body that is no object" 400 "d['error']['code'] == 'bad_json'"
api "$TA" POST "/v1/runs/$R1/budget" -H 'Content-Type: text/plain' --data-binary '{"usd_micros": 5}'
refused "a body that is not application/json" 415 "True"
post "$TA" "/v1/runs/$U0/budget" '{"usd_micros": 5}'
refused "an unknown run" 404 "d['error']['code'] == 'not_found'"
post "$TA" "/v1/runs/not-a-uuid/budget" '{"usd_micros": 5}'
check "a run id that is no uuid: 404 or 400 ($CODE)" [ "$CODE" = 404 -o "$CODE" = 400 ]

post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 300000}'
expect 200 "d['id'] == '$R1' and d['budget_usd_micros'] == 300000 and d['phase_budgets'] == {}" \
	"an admin raises the run's budget to 300000: 200 with the run"
check "event budget.changed {by alice, phase null, from 0, to 300000}" \
	pyj "$(payload "$R1" budget.changed)" "d == {'by': '$UA', 'phase': None, 'from': 0, 'to': 300000}"
check "the budget approval is approved by alice in the same call" \
	[ "$(psql_q "select status || ' ' || decided_by from approvals where id = '$AP1'")" = "approved $UA" ]
check "an audit row run.budget {from 0, to 300000}" \
	[ "$(psql_q "select count(*) from audit_log where action = 'run.budget' and object_kind = 'run'
		and object_id = '$R1' and actor_user_id = '$UA' and project_id = '$P1'
		and (detail->>'from')::bigint = 0 and (detail->>'to')::bigint = 300000")" = 1 ]
wait_for 30 is_status "$R1" succeeded
check "the run resumes and succeeds ($(run_status "$R1"))" is_status "$R1" succeeded
check "the rest of its events: resumed, reserved, the agent step failed, the last step ran ($(ev_line "$R1"))" \
	[ "$(events "$R1" | tail -n +10 | tr '\n' '|')" = \
"budget.changed |approval.approved think|run.resumed |budget.reserved think#1|step.started think#1|step.finished think/failed#1|step.started count#1|step.output count#1|step.finished count/succeeded#1|phase.finished one|run.succeeded |" ]
check "run.resumed from waiting_approval" pyj "$(payload "$R1" run.resumed)" "d['from'] == 'waiting_approval'"
check "budget.reserved: 300000, scope run" \
	pyj "$(payload "$R1" budget.reserved)" "d == {'step_id': 'think', 'attempt': 1, 'usd_micros': 300000, 'scope': 'run'}"
check "the agent step failed: no model provider is configured here" \
	[ "$(psql_q "select status || ': ' || error from run_steps where run_id = '$R1' and step_id = 'think'")" = \
	  "failed: no model provider is configured for agent steps (agent.provider in agrippad.conf)" ]
check "the first step did not run again: one attempt, one line in marks ($(out_of "$R1" count))" \
	[ "$(out_of "$R1" count | tr -d ' ')" = 1 -a \
	  "$(psql_q "select count(*) from run_steps where run_id = '$R1' and step_id = 'mark'")" = 1 ]
check "one reservation, settled with 0 spent ($(reservations "$R1"))" [ "$(reservations "$R1")" = "think#1:300000:true:0" ]
post "$TA" "/v1/runs/$R1/budget" '{"usd_micros": 400000}'
expect 409 "d['error']['code'] == 'run_finished'" "raising the budget of a finished run: 409 run_finished"
check "... writes nothing" [ "$(nevents "$R1" budget.changed)" = 1 -a \
	"$(psql_q "select budget_usd_micros from runs where id = '$R1'")" = 300000 ]

# --- 5. rejection ------------------------------------------------------------------------
# with allow_failure: the step fails, the run goes on
submit "$P1" runzero
R5A=$RUN
wait_for 30 is_status "$R5A" waiting_approval
AP=$(psql_q "select id from approvals where run_id = '$R5A' and kind = 'budget'")
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "rejected", "comment": "no"}'
expect 200 "True" "a member rejects the budget approval: 200"
check "... rejected by her, with her comment" \
	[ "$(psql_q "select status || ' ' || decided_by || ' ' || comment from approvals where id = '$AP'")" = "rejected $UM no" ]
wait_for 30 is_status "$R5A" succeeded
check "the agent step fails: its budget is spent and more was refused; the run (allow_failure) succeeds" \
	[ "$(psql_q "select status || ': ' || error from run_steps where run_id = '$R5A' and step_id = 'think'")" = \
	  "failed: its budget is spent and more was refused" -a "$(run_status "$R5A")" = succeeded ]
check "... with no reservation, the steps after it ran" \
	[ "$(psql_q "select count(*) from budget_reservations where run_id = '$R5A'")" = 0 -a "$(out_of "$R5A" count | tr -d ' ')" = 1 ]
# without: the run fails
submit "$P1" strict
R5=$RUN
wait_for 30 is_status "$R5" waiting_approval
AP=$(psql_q "select id from approvals where run_id = '$R5' and kind = 'budget'")
post "$TA" "/v1/approvals/$AP/decide" '{"decision": "rejected"}'
expect 200 "True" "rejecting the budget approval of a step without allow_failure: 200"
wait_for 30 is_status "$R5" failed
check "the run fails with the step's error ($(psql_q "select error from runs where id = '$R5'"))" \
	[ "$(run_status "$R5")" = failed -a \
	  "$(psql_q "select error from runs where id = '$R5'")" = "step think: its budget is spent and more was refused" ]
check "... the next step skipped, nothing reserved" \
	[ "$(psql_q "select string_agg(status, ',') from run_steps where run_id = '$R5' and step_id = 'after'")" = skipped -a \
	  "$(nevents "$R5" step.started)" = 1 -a "$(psql_q "select count(*) from budget_reservations where run_id = '$R5'")" = 0 ]

# its expiry too: the engine's sweep expires it, the step fails
submit "$P1" runzero
R5E=$RUN
wait_for 30 is_status "$R5E" waiting_approval
psql_q "update approvals set expires_at = requested_at + interval '1 millisecond' where run_id = '$R5E'" >/dev/null
wait_for 30 is_status "$R5E" succeeded
check "an expired budget approval: expired by the sweep, the step fails as refused, the run goes on ($(run_status "$R5E"))" \
	[ "$(approvals "$R5E")" = budget:expired -a "$(nevents "$R5E" approval.expired)" = 1 -a \
	  "$(psql_q "select status || ': ' || error from run_steps where run_id = '$R5E' and step_id = 'think'")" = \
	  "failed: its budget is spent and more was refused" -a "$(run_status "$R5E")" = succeeded ]

# --- 2. a phase budget of 0 --------------------------------------------------------------
submit "$P1" phasezero
R2=$RUN
expect 201 "d['budget_usd_micros'] is None" "a template without a run budget: budget_usd_micros null"
wait_for 30 is_status "$R2" waiting_approval
check "a phase budget of 0 parks the run ($(run_status "$R2"))" is_status "$R2" waiting_approval
check "budget.exceeded: scope phase, phase plan, budget 0" \
	pyj "$(payload "$R2" budget.exceeded)" "d['scope'] == 'phase' and d['phase'] == 'plan' and
	d['budget_usd_micros'] == 0 and d['spent_usd_micros'] == 0 and d['step_id'] == 'think'"
check "... then approval.requested (budget) and run.waiting_approval" \
	[ "$(events "$R2" | tail -n 3 | cut -d' ' -f1 | tr '\n' '|')" = "budget.exceeded|approval.requested|run.waiting_approval|" ]
post "$TA" "/v1/runs/$R2/budget" '{"usd_micros": 100000}'
expect 200 "d['budget_usd_micros'] == 100000 and d['phase_budgets'] == {}" \
	"setting a run budget (100000) while the phase's is 0: 200"
wait_for 30 parked_twice "$R2"
check "... the phase's 0 is still the tighter: parked again on a new approval ($(approvals "$R2"))" parked_twice "$R2"
check "... budget.exceeded again with scope phase" \
	pyj "$(payload "$R2" budget.exceeded 2)" "d['scope'] == 'phase' and d['phase'] == 'plan'"
post "$TA" "/v1/runs/$R2/budget" '{"phase": "plan", "usd_micros": 150000}'
expect 200 "d['budget_usd_micros'] == 100000 and d['phase_budgets'] == {'plan': 150000}" \
	"raising phase plan's budget to 150000: 200, phase_budgets {plan: 150000}"
check "event budget.changed {phase plan, from 0, to 150000}" \
	pyj "$(payload "$R2" budget.changed 2)" "d == {'by': '$UA', 'phase': 'plan', 'from': 0, 'to': 150000}"
wait_for 30 is_status "$R2" succeeded
check "the run resumes and succeeds ($(run_status "$R2"))" is_status "$R2" succeeded
check "budget.reserved: 100000, scope run (now the tighter)" \
	pyj "$(payload "$R2" budget.reserved)" "d == {'step_id': 'think', 'attempt': 1, 'usd_micros': 100000, 'scope': 'run'}"
api "$TV" GET "/v1/runs/$R2"
expect 200 "d['phase_budgets'] == {'plan': 150000} and d['budget_usd_micros'] == 100000" \
	"GET /v1/runs/ID shows phase_budgets {plan: 150000}"
check "one reservation, settled with 0 ($(reservations "$R2"))" [ "$(reservations "$R2")" = "think#1:100000:true:0" ]

# a phase budget only: the phase is the scope
submit "$P1" phasezero
R2B=$RUN
wait_for 30 is_status "$R2B" waiting_approval
post "$TA" "/v1/runs/$R2B/budget" '{"phase": "plan", "usd_micros": 100000}'
expect 200 "d['budget_usd_micros'] is None and d['phase_budgets'] == {'plan': 100000}" \
	"a phase budget of 100000 for phase plan: 200"
wait_for 30 is_status "$R2B" succeeded
check "the run resumes and succeeds ($(run_status "$R2B"))" is_status "$R2B" succeeded
check "budget.reserved: 100000, scope phase" \
	pyj "$(payload "$R2B" budget.reserved)" "d == {'step_id': 'think', 'attempt': 1, 'usd_micros': 100000, 'scope': 'phase'}"
check "the first phase's step ran once ($(out_of "$R2B" count))" [ "$(out_of "$R2B" count | tr -d ' ')" = 1 ]
api "$TV" GET "/v1/runs/$R2B"
expect 200 "d['phase_budgets'] == {'plan': 100000}" "GET /v1/runs/ID shows phase_budgets {plan: 100000}"

# --- the tighter of the two, and a checkpoint approval is not a budget one --------
submit "$P1" both
RB=$RUN
wait_for 30 is_status "$RB" succeeded
check "run 1 USD, phase 0.5 USD: reserved 500000, scope phase" \
	pyj "$(payload "$RB" budget.reserved)" "d['usd_micros'] == 500000 and d['scope'] == 'phase'"
submit "$P1" gated
RG=$RUN
wait_for 30 is_status "$RG" waiting_approval
post "$TA" "/v1/runs/$RG/budget" '{"usd_micros": 200000}'
expect 200 "d['budget_usd_micros'] == 200000" "lowering the run's budget while it waits at a checkpoint: 200"
sleep 2
check "... the checkpoint's approval stays pending and the run waits" \
	[ "$(approvals "$RG")" = "checkpoint:pending" -a "$(run_status "$RG")" = waiting_approval ]
AP=$(psql_q "select id from approvals where run_id = '$RG'")
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "approved"}'
wait_for 30 is_status "$RG" succeeded
check "after the checkpoint: reserved 200000, scope run (now the tighter)" \
	pyj "$(payload "$RG" budget.reserved)" "d['usd_micros'] == 200000 and d['scope'] == 'run'"

# --- 3. no budget at all: engine.step_budget -------------------------------------------
submit "$P1" nobudget
R3=$RUN
wait_for 30 is_status "$R3" succeeded
check "a run without budgets succeeds without waiting ($(run_status "$R3"))" \
	[ "$(run_status "$R3")" = succeeded -a "$(nevents "$R3" approval.requested)" = 0 ]
check "budget.reserved: 250000 (engine.step_budget 0.25), scope default" \
	pyj "$(payload "$R3" budget.reserved)" "d == {'step_id': 'think', 'attempt': 1, 'usd_micros': 250000, 'scope': 'default'}"
check "one reservation, settled with 0 ($(reservations "$R3"))" [ "$(reservations "$R3")" = "think#1:250000:true:0" ]

# --- 4. the monthly quota --------------------------------------------------------------
submit "$PQ" nobudget
R4=$RUN
wait_for 30 is_status "$R4" waiting_approval
check "250000 to reserve against a quota of 100000: the run parks ($(run_status "$R4"))" is_status "$R4" waiting_approval
check "budget.exceeded: scope quota, quota 100000, needed 250000, 0 spent" \
	pyj "$(payload "$R4" budget.exceeded)" "d['scope'] == 'quota' and d['quota_usd_micros'] == 100000 and
	d['needed_usd_micros'] == 250000 and d['month_spent_usd_micros'] == 0 and d['step_id'] == 'think'"
check "... nothing reserved" [ "$(psql_q "select count(*) from budget_reservations where run_id = '$R4'")" = 0 ]
AP=$(psql_q "select id from approvals where run_id = '$R4' and kind = 'budget'")
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "approved"}'
expect 200 "True" "a member approves the budget approval as it is: 200"
wait_for 30 parked_twice "$R4"
check "the quota is still too small: parked again on a second budget approval ($(approvals "$R4"))" parked_twice "$R4"
check "... events: approval.approved, run.resumed, budget.exceeded (quota), approval.requested, run.waiting_approval" \
	[ "$(events "$R4" | tail -n 5 | cut -d' ' -f1 | tr '\n' '|')" = \
	  "approval.approved|run.resumed|budget.exceeded|approval.requested|run.waiting_approval|" -a \
	  "$(psql_q "select count(*) from run_events where run_id = '$R4' and type = 'budget.exceeded' and payload->>'scope' = 'quota'")" = 2 ]
psql_q "update projects set monthly_quota_usd_micros = 1000000 where id = '$PQ'" >/dev/null
AP=$(psql_q "select id from approvals where run_id = '$R4' and kind = 'budget' and status = 'pending'")
post "$TM" "/v1/approvals/$AP/decide" '{"decision": "approved"}'
expect 200 "True" "the quota raised to 1000000, a member approves the second approval: 200"
wait_for 30 is_status "$R4" succeeded
check "the run resumes and succeeds ($(run_status "$R4"))" is_status "$R4" succeeded
check "budget.reserved: 250000, scope default" \
	pyj "$(payload "$R4" budget.reserved)" "d == {'step_id': 'think', 'attempt': 1, 'usd_micros': 250000, 'scope': 'default'}"
check "one reservation, settled ($(reservations "$R4"))" [ "$(reservations "$R4")" = "think#1:250000:true:0" ]
check "the first step ran once ($(out_of "$R4" count))" [ "$(out_of "$R4" count | tr -d ' ')" = 1 ]

# --- 6. cancel of a run parked on its budget ---------------------------------------------
submit "$P1" runzero
R6=$RUN
wait_for 30 is_status "$R6" waiting_approval
api "$TM" POST "/v1/runs/$R6/cancel"
expect 200 "d['status'] == 'cancelled'" "cancel of a run parked on its budget: 200, cancelled at once"
check "... cancelled in the database, run.cancelled last" \
	[ "$(run_status "$R6")" = cancelled -a "$(events "$R6" | tail -n 1 | cut -d' ' -f1)" = run.cancelled ]
check "... no reservation open, its budget approval no longer pending ($(approvals "$R6"))" \
	[ "$(psql_q "select count(*) from budget_reservations where run_id = '$R6' and settled_at is null")" = 0 -a \
	  "$(approvals "$R6")" = budget:expired ]
post "$TA" "/v1/runs/$R6/budget" '{"usd_micros": 300000}'
expect 409 "d['error']['code'] == 'run_finished' and d['error']['status'] == 'cancelled'" \
	"raising the budget of the cancelled run: 409 run_finished"

# --- 7. every reservation settled ----------------------------------------------------------
check "no reservation left unsettled" \
	[ "$(psql_q "select count(*) from budget_reservations where settled_at is null")" = 0 ]
check "reservations were made (R1, R2, R2B, RB, RG, R3, R4)" \
	[ "$(psql_q "select count(*) from budget_reservations")" = 7 ]
api "$TV" GET "/v1/projects/$P1/usage"
expect 200 "d['reserved_usd_micros'] == 0 and d['spent_usd_micros'] == 0" "usage of p1: nothing reserved, nothing spent"
api "$TM" GET "/v1/projects/$PQ/usage"
expect 200 "d['reserved_usd_micros'] == 0 and d['quota_usd_micros'] == 1000000" \
	"usage of pq: nothing reserved, the quota 1000000"

# --- 8. every run's events --------------------------------------------------------------------
for r in $RUNS; do
	check "event seqs of run $r are 1..N" seq_ok "$r"
done

# descendants PID: every process under PID (other tests may run the same
# binary at the same time: only this daemon's own are looked at)
descendants() {
	for c in $(children_of "$1"); do
		echo "$c"
		descendants "$c"
	done
}
OURS=$(descendants "$SUP_PID")
# left: those still alive as our binary
left() {
	for p in $OURS; do
		[ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$AGRIPPAD" ] && echo "$p"
	done
	return 0
}
check "no runner of this daemon left once every run ended" no_runner
stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" = 0 ]
check "none of its processes left" [ -n "$OURS" -a -z "$(left)" ]
finish budget
