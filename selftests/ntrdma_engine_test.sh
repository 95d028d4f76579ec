#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA engine: the command channel (requests and responses both ways,
# in-order handling, more requests than ring slots, per-call timeouts, a late
# answer after a timeout, clean -ENOLINK for a pending call when the peer's
# driver goes away, and recovery), and the two copy paths (DMA_MEMCPY channel
# and CPU) carrying the same traffic. Uses debugfs ntrdma/<dev>/{info,cmd}.
# Runs in flat mode (test bed: --flat 1) and in windowed mode (--flat 0).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/net.sh"

NTB_DRV=/sys/bus/ntb/drivers/ntrdma
A_IP=10.79.0.1
B_IP=10.79.0.2

ktap_header
ktap_plan 14

need_ntb_pair

if is_pair; then
	A="sh -c"
	B="peer"
else
	A="sh -c"
	B="sh -c"
fi

# cmd SIDE REQUEST: send a request from that side, print its outcome line.
cmd() {
	local side=$1 d
	d=DBG$side
	${!side} "echo '$2' > ${!d}/cmd && tail -1 ${!d}/cmd"
}
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }

load() { # [params]
	load_ntrdma "$@" || return 1
	find_dbgs && wait_for 10 link_up
}
unload() {
	modprobe -r ntrdma
	if is_pair; then peer "modprobe -r ntrdma"; fi
	ip netns del ntA 2>/dev/null; ip netns del ntB 2>/dev/null
	true
}

# 1
ktap_check "ntrdma loaded on both sides, link up" load
# 2-3: echo both ways
out=$(cmd A "echo hello-from-A")
ktap_diag "A->B: $out"
ktap_check "command A->B answered (echo)" test "$(field rc <<< "$out")" = 0 -a \
	"$(field data <<< "$out")" = hello-from-A
out=$(cmd B "echo hello-from-B")
ktap_check "command B->A answered (echo)" test "$(field rc <<< "$out")" = 0 -a \
	"$(field data <<< "$out")" = hello-from-B

# 4: more concurrent requests than ring slots (16): all answered
s0=$(info_of A cmd_sent)
h0=$(info_of B cmd_handled)
for i in $(seq 1 40); do
	$A "echo 'echo n$i' > $DBGA/cmd" &
done
wait
s1=$(info_of A cmd_sent)
h1=$(info_of B cmd_handled)
t1=$(info_of A cmd_timeouts)
ktap_diag "sent $s0 -> $s1, peer handled $h0 -> $h1, timeouts $t1"
ktap_check "40 concurrent requests (ring of 16): all sent, all handled, no timeout" \
	test $((s1 - s0)) = 40 -a $((h1 - h0)) = 40 -a "$t1" = 0

# 5: an answered caller keeps its waiter until it took the answer. Held
# 2.5 s after its wake-up (inject "pause MS cmd_answer") while 16 more
# requests go round the ring of 16: the last of them takes its slot.
slot_reuse() {
	local first=echo-first-of-17 i out
	echo "pause 2500 cmd_answer" > "$DBGA/inject" || return 1
	$A "echo 'echo $first' > $DBGA/cmd" &
	sleep 0.5
	for i in $(seq 1 16); do
		$A "echo 'echo m$i' > $DBGA/cmd" &
	done
	wait
	echo "pause 0" > "$DBGA/inject"
	out=$(grep "^echo $first:" "$DBGA/cmd")
	ktap_diag "first: ${out:-not among the last 16: $(tr '\n' ';' < "$DBGA/cmd")}"
	test "$(field rc <<< "$out")" = 0 -a "$(field data <<< "$out")" = "$first" \
		-a "$(info_of A cmd_timeouts)" = 0
}
ktap_check "a request into the slot of an answer not yet taken waits: the answer intact" \
	slot_reuse

# 6: a slow answer within the timeout
out=$(cmd A "delay 300 3000")
us=$(field usecs <<< "$out")
ktap_check "delayed answer (300 ms) within the timeout: rc 0 after >= 300 ms ($us us)" \
	test "$(field rc <<< "$out")" = 0 -a "${us:-0}" -ge 300000

# 7: timeout
out=$(cmd A "delay 2000 400")
us=$(field usecs <<< "$out")
ktap_check "answer later than the timeout: -ETIMEDOUT (-110) after 400-1500 ms ($us us)" \
	test "$(field rc <<< "$out")" = -110 -a "${us:-0}" -ge 400000 -a "${us:-0}" -lt 1500000

# 8: the late answer is dropped; the channel still works
sleep 2
out=$(cmd A "echo after-late")
ktap_check "after a late answer the channel still works" \
	test "$(field rc <<< "$out")" = 0 -a "$(field data <<< "$out")" = after-late

