#!/bin/sh
# Upgrades (agrippad(8), UPGRADES): a database made by the released
# migrations and used by that release (tests/upgrade/0.1.0.*, made by
# tests/upgrade/mkfixture.sh from the release's tree: users, a project,
# resources with sealed secrets, a template, a finished run with its
# events and artifact, a browser session) is migrated by this binary with
# every row of every table kept, column for column; the run's events and
# artifact read back over the API with the release's token, and the sealed
# secrets open with the release's key.  A database that a newer release
# migrated is refused at start, with a message saying so, before anything
# changes in it.
. tests/integration/lib.sh
need_root upgrade
make_env
trap 'pg_ctl_ext stop -m immediate >/dev/null 2>&1; cleanup_env' EXIT
. tests/integration/extpg_lib.sh
FIX=$ROOT/tests/upgrade/0.1.0
. "$FIX.env"
ext_pg_init
check "external PostgreSQL started" [ $? -eq 0 ]
epsql() { PGPASSWORD=$EXTPW "$PGBIN/psql" -X -A -t -q -v ON_ERROR_STOP=1 -h "$EXT/run" -U extuser postgres "$@"; }
epsql -f "$FIX.sql" >/dev/null 2>"$T/load.err"
check "the release's database loads ($(head -c 200 "$T/load.err"))" [ $? -eq 0 ]
check "... at the release's eleven migrations" [ "$(epsql -c 'select max(version) from schema_migrations')" = 11 ]

# every table's rows, over the columns it had then: "table md5" lines
# (engine_heartbeats aside: the running engine rewrites its row)
SUMS="SELECT format('SELECT %L || '' '' || md5(coalesce(string_agg(x::text, E''\\n'' ORDER BY x::text), '''')) FROM (SELECT %s FROM public.%I) x;',
	c.relname, string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum), c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = 'public' AND c.relkind = 'r'
	AND c.relname NOT IN ('schema_migrations', 'engine_heartbeats')
GROUP BY c.relname ORDER BY c.relname"
epsql -c "$SUMS" >"$T/sums.sql"
epsql -f "$T/sums.sql" >"$T/before.sums"
ROWS=$(epsql -c "select sum((xpath('/row/c/text()', query_to_xml('select count(*) as c from public.' || quote_ident(relname), false, true, '')))[1]::text::int) from pg_class c join pg_namespace n on n.oid = c.relnamespace where nspname = 'public' and relkind = 'r'")
check "the fixture has its tables and rows ($(wc -l <"$T/before.sums") tables, $ROWS rows)" \
	[ "$(wc -l <"$T/before.sums")" -ge 20 -a "$ROWS" -ge 50 ]

mkdir -p "$T/keys"
chmod 0700 "$T/keys"
cp "$FIX.key" "$T/keys/master.key"
chmod 0600 "$T/keys/master.key"
sed -i "s|^database: .*|database: $(ext_url 2)|" "$CONF"
start_daemon_or_finish upgrade
check "the current binary migrated it to its last migration" \
	[ "$(epsql -c 'select max(version) from schema_migrations')" = "$(ls "$ROOT"/sql/migrations/*.sql | wc -l)" ]
check "... and said so in its log" grep -q "applied migration 0012_mcp" "$LOG"
epsql -f "$T/sums.sql" >"$T/after.sums"
check "every row of every table is kept, column for column" cmp -s "$T/before.sums" "$T/after.sums"
[ -s "$T/after.sums" ] && ! cmp -s "$T/before.sums" "$T/after.sums" && diff "$T/before.sums" "$T/after.sums" | sed 's/^/# /'
# /metrics' sums (0016) begin with what the release's tables held
MS=$(epsql -c "select (select coalesce(sum(n), 0) from metrics_step_sums) + (select count(*) from metrics_step_deltas)")
FS=$(epsql -c "select count(*) from run_steps where finished_at is not null")
MM=$(epsql -c "select (select coalesce(sum(calls), 0) from metrics_model_sums) + (select count(*) from metrics_model_deltas)")
FM=$(epsql -c "select count(*) from token_usage")
check "the metrics' sums begin with the release's finished steps ($MS of $FS) and model calls ($MM of $FM)" \
	[ "$FS" -gt 0 -a "$MS" = "$FS" -a "$MM" = "$FM" ]

api() { curl -s --max-time 10 -H "Authorization: Bearer $FIX_TOKEN" "http://127.0.0.1:$PORT$1"; }
check "the release's API token still authenticates" \
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $FIX_TOKEN" "http://127.0.0.1:$PORT/v1/runs/$FIX_RUN")" = 200 ]
check "the release's run reads back, succeeded" sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"status\"] == \"succeeded\", d'" "$(api "/v1/runs/$FIX_RUN")"
check "... with its events, the command's output among them" sh -c "printf '%s' \"\$0\" | python3 -c '
import json,sys
d = json.load(sys.stdin)
ev = d[\"events\"] if isinstance(d, dict) else d
types = [e[\"type\"] for e in ev]
assert \"run.succeeded\" in types or \"run.finished\" in types or \"step.finished\" in types, types
assert any(\"hello upgrade\" in json.dumps(e) for e in ev), types
'" "$(api "/v1/runs/$FIX_RUN/events")"
ART=$(api "/v1/runs/$FIX_RUN/artifacts" | python3 -c 'import json,sys; d=json.load(sys.stdin); a=d["artifacts"] if isinstance(d, dict) else d; print(a[0]["id"])')
check "... and its artifact's content" [ "$(api "/v1/artifacts/$ART")" = "greeting for upgrade" ]
"$AGRIPPACTL" -s "$CTL" mcp test gh >"$T/mcptest.out" 2>&1
check "the release's sealed MCP credentials open with its key" sh -c "! grep -q 'do not open' '$T/mcptest.out' && grep -q 'mcp test gh' '$T/mcptest.out'"
stop_daemon

# ---- a database a newer release migrated ---------------------------------------------
epsql -c "insert into schema_migrations (version, name) values (9999, '9999_future')"
"$PGBIN/pg_dump" --version >/dev/null
# (pg_dump's \restrict lines carry a key of their own each time)
dump() { PGPASSWORD=$EXTPW "$PGBIN/pg_dump" -h "$EXT/run" -U extuser postgres | grep -v '^\\\(un\)\{0,1\}restrict '; }
dump >"$T/newer.before"
: >"$LOG"
if start_daemon; then
	notok "a database a newer release migrated is refused at start"
	stop_daemon
else
	wait "$SUP_PID" 2>/dev/null
	SUP_PID=""
	ok "a database a newer release migrated is refused at start"
fi
check "... saying why and what to do ($(grep -o 'migration 9999_future[^;]*' "$LOG" | head -1 | cut -c1-100))" \
	grep -q "the database has migration 9999_future, which this agrippad .* does not know: a newer release migrated it" "$LOG"
dump >"$T/newer.after"
check "... and nothing in the database changed" cmp -s "$T/newer.before" "$T/newer.after"
cmp -s "$T/newer.before" "$T/newer.after" || diff "$T/newer.before" "$T/newer.after" | head -20 | sed 's/^/# /'
finish upgrade
