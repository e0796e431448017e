#!/bin/sh
# A stdio MCP server in a sandbox of its own, through agrippactl mcp test
# against the real daemon: @modelcontextprotocol/server-everything (the
# host's node from /usr, the package from tests/browser/node_modules bound
# read-only through "paths") lists its tools and answers calls (mcp test
# -c); a server given a credential through env has it in its environment
# alone (not in the daemon's log, redacted from what mcp test shows); its
# get-env, which prints that environment, reaches the MCP client with the
# credential masked by the sandbox's relay: strace of the daemon's
# processes sees the relay read the value from the server and the client
# (agrippa-mcpc) read none of it, so the supervisor's own redaction of the
# client's text is not what hides it; the server's sandbox cannot read the
# daemon's state or keys, has no network, cannot write its paths, sees no
# process of the host; servers that exit at once, never answer, flood
# stderr, write a 20 MiB line, close their output or answer and exit at
# once each give a clear error with the daemon healthy; a 6 MiB line costs
# the relay no more memory than silence (a relay holding whole lines fails
# it); bad options of mcp
# test are refused with the option named; nothing of any server is left
# running or mounted afterwards.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
need_root mcp_sandbox

NM=$ROOT/tests/browser/node_modules
SE=$NM/@modelcontextprotocol/server-everything/dist/index.js
NODE=$(command -v node)
if [ ! -f "$SE" ] || [ -z "$NODE" ]; then
	notok "node and server-everything are installed (make deps)"
	finish mcp_sandbox
	exit 1