# 9: a pending call fails with -ENOLINK when the peer's driver goes away
$A "echo 'delay 4000 10000' > $DBGA/cmd" &
pending=$!
sleep 0.5
if is_pair; then
	peer "modprobe -r ntrdma" &
else
	echo "$REMOTE_DEV" > $NTB_DRV/unbind &
fi
t0=$SECONDS
wait $pending
out=$($A "tail -1 $DBGA/cmd")
us=$(field usecs <<< "$out")
ktap_check "pending call when the peer unloads: -ENOLINK (-67) before its 4 s answer ($us us)" \
	test "$(field rc <<< "$out")" = -67 -a "${us:-9999999}" -lt 3500000
wait

# 10: no session: fails at once
out=$(cmd A "echo nobody")
ktap_check "no session: -ENOLINK at once" test "$(field rc <<< "$out")" = -67

# 11: back
if is_pair; then
	peer "modprobe ntrdma"
else
	echo "$REMOTE_DEV" > $NTB_DRV/bind
fi
DBGB=""
b_dbg_ready() { [ -n "$(dbg_of B "$REMOTE_DEV")" ]; }
wait_for 10 b_dbg_ready
DBGB=$(dbg_of B "$REMOTE_DEV")
wait_for 10 link_up
out=$(cmd A "echo again")
ktap_check "peer back: commands answered again" test "$(field rc <<< "$out")" = 0

# 12-13: DMA and CPU copies carry the same traffic
setup_net() {
	local ia ib
	ia=$(for i in $(ls /sys/class/net); do
		[ "$(ethtool -i $i 2>/dev/null | sed -n 's/^bus-info: //p')" = "$LOCAL_DEV" ] && echo $i; done)
	ib=$($B "for i in \$(ls /sys/class/net); do
		[ \"\$(ethtool -i \$i 2>/dev/null | sed -n 's/^bus-info: //p')\" = $REMOTE_DEV ] && echo \$i; done")
	if is_pair; then
		SA="sh -c"; SB="peer"
	else
		ip netns add ntA; ip netns add ntB
		ip link set "$ia" netns ntA; ip link set "$ib" netns ntB
		SA="ip netns exec ntA sh -c"; SB="ip netns exec ntB sh -c"
	fi
	$SA "ip link set lo up; ip addr add $A_IP/24 dev $ia && ip link set $ia up" &&
	$SB "ip link set lo up; ip addr add $B_IP/24 dev $ib && ip link set $ib up" &&
	wait_for 10 $SA "ping -c 1 -W 1 $B_IP >/dev/null"
}
for mode in dma cpu; do
	unload
	if [ $mode = dma ]; then load; else load use_dma=0; fi
	copy=$(info_of A copy)
	if [ $mode = dma ] && [ "$copy" = cpu ]; then
		ktap_skip "copies by a DMA_MEMCPY channel" "no DMA_MEMCPY channel on this host"
		continue
	fi
	if ! setup_net; then
		ktap_fail "$mode copy ($copy): ntr traffic"
		continue
	fi
	iperf_check ntr_engine "${mode}_tcp_AtoB" "$SB" "$SA" "$B_IP" 5210
	ktap_diag "copy path: $copy"
done
unload

# 14: an unloaded driver leaves no session published in the peer's
# scratchpads: a later instance of the peer's driver would take the inbox
# address in it (freed by then) for a live one. Read through ntb_tool.
spad_of() { # SIDE NTBDEV INDEX
	${!1} "cat $DEBUGFS/ntb_tool/$2/spad$3 2>/dev/null"
}
if modprobe ntb_tool && { ! is_pair || peer modprobe ntb_tool; }; then
	ma=$(spad_of A "$LOCAL_DEV" 0); ea=$(spad_of A "$LOCAL_DEV" 2)
	mb=$(spad_of B "$REMOTE_DEV" 0); eb=$(spad_of B "$REMOTE_DEV" 2)
	ktap_diag "after unload: A magic=$ma epoch=$ea, B magic=$mb epoch=$eb"
	all_zero() { local v; for v; do [ -n "$v" ] && [ $((v)) -eq 0 ] || return 1; done; }
	ktap_check "after unload no scratchpad publishes a session (magic and epoch 0)" \
		all_zero "$ma" "$ea" "$mb" "$eb"
else
	ktap_fail "after unload no scratchpad publishes a session (ntb_tool did not load)"
fi
modprobe -r ntb_tool
if is_pair; then peer "modprobe -r ntb_tool"; fi
ktap_finish
