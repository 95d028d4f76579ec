#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Kernel storage over NTRDMA: NVMe over Fabrics with the RDMA transport, as
# the stock kernel ULPs drive the verbs face (rdma_cm over ntr0's addresses,
# CQ pools, fast registration per I/O, READ_WITH_INV and SEND_WITH_INV).
# The peer is the target (nvmet + nvmet-rdma, a file-backed namespace of
# NVMEOF_MB MiB on its tmpfs); this host connects with nvme-cli (nvme-rdma).
# Subtests:
#  1. the target's port listens on the peer's ntr0 address
#  2. nvme connect -t rdma: a live controller and its namespace
#  3. data integrity: fio writes the whole namespace and reads it back,
#     verifying every block (crc32c); the write and read rates are figures
#  4. a link loss of NVMEOF_DOWN_S s during a verified write (this port's
#     NTB link disabled through the fault injector, then enabled): the
#     controller reconnects by itself (nvme-rdma's own recovery), the write
#     completes without an I/O error and every block verifies
#  5. nvme disconnect: the controller goes
#  6. the same integrity job over nvme-tcp on ntr0 (the alternative a user
#     has on the same link), for the figures beside ours
#  7. the target comes down: port and subsystem removed, nvmet-rdma unloads
# Pair topology only: in one host, nvmet-rdma and nvme-rdma would connect a
# QP to another QP of the same ib_device (same-device loopback: not yet).
# Needs nvme-cli and fio, an NTB with a flat window (test bed: --flat 1) and
# the engine's test hooks (CONFIG_NTRDMA_TEST_HOOKS: the inject file).
#
# Environment: NVMEOF_MB (256), NVMEOF_DOWN_S (5).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"
. "$(dirname "$0")/lib/ulp.sh"

MB=${NVMEOF_MB:-256}
DOWN=${NVMEOF_DOWN_S:-5}
NQN=nqn.2026-11.org.ntrdma:nvmeof-test
SIP=10.79.5.2
CIP=10.79.5.1
CFS=/sys/kernel/config/nvmet
NAMES=(
	"target listens on the peer's ntr0 address"
	"nvme connect -t rdma"
	"fio write and verify ${MB} MiB over rdma"
	"link loss ${DOWN} s during a verified write: reconnect, no I/O error"
	"nvme disconnect"
	"fio write and verify ${MB} MiB over nvme-tcp on ntr0"
	"target removed, nvmet-rdma unloads"
)

