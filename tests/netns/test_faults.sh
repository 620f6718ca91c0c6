#!/usr/bin/env bash
# Faults with nothing lost: the agent refuses to start, and says why, on a bpffs that is
# missing or read-only, on pins of another layout and on a socket path another agent holds,
# and the policy in force stays enforced each time; a snapshot larger than the maps is refused
# whole with the old one kept; the agent killed at each step of an apply (RUNWALL_APPLY_FAULT,
# user/lib/apply.c) leaves the old or the new snapshot in force in every table, never a mix,
# and a restarted agent converges; the agent stopped (SIGSTOP) while a sandbox floods loses no
# count and the other sandbox's events arrive once it resumes.
#
#   tests/netns/test_faults.sh BUILD
set -euo pipefail

build=${1:-build}
cd "$(dirname "$0")/../.."
RUNWALL=$(realpath "$build/runwall")
[ -x "$RUNWALL" ] || { echo "Bail out! $RUNWALL is missing: run make"; exit 1; }

id=rwf$$
node=${id}-node
pfx=f${$}x
bpffs=/sys/fs/bpf/rwtest-faults-$$
sock=/run/rwtest-faults-$$.sock
work=$(mktemp -d /tmp/rwtest-faults.XXXXXX)
agent_pid=
n=0
failed=0

cleanup() {
	set +e
	[ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	mountpoint -q "$work/robpf" && umount "$work/robpf"
	"$RUNWALL" --bpffs "$bpffs" --socket "$sock" detach >/dev/null 2>&1
	# A start refused for a taken socket has pinned fresh maps already (see README "Faults").
	[ -d "$bpffs-other" ] && "$RUNWALL" --bpffs "$bpffs-other" --socket "$work/none.sock" detach >/dev/null 2>&1
	[ -n "${sub_pid:-}" ] && kill "$sub_pid" 2>/dev/null
	ip netns del "$node" 2>/dev/null
	ip netns del "${id}-pa" 2>/dev/null
	ip netns del "${id}-pb" 2>/dev/null
	rm -rf "$work" "$sock"
}
trap cleanup EXIT

scale=${RW_WAIT_SCALE:-1}
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }

rw() { nsenter --net=/run/netns/"$node" "$RUNWALL" --bpffs "$bpffs" --socket "$sock" "$@"; }

start_agent() {
	nsenter --net=/run/netns/"$node" "$RUNWALL" --bpffs "$bpffs" --socket "$sock" agent \
		--ifprefix "$pfx" "$@" >>"$work/agent.log" 2>&1 &
	agent_pid=$!
	for _ in $(seq $((100 * scale))); do
		{ rw -j status 2>/dev/null || true; } | grep -q '"running":true' && return 0
		sleep 0.05
	done
	echo "# agent did not come up:"; sed 's/^/#   /' "$work/agent.log"
	return 1
}

# refused_start DESCRIPTION PATTERN [runwall global args...]: a second agent must exit non-zero
# within seconds, naming the problem (PATTERN, an extended regex, on its stderr).
refused_start() {
	local what=$1 pattern=$2 rc=0
	shift 2
	timeout $((10 * scale)) nsenter --net=/run/netns/"$node" "$RUNWALL" "$@" agent \
		--ifprefix "$pfx" >"$work/refused.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -Eq "$pattern" "$work/refused.log"; then
		ok "$what: refused (exit $rc): $(grep -Em1 "$pattern" "$work/refused.log")"
	else
		not_ok "$what: exit $rc, expected a refusal naming /$pattern/; said: $(tr '\n' ' ' <"$work/refused.log")"
	fi
}

# The policy in force: revision and readiness from the pins (agent or not).
in_force() { rw -j status 2>/dev/null | "${RW_PY:-python3}" -c \
	'import json,sys; o=json.load(sys.stdin); print(o.get("ready"), o.get("revision"))'; }

