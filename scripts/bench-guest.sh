#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make bench, guest side (run in guest a by scripts/bench.sh through
# scripts/testbed.sh --flat 1): measures every system in turn, round after
# round, so that drift hits all of them alike, and appends one record per
# measurement to $NTRDMA_OUT/samples.tsv (format: scripts/bench_report/report.hpp):
#   topo system metric unit round value cpu_seconds bytes note
# A system that is absent or a test it does not support gives value NA and
# the reason. Guest CPU seconds are busy time from /proc/stat (user, nice,
# system, irq, softirq, steal) of every guest, taken around the client run.
# perftest's throughput rows also get the kernel's CPU per message of each
# end (system, irq, softirq): perftest spins on its CQs in user space, so
# this is the driver's work (a side's own row: "... kernel CPU, responder").
#
# Every tool's raw output is kept in $NTRDMA_OUT/raw/.
#
# Environment: BENCH_REPEATS (3), BENCH_SECS (2: seconds per throughput run),
# BENCH_LAT_ITERS (1000: iterations per perftest latency run), BENCH_LINK (1:
# measure the copy limits: the copy probe and ntb_perf; BENCH_PROBE_RUNS (8)
# and BENCH_PROBE_MIB (1024): a probe sample is the best of that many runs of
# that many MiB), BENCH_DOORBELL (as
# BENCH_LINK: the doorbell round trip), BENCH_ETH ("ntb_netdev ntr0 ntr0-win
# ntr0-tcp veth"; ntr0-win: ntrdma in windowed mode, on the NTB without a
# flat window that ntb_netdev uses; ntr0-tcp: ntrdma over TCP, on lo in
# loop, on ntb_netdev in pair: see tcp_up), BENCH_ETH_TESTS ("tcp1 tcp4
# udp64 sp:tcp sp:tcp:bp sp:udp sp:udp:bp"; sp: sockperf ping-pong, bp:
# with busy polling for BENCH_BUSY_POLL_US (2000) us), BENCH_RDMA
# ("ntrdma ntrdma-poll ntrdma-win ntrdma-tcp rxe siw rxe@ntb_netdev
# siw@ntb_netdev ntrdma-tcp@ntb_netdev rxe@ntr0": ntrdma-poll with adaptive
# polling (rx_poll_us=50), ntrdma-win in windowed mode, ntrdma-tcp over TCP
# on lo (loop topology only) and ntrdma-tcp@ntb_netdev over TCP on
# ntb_netdev between the two guests (pair only); when asked for,
# ntrdma-pull (every READ up to 1 MiB pulled by the requester:
# read_pull_max), ntrdma-dma (every direct placement by the DMA channel:
# place_copybreak=0) and ntrdma-old, an earlier revision (scripts/bench.sh
# builds it: BENCH_OLD_REV); rxe and siw on the loopback path are the "no
# link" reference, DRV@NETDEV is what a user with an NTB would run instead
# of ntrdma, a software RDMA driver over an Ethernet netdev of the NTB, on
# both hosts: pair topology only),
# BENCH_RDMA_TESTS (see below; fi:EP:SIZE is libfabric's fi_pingpong,
# BENCH_FI_ITERS (100) and 100 times as many round trips; pp:KIND:SIZE is
# rdma-core's ibv_KIND_pingpong, BENCH_PP_ITERS (1000)), BENCH_STORAGE ("nvmeof-rdma nvmeof-tcp@ntr0
# iser iscsi-tcp@ntr0 nfs-rdma nfs-tcp@ntr0": NVMe over Fabrics, iSCSI and
# NFSv4.2 over the verbs face and over TCP on ntr0, pair topology only),
# BENCH_STORAGE_TESTS (NVMe-oF and iSCSI) and BENCH_NFS_TESTS ("RW:BS:QD
# ...", fio; see storage_label).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. selftests/lib/env.sh
. selftests/lib/verbs.sh

