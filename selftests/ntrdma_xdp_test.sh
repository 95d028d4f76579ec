#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# XDP on NTRDMA's Ethernet face, in native mode, driven by xdp-tools'
# xdp-bench on side B while side A sends: a program refused above the XDP
# MTU, XDP_PASS (ping and TCP; the peer then sends whole frames, so none is
# dropped as unfit), XDP_DROP (nothing reaches B's stack), XDP_TX (the
# frames come back to A), XDP_REDIRECT from ntr to a veth and from a veth
# into ntr (ndo_xdp_xmit), and the MTU bound while a program is attached.
# Each checks B's rx_xdp_* / tx_xdp_xmit counters (ethtool -S) against
# what the other end saw.
# Runs in flat mode (test bed: --flat 1) and in windowed mode (--flat 0).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/net.sh"

A_IP=10.78.3.1
B_IP=10.78.3.2
V_IP=10.78.4.1		# B's veth end vB0; 10.78.4.2 is a static neighbour
N=20			# frames per check
OUT=/tmp/xdp-bench

ktap_header
ktap_plan 9

need_ntb_pair
command -v xdp-bench >/dev/null ||
	skip_all "xdp-bench not installed (Debian package xdp-tools, scripts/install-deps.sh)"
net_sides

# ethtool -S counter NAME of side SIDE's ntr netdev.
xstat() { # SIDE NAME
	local ifc=IF$1
	${!1} "ethtool -S ${!ifc}" | awk -v n="$2:" '$1 == n { print $2 + 0; exit }'
}
rx_pkts() { ${!1} "cat /sys/class/net/$2/statistics/rx_packets"; } # SIDE IFACE
pings() { # SIDE ADDR: N pings 50 ms apart; exit 0 if all came back
	${!1} "ping -q -c $N -i 0.05 -W 1 $2 >/dev/null 2>&1"
}
native_on() { $B "ip link show dev $1" | grep -q 'prog/xdp '; } # IFACE

# xdp-bench ARGS on B in the background, until bench_stop; waits until its
# program is attached to IFACE in native mode.
bench_start() { # IFACE ARGS...
	local ifc=$1
	shift
	$B "xdp-bench $* </dev/null >$OUT.out 2>&1 & echo \$! >$OUT.pid"
	wait_for 15 native_on "$ifc" && return 0
	ktap_diag "xdp-bench $* did not attach to $ifc: $($B "tail -3 $OUT.out")"
	return 1
}
bench_stop() { # IFACE
	$B "kill -INT \$(cat $OUT.pid) 2>/dev/null; rm -f $OUT.pid"
	wait_for 10 eval "! native_on $1"
}
delta_ge() { [ $(($2 - $1)) -ge "$3" ]; } # BEFORE AFTER MIN

# 1
bring_up || fail_rest "ntrdma netdevs not configured"
ktap_check "ntr netdevs $IFA / $IFB up, ping" wait_for 15 pings A "$B_IP"

# 2: a program cannot attach at the default MTU (frames must fit a page).
mtu=$($B "cat /sys/class/net/$IFB/mtu")
$B "timeout 20 xdp-bench drop $IFB </dev/null >$OUT.big 2>&1"
rc=$?
ktap_diag "xdp-bench: exit $rc; $($B "tail -1 $OUT.big")"
ktap_check "XDP refused at MTU $mtu" eval "[ $rc != 0 ] && [ $rc != 124 ] && ! native_on $IFB"
$A "ip link set $IFA mtu 1500"
$B "ip link set $IFB mtu 1500"

# 3-4: XDP_PASS. B's program state reaches A, which then segments and
# checksums its frames itself: a TCP stream finds none unfit on B.
if bench_start "$IFB" pass "$IFB"; then
	p0=$(xstat B rx_xdp_pass) u0=$(xstat B rx_xdp_unfit)
	pings A "$B_IP"
	ok=$?
	IPERF_SECS=2 iperf_check ntr_xdp tcp_AtoB_xdp_pass "$B" "$A" "$B_IP" 5230
	p1=$(xstat B rx_xdp_pass) u1=$(xstat B rx_xdp_unfit)
	ktap_check "XDP_PASS: ping answered, rx_xdp_pass $p0 -> $p1, rx_xdp_unfit $u0 -> $u1" \
		eval "[ $ok = 0 ] && delta_ge $p0 $p1 $N && [ $u1 = $u0 ]"
	# 5: the MTU stays within what XDP takes while the program is on.
	ktap_check "MTU 9000 refused while a program is attached" eval "! $B 'ip link set $IFB mtu 9000 2>/dev/null'"
	bench_stop "$IFB"
