#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""node.py: the load of tests/bench/node.sh on a netns node already up (the agent following the
reference PolicyWatch server). Python 3 from Debian, standard library only; run as root.

  node.py --prefix P --node-ns NS --svc-ns NS --ctl ADDR:PORT --conflist FILE --cni-path PATH
          --pods N --phase SECONDS --agent-pid PID --out FILE

1. N pods bound through the CNI chain of --conflist (ptp with host-local, then runwall-cni), run
   the way a runtime runs it (cni_chain.py's order), each in a namespace P<pod>; then a snapshot
   of 1 000 runs: one per pod (a warm pod: its run allows only the "internet" peer) and the rest
   without pods, each run with that one rule.
2. Steady traffic from every pod: one TCP connection a second to 93.184.216.34:443 (allowed) and
   --refusals UDP datagrams a second to 10.0.5.5:53 (refused: a private host), the refusal rate
   set at the agent's --event-rate.
3. Over that traffic, three phases of --phase seconds: steady (the agent's CPU read from
   /proc/PID/stat), CNI ADD and DEL churn at 20 pods a second, then claims at 50 and at 300 a
   second (each phase bounded by --phase: the rate achieved is reported), the churn going on,
   by --churn-workers threads. A claim is a run-upsert of a warm pod's run adding
   52.94.9.5:5432; the next upsert of that run takes it back. Upserts are sent on a fixed
   schedule, not waiting for acks; each ack is matched to its send by revision afterwards.
   Every --probe-every-th grant is probed from its pod: connections to 52.94.9.5:5432 from the
   send on, the first that connects is "enforced".
Writes one JSON object to --out.
"""
import argparse
import ctypes
import json
import os
import random
import socket
import subprocess
import threading
import time
import urllib.request

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
INTERNET = ("93.184.216.34", 443)
PRIVATE = ("10.0.5.5", 53)
DB = ("52.94.9.5", 5432)
LOCK = threading.Lock()


def enter(ns):
    """The calling thread (and what it starts) into network namespace ns."""
    fd = os.open("/run/netns/" + ns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + ns)
    finally:
        os.close(fd)


def pct(v, p):
    if not v:
        return None
    v = sorted(v)
    return round(v[min(len(v) - 1, int(len(v) * p / 100))], 2)


def summary(v):
    return {"n": len(v), "p50": pct(v, 50), "p99": pct(v, 99), "max": round(max(v), 2) if v else None}


class Cni:
    """The conflist's chain, as a runtime runs it, in the node namespace (the caller's thread)."""

    def __init__(self, a):
        self.a = a
        with open(a.conflist) as f:
            self.conf = json.load(f)
        self.results = {}  # pod -> the chain's result (the runtime's cache)
        self.own_ms = []   # runwall-cni's own time per ADD
        self.failed = []   # ADDs refused: (pod, the plugin's error)

    def plugin(self, p, cmd, pod, prev):
        net = dict(p, name=self.conf["name"], cniVersion=self.conf["cniVersion"])
        if prev is not None:
            net["prevResult"] = prev
        env = dict(os.environ, CNI_COMMAND=cmd, CNI_CONTAINERID="cid-" + pod,
                   CNI_NETNS="/run/netns/" + self.a.prefix + pod, CNI_IFNAME="eth0",
                   CNI_PATH=self.a.cni_path)
        exe = next(os.path.join(d, p["type"]) for d in self.a.cni_path.split(":")
                   if os.access(os.path.join(d, p["type"]), os.X_OK))
        t0 = time.monotonic_ns()
        r = subprocess.run([exe], input=json.dumps(net).encode(), env=env, capture_output=True,
                           timeout=60)
        ms = (time.monotonic_ns() - t0) / 1e6
        if r.returncode != 0:
            raise RuntimeError("%s %s %s: %s %s" % (p["type"], cmd, pod, r.stdout, r.stderr))
        return (json.loads(r.stdout) if r.stdout.strip() else None), ms

    def add(self, pod):
        subprocess.run(["ip", "netns", "add", self.a.prefix + pod], check=True)
        subprocess.run(["ip", "-n", self.a.prefix + pod, "link", "set", "lo", "up"], check=True)
        prev = None
        try:
            for p in self.conf["plugins"]:
                prev, ms = self.plugin(p, "ADD", pod, prev)
                if p["type"] == "runwall-cni":
                    self.own_ms.append(ms)
        except RuntimeError as e:
            # As a runtime does: the failed ADD undone by a DEL of the whole chain.
            self.failed.append((pod, str(e)[:300]))
            self.results[pod] = prev
            self.delete(pod, strict=False)
            return None
        self.results[pod] = prev
        return [i["address"].split("/")[0] for i in prev["ips"]][0]

    def delete(self, pod, strict=True):
        prev = self.results.pop(pod)
        for p in reversed(self.conf["plugins"]):
            try:
                self.plugin(p, "DEL", pod, prev)
            except RuntimeError:
                if strict:
                    raise
        subprocess.run(["ip", "netns", "del", self.a.prefix + pod], check=True)


def ctl(a, method, path, body=None):
    req = urllib.request.Request("http://" + a.ctl + path, data=body, method=method)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def run_of(i, pod_ip, claimed):
    allow = [{"ip": INTERNET[0], "tcp": [INTERNET[1]]}]
    if claimed:
        allow.append({"ip": DB[0], "tcp": [DB[1]]})
    return {"id": "run-%04d" % i, "pods": [pod_ip] if pod_ip else [], "allow": allow}


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        f = f.read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime, stime (fields 14 and 15)


def vm(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("VmRSS", "VmHWM"):
                out[k + "_kib"] = int(line.split()[1])
    return out


def traffic(a, pods, stop, counts):
    """One thread for every pod's flows: sockets made in the pod's namespace (setns) keep it."""
    udp = {}
    for p in pods:
        enter(a.prefix + p)
        udp[p] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tick = 1.0 / a.refusals
    n = 0
    start = time.monotonic()
    while not stop.is_set():
        for p in pods:
            udp[p].sendto(b"x", PRIVATE)
            counts["refusals_sent"] += 1
        if n % a.refusals == 0:  # once a second: one allowed connection from each pod
            for p in pods:
                enter(a.prefix + p)
                s = socket.socket()
                s.settimeout(1)
                try:
                    s.connect(INTERNET)
                    counts["allowed_ok"] += 1
                except OSError:
                    counts["allowed_failed"] += 1
                s.close()
        n += 1
        time.sleep(max(0.0, start + n * tick - time.monotonic()))
    for s in udp.values():
        s.close()


def churn(a, w, cni, stop, out):
    """Worker w of a.churn_workers: CNI ADD and DEL at a.churn / a.churn_workers pods a second,
    a pod added each tick, its oldest deleted once it has a.churn_live up. Pods cW-0, cW-1, ...
    (beyond the bound ones)."""
    enter(a.node_ns)
    live, n = [], 0
    rate = a.churn / a.churn_workers
    start = time.monotonic()
    while not stop.is_set():
        pod = "c%d-%d" % (w, n)
        if cni.add(pod):
            live.append(pod)
        if len(live) > a.churn_live:
            cni.delete(live.pop(0))
            with LOCK:
                out["dels"] += 1
        with LOCK:
            out["adds"] += 1
        n += 1
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
    with LOCK:
        out["seconds"] = max(out.get("seconds", 0), time.monotonic() - start)
    for pod in live:
        cni.delete(pod)


def probe(a, pod, t0, res):
    """Connections to DB from pod, from t0 on, until one connects (5 s at most)."""
    enter(a.prefix + pod)
    while time.monotonic_ns() - t0 < 5e9:
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect(DB)
            res.append((time.monotonic_ns() - t0) / 1e6)
            s.close()
            return
        except OSError:
            s.close()
            time.sleep(0.0005)
    res.append(None)


def claims(a, pods, ips, rate, seconds):
    """Claims at rate a second for seconds: sent on schedule (at once when behind it), for
    seconds at most; acks matched afterwards."""
    claimed = {}
    sent, enforced, probes = [], [], []
    start = time.monotonic()
    k = 0
    while time.monotonic() - start < seconds:
        time.sleep(max(0.0, start + k / rate - time.monotonic()))
        i = random.randrange(len(pods))
        grant = not claimed.get(i)
        claimed[i] = grant
        r = ctl(a, "POST", "/upsert", json.dumps(run_of(i, ips[i], grant)).encode())
        sent.append((r["revision"], r["sent_ns"]))
        if grant and k % a.probe_every == 0:
            t = threading.Thread(target=probe, args=(a, pods[i], r["sent_ns"], enforced), daemon=True)
            t.start()
            probes.append(t)
        k += 1
    n = k
    achieved = n / (time.monotonic() - start)
    for t in probes:
        t.join()
    last = sent[-1][0]
    ctl(a, "GET", "/acks?revision=%d&wait=30" % last)
    acks = {x["revision"]: x for x in ctl(a, "GET", "/acks") if x.get("type") == "run-upsert"}
    to_ack, queued, refused, missing = [], [], 0, 0
    # The agent's share split as its ack says: its work (the run's parse and the document's
    # edit, the apply) and the rest of queued_ms, the wait before it (the loop's other work, or
    # no CPU).
    work, wait, batch = [], [], []
    for rev, ns in sent:
        x = acks.get(rev)
        if x is None:
            missing += 1
            continue
        if not x.get("ok"):
            refused += 1
        to_ack.append((x["_ns"] - ns) / 1e6)
        if "queued_ms" in x:
            queued.append(x["queued_ms"])
            w = sum(x.get(k, 0) for k in ("apply_ms", "parse_ms", "compose_ms"))
            work.append(w)
            wait.append(max(x["queued_ms"] - w, 0))
        if "batch" in x:
            batch.append(x["batch"])  # the changes applied together with this one
    # Release every claimed run: the next phase starts from warm pods.
    for i in [i for i, c in claimed.items() if c]:
        last = ctl(a, "POST", "/upsert", json.dumps(run_of(i, ips[i], False)).encode())["revision"]
    ctl(a, "GET", "/acks?revision=%d&wait=30" % last)
    return {"rate": rate, "claims": n, "achieved_per_s": round(achieved, 1),
            "acks_missing": missing, "acks_refused": refused,
            "claim_to_ack_ms": summary(to_ack), "agent_queued_ms": summary(queued),
            "agent_work_ms": summary(work), "agent_wait_ms": summary(wait),
            "agent_batch": summary(batch),
            "claim_to_enforced_ms": summary([e for e in enforced if e is not None]),
            "probes_never_enforced": sum(1 for e in enforced if e is None)}


def claims_apart(a, pods, ips, rate, seconds):
    """claims() in a process of its own, forked from this thread (so in its namespace): the
    traffic and churn threads of this one hold its interpreter lock most of the time, and a
    sender that waits for it cannot keep a schedule of 300 a second."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        code = 0
        try:
            data = json.dumps(claims(a, pods, ips, rate, seconds)).encode()
        except BaseException as e:  # the parent reports it: no result
            data, code = json.dumps({"error": repr(e)}).encode(), 1
        with os.fdopen(wr, "wb") as f:
            f.write(data)
        os._exit(code)
    os.close(wr)
    with os.fdopen(rd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    res = json.loads(data) if data else {"error": "no result"}
    if status or "error" in res:
        raise SystemExit("node.py: claims at %s a second: %s" % (rate, res.get("error", status)))
    return res


def main():
    ap = argparse.ArgumentParser()
    for k in ("prefix", "node-ns", "svc-ns", "ctl", "conflist", "cni-path", "out"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--agent-pid", type=int, required=True)
    ap.add_argument("--pods", type=int, default=250)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--phase", type=float, default=30)
    ap.add_argument("--refusals", type=int, default=10)
    ap.add_argument("--churn", type=float, default=20)
    ap.add_argument("--churn-workers", type=int, default=4)
    ap.add_argument("--churn-live", type=int, default=5)
    ap.add_argument("--probe-every", type=int, default=10)
    a = ap.parse_args()
    random.seed(1)
    out = {"pods": a.pods, "runs": a.runs, "phase_s": a.phase, "refusals_per_pod_s": a.refusals}

    cni = Cni(a)
    enter(a.node_ns)
    pods = ["p%d" % i for i in range(a.pods)]
    ips = [cni.add(p) for p in pods]
    if cni.failed:
        raise SystemExit("node.py: %d pods not bound, the first: %s" % (len(cni.failed), cni.failed[0]))
    out["cni_add_bound_ms"] = summary(cni.own_ms)

    enter(a.svc_ns)  # the control port is the server's loopback
    rev = ctl(a, "GET", "/state")["revision"]
    snap = {"revision": rev + 1, "deny": ["10.0.0.0/16"],
            "runs": [run_of(i, ips[i] if i < a.pods else None, False) for i in range(a.runs)]}
    r = ctl(a, "POST", "/snapshot", json.dumps(snap).encode())
    got = ctl(a, "GET", "/acks?revision=%d&wait=60" % r["revision"])
    if not got or not got[-1].get("ok"):
        raise SystemExit("node.py: the snapshot of %d runs was not acked ok: %s" % (a.runs, got))
    out["snapshot_ack"] = {k: got[-1].get(k) for k in ("apply_ms", "parse_ms", "queued_ms")}

    stop = threading.Event()
    counts = {"refusals_sent": 0, "allowed_ok": 0, "allowed_failed": 0}
    tr = threading.Thread(target=traffic, args=(a, pods, stop, counts), daemon=True)
    tr.start()
    time.sleep(2)  # the traffic under way
    hz = os.sysconf("SC_CLK_TCK")
    c0, t0 = cpu_ticks(a.agent_pid), time.monotonic()
    time.sleep(a.phase)
    out["steady_cpu_pct"] = round(100 * (cpu_ticks(a.agent_pid) - c0) / hz / (time.monotonic() - t0), 1)
    out.update(vm(a.agent_pid))

    cni.own_ms = []
    churned = {"adds": 0, "dels": 0}
    cstop = threading.Event()
    chs = [threading.Thread(target=churn, args=(a, w, cni, cstop, churned), daemon=True)
           for w in range(a.churn_workers)]
    for ch in chs:
        ch.start()
    c0, t0 = cpu_ticks(a.agent_pid), time.monotonic()
    time.sleep(a.phase)
    out["churn_cpu_pct"] = round(100 * (cpu_ticks(a.agent_pid) - c0) / hz / (time.monotonic() - t0), 1)
    out["claims"] = []
    for rate in (50, 300):
        c0, t0 = cpu_ticks(a.agent_pid), time.monotonic()
        ph = claims_apart(a, pods, ips, rate, a.phase)
        ph["cpu_pct"] = round(100 * (cpu_ticks(a.agent_pid) - c0) / hz / (time.monotonic() - t0), 1)
        out["claims"].append(ph)
    cstop.set()
    for ch in chs:
        ch.join()
    out["churn"] = dict(churned, rate=round(churned["adds"] / churned["seconds"], 1),
                        add_failed=len(cni.failed), first_failure=(cni.failed or [None])[0])
    out["cni_add_ms"] = summary(cni.own_ms)
    stop.set()
    tr.join()
    out["traffic"] = counts
    out.update({k + "_end": v for k, v in vm(a.agent_pid).items()})
    enter(a.node_ns)
    for p in pods:
        cni.delete(p)
    with open(a.out, "w") as f:
        json.dump(out, f)


main()
