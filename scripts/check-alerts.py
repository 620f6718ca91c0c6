#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""check-alerts.py: docs/operations.md's table of alerts is the rule file's, one source
(run by scripts/check-docs.sh).

  scripts/check-alerts.py [--update]

The table between `<!-- alerts: manifests/monitoring/prometheusrule.yaml -->` and
`<!-- /alerts -->` must be exactly what this script makes of the PrometheusRule: per alert its
name, expression, `for` (0m when it has none), its description (what it means; a template's
`{{ $labels.node }}` shown as NODE) and its action (what to do first). --update writes it.
"""
import re
import sys

import yaml

RULES = "manifests/monitoring/prometheusrule.yaml"
PAGE = "docs/operations.md"
BEGIN = f"<!-- alerts: {RULES} -->"
END = "<!-- /alerts -->"


def cell(text):
    text = re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: m.group(1).upper(), str(text))
    return " ".join(text.split()).replace("|", "\\|")


def table():
    rows = ["| alert | expression | for | what it means | what to do first |",
            "| --- | --- | --- | --- | --- |"]
    for group in yaml.safe_load(open(RULES))["spec"]["groups"]:
        for r in group["rules"]:
            a = r.get("annotations", {})
            rows.append(f"| `{r['alert']}` ({cell(a.get('summary', ''))}) | `{cell(r['expr'])}` | "
                        f"{r.get('for', '0m')} | {cell(a.get('description', ''))} | "
                        f"{cell(a.get('action', ''))} |")
    return "\n".join(rows) + "\n"


def main():
    update = "--update" in sys.argv[1:]
    text = open(PAGE).read()
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    if not m:
        print(f"check-alerts: {PAGE}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    want = table()
    if m.group(1) == want:
        print(f"check-alerts: {PAGE}'s table of alerts is {RULES}'s ({want.count(chr(10)) - 2} alerts)")
        return 0
    if update:
        open(PAGE, "w").write(text[:m.start(1)] + want + text[m.end(1):])
        print(f"check-alerts: {PAGE}: the table of alerts written from {RULES}")
        return 0
    print(f"check-alerts: {PAGE}: the table of alerts differs from {RULES} "
          f"(scripts/check-docs.sh BUILD --update writes it):", file=sys.stderr)
    import difflib
    sys.stderr.writelines(difflib.unified_diff(m.group(1).splitlines(True), want.splitlines(True),
                                               PAGE, RULES))
    return 1


if __name__ == "__main__":
    sys.exit(main())
