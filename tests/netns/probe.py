#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""probe.py: the client side of the end-to-end tests (standard library only).

Every time printed is CLOCK_MONOTONIC in nanoseconds, the clock of bpf_ktime_get_ns() and so of
the `ts_ns` of runwall's events: probe times and event times compare directly.

  probe.py tcp DST PORT [--src IP] [--timeout S]     one attempt: ok | refused | timeout | partial
  probe.py udp DST PORT [--src IP] [--timeout S]
  probe.py batch [--timeout S] [--count-iface IF] < SPEC
                                                      many attempts at once; SPEC lines are
                                                      "ID tcp|udp DST PORT [SRC]", the output
                                                      one JSON object per attempt, in SPEC order;
                                                      with --count-iface, "pkts"/"syns": what
                                                      each attempt sent out of IF, counted there
  probe.py loop --target NAME=DST:PORT ... --out F    attempts every --interval until SIGTERM,
                                                      one JSON line per attempt (restart test)
  probe.py stream DST PORT --out F                    one long-lived TCP connection exchanging
                                                      a line every --interval (live change test)
  probe.py knock DST PORT                             a fresh connect every --interval until one
                                                      succeeds; prints when (live change test)
  probe.py flood DST PORT --duration S                UDP datagrams every --interval from before
                                                      the sandbox is even wired: did any get an
                                                      answer? (a new veth must never pass one)
  probe.py raw-tcp --src IP --sport N --dst IP --dport N [--flags S|SA]
                                                      one hand-made TCP segment through a raw
                                                      socket (IP_HDRINCL): any source address
  probe.py ride --iface IF --dst IP --dport N        copy another socket's TCP flow: the next
                                                      segment of the first one seen leaving IF
                                                      to DST:N, sent from a raw socket
  probe.py errno tcp|udp DST PORT [--timeout S]       one blocking attempt, reported by errno:
                                                      connect() for TCP; for UDP a connected
                                                      socket's send, then recv: "errno" is the
                                                      error's name ("ECONNREFUSED",
                                                      "EHOSTUNREACH"), "ok" or "timeout", with
                                                      the milliseconds it took
  probe.py syn-flood --src IP --dst IP --dport N --duration S
                                                      raw SYNs from --src, a new source port
                                                      each, as fast as one CPU sends them; prints
                                                      how many were sent
  probe.py arp --iface IF --sender-ip IP --target-ip IP
                                                      one ARP request with any sender address
  probe.py sniff --iface IF [--src IP] [--sport N] [--dst IP] [--dport N] --duration S
                                                      count the matching IPv4 packets received,
                                                      until --duration or SIGTERM
  probe.py hooks --dev IF                             the programs on IF's hooks, asked of the
                                                      kernel, not of runwall: tcx (BPF_PROG_QUERY;
                                                      "tcx": false when the kernel has no tcx,
                                                      the way runwall finds out) and the clsact
                                                      qdisc's filters (rtnetlink)
  probe.py timed --out F -- CMD ARGS...               run CMD, record when it returned
  probe.py now                                        CLOCK_MONOTONIC now

A DST with a colon is IPv6 (tcp, udp, batch, errno; fe80::…%eth0 for a link-local one): the
socket is AF_INET6. The raw-packet commands and the sniffer are IPv4 only (ipv6.py has the
IPv6 frames).

Results: "ok" = connected, got the listener's greeting and the echo of a line (so data flowed
both ways); "refused" = a RST or an ICMP error came back (runwall's answer to a refusal of the
sandbox's own packet, or a closed port); "timeout" = nothing came back (a silent drop: before
the source is proven, into a sandbox, or "refusal": "drop"); "partial" = connected but the
exchange then stalled.

