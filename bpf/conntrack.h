/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* conntrack.h: who opened a flow. Grants only the reply direction, and only while the policy
 * that allowed the opening still allows it.
 *
 * API
 *   offers: rw_ct_key_make(), rw_ct6_key_make(), rw_ct_table_at(), rw_ct_lookup(), rw_ct_touch(),
 *           rw_ct_note(), rw_finish_cached()
 *   needs:  runwall.h, bpf_net.h, maps.h, ctx.h, verdict.h
 */
#ifndef RUNWALL_BPF_CONNTRACK_H
#define RUNWALL_BPF_CONNTRACK_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "runwall.h"
#include "bpf_net.h"
#include "maps.h"
#include "ctx.h"
#include "verdict.h"

/* The key is the flow from the pod's side, so both directions find the same entry. */
static __always_inline void rw_ct_key_make(struct rw_ct_key *k, __u32 ifindex, __be32 pod_ip,
					   __be32 peer_ip, __be16 pod_port, __be16 peer_port,
					   __u8 proto)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->ifindex = ifindex;
	k->pod_ip = pod_ip;
	k->peer_ip = peer_ip;
	k->pod_port = pod_port;
	k->peer_port = peer_port;
	k->proto = proto;
}

static __always_inline void rw_ct6_key_make(struct rw_ct6_key *k, __u32 ifindex,
					    const __be32 *pod_ip, const __be32 *peer_ip,
					    __be16 pod_port, __be16 peer_port, __u8 proto)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->ifindex = ifindex;
	__builtin_memcpy(k->pod_ip, pod_ip, sizeof(k->pod_ip));
	__builtin_memcpy(k->peer_ip, peer_ip, sizeof(k->peer_ip));
	k->pod_port = pod_port;
	k->peer_port = peer_port;
	k->proto = proto;
}

/* The veth's own table of the packet's family: the one at its veth index `idx` of rw_ct_slots
 * (rw_ct6_slots), where its binding is (veth.h). NULL when there is none (not bound for that
 * family): then no flow is known, and no new flow can be noted (conntrack-full).
 */
static __always_inline void *rw_ct_table_at(__u32 idx, const int six)
{
	return six ? bpf_map_lookup_elem(&rw_ct6_slots, &idx)
		   : bpf_map_lookup_elem(&rw_ct_slots, &idx);
}

/* k is a struct rw_ct_key or a struct rw_ct6_key, the one of table's family. */
static __always_inline struct rw_ct_value *rw_ct_lookup(void *table, const void *k)
{
	return table ? bpf_map_lookup_elem(table, k) : NULL;
}

/* Note a TCP segment's FIN or RST in its flow's entry, for the revoke probe (a closed
 * connection is not probed). Each byte is set to 1 alone, so CPUs setting two of them at once
 * lose neither; a SYN clears them, for a new connection on the same ports (a port reused after
 * TIME_WAIT finds the old entry). A bit a sandbox forges costs it only the probe of its own
 * connection: the verdict of every later segment is judged as before.
 */
static __always_inline void rw_ct_note_close(const struct rw_ctx *x, struct rw_ct_value *cur)
{
	__u8 flags = x->pkt.tcp_flags;

	if (x->pkt.proto != IPPROTO_TCP)
		return;
	if (rw_tcp_is_syn(&x->pkt)) {
		if (cur->fin_pod || cur->fin_peer || cur->rst) {
			cur->fin_pod = 0;
			cur->fin_peer = 0;
			cur->rst = 0;
		}
		return;
	}
	if (!(flags & (TCP_FLAG_FIN_ | TCP_FLAG_RST_)))
		return;
	if ((flags & TCP_FLAG_RST_) && !cur->rst)
		cur->rst = 1;
	if (!(flags & TCP_FLAG_FIN_))
		return;
	if (x->dir == RW_DIR_EGRESS) {
		if (!cur->fin_pod)
			cur->fin_pod = 1;
	} else if (!cur->fin_peer) {
		cur->fin_peer = 1;
	}
}

/* Mark a known flow active for the agent's expiry pass. Written only when it changes, so busy
 * flows do not write a shared cache line on every packet, and no clock is read.
 */
static __always_inline void rw_ct_touch(const struct rw_ctx *x, struct rw_ct_value *cur)
{
	if (*x->dry_run)
		return;
	if (!cur->active)
		cur->active = 1;
	rw_ct_note_close(x, cur);
}

enum rw_ct_note_result { RW_CT_KNOWN = 0, RW_CT_NEW = 1, RW_CT_FULL = 2 };

/* Record that the flow was opened from `dir`, unless it is already known, with the verdict that
 * allows it (the stamp of the fast path). RW_CT_FULL when the sandbox's table is full or
 * missing: the flow cannot be tracked, so it is not allowed.
 */
static __always_inline int rw_ct_note(void *table, const void *k, struct rw_ct_value *cur, __u8 dir,
				      const struct rw_ctx *x)
{
	struct rw_ct_value v = {};

	if (cur) {
		rw_ct_touch(x, cur);
		return RW_CT_KNOWN;
	}
	if (!table)
		return RW_CT_FULL;
	if (*x->dry_run)
		return RW_CT_NEW;
	v.created_ns = bpf_ktime_get_ns();
	v.seen_ns = v.created_ns;
	v.opened_by = dir;
	v.stamp = x->revision;
	v.rule_id = x->rule_id;
	v.run_idx = x->pod ? x->pod->run_idx : 0;
	v.path = x->path;
	switch (bpf_map_update_elem(table, k, &v, BPF_NOEXIST)) {
	case 0:
		return RW_CT_NEW;
	case -EEXIST_: /* another CPU noted the same flow first */
		return RW_CT_KNOWN;
	default: /* -E2BIG: the sandbox's table is full; -ENOMEM */
		return RW_CT_FULL;
	}
}

/* The fast path's ending: an allowed packet of a flow whose cached verdict is current. Counted
 * exactly like a judged one; no event (the flow is not new).
 */
static __always_inline int rw_finish_cached(const struct rw_ctx *x, struct rw_ct_value *ct)
{
	__u32 run_idx = ct->run_idx;

	rw_count(0, x->dir, RW_REASON_ALLOWED, x->skb->len);
	if (run_idx && run_idx < RW_MAX_RUNS)
		rw_count(run_idx, x->dir, RW_REASON_ALLOWED, x->skb->len);
	rw_ct_touch(x, ct);
	return TCX_NEXT;
}

#endif /* RUNWALL_BPF_CONNTRACK_H */
