/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* pod_lookups.h: which of the egress policy's lookups cannot match for a run's pods. */
#ifndef RUNWALL_POD_LOOKUPS_H
#define RUNWALL_POD_LOOKUPS_H

#include <linux/types.h>
#include "runwall.h"
#include "policy.h"
#include "datapath.h"

/* The RW_SKIP_* bits (runwall.h) of the pods of `run` under snapshot `p`: a bit is set only
 * where the tables that `p` fills (services, deny list, the run's allow rules) hold nothing
 * that lookup could find, so the datapath's verdicts with them are those without. The value
 * must travel in the pod entries of the slot that holds `p`'s tables, and nowhere else.
 */
__u16 rw_pod_lookups(const struct rw_policy *p, const struct rw_policy_run *run);

/* The same bits in two parts, for an apply that builds every run's pod value: the node's (its
 * services, deny list and NAT64 prefix: once per snapshot) and the run's own (its allow rules,
 * the bits of RW_SKIP_RUN_BITS). rw_pod_lookups() is their union.
 */
#define RW_SKIP_RUN_BITS \
	(RW_SKIP_RUN_EXACT | RW_SKIP_RUN_CIDR | RW_SKIP6(RW_SKIP_RUN_EXACT | RW_SKIP_RUN_CIDR))
__u16 rw_node_lookups(const struct rw_policy *p);
__u16 rw_run_lookups(const struct rw_policy_run *run);

/* The invariant the datapath relies on, checked against what the live slot holds rather than
 * against a snapshot: every RW_SKIP_* bit of every pod entry (either family) is one that the
 * slot's own tables justify (read back key by key). 0, or -EPROTO with the first pod whose bit
 * is not justified in err (another negative errno when a map cannot be read). For tests and
 * checks, not for a packet's path: it reads every entry of the slot.
 */
int rw_pod_lookups_check(const struct rw_datapath *dp, char *err, size_t errlen);

#endif /* RUNWALL_POD_LOOKUPS_H */
