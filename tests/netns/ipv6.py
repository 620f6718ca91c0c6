#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""ipv6.py: the IPv6 frames and the bulk transfer of the dual-stack suite (standard library only).

    ipv6.py frame --iface IF --kind KIND --src A --dst A [--target A] [--dmac MAC]
        one hand-made Ethernet frame out of IF through a packet socket, whatever the sandbox's
        stack would send (any source, any header chain); checksums are right, so that what the
        frame meets is runwall's judgement and nothing else. KIND:
          syn            a TCP SYN SRC:40000 -> DST:443 (the spoofing checks)
          na             a neighbour advertisement (hop limit 255, override flag) for TARGET,
                         with the sender's MAC as target link-layer address (the forged NA)
          FRAMES6 names  the extension-header and fragment table (ipv6.py list)
    ipv6.py list
        the FRAMES6 table: NAME REASON, one a line
    ipv6.py sink --port P --ready FILE --duration S
        a TCP server on [::]:P that reads each connection to its end and answers with the
        number of bytes it read
    ipv6.py upload --dst A --port P --bytes N [--timeout S]
        sends N bytes, half-closes, and prints {"result": "ok"|..., "sent", "acked"} with
        what the sink counted: a transfer larger than a hop's MTU completes only when path-MTU
        discovery works (the hop's ICMPv6 packet-too-big reaches the sender)

DMAC defaults to ff:ff:ff:ff:ff:ff: the host-side veth's hook sees every frame the pod sends,
whatever its destination MAC.
"""
import argparse
import json
import socket
import struct
import sys
import time

from probe import csum  # the Internet checksum (RFC 1071), as probe.py sums IPv4's
from revoke_conn import serve_for  # a server's accept loop, a thread per connection


def a6(text):
    return socket.inet_pton(socket.AF_INET6, text)


def l4_csum(src, dst, nh, l4, off):
    """The upper-layer checksum over the IPv6 pseudo-header, written at offset OFF of L4."""
    pseudo = src + dst + struct.pack("!IxxxB", len(l4), nh)
    return l4[:off] + struct.pack("!H", csum(pseudo + l4[:off] + b"\0\0" + l4[off + 2:])) + l4[off + 2:]


def ip6(src, dst, nh, payload, plen=None, hlim=64):
    plen = len(payload) if plen is None else plen
    return struct.pack("!IHBB", 6 << 28, plen, nh, hlim) + src + dst + payload


def tcp_syn(src, dst, sport=40000, dport=443):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 2, 65535, 0, 0)
    return l4_csum(src, dst, 6, tcp, 16)


def udp(src, dst, sport=40000, dport=443, data=b""):
    u = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    return l4_csum(src, dst, 17, u, 6)


def opts(nh, n8=0):  # hop-by-hop or destination options of (n8 + 1) * 8 bytes, PadN
    return bytes([nh, n8, 1, (n8 + 1) * 8 - 4]) + bytes((n8 + 1) * 8 - 4)


def rh(nh, kind, left):
    return bytes([nh, 2, kind, left]) + bytes(20)


def fh(nh, off_m):
    return struct.pack("!BBHI", nh, 0, off_m, 0x1234)


# The extension-header abuse, with the pod's own addresses (so that the parse, not the identity,
# decides): docs/reasons.md's reason for each.
def frames6(src, dst):
    T = tcp_syn(src, dst)
    U = udp(src, dst)
    return {
        "routing-type0": ("ipv6-routing", ip6(src, dst, 43, rh(6, 0, 1) + T)),
        "routing-srv6": ("ipv6-routing", ip6(src, dst, 43, rh(6, 4, 1) + T)),
        "fragment-first": ("fragment", ip6(src, dst, 44, fh(6, 1) + T)),
        "fragment-atomic": ("fragment", ip6(src, dst, 44, fh(17, 0) + U)),
        "five-ext-headers": ("ipv6-ext-headers",
                             ip6(src, dst, 0, opts(60) + opts(60) + opts(60) + opts(60) + opts(6) + T)),
        "chain-264-bytes": ("ipv6-ext-headers", ip6(src, dst, 0, opts(60, 15) + opts(6, 16) + T)),
        "esp": ("ipv6-next-header", ip6(src, dst, 50, bytes(24))),
        "jumbogram": ("ipv6-jumbogram",
                      ip6(src, dst, 0, bytes([6, 0, 0xC2, 4]) + struct.pack("!I", 70000) + T, plen=0)),
        "hop-by-hop-not-first": ("malformed", ip6(src, dst, 60, opts(0) + opts(6) + T)),
        "payload-beyond-frame": ("malformed", ip6(src, dst, 6, T, plen=len(T) + 1)),
    }


def na(src, dst, target, mac):
    # type 136, code 0, checksum, flags R=0 S=0 O=1, target, option 2 (target link-layer)
    body = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + target + bytes([2, 1]) + mac
    return ip6(src, dst, 58, l4_csum(src, dst, 58, body, 2), hlim=255)


def cmd_frame(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    mac = s.getsockname()[4]
    src, dst = a6(args.src), a6(args.dst)
    if args.kind == "syn":
        pkt = ip6(src, dst, 6, tcp_syn(src, dst))
    elif args.kind == "na":
        pkt = na(src, dst, a6(args.target), mac)
    else:
        pkt = frames6(src, dst)[args.kind][1]
    dmac = bytes.fromhex(args.dmac.replace(":", "")) if args.dmac else b"\xff" * 6
    s.send(dmac + mac + struct.pack("!H", 0x86DD) + pkt)
    s.close()
    print(json.dumps({"sent": len(pkt) + 14, "kind": args.kind}))
    return 0


def cmd_list(args):
    z = bytes(16)
    for name, (reason, _) in frames6(z, z).items():
        print(name, reason)
    return 0


def cmd_sink(args):
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("::", args.port))
    ls.listen(8)

    def handle(c, _peer):
        n = 0
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                n += len(d)
            c.sendall(f"{n}\n".encode())
        except OSError:
            pass
        c.close()

    serve_for(ls, args.ready, args.duration, handle)
    return 0


def cmd_upload(args):
    res = {"dst": args.dst, "sent": 0}
    t0 = time.monotonic_ns()
    try:
        s = socket.create_connection((args.dst, args.port), timeout=args.timeout)
        res["mss"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        chunk = bytes(16384)
        left = args.bytes
        while left > 0:
            n = s.send(chunk[:min(left, len(chunk))])
            left -= n
            res["sent"] += n
        s.shutdown(socket.SHUT_WR)
        reply = s.makefile().readline().strip()
        res["acked"] = int(reply) if reply.isdigit() else reply
        res["mss_after"] = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        res["result"] = "ok" if res["acked"] == args.bytes else "short"
        s.close()
    except socket.timeout:
        res["result"] = "timeout"
    except OSError as e:
        res["result"] = "error"
        res["error"] = str(e)
    res["ms"] = (time.monotonic_ns() - t0) // 1000000
    print(json.dumps(res))
    return 0 if res["result"] == "ok" else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("frame")
    p.add_argument("--iface", required=True)
    p.add_argument("--kind", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--target")
    p.add_argument("--dmac")
    p.set_defaults(func=cmd_frame)
    p = sub.add_parser("list")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--duration", type=float, required=True)
    p.set_defaults(func=cmd_sink)
    p = sub.add_parser("upload")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bytes", type=int, required=True)
    p.add_argument("--timeout", type=float, default=5)
    p.set_defaults(func=cmd_upload)
    args = ap.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
