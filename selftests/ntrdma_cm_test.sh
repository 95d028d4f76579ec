#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rdma_cm over NTRDMA (port 2, iw_cm over the command channel): unmodified
# rping, qperf -cm1, perftest -R and libfabric's fi_pingpong between the two
# ends of the NTB (loop: the two ntr netdevs in namespaces cmA/cmB of this
# host; pair: this host and the peer), a refused connect, the port's look
# (rdma link, GID = MAC), the READ depths each end is told and its QP gets
# (ntrdma_cm_param), and a disconnect that races the passive side's accept
# (ntrdma_cm_disc_race).
# Every tool run passes when the client (and the server) exit 0 within the
# timeout and the output holds the expected figure.
# Runs in flat mode (test bed: --flat 1) and in windowed mode (--flat 0).
#
# Environment: CM_TIMEOUT (60: seconds per client run).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

T=${CM_TIMEOUT:-60}
NTESTS=26
SIP=10.79.3.2
CIP=10.79.3.1

ktap_header
ktap_plan $NTESTS

# C: run on the client's side; S: on the server's side.
install_modules && ntb_pair || fail_rest "no NTB device pair"
modprobe ntrdma || fail_rest "modprobe ntrdma failed"
if is_pair; then peer "modprobe ntrdma" || fail_rest "modprobe ntrdma on the peer failed"; fi
install_provider || fail_rest "install_provider failed"
modprobe rdma_ucm 2>/dev/null
is_pair && peer "modprobe rdma_ucm" 2>/dev/null
wait_for 10 ibdev_of "$LOCAL_DEV" >/dev/null
CDEV=$(ibdev_of "$LOCAL_DEV")
CNET=$(netdev_of "$LOCAL_DEV")
NTB_DRV=/sys/bus/ntb/drivers/ntrdma
# (before the netdev may move to a namespace: rdma link names it only there)
LINK=$(rdma link show "$CDEV/1" 2>&1 | head -1)
MAC=$(cat "/sys/class/net/$CNET/address" 2>/dev/null)
if is_pair; then
	C() { sh -c "$*"; }
	S() { peer "$*"; }
else
	C() { ip netns exec cmA sh -c "$*"; }
	S() { ip netns exec cmB sh -c "$*"; }
	ip netns del cmA 2>/dev/null
	ip netns del cmB 2>/dev/null
	ip netns add cmA && ip netns add cmB || fail_rest "ip netns add failed"
fi
# Addresses on both ends (loop: each netdev in its namespace); again after
# the peer's driver came back (its netdev is new).
ends_up() {
	if is_pair; then
		q_net="for i in \$(ls /sys/class/net); do [ \"\$(ethtool -i \$i 2>/dev/null | sed -n 's/^bus-info: //p')\" = $REMOTE_DEV ] && echo \$i; done"
		wait_for 10 eval '[ -n "$(peer "$q_net")" ]'
		SNET=$(peer "$q_net" | head -1)
		C "ip link set $CNET up && ip addr replace $CIP/24 dev $CNET"
		S "ip link set $SNET up && ip addr replace $SIP/24 dev $SNET"
	else
		wait_for 10 netdev_of "$REMOTE_DEV" >/dev/null
		SNET=$(netdev_of "$REMOTE_DEV")
		[ -e "/sys/class/net/$CNET" ] && ip link set "$CNET" netns cmA
		[ -n "$SNET" ] && ip link set "$SNET" netns cmB
		C "ip link set lo up; ip link set $CNET up && ip addr replace $CIP/24 dev $CNET"
		S "ip link set lo up; ip link set $SNET up && ip addr replace $SIP/24 dev $SNET"
	fi
	[ -n "$CNET" ] && [ -n "$SNET" ] && wait_for 20 C "ping -c 1 -W 1 $SIP" >/dev/null
}
ends_up || ktap_diag "no ping from ${CNET:-?} to $SIP"
[ -n "$CDEV" ] && [ -n "$CNET" ] && [ -n "$SNET" ] ||
	fail_rest "devices: ${CDEV:-none} ${CNET:-none} ${SNET:-none}"
ktap_diag "client $CDEV ($CNET, $CIP), server ($SNET, $SIP)$(is_pair && echo ' on the peer')"

