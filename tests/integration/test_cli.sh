#!/bin/sh
# agrippa(1), the users' client, against the real daemon running real runs:
# the token (AGRIPPA_TOKEN, an owner-only file, a file others may read
# refused before anything is sent); run submit with typed key=value
# parameters; run watch in a pseudo-terminal (script(1)) redrawing the
# steps in place and exiting 0 on success and 1 on failure, and as plain
# lines otherwise; a stream dropped by killing httpd mid-run resumed without
# a gap or a duplicate; approve and reject (by run or by approval id);
# cancel; artifact get (streamed to a new file, never over an existing one
# without -f); usage; runs with its filters and pages; hostile command
# output and hostile events (escape sequences, C1 controls, bidi
# overrides) printed harmless; and a clear error and exit status for each
# bad input: missing or malformed token, unknown command, bad key=value,
# unreachable daemon, 401, 403, 404 with the server's message.
. tests/integration/lib.sh
need_root cli
CLI="$ROOT/$BUILD/agrippa"
if ! command -v script >/dev/null 2>&1; then
	notok "script(1) is installed (bsdutils, make deps)"
	finish cli
	exit 1
fi
make_env
BG=""
trap 'for p in $BG; do kill "$p" 2>/dev/null; done; cleanup_env' EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 5, sweep: 1 }
EOC
start_daemon_or_finish cli

mkdir -p "$T/repos" "$T/tmpl" "$T/home" "$T/dl"
chmod 0755 "$T/repos"
BASE=$("$TOOLS/mkrepo" "$T/repos/clean")
chmod -R a+rX "$T/repos"
# A run that prints for a while, with terminal escapes among its output
# (a window title, clear screen, cursor moves, a carriage return, a C1 CSI,
# a right-to-left override), changes a file, optionally fails, optionally
# waits at a checkpoint.
cat >"$T/tmpl/cli.yaml" <<'EOF'
name: cli-demo
version: 1
params:
  repo: { type: repoRef, required: true }
  lines: { type: int, default: 3 }
  fail: { type: bool, default: false }
  gate: { type: bool, default: false }
  note: { type: string, default: "" }
workspace: { repo: "${params.repo}", access: readWrite }
phases:
  - name: work
    steps:
      - id: slow
        kind: command
        run: >-
          i=0; while [ $i -lt ${params.lines} ]; do i=$((i+1)); echo "line $i"; sleep 1; done;
          printf 'evil \033]0;pwned\007 \033[2J\033[1;1H\033[3A over\rX \302\233 31m \342\200\256 txt\n';
          echo "${params.note}" >> README.md; printf 'esc \033]0;x\007\n' >> README.md
      - id: check
        kind: command
        run: "test ${params.fail} = false"
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch, required: true } ] }
      - { id: gate, kind: checkpoint, when: "${params.gate}", message: "Ship it?", expires_in: 1h }
EOF
ctl template load "$T/tmpl/cli.yaml" && ctl project add p1 && ctl project add p2 &&
	ctl user add alice && ctl user add vic && ctl user add bob &&
	ctl member add p1 alice member && ctl member add p2 alice member &&
	ctl member add p1 vic viewer && ctl member add p2 bob admin &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null
TA=$(new_token alice)
TV=$(new_token vic)
TB=$(new_token bob)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: template, projects, users (alice in p1 and p2, vic a viewer), repository" \
	[ -n "$BASE" -a -n "$TA" -a -n "$TV" -a -n "$TB" -a -n "$P1" ]

URL="http://127.0.0.1:$PORT"
# cli ARGS...: agrippa as alice in p1 (environment below), not on a
# terminal; sets OUT (stdout), ERR (stderr) and RC.
cli() {
	env AGRIPPA_URL="$URL" AGRIPPA_TOKEN="${TOK-$TA}" AGRIPPA_PROJECT="${PROJ-p1}" HOME="$T/home" \
		"$CLI" "$@" >"$T/out" 2>"$T/err" </dev/null
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}
# expect RC PATTERN DESC: the exit status, and PATTERN (grep -E) in stdout or stderr.
expect() {
	if [ "$RC" -eq "$1" ] && printf '%s\n%s\n' "$OUT" "$ERR" | grep -Eq -e "$2"; then
		ok "$3"
	else
		notok "$3 (exit $RC: $OUT / $ERR)"
	fi
}
runs_count() { psql_q "select count(*) from runs"; }
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
# jq-like: jget FILE PYEXPR on d, the JSON in FILE
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }
# harmless FILE: no ESC but our own redraw sequences (ESC [ K, ESC [ J,
# ESC [ N A), no other C0 control but newline, carriage return and tab, no
# C1 control or bidi override in UTF-8.
harmless() {
	python3 - "$1" <<'PY'
import re, sys
b = open(sys.argv[1], "rb").read()
bad = [m.group(0) for m in re.finditer(rb"\x1b(?!\[(?:K|J|[0-9]+A))", b)]
bad += [bytes([c]) for c in b if (c < 0x20 and c not in (9, 10, 13)) and c != 0x1b or c == 0x7f]
bad += re.findall(rb"\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]", b)
if bad:
    print("unsafe:", bad[:5])
    sys.exit(1)
PY
}