REPEATS=${BENCH_REPEATS:-3}
SECS=${BENCH_SECS:-2}
LAT_ITERS=${BENCH_LAT_ITERS:-1000}
LINK=${BENCH_LINK:-1}
DOORBELL=${BENCH_DOORBELL:-$LINK}
ETH_SYSTEMS=${BENCH_ETH-"ntb_netdev ntr0 ntr0-win ntr0-tcp veth"}
ETH_TESTS=${BENCH_ETH_TESTS:-"tcp1 tcp4 udp64 sp:tcp sp:tcp:bp sp:udp sp:udp:bp"}
RDMA_SYSTEMS=${BENCH_RDMA-"ntrdma ntrdma-poll ntrdma-win ntrdma-tcp rxe siw rxe@ntb_netdev siw@ntb_netdev ntrdma-tcp@ntb_netdev rxe@ntr0"}
RDMA_TESTS=${BENCH_RDMA_TESTS:-"write_bw:64 write_bw:4096 write_bw:65536 read_bw:64 read_bw:4096
	read_bw:65536 send_bw:64 send_bw:4096 send_bw:65536 send_lat:2 send_lat:64 send_lat:4096 write_lat:2
	read_lat:2 qperf:rc_bw qperf:rc_lat fi:msg:64 fi:msg:4096 fi:msg:65536 fi:rdm:64
	fi:rdm:4096 fi:rdm:65536 pp:rc:64 pp:rc:4096 pp:rc:65536 pp:ud:64 pp:uc:64"}
FI_ITERS=${BENCH_FI_ITERS:-100}
PP_ITERS=${BENCH_PP_ITERS:-1000}
BUSY_US=${BENCH_BUSY_POLL_US:-2000}
STORAGE_SYSTEMS=${BENCH_STORAGE-"nvmeof-rdma nvmeof-tcp@ntr0 iser iscsi-tcp@ntr0 nfs-rdma nfs-tcp@ntr0"}
STORAGE_TESTS=${BENCH_STORAGE_TESTS:-"randread:4k:1 randread:4k:16 randwrite:4k:16 read:128k:8 write:128k:8"}
NFS_TESTS=${BENCH_NFS_TESTS:-"write:1m:4 read:1m:4"}
FIO_SIZE= STORAGE_NOTE=
TOPO=${NTRDMA_TOPO:-host}
SAMPLES=$NTRDMA_OUT/samples.tsv
PERF_ORDER=${NTB_PERF_ORDER:-27}
PERF_MAX_MW=${NTB_PERF_MAX_MW:-4194304}
A_IP=10.79.0.1
B_IP=10.79.0.2
HZ=$(getconf CLK_TCK)
PORT=18600 # perftest / iperf3 ports, one fresh port per run

log() { echo "bench: $*" >&2; }

# record SYSTEM METRIC UNIT ROUND VALUE CPU BYTES [NOTE [CPU_A CPU_B [MSGS]]]
# (CPU_A, CPU_B: the client's and the server's guest, pair topology; NA.
# MSGS: the messages (latency round trips) the CPU time covers; 0: none)
record() {
	local note=${8:-}
	note=${note//$'\t'/ }
	note=${note//$'\n'/ }
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$TOPO" "$1" "$2" "$3" "$4" "$5" \
		"$6" "$7" "$note" "${9:-NA}" "${10:-NA}" "${11:-0}" >>"$SAMPLES"
	if [ "$5" = NA ]; then
		log "round $4 $1 / $2: n/a ($note)"
	else
		log "round $4 $1 / $2: $5 $3 (cpu $6 s, $7 bytes)"
	fi
}

# stat_now SUM: SUM of /proc/stat's cpu line fields (jiffies) in this
# guest and in guest b (pair topology; else 0).
stat_now() {
	local prog="\$1 == \"cpu\" { print $1 }" a b=0
	a=$(awk "$prog" /proc/stat)
	if is_pair; then b=$(peer "awk '$prog' /proc/stat") || b=0; fi
	echo "$a ${b:-0}"
}
BUSY='$2 + $3 + $4 + $7 + $8 + $9'	# user nice system irq softirq steal
KERNEL='$4 + $7 + $8'			# system irq softirq
cpu_now() { stat_now "$BUSY"; }
# seconds between two cpu_now readings: all, a, b (a and b NA in loop)
cpu_delta() { # BEFORE AFTER
	awk -v x="$1" -v y="$2" -v hz="$HZ" -v pair="$(is_pair && echo 1)" 'BEGIN {
		split(x, p, " "); split(y, q, " "); a = (q[1] - p[1]) / hz; b = (q[2] - p[2]) / hz
		if (pair) printf "%.2f %.2f %.2f\n", a + b, a, b; else printf "%.2f NA NA\n", a + b }'
}

# measure SYSTEM METRIC UNIT ROUND FUNC [ARGS]: FUNC sets VAL and BYTES, or
# returns non-zero with NOTE set. CPU time is taken around FUNC; functions
# that start servers do so before calling cpu_mark.
CPU0=
cpu_mark() { CPU0=$(cpu_now); }
RAW_TAG=raw
save_raw() { # SUFFIX TEXT
	mkdir -p "$NTRDMA_OUT/raw"
	printf '%s\n' "$2" >"$NTRDMA_OUT/raw/$RAW_TAG$1.txt"
}
measure() {
	local sys=$1 metric=$2 unit=$3 round=$4 c1 cpu cpu_a cpu_b
	shift 4
	VAL='' BYTES=0 NOTE='' CPU0='' P99='' MEAN='' MSGS=0 CPU_SET='' KCPU='' KMSGS=0
	RAW_TAG="r$round-${sys//[^A-Za-z0-9_@]/_}-${metric//[^A-Za-z0-9_]/_}"
	if "$@" && [ -n "$VAL" ]; then
		c1=$(cpu_now)
		read -r cpu cpu_a cpu_b < <(cpu_delta "${CPU0:-$c1}" "$c1")
		# the tool measured its timed run itself ("ALL A B" seconds)
		[ -n "$CPU_SET" ] && read -r cpu cpu_a cpu_b <<<"$CPU_SET"
		record "$sys" "$metric" "$unit" "$round" "$VAL" "$cpu" "$BYTES" "$NOTE" "$cpu_a" "$cpu_b" "$MSGS"
		# a latency's tail, from the same run
		[ -n "$P99" ] && record "$sys" "$metric p99" "$unit" "$round" "$P99" 0 0 \
			"99th percentile of the same run"
		# beside a tool that prints only a mean (fi_pingpong, qperf)
		[ -n "$MEAN" ] && record "$sys" "$metric mean" "$unit" "$round" "$MEAN" 0 0 \
			"mean of the same run"
		[ -z "$KCPU" ] || kernel_rows "$sys" "$metric" "$round"
	else
		record "$sys" "$metric" "$unit" "$round" NA 0 0 "${NOTE:-failed}"
	fi
}

# ---- the emulated NTB: ntb_hw_ivshmem with or without the flat window -------
# Stock clients (ntb_perf, ntb_transport) need flat_window=0, ntrdma needs 1.
HW_MODE=
hw_mode() { # 0|1
	[ "$HW_MODE" = "$1" ] && return 0
	clients_down
	local cmd="rmmod ntb_hw_ivshmem 2>/dev/null; modprobe ntb_hw_ivshmem flat_window=$1"
	sh -c "$cmd" || return 1
	if is_pair; then peer "$cmd" || return 1; fi
	HW_MODE=$1
	wait_for 20 ntb_pair
}

# ntrdma-old: an earlier revision's modules and provider, built on the host
# by scripts/build-old.sh (BENCH_OLD_DIR), loaded from their paths in place
# of the current ones (flat window on); old_down puts the current back.
old_up() {
	local d=${BENCH_OLD_DIR:-} cmd
	[ -n "$d" ] && [ -f "$d/ntrdma.ko" ] ||
		{ SETUP_NOTE="no earlier build (BENCH_OLD_DIR, from scripts/build-old.sh)"; return 1; }
	clients_down
	cmd="rmmod ntb_hw_ivshmem 2>/dev/null; modprobe ntb && modprobe ib_uverbs &&
	     insmod $d/ntb_hw/ntb_hw_ivshmem.ko flat_window=1 && insmod $d/ntrdma.ko &&
	     mkdir -p /etc/libibverbs.d && echo 'driver $d/libntrdma' > /etc/libibverbs.d/ntrdma.driver"
	sh -c "$cmd" || { SETUP_NOTE="loading the earlier build failed"; return 1; }
	if is_pair; then peer "$cmd" || { SETUP_NOTE="loading the earlier build on b failed"; return 1; }; fi
	# what eth_up asks for is loaded: hw_mode 1 and modprobe keep it
	HW_MODE=1
	wait_for 20 ntb_pair
}

old_down() {
	local cmd="rmmod ntrdma ntb_hw_ivshmem 2>/dev/null; rm -f /etc/libibverbs.d/ntrdma.driver; true"
	sh -c "$cmd"
	if is_pair; then peer "$cmd"; fi
	HW_MODE=
}

clients_down() {
	local cmd="modprobe -r ntb_perf ntb_netdev ntb_transport ntrdma 2>/dev/null; true"
	sh -c "$cmd"
	if is_pair; then peer "$cmd"; fi
	ip netns del bA 2>/dev/null
	ip netns del bB 2>/dev/null
	return 0
}

# ---- latency floor: the doorbell round trip (ntb_pingpong) ----------------------
# With delay_ms=0 each side rings the other's doorbell as soon as its own
# rang: the local device's count grows by one per round trip. Every latency
# that needs the target to act costs at least this.
doorbell_run() {
	local dir c0 c1 t0 t1 n mod="modprobe ntb_pingpong delay_ms=0"
	hw_mode 0 || { NOTE="ntb_hw_ivshmem flat_window=0 did not come up"; return 1; }
	sh -c "$mod" || { NOTE="modprobe ntb_pingpong failed"; return 1; }
	if is_pair; then peer "$mod" || { NOTE="modprobe ntb_pingpong on b failed"; return 1; }; fi
	dir=$DEBUGFS/ntb_pingpong/$LOCAL_DEV
	sleep 1
	cpu_mark
	c0=$(cat "$dir/count" 2>/dev/null) t0=$(date +%s%N)
	sleep "$SECS"
	c1=$(cat "$dir/count" 2>/dev/null) t1=$(date +%s%N)
	modprobe -r ntb_pingpong
	if is_pair; then peer "modprobe -r ntb_pingpong"; fi
	n=$((${c1:-0} - ${c0:-0}))
	[ "$n" -gt 0 ] || { NOTE="ntb_pingpong: no round trip in $SECS s (count ${c0:-?} -> ${c1:-?})"; return 1; }
	VAL=$(awk -v t="$((t1 - t0))" -v n="$n" 'BEGIN { printf "%.1f", t / 1000 / n }')
	BYTES=0 MSGS=$n
	NOTE="ntb_pingpong delay_ms=0: $n round trips in $(((t1 - t0) / 1000000)) ms"
}

# ---- link limit: the copy probe of ntb_hw_ivshmem (ntb_hw/ntb_hw_ivshmem_probe.c) ---
# By CPU into the peer's MW 0 (what ntb_transport uses) or, through
# the flat window, into 4 MiB the peer exported (what ntrdma uses), by CPU or
# by the port's DMA engine. Unlike ntb_perf it keeps source and window apart
# in QEMU TCG's direct-mapped TLB.
PROBE_DIR=$DEBUGFS/ntb_hw_ivshmem
probe_cmd() { # SIDE(local|peer) CMD: one copy_probe command
	local f="$PROBE_DIR/$LOCAL_DEV/copy_probe"
	if [ "$1" = peer ]; then
		f="$PROBE_DIR/$REMOTE_DEV/copy_probe"
		peer "echo $2 >$f" || { NOTE="copy_probe $2 on the peer port failed"; return 1; }
		return 0
	fi
	echo "$2" >"$f" 2>/dev/null || { NOTE="copy_probe $2: $(cat "$f" 2>/dev/null | head -1)"; return 1; }
}
# One sample is the best of PROBE_RUNS probe runs of PROBE_MIB each: the
# link's capacity, as a ping's minimum is its latency floor. This host's
# memory-bound speed swings in phases of seconds that no guest setting moves
# (a native memcpy of 64 MiB on an idle host: 12.8-23.1 GB/s between 250 ms
# windows; a pair guest's 1 GiB copies: ~1400 or ~2300 MB/s for 5-20 s at a
# time, with DAMON off, with the QEMUs pinned, with no other load); the
# median of the runs followed those phases, the best of them far less.
PROBE_RUNS=${BENCH_PROBE_RUNS:-8}
PROBE_MIB=${BENCH_PROBE_MIB:-1024}
copyprobe_run() { # window|flat|flat_dma
	local f="$PROBE_DIR/$LOCAL_DEV/copy_probe" rc=0 i out all=""
	hw_mode 1 || { NOTE="ntb_hw_ivshmem flat_window=1 did not come up"; return 1; }
	[ -e "$f" ] || { NOTE="no $f (ntb_hw_ivshmem without the probe)"; return 1; }
	echo "$PROBE_MIB" >/sys/module/ntb_hw_ivshmem/parameters/copy_probe_mib ||
		{ NOTE="cannot set copy_probe_mib=$PROBE_MIB"; return 1; }
	if [ "$1" != window ]; then probe_cmd peer export || return 1; fi
	cpu_mark
	for i in $(seq "$PROBE_RUNS"); do
		probe_cmd local "$1" || { rc=1; break; }
		out=$(cat "$f")
		all+="$i: $out"$'\n'
	done
	if [ "$1" != window ]; then probe_cmd peer unexport || rc=1; fi
	save_raw "" "$all"
	[ "$rc" = 0 ] || return 1
	local how="CPU copy"
	[ "$1" = flat_dma ] && how="the port's DMA engine (a kernel worker in this emulation)"
	copy_best "$all" "ntb_hw_ivshmem copy_probe $1 of $PROBE_MIB MiB, $how, from $LOCAL_DEV" "copy_probe $1"
}

# copy_best OUTPUTS NOTE TOOL: copy_rate of the fastest line of OUTPUTS;
# BYTES becomes the bytes of all lines, which the CPU time covers.
copy_best() {
	local best total n
	n=$(grep -c "MBytes/s" <<<"$1")
	best=$(grep "MBytes/s" <<<"$1" | sort -t, -k2 -n | tail -1)
	total=$(grep -o "copied [0-9]* bytes" <<<"$1" | awk '{ s += $2 } END { print s + 0 }')
	copy_rate "$best" "$2, best of $n runs" "$3" || return 1
	BYTES=$total
}

# copy_rate OUTPUT NOTE TOOL: VAL (MB/s) and BYTES from a line such as
# "[0: ]copied 134217728 bytes in 54927 usecs, 2443 MBytes/s" (the probe's and ntb_perf's).
copy_rate() {
	if [[ $1 =~ copied\ ([0-9]+)\ bytes\ in\ ([0-9]+)\ usecs ]]; then
		BYTES=${BASH_REMATCH[1]}
		VAL=$(awk -v b="$BYTES" -v u="${BASH_REMATCH[2]}" 'BEGIN { printf "%.1f", b / u }')
		NOTE=$2
		return 0
	fi
	NOTE="$3 gave no result: ${1:-nothing}"
	return 1
}

# ---- the stock tool: ntb_perf (CPU copy) ---------------------------------------
# Shown for comparison; it swings ~14x under TCG (ntb_hw/ntb_hw_ivshmem_probe.c
# says why).
ntb_perf_run() {
	local dev run out
	hw_mode 0 || { NOTE="ntb_hw_ivshmem flat_window=0 did not come up"; return 1; }
	local mod="modprobe ntb_perf total_order=$PERF_ORDER max_mw_size=$PERF_MAX_MW use_dma=0"
	sh -c "$mod" || { NOTE="modprobe ntb_perf failed"; return 1; }
	if is_pair; then peer "$mod" || { NOTE="modprobe ntb_perf on b failed"; return 1; }; fi
	dev=$LOCAL_DEV
	run=$DEBUGFS/ntb_perf/$dev/run
	# The peer's ntb_perf must have set up its window first: retry while busy.
	cpu_mark
	for _ in $(seq 50); do
		if echo 0 >"$run" 2>/dev/null; then
			out=$(cat "$run" 2>/dev/null)
			break
		fi
		sleep 0.2
		cpu_mark
	done
	save_raw "" "${out:-}"
	modprobe -r ntb_perf
	if is_pair; then peer "modprobe -r ntb_perf"; fi
	copy_rate "${out:-}" "ntb_perf total_order=$PERF_ORDER, CPU copy, peer 0 of $dev" ntb_perf
}

# ---- Ethernet --------------------------------------------------------------------
# eth_up SYSTEM: sets A and B (command prefixes for the two ends), B_ADDR
# and IFB. In the loop topology both ends are namespaces bA/bB of this
# guest; in pair, ntr0/ntb_netdev ends are this guest and guest b, veth
# always lives in this guest.
ifaces_by_driver() { # DRIVER: the netdevs of that driver (here)
	local i
	for i in $(ls /sys/class/net); do
		ethtool -i "$i" 2>/dev/null | grep -q "^driver: $1\$" && echo "$i"
	done
}
peer_iface_by_driver() {
	peer "for i in \$(ls /sys/class/net); do ethtool -i \$i 2>/dev/null | grep -q '^driver: $1\$' && echo \$i; done" | head -1
}

ns_pair() { # IFA IFB: move into bA / bB
	ip netns add bA && ip netns add bB &&
		ip link set "$1" netns bA && ip link set "$2" netns bB || return 1
	A="ip netns exec bA sh -c"
	B="ip netns exec bB sh -c"
}

eth_config() { # IFA IFB
	$A "ip link set lo up; ip addr flush dev $1; ip addr add $A_IP/24 dev $1 && ip link set $1 up" &&
		$B "ip link set lo up; ip addr flush dev $2; ip addr add $B_IP/24 dev $2 && ip link set $2 up"
}

carrier_up() { [ "$($A "cat /sys/class/net/$IFA/carrier" 2>/dev/null)" = 1 ] &&
	[ "$($B "cat /sys/class/net/$IFB/carrier" 2>/dev/null)" = 1 ]; }

# ---- ntrdma over TCP (rdma/engine/ntrdma_tcp.c) ----------------------------------
# tcp_up: ntrdma's two TCP devices, ntrdma_tcp0 listening (side A, the
# client) and ntrdma_tcp1 dialing it (side B, the server); the systems find
# their netdevs and ib devices by these parent names. Loop: both in this
# guest on 127.0.0.1, so their connection runs over lo, the path rxe's
# traffic and siw's take in one guest; ntb_hw_ivshmem is unloaded first, so
# ntrdma binds no NTB device beside them. Pair: over ntb_netdev, as rxe and
# siw over ntb_netdev; ntb_transport holds the NTB (ntrdma binds none),
# ntb_netdev gets TCP_A_IP on a and TCP_B_IP on b, a listens on its address
# and b dials it. The ntr netdevs then take A_IP and B_IP. Module
# parameters are per load: tcp_down unloads ntrdma on both guests, so the
# next system loads it without them. Sets TCP_VIA (what carries the TCP).
TCP_A_IP=10.79.1.1
TCP_B_IP=10.79.1.2
TCP_VIA=
tcp_up() {
	local ia='' ib=''
	TCP_VIA=''
	clients_down
	if is_pair; then
		hw_mode 0 || { SETUP_NOTE="ntb_hw_ivshmem flat_window=0 did not come up"; return 1; }
		modprobe ntb_netdev && peer "modprobe ntb_netdev" ||
			{ SETUP_NOTE="modprobe ntb_netdev failed"; return 1; }
		for _ in $(seq 30); do
			ia=$(ifaces_by_driver ntb_netdev | head -1)
			ib=$(peer_iface_by_driver ntb_netdev)
			[ -n "$ia" ] && [ -n "$ib" ] && break
			sleep 0.3
		done
		[ -n "$ia" ] && [ -n "$ib" ] || { SETUP_NOTE="no ntb_netdev on both sides to carry TCP"; return 1; }
		{ ip addr flush dev "$ia"; ip addr add $TCP_A_IP/24 dev "$ia" && ip link set "$ia" up; } &&
			peer "ip addr flush dev $ib; ip addr add $TCP_B_IP/24 dev $ib && ip link set $ib up" ||
			{ SETUP_NOTE="address setup on ntb_netdev failed"; return 1; }
		wait_for 30 ping -q -c 1 -W 1 $TCP_B_IP >/dev/null ||
			{ SETUP_NOTE="no ping over ntb_netdev ($ia, $TCP_A_IP to $TCP_B_IP)"; return 1; }
		modprobe ntrdma tcp_listen=$TCP_A_IP:$TCP_PORT ||
			{ SETUP_NOTE="modprobe ntrdma tcp_listen=$TCP_A_IP:$TCP_PORT failed"; return 1; }
		peer "modprobe ntrdma tcp_connect=$TCP_A_IP:$TCP_PORT" ||
			{ SETUP_NOTE="modprobe ntrdma tcp_connect=$TCP_A_IP:$TCP_PORT on b failed"; return 1; }
		TCP_VIA="TCP on ntb_netdev (mtu $(cat "/sys/class/net/$ia/mtu"))"
	else
		HW_MODE=
		rmmod ntb_hw_ivshmem 2>/dev/null
		[ ! -e /sys/module/ntb_hw_ivshmem ] || log "ntb_hw_ivshmem stays loaded: ntrdma binds its NTB ports too"
		modprobe ntrdma tcp_listen=127.0.0.1:$TCP_PORT tcp_connect=127.0.0.1:$TCP_PORT ||
			{ SETUP_NOTE="modprobe ntrdma tcp_listen= tcp_connect=127.0.0.1:$TCP_PORT failed"; return 1; }
		TCP_VIA="TCP on lo (127.0.0.1)"
	fi
}

tcp_down() {
	local left=
	timeout 60 modprobe -r ntrdma
	is_pair && peer "timeout 60 modprobe -r ntrdma"
	ip netns del bA 2>/dev/null
	ip netns del bB 2>/dev/null
	if is_pair; then
		modprobe -r ntb_netdev ntb_transport
		peer "modprobe -r ntb_netdev ntb_transport"
	fi
	[ -e /sys/module/ntrdma ] && left=a
	is_pair && peer "[ -e /sys/module/ntrdma ]" && left+=" b"
	[ -z "$left" ] || log "ntrdma with its TCP devices still loaded in guest(s) $left"
	return 0
}

eth_up() {
	local sys=$1 drv ifs
	IFA='' IFB='' SETUP_NOTE=''
	case $sys in
	veth)
		clients_down
		ip link add vbA type veth peer name vbB || { SETUP_NOTE="ip link add veth failed"; return 1; }
		IFA=vbA IFB=vbB
		ns_pair "$IFA" "$IFB" || { SETUP_NOTE="netns setup failed"; return 1; }
		;;
	ntb_netdev | ntr0 | ntr0-win)
		if [ "$sys" = ntb_netdev ]; then
			hw_mode 0 || { SETUP_NOTE="ntb_hw_ivshmem flat_window=0 did not come up"; return 1; }
			drv=ntb_netdev
		elif [ "$sys" = ntr0-win ]; then
			# ntrdma in windowed mode: the NTB ntb_netdev runs on
			hw_mode 0 || { SETUP_NOTE="ntb_hw_ivshmem flat_window=0 did not come up"; return 1; }
			drv=ntrdma
		else
			hw_mode 1 || { SETUP_NOTE="ntb_hw_ivshmem flat_window=1 did not come up"; return 1; }
			drv=ntrdma
		fi
		modprobe "$drv" || { SETUP_NOTE="modprobe $drv failed"; return 1; }
		if is_pair; then
			peer "modprobe $drv" || { SETUP_NOTE="modprobe $drv on b failed"; return 1; }
			for _ in $(seq 30); do
				IFA=$(ifaces_by_driver "$drv" | head -1)
				IFB=$(peer_iface_by_driver "$drv")
				[ -n "$IFA" ] && [ -n "$IFB" ] && break
				sleep 0.3
			done
			A="sh -c"
			B="peer"
		else
			for _ in $(seq 50); do
				ifs=$(ifaces_by_driver "$drv" | xargs)
				[ "$(wc -w <<<"$ifs")" -ge 2 ] && break
				sleep 0.2
			done
			set -- $ifs
			IFA=${1:-} IFB=${2:-}
			[ -n "$IFA" ] && [ -n "$IFB" ] && ns_pair "$IFA" "$IFB" ||
				{ SETUP_NOTE="no two $drv netdevs (found: ${ifs:-none})"; return 1; }
		fi
		[ -n "$IFA" ] && [ -n "$IFB" ] || { SETUP_NOTE="no $drv netdev on both sides"; return 1; }
		;;
	ntr0-tcp)
		# the ntr netdevs of ntrdma's TCP devices (tcp_up), by parent
		tcp_up || return 1
		wait_for 10 netdev_of ntrdma_tcp0 >/dev/null
		IFA=$(netdev_of ntrdma_tcp0)
		if is_pair; then
			IFB=$(peer_lib "wait_for 10 netdev_of ntrdma_tcp1 >/dev/null; netdev_of ntrdma_tcp1")
			A="sh -c"
			B="peer"
		else
			wait_for 10 netdev_of ntrdma_tcp1 >/dev/null
			IFB=$(netdev_of ntrdma_tcp1)
			[ -n "$IFA" ] && [ -n "$IFB" ] && ns_pair "$IFA" "$IFB" ||
				{ SETUP_NOTE="no netdevs of ntrdma_tcp0 and ntrdma_tcp1 (found: '$IFA' '$IFB')"; return 1; }
		fi
		[ -n "$IFA" ] && [ -n "$IFB" ] ||
			{ SETUP_NOTE="no netdev of ntrdma_tcp0 here or of ntrdma_tcp1 on b"; return 1; }
		;;
	*) SETUP_NOTE="unknown system"; return 1 ;;
	esac
	eth_config "$IFA" "$IFB" || { SETUP_NOTE="address setup failed"; return 1; }
	wait_for 30 carrier_up || { SETUP_NOTE="no carrier within 30 s"; return 1; }
	wait_for 10 $A "ping -c 1 -W 1 $B_IP >/dev/null" || { SETUP_NOTE="no ping through $sys"; return 1; }
	ETH_NOTE="mtu $($A "cat /sys/class/net/$IFA/mtu")"
	[ "$sys" != ntr0-tcp ] || ETH_NOTE+=", over $TCP_VIA"
	return 0
}

