// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* runwall.bpf.c: the two programs on each sandbox's host-side veth, and the agent's flip.
 *
 *   rw_egress  (pod -> world) on the veth's TC ingress hook, out of the pod's reach;
 *   rw_ingress (world -> pod) on the veth's TC egress hook;
 *   rw_egress6, rw_ingress6 the same for IPv6, tail-called by the two (rw_progs6);
 *   rw_flip    the one writer of the state word, run by the agent (BPF_PROG_TEST_RUN), which
 *              stores an apply's lease in the same run;
 *   rw_lease   the writer of the lease deadline between flips (renewals), run the same way.
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
#include "veth.h"
#include "parse.h"
#include "ctx.h"
#include "policy.h"
#include "answer.h"
#include "revoke.h"
#include "verdict.h"
#include "conntrack.h"
#include "icmp6.h"
#include "principal.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by `runwall explain` on its own copy of the programs (user/lib/datapath.c, through the
 * skeleton's .rodata): judge, but change no state. The steps read it as *x->dry_run.
 */
const volatile __u8 rw_dry_run = 0;

/* What the last dry run decided, read back by `runwall explain` from .bss (x->explain). */
struct rw_explain rw_explain_result;

/* Which run sent (or is sent) this packet, judged by the veth alone: the veth is the sandbox,
 * whatever the packet claims. Drops that happen before the identity check are counted and
 * reported under this run too: for IPv6 the run of the veth's IPv6 address, else of its IPv4.
 */
static __always_inline const struct rw_endpoint *
rw_attribute(struct rw_ctx *x, const struct rw_view *v, const int six)
{
	const struct rw_endpoint *ep = x->ep;

	if (!ep)
		return ep;
	if (six && (ep->flags & RW_EP_IP6))
		x->pod = bpf_map_lookup_elem(rw_view6_of(v)->pods6, ep->pod_ip6);
	if (!x->pod && (ep->flags & RW_EP_IP4))
		x->pod = bpf_map_lookup_elem(v->pods, &ep->pod_ip);
	return ep;
}

/* Source identity: the veth must be bound to a pod in the packet's family, the packet must come
 * from (or, into the pod, go to) that pod's address, and the address must belong to a run of
 * the snapshot in force (rw_pods, rw_pods6). `claimed` is the packet's pod-side address, a
 * __be32 or a __be32[4]; *epp the veth's binding (NULL: none).
 *
 * A bound veth's own address that no run names is a pod whose run has ended while it lives: the
 * source is still proven (the binding is what the node's routing says), so its refusal may
 * still close the flows its run had opened (revoke.h), under the node's refusal mode. It is
 * unknown-source all the same: there is no run to charge, and nothing else is answered.
 */
static __always_inline int rw_identify(struct rw_ctx *x, const struct rw_view *v,
				       const void *claimed, int mismatch_reason,
				       const struct rw_endpoint **epp, const int six)
{
	const struct rw_endpoint *ep = x->ep;
	int same;

	*epp = ep;
	if (!ep || !(ep->flags & (six ? RW_EP_IP6 : RW_EP_IP4)))
		return RW_REASON_UNKNOWN_SOURCE; /* no address of this family is bound here */
	if (six) {
		x->pod = bpf_map_lookup_elem(rw_view6_of(v)->pods6, ep->pod_ip6);
		same = rw_addr6_eq(claimed, ep->pod_ip6);
	} else {
		x->pod = bpf_map_lookup_elem(v->pods, &ep->pod_ip);
		same = *(const __be32 *)claimed == ep->pod_ip;
	}
	if (!same)
		return x->pod ? mismatch_reason : RW_REASON_UNKNOWN_SOURCE;
	if (!x->pod) {
		__u32 zero = 0;
		struct rw_config *cfg = bpf_map_lookup_elem(&rw_config, &zero);

		x->runless = 1;
		x->node_refusal = cfg ? cfg->refusal : RW_REFUSAL_DROP;
		return RW_REASON_UNKNOWN_SOURCE;
	}
	return RW_REASON_ALLOWED;
}

