# shellcheck shell=sh
# What the benchmarks on the generated large repository share (sourced by
# bench/checkout/run.sh and bench/pr/run.sh).  The caller sets ROOT, CACHE
# (where the repository is kept), SEED and BENCH (the prefix of its
# messages, e.g. bench/checkout).
#
# die MESSAGE: "BENCH: MESSAGE" on stderr, exit 1.
# bench_preflight PROG...: root, every PROG installed, BUILD's agrippad and
#   agrippa-git there; or dies saying what is missing.
# bigrepo_cached: the repository of bench/checkout/genrepo.py for SEED,
#   generated once into $CACHE/checkout-vGEN-seedSEED (GEN: the generator's
#   version) and taken from there afterwards; sets REPO_CACHE (the bare
#   repository is $REPO_CACHE/repo.git) and prints its stats.
# trusted CMD...: CMD in a mount namespace where $T/tls/ca.crt is the
#   bundle $BUNDLE (as tests/integration/git_lib.sh trusts its CA).
# bench_daemon: the real daemon ($AGRIPPAD -d $VERBOSE -f $CONF, its output
#   in $LOG) in a mount namespace that trusts $T/tls/ca.crt (exec keeps the
#   pid: SUP_PID and tests/integration/lib.sh's helpers see agrippad
#   itself); returns once /healthz answers 200, or dies with the log.
# alive: the daemon is still there; died WHAT: says it died during WHAT,
#   with the end of its log, and exits 1.
# bench_stats COLUMN FILE: "median min max n" of that column of FILE's
#   lines that are not failures ("- - - 0" when none).
# bench_verdict A B LIMIT [NO]: "RATIO PASS" when A / B <= LIMIT, else
#   "RATIO NO" (NO defaults to MISS); "n/a NO" without both figures.

die() {
	echo "$BENCH: $*" >&2
	exit 1
}
bench_preflight() {
	[ "$(id -u)" -eq 0 ] || die "run as root"
	for bp_prog in "$@"; do
		command -v "$bp_prog" >/dev/null 2>&1 || die "$bp_prog is not installed (scripts/deps.sh)"
	done
	for bp_exe in agrippad agrippa-git; do
		[ -x "$ROOT/$BUILD/$bp_exe" ] || die "no $BUILD/$bp_exe (make first)"
	done
}

# repo_stats REPO: "NAME VALUE" lines
repo_stats() {
	echo "commits $(git -C "$1" rev-list --all --count)"
	echo "merges $(git -C "$1" rev-list --all --merges --count)"
	echo "branches $(git -C "$1" for-each-ref refs/heads | wc -l)"
	echo "tags $(git -C "$1" for-each-ref refs/tags | wc -l)"
	git -C "$1" ls-tree -r -t -l main | awk '
		$2 == "tree" { d++ } $2 == "blob" { f++; s += $4 }
		END { print "tip_files " f; print "tip_dirs " d; print "tip_bytes " s }'
	git -C "$1" count-objects -v | awk '$1 == "size-pack:" { print "size_pack_kib " $2 }
		$1 == "in-pack:" { print "objects " $2 } $1 == "count:" { print "loose " $2 }'
	echo "tip $(git -C "$1" rev-parse main)"
}
stat_of() { awk -v k="$1" '$1 == k { print $2 }' "$REPO_CACHE/stats"; }

