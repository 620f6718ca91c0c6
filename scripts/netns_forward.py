#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""netns_forward.py: forward TCP connections from this network namespace to an address inside
another one (the demo's node, whose loopback the host's browser cannot reach). Each connection
gets a thread that enters the other namespace (setns(2) affects the calling thread only) before
it connects, then copies bytes both ways. Standard library only.

  netns_forward.py --listen 127.0.0.1:9100 --netns /run/netns/rwdemo-node --to 127.0.0.1:9100
"""
import argparse
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client, netns, to):
    fd = os.open(netns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            client.close()
            return
    finally:
        os.close(fd)
    try:
        upstream = socket.create_connection(to, timeout=5)
        upstream.settimeout(None)
    except OSError:
        client.close()
        return
    t = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    t.start()
    pump(client, upstream)
    t.join()
    client.close()
    upstream.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", required=True)
    p.add_argument("--netns", required=True)
    p.add_argument("--to", required=True)
    a = p.parse_args()
    host, port = a.listen.rsplit(":", 1)
    to_host, to_port = a.to.rsplit(":", 1)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind((host, int(port)))
    except OSError as e:
        print(f"netns_forward.py: {a.listen}: {e}", file=sys.stderr)
        return 1
    srv.listen(64)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=serve, args=(client, a.netns, (to_host, int(to_port))),
                         daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
