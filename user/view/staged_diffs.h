/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* staged_diffs.h: events whose verdict under the staged snapshot differs from the kernel's
 * (user/agent/staged.c), counted by (run, from, to) for /metrics'
 * runwall_staged_differences_total. from and to are "allow" or "drop" and differ, so a run has
 * two series at most; a fixed number of series: past RW_STAGED_SERIES_MAX, events count in one
 * overflow series, never lost.
 */
#ifndef RUNWALL_STAGED_DIFFS_H
#define RUNWALL_STAGED_DIFFS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "runwall.h"

#define RW_STAGED_SERIES_MAX 1024

struct rw_staged_series {
	char run[RW_RUN_ID_LEN];
	bool from_allow; /* the kernel allowed, the staged snapshot refuses; else the reverse */
	uint64_t count;	 /* events */
};

struct rw_staged_diffs {
	struct rw_staged_series series[RW_STAGED_SERIES_MAX];
	size_t n;
	uint64_t overflow; /* events of keys past the cap */
};

/* Count one event of `run` whose verdict was `from` and would be `to` ("allow" or "drop");
 * anything else (the same verdict, a NULL) is not counted.
 */
void rw_staged_diffs_add(struct rw_staged_diffs *t, const char *run, const char *from,
			 const char *to);

/* Keep only the series whose run `keep` accepts, in their order. */
void rw_staged_diffs_keep(struct rw_staged_diffs *t, bool (*keep)(const char *run, void *arg),
			  void *arg);

#endif /* RUNWALL_STAGED_DIFFS_H */
