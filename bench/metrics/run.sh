#!/bin/sh
# bench/metrics/run.sh [BUILD]: GET /metrics with 10,000 runs of 100
# templates in the database, against the real daemon (BUILD, default build:
# the hardened tree) on the embedded database.
#
# The runs are inserted with SQL directly, as they would be after months of
# use: 100 templates, NRUNS (10,000) finished runs spread over them (70%
# succeeded, 20% failed, 10% cancelled), 3 step attempts each with durations
# from a second to two hours, one model call each over 2 providers and 3
# models, 20 events each (200,000 rows of run_events) and a budget.exceeded
# event in one run of 50.  The scrapes begin once the engine's sweep has
# folded the steps and model calls into their sums, as months of use would
# have it.
#
#   1. scrape time: curl's total time of GET /metrics on metrics_listen,
#      median of BENCH_N (20) scrapes: target < 50 ms.  Beside it, the peer:
#      the same statement (sql/ops/httpd_metrics.sql) run by one psql
#      session on the same database, \timing's figure, median of as many:
#      the ratio is what the scrape adds to the query (IPC to the
#      supervisor, the pool, httpd's formatting and HTTP);
#   2. scrape size: the body's bytes: target < 1 MiB.
#
# The table: each figure, the peer's, the ratio and PASS/FAIL against the
# target; then every sample.  Tunables (environment): BENCH_N, NRUNS, KEEP
# (keep the directory).  Needs root, curl, psql (make deps).  Alone:
#   make && sh bench/metrics/run.sh build
# shellcheck disable=SC2046,SC2086 # set -- $(...): split on purpose, into figures
set -eu
BUILD=${1:-${BUILD:-build}}
ROOT=$(pwd)
export BUILD ROOT
N=${BENCH_N:-20}
NRUNS=${NRUNS:-10000}
# shellcheck disable=SC2034 # die (bench/lib/bigrepo.sh) names it
BENCH=bench/metrics
. "$ROOT/bench/lib/bigrepo.sh"
bench_preflight curl psql
for v in "$N" "$NRUNS"; do
	case "$v" in '' | *[!0-9]*) die "BENCH_N and NRUNS are counts" ;; esac
done
[ "$N" -ge 1 ] && [ "$NRUNS" -ge 100 ] || die "BENCH_N is at least 1, NRUNS at least 100"

sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
trap cleanup_env EXIT
trap 'exit 1' INT TERM HUP
MPORT=$((PORT + 1))
cat >>"$CONF" <<EOC
metrics_listen: "127.0.0.1:$MPORT"
EOC
start_daemon || {
	cat "$LOG"
	die "daemon did not start"
}

# --- set-up: one template loaded, 99 more beside it, the runs ---------------------------
mkdir -p "$T/tmpl" "$T/out"
# shellcheck disable=SC2016 # ${params.repo} is the template's
printf '%s\n' 'name: t-000' 'version: 1' 'params:' '  repo: { type: repoRef, required: true }' \
	'workspace: { repo: "${params.repo}", access: readWrite }' 'phases:' '  - name: one' '    steps:' \
	'      - { id: build, kind: command, run: "make" }' >"$T/tmpl/t.yaml"
ctl template load "$T/tmpl/t.yaml" || die "template"
ctl project add p1 && ctl user add alice && ctl member add p1 alice admin || die "project, user"
psql_q "
insert into templates (name, version, source, compiled, sha256)
	select 't-' || lpad(g::text, 3, '0'), 1, t.source, t.compiled, t.sha256
	from templates t, generate_series(1, 99) g where t.name = 't-000';
insert into runs (project_id, template_id, template_name, template_version, status, submitted_by,
		created_at, started_at)
	select p.id, t.id, t.name, 1, 'running', u.id, now() - interval '3 hours', now() - interval '3 hours'
	from generate_series(1, $NRUNS) g
	join (select id, name, row_number() over (order by name) - 1 as i from templates) t
		on t.i = g % 100,
	(select id from projects where name = 'p1') p, (select id from users where name = 'alice') u;
insert into run_steps (run_id, phase_name, step_id, attempt, status, started_at, finished_at, exit_status)
	select r.id, 'one', 's' || k, 1, case when k = 3 and r.n % 5 = 0 then 'failed' else 'succeeded' end,
		r.started_at, r.started_at + ((r.n * 37 + k * 1000) % 7200 + 1) * interval '1 second', 0
	from (select id, started_at, row_number() over (order by id) as n from runs) r, generate_series(1, 3) k;
insert into token_usage (run_id, step_id, attempt, provider, model, input_tokens, output_tokens,
		cache_read_tokens, cache_write_tokens, cost_usd_micros)
	select r.id, 's1', 1, 'prov-' || (r.n % 2), 'model-' || (r.n % 3), 1000 + r.n, 200, 50, 10, 1234
	from (select id, row_number() over (order by id) as n from runs) r;
insert into run_events (run_id, seq, type, payload)
	select r.id, k, case when k = 20 and r.n % 50 = 0 then 'budget.exceeded' else 'step.output' end,
		jsonb_build_object('step_id', 's1', 'attempt', 1, 'stream', 'stdout', 'text', 'line ' || k)
	from (select id, row_number() over (order by id) as n from runs) r, generate_series(1, 20) k;