A refused TCP attempt with a timeout under one second sends exactly one SYN: Linux retransmits a
SYN after its initial RTO of 1 s, and closing a socket in SYN-SENT sends nothing. The tests rely
on that to count packets exactly. With longer timeouts (RW_WAIT_SCALE, under emulation) the
kernel retransmits: `batch --count-iface` then counts what each attempt really sent, on the
sender's own interface (an AF_PACKET socket sees every frame as it leaves, synchronously, so
once the attempt's socket is closed its count is final), and the tests compare with that.
"""
import argparse
import asyncio
import errno
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

now = time.monotonic_ns


def family(addr):
    """AF_INET6 for an IPv6 address (any with a colon, a %zone allowed), else AF_INET."""
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def wildcard(addr):
    return "::" if family(addr) == socket.AF_INET6 else "0.0.0.0"


def emit(obj, out=sys.stdout):
    out.write(json.dumps(obj, separators=(",", ":")) + "\n")
    out.flush()


# ---- TCP and UDP attempts (asyncio, so that a batch runs all at once) ---------------------------

def attempt_socket(proto, dst, port, src):
    """A non-blocking socket for an attempt, bound to src (any address when none), and the
    attempt's result so far."""
    sock = socket.socket(family(dst), socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
    sock.setblocking(False)
    sock.bind((src or wildcard(dst), 0))
    res = {"proto": proto, "src": src or "", "sport": sock.getsockname()[1], "dst": dst,
           "dport": port, "t0": now()}
    return sock, res


def ended(res, result, error=None):
    """The attempt's result, and what went wrong when it says."""
    res["result"] = result
    if error is not None:
        res["error"] = error
    return res


async def attempt_tcp(dst, port, src=None, timeout=0.5, exchange_timeout=1.0):
    loop = asyncio.get_running_loop()
    sock, res = attempt_socket("tcp", dst, port, src)
    try:
        try:
            await asyncio.wait_for(loop.sock_connect(sock, (dst, port)), timeout)
        except asyncio.TimeoutError:
            return ended(res, "timeout")
        except (ConnectionRefusedError, ConnectionResetError):
            return ended(res, "refused")
        except OSError as e:
            return ended(res, "refused", str(e))
        res["src"] = sock.getsockname()[0]
        res["t_connected"] = now()
        try:
            reader, writer = await asyncio.open_connection(sock=sock)
            greeting = await asyncio.wait_for(reader.readline(), exchange_timeout)
            line = f"ping {res['sport']}\n".encode()
            writer.write(line)
            await writer.drain()
            echo = await asyncio.wait_for(reader.readline(), exchange_timeout)
            writer.close()
        except (asyncio.TimeoutError, OSError) as e:
            return ended(res, "partial", type(e).__name__)
        if not greeting.startswith(b"hello ") or echo != line:
            return ended(res, "partial", f"greeting {greeting!r} echo {echo!r}")
        res["greeting"] = greeting.decode().strip()
        return ended(res, "ok")
    finally:
        res["t1"] = now()
        try:
            # connect() bound the source address even if nothing came back.
            res["src"] = sock.getsockname()[0]
        except OSError:
            pass
        sock.close()


async def attempt_udp(dst, port, src=None, timeout=0.5):
    loop = asyncio.get_running_loop()
    sock, res = attempt_socket("udp", dst, port, src)
    try:
        sock.connect((dst, port))
        res["src"] = sock.getsockname()[0]
        payload = f"ping {res['sport']}\n".encode()
        await loop.sock_sendall(sock, payload)
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 2048), timeout)
        except asyncio.TimeoutError:
            return ended(res, "timeout")
        except (ConnectionRefusedError, OSError):
            return ended(res, "refused")
        return ended(res, "ok" if data == payload else "partial")
    finally:
        res["t1"] = now()
        sock.close()


def attempt(proto, dst, port, src=None, timeout=0.5):
    if proto == "tcp":
        return attempt_tcp(dst, port, src, timeout)
    if proto == "udp":
        return attempt_udp(dst, port, src, timeout)
    raise SystemExit(f"probe.py: unknown protocol {proto!r}")


def cmd_single(args):
    res = asyncio.run(attempt(args.cmd, args.dst, args.port, args.src, args.timeout))
    if args.json:
        emit(res)
    else:
        print(res["result"])
    return 0


