#!/usr/bin/env bash
# PolicyWatch (issue 21): the agent follows a control plane over real HTTPS (tests/policy_server.py
# in the services namespace, certificates made here with openssl), on a node built in
# namespaces (lib.sh):
#
#   trust     a server certificate not from --policy-ca, a client without a certificate or with
#             one of another CA, and a wrong token: each refused, its reason logged, nothing
#             applied
#   follow    the snapshot on connect; a run's upsert enforced from its ack on (a probe of that
#             run's sandbox fails before and passes after), the other run's verdicts kept cached
#             (its entry in the revs map unchanged); the stream's state in status, /api/status and
#             /metrics
#   refusals  a change on a stale base refused (path "base"), then a whole snapshot asked for and
#             acked; a bad change refused with its JSON path in the ack, the policy in force
#             unchanged; malformed, oversized and truncated messages refused and the stream
#             reconnected
#   staged    a staged snapshot acked, held and never enforced (not counted as received); a bad
#             staged run refused with its JSON path, the slot unchanged; unstage acked
#   restart   the server killed and restarted: the agent reconnects with the revision in force and
#             nothing is applied again
#   stall     a server that sends one byte a second is cut after --policy-stall, and `runwall
#             status` answers within a second throughout
#   errors    every row of docs/policy-watch.md's Errors table, one line each from a table: the
#             ack's path and need, and the stream kept (a marker message after it comes on the
#             same connection) or reconnected with the revision the need says
#   adopted   a --policy file adopted at start (its revision the one in force, other content, no
#             lease) is never the base of a change: the stream's run-upsert at that base is
#             refused with need snapshot, and the snapshot that follows brings the stream's runs
#             and lease back
#   churn     CHURN_RUNS (1000) run starts and the ends a fixed seed draws between them (at most
#             32 live), as upserts and deletes, each acked ok; the runs in force then the live ones,
#             in status and in the snapshot the control socket reads back; p50/p99 from change
#             sent to ack reported (diag), not asserted
#   beside    the veth lock held by another while a sandbox veth appears: a change sent while
#             the agent's link work for it waits is acked ok before that veth is attached
#   ack       ACK_TRIES (1000) changes of one run, revoke and grant alternately: a connection from
#             its sandbox opened the moment each ack arrives at the server gets the new verdict
#             (refused, connected); the ack's arrival to the connect, and the change sent to its
#             ack, p50/p99 reported (diag)
#   cost      one run's change on the small node and after a snapshot of 960 more runs (a node
#             holds 1023), each sent the moment the last ack arrives and then 50 a second: the
#             time to parse, compose, apply and ack, p50/p99 over 40 changes, reported (diag),
#             not asserted
#   frozen    a server stopped with SIGSTOP: the stream is cut, status answers, enforcement goes
#             on, and SIGTERM ends the agent at once though its reconnection hangs
#   lease     a snapshot with lease_seconds 2, kept by the heartbeats; the server partitioned (an
#             nftables table in its namespace): within 1 s of the deadline (the last message +
#             the lease) the run rule and open mode are refused lease-expired, the proxy still
#             works, status, /readyz (503), /api/status and /metrics say so; healed, the run rule
#             works again; the agent stopped (SIGSTOP): the lease expires all the same, and
#             SIGCONT restores it; a restarted agent, sent heartbeats only, keeps it. The times
#             are reported.
#   link      (tests/hold_server.py) every phase bounded: a server that holds the connection
#             before TLS, after the request, inside the headers or after them is given up on and
#             connected to again; --policy-ca the only trust: a server chained to a CA installed
#             as the system's folder (/etc/ssl/certs, bound over in the agent's own mount
#             namespace) refused, never sent the request or the token, and the bundle read again
#             at each connection; plain http:// to 127.ctl.example (resolving, in its own mount
#             namespace, to a listener) refused at start with nothing connected, and
#             http://127.0.0.2 reached directly, not through the environment's http_proxy
#
# Everything lives in namespaces named rwp<pid>-*, pins in /sys/fs/bpf/rwtest-policywatch-<pid>, the
# socket /run/rwtest-policywatch-<pid>.sock, files in /tmp/rwtest-policywatch-<pid>.*; all of it
# goes on exit, on failure too.
#
#   tests/netns/test_policy_watch.sh BUILD
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin policywatch rwp "${1:-build}"

A_IF=enipa${ID} A_IP=10.1.2.3 A_RUN=run-a
B_IF=enipb${ID} B_IP=10.1.2.4 B_RUN=run-b
PFX=enip
SRV=$RW_SVC_LINK PORT=9443 CTL=127.0.0.1:9080
URL=https://$SRV:$PORT/v1/watch
STALL=3
CHURN_RUNS=${CHURN_RUNS:-1000} # runs started; the seed draws the ends between them
export RW_SEED=1
SERVER=$RW_ROOT/tests/policy_server.py
C=$RW_WORK/certs

bail() {
	echo "Bail out! $*" >&3
	[ -f "$RW_WORK/agent.log" ] && sed 's/^/#   /' "$RW_WORK/agent.log" | tail -n 30 >&3
	[ -f "$RW_WORK/server.log" ] && sed 's/^/#   /' "$RW_WORK/server.log" | tail -n 10 >&3
	exit 1
}

trap rw_suite_cleanup EXIT

watch_json() { rw_status_json | jq -c '.agent.policy_watch'; }
ctl() { # ctl METHOD PATH [CURL ARGS]: the reference server's control port
	local m=$1 p=$2
	shift 2
	rw_in "$RW_SVC" curl -sS -m 30 -X "$m" "$@" "http://$CTL$p"
}
acks() { ctl GET /acks; }
# ack_of REVISION: the ack of that revision (the last one), or nothing
ack_of() { acks | jq -c --argjson r "$1" '[.[] | select(.revision == $r)] | last // empty'; }
has_ack() { [ -n "$(ack_of "$1")" ]; }
revision() { rw_status_json | jq -r '.revision'; }

command -v nft >/dev/null || bail "nft is missing (nftables: scripts/setup.sh installs it); the lease section partitions the server with it"

# ---- certificates: CA "ca" signs the server's and the node's; "other" is someone else ----------
mkdir -p "$C"
mkcert() { # mkcert NAME CA EXT
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$C/$1.key" -out "$C/$1.csr" 2>/dev/null
	printf '%s\n' "$3" >"$C/$1.ext"
	openssl x509 -req -in "$C/$1.csr" -CA "$C/$2.crt" -CAkey "$C/$2.key" -CAcreateserial \
		-days 2 -extfile "$C/$1.ext" -out "$C/$1.crt" 2>/dev/null
}
for ca in ca other; do
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$ca" \
		-keyout "$C/$ca.key" -out "$C/$ca.crt" 2>/dev/null || bail "openssl: the $ca CA"
done
mkcert server ca "subjectAltName=IP:$SRV
extendedKeyUsage=serverAuth" || bail "openssl: the server's certificate"
mkcert server-other other "subjectAltName=IP:$SRV
extendedKeyUsage=serverAuth" || bail "openssl: the other server certificate"
mkcert node ca "extendedKeyUsage=clientAuth" || bail "openssl: the node's certificate"
mkcert node-other other "extendedKeyUsage=clientAuth" || bail "openssl: the other node certificate"
echo "s3cret-$ID" >"$C/token"
echo "wrong-$ID" >"$C/token-wrong"

snapshot() { # snapshot REVISION: services, run A (no rules), run B (the database)
	cat <<EOT
{"revision": $1, "deny": ["10.0.0.0/16"],
 "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "$A_RUN", "pods": ["$A_IP"]},
          {"id": "$B_RUN", "pods": ["$B_IP"], "allow": [{"ip": "52.94.9.5", "tcp": [5432]}]}]}
EOT
}

# server_start [CERT]: the reference server in the services namespace (mutual TLS and a token)
server_start() {
	local cert=${1:-server}
	rm -f "$RW_WORK/server.ready"
	rw_bg "$RW_WORK/server.log" ip netns exec "$RW_SVC" "$RW_PY" "$SERVER" --listen "$SRV:$PORT" \
		--cert "$C/$cert.crt" --key "$C/$cert.key" --client-ca "$C/ca.crt" \
		--token-file "$C/token" --state "$RW_WORK/state.json" --control "$CTL" \
		--heartbeat 1 --acks "$RW_WORK/acks.jsonl" --ready "$RW_WORK/server.ready"
	SERVER_PID=$RW_LAST_PID
	rw_wait_file "$RW_WORK/server.ready" || bail "the policy server did not start"
}
server_stop() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }

# agent [OPTIONS...]: the agent following the server, good credentials unless told otherwise
agent() {
	: >"$RW_WORK/agent.log"
	rw_agent_start --ifprefix "$PFX" --node "node-$ID" --policy-url "$URL" --policy-stall "$STALL" "$@"
	rw_agent_wait || bail "the agent did not start"
}
GOOD=(--policy-ca "$C/ca.crt" --policy-cert "$C/node.crt" --policy-key "$C/node.key"
	--policy-token-file "$C/token")

# ---- the node ----------------------------------------------------------------------------------
rw_node_up || bail "the node did not come up"
rw_sandbox_add a "$A_IF" "$A_IP" || bail "sandbox a"
rw_sandbox_add b "$B_IF" "$B_IP" || bail "sandbox b"
snapshot 1 >"$RW_WORK/state.json"
server_start

# ---- trust -------------------------------------------------------------------------------------
section trust
# refused_with CASE PATTERN [SERVER-PATTERN]: the agent logged a refusal matching PATTERN (and the
# server one matching SERVER-PATTERN), never connected, and applied nothing. With TLS 1.3 the
# client finds its certificate refused only when it next writes: the agent's reason may then be
# the transport's (a broken pipe), the server's log says why.
refused_with() {
	local why=$1 pat=$2 spat=${3:-}
	if rw_wait 8 grep -qiE "policy watch: .*($pat)" "$RW_WORK/agent.log" &&
		{ [ -z "$spat" ] || rw_wait 5 grep -qiE "$spat" "$RW_WORK/server.log"; } &&
		rw_jq_true '.connected == false and .connects == 0' <<<"$(watch_json)" &&
		rw_jq_true '.ready == false' <<<"$(rw_status_json)"; then
		ok "trust: $why: refused, nothing applied ($(grep -m1 -oiE "policy watch: .*($pat)[^;]*" "$RW_WORK/agent.log" | cut -c1-140)${spat:+; server: $(grep -m1 -oiE "$spat" "$RW_WORK/server.log")})"
	else
		not_ok "trust: $why"
		tail -n 5 "$RW_WORK/agent.log" | diag
	fi
	rw_agent_kill TERM
}
agent --policy-ca "$C/other.crt" --policy-cert "$C/node.crt" --policy-key "$C/node.key" --policy-token-file "$C/token"
refused_with "a server certificate not from --policy-ca" "certificate problem"
agent --policy-ca "$C/ca.crt" --policy-token-file "$C/token"
refused_with "a client without a certificate (mutual TLS)" "alert certificate required|Broken pipe|not connected|Connection reset" \
	"peer did not return a certificate"
