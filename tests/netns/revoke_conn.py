#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""revoke_conn.py: long-lived TCP connections for the revoke suite, and the server they talk to.

    revoke_conn.py server --port PORT --ready FILE --duration S [--dual]
    revoke_conn.py client --dst ADDR --port PORT --mode MODE --duration S

The client connects, names its MODE in a first line, prints {"connected": ...} and then:

    send         sends a line every 100 ms (and reads whatever comes back);
    server-next  only reads: the server writes it a line every 200 ms;
    idle         only reads: nobody sends anything.

Either end prints one JSON line when its socket fails: {"mode", "errno", "t_ns"} (t_ns: the
monotonic clock, which every namespace shares), or {"errno": "timeout"} after S seconds. The
server prints one line per connection it loses. With --dual it listens on [::] for both
families, and names an IPv4 peer as IPv4 ("10.1.2.3:41000"), an IPv6 one as "ADDR6:PORT". Standard library only.
"""
import argparse
import errno as E
import json
import os
import select
import socket
import sys
import threading
import time


def say(**kv):
    sys.stdout.write(json.dumps(kv) + "\n")
    sys.stdout.flush()


def errname(e):
    return E.errorcode.get(e.errno, str(e.errno)) if isinstance(e, OSError) else str(e)


def run_conn(sock, mode, duration, who):
    """Drives one connection until its socket fails or `duration` ends; returns the report."""
    end = time.monotonic() + duration
    next_send = time.monotonic()
    period = 0.1 if mode == "send" else 0.2
    sends = (mode == "send" and who == "client") or (mode == "server-next" and who == "server")
    try:
        while time.monotonic() < end:
            if sends and time.monotonic() >= next_send:
                sock.send(b"x\n")
                next_send += period
            wait = max(0.0, min(next_send - time.monotonic(), 0.05)) if sends else 0.05
            r, _, _ = select.select([sock], [], [], wait)
            if r:
                data = sock.recv(4096)
                if not data:
                    return {"mode": mode, "errno": "EOF", "t_ns": time.monotonic_ns()}
        return {"mode": mode, "errno": "timeout"}
    except OSError as e:
        return {"mode": mode, "errno": errname(e), "t_ns": time.monotonic_ns()}


def serve_for(ls, ready, duration, handle):
    """Writes the file `ready` once `ls` listens, then accepts for `duration` seconds, each
    connection handled by handle(conn, peer) in a thread of its own."""
    with open(ready, "w") as f:
        f.write("ready\n")
    ls.settimeout(1.0)
    end = time.monotonic() + duration
    while time.monotonic() < end:
        try:
            conn, peer = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=handle, args=(conn, peer), daemon=True).start()


def serve(args):
    ls = socket.socket(socket.AF_INET6 if args.dual else socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.dual:
        ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    ls.bind(("::" if args.dual else "0.0.0.0", args.port))
    ls.listen(16)
    lock = threading.Lock()

    def handle(s, peer):
        f = s.makefile("rb")
        mode = f.readline().decode().strip()
        rep = run_conn(s, mode, args.duration, "server")
        host = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]
        rep["peer"] = f"{host}:{peer[1]}"
        with lock:
            say(**rep)
        s.close()

    serve_for(ls, args.ready, args.duration, handle)


def client(args):
    s = socket.create_connection((args.dst, args.port), timeout=5)
    s.settimeout(None)
    s.send(f"{args.mode}\n".encode())
    local = s.getsockname()
    say(connected=f"{local[0]}:{local[1]}", mode=args.mode)
    say(**run_conn(s, args.mode, args.duration, "client"))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--dual", action="store_true", help="listen on [::] for IPv4 and IPv6")
    p = sub.add_parser("client")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=["send", "server-next", "idle"], required=True)
    p.add_argument("--duration", type=float, required=True)
    args = ap.parse_args()
    serve(args) if args.cmd == "server" else client(args)


if __name__ == "__main__":
    main()
