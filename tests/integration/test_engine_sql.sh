#!/bin/sh
# The scheduler's SQL (sql/migrations/0004_engine.sql) against a throwaway
# PostgreSQL: claiming under a lease (two engines never take one run, an
# expired lease makes a run claimable again, a decided approval resumes a
# run), renewing and parking leases, the sweeps (expired approvals decided
# exactly once against a racing decision; cancelled runs nobody runs), and
# budget reservations against a monthly quota (concurrent runs never
# overspend it; a resumed attempt never counts twice), and the runner's
# step_reserve (0006_budget.sql): budgets of the run and the phase, the
# default, a spent budget or a full quota parking the run on a budget
# approval, raising the budget over api_set_budget, refusal; a run is
# taken up again only by the host that first claimed it (0007); the sums
# of GET /metrics (0016): a delta per attempt that finishes, in its
# bucket, and compactions at once that count each delta once.
. tests/integration/lib.sh
need_root engine_sql
make_env
SQDB=enginetest
. tests/integration/pg_lib.sh

psql_db postgres -c "CREATE DATABASE enginetest" >/dev/null
migrate "migrations apply"

U1=00000000-0000-0000-0000-0000000000a1
P1=00000000-0000-0000-0000-0000000000b1
P2=00000000-0000-0000-0000-0000000000b2
TPL=00000000-0000-0000-0000-0000000000c1
sq -c "INSERT INTO users (id, name) VALUES ('$U1', 'alice')" \
	-c "INSERT INTO projects (id, name, monthly_quota_usd_micros) VALUES ('$P1', 'alpha', 1000), ('$P2', 'beta', NULL)" \
	-c "INSERT INTO templates (id, name, version, source, compiled, sha256)
	    VALUES ('$TPL', 't', 1, 'x', '{}', decode(repeat('00', 32), 'hex'))" >/dev/null
# newrun [PROJECT]: a queued run; prints its id
newrun() {
	val "INSERT INTO runs (project_id, template_id, template_name, template_version, submitted_by)
	     VALUES ('${1:-$P1}', '$TPL', 't', 1, '$U1') RETURNING id" | head -1
}
# at_once NAME: each line of standard input is one SQL statement; all run
# at once, each in its own session; the answers go to $T/NAME.N, and a
# tally of them is printed as a comment.
at_once() {
	n=0
	pids=""
	while IFS= read -r stmt; do
		n=$((n + 1))
		val "$stmt" >"$T/$1.$n" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p"; done
	echo "# $1: $(cat "$T/$1".[0-9]* | sort | uniq -c | tr '\n' ' ')"
}
# answers NAME WORD: how many of at_once NAME's answers are WORD
answers() { cat "$T/$1".[0-9]* | grep -cx "$2"; }
claim() { val "SELECT coalesce((SELECT run_id || ' ' || previous_status FROM claim_run('$1', ${2:-30})), 'none')"; }

### claim_run
R1=$(newrun)
is "a queued run is claimed" "SELECT coalesce((SELECT run_id || ' ' || previous_status FROM claim_run('e1', 30)), 'none')" "$R1 queued"
is "... it is running under e1's lease, started" \
	"SELECT status || ' ' || lease_owner || ' ' || (lease_expires_at > now() + interval '25 seconds') || ' ' || (started_at IS NOT NULL) FROM runs WHERE id = '$R1'" \
	"running e1 true true"
is "nothing else to claim" "SELECT count(*) FROM claim_run('e2', 30)" 0
refused "a lease of 0 s is refused" "lease must be" "SELECT * FROM claim_run('e1', 0)"
refused "a lease of 2 hours is refused" "lease must be" "SELECT * FROM claim_run('e1', 7200)"
is "renew_lease by its owner" "SELECT coalesce(renew_lease('$R1', 'e1', 60), false)" t
is "renew_lease by another engine changes nothing" "SELECT coalesce(renew_lease('$R1', 'e2', 60), false)" f
sq -c "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = '$R1'"
is "an expired lease: the run is claimed again, by another engine" "$(printf '%s' "SELECT coalesce((SELECT run_id || ' ' || previous_status FROM claim_run('e2', 30)), 'none')")" "$R1 running"
is "... the first owner can no longer renew it" "SELECT coalesce(renew_lease('$R1', 'e1', 60), false)" f
is "... the new one can" "SELECT coalesce(renew_lease('$R1', 'e2', 60), false)" t

# Two engines racing: 4 sessions claim as fast as they can; 30 runs, each
# taken exactly once.
sq -c "UPDATE runs SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE id = '$R1'" >/dev/null
for i in $(seq 30); do newrun >/dev/null; done
pids=""
for e in 1 2 3 4; do
	(
		while :; do
			got=$(val "SELECT coalesce((SELECT run_id::text FROM claim_run('race$e', 60)), 'none')")
			[ "$got" = none ] && break
			echo "$got"
		done >"$T/claims$e"
	) &
	pids="$pids $!"