else
	ktap_fail "XDP_PASS"
	ktap_skip "iperf3 tcp_AtoB_xdp_pass" "no program attached"
	ktap_skip "MTU 9000 refused while a program is attached" "no program attached"
fi

# 6: XDP_DROP: counted, and B's stack receives nothing.
if bench_start "$IFB" drop "$IFB"; then
	d0=$(xstat B rx_xdp_drop) r0=$(rx_pkts B "$IFB")
	pings A "$B_IP"
	ok=$?
	d1=$(xstat B rx_xdp_drop) r1=$(rx_pkts B "$IFB")
	ktap_check "XDP_DROP: ping unanswered, rx_xdp_drop $d0 -> $d1, B's stack took $((r1 - r0))" \
		eval "[ $ok != 0 ] && delta_ge $d0 $d1 $N && [ $r1 = $r0 ]"
	bench_stop "$IFB"
else
	ktap_fail "XDP_DROP"
fi

# With xdp-bench ARGS on IFACE of B, N pings from side FROM to ADDR must
# raise B's COUNTER by N, and IF's rx_packets on side SEEN by N.
xdp_forwards() { # NAME IFACE COUNTER SEEN IF FROM ADDR ARGS...
	local name=$1 ifc=$2 ctr=$3 seen=$4 sif=$5 from=$6 addr=$7 c0 c1 s0 s1
	shift 7
	if ! bench_start "$ifc" "$@"; then
		ktap_fail "$name"
		return
	fi
	c0=$(xstat B "$ctr") s0=$(rx_pkts "$seen" "$sif")
	pings "$from" "$addr"
	c1=$(xstat B "$ctr") s1=$(rx_pkts "$seen" "$sif")
	ktap_check "$name: $ctr $c0 -> $c1 on B, $sif received $((s1 - s0))" \
		eval "delta_ge $c0 $c1 $N && delta_ge $s0 $s1 $N"
	bench_stop "$ifc"
}

# 7: XDP_TX: B sends A's frames back (MACs swapped); A receives them.
xdp_forwards "XDP_TX" "$IFB" rx_xdp_tx A "$IFA" A "$B_IP" tx -p swap-macs "$IFB"

# 8-9: XDP_REDIRECT between ntr and a veth pair on B (vB0 - vB1; GRO on
# vB1 lets it take frames redirected to vB0). Then B's pings leave vB0 and
# vB1's program sends them into ntr (ndo_xdp_xmit), to A.
$B "ip link add vB0 type veth peer name vB1 && ip link set vB0 up &&
    ip link set vB1 up && ethtool -K vB1 gro on >/dev/null &&
    ip addr add $V_IP/24 dev vB0 &&
    ip neigh replace ${V_IP%.*}.2 lladdr 02:00:00:00:00:02 dev vB0 nud permanent" ||
	ktap_diag "veth pair on B not set up"
xdp_forwards "XDP_REDIRECT ntr -> veth" "$IFB" rx_xdp_redirect B vB1 A "$B_IP" \
	redirect "$IFB" vB0
xdp_forwards "XDP_REDIRECT veth -> ntr (ndo_xdp_xmit)" vB1 tx_xdp_xmit A "$IFA" \
	B "${V_IP%.*}.2" redirect vB1 "$IFB"
ktap_diag "tx_xdp_xmit_errors on B: $(xstat B tx_xdp_xmit_errors)"
$B "ip link del vB0" 2>/dev/null

modprobe -r ntrdma
is_pair && peer "modprobe -r ntrdma"
ip netns del ntA 2>/dev/null
ip netns del ntB 2>/dev/null
ktap_finish
