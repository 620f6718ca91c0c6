#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The operator commands (status, map, counters, drops, explain) against a running agent on real
# veths in network namespaces made here, in plain and JSON mode; explain's verdicts on the whole
# policy matrix, some of them compared with real traffic; explain --policy; the error cases and
# their exit codes; then the agent stopped (the commands still read the pins) and detach.
#
#   tests/netns/test_cli.sh BUILD
#
# Nothing of the machine's own network is touched: every link lives in a namespace made here,
# named with this run's prefix, and everything is removed on exit. runwall runs in the node
# namespace through `nsenter --net` (not `ip netns exec`, whose private /sys hides the pins).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin cli rwc "${1:-build}"
# Waits stretch by RW_WAIT_SCALE (tests/run.sh sets it under emulation, `make vmtest`).
scale=$RW_WAIT_SCALE
[ "$(id -u)" -eq 0 ] || { echo "Bail out! run as root (netns, BPF)"; exit 1; }
# The interpreter itself, not a wrapper script that may fork it (pyenv shims): its pid is the
# one to end.
PY=$(python3 -c 'import sys; print(sys.executable)')

id=rwc$ID
node=${id}-node
svc=${id}-svc
pod_a=${id}-a		# run-7f3a, allowlist: 10.1.2.3 on veth ${id}a
pod_b=${id}-b		# run-9c01, open:      10.1.2.4 on veth ${id}b
veth_a=${id}a
veth_b=${id}b
bpffs=$RW_BPFFS sock=$RW_SOCK work=$RW_WORK
agent_pid=
pids=()

cleanup() {
	set +e
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	# Whatever still runs inside this run's namespaces was started here (the names are
	# unique to this run): end it by pid before the namespace goes.
	for ns in "$svc" "$pod_a" "$pod_b"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null; done
	done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if [ -d "$bpffs" ]; then
		nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$sock" \
			detach >/dev/null 2>&1
		rm -rf "$bpffs"
	fi
	for ns in "$node" "$svc" "$pod_a" "$pod_b"; do ip netns del "$ns" 2>/dev/null; done
	rm -f "$sock"
	rm -rf "$work"
}
trap cleanup EXIT