/* The fast path: a TCP or UDP packet of a known flow whose cached verdict is still current is
 * allowed again after this one hash lookup, in the table at its veth's index (found with its
 * binding by inlined array lookups, veth.h): no pod or policy lookup, no clock. The entry's key
 * names the pod's own address, checked when the entry was made, so a hit also proves the
 * source. `ck` is the key of the table's family; the value, and so all of this, is the same for
 * both.
 *
 * A SYN takes this path only in the direction that opened the flow: the same five-tuple opened
 * the same way under an unchanged policy gets the verdict its opening got (a client reusing its
 * ports, a retried SYN). A SYN the other way is a new connection of the other side, never a
 * reply, and is judged in full (rw_judge_egress(), rw_judge_ingress()).
 *
 * Current means run_revs[run_idx] <= stamp <= the revision in force. Why that is enough, with
 * the agent writing while packets run: the agent writes run_revs[r] = N for every run whose
 * verdicts change in revision N (every run, for a node-wide change) BEFORE the single atomic
 * store that flips the state word to N (user/lib/apply.c, rw_apply_revs(); rw_flip below; the
 * memory ordering is spelled out at the flip in rw_apply()). A packet that read the old state
 * word was judged under the old slot and stamps the old revision M < N, so once run_revs[r] = N
 * its flow fails this test and is judged again; a packet that read the new state word judges
 * under the new slot and stamps N. A packet reading run_revs[r] before the agent's write is one
 * that could have run entirely before the flip: the old verdict is then still the policy in
 * force, and the grace period after the flip waits for it. A stamp above the revision in force
 * (left by pins of another history) is never trusted. Under an expired lease no cached verdict
 * is trusted either: they were judged by the whole policy, and the lease-expired one must judge
 * each packet (a services flow is allowed again, a run rule's is cut). A run's IPv4 and IPv6
 * flows share its run_idx, so one apply cuts both.
 */
static __always_inline struct rw_ct_value *rw_fast(struct rw_ctx *x, void *table, const void *ck)
{
	struct rw_ct_value *ct;
	__u64 *run_rev;
	__u32 idx;

	if (x->pkt.is_arp || (x->pkt.proto != IPPROTO_TCP && x->pkt.proto != IPPROTO_UDP))
		return NULL;
	ct = rw_ct_lookup(table, ck);
	x->ct = ct; /* the full judgement goes on with it */
	if (*x->dry_run || !ct || x->lease_expired)
		return NULL;
	if (rw_tcp_is_syn(&x->pkt) && ct->opened_by != x->dir)
		return NULL;
	idx = ct->run_idx;
	run_rev = bpf_map_lookup_elem(&rw_run_revs, &idx);
	if (!run_rev || !ct->stamp || ct->stamp < *run_rev || ct->stamp > x->revision)
		return NULL;
	/* A flow of a rule that names its principal: each packet out of the pod proves its sender
	 * again (principal.h), so no other socket of the pod rides the flow on this path. The
	 * stamp being current, the rule's id names the same rule in the live slot.
	 */
	if (x->dir == RW_DIR_EGRESS && (ct->rule_id & RW_RULE_FROM)) {
		x->rule_id = ct->rule_id;
		if (rw_principal_check(x) != RW_REASON_ALLOWED)
			return NULL;
	}
	return ct;
}

/* After the parse (`parsed`, its reason): check readiness, then the fast path; else load the
 * live slot for a full judgement. A packet that does not parse is still charged to the veth's
 * run. Returns RW_REASON_ALLOWED when the packet may be judged further; *cached when the fast
 * path allowed it.
 */
static __always_inline int rw_begin(struct rw_ctx *x, struct rw_view *v, void **table, void *ck,
				    struct rw_ct_value **cached, int parsed, const int six)
{
	const struct rw_pkt *p = &x->pkt;
	__u64 state;

