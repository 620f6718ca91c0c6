#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""expect.py: judges what the end-to-end tests saw against what they expected.

Prints one line per check, "PASS<TAB>what" or "FAIL<TAB>what<TAB>why", which test_e2e.sh numbers
into TAP; "NOTE<TAB>text" lines become TAP comments.

  expect.py attempts --spec SPEC --results DIR --events FILE [--wait S] [--check verdicts|events]
      SPEC: one attempt a line, "FROM ID PROTO DST PORT SRC EXPECT WHY DESCRIPTION…" where FROM is
      a sandbox (a, b, …) or svc (the services namespace), SRC "-" or the address to send from,
      EXPECT allow|drop and WHY the allow path (rule, rule-cidr, open, inbound) or the drop
      reason. DIR holds FROM.jsonl, the output of `probe.py batch` for each FROM.
  expect.py counters --spec SPEC --results DIR --before B --after A [--label TEXT]
      the counter deltas against the spec's drops, exactly, per run and for the node.
  expect.py delta --before B --after A --scope node|RUN --dir egress|ingress --reason R
      prints the packet delta of one counter.
  expect.py revoke --stream F --timed T --events E --reason R
      a rule was revoked under an open connection (probe.py stream): no line sent after
      `runwall apply` returned was answered, and the first packet dropped; "METRIC" lines give
      the latencies (ms) from apply's return to the first dropped packet (event ts_ns) and to
      the first line that went unanswered (probe clock).
  expect.py grant --knock F --timed T --events E --dst IP --dport N --src IP --path P
      a rule was added while probe.py knock tried to connect every 10 ms: METRIC lines give the
      latencies to the first allowed SYN (event) and to the attempt that connected (probe).
  expect.py stream --stream F --since NS --until NS --label TEXT
      a long-lived connection kept exchanging lines through a window: echoes all along, no
      silence longer than --max-gap ms, every line sent in the window answered.
  expect.py loop --file F [--since NS] [--until NS] --label TEXT
      the attempts of `probe.py loop` in a time window: every "ok…" target connected, every
      "deny…" target was refused with an answer (a reset).

