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

/* RW_REASON_ALLOWED when the packet's sender is one x->rule_id's selector names (rw_from of the
 * live slot), else RW_REASON_WRONG_PRINCIPAL. Absence means deny: no selector, no socket, a
 * uid not listed, a cgroup with no admission for this rule, or an admission of another veth.
 */
static __always_inline int rw_principal_check(const struct rw_ctx *x)
{
	struct rw_from_key fk = {.slot = x->slot, .rule_id = x->rule_id & ~RW_RULE_FROM};
	const struct rw_from *f = bpf_map_lookup_elem(&rw_from, &fk);

	if (!f || !(f->flags & (RW_FROM_UID | RW_FROM_CONTAINER)))
		return RW_REASON_WRONG_PRINCIPAL;
	if (f->flags & RW_FROM_UID) {
		__u32 uid = bpf_get_socket_uid(x->skb);
		int hit = 0;

#pragma unroll
		for (int i = 0; i < RW_FROM_UIDS; i++)
			if (i < f->n_uids && f->uids[i] == uid)
				hit = 1;
		if (!hit || uid == RW_UID_OVERFLOW)
			return RW_REASON_WRONG_PRINCIPAL;
	}
	if (f->flags & RW_FROM_CONTAINER) {
		struct rw_admit_key ak = {
			.cgroup_id = bpf_skb_cgroup_id(x->skb),
			.slot = x->slot,
			.rule_id = fk.rule_id,
		};
		const struct rw_admit *a =
			ak.cgroup_id ? bpf_map_lookup_elem(&rw_admit, &ak) : NULL;

		if (!a || a->ifindex != x->ifindex)
			return RW_REASON_WRONG_PRINCIPAL;
	}
	return RW_REASON_ALLOWED;
}

#endif /* RUNWALL_BPF_PRINCIPAL_H */