# --- the token -------------------------------------------------------------------------
unset AGRIPPA_TOKEN AGRIPPA_URL AGRIPPA_PROJECT XDG_CONFIG_HOME
# -u to a closed port: an error about the token shows nothing was sent
NOWHERE="http://127.0.0.1:1"
env -u AGRIPPA_TOKEN HOME="$T/home" "$CLI" -u "$NOWHERE" runs >"$T/out" 2>&1
RC=$? OUT=$(cat "$T/out") ERR=""
expect 2 "no token: set AGRIPPA_TOKEN, write it to $T/home/.config/agrippa/token \(mode 0600\)" \
	"no token anywhere: exit 2, saying where one goes"
printf '%s\n' "$TA" >"$T/tok"
for mode in 0644 0640 0604 0660; do
	chmod "$mode" "$T/tok"
	OUT=$(HOME="$T/home" "$CLI" -u "$NOWHERE" -t "$T/tok" runs 2>&1)
	RC=$?
	expect 2 "^agrippa: $T/tok: permissions $mode are too open: a token file must be readable by its owner only \(chmod 600 $T/tok\)$" \
		"a token file of mode $mode is refused before anything is sent"
done
chmod 0600 "$T/tok"
chown nobody "$T/tok"
OUT=$(HOME="$T/home" "$CLI" -u "$NOWHERE" -t "$T/tok" runs 2>&1)
RC=$?
expect 2 "the token file is owned by uid [0-9]+, not by you" "a token file owned by another user is refused"
chown root "$T/tok"
printf 'agr_ok\033]0;x\007\n' >"$T/badtok"
chmod 0600 "$T/badtok"
OUT=$(HOME="$T/home" "$CLI" -u "$NOWHERE" -t "$T/badtok" runs 2>&1)
RC=$?
expect 2 "badtok: not an agrippa token" "a token file that holds no token is refused"
check "... without echoing its content" sh -c "! printf '%s' \"\$1\" | grep -q 'agr_ok'" - "$OUT"
OUT=$(HOME="$T/home" "$CLI" -u "$NOWHERE" -t "$T/home" runs 2>&1)
RC=$?
expect 2 "not a regular file" "a directory as the token file is refused"
OUT=$(HOME="$T/home" "$CLI" -u "$NOWHERE" -t "$T/nonexistent" runs 2>&1)
RC=$?
expect 2 "nonexistent: No such file or directory" "a missing -t file is named"
OUT=$(AGRIPPA_TOKEN="not a token" "$CLI" -u "$NOWHERE" runs 2>&1)
RC=$?
expect 2 "AGRIPPA_TOKEN is not an agrippa token" "a malformed AGRIPPA_TOKEN is refused"
OUT=$(HOME="$T/home" AGRIPPA_PROJECT=p1 "$CLI" -u "$URL" -t "$T/tok" runs 2>&1)
RC=$?
expect 0 "^ID +STATUS +TEMPLATE" "a 0600 token file (-t) works"
mkdir -p "$T/home/.config/agrippa" "$T/xdg/agrippa"
cp "$T/tok" "$T/home/.config/agrippa/token"
OUT=$(env -u AGRIPPA_TOKEN HOME="$T/home" AGRIPPA_PROJECT=p1 AGRIPPA_URL="$URL" "$CLI" runs 2>&1)
RC=$?
expect 0 "^ID +STATUS" "the default file ~/.config/agrippa/token works"
cp "$T/tok" "$T/xdg/agrippa/token"
chmod 0644 "$T/home/.config/agrippa/token"
OUT=$(env -u AGRIPPA_TOKEN HOME="$T/home" XDG_CONFIG_HOME="$T/xdg" AGRIPPA_PROJECT=p1 AGRIPPA_URL="$URL" "$CLI" runs 2>&1)
RC=$?
expect 0 "^ID +STATUS" "\$XDG_CONFIG_HOME/agrippa/token is used before ~/.config"
rm -f "$T/home/.config/agrippa/token"
TOK=agr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA cli runs
expect 3 "^agrippa: 401 unauthorized: a valid bearer token is required \(the token is unknown, revoked or expired" \
	"an unknown token: exit 3 with the server's 401 message"

