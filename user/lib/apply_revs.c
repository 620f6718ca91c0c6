// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* apply_revs.c: the per-run revisions the fast path checks cached verdicts against.
 *
 * A flow's conntrack entry caches its last allowed verdict (rule, path, run index), stamped with
 * the revision it was judged under; the datapath reuses it while rw_run_revs[run_idx] <= stamp
 * <= the revision in force (bpf/runwall.bpf.c, rw_fast). So an apply must move rw_run_revs[i]
 * to its revision for every run index i whose verdicts it may change, before its flip, and may
 * leave the others alone: their flows stay on the fast path across the apply.
 *
 * What a cached verdict depends on: the run's pods (a pod moved away or into it), its egress
 * mode, its allow rules, its rule ids (runs[a].allow[b]: its position in the snapshot and the
 * order of its rules), which run holds its index, and every node-wide part (services, deny
 * list, inbound rules, the node's egress mode, its nat64 prefix). The run's generation (assign_runs() in apply.c)
 * already moves on the first four and on a fresh index; the rest is checked here.
 *
 * A moved index is not always a cut one. A run that only gained rules (a claim's grant) refuses
 * nothing it allowed: its flows are judged again at their next packet, but none needs the probe
 * that reaches an idle connection (revoke_probe.c). dp->cut_revs says, per index, the last
 * revision that could refuse one of its flows; the probes look for flows stamped before it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "apply_revs.h"
#include "bpf_compat.h"

static bool ports_as_written(const __u16 *a, size_t na, const __u16 *b, size_t nb)
{
	return na == nb && (!na || !memcmp(a, b, na * sizeof(*a)));
}

/* Same rules in the same order: same rule ids for the same destinations. */
static bool rules_as_written(const struct rw_policy_rule *a, size_t na,
			     const struct rw_policy_rule *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!rw_policy_rule_same_addr(&a[i], &b[i]) ||
		    !ports_as_written(a[i].tcp, a[i].n_tcp, b[i].tcp, b[i].n_tcp) ||
		    !ports_as_written(a[i].udp, a[i].n_udp, b[i].udp, b[i].n_udp) ||
		    rw_policy_from_cmp(a[i].from, b[i].from))
			return false;
	return true;
}

/* The parts of a snapshot every run's verdicts depend on. */
static bool node_wide_same(const struct rw_policy *a, const struct rw_policy *b)
{
	if (a->egress != b->egress || a->n_deny != b->n_deny ||
	    !rw_policy_cidr_equal(&a->nat64, &b->nat64))
		return false;
	for (size_t i = 0; i < a->n_deny; i++)
		if (!rw_policy_cidr_equal(&a->deny[i], &b->deny[i]))
			return false;
	return rules_as_written(a->services, a->n_services, b->services, b->n_services) &&
	       rules_as_written(a->inbound, a->n_inbound, b->inbound, b->n_inbound);
}

/* Run r of next keeps every cached verdict of its index. */
static bool run_kept(const struct rw_policy *prev, const struct rw_policy *next,
		     const struct run_slot *slots, size_t r)
{
	const struct rw_policy_run *run = &next->runs[r], *old;

	/* A new generation: pods, egress mode or rules changed, or the run is new here, or its
	 * index is fresh (a freed index is never kept: no run of next holds it).
	 */
	if (slots[r].gen == (__u32)next->revision || !slots[r].idx || slots[r].idx >= RW_MAX_RUNS)
		return false;
	if (slots[r].same || !run->n_allow)
		return true;
	/* Its rules' ids name its position and their order. */
	old = r < prev->n_runs ? &prev->runs[r] : NULL;
	return old && !strcmp(old->id, run->id) &&
	       rules_as_written(old->allow, old->n_allow, run->allow, run->n_allow);
}

/* Whether a rule of the list names who in the pod may use it ("from"): what it admits moves with
 * the node's containers, not only with the snapshot.
 */
static bool any_from(const struct rw_policy_rule *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].from)
			return true;
	return false;
}

