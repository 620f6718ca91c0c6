#!/usr/bin/env bash
# A refusal the sandbox hears at once (issue 20, part 1), from real sockets in sandboxes of a
# node built in namespaces (lib.sh):
#
#   tcp      connect() to a refused public host:443 fails with ECONNREFUSED (a reset from the
#            datapath), long before TCP's own timeout; the services namespace sees no packet of it
#   udp      a connected UDP socket to a refused host gets EHOSTUNREACH at its next call (ICMP
#            unreachable, code 13); the services namespace sees nothing
#   spoof    a sandbox forging another pod's source address gets no answer, and a raw listener in
#            the forged-for pod receives nothing
#   flood    a refused-SYN flood from two CPUs gets at most rate x time + burst answers, the rest
#            counted over budget, while the other sandbox's refusals are still answered
#   drop     "refusal": "drop" for one run: its connect() hears nothing again (timeout)
#
# Everything lives in namespaces named rwa<pid>-*, pins in /sys/fs/bpf/rwtest-answers-<pid>, the
# socket /run/rwtest-answers-<pid>.sock, files in /tmp/rwtest-answers-<pid>.*; all of it goes on
# exit, on failure too. Waits scale with RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_answers.sh BUILD
#
# RW_ATTACH_MODE=tc|tcx picks the agent's --attach-mode (default auto: tcx where the kernel has
# it): the answer leaves through the hook's redirect either way.
set -Eeuo pipefail

# shellcheck source=tests/netns/lib.sh
source "$(dirname "$0")/lib.sh"
rw_suite_begin answers rwa "${1:-build}"

# Sandboxes: A asks and floods, B is the other sandbox, V is the pod whose address A forges.
A_IF=eniaa${ID}a A_IP=10.1.2.3 A_RUN=run-asker
B_IF=eniab${ID}b B_IP=10.1.2.4 B_RUN=run-other
V_IF=eniav${ID}c V_IP=10.1.2.5 V_RUN=run-victim
PFX=enia
ARATE=20 ABURST=10
REFUSED=93.184.216.34 # "the public internet": listens on tcp 443 and udp 443 (lib.sh)


trap rw_suite_cleanup EXIT

# run_answers RUN KIND: the run's refusals answered with KIND (rst, icmp, budget)
run_answers() {
	rw_counters_json | jq -r --arg r "$1" --arg k "$2" \
		'[.runs[]? | select(.id == $r) | .answers[$k] // 0] | add // 0'
}

policy() { # policy REVISION [RUN-A'S EXTRA KEYS]
	cat <<EOF
{
  "revision": $1,
  "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
  "runs": [
    {"id": "$A_RUN", "pods": ["$A_IP"]${2:-}},
    {"id": "$B_RUN", "pods": ["$B_IP"]},
    {"id": "$V_RUN", "pods": ["$V_IP"]}
  ]
}
EOF
}

# sniff_start NAME NS IFACE FILTER...: count the matching packets arriving on IFACE in NS until
# sniff_stop NAME.
sniff_start() {
	local name=$1 ns=$2 iface=$3
	shift 3
	rm -f "$RW_WORK/$name.ready"
	rw_bg "$RW_WORK/$name.json" ip netns exec "$ns" "$RW_PY" "$RW_PROBE" sniff --iface "$iface" \
		--duration 600 --ready "$RW_WORK/$name.ready" "$@"
	eval "sniff_pid_$name=$RW_LAST_PID"
	rw_wait_file "$RW_WORK/$name.ready" || rw_bail "sniffer $name did not start"
}
sniff_stop() {
	local pid count=
	eval "pid=\$sniff_pid_$1"
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	# Called in $(...): a subshell cannot wait for the suite's own child, so its count is
	# waited for in the file it writes on its way out.
	for _ in $(seq $((200 * RW_WAIT_SCALE))); do
		count=$(jq -r '.count // empty' "$RW_WORK/$1.json" 2>/dev/null || true)
		[ -n "$count" ] && break
		sleep 0.05
	done
	echo "${count:-no output}"
}

