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

/* Record that the flow was opened from `dir`, unless it is already known; refresh seen_ns at
 * most once a second so that busy flows do not write a shared cache line on every packet.
 * Returns 1 when the flow is new.
 */
static __always_inline int rw_ct_note(const struct rw_ct_key *k, struct rw_ct_value *cur,
				      __u8 dir, __u32 rule_id)
{
	__u64 now = bpf_ktime_get_ns();
	struct rw_ct_value v = {};

	if (rw_dry_run)
		return !cur;
	if (cur) {
		if (now - cur->seen_ns > NSEC_PER_SEC_)
			cur->seen_ns = now;
		return 0;
	}
	v.created_ns = now;
	v.seen_ns = now;
	v.opened_by = dir;
	v.rule_id = rule_id;
	bpf_map_update_elem(&RW_MAP_CONNTRACK, k, &v, BPF_NOEXIST);
	return 1;
}

#endif /* RUNWALL_BPF_CONNTRACK_H */
