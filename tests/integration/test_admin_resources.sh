#!/bin/sh
# agrippactl's resource commands (repositories, skills, MCP servers, grants)
# against the real daemon and its embedded PostgreSQL: what they store, their
# errors (which change nothing), the audit rows, and that a repository token
# or MCP credentials are write-only: in no reply, no -j output, no log line,
# no audit row and nowhere in plain text in the database.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
need_root admin_resources
make_env
trap cleanup_env EXIT

start_daemon_or_finish admin_resources

ALL_OUT="$T/all.out" # every agrippactl output, searched for secrets at the end
: >"$ALL_OUT"
# run ARG...: agrippactl with empty stdin; sets OUT (stdout and stderr) and RC.
run() {
	OUT=$("$AGRIPPACTL" -s "$CTL" "$@" 2>&1 </dev/null)
	RC=$?
	printf '%s\n' "$OUT" >>"$ALL_OUT"
}
# run_in INPUT ARG...: the same with INPUT on stdin.
run_in() {
	input=$1
	shift
	OUT=$(printf '%s' "$input" | "$AGRIPPACTL" -s "$CTL" "$@" 2>&1)
	RC=$?
	printf '%s\n' "$OUT" >>"$ALL_OUT"
}

RND=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
TOKEN="tok_${RND}_secret"
CREDS="{\"api_key\":\"cred_${RND}_mcp\"}"
CREDS_MARK="cred_${RND}_mcp"

run project add web
expect 0 "project web added" "project add web"
run project add api
expect 0 "project api added" "project add api"

# --- repositories ------------------------------------------------------------------
run_in "$TOKEN
" repo add web main https://git.example.com/web.git
expect 0 "repo main added to project web (with a token)" "repo add with a token (one trailing newline)"
check "the reply does not hold the token" sh -c "! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
run_in "$TOKEN" -j repo add web second https://git.example.com/web2.git
check "repo add -j is valid JSON" is_json
check "... and does not hold the token" sh -c "! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
run repo add web local /srv/git/web.git
expect 0 "repo local added to project web (without a token)" "repo add of an absolute path without a token (empty stdin)"
run repo add web filer file:///srv/git/web.git
expect 0 "repo filer added" "repo add of a file:/// URL"
run_in "$TOKEN" repo add api main https://git.example.com/api.git
expect 0 "repo main added to project api" "the same name in another project is allowed"
run_in "$TOKEN" repo add web main https://git.example.com/other.git
expect 1 "repo main exists in project web" "a duplicate repo name in a project is refused"
run_in "$TOKEN" repo add nosuch main https://git.example.com/x.git
expect 1 "no such project nosuch" "repo add to a missing project: exit 1"
run repo add web bad http://git.example.com/x.git
expect 1 "repo add: URL must start with https://, file:/// or /" "repo add refuses an http:// URL"
run repo add web bad git@example.com:x.git
expect 1 "repo add: URL must start with" "repo add refuses an scp-style URL"
run repo add web bad "relative/path"
expect 1 "repo add: URL must start with" "repo add refuses a relative path"
run repo add web bad "https://user:pw${RND}@git.example.com/x.git"
expect 1 "must not hold credentials" "repo add refuses user:password@ in an https URL"
check "... without quoting the URL back" sh -c "! printf '%s' \"\$0\" | grep -q 'pw$RND'" "$OUT"
run repo add web bad "https://tok@git.example.com/x.git"
expect 1 "must not hold credentials" "repo add refuses user@ in an https URL"
run repo add web bad "https:///x.git"
expect 1 "has no host" "repo add refuses an https URL without a host"
run repo add web bad "https://git.example.com/a b"
expect 1 "without spaces or control characters" "repo add refuses a URL with a space"
run repo add web Bad https://git.example.com/x.git
expect 1 "NAME must match" "repo add refuses a malformed name"
# the forge: from the URL's host unless named, its API URL only with one
run repo add api gh https://github.com/o/r.git
expect 0 "repo gh added to project api" "repo add of a github.com URL"
check "... its forge is github, its API the public one" \
	[ "$(psql_q "select forge || ':' || coalesce(api_url, '-') from repo_connections where name = 'gh'")" = "github:-" ]
run repo add api ghe https://ghe.example.test/o/r.git github https://GHE.example.test/api/v3/
expect 0 "repo ghe added to project api" "repo add with a forge and an API URL (normalised)"
check "... both stored" \
	[ "$(psql_q "select forge || ':' || api_url from repo_connections where name = 'ghe'")" = "github:https://ghe.example.test/api/v3" ]
