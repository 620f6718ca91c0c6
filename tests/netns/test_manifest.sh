#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The DaemonSet as the kubelet would run it, on a node built from namespaces (lib.sh), so that the
# manifest and the agent's flags cannot drift apart:
# - `kubectl kustomize manifests/` is rendered and the DaemonSet read from it: the agent
#   container's exact command and arguments, its capabilities, its volumes, probes and grace
#   period;
# - every path in the arguments must lie on one of the container's volumes (the image's root is
#   read-only) and is mapped to this test's own: the bpffs hostPath to a folder of the machine's
#   bpffs, /run/runwall to a private folder, the ConfigMap to a folder laid out as the kubelet
#   does (`..data` symlink) holding the rendered ConfigMap's policy, the token Secret to a file;
# - the agent runs with exactly the container's capabilities as its bounding set and
#   no_new_privs (allowPrivilegeEscalation: false), which proves those capabilities enough: it
#   loads, attaches, serves the probes' paths on the probes' port, enforces the ConfigMap's
#   policy on a sandbox, applies a ConfigMap update (an apply over a live snapshot), exits on
#   SIGTERM within the grace period with enforcement left in place, and a second start (the
#   rolling update's next pod) adopts the pins and is ready again;
# - the view Deployment's container runs its exact command and arguments (paths mapped the same
#   way, the agents' token Secret the same file as the agent's) as its user, with no capability:
#   its --agents-dns name, resolved through a hosts file bind-mounted over /etc/hosts in a mount
#   namespace of its own, gives the agent's address; the view follows it with the token, and a
#   refusal on the node shows in the view's API (with the view's own token);
# - the CNI install init container runs its exact command, with no capability, against a copy of
#   the VPC CNI's conflist, twice (idempotent).
#
#   tests/netns/test_manifest.sh BUILD
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/lib.sh"
rw_suite_begin manifest rwm "${1:-build}"
bpfroot=/sys/fs/bpf/rwtest-manifest-$ID
cleanup() {
	set +e
	rw_agent_kill KILL
	[ -n "${RW_BPFFS:-}" ] && "$RW_RUNWALL" --bpffs "$RW_BPFFS" --socket "$RW_SOCK" detach >/dev/null 2>&1
	rw_node_down
	rm -rf "$bpfroot" "$RW_WORK"
}
trap cleanup EXIT

for tool in kubectl setpriv jq unshare curl; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is missing: run scripts/setup.sh"; exit 1; }
done

kubectl kustomize manifests/ >"$RW_WORK/rendered.yaml"
mkdir -p "$bpfroot"

# The plan: each container's argv with its paths mapped, its capabilities, the volumes' contents.
python3 - "$RW_WORK/rendered.yaml" "$RW_WORK" "$bpfroot" "$BUILD" >"$RW_WORK/plan.json" <<'PY'
import json, os, secrets, sys, yaml
rendered, work, bpfroot, build = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
volumes = {v["name"]: v for v in pod["volumes"]}
problems = []
tokens = {}  # one per Secret: the agent and the view mount the same runwall-http-token

def kubelet_dir(path, files):
    """A ConfigMap or Secret volume as the kubelet lays it out: files behind a ..data symlink."""
    stamp = "..2026_01_01_00_00_00.0"
    os.makedirs(f"{path}/{stamp}", exist_ok=True)
    for name, text in files.items():
        with open(f"{path}/{stamp}/{name}", "w") as f:
            f.write(text)
        os.symlink(f"..data/{name}", f"{path}/{name}")
    os.symlink(stamp, f"{path}/..data")

def mounts_of(c, volumes):
    m = {}
    for vm in c.get("volumeMounts", []):
        v = volumes[vm["name"]]
        if "hostPath" in v:
            host = v["hostPath"]["path"]
            # The machine's own bpffs (a folder of it) and cgroup v2 tree (read only: the agent
            # reads cgroup ids); every other host folder is the test's own.
            m[vm["mountPath"]] = {"/sys/fs/bpf": bpfroot, "/sys/fs/cgroup": "/sys/fs/cgroup"}.get(
                host, f"{work}/host{host}")
            os.makedirs(m[vm["mountPath"]], exist_ok=True)
        elif "configMap" in v:
            cm = next(d for d in docs if d["kind"] == "ConfigMap"
                      and d["metadata"]["name"] == v["configMap"]["name"])
            m[vm["mountPath"]] = f"{work}/volumes/{vm['name']}"
            kubelet_dir(m[vm["mountPath"]], cm["data"])
        elif "secret" in v:
            # The operator creates it (docs/operations.md): one key, "token".
            name = v["secret"]["secretName"]
            tokens.setdefault(name, secrets.token_hex(32) + "\n")
            m[vm["mountPath"]] = f"{work}/volumes/{c['name']}-{vm['name']}"
            if not os.path.exists(m[vm["mountPath"]]):
                kubelet_dir(m[vm["mountPath"]], {"token": tokens[name]})
        else:
            problems.append(f"volume {vm['name']}: a kind this test does not map")
    return m

