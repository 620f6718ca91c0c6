/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* liveruns.h: the runs of the live slot, read from its pods map: for status, map, counters,
 * explain and /metrics. Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_LIVERUNS_H
#define RUNWALL_LIVERUNS_H

#include <stddef.h>
#include <linux/types.h>

#include "datapath.h"

/* A run of the live slot, as the pods map says. */
struct rw_live_run {
	char id[RW_RUN_ID_LEN];
	__u32 idx;
	__u32 gen;
	__u8 egress;
	__be32 *pods;
	size_t n_pods;
	__be32 (*pods6)[4]; /* its IPv6 pods (rw_pods6), in address order */
	size_t n_pods6;
};

/* The runs of the live slot, by counter index (none when the node is not ready), with their pods
 * of both families.
 */
int rw_live_runs(const struct rw_datapath *dp, struct rw_live_run **runs, size_t *n);
void rw_live_runs_free(struct rw_live_run *runs, size_t n);
/* Index in runs[] of the run with this id or counter index (id NULL), -ENOENT when none. */
/* The run of a pod's IPv6 address (network byte order) in the live slot, as rw_live_pod() of an
 * IPv4 one: 0, -ENOENT when in no run.
 */
int rw_live_pod6(const struct rw_datapath *dp, const __be32 pod_ip6[4], struct rw_pod *out);
int rw_live_run_find(const struct rw_live_run *runs, size_t n, const char *id, __u32 idx);

#endif /* RUNWALL_LIVERUNS_H */
