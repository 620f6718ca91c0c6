#!/usr/bin/env bash
# Faults with nothing lost: the agent refuses to start, and says why, on a bpffs that is
# missing or read-only, on pins of another layout and on a socket path another agent holds,
# and the policy in force stays enforced each time; a snapshot larger than the maps is refused
# whole with the old one kept; the agent killed at each step of an apply (RUNWALL_APPLY_FAULT,
# user/lib/apply.c) leaves the old or the new snapshot in force in every table, never a mix,
# and a restarted agent converges.
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
	ip netns del "$node" 2>/dev/null
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
"${RW_PY:-python3}" - "$work/big.json" <<'P'
import json, sys
pods = ["10.%d.%d.%d" % (100 + i // 65536, (i // 256) % 256, i % 256) for i in range(9000)]
json.dump({"revision": 8, "runs": [{"id": "run-big", "pods": pods}]}, open(sys.argv[1], "w"))
P
rc=0
rw apply "$work/big.json" >"$work/big.log" 2>&1 || rc=$?
check "9000 pods (the pod map holds 8192) refused: $(head -c 200 "$work/big.log")" \
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
for step in before-write half after-flip; do
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

echo "1..$n"
[ "$failed" -eq 0 ] && echo "# PASS" || echo "# FAIL: $failed"
[ "$failed" -eq 0 ]
