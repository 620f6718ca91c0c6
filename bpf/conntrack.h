/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* conntrack.h: who opened a flow. Grants only the reply direction, and only while the policy
 * that allowed the opening still allows it.
 */
#ifndef RUNWALL_BPF_CONNTRACK_H
#define RUNWALL_BPF_CONNTRACK_H

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

/* The sandbox's own conntrack table, or NULL when its veth has none (not bound yet, or bound by
 * an older agent): then no flow is known, and no new flow can be noted (conntrack-full).
 */
static __always_inline void *rw_ct_table(__u32 ifindex)
{
	return bpf_map_lookup_elem(&RW_MAP_CONNTRACK, &ifindex);
}

static __always_inline struct rw_ct_value *rw_ct_lookup(void *table, const struct rw_ct_key *k)
{
	return table ? bpf_map_lookup_elem(table, k) : NULL;
}

/* Refresh seen_ns of a known flow at most once a second, so that busy flows do not write a
 * shared cache line on every packet.
 */
static __always_inline void rw_ct_touch(struct rw_ct_value *cur)
{
	__u64 now;

	if (rw_dry_run)
		return;
	now = bpf_ktime_get_ns();
	if (now - cur->seen_ns > NSEC_PER_SEC_)
		cur->seen_ns = now;
}

enum rw_ct_note_result { RW_CT_KNOWN = 0, RW_CT_NEW = 1, RW_CT_FULL = 2 };

/* Record that the flow was opened from `dir`, unless it is already known. RW_CT_FULL when the
 * sandbox's table is full or missing: the flow cannot be tracked, so it is not allowed.
 */
static __always_inline int rw_ct_note(void *table, const struct rw_ct_key *k,
				      struct rw_ct_value *cur, __u8 dir, __u32 rule_id)
{
	struct rw_ct_value v = {};
	__u64 now;

	if (cur) {
		rw_ct_touch(cur);
		return RW_CT_KNOWN;
	}
	if (!table)
		return RW_CT_FULL;
	if (rw_dry_run)
		return RW_CT_NEW;
	now = bpf_ktime_get_ns();
	v.created_ns = now;
	v.seen_ns = now;
	v.opened_by = dir;
	v.rule_id = rule_id;
	switch (bpf_map_update_elem(table, k, &v, BPF_NOEXIST)) {
	case 0:
		return RW_CT_NEW;
	case -17:	/* -EEXIST: another CPU noted the same flow first */
		return RW_CT_KNOWN;
	default:	/* -E2BIG: the sandbox's table is full; -ENOMEM */
		return RW_CT_FULL;
	}
}

#endif /* RUNWALL_BPF_CONNTRACK_H */