# ---- the node ----------------------------------------------------------------------------------
rw_node_up || rw_bail "the node did not come up"
rw_sandbox_add a "$A_IF" "$A_IP" || rw_bail "sandbox a"
rw_sandbox_add b "$B_IF" "$B_IP" || rw_bail "sandbox b"
rw_sandbox_add v "$V_IF" "$V_IP" || rw_bail "sandbox v"
policy 1 >"$RW_WORK/policy.json"
API=http://127.0.0.1:9100 # the node namespace's own loopback
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --answer-rate "$ARATE/$ABURST" \
	--attach-mode "${RW_ATTACH_MODE:-auto}" --listen 127.0.0.1:9100
rw_agent_wait || rw_bail "the agent did not start"
rw_wait 10 rw_agent_bound 3 || rw_bail "the agent did not bind the three sandboxes and apply revision 1"
diag "attach mode: $(rw_status_json | jq -r '[.sandboxes[]?.hooks.egress.mode // empty] | unique | join(",")')"
if [ "$(rw_status_json | jq -c '[.limits.answer_rate, .limits.answer_burst]')" = "[$ARATE,$ABURST]" ]; then
	ok "status shows the answer budget: $ARATE/s burst $ABURST per sandbox"
else
	not_ok "status limits: $(rw_status_json | jq -c .limits)"
fi
rw_drops_bg "$RW_WORK/events.jsonl" --run "$A_RUN" || rw_bail "the event stream did not start"

# Deadlines: TCP's own answer to silence would be its SYN retransmissions (about 2 minutes);
# an answered refusal returns within a round trip. The deadline only has to tell them apart.
DEADLINE_MS=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 2000 * k}')
TIMEOUT=$(rw_scale 5)
# refused_at_once FILE ERRNO WHAT: the probe's result (FILE) is ERRNO, within the deadline.
refused_at_once() {
	local file=$1 want=$2 what=$3
	diag "$what: $(cat "$file")"
	if rw_jq_true --argjson d "$DEADLINE_MS" --arg e "$want" '.errno == $e and .ms < $d' "$file"; then
		ok "$what fails with $want in $(jq .ms "$file") ms (deadline $DEADLINE_MS ms)"
	else
		not_ok "$what: $(cat "$file"), expected $want within $DEADLINE_MS ms"
	fi
}

# ---- tcp: ECONNREFUSED at once, nothing reaches the services --------------------------------
sniff_start svc_tcp "$RW_SVC" eth0 --src "$A_IP"
rw_probe a errno tcp "$REFUSED" 443 --timeout "$TIMEOUT" >"$RW_WORK/tcp.json" || true
rw_probe a errno tcp 172.20.0.10 443 --timeout "$TIMEOUT" >"$RW_WORK/tcp-allowed.json" || true
seen=$(sniff_stop svc_tcp)
refused_at_once "$RW_WORK/tcp.json" ECONNREFUSED "connect() to refused $REFUSED:443"
if rw_jq_true '.errno == "ok"' "$RW_WORK/tcp-allowed.json"; then
	ok "an allowed connect() from the same sandbox still connects"
else
	not_ok "allowed connect(): $(cat "$RW_WORK/tcp-allowed.json")"
fi
# The allowed connection's packets do reach the services; the refused one's must not.
if [ "$(jq -r '[.packets[] | select(.dst == "'"$REFUSED"'")] | length' "$RW_WORK/svc_tcp.json")" = 0 ] &&
	[ "$seen" != "no output" ] && [ "$seen" -gt 0 ]; then
	ok "the services namespace saw none of the refused flow's packets (and $seen of the allowed one's)"
else
	not_ok "the services namespace saw: $(cat "$RW_WORK/svc_tcp.json")"
fi

# ---- udp: EHOSTUNREACH at the next call -----------------------------------------------------
sniff_start svc_udp "$RW_SVC" eth0 --src "$A_IP"
rw_probe a errno udp "$REFUSED" 443 --timeout "$TIMEOUT" >"$RW_WORK/udp.json" || true
seen=$(sniff_stop svc_udp)
refused_at_once "$RW_WORK/udp.json" EHOSTUNREACH "a connected UDP socket to refused $REFUSED:443, at its next call,"
if [ "$seen" = 0 ]; then
	ok "the services namespace saw no packet of the refused datagram"
