#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# test_view.sh: the live traffic view, against the real agent on a test node made of network
# namespaces (tests/netns/lib.sh): its HTTP API, /metrics, network-access requests, the page in
# a headless Chromium, and `runwall view` merging two agents.
#
#   tests/netns/test_view.sh BUILD_DIR
#
# TAP output. The checks, in the order they run:
#   flags      a non-loopback --listen without a token is refused before anything is set up, so
#              is a non-loopback --probe-listen
#   health     /healthz, /readyz (ready: a snapshot enforced, every sandbox veth attached), the
#              same on the probe listener, which serves nothing else
#   api        known traffic (refusals of every kind, allowed flows, inbound), then /api/events
#              with every filter, since and limit, /api/status (the document `runwall -j status`
#              prints), /api/graph with service names
#   metrics    promtool check metrics; node and per-run packets and bytes equal the kernel's
#              (`runwall counters -j`) and the attempts sent
#   requests   one POST per (run, destination, port, protocol) to a real receiver, none for
#              metadata, private or DNS; dedup; the receiver down then back (nothing lost within
#              the queue bound, the overflow counted); /api/requests and `runwall requests`
#   sse        a new refusal arrives on the stream; resuming with Last-Event-ID loses nothing
#   bad        unknown paths, bad and oversized queries, other methods: the right 4xx
#   hostile    100 idle connections and clients that never read: the agent still serves & drains
#   flood      300 sockets from one address trickling a header: the per-IP limit refuses all but
#              16, /healthz on the probe listener (--probe-listen) and other addresses are still
#              served, a partial header left alone is closed by the header deadline, an event
#              stream opened meanwhile is not
#   loris      16 sockets from each of 17 addresses (more than the 256 slots) trickling a header
#              byte a second: a scraper from another address still gets /metrics (the address
#              holding the most gives up a place), and the header deadline (10 s in all, not an
#              inactivity timeout) closes every trickling socket
#   token      a second agent on a non-loopback address: no/wrong token 401 (as a bearer token
#              or the page's cookie, curl too), the right one 200, the stream with the cookie;
#              the page itself and /healthz open
#   view       `runwall view` merges both agents, tags events with their node, reconnects after
#              an agent restart
#   dns        `runwall view --agents-dns NAME:PORT` in a mount namespace of its own where a
#              hosts file bind-mounted over /etc/hosts gives NAME the two agents' addresses: it
#              follows both; a third agent added to the name is followed, stopped it is down,
#              gone from the name it is dropped
#   dns-stall  the name's only nameserver never answers: the view is ready with its --agent,
#              says the name is being resolved, and exits at once on SIGTERM
#   browser    headless Chromium: refusals in the table and the graph with reason and run,
#              filters, pause, reconnection after an agent restart; a screenshot in BUILD/; the
#              second agent's page asks for the token on a 401 (a wrong one is asked again),
#              keeps it in a SameSite=Strict cookie, and goes live with it
#   run-ends   a run removed from the snapshot leaves /metrics
#   shares     an agent keeping 16 events, the receiver down: one run's refusals fill the request
#              queue and the store; another run's refusals still take a place (the first run's
#              newest gives it up), reach the receiver once when it is back, and stay in the view
#
# Everything lives in namespaces named rwv<pid>-*, pins in /sys/fs/bpf/rwtest-view{,2,3}-<pid>,
# sockets /run/rwtest-view{,2,3}-<pid>.sock, files in /tmp/rwtest-view-<pid>.*; HTTP listens only
# inside the node namespace. All of it is removed on exit (RW_KEEP=1 keeps the files).
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin view rwv "${1:-build}"
ROOT=$RW_ROOT
BPFFS2=/sys/fs/bpf/rwtest-view2-$ID
SOCK2=/run/rwtest-view2-$ID.sock
BPFFS3=/sys/fs/bpf/rwtest-view3-$ID
SOCK3=/run/rwtest-view3-$ID.sock
VC="$HERE/view_check.py"
POLICY_DEFAULT=$ROOT/manifests/policy-default.json
PROMTOOL=${PROMTOOL:-/usr/bin/promtool}
SCREENSHOT=$BUILD/view-screenshot.png

A_IF=eniaaaa0001 A_IP=10.1.2.3 A_RUN=run-7f3a
B_IF=enibbbb0002 B_IP=10.1.2.4 B_RUN=run-9c01
C_IF=vlancccc0003 C_IP=10.1.2.5 C_RUN=run-c0de
D_IF=dnsdddd0004 D_IP=10.1.2.6 D_RUN=run-d00d
# The agents all listen on port 9100 (as a DaemonSet's do, one per node address): the third
# on another loopback address, which the agent treats as loopback (127.0.0.0/8: no token
# required; it is given one all the same, as the view sends it).
API=http://127.0.0.1:9100
PROBE=http://127.0.0.1:9101
API2=http://$RW_NODE_LINK:9100
API3=http://127.0.0.2:9100
VIEW=http://127.0.0.1:9180
VIEW_DNS=http://127.0.0.1:9181
AGENTS_DNS=agents.rwtest
RECV_PORT=9300
INET=93.184.216.34


# vc SUBCOMMAND ARGS...: view_check.py in the node namespace, its PASS/FAIL lines numbered. With
# nsenter (network namespace only), not `ip netns exec`, whose private /sys hides the bpffs from
# the agent the browser test restarts.
vc() {
	local out=$RW_WORK/vc.out
	if ! rw_node_exec "$RW_PY" "$VC" "$@" >"$out" 2>"$out.err"; then
		not_ok "view_check.py $1 failed"
		grep -Ev '^#[0-9]+ 0x|^\s*$' "$out.err" | tail -n 20 | sed 's/^/#   /' >&3
	fi
	rw_tap_lines "$out"
}
# vcq SUBCOMMAND ARGS...: view_check.py in the node namespace, exit status only.
vcq() { rw_node_exec "$RW_PY" "$VC" "$@" >/dev/null 2>&1; }
# http_get URL: the status line, then the body (curl: under emulation a python start takes
# seconds, and this runs often).
http_get() {
	local out
	out=$(rw_node_exec curl -s --max-time "$(rw_scale 5)" -w '\n%{http_code}' "$1") || true
	printf '%s\n%s\n' "${out##*$'\n'}" "${out%$'\n'*}"
}

