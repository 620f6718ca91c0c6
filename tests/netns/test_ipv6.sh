#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# test_ipv6.sh: IPv6 enforcement on real traffic (issue 22), on a dual-stack node built in
# network namespaces the way the VPC CNI builds an IPv6 EKS node:
#
#   sandbox a (run-a, allowlist)        NODE                          SVC (the world)
#     eth0 2600:1f14:abc:1::3/128   <-> eniXa fe80::… only            services fdaa:20::10-13
#          169.254.172.3/32 (the          2600:…:1::3/128 dev eniXa   metadata fd00:ec2::254, ::23
#          node-local IPv4, SNATed        169.254.172.3/32 dev eniXa  ULA fd00:5::5, 2001:db8::1
#          by the node's masquerade)      nft masquerade out of svc0  public 2a00:1450:4001::93
#     default via fe80::… (NDP)       <-> svc0 2600:1f14:abc:ff::1    DNS fdaa:20::53, …4001::53
#   sandbox b (run-b, open)               wan0 2600:1f14:abc:fe::1    NAT64/6to4/Teredo forms of
#     eth0 2600:1f14:abc:1::4/128,           |                        10.0.5.5, 169.254.169.254
#          10.1.2.4/32                    RTR (MTU 1400 hop) -- FAR    and 93.184.216.34
#                                            |               2a00:1450:4002:1::7 (a sink)
#                                         rly0 2600:1f14:abc:fd::1 -- RELAY, a third party's
#                                           6to4/Teredo relay: 2002:ac14:a::/48 and the Teredo
#                                           address of 172.20.0.10 (the egress proxy) route to it
#
# The snapshot declares the cluster's NAT64 prefix 64:ff9b::/96 (the services namespace holds
# the NAT64 addresses, as a translator would).
#
# TAP output. The checks, in the order they run:
#   no-filter   without runwall every path of the matrix connects, the pods resolve their
#               gateway by NDP, a transfer over the small-MTU hop completes: the topology works,
#               so every refusal below is runwall's
#   matrix6     the sandbox network paths over IPv6 (services on their ports and refused on
#               others, metadata, ULA, DNS, the embedded-IPv4 forms, public by egress mode,
#               inbound only from the platform's peers on the harness ports), with each
#               attempt's event; the node-local IPv4 beside it
#   relay       the 6to4 and Teredo forms of the egress proxy are private-destination, and no
#               packet of theirs reached the relay
#   ranges      link-local and multicast destinations; a v4-mapped destination (raw frame)
#   ndp         the gateway REACHABLE/STALE in the pod's neighbour table under runwall
#   pmtu        a TCP transfer larger than the hop's MTU completes; the pod's route cache
#               shows the hop's MTU (the packet-too-big was let in as related to the flow)
#   forged-na   an NA from a sandbox for another pod's address and for the gateway's:
#               spoofed-source, and the node's neighbour table unchanged
#   spoof6      another pod's IPv6 source, and one the veth does not hold: spoofed-source
#   ext6        extension-header abuse and fragments (an atomic one too), each its reason
#   answers6    a refused IPv6 connect() gets ECONNREFUSED at once, a refused UDP send EACCES
#               (ICMPv6 1/1, administratively prohibited)
#   revoke6     an IPv6 and an IPv4 flow of one run, both cut by one apply (ECONNRESET at both
#               ends)
#
# Everything lives in namespaces named rw6<pid>-*, pins in /sys/fs/bpf/rwtest-ipv6-<pid>, the
# socket /run/rwtest-ipv6-<pid>.sock, files in /tmp/rwtest-ipv6-<pid>.*, the node's nftables
# table in the node namespace only; all of it goes on exit, on failure too (RW_KEEP=1 keeps the
# files). Waits scale with RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_ipv6.sh BUILD
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin ipv6 rw6 "${1:-build}"
IPV6=("$RW_PY" "$HERE/ipv6.py")
SUITE_START=$(date +%s%N)

A_IF=eni6a${ID} A_IP6=2600:1f14:abc:1::3 A_IP4=169.254.172.3 A_RUN=run-a
B_IF=eni6b${ID} B_IP6=2600:1f14:abc:1::4 B_IP4=10.1.2.4 B_RUN=run-b
PFX=eni6
NODE_UP6=2600:1f14:abc:ff::1 SVC_UP6=2600:1f14:abc:ff::2
NODE_WAN6=2600:1f14:abc:fe::1 RTR_WAN6=2600:1f14:abc:fe::2
RTR_FAR6=2a00:1450:4002:1::1 FAR6=2a00:1450:4002:1::7 HOP_MTU=1400 SINK_PORT=5001
RTR=${RW_PREFIX}rtr FAR=${RW_PREFIX}far
RELAY=${RW_PREFIX}rly NODE_RLY6=2600:1f14:abc:fd::1 RLY6=2600:1f14:abc:fd::2
# The egress proxy 172.20.0.10's 6to4 address, and a Teredo one whose client (inverted) it is.
PROXY_6TO4=2002:ac14:a::1 PROXY_TEREDO=2001:0:4136:e378:8000:63bf:53eb:fff5
INET6=2a00:1450:4001::93 # "the public internet"
REVOKE_PORT=7443

