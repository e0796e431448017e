# Helpers of the agrippactl admin tests (sourced after lib.sh).  A test's
# run() sets OUT (agrippactl's stdout and stderr) and RC; then:
#   has PATTERN               OUT matches
#   expect RC PATTERN DESC    exit status and output, as one check
#   count TABLE, audit ACTION row counts in the daemon's database
#   is_json                   OUT parses as JSON
has() { printf '%s\n' "$OUT" | grep -q -e "$1"; }
expect() {
	if [ "$RC" -eq "$1" ] && has "$2"; then
		ok "$3"
	else
		notok "$3 (exit $RC: $OUT)"
	fi
}
count() { psql_q "select count(*) from $1"; }
audit() {
	psql_q "select count(*) from audit_log where action = '$1' and actor_kind = 'operator'
	        and remote_addr = 'control socket' and actor_user_id is null"
}
is_json() { printf '%s\n' "$OUT" | python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null; }
