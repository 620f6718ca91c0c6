#!/usr/bin/env bash
# A revoke closes what it cuts (issue 20, part 2), from real sockets in sandboxes of a node
# built in namespaces (lib.sh). Connections of three runs, all "egress": "open", to a server in
# the services namespace; then one apply narrows run-cut (answer) and run-quiet ("refusal":
# "drop") to an allowlist that lacks the server, and leaves run-kept alone:
#
#   send         run-cut's client sending every 100 ms fails with ECONNRESET within 1 s of the
#                apply returning, and the server's socket sees the reset too
#   server-next  run-cut's client that only reads, whose server writes next: the same
#   idle         run-cut's connection on which nobody sends: the agent's probe after the apply
#                (revoke_probe.c) makes the pod send, and then the same
#   kept         run-kept's connection stays up
#   drop         run-quiet's sending connection hears nothing: no reset either end
#
# Then two runs end while their pods live (removed from the snapshot, the veths still bound):
#
#   ended        revision 3 removes run-end: its sending and its idle connection each fail with
#                ECONNRESET within 1 s of the apply returning, and the server sees both resets
#   ended-drop   revision 4 removes run-endq under a node-wide "refusal": "drop": its sending
#                connection hears nothing, nor does its server
#
# Everything lives in namespaces named rwr<pid>-*, pins in /sys/fs/bpf/rwtest-revoke-<pid>, the
# socket /run/rwtest-revoke-<pid>.sock, files in /tmp/rwtest-revoke-<pid>.*; all of it goes on
# exit, on failure too. Waits scale with RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_revoke.sh BUILD
#
# RW_ATTACH_MODE=tc|tcx picks the agent's --attach-mode (default auto: tcx where the kernel has
# it).
set -Eeuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin revoke rwr "${1:-build}"
trap rw_suite_cleanup EXIT

CUT_IF=enirc${ID}a CUT_IP=10.1.2.3 CUT_RUN=run-cut
KEPT_IF=enirk${ID}b KEPT_IP=10.1.2.4 KEPT_RUN=run-kept
QUIET_IF=enirq${ID}c QUIET_IP=10.1.2.5 QUIET_RUN=run-quiet
END_IF=enire${ID}d END_IP=10.1.2.6 END_RUN=run-end
ENDQ_IF=enirf${ID}e ENDQ_IP=10.1.2.7 ENDQ_RUN=run-endq
PFX=enir
SERVER=93.184.216.34 PORT=7443 # "the public internet" (lib.sh); the port only this suite serves
CONN=$HERE/revoke_conn.py
LIFE=$(rw_scale 60) # no process here outlives this, whatever happens

run_answers() { # run_answers RUN KIND
	rw_counters_json | jq -r --arg r "$1" --arg k "$2" \
		'[.runs[]? | select(.id == $r) | .answers[$k] // 0] | add // 0'
}
node_answers() { rw_counters_json | jq -r --arg k "$1" '.node.answers[$k] // 0'; }

# policy REVISION EGRESS-OF-THE-CUT-RUNS [ENDING-RUNS-STILL-THERE [NODE-REFUSAL]]: the ending
# runs come last, so that removing them moves no other run's rule ids.
policy() {
	local ending=${3-"$END_RUN $ENDQ_RUN"} r ip extra=""
	for r in $ending; do
		ip=$END_IP
		[ "$r" = "$ENDQ_RUN" ] && ip=$ENDQ_IP
		extra+=$(printf ',\n    {"id": "%s", "pods": ["%s"], "egress": "open"}' "$r" "$ip")
	done
	cat <<JSON
{
  "revision": $1,
  "refusal": "${4:-answer}",
  "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
  "runs": [
    {"id": "$CUT_RUN", "pods": ["$CUT_IP"], "egress": "$2"},
    {"id": "$KEPT_RUN", "pods": ["$KEPT_IP"], "egress": "open"},
    {"id": "$QUIET_RUN", "pods": ["$QUIET_IP"], "egress": "$2", "refusal": "drop"}$extra
  ]
}
JSON
}

