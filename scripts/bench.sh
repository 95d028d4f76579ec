#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make bench`: boots the test bed once per topology (--flat 1, so the stock
# NTB clients and ntrdma can both run, the hardware driver being reloaded
# between them), runs scripts/bench-guest.sh there, then turns the samples
# into results.json, results.md and chart.png (scripts/bench_report, gnuplot)
# and prints the table. The default full run (no --smoke or --quick, output
# in build/bench) also copies results.md to doc/results.md and chart.png to
# doc/bench-chart.png: those two files are only ever written here.
#
# Usage: scripts/bench.sh [--smoke|--quick] [--topo "loop pair"] [--out DIR]
#   --smoke  one topology (loop), one short round of a few rows; fails when a
#            row that must exist has no result (make check runs this).
#   --quick  for developers: loop, one round, one row per group (copy probe;
#            iperf3 TCP x1 on ntb_netdev, ntr0, veth; ib_write_bw 64 KiB and
#            the 2 B write/read/send latencies on ntrdma, rxe and siw), every
#            row required; output in build/bench-quick.
# Environment: BENCH_REPEATS (3), BENCH_SECS (2), BENCH_LAT_ITERS (1000),
# BENCH_TOPOS ("loop pair"), BENCH_OUT (build/bench), BENCH_TIMEOUT (3600 s
# per topology), and the selections of scripts/bench-guest.sh (BENCH_ETH,
# BENCH_ETH_TESTS, BENCH_RDMA, BENCH_RDMA_TESTS, BENCH_LINK, BENCH_DOORBELL,
# BENCH_PROBE_RUNS, BENCH_PROBE_MIB, BENCH_STORAGE, BENCH_STORAGE_TESTS, BENCH_NFS_TESTS,
# BENCH_FI_ITERS, BENCH_PP_ITERS); BENCH_OLD_REV when BENCH_RDMA names
# ntrdma-old (scripts/build-old.sh).
set -euo pipefail

# One function, called on the last line: bash parses all of it first, so
# editing this file cannot disturb a bench in progress.
main() {
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
START_TIME=$(date -u '+%Y-%m-%d %H:%M UTC')
START_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
REPORT=$ROOT/build/user/scripts/bench_report/ntrdma-bench-report
SMOKE=0
QUICK=0
TOPOS=${BENCH_TOPOS:-loop pair}
ROUNDS=${BENCH_REPEATS:-3}
RUN_SECS=${BENCH_SECS:-2}
OUT=${BENCH_OUT:-}
OUT_SET=${OUT:+1}
TIMEOUT=${BENCH_TIMEOUT:-3600}

while [ $# -gt 0 ]; do
	case $1 in
	--smoke) SMOKE=1; shift ;;
	--quick) QUICK=1; shift ;;
	--topo) TOPOS=${2:?}; shift 2 ;;
	--out) OUT=${2:?}; OUT_SET=1; shift 2 ;;
	*) echo "usage: $0 [--smoke|--quick] [--topo 'loop pair'] [--out DIR]" >&2; exit 2 ;;
	esac
done

# What the guest measures (passed on explicitly: the guest gets no host environment).
GUEST_ENV=()
REQUIRE=()
if [ "$SMOKE" = 1 ]; then
	[ -n "${BENCH_TOPOS:-}" ] || TOPOS=loop
	OUT=${OUT:-$ROOT/build/bench-smoke}
	TIMEOUT=${BENCH_TIMEOUT:-300}
	ROUNDS=1 RUN_SECS=2
	GUEST_ENV=(BENCH_REPEATS=1 BENCH_SECS=2 BENCH_LAT_ITERS=500 BENCH_LINK=1
		BENCH_PROBE_RUNS=2 BENCH_PROBE_MIB=256
		BENCH_DOORBELL=0 "BENCH_ETH=ntr0 veth" BENCH_ETH_TESTS=tcp1
		BENCH_RDMA=rxe "BENCH_RDMA_TESTS=write_bw:65536 send_lat:2" BENCH_STORAGE=)
	for t in $TOPOS; do
		REQUIRE+=("$t|ntb_hw_ivshmem|flat window copy" "$t|ntb_hw_ivshmem|MW copy" "$t|veth|iperf3 TCP x1"
			"$t|ntr0|iperf3 TCP x1" "$t|rxe|ib_write_bw 64 KiB" "$t|rxe|ib_send_lat 2 B")
	done
