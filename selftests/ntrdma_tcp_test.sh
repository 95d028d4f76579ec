#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# NTRDMA over TCP (rdma/engine/ntrdma_tcp.c), in one host: two devices on
# 127.0.0.1, ntrdma_tcp0 listening and ntrdma_tcp1 connecting. While another
# program holds the listening port the devices wait without burning CPU;
# once it is free their session comes up in windowed mode; ntr netdevs in two namespaces ping and carry
# iperf3 and a 64 MiB transfer checked with sha256; the link goes down and
# comes back when a device's link is turned off and on, and when the TCP
# connection is killed under it (a new session each time); a peer that
# sends a malformed record is cut off and counted; then the dialer's
# stream goes through ntrdma-tcp-fuzz, which flips bytes of the window
# stores, damages headers and cuts records, under traffic (FUZZ_SECS, 20),
# and a clean relay afterwards brings a new session; the module unloads.
# The verbs tools run over the same devices with NTRDMA_LINK=tcp
# ntrdma_tools_test.sh.
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/net.sh"

A_IP=10.79.0.1
B_IP=10.79.0.2

NTESTS=16
FUZZ=$NTRDMA_ROOT/build/user/rdma/tests/ntrdma-tcp-fuzz
FUZZ_SECS=${FUZZ_SECS:-20}
ktap_header
ktap_plan $NTESTS

if is_pair; then
	ktap_skip_rest "ntrdma over TCP" "the pair's guests have no IP link between them yet"
