#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Network helpers shared by the netdev selftests (source after ktap.sh and
# env.sh). Sides are command prefixes that run a shell command line on that
# side, e.g. "sh -c", "ip netns exec ntA sh -c" or "peer".

# iperf3 -J on stdin -> Gbit/s received, 3 decimals
iperf_gbps() {
	jq -r '(.end.sum_received // .end.sum).bits_per_second / 1e9 * 1000 | floor / 1000'
}

# iperf_check PREFIX NAME SERVER_SIDE CLIENT_SIDE SERVER_IP PORT [iperf3 args]
# One KTAP result (throughput > 0) and one metric PREFIX_NAME_Gbps.
iperf_check() {
	local prefix=$1 name=$2 srv=$3 cli=$4 ip=$5 port=$6 out g
	shift 6
	$srv "iperf3 -s -1 -D -p $port >/dev/null 2>&1"
	sleep 1
	out=$($cli "timeout 60 iperf3 -J -c $ip -p $port -t ${IPERF_SECS:-4} $*") || {
		ktap_fail "iperf3 $name"
		return
	}
	g=$(iperf_gbps <<< "$out") || g=0
	metric "${prefix}_${name}_Gbps" "$g" "Gbit/s"
	if awk -v g="$g" 'BEGIN { exit !(g > 0) }'; then
		ktap_pass "iperf3 $name: $g Gbit/s"
	else
		ktap_fail "iperf3 $name: no throughput"
	fi
}
