/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* veth.h: the packet's veth, by its index (runwall.h, rw_veth_slots): its binding, found by
 * inlined array lookups, and so its tables and event budget at the same index.
 *
 * API
 *   offers: rw_endpoint_of()
 *   needs:  runwall.h, maps.h, ctx.h
 */
#ifndef RUNWALL_BPF_VETH_H
#define RUNWALL_BPF_VETH_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "runwall.h"
#include "maps.h"
#include "ctx.h"

/* The binding at veth index `idx`, if it is this veth's. */
static __always_inline struct rw_endpoint *rw_binding_at(__u32 idx, __u32 ifindex)
{
	struct rw_veth *veth = NULL;
	__u32 zero = 0;
	void *inner;

	inner = bpf_map_lookup_elem(&rw_veth_slots, &idx);
	if (inner)
		veth = bpf_map_lookup_elem(inner, &zero);
	return veth && veth->ifindex == ifindex ? &veth->ep : NULL;
}

/* The veth's binding (NULL: not bound), at its index of rw_veth_slots (x->veth_idx, with
 * x->bound): its slot, or the overflow index rw_veth_overflow gives when another veth holds the
 * slot.
 */
static __always_inline struct rw_endpoint *rw_endpoint_of(struct rw_ctx *x)
{
	__u32 ifindex = x->ifindex, idx = RW_VETH_SLOT(ifindex), *overflow;
	struct rw_endpoint *ep;

	ep = rw_binding_at(idx, ifindex);
	if (!ep) {
		overflow = bpf_map_lookup_elem(&rw_veth_overflow, &ifindex);
		if (!overflow)
			return NULL;
		idx = *overflow;
		ep = rw_binding_at(idx, ifindex);
	}
	x->veth_idx = idx;
	x->bound = ep != NULL;
	return ep;
}

#endif /* RUNWALL_BPF_VETH_H */