bigrepo_cached() {
	GENV=$(python3 "$ROOT/bench/checkout/genrepo.py" --gen-version)
	REPO_CACHE="$CACHE/checkout-v$GENV-seed$SEED"
	if [ ! -s "$REPO_CACHE/stats" ]; then
		mkdir -p "$CACHE"
		GT=$(mktemp -d "$CACHE/.gen.XXXXXX")
		echo "$BENCH: generating the repository (seed $SEED, generator v$GENV) in $REPO_CACHE ..."
		G0=$(date +%s)
		python3 "$ROOT/bench/checkout/genrepo.py" --seed "$SEED" "$GT/repo.git" >"$GT/gen.out" ||
			{ rm -rf "$GT"; die "the generator failed"; }
		repo_stats "$GT/repo.git" >"$GT/stats.tmp"
		echo "generated_s $(($(date +%s) - G0))" >>"$GT/stats.tmp"
		cat "$GT/gen.out" >>"$GT/stats.tmp"
		mv "$GT/stats.tmp" "$GT/stats"
		rm -rf "$REPO_CACHE" # a half-made one, from a run that was cut short
		# (another benchmark that generated it meanwhile wins; ours goes)
		mv -T "$GT" "$REPO_CACHE" 2>/dev/null || rm -rf "$GT"
		echo "$BENCH: generated in $(stat_of generated_s) s" \
			"(fast-import $(stat_of import_s) s, repack $(stat_of repack_s) s)"
	else
		echo "$BENCH: the repository from the cache ($REPO_CACHE, generated" \
			"in $(stat_of generated_s) s when it was made)"
	fi
	printf '%s: repository: %s commits (%s merges), %s files in %s directories at the tip (%s MB),' \
		"$BENCH" "$(stat_of commits)" "$(stat_of merges)" "$(stat_of tip_files)" "$(stat_of tip_dirs)" \
		"$(awk -v b="$(stat_of tip_bytes)" 'BEGIN { printf "%.1f", b / 1e6 }')"
	printf ' size-pack %s MiB (%s objects), %s branches, %s tags, tip %s\n' \
		"$(awk -v k="$(stat_of size_pack_kib)" 'BEGIN { printf "%.1f", k / 1024 }')" "$(stat_of objects)" \
		"$(stat_of branches)" "$(stat_of tags)" "$(stat_of tip | cut -c1-12)"
	[ "$(stat_of commits)" -ge 30000 ] && [ "$(stat_of tip_files)" -ge 4000 ] &&
		[ "$(stat_of size_pack_kib)" -ge 102400 ] ||
		echo "$BENCH: warning: the repository is below its intended size" \
			"(30,000 commits, 4,000 files, 100 MiB packed)" >&2
}

trusted() {
	# shellcheck disable=SC2016 # $0 and $1 are the inner shell's
	unshare -m --propagation private sh -c \
		'mount --bind "$0" "$1" && shift && exec "$@"' "$T/tls/ca.crt" "$BUNDLE" "$@"
}

bench_daemon() {
	cat >"$T/agrippad-ns" <<EOS
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "\$0" "\$1" && shift && exec "\$@"' \\
	"$T/tls/ca.crt" "$BUNDLE" "$AGRIPPAD" "\$@"
EOS
	chmod 0755 "$T/agrippad-ns"
	# shellcheck disable=SC2086 # VERBOSE: zero or more flags
	"$T/agrippad-ns" -d $VERBOSE -f "$CONF" >>"$LOG" 2>&1 &
	SUP_PID=$!
	bd_i=0
	until [ "$(healthz_code)" = 200 ]; do
		bd_i=$((bd_i + 1))
		if [ $bd_i -gt 600 ] || ! kill -0 "$SUP_PID" 2>/dev/null; then
			cat "$LOG"
			die "daemon did not start"
		fi
		sleep 0.1
	done
}
alive() { kill -0 "$SUP_PID" 2>/dev/null; }
died() {
	echo "$BENCH: the daemon (supervisor pid $SUP_PID) died during $1; the end of $LOG:" >&2
	tail -n 25 "$LOG" >&2
	exit 1
}

bench_stats() {
	awk -v c="$1" '$1 != "fail" && $c != "-" { print $c }' "$2" | sort -g | awk '{ v[NR] = $1 }
		END {
			if (!NR) { print "- - - 0"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR], NR
		}'
}

bench_verdict() {
	awk -v a="$1" -v b="$2" -v l="$3" -v no="${4:-MISS}" 'BEGIN {
		if (a == "-" || b == "-" || b == 0) { print "n/a " no; exit }
		r = a / b; printf "%.2f %s\n", r, (r <= l) ? "PASS" : no }'
}
