# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# lib.sh: a test node for runwall, built entirely in network namespaces (sourced, not run).
#
# The machine's own interfaces, addresses and routes are never touched: every link is created
# inside a namespace made here (`ip -n NS link add ... peer ... netns OTHER`), and every address
# traffic goes to lives in one of them.
#
#   NODE ns (the EKS host)            SANDBOX ns (one per pod, wired like the VPC CNI does)
#     eni… / vlan…  <-- veth -->        eth0  POD_IP/32, default via 169.254.1.1 onlink,
#     POD_IP/32 dev eni… scope link           169.254.1.1 -> MAC of eni… (permanent)
#     ip_forward=1, rp_filter=0               listeners on the harness ports
#     svc0 172.31.255.1/30 --veth-->    SERVICES ns (the rest of the world)
#     default via 172.31.255.2            eth0 172.31.255.2/30, default via 172.31.255.1
#                                         every service address on lo, listeners on all of them
#
# runwall runs in the node namespace. bpffs is not per network namespace, but `ip netns exec`
# also makes a private mount namespace and remounts /sys there, which hides /sys/fs/bpf: the
# agent and the CLI are therefore run with `nsenter --net=` (network namespace only), so their
# pins land in the machine's bpffs where a restarted agent finds them again.
#
# Variables (set before rw_node_up; rw_names sets the defaults from a prefix):
#   RW_PREFIX     namespace name prefix, unique per run (e.g. rwe1234-)
#   RW_NODE RW_SVC  the node and services namespaces
#   RW_WORK       a private folder for logs, pid files, snapshots
#   RW_RUNWALL    the runwall binary; RW_BPFFS, RW_SOCK its pin folder and socket
#   RW_DETACH     1 (default): start background processes in their own session (the demo)
#   RW_WAIT_SCALE every wait and timeout is multiplied by it (default 1; tests/run.sh sets 10
#                 under emulation, `make vmtest`): use rw_scale, rw_sleep and rw_wait for them

RW_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Debian's python3 (scripts/setup.sh installs it) rather than whatever PATH finds first.
if [ -z "${RW_PY:-}" ]; then
	if [ -x /usr/bin/python3 ]; then RW_PY=/usr/bin/python3; else RW_PY=$(command -v python3); fi
fi
RW_LISTENER="$RW_LIB_DIR/listener.py"
RW_PROBE="$RW_LIB_DIR/probe.py"

# The services namespace: what each address plays, and the ports every address answers on.
RW_SVC_ADDRS=(
	172.20.0.10	# egress proxy: 443/8443 model route, 3128 forwarding route
	172.20.0.11	# identity broker: 3443
	172.20.0.12	# application tier: 3000; opens connections into sandboxes
	172.20.0.13	# drive gateway: 8080
	172.20.0.20	# Temporal worker: opens connections into sandboxes
	172.20.0.21	# streaming service: opens connections into sandboxes
	172.20.0.30	# connectors service: 8080 (not for sandboxes)
	172.20.0.40	# telemetry gateway: 4317/4318
	172.20.0.53	# cluster DNS: 53 tcp+udp
	52.94.9.5	# a run's own database on a public address (run rules name public ones only): 5432
	169.254.169.254	# instance metadata
	169.254.170.2	# ECS task metadata
	10.0.5.5	# a private host in the VPC
	93.184.216.34	# "the public internet"
	8.8.8.8		# a public DNS resolver
)
RW_SVC_TCP_PORTS=(22 53 80 443 3000 3128 3443 4096 4317 4318 5432 8080 8443)
# UDP listeners are bound per address: a wildcard UDP socket would answer from another source.
RW_SVC_UDP=(172.20.0.53:53 8.8.8.8:53 93.184.216.34:443 172.20.0.10:443)
# What every sandbox listens on: the harness ports, and two that no inbound rule opens.
RW_SANDBOX_TCP_PORTS=(4096 4098 4999 6085 22 8080)

# Waits and timeouts. Under emulation (QEMU TCG) everything takes 10-30 times longer, the
# kernel's own timers (TCP's 1 s SYN RTO, ARP) excepted.
RW_WAIT_SCALE=${RW_WAIT_SCALE:-1}
case "$RW_WAIT_SCALE" in
'' | *[!0-9.]* | .* | *.*.*) echo "lib.sh: RW_WAIT_SCALE='$RW_WAIT_SCALE' is not a positive number" >&2; return 2 ;;
esac
export RW_WAIT_SCALE

# ---- the suite harness: TAP, and what every suite starts with ----------------------------------