def mapped(c, volumes=volumes):
    mounts = mounts_of(c, volumes)
    argv = c.get("command", []) + c.get("args", [])
    binary = os.path.join(build, os.path.basename(argv[0]))
    out = [binary]
    for a in argv[1:]:
        key, eq, val = a.rpartition("=") if a.startswith("--") and "=" in a else ("", "", a)
        if val.startswith("/"):
            mp = max((m for m in mounts if val == m or val.startswith(m + "/")), key=len, default=None)
            if mp is None:
                problems.append(f"{c['name']}: {val} is on none of the container's volumes")
            else:
                val = mounts[mp] + val[len(mp):]
        out.append(key + eq + val)
    sc = c.get("securityContext", {})
    caps = sc.get("capabilities", {})
    if caps.get("drop") != ["ALL"]:
        problems.append(f"{c['name']}: capabilities do not drop ALL first")
    return {"argv": out, "binary": binary, "manifest_argv": argv,
            "caps": ",".join(["-all"] + ["+" + x.lower() for x in caps.get("add", [])]),
            "no_new_privs": sc.get("allowPrivilegeEscalation") is False,
            "mounts": mounts}

agent = next(c for c in pod["containers"] if c["name"] == "agent")
plan = {"agent": mapped(agent),
        "init": [mapped(c) for c in pod.get("initContainers", [])],
        "grace": pod.get("terminationGracePeriodSeconds", 30),
        "policy": next(d for d in docs if d["kind"] == "ConfigMap")["data"]}
ports = {p["name"]: p["containerPort"] for p in agent.get("ports", [])}
for probe in ("readinessProbe", "livenessProbe"):
    get = agent[probe]["httpGet"]
    port = ports.get(get["port"], get["port"])
    plan[probe] = {"path": get["path"], "port": port, "host": get.get("host", "")}
for flag in ("listen", "probe-listen"):
    listen = [a.split("=", 1)[1] for a in plan["agent"]["argv"] if a.startswith(f"--{flag}=")]
    plan[flag] = listen[0] if len(listen) == 1 else None
vpod = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "runwall-view")["spec"]["template"]["spec"]
view = next(c for c in vpod["containers"] if c["name"] == "view")
plan["view"] = mapped(view, {v["name"]: v for v in vpod["volumes"]})
plan["view"]["user"] = (vpod["securityContext"]["runAsUser"], vpod["securityContext"]["runAsGroup"])
plan["view"]["port"] = next(p["containerPort"] for p in view["ports"] if p["name"] == "http")
plan["problems"] = problems
json.dump(plan, sys.stdout)
PY
plan=$RW_WORK/plan.json
jq -r '.problems[]' "$plan" | sed 's/^/# /'
check "every path of the DaemonSet's containers lies on one of their volumes" \
	test "$(jq '.problems | length' "$plan")" = 0

