#!/usr/bin/env bash
# The flow log (`runwall agent --flow-log FILE`, issue 37), from a real agent on a node built in
# namespaces (lib.sh):
#
#   fields    refused packets give one JSON line each, with every field of the event stream,
#             "type": "drop" and the node's name
#   flood     sandbox A sends N refused packets at once (the kernel's event budget off, so each
#             is an event): A's lines stay within its budget (burst + rate x the flood's
#             seconds), and its lines plus the counts of its "suppressed" lines equal N and the
#             kernel's events sent for the run, exactly
#   other     sandbox B's refusals during the flood are all written, none suppressed
#   torn      every line of the file parses as one JSON object
#   sighup    after `mv FILE FILE.old` and SIGHUP the agent writes to a new FILE
#   rotate    a second agent run with --flow-log-max-bytes 4096: FILE is renamed FILE.1 before
#             it would pass 4096 bytes; FILE and FILE.1 each stay within it, nothing else
#   json log  with --log-format json each of the agent's own log lines is {"ts","level","msg"}
#   rule      a third agent run with --flow-log-flows and --listen: for an allowed connection
#             (the egress proxy, a service) and a refused one (a deny CIDR), the page's data
#             (/api/events), `runwall -j drops --all` and the flow log name the same rule, the
#             one docs/reasons.md "Rule names" gives
#
# Everything lives in namespaces named rwf<pid>-*, pins in /sys/fs/bpf/rwtest-flowlog-<pid>,
# files in /tmp/rwtest-flowlog-<pid>.*; all of it goes on exit, on failure too. Waits are for
# conditions, scaled by RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_flow_log.sh BUILD
set -Eeuo pipefail

# shellcheck source=tests/netns/lib.sh
source "$(dirname "$0")/lib.sh"
rw_suite_begin flowlog rwf "${1:-build}"

A_IF=enifa${ID}a A_IP=10.1.3.3 A_RUN=run-flooder
B_IF=enifb${ID}b B_IP=10.1.3.4 B_RUN=run-quiet
PFX=enif
NODE_NAME=node-flow-$ID
RATE=5 BURST=10
N=400 # A's flood
M=5   # B's refusals, within its burst
REFUSED=93.184.216.34
FLOG=$RW_WORK/flow.log
FIELDS='["time","ts_ns","dir","verdict","reason","path","answer","run","gen","src","sport","dst","dport","proto","ifindex","rule_id","rule","revision","type","node"]'

trap rw_suite_cleanup EXIT

cat >"$RW_WORK/policy.json" <<EOF
{
  "revision": 1,
  "deny": ["10.0.0.0/16"],
  "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
  "runs": [{"id": "$A_RUN", "pods": ["$A_IP"]}, {"id": "$B_RUN", "pods": ["$B_IP"]}]
}
EOF

# send SANDBOX COUNT PORT: COUNT refused UDP datagrams to $REFUSED:PORT, as fast as it can.
send() {
	rw_in "$(rw_ns_of "$1")" "$RW_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[1])):
    s.sendto(b"x", (sys.argv[2], int(sys.argv[3])))' "$2" "$REFUSED" "$3"
}
# lines FILE RUN TYPE: how many lines of FILE have that run and type
lines() { jq -s --arg r "$2" --arg t "$3" '[.[] | select(.run == $r and .type == $t)] | length' "$1"; }
# suppressed FILE RUN: the sum of the run's suppressed counts in FILE
suppressed() { jq -s --arg r "$2" '[.[] | select(.run == $r and .type == "suppressed") | .count] | add // 0' "$1"; }
# run_events RUN KEY: the kernel's events KEY (sent, lost, suppressed) for the run
run_events() { rw_counters_json | jq -r --arg r "$1" --arg k "$2" '[.runs[]? | select(.id == $r) | .events[$k] // 0] | add // 0'; }
accounted() { [ $(($(lines "$FLOG" "$A_RUN" drop) + $(suppressed "$FLOG" "$A_RUN"))) -eq "$N" ]; }
b_written() { [ "$(lines "$FLOG" "$B_RUN" drop)" -ge "$1" ]; }
# port_lines FILE PORT: lines of FILE for packets to PORT
port_lines() { if [ -e "$1" ]; then jq -s --argjson p "$2" '[.[] | select(.dport == $p)] | length' "$1"; else echo 0; fi; }