# client NAME SANDBOX MODE: a connection from the sandbox to the server, in the background.
client() {
	rw_bg "$RW_WORK/$1.jsonl" ip netns exec "${RW_SB_NS[$2]}" "$RW_PY" "$CONN" client \
		--dst "$SERVER" --port "$PORT" --mode "$3" --duration "$LIFE"
}
connected() { [ "$(jq -s 'length' "$RW_WORK/$1.jsonl" 2>/dev/null)" -ge 1 ] 2>/dev/null; }
ended() { [ "$(jq -s 'length' "$RW_WORK/$1.jsonl" 2>/dev/null)" -ge 2 ] 2>/dev/null; }
# the client's own address:port, as the server names its peer
local_of() { jq -rs '.[0].connected' "$RW_WORK/$1.jsonl"; }
server_saw() { jq -c --arg p "$(local_of "$1")" 'select(.peer == $p)' "$RW_WORK/server.jsonl" 2>/dev/null; }

# ---- the node ----------------------------------------------------------------------------------
rw_node_up || rw_bail "the node did not come up"
rw_sandbox_add cut "$CUT_IF" "$CUT_IP" || rw_bail "sandbox cut"
rw_sandbox_add kept "$KEPT_IF" "$KEPT_IP" || rw_bail "sandbox kept"
rw_sandbox_add quiet "$QUIET_IF" "$QUIET_IP" || rw_bail "sandbox quiet"
rw_sandbox_add end "$END_IF" "$END_IP" || rw_bail "sandbox end"
rw_sandbox_add endq "$ENDQ_IF" "$ENDQ_IP" || rw_bail "sandbox endq"
policy 1 open >"$RW_WORK/policy.json"
API=http://127.0.0.1:9100 # the node namespace's own loopback
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" \
	--attach-mode "${RW_ATTACH_MODE:-auto}" --listen 127.0.0.1:9100
rw_agent_wait || rw_bail "the agent did not start"
rw_wait 10 rw_agent_bound 5 || rw_bail "the agent did not bind the five sandboxes and apply revision 1"
diag "attach mode: $(rw_status_json | jq -r '[.sandboxes[]?.hooks.egress.mode // empty] | unique | join(",")')"

rm -f "$RW_WORK/server.ready"
rw_bg "$RW_WORK/server.jsonl" ip netns exec "$RW_SVC" "$RW_PY" "$CONN" server --port "$PORT" \
	--ready "$RW_WORK/server.ready" --duration "$LIFE"
rw_wait_file "$RW_WORK/server.ready" || rw_bail "the server did not start"

client send cut send
client next cut server-next
client idle cut idle
client kept kept send
client quiet quiet send
client end-send end send
client end-idle end idle
client endq endq send
for c in send next idle kept quiet end-send end-idle endq; do
	rw_wait 5 connected "$c" || rw_bail "connection $c did not open: $(cat "$RW_WORK/$c.jsonl")"
done
rw_sleep 0.5 # every flow has a cached verdict: the cut must come from the apply
ok "eight connections open under egress open: $(for c in send next idle kept quiet end-send end-idle endq; do printf '%s ' "$(local_of "$c")"; done)"

# ---- the cut ---------------------------------------------------------------------------------
rst0=$(run_answers "$CUT_RUN" rst)
policy 2 allowlist >"$RW_WORK/policy2.json"
t_begin=$(rw_mono_ns)
rw apply "$RW_WORK/policy2.json" >"$RW_WORK/apply2.out" 2>&1 || rw_bail "apply revision 2: $(cat "$RW_WORK/apply2.out")"
t_apply=$(rw_mono_ns) # late by a python start: the deadline is judged from here, times from t_begin
diag "the apply took $(((t_apply - t_begin) / 1000000)) ms (with two python starts)"
DEADLINE_MS=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 1000 * k}')

# reset_within RUN CONNECTION: the connection fails with ECONNRESET within the deadline of the
# apply that began at t_begin and returned at t_apply, and so does the server's socket.
srv_reset() { rw_jq_true '.errno == "ECONNRESET"' <<<"$(server_saw "$1")"; }
reset_within() {
	local run=$1 c=$2 res ms
	rw_wait 3 ended "$c" || true
	res=$(jq -cs '.[1] // {}' "$RW_WORK/$c.jsonl")
	ms=$(jq -r --argjson t "$t_begin" 'if .t_ns then ((.t_ns - $t) / 1e6 | floor) else "-" end' <<<"$res")
	if rw_jq_true --argjson d "$DEADLINE_MS" --argjson t "$t_apply" \
		'.errno == "ECONNRESET" and (.t_ns - $t) / 1e6 < $d' <<<"$res"; then
		ok "$run's $c connection fails with ECONNRESET $ms ms after the apply began (deadline $DEADLINE_MS ms after it returned)"
	else
		not_ok "$run's $c connection: $res ($ms ms after the apply began), expected ECONNRESET within $DEADLINE_MS ms"
	fi
	if rw_wait 3 srv_reset "$c"; then
		ok "the server's socket of the $c connection sees the reset: $(server_saw "$c")"
	else
		not_ok "the server's socket of the $c connection: '$(server_saw "$c")', expected ECONNRESET"
	fi
}
for c in send next idle; do
	reset_within "$CUT_RUN" "$c"