mapfile -t argv < <(jq -r '.agent.argv[]' "$plan")
caps=$(jq -r .agent.caps "$plan")
nnp=()
[ "$(jq -r .agent.no_new_privs "$plan")" = true ] && nnp=(--no-new-privs)
echo "# the DaemonSet's agent: $(jq -r '.agent.manifest_argv | join(" ")' "$plan")"
echo "# run here as: setpriv --bounding-set=$caps ${nnp[*]} -- ${argv[*]}"
# The CLI on this node uses the same pins and socket.
for a in "${argv[@]}"; do
	case "$a" in
	--bpffs=*) RW_BPFFS=${a#--bpffs=} ;;
	--socket=*) RW_SOCK=${a#--socket=} ;;
	esac
done
check "the agent's --bpffs and --socket are on the bpffs and run volumes" \
	test "${RW_BPFFS:-}" = "$bpfroot/runwall" -a "${RW_SOCK:-}" = "$RW_WORK/host/run/runwall/runwall.sock"
ready_port=$(jq -r .readinessProbe.port "$plan")
probe_host=$(jq -r .readinessProbe.host "$plan")
# The kubelet probes a host-network pod from the node: 127.0.0.1 is the node's loopback.
check "the probes' host and port are those of --probe-listen ($(jq -r '."probe-listen"' "$plan"), loopback)" \
	test "$(jq -r '."probe-listen"' "$plan")" = "$probe_host:$ready_port" -a "$probe_host" = 127.0.0.1 \
	-a "$(jq -r .livenessProbe.port "$plan")" = "$ready_port" -a "$(jq -r .livenessProbe.host "$plan")" = "$probe_host"
api_listen=$(jq -r .listen "$plan")
api_port=${api_listen##*:}
check "the API listens on every address of the node (--listen $api_listen)" \
	test "${api_listen%:*}" = 0.0.0.0 -a "$api_port" != "$ready_port"

# The node: services, and one sandbox wired like the VPC CNI does, in run-7f3a of the
# ConfigMap's policy (manifests/policy-default.json).
rw_node_up
rw_sandbox_add a eni7f3a0001 10.1.2.3

start_agent() {
	rw_cmd
	nsenter "--net=/run/netns/$RW_NODE" -- setpriv --bounding-set="$caps" --inh-caps=-all "${nnp[@]}" \
		-- "${argv[@]}" >>"$RW_WORK/agent.log" 2>&1 </dev/null &
	RW_AGENT_PID=$!
	RW_PIDS+=("$RW_AGENT_PID")
}
# HTTP status of GET http://HOST:PORT/PATH from the node, like the kubelet's probe.
http_status() {
	rw_node_exec "$RW_PY" -c '
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception as e:
    print("error", e)' "http://$probe_host:$ready_port$1"
}
http_is() { [ "$(http_status "$1")" = "$2" ]; }
ready_at() { # ready_at REVISION: the kernel enforces that revision
	rw_status_json | rw_jq_true --argjson r "$1" '.ready == true and .revision == $r'
}
bound() {
	rw_status_json | rw_jq_true 'any(.sandboxes[]; .ifname == "eni7f3a0001" and .pod == "10.1.2.3" and .run == "run-7f3a")'
}
ready_and_bound() { ready_at "$1" && bound; }
probe_is() { [ "$(rw_probe a tcp "$1" "$2" --timeout 1)" = "$3" ]; }
agent_log() { sed 's/^/#   /' "$RW_WORK/agent.log"; }

# The VPC CNI's conflist as aws-node writes it (no runwall-cni entry).
vpc_conflist() {
	cat <<'EOF'
{
  "cniVersion": "0.4.0",
  "name": "aws-cni",
  "disableCheck": true,
  "plugins": [
    {"name": "aws-cni", "type": "aws-cni", "vethPrefix": "eni", "mtu": "9001",
     "podSGEnforcingMode": "strict", "pluginLogFile": "/var/log/aws-routed-eni/plugin.log",
     "pluginLogLevel": "DEBUG", "capabilities": {"io.kubernetes.cri.pod-annotations": true}},
    {"name": "egress-cni", "type": "egress-cni", "mtu": "9001", "enabled": "false",
     "randomizeSNAT": "prng", "nodeIP": "",
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "fd00::ac:00/118"}]],
              "routes": [{"dst": "::/0"}], "dataDir": "/run/cni/v4pd/egress-v6-ipam"},
     "pluginLogFile": "/var/log/aws-routed-eni/egress-v6-plugin.log", "pluginLogLevel": "DEBUG"},
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
  ]
}
EOF
}
chained() {
	rw_jq_true '[.plugins[].type] as $t | ($t | map(select(. == "runwall-cni")) | length) == 1 and $t[0] == "aws-cni"' \
		"$1"
}

# The node's CNI folder holds aws-node's conflist, as when the init container ran (below).
agent_confdir=$(jq -r '.agent.argv[] | select(startswith("--cni-conf-dir=")) | ltrimstr("--cni-conf-dir=")' "$plan")
check "the agent watches the CNI conf folder of the init container's volume" \
	test "$agent_confdir" = "$RW_WORK/host/etc/cni/net.d"
mkdir -p "$agent_confdir"
vpc_conflist >"$agent_confdir/10-aws.conflist"
start_agent
if rw_wait 10 http_is "$(jq -r .livenessProbe.path "$plan")" 200; then
	ok "liveness: GET $(jq -r .livenessProbe.path "$plan") on port $ready_port answers 200"
else
	not_ok "liveness: GET $(jq -r .livenessProbe.path "$plan") on port $ready_port: $(http_status "$(jq -r .livenessProbe.path "$plan")")"
	agent_log
fi
remote_probe_fails() { ! rw_node_exec curl -s -o /dev/null --max-time 2 "http://$RW_NODE_LINK:$ready_port/healthz"; }
check "the probes' port answers on loopback only (GET http://$RW_NODE_LINK:$ready_port/healthz fails)" \
	remote_probe_fails
