#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""hold_server.py: a server that holds each connection in one phase of an HTTP(S) exchange and
never goes further, for the PolicyWatch client's timeouts and its plain-HTTP rule
(tests/netns/test_policy_watch.sh, section link). Python 3 from Debian, standard library only.

  hold_server.py --listen ADDR:PORT --mode MODE [--cert FILE --key FILE] --log FILE
                 [--ready FILE]

  tcp      accept the TCP connection; never start TLS
  tls      complete the TLS handshake, read the request; send nothing
  headers  ... then the status line and one header, and a byte of the next header a second
  body     ... then a whole 200's headers; send nothing more
  plain    no TLS: read the request; send nothing (what a plain http:// client sends)

Each connection is one line in --log: "connection N from ADDR", then once the request is read
"request N: <its first line>; authorization: yes|no". Connections are held until the client
closes them or the server ends.
"""
import argparse
import socket
import ssl
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--mode", required=True, choices=["tcp", "tls", "headers", "body", "plain"])
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready")
    args = ap.parse_args()
    tls = args.mode in ("tls", "headers", "body")
    if tls and not (args.cert and args.key):
        sys.exit("--mode %s needs --cert and --key" % args.mode)
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
    lock = threading.Lock()

    def log(text):
        with lock, open(args.log, "a") as f:
            f.write(text + "\n")

    def read_request(conn):
        buf = b""
        while b"\r\n\r\n" not in buf and len(buf) < 65536:
            data = conn.recv(4096)
            if not data:
                return None
            buf += data
        return buf

    def hold(conn, n, peer):
        log("connection %d from %s" % (n, peer[0]))
        try:
            if args.mode == "tcp":
                while conn.recv(4096):
                    pass
                return
            if tls:
                conn = ctx.wrap_socket(conn, server_side=True)
            req = read_request(conn)
            if req is None:
                return
            first = req.split(b"\r\n", 1)[0].decode(errors="replace")
            auth = b"\r\nauthorization:" in req.lower()
            log("request %d: %s; authorization: %s" % (n, first, "yes" if auth else "no"))
            if args.mode == "headers":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n")
                for b in b"X-Held: " * 1000:
                    conn.sendall(bytes([b]))
                    time.sleep(1)
            elif args.mode == "body":
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n")
            while conn.recv(4096):
                pass
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    host, port = args.listen.rsplit(":", 1)
    srv = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, int(port)))
    srv.listen(16)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write("ready\n")
    n = 0
    while True:
        conn, peer = srv.accept()
        n += 1
        threading.Thread(target=hold, args=(conn, n, peer), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
