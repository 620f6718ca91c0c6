#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# test_staged.sh: a staged snapshot (issue 38, `runwall apply --staged`) on a real agent, on a
# dual-stack node built in namespaces (lib.sh). run-a (pods 10.1.3.3 and 2600:1f14:abc:1::3,
# allowlist) sends real UDP datagrams; the agent logs every verdict (--flow-log, --event-rate 0)
# and streams them (`runwall -j drops --all`):
#
#   staged    allow.json (revision 2: 93.184.216.34:443/udp for run-a) staged: status shows it
#             and its change; the events to 93.184.216.34:443 carry `staged` (allow, by
#             runs[0].allow[0]) in the flow log, the event stream and the page's data, the others
#             carry none; /metrics counts them (runwall_staged_differences_total); `runwall
#             drops` marks them; the page has the staged column and the would-change filter
#   enforced  the kernel still refuses 93.184.216.34:443 (its verdicts are drops) and the
#             revision in force is 1
#   bad       a broken, a refused (a private IP in an allow rule) and a stale (revision 1)
#             snapshot: refused with their JSON path, line and column; the slot still holds
#             revision 2
#   run       --staged --run run-a.json (the IPv6 destination allowed): the IPv6 events carry
#             the staged verdict, the IPv4 ones to 93.184.216.34:443 no longer do
#   unstage   --unstage drops it: status shows none, the events carry nothing
#   promote   allow.json staged again, then applied: the slot is empty, and the kernel's
#             verdicts, flow by flow, are what the staged snapshot said
#   evidence  the access requests the new generation raises name the rule that would allow
#             each, and count the run's recorded refusals it would have let through
#
# Everything lives in namespaces named rws<pid>-*, pins in /sys/fs/bpf/rwtest-staged-<pid>,
# files in /tmp/rwtest-staged-<pid>.*; all of it goes on exit, on failure too. Waits are for
# conditions, scaled by RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_staged.sh BUILD
set -Eeuo pipefail
export LC_ALL=C # sort

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin staged rws "${1:-build}"

rw_ab_names enis
FLOG=$RW_WORK/flow.log
API=http://127.0.0.1:9100

trap rw_suite_cleanup EXIT

# policy REVISION A_ALLOW: a snapshot; A_ALLOW is run-a's allow list.
policy() {
	cat <<EOF
{
  "revision": $1,
  "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443], "udp": [443]}],
  "runs": [{"id": "run-a", "pods": ["$A_IP", "$A_IP6"], "allow": $2},
           {"id": "run-b", "pods": ["$B_IP"]}]
}
EOF
}
policy 1 '[]' >"$RW_WORK/policy.json"
policy 2 '[{"ip": "93.184.216.34", "udp": [443]}]' >"$RW_WORK/allow.json"
policy 1 '[{"ip": "93.184.216.34", "udp": [443]}]' >"$RW_WORK/stale.json"
policy 3 '[{"ip": "10.0.0.1", "tcp": [80]}]' >"$RW_WORK/private.json"
printf '{"revision": 3, "runs": [\n' >"$RW_WORK/broken.json"
cat >"$RW_WORK/run-a.json" <<EOF
{"id": "run-a", "pods": ["$A_IP", "$A_IP6"], "allow": [{"ip": "$PUB6", "udp": [443]}]}
EOF

# traffic: run-a's datagrams, 9 UDP verdicts.
traffic() {
	rw_udp_send a 93.184.216.34 443 3
	rw_udp_send a 93.184.216.34 9000 2
	rw_udp_send a "$PUB6" 443 2
	rw_udp_send a 172.20.0.10 443 2
}
# verdicts FROM: the flow log's UDP verdicts from line FROM on, one per line:
# "DST PORT VERDICT STAGED" (STAGED: "-", or the staged verdict, reason and rule).
verdicts() {
	tail -n +"$1" "$FLOG" | jq -r 'select((.type == "drop" or .type == "flow") and .proto == "udp") |
		[.dst, (.dport | tostring), .verdict,
		 (if .staged then "\(.staged.verdict)/\(.staged.reason)/\(.staged.rule)/r\(.staged.revision)" else "-" end)] | join(" ")'
}
# udp_lines FROM N: the flow log holds at least N UDP verdicts from line FROM on.
udp_lines() { [ "$(verdicts "$1" | wc -l)" -ge "$2" ]; }
# flows FROM: verdicts() folded: "DST PORT VERDICT STAGED xCOUNT", sorted.
flows() { verdicts "$1" | sort | uniq -c | awk '{print $2, $3, $4, $5, "x" $1}'; }
mark() { echo $(($(wc -l <"$FLOG") + 1)); }
staged_json() { rw_status_json | jq -c '.agent.staged'; }
revision() { rw_status_json | jq -r '.revision // empty'; }
http_get() { rw_node_exec curl -s --max-time "$(rw_scale 5)" "$1" || true; }