fi
case $NODE in
/usr/*) ;;
*) NODE=/usr/bin/node ;;
esac
make_env
trap cleanup_env EXIT
start_daemon_or_finish mcp_sandbox

ALL_OUT="$T/all.out"
: >"$ALL_OUT"
run() {
	OUT=$("$AGRIPPACTL" -s "$CTL" "$@" 2>&1 </dev/null)
	RC=$?
	printf '%s\n' "$OUT" >>"$ALL_OUT"
}
run_in() {
	input=$1
	shift
	OUT=$(printf '%s' "$input" | "$AGRIPPACTL" -s "$CTL" "$@" 2>&1)
	RC=$?
	printf '%s\n' "$OUT" >>"$ALL_OUT"
}
sandboxes() { "$AGRIPPACTL" -s "$CTL" -j status 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["sandboxes"])'; }
# no sandbox left: the status count is 0 within 10 s
no_sandbox_left() {
	i=0
	while [ "$(sandboxes)" != 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ "$(sandboxes)" = 0 ]
}
healthy() { [ "$(healthz_code)" = 200 ] && kill -0 "$SUP_PID"; }
# spec NAME STARTUP CMD-JSON-ARRAY [EXTRA-FIELDS [PATHS-JSON-ARRAY]]: write $T/NAME.json
spec() {
	printf '{"transport":"stdio","command":%s,"paths":%s,"startup_timeout":%s%s}\n' \
		"$3" "${5:-[\"$NM\"]}" "$2" "${4:-}" >"$T/$1.json"
}

RND=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
SECRET="mcpsecret_${RND}_x"
CREDS="{\"token\":\"$SECRET\"}"

# ---- server-everything ---------------------------------------------------------
spec everything 30 "[\"$NODE\",\"$SE\",\"stdio\"]" ',"env":{"API_TOKEN":"${credentials.token}"}'
run_in "$CREDS" mcp add everything "$T/everything.json"
expect 0 "mcp server everything version 1 added (with credentials)" "mcp add of server-everything with a credential"
t0=$(date +%s%N)
run mcp test everything
t1=$(date +%s%N)
expect 0 "protocol 2025-11-25 (legacy)" "mcp test everything: the handshake, in its sandbox"
for tool in echo get-sum get-env trigger-long-running-operation; do
	check "... lists $tool" has "^$tool  *[A-Z]"
done
echo "# mcp test everything took $(((t1 - t0) / 1000000)) ms"
run -j mcp test everything
check "mcp test -j is JSON with the tools" sh -c "printf '%s' \"\$0\" | python3 -c '
import json,sys
d = json.load(sys.stdin)[\"data\"]
names = [t[\"name\"] for t in d[\"tools\"]]
assert d[\"protocol\"] == \"2025-11-25\" and d[\"era\"] == \"legacy\", d
assert \"echo\" in names and \"get-sum\" in names and \"get-env\" in names, names
assert d[\"shown\"] == len(names) and d[\"listed\"] >= len(names)
'" "$OUT"
check "no sandbox left after mcp test" no_sandbox_left
run mcp test everything 2
expect 1 "mcp server everything has no version 2" "mcp test of a missing version"
run mcp test nosuch
expect 1 "no such mcp server nosuch" "mcp test of a missing server"
run mcp test everything x
expect 1 "VERSION must be a number" "mcp test with a bad version"

# ---- calls (mcp test -c) ------------------------------------------------------------
run mcp test -c echo -a '{"message":"hello through the relay"}' everything
expect 0 "Echo: hello through the relay" "mcp test -c echo: the tool's result"
check "... timed" has "^echo: a result in [0-9.]* ms"
run mcp test -c get-sum -a '{"a":2,"b":40}' -n 25 everything 1
expect 0 "42" "mcp test -c get-sum -n 25 of version 1: the sum"
check "... 25 calls, their times" has "^get-sum: 25 calls, 0 with an error; per call (ms): median [0-9.]*, min"
run -j mcp test -c echo -a '{"message":"x"}' -n 50 everything
check "mcp test -j -c: JSON with the calls' times in microseconds" sh -c "printf '%s' \"\$0\" | python3 -c '
import json,sys
d = json.load(sys.stdin)[\"data\"]
c = d[\"call\"]
assert c[\"tool\"] == \"echo\" and c[\"count\"] == 50 and c[\"errors\"] == 0, c
u = c[\"us\"]
assert 0 < u[\"min\"] <= u[\"median\"] <= u[\"p90\"] <= u[\"p99\"] <= u[\"max\"], u
assert c[\"text\"] == \"Echo: x\" and c[\"is_error\"] is False, c
assert 0 < d[\"ready_us\"] <= d[\"listed_us\"], d
assert d[\"tools\"] == [] and d[\"shown\"] == 0, d
'" "$OUT"
run mcp test -c no-such-tool everything
expect 0 "^error: " "mcp test -c of a tool the server does not have: its error, shown as one"
run mcp test -c echo -a '{"message":' everything
expect 1 "mcp test: -a: ARGS is not JSON" "mcp test -a with bad JSON: refused, the option named"
run mcp test -c echo -a '[1]' everything
expect 1 "mcp test: -a: ARGS must be a JSON object" "mcp test -a with an array: refused"
run mcp test -c echo -n 0 everything
expect 1 "mcp test: -n: COUNT must be a number from 1 to 10000" "mcp test -n 0: refused"
run mcp test -c echo -n 10001 everything
expect 1 "COUNT must be a number from 1 to 10000" "mcp test -n 10001: refused"
run mcp test -c 'two words' everything
expect 1 "mcp test: -c: TOOL must be" "mcp test -c with a space in the name: refused"
run mcp test -n 5 everything
expect 2 "-a and -n go with -c" "mcp test -n without -c: agrippactl's usage"
check "no sandbox left after the refused ones (none was started)" no_sandbox_left

# ---- the credential leaves the sandbox masked -------------------------------------------
# traced_test NAME ARGS...: run mcp test ARGS while strace follows every
# process the daemon starts (the sandbox, its relay, the server, the
# client), each read's bytes in hex; $T/NAME.verdict says what the client
# and the relay read.
traced_test() {
	name=$1
	shift
	mkdir -p "$T/$name"
	"$STRACE" -f -ff -qq -xx -s 1048576 -e trace=read,execve,execveat -o "$T/$name/st" -p "$SUP_PID" 2>"$T/$name/strace.err" &
	STRACE_PID=$!
	sleep 1
	run mcp test "$@"
	kill "$STRACE_PID" 2>/dev/null
	wait "$STRACE_PID" 2>/dev/null
	python3 - "$T/$name" "$SECRET" >"$T/$name.verdict" 2>&1 <<'PY'
import glob, re, sys
t, secret = sys.argv[1], sys.argv[2].encode()
rd = re.compile(r'^read\((\d+), "((?:\\x[0-9a-f]{2})*)"')
strs = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')
hexs = lambda s: bytes.fromhex(s.replace('\\x', ''))
client = relay = server = None
for f in glob.glob(t + '/st.*'):
	prog, data = None, {}
	for line in open(f, errors='replace'):
		# execve(PATH, [ARGV0, ...]) or execveat(FD, "", [ARGV0, ...]): the
		# names of the path and of argv[0]
		if line.startswith('execve') and line.rstrip().endswith(' = 0'):
			prog = [hexs(x).decode(errors='replace').rsplit('/', 1)[-1] for x in strs.findall(line)[:2]]
		m = rd.match(line)
		if m:
			data.setdefault(int(m.group(1)), []).append(hexs(m.group(2)))
	if prog is None:
		continue
	if 'agrippa-mcpc' in prog:
		client = data
	elif 'agrippa-sandbox' in prog:
		relay = data
	elif 'node' in prog or 'sh' in prog:
		server = data
print('client', client is not None, 'relay', relay is not None, 'server', server is not None)
if client is None or relay is None:
	sys.exit('not every process was traced')
chan = b''.join(client.get(3, []))
print('client read %d bytes on its channel, %d with the value, masked %d' % (len(chan), chan.count(secret), chan.count(b'*' * len(secret))))
print('relay read the value %d times' % sum(b''.join(r).count(secret) for r in relay.values()))
# on a descriptor: found in its bytes joined, not in any one read
print('relay read it split across reads %d times' % sum(
	b''.join(r).count(secret) - sum(x.count(secret) for x in r) for r in relay.values()))
log = b''.join(client.get(4, []))
print('client read %d bytes of the server\'s stderr, %d with the value, masked %d' % (len(log), log.count(secret), log.count(b'*' * len(secret))))
print('client read it anywhere:', any(secret in b''.join(r) for r in client.values()))
PY
	echo "# $name: $(tr '\n' ';' <"$T/$name.verdict")"
}
STRACE=$(command -v strace || true)
if [ -z "$STRACE" ]; then
	notok "strace is installed (make deps: it proves what the MCP client read)"
else
	traced_test getenv -c get-env everything
	expect 0 "API_TOKEN" "mcp test -c get-env: the server's environment, as it printed it"
	STARS=$(printf '%s' "$SECRET" | sed 's/./\\*/g')
	check "... its credential masked byte for byte" has "\"API_TOKEN\": \"$STARS\""
	check "... and not in the clear" sh -c "! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
	check "strace followed the client, the relay and the server" grep -q "^client True relay True server True" "$T/getenv.verdict"
	check "the relay read the credential from the server's output (get-env printed it)" grep -Eq "^relay read the value [1-9]" "$T/getenv.verdict"
	check "the MCP client read the masked value on its channel" grep -Eq "^client read [0-9]+ bytes on its channel, 0 with the value, masked [1-9]" "$T/getenv.verdict"
	check "the MCP client read no byte string holding the credential, on any descriptor" grep -q "^client read it anywhere: False" "$T/getenv.verdict"
	check "the daemon is healthy after strace let go" healthy

	# a server that writes its credential in two parts half a second apart,
	# in a line that is no MCP message (which the client quotes back)
	SPLIT_JSON=$(python3 -c 'import json; print(json.dumps(["/bin/sh", "-c", "a=$(printf %s \"$API_TOKEN\" | cut -c1-12); b=$(printf %s \"$API_TOKEN\" | cut -c13-); printf %s \"x=$a\"; sleep 0.5; printf \"%s tail\\n\" \"$b\"; sleep 1000"]))')
	spec split 10 "$SPLIT_JSON" ',"env":{"API_TOKEN":"${credentials.token}"}'
	run_in "$CREDS" mcp add split "$T/split.json"
	traced_test split split
	expect 1 "no MCP message" "a server writing its credential in two parts: the client quotes the line"
	check "... masked" has "x=$STARS tail"
	check "the relay read the value split across two reads" grep -Eq "^relay read it split across reads [1-9]" "$T/split.verdict"
	check "the MCP client read the masked value" grep -Eq "^client read [0-9]+ bytes on its channel, 0 with the value, masked 1" "$T/split.verdict"
	check "the MCP client read no byte string holding the credential" grep -q "^client read it anywhere: False" "$T/split.verdict"
