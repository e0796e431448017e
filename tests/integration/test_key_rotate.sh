#!/bin/sh
# agrippactl key rotate against the real daemon, its embedded PostgreSQL
# and the fake git server over TLS (tests/fakes/git_https.py): a repository
# token and an MCP server's credentials are sealed again under a new master
# key and still open (a clone with the token; mcp test of a server whose
# environment holds the credential, which comes back redacted); the key
# files, the database's record of the key and the audit row; a secret that
# does not open fails the rotation with nothing changed; a value sealed
# under the old key is refused once the rotation has committed; and a
# supervisor killed (SIGKILL, by the test builds' AGRIPPA_TEST_ROTATE_CRASH
# hook) at each step of a rotation starts again with every secret readable
# and exactly one key file.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
. tests/integration/git_lib.sh
need_root key_rotate
for prog in openssl git python3 unshare; do
	if ! command -v "$prog" >/dev/null 2>&1; then
		notok "$prog is installed (scripts/deps.sh)"
		finish key_rotate
		exit 1
	fi
done
make_env
SRV_PID=""
trap 'stop_git_server; cleanup_env' EXIT

KEY="$T/keys/master.key"
RND=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
TOKEN="tok-$RND"
SECRET="mcpsecret_${RND}_x"
mkdir -p "$T/tls" "$T/srv"
check "a throwaway CA and server certificate" make_ca
BASE=$("$TOOLS/mkrepo" "$T/src")
git clone -q --bare "$T/src" "$T/srv/repo.git" >/dev/null 2>&1
printf '%s\n' "$TOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"
if ! start_git_server; then
	notok "the fake git server starts"
	cat "$T/server.out"
	finish key_rotate
	exit 1
fi
URL="https://127.0.0.1:$PORT_TLS/repo.git"

run() { OUT=$("$AGRIPPACTL" -s "$CTL" "$@" 2>&1 </dev/null); RC=$?; }
run_in() { input=$1; shift; OUT=$(printf '%s' "$input" | "$AGRIPPACTL" -s "$CTL" "$@" 2>&1); RC=$?; }
hexof() { od -An -tx1 "$1" | tr -d ' \n'; }
# fp FILE: the key's fingerprint as the daemon computes it (keyed BLAKE2b)
fp() {
	python3 -c 'import hashlib,sys
k = open(sys.argv[1], "rb").read()
print(hashlib.blake2b(b"agrippa master key fingerprint", key=k, digest_size=32).hexdigest())' "$1"
}
db_fp() { psql_q "select encode(fingerprint, 'hex') from key_state"; }
key_files() { ls -A "$T/keys" | tr '\n' ' ' | sed 's/ $//'; }
# every sealed value, in one line (to tell that nothing changed)
sealed() {
	psql_q "select string_agg(x, ',' order by x) from (
	          select encode(token_ciphertext || token_nonce, 'hex') x from repo_connections
	          where token_ciphertext is not null
	          union all select encode(credentials_ciphertext || credentials_nonce, 'hex')
	          from mcp_servers where credentials_ciphertext is not null) s"
}
# secrets_open WHEN: the token clones, the credentials reach the server
secrets_open() {
	run repo test p1 good
	check "$1: the repository token opens: repo test clones over https ($OUT)" \
		[ $RC -eq 0 -a "$OUT" = "repo good: checked out commit $BASE" ]
	run mcp test -c say -a "{\"text\":\"$SECRET\"}" fake
	check "$1: the MCP credentials open: mcp test starts the server and its echo of the credential is redacted ($OUT)" \
		sh -c "[ $RC -eq 0 ] && printf '%s' \"\$0\" | grep -q 'said: \*\*\*\*' && ! printf '%s' \"\$0\" | grep -q '$SECRET'" "$OUT"
}

start_trusting_daemon key_rotate
printf '{"transport":"stdio","command":["/usr/bin/python3","%s","ok"],"paths":["%s"],"env":{"FAKE_TOKEN":"${credentials.token}"}}\n' \
	"$ROOT/tests/fakes/fake_mcp.py" "$ROOT/tests/fakes" >"$T/fake.json"
chmod 0644 "$T/fake.json"
ctl project add p1 &&
	printf '%s' "$TOKEN" | ctl repo add p1 good "$URL" &&
	printf '{"token":"%s"}' "$SECRET" | ctl mcp add fake "$T/fake.json"
check "a repository with a token and an MCP server with credentials" [ $? -eq 0 ]
check "the first start recorded its key's fingerprint (never the key) in key_state" \
	[ "$(db_fp)" = "$(fp "$KEY")" -a "$(psql_q "select count(*) from key_state")" = 1 ]