# ---- the node ----------------------------------------------------------------------------------
rw_node_up || rw_bail "the node did not come up"
rw_sandbox_add a "$A_IF" "$A_IP" || rw_bail "sandbox a"
rw_sandbox_add b "$B_IF" "$B_IP" || rw_bail "sandbox b"
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --node "$NODE_NAME" \
	--event-rate 0 --flow-log "$FLOG" --flow-log-rate "$RATE/$BURST"
rw_agent_wait 30 || rw_bail "the agent did not start: $(tail -n 4 "$RW_WORK/agent.log")"
rw_wait 10 rw_agent_bound 2 || rw_bail "the agent did not bind the two sandboxes and apply revision 1"

# ---- flood from A, a few from B ----------------------------------------------------------------
section "flood: $N refused datagrams from A, $M from B; flow log rate $RATE/s burst $BURST"
t0=${EPOCHREALTIME/./}
send a "$N" 9
send b "$M" 9
if rw_wait 20 accounted && rw_wait 10 b_written "$M"; then
	ok "A's $N refusals all accounted for: lines + suppressed counts"
else
	not_ok "A: $(lines "$FLOG" "$A_RUN" drop) lines + $(suppressed "$FLOG" "$A_RUN") suppressed, expected $N; B: $(lines "$FLOG" "$B_RUN" drop) lines"
fi
secs=$(((${EPOCHREALTIME/./} - t0 + 999999) / 1000000))
a_lines=$(lines "$FLOG" "$A_RUN" drop)
a_supp=$(suppressed "$FLOG" "$A_RUN")
sent=$(run_events "$A_RUN" sent)
lost=$(run_events "$A_RUN" lost)
diag "A: $a_lines lines, $a_supp suppressed in $(lines "$FLOG" "$A_RUN" suppressed) line(s); kernel: $sent events sent, $lost lost; ${secs}s"
if [ "$a_lines" -le $((BURST + RATE * secs)) ] && [ "$a_lines" -ge "$BURST" ]; then
	ok "A's lines within its budget: $a_lines <= $BURST + $RATE x ${secs}s"
else
	not_ok "A's lines: $a_lines, budget $BURST + $RATE x ${secs}s"
fi
if [ "$lost" -eq 0 ] && [ "$sent" -eq "$N" ] && [ $((a_lines + a_supp)) -eq "$sent" ]; then
	ok "suppressed count exact: $a_lines lines + $a_supp suppressed = $sent events the kernel sent"
else
	not_ok "lines $a_lines + suppressed $a_supp vs kernel sent $sent (lost $lost), sent $N"
fi
if [ "$(lines "$FLOG" "$B_RUN" drop)" -eq "$M" ] && [ "$(lines "$FLOG" "$B_RUN" suppressed)" -eq 0 ]; then
	ok "B's $M refusals all written, none suppressed, during A's flood"
else
	not_ok "B: $(lines "$FLOG" "$B_RUN" drop) lines, $(lines "$FLOG" "$B_RUN" suppressed) suppressed lines"
fi

# ---- every line whole, every field there -------------------------------------------------------
total=$(wc -l <"$FLOG")
parsed=$(jq -c . "$FLOG" 2>/dev/null | wc -l)
if [ "$total" -gt 0 ] && [ "$parsed" -eq "$total" ] && [ "$(tail -c 1 "$FLOG" | od -An -tx1 | tr -d ' ')" = 0a ]; then
	ok "no line torn: all $total lines parse as JSON"
else
	not_ok "$parsed of $total lines parse"
