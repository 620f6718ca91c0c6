#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""churn.py: veth churn on a node, through the path a node uses, with an observer that can fail.

Run in the node's network namespace (nsenter --net=), as root:

  churn.py --pfx P --bpffs DIR --cni RUNWALL_CNI --slots N --seconds S --rate R --ip-base A.B.C

Each of N slots is a pod network namespace P-podJ (made by the caller, reused by every pod of the
slot) whose pods come and go as the VPC CNI makes them: the host veth PJ (the same name and the
same ifindex, --ifindex-base + J, every time) with its peer eth0 in the pod, the pod's address
from a pool shared by every slot (an address is reused by another slot after it was freed) and
the /32 route, then runwall-cni ADD with that prevResult; the pod is live from ADD's answer until
DEL (runwall-cni DEL, then the veth deleted). New pods are started at --rate per second at most.

The node (this namespace) holds the proxy 172.20.0.10:443 and a run's database 52.94.9.5:5432
on its loopback. The snapshot (written by the caller) gives every pool address its own run;
runs of even addresses allow 52.94.9.5:5432, odd ones do not.

Checked while it runs:
  observer  a thread that picks a live pod and asks the kernel, not runwall, whether runwall's
            programs are on both hooks of its veth (tcx links or tc filters: rw_egress on ingress,
            rw_ingress on egress) and whether the endpoint binding of its ifindex names its
            address (so its run); a sample counts only when the pod stayed the same live pod
            throughout it.
  probes    every --probe-every'th pod, right after ADD, connects to 52.94.9.5:5432 from inside:
            accepted for an even address's run, not for an odd one's.
Prints one JSON object with the numbers; exit 0 when nothing failed.
"""
import argparse
import collections
import ctypes
import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe  # noqa: E402  (the kernel's view of the hooks: BPF_PROG_QUERY, tc filter dumps)

BPF_MAP_LOOKUP_ELEM, BPF_OBJ_GET = 1, 7

PROBER = r'''
import socket, sys
for line in sys.stdin:
    host, port, timeout = line.split()
    s = socket.socket(); s.settimeout(float(timeout))
    try:
        s.connect((host, int(port))); r = "ok"
    except ConnectionRefusedError:
        r = "refused"
    except OSError:
        r = "timeout"
    s.close()
    print(r, flush=True)
'''


RW_EP_IP4 = 1 << 0


def pinned_map(path):
    p = ctypes.create_string_buffer(path.encode())
    fd, _ = probe.bpf(BPF_OBJ_GET, struct.pack("=QII", ctypes.addressof(p), 0, 0))
    return fd, p


def endpoint_of(map_fd, ifindex):
    """The pod IPv4 address bound to ifindex in rw_endpoints, None when unbound."""
    key = ctypes.create_string_buffer(struct.pack("=I", ifindex), 4)
    # struct rw_endpoint (include/runwall.h): pod_ip, flags, pod_ip6[4], gw_ip6[4].
    val = ctypes.create_string_buffer(40)
    try:
        probe.bpf(BPF_MAP_LOOKUP_ELEM, struct.pack("=IIQQQ", map_fd, 0, ctypes.addressof(key),
                                                   ctypes.addressof(val), 0))
    except OSError:
        return None
    pod_ip, flags = struct.unpack("=4sI", val.raw[:8])
    return socket.inet_ntoa(pod_ip) if flags & RW_EP_IP4 else None


def hooks_ok(ifindex):
    """runwall's programs on both hooks of ifindex, as the kernel lists them."""
    if probe.tcx_available(ifindex):
        ing = [p["name"] for p in probe.tcx_query(ifindex, probe.BPF_TCX_INGRESS)]
        egr = [p["name"] for p in probe.tcx_query(ifindex, probe.BPF_TCX_EGRESS)]
    else:
        ing, egr = [], []
    ing += [f.get("name", "") for f in probe.tc_filters(ifindex, probe.TC_H_CLSACT_INGRESS)]
    egr += [f.get("name", "") for f in probe.tc_filters(ifindex, probe.TC_H_CLSACT_EGRESS)]
    return "rw_egress" in ing and "rw_ingress" in egr


