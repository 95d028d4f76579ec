#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Helpers of the kernel ULP tests (NVMe-oF, NFS, iSER): two hosts joined by
# ntr0, the figures of a transfer, what a ULP leaves on the devices.
# Source after ktap.sh, env.sh and verbs.sh.

# ulp_pair ADDR PEER_ADDR: ntrdma on both hosts, their ib_devices found
# (IBDEV, PEER_IBDEV), ADDR on our ntr0 and PEER_ADDR on the peer's, which
# answers a ping. Else every remaining subtest fails with the reason.
ulp_pair() {
	install_modules && ntb_pair || fail_rest "no NTB device pair"
	load_ntrdma || fail_rest "modprobe ntrdma failed"
	find_ibdevs || fail_rest "no ib devices"
	pair_addrs "$1" "$2" || fail_rest "no addresses on ntr0"
	wait_for 20 ping -c1 -W1 "$2" >/dev/null 2>&1 || fail_rest "no ping to $2"
}

# ulp_rate MB MS: MB in MS milliseconds as MB/s (one decimal).
ulp_rate() { awk -v mb="$1" -v ms="$2" 'BEGIN { printf "%.1f", ms ? mb * 1000 / ms : 0 }'; }

# ulp_left SIDE IBDEV: how many QPs and cm_ids IBDEV has on SIDE ("sh -c"
# for this host, peer for the other).
ulp_left() {
	$1 "rdma resource show qp; rdma resource show cm_id" 2>/dev/null | grep -c "$2"
}
