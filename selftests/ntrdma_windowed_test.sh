#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ntrdma on an NTB without a flat window (the stock clients' topology,
# --flat 0: two 4 MiB windows, no window onto the peer's RAM): the NTB
# refuses translation 0 at link-up, so ntrdma runs in windowed mode (its
# inbox and receive buffers in a coherent buffer the window translates to,
# ntrdma_rxmem.c), says so in dmesg and debugfs, brings the link up, and
# both faces carry traffic: ping and iperf3 over ntr (loop: the two
# netdevs in two namespaces), ibv_rc_pingpong, ib_write_bw, ib_read_bw and
# ib_send_bw, with no WRITE placed directly (the window reaches no MR).
# Unloads cleanly. Uses debugfs ntrdma/<dev>/info (mode, window_size, link).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

NTESTS=7
ktap_header
ktap_plan $NTESTS

install_modules
# Other NTB clients of this run leave the NTB to ntrdma.
clients="ntb_netdev ntb_transport ntb_perf ntb_pingpong ntb_tool ntb_msi_test"
modprobe -r $clients 2>/dev/null
is_pair && peer "modprobe -r $clients 2>/dev/null"
if ! wait_for 20 ntb_pair; then
	fail_rest "no NTB pair"
fi
if [ -d "$DEBUGFS/ntb_hw_ivshmem" ] && grep -q '^Y' /sys/module/ntb_hw_ivshmem/parameters/flat_window; then
	ktap_skip_rest "windowed mode" "the NTB has a flat window (run with --flat 0)"
fi

both_up() { [ "$(ntrdma_info "sh -c" "$DA" link)" = up ] && [ "$(ntrdma_info peer "$DB" link)" = up ]; }

mark=$(dmesg | wc -l)
modprobe ntrdma
rc=$?
if is_pair; then peer "modprobe ntrdma" || rc=1; fi
ktap_check "modprobe ntrdma binds the NTB (both hosts)" test $rc = 0

wait_for 10 eval '[ -n "$(ntrdma_dir "sh -c" "$LOCAL_DEV")" ]'
DA=$(ntrdma_dir "sh -c" "$LOCAL_DEV")
DB=$(ntrdma_dir peer "$REMOTE_DEV")
wait_for 20 both_up
dmesg | tail -n +"$((mark + 1))" | grep -E "ntrdma[0-9]+: (windowed mode|link up|MW)" | sed 's/^/# /'
ma=$(ntrdma_info "sh -c" "$DA" mode) mb=$(ntrdma_info peer "$DB" mode)
wa=$(ntrdma_info "sh -c" "$DA" window_size)
ktap_check "windowed mode on both ends (mode: $ma / $mb, window buffer ${wa:-?} bytes), said in dmesg, link up" \
	eval '[ "$ma" = windowed ] && [ "$mb" = windowed ] && [ "${wa:-0}" -gt 0 ] &&
	      dmesg | tail -n +"$((mark + 1))" | grep -q "windowed mode: " && both_up'

# Ethernet: loop: each netdev in its own namespace; pair: one per host.
A="sh -c" B="peer" A_IP=10.77.0.1 B_IP=10.77.0.2
if is_pair; then
	pair_addrs $A_IP $B_IP
else
	A="ip netns exec ntA sh -c" B="ip netns exec ntB sh -c"
	ip netns add ntA 2>/dev/null
	ip netns add ntB 2>/dev/null
	NA=$(netdev_of "$LOCAL_DEV") NB=$(netdev_of "$REMOTE_DEV")
	ip link set "$NA" netns ntA && ip link set "$NB" netns ntB
	$A "ip addr add $A_IP/24 dev $NA && ip link set $NA up && ip link set lo up"
	$B "ip addr add $B_IP/24 dev $NB && ip link set $NB up && ip link set lo up"
fi
wait_for 15 $A "ping -c1 -W1 $B_IP >/dev/null 2>&1"
out=$($A "ping -q -c 20 -i 0.05 -s 1400 -W 2 $B_IP" 2>&1)
ktap_diag "$(grep -E 'transmitted' <<<"$out")"
ktap_check "ping over ntr: 20 of 20 replies" eval 'grep -q " 20 received" <<<"$out"'

$B "iperf3 -s -1 -D -p 5209 >/dev/null 2>&1"
sleep 1
out=$($A "timeout 30 iperf3 -c $B_IP -p 5209 -t 5 -f g" 2>&1)
gbps=$(awk '/receiver/ { print $(NF-2) }' <<<"$out")
ktap_diag "iperf3 TCP 5 s over ntr in windowed mode: ${gbps:-none} Gbit/s (emulated link; not a bench)"
metric windowed_iperf3_tcp_Gbps "${gbps:-0}" Gbit/s
ktap_check "iperf3 TCP over ntr moves data" eval 'awk -v g="${gbps:-0}" "BEGIN { exit !(g > 0) }"'
if ! is_pair; then
	$A "ip link set $NA netns 1"
	$B "ip link set $NB netns 1"
	ip netns del ntA 2>/dev/null
	ip netns del ntB 2>/dev/null
fi

# Verbs: the tools against the peer's ib device.
find_ibdevs && install_provider
SERVER_IP=127.0.0.1
is_pair && SERVER_IP=$B_IP
counter() { cat "/sys/class/infiniband/$IBDEV/ports/1/hw_counters/$1" 2>/dev/null || echo 0; }

tool_pair() { # PORT SERVER-COMMAND CLIENT-COMMAND: both exit 0
	peer "timeout 60 $2 -p $1 >/tmp/wt_srv.log 2>&1" &
	local srv=$! rc
	sleep 2
	timeout 60 $3 -p "$1" "$SERVER_IP" >/tmp/wt_cli.log 2>&1
	rc=$?
	wait $srv || rc=1
	[ $rc = 0 ] && return 0
	ktap_diag "$3: $(tail -2 /tmp/wt_cli.log | tr '\n' ' ') / server: $(peer 'tail -2 /tmp/wt_srv.log' | tr '\n' ' ')"
	return 1
}

# perftest 64 KiB x 200; its clock failing on a busy guest is the tool's
# (perftest_retry, lib/verbs.sh).
perftest_once() { # TOOL PORT
	tool_pair "$2" "$1 -d $PEER_IBDEV -s 65536 -n 200" "$1 -d $IBDEV -s 65536 -n 200"
}

ktap_check "ibv_rc_pingpong 64 KiB x 200 in windowed mode" \
	tool_pair 18710 "ibv_rc_pingpong -d $PEER_IBDEV -s 65536 -n 200" \
	"ibv_rc_pingpong -d $IBDEV -s 65536 -n 200"
placed0=$(counter placed_writes)
rc=0
port=18720
for t in ib_write_bw ib_read_bw ib_send_bw; do
	perftest_retry perftest_once /tmp/wt_cli.log /tmp/wt_srv.log $t $port ||
		{ rc=1; ktap_diag "$t failed"; }
	port=$((port + 40))
done
placed1=$(counter placed_writes)
ktap_check "ib_write_bw, ib_read_bw, ib_send_bw 64 KiB x 200 in windowed mode, no WRITE placed directly (placed_writes $placed0 -> $placed1)" \
	test $rc = 0 -a "$placed1" = "$placed0"

name=$(basename "${DA:-none}")
timeout 60 modprobe -r ntrdma
rc=$?
if is_pair; then peer "timeout 60 modprobe -r ntrdma" || rc=1; fi
ktap_check "modprobe -r ntrdma (both hosts)" test $rc = 0 -a ! -d "$DEBUGFS/ntrdma/$name"

ktap_finish
