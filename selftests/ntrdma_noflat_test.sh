#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ntrdma on an NTB without a flat window (the stock clients' topology,
# --flat 0: two 4 MiB windows, no window onto the peer's RAM): the device
# binds, the NTB refuses translation 0 at link-up, ntrdma says why once in
# dmesg, keeps the link down without retrying, and unloads cleanly.
# Uses debugfs ntrdma/<dev>/info (flat_refused, link).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"

NTESTS=5
ktap_header
ktap_plan $NTESTS

install_modules
# Other NTB clients of this run leave the NTB to ntrdma.
clients="ntb_netdev ntb_transport ntb_perf ntb_pingpong ntb_tool ntb_msi_test"
modprobe -r $clients 2>/dev/null
is_pair && peer "modprobe -r $clients 2>/dev/null"
if ! wait_for 20 ntb_pair; then
	while [ "$KTAP_COUNT" -lt "$NTESTS" ]; do ktap_fail "setup: no NTB pair"; done
	ktap_finish
fi
if [ -d "$DEBUGFS/ntb_hw_ivshmem" ] && grep -q '^Y' /sys/module/ntb_hw_ivshmem/parameters/flat_window; then
	while [ "$KTAP_COUNT" -lt "$NTESTS" ]; do ktap_skip "no flat window" "the NTB has one (run with --flat 0)"; done
	ktap_finish
fi

ntrdma_dir() { # the debugfs directory of the ntrdma device on LOCAL_DEV
	grep -l "^ntb: $LOCAL_DEV\$" "$DEBUGFS"/ntrdma/*/info 2>/dev/null | head -1 | xargs -r dirname
}
info() { sed -n "s/^$1: //p" "$dir/info" 2>/dev/null; } # FIELD of that device
refusals() { # NAME: refusal lines of that ntrdma device since the mark
	dmesg | tail -n +"$((mark + 1))" | grep -c "$1: MW[0-9]* cannot map our RAM at translation 0.*has no flat window"
}

mark=$(dmesg | wc -l)
modprobe ntrdma
rc=$?
if is_pair; then peer "modprobe ntrdma" || rc=1; fi
ktap_check "modprobe ntrdma binds the NTB (both hosts)" test $rc = 0

wait_for 10 eval '[ -n "$(ntrdma_dir)" ]'
dir=$(ntrdma_dir)
name=$(basename "${dir:-none}")
wait_for 20 eval '[ "$(info flat_refused)" = 1 ]'
dmesg | tail -n +"$((mark + 1))" | grep "$name" | sed 's/^/# /'
ktap_check "the refusal is in dmesg and debugfs (flat_refused: 1)" \
	test "$(refusals "$name")" -ge 1 -a "$(info flat_refused)" = 1

# Heartbeat periods pass: no retry, no second message, the link stays down.
n1=$(refusals "$name")
sleep 5
n2=$(refusals "$name")
ktap_diag "refusal lines of $name: $n1, 5 s later $n2"
ktap_check "said once: no retry after the refusal" test "$n1" = 1 -a "$n2" = 1
ktap_check "link stays down" test "$(info link)" = down

timeout 60 modprobe -r ntrdma
rc=$?
if is_pair; then peer "timeout 60 modprobe -r ntrdma" || rc=1; fi
ktap_check "modprobe -r ntrdma (both hosts)" test $rc = 0 -a ! -d "$DEBUGFS/ntrdma/$name"

ktap_finish
