#!/bin/sh
# bench/checkout/run.sh [BUILD]: the checkout benchmark: how long a run
# waits for its workspace, and what the workspace's .git costs on disk,
# beside plain git doing the same transfer in the same run.
#
# The repository: bench/checkout/genrepo.py makes a bare repository of a
# real C project's size from a fixed seed with git fast-import (31,000
# commits, about 4,800 files in some 300 directories at the tip, 27 MB of
# work tree, about 120 MiB packed after a repack; branches, merges, tags:
# see its header).  It is cached under
# ${AGRIPPA_BENCH_CACHE:-/var/tmp/agrippa-bench}/checkout-vGEN-seedSEED
# (GEN: the generator's version, bumped when its history changes), so only
# the first run pays for it (about 2 to 3 minutes, printed); its stats are
# printed every time.  The benchmark serves a copy of it (new commits are
# written into the copy, never into the cache):
#   - file://: the bare copy itself;
#   - https: the project's test git server (tests/fakes/git_https.py: git
#     http-backend behind TLS, HTTP Basic auth on every request) on
#     loopback, with a throwaway CA made here.  Whatever trusts the CA (the
#     daemon, and the peers over https) runs in its own mount namespace
#     (unshare -m) where the CA file is bind-mounted over
#     /etc/ssl/certs/ca-certificates.crt, as tests/integration/
#     test_git_https.sh does; the host's bundle is never touched.
#
# The daemon: the real one (BUILD, default build: the hardened tree) on the
# embedded database in a temporary state directory STATE, started the way
# bench/agent/run.sh starts it (its verbosity from VERBOSE, default none),
# with one user, token, project and template "hold": workspace = the
# repository connection of the parameter repo, one step "sleep 3600", so
# that the run stays alive while its workspace is measured.  Each run is
# then cancelled and the daemon removes its directory before the next
# sample starts.
#
# For each transport (file:// then https), the cases, Agrippa and its peer
# taking turns sample by sample (so that a slow spell of the shared machine
# hits both):
#   cold: before each Agrippa run every mirror under STATE/mirrors is
#         removed and a new repository connection made (no mirror either
#         way, whether mirrors are kept per connection or per URL; today's
#         code keeps none: every run is cold).  Peer: git clone --mirror.
#         Target: Agrippa <= 1.5x the peer.
#   warm: the connection of the last cold run, whose mirror is there; one
#         new commit is written on main of the upstream (the loose objects
#         and ref update a small push leaves) just before each run.  Peer:
#         git clone --depth 1 (after the same kind of commit).
#         Target: Agrippa <= 1.0x the peer.
#   disk: per warm run, du -sb of the run's ws/.git (STATE/runs/RUN/ws, or
#         STATE/runs/RUN/disk/ws on the run's own disk) beside du -sb of
#         the connection's mirror (everything under STATE/mirrors: the
#         cold runs leave exactly that one), in one du call, so that files
#         the workspace shares with the mirror by hard link are counted
#         once, for the mirror.  Target: <= 5 %.  With no mirror the peer
#         column says n/a (the verdict is then a MISS) and a note gives the
#         run's own copies (STATE/runs/RUN/git) and ws/.git against the
#         size of the peer's mirror clone.
# The time of an Agrippa sample: from the client's clock just before the
# POST /v1/projects/P/runs is written to the run's workspace.ready event,
# as the database stamped it (run_events.created_at: the start of the
# transaction that wrote the event, once the git helper had answered).
# The client polls GET /v1/runs/RUN/events (every 50 ms, 250 ms after 5 s)
# only to know when the event is there; the API's timestamps have one
# second's resolution, the database's a microsecond's, and both clocks are
# this host's.  So an Agrippa figure includes the submit, the engine's
# claim and the run's set-up: what a user waits for.  A peer sample: wall
# time of the git command (date before and after), its output thrown away.
#
# The table: case, Agrippa median, peer median, ratio of the medians,
# target, PASS or MISS; then every sample, min and max.
#
# Tunables (environment):
#   BENCH_N              peer samples per case (default 3)
#   BENCH_CHECKOUT_RUNS  Agrippa samples per case (default BENCH_N).  When
#                        it is not set and an Agrippa checkout takes more
#                        than BENCH_CHECKOUT_SLOW seconds (default 300),
#                        every case takes one Agrippa sample from then on
#                        (printed), so that today's slow checkout keeps the
#                        benchmark within about an hour.
#   BENCH_CHECKOUT_TRANSPORTS  "file https" (default), or one of them
#   AGRIPPA_BENCH_CACHE  where the generated repository is kept
#   VERBOSE              the daemon's -v flags; KEEP: keep the directory
# With today's code (no mirror: every run clones the whole history twice)
# the whole benchmark takes about 20 minutes on 2 cores once the repository
# is cached, nearly all of it the twelve Agrippa checkouts.
# Needs root, python3, git, openssl and unshare (scripts/deps.sh).
# bench/run.sh runs it unless BENCH_CHECKOUT=0; alone:
#   make && make tests && sh bench/checkout/run.sh build
set -eu
BUILD=${1:-${BUILD:-build}}
ROOT=$(pwd)
export BUILD ROOT
N=${BENCH_N:-3}
RUNS=${BENCH_CHECKOUT_RUNS:-$N}
SLOW=${BENCH_CHECKOUT_SLOW:-300}
TRANSPORTS=${BENCH_CHECKOUT_TRANSPORTS:-file https}
CACHE=${AGRIPPA_BENCH_CACHE:-/var/tmp/agrippa-bench}
VERBOSE=${VERBOSE:-}
SEED=1
START=$(date +%s)
BENCH=bench/checkout
. "$ROOT/bench/lib/bigrepo.sh"
bench_preflight python3 git openssl unshare du
case "$N$RUNS" in *[!0-9]*) die "BENCH_N and BENCH_CHECKOUT_RUNS are counts" ;; esac
[ "$N" -ge 1 ] && [ "$RUNS" -ge 1 ] || die "BENCH_N and BENCH_CHECKOUT_RUNS are at least 1"
for tr in $TRANSPORTS; do
	case $tr in file | https) ;; *) die "BENCH_CHECKOUT_TRANSPORTS: file and/or https, not $tr" ;; esac
