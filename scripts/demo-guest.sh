#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs in test-bed guest a (two-guest topology, flat window): load ntrdma on
# both hosts, bring ntr0 up with addresses, ping, iperf3 both ways, and
# print a result table. Called by scripts/demo.sh.
set -u
. "$NTRDMA_ROOT/selftests/lib/ktap.sh"
. "$NTRDMA_ROOT/selftests/lib/env.sh"
A_IP=10.79.0.1
B_IP=10.79.0.2
row() { printf '| %-40s | %s |\n' "$1" "$2"; }
gbps() { jq -r '.end.sum_received.bits_per_second / 1e9 * 1000 | floor / 1000'; }

install_modules >/dev/null 2>&1 || { echo "demo: cannot install modules"; exit 1; }
modprobe ntrdma && peer "modprobe ntrdma" || { echo "demo: modprobe ntrdma failed"; exit 1; }
ip addr add $A_IP/24 dev ntr0 && ip link set ntr0 up
peer "ip addr add $B_IP/24 dev ntr0 && ip link set ntr0 up"
up() { [ "$(cat /sys/class/net/ntr0/carrier 2>/dev/null)" = 1 ]; }
wait_for 10 up
rc=0
echo
echo "| step | result |"
echo "|---|---|"
row "ntr0 carrier (host a)" "$(cat /sys/class/net/ntr0/carrier)"
row "engine link (debugfs)" "$(sed -n 's/^link: //p' /sys/kernel/debug/ntrdma/ntrdma0/info)"
if p=$(ping -c 5 -W 2 $B_IP | sed -n 's/.*= [0-9.]*\/\([0-9.]*\)\/.*/\1/p') && [ -n "$p" ]; then
	row "ping a -> b, avg rtt" "$p ms"
else
	row "ping a -> b" FAIL; rc=1
fi
peer "iperf3 -s -1 -D -p 5205 >/dev/null 2>&1"; sleep 1
g=$(iperf3 -J -c $B_IP -p 5205 -t 5 | gbps)
row "iperf3 TCP a -> b" "${g:-FAIL} Gbit/s"
iperf3 -s -1 -D -p 5206 >/dev/null 2>&1; sleep 1
g2=$(peer "iperf3 -J -c $A_IP -p 5206 -t 5" | gbps)
row "iperf3 TCP b -> a" "${g2:-FAIL} Gbit/s"
[ -n "$g" ] && [ -n "$g2" ] || rc=1
s=$(ip -s -j link show ntr0 | jq -r '.[0].stats64 | "tx \(.tx.packets) rx \(.rx.packets) dropped \(.tx.dropped + .rx.dropped) errors \(.tx.errors + .rx.errors)"')
row "ntr0 counters (host a)" "$s"
echo
echo "(emulated NTB under TCG: compare ratios, not absolute figures)"
exit $rc
