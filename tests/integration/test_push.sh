#!/bin/sh
# The git helper's push (githelper/push.c) over https against the real
# `git http-backend` (tests/fakes/git_https.py: TLS, HTTP Basic on every
# request), with a repository token: tests/tools/pushreq runs gh_push as
# the helper would, the token on its standard input, inside a mount
# namespace where the test CA is the bundle (see git_lib.sh).
#
# A push lands exactly the run's change on a new branch, links as links,
# and leaves the mirror as it was; the same change again is found there and
# nothing is sent; a wrong token, no token, an untrusted certificate fail
# saying so; a pre-receive hook that declines fails with the server's
# reason; a commit someone else pushed to the branch is refused and stays
# the branch's head; a workspace whose .git pushes elsewhere changes
# nothing; the token is in no output, no file of the server's repository,
# the mirror or the workspace, and in no process's argv or environment
# while a push is held at the server.
. tests/integration/lib.sh
. tests/integration/git_lib.sh
need_root push
for prog in openssl git python3 unshare; do
	if ! command -v "$prog" >/dev/null 2>&1; then
		notok "$prog is installed (scripts/deps.sh)"
		finish push
		exit 1
	fi
done
make_env
SRV_PID=""
trap 'stop_git_server; cleanup_env' EXIT

GITREQ="$TOOLS/gitreq"
PUSHREQ="$TOOLS/pushreq"
HELPER="$ROOT/$BUILD/agrippa-git"
TOKEN="tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
BAD="bad-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
AUTH="Basic $(printf 'x-access-token:%s' "$TOKEN" | base64 -w0)"
BADAUTH="Basic $(printf 'x-access-token:%s' "$BAD" | base64 -w0)"
B64A=$(printf '%s' "$TOKEN" | base64 -w0 | cut -c1-16)
SRV="$T/srv/repo.git"
BR=refs/heads/agrippa/run-1
mkdir -p "$T/tls" "$T/srv" "$T/ws"

check "a throwaway CA and server certificate" make_ca
BASE=$("$TOOLS/mkrepo" "$T/src")
git clone -q --bare "$T/src" "$SRV" >/dev/null 2>&1
git clone -q --bare "$T/src" "$T/srv/other.git" >/dev/null 2>&1
check "bare repositories to serve ($BASE)" [ -n "$BASE" -a -f "$SRV/HEAD" -a -f "$T/srv/other.git/HEAD" ]
printf '%s\n' "$TOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"
if ! start_git_server; then
	notok "the fake git server starts"
	cat "$T/server.out"
	finish push
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
# push TOKEN WS BRANCH LEASE: gh_push of WS, trusted; its line in $OUT,
# its status in $RC; every output is kept in $T/outputs.
push() {
	printf '%s' "$1" | trusted "$PUSHREQ" "$T/m" "$2" "$BASE" "$3" "$4" "$URL" >"$T/out" 2>&1
	RC=$?
	OUT=$(cat "$T/out")
	cat "$T/out" >>"$T/outputs"
}
# workspace NAME: a fresh workspace of the mirror at the base, in $WS.
workspace() {
	WS="$T/ws/$1"
	mkdir "$WS"
	"$GITREQ" "$HELPER" checkout "$T/m" "" "$WS" "$URL" >"$T/out" 2>&1
}
since() { tail -n +"$(($1 + 1))" "$T/requests.log"; }
mark() { wc -l <"$T/requests.log" | tr -d ' '; }
saw_since() { since "$1" | grep -q -F -x "$(printf 'https\t%s\t%s\t%s' "$2" "$3" "$4")"; }
head_of() { git ls-remote "$SRV" "$1" | cut -f1; }
no_token() { ! grep -r -a -q -e "$TOKEN" -e "$B64A" "$1"; }
# fails_with PATTERN: the last push failed (status 1) saying PATTERN.
fails_with() { [ "$RC" -eq 1 ] && printf '%s\n' "$OUT" | grep -q -e "$1"; }
list_mirror() { (cd "$T/m" && find . -printf '%p %s %T@\n' | sort); }

