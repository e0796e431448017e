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
printf '{"command": "mcp-github", "args": ["--stdio"]}\n' >"$T/github.json"
run_in "$CREDS" mcp add github "$T/github.json"
expect 0 "mcp server github version 1 added (with credentials)" "mcp add with credentials"
run_in "$CREDS" -j mcp add github "$T/github.json"
check "mcp add -j is valid JSON without the credentials" \
	sh -c "printf '%s' \"\$0\" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"ok\"]' && ! printf '%s' \"\$0\" | grep -q '$RND'" "$OUT"
check "... and a new version (2)" has "version 2"
run mcp add fs "$T/github.json"
expect 0 "mcp server fs version 1 added (without credentials)" "mcp add without credentials (empty stdin)"
check "the spec is stored as jsonb" [ "$(psql_q "select spec->>'command' from mcp_servers where name = 'fs'")" = mcp-github ]
check "credentials are stored as ciphertext with a nonce, different per add" \
	[ "$(psql_q "select count(distinct credentials_ciphertext) = 2 and count(distinct credentials_nonce) = 2 and min(octet_length(credentials_ciphertext)) = ${#CREDS} + 16 from mcp_servers where name = 'github'")" = t ]
printf '{"command": ' >"$T/broken.json"
run mcp add broken "$T/broken.json"
expect 1 "mcp add: $T/broken.json:[0-9]*:[0-9]*: " "mcp add refuses a spec that is not JSON, with line:column"
printf '["a", "b"]' >"$T/array.json"
run mcp add array "$T/array.json"
expect 1 "the spec must be a JSON object" "mcp add refuses a spec that is not an object"
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
check "refused mcp adds stored nothing (3 versions)" [ "$(count mcp_servers)" = 3 ]
run mcp list
expect 0 "^NAME  *VERSION  *HAS_CREDENTIALS  *CREATED$" "mcp list prints a header"
check "mcp list shows github at version 2 with credentials" sh -c "printf '%s\n' \"\$0\" | grep -q '^github  *2  *yes  '" "$OUT"
check "mcp list shows fs without credentials" sh -c "printf '%s\n' \"\$0\" | grep -q '^fs  *1  *no  '" "$OUT"
run -j mcp list
check "mcp list -j is valid JSON" is_json

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
for a in repo.add:8 skill.add:4 mcp.add:3 grant.add:2 grant.remove:1; do
	n=$(audit "${a%%:*}")
	check "audit log: ${a#*:} ${a%%:*} row(s) by the operator over the control socket ($n)" \
		[ "$n" = "${a#*:}" ]
done
check "audit log: mcp.add rows say whether there were credentials" \
	[ "$(psql_q "select count(*) from audit_log where action = 'mcp.add' and detail ? 'credentials'")" = 3 ]
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