done
for p in $pids; do wait "$p"; done
check "4 racing engines: 30 claims in all" [ "$(cat "$T"/claims[1-4] | wc -l)" = 30 ]
check "... no run claimed twice" [ "$(cat "$T"/claims[1-4] | sort -u | wc -l)" = 30 ]
is "... each run's lease names the engine that got it" \
	"SELECT count(*) FROM runs WHERE lease_owner LIKE 'race%' AND status = 'running'" 30
echo "# claims per engine: $(wc -l "$T"/claims[1-4] | head -4 | awk '{print $1}' | tr '\n' ' ')"
sq -c "UPDATE runs SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE finished_at IS NULL" >/dev/null

### approvals: park, resume, expire
R2=$(newrun)
claim e1 >/dev/null
sq -c "INSERT INTO approvals (run_id, step_id, expires_at) VALUES ('$R2', 'review', now() + interval '1 hour')" >/dev/null
is "wait_for_approval by another engine changes nothing" "SELECT coalesce(wait_for_approval('$R2', 'e9'), false)" f
is "wait_for_approval by the owner" "SELECT coalesce(wait_for_approval('$R2', 'e1'), false)" t
is "... parks the run and hands back the lease" \
	"SELECT status || ' ' || coalesce(lease_owner, '-') FROM runs WHERE id = '$R2'" "waiting_approval -"
is "a run with a pending approval is not claimed" "$(printf '%s' "SELECT count(*) FROM claim_run('e2', 30)")" 0
sq -c "SELECT decide_approval(id, 'approved', '$U1', NULL) FROM approvals WHERE run_id = '$R2'" >/dev/null
is "once it is decided, the run is resumed by a claim" \
	"SELECT coalesce((SELECT run_id || ' ' || previous_status FROM claim_run('e2', 30)), 'none')" "$R2 waiting_approval"
is "... running under the new lease" "SELECT status || ' ' || lease_owner FROM runs WHERE id = '$R2'" "running e2"
# a second checkpoint: pending again, so not claimable
sq -c "SELECT wait_for_approval('$R2', 'e2')" \
	-c "INSERT INTO approvals (run_id, step_id, expires_at) VALUES ('$R2', 'review2', now() + interval '1 hour')" >/dev/null
is "a second pending approval: not claimable although an earlier one is decided" "SELECT count(*) FROM claim_run('e3', 30)" 0

# expiry by the sweep
sq -c "UPDATE approvals SET requested_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE run_id = '$R2' AND status = 'pending'" >/dev/null
is "sweep_runs expires it" "SELECT sweep_runs()" 1
is "... approval expired, event approval.expired, a system audit row" \
	"SELECT (SELECT status FROM approvals WHERE run_id = '$R2' AND step_id = 'review2') || ' ' ||
	        (SELECT type FROM run_events WHERE run_id = '$R2' ORDER BY seq DESC LIMIT 1) || ' ' ||
	        (SELECT count(*) FROM audit_log WHERE action = 'approval.expire' AND actor_kind = 'system')" \
	"expired approval.expired 1"
is "... and the run is claimable, to read the expiry" \
	"SELECT coalesce((SELECT previous_status FROM claim_run('e3', 30)), 'none')" waiting_approval
is "sweeping again changes nothing" "SELECT sweep_runs()" 0

# a decision racing the sweep: exactly one of them, 5 rounds
race_ok=0
for i in 1 2 3 4 5; do
	R=$(newrun)
	got=$(claim "e$i")
	[ "$got" = "$R queued" ] || echo "# round $i: claimed '$got', not $R"
	sq -c "UPDATE runs SET status = 'waiting_approval', lease_owner = NULL, lease_expires_at = NULL WHERE id = '$R'" >/dev/null
	A=$(val "INSERT INTO approvals (run_id, step_id, requested_at, expires_at) VALUES ('$R', 's', now() - interval '1 hour', now() + interval '1 second') RETURNING id" | head -1)
	sleep 1.05
	# both start together; the approval has just expired for both of them
	val "SELECT decide_approval('$A', 'approved', '$U1', NULL)" >"$T/dec" &
	p1=$!
	val "SELECT sweep_runs()" >"$T/swp" &
	p2=$!
	wait $p1 $p2
	# the engine sweeps again later: a row the decision held was skipped
	val "SELECT sweep_runs()" >/dev/null
	st=$(val "SELECT status FROM approvals WHERE id = '$A'")
	nev=$(val "SELECT count(*) FROM run_events WHERE run_id = '$R' AND type LIKE 'approval.%'")
	if [ "$st" = expired ] && [ "$nev" = 1 ] && [ "$(cat "$T/dec")" = f ]; then
		race_ok=$((race_ok + 1))
	else
		echo "# round $i: approval $st, $nev events, decide said $(cat "$T/dec"), sweep $(cat "$T/swp")"
	fi
	# out of the way of the next round's claim
	sq -c "UPDATE runs SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE id = '$R'" >/dev/null
