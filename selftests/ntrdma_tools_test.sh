#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Unmodified RDMA tools over NTRDMA's verbs face: rdma-core's ibv_devices,
# ibv_devinfo, ibv_rc_pingpong, ibv_srq_pingpong, ibv_ud_pingpong and
# ibv_uc_pingpong (also within one device), perftest (ib_*_bw, ib_*_lat) and
# qperf, each run between the two ends of the NTB (loop: the two ntrdma
# devices of this host; pair: this host and the peer).
# Every tool run is one subtest: it passes when the client (and the server)
# exit 0 within the timeout AND the output holds the expected figure (a
# positive bandwidth, latency or count), which is printed as a diag line.
# On failure the commands, the ends of both outputs and the kernel log are
# printed.
# Runs in flat mode (test bed: --flat 1) and in windowed mode (--flat 0).
#
# Then the data tools again in checked mode (direct_placement=0 on both
# hosts), the requester's placed_writes counter telling the paths apart. In
# windowed mode every WRITE already took the checked path: placed_writes
# must be 0 and the checked-mode rerun is skipped.
# Last, adaptive polling: ib_send_lat with the verbs face's rx_poll_us at 0
# and at 20000 on both hosts; polling must save most of the doorbells.
#
# Environment: TOOLS_TIMEOUT (60: seconds per client run), TOOLS_DEV=rxe
# runs the same tools against rdma_rxe on lo in this host (a check of the
# script itself on a reference device; no NTB needed), TOOLS_GID (GID
# index; default 0, the netdev's link-local address, on ntrdma).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

T=${TOOLS_TIMEOUT:-60}
GIDX=${TOOLS_GID:-}
PORT=18700 # one fresh TCP port per run
OUT=$NTRDMA_OUT/tools.$$
mkdir -p "$OUT"

# name|kind: kind is how the figure is parsed (see run_pp / run_perftest /
# run_qperf below).
NTESTS=36

ktap_header
ktap_plan $NTESTS

# ---- the two ends -------------------------------------------------------------
# CDEV: the client's ib device (here); SDEV: the server's (loop: here too;
# pair: on the peer); CNET/SNET: their netdevs; ADDR: the address the
# out-of-band TCP exchange connects to.
# SRV_HERE=1: the server on this host whatever the topology.
srv_sh() { if is_pair && [ -z "${SRV_HERE:-}" ]; then peer "$*"; else sh -c "$*"; fi; }

# ntrdma_ends MODPARAMS: load ntrdma on both hosts with MODPARAMS and set up
# the two ends (CDEV SDEV CNET SNET ADDR) over it.
ntrdma_ends() {
	# shellcheck disable=SC2086 # MODPARAMS: none, or words to split
	modprobe ntrdma $1 || fail_rest "modprobe ntrdma $1 failed"
	if is_pair; then peer "modprobe ntrdma $1" || fail_rest "modprobe ntrdma $1 on the peer failed"; fi
	install_provider || fail_rest "install_provider failed (no $PROVIDER_DIR/libntrdma-rdmav34.so?)"
	wait_for 10 ibdev_of "$LOCAL_DEV" >/dev/null
	CDEV=$(ibdev_of "$LOCAL_DEV")
	CNET=$(netdev_of "$LOCAL_DEV")
	# The same lookups on the server's host (functions of lib/verbs.sh,
	# written out: the peer's shell does not have them).
	q_ib="for d in /sys/class/infiniband/*; do [ \"\$(basename \"\$(readlink -f \$d/device)\")\" = $REMOTE_DEV ] && basename \$d; done"
	q_net="for i in \$(ls /sys/class/net); do [ \"\$(ethtool -i \$i 2>/dev/null | sed -n 's/^bus-info: //p')\" = $REMOTE_DEV ] && echo \$i; done"
	wait_for 10 eval '[ -n "$(srv_sh "$q_ib")" ]'
	SDEV=$(srv_sh "$q_ib" | head -1)
	SNET=$(srv_sh "$q_net" | head -1)
	[ -n "$CDEV" ] && [ -n "$SDEV" ] && [ -n "$CNET" ] && [ -n "$SNET" ] ||
		fail_rest "ib devices / netdevs: client ${CDEV:-none}/${CNET:-none} server ${SDEV:-none}/${SNET:-none}"
	# RoCE addressing: GID 0 is the netdev's link-local address; modify_qp
	# to RTR resolves the peer's GID through the IP stack, so both netdevs
	# must be up, with carrier and a link-local address that is no longer
	# tentative. In pair, IPv4 addresses on them carry the tools' own TCP
	# exchange; in loop it runs over 127.0.0.1.
	ip link set "$CNET" up
	srv_sh "ip link set $SNET up"
	ll_ready_cmd() { # NETDEV
		echo "[ \"\$(cat /sys/class/net/$1/carrier 2>/dev/null)\" = 1 ] &&
			ip -6 addr show dev $1 scope link | grep -q inet6 &&
			! ip -6 addr show dev $1 | grep -q tentative"
	}
	wait_for 15 sh -c "$(ll_ready_cmd "$CNET")" ||
		ktap_diag "$CNET: no carrier or link-local address: $(ip -br addr show dev "$CNET")"
	wait_for 15 srv_sh "$(ll_ready_cmd "$SNET")" ||
		ktap_diag "$SNET (server side): no carrier or link-local address: $(srv_sh "ip -br addr show dev $SNET")"
	if is_pair; then
		ip addr replace 10.79.1.1/24 dev "$CNET"
		peer "ip addr replace 10.79.1.2/24 dev $SNET"
		ADDR=10.79.1.2
		wait_for 15 ping -c 1 -W 1 "$ADDR" >/dev/null ||
			ktap_diag "no ping to $ADDR over $CNET"
	else
		ip link set lo up
		ADDR=127.0.0.1
	fi
}

