#!/usr/bin/env bash
# runwall-cni driven by Debian's real reference plugins (containernetworking-plugins: ptp with
# host-local) creating real pod namespaces, chained after ptp in a conflist the way it chains
# after the VPC CNI: ADD fails when runwall was never set up on the node; with the agent running
# and with the agent stopped (pins present) a pod is enforced from its first packet (metadata
# and a private host refused, an allowed service reached); CHECK sees the binding go; DEL
# unbinds, is idempotent and leaves nothing behind; install/uninstall into a temp conf folder
# is idempotent. An IPv6 EKS node's pod (an IPv6 and a 169.254.172.0/22 IPv4) is bound with both
# and its gateway, shown by status and counters; the agent binds a /128 route's IPv6. The bpffs
# check the scripts run first mounts nothing over the pins on a node of 1 000 mounts.
#
#   tests/netns/test_cni.sh BUILD
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin cni rwc "${1:-build}"
ROOT=$RW_ROOT
CNI=$RW_CNI
POLICY_DEFAULT=$ROOT/manifests/policy-default.json
PLUGINS=/usr/lib/cni
CHAIN=("$RW_PY" "$HERE/cni_chain.py")


for x in "$RW_RUNWALL" "$CNI" "$PLUGINS/ptp" "$PLUGINS/host-local"; do
	[ -x "$x" ] || { echo "Bail out! $x is missing (make; containernetworking-plugins)"; exit 1; }
done

cleanup() {
	local rc=$?
	trap - ERR
	if [ "$FAILED" -ne 0 ] || [ "$rc" -ne 0 ]; then
		diag "agent log (last 30 lines):"
		tail -n 30 "$RW_WORK/agent.log" 2>/dev/null | sed 's/^/#   /' >&3 || true
	fi
	rw_agent_kill TERM
	"$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" detach >/dev/null 2>&1 || true
	rw_node_down
	rm -rf "$RW_WORK"
}
trap cleanup EXIT
rw_trap_abort

# conflist FILE POD_IP [BPFFS]: ptp + host-local handing out exactly POD_IP, then runwall-cni,
# as the VPC CNI's conflist chains its plugins. ptp names host veths "veth…": that is the
# prefix the agent and the plugin are told.
conflist() {
	local bpffs=${3:-$RW_BPFFS}
	jq -n --arg ip "$2" --arg data "$RW_WORK/ipam" --arg bpffs "$bpffs" '{
		cniVersion: "1.0.0", name: "rwtest-cni",
		plugins: [
			{type: "ptp", ipMasq: false, ipam: {type: "host-local", dataDir: $data,
				ranges: [[{subnet: "10.1.9.0/24", rangeStart: $ip, rangeEnd: $ip}]],
				routes: [{dst: "0.0.0.0/0"}]}},
			{type: "runwall-cni", bpffs: $bpffs, ifPrefix: "veth"}
		]}' >"$1"
}

# cni CMD POD: the chain for pod POD (its namespace, conflist and result cache), run in the
# node namespace the way the kubelet's runtime runs it on a node. stdout: the result.
cni() {
	local cmd=$1 pod=$2
	nsenter --net="/run/netns/$RW_NODE" -- env CNI_PATH="$PLUGINS:$BUILD" "${CHAIN[@]}" "$cmd" \
		"$RW_WORK/$pod.conflist" "/run/netns/${RW_PREFIX}$pod" eth0 "cid-$pod" \
		"$RW_WORK/$pod.cache" 2>>"$RW_WORK/cni.log"
}