# The world's IPv6 addresses, on the services namespace's lo. Public hosts use 2a00::/12 and
# 2a05::/16 prefixes (2001:db8::/32 is a refused special range; it is here once, as such).
SVC6=(
	fdaa:20::10 fdaa:20::11 fdaa:20::12 fdaa:20::13 # proxy, broker, app tier, drive gateway
	fdaa:20::20 fdaa:20::30 fdaa:20::53             # Temporal worker, connectors, cluster DNS
	fd00:ec2::254 fd00:ec2::23                      # IMDS, Pod Identity
	fd00:5::5 2001:db8::1                           # a ULA host, the documentation range
	"$INET6" 2a00:1450:4001::53 2a05:d018::5        # public web, public DNS, a run's database
	64:ff9b::a00:505 64:ff9b::a9fe:a9fe 64:ff9b::5db8:d822 # NAT64 of 10.0.5.5, IMDS, public
	64:ff9b:1:a00:5:500::                           # 10.0.5.5 read as a local NAT64 /48: special
	2002:a00:505::1 2002:a9fe:a9fe::1               # 6to4 of 10.0.5.5 and IMDS
	2001:0:4136:e378:8000:63bf:f5ff:fafa            # Teredo, client 10.0.5.5 (inverted)
	2001:0:4136:e378:8000:63bf:5601:5601            # Teredo, client 169.254.169.254
)
SVC4=(172.20.0.10 172.20.0.11 172.20.0.12 172.20.0.13 169.254.169.254 10.0.5.5 93.184.216.34)
TCP_PORTS=(22 53 80 443 3000 3128 3443 4096 5432 8080 8443)

export RW_RUNS="a=$A_RUN b=$B_RUN"
export RW_IPS="a=$A_IP6 b=$B_IP6"

cleanup() {
	local rc=$?
	trap - ERR
	set +e
	rw_diag_on_failure "$rc" 30
	rw_suite_cleanup
}
trap cleanup EXIT
rw_trap_abort

# ---- helpers -----------------------------------------------------------------------------------

# judge ARGS...: expect.py's verdicts as TAP (rw_judge, lib.sh).
judge() { rw_judge "$@"; }

# batch SPEC OUTDIR [TIMEOUT]: every FROM's attempts of the spec at once, in its namespace.
batch() { rw_batch "$1" "$2" "${3:-0.7}"; }

# run_counter RUN DIR REASON: packets of one run under one reason
run_counter() {
	rw_counters_json | jq -r --arg r "$1" --arg d "$2" --arg why "$3" \
		'[.runs[]? | select(.id == $r) | .[$d][$why].packets // 0] | add // 0'
}
in_events() { rw_wait 3 jq -se "$@" "$RW_WORK/events.jsonl" >/dev/null; }
frame() { # frame SANDBOX KIND SRC DST [TARGET]
	rw_in "${RW_SB_NS[$1]}" "${IPV6[@]}" frame --iface eth0 --kind "$2" --src "$3" --dst "$4" \
		${5:+--target "$5"} >/dev/null
}
pod_ll() { rw_link_local "${RW_SB_NS[$1]}" eth0; }

policy() { # policy REVISION EGRESS-OF-RUN-B
	cat <<EOF
{
  "revision": $1,
  "egress": "allowlist",
  "nat64": "64:ff9b::/96",
  "deny": ["10.0.0.0/16", "10.1.0.0/16", "172.20.0.0/16", "2600:1f14:abc:1::/64"],
  "services": [
    {"name": "egress-proxy",     "ip": "172.20.0.10", "tcp": [443, 8443, 3128]},
    {"name": "egress-proxy-6",   "ip": "fdaa:20::10", "tcp": [443, 8443, 3128]},
    {"name": "identity-broker-6", "ip": "fdaa:20::11", "tcp": [3443]},
    {"name": "app-tier-6",       "ip": "fdaa:20::12", "tcp": [3000]},
    {"name": "drive-gateway-6",  "ip": "fdaa:20::13", "tcp": [8080]}
  ],
  "inbound": [
    {"name": "app-tier",          "cidr": "172.20.0.12/32", "tcp": [4096, 4098, 4999, 6085]},
    {"name": "app-tier-6",        "cidr": "fdaa:20::12/128", "tcp": [4096, 4098, 4999, 6085]},
    {"name": "temporal-worker-6", "cidr": "fdaa:20::20/128", "tcp": [4096, 4098, 4999, 6085]}
  ],
  "runs": [
    {"id": "$A_RUN", "pods": ["$A_IP4", "$A_IP6"],
     "allow": [{"ip": "93.184.216.34", "tcp": [443]}]},
    {"id": "$B_RUN", "pods": ["$B_IP4", "$B_IP6"], "egress": "$2",
     "allow": [{"ip": "2a05:d018::5", "tcp": [5432]}]}
  ]
}
EOF
}

# ---- preconditions -----------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || rw_bail "the IPv6 suite needs root (network namespaces, BPF)"
for tool in "$RW_PY" jq nsenter ip nft; do
	command -v "$tool" >/dev/null || rw_bail "precondition: $tool is installed"
done
"$RW_ROOT/scripts/bpffs-mount.sh"

