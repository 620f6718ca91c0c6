#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# demo.sh: a small runwall node to look at, on this machine, in network namespaces.
#
#   scripts/demo.sh up [BUILD_DIR]    (make demo)        build it, run the agent, show verdicts
#   scripts/demo.sh down              (make demo-clean)  remove all of it
#
# As root. The node is the end-to-end test's (tests/netns/lib.sh) with fixed names: namespaces
# rwdemo-node (the EKS host, where the agent runs), rwdemo-svc (the platform's services and "the
# internet" behind it), rwdemo-a and rwdemo-b (two dual-stack sandbox pods wired like the VPC
# CNI wires them: an IPv4 /32 and an IPv6 /128 each, the IPv6 default route via the host veth's
# link-local address). The policy is manifests/policy-default.json with the same services,
# inbound peers and pods in IPv6 beside them (DEMO_IPV6 below). Pins in /sys/fs/bpf/runwall-demo, the socket /run/runwall-demo.sock, logs and pid files
# in /run/runwall-demo. Nothing outside those namespaces is touched: no interface, address or
# route of the machine. `up` twice tears the first one down.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=/run/runwall-demo

# shellcheck source=tests/netns/lib.sh
source "$ROOT/tests/netns/lib.sh"
RW_NODE=rwdemo-node
RW_SVC=rwdemo-svc
rw_names rwdemo-
RW_WORK=$STATE
RW_BPFFS=/sys/fs/bpf/runwall-demo
RW_SOCK=/run/runwall-demo.sock
RW_DETACH=1 # the listeners and the agent outlive this script
# The live traffic page: the agent listens on the node's loopback; a forwarder on this machine's
# loopback (a socket, no interface or route) reaches it, so that a browser here can open it.
DEMO_PORT=${RW_DEMO_PORT:-9100}
DEMO_NS=(rwdemo-node rwdemo-svc rwdemo-a rwdemo-b)
# The IPv6 half: the services on ULA addresses (as an IPv6 cluster's), metadata, "the internet".
DEMO_SVC6=(fdaa:20::10 fdaa:20::11 fdaa:20::12 fdaa:20::13 fdaa:20::30 fdaa:20::53 fd00:ec2::254 64:ff9b::a00:505
	2a00:1450:4001::93)
DEMO_A6=2600:1f14:abc:1::3
DEMO_B6=2600:1f14:abc:1::4
DEMO_IPV6='.deny += ["2600:1f14:abc:1::/64"] |
	.services += [{"name": "egress-proxy-6", "ip": "fdaa:20::10", "tcp": [443, 8443, 3128]},
		{"name": "identity-broker-6", "ip": "fdaa:20::11", "tcp": [3443]},
		{"name": "app-tier-6", "ip": "fdaa:20::12", "tcp": [3000]},
		{"name": "drive-gateway-6", "ip": "fdaa:20::13", "tcp": [8080]}] |
	.inbound += [{"name": "app-tier-6", "cidr": "fdaa:20::12/128", "tcp": [4096, 4098, 4999, 6085]}] |
	(.runs[] | select(.id == "run-7f3a") | .pods) += ["2600:1f14:abc:1::3"] |
	(.runs[] | select(.id == "run-9c01") | .pods) += ["2600:1f14:abc:1::4"]'

bold() { printf '\033[1m%s\033[0m\n' "$*"; }

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "demo.sh: run as root (network namespaces, BPF)" >&2
		exit 1
	fi
}

