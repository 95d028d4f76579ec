#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# What a peer can make us keep: side A floods side B through the test-only
# requests of debugfs ntrdma/<dev>/verbs (CONFIG_NTRDMA_TEST_HOOKS), and B's
# records, counted in its own verbs file, stay within B's limits.
#  - rdma_cm: with a listener of backlog BACKLOG on B that answers no
#    request (ntrdma_cm_hold), CM_N connection requests leave at most
#    BACKLOG records pending at B (a backlog's worth more per 20 s, as
#    pending ones time out); the rest are refused at once (the connect
#    fails on A's side instead of waiting), and every record goes with the
#    listener.
#  - MR imports: MR_N one-page MR exports leave B with MR_CAP entries (the
#    peer's key table: NTRDMA_MAX_MR), the rest refused with a line in
#    B's log; the slab grows by little more than the entries' records;
#    the session's end (A's link off and on) takes them all.
# The MR part needs an NTB with a flat window (test bed: --flat 1): MR
# exports name pages the peer's flat window reaches; skipped in windowed
# mode.
#
# Environment: CM_N (10000), MR_N (20000).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

CM_N=${CM_N:-10000}
MR_N=${MR_N:-20000}
BACKLOG=8
MR_CAP=16384
SIP=10.79.9.2
PORT=18950
HOLD=$NTRDMA_ROOT/build/user/rdma/tests/cm/ntrdma_cm_hold

ktap_header
NTESTS=6
ktap_plan $NTESTS
need_ntb_pair
if is_pair; then B="peer"; else B="sh -c"; fi
A="sh -c"

load_ntrdma || fail_rest "modprobe ntrdma failed"
find_dbgs || fail_rest "no ntrdma debugfs folders"
wait_for 20 link_up || fail_rest "no session between the two sides"
# verbs FIELD [SIDE]: a field of that side's (default B) verbs file
verbs() {
	local s=${2:-B} d=DBG${2:-B}
	${!s} "sed -n 's/^$1: //p' ${!d}/verbs"
}
[ -n "$(verbs flood A)" ] || ktap_skip_rest "peer limits" "no flood requests in $DBGA/verbs (built without CONFIG_NTRDMA_TEST_HOOKS)"
install_provider
modprobe rdma_ucm 2>/dev/null
is_pair && peer "modprobe rdma_ucm" 2>/dev/null

# flood REQUEST: A floods B; prints A's tally (sent= ok= refused= ...)
flood() {
	echo "$1" >"$DBGA/verbs" || ktap_diag "flood '$1': write failed"
	verbs flood A
}
field() { sed -n "s/.*$1=\([-0-9]*\).*/\1/p" <<<"$2"; }

# ---- rdma_cm: requests on a listener that answers none ----
peer_lib "n=\$(netdev_of $REMOTE_DEV) && ip link set \$n up && ip addr replace $SIP/24 dev \$n" ||
	ktap_diag "no address $SIP on the peer's netdev"
out=/tmp/peer-limits-hold.$$
$B "rm -f $out; ($HOLD $SIP $PORT $BACKLOG 600 >$out 2>&1 & echo \$! >$out.pid)"
wait_for 15 $B "grep -q listening $out" || ktap_diag "listener: $($B "cat $out" | head -3 | xargs)"
t0=$(date +%s%N)
tally=$(flood "cm_req $CM_N $PORT $SIP")
ms=$((($(date +%s%N) - t0) / 1000000))
rec=$(verbs cm_records)
pend=$(verbs cm_pending)
ktap_diag "$CM_N CM_REQs in $ms ms: A's answers: $tally; B keeps $rec records, $pend pending"
ktap_check "$CM_N connection requests: B keeps at most the backlog ($BACKLOG) pending" \
	test -n "$rec" -a "${rec:-1}" -le "$BACKLOG" -a "${pend:-1}" -le "$BACKLOG"
# (a pending request times out after 20 s: a longer flood gets a new
# backlog's worth taken per 20 s)
ok=$(field ok "$tally")
ref=$(field refused "$tally")
ktap_check "the requests past the backlog are refused at once (taken ${ok:-?}, refused ${ref:-?} of $CM_N)" \
	test -n "$ok" -a "${ok:-0}" -le $((BACKLOG * (1 + ms / 20000))) -a \
	"$((ok + ref))" = "$CM_N" -a "$(field failed "$tally")" = 0
# the listener goes: its pending requests with it
$B "kill \$(cat $out.pid)"
no_records() { [ "$(verbs cm_records)" = 0 ]; }
wait_for 10 no_records
rec=$(verbs cm_records)
ktap_diag "listener: $($B "cat $out" | xargs); B's records after it went: $rec"
ktap_check "no record left once the listener went" test "$rec" = 0
$B "rm -f $out $out.pid"

# ---- MR imports ----
ntrdma_windowed && ktap_skip_rest "MR imports" "windowed mode: the peer reads no page list of ours"
slab() { $B "sed -n 's/^Slab: *\([0-9]*\) kB/\1/p' /proc/meminfo"; }
s0=$(slab)
t0=$(date +%s%N)
tally=$(flood "mr_export $MR_N")
ms=$((($(date +%s%N) - t0) / 1000000))
s1=$(slab)
n=$(verbs rmr_entries)
bytes=$(verbs rmr_bytes)
grown=$((s1 - s0))
ktap_diag "$MR_N MR exports in $ms ms: A's answers: $tally; B keeps $n entries, $bytes bytes; B's slab $s0 -> $s1 kB"
ktap_check "$MR_N one-page exports: B keeps the cap, $MR_CAP entries (${n:-?}), the rest refused" \
	test "${n:-0}" -eq $MR_CAP -a "$(field refused "$tally")" = $((MR_N - MR_CAP))
# the entries' records (64 bytes each) and their index: 4 MiB is ample
ktap_diag "slab growth $grown kB for $n entries ($bytes bytes of records)"
$B "dmesg | grep -m2 'MR exports beyond'" | sed 's/^/# dmesg: /'
ktap_check "slab growth within 4 MiB, and B's log says it refused exports" \
	eval '[ "$grown" -lt 4096 ] && $B "dmesg | grep -q \"MR exports beyond\""'
# the session ends: they go
inject() { echo "$1" >"$DBGA/inject"; }
inject link_off
b_down() { [ "$(info_of B link)" = down ]; }
wait_for 10 b_down
inject link_on
wait_for 30 link_up || ktap_diag "no new session after link_on"
n=$(verbs rmr_entries)
ktap_check "after the session ended: no entry left (${n:-?})" test "$n" = 0
ktap_finish