fi
NTRDMA_LINK=tcp
modprobe -r ntrdma 2>/dev/null
install_modules || fail_rest "modules not installed"
ntb_pair
net_sides
ip netns add ntA 2>/dev/null
ip netns add ntB 2>/dev/null
ping_ok() { $A "ping -c 2 -W 2 $B_IP >/dev/null" && $B "ping -c 2 -W 2 $A_IP >/dev/null"; }
downs() { cat "$DEBUGFS"/ntrdma/*/info 2>/dev/null | awk '/^link_down_events/ { n += $2 } END { print n + 0 }'; }
# debugfs is read here: "ip netns exec" hides it.
find_tcp_dbgs() {
	DBGA=$(ntrdma_dir "sh -c" "$LOCAL_DEV")
	DBGB=$(ntrdma_dir "sh -c" "$REMOTE_DEV")
	[ -n "$DBGA" ] && [ -n "$DBGB" ]
}
info_of() { local d=DBG$1; sed -n "s/^$2: //p" "${!d}/info" 2>/dev/null; }
link_up() { [ "$(info_of A link)" = up ] && [ "$(info_of B link)" = up ]; }
epoch_of() { info_of "$1" epoch; }
back_up() { wait_for 20 link_up && wait_for 10 ping_ok; }
errors_above() { [ "$(info_of A tcp_errors)" -gt "$1" ]; }
connects_above() { [ "$(info_of B tcp_connects)" -gt "$1" ]; }

# CPU ticks (USER_HZ) the devices' TCP threads used so far.
tcp_ticks() {
	local p n=0
	for p in $(pgrep '^ntrdma[0-9]+_tcp$'); do
		n=$((n + $(awk '{ print $14 + $15 }' /proc/$p/stat)))
	done
	echo $n
}

# 1: another program holds the port for 8 s
python3 -c "import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $TCP_PORT)); s.listen(4); time.sleep(8)" &
hold=$!
port_held() { ss -ltn "sport = :$TCP_PORT" | grep -q LISTEN; }
wait_for 10 port_held || ktap_diag "the port was not taken"
modprobe ntrdma || fail_rest "modprobe ntrdma with tcp_listen and tcp_connect"
ktap_check "ntrdma loaded with two TCP devices" wait_for 10 find_tcp_dbgs
# 2
t0=$(tcp_ticks)
sleep 3
t1=$(tcp_ticks)
ktap_check "port taken: the TCP threads wait, using $((t1 - t0)) of 300 ticks in 3 s" \
	test $((t1 - t0)) -lt 60
wait $hold
# 2
ktap_check "port free: link up on both within 20 s" wait_for 20 link_up
# 3
ktap_check "windowed mode, CPU copies, on both ($(info_of A mode), $(info_of B copy))" \
	test "$(info_of A mode)/$(info_of B mode)/$(info_of A copy)" = windowed/windowed/cpu
# 4
bring_up || ktap_diag "netdevs not configured"
ktap_check "ping both ways over ntr netdevs on TCP ($IFA / $IFB)" wait_for 10 ping_ok
# 5
iperf_check ntr_tcp x1 "$B" "$A" "$B_IP" 5310
# 6
$A "head -c 67108864 /dev/urandom > /tmp/ntr.tcp.blob && sha256sum < /tmp/ntr.tcp.blob | cut -d' ' -f1 > /tmp/ntr.tcp.sha"
$B "rm -f /tmp/ntr.tcp.rx; (busybox nc -l -p 5311 | sha256sum | cut -d' ' -f1 > /tmp/ntr.tcp.rx) >/dev/null 2>&1 &"
sleep 1
$A "bash -c 'cat /tmp/ntr.tcp.blob > /dev/tcp/$B_IP/5311'"
wait_for 30 $B "test -s /tmp/ntr.tcp.rx"
sa=$($A "cat /tmp/ntr.tcp.sha")
ktap_check "64 MiB transfer: sha256 equal on both ends (${sa:0:12})" \
	test -n "$sa" -a "$sa" = "$($B "cat /tmp/ntr.tcp.rx" 2>/dev/null)"
rm -f /tmp/ntr.tcp.blob
# 7
d0=$(downs) e0=$(epoch_of A)
echo link_off > "$DBGB/inject"
ktap_check "link_off on the connecting device: both links down" \
	wait_for 10 sh -c "! grep -q '^link: up' $DBGA/info $DBGB/info"
# 8: a peer that sends a malformed record (no HELLO) is cut off
e_before=$(info_of A tcp_errors)
printf 'GET / HTTP/1.0\r\n\r\n' | timeout 5 busybox nc 127.0.0.1 "$TCP_PORT" >/dev/null 2>&1
wait_for 5 errors_above "${e_before:-0}"
e_after=$(info_of A tcp_errors)
ktap_check "a malformed record closes the connection and is counted (tcp_errors $e_before -> $e_after)" \
	test "${e_after:-0}" -gt "${e_before:-0}"
# 9
echo link_on > "$DBGB/inject"
back_up
ok=$?
e1=$(epoch_of A)
ktap_check "link_on: a new session ($e0 -> $e1) and ping" test "$ok" = 0 -a "$e1" != "$e0"
ktap_check "link_down_events counted the end ($d0 -> $(downs))" test "$(downs)" -gt "$d0"
# 10: the connection killed under traffic
c0=$(info_of B tcp_connects)
$B "ping -c 30 -i 0.1 $A_IP >/dev/null 2>&1 &"
ss -K "( sport = :$TCP_PORT or dport = :$TCP_PORT )" >/dev/null 2>&1
wait_for 20 connects_above "${c0:-0}"
ktap_check "the connection killed: reconnected ($c0 -> $(info_of B tcp_connects) connects), session and ping back" \
	back_up
# 12: the dialer reaches the listener through the fuzzer
ip netns del ntA 2>/dev/null
ip netns del ntB 2>/dev/null
modprobe -r ntrdma
FPORT=$((TCP_PORT + 1))
echo "options ntrdma tcp_listen=127.0.0.1:$TCP_PORT tcp_connect=127.0.0.1:$FPORT" > /etc/modprobe.d/ntrdma-tcp.conf
ip netns add ntA
ip netns add ntB
modprobe ntrdma && wait_for 10 find_tcp_dbgs && bring_up || ktap_diag "not set up for the fuzz"
e0=$(info_of A tcp_errors) p0=$(info_of A proto_errors)
"$FUZZ" --listen "$FPORT" --to "127.0.0.1:$TCP_PORT" --secs "$FUZZ_SECS" --seed "$RANDOM" \
	> "$NTRDMA_OUT/tcp-fuzz.txt" 2>&1 &
fpid=$!
$A "ping -q -i 0.02 -w $FUZZ_SECS $B_IP >/dev/null 2>&1" &
$B "iperf3 -s -1 -D -p 5312 >/dev/null 2>&1"
$A "timeout $((FUZZ_SECS + 5)) iperf3 -c $B_IP -p 5312 -t $FUZZ_SECS >/dev/null 2>&1"
wait $fpid
wait
ktap_diag "fuzzer: $(cat "$NTRDMA_OUT/tcp-fuzz.txt")"
ktap_check "fuzzed link: cut off and counted (tcp_errors $e0 -> $(info_of A tcp_errors), proto_errors $p0 -> $(info_of A proto_errors))" \
	test "$(info_of A tcp_errors)" -gt "${e0:-0}"
# 13
"$FUZZ" --listen "$FPORT" --to "127.0.0.1:$TCP_PORT" --secs 60 --flip 0 --bad 0 --cut 0 \
	> /dev/null 2>&1 &
fpid=$!
ktap_check "after the fuzz, a clean relay: link up and ping" back_up
kill $fpid 2>/dev/null
wait $fpid 2>/dev/null
# 14
ip netns del ntA 2>/dev/null
ip netns del ntB 2>/dev/null
ktap_check "unload within 20 s" timeout 20 modprobe -r ntrdma
# 12
ktap_check "no TCP socket of ntrdma left open" \
	sh -c "! ss -tn state listening state established | grep -q ':$TCP_PORT\\b'"
rm -f /etc/modprobe.d/ntrdma-tcp.conf
ktap_finish