	*cached = NULL;
	x->ep = rw_endpoint_of(x); /* two inlined array lookups: every packet has its binding */
	if (rw_state_load(&state, &x->lease_expired))
		return RW_REASON_NOT_READY;
	x->revision = RW_STATE_REVISION(state);
	x->slot = RW_STATE_SLOT(state);
	if (parsed == RW_REASON_ALLOWED) {
		/* The key is the flow from the pod's side, whichever way the packet goes. */
		if (six && x->dir == RW_DIR_EGRESS)
			rw_ct6_key_make(ck, x->skb->ifindex, p->saddr6, p->daddr6, p->sport,
					p->dport, p->proto);
		else if (six)
			rw_ct6_key_make(ck, x->skb->ifindex, p->daddr6, p->saddr6, p->dport,
					p->sport, p->proto);
		else if (x->dir == RW_DIR_EGRESS)
			rw_ct_key_make(ck, x->skb->ifindex, p->saddr, p->daddr, p->sport, p->dport,
				       p->proto);
		else
			rw_ct_key_make(ck, x->skb->ifindex, p->daddr, p->saddr, p->dport, p->sport,
				       p->proto);
		/* Only a family the binding has has a table: whatever an index may still hold
		 * of another family, a packet of that family finds no flow and makes none.
		 */
		*table = x->ep && (x->ep->flags & (six ? RW_EP_IP6 : RW_EP_IP4))
				 ? rw_ct_table_at(x->veth_idx, six)
				 : NULL;
		*cached = rw_fast(x, *table, ck);
		if (*cached)
			return RW_REASON_ALLOWED;
	}
	if (rw_view_load(v, state) || (six && rw_view_load6((struct rw_view6 *)v, state)))
		return RW_REASON_NOT_READY;
	v->lease_expired = x->lease_expired;
	if (parsed != RW_REASON_ALLOWED)
		rw_attribute(x, v, six);
	return parsed;
}

/* The inbound rule for the packet's peer and the pod's port, of its family: the peer is the
 * destination out of the pod (`dir` RW_DIR_EGRESS: a reply), the source into it.
 */
static __always_inline struct rw_rule *rw_inbound_rule(struct rw_ctx *x, const struct rw_view *vp,
						       const int six, const __u32 dir)
{
	const int out = dir == RW_DIR_EGRESS;
	const struct rw_pkt *p = &x->pkt;
	__be16 pod_port = out ? p->sport : p->dport;

	if (six)
		return rw_find_inbound6(rw_view6_of(vp), out ? p->daddr6 : p->saddr6, pod_port,
					p->proto);
	return rw_find_inbound(vp, out ? p->daddr : p->saddr, pod_port, p->proto);
}

/* The egress policy for the packet's flow, of its family, from the pod's side: out of the pod
 * (`dir` RW_DIR_EGRESS) the pod is the source, into it (a reply) the destination. Sets
 * x->rule_id and x->path as the rule or mode that allowed it says.
 */
static __always_inline int rw_egress_rule(struct rw_ctx *x, const struct rw_view *vp, const int six,
					  const __u32 dir)
{
	const int out = dir == RW_DIR_EGRESS;
	const struct rw_pkt *p = &x->pkt;
	__be16 peer_port = out ? p->dport : p->sport;

	if (six)
		return rw_egress_policy6(rw_view6_of(vp), x->pod, out ? p->saddr6 : p->daddr6,
					 out ? p->daddr6 : p->saddr6, peer_port, p->proto,
					 &x->rule_id, &x->path);
	return rw_egress_policy(vp, x->pod, out ? p->daddr : p->saddr, peer_port, p->proto,
				&x->rule_id, &x->path);
}

/* Allow a packet that opens or continues a flow opened from `dir`: note the flow (so that its
 * replies get in) unless the other side opened it. Every new entry is reported as a new flow,
 * whatever opened it (a SYN, a bare ACK in open mode, a first UDP datagram); a flow the sandbox's
 * own table has no room for is not allowed (conntrack-full). A known flow's entry caches the
 * verdict (rw_finish).
 */
static __always_inline int rw_allow_flow(struct rw_ctx *x, void *table, const void *ck,
					 struct rw_ct_value *ct, __u8 dir, const int six)
{
	x->ct_path = x->path;
	if (!ct || ct->opened_by == dir) {
		switch (rw_ct_note(table, ck, ct, dir, x)) {
		case RW_CT_NEW:
			x->new_flow = 1;
			break;
		case RW_CT_FULL:
			return rw_finish_family(x, RW_REASON_CONNTRACK_FULL, six);
		}
	} else {
		x->ct = NULL; /* the other side's flow: its own verdict is cached, not this one */
	}
	return rw_finish_family(x, RW_REASON_ALLOWED, six);
}

