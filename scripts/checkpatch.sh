#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# checkpatch --strict over every kernel C file and header of NTRDMA.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CP=$ROOT/build/linux-src/scripts/checkpatch.pl
[ -x "$CP" ] || "$ROOT/scripts/build-kernel-ext.sh" >/dev/null
mapfile -t files < <(cd "$ROOT" && git ls-files -co --exclude-standard \
	'ntb_hw/*.[ch]' 'rdma/*.[ch]' 'net/*.[ch]' 'include/uapi/rdma/*.h' \
	'selftests/kverbs/*.[ch]' | grep -v '^rdma/provider/')
[ ${#files[@]} -gt 0 ] || exit 0
cd "$ROOT"
"$CP" --strict --no-tree --terse --show-types \
	--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG -f "${files[@]}"