# Protocol errors (each ends a session) logged on either side so far.
proto_errors() {
	local n
	n=$(dmesg | grep -c 'ntrdma.*protocol error')
	if is_pair; then n="$n+$(peer "dmesg | grep -c 'ntrdma.*protocol error'")"; fi
	echo "$n"
}

dmesg_tail() {
	dmesg | tail -n 12 | sed 's/^/# dmesg: /'
	if is_pair; then peer "dmesg | tail -n 12" | sed 's/^/# dmesg (peer): /'; fi
}

# 1: what rdma_cm finds the device by: its netdev, and GID 1 = the MAC
gid=$(cat "/sys/class/infiniband/$CDEV/ports/1/gids/1" 2>/dev/null)
want=$(echo "$MAC" | tr -d : | sed 's/\(....\)\(....\)\(....\)/\1:\2:\3/'):0000:0000:0000:0000:0000
ktap_diag "$LINK; GID[1] $gid"
if grep -qw "netdev $CNET" <<<"$LINK" && [ "$gid" = "$want" ]; then
	ktap_pass "rdma link: $CDEV/1 on $CNET, GID 1 = its MAC"
else
	ktap_fail "rdma link: $CDEV/1 on $CNET, GID 1 = its MAC (want $want)"
fi

# The server side has an rdma_cm listener on PORT (rdma resource: LISTEN).
listening() { # PORT
	S "rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -qE ':$1( |\$)'"
}

PORT=18900
# tool_says WHO: a tool's output on stdin as diagnostics: its error lines
# (stderr, unbuffered, lands before the buffered stdout), then its last lines.
tool_says() {
	local out
	out=$(grep -v '^ *$')
	{ grep -iE 'error|fail|unable|bad|status' <<<"$out" | head -n 6
	  tail -n 4 <<<"$out"; } | sed "s/^/# $1> /"
}
# Server SERVER_CMD in the background on the server's side; client
# CLIENT_CMD; both must exit 0. Sets OUT (the client's output), SOUT (the
# server's) and SRC (the server's exit code); returns the client's.
run_pair_once() { # NAME SERVER_CMD CLIENT_CMD
	local name=$1 srv=$2 cli=$3 f=/tmp/cm-srv.$$ rc
	S "rm -f $f.*; (timeout $((T + 10)) $srv >$f.out 2>&1; echo \$? >$f.rc) </dev/null >/dev/null 2>&1 &"
	wait_for 15 listening "$PORT" || ktap_diag "$name: no listener on port $PORT after 15 s"
	# perftest -R listens twice (its exchange, then the test QPs): give
	# the server time to get there (a refused connect makes its client
	# retry into a crash in librdmacm, seen in pair).
	sleep 2
	OUT=$(C "timeout $T $cli" 2>&1)
	rc=$?
	wait_for 15 S "test -s $f.rc" || S "pkill -f '$(echo "$srv" | cut -d' ' -f1)'"
	SRC=$(S "cat $f.rc 2>/dev/null")
	SOUT=$(S "cat $f.out 2>/dev/null")
	return $rc
}

# run_pair_once, and judged: 0 when both ends exit 0 (the server's exit
# code is not asked for with ALLOW_SERVER_RC). perftest -R connects its
# test QPs right after a handshake that its server leaves before it
# listens again: on a slow guest the connect can come first and is refused
# (REJECTED, -111: no listener, as TCP answers a closed port); perftest
# then crashes. That race of the tool gets two more tries, said in diags, as
# does its clock calibration failing on a busy guest at either end ("Can't
# produce a report", see doc/testbed.md): the end that fails exits, and the
# other one's last exchange is flushed.
run_pair() { # NAME SERVER_CMD CLIENT_CMD [ALLOW_SERVER_RC]
	local name=$1 srv=$2 cli=$3 rc try=1
	run_pair_once "$name" "$srv" "$cli"
	rc=$?
	while { [ $rc -ne 0 ] || [ "${SRC:-x}" != 0 ]; } && [ $try -lt 3 ] &&
		[[ $cli == ib_* ]] &&
		grep -qE "REJECTED; error: -111|Can't produce a report" <<<"$OUT$SOUT"; do
		if grep -q "Can't produce a report" <<<"$OUT$SOUT"; then
			ktap_diag "$name: perftest could not calibrate its clock (the tool's, see doc/testbed.md): try $((try + 1))"
		else
			ktap_diag "$name: perftest's connect came before its server listened again (REJECTED -111): try $((try + 1))"
		fi
		srv=${srv/-p $PORT/-p $((PORT + 1))}
		cli=${cli/-p $PORT/-p $((PORT + 1))}
		PORT=$((PORT + 1))
		try=$((try + 1))
		run_pair_once "$name" "$srv" "$cli"
		rc=$?
	done
	if [ $rc -eq 0 ] && { [ "${SRC:-x}" = 0 ] || [ -n "${4:-}" ]; }; then
		return 0
	fi
	ktap_diag "$name: client exit $rc, server exit ${SRC:-none}"
	ktap_diag "client: $cli"
	tool_says client <<<"$OUT"
	tool_says server <<<"$SOUT"
	dmesg_tail
	return 1
}

