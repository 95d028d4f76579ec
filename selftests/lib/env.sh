#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Environment for NTRDMA selftests. On a real pair of NTB hosts set
# NTRDMA_REMOTE=<host> (reached with ssh) or leave it empty for a loopback NTB;
# inside the test bed (scripts/testbed.sh) NTRDMA_TOPO says loop or pair and
# the `remote` command reaches the other guest.

SELFTEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${NTRDMA_ROOT:=$(cd "$SELFTEST_DIR/.." && pwd)}"
: "${NTRDMA_OUT:=/tmp}"
: "${DEBUGFS:=/sys/kernel/debug}"
export NTRDMA_ROOT NTRDMA_OUT DEBUGFS

# Is the other side another host?
is_pair() {
	[ "${NTRDMA_TOPO:-}" = pair ] || [ -n "${NTRDMA_REMOTE:-}" ]
}

# peer CMD: run a shell command line on the host of the peer port.
peer() {
	if [ "${NTRDMA_TOPO:-}" = pair ]; then
		remote "$*"
	elif [ -n "${NTRDMA_REMOTE:-}" ]; then
		ssh "$NTRDMA_REMOTE" "$*"
	else
		sh -c "$*"
	fi
}

# Remote host name for ntb_test.sh -r ("" for loopback).
remote_host() {
	if [ "${NTRDMA_TOPO:-}" = pair ]; then
		echo peer
	else
		echo "${NTRDMA_REMOTE:-}"
	fi
}

# NTRDMA_LINK=tcp: the tests run on ntrdma's TCP backend instead of the
# NTB. In a loopback two devices on 127.0.0.1: ntrdma_tcp0 listens,
# ntrdma_tcp1 connects (install_modules sets their module parameters).
TCP_PORT=${NTRDMA_TCP_PORT:-18515}
tcp_link() { [ "${NTRDMA_LINK:-ntb}" = tcp ]; }
tcp_options() {
	local conf=/etc/modprobe.d/ntrdma-tcp.conf
	if ! tcp_link; then
		rm -f $conf
		return 0
	fi
	mkdir -p /etc/modprobe.d &&
	echo "options ntrdma tcp_listen=127.0.0.1:$TCP_PORT tcp_connect=127.0.0.1:$TCP_PORT" > $conf
}

# Make modprobe find the modules we built, on both sides. The test bed
# already did (modprobe install rules naming build/ and the repository's .ko
# files); elsewhere copy them under /lib/modules and run depmod.
install_modules() {
	local cmd
	if [ -z "${NTRDMA_TOPO:-}" ] && [ -d "$NTRDMA_ROOT/build/kernel" ]; then
		cmd="d=/lib/modules/\$(uname -r)/extra/ntrdma; mkdir -p \$d &&
		     cp $NTRDMA_ROOT/build/kernel/*.ko $NTRDMA_ROOT/ntb_hw/*.ko $NTRDMA_ROOT/*.ko \$d/ &&
		     depmod -a"
		sh -c "$cmd" || return 1
		if is_pair; then peer "$cmd" || return 1; fi
	fi
	tcp_options || return 1
	mountpoint -q "$DEBUGFS" || mount -t debugfs none "$DEBUGFS"
	if is_pair; then
		peer "mountpoint -q $DEBUGFS || mount -t debugfs none $DEBUGFS"
	fi
}

# ntrdma runs in windowed mode here (an NTB without a flat window:
# rdma/engine/ntrdma_rxmem.c): nothing is placed directly.
ntrdma_windowed() { grep -q '^mode: windowed' "$DEBUGFS"/ntrdma/*/info 2>/dev/null; }

# NTB devices: local_ntb_devs lists ours; peer_ntb_devs the peer host's.
local_ntb_devs() { ls -1 /sys/bus/ntb/devices 2>/dev/null | sort; }
peer_ntb_devs() { peer "ls -1 /sys/bus/ntb/devices 2>/dev/null | sort"; }

# The (local, remote) device pair: in a loopback the two ports of one host.
ntb_pair() {
	if tcp_link; then
		is_pair && return 1	# not yet: the guests have no IP link
		LOCAL_DEV=ntrdma_tcp0
		REMOTE_DEV=ntrdma_tcp1
	elif is_pair; then
		LOCAL_DEV=$(local_ntb_devs | head -1)
		REMOTE_DEV=$(peer_ntb_devs | head -1)
	else
		LOCAL_DEV=$(local_ntb_devs | sed -n 1p)
		REMOTE_DEV=$(local_ntb_devs | sed -n 2p)
	fi
	[ -n "$LOCAL_DEV" ] && [ -n "$REMOTE_DEV" ]
}

