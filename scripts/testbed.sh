#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA test bed: boots QEMU (TCG) guests joined by the emulated ivshmem NTB
# (ntb_hw/HARDWARE.md), runs a command as root in guest a and exits with its
# status. Run with --help for the usage.

set -euo pipefail

# The whole launcher is one function, called on the last line, so that bash
# has parsed all of it before it starts: editing this file cannot disturb
# runs that are in progress. (Its body is not indented.)
main() {

usage() {
	cat <<'EOF'
Usage: scripts/testbed.sh [OPTIONS] -- COMMAND [ARGS...]

Boots the test bed and runs COMMAND as root in guest "a", cwd $NTRDMA_ROOT.
COMMAND and ARGS are exec'd as an argument vector (no shell): use
`-- sh -c '...'` for shell syntax. Its stdout/stderr are copied to ours
(and to OUT/stdout.log, OUT/stderr.log); its stdin is /dev/null.

Options:
  --topo loop|pair   loop: one guest, NTB port 0 at slot 0x10 and port 1 at
                     slot 0x11. pair: guest a (port 0) and guest b (port 1),
                     each at slot 0x10; guest b runs a remote agent.
                     Default: loop.
  --timeout SECS     kill the whole run after SECS (exit 124). Default 900.
  --out DIR          output directory (logs, /mnt/out of the guests).
                     Default: build/testbed/runs/<time>-<pid>, linked from
                     build/testbed/last.
  --mem SIZE         RAM per guest (QEMU size: 1G, 1536M...). Default 1G.
  --flat 0|1         fn3 flat window onto the peer's RAM. Default 1.
  --no-modules       do not insmod ntb.ko / ntb_hw_ivshmem.ko.
  --kver KVER        boot the installed kernel KVER (default: KVER from the
                     environment, else what scripts/kver.sh prints).
  --ko-root DIR      load the modules built in DIR (its build/kernel/*.ko,
                     ntb_hw/ntb_hw_ivshmem.ko and *.ko), e.g. the build for
                     another kernel (scripts/kernel-6.12.sh build). Default:
                     this tree.
  --hw-params "..."  module parameters for ntb_hw_ivshmem.ko.
  -v, --verbose      also copy guest a's console to stderr.
  -h, --help         this text.

Exit status: COMMAND's; 124 on timeout; 125 if the test bed failed (setup,
guest died without reporting a status); 120 if COMMAND ran but a console
log shows a kernel problem (Oops, BUG:, WARNING:, ... printed with file names).

In guest a: $NTRDMA_ROOT, $NTRDMA_TOPO, $NTRDMA_ROLE (a|b), $NTRDMA_OUT
(= /mnt/out, the 9p share of OUT; guest b's /mnt/out is OUT/b, seen by a as
/mnt/out/b), and on PATH (scripts/guest/bin):
  remote [-t SECS] CMD...  run CMD in guest b (args joined by spaces, run by
                     sh -c, like ssh); stdout and stderr kept apart; exits
                     with CMD's status, 124 on timeout (default 120 s), 255
                     if b is unreachable. In loop topology runs locally.
  ssh [OPTS] HOST CMD...   ssh shim forwarding to remote (bash -c).
  testbed-ctl kill-peer|start-peer|poweroff-peer|peer-status|wait-peer

Environment: KVER (scripts/kver.sh), NTRDMA_KERNEL (/boot/vmlinuz-$KVER),
NTRDMA_KBUILD (KO_ROOT/build/kernel), NTRDMA_HW_KO (KO_ROOT/ntb_hw/ntb_hw_ivshmem.ko),
NTRDMA_IVSHMEM_SERVER (build/user/ntb_hw/ivshmem_server/ntb-ivshmem-server),
QEMU (qemu-system-x86_64), NTRDMA_PEER_WAIT (180: seconds guest a waits for b),
Debug knobs: TESTBED_NO_SERVER=1 (fn0 becomes ivshmem-plain, no server, no
doorbells), TESTBED_BZIMAGE=1 (boot the compressed bzImage instead of the
cached extracted vmlinux, ~2.5 s slower), TESTBED_BIOS=FILE (e.g. qboot.rom),
TESTBED_TCG_THREAD=single|multi (QEMU's TCG threading; default: QEMU's, multi),
TESTBED_IO_FIFO=0 (QEMU's main threads stay SCHED_OTHER; see io_fifo_watch),
TESTBED_KERNEL_ARGS="..." (more guest kernel parameters, e.g. slub_debug=FZPU).

Files: OUT/console-a.log, console-b.log (console-b.N.log for the N-th guest b
of a run), dmesg-a.log, b/dmesg-b.N.log (at clean power-off), stdout.log,
stderr.log, server.log, relay.log, qemu-*.log. Console patterns that fail the
run (case-sensitive, in console-*, dmesg-* and server.log): see BAD_RE below.
EOF
}

die() {
	echo "testbed: error: $*" >&2
	exit 125
}
say() { echo "testbed: $*" >&2; }

# --- paths and defaults ---------------------------------------------------
NTRDMA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
KVER=${KVER:-}
KO_ROOT=$NTRDMA_ROOT
NTRDMA_IVSHMEM_SERVER=${NTRDMA_IVSHMEM_SERVER:-$NTRDMA_ROOT/build/user/ntb_hw/ivshmem_server/ntb-ivshmem-server}
NTRDMA_PEER_WAIT=${NTRDMA_PEER_WAIT:-180}
QEMU=${QEMU:-qemu-system-x86_64}
TB_DIR=$NTRDMA_ROOT/build/testbed
GUEST_DIR=$NTRDMA_ROOT/scripts/guest
CTL_DIR=$NTRDMA_ROOT/build/user/scripts/testbed_ctl

TOPO=loop
TIMEOUT=900
OUT=
MEM=1G
FLAT=1
MODULES=1
HW_PARAMS=
VERBOSE=0

while [ $# -gt 0 ]; do
	case $1 in
	--topo) TOPO=${2:?--topo needs a value}; shift 2 ;;
	--timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
	--out) OUT=${2:?--out needs a value}; shift 2 ;;
	--mem) MEM=${2:?--mem needs a value}; shift 2 ;;
	--flat) FLAT=${2:?--flat needs a value}; shift 2 ;;
	--no-modules) MODULES=0; shift ;;
	--kver) KVER=${2:?--kver needs a value}; shift 2 ;;
	--ko-root) KO_ROOT=$(cd "${2:?--ko-root needs a value}" && pwd -P) || die "--ko-root: no folder $2"; shift 2 ;;
	--hw-params) HW_PARAMS=${2?--hw-params needs a value}; shift 2 ;;
	-v | --verbose) VERBOSE=1; shift ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) echo "testbed: unknown option '$1' (COMMAND goes after --)" >&2; usage >&2; exit 125 ;;
	esac
done
[ $# -gt 0 ] || { usage >&2; exit 125; }
CMD=("$@")
KVER=${KVER:-$("$NTRDMA_ROOT/scripts/kver.sh")} || die "no kernel to boot (set KVER)"
NTRDMA_KERNEL=${NTRDMA_KERNEL:-/boot/vmlinuz-$KVER}
NTRDMA_KBUILD=${NTRDMA_KBUILD:-$KO_ROOT/build/kernel}
NTRDMA_HW_KO=${NTRDMA_HW_KO:-$KO_ROOT/ntb_hw/ntb_hw_ivshmem.ko}

case $TOPO in loop | pair) ;; *) die "--topo must be loop or pair" ;; esac
case $FLAT in 0 | 1) ;; *) die "--flat must be 0 or 1" ;; esac
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer"
[[ $NTRDMA_PEER_WAIT =~ ^[1-9][0-9]*$ ]] || die "NTRDMA_PEER_WAIT must be a positive integer"
MEM_BYTES=$(numfmt --from=iec "${MEM%B}" 2>/dev/null) || die "bad --mem '$MEM'"
((MEM_BYTES >= 256 << 20 && MEM_BYTES <= 3 << 30 && MEM_BYTES % (1 << 20) == 0)) ||
	die "--mem must be 256M..3G in whole MiB (guest RAM must stay below the 32-bit PCI hole for the flat window)"
[[ $HW_PARAMS != *$'\n'* ]] || die "--hw-params must be one line"

# --- checks -----------------------------------------------------------------
command -v "$QEMU" >/dev/null || die "QEMU '$QEMU' not found (apt-get install qemu-system-x86)"
[ -r "$NTRDMA_KERNEL" ] || die "kernel image $NTRDMA_KERNEL not readable (set KVER or NTRDMA_KERNEL)"
[ -d "/lib/modules/$KVER/kernel" ] || die "no /lib/modules/$KVER (set KVER)"
[ -x /usr/bin/busybox ] || die "/usr/bin/busybox missing (apt-get install busybox-static)"
[ -r /dev/kvm ] || true # not used: TCG only
if [ "$MODULES" = 1 ]; then
	[ -f "$NTRDMA_KBUILD/ntb.ko" ] ||
		die "$NTRDMA_KBUILD/ntb.ko missing (build the stock NTB modules, or use --no-modules)"
	[ -f "$NTRDMA_HW_KO" ] ||
		die "$NTRDMA_HW_KO missing (build ntb_hw, or use --no-modules)"
fi
NO_SERVER=${TESTBED_NO_SERVER:-0}
if [ "$NO_SERVER" != 1 ]; then
	[ -x "$NTRDMA_IVSHMEM_SERVER" ] ||
		die "ivshmem server $NTRDMA_IVSHMEM_SERVER missing (build it; or TESTBED_NO_SERVER=1 to debug without doorbells)"
fi
for f in init stage2 bin/remote bin/ssh bin/testbed-ctl; do
	[ -r "$GUEST_DIR/$f" ] || die "$GUEST_DIR/$f missing"
done
# The control channel (relay on the host, agent and remote in the guests, which
# see this tree at the same path): C++ programs of scripts/testbed_ctl.
for f in ntrdma-relay ntrdma-agent ntrdma-remote; do
	[ -x "$CTL_DIR/$f" ] || die "$CTL_DIR/$f missing (build it with make)"
done

# --- initramfs (cached) ---------------------------------------------------
# Packs busybox, scripts/guest/init and the modules that modprobe lists for
# virtio_pci, 9p, 9pnet_virtio, overlay and virtio_console.
build_initramfs() {
	local mods=() m p seen=" " key target tmp
	for m in virtio_pci 9p 9pnet_virtio overlay virtio_console; do
		while read -r p; do
			[[ $seen == *" $p "* ]] && continue
			seen+="$p "
			mods+=("$p")
		done < <(modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" { print $2 }')
	done
	[ ${#mods[@]} -ge 5 ] || die "modprobe -S $KVER --show-depends found too few modules"
	key=$({
		echo "$KVER"
		sha256sum "$GUEST_DIR/init" /usr/bin/busybox
		stat -c '%n %s %Y' "${mods[@]}"
	} | sha256sum | cut -c1-16)
	target=$TB_DIR/initramfs-$KVER-$key.cpio
	INITRAMFS=$target
	[ -s "$target" ] && return 0
	say "building the initramfs ($target)"
	mkdir -p "$TB_DIR"
	tmp=$(mktemp -d "$TB_DIR/.initramfs.XXXXXX")
	mkdir -p "$tmp/bin" "$tmp/lib/modules"
	cp /usr/bin/busybox "$tmp/bin/busybox"
	cp "$GUEST_DIR/init" "$tmp/init"
	chmod 755 "$tmp/init"
	for p in "${mods[@]}"; do
		m=${p#/lib/modules/}
		mkdir -p "$tmp/lib/modules/$(dirname "$m")"
		# busybox insmod takes plain .ko (Debian's 6.12 modules are .ko.xz)
		case $m in
		*.ko.xz) m=${m%.xz}; xz -dc "$p" >"$tmp/lib/modules/$m" ;;
		*) cp "$p" "$tmp/lib/modules/$m" ;;
		esac
		echo "$m"
	done >"$tmp/modules.list"
	(cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$tmp.cpio"
	mv -f "$tmp.cpio" "$target"
	rm -rf "$tmp"
	# drop stale images of this kernel version
	find "$TB_DIR" -maxdepth 1 -name "initramfs-$KVER-*.cpio" ! -name "${target##*/}" -mmin +60 -delete 2>/dev/null || true
}
build_initramfs

# --- kernel: boot the uncompressed vmlinux (PVH entry) when we can --------
# Decompressing the xz bzImage under TCG costs ~2.5 s per boot; the Debian
# kernel has CONFIG_PVH, so QEMU can load the ELF vmlinux directly. Cached.
extract_vmlinux() {
	local src=$1 key dst off tmp
	key=$(stat -L -c '%n %s %Y' "$src" | sha256sum | cut -c1-16)
	dst=$TB_DIR/vmlinux-$key
	if [ ! -s "$dst" ]; then
		mkdir -p "$TB_DIR"
		tmp=$(mktemp "$TB_DIR/.vmlinux.XXXXXX")
		off=$(grep -abo $'\xfd7zXZ\x00' "$src" | head -n 1 | cut -d: -f1) || off=
		if [ -n "$off" ]; then
			# xz complains about the bytes after the stream; the ELF check decides
			tail -c +$((off + 1)) "$src" | xz -dc >"$tmp" 2>/dev/null || true
		fi
		if [ "$(head -c 4 "$tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
			mv -f "$tmp" "$dst"
		else
			rm -f "$tmp"
			echo "$src"
			return
		fi
	fi
	echo "$dst"
}
BOOT_KERNEL=$NTRDMA_KERNEL
if [ "${TESTBED_BZIMAGE:-0}" != 1 ]; then
	BOOT_KERNEL=$(extract_vmlinux "$NTRDMA_KERNEL")
fi

# --- output directory -----------------------------------------------------
if [ -z "$OUT" ]; then
	mkdir -p "$TB_DIR/runs"
	OUT=$TB_DIR/runs/$(date +%Y%m%d-%H%M%S)-$$
	mkdir -p "$OUT"
	ln -sfn "runs/${OUT##*/}" "$TB_DIR/last"
else
	mkdir -p "$OUT"
fi
OUT=$(cd "$OUT" && pwd -P)
rm -f "$OUT"/console-*.log "$OUT"/dmesg-*.log "$OUT"/qemu-*.log "$OUT"/server.log \
	"$OUT"/relay.log "$OUT"/stdout.log "$OUT"/stderr.log "$OUT"/b/dmesg-b.*.log
mkdir -p "$OUT/b"

# --- per-run private directory and cleanup --------------------------------
# First reclaim the private dirs of launchers that were SIGKILLed (the RAM
# files in them hold real memory).
for d in /dev/shm/ntrdma-testbed.*; do
	[ -f "$d/launcher.pid" ] || continue
	kill -0 "$(cat "$d/launcher.pid" 2>/dev/null)" 2>/dev/null && continue
	rm -rf "$d"
done
RUN=$(mktemp -d /dev/shm/ntrdma-testbed.XXXXXX)
echo $$ >"$RUN/launcher.pid"
# The guests load modules from a snapshot taken now (under the shared tree,
# so they see it): a rebuild during the run cannot change what is tested.
KOSNAP=
if [ "$MODULES" = 1 ]; then
	# A verbs face the guest kernel supports is never left out silently.
	kconfig=/lib/modules/$KVER/build/.config
	[ -f "$kconfig" ] || kconfig=/boot/config-$KVER
	"$NTRDMA_ROOT/scripts/faces.sh" "$KO_ROOT/ntrdma.ko" "$kconfig" >&2 || die "ntrdma.ko lacks a face (see above)"
	for d in "$NTRDMA_ROOT"/build/.testbed-ko.*; do
		[ -f "$d/launcher.pid" ] || continue
		kill -0 "$(cat "$d/launcher.pid" 2>/dev/null)" 2>/dev/null && continue
		rm -rf "$d"
	done
	KOSNAP=$(mktemp -d "$NTRDMA_ROOT/build/.testbed-ko.XXXXXX")
	echo $$ >"$KOSNAP/launcher.pid"
	mkdir -p "$KOSNAP/kbuild" "$KOSNAP/top"
	cp "$NTRDMA_KBUILD"/*.ko "$KOSNAP/kbuild/"
	cp "$NTRDMA_HW_KO" "$KOSNAP/"
	for ko in "$KO_ROOT"/*.ko; do [ -f "$ko" ] && cp "$ko" "$KOSNAP/top/"; done
	NTRDMA_KBUILD=$KOSNAP/kbuild
	NTRDMA_HW_KO=$KOSNAP/$(basename "$NTRDMA_HW_KO")
fi
TOP_KO_DIR=${KOSNAP:+$KOSNAP/top}
TOP_KO_DIR=${TOP_KO_DIR:-$KO_ROOT}
PIDS=() # processes we started (besides the QEMUs, found by pidfile)
TIMED_OUT=0

kill_run() { # $1: signal for the QEMUs and helpers
	local sig=$1 f pid
	for f in "$RUN"/qemu-*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null) || continue
		# only our own QEMUs (pid files may be stale)
		grep -qF "$RUN" "/proc/$pid/cmdline" 2>/dev/null && kill "-$sig" "$pid" 2>/dev/null
	done
	for pid in "${PIDS[@]}"; do
		kill "-$sig" "$pid" 2>/dev/null || true
	done
	return 0
}

# The emulated devices' interrupts: a doorbell reaches the receiving
# guest through its QEMU's main thread (the eventfd handler raises the
# MSI). On this 2-core host, while the vCPU threads are busy (a guest task
# spinning on its CQ), the host scheduler let that thread wait for
# milliseconds, where an NTB delivers the interrupt at once. So each QEMU's
# main thread runs SCHED_FIFO (priority 1): it preempts the vCPU threads
# when an event comes, and goes back to sleep. Reset-on-fork keeps the
# threads it starts later ordinary. TESTBED_IO_FIFO=0 leaves them all alone.
io_fifo_watch() {
	local f pid done=" "
	while :; do
		for f in "$RUN"/qemu-*.pid; do
			[ -f "$f" ] || continue
			pid=$(cat "$f" 2>/dev/null) || continue
			[[ $done == *" $pid "* ]] && continue
			grep -qF "$RUN" "/proc/$pid/cmdline" 2>/dev/null || continue
			chrt -f -R -p 1 "$pid" >/dev/null 2>&1 ||
				echo "testbed: chrt -f -R -p 1 $pid failed: QEMU's interrupts may come late under load" >&2
			done+="$pid "
		done
		sleep 0.2
	done
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	set +e
	kill_run TERM
	sleep 0.2
	kill_run KILL
	wait 2>/dev/null
	rm -rf "$RUN"
	[ -n "$KOSNAP" ] && rm -rf "$KOSNAP"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

qesc() { printf '%s' "${1//,/,,}"; } # QEMU option-value escaping

# --- shared files -----------------------------------------------------------
APER=$((8 << 20))  # inbound aperture per port: two 4 MiB MW slots (HARDWARE.md)
truncate -s "$APER" "$RUN/ap0.mem" "$RUN/ap1.mem"
truncate -s "$MEM_BYTES" "$RUN/ram-a.mem"
if [ "$TOPO" = pair ]; then truncate -s "$MEM_BYTES" "$RUN/ram-b.mem"; fi

if [ "$NO_SERVER" = 1 ]; then
	say "TESTBED_NO_SERVER=1: fn0 is ivshmem-plain, no doorbells"
	truncate -s 65536 "$RUN/regs.mem"
else
	# --persistent-eventfds: QEMU (7.2) ivshmem frees a peer's eventfd array
	# on "peer gone" and then writes/double-frees it when that peer id comes
	# back, corrupting the surviving QEMU's heap; testbed-ctl start-peer needs it.
	SERVER_OPTS=()
	if "$NTRDMA_IVSHMEM_SERVER" --help 2>&1 | grep -q -- --persistent-eventfds; then
		SERVER_OPTS+=(--persistent-eventfds)
	elif [ "$TOPO" = pair ]; then
		say "warning: the ivshmem server lacks --persistent-eventfds: restarting guest b corrupts guest a's QEMU"
	fi
	setpriv --pdeathsig KILL -- "$NTRDMA_IVSHMEM_SERVER" --shm "$RUN/regs.mem" --shm-size 65536 \
		--vectors 5 --socket "$RUN/port0.sock" --socket "$RUN/port1.sock" \
		--pidfile "$RUN/server.pid" "${SERVER_OPTS[@]}" </dev/null >"$OUT/server.log" 2>&1 &
	SERVER_PID=$!
	PIDS+=("$SERVER_PID")
	for _ in $(seq 100); do
		[ -S "$RUN/port0.sock" ] && [ -S "$RUN/port1.sock" ] && break
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -S "$RUN/port0.sock" ] && [ -S "$RUN/port1.sock" ] || {
		sed 's/^/  server.log: /' "$OUT/server.log" >&2
		die "the ivshmem server did not create its sockets"
	}
fi

# --- guest configuration (appended to the initramfs) ----------------------
# modprobe.d rules so that "modprobe NAME" in a guest loads our out-of-tree
# modules (ntb_test.sh modprobes ntb_tool, ntb_perf...): one install rule per
# module, loading its dependencies first.
modprobe_conf() {
	local ko name deps d line
	for ko in "$NTRDMA_KBUILD"/*.ko "$NTRDMA_HW_KO" "$TOP_KO_DIR"/*.ko; do
		[ -f "$ko" ] || continue
		name=$(basename "$ko" .ko)
		name=${name//-/_}
		deps=$(modinfo -F depends "$ko" 2>/dev/null | tr ',' ' ') || deps=
		line="install $name"
		for d in $deps; do line+=" /sbin/modprobe $d &&"; done
		echo "$line /sbin/insmod $ko \$CMDLINE_OPTS"
	done
}

make_initrd() { # $1 role: writes $RUN/initrd-$1.cpio
	local role=$1 d=$RUN/cfg-$1
	mkdir -p "$d/cfg"
	printf '%s\n' "$NTRDMA_ROOT" >"$d/cfg/root"
	{
		printf 'NTRDMA_ROOT=%q\n' "$NTRDMA_ROOT"
		printf 'NTRDMA_TOPO=%q\n' "$TOPO"
		printf 'NTRDMA_ROLE=%q\n' "$role"
		printf 'NTRDMA_FLAT=%q\n' "$FLAT"
		printf 'NTRDMA_MODULES=%q\n' "$MODULES"
		printf 'NTRDMA_HW_PARAMS=%q\n' "$HW_PARAMS"
		printf 'NTRDMA_KBUILD=%q\n' "$NTRDMA_KBUILD"
		printf 'NTRDMA_HW_KO=%q\n' "$NTRDMA_HW_KO"
		printf 'NTRDMA_PEER_WAIT=%q\n' "$NTRDMA_PEER_WAIT"
		printf 'NTRDMA_CMD=('
		printf '%q ' "${CMD[@]}"
		printf ')\n'
	} >"$d/cfg/env"
	modprobe_conf >"$d/cfg/modprobe.conf"
	(cd "$d" && printf '%s\n' cfg cfg/root cfg/env cfg/modprobe.conf | cpio -o -H newc --quiet -R 0:0) >"$d.cpio"
	cat "$INITRAMFS" "$d.cpio" >"$RUN/initrd-$role.cpio"
}

# --- QEMU command lines -------------------------------------------------------
# port_args PORT SLOT PEER_RAM_FILE: the four functions of one NTB port.
port_args() {
	local k=$1 slot=$2 peer_ram=$3 peer=$(($1 ^ 1))
	if [ "$NO_SERVER" = 1 ]; then
		QA+=(-object "memory-backend-file,id=regs$k,size=65536,mem-path=$(qesc "$RUN/regs.mem"),share=on"
			-device "ivshmem-plain,memdev=regs$k,bus=pci.0,addr=$slot.0,multifunction=on")
	else
		QA+=(-chardev "socket,id=db$k,path=$(qesc "$RUN/port$k.sock")"
			-device "ivshmem-doorbell,chardev=db$k,vectors=5,bus=pci.0,addr=$slot.0,multifunction=on")
	fi
	QA+=(-object "memory-backend-file,id=ap$k,size=$APER,mem-path=$(qesc "$RUN/ap$k.mem"),share=on"
		-device "ivshmem-plain,memdev=ap$k,bus=pci.0,addr=$slot.1"
		-object "memory-backend-file,id=pap$k,size=$APER,mem-path=$(qesc "$RUN/ap$peer.mem"),share=on"
		-device "ivshmem-plain,memdev=pap$k,bus=pci.0,addr=$slot.2")
	if [ "$FLAT" = 1 ]; then
		QA+=(-object "memory-backend-file,id=flat$k,size=$MEM_BYTES,mem-path=$(qesc "$peer_ram"),share=on"
			-device "ivshmem-plain,memdev=flat$k,bus=pci.0,addr=$slot.3")
	fi
}

# qemu_args ROLE: fills QA with everything but the console, pid file and -append.
# shellcheck disable=SC2054 # commas are QEMU's option syntax
qemu_args() {
	local role=$1 outdir=$OUT
	[ "$role" = b ] && outdir=$OUT/b
	QA=("$QEMU" -name "ntrdma-$role" -accel "tcg${TESTBED_TCG_THREAD:+,thread=$TESTBED_TCG_THREAD}" -smp 2 -m "$((MEM_BYTES >> 20))M"
		-nodefaults -no-user-config -no-reboot -display none -nic none ${TESTBED_BIOS:+-bios "$TESTBED_BIOS"}
		-object "memory-backend-file,id=ram,size=$MEM_BYTES,mem-path=$(qesc "$RUN/ram-$role.mem"),share=on"
		-machine pc,memory-backend=ram
		-kernel "$BOOT_KERNEL" -initrd "$RUN/initrd-$role.cpio"
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot,bus=pci.0,addr=0x4
		-fsdev "local,id=out,path=$(qesc "$outdir"),security_model=none"
		-device virtio-9p-pci,fsdev=out,mount_tag=out,bus=pci.0,addr=0x5
		-device virtio-serial-pci,id=vser,bus=pci.0,addr=0x6)
	if [ "$role" = a ]; then
		QA+=(-chardev "file,id=cout,path=$(qesc "$OUT/stdout.log")"
			-device virtserialport,bus=vser.0,chardev=cout,name=ntrdma.out
			-chardev "file,id=cerr,path=$(qesc "$OUT/stderr.log")"
			-device virtserialport,bus=vser.0,chardev=cerr,name=ntrdma.err)
	fi
	if [ "$TOPO" = pair ]; then
		QA+=(-chardev "socket,id=ctl,path=$(qesc "$RUN/ctl-$role.sock")"
			-device virtserialport,bus=vser.0,chardev=ctl,name=ntrdma.ctl)
	fi
	if [ "$TOPO" = loop ]; then
		port_args 0 0x10 "$RUN/ram-a.mem"
		port_args 1 0x11 "$RUN/ram-a.mem"
	elif [ "$role" = a ]; then
		port_args 0 0x10 "$RUN/ram-b.mem"
	else
		port_args 1 0x10 "$RUN/ram-a.mem"
	fi
}

CMDLINE="console=ttyS0 panic=-1 loglevel=5 ${TESTBED_KERNEL_ARGS:+$TESTBED_KERNEL_ARGS }testbed.role="

make_initrd a
if [ "$TOPO" = pair ]; then
	make_initrd b
	qemu_args b
	{
		echo '#!/bin/bash'
		echo '# generated by scripts/testbed.sh: start instance $1 of guest b'
		echo 'set -eu'
		echo 'inst=$1'
		echo 'if [ "$inst" = 1 ]; then con=console-b.log; else con=console-b.$inst.log; fi'
		printf 'exec'
		printf ' %q' "${QA[@]}"
		printf ' -chardev file,id=con,path=%q/$con' "$(qesc "$OUT")"
		printf ' -serial chardev:con -pidfile %q/qemu-b.$inst.pid' "$RUN"
		printf ' -append %q"$inst"\n' "${CMDLINE}b testbed.inst="
	} >"$RUN/start-b.sh"
	chmod +x "$RUN/start-b.sh"
	setpriv --pdeathsig TERM -- "$CTL_DIR/ntrdma-relay" --run "$RUN" \
		--start-b "$RUN/start-b.sh" --qemu-log "$OUT/qemu-b.log" \
		</dev/null >"$OUT/relay.log" 2>&1 &
	RELAY_PID=$!
	PIDS+=("$RELAY_PID")
	for _ in $(seq 100); do
		[ -S "$RUN/ctl-a.sock" ] && break
		kill -0 "$RELAY_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ -S "$RUN/ctl-a.sock" ] || {
		sed 's/^/  relay.log: /' "$OUT/relay.log" >&2
		die "the control relay did not start"
	}
fi

qemu_args a
: >"$OUT/stdout.log"
: >"$OUT/stderr.log"
: >"$OUT/console-a.log"
START=$SECONDS
setpriv --pdeathsig KILL -- "${QA[@]}" -chardev "file,id=con,path=$(qesc "$OUT/console-a.log")" -serial chardev:con \
	-pidfile "$RUN/qemu-a.pid" -append "${CMDLINE}a testbed.inst=1" \
	</dev/null >"$OUT/qemu-a.log" 2>&1 &
QEMU_A=$!
PIDS+=("$QEMU_A")
if [ "${TESTBED_IO_FIFO:-1}" = 1 ]; then
	io_fifo_watch &
	PIDS+=($!)
fi

# Copy the command's output (and with -v the console) while guest a runs.
tail -n +1 -s 0.1 -f --pid="$QEMU_A" "$OUT/stdout.log" 2>/dev/null &
PIDS+=($!)
TAILS=($!)
tail -n +1 -s 0.1 -f --pid="$QEMU_A" "$OUT/stderr.log" >&2 2>/dev/null &
PIDS+=($!)
TAILS+=($!)
if [ "$VERBOSE" = 1 ]; then
	tail -n +1 -s 0.1 -f --pid="$QEMU_A" "$OUT/console-a.log" 2>/dev/null | sed -u 's/^/[a] /' >&2 &
	PIDS+=($!)
fi

DEADLINE=$((START + TIMEOUT))
while kill -0 "$QEMU_A" 2>/dev/null; do
	if ((SECONDS >= DEADLINE)); then
		TIMED_OUT=1
		break
	fi
	sleep 0.1
done

if [ "$TIMED_OUT" = 1 ]; then
	kill_run KILL
	wait 2>/dev/null || true
else
	QEMU_RC=0
	wait "$QEMU_A" || QEMU_RC=$?
	wait "${TAILS[@]}" 2>/dev/null || true
	# Guest b: clean power-off through the relay (it kills b if that fails).
	if [ "$TOPO" = pair ]; then
		kill -TERM "$RELAY_PID" 2>/dev/null || true
		while kill -0 "$RELAY_PID" 2>/dev/null && ((SECONDS < DEADLINE)); do sleep 0.1; done
		kill -0 "$RELAY_PID" 2>/dev/null && TIMED_OUT=1
	fi
	if [ "$NO_SERVER" != 1 ]; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		for _ in $(seq 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
	fi
	if [ "$TIMED_OUT" = 1 ]; then kill_run KILL; wait 2>/dev/null || true; fi
fi
ELAPSED=$((SECONDS - START))

# --- console check --------------------------------------------------------------
# A kernel general protection fault reads "general protection fault, ..." or
# "general protection fault: 0000 [#1]"; "traps: PROG[PID] general protection
# fault ip:..." and "PROG[PID]: segfault at" are a user program's crash (the
# kernel logs every one): said (USER_RE), not a kernel problem.
BAD_RE='Oops|BUG:|kernel BUG at|WARNING:|Kernel panic|soft lockup|hard LOCKUP|hung_task|blocked for more than|refcount_t:|list_add corruption|list_del corruption|general protection fault[,:]|Call Trace:|UBSAN:|detected stall|double fault'
USER_RE='traps: .*general protection fault ip:|segfault at '
BAD=0
for f in "$OUT"/console-*.log "$OUT"/dmesg-*.log "$OUT"/b/dmesg-*.log "$OUT"/server.log; do
	[ -f "$f" ] || continue
	if grep -aEn "$BAD_RE" "$f" >/dev/null; then
		BAD=1
		grep -aEn "$BAD_RE" "$f" | head -n 40 | tr -d '\r' | sed "s|^|testbed: ${f#"$OUT"/}:|" >&2
	fi
	grep -aEn "$USER_RE" "$f" | head -n 10 | tr -d '\r' |
		sed "s|^|testbed: a user program crashed (not a kernel problem): ${f#"$OUT"/}:|" >&2 ||
		true
done

if [ "$TIMED_OUT" = 1 ]; then
	echo "TIMEOUT" >&2
	say "the run was killed after ${TIMEOUT} s; logs in $OUT"
	exit 124
fi

MARK=$(tr -d '\r' <"$OUT/console-a.log" | grep -aoE 'NTRDMA_EXIT=[0-9]+' | tail -n 1 || true)
if [ -z "$MARK" ]; then
	if grep -aq 'NTRDMA_SETUP_FAILED' "$OUT/console-a.log"; then
		grep -a 'NTRDMA_SETUP_FAILED' "$OUT/console-a.log" | tr -d '\r' | sed 's/^/testbed: /' >&2
	else
		say "guest a ended without reporting an exit status (QEMU status $QEMU_RC)"
		tail -n 20 "$OUT/qemu-a.log" "$OUT/console-a.log" 2>/dev/null | tr -d '\r' | sed 's/^/  /' >&2
	fi
	say "FAILED; logs in $OUT"
	exit 125
fi
RC=${MARK#NTRDMA_EXIT=}
if [ "$BAD" = 1 ]; then
	say "FAILED: kernel problem in the console logs (COMMAND exit status $RC, ${ELAPSED} s); logs in $OUT"
	exit 120
fi
[ "$RC" = 0 ] || say "COMMAND exit status $RC (${ELAPSED} s); logs in $OUT"
exit "$RC"
}

main "$@"
