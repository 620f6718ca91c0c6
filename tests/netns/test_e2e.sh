#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# test_e2e.sh: runwall end to end, against the real agent, on a test node made of network
# namespaces (tests/netns/lib.sh): sandbox pods wired like the EKS VPC CNI wires them, the
# platform's services behind the node, real TCP and UDP traffic.
#
#   tests/netns/test_e2e.sh BUILD_DIR
#
# TAP output. The checks, in the order they run:
#   baseline      without runwall every path connects, so every refusal below is runwall's
#   fail-closed   before the first snapshot nothing leaves or enters a sandbox (not-ready)
#   matrix        the seed's "Sandbox network paths" under manifests/policy-default.json, both
#                 directions, both egress modes
#   events        each attempt's event (reason, run, direction) in `runwall drops --all`
#   counters      the exact counter deltas of those attempts
#   fail-closed   a veth added while the agent runs is deny-all (unknown-source) until a
#                 snapshot names its pod, then works
#   spoof         a sandbox using another's address is dropped and creates no reply state
#   live          revoking a rule stops an open connection at its next packet; adding one opens
#                 new connections; latency from `runwall apply` returning (median of 5, 3 under
#                 emulation, or of RW_E2E_LIVE_ROUNDS, probes RW_E2E_LIVE_INTERVAL seconds apart)
#   restart       kill -9 of the agent under traffic changes no verdict; the new agent adopts
#                 the pins without duplicate attachments
#   bad-snapshot  refused snapshots (CLI and policy file) change nothing
#
# Kernels: with tcx (6.6+) runwall attaches tcx links; without (EKS's 6.1, `make vmtest`) clsact +
# cls_bpf filters. The hook checks expect whichever the kernel has, found the way runwall finds it
# (RW_ATTACH_MODE=tc|tcx forces the agent's --attach-mode, and the checks follow).
# Timing: every wait and timeout is multiplied by RW_WAIT_SCALE (default 1; 10 under `make
# vmtest`). The probes then outlive TCP's 1 s SYN RTO, so the exact counter checks compare with
# the packets each attempt was counted sending instead of "one SYN each" (their lines say so).
#
# Everything lives in namespaces named rwe<pid>-*, pins in /sys/fs/bpf/rwtest-e2e-<pid>, the
# socket /run/rwtest-e2e-<pid>.sock, files in /tmp/rwtest-e2e-<pid>.*; all of it is removed on
# exit, on failure too (RW_KEEP=1 keeps the files: agent log, event stream, probe results).
# Helpers: lib.sh (the node), listener.py (servers), probe.py (clients, raw packets, kernel
# hook query), expect.py (judges results, events and counters against expectations).
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin e2e rwe "${1:-build}"
ROOT=$RW_ROOT
EXPECT=("$RW_PY" "$HERE/expect.py")
POLICY_DEFAULT=$ROOT/manifests/policy-default.json
EVENTS=$RW_WORK/events.jsonl # the event stream until the restart test
SUITE_START=$(date +%s%N)

# The sandboxes: name, host-side veth, pod IP, run (in policy-default.json, or added later).
A_IF=eniaaaa0001 A_IP=10.1.2.3 A_RUN=run-7f3a
B_IF=enibbbb0002 B_IP=10.1.2.4 B_RUN=run-9c01
C_IF=vlancccc0003 C_IP=10.1.2.5 C_RUN=run-c0de
export RW_RUNS="a=$A_RUN b=$B_RUN c=$C_RUN"
export RW_IPS="a=$A_IP b=$B_IP c=$C_IP"

# How runwall attaches on this kernel: tcx when the kernel has it (runwall's own test, a
# BPF_PROG_QUERY of a tcx attach type, is repeated by `probe.py hooks` and checked against this),
# else tc (clsact + cls_bpf).
RW_ATTACH_MODE=${RW_ATTACH_MODE:-auto}
if grep -qw tcx_prog_attach /proc/kallsyms 2>/dev/null; then KERNEL_TCX=true; else KERNEL_TCX=false; fi
case "$RW_ATTACH_MODE" in
auto) if $KERNEL_TCX; then MODE=tcx; else MODE=tc; fi ;;
tcx | tc) MODE=$RW_ATTACH_MODE ;;
*) echo "test_e2e.sh: RW_ATTACH_MODE must be auto, tcx or tc" >&2; exit 2 ;;
esac
if [ "$MODE" = tcx ]; then
	HOOKS_DESC="rw_egress alone on tcx ingress, rw_ingress alone on tcx egress, no clsact filter"
else
	HOOKS_DESC="one clsact filter a hook, runwall's: cls_bpf pref 1 direct-action, rw_egress on ingress, rw_ingress on egress; no tcx program"
fi

# ---- TAP -----------------------------------------------------------------------------------

# judge ARGS...: expect.py's verdicts as TAP (rw_judge, lib.sh).
judge() { rw_judge "$@"; }

cleanup() {
	local rc=$?
	trap - ERR
	rw_diag_on_failure "$rc" 40
	rw_node_down
	rw_work_done "RW_KEEP=1: logs and snapshots left in $RW_WORK"
}
trap cleanup EXIT
rw_trap_abort

# ---- Helpers ---------------------------------------------------------------------------------

# snapshot REV [JQ-FILTER]: the default policy, changed by the filter, at revision REV. BASE is a
# jq filter for what earlier tests added (run-c0de).
BASE='.'
snapshot() {
	jq --argjson rev "$1" "$BASE | ${2:-.} | .revision = \$rev" "$POLICY_DEFAULT"
}
REV=$(jq .revision "$POLICY_DEFAULT")

status_field() { rw_status_json | jq -r "$1"; }
counters() { rw -j counters >"$1"; }

# batch SPEC OUTDIR [TIMEOUT]: run the spec's attempts, each FROM's in its namespace, all at once.
# TIMEOUT (default 0.7 s, under the SYN RTO) is scaled; every attempt's packets are counted as
# they leave the sender's eth0 (probe.py batch --count-iface).
batch() { rw_batch "$1" "$2" "${3:-0.7}" --count-iface eth0; }

