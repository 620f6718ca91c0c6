#!/usr/bin/env bash
# The agent on real veths in network namespaces made here: discovery, binding from /32 routes,
# fail-closed start, policy file reloads (rename and ConfigMap-style symlink swap), refusal of
# bad snapshots with the old policy still enforced, veth churn, restart after kill -9 without a
# gap, the clsact fallback, two agents side by side, runwall-cni kept chained in a CNI conf
# folder (--cni-conf-dir), and detach.
#
#   tests/netns/test_agent.sh BUILD
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin agent rwa "${1:-build}"
rw_need "$RW_CNI"

id=rwa$ID
node=${id}-node
pods=(${id}-pa ${id}-pb)
pfx=e${ID}x			# interface prefix of this run's sandbox veths
bpffs=$RW_BPFFS sock=$RW_SOCK work=$RW_WORK
agent_pid=

cleanup() {
	set +e
	[ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null
	[ -n "${third:-}" ] && kill -9 "$third" 2>/dev/null && wait "$third" 2>/dev/null
	[ -n "${listener:-}" ] && kill "$listener" 2>/dev/null && wait "$listener" 2>/dev/null
	"$RW_RUNWALL" --bpffs "$bpffs" --socket "$sock" detach >/dev/null 2>&1
	"$RW_RUNWALL" --bpffs "$bpffs-second" --socket "$sock-second" detach >/dev/null 2>&1
	"$RW_RUNWALL" --bpffs "$bpffs-third" --socket "$sock-third" detach >/dev/null 2>&1
	for ns in "$node" "${pods[@]}" ${id}-pc; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# Waits stretch by RW_WAIT_SCALE (tests/run.sh sets it under emulation, `make vmtest`).
scale=$RW_WAIT_SCALE


# runwall in the node's netns. nsenter keeps this mount namespace (and /sys/fs/bpf): `ip netns
# exec` would remount /sys and hide the pins.
rw() { nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$sock" "$@"; }
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

start_agent() { # start_agent [agent args...]
	nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs" --socket "$sock" agent \
		--ifprefix "$pfx" --resync 1 "$@" >>"$work/agent.log" 2>&1 &
	agent_pid=$!
	for _ in $(seq $((100 * scale))); do
		[ -S "$sock" ] && { rw -j status 2>/dev/null || true; } | grep -q '"running":true' && return 0
		sleep 0.05
	done
	echo "# agent did not come up; its log:"; sed 's/^/#   /' "$work/agent.log"
	return 1
}

# status exits 1 while the node is not ready; the JSON is what matters here
status_field() { { rw -j status || true; } | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
status_is() { test "$(status_field "$1")" = "$2"; }

# Retry a check for a while: netlink and inotify events reach the agent asynchronously.
eventually() {
	for _ in $(seq $((30 * scale))); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# Node counters of one direction and reason: counter egress not-ready
counter() {
	rw -j counters | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(d['node']['$1'].get('$2', {}).get('packets', 0))"
}

# One TCP connection attempt from a pod (1 s), true when it connected.
connect() { # connect POD_NS IP PORT
	in_ns "$1" timeout "$scale" bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null
}

# ---- the node: host-side veths named like EKS's, pods wired like EKS pods ----
ip netns add "$node"
ip -n "$node" link set lo up
in_ns "$node" sysctl -qw net.ipv4.ip_forward=1
# a "service" on the node itself: 172.20.0.10 answers on 443 (allowed) and 8080 (never allowed:
# a connection there can only succeed if runwall is not enforcing)
ip -n "$node" link add svc0 type veth peer name svc0p
ip -n "$node" link set svc0 up
ip -n "$node" link set svc0p up
ip -n "$node" addr add 172.20.0.10/32 dev svc0
# Not through in_ns: `in_ns … &` would record the pid of the subshell running the function,
# and killing that leaves python running. `ip netns exec` execs python, so $! is python's pid.
ip netns exec "$node" python3 -c '
import selectors, socket
sel = selectors.DefaultSelector()
for port in (443, 8080):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("172.20.0.10", port)); s.listen(64); sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        c, _ = key.fileobj.accept(); c.sendall(b"hello\n"); c.close()
' &
listener=$!

add_pod() { # add_pod NS VETH IP
	local ns=$1 veth=$2 ip=$3 mac
	ip netns add "$ns" 2>/dev/null || true
	ip -n "$node" link add "$veth" type veth peer name eth0 netns "$ns"
	ip -n "$node" link set "$veth" up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set eth0 up
	ip -n "$ns" addr add "$ip/32" dev eth0
	mac=$(ip -n "$node" -br link show "$veth" | awk '{print $3}')
	ip -n "$ns" route add 169.254.1.1 dev eth0 scope link
	ip -n "$ns" route add default via 169.254.1.1 dev eth0
	ip -n "$ns" neigh add 169.254.1.1 lladdr "$mac" dev eth0 nud permanent
	in_ns "$node" sysctl -qw net.ipv4.conf."$veth".proxy_arp=1
}
add_pod "${pods[0]}" "${pfx}a" 10.1.2.3
add_pod "${pods[1]}" "${pfx}b" 10.1.2.4

cat >"$work/v1.json" <<EOF
{
  "revision": 1,
  "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
  "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}, {"id": "run-b", "pods": ["10.1.2.4"]}]
}
EOF

# ---- 1. fail closed before the first snapshot ----
ip -n "$node" route add 10.1.2.3/32 dev "${pfx}a" scope link
start_agent
check "the agent attaches to the prefixed veths at start" \
	test "$(status_field "sum(1 for s in d['sandboxes'] if s['hooks']['egress']['attached'] and s['hooks']['ingress']['attached'])")" = 2
check "not ready before the first snapshot" test "$(status_field "d['ready']")" = False
before=$(counter egress not-ready)
connect "${pods[0]}" 172.20.0.10 443 && not_ok "a connection left the sandbox before any snapshot" ||
	ok "nothing leaves a sandbox before the first snapshot"
check "the attempt counted as not-ready" test "$(counter egress not-ready)" -gt "$before"

# ---- 2. a snapshot over the socket; binding from the /32 route ----
out=$(rw apply "$work/v1.json")
check "apply prints the revision applied ($out)" grep -q "applied revision 1" <<<"$out"
got=$(status_field "d['ready'], d['revision']")
check "ready at revision 1 ($got)" test "$got" = "True 1"
check "the allowed service answers" connect "${pods[0]}" 172.20.0.10 443
before=$(counter egress unknown-source)
connect "${pods[1]}" 172.20.0.10 443 && not_ok "a veth whose pod has no route yet let traffic out" ||
	ok "a veth with no /32 route yet is deny-all"
check "counted as unknown-source" test "$(counter egress unknown-source)" -gt "$before"
ip -n "$node" route add 10.1.2.4/32 dev "${pfx}b" scope link
check "the /32 route binds the second pod (netlink event)" \
	eventually connect "${pods[1]}" 172.20.0.10 443

# ---- 3. a new sandbox veth appears while the agent runs ----
add_pod ${id}-pc "${pfx}c" 10.1.2.5
check "a new veth is attached the moment it appears" eventually status_is \
	"[s['hooks']['egress']['attached'] for s in d['sandboxes'] if s['ifname']=='${pfx}c'] == [True]" True
ip -n "$node" route add 10.1.2.5/32 dev "${pfx}c" scope link
eventually status_is "[s['pod'] for s in d['sandboxes'] if s['ifname']=='${pfx}c']" "['10.1.2.5']" || true
before=$(counter egress unknown-source)
connect ${id}-pc 172.20.0.10 443 && not_ok "a pod no snapshot names got out" || ok "a pod no snapshot names is deny-all"
check "counted as unknown-source" test "$(counter egress unknown-source)" -gt "$before"

# ---- 4. bad snapshots are refused, the policy in force stays ----
printf '{\n  "revision": 2,\n  "runs": [{"id": "run-a", "pods": ["10.1.2.300"]}]\n}\n' >"$work/bad.json"
set +e
out=$(rw apply "$work/bad.json" 2>&1); rc=$?
set -e
check "a bad pod IP is refused with exit 1 ($rc)" test "$rc" = 1
check "the error names file, line, column and path: $out" \
	grep -q "bad.json:3:37: runs\[0\].pods\[0\]: \"10.1.2.300\" is not an IPv4 address" <<<"$out"
set +e
out=$(rw apply "$work/v1.json" 2>&1); rc=$?
set -e
check "the same revision again is refused ($out)" test "$rc" = 1
check "revision 1 still in force" test "$(status_field "d['revision']")" = 1
check "and still enforced: the service answers" connect "${pods[0]}" 172.20.0.10 443
connect "${pods[0]}" 172.20.0.10 8080 && not_ok "port 8080 answered" || ok "and 8080 is still refused"

# ---- 5. the policy file: rename over it, then a ConfigMap-style symlink swap ----
mkdir -p "$work/cm/..v1" "$work/cm/..v2" "$work/cm/..v3"
sed 's/"revision": 1/"revision": 3/' "$work/v1.json" >"$work/cm/..v1/policy.json"
ln -s ..v1 "$work/cm/..data"
ln -s ..data/policy.json "$work/cm/policy.json"
kill "$agent_pid"; wait "$agent_pid" 2>/dev/null || true
start_agent --policy "$work/cm/policy.json"
check "the agent applies a newer policy file at start" test "$(status_field "d['revision']")" = 3
# revision 4 drops the service: swap ..data like the kubelet does
cat >"$work/cm/..v2/policy.json" <<EOF
{"revision": 4, "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}, {"id": "run-b", "pods": ["10.1.2.4"]}]}
EOF
ln -s ..v2 "$work/cm/..data.tmp" && mv -T "$work/cm/..data.tmp" "$work/cm/..data"
check "a ConfigMap symlink swap is picked up (inotify)" eventually status_is "d['revision']" 4
connect "${pods[0]}" 172.20.0.10 443 && not_ok "the removed service still answers" ||
	ok "the removed service is refused at once"
printf '{"revision": 5, "runs": [' >"$work/cm/..v3/policy.json"
ln -s ..v3 "$work/cm/..data.tmp" && mv -T "$work/cm/..data.tmp" "$work/cm/..data"
check "a broken file is refused, and the refusal is visible in status" eventually status_is \
	"'policy.json:1:' in (d['agent']['last_error'] or '')" True
check "revision 4 stays" test "$(status_field "d['revision']")" = 4

# ---- 6. veth churn: deleted and recreated with the same name ----
ip -n "$node" link del "${pfx}b"
check "a deleted veth leaves the status" \
	eventually status_is "len([s for s in d['sandboxes'] if s['ifname']=='${pfx}b'])" 0
old_links=$(ls "$bpffs/links" | grep -c "_${pfx}b" || true)
check "its link pins are gone" test "$old_links" = 0
ip netns del "${pods[1]}"
add_pod "${pods[1]}" "${pfx}b" 10.1.2.4
check "the recreated veth is attached under its new ifindex" eventually status_is \
	"[s['hooks']['ingress']['attached'] for s in d['sandboxes'] if s['ifname']=='${pfx}b'] == [True]" True
check "and is unbound until its route comes back" \
	test "$(status_field "[s['pod'] for s in d['sandboxes'] if s['ifname']=='${pfx}b'][0]")" = None
ip -n "$node" route add 10.1.2.4/32 dev "${pfx}b" scope link
check "bound again from its route" \
	eventually status_is "[s['pod'] for s in d['sandboxes'] if s['ifname']=='${pfx}b']" "['10.1.2.4']"

# ---- 7. kill -9 and restart: no gap, no duplicates ----
cat >"$work/v6.json" <<EOF
{"revision": 6, "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}, {"id": "run-b", "pods": ["10.1.2.4"]}]}
EOF
rw apply "$work/v6.json" >/dev/null
ids_before=$(rw -j status | python3 -c "import json,sys; print(sorted(s['ifindex'] for s in json.load(sys.stdin)['sandboxes']))")
(
	ok_n=0 bad_n=0
	end=$((SECONDS + 4 * scale))
	while [ $SECONDS -lt $end ]; do
		if connect "${pods[0]}" 172.20.0.10 443; then ok_n=$((ok_n + 1)); else bad_n=$((bad_n + 1)); fi
		sleep 0.05
	done
	echo "$ok_n $bad_n" >"$work/probe.allowed"
) &
probe_allowed=$!
(
	leaks=0
	end=$((SECONDS + 4 * scale))
	while [ $SECONDS -lt $end ]; do
		if in_ns "${pods[1]}" timeout 0.3 bash -c "exec 3<>/dev/tcp/172.20.0.10/8080" 2>/dev/null; then
			leaks=$((leaks + 1))
		fi
	done
	echo "$leaks" >"$work/probe.denied"
) &
probe_denied=$!
sleep 1
kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null || true
agent_pid=
check "with the agent dead, enforcement stays: hooks still attached" \
	bash -c "nsenter --net=/run/netns/$node $RW_RUNWALL --bpffs $bpffs -j status | grep -q '\"attached\": *true'"
sleep 1
start_agent --policy "$work/v6.json"
wait "$probe_allowed" "$probe_denied"
read -r ok_n bad_n <"$work/probe.allowed"
check "allowed traffic flowed through kill -9 and restart ($ok_n connections, $bad_n failures)" \
	test "$bad_n" = 0 -a "$ok_n" -gt 5
check "denied traffic stayed denied through it ($(cat "$work/probe.denied") leaks)" \
	test "$(cat "$work/probe.denied")" = 0
check "the restarted agent adopted revision 6" test "$(status_field "d['revision']")" = 6
for v in "${pfx}a" "${pfx}b"; do
	for hook in egress ingress; do
		check "$v $hook: runwall attached once, first" test "$(status_field \
			"[(h['first'], h['others']) for s in d['sandboxes'] if s['ifname']=='$v' for h in [s['hooks']['$hook']]][0]")" = "(True, 0)"
	done
done
check "same sandboxes as before the restart" test "$(rw -j status | python3 -c "import json,sys; print(sorted(s['ifindex'] for s in json.load(sys.stdin)['sandboxes']))")" = "$ids_before"

# ---- 8. a second agent with its own bpffs, socket and prefix ----
ip -n "$node" link add "q${pfx}" type veth peer name "r${pfx}"
nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs-second" --socket "$sock-second" agent \
	--ifprefix "q${pfx}" --attach-mode tc >>"$work/agent2.log" 2>&1 &
second=$!
# Its status exits 1 (no snapshot: not ready); the JSON says whether it has its veth.
second_status() {
	sst=$(nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs-second" --socket "$sock-second" -j status 2>/dev/null || true)
	python3 -c "import json,sys; sys.exit(0 if [s['ifname'] for s in json.load(sys.stdin)['sandboxes']] else 1)" <<<"$sst" 2>/dev/null
}
eventually second_status || true
check "the second agent sees only its own veth" \
	test "$(python3 -c "import json,sys; print([s['ifname'] for s in json.load(sys.stdin)['sandboxes']])" <<<"$sst")" = "['q${pfx}']"
check "forced clsact fallback: mode tc" \
	test "$(python3 -c "import json,sys; print(json.load(sys.stdin)['sandboxes'][0]['hooks']['egress']['mode'])" <<<"$sst")" = tc
check "the first agent still has its own two veths" \
	test "$(status_field "sorted(s['ifname'] for s in d['sandboxes'] if s['ifname'].startswith('$pfx'))")" = "['${pfx}a', '${pfx}b', '${pfx}c']"
nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs-second" --socket "$sock-second" detach >/dev/null
wait "$second" 2>/dev/null || true
check "detaching the second agent leaves the first one's state" test "$(status_field "d['revision']")" = 6
check "and takes its tc filter off, clsact and others stay" \
	bash -c "! ip netns exec $node tc filter show dev q${pfx} ingress | grep -q bpf"

# ---- 8b. runwall-cni kept chained: the network plugin's rewrite of its conflist is repaired ----
# A third agent of its own (no veths) watching a CNI conf folder: the VPC CNI's conflist with
# runwall-cni's entry as `runwall-cni install` writes it, then rewritten as aws-node does on
# every start (a whole new file renamed over the old one, without the entry).
netd="$work/net.d"
mkdir -p "$netd"
aws_conflist() { # aws_conflist [extra plugin JSON]: 10-aws.conflist's content
	printf '{"cniVersion":"1.0.0","name":"aws-cni","plugins":[{"name":"aws-cni","type":"aws-cni","mtu":"9001"},{"type":"portmap","capabilities":{"portMappings":true}}%s]}\n' "${1:-}"
}
aws_conflist "" >"$netd/10-aws.conflist"
"$RW_CNI" install --bin-dir "$work" --conf-dir "$netd" --bpffs "$bpffs-third" --ifprefix "z${pfx}" >/dev/null
third_rw() { nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs-third" --socket "$sock-third" "$@"; }
nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs-third" --socket "$sock-third" agent \
	--ifprefix "z${pfx}" --cni-conf-dir "$netd" >>"$work/agent3.log" 2>&1 &
third=$!
cni_field() { { third_rw -j status 2>/dev/null || true; } | jq -r ".agent.cni.$1"; }
chained_in() { [ "$(cni_field chained)" = true ] && [ "$(cni_field file)" = "$1" ]; }
entries() { jq '[.plugins[] | select(.type == "runwall-cni")] | length' "$netd/10-aws.conflist"; }
check "the agent sees runwall-cni chained in 10-aws.conflist" eventually chained_in 10-aws.conflist
check "... and leaves the installer's entry as it is (one entry, not rewritten)" \
	eval '[ "$(entries)" = 1 ] && [ "$(cni_field repairs)" = 0 ]'
aws_conflist "" >"$netd/.10-aws.conflist.new" && mv "$netd/.10-aws.conflist.new" "$netd/10-aws.conflist"
back() { [ "$(entries)" = 1 ] && [ "$(cni_field repairs)" = 1 ]; }
# Within a second (the agent reads the folder's inotify event at once; a second is the bound).
check "aws-node's rewrite: the entry is back within a second, once" rw_wait 1 back
check "... and the entry is the installer's, chained after the network plugin" \
	eval "[ \"\$(jq -c '.plugins[-1]' '$netd/10-aws.conflist')\" = '{\"type\":\"runwall-cni\",\"bpffs\":\"$bpffs-third\",\"ifPrefix\":\"z${pfx}\"}' ]"
check "status gives the window the entry was missing" \
	eval '[ "$(cni_field last_repair_window_ms)" -ge 0 ] && [ "$(cni_field last_repair_window_ms)" -lt $((1000 * scale)) ]'
# (status exits non-zero on a node with no snapshot: its text is what counts here)
check "status shows it to people" \
	grep -q "^cni: .*chained in $netd/10-aws.conflist; 1 repairs" <<<"$(third_rw status 2>&1 || true)"
# A single-plugin .conf that sorts first is what the runtime loads: runwall-cni is not chained.
echo '{"cniVersion":"1.0.0","name":"other","type":"bridge"}' >"$netd/05-other.conf"
unchained() { [ "$(cni_field chained)" = false ] && cni_field why | grep -q '05-other.conf is loaded first'; }
check "a .conf that sorts first: status says not chained, and why" eventually unchained
check "... to people too" grep -q "^cni: .*NOT CHAINED: .*05-other.conf" <<<"$(third_rw status 2>&1 || true)"
rm "$netd/05-other.conf"
check "once it is gone: chained again" eventually chained_in 10-aws.conflist
kill "$third"; wait "$third" 2>/dev/null || true
third=
nsenter --net=/run/netns/"$node" "$RW_RUNWALL" --bpffs "$bpffs-third" --socket "$sock-third" detach >/dev/null 2>&1 || true

# ---- 9. detach removes everything runwall attached and pinned, and nothing else ----
ip netns exec "$node" tc qdisc add dev "${pfx}a" clsact 2>/dev/null || true
ip netns exec "$node" tc filter add dev "${pfx}a" ingress prio 5 u32 match u32 0 0
rw detach >/dev/null
agent_pid=
check "no pins left" test ! -e "$bpffs"
check "no runwall program left on the veths: 8080, never allowed, now answers" \
	connect "${pods[0]}" 172.20.0.10 8080
check "the foreign tc filter is still there" \
	bash -c "ip netns exec $node tc filter show dev ${pfx}a ingress | grep -q u32"

[ "$FAILED" -eq 0 ] || { diag "agent log:"; diag <"$work/agent.log"; }
rw_suite_end
