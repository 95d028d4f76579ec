#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# iSCSI with iSER on NTRDMA: the stock kernel target (LIO with ib_isert)
# and initiator (open-iscsi with ib_iser) over the verbs face, connected by
# rdma_cm over ntr0's addresses. The peer is the target: a ramdisk LUN of
# ISER_MB MiB, one portal on its ntr0 address that takes both iSCSI/TCP and
# iSER, set up through configfs (targetcli does the same). This host logs
# in with iscsiadm.
# Subtests:
# - the target's portal on the peer has iSER enabled
# - login through the iser interface: the login's transport is iser and
#   its disk appears
# - ISER_MB MiB written to the disk and read back (direct I/O), same
#   sha256; the write and read rates are figures
# - logout: the login and its disk go
# - the same over iSCSI/TCP on ntr0 (the alternative a user has on the
#   same link), for the figures beside ours: login, data, logout
# - the target comes down: no QP or cm_id left on either device,
#   ib_isert and ib_iser unload
# Pair topology only: in one host, ib_isert and ib_iser would connect a QP
# to another QP of the same ib_device (same-device loopback).
# Needs open-iscsi (scripts/install-deps.sh) and an NTB with a flat window
# (test bed: --flat 1).
#
# Environment: ISER_MB (64).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"
. "$(dirname "$0")/lib/ulp.sh"

MB=${ISER_MB:-64}
SIP=10.79.7.2
CIP=10.79.7.1
# The target's iSCSI name, EUI-64 form (eui. and 16 hex digits).
IQN=eui.5e1ec7ab1eda7a5e
CFS=/sys/kernel/config/target
TPG=$CFS/iscsi/$IQN/tpgt_1
NP=$TPG/np/$SIP:3260
RD=$CFS/core/rd_mcp_0/ntrdma
SRC=/dev/shm/ntrdma-iser.src
BACK=/dev/shm/ntrdma-iser.back
NAMES=(
	"LIO target on the peer: portal $SIP:3260 with iSER enabled"
	"login over iser: transport iser, disk present"
	"iSER: ${MB} MiB written, read back, same sha256"
	"logout over iser: login and disk gone"
	"iSCSI over tcp on ntr0: login, ${MB} MiB written, read back, same sha256, logout"
	"target down: no QP or cm_id left, ib_isert and ib_iser unload"
)
export PATH=$PATH:/usr/sbin:/sbin

