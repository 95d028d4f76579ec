#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# A misbehaving peer: one side writes malformed values into the other's
# inbox through the test-only debugfs file ntrdma/<dev>/inject (built with
# CONFIG_NTRDMA_TEST_HOOKS, as the build tree is). The victim must count the
# protocol error, end the session (never spin on the bad entry: a softirq
# livelock would hang the guest and time this test out) and come back up;
# then both faces work again. A wrong event index (the peer no longer rings
# our receive) costs at most a heartbeat period: the sweep wakes the
# receiver. A DMA engine that hangs as the session ends keeps A out of
# new sessions until it runs again; a peer that posts more buffers than
# its ring holds while A's copies wait on a hung engine is a protocol
# error, never a slot of a queued copy reused. Last, a peer fuzzer writes
# random words into the victim's inbox (ring indices, completions, command
# and response slots, doorbells) in rounds for FUZZ_SECS (60; the full
# form: FUZZ_SECS=900) while verbs, command and Ethernet traffic runs,
# alternating sides, with canaries armed on both sides: pages nobody posted
# or registered, and the bytes around every ntr0 receive buffer that the
# peer may not write. Not one of their bytes may change.
# Needs an NTB with a flat window (test bed: --flat 1).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

FUZZ_SECS=${FUZZ_SECS:-60}

ktap_header
ktap_plan 15

need_ntb_pair
if is_pair; then B="peer"; else B="sh -c"; fi
A="sh -c"

inject() { # SIDE REQUEST
	local d=DBG$1
	${!1} "echo '$2' > ${!d}/inject"
}
echo_ok() { # SIDE: a command-channel round trip from that side
	local d=DBG$1
	${!1} "echo 'echo ping' > ${!d}/cmd && tail -1 ${!d}/cmd | grep -q 'rc=0 .*data=ping'"
}

load() {
	load_ntrdma || return 1
	find_dbgs || return 1
	${A} "[ -e $DBGA/inject ]" || return 2
	wait_for 10 link_up || return 1
	find_ibdevs || return 1
	SERVER_IP=127.0.0.1
	if is_pair; then
		pair_addrs 10.77.0.1 10.77.0.2 || return 1
		SERVER_IP=10.77.0.2
	fi
	install_provider
}

pingpong_ok() { # [SIZE]: a verbs exchange between fresh QPs (the peer serves)
	local sz=${1:-4096}
	if is_pair; then
		wait_for 15 ping -c1 -W1 "$SERVER_IP" >/dev/null 2>&1 ||
			ktap_diag "no ping reply from $SERVER_IP over ntr0"
	fi
	wait_for 10 port_is "$IBDEV" PORT_ACTIVE || { ktap_diag "$IBDEV port not active"; return 1; }
	peer "timeout 30 ibv_rc_pingpong -d $PEER_IBDEV -p 18700 -n 20 -s $sz >/tmp/pp_srv.log 2>&1" &
	local srv=$!
	sleep 2
	timeout 30 ibv_rc_pingpong -d "$IBDEV" -p 18700 -n 20 -s "$sz" "$SERVER_IP" >/tmp/pp_cli.log 2>&1
	local rc=$?
	wait "$srv"
	local src=$?
	[ $rc = 0 ] && [ $src = 0 ] && return 0
	ktap_diag "ibv_rc_pingpong: client exit $rc: $(tail -2 /tmp/pp_cli.log | tr '\n' ' ')"
	ktap_diag "ibv_rc_pingpong: server exit $src: $(peer 'tail -2 /tmp/pp_srv.log' | tr '\n' ' ')"
	return 1
}

# both faces after the faults: the command channel each way, then verbs
faces_try() {
	local rc=0
	echo_ok A || { ktap_diag "command channel A -> B failed"; rc=1; }
	echo_ok B || { ktap_diag "command channel B -> A failed"; rc=1; }
	pingpong_ok || rc=1
	return $rc
}
proto_sum() { echo $(( $(info_of A proto_errors) + $(info_of B proto_errors) )); }

# faces_ok: both faces work. A corrupt index the peer left where it is read
# only at its next use ends the session there, by design: one such restart
# (a counted protocol error) during the check earns one more try.
faces_ok() {
	local dn0 pe0
	dn0=$(info_of A link_down_events)
	pe0=$(proto_sum)
	faces_try && return 0
	[ "$(info_of A link_down_events)" != "$dn0" ] && [ "$(proto_sum)" != "$pe0" ] ||
		return 1
	ktap_diag "a protocol error ended the session during the check: once more"
	wait_for 20 link_up && faces_try
}