/* The judgement a program is built for, a constant of each call, passed as `six` (non-zero:
 * IPv6): IPv4, IPv6 but ICMPv6, and ICMPv6 alone (rw_egress_icmp6). The ICMPv6 judgement is in
 * the last only, so the IPv6 programs hold none of it.
 */
enum { RW_JUDGE_IP4 = 0, RW_JUDGE_IP6 = 1, RW_JUDGE_ICMP6 = 2 };

/* Out of the pod, one family (`six`, RW_JUDGE_*), from where rw_judge() leaves the packet
 * (`table` its flow's table, NULL: none; `ck` its key): each step below is the family's own (its
 * addresses, tables and identity), in the same order for both.
 */
static __always_inline int rw_judge_egress(struct rw_ctx *x, struct rw_view *vp, void *table,
					   void *ck, const int six)
{
	const struct rw_endpoint *ep;
	struct rw_ct_value *ct;
	struct rw_rule *in;
	int reason;

	if (six)
		reason = rw_identify(x, vp, x->pkt.saddr6, RW_REASON_SPOOFED_SOURCE, &ep, six);
	else
		reason = rw_identify(x, vp, &x->pkt.saddr, RW_REASON_SPOOFED_SOURCE, &ep, six);
	if (six == RW_JUDGE_ICMP6) {
		x->identified = reason == RW_REASON_ALLOWED;
		return rw_finish6(x, rw_icmp6_egress(x, vp, table, ep, reason));
	}
	if (reason != RW_REASON_ALLOWED)
		return rw_finish_family(x, reason, six);
	x->identified = 1; /* from here on a refusal may be answered (answer.h) */
	if (!six && x->pkt.is_arp) {
		x->path = RW_PATH_ARP;
		return rw_finish(x, RW_REASON_ALLOWED);
	}

	/* A reply of a connection an allowed peer opened into the sandbox. A bare SYN is never a
	 * reply, whatever entry its ports match.
	 */
	ct = x->ct;
	if (ct && ct->opened_by == RW_DIR_INGRESS && !rw_tcp_is_syn(&x->pkt)) {
		in = rw_inbound_rule(x, vp, six, RW_DIR_EGRESS);
		if (!in)
			return rw_finish_family(x, RW_REASON_INBOUND_DENIED, six);
		rw_ct_touch(x, ct);
		x->rule_id = in->rule_id;
		x->path = RW_PATH_REPLY;
		x->ct_path = RW_PATH_INBOUND;
		return rw_finish_family(x, RW_REASON_ALLOWED, six);
	}

	if (x->pkt.proto != IPPROTO_TCP && x->pkt.proto != IPPROTO_UDP)
		return rw_finish_family(x, RW_REASON_UNSUPPORTED_PROTOCOL, six);

	/* The pod's own address is the packet's source: rw_identify() proved it the bound one. */
	reason = rw_egress_rule(x, vp, six, RW_DIR_EGRESS);
	if (reason == RW_REASON_ALLOWED && (x->rule_id & RW_RULE_FROM))
		reason = rw_principal_check(x);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish_family(x, reason, six);

	return rw_allow_flow(x, table, ck, ct, RW_DIR_EGRESS, six);
}