done
check "an expired approval decided while the sweep runs is decided exactly once: expired, one event (5 rounds)" [ $race_ok = 5 ]
sq -c "UPDATE runs SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE finished_at IS NULL" >/dev/null

### cancelled runs nobody runs
R3=$(newrun)
claim e1 >/dev/null
sq -c "UPDATE runs SET cancel_requested_at = now() WHERE id = '$R3'" >/dev/null
is "a cancel requested on a run with a live lease: not swept (its runner ends it)" "SELECT sweep_runs()" 0
is "... nor claimed" "SELECT count(*) FROM claim_run('e2', 30)" 0
sq -c "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = '$R3'" >/dev/null
is "once its lease has expired, the sweep finalizes it cancelled" "SELECT sweep_runs()" 1
is "... with its terminal event" \
	"SELECT status || ' ' || (SELECT type FROM run_events WHERE run_id = '$R3' ORDER BY seq DESC LIMIT 1) FROM runs WHERE id = '$R3'" \
	"cancelled run.cancelled"

### a host that is gone: its pinned runs fail after the grace, not before
H1=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
H2=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
RH=$(newrun)
sq -c "UPDATE runs SET status = 'running', workspace_host = '$H1', lease_owner = 'e1',
        lease_expires_at = now() - interval '1 second', started_at = now() WHERE id = '$RH'" >/dev/null
RH2=$(newrun)
sq -c "UPDATE runs SET status = 'waiting_approval', workspace_host = '$H1', started_at = now()
        WHERE id = '$RH2'" >/dev/null
RK=$(newrun)
sq -c "UPDATE runs SET status = 'running', workspace_host = '$H2', lease_owner = 'e9',
        lease_expires_at = now() - interval '1 second', started_at = now() WHERE id = '$RK'" >/dev/null
sq -c "INSERT INTO engine_heartbeats (instance_id, hostname, pid, host_id, last_seen) VALUES
        ('e1', 'h1', 1, '$H1', now() - interval '100 seconds'),
        ('e9', 'h2', 9, '$H2', now() - interval '10 seconds')" >/dev/null
is "without a grace the sweep fails nothing" "SELECT sweep_runs() + sweep_runs(NULL)" 0
is "an engine of the host heard within the grace (200 s): nothing failed" "SELECT sweep_runs(200)" 0
is "silent for longer than the grace (60 s): both of its runs fail, the other host's does not" \
	"SELECT sweep_runs(60)" 2
is "... failed, with the reason and the host in the event" \
	"SELECT string_agg(r.status || ' ' || (SELECT payload->>'reason' || ' ' || (payload->>'host') FROM run_events WHERE run_id = r.id ORDER BY seq DESC LIMIT 1), ',' ORDER BY r.created_at) FROM runs r WHERE r.id IN ('$RH', '$RH2')" \
	"failed host_gone $H1,failed host_gone $H1"
is "... and an error that says so" \
	"SELECT error LIKE 'the host $H1, which holds its workspace, has had no engine for 60 s%' FROM runs WHERE id = '$RH'" t
is "the live host's run is untouched" "SELECT status FROM runs WHERE id = '$RK'" running
sq -c "UPDATE runs SET lease_expires_at = now() + interval '30 seconds' WHERE id = '$RK'" >/dev/null
sq -c "UPDATE engine_heartbeats SET last_seen = now() - interval '1000 seconds' WHERE host_id = '$H2'" >/dev/null
is "a run an engine still holds (a live lease) is not failed, whatever the heartbeats" \
	"SELECT sweep_runs(60)" 0
refused "a grace out of range is refused" "host grace must be 60 to 31536000 seconds" "SELECT sweep_runs(59)"
sq -c "UPDATE runs SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE finished_at IS NULL" >/dev/null
sq -c "DELETE FROM engine_heartbeats" >/dev/null

### budgets
RB=$(newrun)
claim e1 >/dev/null
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at)
        VALUES ('$RB', 'p', 's1', 1, 'succeeded', now()), ('$RB', 'p', 's2', 1, 'succeeded', now()),
               ('$RB', 'p', 's1', 2, 'running', NULL)" >/dev/null
