#!/usr/bin/env bash
# Principals inside the pod (issue 34, docs/principals.md): the identity broker only from the
# identity sidecar, with real sockets of real processes in real cgroups. A sandbox pod's two
# containers are cgroup v2 directories laid out as the kubelet lays them out (systemd driver),
# with the bundles containerd's CRI writes (lib.sh's rw_kube_*); processes are moved into them
# and run as uid 1000 or 1001 (setpriv). The snapshot is manifests/policy-default.json's broker:
# "from": {"uid": [1001], "container": ["identity-sidecar"]}.
#
#   unknown     before the agent knows the pod's containers, the sidecar's uid is refused
#   sidecar     uid 1001 in the sidecar's container reaches the broker, TCP and UDP; its flow's
#               events name its uid and container
#   harness     the harness container refuses: uid 1000 and uid 1001 (root may take it), TCP
#               refused at once (a reset: "refused"), UDP silently (no ICMP error); a connect
#               from a raw socket (uid 0) refused
#   uid         uid 1000 in the sidecar's own container: refused (the rule names the uid too)
#   ride        a raw socket of uid 0 in the harness container copies the sidecar's established
#               flow (its 4-tuple, the next sequence number): refused wrong-principal, unanswered,
#               and the sidecar's connection goes on
#   restart     the sidecar restarted (a new cgroup, a new id): the new one reaches the broker,
#               the old cgroup id is no longer admitted (rw_admit, `runwall map dump principals`)
#   shown       `runwall drops` and `runwall explain` name the rule with its "from", the events
#               the sender's uid and container, /metrics counts the refusals by run, container,
#               uid and reason
#
# Everything lives in namespaces named rwp<pid>-*, pins in /sys/fs/bpf/rwtest-principal-<pid>,
# cgroups under <cgroup2 mount>/rwtest-kube-<pid>; all of it goes on exit, on failure too.
#
#   tests/netns/test_principal.sh BUILD
set -Eeuo pipefail

# shellcheck source=tests/netns/lib.sh
source "$(dirname "$0")/lib.sh"
rw_suite_begin principal rwp "${1:-build}"

PFX=enip
A_IF=enipa${ID} A_IP=10.1.2.3
BROKER=172.20.0.11
SID=$(rw_hexid a0a0) HARN=$(rw_hexid a1a1) SIDE=$(rw_hexid a2a2) SIDE2=$(rw_hexid a3a3)
POD_UID=3f1e2d4c-5b6a-4978-8e1d-2c3b4a596877

trap rw_kube_suite_cleanup EXIT