AGENT2_PID= AGENT3_PID= VIEW_PID= RECV_PID=
cleanup() {
	local rc=$?
	trap - ERR
	rw_diag_on_failure "$rc" 30
	if [ "$FAILED" -ne 0 ] || [ "$rc" -ne 0 ]; then
		diag "view log (last 10 lines):"
		tail -n 10 "$RW_WORK/view.log" 2>/dev/null | sed 's/^/#   /' >&3 || true
	fi
	# The browser test restarts the agent: the pid file has the one running now.
	[ -s "$RW_WORK/agent.pid" ] && RW_AGENT_PID=$(cat "$RW_WORK/agent.pid")
	rw_node_down
	rm -rf "$BPFFS2" "$SOCK2" "$BPFFS3" "$SOCK3"
	rw_work_done "RW_KEEP=1: logs left in $RW_WORK"
}
trap cleanup EXIT
rw_trap_abort

# attempt FROM tcp|udp DST PORT: one attempt, under the SYN RTO (one SYN when refused: the
# counts below are exact). Not stretched under emulation (RW_WAIT_SCALE): past the 1 s RTO a
# refused attempt sends a second SYN. An allowed one needs no answer: its event is its first
# packet's.
ATTEMPT_S=0.8
attempt() {
	rw_probe "$1" "$2" "$3" "$4" --timeout "$ATTEMPT_S" >/dev/null || true
}
# The same as a shell command, for view_check.py to run (it runs in the node namespace).
attempt_cmd() {
	echo "ip netns exec ${RW_SB_NS[$1]} $RW_PY $RW_PROBE $2 $3 $4 --timeout $ATTEMPT_S"
}

rw_require_tools "$RW_PY" jq nsenter unshare curl ip "$PROMTOOL" /usr/bin/chromium \
	/usr/bin/chromedriver
rw_require "python3-selenium is installed" "$RW_PY" -c 'import selenium'
"$RW_ROOT/scripts/bpffs-mount.sh"

section "test node: namespaces ${RW_PREFIX}*"
rw_node_up
rw_sandbox_add a "$A_IF" "$A_IP"
rw_sandbox_add b "$B_IF" "$B_IP"
rw_sandbox_add c "$C_IF" "$C_IP"
rw_sandbox_add d "$D_IF" "$D_IP"
cp "$POLICY_DEFAULT" "$RW_WORK/policy.json"
jq '.runs = [{"id": "run-c0de", "pods": ["10.1.2.5"]}]' "$POLICY_DEFAULT" >"$RW_WORK/policy2.json"
jq '.runs = [{"id": "run-d00d", "pods": ["10.1.2.6"]}]' "$POLICY_DEFAULT" >"$RW_WORK/policy3.json"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$RW_WORK/token"
TOKEN=$(cat "$RW_WORK/token")

# ---- flags -------------------------------------------------------------------------------------

section "flags"
rc=0
rw_node_exec "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" agent --listen "$RW_NODE_LINK:9109" \
	>"$RW_WORK/flag.out" 2>&1 || rc=$?
check "agent --listen on a non-loopback address without --http-token-file: exit 2" test "$rc" = 2
check "... saying why" grep -q "an address other than loopback needs --http-token-file" "$RW_WORK/flag.out"
check "... before pinning anything" test ! -e "$RW_BPFFS"
rc=0
rw_node_exec "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" agent --listen 127.0.0.1:99999 \
	>"$RW_WORK/flag.out" 2>&1 || rc=$?
check "agent --listen 127.0.0.1:99999: exit 2 (bad port)" test "$rc" = 2
rc=0
rw_node_exec "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" agent --listen 127.0.0.1:9109 \
	--probe-listen "$RW_NODE_LINK:9110" >"$RW_WORK/flag.out" 2>&1 || rc=$?
check "agent --probe-listen on a non-loopback address: exit 2" test "$rc" = 2
check "... saying why" grep -q "probe-listen $RW_NODE_LINK:9110: the probes answer without a token: a loopback address only" "$RW_WORK/flag.out"
check "... before pinning anything" test ! -e "$RW_BPFFS"
for args in "--agents-dns $AGENTS_DNS" "--agents-dns $AGENTS_DNS:0" "--agents-dns $AGENTS_DNS:9100 --dns-refresh 0" ""; do
	rc=0
	# shellcheck disable=SC2086 # the arguments split on purpose
	"$RW_RUNWALL" view $args >"$RW_WORK/flag.out" 2>&1 || rc=$?
	check "view ${args:-(no agent)}: exit 2 ($(head -n 1 "$RW_WORK/flag.out" | cut -c 1-80))" test "$rc" = 2
done

# ---- the agent, the receiver -------------------------------------------------------------------

section "agent with --listen and --access-request-url"
start_receiver() {
	rm -f "$RW_WORK/recv.ready"
	rw_bg "$RW_WORK/recv.log" ip netns exec "$RW_NODE" "$RW_PY" "$VC" receiver --port "$RECV_PORT" \
		--out "$RW_WORK/requests.jsonl" --ready "$RW_WORK/recv.ready"
	RECV_PID=$RW_LAST_PID
	rw_wait_file "$RW_WORK/recv.ready"
}
start_receiver
touch "$RW_WORK/requests.jsonl"
AGENT_ARGS=(--ifprefix eni --policy "$RW_WORK/policy.json" --listen 127.0.0.1:9100
	--probe-listen 127.0.0.1:9101 --node node-a
	--access-request-url "http://127.0.0.1:$RECV_PORT/requests" --access-request-queue 4)
