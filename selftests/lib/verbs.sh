#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Helpers for NTRDMA's verbs selftests. Source after env.sh.

PROVIDER_DIR=$NTRDMA_ROOT/build/user/rdma/provider
VERBS_TESTS=$NTRDMA_ROOT/build/user/rdma/tests/verbs/ntrdma_verbs_tests
VERBS_AGENT=$NTRDMA_ROOT/build/user/rdma/tests/verbs/ntrdma_verbs_agent

# Make libibverbs (rdma-core 44) find the ntrdma provider, on both sides.
# libibverbs reads every *.driver file in /etc/libibverbs.d; a "driver NAME"
# line with an absolute NAME makes it dlopen NAME-rdmav34.so, so the
# provider is used from the build tree. In the test bed /etc is the guest's
# writable tmpfs layer; on a real host `make install` has already put
# ntrdma.driver there (then this does nothing).
install_provider() {
	local cmd="[ -e /etc/libibverbs.d/ntrdma.driver ] ||
		{ mkdir -p /etc/libibverbs.d &&
		  echo 'driver $PROVIDER_DIR/libntrdma' > /etc/libibverbs.d/ntrdma.driver; }"
	[ -f "$PROVIDER_DIR/libntrdma-rdmav34.so" ] || return 1
	sh -c "$cmd" || return 1
	if is_pair; then peer "$cmd" || return 1; fi
}

# The ib_device whose parent is NTB device $1, on this host.
ibdev_of() {
	local d
	for d in /sys/class/infiniband/*; do
		[ -e "$d/device" ] || continue
		[ "$(basename "$(readlink -f "$d/device")")" = "$1" ] && basename "$d" && return 0
	done
	return 1
}

# The netdev of NTB device $1 (ethtool bus-info), on this host.
netdev_of() {
	local i
	for i in $(ls /sys/class/net); do
		[ "$(ethtool -i "$i" 2>/dev/null | sed -n 's/^bus-info: //p')" = "$1" ] && echo "$i" && return 0
	done
	return 1
}

# port_state IBDEV: PORT_ACTIVE, PORT_DOWN... as ibv_devinfo prints it.
port_state() {
	ibv_devinfo -d "$1" 2>/dev/null | sed -n 's/^[[:space:]]*state:[[:space:]]*\([A-Z_]*\).*/\1/p' | head -1
}

port_is() { [ "$(port_state "$1")" = "$2" ]; }

# peer_lib CMD: CMD (no single quotes in it) on the peer's host, in bash
# with env.sh and this file loaded.
peer_lib() {
	peer "exec bash -c '. $NTRDMA_ROOT/selftests/lib/env.sh; . $NTRDMA_ROOT/selftests/lib/verbs.sh; $1'"
}

# find_ibdevs: IBDEV (the ib device of $LOCAL_DEV, here) and PEER_IBDEV (of
# $REMOTE_DEV, on the peer's host), each waited for up to 10 s.
find_ibdevs() {
	wait_for 10 ibdev_of "$LOCAL_DEV" >/dev/null || return 1
	IBDEV=$(ibdev_of "$LOCAL_DEV")
	PEER_IBDEV=$(peer_lib "wait_for 10 ibdev_of $REMOTE_DEV >/dev/null; ibdev_of $REMOTE_DEV")
	[ -n "$PEER_IBDEV" ]
}

# pair_addrs ADDR PEER_ADDR: (pair topology) both netdevs up, ADDR/24 on
# ours, PEER_ADDR/24 on the peer's.
pair_addrs() {
	local n
	n=$(netdev_of "$LOCAL_DEV") || return 1
	ip addr replace "$1/24" dev "$n" && ip link set "$n" up || return 1
	peer_lib "n=\$(netdev_of $REMOTE_DEV) && ip addr replace $2/24 dev \$n && ip link set \$n up"
}

# perf_figure OUTPUT COLUMN: the value under COLUMN (a regex: '^BW.average',
# '^t_typical') in the line after perftest's " #bytes" header.
perf_figure() {
	local hdr line
	hdr=$(grep -m1 '^ *#bytes' <<<"$1")
	line=$(grep -A1 -m1 '^ *#bytes' <<<"$1" | tail -n 1)
	awk -v h="$hdr" -v l="$line" -v c="$2" 'BEGIN {
		gsub(/BW average/, "BW.average", h); gsub(/BW peak/, "BW.peak", h)
		sub(/^[ \t]+/, "", h); sub(/^[ \t]+/, "", l)
		n = split(h, H, "[ \t]+"); split(l, L, "[ \t]+")
		for (i = 1; i <= n; i++) if (H[i] ~ c) { print L[i]; exit } }'
}

# perftest_clock_failed OUTPUT: perftest ended because it could not fit its
# cycle clock to gettimeofday() for the report (a busy TCG guest: "r^2 ...
# < 0.9", "Can't produce a report", exit 1): the tool's failure, printed
# after the traffic, not one of the system under test.
perftest_clock_failed() {
	grep -q "Can't produce a report" <<<"$1"
}

# perftest_retry ONCE CLI_LOG SRV_LOG TOOL PORT: "ONCE TOOL PORT" (0 when
# both ends succeeded; the client's output in CLI_LOG, the server's in
# SRV_LOG on the peer's host), tried again on PORT+10, PORT+20 only when
# perftest's clock failed (3 tries), said in a diag.
perftest_retry() {
	local once=$1 cli=$2 srv=$3 tool=$4 port=$5 try
	for try in 1 2 3; do
		"$once" "$tool" "$port" && return 0
		perftest_clock_failed "$(cat "$cli"; peer "cat $srv")" || return 1
		ktap_diag "$tool: perftest could not calibrate its clock (the tool's failure): try $((try + 1))"
		port=$((port + 10))
	done
	return 1
}
