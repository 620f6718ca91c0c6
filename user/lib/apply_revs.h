/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* apply_revs.h: which runs' cached verdicts an apply invalidates (rw_run_revs). */
#ifndef RUNWALL_APPLY_REVS_H
#define RUNWALL_APPLY_REVS_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include "datapath.h"
#include "policy.h"

/* What an apply gives each run of the next snapshot (rw_apply, apply.c). */
struct run_slot {
	__u32 idx;
	__u32 gen;
	bool same; /* written exactly like prev's run at the same position: copy its entries */
	const struct rw_policy_run *old; /* prev's run of the same id, if the run keeps its index */
};

/* Before the flip to `next`: rw_run_revs[i] = next->revision for every run index whose cached
 * verdicts `next` may change, so that their flows are judged in full at their next packet.
 * Only the indexes of runs that `next` leaves exactly as they were (same pods, egress mode and
 * rules, same index and same rule ids) keep their value, and only when no node-wide part
 * changed; `prev` NULL (not known) changes every index. dp->cut_revs[i] = next->revision for
 * those of them whose flows `next` may also refuse: all but the runs that only gained rules
 * (run_widened()). 0 or a negative errno, with `err`.
 */
int rw_apply_revs(struct rw_datapath *dp, const struct rw_policy *prev,
		  const struct rw_policy *next, const struct run_slot *slots, char *err,
		  size_t errlen);

#endif /* RUNWALL_APPLY_REVS_H */