# 2-3: rping, small and large messages, data verified by rping (-V)
pe0=$(proto_errors)
for size in 64 60000; do
	if run_pair "rping -S $size" "rping -s -a $SIP -p $PORT -C 10 -S $size -V" \
		"rping -c -a $SIP -p $PORT -C 10 -S $size -V -v"; then
		n=$(grep -c 'ping data' <<<"$OUT")
		[ "$n" -eq 10 ] || { tail -n 5 <<<"$OUT" | sed 's/^/# client> /'; tail -n 5 <<<"$SOUT" | sed 's/^/# server> /'; }
		ktap_check "rping -S $size: 10 verified round trips (client saw $n)" [ "$n" -eq 10 ]
	else
		ktap_fail "rping -S $size: 10 verified round trips"
	fi
	PORT=$((PORT + 1))
done

# 4: their QPs went (many placed SENDs through an RQ of two entries each)
# and the session stayed
pe=$(proto_errors)
[ "$pe" = "$pe0" ] || dmesg_tail
ktap_check "rping's disconnects end no session (protocol errors $pe0 -> $pe)" [ "$pe" = "$pe0" ]

# 5: a connect to a port nobody listens on is refused, quickly, cleanly
t0=$(date +%s%N)
out=$(C "timeout $T rping -c -a $SIP -p $((PORT + 50)) -C 1" 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
ktap_diag "refused connect: rping exit $rc after $ms ms: $(grep -iE 'reject|refused|error|unreach' <<<"$out" | head -2 | xargs)"
ktap_check "connect to a port without listener fails within 10 s" \
	test $rc -ne 0 -a $rc -ne 124 -a $ms -lt 10000

# 6-7: qperf over rdma_cm (its control connection over the netdevs)
for t in rc_bw rc_lat; do
	S "pkill -x qperf; (qperf >/dev/null 2>&1 &)"
	sleep 1
	out=$(C "timeout $T qperf -cm1 -t 2 $SIP $t" 2>&1)
	v=$(awk '$1 == "bw" || $1 == "latency" { print $3, $4; exit }' <<<"$out")
	if [ -n "$v" ]; then
		ktap_diag "qperf -cm1 $t: $v"
		ktap_pass "qperf -cm1 $t"
	else
		ktap_diag "qperf -cm1 $t: $(head -3 <<<"$out" | xargs)"
		dmesg_tail
		ktap_fail "qperf -cm1 $t"
	fi
done
S "pkill -x qperf"

# 8-10: perftest with rdma_cm (-R)
for t in write_bw:65536 send_bw:4096 read_lat:2; do
	tool=ib_${t%%:*} size=${t#*:}
	# Iterations, not -D: the report comes when the data path is quiet,
	# so perftest's clock calibration fails less (doc/testbed.md, perftest).
	mode="-n 500"
	[[ $tool == *_lat ]] && mode="-n 200"
	if run_pair "$tool -R" "$tool -R -p $PORT -s $size $mode" \
		"$tool -R -p $PORT -s $size $mode $SIP"; then
		line=$(grep -A1 -m1 '^ *#bytes' <<<"$OUT" | tail -n 1)
		ktap_diag "$tool -R -s $size: $(xargs <<<"$line")"
		ktap_check "$tool -R (rdma_cm) -s $size" grep -qE '^ *[0-9]' <<<"$line"
	else
		ktap_fail "$tool -R (rdma_cm) -s $size"
	fi
	PORT=$((PORT + 1))
done

# 11-12: rsockets (librdmacm's socket API over RC QPs): rstream and
# riostream (RDMA-mapped I/O) with their data verification
for tool in rstream riostream; do
	if run_pair "$tool" "$tool -b $SIP -p $PORT -T v -C 100 -S 65536" \
		"$tool -s $SIP -p $PORT -T v -C 100 -S 65536"; then
		ktap_diag "$tool: $(tail -n 2 <<<"$OUT" | xargs)"
		ktap_pass "$tool -T v: rsockets over RC, 100 x 64 KiB verified"
	else
		ktap_fail "$tool -T v: rsockets over RC, 100 x 64 KiB verified"
	fi
	PORT=$((PORT + 1))
done

# 13: rcopy: a 4 MiB file to the other end, compared by sha256 (its server
# never exits: stopped after the copy)
f=/tmp/cm-rcopy.$$
head -c 4194304 /dev/urandom >$f
want=$(sha256sum <$f | cut -d' ' -f1)
run_pair "rcopy" "rcopy -p $PORT" "rcopy $f $SIP:$f.copy -p $PORT" any
rc=$?
S "pkill -x rcopy" 2>/dev/null
got=$(S "sha256sum <$f.copy 2>/dev/null" | cut -d' ' -f1)
ktap_check "rcopy of 4 MiB: exit $rc, sha256 ${got:0:12} (sent ${want:0:12})" \
	test "$rc" -eq 0 -a "$got" = "$want"
S "rm -f $f.copy"
rm -f $f
PORT=$((PORT + 1))

# 14: rdma_cm to an address of our own netdev connects two QPs of our own
# device (same-device loopback): rping verified, and the peer's device
# receives no segment of it
# (the peer device's counter: on the peer's host, or here outside cmB)
if is_pair; then
	SDEV=$(peer_lib "ibdev_of $REMOTE_DEV")
	ctr() { peer "cat /sys/class/infiniband/$SDEV/ports/1/hw_counters/rx_segments"; }
else
	SDEV=$(ibdev_of "$REMOTE_DEV")
	ctr() { cat "/sys/class/infiniband/$SDEV/ports/1/hw_counters/rx_segments"; }
fi
before=$(ctr)
C "(timeout $((T + 10)) rping -s -a $CIP -p $PORT -C 5 -S 512 -V >$f.lo 2>&1; echo \$? >$f.lorc) </dev/null >/dev/null 2>&1 &"
wait_for 15 C "rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -qE ':$PORT( |\$)'"
out=$(C "timeout $T rping -c -a $CIP -p $PORT -C 5 -S 512 -V -v" 2>&1)
rc=$?
wait_for 15 test -s $f.lorc
n=$(grep -c 'ping data' <<<"$out")
sleep 0.1
after=$(ctr)
ktap_diag "loopback rping: client exit $rc, server exit $(cat $f.lorc 2>/dev/null), $n round trips; peer rx_segments $before -> $after"
ktap_check "rping to our own address: a same-device connection, 5 verified round trips, nothing across the NTB" \
	test "$rc" -eq 0 -a "$n" -eq 5 -a -n "$before" -a "$before" = "$after"
rm -f $f.lo $f.lorc
PORT=$((PORT + 1))

# 15-16: READ depths, the rdma_cm convention (cma.c hands the iw_cm
# event's ird/ord to the ULP as initiator_depth/responder_resources; the IB
# CM and cxgb4 alike): each end sees its own side, the server's
# CONNECT_REQUEST the client's offer from the server's side (svcrdma and
# nvmet-rdma take its initiator_depth as the bound of theirs), and no end
# may issue more READs than the other answers. ntrdma_cm_param prints
# "request INIT RESP" (server), "established INIT RESP" and "qp
# MAX_RD_ATOMIC MAX_DEST_RD_ATOMIC" (its QP once connected; both floors 1).
CMP=$NTRDMA_ROOT/build/user/rdma/tests/cm/ntrdma_cm_param
# depths NAME CLIENT_RESP CLIENT_INIT SERVER_RESP SERVER_INIT WANT_SERVER
# WANT_CLIENT (WANT_*: the lines, ';' for a newline)
depths() {
	local name=$1 ws wc
	ws=$(tr ';' '\n' <<<"$6") wc=$(tr ';' '\n' <<<"$7")
	run_pair_once "$name" "$CMP server $SIP $PORT $4 $5" "$CMP client $SIP $PORT $2 $3"
	local rc=$?
	PORT=$((PORT + 1))
	ktap_diag "$name: server $(xargs <<<"$SOUT" | tr -d '\n') / client $(xargs <<<"$OUT" | tr -d '\n')"
	[ "$rc" = 0 ] && [ "$SRC" = 0 ] && [ "$SOUT" = "$ws" ] && [ "$OUT" = "$wc" ] && return 0
	ktap_diag "$name: want server $(xargs <<<"$ws") / client $(xargs <<<"$wc"); exit codes client $rc, server ${SRC:-none}"
	return 1
}
# An NFS client's offer (xprtrdma: initiator depth 0, responder resources
# the device's), accepted as offered (svcrdma: initiator depth = the
# request's, responder resources 0).
ktap_check "READ depths: client answers 8, issues 0; the server sees 8 to issue, 0 to answer" \
	depths "depths nfs" 8 0 -1 -1 "request 8 0;established 8 0;qp 8 1" "established 0 8;qp 1 8"
# Both ends ask for more than the other allows: each gets the other's bound.
ktap_check "READ depths: client answers 3, issues 5; server answers 2, issues up to 7: 3 and 2" \
	depths "depths bounded" 3 5 2 7 "request 3 5;established 3 2;qp 3 2" "established 2 3;qp 2 3"

# 17: the active side destroys its QP as soon as it is connected, while
# the passive side's accept has not heard back yet (for the first rounds
# that window is held open: inject "pause MS accept" on the server's
# device). Every round, the passive side sees ESTABLISHED, then
# DISCONNECTED within 1 s.
# In loop the server runs in cmB, where debugfs is not mounted: it writes
# the inject file through fd 3, opened here.
RACE=$NTRDMA_ROOT/build/user/rdma/tests/cm/ntrdma_cm_disc_race
if is_pair; then
	SINJ=$(peer "ls -d $DEBUGFS/ntrdma/*/ 2>/dev/null | head -1")inject
	RINJ=$SINJ
else
	SINJ=$(grep -l "^ntb: $REMOTE_DEV\$" "$DEBUGFS"/ntrdma/*/info 2>/dev/null |
		head -1 | xargs -r dirname)/inject
	RINJ=/proc/self/fd/3
fi
if [ ! -x "$RACE" ]; then
	ktap_fail "DISC during accept: $RACE not built"
elif ! is_pair && [ ! -w "$SINJ" ]; then
	ktap_fail "DISC during accept: no inject file for $REMOTE_DEV (test hooks)"
else
	run_pair "DISC during accept" "$RACE server $SIP $PORT 12 4 $RINJ" \
		"$RACE client $SIP $PORT 12" 3>"$(is_pair && echo /dev/null || echo "$SINJ")"
	rc=$?
	grep -E "no DISCONNECTED|instead|rounds" <<<"$SOUT" | head -6 | sed 's/^/# server> /'
	grep -E "no connection|rounds" <<<"$OUT" | head -3 | sed 's/^/# client> /'
	ktap_check "DISC during accept: the passive side sees DISCONNECTED, 12 of 12 rounds" \
		test "$rc" = 0 -a "$SRC" = 0
fi
PORT=$((PORT + 1))

# 18: the passive side disconnects as soon as a SEND arrived, the SEND's
# ACK still on its way: the SEND completes with success. The client holds
# that window open in 3 of 4 rounds: its next receive pass waits (inject
# "pause MS vx_rx" on its device, written through fd 3), and the DISC comes
# first on the command channel.
ACKR=$NTRDMA_ROOT/build/user/rdma/tests/cm/ntrdma_cm_ack_race
CINJ=$(grep -l "^ntb: $LOCAL_DEV\$" "$DEBUGFS"/ntrdma/*/info 2>/dev/null |
	head -1 | xargs -r dirname)/inject
if [ ! -x "$ACKR" ]; then
	ktap_fail "DISC before the ACK: $ACKR not built"
elif [ ! -w "$CINJ" ]; then
	ktap_fail "DISC before the ACK: no inject file for $LOCAL_DEV (test hooks)"
else
	run_pair "DISC before the ACK" "$ACKR server $SIP $PORT 3" \
		"$ACKR client $SIP $PORT 3 /proc/self/fd/3" 3>"$CINJ"
	rc=$?
	PORT=$((PORT + 1))
	if [ "$rc" = 0 ] && [ "$SRC" = 0 ]; then
		run_pair "DISC before the ACK" "$ACKR server $SIP $PORT 1" \
			"$ACKR client $SIP $PORT 1"
		rc=$?
	fi
	grep -E "round|rounds" <<<"$SOUT" | head -5 | sed 's/^/# server> /'
	grep -E "round|SENDs" <<<"$OUT" | head -5 | sed 's/^/# client> /'
	ktap_check "DISC before the ACK: the SEND succeeds, 3 rounds held and 1 not" \
		test "$rc" = 0 -a "$SRC" = 0
fi
PORT=$((PORT + 1))

# 19-22: libfabric's fi_pingpong over its verbs provider: FI_EP_MSG (rdma_cm
# connected RC QPs) and FI_EP_RDM (ofi_rxm over them; MPI libraries over OFI
# use it), with the receiver checking the data (-c). RDM runs with
# libfabric's defaults: rxm sizes its CQ for every peer of the universe,
# (tx + rx) x FI_UNIVERSE_SIZE entries, which a device must allow.
# fi_pingpong's own TCP exchange listens on PORT (-B / -P). In loop each
# end names its device (-d): libfabric's verbs provider otherwise takes the
# first one, whose address is in the other namespace (ENODEV).
FI_SDOM= FI_CDOM=
is_pair || { FI_SDOM="-d $(ibdev_of "$REMOTE_DEV")"; FI_CDOM="-d $CDEV"; }
fi_listening() { S "ss -Hltn 'sport = :$1' | grep -q ."; }
fi_pp() { # EP SIZE ITERS
	local f=/tmp/cm-fi.$$ rc args="-p verbs -e $1 -S $2 -I $3 -c"
	S "rm -f $f.*; (timeout $((T + 10)) fi_pingpong $args $FI_SDOM -B $PORT >$f.out 2>&1; echo \$? >$f.rc) </dev/null >/dev/null 2>&1 &"
	wait_for 15 fi_listening "$PORT" || ktap_diag "fi_pingpong: no listener on port $PORT after 15 s"
	OUT=$(C "timeout $T fi_pingpong $args $FI_CDOM -P $PORT $SIP" 2>&1)
	rc=$?
	wait_for 15 S "test -s $f.rc" || S "pkill -f 'fi_pingpong.*-B $PORT'"
	SRC=$(S "cat $f.rc 2>/dev/null")
	SOUT=$(S "cat $f.out 2>/dev/null")
	PORT=$((PORT + 1))
	# "64  100  =100  12k  0.30s  0.04  1504.06  0.00": sent, acked, usec/xfer
	local line us
	line=$(grep -E "^[0-9]+[kmg]? +$3 +=$3 " <<<"$OUT" | head -1)
	us=$(awk '{ print $7 }' <<<"$line")
	ktap_diag "fi_pingpong -e $1 -S $2: client exit $rc, server exit ${SRC:-none}: ${us:-?} us/xfer"
	[ "$rc" = 0 ] && [ "$SRC" = 0 ] && [ -n "$line" ] && return 0
	tool_says client <<<"$OUT"
	tool_says server <<<"$SOUT"
	dmesg_tail
	return 1
}
if ! command -v fi_pingpong >/dev/null; then
	for n in "MSG 64" "MSG 65536" "RDM 64" "RDM 65536"; do
		ktap_fail "fi_pingpong $n: fi_pingpong missing (libfabric-bin; make deps)"
	done
else
	ktap_check "fi_pingpong FI_EP_MSG 64 B: 100 checked round trips" fi_pp msg 64 100
	ktap_check "fi_pingpong FI_EP_MSG 64 KiB: 50 checked round trips" fi_pp msg 65536 50
	ktap_check "fi_pingpong FI_EP_RDM 64 B (libfabric's default CQ size): 100 checked round trips" \
		fi_pp rdm 64 100
	ktap_check "fi_pingpong FI_EP_RDM 64 KiB: 50 checked round trips" fi_pp rdm 65536 50
fi

# 23: nothing left behind: no QP, no cm_id (rdma resource)
sleep 1
left=$(rdma resource show qp 2>/dev/null | grep -c "$CDEV")
cm=$(rdma resource show cm_id 2>/dev/null | grep -c "$CDEV")
ktap_diag "after the runs: $left QPs, $cm cm_ids on $CDEV"
ktap_check "no QP or cm_id left on $CDEV" test "$left" -eq 0 -a "$cm" -eq 0

# stream_then CMD: a 60 s rdma_cm WRITE stream; CMD (taking an end away)
# once it moves data. Sets STREAM_RC (client exit) and STREAM_S (seconds
# from CMD to the client's exit).
stream_then() {
	local f=/tmp/cm-stream.$$
	S "(timeout 90 ib_write_bw -R -p $PORT -D 60 -s 65536 >$f.srv 2>&1 &)"
	wait_for 15 listening "$PORT" || ktap_diag "stream: no listener on port $PORT after 15 s"
	C "timeout 90 ib_write_bw -R -p $PORT -D 60 -s 65536 $SIP" >$f.cli 2>&1 &
	local cli=$!
	PORT=$((PORT + 1))
	sleep 6
	local t0=$SECONDS
	eval "$1"
	wait "$cli"
	STREAM_RC=$?
	STREAM_S=$((SECONDS - t0))
	ktap_diag "ib_write_bw -R exit $STREAM_RC after $STREAM_S s: $(grep -iE 'error|status|fail' $f.cli | head -3 | xargs)"
	rm -f $f.cli
}

# 24: the peer's driver goes away during an rdma_cm stream
if is_pair; then
	stream_then 'peer "modprobe -r ntrdma"'
else
	stream_then "echo $REMOTE_DEV > $NTB_DRV/unbind"
fi
ktap_check "peer driver gone during ib_write_bw -R: stream failed (exit $STREAM_RC, $STREAM_S s)" \
	test "$STREAM_RC" != 0 -a "$STREAM_RC" != 124 -a "$STREAM_S" -lt 30
S "pkill -f ib_write_bw" 2>/dev/null

# 25: it comes back: rping connects again
if is_pair; then peer "modprobe ntrdma"; else echo "$REMOTE_DEV" > $NTB_DRV/bind; fi
ends_up || ktap_diag "no ping to $SIP after the peer returned"
wait_for 15 port_is "$CDEV" PORT_ACTIVE
if run_pair "rping after" "rping -s -a $SIP -p $PORT -C 5 -S 256 -V" \
	"rping -c -a $SIP -p $PORT -C 5 -S 256 -V -v"; then
	n=$(grep -c 'ping data' <<<"$OUT")
	ktap_check "peer back: rping connects again ($n round trips)" [ "$n" -eq 5 ]
else
	ktap_fail "peer back: rping connects again"
fi
PORT=$((PORT + 1))

# 26: our own driver unloaded during an rdma_cm stream
UNLOAD_RC=
stream_then 'timeout 60 modprobe -r ntrdma; UNLOAD_RC=$?'
ktap_check "driver unloaded during ib_write_bw -R: modprobe -r exit ${UNLOAD_RC:-?}, stream exit $STREAM_RC after $STREAM_S s" \
	test "$UNLOAD_RC" = 0 -a "$STREAM_RC" != 0 -a "$STREAM_RC" != 124 -a "$STREAM_S" -lt 30
S "pkill -f ib_write_bw" 2>/dev/null
is_pair && peer "modprobe -r ntrdma"

if ! is_pair; then
	ip netns del cmA 2>/dev/null
	ip netns del cmB 2>/dev/null
fi
ktap_finish