else
	not_ok "the services namespace saw $seen packets from $A_IP: $(cat "$RW_WORK/svc_udp.json")"
fi
a_rst=$(run_answers "$A_RUN" rst) a_icmp=$(run_answers "$A_RUN" icmp)
if [ "$a_rst" -ge 1 ] && [ "$a_icmp" -ge 1 ]; then
	ok "$A_RUN's counters: $a_rst rst, $a_icmp icmp answers"
else
	not_ok "$A_RUN's counters: $a_rst rst, $a_icmp icmp answers"
fi
in_events() {
	jq -se 'any(.[]; .answer == "rst" and .dport == 443 and .proto == "tcp") and
		any(.[]; .answer == "icmp" and .proto == "udp")' "$RW_WORK/events.jsonl" >/dev/null
}
if rw_wait 3 in_events; then
	ok "the events say which answer each refusal got (rst, icmp)"
else
	not_ok "events: $(head -c 600 "$RW_WORK/events.jsonl")"
fi

metrics_say() {
	rw_node_exec curl -s --max-time "$(rw_scale 5)" "$API/metrics" >"$RW_WORK/metrics.txt" || return 1
	grep -Eq "^runwall_run_answers_total\{run=\"$A_RUN\",answer=\"rst\"\} [1-9]" "$RW_WORK/metrics.txt" &&
		grep -Eq '^runwall_answers_total\{answer="icmp"\} [1-9]' "$RW_WORK/metrics.txt" &&
		grep -Eq '^runwall_answers_total\{answer="budget"\} [0-9]' "$RW_WORK/metrics.txt"
}
if metrics_say; then
	ok "/metrics: runwall_answers_total and runwall_run_answers_total by answer"
else
	not_ok "/metrics: $(grep answers "$RW_WORK/metrics.txt" | head -8 | tr '\n' ' ')"
fi
api_says() {
	rw_node_exec curl -s --max-time "$(rw_scale 5)" "$API/api/events" >"$RW_WORK/api-events.json" || return 1
	jq -e --arg r "$A_RUN" '[.events[] | select(.run == $r)] |
		any(.answer == "rst" and .proto == "tcp") and any(.answer == "icmp" and .proto == "udp")' \
		"$RW_WORK/api-events.json" >/dev/null
}
if rw_wait 3 api_says; then
	ok "the view's /api/events say which answer each refusal got"
else
	not_ok "/api/events: $(head -c 400 "$RW_WORK/api-events.json")"
fi

# ---- spoof: a forged source gets no answer, and the forged-for pod hears nothing ----------------
sniff_start victim "${RW_SB_NS[v]}" eth0 --src "$REFUSED"
sniff_start asker "${RW_SB_NS[a]}" eth0 --src "$REFUSED"
spoofed0=$(rw_counters_json | jq -r '.node.egress["spoofed-source"].packets // 0')
for i in 1 2 3; do
	rw_probe a raw-tcp --src "$V_IP" --sport $((41000 + i)) --dst "$REFUSED" --dport 443 --flags S >/dev/null
done
spoofed_ok() { [ "$(rw_counters_json | jq -r '.node.egress["spoofed-source"].packets // 0')" -ge $((spoofed0 + 3)) ]; }
rw_wait 3 spoofed_ok || true
rw_sleep 0.3
v_seen=$(sniff_stop victim)
a_seen=$(sniff_stop asker)
spoofed1=$(rw_counters_json | jq -r '.node.egress["spoofed-source"].packets // 0')
if [ "$v_seen" = 0 ] && [ "$a_seen" = 0 ] && [ $((spoofed1 - spoofed0)) -ge 3 ]; then
	ok "3 SYNs forged from $V_IP: dropped spoofed-source ($((spoofed1 - spoofed0))), no answer to the forger or the forged-for pod"