# runwall in the node namespace with this run's pins and socket. `run` keeps its output in
# $out, stderr in $err and the exit code in $rc, whatever the exit code.
rw() { nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$sock" "$@"; }
run() {
	rc=0
	out=$("$@" 2>"$work/stderr") || rc=$?
	err=$(cat "$work/stderr")
}
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# A Python expression over the JSON document in $out (as d).
jq_() { python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(($1))" <<<"$out"; }
json_is() { # json_is EXPR EXPECTED
	local got
	got=$(jq_ "$1" 2>&1) || true
	[ "$got" = "$2" ] || { echo "#   $1 = $got, expected $2" >&2; return 1; }
}

# ---- helpers run inside the namespaces ----
cat >"$work/listen.py" <<'EOF'
# listen.py ADDR:PORT/PROTO...: accept TCP (greet, close) and echo UDP until killed.
import selectors, socket, sys
sel = selectors.DefaultSelector()
for spec in sys.argv[1:]:
    addr, rest = spec.rsplit(":", 1)
    port, proto = rest.split("/")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    if proto == "tcp":
        s.listen(64)
    sel.register(s, selectors.EVENT_READ, proto)
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        s = key.fileobj
        if key.data == "tcp":
            c, _ = s.accept()
            try:
                c.sendall(b"hello\n")
            except OSError:
                pass
            c.close()
        else:
            data, peer = s.recvfrom(2048)
            s.sendto(data, peer)
EOF
cat >"$work/try.py" <<'EOF'
# try.py tcp|udp DST PORT [SRC]: one attempt, 0.5 s: prints ok, refused or timeout. A refused TCP
# attempt sends exactly one SYN (the first retransmission would come after 1 s).
import socket, sys
proto, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = sys.argv[4] if len(sys.argv) > 4 else "0.0.0.0"
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
s.settimeout(0.5)
s.bind((src, 0))
try:
    if proto == "tcp":
        s.connect((dst, port))
        s.recv(16)
    else:
        s.sendto(b"ping", (dst, port))
        s.recvfrom(16)
    print("ok")
except socket.timeout:
    print("timeout")
except OSError:
    print("refused")
EOF
try() { in_ns "$1" "$PY" "$work/try.py" "${@:2}"; }

start_listener() { # start_listener NS SPEC...
	local ns=$1 f
	shift
	f="$work/listener.$ns.$#"
	in_ns "$ns" "$PY" "$work/listen.py" "$@" >"$f" 2>&1 &
	pids+=($!)
	for _ in $(seq $((100 * scale))); do
		grep -q ready "$f" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "Bail out! a listener in $ns did not start:"; diag <"$f"
	exit 1
}

# ---- the node: a services namespace behind it, two sandboxes wired like the VPC CNI's ----
for ns in "$node" "$svc" "$pod_a" "$pod_b"; do
	ip netns add "$ns"
	in_ns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$ns" link set lo up
done
in_ns "$node" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
	net.ipv4.conf.default.rp_filter=0
# The link to the services is not a sandbox: its name must not start with the prefix.
ip -n "$node" link add "up$$" type veth peer name eth0 netns "$svc"
ip -n "$node" addr add 172.31.255.1/30 dev "up$$"
ip -n "$node" link set "up$$" up
ip -n "$node" route add default via 172.31.255.2
ip -n "$svc" addr add 172.31.255.2/30 dev eth0
ip -n "$svc" link set eth0 up
ip -n "$svc" route add default via 172.31.255.1
svc_addrs=(172.20.0.10 172.20.0.11 172.20.0.12 172.20.0.13 172.20.0.30 172.20.0.53
	169.254.169.254 10.0.5.5 93.184.216.34 8.8.8.8)
for a in "${svc_addrs[@]}"; do ip -n "$svc" addr add "$a/32" dev lo; done
specs=()
for p in 22 53 80 443 3000 3128 3443 8080 8443; do specs+=("0.0.0.0:$p/tcp"); done
specs+=(172.20.0.53:53/udp 8.8.8.8:53/udp)
start_listener "$svc" "${specs[@]}"

add_pod() { # add_pod NS VETH IP
	local ns=$1 veth=$2 ip=$3 mac
	ip -n "$node" link add "$veth" type veth peer name eth0 netns "$ns"
	mac=$(ip -n "$node" -br link show "$veth" | awk '{print $3}')
	ip -n "$ns" addr add "$ip/32" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" route add 169.254.1.1 dev eth0 scope link
	ip -n "$ns" route add default via 169.254.1.1 dev eth0 onlink
	ip -n "$ns" neigh add 169.254.1.1 dev eth0 lladdr "$mac" nud permanent
	ip -n "$node" link set "$veth" up
	ip -n "$node" route add "$ip/32" dev "$veth" scope link
}
add_pod "$pod_a" "$veth_a" 10.1.2.3
add_pod "$pod_b" "$veth_b" 10.1.2.4
start_listener "$pod_a" 0.0.0.0:4096/tcp 0.0.0.0:4098/tcp 0.0.0.0:4999/tcp 0.0.0.0:6085/tcp \
	0.0.0.0:22/tcp

cat >"$work/policy.json" <<'EOF'
{
  "revision": 12,
  "egress": "allowlist",
  "deny": ["10.0.0.0/16", "100.64.0.0/16"],
  "services": [
    {"name": "egress-proxy",    "ip": "172.20.0.10", "tcp": [443, 8443, 3128]},
    {"name": "identity-broker", "ip": "172.20.0.11", "tcp": [3443]},
    {"name": "app-tier",        "ip": "172.20.0.12", "tcp": [3000]},
    {"name": "drive-gateway",   "ip": "172.20.0.13", "tcp": [8080]},
    {"name": "model-gateway",   "cidr": "172.21.0.0/24", "tcp": [443]}
  ],
  "inbound": [
    {"name": "app-tier", "cidr": "172.20.0.12/32", "tcp": [4096, 4098, 4999, 6085]}
  ],
  "runs": [
    {"id": "run-7f3a", "pods": ["10.1.2.3"]},
    {"id": "run-9c01", "pods": ["10.1.2.4"], "egress": "open",
     "allow": [{"cidr": "52.94.9.0/24", "tcp": [5432]}]}
  ]
}
EOF
# Revision 13: the egress proxy is gone and run-7f3a is open.
python3 - "$work/policy.json" "$work/next.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["revision"] = 13
p["services"] = [s for s in p["services"] if s["name"] != "egress-proxy"]
p["runs"][0]["egress"] = "open"
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF

# ---- the agent ----
nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$sock" agent \
	--policy "$work/policy.json" --ifprefix "$id" >"$work/agent.log" 2>&1 &
agent_pid=$!
up=0
for _ in $(seq $((200 * scale))); do
	if ! kill -0 "$agent_pid" 2>/dev/null; then break; fi
	run rw -j status
	if [ "$rc" = 0 ] && json_is "d['agent']['running'] and d['ready']" True 2>/dev/null; then
		up=1
		break
	fi
	sleep 0.05
done
if [ "$up" != 1 ]; then
	echo "Bail out! the agent did not become ready; its log:"
	diag <"$work/agent.log"
	exit 1
fi
ok "the agent is up and the node ready (status -j exits 0)"

# A command starts without libcurl and libmicrohttpd and the thirty libraries they need: the
# library opens them at their first call (user/lib/netlibs.c).
check "runwall does not link libcurl or libmicrohttpd (opened at their first call)" \
	bash -c "! ldd '$RW_RUNWALL' | grep -Eq 'libcurl|libmicrohttpd'"

# ---- status ----
run rw status
check "status exits 0 when ready ($rc)" test "$rc" = 0
check "status says READY at revision 12" grep -q "READY, enforcing revision 12" <<<"$out"
check "status names the run and its generation" \
	grep -Eq "run-7f3a +enforcing generation 12 since .* allowlist +idx 1 +pods 10.1.2.3" <<<"$out"
check "status shows each sandbox veth attached first on both hooks" \
	test "$(grep -Ec "^  ${id}[ab] .* (tcx|tc) first +(tcx|tc) first" <<<"$out")" = 2
# Sizes and the layout version come from the contract header, whatever this build has.
max_pods=$(awk '$2 == "RW_MAX_PODS" && $1 == "#define" {print $3; exit}' include/runwall.h)
layout=$(awk '$2 == "RW_LAYOUT_VERSION" && $1 == "#define" {print $3; exit}' include/runwall.h)
check "status shows the map fill levels" grep -Eq "^  pods +rw_pods +2 +$max_pods" <<<"$out"
check "status shows the agent" grep -q "agent: *running" <<<"$out"
run rw -j status
check "status -j exits 0" test "$rc" = 0
check "status -j: ok, ready, revision" json_is "d['ok'], d['ready'], d['revision']" "(True, True, 12)"
check "status -j: runs" json_is "[(r['id'], r['gen'], r['egress'], r['pods']) for r in d['runs']]" \
	"[('run-7f3a', 12, 'allowlist', ['10.1.2.3']), ('run-9c01', 12, 'open', ['10.1.2.4'])]"
check "status -j: sandboxes bound and attached first" \
	json_is "sorted((s['ifname'], s['pod'], s['run'], s['hooks']['egress']['first'], s['hooks']['ingress']['first']) for s in d['sandboxes'])" \
	"[('${veth_a}', '10.1.2.3', 'run-7f3a', True, True), ('${veth_b}', '10.1.2.4', 'run-9c01', True, True)]"
check "status -j: map fill" \
	json_is "[(m['pin'], m['entries']) for m in d['maps'] if m['name'] in ('pods', 'allow', 'inbound', 'deny') and m['entries']]" \
	"[('rw_pods', 2), ('rw_allow_exact', 6), ('rw_allow_cidr', 2), ('rw_deny', 2), ('rw_inbound', 4)]"
check "status -j: events from the kernel and the agent" \
	json_is "sorted(d['events'])" "['delivered', 'lost', 'ring_drains_capped', 'sent', 'skipped', 'subscribers', 'suppressed']"
# The control socket's `status` is the agent's part of that document only: nothing the kernel
# holds (readiness, revision, the last flip, a run's pods, a veth's pod, run and hooks).
run "$PY" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"status\n")
s.shutdown(socket.SHUT_WR)
print(s.makefile().readline())' "$sock"
check "the socket's status: the agent's part, no node-level key" json_is "sorted(d)" \
	"['apply_ms', 'attach', 'bind', 'bpffs', 'cni', 'containers', 'events', 'ifprefix', 'last_error', 'ok', 'policy_file', 'policy_watch', 'ready_since', 'runs', 'sandboxes', 'socket', 'staged']"
check "the socket's status: each run's since, each veth by name and index" \
	json_is "sorted(set(k for r in d['runs'] for k in r)), sorted(set(k for x in d['sandboxes'] for k in x)), len(d['runs']), len(d['sandboxes'])" \
	"(['id', 'since'], ['ifindex', 'ifname'], 2, 2)"
# Global options go before or after the command (kubectl, bpftool style).
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" status --socket "$sock" -j --bpffs="$bpffs"
check "status --socket S -j --bpffs=DIR: options after the command ($rc)" \
	json_is "d['ok'], d['ready'], d['revision'], d['agent']['running']" "(True, True, 12, True)"
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --json counters --bpffs "$bpffs" --run run-7f3a
check "--json counters --bpffs DIR --run ID: mixed positions ($rc)" json_is "d['ok']" True
run "$RW_RUNWALL" help agent
check "help agent is the agent's whole usage (--event-rate included)" \
	grep -q -- "--event-rate N\[/BURST\]" <<<"$out"
run "$RW_RUNWALL" agent --help
check "agent --help prints the same text as help agent" test "$out" = "$("$RW_RUNWALL" help agent)"

# ---- map ----
# Every map of the contract header's RW_MAPS, whatever this build has.
n_maps=$(grep -c '^	X([A-Z0-9_]*, rw_[a-z0-9_]*, "' include/runwall.h)
run rw map list
check "map list exits 0 and names every pinned map" \
	test "$rc" = 0 -a "$(grep -Ec '^  [a-z0-9]+ +rw_[a-z_0-9]+ ' <<<"$out")" = "$n_maps"
run rw -j map list
check "map list -j" json_is "len(d['maps']), d['revision']" "($n_maps, 12)"

run rw map dump config
check "map dump config" grep -Eq "^revision +12$" <<<"$out"
run rw -j map dump config
check "map dump config -j" json_is "d['entries'][0]['ready'], d['entries'][0]['revision'], d['entries'][0]['layout_version']" "(True, 12, $layout)"

run rw map dump endpoints
check "map dump endpoints" test "$(grep -Ec "${id}[ab] +10.1.2.[34] +run-" <<<"$out")" = 2
run rw -j map dump endpoints
check "map dump endpoints -j" json_is "sorted((e['ifname'], e['pod'], e['run']) for e in d['entries'])" \
	"[('${veth_a}', '10.1.2.3', 'run-7f3a'), ('${veth_b}', '10.1.2.4', 'run-9c01')]"
run rw map lookup endpoints "$veth_b"
check "map lookup endpoints IFNAME" grep -q "10.1.2.4" <<<"$out"
ifindex_a=$(ip -n "$node" -o link show "$veth_a" | cut -d: -f1)
run rw -j map lookup endpoints "$ifindex_a"
check "map lookup endpoints IFINDEX -j" json_is "[e['pod'] for e in d['entries']]" "['10.1.2.3']"

run rw map dump pods
check "map dump pods" grep -Eq "10.1.2.4 +run-9c01 +2 +12 +open" <<<"$out"
run rw -j map lookup pods 10.1.2.3
check "map lookup pods -j" json_is "[(e['run'], e['idx'], e['gen'], e['egress']) for e in d['entries']]" \
	"[('run-7f3a', 1, 12, 'allowlist')]"
run rw map lookup pods 10.1.2.99
check "map lookup of a missing key exits 1 ($rc)" test "$rc" = 1

run rw map dump allow
check "map dump allow: services and the run's own rule, named" \
	test "$(grep -c "services\[0\] egress-proxy" <<<"$out")" = 3 -a \
	"$(grep -Ec "run run-9c01 +52.94.9.0/24 +tcp/5432 +cidr +runs\[1\].allow\[0\]" <<<"$out")" = 1
run rw -j map dump allow
check "map dump allow -j" json_is "len(d['entries']), sorted(set(e['kind'] for e in d['entries']))" \
	"(8, ['cidr', 'exact'])"
run rw -j map lookup allow 172.21.0.9:443
check "map lookup allow IP:PORT finds the covering CIDR" \
	json_is "[(e['dst'], e['rule']) for e in d['entries']]" "[('172.21.0.0/24', 'services[4] model-gateway')]"

run rw map dump deny
check "map dump deny" test "$(grep -Ec '^  (10.0.0.0/16|100.64.0.0/16)$' <<<"$out")" = 2
run rw -j map lookup deny 10.0.5.5
check "map lookup deny -j" json_is "[e['cidr'] for e in d['entries']]" "['10.0.0.0/16']"

run rw map dump inbound
check "map dump inbound" test "$(grep -c "172.20.0.12/32 .*inbound\[0\] app-tier" <<<"$out")" = 4
run rw -j map lookup inbound 172.20.0.12:4098
check "map lookup inbound -j" json_is "[(e['peer'], e['port']) for e in d['entries']]" "[('172.20.0.12/32', 4098)]"

run rw map dump budget
check "map dump budget exits 0" test "$rc" = 0
run rw -j map dump budget
check "map dump budget -j" json_is "type(d['entries']).__name__" list

# ---- real traffic, then conntrack, counters and drops ----
counter() { # counter DIR REASON: the node's packets
	rw -j counters | python3 -c "
import json, sys
print(json.load(sys.stdin)['node']['$1']['$2']['packets'])"
}

# drops -j in the background, waiting until the agent has it as a subscriber.
subscribers() { rw -j status | python3 -c "import json,sys; print(json.load(sys.stdin)['events']['subscribers'] or 0)"; }
start_drops() { # start_drops OUTFILE ARGS...
	local f=$1 before
	shift
	before=$(subscribers)
	rw "$@" >"$f" 2>&1 &
	drops_pid=$!
	pids+=($drops_pid)
	for _ in $(seq $((100 * scale))); do
		[ "$(subscribers)" -gt "$before" ] && return 0
		sleep 0.05
	done
	return 1
}

start_drops "$work/drops.json" -j drops --pod 10.1.2.3 --count 2 --timeout $((30 * scale)) ||
	not_ok "drops did not subscribe to the agent's stream"
json_drops_pid=$drops_pid
start_drops "$work/drops.txt" drops --all --run run-7f3a --count 3 --timeout $((30 * scale)) ||
	not_ok "drops --all did not subscribe to the agent's stream"
check "an allowed service connects from the sandbox" test "$(try "$pod_a" tcp 172.20.0.10 443)" = ok
# Refused and answered (a reset from the datapath): the attempt ends at once, "refused".
check "a public host is refused in allowlist mode" test "$(try "$pod_a" tcp 93.184.216.34 443)" = refused
check "a private host is refused" test "$(try "$pod_a" tcp 10.0.5.5 22)" = refused
rc=0
wait "$drops_pid" || rc=$?
check "drops --all --count 3 exits 0 ($rc)" test "$rc" = 0
check "drops plain: a header and three aligned lines" test "$(wc -l <"$work/drops.txt")" = 4
check "drops plain: the allowed flow with its rule" \
	grep -Eq "egress +allow +rule +run-7f3a .*10.1.2.3:[0-9]+ -> 172.20.0.10:443 +tcp +egress-proxy 172.20.0.10 tcp/443\$" "$work/drops.txt"
check "drops plain: the refusals with their reasons and rules" \
	test "$(grep -Ec "drop +not-allowlisted +run-7f3a .* -> 93.184.216.34:443 +tcp +answered: rst +egress allowlist: no rule\$|drop +private-destination +run-7f3a .* -> 10.0.5.5:22 +tcp +answered: rst +deny\[0\] 10.0.0.0/16\$" "$work/drops.txt")" = 2
rc=0
wait "$json_drops_pid" || rc=$?
check "drops -j --count 2 exits 0 ($rc)" test "$rc" = 0
out=$(head -n 1 "$work/drops.json")
check "drops -j: one event object per line, only drops" \
	json_is "d['verdict'], d['reason'], d['run'], d['dst'], d['dport'], d['dir'], d['rule']" \
	"('drop', 'not-allowlisted', 'run-7f3a', '93.184.216.34', 443, 'egress', 'egress allowlist: no rule')"
check "drops -j --count 2 stopped after two" test "$(wc -l <"$work/drops.json")" = 2

run rw map dump conntrack
check "map dump conntrack: the allowed flow, opened by the pod" \
	grep -Eq "${veth_a} +10.1.2.3:[0-9]+ +172.20.0.10:443 +tcp +pod .* run-7f3a +services\[0\] egress-proxy" <<<"$out"
run rw -j map lookup conntrack 10.1.2.3
check "map lookup conntrack -j: the connection, closed by a FIN each way" \
	json_is "[(e['peer'], e['peer_port'], e['opened_by'], e['proto'], e['closing']) for e in d['entries']][:1]" \
	"[('172.20.0.10', 443, 'pod', 'tcp', 'fin')]"

run rw counters
check "counters plain: the node's and each run's non-zero rows" \
	grep -Eq "^  egress +not-allowlisted +[1-9]" <<<"$out"
check "counters plain: the summary line" grep -Eq "[0-9]+ drops, [0-9]+ allowed; events: [0-9]+ sent, [0-9]+ suppressed, [0-9]+ lost" <<<"$out"
run rw -j counters
check "counters -j: node, runs and every reason" \
	json_is "sorted(d['node']), len(d['node']['egress']), [r['id'] for r in d['runs']]" \
	"(['answers', 'egress', 'events', 'ingress'], 23, ['run-7f3a', 'run-9c01'])"
check "counters -j: the answers the refusals got" \
	json_is "sorted(d['node']['answers']), d['node']['answers']['rst'] >= 2" "(['budget', 'icmp', 'rst'], True)"
check "counters -j: node and run agree on the refusals" \
	json_is "d['node']['egress']['not-allowlisted']['packets'] >= d['runs'][0]['egress']['not-allowlisted']['packets'] >= 1" True
run rw -j counters --run run-9c01
check "counters --run" json_is "[(r['id'], r['idx'], r['gen']) for r in d['runs']]" "[('run-9c01', 2, 12)]"
run rw counters --run run-nope
check "counters --run of an unknown run exits 1 ($rc)" test "$rc" = 1

run rw -j drops --count 1 --timeout 0.5 --reason fragment
check "drops --timeout exits 1 when the count is not reached ($rc)" test "$rc" = 1

# ---- explain: the policy matrix ----
# explain_is "ARGS" VERDICT REASON-or-PATH [RULE]: plain line, JSON, exit code.
explain_is() {
	local args=$1 verdict=$2 what=$3 rule=${4:-} want_rc=0
	[ "$verdict" = drop ] && want_rc=1
	# shellcheck disable=SC2086
	run rw -j explain $args
	if [ "$rc" != "$want_rc" ]; then
		not_ok "explain $args: exit $rc, expected $want_rc ($out $err)"
		return
	fi
	local got
	got=$(jq_ "d['verdict'], (d['path'] if d['verdict'] == 'allow' else d['reason']), d['rule']")
	if [ "$got" = "('$verdict', '$what', '$rule')" ]; then
		ok "explain $args: $verdict $what${rule:+ ($rule)}"
	else
		not_ok "explain $args: $got, expected ('$verdict', '$what', '$rule')"
	fi
}
A="--pod 10.1.2.3"
B="--run run-9c01"
explain_is "$A 172.20.0.10 443" allow rule "services[0] egress-proxy"
explain_is "$A 172.20.0.10 8443" allow rule "services[0] egress-proxy"
explain_is "$A 172.20.0.10 3128" allow rule "services[0] egress-proxy"
explain_is "$A 172.20.0.11 3443" allow rule "services[1] identity-broker"
explain_is "$A 172.20.0.12 3000" allow rule "services[2] app-tier"
explain_is "$A 172.20.0.13 8080" allow rule "services[3] drive-gateway"
explain_is "$A 172.21.0.77 443" allow rule-cidr "services[4] model-gateway"
explain_is "$A 172.20.0.30 8080" drop private-destination	# connectors: not for sandboxes
explain_is "$A 169.254.169.254 80" drop metadata
explain_is "$A 169.254.170.2 80" drop metadata
explain_is "$A 10.0.5.5 22" drop private-destination
explain_is "$A 192.168.1.1 443" drop private-destination
explain_is "$A 172.20.0.53 53 udp" drop dns
explain_is "$A 172.20.0.53 53 tcp" drop dns
explain_is "$A 8.8.8.8 53 udp" drop dns
explain_is "$A 172.20.0.10 80" drop private-destination	# another port of an allowed host
explain_is "$A 172.20.0.11 443" drop private-destination
explain_is "$A 172.20.0.10 443 udp" drop private-destination
explain_is "$A 93.184.216.34 443" drop not-allowlisted	# allowlist mode
explain_is "$B 93.184.216.34 443" allow open			# open mode
explain_is "$B 8.8.8.8 53 udp" drop dns
explain_is "$B 52.94.9.5 5432" allow rule-cidr "runs[1].allow[0]"
explain_is "$A 52.94.9.5 5432" drop not-allowlisted	# another run's rule
for port in 4096 4098 4999 6085; do
	explain_is "$A 172.20.0.12 $port --ingress" allow inbound "inbound[0] app-tier"
	explain_is "$A 172.20.0.20 $port --ingress" drop inbound-denied
done
explain_is "$A 172.20.0.12 22 --ingress" drop inbound-denied
explain_is "$A 172.20.0.12 4096 udp --ingress" drop inbound-denied

run rw explain --pod 10.1.2.3 172.20.0.10 443
check "explain plain: the line ($out)" test "$out" = \
	"egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp (run run-7f3a gen 12, revision 12): allowed via rule services[0] egress-proxy"
run rw explain --run run-7f3a 93.184.216.34 443 --sport 41000
check "explain plain, refused, exit 1 ($rc)" test "$rc" = 1 -a "$out" = \
	"egress 10.1.2.3:41000 -> 93.184.216.34:443 tcp (run run-7f3a gen 12, revision 12): refused: not-allowlisted, answered with rst"
run rw -j explain --run run-7f3a 172.20.0.53 53 udp
check "explain -j: a refused datagram is answered with icmp" json_is "d['reason'], d['answer']" "('dns', 'icmp')"
run rw -j explain --pod 10.1.2.3 172.20.0.12 4096 --ingress
check "explain -j: the documented fields" \
	json_is "d['ok'], d['dir'], d['src'], d['sport'], d['dst'], d['dport'], d['proto'], d['run'], d['gen'], d['revision'], d['rule_id'] > 0" \
	"(True, 'ingress', '172.20.0.12', 40000, '10.1.2.3', 4096, 'tcp', 'run-7f3a', 12, 12, True)"

# explain changes nothing: no counter moves.
before=$(rw -j counters)
rw explain --pod 10.1.2.3 93.184.216.34 443 >/dev/null || true
rw explain --pod 10.1.2.3 172.20.0.10 443 >/dev/null || true
check "explain changes no counter (dry run)" test "$(rw -j counters)" = "$before"

# ---- explain against real traffic: the same verdict, and the counter it names moves ----
real_vs_explain() { # real_vs_explain NS EXPLAIN-ARGS -- TRY-ARGS
	local ns=$1 eargs=$2 dir=egress reason verdict answer got b a
	shift 3
	[[ "$eargs" == *--ingress* ]] && dir=ingress
	# shellcheck disable=SC2086
	run rw -j explain $eargs
	verdict=$(jq_ "d['verdict']")
	reason=$(jq_ "d['reason']")
	answer=$(jq_ "d['answer']")
	b=$(counter "$dir" "$reason")
	got=$(try "$ns" "$@")
	a=$(counter "$dir" "$reason")
	if [ "$verdict" = allow ] && [ "$got" != ok ]; then
		not_ok "real traffic ($*: $got) disagrees with explain ($eargs: allowed)"
	elif [ "$verdict" = drop ] && [ "$got" = ok ]; then
		not_ok "real traffic ($*: ok) disagrees with explain ($eargs: $reason)"
	# An answered TCP refusal ends "refused" at once; try.py's UDP socket is not connected,
	# and Linux reports an ICMP error only to a connected one (__udp4_lib_err()), so it times out.
	elif [ "$verdict" = drop ] && [ "$got" != "$([ "$answer" != none ] && [ "$1" = tcp ] && echo refused || echo timeout)" ]; then
		not_ok "real traffic ($*: $got) disagrees with explain ($eargs: $reason, answer $answer)"
	elif [ "$a" -le "$b" ]; then
		not_ok "real traffic ($*): $dir $reason did not grow ($b -> $a)"
	else
		ok "real traffic agrees with explain $eargs: $verdict $reason, answer $answer ($got, $dir $reason $b -> $a)"
	fi
}
real_vs_explain "$pod_a" "$A 172.20.0.11 3443" -- tcp 172.20.0.11 3443
real_vs_explain "$pod_a" "$A 172.20.0.30 8080" -- tcp 172.20.0.30 8080
real_vs_explain "$pod_a" "$A 169.254.169.254 80" -- tcp 169.254.169.254 80
real_vs_explain "$pod_a" "$A 172.20.0.53 53 udp" -- udp 172.20.0.53 53
real_vs_explain "$pod_a" "$A 93.184.216.34 443" -- tcp 93.184.216.34 443
real_vs_explain "$pod_b" "$B 93.184.216.34 443" -- tcp 93.184.216.34 443
real_vs_explain "$svc" "$A 172.20.0.12 4096 --ingress" -- tcp 10.1.2.3 4096 172.20.0.12
real_vs_explain "$svc" "$A 172.20.0.13 4098 --ingress" -- tcp 10.1.2.3 4098 172.20.0.13

# ---- explain --policy: what a change would do ----
run rw explain --pod 10.1.2.3 172.20.0.10 443 --policy "$work/next.json"
check "explain --policy: now allowed, refused with the file, exit 1 ($rc)" test "$rc" = 1 -a "$out" = \
	"egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp (run run-7f3a gen 12, revision 12): now: allowed via rule services[0] egress-proxy; with $work/next.json (run run-7f3a gen 13, revision 13): refused: private-destination, answered with rst"
run rw -j explain --pod 10.1.2.3 93.184.216.34 443 --policy "$work/next.json"
check "explain --policy -j: the file's verdict on top, the live one under now ($rc)" \
	json_is "d['verdict'], d['path'], d['revision'], d['now']['verdict'], d['now']['reason'], d['now']['revision']" \
	"('allow', 'open', 13, 'drop', 'not-allowlisted', 12)"
run rw explain --run run-9c01 52.94.9.5 5432 --policy "$work/next.json"
check "explain --policy by run" grep -q "with $work/next.json (run run-9c01 gen 13, revision 13): allowed via rule-cidr runs\[1\].allow\[0\]" <<<"$out"
printf '{"revision": 14, "runs": [{"id": "x", "pods": ["10.1.2.300"]}]}\n' >"$work/bad.json"
run rw explain --pod 10.1.2.3 172.20.0.10 443 --policy "$work/bad.json"
check "explain --policy with a refused snapshot exits 1 with the parser's message" \
	test "$rc" = 1 -a -n "$(grep "bad.json:1:" <<<"$err")"

# ---- IPv6: the maps and explain over a dual-stack snapshot ----
# Its IPv6 pod has no veth here (the namespaces run without IPv6): explain judges it in private
# maps (--policy), where the pod is bound by its IPv6 address.
python3 - "$work/policy.json" "$work/dual.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["revision"] = 14
p["deny"].append("fd00:10::/32")
p["services"].append({"name": "proxy6", "ip": "2600:1f18:aa::10", "tcp": [443]})
p["services"].append({"name": "api6", "cidr": "2600:1f18:ab::/48", "tcp": [8443]})
p["inbound"].append({"name": "app6", "cidr": "2600:1f18:aa:1::/64", "tcp": [4096]})
p["runs"][1]["pods"].append("2600:1f18:bb::4")
p["runs"][1]["allow"].append({"ip": "2a00:1450::1", "tcp": [443]})
json.dump(p, open(sys.argv[2], "w"), indent=1)
EOF
run rw apply "$work/dual.json"
check "apply of a dual-stack snapshot ($rc: $err)" test "$rc" = 0
run rw map dump pods
check "map dump pods: the IPv6 pod in its run" \
	grep -Eq "^  2600:1f18:bb::4 +run-9c01 +2 +14 +open +- \(no veth bound\)" <<<"$out"
run rw -j map lookup pods 2600:1f18:bb::4
check "map lookup pods IPV6 -j" json_is "[(e['pod'], e['run'], e['idx'], e['gen']) for e in d['entries']]" \
	"[('2600:1f18:bb::4', 'run-9c01', 2, 14)]"
run rw map dump allow
check "map dump allow: the IPv6 services and run rule, named" \
	test "$(grep -Ec "^  services +2600:1f18:aa::10 +tcp/443 +exact +services\[5\] proxy6$|^  services +2600:1f18:ab::/48 +tcp/8443 +cidr +services\[6\] api6$|^  run run-9c01 +2a00:1450::1 +tcp/443 +exact +runs\[1\].allow\[1\]$" <<<"$out")" = 3
run rw -j map lookup allow '[2600:1f18:ab:5::1]:8443'
check "map lookup allow [IPV6]:PORT finds the covering CIDR" \
	json_is "[(e['dst'], e['scope'], e['rule']) for e in d['entries']]" "[('2600:1f18:ab::/48', 'services', 'services[6] api6')]"
run rw -j map lookup allow 2a00:1450::1 tcp
check "map lookup allow IPV6 tcp: the run's rule" \
	json_is "[(e['dst'], e['port'], e['run']) for e in d['entries']]" "[('2a00:1450::1', 443, 'run-9c01')]"
run rw -j map lookup allow '[2600:1f18:ab:5::1]:443'
check "map lookup allow [IPV6]:PORT of no rule exits 1 ($rc)" test "$rc" = 1
run rw map dump deny
check "map dump deny: both families" \
	test "$(grep -Ec '^  (10.0.0.0/16|100.64.0.0/16|fd00:10::/32)$' <<<"$out")" = 3
run rw -j map lookup deny fd00:10:5::1
check "map lookup deny IPV6 -j" json_is "[e['cidr'] for e in d['entries']]" "['fd00:10::/32']"
run rw -j map lookup deny 10.0.5.5
check "map lookup deny IPV4 -j: no IPv6 entry" json_is "[e['cidr'] for e in d['entries']]" "['10.0.0.0/16']"
run rw -j map lookup inbound '[2600:1f18:aa:1::9]:4096'
check "map lookup inbound [IPV6]:PORT -j" json_is "[(e['peer'], e['port'], e['rule']) for e in d['entries']]" \
	"[('2600:1f18:aa:1::/64', 4096, 'inbound[1] app6')]"
run rw -j map list
check "map list -j: the IPv6 tables' fill" \
	json_is "[(m['pin'], m['entries']) for m in d['maps'] if m['pin'] in ('rw_pods6', 'rw_allow_exact6', 'rw_allow_cidr6', 'rw_deny6', 'rw_inbound6', 'rw_conntrack6')]" \
	"[('rw_pods6', 1), ('rw_allow_exact6', 2), ('rw_allow_cidr6', 1), ('rw_deny6', 1), ('rw_inbound6', 1), ('rw_conntrack6', 0)]"
run rw map lookup pods 2600:1f18::zz
check "map lookup of a bad IPv6 address exits 2 ($rc)" test "$rc" = 2

run rw explain --pod 2600:1f18:bb::4 2a00:1450::1 443 --policy "$work/dual.json"
check "explain an IPv6 packet: the frame as IPv6, bracketed, allowed by the run's IPv6 rule ($rc)" \
	test "$rc" = 0 -a "$out" = "egress [2600:1f18:bb::4]:40000 -> [2a00:1450::1]:443 tcp (run run-9c01 gen 14, revision 14): with $work/dual.json: allowed via rule runs[1].allow[1]"
check "... judged by the file alone, the pod having no veth here" \
	grep -q "the live policy cannot judge this packet on this node" <<<"$err"
run rw -j explain --run run-9c01 2a00:1450::1 443 udp --policy "$work/dual.json"
check "explain --run with an IPv6 DST takes the run's IPv6 pod -j" \
	json_is "d['family'], d['pod'], d['src'], d['dst'], d['dport'], d['proto'], d['verdict'], d['reason']" \
	"('ipv6', '2600:1f18:bb::4', '2600:1f18:bb::4', '2a00:1450::1', 443, 'udp', 'allow', 'allowed')"
# The kernel's judging of IPv6 through explain: a service, metadata, a NAT64 form of a private
# address (judged as that IPv4 address), the IPv6 deny list.
explain6_is() { # explain6_is DST PORT VERDICT REASON-or-PATH [RULE]
	run rw -j explain --pod 2600:1f18:bb::4 "$1" "$2" --policy "$work/dual.json"
	local got
	got=$(jq_ "d['verdict'], d['reason'] if d['verdict'] == 'drop' else d['path'], d['rule']" 2>&1) || true
	check "explain IPv6 to $1 $2: $3 $4" test "$got" = "('$3', '$4', '${5:-}')"
}
explain6_is 2600:1f18:aa::10 443 allow rule "services[5] proxy6"
explain6_is 2600:1f18:ab:7::1 8443 allow rule-cidr "services[6] api6"
explain6_is fd00:ec2::254 80 drop metadata
explain6_is 64:ff9b::a00:505 22 drop private-destination
explain6_is fd00:10::5 443 drop private-destination
explain6_is 2a00:1450::9 443 allow open
run rw -j explain --pod 2600:1f18:bb::4 2a00:1450::1 128 icmpv6 --policy "$work/dual.json"
check "explain an ICMPv6 type -j" json_is "d['proto'], d['icmp_type'], 'dport' in d" "('icmpv6', 128, False)"
run rw explain --pod 2600:1f18:bb::4 2a00:1450::1 135 icmpv6 --policy "$work/dual.json"
check "explain an ICMPv6 type: the line" grep -q "^egress 2600:1f18:bb::4 -> 2a00:1450::1 icmpv6 type 135 " <<<"$out"
run rw explain --pod 10.1.2.4 2a00:1450::1 443
check "explain with a pod and DST of two families exits 2 ($rc)" test "$rc" = 2
run rw explain --pod 10.1.2.4 172.20.0.10 128 icmpv6
check "explain icmpv6 to an IPv4 DST exits 2 ($rc)" test "$rc" = 2
run rw explain --pod 2600:1f18:bb::4 2a00:1450::1 256 icmpv6 --policy "$work/dual.json"
check "explain with an ICMPv6 type past 255 exits 2 ($rc)" test "$rc" = 2
# A real IPv6 flow of pod_b, seen in rw_conntrack6: IPv6 on for this part only, in the node,
# pod_b and the services namespaces; static neighbours (the flow needs no NDP) and the /128
# route the agent binds the veth's IPv6 address from, as the VPC CNI makes it.
for ns in "$node" "$svc" "$pod_b"; do
	in_ns "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
	in_ns "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0
done
in_ns "$node" sysctl -qw net.ipv6.conf.all.forwarding=1
ip -n "$node" -6 addr add fd99::1/64 dev "up$$" nodad
ip -n "$svc" -6 addr add fd99::2/64 dev eth0 nodad
ip -n "$svc" -6 addr add 2a00:1450::9/128 dev lo
ip -n "$svc" -6 route add 2600:1f18:bb::4/128 via fd99::1
ip -n "$node" -6 route add 2a00:1450::/32 via fd99::2
mac_b=$(ip -n "$node" -br link show "$veth_b" | awk '{print $3}')
pod_mac_b=$(ip -n "$pod_b" -br link show eth0 | awk '{print $3}')
ip -n "$pod_b" -6 addr add 2600:1f18:bb::4/128 dev eth0 nodad
ip -n "$pod_b" -6 neigh add fe80::1 lladdr "$mac_b" dev eth0 nud permanent
ip -n "$pod_b" -6 route add default via fe80::1 dev eth0
ip -n "$node" -6 neigh add 2600:1f18:bb::4 lladdr "$pod_mac_b" dev "$veth_b" nud permanent
ip -n "$node" -6 route add 2600:1f18:bb::4/128 dev "$veth_b"
bound6=
for _ in $(seq $((100 * scale))); do
	run rw -j map lookup endpoints "$veth_b"
	# Bound by its /128 route, and with the veth's link-local as the pod's gateway.
	bound6=$(jq_ "d['entries'][0]['pod6'], d['entries'][0]['gw6'] is not None" 2>/dev/null) || true
	[ "$bound6" = "('2600:1f18:bb::4', True)" ] && break
	sleep 0.05
done
check "the agent binds pod_b's veth by its /128 route too, and its gateway ($bound6)" \
	test "$bound6" = "('2600:1f18:bb::4', True)"
in_ns "$svc" "$PY" -c 'import socket, sys
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("2a00:1450::9", 443)); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hello\n"); c.close()' >"$work/listen6" 2>&1 &
pids+=($!)
for _ in $(seq $((100 * scale))); do grep -q ready "$work/listen6" && break; sleep 0.05; done
got6=$(in_ns "$pod_b" "$PY" -c 'import socket
s = socket.socket(socket.AF_INET6); s.settimeout(3)
try:
    s.connect(("2a00:1450::9", 443)); print("ok" if s.recv(16) else "empty")
except OSError as e:
    print("failed", e)')
check "pod_b's IPv6 connection to a public address (open mode) ($got6)" test "$got6" = ok
run rw map dump conntrack
check "map dump conntrack: the IPv6 flow, bracketed" \
	grep -Eq "${veth_b} +\[2600:1f18:bb::4\]:[0-9]+ +\[2a00:1450::9\]:443 +tcp +pod .* run-9c01" <<<"$out"
run rw -j map lookup conntrack 2600:1f18:bb::4
check "map lookup conntrack IPV6 -j" \
	json_is "[(e['pod'], e['peer'], e['peer_port'], e['opened_by'], e['proto'], e['run']) for e in d['entries']]" \
	"[('2600:1f18:bb::4', '2a00:1450::9', 443, 'pod', 'tcp', 'run-9c01')]"
run rw -j map list
check "map list -j: rw_conntrack6 counts the flow" \
	json_is "[m['entries'] for m in d['maps'] if m['pin'] == 'rw_conntrack6']" "[1]"
run rw -j map lookup pods 2600:1f18:bb::4
check "map lookup pods IPV6 -j: its veth" \
	json_is "[e['ifindex'] for e in d['entries']]" "[$(ip -n "$node" -o link show "$veth_b" | cut -d: -f1)]"
# Back to the IPv4 snapshot for what follows.
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["revision"]=15; json.dump(p, open(sys.argv[2],"w"))' \
	"$work/policy.json" "$work/back.json"
run rw apply "$work/back.json"
check "apply the IPv4 snapshot again ($rc: $err)" test "$rc" = 0

# ---- errors: exit codes and messages ----
run rw frobnicate
check "an unknown command exits 2 ($rc)" test "$rc" = 2
run rw map dump alow
check "an unknown map exits 2 and names the valid ones ($rc)" \
	test "$rc" = 2 -a -n "$(grep -F "unknown map 'alow' (did you mean 'allow'?); valid: config, endpoints" <<<"$err")"
run rw -j map dump conntrak
check "... with -j, a JSON error" json_is "d['ok'], d['exit'], 'conntrack' in d['error']" "(False, 2, True)"
run rw map dupm pods
check "an unknown map subcommand exits 2 ($rc: $err)" test "$rc" = 2
run rw map dump
check "map dump without a map exits 2 and names every map it shows ($rc: $err)" \
	test "$rc" = 2 -a -n "$(grep -F "map dump: which map? valid: config, endpoints, pods, allow, deny, inbound, conntrack, counters, budget, revs" <<<"$err")"
run rw map lookup pods 10.1.2.300
check "a bad IP exits 2 ($rc: $err)" test "$rc" = 2
run rw explain --pod 10.1.2 172.20.0.10 443
check "explain with a bad pod IP exits 2 ($rc)" test "$rc" = 2
run rw explain --pod 10.1.2.3 172.20.0.10 99999
check "explain with a bad port exits 2 ($rc)" test "$rc" = 2
run rw explain --pod 10.1.2.3 172.20.0.10 443 sctp
check "explain with a bad protocol exits 2 ($rc)" test "$rc" = 2
run rw explain 172.20.0.10 443
check "explain without --pod or --run exits 2 ($rc)" test "$rc" = 2
run rw drops --reason privat-destination
check "drops with a misspelt reason exits 2 and suggests ($rc)" \
	test "$rc" = 2 -a -n "$(grep -F "did you mean 'private-destination'" <<<"$err")"
run rw drops --dst 1.2.3.4:0
check "drops with a bad --dst exits 2 ($rc)" test "$rc" = 2
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$work/none.sock" drops
check "drops without an agent exits 2 ($rc: $err)" test "$rc" = 2
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$work/none.sock" -j drops
check "... with -j, a JSON error" json_is "d['ok'], d['exit']" "(False, 2)"
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$work/nothing" --socket "$work/none.sock" status
check "status with nothing pinned and no agent exits 2 ($rc)" test "$rc" = 2
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$work/nothing" map list
check "map with nothing pinned exits 2 ($rc)" test "$rc" = 2
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$work/nothing" counters
check "counters with nothing pinned exits 2 ($rc)" test "$rc" = 2
run nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$work/nothing" explain --pod 10.1.2.3 172.20.0.10 443
check "explain with nothing pinned exits 2 ($rc)" test "$rc" = 2
check "... and pinned nothing there" test ! -e "$work/nothing"

# ---- a stuck agent (accepts, never answers): every command gives up at its deadline ----
"$PY" -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); time.sleep(120)' \
	"$work/stuck.sock" &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/stuck.sock" ] && break; sleep 0.1; done