# pod_add POD IP: a pod namespace and its conflist; the chain is run by the test.
pod_prepare() {
	rw_ns_add "${RW_PREFIX}$1"
	RW_SB_NS[$1]=${RW_PREFIX}$1
	conflist "$RW_WORK/$1.conflist" "$2" "${3:-$RW_BPFFS}"
}
host_if() { jq -r '.interfaces[] | select(has("sandbox") | not) | .name' "$RW_WORK/$1.cache"; }
ifindex_of() { cat "/sys/class/net/$1/ifindex" 2>/dev/null || rw_node_exec cat "/sys/class/net/$1/ifindex"; }
node_ifindex() { rw_node_exec ip -o link show dev "$1" | cut -d: -f1; }
probe() { rw_probe "$1" tcp "$2" "$3" --timeout "$(rw_scale 1)"; }
# The endpoints the kernel has (bpftool, not runwall): "IFINDEX POD_IP POD_IP6 GATEWAY6" lines
# (struct rw_endpoint: pod_ip, flags, pod_ip6, gw_ip6), "-" for an address whose flag is clear.
endpoints() {
	bpftool -j map dump pinned "$RW_BPFFS/rw_endpoints" | "$RW_PY" -c '
import json, socket, struct, sys
for e in json.load(sys.stdin):
    k = bytes(int(b, 16) for b in e["key"])
    v = bytes(int(b, 16) for b in e["value"])
    flags = struct.unpack("=I", v[4:8])[0]
    print(struct.unpack("=I", k)[0], socket.inet_ntoa(v[:4]) if flags & 1 else "-",
          socket.inet_ntop(socket.AF_INET6, v[8:24]) if flags & 2 else "-",
          socket.inet_ntop(socket.AF_INET6, v[24:40]) if flags & 4 else "-")'
}
# The pod IP bound to an ifindex, "none" when unbound; endpoint6_of: "POD_IP6 GATEWAY6".
endpoint_of() { endpoints | awk -v i="$1" '$1 == i {print $2; f = 1} END {if (!f) print "none"}'; }
endpoint6_of() { endpoints | awk -v i="$1" '$1 == i {print $3, $4; f = 1} END {if (!f) print "none"}'; }
# A node veth's own IPv6 link-local address.
link_local_of() { rw_node_exec ip -6 -o addr show dev "$1" scope link | awk '{sub("/.*", "", $4); print $4}'; }
# cni_self CMD POD: runwall-cni alone, with the pod's cached result as prevResult (a runtime
# retrying only the failed plugin, or checking it).
cni_self() {
	jq -c --slurpfile prev "$RW_WORK/$2.cache" '.plugins[-1] + {name, cniVersion, prevResult: $prev[0]}' \
		"$RW_WORK/$2.conflist" | nsenter --net="/run/netns/$RW_NODE" -- env CNI_COMMAND="$1" \
		CNI_CONTAINERID="cid-$2" CNI_NETNS="/run/netns/${RW_PREFIX}$2" CNI_IFNAME=eth0 \
		CNI_PATH="$PLUGINS:$BUILD" "$CNI" 2>>"$RW_WORK/cni.log"
}
hooks_first() { # hooks_first IFNAME: rw_egress first on ingress and rw_ingress first on egress
	rw_probe node hooks --dev "$1" | rw_jq_true '
		(if .tcx and (.ingress | length) > 0 then .ingress[0].name else .tc_ingress[0].name end) == "rw_egress" and
		(if .tcx and (.egress | length) > 0 then .egress[0].name else .tc_egress[0].name end) == "rw_ingress"'
}
# The pod's first packets: metadata and a private host refused (answered with a reset: the
# probe sees "refused", and nothing reached the service), an allowed service reached.
first_packets() {
	local pod=$1 what=$2
	check "$what: the pod's very first connection, to metadata 169.254.169.254:80, is refused" \
		test "$(probe "$pod" 169.254.169.254 80)" = refused
	check "$what: a private host 10.0.5.5:22 is refused" test "$(probe "$pod" 10.0.5.5 22)" = refused
	check "$what: the egress proxy 172.20.0.10:443 (a service) is reached" \
		test "$(probe "$pod" 172.20.0.10 443)" = ok
}

echo "TAP version 13" >&3

# ---- install / uninstall: no kernel, a temp CNI folder ----------------------------------------
bin=$RW_WORK/bin conf=$RW_WORK/net.d
mkdir -p "$bin" "$conf"
cat >"$conf/10-aws.conflist" <<'JSON'
{
  "cniVersion": "1.0.0",
  "name": "aws-cni",
  "disableCheck": true,
  "plugins": [
    {"name": "aws-cni", "type": "aws-cni", "vethPrefix": "eni", "mtu": "9001"},
    {"name": "egress-cni", "type": "egress-cni", "enabled": "false"},
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
  ]
}
JSON
cp "$conf/10-aws.conflist" "$RW_WORK/aws.orig"
echo '{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"bridge"}]}' >"$conf/20-other.conflist"
cp "$conf/20-other.conflist" "$RW_WORK/other.orig"
install_empty() {
	local out
	! out=$("$CNI" install --bin-dir "$bin" --conf-dir "$RW_WORK" 2>&1) && grep -q 'no \*.conflist' <<<"$out"
}
check "install into a conf folder without a conflist fails with a message" install_empty
"$CNI" install --bin-dir "$bin" --conf-dir "$conf" --bpffs /sys/fs/bpf/rw-x --ifprefix eni >/dev/null
check "install copies the binary, executable" cmp -s "$CNI" "$bin/runwall-cni"
check "install appends runwall-cni last in the first conflist's plugins, with its keys" \
	rw_jq_true '[.plugins[].type] == ["aws-cni", "egress-cni", "portmap", "runwall-cni"] and
		.plugins[3] == {type: "runwall-cni", bpffs: "/sys/fs/bpf/rw-x", ifPrefix: "eni"}' "$conf/10-aws.conflist"
