/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* liveruns.h: the runs of the live slot, read from its pods maps: for status, map, counters,
 * explain and /metrics. Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_LIVERUNS_H
#define RUNWALL_LIVERUNS_H

#include <stddef.h>
#include <linux/types.h>

#include "datapath.h"

/* A run of the live slot, as the pods maps say (rw_pods, rw_pods6). */
struct rw_live_run {
	char id[RW_RUN_ID_LEN];
	__u32 idx;
	__u32 gen;
	__u8 egress;
	__be32 *pods; /* sorted */
	size_t n_pods;
	__be32 (*pods6)[4]; /* sorted */
	size_t n_pods6;
};

/* The runs of the live slot (with pods of either family), by counter index (none when the node
 * is not ready).
 */
int rw_live_runs(const struct rw_datapath *dp, struct rw_live_run **runs, size_t *n);
void rw_live_runs_free(struct rw_live_run *runs, size_t n);
/* Index in runs[] of the run with this id or counter index (id NULL), -ENOENT when none. */
int rw_live_run_find(const struct rw_live_run *runs, size_t n, const char *id, __u32 idx);

#endif /* RUNWALL_LIVERUNS_H */
