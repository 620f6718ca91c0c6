#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Kernel memory of runwall's maps (scripts/map-memory.sh) on a netns node with a real agent,
# for docs/operations.md's "Sizing" table: the seed's default snapshot with 2 bound sandboxes,
# then 1 000 runs of one pod with 10 exact and 1 CIDR rule each with 20 bound sandboxes.
# Reports; asserts nothing but that each node came up.
#
#   tests/bench/map_memory.sh [BUILD]
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../netns/lib.sh"
rw_suite_begin mapmem rwm "${1:-build}"
trap rw_suite_cleanup EXIT

rw_node_up || rw_bail "the node did not come up"
for i in 1 2; do rw_sandbox_add "s$i" "enim${ID}s$i" "10.1.2.$i" || rw_bail "sandbox $i"; done
rw_agent_start --ifprefix enim
rw_agent_wait 60 || rw_bail "the agent did not listen"
jq --arg a 10.1.2.1 --arg b 10.1.2.2 '.runs[0].pods = [$a] | .runs[1].pods = [$b] | .runs |= .[:2]' \
	"$RW_ROOT/manifests/policy-default.json" >"$RW_WORK/seed.json"
rw apply "$RW_WORK/seed.json" >/dev/null || rw_bail "the seed snapshot"
entries=$(rw -j status | jq '[.maps[]? | select(.name | test("allow|deny|inbound|pods")) | .entries // 0] | add // "?"')
echo "# the seed's default snapshot (2 runs), 2 bound sandboxes ($entries entries)"
"$RW_ROOT/scripts/map-memory.sh" "$RW_BPFFS" | sed 's/^/#   /'

for i in $(seq 3 20); do rw_sandbox_add "s$i" "enim${ID}s$i" "10.1.2.$i" || rw_bail "sandbox $i"; done
"$RW_PY" - "$RW_WORK/seed.json" >"$RW_WORK/big.json" <<'EOT'
import json, sys
snap = json.load(open(sys.argv[1]))
snap["revision"] = 2
runs = []
for r in range(1000):
    allow = [{"ip": "52.%d.%d.%d" % (96 + r // 250, r % 250, 1 + k), "tcp": [443]} for k in range(10)]
    allow.append({"cidr": "54.%d.%d.0/24" % (r // 250, r % 250), "tcp": [443]})
    runs.append({"id": "run-%04d" % r, "pods": ["10.1.%d.%d" % (2 + r // 250, 1 + r % 250)], "allow": allow})
snap["runs"] = runs
print(json.dumps(snap))
EOT
rw apply "$RW_WORK/big.json" >/dev/null || rw_bail "the 1 000-run snapshot"
echo "# 1 000 runs of one pod, 10 exact and 1 CIDR rule each, 20 bound sandboxes"
"$RW_ROOT/scripts/map-memory.sh" "$RW_BPFFS" | sed 's/^/#   /'
echo "# agent RSS: $(awk '/VmRSS/ {print $2, $3}' /proc/"$RW_AGENT_PID"/status)"