# rw_suite_begin NAME PREFIX [BUILD]: the start of a suite. BUILD (default build; relative to the
# repository) holds the binaries. Sets ID (this shell's pid), the namespace names (PREFIX ID -,
# rw_names), RW_RUNWALL, RW_CNI, and a pin folder, socket and work folder of the suite's own
# (rwtest-NAME-ID). The suite runs from the repository's root. TAP lines go to fd 3, the suite's
# stdout, so that `check … >/dev/null` silences only the command checked.
rw_suite_begin() {
	local name=$1 prefix=$2 build=${3:-build}

	RW_ROOT=$(cd "$RW_LIB_DIR/../.." && pwd)
	cd "$RW_ROOT"
	case "$build" in /*) BUILD=$build ;; *) BUILD=$RW_ROOT/$build ;; esac
	ID=$$
	rw_names "$prefix$ID-"
	RW_RUNWALL=$BUILD/runwall
	RW_CNI=$BUILD/runwall-cni
	RW_BPFFS=/sys/fs/bpf/rwtest-$name-$ID
	RW_SOCK=/run/rwtest-$name-$ID.sock
	RW_WORK=$(mktemp -d "/tmp/rwtest-$name-$ID.XXXXXX")
	exec 3>&1
	T=0
	FAILED=0
	rw_need "$RW_RUNWALL"
}

# rw_need FILE: the suite bails out when the build has not made FILE (RW_CNI, for the suites
# that run runwall-cni).
rw_need() { [ -x "$1" ] || { echo "Bail out! $1 is missing: run make" >&3; exit 1; }; }

# rw_bench_begin NAME PREFIX USAGE BUILD OUT…: a benchmark's start: rw_suite_begin NAME PREFIX
# BUILD, and RW_OUT, the file its JSON rows go to (OUT, from the repository's root). Without
# BUILD or OUT it says "usage: USAGE" and exits 2, before it makes anything.
rw_bench_begin() {
	[ $# -ge 5 ] || { echo "usage: $3" >&2; exit 2; }
	rw_suite_begin "$1" "$2" "$4"
	RW_OUT=$(realpath -m "$5")
}

ok() { T=$((T + 1)); echo "ok $T - $*" >&3; }
not_ok() { T=$((T + 1)); FAILED=$((FAILED + 1)); echo "not ok $T - $*" >&3; }
# diag TEXT…: a TAP comment; with no arguments, standard input indented under one.
diag() { if [ $# -gt 0 ]; then echo "# $*" >&3; else sed 's/^/#   /' >&3; fi; }
# check DESCRIPTION COMMAND…: ok when the command succeeds.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}
section() { echo "# ---- $*" >&3; }

# rw_batch SPEC OUTDIR TIMEOUT [ARG...]: the spec's attempts (lines FROM ID PROTO DST PORT SRC
# ..., # comments), each FROM's through `probe.py batch --timeout TIMEOUT ARG...` in its
# namespace, all FROMs at once; FROM's results in OUTDIR/FROM.jsonl. TIMEOUT is scaled.
rw_batch() {
	local spec=$1 dir=$2 timeout from pids=()
	timeout=$(rw_scale "$3")
	shift 3
	mkdir -p "$dir"
	for from in $(awk '!/^#/ && NF {print $1}' "$spec" | sort -u); do
		awk -v f="$from" '$1 == f {print $2, $3, $4, $5, ($6 == "-" ? "" : $6)}' "$spec" |
			rw_probe "$from" batch --timeout "$timeout" "$@" >"$dir/$from.jsonl" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
}

# rw_judge ARGS...: runs tests/netns/expect.py ARGS and numbers its PASS/FAIL/NOTE lines as TAP;
# its METRIC lines go to $RW_WORK/metrics.
rw_judge() {
	local out=$RW_WORK/judge.out
	if ! "$RW_PY" "$RW_ROOT/tests/netns/expect.py" "$@" >"$out" 2>"$out.err"; then
		not_ok "expect.py $1 failed"
		sed 's/^/#   /' "$out.err" >&3
	fi
	rw_tap_lines "$out"
}
# rw_tap_lines FILE: a checker's tab-separated lines as TAP: PASS WHAT, FAIL WHAT [WHY] and
# NOTE WHAT; METRIC NAME VALUE goes to $RW_WORK/metrics.
rw_tap_lines() {
	local st what why
	while IFS=$'\t' read -r st what why; do
		case "$st" in
		PASS) ok "$what" ;;
		FAIL)
			not_ok "$what"
			[ -z "$why" ] || diag "    $why"
			;;
		NOTE) diag "$what" ;;
		METRIC) echo "$what $why" >>"$RW_WORK/metrics" ;;
		esac
	done <"$1"
}
# rw_bail TEXT…: the suite cannot go on: a TAP bail-out with the agent log's last lines.
rw_bail() {
	echo "Bail out! $*" >&3
	[ ! -f "$RW_WORK/agent.log" ] || tail -n 20 "$RW_WORK/agent.log" | diag
	exit 1
}
# rw_suite_cleanup: a suite's EXIT trap when the node is all it made: the node down, the work
# folder gone (rw_work_done).
rw_suite_cleanup() {
	set +e
	rw_node_down
	rw_work_done
}
# rw_work_done [NOTE]: the work folder removed; RW_KEEP=1 keeps it, for a look after a failure,
# and says so (NOTE, default "files kept in $RW_WORK").
rw_work_done() {
	if [ "${RW_KEEP:-0}" = 1 ]; then
		echo "# ${1:-files kept in $RW_WORK}" >&3
	else
		rm -rf "$RW_WORK"
	fi
}
# rw_diag_on_failure RC N: when a check failed or the suite ends with RC other than 0, the agent
# log's last N lines but the per-event debug lines, as TAP comments.
rw_diag_on_failure() {
	[ "$FAILED" -ne 0 ] || [ "$1" -ne 0 ] || return 0
	diag "agent log (last $2 lines but the per-event debug lines):"
	grep -Ev ' debug [0-9]{4}-' "$RW_WORK/agent.log" 2>/dev/null | tail -n "$2" | sed 's/^/#   /' >&3 || true
}
# rw_trap_abort: INT and TERM end the suite (130); a command that fails outside a check (the ERR
# trap, with set -E) is a failure named by its line, then the plan.
rw_trap_abort() {
	trap 'exit 130' INT TERM
	trap 'not_ok "aborted at line $LINENO: $BASH_COMMAND"; echo "1..$T" >&3' ERR
}
# rw_require DESCRIPTION COMMAND…: a precondition: when COMMAND fails, the suite ends with
# "not ok N - precondition: DESCRIPTION" and its plan.
rw_require() {
	local what=$1
	shift
	"$@" >/dev/null 2>&1 && return 0
	not_ok "precondition: $what"
	echo "1..$T" >&3
	exit 1
}
# rw_require_tools TOOL…: each TOOL is installed (rw_require).
rw_require_tools() {
	local tool
	for tool in "$@"; do rw_require "$tool is installed" command -v "$tool"; done
}
# The CLI's JSON, or nothing when it fails (a check then fails on empty input: rw_jq_true).
rw_status_json() { rw -j status 2>/dev/null || true; }
rw_counters_json() { rw -j counters 2>/dev/null || true; }
rw_mono_ns() { "$RW_PY" -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC))'; }
# rw_suite_end: the plan, and the suite's exit status (last command of a suite).
rw_suite_end() {
	echo "1..$T" >&3
	[ "$FAILED" -eq 0 ] || { echo "# $FAILED of $T failed" >&3; return 1; }
}

# rw_jq_true [--arg|--argjson|--slurpfile NAME VALUE]... FILTER [FILE]: whether FILTER is true of
# the JSON document in FILE or on standard input. Not `jq -e`: jq 1.6 exits 0 when there is no
# input at all (a command that failed and printed nothing), which would pass any check.
rw_jq_true() {
	local opts=()
	while [[ "${1:-}" == --arg || "${1:-}" == --argjson || "${1:-}" == --slurpfile ]]; do
		opts+=("$1" "$2" "$3")
		shift 3
	done
	jq -n -e "${opts[@]}" "input | ($1)" "${@:2}" >/dev/null 2>&1
}

# rw_scale SECONDS: SECONDS x RW_WAIT_SCALE
rw_scale() { awk -v s="$1" -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%.3f\n", s * k}'; }
rw_sleep() { sleep "$(rw_scale "$1")"; }
# rw_wait SECONDS CMD...: run CMD until it succeeds, every 50 ms, for at most SECONDS x
# RW_WAIT_SCALE (a deadline, not a number of tries: under emulation one try of a python helper
# takes seconds). CMD runs at least once, and once more after the deadline.
rw_wait() {
	local end
	end=$(awk -v s="$1" -v k="$RW_WAIT_SCALE" -v t="${EPOCHREALTIME/./}" 'BEGIN {printf "%.0f\n", t + s * k * 1e6}')
	shift
	while :; do
		"$@" && return 0
		[ "${EPOCHREALTIME/./}" -lt "$end" ] || break
		sleep 0.05
	done
	"$@"
}

RW_NODE_LINK=172.31.255.1
RW_SVC_LINK=172.31.255.2

declare -gA RW_SB_NS=() RW_SB_IF=() RW_SB_IP=()
RW_NAMESPACES=()
RW_PIDS=()
RW_AGENT_PID=
RW_DETACH=${RW_DETACH:-0}

rw_names() {
	RW_PREFIX=$1
	RW_NODE=${RW_NODE:-${RW_PREFIX}node}
	RW_SVC=${RW_SVC:-${RW_PREFIX}svc}
}

rw_log() { echo "# $*" >&2; }

# Run in a namespace. `rw_in NS cmd…` for ordinary programs (python, sysctl); runwall and
# bpftool go through rw_node (see above).
rw_in() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}

# runwall in the node namespace, with this node's pins and socket: `rw status`, or as an argv
# for rw_bg and other commands that exec it: `rw_bg OUT "${RW_CMD[@]}" drops`.
rw_cmd() {
	RW_CMD=(nsenter "--net=/run/netns/$RW_NODE" -- "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK")
}

rw() {
	rw_cmd
	"${RW_CMD[@]}" "$@"
}

rw_node_exec() {
	nsenter --net="/run/netns/$RW_NODE" -- "$@"
}

# rw_subscribers: the agent's count of event subscribers (`runwall drops` streams); nothing when
# its status cannot be read.
rw_subscribers() { rw_status_json | jq -r '.events.subscribers // empty'; }
rw_subscribers_above() {
	local n
	n=$(rw_subscribers)
	[ -n "$n" ] && [ "$n" -gt "$1" ]
}
# rw_drops_bg OUT ARGS...: `runwall -j drops ARGS` in the background into OUT (pid in
# RW_LAST_PID), returning once the agent counts one more event subscriber (10 s, scaled), so
# that the events of what the suite does next are on the stream. Fails when it does not.
rw_drops_bg() {
	local out=$1 n
	shift
	n=$(rw_subscribers)
	[ -n "$n" ] || { echo "lib.sh: rw_drops_bg: the agent's status has no events.subscribers" >&2; return 1; }
	rw_cmd
	rw_bg "$out" "${RW_CMD[@]}" -j drops "$@"
	rw_wait 10 rw_subscribers_above "$n" || {
		echo "lib.sh: runwall drops $* did not subscribe: $(cat "$out")" >&2
		return 1
	}
}

# Start a background process and remember its pid (so that cleanup ends exactly what we
# started). Its stdout goes to $1.
rw_bg() {
	local out=$1
	shift
	if [ "$RW_DETACH" = 1 ]; then
		setsid "$@" >"$out" 2>&1 </dev/null &
	else
		"$@" >"$out" 2>&1 </dev/null &
	fi
	RW_LAST_PID=$!
	RW_PIDS+=("$RW_LAST_PID")
}

rw_ns_add() {
	ip netns add "$1"
	RW_NAMESPACES+=("$1")
	# IPv6 off before any link exists: no router solicitations or DAD on the veths, whose
	# drops (unsupported-l2) would blur the exact counts the tests compare.
	rw_in "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$1" link set lo up
}

# rw_wait_file FILE [SECONDS]: wait (5 s, scaled) until FILE exists and is not empty.
rw_wait_file() {
	rw_wait "${2:-5}" test -s "$1"
}

rw_start_listener() {
	local ns=$1 name=$2
	shift 2
	rm -f "$RW_WORK/$name.ready"
	rw_bg "$RW_WORK/$name.log" ip netns exec "$ns" "$RW_PY" "$RW_LISTENER" \
		--ready "$RW_WORK/$name.ready" "$@"
	echo "$RW_LAST_PID" >"$RW_WORK/$name.pid"
	rw_wait_file "$RW_WORK/$name.ready" || {
		echo "lib.sh: listener $name did not start:" >&2
		cat "$RW_WORK/$name.log" >&2
		return 1
	}
}

# rw_neigh_scale IFNAME: under RW_WAIT_SCALE > 1, the node's neighbour entries on IFNAME age
# as much slower as everything else. Natively (the kernel's defaults) an entry the traffic
# confirmed stays reachable 15-45 s and a stale one is probed 5 s after its next use: longer
# than the tests take between two phases. Under emulation the same phases take minutes, and
# the node would send ARP probes into a pod while runwall drops everything there (not ready, or
# bound to no pod): drops no attempt made, that the exact counter checks would count. The ARP
# retransmission time (1 s) is left alone: it is what a pod in no run sees (unknown-source).
rw_neigh_scale() {
	[ "$RW_WAIT_SCALE" != 1 ] || return 0
	rw_in "$RW_NODE" sysctl -qw \
		"net.ipv4.neigh.$1.base_reachable_time_ms=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 30000 * k}')" \
		"net.ipv4.neigh.$1.delay_first_probe_time=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 5 * k + 0.5}')"
}

# The node and the services behind it.
rw_node_up() {
	local a p args=()

	mkdir -p "$RW_WORK"
	rw_ns_add "$RW_NODE"
	rw_in "$RW_NODE" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.default.rp_filter=0
	rw_ns_add "$RW_SVC"
	ip -n "$RW_NODE" link add svc0 type veth peer name eth0 netns "$RW_SVC"
	ip -n "$RW_NODE" addr add "$RW_NODE_LINK/30" dev svc0
	ip -n "$RW_NODE" link set svc0 up
	ip -n "$RW_NODE" route add default via "$RW_SVC_LINK"
	ip -n "$RW_SVC" addr add "$RW_SVC_LINK/30" dev eth0
	ip -n "$RW_SVC" link set eth0 up
	ip -n "$RW_SVC" route add default via "$RW_NODE_LINK"
	for a in "${RW_SVC_ADDRS[@]}"; do
		ip -n "$RW_SVC" addr add "$a/32" dev lo
	done
	for p in "${RW_SVC_TCP_PORTS[@]}"; do
		args+=(--tcp "0.0.0.0:$p")
	done
	for a in "${RW_SVC_UDP[@]}"; do
		args+=(--udp "$a")
	done
	rw_start_listener "$RW_SVC" services "${args[@]}"
}

# rw_pod_wire NODE_NS POD_NS IFNAME POD_IP: the pod's eth0 (the peer of the node's IFNAME)
# addressed and routed through the gateway 169.254.1.1, the veth up and the /32 route to it, as
# the VPC CNI wires a pod.
rw_pod_wire() {
	local node=$1 ns=$2 ifname=$3 ip=$4 mac

	mac=$(ip -n "$node" -o link show "$ifname" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
	ip -n "$ns" addr add "$ip/32" dev eth0
	ip -n "$ns" link set eth0 up
	# The gateway's neighbour entry before the routes: a pod that is already sending (the
	# fail-closed test's) must never ARP for 169.254.1.1.
	ip -n "$ns" neigh replace 169.254.1.1 dev eth0 lladdr "$mac" nud permanent
	ip -n "$ns" route add 169.254.1.1 dev eth0 scope link
	ip -n "$ns" route add default via 169.254.1.1 dev eth0 onlink
	ip -n "$node" link set "$ifname" up
	ip -n "$node" route add "$ip/32" dev "$ifname" scope link
}

# rw_sandbox_add NAME IFNAME POD_IP: a sandbox pod wired like the VPC CNI wires one. The host
# side veth appears in the node first (a running agent attaches to it, deny-all), then the /32
# route binds the pod IP to it.
rw_sandbox_add() {
	local name=$1 ifname=$2 ip=$3 ns=${RW_PREFIX}$1 p args=()

	# The namespace may exist already (a test that starts something in it before it is wired).
	[ -e "/run/netns/$ns" ] || rw_ns_add "$ns"
	RW_SB_NS[$name]=$ns
	RW_SB_IF[$name]=$ifname
	RW_SB_IP[$name]=$ip
	ip -n "$RW_NODE" link add "$ifname" type veth peer name eth0 netns "$ns"
	rw_neigh_scale "$ifname"
	rw_pod_wire "$RW_NODE" "$ns" "$ifname" "$ip"
	for p in "${RW_SANDBOX_TCP_PORTS[@]}"; do
		args+=(--tcp "0.0.0.0:$p")
	done
	rw_start_listener "$ns" "sandbox-$name" "${args[@]}"
}

# The sandbox's veth goes away (the pod is deleted): its listener dies with the namespace.
rw_sandbox_del() {
	local name=$1 ns=${RW_SB_NS[$1]} pid

	pid=$(cat "$RW_WORK/sandbox-$name.pid" 2>/dev/null || true)
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
	unset "RW_SB_NS[$name]" "RW_SB_IF[$name]" "RW_SB_IP[$name]"
}

# Probes from a sandbox (or the services namespace: NAME "svc").
rw_ns_of() {
	if [ "$1" = svc ]; then echo "$RW_SVC"; elif [ "$1" = node ]; then echo "$RW_NODE"; else echo "${RW_SB_NS[$1]}"; fi
}

# rw_udp_send SANDBOX HOST PORT COUNT: COUNT UDP datagrams from the sandbox to HOST:PORT (IPv4
# or IPv6), each from a socket of its own (a new flow each).
rw_udp_send() {
	rw_in "$(rw_ns_of "$1")" "$RW_PY" -c '
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
for i in range(n):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.sendto(b"x", (host, port))
    s.close()' "$2" "$3" "$4"
}

rw_probe() {
	local ns
	ns=$(rw_ns_of "$1")
	shift
	ip netns exec "$ns" "$RW_PY" "$RW_PROBE" "$@"
}

# The agent, in the node namespace. Extra arguments go to `runwall agent`.
rw_agent_start() {
	local pre=()
	[ "$RW_DETACH" = 1 ] && pre=(setsid)
	rw_cmd
	"${pre[@]}" "${RW_CMD[@]}" agent "$@" >>"$RW_WORK/agent.log" 2>&1 </dev/null &
	RW_AGENT_PID=$!
	echo "$RW_AGENT_PID" >"$RW_WORK/agent.pid"
}

# rw_agent_bound N: the agent is ready (a snapshot applied) and has N sandboxes bound to pods.
rw_agent_bound() {
	[ "$(rw_status_json | jq -r --argjson n "$1" '.ready and ([.sandboxes[]? | select(.pod != null)] | length == $n)')" = true ]
}

# Wait (30 s, scaled) until the agent listens on its socket (a stale socket file refuses
# connections). The wait ends when the agent listens; the bound is for an agent that never
# does: under TCG on a loaded machine, beside another suite, a start took over 100 s.
rw_agent_listening() {
	if ! kill -0 "$RW_AGENT_PID" 2>/dev/null; then
		RW_AGENT_GONE=1
		return 0
	fi
	"$RW_PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
		"$RW_SOCK" 2>/dev/null
}
rw_agent_wait() {
	RW_AGENT_GONE=0
	rw_wait "${1:-30}" rw_agent_listening || return 1
	if [ "$RW_AGENT_GONE" = 1 ]; then
		echo "lib.sh: the agent exited; its log:" >&2
		tail -n 30 "$RW_WORK/agent.log" >&2
		return 1
	fi
}

rw_agent_kill() {
	local sig=${1:-TERM}
	[ -n "$RW_AGENT_PID" ] || return 0
	kill "-$sig" "$RW_AGENT_PID" 2>/dev/null || true
	kill -CONT "$RW_AGENT_PID" 2>/dev/null || true # a stopped agent takes the signal only now
	wait "$RW_AGENT_PID" 2>/dev/null || true
	RW_AGENT_PID=
}

# Everything this node made: processes by pid, namespaces (their veths and tcx links go with
# them), the pins and the socket. Safe to call twice and after a partial rw_node_up.
rw_node_down() {
	local pid ns
	rw_agent_kill TERM
	# A stopped process (a suite's SIGSTOP) holds SIGTERM until SIGCONT: send both, or the
	# wait below never returns.
	for pid in "${RW_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
		kill -CONT "$pid" 2>/dev/null || true
	done
	# Anything still running inside our namespaces was started by us (the names are unique
	# to this run): end it by pid before the namespace goes.
	for ns in "${RW_NAMESPACES[@]}"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill "$pid" 2>/dev/null || true
			kill -CONT "$pid" 2>/dev/null || true
		done
	done
	for pid in "${RW_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	RW_PIDS=()
	for ns in "${RW_NAMESPACES[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	RW_NAMESPACES=()
	if [ -n "${RW_BPFFS:-}" ] && [ -d "$RW_BPFFS" ]; then
		rm -rf "$RW_BPFFS"
	fi
	[ -n "${RW_SOCK:-}" ] && rm -f "$RW_SOCK"
	return 0
}

# ---- the dual-stack node (test_ipv6.sh) ---------------------------------------------------------

# rw_ns_add6 NS: a namespace with IPv6 on, as an IPv6 node's are, but quiet: no duplicate
# address detection (an address is usable at once, no tentative wait), no router solicitations
# or advertisements (routes are static, as the VPC CNI's). Neighbour discovery works as ever.
rw_ns_add6() {
	ip netns add "$1"
	RW_NAMESPACES+=("$1")
	rw_in "$1" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
		net.ipv6.conf.all.dad_transmits=0 net.ipv6.conf.default.dad_transmits=0 \
		net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
		net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0
	ip -n "$1" link set lo up
}

# rw_link_local NS IFNAME: the interface's own fe80:: address (the kernel's, from its MAC).
rw_link_local() {
	ip -n "$1" -6 -o addr show dev "$2" scope link | awk '{print $4; exit}' | cut -d/ -f1
}

# The node of the suites that judge a run's recorded traffic (test_replay, test_staged): run-a's
# pod dual-stack (A_IP, A_IP6), run-b's IPv4 only (B_IP), and a public IPv6 host (PUB6) behind
# the node. rw_ab_node_up: the node built, both sandboxes wired, their names set first by
# rw_ab_names PFX (the sandboxes' veths PFXa… and PFXb…: the agent's --ifprefix PFX).
rw_ab_node_up() {
	rw_node_up || rw_bail "the node did not come up"
	rw_node_dual_stack "$PUB6" || rw_bail "the node's IPv6"
	rw_sandbox6_add a "$A_IF" "$A_IP6" "$A_IP" || rw_bail "sandbox a"
	rw_sandbox_add b "$B_IF" "$B_IP" || rw_bail "sandbox b"
}
rw_ab_names() {
	PFX=$1
	A_IF=${PFX}a${ID}a A_IP=10.1.3.3 A_IP6=2600:1f14:abc:1::3
	B_IF=${PFX}b${ID}b B_IP=10.1.3.4
	PUB6=2a00:1450:4001::93
}

# rw_sandbox6_add NAME IFNAME POD_IP6 POD_IP4: a dual-stack sandbox pod wired as the VPC CNI
# wires one on an IPv6 node. The host side of the veth keeps only its link-local address, the
# pod's gateway: the pod has its /128 and a default route via that link-local, found by NDP
# (not a static entry: NDP is what is tested); for IPv4, its /32 and the link-local gateway
# 169.254.1.1 (a permanent entry, as lib.sh's pods). The node routes the /128 and the /32 to
# the veth. Sets RW_SB_GW6[NAME] to the gateway's address.
declare -gA RW_SB_GW6=() RW_SB_IP6=()
rw_sandbox6_add() {
	local name=$1 ifname=$2 ip6=$3 ip4=$4 ns=${RW_PREFIX}$1 mac gw p args=()

	[ -e "/run/netns/$ns" ] || rw_ns_add6 "$ns"
	RW_SB_NS[$name]=$ns
	RW_SB_IF[$name]=$ifname
	RW_SB_IP[$name]=$ip4
	RW_SB_IP6[$name]=$ip6
	ip -n "$RW_NODE" link add "$ifname" type veth peer name eth0 netns "$ns"
	rw_neigh_scale "$ifname"
	if [ "$RW_WAIT_SCALE" != 1 ]; then # rw_neigh_scale's reasons, for NDP
		rw_in "$RW_NODE" sysctl -qw \
			"net.ipv6.neigh.$ifname.base_reachable_time_ms=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 30000 * k}')" \
			"net.ipv6.neigh.$ifname.delay_first_probe_time=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 5 * k + 0.5}')"
	fi
	ip -n "$RW_NODE" link set "$ifname" up
	mac=$(ip -n "$RW_NODE" -o link show "$ifname" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
	ip -n "$ns" addr add "$ip4/32" dev eth0
	ip -n "$ns" -6 addr add "$ip6/128" dev eth0 nodad
	ip -n "$ns" link set eth0 up
	# The kernel gives the host side its link-local address once the veth has carrier.
	rw_wait 2 test -n "$(rw_link_local "$RW_NODE" "$ifname")" || true
	gw=$(rw_link_local "$RW_NODE" "$ifname")
	[ -n "$gw" ] || { echo "lib.sh: $ifname has no link-local address" >&2; return 1; }
	RW_SB_GW6[$name]=$gw
	ip -n "$ns" neigh replace 169.254.1.1 dev eth0 lladdr "$mac" nud permanent
	ip -n "$ns" route add 169.254.1.1 dev eth0 scope link
	ip -n "$ns" route add default via 169.254.1.1 dev eth0 onlink
	ip -n "$ns" -6 route add default via "$gw" dev eth0
	ip -n "$RW_NODE" route add "$ip4/32" dev "$ifname" scope link
	ip -n "$RW_NODE" -6 route add "$ip6/128" dev "$ifname"
	for p in "${RW_SANDBOX_TCP_PORTS[@]}"; do
		args+=(--tcp "0.0.0.0:$p" --tcp "[::]:$p")
	done
	rw_start_listener "$ns" "sandbox-$name" "${args[@]}"
}

# rw_node_dual_stack ADDR6...: the node of rw_node_up made dual-stack (the demo's): IPv6 on in
# the node and the services namespaces (quiet, as rw_ns_add6's), the node forwarding it, an
# uplink 2600:1f14:abc:ff::1/64 <-> ::2/64 with default routes both ways, each ADDR6 on the
# services' lo, and a listener on [::] for RW_SVC_TCP_PORTS. Pods: rw_sandbox6_add.
RW_NODE_LINK6=2600:1f14:abc:ff::1
RW_SVC_LINK6=2600:1f14:abc:ff::2
rw_node_dual_stack() {
	local ns a p args=()
	for ns in "$RW_NODE" "$RW_SVC"; do
		rw_in "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
			net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 \
			net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0
		rw_in "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0
	done
	rw_in "$RW_NODE" sysctl -qw net.ipv6.conf.all.forwarding=1
	ip -n "$RW_NODE" -6 addr add "$RW_NODE_LINK6/64" dev svc0 nodad
	ip -n "$RW_SVC" -6 addr add "$RW_SVC_LINK6/64" dev eth0 nodad
	ip -n "$RW_NODE" -6 route add default via "$RW_SVC_LINK6"
	ip -n "$RW_SVC" -6 route add default via "$RW_NODE_LINK6"
	for a in "$@"; do
		ip -n "$RW_SVC" -6 addr add "$a/128" dev lo nodad
	done
	for p in "${RW_SVC_TCP_PORTS[@]}"; do
		args+=(--tcp "[::]:$p")
	done
	rw_start_listener "$RW_SVC" services6 "${args[@]}"
}

# ---- a kubelet's containers (test_containers.sh; issue 34) --------------------------------------
#
# A test cgroup v2 subtree under the machine's cgroup2 mount, laid out as the kubelet lays out a
# node's pods, and a fake containerd bundle folder (one folder per container with its
# config.json), for `runwall agent --containers DIR --cgroup-root DIR`. Both are the suite's own:
# rw_kube_cleanup takes them away, processes moved out first.
#
#   rw_kube_begin               RW_KUBE_CG (<cgroup2 mount>/rwtest-kube-ID) and RW_KUBE_BUNDLES
#   rw_kube_pod DRIVER QOS UID NS NAME SANDBOX_ID NETNS   the pod's cgroups and its sandbox bundle
#   rw_kube_container DRIVER QOS UID NS NAME SANDBOX_ID ID CNAME [nocgroup]   a container's
#   rw_kube_cgroup_mk ID        make a container's cgroup (one made with nocgroup)
#   rw_kube_enter ID PID        move a process into a container's cgroup
#   rw_kube_container_del ID    its bundle, then its cgroup (its processes moved out) gone
#   rw_kube_cgroup_id ID        the cgroup id of its directory, by name_to_handle_at(2)
#   rw_kube_cleanup             everything above gone, leaves first
#
# DRIVER is systemd or cgroupfs; QOS guaranteed, burstable or besteffort; UID the pod's UID.
# Sandbox (pause) bundles carry the pod's network namespace path (NETNS, e.g. /run/netns/NS).

declare -gA RW_KUBE_DIR=()

rw_kube_begin() {
	local mnt
	mnt=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
	[ -n "$mnt" ] || { echo "lib.sh: rw_kube_begin: no cgroup2 mount" >&2; return 1; }
	RW_KUBE_CG=$mnt/rwtest-kube-$ID
	RW_KUBE_BUNDLES=$RW_WORK/bundles
	mkdir -p "$RW_KUBE_CG" "$RW_KUBE_BUNDLES"
}

# rw_kube_paths DRIVER QOS UID ID: sets KP_CGPATH (the OCI cgroupsPath) and KP_DIR (the directory,
# relative to RW_KUBE_CG), as the kubelet and containerd name them.
rw_kube_paths() {
	local driver=$1 qos=$2 uid=$3 id=$4 u=${3//-/_} slice
	if [ "$driver" = systemd ]; then
		if [ "$qos" = guaranteed ]; then
			slice=kubepods-pod$u.slice
			KP_DIR=kubepods.slice/$slice/cri-containerd-$id.scope
		else
			slice=kubepods-$qos-pod$u.slice
			KP_DIR=kubepods.slice/kubepods-$qos.slice/$slice/cri-containerd-$id.scope
		fi
		KP_CGPATH=$slice:cri-containerd:$id
	else
		if [ "$qos" = guaranteed ]; then KP_DIR=kubepods/pod$uid/$id; else KP_DIR=kubepods/$qos/pod$uid/$id; fi
		KP_CGPATH=/$KP_DIR
	fi
}

# rw_kube_bundle ID TYPE UID NS NAME SANDBOX_ID CGPATH CNAME NETNS: the config.json containerd's
# CRI writes, the parts runwall reads and a few it does not.
rw_kube_bundle() {
	local id=$1
	mkdir -p "$RW_KUBE_BUNDLES/$id"
	jq -n --arg type "$2" --arg uid "$3" --arg ns "$4" --arg name "$5" --arg sid "$6" \
		--arg cg "$7" --arg cname "$8" --arg netns "$9" '{
		ociVersion: "1.1.0",
		process: {user: {uid: 0, gid: 0}, args: ["/pause"], cwd: "/"},
		root: {path: "rootfs"},
		annotations: ({
			"io.kubernetes.cri.container-type": $type,
			"io.kubernetes.cri.sandbox-id": $sid,
			"io.kubernetes.cri.sandbox-uid": $uid,
			"io.kubernetes.cri.sandbox-name": $name,
			"io.kubernetes.cri.sandbox-namespace": $ns
		} + (if $type == "container" then {"io.kubernetes.cri.container-name": $cname,
			"io.kubernetes.cri.image-name": "registry.example/\($cname):1"} else {} end)),
		linux: {
			cgroupsPath: $cg,
			namespaces: ([{type: "pid"}, {type: "ipc"}, {type: "uts"}, {type: "mount"}] +
				(if $type == "sandbox" then [{type: "network", path: $netns}]
				 else [{type: "network", path: "/proc/1/ns/net"}] end))
		}
	}' >"$RW_KUBE_BUNDLES/$id/config.json.tmp"
	mv "$RW_KUBE_BUNDLES/$id/config.json.tmp" "$RW_KUBE_BUNDLES/$id/config.json"
}

rw_kube_pod() {
	local driver=$1 qos=$2 uid=$3 ns=$4 name=$5 sid=$6 netns=$7
	rw_kube_paths "$driver" "$qos" "$uid" "$sid"
	RW_KUBE_DIR[$sid]=$KP_DIR
	mkdir -p "$RW_KUBE_CG/$KP_DIR"
	rw_kube_bundle "$sid" sandbox "$uid" "$ns" "$name" "$sid" "$KP_CGPATH" "" "$netns"
}

rw_kube_container() {
	local driver=$1 qos=$2 uid=$3 ns=$4 name=$5 sid=$6 id=$7 cname=$8
	rw_kube_paths "$driver" "$qos" "$uid" "$id"
	RW_KUBE_DIR[$id]=$KP_DIR
	[ "${9:-}" = nocgroup ] || mkdir -p "$RW_KUBE_CG/$KP_DIR"
	rw_kube_bundle "$id" container "$uid" "$ns" "$name" "$sid" "$KP_CGPATH" "$cname" ""
}

rw_kube_cgroup_mk() { mkdir -p "$RW_KUBE_CG/${RW_KUBE_DIR[$1]}"; }

rw_kube_enter() { echo "$2" >"$RW_KUBE_CG/${RW_KUBE_DIR[$1]}/cgroup.procs"; }

# rw_kube_evacuate DIR: its processes, and those of every cgroup below it, back to the root.
rw_kube_evacuate() {
	local procs pid root=${RW_KUBE_CG%/*}
	while read -r procs; do
		while read -r pid; do
			[ -n "$pid" ] && echo "$pid" >"$root/cgroup.procs" 2>/dev/null
		done <"$procs"
	done < <(find "$1" -name cgroup.procs 2>/dev/null)
	return 0
}

# rw_kube_rmtree DIR: the directories below DIR and DIR itself, leaves first.
rw_kube_rmtree() {
	[ -d "$1" ] || return 0
	rw_kube_evacuate "$1"
	find "$1" -depth -type d -exec rmdir {} \; 2>/dev/null
	[ ! -d "$1" ]
}

rw_kube_container_del() {
	local id=$1
	rm -rf "${RW_KUBE_BUNDLES:?}/$id"
	rw_kube_rmtree "$RW_KUBE_CG/${RW_KUBE_DIR[$id]}"
	unset "RW_KUBE_DIR[$id]"
}

rw_kube_cgroup_id() {
	"$RW_PY" - "$RW_KUBE_CG/${RW_KUBE_DIR[$1]}" <<'PY'
import ctypes, ctypes.util, os, struct, sys
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
buf = ctypes.create_string_buffer(8 + 64)
struct.pack_into("=Ii", buf, 0, 64, 0)  # struct file_handle: handle_bytes, handle_type
mount_id = ctypes.c_int()
if libc.name_to_handle_at(-100, sys.argv[1].encode(), buf, ctypes.byref(mount_id), 0):
    sys.exit(os.strerror(ctypes.get_errno()))
n, _ = struct.unpack_from("=Ii", buf, 0)
assert n == 8, n
print(struct.unpack_from("=Q", buf, 8)[0])
PY
}

# rw_kube_suite_cleanup: the EXIT trap of a suite that made the node and the kube cgroups and
# bundles: all of it removed, a cgroup subtree that stays named, then the work folder.
rw_kube_suite_cleanup() {
	set +e
	rw_node_down
	rw_kube_cleanup
	[ ! -d "${RW_KUBE_CG:-/nonexistent}" ] || echo "# cgroup subtree left: $RW_KUBE_CG" >&3
	rw_work_done
}
# rw_hexid PREFIX: a container id as containerd makes them, 64 hex digits: PREFIX, then this
# run's pid.
rw_hexid() { printf '%s%060d' "$1" "$ID" | cut -c1-64; }

rw_kube_cleanup() {
	[ -n "${RW_KUBE_CG:-}" ] || return 0
	rw_kube_rmtree "$RW_KUBE_CG" || echo "lib.sh: rw_kube_cleanup: $RW_KUBE_CG is left" >&2
	RW_KUBE_DIR=()
	[ -z "${RW_KUBE_BUNDLES:-}" ] || rm -rf "$RW_KUBE_BUNDLES"
}
