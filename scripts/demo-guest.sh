#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs in test-bed guest a (two-guest topology, flat window): load ntrdma on
# both hosts, bring ntr0 up with addresses, ping, iperf3 both ways, then
# the RDMA face between the same hosts (ib_write_bw, ib_read_lat, rping over
# rdma_cm), and print a result table. Called by scripts/demo.sh.
set -u
. "$NTRDMA_ROOT/selftests/lib/ktap.sh"
. "$NTRDMA_ROOT/selftests/lib/env.sh"
. "$NTRDMA_ROOT/selftests/lib/verbs.sh"
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

# ---- the RDMA face: unmodified perftest and rping between a and b ----
install_provider && ntb_pair && find_ibdevs && modprobe rdma_ucm && peer "modprobe rdma_ucm" ||
	{ row "RDMA face" "FAIL: no ib devices or provider"; exit 1; }
# perf_row LABEL TEST COLUMN UNIT ARGS...: server on b, client on a; tried
# again when perftest cannot fit its clock ("Can't produce a report").
perf_row() {
	local label=$1 t=$2 col=$3 unit=$4 port out v try
	shift 4
	for try in 1 2 3; do
		port=$((18500 + try))
		peer "(timeout 60 ib_$t -d $PEER_IBDEV -F -p $port $* >/dev/null 2>&1 &)"
		sleep 2
		out=$(timeout 60 ib_$t -d "$IBDEV" -F -p $port "$@" $B_IP 2>&1)
		grep -q "Can't produce a report" <<<"$out" || break
	done
	v=$(perf_figure "$out" "$col")
	[ -n "$v" ] || rc=1
	row "$label" "${v:-FAIL} $unit"
}
perf_row "ib_write_bw 64 KiB a -> b (RDMA WRITE)" write_bw '^BW.average' MB/s -s 65536 -n 2000
perf_row "ib_read_lat 2 B a -> b (RDMA READ)" read_lat '^t_typical' usec -s 2 -n 1000
peer "(timeout 60 rping -s -a $B_IP -p 18600 -C 10 -S 256 -V >/dev/null 2>&1 &)"
sleep 2
n=$(timeout 60 rping -c -a $B_IP -p 18600 -C 10 -S 256 -V -v 2>&1 | grep -c 'ping data')
[ "$n" = 10 ] || rc=1
row "rping a -> b (rdma_cm, data verified)" "$n of 10 round trips"
echo
echo "(emulated NTB under TCG: compare ratios, not absolute figures)"
exit $rc
