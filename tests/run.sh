#!/bin/sh
# Run every test against the tree in $1 (build-san for `make check`): the
# cmocka unit tests, then the integration and security tests against the
# real daemon.
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
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"

if [ "$(id -u)" -eq 0 ]; then
	sh scripts/mkusers.sh
fi

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
tests_pass=0
tests_fail=0

# run NAME CMD...: one suite; its own test counts are added to the totals
# (cmocka's "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)", or the
# integration tests' "NAME: N passed, M failed").
run() {
	name=$1
	shift
	echo "=== $name"
	# A hung suite fails after SUITE_TIMEOUT seconds instead of stalling CI.
	timeout -k 10 "${SUITE_TIMEOUT:-900}" "$@" >"$OUT" 2>&1
	rc=$?
	cat "$OUT"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\.$/\1/p; s/^[a-z_]*: \([0-9]*\) passed, [0-9]* failed.*$/\1/p' "$OUT" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:$/\1/p; s/^[a-z_]*: [0-9]* passed, \([0-9]*\) failed.*$/\1/p' "$OUT" | tail -1)
	tests_pass=$((tests_pass + ${p:-0}))
	tests_fail=$((tests_fail + ${f:-0}))
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		failed="$failed $name"
		[ "${f:-0}" -eq 0 ] && tests_fail=$((tests_fail + 1))
		echo "=== FAILED: $name (exit $rc)"
	fi
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run "$(basename "$t")" "$t"
done
for t in tests/integration/test_*.sh tests/security/test_*.sh; do
	run "$(basename "$t" .sh)" sh "$t"
done

echo
[ -n "$failed" ] && echo "failed suites:$failed"
echo "suites: $pass passed, $fail failed"
echo "check: $tests_pass passed, $tests_fail failed"
[ "$fail" -eq 0 ]