"$GITREQ" "$HELPER" fetch "$SRV" "$T/m" </dev/null >"$T/out" 2>&1
check "the mirror of the served repository ($(cat "$T/out"))" grep -q '^ok ' "$T/out"

# --- a push: the run's change, exactly, on a new branch ------------------------
workspace a
check "a workspace at the base ($(cat "$T/out"))" grep -q "^ok $BASE " "$T/out"
printf 'hello from the run\n' >"$WS/README.md"
ln -s /etc/passwd "$WS/passwd"
list_mirror >"$T/mirror.before"
M=$(mark)
push "$TOKEN" "$WS" "$BR" ""
C1=$(printf '%s' "$OUT" | sed -n 's/^ok \([0-9a-f]*\)$/\1/p')
check "a push with the right token: ok ($OUT)" [ "$RC" -eq 0 -a -n "$C1" ]
check "... git ls-remote: the branch is at the pushed commit" [ "$(head_of "$BR")" = "$C1" ]
check "... its parent is the base" [ "$(git --git-dir="$SRV" rev-parse "$C1^")" = "$BASE" ]
git clone -q "$T/src" "$T/scratch" >/dev/null 2>&1
(cd "$T/scratch" && git checkout -q "$BASE" && printf 'hello from the run\n' >README.md &&
	ln -s /etc/passwd passwd && git add -A) >/dev/null 2>&1
check "... its tree is the base's with the change (as git add makes it)" \
	[ "$(git --git-dir="$SRV" rev-parse "$C1^{tree}")" = "$(git -C "$T/scratch" write-tree)" ]
check "... the link is committed as a link to /etc/passwd, not its content" \
	[ "$(git --git-dir="$SRV" ls-tree "$C1" passwd | cut -d' ' -f1)" = 120000 -a \
	"$(git --git-dir="$SRV" cat-file -p "$C1:passwd")" = /etc/passwd ]
check "... the server saw the pack with Authorization: Basic base64(x-access-token:TOKEN)" \
	saw_since "$M" POST /repo.git/git-receive-pack "$AUTH"
check "... every request that carried credentials carried exactly those" \
	[ "$(since "$M" | cut -f4 | grep -v '^-$' | grep -c -v -F -x "$AUTH")" = 0 ]
check "... every request came over TLS" [ "$(since "$M" | grep -c -v '^https	')" = 0 ]
list_mirror >"$T/mirror.after"
check "... the mirror is as it was (no file, ref or time of it changed)" \
	cmp -s "$T/mirror.before" "$T/mirror.after"

M=$(mark)
push "$TOKEN" "$WS" "$BR" ""
check "the same change again: the same commit, already there ($OUT)" \
	[ "$RC" -eq 0 -a "$OUT" = "ok $C1 already" ]
check "... and no pack was sent" [ "$(since "$M" | grep -c "POST	/repo.git/git-receive-pack")" = 0 ]
push "$TOKEN" "$WS" "$BR" "$C1"
check "... with the lease of our last push, the same ($OUT)" [ "$OUT" = "ok $C1 already" ]

# --- the server's branch moved on past the base ---------------------------------
# The pack is computed against the base alone when the server advertises
# it; here it does not (main moved on upstream after the mirror's fetch),
# and the push must still carry what the server lacks, and no more.
git clone -q "$SRV" "$T/upstream" >/dev/null 2>&1
(cd "$T/upstream" && printf 'upstream moved on\n' >UPSTREAM &&
	git add UPSTREAM && git -c user.name=u -c user.email=u@example.com commit -q -m moved &&
	git push -q origin HEAD:main) >/dev/null 2>&1
