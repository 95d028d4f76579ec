#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make demo`: boot two emulated hosts joined by the emulated NTB, bring an
# Ethernet link up over it on both, ping, run iperf3 both ways and print a
# short result table. Until NTRDMA's own netdev (ntr0) lands this uses the
# kernel's ntb_netdev over ntb_transport, on the same emulated hardware.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${DEMO_OUT:-$ROOT/build/demo}
rm -rf "$OUT"
mkdir -p "$OUT"

echo "demo: booting two guests joined by the emulated NTB (this takes ~1 min)"
IPERF_SECS=${IPERF_SECS:-10} "$ROOT/scripts/testbed.sh" --topo pair --flat 0 \
	--timeout 900 --out "$OUT" -- selftests/ntb_netdev_test.sh \
	> "$OUT/testbed.log" 2>&1
rc=$?
echo
echo "| check | result |"
echo "|---|---|"
grep -hE '^(not )?ok [0-9]+ ' "$OUT/testbed.log" | tr -d '\r' |
	sed -E 's/^ok [0-9]+ (.*)/| \1 | pass |/; s/^not ok [0-9]+ (.*)/| \1 | FAIL |/'
echo
echo "| measurement (emulated hardware, TCG: compare ratios, not absolutes) | value |"
echo "|---|---|"
if [ -f "$OUT/metrics.txt" ]; then
	awk '{printf "| %s | %s %s |\n", $2, $3, $4}' "$OUT/metrics.txt"
fi
echo
if [ $rc -eq 0 ]; then
	echo "demo: PASS (logs in $OUT)"
else
	echo "demo: FAIL, exit $rc (logs in $OUT)"
fi
exit $rc