fi
if rw_jq_true --argjson f "$FIELDS" --arg n "$NODE_NAME" --arg d "$REFUSED" \
	'[.[] | select(.type == "drop")] | length > 0 and all(. as $l | ($f | all(. as $k | $l | has($k))) and $l.node == $n and $l.verdict == "drop" and $l.dport == 9 and $l.dst == $d and $l.proto == "udp")' \
	<(jq -s . "$FLOG"); then
	ok "every drop line has the event's fields, type and node $NODE_NAME"
else
	not_ok "a drop line lacks a field: $(jq -c 'select(.type == "drop")' "$FLOG" | head -1)"
fi
if rw_jq_true --arg n "$NODE_NAME" '[.[] | select(.type == "suppressed")] | length > 0 and all(has("run") and has("count") and has("time") and has("ifindex") and .node == $n and .count > 0)' <(jq -s . "$FLOG"); then
	ok "suppressed lines carry run, count, time, ifindex and node"
else
	not_ok "suppressed lines: $(jq -c 'select(.type == "suppressed")' "$FLOG" | head -3)"
fi

# ---- SIGHUP reopens FILE -----------------------------------------------------------------------
section "SIGHUP after mv FILE FILE.old"
mv "$FLOG" "$FLOG.old"
kill -HUP "$RW_AGENT_PID"
reopened() { [ -e "$FLOG" ]; }
rw_wait 10 reopened || true
send b 3 10
new_lines() { [ "$(port_lines "$FLOG" 10)" -eq 3 ]; }
if rw_wait 10 new_lines && [ "$(port_lines "$FLOG.old" 10)" -eq 0 ]; then
	ok "SIGHUP: the agent reopened FILE; B's next 3 lines are in it, none in FILE.old"
else
	not_ok "after SIGHUP: $(port_lines "$FLOG" 10) lines in FILE, $(port_lines "$FLOG.old" 10) in FILE.old"
fi

# ---- rotation at --flow-log-max-bytes, and the agent's JSON log -------------------------------
section "rotation at 4096 bytes, --log-format json"
rw_agent_kill TERM
log_from=$(($(wc -l <"$RW_WORK/agent.log") + 1))
ROT=$RW_WORK/rot.log
MAXB=4096
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --node "$NODE_NAME" \
	--event-rate 0 --flow-log "$ROT" --flow-log-rate 0 --flow-log-max-bytes "$MAXB" \
	--log-format json
rw_agent_wait 30 || rw_bail "the agent did not start again: $(tail -n 4 "$RW_WORK/agent.log")"
rw_wait 10 rw_agent_bound 2 || rw_bail "the agent did not bind the two sandboxes again"
send a 100 11
# The kernel sent all 100 events; the agent drains them before it exits.
all_sent() { [ "$(run_events "$A_RUN" sent)" -ge $((sent + 100)) ]; }
rw_wait 20 all_sent || true
rw_agent_kill TERM # its last line counts what it wrote
sizes() { echo "FILE $(stat -c %s "$ROT" 2>/dev/null) FILE.1 $(stat -c %s "$ROT.1" 2>/dev/null)"; }
if [ -s "$ROT.1" ] && [ "$(stat -c %s "$ROT")" -le "$MAXB" ] && [ "$(stat -c %s "$ROT.1")" -le "$MAXB" ] &&
	[ "$(find "$RW_WORK" -name 'rot.log*' | wc -l)" -eq 2 ]; then
	ok "rotation keeps the disk bounded: $(sizes), each <= $MAXB, one old file"
else
	not_ok "rotation: $(sizes); files: $(find "$RW_WORK" -name 'rot.log*' | tr '\n' ' ')"
fi
if [ "$(cat "$ROT" "$ROT.1" | wc -l)" -eq "$(cat "$ROT" "$ROT.1" | jq -c . 2>/dev/null | wc -l)" ]; then
	ok "no line torn across rotations"
else
	not_ok "a rotated file has a torn line"
