#!/usr/bin/env bash
# The LogQL queries docs/operations.md documents for the flow log parse with Grafana's own LogQL
# grammar (@grafana/lezer-logql, tests/logql/package-lock.json, installed by scripts/setup.sh),
# and two broken ones do not (so that a parser accepting anything fails here).
#
#   tests/logql/test_logql.sh
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
T=0 FAILED=0
ok() { T=$((T + 1)); echo "ok $T - $*"; }
not_ok() { T=$((T + 1)); FAILED=$((FAILED + 1)); echo "not ok $T - $*"; }
[ -d "$HERE/node_modules/@grafana/lezer-logql" ] ||
	{ echo "Bail out! tests/logql/node_modules is missing: run scripts/setup.sh (make setup)"; exit 1; }
work=$(mktemp -d /tmp/rwtest-logql.XXXXXX)
trap 'rm -rf "$work"' EXIT

if node "$HERE/check.js" "$ROOT/docs/operations.md" >"$work/out.txt" 2>&1; then
	ok "every documented LogQL query parses ($(grep -c '^parsed' "$work/out.txt") queries)"
else
	not_ok "docs/operations.md: $(grep -v '^parsed' "$work/out.txt")"
fi
sed 's/^/# /' "$work/out.txt"

cat >"$work/bad.md" <<'EOF'
<!-- logql: a parenthesis missing -->
```
sum by (reason (count_over_time({job="runwall"} | json [5m]))
```

<!-- logql: a filter without its value -->
```
{job="runwall"} | json | run=
```
EOF
if ! node "$HERE/check.js" "$work/bad.md" >"$work/bad.txt" 2>&1 && [ "$(grep -c '^not parsed' "$work/bad.txt")" -eq 2 ]; then
	ok "two broken queries are refused"
else
	not_ok "broken queries: $(cat "$work/bad.txt")"
fi

echo "1..$T"
[ "$FAILED" -eq 0 ]
