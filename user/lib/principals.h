/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* principals.h: the selectors of rules that name who inside a pod may use them ("from"), and
 * the containers they admit, written into rw_from and rw_admit for one slot (runwall.h).
 */
#ifndef RUNWALL_PRINCIPALS_H
#define RUNWALL_PRINCIPALS_H

#include <stddef.h>
#include <stdint.h>
#include "datapath.h"
#include "policy.h"

/* A container the caller found on the node: its name in its pod, its cgroup v2 id and its pod's
 * host veth. One with cgroup_id or ifindex 0 is not known yet, and admits nothing.
 */
struct rw_principal {
	const char *name;
	uint64_t cgroup_id;
	uint32_t ifindex;
};

/* The rule id (without RW_RULE_FROM) of p's services[i] and runs[r].allow[i], as rw_apply()
 * writes them.
 */
#define RW_SERVICE_RULE_ID(i) RW_RULE_ID(RW_RULE_KIND_SERVICE, (i), 0)
#define RW_RUN_RULE_ID(r, i)  RW_RULE_ID(RW_RULE_KIND_RUN, (r), (i))

/* Make rw_from's and rw_admit's entries of `slot` those of `p` (NULL: none) and the containers
 * `c` (n of them): stale entries of the slot deleted, missing ones added. For an idle slot
 * before its flip (rw_apply()), and for the live slot as containers come and go. 0 or a
 * negative errno with err saying what and where.
 */
int rw_principals_write(const struct rw_datapath *dp, __u32 slot, const struct rw_policy *p,
			const struct rw_principal *c, size_t n, char *err, size_t errlen);

/* The same for rw_admit only (rw_from of a live slot never changes). */
int rw_admit_write(const struct rw_datapath *dp, __u32 slot, const struct rw_policy *p,
		   const struct rw_principal *c, size_t n, char *err, size_t errlen);

#endif /* RUNWALL_PRINCIPALS_H */
