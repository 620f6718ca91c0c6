// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* runwall.bpf.c: the two programs on each sandbox's host-side veth.
 *
 *   rw_egress  (pod -> world) on the veth's TC ingress hook, out of the pod's reach;
 *   rw_ingress (world -> pod) on the veth's TC egress hook.
 *
 * Absence means deny: every case not positively allowed below ends in rw_finish() with a reason.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "bpf_net.h"
#include "maps.h"
#include "parse.h"
#include "policy.h"
#include "verdict.h"
#include "conntrack.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Which run sent (or is sent) this packet, judged by the veth alone: the veth is the sandbox,
 * whatever the packet claims. Drops that happen before the identity check are counted and
 * reported under this run too.
 */
static __always_inline struct rw_endpoint *rw_attribute(struct rw_ctx *x, const struct rw_view *v)
{
	__u32 ifindex = x->skb->ifindex;
	struct rw_endpoint *ep;

	ep = bpf_map_lookup_elem(&RW_MAP_ENDPOINTS, &ifindex);
	if (ep)
		x->pod = bpf_map_lookup_elem(v->pods, &ep->pod_ip);
	return ep;
}

/* Source identity: the veth must be bound to a pod, the packet must come from (or, into the
 * pod, go to) that pod's IP, and the IP must belong to a run of the snapshot in force.
 */
static __always_inline int rw_identify(struct rw_ctx *x, const struct rw_view *v, __be32 claimed,
				       int mismatch_reason)
{
	struct rw_endpoint *ep = rw_attribute(x, v);

	if (!ep)
		return RW_REASON_UNKNOWN_SOURCE;
	if (claimed != ep->pod_ip)
		return x->pod ? mismatch_reason : RW_REASON_UNKNOWN_SOURCE;
	if (!x->pod)
		return RW_REASON_UNKNOWN_SOURCE;
	return RW_REASON_ALLOWED;
}

/* Parse, then check readiness. A packet that does not parse is still charged to the veth's run.
 * Returns RW_REASON_ALLOWED when the packet may be judged further.
 */
static __always_inline int rw_begin(struct rw_ctx *x, struct rw_view *v)
{
	int parsed = rw_parse(x->skb, &x->pkt);

	if (rw_view_load(v))
		return RW_REASON_NOT_READY;
	x->revision = v->revision;
	if (parsed != RW_REASON_ALLOWED)
		rw_attribute(x, v);
	return parsed;
}

/* Allow a packet that opens or continues a flow opened from `dir`: note the flow (so that its
 * replies get in) unless the other side opened it. Every new entry is reported as a new flow,
 * whatever opened it (a SYN, a bare ACK in open mode, a first UDP datagram); a flow the sandbox's
 * own table has no room for is not allowed (conntrack-full).
 */
static __always_inline int rw_allow_flow(struct rw_ctx *x, void *table,
					 const struct rw_ct_key *ck, struct rw_ct_value *ct,
					 __u8 dir)
{
	if (!ct || ct->opened_by == dir) {
		switch (rw_ct_note(table, ck, ct, dir, x->rule_id)) {
		case RW_CT_NEW:
			x->new_flow = 1;
			break;
		case RW_CT_FULL:
			return rw_finish(x, RW_REASON_CONNTRACK_FULL);
		}
	}
	return rw_finish(x, RW_REASON_ALLOWED);
}

