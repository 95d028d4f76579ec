#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make check` and `make check-full`: lint, unit tests (CTest), the packages'
# build, then selftests in test-bed runs, then the bench harness's smoke run.
# CHECK_TIER=check (make check, what CI runs): one test-bed run of each
# behaviour that must never regress. CHECK_TIER=full (make check-full): every
# run, in both topologies, windowed mode, the Debian packages, Debian 13's
# kernel and the soak. doc/testbed.md lists what each tier runs.
# Prints KTAP and ends with "N passed, N failed"; exits non-zero on any
# failure. Expects `make all` to have run (the Makefile does that).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${CHECK_OUT:-$ROOT/build/check}
TOPOS=${CHECK_TOPOS:-loop pair}
TIER=${CHECK_TIER:-check}
case $TIER in check | full) ;; *) echo "check: CHECK_TIER must be check or full" >&2; exit 2 ;; esac
rm -rf "$OUT"
mkdir -p "$OUT"
pass=0
fail=0
skip=0
T_START=$SECONDS
# What the end of the output repeats (CI may show only the tail): every
# failure with the lines that led to it, and each test-bed run's time.
FAILURES=$OUT/failures.txt
TIMES=$OUT/times.txt
: >"$FAILURES"
: >"$TIMES"

result() { # ok|fail NAME
	if [ "$1" = ok ]; then
		pass=$((pass + 1))
		echo "ok - $2"
	else
		fail=$((fail + 1))
		echo "not ok - $2"
		echo "not ok - $2" >>"$FAILURES"
	fi
}

# The diagnostics before KTAP line @2 (a "not ok") in @1, for the summary:
# the test's own lines first, then the end of the kernel logs it quoted.
failure_context() { # KTAP LINE
	local d
	d=$(grep -F -x -B60 -- "$2" "$1" | grep -E '^ *#' | grep -vE '^ *# (ok|time:)')
	{
		grep -v '# dmesg' <<<"$d" | tail -16
		grep '# dmesg' <<<"$d" | tail -8
	} | cut -c1-300 | sed 's/^ */#   /' >>"$FAILURES"
}

echo "TAP version 13"
echo "# lint: checkpatch --strict"
if "$ROOT/scripts/checkpatch.sh" > "$OUT/checkpatch.log" 2>&1; then
	result ok "checkpatch --strict clean"
else
	sed 's/^/# /' "$OUT/checkpatch.log" | tail -40
	result fail "checkpatch --strict clean"
fi
echo "# lint: sparse"
make -s -C "$ROOT" sparse > "$OUT/sparse.log" 2>&1
if grep -qE 'warning:|error:' "$OUT/sparse.log"; then
	grep -E 'warning:|error:' "$OUT/sparse.log" | sed 's/^/# /' | head -40
	result fail "sparse clean"
else
	result ok "sparse clean"
fi

echo "# lint: clang-format (C++ programs and tests)"
unformatted=$(cd "$ROOT" && git ls-files -co --exclude-standard '*.cpp' '*.hpp' |
	while read -r f; do clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
if [ -z "$unformatted" ]; then
	result ok "clang-format clean"
else
	echo "$unformatted" | sed 's/^/# unformatted: /'
	result fail "clang-format clean"
fi

echo "# unit tests (ctest)"
(cd "$ROOT/build/user" && ctest --output-on-failure) > "$OUT/ctest.log" 2>&1
sed 's/^/# /' "$OUT/ctest.log" | grep -E 'Test +#|tests passed|Failed' | head -200
while read -r status name; do
	if [ "$status" = Passed ]; then result ok "unit: $name"; else result fail "unit: $name"; fi
done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+ *(\*\*\*)?([A-Za-z]+).*/\3 \1/p' "$OUT/ctest.log")
if ! grep -q 'tests passed' "$OUT/ctest.log"; then
	result fail "unit: ctest did not run"
fi

echo "# packages: make deb"
if make -s -C "$ROOT" deb > "$OUT/deb.log" 2>&1; then
	result ok "make deb: $(find "$ROOT/build/deb" -name "*.deb" -printf "%f ")"
else
	sed 's/^/# /' "$OUT/deb.log" | tail -20
	result fail "make deb"
fi

echo "# provider: built for Debian 13's rdma-core 56 (scripts/provider-abi-check.sh)"
"$ROOT/scripts/provider-abi-check.sh" > "$OUT/provider-56.log" 2>&1
case $? in
0) result ok "provider builds for rdma-core 56: $(tail -1 "$OUT/provider-56.log")" ;;
3) skip=$((skip + 1))
   echo "ok - provider builds for rdma-core 56 # SKIP $(tail -1 "$OUT/provider-56.log")" ;;