# ---- the node ----------------------------------------------------------------------------------
section "dual-stack node: namespaces ${RW_PREFIX}*"
node_up6() {
	local a p args=()
	mkdir -p "$RW_WORK"
	rw_ns_add6 "$RW_NODE"
	rw_in "$RW_NODE" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.default.rp_filter=0 net.ipv6.conf.all.forwarding=1
	rw_ns_add6 "$RW_SVC"
	ip -n "$RW_NODE" link add svc0 type veth peer name eth0 netns "$RW_SVC"
	ip -n "$RW_NODE" addr add "$RW_NODE_LINK/30" dev svc0
	ip -n "$RW_NODE" -6 addr add "$NODE_UP6/64" dev svc0 nodad
	ip -n "$RW_NODE" link set svc0 up
	ip -n "$RW_NODE" route add default via "$RW_SVC_LINK"
	ip -n "$RW_NODE" -6 route add default via "$SVC_UP6"
	ip -n "$RW_SVC" addr add "$RW_SVC_LINK/30" dev eth0
	ip -n "$RW_SVC" -6 addr add "$SVC_UP6/64" dev eth0 nodad
	ip -n "$RW_SVC" link set eth0 up
	ip -n "$RW_SVC" route add default via "$RW_NODE_LINK"
	ip -n "$RW_SVC" -6 route add default via "$NODE_UP6"
	for a in "${SVC4[@]}"; do ip -n "$RW_SVC" addr add "$a/32" dev lo; done
	# The world has no way back to the node-local range: only the node's SNAT makes it work.
	ip -n "$RW_SVC" route add unreachable 169.254.172.0/22
	for a in "${SVC6[@]}"; do ip -n "$RW_SVC" -6 addr add "$a/128" dev lo nodad; done
	# The node-local IPv4 of an IPv6 EKS node's pods leaves SNATed to the node's own address
	# (the VPC CNI's egress-cni): a masquerade in the node namespace.
	rw_in "$RW_NODE" nft -f - <<-'NFT'
		table ip rw6nat {
			chain post {
				type nat hook postrouting priority 100;
				ip saddr 169.254.172.0/22 oifname "svc0" counter masquerade
			}
		}
	NFT
	# The router hop: the node's wan0, the router, a link of a lower MTU, the far host.
	rw_ns_add6 "$RTR"
	rw_ns_add6 "$FAR"
	rw_in "$RTR" sysctl -qw net.ipv6.conf.all.forwarding=1
	# A third party's relay, where the node's routes send 6to4 and Teredo (here only the egress
	# proxy's forms): it answers on 443 and counts every packet of the sandboxes.
	rw_ns_add6 "$RELAY"
	ip -n "$RW_NODE" link add rly0 type veth peer name eth0 netns "$RELAY"
	ip -n "$RW_NODE" -6 addr add "$NODE_RLY6/64" dev rly0 nodad
	ip -n "$RELAY" -6 addr add "$RLY6/64" dev eth0 nodad
	ip -n "$RW_NODE" link set rly0 up
	ip -n "$RELAY" link set eth0 up
	ip -n "$RELAY" -6 route add local 2002:ac14:a::/48 dev lo # every address of the /48
	ip -n "$RELAY" -6 addr add "$PROXY_TEREDO/128" dev lo nodad
	ip -n "$RELAY" -6 route add default via "$NODE_RLY6"
	ip -n "$RW_NODE" -6 route add 2002:ac14:a::/48 via "$RLY6"
	ip -n "$RW_NODE" -6 route add "$PROXY_TEREDO/128" via "$RLY6"
	rw_in "$RELAY" nft -f - <<-NFT
		table ip6 rw6relay {
			chain pre {
				type filter hook prerouting priority -300;
				ip6 saddr { $A_IP6, $B_IP6 } counter
			}
		}
	NFT
	rw_start_listener "$RELAY" relay --tcp "[::]:443"
	ip -n "$RW_NODE" link add wan0 type veth peer name up0 netns "$RTR"
	ip -n "$RW_NODE" -6 addr add "$NODE_WAN6/64" dev wan0 nodad
	ip -n "$RTR" -6 addr add "$RTR_WAN6/64" dev up0 nodad
	ip -n "$RTR" link add far0 type veth peer name eth0 netns "$FAR"
	ip -n "$RTR" link set far0 mtu "$HOP_MTU"
	ip -n "$RTR" -6 addr add "$RTR_FAR6/64" dev far0 nodad
	ip -n "$FAR" -6 addr add "$FAR6/64" dev eth0 nodad
	ip -n "$RW_NODE" link set wan0 up
	ip -n "$RTR" link set up0 up
	ip -n "$RTR" link set far0 up
	ip -n "$FAR" link set eth0 up
	ip -n "$RW_NODE" -6 route add 2a00:1450:4002::/48 via "$RTR_WAN6"
	ip -n "$RTR" -6 route add default via "$NODE_WAN6"
	ip -n "$FAR" -6 route add default via "$RTR_FAR6"
	for p in "${TCP_PORTS[@]}" "$REVOKE_PORT"; do
		[ "$p" = "$REVOKE_PORT" ] || args+=(--tcp "0.0.0.0:$p" --tcp "[::]:$p")
	done
	args+=(--udp "[fdaa:20::53]:53" --udp "[2a00:1450:4001::53]:53" --udp "[$INET6]:443")
	rw_start_listener "$RW_SVC" services "${args[@]}"
	rm -f "$RW_WORK/sink.ready"
	rw_bg "$RW_WORK/sink.log" ip netns exec "$FAR" "${IPV6[@]}" sink --port "$SINK_PORT" \
		--ready "$RW_WORK/sink.ready" --duration "$(rw_scale 600)"
	rw_wait_file "$RW_WORK/sink.ready"
	rm -f "$RW_WORK/server.ready"
	rw_bg "$RW_WORK/server.jsonl" ip netns exec "$RW_SVC" "$RW_PY" "$HERE/revoke_conn.py" server \
		--dual --port "$REVOKE_PORT" --ready "$RW_WORK/server.ready" --duration "$(rw_scale 600)"
	rw_wait_file "$RW_WORK/server.ready"
}
node_up6 || rw_bail "the node did not come up"
rw_sandbox6_add a "$A_IF" "$A_IP6" "$A_IP4" || rw_bail "sandbox a"
rw_sandbox6_add b "$B_IF" "$B_IP6" "$B_IP4" || rw_bail "sandbox b"
GW_A=${RW_SB_GW6[a]} GW_B=${RW_SB_GW6[b]}
diag "gateways (the host veths' link-local addresses): a via $GW_A, b via $GW_B"