rw_agent_start "${AGENT_ARGS[@]}"
rw_agent_wait
check "/readyz: 200 once the snapshot is enforced and both veths are attached" \
	vcq wait-ready "$API/readyz" --timeout 10
check "/readyz says so" grep -q "^ready revision 1, 2 sandbox veths attached" <(http_get "$API/readyz" | tail -n +2)
check "/healthz: 200 ok" test "$(http_get "$API/healthz" | tr '\n' ' ')" = "200 ok  "
check "probe listener: /healthz 200 ok" test "$(http_get "$PROBE/healthz" | tr '\n' ' ')" = "200 ok  "
check "probe listener: /readyz the same answer" test "$(http_get "$PROBE/readyz")" = "$(http_get "$API/readyz")"
check "probe listener: nothing else (/metrics 404)" test "$(http_get "$PROBE/metrics" | sed -n 1p)" = 404
check "probe listener: nor the page (/ 404)" test "$(http_get "$PROBE/" | sed -n 1p)" = 404

# ---- known traffic -----------------------------------------------------------------------------

section "api: known traffic"
# One batch per sender, each attempt's packets counted as they leave its eth0 (probe.py batch
# --count-iface): natively a refused TCP attempt is one SYN; on a loaded machine or under
# emulation its close can come after the 1 s RTO, and the retransmitted SYN is a refusal too.
# The expected counts below are what was sent.
sent_batch() { # sent_batch FROM < SPEC
	rw_probe "$1" batch --timeout "$ATTEMPT_S" --count-iface eth0 >>"$RW_WORK/sent.jsonl"
}
sent() { # sent REGEX: packets sent by the attempts whose id matches
	jq -s --arg re "^($1)\$" '[.[] | select(.id | test($re)) | .pkts] | add // 0' "$RW_WORK/sent.jsonl"
}
sent_batch a <<EOF
a443a tcp $INET 443
a443b tcp $INET 443
a443c tcp $INET 443
a8443 tcp $INET 8443
audp udp $INET 443
ameta tcp 169.254.169.254 80
apriv tcp 10.0.5.5 443
adns udp 172.20.0.53 53
aproxy tcp 172.20.0.10 443
EOF
sent_batch b <<EOF
bopen tcp $INET 443
bpriv tcp 10.0.5.5 443
bmeta tcp 169.254.169.254 80
EOF
sent_batch svc <<EOF
in4096 tcp $A_IP 4096 172.20.0.12
in22 tcp $A_IP 22 172.20.0.12
EOF
N443=$(sent 'a443[abc]')
NNA=$(sent 'a443[abc]|a8443|audp')
NMETA=$(sent ameta)
NPRIV_B=$(sent bpriv)
NIN22=$(sent in22)
diag "sent: $N443 SYNs to $INET:443 in 3 attempts, $NNA not-allowlisted packets in 5, metadata $NMETA, b's private $NPRIV_B, inbound to 22 $NIN22"
check "every attempt of the known traffic ran and was counted" \
	test "$(jq -s 'length == 14 and all(.[]; .pkts >= 1)' "$RW_WORK/sent.jsonl")" = true
rw_sleep 0.5

cat >"$RW_WORK/events.spec" <<EOF
{"present": [
  {"run": "$A_RUN", "verdict": "drop", "reason": "not-allowlisted", "dst": "$INET", "dport": 443, "proto": "tcp", "node": "node-a", "rule": "egress allowlist: no rule"},
  {"run": "$A_RUN", "verdict": "drop", "reason": "not-allowlisted", "dst": "$INET", "dport": 443, "proto": "udp"},
  {"run": "$A_RUN", "verdict": "drop", "reason": "metadata", "dst": "169.254.169.254", "dport": 80, "rule": "169.254.169.254 metadata"},
  {"run": "$A_RUN", "verdict": "drop", "reason": "private-destination", "dst": "10.0.5.5", "dport": 443, "rule": "deny[0] 10.0.0.0/16"},
  {"run": "$A_RUN", "verdict": "drop", "reason": "dns", "dst": "172.20.0.53", "dport": 53, "rule": "built-in: port 53 by a rule only"},
  {"run": "$A_RUN", "verdict": "allow", "reason": "allowed", "dst": "172.20.0.10", "dport": 443, "service": "egress-proxy", "rule": "egress-proxy 172.20.0.10 tcp/443"},
  {"run": "$B_RUN", "verdict": "allow", "reason": "allowed", "dst": "$INET", "dport": 443, "path": "open"},
  {"run": "$B_RUN", "verdict": "drop", "reason": "metadata", "dst": "169.254.169.254"},
  {"run": "$A_RUN", "verdict": "allow", "dir": "ingress", "src": "172.20.0.12", "dport": 4096, "rule": "inbound app-tier 172.20.0.12 tcp/4096"},
  {"run": "$A_RUN", "verdict": "drop", "reason": "inbound-denied", "dir": "ingress", "src": "172.20.0.12", "dport": 22, "rule": "inbound: no rule"}
 ],
 "counts": [
  {"run": "$A_RUN", "reason": "not-allowlisted", "dst": "$INET", "dport": 443, "proto": "tcp", "_n": $N443},
  {"run": "$A_RUN", "reason": "not-allowlisted", "_n": $NNA}
 ],
 "filters": [
  ["run=$B_RUN", "run=$B_RUN"],
  ["reason=metadata", "reason=metadata"],
  ["verdict=allow", "verdict=allow"],
  ["verdict=drop&run=$A_RUN", "verdict=drop"],
  ["pod=$B_IP", "run=$B_RUN"],
  ["dst=$INET:8443", "dport=8443"],
  ["node=node-a", "node=node-a"]
 ]}