check "... and the key is in no column of it" \
	[ "$(psql_q "select count(*) from key_state where position(decode('$(hexof "$KEY")', 'hex') in fingerprint) > 0 or encode(fingerprint, 'hex') = '$(hexof "$KEY")'")" = 0 ]
check "a nonce begins with the sealing key's id (the fingerprint's first 8 bytes)" \
	[ "$(psql_q "select count(*) from repo_connections where encode(substring(token_nonce from 1 for 8), 'hex') = substring('$(db_fp)' from 1 for 16)")" = 1 ]
secrets_open "before any rotation"

# --- a rotation ----------------------------------------------------------------------
K0=$(hexof "$KEY")
FP0=$(fp "$KEY")
S0=$(sealed)
OLD_TOKEN=$(psql_q "select encode(token_ciphertext, 'hex') || ':' || encode(token_nonce, 'hex') from repo_connections where name = 'good'")
run key rotate
expect 0 "rotated the master key: 1 repository tokens and 1 MCP credentials sealed again; fingerprint $(fp "$KEY")" \
	"key rotate: both secrets sealed again, the new fingerprint named"
check "the key differs ($(hexof "$KEY" | cut -c1-8)... from ${K0%"${K0#????????}"}...)" [ "$(hexof "$KEY")" != "$K0" ]
check "the key file is 0600, 32 bytes, and alone: no .new, no .old left ($(key_files))" \
	[ "$(stat -c '%a %s' "$KEY")" = "600 32" -a "$(key_files)" = "master.key" ]
check "key_state names the new key, and the one before it" \
	[ "$(db_fp)" = "$(fp "$KEY")" -a "$(psql_q "select encode(previous, 'hex') from key_state")" = "$FP0" ]
check "every ciphertext and nonce changed" \
	[ -n "$S0" -a "$(sealed)" != "$S0" -a "$(psql_q "select count(*) from repo_connections where encode(token_nonce, 'hex') = '${OLD_TOKEN#*:}'")" = 0 ]
check "the audit row: key.rotate by the operator, both fingerprints and the counts, no key" \
	[ "$(psql_q "select count(*) from audit_log where action = 'key.rotate' and actor_kind = 'operator' and remote_addr = 'control socket' and object_kind = 'master_key' and object_id = '$(fp "$KEY")' and detail->>'previous' = '$FP0' and detail->>'fingerprint' = '$(fp "$KEY")' and (detail->>'repo_tokens')::int = 1 and (detail->>'mcp_credentials')::int = 1")" = 1 ]
check "... and neither key is in the audit log" \
	[ "$(psql_q "select count(*) from audit_log where detail::text ~ '$K0|$(hexof "$KEY")'")" = 0 ]
secrets_open "after a rotation"
# none_holds_key PID...: no descriptor of theirs is open on a key file
none_holds_key() {
	for p in "$@"; do
		ls -l "/proc/$p/fd" 2>/dev/null | grep -q "$T/keys" && return 1
	done
	return 0
}
KIDS=$(children_of "$SUP_PID")
check "the supervisor's children (proxy, httpd, engine, egress) hold no key file open ($(echo $KIDS | wc -w) children)" \
	none_holds_key $KIDS
PP=$(child_pid proxy)
PUID=$(stat -c %u "/proc/$PP")
check "... and the proxy's user ($PUID) cannot read the key file" \
	sh -c "[ '$PUID' != 0 ] && ! setpriv --reuid='$PUID' --regid='$(stat -c %g "/proc/$PP")' --clear-groups cat '$KEY' >/dev/null 2>&1"

# --- a value sealed under the old key is refused once the rotation committed ----------
psql_q "insert into repo_connections (project_id, name, url, token_ciphertext, token_nonce)
        select id, 'stale', '$URL', decode('${OLD_TOKEN%:*}', 'hex'), decode('${OLD_TOKEN#*:}', 'hex')
        from projects where name = 'p1'" >"$T/stale.out" 2>&1
check "a token sealed under the retired key cannot be stored after the rotation ($(head -1 "$T/stale.out"))" \
	sh -c "grep -q 'sealed under a master key that has been rotated since' '$T/stale.out' && [ $(psql_q "select count(*) from repo_connections where name = 'stale'") = 0 ]"
printf '%s' "$TOKEN" | ctl repo add p1 again "$URL"
run repo test p1 again
check "a token sealed after the rotation is stored and opens" \
	[ $RC -eq 0 -a "$OUT" = "repo again: checked out commit $BASE" ]

# the API's path (httpd asks the supervisor to seal) uses the new key too
ctl user add alice && TA=$(new_token alice) && ctl member add p1 alice admin
P1=$(psql_q "select id from projects where name = 'p1'")
CODE=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 10 -X POST -H "Authorization: Bearer $TA" \
	-H 'Content-Type: application/json' -d "{\"name\":\"viaapi\",\"url\":\"$URL\",\"token\":\"$TOKEN\"}" \
	"http://127.0.0.1:$PORT/v1/projects/$P1/repos")