# in_container CONTAINER UID CMD...: CMD in sandbox a's namespace, as UID, in CONTAINER's cgroup (a bundle
# id of rw_kube_container, or "none": a cgroup of no container). The process joins the cgroup
# before it enters the namespace: `ip netns exec` remounts /sys, where the cgroup files are.
in_container() {
	local cg=$1 uid=$2 dir
	shift 2
	if [ "$cg" = none ]; then dir=$RW_KUBE_CG/stray; mkdir -p "$dir"; else dir=$RW_KUBE_CG/${RW_KUBE_DIR[$cg]}; fi
	sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$dir" \
		ip netns exec "${RW_SB_NS[a]}" setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}
# attempt CONTAINER UID tcp|udp PORT: probe.py's one attempt at the broker: ok, refused, timeout
attempt() { in_container "$1" "$2" "$RW_PY" "$RW_PROBE" "$3" "$BROKER" "$4" --timeout "$(rw_scale 1)"; }
# wrong COUNT: the node's egress wrong-principal packets
wrong() { rw_counters_json | jq '.node.egress["wrong-principal"].packets // 0'; }
wrong_at_least() { [ "$(wrong)" -ge "$1" ]; }
expect_attempt() {
	local what=$1 want=$2 got
	shift 2
	got=$(attempt "$@" 2>&1 || true)
	if [ "$got" = "$want" ]; then ok "$what: $got"; else not_ok "$what: $got, expected $want"; fi
}

rw_node_up
rw_start_listener "$RW_SVC" broker-udp --udp "$BROKER:3443"
rw_kube_begin
rw_sandbox_add a "$A_IF" "$A_IP"
rw_kube_pod systemd burstable "$POD_UID" sandboxes agent-a "$SID" "/run/netns/${RW_SB_NS[a]}"
jq '.services |= map(if .name == "identity-broker" then .udp = [3443] else . end)' \
	"$RW_ROOT/manifests/policy-default.json" >"$RW_WORK/policy.json"
rw_agent_start --ifprefix "$PFX" --resync 1 --policy "$RW_WORK/policy.json" --event-rate 0 \
	--containers "$RW_KUBE_BUNDLES" --cgroup-root "$RW_KUBE_CG" --listen 127.0.0.1:9100
rw_agent_wait || rw_bail "the agent did not start"
rw_wait 10 rw_jq_true '.sandboxes | length == 1' <<<"$(rw_status_json)" || true

section "unknown: the pod's containers not known yet"
rw_kube_container systemd burstable "$POD_UID" sandboxes agent-a "$SID" "$HARN" harness
rw_kube_container systemd burstable "$POD_UID" sandboxes agent-a "$SID" "$SIDE" identity-sidecar nocgroup
expect_attempt "uid 1001 in a cgroup of no known container: refused" refused none 1001 tcp 3443
rw_kube_cgroup_mk "$SIDE"
side_cg=$(rw_kube_cgroup_id "$SIDE") harn_cg=$(rw_kube_cgroup_id "$HARN")
diag "cgroup ids: identity-sidecar $side_cg, harness $harn_cg"
known() { rw_jq_true '[.containers.list[] | select(.cgroup_id == $s or .cgroup_id == $h) | .ifname] == [$i, $i]' \
	--argjson s "$side_cg" --argjson h "$harn_cg" --arg i "$A_IF" <<<"$(rw_status_json)"; }
check "the agent knows both containers, with their veth" rw_wait 10 known

section "sidecar: uid 1001 in the identity sidecar's container"
expect_attempt "TCP to the broker" ok "$SIDE" 1001 tcp 3443
expect_attempt "UDP to the broker" ok "$SIDE" 1001 udp 3443

section "harness: the harness container, any uid"
w0=$(wrong)
expect_attempt "uid 1000, TCP: refused at once (a reset)" refused "$HARN" 1000 tcp 3443
expect_attempt "uid 1001 (root may take it), TCP: refused" refused "$HARN" 1001 tcp 3443
expect_attempt "uid 1000, UDP: dropped, no answer" timeout "$HARN" 1000 udp 3443
in_container "$HARN" 0 "$RW_PY" "$RW_PROBE" raw-tcp --src "$A_IP" --sport 40999 --dst "$BROKER" \
	--dport 3443 --flags S >/dev/null
check "uid 0, a SYN from a raw socket: refused" rw_wait 5 wrong_at_least $((w0 + 4))
check "exactly those four packets counted wrong-principal" test "$(wrong)" = $((w0 + 4))

section "uid: uid 1000 in the sidecar's container"
expect_attempt "TCP: refused (the rule names uid 1001 too)" refused "$SIDE" 1000 tcp 3443

section "ride: a raw socket copies the sidecar's established flow"
stream=$RW_WORK/stream.jsonl
# its output through the shell's redirection: uid 1001 cannot write into the suite's folder
rw_bg "$stream" in_container "$SIDE" 1001 "$RW_PY" "$RW_PROBE" stream "$BROKER" 3443 \
	--interval 0.05
stream_pid=$RW_LAST_PID
lines() { [ -s "$stream" ] && wc -l <"$stream" || echo 0; }
rw_wait 10 eval 'test "$(lines)" -ge 5' || not_ok "the sidecar's stream did not start: $(head -c 600 "$stream")"
w0=$(wrong)
ride=$(in_container "$HARN" 0 "$RW_PY" "$RW_PROBE" ride --iface eth0 --dst "$BROKER" --dport 3443 2>&1 || true)
diag "ride: $ride"
check "the copy was sent" eval '[ -n "$ride" ] && jq -e ".sport > 0" <<<"$ride"' 
jq -c 'select(.ev == "error")' "$stream" | head -3 | diag
rw_wait 5 wrong_at_least $((w0 + 1)) || true
check "refused wrong-principal (one packet)" test "$(wrong)" = $((w0 + 1))
n0=$(lines)
# five more exchanges (a quarter second of the stream's), rather than a fixed second
lines_at_least() { [ "$(lines)" -ge "$1" ]; }
check "the sidecar's connection goes on (no reset, no revoke)" rw_wait 2 lines_at_least $((n0 + 5))
check "and its lines are all exchanges, no error" \
	jq -se 'all(.[]; .error == null)' "$stream"
kill "$stream_pid" 2>/dev/null
wait "$stream_pid" 2>/dev/null || true

section "restart: the sidecar under a new id and a new cgroup"
rw_kube_container_del "$SIDE"
rw_kube_container systemd burstable "$POD_UID" sandboxes agent-a "$SID" "$SIDE2" identity-sidecar
side2_cg=$(rw_kube_cgroup_id "$SIDE2")
admitted() { rw -j map dump principals 2>/dev/null | jq -e --argjson c "$1" '[.entries[]? | select(.cgroup_id == $c)] | length > 0' >/dev/null; }
check "the new cgroup ($side2_cg) is admitted" rw_wait 10 admitted "$side2_cg"
check "the old one ($side_cg) no longer" rw_wait 10 eval '! admitted '"$side_cg"
expect_attempt "the restarted sidecar reaches the broker" ok "$SIDE2" 1001 tcp 3443

section "shown: drops, events and explain"
# The old sidecar's socket may still send its closing segments (the stream was killed, its
# cgroup is gone): they are refused wrong-principal too, from the ride's flow. The harness's
# event is the one from another port.
ride_sport=$(jq -r '.sport // 0' <<<"$ride" 2>/dev/null || echo 0)
drops=$RW_WORK/drops.jsonl
rw -j drops --all >"$drops" 2>/dev/null &
dpid=$!
harness_event() {
	jq -c --argjson s "$ride_sport" 'select(.reason == "wrong-principal" and .sport != $s)' \
		"$drops" 2>/dev/null | head -n1
}
subscribed() { rw_jq_true '.events.subscribers >= 1' <<<"$(rw_status_json)"; }
rw_wait 10 subscribed || not_ok "drops did not subscribe"
attempt "$HARN" 1000 tcp 3443 >/dev/null 2>&1 || true
rw_wait 10 eval '[ -n "$(harness_event)" ]' || true
kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null || true
ev=$(harness_event)
diag "event: $ev"
check "the event names the rule with its from" \
	jq -e '.rule == "identity-broker 172.20.0.11 tcp/3443 from uid 1001 container identity-sidecar"' <<<"$ev"
check "and the sender: uid 1000, the harness container, its cgroup" \
	jq -e --argjson c "$harn_cg" '.uid == 1000 and .cgroup_id == $c and .container == "harness"' <<<"$ev"
ex=$(rw explain --pod "$A_IP" "$BROKER" 3443 2>&1 || true)
diag "explain: $ex"
check "explain names the rule's from" grep -q "from uid 1001 container identity-sidecar" <<<"$ex"
check "and whom it judged the packet as" grep -q "principal" <<<"$ex"
# /metrics (--listen) counts the refused events by principal: the harness's uid 1000 and
# uid 1001, each refused above (TCP and UDP for uid 1000, and the attempt just made).
metrics=$(rw_node_exec curl -s --max-time "$(rw_scale 5)" http://127.0.0.1:9100/metrics || true)
series() { grep -E "^runwall_principal_refusals_total\{run=\"run-7f3a\",container=\"harness\",uid=\"$1\",reason=\"wrong-principal\"\} [0-9]+\$" <<<"$metrics" | awk '{print $2}'; }
diag "metrics: $(grep '^runwall_principal_refusals_total' <<<"$metrics" | tr '\n' ' ')"
check "/metrics: the harness's uid 1000 refusals, by run, container, uid and reason ($(series 1000))" \
	test "$(series 1000)" -ge 3
check "/metrics: and its uid 1001's ($(series 1001))" test "$(series 1001)" -ge 1

rw_suite_end
