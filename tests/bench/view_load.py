#!/usr/bin/env python3
"""The live view's queries against the agent's loop (make bench, issue 25 item 4).

  view_load.py flood SECONDS             (in a sandbox: refused UDP to distinct ports, as fast as it can)
  view_load.py graph URL CLIENTS SECONDS (in the node: CLIENTS threads GET URL back to back, each
                                          from its own 127.0.0.x source, 16 per address: the
                                          agent's per-address limit)
  view_load.py status-latency N CMD...   (CMD N times, 0.2 s apart; prints the median in ms)
"""
import http.client, socket, statistics, subprocess, sys, threading, time


def flood(secs):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    end, port, n = time.time() + secs, 1024, 0
    while time.time() < end:
        for _ in range(256):
            s.sendto(b"x", ("93.184.216.34", port))
            port = 1024 + (port - 1023) % 4000  # 4 000 destinations: the aggregates fill
            n += 1
    print(n)


def graph(url, clients, secs):
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]
    end = time.time() + secs
    done = [0] * clients

    def client(i):
        src = f"127.0.0.{2 + i // 16}"
        while time.time() < end:
            try:
                c = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(src, 0))
                c.request("GET", path)
                c.getresponse().read()
                c.close()
                done[i] += 1
            except OSError:
                time.sleep(0.05)
    ts = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(sum(done))


def status_latency(n, cmd):
    ms = []
    for _ in range(n):
        t = time.monotonic()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        ms.append((time.monotonic() - t) * 1000)
        time.sleep(0.2)
    print(f"{statistics.median(ms):.1f}")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "flood":
        flood(float(sys.argv[2]))
    elif what == "graph":
        graph(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif what == "status-latency":
        status_latency(int(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(__doc__)
