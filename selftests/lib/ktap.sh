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

# When the script cannot go on: the subtests not yet reported end as said,
# then the script (ktap_finish). A script names its subtests in the array
# NAMES, or says how many it plans in NTESTS.
#
# ktap_fail_rest NAME: up to NTESTS, each fails as NAME.
ktap_fail_rest() {
	while [ "$KTAP_COUNT" -lt "$NTESTS" ]; do ktap_fail "$1"; done
	ktap_finish
}

# ktap_skip_rest NAME REASON: up to NTESTS, each is skipped as NAME.
ktap_skip_rest() {
	while [ "$KTAP_COUNT" -lt "$NTESTS" ]; do ktap_skip "$1" "$2"; done
	ktap_finish
}

# fail_rest REASON: a setup step failed. With NAMES: REASON as a diagnostic,
# and each remaining subtest fails under its own name; else each fails as
# "setup: REASON".
fail_rest() {
	if [ "${#NAMES[@]}" -gt 0 ]; then
		ktap_diag "$1"
		while [ "$KTAP_COUNT" -lt "${#NAMES[@]}" ]; do
			ktap_fail "${NAMES[$KTAP_COUNT]}"
		done
		ktap_finish
	fi
	ktap_fail_rest "setup: $1"
}

# skip_all REASON [NAME...]: nothing to test here: each subtest of NAMES,
# then each NAME, is skipped with REASON.
skip_all() {
	local reason=$1 n
	shift
	for n in "${NAMES[@]}" "$@"; do ktap_skip "$n" "$reason"; done
	ktap_finish
}
