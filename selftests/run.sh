#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Run NTRDMA selftests as kselftest's runner does: one KTAP document whose
# subtests are the test programs, each test's own KTAP indented below it.
# Usage: run.sh [TEST...]   (default: TEST_PROGS from the Makefile)
# Exit status 0 when no test failed. Per-test timeout from ./settings
# (NTRDMA_TEST_TIMEOUT overrides it: the long forms of the soak and fuzzers).
cd "$(dirname "$0")" || exit 1
. lib/env.sh

if [ $# -eq 0 ]; then
	set -- $(sed -n 's/^TEST_PROGS := //p' Makefile)
fi
timeout_s=${NTRDMA_TEST_TIMEOUT:-$(sed -n 's/^timeout=//p' settings)}
out=$NTRDMA_OUT/ktap.${NTRDMA_TOPO:-host}.txt

{
	echo "TAP version 13"
	echo "1..$#"
	n=0
	fail=0
	for t in "$@"; do
		n=$((n + 1))
		echo "# selftests: ntrdma: $t"
		t0=$SECONDS
		timeout "${timeout_s:-900}" ./"$t" 2>&1 | sed 's/^/    /'
		rc=${PIPESTATUS[0]}
		echo "# time: $t $((SECONDS - t0)) s"
		case $rc in
		0) echo "ok $n selftests: ntrdma: $t" ;;
		4) echo "ok $n selftests: ntrdma: $t # SKIP" ;;
		124) echo "not ok $n selftests: ntrdma: $t # TIMEOUT ${timeout_s}s"; fail=1 ;;
		*) echo "not ok $n selftests: ntrdma: $t # exit=$rc"; fail=1 ;;
		esac
	done
	exit $fail
} | tee "$out"
exit "${PIPESTATUS[0]}"