eth_down() {
	local sys=$1
	case $sys in
	veth) ip netns del bA 2>/dev/null; ip netns del bB 2>/dev/null ;;
	ntb_netdev) modprobe -r ntb_netdev ntb_transport
		is_pair && peer "modprobe -r ntb_netdev ntb_transport"
		ip netns del bA 2>/dev/null; ip netns del bB 2>/dev/null ;;
	ntr0 | ntr0-win) modprobe -r ntrdma
		is_pair && peer "modprobe -r ntrdma"
		ip netns del bA 2>/dev/null; ip netns del bB 2>/dev/null ;;
	ntr0-tcp) tcp_down ;;
	esac
	return 0
}

# iperf3 on the current A (client) / B (server); TEST: tcp1 tcp4 udp64.
iperf_run() {
	local test=$1 args out port=$((PORT++))
	case $test in
	tcp1) args= ;;
	tcp4) args="-P 4" ;;
	udp64) args="-u -l 64 -b 0" ;;
	esac
	local rcvbuf="awk '/^Udp: [0-9]/ { print \$6 }' /proc/net/snmp" e0 e1
	$B "iperf3 -s -1 -D -p $port >/dev/null 2>&1"
	sleep 1
	e0=$($B "$rcvbuf")
	cpu_mark
	out=$($A "timeout $((SECS + 30)) iperf3 -J -c $B_IP -p $port -t $SECS $args" 2>&1)
	e1=$($B "$rcvbuf")
	if [ "$test" = udp64 ]; then
		# datagrams the server received per second
		read -r VAL BYTES < <(jq -r '.end.sum_received | [(.bytes / 64 / .seconds / 1000 * 100 | floor) / 100,
			.bytes] | @tsv' <<<"$out" 2>/dev/null)
	else
		read -r VAL BYTES < <(jq -r '.end.sum_received | [(.bits_per_second / 1e9 * 1000 | floor) / 1000,
			.bytes] | @tsv' <<<"$out" 2>/dev/null)
	fi
	$B "pkill -x iperf3" >/dev/null 2>&1
	save_raw "" "$out"
	if [ -z "${VAL:-}" ] || [ "$VAL" = null ]; then
		NOTE="iperf3: $(jq -r '.error // empty' <<<"$out" 2>/dev/null | head -c 200)"
		[ "$NOTE" = "iperf3: " ] && NOTE="iperf3: $(head -c 200 <<<"$out")"
		VAL=
		return 1
	fi
	NOTE=$ETH_NOTE
	if [ "$test" = udp64 ]; then
		NOTE+=", sent $(jq -r '.end.sum_sent.packets' <<<"$out") datagrams, receiver socket-buffer drops $((${e1:-0} - ${e0:-0}))"
	fi
	return 0
}