is "a reservation under the quota" "SELECT reserve_budget('$RB', 's1', 1, 600)" reserved
is "another that would overspend: quota_exceeded" "SELECT reserve_budget('$RB', 's2', 1, 500)" quota_exceeded
is "the same attempt again: exists" "SELECT reserve_budget('$RB', 's1', 1, 600)" exists
is "... nothing added" "SELECT count(*) FROM budget_reservations WHERE run_id = '$RB'" 1
sq -c "INSERT INTO token_usage (run_id, step_id, attempt, provider, model, cost_usd_micros) VALUES ('$RB', 's1', 1, 'p', 'm', 250)" >/dev/null
is "usage below its reservation: the month counts the reservation (600)" \
	"SELECT project_month_spend('$P1', date_trunc('month', now() AT TIME ZONE 'UTC')::date)" 600
sq -c "INSERT INTO token_usage (run_id, step_id, attempt, provider, model, cost_usd_micros) VALUES ('$RB', 's1', 1, 'p', 'm', 450)" >/dev/null
is "usage beyond its reservation: the month counts the usage (700), never both" \
	"SELECT project_month_spend('$P1', date_trunc('month', now() AT TIME ZONE 'UTC')::date)" 700
is "settle_budget records what the attempt spent" "SELECT settle_budget('$RB', 's1', 1)" 700
is "... settling again: nothing open" "SELECT coalesce(settle_budget('$RB', 's1', 1)::text, 'null')" null
is "after settling, 300 is left: 300 fits" "SELECT reserve_budget('$RB', 's2', 1, 300)" reserved
is "... and 1 more does not" "SELECT reserve_budget('$RB', 's1', 2, 1)" quota_exceeded
is "a resumed runner asking again for its attempt: exists (its spend not counted twice)" \
	"SELECT reserve_budget('$RB', 's2', 1, 300)" exists
RN=$(newrun "$P2")
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt) VALUES ('$RN', 'p', 's', 1)" >/dev/null
is "a project without a quota: reserved" "SELECT reserve_budget('$RN', 's', 1, 999999999)" reserved
is "... and recorded" "SELECT count(*) FROM budget_reservations WHERE run_id = '$RN'" 1
sq -c "UPDATE runs SET status = 'failed', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE id = '$RB'" >/dev/null
is "a finished run reserves nothing" "SELECT reserve_budget('$RB', 's1', 3, 1)" no_run

# ten concurrent runs against a small quota: 250 each against 1000 left in
# a fresh project; exactly 4 fit, and the month never exceeds the quota
P3=00000000-0000-0000-0000-0000000000b3
sq -c "INSERT INTO projects (id, name, monthly_quota_usd_micros) VALUES ('$P3', 'gamma', 1000)" >/dev/null
runs10=""
for i in $(seq 10); do
	R=$(newrun "$P3")
	sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt) VALUES ('$R', 'p', 's', 1)" >/dev/null
	runs10="$runs10 $R"
done
for R in $runs10; do echo "SELECT reserve_budget('$R', 's', 1, 250)"; done >"$T/res.sql"
at_once res <"$T/res.sql"
check "10 concurrent reservations of 250 against 1000: exactly 4 reserved" \
	[ "$(answers res reserved)" = 4 -a "$(answers res quota_exceeded)" = 6 ]
is "... the month's spend is 1000, not more" \
	"SELECT project_month_spend('$P3', date_trunc('month', now() AT TIME ZONE 'UTC')::date)" 1000

### step_reserve (0006): what the runner asks before an agent step attempt
TPB=00000000-0000-0000-0000-0000000000c2
P4=00000000-0000-0000-0000-0000000000b4
P5=00000000-0000-0000-0000-0000000000b5
P6=00000000-0000-0000-0000-0000000000b6
U2=00000000-0000-0000-0000-0000000000a2
sq -c "INSERT INTO templates (id, name, version, source, compiled, sha256)
	    VALUES ('$TPB', 'tb', 1, 'x', '{\"phases\": [{\"name\": \"p\", \"budget\": {\"usd_micros\": 300}}, {\"name\": \"q\", \"budget\": null}]}', decode(repeat('11', 32), 'hex'))" \
	-c "INSERT INTO projects (id, name, monthly_quota_usd_micros) VALUES ('$P4', 'delta', 1000), ('$P5', 'eps', 100), ('$P6', 'zeta', 1000)" \
	-c "INSERT INTO users (id, name) VALUES ('$U2', 'bob')" \
	-c "INSERT INTO memberships (project_id, user_id, role) VALUES ('$P4', '$U1', 'admin'), ('$P4', '$U2', 'member')" >/dev/null
