#!/bin/sh
# agrippactl backup DIR, and the restore agrippad(8) describes (BACKUPS):
# a daemon with a finished run (its events, an artifact too large for the
# database, so in the artifact store), a repository token and MCP
# credentials sealed under its master key is backed up; the backup holds
# the database (pg_dump's custom format), the artifacts, the configuration
# and no master key; it is restored, step by step as the manual says, on a
# fresh state directory, and the run's events, its artifact and the
# sealed secrets (with the operator's copy of the key) read back.  Bad
# requests are refused with nothing written.
. tests/integration/lib.sh
need_root backup
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 2, lease: 5, sweep: 1 }
EOC
start_daemon_or_finish backup
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
"$TOOLS/mkrepo" "$T/repos/clean" >/dev/null
chmod -R a+rX "$T/repos"
cat >"$T/tmpl/big.yaml" <<'EOT'
name: big
version: 1
params:
  repo: { type: repoRef, required: true }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: one
    steps:
      - id: make
        kind: command
        run: 'echo "making the report"; mkdir -p .agrippa/artifacts; i=0; while [ $i -lt 6000 ]; do echo "line $i of the report, long enough to weigh"; i=$((i + 1)); done > .agrippa/artifacts/report.txt'
        produces: [ { key: report, kind: text, required: true } ]
EOT
printf '{"transport":"stdio","command":["/bin/cat"],"env":{"TOKEN":"${credentials.token}"}}' >"$T/gh.json"
chmod 0644 "$T/tmpl/big.yaml" "$T/gh.json"
ctl user add alice && ctl project add p1 && ctl member add p1 alice admin &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null &&
	printf 'ghp_backuptoken0123456789abcdef\n' | ctl repo add p1 remote https://git.invalid/o/r.git &&
	printf '{"token": "mcp-backup-credential-0123"}' | ctl mcp add gh "$T/gh.json" &&
	ctl template load "$T/tmpl/big.yaml"
