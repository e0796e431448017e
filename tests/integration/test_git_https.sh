#!/bin/sh
# The git helper's https path with a repository token, against a fake git
# server on loopback (tests/fakes/git_https.py) that speaks git's real
# smart-HTTP protocol (git http-backend) over TLS and asks for HTTP Basic
# credentials on every request.
#
# Trust: see git_lib.sh (the supervisor passes the helper, and the helper
# git, no SSL_CERT_FILE or GIT_SSL_* variable anyway).
#
# Part 1 plays the supervisor with tests/tools/gitreq, which sends one
# IMSG_GIT_FETCH or IMSG_GIT_CHECKOUT to agrippa-git exactly as
# supervisor/gitrun.c does, so that the mirror and the workspace it leaves
# can be searched for the token, and git's processes for it while a fetch
# is held at the server.  Part 2 runs
# the real daemon (in such a namespace) and has `agrippactl repo test`
# clone over https with a sealed token.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
. tests/integration/git_lib.sh
need_root git_https
for prog in openssl git python3 unshare; do
	if ! command -v "$prog" >/dev/null 2>&1; then
		notok "$prog is installed (scripts/deps.sh)"
		finish git_https
		exit 1
	fi
done
make_env
SRV_PID=""
trap 'stop_git_server; cleanup_env' EXIT

GITREQ="$TOOLS/gitreq"
HELPER="$ROOT/$BUILD/agrippa-git"
TOKEN="tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BAD="bad-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
AUTH="Basic $(printf 'x-access-token:%s' "$TOKEN" | base64 -w0)"
BADAUTH="Basic $(printf 'x-access-token:%s' "$BAD" | base64 -w0)"
# Nor may its base64 forms leak: alone, and as in the Basic header (where
# it starts on a 3-byte boundary, so the two share this prefix).
B64A=$(printf '%s' "$TOKEN" | base64 -w0 | cut -c1-16)
mkdir -p "$T/tls" "$T/srv" "$T/ws" "$T/m"

check "a throwaway CA and server certificate" make_ca

BASE=$("$TOOLS/mkrepo" "$T/src")
git clone -q --bare "$T/src" "$T/srv/repo.git" >/dev/null 2>&1
check "a bare repository to serve ($BASE)" [ -n "$BASE" -a -f "$T/srv/repo.git/HEAD" ]
printf '%s\n' "$TOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"

if ! start_git_server; then
	notok "the fake git server starts"
	cat "$T/server.out"
	finish git_https
	exit 1
fi
ok "the fake git server starts"
URL="https://127.0.0.1:$PORT_TLS/repo.git"

# trusted CMD...: CMD in a mount namespace where the test CA is the bundle.
trusted() {
	# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
	unshare -m --propagation private sh -c \
		'mount --bind "$0" "$1" && shift && exec "$@"' "$T/tls/ca.crt" "$BUNDLE" "$@"
}
# fetch TOKEN URL MIRROR: one fetch through agrippa-git, trusted; its line
# in $OUT, its status in $RC.
fetch() {
	tok=$1
	shift
	printf '%s' "$tok" | trusted "$GITREQ" "$HELPER" fetch "$@" >"$T/out" 2>&1
	RC=$?
	OUT=$(cat "$T/out")
}
# checkout MIRROR WS URL: the workspace from the mirror (no token, no network).
checkout() {
	"$GITREQ" "$HELPER" checkout "$1" "" "$2" "$3" >"$T/out" 2>&1
	RC=$?
	OUT=$(cat "$T/out")
}
# log lines: SCHEME METHOD PATH AUTH (tab-separated), since mark $1.
since() { tail -n +"$(($1 + 1))" "$T/requests.log"; }
mark() { wc -l <"$T/requests.log" | tr -d ' '; }
# saw_since MARK METHOD PATH AUTH: the server logged that request since MARK.
saw_since() { since "$1" | grep -q -F -x "$(printf 'https\t%s\t%s\t%s' "$2" "$3" "$4")"; }
# empty DIR...: every DIR exists and holds nothing.
empty() {
	for d in "$@"; do [ -d "$d" ] && [ -z "$(ls -A "$d")" ] || return 1; done
}
# clean_reflog DIR: the work tree's HEAD reflog exists and names no credentials.
clean_reflog() { [ -f "$1/.git/logs/HEAD" ] && ! grep -q -e '@' -e x-access-token "$1/.git/logs/HEAD"; }
not_same() { ! cmp -s "$1" "$2"; }
# no_token DIR: neither the token nor its base64 anywhere below DIR.
no_token() { ! grep -r -a -q -e "$TOKEN" -e "$B64A" "$1"; }
# absent PATH...: none of them exists.
absent() { for p in "$@"; do [ ! -e "$p" ] || return 1; done; }