run repo test p1 viaapi
check "a token given over the API after the rotation is sealed under the new key and opens ($CODE)" \
	[ "$CODE" = 201 -a $RC -eq 0 -a "$OUT" = "repo viaapi: checked out commit $BASE" ]

# A store in flight when a rotation commits: a transaction here plays the
# rotation (key_state moved and held for 3 s, then committed) while
# agrippactl repo add and an API request, both sealed under the key of
# before, wait on it; both are refused and nothing is stored.
REAL_FP=$(db_fp)
PGPASSWORD=$(cat "$T/state/db.password") psql -X -q -h "$T/state/pgrun" -U agrippa agrippa \
	-c "begin; update key_state set fingerprint = decode(repeat('ab', 32), 'hex'); select pg_sleep(3); commit;" \
	>"$T/hold.out" 2>&1 &
HOLD=$!
wait_for 10 sh -c "[ \"\$(PGPASSWORD=\$(cat '$T/state/db.password') psql -X -A -t -h '$T/state/pgrun' -U agrippa agrippa -c \"select count(*) from pg_stat_activity where query like '%pg_sleep(3)%' and state = 'active' and pid <> pg_backend_pid()\")\" = 1 ]"
run_in "$TOKEN" repo add p1 inflight "$URL"
CODE=$(curl -s -D "$T/hdrs" -o "$T/body" -w '%{http_code}' --max-time 10 -X POST -H "Authorization: Bearer $TA" \
	-H 'Content-Type: application/json' -d "{\"name\":\"inflight2\",\"url\":\"$URL\",\"token\":\"$TOKEN\"}" \
	"http://127.0.0.1:$PORT/v1/projects/$P1/repos")
wait "$HOLD"
expect 1 "repo add: the master key was rotated while this ran; nothing changed: run the command again" \
	"agrippactl repo add sealed before a rotation that commits first: refused, clearly"
check "an API request sealed before a rotation that commits first: 503 key_rotated, Retry-After: 1 ($CODE: $(head -c 200 "$T/body"))" \
	sh -c "[ '$CODE' = 503 ] && grep -q '\"code\": *\"key_rotated\"' '$T/body' && grep -qi '^Retry-After: 1' '$T/hdrs'"
check "... neither is stored" \
	[ "$(psql_q "select count(*) from repo_connections where name in ('inflight', 'inflight2')")" = 0 ]
psql_q "update key_state set fingerprint = decode('$REAL_FP', 'hex')" >/dev/null

# --- a secret that does not open fails the rotation, nothing changed -------------------
printf '{"token":"broken_%s"}' "$RND" | ctl mcp add broken "$T/fake.json"
psql_q "update mcp_servers set credentials_ciphertext = decode('$(od -An -N40 -tx1 /dev/urandom | tr -d ' \n')', 'hex'),
        credentials_nonce = decode(substring('$(db_fp)' from 1 for 16) || '$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')', 'hex')
        where name = 'broken'" >/dev/null
BROKEN_ID=$(psql_q "select id from mcp_servers where name = 'broken'")
K1=$(hexof "$KEY")
S1=$(sealed)
A1=$(audit key.rotate)
run key rotate
expect 1 "key rotate: mcp server broken version 1 (mcp_servers id $BROKEN_ID): its secret does not open with the current master key; nothing changed" \
	"a row that does not open fails the rotation, naming it"
check "... nothing changed: the key, the key files, key_state, every sealed value, the audit log" \
	[ "$(hexof "$KEY")" = "$K1" -a "$(key_files)" = "master.key" -a "$(db_fp)" = "$(fp "$KEY")" \
	  -a "$(sealed)" = "$S1" -a "$(audit key.rotate)" = "$A1" ]
secrets_open "after the refused rotation"
psql_q "delete from mcp_servers where name = 'broken'" >/dev/null

# --- how long a rotation holds the supervisor, with 200 more tokens ------------------
i=0
while [ $i -lt 200 ]; do
	printf 'tok-%s-%d' "$RND" $i | "$AGRIPPACTL" -s "$CTL" repo add p1 "bulk$i" "$URL" >/dev/null 2>&1 || break
	i=$((i + 1))
done
t0=$(date +%s%N)
run key rotate
t1=$(date +%s%N)
expect 0 "rotated the master key: 203 repository tokens and 1 MCP credentials sealed again" \
	"key rotate of 204 secrets"
echo "# key rotate of 204 secrets (the command's round trip) took $(((t1 - t0) / 1000000)) ms"
secrets_open "after the larger rotation"
check "the healthz answers right after it" [ "$(healthz_code)" = 200 ]