fi

# ---- what the server's sandbox holds and reaches ---------------------------------
# The probe is the server's command itself (argv), run by /bin/sh: no file
# of the test's needs mounting.
PROBE='echo "UID:$(id -u)"
env | sort | sed "s/^/ENV:/"
if cat "'"$T"'/keys/master.key" >/dev/null 2>&1; then echo KEY:READ; else echo KEY:unreadable; fi
if ls "'"$T"'/state" >/dev/null 2>&1; then echo STATE:SEEN; else echo STATE:absent; fi
if ls "'"$T"'/agrippad.yaml" >/dev/null 2>&1; then echo CONF:SEEN; else echo CONF:absent; fi
if touch "'"$NM"'/probe-write" 2>/dev/null; then echo PATHS:WRITTEN; else echo PATHS:read-only; fi
if ls "'"$SE"'" >/dev/null 2>&1; then echo PATHS:visible; else echo PATHS:INVISIBLE; fi
echo "PIDS:$(ls -d /proc/[0-9]* | wc -l)"
'"$NODE"' -e "const s=require(\"net\").connect('"$PORT"',\"127.0.0.1\");s.on(\"connect\",()=>{console.log(\"NET:CONNECTED\");process.exit(0)});s.on(\"error\",e=>{console.log(\"NET:\"+e.code);process.exit(0)})"
echo PROBE-END
exit 3'
# Everything on stderr, the server's stdout left open until its exit: its
# output closing is the failure, and the client keeps the stderr that
# follows it for half a second only (MCPC_DRAIN_MS); node starting in the
# sandbox of a loaded machine once took longer than that.
PROBE_JSON=$(printf '%s' "$PROBE" | python3 -c 'import json,sys; l=sys.stdin.read().splitlines(); print(json.dumps(["/bin/sh","-c","{ "+"; ".join(l[:-1])+"; } >&2; "+l[-1]]))')
spec probe 10 "$PROBE_JSON" ',"env":{"API_TOKEN":"${credentials.token}"}'
run_in "$CREDS" mcp add probe "$T/probe.json"
expect 0 "mcp server probe version 1 added" "mcp add of a probing server"
if [ -n "$STRACE" ]; then
	traced_test probe probe
	check "its stderr (its environment) reached the client masked by the relay" grep -Eq "^client read [0-9]+ bytes of the server's stderr, 0 with the value, masked [1-9]" "$T/probe.verdict"
	check "... and the client read the credential nowhere" grep -q "^client read it anywhere: False" "$T/probe.verdict"
