#!/bin/sh
# The agent steps' SQL (sql/migrations/0008_agent.sql) against a throwaway
# PostgreSQL:
#  - agent_messages refuses a session id not of the form NAME.NUMBER, a
#    role other than user or assistant, a message that is not an object;
#  - runner_event takes the agent loop's event types and still refuses the
#    ones written with a state change;
#  - agent_turn under the lease stores the message at its seq, marks the
#    running attempt as using the session and appends the events in order;
#    without the lease it writes nothing; a seq stored twice, an event of a
#    forbidden type, a payload that is not an object or a bad session id
#    leave nothing of the call (not even the message or the session mark);
#  - agent_session gives the lease holder the session's messages in seq
#    order, and nobody else anything;
#  - proxy_usage records every column of a model call, whatever became of
#    the lease, but never for a finished run or an attempt that does not
#    exist; the attempt's end settles its reservation with what the calls
#    cost (0006) and the run's end sums them into its totals;
#  - runner_skills resolves skills only through the run's pinned manifest:
#    a newer version registered later is not what the run gets, a skill not
#    in the manifest is not found, and without the lease nothing is.
. tests/integration/lib.sh
need_root agent_sql
make_env
SQDB=agenttest
. tests/integration/pg_lib.sh

psql_db postgres -c "CREATE DATABASE agenttest" >/dev/null
migrate "migrations apply"

U1=00000000-0000-0000-0000-0000000000a1
P1=00000000-0000-0000-0000-0000000000b1
TPL=00000000-0000-0000-0000-0000000000c1
TPS=00000000-0000-0000-0000-0000000000c2
HEX32="decode(repeat('00', 32), 'hex')"
sq -c "INSERT INTO users (id, name) VALUES ('$U1', 'alice')" \
	-c "INSERT INTO projects (id, name, monthly_quota_usd_micros) VALUES ('$P1', 'alpha', 1000000)" \
	-c "INSERT INTO memberships (project_id, user_id, role) VALUES ('$P1', '$U1', 'admin')" \
	-c "INSERT INTO templates (id, name, version, source, compiled, sha256)
	    VALUES ('$TPL', 't', 1, 'x', '{}', $HEX32)" >/dev/null

# arun OWNER: a running run of template t held by OWNER for an hour;
# prints its id
arun() {
	val "INSERT INTO runs (project_id, template_id, template_name, template_version, submitted_by,
	       status, started_at, lease_owner, lease_expires_at)
	     VALUES ('$P1', '$TPL', 't', 1, '$U1', 'running', now(), '$1', now() + interval '1 hour')
	     RETURNING id" | head -1
}
# state RUN: everything agent_turn may write for RUN, in one line: its
# messages, its event count and next seq, each attempt's session
state() {
	val "SELECT (SELECT count(*) FROM agent_messages WHERE run_id = '$1') || '|' ||
	        (SELECT coalesce(string_agg(session || ':' || seq || ':' || message::text, ','
	                                    ORDER BY session, seq), '')
	         FROM agent_messages WHERE run_id = '$1') || '|' ||
	        (SELECT count(*) FROM run_events WHERE run_id = '$1') || '|' ||
	        (SELECT next_event_seq FROM runs WHERE id = '$1') || '|' ||
	        (SELECT coalesce(string_agg(step_id || '/' || attempt || '=' ||
	                                    coalesce(executor_session, '-'), ',' ORDER BY step_id, attempt), '')
	         FROM run_steps WHERE run_id = '$1')"
}
# same DESC RUN BEFORE: RUN's state is still BEFORE
same() {
	now=$(state "$2")
	if [ "$now" = "$3" ]; then ok "$1"; else notok "$1: was '$3', now '$now'"; fi
}
# agent_events RUN: the run's agent.* events as seq:type:payload, in order
agent_events() {
	echo "SELECT coalesce(string_agg(seq || ':' || type || ':' || payload::text, ' ' ORDER BY seq), '')
	      FROM run_events WHERE run_id = '$1' AND type LIKE 'agent.%'"
}
nextseq() { val "SELECT next_event_seq FROM runs WHERE id = '$1'"; }
M_USER='{"role": "user", "content": "fix the test"}'
M_ASST='{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read"}]}'
M_TOOL='{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}'

