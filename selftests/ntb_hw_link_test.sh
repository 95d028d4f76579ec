#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Link events of the NTB hardware driver: the link drops when the peer port's
# driver goes away (unbind) and when the peer host dies (test bed: guest killed),
# and comes back when the peer returns. Observed through ntb_tool's link file.
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"

DRV=/sys/bus/pci/drivers/ntb_hw_ivshmem
LINK_TIMEOUT=${LINK_TIMEOUT:-2}

ktap_header
ktap_plan 7
need_ntb_pair
ktap_pass "ntb devices present: $LOCAL_DEV / $REMOTE_DEV"

# ntb_tool: the top-level link file (write-only) enables/disables the link;
# peerN/link reads Y/N. A freshly probed ntb_tool leaves the link disabled.
enable_local() { echo Y > "$DEBUGFS/ntb_tool/$LOCAL_DEV/link"; }
enable_peer() { peer "echo Y > $DEBUGFS/ntb_tool/$REMOTE_DEV/link"; }
modprobe ntb_tool && { ! is_pair || peer modprobe ntb_tool; }
enable_local
enable_peer
LINK=$DEBUGFS/ntb_tool/$LOCAL_DEV/peer0/link
link_is() { [ "$(cat "$LINK" 2>/dev/null)" = "$1" ]; }
ktap_check "link up with ntb_tool on both ports" wait_for 10 link_is Y

# now in ms
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

t0=$(now_ms)
peer "echo $REMOTE_DEV > $DRV/unbind"
if wait_for "$LINK_TIMEOUT" link_is N; then
	metric link_down_after_peer_unbind_ms $(( $(now_ms) - t0 )) ms
	ktap_pass "link down within ${LINK_TIMEOUT}s of the peer driver unbinding"
else
	ktap_fail "link still up ${LINK_TIMEOUT}s after the peer driver unbound"
fi

peer "echo $REMOTE_DEV > $DRV/bind"
wait_for 10 peer "test -e $DEBUGFS/ntb_tool/$REMOTE_DEV/link" && enable_peer
ktap_check "link up again after the peer driver rebinds" wait_for 10 link_is Y

peer "echo N > $DEBUGFS/ntb_tool/$REMOTE_DEV/link"
ktap_check "link down when the peer's client disables the link" \
	wait_for "$LINK_TIMEOUT" link_is N
enable_peer
ktap_check "link up when the peer's client enables it again" wait_for 10 link_is Y

if [ "${NTRDMA_TOPO:-}" = pair ]; then
	t0=$(now_ms)
	testbed-ctl kill-peer >/dev/null
	if wait_for "$LINK_TIMEOUT" link_is N; then
		metric link_down_after_peer_kill_ms $(( $(now_ms) - t0 )) ms
		ok=1
	else
		ok=0
	fi
	testbed-ctl start-peer >/dev/null && install_modules &&
		peer "modprobe ntb_tool" && enable_peer && wait_for 20 link_is Y && up=1 || up=0
	if [ $ok = 1 ] && [ $up = 1 ]; then
		ktap_pass "peer guest killed: link down, back up after a new peer boots"
	else
		ktap_fail "peer guest killed: down=$ok up-again=$up"
	fi
else
	ktap_skip "peer guest killed" "loopback topology has no peer guest"
fi
modprobe -r ntb_tool
is_pair && peer "modprobe -r ntb_tool"
ktap_finish