downs_above() { [ "$(info_of "$1" link_down_events)" -gt "$2" ]; }

# restart_after SIDE REQUEST VICTIM: inject from SIDE, then the victim must
# count a protocol error and both ends must go through a new session.
restart_after() {
	local pe0 dn0 dnA0 pe1 dn1 dnA1
	pe0=$(info_of "$3" proto_errors)
	dn0=$(info_of "$3" link_down_events)
	dnA0=$(info_of "$1" link_down_events)
	inject "$1" "$2" || return 1
	wait_for 10 downs_above "$3" "$dn0"
	wait_for 15 link_up || return 1
	pe1=$(info_of "$3" proto_errors)
	dn1=$(info_of "$3" link_down_events)
	dnA1=$(info_of "$1" link_down_events)
	ktap_diag "$2: victim proto_errors $pe0 -> $pe1, link downs $dn0 -> $dn1 (injector $dnA0 -> $dnA1)"
	[ "$pe1" -gt "$pe0" ] && [ "$dn1" -gt "$dn0" ] && [ "$dnA1" -gt "$dnA0" ]
}

# 1
load
rc=$?
if [ $rc = 2 ]; then
	ktap_skip "fault injection" "ntrdma built without CONFIG_NTRDMA_TEST_HOOKS (make TEST_HOOKS=y)"
	for i in $(seq 2 14); do ktap_skip "fault injection $i" "no inject file"; done
	ktap_finish
fi
ktap_check "ntrdma loaded on both sides, link up, inject file present" test $rc = 0

# 2: a zero-length completion on the Ethernet face's TQP (NAPI)
ktap_check "bad completion on the Ethernet TQP: the peer counts it, the session restarts, link up" \
	restart_after A "cqe 0" B
# 3: a completion index out of range on the verbs TQP (receive work)
ktap_check "completion index out of range on the verbs TQP: the session restarts, link up" \
	restart_after A "cq_prod 7 3735928559" B
# 4: the other direction, on the Ethernet TQP
ktap_check "bad completion B -> A: A counts it, the session restarts, link up" \
	restart_after B "cqe 0" A
# 5: both faces work after the restarts
ktap_check "after the restarts: command channel both ways and ibv_rc_pingpong" \
	faces_ok

# 6: a wrong event index: A's wish for an RX doorbell on the verbs TQP,
# in B's inbox, made wrong, so B does not ring A's next receive; the
# heartbeat sweep finds A's receiver asleep with completions waiting and
# wakes it: the verbs exchange completes (without the sweep its WQEs would
# time out). Its SENDs of 64 KiB go through the TQP: smaller ones are
# placed in the receiver's WQEs without it.
kicks0=$(info_of A sweep_kicks)
inject A "rx_event 7 2147483647"
pingpong_ok 65536
rc=$?
kicks1=$(info_of A sweep_kicks)
ktap_check "wrong event index on the verbs TQP: ibv_rc_pingpong completes ($rc), the sweep woke A's receiver (sweep_kicks $kicks0 -> $kicks1)" \
	eval "[ $rc = 0 ] && [ $kicks1 -gt $kicks0 ]"

# perf_bw TOOL PORT: 300 messages of 64 KiB from A to the peer with perftest's
# TOOL (ib_send_bw goes through the verbs TQP and its DMA copies; WRITEs are
# placed directly by the CPU); sets rc (the client's exit code) and src (the
# server's). A run the tool itself failed (its clock, lib/verbs.sh) is tried
# again on the next port (3 tries); a failure says both ends' last lines.
perf_bw() {
	perftest_retry perf_bw_once /tmp/pb_cli.log /tmp/pb_srv.log "$1" "$2" && return
	ktap_diag "$1: client exit $rc: $(tail -2 /tmp/pb_cli.log | tr '\n' ' ')"
	ktap_diag "$1: server exit $src: $(peer 'tail -2 /tmp/pb_srv.log' | tr '\n' ' ')"
}
perf_bw_once() {
	peer "timeout 60 $1 -d $PEER_IBDEV -p $2 -n 300 -s 65536 >/tmp/pb_srv.log 2>&1" &
	local srv=$!
	sleep 2
	timeout 60 "$1" -d "$IBDEV" -p "$2" -n 300 -s 65536 "$SERVER_IP" >/tmp/pb_cli.log 2>&1
	rc=$?
	wait $srv
	src=$?
	[ $rc = 0 ] && [ $src = 0 ]
}

# 7: the DMA channel refusing every 3rd copy (a full ring): the refused
# copy stays staged and is handed over again a jiffy later; no error
copy=$(info_of A copy)
if [ "$copy" = cpu ]; then
	ktap_skip "DMA channel refusing copies" "no DMA channel: copies by CPU"