SETUP=$?
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: a user, a token, a repository with a sealed token, an MCP server with credentials" [ "$SETUP" = 0 -a -n "$TA" ]
RUN=$(curl -s -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
	--data-binary '{"template": "big", "params": {"repo": "clean"}}' \
	"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
succeeded() { [ "$(psql_q "select status from runs where id = '$RUN'")" = succeeded ]; }
wait_for 60 succeeded
check "a run succeeded ($RUN)" succeeded
ART=$(psql_q "select id from artifacts where run_id = '$RUN' and key = 'report'")
check "its artifact is in the store, not the database" \
	[ "$(psql_q "select inline is null from artifacts where id = '$ART'")" = t ]
api() { curl -s --max-time 10 -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT$1"; }
api "/v1/artifacts/$ART" >"$T/art.before"
check "... and reads over the API ($(wc -c <"$T/art.before") bytes)" [ "$(wc -c <"$T/art.before")" -gt 262144 ]

# ---- bad requests ---------------------------------------------------------------------
mkdir -p "$T/exists"
"$AGRIPPACTL" -s "$CTL" backup "$T/exists" >"$T/out" 2>&1
check "a backup into an existing directory is refused ($(cat "$T/out"))" \
	sh -c "grep -q 'a backup goes to a new directory' '$T/out' && [ -z \"\$(ls -A '$T/exists')\" ]"
"$AGRIPPACTL" -s "$CTL" backup "$T/state/bk" >"$T/out" 2>&1
check "... and one inside the state directory ($(cat "$T/out"))" \
	sh -c "grep -q 'must not be inside the state directory' '$T/out' && [ ! -e '$T/state/bk' ]"

# ---- the backup -----------------------------------------------------------------------
(cd "$T" && "$AGRIPPACTL" -s "$CTL" backup bk) >"$T/out" 2>&1
check "agrippactl backup (a relative DIR) succeeds: $(cat "$T/out" | head -c 200)" \
	grep -q "the database (.* bytes), the artifacts and the configuration are in $T/bk" "$T/out"
check "the backup directory is root's, 0700" [ "$(stat -c '%U %a' "$T/bk")" = "root 700" ]
check "it holds the dump, the artifacts, the configuration and a manifest" \
	[ -s "$T/bk/agrippa.dump" -a -d "$T/bk/artifacts" -a -s "$T/bk/agrippad.yaml" -a -s "$T/bk/MANIFEST" ]
check "the dump is pg_dump's custom format (pg_restore lists it)" \
	sh -c "pg_restore --list '$T/bk/agrippa.dump' | grep -q 'TABLE DATA public runs'"
check "the artifact's file is in the backup's store" \
	[ -n "$(find "$T/bk/artifacts" -type f -size +256k)" ]
KHEX=$(od -An -tx1 "$T/keys/master.key" | tr -d ' \n')
check "the master key is not in the backup" sh -c "
	for f in \$(find '$T/bk' -type f); do od -An -tx1 \"\$f\" | tr -d ' \n' | grep -q '$KHEX' && exit 1; done; exit 0"
check "the manifest says so" grep -q "not here: the master key" "$T/bk/MANIFEST"
check "the daemon is healthy after it" [ "$(healthz_code)" = 200 ]
cp "$T/keys/master.key" "$T/key.copy" # the operator's copy, kept apart

# ---- the restore, as agrippad(8) says, on a fresh state directory -------------------------
stop_daemon
NEW="$T/new"
mkdir -p "$NEW/keys"
chmod 0700 "$NEW/keys"
sed -e "s|^state_dir: .*|state_dir: $NEW/state|" -e "s|^master_key: .*|master_key: $NEW/keys/master.key|" \
	"$T/bk/agrippad.yaml" >"$CONF"
cp "$T/key.copy" "$NEW/keys/master.key"
chmod 0600 "$NEW/keys/master.key"
# 1. start once, for an empty database; stop
: >"$LOG"
start_daemon
check "the daemon starts on the fresh state directory" [ "$(healthz_code)" = 200 ]
stop_daemon
# 2. the database from the dump, with the embedded server started alone
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_db() { setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups "$@"; }
as_db "$PGBIN/pg_ctl" -D "$NEW/state/pg" -l "$NEW/state/pgrun/restore.log" -w \
	-o "-c listen_addresses= -c unix_socket_directories=$NEW/state/pgrun" start >/dev/null
PGPASSWORD=$(cat "$NEW/state/db.password") "$PGBIN/pg_restore" --clean --if-exists --no-owner \
	--exit-on-error -h "$NEW/state/pgrun" -U agrippa -d agrippa "$T/bk/agrippa.dump" >"$T/restore.out" 2>&1
RC=$?
as_db "$PGBIN/pg_ctl" -D "$NEW/state/pg" -w stop >/dev/null
check "pg_restore takes the dump ($(head -c 300 "$T/restore.out"))" [ $RC -eq 0 ]
# 3. the artifacts
cp -Rp "$T/bk/artifacts/." "$NEW/state/artifacts/"
check "the artifacts are back, root's as the store is" \
	[ "$(find "$NEW/state/artifacts" -type f ! -user root | wc -l)" = 0 -a -n "$(find "$NEW/state/artifacts" -type f -size +256k)" ]
# 4. start
: >"$LOG"
start_daemon_or_finish backup
check "the run reads back, succeeded" \
	sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"status\"] == \"succeeded\"'" "$(api "/v1/runs/$RUN")"
check "... with its events, the command's output among them" \
	sh -c "printf '%s' \"\$0\" | grep -q 'making the report'" "$(api "/v1/runs/$RUN/events")"
api "/v1/artifacts/$ART" >"$T/art.after"
check "... and its artifact, byte for byte" cmp -s "$T/art.before" "$T/art.after"
"$AGRIPPACTL" -s "$CTL" mcp test gh >"$T/mcptest.out" 2>&1
check "the sealed MCP credentials open with the operator's copy of the key" \
	sh -c "! grep -q 'do not open' '$T/mcptest.out' && grep -q 'mcp test gh' '$T/mcptest.out'"
check "the backed-up API token still authenticates (its hash was restored)" \
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TA" "http://127.0.0.1:$PORT/v1/projects")" = 200 ]
finish backup
