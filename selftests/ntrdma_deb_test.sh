#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The Debian packages (make deb) installed into this host: ntrdma-dkms builds
# ntb.ko, ntb_hw_ivshmem.ko and ntrdma.ko for the running kernel through DKMS
# on dpkg -i, libntrdma1 puts the provider where libibverbs looks. Then the
# modules are loaded from where the package put them, ntrdma_tools_test.sh
# runs on them and the installed provider (one subtest: its own KTAP is
# shown indented), and dpkg -r takes the modules away again.
# In the test bed: boot with --no-modules (nothing of the build tree loaded);
# the packages go into the guest's writable layer. Loop topology (one host).
# Not in run.sh's default list; scripts/check.sh runs it. Environment:
# DEB_DIR (build/deb), DEB_TEST_HOST=1 (run outside the test bed).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

DEB_DIR=${DEB_DIR:-$NTRDMA_ROOT/build/deb}
LIBDIR=/usr/lib/$(gcc -print-multiarch)/libibverbs
NTESTS=7

ktap_header
ktap_plan $NTESTS

result() { if [ "$1" = 0 ]; then ktap_pass "$2"; else ktap_fail "$2"; fi; }
# It installs packages system-wide: a test-bed guest's writable layer only,
# unless asked (not in run.sh's default list either).
[ -n "${NTRDMA_TOPO:-}" ] || [ "${DEB_TEST_HOST:-0}" = 1 ] ||
	ktap_skip_rest packages "installs packages system-wide: test bed only (DEB_TEST_HOST=1 to run here)"
is_pair && ktap_skip_rest packages "installed on one host: loop topology only"
dkms_deb=$(ls "$DEB_DIR"/ntrdma-dkms_*_all.deb 2>/dev/null | head -1)
lib_deb=$(ls "$DEB_DIR"/libntrdma1_*.deb 2>/dev/null | head -1)
[ -n "$dkms_deb" ] && [ -n "$lib_deb" ] || fail_rest "no packages in $DEB_DIR (make deb)"
command -v dkms >/dev/null || fail_rest "dkms is not installed (scripts/install-deps.sh)"

# 1: nothing of ours present before the install, so what follows is the packages'
pre=$(lsmod | awk '$1 ~ /^(ntb|ntb_hw_ivshmem|ntrdma)$/ { print $1 }' | xargs)
[ -z "$pre" ] && [ ! -e "$LIBDIR/libntrdma-rdmav34.so" ] && [ ! -e /etc/libibverbs.d/ntrdma.driver ]
result $? "nothing installed or loaded before the packages${pre:+ (loaded: $pre)}"
# the test bed's modprobe rules point at the build tree: not for this test
rm -f /etc/modprobe.d/ntrdma-testbed.conf

# 2: dpkg -i builds the modules (DKMS) for this kernel
t0=$SECONDS
out=$(dpkg -i "$lib_deb" "$dkms_deb" 2>&1)
rc=$?
ktap_diag "dpkg -i: exit $rc after $((SECONDS - t0)) s"
[ $rc = 0 ] || tail -20 <<<"$out" | sed 's/^/# /'
result $rc "dpkg -i $(basename "$lib_deb") $(basename "$dkms_deb")"

# 3: DKMS built and installed all three modules for the running kernel
kver=$(uname -r)
st=$(dkms status -m ntrdma -k "$kver" 2>&1)
ktap_diag "dkms status: $st"
ok=0
for m in ntb ntb_hw_ivshmem ntrdma; do
	p=$(modinfo -n "$m" 2>/dev/null)
	ktap_diag "$m: ${p:-not found}"
	[[ $p == /lib/modules/$kver/updates/dkms/$m.ko* ]] || ok=1
done
[[ $st == *installed* ]] || ok=1
result $ok "DKMS installed ntb, ntb_hw_ivshmem and ntrdma for $kver"

# 4: they load from there (the build tree's ntrdma has the fault injection
# file in debugfs, the packaged one not)
how=$(modprobe --show-depends ntrdma 2>&1 | xargs)
ktap_diag "modprobe --show-depends ntrdma: $how"
modprobe ntb_hw_ivshmem && modprobe ntrdma
rc=$?
mountpoint -q "$DEBUGFS" || mount -t debugfs none "$DEBUGFS"
wait_for 20 ntb_pair
hooks=$(ls "$DEBUGFS"/ntrdma/*/inject 2>/dev/null | head -1)
devs=$(find "$DEBUGFS/ntrdma" -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
ktap_diag "debugfs ntrdma: ${devs:-nothing}; fault injection: ${hooks:-none}"
[ $rc = 0 ] && [[ $how == *"/lib/modules/$kver/updates/dkms/ntrdma.ko"* ]] && [ -n "$devs" ] && [ -z "$hooks" ]
result $? "modprobe ntrdma loads the installed module"

# 5: the provider from the package: the .driver file names it, libibverbs finds it
wait_for 20 ibdev_of "$LOCAL_DEV" >/dev/null
drv=$(cat /etc/libibverbs.d/ntrdma.driver 2>/dev/null)
dev=$(ibdev_of "$LOCAL_DEV")
out=$(LD_DEBUG=libs ibv_devinfo -d "${dev:-none}" 2>&1)
grep -q "$LIBDIR/libntrdma-rdmav34.so" <<<"$out" && grep -q 'transport:.*InfiniBand' <<<"$out" &&
	[ "$drv" = "driver ntrdma" ]
rc=$?
ktap_diag "ntrdma.driver: '$drv'; ibv_devinfo -d ${dev:-none}: $(grep -m1 'hca_id\|transport' <<<"$out" | xargs)"
result $rc "libibverbs loads the packaged provider for ${dev:-no device}"

# 6: the tools test on what the packages installed (its install_provider
# keeps the packaged ntrdma.driver; its modprobe finds the DKMS modules)
"$(dirname "$0")"/ntrdma_tools_test.sh 2>&1 | sed 's/^/    /'
rc=${PIPESTATUS[0]}
result "$rc" "ntrdma_tools_test.sh on the installed packages (exit $rc)"

# 7: removal takes the modules out of the kernel's tree again
modprobe -r ntrdma ntb_hw_ivshmem ntb 2>/dev/null
dpkg -r ntrdma-dkms libntrdma1 >/dev/null 2>&1
left=$(find "/lib/modules/$kver/updates/dkms" \( -name 'ntb.ko*' -o -name 'ntb_hw_ivshmem.ko*' \
	-o -name 'ntrdma.ko*' \) -printf '%f ' 2>/dev/null)
[ -z "$left" ] && [ ! -e "$LIBDIR/libntrdma-rdmav34.so" ] && ! dkms status -m ntrdma 2>/dev/null | grep -q .
result $? "dpkg -r removes the modules and the provider${left:+ (left: $left)}"
ktap_finish
