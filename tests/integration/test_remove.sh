#!/bin/sh
# Removing trees off the supervisor's event loop (supervisor/remove.c,
# agrippa-tree remove) against the real daemon:
#  - a run leaves a workspace of 200,000 files; while its directory is
#    removed, another run's command keeps writing events and a client's
#    GET /v1/runs/{id} keeps answering: p99 of its latency over the whole
#    removal stays under 50 ms, and the daemon's log shows the removal
#    itself took longer than that (so the measurement covered it);
#  - the remover runs as the sandbox user, never as root;
#  - a hostile workspace: links to /etc, to the state directory, to
#    another run's workspace and to files and directories the sandbox user
#    owns outside, a 5,000-deep chain of directories, a mode-000 directory,
#    a sticky directory, a FIFO: everything outside is intact and the run's
#    directory is gone;
#  - agrippa-tree remove refuses to be used by hand;
#  - agrippa-tree chown (which gives a checkout to the sandbox user) runs
#    with CAP_CHOWN alone, gives a link itself and never its target, and
#    refuses to be used by hand: as root, with more capabilities or none,
#    on a directory it does not own, with a bad user.
# The workspaces here are directories of the state directory (sandbox.disk:
# none): on a disk of its own (test_disk.sh) a run's workspace goes with
# its image, in O(1); the remover serves the rest (hosts without loop
# devices, mirrors, scratch checkouts, sandboxes' fresh workspaces).
. tests/integration/lib.sh
need_root remove
make_env
trap cleanup_env EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 4, lease: 10, sweep: 1 }
sandbox: { disk: none }
# one user's GETs as fast as they come: no per-user limit (what is measured
# is the removal's effect on the API)
api: { user_rate: 0 }
EOC
SBX_UID=2000000000 # sandbox.uid's default: owns nothing on the host

start_daemon_or_finish remove

MKREPO="$TOOLS/mkrepo"
mkdir -p "$T/repos" "$T/tmpl"
chmod 0755 "$T/repos"
BASE=$("$MKREPO" "$T/repos/clean")
chmod -R a+rX "$T/repos"
check "a test repository made" [ -n "$BASE" ]

# tmpl NAME: a template file from stdin's phases, loaded
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
		printf 'phases:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
# ticker: output every 50 ms until the test creates "stop" in its workspace
tmpl ticker <<'EOF'
  - name: one
    steps:
      - { id: mark, kind: command, run: "echo kept > keepme; mkdir keepdir; echo kept > keepdir/f" }
      - { id: tick, kind: command, run: "touch ticking; while [ ! -e stop ]; do echo tick; sleep 0.05; done" }
      - { id: after, kind: command, run: "echo after" }
EOF
# many: 200,000 empty files in four directories
tmpl many <<'EOF'
  - name: one
    steps:
      - { id: fill, kind: command, run: "for d in a b c d; do mkdir $d && (cd $d && seq 1 50000 | xargs touch) || exit 1; done; ls a | wc -l" }
EOF
ctl project add p1 && ctl user add alice && ctl member add p1 alice admin &&
	ctl repo add p1 clean "$T/repos/clean" </dev/null
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
check "set-up: project, user, token, repository, templates" [ -n "$TA" -a -n "$P1" ]