### runner_skills: only through the pinned manifest
# alpha and beta granted and required, gamma optional and not granted,
# delta registered and granted but required by no step
sq -c "INSERT INTO skills (name, version, body, sha256) VALUES
	     ('alpha', 1, 'alpha one', $HEX32), ('beta', 1, 'beta one', $HEX32),
	     ('gamma', 1, 'gamma one', $HEX32), ('delta', 1, 'delta one', $HEX32)" \
	-c "INSERT INTO grants (project_id, resource_kind, resource_name) VALUES
	     ('$P1', 'skill', 'alpha'), ('$P1', 'skill', 'beta'), ('$P1', 'skill', 'delta')" \
	-c "INSERT INTO templates (id, name, version, source, compiled, sha256)
	    VALUES ('$TPS', 'ts', 1, 'x', '{\"params\": {}, \"phases\": [{\"name\": \"p\", \"steps\": [{\"id\": \"a\",
	      \"requires\": {\"skills\": [{\"name\": \"beta\"}, {\"name\": \"alpha\"},
	                                  {\"name\": \"gamma\", \"optional\": true}]}}]}]}', $HEX32)" >/dev/null
RS=$(val "SELECT api_submit_run('$U1', '$P1', 'ts', '{}', NULL, NULL)->'body'->>'id'")
is "a run of ts is submitted" "SELECT count(*) FROM runs WHERE id = '$RS' AND status = 'queued'" 1
is "... its manifest pins alpha 1 and beta 1, not gamma (not granted) nor delta (not required)" \
	"SELECT string_agg((m->>'name') || ' ' || (m->>'version'), ', ' ORDER BY m->>'name')
	 FROM runs, jsonb_array_elements(manifest->'skills') m WHERE id = '$RS'" "alpha 1, beta 1"
sq -c "INSERT INTO skills (name, version, body, sha256) VALUES ('alpha', 2, 'alpha two', $HEX32)" >/dev/null
is "alpha 2 is registered later; the run is claimed" \
	"SELECT coalesce((SELECT run_id::text FROM claim_run_started('sk1', 60)), 'none')" "$RS"
is "runner_skills: the skills named, in the order named, at the pinned versions (alpha 1, not 2)" \
	"SELECT string_agg(name || '|' || version || '|' || body, ',') FROM runner_skills('$RS', 'sk1', '[\"alpha\", \"beta\"]')" \
	"alpha|1|alpha one,beta|1|beta one"
is "... named the other way round, the other order" \
	"SELECT string_agg(name || '|' || version, ',') FROM runner_skills('$RS', 'sk1', '[\"beta\", \"alpha\"]')" \
	"beta|1,alpha|1"
is "... a registered skill not in the manifest (gamma, delta) and an unknown one: nothing" \
	"SELECT count(*) FROM runner_skills('$RS', 'sk1', '[\"gamma\", \"delta\", \"nope\"]')" 0
is "... among others: only those of the manifest" \
	"SELECT string_agg(name || '|' || version, ',') FROM runner_skills('$RS', 'sk1', '[\"nope\", \"beta\", \"delta\"]')" \
	"beta|1"
is "... no names: nothing" "SELECT count(*) FROM runner_skills('$RS', 'sk1', '[]')" 0
is "... another owner: nothing" \
	"SELECT count(*) FROM runner_skills('$RS', 'sk2', '[\"alpha\", \"beta\"]')" 0
sq -c "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = '$RS'" >/dev/null
is "... its owner once the lease expired: nothing" \
	"SELECT count(*) FROM runner_skills('$RS', 'sk1', '[\"alpha\", \"beta\"]')" 0
sq -c "SELECT finalize_run('$RS', 'running', 'failed', 'x', 'run.failed', '{}')" >/dev/null
RS2=$(val "SELECT api_submit_run('$U1', '$P1', 'ts', '{}', NULL, NULL)->'body'->>'id'")
is "a run submitted after alpha 2 was registered pins and gets alpha 2" \
	"SELECT (SELECT run_id::text FROM claim_run_started('sk3', 60)) = '$RS2' AND
	        (SELECT string_agg(name || '|' || version || '|' || body, ',') FROM runner_skills('$RS2', 'sk3', '[\"alpha\"]')) = 'alpha|2|alpha two'" t
sq -c "SELECT finalize_run('$RS2', 'running', 'failed', 'x', 'run.failed', '{}')" >/dev/null
RM=$(arun sk4)
is "a run with an empty manifest: nothing" \
	"SELECT count(*) FROM runner_skills('$RM', 'sk4', '[\"alpha\"]')" 0

### agent_messages: what a stored message may be
R0=$(arun o0)
ins() { echo "INSERT INTO agent_messages (run_id, session, seq, message) VALUES ('$R0', '$1', $2, '$3')"; }
NAME64=$(printf 'a%.0s' $(seq 64))
accepted "a message of session plan.1" "$(ins plan.1 0 "$M_USER")"
accepted "an assistant's message" "$(ins plan.1 1 "$M_ASST")"
accepted "a session of a 64-character name and a 9-digit number" "$(ins "$NAME64.123456789" 0 "$M_USER")"
accepted "a session name of digits, _ and -" "$(ins "a_0-9.7" 0 "$M_USER")"
refused "the same seq of the session again" agent_messages_pkey "$(ins plan.1 1 "$M_USER")"
for s in Plan.1 plan plan. .1 plan.x plan.1.2 "pl an.1" "plan.1234567890" "a$NAME64.1"; do
	refused "session '$s' is refused" agent_messages_session_check "$(ins "$s" 5 "$M_USER")"
done
refused "role system is refused" agent_messages_message_check "$(ins bad.1 1 '{"role": "system", "content": "x"}')"
refused "role tool is refused" agent_messages_message_check "$(ins bad.1 2 '{"role": "tool", "content": "x"}')"
refused "a role that is not a string is refused" agent_messages_message_check "$(ins bad.1 3 '{"role": ["user"]}')"
refused "a message without a role is refused" agent_messages_message_check "$(ins bad.1 4 '{"content": "x"}')"
refused "a message with a null role is refused" agent_messages_message_check "$(ins bad.1 5 '{"role": null, "content": "x"}')"
refused "a message that is an array is refused" agent_messages_message_check "$(ins bad.1 6 '[{"role": "user"}]')"
refused "a message that is a string is refused" agent_messages_message_check "$(ins bad.1 7 '"user"')"
refused "a negative seq is refused" agent_messages_seq_check "$(ins plan.1 -1 "$M_USER")"
refused "a run that does not exist is refused" agent_messages_run_id_fkey \
	"INSERT INTO agent_messages (run_id, session, seq, message) VALUES (gen_random_uuid(), 'plan.1', 0, '$M_USER')"
is "the four good messages are stored, nothing under a refused session id" \
	"SELECT count(*) FROM agent_messages WHERE run_id = '$R0' AND session <> 'bad.1'" 4

### runner_event takes the agent loop's events
N=$(nextseq "$R0")
i=0
for ty in agent.message agent.tool_call agent.tool_result agent.usage budget.exceeded step.output artifact.rejected; do
	is "runner_event $ty: appended at the next seq" \
		"SELECT runner_event('$R0', 'o0', '$ty', '{\"i\": $i}')" $((N + i))
	i=$((i + 1))
done
is "... in order, with their payloads" \
	"SELECT string_agg(type || ':' || (payload->>'i'), ' ' ORDER BY seq) FROM run_events WHERE run_id = '$R0' AND seq >= $N" \
	"agent.message:0 agent.tool_call:1 agent.tool_result:2 agent.usage:3 budget.exceeded:4 step.output:5 artifact.rejected:6"
for ty in run.succeeded run.failed step.started step.finished approval.requested budget.reserved agent.other agent; do
	refused "runner_event $ty is refused" "is not a runner event" "SELECT runner_event('$R0', 'o0', '$ty', '{}')"
done
is "runner_event agent.message by another owner: NULL" \
	"SELECT coalesce(runner_event('$R0', 'o9', 'agent.message', '{}')::text, 'null')" null
is "... nothing appended by it, nor by the refused ones" "SELECT count(*) FROM run_events WHERE run_id = '$R0' AND seq >= $N" 7

### agent_turn
R=$(arun o1)
is "the agent step's attempt begins" "SELECT step_begin('$R', 'o1', 'p', 's', 1, 'agent')" ok
N=$(nextseq "$R")
is "agent_turn under the lease: true" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 's.1', 0, '$M_USER', '[{\"type\": \"agent.message\", \"payload\": {\"role\": \"user\", \"n\": 1}}, {\"type\": \"agent.usage\", \"payload\": {\"n\": 2}}]')" t
is "... the message is stored as seq 0 of the session, as given" \
	"SELECT count(*) || ' ' || bool_and(message = '$M_USER'::jsonb) FROM agent_messages WHERE run_id = '$R' AND session = 's.1' AND seq = 0" "1 true"
is "... the running attempt uses the session" \
	"SELECT executor_session FROM run_steps WHERE run_id = '$R' AND step_id = 's' AND attempt = 1" s.1
is "... the events follow the last one in order, with consecutive seqs and their payloads" \
	"$(agent_events "$R")" "$N:agent.message:{\"n\": 1, \"role\": \"user\"} $((N + 1)):agent.usage:{\"n\": 2}"
is "... the run's next seq is past them" "SELECT next_event_seq FROM runs WHERE id = '$R'" $((N + 2))
is "... they are the run's last events" "SELECT max(seq) FROM run_events WHERE run_id = '$R'" $((N + 1))
is "the next turn: the assistant's answer at seq 1, three events" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 's.1', 1, '$M_ASST', '[{\"type\": \"agent.message\", \"payload\": {\"n\": 3}}, {\"type\": \"agent.tool_call\", \"payload\": {\"n\": 4}}, {\"type\": \"agent.usage\", \"payload\": {\"n\": 5}}]')" t
is "... events appended after the earlier ones, in the order given" \
	"SELECT string_agg(seq || ':' || (payload->>'n'), ' ' ORDER BY seq) FROM run_events WHERE run_id = '$R' AND type LIKE 'agent.%'" \
	"$N:1 $((N + 1)):2 $((N + 2)):3 $((N + 3)):4 $((N + 4)):5"