EOF
vc events "$API" --expect "$RW_WORK/events.spec"

cat >"$RW_WORK/graph.spec" <<EOF
{"edges": [
  {"sandbox": "node-a/$A_RUN/$A_IP", "destination": "$INET", "reasons": {"not-allowlisted": $NNA}, "ports": ["tcp/443", "tcp/8443", "udp/443"]},
  {"sandbox": "node-a/$A_RUN/$A_IP", "destination": "169.254.169.254", "reasons": {"metadata": $NMETA}},
  {"sandbox": "node-a/$A_RUN/$A_IP", "destination": "172.20.0.10", "reasons": {"allowed": 1}, "ports": ["tcp/443"]},
  {"sandbox": "node-a/$B_RUN/$B_IP", "destination": "$INET", "reasons": {"allowed": 1}},
  {"sandbox": "node-a/$A_RUN/$A_IP", "destination": "172.20.0.12", "dir": "ingress", "reasons": {"allowed": 1, "inbound-denied": $NIN22}}
 ],
 "sandboxes": [{"id": "node-a/$A_RUN/$A_IP", "run": "$A_RUN"}, {"id": "node-a/$B_RUN/$B_IP", "run": "$B_RUN"}],
 "names": {"172.20.0.10": "egress-proxy", "$INET": ""}}
EOF
vc graph "$API" --expect "$RW_WORK/graph.spec"

st=$(http_get "$API/api/status" | tail -n +2)
check "/api/status: the status JSON (ready, revision 1, both runs, both veths, node)" \
	rw_jq_true --arg a "$A_IF" '.ok and .ready and .revision == 1 and (.runs | length) == 2 and
		([.sandboxes[].ifname] | index($a)) != null and .node == "node-a"' <<<"$st"
# One document: /api/status is what `runwall -j status` prints on the same node, plus `node`.
# Masked: what may move between the two reads (the ring's unread bytes, the time to an attach
# retry); the rest must be equal, key for key.
status_mask='del(.node) | .maps |= map(if .pin == "rw_events" then .entries = 0 else . end) |
	.sandboxes |= map(del(.attach_retry_in_ms))'
same_status() {
	http_get "$API/api/status" | tail -n +2 | jq -S "$status_mask" >"$RW_WORK/status-api.json" 2>&1 || true
	rw_status_json | jq -S "$status_mask" >"$RW_WORK/status-cli.json" 2>&1 || true
	cmp -s "$RW_WORK/status-api.json" "$RW_WORK/status-cli.json"
}
if rw_wait 5 same_status; then
	ok "/api/status is the document runwall -j status prints (plus node)"
else
	not_ok "/api/status is the document runwall -j status prints (plus node)"
	diff "$RW_WORK/status-cli.json" "$RW_WORK/status-api.json" | head -n 40 | sed 's/^/#   /' >&3 || true
fi

# ---- metrics -----------------------------------------------------------------------------------

section "metrics"
rw -j counters >"$RW_WORK/counters.json"
vc metrics "$API" --counters "$RW_WORK/counters.json" --promtool "$PROMTOOL" --runs "$A_RUN,$B_RUN" \
	--expect "runwall_run_packets_total{run=\"$A_RUN\",direction=\"egress\",reason=\"not-allowlisted\"}=$NNA" \
	--expect "runwall_run_packets_total{run=\"$A_RUN\",direction=\"egress\",reason=\"metadata\"}=$NMETA" \
	--expect "runwall_run_packets_total{run=\"$B_RUN\",direction=\"egress\",reason=\"private-destination\"}=$NPRIV_B" \
	--expect "runwall_run_packets_total{run=\"$A_RUN\",direction=\"ingress\",reason=\"inbound-denied\"}=$NIN22" \
	--expect "runwall_refused_destination_top{dst=\"$INET\",port=\"443\",proto=\"tcp\",reason=\"not-allowlisted\"}=$N443" \
	--expect "runwall_policy_revision=1" \
	--expect "runwall_sandboxes{state=\"enforced\"}=2" \
	--expect "runwall_policy_apply_duration_seconds_count=1" \
	--absent "runwall_run_packets_total{run=\"$C_RUN\""

# ---- access requests ---------------------------------------------------------------------------

section "requests: network-access requests"
n_requests() { wc -l <"$RW_WORK/requests.jsonl"; }
has_requests() { [ "$(n_requests)" -ge "$1" ]; }
rw_wait 5 has_requests 3 || true
check "requests: 3 POSTs, one per not-allowlisted (run, destination, port, protocol)" test "$(n_requests)" = 3
check "requests: tcp/443, tcp/8443 and udp/443 to $INET, each once, with every field" jq -se --arg run "$A_RUN" --arg dst "$INET" '
	(map(.body | "\(.destination):\(.port)/\(.protocol)") | sort) == ["\($dst):443/tcp", "\($dst):443/udp", "\($dst):8443/tcp"] and
	all(.[]; .path == "/requests" and .type == "application/json" and .body.run == $run and
		.body.generation == 1 and .body.pod == "10.1.2.3" and .body.count >= 1 and
		(.body.first_seen | test("^20[0-9-]+T")) and .body.reason == "not-allowlisted" and
		.body.rule == "egress allowlist: no rule")' \
	"$RW_WORK/requests.jsonl" >/dev/null
check "requests: none for metadata, private, DNS, or the open-mode run's allowed traffic" \
	jq -se 'all(.[]; .body.destination == "93.184.216.34" and .body.run == "run-7f3a")' "$RW_WORK/requests.jsonl" >/dev/null