else
	not_ok "forged SYNs: spoofed-source +$((spoofed1 - spoofed0)), the forged-for pod received $v_seen, the forger $a_seen"
fi

# ---- flood: answers within the budget, the other sandbox still answered ---------------------
DURATION=$(rw_scale 1.5)
rst0=$(run_answers "$A_RUN" rst) budget0=$(run_answers "$A_RUN" budget)
t0=$(rw_mono_ns)
for cpu in 0 1; do
	rw_bg "$RW_WORK/flood$cpu.json" ip netns exec "${RW_SB_NS[a]}" taskset -c "$cpu" "$RW_PY" \
		"$RW_PROBE" syn-flood --src "$A_IP" --dst "$REFUSED" --dport 443 --duration "$DURATION"
	eval "flood_pid$cpu=$RW_LAST_PID"
done
rw_sleep 0.5
rw_probe b errno tcp "$REFUSED" 443 --timeout "$TIMEOUT" >"$RW_WORK/other.json" || true
wait "$flood_pid0" "$flood_pid1" 2>/dev/null || true
t1=$(rw_mono_ns)
rw_sleep 0.2
sent=$(jq -s 'map(.sent) | add' "$RW_WORK/flood0.json" "$RW_WORK/flood1.json")
rst=$(($(run_answers "$A_RUN" rst) - rst0))
budget=$(($(run_answers "$A_RUN" budget) - budget0))
# The bucket refills at the coarse clock's ticks: one more tick of slack at each end.
bound=$(awk -v r="$ARATE" -v b="$ABURST" -v ns=$((t1 - t0)) 'BEGIN {printf "%d", r * ns / 1e9 + b + 2}')
diag "flood: $sent SYNs from two CPUs in $(((t1 - t0) / 1000000)) ms: $rst resets, $budget over budget (bound $bound)"
if [ "$rst" -le "$bound" ] && [ "$rst" -ge "$ABURST" ] && [ $((rst + budget)) -ge "$sent" ]; then
	ok "a refused-SYN flood of $sent from two CPUs got $rst answers (at most rate x time + burst = $bound), $budget counted over budget"
else
	not_ok "flood of $sent: $rst answers (bound $bound, burst $ABURST), $budget over budget"
fi
if rw_jq_true '.errno == "ECONNREFUSED"' "$RW_WORK/other.json"; then
	ok "the other sandbox's refused connect() is still answered during the flood ($(jq .ms "$RW_WORK/other.json") ms)"
else
	not_ok "the other sandbox during the flood: $(cat "$RW_WORK/other.json")"
fi

# ---- drop: one run's "refusal": "drop" is today's silence ------------------------------------
policy 2 ', "refusal": "drop"' >"$RW_WORK/policy2.json"
rw apply "$RW_WORK/policy2.json" >"$RW_WORK/apply2.out" 2>&1 || rw_bail "apply revision 2: $(cat "$RW_WORK/apply2.out")"
rw_sleep 1.2 # the flood's bucket refills: a silence must not be the budget's
rst0=$(run_answers "$A_RUN" rst)
rw_probe a errno tcp "$REFUSED" 443 --timeout "$(rw_scale 0.8)" >"$RW_WORK/drop.json" || true
rw_probe b errno tcp "$REFUSED" 443 --timeout "$TIMEOUT" >"$RW_WORK/drop-other.json" || true
if rw_jq_true '.errno == "timeout"' "$RW_WORK/drop.json" && [ "$(run_answers "$A_RUN" rst)" = "$rst0" ]; then
	ok "\"refusal\": \"drop\" for $A_RUN: its refused connect() hears nothing (timeout), no answer counted"
else
	not_ok "\"refusal\": \"drop\": $(cat "$RW_WORK/drop.json"), rst answers $rst0 -> $(run_answers "$A_RUN" rst)"
fi
if rw_jq_true '.errno == "ECONNREFUSED"' "$RW_WORK/drop-other.json"; then
	ok "the other run (node default: answer) is still answered"
else
	not_ok "the other run: $(cat "$RW_WORK/drop-other.json")"
fi

rw_suite_end
