#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rdma-core's own test suite (pyverbs), as Debian's python3-pyverbs ships it
# under /usr/share/doc/rdma-core/tests (some files gzipped), unpacked into
# the build tree for selftests/ntrdma_pyverbs_test.sh. Never committed: it
# is rdma-core's code, taken from the installed package at build time.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=/usr/share/doc/rdma-core/tests
DST=$ROOT/build/pyverbs/tests
[ -d "$SRC" ] || { echo "pyverbs-suite: $SRC missing (python3-pyverbs)" >&2; exit 1; }
[ -f "$DST/.unpacked" ] && [ "$DST/.unpacked" -nt "$SRC" ] && exit 0
rm -rf "$DST"
mkdir -p "$DST"
cp -a "$SRC"/. "$DST"/
find "$DST" -name '*.gz' -exec gunzip -f {} +
touch "$DST/.unpacked"
