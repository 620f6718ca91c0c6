/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* icmp6.h: ICMPv6 (next header 58) by type, the one IPv6 upper layer that is not judged as TCP
 * and UDP are: NDP, echo and errors (docs/ipv6.md, phase 3). Until that phase is built, every
 * ICMPv6 message is refused as icmpv6-type.
 *
 * The programs call these for every ICMPv6 packet that parsed, after the source identity was
 * judged but before its verdict ends anything: NDP speaks from addresses identity refuses (a
 * link-local source, ::). `ep` is the veth's binding (NULL: none), `id_reason` what
 * rw_identify6() said of the packet's pod-side address (x->pod is the veth's run, if any, and
 * x->identified is set when id_reason is RW_REASON_ALLOWED). `table` is the veth's IPv6 flow
 * table (NULL: none). Each returns the packet's reason, which the program finishes with.
 */
#ifndef RUNWALL_BPF_ICMP6_H
#define RUNWALL_BPF_ICMP6_H

#include <linux/types.h>
#include <linux/bpf.h>

#include "runwall.h"
#include "ctx.h"
#include "policy.h"

/* Out of the pod (rw_egress). */
static __always_inline int rw_icmp6_egress(struct rw_ctx *x, const struct rw_view *v, void *table,
					   const struct rw_endpoint *ep, int id_reason)
{
	return ep ? RW_REASON_ICMPV6_TYPE : RW_REASON_UNKNOWN_SOURCE;
}

/* Into the pod (rw_ingress). */
static __always_inline int rw_icmp6_ingress(struct rw_ctx *x, const struct rw_view *v, void *table,
					    const struct rw_endpoint *ep, int id_reason)
{
	return ep ? RW_REASON_ICMPV6_TYPE : RW_REASON_UNKNOWN_SOURCE;
}

#endif /* RUNWALL_BPF_ICMP6_H */