is "a turn with no events: true" "SELECT agent_turn('$R', 'o1', 's', 1, 's.1', 3, '$M_TOOL', '[]')" t
is "... the message stored at seq 3, no event" \
	"SELECT (SELECT message = '$M_TOOL'::jsonb FROM agent_messages WHERE run_id = '$R' AND session = 's.1' AND seq = 3) || ' ' ||
	        (SELECT next_event_seq FROM runs WHERE id = '$R')" "true $((N + 5))"

# a NULL message: the events only
is "a NULL message with events: true" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 's.1', 2, NULL, '[{\"type\": \"budget.exceeded\", \"payload\": {\"scope\": \"step\"}}, {\"type\": \"agent.usage\", \"payload\": {\"n\": 6}}]')" t
is "... no message stored (still 3 in the session, none at seq 2)" \
	"SELECT count(*) || ' ' || count(*) FILTER (WHERE seq = 2) FROM agent_messages WHERE run_id = '$R' AND session = 's.1'" "3 0"
is "... both events appended, in order" \
	"SELECT string_agg(seq || ':' || type, ' ' ORDER BY seq) FROM run_events WHERE run_id = '$R' AND seq >= $((N + 5))" \
	"$((N + 5)):budget.exceeded $((N + 6)):agent.usage"
is "... the message of seq 2 may still come" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 's.1', 2, '$M_ASST', '[]')" t

