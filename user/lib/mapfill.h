/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* mapfill.h: how full each pinned map is, read only: for `runwall status`, `runwall map` and
 * /metrics. Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_MAPFILL_H
#define RUNWALL_MAPFILL_H

#include "datapath.h"

/* One map. For the slotted policy maps, the live slot's inner map (entries 0 when the node is
 * not ready); for rw_counters and rw_run_revs, the indexes in use (node + live runs); for
 * rw_conntrack, the flows of every sandbox's table against the node's budget; for rw_events,
 * the bytes not consumed yet out of the ring's size.
 */
struct rw_map_fill {
	const char *name;  /* what `runwall map` calls it: "allow" (rw_map_shown_names) */
	const char *pin;   /* pinned as: "rw_allow_exact" */
	const char *type;  /* "hash", "lpm_trie", ... (of the inner map for slotted ones) */
	long long entries; /* -errno when it could not be counted */
	__u32 max_entries;
};

int rw_map_fill(const struct rw_datapath *dp, struct rw_map_fill fill[RW_M__COUNT]);

/* Entries in a map (by walking its keys, of the size the kernel says), or a negative errno. */
long rw_map_count_entries(int fd);

/* max_entries of a map, 0 on error. */
__u32 rw_map_max_entries(int fd);

/* Bytes written to a ring buffer map and not consumed yet (-errno when it cannot be mapped). */
long long rw_ring_pending(int fd, __u32 *size);

#endif /* RUNWALL_MAPFILL_H */