# The matrix over IPv6 (and the pods' IPv4 beside it). FROM ID PROTO DST PORT SRC EXPECT WHY DESC
cat >"$RW_WORK/matrix.spec" <<EOF
a proxy-443        tcp fdaa:20::10 443  - allow rule egress proxy, model route
a proxy-8443       tcp fdaa:20::10 8443 - allow rule egress proxy, model route
a proxy-3128       tcp fdaa:20::10 3128 - allow rule egress proxy, forwarding route
a broker-3443      tcp fdaa:20::11 3443 - allow rule identity broker
a app-3000         tcp fdaa:20::12 3000 - allow rule application tier
a drive-8080       tcp fdaa:20::13 8080 - allow rule drive gateway
a proxy-80         tcp fdaa:20::10 80   - drop private-destination egress proxy, a port no rule opens
a broker-443       tcp fdaa:20::11 443  - drop private-destination identity broker, a port no rule opens
a connectors-8080  tcp fdaa:20::30 8080 - drop private-destination connectors service (ULA)
a ula-80           tcp fd00:5::5   80   - drop private-destination a ULA host
a doc-80           tcp 2001:db8::1 80   - drop private-destination the documentation range
a imds             tcp fd00:ec2::254 80 - drop metadata instance metadata
a pod-identity     tcp fd00:ec2::23 80  - drop metadata Pod Identity agent
a dns-udp          udp fdaa:20::53 53   - drop dns cluster DNS over UDP
a dns-tcp          tcp fdaa:20::53 53   - drop dns cluster DNS over TCP
a dns-public       udp 2a00:1450:4001::53 53 - drop dns public resolver
a inet-443         tcp $INET6 443 - drop not-allowlisted public internet, allowlist mode
a inet-quic        udp $INET6 443 - drop not-allowlisted public internet, allowlist mode
a nat64-private    tcp 64:ff9b::a00:505 80 - drop private-destination NAT64 of 10.0.5.5
a nat64-imds       tcp 64:ff9b::a9fe:a9fe 80 - drop metadata NAT64 of 169.254.169.254
a nat64-public     tcp 64:ff9b::5db8:d822 443 - allow rule NAT64 of 93.184.216.34, by the run's IPv4 rule
a nat64-public-80  tcp 64:ff9b::5db8:d822 80 - drop not-allowlisted NAT64 of 93.184.216.34, a port no rule opens
a nat64l-private   tcp 64:ff9b:1:a00:5:500:: 80 - drop private-destination the local NAT64 range (64:ff9b:1::/48), special
a 6to4-private     tcp 2002:a00:505::1 80 - drop private-destination 6to4 of 10.0.5.5
a 6to4-imds        tcp 2002:a9fe:a9fe::1 80 - drop metadata 6to4 of 169.254.169.254
a teredo-private   tcp 2001:0:4136:e378:8000:63bf:f5ff:fafa 80 - drop private-destination Teredo, client 10.0.5.5
a teredo-imds      tcp 2001:0:4136:e378:8000:63bf:5601:5601 80 - drop metadata Teredo, client 169.254.169.254
a sandbox-b        tcp $B_IP6 4096 - drop private-destination another sandbox
a 6to4-proxy       tcp $PROXY_6TO4 443 - drop private-destination 6to4 of the egress proxy, routed to a relay
a teredo-proxy     tcp $PROXY_TEREDO 443 - drop private-destination Teredo, client the egress proxy, routed to a relay
b proxy-443        tcp fdaa:20::10 443  - allow rule egress proxy, model route
b inet-443         tcp $INET6 443 - allow open public internet, open mode
b inet-80          tcp $INET6 80  - allow open public internet, open mode
b inet-quic        udp $INET6 443 - allow open public internet, open mode
b rundb-5432       tcp 2a05:d018::5 5432 - allow rule its run's own rule
b nat64-public-80  tcp 64:ff9b::5db8:d822 80 - allow open NAT64 of a public address, open mode
b imds             tcp fd00:ec2::254 80 - drop metadata instance metadata, open mode
b ula-80           tcp fd00:5::5   80   - drop private-destination a ULA host, open mode
b dns-udp          udp fdaa:20::53 53   - drop dns cluster DNS, open mode
b nat64-private    tcp 64:ff9b::a00:505 80 - drop private-destination NAT64 of 10.0.5.5, open mode
b teredo-imds      tcp 2001:0:4136:e378:8000:63bf:5601:5601 80 - drop metadata Teredo of IMDS, open mode
b sandbox-a        tcp $A_IP6 4096 - drop private-destination another sandbox, open mode
b 6to4-proxy       tcp 2002:ac14:a:1::5 443 - drop private-destination 6to4 of the egress proxy, open mode
svc app-4096       tcp $A_IP6 4096 fdaa:20::12 allow inbound application tier into the harness
svc app-4098       tcp $A_IP6 4098 fdaa:20::12 allow inbound application tier
svc app-4999       tcp $A_IP6 4999 fdaa:20::12 allow inbound application tier
svc app-6085       tcp $A_IP6 6085 fdaa:20::12 allow inbound application tier
svc temporal-4096  tcp $A_IP6 4096 fdaa:20::20 allow inbound Temporal worker
svc b-temporal     tcp $B_IP6 6085 fdaa:20::20 allow inbound Temporal worker into an open-mode sandbox
svc app-22         tcp $A_IP6 22   fdaa:20::12 drop inbound-denied application tier, a port no rule opens
svc app-8080       tcp $A_IP6 8080 fdaa:20::12 drop inbound-denied application tier, a port no rule opens
svc connectors-in  tcp $A_IP6 4096 fdaa:20::30 drop inbound-denied connectors service
svc proxy-in       tcp $A_IP6 4096 fdaa:20::10 drop inbound-denied egress proxy
svc inet-in        tcp $A_IP6 4096 $INET6 drop inbound-denied the internet
svc b-inet-in      tcp $B_IP6 4096 $INET6 drop inbound-denied the internet, open-mode sandbox
EOF
# The pods' IPv4 of the same run: a's node-local 169.254.172.3 (SNATed), b's VPC address.
cat >"$RW_WORK/matrix4.spec" <<'EOF'
a proxy4-443       tcp 172.20.0.10 443 - allow rule egress proxy over the node-local IPv4 (SNAT)
a inet4-443        tcp 93.184.216.34 443 - allow rule its run's IPv4 rule, over the node-local IPv4
a imds4            tcp 169.254.169.254 80 - drop metadata instance metadata over IPv4
a private4-80      tcp 10.0.5.5 80 - drop private-destination a private host over IPv4
b inet4-443        tcp 93.184.216.34 443 - allow open public internet over IPv4, open mode
EOF