# ---- the node ----------------------------------------------------------------------------------
rw_ab_node_up
RECV_PORT=9300
rw_bg "$RW_WORK/recv.log" ip netns exec "$RW_NODE" "$RW_PY" "$HERE/view_check.py" receiver \
	--port "$RECV_PORT" --out "$RW_WORK/requests.jsonl" --ready "$RW_WORK/recv.ready"
rw_wait_file "$RW_WORK/recv.ready" || rw_bail "the access-request receiver did not start"
touch "$RW_WORK/requests.jsonl"
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --event-rate 0 \
	--listen 127.0.0.1:9100 --flow-log "$FLOG" --flow-log-flows --flow-log-rate 0 \
	--access-request-url "http://127.0.0.1:$RECV_PORT/requests"
rw_agent_wait 30 || rw_bail "the agent did not start: $(tail -n 4 "$RW_WORK/agent.log")"
rw_wait 10 rw_agent_bound 2 || rw_bail "the agent did not bind the two sandboxes and apply revision 1"
touch "$FLOG"
check "nothing staged at start" test "$(staged_json)" = null

# ---- staged ------------------------------------------------------------------------------------
section "staged: allow.json beside revision 1"
out=$(rw apply --staged "$RW_WORK/allow.json" 2>&1) && rc=0 || rc=$?
diag <<<"$out"
if [ "$rc" -eq 0 ] && grep -q "^staged revision 2 from $RW_WORK/allow.json" <<<"$out" &&
	grep -q "run-a" <<<"$out"; then
	ok "apply --staged allow.json: staged revision 2, its change to run-a listed"
else
	not_ok "apply --staged allow.json: exit $rc: $out"
fi
st=$(staged_json)
diag "status: $st"
if jq -e --arg f "$RW_WORK/allow.json" '.revision == 2 and .source == $f and (.since | startswith("20")) and
	.n_changes >= 1 and (.changes | map(select(contains("run-a"))) | length >= 1)' <<<"$st" >/dev/null; then
	ok "status: staged revision 2, its source, since when and its change"
else
	not_ok "status: $st"
fi
out=$(rw status 2>&1) || true
check "status (text): the staged line" grep -q "^staged:     revision 2 from $RW_WORK/allow.json since 20" <<<"$out"
check "the revision in force is still 1" test "$(revision)" = 1

rw_drops_bg "$RW_WORK/stream.jsonl" --all || rw_bail "runwall drops did not subscribe"
rw_cmd
rw_bg "$RW_WORK/drops.txt" "${RW_CMD[@]}" drops --reason not-allowlisted --count 5 --timeout "$(rw_scale 20)"
drops_txt_pid=$RW_LAST_PID
rw_wait 10 rw_subscribers_above 1 || rw_bail "the text runwall drops did not subscribe"
from=$(mark)
traffic
rw_wait 10 udp_lines "$from" 9 || true
got=$(flows "$from")
diag <<<"$got"
want="172.20.0.10 443 allow - x2
$PUB6 443 drop - x2
93.184.216.34 443 drop allow/allowed/runs[0].allow[0]/r2 x3
93.184.216.34 9000 drop - x2"
if [ "$got" = "$want" ]; then
	ok "flow log: the 3 events to 93.184.216.34:443 carry staged allow by runs[0].allow[0], the 6 others nothing"
else
	not_ok "flow log: want $(tr '\n' ';' <<<"$want") got $(tr '\n' ';' <<<"$got")"
fi
check "enforcement unchanged: the kernel refused 93.184.216.34:443 three times (not-allowlisted)" \
	test "$(tail -n +"$from" "$FLOG" | jq -r 'select(.dst == "93.184.216.34" and .dport == 443) | .reason' | sort -u)" = not-allowlisted
