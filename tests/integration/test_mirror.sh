#!/bin/sh
# Repository mirrors against the real daemon (DESIGN.md section 3.8): a
# connection's runs share one bare mirror under STATE/mirrors, fetched
# incrementally; each run's workspace is the work tree of its base commit
# written from the mirror, with a .git that borrows the mirror's objects
# (read-only in the sandbox) instead of copying the history.
#  - a run on a repository of hundreds of commits: its .git holds no
#    history, and git log, show, status and diff work in the sandbox;
#  - an upstream commit, then a force-push, between runs: each run's base
#    is the new tip;
#  - the template's workspace.ref: a branch, a tag, a commit id; a missing
#    ref fails the run naming it;
#  - the sandbox cannot write to the mirror (byte for byte unchanged), and a
#    workspace .git the agent rewrote does not change the patch;
#  - over https (tests/fakes/git_https.py, real git http-backend): ten runs
#    submitted while a fetch is held at the server make one fetch and all
#    succeed; no process has the token in its argv or environment, and no
#    file or log of the daemon holds it; kill -9 of the git helper
#    mid-fetch fails that run, and the next run repairs the mirror and
#    succeeds;
#  - removing a connection over the API removes its mirror.
. tests/integration/lib.sh
. tests/integration/ctl_lib.sh
. tests/integration/git_lib.sh
need_root mirror
for prog in openssl git python3 unshare curl; do
	if ! command -v "$prog" >/dev/null 2>&1; then
		notok "$prog is installed (scripts/deps.sh)"
		finish mirror
		exit 1
	fi
done
make_env
SRV_PID=""
trap 'stop_git_server; cleanup_env' EXIT
cat >>"$CONF" <<EOC
engine: { concurrency: 16, lease: 10, sweep: 1 }
sandbox: { max: 24 }
EOC

TOKEN="tok-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
B64A=$(printf '%s' "$TOKEN" | base64 -w0 | cut -c1-16)
AUTH="Basic $(printf 'x-access-token:%s' "$TOKEN" | base64 -w0)"
mkdir -p "$T/tls" "$T/srv" "$T/up" "$T/tmpl"
chmod 0755 "$T/up" "$T/srv"
G="git -c user.name=t -c user.email=t@example.com"

# --- an upstream of a few hundred commits -----------------------------------
(
	cd "$T/up" && git init -q -b main src && cd src &&
	mkdir -p src docs && echo "hello" >README.md &&
	i=0 && while [ $i -lt 300 ]; do
		echo "line $i" >>src/main.c
		[ $((i % 7)) -eq 0 ] && echo "note $i" >"docs/n$((i % 40)).md"
		$G add -A && $G commit -q -m "commit $i" || exit 1
		i=$((i + 1))
	done &&
	$G tag v1.0 HEAD~100 && $G tag -a -m "release two" v2.0 HEAD~50 &&
	$G branch topic HEAD~10
) >"$T/up.log" 2>&1
UP="$T/up/src"
HEAD0=$(git -C "$UP" rev-parse HEAD)
V1=$(git -C "$UP" rev-parse v1.0)
V2=$(git -C "$UP" rev-parse 'v2.0^{commit}')
TOPIC=$(git -C "$UP" rev-parse topic)
check "an upstream of 300 commits with tags and a branch" \
	[ "$(git -C "$UP" rev-list --count HEAD)" = 300 -a -n "$V1" -a -n "$V2" -a -n "$TOPIC" ]
chmod -R a+rX "$T/up"

# The https server: a bare copy of the upstream, served with a token.
make_ca
git clone -q --bare "$UP" "$T/srv/repo.git" >/dev/null 2>&1
printf '%s\n' "$TOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"
start_git_server
check "the fake git server starts" [ -n "${PORT_TLS:-}" ]
URL="https://127.0.0.1:$PORT_TLS/repo.git"

start_trusting_daemon mirror

# tmpl NAME [REF]: a template with the usual head; steps on stdin.
tmpl() {
	{
		printf 'name: %s\nversion: 1\n' "$1"
		printf 'params:\n  repo: { type: repoRef, required: true }\n'
		printf '  ref: { type: string, default: "" }\n'
		printf 'workspace: { repo: "${params.repo}", ref: "${params.ref}", access: readWrite }\n'
		printf 'phases:\n'
		cat
	} >"$T/tmpl/$1.yaml"
	ctl template load "$T/tmpl/$1.yaml"
}
tmpl look <<'EOF'
  - name: one
    steps:
      - id: git
        kind: command
        run: |
          echo "count $(git rev-list --count HEAD)"
          echo "head $(git rev-parse HEAD)"
          echo "show $(git show -s --format=%s HEAD~5)"
          echo "status [$(git status --porcelain)]"
          echo changed >>README.md
          echo "diff $(git diff --stat | tail -1)"
          git checkout -q README.md
          echo "alternates $(cat .git/objects/info/alternates)"
      - { id: wait, kind: checkpoint, message: "look", expires_in: 1h }
