#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The emulated NTB's copy-rate probe (ntb_hw/ntb_hw_ivshmem_probe.c, make
# bench's link limit): copies into the peer's MW 0 and, through the flat window, into
# pages the peer exported, by CPU or by the port's DMA engine; refuses the flat copy without an export and any
# copy while a client owns the NTB. Needs the flat window (--flat 1).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"

NTESTS=6
ktap_header
ktap_plan $NTESTS

D=$DEBUGFS/ntb_hw_ivshmem
install_modules
modprobe -r ntrdma 2>/dev/null
is_pair && peer "modprobe -r ntrdma 2>/dev/null"
if [ ! -d "$D" ]; then
	ktap_skip_rest "copy probe" "not the emulated NTB (no $D)"
fi
if ! wait_for 20 ntb_pair || [ ! -e "$D/$LOCAL_DEV/copy_probe" ]; then
	fail_rest "no NTB pair with copy_probe"
fi
probe() { echo "$1" >"$D/$LOCAL_DEV/copy_probe" 2>/dev/null; }
on_peer() { peer "echo $1 >$D/$REMOTE_DEV/copy_probe"; }
rate() { # BYTES (a sed pattern): the MB/s of a copy of that many bytes
	sed -n "s/^copied $1 bytes in [0-9]* usecs, \([0-9]*\) MBytes\/s\$/\1/p" "$D/$LOCAL_DEV/copy_probe"
}

probe window
r=$(rate 134217728)
ktap_diag "window: $(cat "$D/$LOCAL_DEV/copy_probe")"
ktap_check "window: 128 MiB into the peer's MW 0" test "${r:-0}" -gt 0

probe flat
rc=$?
ktap_diag "flat without an export: rc $rc, $(cat "$D/$LOCAL_DEV/copy_probe")"
ktap_check "flat copy refused while the peer exported nothing" \
	grep -q 'exported nothing' "$D/$LOCAL_DEV/copy_probe"

on_peer export && probe flat
r=$(rate 134217728)
ktap_diag "flat: $(cat "$D/$LOCAL_DEV/copy_probe")"
ktap_check "flat: 128 MiB into the 4 MiB the peer exported" test "${r:-0}" -gt 0

probe flat_dma
r=$(rate '[0-9]*')
ktap_diag "flat_dma: $(cat "$D/$LOCAL_DEV/copy_probe")"
ktap_check "flat_dma: the same by the port's DMA engine" test "${r:-0}" -gt 0

on_peer unexport && ! probe flat
rc=$?
ktap_check "unexport: the next flat copy is refused" test $rc = 0

modprobe ntrdma && ! probe window
rc=$?
ktap_check "no copy while a client (ntrdma) owns the NTB" test $rc = 0
modprobe -r ntrdma
ktap_finish