echo '{}' >"$work/empty.json"
stuck() { nsenter --net=/run/netns/"$node" timeout 60 "$RW_RUNWALL" --bpffs "$work/nothing" --socket "$work/stuck.sock" "$@"; }
start=$(date +%s)
run stuck apply "$work/empty.json"
check "apply to a stuck agent gives up with exit 2 ($rc: $err)" \
	test "$rc" = 2 -a -n "$(grep -F "did not answer within" <<<"$err")"
run stuck detach
check "detach with a stuck agent does not hang ($rc: $err)" test "$rc" = 1
run stuck -j status
check "status with a stuck agent does not hang ($rc)" test "$rc" = 2
took=$(($(date +%s) - start))
check "... all three within their deadlines (${took} s)" test "$took" -lt $((40 * scale))
kill "${pids[-1]}" 2>/dev/null; wait "${pids[-1]}" 2>/dev/null || true

# ---- one run's change: apply --run FILE|- and apply --delete-run ID ----
# PolicyWatch's run-upsert and run-delete on the control socket: the same checks and paths; a
# refusal leaves the policy in force as it was, in the maps and for real packets.
run rw -j status
rev0=$(jq_ "d['revision']")
gen_b=$(jq_ "[r['gen'] for r in d['runs'] if r['id'] == 'run-9c01'][0]")
in_force() { # in_force: the revision, each run's id, generation and pods, and the pods map
	printf '%s|%s\n' "$(rw -j status | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["revision"], [(r["id"], r["gen"], r["pods"]) for r in d["runs"]])')" \
		"$(rw -j map dump pods)"
}
# run-7f3a (allowlist) gains one destination, 93.184.216.34:443.
cat >"$work/run-a.json" <<'EOF2'
{"id": "run-7f3a", "pods": ["10.1.2.3"],
 "allow": [{"ip": "93.184.216.34", "tcp": [443]}]}