def flow_key(frame):
    """(proto, src, sport, dst, dport, tcp flags) of an IPv4 TCP/UDP Ethernet frame, or None."""
    if len(frame) < 34 or struct.unpack("!H", frame[12:14])[0] != 0x0800:
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0xF) * 4
    proto = ip[9]
    if proto not in (6, 17) or len(ip) < ihl + 4:
        return None
    sport, dport = struct.unpack("!HH", ip[ihl:ihl + 4])
    flags = ip[ihl + 13] if proto == 6 and len(ip) >= ihl + 14 else 0
    return (proto, socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport, flags)


class SentCounter:
    """Counts the frames leaving IF per flow, from before the first attempt to after the last."""

    def __init__(self, iface):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.s.bind((iface, 0))
        self.s.setblocking(False)
        self.flows = {}

    def drain(self):
        while True:
            try:
                frame, addr = self.s.recvfrom(65535)
            except BlockingIOError:
                break
            if addr[2] != socket.PACKET_OUTGOING:
                continue
            k = flow_key(frame)
            if k is None:
                continue
            c = self.flows.setdefault(k[:5], [0, 0, 0])
            c[0] += 1
            c[1] += len(frame)
            if k[0] == 6 and k[5] & 0x12 == 0x02:  # SYN without ACK
                c[2] += 1
        # PACKET_STATISTICS (SOL_PACKET 263, 6): tp_packets, tp_drops; reading resets them.
        _, drops = struct.unpack("II", self.s.getsockopt(263, 6, 8))
        self.s.close()
        return drops

    def fill(self, res, drops):
        proto = 6 if res["proto"] == "tcp" else 17
        c = self.flows.get((proto, res["src"], res["sport"], res["dst"], res["dport"]), [0, 0, 0])
        res["pkts"], res["bytes"] = c[0], c[1]
        if proto == 6:
            res["syns"] = c[2]
        if drops:
            res["count_drops"] = drops


def cmd_batch(args):
    specs = []
    for n, line in enumerate(sys.stdin, 1):
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if len(f) not in (4, 5) or not f[3].isdigit():
            raise SystemExit(f"probe.py batch: line {n}: want 'ID tcp|udp DST PORT [SRC]'")
        specs.append((f[0], f[1], f[2], int(f[3]), f[4] if len(f) == 5 else None))

    async def run():
        return await asyncio.gather(*(attempt(p, d, port, s, args.timeout)
                                      for _, p, d, port, s in specs))

    counter = SentCounter(args.count_iface) if args.count_iface else None
    results = asyncio.run(run())
    # Every attempt's socket is closed: nothing more of theirs can leave.
    drops = counter.drain() if counter else 0
    for spec, res in zip(specs, results):
        res["id"] = spec[0]
        if counter:
            counter.fill(res, drops)
        emit(res)
    return 0


def cmd_loop(args):
    targets = []
    for t in args.target:
        name, _, rest = t.partition("=")
        dst, _, port = rest.rpartition(":")
        targets.append((name, args.proto, dst, int(port)))
    out = open(args.out, "a", buffering=1) if args.out else sys.stdout

    async def one(name, proto, dst, port):
        res = await attempt(proto, dst, port, None, args.timeout)
        res["id"] = name
        emit(res, out)

    async def run():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        tasks = set()
        while not stop.is_set():
            for t in targets:
                task = asyncio.ensure_future(one(*t))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            try:
                await asyncio.wait_for(stop.wait(), args.interval)
            except asyncio.TimeoutError:
                pass
        if tasks:
            await asyncio.wait(tasks)

    asyncio.run(run())
    return 0


# ---- Long-lived connection and reconnection (live change) --------------------------------------