Every refused TCP attempt sends exactly one SYN (probe.py's timeout is under the 1 s initial
RTO) and every UDP attempt one datagram, so drop counters are compared for equality: packets,
and bytes (skb->len: Ethernet 14 + IPv4 20 + TCP 20 + the 20 option bytes Linux puts on a SYN
(MSS, SACK-permitted, timestamps, window scale) = 74; UDP 14 + 20 + 8 + the payload).
With RW_WAIT_SCALE > 1 (emulation) the probes' timeouts pass the RTO and the kernel retransmits
the SYN: the counters are then compared, still for equality, with the number of packets each
attempt was counted sending (probe.py batch --count-iface), and the "one SYN each" check
becomes "at least one each", which its line says. Every wait and tolerance here is multiplied by
RW_WAIT_SCALE.
"""
import argparse
import json
import os
import sys
import time

REASONS = ["not-ready", "unknown-source", "spoofed-source", "malformed", "unsupported-l2",
           "ip-options", "fragment", "unsupported-protocol", "dns", "metadata",
           "private-destination", "not-allowlisted", "inbound-denied"]
SYN_BYTES = 74
try:
    SCALE = float(os.environ.get("RW_WAIT_SCALE") or 1)
except ValueError:
    SCALE = 1.0


def out(status, what, why=""):
    line = f"{status}\t{what}"
    if why:
        line += f"\t{why}"
    print(line, flush=True)


def load_jsonl(path):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return rows


def load_json(path):
    with open(path) as f:
        return json.load(f)


def env_runs():
    """RW_RUNS="a=run-7f3a b=run-9c01 …" and RW_IPS="a=10.1.2.3 …" from the test."""
    runs = dict(kv.split("=", 1) for kv in os.environ.get("RW_RUNS", "").split())
    ips = dict(kv.split("=", 1) for kv in os.environ.get("RW_IPS", "").split())
    return runs, ips


# Refusals the datapath answers (README "Answers"): a sandbox's own packet refused after its
# source was proven gets a TCP reset or an ICMP unreachable, so the attempt ends "refused" at
# once; one refused before that (spoofed, unknown, not ready, malformed), or any refusal into a
# sandbox, stays silent: "timeout". The snapshots these suites apply keep the default
# ("refusal": "answer").
ANSWERED_REASONS = {"dns", "metadata", "private-destination", "not-allowlisted",
                    "unsupported-protocol", "inbound-denied", "conntrack-full"}


def want_result(row):
    if row["expect"] == "allow":
        return "ok"
    if row["from"] != "svc" and row["src"] is None and row["why"] in ANSWERED_REASONS:
        return "refused"
    # wrong-principal answers a SYN only (docs/principals.md#answers)
    if row["from"] != "svc" and row["src"] is None and row["why"] == "wrong-principal" and \
            row["proto"] == "tcp":
        return "refused"
    return "timeout"


def load_spec(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            p = line.split(None, 8)
            frm, ident, proto, dst, port, src, expect, why = p[:8]
            rows.append({"from": frm, "id": ident, "proto": proto, "dst": dst, "dport": int(port),
                         "src": None if src == "-" else src, "expect": expect, "why": why,
                         "desc": p[8] if len(p) > 8 else ident})
    return rows


def attach_results(spec, results_dir):
    by = {}
    for row in spec:
        if row["from"] not in by:
            by[row["from"]] = {r["id"]: r for r in
                               load_jsonl(os.path.join(results_dir, row["from"] + ".jsonl"))}
        row["res"] = by[row["from"]].get(row["id"])
    return spec


def context(row, runs, ips):
    """Direction and run of an attempt as runwall sees it on the sandbox's veth."""
    if row["from"] == "svc":
        pod = next((n for n, ip in ips.items() if ip == row["dst"]), None)
        return "ingress", runs.get(pod, "")
    return "egress", runs.get(row["from"], "")


def find_event(events, row, verdict):
    r = row["res"]
    for e in events:
        if (e.get("verdict") == verdict and e.get("proto") == row["proto"] and
                e.get("src") == r["src"] and e.get("sport") == r["sport"] and
                e.get("dst") == row["dst"] and e.get("dport") == row["dport"]):
            return e
    return None


def label(row):
    who = "from " + (row["src"] if row["from"] == "svc" else "sandbox " + row["from"])
    return f"{who} to {row['dst']}:{row['dport']}/{row['proto']} ({row['desc']})"


def cmd_attempts(args):
    runs, ips = env_runs()
    spec = attach_results(load_spec(args.spec), args.results)
    if args.check == "verdicts":
        for row in spec:
            r = row["res"]
            want = want_result(row)
            what = (f"{label(row)}: " +
                    {"ok": "connects, data both ways", "refused": "refused, answered at once",
                     "timeout": "refused, nothing comes back"}[want])
            if r is None:
                out("FAIL", what, "no result from probe.py")
            elif r["result"] != want:
                out("FAIL", what, f"got {r['result']} {r.get('error', '')}".strip())
            else:
                out("PASS", what)
        return 0

    # events: every attempt has its event (drops always, allowed flows as new-flow events)
    deadline = time.monotonic() + args.wait
    while True:
        events = load_jsonl(args.events)
        missing = [row for row in spec if row["res"] and
                   not find_event(events, row, "allow" if row["expect"] == "allow" else "drop")]
        if not missing or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    for row in spec:
        r = row["res"]
        d, run = context(row, runs, ips)
        verdict = "allow" if row["expect"] == "allow" else "drop"
        if verdict == "drop":
            what = f"{label(row)}: drop event, reason {row['why']}, run {run}, {d}"
        else:
            what = f"{label(row)}: new-flow event, path {row['why']}, run {run}, {d}"
        if r is None:
            out("FAIL", what, "no result from probe.py")
            continue
        e = find_event(events, row, verdict)
        if e is None:
            other = find_event(events, row, "allow" if verdict == "drop" else "drop")
            out("FAIL", what, "no such event" + (f"; the stream has {json.dumps(other)}"
                                                 if other else ""))
            continue
        bad = []
        key = "reason" if verdict == "drop" else "path"
        if e.get(key) != row["why"]:
            bad.append(f"{key} {e.get(key)!r}")
        if e.get("run") != run:
            bad.append(f"run {e.get('run')!r}")
        if e.get("dir") != d:
            bad.append(f"dir {e.get('dir')!r}")
        if bad:
            out("FAIL", what, "event has " + ", ".join(bad) + ": " + json.dumps(e))
        else:
            out("PASS", what)
    return 0