MOVED=$(git --git-dir="$SRV" rev-parse main)
check "upstream's main moved past the base ($MOVED)" [ -n "$MOVED" -a "$MOVED" != "$BASE" ]
workspace moved
printf 'a change on the old base\n' >"$WS/MOVED.md"
push "$TOKEN" "$WS" refs/heads/agrippa/moved ""
C3=$(printf '%s' "$OUT" | sed -n 's/^ok \([0-9a-f]*\)$/\1/p')
check "a push whose base is no longer a tip of the server's: ok ($OUT)" [ "$RC" -eq 0 -a -n "$C3" ]
check "... its parent is the base, its tree the base's with the change" \
	[ "$(git --git-dir="$SRV" rev-parse "$C3^")" = "$BASE" ] &&
	[ "$(git --git-dir="$SRV" cat-file -p "$C3:MOVED.md")" = "a change on the old base" ] &&
	[ -z "$(git --git-dir="$SRV" diff-tree -r --name-only "$BASE" "$C3" | grep -v -x MOVED.md)" ]
check "... and the server's repository is whole (git fsck)" git --git-dir="$SRV" fsck --no-progress --no-dangling

# --- credentials and trust -------------------------------------------------------
workspace b
printf 'change b\n' >"$WS/README.md"
M=$(mark)
push "$BAD" "$WS" refs/heads/agrippa/bad ""
check "a wrong token: the push fails saying the server refused the token ($OUT)" \
	fails_with 'refs/heads/agrippa/bad: .*the server refused the token'
check "... the wrong token was offered once, not replayed" \
	[ "$(since "$M" | cut -f4 | grep -c -F -x "$BADAUTH")" = 1 ]
check "... the error names no token" [ "$(printf '%s' "$OUT" | grep -c -e "$BAD" -e "$TOKEN")" = 0 ]
check "... no branch was made" [ -z "$(head_of refs/heads/agrippa/bad)" ]
push "" "$WS" refs/heads/agrippa/bad ""
check "no token where the server asks for one: said so ($OUT)" \
	fails_with 'asks for credentials and the connection has no token'
M=$(mark)
printf '%s' "$TOKEN" | "$PUSHREQ" "$T/m" "$WS" "$BASE" refs/heads/agrippa/bad "" "$URL" >"$T/out" 2>&1
RC=$?
OUT=$(cat "$T/out")
check "without the test CA the push fails on the certificate ($OUT)" \
	fails_with "certificate is not trusted"
only_no_request() { [ "$(since "$1" | cut -f2 | sort -u)" = "NO-REQUEST" ]; }
wait_for 5 only_no_request "$M"
check "... the server saw the connection but not one request" only_no_request "$M"
M=$(mark)
printf '%s' "$TOKEN" | trusted "$PUSHREQ" "$T/m" "$WS" "$BASE" refs/heads/agrippa/bad "" \
	"http://127.0.0.1:$PORT_PLAIN/repo.git" >"$T/out" 2>&1
check "an http:// URL is refused before any connection ($(cat "$T/out"))" \
	[ -z "$(since "$M")" ] && grep -q '^error: ' "$T/out"
cat "$T/out" >>"$T/outputs"