# ---- no filter: the topology itself --------------------------------------------------------------
section "no-filter: the node without runwall"
neigh_ok() { # neigh_ok NS ADDR DEV: the entry resolved (REACHABLE, STALE, DELAY or PROBE)
	ip -n "$1" -6 neigh show "$2" dev "$3" | grep -Eq 'lladdr .* (REACHABLE|STALE|DELAY|PROBE)'
}
batch "$RW_WORK/matrix.spec" "$RW_WORK/nofilter" 2
batch "$RW_WORK/matrix4.spec" "$RW_WORK/nofilter4" 2
n_all=$(cat "$RW_WORK"/nofilter/*.jsonl "$RW_WORK"/nofilter4/*.jsonl | wc -l)
n_ok=$(cat "$RW_WORK"/nofilter/*.jsonl "$RW_WORK"/nofilter4/*.jsonl | jq -r .result | grep -c '^ok$' || true)
if [ "$n_ok" -eq "$n_all" ] && [ "$n_all" -gt 0 ]; then
	ok "no-filter: without runwall all $n_all paths connect (so every refusal below is runwall's)"
else
	not_ok "no-filter: without runwall $n_ok of $n_all paths connect"
	cat "$RW_WORK"/nofilter/*.jsonl "$RW_WORK"/nofilter4/*.jsonl | jq -c 'select(.result != "ok")' | diag
fi
check "no-filter: sandbox a resolved its gateway $GW_A by NDP" neigh_ok "${RW_SB_NS[a]}" "$GW_A" eth0
check "no-filter: the node resolved sandbox a ($A_IP6) by NDP on $A_IF" neigh_ok "$RW_NODE" "$A_IP6" "$A_IF"
snat=$(rw_in "$RW_NODE" nft list table ip rw6nat | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
check "no-filter: a's node-local IPv4 left SNATed by the node's masquerade ($snat packets; the world has no route back to 169.254.172.0/22)" \
	test "${snat:-0}" -ge 2
SIZE=200000
rw_in "${RW_SB_NS[b]}" "${IPV6[@]}" upload --dst "$FAR6" --port "$SINK_PORT" --bytes "$SIZE" \
	--timeout "$(rw_scale 5)" >"$RW_WORK/pmtu-nofilter.json" || true
diag "no-filter upload: $(cat "$RW_WORK/pmtu-nofilter.json")"
route_mtu() { rw_in "${RW_SB_NS[$1]}" ip -6 route get "$FAR6" | sed -n 's/.* mtu \([0-9]*\).*/\1/p'; }
check "no-filter: a $SIZE-byte upload over the $HOP_MTU-byte hop completes" \
	rw_jq_true '.result == "ok"' "$RW_WORK/pmtu-nofilter.json"
check "no-filter: sandbox b's route to $FAR6 learnt mtu $HOP_MTU (got '$(route_mtu b)')" test "$(route_mtu b)" = "$HOP_MTU"
rw_in "${RW_SB_NS[b]}" ip -6 route flush cache
# The revoke connections' server, both families (before runwall: proves it is reachable).
reaches_server() {
	rw_in "${RW_SB_NS[b]}" "$RW_PY" -c '
import socket, sys
for dst in sys.argv[2:]:
    socket.create_connection((dst, int(sys.argv[1])), timeout=2).close()' "$REVOKE_PORT" "$@"
}
check "no-filter: the revoke server answers on $INET6 and 93.184.216.34 port $REVOKE_PORT" \
	reaches_server "$INET6" 93.184.216.34
relay_packets() { rw_in "$RELAY" nft list table ip6 rw6relay | sed -n 's/.*counter packets \([0-9]*\).*/\1/p'; }
RELAY_BEFORE=$(relay_packets)
check "no-filter: the egress proxy's 6to4 and Teredo forms reach the relay ($RELAY_BEFORE packets)" \
	test "${RELAY_BEFORE:-0}" -ge 3

# ---- runwall -------------------------------------------------------------------------------------
section "runwall: the agent, both families"
policy 1 open >"$RW_WORK/policy.json"
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix "$PFX" --attach-mode "${RW_ATTACH_MODE:-auto}" -v
# 30 s (scaled): the IPv4 and IPv6 programs are verified before the agent listens.
rw_agent_wait 30 || rw_bail "the agent did not start: $(grep -v ' debug ' "$RW_WORK/agent.log" | tail -n 4)"
# Not a bail-out: what follows tells which parts work when the binding or the snapshot does not.
check "runwall: the agent applies revision 1 (IPv4 and IPv6 everywhere) and binds both sandboxes" rw_wait 10 rw_agent_bound 2 ||
	diag "$(tail -n 3 "$RW_WORK/agent.log")"
diag "status: $(rw_status_json | jq -c '[.sandboxes[]? | del(.hooks)]')"
check "status: $A_IF bound to both of its addresses ($A_IP4, $A_IP6)" \
	rw_jq_true --arg d "$A_IF" --arg a "$A_IP4" --arg b "$A_IP6" \
	'[.sandboxes[] | select(.ifname == $d) | tostring | (contains($a) and contains($b))] | any' <<<"$(rw_status_json)"
rw_drops_bg "$RW_WORK/events.jsonl" --all || rw_bail "the event stream did not start"

# ---- matrix6 -------------------------------------------------------------------------------------
section "matrix6: the sandbox network paths over IPv6"
batch "$RW_WORK/matrix.spec" "$RW_WORK/matrix"
judge attempts --spec "$RW_WORK/matrix.spec" --results "$RW_WORK/matrix"
judge attempts --check events --spec "$RW_WORK/matrix.spec" --results "$RW_WORK/matrix" \
	--events "$RW_WORK/events.jsonl"
RW_IPS="a=$A_IP4 b=$B_IP4" batch "$RW_WORK/matrix4.spec" "$RW_WORK/matrix4"
RW_IPS="a=$A_IP4 b=$B_IP4" judge attempts --spec "$RW_WORK/matrix4.spec" --results "$RW_WORK/matrix4"
RW_IPS="a=$A_IP4 b=$B_IP4" judge attempts --check events --spec "$RW_WORK/matrix4.spec" \
	--results "$RW_WORK/matrix4" --events "$RW_WORK/events.jsonl"

# ---- relay ---------------------------------------------------------------------------------------
section "relay: an IPv6 form of the egress proxy leaves by IPv6, so it is not the proxy"
check "relay: no packet of the sandboxes reached the relay under runwall (still $RELAY_BEFORE, got $(relay_packets))" \
	test "$(relay_packets)" = "$RELAY_BEFORE"

# ---- ranges: link-local, multicast, v4-mapped ----------------------------------------------------
section "ranges: link-local, multicast and v4-mapped destinations"
# A socket to a link-scope destination takes the pod's own link-local source, which is never
# bound: outside NDP that is spoofed-source. Bound to the pod's /128, the destination decides.
plus() { [ $(($(run_counter "$1" egress "$2") - $3)) -ge "$4" ]; }
LL_A=$(pod_ll a)
before=$(run_counter "$A_RUN" egress spoofed-source)
rw_probe a tcp "$GW_A%eth0" 22 --timeout "$(rw_scale 0.5)" >/dev/null || true
check "ranges: TCP from a's own link-local $LL_A to the gateway's is spoofed-source (the pod's link-local is no identity)" \
	rw_wait 2 plus "$A_RUN" spoofed-source "$before" 1
before=$(run_counter "$A_RUN" egress private-destination)
rw_probe a tcp "$GW_A%eth0" 22 --src "$A_IP6" --timeout "$(rw_scale 0.5)" >/dev/null || true
check "ranges: TCP from $A_IP6 to the gateway's link-local $GW_A:22 is private-destination" \
	rw_wait 2 plus "$A_RUN" private-destination "$before" 1
check "ranges: its event names the link-local destination" in_events --arg run "$A_RUN" --arg d "$GW_A" \
	--arg s "$A_IP6" 'any(.[]; .run == $run and .reason == "private-destination" and .src == $s and .dst == $d and .dport == 22)'
for m in ff02::1 ff05::1:3 ff0e::101; do
	before=$(run_counter "$A_RUN" egress private-destination)
	rw_in "${RW_SB_NS[a]}" "$RW_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[2], 0))
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, socket.if_nametoindex("eth0"))
s.sendto(b"x", (sys.argv[1], 9))' "$m" "$A_IP6" 2>/dev/null || true
	check "ranges: UDP from $A_IP6 to multicast $m is private-destination" rw_wait 2 plus "$A_RUN" private-destination "$before" 1
