#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""policy_server.py: a reference PolicyWatch server (docs/policy-watch.md), for the suites and
for a controller team to read. Python 3 from Debian, standard library only.

  policy_server.py --listen ADDR:PORT --cert FILE --key FILE [--client-ca FILE]
                   [--token-file FILE] --state FILE [--control 127.0.0.1:PORT]
                   [--heartbeat SECONDS] [--acks FILE] [--ready FILE]

The watch side (TLS, what an agent talks to):
  GET  /v1/watch?node=NAME&revision=R   one long-lived answer of newline-delimited JSON: a whole
                                        snapshot unless R is the server's revision (then a
                                        heartbeat at once), then every change as it happens, a
                                        heartbeat when idle
  POST /v1/ack                          an agent's acknowledgement, recorded (one JSON line each
                                        in --acks) and answered 204

A node whose revision is ahead of the server's makes the server continue its sequence above it;
an ack refusing the server's snapshot at snapshot.revision has it sent again above the node's
revision in force (docs/policy-watch.md, "Ordering and revisions").

The control side (plain HTTP, loopback only: how a test drives it):
  POST /snapshot         body: a whole snapshot; it becomes the server's state, sent to every stream
  POST /upsert           body: one run; revision = state's + 1, base = state's; sent as run-upsert
  POST /delete?id=RUN    sent as run-delete
  POST /raw              body: bytes sent as they are to every stream (malformed, stale...); the
                         state is left alone. ?close=1: each stream is closed after them
  POST /mode?m=normal|stall|silent  stall: a heartbeat one byte a second; silent: nothing
  GET  /state            {"revision": R, "streams": N, "connections": [...], "acks": N}
  GET  /acks             every ack recorded, with its arrival time (monotonic ns)
  GET  /acks?revision=R&wait=S  the acks of revision R, answered as soon as the first arrives
                         (within S seconds; [] if none came)

State (the snapshot and its revision) is kept in --state, rewritten on every change, so that a
restarted server resumes where it was: an agent that reconnects with the server's revision gets
no snapshot.
"""
import argparse
import json
import os
import queue
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import socketserver
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        # HTTPServer's own asks DNS for the address's name (getfqdn): no DNS in a test namespace.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class State:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.acked = threading.Condition(self.lock)  # notified at each ack
        self.snapshot = {"revision": 0, "runs": []}
        self.streams = []        # one queue per open stream
        self.connections = []    # what each watch request asked for
        self.acks = []
        self.mode = "normal"
        self.save_every = 0
        self.dirty = False
        self.run_at = None       # run id -> its index in snapshot["runs"], for /upsert
        if os.path.exists(path):
            with open(path) as f:
                self.snapshot = json.load(f)

    @property
    def revision(self):
        return self.snapshot.get("revision", 0)

    def save(self):
        """The state file, at each change; with save_every (seconds), at most that often, from
        a thread of its own (a benchmark's pace: a node's snapshot is 100 kB of JSON)."""
        if self.save_every:
            self.dirty = True
            return
        self.write()

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.snapshot, f)
        os.replace(tmp, self.path)

    def saver(self):
        while True:
            time.sleep(self.save_every)
            with self.lock:
                if self.dirty:
                    self.dirty = False
                    self.write()

    def index_of(self, rid):
        """Where run rid is in the snapshot's runs (None: not there), under self.lock: from the
        index when it still says so, else from an index built again (after a snapshot, a
        delete, or for a run not there)."""
        runs = self.snapshot.get("runs", [])
        at = self.run_at.get(rid) if self.run_at else None
        if at is not None and at < len(runs) and runs[at].get("id") == rid:
            return at
        self.run_at = {r.get("id"): i for i, r in enumerate(runs)}
        return self.run_at.get(rid)

    def broadcast(self, data, close=False):
        for q in self.streams:
            q.put((data, close))


def line(obj):
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


# ---- the contract's revision rules (docs/policy-watch.md, "Ordering and revisions") -----------
def first_message(st, rev):
    """What a new stream sends first, under st.lock. A node at the server's revision is sent a
    heartbeat at once (it renews the node's lease). A node ahead of the server (a server that
    restarted from older state) is never sent a snapshot it would refuse: the server's sequence
    jumps above the node's revision, and the snapshot goes at that revision."""
    if rev and rev == st.revision:
        return line({"type": "heartbeat"})
    if rev > st.revision:
        jump_above(st, rev)
    return line({"type": "snapshot", "snapshot": st.snapshot})