run repo add api bad https://x.example.test/o/r bitbucket
expect 1 "repo add: the forge must be github, gitlab or none" "repo add refuses an unknown forge"
for api in http://x.test/api "https://u:p@x.test/api" "https://x.test/api?q=1" "https://x.test/%41" https://; do
	run repo add api bad https://x.example.test/o/r gitlab "$api"
	expect 1 "repo add: api_url" "repo add refuses the API URL $api"
done
run repo add api bad /srv/git/x.git github
expect 1 "repo add: " "repo add refuses a GitHub connection whose URL names no OWNER/REPO"
run repo add api bad https://x.example.test/o/r none https://x.test/api
expect 1 "repo add: API URL needs a forge" "repo add refuses an API URL without a forge"
run_in "$(printf 'a\tb')" repo add web ctrl https://git.example.com/x.git
expect 1 "refused the token: it has a control character" "agrippactl refuses a token with a control character"
run_in "$(head -c 4097 /dev/zero | tr '\0' x)" repo add web long https://git.example.com/x.git
expect 1 "refused the token: more than 4096 bytes" "agrippactl refuses a token over 4 KiB"
run_in "$(head -c 4096 /dev/zero | tr '\0' y)" repo add web maxtok https://git.example.com/x.git
expect 0 "repo maxtok added to project web (with a token)" "a token of exactly 4096 bytes is accepted"
run repo add web onlytwo
expect 2 "usage" "repo add without URL is a usage error"
# The supervisor checks a token itself too: a client other than agrippactl.
python3 - "$CTL" "$RND" >"$T/raw.out" 2>&1 <<'PYRAW'
import socket, struct, sys

def s(x):
    b = x.encode()
    if len(b) < 32:
        return bytes([0xa0 | len(b)]) + b
    if len(b) < 256:
        return bytes([0xd9, len(b)]) + b
    return bytes([0xda]) + struct.pack(">H", len(b)) + b

def frame(i, cmd, args):
    body = bytes([0x92]) + s(cmd) + bytes([0x90 | len(args)]) + b"".join(s(a) for a in args)
    m = bytes([0x83]) + s("t") + bytes([9]) + s("id") + bytes([i]) + s("b") + body
    return struct.pack(">I", len(m)) + m

c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sys.argv[1])
c.sendall(frame(1, "repo add", ["web", "raw", "https://git.example.com/x.git",
                                "bad\ttok" + sys.argv[2]]))
n = struct.unpack(">I", c.recv(4, socket.MSG_WAITALL))[0]
print(c.recv(n, socket.MSG_WAITALL).decode("utf-8", "replace"))
PYRAW
OUT=$(cat "$T/raw.out")
printf '%s\n' "$OUT" >>"$ALL_OUT"
check "the supervisor refuses a token with a control character from a raw client" \
	has "the token must be at most 4096 bytes without control characters"
check "refused repo adds stored nothing (8 repositories)" [ "$(count repo_connections)" = 8 ]
run repo list web
expect 0 "^NAME  *URL  *HAS_TOKEN  *FORGE  *API_URL  *CREATED  *MIRROR  *FETCHED$" "repo list prints a header"
check "repo list shows main with a token" sh -c "printf '%s\n' \"\$0\" | grep -q '^main  *https://git.example.com/web.git  *yes  *none  '" "$OUT"
check "repo list shows local without a token" sh -c "printf '%s\n' \"\$0\" | grep -q '^local  */srv/git/web.git  *no  *none  '" "$OUT"
check "... and neither has a mirror on this host yet: none, never" \
	sh -c "[ \"\$(printf '%s\n' \"\$0\" | grep -c -e '^main .*  none  *never$' -e '^local .*  none  *never$')\" = 2 ]" "$OUT"
