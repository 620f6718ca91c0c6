#!/usr/bin/env bash
# Veth throughput with 1 000 rules, side by side: none / iptables with conntrack / an iptables
# chain / an nftables set / runwall. Each mode has its own pair of test namespaces: a "pod" and a
# "node" holding the server on 44.0.0.1 (the node's own netns is never touched). Small UDP
# packets with iperf3 (packets/s received) and TCP request/response with sockperf (p50 latency),
# modes interleaved in every trial, medians over trials. Writes JSON rows to OUT.
#
#   tests/bench/veth.sh BUILD OUT [TRIALS] [SECONDS]
set -euo pipefail

build=${1:?usage: veth.sh BUILD OUT [TRIALS] [SECONDS]}
out=${2:?usage: veth.sh BUILD OUT [TRIALS] [SECONDS]}
trials=${3:-5}
secs=${4:-3}
runwall=$build/runwall
tag=rwv$$
modes=(none iptables-ct iptables-chain nft-set runwall)
bpffs=/sys/fs/bpf/rwbench-veth-$$
sock=/run/rwbench-veth-$$.sock
work=$(mktemp -d /tmp/rwbench-veth.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -e "$bpffs" ] && "$runwall" --bpffs "$bpffs" --socket "$sock" detach >/dev/null 2>&1 || true
	for i in "${!modes[@]}"; do
		ip netns del "$tag-p$i" 2>/dev/null || true
		ip netns del "$tag-n$i" 2>/dev/null || true
	done
	rm -rf "$work" "$sock"
}
trap cleanup EXIT

# 997 other destinations, then the server's 3: every rule set has 1 000 entries.
others=()
for k in $(seq 0 996); do others+=("44.$((1 + k / 250)).$((k % 250)).1"); done

setup_mode() { # setup_mode INDEX
	local i=$1 p=$tag-p$i n=$tag-n$i host=rwvh$i
	[ "${modes[$i]}" = runwall ] && host=rwvr$i
	ip netns add "$p"
	ip netns add "$n"
	ip -n "$n" link set lo up
	ip -n "$p" link set lo up
	ip -n "$n" link add "$host" type veth peer name eth0 netns "$p"
	ip -n "$n" addr add 44.0.0.1/32 dev lo
	ip -n "$n" addr add 169.254.1.1/32 dev "$host"
	ip -n "$n" link set "$host" up
	ip -n "$n" route add 10.200.0.2/32 dev "$host"
	ip -n "$p" addr add 10.200.0.2/32 dev eth0
	ip -n "$p" link set eth0 up
	ip -n "$p" route add 169.254.1.1 dev eth0
	ip -n "$p" route add default via 169.254.1.1 dev eth0
	ip netns exec "$n" sysctl -qw net.ipv4.conf."$host".proxy_arp=1
	case ${modes[$i]} in
	iptables-ct | iptables-chain)
		{
			echo "*filter"
			[ "${modes[$i]}" = iptables-ct ] &&
				echo "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT"
			for o in "${others[@]}"; do echo "-A INPUT -i $host -d $o/32 -p tcp --dport 443 -j ACCEPT"; done
			echo "-A INPUT -i $host -d 44.0.0.1/32 -p tcp --dport 5201 -j ACCEPT"
			echo "-A INPUT -i $host -d 44.0.0.1/32 -p udp --dport 5201 -j ACCEPT"
			echo "-A INPUT -i $host -d 44.0.0.1/32 -p tcp --dport 11111 -j ACCEPT"
			echo "-A INPUT -i $host -j DROP"
			echo "COMMIT"
		} | ip netns exec "$n" iptables-restore
		;;
	nft-set)
		{
			echo "table inet rwbench {"
			echo " set allow { type ipv4_addr . inet_proto . inet_service; elements = {"
			for o in "${others[@]}"; do echo "  $o . tcp . 443,"; done
			echo "  44.0.0.1 . tcp . 5201, 44.0.0.1 . udp . 5201, 44.0.0.1 . tcp . 11111 }"
			echo " }"
			echo " chain input {"
			echo "  type filter hook input priority 0; policy accept;"
			echo "  iifname \"$host\" ip daddr . meta l4proto . th dport @allow accept"
			echo "  iifname \"$host\" drop"
			echo " }"
			echo "}"
		} | ip netns exec "$n" nft -f -
		;;
	runwall)
		{
			# "refusal": "drop": the check below tells enforcement by a refused SYN going
			# unanswered (an answered one looks like the closed port without runwall).
			echo '{"revision": 1, "refusal": "drop", "runs": [{"id": "bench", "pods": ["10.200.0.2"], "allow": ['
			for o in "${others[@]}"; do echo "{\"ip\": \"$o\", \"tcp\": [443]},"; done
			echo '{"ip": "44.0.0.1", "tcp": [5201, 11111], "udp": [5201]}]}]}'
		} >"$work/policy.json"
		nsenter --net=/run/netns/"$n" "$runwall" --bpffs "$bpffs" --socket "$sock" agent \
			--ifprefix rwvr --policy "$work/policy.json" >"$work/agent.log" 2>&1 &
		pids+=($!)
		# Enforcing once a SYN to a port no rule names goes unanswered (no program: refused).
		local rc=0
		for _ in $(seq 60); do
			rc=0
			ip netns exec "$p" timeout 1 bash -c 'exec 3<>/dev/tcp/44.0.0.1/5202' \
				2>/dev/null || rc=$?
			[ "$rc" = 124 ] && break
			sleep 0.5
		done
		if [ "$rc" != 124 ]; then
			echo "veth.sh: runwall is not enforcing in its namespace; agent log:" >&2
			sed 's/^/  /' "$work/agent.log" >&2
			exit 1
		fi
		;;
	esac
	ip netns exec "$n" iperf3 -s -B 44.0.0.1 >"$work/iperf-$i.log" 2>&1 &
	pids+=($!)
	ip netns exec "$n" sockperf server --tcp -i 44.0.0.1 -p 11111 >/dev/null 2>&1 &
	pids+=($!)
}

