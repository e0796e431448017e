#!/bin/sh
# Make the upgrade test's fixture (tests/integration/test_upgrade.sh) from a
# release: run that release's daemon, give it users, a project, resources
# with sealed secrets, a template and a finished run with its events and an
# artifact, a browser session; then dump its database.  Run from the
# release's tree, as root, once per release:
#   cd RELEASE-TREE && make all tests &&
#   sh /path/to/tests/upgrade/mkfixture.sh /path/to/tests/upgrade/VERSION
# writes VERSION.sql (pg_dump, plain, no owners), VERSION.key (the fixture's
# master key, a test key of no value) and VERSION.env (the fixture's
# identifiers and the API token's plain text, for the test).
set -u
OUT=${1:?usage: mkfixture.sh OUT-PREFIX}
BUILD=build
ROOT=$(pwd)
. tests/integration/lib.sh
make_env
trap cleanup_env EXIT
mkdir -p "$T/keys" "$T/repos" "$T/tmpl"
chmod 0700 "$T/keys"
chmod 0755 "$T/repos"
cat >>"$CONF" <<EOC
engine: { concurrency: 2, lease: 5, sweep: 1 }
EOC
start_daemon || { cat "$LOG"; exit 1; }
"$TOOLS/mkrepo" "$T/repos/clean" >/dev/null
chmod -R a+rX "$T/repos"
cat >"$T/tmpl/hello.yaml" <<'EOT'
name: hello
version: 1
params:
  repo: { type: repoRef, required: true }
  who: { type: string, default: world }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: one
    steps:
      - id: greet
        kind: command
        run: 'echo "hello ${params.who}"; mkdir -p .agrippa/artifacts; echo "greeting for ${params.who}" > .agrippa/artifacts/note.md'
        produces: [ { key: note, kind: md, required: true } ]
EOT
printf '# tidy\nkeep it tidy\n' >"$T/tidy.md"
printf '{"transport":"stdio","command":["/bin/cat"],"env":{"TOKEN":"${credentials.token}"}}' >"$T/gh.json"
chmod 0644 "$T/tmpl/hello.yaml" "$T/tidy.md" "$T/gh.json"
ctl user add alice && ctl user add bob && ctl project add p1 && ctl member add p1 alice admin &&
	ctl member add p1 bob viewer &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null &&
	printf 'ghp_fixturetoken0123456789abcdef\n' | ctl repo add p1 remote https://git.invalid/o/r.git &&
	ctl skill add tidy "$T/tidy.md" && ctl grant add p1 skill tidy &&
	printf '{"token": "mcp-fixture-credential-0123"}' | ctl mcp add gh "$T/gh.json" &&
	ctl grant add p1 mcp gh && ctl template load "$T/tmpl/hello.yaml" || exit 1
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
RUN=$(curl -s -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
	--data-binary '{"template": "hello", "params": {"repo": "clean", "who": "upgrade"}}' \
	"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
succeeded() { [ "$(psql_q "select status from runs where id = '$RUN'")" = succeeded ]; }
wait_for 60 succeeded ||
	{ echo "the run did not succeed"; cat "$LOG"; exit 1; }
curl -s -o /dev/null -H 'Content-Type: application/json' --data-binary "{\"token\": \"$TA\"}" \
	"http://127.0.0.1:$PORT/v1/session"
stop_daemon
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups \
	"$PGBIN/pg_ctl" -D "$T/state/pg" -l "$T/state/pgrun/fixture.log" -w -o "-c listen_addresses= -c unix_socket_directories=$T/state/pgrun" start >/dev/null ||
	{ cat "$T/state/pgrun/fixture.log"; exit 1; }
PGPASSWORD=$(cat "$T/state/db.password") pg_dump --no-owner --no-privileges -h "$T/state/pgrun" \
	-U agrippa agrippa >"$OUT.sql"
setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups "$PGBIN/pg_ctl" -D "$T/state/pg" -w stop >/dev/null
cp "$T/keys/master.key" "$OUT.key"
chmod 0644 "$OUT.key" "$OUT.sql"
{
	echo "FIX_RUN=$RUN"
	echo "FIX_PROJECT=$P1"
	echo "FIX_TOKEN=$TA"
} >"$OUT.env"
echo "fixture: $OUT.sql ($(wc -c <"$OUT.sql") bytes), run $RUN"
