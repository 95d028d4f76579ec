#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Build the kernel parts the distribution kernel leaves out, from the
# distribution's linux-source package, into build/kernel/. Nothing of this
# goes into the repository.
#   NTB modules: the NTB core (ntb.ko), ntb_transport, ntb_netdev and the
#   test clients ntb_tool, ntb_perf, ntb_pingpong (build/kernel/); the NTB
#   hardware drivers ntb_hw_intel, ntb_hw_amd (x86_64), ntb_hw_idt,
#   ntb_hw_switchtec, ntb_hw_epf (build/kernel/hw/, with the kernel's own
#   Makefiles), and the switchtec management driver they need where the
#   kernel lacks CONFIG_PCI_SW_SWITCHTEC (build/kernel/switchtec/).
#   siw (the default build only), scripts/checkpatch.pl and the NTB
#   selftest for later steps.
# A kernel that has CONFIG_NTB gets none of these.
# KEXT_NTB_ONLY=1 builds the NTB modules alone, ntb_transport, ntb_netdev
# and the test clients only with NTB_CLIENTS=yes: what the DKMS package
# needs (scripts/deb/).
#   build-kernel-ext.sh --list           the NTB modules built for KDIR:
#                                        NAME FOLDER (under build/kernel/)
#   build-kernel-ext.sh --install [DIR]  install them (INSTALL_MOD_PATH=DIR)
#                                        into extra/ntrdma (make install)
#   build-kernel-ext.sh --sources        what they are built from: files and
#                                        folders of linux-source (make deb)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# What the NTB modules are built from, under a linux-source tree.
NTB_SOURCES=(drivers/ntb/core.c drivers/ntb/ntb_transport.c drivers/net/ntb_netdev.c
	     drivers/ntb/test/ntb_tool.c drivers/ntb/test/ntb_perf.c
	     drivers/ntb/test/ntb_pingpong.c drivers/ntb/hw drivers/pci/switch/switchtec.c)

[ "${1:-}" = --sources ] && { printf '%s\n' "${NTB_SOURCES[@]}"; exit 0; }
KDIR=${KDIR:-/lib/modules/$("$ROOT/scripts/kver.sh")/build}
OUT=$ROOT/build/kernel
LSRC=$ROOT/build/linux-src

kconf() { grep -qs "^$1=[ym]" "$KDIR/.config"; }

# The NTB hardware drivers KDIR can take: Kconfig symbol, module, folder
# under build/kernel/hw/ (the kernel's drivers/ntb/hw/).
hw_drivers() {
	if kconf CONFIG_X86_64; then
		echo "CONFIG_NTB_INTEL ntb_hw_intel intel"
		echo "CONFIG_NTB_AMD ntb_hw_amd amd"
	fi
	kconf CONFIG_HWMON && echo "CONFIG_NTB_IDT ntb_hw_idt idt"
	echo "CONFIG_NTB_SWITCHTEC ntb_hw_switchtec mscc"
	echo "CONFIG_NTB_EPF ntb_hw_epf epf"
}

# The kernel's switchtec management driver, which ntb_hw_switchtec needs:
# built only where the kernel has none.
need_switchtec() { ! kconf CONFIG_PCI_SW_SWITCHTEC; }

# ntb_transport, ntb_netdev and the test clients: always in the default
# build (the test bed runs them); in the package's (KEXT_NTB_ONLY=1) only
# with NTB_CLIENTS=yes, in the environment or in /etc/default/ntrdma-dkms.
[ -z "${NTB_CLIENTS:-}" ] && [ -r /etc/default/ntrdma-dkms ] &&
	NTB_CLIENTS=$(sed -n 's/^NTB_CLIENTS=//p' /etc/default/ntrdma-dkms | tr -d "\"'")
CLIENTS="ntb_transport ntb_netdev ntb_tool ntb_perf ntb_pingpong"
[ "${KEXT_NTB_ONLY:-0}" != 1 ] || [ "${NTB_CLIENTS:-}" = yes ] || CLIENTS=

list_modules() {
	local m sym name dir
	kconf CONFIG_NTB && return 0
	for m in ntb $CLIENTS; do
		echo "$m ."
	done
	while read -r sym name dir; do
		echo "$name hw/$dir"
	done < <(hw_drivers)
	if need_switchtec; then echo "switchtec switchtec"; fi
}

# install_modules DESTDIR: modules_install of each folder (modules.order
# there names what was built, so siw.ko beside ntb.ko stays out).
install_modules() {
	local d
	kconf CONFIG_NTB && return 0
	for d in $(list_modules | awk '{ print $2 }' | sort -u); do
		[ "$d" = . ] && d=
		make -s -C "$KDIR" M="$OUT${d:+/$d}" INSTALL_MOD_PATH="${1:-}" \
			INSTALL_MOD_DIR=extra/ntrdma modules_install
	done
}

case ${1:-} in
--list) list_modules; exit 0 ;;
--install) install_modules "${2:-}"; exit 0 ;;
esac

if kconf CONFIG_NTB; then
	echo "build-kernel-ext: $KDIR has CONFIG_NTB; using the kernel's own NTB modules"
	exit 0
fi