EOF
tmpl quick <<'EOF'
  - name: one
    steps:
      - { id: base, kind: command, run: "git rev-parse HEAD; cat README.md" }
EOF
tmpl attack <<'EOF'
  - name: one
    steps:
      - id: write
        kind: command
        allow_failure: true
        run: |
          n=0
          touch /mirror/objects/planted 2>/dev/null && n=$((n+1))
          for f in /mirror/objects/pack/*; do
            printf x >>"$f" 2>/dev/null && n=$((n+1))
            rm -f "$f" 2>/dev/null; [ -e "$f" ] || n=$((n+1))
          done
          mkdir /mirror/objects/zz 2>/dev/null && n=$((n+1))
          mount -o remount,rw /mirror/objects 2>/dev/null && n=$((n+1))
          git -c gc.auto=0 repack -a -d -q 2>/dev/null
          git gc -q --prune=now 2>/dev/null
          echo "writes $n"
      - id: rewrite
        kind: command
        run: |
          echo "agent change" >>README.md
          # the same size, the same inode, the mtime put back: only the
          # ctime tells, and the patch must still see it
          touch -r docs/n0.md /tmp/when
          printf NOTE | dd of=docs/n0.md bs=1 conv=notrunc status=none
          touch -r /tmp/when docs/n0.md
          echo /tmp/elsewhere >.git/objects/info/alternates
          mkdir -p /tmp/elsewhere
          git update-ref refs/heads/main 0000000000000000000000000000000000000000 2>/dev/null
          printf 'ref: refs/heads/nowhere\n' >.git/HEAD
          rm -f .git/index
          echo done
      - { id: patch, kind: patch, produces: [ { key: patch, kind: patch, required: true } ] }
EOF

ctl project add p1 && ctl user add alice && ctl member add p1 alice admin
ctl repo add p1 local "$UP" </dev/null
printf '%s' "$TOKEN" | ctl repo add p1 remote "$URL"
TA=$(new_token alice)
P1=$(psql_q "select id from projects where name = 'p1'")
LOCAL_ID=$(psql_q "select id from repo_connections where name = 'local'")
REMOTE_ID=$(psql_q "select id from repo_connections where name = 'remote'")
check "set-up: a project, a user, two connections" [ -n "$TA" -a -n "$LOCAL_ID" -a -n "$REMOTE_ID" ]
MIRRORS="$T/state/mirrors"

J='Content-Type: application/json'
# submit TEMPLATE REPO [REF]: RUN set
submit() {
	RUN=$(curl -s --max-time 10 -H "Authorization: Bearer $TA" -H "$J" \
		--data-binary "{\"template\": \"$1\", \"params\": {\"repo\": \"$2\", \"ref\": \"${3:-}\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))' 2>/dev/null)
}
run_status() { psql_q "select status from runs where id = '$1'"; }
is_status() { [ "$(run_status "$1")" = "$2" ]; }
ended() { case "$(run_status "$1")" in succeeded|failed|cancelled) return 0 ;; esac; return 1; }
out_of() { # out_of RUN STEP: the step's stdout
	psql_q "select string_agg(payload->>'text', '' order by seq) from run_events
		where run_id = '$1' and type = 'step.output' and payload->>'step_id' = '$2' and payload->>'stream' = 'stdout'"
}
ready_of() { # ready_of RUN: workspace.ready's base_commit and ref
	psql_q "select (payload->>'base_commit') || ' ' || (payload->>'ref') from run_events
		where run_id = '$1' and type = 'workspace.ready'"
}
cancel() {
	curl -s -o /dev/null --max-time 10 -H "Authorization: Bearer $TA" -X POST \
		"http://127.0.0.1:$PORT/v1/runs/$1/cancel"
}
fetches() { grep -c "mirror $1: fetched" "$LOG"; }
# tree_sum DIR: every file's path and digest, and every directory's, sorted;
# but the fetch's stamp, which each run's fetch rewrites (its time)
tree_sum() {
	(cd "$1" && find . ! -name agrippa-fetched -printf '%p %y %m\n' | sort &&
		find . -type f ! -name agrippa-fetched -print0 | sort -z | xargs -0 sha256sum)
}

# --- a run on 300 commits -----------------------------------------------------
submit look local
R1=$RUN
wait_for 60 is_status "$R1" waiting_approval
check "a run on a 300-commit repository reaches its checkpoint ($(run_status "$R1"))" \
	is_status "$R1" waiting_approval
check "workspace.ready names the base commit and the default branch" \
	[ "$(ready_of "$R1")" = "$HEAD0 main" ]
out_of "$R1" git >"$T/look"
check "in the sandbox git sees the whole history through the mirror" grep -qx 'count 300' "$T/look"
check "... HEAD is the base commit" grep -qx "head $HEAD0" "$T/look"
check "... git show reads an old commit" grep -qx 'show commit 294' "$T/look"
check "... git status is clean" grep -qx 'status \[\]' "$T/look"
check "... git diff sees a change" grep -q '^diff  *1 file changed, 1 insertion' "$T/look"
check "... the alternates entry names the read-only mount" grep -qx 'alternates /mirror/objects' "$T/look"
# the daemon runs in a mount namespace of its own (the test CA): the run's
# disk is mounted there
inns() { nsenter -t "$SUP_PID" -m -- "$@"; }
WS="$T/state/runs/$R1/ws"
inns test -d "$T/state/runs/$R1/disk/ws" && WS="$T/state/runs/$R1/disk/ws"
MSIZE=$(du -sb "$MIRRORS/$LOCAL_ID" | cut -f1)
WSIZE=$(inns du -sb "$WS/.git" | cut -f1)
check "the mirror is STATE/mirrors/ID, a bare repository at the tip" \
	[ "$(git --git-dir="$MIRRORS/$LOCAL_ID" rev-parse HEAD)" = "$HEAD0" ]
check "the workspace's .git holds no object: no pack, no loose object" \
	[ -n "$(inns find "$WS/.git/objects" -type f -name alternates)" -a \
	  -z "$(inns find "$WS/.git/objects" -type f ! -name alternates)" ]
check "... its size ($WSIZE bytes) is well under the mirror's ($MSIZE)" \
	[ "${WSIZE:-0}" -gt 0 ] && [ "$((WSIZE * 2))" -lt "$MSIZE" ]
check "STATE/mirrors is the service user's, mode 0700" \
	[ "$(stat -c '%U %a' "$MIRRORS")" = "_agrippa 700" ]
check "the mirror is the service user's too" [ "$(stat -c '%U' "$MIRRORS/$LOCAL_ID")" = "_agrippa" ]
# The chowner's list of what it gave (common/wsstat.h), beside the
# workspace: what lets the patch hash only what changed.
LIST="$T/state/runs/$R1/ws.stat"
SBX_UID=$(inns stat -c %u "$WS")
tr '\0' '\n' <"$LIST" >"$T/list.txt" 2>/dev/null
check "the workspace's list is beside it, the service user's, mode 0600" \
	[ "$(stat -c '%U %a' "$LIST")" = "_agrippa 600" ]
check "... for the base commit, whole (its end counts its records) and sealed last" \
	[ "$(head -1 "$T/list.txt")" = "agrippa-stat 1 $HEAD0" ] &&
	[ "$(grep -c '^[fl] ' "$T/list.txt")" = "$(sed -n 's/^end \([0-9]*\) .*/\1/p' "$T/list.txt")" ] &&
	tail -1 "$T/list.txt" | grep -q '^seal [0-9]* [0-9]*$'