agent --policy-ca "$C/ca.crt" --policy-cert "$C/node-other.crt" --policy-key "$C/node-other.key" --policy-token-file "$C/token"
refused_with "a client certificate of another CA" "alert unknown ca|Broken pipe|not connected|Connection reset" \
	"certificate verify failed"
agent --policy-ca "$C/ca.crt" --policy-cert "$C/node.crt" --policy-key "$C/node.key" --policy-token-file "$C/token-wrong"
refused_with "a wrong bearer token" "401" "bad or missing bearer token"
check "trust: the server logged the refused handshakes" grep -q "TLS handshake .* refused" "$RW_WORK/server.log"
out=$(rw_cmd; "${RW_CMD[@]}" agent --policy-url "http://$SRV:$PORT/v1/watch" 2>&1) && rc=0 || rc=$?
check "trust: plain http:// to a host off loopback is refused at start (exit $rc)" \
	eval '[ "$rc" = 2 ] && grep -q "expected https://" <<<"$out"'
out=$(rw_cmd; "${RW_CMD[@]}" agent --policy-url "$URL" --policy-ack-url "http://$SRV:$PORT/v1/ack" 2>&1) && rc=0 || rc=$?
check "trust: so is a plain http:// --policy-ack-url off loopback (exit $rc)" \
	eval '[ "$rc" = 2 ] && grep -q "policy-ack-url .*expected https://" <<<"$out"'

# ---- follow ------------------------------------------------------------------------------------
section follow
HTTP=127.0.0.1:9750
agent "${GOOD[@]}" --listen "$HTTP"
follows() { rw_jq_true '.ready and .revision == 1 and .agent.policy_watch.connected' <<<"$(rw_status_json)"; }
rw_wait 10 follows || bail "the agent did not take revision 1 from the server"
ok "follow: connected, revision 1 from the server's snapshot"
snapshot_acked() { rw_jq_true --arg n "node-$ID" 'any(.[]; .ok and .revision == 1 and .type == "snapshot" and .node == $n)' <<<"$(acks)"; }
check "follow: the snapshot's ack: ok, revision 1, this node" rw_wait 5 snapshot_acked
check "follow: the watch request named the node and revision 0" \
	rw_jq_true --arg n "node-$ID" '.connections[-1] | .node == $n and .revision == 0' <<<"$(ctl GET /state)"
check "follow: before the upsert, A cannot reach the database" \
	test "$(rw_probe a tcp 52.94.9.5 5432 --timeout 0.5)" != ok
check "follow: B reaches it" test "$(rw_probe b tcp 52.94.9.5 5432)" = ok
revs_of() { rw -j map dump revs 2>/dev/null | jq -r --arg r "$1" '[.entries[]? | select(.run == $r) | .revision] | first // "none"'; }
b_rev=$(revs_of "$B_RUN")
ctl POST /upsert --data "{\"id\": \"$A_RUN\", \"pods\": [\"$A_IP\"], \"allow\": [{\"ip\": \"52.94.9.5\", \"tcp\": [5432]}]}" >/dev/null
rw_wait 5 has_ack 2 || true
ack=$(ack_of 2)
check "follow: the upsert's ack: ok, revision 2, generation 2 ($ack)" \
	rw_jq_true '.ok and .type == "run-upsert" and .revision == 2 and .generation == 2 and .id == "run-a"' <<<"$ack"
check "follow: from its ack on, A reaches the database" test "$(rw_probe a tcp 52.94.9.5 5432)" = ok
check "follow: B's cached verdicts are kept: its revs entry is still $b_rev (A's: $(revs_of "$A_RUN"))" \
	eval '[ "$(revs_of "$B_RUN")" = "$b_rev" ] && [ "$(revs_of "$A_RUN")" = 2 ]'
ctl POST /upsert --data "{\"id\": \"$A_RUN\", \"pods\": [\"$A_IP\"]}" >/dev/null
rw_wait 5 has_ack 3 || true
check "follow: a second upsert (the rule taken back) acked ok at 3" rw_jq_true '.ok' <<<"$(ack_of 3)"
check "follow: from that ack on, A cannot reach the database" \
	test "$(rw_probe a tcp 52.94.9.5 5432 --timeout 0.5)" != ok
check "follow: status: revision received 3, enforced 3, connected" \
	rw_jq_true '.revision_received == 3 and .revision_enforced == 3 and .connected and .last_message_age_ms < 5000' <<<"$(watch_json)"
http_get() { rw_node_exec curl -sS -m 5 "http://$HTTP$1"; }
api_shows() { rw_jq_true '.agent.policy_watch | .connected and .revision_enforced == 3 and .refusals == 0' <<<"$(http_get /api/status)"; }
check "follow: /api/status shows the stream: connected, revision 3, no refusals" rw_wait 3 api_shows
metrics_show() {
	local m
	m=$(http_get /metrics)
	grep -qx 'runwall_policy_watch_connected 1' <<<"$m" &&
		grep -qx 'runwall_policy_watch_revision_received 3' <<<"$m" &&
		grep -qx 'runwall_policy_watch_refusals_total 0' <<<"$m" &&
		grep -q '^runwall_policy_watch_last_message_age_seconds ' <<<"$m"
}
check "follow: /metrics shows it: connected, revision received 3, 0 refusals, the last message's age" \
	rw_wait 3 metrics_show

# ---- refusals ----------------------------------------------------------------------------------
section refusals
conns() { ctl GET /state | jq '.connections | length'; }
n0=$(conns)
ctl POST /raw --data-binary "{\"type\":\"run-upsert\",\"revision\":9,\"base\":8,\"run\":{\"id\":\"run-x\",\"pods\":[\"10.1.9.9\"]}}
" >/dev/null
stale() { rw_jq_true 'any(.[]; .ok == false and .path == "base" and .revision == 9 and .need == "snapshot")' <<<"$(acks)"; }
check "refusals: a change on base 8 (3 in force) refused, path base, a snapshot needed" rw_wait 5 stale
snapshot_asked() { rw_jq_true --argjson n "$n0" '(.connections | length) > $n and .connections[-1].revision == 0' <<<"$(ctl GET /state)"; }
check "refusals: the agent reconnected asking for a whole snapshot (revision=0)" rw_wait 5 snapshot_asked
snap_ok() { rw_jq_true 'last | .ok and .type == "snapshot" and .revision == 3' <<<"$(acks)"; }
check "refusals: the snapshot that followed acked ok at 3, nothing applied again ($(acks | jq -c 'last'))" \
	eval 'rw_wait 5 snap_ok && rw_jq_true ".unchanged" <<<"$(acks | jq -c last)"'
applied0=$(watch_json | jq '.applied')
ctl POST /raw --data-binary '{"type":"run-upsert","revision":4,"base":3,"run":{"id":"run-c","pods":["10.1.2.300"]}}
' >/dev/null
bad() { rw_jq_true 'any(.[]; .ok == false and .revision == 4 and .path == "run.pods[0]")' <<<"$(acks)"; }
check "refusals: a bad change refused with its JSON path run.pods[0] in the ack ($(rw_wait 5 bad; acks | jq -c '[.[] | select(.revision == 4)] | last | {path, error}'))" bad
check "refusals: the policy in force is unchanged (revision 3, applies $applied0)" \
	rw_jq_true --argjson n "$applied0" '.revision_enforced == 3 and .applied == $n' <<<"$(watch_json)"
n0=$(conns)
ctl POST /raw --data-binary '{"type": "run-upsert", "revision": 
' >/dev/null
malformed() { rw_jq_true 'any(.[]; .ok == false and .path == "(message)")' <<<"$(acks)"; }
reconnected() { [ "$(conns)" -gt "$1" ] && rw_jq_true '.connected' <<<"$(watch_json)"; }
check "refusals: a malformed message refused in an ack, the stream dropped and resumed" \
	eval 'rw_wait 5 malformed && rw_wait 5 reconnected "$n0" && [ "$(ctl GET /state | jq ".connections[-1].revision")" = 3 ]'
n0=$(conns)
head -c $((16 * 1024 * 1024 + 10)) /dev/zero | tr '\0' 'x' >"$RW_WORK/huge"
ctl POST /raw --data-binary "@$RW_WORK/huge" >/dev/null
check "refusals: a message over 16 MiB refused, logged, the stream reconnected" \
	eval 'rw_wait 10 grep -q "more than 16777216 bytes" "$RW_WORK/agent.log" && rw_wait 5 reconnected "$n0"'
rm -f "$RW_WORK/huge"
n0=$(conns)
ctl POST '/raw?close=1' --data-binary '{"type":"heartbeat"' >/dev/null
check "refusals: a truncated message (the stream ends mid-line) refused, logged, reconnected" \
	eval 'rw_wait 5 grep -q "truncated message" "$RW_WORK/agent.log" && rw_wait 5 reconnected "$n0"'
check "refusals: the refusals are counted in status ($(watch_json | jq '.refusals'))" \
	rw_jq_true '.refusals >= 4 and .revision_enforced == 3' <<<"$(watch_json)"
check "refusals: and in /metrics ($(http_get /metrics | grep '^runwall_policy_watch_refusals_total'))" \
	eval 'rw_wait 3 eval "http_get /metrics | grep -qx \"runwall_policy_watch_refusals_total $(watch_json | jq .refusals)\""'

# ---- staged ------------------------------------------------------------------------------------
section staged
rr0=$(watch_json | jq '.revision_received')
ctl POST /raw --data-binary "{\"type\":\"staged\",\"snapshot\":$(snapshot 4 | jq -c .)}
" >/dev/null
staged_ack() { rw_jq_true 'any(.[]; .ok and .type == "staged" and .revision == 4)' <<<"$(acks)"; }
check "staged: a staged snapshot of revision 4 acked ok; staged, never enforced, not counted as received" \
	eval 'rw_wait 10 staged_ack && rw_jq_true ".agent.staged.revision == 4 and .agent.staged.source == \"policy-watch\" and .revision == 3" <<<"$(rw_status_json)" && rw_jq_true --argjson r "$rr0" ".revision_enforced == 3 and .revision_received == \$r" <<<"$(watch_json)"'