# Busy polling for @1 us (0: off) on both hosts: net.core.busy_read and
# busy_poll are global, so they are set outside the namespaces.
busy_poll() { # US
	local c="sysctl -qw net.core.busy_read=$1 net.core.busy_poll=$1"
	sh -c "$c"
	if is_pair; then peer "$c"; fi
}

# Packets that busy polling found, on side A and B together (TcpExt's
# BusyPollRxPackets of their network namespaces).
busy_pkts() {
	local q="awk '/^TcpExt:/ { if (!c) { for (i = 1; i <= NF; i++) if (\$i == \"BusyPollRxPackets\") c = i } else print \$c }' /proc/net/netstat"
	echo $(( $($A "$q") + $($B "$q") ))
}

# Doorbells both ends rang (ntr netdevs: ethtool -S tx_doorbells); empty
# for netdevs without the counter.
eth_doorbells() {
	local a b
	a=$($A "ethtool -S $IFA 2>/dev/null" | awk '$1 == "tx_doorbells:" { print $2 }')
	b=$($B "ethtool -S $IFB 2>/dev/null" | awk '$1 == "tx_doorbells:" { print $2 }')
	[ -n "$a" ] && [ -n "$b" ] && echo $((a + b))
}

# sockperf ping-pong of 64 B messages on the current A (client) / B
# (server); TEST sp:tcp|udp[:bp] (bp: busy polling, BUSY_US). VAL: the median
# latency, P99 the 99th percentile; sockperf reports half the round trip.
sockperf_run() {
	local test=$1 proto flag= out port=$((PORT++)) bp0 bp1 db0 db1
	proto=$(cut -d: -f2 <<<"$test")
	[ "$proto" = tcp ] && flag=--tcp
	[[ $test = *:bp ]] && busy_poll "$BUSY_US"
	$B "sockperf server $flag -i $B_IP -p $port </dev/null >/dev/null 2>&1 &"
	sleep 1
	bp0=$(busy_pkts) db0=$(eth_doorbells)
	cpu_mark
	out=$($A "timeout $((SECS + 30)) sockperf ping-pong $flag -i $B_IP -p $port -t $SECS -m 64" 2>&1)
	bp1=$(busy_pkts) db1=$(eth_doorbells)
	$B "pkill -x sockperf" >/dev/null 2>&1
	busy_poll 0
	save_raw "" "$out"
	VAL=$(awk '/percentile 50.000 =/ { print $NF; exit }' <<<"$out")
	P99=$(awk '/percentile 99.000 =/ { print $NF; exit }' <<<"$out")
	MSGS=$(sed -n 's/.*ReceivedMessages=\([0-9]*\).*/\1/p' <<<"$out" | head -1)
	if [ -z "$VAL" ]; then
		NOTE="sockperf: $(grep -iE 'error|fail|refused' <<<"$out" | head -n 2 | xargs | head -c 200)"
		P99='' MSGS=0
		return 1
	fi
	NOTE="$ETH_NOTE, $MSGS round trips, $((bp1 - bp0)) packets found by busy polling"
	[ -n "$db0" ] && [ -n "$db1" ] && [ "$MSGS" -gt 0 ] &&
		NOTE+=", $(awk -v d=$((db1 - db0)) -v m="$MSGS" 'BEGIN { printf "%.2f", d / m }') doorbells per round trip"
	NOTE+="; half the round trip, as sockperf reports it"
	return 0
}

eth_run() { # TEST
	case $1 in
	sp:*) sockperf_run "$1" ;;
	*) iperf_run "$1" ;;
	esac
}

eth_label() {
	local bp=
	[[ $1 = *:bp ]] && bp=", busy poll"
	case $1 in
	tcp1) echo "iperf3 TCP x1|Gbit/s" ;;
	tcp4) echo "iperf3 TCP x4|Gbit/s" ;;
	udp64) echo "iperf3 UDP 64 B|kpps" ;;
	sp:tcp*) echo "sockperf TCP ping-pong 64 B$bp|us" ;;
	sp:udp*) echo "sockperf UDP ping-pong 64 B$bp|us" ;;
	esac
}

eth_round() { # ROUND SYSTEM
	local round=$1 sys=$2 t lab
	if ! eth_up "$sys"; then
		for t in $ETH_TESTS; do
			lab=$(eth_label "$t")
			record "$sys" "${lab%|*}" "${lab#*|}" "$round" NA 0 0 "$SETUP_NOTE"
		done
		eth_down "$sys"
		return
	fi
	for t in $ETH_TESTS; do
		lab=$(eth_label "$t")
		measure "$sys" "${lab%|*}" "${lab#*|}" "$round" eth_run "$t"
	done
	eth_down "$sys"
}

# ---- RDMA ---------------------------------------------------------------------------
# ll_ok: both ntr netdevs (IFA on A, IFB on B) have a link-local address that
# is no longer tentative: GID 0 usable on both ends.
ll_ok() { ! $A "ip -6 addr show dev $IFA | grep -q tentative" &&
	$A "ip -6 addr show dev $IFA scope link | grep -q inet6" &&
	! $B "ip -6 addr show dev $IFB | grep -q tentative" &&
	$B "ip -6 addr show dev $IFB scope link | grep -q inet6"; }

