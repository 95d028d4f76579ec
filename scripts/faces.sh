#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# faces.sh KO [KCONFIG]: print the faces a built ntrdma.ko carries
# ("ntrdma.ko faces: Ethernet, verbs"). With KCONFIG (the target kernel's
# .config), exit 1 with a clear message when the kernel supports the verbs
# face (CONFIG_INFINIBAND_USER_ACCESS) and the module was built without it.
set -euo pipefail
ko=${1:?usage: faces.sh KO [KCONFIG]}
config=${2:-}
[ -f "$ko" ] || { echo "faces: $ko not built" >&2; exit 1; }
# The verbs face links against the RDMA core; the Ethernet face is always in.
faces=Ethernet
verbs=n
if modinfo -F depends "$ko" | tr ',' '\n' | grep -qx ib_core; then
	faces="$faces, verbs"
	verbs=y
fi
echo "$(basename "$ko") faces: $faces"
[ -n "$config" ] || exit 0
[ -f "$config" ] || { echo "faces: no kernel configuration $config" >&2; exit 1; }
if [ "$verbs" = n ] && grep -q '^CONFIG_INFINIBAND_USER_ACCESS=[ym]' "$config"; then
	echo "faces: $ko has no verbs face, but its kernel supports it" \
		"(CONFIG_INFINIBAND_USER_ACCESS in $config): rebuild it (make clean; make)" >&2
	exit 1
fi