else
	run mcp test probe
fi
expect 1 "PROBE-END" "a server that exits fails mcp test with its stderr tail"
check "the server runs as the sandbox user (1000 inside)" has "UID:1000"
check "the credential is in its environment, redacted in the output" has "ENV:API_TOKEN=\*\*\*\*\*\*\*\*"
check "... and not in the clear" sh -c "! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
check "its environment is the server's env and the defaults only (a sanitized build: its options too)" sh -c "
	printf '%s\n' \"\$0\" | sed -n 's/^ENV:\([^=]*\)=.*/\1/p' | grep -Ev '^(ASAN|UBSAN)_OPTIONS\$' |
	sort | tr '\n' ' ' |
	grep -qx 'AGRIPPA_SANDBOX API_TOKEN HOME LANG PATH PWD '" "$OUT"
check "it cannot read the master key" has "KEY:unreadable"
check "it cannot see the daemon's state directory" has "STATE:absent"
check "it cannot see the daemon's configuration" has "CONF:absent"
check "its paths are visible" has "PATHS:visible"
check "its paths are read-only" has "PATHS:read-only"
check "nothing was written there" [ ! -e "$NM/probe-write" ]
check "it sees only its own processes (pid namespace)" sh -c "printf '%s\n' \"\$0\" | grep -Eq '^PIDS:[1-6]\$'" "$OUT"
echo "# the probe's connection: $(printf '%s\n' "$OUT" | grep "^NET:")"
check "it has no network without an allow-list (loopback of the host unreachable)" \
	sh -c "printf '%s\n' \"\$0\" | grep -E '^NET:' | grep -qv CONNECTED" "$OUT"
