#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""refusal_time.py: how long a refused attempt takes to fail, from a real socket in a sandbox.

    refusal_time.py tcp|udp DST PORT TRIALS TIMEOUT

tcp: a blocking connect() per trial, timed until it fails (ECONNREFUSED: runwall's reset).
udp: a connected UDP socket per trial, timed from its send until the recv() after it fails
(EHOSTUNREACH: runwall's ICMP unreachable). Prints one JSON line: the errno names seen and the
microseconds of each trial that failed with the expected one, sorted. Standard library only.
"""
import errno as E
import json
import socket
import sys
import time


def one(proto, dst, port, timeout):
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as s:
        s.settimeout(timeout)
        try:
            if proto == "tcp":
                t0 = time.perf_counter_ns()
                s.connect((dst, port))
            else:
                s.connect((dst, port))
                t0 = time.perf_counter_ns()
                s.send(b"x")
                s.recv(16)
            return "ok", 0
        except socket.timeout:
            return "timeout", 0
        except OSError as e:
            return E.errorcode.get(e.errno, str(e.errno)), (time.perf_counter_ns() - t0) / 1000


def main(proto, dst, port, trials, timeout):
    want = "ECONNREFUSED" if proto == "tcp" else "EHOSTUNREACH"
    seen, us = {}, []
    for _ in range(int(trials)):
        name, t = one(proto, dst, int(port), float(timeout))
        seen[name] = seen.get(name, 0) + 1
        if name == want:
            us.append(t)
    print(json.dumps({"proto": proto, "want": want, "seen": seen, "us": sorted(us)}))


if __name__ == "__main__":
    main(*sys.argv[1:6])
