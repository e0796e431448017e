#!/bin/sh
# bench/engine/compare.sh BEFORE [BUILD [BEFORE_BUILD]]: does submit -> first
# step regress?  BEFORE is a source tree of the build to compare with (for
# example a worktree of an older commit, built with make all tests; its own
# build directory BEFORE_BUILD, default build), the current tree is the one
# this is started in (BUILD, default build).  ROUNDS (5) rounds, each one
# pass of bench/engine/run.sh's latency part (LAT_N, 40 runs one after the
# other, no throughput part, no sandbox peer) in BEFORE, then one here: a
# host that is busy with something else for a while is busy for both.
# Every pass starts its own daemon from its own tree's lib.sh.
#
# Prints, for each build, the median and p90 of all its runs together (and
# each round's), the gaps between the milestones (claim, checkout,
# step.started, the command's clock), the ratios now/before, and PASS or
# FAIL for "no regression":
#   median(now) <= median(before) + max(5 % of it, 2 ms), and
#   p90(now)    <= p90(before)    + max(5 % of it, 2 ms).
# The tolerance is the noise of the measure itself: on a shared 2-core host
# the pooled median of two passes of one and the same build differ by up
# to ~2 ms (about 4 % of 50 ms), their p90 by a little more.  Comparing a
# build with itself (BEFORE = this tree) shows that noise on the host at
# hand.  Exit status 0 for PASS, 1 for FAIL or an error.
set -eu
[ $# -ge 1 ] || { echo "usage: bench/engine/compare.sh BEFORE [BUILD [BEFORE_BUILD]]" >&2; exit 1; }
BEFORE=$(cd "$1" && pwd)
BUILD=${2:-build}
BBUILD=${3:-build}
ROUNDS=${ROUNDS:-5}
LAT_N=${LAT_N:-40}
HERE=$(cd "$(dirname "$0")" && pwd)
NOW=$(pwd)
[ -x "$BEFORE/$BBUILD/agrippad" ] || { echo "bench/engine/compare: no $BEFORE/$BBUILD/agrippad" >&2; exit 1; }
[ -x "$NOW/$BUILD/agrippad" ] || { echo "bench/engine/compare: no $NOW/$BUILD/agrippad" >&2; exit 1; }
OUT=$(mktemp -d /tmp/agrippa-bench-compare.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
: >"$OUT/before"
: >"$OUT/now"

# pass WHO TREE BUILD: one latency pass of TREE's BUILD, samples appended
# to $OUT/WHO, its round's median and p90 printed.
pass() {
	: >"$OUT/round"
	if ! (cd "$2" && LAT_N=$LAT_N THR_N=0 SBX_N=0 LAT_OUT="$OUT/round" sh "$HERE/run.sh" "$3") \
		>"$OUT/log" 2>&1; then
		tail -n 30 "$OUT/log" >&2
		echo "bench/engine/compare: the pass of $2 ($3) failed" >&2
		exit 1
	fi
	cat "$OUT/round" >>"$OUT/$1"
	printf '  %-6s %s\n' "$1" "$(awk '{ print $1 }' "$OUT/round" | stats | cut -d' ' -f1,2)"
}

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

echo "bench/engine/compare: $(nproc) cores; before: $BEFORE ($BBUILD," \
	"$(git -C "$BEFORE" rev-parse --short HEAD 2>/dev/null || echo '?')); now: $NOW ($BUILD," \
	"$(git -C "$NOW" rev-parse --short HEAD 2>/dev/null || echo '?')); $ROUNDS rounds of $LAT_N runs each"
echo "submit -> first step per round, ms: median p90"
r=1
while [ $r -le "$ROUNDS" ]; do
	echo " round $r"
	pass before "$BEFORE" "$BBUILD"
	pass now "$NOW" "$BUILD"
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
	tp = x[2] * 0.05; if (tp < 2) tp = 2
	printf "engine: submit_to_first_step now/before: median %.2f (%+.1f ms), p90 %.2f (%+.1f ms)\n",
		y[1] / x[1], y[1] - x[1], y[2] / x[2], y[2] - x[2]
	ok = y[1] <= x[1] + tm && y[2] <= x[2] + tp
	printf "engine: no regression (median within %.1f ms, p90 within %.1f ms of before): %s\n",
		tm, tp, ok ? "PASS" : "FAIL"
	exit !ok
}'