sent_batch a <<<"a443d tcp $INET 443"
N443=$(sent 'a443[abcd]')
rw_sleep 0.5
check "requests: a repeated refusal raises no new request" test "$(n_requests)" = 3
req=$(http_get "$API/api/requests" | tail -n +2)
check "/api/requests: the three, sent, with the count so far ($N443 for tcp/443, 4 attempts)" rw_jq_true --argjson n "$N443" '
	(.requests | length) == 3 and all(.requests[]; .state == "sent" and .attempts == 1) and
	(.requests[] | select(.port == 443 and .protocol == "tcp") | .count) == $n and
	.stats.sent == 3 and .stats.pending == 0' <<<"$req"
requests_table() { rw requests >"$RW_WORK/requests.txt" && grep -q "$INET:8443/tcp .*sent" "$RW_WORK/requests.txt"; }
requests_json() { rw -j requests | rw_jq_true '.ok and (.requests | length) == 3'; }
check "runwall requests: a table of them" requests_table
check "runwall -j requests: the same list" requests_json

# The receiver goes down; 6 new destinations are refused with a queue of 4: 4 wait, 2 overflow.
kill "$RECV_PID"
wait "$RECV_PID" 2>/dev/null || true
# One batch (the attempts start in this order): under emulation six separate probes take long
# enough for the head's retries (about 75 s in all) to run out.
printf 'q%s tcp %s %s\n' 5001 "$INET" 5001 5002 "$INET" 5002 5003 "$INET" 5003 5004 "$INET" 5004 \
	5005 "$INET" 5005 5006 "$INET" 5006 | sent_batch a
pending_is() { http_get "$API/api/requests" | tail -n +2 | rw_jq_true ".stats.pending == $1 and .stats.retries >= 1"; }
check "requests: receiver down: 4 pending and retried, 2 over the queue bound dropped" \
	rw_wait 5 pending_is 4
overflow_counted() {
	http_get "$API/api/requests" | tail -n +2 | rw_jq_true '.stats.dropped == 2' &&
		http_get "$API/metrics" | grep -qx 'runwall_access_requests_total{outcome="dropped"} 2'
}
# The two over the bound are refused after the four queued ones: wait for them too (the drain
# hands events over in ticks, so the last two can arrive after the fourth pending one shows).
check "requests: the overflow is counted (/api/requests and /metrics)" rw_wait 5 overflow_counted
start_receiver
rw_wait 15 has_requests 7 || true
check "requests: receiver back: the 4 queued ones arrive, in order, nothing lost within the bound" \
	jq -se '[.[3:][] | .body.port] == [5001, 5002, 5003, 5004]' "$RW_WORK/requests.jsonl" >/dev/null

# ---- SSE ---------------------------------------------------------------------------------------

section "sse: the stream"
vc sse "$API" --trigger "$(attempt_cmd a tcp "$INET" 7001)" \
	--trigger2 "$(attempt_cmd a tcp "$INET" 7002); $(attempt_cmd a tcp "$INET" 7003)" \
	--want "{\"run\": \"$A_RUN\", \"dport\": 7001, \"reason\": \"not-allowlisted\"}" --min-missed 2
vc sse "$API" --query "reason=not-allowlisted" --trigger "$(attempt_cmd a tcp "$INET" 7004); $(attempt_cmd a tcp 169.254.169.254 80)" \
	--trigger2 "$(attempt_cmd a tcp 169.254.169.254 80); $(attempt_cmd a tcp "$INET" 7005)" \
	--want "{\"run\": \"$A_RUN\", \"dport\": 7004}" --min-missed 1

# ---- bad input ---------------------------------------------------------------------------------

section "bad: bad requests get the right 4xx"
vc bad "$API"
section "hostile: idle and stalled clients"
vc hostile "$API" --trigger "$(attempt_cmd a tcp "$INET" 7100)" \
	--want "{\"run\": \"$A_RUN\", \"dport\": 7100, \"reason\": \"not-allowlisted\"}"
check "the agent survived all of it" kill -0 "$RW_AGENT_PID"
section "flood: 300 trickling sockets from one address"
vc flood "$API" --probe "$PROBE" --source 127.0.0.3 --partial-source 127.0.0.4 --stream-source 127.0.0.5 \
	--count 300 --per-ip 16
check "the agent survived the flood" kill -0 "$RW_AGENT_PID"
section "loris: slow headers from 17 addresses, more than the 256 slots"
vc loris "$API" --prefix 127.0.2 --addresses 17 --per-ip 16 --scraper 127.0.3.1 --deadline 10
check "the agent survived the slow headers" kill -0 "$RW_AGENT_PID"

# ---- a second agent, with a token, and `runwall view` --------------------------------------------

section "token: a second agent on $RW_NODE_LINK:9100"
start_agent2() {
	rw_bg "$RW_WORK/agent2.log" nsenter "--net=/run/netns/$RW_NODE" -- "$RW_RUNWALL" --bpffs "$BPFFS2" \
		--socket "$SOCK2" agent --ifprefix vlan --policy "$RW_WORK/policy2.json" \
		--listen "$RW_NODE_LINK:9100" --http-token-file "$RW_WORK/token" --node node-b
	AGENT2_PID=$RW_LAST_PID
}
start_agent2
check "second agent: /readyz 200 without a token" vcq wait-ready "$API2/readyz" --timeout 10
vc token "$API2" --token "$TOKEN"
# The same with curl, as an operator would: the cookie is what the page sends.
code() { rw_node_exec curl -s -o /dev/null -w '%{http_code}' --max-time "$(rw_scale 5)" "$@"; }
check "curl: /api/events without a token -> 401" test "$(code "$API2/api/events")" = 401
check "curl: /api/events with a wrong cookie -> 401" test "$(code --cookie "runwall_token=x$TOKEN" "$API2/api/events")" = 401
check "curl: /api/events with the right cookie -> 200" test "$(code --cookie "runwall_token=$TOKEN" "$API2/api/events")" = 200
check "curl: /api/events with the bearer token -> 200" test "$(code -H "Authorization: Bearer $TOKEN" "$API2/api/events")" = 200
# The stream with the cookie: its headers, then the retry line; curl ends it at --max-time.
rw_node_exec curl -s -N -D "$RW_WORK/sse.head" --max-time "$(rw_scale 2)" --cookie "runwall_token=$TOKEN" \
	"$API2/api/events/stream" >"$RW_WORK/sse.body" || true