else
	f0=$(info_of A faults_injected)
	inject A "fail dma_prep 3"
	perf_bw ib_send_bw 18702
	inject A "fail dma_prep 0"
	f1=$(info_of A faults_injected)
	ktap_check "DMA channel ($copy) refusing every 3rd copy under ib_send_bw: $((f1 - f0)) refusals, both ends exit 0 ($rc/$src), link up" \
		eval "[ $((f1 - f0)) -gt 0 ] && [ $rc = 0 ] && [ $src = 0 ] && link_up"
fi

# 8: the DMA channel refusing a copy in the middle of a message (after
# taking others of it): the rest follows when the channel takes it, in
# order; no error and no session restart
if [ "$copy" = cpu ]; then
	ktap_skip "DMA channel refusing copies mid-message" "no DMA channel: copies by CPU"
else
	f0=$(info_of A faults_injected)
	d0=$(info_of A link_down_events)
	inject A "fail dma_prep_mid 4"
	perf_bw ib_send_bw 18703
	inject A "fail dma_prep_mid 0"
	f1=$(info_of A faults_injected)
	d1=$(info_of A link_down_events)
	ktap_check "DMA channel ($copy) refusing every 4th copy after a message's first under ib_send_bw: $((f1 - f0)) refusals, both ends exit 0 ($rc/$src), $((d1 - d0)) session restarts, link up" \
		eval "[ $((f1 - f0)) -gt 0 ] && [ $rc = 0 ] && [ $src = 0 ] && [ $d1 = $d0 ] && link_up"
fi

# 9: the same refusals from the DMA engine itself (ntb_hw's emulated
# engine: NULL from prep, an error cookie from submit, as a full fixed ring
# gives), under ib_send_bw and ib_write_bw: no error on either end
if [ "$copy" = cpu ] || ! ntb_dma_can_refuse; then
	ktap_skip "ntb_hw's DMA engine refusing" "no DMA channel or no fail_*_every parameter (copy: $copy)"
else
	r0=$(ntb_dma_refused)
	d0=$(info_of A link_down_events)
	ntb_dma_refuse 5 7
	perf_bw ib_send_bw 18704
	s_rc=$rc s_src=$src
	perf_bw ib_write_bw 18705
	ntb_dma_refuse 0 0
	r1=$(ntb_dma_refused)
	d1=$(info_of A link_down_events)
	ktap_check "ntb_hw's DMA engine ($copy) refusing every 5th prep and 7th submit: $((r1 - r0)) refusals, ib_send_bw ends exit $s_rc/$s_src, ib_write_bw $rc/$src, $((d1 - d0)) session restarts, link up" \
		eval "[ $((r1 - r0)) -gt 0 ] && [ $s_rc = 0 ] && [ $s_src = 0 ] && [ $rc = 0 ] && [ $src = 0 ] && [ $d1 = $d0 ] && link_up"
fi

# 10: a DMA engine that hangs (ntb_hw's stall parameter) under ib_send_bw
# when the session ends (B writes a bad completion into A's inbox): A's
# stop gives up on the copies after its 10 s and reports them failed; A
# accepts no new session while they are on the channel (the peer takes one
# as proof that nothing of ours still writes its pages), and does once the
# engine runs again; both faces work after.
abandoned_count() { dmesg | grep -c 'DMA copies still pending after .*reported as failed'; }
# ib_send_bw of 64 KiB for 30 s from A to B in the background, running for
# 3 s when this returns: the server's PID in the caller's srv, the client's
# in its cli.
send_bw_bg() { # PORT LOGTAG
	peer "timeout 60 ib_send_bw -d $PEER_IBDEV -p $1 -D 30 -s 65536 >/tmp/$2_srv.log 2>&1" &
	srv=$!
	sleep 2
	timeout 60 ib_send_bw -d "$IBDEV" -p "$1" -D 30 -s 65536 "$SERVER_IP" >"/tmp/$2_cli.log" 2>&1 &
	cli=$!
	sleep 3
}
abandoned_above() { [ "$(abandoned_count)" -gt "$1" ]; }
stall_at_session_end() {
	local n0 n1 cli srv held gated
	n0=$(abandoned_count)
	send_bw_bg 18706 st
	ntb_dma_stall 1
	sleep 2
	inject B "cqe 0"
	wait_for 40 abandoned_above "$n0"
	n1=$(abandoned_count)
	sleep 3
	if link_up; then held=no; else held=yes; fi
	gated=$(dmesg | grep -c 'no new session yet')
	ntb_dma_stall 0
	ktap_diag "stalled engine: $((n1 - n0)) TQP stop(s) gave up, no session while stalled: $held ($gated refusals logged)"
	wait "$cli"
	wait "$srv"
	[ "$n1" -gt "$n0" ] && [ $held = yes ] && [ "$gated" -gt 0 ] || return 1
	wait_for 30 link_up || { ktap_diag "no session after the engine ran again"; return 1; }
	faces_ok
}
if [ "$copy" = cpu ] || ! ntb_dma_can_stall; then
	ktap_skip "a hung DMA engine at a session's end" "no DMA channel or no stall parameter (copy: $copy)"
