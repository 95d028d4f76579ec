#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ntb_netdev over ntb_transport over our NTB hardware: ping and iperf3 TCP in
# both directions, between two network namespaces (loopback NTB: both ports on
# this host) or between the two hosts (pair).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/net.sh"

IPERF_SECS=${IPERF_SECS:-5}
A_IP=10.77.0.1
B_IP=10.77.0.2

# ntb_netdev interfaces on this host (driver name from ethtool -i)
ntb_ifaces() {
	local i
	for i in $(ls /sys/class/net); do
		ethtool -i "$i" 2>/dev/null | grep -q '^driver: ntb_netdev' && echo "$i"
	done
}

ktap_header
ktap_plan 7
if ! install_modules; then
	ktap_fail "install modules"
	ktap_finish
fi

modprobe ntb_netdev && { ! is_pair || peer modprobe ntb_netdev; }
ktap_check "modprobe ntb_netdev (ntb_transport) on both ports" test $? -eq 0

if is_pair; then
	ifa=$(ntb_ifaces | head -1)
	ifb=$(peer "for i in \$(ls /sys/class/net); do ethtool -i \$i 2>/dev/null | grep -q '^driver: ntb_netdev' && echo \$i; done" | head -1)
	A="sh -c"
	B="peer"
else
	set -- $(ntb_ifaces)
	ifa=$1
	ifb=$2
	ip netns add ntA && ip netns add ntB
	[ -n "$ifa" ] && ip link set "$ifa" netns ntA
	[ -n "$ifb" ] && ip link set "$ifb" netns ntB
	A="ip netns exec ntA sh -c"
	B="ip netns exec ntB sh -c"
fi
ktap_diag "interfaces: A=$ifa B=$ifb"

setup_ok=1
if [ -z "$ifa" ] || [ -z "$ifb" ]; then
	setup_ok=0
else
	$A "ip link set lo up; ip addr add $A_IP/24 dev $ifa && ip link set $ifa up" || setup_ok=0
	$B "ip link set lo up; ip addr add $B_IP/24 dev $ifb && ip link set $ifb up" || setup_ok=0
fi
ktap_check "two ntb_netdev interfaces configured" test $setup_ok -eq 1

carrier() { [ "$($A "cat /sys/class/net/$ifa/carrier" 2>/dev/null)" = 1 ]; }
ktap_check "carrier up within 20 s" wait_for 20 carrier

ktap_check "ping A->B" $A "ping -c 3 -W 2 $B_IP >/dev/null"
ktap_check "ping B->A" $B "ping -c 3 -W 2 $A_IP >/dev/null"

iperf_check ntb_netdev_iperf3 tcp_AtoB "$B" "$A" "$B_IP" 5201
iperf_check ntb_netdev_iperf3 tcp_BtoA "$A" "$B" "$A_IP" 5201

# cleanup
if ! is_pair; then
	ip netns del ntA 2>/dev/null
	ip netns del ntB 2>/dev/null
fi
modprobe -r ntb_netdev ntb_transport 2>/dev/null
is_pair && peer "modprobe -r ntb_netdev ntb_transport" 2>/dev/null
ktap_finish
