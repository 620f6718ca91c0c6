#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""view_check.py: the HTTP side of tests/netns/test_view.sh (standard library, plus selenium
for the browser). Each check prints lines "PASS<TAB>what" or "FAIL<TAB>what<TAB>why" (the
suite numbers them), or "NOTE<TAB>text".

  view_check.py get URL [--token T] [--method M]   print "STATUS" then the body
  view_check.py wait-ready URL --timeout S           until GET URL answers 200
  view_check.py receiver --port P --out F --ready F  an access-request receiver: each POST body
                                                     one JSON line in F; answers 204
  view_check.py dns-blackhole --addr A --ready F     a DNS server on A:53 (UDP) that reads
                                                     every query and never answers
  view_check.py events BASE --expect SPEC.json       /api/events and its filters against SPEC
  view_check.py graph BASE --expect SPEC.json        /api/graph against SPEC
  view_check.py metrics BASE --counters C.json --promtool PATH [--runs R,...]
  view_check.py sse-first BASE --out F --trigger-file T   follow the stream; record events
  view_check.py sse BASE --wait-id ...               (see the subcommands)
  view_check.py bad BASE [--token T]                 bad requests: the right 4xx
  view_check.py hostile BASE                         100 idle connections and a client that
                                                     never reads, while the API still answers
  view_check.py loris BASE                           slow headers from 17 addresses, more than
                                                     the slots: another address gets /metrics
  view_check.py browser BASE --screenshot F ...      headless Chromium on the page