# --- usage errors, the daemon's URL ----------------------------------------------------
cli frobnicate
expect 2 "^agrippa: unknown command: frobnicate$" "an unknown command: exit 2, named"
check "... followed by the list of commands" sh -c "printf '%s' \"\$1\" | grep -q 'run watch RUN'" - "$ERR"
cli run frob
expect 2 "unknown command: run frob" "an unknown run command"
cli run watch
expect 2 "^agrippa: usage: agrippa run watch RUN$" "a command without its argument: its usage"
cli run watch "$(printf 'x\033]0;t\007')"
expect 2 "not a run id \(a UUID\): x\^\[\]0;t\^G$" "a run id that is no UUID is refused, shown harmless"
cli -x runs
expect 2 "^usage: agrippa \[-j\] \[-p project\] \[-t tokenfile\] \[-u url\]" "an unknown option: the usage"
cli -u ftp://127.0.0.1/ runs
expect 2 "must be http:// or https://, not ftp://" "a URL of another scheme is refused"
cli -u "http://alice:pw@127.0.0.1:$PORT" runs
expect 2 "must not hold a user or password" "a URL with credentials is refused"
cli -u "$URL/?x=1" runs
expect 2 "must not have a query" "a URL with a query is refused"
cli -u "$NOWHERE" runs
expect 4 "^agrippa: no answer from the daemon at http://127.0.0.1:1: .*(refused|connect)" \
	"an unreachable daemon: exit 4, saying so"
cli -u "$NOWHERE" run watch 00000000-0000-4000-8000-000000000000
expect 4 "no answer from the daemon" "run watch of an unreachable daemon: exit 4"
cli -u "$URL/prefix" runs
expect 3 "404 not_found" "a URL path is kept (a daemon behind a prefix)"
PROJ= cli runs
expect 2 "^agrippa: choose a project with -p; yours: p1, p2$" "a user of two projects must choose one"
PROJ=nope cli runs
expect 3 "you are a member of no project named nope; yours: p1, p2" "an unknown project name"
PROJ="$P1" cli runs
expect 0 "^ID" "a project by id"
TOK=$TB PROJ= cli runs
expect 0 "^ID" "a user of one project needs no -p"

# --- run submit ------------------------------------------------------------------------
n0=$(runs_count)
cli run submit cli-demo repo=clean lines
expect 2 "a parameter is name=value, with a name of a-z, 0-9 and _, not: lines$" "key without =value"
cli run submit cli-demo =3
expect 2 "a parameter is name=value" "=value without a key"
cli run submit cli-demo Lines=3
expect 2 "a parameter is name=value" "a key with a capital"
cli run submit cli-demo repo=clean lines=abc
expect 2 "parameter lines is an integer, not: abc" "an int parameter that is not an integer"
cli run submit cli-demo repo=clean lines=007
expect 2 "parameter lines is an integer, not: 007" "an int with leading zeros"
cli run submit cli-demo repo=clean fail=yes
expect 2 "parameter fail is true or false, not: yes" "a bool parameter that is not true or false"
cli run submit cli-demo repo=clean nope=1
expect 2 "the template has no parameter nope \(its parameters: .*lines" "an undeclared parameter, with the declared ones"
cli run submit cli-demo repo=clean repo=clean
expect 2 "parameter repo is given twice" "a parameter given twice"
cli run submit cli-demo lines=1
expect 3 "^agrippa: 422 invalid_params: .*repo" "a missing required parameter: the server's 422 and message"
cli run submit cli-demo repo=elsewhere
expect 3 "422 invalid_params" "a repoRef that names no repository: 422"
cli run submit no-such-template
expect 3 "^agrippa: 404 not_found: " "an unknown template: 404"
cli run submit 'Bad/Name'
expect 2 "not a template name" "a malformed template name"
TOK=$TV cli run submit cli-demo repo=clean
expect 3 "^agrippa: 403 forbidden: " "a viewer submits: 403 with the server's message"
check "none of the refused submits created a run" [ "$(runs_count)" = "$n0" ]
TOK=$TV cli -j run submit cli-demo repo=clean
check "-j: the error answer as JSON on standard output" [ "$RC" = 3 -a "$(jget "$T/out" "d['error']['code']")" = forbidden ]