ctl POST /raw --data-binary '{"type":"staged","run":{"id":"run-c","pods":["10.1.2.300"]}}
' >/dev/null
staged_bad() { rw_jq_true 'any(.[]; .ok == false and .type == "staged" and .path == "snapshot.runs[2].pods[0]" and .id == "run-c")' <<<"$(acks)"; }
check "staged: a bad staged run refused with its JSON path in the ack, the stream kept, revision 4 still staged" \
	eval 'rw_wait 10 staged_bad && rw_jq_true ".agent.staged.revision == 4 and .revision == 3" <<<"$(rw_status_json)" && rw_jq_true ".connected" <<<"$(watch_json)"'
ctl POST /raw --data-binary '{"type":"unstage"}
' >/dev/null
unstaged() { rw_jq_true 'any(.[]; .ok and .type == "unstage" and .dropped == 4)' <<<"$(acks)"; }
check "staged: unstage acked (dropped 4); nothing staged, revision 3 in force" \
	eval 'rw_wait 10 unstaged && rw_jq_true ".agent.staged == null and .revision == 3" <<<"$(rw_status_json)"'

# ---- restart -----------------------------------------------------------------------------------
section restart
applied0=$(watch_json | jq '.applied')
server_stop
disconnected() { rw_jq_true '.connected == false' <<<"$(watch_json)"; }
check "restart: the server killed: the agent is disconnected, still enforcing 3" \
	eval 'rw_wait 5 disconnected && [ "$(revision)" = 3 ]'
server_start
resumed() { rw_jq_true '.connected' <<<"$(watch_json)"; }
check "restart: reconnected to the restarted server" rw_wait 15 resumed
check "restart: it asked for revision 3 (resume), and nothing was applied again" \
	eval 'rw_jq_true ".connections[-1].revision == 3" <<<"$(ctl GET /state)" && rw_jq_true --argjson n "$applied0" ".applied == \$n and .revision_enforced == 3" <<<"$(watch_json)"'
ctl POST /upsert --data "{\"id\": \"$A_RUN\", \"pods\": [\"$A_IP\"], \"egress\": \"allowlist\"}" >/dev/null
check "restart: the next change applies on top of what is in force (ack ok at 4)" \
	eval 'rw_wait 5 has_ack 4 && rw_jq_true ".ok" <<<"$(ack_of 4)"'

# ---- stall -------------------------------------------------------------------------------------
section stall
# Refusals the agent counted and refused acks the server holds, from here on: the stream the heal
# ends mid-line is refused as truncated, and its ack must land before the errors section counts.
refused_acks() { acks | jq '[.[] | select(.ok == false)] | length'; }
refusals() { watch_json | jq '.refusals'; }
r0=$(refusals) a0=$(refused_acks)
acks_settled() { [ $(($(refused_acks) - a0)) -eq $(($(refusals) - r0)) ]; }
ctl POST '/mode?m=stall' >/dev/null
worst=0 unanswered=0 asked=0
end=$(( $(date +%s) + STALL + 4 ))
while [ "$(date +%s)" -lt "$end" ]; do
	s0=$(date +%s%N)
	rw -j status >/dev/null 2>&1 || unanswered=$((unanswered + 1))
	asked=$((asked + 1))
	s1=$(date +%s%N)
	[ $(((s1 - s0) / 1000000)) -gt "$worst" ] && worst=$(((s1 - s0) / 1000000))
	sleep 0.2
done
check "stall: a server sending one byte a second is cut after $STALL s (logged)" \
	grep -q "stalled: no complete message in $STALL s" "$RW_WORK/agent.log"
# The loop is not held by the stalled stream: every status asked during the stall is answered
# within the control socket's own deadline (2 s; a loop held for the 3 s stall would miss it).
# The worst time is reported, not asserted: load stretches it.
check "stall: runwall status answered all $asked times ($unanswered not), $worst ms at worst" \
	test "$unanswered" -eq 0
# Healed: the agent on a stream made after the heal. A stream made before it (the agent may have
# reconnected at any time during the stall) still stalls until its handler sees the heal and ends
# it mid-line, and a line broadcast meanwhile would be lost with it.
heal_ns=$(ctl POST '/mode?m=normal' | jq '.ns')
healed() { rw_jq_true --argjson t "$heal_ns" '.connections[-1].ns > $t' <<<"$(ctl GET /state)" && rw_jq_true '.connected' <<<"$(watch_json)"; }
check "stall: the server healed: a new stream, still at 4, B's revs entry still $b_rev" \
	eval 'rw_wait 20 healed && [ "$(revision)" = 4 ] && [ "$(revs_of "$B_RUN")" = "$b_rev" ]'
check "stall: every refusal since the stall began is acked (as many refused acks as refusals)" rw_wait 10 acks_settled