# rdma_up SYSTEM: sets SRV (server prefix), CLI (client prefix), SDEV/CDEV
# (server/client ib devices), DST (address the client connects to), CM
# (-R when the device needs rdma_cm: iWARP).
rdma_up() {
	local sys=$1 devs d n net params
	SETUP_NOTE='' CM='' QCM='' GX='' QNA='' FNA='' SRV="sh -c" CLI="sh -c" DST=127.0.0.1
	case $sys in
	rxe)
		# perftest without rdma_cm (GIDs over its TCP exchange) to
		# 127.0.0.1: rdma_cm cannot resolve a route over rxe on lo.
		modprobe rdma_rxe && rdma link add rxe0 type rxe netdev lo ||
			{ SETUP_NOTE="rdma link add rxe0 type rxe netdev lo failed"; return 1; }
		SDEV=rxe0 CDEV=rxe0
		FNA="fi_pingpong: libfabric's verbs provider connects through rdma_cm, which cannot resolve a route over rxe on lo"
		;;
	siw)
		# iWARP connects through rdma_cm, which rejects siw on lo (lo's
		# all-zero MAC makes a zero GID): siw sits on a dummy netdev
		# holding a local address, so its TCP traffic still takes the
		# loopback path.
		ip link add bsiw type dummy 2>/dev/null
		ip addr replace 10.79.9.1/32 dev bsiw && ip link set bsiw up &&
			modprobe siw && rdma link add siw0 type siw netdev bsiw ||
			{ SETUP_NOTE="rdma link add siw0 type siw netdev bsiw (dummy) failed"; return 1; }
		SDEV=siw0 CDEV=siw0 CM=-R DST=10.79.9.1
		;;
	ntrdma | ntrdma-poll | ntrdma-pull | ntrdma-dma | ntrdma-win | ntrdma-old)
		# The verbs face: one ib device per NTB port, named ntrdma*, used
		# through our rdma-core provider (install_provider: a .driver
		# file naming the build tree's library). Its port has an IB link
		# layer: a LID or GID 0 (-x 0) addresses the one peer. ntr0 is up
		# on both ends (loop: in namespaces bA/bB, the two devices'
		# netdevs) for the tools' out-of-band exchange. qperf connects
		# directly (no rdma_cm: the port has no CM capability), the two
		# devices named with -li/-ri.
		# ntrdma-win: windowed mode, on the NTB without a flat window;
		# ntrdma-poll: the verbs face polls its ring 50 us after a receive;
		# ntrdma-pull: every READ read by the requester (up to 1 MiB);
		# ntrdma-dma: every placement copied by the DMA channel.
		if [ "$sys" = ntrdma-win ]; then net=ntr0-win; else net=ntr0; fi
		params=
		[ "$sys" = ntrdma-poll ] && params=rx_poll_us=50
		[ "$sys" = ntrdma-pull ] && params=read_pull_max=1048576
		[ "$sys" = ntrdma-dma ] && params=place_copybreak=0
		if [ "$sys" = ntrdma-old ]; then
			old_up || return 1
		else
			hw_mode $([ $net = ntr0 ] && echo 1 || echo 0) ||
				{ SETUP_NOTE="ntb_hw_ivshmem did not come up for $sys"; return 1; }
			modprobe ntrdma $params || { SETUP_NOTE="modprobe ntrdma failed"; return 1; }
			is_pair && { peer "modprobe ntrdma $params" || { SETUP_NOTE="modprobe ntrdma on b failed"; return 1; }; }
		fi
		install_provider || { SETUP_NOTE="install_provider failed (provider not built?)"; return 1; }
		sleep 1
		devs=$(ls /sys/class/infiniband 2>/dev/null | grep '^ntrdma' | xargs)
		if [ -z "$devs" ]; then
			SETUP_NOTE="no ntrdma verbs device (/sys/class/infiniband holds: $(ls /sys/class/infiniband 2>/dev/null | xargs | grep . || echo nothing))"
			return 1
		fi
		# ib device of each netdev, before the netdevs move to namespaces
		declare -A IBOF=()
		for d in $devs; do
			n=$(rdma link show "$d/1" 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
			[ -n "$n" ] && IBOF[$n]=$d
		done
		eth_up $net || { SETUP_NOTE="$net for the out-of-band exchange: $SETUP_NOTE"; return 1; }
		SRV=$B CLI=$A DST=$B_IP GX="-x 0" QCM=
		if is_pair; then
			CDEV=${IBOF[$IFA]:-${devs%% *}}
			SDEV=$(peer "ls /sys/class/infiniband | grep '^ntrdma' | head -1")
		else
			CDEV=${IBOF[$IFA]:-} SDEV=${IBOF[$IFB]:-}
			[ -n "$CDEV" ] && [ -n "$SDEV" ] ||
				{ SETUP_NOTE="no ib device for $IFA/$IFB (ntrdma devices: $devs)"; return 1; }
		fi
		wait_for 15 ll_ok || { SETUP_NOTE="no link-local address on $IFA/$IFB"; return 1; }
		;;
	ntrdma-tcp | ntrdma-tcp@ntb_netdev)
		# The verbs face over ntrdma's TCP devices (tcp_up), used as
		# ntrdma above; ntr0-tcp up for the out-of-band exchange. The
		# ib devices are found by parent: ntrdma_tcp0 (client, here),
		# ntrdma_tcp1 (server: here in loop, on b in pair).
		if [ "$sys" = ntrdma-tcp ] && is_pair; then
			SETUP_NOTE="loop topology only: in pair ntrdma's TCP devices run between the guests (ntrdma-tcp@ntb_netdev)"
			return 1
		fi
		if [ "$sys" != ntrdma-tcp ] && ! is_pair; then
			SETUP_NOTE="needs two kernels (pair topology): in one guest ntrdma's TCP devices run over lo (ntrdma-tcp)"
			return 1
		fi
		install_provider || { SETUP_NOTE="install_provider failed (provider not built?)"; return 1; }
		eth_up ntr0-tcp || { SETUP_NOTE="ntr0-tcp for the out-of-band exchange: $SETUP_NOTE"; return 1; }
		wait_for 10 ibdev_of ntrdma_tcp0 >/dev/null
		CDEV=$(ibdev_of ntrdma_tcp0)
		if is_pair; then
			SDEV=$(peer_lib "wait_for 10 ibdev_of ntrdma_tcp1 >/dev/null; ibdev_of ntrdma_tcp1")
		else
			SDEV=$(ibdev_of ntrdma_tcp1)
		fi
		[ -n "$CDEV" ] && [ -n "$SDEV" ] ||
			{ SETUP_NOTE="no ib device of ntrdma_tcp0 ('$CDEV') or ntrdma_tcp1 ('$SDEV')"; return 1; }
		SRV=$B CLI=$A DST=$B_IP GX="-x 0" QCM=
		wait_for 15 ll_ok || { SETUP_NOTE="no link-local address on $IFA/$IFB"; return 1; }
		;;
	*@*) soft_rdma_up "${sys%@*}" "${sys#*@}" || return 1 ;;
	*) SETUP_NOTE="unknown system"; return 1 ;;
	esac
	# rdma_cm's user-space device, for the tools that connect through it
	$SRV "modprobe rdma_ucm"; $CLI "modprobe rdma_ucm"
	return 0
}

# soft_rdma_up DRIVER NETDEV_SYSTEM: rxe or siw over ntb_netdev or ntr0 on
# both hosts, connected through rdma_cm by the netdev's addresses (server on
# b). Pair topology only: in one guest both ends' addresses are local, and
# rdma_cm and the drivers' own sockets take the loopback path, not the NTB.
soft_rdma_up() {
	local drv=$1 net=$2 mod=$1 dev=${1}nt
	[ "$drv" = rxe ] && mod=rdma_rxe
	is_pair || { SETUP_NOTE="needs two kernels (pair topology): in one guest the two ends' addresses are both local and the traffic takes the loopback path"; return 1; }
	eth_up "$net" || { SETUP_NOTE="$net: $SETUP_NOTE"; return 1; }
	modprobe "$mod" && rdma link add "$dev" type "$drv" netdev "$IFA" ||
		{ SETUP_NOTE="rdma link add $dev type $drv netdev $IFA failed"; return 1; }
	peer "modprobe $mod && rdma link add $dev type $drv netdev $IFB" ||
		{ SETUP_NOTE="rdma link add $dev type $drv netdev $IFB failed on b"; return 1; }
	SRV=$B CLI=$A SDEV=$dev CDEV=$dev CM=-R QCM=1 DST=$B_IP
	# On ntr0 the netdev already has an RDMA device, ours (iWARP-CM):
	# rdma_cm resolves its addresses to it, never to rxe. perftest then
	# connects rxe over its TCP exchange with GID 1 (RoCE v2, link-local).
	# qperf has no GID option (a RoCE device needs rdma_cm there): n/a.
	[ "$net" = ntr0 ] && CM='' QCM='' GX="-x 1" QNA="qperf: no GID option (RoCE needs its -cm1), and rdma_cm resolves ntr0's addresses to ntrdma's device" \
		FNA="fi_pingpong: libfabric's verbs provider connects through rdma_cm, which resolves ntr0's addresses to ntrdma's device"
	return 0
}

rdma_down() {
	local sys=$1
	$SRV "pkill -x qperf; pkill -f '^ib_(write|read|send)_'" >/dev/null 2>&1
	case $sys in
	rxe) rdma link delete rxe0 ;;
	siw) rdma link delete siw0; ip link del bsiw ;;
	ntrdma | ntrdma-poll | ntrdma-pull | ntrdma-dma | ntrdma-win) eth_down ntr0 ;;
	ntrdma-old) eth_down ntr0; old_down ;;
	ntrdma-tcp | ntrdma-tcp@ntb_netdev) eth_down ntr0-tcp ;;
	*@*) rdma link delete "${sys%@*}nt" 2>/dev/null
		is_pair && peer "rdma link delete ${sys%@*}nt" 2>/dev/null
		eth_down "${sys#*@}" ;;
	esac
	return 0
}

# perftest_run TEST SIZE: ib_TEST against the server on SRV, tried again (3
# tries) when the tool itself failed rather than the system under test:
# perftest calibrates its cycle clock against gettimeofday() when it prints
# its report, and on a busy guest the fit fails ("Correlation coefficient
# r^2 ... < 0.9", "Can't produce a report", exit 1; the server then fails
# its last handshake) or a latency comes out non-finite. Said in the note.
perftest_run() {
	local try
	for try in 1 2 3; do
		TOOL=
		if perftest_once "$@"; then
			[ "$try" = 1 ] || NOTE="${NOTE:+$NOTE; }$((try - 1)) earlier tries failed in the tool (clock calibration)"
			return 0
		fi
		[ -n "$TOOL" ] || return 1
	done
	NOTE="tool problem, 3 tries: $NOTE"
	return 1
}

# perf_col HEADER LINE RE: in perftest's result LINE, the value under the
# first column of HEADER that matches RE.
perf_col() {
	awk -v h="$1" -v l="$2" -v re="$3" 'BEGIN { n = split(h, H, "[ \t]+"); split(l, L, "[ \t]+")
		for (i = 1; i <= n; i++) if (H[i] ~ re) { print L[i]; exit } }'
}