*) sed 's/^/# /' "$OUT/provider-56.log" | tail -20
   result fail "provider builds for rdma-core 56" ;;
esac

# Test-bed runs, NAME:FLAT:TESTS[:TCG[:TESTBED OPTIONS[:ENV]]], ENV a
# comma-separated list of VAR=VALUE for the tests.
# Stock NTB clients expect two small windows (no flat window); NTRDMA runs
# in windowed mode there and in flat mode on the flat window: one test-bed
# run each, in both topologies.
STOCK="stock:0:ntb_hw_link_test.sh,ntb_hw_test.sh,ntb_netdev_test.sh,ntrdma_windowed_test.sh"
NTR="ntrdma:1:ntb_hw_probe_test.sh,ntrdma_net_test.sh,ntrdma_engine_test.sh,ntrdma_ib_test.sh,ntrdma_tools_test.sh,ntrdma_cm_test.sh,ntrdma_verbs_loss_test.sh,ntrdma_kverbs_test.sh,ntrdma_nvmeof_test.sh,ntrdma_nfs_test.sh,ntrdma_iser_test.sh,ntrdma_pyverbs_test.sh,ntrdma_fault_test.sh,ntrdma_xdp_test.sh"
# The soak's short form (8 cycles) in guests whose vCPUs share one TCG
# thread: with one thread per vCPU, QEMU 7.2 can leave a vCPU in a stale
# translation of kernel text the other one re-patched (doc/testbed.md, one TCG thread).
SOAK="soak:1:ntrdma_soak_test.sh:single"
# The net test's iperf3 runs last 2 s, not 4, where the pair flat run has
# the long ones (make check's time). Its load/unload cycles stay 6: with 2,
# one cycle's MemAvailable noise (15 MiB seen) failed its 8 MiB per cycle.
QUICK_NET="IPERF_SECS=2"
# The Debian packages, installed into a guest booted without the build
# tree's modules; the tools test then runs on what they installed. DKMS
# builds ntrdma, the NTB core and the NTB hardware drivers under TCG: on a
# loaded host dpkg -i took 28 minutes, past the default timeouts.
# The run's own timeout is an hour (below).
DEB="deb:1:ntrdma_deb_test.sh::--no-modules:NTRDMA_TEST_TIMEOUT=3400"
# In the loop topology the tools test runs in the deb run (on the packages);
# the rdma_cm and pyverbs tests run in pair (two kernels; the cm test in its
# stock run too) and the NFS and iSER tests only there, so the loop flat run leaves
# them out (make check's time). The peer limits test runs in the loop flat
# run only.
NTR_LOOP=${NTR/ntrdma_tools_test.sh,/}
NTR_LOOP=${NTR_LOOP/ntrdma_cm_test.sh,/}
NTR_LOOP=${NTR_LOOP/ntrdma_nfs_test.sh,/}
NTR_LOOP=${NTR_LOOP/ntrdma_iser_test.sh,/}
NTR_LOOP=${NTR_LOOP/ntrdma_pyverbs_test.sh,/},ntrdma_peer_limits_test.sh:::$QUICK_NET
# The stock run (no flat window) also runs ntrdma's net, engine and verbs
# tests in windowed mode in both topologies, the tools test in loop and the
# rdma_cm test in pair (make check's time: both run in flat mode in pair).
WIN=$STOCK,ntrdma_net_test.sh,ntrdma_engine_test.sh,ntrdma_ib_test.sh,ntrdma_xdp_test.sh
# The soak's short form runs in pair (two kernels, peer-guest kills);
# make soak runs the long form in both topologies.
# check-full also runs the tools test over TCP.
TCP_RUN="tcp:1:ntrdma_tcp_test.sh,ntrdma_tools_test.sh:::NTRDMA_LINK=tcp"
FULL_loop="$WIN,ntrdma_tools_test.sh:::$QUICK_NET $NTR_LOOP $DEB $TCP_RUN"
FULL_pair="$WIN,ntrdma_cm_test.sh:::$QUICK_NET $NTR $SOAK"
# make check: the pair runs carry every behaviour (two kernels, peer-guest
# kills, rdma_cm, NVMe-oF); the stock run keeps the stock clients and
# ntrdma's windowed test; one loop run keeps what needs both ends in one
# kernel: the verbs suite's in-process data path tests (in pair they skip,
# NTRDMA_PEER_IBDEV unset) with their checked-mode rerun, the kernel
# verbs test, and NTRDMA over TCP (two devices on 127.0.0.1). The XDP test
# runs in pair here, in loop and windowed in check-full (make check's
# time).
QUICK_loop="ntrdma:1:ntrdma_ib_test.sh,ntrdma_kverbs_test.sh,ntrdma_tcp_test.sh"
# The link-loss test (3.5 minutes) runs in check-full only; make check
# keeps link loss in the verbs suite's unload test, the fault test and the
# placement tests that end sessions. The fault test's fuzzer runs 30 s
# there, not 60 (make check's time; make fuzz runs the long form). The
# kernel's own NTB test (ntb_test.sh through ntb_tool, ntb_pingpong and
# ntb_perf on the emulated NTB: 2.5 minutes) runs in check-full only; make
# check keeps the emulated NTB's link test and the stock ntb_netdev test.
# The net test's load/unload cycles under traffic are 3, not 6 (each takes
# about 17 s; 3 still show a leaked session against the 8 MiB per cycle
# allowed).
QUICK_pair="${STOCK/ntb_hw_test.sh,/} ${NTR/ntrdma_verbs_loss_test.sh,/}:::$QUICK_NET,FUZZ_SECS=30,NTRDMA_CYCLES=3"
if [ "$TIER" = full ]; then
	def_loop=$FULL_loop def_pair=$FULL_pair
