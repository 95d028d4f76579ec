#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NFS over RDMA on NTRDMA: the stock kernel server (nfsd with svcrdma) and
# client (nfs with xprtrdma) over the verbs face, connected by rdma_cm over
# ntr0's addresses. The peer exports a tmpfs directory (fsid=0: the NFSv4
# pseudo-root too) on TCP 2049 and RDMA 20049; this host mounts it.
# Subtests:
#  1. the peer's nfsd listens on rdma 20049 (its portlist)
#  2. mount -o vers=3,proto=rdma,port=20049
#  3. NFSv3 over rdma: NFS_MB MiB written, read back (cache dropped), same
#     sha256, umount; the write and read rates are figures
#  4-5. the same with vers=4.2
#  6-7. vers=3 and vers=4.2 over TCP on ntr0 (the alternative a user has on
#     the same link), for the figures beside ours: mount, data, umount
#  8. the server comes down: no QP or cm_id left on either device, rpcrdma
#     unloads on both hosts
# Pair topology only: in one host, svcrdma and xprtrdma would connect a QP
# to another QP of the same ib_device (same-device loopback).
# Needs nfs-kernel-server and nfs-common (scripts/install-deps.sh) and an NTB
# with a flat window (test bed: --flat 1).
#
# Environment: NFS_MB (64; 256 doubles the test's time under TCG).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"
. "$(dirname "$0")/lib/ulp.sh"

MB=${NFS_MB:-64}
SIP=10.79.6.2
CIP=10.79.6.1
EXP=/srv/ntrdma-nfs
MNT=/mnt/ntrdma-nfs
SRC=/dev/shm/ntrdma-nfs.src
BACK=/dev/shm/ntrdma-nfs.back
NAMES=(
	"nfsd listens on rdma 20049 on the peer"
	"mount vers=3 proto=rdma"
	"NFSv3 over rdma: ${MB} MiB written, read back, same sha256, umount"
	"mount vers=4.2 proto=rdma"
	"NFSv4.2 over rdma: ${MB} MiB written, read back, same sha256, umount"
	"NFSv3 over tcp on ntr0: mount, ${MB} MiB written, read back, same sha256, umount"
	"NFSv4.2 over tcp on ntr0: mount, ${MB} MiB written, read back, same sha256, umount"
	"server down: no QP or cm_id left, rpcrdma unloads on both hosts"
)
export PATH=$PATH:/usr/sbin:/sbin