# without the lease: nothing
B=$(state "$R")
is "agent_turn by another owner: false" \
	"SELECT agent_turn('$R', 'o2', 's', 1, 'x.9', 7, '$M_USER', '[{\"type\": \"agent.message\", \"payload\": {}}]')" f
same "... nothing written: no message, no event, the attempt's session unchanged" "$R" "$B"
sq -c "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = '$R'" >/dev/null
is "agent_turn by the owner of an expired lease: false" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 'x.9', 7, '$M_USER', '[{\"type\": \"agent.message\", \"payload\": {}}]')" f
same "... nothing written" "$R" "$B"
sq -c "UPDATE runs SET lease_expires_at = now() + interval '1 hour' WHERE id = '$R'" >/dev/null
sq -c "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, status = 'waiting_approval' WHERE id = '$R'" >/dev/null
is "agent_turn on a run parked for an approval: false" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 'x.9', 7, '$M_USER', '[{\"type\": \"agent.message\", \"payload\": {}}]')" f
same "... nothing written" "$R" "$B"
sq -c "UPDATE runs SET lease_owner = 'o1', lease_expires_at = now() + interval '1 hour', status = 'running' WHERE id = '$R'" >/dev/null

# errors: nothing of the call remains.  Step t's attempt has no session
# yet, so that a session mark left behind would show.
is "step t's attempt begins" "SELECT step_begin('$R', 'o1', 'p', 't', 1, 'agent')" ok
# atomic DESC PATTERN SQL: SQL fails with an error matching PATTERN, and
# leaves the run $R as it was (two checks)
atomic() {
	before=$(state "$R")
	refused "$1" "$2" "$3"
	same "... nothing of it remains" "$R" "$before"
}
# turn_t EVENTS [MESSAGE] [SESSION] [SEQ]: agent_turn of step t's attempt
turn_t() {
	echo "SELECT agent_turn('$R', 'o1', 't', 1, '${3:-t.1}', ${4:-0}, '${2:-$M_USER}', '$1')"
}
EV_OK='{"type": "agent.message", "payload": {}}'
atomic "the same seq of the session twice is an error (seq 1 as it was, no event, attempt t/1 without a session)" \
	agent_messages_pkey "$(turn_t "[$EV_OK]" "$M_USER" s.1 1)"