done

# --- 1. the repository, generated once ---------------------------------------------
bigrepo_cached

# --- 2. the daemon's environment, the upstream, the https server ------------------
sh scripts/mkusers.sh
. tests/integration/lib.sh
make_env
SRV_PID=""
bench_cleanup() {
	[ -z "$SRV_PID" ] || kill "$SRV_PID" 2>/dev/null || true
	cleanup_env
}
trap bench_cleanup EXIT
trap 'exit 1' INT TERM HUP
STATE="$T/state"
mkdir -p "$T/srv" "$T/tls" "$T/peer" "$T/tmpl"
cp -a "$REPO_CACHE/repo.git" "$T/srv/repo.git"
UP="$T/srv/repo.git"
chmod -R a+rX "$T/srv"
BUNDLE=/etc/ssl/certs/ca-certificates.crt
HTOKEN="tok-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$HTOKEN" >"$T/srv/token"
chmod 0600 "$T/srv/token"
# A throwaway CA and a server certificate for 127.0.0.1 (libgit2's mbedTLS
# matches the host against the DNS names only, so 127.0.0.1 is one).
(
	cd "$T/tls" || exit 1
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 \
		-subj /CN=agrippa-bench-ca -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign &&
		openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 &&
		printf '%s\n' 'subjectAltName=DNS:127.0.0.1,IP:127.0.0.1' \
			'basicConstraints=CA:FALSE' 'extendedKeyUsage=serverAuth' >ext &&
		openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
			-extfile ext -out srv.crt
) >"$T/tls/log" 2>&1 || die "the test CA: $(cat "$T/tls/log")"
python3 "$ROOT/tests/fakes/git_https.py" --root "$T/srv" --cert "$T/tls/srv.crt" \
	--key "$T/tls/srv.key" --token-file "$T/srv/token" --log "$T/requests.log" \
	--ports "$T/ports" >"$T/server.out" 2>&1 &