def listen(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(256)

    def loop():
        while True:
            c, _ = s.accept()
            c.close()
    threading.Thread(target=loop, daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pfx", required=True)
    ap.add_argument("--bpffs", required=True)
    ap.add_argument("--cni", required=True)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--ips", type=int, default=12)
    ap.add_argument("--ip-base", default="10.1.4")
    ap.add_argument("--ifindex-base", type=int, default=5000)
    ap.add_argument("--probe-every", type=int, default=10)
    ap.add_argument("--probe-timeout", type=float, default=0.5)
    a = ap.parse_args()
    # The sleeps and the observer's picks from a fixed seed (RW_SEED=N for another, printed in
    # the result). The threads' interleaving and the kernel's timing still vary from run to run.
    seed = int(os.environ.get("RW_SEED") or 1)
    random.seed(seed)

    listen("172.20.0.10", 443)
    listen("52.94.9.5", 5432)
    ep_fd, _ = pinned_map(os.path.join(a.bpffs, "rw_endpoints"))
    lock = threading.Lock()
    free_ips = collections.deque("%s.%d" % (a.ip_base, 10 + i) for i in range(a.ips))
    live = {}  # slot -> (gen, name, ifindex, ip) while the pod is live
    st = collections.Counter()
    fails = []
    add_ms = []
    cni_ms = []  # runwall-cni ADD alone
    stop = threading.Event()
    next_at = [time.monotonic()]
    interval = 1.0 / a.rate

    def fail(msg):
        with lock:
            if len(fails) < 20:
                fails.append(msg)
            st["failures"] += 1

    def cni(cmd, slot, name, ip, mac):
        conf = {"cniVersion": "1.0.0", "name": "churn", "type": "runwall-cni",
                "bpffs": a.bpffs, "ifPrefix": a.pfx,
                "prevResult": {"cniVersion": "1.0.0",
                               "interfaces": [{"name": name, "mac": mac},
                                              {"name": "eth0", "sandbox": "/run/netns/%s-pod%d" % (a.pfx, slot)}],
                               "ips": [{"interface": 1, "address": ip + "/32"}]}}
        env = dict(os.environ, CNI_COMMAND=cmd, CNI_CONTAINERID="churn-%d" % slot,
                   CNI_NETNS="/run/netns/%s-pod%d" % (a.pfx, slot), CNI_IFNAME="eth0",
                   CNI_PATH=os.path.dirname(a.cni))
        return subprocess.run([a.cni], input=json.dumps(conf).encode(), env=env,
                              capture_output=True)

    def ipb(ns, cmds):
        argv = ["ip"] + (["-n", ns] if ns else []) + ["-batch", "-"]
        p = subprocess.run(argv, input="".join(c + "\n" for c in cmds).encode(),
                           capture_output=True)
        return p.returncode, p.stderr.decode().strip()

    def slot_loop(slot):
        ns = "%s-pod%d" % (a.pfx, slot)
        name = "%s%d" % (a.pfx, slot)
        ifindex = a.ifindex_base + slot
        mac = "02:00:00:00:%02x:%02x" % (slot >> 8, slot & 0xff)
        prober = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-u", "-c", PROBER],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        gen = 0
        while not stop.is_set():
            with lock:
                at = next_at[0]
                next_at[0] = max(at, time.monotonic() - 1.0) + interval
                ip = free_ips.popleft() if free_ips else None
            if ip is None:  # more slots than addresses: wait for one
                time.sleep(0.01)
                continue
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if stop.is_set():
                with lock:
                    free_ips.append(ip)
                break
            gen += 1
            t0 = time.monotonic()
            rc, err = ipb(None, ["link add %s index %d address %s type veth peer name eth0 netns %s"
                                 % (name, ifindex, mac, ns),
                                 "link set %s up" % name,
                                 "route add %s/32 dev %s scope link" % (ip, name)])
            if rc:
                fail("slot %d: creating %s: %s" % (slot, name, err))
                with lock:
                    free_ips.append(ip)
                subprocess.run(["ip", "link", "del", name], capture_output=True)
                continue
            rc, err = ipb(ns, ["addr add %s/32 dev eth0" % ip, "link set eth0 up",
                               "neigh replace 169.254.1.1 dev eth0 lladdr %s nud permanent" % mac,
                               "route add 169.254.1.1 dev eth0 scope link",
                               "route add default via 169.254.1.1 dev eth0 onlink"])
            if rc:
                fail("slot %d: wiring the pod %s: %s" % (slot, ip, err))
            t1 = time.monotonic()
            p = cni("ADD", slot, name, ip, mac)
            with lock:
                cni_ms.append((time.monotonic() - t1) * 1000)
            if p.returncode:
                fail("slot %d: runwall-cni ADD %s %s: %s" % (slot, name, ip, p.stdout.decode()[:300]))
            else:
                with lock:
                    add_ms.append((time.monotonic() - t0) * 1000)
                    live[slot] = (gen, name, ifindex, ip)
                    st["created"] += 1
                    sample = a.probe_every and st["created"] % a.probe_every == 1
                if sample:
                    # An odd pod's run has no rule for the database: its connect() is refused
                    # and answered with a reset.
                    want = "ok" if int(ip.rsplit(".", 1)[1]) % 2 == 0 else "refused"
                    prober.stdin.write("52.94.9.5 5432 %s\n" % a.probe_timeout)
                    prober.stdin.flush()
                    got = prober.stdout.readline().strip()
                    with lock:
                        st["probes"] += 1
                        st["probes_" + want] += 1
                    if got != want:
                        fail("slot %d: pod %s on %s (ifindex %d): its run's database %s, expected %s"
                             % (slot, ip, name, ifindex, got, want))
                time.sleep(random.uniform(0, 2.0 * a.slots / a.rate))
            with lock:
                live.pop(slot, None)
            p = cni("DEL", slot, name, ip, mac)
            if p.returncode:
                fail("slot %d: runwall-cni DEL %s: %s" % (slot, name, p.stdout.decode()[:300]))
            rc, err = ipb(None, ["link del %s" % name])
            if rc:
                fail("slot %d: deleting %s: %s" % (slot, name, err))
            with lock:
                st["deleted"] += 1
                free_ips.append(ip)
        prober.stdin.close()
        prober.wait()

    def observer():
        while not stop.is_set():
            with lock:
                pods = list(live.items())
            if not pods:
                time.sleep(0.001)
                continue
            slot, cur = random.choice(pods)
            _, name, ifindex, ip = cur
            try:
                attached = hooks_ok(ifindex)
            except OSError:
                attached = None  # the veth went away under the query
            bound = endpoint_of(ep_fd, ifindex)
            with lock:
                same = live.get(slot) == cur
            if not same or attached is None:
                st["inconclusive"] += 1
                continue
            st["checks"] += 1
            if not attached:
                fail("observer: live pod %s on %s (ifindex %d) without runwall's programs"
                     % (ip, name, ifindex))
            if bound != ip:
                fail("observer: live pod %s on %s (ifindex %d) bound to %s" % (ip, name, ifindex, bound))

    threads = [threading.Thread(target=slot_loop, args=(s,)) for s in range(a.slots)]
    obs = threading.Thread(target=observer)
    start = time.monotonic()
    for t in threads + [obs]:
        t.start()
    time.sleep(a.seconds)
    stop.set()
    for t in threads + [obs]:
        t.join()
    took = time.monotonic() - start
    add_ms.sort()
    cni_ms.sort()
    out = dict(st)
    out.update({"seed": seed, "seconds": round(took, 1), "rate": round(st["created"] / took, 1),
                "add_ms_p50": round(add_ms[len(add_ms) // 2], 1) if add_ms else None,
                "add_ms_p99": round(add_ms[len(add_ms) * 99 // 100], 1) if add_ms else None,
                "cni_add_ms_p50": round(cni_ms[len(cni_ms) // 2], 1) if cni_ms else None,
                "cni_add_ms_p99": round(cni_ms[len(cni_ms) * 99 // 100], 1) if cni_ms else None,
                "fails": fails})
    print(json.dumps(out))
    return 1 if st["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