"""
import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCALE = float(os.environ.get("RW_WAIT_SCALE", "1"))


def out(status, what, why=""):
    print(f"{status}\t{what}\t{why}".rstrip("\t"), flush=True)


def check(cond, what, why=""):
    out("PASS" if cond else "FAIL", what, "" if cond else why)
    return cond


def http(url, token=None, method="GET", headers=None, timeout=5):
    req = urllib.request.Request(url, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout * SCALE) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def get_json(url, token=None):
    st, body, _ = http(url, token)
    if st != 200:
        raise RuntimeError(f"{url}: HTTP {st}: {body[:200]}")
    return json.loads(body)


# ---- get, wait-ready ----

def cmd_get(a):
    st, body, _ = http(a.url, a.token, a.method)
    print(st)
    print(body)


def cmd_wait_ready(a):
    end = time.time() + a.timeout * SCALE
    while time.time() < end:
        try:
            if http(a.url, timeout=1)[0] == 200:
                return 0
        except OSError:
            pass
        time.sleep(0.1)
    print(f"{a.url}: not 200 within {a.timeout}s", file=sys.stderr)
    return 1


# ---- the access-request receiver ----

def cmd_receiver(a):
    lock = threading.Lock()

    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            with lock, open(a.out, "a") as f:
                f.write(json.dumps({"path": self.path,
                                    "type": self.headers.get("Content-Type"),
                                    "body": json.loads(body)}) + "\n")
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", a.port), H)
    with open(a.ready, "w") as f:
        f.write("ready\n")
    srv.serve_forever()


def cmd_dns_blackhole(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.addr, 53))
    with open(a.ready, "w") as f:
        f.write("ready\n")
    while True:
        s.recv(4096)  # read, so the queries never pile up; never answered


# ---- /api/events ----

def events(base, query=""):
    return get_json(f"{base}/api/events{query}")


def cmd_events(a):
    spec = json.load(open(a.expect))
    r = events(a.base)
    evs = r["events"]
    check(r["ok"] and r["count"] == len(evs), "/api/events answers ok with count = len(events)")
    ids = [e["id"] for e in evs]
    check(ids == sorted(ids) and len(set(ids)) == len(ids),
          "/api/events: ids strictly increasing", str(ids[:10]))
    for want in spec["present"]:
        found = [e for e in evs if all(e.get(k) == v for k, v in want.items())]
        check(len(found) >= want.get("_min", 1) if "_min" in want else len(found) >= 1,
              f"/api/events has {json.dumps(want)}", f"not among {len(evs)} events")
    for want in spec.get("counts", []):
        match = {k: v for k, v in want.items() if k != "_n"}
        found = [e for e in evs if all(e.get(k) == v for k, v in match.items())]
        check(len(found) == want["_n"], f"/api/events has exactly {want['_n']} of {json.dumps(match)}",
              f"found {len(found)}")
    for q, cond in spec["filters"]:
        got = events(a.base, "?" + q)["events"]
        k, v = cond.split("=", 1)
        check(len(got) > 0 and all(str(e.get(k)) == v for e in got),
              f"/api/events?{q}: only events with {cond} ({len(got)})",
              json.dumps(got[:2]))
    # since: nothing newer than the cursor; limit: the newest N
    cur = r["cursor"]
    check(events(a.base, f"?since={cur}")["events"] == [], "/api/events?since=CURSOR: nothing newer")
    two = events(a.base, "?limit=2")["events"]
    check([e["id"] for e in two] == ids[-2:], "/api/events?limit=2: the two newest, oldest first",
          f"{[e['id'] for e in two]} vs {ids[-2:]}")
    mid = ids[len(ids) // 2]
    after = events(a.base, f"?since={mid}")["events"]
    check([e["id"] for e in after] == [i for i in ids if i > mid], "/api/events?since=ID: exactly the later ones")
    return 0


# ---- /api/graph ----

def cmd_graph(a):
    spec = json.load(open(a.expect))
    g = get_json(f"{a.base}/api/graph")
    sbx = {s["id"]: s for s in g["sandboxes"]}
    dst = {d["id"]: d for d in g["destinations"]}
    for want in spec["edges"]:
        es = [e for e in g["edges"] if e["sandbox"] == want["sandbox"] and
              e["destination"] == want["destination"] and e["dir"] == want.get("dir", "egress")]
        if not check(len(es) == 1, f"/api/graph: an edge {want['sandbox']} -> {want['destination']}",
                     f"edges: {json.dumps(g['edges'])[:400]}"):
            continue
        e = es[0]
        check(e["reasons"] == want["reasons"],
              f"/api/graph: {want['sandbox']} -> {want['destination']} reasons {json.dumps(want['reasons'])}",
              f"got {json.dumps(e['reasons'])}")
        if "ports" in want:
            got = sorted(f"{p['proto']}/{p['port']}" for p in e["ports"])
            check(got == sorted(want["ports"]), f"/api/graph: {want['destination']} ports {want['ports']}",
                  f"got {got}")
    for want in spec["sandboxes"]:
        check(want["id"] in sbx and sbx[want["id"]]["run"] == want["run"],
              f"/api/graph: sandbox {want['id']} of run {want['run']}", f"sandboxes: {list(sbx)}")
    for ip, name in spec["names"].items():
        check(ip in dst and dst[ip]["name"] == name, f"/api/graph: destination {ip} named '{name}'",
              f"got {dst.get(ip)}")
    run = spec["sandboxes"][0]["run"]
    only = get_json(f"{a.base}/api/graph?run={run}")
    check(all(s["run"] == run for s in only["sandboxes"]) and only["edges"],
          f"/api/graph?run={run}: that run's sandboxes only")
    return 0


# ---- /metrics ----

def parse_metrics(text):
    m = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        m[name_labels] = float(value)
    return m


def cmd_metrics(a):
    st, text, hdr = http(f"{a.base}/metrics")
    check(st == 200 and hdr.get("Content-Type", "").startswith("text/plain"),
          "/metrics answers 200 text/plain")
    p = subprocess.run([a.promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    check(p.returncode == 0, "promtool check metrics passes", (p.stdout + p.stderr).strip()[:400])
    m = parse_metrics(text)
    c = json.load(open(a.counters))
    bad = []
    n = 0
    for d in ("egress", "ingress"):
        for reason, v in c["node"][d].items():
            for unit, name in (("packets", "runwall_packets_total"), ("bytes", "runwall_bytes_total")):
                key = f'{name}{{direction="{d}",reason="{reason}"}}'
                n += 1
                if m.get(key) != v[unit]:
                    bad.append(f"{key}={m.get(key)} kernel {v[unit]}")
    check(not bad, f"/metrics: node packets and bytes equal `runwall counters -j` ({n} series)", "; ".join(bad[:5]))
    bad = []
    runs = [r for r in c["runs"] if r["id"] in a.runs.split(",")]
    for r in runs:
        for d in ("egress", "ingress"):
            for reason, v in r[d].items():
                for unit, name in (("packets", "runwall_run_packets_total"), ("bytes", "runwall_run_bytes_total")):
                    key = f'{name}{{run="{r["id"]}",direction="{d}",reason="{reason}"}}'
                    if m.get(key) != v[unit]:
                        bad.append(f"{key}={m.get(key)} kernel {v[unit]}")
    check(len(runs) == len(a.runs.split(",")) and not bad,
          f"/metrics: per-run packets and bytes equal the kernel's for {a.runs}", "; ".join(bad[:5]))
    ev = c["node"]["events"]
    check(all(m.get(f'runwall_events_total{{outcome="{k}"}}') == ev[k] for k in ("sent", "lost", "suppressed")),
          "/metrics: events sent/lost/suppressed equal the kernel's", json.dumps(ev))
    for want in a.expect or []:
        k, v = want.rsplit("=", 1)
        check(m.get(k) == float(v), f"/metrics: {k} = {v}", f"got {m.get(k)}")
    for absent in a.absent or []:
        check(not any(k.startswith(absent) for k in m), f"/metrics: no series {absent}")
    for name in ("runwall_policy_apply_duration_seconds_count", "runwall_map_entries{map=\"pods\",pin=\"rw_pods\"}",
                 "runwall_map_capacity{map=\"conntrack\",pin=\"rw_conntrack\"}", "runwall_sandboxes{state=\"enforced\"}",
                 "runwall_attach_failures_total", "runwall_subscriber_events_total{outcome=\"skipped\"}",
                 "runwall_policy_revision"):
        check(name in m, f"/metrics has {name}")
    return 0


# ---- server-sent events ----

class SSE:
    """A minimal EventSource: connect, read events with their ids."""

    def __init__(self, url, last_id=None, token=None, cookie=None):
        host, port, path = split(url)
        self.s = socket.create_connection((host, port), timeout=10 * SCALE)
        hdr = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n"
        if last_id is not None:
            hdr += f"Last-Event-ID: {last_id}\r\n"
        if token:
            hdr += f"Authorization: Bearer {token}\r\n"
        if cookie:
            hdr += f"Cookie: runwall_token={cookie}\r\n"
        self.s.sendall((hdr + "\r\n").encode())
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])
        self.chunked = b"chunked" in head.lower()
        self.raw = b""

    def _until(self, sep):
        while sep not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        i = self.buf.index(sep)
        part, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return part

    def _data(self):
        # de-chunk what arrived into self.raw
        if not self.chunked:
            self.raw += self.buf
            self.buf = b""
            return
        while True:
            if b"\r\n" not in self.buf:
                return
            size_line, rest = self.buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            self.raw += rest[:size]
            self.buf = rest[size + 2:]

    def events(self, timeout):
        """Events (dicts with 'id') that arrive within timeout seconds."""
        got = []
        end = time.time() + timeout * SCALE
        first = True
        while time.time() < end:
            if first and self.buf:  # what came with the headers
                first = False
                d = b""
                self._data()
                self._take(got)
                continue
            self.s.settimeout(max(0.05, end - time.time()))
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            first = False
            self.buf += d
            self._data()
            self._take(got)
        return got

    def _take(self, got):
        while b"\n\n" in self.raw:
            block, self.raw = self.raw.split(b"\n\n", 1)
            ev = {}
            for line in block.decode().split("\n"):
                if line.startswith("id: "):
                    ev["_id"] = int(line[4:])
                elif line.startswith("data: "):
                    ev.update(json.loads(line[6:]))
            if "_id" in ev:
                got.append(ev)

    def close(self):
        self.s.close()


def split(url):
    assert url.startswith("http://")
    rest = url[7:]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    return host, int(port or 80), "/" + path


def cmd_sse(a):
    """Phase 'new': follow the stream, run the trigger command, expect the refusal it makes.
    Phase 'resume': note the last id, disconnect, run the trigger (two refusals), reconnect
    with Last-Event-ID: exactly those arrive, none twice, none lost."""
    url = f"{a.base}/api/events/stream?{a.query}" if a.query else f"{a.base}/api/events/stream"
    s = SSE(url)
    check(s.status == 200, "SSE: /api/events/stream answers 200")
    s.events(0.3)  # the retry line
    subprocess.run(a.trigger, shell=True, check=False, capture_output=True)
    got = s.events(3)
    want = json.loads(a.want)
    match = [e for e in got if all(e.get(k) == v for k, v in want.items())]
    check(len(match) >= 1, f"SSE: a new refusal arrives live ({json.dumps(want)})",
          f"got {len(got)} events: {json.dumps(got[:3])[:300]}")
    check(all(e["_id"] == e["id"] for e in got), "SSE: the id line is the event's id")
    if a.query:
        k, v = a.query.split("=", 1)
        check(all(str(e.get(k)) == v for e in got), f"SSE ?{a.query}: only matching events",
              json.dumps(got[:2]))
    last = got[-1]["_id"] if got else 0
    s.close()
    # while disconnected: more refusals
    subprocess.run(a.trigger2, shell=True, check=False, capture_output=True)
    time.sleep(0.5 * SCALE)
    expected = [e for e in events(a.base, f"?since={last}" + (f"&{a.query}" if a.query else ""))["events"]]
    s = SSE(url, last_id=last)
    again = s.events(1.5)
    s.close()
    check([e["_id"] for e in again] == [e["id"] for e in expected] and len(expected) >= a.min_missed,
          f"SSE resume with Last-Event-ID: the {len(expected)} events since, none lost, none twice",
          f"got {[e['_id'] for e in again]}, buffer has {[e['id'] for e in expected]}")
    return 0


# ---- bad input ----

def raw_request(base, data, read=True, timeout=5):
    host, port, _ = split(base)
    s = socket.create_connection((host, port), timeout=timeout * SCALE)
    s.sendall(data)
    if not read:
        return s
    resp = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            resp += d
            if b"\r\n\r\n" in resp and b"Content-Length" not in resp.split(b"\r\n\r\n")[0]:
                break
            if b"\r\n\r\n" in resp:
                head, body = resp.split(b"\r\n\r\n", 1)
                for l in head.split(b"\r\n"):
                    if l.lower().startswith(b"content-length:") and len(body) >= int(l.split(b":")[1]):
                        s.close()
                        return resp
    except socket.timeout:
        pass
    s.close()
    return resp


def status_of(resp):
    try:
        return int(resp.split(b" ")[1])
    except (IndexError, ValueError):
        return 0


def cmd_bad(a):
    cases = [
        ("unknown path", "/nope", None, [404]),
        ("unknown api path", "/api/nope", None, [404]),
        ("bad reason", "/api/events?reason=privat-destination", None, [400]),
        ("bad limit", "/api/events?limit=0", None, [400]),
        ("bad since", "/api/events?since=abc", None, [400]),
        ("bad dst", "/api/events?dst=1.2.3.4:99999", None, [400]),
        ("unknown parameter", "/api/events?colour=red", None, [400]),
        ("bad escape", "/api/events?run=%zz", None, [400]),
        ("bad stream query", "/api/events/stream?verdict=maybe", None, [400]),
        ("bad graph query", "/api/graph?pod=10.1.2.300", None, [400]),
        ("too many parameters", "/api/events?" + "&".join(["limit=1"] * 20), None, [400]),
        ("oversized query", "/api/events?run=" + "a" * 20000, None, [400, 413, 414, 431]),
    ]
    for what, path, method, want in cases:
        st, body, _ = http(a.base + path, a.token, method or "GET")
        ok = st in want
        if ok and st == 400:
            ok = json.loads(body).get("error", "") != ""
        check(ok, f"bad input: {what} -> {want[0] if len(want) == 1 else want}", f"got {st}: {body[:200]}")
    st, body, hdr = http(a.base + "/api/events", a.token, "POST")
    check(st == 405 and "GET" in hdr.get("Allow", ""), "read-only: POST -> 405 with Allow", f"got {st}")
    st, _, _ = http(a.base + "/api/status", a.token, "DELETE")
    check(st == 405, "read-only: DELETE -> 405", f"got {st}")
    big = b"GET /api/events HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"b" * 40000 + b"\r\n\r\n"
    st = status_of(raw_request(a.base, big))
    check(st in (400, 413, 431), "request-size limit: a 40 kB header -> 4xx", f"got {st}")
    r = raw_request(a.base, b"GARBAGE\r\n\r\n")
    check(status_of(r) in (400, 0), "a request line that is not HTTP: 400 or closed", f"got {r[:80]!r}")
    return 0


def cmd_token(a):
    from urllib.parse import quote
    for path in ("/api/status", "/metrics", "/api/events", "/api/graph", "/api/requests"):
        st, _, hdr = http(a.base + path)
        check(st == 401 and "Bearer" in hdr.get("WWW-Authenticate", ""),
              f"token: {path} without a token -> 401", f"got {st}")
        st, _, _ = http(a.base + path, "wrong-" + a.token)
        check(st == 401, f"token: {path} with a wrong token -> 401", f"got {st}")
        st, _, _ = http(a.base + path, a.token[:-1])
        check(st == 401, f"token: {path} with a prefix of the token -> 401", f"got {st}")
        st, _, _ = http(a.base + path, a.token)
        check(st == 200, f"token: {path} with the token -> 200", f"got {st}")
    # The page's cookie (what an EventSource sends): the same token, percent-encoded.
    cookie = lambda v: {"Cookie": f"theme=dark; runwall_token={v}"}
    for what, value, want in (("a wrong", "wrong-" + a.token, 401), ("a prefix of the", a.token[:-1], 401),
                              ("an undecodable", a.token[:-2] + "%z", 401), ("the", a.token, 200),
                              ("the percent-encoded", quote(a.token, safe=""), 200)):
        st, _, _ = http(a.base + "/api/status", headers=cookie(value))
        check(st == want, f"token: /api/status with {what} token in the cookie -> {want}", f"got {st}")
    st, _, _ = http(a.base + "/api/status", headers={"Cookie": f"other_token={a.token}"})
    check(st == 401, "token: the token in another cookie's name -> 401", f"got {st}")
    st, _, _ = http(a.base + "/api/status?token=" + quote(a.token, safe=""))
    check(st in (400, 401), "token: never taken from the URL (?token= -> 4xx)", f"got {st}")
    s = SSE(a.base + "/api/events/stream", cookie=a.token)
    check(s.status == 200, "token: the SSE stream with the cookie -> 200", f"got {s.status}")
    s.close()
    s = SSE(a.base + "/api/events/stream", cookie="wrong-" + a.token)
    check(s.status == 401, "token: the SSE stream with a wrong cookie -> 401", f"got {s.status}")
    s.close()
    # The page itself holds no data: it loads without the token, to ask for it.
    st, body, _ = http(a.base + "/")
    check(st == 200 and "<title>runwall: live traffic</title>" in body and '"id":' not in body,
          "token: / (the page, no data in it) loads without the token", f"got {st}")
    st, _, _ = http(a.base + "/healthz")
    check(st == 200, "token: /healthz answers without it (probes)", f"got {st}")
    return 0


def cmd_hostile(a):
    """100 idle connections and a client that never reads, then: the API still answers and
    events still flow (the trigger's refusal shows up)."""
    host, port, _ = split(a.base)
    idle = []
    for i in range(100):
        try:
            # ten sources, ten each: under the per-IP limit, so that all 100 hold a slot
            idle.append(source_conn(host, port, f"127.0.1.{i // 10 + 1}"))
        except OSError as e:
            out("NOTE", f"idle connection {len(idle)}: {e}")
            break
    # half a request on some of them
    for s in idle[:50]:
        s.sendall(b"GET /api/ev")
    # a client that never reads: a stream with a tiny receive window, while events pour in
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    slow.connect((host, port))
    slow.sendall(b"GET /api/events/stream?since=0 HTTP/1.1\r\nHost: x\r\n\r\n")
    slow2 = socket.socket()
    slow2.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    slow2.connect((host, port))
    slow2.sendall(b"GET /api/events?limit=10000 HTTP/1.1\r\nHost: x\r\n\r\n")
    before = events(a.base)["cursor"]
    t0 = time.time()
    st, _, _ = http(a.base + "/healthz", timeout=3)
    dt = time.time() - t0
    check(st == 200, f"with 100 idle connections and 2 clients that never read: /healthz answers",
          f"got {st}")
    out("NOTE", f"/healthz answered in {dt * 1000:.1f} ms with 100 idle connections and 2 stalled readers")
    subprocess.run(a.trigger, shell=True, check=False, capture_output=True)
    want = json.loads(a.want)
    end = time.time() + 3 * SCALE
    found = []
    while time.time() < end and not found:
        found = [e for e in events(a.base, f"?since={before}")["events"]
                 if all(e.get(k) == v for k, v in want.items())]
        time.sleep(0.1)
    check(bool(found), "... and the agent's loop still drains events (a new refusal is served)")
    st, _, _ = http(a.base + "/api/status", a.token, timeout=3)
    check(st == 200, "... and /api/status answers", f"got {st}")
    for s in [*idle, slow, slow2]:
        s.close()
    return 0


def closed(s):
    """The server closed s (EOF, a reset, or an answer it closes after), without blocking."""
    try:
        r, _, _ = select.select([s], [], [], 0)
        return bool(r) and s.recv(4096, socket.MSG_DONTWAIT) is not None
    except OSError:
        return True


def alive(s):
    """s is still open: what it has received read away, no EOF and no reset."""
    s.setblocking(False)  # else Python waits for data up to the socket's timeout first
    try:
        while True:
            if not s.recv(65536, socket.MSG_DONTWAIT):
                return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def source_conn(host, port, source, timeout=5):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((host, port))
    return s


def trickle_byte(socks, header, i):
    """The i-th byte of header on each socket still open (a slow client's headers)."""
    for s in socks:
        try:
            s.send(header[i % len(header):i % len(header) + 1])
        except OSError:
            pass


def cmd_flood(a):
    """COUNT sockets from one source address that send one header byte and then trickle one
    more a second (under the header deadline, which is an inactivity timeout): the per-IP limit
    refuses those beyond it, the probe listener and other sources are still served, and a
    partial header left alone is closed by the header deadline."""
    host, port, _ = split(a.base)
    t0 = time.time()
    partial = source_conn(host, port, a.partial_source)
    partial.sendall(b"GET /api/ev")
    partial_closed = None
    # an event stream from another address: its headers are in, so the header timeout is not
    # its timeout (a comment line every 5 s keeps it open)
    stream = source_conn(host, port, a.stream_source)
    stream.sendall(b"GET /api/events/stream HTTP/1.1\r\nHost: x\r\n" +
                   (f"Authorization: Bearer {a.token}\r\n".encode() if a.token else b"") + b"\r\n")
    socks, refused = [], 0
    for _ in range(a.count):
        try:
            s = source_conn(host, port, a.source)
            s.sendall(b"G")
            socks.append(s)
        except OSError:
            refused += 1
    header = b"ET /api/events HTTP/1.1\r\nX-Trickle: " + b"x" * 4096

    def trickle(until):
        nonlocal partial_closed
        i = 1
        while time.time() < until:
            trickle_byte(socks, header, i)
            i += 1
            if partial_closed is None and closed(partial):
                partial_closed = time.time() - t0
            time.sleep(min(1.0, max(0.0, until - time.time())))

    trickle(time.time() + 2)
    still = [s for s in socks if not closed(s)]
    out("NOTE", f"{a.count} sockets from {a.source}: {refused} refused at connect, "
        f"{len(socks) - len(still)} closed by the agent, {len(still)} held")
    check(len(still) <= a.per_ip and refused + len(socks) - len(still) >= a.count - a.per_ip,
          f"flood: of {a.count} trickling sockets from one address, at most {a.per_ip} are held "
          "(the others refused or closed)", f"{len(still)} held")
    try:
        t = time.time()
        st, body, _ = http(a.probe + "/healthz", timeout=3)
        dt = time.time() - t
    except OSError as e:
        st, body, dt = str(e), "", 0
    check(st == 200 and body == "ok\n",
          f"flood: /healthz on the probe listener answers 200 at once ({dt * 1000:.0f} ms)",
          f"got {st}")
    try:
        st, _, _ = http(a.base + "/readyz", timeout=3)
    except OSError as e:
        st = str(e)
    check(st == 200, "flood: the main listener still serves another source address (/readyz)",
          f"got {st}")
    deadline = a.deadline * SCALE
    trickle(t0 + deadline)
    held = sum(1 for s in still if not closed(s))
    out("NOTE", f"after {time.time() - t0:.1f} s of trickling, {held} of the {len(still)} held "
        "sockets are still open (the header deadline closes them 10 s after they opened)")
    check(partial_closed is not None,
          f"flood: a partial header left alone is closed within {deadline:.0f} s "
          f"(closed after {partial_closed or 0:.1f} s)", "still open")
    check(alive(stream), f"flood: an event stream opened at the start is still open after "
          f"{time.time() - t0:.0f} s (the header timeout ends with the headers)", "closed")
    for s in [*socks, partial, stream]:
        s.close()
    return 0


def cmd_loris(a):
    """ADDRESSES source addresses open PER_IP connections each, more than the listener's slots
    in all, send one header byte and then one more every second (never idle long enough for the
    inactivity timeout). A scraper from another address still gets /metrics, and the trickling
    connections are closed by the header deadline, which counts from the connection's start."""
    host, port, _ = split(a.base)
    socks = []
    t0 = time.time()
    for i in range(a.addresses):
        for _ in range(a.per_ip):
            try:
                s = source_conn(host, port, f"{a.prefix}.{i + 1}")
                s.sendall(b"G")
                socks.append(s)
            except OSError:
                pass
    header = b"ET /metrics HTTP/1.1\r\nX-Trickle: " + b"x" * 4096
    stop = threading.Event()

    def trickle():
        i = 0
        while not stop.wait(1.0):
            trickle_byte(socks, header, i)
            i += 1

    th = threading.Thread(target=trickle, daemon=True)
    th.start()
    stop.wait(2.0)  # two trickles: the connections are the agent's by now
    out("NOTE", f"{len(socks)} trickling connections from {a.addresses} addresses")
    conn = HTTPConnection(host, port, timeout=5 * SCALE, source_address=(a.scraper, 0))
    t = time.time()
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {a.token}"} if a.token else {})
        r = conn.getresponse()
        st, body = r.status, r.read().decode()
    except OSError as e:
        st, body = str(e), ""
    dt = time.time() - t
    conn.close()
    check(st == 200 and "runwall_ready" in body,
          f"loris: with {len(socks)} trickling connections from {a.addresses} addresses, a scraper "
          f"from {a.scraper} gets /metrics ({dt * 1000:.0f} ms; the busiest address gives up a place)",
          f"got {st}")
    end = t0 + (a.deadline + 5) * SCALE
    while time.time() < end and not all(closed(s) for s in socks):
        time.sleep(0.2)
    held = sum(1 for s in socks if not closed(s))
    check(held == 0, f"loris: every trickling connection is closed by the header deadline, "
          f"{a.deadline:.0f} s in all (all closed {time.time() - t0:.1f} s after the first opened)",
          f"{held} of {len(socks)} still open after {time.time() - t0:.1f} s")
    stop.set()
    th.join()
    for s in socks:
        s.close()
    return 0


# ---- the merged view ----

def cmd_merged(a):
    want_nodes = set(a.nodes.split(","))
    end = time.time() + 10 * SCALE
    evs = []
    while time.time() < end:
        evs = events(a.base)["events"]
        if want_nodes <= {e.get("node") for e in evs}:
            break
        time.sleep(0.2)
    check(want_nodes <= {e.get("node") for e in evs}, f"view: events of every agent ({a.nodes})",
          f"nodes seen: {sorted({str(e.get('node')) for e in evs})}")
    for spec in a.want or []:
        w = json.loads(spec)
        check(any(all(e.get(k) == v for k, v in w.items()) for e in evs), f"view: has {spec}")
    ids = [e["id"] for e in evs]
    check(ids == sorted(ids) and len(set(ids)) == len(ids), "view: merged ids strictly increasing")
    g = get_json(f"{a.base}/api/graph")
    check(want_nodes <= {s["node"] for s in g["sandboxes"]}, "view: /api/graph has both nodes' sandboxes",
          json.dumps(g["sandboxes"])[:300])
    st = get_json(f"{a.base}/api/status")
    check(st.get("view") and {x["node"] for x in st["agents"]} == want_nodes and
          all(x["connected"] for x in st["agents"]), "view: /api/status lists every agent, connected",
          json.dumps(st)[:300])
    return 0


def cmd_wait_event(a):
    """Until /api/events (BASE) has an event matching --want, since --since."""
    want = json.loads(a.want)
    end = time.time() + a.timeout * SCALE
    while time.time() < end:
        try:
            evs = events(a.base, f"?since={a.since}")["events"]
            if any(all(e.get(k) == v for k, v in want.items()) for e in evs):
                return 0
        except (OSError, RuntimeError):
            pass
        time.sleep(0.2)
    return 1


def cmd_wait_agents(a):
    """Until the view's /api/status lists exactly the agents --want (node:up or node:down) and,
    with --dns N, its --agents-dns name holds N addresses."""
    want = sorted(a.want.split(","))
    end = time.time() + a.timeout * SCALE
    got, dns = [], []
    while True:
        try:
            st = get_json(f"{a.base}/api/status")
            got = sorted(f"{x['node']}:{'up' if x['connected'] else 'down'}" for x in st["agents"])
            dns = [d["addresses"] for d in st.get("dns", [])]
            if got == want and (a.dns is None or dns == [a.dns]):
                break
        except (OSError, RuntimeError, KeyError, ValueError):
            pass
        if time.time() > end:
            break
        time.sleep(0.2)
    check(got == want and (a.dns is None or dns == [a.dns]),
          f"{a.what}: the view follows exactly {', '.join(want)}" +
          (f" ({a.dns} addresses)" if a.dns is not None else ""),
          f"got {got}, dns addresses {dns if got else '?'}")
    return 0


# ---- the browser ----

def cmd_browser(a):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    # Chromium is started here, not by chromedriver, which gives it 60 s to come up: under
    # emulation (QEMU TCG, make vmtest) a start takes minutes on a busy machine. chromedriver
    # then attaches to it through its DevTools port, with no limit of its own.
    browser, port = start_chromium(a.profile)
    opts = Options()
    opts.debugger_address = f"127.0.0.1:{port}"
    # A prompt stays open until the test answers it (the default would dismiss it at the next
    # command).
    opts.set_capability("unhandledPromptBehavior", "ignore")
    try:
        drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    except BaseException:
        stop_chromium(browser)
        raise
    try:
        drv.set_page_load_timeout(60 * SCALE)
        drv.set_script_timeout(30 * SCALE)
        drv.get(a.base + "/")
        check("runwall" in drv.title, "browser: the page loads", drv.title)

        def wait(fn, secs):
            end = time.time() + secs * SCALE
            while time.time() < end:
                try:
                    v = fn()
                    if v:
                        return v
                except Exception:  # the DOM changes under us
                    pass
                time.sleep(0.2)
            return fn()

        def live():
            return drv.find_element(By.ID, "conn").text == "live"
        check(wait(live, 30), "browser: the page is connected to the stream (live)")

        # Read the page's state in one script each time: the table is redrawn with every event,
        # so element handles would go stale under the background traffic.
        def table():
            return drv.execute_script("""
                return [...document.querySelectorAll('#events tbody tr')].map((tr) => ({
                    id: tr.dataset.id, run: tr.dataset.run, reason: tr.dataset.reason,
                    dst: tr.querySelector('td.dst').textContent,
                    answer: tr.querySelector('td.answer').textContent}));""")

        def edges():
            return drv.execute_script("""
                return [...document.querySelectorAll('#graph path.edge')].map((p) => ({
                    sandbox: p.dataset.sandbox, destination: p.dataset.destination,
                    reasons: p.dataset.reasons.split(','), stroke: p.getAttribute('stroke'),
                    title: p.querySelector('title').textContent}));""")

        def top_id():
            t = table()
            return t[0]["id"] if t else None

        # traffic runs in the background (the suite's loop); new refusals must show up
        subprocess.run(a.trigger, shell=True, check=False, capture_output=True)
        for spec in a.row:
            run, reason, dst = spec.split(",")
            r = wait(lambda: [t for t in table() if t["run"] == run and t["reason"] == reason and dst in t["dst"]], 20)
            check(bool(r), f"browser: the table shows {run} refused {reason} to {dst}",
                  f"{len(table())} rows")
        for spec in a.answer:
            reason, answer = spec.split(",")
            r = wait(lambda: [t for t in table() if t["reason"] == reason and t["answer"] == answer], 20)
            check(bool(r), f"browser: a {reason} refusal shows its answer '{answer}' beside the reason",
                  ", ".join(sorted({t["answer"] for t in table() if t["reason"] == reason})))
        for spec in a.label:
            reason, label, dst = spec.split(",")
            want = f"{label} ({dst})"
            r = wait(lambda: [t for t in table() if t["reason"] == reason and t["dst"] == want], 20)
            check(bool(r), f"browser: a {reason} refusal names its destination '{want}'",
                  ", ".join(sorted({t["dst"] for t in table() if t["reason"] == reason})))
        # What a person sees at 1400 x 900: every column in view, no sideways scroll, and no node
        # column on a one-node page.
        fit = drv.execute_script("""
            const w = document.getElementById('tablewrap'), vis = (c) => {
                const th = document.querySelector('#events th.' + c);
                return th && getComputedStyle(th).display !== 'none' ? th.getBoundingClientRect() : null; };
            return {inner: window.innerWidth, scroll: w.scrollWidth, client: w.clientWidth,
                    reason: vis('reason') && vis('reason').right, answer: vis('answer') && vis('answer').right, rule: vis('rule') && vis('rule').right,
                    node: vis('node') !== null};""")
        check(fit["inner"] == 1400, "browser: the window is 1400 px wide", str(fit["inner"]))
        check(fit["scroll"] <= fit["client"], "browser: the table needs no sideways scroll",
              f"scrollWidth {fit['scroll']}, clientWidth {fit['client']}")
        check(None not in (fit["reason"], fit["answer"], fit["rule"]) and
              max(fit["reason"], fit["answer"], fit["rule"]) <= fit["inner"],
              "browser: the reason, answer and rule columns are in view", str(fit))
        check(not fit["node"], "browser: a one-node page has no node column")
        for spec in a.edge:
            run, dst, reason, colour = spec.split(",")

            def edge():
                for e in edges():
                    if (f"/{run}/" in "/" + e["sandbox"] + "/" and e["destination"] == dst and
                            reason in e["reasons"]):
                        return e
                return None
            e = wait(edge, 20)
            check(e is not None, f"browser: the graph has an edge {run} -> {dst} with {reason}")
            if e is not None:
                check(e["stroke"] == colour, f"browser: that edge is coloured {colour}", e["stroke"])
                check(reason in e["title"], f"browser: the edge's hover text names {reason}", e["title"])
        # filters and pause
        drv.execute_script("document.getElementById('f-reason').value = arguments[0];"
                           "document.getElementById('f-reason').dispatchEvent(new Event('change'));", "metadata")
        shown = table()
        check(bool(shown) and all(t["reason"] == "metadata" for t in shown),
              "browser: the reason filter shows only metadata refusals", f"{len(shown)} rows")
        drv.execute_script("document.getElementById('f-reason').value = '';"
                           "document.getElementById('f-reason').dispatchEvent(new Event('change'));")
        drv.save_screenshot(a.screenshot)
        out("NOTE", f"screenshot {a.screenshot}")
        drv.find_element(By.ID, "pause").click()
        top = top_id()
        subprocess.run(a.trigger, shell=True, check=False, capture_output=True)
        time.sleep(1.5 * SCALE)
        waiting = drv.find_element(By.ID, "shown").text
        check(top_id() == top and "waiting" in waiting and not waiting.startswith("0 waiting"),
              "browser: paused, the table holds still while events wait", waiting)
        drv.find_element(By.ID, "pause").click()
        check(wait(lambda: top_id() != top, 10), "browser: resumed, the waiting events show")
        if a.restart:
            top = top_id()
            subprocess.run(a.restart, shell=True, check=True)
            ok = wait(lambda: drv.find_element(By.ID, "conn").text != "live", 5)
            out("NOTE", "the page noticed the agent going away" if ok else "the page did not notice the restart")
            subprocess.run(a.trigger, shell=True, check=False, capture_output=True)
            ok = wait(lambda: live() and top_id() != top, 30)
            if not ok:
                subprocess.run(a.trigger, shell=True, check=False, capture_output=True)
                ok = wait(lambda: live() and top_id() != top, 20)
            check(bool(ok), "browser: after an agent restart the page reconnects and new events show")
        if a.token_base:
            browser_token(a, drv, wait, live, table)
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else ""
        out("FAIL", "browser: the test ran to its end", f"{type(e).__name__}: {msg}")
        try:
            drv.save_screenshot(a.screenshot + ".failed.png")
        except Exception:
            pass
    finally:
        drv.quit()
        stop_chromium(browser)
    return 0


def start_chromium(profile):
    """Headless Chromium on a DevTools port of its choosing, in a session of its own (it runs
    a process per role); returns it and the port, once it is listening."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,900",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"]
    active = os.path.join(profile, "DevToolsActivePort")
    try:
        os.unlink(active)
    except FileNotFoundError:
        pass
    with open(os.path.join(profile, "chromium.log"), "wb") as log:
        p = subprocess.Popen(["/usr/bin/chromium"] + flags, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=log, start_new_session=True)
    start = time.time()
    end = start + 60 * SCALE
    while time.time() < end and p.poll() is None:
        try:
            with open(active) as f:
                port = int(f.readline())
            out("NOTE", f"Chromium listening on DevTools port {port} after {time.time() - start:.1f} s")
            return p, port
        except (FileNotFoundError, ValueError):
            time.sleep(0.2)
    stop_chromium(p)
    raise RuntimeError(f"Chromium did not start within {60 * SCALE:.0f} s (exit status {p.returncode}); "
                       f"its log: {os.path.join(profile, 'chromium.log')}")


def stop_chromium(p):
    """Chromium and every process it started (its session)."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10 * SCALE)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    try:
        os.killpg(p.pid, signal.SIGKILL)  # children that outlived it
    except ProcessLookupError:
        pass


def browser_token(a, drv, wait, live, table):
    """The page of an agent that requires a token: it asks for it on the first 401, keeps it
    in a cookie, and the API and the stream work with it."""
    from selenium.common.exceptions import NoAlertPresentException, WebDriverException
    from urllib.parse import quote

    def alert(secs):
        end = time.time() + secs * SCALE
        while time.time() < end:
            try:
                al = drv.switch_to.alert
                al.text  # raises until one is open
                return al
            except (NoAlertPresentException, WebDriverException):
                time.sleep(0.1)
        return None

    drv.delete_all_cookies()
    try:
        drv.get(a.token_base + "/")
    except WebDriverException:
        pass  # the prompt may open before the load ends
    al = alert(30)
    check(al is not None, "browser (token): the page loads without the token and a 401 asks for it")
    if al is None:
        return
    al.send_keys("wrong-" + a.token)
    al.accept()
    al = alert(20)
    check(al is not None and "refused" in al.text, "browser (token): a wrong token is refused and asked for again",
          "no second prompt" if al is None else al.text)
    if al is None:
        return
    al.send_keys(a.token)
    al.accept()
    check(wait(live, 30), "browser (token): with the right token the page is live (the stream sends the cookie)")
    if a.token_trigger:
        subprocess.run(a.token_trigger, shell=True, check=False, capture_output=True)
    for spec in a.token_row:
        run, reason, dst = spec.split(",")
        r = wait(lambda: [t for t in table() if t["run"] == run and t["reason"] == reason and dst in t["dst"]], 20)
        check(bool(r), f"browser (token): the table shows {run} refused {reason} to {dst}", f"{len(table())} rows")
    c = drv.get_cookie("runwall_token")
    check(c is not None and c["value"] == quote(a.token, safe="") and c.get("sameSite") == "Strict" and
          c.get("path") == "/", "browser (token): kept in a cookie runwall_token, SameSite=Strict, Path=/",
          json.dumps(c))
    check(a.token not in drv.current_url and quote(a.token, safe="") not in drv.current_url,
          "browser (token): never in the URL", drv.current_url)
    drv.refresh()
    check(alert(2) is None and wait(live, 30), "browser (token): a reload is live again without asking")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("get"); s.add_argument("url"); s.add_argument("--token"); s.add_argument("--method", default="GET")
    s = sub.add_parser("wait-ready"); s.add_argument("url"); s.add_argument("--timeout", type=float, default=10)
    s = sub.add_parser("receiver"); s.add_argument("--port", type=int, required=True); s.add_argument("--out", required=True); s.add_argument("--ready", required=True)
    s = sub.add_parser("dns-blackhole"); s.add_argument("--addr", required=True); s.add_argument("--ready", required=True)
    s = sub.add_parser("events"); s.add_argument("base"); s.add_argument("--expect", required=True)
    s = sub.add_parser("graph"); s.add_argument("base"); s.add_argument("--expect", required=True)
    s = sub.add_parser("metrics"); s.add_argument("base"); s.add_argument("--counters", required=True)
    s.add_argument("--promtool", default="promtool"); s.add_argument("--runs", required=True)
    s.add_argument("--expect", action="append"); s.add_argument("--absent", action="append")
    s = sub.add_parser("sse"); s.add_argument("base"); s.add_argument("--trigger", required=True)
    s.add_argument("--trigger2", required=True); s.add_argument("--want", required=True)
    s.add_argument("--query", default=""); s.add_argument("--min-missed", type=int, default=1)
    s = sub.add_parser("bad"); s.add_argument("base"); s.add_argument("--token")
    s = sub.add_parser("token"); s.add_argument("base"); s.add_argument("--token", required=True)
    s = sub.add_parser("hostile"); s.add_argument("base"); s.add_argument("--trigger", required=True)
    s.add_argument("--want", required=True); s.add_argument("--token")
    s = sub.add_parser("flood"); s.add_argument("base"); s.add_argument("--probe", required=True)
    s.add_argument("--source", default="127.0.0.3"); s.add_argument("--partial-source", default="127.0.0.4")
    s.add_argument("--stream-source", default="127.0.0.5"); s.add_argument("--token")
    s.add_argument("--count", type=int, default=300); s.add_argument("--per-ip", type=int, default=16)
    s.add_argument("--deadline", type=float, default=12)
    s = sub.add_parser("loris"); s.add_argument("base"); s.add_argument("--prefix", default="127.0.2")
    s.add_argument("--addresses", type=int, default=17); s.add_argument("--per-ip", type=int, default=16)
    s.add_argument("--scraper", default="127.0.3.1"); s.add_argument("--token")
    s.add_argument("--deadline", type=float, default=10)
    s = sub.add_parser("merged"); s.add_argument("base"); s.add_argument("--nodes", required=True)
    s.add_argument("--want", action="append")
    s = sub.add_parser("wait-event"); s.add_argument("base"); s.add_argument("--want", required=True)
    s.add_argument("--since", default="0"); s.add_argument("--timeout", type=float, default=5)
    s = sub.add_parser("wait-agents"); s.add_argument("base"); s.add_argument("--want", required=True)
    s.add_argument("--dns", type=int); s.add_argument("--timeout", type=float, default=10)
    s.add_argument("--what", default="dns")
    s = sub.add_parser("browser"); s.add_argument("base"); s.add_argument("--screenshot", required=True)
    s.add_argument("--profile", required=True); s.add_argument("--trigger", required=True)
    s.add_argument("--row", action="append", default=[]); s.add_argument("--edge", action="append", default=[])
    s.add_argument("--label", action="append", default=[])
    s.add_argument("--answer", action="append", default=[])
    s.add_argument("--restart")
    s.add_argument("--token-base"); s.add_argument("--token")
    s.add_argument("--token-trigger"); s.add_argument("--token-row", action="append", default=[])
    a = p.parse_args()
    fn = globals()["cmd_" + a.cmd.replace("-", "_")]
    return fn(a) or 0


if __name__ == "__main__":
    sys.exit(main())
