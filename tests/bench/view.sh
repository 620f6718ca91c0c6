#!/usr/bin/env bash
# The view's queries against the agent's loop: one sandbox floods refusals to 4 000 destinations
# (its event budget lifted) while a control-socket subscriber counts the events it gets and
# `runwall status` is timed; once idle, once under 200 clients calling /api/graph back to back
# (4 000 aggregates to JSON each). Trials interleaved, medians. Writes JSON rows to OUT.
#
#   tests/bench/view.sh BUILD OUT [TRIALS] [SECONDS]
set -Eeuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/../netns/lib.sh"
rw_bench_begin view-bench rwb "view.sh BUILD OUT [TRIALS] [SECONDS]" "$@"
trials=${3:-3}
secs=${4:-5}
LOAD=$HERE/view_load.py
PORT=9761
trap rw_suite_cleanup EXIT

rw_node_up
rw_sandbox_add a enib${ID}a 10.1.2.3
jq '.runs |= map(.egress = "allowlist")' "$RW_ROOT/manifests/policy-default.json" >"$RW_WORK/policy.json"
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix enib --event-rate 0 \
	--listen "127.0.0.1:$PORT"
rw_agent_wait
rw_cmd

trial() { # trial idle|graph: prints "EVENTS_PER_S STATUS_MS GRAPH_CALLS"
	local mode=$1 gpid="" calls=0 lat sub
	sub=$RW_WORK/sub.$mode
	"${RW_CMD[@]}" -j drops --timeout "$secs" >"$sub" 2>/dev/null &
	local spid=$!
	if [ "$mode" = graph ]; then
		# At the lowest priority: on this machine the clients share the agent's CPUs, and what
		# is measured is the agent, not them.
		nsenter --net="/run/netns/$RW_NODE" nice -n 19 "$RW_PY" "$LOAD" graph \
			"http://127.0.0.1:$PORT/api/graph" 200 "$secs" >"$RW_WORK/graph.out" &
		gpid=$!
	fi
	ip netns exec "${RW_PREFIX}a" "$RW_PY" "$LOAD" flood "$secs" >/dev/null &
	local fpid=$!
	lat=$("$RW_PY" "$LOAD" status-latency $((secs * 4)) "${RW_CMD[@]}" -j status)
	wait "$fpid" "$spid" || true
	[ -z "$gpid" ] || { wait "$gpid"; calls=$(cat "$RW_WORK/graph.out"); }
	echo "$(($(wc -l <"$sub") / secs)) $lat $calls"
}

declare -a idle_ev idle_ms graph_ev graph_ms graph_calls
for t in $(seq "$trials"); do
	read -r e m _ < <(trial idle)
	idle_ev+=("$e") idle_ms+=("$m")
	read -r e m c < <(trial graph)
	graph_ev+=("$e") graph_ms+=("$m") graph_calls+=("$c")
	echo "# trial $t: idle ${idle_ev[-1]} events/s, status ${idle_ms[-1]} ms; 200 /api/graph clients ($c calls): ${graph_ev[-1]} events/s, status $m ms"
done
"$RW_PY" - "$RW_OUT" "$secs" <<PY
import json, statistics, sys
med = statistics.median
ie, im = med([${idle_ev[*]/%/,}]), med([${idle_ms[*]/%/,}])
ge, gm = med([${graph_ev[*]/%/,}]), med([${graph_ms[*]/%/,}])
calls = med([${graph_calls[*]/%/,}]) / float(sys.argv[2])
def row(name, value, unit, cmp=None, target=None):
    r = {"name": name, "value": value, "unit": unit}
    if cmp:
        met = value >= target if cmp == ">=" else value <= target
        r.update(cmp=cmp, target=target, met=met, margin=(value - target) / target)
    return r
rows = [row("view: events to a subscriber, idle", ie, "/s"),
        row("view: events to a subscriber, 200 /api/graph clients", ge, "/s"),
        row("view: /api/graph calls answered under that load", calls, "/s"),
        row("view: subscriber rate under /api/graph load / idle", ge / ie if ie else 0, "x", ">=", 0.5),
        row("view: runwall status p50, idle", im, "ms"),
        row("view: runwall status p50 under /api/graph load / idle", gm / im if im else 0, "x", "<=", 2.0)]
json.dump(rows, open(sys.argv[1], "w"), indent=1)
PY
rw_suite_end
