#!/usr/bin/env bash
# Veth churn on a node with the agent running: pods created and deleted as fast as the real path
# allows, up to 100 a second (RW_CHURN_RATE), for a minute (RW_CHURN_SECONDS; 15 s in make vmtest),
# each made the way
# the VPC CNI makes it (host veth, pod address, /32 route) and then given to runwall-cni ADD, each
# deleted with runwall-cni DEL and the veth's deletion; veth names, ifindexes and pod addresses
# are reused by the next pods. tests/netns/churn.py does the churn and the checks while it runs:
# every live pod's veth has runwall's programs on both hooks (asked of the kernel) and is bound to
# the pod's own address, so to its run; a sample of fresh pods reach their run's database or not,
# as their run says. Afterwards the agent still answers, and nothing of the gone veths is left:
# no binding, no link pin, no sandbox in status.
#
#   tests/netns/test_churn.sh BUILD
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin churn rwch "${1:-build}"
rw_need "$RW_CNI"

pfx=h${ID}x
slots=${RW_CHURN_SLOTS:-8}
# A minute in make check; 15 s under emulation (make vmtest), where each veth takes far longer.
if [ "${RUNWALL_VMTEST:-0}" = 1 ]; then seconds=${RW_CHURN_SECONDS:-15}; else seconds=${RW_CHURN_SECONDS:-60}; fi
rate=${RW_CHURN_RATE:-100}
scale=$RW_WAIT_SCALE
agent_pid=

cleanup() {
	set +e
	[ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	"$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" detach >/dev/null 2>&1
	for s in $(seq 0 $((slots - 1))); do ip netns del "$pfx-pod$s" 2>/dev/null; done
	ip netns del "$RW_NODE" 2>/dev/null
	rm -rf "$RW_WORK" "$RW_SOCK"
}
trap cleanup EXIT

py() { "${RW_PY:-python3}" "$@"; }

rw_ns_add "$RW_NODE"
ip -n "$RW_NODE" addr add 172.20.0.10/32 dev lo
ip -n "$RW_NODE" addr add 52.94.9.5/32 dev lo
for s in $(seq 0 $((slots - 1))); do rw_ns_add "$pfx-pod$s"; done
# Every pool address its own run; even ones may reach their database 52.94.9.5:5432.
py - "$RW_WORK/policy.json" <<'P'
import json, sys
runs = []
for i in range(12):
    r = {"id": "run-%d" % (10 + i), "pods": ["10.1.4.%d" % (10 + i)]}
    if (10 + i) % 2 == 0:
        r["allow"] = [{"ip": "52.94.9.5", "tcp": [5432]}]
    runs.append(r)
json.dump({"revision": 1, "services": [{"name": "proxy", "ip": "172.20.0.10", "tcp": [443]}],
           "runs": runs}, open(sys.argv[1], "w"))
P
rw_agent_start --ifprefix "$pfx" --policy "$RW_WORK/policy.json"
agent_pid=$RW_AGENT_PID
for _ in $(seq $((200 * scale))); do
	{ rw -j status 2>/dev/null || true; } | grep -q '"ready":true' && break
	sleep 0.05
done
check "the agent enforces the churn snapshot" eval "rw -j status | grep -q '\"ready\":true'"

rc=0
nsenter --net=/run/netns/"$RW_NODE" "${RW_PY:-python3}" tests/netns/churn.py --pfx "$pfx" \
	--bpffs "$RW_BPFFS" --cni "$RW_CNI" --slots "$slots" --seconds "$seconds" --rate "$rate" \
	--probe-timeout "$(awk -v s="$scale" 'BEGIN {print 0.5 * s}')" >"$RW_WORK/churn.json" \
	2>"$RW_WORK/churn.err" || rc=$?
out=$(tail -n1 "$RW_WORK/churn.json")
echo "# churn: $out"
get() { py -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], 0))' "$out" "$1"; }
created=$(get created) checks=$(get checks) probes_ok=$(get probes_ok) probes_to=$(get probes_refused)
check "churn ran ($rc): $created pods created and deleted in $(get seconds) s, $(get rate)/s (target $rate/s; ADD p50 $(get add_ms_p50) ms, p99 $(get add_ms_p99) ms)" \
	[ "$created" -ge $((2 * slots)) ]
check "no failure: every ADD and DEL answered, every live veth observed with runwall's programs and bound to its own pod ($checks samples, $(get inconclusive) inconclusive), every probe as its run says ($(get failures) failures: $(get fails))" \
	eval '[ "$rc" -eq 0 ] && [ "$(get failures)" = 0 ] && [ "$checks" -ge "$created" ]'
check "fresh pods reached their run's database ($probes_ok) or were refused by theirs ($probes_to), as their run says" \
	eval '[ "$probes_ok" -ge 1 ] && [ "$probes_to" -ge 1 ]'
[ -s "$RW_WORK/churn.err" ] && sed 's/^/# churn.py: /' "$RW_WORK/churn.err" | head -n 20

# Afterwards: the agent answers, and nothing of the gone veths is left.
check "the agent is still running" kill -0 "$agent_pid"
sbx() { rw -j status | py -c 'import json,sys; print(len(json.load(sys.stdin)["sandboxes"]))'; }
for _ in $(seq $((100 * scale))); do [ "$(sbx)" = 0 ] && break; sleep 0.1; done
check "status lists no sandbox ($(sbx))" [ "$(sbx)" = 0 ]
eps=$(bpftool -j map dump pinned "$RW_BPFFS/rw_endpoints" | py -c 'import json,sys; print(len(json.load(sys.stdin)))')
check "no endpoint binding left ($eps)" [ "$eps" = 0 ]
links=$(find "$RW_BPFFS/links" -mindepth 1 2>/dev/null | wc -l)
check "no link pin left ($links)" [ "$links" = 0 ]
if [ "$FAILED" -ne 0 ]; then
	echo "# agent log (last 20 lines):"
	tail -n 20 "$RW_WORK/agent.log" | sed 's/^/#   /'
fi

kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
agent_pid=
rw_suite_end