def cmd_stream(args):
    """Sends "seq N" every interval and logs each send and each echo with its time."""
    out = open(args.out, "a", buffering=1) if args.out else sys.stdout
    sock = socket.create_connection((args.dst, args.port), timeout=2)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = sock.makefile("rb")
    f.readline()  # greeting
    sock.setblocking(False)
    emit({"ev": "connected", "src": sock.getsockname()[0], "sport": sock.getsockname()[1],
          "t": now()}, out)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    deadline = now() + int(args.duration * 1e9) if args.duration else None
    seq, buf, nxt = 0, b"", now()
    interval = int(args.interval * 1e9)
    while not stop and (deadline is None or now() < deadline):
        t = now()
        if t >= nxt:
            try:
                sock.send(f"seq {seq}\n".encode())
                emit({"ev": "send", "seq": seq, "t": now()}, out)
            except BlockingIOError:
                emit({"ev": "blocked", "seq": seq, "t": now()}, out)
            except OSError as e:
                emit({"ev": "error", "error": str(e), "t": now()}, out)
                break
            seq += 1
            nxt += interval
            if nxt < t:
                nxt = t + interval
        r, _, _ = select.select([sock], [], [], max(0, (nxt - now()) / 1e9))
        if r:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                emit({"ev": "error", "error": str(e), "t": now()}, out)
                break
            if not data:
                emit({"ev": "closed", "t": now()}, out)
                break
            t = now()
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(b"seq "):
                    emit({"ev": "echo", "seq": int(line[4:]), "t": t}, out)
    # Whether a segment was lost either way: this end's retransmissions (tcpi_total_retrans)
    # and the segments it received out of order (tcpi_rcv_ooopack, Linux 5.4+), read from
    # struct tcp_info (include/uapi/linux/tcp.h) at their offsets.
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
        retrans = struct.unpack_from("I", info, 100)[0]
        ooo = struct.unpack_from("I", info, 224)[0] if len(info) >= 228 else None
        emit({"ev": "tcp", "retrans": retrans, "ooo": ooo, "t": now()}, out)
    except OSError as e:
        emit({"ev": "error", "error": f"TCP_INFO: {e}", "t": now()}, out)
    sock.close()
    return 0


