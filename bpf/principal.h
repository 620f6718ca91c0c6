/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* principal.h: who inside the pod sent a packet, for a rule that names who may use it ("from",
 * docs/principals.md).
 *
 * The socket that sent a packet travels with it to the host veth: veth_xmit() hands the skb to
 * __dev_forward_skb(), whose skb_scrub_packet() keeps skb->sk across the namespace crossing
 * (since Linux 4.19), and nothing before the host veth's TC hooks orphans it (ip_rcv_core()
 * does, after them). bpf_get_socket_uid() reads the owner of the full socket behind it (sk_uid,
 * set when the socket was made; 65534, the overflow uid, when there is no full socket: a packet
 * of no socket, a forwarded one, a request or time-wait socket's), bpf_skb_cgroup_id() the cgroup
 * v2 id the socket was made in (0 when there is none). Both belong to the socket, not to the
 * packet's bytes: a raw socket's packet is its maker's however it copies another flow.
 *
 * API
 *   offers: rw_principal_check()
 *   needs:  runwall.h, maps.h, ctx.h
 */
#ifndef RUNWALL_BPF_PRINCIPAL_H
#define RUNWALL_BPF_PRINCIPAL_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "runwall.h"
#include "maps.h"
#include "ctx.h"

/* 1 when the packet's sender is one the selector of a rule names, else 0. `at` is the rule's id
 * with the live slot in place of RW_RULE_FROM (rw_principal_check()): two arguments, so that the
 * call keeps few of its caller's values live across it. Absence means deny: no selector, no
 * socket, a uid not listed, a cgroup with no admission for this rule, or an admission of another
 * veth than the packet's. A global function (verified once, on its own, as rw_take_token() is),
 * so that each caller adds a call, not its branches.
 */
__noinline int rw_principal_of(struct __sk_buff *skb, __u32 at)
{
	struct rw_from_key fk = {.slot = at >> 31, .rule_id = at & ~RW_RULE_FROM};
	const struct rw_from *f;
	__u32 uid, n;
	int hit = 0;

	if (!skb)
		return 0;
	f = bpf_map_lookup_elem(&rw_from, &fk);
	if (!f || !(f->flags & (RW_FROM_UID | RW_FROM_CONTAINER)))
		return 0;
	if (f->flags & RW_FROM_UID) {
		uid = bpf_get_socket_uid(skb);
		n = f->n_uids;
#pragma unroll
		for (int i = 0; i < RW_FROM_UIDS; i++)
			if (i < n && f->uids[i] == uid)
				hit = 1;
		if (!hit || uid == RW_UID_OVERFLOW)
			return 0;
	}
	if (f->flags & RW_FROM_CONTAINER) {
		struct rw_admit_key ak = {
			.cgroup_id = bpf_skb_cgroup_id(skb),
			.slot = fk.slot,
			.rule_id = fk.rule_id,
		};
		const struct rw_admit *a =
			ak.cgroup_id ? bpf_map_lookup_elem(&rw_admit, &ak) : NULL;

		if (!a || a->ifindex != skb->ifindex)
			return 0;
	}
	return 1;
}

/* rw_principal_of() for the packet of x, under the rule that allowed it (x->rule_id): its
 * reason, one of two constants, so that what the callers index with it stays bounded.
 */
static __always_inline int rw_principal_check(const struct rw_ctx *x)
{
	if (rw_principal_of(x->skb, (x->rule_id & ~RW_RULE_FROM) | (__u32)x->slot << 31))
		return RW_REASON_ALLOWED;
	return RW_REASON_WRONG_PRINCIPAL;
}

#endif /* RUNWALL_BPF_PRINCIPAL_H */
