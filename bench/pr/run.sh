#!/bin/sh
# bench/pr/run.sh [BUILD]: the pull-request benchmark: how long the
# pull_request step takes to push a one-file change and open its pull
# request on the generated large repository, beside `git push` of the same
# kind of commit by the git program in the same run.
#
# The repository: bench/checkout's (bench/lib/bigrepo.sh: 31,000 commits,
# about 4,800 files at the tip, about 120 MiB packed; generated once and
# cached under ${AGRIPPA_BENCH_CACHE:-/var/tmp/agrippa-bench}).  A copy of
# it is served as bench/big.git (http.receivepack true) by the test git
# server (tests/fakes/git_https.py: git http-backend behind TLS, HTTP Basic
# auth) beside the fake GitHub (tests/fakes/forge.py --github-repo
# bench/big, its links on the git server's host), both on loopback with a
# throwaway CA that only the daemon's and the peer's mount namespaces trust
# (tests/integration/git_lib.sh).
#
# The daemon: the real one (BUILD, default build: the hardened tree) on the
# embedded database, with the connection "big" (github, the token on
# stdin) and the template "pr": a command step appending one line to one
# existing file (the first file under lib/ at main's tip), then a
# pull_request step to the branch bench/N given as a parameter.  One run
# first, not timed, fills the connection's mirror (the first checkout of
# the whole history); then BENCH_N samples (default 5), the peer and
# Agrippa taking turns sample by sample, who goes first alternating.
#
# An Agrippa sample, from the run's rows as the database stamped them (the
# start of the transaction that wrote each; this host's clock):
#   step:  run_steps.started_at -> finished_at of the pull_request step
#          (its step.started -> step.finished events);
#   push:  step started -> the pull_request.pushed event (the git helper's
#          diff of the workspace, the commit, the lease, the push);
#   open:  pull_request.pushed -> pull_request.opened (the forge's API).
# A peer sample: in a clone of the repository that already has all its
# objects (a local clone of the cache), the same file gets one line on
# main's tip, committed, and `git push` of it to a new branch peer/N over
# the same https server, trusting the CA the same way, the token from a
# credential helper; only the push is timed (date before and after).  For
# reference, the same over file:// to the served repository (another
# commit, branch peerfile/N).
#
# The table: the step's median beside the https push's, the ratio of the
# medians and the verdict against the target (<= 1.5x): PASS or FAIL;
# then the parts, every sample, min and max.
#
# Tunables (environment): BENCH_N (samples, default 5), AGRIPPA_BENCH_CACHE,
# VERBOSE (the daemon's -v flags), KEEP (keep the directory).
# Needs root, python3, git, openssl, unshare and curl (scripts/deps.sh).
# bench/run.sh runs it unless BENCH_PR=0; alone:
#   make && make tests && sh bench/pr/run.sh build
set -eu
BUILD=${1:-${BUILD:-build}}
ROOT=$(pwd)
export BUILD ROOT
N=${BENCH_N:-5}
CACHE=${AGRIPPA_BENCH_CACHE:-/var/tmp/agrippa-bench}
VERBOSE=${VERBOSE:-}
SEED=1
BENCH=bench/pr
START=$(date +%s)
. "$ROOT/bench/lib/bigrepo.sh"
bench_preflight python3 git openssl unshare curl
case "$N" in '' | *[!0-9]*) die "BENCH_N is a count" ;; esac
[ "$N" -ge 1 ] || die "BENCH_N is at least 1"