atomic "an event of type run.succeeded after a good one is an error (not the message, the good event, the session)" \
	"run.succeeded is not a runner event" "$(turn_t "[$EV_OK, {\"type\": \"run.succeeded\", \"payload\": {}}]")"
atomic "an event of type step.finished is an error" "step.finished is not a runner event" \
	"$(turn_t '[{"type": "step.finished", "payload": {}}]')"
atomic "an event of type budget.reserved is an error" "budget.reserved is not a runner event" \
	"$(turn_t '[{"type": "budget.reserved", "payload": {}}]')"
atomic "an event whose payload is an array, after a good one, is an error" "agent.usage is not a runner event" \
	"$(turn_t "[$EV_OK, {\"type\": \"agent.usage\", \"payload\": [1]}]")"
atomic "an event whose payload is a string is an error" "is not a runner event" \
	"$(turn_t '[{"type": "agent.usage", "payload": "x"}]')"
atomic "an event whose payload is null is an error" "is not a runner event" \
	"$(turn_t '[{"type": "agent.usage", "payload": null}]')"
# (refused today by run_events.type NOT NULL rather than by the check)
atomic "an event without a type is an error" 'not a runner event\|column "type"' "$(turn_t '[{"payload": {}}]')"
atomic "an event that is not an object is an error" 'not a runner event\|column "type"' "$(turn_t '["agent.message"]')"
atomic "a message of role system is an error" agent_messages_message_check \
	"$(turn_t "[$EV_OK]" '{"role": "system"}')"
atomic "a message that is not an object is an error" agent_messages_message_check \
	"$(turn_t "[$EV_OK]" '"hello"')"
atomic "a bad session id is an error (the attempt's session not changed either)" "is not a session id" \
	"$(turn_t "[$EV_OK]" "$M_USER" 'T 1')"
atomic "a negative seq is an error" agent_messages_seq_check "$(turn_t "[$EV_OK]" "$M_USER" t.1 -1)"
for ev in '{}' '"x"' '1' 'null' "$EV_OK"; do
	atomic "events that are $ev, not an array: an error" "events must be an array" "$(turn_t "$ev")"
done
# (on a run of its own, so that what it may leave does not show later)
RX=$(arun o7)
is "another run's agent step begins" "SELECT step_begin('$RX', 'o7', 'p', 'u', 1, 'agent')" ok
BX=$(state "$RX")
refused "an event without a payload is an error" "is not a runner event" \
	"SELECT agent_turn('$RX', 'o7', 'u', 1, 'u.1', 0, '$M_USER', '[{\"type\": \"agent.usage\"}]')"
same "... nothing of it remains" "$RX" "$BX"
is "the same turn done right: true" \
	"SELECT agent_turn('$R', 'o1', 't', 1, 't.1', 0, '$M_USER', '[{\"type\": \"agent.message\", \"payload\": {}}]')" t
is "... attempt t/1 uses t.1, s/1 still s.1" \
	"SELECT string_agg(step_id || '/' || attempt || '=' || executor_session, ' ' ORDER BY step_id) FROM run_steps WHERE run_id = '$R'" \
	"s/1=s.1 t/1=t.1"

# a crashed attempt's successor adopts the session
sq -c "UPDATE runs SET lease_owner = 'o3' WHERE id = '$R'" >/dev/null
is "the attempt is crashed by a new runner, and attempt 2 begins" \
	"SELECT step_crash('$R', 'o3', 's', 1) || ' ' || step_begin('$R', 'o3', 'p', 's', 2, 'agent')" "true ok"
is "the old runner's turn: false (its lease is gone)" \
	"SELECT agent_turn('$R', 'o1', 's', 1, 's.1', 4, '$M_USER', '[]')" f
B=$(state "$R")
refused "the new runner storing seq 0 again is an error" agent_messages_pkey \
	"SELECT agent_turn('$R', 'o3', 's', 2, 's.1', 0, '$M_USER', '[{\"type\": \"agent.message\", \"payload\": {}}]')"
same "... attempt 2 is not marked as using the session by it" "$R" "$B"
is "the next turn of the resumed session: true" \
	"SELECT agent_turn('$R', 'o3', 's', 2, 's.1', 4, '$M_USER', '[]')" t
is "... attempt 2 uses the session; the crashed attempt keeps its own" \
	"SELECT string_agg(attempt || '=' || status || ':' || coalesce(executor_session, '-'), ' ' ORDER BY attempt) FROM run_steps WHERE run_id = '$R' AND step_id = 's'" \
	"1=crashed:s.1 2=running:s.1"
is "a turn naming an attempt that is not running: true (the message is stored)" \
	"SELECT agent_turn('$R', 'o3', 's', 1, 'z.1', 0, '$M_USER', '[]')" t
is "... but no attempt is marked as using its session" \
	"SELECT string_agg(attempt || '=' || executor_session, ' ' ORDER BY attempt) FROM run_steps WHERE run_id = '$R' AND step_id = 's'" \
	"1=s.1 2=s.1"

### agent_session
is "agent_session: the session's messages in seq order for the lease holder" \
	"SELECT string_agg(seq || ':' || (message->>'role'), ' ') FROM agent_session('$R', 'o3', 's.1')" \
	"0:user 1:assistant 2:assistant 3:user 4:user"
is "... each message as stored" \
	"SELECT bool_and(a.message = m.message) AND count(*) = 5 FROM agent_session('$R', 'o3', 's.1') a
	 JOIN agent_messages m ON m.run_id = '$R' AND m.session = 's.1' AND m.seq = a.seq" t
is "... another session of the run: its own messages only" \
	"SELECT string_agg(seq::text, ' ') FROM agent_session('$R', 'o3', 't.1')" 0
is "... a session with no messages: nothing" "SELECT count(*) FROM agent_session('$R', 'o3', 'q.1')" 0
is "... another owner: nothing" "SELECT count(*) FROM agent_session('$R', 'o1', 's.1')" 0
is "... the session name of another run: only that run's messages" \
	"SELECT string_agg(seq::text, ' ') FROM agent_session('$R0', 'o0', 'plan.1')" "0 1"
sq -c "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = '$R'" >/dev/null
is "... the holder of an expired lease: nothing" "SELECT count(*) FROM agent_session('$R', 'o3', 's.1')" 0
sq -c "UPDATE runs SET lease_expires_at = now() + interval '1 hour' WHERE id = '$R'" >/dev/null

### proxy_usage
RU=$(arun o4)
is "an attempt that reserves 5000 and begins" \
	"SELECT (SELECT outcome || ' ' || amount FROM step_reserve('$RU', 'o4', 'p', 'a', 1, 5000)) || ' ' || step_begin('$RU', 'o4', 'p', 'a', 1, 'agent')" \
	"reserved 5000 ok"
ID=$(val "SELECT proxy_usage('$RU', 'a', 1, 'anthropic', 'claude-sonnet-4-5', 1200, 340, 56, 78, 1500)")
is "proxy_usage: one token_usage row with every column, under the id returned" \
	"SELECT run_id || '|' || step_id || '|' || attempt || '|' || provider || '|' || model || '|' || input_tokens || '|' ||
	        output_tokens || '|' || cache_read_tokens || '|' || cache_write_tokens || '|' || cost_usd_micros || '|' ||
	        (created_at BETWEEN now() - interval '1 minute' AND now())
	 FROM token_usage WHERE id = '$ID'" \
	"$RU|a|1|anthropic|claude-sonnet-4-5|1200|340|56|78|1500|true"
is "... the run's only row" "SELECT count(*) FROM token_usage WHERE run_id = '$RU'" 1
sq -c "UPDATE runs SET lease_owner = 'o5', lease_expires_at = now() - interval '1 second' WHERE id = '$RU'" >/dev/null
is "a call made while the lease was lost is recorded all the same (it was paid for)" \
	"SELECT proxy_usage('$RU', 'a', 1, 'openai', 'gpt-4.1', 10, 20, 0, 0, 700) IS NOT NULL" t
sq -c "UPDATE runs SET lease_owner = 'o4', lease_expires_at = now() + interval '1 hour' WHERE id = '$RU'" >/dev/null
B=$(val "SELECT count(*) FROM token_usage")
refused "an attempt that does not exist is refused" token_usage_attempt_fkey \
	"SELECT proxy_usage('$RU', 'a', 2, 'anthropic', 'm', 1, 1, 0, 0, 1)"
refused "a step that does not exist is refused" token_usage_attempt_fkey \
	"SELECT proxy_usage('$RU', 'zz', 1, 'anthropic', 'm', 1, 1, 0, 0, 1)"
refused "a run that does not exist is refused" "is finished or does not exist" \
	"SELECT proxy_usage(gen_random_uuid(), 'a', 1, 'anthropic', 'm', 1, 1, 0, 0, 1)"
refused "a negative cost is refused" token_usage_cost_usd_micros_check \
	"SELECT proxy_usage('$RU', 'a', 1, 'anthropic', 'm', 1, 1, 0, 0, -1)"
refused "negative tokens are refused" token_usage_cache_read_tokens_check \
	"SELECT proxy_usage('$RU', 'a', 1, 'anthropic', 'm', 1, 1, -5, 0, 1)"
refused "a bad provider name is refused" token_usage_provider_check \
	"SELECT proxy_usage('$RU', 'a', 1, 'Anthropic Inc', 'm', 1, 1, 0, 0, 1)"
is "... none of them recorded" "SELECT count(*) FROM token_usage" "$B"

# settling (0006): the attempt's end settles its reservation with the sum
is "the reservation is open while the attempt runs" \
	"SELECT count(*) FROM budget_reservations WHERE run_id = '$RU' AND step_id = 'a' AND attempt = 1 AND settled_at IS NULL" 1
is "... the month counts the reservation (5000), not the usage (2200) as well" \
	"SELECT project_month_spend('$P1', date_trunc('month', now() AT TIME ZONE 'UTC')::date) -
	        (SELECT coalesce(sum(cost_usd_micros), 0) FROM token_usage u WHERE u.run_id <> '$RU')" 5000
is "the attempt ends" "SELECT step_end('$RU', 'o4', 'a', 1, 'succeeded', NULL, NULL, '{}', '[]')" t
is "... its reservation is settled with the sum of its calls' costs (1500 + 700)" \
	"SELECT (settled_at IS NOT NULL) || ' ' || settled_usd_micros FROM budget_reservations WHERE run_id = '$RU' AND step_id = 'a' AND attempt = 1" \
	"true 2200"
is "a second attempt reserves; its calls cost 300 and 400; it crashes" \
	"SELECT (SELECT outcome FROM step_reserve('$RU', 'o4', 'p', 'a', 2, 5000)) || ' ' || step_begin('$RU', 'o4', 'p', 'a', 2, 'agent') || ' ' ||
	        (proxy_usage('$RU', 'a', 2, 'anthropic', 'm', 3, 4, 0, 0, 300) IS NOT NULL) || ' ' ||
	        (proxy_usage('$RU', 'a', 2, 'anthropic', 'm', 5, 6, 0, 0, 400) IS NOT NULL)" "reserved ok true true"
sq -c "UPDATE runs SET lease_owner = 'o6' WHERE id = '$RU'" >/dev/null
is "... a new runner marks it crashed" "SELECT step_crash('$RU', 'o6', 'a', 2)" t
is "... which settles its reservation with 700" \
	"SELECT settled_usd_micros FROM budget_reservations WHERE run_id = '$RU' AND attempt = 2" 700
is "a third attempt reserves and calls once (50); the run ends" \
	"SELECT (SELECT outcome FROM step_reserve('$RU', 'o6', 'p', 'a', 3, 5000)) || ' ' || step_begin('$RU', 'o6', 'p', 'a', 3, 'agent') || ' ' ||
	        (proxy_usage('$RU', 'a', 3, 'anthropic', 'm', 7, 8, 0, 0, 50) IS NOT NULL) || ' ' ||
	        run_finish('$RU', 'o6', 'failed', 'x')" "reserved ok true failed"
is "... the running attempt's reservation is settled with the run (50)" \
	"SELECT settled_usd_micros FROM budget_reservations WHERE run_id = '$RU' AND attempt = 3" 50
is "... the run's totals sum every call: cost, tokens in, tokens out" \
	"SELECT spent_usd_micros || ' ' || tokens_in || ' ' || tokens_out FROM runs WHERE id = '$RU'" \
	"2950 1225 378"
B=$(val "SELECT count(*) FROM token_usage")
refused "proxy_usage for the finished run is refused (token_usage_run_open)" "is finished or does not exist" \
	"SELECT proxy_usage('$RU', 'a', 3, 'anthropic', 'm', 1, 1, 0, 0, 1)"
is "... nothing recorded, the totals as they were" \
	"SELECT (SELECT count(*) FROM token_usage) || ' ' || spent_usd_micros FROM runs WHERE id = '$RU'" "$B 2950"

[ "$T_FAIL" -eq 0 ] || { echo "--- postgres log"; tail -20 "$DBD/log"; }
finish agent_sql