else
	ktap_check "a hung DMA engine at a session's end: the stop gives up after 10 s, no new session until the engine runs again, then both faces work" \
		stall_at_session_end
	ntb_dma_stall 0
fi

# 10b: a DMA channel that refuses every copy (fail dma_prep 1) under
# ib_send_bw: after 2 s without a copy A ends the session; its stop gives
# up after 10 s; the copies it staged never reached the channel, so they
# are dropped, and a new session comes up while the channel still
# refuses; both faces work once it takes copies again.
refused_at_session_end() {
	local n0 n1 cli srv up
	n0=$(abandoned_count)
	send_bw_bg 18708 rf
	inject A "fail dma_prep 1"
	wait_for 40 abandoned_above "$n0"
	n1=$(abandoned_count)
	if wait_for 20 link_up; then up=yes; else up=no; fi
	inject A "fail dma_prep 0"
	ktap_diag "refusing channel: $((n1 - n0)) TQP stop(s) gave up, new session while it refused: $up"
	wait "$cli"
	wait "$srv"
	[ "$n1" -gt "$n0" ] && [ $up = yes ] || return 1
	wait_for 30 link_up || { ktap_diag "no session after the channel took copies again"; return 1; }
	faces_ok
}
if [ "$copy" = cpu ]; then
	ktap_skip "a refusing DMA channel at a session's end" "no DMA channel: copies by CPU"
else
	ktap_check "a DMA channel refusing every copy: the session ends, its stop gives up and drops what it staged, a new session comes up, then both faces work" \
		refused_at_session_end
	inject A "fail dma_prep 0"
fi

# 11: a peer that posts more receive buffers than its ring holds while our
# copies wait on a hung DMA engine: under ib_send_bw on 12 QPs (more
# segments than the ring holds, each QP up to 32 in flight), B writes A's
# post producer index of the verbs TQP 257 past the last completion A
# published, with well-formed descriptors. A send there would take the slot
# of a copy still queued on the channel: A counts a protocol error instead
# (while the engine still hangs), the session restarts once it runs again,
# and both faces work after.
post_ahead_stalled() {
	local pe0 dn0 pe1 dn1 cli srv
	pe0=$(info_of A proto_errors)
	dn0=$(info_of A link_down_events)
	peer "timeout 60 ib_send_bw -d $PEER_IBDEV -p 18707 -q 12 -D 30 -s 65536 >/tmp/pa_srv.log 2>&1" &
	srv=$!
	sleep 2
	timeout 60 ib_send_bw -d "$IBDEV" -p 18707 -q 12 -D 30 -s 65536 "$SERVER_IP" >/tmp/pa_cli.log 2>&1 &
	cli=$!
	sleep 3
	ntb_dma_stall 1
	sleep 2
	inject B "post_prod 7 257" || ktap_diag "inject post_prod failed"
	wait_for 10 proto_above A "$pe0"
	pe1=$(info_of A proto_errors)
	sleep 1
	ntb_dma_stall 0
	wait "$cli"
	wait "$srv"
	wait_for 30 link_up
	dn1=$(info_of A link_down_events)
	ktap_diag "post_prod 257 ahead, engine hung: A proto_errors $pe0 -> $pe1, link downs $dn0 -> $dn1"
	[ "$pe1" -gt "$pe0" ] && [ "$dn1" -gt "$dn0" ] || return 1
	link_up || { ktap_diag "no session after the engine ran again"; return 1; }
	faces_ok
}
proto_above() { [ "$(info_of "$1" proto_errors)" -gt "$2" ]; }
if [ "$copy" = cpu ] || ! ntb_dma_can_stall; then
	ktap_skip "a peer posting beyond its ring under a hung DMA engine" "no DMA channel or no stall parameter (copy: $copy)"
else
	ktap_check "a peer posting 257 ahead of the completions, copies held by a hung DMA engine: a protocol error, never a reused slot; the session restarts, then both faces work" \
		post_ahead_stalled
	ntb_dma_stall 0