# hooks_json DEV: what the kernel has on the veth's hooks (probe.py hooks, not runwall).
hooks_json() { rw_probe node hooks --dev "$1" 2>/dev/null; }
# hooks_ok: on stdin, hooks_json output; true when runwall's two programs are there as $MODE
# wants them and nothing else is: tcx, each alone on its tcx hook and no clsact filter; tc, no
# tcx (the kernel has none) and on each clsact hook exactly one filter, runwall's (cls_bpf,
# direct-action, its handle, pref 1 so first), running the right program.
hooks_ok() {
	rw_jq_true --arg mode "$MODE" '
		def rw_filter($prog): length == 1 and (.[0] | .kind == "bpf" and .name == $prog and
			.pref == 1 and .chain == 0 and .direct_action and
			(.handle == 1381433345 or .handle == 1381433346));  # 0x52570001, 0x52570002
		if $mode == "tcx" then
			.tcx and (.ingress | map(.name) == ["rw_egress"]) and
			(.egress | map(.name) == ["rw_ingress"]) and .tc_ingress == [] and .tc_egress == []
		else
			.ingress == [] and .egress == [] and (.tc_ingress | rw_filter("rw_egress")) and
			(.tc_egress | rw_filter("rw_ingress"))
		end' >/dev/null
}
# Program ids on the hooks, in order: [ingress ids, egress ids].
hook_ids() {
	hooks_json "$1" | jq -c --arg mode "$MODE" 'if $mode == "tcx" then [.ingress[].id, .egress[].id] else [.tc_ingress[].id, .tc_egress[].id] end'
}
hooks_now_ok() { hooks_json "$1" | hooks_ok; }

# Wait (5 s, scaled, unless told) until the kernel has runwall's two programs on the veth.
wait_hooks() {
	rw_wait "${2:-5}" hooks_now_ok "$1"
}

# Wait until the agent reports the veth bound to the pod.
bound_is() {
	[ "$(rw_status_json | jq -r --arg d "$1" '.sandboxes[]? | select(.ifname == $d) | .pod')" = "$2" ]
}
wait_bound() {
	rw_wait "${3:-5}" bound_is "$1" "$2"
}

revision_is() { [ "$(status_field .revision)" = "$1" ]; }
wait_revision() {
	rw_wait "${2:-5}" revision_is "$1"
}

# start_events FILE: `runwall drops --all` in the background, one JSON event a line into FILE.
start_events() {
	rw_drops_bg "$1" --all || rw_bail "the event stream did not start"
	EVENTS_PID=$RW_LAST_PID
}

# in_events FILE JQ-ARGS...: the event stream FILE has what the jq filter (over the slurped
# stream) asks for, within 3 s (scaled); `in_events FILE --arg … 'any(.[]; …)'`.
in_events() {
	local f=$1
	shift
	rw_wait 3 jq -se "$@" "$f" >/dev/null
}
EVENTS_PID=

apply() {
	local f=$1
	rw apply "$f" >"$RW_WORK/apply.out" 2>&1
}

# stream_echoed FILE N: probe.py stream's FILE has N echoes.
stream_echoed() {
	local n
	n=$(grep -c '"ev":"echo"' "$1" 2>/dev/null || true)
	[ "${n:-0}" -ge "$2" ]
}

