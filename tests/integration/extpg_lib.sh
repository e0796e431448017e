# An external PostgreSQL for the tests of database: { url: ... }, sourced
# after lib.sh's make_env: a throwaway cluster under $T/ext owned by
# _agrippadb, password authentication only (user extuser, password $EXTPW),
# on a Unix socket in $EXT/run.  ext_pg_init [OPTS] makes and starts it
# (OPTS: more postgres -c settings); pg_ctl_ext drives it (the caller's
# EXIT trap stops it with "pg_ctl_ext stop -m immediate").
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
EXT="$T/ext"
EXTPW="ext-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
PGOPTS="-c listen_addresses= -c unix_socket_directories=$EXT/run"
as_db() { setpriv --reuid=_agrippadb --regid=_agrippadb --clear-groups "$@"; }
pg_ctl_ext() { as_db "$PGBIN/pg_ctl" -D "$EXT/data" -l "$EXT/log" -w "$@"; }
ext_pg_init() {
	mkdir -p "$EXT/data" "$EXT/run"
	chown -R _agrippadb:_agrippadb "$EXT"
	chmod 0700 "$EXT/data" "$EXT/run"
	echo "$EXTPW" >"$EXT/pw"
	chown _agrippadb "$EXT/pw"
	as_db "$PGBIN/initdb" -D "$EXT/data" -U extuser --pwfile="$EXT/pw" \
		--auth-local=scram-sha-256 --auth-host=reject --no-locale -E UTF8 >/dev/null
	rm -f "$EXT/pw"
	PGOPTS="$PGOPTS $*"
	pg_ctl_ext -o "$PGOPTS" start >/dev/null
}
# ext_url POOL: the daemon's database setting for it
ext_url() { echo "{ url: \"postgresql://extuser:$EXTPW@/postgres?host=$EXT/run\", pool: $1 }"; }