fi

# 12: the fuzzer, alternating sides, with verbs, command and Ethernet
# traffic running
# Frames both ways on the netdevs: pings over ntr0 between the hosts (pair);
# in one host (loop), to a neighbour that is the other netdev's MAC, so each
# frame crosses the NTB and is dropped by the other side's IP layer.
frames_setup() {
	is_pair && return 0
	NA=$(netdev_of "$LOCAL_DEV") && NB=$(netdev_of "$REMOTE_DEV") || return 1
	ip link set "$NA" up && ip link set "$NB" up &&
	ip addr replace 10.77.0.1/24 dev "$NA" && ip addr replace 10.77.1.1/24 dev "$NB" &&
	ip neigh replace 10.77.0.9 lladdr "$(cat /sys/class/net/$NB/address)" dev "$NA" &&
	ip neigh replace 10.77.1.9 lladdr "$(cat /sys/class/net/$NA/address)" dev "$NB"
}
frames() {
	if is_pair; then
		ping -q -c 20 -i 0.05 -s 1200 -W 1 "$SERVER_IP"
	else
		ping -q -c 20 -i 0.05 -s 1200 -W 1 -I "$NA" 10.77.0.9
		ping -q -c 20 -i 0.05 -s 1200 -W 1 -I "$NB" 10.77.1.9
	fi
}
traffic() {
	while :; do
		peer "timeout 10 ibv_rc_pingpong -d $PEER_IBDEV -p 18701 -n 50 >/dev/null 2>&1" &
		sleep 1
		timeout 10 ibv_rc_pingpong -d "$IBDEV" -p 18701 -n 50 "$SERVER_IP" >/dev/null 2>&1
		wait
		echo_ok A >/dev/null 2>&1
		frames >/dev/null 2>&1
	done
}
canary_sum() { # FIELD: the sum over both sides
	echo $(( $(info_of A "$1") + $(info_of B "$1") ))
}
frames_setup || ktap_diag "netdevs not set up: no Ethernet frames in the fuzz traffic"
# The canaries see a change: one byte poked into a page, then armed afresh.
inject A "canary 256" && inject A canary_poke
poked=$(info_of A canary_page_bytes)
inject A "canary 256" && inject B "canary 256"
checks0=$(canary_sum canary_checks)
guard0=$(canary_sum canary_guard_bytes)
traffic 2>/dev/null &
tpid=$!
rounds=0
landed=0	# rounds whose words were written (an inject fails without a session)
restarts0=$(info_of A link_down_events)
t_end=$((SECONDS + FUZZ_SECS))
while [ $SECONDS -lt $t_end ]; do
	if [ $((rounds % 2)) = 0 ]; then side=A; else side=B; fi
	inject $side "fuzz 32 $RANDOM$RANDOM" 2>/dev/null && landed=$((landed + 1))
	rounds=$((rounds + 1))
	sleep 0.5
	wait_for 20 link_up
done
kill $tpid 2>/dev/null
wait $tpid 2>/dev/null || true
pkill -f "ibv_rc_pingpong.*18701" 2>/dev/null
peer "pkill -f 'ibv_rc_pingpong.*18701'" 2>/dev/null
restarts=$(( $(info_of A link_down_events) - restarts0 ))
metric fuzz_rounds "$rounds" rounds
metric fuzz_session_restarts "$restarts" restarts
# The fuzzer did something: most rounds wrote their words, and some of
# them were caught (a session restart), else the test shows nothing.
ktap_check "fuzzer: $rounds rounds ($landed written) of 32 random inbox words in ${FUZZ_SECS} s ($restarts session restarts): link up after" \
	eval "[ $((2 * landed)) -ge $rounds ] && [ $restarts -gt 0 ] && wait_for 20 link_up"
# 13
pages=$(canary_sum canary_page_bytes)
checks=$(( $(canary_sum canary_checks) - checks0 ))
guard=$(( $(canary_sum canary_guard_bytes) - guard0 ))
inject A "canary 0"
inject B "canary 0"
metric fuzz_canary_guard_checks "$checks" checks
ktap_check "canaries: 512 pages and the guard bytes of $checks receive buffers checked: $pages + $guard bytes changed (a poked byte was seen: $poked)" \
	eval "[ '$poked' = 1 ] && [ $pages = 0 ] && [ $guard = 0 ] && [ $checks -gt 0 ]"
# 14
ktap_check "after the fuzzer: command channel both ways and ibv_rc_pingpong" \
	faces_ok

modprobe -r ntrdma
if is_pair; then peer "modprobe -r ntrdma"; fi
ktap_finish