# ---- errors: every row of docs/policy-watch.md's Errors table (issue 32, item 8) ------------
section errors
# One row per line: NAME|LINE|PATH|NEED. LINE is sent as it is, with @R@ the revision in force and
# @N@ the next; @HUGE@ is a line over 16 MiB, @CUT@ a line the stream ends in the middle of. NEED
# "-": the ack has none and the stream is kept; "snapshot": the agent reconnects with revision=0;
# "resume": with the revision in force.
ERROR_ROWS=(
	'the run: a pod that is no IPv4 address|{"type":"run-upsert","revision":@N@,"base":@R@,"run":{"id":"run-e","pods":["10.1.2.300"]}}|run.pods[0]|-'
	"the run: a pod another run lists|{\"type\":\"run-upsert\",\"revision\":@N@,\"base\":@R@,\"run\":{\"id\":\"run-e\",\"pods\":[\"$B_IP\"]}}|run.pods[0]|-"
	'a snapshot: a bad pod|{"type":"snapshot","snapshot":{"revision":@N@,"runs":[{"id":"run-e","pods":["10.1.2.300"]}]}}|snapshot.runs[0].pods[0]|-'
	'a snapshot: a revision not above the one in force|{"type":"snapshot","snapshot":{"revision":2,"runs":[]}}|snapshot.revision|-'
	'a snapshot: more runs than a rule id holds (1024)|@RUNS1024@|snapshot.runs|-'
	'a change: its revision not above its base|{"type":"run-upsert","revision":@R@,"base":@R@,"run":{"id":"run-e","pods":["10.1.2.9"]}}|revision|-'
	'a change: its base not the revision in force|{"type":"run-delete","revision":@N@,"base":1,"id":"run-a"}|base|snapshot'
	'a delete of a run not in force|{"type":"run-delete","revision":@N@,"base":@R@,"id":"run-none"}|id|-'
	'not JSON|{"type": "run-upsert",|(message)|resume'
	'not an object|[1]|(message)|resume'
	'a duplicate key|{"type":"heartbeat","type":"heartbeat"}|(message)|resume'
	'over 16 MiB|@HUGE@|(message)|resume'
	'cut short by the end of the stream|@CUT@|(message)|resume'
	'an unknown type|{"type":"patch"}|type|resume'
	'an unknown key|{"type":"heartbeat","time":1}|time|resume'
	'a missing key|{"type":"run-delete","revision":@N@,"id":"run-a"}|base|resume'
	'a staged snapshot: a bad pod|{"type":"staged","snapshot":{"revision":@N@,"runs":[{"id":"run-e","pods":["10.1.2.300"]}]}}|snapshot.runs[0].pods[0]|-'
	'a staged message with neither a snapshot nor a run|{"type":"staged"}|snapshot|resume'
)
n_acks() { acks | jq 'length'; }
# own_acks N CUT: the acks from index N on, but for refusals of a stream the server ended
# mid-line unless CUT is true (that row's own): the stalled stream the heal above ends is refused
# by the loop, and its ack can land after the stall section's count, while these rows run.
own_acks() { acks | jq -c --argjson i "$1" --argjson cut "$2" '[.[$i:][] | select($cut or ((.error // "") | startswith("the server ended the stream") | not))]'; }
# has_own_acks N CUT K: at least K of them
has_own_acks() { [ "$(own_acks "$1" "$2" | jq length)" -ge "$3" ]; }
# resumed_at N REV: a new stream since N connections, asking for REV, and connected
resumed_at() { rw_jq_true --argjson n "$1" --argjson r "$2" '(.connections | length) > $n and .connections[-1].revision == $r' <<<"$(ctl GET /state)" && rw_jq_true '.connected' <<<"$(watch_json)"; }
runs1024() { "$RW_PY" -c 'import json, sys
runs = [{"id": "run-m%d" % i, "pods": ["10.5.%d.%d" % (i // 250, 1 + i % 250)]} for i in range(1024)]
print(json.dumps({"type": "snapshot", "snapshot": {"revision": int(sys.argv[1]), "runs": runs}}, separators=(",", ":")))' "$1"; }
for row in "${ERROR_ROWS[@]}"; do
	IFS='|' read -r name msg want_path want_need <<<"$row"
	r=$(revision)
	na=$(n_acks)
	nc=$(conns)
	case $msg in
	@HUGE@) head -c $((16 * 1024 * 1024 + 10)) /dev/zero | tr '\0' 'x' >"$RW_WORK/raw" ;;
	@RUNS1024@) runs1024 $((r + 1)) >"$RW_WORK/raw" ;;
	@CUT@) printf '%s' '{"type":"heartbeat"' >"$RW_WORK/raw" ;;
	*) msg=${msg//@R@/$r} && printf '%s\n' "${msg//@N@/$((r + 1))}" >"$RW_WORK/raw" ;;
	esac
	ctl "POST" "/raw$([ "$msg" = @CUT@ ] && echo '?close=1')" --data-binary "@$RW_WORK/raw" >/dev/null
	rm -f "$RW_WORK/raw"
	[ "$msg" = @CUT@ ] && cut=true || cut=false
	rw_wait 20 has_own_acks "$na" "$cut" 1 || true
	a=$(own_acks "$na" "$cut" | jq -c '.[0] // {}')
	if [ "$want_need" = - ]; then
		# Kept: a marker sent after it (a delete refused at "id") comes on the same stream.
		printf '{"type":"run-delete","revision":%d,"base":%d,"id":"run-marker"}\n' $((r + 1)) "$r" >"$RW_WORK/raw"
		ctl POST /raw --data-binary "@$RW_WORK/raw" >/dev/null
		rw_wait 5 has_own_acks "$na" "$cut" 2 || true
		check "errors: $name: refused at $want_path, no need, the stream kept ($(jq -c '{path, need, error}' <<<"$a" | cut -c1-160))" \
			eval 'rw_jq_true --arg p "$want_path" ".ok == false and .path == \$p and (has(\"need\") | not) and .in_force == $r" <<<"$a" &&
			      rw_jq_true ".path == \"id\" and .id == \"run-marker\"" <<<"$(own_acks "$na" "$cut" | jq -c ".[1] // {}")" &&
			      [ "$(conns)" = "$nc" ] && [ "$(revision)" = "$r" ]'
	else
		[ "$want_need" = snapshot ] && want_rev=0 || want_rev=$r
		check "errors: $name: refused at $want_path, need $want_need, reconnected with revision=$want_rev ($(jq -c '{path, need, error}' <<<"$a" | cut -c1-160))" \
			eval 'rw_jq_true --arg p "$want_path" --arg n "$want_need" ".ok == false and .path == \$p and .need == \$n and .in_force == $r" <<<"$a" &&
			      rw_wait 20 resumed_at "$nc" "$want_rev" && [ "$(revision)" = "$r" ]'
		# A whole snapshot asked for: the server's, at the revision in force, acked unchanged.
		unchanged() { rw_jq_true --argjson i "$na" '.[$i + 1:] | any(.type == "snapshot" and .ok and .unchanged)' <<<"$(acks)"; }
		[ "$want_need" = snapshot ] && { rw_wait 5 unchanged || not_ok "errors: $name: the snapshot that followed was not acked unchanged"; }
	fi
done

# ---- adopted: a --policy file adopted at start is never the base of a change (issue 32, item 2) -
section adopted
# The stream applies 50 (A and B, a lease of 30 s); the agent stops; a file of revision 50 with A
# and Z and no lease takes its place; the restarted agent adopts it. A change of the stream at base
# 50 must not be built on the file: it is refused, a whole snapshot is asked for, and the node then
# enforces the stream's A, B, C and its lease.
ADOPT=50
[ "$(ctl GET /state | jq .revision)" -lt $ADOPT ] || bail "adopted: the server is past $ADOPT already"
cat >"$RW_WORK/adopt-stream.json" <<EOT
{"revision": $ADOPT, "lease_seconds": 30, "deny": ["10.0.0.0/16"],
 "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "$A_RUN", "pods": ["$A_IP"]},
          {"id": "$B_RUN", "pods": ["$B_IP"], "allow": [{"ip": "52.94.9.5", "tcp": [5432]}]}]}
EOT
ctl POST /snapshot --data-binary "@$RW_WORK/adopt-stream.json" >/dev/null
rw_wait 5 has_ack $ADOPT || true
check "adopted: the stream's snapshot $ADOPT (A, B, lease 30) acked ok" rw_jq_true '.ok' <<<"$(ack_of $ADOPT)"
rw_agent_kill TERM
mkdir -p "$RW_WORK/cm"
cat >"$RW_WORK/cm/policy.json" <<EOT
{"revision": $ADOPT, "deny": ["10.0.0.0/16"],
 "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "$A_RUN", "pods": ["$A_IP"]}, {"id": "run-z", "pods": ["10.1.2.9"]}]}
EOT
n0=$(conns)
agent "${GOOD[@]}" --listen "$HTTP" --policy "$RW_WORK/cm/policy.json"
check "adopted: the restarted agent adopted the file at $ADOPT and resumed at $ADOPT" \
	eval 'rw_wait 10 resumed_at "$n0" $ADOPT && grep -q "revision $ADOPT is the one in force; adopted" "$RW_WORK/agent.log"'
ctl POST /upsert --data "{\"id\": \"run-c\", \"pods\": [\"10.1.2.5\"]}" >/dev/null
rw_wait 5 has_ack $((ADOPT + 1)) || true
first=$(acks | jq -c --argjson r $((ADOPT + 1)) '[.[] | select(.revision == $r)] | first // {}')
check "adopted: the upsert of C at base $ADOPT is not acked ok on top of the file: refused at base, a snapshot needed ($(jq -c '{ok, path, need}' <<<"$first"))" \
	rw_jq_true '.ok == false and .type == "run-upsert" and .path == "base" and .need == "snapshot"' <<<"$first"
snap_51() { rw_jq_true --argjson r $((ADOPT + 1)) 'any(.[]; .type == "snapshot" and .revision == $r and .ok)' <<<"$(acks)"; }
check "adopted: the stream's snapshot $((ADOPT + 1)) that followed acked ok" rw_wait 10 snap_51
runs_now() { rw_status_json | jq -c '[.runs[]?.id] | sort'; }
check "adopted: the node enforces the stream's A, B, C ($(runs_now)) and its lease ($(rw_status_json | jq -c .lease.seconds))" \
	eval '[ "$(runs_now)" = "[\"run-a\",\"run-b\",\"run-c\"]" ] && rw_jq_true ".lease.seconds == 30" <<<"$(rw_status_json)" &&
	      [ "$(rw_probe b tcp 52.94.9.5 5432)" = ok ]'
# The stream's snapshot of the adopted revision itself (a change the server did not record asks
# for it): compared with the file. Equal, it confirms the file, and changes build on it; other, it
# is refused at snapshot.revision, and the server sends it again above the revision in force.
adopt_restart() { # adopt_restart FILE: the agent restarted on FILE, resumed at the server's revision
	rw_agent_kill TERM
	local n0
	n0=$(conns)
	agent "${GOOD[@]}" --listen "$HTTP" --policy "$1"
	rw_wait 10 resumed_at "$n0" "$(ctl GET /state | jq .revision)" &&
		grep -q "is the one in force; adopted" "$RW_WORK/agent.log"
}
stale_change() { # stale_change REVISION: a change at that base the server does not record
	printf '{"type":"run-delete","revision":%d,"base":%d,"id":"%s"}\n' $(($1 + 1)) "$1" "$A_RUN" >"$RW_WORK/raw"
	ctl POST /raw --data-binary "@$RW_WORK/raw" >/dev/null
}
ack_after() { # ack_after N JQ-FILTER: any ack after the first N matches
	rw_jq_true --argjson i "$1" ".[\$i:] | any($2)" <<<"$(acks)"
}
r=$(ctl GET /state | jq .revision)
cp "$RW_WORK/state.json" "$RW_WORK/cm/policy.json"
adopt_restart "$RW_WORK/cm/policy.json" || bail "adopted: the agent did not adopt the server's own snapshot"
na=$(n_acks)
stale_change "$r"
check "adopted, equal: a change at base $r refused (need snapshot), and the stream's snapshot $r, equal to the file, acked unchanged" \
	eval 'rw_wait 10 ack_after "$na" ".type == \"snapshot\" and .revision == $r and .ok and .unchanged" &&
	      ack_after "$na" ".type == \"run-delete\" and .path == \"base\" and .need == \"snapshot\""'
# The refused stale change already holds an ack at r + 1: wait for the upsert's own.
na=$(n_acks)
ctl POST /upsert --data "{\"id\": \"run-c\", \"pods\": [\"10.1.2.5\"]}" >/dev/null
check "adopted, equal: confirmed, the next change builds on it (ack ok at $((r + 1)))" \
	rw_wait 10 ack_after "$na" ".type == \"run-upsert\" and .revision == $((r + 1)) and .ok"
r=$((r + 1))
jq --arg b "$B_RUN" '.runs |= map(select(.id != $b))' "$RW_WORK/state.json" >"$RW_WORK/cm/policy.json"
adopt_restart "$RW_WORK/cm/policy.json" || bail "adopted: the agent did not adopt a file of the server's revision"
na=$(n_acks)
stale_change "$r"
check "adopted, other content: the stream's snapshot $r refused at snapshot.revision, kept" \
	rw_wait 10 ack_after "$na" '.type == "snapshot" and .revision == '"$r"' and .ok == false and .path == "snapshot.revision" and (has("need") | not)'
check "adopted, other content: the server sent it again at $((r + 1)), applied: A, B and C in force ($(runs_now))" \
	eval 'rw_wait 10 ack_after "$na" ".type == \"snapshot\" and .revision == $((r + 1)) and .ok" &&
	      [ "$(revision)" = $((r + 1)) ] && [ "$(runs_now)" = "[\"run-a\",\"run-b\",\"run-c\"]" ] &&
	      [ "$(rw_probe b tcp 52.94.9.5 5432)" = ok ]'

# ---- behind: a server restarted from older state continues above the node, without a loop -----
section behind
r=$(revision)
server_stop
jq '.revision = 3' "$RW_WORK/state.json" >"$RW_WORK/state.old" && mv "$RW_WORK/state.old" "$RW_WORK/state.json"
server_start
resumed_ahead() { rw_jq_true --argjson r "$r" '.connections[0].revision == $r' <<<"$(ctl GET /state)" && [ "$(revision)" = $((r + 1)) ]; }
check "behind: the node resumed at $r with a server at 3: the server jumped to $((r + 1)), whose snapshot the node applied" \
	eval 'rw_wait 15 resumed_ahead && rw_jq_true ".ok and .type == \"snapshot\"" <<<"$(ack_of $((r + 1)))"'
ctl POST /upsert --data "{\"id\": \"run-c\", \"pods\": [\"10.1.2.5\"], \"allow\": [{\"ip\": \"52.94.9.5\", \"tcp\": [5432]}]}" >/dev/null
rw_wait 5 has_ack $((r + 2)) || true
check "behind: one connection, no refusal since, and the next change acked ok at $((r + 2))" \
	eval 'rw_jq_true ".ok" <<<"$(ack_of $((r + 2)))" && rw_jq_true "all(.ok)" <<<"$(acks)" &&
	      [ "$(conns)" = 1 ] && rw_jq_true ".connected" <<<"$(watch_json)"'

# Back to the suite's node: no lease, no C, from the stream (B's verdicts are judged again once;
# the churn section compares them with this entry).
r=$(($(ctl GET /state | jq .revision) + 1))
jq 'del(.lease_seconds) | .runs |= map(select(.id != "run-c")) | .revision += 1' "$RW_WORK/state.json" >"$RW_WORK/adopt-back.json"
ctl POST /snapshot --data-binary "@$RW_WORK/adopt-back.json" >/dev/null
rw_wait 5 has_ack "$r" || true
check "behind: back to the suite's node: A and B, no lease (ack ok at $r)" rw_jq_true '.ok' <<<"$(ack_of "$r")"
b_rev=$(revs_of "$B_RUN")

# ---- churn -------------------------------------------------------------------------------------
section churn
cat >"$RW_WORK/churn.py" <<'EOT'
import json, random, sys, time, urllib.request
ctl, runs = sys.argv[1], int(sys.argv[2])
rnd = random.Random(1)
def call(method, path, body=None):
    req = urllib.request.Request("http://" + ctl + path, data=body, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())
live, lat, bad, n = [], [], [], 0
while n < runs:
    if live and (len(live) >= 32 or rnd.random() < 0.5):
        rid = live.pop(rnd.randrange(len(live)))
        r = call("POST", "/delete?id=" + rid, b"")
    else:
        n += 1
        rid = "run-churn-%d" % n
        pod = "10.1.%d.%d" % (3 + n // 250, 1 + n % 250)
        run = {"id": rid, "pods": [pod]}
        if rnd.random() < 0.5:
            run["allow"] = [{"ip": "52.94.9.%d" % rnd.randrange(1, 255), "tcp": [443]}]
        r = call("POST", "/upsert", json.dumps(run).encode())
        live.append(rid)
    rev, sent = r["revision"], r["sent_ns"]
    while True:
        acks = [a for a in call("GET", "/acks") if a.get("revision") == rev]
        if acks:
            break
        time.sleep(0.002)
    a = acks[-1]
    lat.append((a["_ns"] - sent) / 1e6)
    if not a.get("ok"):
        bad.append(a)
lat.sort()
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(json.dumps({"changes": len(lat), "refused": bad[:3], "n_refused": len(bad),
                  "p50_ms": round(p(0.5), 2), "p99_ms": round(p(0.99), 2), "max_ms": round(lat[-1], 2),
                  "live": live}))
EOT
rw_in "$RW_SVC" "$RW_PY" "$RW_WORK/churn.py" "$CTL" "$CHURN_RUNS" >"$RW_WORK/churn.json" 2>"$RW_WORK/churn.err" ||
	{ cat "$RW_WORK/churn.err" | diag; }
res=$(cat "$RW_WORK/churn.json" 2>/dev/null || echo '{}')
diag "churn: $(jq -c '{changes, n_refused, p50_ms, p99_ms, max_ms}' <<<"$res") (change sent to ack, per-run changes, fixed seed)"
check "churn: every change acked ok ($(jq '.changes' <<<"$res") changes: $CHURN_RUNS starts, the rest ends)" \
	rw_jq_true --argjson n "$CHURN_RUNS" '.changes > $n and .n_refused == 0 and (.live | length) > 0' <<<"$res"
live_runs() { rw_status_json | jq -c '[.runs[]?.id | select(startswith("run-churn-"))] | sort'; }
check "churn: the runs in force are exactly the live ones" \
	test "$(live_runs)" = "$(jq -c '.live | sort' <<<"$res")"
# What the control socket's `policy` gives back (runwall explain names rules from it): after run
# changes the agent writes it out from its document when asked, so it must be the snapshot in force.
cat >"$RW_WORK/readback.py" <<'EOT'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"policy\n")
s.shutdown(socket.SHUT_WR)
buf = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    buf += d
r = json.loads(buf)
snap = json.loads(r["snapshot"])
print(json.dumps({"same_revision": snap["revision"] == r["revision"], "revision": snap["revision"],
                  "runs": sorted(x["id"] for x in snap["runs"] if x["id"].startswith("run-churn-"))}))
EOT
readback=$("$RW_PY" "$RW_WORK/readback.py" "$RW_SOCK" 2>&1) || readback='{}'
check "churn: the snapshot read back holds exactly the live runs, at the revision in force ($(jq -c '{revision, runs: (.runs | length)}' <<<"$readback" 2>/dev/null))" \
	eval 'rw_jq_true ".same_revision" <<<"$readback" &&
	      [ "$(jq -c .runs <<<"$readback")" = "$(jq -c ".live | sort" <<<"$res")" ] &&
	      [ "$(jq .revision <<<"$readback")" = "$(revision)" ]'
check "churn: A and B kept their verdicts: B's revs entry still $b_rev" test "$(revs_of "$B_RUN")" = "$b_rev"
check "churn: the sandboxes still enforce: B reaches the database, A does not" \
	eval '[ "$(rw_probe b tcp 52.94.9.5 5432)" = ok ] && [ "$(rw_probe a tcp 52.94.9.5 5432 --timeout 0.5)" != ok ]'
grep "applied revision" "$RW_WORK/agent.log" | tail -n 1 | sed 's/.*applied/last apply:/' | diag

# ---- beside: a change applied while a veth's link work waits ---------------------------------
section beside
# Another holder (a runwall-cni without CPU) keeps the veth lock while a sandbox veth appears:
# the agent's link work for it (the attach, then the bind) waits for the lock on the link
# thread, 1 s each before it goes on without it (the attach) or leaves it to the next resync
# (the bind). A change sent meanwhile (a rule added to a run whose pods stay: no flow to
# forget, which would take the veth lock too) is applied and acked on the loop before that
# veth is attached.
VZ=${PFX}z$ID
r=$(ctl GET /state | jq .revision)
ctl POST /upsert --data '{"id": "run-beside", "pods": ["10.1.7.7"]}' >/dev/null
rw_wait 5 has_ack $((r + 1)) || true
flock -x "$RW_BPFFS" sleep 5 &
LOCK_PID=$!
rw_sleep 0.2
ip -n "$RW_NODE" link add "$VZ" type veth peer name "rwz$ID"
rw_sleep 0.3 # its RTM_NEWLINK read: the link thread waits for the lock
ctl POST /upsert --data '{"id": "run-beside", "pods": ["10.1.7.7"], "allow": [{"ip": "52.94.9.8", "tcp": [443]}]}' >/dev/null
rw_wait 2 has_ack $((r + 2)) || true
attached_before=$(grep -c "$VZ (ifindex [0-9]*): attached" "$RW_WORK/agent.log" || true)
ack=$(ack_of $((r + 2)))
check "beside: with the veth lock held and $VZ's link work waiting for it, a change is acked ok ($(jq -c '{ok, revision, queued_ms}' <<<"$ack" 2>/dev/null))" \
	eval 'rw_jq_true ".ok and .queued_ms < 500" <<<"$ack" && kill -0 "$LOCK_PID" 2>/dev/null'
check "beside: ... before $VZ was attached (the link work still waiting)" test "$attached_before" = 0
check "beside: once the lock's wait is over, $VZ is attached" \
	rw_wait 5 grep -q "$VZ (ifindex [0-9]*): attached" "$RW_WORK/agent.log"
kill "$LOCK_PID" 2>/dev/null || true
wait "$LOCK_PID" 2>/dev/null || true
ip -n "$RW_NODE" link del "$VZ"
ctl POST "/delete?id=run-beside" --data '' >/dev/null
rw_wait 5 has_ack $((r + 3)) || true

# ---- batch: changes that come together, applied together, acked one by one in their order ----
section batch
# Four changes in one write (/raw: the server's state does not follow them): two upserts, a
# delete, then a run whose pod the second holds. The agent applies those it takes together
# (however many of them are queued when it looks: "batch" in each ack says how many); every
# ack is the one the change would get alone.
r=$(ctl GET /state | jq .revision)
{
	jq -nc --argjson r "$r" '{type: "run-upsert", revision: ($r + 1), base: $r,
		run: {id: "run-bat-1", pods: ["10.200.0.1"], allow: [{ip: "52.94.9.7", tcp: [443]}]}}'
	jq -nc --argjson r "$r" '{type: "run-upsert", revision: ($r + 2), base: ($r + 1),
		run: {id: "run-bat-2", pods: ["10.200.0.2"]}}'
	jq -nc --argjson r "$r" '{type: "run-delete", revision: ($r + 3), base: ($r + 2), id: "run-bat-1"}'
	jq -nc --argjson r "$r" '{type: "run-upsert", revision: ($r + 4), base: ($r + 3),
		run: {id: "run-bat-3", pods: ["10.200.0.2"]}}'
} >"$RW_WORK/batch.jsonl"
a0=$(acks | jq length)
ctl POST /raw --data-binary "@$RW_WORK/batch.jsonl" >/dev/null
batch_acked() { [ "$(acks | jq --argjson a "$a0" '.[$a:] | length')" -ge 4 ]; }
rw_wait 10 batch_acked || true
backs=$(acks | jq -c --argjson a "$a0" '[.[$a:][] | {ok, type, revision, path, batch}]')
diag "batch: the acks: $backs"
check "batch: the three changes acked ok, in their order, and the fourth refused at run.pods[0]" \
	rw_jq_true --argjson r "$r" '[.[] | .revision] == [$r + 1, $r + 2, $r + 3, $r + 4] and
		([.[0:3][] | .ok] | all) and .[3].ok == false and .[3].path == "run.pods[0]" and
		[.[0:3][] | .type] == ["run-upsert", "run-upsert", "run-delete"] and
		([.[0:3][] | .batch >= 1] | all)' <<<"$backs"