# --- the server's refusal ----------------------------------------------------------
cat >"$SRV/hooks/pre-receive" <<'EOF'
#!/bin/sh
while read -r old new ref; do
	case "$ref" in
	refs/heads/protected/*) echo "agrippa-test: $ref is protected, no pushes" >&2; exit 1 ;;
	esac
done
exit 0
EOF
chmod 0755 "$SRV/hooks/pre-receive"
push "$TOKEN" "$WS" refs/heads/protected/x ""
check "a pre-receive hook that declines: the push fails with the server's reason ($OUT)" \
	fails_with 'refs/heads/protected/x: the server refused the update: pre-receive hook declined (the server said: .*agrippa-test: refs/heads/protected/x is protected, no pushes'
check "... the branch is not there" [ -z "$(head_of refs/heads/protected/x)" ]

# --- someone else's commit on the branch ----------------------------------------
git clone -q "$SRV" "$T/other" >/dev/null 2>&1
(cd "$T/other" && git checkout -q agrippa/run-1 && echo theirs >theirs.txt && git add theirs.txt &&
	git -c user.name=o -c user.email=o@example.com commit -qm theirs &&
	git push -q origin agrippa/run-1) >/dev/null 2>&1
THEIRS=$(git -C "$T/other" rev-parse HEAD)
check "someone else pushes a commit onto the run's branch" [ "$(head_of "$BR")" = "$THEIRS" ]
printf 'hello again from the run\n' >"$T/ws/a/README.md"
push "$TOKEN" "$T/ws/a" "$BR" "$C1"
check "a retry with our lease is refused, saying who moved it where ($OUT)" \
	fails_with "the branch $BR was moved by someone else (now at $THEIRS"
check "... git ls-remote: their commit is still the branch's head" [ "$(head_of "$BR")" = "$THEIRS" ]

# --- a workspace whose .git pushes elsewhere ------------------------------------
workspace c
printf 'change c\n' >"$WS/README.md"
cat >>"$WS/.git/config" <<EOF
[remote "origin"]
	pushurl = https://127.0.0.1:$PORT_TLS/other.git
[url "https://127.0.0.1:$PORT_TLS/other.git"]
	insteadOf = $URL
	pushInsteadOf = $URL
EOF
mkdir -p "$WS/.git/hooks"
printf '#!/bin/sh\ntouch %s/hook-ran\n' "$T" >"$WS/.git/hooks/pre-push"
chmod 0755 "$WS/.git/hooks/pre-push"
M=$(mark)
push "$TOKEN" "$WS" refs/heads/agrippa/run-c ""
check "a workspace whose .git names another push URL: pushed to the URL given ($OUT)" \
	[ "$RC" -eq 0 -a -n "$(head_of refs/heads/agrippa/run-c)" ]
check "... nothing reached the other repository" \
	[ "$(since "$M" | grep -c other.git)" = 0 -a -z "$(git --git-dir="$T/srv/other.git" for-each-ref refs/heads/agrippa)" ]
check "... and its hook did not run" [ ! -e "$T/hook-ran" ]

# --- the token is in no argv and no environment while a push is held --------------
workspace d
printf 'change d\n' >"$WS/README.md"
: >"$T/hold-push"
M=$(mark)
printf '%s' "$TOKEN" | trusted "$PUSHREQ" "$T/m" "$WS" "$BASE" refs/heads/agrippa/run-d "" "$URL" \
	>"$T/held.out" 2>&1 &
HELD=$!
held() { since "$M" | grep -q "POST	/repo.git/git-receive-pack	$AUTH"; }
wait_for 20 held
check "a push is held at the server with the token given" held
leaks=0
seen=0
for p in /proc/[0-9]*; do
	case "$(cat "$p/comm" 2>/dev/null)" in pushreq) seen=$((seen + 1)) ;; esac
	if { tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -q -e "$TOKEN" -e "$B64A" ||
	   { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -q -e "$TOKEN" -e "$B64A"; then
		leaks=$((leaks + 1))
		echo "# the token in the argv or environment of $(cat "$p/comm") ($p)"
	fi
done
check "... the pushing process runs meanwhile ($seen)" [ "$seen" -ge 1 ]
check "... and no process has the token in its argv or environment" [ "$leaks" = 0 ]
rm -f "$T/hold-push"
wait "$HELD"
check "... the held push then ends well ($(cat "$T/held.out"))" grep -q '^ok ' "$T/held.out"
cat "$T/held.out" >>"$T/outputs"

check "the token is in no output of the pushes" no_token "$T/outputs"
check "the token is nowhere in the server's repository (config, refs, logs)" no_token "$SRV"
check "... nor in the mirror" no_token "$T/m"
check "... nor in the workspaces" no_token "$T/ws"
finish push