/* Into the pod, one family, as rw_judge_egress(). */
static __always_inline int rw_judge_ingress(struct rw_ctx *x, struct rw_view *vp, void *table,
					    void *ck, const int six)
{
	const struct rw_endpoint *ep;
	struct rw_ct_value *ct;
	struct rw_rule *in;
	int reason;

	/* ARP into the pod (the node answering for the gateway 169.254.1.1) is let through once the
	 * veth is bound to a known pod; IPv4 must be addressed to that pod.
	 */
	if (!six && x->pkt.is_arp) {
		rw_attribute(x, vp, six);
		if (!x->pod)
			return rw_finish(x, RW_REASON_UNKNOWN_SOURCE);
		x->path = RW_PATH_ARP;
		return rw_finish(x, RW_REASON_ALLOWED);
	}
	if (six)
		reason = rw_identify(x, vp, x->pkt.daddr6, RW_REASON_INBOUND_DENIED, &ep, six);
	else
		reason = rw_identify(x, vp, &x->pkt.daddr, RW_REASON_INBOUND_DENIED, &ep, six);
	if (six == RW_JUDGE_ICMP6) {
		x->identified = reason == RW_REASON_ALLOWED;
		return rw_finish6(x, rw_icmp6_ingress(x, vp, table, ep, reason));
	}
	if (reason != RW_REASON_ALLOWED)
		return rw_finish_family(x, reason, six);
	x->identified = 1; /* from here on a refused segment of a known flow closes it */

	/* A reply of a flow the sandbox opened: allowed while the egress policy still allows the
	 * flow, so that a revoked rule cuts both directions at the next packet. The pod's own
	 * address is the destination here (rw_identify() proved it the bound one).
	 */
	ct = x->ct;
	if (ct && ct->opened_by == RW_DIR_EGRESS && !rw_tcp_is_syn(&x->pkt)) {
		reason = rw_egress_rule(x, vp, six, RW_DIR_INGRESS);
		if (reason == RW_REASON_ALLOWED) {
			rw_ct_touch(x, ct);
			x->ct_path = x->path;
			x->path = RW_PATH_REPLY;
		}
		return rw_finish_family(x, reason, six);
	}

	if (x->pkt.proto != IPPROTO_TCP && x->pkt.proto != IPPROTO_UDP)
		return rw_finish_family(x, RW_REASON_UNSUPPORTED_PROTOCOL, six);

	in = rw_inbound_rule(x, vp, six, RW_DIR_INGRESS);
	if (!in)
		return rw_finish_family(x, RW_REASON_INBOUND_DENIED, six);
	x->rule_id = in->rule_id;
	x->path = RW_PATH_INBOUND;
	return rw_allow_flow(x, table, ck, ct, RW_DIR_INGRESS, six);
}

/* A packet's judgement in the hook's direction `dir`, of one family (`six`, RW_JUDGE_*): the
 * fast path or a refusal of rw_begin() ends it here, else the direction's steps go on with the
 * flow's table (`table`, NULL: none) and key.
 */
static __always_inline int rw_judge(struct rw_ctx *x, struct rw_view *vp, void *ck, int parsed,
				    const int six, const __u32 dir)
{
	struct rw_ct_value *ct;
	void *table = NULL;
	int reason;

	reason = rw_begin(x, vp, &table, ck, &ct, parsed, six);
	if (ct)
		return rw_finish_cached(x, ct);
	if (reason != RW_REASON_ALLOWED)
		return rw_finish_family(x, reason, six);
	if (dir == RW_DIR_EGRESS)
		return rw_judge_egress(x, vp, table, ck, six);
	return rw_judge_ingress(x, vp, table, ck, six);
}

/* A packet's context as every program starts it: its skb, its veth, the direction of the hook
 * and the globals explain sets and reads.
 */
#define RW_CTX_INIT(skb_, dir_)                                                                   \
	{                                                                                         \
		.skb = (skb_), .ifindex = (skb_)->ifindex, .dir = (dir_), .dry_run = &rw_dry_run, \
		.explain = &rw_explain_result                                                     \
	}

/* The judgement of rw_egress and rw_ingress, `dir` the hook's. The family is decided once, by
 * the Ethernet header: IPv4 (and ARP, and every frame that is neither) is judged here, IPv6 by
 * the IPv6 program (rw_egress6), tail-called on the same packet with the same steps. Without it
 * (its slot empty), IPv6 is refused as unsupported-l2. The direction is a literal at each
 * rw_judge() call, as in rw_judge6().
 */
