#!/bin/sh
# agrippactl's administration commands (users, tokens, projects, members,
# templates) against the real daemon and its embedded PostgreSQL: what they
# store, their errors (which change nothing), the audit rows, -j output,
# and clients that hang up while their query is still running.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
need_root admin
make_env
trap cleanup_env EXIT

start_daemon_or_finish admin

# run ARG...: agrippactl; sets OUT (stdout and stderr) and RC.
run() {
	OUT=$("$AGRIPPACTL" -s "$CTL" "$@" 2>&1)
	RC=$?
}

# --- users ---------------------------------------------------------------------
run user add alice "Alice Liddell"
expect 0 "user alice added" "user add alice"
run user add bob
expect 0 "user bob added" "user add bob (no display name)"
run user add alice
expect 1 "user alice exists" "a duplicate user is refused: exit 1, 'user alice exists'"
for bad in Alice -x "a b" x/y "" "$(printf 'a%.0s' $(seq 65))"; do
	run user add "$bad"
	expect 1 "user add: NAME must match \[a-z0-9\]" "user add refuses the name '$bad'"
done
run user add carol "$(printf 'tab\there')"
expect 1 "user add: DISPLAY must be" "user add refuses a display name with a control character"
run user add carol "$(printf 'x%.0s' $(seq 201))"
expect 1 "user add: DISPLAY must be" "user add refuses a display name of 201 characters"
run user add
expect 2 "usage" "user add without NAME is a usage error (exit 2)"
check "refused user adds created nothing (2 users)" [ "$(count users)" = 2 ]
run user list
expect 0 "^NAME  *DISPLAY_NAME  *STATE  *TOKENS  *CREATED$" "user list prints a header"
check "user list shows alice with her display name" sh -c "printf '%s\n' \"\$0\" | grep -q '^alice  *Alice Liddell  *active  *0 '" "$OUT"
check "user list shows bob with no display name" sh -c "printf '%s\n' \"\$0\" | grep -q '^bob  *-  *active'" "$OUT"
run -j user list
check "user list -j prints valid JSON" is_json
check "... with columns and rows" sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin)[\"data\"]; assert d[\"columns\"][0]==\"name\" and [r[0] for r in d[\"rows\"]]==[\"alice\",\"bob\"] and d[\"rows\"][1][1] is None'" "$OUT"
run user disable bob
expect 0 "user bob disabled" "user disable bob"
run user disable bob
expect 0 "disabled already" "disabling bob again says so"
run user disable nobody
expect 1 "no such user nobody" "user disable of a missing user: exit 1"
run user list
check "user list shows bob disabled" sh -c "printf '%s\n' \"\$0\" | grep -q '^bob  *-  *disabled'" "$OUT"
check "bob's disabled_at is set" [ "$(psql_q "select disabled_at is not null from users where name = 'bob'")" = t ]

# --- tokens --------------------------------------------------------------------
run token create alice 30
expect 0 "shown only this once" "token create alice 30"
TOKEN=$(printf '%s\n' "$OUT" | tail -n 1)
PREFIX=$(printf '%s' "$TOKEN" | cut -c1-12)
check "the token is agr_ + 43 base64url characters" sh -c "printf '%s' '$TOKEN' | grep -Eqx 'agr_[A-Za-z0-9_-]{43}'"
HASH=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
check "only the SHA-256 of the token is stored" \
	[ "$(psql_q "select encode(token_hash, 'hex') from api_tokens where prefix = '$PREFIX'")" = "$HASH" ]
check "the token expires in 30 days" \
	[ "$(psql_q "select expires_at - created_at = interval '30 days' from api_tokens where prefix = '$PREFIX'")" = t ]
check "the token is nowhere in the database" \
	[ "$(psql_q "select count(*) from api_tokens a, audit_log l where a::text like '%$TOKEN%' or l::text like '%$TOKEN%'")" = 0 ]
run token list alice
expect 0 "^PREFIX  *CREATED  *EXPIRES  *REVOKED  *LAST_USED$" "token list prints a header"
check "token list shows the prefix" has "^$PREFIX "
check "token list never shows the token or its hash" sh -c "! printf '%s' \"\$0\" | grep -q -e '$TOKEN' -e '$HASH'" "$OUT"
run -j token list alice
check "token list -j is valid JSON without the token or its hash" \
	sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; json.load(sys.stdin)' && ! printf '%s' \"\$0\" | grep -q -e '$TOKEN' -e '$HASH'" "$OUT"
run -j token create alice
check "token create -j prints valid JSON" is_json
TOKEN2=$(printf '%s' "$OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
check "... with the token in data.token, different from the first" \
	sh -c "printf '%s' '$TOKEN2' | grep -Eqx 'agr_[A-Za-z0-9_-]{43}' && [ '$TOKEN2' != '$TOKEN' ]"
check "a token without DAYS never expires" \
	[ "$(psql_q "select expires_at is null from api_tokens where prefix = '$(printf '%s' "$TOKEN2" | cut -c1-12)'")" = t ]
for bad in 0 3651 abc -1 1x; do
	run token create alice "$bad"
	expect 1 "token create: DAYS must be a number from 1 to 3650" "token create refuses DAYS '$bad'"
done
run token create nobody
expect 1 "no such user nobody" "token create for a missing user: exit 1"
run token create bob
expect 1 "user bob is disabled" "token create for a disabled user: exit 1"
check "refused token creates stored nothing (2 tokens)" [ "$(count api_tokens)" = 2 ]
run token revoke agr_
expect 1 "matches 2 tokens" "token revoke of a prefix matching two tokens fails"
check "... and revokes nothing" [ "$(psql_q 'select count(*) from api_tokens where revoked_at is not null')" = 0 ]
run token revoke "$PREFIX"
expect 0 "token $PREFIX of user alice revoked" "token revoke PREFIX"
check "revoked_at is set on that token only" \
	[ "$(psql_q "select string_agg(prefix, ',') from api_tokens where revoked_at is not null")" = "$PREFIX" ]
run token revoke "$PREFIX"
expect 0 "revoked already" "revoking it again says so"
run token revoke zzzz
expect 1 "no token with prefix zzzz" "token revoke of an unknown prefix: exit 1"
run token revoke 'bad!'
expect 1 "token revoke: PREFIX must be" "token revoke refuses a malformed prefix"
run token list alice
check "token list shows the revocation time" sh -c "printf '%s\n' \"\$0\" | grep -q '^$PREFIX .*Z  *[0-9-]*T[0-9:]*Z  *-$'" "$OUT"
run token list nobody
expect 1 "no such user nobody" "token list of a missing user: exit 1"
run token list bob
check "token list of a user without tokens is a header only" sh -c "[ $RC -eq 0 ] && [ \"\$(printf '%s\n' \"\$0\" | wc -l)\" -eq 1 ]" "$OUT"
check "the daemon log holds no token" sh -c "! grep -q -e '$TOKEN' -e '$TOKEN2' '$LOG'"

# --- projects and members ---------------------------------------------------------
run project add web
expect 0 "project web added" "project add web"
run project add web
expect 1 "project web exists" "a duplicate project is refused"
for bad in Web web_1 -web ""; do
	run project add "$bad"
	expect 1 "project add: NAME must match" "project add refuses the name '$bad'"
done
check "refused project adds created nothing" [ "$(count projects)" = 1 ]
run member add web alice admin
expect 0 "user alice is now admin in project web" "member add web alice admin"
run member add web alice member
expect 1 "member of project web already" "adding a member twice is refused"
run member add web alice owner
expect 1 "member add: ROLE must be admin, member or viewer" "member add refuses the role 'owner'"
run member add nosuch alice admin
expect 1 "no such project nosuch" "member add to a missing project: exit 1, clear error"
run member add web nobody viewer
expect 1 "no such user nobody" "member add of a missing user: exit 1, clear error"
run member add Web alice admin
expect 1 "PROJECT must match" "member add refuses a malformed project name"
check "refused member adds stored nothing" [ "$(count memberships)" = 1 ]
run member role web alice viewer
expect 0 "user alice is now viewer in project web (was admin)" "member role web alice viewer"
check "the role is stored" [ "$(psql_q 'select role from memberships')" = viewer ]
run member role web alice viewer
expect 0 "already" "setting the same role again says so"
run member role web alice boss
expect 1 "ROLE must be admin, member or viewer" "member role refuses the role 'boss'"
run member role web bob member
expect 1 "user bob is not a member of project web" "member role of a non-member: exit 1"
run member remove web alice
expect 0 "user alice removed from project web (was viewer)" "member remove web alice"
run member remove web alice
expect 1 "not a member" "removing a non-member: exit 1"
run member remove nosuch alice
expect 1 "no such project nosuch" "member remove from a missing project: exit 1"
run member add web bob member
expect 0 "user bob is now member" "member add web bob member"
run project list
expect 0 "^NAME  *MEMBERS  *CREATED$" "project list prints a header"
check "project list shows web with one member" sh -c "printf '%s\n' \"\$0\" | grep -q '^web  *1  '" "$OUT"
run -j project list
check "project list -j prints valid JSON" is_json

# --- templates ------------------------------------------------------------------
TPL=templates/run-tests.yaml
run template load "$TPL"
expect 0 "template run-tests version 1 loaded" "template load $TPL (a relative path)"
run template list
expect 0 "^NAME  *VERSION  *LOADED_AT  *SHA256$" "template list prints a header"
SUM=$(sha256sum "$TPL" | cut -d' ' -f1)
check "template list shows run-tests 1 with its sha256 prefix" \
	sh -c "printf '%s\n' \"\$0\" | grep -q '^run-tests  *1  *[0-9-]*T[0-9:]*Z  *$(printf '%s' "$SUM" | cut -c1-12)$'" "$OUT"
check "the stored source is the file and sha256 its digest" \
	[ "$(psql_q "select encode(sha256, 'hex') = '$SUM' and source = convert_from(decode('$(od -An -v -tx1 "$TPL" | tr -d ' \n')', 'hex'), 'UTF8') from templates")" = t ]
check "the compiled form is stored" [ "$(psql_q "select compiled->>'name' from templates")" = run-tests ]
run template load "$TPL"
expect 0 "template run-tests version 1 unchanged" "loading it again is 'unchanged'"
cp "$TPL" "$T/changed.yaml"
echo "# an edit" >>"$T/changed.yaml"
run template load "$T/changed.yaml"
expect 1 "template run-tests version 1 exists with other content: raise version" \
	"other content under the same name and version is refused"
printf 'name: broken\nversion: 1\nphases: nope\nbogus: 1\n' >"$T/broken.yaml"
run template load "$T/broken.yaml"
expect 1 "^$T/broken.yaml:[0-9]*:[0-9]*: " "a broken template is refused with its compile errors"
check "... every error as file:line:col" [ "$(printf '%s\n' "$OUT" | grep -c "$T/broken.yaml:[0-9]*:[0-9]*: ")" -ge 2 ]
run -j template load "$T/broken.yaml"
check "... and with -j as valid JSON listing the errors" \
	sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert not d[\"ok\"] and len(d[\"data\"][\"errors\"]) >= 2'" "$OUT"
run template load "$T/nosuch.yaml"
expect 1 "nosuch.yaml" "template load of a missing file: exit 1"
mkfifo "$T/fifo.yaml"
"$AGRIPPACTL" -s "$CTL" template load "$T/fifo.yaml" >"$T/fifo.out" 2>&1
RC=$?
OUT=$(cat "$T/fifo.out")
expect 1 "not a regular file" "template load of a FIFO is refused without hanging"
check "refused template loads stored nothing" [ "$(count templates)" = 1 ]
run -j template list
check "template list -j prints valid JSON" is_json

# --- the audit log ----------------------------------------------------------------
for a in user.add:2 user.disable:1 token.create:2 token.revoke:1 project.add:1 \
    member.add:2 member.role:1 member.remove:1 template.load:1; do
	n=$(audit "${a%%:*}")
	check "audit log: ${a#*:} ${a%%:*} row(s) by the operator over the control socket ($n)" \
		[ "$n" = "${a#*:}" ]
done
check "audit log: every row names its object" \
	[ "$(psql_q "select count(*) from audit_log where object_id is null or object_kind = ''")" = 0 ]
check "audit log: member rows carry the project" \
	[ "$(psql_q "select count(*) from audit_log where action like 'member.%' and project_id is null")" = 0 ]
check "audit log: token rows hold the prefix, not the hash" \
	[ "$(psql_q "select count(*) from audit_log where action like 'token.%' and detail ? 'prefix' and detail::text not like '%$HASH%'")" = 3 ]

# --- clients that hang up while their query runs -----------------------------------
# Hold a lock so the queries wait in PostgreSQL, send requests, hang up, then
# let them finish: the late results must find nobody and harm nothing.
PGPASSWORD=$(cat "$T/state/db.password") psql -X -q -h "$T/state/pgrun" -U agrippa agrippa \
	-c 'begin; lock table users, projects in access exclusive mode; select pg_sleep(3); commit;' \
	>/dev/null 2>&1 &
LOCKER=$!
sleep 0.5
python3 - "$CTL" <<'EOF'
import socket, struct, sys

def s(x):
    b = x.encode()
    return bytes([0xa0 | len(b)]) + b

def frame(i, cmd, args):
    body = bytes([0x92]) + s(cmd) + bytes([0x90 | len(args)]) + b"".join(s(a) for a in args)
    m = bytes([0x83]) + s("t") + bytes([9]) + s("id") + bytes([i]) + s("b") + body
    return struct.pack(">I", len(m)) + m

for n in range(20):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1])
    # several requests in flight on one connection, then hang up
    c.sendall(frame(1, "user list", []) + frame(2, "project list", []) +
              frame(3, "user add", ["gone%d" % n]) + frame(4, "member add", ["web", "alice", "admin"]))
    c.close()
EOF
check "requests from clients that hung up were sent" [ $? -eq 0 ]
wait "$LOCKER"
sleep 1
check "the supervisor survived the late results" kill -0 "$SUP_PID"
# The adds were queued behind the lock when their clients hung up: they ran
# (all 20 users exist), and their answers went nowhere.
wait_for 10 sh -c "[ \"\$(PGPASSWORD=\$(cat '$T/state/db.password') psql -X -A -t -h '$T/state/pgrun' -U agrippa agrippa -c \"select count(*) from users where name like 'gone%'\")\" = 20 ]"
check "the requests of the clients that hung up were pending and still ran" [ $? -eq 0 ]
run status
expect 0 "^database: up" "status works afterwards"
run user list
check "user list works afterwards" [ "$RC" -eq 0 ]

# --- end ---------------------------------------------------------------------------
stop_daemon
check "the daemon stops cleanly (exit 0)" [ "$DAEMON_STATUS" -eq 0 ]
if grep -q "ERROR: AddressSanitizer\|runtime error:" "$LOG"; then
	notok "no sanitizer report in the daemon log"
	grep -A30 "AddressSanitizer\|runtime error:" "$LOG" | head -60
else
	ok "no sanitizer report in the daemon log"
fi
[ "$T_FAIL" -eq 0 ] || { echo "--- daemon log"; tail -60 "$LOG"; }
finish admin
