#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Print the Debian amd64 kernel release the test bed boots: the newest one
# that has both an image in /boot and a build tree (headers).
for v in $(ls /boot/vmlinuz-*-amd64 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -rV); do
	if [ -d "/lib/modules/$v/build" ]; then
		echo "$v"
		exit 0
	fi
done
echo "kver.sh: no kernel image with headers found (run scripts/install-deps.sh)" >&2
exit 1
