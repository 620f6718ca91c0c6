#!/usr/bin/env bash
# The agent's table of the sandbox pods' containers (issue 34, docs/principals.md "How the agent
# learns the containers"), from a real agent on a node built in namespaces (lib.sh), over a real
# cgroup v2 subtree laid out as the kubelet lays it out and a bundle folder written as
# containerd's CRI writes it (lib.sh's rw_kube_* functions):
#
#   learned     a pod (systemd driver, besteffort) with "harness" and "identity-sidecar": both
#               listed by `runwall -j status` with their pod, name, short id, the cgroup ids
#               name_to_handle_at(2) gives for their directories, and the pod's veth; the
#               sandbox (pause) container is not listed; the plain status shows the table
#   enter       a process moved into the sidecar's cgroup is in it (/proc/PID/cgroup)
#   restart     the sidecar restarted (old bundle and cgroup gone, a new id and a new cgroup):
#               the table follows, the old id is gone, gen moved
#   late        a bundle whose cgroup directory appears later: cgroup_id 0 and counted waiting,
#               then the directory's id at a later rescan
#   cgroupfs    a second pod under the cgroupfs driver (guaranteed QoS): its container's cgroup
#               id and its own veth
#   veth gone   the second pod's veth deleted: its container's veth is no longer known
#   refused     bundles with a missing annotation, a cgroupsPath that climbs out with "..", and
#               a config.json over 1 MiB: left out, each logged once naming the file and the field
#   options     --cgroup-root on a folder that is not cgroup v2: refused before anything loads
#   left        the cgroup subtree removed, its processes moved out first (run.sh checks the rest)
#
# Everything lives in namespaces named rwk<pid>-*, pins in /sys/fs/bpf/rwtest-containers-<pid>,
# cgroups under <cgroup2 mount>/rwtest-kube-<pid>; all of it goes on exit, on failure too. Waits
# are for conditions, scaled by RW_WAIT_SCALE (make vmtest).
#
#   tests/netns/test_containers.sh BUILD
set -Eeuo pipefail

# shellcheck source=tests/netns/lib.sh
source "$(dirname "$0")/lib.sh"
rw_suite_begin containers rwk "${1:-build}"

PFX=enik
A_IF=enika${ID} A_IP=10.1.5.3
B_IF=enikb${ID} B_IP=10.1.5.4
A_SID=$(rw_hexid a0a0) A_HARN=$(rw_hexid a1a1) A_SIDE=$(rw_hexid a2a2) A_SIDE2=$(rw_hexid a3a3)
A_LATE=$(rw_hexid a4a4) B_SID=$(rw_hexid b0b0) B_WORK=$(rw_hexid b1b1)
A_UID=5b2c1d7e-0f3a-4c8b-9d6e-1a2b3c4d5e6f B_UID=7c8d9e0f-1a2b-4c3d-8e9f-0a1b2c3d4e5f

trap rw_kube_suite_cleanup EXIT

st() { rw_status_json; }
# entry NAME: the status's entry of the container NAME (nothing when none)
entry() { st | jq -c --arg n "$1" '.containers.list[]? | select(.name == $n)'; }
# has NAME FILTER: whether the entry of NAME is there and FILTER is true of it
has() { local e; e=$(entry "$1"); [ -n "$e" ] && rw_jq_true "${@:3}" "$2" <<<"$e"; }
ifindex_of() { ip -n "$RW_NODE" -o link show "$1" | cut -d: -f1; }
gen() { st | jq -r '.containers.gen'; }
# eventually DESC SHOW CMD...: ok when CMD succeeds within 10 s (scaled), else not ok with what the
# jq filter SHOW picks out of the status.
eventually() {
	local what=$1 show=$2
	shift 2
	if rw_wait 10 "$@"; then ok "$what"; else not_ok "$what: $(st | jq -c "$show")"; fi
}

rw_node_up
rw_kube_begin
diag "cgroup v2 subtree $RW_KUBE_CG, bundles $RW_KUBE_BUNDLES"

section "learned: a pod under the systemd driver"
rw_sandbox_add a "$A_IF" "$A_IP"
rw_kube_pod systemd besteffort "$A_UID" sandboxes agent-a "$A_SID" "/run/netns/${RW_SB_NS[a]}"
rw_kube_container systemd besteffort "$A_UID" sandboxes agent-a "$A_SID" "$A_HARN" harness
rw_kube_container systemd besteffort "$A_UID" sandboxes agent-a "$A_SID" "$A_SIDE" identity-sidecar
rw_agent_start --ifprefix "$PFX" --resync 1 --containers "$RW_KUBE_BUNDLES" \
	--cgroup-root "$RW_KUBE_CG"