def cmd_knock(args):
    """A new connect every interval until one completes: when did the first one get through?"""
    pending = {}  # fd -> (sock, sport, t_syn)
    interval = int(args.interval * 1e9)
    give_up = int(args.connect_timeout * 1e9)
    start = now()
    deadline = start + int(args.max * 1e9)
    nxt = start
    attempts = 0
    poller = select.poll()
    try:
        while now() < deadline:
            t = now()
            if t >= nxt:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.bind(("0.0.0.0", 0))
                t_syn = now()
                err = s.connect_ex((args.dst, args.port))
                attempts += 1
                if err not in (0, 115):  # EINPROGRESS
                    s.close()
                else:
                    pending[s.fileno()] = (s, s.getsockname()[1], t_syn)
                    poller.register(s.fileno(), select.POLLOUT)
                nxt += interval
            for fd, _ in poller.poll(max(0, (nxt - now()) // 1000000)):
                s, sport, t_syn = pending[fd]
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    emit({"result": "ok", "sport": sport, "t_syn": t_syn, "t_ok": now(),
                          "attempts": attempts, "start": start})
                    return 0
                poller.unregister(fd)
                del pending[fd]
                s.close()
            # Abandon attempts older than connect_timeout: before the first SYN
            # retransmission, so each attempt is exactly one SYN.
            t = now()
            for fd, (s, sport, t_syn) in list(pending.items()):
                if t - t_syn > give_up:
                    poller.unregister(fd)
                    del pending[fd]
                    s.close()
        emit({"result": "timeout", "attempts": attempts, "start": start})
        return 1
    finally:
        for s, _, _ in pending.values():
            s.close()


def cmd_flood(args):
    """Sends whether or not there is a route yet (errors are counted, not fatal)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    if args.ready:
        with open(args.ready, "w") as f:
            f.write("ready\n")
    end = now() + int(args.duration * 1e9)
    sent = errors = 0
    first_sent = None
    answers = []
    while now() < end:
        try:
            s.sendto(f"flood {sent}\n".encode(), (args.dst, args.port))
            if first_sent is None:
                first_sent = now()
            sent += 1
        except OSError:
            errors += 1
        r, _, _ = select.select([s], [], [], args.interval)
        if r:
            try:
                data, peer = s.recvfrom(2048)
                answers.append({"t": now(), "data": data.decode(errors="replace").strip()})
            except OSError:
                pass
    emit({"sent": sent, "send_errors": errors, "first_sent": first_sent,
          "answers": len(answers), "first_answers": answers[:3]})
    return 0


# ---- Raw packets ----------------------------------------------------------------------------------

def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp_segment(src, sport, dst, dport, flags, seq=1000, ack=0, payload=b""):
    bits = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10}
    fl = 0
    for c in flags:
        fl |= bits[c]
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, fl, 64240, 0, 0) + payload
    pseudo = s + d + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0x1234, 0x4000, 64,
                     socket.IPPROTO_TCP, 0, s, d)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + tcp


def cmd_raw_tcp(args):
    pkt = tcp_segment(args.src, args.sport, args.dst, args.dport, args.flags, args.seq, args.ack)
    # IPPROTO_RAW implies IP_HDRINCL: the kernel sends our header, our source address included.
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.sendto(pkt, (args.dst, 0))
    s.close()
    emit({"sent": len(pkt), "t": now()})
    return 0


def cmd_ride(args):
    """Copy another socket's TCP flow: wait for a segment with ACK leaving --iface to DST:DPORT,
    then send, from a raw socket, the segment that would come next on that flow (its 4-tuple,
    its sequence number plus its payload, its ack, PSH|ACK, a line of payload)."""
    # ETH_P_ALL: a packet socket of one protocol is given incoming frames only; the frames a
    # device sends go to the taps of every protocol (dev_queue_xmit_nit()).
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((args.iface, 0))
    s.settimeout(args.timeout)
    dst = socket.inet_aton(args.dst)
    end = now() + int(args.timeout * 1e9)
    try:
        while True:
            if now() > end:
                raise socket.timeout
            frame, addr = s.recvfrom(65535)
            if addr[2] != socket.PACKET_OUTGOING or len(frame) < 14 + 40 or \
                    frame[12:14] != b"\x08\x00":
                continue
            ip = frame[14:]
            ihl = (ip[0] & 15) * 4
            if ip[9] != socket.IPPROTO_TCP or ip[16:20] != dst:
                continue
            tcp = ip[ihl:]
            sport, dport, seq, ack, off, fl = struct.unpack("!HHIIBB", tcp[:14])
            if dport != args.dport or not fl & 0x10 or fl & 0x07:
                continue
            payload = struct.unpack("!H", ip[2:4])[0] - ihl - (off >> 4) * 4
            break
    except socket.timeout:
        emit({"error": "no segment of the flow seen"})
        return 1
    src = socket.inet_ntoa(ip[12:16])
    pkt = tcp_segment(src, sport, args.dst, args.dport, "PA", (seq + payload) & 0xFFFFFFFF, ack,
                      b"ride\n")
    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    r.sendto(pkt, (args.dst, 0))
    r.close()
    emit({"src": src, "sport": sport, "seq": (seq + payload) & 0xFFFFFFFF, "ack": ack,
          "t": now()})
    return 0


def cmd_errno(args):
    kind = socket.SOCK_STREAM if args.proto == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(family(args.dst), kind)
    s.settimeout(args.timeout)
    t0 = now()
    res = {"proto": args.proto, "dst": args.dst, "dport": args.port}
    try:
        s.connect((args.dst, args.port))
        if args.proto == "udp":
            s.send(b"ping\n")
            s.recv(2048)
        res["errno"] = "ok"
    except socket.timeout:
        res["errno"] = "timeout"
    except OSError as e:
        res["errno"] = errno.errorcode.get(e.errno, str(e.errno))
    res["ms"] = round((now() - t0) / 1e6, 3)
    s.close()
    emit(res)
    return 0


def cmd_syn_flood(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    end = now() + int(args.duration * 1e9)
    n = 0
    while now() < end:
        pkt = tcp_segment(args.src, 1024 + n % 60000, args.dst, args.dport, "S")
        try:
            s.sendto(pkt, (args.dst, 0))
            n += 1
        except OSError:
            pass
    s.close()
    emit({"sent": n})
    return 0


def cmd_arp(args):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806))
    s.bind((args.iface, 0x0806))
    mac = s.getsockname()[4]
    frame = (b"\xff" * 6 + mac + struct.pack("!H", 0x0806) +
             struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + socket.inet_aton(args.sender_ip) +
             b"\0" * 6 + socket.inet_aton(args.target_ip))
    s.send(frame)
    s.close()
    emit({"sent": len(frame), "t": now()})
    return 0


def cmd_sniff(args):
    """IPv4 TCP/UDP packets arriving on an interface (not the ones it sends) that match, until
    --duration has passed or SIGTERM (the caller stops it once whatever it waits for is over)."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((args.iface, 0))
    s.setblocking(False)
    # SIGTERM wakes the select() through this pipe; what is queued by then still counts.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    if args.ready:
        tmp = args.ready + ".tmp"
        with open(tmp, "w") as f:
            f.write("ready\n")
        os.rename(tmp, args.ready)
    end = now() + int(args.duration * 1e9)
    seen = []
    while True:
        if not stopping:
            left = (end - now()) / 1e9
            if left <= 0:
                break
            select.select([s, wake_r], [], [], left)
        try:
            frame, addr = s.recvfrom(65535)
        except BlockingIOError:
            if stopping:
                break
            continue
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 34:
            continue
        if struct.unpack("!H", frame[12:14])[0] != 0x0800:
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0xF) * 4
        proto = ip[9]
        src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
        sport = dport = 0
        if proto in (6, 17) and len(ip) >= ihl + 4:
            sport, dport = struct.unpack("!HH", ip[ihl:ihl + 4])
        if ((args.src and src != args.src) or (args.dst and dst != args.dst) or
                (args.sport and sport != args.sport) or (args.dport and dport != args.dport)):
            continue
        seen.append({"src": src, "sport": sport, "dst": dst, "dport": dport, "proto": proto,
                     "t": now()})
    emit({"count": len(seen), "packets": seen[:20]})
    return 0


# ---- What the kernel has attached (independent of runwall's own status) -------------------------

BPF_PROG_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD, BPF_PROG_QUERY = 13, 15, 16
BPF_TCX_INGRESS, BPF_TCX_EGRESS = 46, 47
NR_BPF = {"x86_64": 321, "aarch64": 280}


def bpf(cmd, attr):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(bytes(attr), len(attr))
    rc = libc.syscall(NR_BPF[os.uname().machine], cmd, buf, len(attr))
    if rc < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return rc, buf.raw


def tcx_query(ifindex, attach_type):
    import ctypes
    ids = (ctypes.c_uint32 * 64)()
    attr = bytearray(64)
    struct.pack_into("=IIII", attr, 0, ifindex, attach_type, 0, 0)
    struct.pack_into("=QI", attr, 16, ctypes.addressof(ids), 64)
    _, raw = bpf(BPF_PROG_QUERY, attr)
    count = struct.unpack_from("=I", raw, 24)[0]
    return [{"id": pid, "name": prog_name(pid)} for pid in list(ids)[:count]]


def prog_name(pid):
    """The name of the BPF program with this id (bpf_prog_info.name)."""
    import ctypes
    fd, _ = bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("=III", pid, 0, 0))
    info = ctypes.create_string_buffer(256)
    try:
        bpf(BPF_OBJ_GET_INFO_BY_FD, struct.pack("=IIQ", fd, 256, ctypes.addressof(info)))
    finally:
        os.close(fd)
    return info.raw[64:80].split(b"\0", 1)[0].decode()