ip netns add "$node"
# No IPv6 on the node's veths: no router solicitations to blur the exact counts below.
ip netns exec "$node" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
cat >"$work/p1.json" <<'J'
{"revision": 7, "services": [{"name": "proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}]}
J
start_agent --policy "$work/p1.json"
check "the agent enforces revision 7" [ "$(in_force)" = "True 7" ]

# ---- bad places to start from: each refused, the running agent's policy untouched ----
mkdir -p "$work/notbpf"
refused_start "bpffs missing (a folder on tmpfs)" "bpf|bpffs" --bpffs "$work/notbpf/pins" \
	--socket "$work/s1.sock"
mkdir -p "$work/robpf"
mount -t bpf -o ro bpf "$work/robpf"
refused_start "bpffs read-only" "[Rr]ead-only|EROFS|permission|bpf" --bpffs "$work/robpf/pins" \
	--socket "$work/s2.sock"
umount "$work/robpf"
refused_start "the socket path held by a running agent" "socket|in use|address" \
	--bpffs "$bpffs-other" --socket "$sock"
check "the first agent still answers on its socket" eval "rw -j status >/dev/null"
check "and still enforces revision 7" [ "$(in_force)" = "True 7" ]

# ---- a snapshot larger than the maps: refused whole, the old one kept ----
# The pod map's size comes from the contract header, whatever this build has.
max_pods=$(awk '$2 == "RW_MAX_PODS" && $1 == "#define" {print $3; exit}' include/runwall.h)
big=$((max_pods + 808))
"${RW_PY:-python3}" - "$work/big.json" "$big" <<'P'
import json, sys
pods = ["10.%d.%d.%d" % (100 + i // 65536, (i // 256) % 256, i % 256) for i in range(int(sys.argv[2]))]
json.dump({"revision": 8, "runs": [{"id": "run-big", "pods": pods}]}, open(sys.argv[1], "w"))
P
rc=0
rw apply "$work/big.json" >"$work/big.log" 2>&1 || rc=$?
check "$big pods (the pod map holds $max_pods) refused: $(head -c 200 "$work/big.log")" \
	[ "$rc" -ne 0 ]
check "revision 7 still in force after the refusal" [ "$(in_force)" = "True 7" ]

# ---- pins of an older layout: refused, enforcement stays ----
rw shutdown >/dev/null 2>&1 || kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=
check "after the agent exits, the kernel still enforces revision 7" [ "$(in_force)" = "True 7" ]
cfg=$(bpftool -j map lookup pinned "$bpffs/rw_config" key 0 0 0 0)
old_val=$(echo "$cfg" | "${RW_PY:-python3}" -c 'import json,sys; print(" ".join(json.load(sys.stdin)["value"]))')
new_val=$(echo "$old_val" | awk '{ $9 = "0x00"; $10 = "0x00"; $11 = "0x00"; $12 = "0x00"; $9 = "0x7f"; print }')
bpftool map update pinned "$bpffs/rw_config" key 0 0 0 0 value $new_val
refused_start "pins of another layout (version 127)" "layout" --bpffs "$bpffs" --socket "$sock"
bpftool map update pinned "$bpffs/rw_config" key 0 0 0 0 value $old_val
check "the refused agent left the pins and revision 7 in force" [ "$(in_force)" = "True 7" ]

# ---- the agent killed at each step of an apply: old or new policy, never a mix; a restarted
# agent converges on the file ----
# Revision 10 and 11 differ in every policy table: a service (allow map), the run's egress
# mode (pods map), a deny CIDR (deny map) and the inbound peer (inbound map). Each probe's
# verdict tells which revision that table is in.
write_old() { cat >"$work/policy.json" <<J
{"revision": $1, "services": [{"name": "proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "inbound": [{"name": "app-tier", "cidr": "172.20.0.12/32", "tcp": [4096]}],
 "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}]}
J
}
write_new() { cat >"$work/policy.json.tmp" <<J
{"revision": $1, "egress": "open", "deny": ["93.184.0.0/16"],
 "services": [{"name": "broker", "ip": "172.20.0.11", "tcp": [3443]}],
 "inbound": [{"name": "worker", "cidr": "172.20.0.20/32", "tcp": [4096]}],
 "runs": [{"id": "run-a", "pods": ["10.1.2.3"], "egress": "open"}]}
J
mv "$work/policy.json.tmp" "$work/policy.json"
}
probe() { # probe ARGS...: "allow" or the drop reason, as the kernel's programs judge it now
	rw -j explain --pod 10.1.2.3 "$@" 2>/dev/null | "${RW_PY:-python3}" -c \
		'import json,sys; o=json.load(sys.stdin); print(o["reason"] if o["verdict"] == "drop" else "allow")'
}
vector() {
	echo "$(probe 172.20.0.10 443) $(probe 172.20.0.11 3443) $(probe 1.1.1.1 443)" \
	     "$(probe 93.184.216.34 443) $(probe 172.20.0.12 4096 --ingress)" \
	     "$(probe 172.20.0.20 4096 --ingress)"
}
OLD_V="allow private-destination not-allowlisted not-allowlisted allow inbound-denied"
NEW_V="private-destination allow allow private-destination inbound-denied allow"
ip -n "$node" link add "${pfx}0" type veth peer name "${pfx}0p"
ip -n "$node" link set "${pfx}0" up
ip -n "$node" link set "${pfx}0p" up
ip -n "$node" route add 10.1.2.3/32 dev "${pfx}0" scope link
ulimit -c 0
rev=10
# RW_FAULT_STEPS="half" (for example) runs fewer steps while debugging; "" none.
for step in ${RW_FAULT_STEPS-before-write half after-flip}; do
	write_old $rev
	RUNWALL_APPLY_FAULT="$step:$((rev + 1))" start_agent --policy "$work/policy.json" --resync 1
	for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True $rev" ] && break; sleep 0.1; done
	v=$(vector)
	check "$step: revision $rev enforced on the veth's pod: $v" [ "$v" = "$OLD_V" ]
	write_new $((rev + 1))
	rc=0
	timeout $((20 * scale)) tail --pid="$agent_pid" -f /dev/null || rc=$?
	wait "$agent_pid" 2>/dev/null && arc=0 || arc=$?
	agent_pid=
	check "$step: the agent died applying revision $((rev + 1)) (exit $arc)" [ "$rc" -eq 0 ] && [ "$arc" -ne 0 ]
	st=$(in_force) v=$(vector)
	if [ "$step" = after-flip ]; then want="True $((rev + 1))"; wv=$NEW_V; else want="True $rev"; wv=$OLD_V; fi
	check "$step: with the agent dead, the kernel enforces '$st' (expected '$want'), every table of one revision: $v" \
		[ "$st" = "$want" ] && [ "$v" = "$wv" ]
	start_agent --policy "$work/policy.json" --resync 1
	for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True $((rev + 1))" ] && break; sleep 0.1; done
	v=$(vector)
	check "$step: the restarted agent converges on revision $((rev + 1)): $v" \
		[ "$(in_force)" = "True $((rev + 1))" ] && [ "$v" = "$NEW_V" ]
	rw shutdown >/dev/null 2>&1 || true
	kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null || true
	agent_pid=
	rev=$((rev + 2))
done

# ---- the consumer stopped (SIGSTOP) while one sandbox floods: verdicts and counters exact,
# every event counted as sent, lost or suppressed, and the other sandbox's events delivered
# once the agent resumes ----
pod_add() { # pod_add NAME IFNAME IP
	local ns=${id}-$1 mac
	ip netns add "$ns"
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$node" link add "$2" type veth peer name eth0 netns "$ns"
	mac=$(ip -n "$node" -o link show "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "$3/32" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" neigh replace 169.254.1.1 dev eth0 lladdr "$mac" nud permanent
	ip -n "$ns" route add 169.254.1.1 dev eth0 scope link
	ip -n "$ns" route add default via 169.254.1.1 dev eth0 onlink
	ip -n "$node" link set "$2" up
	ip -n "$node" route add "$3/32" dev "$2" scope link
}
send_udp() { # send_udp NAME COUNT DST PORT: prints how many datagrams left the pod
	ip netns exec "${id}-$1" "${RW_PY:-python3}" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n = 0
for _ in range(int(sys.argv[1])):
    try:
        s.sendto(b"x", (sys.argv[2], int(sys.argv[3]))); n += 1
    except OSError:
        pass
print(n)' "$2" "$3" "$4"
}
run_counters() { # run_counters RUN: "not-allowlisted-drops all-drops event-fates suppressed", one read
	rw -j counters --run "$1" | "${RW_PY:-python3}" -c '
import json, sys
r = json.load(sys.stdin)["runs"][0]
e = r["events"]
drops = sum(v["packets"] for d in ("egress", "ingress") for k, v in r[d].items() if k != "allowed")
print(r["egress"]["not-allowlisted"]["packets"], drops, e["sent"] + e["lost"] + e["suppressed"],
      e["suppressed"])'
}
cat >"$work/flood.json" <<'J'
{"revision": 30, "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}, {"id": "run-b", "pods": ["10.1.2.4"]}]}
J
ip -n "$node" link del "${pfx}0"
pod_add pa "${pfx}a" 10.1.2.3
pod_add pb "${pfx}b" 10.1.2.4
start_agent --policy "$work/flood.json"
for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True 30" ] && break; sleep 0.1; done
rw -j drops --run run-b --count 5 --timeout $((60 * scale)) >"$work/sub-b.log" 2>&1 &
sub_pid=$!
for _ in $(seq $((100 * scale))); do rw -j status | grep -q '"subscribers":1' && break; sleep 0.1; done
read -r a_drops0 a_all0 a_ev0 a_sup0 <<<"$(run_counters run-a)"
kill -STOP "$agent_pid"
flood=$(send_udp pa 30000 8.8.8.8 9)
quiet=$(send_udp pb 5 8.8.8.8 10)
sleep 0.5
kill -CONT "$agent_pid"
rc=0
wait "$sub_pid" || rc=$?
read -r a_drops a_all a_ev a_sup <<<"$(run_counters run-a)"
a_drops=$((a_drops - a_drops0)) a_all=$((a_all - a_all0)) a_ev=$((a_ev - a_ev0)) a_sup=$((a_sup - a_sup0))
b_events=$(grep -c '"run":"run-b"' "$work/sub-b.log" || true)
check "agent stopped: all $flood datagrams of the flood dropped not-allowlisted and counted ($a_drops)" \
	[ "$flood" -gt 0 ] && [ "$a_drops" -eq "$flood" ]
check "every drop's event counted as sent, lost or suppressed ($a_ev for $a_all drops, $flood of them the flood's; $a_sup suppressed)" \
	[ "$a_ev" -eq "$a_all" ] && [ "$a_sup" -gt 0 ]
check "the quiet sandbox's $quiet events delivered after the agent resumed ($b_events, subscriber exit $rc)" \
	[ "$rc" -eq 0 ] && [ "$b_events" -eq "$quiet" ]

echo "1..$n"
[ "$failed" -eq 0 ] && echo "# PASS" || echo "# FAIL: $failed"
[ "$failed" -eq 0 ]