stream_staged() { [ "$(jq -c 'select(.staged != null)' "$RW_WORK/stream.jsonl" 2>/dev/null | wc -l)" -ge 3 ]; }
rw_wait 10 stream_staged || true
got=$(jq -r 'select(.proto == "udp") | "\(.dst) \(.dport) \(.verdict) \(.staged.verdict // "-")"' "$RW_WORK/stream.jsonl" | sort | uniq -c | awk '{print $2, $3, $4, $5, "x" $1}')
want="172.20.0.10 443 allow - x2
$PUB6 443 drop - x2
93.184.216.34 443 drop allow x3
93.184.216.34 9000 drop - x2"
if [ "$got" = "$want" ]; then
	ok "event stream (drops -j): the same staged verdicts on the same events"
else
	not_ok "event stream: want $(tr '\n' ';' <<<"$want") got $(tr '\n' ';' <<<"$got")"
fi
# The text runwall drops ends at its fifth event (3 to :443, 2 to :9000) or at its timeout.
drops_txt_done() { ! kill -0 "$drops_txt_pid" 2>/dev/null; }
rw_wait 10 drops_txt_done || true
diag <"$RW_WORK/drops.txt"
if grep -q "93.184.216.34:443 .*STAGED r2: allowed by runs\[0\]\.allow\[0\]" "$RW_WORK/drops.txt" &&
	! grep -- "-> 93.184.216.34:9000 " "$RW_WORK/drops.txt" | grep -q STAGED; then
	ok "drops (text): the events to 93.184.216.34:443 marked STAGED r2, those to :9000 not"
else
	not_ok "drops (text): $(cat "$RW_WORK/drops.txt")"
fi
metric='runwall_staged_differences_total{run="run-a",from="drop",to="allow"} 3'
has_metric() { http_get "$API/metrics" | grep -qxF "$metric"; }
if rw_wait 10 has_metric; then
	ok "/metrics: $metric"
else
	not_ok "/metrics: $(http_get "$API/metrics" | grep staged)"
fi
check "/metrics: no series drop->allow other than run-a's, none allow->drop" \
	test "$(http_get "$API/metrics" | grep -c '^runwall_staged_differences_total')" = 1
page_staged() { http_get "$API/api/events?limit=1000" | jq -r '[.events[] | select(.staged != null) | "\(.dst) \(.dport) \(.staged.verdict)"] | unique | join(";")'; }
check "the page's data (/api/events): the staged verdict on the events to 93.184.216.34:443 only" \
	test "$(page_staged)" = "93.184.216.34 443 allow"
check "the page: a staged column and the would-change filter" \
	eval 'http_get "$API/" | grep -q "id=\"f-staged\"" && http_get "$API/" | grep -q "<th class=\"staged\">"'
check "status: 3 differences counted" rw_jq_true '.agent.staged.differences == 3' <(rw_status_json)

# ---- bad staged snapshots ----------------------------------------------------------------------
section "bad: refused with the JSON path, the slot unchanged"
# bad PATH_WANT PATTERN FILE: apply --staged FILE exits 1, says PATTERN, -j has path PATH_WANT
bad() {
	local path=$1 pat=$2 file=$3 out rc=0 j
	out=$(rw apply --staged "$file" 2>&1) || rc=$?
	j=$(rw -j apply --staged "$file" 2>/dev/null) || true
	if [ "$rc" -eq 1 ] && grep -qE -- "$pat" <<<"$out" &&
		jq -e --arg p "$path" '.ok == false and .path == $p and .line > 0 and .staged == 2' <<<"$j" >/dev/null; then
		ok "apply --staged $(basename "$file"): refused at '$path': $out"
	else
		not_ok "apply --staged $(basename "$file"): exit $rc: $out; $j"
	fi
}
bad "runs[0].allow[0].ip" "private.json:4:[0-9]+: runs\[0\]\.allow\[0\]\.ip: " "$RW_WORK/private.json"
bad "revision" "stale.json:[0-9]+:[0-9]+: revision" "$RW_WORK/stale.json"
bad "(document)" "broken.json:2:[0-9]+: \(document\): " "$RW_WORK/broken.json"
check "the slot still holds allow.json's revision 2, revision 1 in force" \
	rw_jq_true --arg f "$RW_WORK/allow.json" '.agent.staged.revision == 2 and .agent.staged.source == $f and .revision == 1' <(rw_status_json)