else
	def_loop=$QUICK_loop def_pair=$QUICK_pair
fi
RUNS_loop=${CHECK_RUNS_loop:-${CHECK_RUNS:-$def_loop}}
RUNS_pair=${CHECK_RUNS_pair:-${CHECK_RUNS:-$def_pair}}

# Debian 13's kernel (6.12, from bookworm-backports: scripts/kernel-6.12.sh).
# CHECK_K612=subset (default): one more loop run on it, the engine, net
# and verbs tests (the verbs suite runs through the provider, as the
# tools do); skipped, with the reason, when its packages cannot be
# installed. CHECK_K612=all (make check-6.12): every run on it instead
# of the default kernel (a failure when it cannot be installed).
# CHECK_K612=0: none.
K612=${CHECK_K612:-$([ "$TIER" = full ] && echo subset || echo 0)}
K612_RUN="k612:1:ntrdma_engine_test.sh,ntrdma_net_test.sh,ntrdma_ib_test.sh:::$QUICK_NET"
K612_OPTS=
if [ "$K612" != 0 ]; then
	echo "# Debian 13 kernel (6.12): scripts/kernel-6.12.sh"
	if ! kver612=$("$ROOT/scripts/kernel-6.12.sh" install 2> "$OUT/k612-install.log"); then
		why=$(grep -m1 'cannot' "$OUT/k612-install.log" || tail -1 "$OUT/k612-install.log")
		skip=$((skip + 1))
		echo "ok - 6.12 kernel runs # SKIP ${why#kernel-6.12: }"
		[ "$K612" = all ] && result fail "6.12 kernel: make check-6.12 needs it"
	elif ! kodir=$("$ROOT/scripts/kernel-6.12.sh" build "$kver612" 2> "$OUT/k612-build.log"); then
		sed 's/^/# /' "$OUT/k612-build.log" | tail -20
		result fail "6.12 kernel $kver612: modules built"
	else
		result ok "6.12 kernel $kver612: installed, modules built"
		grep -E 'warning:' "$OUT/k612-build.log" | sed 's/^/# /' | head -20
		grep -qE 'warning:' "$OUT/k612-build.log" &&
			result fail "6.12 kernel $kver612: modules build without warnings"
		K612_OPTS="--kver $kver612 --ko-root $kodir"
		[ "$K612" = all ] || RUNS_loop="$RUNS_loop $K612_RUN"
	fi
