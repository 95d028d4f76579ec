#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make demo`: boot two emulated hosts joined by the emulated NTB, bring ntr0
# up on both with addresses, ping, run iperf3 both ways, then ib_write_bw,
# ib_read_lat and rping between them, print a table.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${DEMO_OUT:-$ROOT/build/demo}
rm -rf "$OUT"
mkdir -p "$OUT"

echo "demo: booting two guests joined by the emulated NTB (about a minute)"
"$ROOT/scripts/testbed.sh" --topo pair --flat 1 --timeout 600 --out "$OUT" \
	-- scripts/demo-guest.sh 2>"$OUT/testbed.err"
rc=$?
if [ $rc -eq 0 ]; then
	echo "demo: PASS (logs in $OUT)"
else
	tail -5 "$OUT/testbed.err"
	echo "demo: FAIL, exit $rc (logs in $OUT)"
fi
exit $rc
