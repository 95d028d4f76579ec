#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA's Ethernet face (ntr%d): ping, iperf3 TCP (1 and 4 streams, both
# ways) and UDP, MTU changes, ifdown/ifup, a 256 MiB transfer checked with
# sha256 on both ends, counters that add up, carrier loss and recovery when
# the peer's driver goes away (and, with two hosts, when the peer host is
# killed), local unload under traffic, load/unload cycles without leaks,
# and netconsole over ntr0.
# Runs in flat mode (test bed: --flat 1) and in windowed mode (--flat 0).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/net.sh"

IPERF_SECS=${IPERF_SECS:-4}
# Load/unload cycles under traffic: 6 tell a leaked session (32 MiB per
# side) or a refcount (make check runs 3); make soak's 100 cycles, with
# peer kills, are the long form (NTRDMA_CYCLES=N for more here).
CYCLES=${NTRDMA_CYCLES:-6}
A_IP=10.78.0.1
B_IP=10.78.0.2
NTB_DRV=/sys/bus/ntb/drivers/ntrdma

ktap_header
ktap_plan 38

need_ntb_pair

net_sides

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

ping_ok() { $A "ping -c 2 -W 2 $B_IP >/dev/null" && $B "ping -c 2 -W 2 $A_IP >/dev/null"; }

# Abort the TCP sockets of the iperf3 runs on PORT on both sides. A
# connection whose link vanished under it (the unload subtests) is left
# orphaned with its unsent data, retrying for minutes, even after its
# namespace is deleted: on 6.12 twenty such cycles hold ~54 MB of TCP
# memory, and TCP in the whole guest then runs under memory pressure at a
# few Mbit/s. Call before deleting the namespaces (loop).
drop_tcp() { # PORT
	local f="'( sport = :$1 or dport = :$1 )'"
	pkill iperf3 2>/dev/null
	is_pair && peer "pkill iperf3" 2>/dev/null
	$A "ss -K -t state all $f >/dev/null 2>&1"
	$B "ss -K -t state all $f >/dev/null 2>&1"
}

