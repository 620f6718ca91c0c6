#!/usr/bin/env bash
# make bench: every benchmark, a table with each target on stdout, JSON in BUILD/bench.json.
# Numbers from a busy machine are noise: run it on a quiet one.
#
#   tests/bench/run.sh [BUILD] [--quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
quick=
[ "${2:-}" = --quick ] && quick=--quick
[ "$(id -u)" -eq 0 ] || { echo "tests/bench/run.sh: run as root" >&2; exit 1; }
scripts/bpffs-mount.sh

"$build/tests/bench_datapath" $quick --runwall "$build/runwall" --json "$build/bench-datapath.json"
"$build/tests/bench_lookups" $quick --json "$build/bench-lookups.json"
echo "# veth throughput, 1 000 rules, modes interleaved per trial"
tests/bench/veth.sh "$build" "$build/bench-veth.json" ${quick:+2 1}
echo "# the view's queries against the agent's loop: a flood, idle and under 200 /api/graph clients"
tests/bench/view.sh "$build" "$build/bench-view.json" ${quick:+1 2}
echo "# the time until a refusal's errno appears, from a real socket in a sandbox"
tests/bench/refusal.sh "$build" "$build/bench-refusal.json" ${quick:+100}
tests/bench/report.py "$build/bench.json" "$build/bench-datapath.json" "$build/bench-lookups.json" \
	"$build/bench-veth.json" "$build/bench-view.json" "$build/bench-refusal.json"