check "... listing the files as the sandbox user's (uid $SBX_UID), not the directories" \
	grep -q "^f 100644 [0-9]* [0-9]* $SBX_UID $SBX_UID 6 .* README.md\$" "$T/list.txt" &&
	! grep -q ' src$' "$T/list.txt"
check "the workspace is the sandbox user's (sandbox.uid 2000000000)" \
	[ "$(inns stat -c '%u' "$WS/README.md")" = 2000000000 ]
cancel "$R1"

# --- upstream moves between runs: a commit, then a force-push ------------------
(cd "$UP" && echo more >>README.md && $G commit -q -am "upstream commit") >/dev/null
HEAD1=$(git -C "$UP" rev-parse HEAD)
submit quick local
R2=$RUN
wait_for 60 ended "$R2"
check "an upstream commit pushed after a run is the next run's base" \
	[ "$(run_status "$R2")" = succeeded -a "$(ready_of "$R2")" = "$HEAD1 main" ]
check "... its README has the new line ($(out_of "$R2" base | tr '\n' '|'))" \
	eval "out_of '$R2' base | grep -qx more"
(cd "$UP" && git reset -q --hard HEAD~3 && echo rewritten >README.md && $G commit -q -am "rewritten") >/dev/null
HEAD2=$(git -C "$UP" rev-parse HEAD)
submit quick local
R3=$RUN
wait_for 60 ended "$R3"
check "a force-push upstream is followed: the rewritten tip is the base ($(psql_q "select error from runs where id = '$R3'"))" \
	[ "$(run_status "$R3")" = succeeded -a "$(ready_of "$R3")" = "$HEAD2 main" ]
