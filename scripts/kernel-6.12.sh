#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Debian 13's kernel line (6.12) as the test bed's second kernel, on a
# Debian 12 host.
#
#   scripts/kernel-6.12.sh install      install it, print its release (KVER)
#   scripts/kernel-6.12.sh build KVER   build our modules and the NTB core
#                                       for it; print the folder that holds
#                                       them (testbed.sh --ko-root)
#
# install: from bookworm-backports, which carries the 6.12 kernel of Debian
# 13 built for Debian 12 (image, headers, linux-source-6.12): its headers
# build modules with Debian 12's gcc-12 and pahole, where trixie's need
# gcc-14 and pahole 1.30. Already installed: no network, no root needed.
# Exits 3, the reason on stderr, when it cannot be installed here (not root,
# no network, no such packages): make check then skips the 6.12 runs.
# The kernel postinst hooks run with INITRD=No: the test bed packs its own
# initramfs, the host never boots this kernel.
#
# build: a copy of the tracked sources (git ls-files) in build/k/KVER/src
# (the main tree's modules stay built for the default kernel), then `make
# modules KVER=KVER KDIR=its headers` there, which also builds the NTB core,
# the stock NTB clients and siw from /usr/src/linux-source-6.12.tar.xz.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIST=/etc/apt/sources.list.d/ntrdma-bookworm-backports.list
SUITE=bookworm-backports

cannot() {
	echo "kernel-6.12: cannot install the 6.12 kernel: $*" >&2
	exit 3
}

installed_kver() { # the newest 6.12 release with image, headers and modules
	local v
	[ -f /usr/src/linux-source-6.12.tar.xz ] || return 1
	for v in $(ls /boot/vmlinuz-6.12.*-amd64 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -rV); do
		if [ -d "/lib/modules/$v/build" ] && [ -d "/lib/modules/$v/kernel" ]; then
			echo "$v"
			return 0
		fi
	done
	return 1
}

# Refresh the package list of bookworm-backports alone (the host's other
# lists are left as they are).
update_backports() {
	[ -f "$LIST" ] ||
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" >"$LIST"
	apt-get update -qq -o Dir::Etc::SourceList="$LIST" -o Dir::Etc::SourceParts=- \
		-o APT::Get::List-Cleanup=0 || cannot "apt-get update of $SUITE failed (no network?)"
}

# The release the backports' linux-image-amd64 stands for.
backports_kver() {
	apt-cache show "linux-image-amd64/$SUITE" 2>/dev/null |
		sed -n 's/^Depends:.*linux-image-\(6\.12\.[^ ,]*-amd64\).*/\1/p' | sort -V | tail -1
}

do_install() {
	local kver
	if kver=$(installed_kver); then
		echo "$kver"
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || cannot "not root (apt-get needs root; or install linux-image, linux-headers and linux-source-6.12 from $SUITE)"
	command -v apt-get >/dev/null || cannot "no apt-get"
	update_backports
	kver=$(backports_kver)
	[ -n "$kver" ] || cannot "$SUITE has no linux-image-amd64 for 6.12"
	echo "kernel-6.12: installing linux-image-$kver, linux-headers-$kver, linux-source-6.12 from $SUITE" >&2
	# These exist only in the backports, so no -t: with -t apt would also
	# take the backports' linux-image-amd64, linux-libc-dev... and make 6.12
	# the host's default kernel and uapi headers.
	INITRD=No DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"linux-image-$kver" "linux-headers-$kver" "linux-source-6.12/$SUITE" >&2 ||
		cannot "apt-get install from $SUITE failed"
	installed_kver || cannot "installed, but no /boot/vmlinuz-$kver with headers and modules"
}

do_build() {
	local kver=${1:?build needs KVER} dst
	[ -d "/lib/modules/$kver/build" ] || { echo "kernel-6.12: no headers for $kver" >&2; exit 1; }
	dst=$ROOT/build/k/$kver/src
	mkdir -p "$dst"
	# tar keeps the mtimes: unchanged files are not rebuilt.
	git -C "$ROOT" ls-files | tar -C "$ROOT" -cf - -T - | tar -C "$dst" -xf -
	# KDIR too: under make check the outer make exports the default kernel's.
	make -s -C "$dst" KVER="$kver" KDIR="/lib/modules/$kver/build" modules >&2
	echo "$dst"
}

case ${1:-} in
install) do_install ;;
build) do_build "${2:-}" ;;
*) sed -n '3,10p' "$0" >&2; exit 2 ;;
esac