EOF2
check "before: run-7f3a's packet to 93.184.216.34:443 is refused" \
	test "$(try "$pod_a" tcp 93.184.216.34 443)" = refused
run rw apply --run "$work/run-a.json"
check "apply --run: applied as revision $((rev0 + 1)), previous $rev0 ($rc: $out $err)" \
	test "$rc" = 0 -a -n "$(grep -F "applied revision $((rev0 + 1)) (previous $rev0) in " <<<"$out")"
check "apply --run: the change is named" grep -q "run-7f3a" <<<"$out"
check "apply --run takes effect on real traffic: 93.184.216.34:443 from run-7f3a's pod" \
	test "$(try "$pod_a" tcp 93.184.216.34 443)" = ok
explain_is "$A 93.184.216.34 443" allow rule "runs[0].allow[0]"
run rw -j status
check "status: revision $((rev0 + 1)), run-7f3a at generation $((rev0 + 1)), run-9c01 kept" \
	json_is "d['revision'], [(r['id'], r['gen']) for r in d['runs']]" \
	"($((rev0 + 1)), [('run-7f3a', $((rev0 + 1))), ('run-9c01', $gen_b)])"
rev1=$((rev0 + 1))
before=$(in_force)

# refused_is WHAT PATH MESSAGE-PART ARGS...: apply ARGS exits 1 naming PATH, in plain and -j,
# and nothing in force moved.
refused_is() {
	local what=$1 path=$2 part=$3
	shift 3
	run rw apply "$@"
	check "$what: refused, exit 1, the message names $path ($rc: $err)" \
		test "$rc" = 1 -a -n "$(grep -F "runwall: refused: " <<<"$err" | grep -F "$path: " | grep -F -- "$part")"
	run rw -j apply "$@"
	check "$what: -j says path $path, in force $rev1, exit 1 ($rc)" \
		json_is "d['ok'], d['path'], d['in_force'], d['exit']" "(False, '$path', $rev1, 1)"
	check "$what: the policy in force is unchanged (status, map)" test "$(in_force)" = "$before"
}
refused_is "a stale base" base "$rev0 is not the revision in force ($rev1)" \
	--run "$work/run-a.json" --base "$rev0"