static __always_inline int rw_judge4(struct __sk_buff *skb, __u32 dir)
{
	struct rw_ctx x = RW_CTX_INIT(skb, dir);
	struct rw_ct_key ck;
	struct rw_view v;
	int parsed;

	/* Out of the pod, first: a reset the node's own revoke sent (revoke.h) passes unjudged. */
	if (dir == RW_DIR_EGRESS && rw_revoke_own(skb))
		return TCX_NEXT;
	parsed = rw_parse(skb, &x.pkt);
	if (parsed == RW_PARSE_IPV6) {
		bpf_tail_call(skb, &rw_progs6, dir);
		parsed = RW_REASON_UNSUPPORTED_L2;
	}
	if (dir == RW_DIR_EGRESS)
		return rw_judge(&x, &v, &ck, parsed, RW_JUDGE_IP4, RW_DIR_EGRESS);
	return rw_judge(&x, &v, &ck, parsed, RW_JUDGE_IP4, RW_DIR_INGRESS);
}

SEC("tc")
int rw_egress(struct __sk_buff *skb)
{
	return rw_judge4(skb, RW_DIR_EGRESS);
}

SEC("tc")
int rw_ingress(struct __sk_buff *skb)
{
	return rw_judge4(skb, RW_DIR_INGRESS);
}

/* The IPv6 parse, and where its packet is judged: an ICMPv6 packet that parsed goes on to the
 * direction's ICMPv6 program (rw_progs_icmp6), which parses it again and judges it; with that
 * slot empty it is refused here as unsupported-protocol. Every other packet is judged by the
 * caller, as is one that does not parse, whatever its next header.
 */
static __always_inline int rw_parse6_to(struct __sk_buff *skb, struct rw_pkt *p, __u32 dir)
{
	int parsed = rw_parse6(skb, p);

	if (parsed == RW_REASON_ALLOWED && p->proto == RW_NH_ICMPV6) {
		bpf_tail_call(skb, &rw_progs_icmp6, dir);
		return RW_REASON_UNSUPPORTED_PROTOCOL;
	}
	return parsed;
}

/* The parse of an ICMPv6 program: the packet the IPv6 program sent here, so ICMPv6; anything
 * else (a program run on a packet of its own) is refused as unsupported-protocol.
 */
static __always_inline int rw_parse_icmp6(struct __sk_buff *skb, struct rw_pkt *p)
{
	int parsed = rw_parse6(skb, p);

	if (parsed == RW_REASON_ALLOWED && p->proto != RW_NH_ICMPV6)
		return RW_REASON_UNSUPPORTED_PROTOCOL;
	return parsed;
}

/* An IPv6 program's judgement, `kind` RW_JUDGE_IP6 or RW_JUDGE_ICMP6, `dir` the hook's. */
static __always_inline int rw_judge6(struct __sk_buff *skb, __u32 dir, const int kind)
{
	struct rw_ctx x = RW_CTX_INIT(skb, dir);
	struct rw_ct6_key ck;
	struct rw_view6 v;
	int parsed = kind == RW_JUDGE_ICMP6 ? rw_parse_icmp6(skb, &x.pkt)
					    : rw_parse6_to(skb, &x.pkt, dir);

	/* The direction a literal at each call: passed on as `dir`, clang inlines both directions'
	 * steps here before the programs fold it, and the verifier's counts grow (6.18:
	 * rw_ingress6 23 716 -> 26 702, rw_egress_icmp6 17 626 -> 18 200).
	 */
	if (dir == RW_DIR_EGRESS)
		return rw_judge(&x, &v.v, &ck, parsed, kind, RW_DIR_EGRESS);
	return rw_judge(&x, &v.v, &ck, parsed, kind, RW_DIR_INGRESS);
}

/* The IPv6 programs, never attached: reached through rw_progs6 only, from the hook rw_egress or
 * rw_ingress runs on, so the packet and its veth are theirs. The ICMPv6 programs likewise,
 * through rw_progs_icmp6 from these.
 */
#define RW_PROG6(name, dir, kind)                     \
	SEC("tc")                                     \
	int name(struct __sk_buff *skb)               \
	{                                             \
		return rw_judge6(skb, (dir), (kind)); \
	}