if [ "${TOOLS_DEV:-}" = rxe ]; then
	modprobe rdma_rxe && { [ -e /sys/class/infiniband/rxe0 ] || rdma link add rxe0 type rxe netdev lo; } ||
		fail_rest "rdma link add rxe0 type rxe netdev lo failed"
	ip link set lo up
	CDEV=rxe0 SDEV=rxe0 CNET=lo SNET=lo ADDR=127.0.0.1
	: "${GIDX:=1}" # ::ffff:127.0.0.1 (0 is a link-local address lo cannot route)
else
	install_modules && ntb_pair || fail_rest "no NTB device pair"
	: "${GIDX:=0}"
	ntrdma_ends ""
fi
ktap_diag "client $CDEV ($CNET), server $SDEV ($SNET)$(is_pair && echo ' on the peer'), exchange over $ADDR, GID index $GIDX"
ktap_diag "GID[$GIDX] client: $(cat /sys/class/infiniband/$CDEV/ports/1/gids/$GIDX 2>/dev/null) server: $(srv_sh "cat /sys/class/infiniband/$SDEV/ports/1/gids/$GIDX" 2>/dev/null)"

# ---- helpers ---------------------------------------------------------------------
dmesg_tail() {
	dmesg | tail -n 15 | sed 's/^/# dmesg: /'
	if is_pair; then peer "dmesg | tail -n 15" | sed 's/^/# dmesg (peer): /'; fi
}