# brun PROJECT BUDGET OWNER: a run of template tb held by OWNER; prints its id
brun() {
	val "INSERT INTO runs (project_id, template_id, template_name, template_version, submitted_by,
	       budget_usd_micros, status, started_at, lease_owner, lease_expires_at)
	     VALUES ('$1', '$TPB', 'tb', 1, '$U1', $2, 'running', now(), '$3', now() + interval '1 hour')
	     RETURNING id" | head -1
}
# reserve RUN OWNER PHASE STEP ATTEMPT [DEFAULT]: "outcome|amount"
reserve() { val "SELECT outcome || '|' || coalesce(amount::text, '') FROM step_reserve('$1', '$2', '$3', '$4', $5, ${6:-250})"; }
usage() { sq -c "INSERT INTO token_usage (run_id, step_id, attempt, provider, model, cost_usd_micros) VALUES ('$1', '$2', $3, 'p', 'm', $4)" >/dev/null; }
begin_step() { val "SELECT step_begin('$1', '$2', '$3', '$4', $5, 'agent')"; }
end_step() { val "SELECT step_end('$1', '$2', '$3', $4, 'failed', NULL, 'x', '{}', '[]')"; }
mon="date_trunc('month', now() AT TIME ZONE 'UTC')::date"

RA=$(brun "$P4" 1000 ea)
is "another engine's runner: lost, nothing written" "$(printf "SELECT outcome FROM step_reserve('%s', 'eb', 'q', 'a', 1, 250)" "$RA")" lost
is "... no reservation" "SELECT count(*) FROM budget_reservations WHERE run_id = '$RA'" 0
refused "a default of 0 is refused" "default reservation must be positive" "SELECT * FROM step_reserve('$RA', 'ea', 'q', 'a', 1, 0)"
is "the run's budget (1000, nothing spent) is reserved whole" "$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ea', 'q', 'a', 1, 250)" "$RA")" "reserved|1000"
is "... with the event budget.reserved (scope run)" \
	"SELECT payload->>'scope' || ' ' || (payload->>'usd_micros') FROM run_events WHERE run_id = '$RA' AND type = 'budget.reserved'" "run 1000"
is "the same attempt again (a runner that died before it began): exists, the same amount" "$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ea', 'q', 'a', 1, 250)" "$RA")" "exists|1000"
is "... one reservation, one event" \
	"SELECT (SELECT count(*) FROM budget_reservations WHERE run_id = '$RA') || ' ' || (SELECT count(*) FROM run_events WHERE run_id = '$RA' AND type = 'budget.reserved')" "1 1"
is "the attempt begins" "$(printf "SELECT step_begin('%s', 'ea', 'q', 'a', 1, 'agent')" "$RA")" ok
usage "$RA" a 1 400
is "the month counts the open reservation (1000), not its usage too" "SELECT project_month_spend('$P4', $mon)" 1000
# the runner and its engine die; another engine takes the run up
sq -c "UPDATE runs SET lease_owner = 'ec' WHERE id = '$RA'" >/dev/null
is "the new runner marks the attempt crashed" "SELECT step_crash('$RA', 'ec', 'a', 1)" t
is "... which settles its reservation with what it spent (400)" \
	"SELECT (settled_at IS NOT NULL) || ' ' || settled_usd_micros FROM budget_reservations WHERE run_id = '$RA'" "true 400"
is "a resumed run under quota is not stopped by its own earlier spend: the rest of its budget (600) fits the quota exactly" \
	"$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ec', 'q', 'a', 2, 250)" "$RA")" "reserved|600"
is "... the month: 400 spent + 600 reserved" "SELECT project_month_spend('$P4', $mon)" 1000
is "the attempt begins" "SELECT step_begin('$RA', 'ec', 'q', 'a', 2, 'agent')" ok
is "... and ends" "SELECT step_end('$RA', 'ec', 'a', 2, 'failed', NULL, 'x', '{}', '[]')" t
is "... settled with nothing spent" \
	"SELECT settled_usd_micros FROM budget_reservations WHERE run_id = '$RA' AND attempt = 2" 0
is "phase p's budget (300) is tighter than the run's rest (600): scope phase" \
	"$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ec', 'p', 'b', 1, 250)" "$RA")" "reserved|300"
is "... said so by its event" \
	"SELECT payload->>'scope' FROM run_events WHERE run_id = '$RA' AND type = 'budget.reserved' ORDER BY seq DESC LIMIT 1" phase
is "the run ends: a reservation of an attempt that never began is settled with it" \
	"SELECT finalize_run('$RA', 'running', 'failed', 'x', 'run.failed', '{}') IS NOT NULL" t
is "... nothing of the run is open" "SELECT count(*) FROM budget_reservations WHERE run_id = '$RA' AND settled_at IS NULL" 0

# the rest of the project's tests are not about its quota
sq -c "UPDATE projects SET monthly_quota_usd_micros = 1000000 WHERE id = '$P4'" >/dev/null