run -j repo list web
check "repo list -j is valid JSON" is_json
check "... with the columns of the table, the connection's id not among them" sh -c "printf '%s\n' \"\$0\" | python3 -c '
import json, sys
d = json.load(sys.stdin)[\"data\"]
assert d[\"columns\"] == [\"name\", \"url\", \"has_token\", \"forge\", \"api_url\", \"created\", \"mirror\", \"fetched\"], d
assert all(len(r) == 8 and r[6:] == [\"none\", \"never\"] for r in d[\"rows\"]), d'" "$OUT"
run repo list nosuch
expect 1 "no such project nosuch" "repo list of a missing project: exit 1"
run project add empty
run repo list empty
check "repo list of a project without repositories is a header only" sh -c "[ $RC -eq 0 ] && [ \"\$(printf '%s\n' \"\$0\" | wc -l)\" -eq 1 ]" "$OUT"
check "the token is stored as ciphertext (token + 16 bytes) with a 24-byte nonce" \
	[ "$(psql_q "select octet_length(token_ciphertext) = ${#TOKEN} + 16 and octet_length(token_nonce) = 24 from repo_connections r join projects p on p.id = r.project_id where p.name = 'web' and r.name = 'main'")" = t ]
check "two adds of the same token differ in nonce and ciphertext" \
	[ "$(psql_q "select count(distinct token_ciphertext) = 3 and count(distinct token_nonce) = 3 from repo_connections where octet_length(token_ciphertext) = ${#TOKEN} + 16")" = t ]
check "a repo without a token stores neither ciphertext nor nonce" \
	[ "$(psql_q "select count(*) from repo_connections where name in ('local', 'filer') and token_ciphertext is null and token_nonce is null")" = 2 ]
check "audit rows for repo.add say whether there was a token, with the URL and the forge" \
	[ "$(psql_q "select count(*) from audit_log where action = 'repo.add' and project_id is not null and (detail->>'token')::boolean = (detail->>'name' in ('main', 'second', 'maxtok')) and detail ? 'url' and detail ? 'forge' and detail ? 'api_url' and detail->>'project' in ('web', 'api')")" = 8 ]

# --- skills ------------------------------------------------------------------------
printf '# Review\n\nBe \342\234\223 careful.\n' >"$T/review.md"
run skill add review "$T/review.md"
expect 0 "skill review version 1 added" "skill add review (a relative path made absolute)"
SUM=$(sha256sum "$T/review.md" | cut -d' ' -f1)
check "the body and its sha256 are stored" \
	[ "$(psql_q "select encode(sha256, 'hex') = '$SUM' and body = convert_from(decode('$(od -An -v -tx1 "$T/review.md" | tr -d ' \n')', 'hex'), 'UTF8') from skills where name = 'review'")" = t ]
run skill add review "$T/review.md"
expect 0 "skill review unchanged: version 1 has this content" "adding the same content again is 'unchanged'"
echo "More." >>"$T/review.md"
run skill add review "$T/review.md"
expect 0 "skill review version 2 added" "new content is version 2"
run skill add lint "$T/review.md"
expect 0 "skill lint version 1 added" "another skill starts at version 1"
mkfifo "$T/fifo.md"
timeout 20 "$AGRIPPACTL" -s "$CTL" skill add fifo "$T/fifo.md" >"$T/fifo.out" 2>&1 </dev/null
RC=$?
OUT=$(cat "$T/fifo.out")
expect 1 "not a regular file" "skill add of a FIFO is refused without hanging"
run skill add missing "$T/nosuch.md"
expect 1 "nosuch.md" "skill add of a missing file: exit 1"
head -c 262145 /dev/zero | tr '\0' a >"$T/big.md"
run skill add big "$T/big.md"
expect 1 "larger than 262144 bytes" "skill add of a file over 256 KiB is refused"
head -c 262144 /dev/zero | tr '\0' a >"$T/max.md"
run skill add max "$T/max.md"
expect 0 "skill max version 1 added" "skill add of exactly 256 KiB is accepted"
printf 'bad \377\376 bytes\n' >"$T/bin.md"
run skill add bin "$T/bin.md"
expect 1 "not UTF-8 text" "skill add of a file that is not UTF-8 is refused"
printf 'nul \000 byte\n' >"$T/nul.md"
run skill add nul "$T/nul.md"
expect 1 "not UTF-8 text" "skill add of a file with a NUL byte is refused"
: >"$T/empty.md"
run skill add empty "$T/empty.md"
expect 1 "empty" "skill add of an empty file is refused"
run skill add Bad "$T/review.md"
expect 1 "NAME must match" "skill add refuses a malformed name"
run skill add dir "$T"
expect 1 "not a regular file" "skill add of a directory is refused"
check "refused skill adds stored nothing (4 skill versions)" [ "$(count skills)" = 4 ]
run skill list
expect 0 "^NAME  *VERSION  *SHA256  *CREATED$" "skill list prints a header"
SUM2=$(sha256sum "$T/review.md" | cut -d' ' -f1 | cut -c1-12)
check "skill list shows review at version 2 with its sha256 prefix" sh -c "printf '%s\n' \"\$0\" | grep -q '^review  *2  *$SUM2  '" "$OUT"
run -j skill list
check "skill list -j is valid JSON" is_json

# --- MCP servers -------------------------------------------------------------------
cat >"$T/github.json" <<'EOF'
{"transport": "stdio", "command": ["mcp-github", "--stdio"],
 "env": {"GITHUB_TOKEN": "${credentials.api_key}"}}
EOF
run_in "$CREDS" mcp add github "$T/github.json"
expect 0 "mcp server github version 1 added (with credentials)" "mcp add with credentials"
run_in "$CREDS" -j mcp add github "$T/github.json"
check "mcp add -j is valid JSON without the credentials" \
	sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"ok\"]' && ! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
check "... and a new version (2)" has "version 2"
printf '{"transport": "stdio", "command": ["mcp-fs"]}' >"$T/fs.json"
run mcp add fs "$T/fs.json"
expect 0 "mcp server fs version 1 added (without credentials)" "mcp add without credentials (empty stdin)"
check "the spec is stored in its normal form, every default filled in" \
	[ "$(psql_q "select spec = '{\"transport\": \"stdio\", \"command\": [\"mcp-fs\"], \"env\": {}, \"paths\": [], \"workspace\": \"none\", \"network\": null, \"startup_timeout\": 30, \"call_timeout\": 60}'::jsonb from mcp_servers where name = 'fs'")" = t ]
check "the stored spec names the credential by reference only" \
	[ "$(psql_q "select spec->'env'->>'GITHUB_TOKEN' from mcp_servers where name = 'github' and version = 1")" = '${credentials.api_key}' ]
check "credentials are stored as ciphertext with a nonce, different per add" \
	[ "$(psql_q "select count(distinct credentials_ciphertext) = 2 and count(distinct credentials_nonce) = 2 and min(octet_length(credentials_ciphertext)) = ${#CREDS} + 16 from mcp_servers where name = 'github'")" = t ]
# The examples the documentation ships are good specs.
run_in "{\"api_key\": \"ex_${RND}_key\"}" mcp add everything docs/examples/mcp/everything.json
expect 0 "mcp server everything version 1 added (with credentials)" "docs/examples/mcp/everything.json is accepted"
run mcp add filesystem docs/examples/mcp/filesystem.json
expect 0 "mcp server filesystem version 1 added" "docs/examples/mcp/filesystem.json is accepted"
# credentials over several lines, as a file would hold them
run_in "$(printf '{\n  "token": "rt_%s_tok"\n}\n' "$RND")" mcp add remote docs/examples/mcp/remote.json
expect 0 "mcp server remote version 1 added (with credentials)" "docs/examples/mcp/remote.json is accepted, credentials on several lines"
check "... stored with the workspace and the URL in normal form" \
	[ "$(psql_q "select string_agg(coalesce(spec->>'workspace', spec->>'url'), ' ' order by name) from mcp_servers where name in ('filesystem', 'remote')")" = "read https://mcp.example.com/mcp" ]

printf '{"command": ' >"$T/broken.json"
run mcp add broken "$T/broken.json"
expect 1 "mcp add: $T/broken.json:[0-9]*:[0-9]*: " "mcp add refuses a spec that is not JSON, with line:column"
printf '["a", "b"]' >"$T/array.json"
run mcp add array "$T/array.json"
expect 1 "^agrippactl: mcp add: spec: must be a JSON object" "mcp add refuses a spec that is not an object"
printf '{"a": 1, "a": 2}' >"$T/dup.json"
run mcp add dup "$T/dup.json"
expect 1 "mcp add: " "mcp add refuses a spec with a duplicate key"
python3 -c 'import json; print(json.dumps({"x": "a" * 65536}))' >"$T/bigspec.json"
run mcp add bigspec "$T/bigspec.json"
expect 1 "larger than 65536 bytes" "mcp add refuses a spec over 64 KiB"
mkfifo "$T/fifo.json"
timeout 20 "$AGRIPPACTL" -s "$CTL" mcp add fifo "$T/fifo.json" >"$T/fifo.out" 2>&1 </dev/null
RC=$?
OUT=$(cat "$T/fifo.out")
expect 1 "not a regular file" "mcp add of a FIFO is refused without hanging"
run_in "$(printf 'x\001y')" mcp add ctrl "$T/github.json"
expect 1 "refused the credentials: it has a control character" "agrippactl refuses credentials with a control character"

# Every bad field is refused with the field named, and nothing is stored.
N_MCP=$(count mcp_servers)
N_AUDIT=$(audit mcp.add)
# refuse NAME SPEC CREDENTIALS PATTERN DESCRIPTION
refuse() {
	printf '%s' "$2" >"$T/bad.json"
	run_in "$3" mcp add "$1" "$T/bad.json"
	expect 1 "^agrippactl: mcp add: $4" "$5"
	if printf '%s' "$OUT" | grep -q "$RND"; then
		notok "... and the error does not quote the credentials ($OUT)"
	fi
}
C1="{\"tok\": \"c1_${RND}_x\"}"
LINK="/var/tmp/agrippa-mcp-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
ln -s "$T/state" "$LINK"
refuse b1 '{"command": "gh-mcp"}' '' 'spec.transport: missing' \
	"a spec of the old shape (no transport) is refused"
refuse b2 '{"transport": "sse", "command": ["x"]}' '' 'spec.transport: must be "stdio" or "http"' \
	"an unknown transport is refused"
refuse b3 '{"transport": "stdio", "command": ["x"], "args": ["y"]}' '' 'spec.args: unknown field' \
	"an unknown field is refused"
refuse b4 '{"transport": "stdio", "command": ["x"], "url": "https://a.example/"}' '' \
	'spec.url: not a field of a stdio server' "a field of the other transport is refused"
refuse b5 '{"transport": "stdio", "command": "x"}' '' 'spec.command: must be an array of strings' \
	"a command that is not an array is refused"
refuse b6 '{"transport": "stdio", "command": []}' '' 'spec.command: must not be empty' \
	"an empty command is refused"
refuse b7 '{"transport": "stdio", "command": ["./srv"]}' '' 'spec.command\[0\]: the program is an absolute path or a bare name' \
	"a relative program is refused"
refuse b8 '{"transport": "stdio", "command": ["srv", "--token=${credentials.tok}"], "env": {"T": "${credentials.tok}"}}' "$C1" \
	'spec.command\[1\]: credentials go in env' "a credential in the command line is refused"
refuse b9 '{"transport": "stdio", "command": ["x"], "paths": ["opt/mcp"]}' '' \
	'spec.paths\[0\]: must be an absolute path' "a relative path is refused"
refuse b10 "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"/opt\", \"$T/state/pg\"]}" '' \
	"spec.paths\[1\]: $T/state/pg: overlaps $T/state, the daemon's own" "a path under the state directory is refused"
refuse b11 "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"$T/keys\"]}" '' \
	"spec.paths\[0\]: $T/keys: overlaps $T/keys/master.key" "a path holding the master key is refused"
refuse b12 "{\"transport\": \"stdio\", \"command\": [\"x\"], \"paths\": [\"$LINK\"]}" '' \
	"spec.paths\[0\]: $LINK: leads to $T/state, which overlaps" "a link to the state directory is refused"
refuse b13 '{"transport": "stdio", "command": ["x"], "paths": ["/proc/1"]}' '' \
	'spec.paths\[0\]: /proc/1: the sandbox mounts its own /proc' "a path under /proc is refused"
refuse b14 '{"transport": "stdio", "command": ["x"], "env": {"PATH": "/opt/bin"}}' '' \
	'spec.env.PATH: the sandbox sets this variable itself' "an env name the sandbox sets is refused"
refuse b15 '{"transport": "stdio", "command": ["x"], "env": {"A-B": "x"}}' '' \
	'spec.env.A-B: not an environment variable name' "an env name that is no name is refused"
refuse b16 '{"transport": "stdio", "command": ["x"], "env": {"TOKEN": "${credentials.tok}"}}' '' \
	'spec.env.TOKEN: ${credentials.tok}: no such credential' "a reference without credentials is refused"
refuse b17 '{"transport": "stdio", "command": ["x"], "env": {"TOKEN": "${credentials.tok2}"}}' "$C1" \
	'spec.env.TOKEN: ${credentials.tok2}: no such credential' "a reference to a missing key is refused"
refuse b18 '{"transport": "stdio", "command": ["x"]}' "$C1" \
	'credentials.tok: not referenced by the spec' "a credential the spec does not name is refused"
refuse b19 '{"transport": "stdio", "command": ["x"], "env": {"T": "${credentials.tok}"}}' "opaque_${RND}_token" \
	'credentials: not valid JSON' "credentials that are not JSON are refused, without quoting them"
refuse b20 '{"transport": "stdio", "command": ["x"], "env": {"T": "${credentials.tok}"}}' '{"tok": "short"}' \
	'credentials.tok: must be at least 8 bytes' "a short credential is refused"
refuse b21 '{"transport": "stdio", "command": ["x"], "workspace": "rw"}' '' \
	'spec.workspace: must be "none", "read" or "write"' "a bad workspace is refused"
refuse b22 '{"transport": "stdio", "command": ["x"], "network": {"allow": ["*.com"]}}' '' \
	'spec.network.allow\[0\]: a wildcard over a single label' "a network entry the egress syntax refuses is refused"
refuse b23 '{"transport": "stdio", "command": ["x"], "network": {"presets": ["npm"], "deny": []}}' '' \
	'spec.network.deny: unknown field' "an unknown network field is refused"
refuse b24 '{"transport": "stdio", "command": ["x"], "startup_timeout": 0}' '' \
	'spec.startup_timeout: must be from 1 to 600 seconds' "a startup timeout out of range is refused"
refuse b25 '{"transport": "stdio", "command": ["x"], "call_timeout": 1.5}' '' \
	'spec.call_timeout: must be a whole number of seconds' "a timeout that is not an integer is refused"
refuse b26 '{"transport": "http", "url": "http://mcp.example.com/mcp"}' '' \
	'spec.url: http:// only to a loopback host' "plain http to a remote host is refused"
refuse b27 '{"transport": "http", "url": "https://mcp.example.com/?k=${credentials.tok}"}' "$C1" \
	'spec.url: credentials go in headers' "a credential in the URL is refused"
refuse b28 '{"transport": "http", "url": "https://u:p@mcp.example.com/"}' '' \
	'spec.url: must hold no user name or password' "a URL with a password is refused"
refuse b29 '{"transport": "http", "url": "https://mcp.example.com/", "headers": {"Host": "evil.example"}}' '' \
	'spec.headers.Host: the MCP client or HTTP sets this header itself' "a Host header is refused"
refuse b30 '{"transport": "http", "url": "https://mcp.example.com/", "headers": {"Content-Length": "0"}}' '' \
	'spec.headers.Content-Length: the MCP client or HTTP sets' "a Content-Length header is refused"
refuse b31 '{"transport": "http", "url": "https://mcp.example.com/", "headers": {"Bad Name": "x"}}' '' \
	'spec.headers\["Bad Name"\]: not an HTTP header name' "a header name that is no token is refused"
refuse b32 '{"transport": "http", "url": "https://mcp.example.com/", "headers": {"X": "a\r\nHost: evil"}}' '' \
	'spec.headers.X: a header value is printable ASCII' "a header value with CR LF is refused"
refuse b33 '{"transport": "http", "url": "https://mcp.example.com/", "startup_timeout": 5}' '' \
	'spec.startup_timeout: not a field of an http server' "a stdio field in an http spec is refused"
rm -f "$LINK"
check "refused specs stored nothing ($N_MCP rows)" [ "$(count mcp_servers)" = "$N_MCP" ]
check "... and wrote no audit row" [ "$(audit mcp.add)" = "$N_AUDIT" ]
check "... under none of their names" [ "$(psql_q "select count(*) from mcp_servers where name ~ '^b[0-9]+$'")" = 0 ]

run mcp list
expect 0 "^NAME  *VERSION  *HAS_CREDENTIALS  *CREATED$" "mcp list prints a header"
check "mcp list shows github at version 2 with credentials" sh -c "printf '%s\n' \"\$0\" | grep -q '^github  *2  *yes  '" "$OUT"
check "mcp list shows fs without credentials" sh -c "printf '%s\n' \"\$0\" | grep -q '^fs  *1  *no  '" "$OUT"
run -j mcp list
check "mcp list -j is valid JSON" is_json

# mcp show: the stored spec, credentials by reference only; mcp add takes it back.
run mcp show github
expect 0 '"GITHUB_TOKEN": "${credentials.api_key}"' "mcp show prints the spec with the credential's reference"
check "... as JSON in its normal form" sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"workspace\"] == \"none\" and d[\"command\"] == [\"mcp-github\", \"--stdio\"], d'" "$OUT"
check "... without the credentials" sh -c "! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
run -j mcp show github 1
check "mcp show -j NAME VERSION: that version, with credentials, the spec as an object" \
	sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin)[\"data\"]; assert d[\"version\"] == 1 and d[\"credentials\"] is True and d[\"name\"] == \"github\" and d[\"spec\"][\"env\"] == {\"GITHUB_TOKEN\": \"\${credentials.api_key}\"} and d[\"check\"] == \"\", d'" "$OUT"
"$AGRIPPACTL" -s "$CTL" mcp show everything >"$T/shown.json" 2>&1
run_in "{\"api_key\": \"ex2_${RND}_key\"}" mcp add everything2 "$T/shown.json"
expect 0 "mcp server everything2 version 1 added" "what mcp show prints, mcp add takes back"
check "... and stores the same spec" \
	[ "$(psql_q "select a.spec = b.spec from mcp_servers a, mcp_servers b where a.name = 'everything' and b.name = 'everything2'")" = t ]
run mcp show nosuch
expect 1 "mcp show: no such mcp server nosuch" "mcp show of a missing server: exit 1"
run mcp show github 9
expect 1 "mcp show: mcp server github has no version 9" "mcp show of a missing version: exit 1"
run mcp show github two
expect 1 "mcp show: VERSION must be a number" "mcp show refuses a VERSION that is no number"
# A version stored before specs were checked is shown as it is, with why.
psql_q "insert into mcp_servers (name, version, spec) values ('legacy', 1, '{\"command\": \"gh-mcp\"}')" >/dev/null
run mcp show legacy
expect 0 '"command": "gh-mcp"' "mcp show of a spec stored before the checks shows it as stored"
check "... and says why it does not pass them" has "predates the spec's checks: spec.transport: missing"
run -j mcp show legacy
check "... with -j, in data.check" sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin)[\"data\"]; assert d[\"check\"].startswith(\"spec.transport: missing\") and d[\"spec\"] == {\"command\": \"gh-mcp\"}, d'" "$OUT"
psql_q "delete from mcp_servers where name = 'legacy'" >/dev/null

# --- grants ------------------------------------------------------------------------
run grant add web skill review
expect 0 "project web may now use skill review" "grant add web skill review"
run grant add web mcp github
expect 0 "project web may now use mcp server github" "grant add web mcp github"
run grant add web skill review
expect 0 "already" "granting twice says so"
run grant add web skill nosuch
expect 1 "no such skill nosuch" "a grant of a missing skill is refused"
run grant add web mcp nosuch
expect 1 "no such mcp server nosuch" "a grant of a missing MCP server is refused"
run grant add web mcp review
expect 1 "no such mcp server review" "a skill's name is not an MCP server"
run grant add nosuch skill review
expect 1 "no such project nosuch" "a grant to a missing project is refused"
run grant add web tool review
expect 1 "KIND must be skill or mcp" "a grant of an unknown kind is refused"
check "refused grants stored nothing (2 grants)" [ "$(count grants)" = 2 ]
run grant list web
expect 0 "^KIND  *NAME  *LATEST  *CREATED$" "grant list prints a header"
check "grant list shows both grants" sh -c "printf '%s\n' \"\$0\" | grep -q '^mcp  *github  *2  ' && printf '%s\n' \"\$0\" | grep -q '^skill  *review  *2  '" "$OUT"
run -j grant list web
check "grant list -j is valid JSON" is_json
run grant list api
check "grant list of a project without grants is a header only" sh -c "[ $RC -eq 0 ] && [ \"\$(printf '%s\n' \"\$0\" | wc -l)\" -eq 1 ]" "$OUT"
run grant list nosuch
expect 1 "no such project nosuch" "grant list of a missing project: exit 1"
run grant remove web skill review
expect 0 "project web may no longer use skill review" "grant remove web skill review"
run grant remove web skill review
expect 1 "has no grant of skill review" "removing a missing grant: exit 1"
run grant remove nosuch skill review
expect 1 "no such project nosuch" "grant remove from a missing project: exit 1"
check "one grant is left" [ "$(psql_q "select resource_kind || ':' || resource_name from grants")" = mcp_server:github ]

# --- the audit log ------------------------------------------------------------------
for a in repo.add:8 skill.add:4 mcp.add:7 grant.add:2 grant.remove:1; do
	n=$(audit "${a%%:*}")
	check "audit log: ${a#*:} ${a%%:*} row(s) by the operator over the control socket ($n)" \
		[ "$n" = "${a#*:}" ]
done
check "audit log: mcp.add rows say whether there were credentials" \
	[ "$(psql_q "select count(*) from audit_log where action = 'mcp.add' and detail ? 'credentials'")" = 7 ]
check "audit log: grant rows carry the project" \
	[ "$(psql_q "select count(*) from audit_log where action like 'grant.%' and project_id is null")" = 0 ]

# On a terminal, agrippactl says where the token comes from (not with RND:
# typed-ahead input may be echoed before echo is switched off).
if command -v script >/dev/null 2>&1; then
	OUT=$(printf 'ttytok\n\004' | timeout 20 script -qec "'$AGRIPPACTL' -s '$CTL' repo add web ttyrepo /srv/git/tty.git" /dev/null 2>&1)
	check "on a terminal agrippactl says it reads the token from standard input" \
		has "reading the token from standard input"
	check "... and stores it" [ "$(psql_q "select token_ciphertext is not null from repo_connections where name = 'ttyrepo'")" = t ]
else
	ok "on a terminal agrippactl says it reads the token # SKIP no script(1)"
fi

# --- the secrets are write-only -------------------------------------------------------
check "no agrippactl output holds the token or the credentials" \
	sh -c "! grep -q -e '$RND' '$ALL_OUT'"
check "the daemon log holds neither the token nor the credentials" \
	sh -c "! grep -q -e '$RND' '$LOG'"
PGPASSWORD=$(cat "$T/state/db.password") pg_dump -h "$T/state/pgrun" -U agrippa \
	-t repo_connections -t mcp_servers -t audit_log -t grants -t skills agrippa >"$T/dump.sql" 2>"$T/dump.err"
check "pg_dump of the resource tables and the audit log works" [ -s "$T/dump.sql" ]
check "... and holds neither the token nor the credentials in plain text" \
	sh -c "! grep -q -e '$RND' -e \"\$(printf '%s' '$RND' | od -An -tx1 | tr -d ' \n')\" '$T/dump.sql'"
check "no row of any table holds them in plain text" \
	[ "$(psql_q "select count(*) from repo_connections r, mcp_servers m, audit_log a where r::text like '%$RND%' or m::text like '%$RND%' or a::text like '%$RND%' or encode(r.token_ciphertext, 'escape') like '%$RND%' or encode(m.credentials_ciphertext, 'escape') like '%$RND%'")" = 0 ]

# The supervisor sealed the token and forgot it: no copy is left in its
# memory (request, channel buffers, replies all wiped).  Control first: a
# pattern that is there is found.
# A fresh token is sent last, so nothing after it could overwrite a copy.
TOKEN2="tok2_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
run_in "$TOKEN2" repo add web last https://git.example.com/last.git
expect 0 "repo last added" "repo add just before the memory search"
TOKHEX=$(printf '%s' "$TOKEN2" | od -An -tx1 | tr -d ' \n')
if "$TOOLS/memgrep" "$SUP_PID" "$(printf 'database' | od -An -tx1 | tr -d ' \n')" >/dev/null; then
	ok "memgrep finds a known string in the supervisor (control)"
else notok "memgrep finds a known string in the supervisor (control)"; fi
if "$TOOLS/memgrep" "$SUP_PID" "$TOKHEX"; then
	notok "no copy of the repository token is left in the supervisor's memory"
else ok "no copy of the repository token is left in the supervisor's memory"; fi
# MCP credentials are also parsed (JSON) to check the spec's references:
# the parser's copies are wiped as well, for an add that is stored and one
# that is refused (sent last).  Long values, searched for by their tails:
# malloc's own bookkeeping overwrites the head of a freed block, never
# the rest.
MCPV1="mcpv1_$(od -An -N48 -tx1 /dev/urandom | tr -d ' \n')"
MCPV2="mcpv2_$(od -An -N48 -tx1 /dev/urandom | tr -d ' \n')"
run_in "{\"api_key\": \"$MCPV1\"}" mcp add lastmcp "$T/github.json"
expect 0 "mcp server lastmcp version 1 added" "mcp add just before the memory search"
run_in "{\"api_key\": \"$MCPV1\", \"unused\": \"$MCPV2\"}" mcp add lastmcp "$T/github.json"
expect 1 "credentials.unused: not referenced" "... and one refused after its credentials were parsed"
for v in "$MCPV1" "$MCPV2"; do
	if "$TOOLS/memgrep" "$SUP_PID" "$(printf '%s' "$v" | tail -c 48 | od -An -tx1 | tr -d ' \n')"; then
		notok "no copy of an MCP credential (${v%%_*}) is left in the supervisor's memory"
	else ok "no copy of an MCP credential (${v%%_*}) is left in the supervisor's memory"; fi
done

# --- end ---------------------------------------------------------------------------
run status
expect 0 "^database: up" "status works afterwards (daemon healthy)"
check "healthz answers 200" [ "$(healthz_code)" = 200 ]
stop_daemon
check "the daemon stops cleanly (exit 0)" [ "$DAEMON_STATUS" -eq 0 ]
if grep -q "ERROR: AddressSanitizer\|runtime error:" "$LOG"; then
	notok "no sanitizer report in the daemon log"
	grep -A30 "AddressSanitizer\|runtime error:" "$LOG" | head -60
else
	ok "no sanitizer report in the daemon log"
fi
[ "$T_FAIL" -eq 0 ] || { echo "--- daemon log"; tail -60 "$LOG"; }
finish admin_resources
