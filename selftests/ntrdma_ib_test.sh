#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA's verbs face (ntrdma%d): the ib_device exists and is tied to the
# netdev of the same NTB port, rdma-core lists it through the ntrdma
# provider, the port follows the shared link (PORT_ERR when the peer's
# driver goes, PORT_ACTIVE when it comes back), the verbs conformance suite
# (GoogleTest, rdma/tests/verbs) passes, and the module unloads while a
# verbs program holds the device open.
# Runs in flat mode (test bed: --flat 1) and in windowed mode (--flat 0).
#
# Environment: VERBS_FILTER (a gtest filter: run only those tests of the
# suite, e.g. 'UserFuzz.*' with NTRDMA_USER_FUZZ_SECS=900 for `make fuzz`).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

NTB_DRV=/sys/bus/ntb/drivers/ntrdma
NSHELL=8

ktap_header
if [ -x "$VERBS_TESTS" ]; then
	NGTEST=$("$VERBS_TESTS" --gtest_list_tests --gtest_filter="${VERBS_FILTER:-*}" | grep -c '^  ')
else
	NGTEST=0
fi
ktap_plan $((NSHELL + NGTEST))

need_ntb_pair

# 1: the device
load_ntrdma
wait_for 10 ibdev_of "$LOCAL_DEV" >/dev/null
IBDEV=$(ibdev_of "$LOCAL_DEV")
NETDEV=$(netdev_of "$LOCAL_DEV")
ktap_check "ib device of $LOCAL_DEV: ${IBDEV:-none} (netdev ${NETDEV:-none})" \
	test -n "$IBDEV" -a -n "$NETDEV"
if [ -z "$IBDEV" ]; then
	ktap_finish
fi
export NTRDMA_IBDEV=$IBDEV

# 2: rdma link ties it to the netdev of the same NTB port
ktap_diag "$(rdma link show "$IBDEV/1")"
ktap_check "rdma link: $IBDEV/1 has netdev $NETDEV" \
	sh -c "rdma link show $IBDEV/1 | grep -qw 'netdev $NETDEV'"

# 3: rdma-core sees it through our provider
install_provider
ktap_diag "$(ibv_devices 2>&1 | tr '\n' ';')"
ktap_check "ibv_devices lists $IBDEV" sh -c "ibv_devices | grep -qw $IBDEV"

# 4: the port is active with the link up
if wait_for 5 port_is "$IBDEV" PORT_ACTIVE; then
	ibv_devinfo -v -d "$IBDEV" | sed -n '/hca_id/p;/transport/p;/max_qp:/p;/max_cqe/p;/state/p;/link_layer/p;/GID\[/p' |
		sed 's/^/# /'
	ktap_pass "ibv_devinfo -v: port 1 PORT_ACTIVE, link layer $(ibv_devinfo -d "$IBDEV" | sed -n 's/.*link_layer:[[:space:]]*//p')"
else
	ktap_fail "ibv_devinfo: port 1 $(port_state "$IBDEV"), expected PORT_ACTIVE"
fi

# 5-6: the peer's driver goes away (PORT_ERR) and comes back (PORT_ACTIVE)
ev=$NTRDMA_OUT/asyncwatch.$$
stdbuf -oL ibv_asyncwatch -d "$IBDEV" >"$ev" 2>&1 &
aw=$!
# It prints its event FD once the device is open and events are queued to
# it: an event before that is not its to see (a loaded guest took > 1 s).
wait_for 15 grep -q "async event FD" "$ev" || ktap_diag "ibv_asyncwatch not ready: $(head -c 200 "$ev")"
if is_pair; then
	peer "modprobe -r ntrdma"
else
	echo "$REMOTE_DEV" > $NTB_DRV/unbind
fi
up_s() { cut -d' ' -f1 /proc/uptime; }
t_down=$(up_s)
wait_for 5 port_is "$IBDEV" PORT_DOWN
st=$(port_state "$IBDEV")
ktap_check "peer driver gone: port $st (at ${t_down} s)" test "$st" = PORT_DOWN
if is_pair; then
	peer "modprobe ntrdma"
else
	echo "$REMOTE_DEV" > $NTB_DRV/bind