SRV_PID=$!
wait_for 10 test -s "$T/ports" || die "the git server did not start: $(cat "$T/server.out")"
read -r PORT_TLS PORT_PLAIN <"$T/ports"
: "$PORT_PLAIN"
# The peers' credentials over https: the token from its file, on git's
# 401, as libgit2 gives it (never on the command line).
PEER_CRED="!f() { test \"\$1\" = get && echo username=x-access-token && echo password=\$(cat $T/srv/token); }; f"
url_of() { if [ "$1" = file ]; then echo "file://$UP"; else echo "https://127.0.0.1:$PORT_TLS/repo.git"; fi; }
name_of() { if [ "$1" = file ]; then echo "file://"; else echo "https"; fi; }

bench_daemon

{
	printf 'name: hold\nversion: 1\n'
	printf 'params:\n  repo: { type: repoRef, required: true }\n'
	printf 'workspace: { repo: "${params.repo}", access: readWrite }\n'
	printf 'phases:\n  - name: one\n    steps:\n'
	printf '      - { id: hold, kind: command, run: "sleep 3600", timeout: 2h }\n'
} >"$T/tmpl/hold.yaml"
ctl template load "$T/tmpl/hold.yaml" || die "template hold"
ctl user add alice || die "user add"
TOKEN=$(new_token alice) || die "token create"
ctl project add p1 || die "project add"
ctl member add p1 alice admin || die "member add"
P1=$(psql_q "select id from projects where name = 'p1'")
BASE="http://127.0.0.1:$PORT"
HELPER="python3 $ROOT/bench/checkout/checkout.py"

