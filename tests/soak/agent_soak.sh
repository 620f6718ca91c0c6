#!/usr/bin/env bash
# A long agent run: snapshots applied in a loop, veths created and deleted (names, routes and pod
# IPs reused), event subscribers coming and going, status asked all along. It samples the
# agent's RSS, then asks it to exit: built with ASan (make check-asan's build-asan/), the leak
# checker runs at that exit and any leak or sanitizer report fails the run. On the normal build
# (not under ASan, whose quarantine holds freed memory on purpose) the RSS must stay flat: at the
# end at most max(4 MiB, 10 %) above its first sample after a third of the run, once the
# allocator's arenas and the caches have settled.
#
#   tests/soak/agent_soak.sh BUILD SECONDS
set -euo pipefail

build=${1:-build}
secs=${2:-60}
cd "$(dirname "$0")/../.."
RUNWALL=$(realpath "$build/runwall")
[ -x "$RUNWALL" ] || { echo "Bail out! $RUNWALL is missing"; exit 1; }

id=rws$$
node=${id}-node
pfx=s${$}x
bpffs=/sys/fs/bpf/rwtest-soak-$$
sock=/run/rwtest-soak-$$.sock
work=$(mktemp -d /tmp/rwtest-soak.XXXXXX)
agent_pid=
bg=()

cleanup() {
	set +e
	for p in "${bg[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "$agent_pid" ] && kill -9 "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	"$RUNWALL" --bpffs "$bpffs" --socket "$sock" detach >/dev/null 2>&1
	ip netns del "$node" 2>/dev/null
	rm -rf "$work" "$sock"
}
trap cleanup EXIT

rw() { nsenter --net=/run/netns/"$node" "$RUNWALL" --bpffs "$bpffs" --socket "$sock" "$@"; }
snapshot() { # snapshot REVISION FILE
	local rev=$1 i pods=""
	for i in $(seq 0 31); do pods+="${pods:+, }\"10.1.$((rev % 2)).$i\""; done
	printf '{"revision": %d, "egress": "%s", "services": [{"name": "proxy", "ip": "172.20.0.10", "tcp": [443, %d]}], "runs": [{"id": "run-%d", "pods": [%s], "allow": [{"cidr": "198.51.%d.0/24", "tcp": [5432]}]}]}\n' \
		"$rev" "$([ $((rev % 2)) = 0 ] && echo open || echo allowlist)" $((1000 + rev % 50)) \
		$((rev % 3)) "$pods" $((rev % 200)) >"$2"
}
rss() { awk '/^VmRSS/ {print $2}' "/proc/$agent_pid/status"; }

ip netns add "$node"
ip -n "$node" link set lo up
snapshot 1 "$work/p.json"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:log_path=$work/asan}
nsenter --net=/run/netns/"$node" "$RUNWALL" --bpffs "$bpffs" --socket "$sock" agent \
	--ifprefix "$pfx" --resync 1 --policy "$work/p.json" >"$work/agent.log" 2>&1 &
agent_pid=$!
for _ in $(seq 200); do rw -j status 2>/dev/null | grep -q '"ready":true' && break; sleep 0.1; done
rw -j status | grep -q '"ready":true' || { echo "Bail out! the agent did not come up"; cat "$work/agent.log"; exit 1; }

rev=2 veths=0 subs=0 samples=() settled_rss=
start=$SECONDS next_sample=$SECONDS
first_rss=$(rss)
while [ $((SECONDS - start)) -lt "$secs" ]; do
	# Snapshots: every round, through the socket and through the watched file.
	t0=${EPOCHREALTIME/./}
	snapshot $rev "$work/next.json"
	rw apply "$work/next.json" >/dev/null
	t_apply=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
	rev=$((rev + 1))
	snapshot $rev "$work/p.json.tmp" && mv "$work/p.json.tmp" "$work/p.json"
	rev=$((rev + 1))
	# Veths: ten created, bound and deleted, with the same names and pod IPs every round.
	for i in $(seq 0 9); do
		ip -n "$node" link add "${pfx}$i" type veth peer name "${pfx}${i}p"
		ip -n "$node" link set "${pfx}$i" up
		ip -n "$node" link set "${pfx}${i}p" up
		ip -n "$node" route add "10.1.0.$i/32" dev "${pfx}$i" scope link
	done
	veths=$((veths + 10))
	# Subscribers: two that stay for a moment, one that leaves at once.
	rw drops --count 1000 --timeout 1 >/dev/null 2>&1 & bg+=($!)
	rw -j drops --count 1000 --timeout 1 >/dev/null 2>&1 & bg+=($!)
	timeout 0.2 nsenter --net=/run/netns/"$node" "$RUNWALL" --socket "$sock" drops >/dev/null 2>&1 || true
	subs=$((subs + 3))
	rw -j status >/dev/null
	sleep 0.3
	for i in $(seq 0 9); do ip -n "$node" link del "${pfx}$i"; done
	for p in "${bg[@]}"; do wait "$p" 2>/dev/null || true; done
	bg=()
	if [ $SECONDS -ge $next_sample ]; then
		samples+=("$((SECONDS - start))s:$(rss)kB")
		[ -z "$settled_rss" ] && [ $((SECONDS - start)) -ge $((secs / 3)) ] && settled_rss=$(rss)
		next_sample=$((SECONDS + secs / 10 + 1))
	fi
	[ "${SOAK_VERBOSE:-0}" = 1 ] && echo "# round: apply ${t_apply} ms, round $(( (${EPOCHREALTIME/./} - t0) / 1000 )) ms"
	kill -0 "$agent_pid" || { echo "Bail out! the agent died"; tail -30 "$work/agent.log"; exit 1; }
done
last_rss=$(rss)
echo "# $((SECONDS - start)) s: $((rev - 2)) snapshots applied, $veths veths created and deleted, $subs subscribers"
echo "# agent RSS (kB): start $first_rss, ${samples[*]}, end $last_rss"
asan=0
grep -q __asan_init "$RUNWALL" && asan=1
rss_ok=1
if [ "$asan" = 0 ]; then
	settled_rss=${settled_rss:-$first_rss}
	slack=$((settled_rss / 10 > 4096 ? settled_rss / 10 : 4096))
	if [ "$last_rss" -gt $((settled_rss + slack)) ]; then
		rss_ok=0
		echo "# agent RSS grew from $settled_rss kB (settled) to $last_rss kB: more than $slack kB"
	else
		echo "# agent RSS flat: $last_rss kB at the end, $settled_rss kB settled (slack $slack kB)"
	fi
fi
# SIGTERM: the agent exits cleanly (enforcement stays), which is when the leak checker runs.
kill -TERM "$agent_pid"
rc=0
wait "$agent_pid" || rc=$?
agent_pid=
reports=$(cat "$work"/asan* 2>/dev/null | grep -cE 'ERROR: (Leak|Address)Sanitizer|runtime error' || true)
{ grep -hE 'ERROR: (Leak|Address)Sanitizer|runtime error|SUMMARY' "$work"/asan* "$work/agent.log" 2>/dev/null || true; } | head -20
if [ "$rc" -eq 0 ] && [ "$reports" -eq 0 ] && [ "$rss_ok" = 1 ]; then
	echo "ok 1 - agent soak: exit 0, no sanitizer or leak report$([ "$asan" = 0 ] && echo ", RSS flat")"
else
	echo "not ok 1 - agent soak: exit $rc, $reports sanitizer/leak reports, RSS $([ "$rss_ok" = 1 ] && echo flat || echo grew)"
	tail -20 "$work/agent.log"
	exit 1
fi
