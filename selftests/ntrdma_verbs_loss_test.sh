#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The verbs face losing its peer during traffic: an RDMA WRITE stream
# (ib_write_bw, unmodified) runs when the peer's driver is unloaded (and, in
# the pair topology, when the peer host is killed); so does an RDMA READ
# stream (ib_read_bw: the peer writes the data into our READ sinks), and
# one of each when our own driver is unloaded. The stream must end with
# an error (its QPs are flushed), the port go down, no oops or WARN (the
# test bed fails the run on any), and once the peer is back new QPs must
# work (ibv_rc_pingpong).
# Needs an NTB with a flat window (test bed: --flat 1).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

NTB_DRV=/sys/bus/ntb/drivers/ntrdma
A_IP=10.78.0.1
B_IP=10.78.0.2

ktap_header
if is_pair; then ktap_plan 10; else ktap_plan 7; fi

need_ntb_pair

# Both ends up: driver, provider, netdev with an address (the tools trade
# QP numbers over TCP; in the loop topology over 127.0.0.1).
ends_up() {
	load_ntrdma || return 1
	find_ibdevs || return 1
	SERVER_IP=127.0.0.1
	if is_pair; then
		pair_addrs "$A_IP" "$B_IP" || return 1
		SERVER_IP=$B_IP
		wait_for 15 ping -c1 -W1 "$B_IP" >/dev/null 2>&1 || return 1
	fi
	install_provider || return 1
	wait_for 10 port_is "$IBDEV" PORT_ACTIVE
}

# A pingpong between fresh QPs on both ends.
pingpong_ok() {
	peer "timeout 30 ibv_rc_pingpong -d $PEER_IBDEV -p 18600 -n 20 >/dev/null 2>&1" &
	local srv=$!
	sleep 2
	timeout 30 ibv_rc_pingpong -d "$IBDEV" -p 18600 -n 20 "$SERVER_IP" > "$NTRDMA_OUT/pp.$$" 2>&1
	local rc=$?
	wait "$srv"
	local src=$?
	ktap_diag "pingpong: $(grep -h 'iters in' "$NTRDMA_OUT/pp.$$" | head -1) (client $rc, server $src)"
	rm -f "$NTRDMA_OUT/pp.$$"
	[ $rc = 0 ] && [ $src = 0 ]
}

# stream_then CMD [TOOL]: start a 60 s stream of TOOL (ib_write_bw), run
# CMD (taking the peer away) once it moves data; sets STREAM_RC (the
# client's exit status), STREAM_S (seconds from CMD to the client's exit)
# and STREAM_OUT.
stream_then() {
	local tool=${2:-ib_write_bw}
	STREAM_OUT=$NTRDMA_OUT/wbw.$$
	peer "timeout 90 $tool -d $PEER_IBDEV -p 18601 -D 60 -s 65536 >/dev/null 2>&1" &
	local srv=$!
	sleep 2
	timeout 90 "$tool" -d "$IBDEV" -p 18601 -D 60 -s 65536 "$SERVER_IP" > "$STREAM_OUT" 2>&1 &
	local cli=$!
	sleep 6
	local t0=$SECONDS
	eval "$1"
	wait "$cli"
	STREAM_RC=$?
	STREAM_S=$((SECONDS - t0))
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	ktap_diag "$tool exit $STREAM_RC after ${STREAM_S} s: $(grep -iE 'error|status|failed' "$STREAM_OUT" | head -3 | tr '\n' ' ')"
}

# stream_failed: the stream ended with an error within 30 s of CMD.
stream_failed() {
	[ "$STREAM_RC" != 0 ] && [ "$STREAM_RC" != 124 ] && [ "$STREAM_S" -lt 30 ]
}

# The peer's driver away during a stream of TOOL, then back.
peer_driver_away() {
	if is_pair; then
		stream_then 'peer "modprobe -r ntrdma"' "$1"
	else
		stream_then "echo $REMOTE_DEV > $NTB_DRV/unbind" "$1"
	fi
	st=$(port_state "$IBDEV")
	ktap_check "peer driver unloaded during $1: stream failed (exit $STREAM_RC, ${STREAM_S} s), port $st" \
		eval "stream_failed && [ $st = PORT_DOWN ]"
	if is_pair; then
		peer "modprobe ntrdma"
	else
		echo "$REMOTE_DEV" > $NTB_DRV/bind
	fi
	ends_up
}

# Our own driver unloaded under a stream of TOOL (QPs destroyed by the core
# while segments, and the peer's writes into our READ sinks, are in flight).
driver_away() {
	ends_up
	UNLOAD_RC=
	stream_then 'timeout 60 modprobe -r ntrdma; UNLOAD_RC=$?' "$1"
	ktap_check "driver unloaded during $1: modprobe -r exit ${UNLOAD_RC:-?}, stream exit $STREAM_RC after ${STREAM_S} s" \
		eval "[ '$UNLOAD_RC' = 0 ] && stream_failed"
}

if ! ends_up; then
	ktap_fail "both ends up (ib device ${IBDEV:-none}, peer ${PEER_IBDEV:-none})"
	ktap_finish
fi

# 1-3: peer driver unloaded during the stream; it comes back: the port is
# active again and new QPs work
peer_driver_away ib_write_bw
ktap_check "peer driver back: port $(port_state "$IBDEV")" port_is "$IBDEV" PORT_ACTIVE
ktap_check "new QPs after the peer returned: ibv_rc_pingpong" pingpong_ok

# 4-5: the same during a READ stream
peer_driver_away ib_read_bw
ktap_check "new QPs after the peer returned (READ stream): ibv_rc_pingpong" pingpong_ok

if is_pair; then
	# 6-8: the peer host dies during the stream
	stream_then 'testbed-ctl kill-peer >/dev/null'
	wait_for 5 port_is "$IBDEV" PORT_DOWN
	st=$(port_state "$IBDEV")
	ktap_check "peer host killed during ib_write_bw: stream failed (exit $STREAM_RC, ${STREAM_S} s), port $st" \
		eval "stream_failed && [ $st = PORT_DOWN ]"
	testbed-ctl start-peer >/dev/null && install_modules && ends_up
	ktap_check "peer host back: port $(port_state "$IBDEV")" port_is "$IBDEV" PORT_ACTIVE
	ktap_check "new QPs after the peer host returned: ibv_rc_pingpong" pingpong_ok
fi
# last: our own driver unloaded under each stream
driver_away ib_write_bw
driver_away ib_read_bw
rm -f "$STREAM_OUT"
is_pair && peer "modprobe -r ntrdma"
ktap_finish
