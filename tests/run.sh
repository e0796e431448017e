#!/bin/sh
# Run every test against the tree in $1 (build-san for `make check`): the
# cmocka unit tests, then the integration tests against the real daemon.
# Ends with one line "check: N passed, M failed".
set -u
BUILD=${1:-build-san}
export BUILD
ROOT=$(pwd)
export ROOT
pass=0
fail=0
failed=""

# Sanitizer reports must fail the run, and leaks count.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

if [ "$(id -u)" -eq 0 ]; then
	sh scripts/mkusers.sh
fi

run() {
	name=$1
	shift
	echo "=== $name"
	if "$@"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		failed="$failed $name"
		echo "=== FAILED: $name"
	fi
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run "$(basename "$t")" "$t"
done
for t in tests/integration/test_*.sh; do
	run "$(basename "$t" .sh)" sh "$t"
done

echo
[ -n "$failed" ] && echo "failed:$failed"
echo "check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
