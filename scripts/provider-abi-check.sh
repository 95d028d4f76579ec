#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Does the rdma-core provider (rdma/provider/) build for Debian 13's
# rdma-core (56) as well as for the host's? Downloads trixie's libibverbs-dev,
# libibverbs1 and linux-libc-dev (apt-get download with private lists and
# cache: the host's apt state is not touched, no root needed), unpacks them
# into build/provider-56/root and builds the provider against that root
# (cmake -DNTRDMA_IBVERBS_ROOT, -Wall -Wextra, linked -z defs against
# trixie's libibverbs.so.1). Then checks that the library is named as
# trixie's libibverbs dlopen()s providers (lib<name>-rdmav<PABI>.so) and
# takes libibverbs' private symbols at IBVERBS_PRIVATE_<PABI>.
#
# Exit 0: built clean. 1: configure or build failed, a warning, or a wrong
# name or symbol version (the log says which). 3: the packages cannot be
# downloaded (no network, no apt-get); the reason on one line of stderr.
# The packages are kept (build/provider-56/debs, root): later runs need no
# network; rm -rf build/provider-56 to take newer ones.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${PROVIDER_ABI_OUT:-$ROOT/build/provider-56}
SUITE=trixie
PKGS="libibverbs-dev libibverbs1 linux-libc-dev"
APTDIR=$OUT/apt
SYSROOT=$OUT/root
BUILD=$OUT/build
LOG=$OUT/build.log

cannot() {
	echo "provider-abi-check: cannot download Debian 13 ($SUITE) packages: $*" >&2
	exit 3
}

fail() {
	echo "provider-abi-check: FAIL: $*" >&2
	exit 1
}

# apt-get on private lists, cache and dpkg status.
apt_private() {
	apt-get -q \
		-o Dir::Etc::SourceList="$APTDIR/$SUITE.list" \
		-o Dir::Etc::SourceParts="$APTDIR/empty.d" \
		-o Dir::Etc::Preferences=/dev/null \
		-o Dir::Etc::PreferencesParts="$APTDIR/empty.d" \
		-o Dir::State::Lists="$APTDIR/lists" \
		-o Dir::State::status="$APTDIR/status" \
		-o Dir::State::extended_states="$APTDIR/extended_states" \
		-o Dir::Cache="$APTDIR/cache" \
		-o Debug::NoLocking=1 \
		-o APT::Sandbox::User="$(id -un)" \
		-o Acquire::Languages=none \
		-o Acquire::Retries=1 \
		-o Acquire::http::Timeout=30 \
		"$@"
}

have_debs() {
	local p
	for p in $PKGS; do
		compgen -G "$OUT/debs/${p}_*.deb" >/dev/null || return 1
	done
}