elif [ "$QUICK" = 1 ]; then
	[ -n "${BENCH_TOPOS:-}" ] || TOPOS=loop
	OUT=${OUT:-$ROOT/build/bench-quick}
	TIMEOUT=${BENCH_TIMEOUT:-900}
	ROUNDS=1 RUN_SECS=2
	GUEST_ENV=(BENCH_REPEATS=1 BENCH_SECS=2 BENCH_LAT_ITERS=500 BENCH_LINK=1
		"BENCH_ETH=ntb_netdev ntr0 veth" BENCH_ETH_TESTS=tcp1
		"BENCH_RDMA=ntrdma rxe siw" BENCH_STORAGE=
		"BENCH_RDMA_TESTS=write_bw:65536 write_lat:2 read_lat:2 send_lat:2")
	for t in $TOPOS; do
		REQUIRE+=("$t|ntb_hw_ivshmem|flat window copy" "$t|ntb_hw_ivshmem|MW copy")
		for s in ntb_netdev ntr0 veth; do REQUIRE+=("$t|$s|iperf3 TCP x1"); done
		for s in ntrdma rxe siw; do
			REQUIRE+=("$t|$s|ib_write_bw 64 KiB" "$t|$s|ib_write_lat 2 B"
				"$t|$s|ib_read_lat 2 B" "$t|$s|ib_send_lat 2 B")
		done
	done
else
	OUT=${OUT:-$ROOT/build/bench}
	for v in BENCH_REPEATS BENCH_SECS BENCH_LAT_ITERS BENCH_LINK BENCH_DOORBELL BENCH_ETH \
		BENCH_ETH_TESTS BENCH_RDMA BENCH_RDMA_TESTS BENCH_PROBE_RUNS BENCH_PROBE_MIB \
		BENCH_STORAGE BENCH_STORAGE_TESTS BENCH_NFS_TESTS BENCH_BUSY_POLL_US \
		BENCH_FI_ITERS BENCH_PP_ITERS; do
		[ -n "${!v+set}" ] && GUEST_ENV+=("$v=${!v}")
	done
	# Rows that must have results (other rows may be n/a: a peer may lack a
	# test; a tool that fails 3 times is reported n/a with its reason).
	if [ -z "${BENCH_ETH+set}${BENCH_ETH_TESTS+set}${BENCH_RDMA+set}${BENCH_RDMA_TESTS+set}${BENCH_LINK+set}${BENCH_STORAGE+set}${BENCH_STORAGE_TESTS+set}${BENCH_NFS_TESTS+set}" ]; then
		for t in $TOPOS; do
			REQUIRE+=("$t|ntb_hw_ivshmem|flat window copy" "$t|ntb_hw_ivshmem|MW copy")
			for s in ntb_netdev ntr0 ntr0-win veth; do
				REQUIRE+=("$t|$s|iperf3 TCP x1" "$t|$s|iperf3 TCP x4")
			done
			for s in ntb_netdev ntr0 veth; do
				REQUIRE+=("$t|$s|sockperf TCP ping-pong 64 B"
					  "$t|$s|sockperf TCP ping-pong 64 B, busy poll")
			done
			for s in ntrdma ntrdma-win rxe siw; do
				REQUIRE+=("$t|$s|ib_write_bw 64 KiB" "$t|$s|ib_send_lat 2 B")
			done
			# ntrdma over TCP: on lo in loop, on ntb_netdev in pair
			REQUIRE+=("$t|ntr0-tcp|iperf3 TCP x1")
			s=ntrdma-tcp
			[ "$t" = pair ] && s=ntrdma-tcp@ntb_netdev
			REQUIRE+=("$t|$s|ib_write_bw 64 KiB" "$t|$s|ib_send_lat 2 B")
			REQUIRE+=("$t|ntrdma|fi_pingpong MSG 64 B" "$t|ntrdma|fi_pingpong RDM 64 B"
				  "$t|ntrdma|ibv_rc_pingpong 64 B" "$t|ntrdma|ibv_uc_pingpong 64 B"
				  "$t|ntrdma|ibv_ud_pingpong 64 B")
			# what a user would run instead over the NTB (two kernels)
			[ "$t" = pair ] || continue
			for s in rxe@ntb_netdev siw@ntb_netdev rxe@ntr0; do
				REQUIRE+=("$t|$s|ib_write_bw 64 KiB" "$t|$s|ib_send_lat 2 B")
			done
			# kernel storage, beside its TCP form on the same link
			for s in nvmeof-rdma nvmeof-tcp@ntr0; do
				REQUIRE+=("$t|$s|fio randread 4 KiB QD1" "$t|$s|fio read 128 KiB QD8")
			done
			for s in iser iscsi-tcp@ntr0; do
				REQUIRE+=("$t|$s|fio randread 4 KiB QD1" "$t|$s|fio read 128 KiB QD8")
			done
			for s in nfs-rdma nfs-tcp@ntr0; do
				REQUIRE+=("$t|$s|fio write 1024 KiB QD4" "$t|$s|fio read 1024 KiB QD4")
			done
		done
	fi
fi

# ntrdma-old, when BENCH_RDMA names it: an earlier revision (BENCH_OLD_REV,
# default the last before direct placement), built from git here.
if [[ " ${BENCH_RDMA:-} " == *" ntrdma-old "* ]] && [ "$SMOKE$QUICK" = 00 ]; then
	old=$("$ROOT/scripts/build-old.sh" "${BENCH_OLD_REV:-}" 2>"$ROOT/build/old.log") ||
		{ tail -5 "$ROOT/build/old.log" >&2; exit 1; }
	GUEST_ENV+=("BENCH_OLD_DIR=$old")