readyz=$(jq -r .readinessProbe.path "$plan")
check "readiness: GET $readyz answers 200 once the ConfigMap's revision 1 is enforced" \
	rw_wait 10 http_is "$readyz" 200
check "the kernel enforces revision 1 and the sandbox veth is bound to run-7f3a" \
	rw_wait 10 ready_and_bound 1
check "the sandbox reaches the egress proxy 172.20.0.10:443" rw_wait 5 probe_is 172.20.0.10 443 ok
check "the sandbox is refused the metadata address (answered with a reset)" probe_is 169.254.169.254 80 refused

# The containers' sources (docs/principals.md): the cgroup v2 tree of the node through
# --cgroup-root (the host's /sys/fs/cgroup: cgroup2 itself on a unified host, its unified/ on a
# hybrid one), and containerd's bundle folder at its own path (this machine runs no
# containerd: not there, looked for).
cg2=/sys/fs/cgroup
[ "$(stat -f -c %T $cg2)" = cgroup2fs ] || cg2=/sys/fs/cgroup/unified
containers_json=$(rw_status_json | jq -c '.containers | {dir, cgroup_root, watching}')
check "the agent reads cgroup ids under --cgroup-root, the node's cgroup v2 tree: $containers_json" \
	jq -e --arg d "$(sed -n 's/^#define RW_CONTAINERS_DIR *"\(.*\)"$/\1/p' user/agent/containers.h)" \
	--arg r "$cg2" '.cgroup_root == $r and .dir == $d' <<<"$containers_json"

agent_chained() { rw_status_json | rw_jq_true '.agent.cni.chained == true and .agent.cni.file == "10-aws.conflist"'; }
check "the agent chains runwall-cni into aws-node's conflist" rw_wait 5 agent_chained
vpc_conflist >"$agent_confdir/.10-aws.conflist.new" && mv "$agent_confdir/.10-aws.conflist.new" "$agent_confdir/10-aws.conflist"
repaired() { chained "$agent_confdir/10-aws.conflist" && rw_status_json | rw_jq_true '.agent.cni.repairs >= 2'; }
check "aws-node's rewrite of its conflist: the entry is back within a second" rw_wait 1 repaired

# A ConfigMap update, as the kubelet writes it: a new timestamped folder, then ..data swapped.
policy_dir=$(dirname "$(jq -r '.agent.argv[] | select(startswith("--policy=")) | ltrimstr("--policy=")' "$plan")")
stamp="..2026_01_01_00_01_00.0"
mkdir "$policy_dir/$stamp"
jq '.revision = 2' "$policy_dir/..data/policy.json" >"$policy_dir/$stamp/policy.json"
ln -s "$stamp" "$policy_dir/..data_tmp"
mv -T "$policy_dir/..data_tmp" "$policy_dir/..data"
check "a ConfigMap update is applied over the live snapshot (revision 2)" rw_wait 10 ready_at 2

# The kubelet stops the pod: SIGTERM, then SIGKILL after the grace period.
grace=$(jq -r .grace "$plan")
kill -TERM "$RW_AGENT_PID" 2>/dev/null || true
end=$((SECONDS + grace))
while kill -0 "$RW_AGENT_PID" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
if kill -0 "$RW_AGENT_PID" 2>/dev/null; then
	not_ok "SIGTERM: the agent exits within terminationGracePeriodSeconds ($grace s)"
	kill -KILL "$RW_AGENT_PID" 2>/dev/null || true
	wait "$RW_AGENT_PID" || true
else
	rc=0
	wait "$RW_AGENT_PID" || rc=$?
	check "SIGTERM: the agent exits within terminationGracePeriodSeconds ($grace s), status $rc" test "$rc" = 0
fi
RW_AGENT_PID=
check "with the pod gone the kernel still enforces revision 2" ready_at 2
check "with the pod gone the sandbox still reaches the proxy" probe_is 172.20.0.10 443 ok
check "with the pod gone the sandbox is still refused the metadata address (the pinned programs answer)" probe_is 169.254.169.254 80 refused

# The rolling update's next pod: same command, adopts the pins.
start_agent
check "the next pod is ready again (GET $readyz 200)" rw_wait 10 http_is "$readyz" 200
check "it adopted revision 2 and the sandbox binding" rw_wait 10 ready_and_bound 2
grep -q "adopting" "$RW_WORK/agent.log" && ok "its log says it adopted the pins" || { not_ok "its log says it adopted the pins"; agent_log; }