RW_PROG6(rw_egress6, RW_DIR_EGRESS, RW_JUDGE_IP6)
RW_PROG6(rw_ingress6, RW_DIR_INGRESS, RW_JUDGE_IP6)
RW_PROG6(rw_egress_icmp6, RW_DIR_EGRESS, RW_JUDGE_ICMP6)
RW_PROG6(rw_ingress_icmp6, RW_DIR_INGRESS, RW_JUDGE_ICMP6)

/* The flip. A map update from user space copies the whole value with the kernel's memcpy
 * (copy_map_value()), which promises nothing about the size of its stores: `rep movsb` may write
 * the state word a byte at a time, and a packet loading it in between would see a slot and a
 * revision that were never stored together. Here the word is written by one BPF_CMPXCHG: a
 * single 64-bit store that every CPU sees whole, and a full memory barrier (lock cmpxchg on
 * x86, a fully ordered compare-and-swap on arm64). The compare makes a second writer visible:
 * the flip stores nothing unless the word is still the one the caller started from. Sleepable
 * (SEC("syscall")), so it runs in the caller's process context; packets never run it.
 */
SEC("syscall")
int rw_flip(struct rw_flip_args *args)
{
	struct rw_config *cfg;
	__u64 expect = args->expect, deadline = 0, old_deadline = 0;
	__u32 old_seconds = 0, zero = 0;

	cfg = bpf_map_lookup_elem(&rw_config, &zero);
	if (!cfg)
		return RW_FLIP_NO_CONFIG;
	if (args->flags & RW_FLIP_LEASE) {
		/* The lease before the state word, so that no packet judges the new policy under
		 * the old deadline: a packet reads the state word, then the deadline (rw_state_load()),
		 * and both stores below are full barriers, so one that loads the new word loads the
		 * new deadline too (on x86, which keeps loads in order; a CPU that reorders two
		 * loads would need rw_state_load()'s first to be an acquire). A packet between the two stores judges the old policy under the
		 * new lease, which has not expired (now + lease_seconds) or is none, for the few
		 * instructions in between (under PolicyWatch the message that carries the snapshot
		 * has just renewed the old lease anyway). No crash of the agent falls between the
		 * two: this is one run. A flip that would be refused stores no lease.
		 */
		if (*(volatile __u64 *)&cfg->state != expect) {
			args->found = *(volatile __u64 *)&cfg->state;
			return RW_FLIP_CHANGED;
		}
		if (args->lease_seconds)
			deadline = bpf_ktime_get_ns() + (__u64)args->lease_seconds * 1000000000ULL;
		old_seconds = cfg->lease_seconds;
		cfg->lease_seconds = args->lease_seconds;
		old_deadline = __sync_lock_test_and_set(&cfg->lease_deadline_ns, deadline);
	}
	args->found = __sync_val_compare_and_swap(&cfg->state, expect, args->next);
	if (args->found != expect) {
		/* Another writer flipped in between (the agent is the only one meant to run): put
		 * the lease back unless it, too, wrote one since.
		 */
		if (args->flags & RW_FLIP_LEASE) {
			__sync_val_compare_and_swap(&cfg->lease_deadline_ns, deadline,
						    old_deadline);
			cfg->lease_seconds = old_seconds;
		}
		return RW_FLIP_CHANGED;
	}
	/* Not read by packets: when the flip happened, for `runwall status`. */
	cfg->applied_ns = bpf_ktime_get_ns();
	return RW_FLIP_DONE;
}

/* The lease. The deadline is a 64-bit word packets read with one load, so like the state word it
 * is never written by a map update's copy: one BPF_XCHG stores it whole (and is a full barrier,
 * like the flip's compare-and-exchange). No compare: the agent is the one writer, and the newest
 * word it writes is the lease it means. Sleepable, run by the agent through BPF_PROG_TEST_RUN.
 */
SEC("syscall")
int rw_lease(struct rw_lease_args *args)
{
	struct rw_config *cfg;
	__u32 zero = 0;

	cfg = bpf_map_lookup_elem(&rw_config, &zero);
	if (!cfg)
		return RW_FLIP_NO_CONFIG;
	args->found = __sync_lock_test_and_set(&cfg->lease_deadline_ns, args->deadline_ns);
	return RW_FLIP_DONE;
}