# The linux-source of the target kernel's major.minor (KVER, else KDIR's
# release), else the newest.
kmm=$(sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' \
	<<<"${KVER:-$(cat "$KDIR/include/config/kernel.release" 2>/dev/null)}")
if [ -n "${LINUX_SOURCE_TAR:-}" ]; then
	SRC_TAR=$LINUX_SOURCE_TAR
elif [ -n "$kmm" ] && [ -f "/usr/src/linux-source-$kmm.tar.xz" ]; then
	SRC_TAR=/usr/src/linux-source-$kmm.tar.xz
else
	SRC_TAR=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -1 || true)
fi

# Written only when changed: an unchanged source is not rebuilt.
put() { cmp -s - "$1" 2>/dev/null <<<"$2" || printf '%s\n' "$2" > "$1"; }
cpc() { cmp -s "$1" "$2" || cp "$1" "$2"; }

# build_ntb SRC FROM: the NTB modules from the linux-source tree SRC.
build_ntb() {
	local src=$1 f d m objs sym name dir conf=() symvers=$OUT/Module.symvers
	mkdir -p "$OUT/hw" "$OUT/switchtec"
	for f in "${NTB_SOURCES[@]}"; do
		case $f in drivers/ntb/hw | */switchtec.c) continue ;; esac
		cpc "$src/$f" "$OUT/$(basename "$f")"
	done
	(cd "$src/drivers/ntb/hw" && find . -type d) | while read -r d; do
		mkdir -p "$OUT/hw/$d"
	done
	(cd "$src/drivers/ntb/hw" && find . -type f) | while read -r f; do
		cpc "$src/drivers/ntb/hw/$f" "$OUT/hw/$f"
	done
	cpc "$src/drivers/pci/switch/switchtec.c" "$OUT/switchtec/switchtec.c"
	objs=ntb.o
	for m in $CLIENTS; do objs="$objs $m.o"; done
	put "$OUT/Kbuild" "obj-m += $objs
ntb-y := core.o"
	put "$OUT/switchtec/Kbuild" "obj-m += switchtec.o"
	make -s -C "$KDIR" M="$OUT" modules
	if need_switchtec; then
		make -s -C "$KDIR" M="$OUT/switchtec" modules
		symvers="$symvers $OUT/switchtec/Module.symvers"
	fi
	while read -r sym name dir; do
		conf+=("$sym=m")
	done < <(hw_drivers)
	make -s -C "$KDIR" M="$OUT/hw" "${conf[@]}" KBUILD_EXTRA_SYMBOLS="$symvers" modules
	echo "build-kernel-ext: built the NTB modules from $2:" \
		"$(list_modules | awk '{ print $1 }' | xargs)"
}

# The DKMS package ships the NTB sources of the kernel series whose
# linux-source the build host had (ntb-core/X.Y/, a linux-source subset): no
# linux-source needed on the target for those series.
if [ "${KEXT_NTB_ONLY:-0}" = 1 ] && [ -n "$kmm" ] && [ -f "$ROOT/ntb-core/$kmm/drivers/ntb/core.c" ]; then
	build_ntb "$ROOT/ntb-core/$kmm" "the packaged ntb-core/$kmm"
	exit 0
fi
[ -n "$SRC_TAR" ] || { echo "build-kernel-ext: no /usr/src/linux-source-*.tar.xz (install linux-source-$kmm)" >&2; exit 1; }

# The stamp names the tarball and what was taken from it: another
# kernel's sources, or another list, are extracted anew.
members=(drivers/ntb drivers/net/ntb_netdev.c drivers/pci/switch/switchtec.c
	 drivers/infiniband/sw/siw tools/testing/selftests/ntb
	 tools/testing/selftests/kselftest.h scripts/checkpatch.pl
	 scripts/spelling.txt scripts/const_structs.checkpatch)
stamp=$LSRC/.extracted
want="$SRC_TAR ${members[*]}"
if [ ! -f "$stamp" ] || [ "$SRC_TAR" -nt "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
	rm -rf "$LSRC"
	mkdir -p "$LSRC"
	top=$(basename "$SRC_TAR" .tar.xz)
	tar -C "$LSRC" --strip-components=1 -xJf "$SRC_TAR" "${members[@]/#/$top/}"
	echo "$want" >"$stamp"
fi

build_ntb "$LSRC" "$(basename "$SRC_TAR")"
[ "${KEXT_NTB_ONLY:-0}" = 1 ] && exit 0

mkdir -p "$OUT/siw"
cp -u "$LSRC"/drivers/infiniband/sw/siw/*.[ch] "$OUT/siw/"
put "$OUT/siw/Kbuild" "$(cat <<'KB'
obj-m += siw.o
siw-y := siw_cm.o siw_cq.o siw_main.o siw_mem.o siw_qp.o siw_qp_tx.o \
	 siw_qp_rx.o siw_verbs.o
KB
)"
make -s -C "$KDIR" M="$OUT/siw" CONFIG_RDMA_SIW=m modules
cmp -s "$OUT/siw/siw.ko" "$OUT/siw.ko" || cp "$OUT/siw/siw.ko" "$OUT/siw.ko"
echo "build-kernel-ext: built $(cd "$OUT" && ls ./*.ko | xargs -n1 basename | tr '\n' ' ')"
