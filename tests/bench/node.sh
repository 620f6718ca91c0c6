#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# A node at full density (issue 36, `make bench-node`): a netns node with a real agent following
# the reference PolicyWatch server (tests/policy_server.py) over mutual TLS, PODS sandbox pods
# bound through runwall-cni (chained after ptp/host-local, as test_cni chains it), 1 000 runs,
# traffic from every pod, CNI churn at 20 pods a second and claims at 50 and 300 a second
# (tests/bench/node.py drives the load). Reports a table and BUILD/bench-node.json; asserts only
# that the node came up and the figures were read. Not part of `make check`.
#
#   tests/bench/node.sh [--quick] [--pods N] [--agent-shares N] [BUILD]
#
# --quick: 20 pods, 10 s phases. --agent-shares N: the agent in a CPU cgroup of its own weighted
# N, the load (node.py, all it starts, and the policy server) in another weighted 1024, as the
# kubelet puts a DaemonSet's pod and the sandboxes' pods in cgroups of their own, each weighted
# by its CPU request (cgroup v1 cpu.shares: millicores x 1024 / 1000, so 51 for the DaemonSet's
# 50m; on cgroup v2 the cpu.weight the kubelet derives from those shares). Without it every
# process shares the cgroup the bench started in. Everything (namespaces rwn<pid>-*, pins, the
# socket, processes, cgroups, files) goes on exit, on failure and Ctrl-C too.
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PODS=250 PHASE=30 BUILD_ARG=build AGENT_SHARES=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) PODS=20 PHASE=10 ;;
	--pods) PODS=$2; shift ;;
	--agent-shares) AGENT_SHARES=$2; shift ;;
	*) BUILD_ARG=$1 ;;
	esac
	shift
done
# shellcheck source=tests/netns/lib.sh
source "$HERE/../netns/lib.sh"
rw_suite_begin node rwn "$BUILD_ARG"
OUT=$BUILD/bench-node.json
SRV=$RW_SVC_LINK PORT=9443 CTL=127.0.0.1:9080 HTTP=127.0.0.1:9750
C=$RW_WORK/certs

# ---- CPU cgroups (--agent-shares) ------------------------------------------------------------
CG_DIR='' CG_FILE='' CGROUPS=()
cg_find() { # the cpu controller's hierarchy: cgroup v2 if it has the controller, else v1's
	local mnt
	mnt=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
	if [ -n "$mnt" ] && grep -qw cpu "$mnt/cgroup.controllers" 2>/dev/null; then
		CG_DIR=$mnt CG_FILE=cpu.weight
		grep -qw cpu "$mnt/cgroup.subtree_control" ||
			rw_bail "--agent-shares: cgroup v2's cpu controller is not enabled at $mnt"
		return
	fi
	mnt=$(awk '$9 == "cgroup" && $NF ~ /(^|,)cpu(,|$)/ {print $5; exit}' /proc/self/mountinfo)
	[ -n "$mnt" ] || rw_bail "--agent-shares: no cgroup hierarchy has the cpu controller"
	CG_DIR=$mnt CG_FILE=cpu.shares
}
cg_make() { # cg_make NAME SHARES: the cgroup $CG_DIR/<prefix>NAME, weighted as SHARES
	local d="$CG_DIR/${RW_PREFIX}$1" w=$2
	# The kubelet's own conversion of shares to a weight (cgroup v2).
	[ "$CG_FILE" = cpu.weight ] && w=$((1 + (($2 - 2) * 9999) / 262142))
	mkdir "$d" || rw_bail "--agent-shares: the cgroup $d"
	CGROUPS+=("$d")
	echo "$w" >"$d/$CG_FILE" || rw_bail "--agent-shares: $d/$CG_FILE"
}
cg_enter() { echo "$2" >"$CG_DIR/${RW_PREFIX}$1/cgroup.procs"; } # cg_enter NAME PID
cg_cleanup() { # what is left in them back to the top, then each removed
	local d pid
	for d in "${CGROUPS[@]}"; do
		while read -r pid; do echo "$pid" >"$CG_DIR/cgroup.procs"; done <"$d/cgroup.procs"
		rmdir "$d" || echo "# node.sh: could not remove the cgroup $d" >&2
	done
}