done
for d in ::ffff:a00:505 ::ffff:a9fe:a9fe ::ffff:ac14:a; do
	why=private-destination
	[ "$d" = ::ffff:a9fe:a9fe ] && why=metadata
	before=$(run_counter "$A_RUN" egress "$why")
	frame a syn "$A_IP6" "$d"
	check "ranges: a SYN to the v4-mapped $d (a raw frame) is $why" rw_wait 2 plus "$A_RUN" "$why" "$before" 1
done

# ---- ndp -----------------------------------------------------------------------------------------
section "ndp: the pods resolve their gateway under runwall"
rw_in "${RW_SB_NS[a]}" ip -6 neigh flush dev eth0
rw_in "$RW_NODE" ip -6 neigh flush dev "$A_IF"
r=$(rw_probe a tcp fdaa:20::10 443 --timeout "$(rw_scale 2)" || true)
check "ndp: with both neighbour tables flushed, a connects to the egress proxy ($r)" test "$r" = ok
check "ndp: sandbox a's neighbour table has the gateway $GW_A resolved: $(ip -n "${RW_SB_NS[a]}" -6 neigh show "$GW_A" dev eth0)" \
	neigh_ok "${RW_SB_NS[a]}" "$GW_A" eth0
check "ndp: the node's has $A_IP6 on $A_IF: $(ip -n "$RW_NODE" -6 neigh show "$A_IP6" dev "$A_IF")" \
	neigh_ok "$RW_NODE" "$A_IP6" "$A_IF"