fi
tail -n +"$log_from" "$RW_WORK/agent.log" >"$RW_WORK/agent-json.log"
nlog=$(wc -l <"$RW_WORK/agent-json.log")
if [ "$nlog" -gt 0 ] && rw_jq_true 'all(type == "object" and (keys == ["level","msg","ts"]) and (.ts | test("^[0-9-]+T[0-9:.]+Z$")))' \
	<(jq -s . "$RW_WORK/agent-json.log" 2>/dev/null) &&
	grep -q '"msg":"agent running' "$RW_WORK/agent-json.log" &&
	grep -q '"msg":"flow log: [0-9]* lines written, 0 suppressed, 0 lost, [1-9][0-9]* rotations' "$RW_WORK/agent-json.log"; then
	ok "--log-format json: all $nlog agent log lines are {ts, level, msg}; the flow log's counts among them"
else
	not_ok "--log-format json: $(head -3 "$RW_WORK/agent-json.log")"
fi

# ---- the rule that decided, the same everywhere ------------------------------------------------
section "rule: the page's data, drops -j and the flow log name the same rule"
RLOG=$RW_WORK/rule.log
API=http://127.0.0.1:9161
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --node "$NODE_NAME" \
	--event-rate 0 --flow-log "$RLOG" --flow-log-flows --flow-log-rate 0 --listen 127.0.0.1:9161
rw_agent_wait 30 || rw_bail "the agent did not start a third time: $(tail -n 4 "$RW_WORK/agent.log")"
rw_wait 10 rw_agent_bound 2 || rw_bail "the agent did not bind the two sandboxes a third time"
rw_cmd
rw_bg "$RW_WORK/drops.out" "${RW_CMD[@]}" -j drops --all --pod "$A_IP" --count 2 --timeout "$(rw_scale 30)"
DROPS_PID=$RW_LAST_PID
subscribed() { rw_jq_true '.events.subscribers >= 1' <<<"$(rw_status_json)"; }
rw_wait 10 subscribed || not_ok "drops did not subscribe"
# A connection to the egress proxy (its SYN is the new flow: no one need answer) and one to a
# deny CIDR (refused, answered with a reset).
rw_in "$(rw_ns_of a)" "$RW_PY" -c '
import socket, sys
for dst in sys.argv[1:]:
    s = socket.socket()
    s.settimeout(0.3)
    try:
        s.connect((dst, 443))
    except OSError:
        pass
    s.close()' 172.20.0.10 10.0.5.6
wait "$DROPS_PID" || true
api_events() { rw_node_exec curl -s --max-time "$(rw_scale 5)" "$API/api/events?run=$A_RUN&limit=100"; }
# rule_of SOURCE DST: the rule the source names for A's event to DST:443
rule_of() {
	case $1 in
	page) api_events | jq -r --arg d "$2" '[.events[] | select(.dst == $d and .dport == 443)][0].rule // "none"' ;;
	drops) jq -rs --arg d "$2" '[.[] | select(.dst == $d and .dport == 443)][0].rule // "none"' "$RW_WORK/drops.out" ;;
	flowlog) jq -rs --arg d "$2" '[.[] | select(.run == "'"$A_RUN"'" and .dst == $d and .dport == 443)][0].rule // "none"' "$RLOG" ;;
	esac
}
flowlog_has() { [ "$(rule_of flowlog 10.0.5.6)" != none ] && [ "$(rule_of flowlog 172.20.0.10)" != none ]; }
rw_wait 10 flowlog_has || true
for want in "172.20.0.10|egress-proxy 172.20.0.10 tcp/443" "10.0.5.6|deny[0] 10.0.0.0/16"; do
	dst=${want%%|*} rule=${want#*|}
	got="page=$(rule_of page "$dst"); drops=$(rule_of drops "$dst"); flowlog=$(rule_of flowlog "$dst")"
	if [ "$got" = "page=$rule; drops=$rule; flowlog=$rule" ]; then
		ok "A -> $dst:443: the page's data, drops -j and the flow log all name \"$rule\""
	else
		not_ok "A -> $dst:443: $got; want \"$rule\" (drops: $(head -c 600 "$RW_WORK/drops.out"))"
	fi
done
rw_agent_kill TERM

rw_suite_end