ktap_header
ktap_plan ${#NAMES[@]}

is_pair || skip_all "needs two hosts: in one, nvmet-rdma and nvme-rdma would need a QP to reach another QP of the same ib_device (same-device loopback, not implemented)"
command -v nvme >/dev/null && command -v fio >/dev/null ||
	skip_all "nvme-cli or fio not installed (scripts/install-deps.sh installs both)"
ulp_pair "$CIP" "$SIP"
DBG=$(grep -l "^ntb: $LOCAL_DEV\$" "$DEBUGFS"/ntrdma/*/info 2>/dev/null |
	head -1 | xargs -r dirname)
ktap_diag "host $IBDEV ($CIP), target $PEER_IBDEV on the peer ($SIP)"

# ---- the target, on the peer ----
# target_port N TRTYPE SVCID: port N of the subsystem on $SIP.
target_port() {
	peer "cd $CFS/ports && mkdir $1 && cd $1 && echo $2 > addr_trtype &&
	      echo ipv4 > addr_adrfam && echo $SIP > addr_traddr &&
	      echo $3 > addr_trsvcid &&
	      ln -s $CFS/subsystems/$NQN subsystems/$NQN"
}
target_up() {
	peer "modprobe nvmet && modprobe nvmet-rdma && modprobe nvmet-tcp &&
	      { mountpoint -q /sys/kernel/config ||
		mount -t configfs none /sys/kernel/config; } &&
	      truncate -s ${MB}M /tmp/nvmeof-ns.img &&
	      mkdir $CFS/subsystems/$NQN && cd $CFS/subsystems/$NQN &&
	      echo 1 > attr_allow_any_host && mkdir namespaces/1 &&
	      echo /tmp/nvmeof-ns.img > namespaces/1/device_path &&
	      echo 1 > namespaces/1/buffered_io &&
	      echo 1 > namespaces/1/enable" &&
		target_port 1 rdma 4420 && target_port 2 tcp 4421
}
target_down() {
	peer "rm -f $CFS/ports/*/subsystems/$NQN; rmdir $CFS/ports/*;
	      echo 0 > $CFS/subsystems/$NQN/namespaces/1/enable;
	      rmdir $CFS/subsystems/$NQN/namespaces/1 $CFS/subsystems/$NQN;
	      rm -f /tmp/nvmeof-ns.img;
	      modprobe -r nvmet-rdma nvmet-tcp nvmet"
}
target_up 2>&1 | sed 's/^/# /'
ktap_check "${NAMES[0]}" \
	peer "dmesg | grep -q 'nvmet_rdma: enabling port 1 ($SIP:4420)'"

# ---- the host ----
# The namespace's block device (this guest has no other NVMe device).
ns_dev() { ls /dev/nvme[0-9]*n[0-9]* 2>/dev/null | grep -v 'c[0-9]' | head -1; }
ctrl_state() { cat /sys/class/nvme/nvme*/state 2>/dev/null | head -1; }
# connect TRTYPE SVCID: 0 when a live controller's namespace appeared.
connect() {
	modprobe "nvme-$1" || return 1
	timeout 120 nvme connect -t "$1" -a "$SIP" -s "$2" -n "$NQN" \
		--reconnect-delay=1 --ctrl-loss-tmo=60 2>&1 | sed 's/^/# /'
	wait_for 20 eval '[ -b "$(ns_dev)" ]' &&
		[ "$(ctrl_state)" = live ] && DEV=$(ns_dev)
}
# fio_verify NAME SIZE [FIO ARGS...]: sequential 64 KiB writes, then a
# read of it all verifying each block; 0 when fio reports no error and no
# verify failure. FIO_W, FIO_R: the write and read rates (MiB/s).
fio_verify() {
	local name=$1 size=$2 out=$NTRDMA_OUT/fio.$1.json
	shift 2
	timeout 600 fio --name="$name" --filename="$DEV" --rw=write --bs=64k \
		--size="$size" --direct=1 --ioengine=libaio --iodepth=8 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output-format=json "$@" > "$out" 2> "$out.err"
	local rc=$?
	sed 's/^/# fio: /' "$out.err" | head -5
	local err
	err=$(jq '.jobs[0].error' "$out" 2>/dev/null)
	FIO_W=$(jq '.jobs[0].write.bw / 1024 | floor' "$out" 2>/dev/null)
	FIO_R=$(jq '.jobs[0].read.bw / 1024 | floor' "$out" 2>/dev/null)
	ktap_diag "fio $name: exit $rc, error ${err:-none}, write ${FIO_W:-?} MiB/s, verify read ${FIO_R:-?} MiB/s"
	[ "$rc" = 0 ] && [ "$err" = 0 ]
}

ktap_check "${NAMES[1]}" connect rdma 4420
ktap_diag "controller $(ctrl_state), namespace ${DEV:-none}"
if [ -b "${DEV:-}" ] && fio_verify rdma "${MB}M"; then
	ktap_pass "${NAMES[2]}"
	metric nvmeof_rdma_write_MiBps "$FIO_W" MiB/s
	metric nvmeof_rdma_verify_read_MiBps "$FIO_R" MiB/s
else
	ktap_fail "${NAMES[2]}"
fi

# The link goes away for $DOWN s while a rate-limited verified write runs.
link_loss() {
	local fpid rc reconnects
	[ -b "${DEV:-}" ] && [ -e "$DBG/inject" ] || return 1
	reconnects=$(dmesg | grep -c 'Successfully reconnected')
	fio_verify linkloss 64M --rate=8m &
	fpid=$!
	sleep 2
	echo link_off > "$DBG/inject" || return 1
	wait_for 10 eval '[ "$(ctrl_state)" != live ]'
	ktap_diag "link off: controller $(ctrl_state)"
	sleep "$DOWN"
	echo link_on > "$DBG/inject"
	wait_for 90 eval '[ "$(ctrl_state)" = live ]'
	ktap_diag "link on: controller $(ctrl_state)"
	wait "$fpid"
	rc=$?
	dmesg | grep -E 'nvme nvme[0-9]+:' | tail -6 | sed 's/^/# /'
	[ "$rc" = 0 ] &&
		[ "$(dmesg | grep -c 'Successfully reconnected')" -gt "$reconnects" ]
}
if [ ! -e "$DBG/inject" ]; then
	ktap_skip "${NAMES[3]}" "no $DEBUGFS/ntrdma/<dev>/inject (module built without CONFIG_NTRDMA_TEST_HOOKS)"
else
	ktap_check "${NAMES[3]}" link_loss
fi

disconnect() {
	timeout 60 nvme disconnect -n "$NQN" 2>&1 | sed 's/^/# /'
	wait_for 20 eval '[ -z "$(ls /sys/class/nvme/ 2>/dev/null)" ]'
}
ktap_check "${NAMES[4]}" disconnect

DEV=
if connect tcp 4421 && fio_verify tcp "${MB}M"; then
	ktap_pass "${NAMES[5]}"
	metric nvmeof_tcp_ntr0_write_MiBps "$FIO_W" MiB/s
	metric nvmeof_tcp_ntr0_verify_read_MiBps "$FIO_R" MiB/s
else
	ktap_fail "${NAMES[5]}"
fi
disconnect >/dev/null

target_down 2>&1 | sed 's/^/# /'
ktap_check "${NAMES[6]}" peer "! grep -q '^nvmet' /proc/modules"
modprobe -r nvme-rdma nvme-tcp 2>/dev/null
modprobe -r ntrdma
peer "modprobe -r ntrdma"
ktap_finish