check "the daemon is healthy" healthy

# ---- servers that misbehave ---------------------------------------------------------
spec dies 10 '["/bin/sh","-c","echo dying-at-once >&2; exit 7"]'
run mcp add dies "$T/dies.json"
run mcp test dies
expect 1 "dying-at-once" "a server that exits at once: its stderr in the error"
check "... and the error says the connection ended" has "mcp test dies: "
check "the daemon is healthy" healthy

spec mute 2 '["/bin/sleep","1000"]'
run mcp add mute "$T/mute.json"
t0=$(date +%s)
run mcp test mute
t1=$(date +%s)
expect 1 "within 2" "a server that never answers: no answer within its startup_timeout"
check "... said within seconds ($((t1 - t0)) s)" [ $((t1 - t0)) -lt 30 ]
check "... and it wrote nothing on stderr" has "wrote nothing on stderr"
check "no sandbox left (the silent server was stopped)" no_sandbox_left
check "the daemon is healthy" healthy

spec flood 3 '["/bin/sh","-c","while :; do echo flood-line-of-stderr; done >&2"]'
run mcp add flood "$T/flood.json"
run mcp test flood
expect 1 "flood-line-of-stderr" "a server flooding stderr: a clear error with the tail"
check "... the tail is capped" [ "$(printf '%s' "$OUT" | wc -c)" -lt 4200 ]
check "no sandbox left (the flooding server was stopped)" no_sandbox_left
check "the daemon is healthy" healthy

spec huge 10 '["/bin/sh","-c","head -c 20971520 /dev/zero | tr \"\\\\000\" x; echo; sleep 1000"]'
run mcp add huge "$T/huge.json"
run mcp test huge
expect 1 "longer than" "a server writing a 20 MiB line: the line cap"
check "no sandbox left (the server was stopped)" no_sandbox_left
check "the daemon is healthy" healthy

check "... the client's own cap said so" has "longer than 8388608 bytes"
check "... and the relay's word on stderr" has "the MCP server wrote a line longer than 8388608 bytes on its output; the connection is closed and the server stopped"