perftest_once() {
	local test=$1 size=$2 port=$((PORT++)) srvlog=/tmp/bench-srv.$$ out mode hdr line rc k0 k1
	if [[ $test == *_lat ]]; then mode="-n $LAT_ITERS"; else mode="-D $SECS"; fi
	$SRV "timeout $((SECS + 30)) ib_$test -d $SDEV $CM $GX -p $port -s $size $mode >$srvlog 2>&1 &"
	sleep 1
	cpu_mark
	k0=$(stat_now "$KERNEL")
	out=$($CLI "timeout $((SECS + 30)) ib_$test -d $CDEV $CM $GX -p $port -s $size $mode $DST" 2>&1)
	rc=$?
	k1=$(stat_now "$KERNEL")
	sleep 0.5
	save_raw "" "$out"
	save_raw .server "$($SRV "cat $srvlog")"
	$SRV "pkill -f '^ib_$test' ; rm -f $srvlog" >/dev/null 2>&1
	# the result line follows the " #bytes ..." header
	hdr=$(grep -m1 '^ *#bytes' <<<"$out")
	# (the first numeric line after it: stderr lines, such as perftest's
	# "Correlation coefficient" warning, can come between)
	line=$(awk '/^ *#bytes/ { h = 1; next } h && /^ *[0-9]/ { print; exit }' <<<"$out")
	if [ "$rc" = 124 ]; then
		NOTE="ib_$test: no result, the client was killed after $((SECS + 30)) s (stalled)"
		return 1
	fi
	if grep -q "Can't produce a report" <<<"$out"; then
		TOOL=1
		NOTE="ib_$test: perftest could not calibrate its clock ($(grep -o 'r^2: [0-9.e-]*' <<<"$out" | head -1))"
		return 1
	fi
	if [ -z "$hdr" ] || ! [[ $line =~ ^\ *[0-9] ]]; then
		NOTE="ib_$test: $(grep -iE 'not supported|unsupported|error|fail|unable|couldn|invalid' <<<"$out" |
			head -2 | xargs | head -c 200)"
		[ "$NOTE" = "ib_$test: " ] && NOTE="ib_$test: no result: $(tail -n 2 <<<"$out" | xargs | head -c 200)"
		return 1
	fi
	if [[ $test == *_lat ]]; then
		# column t_typical (iterations mode) or t_avg
		VAL=$(perf_col "$hdr" "$line" '^t_typical')
		[ -n "$VAL" ] || VAL=$(perf_col "$hdr" "$line" '^t_avg')
		# and the 99th percentile and the mean, when the run printed them
		P99=$(perf_col "$hdr" "$line" '^99%$')
		[[ $P99 =~ ^[0-9]+(\.[0-9]+)?$ ]] || P99=
		MEAN=$(perf_col "$hdr" "$line" '^t_avg')
		[[ $MEAN =~ ^[0-9]+(\.[0-9]+)?$ ]] && [ "$MEAN" != "$VAL" ] || MEAN=
		BYTES=0
		NOTE="$LAT_ITERS iterations, typical (the median)"
		if ! [[ $VAL =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
			# perftest's cycle clock can fail under TCG ("inf", "-nan")
			TOOL=1
			NOTE="ib_$test: the tool printed a non-finite latency ($VAL)"
			return 1
		fi
	else
		# bytes iterations bw_peak bw_average msg_rate (MiB/s, as perftest prints)
		read -r _ it _ VAL _ <<<"$line"
		BYTES=$((it * size))
		NOTE=
		KCPU=$(cpu_delta "$k0" "$k1") KMSGS=$it
	fi
	[ -n "$VAL" ]
}

# qperf_run TEST: rc_bw or rc_lat.
qperf_run() {
	local test=$1 out v u cm="-li $CDEV:1 -ri $SDEV:1"
	[ -z "$QNA" ] || { NOTE=$QNA; return 1; }
	[ -n "$CM$QCM" ] && cm=-cm1 # the device follows from the address
	$SRV "pkill -x qperf; (qperf >/dev/null 2>&1 &)"
	sleep 1
	cpu_mark
	out=$($CLI "timeout $((SECS + 30)) qperf $cm -vs -vt -t $SECS $DST $test" 2>&1)
	save_raw "" "$out"
	read -r v u < <(awk '$1 == "bw" || $1 == "latency" { print $3, $4; exit }' <<<"$out")
	if [ -z "${v:-}" ]; then
		NOTE="qperf $test: $(head -3 <<<"$out" | xargs | head -c 200)"
		return 1
	fi
	case $test in
	rc_bw) # to MB/s (qperf prints KB/MB/GB/sec, powers of 10)
		VAL=$(awk -v v="$v" -v u="$u" 'BEGIN { s = u ~ /^GB/ ? 1000 : u ~ /^KB/ ? 0.001 : u ~ /^bytes/ ? 1e-6 : 1
			printf "%.2f", v * s }')
		# bytes moved: reported in -v output as "send_bytes = N MB" etc.; approximate from rate x time
		BYTES=$(awk -v r="$VAL" -v t="$SECS" 'BEGIN { printf "%.0f", r * 1e6 * t }')
		;;
	rc_lat) # to us
		VAL=$(awk -v v="$v" -v u="$u" 'BEGIN { s = u ~ /^ms/ ? 1000 : u ~ /^ns/ ? 0.001 : u ~ /^sec/ ? 1e6 : 1
			printf "%.2f", v * s }')
		BYTES=0
		qperf_msg_cpu "$out"
		;;
	esac
	NOTE=
	return 0
}

# kernel_rows SYSTEM METRIC ROUND: the kernel's CPU per message of the
# run just measured (KCPU: "ALL A B" seconds as cpu_delta gives them,
# KMSGS messages), of each end when they are in two guests, else of the
# guest that holds both (loop; rxe and siw on guest a alone in pair).
kernel_rows() {
	local all a b note="the kernel's CPU (system, irq, softirq) around the client run, tool start and end included, per message of $KMSGS"
	read -r all a b <<<"$KCPU"
	[ "$KMSGS" -gt 0 ] || return 0
	if [ "$a" = NA ] || [ "$SRV" = "$CLI" ]; then
		[ "$a" = NA ] || all=$a
		record "$1" "$2 kernel CPU, both ends" us/msg "$3" "$(per_msg "$all")" 0 0 "$note"
		return 0
	fi
	record "$1" "$2 kernel CPU, requester" us/msg "$3" "$(per_msg "$a")" 0 0 "$note (the client's guest)"
	record "$1" "$2 kernel CPU, responder" us/msg "$3" "$(per_msg "$b")" 0 0 "$note (the server's guest)"
}
per_msg() { awk -v s="$1" -v m="$KMSGS" 'BEGIN { printf "%.2f", s * 1e6 / m }'; }

# qperf_msg_cpu OUTPUT: MSGS and CPU_SET from qperf's own figures for its
# timed run (-vs -vt: msg_rate, loc/rem_cpus_used, from /proc/stat of each
# end's host: in the loop topology both ends see the one guest). qperf waits
# on its completion queues by default: the CPU per message is the driver's.
qperf_msg_cpu() {
	local r
	r=$(awk -v secs="$SECS" -v pair="$(is_pair && echo 1)" '
		$1 == "msg_rate" { m = $4 ~ /^M/ ? 1e6 : $4 ~ /^K/ ? 1e3 : 1; rate = $3 * m }
		$1 == "loc_cpus_used" { loc = $3 / 100 }
		$1 == "rem_cpus_used" { rem = $3 / 100 }
		END { if (rate > 0 && loc != "") {
			if (pair) printf "%.0f %.3f %.3f %.3f\n", rate * secs, (loc + rem) * secs, loc * secs, rem * secs
			else printf "%.0f %.3f NA NA\n", rate * secs, loc * secs } }' <<<"$1")
	[ -n "$r" ] || return 0
	MSGS=${r%% *}
	CPU_SET=${r#* }
}

# fi_once EP SIZE ITERS: one fi_pingpong run of ITERS round trips over its
# verbs provider (EP msg: RC QPs connected by rdma_cm; rdm: ofi_rxm over
# them, as MPI libraries over OFI use it); the server on SRV at DST. No
# data check (-c): the tool checks byte by byte in its timed loop, which
# under TCG costs more than the transfer (4 KiB: 38 us against 13 us; the
# selftests check the data). U: its usec/xfer (half a round trip), else NOTE.
fi_once() {
	local ep=$1 size=$2 n=$3 port=$((PORT++)) srvlog=/tmp/bench-fi.$$ out
	local args="-p verbs -e $ep -S $size -I $n"
	# -d: each end's own device (loop: the two in their namespaces)
	$SRV "timeout $((SECS + 60)) fi_pingpong $args -d $SDEV -B $port >$srvlog 2>&1 &"
	sleep 1
	out=$($CLI "timeout $((SECS + 60)) fi_pingpong $args -d $CDEV -P $port $DST" 2>&1)
	save_raw ".$n" "$out"
	save_raw ".$n.server" "$($SRV "cat $srvlog")"
	$SRV "pkill -x fi_pingpong; rm -f $srvlog" >/dev/null 2>&1
	# the figures follow the "bytes #sent ..." header (counts as 1k, 10k)
	U=$(awk '/^bytes +#sent/ { h = 1; next } h && /^[0-9]/ { print $7; exit }' <<<"$out")
	[[ $U =~ ^[0-9]+(\.[0-9]+)?$ ]] && return 0
	NOTE="fi_pingpong -e $ep: $(grep -iE 'error|fail|unable|invalid|refused|ret=-' <<<"$out" |
		head -2 | xargs | head -c 200)"
	[ "$NOTE" = "fi_pingpong -e $ep: " ] && NOTE+="no result: $(tail -n 2 <<<"$out" | xargs | head -c 200)"
	U=
	return 1
}

# fi_run EP SIZE: fi_pingpong's cost per message. An RDM endpoint connects
# on its first message, inside the tool's timed loop, so the tool's own
# figure holds that set-up (about 0.15 s, give or take 15 ms). Two runs,
# FI_ITERS and 100 x FI_ITERS round trips, give the time each further one
# takes: VAL, in us per half round trip; the tool's figures are in the note.
fi_run() {
	local ep=$1 size=$2 n1=$FI_ITERS n2=$((FI_ITERS * 100)) u1 t=$((SECS + 60))
	[ -z "$FNA" ] || { NOTE=$FNA; return 1; }
	fi_once "$ep" "$size" "$n1" || return 1
	u1=$U
	# The longer run must end within fi_once's limit (t s). When it would
	# not at u1 per transfer (two per round trip), it gets as many round
	# trips as fill half of it, at least 10 x n1.
	n2=$(awk -v u="$u1" -v t="$t" -v n1="$n1" -v n2="$n2" 'BEGIN {
		if (2 * n2 * u / 1e6 <= t) { print n2; exit }
		n = int(t / 2 * 1e6 / (2 * u) / n1) * n1
		print (n >= 10 * n1 ? n : 0) }')
	[ "$n2" -gt 0 ] || {
		NOTE="fi_pingpong -e $ep: at $u1 usec/xfer over $n1 round trips, $((10 * n1)) would not end within $t s"
		return 1
	}
	fi_once "$ep" "$size" "$n2" || return 1
	VAL=$(awk -v a="$u1" -v b="$U" -v n1="$n1" -v n2="$n2" \
		'BEGIN { v = (b * n2 - a * n1) / (n2 - n1); if (v > 0) printf "%.2f", v }')
	if [ -z "$VAL" ]; then
		NOTE="fi_pingpong -e $ep: $n2 round trips took less time than $n1 ($U and $u1 usec/xfer)"
		return 1
	fi
	# no CPU per byte or message: the runs are short beside the tool's set-up
	BYTES=0
	NOTE="time per further round trip from runs of $n1 and $n2, usec/xfer as fi_pingpong prints it: $u1 and $U"
}

# ipv4_gid DEV: the index of DEV's first IPv4-mapped GID on port 1 (0: none).
ipv4_gid() {
	local f
	for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		grep -qi '^0000:0000:0000:0000:0000:ffff:' "$f" 2>/dev/null && { basename "$f"; return; }
	done
	echo 0
}

# pp_run KIND SIZE: rdma-core's ibv_KIND_pingpong (rc, uc, ud, srq),
# PP_ITERS round trips, the receiver checking the data; the server on SRV
# at DST. They poll their CQs (no -e) and connect over their own TCP
# exchange, not rdma_cm. VAL: half of its usec/iter, half a round trip as
# ib_send_lat and fi_pingpong report.
pp_run() {
	local kind=$1 size=$2 port=$((PORT++)) srvlog=/tmp/bench-pp.$$ out it g
	local args="-c -s $size -n $PP_ITERS -p $port"
	case $SDEV in siw*) NOTE="ibv_${kind}_pingpong: iWARP connects only through rdma_cm"; return 1 ;; esac
	# RoCE needs a GID: GX, or the device's first IPv4 one (as perftest picks)
	case $SDEV in ntrdma*) ;; *) g=${GX#-x }; args+=" -g ${g:-$(ipv4_gid "$SDEV")}" ;; esac
	$SRV "timeout $((SECS + 60)) ibv_${kind}_pingpong $args -d $SDEV >$srvlog 2>&1 &"
	sleep 1
	out=$($CLI "timeout $((SECS + 60)) ibv_${kind}_pingpong $args -d $CDEV $DST" 2>&1)
	save_raw "" "$out"
	save_raw .server "$($SRV "cat $srvlog")"
	$SRV "pkill -x ibv_${kind}_pingpong; rm -f $srvlog" >/dev/null 2>&1
	it=$(sed -n 's/.* = \([0-9.]*\) usec\/iter$/\1/p' <<<"$out" | head -1)
	if ! [[ $it =~ ^[0-9]+(\.[0-9]+)?$ ]] || grep -qi 'invalid data' <<<"$out"; then
		NOTE="ibv_${kind}_pingpong: $(grep -iE 'invalid|error|fail|unable|couldn' <<<"$out" |
			head -2 | xargs | head -c 200)"
		VAL=
		return 1
	fi
	VAL=$(awk -v t="$it" 'BEGIN { printf "%.2f", t / 2 }')
	BYTES=0
	NOTE="$PP_ITERS round trips, data checked; half of its usec/iter"
}