# no budget anywhere: the default
RD=$(brun "$P4" NULL ed)
is "no run or phase budget: the default (250)" "$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ed', 'q', 'a', 1, 250)" "$RD")" "reserved|250"
is "... scope default" \
	"SELECT payload->>'scope' FROM run_events WHERE run_id = '$RD' AND type = 'budget.reserved'" default
sq -c "UPDATE runs SET cancel_requested_at = now() WHERE id = '$RD'" >/dev/null
is "a cancel requested: cancelled, nothing reserved" "$(printf "SELECT outcome FROM step_reserve('%s', 'ed', 'q', 'b', 1, 250)" "$RD")" cancelled
is "... (still one reservation)" "SELECT count(*) FROM budget_reservations WHERE run_id = '$RD'" 1

# a spent run budget parks the run on a budget approval
RC=$(brun "$P4" 100 ee)
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at) VALUES ('$RC', 'q', 'a', 1, 'failed', now())" >/dev/null
usage "$RC" a 1 100
is "the run's budget is spent: paused" "$(printf "SELECT outcome FROM step_reserve('%s', 'ee', 'q', 'a', 2, 250)" "$RC")" paused
is "... waiting for approval, its lease handed back, nothing reserved" \
	"SELECT status || ' ' || coalesce(lease_owner, 'none') || ' ' || (SELECT count(*) FROM budget_reservations WHERE run_id = '$RC') FROM runs WHERE id = '$RC'" "waiting_approval none 0"
is "... on a pending approval of kind budget for the step" \
	"SELECT string_agg(kind || ' ' || status || ' ' || step_id, ',') FROM approvals WHERE run_id = '$RC'" "budget pending a"
is "... its events, in order" \
	"SELECT string_agg(type, ' ' ORDER BY seq) FROM run_events WHERE run_id = '$RC'" "budget.exceeded approval.requested run.waiting_approval"
is "... budget.exceeded says which budget and how much" \
	"SELECT payload->>'scope' || ' ' || (payload->>'budget_usd_micros') || ' ' || (payload->>'spent_usd_micros') || ' ' || (payload->>'step_id') FROM run_events WHERE run_id = '$RC' AND type = 'budget.exceeded'" "run 100 100 a"
APC=$(val "SELECT id FROM approvals WHERE run_id = '$RC'")
is "a member may not change a budget" \
	"SELECT api_set_budget('$U2', '$RC', NULL, 500, NULL)->>'status'" 403
is "... a negative amount: 422 usd_micros" \
	"SELECT (api_set_budget('$U1', '$RC', NULL, -1, NULL)->'error'->>'field')" usd_micros
is "... over 100000 USD: 422" \
	"SELECT api_set_budget('$U1', '$RC', NULL, 100000000001, NULL)->>'status'" 422
is "... a phase the template does not have: 422 phase" \
	"SELECT (api_set_budget('$U1', '$RC', 'nope', 5, NULL)->'error'->>'field')" phase
is "... after each refusal: budget, approval and events as they were" \
	"SELECT budget_usd_micros || ' ' || (SELECT status FROM approvals WHERE id = '$APC') || ' ' || (SELECT count(*) FROM run_events WHERE run_id = '$RC') FROM runs WHERE id = '$RC'" "100 pending 3"
is "an admin raises the budget to 500: 200" "SELECT api_set_budget('$U1', '$RC', NULL, 500, '127.0.0.1')->>'status'" 200
is "... the budget approval is approved in the same transaction, with budget.changed first" \
	"SELECT (SELECT status FROM approvals WHERE id = '$APC') || ' ' || (SELECT string_agg(type, ' ' ORDER BY seq) FROM run_events WHERE run_id = '$RC' AND seq > 3)" "approved budget.changed approval.approved"
is "... budget.changed from 100 to 500" \
	"SELECT (payload->>'from') || ' ' || (payload->>'to') || ' ' || coalesce(payload->>'phase', 'null') FROM run_events WHERE run_id = '$RC' AND type = 'budget.changed'" "100 500 null"
is "... and an audit row" "SELECT count(*) FROM audit_log WHERE action = 'run.budget' AND object_id = '$RC'" 1
sq -c "UPDATE runs SET status = 'running', lease_owner = 'ef', lease_expires_at = now() + interval '1 hour' WHERE id = '$RC'" >/dev/null
is "resumed, the step reserves the rest of the new budget (400)" \
	"$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ef', 'q', 'a', 2, 250)" "$RC")" "reserved|400"
is "a phase budget for this run replaces the template's: phase p at 50" \
	"SELECT api_set_budget('$U1', '$RC', 'p', 50, NULL)->'body'->'phase_budgets'->>'p'" 50