# --- a rotation killed at each step ------------------------------------------------------
# Step 1: MASTER_KEY.new written; 2: every secret sealed again, before COMMIT;
# 3: after COMMIT; 4: the old key linked to MASTER_KEY.old; 5: MASTER_KEY.new
# renamed over MASTER_KEY.  1 and 2 roll back, 3 to 5 finish.
crash_at() {
	step=$1 # (wait_for has an n of its own)
	stop_daemon
	AGRIPPA_TEST_ROTATE_CRASH=$step
	export AGRIPPA_TEST_ROTATE_CRASH
	start_trusting_daemon key_rotate
	unset AGRIPPA_TEST_ROTATE_CRASH
	KB=$(hexof "$KEY")
	S_BEFORE=$(sealed)
	run key rotate
	wait "$SUP_PID" 2>/dev/null
	st=$?
	SUP_PID=""
	check "step $step: the supervisor was killed (status $st) and agrippactl heard nothing ($OUT)" \
		[ $st -eq 137 -a $RC -ne 0 ]
	wait_for 30 sh -c "[ ! -e '$T/state/pg/postmaster.pid' ] && [ -z \"\$(. tests/integration/lib.sh; AGRIPPAD='$AGRIPPAD'; our_processes)\" ]"
	check "step $step: the daemon's children and its postgres are gone" [ $? -eq 0 ]
	LEFT=$(key_files)
	NEW_HEX=""
	[ -f "$T/keys/master.key.new" ] && NEW_HEX=$(hexof "$T/keys/master.key.new")
	case $step in
	1 | 2 | 3) want="master.key master.key.new" ;;
	4) want="master.key master.key.new master.key.old" ;;
	5) want="master.key master.key.old" ;;
	esac
	check "step $step: the files left are: $want ($LEFT)" [ "$LEFT" = "$want" ]
	[ "$step" -eq 5 ] && NEW_HEX=$(hexof "$KEY")
	start_trusting_daemon key_rotate
	check "step $step: after the restart exactly one key file is left ($(key_files)), 0600" \
		[ "$(key_files)" = "master.key" -a "$(stat -c %a "$KEY")" = 600 ]
	if [ "$step" -le 2 ]; then
		check "step $step: rolled back: the old key kept, the sealed values as they were" \
			[ "$(hexof "$KEY")" = "$KB" -a "$(sealed)" = "$S_BEFORE" -a "$(db_fp)" = "$(fp "$KEY")" ]
		check "step $step: ... the log says so" grep -q "removed $T/keys/master.key.new (an interrupted rotation that did not commit" "$LOG"
	else
		check "step $step: finished: the new key in place, the database under it" \
			[ "$(hexof "$KEY")" = "$NEW_HEX" -a "$(hexof "$KEY")" != "$KB" -a "$(db_fp)" = "$(fp "$KEY")" -a "$(sealed)" != "$S_BEFORE" ]
	fi
	secrets_open "step $step, after the restart"
}
# The hook exists only in the test builds (SANITIZE=1, as make check builds).
if grep -q AGRIPPA_TEST_ROTATE_CRASH "$AGRIPPAD"; then
	for s in 1 2 3 4 5; do
		crash_at "$s"
	done
	check "the log of the finished ones says which file was kept" \
		grep -q "master.key.new is the key the database's secrets are under; renamed to $KEY" "$LOG"
else
	notok "$AGRIPPAD is a test build with the rotation's crash hook (build it with SANITIZE=1)"
fi

# --- no key file is the database's: the start refuses, changing nothing ------------------
stop_daemon
cp -p "$KEY" "$T/right.key"
head -c 32 /dev/urandom >"$KEY"
WRONG=$(hexof "$KEY")
if start_daemon; then
	notok "a key the database does not record is refused at start"
	stop_daemon
else
	wait "$SUP_PID" 2>/dev/null
	SUP_PID=""
	check "a key the database does not record is refused at start, naming the fingerprint it wants" \
		grep -q "the database's secrets are under the key with fingerprint $(fp "$T/right.key"), which is none of" "$LOG"
	check "... and the key file is left as it was" [ "$(hexof "$KEY")" = "$WRONG" ]
fi
wait_for 30 sh -c "[ ! -e '$T/state/pg/postmaster.pid' ]"
cp -p "$T/right.key" "$KEY"
rm -f "$T/right.key"
start_trusting_daemon key_rotate
secrets_open "with the right key back"
check "no sanitizer report" \
	[ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
check "neither the token nor the credential is in the log" \
	[ "$(grep -c -e "$TOKEN" -e "$SECRET" "$LOG")" = 0 ]
stop_daemon
finish key_rotate