rw_agent_wait || rw_bail "the agent did not start"
A_IFX=$(ifindex_of "$A_IF")
harn_cg=$(rw_kube_cgroup_id "$A_HARN")
side_cg=$(rw_kube_cgroup_id "$A_SIDE")
diag "harness cgroup id $harn_cg, identity-sidecar $side_cg (name_to_handle_at), veth $A_IF ifindex $A_IFX"
learned() {
	has harness '.cgroup_id == $cg and .ifname == $ifn and .ifindex == $ix' \
		--argjson cg "$harn_cg" --arg ifn "$A_IF" --argjson ix "$A_IFX" &&
		has identity-sidecar '.cgroup_id == $cg and .ifname == $ifn' \
			--argjson cg "$side_cg" --arg ifn "$A_IF"
}
eventually "both containers listed with their cgroup ids and the pod's veth" .containers learned
check "the entry names the pod, the pod's UID and the short id" \
	has harness '.pod == "sandboxes/agent-a" and .pod_uid == $uid and .id == $id' \
	--arg uid "$A_UID" --arg id "${A_HARN:0:12}"
check "the sandbox (pause) container is not listed; 1 pod, 2 containers, none waiting" \
	rw_jq_true '.containers.count == 2 and .containers.pods == 1 and .containers.waiting == 0 and
		([.containers.list[].id] | index($sid) == null)' --arg sid "${A_SID:0:12}" <<<"$(st)"
plain=$(rw status 2>/dev/null || true)
check "plain status: the containers table with both" \
	grep -Eq "sandboxes/agent-a +identity-sidecar +${A_SIDE:0:12} +$side_cg +$A_IF" <<<"$plain"
grep -A3 '^containers:' <<<"$plain" | diag

section "enter: a process in the sidecar's cgroup"
rw_bg "$RW_WORK/sleeper.log" ip netns exec "${RW_SB_NS[a]}" sleep 600
sleeper=$RW_LAST_PID
rw_kube_enter "$A_SIDE" "$sleeper"
check "/proc/PID/cgroup names the sidecar's directory" \
	grep -q "^0::.*/${RW_KUBE_DIR[$A_SIDE]}\$" "/proc/$sleeper/cgroup"
kill "$sleeper"
wait "$sleeper" 2>/dev/null || true

section "restart: the sidecar under a new id and a new cgroup"
gen0=$(gen)
rw_kube_container_del "$A_SIDE"
rw_kube_container systemd besteffort "$A_UID" sandboxes agent-a "$A_SID" "$A_SIDE2" identity-sidecar
side2_cg=$(rw_kube_cgroup_id "$A_SIDE2")
diag "new identity-sidecar cgroup id $side2_cg (was $side_cg)"
check "the new cgroup has another id" test "$side2_cg" != "$side_cg"
restarted() {
	has identity-sidecar '.id == $id and .cgroup_id == $cg and .ifname == $ifn' \
		--arg id "${A_SIDE2:0:12}" --argjson cg "$side2_cg" --arg ifn "$A_IF" &&
		[ "$(st | jq '[.containers.list[] | select(.name == "identity-sidecar")] | length')" = 1 ]
}
eventually "the table follows: one identity-sidecar, the new id and cgroup id" .containers restarted
check "the old id is gone" rw_jq_true '[.containers.list[] | select(.cgroup_id == $old or .id == $id)] == []' \
	--argjson old "$side_cg" --arg id "${A_SIDE:0:12}" <<<"$(st)"
check "gen moved" test "$(gen)" -gt "$gen0"

section "late: the cgroup directory after the bundle"
rw_kube_container systemd besteffort "$A_UID" sandboxes agent-a "$A_SID" "$A_LATE" late nocgroup
eventually "listed without a cgroup id (0: not admitted)" .containers.list \
	has late '.cgroup_id == 0 and .ifname == $ifn' --arg ifn "$A_IF"
check "counted waiting" rw_jq_true '.containers.waiting == 1' <<<"$(st)"
rw_kube_cgroup_mk "$A_LATE"
late_cg=$(rw_kube_cgroup_id "$A_LATE")
eventually "its id ($late_cg) once the directory is there, at a later rescan" .containers.list \
	has late '.cgroup_id == $cg' --argjson cg "$late_cg"
check "none waiting" rw_jq_true '.containers.waiting == 0' <<<"$(st)"

section "cgroupfs: a second pod under the cgroupfs driver"
rw_sandbox_add b "$B_IF" "$B_IP"
rw_kube_pod cgroupfs guaranteed "$B_UID" batch worker-b "$B_SID" "/run/netns/${RW_SB_NS[b]}"
rw_kube_container cgroupfs guaranteed "$B_UID" batch worker-b "$B_SID" "$B_WORK" worker
diag "worker's cgroup: ${RW_KUBE_DIR[$B_WORK]}"
work_cg=$(rw_kube_cgroup_id "$B_WORK")
eventually "its cgroup id ($work_cg) and its own veth" .containers.list \
	has worker '.cgroup_id == $cg and .ifname == $ifn and .pod == "batch/worker-b"' \
	--argjson cg "$work_cg" --arg ifn "$B_IF"
