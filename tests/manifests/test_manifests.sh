#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# The manifests as a cluster would take them, offline:
# - yamllint on manifests/ and on the rendered output;
# - `kubectl kustomize manifests/` renders;
# - every rendered object validates against the Kubernetes 1.33 schemas (validate.js, with
#   kubernetes-models from npm: scripts/setup.sh runs `npm ci` here), and the validator really
#   refuses broken objects: each kind of mistake below must be caught, by name;
# - every container uses the image `runwall` and nothing else, so that the `images:` of the
#   overlay `make image` writes (build/image/kustomization.yaml) sets all of them;
# - the DaemonSet's agent command and arguments are the Containerfile's ENTRYPOINT and CMD;
# - the monitoring component (manifests/monitoring, rendered through tests/manifests/monitoring):
#   its objects validate, the PodMonitor and PrometheusRule against the Prometheus Operator's
#   CRDs (@kubernetes-models/prometheus-operator); they and the dashboard pass
#   check_monitoring.py; both refuse broken copies by name; `promtool check rules` and
#   `promtool test rules` (tests/monitoring/rules_test.yml: each alert fires on its series, not
#   on a near miss).
# The agent itself, started with exactly the DaemonSet's command: tests/netns/test_manifest.sh.
#
#   tests/manifests/test_manifests.sh [BUILD]
set -euo pipefail

cd "$(dirname "$0")/../.."
here=tests/manifests
work=$(mktemp -d /tmp/rwtest-manifests.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
# refused WHAT EXPECT COMMAND...: COMMAND must fail, saying EXPECT.
refused() {
	local what=$1 expect=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		not_ok "$what (it accepted it)"
	elif grep -qF -- "$expect" <<<"$out"; then
		ok "$what ($(grep -F -- "$expect" <<<"$out" | head -n 1))"
	else
		not_ok "$what, with '$expect'"; echo "$out" | sed 's/^/# /'
	fi
}
# passes WHAT COMMAND...: ok when COMMAND succeeds, else not ok and its output.
passes() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$what"; else not_ok "$what"; echo "$out" | sed 's/^/# /'; fi
}
# py_check PASS FAIL ARG... <<'PY' (a script): ok PASS, followed by what the script printed, when
# it exits 0; else not ok FAIL and what it printed.
py_check() {
	local pass=$1 fail=$2 out
	shift 2
	if out=$(python3 - "$@"); then ok "$pass${out:+ $out}"; else not_ok "$fail"; echo "$out" | sed 's/^/# /'; fi
}
# render DIR OUT WHAT: `kubectl kustomize DIR` into OUT, else the suite ends there.
render() {
	if kubectl kustomize "$1" >"$2" 2>"$work/kustomize.err"; then
		ok "$3 ($(grep -c '^kind:' "$2") objects)"
	else
		not_ok "kubectl kustomize $1"; sed 's/^/# /' "$work/kustomize.err"
		echo "1..$n"; exit 1
	fi
}

for tool in kubectl yamllint node python3; do
	command -v "$tool" >/dev/null || { echo "Bail out! $tool is missing: run scripts/setup.sh"; exit 1; }
done
[ -d "$here/node_modules/kubernetes-models" ] ||
	{ echo "Bail out! $here/node_modules is missing: scripts/setup.sh runs npm ci there"; exit 1; }

passes "yamllint manifests/" yamllint -c "$here/yamllint.yaml" manifests/
render manifests/ "$work/rendered.yaml" "kubectl kustomize manifests/ renders"
passes "yamllint on the rendered manifests" yamllint -c "$here/yamllint.yaml" "$work/rendered.yaml"