# 1
bring_up
DOWNS0=$(cat $DEBUGFS/ntrdma/*/info 2>/dev/null | awk '/^link_down_events/ { n += $2 } END { print n + 0 }')
ktap_check "ntrdma loaded; ntr netdevs on both ports ($IFA / $IFB)" \
	test -n "${IFA:-}" -a -n "${IFB:-}"
if [ -z "${IFA:-}" ] || [ -z "${IFB:-}" ]; then
	ktap_finish
fi
# 2
both_carrier() { carrier_is A 1 && carrier_is B 1; }
ktap_check "carrier up on both within 5 s" wait_for 5 both_carrier
# 3
ktap_check "ping both ways" ping_ok
# 4-9, and the receiver's page allocations during the first stream: its
# buffers are pages of a page_pool that the stack frees back into, so a
# received frame costs no new page (a fresh 64 KiB buffer per frame costs
# two bytes of new pages per byte). One host in loop: the sender's pages
# would count too.
pgalloc() { $B "awk '/^pgalloc_/ { n += \$2 } END { print n + 0 }' /proc/vmstat"; }
rxbytes() { $B "cat /sys/class/net/$IFB/statistics/rx_bytes"; }
pg0=$(pgalloc) rx0=$(rxbytes)
iperf_check ntr_iperf3 tcp_AtoB "$B" "$A" "$B_IP" 5202
pg=$(( $(pgalloc) - pg0 )) rx=$(( $(rxbytes) - rx0 ))
if is_pair; then
	metric ntr_rx_new_page_bytes_per_MiB $((pg * 4096 / (rx / 1048576 + 1))) bytes
	ktap_check "receiver: $pg new pages for $rx bytes (recycled buffers)" \
		test $((pg * 4096)) -lt $((rx / 2))
else
	ktap_skip "receiver's new pages" "one host: the sender's pages count too"
fi
iperf_check ntr_iperf3 tcp_BtoA "$A" "$B" "$A_IP" 5202
iperf_check ntr_iperf3 tcp4_AtoB "$B" "$A" "$B_IP" 5202 -P 4
iperf_check ntr_iperf3 tcp4_BtoA "$A" "$B" "$A_IP" 5202 -P 4
iperf_check ntr_iperf3 udp_AtoB "$B" "$A" "$B_IP" 5202 -u -b 2G -l 8000

# Small datagrams: each must not cost the receiver a 64 KiB buffer
# (copybreak), or a socket's receive buffer (rmem_default, 208 KiB) fills
# with a handful of them. B binds a UDP socket and does not read it while A
# sends 400 datagrams of 64 bytes, then counts what the socket held. The
# same with ethtool's rx-copybreak tunable at 0 shows the count tells the
# two apart.
udp_held() { # COPYBREAK
	local out=/tmp/ntr_udp_held.$$ held pid
	$B "ethtool --set-tunable $IFB rx-copybreak $1"
	$B "python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((\"$B_IP\", 5206)); time.sleep(4); s.setblocking(False); n = 0
while True:
    try: s.recv(256)
    except BlockingIOError: break
    n += 1
print(n)'" >"$out" 2>/dev/null &
	pid=$!
	sleep 1
	$A "python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(400):
    s.sendto(bytes(64), (\"$B_IP\", 5206)); time.sleep(0.001)'"
	wait "$pid"
	held=$(cat "$out"); rm -f "$out"
	$B "ethtool --set-tunable $IFB rx-copybreak 256"
	echo "${held:-0}"
}
# The tunable: the default reads back, a value past the largest frame is
# refused and changes nothing, 0 reads back.
cb_get() { $B "ethtool --get-tunable $IFB rx-copybreak" 2>/dev/null | awk '/rx-copybreak/ { print $NF }'; }
cb_def=$(cb_get)
$B "ethtool --set-tunable $IFB rx-copybreak 70000" >/dev/null 2>&1
cb_rc=$?
cb_big=$(cb_get)
$B "ethtool --set-tunable $IFB rx-copybreak 0" >/dev/null 2>&1
cb_zero=$(cb_get)
$B "ethtool --set-tunable $IFB rx-copybreak 256" >/dev/null 2>&1
ktap_check "ethtool rx-copybreak: default ${cb_def:-none}, 70000 refused (exit $cb_rc, still ${cb_big:-none}), 0 reads back (${cb_zero:-none})" \
	test "${cb_def:-x}" = 256 -a "$cb_rc" != 0 -a "${cb_big:-x}" = 256 -a "${cb_zero:-x}" = 0
held=$(udp_held 256)
held0=$(udp_held 0)
metric ntr_udp64_held "$held" "of 400"
ktap_check "64-byte datagrams to an unread socket: $held of 400 held (copybreak; at least 100)" \
	test "$held" -ge 100
# Windowed mode copies every frame out of its piece of the window
# (ntrdma_rxmem.c): there rx-copybreak 0 changes nothing.
windowed=0
ntrdma_windowed && windowed=1
if [ "$windowed" = 1 ]; then
	ktap_check "windowed mode, rx-copybreak 0: $held0 held (every frame copied: at least 100)" \
		test "$held0" -ge 100
else
	ktap_check "the same with rx-copybreak 0: $held0 held (64 KiB each; under 20)" \
		test "$held0" -lt 20
fi

# 9: MTU changes
mtu_ok=1
for m in 1500 9000 64000; do
	$A "ip link set $IFA mtu $m" && $B "ip link set $IFB mtu $m" || mtu_ok=0
	$A "ping -c 2 -W 2 -M do -s $((m - 28)) $B_IP >/dev/null" || mtu_ok=0
done
ktap_check "MTU 1500/9000/64000: full-size unfragmented pings" test $mtu_ok = 1
$A "ip link set $IFA mtu 65536"; $B "ip link set $IFB mtu 65536"

# 10: ifdown/ifup
$A "ip link set $IFA down" && $A "ip link set $IFA up" &&
	$A "ip addr replace $A_IP/24 dev $IFA"
ktap_check "ifdown/ifup: carrier and traffic back" \
	wait_for 5 ping_ok

# 11: carrier and session agree: A's carrier work, which turns the carrier
# on (B's netdev came up), is held open for 1 s (the inject "pause MS
# carrier") while A's session stops; A's carrier ends off.
DBG_A=$(grep -l "^ntb: $LOCAL_DEV\$" "$DEBUGFS"/ntrdma/*/info 2>/dev/null |
	head -1 | xargs -r dirname)