download() {
	command -v apt-get >/dev/null || cannot "no apt-get"
	command -v dpkg-deb >/dev/null || cannot "no dpkg-deb"
	mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$APTDIR/empty.d" "$OUT/debs"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" \
		>"$APTDIR/$SUITE.list"
	: >"$APTDIR/status"
	apt_private update >"$OUT/apt.log" 2>&1 ||
		cannot "apt-get update failed (no network?): $(grep -m1 '^[EW]:' "$OUT/apt.log" || tail -1 "$OUT/apt.log")"
	compgen -G "$APTDIR/lists/*_dists_${SUITE}_main_binary-*_Packages*" >/dev/null ||
		cannot "no $SUITE package list after apt-get update (no network?): $(grep -m1 '^[EW]:' "$OUT/apt.log" || echo see "$OUT/apt.log")"
	rm -f "$OUT"/debs/*.deb
	# shellcheck disable=SC2086
	(cd "$OUT/debs" && apt_private download $PKGS) >>"$OUT/apt.log" 2>&1 ||
		cannot "apt-get download $PKGS failed: $(grep -m1 '^E:' "$OUT/apt.log" || tail -1 "$OUT/apt.log")"
	have_debs || cannot "apt-get download left no .deb for some of $PKGS"
}

unpack() {
	local d
	rm -rf "$SYSROOT" "$SYSROOT.tmp"
	mkdir -p "$SYSROOT.tmp"
	for d in "$OUT"/debs/*.deb; do
		dpkg-deb -x "$d" "$SYSROOT.tmp"
		# shellcheck disable=SC2016 # dpkg-query's ${Field}, not the shell's
		dpkg-deb --show --showformat='${Package} ${Version}\n' "$d" >>"$SYSROOT.tmp/.packages"
	done
	mv "$SYSROOT.tmp" "$SYSROOT"
}

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9

if [ ! -f "$SYSROOT/.packages" ]; then
	have_debs || download
	unpack
fi

MULTIARCH=$(gcc -print-multiarch)
IBVERBS=$(readlink -f "$SYSROOT/usr/lib/$MULTIARCH/libibverbs.so")
[ -f "$IBVERBS" ] || fail "no libibverbs.so in $SYSROOT/usr/lib/$MULTIARCH"
# (Whole outputs into variables: with pipefail, grep -q or head could make
# the command before them fail of SIGPIPE.)
VERDEFS=$(readelf -V --wide "$IBVERBS")
PABI=$(sed -n 's/.*Name: IBVERBS_PRIVATE_\([0-9]*\).*/\1/p' <<<"$VERDEFS" | sed -n 1p)
[ -n "$PABI" ] || fail "$IBVERBS defines no IBVERBS_PRIVATE_<N> version"
# The name trixie's libibverbs dlopen()s providers by: lib%s-rdmav<PABI>.so.
STRS=$(strings "$IBVERBS")
SUFFIX=$(sed -n 's/^lib%s\(-rdmav[0-9]*\.so\)$/\1/p' <<<"$STRS" | sed -n 1p)
[ "$SUFFIX" = "-rdmav$PABI.so" ] ||
	fail "$IBVERBS loads providers as lib%s${SUFFIX:-?}, not lib%s-rdmav$PABI.so"

# A fresh build each time, so that every file compiles (and warns) again.
rm -rf "$BUILD"
{
	cmake -S "$ROOT/rdma/provider" -B "$BUILD" -DNTRDMA_IBVERBS_ROOT="$SYSROOT" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="-Wall -Wextra" &&
		cmake --build "$BUILD" -- VERBOSE=1
} >"$LOG" 2>&1 || {
	grep -E 'error|Error' "$LOG" | head -20 >&2 || true
	fail "configure or build against $(paste -sd, "$SYSROOT/.packages") failed: $LOG"
}
WARN=$(grep -cE 'warning:|CMake Warning' "$LOG" || true)
if [ "$WARN" -ne 0 ]; then
	grep -E 'warning:|CMake Warning' "$LOG" | head -20 >&2
	fail "$WARN warning(s) building against rdma-core of $SUITE: $LOG"
fi

LIB=$BUILD/libntrdma-rdmav$PABI.so
[ -f "$LIB" ] || fail "no $(basename "$LIB") (PABI $PABI) in $BUILD: $(cd "$BUILD" && ls ./*.so 2>/dev/null)"
VERNEEDS=$(readelf -V --wide "$LIB")
grep -q "Name: IBVERBS_PRIVATE_$PABI " <<<"$VERNEEDS" ||
	fail "$LIB does not need IBVERBS_PRIVATE_$PABI"
UNDEF=$(readelf --dyn-syms --wide "$LIB" | awk '$7 == "UND" {print $8}')
NPRIV=$(grep -c "@IBVERBS_PRIVATE_$PABI$" <<<"$UNDEF" || true)
grep -qx "verbs_register_driver_$PABI@IBVERBS_PRIVATE_$PABI" <<<"$UNDEF" ||
	fail "$LIB does not register through verbs_register_driver_$PABI@IBVERBS_PRIVATE_$PABI"
echo "provider-abi-check: $(paste -sd, "$SYSROOT/.packages"): $(basename "$LIB") built," \
	"0 warnings, $NPRIV symbols at IBVERBS_PRIVATE_$PABI"