if out=$(node "$here/validate.js" "$work/rendered.yaml" manifests/ops/*.yaml 2>&1); then
	ok "every rendered object, and manifests/ops/, validates: $(echo $out | sed "s|$work/||")"
else
	not_ok "rendered objects and manifests/ops/ validate"; echo "$out" | sed 's/^/# /'
fi

# The rendered objects as JSON, for the checks below (python3-yaml comes with yamllint).
python3 -c 'import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], sys.stdout)' \
	"$work/rendered.yaml" >"$work/rendered.json"

# Broken copies of the rendered objects: NAME, what the validator must say, a python statement
# on `docs` (the list of objects); `ds` is the DaemonSet, `agent` its container.
broken=(
	"unknown field in a container|.spec.template.spec.containers[0].imagePullPolcy: unknown field|agent['imagePullPolcy'] = 'Always'"
	"unknown top-level field|.sepc: unknown field|ds['sepc'] = ds['spec']"
	"unknown field in a probe|.readinessProbe.httpGet.paht: unknown field|agent['readinessProbe']['httpGet']['paht'] = '/readyz'"
	"wrong type|.spec.template.spec.hostNetwork: must be boolean|ds['spec']['template']['spec']['hostNetwork'] = 'yes'"
	"port as text|.containerPort: must be integer|agent['ports'][0]['containerPort'] = 'http'"
	"missing required field|must have required property 'name'|del agent['name']"
	"unknown kind|no Kubernetes 1.33 schema for apiVersion \"v1\" kind \"Nonsense\"|docs.append({'apiVersion': 'v1', 'kind': 'Nonsense', 'metadata': {'name': 'x'}})"
	"volumeMount without a volume|volumeMounts: \"bpffs\" is not a volume of the pod|ds['spec']['template']['spec']['volumes'] = [v for v in ds['spec']['template']['spec']['volumes'] if v['name'] != 'bpffs']"
	"selector that misses the template|does not match the template's labels|ds['spec']['selector']['matchLabels']['app.kubernetes.io/name'] = 'other'"
	"probe on an unknown port|readinessProbe: port \"htpp\" is not a named port|agent['readinessProbe']['httpGet']['port'] = 'htpp'"
)
printf '%s\n' "${broken[@]}" >"$work/broken.list"
python3 - "$work/rendered.json" "$work/broken.list" "$work" <<'PY'
import json, sys, yaml
for i, line in enumerate(open(sys.argv[2]).read().splitlines()):
    docs = json.load(open(sys.argv[1]))
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
    exec(line.split("|", 2)[2])
    yaml.safe_dump_all(docs, open(f"{sys.argv[3]}/broken-{i}.yaml", "w"))
PY
# refused_by_validator PREFIX CASE...: one run of the validator over $work/PREFIX-N.yaml, the
# broken copy of each CASE (NAME|what the validator must say|...), in order (node starts slowly);
# each must be refused by name.
refused_by_validator() {
	local prefix=$1 i=0 b what expect out
	shift
	node "$here/validate.js" "$work/$prefix"-*.yaml >"$work/$prefix.out" 2>&1 || true
	for b in "$@"; do
		IFS='|' read -r what expect _ <<<"$b"
		out=$(grep -F "$work/$prefix-$i.yaml: " "$work/$prefix.out" || true)
		i=$((i + 1))
		if grep -q "objects valid" <<<"$out"; then
			not_ok "the validator refuses: $what (it accepted it)"
		elif grep -qF -- "$expect" <<<"$out"; then
			ok "the validator refuses: $what ($(grep -F -- "$expect" <<<"$out" | head -n 1 | sed "s|^$work/||"))"
		else
			not_ok "the validator refuses $what with '$expect'"; echo "$out" | sed 's/^/# /'
		fi
	done
}
refused_by_validator broken "${broken[@]}"

# Every container's image is `runwall`, untagged: the overlay's `images:` names it.
py_check "every container's image is 'runwall' (make image's overlay sets it)" \
	"every container's image is 'runwall'" "$work/rendered.json" <<'PY'
import json, sys
bad = []
for d in json.load(open(sys.argv[1])):
    pod = d.get("spec", {}).get("template", {}).get("spec", {})
    for c in pod.get("initContainers", []) + pod.get("containers", []):
        if c.get("image") != "runwall":
            bad.append(f'{d["kind"]}/{d["metadata"]["name"]} {c["name"]}: image "{c.get("image")}"')
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

# The DaemonSet's agent runs the image's own ENTRYPOINT and CMD.
py_check "the DaemonSet's command and args are the Containerfile's ENTRYPOINT and CMD:" \
	"the DaemonSet's command and args are the Containerfile's ENTRYPOINT and CMD" \
	"$work/rendered.json" Containerfile <<'PY'
import json, re, sys
ds = next(d for d in json.load(open(sys.argv[1])) if d["kind"] == "DaemonSet")
agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
text = open(sys.argv[2]).read()
def instr(name):
    found = re.findall(rf"^{name}\s+(\[.*\])\s*$", text, re.M)
    if len(found) != 1:
        sys.exit(f"Containerfile: expected one {name} in JSON form, found {len(found)}")
    return json.loads(found[0])
want = (instr("ENTRYPOINT"), instr("CMD"))
got = (agent.get("command"), agent.get("args"))
if got != want:
    sys.exit(f"DaemonSet agent command {got[0]} args {got[1]}\nContainerfile ENTRYPOINT {want[0]} CMD {want[1]}")
print(" ".join(want[0] + want[1]))
PY

# The agent reads the sandbox pods' containers (docs/principals.md, "What the agent needs on the
# node"): the bundle folder (containers.h's RW_CONTAINERS_DIR, or --containers) and the netns
# folder are the host's, at the same paths, read only, with the host's unmounts propagated;
# --cgroup-root is a read-only mount of the host's /sys/fs/cgroup. contained_check FILE checks
# the DaemonSet in FILE (rendered JSON); broken copies of it must each be refused by name.
bundles=$(sed -n 's/^#define RW_CONTAINERS_DIR *"\(.*\)"$/\1/p' user/agent/containers.h)
contained_check() {
	python3 - "$1" "$bundles" <<'PY'
import json, sys
ds = next(d for d in json.load(open(sys.argv[1])) if d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
agent = next(c for c in pod["containers"] if c["name"] == "agent")
vols = {v["name"]: v for v in pod["volumes"]}
def opt(k, default=None):
    vals = [a.split("=", 1)[1] for a in agent.get("args", []) if a.startswith(k + "=")]
    return vals[-1] if vals else default
def mount(path):
    return next((m for m in agent.get("volumeMounts", []) if m["mountPath"] == path), None)
bad = []
for what, path, host in (("the bundle folder", opt("--containers", sys.argv[2]), sys.argv[2]),
                         ("the netns folder", "/var/run/netns", "/var/run/netns"),
                         ("--cgroup-root", opt("--cgroup-root"), "/sys/fs/cgroup")):
    m = mount(path) if path else None
    if not m:
        bad.append(f"{what} ({path}): not a mount of the agent")
        continue
    hp = vols.get(m["name"], {}).get("hostPath", {}).get("path")
    if hp != host:
        bad.append(f"{what} ({path}): volume {m['name']} is hostPath {hp}, not {host}")
    if not m.get("readOnly"):
        bad.append(f"{what} ({path}): not readOnly")
    if host != "/sys/fs/cgroup" and m.get("mountPropagation") != "HostToContainer":
        bad.append(f"{what} ({path}): mountPropagation {m.get('mountPropagation')}, not HostToContainer")
print("\n".join(bad) if bad else f"bundles {opt('--containers', sys.argv[2])}, /var/run/netns, --cgroup-root {opt('--cgroup-root')}")
sys.exit(1 if bad else 0)
PY
}
if out=$(contained_check "$work/rendered.json"); then
	ok "the agent reads the host's containers: $out"
else
	not_ok "the agent reads the host's containers"; echo "$out" | sed 's/^/# /'
fi
contained_broken=(
	"no --cgroup-root|--cgroup-root (None): not a mount|agent['args'] = [a for a in agent['args'] if not a.startswith('--cgroup-root')]"
	"netns without propagation|/var/run/netns): mountPropagation None|next(m for m in agent['volumeMounts'] if m['mountPath'] == '/var/run/netns').pop('mountPropagation')"
	"bundles writable|k8s.io): not readOnly|next(m for m in agent['volumeMounts'] if m['mountPath'].endswith('/k8s.io'))['readOnly'] = False"
	"cgroup from elsewhere|is hostPath /sys/fs/cgroup/kubepods.slice, not /sys/fs/cgroup|next(v for v in ds['spec']['template']['spec']['volumes'] if v['name'] == 'cgroup')['hostPath']['path'] = '/sys/fs/cgroup/kubepods.slice'"
)
i=0
for b in "${contained_broken[@]}"; do
	IFS='|' read -r what expect stmt <<<"$b"
	python3 - "$work/rendered.json" "$work/contained-$i.json" "$stmt" <<'PY'
import json, sys
docs = json.load(open(sys.argv[1]))
ds = next(d for d in docs if d["kind"] == "DaemonSet")
agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
exec(sys.argv[3])
json.dump(docs, open(sys.argv[2], "w"))
PY
	refused "the containers check refuses: $what" "$expect" contained_check "$work/contained-$i.json"
	i=$((i + 1))
done

# The one-shot detach pod (manifests/ops/detach.yaml) works on what the DaemonSet set up: the same
# pins, socket, CNI folders and capabilities.
py_check "manifests/ops/detach.yaml uses the DaemonSet's pins, socket, CNI folders, volumes and capabilities" \
	"manifests/ops/detach.yaml agrees with the DaemonSet" "$work/rendered.json" manifests/ops/detach.yaml <<'PY'
import json, sys, yaml
ds = next(d for d in json.load(open(sys.argv[1])) if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
pod = yaml.safe_load(open(sys.argv[2]))["spec"]
def c(spec, name):
    return next(x for x in spec.get("initContainers", []) + spec["containers"] if x["name"] == name)
def opts(argv, keys):
    out = {}
    for i, a in enumerate(argv):
        for k in keys:
            if a.startswith(k + "="):
                out[k] = a.split("=", 1)[1]
            elif a == k:
                out[k] = argv[i + 1]
    return out
def argv(x):
    return x.get("command", []) + x.get("args", [])
bad = []
agent, detach = c(ds, "agent"), c(pod, "detach")
if opts(argv(agent), ["--bpffs", "--socket"]) != opts(argv(detach), ["--bpffs", "--socket"]):
    bad.append(f"--bpffs/--socket: agent {argv(agent)} detach {argv(detach)}")
if agent["securityContext"]["capabilities"] != detach["securityContext"]["capabilities"]:
    bad.append("detach's capabilities are not the agent's")
install, uninstall = c(ds, "install-cni"), c(pod, "uninstall-cni")
if opts(argv(install), ["--bin-dir", "--conf-dir"]) != opts(argv(uninstall), ["--bin-dir", "--conf-dir"]):
    bad.append(f"CNI folders: install {argv(install)} uninstall {argv(uninstall)}")
vols = lambda spec: {v["name"]: v for v in spec["volumes"]}
for x, y in ((agent, detach), (install, uninstall)):
    for m in y["volumeMounts"]:
        same = [n for n in x["volumeMounts"] if n["mountPath"] == m["mountPath"]]
        if not same or vols(ds)[same[0]["name"]] != vols(pod)[m["name"]]:
            bad.append(f'{y["name"]}: {m["mountPath"]} is not the DaemonSet\'s volume')
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY

# The view follows every agent: its --agents-dns NAME:PORT is a headless Service of the same
# namespace over exactly the DaemonSet's pods, on the agents' HTTP port, and it sends the token
# the agents require (the same Secret, mounted where --token-file reads it).
py_check "the view follows every agent: --agents-dns" "the view follows every agent by DNS" \
	"$work/rendered.json" <<'PY'
import json, sys
docs = json.load(open(sys.argv[1]))
get = lambda kind, name: next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
ds = next(d for d in docs if d["kind"] == "DaemonSet")
pod = get("Deployment", "runwall-view")["spec"]["template"]["spec"]
view = next(c for c in pod["containers"] if c["name"] == "view")
agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
def opt(c, k):
    vals = [a.split("=", 1)[1] for a in c.get("args", []) if a.startswith(k + "=")]
    return vals[0] if len(vals) == 1 else None
bad = []
dns = opt(view, "--agents-dns")
if not dns or any(a.startswith("--agent=") for a in view["args"]):
    sys.exit(f"the view's args {view['args']}: expected one --agents-dns=NAME:PORT and no --agent")
name, port = dns.rsplit(":", 1)
svc_name, ns = name.split(".")[:2]
svc = get("Service", svc_name)
if svc["metadata"]["namespace"] != ns or not name.endswith(f"{svc_name}.{ns}.svc.cluster.local"):
    bad.append(f"--agents-dns {name} is not Service {svc_name} in {svc['metadata']['namespace']}")
if svc["spec"].get("clusterIP") != "None":
    bad.append(f"Service {svc_name} is not headless (clusterIP: None): its name would give one address")
labels = ds["spec"]["template"]["metadata"]["labels"]
sel = svc["spec"]["selector"]
if any(labels.get(k) != v for k, v in sel.items()):
    bad.append(f"Service {svc_name} selector {sel} misses the DaemonSet's pods {labels}")
if any(all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())
       for d in docs if d["kind"] == "Deployment"):
    bad.append(f"Service {svc_name} selector {sel} also selects a Deployment's pods")
sp = next((p for p in svc["spec"]["ports"] if str(p["port"]) == port), None)
cp = {p["name"]: p["containerPort"] for p in agent["ports"]}
listen = opt(agent, "--listen") or ""
if not sp or cp.get(sp["targetPort"], sp["targetPort"]) != int(port) or listen.rsplit(":", 1)[-1] != port:
    bad.append(f"port {port}: Service {sp}, agent ports {cp}, agent --listen {listen}")
secret_of = lambda spec, c, path: next((v["secret"]["secretName"] for m in c["volumeMounts"]
                                        for v in spec["volumes"] if v["name"] == m["name"] and "secret" in v
                                        and path.startswith(m["mountPath"] + "/")), None)
want = secret_of(ds["spec"]["template"]["spec"], agent, opt(agent, "--http-token-file") or "")
got = secret_of(pod, view, opt(view, "--token-file") or "")
if not want or want != got:
    bad.append(f"the view's --token-file is in Secret {got}, the agents' --http-token-file in {want}")
print("\n".join(bad) if bad else f"{dns} (headless, the DaemonSet's pods, port {port}, token {want})")
sys.exit(1 if bad else 0)
PY

# ---- the monitoring component (manifests/monitoring), as tests/manifests/monitoring adds it ------
render "$here/monitoring" "$work/monitoring.yaml" \
	"kubectl kustomize renders manifests/ with the monitoring component"
# yamllint manifests/ (above) covers the component's sources; the render holds the dashboard's
# JSON as one block, whose lines are Grafana's.
passes "yamllint $here/monitoring" yamllint -c "$here/yamllint.yaml" "$here/monitoring"
mkdir "$work/unit"
python3 - "$work/monitoring.yaml" "$work" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
json.dump(docs, open(f"{sys.argv[2]}/monitoring.json", "w"))
rules = next(d for d in docs if d["kind"] == "PrometheusRule")
yaml.safe_dump(rules["spec"], open(f"{sys.argv[2]}/rules.yml", "w"), sort_keys=False)
# For promtool's unit tests, without the annotations (it would compare them whole, templates
# expanded: the docs' check and check_monitoring.py check them).
for g in rules["spec"]["groups"]:
    for r in g["rules"]:
        r.pop("annotations", None)
yaml.safe_dump(rules["spec"], open(f"{sys.argv[2]}/unit/rules.yml", "w"), sort_keys=False)
PY
if out=$(node "$here/validate.js" "$work/monitoring.yaml" 2>&1); then
	ok "every object validates, the PodMonitor and PrometheusRule against the Prometheus Operator's CRDs: $(echo $out | sed "s|$work/||")"
else
	not_ok "the monitoring component's objects validate"; echo "$out" | sed 's/^/# /'
fi
# The operator's schemas refuse broken copies, each by name (as the API server with the CRDs).
crd_broken=(
	"unknown field in the PodMonitor|.spec.podMetricsEndpoints[0].bearerTokenFle: unknown field|pm['spec']['podMetricsEndpoints'][0]['bearerTokenFle'] = 'x'"
	"unknown field in a rule|.spec.groups[0].rules[0].fr: unknown field|rules[0]['fr'] = '2m'"
	"a rule's for as a number|.spec.groups[0].rules[0].for: must be string|rules[0]['for'] = 5"
)
# monitoring_broken PREFIX CASE...: for each CASE (NAME|what must be said|a python statement),
# the rendered monitoring component changed by the statement, as $work/PREFIX-N.yaml and .json;
# in the statement `pm` is the PodMonitor, `rules` the PrometheusRule's rules, `dash` the
# dashboard (written back into its ConfigMap).
monitoring_broken() {
	local prefix=$1
	shift
	printf '%s\n' "$@" >"$work/$prefix.list"
	python3 - "$work/monitoring.json" "$work/$prefix.list" "$work/$prefix" <<'PY'
import json, sys, yaml
for i, line in enumerate(open(sys.argv[2]).read().splitlines()):
    docs = json.load(open(sys.argv[1]))
    pm = next(d for d in docs if d["kind"] == "PodMonitor")
    rules = next(d for d in docs if d["kind"] == "PrometheusRule")["spec"]["groups"][0]["rules"]
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "runwall-dashboard")
    key = next(iter(cm["data"]))
    dash = json.loads(cm["data"][key])
    exec(line.split("|", 2)[2])
    cm["data"][key] = json.dumps(dash, indent=2)
    json.dump(docs, open(f"{sys.argv[3]}-{i}.json", "w"))
    yaml.safe_dump_all(docs, open(f"{sys.argv[3]}-{i}.yaml", "w"))
PY
}
monitoring_broken crd-broken "${crd_broken[@]}"
refused_by_validator crd-broken "${crd_broken[@]}"
if out=$(python3 "$here/check_monitoring.py" "$work/monitoring.json" user/view/metrics.c 2>&1); then
	ok "the PodMonitor, the PrometheusRule and the dashboard are well formed and name only series the agent exports: $out"
else
	not_ok "the monitoring objects' structure"; echo "$out" | sed 's/^/# /'
fi
command -v promtool >/dev/null || { echo "Bail out! promtool is missing: run scripts/setup.sh"; exit 1; }
if out=$(promtool check rules "$work/rules.yml" 2>&1); then
	ok "promtool check rules: $(echo "$out" | grep -o '[0-9]* rules found')"
else
	not_ok "promtool check rules"; echo "$out" | sed 's/^/# /'
fi
# The unit tests read the rules from beside them: the rendered rule file is there.
cp tests/monitoring/rules_test.yml "$work/unit/"
if out=$(cd "$work/unit" && promtool test rules rules_test.yml 2>&1); then
	ok "promtool test rules: every case passes ($(grep -c 'alertname:' tests/monitoring/rules_test.yml) cases)"
else
	not_ok "promtool test rules"; echo "$out" | sed 's/^/# /'
fi
# Every alert of the rule file has a case that fires it and one that must not.
py_check "every alert has a firing case and a near miss:" "every alert has a firing case and a near miss" \
	"$work/rules.yml" tests/monitoring/rules_test.yml <<'PY'
import sys, yaml
alerts = {r["alert"] for g in yaml.safe_load(open(sys.argv[1]))["groups"] for r in g["rules"]}
fired, quiet = set(), set()
for t in yaml.safe_load(open(sys.argv[2]))["tests"]:
    for c in t.get("alert_rule_test", []):
        (fired if c.get("exp_alerts") else quiet).add(c["alertname"])
bad = [f"{a}: no firing case" for a in sorted(alerts - fired)] + \
      [f"{a}: no near miss (a case that expects no alert)" for a in sorted(alerts - quiet)]
print("\n".join(bad) if bad else f"{len(alerts)} alerts")
sys.exit(1 if bad else 0)
PY
# check_monitoring.py refuses broken objects, each by name (monitoring_broken's cases).
mbroken=(
	"a scrape without the token|no authorization|del pm['spec']['podMetricsEndpoints'][0]['authorization']"
	"the token from another Secret|but the agents' --http-token-file is Secret runwall-http-token|pm['spec']['podMetricsEndpoints'][0]['authorization']['credentials']['name'] = 'other'"
	"a selector that misses the agents|does not match the DaemonSet's pods|pm['spec']['selector']['matchLabels']['app.kubernetes.io/component'] = 'view'"
	"an alert without its first action|RunwallLeaseExpired: no 'action'|del rules[-1]['annotations']['action']"
	"an alert on a series the agent does not export|runwall_lease_expird is not a series the agent exports|rules[-1]['expr'] = 'runwall_lease_expird == 1'"
	"a panel on a series the agent does not export|runwall_drops_total: not a series the agent exports|dash['panels'][0]['targets'][0]['expr'] = 'rate(runwall_drops_total[5m])'"
	"panels with the same id|missing or not unique|dash['panels'][1]['id'] = dash['panels'][0]['id']"
)
monitoring_broken mbroken "${mbroken[@]}"
i=0
for b in "${mbroken[@]}"; do
	IFS='|' read -r what expect _ <<<"$b"
	refused "the monitoring check refuses: $what" "$expect" \
		python3 "$here/check_monitoring.py" "$work/mbroken-$i.json" user/view/metrics.c
	i=$((i + 1))
done

echo "1..$n"
[ "$failed" -eq 0 ]