/* Run r of next refuses nothing that prev's run allowed: it keeps its index, its pods, its egress
 * and refusal modes, and prev's rules, as written, are the first of its own (it gained rules
 * after them), none of them with a "from". With every node-wide part the same, each flow of its
 * index was allowed by one of those rules, and still is.
 */
static bool run_widened(const struct rw_policy_run *run, const struct run_slot *s)
{
	const struct rw_policy_run *old = s->old;

	return old && !any_from(old->allow, old->n_allow) && old->egress == run->egress &&
	       old->refusal == run->refusal && old->n_pods == run->n_pods &&
	       old->n_pods6 == run->n_pods6 &&
	       (!old->n_pods || !memcmp(old->pods, run->pods, old->n_pods * sizeof(*old->pods))) &&
	       (!old->n_pods6 ||
		!memcmp(old->pods6, run->pods6, old->n_pods6 * sizeof(*old->pods6))) &&
	       old->n_allow <= run->n_allow &&
	       rules_as_written(old->allow, old->n_allow, run->allow, old->n_allow);
}

/* dp->cut_revs, made at the first apply: every index not known (UINT64_MAX). */
static int cut_revs_get(struct rw_datapath *dp)
{
	if (dp->cut_revs)
		return 0;
	dp->cut_revs = malloc(RW_MAX_RUNS * sizeof(*dp->cut_revs));
	if (!dp->cut_revs)
		return -ENOMEM;
	for (__u32 i = 0; i < RW_MAX_RUNS; i++)
		dp->cut_revs[i] = UINT64_MAX;
	return 0;
}

int rw_apply_revs(struct rw_datapath *dp, const struct rw_policy *prev,
		  const struct rw_policy *next, const struct run_slot *slots, char *err,
		  size_t errlen)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
	int fd = dp->map_fd[RW_M_RUN_REVS], ret = 0;
	__u64 rev = next->revision, *vals = NULL;
	bool keep[RW_MAX_RUNS] = {}, uncut[RW_MAX_RUNS] = {};
	__u32 *keys = NULL, n = 0;

	if (prev && node_wide_same(prev, next))
		for (size_t r = 0; r < next->n_runs; r++) {
			if (slots[r].idx >= RW_MAX_RUNS)
				continue;
			if (run_kept(prev, next, slots, r))
				keep[slots[r].idx] = true;
			else if (run_widened(&next->runs[r], &slots[r]))
				uncut[slots[r].idx] = true;
		}
	keys = calloc(RW_MAX_RUNS, sizeof(*keys));
	vals = calloc(RW_MAX_RUNS, sizeof(*vals));
	if (!keys || !vals || cut_revs_get(dp)) {
		ret = -ENOMEM;
		goto out;
	}
	/* Every other index, used or not: a freed index's flows and a reused one's are judged
	 * again too.
	 */
	for (__u32 i = 0; i < RW_MAX_RUNS; i++) {
		if (keep[i])
			continue;
		keys[n] = i;
		vals[n++] = rev;
	}
	if (!n)
		goto out;
	{
		__u32 count = n;

		if (bpf_map_update_batch(fd, keys, vals, &count, &opts)) {
			ret = -errno;
			if (ret != -EINVAL && ret != -ENOTSUPP && ret != -EOPNOTSUPP)
				goto out;
			ret = 0;
			for (__u32 i = 0; !ret && i < n; i++)
				if (bpf_map_update_elem(fd, &keys[i], &vals[i], BPF_ANY))
					ret = -errno;
		}
	}
	/* Once the revisions are written, before the flip: an apply that fails after this point
	 * changed no verdict, and costs only the probes of flows it did not cut.
	 */
	for (__u32 i = 0; !ret && i < n; i++)
		if (!uncut[keys[i]])
			__atomic_store_n(&dp->cut_revs[keys[i]], rev, __ATOMIC_RELAXED);
out:
	if (ret && err && errlen)
		snprintf(err, errlen, "%s: %s", rw_map_names[RW_M_RUN_REVS], strerror(-ret));
	free(keys);
	free(vals);
	return ret;
}
