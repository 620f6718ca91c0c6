#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""check_monitoring.py: what the schemas do not say of the monitoring component's objects
(manifests/monitoring): how they fit the agents, and the dashboard's JSON (Grafana's).

  check_monitoring.py RENDERED.json METRICS.c   exit 0: all good; 1: one line per error

- PodMonitor and PrometheusRule (their schemas: validate.js, with the Prometheus Operator's): the
  PodMonitor selects the DaemonSet's pods, scrapes a named port of the agent, with the token from
  the Secret the agents' --http-token-file is mounted from, and sets `node` and `job`;
- every rule has an alert name, an expression and the annotations summary, description and
  action (docs/operations.md's table is made of them);
- the dashboard ConfigMap carries grafana_dashboard "1" and one JSON file: a dashboard with a
  uid, a title, panels with unique ids, a known type, a gridPos and targets with an expression;
- every runwall_* series a rule or a panel names is one the agent exports (METRICS.c).
"""
import json
import re
import sys

errors = []


def err(where, text):
    errors.append(f"{where}: {text}")


PANEL_TYPES = {"timeseries", "stat", "table", "gauge", "bargauge", "text", "row", "heatmap"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def fields(where, obj, required=()):
    """obj is an object with the fields required (the schemas, validate.js, check the rest)."""
    if not isinstance(obj, dict):
        err(where, f"must be an object, not {type(obj).__name__}")
        return False
    for k in required:
        if k not in obj:
            err(where, f"missing required field '{k}'")
    return True


def exported(path):
    names = set(re.findall(r'"(runwall_[a-z0-9_]+)', open(path).read()))
    return names


def series_of(expr):
    return set(re.findall(r"\b(runwall_[a-z0-9_]+)", expr))


def check_pod_monitor(pm, ds, where):
    fields(where, pm, ("metadata", "spec"))
    fields(f"{where}.metadata", pm.get("metadata", {}), ("name",))
    spec = pm.get("spec", {})
    if not fields(f"{where}.spec", spec, ("selector", "podMetricsEndpoints")):
        return
    tmpl = ds["spec"]["template"]
    labels = tmpl["metadata"].get("labels", {})
    sel = spec.get("selector", {})
    for k, v in sel.get("matchLabels", {}).items():
        if labels.get(k) != v:
            err(f"{where}.spec.selector", f"{k}={v} does not match the DaemonSet's pods ({labels})")
    if not sel.get("matchLabels"):
        err(f"{where}.spec.selector", "selects every pod of the namespace")
    pod = tmpl["spec"]
    agent = next(c for c in pod["containers"] if c["name"] == "agent")
    ports = {p.get("name") for p in agent.get("ports", [])}
    token = next((a.split("=", 1)[1] for a in agent.get("args", [])
                  if a.startswith("--http-token-file=")), None)
    secret = None
    for m in agent.get("volumeMounts", []):
        if token and token.startswith(m["mountPath"] + "/"):
            vol = next((v for v in pod["volumes"] if v["name"] == m["name"]), {})
            secret = (vol.get("secret", {}).get("secretName"), token[len(m["mountPath"]) + 1:])
    eps = spec.get("podMetricsEndpoints", [])
    if not eps:
        err(f"{where}.spec.podMetricsEndpoints", "empty")
    for i, ep in enumerate(eps):
        w = f"{where}.spec.podMetricsEndpoints[{i}]"
        if not fields(w, ep):
            continue
        if ep.get("port") not in ports:
            err(f"{w}.port", f"\"{ep.get('port')}\" is not a named port of the agent ({sorted(ports)})")
        if ep.get("path", "/metrics") != "/metrics":
            err(f"{w}.path", f"{ep['path']}: the agent serves /metrics")
        for d in ("interval", "scrapeTimeout"):
            if d in ep and not DURATION.match(str(ep[d])):
                err(f"{w}.{d}", f"{ep[d]!r} is not a duration")
        auth = ep.get("authorization")
        if not auth:
            err(w, "no authorization: the agents' /metrics requires the token")
        elif fields(f"{w}.authorization", auth, ("credentials",)):
            cred = auth["credentials"]
            fields(f"{w}.authorization.credentials", cred, ("name", "key"))
            if secret and (cred.get("name"), cred.get("key")) != secret:
                err(f"{w}.authorization.credentials",
                    f"Secret {cred.get('name')} key {cred.get('key')}, but the agents' "
                    f"--http-token-file is Secret {secret[0]} key {secret[1]}")
        targets = {r.get("targetLabel") for r in ep.get("relabelings", [])}
        for label in ("node", "job"):
            if label not in targets:
                err(f"{w}.relabelings", f"no relabeling sets '{label}' (the rules group by it)")


def check_rules(pr, names, where):
    fields(where, pr, ("metadata", "spec"))
    fields(f"{where}.metadata", pr.get("metadata", {}), ("name",))
    spec = pr.get("spec", {})
    if not fields(f"{where}.spec", spec, ("groups",)):
        return
    seen = set()
    for g, group in enumerate(spec.get("groups", [])):
        wg = f"{where}.spec.groups[{g}]"
        if not fields(wg, group, ("name", "rules")):
            continue
        for r, rule in enumerate(group.get("rules", [])):
            w = f"{wg}.rules[{r}]"
            if not fields(w, rule, ("alert", "expr")):
                continue
            name = rule["alert"]
            if name in seen:
                err(w, f"alert {name} twice")
            seen.add(name)
            if "for" in rule and not DURATION.match(str(rule["for"])):
                err(f"{w}.for", f"{rule['for']!r} is not a duration")
            ann = rule.get("annotations", {})
            for a in ("summary", "description", "action"):
                if not str(ann.get(a, "")).strip():
                    err(f"{w}.annotations", f"{name}: no '{a}' (docs/operations.md's table shows it)")
            for s in sorted(series_of(str(rule["expr"])) - names):
                err(f"{w}.expr", f"{name}: {s} is not a series the agent exports")


def check_dashboard(cm, names, where):
    labels = cm.get("metadata", {}).get("labels", {})
    if labels.get("grafana_dashboard") != "1":
        err(f"{where}.metadata.labels", "no grafana_dashboard: \"1\" (Grafana's sidecar loads by it)")
    data = cm.get("data", {})
    if len(data) != 1 or not next(iter(data)).endswith(".json"):
        err(f"{where}.data", f"one FILE.json expected, found {sorted(data)}")
        return
    file, text = next(iter(data.items()))
    w = f"{where}.data[{file}]"
    try:
        dash = json.loads(text)
    except ValueError as e:
        err(w, f"not JSON: {e}")
        return
    for k, t in (("uid", str), ("title", str), ("panels", list), ("schemaVersion", int)):
        if not isinstance(dash.get(k), t):
            err(w, f"'{k}' missing or not a {t.__name__}")
    ids = set()
    for i, p in enumerate(dash.get("panels", [])):
        wp = f"{w}.panels[{i}]"
        if p.get("id") in ids or not isinstance(p.get("id"), int):
            err(f"{wp}.id", f"{p.get('id')!r}: missing or not unique")
        ids.add(p.get("id"))
        if p.get("type") not in PANEL_TYPES:
            err(f"{wp}.type", f"{p.get('type')!r} is not a panel type")
        if not p.get("title"):
            err(wp, "no title")
        gp = p.get("gridPos", {})
        if sorted(gp) != ["h", "w", "x", "y"] or not all(isinstance(v, int) for v in gp.values()) \
                or gp.get("x", 0) + gp.get("w", 0) > 24:
            err(f"{wp}.gridPos", f"{gp}: h, w, x, y as integers, x + w <= 24")
        targets = p.get("targets", [])
        if not targets:
            err(wp, f"{p.get('title')}: no targets")
        for j, t in enumerate(targets):
            expr = t.get("expr", "")
            if not expr or not t.get("refId"):
                err(f"{wp}.targets[{j}]", "no expr or refId")
            unknown = sorted(series_of(expr) - names)
            if unknown or not series_of(expr):
                err(f"{wp}.targets[{j}]",
                    f"{p.get('title')}: {', '.join(unknown) or 'no runwall_ series'}: not a series the agent exports")


def main():
    docs = json.load(open(sys.argv[1]))
    names = exported(sys.argv[2])
    names |= {n[:-len("_bucket")] for n in names if n.endswith("_bucket")}
    ds = next((d for d in docs if d.get("kind") == "DaemonSet"), None)
    if ds is None:
        err("rendered", "no DaemonSet")
    kinds = {"PodMonitor": 0, "PrometheusRule": 0, "dashboard": 0}
    for d in docs:
        where = f"{d.get('kind')}/{d.get('metadata', {}).get('name')}"
        if d.get("kind") in ("PodMonitor", "PrometheusRule"):
            kinds[d["kind"]] += 1
            if d.get("apiVersion") != "monitoring.coreos.com/v1":
                err(where, f"apiVersion {d.get('apiVersion')}: monitoring.coreos.com/v1 expected")
            if d["kind"] == "PodMonitor" and ds:
                check_pod_monitor(d, ds, where)
            elif d["kind"] == "PrometheusRule":
                check_rules(d, names, where)
        elif d.get("kind") == "ConfigMap" and "grafana_dashboard" in d.get("metadata", {}).get("labels", {}) \
                or d.get("metadata", {}).get("name") == "runwall-dashboard":
            kinds["dashboard"] += 1
            check_dashboard(d, names, where)
    for k, n in kinds.items():
        if n != 1:
            err("rendered", f"{n} {k} objects, 1 expected")
    if errors:
        print("\n".join(errors))
        return 1
    print(", ".join(f"{k} ok" for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