fi
wait_for 10 port_is "$IBDEV" PORT_ACTIVE
st=$(port_state "$IBDEV")
# The events (delivered by the RDMA core's workqueue, late when the guest
# is starved): a PORT_ERR, then a PORT_ACTIVE after it.
err_then_active() { sed -n '/PORT_ERR/,$p' "$ev" | grep -q PORT_ACTIVE; }
wait_for 20 err_then_active
kill "$aw" 2>/dev/null
wait "$aw" 2>/dev/null
ktap_diag "events: $(grep -o 'IBV_EVENT_[A-Z_]*' "$ev" | tr '\n' ' ')(now ${SECONDS} s into the test, $(up_s) s up)"
ktap_check "peer driver back: port $st; async events PORT_ERR then PORT_ACTIVE" \
	eval "[ '$st' = PORT_ACTIVE ] && err_then_active"
rm -f "$ev"

# 7..: the conformance suite. The port is InfiniBand (LID or GID 0; no IP
# resolution), but the netdevs are brought up anyway, as users have them.
ip link set "$NETDEV" up
peer "for i in \$(ls /sys/class/net); do
	[ \"\$(ethtool -i \$i 2>/dev/null | sed -n 's/^bus-info: //p')\" = $REMOTE_DEV ] && ip link set \$i up
done"
ll_ready() {
	[ "$(cat /sys/class/net/$NETDEV/carrier 2>/dev/null)" = 1 ] &&
		ip -6 addr show dev "$NETDEV" scope link | grep -q inet6 &&
		! ip -6 addr show dev "$NETDEV" | grep -q tentative
}
wait_for 10 ll_ready || ktap_diag "$NETDEV: no carrier or link-local address: $(ip -br addr show dev "$NETDEV")"
# The suite's DataPath tests need both ends in this guest: in the loop
# topology the responder is the other port's device (unset: they skip).
# Its CrossHost tests put the responder in ntrdma_verbs_agent on the other
# host (pair; in loop: the other port's device), driven over TCP: over the
# netdevs in pair, over lo in loop.
AGENT_PORT=7471
if ! is_pair; then
	NTRDMA_PEER_IBDEV=$(ibdev_of "$REMOTE_DEV")
	export NTRDMA_PEER_IBDEV
	ktap_diag "verbs suite: requester $IBDEV, responder ${NTRDMA_PEER_IBDEV:-none}"
	ip link set lo up
	AGENT_DEV=$NTRDMA_PEER_IBDEV AGENT_ADDR=127.0.0.1
else
	AGENT_DEV=$(peer_lib "ibdev_of $REMOTE_DEV")
	ip addr replace 10.79.3.1/24 dev "$NETDEV"
	peer "for i in \$(ls /sys/class/net); do
		[ \"\$(ethtool -i \$i 2>/dev/null | sed -n 's/^bus-info: //p')\" = $REMOTE_DEV ] && ip addr replace 10.79.3.2/24 dev \$i
	done"
	AGENT_ADDR=10.79.3.2
	wait_for 15 ping -c 1 -W 1 "$AGENT_ADDR" >/dev/null ||
		ktap_diag "no ping to the agent's host $AGENT_ADDR over $NETDEV"
fi
ktap_diag "cross-host tests: agent on ${AGENT_DEV:-none} at $AGENT_ADDR:$AGENT_PORT"
peer "timeout 1200 $VERBS_AGENT $AGENT_DEV $AGENT_PORT $AGENT_ADDR" >"$NTRDMA_OUT/verbs_agent.log" 2>&1 &
agent=$!
export NTRDMA_AGENT=$AGENT_ADDR:$AGENT_PORT
# How the suite takes the peer away and back (its link-loss case).
if is_pair; then
	export NTRDMA_PEER_DOWN_CMD="remote modprobe -r ntrdma"
	export NTRDMA_PEER_UP_CMD="remote modprobe ntrdma"
else
	export NTRDMA_PEER_DOWN_CMD="echo $REMOTE_DEV > $NTB_DRV/unbind"
	export NTRDMA_PEER_UP_CMD="echo $REMOTE_DEV > $NTB_DRV/bind"
fi
if [ "$NGTEST" -gt 0 ]; then
	out=$NTRDMA_OUT/verbs_tests.$$
	# The cross-host tests first: the link-loss test re-creates the peer's
	# netdev (and so drops the agent's address).
	if [ -n "${VERBS_FILTER:-}" ]; then
		"$VERBS_TESTS" --gtest_filter="$VERBS_FILTER" >"$out" 2>&1
	else
		"$VERBS_TESTS" --gtest_filter='CrossHost.*' >"$out" 2>&1
	fi
	peer "pkill -f '^[^ ]*/ntrdma_verbs_agent '" >/dev/null 2>&1
	wait "$agent" 2>/dev/null
	[ -z "${VERBS_FILTER:-}" ] && "$VERBS_TESTS" --gtest_filter='-CrossHost.*' >>"$out" 2>&1
	# each failure with its message (what was expected, what came)
	grep -A6 ': Failure$' "$out" | grep -v '^\[ RUN' | head -60 | sed 's/^/# /'
	grep -E '^(user fuzz:|\[ NOTE )' "$out" | sed 's/^/# /'
	while read -r name; do
		if grep -q "^\[  SKIPPED \] $name " "$out"; then
			# gtest prints the reason on the line before
			why=$(grep -B1 "^\[  SKIPPED \] $name " "$out" | head -1)
			case $why in "" | "["* | *": Skipped") why="skipped by the suite" ;; esac
			ktap_skip "verbs: $name" "$why"
		elif grep -q "^\[       OK \] $name " "$out"; then
			ktap_pass "verbs: $name"
		else
			ktap_fail "verbs: $name"
		fi
	done < <("$VERBS_TESTS" --gtest_list_tests --gtest_filter="${VERBS_FILTER:-*}" |
		awk '/^[^ ]/ { s = $1 } /^  / { print s $1 }')
	rm -f "$out"
fi

# the in-process data path tests again in checked mode (direct_placement=0:
# every WRITE byte copied by the target after its own checks)
checked_mode() {
	local out=$NTRDMA_OUT/verbs_checked.$$ n rc
	modprobe -r ntrdma && modprobe ntrdma direct_placement=0 || return 1
	wait_for 10 ibdev_of "$LOCAL_DEV" >/dev/null && wait_for 10 ibdev_of "$REMOTE_DEV" >/dev/null || return 1
	NTRDMA_IBDEV=$(ibdev_of "$LOCAL_DEV") NTRDMA_PEER_IBDEV=$(ibdev_of "$REMOTE_DEV")
	export NTRDMA_IBDEV NTRDMA_PEER_IBDEV
	wait_for 10 port_is "$NTRDMA_IBDEV" PORT_ACTIVE || return 1
	"$VERBS_TESTS" --gtest_filter='DataPath.*:MultiSge.*:Events.*:Placement.*' >"$out" 2>&1
	rc=$?
	n=$(grep -c '^\[       OK \]' "$out")
	grep -A6 ': Failure$' "$out" | head -30 | sed 's/^/# /'
	ktap_diag "checked mode: $n passed, $(grep -c '^\[  SKIPPED \]' "$out") skipped (Placement.* skip by design), gtest exit $rc"
	rm -f "$out"
	[ "$(cat /sys/module/ntrdma/parameters/direct_placement)" = N ] && [ "$n" -gt 30 ] && [ $rc = 0 ]
}
if [ "$NGTEST" -gt 0 ] && [ -z "${VERBS_FILTER:-}" ] && ! is_pair; then
	ktap_check "verbs data path tests pass in checked mode (direct_placement=0)" checked_mode
	IBDEV=$(ibdev_of "$LOCAL_DEV")
else
	ktap_skip "verbs data path tests in checked mode" "they hold both ends in one process: loop topology, whole suite only"
fi

# last: unload while a verbs program holds the device open
ibv_rc_pingpong -d "$IBDEV" -g 0 -p 18515 >/dev/null 2>&1 &
pp=$!
sleep 1
t0=$SECONDS
is_pair && peer "modprobe -r ntrdma"
timeout 20 modprobe -r ntrdma
rc=$?
kill "$pp" 2>/dev/null
wait "$pp" 2>/dev/null
ktap_check "unload with a verbs user attached: rc=$rc in $((SECONDS - t0)) s" test $rc = 0

ktap_finish