# The view Deployment: its exact command, as its user, no capability. Its --agents-dns name is
# given the agent's address by a hosts file over /etc/hosts in its own mount namespace.
mapfile -t vargv < <(jq -r '.view.argv[]' "$plan")
echo "# the view: $(jq -r '.view.manifest_argv | join(" ")' "$plan")"
dns=$(jq -r '.view.argv[] | select(startswith("--agents-dns=")) | ltrimstr("--agents-dns=")' "$plan")
check "the view follows the agents by DNS (--agents-dns NAME:PORT, the agents' port $api_port)" \
	test -n "$dns" -a "${dns##*:}" = "$api_port"
printf '127.0.0.1 localhost\n%s %s\n' "$RW_NODE_LINK" "${dns%:*}" >"$RW_WORK/hosts"
chmod 0755 "$RW_WORK" # the view's user reads its token files below it, as the kubelet's fsGroup allows
vuid=$(jq -r '.view.user[0]' "$plan")
vgid=$(jq -r '.view.user[1]' "$plan")
vport=$(jq -r .view.port "$plan")
# shellcheck disable=SC2016 # expanded by the inner shell
rw_bg "$RW_WORK/view.log" unshare --mount --propagation private -- \
	sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$RW_WORK/hosts" \
	nsenter "--net=/run/netns/$RW_NODE" -- setpriv --reuid="$vuid" --regid="$vgid" --clear-groups \
	--bounding-set=-all --inh-caps=-all --no-new-privs -- "${vargv[@]}"
view_token=$(cat "$(jq -r '.view.argv[] | select(startswith("--http-token-file=")) | ltrimstr("--http-token-file=")' "$plan")")
view_get() { # view_get PATH: the view's answer, with its own token
	rw_node_exec curl -s --max-time 5 -H "Authorization: Bearer $view_token" "http://127.0.0.1:$vport$1"
}
view_connected() {
	view_get /api/status | rw_jq_true '(.agents | length) == 1 and .agents[0].connected and .agents[0].url == "http://'"$RW_NODE_LINK:$api_port"'" and .dns[0].addresses == 1'
}
if rw_wait 10 view_connected; then
	ok "the view resolved ${dns%:*} and follows the agent with the agents' token (port $vport)"
else
	not_ok "the view follows the agent"; view_get /api/status | sed 's/^/#   /'; sed 's/^/#   /' "$RW_WORK/view.log"
fi
probe_is 169.254.169.254 80 timeout || true
view_has_refusal() {
	view_get /api/events | rw_jq_true 'any(.events[]; .run == "run-7f3a" and .reason == "metadata")'
}
check "a refusal on the node shows in the view's /api/events" rw_wait 10 view_has_refusal
check "the view requires its own token off loopback (401 without)" \
	test "$(rw_node_exec curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$RW_NODE_LINK:$vport/api/events")" = 401
rw_agent_kill TERM

# The CNI install init container, with no capability, on a copy of the VPC CNI's conflist.
ninit=$(jq '.init | length' "$plan")
check "the DaemonSet has the CNI install init container" test "$ninit" = 1
for ((i = 0; i < ninit; i++)); do
	mapfile -t iargv < <(jq -r ".init[$i].argv[]" "$plan")
	icaps=$(jq -r ".init[$i].caps" "$plan")
	confdir=$(jq -r ".init[$i].argv[] | select(startswith(\"$RW_WORK/host/etc/cni\"))" "$plan")
	bindir=$(jq -r ".init[$i].argv[] | select(startswith(\"$RW_WORK/host/opt/cni\"))" "$plan")
	echo "# the init container: $(jq -r ".init[$i].manifest_argv | join(\" \")" "$plan")"
	if [ ! -x "${iargv[0]}" ]; then
		not_ok "${iargv[0]} is missing: the DaemonSet's init container runs it (make builds it once the CNI plugin lands)"
		continue
	fi
	vpc_conflist >"$confdir/10-aws.conflist"
	for run in 1 2; do
		if out=$(setpriv --bounding-set="$icaps" --inh-caps=-all --no-new-privs -- "${iargv[@]}" 2>&1); then
			ok "init container run $run: $(jq -r ".init[$i].manifest_argv | join(\" \")" "$plan")"
		else
			not_ok "init container run $run exits 0"; echo "$out" | sed 's/^/#   /'
		fi
	done
	check "runwall-cni is in the CNI bin folder" test -x "$bindir/runwall-cni"
	check "the conflist chains runwall-cni once, after the VPC CNI's plugins" chained "$confdir/10-aws.conflist"
done

rw_suite_end
