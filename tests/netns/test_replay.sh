#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# test_replay.sh: `runwall replay` (issue 38) against a real agent's recorded traffic, on a
# dual-stack node built in namespaces (lib.sh):
#
#   recorded  run-a (pods 10.1.3.3 and 2600:1f14:abc:1::3) sends real UDP datagrams: refused at
#             93.184.216.34:443 (x3), 93.184.216.34:9000 (x2), 52.94.9.5:5432 (x1) and
#             [2a00:1450:4001::93]:443 (x2); allowed to the egress proxy 172.20.0.10:443 (x2,
#             two flows). The agent keeps them (--listen: its event store) and logs them
#             (--flow-log --flow-log-flows)
#   allow     a proposal that allows 93.184.216.34:443/udp to run-a: the replay names exactly
#             that flow, with its count 3 and the rule; everything else stays the same
#   tighten   a proposal that takes udp 443 from the egress proxy names exactly the flow it
#             would cut, count 2, and its reason
#   --allow   `--run run-a --allow [2a00:1450:4001::93]:443/udp` names exactly the IPv6 flow
#   upsert    --run-upsert FILE gives the answer of the whole snapshot with that run
#   text      the lines people read: "refused now -> allowed by ...", the counts
#   flow log  --flow-log FILE gives the same answer as the event store; --run and --since
#             select from the store
#   bad       unreadable, invalid and refused proposals, an unknown run, a bad --since: each
#             its error naming what and where and its exit code; the revision in force is
#             unchanged
#   live      the proposal applied, the same traffic sent again: the kernel's verdicts, flow
#             by flow, are the replay's
#   10000     10 000 recorded flows of run-b replay; the time is reported (no assertion)
#
# Everything lives in namespaces named rwr<pid>-*, pins in /sys/fs/bpf/rwtest-replay-<pid>,
# files in /tmp/rwtest-replay-<pid>.*; all of it goes on exit, on failure too. Waits are for
# conditions, scaled by RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_replay.sh BUILD
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin replay rwr "${1:-build}"

rw_ab_names enir
FLOG=$RW_WORK/flow.log
N_MANY=10000

trap rw_suite_cleanup EXIT

# policy REVISION A_ALLOW PROXY_PORTS_JSON: a snapshot; A_ALLOW is run-a's allow list.
policy() {
	cat <<EOF
{
  "revision": $1,
  "services": [{"name": "egress-proxy", "ip": "172.20.0.10", $3}],
  "runs": [{"id": "run-a", "pods": ["$A_IP", "$A_IP6"], "allow": $2},
           {"id": "run-b", "pods": ["$B_IP"]}]
}
EOF
}
policy 1 '[]' '"tcp": [443], "udp": [443]' >"$RW_WORK/policy.json"
policy 2 '[{"ip": "93.184.216.34", "udp": [443]}]' '"tcp": [443], "udp": [443]' >"$RW_WORK/allow.json"
policy 2 '[]' '"tcp": [443]' >"$RW_WORK/tighten.json"
policy 2 '[{"ip": "93.184.216.34", "udp": [443]}]' '"tcp": [443]' >"$RW_WORK/both.json"
cat >"$RW_WORK/run-a.json" <<EOF
{"id": "run-a", "pods": ["$A_IP", "$A_IP6"], "allow": [{"ip": "93.184.216.34", "udp": [443]}]}
EOF

# traffic: run-a's recorded traffic, 10 datagrams.
traffic() {
	rw_udp_send a 93.184.216.34 443 3
	rw_udp_send a 93.184.216.34 9000 2
	rw_udp_send a 52.94.9.5 5432 1
	rw_udp_send a "$PUB6" 443 2
	rw_udp_send a 172.20.0.10 443 2
}
# log_lines [FROM]: the flow log's drop and flow lines (from line FROM on)
log_lines() { tail -n +"${1:-1}" "$FLOG" 2>/dev/null | jq -c 'select(.type == "drop" or .type == "flow")' | wc -l; }
log_has() { [ "$(log_lines "${2:-1}")" -ge "$1" ]; }
# replay_j ARGS...: `runwall -j replay ARGS`, its JSON in $RW_WORK/out.json, its exit code in rc
replay_j() {
	rc=0
	rw -j replay "$@" >"$RW_WORK/out.json" 2>"$RW_WORK/err.txt" || rc=$?
}
# The changed flows of out.json as "change run dir peer port proto count rule-or-reason" lines.
changed() {
	jq -r '.flows[] | select(.change != "same") | [.change, .run, .dir, .peer, .port, .proto, .count,
		(if .change == "opened" then .proposed.rule else .proposed.reason end)] | map(tostring) | join(" ")' \
		"$RW_WORK/out.json"
}
revision() { rw_status_json | jq -r '.revision // .policy.revision // empty'; }

