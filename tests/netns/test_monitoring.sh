#!/usr/bin/env bash
# The monitoring objects end to end (manifests/monitoring): a real agent on a node built in
# namespaces (lib.sh), a real Prometheus scraping its /metrics with the bearer token and
# evaluating the shipped rules, a real Alertmanager routing to a webhook receiver this suite runs
# on the node's loopback. Faults are driven for real; each alert must arrive at the receiver and
# resolve once the fault is healed, and the time from fault to alert is reported:
#
#   refused   a snapshot the agent refuses, pushed by the PolicyWatch server: RunwallSnapshotRefused
#   flood     a sandbox floods refused packets over its event budget (--event-rate 20/20, so that
#             a flood slowed by a loaded machine is still far over it): RunwallEventsSuppressed
#   lease     the PolicyWatch server cut off (nftables): RunwallLeaseNearExpiry, RunwallLeaseExpired
#             and RunwallPolicyWatchDown
#   hook      runwall's tcx link detached from a sandbox's hook behind the agent's back (bpftool):
#             RunwallHookRepaired, once the agent's resync finds it and puts runwall back
#   panels    every expression of the dashboard returns series from that Prometheus
#
# Short intervals: scrapes and evaluations every second, and a test copy of the rule file in
# which every `for` is 2s and every range of an expression ([10m], [15m], ...) is [15s], so that
# an alert arrives within seconds and resolves within 15 s of its healing (the expressions and
# thresholds are the shipped ones otherwise).
#
# Everything lives in namespaces named rwm<pid>-*, pins in /sys/fs/bpf/rwtest-monitoring-<pid>,
# files in /tmp/rwtest-monitoring-<pid>.*; all of it goes on exit, on failure too.
#
#   tests/netns/test_monitoring.sh BUILD
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin monitoring rwm "${1:-build}"

A_IF=enima${ID} A_IP=10.1.2.3
HTTP=127.0.0.1:9750 PROM=127.0.0.1:9090 AM=127.0.0.1:9093 HOOK=127.0.0.1:9099
W=$RW_WORK

bail() {
	echo "Bail out! $*" >&3
	for f in agent prometheus alertmanager webhook; do
		[ -f "$W/$f.log" ] && { echo "#   $f:" >&3; tail -n 10 "$W/$f.log" | sed 's/^/#   /' >&3; }
	done
	exit 1
}
trap rw_suite_cleanup EXIT

for tool in prometheus prometheus-alertmanager curl jq; do
	command -v "$tool" >/dev/null || bail "$tool is missing: run scripts/setup.sh"
done

# ---- the node, the agent ----------------------------------------------------------------------
rw_node_up || bail "the node did not come up"
rw_sandbox_add a "$A_IF" "$A_IP" || bail "sandbox a"
# The control plane: the reference PolicyWatch server (tests/policy_server.py) in the services
# namespace, over TLS with a certificate of a CA made here; a lease of 15 s, heartbeats every 1 s.
SRV=$RW_SVC_LINK PORT=9443 CTL=127.0.0.1:9080
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=ca" \
	-keyout "$W/ca.key" -out "$W/ca.crt" 2>/dev/null || bail "openssl: the CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=server" \
	-keyout "$W/server.key" -out "$W/server.csr" 2>/dev/null || bail "openssl: the server's key"
printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$SRV" >"$W/server.ext"
openssl x509 -req -in "$W/server.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -CAcreateserial -days 2 \
	-extfile "$W/server.ext" -out "$W/server.crt" 2>/dev/null || bail "openssl: the server's certificate"
snapshot() { # snapshot REVISION [POD_IP]
	echo "{\"revision\": $1, \"lease_seconds\": 15,
 \"services\": [{\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443]}],
 \"runs\": [{\"id\": \"run-a\", \"pods\": [\"${2:-$A_IP}\"]}]}"
}
snapshot 1 >"$W/state.json"
rm -f "$W/server.ready"
rw_bg "$W/server.log" ip netns exec "$RW_SVC" "$RW_PY" "$RW_ROOT/tests/policy_server.py" \
	--listen "$SRV:$PORT" --cert "$W/server.crt" --key "$W/server.key" --state "$W/state.json" \
	--control "$CTL" --heartbeat 1 --ready "$W/server.ready"
rw_wait_file "$W/server.ready" || bail "the policy server did not start"
ctl() { rw_in "$RW_SVC" curl -sS -m 10 -X POST --data-binary @- "http://$CTL$1" >/dev/null; }
echo "monitoring-token-$ID" >"$W/token"
rw_agent_start --ifprefix enim --node "node-$ID" --policy-url "https://$SRV:$PORT/v1/watch" \
	--policy-ca "$W/ca.crt" --listen "$HTTP" --http-token-file "$W/token" --event-rate 20/20
rw_agent_wait || bail "the agent did not start"
ready() { rw_jq_true '.ready' <<<"$(rw_status_json)"; }
rw_wait 10 ready || bail "the agent did not enforce its snapshot"