# --- run watch: a run that succeeds, on a terminal and not -------------------------------
cli run submit cli-demo repo=clean lines=4 "note=$(printf 'a\033]0;x\007')"
expect 3 "^agrippa: 422 invalid_params: " "a parameter with a control character: the server's 422"
cli run submit cli-demo repo=clean lines=4 'note=<b>ok</b>'
R1=$OUT
check "run submit prints the new run's id (exit 0)" sh -c "[ $RC -eq 0 ] && printf '%s' '$R1' | grep -Eqx '[0-9a-f-]{36}'"
check "... with the parameters typed as the template declares" \
	[ "$(psql_q "select params->>'lines' || ' ' || jsonb_typeof(params->'lines') || ' ' || (params->>'note') from runs where id = '$R1'")" = "4 number <b>ok</b>" ]
# tty ARGS...: agrippa in a pseudo-terminal of 100 x 30 (TERM=xterm); the
# terminal's output in $T/tty.$NAME, its exit status in $T/tty.$NAME.rc.
tty_watch() {
	name=$1
	shift
	printf '%s' "stty cols 100 rows 30; exec $CLI $*" >"$T/tty.$name.cmd"
	(TERM=xterm AGRIPPA_URL="$URL" AGRIPPA_TOKEN="$TA" AGRIPPA_PROJECT=p1 \
		timeout 120 script -qec "sh $T/tty.$name.cmd" /dev/null >"$T/tty.$name" 2>&1 </dev/null
	 echo $? >"$T/tty.$name.rc") &
	BG="$BG $!"
}
plain_watch() { # NAME ARGS...: not on a terminal: stdout and stderr, exit status
	name=$1
	shift
	(AGRIPPA_URL="$URL" AGRIPPA_TOKEN="$TA" timeout 120 "$CLI" "$@" >"$T/plain.$name" 2>"$T/plain.$name.err" </dev/null
	 echo $? >"$T/plain.$name.rc") &
	BG="$BG $!"
}
tty_watch ok run watch "$R1"
plain_watch ok run watch "$R1"
plain_watch okj -j run watch "$R1"
cli run submit cli-demo repo=clean lines=2 fail=true
R2=$OUT
tty_watch fail run watch "$R2"
plain_watch fail run watch "$R2"
done_watch() { [ -s "$T/$1.rc" ]; }
wait_for 90 done_watch tty.ok
wait_for 90 done_watch tty.fail
wait_for 30 done_watch plain.ok
wait_for 30 done_watch plain.fail
wait_for 30 done_watch plain.okj
check "a run that succeeds: run watch in a terminal exits 0" [ "$(cat "$T/tty.ok.rc" 2>/dev/null)" = 0 ]
check "a run that fails: run watch in a terminal exits 1" [ "$(cat "$T/tty.fail.rc" 2>/dev/null)" = 1 ]
check "... and both really ended so" [ "$(run_status "$R1") $(run_status "$R2")" = "succeeded failed" ]
# The terminal's transcript: the block is redrawn in place (cursor up over
# it and clear to the end of the screen) and shows the steps progressing.
redraws=$(grep -ao "$(printf '\033')\[[0-9]*A$(printf '\033')\[J" "$T/tty.ok" | wc -l)
check "on a terminal, the steps' block is redrawn in place ($redraws times: ESC[nA ESC[J)" [ "$redraws" -ge 4 ]
# screen FILE: a terminal's transcript without carriage returns and the
# block's own redraw sequences
screen() { tr -d '\r' <"$1" | sed "s/$(printf '\033')\[\([0-9]*A\|J\|K\)//g"; }
progress() { # FILE PATTERN...: each pattern matches a line after the previous one's
	f=$1
	shift
	python3 - "$f" "$@" <<'PY'
import re, sys
text = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r", "")
text = re.sub("\x1b\\[(?:K|J|[0-9]+A)", "", text)  # the block's own redraws
pos = 0
for pat in sys.argv[2:]:
    m = re.compile(pat, re.M).search(text, pos)
    if not m:
        print("# not found after offset %d: %s" % (pos, pat))
        sys.exit(1)
    pos = m.end()
PY
}
check "... showing slow pending, running, then succeeded, while check waits, then runs and succeeds" \
	progress "$T/tty.ok" "^  pending +work/slow" "^  running +work/slow" "^  pending +work/check" \
	"line 4" "^  succeeded +work/slow +[0-9.]+s" "^  running +work/check" "^  succeeded +work/check" \
	"^  succeeded +work/patch" "^  pending +work/gate" "^run succeeded"
