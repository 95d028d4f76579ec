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
