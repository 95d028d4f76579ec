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

# The two ends of the NTB as Ethernet sides, for the ntr netdev tests:
# $A / $B run a shell command line on side A / B (pair: this host and the
# peer; loop: namespaces ntA and ntB of this host, bring_up moves each
# netdev into its own). bring_up configures A_IP / B_IP (/24) on them and
# sets IFA / IFB.
net_sides() {
	if is_pair; then
		A="sh -c"
		B="peer"
	else
		A="ip netns exec ntA sh -c"
		B="ip netns exec ntB sh -c"
	fi
}

# The ntrdma netdev of an NTB device, on side A or B (in its namespace).
ntr_of() { # SIDE NTBDEV
	local side=$1 dev=$2
	${!side} "for i in \$(ls /sys/class/net); do
		[ \"\$(ethtool -i \$i 2>/dev/null | sed -n 's/^bus-info: //p')\" = $dev ] && echo \$i
	done" | head -1
}

# Load (or bind) ntrdma on both sides, place and configure the netdevs.
bring_up() { # [MODULE PARAMS]
	if is_pair; then
		load_ntrdma "$@" || return 1
	else
		modprobe ntrdma "$@" || return 1
		ip netns add ntA 2>/dev/null
		ip netns add ntB 2>/dev/null
	fi
	wait_for 10 have_ntr "$LOCAL_DEV" || return 1
	config_side A "$LOCAL_DEV" "$A_IP" || return 1
	config_side B "$REMOTE_DEV" "$B_IP" || return 1
}

# Is there an ntrdma netdev for NTB device $1 in the root namespace (or on A)?
have_ntr() {
	local ifc
	for ifc in $(ls /sys/class/net); do
		[ "$(ethtool -i "$ifc" 2>/dev/null | sed -n 's/^bus-info: //p')" = "$1" ] && return 0
	done
	ip netns exec ntA true 2>/dev/null && [ -n "$(ntr_of A "$1")" ]
}

# Move the side's netdev into its namespace (loopback) and configure it.
config_side() { # SIDE NTBDEV IP
	local side=$1 dev=$2 ip=$3 ifc ns
	if ! is_pair; then
		ns=nt$side
		for ifc in $(ls /sys/class/net); do
			if [ "$(ethtool -i "$ifc" 2>/dev/null | sed -n 's/^bus-info: //p')" = "$dev" ]; then
				ip link set "$ifc" netns "$ns" || return 1
			fi
		done
	fi
	ifc=$(ntr_of "$side" "$dev")
	[ -n "$ifc" ] || return 1
	eval "IF$side=$ifc"
	${!side} "ip link set lo up; ip addr flush dev $ifc; ip addr add $ip/24 dev $ifc && ip link set $ifc up"
}

carrier_is() { # SIDE VALUE
	local side=$1 ifc
	ifc=IF$1
	[ "$(${!side} "cat /sys/class/net/${!ifc}/carrier" 2>/dev/null)" = "$2" ]
}