bat_runs() { rw_status_json | jq -c '[.revision, ([.runs[]?.id | select(startswith("run-bat-"))] | sort)]'; }
check "batch: in force: revision $((r + 3)), run-bat-2 alone of the four" \
	test "$(bat_runs)" = "[$((r + 3)),[\"run-bat-2\"]]"
# The server again at the node's revision and beyond: its own snapshot, one revision on.
jq --argjson v "$((r + 4))" '.revision = $v' "$RW_WORK/state.json" >"$RW_WORK/batch-back.json"
ctl POST /snapshot --data-binary "@$RW_WORK/batch-back.json" >/dev/null
rw_wait 5 has_ack $((r + 4)) || true
check "batch: the server's snapshot at $((r + 4)) applied over the batch (run-bat-2 gone)" \
	eval 'rw_jq_true "any(.[]; .ok and .type == \"snapshot\" and .revision == $((r + 4)))" <<<"$(acks)" &&
	      test "$(bat_runs)" = "[$((r + 4)),[]]"'

# ---- ack: an acked change is enforced: a connection opened the moment its ack arrives --------
section ack
# One process in the services namespace: it sends run B's change, waits on the server for its
# ack (a long poll, answered as the ack is recorded), then enters sandbox b's namespace (setns)
# and connects at once. Revoke and grant alternate, ACK_TRIES times, ending on the grant.
ACK_TRIES=${ACK_TRIES:-1000}
cat >"$RW_WORK/ackfirst.py" <<'EOT'
import ctypes, errno, json, os, socket, sys, time, urllib.request
ctl, sandbox_ns, run_id, pod, tries = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
DB = ("52.94.9.5", 5432)
libc = ctypes.CDLL(None, use_errno=True)
home = os.open("/proc/self/ns/net", os.O_RDONLY)
sandbox = os.open("/run/netns/" + sandbox_ns, os.O_RDONLY)
def setns(fd):
    if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
        raise OSError(ctypes.get_errno(), "setns")