fi
[ -x "$REPORT" ] || { echo "bench: $REPORT missing (run make)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "bench: gnuplot missing (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$OUT"
rm -f "$OUT"/results.* "$OUT"/chart*
fail=0
files=()
for t in $TOPOS; do
	d=$OUT/$t
	rm -rf "$d"
	mkdir -p "$d"
	echo "bench: topology $t (logs: $d, progress: $d/stderr.log)" >&2
	start=$SECONDS
	rc=0
	"$ROOT/scripts/testbed.sh" --topo "$t" --flat 1 --timeout "$TIMEOUT" --out "$d" -- \
		env "${GUEST_ENV[@]}" scripts/bench-guest.sh >"$d/bench.log" 2>&1 || rc=$?
	echo "bench: topology $t: test bed exit $rc after $((SECONDS - start)) s" >&2
	# 120 = the console check matched. A peer tool dying of a general
	# protection fault in user space (seen: ib_write_bw -R on siw, inside
	# librdmacm) is logged by the kernel as "traps: ... general protection
	# fault"; that sample is already n/a, and the kernel is fine.
	if [ "$rc" = 120 ]; then
		hits=$(grep -aE '^testbed: [^ :]+\.log:[0-9]+:' "$d/bench.log" || true)
		kern=$(grep -avE '\] traps: [^ ]+\[[0-9]+\] general protection fault ip:[0-9a-f]+ .* in [^ ]+\[' <<<"$hits" || true)
		if [ -n "$hits" ] && [ -z "$kern" ] && [ "$(wc -l <<<"$hits")" -lt 40 ]; then
			echo "bench: topology $t: only user-space faults on the consoles (not a kernel problem):" >&2
			sed 's/^/  /' <<<"$hits" >&2
			rc=0
		fi
	fi
	if [ "$rc" != 0 ]; then
		tail -n 15 "$d/bench.log" | sed 's/^/  /' >&2
		fail=1
	fi
	[ -s "$d/samples.tsv" ] && files+=("$d/samples.tsv")
done
if [ ${#files[@]} -eq 0 ]; then
	echo "bench: no samples at all" >&2
	exit 1
fi

rep_rc=0
END_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
PARAMS="topologies: $TOPOS; $ROUNDS rounds of $RUN_SECS s runs; QEMU TCG on $(nproc) host cores; host load average $START_LOAD at the start, $END_LOAD at the end"
{
	echo "NTRDMA benchmarks started $START_TIME at $REV, finished $(date -u '+%H:%M UTC');"
	echo "$PARAMS; reproduce: \`make bench\`"
	echo
} >"$OUT/header.md"
args=()
for r in "${REQUIRE[@]}"; do args+=(--require "$r"); done
"$REPORT" --out "$OUT" "${args[@]}" "${files[@]}" >"$OUT/table.md" || rep_rc=$?
cat "$OUT/header.md" "$OUT/table.md" >"$OUT/results.md"
cat "$OUT/results.md"
(cd "$OUT" && gnuplot chart.gp) >"$OUT/gnuplot.log" 2>&1 || {
	sed 's/^/  gnuplot: /' "$OUT/gnuplot.log" >&2
	rep_rc=1
}
[ -s "$OUT/chart.png" ] || { echo "bench: no chart written" >&2; rep_rc=1; }
echo "bench: results in $OUT: results.json results.md chart.png" >&2
# The default full run publishes its results in doc/ (README links them):
# both topologies, every system, output in build/bench, nothing failed.
# The copy carries no date or revision: the commit that adds it says when.
sel="${BENCH_ETH+set}${BENCH_ETH_TESTS+set}${BENCH_RDMA+set}${BENCH_RDMA_TESTS+set}${BENCH_LINK+set}${BENCH_DOORBELL+set}${BENCH_STORAGE+set}${BENCH_STORAGE_TESTS+set}${BENCH_NFS_TESTS+set}"
if [ "$SMOKE$QUICK" = 00 ] && [ -z "$OUT_SET" ] && [ "$TOPOS" = "loop pair" ] && [ -z "$sel" ] &&
	[ "$rep_rc" = 0 ] && [ "$fail" = 0 ]; then
	{
		echo "Generated by \`make bench\` (scripts/bench.sh); do not edit by hand. Run parameters: $PARAMS."
		echo
		echo "# Benchmark results"
		echo
		echo "How these figures are measured and how to read them: [bench.md](bench.md)."
		echo "The chart of the same run: [bench-chart.png](bench-chart.png)."
		echo
		cat "$OUT/table.md"
	} >"$ROOT/doc/results.md"
	cp "$OUT/chart.png" "$ROOT/doc/bench-chart.png"
	echo "bench: copied to doc/results.md and doc/bench-chart.png" >&2
fi
[ "$rep_rc" = 0 ] && [ "$fail" = 0 ]
}

main "$@"