SEC("tc")
int rw_egress(struct __sk_buff *skb)
{
	struct rw_ctx x = { .skb = skb, .dir = RW_DIR_EGRESS };
	struct rw_ct_value *ct;
	struct rw_ct_key ck;
	struct rw_view v;
	void *table;
	int reason;

	reason = rw_begin(&x, &v);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish(&x, reason);

	reason = rw_identify(&x, &v, x.pkt.saddr, RW_REASON_SPOOFED_SOURCE);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish(&x, reason);
	if (x.pkt.is_arp) {
		x.path = RW_PATH_ARP;
		return rw_finish(&x, RW_REASON_ALLOWED);
	}

	/* A reply of a connection an allowed peer opened into the sandbox. A bare SYN is never a
	 * reply, whatever entry its ports match.
	 */
	rw_ct_key_make(&ck, skb->ifindex, x.pkt.saddr, x.pkt.daddr, x.pkt.sport, x.pkt.dport,
		       x.pkt.proto);
	table = rw_ct_table(skb->ifindex);
	ct = rw_ct_lookup(table, &ck);
	if (ct && ct->opened_by == RW_DIR_INGRESS && !rw_tcp_is_syn(&x.pkt)) {
		struct rw_rule *in = rw_find_inbound(&v, x.pkt.daddr, x.pkt.sport, x.pkt.proto);

		if (!in)
			return rw_finish(&x, RW_REASON_INBOUND_DENIED);
		rw_ct_touch(ct);
		x.rule_id = in->rule_id;
		x.path = RW_PATH_REPLY;
		return rw_finish(&x, RW_REASON_ALLOWED);
	}

	if (x.pkt.proto != IPPROTO_TCP && x.pkt.proto != IPPROTO_UDP)
		return rw_finish(&x, RW_REASON_UNSUPPORTED_PROTOCOL);

	reason = rw_egress_policy(&v, x.pod, x.pkt.daddr, x.pkt.dport, x.pkt.proto, &x.rule_id,
				  &x.path);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish(&x, reason);

	return rw_allow_flow(&x, table, &ck, ct, RW_DIR_EGRESS);
}

SEC("tc")
int rw_ingress(struct __sk_buff *skb)
{
	struct rw_ctx x = { .skb = skb, .dir = RW_DIR_INGRESS };
	struct rw_ct_value *ct;
	struct rw_rule *in;
	struct rw_ct_key ck;
	struct rw_view v;
	void *table;
	int reason;

	reason = rw_begin(&x, &v);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish(&x, reason);

	/* ARP into the pod (the node answering for the gateway 169.254.1.1) is let through once the
	 * veth is bound to a known pod; IPv4 must be addressed to that pod.
	 */
	if (x.pkt.is_arp) {
		rw_attribute(&x, &v);
		if (!x.pod)
			return rw_finish(&x, RW_REASON_UNKNOWN_SOURCE);
		x.path = RW_PATH_ARP;
		return rw_finish(&x, RW_REASON_ALLOWED);
	}
	reason = rw_identify(&x, &v, x.pkt.daddr, RW_REASON_INBOUND_DENIED);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish(&x, reason);

	/* A reply of a flow the sandbox opened: allowed while the egress policy still allows the
	 * flow, so that a revoked rule cuts both directions at the next packet.
	 */
	rw_ct_key_make(&ck, skb->ifindex, x.pkt.daddr, x.pkt.saddr, x.pkt.dport, x.pkt.sport,
		       x.pkt.proto);
	table = rw_ct_table(skb->ifindex);
	ct = rw_ct_lookup(table, &ck);
	if (ct && ct->opened_by == RW_DIR_EGRESS && !rw_tcp_is_syn(&x.pkt)) {
		reason = rw_egress_policy(&v, x.pod, x.pkt.saddr, x.pkt.sport, x.pkt.proto,
					  &x.rule_id, &x.path);
		if (reason == RW_REASON_ALLOWED) {
			rw_ct_touch(ct);
			x.path = RW_PATH_REPLY;
		}
		return rw_finish(&x, reason);
	}

	if (x.pkt.proto != IPPROTO_TCP && x.pkt.proto != IPPROTO_UDP)
		return rw_finish(&x, RW_REASON_UNSUPPORTED_PROTOCOL);

	in = rw_find_inbound(&v, x.pkt.saddr, x.pkt.dport, x.pkt.proto);
	if (!in)
		return rw_finish(&x, RW_REASON_INBOUND_DENIED);
	x.rule_id = in->rule_id;
	x.path = RW_PATH_INBOUND;
	return rw_allow_flow(&x, table, &ck, ct, RW_DIR_INGRESS);
}
