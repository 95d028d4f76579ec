#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The kernel's own NTB selftest (tools/testing/selftests/ntb/ntb_test.sh, taken
# from the distribution's linux-source) against our NTB hardware driver: port,
# link, doorbell, scratchpad, message, memory-window data compare, pingpong and
# ntb_perf with CPU copy. Every section it runs is one KTAP subtest, and every
# section listed in EXPECTED must have run and passed.
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"

NTB_TEST=${NTB_TEST_SH:-$NTRDMA_ROOT/build/linux-src/tools/testing/selftests/ntb/ntb_test.sh}
PERF_ORDER=${NTB_PERF_ORDER:-27}
# ntb_perf kmallocs a source buffer as large as the window: keep it <= 4 MiB
PERF_MAX_MW=${NTB_PERF_MAX_MW:-4194304}

# Section kinds ntb_test.sh must report as Passed, with how many times.
EXPECTED="port:1 link:2 db:2 spad:2 msg:2 mw0:2 mw1:2 ping_pong:1 local_perf:1 remote_perf:1"

ktap_header
if [ ! -r "$NTB_TEST" ]; then
	ktap_plan 1
	ktap_skip ntb_test "ntb_test.sh not found (run scripts/build-kernel-ext.sh)"
	ktap_finish
fi
if ! install_modules || ! ntb_pair; then
	ktap_plan 1
	ktap_fail "ntb devices: none found (local: $(local_ntb_devs | xargs))"
	ktap_finish
fi

log=$NTRDMA_OUT/ntb_test.${NTRDMA_TOPO:-host}.log
rh=$(remote_host)
if [ -n "$rh" ]; then
	set -- -r "$rh" "$LOCAL_DEV" "$REMOTE_DEV"
else
	set -- "$LOCAL_DEV" "$REMOTE_DEV"
fi
ktap_diag "ntb_test.sh -p $PERF_ORDER -w $PERF_MAX_MW $*"
timeout 900 bash "$NTB_TEST" -p "$PERF_ORDER" -w "$PERF_MAX_MW" "$@" > "$log" 2>&1
rc=$?
sed 's/^/# /' "$log"

# One subtest per "Running ... tests on" section, judged by the line after it.
declare -A seen
results=()
kind=
while IFS= read -r line; do
	if [[ $line =~ ^Running\ (.*)\ tests?\ (with|without|on) ]]; then
		kind=${BASH_REMATCH[1]}
		kind=${kind// /_}
		results+=("$kind|${line}|pending")
	elif [[ -n $kind && $line =~ ^\ \ (Passed|Unsupported) ]]; then
		last=$((${#results[@]} - 1))
		results[$last]="${results[$last]%|pending}|${BASH_REMATCH[1]}"
		[ "${BASH_REMATCH[1]}" = Passed ] &&
			seen[$kind]=$(( ${seen[$kind]:-0} + 1 ))
		kind=
	fi
done < "$log"

nexp=$(wc -w <<< "$EXPECTED")
ktap_plan $(( ${#results[@]} + nexp + 1 ))
for r in "${results[@]}"; do
	IFS='|' read -r k desc status <<< "$r"
	if [ "$status" = Passed ]; then
		ktap_pass "$desc"
	else
		ktap_fail "$desc (${status})"
	fi
done
for e in $EXPECTED; do
	k=${e%%:*}
	n=${e##*:}
	if [ "${seen[$k]:-0}" -ge "$n" ]; then
		ktap_pass "section $k passed $n time(s)"
	else
		ktap_fail "section $k passed ${seen[$k]:-0} of $n time(s)"
	fi
done
if [ $rc -eq 0 ] && ! grep -q "did not match" "$log"; then
	ktap_pass "ntb_test.sh exit status 0, no data mismatch"
else
	ktap_fail "ntb_test.sh exit status $rc"
fi

# ntb_perf: "0: copied N bytes in U usecs, M MBytes/s" (local then remote)
grep -o '[0-9]* MBytes/s' "$log" | awk '{print $1}' | {
	read -r l && metric "ntb_perf_local_MBps" "$l" "MB/s"
	read -r r && metric "ntb_perf_remote_MBps" "$r" "MB/s"
}
ktap_finish
