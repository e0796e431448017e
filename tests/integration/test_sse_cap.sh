#!/bin/sh
# The cap on what all event streams hold unwritten (agrippad.conf(5)
# api.sse_queued_max): 2,000 clients that open a run's stream and never
# read, on a run of 8 MiB of events, make httpd hold about the cap, not
# the 1 MiB each that a stream may hold alone (2 GiB): once the cap is
# reached a client gets nothing more while it has gone longest without
# reading (and one that has gone longer than the writer is closed);
# meanwhile clients that read get every event to the end, one that
# stopped reading for a while (and holds far more than any idle one) too.  The same with the cap at its top
# shows what it saves.  httpd's growth is read from its VmRSS, with the sanitizer's
# quarantine of freed memory kept small so that what is freed shows.
. tests/integration/lib.sh
need_root sse_cap
ulimit -n 8192 2>/dev/null
SSE="python3 $ROOT/tests/tools/sse_clients.py"
IDLE=2000
trap cleanup_env EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=4"

# run_case CAP: a daemon with api.sse_queued_max CAP, its run, IDLE idle
# clients, a reader that stops for 4 s after its first event (httpd holds
# up to its 1 MiB for it meanwhile) and, during its pause, three readers;
# sets RSS_KB (httpd's, at the end), READERS (how many read the whole
# stream), SLOW (whether the one that paused did) and IDLE_OUT
# whole FILE: the reader whose output FILE is read all 514 events and the end
whole() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["ended"] and len(d["ids"]) == 514 else 1)' "$1"
}

# how many streams httpd closed for the cap so far
closed_for_cap() {
	grep -o 'event streams: [0-9]* clients' "$LOG" | awk '{ s += $3 } END { print s + 0 }'
}

run_case() {
	make_env
	cat >>"$CONF" <<EOC
api: { user_rate: 0, sse_queued_max: $1 }
engine: { concurrency: 0 }
EOC
	start_daemon_or_finish sse_cap
	ctl user add alice && ctl project add p1 && ctl member add p1 alice admin &&
		ctl template load templates/run-tests.yaml && ctl repo add p1 myrepo /tmp/x </dev/null
	TA=$(new_token alice)
	P1=$(psql_q "select id from projects where name = 'p1'")
	RUN=$(curl -s -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
		-d '{"template":"run-tests","params":{"repo":"myrepo"}}' \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	psql_q "select transition_run('$RUN', 'queued', 'running')" >/dev/null
	# 512 events of 16 KiB, then the end
	psql_q "select count(append_run_event('$RUN', 'test.big', json_build_object('i', i, 'pad', repeat('x', 16384))::jsonb)) from generate_series(1, 512) i" >/dev/null
	psql_q "select finalize_run('$RUN', 'running', 'succeeded', null, 'run.succeeded', '{}')" >/dev/null
	HTTPD=$(child_pid httpd)
	BASE_KB=$(status_field "$HTTPD" VmRSS | awk '{ print $1 }')
	$SSE idle --port "$PORT" --token "$TA" --run "$RUN" --clients $IDLE --hold 25 \
		--ready "$T/idle.ready" >"$T/idle.out" 2>&1 &
	IP=$!
	wait_for 60 test -s "$T/idle.ready"
	sleep 5 # the idle clients' replays fill what they may
	CLOSED0=$(closed_for_cap)
	$SSE get --port "$PORT" --token "$TA" --run "$RUN" --timeout 60 --pause 4 >"$T/slow.out" 2>&1 &
	R=$!
	sleep 1
	for i in 1 2 3; do
		$SSE get --port "$PORT" --token "$TA" --run "$RUN" --timeout 15 >"$T/reader$i.out" 2>&1 &
		R="$R $!"
	done
	PEAK=0
	j=0
	while [ $j -lt 15 ]; do
		kb=$(status_field "$HTTPD" VmRSS | awk '{ print $1 }')
		[ "${kb:-0}" -gt "$PEAK" ] && PEAK=$kb
		sleep 1
		j=$((j + 1))
	done
	for p in $R; do wait "$p"; done
	READERS=0
	for i in 1 2 3; do
		whole "$T/reader$i.out" && READERS=$((READERS + 1))
	done
	SLOW=no
	whole "$T/slow.out" && SLOW=yes
	wait "$IP"
	IDLE_OUT=$(cat "$T/idle.out")
	RSS_KB=$((PEAK - BASE_KB))
	echo "# cap $1: httpd grew by $((RSS_KB / 1024)) MiB with $IDLE idle streams; $READERS of 3 readers read all 514 events, the slow one: $SLOW; idle: $IDLE_OUT"
	echo "# closed for the cap: $CLOSED0 streams before the readers came, $(closed_for_cap) in all"
	for f in "$T"/reader*.out "$T/slow.out"; do
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("#  %s: %d events, ended %s, error %s, %.1f s" % (sys.argv[1].split("/")[-1], len(d["ids"]), d["ended"], d["error"], d["elapsed"]))' "$f"
	done
	cleanup_env
	SUP_PID=""
}

run_case 16M
CAP_KB=$RSS_KB
CAP_READERS=$READERS
CAP_SLOW=$SLOW
CAP_IDLE=$IDLE_OUT
# the cap's 16 MiB, and what 2,000 connections cost httpd anyway (their
# state, the sanitizer's redzones): far from the 2 GiB uncapped
check "with a 16 MiB cap, 2000 idle streams make httpd grow by less than 256 MiB ($((CAP_KB / 1024)) MiB)" \
	[ "$CAP_KB" -lt $((256 * 1024)) ]
check "... every reader meanwhile reads the whole stream to its end" [ "$CAP_READERS" = 3 ]
check "... one that stopped reading for 4 s meanwhile too: httpd held more for it than for any idle client, and closed those that had not read for longer" [ "$CAP_SLOW" = yes ]
check "... while the 2000 idle clients were all accepted" \
	python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["connected"] == 2000 else 1)' <<EOF
$CAP_IDLE
EOF
run_case 16G
check "without the cap (16 GiB), the same grows httpd much more ($((RSS_KB / 1024)) MiB, over 4x)" \
	[ "$RSS_KB" -gt $((CAP_KB * 4)) ]

finish sse_cap