def counter(c, scope, d, reason, field="packets"):
    if scope == "node":
        part = c.get("node", {})
    else:
        part = next((r for r in c.get("runs", []) if r.get("id") == scope), {})
    return part.get(d, {}).get(reason, {}).get(field, 0)


def packet_bytes(row):
    if row["proto"] == "tcp":
        return SYN_BYTES
    return 14 + 20 + 8 + len(f"ping {row['res']['sport']}\n")


def sent_packets(row):
    """What a refused attempt sent: counted on the sender's interface when the probe did, else
    the one SYN (or datagram) it sends when its timeout is under the SYN RTO."""
    return row["res"].get("pkts", 1)


def cmd_counters(args):
    runs, ips = env_runs()
    spec = attach_results(load_spec(args.spec), args.results)
    before, after = load_json(args.before), load_json(args.after)
    want = {}  # (scope, dir, reason) -> [packets, bytes]
    allowed = {}
    refused = []
    for row in spec:
        d, run = context(row, runs, ips)
        if row["res"] is None:
            continue
        if row["expect"] == "allow":
            for scope in ("node", run):
                allowed[(scope, d)] = allowed.get((scope, d), 0) + 1
            continue
        refused.append(row)
        n = sent_packets(row)
        for scope in ("node", run) if run else ("node",):
            w = want.setdefault((scope, d, row["why"]), [0, 0])
            w[0] += n
            w[1] += n * packet_bytes(row)
    # What the exact comparisons below rest on: how many packets each refused attempt sent.
    uncounted = [r for r in refused if "pkts" not in r["res"] or r["res"].get("count_drops")]
    sent = [sent_packets(r) for r in refused]
    if SCALE == 1:
        what = (f"{args.label}each of the {len(refused)} refused attempts sent exactly one packet "
                f"(one SYN: the probe gives up before the 1 s SYN RTO; counted leaving the sender)")
        bad = [f"{r['from']} {r['id']}: {sent_packets(r)}" for r in refused if sent_packets(r) != 1]
    else:
        what = (f"{args.label}each of the {len(refused)} refused attempts sent at least one packet, "
                f"{sum(sent)} in all (timeouts x{SCALE:g} pass the 1 s SYN RTO, so TCP retransmits: "
                f"the exact counts below are of the packets counted leaving the sender)")
        bad = [f"{r['from']} {r['id']}: {sent_packets(r)}" for r in refused if sent_packets(r) < 1]
    if uncounted:
        bad.append("not counted: " + ", ".join(f"{r['from']} {r['id']}" for r in uncounted[:5]))
    out("FAIL" if bad else "PASS", what, "; ".join(bad))
    scopes = ["node"] + sorted({run for _, run in (context(r, runs, ips) for r in spec) if run})
    for scope in scopes:
        for d in ("egress", "ingress"):
            stray = []
            for reason in REASONS:
                exp = want.get((scope, d, reason), [0, 0])
                got = [counter(after, scope, d, reason, f) - counter(before, scope, d, reason, f)
                       for f in ("packets", "bytes")]
                if exp == [0, 0]:
                    if got != [0, 0]:
                        stray.append(f"{reason} +{got[0]} packets +{got[1]} bytes")
                    continue
                what = (f"{args.label}{scope} {d} {reason}: +{exp[0]} packets, +{exp[1]} bytes "
                        f"(exact)")
                if got == exp:
                    out("PASS", what)
                else:
                    out("FAIL", what, f"got +{got[0]} packets, +{got[1]} bytes")
            what = f"{args.label}{scope} {d}: no other drop reason counted"
            if stray:
                out("FAIL", what, "; ".join(stray))
            else:
                out("PASS", what)
            n = allowed.get((scope, d), 0)
            if n:
                got = (counter(after, scope, d, "allowed") - counter(before, scope, d, "allowed"))
                what = (f"{args.label}{scope} {d} allowed: at least +{n} packets (one per allowed "
                        f"attempt; a connection sends several)")
                if got >= n:
                    out("PASS", what)
                else:
                    out("FAIL", what, f"got +{got}")
    return 0