# ---- the node ----------------------------------------------------------------------------------
rw_ab_node_up
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --event-rate 0 \
	--listen 127.0.0.1:9100 --events $((N_MANY * 2)) --flow-log "$FLOG" --flow-log-flows \
	--flow-log-rate 0
rw_agent_wait 30 || rw_bail "the agent did not start: $(tail -n 4 "$RW_WORK/agent.log")"
rw_wait 10 rw_agent_bound 2 || rw_bail "the agent did not bind the two sandboxes and apply revision 1"
rev0=$(revision)

section "recorded: run-a's real traffic"
traffic
if rw_wait 10 log_has 10; then
	ok "run-a's 10 datagrams recorded: 8 refusals and 2 new flows"
else
	not_ok "the flow log holds $(log_lines) verdicts, expected 10"
fi

# ---- proposals -----------------------------------------------------------------------------------
# expect_changed WANT DESCRIPTION ARGS...: `replay -j ARGS` exits 0 and its changed flows are WANT
# (changed()'s lines, joined by ";").
expect_changed() {
	local want=$1 what=$2
	shift 2
	replay_j "$@"
	if [ "$rc" -eq 0 ] && [ "$(changed | tr '\n' ';')" = "$want;" ]; then
		ok "$what"
	else
		not_ok "$what: exit $rc, changed: $(changed 2>/dev/null | tr '\n' ';') $(cat "$RW_WORK/err.txt")"
	fi
}
OPEN1="opened run-a egress 93.184.216.34 443 udp 3 runs[0].allow[0]"

section "allow: one destination opened"
expect_changed "$OPEN1" "the replay names exactly 93.184.216.34:443/udp, count 3, by runs[0].allow[0]" \
	--policy "$RW_WORK/allow.json"
if rw_jq_true '.opened == {"flows": 1, "packets": 3} and .closed.flows == 0 and .same == {"flows": 4, "packets": 7} and .in_force.revision == 1 and .proposal.revision == 2' "$RW_WORK/out.json"; then
	ok "allow: 1 flow (3 seen) opened, 4 flows (7 seen) the same, revisions 1 and 2"
else
	not_ok "allow: counts $(jq -c '{opened, closed, same, in_force, proposal}' "$RW_WORK/out.json")"
fi

section "tighten: a service loses udp 443"
expect_changed "closed run-a egress 172.20.0.10 443 udp 2 private-destination" \
	"the replay names exactly the flow it would cut: 172.20.0.10:443/udp, count 2, private-destination" \
	--policy "$RW_WORK/tighten.json"

section "--allow: the access-request case, IPv6"
expect_changed "opened run-a egress $PUB6 443 udp 2 runs[0].allow[0]" \
	"--allow [$PUB6]:443/udp names exactly the IPv6 flow, count 2" --run run-a --allow "[$PUB6]:443/udp"
check "--allow: the proposal is named --allow; 4 flows stay the same" \
	rw_jq_true '.proposal.source == "--allow" and .same.flows == 4' "$RW_WORK/out.json"
expect_changed "$OPEN1" "--allow 93.184.216.34:443/udp: the same answer as the whole snapshot" \
	--run run-a --allow 93.184.216.34:443/udp

section "--run-upsert"
expect_changed "$OPEN1" "--run-upsert run-a.json: the same answer as the whole snapshot" \
	--run-upsert "$RW_WORK/run-a.json"

section "text"
out=$(rw replay --policy "$RW_WORK/allow.json" 2>&1) || true
if grep -q "^refused now -> allowed by runs\[0\]\.allow\[0\]: run-a egress $A_IP -> 93.184.216.34:443 udp, 3 seen, first 20" <<<"$out" &&
	grep -q "^1 flows (3 seen) would be allowed, 0 (0) refused, 4 (7) stay the same$" <<<"$out"; then
	ok "text: the opened flow's line with its count and times, and the totals"
else
	not_ok "text: $out"
fi
diag <<<"$out"
out=$(rw replay --policy "$RW_WORK/tighten.json" 2>&1) || true
diag <<<"$out"
diag <<<"$(rw replay --run run-a --allow "[$PUB6]:443/udp" --all 2>&1)"
diag <<<"$(rw -j replay --run run-a --allow "[$PUB6]:443/udp" 2>&1)"
if grep -q "^allowed now -> refused (private-destination): run-a egress $A_IP -> 172.20.0.10:443 udp, 2 seen" <<<"$out"; then
	ok "text: the cut flow's line with its reason"