cleanup() {
	local ns
	set +e
	# The pods' namespaces are node.py's (ptp's veths go with them).
	for ns in $(ip netns list | awk -v p="$RW_PREFIX" 'index($1, p) == 1 {print $1}'); do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
		RW_NAMESPACES+=("$ns")
	done
	rw_suite_cleanup
	cg_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for x in /usr/lib/cni/ptp /usr/lib/cni/host-local "$BUILD/runwall-cni"; do
	[ -x "$x" ] || rw_bail "$x is missing (make; containernetworking-plugins)"
done

# ---- certificates (a CA signing the server's and the node's), the server, the agent ----------
mkdir -p "$C"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=ca" \
	-keyout "$C/ca.key" -out "$C/ca.crt" 2>/dev/null || rw_bail "openssl: the CA"
for n in server node; do
	case $n in
	server) ext="subjectAltName=IP:$SRV
extendedKeyUsage=serverAuth" ;;
	node) ext="extendedKeyUsage=clientAuth" ;;
	esac
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$n" \
		-keyout "$C/$n.key" -out "$C/$n.csr" 2>/dev/null
	printf '%s\n' "$ext" >"$C/$n.ext"
	openssl x509 -req -in "$C/$n.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial \
		-days 2 -extfile "$C/$n.ext" -out "$C/$n.crt" 2>/dev/null || rw_bail "openssl: $n"
done
echo "token-$ID" >"$C/token"

rw_node_up || rw_bail "the node did not come up"
if [ -n "$AGENT_SHARES" ]; then
	if ! [[ $AGENT_SHARES =~ ^[0-9]+$ ]] || [ "$AGENT_SHARES" -lt 2 ]; then
		rw_bail "--agent-shares: $AGENT_SHARES is not a whole number of shares, 2 or more"
	fi
	cg_find
	cg_make agent "$AGENT_SHARES"
	cg_make load 1024
fi
echo '{"revision": 1, "runs": []}' >"$RW_WORK/state.json"
rw_bg "$RW_WORK/server.log" ip netns exec "$RW_SVC" "$RW_PY" "$RW_ROOT/tests/policy_server.py" \
	--listen "$SRV:$PORT" --cert "$C/server.crt" --key "$C/server.key" --client-ca "$C/ca.crt" \
	--token-file "$C/token" --state "$RW_WORK/state.json" --save-every 0.5 --control "$CTL" \
	--heartbeat 1 --ready "$RW_WORK/server.ready"
[ -z "$AGENT_SHARES" ] || cg_enter load "$RW_LAST_PID"
rw_wait_file "$RW_WORK/server.ready" || rw_bail "the policy server did not start"
# Each pod's refusals (10 a second) at its event budget; conntrack at its defaults (512 tables
# of 8 192 flows: the 250 pods and the churn's).
rw_agent_start --ifprefix veth --node "node-$ID" --listen "$HTTP" --event-rate 10/20 \
	--policy-url "https://$SRV:$PORT/v1/watch" --policy-ca "$C/ca.crt" \
	--policy-cert "$C/node.crt" --policy-key "$C/node.key" --policy-token-file "$C/token"
rw_agent_wait 60 || rw_bail "the agent did not listen"
[ -z "$AGENT_SHARES" ] || cg_enter agent "$RW_AGENT_PID"

# ptp + host-local handing out 10.1.16.0/20, then runwall-cni (test_cni's conflist).
jq -n --arg data "$RW_WORK/ipam" --arg bpffs "$RW_BPFFS" '{
	cniVersion: "1.0.0", name: "rwbench-node",
	plugins: [
		{type: "ptp", ipMasq: false, ipam: {type: "host-local", dataDir: $data,
			ranges: [[{subnet: "10.1.16.0/20"}]], routes: [{dst: "0.0.0.0/0"}]}},
		{type: "runwall-cni", bpffs: $bpffs, ifPrefix: "veth"}
	]}' >"$RW_WORK/conflist"

cgs="one for all"
[ -z "$AGENT_SHARES" ] || cgs="the agent's $AGENT_SHARES shares, the load's 1024 ($CG_DIR, $CG_FILE)"
# Whether synchronize_rcu() is expedited: every map-in-map write and tcx attach waits for one.
RCU_EXPEDITED=$(cat /sys/kernel/rcu_expedited 2>/dev/null || echo unknown)
echo "# node: $PODS pods, 1000 runs, ${PHASE}s phases; CPU cgroups: $cgs; rcu_expedited: $RCU_EXPEDITED; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# In the load's cgroup from its first instruction (the shell enters it, then becomes node.py).
in_load=()
# shellcheck disable=SC2016 # expanded by that shell
[ -z "$AGENT_SHARES" ] || in_load=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG_DIR/${RW_PREFIX}load")
"${in_load[@]}" "$RW_PY" "$HERE/node.py" --prefix "$RW_PREFIX" --node-ns "$RW_NODE" --svc-ns "$RW_SVC" \
	--ctl "$CTL" --conflist "$RW_WORK/conflist" --cni-path "/usr/lib/cni:$BUILD" \
	--agent-pid "$RW_AGENT_PID" --pods "$PODS" --phase "$PHASE" --out "$RW_WORK/load.json" ||
	rw_bail "the load (node.py) failed"