if [ -z "$DBG_A" ] || [ ! -w "$DBG_A/inject" ]; then
	ktap_fail "carrier off after a session stop that met a carrier update (no inject file for $LOCAL_DEV)"
else
	$B "ip link set $IFB down"
	wait_for 5 carrier_is A 0
	echo "pause 1000 carrier" > "$DBG_A/inject"
	$B "ip link set $IFB up"
	sleep 0.2
	echo link_off > "$DBG_A/inject"
	sleep 2
	c=$($A "cat /sys/class/net/$IFA/carrier" 2>/dev/null)
	echo "pause 0" > "$DBG_A/inject"
	echo link_on > "$DBG_A/inject"
	ktap_check "carrier off after a session stop that met a carrier update (carrier ${c:-?})" \
		test "$c" = 0
	wait_for 20 ping_ok || ktap_diag "no ping 20 s after link_on"
fi

# 12: 256 MiB with sha256 on both ends
$A "head -c 268435456 /dev/urandom > /tmp/ntr.blob && sha256sum < /tmp/ntr.blob | cut -d' ' -f1 > /tmp/ntr.sha"
$B "rm -f /tmp/ntr.rx.sha; (busybox nc -l -p 5301 | sha256sum | cut -d' ' -f1 > /tmp/ntr.rx.sha) >/dev/null 2>&1 &"
sleep 1
t0=$(now_ms)
$A "bash -c 'cat /tmp/ntr.blob > /dev/tcp/$B_IP/5301'"
wait_for 20 $B "test -s /tmp/ntr.rx.sha"
ms=$(( $(now_ms) - t0 ))
sa=$($A "cat /tmp/ntr.sha")
sb=$($B "cat /tmp/ntr.rx.sha" 2>/dev/null)
metric ntr_256MiB_transfer_ms "$ms" ms
ktap_check "256 MiB TCP transfer: sha256 equal on both ends (${sa:0:12})" \
	test -n "$sa" -a "$sa" = "$sb"

# BQL: the transmit queue's in-flight bytes return to 0 once traffic stops:
# every frame counted as sent was reported completed (a lost completion
# would leave it above 0 and in the end stall the queue).
bql() { ${!1} "cat /sys/class/net/${2}/queues/tx-0/byte_queue_limits/$3"; }
bql_idle() { [ "$(bql A "$IFA" inflight)" = 0 ]; }
wait_for 5 bql_idle
ktap_check "BQL: in-flight bytes back to 0 after traffic (limit $(bql A "$IFA" limit))" \
	bql_idle