median() {
	sort -n | awk '{a[NR] = $1} END {if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

# ---- Preconditions ---------------------------------------------------------------------------

if [ "$(id -u)" -ne 0 ]; then
	echo "Bail out! the end-to-end suite needs root (network namespaces, BPF)"
	exit 1
fi
rw_require_tools "$RW_PY" jq nsenter ip
rw_require "$RW_RUNWALL has the agent command" "$RW_RUNWALL" help agent
"$RW_ROOT/scripts/bpffs-mount.sh"

# ---- The node --------------------------------------------------------------------------------

section "test node: namespaces ${RW_PREFIX}*"
rw_node_up
rw_sandbox_add a "$A_IF" "$A_IP"
rw_sandbox_add b "$B_IF" "$B_IP"

# The matrix (seed 001 "Sandbox network paths" and the inbound rule) as runwall enforces it with
# manifests/policy-default.json. FROM ID PROTO DST PORT SRC EXPECT WHY DESCRIPTION
cat >"$RW_WORK/matrix.spec" <<'EOF'
a proxy-443        tcp 172.20.0.10     443  - allow rule egress proxy, model route
a proxy-8443       tcp 172.20.0.10     8443 - allow rule egress proxy, model route
a proxy-3128       tcp 172.20.0.10     3128 - allow rule egress proxy, forwarding route
a broker-3443      tcp 172.20.0.11     3443 - drop wrong-principal identity broker, only from the identity sidecar
a app-3000         tcp 172.20.0.12     3000 - allow rule application tier
a drive-8080       tcp 172.20.0.13     8080 - allow rule drive gateway
a connectors-8080  tcp 172.20.0.30     8080 - drop private-destination connectors service (not used by sandboxes)
a telemetry-4317   tcp 172.20.0.40     4317 - drop private-destination telemetry gateway
a telemetry-4318   tcp 172.20.0.40     4318 - drop private-destination telemetry gateway
a dns-udp          udp 172.20.0.53     53   - drop dns cluster DNS over UDP
a dns-tcp          tcp 172.20.0.53     53   - drop dns cluster DNS over TCP
a dns-public       udp 8.8.8.8         53   - drop dns public resolver
a imds             tcp 169.254.169.254 80   - drop metadata instance metadata
a ecs-metadata     tcp 169.254.170.2   80   - drop metadata ECS task metadata
a private-80       tcp 10.0.5.5        80   - drop private-destination private host in the VPC
a private-443      tcp 10.0.5.5        443  - drop private-destination private host in the VPC
a proxy-80         tcp 172.20.0.10     80   - drop private-destination egress proxy, a port no rule opens
a proxy-udp-443    udp 172.20.0.10     443  - drop private-destination egress proxy over UDP
a broker-443       tcp 172.20.0.11     443  - drop private-destination identity broker, a port no rule opens
a app-8080         tcp 172.20.0.12     8080 - drop private-destination application tier, a port no rule opens
a rundb-5432       tcp 52.94.9.5       5432 - drop not-allowlisted another run's database
a sandbox-b        tcp 10.1.2.4        4096 - drop private-destination another sandbox
a inet-443         tcp 93.184.216.34   443  - drop not-allowlisted public internet, allowlist mode
a inet-80          tcp 93.184.216.34   80   - drop not-allowlisted public internet, allowlist mode
a inet-quic        udp 93.184.216.34   443  - drop not-allowlisted public internet, allowlist mode
b proxy-443        tcp 172.20.0.10     443  - allow rule egress proxy, model route
b broker-3443      tcp 172.20.0.11     3443 - drop wrong-principal identity broker, only from the identity sidecar
b inet-443         tcp 93.184.216.34   443  - allow open public internet, open mode
b inet-80          tcp 93.184.216.34   80   - allow open public internet, open mode
b inet-8443        tcp 93.184.216.34   8443 - allow open public internet, open mode
b inet-quic        udp 93.184.216.34   443  - allow open public internet, open mode
b rundb-5432       tcp 52.94.9.5       5432 - allow rule-cidr its run's own rule
b imds             tcp 169.254.169.254 80   - drop metadata instance metadata, open mode
b private-443      tcp 10.0.5.5        443  - drop private-destination private host, open mode
b connectors-8080  tcp 172.20.0.30     8080 - drop private-destination connectors service, open mode
b dns-udp          udp 172.20.0.53     53   - drop dns cluster DNS, open mode
b dns-public-tcp   tcp 8.8.8.8         53   - drop dns public resolver over TCP, open mode
b sandbox-a        tcp 10.1.2.3        4096 - drop private-destination another sandbox, open mode
svc app-4096       tcp 10.1.2.3 4096 172.20.0.12 allow inbound application tier into the harness
svc app-4098       tcp 10.1.2.3 4098 172.20.0.12 allow inbound application tier
svc app-4999       tcp 10.1.2.3 4999 172.20.0.12 allow inbound application tier
svc app-6085       tcp 10.1.2.3 6085 172.20.0.12 allow inbound application tier
svc temporal-4096  tcp 10.1.2.3 4096 172.20.0.20 allow inbound Temporal worker
svc temporal-4098  tcp 10.1.2.3 4098 172.20.0.20 allow inbound Temporal worker
svc temporal-4999  tcp 10.1.2.3 4999 172.20.0.20 allow inbound Temporal worker
svc temporal-6085  tcp 10.1.2.3 6085 172.20.0.20 allow inbound Temporal worker
svc stream-4096    tcp 10.1.2.3 4096 172.20.0.21 allow inbound streaming service
svc stream-4098    tcp 10.1.2.3 4098 172.20.0.21 allow inbound streaming service
svc stream-4999    tcp 10.1.2.3 4999 172.20.0.21 allow inbound streaming service
svc stream-6085    tcp 10.1.2.3 6085 172.20.0.21 allow inbound streaming service
svc b-temporal     tcp 10.1.2.4 6085 172.20.0.20 allow inbound Temporal worker into an open-mode sandbox
svc app-22         tcp 10.1.2.3 22   172.20.0.12 drop inbound-denied application tier, a port no rule opens
svc app-8080       tcp 10.1.2.3 8080 172.20.0.12 drop inbound-denied application tier, a port no rule opens
svc connectors-in  tcp 10.1.2.3 4096 172.20.0.30 drop inbound-denied connectors service
svc proxy-in       tcp 10.1.2.3 4096 172.20.0.10 drop inbound-denied egress proxy
svc drive-in       tcp 10.1.2.3 6085 172.20.0.13 drop inbound-denied drive gateway
svc inet-in        tcp 10.1.2.3 4096 93.184.216.34 drop inbound-denied the internet
svc b-inet-in      tcp 10.1.2.4 4096 93.184.216.34 drop inbound-denied the internet, open-mode sandbox
EOF

# ---- Baseline: no runwall --------------------------------------------------------------------

section "baseline: the node without runwall"
batch "$RW_WORK/matrix.spec" "$RW_WORK/baseline"
n_all=$(cat "$RW_WORK"/baseline/*.jsonl | wc -l)
n_ok=$(cat "$RW_WORK"/baseline/*.jsonl | jq -r .result | grep -c '^ok$' || true)
if [ "$n_ok" -eq "$n_all" ]; then
	ok "baseline: without runwall all $n_all paths of the matrix connect (so every refusal below is runwall's)"
else
	not_ok "baseline: without runwall all $n_all paths of the matrix connect"
	cat "$RW_WORK"/baseline/*.jsonl | jq -c 'select(.result != "ok")' | sed 's/^/#   /'
fi

# The spoofing attack without runwall: A sends a SYN as B; the service answers B.
# The sniffers run until they are told to stop (SIGTERM), once what they wait for had its time
# to arrive: a fixed window of their own would start when they do and could close before the
# SYN is even sent (starting the python that sends it takes seconds under emulation).
spoof_round() { # LABEL SPORT: sniff at the service and in B while A spoofs B's address
	local tag=$1 sport=$2 max
	max=$(rw_scale 30)
	rm -f "$RW_WORK"/sniff-*.ready
	rw_bg "$RW_WORK/sniff-svc-$tag.json" ip netns exec "$RW_SVC" "$RW_PY" "$RW_PROBE" sniff \
		--iface eth0 --src "$B_IP" --sport "$sport" --duration "$max" --ready "$RW_WORK/sniff-svc.ready"
	SPOOF_P1=$RW_LAST_PID
	rw_bg "$RW_WORK/sniff-b-$tag.json" ip netns exec "${RW_SB_NS[b]}" "$RW_PY" "$RW_PROBE" sniff \
		--iface eth0 --dport "$sport" --duration "$max" --ready "$RW_WORK/sniff-b.ready"
	SPOOF_P2=$RW_LAST_PID
	rw_wait_file "$RW_WORK/sniff-svc.ready"
	rw_wait_file "$RW_WORK/sniff-b.ready"
	rw_probe a raw-tcp --src "$B_IP" --sport "$sport" --dst 172.20.0.10 --dport 443 --flags S >/dev/null
}
spoof_stop() { # the packets sent had 0.5 s (scaled) to arrive: stop the sniffers, get their counts
	rw_sleep 0.5
	kill -TERM "$SPOOF_P1" "$SPOOF_P2" 2>/dev/null || true
	wait "$SPOOF_P1" "$SPOOF_P2" || true
}
spoof_round baseline 40400
spoof_stop
check "baseline: without runwall a SYN that sandbox A sends as B reaches the service" \
	rw_jq_true '.count >= 1' "$RW_WORK/sniff-svc-baseline.json"
check "baseline: without runwall B receives the service's SYN-ACK for it" \
	rw_jq_true '.count >= 1' "$RW_WORK/sniff-b-baseline.json"

# ---- Fail closed: before the first snapshot --------------------------------------------------

section "fail-closed: the agent runs, no snapshot yet"
rw_agent_start --ifprefix eni,vlan --attach-mode "$RW_ATTACH_MODE" -v
rw_agent_wait
h=$(hooks_json "$A_IF" || true)
check "kernel: tcx $(if $KERNEL_TCX; then echo present; else echo absent; fi) (tcx_prog_attach in /proc/kallsyms), and BPF_PROG_QUERY agrees; runwall must attach with $MODE$([ "$RW_ATTACH_MODE" = auto ] || echo " (forced: RW_ATTACH_MODE=$RW_ATTACH_MODE)")" \
	rw_jq_true --argjson k "$KERNEL_TCX" '.tcx == $k' <<<"$h"
check "fail-closed: the agent attached to $A_IF (kernel: $HOOKS_DESC)" wait_hooks "$A_IF"
check "fail-closed: the agent attached to $B_IF" wait_hooks "$B_IF"
check "fail-closed: status says not ready, revision 0" \
	test "$(rw_status_json | jq -c '[.ready, .revision]')" = "[false,0]"
start_events "$EVENTS"

cat >"$RW_WORK/notready.spec" <<'EOF'
a proxy-443  tcp 172.20.0.10   443  - drop not-ready egress proxy, before any snapshot
a inet-quic  udp 93.184.216.34 443  - drop not-ready public internet, before any snapshot
b proxy-443  tcp 172.20.0.10   443  - drop not-ready egress proxy, before any snapshot
svc app-4096 tcp 10.1.2.3      4096 172.20.0.12 drop not-ready application tier into the harness, before any snapshot
EOF
counters "$RW_WORK/c0.json"
batch "$RW_WORK/notready.spec" "$RW_WORK/notready"
counters "$RW_WORK/c1.json"
judge attempts --spec "$RW_WORK/notready.spec" --results "$RW_WORK/notready"
# No run is known before a snapshot: the events carry no run, and only the node counts.
RW_RUNS="" judge attempts --check events --spec "$RW_WORK/notready.spec" --results "$RW_WORK/notready" \
	--events "$EVENTS"
RW_RUNS="" judge counters --label "fail-closed counters: " --spec "$RW_WORK/notready.spec" \
	--results "$RW_WORK/notready" --before "$RW_WORK/c0.json" --after "$RW_WORK/c1.json"

# ---- The matrix under the default policy -----------------------------------------------------

section "matrix: manifests/policy-default.json"
if apply "$POLICY_DEFAULT"; then
	ok "runwall apply manifests/policy-default.json exits 0"
else
	not_ok "runwall apply manifests/policy-default.json exits 0"
	sed 's/^/#   /' "$RW_WORK/apply.out"
fi
check "status: ready, revision $REV" test "$(rw_status_json | jq -c '[.ready, .revision]')" = "[true,$REV]"
check "status: $A_IF bound to $A_IP ($A_RUN)" wait_bound "$A_IF" "$A_IP"
check "status: $B_IF bound to $B_IP ($B_RUN)" wait_bound "$B_IF" "$B_IP"
rw_sleep 0.2
counters "$RW_WORK/c2.json"
batch "$RW_WORK/matrix.spec" "$RW_WORK/matrix"
judge attempts --spec "$RW_WORK/matrix.spec" --results "$RW_WORK/matrix"

section "events and counters of the matrix"
judge attempts --check events --spec "$RW_WORK/matrix.spec" --results "$RW_WORK/matrix" \
	--events "$EVENTS"
counters "$RW_WORK/c3.json"
judge counters --label "counters: " --spec "$RW_WORK/matrix.spec" --results "$RW_WORK/matrix" \
	--before "$RW_WORK/c2.json" --after "$RW_WORK/c3.json"
lost=$(jq '[.node.events.lost, .node.events.suppressed] | add' "$RW_WORK/c3.json")
check "counters: no event lost or suppressed so far (so the stream is complete)" test "$lost" = 0

# ---- A veth added while the agent runs -------------------------------------------------------

section "fail-closed: a new sandbox veth"
# The pod starts sending before it is even wired: UDP to the internet every 10 ms (an answer
# would come back if any datagram got through unjudged, as the baseline shows), while the CNI
# part creates the veth, the addresses and the routes; the agent has to catch the veth in time.
counters "$RW_WORK/cf0.json"
rw_ns_add "${RW_PREFIX}c"
rw_bg "$RW_WORK/flood.json" ip netns exec "${RW_PREFIX}c" "$RW_PY" "$RW_PROBE" flood \
	93.184.216.34 443 --interval 0.01 --duration "$(rw_scale 1.5)" --ready "$RW_WORK/flood.ready"
fpid=$RW_LAST_PID
rw_wait_file "$RW_WORK/flood.ready"
rw_sandbox_add c "$C_IF" "$C_IP"
check "fail-closed: the agent attached to the new veth $C_IF (prefix vlan)" wait_hooks "$C_IF" 10
wait "$fpid" || true
if rw_jq_true '.answers == 0 and .sent > 0' "$RW_WORK/flood.json"; then
	ok "fail-closed: nothing the new pod sent from its first packet on got through ($(jq -r '"\(.sent) datagrams, after \(.send_errors) sends that failed for want of a route"' "$RW_WORK/flood.json"))"
else
	not_ok "fail-closed: nothing the new pod sent from its first packet on got through"
	diag "    $(cat "$RW_WORK/flood.json")"
fi
counters "$RW_WORK/cf1.json"
d=$("${EXPECT[@]}" delta --before "$RW_WORK/cf0.json" --after "$RW_WORK/cf1.json" --scope node --dir egress --reason unknown-source)
n=$(jq '.sent' "$RW_WORK/flood.json")
check "fail-closed counters: runwall judged them: node egress unknown-source +$d of $n sent (a datagram sent before the host side was up would not reach it)" \
	test "$d" -ge 1 -a "$d" -le "$n"
check "fail-closed: status: $C_IF bound to $C_IP" wait_bound "$C_IF" "$C_IP"
cat >"$RW_WORK/unknown.spec" <<'EOF'
c proxy-443  tcp 172.20.0.10 443  - drop unknown-source egress proxy, pod in no run
EOF
cat >"$RW_WORK/unknown-in.spec" <<'EOF'
svc app-4096 tcp 10.1.2.5    4096 172.20.0.12 drop unknown-source application tier into a pod in no run
EOF
counters "$RW_WORK/c4.json"
batch "$RW_WORK/unknown.spec" "$RW_WORK/unknown"
# Into a pod in no run the node's ARP is dropped, and after 3 s (3 requests, 1 s apart: kernel
# timers, not scaled) the node gives up and answers the service with an ICMP host unreachable.
# Whatever the scale, the attempt gives up before that: 0.7 s scaled, at most 2 s.
batch "$RW_WORK/unknown-in.spec" "$RW_WORK/unknown-in" "$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {t = 0.7 * k; print (t < 2 ? 0.7 : 2 / k)}')"
counters "$RW_WORK/c5.json"
judge attempts --spec "$RW_WORK/unknown.spec" --results "$RW_WORK/unknown"
judge attempts --spec "$RW_WORK/unknown-in.spec" --results "$RW_WORK/unknown-in"
RW_RUNS="" judge attempts --check events --spec "$RW_WORK/unknown.spec" --results "$RW_WORK/unknown" \
	--events "$EVENTS"
# Egress is exact: one SYN natively; under RW_WAIT_SCALE > 1 the SYNs the attempt was counted
# sending (its timeout passes the RTO). Into the pod, the node's ARP requests for the unknown
# pod are what gets dropped (the SYN never leaves the node's neighbour queue): at least one.
d=$("${EXPECT[@]}" delta --before "$RW_WORK/c4.json" --after "$RW_WORK/c5.json" --scope node --dir egress --reason unknown-source)
sent=$(jq -s 'map(.pkts // 0) | add' "$RW_WORK/unknown/c.jsonl")
if [ "$RW_WAIT_SCALE" = 1 ]; then
	check "fail-closed counters: node egress unknown-source +1 packet (exact, got +$d; the attempt sent $sent)" \
		test "$d" = 1 -a "$sent" = 1
else
	check "fail-closed counters: node egress unknown-source +$sent packets, the SYNs the attempt was counted sending (exact, got +$d; timeouts x$RW_WAIT_SCALE pass the SYN RTO)" \
		test "$d" = "$sent" -a "$sent" -ge 1
fi
d=$("${EXPECT[@]}" delta --before "$RW_WORK/c4.json" --after "$RW_WORK/c5.json" --scope node --dir ingress --reason unknown-source)
check "fail-closed counters: node ingress unknown-source at least +1 (the node's ARP for the pod; got +$d)" test "$d" -ge 1

REV=$((REV + 1))
BASE='.runs += [{"id": "run-c0de", "pods": ["10.1.2.5"]}]'
snapshot "$REV" >"$RW_WORK/policy-$REV.json"
check "fail-closed: a snapshot naming $C_IP in $C_RUN applies (revision $REV)" apply "$RW_WORK/policy-$REV.json"
cat >"$RW_WORK/known.spec" <<'EOF'
c proxy-443  tcp 172.20.0.10 443  - allow rule egress proxy, once the snapshot names the pod
c inet-443   tcp 93.184.216.34 443 - drop not-allowlisted public internet, allowlist mode
svc app-4096 tcp 10.1.2.5 4096 172.20.0.12 allow inbound application tier into the harness
EOF
# 3 s: while the pod was unknown the node's ARP requests into it were dropped, and a reply to it
# may wait in the neighbour queue for the next ARP retransmission (1 s), as it would on a node.
# Under RW_WAIT_SCALE > 1 the steps before took long enough for the node to be near the end of
# that resolution (3 requests, 1 s apart), when it gives up and fails what waits in the queue
# with an ICMP host unreachable: there, first let the node's resolution end (the entry no
# longer INCOMPLETE; kernel timers, at most 3 s), so that the attempts meet a fresh one.
neigh_settled() { ! ip -n "$RW_NODE" neigh show "$C_IP" dev "$C_IF" | grep -q INCOMPLETE; }
if [ "$RW_WAIT_SCALE" != 1 ]; then
	rw_wait 1 neigh_settled || diag "the node's ARP for $C_IP still unresolved: $(ip -n "$RW_NODE" neigh show "$C_IP" dev "$C_IF")"
fi
batch "$RW_WORK/known.spec" "$RW_WORK/known" 3
for f in c svc; do
	jq -r 'select(.result == "ok") | "new veth: \(.src) -> \(.dst):\(.dport) connected \((.t_connected - .t0) / 1e6 | floor) ms into the attempt, after the snapshot"' \
		"$RW_WORK/known/$f.jsonl" | while read -r l; do diag "$l"; done
done
judge attempts --spec "$RW_WORK/known.spec" --results "$RW_WORK/known"
judge attempts --check events --spec "$RW_WORK/known.spec" --results "$RW_WORK/known" \
	--events "$EVENTS"

# ---- Spoofing --------------------------------------------------------------------------------

section "spoof: sandbox A uses sandbox B's address"
counters "$RW_WORK/c6.json"
spoof_round runwall 40404
# A also claims an address nobody has, and announces B's address over ARP.
rw_probe a raw-tcp --src 10.1.99.99 --sport 40405 --dst 172.20.0.10 --dport 443 --flags S >/dev/null
rw_probe a arp --iface eth0 --sender-ip "$B_IP" --target-ip 169.254.1.1 >/dev/null
# The service side forges the reply B would get had the spoofed SYN gone through.
rw_probe svc raw-tcp --src 172.20.0.10 --sport 443 --dst "$B_IP" --dport 40404 --flags SA --ack 1001 >/dev/null
spoof_stop
counters "$RW_WORK/c7.json"
check "spoof: the SYN A sent as B never reached the service" \
	rw_jq_true '.count == 0' "$RW_WORK/sniff-svc-runwall.json"
check "spoof: B received nothing for that flow (no SYN-ACK, not even the forged one)" \
	rw_jq_true '.count == 0' "$RW_WORK/sniff-b-runwall.json"
d=$("${EXPECT[@]}" delta --before "$RW_WORK/c6.json" --after "$RW_WORK/c7.json" --scope "$A_RUN" --dir egress --reason spoofed-source)
check "spoof counters: $A_RUN egress spoofed-source +3 packets (2 SYNs, 1 ARP; exact, got +$d)" test "$d" = 3
d=$("${EXPECT[@]}" delta --before "$RW_WORK/c6.json" --after "$RW_WORK/c7.json" --scope "$A_RUN" --dir egress --reason spoofed-source --field bytes)
check "spoof counters: $A_RUN egress spoofed-source +150 bytes (54 + 54 + 42; got +$d)" test "$d" = 150
d=$("${EXPECT[@]}" delta --before "$RW_WORK/c6.json" --after "$RW_WORK/c7.json" --scope "$B_RUN" --dir ingress --reason inbound-denied)
check "spoof counters: $B_RUN ingress inbound-denied +1 (the forged SYN-ACK matched no state; got +$d)" test "$d" = 1
check "spoof events: spoofed-source for $B_IP:40404 from A, run $A_RUN" \
	in_events "$EVENTS" --arg run "$A_RUN" --arg ip "$B_IP" \
	'any(.[]; .reason == "spoofed-source" and .run == $run and .src == $ip and .sport == 40404 and .dir == "egress")'
check "spoof events: spoofed-source for 10.1.99.99:40405 from A, run $A_RUN" \
	in_events "$EVENTS" --arg run "$A_RUN" \
	'any(.[]; .reason == "spoofed-source" and .run == $run and .src == "10.1.99.99" and .sport == 40405)'
check "spoof events: inbound-denied for the forged SYN-ACK into B, run $B_RUN" \
	in_events "$EVENTS" --arg run "$B_RUN" --arg ip "$B_IP" \
	'any(.[]; .reason == "inbound-denied" and .run == $run and .dst == $ip and .dport == 40404 and .src == "172.20.0.10" and .dir == "ingress")'

# ---- Live change -----------------------------------------------------------------------------

section "live: revoke and grant under traffic"
# RW_E2E_LIVE_ROUNDS rounds (5; 3 under emulation, where the latency is only bounded, not
# measured), the stream's lines and the knocks RW_E2E_LIVE_INTERVAL seconds apart (0.01): more
# rounds and a finer interval measure the latency (docs/benchmarks.md).
live_rounds_default=5
[ "$RW_WAIT_SCALE" = 1 ] || live_rounds_default=3
LIVE_ROUNDS=${RW_E2E_LIVE_ROUNDS:-$live_rounds_default} LIVE_INTERVAL=${RW_E2E_LIVE_INTERVAL:-0.01}
# The timed applies run runwall itself, not through nsenter: the control socket is a path, and
# the time from the start is then the command's (and the timer's spawn), not nsenter's too.
APPLY=("$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" apply)
: >"$RW_WORK/metrics"
for i in $(seq 1 "$LIVE_ROUNDS"); do
	# Revoke: the drive gateway's rule goes away under an open connection.
	stream=$RW_WORK/stream-$i.jsonl
	rw_bg /dev/null ip netns exec "${RW_SB_NS[a]}" "$RW_PY" "$RW_PROBE" stream 172.20.0.13 8080 \
		--interval "$LIVE_INTERVAL" --out "$stream"
	spid=$RW_LAST_PID
	rw_wait 3 stream_echoed "$stream" 20 || true
	REV=$((REV + 1))
	snapshot "$REV" 'del(.services[] | select(.name == "drive-gateway"))' >"$RW_WORK/policy-$REV.json"
	"$RW_PY" "$RW_PROBE" timed --out "$RW_WORK/revoke-$i.json" -- "${APPLY[@]}" \
		"$RW_WORK/policy-$REV.json" >/dev/null 2>&1 || true
	rw_sleep 0.3
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	echo "--- revoke $i" >>"$RW_WORK/metrics"
	judge revoke --label "live $i: revoke drive-gateway: " --stream "$stream" \
		--timed "$RW_WORK/revoke-$i.json" --events "$EVENTS" --reason private-destination

	# Grant: a rule of run-7f3a for a public host, while A knocks every 10 ms. Each knock gives
	# up after 0.2 s (scaled, but under the 1 s SYN RTO, so that each stays one SYN and the
	# first that connects is one sent after the change).
	knock=$RW_WORK/knock-$i.json
	rw_bg "$knock" ip netns exec "${RW_SB_NS[a]}" "$RW_PY" "$RW_PROBE" knock 93.184.216.34 8443 \
		--interval "$LIVE_INTERVAL" --connect-timeout "$(awk -v t="$(rw_scale 0.2)" 'BEGIN {print (t < 0.9 ? t : 0.9)}')" \
		--max "$(rw_scale 4)"
	kpid=$RW_LAST_PID
	rw_sleep 0.4
	REV=$((REV + 1))
	snapshot "$REV" 'del(.services[] | select(.name == "drive-gateway")) |
		(.runs[] | select(.id == "run-7f3a")) += {"allow": [{"ip": "93.184.216.34", "tcp": [8443]}]}' \
		>"$RW_WORK/policy-$REV.json"
	"$RW_PY" "$RW_PROBE" timed --out "$RW_WORK/grant-$i.json" -- "${APPLY[@]}" \
		"$RW_WORK/policy-$REV.json" >/dev/null 2>&1 || true
	wait "$kpid" 2>/dev/null || true
	echo "--- grant $i" >>"$RW_WORK/metrics"
	judge grant --label "live $i: grant 93.184.216.34:8443 to $A_RUN: " --knock "$knock" \
		--timed "$RW_WORK/grant-$i.json" --events "$EVENTS" --src "$A_IP" \
		--dst 93.184.216.34 --dport 8443 --path rule

	# Back to the base policy for the next round.
	REV=$((REV + 1))
	snapshot "$REV" >"$RW_WORK/policy-$REV.json"
	apply "$RW_WORK/policy-$REV.json" || not_ok "live $i: restore the base policy (revision $REV)"
done
metric() { # KIND NAME: the values of one metric, one a line
	awk -v k="$1" -v n="$2" '/^---/ {kind = $2; next} kind == k && $1 == n {print $2}' "$RW_WORK/metrics"
}
for kind in revoke grant; do
	ev=$(metric "$kind" event | median)
	pr=$(metric "$kind" probe | median)
	ap=$(metric "$kind" apply | median)
	fs=$(metric "$kind" event_from_start | median)
	diag "live change: $kind: first packet with the new verdict $ev ms after \`runwall apply\` returned (median of $LIVE_ROUNDS; event ts_ns, CLOCK_MONOTONIC): $(metric "$kind" event | tr '\n' ' ')"
	diag "live change: $kind: probe side $pr ms (first unanswered line / first SYN that connected): $(metric "$kind" probe | tr '\n' ' ')"
	diag "live change: $kind: runwall apply took $ap ms (median); from its start to the first packet with the new verdict $fs ms (median): $(metric "$kind" event_from_start | tr '\n' ' ')"
	limit=$(rw_scale 1000)
	check "live: $kind takes effect within $(rw_scale 1) s of runwall apply returning (median $ev ms)" \
		awk -v v="$ev" -v l="$limit" 'BEGIN {exit !(v != "n/a" && v < l)}'
done

# ---- Restart ---------------------------------------------------------------------------------

section "restart: kill -9 of the agent under traffic"
# The restarted agent gets a policy file, as the DaemonSet's does (a folder of its own, like a
# ConfigMap volume: the agent watches the folder).
POLICY_DIR=$RW_WORK/policy
mkdir -p "$POLICY_DIR"
cp "$RW_WORK/policy-$REV.json" "$POLICY_DIR/policy.json"
loop=$RW_WORK/loop-restart.jsonl
rw_bg /dev/null ip netns exec "${RW_SB_NS[a]}" "$RW_PY" "$RW_PROBE" loop \
	--target ok-drive=172.20.0.13:8080 --target deny-inet=93.184.216.34:443 \
	--interval 0.05 --timeout "$(rw_scale 0.3)" --out "$loop"
lpid=$RW_LAST_PID
# and a connection that stays open across the kill and the restart
rw_bg /dev/null ip netns exec "${RW_SB_NS[a]}" "$RW_PY" "$RW_PROBE" stream 172.20.0.12 3000 \
	--interval 0.01 --out "$RW_WORK/stream-restart.jsonl"
spid=$RW_LAST_PID
hooks_before=$(hook_ids "$A_IF")
rw_sleep 0.5
counters "$RW_WORK/c8-before-kill.json"
c_kill=$("$RW_PY" "$RW_PROBE" now)
{
	kill -KILL "$RW_AGENT_PID"
	wait "$RW_AGENT_PID"
} 2>/dev/null || true
RW_AGENT_PID=
rw_wait 2 eval '! kill -0 "$EVENTS_PID" 2>/dev/null' || true
if kill -0 "$EVENTS_PID" 2>/dev/null; then
	not_ok "restart: runwall drops ends when the agent goes away"
	kill "$EVENTS_PID" 2>/dev/null || true
else
	ok "restart: runwall drops ends when the agent goes away"
fi
wait "$EVENTS_PID" 2>/dev/null || true
rc=0
rw apply "$POLICY_DIR/policy.json" >/dev/null 2>&1 || rc=$?
check "restart: with no agent, runwall apply exits 2 (got $rc)" test "$rc" = 2
check "restart: the counters are still readable from the pins" counters "$RW_WORK/c8.json"
rw_sleep 1
c_restart=$("$RW_PY" "$RW_PROBE" now)
rw_agent_start --ifprefix eni,vlan --attach-mode "$RW_ATTACH_MODE" --policy "$POLICY_DIR/policy.json" -v
rw_agent_wait
check "restart: the new agent is ready at revision $REV" wait_revision "$REV"
start_events "$RW_WORK/events-after-restart.jsonl"
rw_sleep 0.5
c_end=$("$RW_PY" "$RW_PROBE" now)
kill "$lpid" "$spid" 2>/dev/null || true
wait "$lpid" "$spid" 2>/dev/null || true
judge stream --stream "$RW_WORK/stream-restart.jsonl" --since "$c_kill" --until "$c_end" \
	--label "restart, kill -9 to restart: "
judge loop --file "$loop" --since "$c_kill" --until "$c_restart" --label "restart, agent gone: "
judge loop --file "$loop" --label "restart, whole run: "
counters "$RW_WORK/c9.json"
d=$("${EXPECT[@]}" delta --before "$RW_WORK/c8.json" --after "$RW_WORK/c9.json" --scope "$A_RUN" --dir egress --reason not-allowlisted)
check "restart: drops of the gap are counted (not-allowlisted +$d)" test "$d" -ge 1
# No gap in enforcement: from before the kill to after the restart, the node dropped nothing
# but the loop's refused attempts (not-allowlisted). A packet of the long-lived connection
# dropped by a restart would be counted here under its reason (not-ready, unknown-source, ...).
other_drops() { jq '[(.node.egress, .node.ingress) | to_entries[] | select(.key != "allowed" and .key != "not-allowlisted") | .value.packets] | add // 0' "$1"; }
check "restart: no packet dropped but the refused attempts' ($(other_drops "$RW_WORK/c8-before-kill.json") -> $(other_drops "$RW_WORK/c9.json") other drops)" \
	test "$(other_drops "$RW_WORK/c9.json")" = "$(other_drops "$RW_WORK/c8-before-kill.json")"
st=$(rw_status_json)
for name in a b c; do
	dev=${RW_SB_IF[$name]}
	check "restart: status: $dev has runwall once on each hook, $MODE, first, no others" \
		rw_jq_true --arg d "$dev" --arg mode "$MODE" '.sandboxes[] | select(.ifname == $d) | .hooks |
			[.egress, .ingress] | all(.attached == true and .mode == $mode and .first == true and .others == 0)' \
		<<<"$st"
	check "restart: kernel: $dev has $HOOKS_DESC" eval 'hooks_json "$dev" | hooks_ok'
	# and the same as iproute2's tc sees it: the bpf filters (lines with a handle) on each hook,
	# and how many of them are runwall's (its handle, direct-action, the hook's program)
	n=0 m=0
	for hook in ingress:rw_egress egress:rw_ingress; do
		f=$(rw_in "$RW_NODE" tc filter show dev "$dev" "${hook%%:*}" 2>/dev/null || true)
		n=$((n + $(grep -c ' bpf .*handle ' <<<"$f" || true)))
		m=$((m + $(grep -Ec " bpf chain 0 handle 0x5257000[12] .*direct-action.* name ${hook#*:} " <<<"$f" || true)))
	done
	if [ "$MODE" = tcx ]; then
		check "restart: tc: $dev has no clsact bpf filter beside the tcx links (got $n)" test "$n" = 0
	else
		check "restart: tc: $dev has one bpf filter a hook, runwall's (got $n, $m of them runwall's)" \
			test "$n" = 2 -a "$m" = 2
	fi
done
hooks_after=$(hook_ids "$A_IF")
diag "restart: program ids on $A_IF ($MODE) before $hooks_before, after $hooks_after"
n=$(find "$RW_BPFFS/links" -mindepth 1 -maxdepth 1 -name "${MODE}_*" 2>/dev/null | wc -l)
m=$(find "$RW_BPFFS/links" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
if [ "$MODE" = tcx ]; then what="pinned tcx links"; else what="tc markers"; fi
check "restart: 6 $what for 3 veths, nothing else in links/ (got $n of $m)" test "$n" = 6 -a "$m" = 6

# ---- Bad snapshots ---------------------------------------------------------------------------

section "bad-snapshot: refused snapshots under traffic"
loop=$RW_WORK/loop-bad.jsonl
rw_bg /dev/null ip netns exec "${RW_SB_NS[a]}" "$RW_PY" "$RW_PROBE" loop \
	--target ok-drive=172.20.0.13:8080 --target deny-inet=93.184.216.34:443 \
	--target deny-imds=169.254.169.254:80 --interval 0.05 --timeout "$(rw_scale 0.3)" --out "$loop"
lpid=$RW_LAST_PID
rw_sleep 0.3
bad=$RW_WORK/bad
mkdir -p "$bad"
printf '{\n  "revision": %d,\n  "egress": "open",,\n  "runs": []\n}\n' $((REV + 1)) >"$bad/syntax.json"
snapshot $((REV + 1)) '. + {"egres": "open"}' >"$bad/unknown-key.json"
snapshot $((REV - 1)) '.egress = "open"' >"$bad/lower-revision.json"
snapshot "$REV" '.egress = "open"' >"$bad/same-revision.json"
snapshot $((REV + 1)) '.services += [{"name": "imds", "ip": "169.254.169.254", "tcp": [80]}]' \
	>"$bad/metadata-rule.json"
snapshot $((REV + 1)) '(.runs[] | select(.id == "run-7f3a")) += {"allow": [{"cidr": "169.254.0.0/16", "tcp": [80]}]}' \
	>"$bad/metadata-cidr.json"
for f in syntax unknown-key lower-revision same-revision metadata-rule metadata-cidr; do
	rc=0
	rw apply "$bad/$f.json" >"$bad/$f.out" 2>&1 || rc=$?
	msg=$(head -n 1 "$bad/$f.out")
	check "bad-snapshot: $f: runwall apply exits 1 (got $rc)" test "$rc" = 1
	if grep -q "$bad/$f.json:[0-9]*:[0-9]*: " "$bad/$f.out"; then
		ok "bad-snapshot: $f: the error names FILE:LINE:COL and the JSON path"
	else
		not_ok "bad-snapshot: $f: the error names FILE:LINE:COL and the JSON path"
	fi
	diag "    $msg"
	check "bad-snapshot: $f: revision still $REV" test "$(status_field .revision)" = "$REV"
done
# The same through the watched policy file: a refused file changes nothing; a good one applies.
# Each file's refusal is logged ("refused snapshot: ..."): wait for it rather than a fixed time.
refusals() { grep -c "refused snapshot: " "$RW_WORK/agent.log" || true; }
refusals_above() { [ "$(refusals)" -gt "$1" ]; }
for f in syntax unknown-key metadata-rule; do
	r0=$(refusals)
	cp "$bad/$f.json" "$POLICY_DIR/.policy.json.tmp"
	mv "$POLICY_DIR/.policy.json.tmp" "$POLICY_DIR/policy.json"
	rw_wait 2 refusals_above "$r0" || true
	check "bad-snapshot: $f written to the agent's --policy file: revision still $REV" \
		test "$(status_field .revision)" = "$REV"
done
check "bad-snapshot: status reports the last refusal" \
	rw_jq_true '.agent.last_error != null' <<<"$(rw_status_json)"
rw_sleep 0.3
kill "$lpid" 2>/dev/null || true
wait "$lpid" 2>/dev/null || true
judge loop --file "$loop" --label "bad-snapshot, traffic: "
REV=$((REV + 1))
snapshot "$REV" >"$POLICY_DIR/.policy.json.tmp"
mv "$POLICY_DIR/.policy.json.tmp" "$POLICY_DIR/policy.json"
check "bad-snapshot: then a good policy file (revision $REV) is applied" wait_revision "$REV" 5

# ---- Done ------------------------------------------------------------------------------------

kill "$EVENTS_PID" 2>/dev/null || true
diag "suite time: $((($(date +%s%N) - SUITE_START) / 1000000)) ms"
trap - ERR
rw_suite_end