def cmd_delta(args):
    before, after = load_json(args.before), load_json(args.after)
    print(counter(after, args.scope, args.dir, args.reason, args.field) -
          counter(before, args.scope, args.dir, args.reason, args.field))
    return 0


def timed(path):
    return load_json(path)


def ms(ns):
    return round(ns / 1e6, 2)


def cmd_revoke(args):
    stream = load_jsonl(args.stream)
    t = timed(args.timed)
    end = t["end"]
    conn = next((e for e in stream if e.get("ev") == "connected"), None)
    if conn is None:
        out("FAIL", f"{args.label}the long-lived connection was up", "no 'connected' line")
        return 0
    sends = {e["seq"]: e["t"] for e in stream if e.get("ev") == "send"}
    echoes = {e["seq"]: e["t"] for e in stream if e.get("ev") == "echo"}
    before = [s for s, ts in sends.items() if ts < t["start"] and s in echoes]
    what = f"{args.label}the connection exchanged lines before the change"
    out("PASS" if len(before) >= 10 else "FAIL", what, f"{len(before)} lines echoed")
    late = sorted(s for s, ts in sends.items() if ts > end and s in echoes)
    what = f"{args.label}no line sent after `runwall apply` returned was answered"
    out("FAIL" if late else "PASS", what, f"echoed: seq {late[:5]}" if late else "")
    rc = t["rc"]
    out("PASS" if rc == 0 else "FAIL", f"{args.label}runwall apply exited 0", f"exit {rc}")

    def on_flow(e):
        fwd = (e.get("src") == conn["src"] and e.get("sport") == conn["sport"])
        rev = (e.get("dst") == conn["src"] and e.get("dport") == conn["sport"])
        return e.get("proto") == "tcp" and (fwd or rev)

    deadline = time.monotonic() + args.wait
    while True:
        drops = sorted((e for e in load_jsonl(args.events)
                        if e.get("verdict") == "drop" and on_flow(e)), key=lambda e: e["ts_ns"])
        if drops or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    what = f"{args.label}the connection's next packet was dropped, reason {args.reason}"
    if not drops:
        out("FAIL", what, "no drop event on the flow")
        return 0
    first = drops[0]
    after = sorted(ts for ts in sends.values() if ts > end)
    bad = []
    if first.get("reason") != args.reason:
        bad.append(f"reason {first.get('reason')}")
    # The first line sent after the return must be the one dropped (or an earlier packet):
    # allow 5 ms (scaled) between the send() and the packet reaching the veth.
    if after and first["ts_ns"] > after[0] + 5_000_000 * SCALE:
        bad.append(f"first drop {ms(first['ts_ns'] - after[0])} ms after the first send")
    out("FAIL" if bad else "PASS", what, "; ".join(bad) + (": " + json.dumps(first) if bad else ""))
    unanswered = sorted((ts for s, ts in sends.items() if s not in echoes))
    print(f"METRIC\tevent\t{ms(first['ts_ns'] - end)}")
    print(f"METRIC\tevent_from_start\t{ms(first['ts_ns'] - t['start'])}")
    if unanswered:
        print(f"METRIC\tprobe\t{ms(unanswered[0] - end)}")
    print(f"METRIC\tapply\t{ms(t['end'] - t['start'])}")
    return 0