# ---- the rules' test copy, Prometheus, Alertmanager, the receiver -----------------------------
"$RW_PY" - "$RW_ROOT/manifests/monitoring/prometheusrule.yaml" "$W/rules.yml" <<'PY'
import re, sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["spec"]
for g in spec["groups"]:
    g["interval"] = "1s"
    for r in g["rules"]:
        if "for" in r:
            r["for"] = "2s"
        r["expr"] = re.sub(r"\[[0-9]+[smh]\]", "[15s]", r["expr"])
yaml.safe_dump(spec, open(sys.argv[2], "w"), sort_keys=False)
PY
cat >"$W/prometheus.yml" <<EOT
global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}
rule_files: [$W/rules.yml]
alerting:
  alertmanagers: [{static_configs: [{targets: ["$AM"]}]}]
scrape_configs:
  - job_name: runwall
    authorization: {credentials_file: $W/token}
    static_configs: [{targets: ["$HTTP"], labels: {node: node-$ID}}]
EOT
cat >"$W/alertmanager.yml" <<EOT
route:
  receiver: hook
  group_by: [alertname, node]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs: [{url: "http://$HOOK/", send_resolved: true}]
EOT
cat >"$W/webhook.py" <<'PY'
# The receiver: each alert of each notification as a JSON line (status, name, arrival time).
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
out = open(sys.argv[2], "a", buffering=1)
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for a in body["alerts"]:
            out.write(json.dumps({"status": a["status"], "alertname": a["labels"]["alertname"],
                                  "at": time.time()}) + "\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
host, port = sys.argv[1].rsplit(":", 1)
HTTPServer((host, int(port)), H).serve_forever()
PY
: >"$W/alerts.jsonl"
IN_NODE=(nsenter "--net=/run/netns/$RW_NODE" --) # by pid: rw_bg gets the program's own
rw_bg "$W/webhook.log" "${IN_NODE[@]}" "$RW_PY" "$W/webhook.py" "$HOOK" "$W/alerts.jsonl"
rw_bg "$W/alertmanager.log" "${IN_NODE[@]}" prometheus-alertmanager --config.file="$W/alertmanager.yml" \
	--storage.path="$W/am" --web.listen-address="$AM" --cluster.listen-address=
rw_bg "$W/prometheus.log" "${IN_NODE[@]}" prometheus --config.file="$W/prometheus.yml" \
	--storage.tsdb.path="$W/tsdb" --web.listen-address="$PROM"
prom() { rw_node_exec curl -sS -m 5 "http://$PROM/api/v1/$1" "${@:2}"; }
up() { rw_jq_true '.data.result | map(select(.value[1] == "1")) | length == 1' <<<"$(prom query --data-urlencode 'query=up{job="runwall"}' 2>/dev/null)"; }
check "Prometheus scrapes the agent's /metrics with the token (up 1)" rw_wait 30 up || bail "no scrape"
am_up() { rw_node_exec curl -sf -m 2 "http://$AM/-/ready" >/dev/null; }
rw_wait 30 am_up || bail "Alertmanager did not start"
rules_loaded() { rw_jq_true '[.data.groups[].rules[]] | length > 10' <<<"$(prom rules)"; }
check "Prometheus loaded the rules' test copy ($(prom rules | jq '[.data.groups[].rules[]] | length') rules)" rw_wait 10 rules_loaded

# got STATUS ALERT: the receiver has it
got() { rw_jq_true --arg s "$1" --arg a "$2" '[.[] | select(.status == $s and .alertname == $a)] | length > 0' <<<"$(jq -s . "$W/alerts.jsonl")"; }
# fault_at: the fault is now. fault_wait ALERT TIMEOUT: waits for the alert, the time from the
# fault to its arrival in FAULT_MS
fault_at() { FAULT_T0=$EPOCHREALTIME; }
fault_wait() {
	local t0=$FAULT_T0
	if rw_wait "$2" got firing "$1"; then
		FAULT_MS=$(awk -v a="$t0" -v b="$(jq -s --arg a "$1" '[.[] | select(.status == "firing" and .alertname == $a)][0].at' "$W/alerts.jsonl")" 'BEGIN {printf "%d", (b - a) * 1000}')
		return 0
	fi
	return 1
}
quiet() { ! got firing "$1"; }
# healed ALERT: waits (60 s) for its resolution, the time from the heal (fault_at) in HEAL_MS
healed() {
	local t0=$FAULT_T0
	rw_wait 60 got resolved "$1" || return 1
	HEAL_MS=$(awk -v a="$t0" -v b="$(jq -s --arg a "$1" '[.[] | select(.status == "resolved" and .alertname == $a)][0].at' "$W/alerts.jsonl")" 'BEGIN {printf "%d", (b - a) * 1000}')
}
# resolves WHAT ALERT: the check that it resolves, with the time
resolves() {
	if healed "$2"; then ok "$1: $2 resolved, $HEAL_MS ms after the heal"; else not_ok "$1: $2 resolved"; fi
}

# ---- refused: a snapshot the agent refuses ----------------------------------------------------
section refused
check "before: RunwallSnapshotRefused has not fired" quiet RunwallSnapshotRefused
fault_at
snapshot 2 not-an-ip | ctl /snapshot
if fault_wait RunwallSnapshotRefused 30; then
	ok "refused: RunwallSnapshotRefused arrived at the receiver, $FAULT_MS ms after the snapshot was pushed"
else
	not_ok "refused: RunwallSnapshotRefused arrived"; prom alerts | diag
fi
fault_at # the heal
snapshot 3 | ctl /snapshot
resolves "refused: healed (a good snapshot pushed)" RunwallSnapshotRefused

# ---- flood: refusals over the sandbox's event budget -------------------------------------------
section flood
check "before: RunwallEventsSuppressed has not fired" quiet RunwallEventsSuppressed
rw_bg "$W/flood.json" ip netns exec "${RW_SB_NS[a]}" "$RW_PY" "$RW_PROBE" flood \
	93.184.216.34 443 --interval 0.002 --duration 25 --ready "$W/flood.ready"
FLOOD_PID=$RW_LAST_PID
rw_wait_file "$W/flood.ready" || bail "the flood did not start"
fault_at
if fault_wait RunwallEventsSuppressed 25; then
	ok "flood: RunwallEventsSuppressed arrived at the receiver, $FAULT_MS ms after the flood started"
else
	not_ok "flood: RunwallEventsSuppressed arrived"; prom query --data-urlencode 'query=rate(runwall_events_total[15s])' | diag
fi
wait "$FLOOD_PID" 2>/dev/null || true
fault_at # the heal
resolves "flood: over" RunwallEventsSuppressed

# ---- lease: the control plane cut off until the lease expires -------------------------------------
section lease
check "before: RunwallLeaseExpired has not fired" quiet RunwallLeaseExpired
command -v nft >/dev/null || bail "nft is missing (nftables: scripts/setup.sh installs it)"
fault_at
ip netns exec "$RW_SVC" nft -f - <<EOT || bail "nft: the partition"
table inet rwmon {
	chain in { type filter hook input priority 0; tcp dport $PORT drop; }
	chain out { type filter hook output priority 0; tcp sport $PORT drop; }
}
EOT
for a in RunwallLeaseNearExpiry RunwallLeaseExpired RunwallPolicyWatchDown; do
	if fault_wait "$a" 40; then
		ok "lease: $a arrived at the receiver, $FAULT_MS ms after the partition (lease 15 s, near expiry under 10 s left)"
	else
		not_ok "lease: $a arrived"; prom alerts | diag
	fi
done
fault_at # the heal
ip netns exec "$RW_SVC" nft delete table inet rwmon || bail "nft: healing the partition"
for a in RunwallLeaseExpired RunwallPolicyWatchDown; do
	resolves "lease: healed (the partition gone)" "$a"
done

# ---- hook: runwall's program taken off a sandbox's hook behind the agent's back ----------------
section hook
check "before: RunwallHookRepaired has not fired" quiet RunwallHookRepaired
# The tcx link of sandbox a's egress hook, detached as another tool would (bpftool): the pin
# stays, the hook is empty, and the agent finds it so at its next resync and attaches again.
link=$(find "$RW_BPFFS" -name "*_egress_$A_IF" | head -n 1)
[ -n "$link" ] || bail "no pinned egress link for $A_IF under $RW_BPFFS"
fault_at
bpftool link detach pinned "$link" || bail "bpftool link detach $link"
if fault_wait RunwallHookRepaired 40; then
	ok "hook: RunwallHookRepaired arrived at the receiver, $FAULT_MS ms after the link was detached"
else
	not_ok "hook: RunwallHookRepaired arrived"; prom query --data-urlencode 'query=runwall_hook_repairs_total' | diag
fi
check "hook: the agent logged it and put runwall back first" \
	eval 'grep -q "$A_IF: runwall was missing on the egress hook; attaching again" "$RW_WORK/agent.log" && rw_jq_true ".agent.attach.repairs >= 1" <<<"$(rw_status_json)"'
fault_at # the heal: the agent's own repair
resolves "hook: repaired" RunwallHookRepaired

# ---- panels: every dashboard expression returns series ------------------------------------------
section panels
jq -r '.panels[] | .title as $t | .targets[] | "\($t)\t\(.expr)"' "$RW_ROOT/manifests/monitoring/dashboard.json" >"$W/panels.tsv"
while IFS=$'\t' read -r title expr; do
	n=$(prom query --data-urlencode "query=$expr" | jq '.data.result | length')
	if [ "${n:-0}" -gt 0 ]; then
		ok "panel \"$title\": $n series for $expr"
	else
		not_ok "panel \"$title\": no series for $expr"
	fi
done <"$W/panels.tsv"

rw_suite_end