check "curl: the SSE stream with the cookie -> 200 text/event-stream, then events" \
	bash -c "grep -q '^HTTP/1.1 200' '$RW_WORK/sse.head' && grep -qi '^content-type: text/event-stream' '$RW_WORK/sse.head' && grep -q '^retry: 1000' '$RW_WORK/sse.body'"
check "curl: the SSE stream without the cookie -> 401" test "$(code "$API2/api/events/stream")" = 401
attempt c tcp "$INET" 443
attempt c tcp 169.254.169.254 80

section "view: runwall view --agent $API --agent $API2"
rw_bg "$RW_WORK/view.log" nsenter "--net=/run/netns/$RW_NODE" -- "$RW_RUNWALL" view --agent "$API" \
	--agent "$API2" --token-file "$RW_WORK/token" --listen 127.0.0.1:9180
VIEW_PID=$RW_LAST_PID
check "view: /readyz 200 once both agents are connected" vcq wait-ready "$VIEW/readyz" --timeout 10
vc merged "$VIEW" --nodes node-a,node-b \
	--want "{\"node\": \"node-b\", \"run\": \"$C_RUN\", \"reason\": \"metadata\"}" \
	--want "{\"node\": \"node-a\", \"run\": \"$A_RUN\", \"reason\": \"not-allowlisted\", \"dport\": 8443}"
check "view: the page is served" bash -c "nsenter --net=/run/netns/$RW_NODE $RW_PY $VC get $VIEW/ | grep -q '<title>runwall: live traffic</title>'"
req=$(http_get "$VIEW/api/requests" | tail -n +2)
check "view: /api/requests merges the agents' (tagged node-a)" \
	rw_jq_true '(.requests | length) >= 7 and all(.requests[]; .node == "node-a")' <<<"$req"
# The second agent restarts: the view reconnects and follows the new one.
kill "$AGENT2_PID"
wait "$AGENT2_PID" 2>/dev/null || true
start_agent2
vcq wait-ready "$API2/readyz" --timeout 10 || true
since=$(http_get "$VIEW/api/events" | tail -n +2 | jq .cursor)
attempt c tcp "$INET" 9443
check "view: after the second agent restarts, its new refusals arrive (reconnected)" \
	vcq wait-event "$VIEW" --since "$since" --timeout 10 --want "{\"node\": \"node-b\", \"dport\": 9443}"

# ---- discovery by DNS ----------------------------------------------------------------------------

section "dns: runwall view --agents-dns $AGENTS_DNS:9100"
# The name lives in a hosts file bind-mounted over /etc/hosts in the view's own mount namespace
# (never the machine's /etc/hosts). Written in place (the bind mount holds its inode): first
# the two agents' addresses, as a headless Service answers with one address per pod.
printf '127.0.0.1 localhost\n127.0.0.1 %s\n%s %s\n' "$AGENTS_DNS" "$RW_NODE_LINK" "$AGENTS_DNS" >"$RW_WORK/hosts"
# shellcheck disable=SC2016 # expanded by the inner shell
rw_bg "$RW_WORK/view-dns.log" unshare --mount --propagation private -- \
	sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$RW_WORK/hosts" \
	nsenter "--net=/run/netns/$RW_NODE" -- "$RW_RUNWALL" view --agents-dns "$AGENTS_DNS:9100" \
	--dns-refresh 1 --token-file "$RW_WORK/token" --listen 127.0.0.1:9181
VIEW_DNS_PID=$RW_LAST_PID
check "dns: /readyz 200 once every agent the name gives is connected" vcq wait-ready "$VIEW_DNS/readyz" --timeout 10
vc wait-agents "$VIEW_DNS" --want node-a:up,node-b:up --dns 2
# (node-b restarted above: what it has in memory is from then on.)
vc merged "$VIEW_DNS" --nodes node-a,node-b \
	--want "{\"node\": \"node-b\", \"run\": \"$C_RUN\", \"dport\": 9443}" \
	--want "{\"node\": \"node-a\", \"run\": \"$A_RUN\", \"reason\": \"not-allowlisted\", \"dport\": 8443}"
check "dns: the machine's /etc/hosts does not have the name" bash -c "! grep -q '$AGENTS_DNS' /etc/hosts"
# A third agent (a new node): once the name gives its address too, the view follows it.
rw_bg "$RW_WORK/agent3.log" nsenter "--net=/run/netns/$RW_NODE" -- "$RW_RUNWALL" --bpffs "$BPFFS3" \
	--socket "$SOCK3" agent --ifprefix dnsd --policy "$RW_WORK/policy3.json" \
	--listen 127.0.0.2:9100 --http-token-file "$RW_WORK/token" --node node-d
AGENT3_PID=$RW_LAST_PID
check "third agent: /readyz 200 on 127.0.0.2:9100" vcq wait-ready "$API3/readyz" --timeout 10
echo "127.0.0.2 $AGENTS_DNS" >>"$RW_WORK/hosts"
vc wait-agents "$VIEW_DNS" --want node-a:up,node-b:up,node-d:up --dns 3 --what "dns: a third address"
since=$(http_get "$VIEW_DNS/api/events" | tail -n +2 | jq .cursor)
attempt d tcp 169.254.169.254 80
check "dns: the third agent's refusals arrive, tagged node-d" \
	vcq wait-event "$VIEW_DNS" --since "$since" --timeout 10 --want "{\"node\": \"node-d\", \"run\": \"$D_RUN\", \"reason\": \"metadata\"}"
