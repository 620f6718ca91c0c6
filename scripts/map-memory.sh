#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Kernel memory of runwall's maps on this node, as the kernel accounts it (`bpftool map show`:
# memlock, the map's own estimate of its memory on kernels >= 6.4), per map: every map pinned
# under BPFFS and the inner maps of both slots of each policy table. docs/operations.md, "Sizing".
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
	# ARRAY_OF_MAPS: the inner map in each slot (key 0 and 1), when there is one.
	if [ "$(show pinned "$pin" | jq -r .type)" = array_of_maps ]; then
		for slot in 0 1; do
			id=$(bpftool -j map lookup pinned "$pin" key "$slot" 0 0 0 2>/dev/null | jq -r '.value // empty | map(ltrimstr("0x")) | reverse | join("")' || true)
			[ -n "$id" ] && [ "$id" != 00000000 ] && id=$((16#$id)) && rows+=("$(show id "$id" | jq --arg s "$slot" --arg o "$(basename "$pin")" '.name = "\($o)[\($s)]"')")
		done
	fi
done
printf '%s\n' "${rows[@]}" | jq -rs '
	(["MAP", "TYPE", "MAX_ENTRIES", "KIB"] | @tsv),
	(sort_by(-.bytes_memlock)[] | [.name, .type, .max_entries, (.bytes_memlock / 1024 | floor)] | @tsv),
	(["total", "", "", (map(.bytes_memlock) | add / 1024 | floor)] | @tsv)' | column -t