def call(method, path, body=None):
    req = urllib.request.Request("http://" + ctl + path, data=body, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())
def connect():
    setns(sandbox)
    try:
        s = socket.socket()
        s.settimeout(1)
        t = time.monotonic_ns()
        e = s.connect_ex(DB)
        s.close()
    finally:
        setns(home)
    return t, "ok" if e == 0 else "refused" if e == errno.ECONNREFUSED else errno.errorcode.get(e, str(e))
wrong, gaps, lat, bad_acks = [], [], [], []
for i in range(tries):
    grant = i % 2 == 1
    run = {"id": run_id, "pods": [pod], "allow": [{"ip": DB[0], "tcp": [DB[1]]}] if grant else []}
    r = call("POST", "/upsert", json.dumps(run).encode())
    acks = call("GET", "/acks?revision=%d&wait=30" % r["revision"])
    if not acks or not acks[-1].get("ok"):
        bad_acks.append(acks[-1] if acks else {"revision": r["revision"], "missing": True})
        continue
    t, got = connect()
    gaps.append((t - acks[-1]["_ns"]) / 1e6)
    lat.append((acks[-1]["_ns"] - r["sent_ns"]) / 1e6)
    if got != ("ok" if grant else "refused"):
        wrong.append({"try": i, "grant": grant, "got": got, "revision": r["revision"]})
q = lambda v, f: round(sorted(v)[min(len(v) - 1, int(f * len(v)))], 2) if v else None
print(json.dumps({"tries": tries, "judged": len(gaps), "wrong": len(wrong), "first_wrong": wrong[:5],
                  "bad_acks": len(bad_acks), "first_bad_acks": bad_acks[:3],
                  "ack_to_connect_ms": {"p50": q(gaps, 0.5), "p99": q(gaps, 0.99), "max": q(gaps, 1)},
                  "sent_to_ack_ms": {"p50": q(lat, 0.5), "p99": q(lat, 0.99), "max": q(lat, 1)}}))
EOT
ackres=$(rw_in "$RW_SVC" "$RW_PY" "$RW_WORK/ackfirst.py" "$CTL" "$(rw_ns_of b)" "$B_RUN" "$B_IP" "$ACK_TRIES" 2>"$RW_WORK/ackfirst.err") || ackres='{}'
[ -s "$RW_WORK/ackfirst.err" ] && tail -c 600 "$RW_WORK/ackfirst.err" | diag
diag "ack: $(jq -c '{ack_to_connect_ms, sent_to_ack_ms}' <<<"$ackres") (ack's arrival at the server to the connect, change sent to ack)"
check "ack: $ACK_TRIES changes of run B, revoke and grant alternately, each acked ok ($(jq -c '{judged, bad_acks, first_bad_acks}' <<<"$ackres"))" \
	rw_jq_true --argjson n "$ACK_TRIES" '.judged == $n and .bad_acks == 0' <<<"$ackres"
check "ack: a connection from B opened the moment each ack arrived has the new verdict: refused after the revoke, connected after the grant ($(jq -c '{wrong, first_wrong}' <<<"$ackres"))" \
	rw_jq_true --argjson n "$ACK_TRIES" '.judged == $n and .wrong == 0' <<<"$ackres"
check "ack: after the last grant B reaches the database" \
	test "$(rw_probe b tcp 52.94.9.5 5432)" = ok

# A burst: run B's changes sent back to back, not waiting for acks, so that several arrive while
# the agent still applies or settles the last one; among them a bad run (sent raw at the next
# revision, leaving the server's state alone), then a grant at that same revision. Each must be
# acked in order: the good ones ok with increasing revisions, the bad one refused alone with its
# path, and what is in force at the end is the last grant.
cat >"$RW_WORK/burst.py" <<'EOT'
import json, sys, time, urllib.request
ctl, run_id, pod, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
DB = {"ip": "52.94.9.5", "tcp": [5432]}
def call(method, path, body=None):
    req = urllib.request.Request("http://" + ctl + path, data=body, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())
def upsert(grant):
    return call("POST", "/upsert", json.dumps({"id": run_id, "pods": [pod], "allow": [DB] if grant else []}).encode())["revision"]
sent = [upsert(i % 2 == 1) for i in range(n)]
bad = sent[-1] + 1
call("POST", "/raw", (json.dumps({"type": "run-upsert", "revision": bad, "base": sent[-1],
                                  "run": {"id": run_id, "pods": ["10.1.2.300"]}}) + "\n").encode())
sent.append(upsert(True))
# The bad change and the last share a revision: wait for the last one's ok ack, bounded.
for _ in range(1500):
    mine = [a for a in call("GET", "/acks") if sent[0] <= a.get("revision", 0) <= sent[-1]]
    if any(a.get("ok") and a["revision"] == sent[-1] for a in mine):
        break
    time.sleep(0.02)
ok = [a["revision"] for a in mine if a.get("ok")]
refused = [{"revision": a["revision"], "path": a.get("path")} for a in mine if not a.get("ok")]
print(json.dumps({"sent": sent, "bad": bad, "ok": ok, "refused": refused}))
EOT
burst=$(rw_in "$RW_SVC" "$RW_PY" "$RW_WORK/burst.py" "$CTL" "$B_RUN" "$B_IP" 8 2>"$RW_WORK/burst.err") || burst='{}'
[ -s "$RW_WORK/burst.err" ] && tail -c 600 "$RW_WORK/burst.err" | diag
check "ack: a burst of 9 changes of run B sent back to back, each acked ok once, in order, with increasing revisions ($(jq -c '{sent, ok}' <<<"$burst"))" \
	rw_jq_true '.ok == .sent and (.ok | length) == 9' <<<"$burst"
check "ack: the bad change among them refused alone, with its path run.pods[0] ($(jq -c '.refused' <<<"$burst"))" \
	rw_jq_true '.refused == [{"revision": .bad, "path": "run.pods[0]"}]' <<<"$burst"
check "ack: after the burst the revision in force is its last change's, and B reaches the database" \
	eval '[ "$(revision)" = "$(jq '"'"'.sent[-1]'"'"' <<<"$burst")" ] && [ "$(rw_probe b tcp 52.94.9.5 5432)" = ok ]'

# ---- cost: one run's change on a small node and on a big one (reported, not asserted) ---------
section cost
cat >"$RW_WORK/cost.py" <<'EOT'
import json, statistics, sys, time, urllib.request
ctl, n_runs, changes, every_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def call(method, path, body=None):
    req = urllib.request.Request("http://" + ctl + path, data=body, method=method)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())
def ack(rev):  # the server answers as the ack is recorded
    got = call("GET", "/acks?revision=%d&wait=30" % rev)
    assert got, "no ack of %d" % rev
    return got[-1]