# Stopped, it is down (its address still in the name: the view keeps trying it)...
kill "$AGENT3_PID"
wait "$AGENT3_PID" 2>/dev/null || true
vc wait-agents "$VIEW_DNS" --want node-a:up,node-b:up,node-d:down --dns 3 --what "dns: an agent stopped"
check "dns: not ready while an agent is down" bash -c "nsenter --net=/run/netns/$RW_NODE $RW_PY $VC get $VIEW_DNS/readyz | sed -n 1p | grep -qx 503"
# ... and once the name no longer gives its address, dropped.
# Commented out with a one-byte write: rewriting the file would truncate it first, and a
# resolution at that moment would not find the name there and ask DNS, which this node's
# namespace cannot reach (the view keeps its agents through a resolver failure, the time it
# takes is the resolver's timeout).
off=$(grep -bo '^127\.0\.0\.2 ' "$RW_WORK/hosts" | cut -d: -f1)
printf '#' | dd of="$RW_WORK/hosts" bs=1 seek="$off" conv=notrunc status=none
vc wait-agents "$VIEW_DNS" --want node-a:up,node-b:up --dns 2 --what "dns: an address gone from the name"
check "dns: the view said so" grep -q "agent http://127.0.0.2:9100 (node-d) is gone from $AGENTS_DNS: dropped" "$RW_WORK/view-dns.log"
check "dns: ready again" vcq wait-ready "$VIEW_DNS/readyz" --timeout 5
kill "$VIEW_DNS_PID"
wait "$VIEW_DNS_PID" 2>/dev/null || true
rm -rf "$BPFFS3" "$SOCK3"

section "dns-stall: a resolver that never answers"
# The view's name lookups run beside its loop: with the only nameserver one that reads every
# query and never answers (each lookup then takes 2 x 30 s), the view still reports its --agent
# ready at once, says the name is being resolved, and exits at once on SIGTERM.
printf 'nameserver 127.0.0.53\noptions timeout:30 attempts:2\n' >"$RW_WORK/resolv.conf"
rw_bg "$RW_WORK/blackhole.log" ip netns exec "$RW_NODE" "$RW_PY" "$VC" dns-blackhole --addr 127.0.0.53 \
	--ready "$RW_WORK/blackhole.ready"
rw_wait_file "$RW_WORK/blackhole.ready"
# shellcheck disable=SC2016 # expanded by the inner shell
rw_bg "$RW_WORK/view-stall.log" unshare --mount --propagation private -- \
	sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' sh "$RW_WORK/resolv.conf" \
	nsenter "--net=/run/netns/$RW_NODE" -- "$RW_RUNWALL" view --agent "$API" \
	--agents-dns "stalled.$AGENTS_DNS:9100" --dns-refresh 1 --listen 127.0.0.1:9182
VIEW_STALL_PID=$RW_LAST_PID
check "dns-stall: /readyz 200 with the --agent connected while the name is still being resolved" \
	vcq wait-ready "http://127.0.0.1:9182/readyz" --timeout 5
resolving() {
	http_get "http://127.0.0.1:9182/api/status" | tail -n +2 |
		rw_jq_true '.dns[0].resolving and .dns[0].addresses == 0 and (.agents | length) == 1'
}
check "dns-stall: /api/status says the name is being resolved" rw_wait 3 resolving
kill "$VIEW_STALL_PID"
check "dns-stall: SIGTERM ends the view at once (within 2 s), the lookup abandoned" \
	rw_wait 2 bash -c "! kill -0 $VIEW_STALL_PID 2>/dev/null"
wait "$VIEW_STALL_PID" 2>/dev/null || true
check "dns-stall: the view said it was exiting" grep -q "view: exiting" "$RW_WORK/view-stall.log"

# ---- the browser -------------------------------------------------------------------------------

section "browser: headless Chromium on $API/"
# Background traffic while the page is open: refusals of several kinds, allowed flows.
cat >"$RW_WORK/traffic.sh" <<EOF
#!/bin/sh
while :; do
	$(attempt_cmd a tcp "$INET" 443) >/dev/null 2>&1
	$(attempt_cmd a tcp 169.254.169.254 80) >/dev/null 2>&1
	$(attempt_cmd a tcp 172.20.0.53 53) >/dev/null 2>&1
	$(attempt_cmd a tcp 172.20.0.10 443) >/dev/null 2>&1
	$(attempt_cmd b tcp 10.0.5.5 443) >/dev/null 2>&1
	$(attempt_cmd b tcp "$INET" 443) >/dev/null 2>&1
	sleep 0.3
done
EOF
chmod +x "$RW_WORK/traffic.sh"
rw_bg /dev/null "$RW_WORK/traffic.sh"
TRAFFIC_PID=$RW_LAST_PID
# The agent's restart, for the page to reconnect: the new pid goes to agent.pid (cleanup reads it).
cat >"$RW_WORK/restart.sh" <<EOF
#!/bin/sh
pid=\$(cat "$RW_WORK/agent.pid")
kill -TERM "\$pid"
while kill -0 "\$pid" 2>/dev/null; do sleep 0.05; done
nsenter --net=/run/netns/$RW_NODE -- "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" agent $(printf '%q ' "${AGENT_ARGS[@]}") >>"$RW_WORK/agent.log" 2>&1 </dev/null &
echo \$! >"$RW_WORK/agent.pid"
EOF
chmod +x "$RW_WORK/restart.sh"
mkdir -p "$RW_WORK/chromium"
rm -f "$SCREENSHOT"
vc browser "$API" --screenshot "$SCREENSHOT" --profile "$RW_WORK/chromium" \
	--trigger "$(attempt_cmd a tcp "$INET" 8443)" \
	--row "$A_RUN,not-allowlisted,$INET" --row "$A_RUN,metadata,169.254.169.254" \
	--row "$B_RUN,private-destination,10.0.5.5" \
	--label "metadata,metadata,169.254.169.254" --label "dns,DNS,172.20.0.53" \
	--label "private-destination,private,10.0.5.5" \
	--answer "not-allowlisted,reset" --answer "metadata,reset" \
	--edge "$A_RUN,$INET,not-allowlisted,#c0392b" --edge "$A_RUN,169.254.169.254,metadata,#c0392b" \
	--edge "$B_RUN,$INET,allowed,#1e8449" \
	--restart "$RW_WORK/restart.sh" \
	--token-base "$API2" --token "$TOKEN" --token-trigger "$(attempt_cmd c tcp 169.254.169.254 80)" \
	--token-row "$C_RUN,metadata,169.254.169.254"