# --- the certificate is verified: untrusted, the token is never sent ------
M=$(mark)
printf '%s' "$TOKEN" | "$GITREQ" "$HELPER" fetch "$URL" "$T/m/untrusted" >"$T/out" 2>&1
RC=$?
OUT=$(cat "$T/out")
expect 1 '^error: clone: unable to access .*certificate' \
	"without the test CA in the bundle the fetch fails on the certificate ($OUT)"
# (the server logs NO-REQUEST from its connection thread once it sees the
# client close, which may be just after the client exited: wait for it)
only_no_request() { [ "$(since "$1" | cut -f2 | sort -u)" = "NO-REQUEST" ]; }
wait_for 5 only_no_request "$M"
check "... the server saw the connection but not one request" only_no_request "$M"
check "... and no mirror, whole or partial, is left" absent "$T/m/untrusted" "$T/m/untrusted.new"

# --- a mirror with the right token ----------------------------------------
M=$(mark)
fetch "$TOKEN" "$URL" "$T/m/good"
check "a mirror over https with the right token: ok ($OUT)" [ $RC -eq 0 ]
since "$M" >"$T/plain.log"
check "... the server saw Authorization: Basic base64(x-access-token:TOKEN)" \
	saw_since "$M" POST /repo.git/git-upload-pack "$AUTH"
check "... every request that carried credentials carried exactly those" \
	[ "$(cut -f4 "$T/plain.log" | grep -v '^-$' | grep -c -v -F -x "$AUTH")" = 0 ]
check "... the mirror is a bare repository at the commit" \
	[ "$(git --git-dir="$T/m/good" rev-parse HEAD)" = "$BASE" ]
check "... the token is nowhere in the mirror (config, refs, logs)" no_token "$T/m/good"
check "... and no credential helper but the helper's own is in its config" \
	[ -z "$(git config -f "$T/m/good/config" --get-all credential.helper)" ]
mkdir "$T/ws/plain"
checkout "$T/m/good" "$T/ws/plain" "$URL"
check "the workspace from the mirror: ok with the commit and its branch ($OUT)" \
	[ $RC -eq 0 -a "$OUT" = "ok $BASE master 0" ]
check "... the work tree is written" [ -f "$T/ws/plain/README.md" -a -f "$T/ws/plain/src/main.c" ]
check "... the token is nowhere in the workspace (files, .git/config, reflogs)" no_token "$T/ws/plain"
check "... the remote URL is the URL as given, without credentials" \
	[ "$(git config -f "$T/ws/plain/.git/config" remote.origin.url)" = "$URL" ]
check "... the reflog exists and names no credentials" clean_reflog "$T/ws/plain"
M=$(mark)
fetch "$TOKEN" "$URL" "$T/m/good"
check "a second fetch of the mirror: ok ($OUT)" [ $RC -eq 0 ]
check "... over https with the token" \
	saw_since "$M" GET "/repo.git/info/refs?service=git-upload-pack" "$AUTH"