# What a failed run leaves for the report: commands, the error lines and
# ends of both outputs, the kernel log; the whole outputs are kept in
# $NTRDMA_OUT/tools.PID/NAME.{client,server}.txt.
ERR_RE='error|fail|couldn|unable|invalid|not supported|unexpected|abort'
explain() { # NAME CLIENT_CMD SERVER_CMD CLIENT_OUT SERVER_OUT
	local f=$OUT/${1//[^A-Za-z0-9_.-]/_}
	ktap_diag "client: $2"
	[ -n "$3" ] && ktap_diag "server: $3"
	printf '%s\n' "$2" "$4" >"$f.client.txt"
	printf '%s\n' "$3" "$5" >"$f.server.txt"
	{ grep -iE "$ERR_RE" <<<"$4" | head -n 8; tail -n 4 <<<"$4"; } | sed 's/^/# client> /'
	[ -n "$5" ] && { grep -iE "$ERR_RE" <<<"$5" | head -n 8; tail -n 4 <<<"$5"; } | sed 's/^/# server> /'
	ktap_diag "whole outputs: $f.{client,server}.txt"
	dmesg_tail
}

# Server in the background on the server's host; its output and exit status
# land in files there. srv_start TAG CMD; srv_wait TAG (exit status, 124 if
# it did not end in time); srv_out TAG; srv_kill TAG.
srv_start() {
	local f=/tmp/tools-srv.$1
	srv_sh "rm -f $f.out $f.rc $f.pid; (timeout $((T + 15)) $2 >$f.out 2>&1; echo \$? >$f.rc) </dev/null >/dev/null 2>&1 & echo \$! >$f.pid"
}
srv_listening() { # TCP_PORT [PREFIX: e.g. ip netns exec NS]
	srv_sh "${2:-} ss -Hltn 'sport = :$1' | grep -q ."
}
srv_wait() {
	local f=/tmp/tools-srv.$1 s
	wait_for "${2:-15}" srv_sh "test -s $f.rc" || { echo 124; return; }
	s=$(srv_sh "cat $f.rc")
	echo "${s:-125}"
}
srv_out() { srv_sh "cat /tmp/tools-srv.$1.out 2>/dev/null"; }
srv_kill() { # the subshell we started and the tool under it, by pid
	local f=/tmp/tools-srv.$1
	srv_sh "p=\$(cat $f.pid 2>/dev/null); [ -n \"\$p\" ] && { pkill -P \$p; kill \$p; } 2>/dev/null; rm -f $f.out $f.rc $f.pid; true"
}

# Positive finite number?
positive() { awk -v v="$1" 'BEGIN { exit !(v ~ /^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ && v + 0 > 0) }'; }

# pair_run: the server, then the client; sets CRC SRC COUT SOUT.
pair_run() { # TAG PORT SERVER_CMD CLIENT_CMD [WAIT: 0 = the server does not end]
	local tag=$1 port=$2 scmd=$3 ccmd=$4 w=${5:-15}
	srv_start "$tag" "$scmd"
	wait_for 10 srv_listening "$port" "${LPFX:-}" || ktap_diag "server not listening on $port after 10 s"
	COUT=$(timeout "$T" $ccmd 2>&1)
	CRC=$?
	SRC=
	[ "$w" = 0 ] || SRC=$(srv_wait "$tag" "$w")
	SOUT=$(srv_out "$tag")
	srv_kill "$tag"
}

verdict() { # NAME FIGURE_OK FIGURE_TEXT SCMD CCMD (MODE_TAG: appended to NAME)
	local name="$1${MODE_TAG:-}" ok=$2 fig=$3
	if [ "$ok" = 1 ]; then
		ktap_diag "$name: $fig"
		ktap_pass "$name"
	else
		ktap_diag "$name: client exit $CRC, server exit ${SRC:--}, figure: ${fig:-none}"
		explain "$name" "$5" "$4" "$COUT" "$SOUT"
		ktap_fail "$name"
	fi
}

# ---- 1-2: the device as rdma-core sees it ---------------------------------------------
out=$(timeout "$T" ibv_devices 2>&1)
rc=$?
n=$(awk 'NR > 2 && NF >= 2 { n++ } END { print n + 0 }' <<<"$out")
sed 's/^/# /' <<<"$out"
if [ $rc = 0 ] && positive "$n" && grep -qw "$CDEV" <<<"$out"; then
	ktap_diag "ibv_devices: $n device(s), $CDEV among them"
	ktap_pass "ibv_devices"
else
	ktap_diag "ibv_devices: exit $rc, $n device(s), $CDEV $(grep -qw "$CDEV" <<<"$out" || echo not) listed"
	dmesg_tail
	ktap_fail "ibv_devices"
fi

out=$(timeout "$T" ibv_devinfo -v -d "$CDEV" 2>&1)
rc=$?
maxqp=$(sed -n 's/^[[:space:]]*max_qp:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out" | head -1)
state=$(sed -n 's/^[[:space:]]*state:[[:space:]]*\([A-Z_]*\).*/\1/p' <<<"$out" | head -1)
mtu=$(sed -n 's/^[[:space:]]*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out" | head -1)
ll=$(sed -n 's/^[[:space:]]*link_layer:[[:space:]]*//p' <<<"$out" | head -1)
gid=$(grep -m1 "GID\[ *$GIDX\]" <<<"$out" | xargs)
sed -n '/hca_id/p;/transport/p;/max_qp:/p;/max_qp_rd_atom:/p;/atomic_cap/p;/max_srq:/p;/state/p;/active_mtu/p;/link_layer/p;/GID\[/p' <<<"$out" |
	sed 's/^/# /'
if [ $rc = 0 ] && positive "$maxqp" && positive "$mtu" && [ "$state" = PORT_ACTIVE ] && [ -n "$gid" ]; then
	ktap_diag "ibv_devinfo -v: max_qp $maxqp, port 1 $state, active_mtu $mtu, link_layer $ll, $gid"
	ktap_pass "ibv_devinfo -v"
else
	ktap_diag "ibv_devinfo -v: exit $rc, max_qp ${maxqp:-?}, port 1 ${state:-?}, active_mtu ${mtu:-?}, ${gid:-no GID[$GIDX]}"
	dmesg_tail
	ktap_fail "ibv_devinfo -v"
fi

# ---- 3-10: rdma-core's ping-pong examples -----------------------------------------------
# "8192000 bytes in 0.08 seconds = 819.20 Mbit/sec" and "... = 80.00 usec/iter"
# from both ends; -c makes the receiving end check the data.
run_pp() { # NAME TOOL ARGS...
	local name=$1 tool=$2 port=$((PORT++)) bw lat ok=0
	shift 2
	local scmd="$tool -d $SDEV -g $GIDX -p $port $*"
	local ccmd="$tool -d $CDEV -g $GIDX -p $port $* $ADDR"
	pair_run "pp$port" "$port" "$scmd" "$ccmd"
	bw=$(sed -n 's/.* = \([0-9.]*\) Mbit\/sec$/\1/p' <<<"$COUT" | head -1)
	lat=$(sed -n 's/.* = \([0-9.]*\) usec\/iter$/\1/p' <<<"$COUT" | head -1)
	if [ "$CRC" = 0 ] && [ "$SRC" = 0 ] && positive "$bw" && positive "$lat" &&
	   ! grep -qi 'invalid data' <<<"$COUT$SOUT"; then
		ok=1
	fi
	grep -qi 'invalid data' <<<"$COUT$SOUT" && ktap_diag "$name: the receiver reported invalid data"
	verdict "$name" $ok "${bw:-?} Mbit/s, ${lat:-?} usec/iter ($(grep -m1 'bytes in' <<<"$COUT"))" "$scmd" "$ccmd"
}

run_pp "ibv_rc_pingpong -s 4096" ibv_rc_pingpong -c -s 4096 -n 500
run_pp "ibv_rc_pingpong -s 65536" ibv_rc_pingpong -c -s 65536 -n 200
run_pp "ibv_rc_pingpong -s 1048576" ibv_rc_pingpong -c -s 1048576 -n 20
run_pp "ibv_rc_pingpong -e (CQ events)" ibv_rc_pingpong -c -e -s 4096 -n 500
run_pp "ibv_srq_pingpong" ibv_srq_pingpong -c -q 4 -s 4096 -n 100
# UD: datagrams of up to the port MTU (4096), a 40-byte GRH before each
run_pp "ibv_ud_pingpong -s 2048" ibv_ud_pingpong -c -s 2048 -n 500
# UC: connected, unacknowledged; to the other end, then between two QPs of
# the client's device (same-device loopback, its exchange over 127.0.0.1)
run_pp "ibv_uc_pingpong -s 4096" ibv_uc_pingpong -c -s 4096 -n 500
ip link set lo up
SDEV=$CDEV ADDR=127.0.0.1 SRV_HERE=1 run_pp "ibv_uc_pingpong -s 4096 (same device)" \
	ibv_uc_pingpong -c -s 4096 -n 500

# ---- 11-18: perftest ----------------------------------------------------------------------
# Without rdma_cm: the QPs are connected over perftest's own TCP exchange,
# -x GID index, -F no cpufreq warning. The result line follows the
# " #bytes ..." header: bandwidth tests print BW average (MB/s, column 4),
# latency tests t_typical (usec) (perf_figure, lib/verbs.sh).

run_perftest() { # TEST ARGS...
	local test=$1 port=$((PORT++)) line v ok=0 col
	shift
	local scmd="${PT_PREFIX:-}ib_$test -d $SDEV -i 1 -x $GIDX -F -p $port $*"
	local ccmd="${PT_PREFIX:-}ib_$test -d $CDEV -i 1 -x $GIDX -F -p $port $* $ADDR" try np
	# perftest fits its cycle clock to gettimeofday() for its report; on a
	# busy guest the fit fails ("Can't produce a report", exit 1, and the
	# server fails its last handshake): the tool's problem (doc/testbed.md), tried
	# again on a fresh port, said in a diag.
	for try in 1 2 3; do
		pair_run "pt$port" "$port" "$scmd" "$ccmd"
		grep -q "Can't produce a report" <<<"$COUT$SOUT" || break
		np=$((PORT++))
		ktap_diag "ib_$test: perftest could not calibrate its clock ($(grep -o 'r^2: [0-9.e-]*' <<<"$COUT$SOUT" | head -1)): try $((try + 1))"
		scmd=${scmd/-p $port /-p $np }
		ccmd=${ccmd/-p $port /-p $np }
		port=$np
	done
	if [[ $test == *_lat ]]; then col='^t_typical'; else col='^BW.average'; fi
	v=$(perf_figure "$COUT" "$col")
	line=$(grep -A1 -m1 '^ *#bytes' <<<"$COUT" | tail -n 1)
	# Both ends time the same run; perftest's cycle clock sometimes fails
	# under TCG ("inf" latency, "0.00" bandwidth on one end while the other
	# end measured it): take the other end's figure.
	if ! positive "$v"; then
		v=$(perf_figure "$SOUT" "$col")
		[ -n "$v" ] && ktap_diag "ib_$test: the client's clock gave no figure; the server's: $v"
	fi
	if [ "$CRC" = 0 ] && [ "$SRC" = 0 ] && positive "$v"; then ok=1; fi
	# Neither end has a figure (inf, nan or 0.00): perftest's clock is
	# broken in this guest boot (TCG). The run still counts when both ends
	# exited 0 after every iteration asked for (the #iterations column).
	local want it
	want=$(sed -n 's/.*-n \([0-9]*\).*/\1/p' <<<"$*")
	it=$(awk '{ print $2 }' <<<"$line")
	if [ $ok = 0 ] && [ "$CRC" = 0 ] && [ "$SRC" = 0 ] && [ -n "$want" ] &&
	   [ "$it" = "$want" ] && ! positive "$v"; then
		ktap_diag "ib_$test: all $it iterations done on both ends, but perftest's clock gives no figure in this guest (cpu MHz: $(awk -F: '/cpu MHz/ { print $2; exit }' /proc/cpuinfo | xargs))"
		ok=1
	fi
	if [[ $test == *_lat ]]; then v="${v:-?} usec typical"; else v="${v:-?} MB/s average"; fi
	verdict "ib_$test" $ok "$v ($(xargs <<<"$line"))" "$scmd" "$ccmd"
}

run_perftest send_bw -s 65536 -n 500
run_perftest write_bw -s 65536 -n 500
run_perftest read_bw -s 65536 -n 500
run_perftest atomic_bw -n 1000
run_perftest send_lat -s 2 -n 1000
run_perftest write_lat -s 2 -n 1000
run_perftest read_lat -s 2 -n 1000
run_perftest atomic_lat -n 1000

# ---- 19-24: qperf --------------------------------------------------------------------------
# qperf (0.4.11) sets no GRH when it connects QPs itself. ntrdma's port has
# an InfiniBand link layer, which takes a LID-only address: qperf connects
# directly, the devices named with -li/-ri, over the tools' TCP address. A
# RoCE port (rxe) needs a GRH, so there qperf runs only with rdma_cm (-cm1),
# which picks the device from the IP address. Its server listens on its own
# TCP port (-lp) and takes the test parameters from the client.
QNS= QCM=
if [ "${TOOLS_DEV:-}" = rxe ]; then
	# rdma_cm cannot resolve over rxe on lo: rxe1 on a dummy netdev with an
	# address of this host (rxe loops the packets back itself).
	ip link add tdummy type dummy 2>/dev/null
	ip addr replace 10.79.9.1/32 dev tdummy && ip link set tdummy up &&
		{ [ -e /sys/class/infiniband/rxe1 ] || rdma link add rxe1 type rxe netdev tdummy; } ||
		ktap_diag "rxe1 on a dummy netdev failed"
	QADDR=10.79.9.1 QSRV= QCM=-cm1
else
	QADDR=$ADDR QSRV= QCM="-li $CDEV:1 -ri $SDEV:1"
fi
run_qperf() { # TEST
	local test=$1 port=$((PORT++)) v u ok=0
	local scmd="$QSRV qperf -lp $port"
	local ccmd="qperf -lp $port $QCM -t 2 $QADDR $test"
	LPFX=$QSRV pair_run "qp$port" "$port" "$scmd" "$ccmd" 0
	read -r v u < <(awk '$1 == "bw" || $1 == "latency" { print $3, $4; exit }' <<<"$COUT")
	if [ "$CRC" = 0 ] && positive "$v"; then ok=1; fi
	verdict "qperf $test" $ok "${v:-?} ${u:-}" "$scmd" "$ccmd"
}

for t in rc_bw rc_rdma_write_bw rc_rdma_read_bw rc_lat rc_rdma_write_lat rc_rdma_read_lat; do
	run_qperf $t
done
if [ -n "$QNS" ]; then
	ip -n $QNS link set "$SNET" netns 1
	ip netns del $QNS
	ip addr del 10.79.1.1/24 dev "$CNET" 2>/dev/null
	ip addr flush dev "$SNET" scope global 2>/dev/null
	ip link set "$SNET" up
fi
[ "${TOOLS_DEV:-}" = rxe ] && { rdma link delete rxe1; ip link del tdummy; } 2>/dev/null

# ---- 25-28: the ends are still sane after all of it -------------------------------------
st=$(port_state "$CDEV")
ktap_check "client port after the tools: ${st:-?}" test "$st" = PORT_ACTIVE
sst=$(srv_sh "ibv_devinfo -d $SDEV" 2>/dev/null | sed -n 's/^[[:space:]]*state:[[:space:]]*\([A-Z_]*\).*/\1/p' | head -1)
ktap_check "server port after the tools: ${sst:-?}" test "$sst" = PORT_ACTIVE
# No QP, CQ or MR left behind by the tools (rdma resource counts).
res=$(rdma resource show "$CDEV" 2>/dev/null | xargs)
ktap_diag "rdma resource: ${res:-none}"
leak() { rdma resource show qp link "$CDEV/1" 2>/dev/null | grep -v 'type GSI\|type SMI' | grep -c 'lqpn'; }
wait_for 5 eval '[ "$(leak)" = 0 ]'
ktap_check "no QP left on $CDEV after the tools exited ($(leak) left)" test "$(leak)" = 0

# 26: rdma statistic shows the traffic (the device's hardware counters)
stat_of() { rdma statistic show link "$CDEV/1" 2>/dev/null | tr ' ' '\n' | awk -v k="$1" '$0 == k { getline; print; exit }'; }
txb=$(stat_of tx_bytes) rxs=$(stat_of rx_segments)
ktap_diag "rdma statistic $CDEV/1: $(rdma statistic show link "$CDEV/1" 2>/dev/null | cut -c1-300)"
if [ "${TOOLS_DEV:-}" = rxe ]; then
	ktap_skip "rdma statistic counts the traffic" "ntrdma's counters; rxe names its own"
else
	ktap_check "rdma statistic counts the traffic: tx_bytes ${txb:-?}, rx_segments ${rxs:-?}" \
		eval "positive '${txb:-0}' && positive '${rxs:-0}' && [ '${txb:-0}' -gt 1000000 ]"
fi

# ---- 29-33: checked mode (direct_placement=0 on both hosts) --------------------------------
# The target-checked path every WRITE takes where the peer's kernel is not
# trusted to place (doc/placement.md, trust model): data tools again, and the
# requester's placed_writes counter shows which path carried the WRITEs.
CHECKED=("placed_writes counts the direct WRITEs" "ibv_rc_pingpong -s 65536 (checked)"
	"ib_write_bw (checked)" "ib_read_bw (checked)" "checked mode placed nothing")
if [ "${TOOLS_DEV:-}" = rxe ]; then
	for n in "${CHECKED[@]}"; do ktap_skip "$n" "ntrdma's placement modes"; done
elif ntrdma_windowed; then
	placed=$(stat_of placed_writes)
	ktap_check "windowed mode: nothing placed directly (placed_writes ${placed:-none})" \
		test "${placed:-none}" = 0
	for n in "${CHECKED[@]:1}"; do ktap_skip "$n" "windowed mode: every WRITE above took the checked path"; done
else
	placed=$(stat_of placed_writes)
	ktap_check "${CHECKED[0]}: ${placed:-none}" positive "${placed:-0}"
	modprobe -r ntrdma
	is_pair && peer "modprobe -r ntrdma"
	ntrdma_ends direct_placement=0
	MODE_TAG=" (checked)"
	run_pp "ibv_rc_pingpong -s 65536" ibv_rc_pingpong -c -s 65536 -n 200
	run_perftest write_bw -s 65536 -n 500
	run_perftest read_bw -s 65536 -n 500
	MODE_TAG=
	placed=$(stat_of placed_writes)
	dp=$(cat /sys/module/ntrdma/parameters/direct_placement)
	ktap_check "${CHECKED[4]}: placed_writes ${placed:-none}, direct_placement $dp" \
		test "${placed:-none}" = 0 -a "$dp" = N
fi

# ---- 34-36: adaptive polling (rx_poll_us, both hosts) -------------------------------------
# 500 round trips of ib_send_lat -e with rx_poll_us 0 and then 20000 (20 ms)
# on both hosts. Polling yields to any other runnable task, so the test
# gives it a CPU of its own: the tools sleep for completion events (-e) on
# CPU 1 (taskset), the NTB's interrupts, and with them the receive work,
# go to CPU 0. Segments found by polling (the devices' rx_polled counters,
# both hosts): none without, some with. The NTB interrupts taken
# (vdb_events, both hosts) are said, not checked (pinned so, about 1% of
# those without polling; unpinned, in a loop guest, polling may never
# find the CPU free).
POLL=("ib_send_lat -e (rx_poll_us=0)" "ib_send_lat -e (rx_poll_us=20000)"
	"polling found segments only when on")
both() { sh -c "$1"; is_pair && peer "$1"; }
sum_both() { both "$1" | awk '{ n += $1 } END { print n + 0 }'; }
doorbells() { sum_both "cat $DEBUGFS/ntrdma/*/info 2>/dev/null | sed -n 's/^vdb_events: //p'"; }
polled() {
	sum_both "for d in /sys/class/infiniband/ntrdma*; do rdma statistic show link \${d##*/}/1; done 2>/dev/null | tr ' ' '\n' | awk '\$0 == \"rx_polled\" { getline; print }'"
}
set_poll() { both "echo $1 > /sys/module/ntrdma/parameters/rx_poll_us"; }
# ntb_irqs_to CPU: every interrupt of the NTB (ntb_hw_ivshmem) to CPU
ntb_irqs_to() {
	both "for i in \$(awk -F: '/ntb_hw_ivshmem/ { print \$1 }' /proc/interrupts); do echo $1 > /proc/irq/\$((i))/smp_affinity_list; done 2>/dev/null"
}
if [ "${TOOLS_DEV:-}" = rxe ]; then
	for n in "${POLL[@]}"; do ktap_skip "$n" "ntrdma's rx_poll_us"; done
else
	ntb_irqs_to 0
	set_poll 0
	d0=$(doorbells) p0=$(polled)
	PT_PREFIX="taskset -c 1 " MODE_TAG=" -e (rx_poll_us=0)" run_perftest send_lat -e -s 2 -n 500
	d1=$(doorbells) p1=$(polled)
	set_poll 20000
	PT_PREFIX="taskset -c 1 " MODE_TAG=" -e (rx_poll_us=20000)" run_perftest send_lat -e -s 2 -n 500
	d2=$(doorbells) p2=$(polled)
	set_poll 0
	ntb_irqs_to 0-1
	ktap_diag "NTB interrupts: $((d1 - d0)) without polling, $((d2 - d1)) with"
	ktap_check "${POLL[2]}: rx_polled +$((p1 - p0)) without, +$((p2 - p1)) with" \
		test $((p1 - p0)) = 0 -a $((p2 - p1)) -gt 0
fi

rmdir "$OUT" 2>/dev/null # kept when a run failed
ktap_finish
