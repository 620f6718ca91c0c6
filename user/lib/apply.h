/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* apply.h: putting a policy snapshot into the kernel, atomically. */
#ifndef RUNWALL_APPLY_H
#define RUNWALL_APPLY_H

#include <stddef.h>
#include <stdint.h>
#include "datapath.h"
#include "policy.h"

struct rw_apply_result {
	uint64_t revision;
	uint64_t previous; /* revision in force before, 0 when the node was not ready */
	unsigned int slot; /* the slot now live */
	unsigned int runs;
	unsigned int pods;
	unsigned int entries;	    /* allow, deny and inbound entries written */
	unsigned int flows_flushed; /* tables of pods that joined a run: from another, or none */
	unsigned int written;	    /* keys written or deleted in the idle slot (the diff) */
	int full;		    /* the idle slot was unknown: cleared and written in full */
	double wait_ms;		    /* the grace period the last flip still owed (grace.c) */
	double build_ms;	    /* fill the idle slot: plan_ms + write_ms */
	double plan_ms;		    /* run indexes, the snapshot's entries, the diff */
	double write_ms;	    /* the writes into the idle slot */
	double flip_ms;		    /* the run revisions, the refusal mode and the flip */
	double total_ms;
};

/* Apply `next` over what is in force. `prev` is the snapshot in force if the caller has it
 * (runs it leaves unchanged keep their generation), or NULL. Waits for the grace period the
 * last flip still owes (grace.c), writes the difference between what the idle slot's
 * inner maps hold and `next` into them (in full when that is unknown), then flips the live slot
 * with one atomic store, `next`'s lease stored by the same run (rw_config_flip_leased()), and
 * forgets the flows of pods that moved. When it returns, every packet whose program starts
 * from then on is judged by `next` (the argument is at the flip in apply.c): it may be
 * acknowledged at once. The flip's grace period is owed, and begun on a thread of its own
 * (grace.c), not waited for. On error the live
 * slot is untouched, the idle slot may be half written (the next apply rewrites it), and `err`
 * says why.
 */
int rw_apply(struct rw_datapath *dp, const struct rw_policy *prev, const struct rw_policy *next,
	     struct rw_apply_result *res, char *err, size_t errlen);

/* Create the two slots' inner maps once, or adopt those the pinned outer maps hold (their
 * contents are then unknown: the first apply into each rewrites it in full). The agent calls it
 * right after rw_datapath_load(), so that the pins hold the slots from the start; rw_apply()
 * calls it on a datapath that has none yet. rw_datapath_close() frees what it made through
 * dp->apply_free (the datapath knows nothing of applies); rw_apply_release() frees it now.
 */
int rw_apply_prepare(struct rw_datapath *dp, char *err, size_t errlen);
void rw_apply_release(struct rw_datapath *dp);

/* Forget what the slots hold, as a restarted agent would (tests). */
void rw_apply_forget(const struct rw_datapath *dp);

#ifdef RW_TEST_FAULTS
/* Tests, in the test build of the library only (-DRW_TEST_FAULTS): make the next rw_apply()
 * fail after this many key writes, as if it were killed there.
 */
void rw_apply_inject_fault(long after_writes);
#endif

/* The run of a pod IP in the live slot (for explain, status and the CLI). */
int rw_live_pod(const struct rw_datapath *dp, __be32 pod_ip, struct rw_pod *out);

/* fd of the live slot's inner map of one policy table (RW_M_PODS...RW_M_INBOUND), to close. */
int rw_live_inner_fd(const struct rw_datapath *dp, enum rw_map_id table);

#endif /* RUNWALL_APPLY_H */