rdma_label() { # TEST:ARG -> "metric|unit|func args"
	local t=${1%%:*} a=${1#*:} ep sz
	case $t in
	fi) ep=${a%%:*} sz=${a#*:}
		if [ "$sz" -ge 1024 ]; then echo "fi_pingpong ${ep^^} $((sz / 1024)) KiB|us|fi_run $ep $sz"
		else echo "fi_pingpong ${ep^^} $sz B|us|fi_run $ep $sz"; fi ;;
	pp) ep=${a%%:*} sz=${a#*:}
		if [ "$sz" -ge 1024 ]; then echo "ibv_${ep}_pingpong $((sz / 1024)) KiB|us|pp_run $ep $sz"
		else echo "ibv_${ep}_pingpong $sz B|us|pp_run $ep $sz"; fi ;;
	qperf) case $a in
		rc_bw) echo "qperf rc_bw|MB/s|qperf_run rc_bw" ;;
		rc_lat) echo "qperf rc_lat|us|qperf_run rc_lat" ;;
		esac ;;
	*_lat) echo "ib_$t $a B|us|perftest_run $t $a" ;;
	*) if [ "$a" -ge 1024 ]; then echo "ib_$t $((a / 1024)) KiB|MiB/s|perftest_run $t $a"
		else echo "ib_$t $a B|MiB/s|perftest_run $t $a"; fi ;;
	esac
}