# ---- pmtu ----------------------------------------------------------------------------------------
section "pmtu: path-MTU discovery through the $HOP_MTU-byte hop"
rw_in "${RW_SB_NS[b]}" "${IPV6[@]}" upload --dst "$FAR6" --port "$SINK_PORT" --bytes "$SIZE" \
	--timeout "$(rw_scale 5)" >"$RW_WORK/pmtu.json" || true
diag "upload under runwall: $(cat "$RW_WORK/pmtu.json")"
check "pmtu: a $SIZE-byte upload to $FAR6 completes" rw_jq_true '.result == "ok"' "$RW_WORK/pmtu.json"
check "pmtu: sandbox b's route cache shows mtu $HOP_MTU (got '$(route_mtu b)'): the packet-too-big came in" \
	test "$(route_mtu b)" = "$HOP_MTU"

# ---- forged-na -----------------------------------------------------------------------------------
section "forged-na: NDP lies from a sandbox"
ip -n "$RW_NODE" -6 neigh show | sort >"$RW_WORK/neigh-before"
before=$(run_counter "$A_RUN" egress spoofed-source)
frame a na "$LL_A" ff02::1 "$B_IP6"
frame a na "$LL_A" ff02::1 "$GW_A"
frame a na "$LL_A" "$GW_A" "$GW_A"
check "forged-na: three NAs from a for b's $B_IP6 and the gateway's $GW_A are spoofed-source" \
	rw_wait 2 plus "$A_RUN" spoofed-source "$before" 3
check "forged-na: the events say so, with the IPv6 addresses" in_events --arg run "$A_RUN" --arg s "$LL_A" \
	'[.[] | select(.run == $run and .reason == "spoofed-source" and .src == $s)] | length >= 3'
rw_sleep 0.3
ip -n "$RW_NODE" -6 neigh show | sort >"$RW_WORK/neigh-after"
# Entries come and go with the traffic and the timers (more so under emulation): what must hold
# is that no entry of the node maps another's address to a's MAC, and b's keeps b's.
mac_of() { ip -n "${RW_SB_NS[$1]}" -o link show eth0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }
neigh_true() {
	awk -v am="$(mac_of a)" -v bm="$(mac_of b)" -v a6="$A_IP6" -v all="$LL_A" -v aif="$A_IF" -v b6="$B_IP6" '
		{ mac = ""; dev = ""
		  for (i = 2; i < NF; i++) { if ($i == "lladdr") mac = $(i + 1); if ($i == "dev") dev = $(i + 1) } }
		mac == am && !(dev == aif && ($1 == a6 || $1 == all)) { bad = 1 }
		$1 == b6 && mac != "" && mac != bm { bad = 1 }
		END { exit bad }' "$RW_WORK/neigh-after"
}
if neigh_true; then
	ok "forged-na: the node's neighbour table maps no address but a's own to a's MAC, and b's to b's"
else
	not_ok "forged-na: the node's neighbour table took a forged NA"
	diff "$RW_WORK/neigh-before" "$RW_WORK/neigh-after" | diag || true
fi

# ---- spoof6 --------------------------------------------------------------------------------------
section "spoof6: IPv6 sources a veth does not hold"
before=$(run_counter "$A_RUN" egress spoofed-source)
frame a syn "$B_IP6" "$INET6"
frame a syn 2600:1f14:abc:1::99 "$INET6"
check "spoof6: a SYN from a as b ($B_IP6) and one from 2600:1f14:abc:1::99 are spoofed-source" \
	rw_wait 2 plus "$A_RUN" spoofed-source "$before" 2