else
	not_ok "text (tighten): $out"
fi

section "flow log: the same answer"
# What both sources must agree on: each flow's key, count and verdicts, and the totals.
norm='{flows: [.flows[] | {run, pod, dir, proto, peer, port, count, change, now, proposed}], opened, closed, same}'
replay_j --policy "$RW_WORK/allow.json" --flow-log "$FLOG" --all
cp "$RW_WORK/out.json" "$RW_WORK/allow-log.json"
replay_j --policy "$RW_WORK/allow.json" --all
if [ "$rc" -eq 0 ] && [ "$(jq -cS "$norm" "$RW_WORK/allow-log.json")" = "$(jq -cS "$norm" "$RW_WORK/out.json")" ] &&
	rw_jq_true '(.flows | length) == 5' "$RW_WORK/out.json"; then
	ok "--flow-log FILE: the same 5 flows, counts and verdicts as the event store"
else
	not_ok "flow log vs store: $(head -c 600 "$RW_WORK/allow-log.json") $(diff <(jq -S "$norm" "$RW_WORK/allow-log.json") <(jq -S "$norm" "$RW_WORK/out.json") | head -10)"
fi

replay_j --policy "$RW_WORK/allow.json" --all --run run-a --since 1h
if [ "$rc" -eq 0 ] && [ "$(jq -cS "$norm" "$RW_WORK/allow-log.json")" = "$(jq -cS "$norm" "$RW_WORK/out.json")" ]; then
	ok "--run run-a --since 1h: the same 5 flows from the store"
else
	not_ok "--run run-a --since 1h: exit $rc, $(jq -c '{same, opened, closed}' "$RW_WORK/out.json" 2>/dev/null) $(cat "$RW_WORK/err.txt")"
fi
replay_j --policy "$RW_WORK/allow.json" --all --run run-b
if [ "$rc" -eq 0 ] && rw_jq_true '(.flows | length) == 0 and .same.flows == 0 and .opened.flows == 0' "$RW_WORK/out.json"; then
	ok "--run run-b: none of run-a's flows"
else
	not_ok "--run run-b: exit $rc, $(jq -c '{flows: (.flows | length), same, opened}' "$RW_WORK/out.json" 2>/dev/null)"
fi

# ---- bad input -----------------------------------------------------------------------------------
section "bad input"
printf '{"revision": 3, "runs": [\n' >"$RW_WORK/broken.json"
policy 3 '[{"ip": "10.0.0.1", "tcp": [80]}]' '"tcp": [443]' >"$RW_WORK/private.json"
# bad CODE PATTERN ARGS...: replay ARGS exits CODE and says PATTERN, in text and in JSON
bad() {
	local code=$1 pat=$2 out rc=0
	shift 2
	out=$(rw replay "$@" 2>&1) || rc=$?
	replay_j "$@"
	if [ "$rc" -eq "$code" ] && grep -qE -- "$pat" <<<"$out" &&
		rw_jq_true --argjson c "$code" '.ok == false and .exit == $c' "$RW_WORK/out.json"; then
		ok "replay $*: exit $code, '$out'"
	else
		not_ok "replay $*: exit $rc (want $code): $out"
	fi
}
bad 2 "replay --policy: $RW_WORK/nowhere.json: .*No such file" --policy "$RW_WORK/nowhere.json"
bad 1 "broken.json:2:[0-9]+: " --policy "$RW_WORK/broken.json"
bad 1 "private.json.*runs\[0\]\.allow\[0\]" --policy "$RW_WORK/private.json"
bad 1 "no run 'nope' in the snapshot in force \(revision 1\)" --run nope --allow 93.184.216.34:443
bad 1 "no run 'nope' in the snapshot in force \(revision 1\) or in .*allow.json" --run nope --policy "$RW_WORK/allow.json"
bad 2 "replay --since: '3 days' is not a duration" --since "3 days" --policy "$RW_WORK/allow.json"
bad 2 "replay --allow: '93.184.216.34' is not IP:PORT" --run run-a --allow 93.184.216.34
bad 2 "--allow needs --run ID" --allow 93.184.216.34:443
bad 2 "replay --flow-log $RW_WORK/none.log: No such file" --policy "$RW_WORK/allow.json" --flow-log "$RW_WORK/none.log"
bad 1 "replay --run-upsert $RW_WORK/broken.json:2:[0-9]+: run: " --run-upsert "$RW_WORK/broken.json"
if [ "$(revision)" = "$rev0" ] && [ -n "$rev0" ]; then
	ok "nothing live changed: revision $rev0 still in force"