# The relay's memory is its window whatever the line: a server writing a
# 6 MiB line (under the cap, never ended) costs its relay no more than one
# that writes nothing.  VmHWM: the relay's peak resident memory.
# (one grep finds it, not a fork per process; the peak is read until the
# relay has had 3 s or is gone, its server's startup_timeout over)
relay_hwm() { # relay_hwm MARK: the peak of the relay whose command line has MARK, once it is quiet
	i=0 pid=""
	while [ -z "$pid" ] && [ $i -lt 100 ]; do
		for f in $(grep -lzs -e "$1" /proc/[0-9]*/cmdline); do
			tr '\0' ' ' <"$f" 2>/dev/null | grep -q "^agrippa-sandbox mcp [0-9]* .*$1" &&
				pid=${f#/proc/} && pid=${pid%/cmdline}
		done
		[ -n "$pid" ] || sleep 0.1
		i=$((i + 1))
	done
	[ -n "$pid" ] || return 1
	hwm="" i=0
	while [ $i -lt 15 ]; do # the line is written and read by the end
		v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
		[ -n "$v" ] || break
		hwm=$v
		sleep 0.2
		i=$((i + 1))
	done
	[ -n "$hwm" ] && echo "$hwm"
}
spec quiet 6 '["/bin/sh","-c","echo quiet-marker >/dev/null; sleep 1000"]'
run mcp add quiet "$T/quiet.json"
spec longline 6 '["/bin/sh","-c","echo longline-marker >/dev/null; head -c 6291456 /dev/zero | tr \"\\\\000\" y; sleep 1000"]'
run mcp add longline "$T/longline.json"
"$AGRIPPACTL" -s "$CTL" mcp test quiet >"$T/quiet.out" 2>&1 &
QJOB=$!
HWM_QUIET=$(relay_hwm quiet-marker || echo "")
wait "$QJOB"
"$AGRIPPACTL" -s "$CTL" mcp test longline >"$T/longline.out" 2>&1 &
LJOB=$!
HWM_LONG=$(relay_hwm longline-marker || echo "")
wait "$LJOB"
echo "# the relay's peak resident memory: ${HWM_QUIET:-?} kB for a silent server, ${HWM_LONG:-?} kB for a 6 MiB line"
check "a relay was found for each" sh -c "[ -n '$HWM_QUIET' ] && [ -n '$HWM_LONG' ]"
check "the 6 MiB line cost its relay less than 1 MiB more than silence" \
	[ "$((${HWM_LONG:-999999} - ${HWM_QUIET:-0}))" -lt 1024 ]
check "... and the client waited for its end (no answer within its startup_timeout)" grep -q "within 6" "$T/longline.out"

spec nocmd 5 '["/nonexistent/server"]'
run mcp add nocmd "$T/nocmd.json"
run mcp test nocmd
expect 1 "cannot execute /nonexistent/server" "a command that does not exist: said"

spec closes 60 '["/bin/sh","-c","exec >&-; echo closed-its-output >&2; sleep 1000"]'
run mcp add closes "$T/closes.json"
t0=$(date +%s)
run mcp test closes
t1=$(date +%s)
expect 1 "the server closed its output" "a server that closes its stdout and lives on: the client sees the end of its output"
check "... at once, not at its startup_timeout of 60 s ($((t1 - t0)) s)" [ $((t1 - t0)) -lt 30 ]
check "no sandbox left (the server was stopped)" no_sandbox_left

# a line written just before exiting is flushed to the client: here, to
# the client's first request, an answer to an id it never sent, which the
# client names
QUICK_JSON=$(python3 -c 'import json; print(json.dumps(["/bin/sh", "-c", "read -r first; echo \x27{\"jsonrpc\":\"2.0\",\"id\":424242,\"result\":{}}\x27; exit 0"]))')
spec quick 10 "$QUICK_JSON"
run mcp add quick "$T/quick.json"
run mcp test quick
expect 1 "an answer to id 424242, which this client never sent" "a server that answers and exits at once: its last line reached the client"
check "the daemon is healthy" healthy

# ---- nothing left ---------------------------------------------------------------------
check "no sandbox left at the end" no_sandbox_left
# (other tests on the host may run sandboxes under the same uid: look at ours)
descendants() {
	for c in $(children_of "$1"); do
		echo "$c"
		descendants "$c"
	done
}
names=$(for p in $(descendants "$SUP_PID"); do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null; echo; done)
check "no server, tool server or MCP client left under the daemon" sh -c \
	"! printf '%s\n' \"\$0\" | grep -Eq 'agrippa-sandbox|agrippa-mcpc|node|sleep|flood'" "$names"
ids=$(sed -n 's/.*sandbox \(sbx-[0-9a-f]*\) started.*an MCP server.*/\1/p' "$LOG" | sort -u)
check "the servers' sandboxes were logged ($(echo $ids | wc -w) of them)" [ "$(echo $ids | wc -w)" -ge 15 ]
left=""
for id in $ids; do
	left="$left$(find /sys/fs/cgroup -maxdepth 6 -type d -name "$id" 2>/dev/null)"
done
check "no cgroup of a server's sandbox left (so no process in one)" [ -z "$left" ]
check "no mount of a server's sandbox left on the host" sh -c "! grep -q '$T/state/sandboxes' /proc/self/mountinfo"
check "no sandbox workspace left" sh -c "[ -z \"\$(ls -A '$T/state/sandboxes' 2>/dev/null)\" ]"
check "the credential is not in the daemon's log" sh -c "! grep -q '$RND' '$LOG'"
check "the credential is in no agrippactl output" sh -c "! grep -q '$RND' '$ALL_OUT'"

stop_daemon
check "the daemon stopped cleanly" [ "$DAEMON_STATUS" = 0 ]
finish mcp_sandbox