check "... the run's header goes from running to succeeded" \
	progress "$T/tty.ok" "^run ${R1%%-*} +cli-demo v1 +(queued|running)" "^run ${R1%%-*} +cli-demo v1 +succeeded"
n=$(screen "$T/tty.ok" | grep -c '^\[slow\] line [1-4]$')
check "... the command's output scrolls above it, each line once (4 of 4)" [ "$n" = 4 ]
check "the failed run's block shows check failed with its error, patch skipped" \
	progress "$T/tty.fail" "^  running +work/check" "^  failed +work/check .*exited with status 1" \
	"^  skipped +work/patch" "^run failed: step check: exited with status 1"
check "hostile output on the terminal: no escape but the block's own (ok run)" harmless "$T/tty.ok"
check "... (failed run)" harmless "$T/tty.fail"
check "... shown as visible text instead" \
	sh -c "tr -d '\r' <'$T/tty.ok' | grep -Fq '[slow] evil ^[]0;pwned^G ^[[2J^[[1;1H^[[3A over^MX \\u009b 31m \\u202e txt'"
check "plain lines when not a terminal: exit 0 for the run that succeeded" [ "$(cat "$T/plain.ok.rc")" = 0 ]
check "... exit 1 for the one that failed" [ "$(cat "$T/plain.fail.rc")" = 1 ]
check "... the steps as lines, in order, with the output" \
	progress "$T/plain.ok" "^run $R1: cli-demo 1, (queued|running)$" "^step work/slow: running \(attempt 1\)$" \
	"^\[slow\] line 1$" "^\[slow\] line 4$" "^step work/slow: succeeded in [0-9.]+s$" \
	"^step work/check: running" "^step work/patch: succeeded" "^artifact [0-9a-f-]{36} \([0-9]+ bytes\) of step patch$" \
	"^step work/gate: skipped$" "^run succeeded$"
check "... the failure with its reason" \
	progress "$T/plain.fail" "^step work/check: failed in [0-9.]+s: exited with status 1$" "^run failed: step check: exited with status 1$"
check "... no control character at all in the plain output" \
	sh -c "! LC_ALL=C grep -aq '[[:cntrl:]]' '$T/plain.ok' '$T/plain.fail'"
check "-j: one JSON event per line, seq 1..N in order, ending with run.succeeded (exit $(cat "$T/plain.okj.rc"))" \
	python3 - "$T/plain.okj" "$(psql_q "select count(*) from run_events where run_id = '$R1'")" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
seqs = [e["seq"] for e in evs]
assert seqs == list(range(1, int(sys.argv[2]) + 1)), seqs
assert evs[-1]["type"] == "run.succeeded" and isinstance(evs[0]["payload"], dict)
PY

# --- a stream dropped mid-run: resumed without a gap or a duplicate ---------------------
cli run submit cli-demo repo=clean lines=10
R3=$OUT
plain_watch drop run watch "$R3"
plain_watch dropj -j run watch "$R3"
tty_watch drop run watch "$R3"
seen_line() { grep -q '^\[slow\] line 3$' "$T/plain.drop" 2>/dev/null; }
wait_for 60 seen_line
hp=$(child_pid httpd)
kill -KILL "$hp" 2>/dev/null
check "httpd killed mid-run (pid $hp) after line 3" [ -n "$hp" ]
hp2=""
back() { hp2=$(child_pid httpd) && [ "$hp2" != "$hp" ] && [ "$(healthz_code)" = 200 ]; }
check "... and started again by the supervisor" wait_for 30 back
wait_for 90 done_watch plain.drop
wait_for 30 done_watch plain.dropj
wait_for 30 done_watch tty.drop
check "the watchers saw the drop and resumed" \
	sh -c "grep -q 'the stream dropped .*resuming after event' '$T/plain.drop.err' '$T/plain.dropj.err'"
check "... and exited 0 when the run succeeded (plain, -j, terminal)" \
	[ "$(cat "$T/plain.drop.rc") $(cat "$T/plain.dropj.rc") $(cat "$T/tty.drop.rc")" = "0 0 0" ]
n=$(psql_q "select count(*) from run_events where run_id = '$R3'")
check "-j across the drop: every seq 1..$n exactly once, in order" \
	python3 - "$T/plain.dropj" "$n" <<'PY'
import json, sys
seqs = [json.loads(l)["seq"] for l in open(sys.argv[1])]
assert seqs == list(range(1, int(sys.argv[2]) + 1)), seqs
PY
check "plain across the drop: each output line once, in order" \
	[ "$(grep '^\[slow\] line' "$T/plain.drop" | tr '\n' ' ')" = "$(seq 1 10 | sed 's/^/[slow] line /' | tr '\n' ' ')" ]
