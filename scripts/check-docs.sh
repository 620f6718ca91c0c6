#!/usr/bin/env bash
# check-docs.sh: the docs say what the tree and the binary say (run by `make check`).
#
#   scripts/check-docs.sh [BUILD] [--update]
#
# 1. Every relative link and #anchor in README.md, docs/**/*.md and tests/README.md resolves: the
#    file or folder exists, and an anchor names a heading of the target page by GitHub's rules
#    (the heading's text, lower case, punctuation but '-' and '_' dropped, spaces to '-', a
#    repeated heading suffixed -1, -2, ...) or an HTML id/name in it. Links inside code are not
#    links and are skipped; so are absolute URLs (nothing is fetched).
# 2. Each command of `runwall help` has its page docs/cli/COMMAND.md, and each page there is a
#    command. A page carries the command's usage as
#        <!-- usage: runwall help COMMAND -->
#        ```
#        ...the exact output of `BUILD/runwall help COMMAND`...
#        ```
#    and every such block (docs/cli/README.md has `runwall help`'s own) must equal the binary's
#    output byte for byte: the help text lives next to each command's code
#    (user/cli/cli_COMMAND.c), so a changed option shows up here until its page follows.
#    --update writes the binary's text into every usage block instead (then read the diff: the
#    rest of the page may need to follow too).
# 3. docs/code.md's tables name every source file under bpf/, include/ and user/, and no file that
#    is not there.
#    tests/README.md's table of test_datapath's parts names every tests/kernel/datapath/*.c.
# 4. Figures the docs derive from the code are the code's: the ring's record size and capacity
#    (docs/architecture.md) from include/runwall.h.
#    docs/view.md's metrics table names every runwall_* series user/ puts on /metrics (a
#    histogram's _bucket, _sum and _count under its own name), and no series that is not there.
# 5. docs/operations.md's table of alerts is manifests/monitoring/prometheusrule.yaml's
#    (scripts/check-alerts.py); --update writes it there too.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
args=()
for a in "$@"; do
	if [ "$a" = --update ]; then update=1; else args+=("$a"); fi
done
build=${args[0]:-build}
[ -x "$build/runwall" ] || { echo "check-docs: $build/runwall is missing: run make" >&2; exit 1; }
# Debian's python3, as the test libraries use.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if [ "$update" = 1 ]; then "$py" scripts/check-alerts.py --update; else "$py" scripts/check-alerts.py; fi
exec "$py" - "$build/runwall" "$update" <<'PY'
import difflib, glob, os, re, subprocess, sys

