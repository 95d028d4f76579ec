#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The Debian packages (make deb) installed into this host: ntrdma-dkms builds
# ntb_hw_ivshmem.ko, ntrdma.ko and the kernel's NTB modules (the core, the
# hardware drivers) for the running kernel through DKMS on
# dpkg -i, libntrdma1 puts the provider where libibverbs looks. Each NTB
# hardware driver is then checked: installed, the PCI ids it is loaded for
# (modinfo), loads and unloads with no device present. Then the modules are
# loaded from where the package put them, ntrdma_tools_test.sh runs on them
# and the installed provider (one subtest: its own KTAP is shown indented),
# and dpkg -r takes the modules away again.
# In the test bed: boot with --no-modules (nothing of the build tree loaded);
# the packages go into the guest's writable layer. Loop topology (one host).
# Not in run.sh's default list; scripts/check.sh runs it. Environment:
# DEB_DIR (build/deb), DEB_TEST_HOST=1 (run outside the test bed).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

DEB_DIR=${DEB_DIR:-$NTRDMA_ROOT/build/deb}
LIBDIR=/usr/lib/$(gcc -print-multiarch)/libibverbs
# The NTB hardware drivers, each with the module that carries the PCI ids
# it is loaded for: ntb_hw_switchtec binds to the devices of the switchtec
# management driver; the kernel's ntb_hw_epf declares no PCI device table
# (loaded by name).
HW_DRIVERS="ntb_hw_intel:ntb_hw_intel ntb_hw_amd:ntb_hw_amd ntb_hw_idt:ntb_hw_idt
	    ntb_hw_switchtec:switchtec ntb_hw_epf:"
NTESTS=$((7 + $(wc -w <<<"$HW_DRIVERS")))

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
pre=$(lsmod | awk '$1 ~ /^(ntb|ntb_.*|switchtec|ntrdma)$/ { print $1 }' | xargs)
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

# 3: DKMS built and installed ours, the NTB core and the NTB hardware
# drivers for the running kernel (Debian's kernels have no CONFIG_NTB), with
# the switchtec management driver where the kernel has none (ntb_transport,
# ntb_netdev and the test clients only when asked: not here)
kver=$(uname -r)
kcfg=/lib/modules/$kver/build/.config
st=$(dkms status -m ntrdma -k "$kver" 2>&1)
ktap_diag "dkms status: $st"
ok=0
mods="ntrdma ntb_hw_ivshmem ntb"
for d in $HW_DRIVERS; do mods="$mods ${d%%:*}"; done
grep -qs '^CONFIG_PCI_SW_SWITCHTEC=' "$kcfg" || mods="$mods switchtec"
grep -qs '^CONFIG_NTB=' "$kcfg" && { ok=1; ktap_diag "$kcfg has CONFIG_NTB: not the kernel this test is for"; }
for m in $mods; do
	p=$(modinfo -n "$m" 2>/dev/null)
	ktap_diag "$m: ${p:-not found}"
	[[ $p == /lib/modules/$kver/updates/dkms/$m.ko* ]] || ok=1
done
[[ $st == *installed* ]] || ok=1
result $ok "DKMS installed $(wc -w <<<"$mods") modules for $kver"

# 4-8: each NTB hardware driver: installed by DKMS, the PCI ids it is loaded
# for, loads (with its dependencies) and unloads with no NTB present, and
# the kernel logs no warning meanwhile
kernel_warnings() { dmesg | grep -cE 'WARNING:|BUG:|Oops|Call Trace:'; }
hw_driver() { # DRIVER IDS_MODULE
	local m=$1 ids=$2 p n w0 why=
	p=$(modinfo -n "$m" 2>/dev/null)
	[[ $p == /lib/modules/$kver/updates/dkms/$m.ko* ]] || why="$why; not installed (${p:-not found})"
	if [ -n "$ids" ]; then
		n=$(modinfo -F alias "$ids" 2>/dev/null | grep -c '^pci:v')
		ktap_diag "$m: $n PCI ids in $ids, e.g. $(modinfo -F alias "$ids" 2>/dev/null | grep -m1 '^pci:v')"
		[ "$n" -gt 0 ] || why="$why; no PCI ids (alias: pci:v...) in $ids"
	else
		ktap_diag "$m: no PCI device table in the kernel's driver (modprobe $m)"
	fi
	ktap_diag "$m: depends: $(modinfo -F depends "$m" 2>/dev/null)"
	w0=$(kernel_warnings)
	if ! modprobe "$m" 2>/dev/null; then
		why="$why; modprobe failed"
	elif ! lsmod | grep -q "^$m "; then
		why="$why; not loaded after modprobe"
	elif ! rmmod "$m"; then
		why="$why; rmmod failed"
	elif lsmod | grep -q "^$m "; then
		why="$why; still loaded after rmmod"
	fi
	modprobe -r -q switchtec ntb 2>/dev/null
	[ "$(kernel_warnings)" = "$w0" ] || {
		why="$why; kernel warning"
		dmesg | tail -30 | sed 's/^/# /'
	}
	result "$([ -z "$why" ] && echo 0 || echo 1)" \
		"$m: installed, PCI ids, loads and unloads without a device${why:+ (${why#; })}"
}
for d in $HW_DRIVERS; do
	hw_driver "${d%%:*}" "${d#*:}"
done

# 9: they load from there (the build tree's ntrdma has the fault injection
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

# 10: the provider from the package: the .driver file names it, libibverbs finds it
wait_for 20 ibdev_of "$LOCAL_DEV" >/dev/null
drv=$(cat /etc/libibverbs.d/ntrdma.driver 2>/dev/null)
dev=$(ibdev_of "$LOCAL_DEV")
out=$(LD_DEBUG=libs ibv_devinfo -d "${dev:-none}" 2>&1)
grep -q "$LIBDIR/libntrdma-rdmav34.so" <<<"$out" && grep -q 'transport:.*InfiniBand' <<<"$out" &&
	[ "$drv" = "driver ntrdma" ]
rc=$?
ktap_diag "ntrdma.driver: '$drv'; ibv_devinfo -d ${dev:-none}: $(grep -m1 'hca_id\|transport' <<<"$out" | xargs)"
result $rc "libibverbs loads the packaged provider for ${dev:-no device}"

# 11: the tools test on what the packages installed (its install_provider
# keeps the packaged ntrdma.driver; its modprobe finds the DKMS modules)
"$(dirname "$0")"/ntrdma_tools_test.sh 2>&1 | sed 's/^/    /'
rc=${PIPESTATUS[0]}
result "$rc" "ntrdma_tools_test.sh on the installed packages (exit $rc)"

# 12: removal takes the modules out of the kernel's tree again
modprobe -r ntrdma ntb_hw_ivshmem ntb 2>/dev/null
dpkg -r ntrdma-dkms libntrdma1 >/dev/null 2>&1
left=$(find "/lib/modules/$kver/updates/dkms" \( -name 'ntb*.ko*' -o -name 'switchtec.ko*' \
	-o -name 'ntrdma.ko*' \) -printf '%f ' 2>/dev/null)
[ -z "$left" ] && [ ! -e "$LIBDIR/libntrdma-rdmav34.so" ] && ! dkms status -m ntrdma 2>/dev/null | grep -q .
result $? "dpkg -r removes the modules and the provider${left:+ (left: $left)}"
ktap_finish