ktap_header
ktap_plan ${#NAMES[@]}

is_pair || skip_all "needs two hosts: in one, ib_isert and ib_iser would need a QP to reach another QP of the same ib_device (same-device loopback)"
for t in iscsiadm iscsid iscsi-iname; do
	command -v $t >/dev/null ||
		skip_all "$t not found: open-iscsi not installed (scripts/install-deps.sh installs it)"
done
ulp_pair "$CIP" "$SIP"
ktap_diag "initiator $IBDEV ($CIP), target $PEER_IBDEV on the peer ($SIP), ${MB} MiB per transfer"

dmesg_tail() {
	dmesg | grep -iE 'iser|iscsi|ntrdma' | tail -n 8 | sed 's/^/# dmesg: /'
	peer "dmesg | grep -iE 'isert|iscsi|target|ntrdma' | tail -n 8" | sed 's/^/# dmesg (peer): /'
}

# ---- the target, on the peer ----
# A ramdisk LUN, demo mode (any initiator, no authentication, writable),
# one portal that also takes iSER.
target_up() {
	peer "modprobe target_core_mod && modprobe iscsi_target_mod &&
	      modprobe ib_isert &&
	      { mountpoint -q /sys/kernel/config ||
		mount -t configfs none /sys/kernel/config; } &&
	      mkdir -p $RD && echo rd_pages=$((MB * 256)) > $RD/control &&
	      echo 1 > $RD/enable && mkdir -p $TPG/lun/lun_0 &&
	      ln -s $RD $TPG/lun/lun_0/ntrdma &&
	      mkdir $NP && echo 1 > $NP/iser &&
	      echo 0 > $TPG/attrib/authentication &&
	      echo 1 > $TPG/attrib/generate_node_acls &&
	      echo 1 > $TPG/attrib/cache_dynamic_acls &&
	      echo 0 > $TPG/attrib/demo_mode_write_protect &&
	      echo 1 > $TPG/enable"
}
target_down() {
	peer "echo 0 > $TPG/enable; echo 0 > $NP/iser; rmdir $NP;
	      rm -f $TPG/lun/lun_0/ntrdma; rmdir $TPG/lun/lun_0;
	      rmdir $TPG $CFS/iscsi/$IQN $CFS/iscsi $RD $(dirname $RD);
	      modprobe -r ib_isert iscsi_target_mod"
}
target_up 2>&1 | sed 's/^/# target: /'
ktap_check "${NAMES[0]}" peer "grep -qx 1 $NP/iser"

# ---- the initiator ----
modprobe sd_mod
modprobe ib_iser
modprobe iscsi_tcp
mkdir -p /etc/iscsi /run/lock/iscsi
[ -s /etc/iscsi/initiatorname.iscsi ] ||
	echo "InitiatorName=$(iscsi-iname)" > /etc/iscsi/initiatorname.iscsi
iscsid
head -c $((MB << 20)) /dev/urandom > $SRC
WANT=$(sha256sum < $SRC | cut -d' ' -f1)

# The logged-in target's disk (this guest has no other SCSI disk).
disk() {
	local b
	b=$(ls -d /sys/class/iscsi_session/session*/device/target*/*/block/* 2>/dev/null | head -1)
	[ -n "$b" ] && [ -b "/dev/${b##*/}" ] && echo "/dev/${b##*/}"
}
# login IFACE: discovery, then login through IFACE; DISK set.
login() {
	timeout 60 iscsiadm -m discovery -t st -p "$SIP:3260" -I "$1" 2>&1 | sed 's/^/# discovery: /'
	timeout 60 iscsiadm -m node -T "$IQN" -p "$SIP:3260" -I "$1" --login 2>&1 | sed 's/^/# login: /'
	iscsiadm -m session 2>&1 | sed 's/^/# logins: /'
	wait_for 20 eval '[ -n "$(disk)" ]' || { dmesg_tail; return 1; }
	DISK=$(disk)
	ktap_diag "disk $DISK, $(($(blockdev --getsize64 "$DISK") >> 20)) MiB"
	iscsiadm -m session 2>/dev/null | grep -q "^$2:"
}
logout() {
	timeout 60 iscsiadm -m node -T "$IQN" -p "$SIP:3260" -I "$1" --logout 2>&1 | sed 's/^/# logout: /'
	timeout 10 iscsiadm -m node -T "$IQN" -p "$SIP:3260" -I "$1" -o delete 2>/dev/null
	wait_for 20 eval '[ -z "$(ls /sys/class/iscsi_session 2>/dev/null)" ]'
}
# data NAME: the source written to the disk and read back, direct I/O,
# compared by sha256. W and R: the rates (MB/s).
data() {
	local t0 t1 t2 got rc=0
	[ -b "${DISK:-}" ] || return 1
	t0=$(date +%s%N)
	timeout 300 dd if=$SRC of="$DISK" bs=1M oflag=direct status=none || rc=1
	t1=$(date +%s%N)
	timeout 300 dd if="$DISK" of=$BACK bs=1M count="$MB" iflag=direct status=none || rc=1
	t2=$(date +%s%N)
	got=$(sha256sum < $BACK | cut -d' ' -f1)
	rm -f $BACK
	W=$(ulp_rate "$MB" $(((t1 - t0) / 1000000)))
	R=$(ulp_rate "$MB" $(((t2 - t1) / 1000000)))
	ktap_diag "$1: write $W MB/s, read $R MB/s, sha256 ${got:0:12} (source ${WANT:0:12})"
	[ "$rc" = 0 ] && [ "$got" = "$WANT" ] || { dmesg_tail; return 1; }
}

# over iser
DISK=
ktap_check "${NAMES[1]}" login iser iser
if data iSER; then
	ktap_pass "${NAMES[2]}"
	metric iser_write_MBps "$W" MB/s
	metric iser_read_MBps "$R" MB/s
else
	ktap_fail "${NAMES[2]}"
fi
ktap_check "${NAMES[3]}" logout iser

# over TCP on ntr0
DISK=
if login default tcp && data "iSCSI tcp"; then
	logout default && ktap_pass "${NAMES[4]}" || ktap_fail "${NAMES[4]}"
	metric iscsi_tcp_ntr0_write_MBps "$W" MB/s
	metric iscsi_tcp_ntr0_read_MBps "$R" MB/s
else
	ktap_fail "${NAMES[4]}"
	logout default
fi
rm -f $SRC

# everything goes
iscsiadm -k 0 2>/dev/null
target_down 2>&1 | sed 's/^/# target: /'
wait_for 10 eval '[ "$(ulp_left "sh -c" "$IBDEV")" = 0 ] && [ "$(ulp_left peer "$PEER_IBDEV")" = 0 ]'
lc=$(ulp_left "sh -c" "$IBDEV")
lp=$(ulp_left peer "$PEER_IBDEV")
modprobe -r ib_iser
rc=$?
peer "! grep -qE '^(ib_isert|iscsi_target_mod) ' /proc/modules"
prc=$?
ktap_diag "left: $lc QPs/cm_ids here, $lp on the peer; modprobe -r ib_iser: $rc; ib_isert gone on the peer: $((!prc))"
ktap_check "${NAMES[5]}" test "$lc" = 0 -a "$lp" = 0 -a "$rc" = 0 -a "$prc" = 0
modprobe -r iscsi_tcp 2>/dev/null
modprobe -r ntrdma
peer "modprobe -r ntrdma"
ktap_finish