def cmd_grant(args):
    t = timed(args.timed)
    end = t["end"]
    knock = load_jsonl(args.knock)
    res = knock[-1] if knock else {}
    out("PASS" if t["rc"] == 0 else "FAIL", f"{args.label}runwall apply exited 0",
        f"exit {t['rc']}")
    what = f"{args.label}a new connection to {args.dst}:{args.dport} opened after the change"
    if res.get("result") != "ok":
        out("FAIL", what, json.dumps(res))
        return 0
    out("PASS", what)

    def match(e):
        return (e.get("proto") == "tcp" and e.get("src") == args.src and
                e.get("dst") == args.dst and e.get("dport") == args.dport and
                e.get("dir") == "egress")

    deadline = time.monotonic() + args.wait
    while True:
        # Only this round's attempts: earlier rounds connected to the same place.
        evs = [e for e in load_jsonl(args.events) if match(e) and e["ts_ns"] >= res["start"]]
        allows = sorted((e for e in evs if e.get("verdict") == "allow"), key=lambda e: e["ts_ns"])
        if allows or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    drops_before = [e for e in evs if e.get("verdict") == "drop" and e["ts_ns"] < t["start"]]
    what = f"{args.label}attempts before the change were dropped (not-allowlisted)"
    ok = drops_before and all(e.get("reason") == "not-allowlisted" for e in drops_before)
    out("PASS" if ok else "FAIL", what, f"{len(drops_before)} drop events before the apply")
    what = f"{args.label}the first allowed SYN has path {args.path}"
    if not allows:
        out("FAIL", what, "no allow event")
        return 0
    first = allows[0]
    out("PASS" if first.get("path") == args.path else "FAIL", what, json.dumps(first))
    late = [e for e in evs if e.get("verdict") == "drop" and e["ts_ns"] > end]
    what = f"{args.label}no attempt after `runwall apply` returned was dropped"
    out("FAIL" if late else "PASS", what, json.dumps(late[0]) if late else "")
    print(f"METRIC\tevent\t{ms(first['ts_ns'] - end)}")
    print(f"METRIC\tevent_from_start\t{ms(first['ts_ns'] - t['start'])}")
    print(f"METRIC\tprobe\t{ms(res['t_syn'] - end)}")
    print(f"METRIC\tapply\t{ms(t['end'] - t['start'])}")
    return 0


def cmd_stream(args):
    stream = load_jsonl(args.stream)
    sends = {e["seq"]: e["t"] for e in stream if e.get("ev") == "send"}
    echoes = sorted(e["t"] for e in stream if e.get("ev") == "echo" and
                    args.since <= e["t"] <= args.until)
    answered = {e["seq"] for e in stream if e.get("ev") == "echo"}
    max_gap = args.max_gap * SCALE
    what = (f"{args.label}a long-lived connection kept exchanging lines (every 10 ms) throughout, "
            f"no silence over {max_gap:g} ms")
    gaps = [b - a for a, b in zip([args.since] + echoes, echoes + [args.until])]
    worst = max(gaps) if gaps else args.until - args.since
    lost = [q for q, t in sends.items() if args.since <= t <= args.until - 200_000_000 * SCALE and
            q not in answered]
    # A silence longer than max_gap is a gap in enforcement only when a segment was lost on the
    # way (the client retransmitted, or received out of order); without a loss it is the
    # machine's load delaying the processes. A loss alone is not proof either: under load a
    # delayed ACK brings a spurious retransmission. The caller proves the datapath dropped
    # nothing from its counters; this reports the silence and the losses beside it.
    tcp = next((e for e in stream if e.get("ev") == "tcp"), None)
    losses = None if tcp is None else (tcp.get("retrans") or 0) + (tcp.get("ooo") or 0)
    long_gap = worst > max_gap * 1_000_000
    if len(echoes) < 10 or lost or (long_gap and losses is None):
        out("FAIL", what, f"{len(echoes)} echoes, longest silence {ms(worst)} ms, "
            f"{len(lost)} lines unanswered, segments lost: {losses}")
    else:
        note = " (longer: the machine's load; the counters say whether anything was dropped)" \
            if long_gap else ""
        out("PASS", what + f" ({len(echoes)} echoes, longest silence {ms(worst)} ms{note}, "
            f"segments lost: {losses})")
    return 0


