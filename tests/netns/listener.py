#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""listener.py: every server of the end-to-end test node, one process per network namespace.

Each TCP listener accepts, writes one greeting line ("hello ADDR:PORT\n", the address the client
reached) and then echoes every line it receives until the client goes away; each UDP listener
echoes every datagram. Nothing here ever refuses or filters, so a connection that does not
complete can only be runwall's doing.

    listener.py [--ready FILE] [--tcp ADDR:PORT ...] [--udp ADDR:PORT ...]

ADDR may be 0.0.0.0, or an IPv6 address in brackets ([::], [fd00::1]). FILE is written once every socket is bound, so the caller knows the
servers are up. Standard library only.
"""
import argparse
import asyncio
import os
import signal
import socket
import sys


def addr_port(text):
    addr, _, port = text.rpartition(":")
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    if not addr or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not ADDR:PORT or [ADDR6]:PORT")
    return addr, int(port)


def bound_socket(addr, port, kind):
    """A socket bound to ADDR:PORT, IPv6 when ADDR is; an IPv6 one serves IPv6 only, so that
    a wildcard [::] listener and a 0.0.0.0 one share a port."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(fam, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # IP_FREEBIND (IPV6_FREEBIND): addresses are configured before we start, but a listener
    # must never be the reason a test fails, so do not depend on ordering.
    if fam == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, 78, 1)
    else:
        sock.setsockopt(socket.IPPROTO_IP, 15, 1)
    sock.bind((addr, port))
    return sock


async def serve_tcp(addr, port):
    async def handle(reader, writer):
        try:
            # The address the client reached, not the wildcard the socket is bound to.
            local = writer.get_extra_info("sockname")
            writer.write(f"hello {local[0]}:{local[1]}\n".encode())
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    break
                writer.write(line)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                writer.close()
            except OSError:
                pass

    sock = bound_socket(addr, port, socket.SOCK_STREAM)
    sock.listen(512)
    sock.setblocking(False)
    return await asyncio.start_server(handle, sock=sock)


class Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, peer):
        self.transport.sendto(data, peer)

    def error_received(self, exc):
        pass


async def serve_udp(addr, port):
    sock = bound_socket(addr, port, socket.SOCK_DGRAM)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(Echo, sock=sock)
    return transport


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tcp", type=addr_port, action="append", default=[])
    ap.add_argument("--udp", type=addr_port, action="append", default=[])
    ap.add_argument("--ready", help="file to write once every socket is bound")
    args = ap.parse_args()

    keep = []
    for addr, port in args.tcp:
        keep.append(await serve_tcp(addr, port))
    for addr, port in args.udp:
        keep.append(await serve_udp(addr, port))
    if args.ready:
        tmp = args.ready + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.rename(tmp, args.ready)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except OSError as e:
        print(f"listener.py: {e}", file=sys.stderr)
        sys.exit(1)