is "... the next attempt in phase p may spend 50" \
	"$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ef', 'p', 'c', 1, 250)" "$RC")" "reserved|50"
is "a phase budget set to 0" "SELECT api_set_budget('$U1', '$RC', 'p', 0, NULL)->>'status'" 200
is "... the next step of phase p: paused" \
	"$(printf "SELECT outcome FROM step_reserve('%s', 'ef', 'p', 'd', 1, 250)" "$RC")" paused
is "... scope phase, with the phase's name" \
	"SELECT (payload->>'scope') || ' ' || (payload->>'phase') FROM run_events WHERE run_id = '$RC' AND type = 'budget.exceeded' ORDER BY seq DESC LIMIT 1" "phase p"
APD=$(val "SELECT id FROM approvals WHERE run_id = '$RC' AND status = 'pending'")
is "the budget approval rejected" "SELECT decide_approval('$APD', 'rejected', '$U2', NULL)" t
sq -c "UPDATE runs SET status = 'running', lease_owner = 'eg', lease_expires_at = now() + interval '1 hour' WHERE id = '$RC'" >/dev/null
is "... the step is refused: it is to fail, nothing reserved" \
	"SELECT (SELECT outcome FROM step_reserve('$RC', 'eg', 'p', 'd', 1, 250)) || ' ' || (SELECT count(*) FROM budget_reservations WHERE run_id = '$RC' AND step_id = 'd')" "refused 0"
is "... its retry too" "$(printf "SELECT outcome FROM step_reserve('%s', 'eg', 'p', 'd', 2, 250)" "$RC")" refused
is "... another step of the phase is not refused but paused again (the budget is still 0)" \
	"$(printf "SELECT outcome FROM step_reserve('%s', 'eg', 'p', 'e', 1, 250)" "$RC")" paused
is "a finished run: 409" \
	"SELECT (SELECT finalize_run('$RC', 'waiting_approval', 'cancelled', NULL, 'run.cancelled', '{}') IS NOT NULL) || ' ' || (api_set_budget('$U1', '$RC', NULL, 900, NULL)->>'status')" "true 409"

# the quota cannot take the reservation
RQ=$(brun "$P5" NULL eh)
is "a default of 250 against a quota of 100: paused (scope quota)" \
	"$(printf "SELECT outcome FROM step_reserve('%s', 'eh', 'q', 'a', 1, 250)" "$RQ")" paused
is "... budget.exceeded: the quota, the month's spend and what was needed" \
	"SELECT (payload->>'scope') || ' ' || (payload->>'quota_usd_micros') || ' ' || (payload->>'month_spent_usd_micros') || ' ' || (payload->>'needed_usd_micros') FROM run_events WHERE run_id = '$RQ' AND type = 'budget.exceeded'" "quota 100 0 250"
APQ=$(val "SELECT id FROM approvals WHERE run_id = '$RQ'")
sq -c "UPDATE projects SET monthly_quota_usd_micros = 1000 WHERE id = '$P5'" >/dev/null
sq -c "SELECT decide_approval('$APQ', 'approved', '$U1', NULL)" \
	-c "UPDATE runs SET status = 'running', lease_owner = 'ei', lease_expires_at = now() + interval '1 hour' WHERE id = '$RQ'" >/dev/null
is "the quota raised and the approval approved: reserved" \
	"$(printf "SELECT outcome || '|' || amount FROM step_reserve('%s', 'ei', 'q', 'a', 1, 250)" "$RQ")" "reserved|250"

# ten concurrent runs, each asking for its whole budget (250) against a
# quota of 1000: exactly four are reserved, six parked, never more spent
runs10=""
for i in $(seq 10); do runs10="$runs10 $(brun "$P6" 250 "ez$i")"; done
i=0
for R in $runs10; do
	i=$((i + 1))
	echo "SELECT outcome FROM step_reserve('$R', 'ez$i', 'q', 'a', 1, 250)"
done >"$T/sr.sql"
at_once sr <"$T/sr.sql"
check "10 concurrent step reservations of 250 against 1000: 4 reserved, 6 parked" \
	[ "$(answers sr reserved)" = 4 -a "$(answers sr paused)" = 6 ]
is "... the month's spend is 1000, not more" "SELECT project_month_spend('$P6', $mon)" 1000
is "... the six parked wait on a budget approval each" \
	"SELECT count(*) FROM runs r JOIN approvals a ON a.run_id = r.id WHERE r.project_id = '$P6' AND r.status = 'waiting_approval' AND a.kind = 'budget' AND a.status = 'pending'" 6