def cmd_loop(args):
    rows = [r for r in load_jsonl(args.file)
            if (args.since is None or r["t0"] >= args.since) and
            (args.until is None or r["t0"] <= args.until)]
    names = sorted({r["id"] for r in rows})
    for name in names:
        # A "deny" target is a sandbox's refused connection: answered (probe.py "refused").
        want = "ok" if name.startswith("ok") else "refused"
        mine = [r for r in rows if r["id"] == name]
        bad = [r for r in mine if r["result"] != want]
        what = (f"{args.label}{name}: all {len(mine)} attempts "
                f"{'connected' if want == 'ok' else 'refused'}")
        if not mine or bad:
            out("FAIL", what, f"{len(bad)} did not: " + json.dumps(bad[:2]))
        else:
            out("PASS", what)
    if not names:
        out("FAIL", f"{args.label}the traffic loop made attempts", "none in the window")
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    # What several checks take: the attempts and their results; two counter snapshots; the
    # timed attempts and the event stream they are matched against; a label; a wait.
    attempts = argparse.ArgumentParser(add_help=False)
    attempts.add_argument("--spec", required=True)
    attempts.add_argument("--results", required=True)
    snapshots = argparse.ArgumentParser(add_help=False)
    snapshots.add_argument("--before", required=True)
    snapshots.add_argument("--after", required=True)
    timed = argparse.ArgumentParser(add_help=False)
    timed.add_argument("--timed", required=True)
    timed.add_argument("--events", required=True)
    label = argparse.ArgumentParser(add_help=False)
    label.add_argument("--label", default="")
    wait = argparse.ArgumentParser(add_help=False)
    wait.add_argument("--wait", type=float, default=3)

    def command(name, func, *parents):
        p = sub.add_parser(name, parents=list(parents))
        p.set_defaults(func=func)
        return p

    p = command("attempts", cmd_attempts, attempts, wait)
    p.add_argument("--events")
    p.add_argument("--check", choices=["verdicts", "events"], default="verdicts")
    command("counters", cmd_counters, attempts, snapshots, label)
    p = command("delta", cmd_delta, snapshots)
    p.add_argument("--scope", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--field", default="packets")
    p = command("revoke", cmd_revoke, timed, label, wait)
    p.add_argument("--stream", required=True)
    p.add_argument("--reason", required=True)
    p = command("grant", cmd_grant, timed, label, wait)
    p.add_argument("--knock", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--dport", type=int, required=True)
    p.add_argument("--path", required=True)
    p = command("stream", cmd_stream, label)
    p.add_argument("--stream", required=True)
    p.add_argument("--since", type=int, required=True)
    p.add_argument("--until", type=int, required=True)
    p.add_argument("--max-gap", type=float, default=100)
    p = command("loop", cmd_loop, label)
    p.add_argument("--file", required=True)
    p.add_argument("--since", type=int)
    p.add_argument("--until", type=int)
    args = ap.parse_args()
    if getattr(args, "wait", None) is not None:
        args.wait *= SCALE
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