rdma_round() { # ROUND SYSTEM
	local round=$1 sys=$2 t lab metric unit fn
	local ok=1
	rdma_up "$sys" || ok=0
	for t in $RDMA_TESTS; do
		lab=$(rdma_label "$t")
		metric=${lab%%|*}
		lab=${lab#*|}
		unit=${lab%%|*}
		fn=${lab#*|}
		if [ $ok = 1 ]; then
			# shellcheck disable=SC2086
			measure "$sys" "$metric" "$unit" "$round" $fn
		else
			record "$sys" "$metric" "$unit" "$round" NA 0 0 "$SETUP_NOTE"
		fi
	done
	rdma_down "$sys"
}

# ---- kernel storage: NVMe over Fabrics (pair topology) ---------------------------
# storage_up SYSTEM (nvmeof-rdma, nvmeof-tcp@ntr0): ntr0 up on both guests
# (ntrdma in flat mode); on guest b an nvmet subsystem whose namespace is a
# null_blk device (no backing store: what is measured is the fabric), one
# port of SYSTEM's transport on b's ntr0 address; here nvme-cli connects
# (nvme-rdma through the verbs face, nvme-tcp through ntr0). Sets DEV.
NQN=nqn.2026-11.org.ntrdma:bench
NVMET=/sys/kernel/config/nvmet
storage_up() {
	local tr=${1#nvmeof-} svc=4420
	tr=${tr%@*}
	DEV='' SETUP_NOTE='' FIO_SIZE='' STORAGE_NOTE="null_blk namespace on b"
	is_pair || { SETUP_NOTE="pair topology only: in one host the two ends would share an ib_device"; return 1; }
	command -v nvme >/dev/null && command -v fio >/dev/null ||
		{ SETUP_NOTE="nvme-cli or fio not installed"; return 1; }
	eth_up ntr0 || { SETUP_NOTE="ntr0: $SETUP_NOTE"; return 1; }
	peer "modprobe null_blk nr_devices=1 gb=1 bs=4096 irqmode=0 &&
	      modprobe nvmet && modprobe nvmet-$tr &&
	      { mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } &&
	      mkdir $NVMET/subsystems/$NQN && cd $NVMET/subsystems/$NQN &&
	      echo 1 > attr_allow_any_host && mkdir namespaces/1 &&
	      echo /dev/nullb0 > namespaces/1/device_path && echo 1 > namespaces/1/enable &&
	      mkdir $NVMET/ports/1 && cd $NVMET/ports/1 && echo $tr > addr_trtype &&
	      echo ipv4 > addr_adrfam && echo $B_IP > addr_traddr && echo $svc > addr_trsvcid &&
	      ln -s $NVMET/subsystems/$NQN subsystems/$NQN" >/dev/null 2>&1 ||
		{ SETUP_NOTE="nvmet $tr target on b failed"; return 1; }
	modprobe "nvme-$tr" &&
		timeout 60 nvme connect -t "$tr" -a "$B_IP" -s $svc -n $NQN >/dev/null 2>&1 ||
		{ SETUP_NOTE="nvme connect -t $tr failed"; return 1; }
	wait_for 20 eval 'DEV=$(ls /dev/nvme[0-9]*n[0-9]* 2>/dev/null | grep -v "c[0-9]" | head -1); [ -b "$DEV" ]' ||
		{ SETUP_NOTE="no namespace after nvme connect -t $tr"; return 1; }
}

storage_down() {
	timeout 60 nvme disconnect -n $NQN >/dev/null 2>&1
	modprobe -r nvme-rdma nvme-tcp 2>/dev/null
	peer "rm -f $NVMET/ports/1/subsystems/$NQN; rmdir $NVMET/ports/1;
	      echo 0 > $NVMET/subsystems/$NQN/namespaces/1/enable;
	      rmdir $NVMET/subsystems/$NQN/namespaces/1 $NVMET/subsystems/$NQN;
	      modprobe -r nvmet-rdma nvmet-tcp nvmet null_blk" >/dev/null 2>&1
	eth_down ntr0
	return 0
}

# iser_up SYSTEM (iser, iscsi-tcp@ntr0): ntr0 up on both guests; on b LIO
# with a null-I/O ramdisk LUN (rd_nullio: no backing store, as null_blk)
# and one portal on b's ntr0 address that takes iSCSI/TCP and iSER; here
# open-iscsi logs in through its iser or its default (TCP) interface. Sets
# DEV to the session's disk.
ISCSI_IQN=eui.4e54524441000002
LIO=/sys/kernel/config/target
LIO_TPG=$LIO/iscsi/$ISCSI_IQN/tpgt_1
LIO_RD=$LIO/core/rd_mcp_0/bench
iser_up() {
	local iface=default np=$LIO_TPG/np/$B_IP:3260 b
	DEV='' SETUP_NOTE='' FIO_SIZE='' STORAGE_NOTE="null-I/O ramdisk LUN on b (LIO rd_mcp)"
	[ "$1" = iser ] && iface=iser
	is_pair || { SETUP_NOTE="pair topology only: in one host the two ends would share an ib_device"; return 1; }
	command -v iscsiadm >/dev/null && command -v fio >/dev/null ||
		{ SETUP_NOTE="open-iscsi or fio not installed"; return 1; }
	eth_up ntr0 || { SETUP_NOTE="ntr0: $SETUP_NOTE"; return 1; }
	peer "modprobe target_core_mod && modprobe iscsi_target_mod && modprobe ib_isert &&
	      { mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config; } &&
	      mkdir -p $LIO_RD && echo rd_pages=262144,rd_nullio=1 > $LIO_RD/control &&
	      echo 1 > $LIO_RD/enable && mkdir -p $LIO_TPG/lun/lun_0 &&
	      ln -s $LIO_RD $LIO_TPG/lun/lun_0/bench && mkdir $np && echo 1 > $np/iser &&
	      echo 0 > $LIO_TPG/attrib/authentication && echo 1 > $LIO_TPG/attrib/generate_node_acls &&
	      echo 1 > $LIO_TPG/attrib/cache_dynamic_acls &&
	      echo 0 > $LIO_TPG/attrib/demo_mode_write_protect && echo 1 > $LIO_TPG/enable" >/dev/null 2>&1 ||
		{ SETUP_NOTE="LIO target on b failed"; return 1; }
	export PATH=$PATH:/usr/sbin:/sbin
	modprobe sd_mod && modprobe ib_iser && modprobe iscsi_tcp ||
		{ SETUP_NOTE="sd_mod, ib_iser or iscsi_tcp failed to load"; return 1; }
	mkdir -p /etc/iscsi /run/lock/iscsi
	[ -s /etc/iscsi/initiatorname.iscsi ] ||
		echo "InitiatorName=$(iscsi-iname)" >/etc/iscsi/initiatorname.iscsi
	pidof iscsid >/dev/null || iscsid
	timeout 60 iscsiadm -m discovery -t st -p "$B_IP:3260" -I $iface >/dev/null 2>&1 &&
		timeout 60 iscsiadm -m node -T $ISCSI_IQN -p "$B_IP:3260" -I $iface --login >/dev/null 2>&1 ||
		{ SETUP_NOTE="iscsiadm login through the $iface interface failed"; return 1; }
	wait_for 20 eval 'b=$(ls -d /sys/class/iscsi_session/session*/device/target*/*/block/* 2>/dev/null | head -1); [ -n "$b" ] && [ -b "/dev/${b##*/}" ]' ||
		{ SETUP_NOTE="no disk after the $iface login"; return 1; }
	DEV=/dev/${b##*/}
}

iser_down() {
	local np=$LIO_TPG/np/$B_IP:3260
	timeout 60 iscsiadm -m node -T $ISCSI_IQN -p "$B_IP:3260" --logout >/dev/null 2>&1
	timeout 10 iscsiadm -m node -T $ISCSI_IQN -o delete >/dev/null 2>&1
	iscsiadm -k 0 2>/dev/null
	modprobe -r ib_iser iscsi_tcp 2>/dev/null
	peer "echo 0 > $LIO_TPG/enable; echo 0 > $np/iser; rmdir $np;
	      rm -f $LIO_TPG/lun/lun_0/bench; rmdir $LIO_TPG/lun/lun_0;
	      rmdir $LIO_TPG $LIO/iscsi/$ISCSI_IQN $LIO/iscsi $LIO_RD $LIO/core/rd_mcp_0;
	      modprobe -r ib_isert iscsi_target_mod" >/dev/null 2>&1
	eth_down ntr0
	return 0
}

# nfs_up SYSTEM (nfs-rdma, nfs-tcp@ntr0): ntr0 up on both guests; on b
# nfsd exports a tmpfs (fsid=0, the NFSv4 pseudo-root) on TCP 2049 and
# RDMA 20049; here it is mounted with NFSv4.2 over SYSTEM's transport. Sets
# DEV to a 64 MiB file on it (FIO_SIZE).
NFS_EXP=/srv/ntrdma-bench-nfs
NFS_MNT=/mnt/ntrdma-bench-nfs
nfs_up() {
	local opts=vers=4.2,proto=tcp
	DEV='' SETUP_NOTE='' FIO_SIZE=64m STORAGE_NOTE="a 64 MiB file on NFSv4.2 (tmpfs on b)"
	[ "${1%@*}" = nfs-rdma ] && opts=vers=4.2,proto=rdma,port=20049
	is_pair || { SETUP_NOTE="pair topology only: in one host the two ends would share an ib_device"; return 1; }
	command -v rpc.nfsd >/dev/null && command -v mount.nfs >/dev/null && command -v fio >/dev/null ||
		{ SETUP_NOTE="nfs-kernel-server, nfs-common or fio not installed"; return 1; }
	eth_up ntr0 || { SETUP_NOTE="ntr0: $SETUP_NOTE"; return 1; }
	peer "export PATH=\$PATH:/usr/sbin:/sbin; modprobe nfsd && modprobe rpcrdma &&
	      { mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd; } &&
	      mkdir -p $NFS_EXP /run/rpcbind /var/lib/nfs/v4recovery &&
	      mount -t tmpfs -o size=128m tmpfs $NFS_EXP && chmod 1777 $NFS_EXP &&
	      rpcbind && rpc.mountd &&
	      exportfs -o rw,fsid=0,no_root_squash,insecure,no_subtree_check '*:$NFS_EXP' &&
	      rpc.nfsd 4 && echo 'rdma 20049' > /proc/fs/nfsd/portlist &&
	      echo Y > /proc/fs/nfsd/v4_end_grace" >/dev/null 2>&1 ||
		{ SETUP_NOTE="nfsd on b failed"; return 1; }
	modprobe nfs && modprobe rpcrdma && mkdir -p $NFS_MNT &&
		timeout -k 5 60 mount -t nfs -o $opts "$B_IP:/" $NFS_MNT >/dev/null 2>&1 ||
		{ SETUP_NOTE="mount -o $opts failed"; return 1; }
	DEV=$NFS_MNT/bench.dat
}

nfs_down() {
	timeout -k 5 60 umount $NFS_MNT >/dev/null 2>&1
	modprobe -r rpcrdma 2>/dev/null
	peer "export PATH=\$PATH:/usr/sbin:/sbin; rpc.nfsd 0; exportfs -ua;
	      kill \$(pidof rpc.mountd rpcbind) 2>/dev/null; umount $NFS_EXP;
	      umount /proc/fs/nfsd; modprobe -r rpcrdma" >/dev/null 2>&1
	FIO_SIZE=
	eth_down ntr0
	return 0
}

# fio_run RW BS QD: fio on DEV, direct I/O, SECS s. VAL: MiB/s for BS of
# 64k and more, else IOPS; at QD 1 the completion latency's median (us),
# P99 its 99th percentile. MSGS: the I/Os (CPU per I/O).
fio_run() {
	local rw=$1 bs=$2 qd=$3 out dir=read
	[[ $rw == *write ]] && dir=write
	cpu_mark
	out=$(timeout $((SECS + 60)) fio --name=bench --filename="$DEV" --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --direct=1 --ioengine=libaio --runtime="$SECS" --time_based \
		${FIO_SIZE:+--size=$FIO_SIZE} --output-format=json 2>&1)
	save_raw "" "$out"
	local j=".jobs[0].$dir"
	MSGS=$(jq "$j.total_ios" <<<"$out" 2>/dev/null)
	BYTES=$(jq "$j.io_bytes" <<<"$out" 2>/dev/null)
	if ! [[ ${MSGS:-} =~ ^[1-9][0-9]*$ ]]; then
		NOTE="fio $rw $bs QD$qd: $(grep -m1 -iE 'error|fio:' <<<"$out" | head -c 200)"
		MSGS=0 BYTES=0
		return 1
	fi
	if [ "$qd" = 1 ]; then
		VAL=$(jq "$j.clat_ns.percentile[\"50.000000\"] / 1000" <<<"$out")
		P99=$(jq "$j.clat_ns.percentile[\"99.000000\"] / 1000" <<<"$out")
	elif [ "$(bs_kib "$bs")" -ge 64 ]; then
		VAL=$(jq "$j.bw / 1024 * 10 | floor / 10" <<<"$out")
	else
		VAL=$(jq "$j.iops | floor" <<<"$out")
	fi
	NOTE="fio libaio direct, $SECS s, $STORAGE_NOTE"
}

bs_kib() { case $1 in *m) echo $((${1%m} * 1024)) ;; *) echo "${1%k}" ;; esac; }

storage_label() { # RW:BS:QD -> "metric|unit|func args"
	local rw=${1%%:*} rest=${1#*:} bs qd unit
	bs=${rest%%:*} qd=${rest#*:}
	if [ "$qd" = 1 ]; then unit=us
	elif [ "$(bs_kib "$bs")" -ge 64 ]; then unit=MiB/s
	else unit=IOPS; fi
	echo "fio $rw $(bs_kib "$bs") KiB QD$qd|$unit|fio_run $rw $bs $qd"
}

storage_round() { # ROUND SYSTEM
	local round=$1 sys=$2 t lab metric unit fn ok=1 kind=storage tests=$STORAGE_TESTS
	[[ $sys == nfs-* ]] && kind=nfs tests=$NFS_TESTS
	[[ $sys == iser || $sys == iscsi-* ]] && kind=iser
	${kind}_up "$sys" || ok=0
	for t in $tests; do
		lab=$(storage_label "$t")
		if [ $ok = 1 ]; then
			IFS='|' read -r metric unit fn <<<"$lab"
			# shellcheck disable=SC2086
			measure "$sys" "$metric" "$unit" "$round" $fn
		else
			IFS='|' read -r metric unit _ <<<"$lab"
			record "$sys" "$metric" "$unit" "$round" NA 0 0 "$SETUP_NOTE"
		fi
	done
	${kind}_down
}

# ---- main -----------------------------------------------------------------------------
# One function, called on the last line: bash has parsed all of it before it
# starts, so editing this file cannot disturb a run in progress.
main() {
install_modules || { log "install_modules failed"; exit 1; }
wait_for 20 ntb_pair || { log "no NTB pair"; exit 1; }
mkdir -p "$NTRDMA_OUT"
: >>"$SAMPLES"
log "topology $TOPO: $REPEATS round(s), ${SECS} s per throughput run; link=$LINK eth='$ETH_SYSTEMS' rdma='$RDMA_SYSTEMS' storage='$STORAGE_SYSTEMS'"
t0=$SECONDS
for ((round = 1; round <= REPEATS; round++)); do
	if [ "$LINK" = 1 ]; then
		measure ntb_hw_ivshmem "flat window copy" MB/s "$round" copyprobe_run flat
		measure ntb_hw_ivshmem "flat window DMA copy" MB/s "$round" copyprobe_run flat_dma
		measure ntb_hw_ivshmem "MW copy" MB/s "$round" copyprobe_run window
		measure ntb_hw_ivshmem "ntb_perf copy" MB/s "$round" ntb_perf_run
	fi
	[ "$DOORBELL" = 1 ] && measure ntb_hw_ivshmem "doorbell round trip" us "$round" doorbell_run
	for sys in $ETH_SYSTEMS; do
		eth_round "$round" "$sys"
	done
	for sys in $RDMA_SYSTEMS; do
		rdma_round "$round" "$sys"
	done
	if is_pair; then
		for sys in $STORAGE_SYSTEMS; do
			storage_round "$round" "$sys"
		done
	fi
	log "round $round done at $((SECONDS - t0)) s"
done
clients_down
log "done in $((SECONDS - t0)) s: $(grep -c . "$SAMPLES") samples in $SAMPLES"
}

main "$@"