# A local source whose branches did not move is compared with the mirror
# instead of fetched: a tag alone upstream (no branch moved) must still
# reach the next run.
(cd "$UP" && $G tag v3.0 HEAD~1) >/dev/null
V3=$(git -C "$UP" rev-parse v3.0)
submit quick local v3.0
wait_for 60 ended "$RUN"
check "a tag made upstream while no branch moved is fetched for the next run ($(psql_q "select coalesce(error, '') from runs where id = '$RUN'"))" \
	[ "$(run_status "$RUN")" = succeeded -a "$(ready_of "$RUN")" = "$V3 v3.0" ]
(cd "$UP" && git tag -d v3.0) >/dev/null
submit quick local v3.0
wait_for 60 ended "$RUN"
check "... and a tag deleted upstream is gone from the mirror: the ref fails" \
	[ "$(run_status "$RUN")" = failed ]

# --- workspace.ref --------------------------------------------------------------
for case in "topic topic $TOPIC" "v1.0 v1.0 $V1" "v2.0 v2.0 $V2" "$V1 $V1 $V1"; do
	set -- $case
	submit quick local "$1"
	wait_for 60 ended "$RUN"
	check "ref $1: the run checks out $3 ($(psql_q "select coalesce(error, '') from runs where id = '$RUN'"))" \
		[ "$(run_status "$RUN")" = succeeded -a "$(ready_of "$RUN")" = "$3 $2" ]
done
submit quick local nosuch-branch
wait_for 60 ended "$RUN"
check "a missing ref fails the run at checkout, naming it" \
	[ "$(run_status "$RUN")" = failed -a \
	  "$(psql_q "select error from runs where id = '$RUN'")" = \
	  "checkout failed: ref nosuch-branch: no such branch, tag or commit in the repository" ]

# --- the sandbox against the mirror ------------------------------------------------
tree_sum "$MIRRORS/$LOCAL_ID" >"$T/mirror.before"
submit attack local
R4=$RUN
wait_for 60 ended "$R4"
check "the attacking run ends ($(run_status "$R4"): $(psql_q "select coalesce(error, '') from runs where id = '$R4'"))" \
	is_status "$R4" succeeded
check "no write into the mirror's objects succeeded ($(out_of "$R4" write))" \
	[ "$(out_of "$R4" write)" = "writes 0" ]
tree_sum "$MIRRORS/$LOCAL_ID" >"$T/mirror.after"
check "... the mirror is byte for byte as it was" cmp -s "$T/mirror.before" "$T/mirror.after"
PATCH=$(psql_q "select convert_from(inline, 'UTF8') from artifacts where run_id = '$R4' and key = 'patch'")
printf '%s\n' "$PATCH" >"$T/patch"
check "a rewritten workspace .git (alternates, refs, HEAD, index) does not change the patch" \
	[ "$(grep -c '^diff --git' "$T/patch")" = 2 ] && grep -q '^+agent change$' "$T/patch" &&
	grep -q "^index $(git -C "$UP" rev-parse HEAD:README.md | cut -c1-7)" "$T/patch"
check "a file rewritten in place to the same size, its mtime put back, is in the patch" \
	grep -q '^+NOTE 280$' "$T/patch"