def jump_above(st, rev):
    """Continue the server's sequence above `rev`, under st.lock."""
    st.snapshot["revision"] = rev + 1
    st.save()


def on_refused_revision(st, ack):
    """An ack refusing the server's current snapshot at snapshot.revision (a node whose revision
    in force is at or above it: a restarted server, or a node that adopted a file of that revision
    with other content): the snapshot again, above the node's revision. Under st.lock. Once per
    refusal: the snapshot sent is above in_force, which the node takes."""
    if (ack.get("ok") is False and ack.get("type") == "snapshot" and
            ack.get("path") == "snapshot.revision" and ack.get("revision") == st.revision and
            isinstance(ack.get("in_force"), int) and ack["in_force"] >= st.revision):
        jump_above(st, ack["in_force"])
        st.broadcast(line({"type": "snapshot", "snapshot": st.snapshot}))


def drain(sock):
    """After a refused TLS handshake, read what the client still sends (up to 1 s) before
    closing: closing with unread bytes sends a reset, and the client would log `Broken pipe`
    instead of the alert the handshake sent it."""
    try:
        sock.settimeout(1)
        while socket.socket.recv(sock, 4096):
            pass
    except OSError:
        pass


def make_watch_handler(st, args, token):
    class Watch(BaseHTTPRequestHandler):
        # HTTP/1.1, so that an agent's acks reuse one connection (one TLS handshake, not one
        # per ack); the stream says "Connection: close": its body ends when the connection does.
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            sys.stderr.write("watch: " + fmt % a + "\n")

        def authorized(self):
            if token is None:
                return True
            if self.headers.get("Authorization", "") == "Bearer " + token:
                return True
            self.send_error(401, "bad or missing bearer token")
            return False

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            if u.path != "/v1/watch":
                return self.send_error(404)
            if not self.authorized():
                return
            q = urllib.parse.parse_qs(u.query)
            node = q.get("node", [""])[0]
            try:
                rev = int(q.get("revision", ["0"])[0])
            except ValueError:
                return self.send_error(400, "revision: not an integer")
            mine = queue.Queue()
            with st.lock:
                st.connections.append({"node": node, "revision": rev, "ns": time.monotonic_ns()})
                first = first_message(st, rev)
                st.streams.append(mine)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                if first:
                    self.wfile.write(first)
                    self.wfile.flush()
                self.stream(mine)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                pass
            finally:
                with st.lock:
                    st.streams.remove(mine)

        def stream(self, mine):
            hb = line({"type": "heartbeat"})
            while True:
                if st.mode == "stall":
                    for b in hb:  # one byte a second: never a whole message before the cut
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(1)
                        if st.mode != "stall":
                            return  # half a line sent: this stream is done
                    continue
                try:
                    data, close = mine.get(timeout=args.heartbeat)
                except queue.Empty:
                    if st.mode == "normal":
                        self.wfile.write(hb)
                        self.wfile.flush()
                    continue
                self.wfile.write(data)
                self.wfile.flush()
                if close:
                    return

        def do_POST(self):
            if urllib.parse.urlsplit(self.path).path != "/v1/ack":
                return self.send_error(404)
            if not self.authorized():
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            try:
                ack = json.loads(body)
            except ValueError:
                return self.send_error(400, "not JSON")
            ack["_ns"] = time.monotonic_ns()
            with st.lock:
                st.acks.append(ack)
                st.acked.notify_all()
                on_refused_revision(st, ack)
                if args.acks:
                    with open(args.acks, "a") as f:
                        f.write(json.dumps(ack) + "\n")
            self.send_response(204)
            self.end_headers()

    return Watch


