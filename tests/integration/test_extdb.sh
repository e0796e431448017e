#!/bin/sh
# database: { url: ... } against a throwaway external PostgreSQL: /healthz
# is 503 while that server is down and 200 again once it is back, the
# daemon and its children ride it out, and the URL's password never reaches
# a log or a child.
. tests/integration/lib.sh
need_root extdb
make_env
trap 'pg_ctl_ext stop -m immediate >/dev/null 2>&1; cleanup_env' EXIT

. tests/integration/extpg_lib.sh
ext_pg_init
check "external PostgreSQL started" [ $? -eq 0 ]

DB_SPEC=$(ext_url 2)
export DB_SPEC
make_env_conf() {
	sed -i "s|^database: .*|database: $DB_SPEC|" "$CONF"
}
make_env_conf
if ! start_daemon; then
	notok "daemon starts on the external database"
	cat "$LOG"
	finish extdb
	exit 1
fi
ok "daemon starts on the external database"
check "no embedded cluster was created" [ ! -e "$T/state/pg" ]
# the pool's second connection may still be opening when the daemon
# first answers (/healthz needs one): its status is asked until it is up
pool_up() { "$AGRIPPACTL" -s "$CTL" status | grep -q '^database: up (external, 2 connections)'; }
check "status: database up, external" wait_for 10 pool_up
n=$(PGPASSWORD=$EXTPW "$PGBIN/psql" -X -A -t -h "$EXT/run" -U extuser postgres -c 'select count(*) from schema_migrations')
check "migrations applied to the external database" [ "$n" -ge 1 ]

E=$(child_pid engine)
H=$(child_pid httpd)
pg_ctl_ext stop -m fast >/dev/null
wait_for 10 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 503 ]"
check "/healthz is 503 while the database is down" [ $? -eq 0 ]
check "... and says the database is down" sh -c "curl -s http://127.0.0.1:$PORT/healthz | grep -q '\"database\":\"down\"'"
st=$("$AGRIPPACTL" -s "$CTL" status)
check "status: database down" sh -c "echo '$st' | grep -q '^database: down'"
check "the children ride out the outage" [ "$(child_pid engine) $(child_pid httpd)" = "$E $H" ]
pg_ctl_ext -o "$PGOPTS" start >/dev/null
wait_for 20 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/healthz)\" = 200 ]"
check "/healthz is 200 again once the database is back" [ $? -eq 0 ]

PWHEX=$(printf '%s' "$EXTPW" | od -An -v -tx1 | tr -d ' \n')
for role in engine httpd proxy; do
	"$TOOLS/memgrep" "$(child_pid $role)" "$PWHEX" >/dev/null
	check "$role never holds the database URL's password" [ $? -eq 1 ]
done
stop_daemon
check "SIGTERM: exit status 0" [ "$DAEMON_STATUS" -eq 0 ]
check "the URL's password never appears in the log" sh -c "! grep -q '$EXTPW' '$LOG'"
check "no process of ours is left" [ -z "$(our_processes)" ]
[ "$T_FAIL" -eq 0 ] || { echo "--- daemon log"; tail -60 "$LOG"; }
finish extdb
