#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Build the kernel parts the distribution kernel leaves out (the NTB core, the
# stock NTB clients, ntb_netdev and siw) from the distribution's linux-source
# package, into build/kernel/. Nothing of this goes into the repository.
# Also extracts scripts/checkpatch.pl and the NTB selftest for later steps.
# KEXT_CORE_ONLY=1 builds the NTB core (ntb.ko) alone: what the DKMS package
# needs (scripts/deb/).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KDIR=${KDIR:-/lib/modules/$("$ROOT/scripts/kver.sh")/build}
# The linux-source of the target kernel's major.minor (KVER), else the newest.
kmm=$(sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' <<<"${KVER:-}")
if [ -n "${LINUX_SOURCE_TAR:-}" ]; then
	SRC_TAR=$LINUX_SOURCE_TAR
elif [ -n "$kmm" ] && [ -f "/usr/src/linux-source-$kmm.tar.xz" ]; then
	SRC_TAR=/usr/src/linux-source-$kmm.tar.xz
else
	SRC_TAR=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -1 || true)
fi
OUT=$ROOT/build/kernel
LSRC=$ROOT/build/linux-src

if grep -q '^CONFIG_NTB=' "$KDIR/.config" 2>/dev/null; then
	echo "build-kernel-ext: $KDIR has CONFIG_NTB; using the kernel's own NTB core"
	exit 0
fi

# The DKMS package ships the NTB core of the kernel it was built for
# (ntb-core/core.c, its major.minor in ntb-core/VERSION): no linux-source
# needed on the target for that kernel.
build_core() { # CORE_C FROM: ntb.ko alone
	mkdir -p "$OUT"
	cp "$1" "$OUT/core.c"
	printf 'obj-m += ntb.o\nntb-y := core.o\n' >"$OUT/Kbuild"
	make -s -C "$KDIR" M="$OUT" modules
	echo "build-kernel-ext: built ntb.ko (the NTB core) from $2"
	exit 0
}
if [ "${KEXT_CORE_ONLY:-0}" = 1 ] && [ -f "$ROOT/ntb-core/core.c" ] &&
	[ "$(cat "$ROOT/ntb-core/VERSION" 2>/dev/null)" = "$kmm" ]; then
	build_core "$ROOT/ntb-core/core.c" "the packaged ntb-core ($kmm)"
fi
[ -n "$SRC_TAR" ] || { echo "build-kernel-ext: no /usr/src/linux-source-*.tar.xz (install linux-source-$kmm)" >&2; exit 1; }

# The stamp names the tarball: another kernel's sources are extracted anew.
stamp=$LSRC/.extracted
if [ ! -f "$stamp" ] || [ "$SRC_TAR" -nt "$stamp" ] || [ "$(cat "$stamp")" != "$SRC_TAR" ]; then
	rm -rf "$LSRC"
	mkdir -p "$LSRC"
	top=$(basename "$SRC_TAR" .tar.xz)
	tar -C "$LSRC" --strip-components=1 -xJf "$SRC_TAR" \
		"$top/drivers/ntb" "$top/drivers/net/ntb_netdev.c" \
		"$top/drivers/infiniband/sw/siw" \
		"$top/tools/testing/selftests/ntb" \
		"$top/tools/testing/selftests/kselftest.h" \
		"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
		"$top/scripts/const_structs.checkpatch"
	echo "$SRC_TAR" >"$stamp"
fi

[ "${KEXT_CORE_ONLY:-0}" = 1 ] && build_core "$LSRC/drivers/ntb/core.c" "$(basename "$SRC_TAR")"

mkdir -p "$OUT/siw"
for f in drivers/ntb/core.c drivers/ntb/ntb_transport.c \
	 drivers/net/ntb_netdev.c drivers/ntb/test/ntb_tool.c \
	 drivers/ntb/test/ntb_perf.c drivers/ntb/test/ntb_pingpong.c; do
	cmp -s "$LSRC/$f" "$OUT/$(basename "$f")" || cp "$LSRC/$f" "$OUT/"
done
cp -u "$LSRC"/drivers/infiniband/sw/siw/*.[ch] "$OUT/siw/"

# Written only when changed: several work trees may share this folder.
put() { cmp -s - "$1" 2>/dev/null <<<"$2" || printf '%s\n' "$2" > "$1"; }
put "$OUT/Kbuild" "$(cat <<'KB'
obj-m += ntb.o ntb_transport.o ntb_netdev.o ntb_tool.o ntb_perf.o ntb_pingpong.o
ntb-y := core.o
KB
)"
put "$OUT/siw/Kbuild" "$(cat <<'KB'
obj-m += siw.o
siw-y := siw_cm.o siw_cq.o siw_main.o siw_mem.o siw_qp.o siw_qp_tx.o \
	 siw_qp_rx.o siw_verbs.o
KB
)"

make -s -C "$KDIR" M="$OUT" modules
make -s -C "$KDIR" M="$OUT/siw" CONFIG_RDMA_SIW=m modules
cmp -s "$OUT/siw/siw.ko" "$OUT/siw.ko" || cp "$OUT/siw/siw.ko" "$OUT/siw.ko"
echo "build-kernel-ext: built $(cd "$OUT" && ls ./*.ko | xargs -n1 basename | tr '\n' ' ')"