# ---- one run staged on the policy in force ----------------------------------------------------
section "run: --staged --run run-a.json"
out=$(rw apply --staged --run "$RW_WORK/run-a.json" 2>&1) && rc=0 || rc=$?
diag <<<"$out"
check "apply --staged --run run-a.json: staged revision 2" grep -q "^staged revision 2 from $RW_WORK/run-a.json" <<<"$out"
from=$(mark)
traffic
rw_wait 10 udp_lines "$from" 9 || true
got=$(flows "$from")
want="172.20.0.10 443 allow - x2
$PUB6 443 drop allow/allowed/runs[0].allow[0]/r2 x2
93.184.216.34 443 drop - x3
93.184.216.34 9000 drop - x2"
if [ "$got" = "$want" ]; then
	ok "IPv6: the 2 events to [$PUB6]:443 carry the staged allow, those to 93.184.216.34:443 no longer"
else
	not_ok "run staged: want $(tr '\n' ';' <<<"$want") got $(tr '\n' ';' <<<"$got")"
fi

# ---- unstage -----------------------------------------------------------------------------------
section "unstage"
out=$(rw apply --unstage 2>&1) || true
check "apply --unstage: dropped staged revision 2" test "$out" = "dropped staged revision 2"
check "status: nothing staged" test "$(staged_json)" = null
out=$(rw apply --unstage 2>&1) || true
check "apply --unstage again: nothing was staged" test "$out" = "nothing was staged"
from=$(mark)
traffic
rw_wait 10 udp_lines "$from" 9 || true
check "no event carries staged any more" test "$(tail -n +"$from" "$FLOG" | jq -c 'select(.staged)' | wc -l)" = 0

# ---- promotion ---------------------------------------------------------------------------------
section "promote: allow.json staged, then applied"
rw apply --staged "$RW_WORK/allow.json" >/dev/null 2>&1 || not_ok "apply --staged allow.json again"
from=$(mark)
traffic
rw_wait 10 udp_lines "$from" 9 || true
# What the staged snapshot said of each flow: its verdict where it differs, else the kernel's.
predicted=$(verdicts "$from" | awk '{v = $4 == "-" ? $3 : substr($4, 1, index($4, "/") - 1); print $1, $2, v}' | sort -u)
if rw apply "$RW_WORK/allow.json" >/dev/null 2>&1; then
	ok "allow.json applied: revision $(revision) in force"
else
	not_ok "apply allow.json: $(rw apply "$RW_WORK/allow.json" 2>&1)"
fi
check "promoted: the slot is empty" test "$(staged_json)" = null
from=$(mark)
traffic
rw_wait 10 udp_lines "$from" 9 || true
live=$(verdicts "$from" | awk '{print $1, $2, $3}' | sort -u)
diag "staged said: $(tr '\n' ';' <<<"$predicted")"
diag "kernel now:  $(tr '\n' ';' <<<"$live")"
if [ -n "$live" ] && [ "$live" = "$predicted" ] && grep -q "^93.184.216.34 443 allow$" <<<"$live"; then
	ok "promotion enforces exactly what was staged: the same 4 flows, the same verdicts"
else
	not_ok "promotion: staged $predicted, kernel $live"
fi
# The access requests of generation 2 (the promotion's): each names the rule that would allow
# it and the run's 4 x 2 refusals recorded before it, and its own.
gen2_requests() { [ "$(jq -s '[.[] | select(.body.generation == 2)] | length' "$RW_WORK/requests.jsonl")" -ge 2 ]; }
rw_wait 10 gen2_requests || true
got=$(jq -r 'select(.body.generation == 2) | .body | "\(.destination) \(.port) \(.allow_rule | tojson) \(.evidence.refusals)"' "$RW_WORK/requests.jsonl" | sort)
diag "access requests of generation 2: $(tr '\n' ';' <<<"$got")"
want="$PUB6 443 {\"ip\":\"$PUB6\",\"udp\":[443]} 9
93.184.216.34 9000 {\"ip\":\"93.184.216.34\",\"udp\":[9000]} 9"
if [ "$got" = "$want" ]; then
	ok "access requests: the rule that would allow each, and the 9 refusals of the run it would have let through"
else
	not_ok "access requests: want $(tr '\n' ';' <<<"$want") got $(tr '\n' ';' <<<"$got")"
fi
check "access requests: the evidence's first refusal is older than the request" \
	jq -se '[.[] | select(.body.generation == 2) | .body | select(.evidence.first < .first_seen and .evidence.last == .first_seen)] | length == 2' "$RW_WORK/requests.jsonl" >/dev/null
check "no event carries staged after the promotion" test "$(tail -n +"$from" "$FLOG" | jq -c 'select(.staged)' | wc -l)" = 0

rw_suite_end