check "... and each step change once" [ "$(grep -c '^step work/slow: succeeded' "$T/plain.drop")" = 1 ]
n=$(screen "$T/tty.drop" | grep -c '^\[slow\] line')
check "terminal across the drop: each output line once (10 of 10)" [ "$n" = 10 ]

# --- approvals: approve by run id and by approval id, reject; hostile events ------------
cli run submit cli-demo repo=clean lines=0 gate=true
RA=$OUT
cli run submit cli-demo repo=clean lines=0 gate=true
RR=$OUT
cli run submit cli-demo repo=clean lines=0 gate=true
RI=$OUT
three_waiting() { [ "$(psql_q "select count(*) from runs where id in ('$RA', '$RR', '$RI') and status = 'waiting_approval'")" = 3 ]; }
check "three runs wait at their checkpoint" wait_for 90 three_waiting
# what a runner might write, hostile: escapes in a step id, a message, an
# agent's text, a note; a C1 CSI and a bidi override
psql_q "select append_run_event('$RA', 'agent.message', jsonb_build_object('step_id', E'ev\\u001b[2Jil', 'attempt', 1,
          'turn', 1, 'text', E'model says \\u001b]0;owned\\u0007 \\u009b31m \\u202e reversed\\r\\nsecond', 'truncated', false));
        select append_run_event('$RA', 'artifact.rejected', jsonb_build_object('step_id', 'gate', 'attempt', 1,
          'key', 'k', 'file', 'f', 'reason', E'bad \\u001b[5n answerback'));
        select append_run_event('$RA', 'step.finished', jsonb_build_object('step_id', E'zz\\u001bc', 'attempt', 1,
          'status', E'failed\\u001b[H', 'error', E'why \\u001b[1A\\u2066up'))" >/dev/null
tty_watch appr run watch "$RA"
plain_watch appr run watch "$RA"
plain_watch rej run watch "$RR"
on_gate() { grep -q '^approval [0-9a-f-]* requested by step gate$' "$T/plain.appr" 2>/dev/null; }
wait_for 30 on_gate
check "the waiting run's watch shows the approval and how to decide it" \
	progress "$T/plain.appr" "^step work/gate: running" "^approval [0-9a-f-]{36} requested by step gate$" \
	"^  Ship it\?$" "^  decide with: agrippa approve\|reject $RA$" "^step work/gate: waiting"
TOK=$TV cli approve "$RA"
expect 3 "^agrippa: 403 forbidden: " "a viewer approves: 403 with the server's message"
TOK=$TB cli approve "$RA"
expect 3 "^agrippa: 404 not_found: " "a user of another project approves: 404 with the server's message"
check "... and the run still waits" is_status "$RA" waiting_approval
cli approve "$RA" "$(printf 'fine \033[31mred\033[0m')"
expect 0 "^approved approval [0-9a-f-]{36} of run $RA$" "approve RUN with a comment: exit 0"
check "... the comment stored as sent" \
	[ "$(psql_q "select comment = E'fine \\u001b[31mred\\u001b[0m' from approvals where run_id = '$RA'")" = t ]
cli approve "$RA"
expect 3 "run $RA has no pending approval" "approving it again: no pending approval, exit 3"
AI=$(psql_q "select id from approvals where run_id = '$RI'")
cli approve "$AI"
expect 0 "^approved approval $AI of run $RI$" "approve APPROVAL (by the approval's id)"
cli approve "$AI"
expect 3 "^agrippa: 409 not_pending: " "deciding a decided approval: 409 with the server's message"
cli reject "$RR" "not today"
expect 0 "^rejected approval [0-9a-f-]{36} of run $RR$" "reject RUN"
cli approve 00000000-0000-4000-8000-000000000000
expect 3 "^agrippa: 404 not_found: " "approve an id that is nothing: the server's 404"
wait_for 60 done_watch plain.appr
wait_for 60 done_watch tty.appr
wait_for 60 done_watch plain.rej
check "the approved run's watch exits 0 (plain and terminal)" \
	[ "$(cat "$T/plain.appr.rc") $(cat "$T/tty.appr.rc")" = "0 0" ]
check "the rejected run's watch exits 1" [ "$(cat "$T/plain.rej.rc")" = 1 ]
check "... it showed the rejection, with the comment" \
	progress "$T/plain.rej" "^approval [0-9a-f-]{36} rejected: not today$" "^run failed"