# --- 1. the repository, its servers, the daemon ---------------------------------------
bigrepo_cached
sh scripts/mkusers.sh
. tests/integration/lib.sh
. tests/integration/git_lib.sh
make_env
FORGE_PID=""
bench_cleanup() {
	[ -z "$FORGE_PID" ] || kill "$FORGE_PID" 2>/dev/null || true
	stop_git_server
	cleanup_env
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP
printf 'git: { author: "Bench Bot <bench@agrippa.test>" }\n' >>"$CONF"
mkdir -p "$T/srv/bench" "$T/peer" "$T/tmpl"
UP="$T/srv/bench/big.git"
cp -a "$REPO_CACHE/repo.git" "$UP"
git -C "$UP" config http.receivepack true
chmod -R a+rwX "$T/srv"
HTOKEN="tok-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$HTOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"
make_ca || die "the test CA: $(cat "$T/tls/log")"
start_git_server || die "the git server did not start: $(cat "$T/server.out")"
GIT_HOST="127.0.0.1:$PORT_TLS"
URL="https://$GIT_HOST/bench/big.git"
python3 "$ROOT/tests/fakes/forge.py" --cert "$T/tls/srv.crt" --key "$T/tls/srv.key" \
	--token-file "$T/srv/token" --log "$T/forge.log" --ports "$T/fport" \
	--github-repo bench/big --web-host "$GIT_HOST" >"$T/forge.out" 2>&1 &
FORGE_PID=$!
wait_for 10 test -s "$T/fport" || die "the fake forge did not start: $(cat "$T/forge.out")"
read -r FPORT <"$T/fport"
bench_daemon

FILE=$(git -C "$UP" ls-tree -r --name-only main -- lib | head -n 1)
[ -n "$FILE" ] || die "no file under lib/ at main's tip"
# shellcheck disable=SC2016 # ${params.*} and $(date) are the template's
{
	printf 'name: pr\nversion: 1\n'
	printf 'params:\n  repo: { type: repoRef, required: true }\n'
	printf '  branch: { type: string, required: true }\n'
	printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
	printf 'phases:\n  - name: one\n    steps:\n'
	printf '      - { id: change, kind: command, run: "echo \\"bench/pr: $(date +%%s.%%N)\\" >>%s" }\n' "$FILE"
	printf '      - { id: open-pr, kind: pull_request, branch: "${params.branch}", title: "bench/pr" }\n'
} >"$T/tmpl/pr.yaml"
ctl template load "$T/tmpl/pr.yaml" || die "template pr"
ctl user add alice || die "user add"
TOKEN=$(new_token alice) || die "token create"
ctl project add p1 || die "project add"
ctl member add p1 alice admin || die "member add"
ctl repo add p1 big "$URL" github "https://127.0.0.1:$FPORT/api/v3" <"$T/srv/token" || die "repo add"
P1=$(psql_q "select id from projects where name = 'p1'")

# The peer's clone: every object already there (a local clone of the cache).
git clone -q --no-hardlinks "$REPO_CACHE/repo.git" "$T/peer/w" >"$T/peer.log" 2>&1 ||
	die "the peer's clone: $(cat "$T/peer.log")"
PG="git -C $T/peer/w -c user.name=bench -c user.email=bench@example.org"
PEER_CRED="!f() { test \"\$1\" = get && echo username=x-access-token && echo password=\$(cat $T/srv/token); }; f"

# --- 2. the samples ---------------------------------------------------------------------
# peer_commit: one commit on main's tip appending a line to FILE
peer_commit() {
	$PG checkout -q -B bench-peer origin/main
	echo "bench/pr: $(date +%s.%N)" >>"$T/peer/w/$FILE"
	$PG commit -q -a -m "bench/pr: peer" >/dev/null
}
# timed OUT CMD...: CMD's wall time in seconds >> OUT; its output in $T/timed.log
timed() {
	tm_out=$1
	shift
	tm0=$(date +%s.%N)
	"$@" >"$T/timed.log" 2>&1 || die "$* failed: $(cat "$T/timed.log")"
	tm1=$(date +%s.%N)
	awk -v a="$tm0" -v b="$tm1" 'BEGIN { printf "%.3f\n", b - a }' >>"$tm_out"
}
# peer I: the https push, then the file:// one
peer() {
	peer_commit
	timed "$T/peer.https" trusted git -C "$T/peer/w" -c credential.helper="$PEER_CRED" \
		push -q "$URL" "HEAD:refs/heads/peer/$1"
	peer_commit
	timed "$T/peer.file" git -C "$T/peer/w" push -q "file://$UP" "HEAD:refs/heads/peerfile/$1"
}
ended() {
	case $(psql_q "select status from runs where id = '$1'") in succeeded | failed | cancelled) return 0 ;; esac
	return 1
}
ev_at() { psql_q "select extract(epoch from min(created_at)) from run_events where run_id = '$1' and type = '$2'"; }
# agrippa BRANCH OUT: one run; "step push open workspace_ready_s run" >> OUT,
# or "fail REASON"
agrippa() {
	run=$(curl -s --max-time 30 -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		--data-binary "{\"template\": \"pr\", \"params\": {\"repo\": \"big\", \"branch\": \"$1\"}}" \
		"http://127.0.0.1:$PORT/v1/projects/$P1/runs" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("id", ""))' 2>/dev/null) || run=""
	[ -n "$run" ] || { alive || died "a submit"; die "submit failed"; }
	# polled every half second, not to load the 2 cores (the figures are the
	# database's stamps, not the poll's)
	w=0
	until ended "$run"; do
		w=$((w + 1))
		[ "$w" -le 3600 ] || die "run $run has not ended after 30 minutes"
		alive || died "run $run"
		sleep 0.5
	done
	st=$(psql_q "select status from runs where id = '$run'")
	if [ "$st" != succeeded ]; then
		echo "fail run $run $st: $(psql_q "select coalesce(error, '') from runs where id = '$run'" | tr '\n' ' ')" >>"$2"
		echo "bench/pr: warning: $(tail -n 1 "$2")" >&2
		return 0
	fi
	set -- "$1" "$2" "$(psql_q "select extract(epoch from started_at) || ' ' || extract(epoch from finished_at)
		from run_steps where run_id = '$run' and step_id = 'open-pr' and status = 'succeeded'")"
	awk -v s="${3% *}" -v f="${3#* }" -v p="$(ev_at "$run" pull_request.pushed)" \
		-v o="$(ev_at "$run" pull_request.opened)" -v r0="$(ev_at "$run" run.started)" \
		-v w="$(ev_at "$run" workspace.ready)" -v id="$run" \
		'BEGIN { printf "%.3f %.3f %.3f %.3f %s\n", f - s, p - s, o - p, w - r0, id }' >>"$2"
}

