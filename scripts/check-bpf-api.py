#!/usr/bin/env python3
"""check-bpf-api.py: each bpf/*.h opens with an API block that is the header's truth.

The block sits in the header's first comment:

     * API
     *   offers: rw_a(), rw_b()
     *   needs:  runwall.h, maps.h

`offers` must name exactly the functions the header defines that another file of bpf/ calls
(what the header is for); `needs` exactly the project headers it includes (what it is built
on). Run by `make check-headers`; --print shows what the blocks should say.
"""
import os
import re
import sys

BPF = "bpf"
DEF = re.compile(r"^static\s+(?:__always_inline\s+|inline\s+)*[\w\s\*]*?\b(rw_\w+)\s*\(", re.M)
INC = re.compile(r'^#include\s+"([\w.]+)"', re.M)
BLOCK = re.compile(r"^ \* API\n \*   offers: (.*(?:\n \*\s{11,}.*)*)\n \*   needs:  (.*)$", re.M)


def names(text):
    return [n.strip() for n in re.sub(r"\n \*\s+", " ", text).replace("()", "").split(",") if n.strip()]


def main():
    files = sorted(f for f in os.listdir(BPF) if f.endswith((".h", ".c")))
    text = {f: open(os.path.join(BPF, f)).read() for f in files}
    bad = 0
    for h in (f for f in files if f.endswith(".h")):
        defined = set(DEF.findall(text[h]))
        used = {n for n in defined
                if any(re.search(r"\b%s\s*\(" % n, text[o]) for o in files if o != h)}
        offers = sorted(used, key=lambda n: text[h].index(n + "("))
        needs = INC.findall(text[h])
        want = "offers: %s\nneeds:  %s" % (", ".join(n + "()" for n in offers) or "(no functions)",
                                           ", ".join(needs) or "(nothing)")
        if "--print" in sys.argv:
            print("== bpf/%s\n%s" % (h, want))
            continue
        first = text[h][: text[h].find("#ifndef")]  # the comments before the guard
        m = BLOCK.search(first)
        if not m:
            print("check-bpf-api: bpf/%s: no API block in its first comment; it should say:\n%s"
                  % (h, want), file=sys.stderr)
            bad += 1
            continue
        # A header of types and maps only says "(no functions)" and what it holds instead.
        got_offers = [] if m.group(1).startswith("(no functions)") else names(m.group(1))
        got_needs = [] if m.group(2).strip() == "(nothing)" else names(m.group(2))
        if sorted(got_offers) != sorted(offers) or got_needs != needs:
            print("check-bpf-api: bpf/%s: its API block says\n  offers: %s\n  needs:  %s\n"
                  "but the code says\n  %s" % (h, ", ".join(got_offers), ", ".join(got_needs),
                                               want.replace("\n", "\n  ")), file=sys.stderr)
            bad += 1
    if "--print" not in sys.argv:
        if bad:
            return 1
        print("check-bpf-api: the API blocks of %d bpf/*.h headers agree with the code"
              % sum(f.endswith(".h") for f in files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
