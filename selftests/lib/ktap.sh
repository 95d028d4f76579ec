#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Minimal KTAP helpers for NTRDMA's shell selftests (the 6.1 tree has no
# ktap_helpers.sh). Source it; call ktap_header, ktap_plan N, then one of
# ktap_pass/ktap_fail/ktap_skip per subtest, then ktap_finish (exits 0 on
# success, 1 on any failure, 4 when everything was skipped).

KTAP_COUNT=0
KTAP_PASS=0
KTAP_FAIL=0
KTAP_SKIP=0

ktap_header() { echo "TAP version 13"; }
ktap_plan() { echo "1..$1"; }
ktap_diag() { echo "# $*"; }

ktap_pass() {
	KTAP_COUNT=$((KTAP_COUNT + 1))
	KTAP_PASS=$((KTAP_PASS + 1))
	echo "ok $KTAP_COUNT $*"
}

ktap_fail() {
	KTAP_COUNT=$((KTAP_COUNT + 1))
	KTAP_FAIL=$((KTAP_FAIL + 1))
	echo "not ok $KTAP_COUNT $*"
}

# ktap_skip NAME REASON
ktap_skip() {
	KTAP_COUNT=$((KTAP_COUNT + 1))
	KTAP_SKIP=$((KTAP_SKIP + 1))
	echo "ok $KTAP_COUNT $1 # SKIP $2"
}

# ktap_check NAME CMD...: pass when CMD succeeds
ktap_check() {
	local name=$1
	shift
	if "$@"; then ktap_pass "$name"; else ktap_fail "$name"; fi
}

ktap_finish() {
	echo "# totals: pass:$KTAP_PASS fail:$KTAP_FAIL skip:$KTAP_SKIP"
	[ "$KTAP_FAIL" -eq 0 ] || exit 1
	[ "$KTAP_PASS" -gt 0 ] || [ "$KTAP_SKIP" -eq 0 ] || exit 4
	exit 0
}
