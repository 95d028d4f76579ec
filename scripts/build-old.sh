#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Build an earlier revision of ntrdma from this repository's history, for
# make bench's before/after rows (system ntrdma-old): its kernel modules
# (ntb_hw_ivshmem.ko, ntrdma.ko) and its rdma-core provider, against the
# NTB core of the current build (build/kernel, made by `make`).
#
# Usage: scripts/build-old.sh [REV]
#   REV defaults to 91d5a6d^, the last revision before direct placement
#   (issue 14): every RDMA WRITE and READ through the target's CPU.
# Prints the directory holding ntrdma.ko, ntb_hw/ntb_hw_ivshmem.ko and
# libntrdma-rdmav34.so; a build already there is reused.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REV=${1:-91d5a6d^}
KVER=${KVER:-$("$ROOT/scripts/kver.sh")}
KDIR=${KDIR:-/lib/modules/$KVER/build}
SYMVERS=$ROOT/build/kernel/Module.symvers

fail() { echo "build-old: $*" >&2; exit 1; }

sha=$(git -C "$ROOT" rev-parse --short=7 "$REV^{commit}" 2>/dev/null) ||
	fail "no revision $REV in $ROOT (a clone without history?)"
[ -f "$SYMVERS" ] || fail "$SYMVERS missing (run make first)"
dir=$ROOT/build/old/$sha
if [ -f "$dir/ntrdma.ko" ] && [ -f "$dir/ntb_hw/ntb_hw_ivshmem.ko" ] &&
   [ -f "$dir/libntrdma-rdmav34.so" ]; then
	echo "$dir"
	exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
git -C "$ROOT" archive "$sha" | tar -x -C "$dir"
grep -qs '^CONFIG_INFINIBAND_USER_ACCESS=' "$KDIR/.config" ||
	fail "$KDIR has no CONFIG_INFINIBAND_USER_ACCESS: no verbs face"
# shellcheck disable=SC2046 # the job count
make -s -C "$KDIR" M="$dir" -j$(nproc) CONFIG_NTB_HW_IVSHMEM=m CONFIG_NTRDMA=m \
	CONFIG_NTRDMA_VERBS=y CONFIG_NTRDMA_KVERBS_TEST=n \
	KBUILD_EXTRA_SYMBOLS="$SYMVERS" modules >&2 ||
	fail "modules of $sha did not build"
# A revision whose provider has its own CMakeLists.txt builds with it
# (it finds libibverbs' private ABI and the uapi header); older ones are
# plain sources.
if [ -f "$dir/rdma/provider/CMakeLists.txt" ]; then
	{ cmake -S "$dir/rdma/provider" -B "$dir/provider-build" >&2 &&
		cmake --build "$dir/provider-build" >&2 &&
		cp "$(find "$dir/provider-build" -name 'libntrdma-rdmav*.so' | head -1)" \
			"$dir/libntrdma-rdmav34.so"; } ||
		fail "provider of $sha did not build"
else
	cc -std=gnu11 -O2 -fPIC -shared -fvisibility=hidden -Wl,--no-undefined \
		-I"$dir/rdma/provider" -o "$dir/libntrdma-rdmav34.so" \
		"$dir/rdma/provider/"*.c -libverbs -lpthread ||
		fail "provider of $sha did not build"
fi
echo "$dir"