printf '{"id": "run-7f3a", "pods": ["10.1.2.300"]}\n' >"$work/run-bad.json"
refused_is "a bad run" "run.pods[0]" '"10.1.2.300" is not an IPv4 address' \
	--run "$work/run-bad.json"
printf '{"id": "run-new", "pods": ["10.1.2.4"], "egress": "open"}\n' >"$work/run-taken.json"
refused_is "a pod another run holds" "run.pods[0]" "run-9c01" --run "$work/run-taken.json"
refused_is "a revision not above the base" revision "not newer than $rev1" \
	--run "$work/run-a.json" --revision "$rev1"
refused_is "a delete of a run not in force" id "no run run-nope in force" --delete-run run-nope
# The node's rules that name a "from" stay within rw_from (docs/policy.md): none in force, so a
# run of 2049 is refused at its 2049th.
python3 -c 'import json; print(json.dumps({"id": "run-7f3a", "pods": ["10.1.2.3"], "allow": [
	{"ip": "93.185.%d.%d" % (i // 250, i % 250 + 1), "tcp": [443], "from": {"uid": [1000]}}
	for i in range(2049)]}))' >"$work/run-from.json"
refused_is "a run past the node's from-rule limit" "run.allow[2048].from" \
	'2049 rules on the node would name a "from" (2049 in this run, 0 elsewhere): a node has at most 2048' \
	--run "$work/run-from.json"