# need_ntb_pair [PLAN]: the modules installed (install_modules) and the NTB
# pair found (ntb_pair); else the subtest "ntb devices present" fails (after
# the plan PLAN, for a script that has not printed its own) and the script
# ends. Needs ktap.sh.
need_ntb_pair() {
	install_modules && ntb_pair && return 0
	[ -z "${1:-}" ] || ktap_plan "$1"
	ktap_fail "ntb devices present"
	ktap_finish
}

# load_ntrdma [PARAM...]: modprobe ntrdma (with PARAMs) here and, in a pair,
# on the peer's host.
load_ntrdma() {
	modprobe ntrdma "$@" || return 1
	if is_pair; then peer "modprobe ntrdma $*" || return 1; fi
}

# The debugfs folders of the ntrdma devices, ntrdma/<dev>/{info,cmd,...}.
# A side is a command prefix that runs a shell command line there ("sh -c",
# peer). ntrdma_dir SIDE NTBDEV: the folder of the device on NTB device
# NTBDEV, on that side. ntrdma_info SIDE DIR FIELD: FIELD of DIR/info there.
ntrdma_dir() {
	$1 "grep -lE '^(ntb|tcp): $2\$' $DEBUGFS/ntrdma/*/info 2>/dev/null | head -1 | xargs -r dirname"
}
ntrdma_info() { $1 "sed -n 's/^$3: //p' $2/info 2>/dev/null"; }

# The two sides by name: A (ours, LOCAL_DEV) and B (the peer's, REMOTE_DEV),
# each with its prefix in $A or $B and its folder in $DBGA or $DBGB.
# dbg_of SIDE NTBDEV: ntrdma_dir of the side named SIDE. info_of SIDE FIELD:
# FIELD of its info file. link_up: both sides' link is up. find_dbgs: DBGA
# and DBGB, ours waited for up to 10 s.
dbg_of() { ntrdma_dir "${!1}" "$2"; }
info_of() { local d=DBG$1; ${!1} "sed -n 's/^$2: //p' ${!d}/info"; }
link_up() { [ "$(info_of A link)" = up ] && [ "$(info_of B link)" = up ]; }
find_dbgs() {
	wait_for 10 sh -c "[ -n \"\$(grep -lE '^(ntb|tcp): $LOCAL_DEV\$' $DEBUGFS/ntrdma/*/info 2>/dev/null)\" ]" || return 1
	DBGA=$(dbg_of A "$LOCAL_DEV")
	DBGB=$(dbg_of B "$REMOTE_DEV")
	[ -n "$DBGA" ] && [ -n "$DBGB" ]
}

# wait_for SECS CMD...: poll CMD every 0.1 s until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

# metric NAME VALUE UNIT: record a measurement for the run's summary.
metric() {
	echo "# metric: $1 = $2 $3"
	echo "${NTRDMA_TOPO:-host} $1 $2 $3" >> "$NTRDMA_OUT/metrics.txt" 2>/dev/null || true
}

# The emulated NTB's DMA engine refusing work as a full fixed ring does
# (ntb_hw_ivshmem parameters): ntb_dma_refuse PREP SUBMIT refuses every
# PREP-th prep and SUBMIT-th submit (0 0: none); ntb_dma_refused prints how
# many it refused. ntb_dma_can_refuse: the parameters exist.
NTB_HW_PARAMS=/sys/module/ntb_hw_ivshmem/parameters
ntb_dma_can_refuse() { [ -e "$NTB_HW_PARAMS/fail_submit_every" ]; }
ntb_dma_refuse() {
	echo "$1" > "$NTB_HW_PARAMS/fail_prep_every" &&
		echo "$2" > "$NTB_HW_PARAMS/fail_submit_every"
}
ntb_dma_refused() { cat "$NTB_HW_PARAMS/refused"; }
# ntb_dma_stall 1|0: the emulated engine starts no copy while 1 (a hung
# engine); ntb_dma_can_stall: the parameter exists.
ntb_dma_can_stall() { [ -e "$NTB_HW_PARAMS/stall" ]; }
ntb_dma_stall() { echo "$1" > "$NTB_HW_PARAMS/stall"; }