load=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- what the agent says, timed --------------------------------------------------------------
ms_of() { # ms_of CMD...: CMD's wall time in ms, its stdout in $RW_WORK/last
	local t0 t1
	t0=$(date +%s%N)
	"$@" >"$RW_WORK/last"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
st_ms=$(ms_of rw status) || rw_bail "runwall status"
stj_ms=$(ms_of rw -j status) || rw_bail "runwall -j status"
cp "$RW_WORK/last" "$RW_WORK/status.json"
m_ms=$(ms_of rw_node_exec curl -sS -m 10 "http://$HTTP/metrics") || rw_bail "/metrics"
m_bytes=$(wc -c <"$RW_WORK/last")
cp "$RW_WORK/last" "$RW_WORK/metrics"
mapmem=$("$RW_ROOT/scripts/map-memory.sh" "$RW_BPFFS") || rw_bail "scripts/map-memory.sh"
jq -n --slurpfile l "$RW_WORK/load.json" --slurpfile s "$RW_WORK/status.json" \
	--arg load "$load" --arg rcu "$RCU_EXPEDITED" --argjson st "$st_ms" --argjson stj "$stj_ms" --argjson m "$m_ms" \
	--argjson mb "$m_bytes" --arg mem "$mapmem" --arg shares "$AGENT_SHARES" \
	--arg ev "$(grep -E '^runwall_(events|ring|revoke_probes)[a-z_]*(total)?(\{[^}]*\})? ' "$RW_WORK/metrics" || true)" \
	'$l[0] + {cpu_shares: (if $shares == "" then null else {agent: ($shares | tonumber), load: 1024} end),
	  loadavg: $load, rcu_expedited: $rcu, status_ms: $st, status_json_ms: $stj, metrics_ms: $m,
	  metrics_bytes: $mb, events: $s[0].events, events_metrics: ($ev | split("\n")),
	  map_memory: ($mem | split("\n"))}' >"$OUT" || rw_bail "the report"

jq -r '
	def f(s): if s == null then "-" else "\(s.p50) / \(s.p99) (n \(s.n))" end;
	"# load average at the end: \(.loadavg); CPU shares: \(.cpu_shares // "one cgroup for all")",
	"# CNI ADD, runwall-cni own ms p50/p99: bound pods \(f(.cni_add_bound_ms)), churn \(f(.cni_add_ms))",
	"# churn: \(.churn.adds) ADD, \(.churn.dels) DEL, \(.churn.rate) ADD/s",
	(.claims[] | "# claims \(.rate)/s: claim->ack ms \(f(.claim_to_ack_ms)), agent queued_ms \(f(.agent_queued_ms)) (its work \(f(.agent_work_ms)), its wait \(f(.agent_wait_ms)); changes per apply \(f(.agent_batch))), claim->enforced ms \(f(.claim_to_enforced_ms)), never enforced \(.probes_never_enforced), acks missing \(.acks_missing) refused \(.acks_refused), sent \(.achieved_per_s)/s, agent CPU \(.cpu_pct)%"),
	"# agent CPU % of a core: steady \(.steady_cpu_pct), churn \(.churn_cpu_pct); VmRSS \(.VmRSS_kib) KiB, VmHWM \(.VmHWM_kib_end) KiB at the end",
	"# traffic: \(.traffic)",
	"# events (status): \(.events | tojson)",
	(.events_metrics[] | select(. != "") | "#   \(.)"),
	"# /metrics: \(.metrics_ms) ms, \(.metrics_bytes) bytes; runwall status \(.status_ms) ms, -j \(.status_json_ms) ms",
	"# map memory:", (.map_memory[] | "#   \(.)")' "$OUT"
echo "ok 1 - the node came up and the figures were read ($OUT)"
echo "1..1"