# --- the token is in no argv and no environment while git works -----------
: >"$T/hold"
fetch_bg() {
	printf '%s' "$TOKEN" | trusted "$GITREQ" "$HELPER" fetch "$URL" "$T/m/held" \
		>"$T/held.out" 2>&1
}
M=$(mark)
fetch_bg &
HELD=$!
held() { since "$M" | grep -q "POST	/repo.git/git-upload-pack	$AUTH"; }
wait_for 20 held
check "a fetch is held at the server with the token given" held
leaks=0
seen=0
for p in /proc/[0-9]*; do
	case "$(cat "$p/comm" 2>/dev/null)" in git*|agrippa-git) seen=$((seen + 1)) ;; esac
	if { tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -q -e "$TOKEN" -e "$B64A" ||
	   { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -q -e "$TOKEN" -e "$B64A"; then
		leaks=$((leaks + 1))
		echo "# the token in the argv or environment of $(cat "$p/comm") ($p)"
	fi
done
check "... git's processes run meanwhile ($seen)" [ "$seen" -ge 2 ]
check "... and no process has the token in its argv or environment" [ "$leaks" = 0 ]
rm -f "$T/hold"
wait "$HELD"
check "... the held fetch then ends well ($(cat "$T/held.out"))" grep -q '^ok ' "$T/held.out"

# --- a wrong token ---------------------------------------------------------
M=$(mark)
fetch "$BAD" "$URL" "$T/m/bad"
expect 1 '^error: clone: the server refused the token' \
	"a wrong token: the fetch fails saying the server refused the token ($OUT)"
check "... the error names no token" [ "$(printf '%s' "$OUT" | grep -c -e "$BAD" -e "$TOKEN")" = 0 ]
check "... the wrong token was offered once, not replayed" \
	[ "$(since "$M" | cut -f4 | grep -c -F -x "$BADAUTH")" = 1 ]
check "... no mirror, whole or partial, is left" absent "$T/m/bad" "$T/m/bad.new"
M=$(mark)
fetch "$BAD" "$URL" "$T/m/good"
expect 1 '^error: fetch: the server refused the token' \
	"a wrong token on an existing mirror: the fetch fails the same way ($OUT)"
check "... and the mirror is as it was" [ "$(git --git-dir="$T/m/good" rev-parse HEAD)" = "$BASE" ]
fetch "" "$URL" "$T/m/none"
expect 1 'the server asks for credentials and the connection has no token' \
	"no token where the server asks for one: said so ($OUT)"

# --- no token without TLS ---------------------------------------------------
M=$(mark)
fetch "$TOKEN" "http://127.0.0.1:$PORT_PLAIN/repo.git" "$T/m/http"
check "an http:// URL is refused before any connection ($OUT)" \
	[ $RC -eq 1 -a -z "$(since "$M")" ]
M=$(mark)
fetch "$TOKEN" "https://x-access-token:$TOKEN@127.0.0.1:$PORT_TLS/repo.git" "$T/m/userinfo"
check "a URL with credentials in it is refused before any connection" \
	[ $RC -eq 1 -a -z "$(since "$M")" ]
check "no git request reached the plain-http listener" \
	[ "$(cut -f1 "$T/requests.log" | grep -c -x http)" = 0 ]
check "every request the server saw came over TLS" \
	[ "$(grep -c -v '^https	' "$T/requests.log")" = 0 ]
# Control: the plain-http listener does log what reaches it.
curl -s -o /dev/null --max-time 8 "http://127.0.0.1:$PORT_PLAIN/control"
check "(control: the plain-http listener logs requests)" \
	grep -q -x "$(printf 'http\tGET\t/control\t-')" "$T/requests.log"
check "no request over plain http ever carried credentials" \
	[ "$(awk -F '\t' '$1 == "http" && $4 != "-"' "$T/requests.log" | wc -l)" -eq 0 ]

# --- the real daemon: repo test over https with a sealed token -------------
# agrippad itself runs in the trusting mount namespace (exec keeps the pid,
# so SUP_PID and the daemon helpers of lib.sh see agrippad).
start_trusting_daemon git_https
run() { "$AGRIPPACTL" -s "$CTL" "$@" >"$T/out" 2>&1; RC=$?; OUT=$(cat "$T/out"); }
run project add p1
printf '%s' "$TOKEN" | "$AGRIPPACTL" -s "$CTL" repo add p1 good "$URL" >"$T/out" 2>&1
check "repo add with an https URL and a token ($(cat "$T/out"))" [ $? -eq 0 ]
printf '%s' "$BAD" | "$AGRIPPACTL" -s "$CTL" repo add p1 bad "$URL" >/dev/null 2>&1
M=$(mark)
run repo test p1 good
check "repo test over https with the sealed token: the commit ($OUT)" \
	[ $RC -eq 0 -a "$OUT" = "repo good: checked out commit $BASE" ]
check "... the server saw Authorization: Basic base64(x-access-token:TOKEN)" \
	saw_since "$M" POST /repo.git/git-upload-pack "$AUTH"
run repo test p1 bad
expect 1 '^agrippactl: repo bad: clone: the server refused the token' \
	"repo test with a wrong token: exit 1 with the reason ($OUT)"
# the scratch workspace is removed in the background once the helper is done
no_scratch() { [ -z "$(ls -A "$T/state/work" 2>/dev/null)" ]; }
wait_for 60 no_scratch
check "no scratch workspace is left behind" no_scratch
check "the token is in no log line" [ "$(grep -c -e "$TOKEN" -e "$B64A" "$LOG")" = 0 ]
check "the token is nowhere in the daemon's state directory" no_token "$T/state"
check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" \
	[ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
check "the host's CA bundle is untouched (the bind mounts stayed in their namespaces)" \
	not_same "$T/tls/ca.crt" "$BUNDLE"
finish git_https