check "install keeps the rest of the conflist" \
	rw_jq_true --slurpfile o "$RW_WORK/aws.orig" 'del(.plugins[3]) == $o[0]' "$conf/10-aws.conflist"
check "install leaves the other conflist alone" cmp -s "$conf/20-other.conflist" "$RW_WORK/other.orig"
cp "$conf/10-aws.conflist" "$RW_WORK/aws.once"
"$CNI" install --bin-dir "$bin" --conf-dir "$conf" --bpffs /sys/fs/bpf/rw-x --ifprefix eni >/dev/null
check "install twice: the same conflist, one entry" cmp -s "$conf/10-aws.conflist" "$RW_WORK/aws.once"
"$CNI" install --bin-dir "$bin" --conf-dir "$conf" --ifprefix eni,vlan >/dev/null
check "install with other keys replaces the entry in place" \
	rw_jq_true '[.plugins[].type] == ["aws-cni", "egress-cni", "portmap", "runwall-cni"] and
		.plugins[3] == {type: "runwall-cni", ifPrefix: "eni,vlan"}' "$conf/10-aws.conflist"
check "no temporary file left in the folders" \
	test -z "$(find "$bin" "$conf" -name '*.tmp')"
"$CNI" uninstall --bin-dir "$bin" --conf-dir "$conf" >/dev/null
check "uninstall removes the entry (the conflist is as it was)" \
	rw_jq_true --slurpfile o "$RW_WORK/aws.orig" '. == $o[0]' "$conf/10-aws.conflist"
check "uninstall removes the binary" test ! -e "$bin/runwall-cni"
check "uninstall twice succeeds" eval '"$CNI" uninstall --bin-dir "$bin" --conf-dir "$conf" >/dev/null'
check "uninstall left the other conflist alone" cmp -s "$conf/20-other.conflist" "$RW_WORK/other.orig"
cni_versions() { CNI_COMMAND=VERSION "$CNI" | rw_jq_true '.supportedVersions | index("0.4.0") and index("1.0.0")'; }
check "VERSION lists 0.4.0 and 1.0.0" cni_versions

# ---- a node ----------------------------------------------------------------------------------
rw_node_up >/dev/null
mkdir -p "$RW_WORK/ipam"

# ---- runwall never set up: ADD fails, the runtime's DEL undoes ptp -----------------------------
pod_prepare n0 10.1.9.10 "/sys/fs/bpf/rwtest-cni-$ID-never"
if out=$(cni ADD n0); then
	not_ok "runwall never set up: ADD fails"
else
	check "runwall never set up: ADD fails with CNI error 11 (try again later) naming the folder" \
		rw_jq_true --arg p "/sys/fs/bpf/rwtest-cni-$ID-never" \
			'.code == 11 and (.msg | test("not set up")) and (.details | contains($p))' <<<"$out"
fi
check "the runtime's DEL after the failed ADD succeeds" cni DEL n0
check "nothing of the pod left on the node" \
	test -z "$(rw_node_exec ip -o link show type veth | grep -v svc0 || true)"

# ---- the agent running -----------------------------------------------------------------------
jq '.revision = 100 | .runs += [{id: "run-cni1", pods: ["10.1.9.11"]},
	{id: "run-cni2", pods: ["10.1.9.12"]}, {id: "run-cni6", pods: ["2600:1f14:abc:de00::7"]}]' \
	"$POLICY_DEFAULT" >"$RW_WORK/policy.json"