else
	not_ok "the revision in force moved: $rev0 -> $(revision)"
fi

# ---- the proposal applied: live enforcement agrees ------------------------------------------------
section "live: both.json applied, the same traffic again"
expect_changed "$OPEN1;closed run-a egress 172.20.0.10 443 udp 2 private-destination" \
	"both.json: one flow opened, one cut" --policy "$RW_WORK/both.json" --all
cp "$RW_WORK/out.json" "$RW_WORK/both-replay.json"
from=$(($(wc -l <"$FLOG") + 1))
if rw apply "$RW_WORK/both.json" >/dev/null 2>&1; then
	ok "both.json applied"
else
	not_ok "apply both.json: $(rw apply "$RW_WORK/both.json" 2>&1)"
fi
traffic
rw_wait 10 log_has 10 "$from" || true
# tuple -> verdicts of the kernel, after the apply; tuple -> the replay's proposed verdict.
# (Only TCP and UDP: the ICMP errors the pod's kernel sends for the answers to its closed
# sockets are verdicts too, of flows no replay rebuilds.)
live=$(tail -n +"$from" "$FLOG" | jq -s -c 'map(select((.type == "drop" or .type == "flow") and (.proto == "udp" or .proto == "tcp"))) |
	group_by([.run, .src, .dst, .dport, .proto]) | map({key: ([.[0].run, .[0].src, .[0].dst, (.[0].dport | tostring), .[0].proto] | join(" ")), value: (map(.verdict) | unique)}) | from_entries')
predicted=$(jq -c '[.flows[] | {key: ([.run, .pod, .peer, (.port | tostring), .proto] | join(" ")), value: [.proposed.verdict]}] | from_entries' "$RW_WORK/both-replay.json")
diag "kernel after the apply: $live"
if [ "$(jq -S . <<<"$live")" = "$(jq -S . <<<"$predicted")" ]; then
	ok "live enforcement agrees with the replay: the same 5 flows, the same verdicts"
else
	not_ok "replay predicted $predicted"
fi

# ---- 10 000 flows -----------------------------------------------------------------------------
section "$N_MANY recorded flows"
from=$(($(wc -l <"$FLOG") + 1))
rw_in "$(rw_ns_of b)" "$RW_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for p in range(20000, 20000 + int(sys.argv[1])):
    s.sendto(b"x", ("93.184.216.34", p))' "$N_MANY"
b_recorded() { [ "$(tail -n +"$from" "$FLOG" | grep -c '"run":"run-b"')" -ge "$N_MANY" ]; }
rw_wait 30 b_recorded || true
t0=${EPOCHREALTIME/./}
replay_j --run run-b --policy "$RW_WORK/both.json"
t1=${EPOCHREALTIME/./}
replay_j --run run-b --policy "$RW_WORK/both.json" --flow-log "$FLOG"
t2=${EPOCHREALTIME/./}
diag "replay of $N_MANY flows: $(((t1 - t0) / 1000)) ms from the event store, $(((t2 - t1) / 1000)) ms from the flow log ($(wc -c <"$FLOG") bytes)"
# The agent's share: one `recorded` request answered (folded on its loop, under the store's lock).
# shellcheck disable=SC2016
diag "the agent's recorded answer for run-b: $("$RW_PY" -c '
import socket, sys, time
t = time.monotonic()
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"recorded 0 run-b\n")
s.shutdown(socket.SHUT_WR)
n = 0
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    n += len(d)
print("%d bytes in %d ms" % (n, (time.monotonic() - t) * 1000))' "$RW_SOCK")"
if [ "$rc" -eq 0 ] && rw_jq_true --argjson n "$N_MANY" '.same.flows == $n and .opened.flows == 0 and .closed.flows == 0' "$RW_WORK/out.json"; then
	ok "$N_MANY flows of run-b replayed from the flow log, none changed"
else
	not_ok "$N_MANY flows (flow log): exit $rc, $(jq -c '{same, opened, closed, error}' "$RW_WORK/out.json" 2>/dev/null) $(cat "$RW_WORK/err.txt")"
fi
replay_j --run run-b --policy "$RW_WORK/both.json"
if [ "$rc" -eq 0 ] && rw_jq_true --argjson n "$N_MANY" '.same.flows == $n and .held >= $n' "$RW_WORK/out.json"; then
	ok "$N_MANY flows of run-b replayed from the event store, none changed"
else
	not_ok "$N_MANY flows (store): exit $rc, $(jq -c '{same, opened, closed, held, error}' "$RW_WORK/out.json" 2>/dev/null) $(cat "$RW_WORK/err.txt")"
fi

rw_suite_end