### a run belongs to the host that first claimed it (0007)
sq -c "UPDATE runs SET status = 'cancelled', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE finished_at IS NULL" >/dev/null
HA=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
HB=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
RH=$(newrun)
is "host A claims a queued run" "SELECT coalesce((SELECT run_id || ' ' || previous_status FROM claim_run('ha1', 30, '$HA')), 'none')" "$RH queued"
is "... which is now pinned to host A" "SELECT workspace_host FROM runs WHERE id = '$RH'" "$HA"
sq -c "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = '$RH'" >/dev/null
is "its lease lapsed: host B may not take it up (the workspace is on A)" "SELECT count(*) FROM claim_run('hb1', 30, '$HB')" 0
is "... nor a claim naming no host" "SELECT count(*) FROM claim_run('hx', 30)" 0
is "... host A may, under a new engine" "SELECT coalesce((SELECT run_id || ' ' || previous_status FROM claim_run('ha2', 30, '$HA')), 'none')" "$RH running"
RU=$(newrun)
is "an unpinned queued run: host B takes it" "SELECT coalesce((SELECT run_id FROM claim_run('hb1', 30, '$HB'))::text, 'none')" "$RU"
is "... and it is B's" "SELECT workspace_host FROM runs WHERE id = '$RU'" "$HB"
RN2=$(newrun)
is "a claim naming no host takes an unpinned run and pins nothing" \
	"SELECT (SELECT run_id FROM claim_run('hx', 30)) = '$RN2' AND (SELECT workspace_host IS NULL FROM runs WHERE id = '$RN2')" t
refused "a host id is 32 lower-case hex digits" runs_workspace_host_check \
	"UPDATE runs SET workspace_host = 'A' WHERE id = '$RU'"

### the sums of GET /metrics (0016_metrics_sums.sql)
val "SELECT metrics_compact()" >/dev/null
RM=$(newrun)
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt, started_at)
       VALUES ('$RM', 'p', 'm', 1, now() - interval '7 seconds')" >/dev/null
is "a running attempt is no delta yet" "SELECT count(*) FROM metrics_step_deltas" 0
# finished exactly 7 s after it started, however long the psql calls took
sq -c "UPDATE run_steps SET status = 'failed', finished_at = started_at + interval '7 seconds' WHERE run_id = '$RM'" >/dev/null
is "once it finishes: one delta, of its status, in the bucket le 10 (2), its 7 s" \
	"SELECT string_agg(status || ' ' || k || ' ' || round(seconds::numeric), ',') FROM metrics_step_deltas" "failed 2 7"
sq -c "INSERT INTO run_steps (run_id, phase_name, step_id, attempt, status, finished_at)
       VALUES ('$RM', 'p', 'skip', 1, 'skipped', now())" >/dev/null
is "an attempt inserted finished is one too, in the bucket le 1 (0)" \
	"SELECT count(*) FROM metrics_step_deltas WHERE status = 'skipped' AND k = 0" 1
sq -c "UPDATE run_steps SET error = 'x' WHERE run_id = '$RM' AND step_id = 'm'" >/dev/null
is "changing a finished attempt adds none" "SELECT count(*) FROM metrics_step_deltas" 2
is "metrics_step_bucket: a bound's own value is in its bucket (le), past the last is 12" \
	"SELECT string_agg(metrics_step_bucket(d)::text, ' ' ORDER BY d) FROM unnest('{0,1,1.5,5,14400,14400.5}'::float8[]) d" \
	"0 0 1 1 11 12"
# 2,000 deltas more, then four compactions at once: each delta is counted
# once, whichever compaction takes it, and none is left
B0=$(val "SELECT coalesce(sum(n), 0) || ' ' || coalesce(sum(seconds), 0) FROM metrics_step_sums WHERE status = 'failed' AND k = 2")
S0=${B0#* }
B0=${B0%% *}
sq -c "INSERT INTO metrics_step_deltas (status, k, seconds) SELECT 'failed', 2, 1 FROM generate_series(1, 2000)" >/dev/null
printf 'SELECT metrics_compact()\n%.0s' 1 2 3 4 | at_once compact
MOVED=$(cat "$T"/compact.[0-9]* | awk '{ s += $1 } END { print s }')
is "four compactions at once moved the 2,002 deltas once ($MOVED)" \
	"SELECT $MOVED || ' ' || (SELECT count(*) FROM metrics_step_deltas) || ' ' ||
	        (SELECT sum(n) FROM metrics_step_sums WHERE status = 'failed' AND k = 2) - $B0" "2002 0 2001"
is "... their seconds summed with them (7 + 2,000)" \
	"SELECT round((seconds - $S0)::numeric) FROM metrics_step_sums WHERE status = 'failed' AND k = 2" 2007
is "compacting again moves nothing" "SELECT metrics_compact()" 0

[ "$T_FAIL" -eq 0 ] || { echo "--- postgres log"; tail -20 "$DBD/log"; }
finish engine_sql
