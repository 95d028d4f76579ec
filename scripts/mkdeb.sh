#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Debian packages of NTRDMA (make deb), into build/deb/ (DEB_OUT):
#   ntrdma-dkms_V_all.deb   the kernel sources under /usr/src/ntrdma-V with
#                           their dkms.conf; installing it builds ntb.ko (the
#                           NTB core), ntrdma.ko and ntb_hw_ivshmem.ko for the
#                           running kernel. The NTB core's source (Debian's
#                           kernels leave CONFIG_NTB out) is the build host's
#                           linux-source copy for its kernel (ntb-core/, not
#                           in git); other kernels need their linux-source.
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

# stage_ntb_core DIR: drivers/ntb/core.c of this host's kernel, and its
# major.minor (scripts/build-kernel-ext.sh uses it when the target matches).
stage_ntb_core() {
	local kver core=$ROOT/build/linux-src/drivers/ntb/core.c
	kver=$("$ROOT/scripts/kver.sh")
	[ -f "$core" ] || KVER=$kver "$ROOT/scripts/build-kernel-ext.sh" >/dev/null
	mkdir -p "$1"
	cp "$core" "$1/core.c"
	sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' <<<"$kver" >"$1/VERSION"
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