check "the approved run's watch shows the decision and its comment harmless" \
	grep -q '^approval [0-9a-f-]* approved: fine ^\[\[31mred^\[\[0m$' "$T/plain.appr"
check "hostile events (step ids, statuses, errors, agent text) on the terminal: no escape but ours" \
	harmless "$T/tty.appr"
check "... nor in plain lines" harmless "$T/plain.appr"
check "... shown as text" progress "$T/plain.appr" \
	'^\[ev\^\[\[2Jil\] model says \^\[\]0;owned\^G \\u009b31m \\u202e reversed$' '^\[ev\^\[\[2Jil\] second$' \
	'^artifact refused: bad \^\[\[5n answerback$' '^step -/zz\^\[c: failed\^\[\[H: why \^\[\[1A\\u2066up$'

TERM=xterm AGRIPPA_URL="$URL" AGRIPPA_TOKEN="$TA" script -qec "$CLI -j run watch $RA" /dev/null \
	>"$T/tty.apprj" 2>&1 </dev/null
check "-j on a terminal: the hostile events as JSON (exit $?), escaped" harmless "$T/tty.apprj"
check "... every line JSON, with the agent's text intact once decoded" python3 - "$T/tty.apprj" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1], encoding="ascii").read().replace("\r", "").splitlines()]
texts = [e["payload"].get("text") for e in evs if e["type"] == "agent.message"]
assert texts == ["model says \x1b]0;owned\x07 \x9b31m \u202e reversed\r\nsecond"], texts
PY

# --- cancel ----------------------------------------------------------------------------
cli run submit cli-demo repo=clean lines=60
RC1=$OUT
plain_watch cancel run watch "$RC1"
is_running() { is_status "$RC1" running && grep -q '^\[slow\] line 1$' "$T/plain.cancel" 2>/dev/null; }
wait_for 60 is_running
TOK=$TV cli run cancel "$RC1"
expect 3 "^agrippa: 403 forbidden: " "a viewer cancels: 403"
cli run cancel "$RC1"
expect 0 "^$RC1 cancel requested" "run cancel of a running run: cancel requested"
wait_for 60 done_watch plain.cancel
check "... its watch ends: exit 1, run cancelled" \
	[ "$(cat "$T/plain.cancel.rc") $(tail -n 1 "$T/plain.cancel")" = "1 run cancelled" ]
cli run cancel "$RC1"
expect 3 "^agrippa: 409 run_finished: " "cancelling it again: 409 with the server's message"
cli run cancel 00000000-0000-4000-8000-000000000000
expect 3 "^agrippa: 404 not_found: " "cancelling no run: 404"
TOK=$TB cli run watch "$R1"
expect 3 "^agrippa: 404 not_found: " "watching another project's run: 404 with the server's message"

# --- artifact get ----------------------------------------------------------------------
AID=$(psql_q "select id from artifacts where run_id = '$R1' and key = 'patch'")
curl -s -o "$T/want.patch" -H "Authorization: Bearer $TA" "$URL/v1/artifacts/$AID"
cd "$T/dl" || exit 1
cli artifact get "$AID"
expect 0 "^patch.patch: [0-9]+ bytes, sha256 [0-9a-f]{64}$" "artifact get: saved under the server's name"
check "... with the artifact's bytes" cmp -s patch.patch "$T/want.patch"
check "... and mode 0644 under umask 022" [ "$(stat -c %a patch.patch)" = 644 ]
echo mine >patch.patch
cli artifact get "$AID"
expect 2 "patch.patch exists: not overwritten \(use -f" "an existing file is not overwritten"
check "... it is as it was" [ "$(cat patch.patch)" = mine ]
cli artifact get "$AID" -f
expect 0 "^patch.patch: " "-f overwrites it"
check "... with the artifact's bytes" cmp -s patch.patch "$T/want.patch"
echo mine >other.patch
cli artifact get "$AID" -o other.patch
expect 2 "other.patch exists: not overwritten \(use -f\)" "-o onto an existing file is refused"
check "... it is as it was" [ "$(cat other.patch)" = mine ]
cli artifact get -o new.patch "$AID"
expect 0 "^new.patch: " "-o FILE"
check "... with the artifact's bytes" cmp -s new.patch "$T/want.patch"
cli -j artifact get "$AID" -o j.patch
check "-j: the file, size and digest as JSON" \
	[ "$RC $(jget "$T/out" "d['file'], d['size'], d['sha256'] == '$(sha256sum "$T/want.patch" | cut -c1-64)'")" = "0 j.patch $(stat -c %s "$T/want.patch") True" ]
