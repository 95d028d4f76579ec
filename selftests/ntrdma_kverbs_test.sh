#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA's verbs face as a kernel user (a ULP) sees it: ntrdma_kverbs_test.ko
# (selftests/kverbs/) connects an RC QP on each of the two ib_devices and at
# load time runs SEND/RECV with the PD's local_dma_lkey, fast registration
# (REG_MR, then RDMA WRITE/READ from the other side), LOCAL_INV and a stale
# key (both refused with a remote access error), ib_drain_qp(), atomics on
# a fast-registered page, the access flags and range a REG_MR gives, and
# SEND_WITH_INV (the receive reports the key, which is refused afterwards),
# and registration per I/O as NVMe-oF does it, 10000 times (KVERBS_PER_IO):
# REG_MR chained with the SEND of its key (the key must work as soon as the
# SEND is seen), WRITE chained with SEND_WITH_INV (the data must be there
# when the receive completes), checked by content; then the last key is
# refused. Last, READ_WITH_INV into a fast-registered MR that the other
# side is reading (several 2 MiB READs, on the DMA channel): once it
# completed, the MR's bytes change and none of the new ones may be read.
# It logs KTAP lines to the kernel log; each becomes a subtest here. Both
# devices must be in this host: loopback topology only. Needs an NTB with a
# flat window (test bed: --flat 1).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

MOD=ntrdma_kverbs_test
# The module's tests, in its order (for skips and missing results).
NAMES=(
	"send recv local_dma_lkey"
	"frmr rdma write read"
	"frmr local invalidate"
	"frmr stale rkey refused"
	"drain qp"
	"atomics fetch-add cmp-swap"
	"frmr access from reg_wr"
	"frmr bounds"
	"send with invalidate"
	"frmr per i/o"
	"read with invalidate under a read"
	"send posted with interrupts off"
)

ktap_header
ktap_plan $((${#NAMES[@]} + 1))

if is_pair; then
	skip_all "needs both ib_devices in one host (loop topology); in pair they are in different guests" "$MOD unloads"
fi
need_ntb_pair

modprobe ntrdma
port_active() { grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null; }
both_up() {
	LOCAL_IB=$(ibdev_of "$LOCAL_DEV") && REMOTE_IB=$(ibdev_of "$REMOTE_DEV") &&
		port_active "$LOCAL_IB" && port_active "$REMOTE_IB"
}
if ! wait_for 20 both_up; then
	ktap_diag "ib devices: ${LOCAL_IB:-none} ($LOCAL_DEV), ${REMOTE_IB:-none} ($REMOTE_DEV); ports not ACTIVE"
	for n in "${NAMES[@]}"; do ktap_fail "$n"; done
	ktap_fail "$MOD unloads"
	ktap_finish
fi
ktap_diag "requester $LOCAL_IB ($LOCAL_DEV), responder $REMOTE_IB ($REMOTE_DEV)"

# The module's lines are those after our marker in the kernel log.
marker="ntrdma_kverbs_test.sh: start $$.$RANDOM"
echo "$marker" > /dev/kmsg
timeout 600 modprobe "$MOD" local="$LOCAL_IB" peer="$REMOTE_IB" per_io_iters="${KVERBS_PER_IO:-10000}"
rc=$?
[ $rc -eq 0 ] || ktap_diag "modprobe $MOD: exit $rc"
log=$(dmesg | sed -n "/$marker/,\$p" | sed -n 's/^.*ntrdma_kverbs: //p')
summary=$(cat /sys/module/$MOD/parameters/summary 2>/dev/null)
ktap_diag "summary: ${summary:-none}"

# In the module's order: its diagnostics, then each result line.
i=0
while IFS= read -r line; do
	case $line in
	"#"*) ktap_diag "${line#"# "}" ;;
	"ok "* | "not ok "*)
		[ $i -lt ${#NAMES[@]} ] || continue
		n=${NAMES[$i]}
		i=$((i + 1))
		case $line in
		"ok $i $n") ktap_pass "$n" ;;
		"ok $i $n # SKIP "*) ktap_skip "$n" "${line#*# SKIP }" ;;
		"not ok $i $n") ktap_fail "$n" ;;
		*) ktap_fail "$n: unexpected result line '$line'" ;;
		esac
		;;
	esac
done <<<"$log"
while [ $i -lt ${#NAMES[@]} ]; do
	ktap_fail "${NAMES[$i]}: no result in the kernel log"
	i=$((i + 1))
done

# Everything was released at init: the module goes, the devices stay.
rmmod "$MOD"
rc=$?
ktap_check "$MOD unloads (rmmod exit $rc)" test $rc = 0

modprobe -r ntrdma
ktap_finish
