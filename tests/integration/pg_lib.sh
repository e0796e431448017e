# A throwaway PostgreSQL cluster for the SQL-level tests (test_schema.sh,
# test_engine_sql.sh), sourced after lib.sh's make_env; sq talks to database $SQDB
# (schematest unless set), which the test creates.
# Helpers: psql_db, sq, migrate, val, is, refused, held, accepted.
: "${SQDB:=schematest}"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
DBD="$T/db"
SQLDIR="$ROOT/tests/integration/sql"
as_db() { setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups "$@"; }
pg_ctl_db() { as_db "$PGBIN/pg_ctl" -D "$DBD/data" -l "$DBD/log" -w "$@"; }
trap 'pg_ctl_db stop -m immediate >/dev/null 2>&1; cleanup_env' EXIT

mkdir -p "$DBD/data" "$DBD/run"
chown -R _agrippadb:_agrippadb "$DBD"
chmod 0700 "$DBD/data" "$DBD/run"
# Trust on a Unix socket in a 0700 directory: only root and _agrippadb can
# reach it.  fsync off: this cluster is thrown away.
as_db "$PGBIN/initdb" -D "$DBD/data" -U agrippa --auth-local=trust --auth-host=reject \
	--no-locale -E UTF8 >/dev/null
pg_ctl_db -o "-c listen_addresses= -c unix_socket_directories=$DBD/run -c fsync=off \
	-c synchronous_commit=off -c max_connections=40" start >/dev/null
check "throwaway PostgreSQL started" [ $? -eq 0 ]

# psql_db DB ARGS...: quiet, unaligned, tuples only, stop at the first error.
psql_db() {
	db=$1
	shift
	"$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$DBD/run" -U agrippa -d "$db" "$@"
}
sq() { psql_db "$SQDB" "$@"; }
# migrate DESC: every migration applied to $SQDB in order with psql; a check.
migrate() {
	rc=0
	for f in $(ls "$ROOT"/sql/migrations/*.sql | sort); do
		sq -f "$f" >/dev/null || { rc=1; echo "# psql failed on $f"; }
	done
	check "$1" [ $rc -eq 0 ]
}
val() { sq -c "$1" 2>&1; }

# is DESC SQL EXPECTED: the query's output equals EXPECTED.
is() {
	got=$(val "$2")
	if [ "$got" = "$3" ]; then ok "$1"; else notok "$1: expected '$3', got '$got'"; fi
}

# refused DESC PATTERN SQL: the statement fails with an error matching
# PATTERN (the constraint's name where it has one, so that an unrelated
# error -- a typo in the test -- does not count as a pass).
refused() {
	if err=$(sq -c "$3" 2>&1 >/dev/null); then
		notok "$1: accepted"
	elif echo "$err" | grep -q -e "$2"; then
		ok "$1"
	else
		notok "$1: wrong error: $err"
	fi
}

# held KEY: some session holds advisory lock KEY (the barrier is up).
held() {
	[ "$(val "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted")" = 1 ]
}

accepted() {
	if err=$(sq -c "$2" 2>&1 >/dev/null); then ok "$1"; else notok "$1: $err"; fi
}