ktap_header
ktap_plan ${#NAMES[@]}

is_pair || skip_all "needs two hosts: in one, svcrdma and xprtrdma would need a QP to reach another QP of the same ib_device (same-device loopback)"
for t in mount.nfs rpc.nfsd rpc.mountd exportfs rpcbind; do
	command -v $t >/dev/null ||
		skip_all "$t not found: nfs-kernel-server or nfs-common not installed (scripts/install-deps.sh installs both)"
done
ulp_pair "$CIP" "$SIP"
ktap_diag "client $IBDEV ($CIP), server $PEER_IBDEV on the peer ($SIP), ${MB} MiB per transfer"

dmesg_tail() {
	dmesg | grep -iE 'rpcrdma|svcrdma|nfs|ntrdma' | tail -n 8 | sed 's/^/# dmesg: /'
	peer "dmesg | grep -iE 'rpcrdma|svcrdma|nfs|ntrdma' | tail -n 8" | sed 's/^/# dmesg (peer): /'
}

# ---- the server, on the peer ----
# A tmpfs export (fsid=0: also the NFSv4 pseudo-root), nfsd on TCP 2049
# and RDMA 20049. The NFSv4 grace period is ended at once (no client had
# state to reclaim): opens would wait for it.
server_up() {
	peer "modprobe nfsd && modprobe rpcrdma &&
	      { mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd; } &&
	      mkdir -p $EXP /run/rpcbind /var/lib/nfs/v4recovery &&
	      mount -t tmpfs -o size=$((MB + 16))m tmpfs $EXP && chmod 1777 $EXP &&
	      rpcbind && rpc.mountd &&
	      exportfs -o rw,fsid=0,no_root_squash,insecure,no_subtree_check '*:$EXP' &&
	      rpc.nfsd 4 && echo 'rdma 20049' > /proc/fs/nfsd/portlist &&
	      echo Y > /proc/fs/nfsd/v4_end_grace"
}
server_down() {
	peer "rpc.nfsd 0; exportfs -ua; kill \$(pidof rpc.mountd rpcbind) 2>/dev/null;
	      umount $EXP; umount /proc/fs/nfsd"
}
server_up 2>&1 | sed 's/^/# server: /'
peer "cat /proc/fs/nfsd/portlist 2>/dev/null" | sed 's/^/# portlist: /'
ktap_check "${NAMES[0]}" peer "grep -qx 'rdma 20049' /proc/fs/nfsd/portlist"

# ---- the client ----
modprobe nfs
modprobe rpcrdma
mkdir -p $MNT
head -c $((MB << 20)) /dev/urandom > $SRC
WANT=$(sha256sum < $SRC | cut -d' ' -f1)

# nfs_mount VERS PROTO: the export on $MNT, over PROTO (rdma: port 20049).
nfs_mount() {
	local opts="vers=$1,proto=$2" path=/
	[ "$2" = rdma ] && opts="$opts,port=20049"
	[ "$1" = 3 ] && opts="$opts,nolock" path=$EXP
	timeout -k 5 60 mount -t nfs -o "$opts" "$SIP:$path" $MNT 2>&1 | sed 's/^/# mount: /'
	if ! grep -q " $MNT nfs" /proc/mounts; then
		ktap_diag "mount -o $opts $SIP:$path: not mounted"
		dmesg_tail
		return 1
	fi
	ktap_diag "$(grep " $MNT nfs" /proc/mounts | cut -d' ' -f1-4)"
	grep " $MNT nfs" /proc/mounts | grep -q "proto=$2"
}


# nfs_data NAME: the source written to the mount and read back (the page
# cache dropped first: the read crosses the link), compared by sha256, then
# unmounted. W and R: the rates (MB/s).
nfs_data() {
	local t0 t1 t1b t2 got rc=0
	grep -q " $MNT nfs" /proc/mounts || return 1
	t0=$(date +%s%N)
	timeout 300 dd if=$SRC of=$MNT/data bs=1M conv=fsync status=none || rc=1
	t1=$(date +%s%N)
	sync
	echo 3 > /proc/sys/vm/drop_caches
	t1b=$(date +%s%N)
	timeout 300 dd if=$MNT/data of=$BACK bs=1M status=none || rc=1
	t2=$(date +%s%N)
	got=$(sha256sum < $BACK | cut -d' ' -f1)
	rm -f $BACK $MNT/data
	W=$(ulp_rate "$MB" $(((t1 - t0) / 1000000)))
	R=$(ulp_rate "$MB" $(((t2 - t1b) / 1000000)))
	ktap_diag "$1: write $W MB/s, read $R MB/s, sha256 ${got:0:12} (wrote ${WANT:0:12})"
	timeout 60 umount $MNT || { ktap_diag "$1: umount failed"; umount -f -l $MNT; rc=1; }
	[ "$rc" = 0 ] && [ "$got" = "$WANT" ] || { dmesg_tail; return 1; }
}

# 2-5: over rdma
for v in 3 4.2; do
	[ "$v" = 3 ] && n=1 || n=3
	ktap_check "${NAMES[$n]}" nfs_mount "$v" rdma
	if nfs_data "NFSv$v rdma"; then
		ktap_pass "${NAMES[$((n + 1))]}"
		metric "nfs${v/./}_rdma_write_MBps" "$W" MB/s
		metric "nfs${v/./}_rdma_read_MBps" "$R" MB/s
	else
		ktap_fail "${NAMES[$((n + 1))]}"
	fi
	grep -q " $MNT nfs" /proc/mounts && umount -f -l $MNT
done

# 6-7: over TCP on ntr0
for v in 3 4.2; do
	[ "$v" = 3 ] && n=5 || n=6
	if nfs_mount "$v" tcp && nfs_data "NFSv$v tcp"; then
		ktap_pass "${NAMES[$n]}"
		metric "nfs${v/./}_tcp_ntr0_write_MBps" "$W" MB/s
		metric "nfs${v/./}_tcp_ntr0_read_MBps" "$R" MB/s
	else
		ktap_fail "${NAMES[$n]}"
	fi
	grep -q " $MNT nfs" /proc/mounts && umount -f -l $MNT
done
rm -f $SRC

# 8: everything goes
server_down 2>&1 | sed 's/^/# server: /'
modprobe -r nfsv3 nfsv4 nfs 2>/dev/null
wait_for 10 eval '[ "$(ulp_left "sh -c" "$IBDEV")" = 0 ] && [ "$(ulp_left peer "$PEER_IBDEV")" = 0 ]'
lc=$(ulp_left "sh -c" "$IBDEV")
lp=$(ulp_left peer "$PEER_IBDEV")
modprobe -r rpcrdma
rc=$?
peer "modprobe -r rpcrdma nfsd"
prc=$?
ktap_diag "left: $lc QPs/cm_ids here, $lp on the peer; modprobe -r rpcrdma: $rc here, $prc on the peer"
ktap_check "${NAMES[7]}" test "$lc" = 0 -a "$lp" = 0 -a "$rc" = 0 -a "$prc" = 0
modprobe -r ntrdma
peer "modprobe -r ntrdma"
ktap_finish
