#!/usr/bin/env bash
# Faults with nothing lost: the agent refuses to start, and says why, on a bpffs that is
# missing or read-only, on pins of another layout and on a socket path another agent holds,
# and the policy in force stays enforced each time; a snapshot larger than the maps is refused
# whole with the old one kept; the agent killed at each step of an apply (RUNWALL_APPLY_FAULT,
# user/lib/apply.c, in the test build build/tests/runwall-faults only) leaves the old or the new
# snapshot in force in every table, never a mix, and a restarted agent converges; the agent
# stopped (SIGSTOP) while a sandbox floods loses no count and the other sandbox's events arrive
# once it resumes.
#
#   tests/netns/test_faults.sh BUILD
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin faults rwf "${1:-build}"
# The build whose library has the fault hook (RUNWALL_APPLY_FAULT); build/runwall has none.
RUNWALL=$BUILD/tests/runwall-faults

id=rwf$ID
node=${id}-node
pfx=f${ID}x
bpffs=$RW_BPFFS sock=$RW_SOCK work=$RW_WORK
agent_pid=

cleanup() {
	set +e
	[ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	mountpoint -q "$work/robpf" && umount "$work/robpf"
	"$RUNWALL" --bpffs "$bpffs" --socket "$sock" detach >/dev/null 2>&1
	# A refused start must not pin anything; if one did (a failed check above), take it back.
	[ -d "$bpffs-other" ] && "$RUNWALL" --bpffs "$bpffs-other" --socket "$work/none.sock" detach >/dev/null 2>&1
	[ -n "${srv_pid:-}" ] && kill "$srv_pid" 2>/dev/null
	for c in 1 2 3 4 5; do ip netns del "${id}-c$c" 2>/dev/null; done
	[ -n "${sub_pid:-}" ] && kill "$sub_pid" 2>/dev/null
	ip netns del "$node" 2>/dev/null
	ip netns del "${id}-pa" 2>/dev/null
	ip netns del "${id}-pb" 2>/dev/null
	rm -rf "$work" "$sock"
}
trap cleanup EXIT
[ -x "$RUNWALL" ] || { echo "Bail out! $RUNWALL is missing: run make" >&3; exit 1; }
# Without the hook the agent would never abort and the fault steps would wait for it.
grep -q RUNWALL_APPLY_FAULT "$RUNWALL" ||
	{ echo "Bail out! $RUNWALL has no fault hook (built without -DRW_TEST_FAULTS)" >&3; exit 1; }

scale=$RW_WAIT_SCALE

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
check "the refused agent left nothing behind: no pins at $bpffs-other" [ ! -e "$bpffs-other" ]
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
kill "$agent_pid"
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
stop_agent() {
	kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null || true
	agent_pid=
}
# await_death: arc= the exit status of the agent, which must die by itself within 20 s
# (scaled); 0 when it did not (it is then stopped). Not in $(...): only this shell can reap it.
await_death() {
	arc=0
	if timeout $((20 * scale)) tail --pid="$agent_pid" -f /dev/null; then
		wait "$agent_pid" 2>/dev/null || arc=$?
		agent_pid=
	else
		stop_agent
	fi
}
rev=10
# RW_FAULT_STEPS="half" (for example) runs fewer steps while debugging; "" none. Under emulation
# (make vmtest, a kernel without tcx) only after-flip: where an apply dies is user space's
# order of writes, the same on every kernel, and each step costs two agent starts there.
if [ "${RUNWALL_VMTEST:-0}" = 1 ]; then steps=after-flip; else steps="before-write half after-flip"; fi
for step in ${RW_FAULT_STEPS-$steps}; do
	write_old $rev
	RUNWALL_APPLY_FAULT="$step:$((rev + 1))" start_agent --policy "$work/policy.json" --resync 1
	for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True $rev" ] && break; sleep 0.1; done
	v=$(vector)
	check "$step: revision $rev enforced on the veth's pod: $v" [ "$v" = "$OLD_V" ]
	write_new $((rev + 1))
	await_death
	check "$step: the agent died applying revision $((rev + 1)) (exit $arc)" [ "$arc" -ne 0 ]
	st=$(in_force) v=$(vector)
	if [ "$step" = after-flip ]; then want="True $((rev + 1))"; wv=$NEW_V; else want="True $rev"; wv=$OLD_V; fi
	check "$step: with the agent dead, the kernel enforces '$st' (expected '$want'), every table of one revision: $v" \
		eval '[ "$st" = "$want" ] && [ "$v" = "$wv" ]'
	start_agent --policy "$work/policy.json" --resync 1
	for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True $((rev + 1))" ] && break; sleep 0.1; done
	v=$(vector)
	check "$step: the restarted agent converges on revision $((rev + 1)): $v" \
		eval '[ "$(in_force)" = "True $((rev + 1))" ] && [ "$v" = "$NEW_V" ]'
	stop_agent
	rev=$((rev + 2))
done

# ---- the agent killed right after the flip of a snapshot with a lease: that lease is in force
# with it (it expires, and the kernel then refuses lease-expired), and a restarted agent keeps it
# for its renewals; a lease write that fails fails the apply, nothing moves ----
write_leased() { # write_leased REVISION LEASE_SECONDS: the old tables, with a lease
	cat >"$work/policy.json.tmp" <<J
{"revision": $1, "lease_seconds": $2,
 "services": [{"name": "proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "inbound": [{"name": "app-tier", "cidr": "172.20.0.12/32", "tcp": [4096]}],
 "runs": [{"id": "run-a", "pods": ["10.1.2.3"]}]}
J
	mv "$work/policy.json.tmp" "$work/policy.json"
}
# The lease as the kernel holds it: "none", or "SECONDS in-force|expired".
lease_of() { { rw -j status 2>/dev/null || true; } | "${RW_PY:-python3}" -c '
import json, sys
l = json.load(sys.stdin).get("lease")
print("none" if not l else "%d %s" % (l["seconds"], "expired" if l["expired"] else "in-force"))'; }
write_old $rev
RUNWALL_APPLY_FAULT="after-flip:$((rev + 1))" start_agent --policy "$work/policy.json" --resync 1
for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True $rev" ] && break; sleep 0.1; done
check "lease: revision $rev (no lease) enforced: $(lease_of)" \
	eval '[ "$(in_force)" = "True $rev" ] && [ "$(lease_of)" = none ]'
write_leased $((rev + 1)) 1
await_death
check "lease: the agent died right after flipping to revision $((rev + 1)) (exit $arc)" \
	eval '[ "$arc" -ne 0 ] && [ "$(in_force)" = "True $((rev + 1))" ]'
for _ in $(seq $((100 * scale))); do [ "$(lease_of)" = "1 expired" ] && break; sleep 0.1; done
l=$(lease_of) v=$(probe 1.1.1.1 443 || true) # explain exits 1 for a refusal
check "lease: with the agent dead, the kernel holds revision $((rev + 1))'s lease ('$l', expected '1 expired') and refuses by it: $v" \
	eval '[ "$l" = "1 expired" ] && [ "$v" = lease-expired ]'
check "lease: the services still allow: $(probe 172.20.0.10 443)" [ "$(probe 172.20.0.10 443)" = allow ]
# A restarted agent whose next apply cannot write its lease: the apply fails, nothing moves.
RUNWALL_APPLY_FAULT="lease-write:$((rev + 2))" start_agent --policy "$work/policy.json" --resync 1
write_leased $((rev + 2)) 30
for _ in $(seq $((100 * scale))); do grep -q "injected fault" "$work/agent.log" && break; sleep 0.1; done
l=$(lease_of) st=$(in_force)
check "lease: a lease write that fails is an error of the apply: $(grep -m1 "injected fault" "$work/agent.log" | cut -c1-200)" \
	grep -q "injected fault" "$work/agent.log"
check "lease: and nothing moved: '$st', lease '$l' (expected 'True $((rev + 1))', '1 expired')" \
	eval '[ "$st" = "True $((rev + 1))" ] && [ "$l" = "1 expired" ]'
stop_agent
rev=$((rev + 3))

# ---- the consumer stopped (SIGSTOP) while one sandbox floods: verdicts and counters exact,
# every event counted as sent, lost or suppressed, and the other sandbox's events delivered
# once the agent resumes ----
pod_add() { # pod_add NAME IFNAME IP
	local ns=${id}-$1
	ip netns add "$ns"
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	ip -n "$node" link add "$2" type veth peer name eth0 netns "$ns"
	ip -n "$ns" link set lo up
	rw_pod_wire "$node" "$ns" "$2" "$3"
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
# Under emulation this part is left out: it is the agent's consumer (user space) and the ring
# buffer's accounting, which test_hostile already shows on that kernel.
if [ "${RUNWALL_VMTEST:-0}" != 1 ]; then
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
	eval '[ "$flood" -gt 0 ] && [ "$a_drops" -eq "$flood" ]'
check "every drop's event counted as sent, lost or suppressed ($a_ev for $a_all drops, $flood of them the flood's; $a_sup suppressed)" \
	eval '[ "$a_ev" -eq "$a_all" ] && [ "$a_sup" -gt 0 ]'
check "the quiet sandbox's $quiet events delivered after the agent resumed ($b_events, subscriber exit $rc)" \
	eval '[ "$rc" -eq 0 ] && [ "$b_events" -eq "$quiet" ]'
else
	ip -n "$node" link del "${pfx}0"
fi

# ---- more sandboxes than the node's tables hold: the extra ones deny-all, with the reason in
# the log and in status, the others unaffected; bound by the resync that finds room ----
# What limits sandboxes on a node: the endpoint table (RW_MAX_ENDPOINTS veths, or
# --max-endpoints on fresh pins) and the conntrack budget (--ct-node flows over tables of
# --ct-per-sandbox each: 4194304 / 8192 = 512 tables with the defaults); a snapshot with more
# runs than the run counters hold (RW_MAX_RUNS - 1) is refused whole.
if [ -n "${sub_pid:-}" ]; then kill "$sub_pid" 2>/dev/null || true; wait "$sub_pid" 2>/dev/null || true; fi
sub_pid=
if [ -n "$agent_pid" ]; then
	kill "$agent_pid"
	wait "$agent_pid" 2>/dev/null || true
	agent_pid=
fi
rw detach >/dev/null
ip netns del "${id}-pa" 2>/dev/null || true
ip netns del "${id}-pb" 2>/dev/null || true
# The proxy is an address of the node itself (on its loopback): a pod's packets to it go
# through the pod's veth like any other.
ip -n "$node" link set lo up
ip -n "$node" addr add 172.20.0.10/32 dev lo
ip netns exec "$node" "${RW_PY:-python3}" -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("172.20.0.10", 443)); s.listen(64)
while True:
    c, _ = s.accept(); c.close()' &
srv_pid=$!
"${RW_PY:-python3}" - "$work/cap.json" <<'P'
import json, sys
runs = [{"id": "run-c%d" % i, "pods": ["10.1.3.%d" % i]} for i in range(1, 6)]
json.dump({"revision": 40, "services": [{"name": "proxy", "ip": "172.20.0.10", "tcp": [443]}],
           "runs": runs}, open(sys.argv[1], "w"))
P
for c in 1 2 3 4 5; do pod_add "c$c" "${pfx}c$c" "10.1.3.$c"; done
connects() { # connects POD: "ok" when a TCP connection from the pod to the proxy is accepted
	ip netns exec "${id}-$1" "${RW_PY:-python3}" -c '
import socket, sys
s = socket.socket(); s.settimeout(float(sys.argv[1]))
try:
    s.connect(("172.20.0.10", 443)); print("ok")
except OSError as e:
    print("refused" if isinstance(e, ConnectionRefusedError) else "timeout")' "$scale"
}
# "IFNAME POD BIND_ERROR" of each veth routed to a pod it is not bound to; "" when none.
waiting() { rw -j status | "${RW_PY:-python3}" -c '
import json, sys
for s in json.load(sys.stdin)["sandboxes"]:
    if s.get("bind_error"):
        print(s["ifname"], s["waiting_pod"], s["bind_error"])'; }
bound_count() { rw -j status | "${RW_PY:-python3}" -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)["sandboxes"] if s.get("pod")))'; }
node_unknown() { rw -j counters | "${RW_PY:-python3}" -c '
import json, sys
print(json.load(sys.stdin)["node"]["egress"]["unknown-source"]["packets"])'; }
pod_of() { echo "c${1#"${pfx}c"}"; }
# A sandbox over a limit: its traffic to an allowed service refused, each packet counted and
# reported unknown-source (the veth is bound to nothing); the bound ones still connect.
over_limit_checks() { # over_limit_checks WHAT IFNAME
	local what=$1 p r before after ev rc=0
	p=$(pod_of "$2")
	before=$(node_unknown)
	rw -j drops --reason unknown-source --count 1 --timeout $((10 * scale)) >"$work/cap-drops.log" 2>&1 &
	local dpid=$!
	sleep 0.3
	r=$(connects "$p")
	check "$what: $2's connection to the allowed proxy is refused ($r)" [ "$r" = timeout ]
	wait "$dpid" || rc=$?
	after=$(node_unknown)
	ev=$(grep -c "\"ifindex\":$(ip -n "$node" -o link show "$2" | cut -d: -f1)," "$work/cap-drops.log" || true)
	check "$what: its packets dropped unknown-source, counted on the node (+$((after - before))) and reported for its veth ($ev event, drops exit $rc)" \
		eval '[ $((after - before)) -ge 1 ] && [ "$ev" -ge 1 ] && [ "$rc" -eq 0 ]'
	for c in 1 2 3 4 5; do
		[ "c$c" = "$p" ] && continue
		grep -q "^${pfx}c$c " <<<"$(waiting)" && continue
		ip -n "$node" link show "${pfx}c$c" >/dev/null 2>&1 || continue
		check "$what: bound sandbox c$c still reaches the proxy" [ "$(connects "c$c")" = ok ]
	done
}
start_agent --policy "$work/cap.json" --max-endpoints 4 --ct-per-sandbox 64 --ct-node 192 --resync 1
for _ in $(seq $((100 * scale))); do [ "$(in_force)" = "True 40" ] && [ "$(waiting | wc -l)" = 2 ] && break; sleep 0.1; done
w=$(waiting)
check "conntrack budget (--ct-node 192 over tables of 64): 3 sandboxes bound ($(bound_count)), 2 waiting: $(echo $w)" \
	eval '[ "$(bound_count)" = 3 ] && [ "$(grep -c "conntrack budget for the node exhausted (--ct-node 192: 3 tables of --ct-per-sandbox 64 flows)" <<<"$w")" = 2 ]'
w1=$(head -n1 <<<"$w" | cut -d' ' -f1)
check "the agent's log names the veth and why" \
	grep -q "$w1 (ifindex [0-9]*): pod 10.1.3.[0-9] not bound, deny-all: conntrack budget for the node exhausted" "$work/agent.log"
check "runwall status says it" eval "rw status | grep -q '$w1: pod 10.1.3.[0-9] not bound, deny-all: conntrack budget for the node exhausted'"
over_limit_checks "conntrack budget" "$w1"

# The same pins (4 endpoints) with room for 16 tables: the endpoint table is the limit now.
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=
start_agent --policy "$work/cap.json" --ct-per-sandbox 64 --ct-node 1024 --resync 1
for _ in $(seq $((100 * scale))); do [ "$(waiting | wc -l)" = 1 ] && [ "$(bound_count)" = 4 ] && break; sleep 0.1; done
w=$(waiting)
check "endpoint table of 4: 4 sandboxes bound ($(bound_count)), 1 waiting: $w" \
	eval '[ "$(bound_count)" = 4 ] && grep -q " endpoint table full (4)$" <<<"$w" && [ "$(wc -l <<<"$w")" = 1 ]'
w1=$(cut -d' ' -f1 <<<"$w")
check "the agent's log names the veth and why" \
	grep -q "$w1 (ifindex [0-9]*): pod 10.1.3.[0-9] not bound, deny-all: endpoint table full (4)" "$work/agent.log"
over_limit_checks "endpoint table full" "$w1"

# Room freed: a bound sandbox goes; the waiting one is bound by the next resync and connects.
gone=$(rw -j status | "${RW_PY:-python3}" -c '
import json, sys
print([s["ifname"] for s in json.load(sys.stdin)["sandboxes"] if s.get("pod")][0])')
ip netns del "${id}-$(pod_of "$gone")"
for _ in $(seq $((100 * scale))); do [ -z "$(waiting)" ] && [ "$(bound_count)" = 4 ] && break; sleep 0.1; done
check "$gone deleted: $w1 bound by the next resync ($(bound_count) bound, waiting: '$(waiting)')" \
	eval '[ -z "$(waiting)" ] && [ "$(bound_count)" = 4 ]'
check "$w1 now reaches the proxy" [ "$(connects "$(pod_of "$w1")")" = ok ]
check "the agent's log says it waited" grep -q "$w1: bound to pod 10.1.3.[0-9] (it waited for room: endpoint table full (4))" "$work/agent.log"

# More runs than the run counters hold: the snapshot refused whole, the one in force kept.
max_runs=$(awk '$2 == "RW_MAX_RUNS" && $1 == "#define" {print $3; exit}' include/runwall.h)
"${RW_PY:-python3}" - "$work/runs.json" "$max_runs" <<'P'
import json, sys
n = int(sys.argv[2])
runs = [{"id": "r%d" % i, "pods": ["10.%d.%d.%d" % (50 + i // 65536, (i // 256) % 256, i % 256)]} for i in range(n)]
json.dump({"revision": 41, "runs": runs}, open(sys.argv[1], "w"))
P
rc=0
rw apply "$work/runs.json" >"$work/runs.log" 2>&1 || rc=$?
check "$max_runs runs (the counters hold $((max_runs - 1))) refused whole: $(head -c 160 "$work/runs.log")" \
	eval '[ "$rc" -ne 0 ] && grep -q "more than $((max_runs - 1)) runs" "$work/runs.log"'
check "revision 40 still in force, and the bound sandboxes still connect" \
	eval '[ "$(in_force)" = "True 40" ] && [ "$(connects "$(pod_of "$w1")")" = ok ]'
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=

rw_suite_end