check "no run's list was refused (every diff could use its list)" \
	[ "$(grep -c "the workspace's list: .*every file is hashed" "$LOG")" = 0 ]

# --- over https: ten runs, one fetch ------------------------------------------------
submit quick remote
R5=$RUN
wait_for 90 ended "$R5"
check "a run over https with the sealed token succeeds ($(psql_q "select coalesce(error, '') from runs where id = '$R5'"))" \
	[ "$(run_status "$R5")" = succeeded -a "$(ready_of "$R5")" = "$HEAD0 main" ]
N0=$(fetches "$REMOTE_ID")
M=$(wc -l <"$T/requests.log")
: >"$T/hold"
RUNS=""
i=0
while [ $i -lt 10 ]; do
	submit quick remote
	RUNS="$RUNS $RUN"
	i=$((i + 1))
done
all_claimed() {
	for r in $RUNS; do is_status "$r" running || return 1; done
}
wait_for 30 all_claimed
held() { tail -n +"$((M + 1))" "$T/requests.log" | grep -q "POST	/repo.git/git-upload-pack	$AUTH"; }
wait_for 30 held
check "ten runs submitted at once are all claimed while the fetch is held" all_claimed
# meanwhile: the token in no argv or environment
leaks=0
for p in /proc/[0-9]*; do
	if { tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -q -e "$TOKEN" -e "$B64A" ||
	   { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -q -e "$TOKEN" -e "$B64A"; then
		leaks=$((leaks + 1))
		echo "# the token in the argv or environment of $(cat "$p/comm") ($p)"
	fi
done
check "while git fetches, no process has the token in its argv or environment" [ "$leaks" = 0 ]
rm -f "$T/hold"
all_ended() { for r in $RUNS; do ended "$r" || return 1; done; }
wait_for 120 all_ended
ok_runs=0
for r in $RUNS; do is_status "$r" succeeded && ok_runs=$((ok_runs + 1)); done
check "all ten succeed ($ok_runs)" [ "$ok_runs" = 10 ]
check "... after one fetch, not ten ($(($(fetches "$REMOTE_ID") - N0)))" \
	[ "$(($(fetches "$REMOTE_ID") - N0))" = 1 ]
check "... and the server saw one pack request for them" \
	[ "$(tail -n +"$((M + 1))" "$T/requests.log" | grep -c "POST	/repo.git/git-upload-pack")" = 1 ]

# --- kill -9 of the git helper mid-fetch ---------------------------------------------
(cd "$T/srv/repo.git" && git fetch -q "$UP" '+refs/heads/*:refs/heads/*') >/dev/null 2>&1
M=$(wc -l <"$T/requests.log")
: >"$T/hold"
submit quick remote
R6=$RUN
wait_for 30 held
# the fetching helper: the one with a git child (the others are spares,
# waiting for a request)
HELPER_PID=""
for p in $(pgrep -P "$SUP_PID" -x agrippa-git); do
	pgrep -P "$p" >/dev/null 2>&1 && HELPER_PID=$p
done
check "a fetch is held with its git helper running" [ -n "$HELPER_PID" ]
kill -9 $HELPER_PID
wait_for 30 ended "$R6"
rm -f "$T/hold"
check "that run fails, saying the helper died ($(psql_q "select coalesce(error, '') from runs where id = '$R6'"))" \
	[ "$(run_status "$R6")" = failed ]
submit quick remote
R7=$RUN
wait_for 90 ended "$R7"
check "the next run repairs the mirror and succeeds at the new tip ($(psql_q "select coalesce(error, '') from runs where id = '$R7'"))" \
	[ "$(run_status "$R7")" = succeeded -a "$(ready_of "$R7")" = "$HEAD2 main" ]
check "... no fetch mark is left in the mirror" [ ! -e "$MIRRORS/$REMOTE_ID/agrippa-fetching" ]

# --- the token is nowhere the daemon writes ------------------------------------------
check "the token is in no log line" [ "$(grep -c -e "$TOKEN" -e "$B64A" "$LOG")" = 0 ]
check "the token is nowhere in the state directory (mirrors, runs)" \
	eval "! grep -r -a -q -e '$TOKEN' -e '$B64A' '$T/state/mirrors' '$T/state/runs'"
check "the mirror's config holds the URL without credentials" \
	[ "$(git config -f "$MIRRORS/$REMOTE_ID/config" remote.origin.url)" = "$URL" ]

# --- removing a connection removes its mirror ------------------------------------------
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H "Authorization: Bearer $TA" \
	-X DELETE "http://127.0.0.1:$PORT/v1/repos/$LOCAL_ID")
check "DELETE /v1/repos/ID: 200 ($CODE)" [ "$CODE" = 200 ]
gone() { [ ! -e "$MIRRORS/$LOCAL_ID" ] && [ ! -e "$MIRRORS/$LOCAL_ID.lock" ]; }
wait_for 10 gone
check "... its mirror and its lock are gone" gone
check "... the other connection's mirror stays" [ -d "$MIRRORS/$REMOTE_ID/objects" ]

check "daemon healthy" [ "$(healthz_code)" = 200 ]
check "no sanitizer report" [ "$(grep -c 'runtime error\|AddressSanitizer\|LeakSanitizer' "$LOG")" = 0 ]
finish mirror