check "the first pod's containers keep theirs" has harness '.ifname == $ifn' --arg ifn "$A_IF"

section "veth gone: the second pod's veth deleted"
ip -n "$RW_NODE" link del "$B_IF"
eventually "its container's veth is no longer known" .containers.list \
	has worker '.ifindex == 0 and .ifname == null'
rw_kube_container_del "$B_WORK"
rm -rf "${RW_KUBE_BUNDLES:?}/$B_SID"
gone() { [ -z "$(entry "$1")" ]; }
eventually "its bundles gone: its container gone" .containers.list gone worker

section "refused: bad bundles"
refused0=$(st | jq '.containers.refused')
bad1=$(rw_hexid c1c1) bad2=$(rw_hexid c2c2) bad3=$(rw_hexid c3c3)
# Each made in a staging folder and moved in whole: the agent never sees a good version first.
bundles=$RW_KUBE_BUNDLES
RW_KUBE_BUNDLES=$RW_WORK/staging
rw_kube_container systemd besteffort "$A_UID" sandboxes agent-a "$A_SID" "$bad1" noname nocgroup
jq 'del(.annotations["io.kubernetes.cri.container-name"])' "$RW_KUBE_BUNDLES/$bad1/config.json" \
	>"$RW_WORK/c.json" && mv "$RW_WORK/c.json" "$RW_KUBE_BUNDLES/$bad1/config.json"
rw_kube_container cgroupfs burstable "$A_UID" sandboxes agent-a "$A_SID" "$bad2" climber nocgroup
jq '.linux.cgroupsPath = "/kubepods/../../../etc"' "$RW_KUBE_BUNDLES/$bad2/config.json" \
	>"$RW_WORK/c.json" && mv "$RW_WORK/c.json" "$RW_KUBE_BUNDLES/$bad2/config.json"
mkdir -p "$RW_KUBE_BUNDLES/$bad3"
"$RW_PY" -c 'import sys; sys.stdout.write("{\"pad\": \"" + "x" * (1 << 20) + "\"}")' \
	>"$RW_KUBE_BUNDLES/$bad3/config.json"
RW_KUBE_BUNDLES=$bundles
mv "$RW_WORK/staging/$bad1" "$RW_WORK/staging/$bad2" "$RW_WORK/staging/$bad3" "$RW_KUBE_BUNDLES/"
logged() { grep -qF -- "$1" "$RW_WORK/agent.log"; }
check "a missing annotation: logged naming the file and the field" rw_wait 10 logged \
	"$RW_KUBE_BUNDLES/$bad1/config.json: annotations.io.kubernetes.cri.container-name: missing"
check "a cgroupsPath with \"..\": logged naming the file and the field" rw_wait 10 logged \
	"$RW_KUBE_BUNDLES/$bad2/config.json: linux.cgroupsPath: cgroupsPath \"/kubepods/../../../etc\""
check "a config.json over 1 MiB: logged naming the file" rw_wait 10 logged \
	"$RW_KUBE_BUNDLES/$bad3/config.json: larger than 1048576 bytes, refused"
none_listed() {
	rw_jq_true '([.containers.list[].name] - ["harness", "identity-sidecar", "late"]) == [] and
		.containers.refused == $r0 + 3' --argjson r0 "$refused0" <<<"$(st)"
}
eventually "none of them listed; each counted once" '.containers | del(.list)' none_listed
rw_sleep 2.5 # two more rescans: still once each
check "each logged once, not at every rescan" \
	test "$(grep -c "$bad1/config.json" "$RW_WORK/agent.log")" = 1
rm -rf "${RW_KUBE_BUNDLES:?}/$bad1" "${RW_KUBE_BUNDLES:?}/$bad2" "${RW_KUBE_BUNDLES:?}/$bad3"

section "options"
out=$(rw_node_exec "$RW_RUNWALL" --bpffs "$RW_BPFFS-x" --socket "$RW_SOCK-x" agent \
	--ifprefix nothing --cgroup-root "$RW_WORK" 2>&1) && rc=0 || rc=$?
check "--cgroup-root on a folder that is not cgroup v2: exit 2" test "$rc" = 2
check "... naming the option and the folder" \
	grep -qF "agent: --cgroup-root $RW_WORK: not a cgroup v2 file system, nor is $RW_WORK/unified" <<<"$out"
check "... nothing pinned" test ! -e "$RW_BPFFS-x"

section "nothing left"
kube_cg=$RW_KUBE_CG
rw_kube_cleanup
check "the cgroup subtree is gone, leaves first" test ! -e "$kube_cg"

rw_suite_end
