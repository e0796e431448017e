#!/bin/sh
# Build and run libFuzzer targets.
#
#   tests/fuzz/run.sh SECONDS tests/fuzz/fuzz_NAME.c...
#
# Each target is linked with the files its first line names
# ("/* FUZZ_SOURCES: a.c b.c */", paths from the repository root) and with
# common/*.c and ipc/*.c, which go in through an archive (as the unit tests
# link libagrippa.a) so that only the objects a target uses are pulled in.
# Everything is built into build-fuzz/; each target runs for SECONDS over
# build-fuzz/corpus-NAME, seeded from tests/fuzz/corpus/NAME/.  Crash inputs
# are written to build-fuzz/fuzz_NAME-crash-*.  Exits non-zero if any target
# fails to build or finds a crash.
set -u

if [ $# -lt 2 ]; then
	echo "usage: $0 SECONDS target.c..." >&2
	exit 2
fi
time=$1
shift
cd "$(dirname "$0")/../.." || exit 2

CC=${FUZZ_CC:-clang}
PKGS="libpq libevent libsodium yaml-0.1 msgpack libseccomp libcap jansson libcurl"
# shellcheck disable=SC2086
pkg_cflags=$(pkg-config --cflags $PKGS) || exit 2
# shellcheck disable=SC2086
pkg_libs=$(pkg-config --libs $PKGS) || exit 2
CFLAGS="-std=c17 -D_GNU_SOURCE -I. -g -O1 -fsanitize=fuzzer,address,undefined
	-fno-sanitize-recover=undefined"

# build-fuzz/libfuzzbase.a from common/*.c and ipc/*.c
build_base() {
	rm -rf build-fuzz/obj
	mkdir -p build-fuzz/obj
	for f in common/*.c ipc/*.c; do
		o=build-fuzz/obj/$(echo "$f" | tr / _ | sed 's/\.c$/.o/')
		# shellcheck disable=SC2086
		$CC $CFLAGS $pkg_cflags -c -o "$o" "$f" || return 1
	done
	rm -f build-fuzz/libfuzzbase.a
	ar rcs build-fuzz/libfuzzbase.a build-fuzz/obj/*.o
}

mkdir -p build-fuzz
if ! build_base; then
	echo "fuzz: building common/ and ipc/ failed" >&2
	exit 1
fi
status=0
for src in "$@"; do
	base=$(basename "$src" .c)
	name=${base#fuzz_}
	first=$(sed -n 1p "$src")
	case $first in
	"/* FUZZ_SOURCES:"*"*/") ;;
	*)
		echo "fuzz: $src: first line must be /* FUZZ_SOURCES: ... */" >&2
		status=1
		continue
		;;
	esac
	extra=$(printf '%s\n' "$first" | sed 's|^/\* FUZZ_SOURCES:||; s|\*/.*$||')
	echo "fuzz: building $base"
	# shellcheck disable=SC2086
	if ! $CC $CFLAGS $pkg_cflags -o "build-fuzz/$base" "$src" $extra \
	    build-fuzz/libfuzzbase.a $pkg_libs; then
		echo "fuzz: $base: build failed" >&2
		status=1
		continue
	fi
	corpus=build-fuzz/corpus-$name
	mkdir -p "$corpus"
	if [ -d "tests/fuzz/corpus/$name" ]; then
		cp tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null || true
	fi
	echo "fuzz: running $base for ${time}s"
	if ! "build-fuzz/$base" -max_total_time="$time" -print_final_stats=1 \
	    -artifact_prefix="build-fuzz/$base-" "$corpus"; then
		echo "fuzz: $base: FAILED (see build-fuzz/$base-*)" >&2
		status=1
	fi
done
exit $status
