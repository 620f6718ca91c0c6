#!/usr/bin/env python3
"""Merge benchmark rows into one JSON with the machine and the date, print the table, and
(with --readme docs/benchmarks.md) regenerate the benchmark table between its markers.

  report.py OUT.json ROWS.json... [--readme docs/benchmarks.md]
  report.py --from OUT.json --readme docs/benchmarks.md
"""
import datetime, json, os, platform, subprocess, sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def machine():
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"cpu": cpu, "cpus": os.cpu_count(), "kernel": platform.release(),
            "load": open("/proc/loadavg").read().split()[:3]}


def fmt(v):
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def lines(doc):
    out = [f"Measured {doc['date']} on {doc['machine']['cpu']} ({doc['machine']['cpus']} CPUs), "
           f"kernel {doc['machine']['kernel']}, load average {' '.join(doc['machine']['load'])} "
           "at the start.", "",
           "| benchmark | result | target | met |", "| --- | --- | --- | --- |"]
    for r in doc["rows"]:
        tgt = f"{r['cmp']} {fmt(r['target'])}" if "cmp" in r else ""
        met = ""
        if "cmp" in r:
            met = "yes" if r["met"] else f"no ({abs(r['margin']) * 100:.0f} % off)"
        out.append(f"| {r['name']} | {fmt(r['value'])} {r['unit']} | {tgt} | {met} |")
    return out


def main(argv):
    readme = None
    if "--readme" in argv:
        i = argv.index("--readme")
        readme = argv[i + 1]
        del argv[i:i + 2]
    if argv[0] == "--from":
        doc = json.load(open(argv[1]))
    else:
        rows = []
        for f in argv[1:]:
            rows += json.load(open(f))
        doc = {"date": datetime.date.today().isoformat(), "machine": machine(), "rows": rows}
        json.dump(doc, open(argv[0], "w"), indent=1)
    print("\n".join(lines(doc)))
    missed = [r["name"] for r in doc["rows"] if "cmp" in r and not r["met"]]
    print(f"\n# {len(missed)} targets missed" if missed else "\n# every target met")
    if readme:
        text = open(readme).read()
        a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
        open(readme, "w").write(text[:a] + "\n" + "\n".join(lines(doc)) + "\n" + text[b:])


if __name__ == "__main__":
    main(sys.argv[1:])