rev = call("GET", "/state")["revision"]
if n_runs:
    snap = json.loads(sys.stdin.read())
    snap["revision"] = rev + 1
    for i in range(n_runs):
        snap["runs"].append({"id": "run-big-%d" % i, "pods": ["10.2.%d.%d" % (i // 250, 1 + i % 250)],
                             "allow": [{"ip": "52.95.%d.%d" % (i // 250, 1 + i % 250), "tcp": [443]}]})
    r = call("POST", "/snapshot", json.dumps(snap).encode())
    a = ack(r["revision"])
    assert a["ok"], a
    snapshot_ms = a["apply_ms"]
else:
    snapshot_ms = None
cost = {k: [] for k in ("compose_ms", "parse_ms", "apply_ms", "queued_ms", "sent_to_ack_ms")}
start = time.monotonic()
sent = []
for i in range(changes):
    # every_ms: one change sent every so many ms (claims at a steady rate), whether or not the
    # last one is acked yet; 0: each the moment the last one's ack arrives
    time.sleep(max(0.0, start + i * every_ms / 1000 - time.monotonic()))
    run = {"id": "run-cost", "pods": ["10.3.0.1"], "allow": [{"ip": "52.96.0.%d" % (1 + i % 200), "tcp": [443]}]}
    r = call("POST", "/upsert", json.dumps(run).encode())
    sent.append(r)
    if not every_ms:
        ack(r["revision"])
elapsed = time.monotonic() - start
ack(sent[-1]["revision"])
acked = {a["revision"]: a for a in call("GET", "/acks") if a.get("ok")}
for r in sent:
    a = acked[r["revision"]]
    a["sent_to_ack_ms"] = (a["_ns"] - r["sent_ns"]) / 1e6
    for k in cost:
        cost[k].append(a.get(k, 0))
# queued_ms: from the line's arrival to its ack, the agent's whole cost of the change
out = {"runs_added": n_runs, "snapshot_apply_ms": snapshot_ms, "changes": changes, "every_ms": every_ms,
       "sent_per_s": round(changes / elapsed, 1)}
for k, v in cost.items():
    v.sort()
    out[k[:-3] + "_ms_p50"] = round(statistics.median(v), 2)
    out[k[:-3] + "_ms_p99"] = round(v[min(len(v) - 1, int(len(v) * 0.99))], 2)
print(json.dumps(out))
EOT
COST_CHANGES=${COST_CHANGES:-200}
cost() { rw_status_json >/dev/null; rw_in "$RW_SVC" "$RW_PY" "$RW_WORK/cost.py" "$CTL" "$1" "$COST_CHANGES" "$2" <"$RW_WORK/state.json" 2>>"$RW_WORK/cost.err"; }
small=$(cost 0 0) || small='{}'
small50=$(cost 0 20) || small50='{}'
small300=$(cost 0 3.33) || small300='{}'
n_small=$(rw_status_json | jq '.runs | length')
big=$(cost 960 0) || big='{}'
big50=$(cost 0 20) || big50='{}'
big300=$(cost 0 3.33) || big300='{}'
n_big=$(rw_status_json | jq '.runs | length')
diag "cost: one run's upsert on a node of $n_small runs, back to back: $small"
diag "cost: one run's upsert on a node of $n_small runs, 50 a second: $small50"
diag "cost: one run's upsert on a node of $n_small runs, 300 a second: $small300"
diag "cost: one run's upsert on a node of $n_big runs, back to back: $big"
diag "cost: one run's upsert on a node of $n_big runs, 50 a second: $big50"
diag "cost: one run's upsert on a node of $n_big runs, 300 a second: $big300"
diag "cost: load average $(cut -d' ' -f1-3 /proc/loadavg)"
all_acked() { for r in "$small" "$small50" "$small300" "$big" "$big50" "$big300"; do rw_jq_true --argjson n "$COST_CHANGES" ".changes == \$n" <<<"$r" || return 1; done; }
check "cost: the changes on both nodes were acked ok (big node: $n_big runs)" all_acked
[ -s "$RW_WORK/cost.err" ] && tail -c 600 "$RW_WORK/cost.err" | diag

# ---- frozen server: the stream and the reconnection hang; the agent neither waits nor stops ---
section frozen
stalls() { grep -c "stalled: no complete message" "$RW_WORK/agent.log" || true; }
s0=$(stalls)
kill -STOP "$SERVER_PID"
more_stalls() { [ "$(stalls)" -gt "$s0" ]; }
check "frozen: a server that stops answering (SIGSTOP) is cut after $STALL s" rw_wait $((STALL + 5)) more_stalls
rw_sleep 1 # the reconnection's TLS handshake now waits on the frozen server
t0=$(date +%s%N)
st=$(rw_status_json)
t1=$(date +%s%N)
check "frozen: status answers ($(((t1 - t0) / 1000000)) ms), still enforcing, not connected" \
	rw_jq_true ".ready and (.agent.policy_watch.connected | not)" <<<"$st"
check "frozen: enforcement goes on: B reaches the database" test "$(rw_probe b tcp 52.94.9.5 5432)" = ok
t0=$(date +%s%N)
rw_agent_kill TERM
t1=$(date +%s%N)
exit_limit=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 3000 * k}')
check "frozen: SIGTERM: the agent exits in $(((t1 - t0) / 1000000)) ms (under $exit_limit) though a connection hangs" \
	test $(((t1 - t0) / 1000000)) -lt "$exit_limit"
kill -CONT "$SERVER_PID" 2>/dev/null || true
server_stop

# ---- lease: a snapshot with lease_seconds; the datapath falls back when the messages stop -----
section lease
LEASE=2
server_start
agent "${GOOD[@]}" --listen "$HTTP"
rw_wait 10 resumed || bail "the agent did not reconnect for the lease"
lrev=$(($(ctl GET /state | jq '.revision') + 1))
cat >"$RW_WORK/lease.json" <<EOT
{"revision": $lrev, "lease_seconds": $LEASE, "deny": ["10.0.0.0/16"],
 "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "$A_RUN", "pods": ["$A_IP"], "egress": "open"},
          {"id": "$B_RUN", "pods": ["$B_IP"], "allow": [{"ip": "52.94.9.5", "tcp": [5432]}]}]}
EOT
ctl POST /snapshot --data-binary "@$RW_WORK/lease.json" >/dev/null
rw_wait 5 has_ack "$lrev" || true
check "lease: the snapshot with lease_seconds $LEASE acked ok at $lrev" rw_jq_true '.ok' <<<"$(ack_of "$lrev")"
in_force() { rw_jq_true --argjson l $((LEASE * 1000)) '.lease.expired == false and .lease.remaining_ms <= $l' <<<"$(rw_status_json)"; }
check "lease: status shows it in force ($(rw_status_json | jq -c .lease))" rw_wait 5 in_force
run_rule() { rw_probe b tcp 52.94.9.5 5432 --timeout 0.5; }
open_mode() { rw_probe a tcp 93.184.216.34 80 --timeout 0.5; }
proxy() { rw_probe "$1" tcp 172.20.0.10 443 --timeout 2; }
sleep $((LEASE + 1)) # longer than the lease: only the heartbeats keep it
check "lease: after $((LEASE + 1)) s the heartbeats keep it: the run rule, open mode and the proxy work" \
	eval '[ "$(run_rule)" = ok ] && [ "$(open_mode)" = ok ] && [ "$(proxy b)" = ok ]'
readyz() { rw_node_exec curl -s -o /dev/null -w '%{http_code}' -m 5 "http://$HTTP/readyz"; }
check "lease: /readyz answers $(readyz) while the lease holds" test "$(readyz)" = 200
lease_expired_count() { rw_counters_json | jq -r '[.node.egress["lease-expired"].packets // 0, .node.ingress["lease-expired"].packets // 0] | add'; }
# until_got WANT: from sandbox b, connect to the run rule's database every 20 ms until the
# answer is WANT (refused, ok); prints CLOCK_MONOTONIC ns then (one process: no start-up per try)
until_got() {
	ip netns exec "${RW_SB_NS[b]}" "$RW_PY" - "$1" "$(rw_scale 30)" <<'EOT'
import socket, sys, time
want, end = sys.argv[1], time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    s = socket.socket()
    s.settimeout(0.5)
    try:
        s.connect(("52.94.9.5", 5432))
        got = "ok"
    except ConnectionRefusedError:
        got = "refused"
    except OSError:
        got = "other"
    finally:
        s.close()
    if got == want:
        print(time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        sys.exit(0)
    time.sleep(0.02)
print("never")
EOT
}
deadline_ns() { rw -j map dump config 2>/dev/null | jq -r '.entries[0].lease_deadline_ns'; }
since_ms() { [ "$2" = never ] && echo never || echo $((($2 - $1) / 1000000)); }
# The deadline is the last message's time + the lease, and the datapath refuses from that instant
# (test_datapath checks it against the kernel's clock). What is measured here is when a prober
# polling every 20 ms first sees the refusal: bounded by 2 s, which only a machine too loaded to
# schedule the prober misses, never a datapath that kept allowing after its deadline for long.
late_ms=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 2000 * k}')
# refused_past_deadline WHAT CAUSE: once the lease is let run out by CAUSE (at t0), the run rule
# is refused within late_ms of the deadline.
refused_past_deadline() {
	local what=$1 cause=$2 at dl ms late
	at=$(until_got refused)
	dl=$(deadline_ns)
	ms=$(since_ms "$t0" "$at")
	late=$(since_ms "$dl" "$at")
	diag "lease: $what: the run rule refused ${ms} ms after $cause, ${late} ms after the deadline (the last message + ${LEASE} s; heartbeats every 1 s)"
	check "lease: $what: the datapath refuses the run rule within lease + 2 s of the last message ($late ms past the deadline, under $late_ms)" \
		eval '[ "$at" != never ] && [ "$late" -ge 0 ] && [ "$late" -le "$late_ms" ]'
}

# (a) partition: the server's namespace drops everything of its port, both ways.
c0=$(lease_expired_count)
t0=$(rw_mono_ns)
ip netns exec "$RW_SVC" nft -f - <<EOT || bail "nft: the partition"
table inet rwlease {
	chain in { type filter hook input priority 0; tcp dport $PORT drop; }
	chain out { type filter hook output priority 0; tcp sport $PORT drop; }
}
EOT
refused_past_deadline partitioned "the partition"
check "lease: partitioned: open mode is refused too ($(open_mode))" test "$(open_mode)" = refused
check "lease: partitioned: the proxy still works for both sandboxes" \
	eval '[ "$(proxy a)" = ok ] && [ "$(proxy b)" = ok ]'
check "lease: partitioned: refusals counted as lease-expired ($c0 -> $(lease_expired_count))" \
	test "$(lease_expired_count)" -gt "$c0"
expired_shown() { rw_jq_true '.lease.expired and .lease.remaining_ms < 0' <<<"$(rw_status_json)"; }
check "lease: partitioned: status shows it expired ($(rw_status_json | jq -c .lease))" expired_shown
check "lease: partitioned: /readyz answers 503 ($(rw_node_exec curl -s -m 5 "http://$HTTP/readyz"))" \
	rw_wait 3 eval '[ "$(readyz)" = 503 ]'
metrics_expired() {
	local m
	m=$(http_get /metrics)
	grep -qx 'runwall_lease_expired 1' <<<"$m" && grep -q '^runwall_lease_remaining_seconds -' <<<"$m" &&
		grep -qE '^runwall_packets_total\{direction="egress",reason="lease-expired"\} [1-9]' <<<"$m"
}
check "lease: partitioned: /metrics shows runwall_lease_expired 1, the time since, and the lease-expired drops" \
	rw_wait 3 metrics_expired
check "lease: partitioned: /api/status shows it for the view" \
	rw_jq_true '.lease.expired' <<<"$(http_get /api/status)"
out=$(rw status 2>&1 || true)
check "lease: partitioned: runwall status says so ($(grep '^lease:' <<<"$out"))" grep -q '^lease: *EXPIRED' <<<"$out"

# (c) heal: the next message (the snapshot on reconnect, or a heartbeat) restores the policy.
t0=$(rw_mono_ns)
ip netns exec "$RW_SVC" nft delete table inet rwlease || bail "nft: healing the partition"
ms=$(since_ms "$t0" "$(until_got ok)")
diag "lease: healed: the run rule works again ${ms} ms after the heal (the agent's reconnection and its first message)"
check "lease: healed: the run rule works again ($ms ms after the heal), and open mode" \
	eval '[ "$ms" != never ] && [ "$(open_mode)" = ok ]'
check "lease: healed: /readyz answers 200 again" rw_wait 3 eval '[ "$(readyz)" = 200 ]'

# (b) a frozen agent renews nothing: the lease expires all the same.
rw_wait 5 in_force || true
t0=$(rw_mono_ns)
kill -STOP "$RW_AGENT_PID"
refused_past_deadline "agent stopped (SIGSTOP)" SIGSTOP
check "lease: agent stopped: the proxy still works" test "$(proxy b)" = ok
t0=$(rw_mono_ns)
kill -CONT "$RW_AGENT_PID"
ms=$(since_ms "$t0" "$(until_got ok)")
diag "lease: agent continued: the run rule works again ${ms} ms after SIGCONT (its next heartbeat)"
check "lease: agent continued (SIGCONT): the run rule works again ($ms ms)" test "$ms" != never

# A restarted agent resumes at the revision in force: the server sends no snapshot, only heartbeats,
# which renew the lease the kernel keeps (rw_config.lease_seconds), with no snapshot in memory.
rw_agent_kill TERM
n0=$(conns)
agent "${GOOD[@]}" --listen "$HTTP"
rw_wait 10 reconnected "$n0" || true
sleep $((LEASE + 1))
check "lease: a restarted agent resumed at $lrev (no snapshot sent) and its heartbeats keep the lease ($(rw_status_json | jq -c .lease))" \
	eval 'rw_jq_true ".connections[-1].revision == $lrev" <<<"$(ctl GET /state)" && in_force && [ "$(run_rule)" = ok ]'
rw_agent_kill TERM
server_stop

# ---- link: what the client trusts, and how long it waits in each phase (issue 32) ------------
section link
HOLD=$RW_ROOT/tests/hold_server.py HPORT=9444
# hold_start MODE: tests/hold_server.py on the server's address, port HPORT, holding each
# connection in that phase; held: the connections it took
hold_start() {
	rm -f "$RW_WORK/hold.ready"
	: >"$RW_WORK/hold.log"
	rw_bg "$RW_WORK/hold.out" ip netns exec "$RW_SVC" "$RW_PY" "$HOLD" --listen "$SRV:$HPORT" \
		--mode "$1" --cert "$C/server.crt" --key "$C/server.key" --log "$RW_WORK/hold.log" \
		--ready "$RW_WORK/hold.ready"
	HOLD_PID=$RW_LAST_PID
	rw_wait_file "$RW_WORK/hold.ready" || bail "hold_server.py --mode $1 did not start"
}
hold_stop() { kill "$HOLD_PID" 2>/dev/null || true; wait "$HOLD_PID" 2>/dev/null || true; }
held() { grep -c '^connection ' "$RW_WORK/hold.log" || true; }
# agent_as WRAP OPTIONS...: the agent started through the command in the array named WRAP (one
# that execs its arguments, so the agent keeps the pid; NOWRAP: none), with OPTIONS
NOWRAP=()
agent_as() {
	local -n pre=$1
	shift
	: >"$RW_WORK/agent.log"
	rw_cmd
	"${pre[@]}" "${RW_CMD[@]}" agent --ifprefix "$PFX" --node "node-$ID" --policy-stall "$STALL" \
		"$@" >>"$RW_WORK/agent.log" 2>&1 </dev/null &
	RW_AGENT_PID=$!
	rw_agent_wait || bail "the agent did not start"
}
logged() { grep -qE "policy watch: .*($1)" "$RW_WORK/agent.log"; }

# (a) Every phase of the stream is bounded: a server that holds the connection before TLS, after
# the request, inside the headers or after them is given up on, and connected to again after the
# backoff. The limits: 5 s for TCP and TLS; --policy-stall for the headers after the request, and
# then for each complete message.
# phase MODE PATTERN WHAT: the agent's reason matches PATTERN, and it connected again
phase() {
	PHASE_PAT=$2
	hold_start "$1"
	agent_as NOWRAP "${GOOD[@]}" --policy-url "https://$SRV:$HPORT/v1/watch"
	again() { [ "$(held)" -ge 2 ] && logged "$PHASE_PAT"; }
	rw_wait 20 again || true
	check "link: $3: given up on and connected again ($(held) connections; $(grep -m1 -oE "policy watch: .*($2)[^;]*" "$RW_WORK/agent.log" | cut -c1-120))" \
		eval 'again && rw_jq_true ".connects == 0" <<<"$(watch_json)"'
	rw_agent_kill TERM
	hold_stop
}
phase tcp "timed out|timeout" "a server that accepts TCP and never starts TLS"
phase tls "no response headers in $STALL s" "a server that completes TLS, reads the request and sends nothing"
phase headers "no response headers in $STALL s" "a server that sends a status line, then a header a byte a second"
hold_start body
agent_as NOWRAP "${GOOD[@]}" --policy-url "https://$SRV:$HPORT/v1/watch"
stalled_again() { [ "$(held)" -ge 2 ] && logged "stalled: no complete message in $STALL s"; }
rw_wait 20 stalled_again || true
check "link: a server that sends a 200's headers, then nothing: cut after $STALL s, connected again ($(held) connections)" \
	eval 'stalled_again && rw_jq_true ".connects >= 1" <<<"$(watch_json)"'
rw_agent_kill TERM
hold_stop

# (b) --policy-ca is the only trust. A CA folder installed as the system's (/etc/ssl/certs,
# bound over in a mount namespace of the agent's own, private propagation: nothing else sees it)
# holds CA "sysca", hashed for OpenSSL; the server's certificate chains to it. Named by
# --policy-ca, "ca" is the only CA: the server is refused, and it never gets the request (nor
# the token). Without --policy-ca, the system's folder is trusted, as before.
[ -d /etc/ssl/certs ] || bail "/etc/ssl/certs is missing: the link section binds its CA folder over it"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=sysca" \
	-keyout "$C/sysca.key" -out "$C/sysca.crt" 2>/dev/null || bail "openssl: the sysca CA"
mkcert server-sys sysca "subjectAltName=IP:$SRV
extendedKeyUsage=serverAuth" || bail "openssl: the server's certificate from sysca"
SYS=$RW_WORK/etc-ssl-certs
mkdir -p "$SYS"
cp "$C/sysca.crt" "$SYS/sysca.pem"
# the default bundle file libcurl also opens: present, and without sysca (its folder is the test)
cp "$C/other.crt" "$SYS/ca-certificates.crt"
openssl rehash "$SYS" 2>/dev/null || bail "openssl rehash $SYS"
IN_SYS=(unshare --mount --propagation private -- sh -c 'mount --bind "$0" /etc/ssl/certs && exec "$@"' "$SYS")
server_start server-sys
sys_curl() { # sys_curl [WRAPPER...]: curl's answer from the server, verified by the default CAs
	"$@" nsenter --net="/run/netns/$RW_NODE" curl -sS -o /dev/null -w '%{http_code}' -m 5 \
		--cert "$C/node.crt" --key "$C/node.key" "https://$SRV:$PORT/nothing" 2>/dev/null || true
}
check "link: in that mount namespace, curl trusts the server through the CA folder alone ($(sys_curl "${IN_SYS[@]}")), outside it not ($(sys_curl))" \
	eval '[ "$(sys_curl "${IN_SYS[@]}")" = 404 ] && [ "$(sys_curl)" != 404 ]'
l0=$(wc -l <"$RW_WORK/server.log")
agent_as IN_SYS "${GOOD[@]}" --policy-url "$URL"
no_request() { tail -n +"$((l0 + 1))" "$RW_WORK/server.log" | grep -qE '"(GET|POST) |bearer token' && return 1 || return 0; }
rw_wait 8 logged "certificate problem" || true
why=$(grep -m1 -oE 'policy watch: [^;]*certificate problem[^;]*' "$RW_WORK/agent.log" | cut -c1-120 || true)
check "link: --policy-ca names another CA: the server chained to the system's folder is refused ($why)" \
	eval 'logged "certificate problem" && rw_jq_true ".connects == 0" <<<"$(watch_json)"'
check "link: ... and the server never got the request, nor the token" no_request
rw_agent_kill TERM
agent_as IN_SYS --policy-cert "$C/node.crt" --policy-key "$C/node.key" \
	--policy-token-file "$C/token" --policy-url "$URL"
check "link: without --policy-ca, the system's CAs are trusted: connected" \
	rw_wait 10 eval 'rw_jq_true ".connected" <<<"$(watch_json)"'
rw_agent_kill TERM
server_stop

# (c) The bundle is read again at each connection: a rotated --policy-ca is picked up.
server_start
cp "$C/other.crt" "$RW_WORK/rotated-ca.pem"
agent_as NOWRAP --policy-ca "$RW_WORK/rotated-ca.pem" --policy-cert "$C/node.crt" \
	--policy-key "$C/node.key" --policy-token-file "$C/token" --policy-url "$URL"
rw_wait 8 logged "certificate problem" || true
cp "$C/ca.crt" "$RW_WORK/rotated-ca.pem"
check "link: a --policy-ca file rewritten with the server's CA: the next connection succeeds" \
	rw_wait 15 eval 'rw_jq_true ".connected" <<<"$(watch_json)"'
rw_agent_kill TERM
server_stop

# (d) Plain http:// only to a literal loopback address. In a mount namespace whose /etc/hosts
# maps 127.ctl.example to the server's address, where a plain listener waits: curl reaches it by
# that name, the agent refuses the name at start, naming the flag, and connects to nothing.
cp /etc/hosts "$RW_WORK/hosts"
echo "$SRV 127.ctl.example" >>"$RW_WORK/hosts"
IN_HOSTS=(unshare --mount --propagation private -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$RW_WORK/hosts")
hold_start plain
"${IN_HOSTS[@]}" nsenter --net="/run/netns/$RW_NODE" curl -s -o /dev/null -m 2 "http://127.ctl.example:$HPORT/probe" || true
check "link: curl reaches the listener as http://127.ctl.example:$HPORT ($(held) connection)" test "$(held)" = 1
rw_cmd
"${IN_HOSTS[@]}" "${RW_CMD[@]}" agent --ifprefix "$PFX" --node "node-$ID" \
	--policy-url "http://127.ctl.example:$HPORT/v1/watch" --policy-token-file "$C/token" \
	>"$RW_WORK/plain.out" 2>&1 </dev/null &
pid=$!
gone() { ! kill -0 "$pid" 2>/dev/null; }
rw_wait 5 gone || kill "$pid" 2>/dev/null || true
wait "$pid" && rc=0 || rc=$?
check "link: --policy-url http://127.ctl.example:$HPORT/…: refused at start (exit $rc: $(head -c 200 "$RW_WORK/plain.out"))" \
	eval '[ "$rc" = 2 ] && grep -q -- "--policy-url .*literal loopback address" "$RW_WORK/plain.out"'
check "link: ... and nothing connected to the listener, no token sent ($(held) connections: $(grep '^request' "$RW_WORK/hold.log" | cut -c1-80 | tr '\n' ' '))" \
	eval '[ "$(held)" = 1 ] && ! grep -q "authorization: yes" "$RW_WORK/hold.log"'
hold_stop
out=$(rw_cmd; timeout "$(rw_scale 10)" "${RW_CMD[@]}" agent --policy-url "$URL" \
	--policy-ack-url "http://127.ctl.example/v1/ack" 2>&1) && rc=0 || rc=$?
check "link: so is --policy-ack-url http://127.ctl.example/… (exit $rc)" \
	eval '[ "$rc" = 2 ] && grep -q -- "--policy-ack-url .*literal loopback address" <<<"$out"'
# A literal loopback address is followed, directly: not through the environment's http_proxy
# (here the listener), which libcurl would otherwise send it to, token included.
hold_start plain
PROXY_ENV=(env -u no_proxy -u NO_PROXY "http_proxy=http://$SRV:$HPORT")
agent_as PROXY_ENV --policy-url "http://127.0.0.2:9/v1/watch" --policy-token-file "$C/token"
rw_wait 8 logged "Failed to connect" || true
why=$(grep -m1 -oE 'policy watch: Failed to connect[^;]*' "$RW_WORK/agent.log" | cut -c1-80 || true)
check "link: --policy-url http://127.0.0.2:9/…, a literal loopback address, is followed ($why)" \
	logged "Failed to connect"
check "link: ... directly, not through the environment's http_proxy ($(held) connections to it)" \
	test "$(held)" = 0
rw_agent_kill TERM
hold_stop
rw_suite_end