fi
for topo in $TOPOS; do
runs_var=RUNS_$topo
for run in ${!runs_var}; do
	# NAME:FLAT:TESTS[:TCG] (TCG: QEMU's TCG threading, single or multi)
	IFS=: read -r rname flat tests tcg opts envs <<<"$run"
	# 6.12 guests run their vCPUs on one TCG thread, as the soak's: there
	# the net test's load/unload cycles met the emulator's stale
	# translation of patched kernel text (doc/kernels.md) about once in
	# three runs.
	if [ "$rname" = k612 ] || [ "$K612" = all ]; then
		opts="$opts $K612_OPTS"
		tcg=single
	fi
	echo "# selftests, topology: $topo, $rname (flat window: $flat${tcg:+, TCG $tcg}): ${tests//,/ }"
	tout=$OUT/$topo-$rname
	mkdir -p "$tout"
	# shellcheck disable=SC2086 # opts: testbed options, split on purpose
	t_run=$SECONDS
	# The timeout catches a hung run; the pair group takes about 22
	# minutes on a quiet host and 40% more on a loaded one.
	tmo=2700
	[ "$rname" = deb ] && tmo=3600
	TESTBED_TCG_THREAD=$tcg "$ROOT/scripts/testbed.sh" --topo "$topo" --flat "$flat" --timeout $tmo \
		$opts --out "$tout" -- env ${envs//,/ } selftests/run.sh ${tests//,/ } > "$tout/testbed.log" 2>&1
	rc=$?
	echo "$topo/$rname: $((SECONDS - t_run)) s (testbed exit $rc)" >>"$TIMES"
	ktap=$(ls "$tout"/ktap.*.txt 2>/dev/null | head -1)
	if [ -z "$ktap" ]; then
		tail -30 "$tout/testbed.log" | sed 's/^/# /'
		result fail "$topo/$rname: selftests produced no KTAP (testbed exit $rc)"
		continue
	fi
	sed "s/^/# [$topo] /" "$ktap"
	# Leaf results: the indented subtests of each test program.
	while IFS= read -r line; do
		name="$topo/$rname: ${line#*ok }"
		case $line in
		*"# SKIP"*) skip=$((skip + 1)); echo "ok - $name" ;;
		"not ok"*) result fail "$name"; failure_context "$ktap" "    $line" ;;
		*) result ok "$name" ;;
		esac
	done < <(sed -nE 's/^    ((not )?ok [0-9]+ .*)/\1/p' "$ktap")
	# A test program that failed without leaf results, or a dirty console.
	# gtest's failure messages (ntrdma_ib_test.sh prints them before its results)
	grep -A5 ': Failure$' "$ktap" | head -40 | cut -c1-300 | sed 's/^/#   /' >>"$FAILURES"
	if grep -qE '^not ok [0-9]+ selftests' "$ktap" &&
	   ! grep -qE '^    not ok' "$ktap"; then
		result fail "$topo/$rname: a test program failed: $(grep -E '^not ok' "$ktap" | head -1)"
	fi
	if [ $rc -ne 0 ]; then
		tail -20 "$tout/testbed.log" | sed 's/^/# /'
		result fail "$topo/$rname: test bed run clean (exit $rc; console check, timeout or test failure)"
	else
		result ok "$topo/$rname: test bed run clean (no oops/WARN/BUG/lockup on any console)"
	fi
	[ -f "$tout/metrics.txt" ] && sed 's/^/# metric /' "$tout/metrics.txt"
done
done

# make bench's harness, one short round (scripts/bench.sh --smoke): it
# fails when a row that must exist (ntb_perf, veth, ntr0, rxe) has no result.
if [ "${CHECK_BENCH:-1}" = 1 ]; then
	echo "# bench smoke: scripts/bench.sh --smoke"
	bo=$OUT/bench-smoke
	BENCH_OUT=$bo "$ROOT/scripts/bench.sh" --smoke > "$OUT/bench-smoke.log" 2>&1
	rc=$?
	grep -E '^\| ' "$bo/results.md" 2>/dev/null | sed 's/^/# /'
	[ $rc -eq 0 ] || sed 's/^/# /' "$OUT/bench-smoke.log" | grep -v '^# |' | tail -20
	[ $rc -eq 0 ] && result ok "bench smoke: every required row measured" ||
		result fail "bench smoke: scripts/bench.sh --smoke exit $rc"
	n=$(grep -c '"round"' "$bo/results.json" 2>/dev/null)
	[ "${n:-0}" -gt 0 ] &&
		result ok "bench smoke: results.json has samples" ||
		result fail "bench smoke: results.json has samples"
	[ -s "$bo/chart.png" ] && result ok "bench smoke: chart.png written" ||
		result fail "bench smoke: chart.png written"
fi

echo "# test-bed runs (wall time):"
sed 's/^/#   /' "$TIMES"
echo "# make check (tier $TIER) took $(((SECONDS - T_START) / 60)) min"
if [ -s "$FAILURES" ]; then
	echo "# failures again (each with the diagnostics before it):"
	sed 's/^/# /' "$FAILURES" | head -150
fi
echo "# skipped: $skip"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
