#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Kernel memory of runwall's maps on this node, as the kernel accounts it (`bpftool map show`:
# memlock, the map's own estimate of its memory on kernels >= 6.4), per map: every map pinned
# under BPFFS, the inner maps of both slots of each policy table, and each sandbox's conntrack
# table (named rw_conntrack[IFINDEX]). docs/operations.md, "Sizing".
#
#   scripts/map-memory.sh [BPFFS]          (default /sys/fs/bpf/runwall)
set -euo pipefail

bpffs=${1:-/sys/fs/bpf/runwall}
[ -e "$bpffs/rw_config" ] || { echo "map-memory: nothing pinned at $bpffs" >&2; exit 2; }
command -v bpftool >/dev/null || { echo "map-memory: bpftool is missing" >&2; exit 2; }

show() { bpftool -j map show "$@"; }
rows=()
for pin in "$bpffs"/rw_*; do
	[ -f "$pin" ] || continue
	rows+=("$(show pinned "$pin")")
	# ARRAY_OF_MAPS (the policy tables: the inner map in each slot) and HASH_OF_MAPS (conntrack:
	# one table per sandbox veth): every inner map, by the id its entry holds.
	case "$(show pinned "$pin" | jq -r .type)" in
	array_of_maps | hash_of_maps)
		while read -r key id; do
			rows+=("$(show id "$id" | jq --arg k "$key" --arg o "$(basename "$pin")" '.name = "\($o)[\($k)]"')")
		done < <(bpftool -j map dump pinned "$pin" | jq -r '.[] |
			[(.key | map(ltrimstr("0x")) | reverse | join("")), (.value | map(ltrimstr("0x")) | reverse | join(""))] |
			"\(.[0] | ascii_downcase) \(.[1])"' | while read -r k v; do echo "$((16#$k)) $((16#$v))"; done)
		;;
	esac
done
# The conntrack tables one line each would be long on a busy node: summed, with their count.
printf '%s\n' "${rows[@]}" | jq -rs '
	(map(select(.name | startswith("rw_conntrack["))) | if length > 0 then
		[{name: "rw_conntrack[*] (\(length) sandbox tables)", type: .[0].type,
		  max_entries: (map(.max_entries) | add), bytes_memlock: (map(.bytes_memlock) | add)}]
	 else [] end) + map(select(.name | startswith("rw_conntrack[") | not)) |
	(["MAP", "TYPE", "MAX_ENTRIES", "KIB"] | @tsv),
	(sort_by(-.bytes_memlock)[] | [.name, .type, .max_entries, (.bytes_memlock / 1024 | floor)] | @tsv),
	(["total", "", "", (map(.bytes_memlock) | add / 1024 | floor)] | @tsv)' | column -t -s $'\t'