# 13: counters add up: what A sent B received. Frames in flight when a
# session ends are lost, as on any link that goes down: the receiver counts
# those it saw completed as dropped, those written after it left are lost
# on the "wire". Without a link loss everything must match exactly.
stats() { ${!1} "ip -s -j link show ${2}" | jq -r '.[0].stats64 |
	"\(.tx.packets) \(.rx.packets) \(.rx.dropped) \(.tx.errors + .rx.errors)"'; }
downs() { cat $DEBUGFS/ntrdma/*/info | awk '/^link_down_events/ { n += $2 } END { print n + 0 }'; }
# A consistent snapshot: background frames (IPv6 neighbour discovery...) may
# cross between two reads, so retry until A's counters did not move across
# the read of B's.
for try in 1 2 3 4 5; do
	a1=$(stats A "$IFA")
	b1=$(stats B "$IFB")
	[ "$(stats A "$IFA")" = "$a1" ] && break
	sleep 0.5
done
read -r atx arx adrop aerr <<< "$a1"
read -r btx brx bdrop berr <<< "$b1"
flaps=$(( $(downs) - DOWNS0 ))
ktap_diag "A tx $atx rx $arx dropped $adrop errors $aerr; B tx $btx rx $brx dropped $bdrop errors $berr; link losses since start: $flaps"
if [ "$flaps" = 0 ]; then
	ktap_check "counters: A tx = B rx and back, no drops, no errors" \
		test "$atx" = "$brx" -a "$btx" = "$arx" -a $((adrop + bdrop + aerr + berr)) = 0
else
	ktap_check "counters after $flaps link loss(es): A tx >= B rx + dropped and back, no errors" \
		test "$atx" -ge $((brx + bdrop)) -a "$btx" -ge $((arx + adrop)) -a $((aerr + berr)) = 0
fi

# 14-15: the peer's driver goes away and comes back
t0=$(now_ms)
if is_pair; then
	peer "modprobe -r ntrdma" &
else
	echo "$REMOTE_DEV" > $NTB_DRV/unbind &
fi
if wait_for 2 carrier_is A 0; then
	ms=$(( $(now_ms) - t0 ))
	metric ntr_carrier_off_after_peer_unload_ms "$ms" ms
	ktap_pass "peer driver unloaded: local carrier off in ${ms} ms"
else
	ktap_fail "peer driver unloaded: carrier still on after 2 s"
fi
wait
if is_pair; then
	peer "modprobe ntrdma"
else
	echo "$REMOTE_DEV" > $NTB_DRV/bind
fi
sleep 1
config_side B "$REMOTE_DEV" "$B_IP"
ktap_check "peer driver reloaded: carrier and traffic back" \
	wait_for 10 ping_ok

# 16: peer host killed (two hosts only)
if [ "${NTRDMA_TOPO:-}" = pair ]; then
	t0=$(now_ms)
	testbed-ctl kill-peer >/dev/null
	if wait_for 3 carrier_is A 0; then
		ms=$(( $(now_ms) - t0 ))
		metric ntr_carrier_off_after_peer_kill_ms "$ms" ms
		down=1
	else
		down=0
	fi
	testbed-ctl start-peer >/dev/null && install_modules &&
		peer "modprobe ntrdma" && sleep 1 &&
		config_side B "$REMOTE_DEV" "$B_IP" && wait_for 15 ping_ok && up=1 || up=0
	ktap_check "peer host killed: carrier off (${ms:-?} ms), back after the peer reboots" \
		test $down = 1 -a $up = 1
else
	ktap_skip "peer host killed" "loopback: the peer is this host"
fi

# 17: local unload during iperf3
$B "iperf3 -s -1 -D -p 5203 >/dev/null 2>&1"
sleep 1
$A "iperf3 -c $B_IP -p 5203 -t 30 >/dev/null 2>&1 &"
sleep 3
modprobe -r ntrdma; rc=$?
drop_tcp 5203
is_pair || { ip netns del ntA 2>/dev/null; ip netns del ntB 2>/dev/null; }
ktap_check "local unload during iperf3: clean" test $rc = 0

# 18: the link returns after the local reload
bring_up
ktap_check "local reload: carrier and traffic back" wait_for 10 ping_ok

# 19-20: load/unload cycles under traffic, no leaks
# Receive buffers are ~66 KiB kmallocs (page allocator, not slab): one
# leaked session is 32 MiB per side. Over the cycles free memory may drift by
# a few MiB (namespace teardown is asynchronous), far below a buffer leak:
# allow 8 MiB per cycle on average (caches dropped both times).
mem_kb() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo
}
refs() { cat /sys/module/ntb/refcnt /sys/module/ntb_hw_ivshmem/refcnt 2>/dev/null | xargs; }
modprobe -r ntrdma
ip netns del ntA 2>/dev/null; ip netns del ntB 2>/dev/null
r0=$(refs)
s0=$(mem_kb)
cyc_ok=0
for ((i = 0; i < CYCLES; i++)); do
	bring_up || break
	$B "iperf3 -s -1 -D -p 5204 >/dev/null 2>&1"
	$A "(timeout 5 iperf3 -c $B_IP -p 5204 -t 3 >/dev/null 2>&1 &)"
	sleep 0.5
	is_pair && peer "modprobe -r ntrdma"
	modprobe -r ntrdma || break
	drop_tcp 5204
	ip netns del ntA 2>/dev/null; ip netns del ntB 2>/dev/null
	cyc_ok=$((cyc_ok + 1))
done
sleep 2
s1=$(mem_kb)
r1=$(refs)
ktap_diag "cycles $cyc_ok/$CYCLES; MemAvailable ${s0} -> ${s1} kB; refcnt '$r0' -> '$r1'; $(grep '^TCP:' /proc/net/sockstat)"
ktap_check "$CYCLES load/unload cycles under traffic" test "$cyc_ok" = "$CYCLES"
# MemAvailable moves by up to about 18 MiB over a run without a leak (page
# cache, slabs): 8 MiB per cycle, at least 32 MiB, still shows a leaked
# session (32 MiB per side, every cycle) from 3 cycles on.
mem_slack=$((CYCLES * 8192 > 32768 ? CYCLES * 8192 : 32768))
ktap_check "no leak: module refcounts equal, MemAvailable within $((mem_slack / 1024)) MiB" \
	test "$r0" = "$r1" -a $((s0 - s1)) -lt "$mem_slack"

# 21-23: counters and state from debugfs and ethtool after a fresh start
bring_up
ktap_check "debugfs: link up" grep -q '^link: up' /sys/kernel/debug/ntrdma/ntrdma0/info
ktap_check "ethtool -i/-S/-k/-l work" $A "ethtool -i $IFA >/dev/null && ethtool -S $IFA >/dev/null && ethtool -k $IFA >/dev/null && ethtool -l $IFA >/dev/null"
ktap_check "no protocol errors" sh -c "! grep -q '^proto_errors: [1-9]' /sys/kernel/debug/ntrdma/*/info"

# 24: two queues (ethtool -L combined 2 on both sides): ethtool -S gives
# each queue's counters as rxN_* and txN_*, they add up to the totals, and
# 16 TCP flows (hashed to a queue each) use both queues. Then A goes back
# to one queue: B hears of it and sends on queue 0 only, and A's queue 1
# takes nothing more.
unload_both() {
	modprobe -r ntrdma
	is_pair && peer "modprobe -r ntrdma"
	is_pair || { ip netns del ntA; ip netns del ntB; } 2>/dev/null
}
qsum() { awk -v p="$1" -v n="$2" '$1 ~ "^" p "[0-9]+_" n ":$" { s += $2 } END { print s + 0 }'; }
qval() { awk -v n="$1:" '$1 == n { print $2 + 0; exit }'; }
channels() { # SIDE IFACE: "current/maximum" combined channels
	${!1} "ethtool -l $2" | awk '/^Combined:/ { v[n++] = $2 } END { print v[1] "/" v[0] }'
}
flows() { # FROM TO TO_IP: 16 TCP flows for 2 s
	${!2} "iperf3 -s -1 -D -p 5205 >/dev/null 2>&1"
	sleep 0.5
	${!1} "timeout 20 iperf3 -c $3 -p 5205 -t 2 -P 16 >/dev/null 2>&1"
	sleep 1
}
two_queues() {
	local sa sb
	$A "ethtool -L $IFA combined 2" && $B "ethtool -L $IFB combined 2" || return 1
	ktap_diag "combined channels: A $(channels A "$IFA"), B $(channels B "$IFB")"
	[ "$(channels A "$IFA")" = 2/4 ] && wait_for 10 ping_ok || return 1
	flows A B "$B_IP"
	sa=$($A "ethtool -S $IFA") sb=$($B "ethtool -S $IFB")
	ktap_diag "A: tx0 $(qval tx0_packets <<<"$sa"), tx1 $(qval tx1_packets <<<"$sa"), tx_packets $(qval tx_packets <<<"$sa"); B: rx0 $(qval rx0_packets <<<"$sb"), rx1 $(qval rx1_packets <<<"$sb"), rx_packets $(qval rx_packets <<<"$sb")"
	[ "$(qval tx0_packets <<<"$sa")" -gt 0 ] && [ "$(qval tx1_packets <<<"$sa")" -gt 0 ] &&
		[ "$(qval rx0_packets <<<"$sb")" -gt 0 ] && [ "$(qval rx1_packets <<<"$sb")" -gt 0 ] &&
		[ "$(qsum tx packets <<<"$sa")" = "$(qval tx_packets <<<"$sa")" ] &&
		[ "$(qsum rx bytes <<<"$sb")" = "$(qval rx_bytes <<<"$sb")" ] &&
		[ "$(qsum rx packets <<<"$sb")" = "$(qval rx_packets <<<"$sb")" ] &&
		[ "$(qsum tx doorbells <<<"$sa")" = "$(qval tx_doorbells <<<"$sa")" ]
}
back_to_one() {
	local t0 t1
	$A "ethtool -L $IFA combined 1" && [ "$(channels A "$IFA")" = 1/4 ] || return 1
	! $A "ethtool -L $IFA combined 5 2>/dev/null" || return 1
	t0=$(qval tx1_packets <<<"$($B "ethtool -S $IFB")")
	flows B A "$A_IP"
	flows A B "$B_IP"
	t1=$(qval tx1_packets <<<"$($B "ethtool -S $IFB")")
	ktap_diag "B's tx1_packets $t0 -> $t1 with A on one queue; A's ethtool -S lists rx1: $($A "ethtool -S $IFA" | grep -c ' rx1_')"
	[ "$t1" = "$t0" ] && ! $A "ethtool -S $IFA" | grep -q ' rx1_' && ping_ok
}
ktap_check "two queues: per-queue counters in ethtool -S, both queues used, sums equal the totals" two_queues
ktap_check "one queue again on A (ethtool -L): B sends on queue 0 only, 5 queues refused" back_to_one
drop_tcp 5205
unload_both
bring_up

# 25-27: receive buffer allocations failing on B (test builds' fault
# injection): receive must never die of it. The refill is retried from a
# timer; without that, once every posted buffer is used no completion
# comes to trigger a refill and B's receive is dead until the link bounces.
# debugfs from the root namespace (ip netns exec mounts a /sys of its own)
DBGB=$(peer "grep -l '^ntb: $REMOTE_DEV\$' $DEBUGFS/ntrdma/*/info | head -1 | xargs -r dirname")
inj_b() { peer "echo '$1' > $DBGB/inject"; }
refill_fails() { $B "ethtool -S $IFB" | sed -n 's/^ *rx_refill_fail: //p'; }
if [ -z "$DBGB" ] || ! peer "[ -e $DBGB/inject ]"; then
	ktap_skip "iperf3 with rx allocations failing" "ntrdma built without CONFIG_NTRDMA_TEST_HOOKS"
	ktap_skip "rx allocation failures" "no inject file"
	ktap_skip "rx allocation failures until the ring is dry" "no inject file"
elif [ "$windowed" = 1 ]; then
	why="windowed mode: receive pieces are allocated once per session and posted again, never during traffic"
	ktap_skip "iperf3 with rx allocations failing" "$why"
	ktap_skip "rx allocation failures" "$why"
	ktap_skip "rx allocation failures until the ring is dry" "$why"
else
	f0=$(refill_fails)
	inj_b "fail rx_alloc 3"
	IPERF_SECS=4 iperf_check ntr rx_alloc_fail_every_3 "$B" "$A" "$B_IP" 5205
	f1=$(refill_fails)
	inj_b "fail rx_alloc 0"
	ktap_check "every 3rd rx allocation failing: refills failed ($f0 -> $f1), traffic flows after" \
		eval "[ ${f1:-0} -gt ${f0:-0} ] && ping_ok"
	inj_b "fail rx_alloc 1"
	$B "iperf3 -s -1 -D -p 5206 >/dev/null 2>&1"
	sleep 1
	$A "timeout 10 iperf3 -c $B_IP -p 5206 -t 3 >/dev/null 2>&1"
	f2=$(refill_fails)
	# dry: B takes no frame (A's ping gets no answer)
	dry=0
	$A "ping -c 2 -W 2 $B_IP >/dev/null" || dry=1
	inj_b "fail rx_alloc 0"
	t0=$(now_ms)
	wait_for 5 ping_ok
	back=$?
	ktap_check "every rx allocation failing until the ring ran dry ($f1 -> $f2 failed refills, dry: $dry): traffic back in $(( $(now_ms) - t0 )) ms" \
		eval "[ $dry = 1 ] && [ $back = 0 ]"
	$B "pkill iperf3" 2>/dev/null
fi

# 28-29: A's DMA channel refusing every 3rd copy (a fixed ring that is
# full): not an error; the frame goes by CPU or waits for the next DMA
# completion. iperf3 runs on, and no frame is counted as a transmit error.
DBGA=$(grep -l "^ntb: $LOCAL_DEV\$" $DEBUGFS/ntrdma/*/info | head -1 | xargs -r dirname)
tx_errs() { $A "ethtool -S $IFA" | awk '/^ *tx_errors/ { n += $2 } END { print n + 0 }'; }
copy=$(sed -n 's/^copy: //p' "$DBGA/info" 2>/dev/null)
if [ -z "$DBGA" ] || [ ! -e "$DBGA/inject" ] || [ "${copy:-cpu}" = cpu ]; then
	ktap_skip "iperf3 with DMA copies refused" "no DMA channel or no fault injection (copy: ${copy:-?})"
	ktap_skip "DMA copies refused: no transmit errors" "as above"
else
	e0=$(tx_errs)
	i0=$(sed -n 's/^faults_injected: //p' "$DBGA/info")
	echo 'fail dma_prep 3' > "$DBGA/inject"
	IPERF_SECS=4 iperf_check ntr dma_prep_fail_every_3 "$B" "$A" "$B_IP" 5207
	echo 'fail dma_prep 0' > "$DBGA/inject"
	e1=$(tx_errs)
	i1=$(sed -n 's/^faults_injected: //p' "$DBGA/info")
	ktap_check "DMA channel ($copy) refusing every 3rd copy: $((i1 - i0)) refusals, tx errors $e0 -> $e1, link up" \
		eval "[ $((i1 - i0)) -gt 0 ] && [ $e1 = $e0 ] && ping_ok"
fi

# The same from the DMA engine itself (ntb_hw's emulated engine refusing as
# a full fixed ring does: NULL from prep, an error cookie from submit).
if [ "${copy:-cpu}" = cpu ] || ! ntb_dma_can_refuse; then
	ktap_skip "iperf3 with ntb_hw's DMA engine refusing" "no DMA channel or no fail_*_every parameter (copy: ${copy:-?})"
	ktap_skip "ntb_hw's DMA engine refusing: no transmit errors" "as above"
else
	e0=$(tx_errs)
	r0=$(ntb_dma_refused)
	ntb_dma_refuse 5 7
	IPERF_SECS=4 iperf_check ntr ntb_dma_refusing "$B" "$A" "$B_IP" 5208
	ntb_dma_refuse 0 0
	e1=$(tx_errs)
	r1=$(ntb_dma_refused)
	ktap_check "ntb_hw's DMA engine refusing every 5th prep and 7th submit: $((r1 - r0)) refusals, tx errors $e0 -> $e1, link up" \
		eval "[ $((r1 - r0)) -gt 0 ] && [ $e1 = $e0 ] && ping_ok"
fi

# 38: netconsole over ntr0 (two hosts: netconsole finds its netdev only in
# the initial namespace). netpoll sends with interrupts off and polls the
# queue with budget 0 when it is full; B counts what arrived. 300 lines
# are more frames than the ring holds.
netconsole_lines() { # PORT: the lines B received, until 3 s of silence
	peer "timeout 60 perl -MIO::Socket::INET -e '
		my \$s = IO::Socket::INET->new(LocalAddr => \"$B_IP:$1\", Proto => \"udp\") or die;
		\$SIG{ALRM} = sub { exit 0 }; \$| = 1;
		while (1) { alarm 3; \$s->recv(my \$m, 4096) or last; print \$m }'"
}
netconsole_ok() {
	local mac n tag="ntrdma-nc-$$"
	mac=$(peer "cat /sys/class/net/$IFB/address") || return 1
	netconsole_lines 6666 > /tmp/nc.out &
	sleep 2
	modprobe netconsole "netconsole=6666@$A_IP/$IFA,6666@$B_IP/$mac" || return 1
	for n in $(seq 300); do echo "$tag $n" > /dev/kmsg; done
	wait
	modprobe -r netconsole
	n=$(grep -o "$tag [0-9]*" /tmp/nc.out | sort -u | wc -l)
	ktap_diag "netconsole: $n of 300 lines arrived"
	[ "$n" = 300 ] && ping_ok
}
if ! is_pair; then
	ktap_skip "netconsole over $IFA" "netconsole needs its netdev in the initial namespace: two hosts only"
elif ! command -v perl >/dev/null; then
	ktap_fail "netconsole over $IFA: perl missing (receives on B)"
else
	ktap_check "netconsole over $IFA: 300 kernel messages reach B, link up" netconsole_ok
fi

modprobe -r ntrdma
is_pair && peer "modprobe -r ntrdma"
ip netns del ntA 2>/dev/null; ip netns del ntB 2>/dev/null
ktap_finish