def make_control_handler(st):
    class Control(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):
            pass

        def reply(self, obj, code=200):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(u.query)
            with st.lock:
                if u.path == "/state":
                    return self.reply({"revision": st.revision, "streams": len(st.streams),
                                       "connections": st.connections, "acks": len(st.acks),
                                       "mode": st.mode})
                if u.path == "/acks" and "revision" in q:
                    rev = int(q["revision"][0])
                    mine = lambda: [a for a in st.acks if a.get("revision") == rev]
                    st.acked.wait_for(mine, float(q.get("wait", ["0"])[0]))
                    return self.reply(mine())
                if u.path == "/acks":
                    return self.reply(st.acks)
            self.reply({"error": "unknown"}, 404)

        def do_POST(self):
            u = urllib.parse.urlsplit(self.path)
            q = urllib.parse.parse_qs(u.query)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            now = time.monotonic_ns()
            with st.lock:
                if u.path == "/raw":
                    st.broadcast(body, close=q.get("close", ["0"])[0] == "1")
                    return self.reply({"sent_ns": now})
                if u.path == "/mode":
                    st.mode = q.get("m", ["normal"])[0]
                    # ns: after the switch (under the lock, as each stream's ns): a stream
                    # of a later ns runs in this mode from its start
                    return self.reply({"mode": st.mode, "ns": time.monotonic_ns()})
                base = st.revision
                if u.path == "/snapshot":
                    st.snapshot = json.loads(body)
                    msg = {"type": "snapshot", "snapshot": st.snapshot}
                elif u.path == "/upsert":
                    run = json.loads(body)
                    runs = st.snapshot.setdefault("runs", [])
                    # In place: a run that moves in runs[] has its verdicts judged again.
                    at = st.index_of(run["id"])
                    if at is not None:
                        runs[at] = run
                    else:
                        runs.append(run)
                        st.run_at[run["id"]] = len(runs) - 1
                    st.snapshot["revision"] = base + 1
                    msg = {"type": "run-upsert", "revision": base + 1, "base": base, "run": run}
                elif u.path == "/delete":
                    rid = q["id"][0]
                    st.snapshot["runs"] = [r for r in st.snapshot.get("runs", []) if r.get("id") != rid]
                    st.snapshot["revision"] = base + 1
                    msg = {"type": "run-delete", "revision": base + 1, "base": base, "id": rid}
                else:
                    return self.reply({"error": "unknown"}, 404)
                st.save()
                st.broadcast(line(msg))
                return self.reply({"revision": st.revision, "sent_ns": now})

    return Control


def addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca")
    ap.add_argument("--token-file")
    ap.add_argument("--state", required=True)
    ap.add_argument("--control")
    ap.add_argument("--heartbeat", type=float, default=5)
    ap.add_argument("--acks")
    ap.add_argument("--ready")
    ap.add_argument("--save-every", type=float, default=0,
                    help="write the state file at most every so many seconds (0: at each change)")
    args = ap.parse_args()

    st = State(args.state)
    st.save_every = args.save_every
    if st.save_every:
        threading.Thread(target=st.saver, daemon=True).start()
    token = None
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    if args.client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: no certificate, no stream
        ctx.load_verify_locations(args.client_ca)

    class TLSServer(Server):
        def get_request(self):
            sock, peer = self.socket.accept()
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), peer

        def finish_request(self, request, client_address):
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError) as e:
                sys.stderr.write("watch: TLS handshake with %s refused: %s\n" % (client_address[0], e))
                drain(request)
                return
            super().finish_request(request, client_address)

    srv = TLSServer(addr(args.listen), make_watch_handler(st, args, token))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    if args.control:
        host, port = addr(args.control)
        if not host.startswith("127."):
            sys.exit("--control: loopback only")
        ctl = Server((host, port), make_control_handler(st))
        threading.Thread(target=ctl.serve_forever, daemon=True).start()
    if args.ready:
        with open(args.ready, "w") as f:
            f.write("ready\n")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