cli artifact get "$AID" -o -
check "-o -: the bytes on standard output" sh -c "[ $RC -eq 0 ] && cmp -s '$T/out' '$T/want.patch'"
cli artifact get "$AID" -o "$T/nodir/x.patch"
expect 2 "nodir/x.patch: cannot create a file beside it: No such file or directory" "-o into a missing directory"
TOK=$TB cli artifact get "$AID" -o bob.patch
expect 3 "^agrippa: 404 not_found: " "another project's artifact: 404 with the server's message"
check "... and no file" [ ! -e bob.patch ]
cli artifact get "$AID" -x
expect 2 "usage: agrippa artifact get ARTIFACT" "an unknown option of artifact get"
cli artifact get nope
expect 2 "not an artifact id" "a malformed artifact id"
check "no temporary file is left behind" [ "$(ls -A | sort | tr '\n' ' ')" = "j.patch new.patch other.patch patch.patch " ]
# printed to a terminal, an artifact's hostile bytes are made harmless
TERM=xterm AGRIPPA_URL="$URL" AGRIPPA_TOKEN="$TA" script -qec "$CLI artifact get $AID -o -" /dev/null >"$T/tty.art" 2>&1 </dev/null
check "-o - on a terminal: the patch is shown harmless (exit $?)" harmless "$T/tty.art"
check "... and shown, the escape in it visible" grep -qF '+esc ^[]0;x^G' "$T/tty.art"
check "... while -o FILE holds the bytes as they are" grep -q "$(printf '\033]0;x\007')" "$T/dl/new.patch"
cd "$ROOT" || exit 1

# --- runs, usage -----------------------------------------------------------------------
cli runs
check "runs: a table of the project's runs, newest first" \
	sh -c "[ $RC -eq 0 ] && printf '%s\n' \"\$1\" | sed -n 2p | grep -Eq '^$RC1 +cancelled +cli-demo 1 +[0-9-]{10} [0-9:]{5} +[0-9a-z]+ +\\\$0.0000'" - "$OUT"
cli runs status=failed
check "runs status=failed: only failed ones ($R2, $RR)" \
	[ "$RC $(printf '%s\n' "$OUT" | tail -n +2 | cut -d' ' -f1 | sort | tr '\n' ' ')" = "0 $(printf '%s\n%s\n' "$R2" "$RR" | sort | tr '\n' ' ')" ]
cli runs template=no-such
check "runs template=...: none of another template" [ "$RC $(printf '%s\n' "$OUT" | wc -l)" = "0 1" ]
cli runs limit=2
check "runs limit=2: two runs, and the next page's command on standard error" \
	sh -c "[ $RC -eq 0 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 3 ] && printf '%s' \"\$2\" | grep -Eq '^more: agrippa runs cursor=[0-9a-f-]{36}$'" - "$OUT" "$ERR"
cur=$(printf '%s' "$ERR" | sed 's/.*cursor=//')
first=$(printf '%s\n' "$OUT" | sed -n 2p | cut -d' ' -f1)
cli runs limit=2 "cursor=$cur"
check "... cursor= gives the next page" \
	sh -c "[ $RC -eq 0 ] && ! printf '%s' \"\$1\" | grep -q '$first' && [ \$(printf '%s\n' \"\$1\" | wc -l) = 3 ]" - "$OUT"
cli runs status=bogus
expect 3 "^agrippa: 400 invalid_query: " "runs status=bogus: the server's 400"
cli runs colour=red
expect 2 "runs takes status=, template=, limit= and cursor=" "runs with an unknown filter"
cli runs status=failed status=failed
expect 2 "each at most once" "runs with a filter twice"
cli -j runs status=failed
check "-j runs: the API's JSON" [ "$RC $(jget "$T/out" "len(d['runs'])")" = "0 2" ]
cli usage
expect 0 "^runs +.*succeeded [0-9]+" "usage: this month's spend and runs"
cli usage 2026-13
expect 3 "^agrippa: 400 invalid_query: " "usage of a month that is none: the server's 400"
cli -j usage
check "-j usage: the API's JSON" [ "$RC $(jget "$T/out" "'month' in d and 'runs' in d")" = "0 True" ]
TOK=$TB cli -p p1 usage
expect 3 "you are a member of no project named p1" "usage of a project one is not in"

check "the token never appears in agrippa's output or the daemon's log" \
	sh -c "! grep -rqF -e '$TA' -e '$TV' '$T'/plain.* '$T'/tty.* '$LOG'"
stop_daemon
check "the daemon stops cleanly" [ "$DAEMON_STATUS" -eq 0 ]
finish cli