rw_agent_start --ifprefix veth --policy "$RW_WORK/policy.json" --resync 1
rw_agent_wait
ready() { rw -j status 2>/dev/null | rw_jq_true .ready; }
check "agent up with the policy" rw_wait 5 ready
check "the agent pinned its programs for runwall-cni" \
	test -e "$RW_BPFFS/progs/egress" -a -e "$RW_BPFFS/progs/ingress"

pod_prepare p1 10.1.9.11
if cni ADD p1 >"$RW_WORK/p1.out"; then
	ok "agent running: ADD succeeds"
	check "ADD passes ptp's result on (the pod's IP and both interfaces)" \
		rw_jq_true '.cniVersion == "1.0.0" and .ips[0].address == "10.1.9.11/24" and
			(.interfaces | length) == 2' "$RW_WORK/p1.out"
	first_packets p1 "agent running"
	P1_IF=$(host_if p1)
	P1_IDX=$(node_ifindex "$P1_IF")
	check "CHECK succeeds" cni CHECK p1
else
	not_ok "agent running: ADD succeeds: $(cat "$RW_WORK/p1.out")"
fi

# ---- the bpffs check on a node of many mounts --------------------------------------------------
# A node of a few hundred pods has a mount per network namespace. scripts/bpffs-mount.sh, which
# tests/run.sh, setup.sh and the demo run first, must find the bpffs in use and mount nothing over
# it: a bpffs mounted over it hides every pin, and runwall-cni refuses each ADD after as "not set
# up" (ENOENT). In a mount namespace of the check's own, with 1 000 mounts more, gone with it;
# made by one process (mount(2) through ctypes), not 2 000 of mkdir and mount: under TCG each
# process costs a tenth of a second.
many_mounts_check() {
	unshare --mount --propagation private -- bash -c '
		bpf_mounts() { awk '"'"'$5 == "/sys/fs/bpf"'"'"' /proc/self/mountinfo | wc -l; }
		"$4" -c "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for i in range(1, 1001):
    d = os.path.join(sys.argv[1], str(i))
    os.makedirs(d, exist_ok=True)
    if libc.mount(b\"rwtest-mounts\", d.encode(), b\"tmpfs\", 0, b\"size=4k\") != 0:
        sys.exit(\"mount %s: %s\" % (d, os.strerror(ctypes.get_errno())))" "$1" || exit 1
		[ "$(grep -c " - tmpfs rwtest-mounts " /proc/self/mountinfo)" -ge 1000 ] || exit 1
		before=$(bpf_mounts)
		"$2" || exit 1
		[ "$(bpf_mounts)" = "$before" ] && [ -e "$3/rw_config" ]' check "$RW_WORK/mounts" \
		"$ROOT/scripts/bpffs-mount.sh" "$RW_BPFFS" "$RW_PY"
}
check "beside 1 000 more mounts, scripts/bpffs-mount.sh mounts no bpffs over the pins" \
	many_mounts_check

# ---- the agent stopped, its pins in place ------------------------------------------------------
rw_agent_kill TERM
pod_prepare p2 10.1.9.12
if cni ADD p2 >"$RW_WORK/p2.out"; then
	ok "agent stopped: ADD succeeds"
	first_packets p2 "agent stopped"
	P2_IF=$(host_if p2)
	P2_IDX=$(node_ifindex "$P2_IF")
	check "agent stopped: runwall's programs first on both hooks of $P2_IF" hooks_first "$P2_IF"
	check "agent stopped: the pod IP bound to $P2_IF" test "$(endpoint_of "$P2_IDX")" = 10.1.9.12
	check "CHECK succeeds" cni CHECK p2
	# The binding gone, as the programs read it too: rw_endpoints and the veth's index
	# (its slot, ifindex mod 16384: rw_veth_slots, include/runwall.h).
	bpftool map delete pinned "$RW_BPFFS/rw_endpoints" key $(printf '%d %d %d %d' \
		$((P2_IDX & 255)) $((P2_IDX >> 8 & 255)) $((P2_IDX >> 16 & 255)) $((P2_IDX >> 24)))
	P2_SLOT=$((P2_IDX & 16383))
	bpftool map delete pinned "$RW_BPFFS/rw_veth_slots" key $(printf '%d %d %d %d' \
		$((P2_SLOT & 255)) $((P2_SLOT >> 8 & 255)) 0 0)
	if out=$(cni CHECK p2); then
		not_ok "CHECK fails once the binding is gone"
	else
		check "CHECK fails once the binding is gone (error 102, naming the veth)" \
			rw_jq_true --arg v "$P2_IF" '.code == 102 and (.details | contains($v))' <<<"$out"
	fi
	# Deny-all drops the pod's ARP too: once its neighbour entry for the gateway goes stale
	# (seconds, under emulation), its own kernel fails the connect with EHOSTUNREACH before the
	# probe's timeout ("refused" to the probe); either way nothing reached the service.
	p2_unbound=$(probe p2 172.20.0.10 443)
	check "a pod unbound is deny-all: the service is not reached ($p2_unbound)" \
		test "$p2_unbound" = timeout -o "$p2_unbound" = refused
	check "runwall-cni's ADD again rebinds (idempotent attach)" eval 'cni_self ADD p2 >/dev/null'
	check "... and CHECK succeeds" cni CHECK p2
else
	not_ok "agent stopped: ADD succeeds: $(cat "$RW_WORK/p2.out")"
fi

# ---- DEL ---------------------------------------------------------------------------------------
check "DEL p2 (agent stopped) succeeds" cni DEL p2
check "p2's veth is gone and its ifindex unbound" \
	bash -c "! nsenter --net=/run/netns/$RW_NODE ip link show dev '${P2_IF:-none}' 2>/dev/null" 
check "p2's binding is gone" test "$(endpoint_of "${P2_IDX:-0}")" = none
check "DEL p2 again (nothing left: no cached result) succeeds" cni DEL p2
check "DEL p1 succeeds" cni DEL p1
check "DEL p1 again succeeds" cni DEL p1
check "no binding is left for a veth that is gone" \
	test -z "$(endpoints)"
check "no link pin is left for a veth that is gone" \
	test -z "$(ls "$RW_BPFFS/links" 2>/dev/null)"
check "no veth left on the node" \
	test -z "$(rw_node_exec ip -o link show type veth | grep -v svc0 || true)"

# ---- an IPv6 EKS node's pod: IPv6 and the node-local IPv4 (169.254.172.0/22), both bound ------
# ptp with host-local handing out one address of each family, as the VPC CNI's IPv6 mode gives a
# pod its IPv6 and egress-cni its node-local IPv4; runwall-cni (the agent stopped, its pins in
# place) binds both, with the host veth's link-local as the pod's IPv6 gateway.
# IPv6 on for the veths made from here on (the namespaces start with it off), quiet: no DAD, no
# router solicitations.
ipv6_on() {
	rw_in "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=0 net.ipv6.conf.default.accept_dad=0 \
		net.ipv6.conf.default.router_solicitations=0 net.ipv6.conf.default.accept_ra=0
}
ipv6_on "$RW_NODE"
pod_prepare p6 169.254.172.9
ipv6_on "${RW_PREFIX}p6"
jq --arg data "$RW_WORK/ipam" '.plugins[0].ipam = {type: "host-local", dataDir: $data,
	ranges: [[{subnet: "169.254.172.0/22", rangeStart: "169.254.172.9", rangeEnd: "169.254.172.9"}],
		[{subnet: "2600:1f14:abc:de00::/64", rangeStart: "2600:1f14:abc:de00::7",
		  rangeEnd: "2600:1f14:abc:de00::7"}]],
	routes: [{dst: "0.0.0.0/0"}, {dst: "::/0"}]}' "$RW_WORK/p6.conflist" >"$RW_WORK/p6.tmp"
mv "$RW_WORK/p6.tmp" "$RW_WORK/p6.conflist"
if cni ADD p6 >"$RW_WORK/p6.out"; then
	ok "IPv6 node: ADD of a pod with an IPv6 and a 169.254.172.0/22 IPv4 succeeds"
	P6_IF=$(host_if p6)
	P6_IDX=$(node_ifindex "$P6_IF")
	check "IPv6 node: the IPv4 169.254.172.9 bound to $P6_IF" \
		test "$(endpoint_of "$P6_IDX")" = 169.254.172.9
	check "IPv6 node: the IPv6 2600:1f14:abc:de00::7 bound, the gateway the host veth's link-local" \
		test "$(endpoint6_of "$P6_IDX")" = "2600:1f14:abc:de00::7 $(link_local_of "$P6_IF")"
	check "IPv6 node: CHECK succeeds" cni CHECK p6
	sbx6() { rw -j status 2>/dev/null | rw_jq_true --arg i "$P6_IF" --arg gw "$(link_local_of "$P6_IF")" \
		'.sandboxes[] | select(.ifname == $i) | .pod == "169.254.172.9" and
		 .pod6 == "2600:1f14:abc:de00::7" and .gateway6 == $gw'; }
	check "IPv6 node: status -j shows both addresses and the gateway" sbx6
	run6() { rw -j status 2>/dev/null | rw_jq_true --arg i "$P6_IF" \
		'(.sandboxes[] | select(.ifname == $i) | .run == "run-cni6") and
		 (.runs[] | select(.id == "run-cni6") | .pods == ["2600:1f14:abc:de00::7"])'; }
	check "IPv6 node: status -j finds the sandbox's run by its IPv6, and lists the run's IPv6 pod" run6
	check "IPv6 node: counters names the run's IPv6 pod" \
		grep -q "run run-cni6 (idx [0-9]*, gen [0-9]*, pods 2600:1f14:abc:de00::7)" \
		<<<"$(rw counters --run run-cni6 2>/dev/null || true)"
	check "IPv6 node: status shows both addresses to people" \
		grep -q "169.254.172.9 2600:1f14:abc:de00::7" <<<"$(rw status 2>/dev/null || true)"
	# Only the IPv4 bound (runwall-cni of another pod's view): CHECK names both sides.
	bpftool map update pinned "$RW_BPFFS/rw_endpoints" key $(printf '%d %d %d %d' \
		$((P6_IDX & 255)) $((P6_IDX >> 8 & 255)) $((P6_IDX >> 16 & 255)) $((P6_IDX >> 24))) \
		value 169 254 172 9 1 0 0 0 $(printf '0 %.0s' $(seq 32)) exist
	if out=$(cni CHECK p6); then
		not_ok "CHECK fails when the IPv6 is not bound"
	else
		check "CHECK fails when the IPv6 is not bound (102, naming what is and what should be)" \
			rw_jq_true '.code == 102 and (.details | contains("bound to 169.254.172.9, the pod is 169.254.172.9 and 2600:1f14:abc:de00::7"))' <<<"$out"
	fi
	check "runwall-cni's ADD again binds both" eval 'cni_self ADD p6 >/dev/null && cni CHECK p6'
	check "IPv6 node: DEL succeeds" cni DEL p6
	check "IPv6 node: p6's binding is gone" test "$(endpoint_of "${P6_IDX:-0}")" = none
else
	not_ok "IPv6 node: ADD succeeds: $(cat "$RW_WORK/p6.out") $(tail -3 "$RW_WORK/cni.log")"
fi

# ---- the agent: a failed attach is retried with backoff; a route replace unbinds at once -------
# --resync 120: nothing below may wait for a resync. tc mode: another tool's u32 filter at
# priority 1 (runwall's) makes runwall's cls_bpf filter there fail (one classifier kind per
# priority), which is how an attach is made to fail here until that filter goes.
rw_agent_start --ifprefix veth --policy "$RW_WORK/policy.json" --resync 120 --attach-mode tc
rw_agent_wait
rw_ns_add "${RW_PREFIX}rr"
sbx_field() { # sbx_field IFNAME JQ: a field of the agent's status for one sandbox veth
	rw -j status 2>/dev/null | jq -r --arg i "$1" ".sandboxes[] | select(.ifname == \$i) | $2"
}
failures_at_least() { [ "$(sbx_field vethrtfail '.attach_failures // 0')" -ge "$1" ]; }
ip -n "$RW_NODE" link add xrtfail type veth peer name eth0 netns "${RW_PREFIX}rr"
tc -n "$RW_NODE" qdisc add dev xrtfail clsact
tc -n "$RW_NODE" filter add dev xrtfail ingress prio 1 protocol all u32 match u32 0 0 flowid 1:1
ip -n "$RW_NODE" link set xrtfail name vethrtfail
ip -n "$RW_NODE" link set vethrtfail up
check "a failed attach is retried (3 failed attempts within 5 s, no resync for 120 s)" rw_wait 5 failures_at_least 3
# The first failures may all come from the link's events and the resyncs they ask for; a retry of
# the backoff's own follows within its first steps (100, 200, 400 ms).
attach_status_ok() {
	rw_jq_true '.agent.attach.failures >= 3 and .agent.attach.retries >= 1 and .agent.attach.pending == 1 and
		(.sandboxes[] | select(.ifname == "vethrtfail") | (.attach_error | test("attach")) and
		.attach_retry_in_ms >= 0)' <<<"$(rw -j status 2>/dev/null || true)"
}
check "status -j shows the failed attach and when it is retried" rw_wait 3 attach_status_ok
check "status shows it to people" grep -q "vethrtfail: attach .*retrying in" <<<"$(rw status 2>/dev/null || true)"
tc -n "$RW_NODE" filter del dev vethrtfail ingress prio 1
check "once the attach can succeed, a retry attaches (within the 5 s backoff cap)" rw_wait 7 hooks_first vethrtfail
check "status: no attach pending any more" \
	rw_wait 2 eval '[ "$(rw -j status 2>/dev/null | jq ".agent.attach.pending")" = 0 ]'

ip -n "$RW_NODE" link add vethrra type veth peer name eth1 netns "${RW_PREFIX}rr"
ip -n "$RW_NODE" link add vethrrb type veth peer name eth2 netns "${RW_PREFIX}rr"
for d in vethrra vethrrb; do ip -n "$RW_NODE" link set "$d" up; done
ip -n "$RW_NODE" route add 10.1.9.30/32 dev vethrra scope link
RA=$(node_ifindex vethrra) RB=$(node_ifindex vethrrb)
bound_to() { [ "$(endpoint_of "$1")" = "$2" ]; }
check "the /32 route binds its veth" rw_wait 3 bound_to "$RA" 10.1.9.30
ip -n "$RW_NODE" route replace 10.1.9.30/32 dev vethrrb scope link
moved() { bound_to "$RA" none && bound_to "$RB" 10.1.9.30; }
check "route replace to another veth: the old one is unbound and the new one bound at once (1 s)" \
	rw_wait 1 moved
# An IPv6 node's routes: a /128 per pod toward its veth binds the pod's IPv6 beside its IPv4, with
# the veth's link-local as the gateway; the /128 gone, the IPv6 goes with it.
# The pod's side up: the veth has carrier, and the kernel gives it its link-local (an address
# event, which the agent binds as the gateway).
ip -n "${RW_PREFIX}rr" link set eth2 up
ip -n "$RW_NODE" -6 route add 2600:1f14:abc:de00::30/128 dev vethrrb
bound6_to() { [ "$(endpoint6_of "$1")" = "$2" ]; }
check "the /128 route binds its veth's IPv6, the gateway its link-local (1 s)" \
	rw_wait 1 bound6_to "$RB" "2600:1f14:abc:de00::30 $(link_local_of vethrrb)"
check "... the IPv4 of its /32 still bound" bound_to "$RB" 10.1.9.30
ip -n "$RW_NODE" -6 route del 2600:1f14:abc:de00::30/128 dev vethrrb
check "the /128 deleted: the veth's IPv6 unbound at once, its IPv4 kept (1 s)" \
	rw_wait 1 eval 'bound6_to "$RB" "- $(link_local_of vethrrb)" && bound_to "$RB" 10.1.9.30'

# Clients that send half a request and wait: the agent serves others meanwhile and drops them at
# their deadline. (An agent that read each request blocking, 2 s each, would answer status only
# after 10 s.)
rw_bg "$RW_WORK/stall.out" "$RW_PY" -c '
import socket, sys
ss = []
for _ in range(5):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"stat")
    ss.append(s)
print("connected", flush=True)
for s in ss:
    s.settimeout(30)
    try:
        print("closed" if s.recv(100) == b"" else "answered")
    except OSError as e:
        print("error", e)
' "$RW_SOCK"
STALL_PID=$RW_LAST_PID
rw_wait 5 grep -q connected "$RW_WORK/stall.out"
check "status answers while 5 clients hold half a request (timeout 3 s)" \
	eval 'timeout 3 nsenter --net=/run/netns/$RW_NODE "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" status >/dev/null'
wait "$STALL_PID" || true
check "the agent dropped the 5 stalled clients at their deadline" \
	test "$(grep -c '^closed' "$RW_WORK/stall.out")" = 5
rw_agent_kill TERM

rw_suite_end
