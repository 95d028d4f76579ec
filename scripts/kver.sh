#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Print the Debian amd64 kernel release the build and the test bed use by
# default: the one the distribution's linux-image-amd64 stands for (Debian
# 12's 6.1 on a Debian 12 host, even with a backports kernel installed
# beside it), else the newest one that has both an image in /boot and a
# build tree (headers).
has() { [ -f "/boot/vmlinuz-$1" ] && [ -d "/lib/modules/$1/build" ]; }
v=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
	sed -n 's/^linux-image-\([^ ,]*-amd64\).*/\1/p')
if [ -n "$v" ] && has "$v"; then
	echo "$v"
	exit 0
fi
for v in $(ls /boot/vmlinuz-*-amd64 2>/dev/null | sed 's|/boot/vmlinuz-||' | sort -rV); do
	if has "$v"; then
		echo "$v"
		exit 0
	fi
done
echo "kver.sh: no kernel image with headers found (run scripts/install-deps.sh)" >&2
exit 1
