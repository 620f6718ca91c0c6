#!/usr/bin/env bash
# The time until a refusal's errno appears, from a real socket in a sandbox of a node built in
# namespaces (lib.sh) with the real agent: connect() to a refused public host:443 until
# ECONNREFUSED (runwall's reset), and a connected UDP socket's send until its recv() fails with
# EHOSTUNREACH (runwall's ICMP unreachable). TRIALS attempts each, the answer budget lifted so
# that every one is answered; p50 and p99. Writes JSON rows to OUT.
#
#   tests/bench/refusal.sh BUILD OUT [TRIALS]
set -Eeuo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/netns/lib.sh
source "$HERE/../netns/lib.sh"
rw_bench_begin refusal-bench rwq "refusal.sh BUILD OUT [TRIALS]" "$@"
trials=${3:-500}
REFUSED=93.184.216.34 # "the public internet" (lib.sh), not in the sandbox's allowlist
trap rw_suite_cleanup EXIT

rw_node_up
rw_sandbox_add a eniq${ID}a 10.1.2.3
cat >"$RW_WORK/policy.json" <<JSON
{"revision": 1, "services": [{"name": "egress-proxy", "ip": "172.20.0.10", "tcp": [443]}],
 "runs": [{"id": "run-bench", "pods": ["10.1.2.3"], "egress": "allowlist"}]}
JSON
rw_agent_start --policy "$RW_WORK/policy.json" --ifprefix eniq --answer-rate 0
rw_agent_wait
rw_wait 10 rw_agent_bound 1 || rw_bail "the agent did not bind the sandbox"

for proto in tcp udp; do
	ip netns exec "${RW_PREFIX}a" "$RW_PY" "$HERE/refusal_time.py" "$proto" "$REFUSED" 443 \
		"$trials" 2 >"$RW_WORK/$proto.json"
	diag "$proto: $(jq -c '{want, seen}' "$RW_WORK/$proto.json")"
done
"$RW_PY" - "$RW_OUT" "$RW_WORK/tcp.json" "$RW_WORK/udp.json" <<'PY'
import json, sys
rows = []
for f, what in ((sys.argv[2], "connect() to a refused host until ECONNREFUSED"),
                (sys.argv[3], "UDP send to a refused host until recv() fails EHOSTUNREACH")):
    r = json.load(open(f))
    us = r["us"]
    if not us or len(us) != sum(r["seen"].values()):
        sys.exit(f"refusal bench: {r['proto']}: {r['seen']}, expected every attempt {r['want']}")
    p = lambda q: us[min(len(us) - 1, int(q * len(us)))]
    rows.append({"name": f"refusal: {what}, p50", "value": p(0.5), "unit": "us"})
    rows.append({"name": f"refusal: {what}, p99", "value": p(0.99), "unit": "us"})
json.dump(rows, open(sys.argv[1], "w"), indent=1)
PY
rw_suite_end