printf '{"id": "run-7f3a",\n "pods": [}\n' >"$work/run-notjson.json"
refused_is "a run that is not JSON" run "run-notjson.json:2:" --run "$work/run-notjson.json"
run rw apply --run "$work/run-a.json" --delete-run run-9c01
check "--run and --delete-run together: exit 2 ($rc: $err)" test "$rc" = 2
run rw apply "$work/back.json" --base "$rev1"
check "--base with a whole snapshot: exit 2 ($rc: $err)" test "$rc" = 2
run rw apply --run "$work/run-a.json" --base x
check "--base that is not a revision: exit 2 ($rc: $err)" test "$rc" = 2
check "after the refusals: real traffic still under revision $rev1 (run-7f3a reaches 93.184.216.34:443)" \
	test "$(try "$pod_a" tcp 93.184.216.34 443)" = ok
explain_is "$A 93.184.216.34 443" allow rule "runs[0].allow[0]"

# A delete: run-9c01's pod is no run's, so its open egress is gone.
check "before the delete: run-9c01 (open) reaches 93.184.216.34:443" \
	test "$(try "$pod_b" tcp 93.184.216.34 443)" = ok
run rw -j apply --delete-run run-9c01 --base "$rev1"
check "apply --delete-run -j: revision $((rev1 + 1)), base $rev1 ($rc: $out)" \
	json_is "d['ok'], d['revision'], d['previous'], d['base']" "(True, $((rev1 + 1)), $rev1, $rev1)"