done
rst=$(($(run_answers "$CUT_RUN" rst) - rst0))
if [ "$rst" -ge 3 ]; then
	ok "$CUT_RUN's counters: $rst refused segments answered rst (both ends reset)"
else
	not_ok "$CUT_RUN's counters: $rst rst answers, expected at least 3"
fi

# The cut run's three connections and the quiet run's one were probed; the kept run's was not.
probes() {
	rw_node_exec curl -s --max-time "$(rw_scale 5)" "$API/metrics" |
		sed -n 's/^runwall_revoke_probes_total{outcome="probed"} //p'
}
probed=$(probes)
if [ "$probed" = 4 ]; then
	ok "/metrics: runwall_revoke_probes_total{outcome=\"probed\"} 4 (the connections of the two narrowed runs)"
else
	not_ok "/metrics: runwall_revoke_probes_total{outcome=\"probed\"} '$probed', expected 4"
fi

# ---- kept, and drop --------------------------------------------------------------------------
rw_sleep 1
if ! ended kept && [ -z "$(server_saw kept)" ]; then
	ok "$KEPT_RUN's connection stays up"
else
	not_ok "$KEPT_RUN's connection: $(cat "$RW_WORK/kept.jsonl"), server: $(server_saw kept)"
fi
if ! ended quiet && [ -z "$(server_saw quiet)" ] && [ "$(run_answers "$QUIET_RUN" rst)" = 0 ]; then
	ok "\"refusal\": \"drop\": $QUIET_RUN's cut connection hears nothing, nor does its server"
else
	not_ok "\"refusal\": \"drop\": $(cat "$RW_WORK/quiet.jsonl"), server: $(server_saw quiet), rst $(run_answers "$QUIET_RUN" rst)"
fi

# ---- a run ends while its pod lives ----------------------------------------------------------
# Its packets are unknown-source now; the veth's binding still proves them the pod's own.
unknown_source() { rw_counters_json | jq -r '[.node.egress, .node.ingress | .["unknown-source"].packets // 0] | add'; }
rst0=$(node_answers rst)
us0=$(unknown_source)
policy 3 allowlist "$ENDQ_RUN" >"$RW_WORK/policy3.json"
t_begin=$(rw_mono_ns)
rw apply "$RW_WORK/policy3.json" >"$RW_WORK/apply3.out" 2>&1 || rw_bail "apply revision 3: $(cat "$RW_WORK/apply3.out")"
t_apply=$(rw_mono_ns)
for c in end-send end-idle; do
	reset_within "$END_RUN (removed, its pod alive)" "$c"
done
rst=$(($(node_answers rst) - rst0))
us=$(($(unknown_source) - us0))
if [ "$rst" -ge 2 ] && [ "$us" -ge 2 ]; then
	ok "the node's counters: $rst refused segments answered rst, $us packets unknown-source since the run ended"
else
	not_ok "the node's counters: $rst rst answers and $us unknown-source packets since the run ended, expected at least 2 of each"
fi

rst0=$(node_answers rst)
policy 4 allowlist "" drop >"$RW_WORK/policy4.json"
rw apply "$RW_WORK/policy4.json" >"$RW_WORK/apply4.out" 2>&1 || rw_bail "apply revision 4: $(cat "$RW_WORK/apply4.out")"
rw_sleep 1.5
if ! ended endq && [ -z "$(server_saw endq)" ] && [ "$(node_answers rst)" = "$rst0" ]; then
	ok "node-wide \"refusal\": \"drop\": $ENDQ_RUN removed while its pod sends, its connection hears nothing, nor does its server"
else
	not_ok "node-wide \"refusal\": \"drop\": $(cat "$RW_WORK/endq.jsonl"), server: $(server_saw endq), rst $rst0 -> $(node_answers rst)"
fi
if ! ended kept && [ -z "$(server_saw kept)" ]; then
	ok "$KEPT_RUN's connection stays up through both"
else
	not_ok "$KEPT_RUN's connection: $(cat "$RW_WORK/kept.jsonl"), server: $(server_saw kept)"
fi
rw_suite_end
