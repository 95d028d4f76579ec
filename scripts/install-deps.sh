#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Install the Debian 12 packages NTRDMA needs to build and test, idempotently.
# Fast when everything is present (one dpkg-query); otherwise apt-get as root.
set -euo pipefail

PKGS=(
	build-essential bc bison flex kmod cpio xz-utils libelf-dev libssl-dev
	cmake libgtest-dev clang-format sparse
	linux-image-amd64 linux-headers-amd64 linux-source-6.1 dkms
	qemu-system-x86 busybox-static iproute2 iputils-ping ethtool pciutils jq procps
	iperf3 rdma-core ibverbs-utils libibverbs-dev librdmacm-dev
	rdmacm-utils perftest qperf python3 gnuplot-nox
	nvme-cli fio python3-pyverbs nfs-kernel-server nfs-common open-iscsi
	libfabric-bin xdp-tools sockperf
)

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
# The kernel image and its headers come as a pair: one installed alone would
# name a kernel whose build tree (or image) is missing.
case " ${missing[*]} " in
*" linux-image-amd64 "* | *" linux-headers-amd64 "*)
	missing+=(linux-image-amd64 linux-headers-amd64)
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u) ;;
esac

echo "install-deps: installing: ${missing[*]}"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