check "spoof6: their events carry the forged sources" in_events --arg run "$A_RUN" --arg b "$B_IP6" \
	'any(.[]; .run == $run and .reason == "spoofed-source" and .src == $b) and
	 any(.[]; .run == $run and .reason == "spoofed-source" and .src == "2600:1f14:abc:1::99")'

# ---- ext6 ----------------------------------------------------------------------------------------
section "ext6: extension headers and fragments from a proven pod"
while read -r name reason; do
	before=$(run_counter "$B_RUN" egress "$reason")
	frame b "$name" "$B_IP6" "$INET6"
	check "ext6: $name is $reason, counted for $B_RUN" rw_wait 2 plus "$B_RUN" "$reason" "$before" 1
done < <("${IPV6[@]}" list)

# ---- answers6 ------------------------------------------------------------------------------------
section "answers6: a refused IPv6 flow hears it at once"
DEADLINE_MS=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 2000 * k}')
rw_probe a errno tcp "$INET6" 443 --timeout "$(rw_scale 5)" >"$RW_WORK/errno-tcp.json" || true
rw_probe a errno udp "$INET6" 443 --timeout "$(rw_scale 5)" >"$RW_WORK/errno-udp.json" || true
diag "refused connect(): $(cat "$RW_WORK/errno-tcp.json"); refused UDP: $(cat "$RW_WORK/errno-udp.json")"
check "answers6: connect() to refused [$INET6]:443 fails with ECONNREFUSED within $DEADLINE_MS ms" \
	rw_jq_true --argjson d "$DEADLINE_MS" '.errno == "ECONNREFUSED" and .ms < $d' "$RW_WORK/errno-tcp.json"
check "answers6: a connected UDP socket to refused [$INET6]:443 gets EACCES (ICMPv6 1/1) within $DEADLINE_MS ms" \
	rw_jq_true --argjson d "$DEADLINE_MS" '.errno == "EACCES" and .ms < $d' "$RW_WORK/errno-udp.json"
check "answers6: the events say rst and icmp for them" in_events --arg run "$A_RUN" --arg d "$INET6" \
	'any(.[]; .run == $run and .dst == $d and .proto == "tcp" and .answer == "rst") and
	 any(.[]; .run == $run and .dst == $d and .proto == "udp" and .answer == "icmp")'

# ---- revoke6 -------------------------------------------------------------------------------------
section "revoke6: one apply cuts an IPv6 and an IPv4 flow of one run"
LIFE=$(rw_scale 60)
conn() { # conn NAME DST
	rw_bg "$RW_WORK/$1.jsonl" ip netns exec "${RW_SB_NS[b]}" "$RW_PY" "$HERE/revoke_conn.py" client \
		--dst "$2" --port "$REVOKE_PORT" --mode send --duration "$LIFE"
}
connected() { [ "$(jq -s 'length' "$RW_WORK/$1.jsonl" 2>/dev/null)" -ge 1 ] 2>/dev/null; }
ended() { [ "$(jq -s 'length' "$RW_WORK/$1.jsonl" 2>/dev/null)" -ge 2 ] 2>/dev/null; }
local_of() { jq -rs '.[0].connected' "$RW_WORK/$1.jsonl" 2>/dev/null || echo none; }
server_saw() { jq -c --arg p "$(local_of "$1")" 'select(.peer == $p)' "$RW_WORK/server.jsonl" 2>/dev/null; }
srv_reset() { rw_jq_true '.errno == "ECONNRESET"' <<<"$(server_saw "$1")"; }
conn v6 "$INET6"
conn v4 93.184.216.34
for c in v6 v4; do
	rw_wait 5 connected "$c" || not_ok "revoke6: the $c connection opens: $(tail -n 1 "$RW_WORK/$c.jsonl")"
done
rw_sleep 0.5
policy 2 allowlist >"$RW_WORK/policy2.json"
t_begin=$(rw_mono_ns)
rw apply "$RW_WORK/policy2.json" >"$RW_WORK/apply2.out" 2>&1 || not_ok "revoke6: apply revision 2: $(cat "$RW_WORK/apply2.out")"
t_apply=$(rw_mono_ns)
CUT_MS=$(awk -v k="$RW_WAIT_SCALE" 'BEGIN {printf "%d", 1000 * k}')
for c in v6 v4; do
	rw_wait 3 ended "$c" || true
	res=$(jq -cs '.[1] // {}' "$RW_WORK/$c.jsonl" 2>/dev/null || echo '{"error": "no JSON from the client"}')
	check "revoke6: $B_RUN's $c connection ($(local_of "$c")) fails with ECONNRESET within $CUT_MS ms of the apply: $res" \
		rw_jq_true --argjson d "$CUT_MS" --argjson t "$t_apply" '.errno == "ECONNRESET" and (.t_ns - $t) / 1e6 < $d' <<<"$res"
	check "revoke6: the server's socket of the $c connection sees the reset" rw_wait 3 srv_reset "$c"
done
diag "the apply took $(((t_apply - t_begin) / 1000000)) ms"

diag "suite time: $((($(date +%s%N) - SUITE_START) / 1000000)) ms"
trap - ERR
rw_suite_end