RW_AGENT_PID=$(cat "$RW_WORK/agent.pid")
kill "$TRAFFIC_PID" 2>/dev/null || true
wait "$TRAFFIC_PID" 2>/dev/null || true
check "browser: a screenshot was saved ($SCREENSHOT)" test -s "$SCREENSHOT"
pkill_ok=1
for pid in $(pgrep -f "user-data-dir=$RW_WORK/chromium" || true); do pkill_ok=0; done
check "browser: no Chromium left running" test "$pkill_ok" = 1

# ---- a run ends ----------------------------------------------------------------------------------

section "run-ends: a run removed from the snapshot leaves /metrics"
rw_agent_wait
vcq wait-ready "$API/readyz" --timeout 10 || true
jq '.revision = 2 | .runs |= map(select(.id != "run-9c01"))' "$POLICY_DEFAULT" >"$RW_WORK/policy.next"
mv "$RW_WORK/policy.next" "$RW_WORK/policy.json"
rev2() { http_get "$API/metrics" | grep -qx 'runwall_policy_revision 2'; }
check "the new snapshot (revision 2) is in force" rw_wait 5 rev2
gone() { ! http_get "$API/metrics" | grep -q "run=\"$B_RUN\""; }
check "/metrics: no series of $B_RUN any more (its run ended)" rw_wait 3 gone
check "/metrics: $A_RUN still there" bash -c "nsenter --net=/run/netns/$RW_NODE $RW_PY $VC get $API/metrics | grep -q 'run=\"$A_RUN\"'"

# ---- shares: one run's burst and another run's request ---------------------------------------

section "shares: one run's refusal burst does not push another run out of the queue or the view"
# The agent again, keeping 16 events; revision 3 makes both runs allowlisted, so both raise
# requests. The receiver down: B refuses one destination (queued, its event kept), A then 24
# against a queue of 4 (3 places taken, the rest dropped: A holds its share) and 24 events
# against a store of 16 (A displaces its own), then B another: B holds less than its share of
# the queue (1 of 2) and takes the place of A's newest.
# The browser test's restart made this agent: not this shell's child, so rw_agent_kill's wait
# returns at once. Wait for its pid to go, or the next start can find it still on the socket.
old_pid=$RW_AGENT_PID
rw_agent_kill
rw_wait 10 bash -c "! kill -0 $old_pid 2>/dev/null" || true
rw_agent_start "${AGENT_ARGS[@]}" --events 16
rw_agent_wait
check "shares: the agent again, with --events 16: /readyz 200" vcq wait-ready "$API/readyz" --timeout 10
jq '.revision = 3 | .runs |= map(del(.egress))' "$POLICY_DEFAULT" >"$RW_WORK/policy.next"
mv "$RW_WORK/policy.next" "$RW_WORK/policy.json"
rev3() { http_get "$API/metrics" | grep -qx 'runwall_policy_revision 3'; }
check "shares: revision 3 (both runs allowlisted) is in force" rw_wait 5 rev3
kill "$RECV_PID"
wait "$RECV_PID" 2>/dev/null || true
sent_batch b <<<"s6100 tcp $INET 6100"
for p in $(seq 6001 6024); do echo "s$p tcp $INET $p"; done | sent_batch a
sent_batch b <<<"s6101 tcp $INET 6101"
queue_shared() {
	http_get "$API/api/requests" | tail -n +2 | rw_jq_true --arg b "$B_RUN" '
		.stats.pending == 4 and .stats.displaced == 1 and .stats.dropped >= 21 and
		([.requests[] | select(.state == "pending" and .run == $b) | .port] | sort) == [6100, 6101]'
}
check "shares: 4 pending, B's two among them; A's newest displaced, A's others dropped" rw_wait 5 queue_shared
check "shares: /metrics counts the displaced one" \
	bash -c "nsenter --net=/run/netns/$RW_NODE $RW_PY $VC get $API/metrics | grep -qx 'runwall_access_requests_total{outcome=\"displaced\"} 1'"
start_receiver
idle() { http_get "$API/api/requests" | tail -n +2 | rw_jq_true '.stats.pending == 0'; }
rw_wait 15 idle || true
b_posts() { jq -s --arg b "$B_RUN" '[.[] | select(.body.run == $b) | .body.port] | sort' "$RW_WORK/requests.jsonl"; }
check "shares: receiver back: B's two requests arrive, each exactly once" test "$(b_posts | jq -c .)" = "[6100,6101]"
b_rows() {
	http_get "$API/api/events?run=$B_RUN&reason=not-allowlisted" | tail -n +2 |
		rw_jq_true '([.events[].dport] | unique) == [6100, 6101] and
			.displaced.own_share >= 8 and .displaced.fair_share >= 1' &&
		http_get "$API/api/graph?run=$B_RUN" | tail -n +2 |
		rw_jq_true --arg b "$B_RUN" --arg dst "$INET" --argjson n "$(sent 's610[01]')" '
			[.edges[] | select((.sandbox | startswith("node-a/\($b)/")) and .destination == $dst)
				| .reasons["not-allowlisted"]] == [$n]'
}
check "shares: the view still lists B's refusals (/api/events, the graph); A displaced its own" b_rows

rw_suite_end