echo "bench/pr: $(nproc) cores, $BUILD ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), $N samples," \
	"the change: one line appended to $FILE; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$T/warm.ag"
: >"$T/ag"
: >"$T/peer.https"
: >"$T/peer.file"
agrippa bench/0 "$T/warm.ag"
echo "bench/pr: the first run (fills the mirror, not a sample): $(cut -d' ' -f1-4 "$T/warm.ag")" \
	"(step push open run.started->workspace.ready, s)"
i=1
while [ "$i" -le "$N" ]; do
	if [ $((i % 2)) = 1 ]; then
		peer "$i"
		agrippa "bench/$i" "$T/ag"
	else
		agrippa "bench/$i" "$T/ag"
		peer "$i"
	fi
	echo "bench/pr: sample $i: step $(sed -n "${i}p" "$T/ag" | cut -d' ' -f1) s (push" \
		"$(sed -n "${i}p" "$T/ag" | cut -d' ' -f2) s, open $(sed -n "${i}p" "$T/ag" | cut -d' ' -f3) s)," \
		"git push https $(sed -n "${i}p" "$T/peer.https") s, file:// $(sed -n "${i}p" "$T/peer.file") s"
	i=$((i + 1))
done

# Every sample's branch is main's tip plus exactly the change to FILE.
i=1
while [ "$i" -le "$N" ]; do
	for b in bench/$i peer/$i peerfile/$i; do
		[ "$(git -C "$UP" rev-parse "$b^" 2>/dev/null)" = "$(git -C "$UP" rev-parse main)" ] &&
			[ "$(git -C "$UP" diff --name-only main "$b")" = "$FILE" ] ||
			die "branch $b of the served repository is not main plus the change to $FILE"
	done
	i=$((i + 1))
done
[ "$(curl -s -f --cacert "$T/tls/ca.crt" "https://127.0.0.1:$FPORT/_state" |
	python3 -c 'import json, sys; print(len(json.load(sys.stdin)["github:bench/big"]))')" = $((N + 1)) ] ||
	die "the fake forge does not hold $((N + 1)) pull requests"

# --- 3. the figures ----------------------------------------------------------------------
fld() { echo "$1" | cut -d' ' -f"$2"; }
secs() { awk -v s="$1" 'BEGIN { if (s == "-") print "-"; else printf "%.3f s", s }'; }
row() { printf '%-34s %10s %26s %8s %8s  %s\n' "$1" "$2" "$3" "$4" "$5" "$6"; }
a=$(bench_stats 1 "$T/ag")
p=$(bench_stats 1 "$T/peer.https")
v=$(bench_verdict "$(fld "$a" 1)" "$(fld "$p" 1)" 1.5 FAIL)
echo
echo "pr: medians of $N samples (Agrippa: the pull_request step, step.started -> step.finished; peer: git push)"
row case agrippa peer ratio target verdict
row "push + PR, https" "$(secs "$(fld "$a" 1)")" "$(secs "$(fld "$p" 1)") (git push)" "$(fld "$v" 1)x" "<= 1.5x" "$(fld "$v" 2)"
echo
# line LABEL COLUMN FILE: median, min-max and every sample of that column
line() {
	s=$(bench_stats "$2" "$3")
	printf 'pr: %-44s median %s s, min-max %s-%s s, %s samples: %s\n' "$1" "$(fld "$s" 1)" "$(fld "$s" 2)" \
		"$(fld "$s" 3)" "$(fld "$s" 4)" "$(awk -v c="$2" '{ printf "%s%s", sep, ($1 == "fail") ? "FAILED" : $c; sep = " " }' "$3")"
}
line "agrippa step (started -> finished)" 1 "$T/ag"
line "  of which push (started -> pushed)" 2 "$T/ag"
line "  of which PR (pushed -> opened)" 3 "$T/ag"
line "peer git push, https" 1 "$T/peer.https"
line "peer git push, file:// (reference)" 1 "$T/peer.file"
line "agrippa run.started -> workspace.ready (info)" 4 "$T/ag"
pp=$(bench_stats 2 "$T/ag")
pf=$(bench_stats 1 "$T/peer.file")
echo "pr: ratios of the medians: push part / git push https $(bench_verdict "$(fld "$pp" 1)" "$(fld "$p" 1)" 1.5 FAIL |
	cut -d' ' -f1)x; step / git push file:// $(bench_verdict "$(fld "$a" 1)" "$(fld "$pf" 1)" 1.5 FAIL | cut -d' ' -f1)x"
grep '^fail' "$T/ag" | sed 's|^fail |pr: agrippa failed: |' || true
echo "pr: daemon log lines with warn/error/fatal: $(grep -c -i 'warn\|error\|fatal' "$LOG" || true)"
echo "pr: load average after: $(cut -d' ' -f1-3 /proc/loadavg); the benchmark took $(($(date +%s) - START)) s"
stop_daemon