for i in "${!modes[@]}"; do setup_mode "$i"; done
sleep 1

for t in $(seq "$trials"); do
	# Interleaved: every trial runs every mode, starting from a different one.
	for j in "${!modes[@]}"; do
		i=$(((j + t) % ${#modes[@]}))
		p=$tag-p$i
		ip netns exec "$p" iperf3 -c 44.0.0.1 -u -l 64 -b 0 -t "$secs" -J \
			>"$work/udp-$i-$t.json" 2>/dev/null || echo '{}' >"$work/udp-$i-$t.json"
		ip netns exec "$p" sockperf ping-pong --tcp -i 44.0.0.1 -p 11111 -t "$secs" -m 64 \
			>"$work/rr-$i-$t.txt" 2>&1 || true
	done
done

python3 - "$work" "$out" "$trials" "${modes[@]}" <<'EOF'
import json, re, statistics, subprocess, sys
work, out, trials, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
pps, lat = {}, {}
for i, m in enumerate(modes):
    pps[m], lat[m] = [], []
    for t in range(1, trials + 1):
        try:
            d = json.load(open(f"{work}/udp-{i}-{t}.json"))["end"]["sum"]
            pps[m].append(d["packets"] * (1 - d["lost_percent"] / 100) / d["seconds"])
        except Exception:
            pass
        txt = open(f"{work}/rr-{i}-{t}.txt").read()
        g = re.search(r"percentile 50\.000 =\s*([0-9.]+)", txt)
        if g:
            lat[m].append(float(g.group(1)))
rows = []
med = {m: (statistics.median(pps[m]) if pps[m] else 0, statistics.median(lat[m]) if lat[m] else 0)
       for m in modes}
names = {"none": "no program", "iptables-ct": "iptables with conntrack",
         "iptables-chain": "an iptables chain", "nft-set": "an nftables set", "runwall": "runwall"}
for m in modes:
    if not pps[m] or not lat[m]:
        sys.exit(f"veth.sh: no result for {m}")
    u, l = med[m][0] / med["none"][0], med[m][1] / med["none"][1]
    row = {"section": "veth", "name": f"{names[m]}: small UDP packets, vs no program",
           "value": u, "unit": "x", "pps": med[m][0], "mode": m}
    if m == "runwall":
        row.update(cmp=">=", target=0.97, met=u >= 0.97 and med[m][0] > med["nft-set"][0],
                   margin=(u - 0.97) / 0.97, ahead_of_nft=med[m][0] / med["nft-set"][0])
    rows.append(row)
    row = {"section": "veth", "name": f"{names[m]}: TCP request/response latency, vs no program",
           "value": l, "unit": "x", "p50_us": med[m][1], "mode": m}
    if m == "runwall":
        row.update(cmp="<=", target=1.02, met=l <= 1.02, margin=(1.02 - l) / 1.02)
    rows.append(row)
json.dump(rows, open(out, "w"), indent=1)
EOF