# Whether pid $1 is still the process we started ($2: a word of its command line), so that a
# recycled pid is never signalled.
is_ours() {
	[ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "$2"
}

down() {
	local f pid ns
	need_root
	# The agent first, politely: it exits leaving enforcement in place, which goes below.
	pid=$(cat "$STATE/agent.pid" 2>/dev/null || true)
	if is_ours "$pid" "runwall-demo"; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	fi
	for f in "$STATE"/*.pid; do
		[ -e "$f" ] || continue
		pid=$(cat "$f")
		is_ours "$pid" "listener.py\|probe.py\|runwall\|netns_forward.py" && kill "$pid" 2>/dev/null || true
	done
	# Whatever still runs inside the demo's namespaces was started by this script.
	for ns in "${DEMO_NS[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill "$pid" 2>/dev/null || true
		done
	done
	for ns in "${DEMO_NS[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	# The veths went with the namespaces, and their tcx links with them; the maps stay pinned
	# until their files go.
	[ -d "$RW_BPFFS" ] && rm -rf "$RW_BPFFS"
	rm -f "$RW_SOCK"
	rm -rf "$STATE"
}

# One attempt: what is tried, then the verdict as runwall reports it (the `runwall drops --all`
# running meanwhile prints it when the agent drains the ring), then what the sandbox saw.
try() {
	local from=$1 what=$2 proto=$3 dst=$4 port=$5 src=${6:-} res
	printf '\n\033[1m> %s\033[0m\n' "$what"
	res=$(rw_probe "$from" "$proto" "$dst" "$port" ${src:+--src "$src"} --timeout 0.7)
	sleep 0.3 # the agent drains the ring on a short timer
	case "$res" in
	ok) printf '  \033[32m%s\033[0m\n' "connected, data both ways" ;;
	refused) printf '  \033[31m%s\033[0m\n' "refused at once: runwall answered into the pod (a reset, or ICMP unreachable)" ;;
	timeout) printf '  \033[31m%s\033[0m\n' "no answer: dropped" ;;
	*) printf '  %s\n' "$res" ;;
	esac
}

# A tool's view of a refusal: curl from sandbox A to a host its run does not allow fails at once
# with "Connection refused" (runwall's reset), where it would otherwise wait out TCP's timeout.
try_curl() {
	local t0 t1 out
	printf '\n\033[1m> %s\033[0m\n' "sandbox A: curl https://93.184.216.34/ (not in its run's rules)"
	t0=${EPOCHREALTIME/./}
	out=$(ip netns exec "${RW_PREFIX}a" curl -sS --max-time 30 -o /dev/null https://93.184.216.34/ 2>&1 || true)
	t1=${EPOCHREALTIME/./}
	printf '  \033[31m%s\033[0m (after %d ms)\n' "$out" $(((t1 - t0) / 1000))
}

up() {
	local build=${1:-build} policy=$STATE/policy.json cli
	need_root
	case "$build" in /*) ;; *) build=$ROOT/$build ;; esac
	RW_RUNWALL=$build/runwall
	if [ ! -x "$RW_RUNWALL" ]; then
		echo "demo.sh: no $RW_RUNWALL: run make first" >&2
		exit 1
	fi
	for tool in "$RW_PY" ip nsenter; do
		command -v "$tool" >/dev/null || {
			echo "demo.sh: $tool is missing (scripts/setup.sh installs it)" >&2
			exit 1
		}
	done
	"$ROOT/scripts/bpffs-mount.sh"

	if ip netns list | grep -q '^rwdemo-' || [ -e "$STATE" ] || [ -e "$RW_BPFFS" ]; then
		echo "demo.sh: removing the previous demo first"
		down
	fi
	mkdir -p "$STATE"
	# A failure half way leaves nothing behind.
	trap 'echo "demo.sh: failed; cleaning up" >&2; down' ERR

	bold "== a node: rwdemo-node, its services behind it (rwdemo-svc), two sandbox pods"
	rw_node_up
	rw_node_dual_stack "${DEMO_SVC6[@]}"
	rw_sandbox6_add a eniaaaa0001 "$DEMO_A6" 10.1.2.3
	rw_sandbox6_add b enibbbb0002 "$DEMO_B6" 10.1.2.4
	echo "  rwdemo-a  pod 10.1.2.3 and $DEMO_A6 on eniaaaa0001 (run-7f3a, egress allowlist)"
	echo "  rwdemo-b  pod 10.1.2.4 and $DEMO_B6 on enibbbb0002 (run-9c01, egress open)"
	jq "$DEMO_IPV6" "$ROOT/manifests/policy-default.json" >"$policy"

	bold "== the agent (log: $STATE/agent.log)"
	rw_agent_start --ifprefix eni,vlan -v --listen "127.0.0.1:$DEMO_PORT" --node rwdemo-node
	rw_agent_wait
	setsid "$RW_PY" "$ROOT/scripts/netns_forward.py" --listen "127.0.0.1:$DEMO_PORT" \
		--netns /run/netns/rwdemo-node --to "127.0.0.1:$DEMO_PORT" >"$STATE/forward.log" 2>&1 \
		</dev/null &
	echo $! >"$STATE/forward.pid"
	sleep 0.3
	rw apply "$policy" | sed 's/^/  /'

	bold "== traffic, and the verdicts as runwall reports them (runwall drops --all)"
	rw_cmd
	"${RW_CMD[@]}" drops --all &
	local drops_pid=$!
	sleep 0.5
	try a "sandbox A -> egress proxy 172.20.0.10:443" tcp 172.20.0.10 443 ""
	try a "sandbox A -> identity broker 172.20.0.11:3443 (only its identity sidecar may)" tcp 172.20.0.11 3443 ""
	try a "sandbox A -> the internet 93.184.216.34:443" tcp 93.184.216.34 443 ""
	try_curl
	try a "sandbox A -> instance metadata 169.254.169.254:80" tcp 169.254.169.254 80 ""
	try a "sandbox A -> cluster DNS 172.20.0.53:53/udp" udp 172.20.0.53 53 ""
	try a "sandbox A -> a private host 10.0.5.5:443" tcp 10.0.5.5 443 ""
	try b "sandbox B (open mode) -> the internet 93.184.216.34:443" tcp 93.184.216.34 443 ""
	try svc "app tier 172.20.0.12 -> sandbox A harness :4096" tcp 10.1.2.3 4096 172.20.0.12
	try svc "connectors 172.20.0.30 -> sandbox A :4096" tcp 10.1.2.3 4096 172.20.0.30
	try a "sandbox A -> egress proxy [fdaa:20::10]:443 (IPv6)" tcp fdaa:20::10 443 ""
	try a "sandbox A -> instance metadata [fd00:ec2::254]:80 (IPv6)" tcp fd00:ec2::254 80 ""
	try a "sandbox A -> NAT64 of a private host [64:ff9b::a00:505]:443" tcp 64:ff9b::a00:505 443 ""
	try a "sandbox A -> the internet [2a00:1450:4001::93]:443 (IPv6)" tcp 2a00:1450:4001::93 443 ""
	try b "sandbox B (open mode) -> the internet [2a00:1450:4001::93]:443 (IPv6)" tcp 2a00:1450:4001::93 443 ""
	try svc "app tier fdaa:20::12 -> sandbox A harness [$DEMO_A6]:4096" tcp "$DEMO_A6" 4096 fdaa:20::12
	kill "$drops_pid" 2>/dev/null || true
	wait "$drops_pid" 2>/dev/null || true
	trap - ERR

	cli="$RW_RUNWALL --bpffs $RW_BPFFS --socket $RW_SOCK"
	bold "== the live traffic view: http://127.0.0.1:$DEMO_PORT/"
	cat <<EOF
  Open it in a browser on this machine: a graph of the sandboxes and what they tried, and
  every verdict as it happens. The same agent serves, on the node's loopback:
    http://127.0.0.1:$DEMO_PORT/metrics                     Prometheus
    http://127.0.0.1:$DEMO_PORT/api/events?verdict=drop     recent refusals (JSON)
    http://127.0.0.1:$DEMO_PORT/api/events/stream           the same, live (server-sent events)
    http://127.0.0.1:$DEMO_PORT/api/graph                   sandboxes, destinations, edges
  (127.0.0.1:$DEMO_PORT here is forwarded into rwdemo-node by scripts/netns_forward.py.)
EOF
	bold "== the demo stays up; explore it"
	cat <<EOF
  The CLI needs only the pins and the socket, so it runs from the host:
    $cli status
    $cli counters --run run-7f3a
    $cli drops                      # live refusals; meanwhile, from a sandbox:
    ip netns exec rwdemo-a $RW_PY $RW_PROBE tcp 93.184.216.34 443
    ip netns exec rwdemo-b $RW_PY $RW_PROBE tcp 93.184.216.34 8443
    ip netns exec rwdemo-svc $RW_PY $RW_PROBE tcp 10.1.2.3 4098 --src 172.20.0.20
    ip netns exec rwdemo-a $RW_PY $RW_PROBE tcp fdaa:20::11 3443      # IPv6
    ip netns exec rwdemo-a ip -6 neigh                                # the gateway, by NDP
    $cli explain --pod 10.1.2.3 93.184.216.34 443 tcp
    $cli map list
  Change the policy: edit a copy of $policy (the default policy, dual-stack), raise
  "revision", then
    $cli apply my-policy.json
  What the kernel has attached (in the node's network namespace; nsenter, not
  \`ip netns exec\`, which remounts /sys and hides /sys/fs/bpf):
    nsenter --net=/run/netns/rwdemo-node $RW_PY $RW_PROBE hooks --dev eniaaaa0001
    ip -n rwdemo-node route; ip -n rwdemo-node -6 route
  The agent's log: $STATE/agent.log
  Remove everything: make demo-clean (scripts/demo.sh down)
EOF
}

case "${1:-}" in
up)
	shift
	up "$@"
	;;
down)
	down
	echo "demo.sh: the demo is gone"
	;;
*)
	echo "usage: scripts/demo.sh up [BUILD_DIR] | down" >&2
	exit 2
	;;
esac