check "apply --delete-run takes effect on real traffic: run-9c01's pod is refused" \
	test "$(try "$pod_b" tcp 93.184.216.34 443)" != ok
run rw -j status
check "status: run-9c01 is gone" json_is "d['revision'], [r['id'] for r in d['runs']]" \
	"($((rev1 + 1)), ['run-7f3a'])"
# Back as it was, from standard input, at an explicit revision.
run rw apply --run - --revision $((rev1 + 5)) < <(printf '%s\n' \
	'{"id": "run-9c01", "pods": ["10.1.2.4"], "egress": "open", "allow": [{"cidr": "52.94.9.0/24", "tcp": [5432]}]}')
check "apply --run - --revision N: applied as revision $((rev1 + 5)) ($rc: $out $err)" \
	test "$rc" = 0 -a -n "$(grep -F "applied revision $((rev1 + 5)) (previous $((rev1 + 1)))" <<<"$out")"
check "the upsert takes effect on real traffic: run-9c01's pod reaches 93.184.216.34:443 again" \
	test "$(try "$pod_b" tcp 93.184.216.34 443)" = ok
run rw apply --help
check "apply --help is help apply" test "$out" = "$("$RW_RUNWALL" help apply)"

# ---- the agent stops: enforcement and the pinned state stay, the commands still read them ----
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=
run rw status
check "status without the agent exits 0 while the kernel enforces ($rc)" test "$rc" = 0
check "status says the agent is not running" grep -q "agent: *not running (enforcement continues from the pinned state" <<<"$out"
check "status without the agent still finds the sandboxes and their hooks" \
	test "$(grep -Ec "^  ${id}[ab] .* (tcx|tc) first +(tcx|tc) first" <<<"$out")" = 2
run rw -j status
check "status -j without the agent" json_is "d['agent']['running'], d['ready'], len(d['runs']), len(d['sandboxes'])" \
	"(False, True, 2, 2)"
run rw -j counters
check "counters without the agent" json_is "d['ok'], d['agent']" "(True, None)"
run rw -j map dump pods
check "map without the agent" json_is "len(d['entries'])" 2
explain_is "$A 172.20.0.10 443" allow rule "services[0]"	# no policy file to name it
run rw -j drops --count 1
check "drops without the agent exits 2 ($rc)" test "$rc" = 2

# ---- detach: nothing left ----
run rw detach
check "detach exits 0 ($rc: $err)" test "$rc" = 0
check "the pins are gone" test ! -e "$bpffs/rw_config" -a ! -e "$bpffs/rw_pods"
run rw status
check "status after detach exits 2 ($rc)" test "$rc" = 2
cleanup
trap - EXIT
left=$(ip netns list | grep -c "^$id-" || true)
check "the namespaces are removed" test "$left" = 0

rw_suite_end
