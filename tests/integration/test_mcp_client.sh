#!/bin/sh
# The runner's MCP client (runner/mcp.c) against a real MCP server:
# @modelcontextprotocol/server-everything, pinned in tests/browser's
# lockfile (make deps), run over stdio by the machine's Node (20 or newer),
# driven by tests/tools/mcpcall on a pipe pair.  The handshake (the
# server/discover probe, then initialize: a legacy server), the tool list
# (a tool registered only after initialization, announced by list_changed;
# none of the tools that need a client capability, since none is
# declared), echo, get-sum, the long-running tool with progress (which
# keeps a call alive past its timeout, up to the hard maximum), a cancel,
# get-env (the server's environment comes back whole: redacting it is the
# agent loop's), an image, the cut, long server names; then commands that
# are no MCP server: one that exits at once, one that never answers, one
# that writes garbage, one that writes a 20 MiB line.
. tests/integration/lib.sh

SE=$ROOT/tests/browser/node_modules/@modelcontextprotocol/server-everything/dist/index.js
MCPCALL=$TOOLS/mcpcall
if [ ! -f "$SE" ] || ! command -v node >/dev/null 2>&1; then
	notok "node and server-everything are installed (make deps)"
	finish mcp_client
	exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
check "node is 20 or newer (node $(node --version))" [ "$major" -ge 20 ]
T=$(mktemp -d /tmp/agrippa-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
OUT=$T/out
ERR=$T/err

# ev ARGS...: mcpcall against server-everything; output in $OUT, $ERR
ev() {
	timeout 120 "$MCPCALL" "$@" -- node "$SE" stdio >"$OUT" 2>"$ERR"
}
has() { grep -qF -- "$1" "$OUT"; }
# the text of the nth call's result (1-based)
text_of() {
	awk -v n="$1" '/^call /{c++; if (c == n) {on = 1; next}} on && /^end$/ {exit} on' "$OUT"
}

# ---- the handshake and the list -------------------------------------------
ev -n everything -w -l
rc=$?
check "mcpcall exits 0 ($(tail -n 2 "$ERR" | tr '\n' ' '))" [ $rc -eq 0 ]
check "a legacy server: server/discover refused, initialize at 2025-11-25" has "version 2025-11-25 legacy"
check "notifications/tools/list_changed after initialization" has "changed 1"
for t in echo get-sum get-env trigger-long-running-operation get-tiny-image; do
	check "tool $t offered as mcp__everything__$t" has "tool mcp__everything__$t $t"
done
check "simulate-research-query, registered only after initialization, is listed" \
	has "tool mcp__everything__simulate-research-query simulate-research-query"
check "no tool that needs roots, sampling or elicitation (none declared)" \
	sh -c "! grep -Eq 'get-roots-list|trigger-sampling-request|trigger-elicitation-request' '$OUT'"
check "the server exited once its stdin closed" has "exit 0"

# ---- calls ---------------------------------------------------------------------
ev -n everything -c 'echo={"message":"hello world"}' -c 'get-sum={"a":2,"b":3}' \
	-c 'get-tiny-image={}' -c 'no-such-tool={}' -c 'get-sum={"a":"two"}'
check "calls ran" [ $? -eq 0 ]
check "echo" [ "$(text_of 1)" = "Echo: hello world" ]
check "get-sum" [ "$(text_of 2)" = "The sum of 2 and 3 is 5." ]
check "get-tiny-image: one image kept for the model" has "call get-tiny-image error=0 images=1 cut=0"
check "get-tiny-image: described in the text" sh -c "grep -q '^\[image: image/png, [0-9]* bytes\]$' '$OUT'"
check "an unknown tool is a tool error with the server's message" \
	sh -c "grep -q '^call no-such-tool error=1' '$OUT' && grep -q 'no-such-tool not found' '$OUT'"
check "bad arguments are a tool error" has "call get-sum error=1"

# ---- progress, the hard maximum, a cancel --------------------------------------
# the timeouts leave a late progress (a busy machine) 1.5 s, and are still
# shorter than the call, so that a client blind to progress fails
ev -n everything -t 2500 -T 20000 -c 'trigger-long-running-operation={"duration":3,"steps":3}' \
	-c 'echo={"message":"after"}'
check "a 3 s call with progress every second outlives a 2.5 s timeout" \
	has "call trigger-long-running-operation error=0"
check "three progress notifications" [ "$(grep -c '^progress [0-9]*/3$' "$OUT")" -eq 3 ]
check "its result" has "Long running operation completed. Duration: 3 seconds, Steps: 3."
ev -n everything -t 2500 -T 4000 -c 'trigger-long-running-operation={"duration":6,"steps":6}' \
	-c 'echo={"message":"after"}'
check "progress resets the timeout only up to the hard maximum (4 s)" \
	has "the tool call was stopped: it ran for the most a call may (4 s)"
check "the connection works after the call was given up" [ "$(text_of 2)" = "Echo: after" ]
ev -n everything -t 2000 -x 'trigger-long-running-operation={"duration":5,"steps":5}' \
	-c 'echo={"message":"after cancel"}'
check "a call cancelled by the caller ends at once as cancelled" [ "$(text_of 1)" = "cancelled" ]
check "the server took notifications/cancelled and answers the next call" \
	[ "$(text_of 2)" = "Echo: after cancel" ]
check "no late answer broke the connection" sh -c "! grep -q 'never sent' '$ERR'"

# ---- get-env: the server's environment, whole ----------------------------------
MCP_TEST_CREDENTIAL=ghp_test_credential_4711 ev -n everything -c 'get-env={}'
check "get-env returns the server's environment (the agent loop redacts it)" \
	has '"MCP_TEST_CREDENTIAL": "ghp_test_credential_4711"'
MCP_TEST_CREDENTIAL=x ev -n everything -m 200 -c 'get-env={}'
check "a result over the maximum is cut with the marker" \
	sh -c "grep -q '^call get-env error=0 images=0 cut=1$' '$OUT' && grep -q '^\[truncated: the first [0-9]* of [0-9]* bytes are shown\]$' '$OUT'"

# ---- names for models ------------------------------------------------------------
long=a-server-with-a-name-that-is-long-enough-to-push-tools-over
ev -n "$long" -l
check "a long server name: listed" [ $? -eq 0 ]
check "every model-facing name is at most 64 characters of [A-Za-z0-9_-]" \
	sh -c "awk '/^tool /{print \$2}' '$OUT' | grep -Evq '^[A-Za-z0-9_-]{1,64}\$' && exit 1; exit 0"
check "names are distinct after shortening" \
	[ "$(awk '/^tool /{print $2}' "$OUT" | sort | uniq -d | wc -l)" -eq 0 ]
check "a shortened name keeps the tool's name whole, the server's cut, and ends with the hash" \
	sh -c "grep -Eq '^tool mcp__a-server-with-__trigger-long-running-operation_[0-9a-f]{12} trigger-long-running-operation$' '$OUT'"

# ---- commands that are no MCP server --------------------------------------------
bad() {
	timeout 60 "$MCPCALL" -s "$1" -l -- sh -c "$2" >"$OUT" 2>"$ERR"
	echo $?
}
check "a server that exits at once: an error" [ "$(bad 5000 'exit 0')" -eq 1 ]
check "... that says the server closed" grep -q "the server closed its" "$ERR"
check "a server that never answers: an error at the start timeout" [ "$(bad 1500 'cat >/dev/null')" -eq 1 ]
check "... naming it" grep -q "no answer to server/discover within 1500 ms" "$ERR"
check "a server that writes garbage: an error" [ "$(bad 5000 'echo Server started; cat >/dev/null')" -eq 1 ]
check "... naming the line" grep -q 'no MCP message: not JSON.*"Server started"' "$ERR"
start=$(date +%s)
check "a server that writes a 20 MiB line: an error" \
	[ "$(bad 5000 'head -c 20971520 /dev/zero | tr "\0" a; echo; cat >/dev/null')" -eq 1 ]
check "... at the cap" grep -q "a line longer than 8388608 bytes" "$ERR"
check "... within seconds" [ $(($(date +%s) - start)) -lt 30 ]

finish mcp_client