update runs set next_event_seq = 21;
update runs r set status = s.status, finished_at = r.started_at + interval '2 hours',
		error = case when s.status = 'succeeded' then null else 'bench' end
	from (select id, case when n % 10 < 7 then 'succeeded' when n % 10 < 9 then 'failed'
		else 'cancelled' end as status
		from (select id, row_number() over (order by id) as n from runs) x) s
	where s.id = r.id;
analyze;" >"$T/setup.out" 2>&1 || die "inserting the runs: $(cat "$T/setup.out")"
NR=$(psql_q "select count(*) from runs")
NT=$(psql_q "select count(distinct template_name) from runs")
NE=$(psql_q "select count(*) from run_events")
[ "$NR" = "$NRUNS" ] && [ "$NT" = 100 ] || die "the database holds $NR runs of $NT templates"
# The steps and model calls just inserted are deltas until the engine's
# sweep (every engine.sweep seconds) folds them into the sums
# (0016_metrics_sums.sql); months of use would have been folded long ago.
i=0
while [ "$(psql_q "select (select count(*) from metrics_step_deltas) + (select count(*) from metrics_model_deltas)")" != 0 ]; do
	i=$((i + 1))
	[ $i -le 600 ] || die "the sweep did not fold the metrics' deltas in 60 s"
	sleep 0.1
done

echo "bench/metrics: $(nproc) cores, $BUILD ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), $NR runs," \
	"$NT templates, $NE events, $N samples; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- the samples: the scrapes, then the peer's queries ------------------------------------
URL="http://127.0.0.1:$MPORT/metrics"
curl -s -o /dev/null "$URL" # the pool's connections warm
SQL=$(sed -e '/^--/d' sql/ops/httpd_metrics.sql)
: >"$T/out/scrape"
: >"$T/out/psql"
i=0
while [ "$i" -lt "$N" ]; do
	r=$(curl -s -o "$T/out/body" -w '%{http_code} %{time_total} %{size_download}' --max-time 10 "$URL")
	set -- $r
	if [ "$1" = 200 ]; then
		echo "$(awk -v t="$2" 'BEGIN { printf "%.3f", t * 1000 }') $3" >>"$T/out/scrape"
	else
		echo "fail $1" >>"$T/out/scrape"
	fi
	i=$((i + 1))
done
# one psql session, the statement N times, \timing's ms each
{
	printf '%s\n' '\timing on' # dash's echo would read \t
	i=0
	while [ "$i" -lt "$N" ]; do
		printf '%s;\n' "$SQL"
		i=$((i + 1))
	done
} >"$T/peer.sql"
PGPASSWORD=$(cat "$T/state/db.password") psql -X -A -t -h "$T/state/pgrun" -U agrippa agrippa \
	-f "$T/peer.sql" >"$T/out/psql.raw" 2>&1 || die "the peer's queries failed: $(tail -n 5 "$T/out/psql.raw")"
awk '/^Time: / { print $2 }' "$T/out/psql.raw" >"$T/out/psql"
alive || died "the scrapes"
psql_q "explain (analyze, buffers) $SQL" >"$T/out/explain" 2>&1 || true

set -- $(bench_stats 1 "$T/out/scrape")
S_MED=$1 S_N=$4
set -- $(bench_stats 2 "$T/out/scrape")
SZ=$1
set -- $(bench_stats 1 "$T/out/psql")
P_MED=$1 P_N=$4
[ "$S_N" = "$N" ] || die "only $S_N of $N scrapes answered 200"
[ "$P_N" = "$N" ] || die "only $P_N of $N peer queries were timed"
LINES=$(grep -vc '^#' "$T/out/body")
if out=$(command -v promtool >/dev/null 2>&1 && promtool check metrics <"$T/out/body" 2>&1); then
	LINT="promtool check metrics: clean"
else
	LINT="promtool check metrics: ${out:-not installed}"
fi

verdict() { awk -v a="$1" -v l="$2" 'BEGIN { print (a < l) ? "PASS" : "FAIL" }'; }
RATIO=$(awk -v a="$S_MED" -v b="$P_MED" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
echo
printf '%-34s %12s %14s %8s %10s %s\n' figure agrippa "peer (psql)" ratio target verdict
printf '%-34s %12s %14s %8s %10s %s\n' "scrape time, median (ms)" "$S_MED" "$P_MED" "$RATIO" "< 50" \
	"$(verdict "$S_MED" 50)"
printf '%-34s %12s %14s %8s %10s %s\n' "scrape size (bytes)" "$SZ" - - "< 1048576" \
	"$(verdict "$SZ" 1048576)"
echo
echo "samples: $LINES samples in the body; $LINT"
echo "the statement's plan: $(awk '/Execution Time/ { print $3, $4 }' "$T/out/explain") executing (explain analyze)"
echo "scrape ms: $(cut -d' ' -f1 "$T/out/scrape" | tr '\n' ' ')"
echo "psql ms:   $(tr '\n' ' ' <"$T/out/psql")"
set -- $(bench_stats 1 "$T/out/scrape")
echo "scrape min $2 max $3; psql min $(bench_stats 1 "$T/out/psql" | cut -d' ' -f2) max $(bench_stats 1 "$T/out/psql" | cut -d' ' -f3)"
stop_daemon
[ "$(verdict "$S_MED" 50)" = PASS ] && [ "$(verdict "$SZ" 1048576)" = PASS ]
