#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Debian packages of NTRDMA (make deb), into build/deb/ (DEB_OUT):
#   ntrdma-dkms_V_all.deb   the kernel sources under /usr/src/ntrdma-V with
#                           their dkms.conf; installing it builds ntrdma.ko
#                           and ntb_hw_ivshmem.ko for the running kernel and,
#                           where it has no CONFIG_NTB (Debian's kernels),
#                           the kernel's NTB modules: the core ntb.ko, the
#                           hardware drivers, ntb_transport, ntb_netdev and
#                           the test clients. Their sources come from the
#                           build host's linux-source packages, one folder
#                           per kernel series (ntb-core/X.Y/, not in git);
#                           other kernel series need their linux-source.
#   libntrdma1_V_ARCH.deb   the rdma-core provider (libntrdma-rdmav34.so in
#                           libibverbs' provider directory, ntrdma.driver)
# V = 0.<commits>, from git. Built with dpkg-deb from the work tree (git's
# list of files), so nothing but what is committed goes in. The provider
# comes from build/user (make user first).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${DEB_OUT:-$ROOT/build/deb}
VERSION=${DEB_VERSION:-0.$(git -C "$ROOT" rev-list --count HEAD)}
REV=$(git -C "$ROOT" rev-parse --short HEAD)
ARCH=$(dpkg --print-architecture)
MULTIARCH=$(gcc -print-multiarch)
MAINT="NTRDMA authors <ntrdma@invalid>"

# kernel_files: what DKMS needs to build the modules (no provider, no tests),
# and the docs the README points to.
kernel_files() {
	git -C "$ROOT" ls-files Makefile Kbuild Kconfig LICENSE README.md 'doc/*.md' \
		ntb_hw/Kbuild ntb_hw/Kconfig 'ntb_hw/*.[ch]' rdma/Kconfig 'rdma/*.[ch]' \
		'net/*.[ch]' 'include/uapi/rdma/*.h' selftests/kverbs/Kconfig \
		scripts/build-kernel-ext.sh scripts/kver.sh |
		grep -v -e '^rdma/provider/' -e '^rdma/tests/' -e '^ntb_hw/ivshmem_server/'
}

# control PACKAGE ARCH DEPENDS SECTION SUMMARY TEXT: DEBIAN/control on stdout.
control() {
	printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: %s\n' "$1" "$VERSION" "$2" "$MAINT"
	printf 'Depends: %s\nSection: %s\nPriority: optional\nHomepage: https://invalid/ntrdma\n' "$3" "$4"
	printf 'Description: %s\n %s\n .\n Built from commit %s.\n' "$5" "$6" "$REV"
}

# stage_script SRC DST: a maintainer script with the version filled in.
stage_script() {
	sed "s/@VERSION@/$VERSION/g" "$ROOT/scripts/deb/$1" >"$2"
	chmod 0755 "$2"
}

# stage_ntb_core DIR: the NTB sources (the files and folders
# build-kernel-ext.sh --sources names) of each /usr/src/linux-source-X.Y.tar.xz,
# under DIR/X.Y/ as in linux-source (build-kernel-ext.sh builds from them for
# a kernel of that series).
stage_ntb_core() {
	local tar mm top srcs
	mapfile -t srcs < <("$ROOT/scripts/build-kernel-ext.sh" --sources)
	[ ${#srcs[@]} -gt 0 ] || return 1
	for tar in /usr/src/linux-source-*.tar.xz; do
		[ -f "$tar" ] || continue
		top=$(basename "$tar" .tar.xz)
		mm=${top#linux-source-}
		mkdir -p "$1/$mm"
		tar -C "$1/$mm" --strip-components=1 -xJf "$tar" "${srcs[@]/#/$top/}"
	done
	[ -n "$(ls "$1")" ] || { echo "mkdeb: no /usr/src/linux-source-*.tar.xz for the NTB modules" >&2; return 1; }
}

build_dkms() {
	local stage=$OUT/stage-dkms src f
	src=$stage/usr/src/ntrdma-$VERSION
	rm -rf "$stage"
	mkdir -p "$src" "$stage/DEBIAN"
	while read -r f; do
		mkdir -p "$src/$(dirname "$f")"
		cp -p "$ROOT/$f" "$src/$f"
	done < <(kernel_files)
	sed "s/@VERSION@/$VERSION/g" "$ROOT/scripts/deb/dkms.conf.in" >"$src/dkms.conf"
	stage_ntb_core "$src/ntb-core"
	control ntrdma-dkms all "dkms (>= 3), make, gcc" kernel \
		"NTRDMA kernel modules (DKMS)" \
		"Ethernet (ntr0) and InfiniBand verbs over a PCIe NTB; DKMS builds the modules on install." \
		>"$stage/DEBIAN/control"
	stage_script ntrdma-dkms.postinst "$stage/DEBIAN/postinst"
	stage_script ntrdma-dkms.prerm "$stage/DEBIAN/prerm"
	dpkg-deb --root-owner-group -Zxz --build "$stage" "$OUT/ntrdma-dkms_${VERSION}_all.deb" >/dev/null
}

build_provider() {
	local stage=$OUT/stage-lib
	rm -rf "$stage"
	mkdir -p "$stage/DEBIAN"
	DESTDIR=$stage cmake --install "$ROOT/build/user" --component provider >/dev/null
	[ -n "$(ls "$stage/usr/lib/$MULTIARCH/libibverbs/"libntrdma-rdmav*.so 2>/dev/null)" ] ||
		{ echo "mkdeb: no provider in build/user (make user first)" >&2; return 1; }
	# The provider is built for one rdma-core release (its libibverbs'
	# structure layouts), whatever the private ABI number says.
	local rel
	# shellcheck disable=SC2016 # dpkg-query's ${Field}, not the shell's
	rel=$(dpkg-query -W -f='${Version}' libibverbs1 | sed 's/^[0-9]*://; s/[.~-].*//')
	control libntrdma1 "$ARCH" "libibverbs1 (>= $rel), libibverbs1 (<< $((rel + 1))), libc6" libs \
		"NTRDMA provider for libibverbs" \
		"The rdma-core user-space driver of ntrdma's InfiniBand verbs devices." \
		>"$stage/DEBIAN/control"
	echo /etc/libibverbs.d/ntrdma.driver >"$stage/DEBIAN/conffiles"
	dpkg-deb --root-owner-group -Zxz --build "$stage" "$OUT/libntrdma1_${VERSION}_$ARCH.deb" >/dev/null
}

mkdir -p "$OUT"
rm -f "$OUT"/*.deb
build_dkms
build_provider
rm -rf "$OUT/stage-dkms" "$OUT/stage-lib"
ls "$OUT"/*.deb
