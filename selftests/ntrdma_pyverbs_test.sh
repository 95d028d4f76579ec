#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# rdma-core's own test suite (pyverbs, release 44 as Debian's
# python3-pyverbs ships it; scripts/pyverbs-suite.sh unpacks it into the
# build tree) against ntrdma, unmodified: `run_tests.py --dev IBDEV -v`.
# Each of its tests becomes a subtest here: ok, SKIP with the suite's own
# reason (a feature the device does not advertise), or not ok for a
# failure, an error or a test that never reported (a hang ends in the
# suite's timeout). Its connected tests use two QPs of the same device
# (same-device loopback); its rdma_cm tests connect to the address of
# ntr0 on this host. Loop topology (one host is enough; in pair the same
# device runs it on host A).
. "$(dirname "$0")/lib/ktap.sh"
. "$(dirname "$0")/lib/env.sh"
. "$(dirname "$0")/lib/verbs.sh"

SUITE=$NTRDMA_ROOT/build/pyverbs/tests
SUITE_TIMEOUT=${PYVERBS_TIMEOUT:-900}

ktap_header
if [ ! -f "$SUITE/run_tests.py" ]; then
	ktap_plan 1
	ktap_skip "pyverbs suite" "not unpacked: $SUITE (scripts/pyverbs-suite.sh, python3-pyverbs)"
	ktap_finish
fi
need_ntb_pair 1
load_ntrdma
install_provider
wait_for 10 ibdev_of "$LOCAL_DEV" >/dev/null
IBDEV=$(ibdev_of "$LOCAL_DEV")
NETDEV=$(netdev_of "$LOCAL_DEV")
if [ -z "$IBDEV" ] || ! wait_for 15 port_is "$IBDEV" PORT_ACTIVE; then
	ktap_plan 1
	ktap_fail "ib device of $LOCAL_DEV (${IBDEV:-none}) with an ACTIVE port"
	ktap_finish
fi
# The rdma_cm tests take the address of the device's netdev.
ip link set lo up
ip link set "$NETDEV" up
ip addr replace 10.79.5.1/24 dev "$NETDEV"

# Tests that cannot pass on a port whose connection manager is the iw_cm
# (ours, for rdma_cm's sake: see doc/rdma_cm.md), whatever the driver
# does; they run, and what they said is shown, but they count as skipped.
declare -A CORE_LIMIT=(
	[test_rdmacm.CMTestCase.test_rdmacm_async_traffic]="asserts that query_qp reports the ACK timeout set with rdma_set_option(): rdma_cm applies it in rdma_init_qp_attr() only when IB_QP_TIMEOUT is in the mask, which iw_cm_init_qp_attr() never sets, so no iWARP-CM driver (siw, cxgb4) ever sees it"
	[test_rdmacm.CMTestCase.test_rdmacm_async_traffic_external_qp]="expects RDMA_CM_EVENT_CONNECT_RESPONSE for a connect without a QP on the cm_id: rdma_cm's iWARP handler (cma_iw_handler) reports every CONNECT_REPLY as ESTABLISHED"
	[test_rdmacm.CMTestCase.test_rdmacm_async_udp_traffic]="rdma_cm's UDP port space needs the IB CM: on an iWARP-CM port rdma_init_qp_attr() gives a UD QP iWARP's INIT attributes (state and access, no P_Key, port or Q_Key), which the IB rules for a UD QP refuse (EINVAL), and rdma_connect() is an iw_cm RC handshake, not the IB CM's SIDR that tells the UD address"
)

out=$NTRDMA_OUT/pyverbs.$$
(cd "$SUITE" && timeout "$SUITE_TIMEOUT" python3 -u run_tests.py --dev "$IBDEV" --port 1 -v) \
	>"$out" 2>&1
rc=$?
ktap_diag "run_tests.py --dev $IBDEV: exit $rc ($(grep -E '^(Ran|OK|FAILED)' "$out" | tr '\n' ' '))"

# unittest -v: "name (module.Class.name)", the docstring's first line when
# there is one, then " ... RESULT" (ok, skipped 'why', FAIL, ERROR); what a
# test prints may come between " ... " and its result.
results=$NTRDMA_OUT/pyverbs_results.$$
awk '
	function result(r) {
		return r == "ok" || r ~ /^skipped / || r == "FAIL" || r == "ERROR" ||
		       r == "expected failure" || r == "unexpected success"
	}
	/^test[A-Za-z0-9_]* \([A-Za-z0-9_.]+\)/ {
		id = $2; gsub(/[()]/, "", id)
	}
	/ \.\.\. / && id != "" {
		r = $0; sub(/.* \.\.\. /, "", r)
		if (result(r)) print id "\t" r; else pending = id
		id = ""; next
	}
	pending != "" && result($0) { print pending "\t" $0; pending = "" }
	' "$out" >"$results"
n=$(wc -l <"$results")
ktap_plan $((n + 2))
while IFS=$'\t' read -r id r; do
	t=${id#tests.}
	name="pyverbs: $t"
	case $r in
	ok) ktap_pass "$name" ;;
	"skipped "*) ktap_skip "$name" "$(echo "${r#skipped }" | tr -d "'\"" | head -c 200)" ;;
	"expected failure") ktap_pass "$name (expected failure)" ;;
	*)
		if [ -n "${CORE_LIMIT[$t]:-}" ]; then
			ktap_skip "$name" "${CORE_LIMIT[$t]}"
		else
			ktap_fail "$name: $r"
		fi
		;;
	esac
done <"$results"
# per module: passed / skipped / failed (core limits count as skipped)
awk -F'\t' '{
	split($1, p, "."); m = p[2]
	r = ($2 == "ok" || $2 == "expected failure") ? "pass" : ($2 ~ /^skipped /) ? "skip" : "fail"
	n[m, r]++; mods[m] = 1
} END {
	for (m in mods) printf "# module %s: %d passed, %d skipped, %d failed or errored (core limits included)\n", m, n[m, "pass"], n[m, "skip"], n[m, "fail"]
}' "$results" | sort
# each failure's traceback tail (what was expected, what came), and what
# the two players of the rdma_cm tests reported
grep -E 'Player (active|passive) got' "$out" | head -20 | sed 's/^/# /'
grep -A12 -E '^(FAIL|ERROR): ' "$out" | grep -vE '^\s*$' | head -120 | sed 's/^/# /'
ktap_check "the suite finished (exit 0 or 1, not killed at ${SUITE_TIMEOUT} s) and every test reported" \
	sh -c "[ $rc -le 1 ] && grep -qE '^Ran $n tests? ' '$out'"
# the summary's failures and errors are the ones counted above
bad=$(grep -cE $'\t(FAIL|ERROR)$' "$results")
said=$(sed -nE 's/^FAILED \((.*)\)/\1/p' "$out" | grep -oE '(failures|errors)=[0-9]+' |
	cut -d= -f2 | paste -sd+ | bc)
ktap_check "every failure and error of the summary (${said:-0}) was counted ($bad)" \
	test "${said:-0}" -eq "$bad"
rm -f "$out" "$results"
ip addr del 10.79.5.1/24 dev "$NETDEV" 2>/dev/null
ktap_finish