runwall, update = sys.argv[1], sys.argv[2] == "1"
pages = sorted(set(["README.md", "tests/README.md"] + glob.glob("docs/**/*.md", recursive=True)))
errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text (as github-slugger does)."""
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    s = re.sub(r"<[^>]+>", "", s)  # inline HTML
    s = s.replace("`", "")
    s = s.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


anchors_cache = {}


def anchors(path):
    if path not in anchors_cache:
        seen, out = {}, set()
        text = open(path, encoding="utf-8").read()
        for _, line in prose_lines(text):
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                k = seen.get(base, 0)
                seen[base] = k + 1
                out.add(base if k == 0 else f"{base}-{k}")
            for a in re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
                out.add(a)
        anchors_cache[path] = out
    return anchors_cache[path]


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")


def check_links(page):
    text = open(page, encoding="utf-8").read()
    for n, line in prose_lines(text):
        bare = re.sub(r"(`+).*?\1", "", line)  # inline code is not a link
        targets = [m.group(1) for m in LINK.finditer(bare)]
        m = REFDEF.match(bare)
        if m:
            targets.append(m.group(1))
        for t in targets:
            where = f"{page}:{n}"
            if not t:
                err(where, "empty link target")
                continue
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):
                continue  # http:, https:, mailto:: not ours to check
            path, _, frag = t.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if target.startswith(".."):
                err(where, f"link '{t}' leaves the repository")
                continue
            if not os.path.exists(target):
                err(where, f"broken link '{t}': no file or folder {target}")
                continue
            if frag:
                if os.path.isdir(target) or not target.endswith(".md"):
                    err(where, f"link '{t}': an anchor into {target}, which is not a page")
                elif frag not in anchors(target):
                    err(where, f"broken anchor '{t}': no heading '#{frag}' in {target}")


def help_text(cmd):
    args = [runwall, "help"] + ([cmd] if cmd else [])
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"`{' '.join(args)}` exited {r.returncode}: {r.stderr.strip()}"
    return r.stdout, None


MARK = re.compile(r"^<!-- usage: runwall help(?: (\S+))? -->$")


def check_usage(page, blocks_seen):
    lines = open(page, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        cmd = m.group(1) or ""
        where = f"{page}:{i + 1}"
        blocks_seen.setdefault(page, []).append(cmd)
        if i + 1 >= len(lines) or lines[i + 1] != "```":
            err(where, "a usage marker must be followed by a ``` block")
            continue
        try:
            end = lines.index("```", i + 2)
        except ValueError:
            err(where, "the usage block is not closed")
            continue
        doc = "\n".join(lines[i + 2:end]) + "\n"
        want, problem = help_text(cmd)
        if problem:
            err(where, problem)
            continue
        if doc != want and update:
            lines[i + 2:end] = want.rstrip("\n").split("\n")
            open(page, "w", encoding="utf-8").write("\n".join(lines))
            print(f"check-docs: {where}: usage block updated from `runwall help {cmd}`".replace("  ", " "))
            del blocks_seen[page][-1]  # counted again by the pass over the new text
            return check_usage(page, blocks_seen)
        if doc != want:
            diff = difflib.unified_diff(want.splitlines(), doc.splitlines(),
                                        f"runwall help {cmd}".strip(), page, lineterm="", n=1)
            err(where, f"the usage block differs from `runwall help {cmd}`".replace("  ", " ") +
                " (update the page from the binary):\n    " + "\n    ".join(diff))


for page in pages:
    check_links(page)

top, problem = help_text("")
if problem:
    err(runwall, problem)
    commands = []
else:
    part = top.split("COMMAND :=\n", 1)[1].split("\n\n", 1)[0]
    commands = [l.split()[0] for l in part.split("\n") if l.strip()]
blocks = {}
for page in sorted(glob.glob("docs/cli/*.md")):
    check_usage(page, blocks)
for cmd in commands:
    page = f"docs/cli/{cmd}.md"
    if not os.path.exists(page):
        err(page, f"missing: `runwall help` lists the command '{cmd}'")
    elif cmd not in blocks.get(page, []):
        err(page, f"no <!-- usage: runwall help {cmd} --> block")
for page in sorted(glob.glob("docs/cli/*.md")):
    name = os.path.basename(page)[:-3]
    if name != "README" and name not in commands:
        err(page, f"'{name}' is not a command of `runwall help` ({', '.join(commands)})")
if "" not in blocks.get("docs/cli/README.md", []):
    err("docs/cli/README.md", "no <!-- usage: runwall help --> block")


def check_code_map():
    page = "docs/code.md"
    text = open(page, encoding="utf-8").read()
    named = set()
    for line in text.split("\n"):
        if line.startswith("| `"):
            named.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    tree = set()
    for top in ("bpf", "include", "user"):
        for root, _, files in os.walk(top):
            tree.update(os.path.join(root, f) for f in files)
    for f in sorted(tree - named):
        err(page, f"{f} is a source file with no row (add one: what it does)")
    for f in sorted(named - tree):
        err(page, f"names {f}, which does not exist")
    page = "tests/README.md"
    parts = set(re.findall(r"^\| `([a-z0-9_]+\.c)` \|", open(page, encoding="utf-8").read(), re.M))
    for f in sorted(glob.glob("tests/kernel/datapath/*.c")):
        if os.path.basename(f) not in parts:
            err(page, f"test_datapath's part {f} has no row in its table")
    return len(tree)


def check_ring_figures():
    h = open("include/runwall.h", encoding="utf-8").read()
    ring = eval(re.search(r"#define RW_RINGBUF_BYTES \(([^)]*)\)", h).group(1))
    record = int(re.search(r"sizeof\(struct rw_event\) == (\d+)", h).group(1))
    records = ring // (record + 8)
    page = "docs/architecture.md"
    text = open(page, encoding="utf-8").read()
    num = lambda s: int(s.replace(" ", ""))
    m = re.search(r"(\d+) MiB / \((\d+)-byte record \+ 8-byte header\) = ([\d ]+) records", text)
    if not m:
        err(page, "no 'N MiB / (R-byte record + 8-byte header) = C records' sentence")
    elif (num(m.group(1)) << 20, num(m.group(2)), num(m.group(3))) != (ring, record, records):
        err(page, f"the ring is {ring >> 20} MiB / ({record}-byte record + 8-byte header) = "
            f"{records} records (include/runwall.h), not '{m.group(0)}'")
    m = re.search(r"About (\d+) sandbox veths bursting\s+together within one drain interval "
                  r"\((\d+) x (\d+) > ([\d ]+)\)", text)
    if not m:
        err(page, "no 'About N sandbox veths bursting together ... (N x B > C)' sentence")
    else:
        n, k, burst, cap = (num(g) for g in m.groups())
        if cap != records or n != k or n * burst <= records or (n - 1) * burst > records:
            err(page, f"'{m.group(0)}': the ring holds {records} records")
    return records


def check_metrics():
    """The series user/ exports on /metrics against docs/view.md's metrics table, both ways."""
    code = set()
    for src in glob.glob("user/**/*.c", recursive=True):
        code |= set(re.findall(r'"(runwall_[a-z0-9_]+)', open(src, encoding="utf-8").read()))
    # A histogram's _bucket, _sum and _count lines are its own family's.
    code = {n for n in code
            if not (re.search(r"_(bucket|sum|count)$", n) and re.sub(r"_[a-z]+$", "", n) in code)}
    page = "docs/view.md"
    section = re.search(r"^## Metrics\n(.*?)(?=^## )", open(page, encoding="utf-8").read(),
                        re.M | re.S)
    docs = set()
    for row in re.findall(r"^\|([^|]*)\|", section.group(1) if section else "", re.M):
        docs |= set(re.findall(r"`(runwall_[a-z0-9_]+)", row))
    if not section:
        err(page, "no '## Metrics' section")
    for n in sorted(code - docs):
        err(page, f"the metrics table leaves out {n}, which user/ exports")
    for n in sorted(docs - code):
        err(page, f"the metrics table lists {n}, which nothing in user/ exports")
    return len(code)


nfiles = check_code_map()
nrecords = check_ring_figures()
nmetrics = check_metrics()
if errors:
    for e in errors:
        print(f"check-docs: {e}", file=sys.stderr)
    print(f"check-docs: {len(errors)} problem(s) in the docs", file=sys.stderr)
    sys.exit(1)
nblocks = sum(len(v) for v in blocks.values())
print(f"check-docs: {len(pages)} pages, links and anchors resolve; {nblocks} usage blocks equal "
      f"`runwall help` ({len(commands)} commands); docs/code.md names all {nfiles} source files; "
      f"the ring's {nrecords} records agree; docs/view.md lists the {nmetrics} series /metrics has")
PY