# --- 3. the samples ------------------------------------------------------------------
# repo_add TRANSPORT NAME: a new connection to the upstream
repo_add() {
	if [ "$1" = https ]; then
		"$AGRIPPACTL" -s "$CTL" repo add p1 "$2" "$(url_of https)" <"$T/srv/token" >"$T/ctl.out" 2>&1
	else
		"$AGRIPPACTL" -s "$CTL" repo add p1 "$2" "$(url_of file)" </dev/null >"$T/ctl.out" 2>&1
	fi || die "repo add $2: $(cat "$T/ctl.out")"
}
# new_commit: one commit on the upstream's main changing one file, written
# as a small push leaves it (loose objects, the ref moved).
NCOMMIT=0
new_commit() {
	NCOMMIT=$((NCOMMIT + 1))
	f=$(git -C "$UP" ls-tree -r --name-only main -- lib | head -n 1)
	blob=$({
		git -C "$UP" cat-file blob "main:$f"
		printf '/* bench/checkout: commit %s */\n' "$NCOMMIT"
	} | git -C "$UP" hash-object -w --stdin)
	GIT_INDEX_FILE="$T/commit.index" git -C "$UP" read-tree main
	GIT_INDEX_FILE="$T/commit.index" git -C "$UP" update-index --cacheinfo "100644,$blob,$f"
	tree=$(GIT_INDEX_FILE="$T/commit.index" git -C "$UP" write-tree)
	c=$(GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.org GIT_COMMITTER_NAME=bench \
		GIT_COMMITTER_EMAIL=bench@example.org git -C "$UP" commit-tree -p main -m "bench: commit $NCOMMIT" "$tree")
	git -C "$UP" update-ref refs/heads/main "$c"
	chmod -R a+rX "$UP/objects"
}
# peer TRANSPORT cold|warm OUT: one timed git clone; "seconds bytes" >> OUT
# (bytes: du -sb of the mirror, or of the depth-1 clone's .git)
peer() {
	dest="$T/peer/clone"
	rm -rf "$dest"
	if [ "$2" = cold ]; then opt=--mirror; else opt=--depth=1; fi
	t0=$(date +%s.%N)
	if [ "$1" = https ]; then
		trusted git -c credential.helper="$PEER_CRED" clone -q "$opt" "$(url_of https)" "$dest" >"$T/peer.log" 2>&1
	else
		git clone -q "$opt" "$(url_of file)" "$dest" >"$T/peer.log" 2>&1
	fi || die "the peer git clone $opt over $1 failed: $(cat "$T/peer.log")"
	t1=$(date +%s.%N)
	if [ "$2" = cold ]; then b=$(du -sb "$dest" | cut -f1); else b=$(du -sb "$dest/.git" | cut -f1); fi
	echo "$t0 $t1 $b" | awk '{ printf "%.3f %s\n", $2 - $1, $3 }' >>"$3"
	rm -rf "$dest"
}
# inns CMD...: CMD in the daemon's mount namespace
inns() { nsenter -t "$SUP_PID" -m -- "$@"; }
# du_b PATH: bytes (0 when absent)
du_b() { if [ -e "$1" ]; then du -sb "$1" | cut -f1; else echo 0; fi; }
mirrors() { find "$STATE/mirrors" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# agrippa CONN OUT: one run; when its workspace is ready, one line >> OUT:
#   "seconds claim_s ws_git_bytes mirror_bytes run_git_bytes mirrors run"
# or "fail REASON"; then the run is cancelled and its directory gone.
agrippa() {
	$HELPER submit "$BASE" "$TOKEN" "$P1" hold "$1" 1800 >"$T/sub.out" || { alive || died "a run"; die "submit failed"; }
	read -r run tsent tseen outcome <"$T/sub.out"
	: "$tseen"
	rdir="$STATE/runs/$run"
	if [ "$outcome" = ready ]; then
		# a workspace that misses the newest commit is no checkout to time
		base=$(psql_q "select payload->>'base_commit' from run_events where run_id = '$run' and type = 'workspace.ready'")
		[ "$base" = "$(git -C "$UP" rev-parse main)" ] ||
			outcome="stale (the workspace is at $base, the upstream's main at $(git -C "$UP" rev-parse main))"
	fi
	if [ "$outcome" = ready ]; then
		ready=$(psql_q "select extract(epoch from created_at) from run_events where run_id = '$run' and type = 'workspace.ready'")
		started=$(psql_q "select extract(epoch from min(created_at)) from run_events where run_id = '$run' and type = 'run.started'")
		# the workspace may be on the run's own disk (sandbox.disk), mounted
		# in the daemon's mount namespace: looked at from there
		wsgit="$rdir/ws/.git"
		inns test -d "$rdir/disk/ws/.git" && wsgit="$rdir/disk/ws/.git"
		if [ -d "$STATE/mirrors" ] && [ "$(mirrors)" -gt 0 ]; then
			# one du: what the workspace shares by hard link is the mirror's
			inns du -sb "$STATE/mirrors" "$wsgit" >"$T/du.out" 2>/dev/null || true
			mb=$(sed -n 1p "$T/du.out" | cut -f1)
			wb=$(sed -n 2p "$T/du.out" | cut -f1)
		else
			mb=-
			wb=$(inns du -sb "$wsgit" 2>/dev/null | cut -f1)
			wb=${wb:-0}
		fi
		gb=$(du_b "$rdir/git")
		awk -v s="$tsent" -v r="$ready" -v c="$started" -v w="$wb" -v m="$mb" -v g="$gb" -v n="$(mirrors)" -v id="$run" \
			'BEGIN { printf "%.3f %.3f %s %s %s %s %s\n", r - s, c - s, w, m, g, n, id }' >>"$2"
	else
		err=$(psql_q "select coalesce(error, '') from runs where id = '$run'" | tr '\n' ' ')
		echo "fail $outcome after $(awk -v a="$tsent" -v b="$tseen" 'BEGIN { printf "%.0f", b - a }') s: $err" >>"$2"
		echo "bench/checkout: warning: run $run: $outcome: $err" >&2
	fi
	$HELPER cancel "$BASE" "$TOKEN" "$run" 120 >/dev/null || { alive || died "a cancel"; die "cancel failed"; }
	wait_for 120 test ! -e "$rdir" || {
		echo "bench/checkout: warning: the directory of cancelled run $run is still there; removing it" >&2
		rm -rf "$rdir"
	}
	# today's code keeps no mirror: with BENCH_CHECKOUT_RUNS unset, a slow
	# checkout makes every case one Agrippa sample from now on
	if [ -z "${BENCH_CHECKOUT_RUNS:-}" ] && [ "$RUNS" -gt 1 ] && [ "$outcome" = ready ] &&
		[ "$(tail -n 1 "$2" | awk -v s="$SLOW" '{ print ($1 > s) }')" = 1 ]; then
		RUNS=1
		echo "bench/checkout: an Agrippa checkout took $(tail -n 1 "$2" | cut -d' ' -f1) s (over $SLOW s):" \
			"one Agrippa sample per case from now on (BENCH_CHECKOUT_RUNS sets the count)"
	fi
}
max() { if [ "$1" -gt "$2" ]; then echo "$1"; else echo "$2"; fi; }

echo "bench/checkout: $(nproc) cores, $BUILD ($(git rev-parse --short HEAD 2>/dev/null || echo '?')), $N peer samples" \
	"and up to $RUNS Agrippa samples per case; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$T/progress"
for tr in $TRANSPORTS; do
	: >"$T/$tr.cold.peer"
	: >"$T/$tr.cold.ag"
	: >"$T/$tr.warm.peer"
	: >"$T/$tr.warm.ag"
	# cold
	i=1
	while [ "$i" -le "$(max "$N" "$RUNS")" ]; do
		[ "$i" -gt "$N" ] || peer "$tr" cold "$T/$tr.cold.peer"
		if [ "$i" -le "$RUNS" ]; then
			rm -rf "$STATE/mirrors"/*
			CONN="cold-$tr-$i"
			repo_add "$tr" "$CONN"
			agrippa "$CONN" "$T/$tr.cold.ag"
		fi
		echo "bench/checkout: $(name_of "$tr") cold $i: peer $(sed -n "${i}p" "$T/$tr.cold.peer" | cut -d' ' -f1) s," \
			"agrippa $(sed -n "${i}p" "$T/$tr.cold.ag" | cut -d' ' -f1) s"
		i=$((i + 1))
	done
	# warm: the last cold connection, its mirror kept
	i=1
	while [ "$i" -le "$(max "$N" "$RUNS")" ]; do
		new_commit
		[ "$i" -gt "$RUNS" ] || agrippa "$CONN" "$T/$tr.warm.ag"
		[ "$i" -gt "$N" ] || peer "$tr" warm "$T/$tr.warm.peer"
		echo "bench/checkout: $(name_of "$tr") warm $i: peer $(sed -n "${i}p" "$T/$tr.warm.peer" | cut -d' ' -f1) s," \
			"agrippa $(sed -n "${i}p" "$T/$tr.warm.ag" | cut -d' ' -f1) s"
		i=$((i + 1))
	done
done

# --- 4. the figures -------------------------------------------------------------------
stats() { bench_stats "$@"; }
fld() { echo "$1" | cut -d' ' -f"$2"; }
mib() { awk -v b="$1" 'BEGIN { if (b == "-") print "-"; else printf "%.1f MiB", b / 1048576 }'; }
# row CASE AG PEER RATIO TARGET VERDICT
row() { printf '%-13s %11s %27s %8s %8s  %s\n' "$1" "$2" "$3" "$4" "$5" "$6"; }
secs() { awk -v s="$1" 'BEGIN { if (s == "-") print "-"; else printf "%.2f s", s }'; }
verdict() { bench_verdict "$@"; }
echo
echo "checkout: medians of the samples (Agrippa: POST -> workspace.ready; peer: the git command)"
row case agrippa peer ratio target verdict
for tr in $TRANSPORTS; do
	nm=$(name_of "$tr")
	for c in cold warm; do
		a=$(stats 1 "$T/$tr.$c.ag")
		p=$(stats 1 "$T/$tr.$c.peer")
		v=$(verdict "$(fld "$a" 1)" "$(fld "$p" 1)" "$([ $c = cold ] && echo 1.5 || echo 1.0)")
		pname=$([ $c = cold ] && echo "clone --mirror" || echo "clone --depth 1")
		row "$c $nm" "$(secs "$(fld "$a" 1)")" "$(secs "$(fld "$p" 1)") ($pname)" "$(fld "$v" 1)x" \
			"$([ $c = cold ] && echo '<= 1.5x' || echo '<= 1.0x')" "$(fld "$v" 2)"
	done
	w=$(stats 3 "$T/$tr.warm.ag")
	m=$(stats 4 "$T/$tr.warm.ag")
	if [ "$(fld "$m" 4)" -gt 0 ]; then
		v=$(verdict "$(fld "$w" 1)" "$(fld "$m" 1)" 0.05)
		pct=$(awk -v r="$(fld "$v" 1)" 'BEGIN { printf "%.1f %%", r * 100 }')
		row "disk $nm" "$(mib "$(fld "$w" 1)")" "$(mib "$(fld "$m" 1)") (mirror)" "$pct" "<= 5 %" "$(fld "$v" 2)"
	else
		row "disk $nm" "$(mib "$(fld "$w" 1)")" "n/a (no mirror)" "n/a" "<= 5 %" "MISS"
	fi
done
echo
for tr in $TRANSPORTS; do
	nm=$(name_of "$tr")
	for c in cold warm; do
		for who in ag peer; do
			s=$(stats 1 "$T/$tr.$c.$who")
			printf 'checkout: %s %s %s: median %s s, min %s s, max %s s, %s samples: %s\n' "$c" "$nm" \
				"$([ $who = ag ] && echo agrippa || echo peer)" "$(fld "$s" 1)" "$(fld "$s" 2)" "$(fld "$s" 3)" \
				"$(fld "$s" 4)" "$(awk '{ printf "%s%s", sep, ($1 == "fail") ? "FAILED" : $1; sep = " " }' "$T/$tr.$c.$who")"
		done
		cl=$(stats 2 "$T/$tr.$c.ag")
		echo "checkout:   $c $nm agrippa: of which POST -> run.started (the claim) median $(fld "$cl" 1) s"
		grep '^fail' "$T/$tr.$c.ag" | sed "s|^fail |checkout:   $c $nm agrippa failed: |" || true
	done
	pm=$(stats 2 "$T/$tr.cold.peer")
	pd=$(stats 2 "$T/$tr.warm.peer")
	w=$(stats 3 "$T/$tr.warm.ag")
	g=$(stats 5 "$T/$tr.warm.ag")
	echo "checkout:   $nm sizes (medians): the peer's mirror $(mib "$(fld "$pm" 1)"), the peer's depth-1 .git" \
		"$(mib "$(fld "$pd" 1)"); a warm run's ws/.git $(mib "$(fld "$w" 1)"), its STATE/runs/RUN/git" \
		"$(mib "$(fld "$g" 1)"), mirrors present $(stats 6 "$T/$tr.warm.ag" | cut -d' ' -f1)"
	if [ "$(fld "$(stats 4 "$T/$tr.warm.ag")" 4)" -eq 0 ] && [ "$(fld "$w" 4)" -gt 0 ]; then
		awk -v w="$(fld "$w" 1)" -v g="$(fld "$g" 1)" -v m="$(fld "$pm" 1)" -v nm="$nm" 'BEGIN {
			printf "checkout:   %s disk: no mirror under STATE/mirrors; the run keeps its own copies: ws/.git is %.0f %% and ws/.git + RUN/git %.0f %% of the peer'"'"'s mirror clone\n",
				nm, 100 * w / m, 100 * (w + g) / m }'
	fi
done
echo "checkout: daemon log lines with warn/error/fatal: $(grep -c -i 'warn\|error\|fatal' "$LOG" || true)"
echo "checkout: load average after: $(cut -d' ' -f1-3 /proc/loadavg); the benchmark took $(($(date +%s) - START)) s"
stop_daemon
