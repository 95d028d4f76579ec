#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make check-fresh`: what a new user's first command meets. Builds a
# minimal Debian 12 root with mmdebstrap (git and make only: what it takes
# to clone and type make), puts a clean clone of HEAD in it and runs
# `make demo` there in a chroot, from an empty package state: the project's
# own scripts must install everything. Needs root and Debian's registry.
# The root is made anew each time (build/fresh/root, a few GiB); the logs
# stay in build/fresh/. Exit status: make demo's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${FRESH_OUT:-$ROOT/build/fresh}
FS=$OUT/root
SOURCES=${FRESH_SOURCES:-/etc/apt/sources.list.d/debian.sources}

[ "$(id -u)" -eq 0 ] || { echo "check-fresh: needs root (chroot, mounts)" >&2; exit 2; }
if ! command -v mmdebstrap >/dev/null; then
	echo "check-fresh: installing mmdebstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		mmdebstrap >/dev/null 2>&1 || {
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
	}
fi
# The host's Debian sources when it has them, else Debian's own.
mirror=()
if [ -f "$SOURCES" ]; then
	mirror=("$SOURCES")
else
	mirror=("deb http://deb.debian.org/debian bookworm main"
		"deb http://deb.debian.org/debian bookworm-updates main"
		"deb http://deb.debian.org/debian-security bookworm-security main")
fi

rm -rf "$OUT"
mkdir -p "$OUT"
echo "check-fresh: building a minimal Debian 12 root in $FS"
t0=$SECONDS
mmdebstrap --variant=minbase --include=git,make,ca-certificates \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	bookworm "$FS" "${mirror[@]}" >"$OUT/mmdebstrap.log" 2>&1 ||
	{ tail -20 "$OUT/mmdebstrap.log"; echo "check-fresh: FAIL: mmdebstrap"; exit 1; }
echo "check-fresh: root built in $((SECONDS - t0)) s"

# A clean clone of what is committed, as a new user would have it.
git clone -q --no-local "$ROOT" "$FS/root/ntrdma"
echo "check-fresh: clone of $(git -C "$FS/root/ntrdma" log -1 --format='%h %s' | cut -c1-60)"
cp /etc/resolv.conf "$FS/etc/resolv.conf" 2>/dev/null || true

# make demo in the root, in a mount namespace of its own: the mounts go with it.
t0=$SECONDS
set +e
unshare --mount --propagation private /bin/bash -s "$FS" >"$OUT/demo.log" 2>&1 <<'EOF'
set -e
fs=$1
mount -t proc proc "$fs/proc"
mount --rbind /sys "$fs/sys"
mount --rbind /dev "$fs/dev"
mount -t tmpfs -o mode=1777 shm "$fs/dev/shm"
mount -t tmpfs tmpfs "$fs/run"
mount -t tmpfs tmpfs "$fs/tmp"
exec chroot "$fs" /usr/bin/env -i HOME=/root TERM=dumb \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	/bin/bash -c 'cd /root/ntrdma && make demo'
EOF
rc=$?
set -e
grep -E '^demo:|faces:|^\| ' "$OUT/demo.log" | tail -30
if [ $rc -eq 0 ]; then
	echo "check-fresh: PASS: make demo on a fresh Debian 12 root, first run, $((SECONDS - t0)) s"
else
	tail -20 "$OUT/demo.log"
	echo "check-fresh: FAIL: make demo exit $rc (log: $OUT/demo.log)"
fi
exit $rc
