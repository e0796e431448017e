#!/bin/sh
# bench/engine/compare.sh BEFORE [BUILD [BEFORE_BUILD]]: does submit -> first
# step regress?  BEFORE is a source tree of the build to compare with (for
# example a worktree of an older commit, built with make all tests; its own
# build directory BEFORE_BUILD, default build), the current tree is the one
# this is started in (BUILD, default build).
#
# ROUNDS (3) rounds.  In each, two daemons run side by side, each started
# by bench/engine/run.sh from its own tree (its lib.sh, its binaries, its
# embedded database; only the latency part: LAT_N runs of a one-command
# template, no throughput part, no sandbox peer), and their measured runs
# take turns, TURN_EVERY (5) runs one after the other of one daemon, then
# as many of the other's, and so on: both see the same load of a shared
# host, minute by minute, and each keeps its own back-to-back pattern (its
# runs' background work, spares made again, directories removed, overlaps
# its own next run as in run.sh).  A daemon waiting for its turn is idle.
#
# Prints, for each build, the median and p90 of all its runs together (and
# each round's), the gaps between the milestones (claim, checkout,
# step.started, the command's clock), the ratios now/before, and PASS or
# FAIL for "no regression":
#   median(now) <= median(before) + max(5 % of it, 2 ms), and
#   p90(now)    <= p90(before)    + max(10 % of it, 4 ms).
# The tolerance is the noise of the measure itself, which comparing a build
# with itself (BEFORE = this tree) shows on the host at hand: on a shared
# 2-core host with a load of about 4, 3 rounds of 40 runs, the medians of
# one build and the same build differed by 2.2 ms (4 %), their p90 by
# 6.5 ms (7 %); a tail is noisier than a middle.  Exit status 0 for PASS,
# 1 for FAIL or an error.
set -eu
[ $# -ge 1 ] || { echo "usage: bench/engine/compare.sh BEFORE [BUILD [BEFORE_BUILD]]" >&2; exit 1; }
BEFORE=$(cd "$1" && pwd)
BUILD=${2:-build}
BBUILD=${3:-build}
ROUNDS=${ROUNDS:-3}
LAT_N=${LAT_N:-40}
TURN_EVERY=${TURN_EVERY:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
NOW=$(pwd)
[ -x "$BEFORE/$BBUILD/agrippad" ] || { echo "bench/engine/compare: no $BEFORE/$BBUILD/agrippad" >&2; exit 1; }
[ -x "$NOW/$BUILD/agrippad" ] || { echo "bench/engine/compare: no $NOW/$BUILD/agrippad" >&2; exit 1; }
OUT=$(mktemp -d /tmp/agrippa-bench-compare.XXXXXX)
TURNS=0 # the round's FIFOs are open on 3 (before's) and 4 (now's)
# feed FD: every turn a pass may still wait for, so that it finishes and
# cleans up after itself (FIFOs opened read-write do not block)
feed() { head -c "$((LAT_N + 1))" /dev/zero | tr '\0' t >&"$1"; }
compare_cleanup() {
	if [ "$TURNS" = 1 ]; then
		feed 3
		feed 4
	fi
	wait
	rm -rf "$OUT"
}
trap compare_cleanup EXIT
trap 'exit 1' INT TERM HUP
: >"$OUT/before"
: >"$OUT/now"

# stats: "median p90 max" of the numbers on stdin (nearest rank; the lower
# middle when the count is even), as run.sh counts them.
stats() {
	sort -g | awk '{ v[NR] = $1 }
		END {
			if (!NR) { print "- - -"; exit }
			p = int(NR * 0.9); if (p < NR * 0.9) p++
			printf "%.1f %.1f %.1f\n", v[int((NR + 1) / 2)], v[p], v[NR]
		}'
}
# col FILE EXPR: stats of an awk expression over FILE's samples
# ($1 command, $2 claim, $3 checkout, $4 step.started).
col() { awk "{ printf \"%.3f\\n\", $2 }" "$1" | stats; }

# start WHO TREE BUILD IN OUT: one latency pass of TREE's BUILD in the
# background, its samples to $OUT/WHO.round and its exit status to
# $OUT/WHO.rc, taking its turns on the FIFO IN and handing them on to OUT.
start() {
	: >"$OUT/$1.round"
	rm -f "$OUT/$1.rc"
	(
		rc=0
		(cd "$2" && LAT_N=$LAT_N THR_N=0 SBX_N=0 LAT_OUT="$OUT/$1.round" TURN_IN="$4" \
			TURN_OUT="$5" TURN_EVERY=$TURN_EVERY exec sh "$HERE/run.sh" "$3") \
			>"$OUT/$1.log" 2>&1 </dev/null 3>&- 4>&- || rc=$?
		echo "$rc" >"$OUT/$1.rc"
	) &
}

echo "bench/engine/compare: $(nproc) cores; before: $BEFORE ($BBUILD," \
	"$(git -C "$BEFORE" rev-parse --short HEAD 2>/dev/null || echo '?')); now: $NOW ($BUILD," \
	"$(git -C "$NOW" rev-parse --short HEAD 2>/dev/null || echo '?')); $ROUNDS rounds of" \
	"$LAT_N runs each, in turns of $TURN_EVERY"
echo "submit -> first step per round, ms: median p90"
r=1
while [ $r -le "$ROUNDS" ]; do
	rm -f "$OUT/before.turn" "$OUT/now.turn"
	mkfifo "$OUT/before.turn" "$OUT/now.turn"
	exec 3<>"$OUT/before.turn" 4<>"$OUT/now.turn"
	TURNS=1
	start before "$BEFORE" "$BBUILD" "$OUT/before.turn" "$OUT/now.turn"
	start now "$NOW" "$BUILD" "$OUT/now.turn" "$OUT/before.turn"
	printf t >&3 # the first turn is before's
	# a pass that failed hands the other every turn it waits for
	while [ ! -s "$OUT/before.rc" ] || [ ! -s "$OUT/now.rc" ]; do
		if [ -s "$OUT/before.rc" ] && [ "$(cat "$OUT/before.rc")" != 0 ] && [ ! -e "$OUT/fed" ]; then
			: >"$OUT/fed"
			feed 4
		fi
		if [ -s "$OUT/now.rc" ] && [ "$(cat "$OUT/now.rc")" != 0 ] && [ ! -e "$OUT/fed" ]; then
			: >"$OUT/fed"
			feed 3
		fi
		sleep 0.2
	done
	wait
	exec 3>&- 4>&-
	TURNS=0
	rm -f "$OUT/fed"
	failed=""
	[ "$(cat "$OUT/before.rc")" = 0 ] || failed="before"
	[ "$(cat "$OUT/now.rc")" = 0 ] || failed="$failed now"
	for w in $failed; do
		tail -n 30 "$OUT/$w.log" >&2
		echo "bench/engine/compare: round $r: the pass of $w failed" >&2
	done
	[ -z "$failed" ] || exit 1
	for w in before now; do
		cat "$OUT/$w.round" >>"$OUT/$w"
		printf '  round %d %-6s %s\n' "$r" "$w" \
			"$(awk '{ print $1 }' "$OUT/$w.round" | stats | cut -d' ' -f1,2)"
	done
	r=$((r + 1))
done

NB=$(wc -l <"$OUT/before")
NN=$(wc -l <"$OUT/now")
echo
echo "all rounds together ($NB runs before, $NN now), ms after POST answered: median p90 max"
for k in "submit -> first step:\$1" "  claim (run.started):\$2" "  claim -> checkout:\$3 - \$2" \
	"  checkout -> step.started:\$4 - \$3" "  step.started -> command:\$1 - \$4"; do
	name=${k%%:*}
	expr=${k#*:}
	printf 'engine: %-28s before %-18s now %s\n' "$name" "$(col "$OUT/before" "$expr")" \
		"$(col "$OUT/now" "$expr")"
done
B=$(col "$OUT/before" '$1')
N=$(col "$OUT/now" '$1')
awk -v b="$B" -v n="$N" 'BEGIN {
	split(b, x, " "); split(n, y, " ")
	tm = x[1] * 0.05; if (tm < 2) tm = 2
	tp = x[2] * 0.10; if (tp < 4) tp = 4
	printf "engine: submit_to_first_step now/before: median %.2f (%+.1f ms), p90 %.2f (%+.1f ms)\n",
		y[1] / x[1], y[1] - x[1], y[2] / x[2], y[2] - x[2]
	ok = y[1] <= x[1] + tm && y[2] <= x[2] + tp
	printf "engine: no regression (median within %.1f ms, p90 within %.1f ms of before): %s\n",
		tm, tp, ok ? "PASS" : "FAIL"
	exit !ok
}'
