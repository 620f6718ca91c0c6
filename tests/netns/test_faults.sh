#!/usr/bin/env bash
# Faults with nothing lost: the agent refuses to start, and says why, on a bpffs that is
# missing or read-only, on pins of another layout and on a socket path another agent holds,
# and the policy in force stays enforced each time; a snapshot larger than the maps is refused
# whole with the old one kept.
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

echo "1..$n"
[ "$failed" -eq 0 ] && echo "# PASS" || echo "# FAIL: $failed"
[ "$failed" -eq 0 ]