J='Content-Type: application/json'
submit() { # submit TEMPLATE: RUN set
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"clean\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
run_dir_gone() { [ ! -e "$T/state/runs/$1" ]; }

# --- the latency of the API while 200,000 files are removed -------------------
submit ticker
R2=$RUN
wait_for 60 test -e "$T/state/runs/$R2/ws/ticking"
check "a run whose command keeps running (its output every 50 ms)" test -e "$T/state/runs/$R2/ws/ticking"
submit many
R1=$RUN
check "a run that makes 200,000 files submitted" [ -n "$R1" ]

# The client: GET /v1/runs/R2 back to back (and its events now and then, to
# see that run go on), reading the daemon's log as it goes: the removal
# runs from the moment the log says R1's remover started to the moment it
# says R1's directory is removed.  Every request that overlaps that window
# counts for it.  Then the figures, as JSON.
python3 - "$PORT" "$TA" "$R2" "$LOG" "$T/state/runs/$R1" >"$T/lat.json" 2>"$T/lat.err" <<'PY' &
import http.client, json, re, sys, time
port, tok, run, log, rdir = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
hdr = {"Authorization": "Bearer " + tok}
start_re = re.compile(r"remover \d+ started for " + re.escape(rdir) + r"/ws ")
ws_re = re.compile(r"removed " + re.escape(rdir) + r"/ws \((\d+) entries\) in (\d+) ms")
dir_re = re.compile(r"removed " + re.escape(rdir) + r" in (\d+) ms")
def get(path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path, headers=hdr)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()
samples, seqs, errors, seq, n = [], [], 0, 0, 0
began = ended = found = None
deadline = time.monotonic() + 300
logf, text = open(log, errors="replace"), ""
while time.monotonic() < deadline:
    t0 = time.monotonic()
    try:
        st, body = get("/v1/runs/" + run)
    except Exception:
        st = 0
    t1 = time.monotonic()
    samples.append((t0, t1))
    errors += st != 200
    n += 1
    if n % 5 == 0:
        try:
            st, body = get("/v1/runs/%s/events?after=%d&limit=1000" % (run, seq))
            ev = json.loads(body).get("events", []) if st == 200 else []
            seq = ev[-1]["seq"] if ev else seq
        except Exception:
            pass
        now = time.monotonic()
        seqs.append((now, seq))
        text += logf.read()
        if began is None and start_re.search(text):
            began = now
        m, d = ws_re.search(text), dir_re.search(text)
        if began is not None and ended is None and m and d:
            ended, found = now, (int(m.group(1)), int(m.group(2)))
    if ended is not None and time.monotonic() > ended + 0.5:
        break
ms = lambda s: (s[1] - s[0]) * 1000
lat = sorted(ms(s) for s in samples)
out = {"requests": len(samples), "errors": errors, "p50": lat[len(lat) // 2],
       "p99": lat[int(len(lat) * 0.99)], "max": lat[-1]}
if found is not None:
    during = sorted(ms(s) for s in samples if s[0] < ended and s[1] > began)
    seq_at = lambda when: max([q for t, q in seqs if t <= when] or [0])
    out.update(entries=found[0], removal_ms=found[1], window_ms=(ended - began) * 1000,
               during=len(during), events_during=seq_at(ended) - seq_at(began),
               p99_during=during[int(len(during) * 0.99)] if during else None,
               max_during=during[-1] if during else None)
print(json.dumps(out))
PY
CLIENT=$!
wait_for 120 is_status "$R1" succeeded
check "the run of 200,000 files succeeds ($(run_status "$R1"))" is_status "$R1" succeeded
wait "$CLIENT"
LAT=$(cat "$T/lat.json")
echo "# latency while 200,000 files were removed: $LAT"
jl() { printf '%s' "$LAT" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>/dev/null; }
check "the client saw the removal in the log ($(head -c 300 "$T/lat.err"))" [ "$(jl "'entries' in d")" = True ]
check "... of at least 200,000 entries ($(jl "d['entries']"))" [ "$(jl "d['entries'] >= 200000")" = True ]
check "... which took longer than 50 ms ($(jl "d['removal_ms']") ms): the measurement covered it" \
	[ "$(jl "d['removal_ms'] > 50")" = True ]
check "every GET answered 200 ($(jl "d['errors']") errors)" [ "$(jl "d['errors']")" = 0 ]
check "the client saw the removal under way for $(jl "round(d['window_ms'])") of its $(jl "d['removal_ms']") ms" \
	[ "$(jl "d['window_ms'] >= d['removal_ms'] / 2")" = True ]
check "... with requests all along: $(jl "d['during']") (at least one per 100 ms)" \
	[ "$(jl "d['during'] >= d['window_ms'] / 100")" = True ]
check "p99 of the GET latency under 50 ms: $(jl "round(d['p99_during'], 1)") ms during the removal, $(jl "round(d['p99'], 1)") ms over all" \
	[ "$(jl "d['p99_during'] < 50 and d['p99'] < 50")" = True ]
check "no request waited for the removal: max $(jl "round(d['max_during'], 1)") ms, under half its $(jl "d['removal_ms']") ms" \
	[ "$(jl "d['max_during'] < d['removal_ms'] / 2")" = True ]
check "the other run's command kept writing events during the removal ($(jl "d['events_during']"))" \
	[ "$(jl "d['events_during'] > 0")" = True ]
check "the directory of the run of 200,000 files is gone" run_dir_gone "$R1"
check "its remover ran as the sandbox user ($SBX_UID), not root" \
	grep -q "remover [0-9]* started for $T/state/runs/$R1/ws (uid $SBX_UID)" "$LOG"
check "the supervisor never removed a tree as root" [ "$(grep -c "remover [0-9]* started for .* (uid 0)" "$LOG")" = 0 ]

# --- a hostile workspace ----------------------------------------------------------
# What it links to outside is the sandbox user's own (so a remover that
# followed a link could destroy it), and so is the other run's workspace.
mkdir -p "$T/outside/dir"
echo kept >"$T/outside/keep"
echo kept >"$T/outside/dir/f"
chown -R "$SBX_UID:$SBX_UID" "$T/outside"
ETC_BEFORE=$(ls -A /etc | wc -l)
STATE_BEFORE=$(ls -A "$T/state" | sort | tr '\n' ' ')
OTHER="$T/state/runs/$R2/ws"
{
	cat <<EOF
  - name: one
    steps:
      - id: links
        kind: command
        run: "ln -s /etc etc && ln -s $T/state state && ln -s $OTHER other && ln -s $OTHER/keepme otherfile && ln -s $OTHER/keepdir otherdir && ln -s $T/outside out && ln -s $T/outside/keep keep && ln -s $T/outside/dir/f f && ln -s /proc/1/root rootlink && ln -s loop loop"
EOF
	cat <<'EOF'
      - id: deep
        kind: command
        run: |
          python3 -c "
          import os
          for i in range(5000):
              os.mkdir('d'); os.chdir('d')
          os.symlink('/etc', 'etc'); os.mkfifo('fifo')
          os.mkdir('shut'); open('shut/f', 'w').close(); os.chmod('shut', 0)
          "
      - id: odd
        kind: command
        run: "mkdir closed && touch closed/f && mkdir closed/sub && chmod 000 closed/sub closed && mkdir sticky && touch sticky/a && chmod 1777 sticky && mkfifo fifo && mkdir ro && touch ro/x && chmod 500 ro && ls -la | wc -l"
EOF
} | tmpl hostile
submit hostile
R3=$RUN
wait_for 120 is_status "$R3" succeeded
check "the hostile run succeeds ($(run_status "$R3"))" is_status "$R3" succeeded
wait_for 60 run_dir_gone "$R3"
check "the hostile run's directory is gone" run_dir_gone "$R3"
check "... removed by a remover, of at least 5,000 entries" \
	[ "$(sed -n "s|.*removed $T/state/runs/$R3/ws (\([0-9]*\) entries) in [0-9]* ms.*|\1|p" "$LOG" | head -1)" -ge 5010 ]
check "/etc is intact" [ -f /etc/passwd -a "$(ls -A /etc | wc -l)" = "$ETC_BEFORE" ]
check "the state directory is intact" [ "$(ls -A "$T/state" | sort | tr '\n' ' ')" = "$STATE_BEFORE" -a -s "$T/state/host-id" ]
check "the other run's workspace is intact" \
	[ "$(cat "$OTHER/keepme")" = kept -a "$(cat "$OTHER/keepdir/f")" = kept -a -e "$OTHER/ticking" ]
check "the sandbox user's files outside are intact" \
	[ "$(cat "$T/outside/keep")" = kept -a "$(cat "$T/outside/dir/f")" = kept ]
check "the log shows no failed removal" [ "$(grep -c "cannot remove\|remover [0-9]*:" "$LOG")" = 0 ]

# the ticking run goes on to the end, and its directory goes too
touch "$OTHER/stop"
wait_for 60 is_status "$R2" succeeded
check "the other run then finishes ($(run_status "$R2"))" is_status "$R2" succeeded
wait_for 30 run_dir_gone "$R2"
check "... and its directory is removed" run_dir_gone "$R2"

# --- agrippa-tree remove refuses to be used by hand -----------------------------------
mkdir -p "$T/victim/sub"
echo v >"$T/victim/sub/f"
chmod -R a+rX "$T/victim"
TREE="$ROOT/$BUILD/agrippa-tree"
"$TREE" remove x >/dev/null 2>&1
check "with an argument: usage, exit 2" [ $? -eq 2 ]
"$TREE" -d remove >/dev/null 2>&1 3<"$T/victim"
check "with a flag: usage, exit 2" [ $? -eq 2 ]
"$AGRIPPAD" -P remove >/dev/null 2>&1 3<"$T/victim"
check "agrippad has no remove role any more" [ $? -ne 0 -a -d "$T/victim/sub" ]
# by_hand ARGS...: the remover's output in ERR, its exit status in RC
by_hand() { ERR=$("$@" 2>&1); RC=$?; LINES=$(printf '%s\n' "$ERR" | wc -l); }
NOBODY="setpriv --reuid 65534 --regid 65534 --clear-groups"
by_hand "$TREE" remove 3<"$T/victim"
check "as root: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand $NOBODY "$TREE" remove 3<&-
check "without fd 3: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand $NOBODY "$TREE" remove 3<"$T/victim/sub/f"
check "with a file on fd 3: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand $NOBODY "$TREE" remove 3<"$T/victim"
check "with a directory it does not own on fd 3: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
check "... and the directory is intact" [ "$(cat "$T/victim/sub/f")" = v ]

# --- agrippa-tree chown: CAP_CHOWN alone, and not by hand ------------------------------
"$TREE" chown 3<"$T/victim" >/dev/null 2>&1
check "chown without a user: usage, exit 2" [ $? -eq 2 ]
CHOWNER="setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps -all,+chown --ambient-caps -all,+chown --bounding-set -all,+chown"
mkdir -p "$T/give/sub"
echo g >"$T/give/sub/f"
ln -s /etc/passwd "$T/give/sub/passwd"
chown -R -h 65534:65534 "$T/give"
by_hand $CHOWNER "$TREE" chown $SBX_UID $SBX_UID 3<"$T/give"
check "chown with CAP_CHOWN alone gives the tree ($ERR)" \
	[ $RC -eq 0 -a "$ERR" = 4 -a "$(stat -c %u "$T/give/sub/f")" = $SBX_UID ]
check "... a link itself, never its target" \
	[ "$(stat -c %u "$T/give/sub/passwd")" = $SBX_UID -a "$(stat -c %u /etc/passwd)" = 0 ]
by_hand "$TREE" chown $SBX_UID $SBX_UID 3<"$T/victim"
check "chown as root: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand $NOBODY "$TREE" chown $SBX_UID $SBX_UID 3<"$T/victim"
check "chown without CAP_CHOWN: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps -all,+chown,+fowner \
	--ambient-caps -all,+chown,+fowner "$TREE" chown $SBX_UID $SBX_UID 3<"$T/victim"
check "chown with another capability too: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand $CHOWNER "$TREE" chown $SBX_UID $SBX_UID 3<"$T/victim"
check "chown of a directory it does not own: refused, one line ($ERR)" \
	[ $RC -ne 0 -a "$LINES" = 1 -a "$(stat -c %u "$T/victim/sub/f")" = 0 ]
by_hand $CHOWNER "$TREE" chown 0 0 3<"$T/give"
check "chown to root: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]
by_hand $CHOWNER "$TREE" chown 1x 1 3<"$T/give"
check "chown to a bad user: refused, one line ($ERR)" [ $RC -ne 0 -a "$LINES" = 1 ]

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
stop_daemon
check "the daemon stops cleanly (status $DAEMON_STATUS)" [ "$DAEMON_STATUS" = 0 ]
finish remove