def tcx_available(ifindex):
    """runwall's own test (user/lib/attach.c tcx_supported()): a kernel without tcx (before 6.6)
    does not know the attach type and answers BPF_PROG_QUERY with EINVAL."""
    try:
        tcx_query(ifindex, BPF_TCX_INGRESS)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return False
        raise
    return True


RTM_NEWTFILTER, RTM_GETTFILTER, NLMSG_ERROR, NLMSG_DONE = 44, 46, 2, 3
TC_H_CLSACT_INGRESS, TC_H_CLSACT_EGRESS = 0xFFFFFFF2, 0xFFFFFFF3
TCA_KIND, TCA_OPTIONS, TCA_CHAIN = 1, 2, 11
TCA_BPF_NAME, TCA_BPF_FLAGS, TCA_BPF_ID = 7, 8, 11


def nl_attrs(buf):
    attrs, off = {}, 0
    while off + 4 <= len(buf):
        ln, typ = struct.unpack_from("=HH", buf, off)
        if ln < 4:
            break
        attrs[typ & 0x3FFF] = buf[off + 4:off + ln]
        off += (ln + 3) & ~3
    return attrs


def tc_filters(ifindex, parent):
    """The filters on one clsact hook, in the order the kernel runs them (by priority, then
    as listed), asked with an RTM_GETTFILTER dump: kind, pref, handle and, for cls_bpf, the
    program's name and id and whether it is direct-action."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    s.bind((0, 0))
    tcm = struct.pack("=BBHiIII", socket.AF_UNSPEC, 0, 0, ifindex, 0, parent, 0)
    s.send(struct.pack("=IHHII", 16 + len(tcm), RTM_GETTFILTER, 0x301, 1, 0) + tcm)
    out, done = [], False
    while not done:
        data = s.recv(1 << 16)
        off = 0
        while off + 16 <= len(data):
            ln, typ, _, _, _ = struct.unpack_from("=IHHII", data, off)
            body = data[off + 16:off + ln]
            off += (ln + 3) & ~3
            if typ == NLMSG_DONE:
                done = True
                break
            if typ == NLMSG_ERROR:
                err = -struct.unpack_from("=i", body)[0]
                s.close()
                if err in (errno.ENOENT, errno.EINVAL):  # no clsact qdisc: no filters
                    return []
                raise OSError(err, os.strerror(err))
            if typ != RTM_NEWTFILTER:
                continue
            _, _, _, _, handle, _, info = struct.unpack_from("=BBHiIII", body)
            if handle == 0:  # the head of a priority (a "tcf_proto"), not a filter
                continue
            a = nl_attrs(body[20:])
            f = {"kind": a.get(TCA_KIND, b"").rstrip(b"\0").decode(), "pref": info >> 16,
                 "chain": struct.unpack("=I", a[TCA_CHAIN])[0] if TCA_CHAIN in a else 0,
                 "handle": handle}
            if f["kind"] == "bpf":
                o = nl_attrs(a.get(TCA_OPTIONS, b""))
                # TCA_BPF_NAME is what the loader called the filter ("rw_egress:[42]" from
                # libbpf); the program's own name comes from the kernel's prog info.
                f["filter_name"] = o.get(TCA_BPF_NAME, b"").rstrip(b"\0").decode()
                f["id"] = struct.unpack("=I", o[TCA_BPF_ID])[0] if TCA_BPF_ID in o else 0
                f["name"] = prog_name(f["id"]) if f["id"] else ""
                flags = struct.unpack("=I", o[TCA_BPF_FLAGS])[0] if TCA_BPF_FLAGS in o else 0
                f["direct_action"] = bool(flags & 1)
            out.append(f)
    s.close()
    return out


def cmd_hooks(args):
    ifindex = socket.if_nametoindex(args.dev)
    tcx = tcx_available(ifindex)
    emit({"dev": args.dev, "ifindex": ifindex, "tcx": tcx,
          "ingress": tcx_query(ifindex, BPF_TCX_INGRESS) if tcx else [],
          "egress": tcx_query(ifindex, BPF_TCX_EGRESS) if tcx else [],
          "tc_ingress": tc_filters(ifindex, TC_H_CLSACT_INGRESS),
          "tc_egress": tc_filters(ifindex, TC_H_CLSACT_EGRESS)})
    return 0


# ---- Timing helpers ------------------------------------------------------------------------------

def cmd_timed(args):
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = now()
    rc = subprocess.call(cmd)
    end = now()
    with open(args.out, "w") as f:
        f.write(json.dumps({"start": start, "end": end, "rc": rc}) + "\n")
    return rc


def cmd_now(args):
    print(now())
    return 0


def main():
    ap = argparse.ArgumentParser(description="runwall end-to-end probes")
    sub = ap.add_subparsers(dest="cmd", required=True)
    # What several commands take: a destination and its port; a raw flow's addresses; a stream's
    # pace.
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("dst")
    target.add_argument("port", type=int)
    raw = argparse.ArgumentParser(add_help=False)
    raw.add_argument("--src", required=True)
    raw.add_argument("--dst", required=True)
    raw.add_argument("--dport", type=int, required=True)
    paced = argparse.ArgumentParser(add_help=False, parents=[target])
    paced.add_argument("--interval", type=float, default=0.01)

    def command(name, func, *parents):
        p = sub.add_parser(name, parents=list(parents))
        p.set_defaults(func=func)
        return p

    for name in ("tcp", "udp"):
        p = command(name, cmd_single, target)
        p.add_argument("--src")
        p.add_argument("--timeout", type=float, default=0.5)
        p.add_argument("--json", action="store_true")
    p = command("batch", cmd_batch)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--count-iface", help="count what each attempt sends out of this interface")
    p = command("loop", cmd_loop)
    p.add_argument("--target", action="append", required=True, help="NAME=DST:PORT")
    p.add_argument("--proto", default="tcp")
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=0.3)
    p.add_argument("--out")
    p = command("stream", cmd_stream, paced)
    p.add_argument("--duration", type=float, default=0)
    p.add_argument("--out")
    p = command("knock", cmd_knock, paced)
    p.add_argument("--connect-timeout", type=float, default=0.2)
    p.add_argument("--max", type=float, default=5)
    p = command("flood", cmd_flood, paced)
    p.add_argument("--duration", type=float, default=1)
    p.add_argument("--ready")
    p = command("raw-tcp", cmd_raw_tcp, raw)
    p.add_argument("--sport", type=int, required=True)
    p.add_argument("--flags", default="S")
    p.add_argument("--seq", type=int, default=1000)
    p.add_argument("--ack", type=int, default=0)
    p = command("ride", cmd_ride)
    p.add_argument("--iface", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--dport", type=int, required=True)
    p.add_argument("--timeout", type=float, default=5)
    p = command("errno", cmd_errno)
    p.add_argument("proto", choices=("tcp", "udp"))
    p.add_argument("dst")
    p.add_argument("port", type=int)
    p.add_argument("--timeout", type=float, default=5)
    command("syn-flood", cmd_syn_flood, raw).add_argument("--duration", type=float, default=1)
    p = command("arp", cmd_arp)
    p.add_argument("--iface", required=True)
    p.add_argument("--sender-ip", required=True)
    p.add_argument("--target-ip", required=True)
    p = command("sniff", cmd_sniff)
    p.add_argument("--iface", required=True)
    p.add_argument("--src")
    p.add_argument("--dst")
    p.add_argument("--sport", type=int)
    p.add_argument("--dport", type=int)
    p.add_argument("--duration", type=float, default=1)
    p.add_argument("--ready")
    command("hooks", cmd_hooks).add_argument("--dev", required=True)
    p = command("timed", cmd_timed)
    p.add_argument("--out", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    command("now", cmd_now)
    args = ap.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
