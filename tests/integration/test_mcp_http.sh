#!/bin/sh
# The proxy's Streamable HTTP bridge (proxy/mcphttp.c) with the runner's
# MCP client (runner/mcp.c) on the other end of a socketpair, driven by
# agrippa-mcp-conformance:
#  - against the real @modelcontextprotocol/server-everything (pinned in
#    tests/browser's lockfile) in its streamableHttp mode: the handshake
#    (server/discover refused, initialize), tools/list, echo, get-sum, the
#    long-running tool with its progress, the session id on every request
#    and DELETE at the close (the session is gone afterwards);
#  - against tests/fakes/mcp_http.py, a hostile server: a wrong content
#    type, JSON that is not JSON, an answer to another id, a batch, an SSE
#    stream cut before the response and resumed with Last-Event-ID, one cut
#    without an id, a 20 MiB body and a 20 MiB event, a 500 with a body, a
#    redirect, an answer that is too slow, a 404 on the session, a server
#    that echoes the credential header (raw and \u-escaped): each a clear
#    error for that call, the next call answered; the credential redacted;
#  - URLs the bridge refuses.
# Everything runs in a network namespace of the test's own with only lo,
# since server-everything listens on every address.
if [ -z "${MCPHTTP_NETNS:-}" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		exec unshare -n env MCPHTTP_NETNS=1 sh "$0" "$@"
	fi
	echo "test_mcp_http: needs root for a network namespace of its own" >&2
	echo "mcp_http: 0 passed, 1 failed"
	exit 1
fi
ip link set lo up
. tests/integration/lib.sh

SE=$ROOT/tests/browser/node_modules/@modelcontextprotocol/server-everything/dist/index.js
DRV=$ROOT/$BUILD/agrippa-mcp-conformance
if [ ! -f "$SE" ] || ! command -v node >/dev/null 2>&1 || [ ! -x "$DRV" ]; then
	notok "node, server-everything (make deps) and agrippa-mcp-conformance (make tests) are there"
	finish mcp_http
	exit 1
fi
T=$(mktemp -d /tmp/agrippa-test.XXXXXX)
: >"$T/allerr"
SEPID=""
FPID=""
cleanup() {
	[ -n "$SEPID" ] && kill "$SEPID" 2>/dev/null
	[ -n "$FPID" ] && kill "$FPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
OUT=$T/out
ERR=$T/err
has() { grep -qF -- "$1" "$OUT"; }
# drv ARGS...: the driver, output in $OUT and $ERR (every stderr kept in
# $T/allerr, searched for sanitizer reports at the end)
drv() {
	timeout 60 "$DRV" "$@" >"$OUT" 2>"$ERR"
	drv_rc=$?
	cat "$ERR" >>"$T/allerr"
	return $drv_rc
}
# the text of the nth call's result (1-based)
text_of() {
	awk -v n="$1" '/^call /{c++; if (c == n) {on = 1; next}} on && /^end$/ {exit} on' "$OUT"
}
# wait_port HOST PORT: until something listens (10 s)
wait_port() {
	i=0
	while [ $i -lt 100 ]; do
		curl -s -o /dev/null "http://$1:$2/" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# ---- server-everything ----------------------------------------------------------
SEPORT=38211
PORT=$SEPORT node "$SE" streamableHttp >"$T/se.log" 2>&1 &
SEPID=$!
check "server-everything listens (streamableHttp)" wait_port 127.0.0.1 $SEPORT
URL=http://127.0.0.1:$SEPORT/mcp
drv -T 20000 -l -c 'echo={"message":"hello over http"}' -c 'get-sum={"a":2,"b":40}' \
	-c 'trigger-long-running-operation={"duration":2,"steps":2}' -c 'no-such-tool={}' \
	"$URL"
rc=$?
check "the driver exits 0 ($(tail -n 2 "$ERR" | tr '\n' ' '))" [ $rc -eq 0 ]
check "a legacy server over HTTP: initialize at 2025-11-25" has "version 2025-11-25 legacy"
for t in echo get-sum get-env trigger-long-running-operation; do
	check "tool $t listed" has "tool mcp__server__$t $t"
done
check "echo" [ "$(text_of 1)" = "Echo: hello over http" ]
check "get-sum" [ "$(text_of 2)" = "The sum of 2 and 40 is 42." ]
check "two progress notifications through the SSE stream" \
	[ "$(grep -c '^progress [0-9.]*/2$' "$OUT")" -eq 2 ]
check "the long-running operation's result" has "Long running operation completed. Duration: 2 seconds, Steps: 2."
check "an unknown tool is a tool error" sh -c "grep -q '^call no-such-tool error=1' '$OUT'"
SID=$(sed -n 's/^session //p' "$OUT")
check "the server assigned a session id ($SID)" [ -n "$SID" ]
check "the bridge was done after the client closed" has "closed"
check "DELETE ended the session on the server" grep -q "session termination request for session $SID" "$T/se.log"
st=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	-H 'Accept: application/json, text/event-stream' -H "Mcp-Session-Id: $SID" \
	-H 'MCP-Protocol-Version: 2025-11-25' \
	--data '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' "$URL")
check "the session is gone afterwards (HTTP $st: no valid session)" [ "$st" = 404 -o "$st" = 400 ]
kill "$SEPID" 2>/dev/null
wait "$SEPID" 2>/dev/null
SEPID=""

# ---- a hostile server ----------------------------------------------------------
LOG=$T/fake.log
python3 "$ROOT/tests/fakes/mcp_http.py" --port-file "$T/port" --log "$LOG" &
FPID=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
FURL=http://127.0.0.1:$(cat "$T/port")/mcp
SECRET=ghp_bridge_secret_4711
# hascall TOOL TEXT: the call of TOOL was a tool error and TEXT is in the output
hascall() { grep -q "^call $1 error=1" "$OUT" && grep -qF -- "$2" "$OUT"; }
# hostile TOOL ERRTEXT: a call of TOOL is a tool error saying ERRTEXT, and
# the call after it on the same bridge is answered (the bridge's cap on a
# request: $CAP ms, 30 s when unset)
hostile() {
	drv -t "${CAP:-30000}" -H "Authorization: Bearer $SECRET" -S "$SECRET" \
		-c "$1={}" -c 'ok={}' "$FURL"
	rc=$?
	check "$1: the driver exits 0 ($(tail -n 1 "$ERR"))" [ $rc -eq 0 ]
	check "$1: a tool error: $2" hascall "$1" "$2"
	check "$1: the next call on the bridge is answered" [ "$(text_of 2)" = ok ]
}
hostile ctype "the server answered with content of type text/html, neither application/json nor text/event-stream"
hostile badjson "the server's answer is not a JSON-RPC message: not JSON"
hostile otherid "the server's answer does not answer the request"
hostile batch "a JSON-RPC batch, which MCP does not allow"
hostile cut "the server's event stream ended before the response, without an event id to resume it from"
hostile big "the server's answer is over 8388608 bytes"
hostile bigsse "an event of the server's stream is over 8388608 bytes"
hostile e500 "the server answered HTTP 500: internal trouble  in the server"
hostile redirect "the server answered with a redirect (HTTP 302), which is not followed"
check "redirect: not followed (no request reached 127.0.0.2, where it pointed)" \
	sh -c "grep -q '\"host\": \"127.0.0.1\"' '$LOG' && ! grep -q '\"host\": \"127.0.0.2\"' '$LOG'"
CAP=3000 hostile slow "tools/call: no answer within 3000 ms"
CAP=3000 hostile trickle "tools/call: no answer within 3000 ms"

# a cancel: notifications/cancelled goes to the server, the call's stream is
# closed, and the next call is answered
: >"$LOG"
drv -T 2000 -x 'slow={}' -c 'ok={}' "$FURL"
check "cancel: the driver exits 0" [ $? -eq 0 ]
check "cancel: the call ended as cancelled" [ "$(text_of 1)" = cancelled ]
check "cancel: the next call is answered" [ "$(text_of 2)" = ok ]
check "cancel: notifications/cancelled reached the server" \
	grep -q '"rpc": "notifications/cancelled"' "$LOG"
check "legacy: the GET stream for the server's messages was opened" \
	sh -c "grep '\"method\": \"GET\"' '$LOG' | grep -vq 'last-event-id'"
check "legacy: the client answered the ping that came on it (POSTed by the bridge)" \
	grep -q '"method": "POST".*"answers": "srv-ping-1"' "$LOG"

# requests in flight: two slow calls fill a cap of 2, the third is refused at once
drv -i 2 -t 3000 -p -c 'slow={}' -c 'slow={}' -c 'ok={}' "$FURL"
check "in flight: the driver exits 0" [ $? -eq 0 ]
check "in flight: the third call is refused at once (it ends first)" \
	sh -c "grep '^call ' '$OUT' | head -n 1 | grep -q '^call ok error=1'"
check "in flight: with the cap named" has "too many requests in flight to the server"
check "in flight: the two slow calls time out" [ "$(grep -c '^call slow error=1' "$OUT")" -eq 2 ]

# resumption: the stream cut after its priming event, resumed with GET
drv -c 'resume={}' -c 'ok={}' "$FURL"
check "resume: the driver exits 0" [ $? -eq 0 ]
check "resume: the result came on the resumed stream" [ "$(text_of 1)" = "resumed after the stream was cut" ]
check "resume: GET with Last-Event-ID e1 and the session id" \
	sh -c "grep '\"method\": \"GET\"' '$LOG' | grep '\"last-event-id\": \"e1\"' | grep -q '\"mcp-session-id\": \"fake-session-7f3a\"'"

# the headers the bridge sends
: >"$LOG"
drv -H "Authorization: Bearer $SECRET" -S "$SECRET" -c 'ok={}' "$FURL"
check "headers: the spec's header on every request" \
	[ "$(grep -c "\"authorization\": \"Bearer $SECRET\"" "$LOG")" -eq "$(wc -l <"$LOG")" ]
check "headers: initialize without MCP-Protocol-Version or a session" \
	sh -c "grep '\"rpc\": \"initialize\"' '$LOG' | grep -vq 'mcp-protocol-version\|mcp-session-id'"
check "headers: tools/call with the version, the session, Mcp-Method and Mcp-Name" \
	grep -q '"rpc": "tools/call".*"mcp-method": "tools/call", "mcp-name": "ok", "mcp-protocol-version": "2025-11-25", "mcp-session-id": "fake-session-7f3a"' "$LOG"
check "headers: Accept names both JSON and SSE on a POST" \
	grep -q '"accept": "application/json, text/event-stream"' "$LOG"
check "headers: DELETE with the session id at the close" \
	grep -q '"method": "DELETE".*"mcp-session-id": "fake-session-7f3a"' "$LOG"

# the credential echoed back: redacted, raw and \u-escaped
drv -H "Authorization: Bearer $SECRET" -c 'echo={}' "$FURL"
check "echo without the secret given: the control shows the value comes back" has "$SECRET"
drv -H "Authorization: Bearer $SECRET" -S "$SECRET" -c 'echo={}' "$FURL"
check "echo: the driver exits 0" [ $? -eq 0 ]
check "echo: the header came back (the server did echo it)" has "Authorization=Bearer *"
check "echo: the credential is redacted, raw and \\u-escaped alike" sh -c "! grep -qF '$SECRET' '$OUT'"
check "echo: both places starred" [ "$(grep -o 'Bearer \*\{22\}' "$OUT" | wc -l)" -eq 2 ]

# the session's end
drv -c 'gone={}' -c 'ok={}' "$FURL"
rc=$?
check "gone: the driver fails (the connection is over)" [ $rc -eq 1 ]
check "gone: the call's error says the session ended" hascall gone "the server ended the session (HTTP 404)"
check "gone: said on stderr too" grep -q "the server ended the session" "$ERR"
check "gone: no call after it" [ "$(grep -c '^call ' "$OUT")" -eq 1 ]
check "the fake is still up" kill -0 "$FPID"

# ---- URLs refused --------------------------------------------------------------
drv -l http://192.0.2.1/mcp
check "http:// to a host that is not loopback: refused (exit 2)" [ $? -eq 2 ]
check "  with the reason" grep -q "http:// only to a loopback host" "$ERR"
drv -l ftp://127.0.0.1/mcp
check "ftp://: refused" [ $? -eq 2 ]
drv -H 'Bad header' -l "$FURL"
check "a header that is not Name: value: refused" grep -q 'is not one "Name: value" line' "$ERR"
drv -l http://127.0.0.1:1/mcp
check "a server that is not there: a clear error (exit 1)" [ $? -eq 1 ]
check "  saying the request failed" grep -q "the request to the server failed" "$ERR"

check "no sanitizer report from any run" sh -c "! grep -q 'Sanitizer\|runtime error' '$T/allerr'"

finish mcp_http
