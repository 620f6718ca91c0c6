/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* revoke.h: closing both ends of a connection whose permission is gone. A refused segment
 * (not a SYN, not a reset, with ACK) of a flow in the sandbox's own conntrack table, in either
 * direction, becomes two bare resets, each with the sequence number its receiver expects
 * (RFC 793 3.4; RFC 5961 3.2 wants it exact):
 *
 *   segment from the pod:    to the remote <SEQ=SEG.SEQ>, to the pod <SEQ=SEG.ACK>;
 *   segment from the remote: to the pod <SEQ=SEG.SEQ>, to the remote <SEQ=SEG.ACK>.
 *
 * The packet itself becomes the pod's reset (rw_egress redirects it to the veth's peer,
 * rw_ingress passes it on into the pod). The remote's reset is a clone injected into the host
 * veth's ingress (bpf_clone_redirect(), BPF_F_INGRESS), as if the pod had sent it: it meets
 * rw_egress, which lets it through unjudged only by its mark (RW_MARK_REVOKE), and the node
 * routes it like any packet of the flow.
 *
 * Why this send path cannot be aimed: the 4-tuple is the refused segment's own, and it must name
 * an entry of the sandbox's own table (x->ct), made only when the policy allowed the flow; the
 * reset goes to that entry's peer and nowhere else, carries nothing but a reset, and each
 * refused segment costs a token of the sandbox's answer budget. A pod cannot mark a packet: a
 * packet crossing a veth into another namespace has its mark scrubbed (skb_scrub_packet() in
 * ____dev_forward_skb()), so a marked packet on the host veth's ingress can only be a clone made
 * here. rw_ingress never trusts the mark: a packet routed to the pod may carry any mark the
 * node's own rules gave it.
 *
 * A run that ends while its pod lives (removed from the snapshot, the veth still bound) leaves
 * flows its run opened: the apply keeps that veth's table (user/lib/apply.c), and their
 * segments are reset the same way under the node's refusal mode (rw_config.refusal), though the
 * packet is unknown-source. The proof is the binding: the packet's pod-side address must be the
 * one the veth is bound to (rw_identify()), the address the node routes to that veth, so the
 * pod's reset can only go to the pod that sent or is sent the segment, and the remote's only to
 * a peer of a flow the ended run was allowed. Nothing else of such a pod is answered: a SYN or
 * a datagram has no run whose policy the answer would tell. An unbound veth has neither proof
 * nor table, and stays silent.
 *
 * API
 *   offers: rw_revoke_applies(), rw_revoke6_applies(), rw_revoke_build(), rw_revoke_own()
 *   needs:  runwall.h, bpf_net.h, parse.h, answer.h
 */
#ifndef RUNWALL_BPF_REVOKE_H
#define RUNWALL_BPF_REVOKE_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "bpf_net.h"
#include "parse.h"
#include "answer.h"

#define RW_RST_CSUM_OFF	 (ETH_HLEN_ + 20 + 16) /* the TCP checksum of a struct rw_rst_frame */
#define RW_RST6_CSUM_OFF (ETH_HLEN_ + RW_IP6_HLEN + 16) /* and of a struct rw_rst6_frame */

/* Does a refusal close both ends? `refusal` is the mode of a proven source (the run's, or the
 * node's for a run that has ended), RW_REFUSAL_DROP for any other. The peer's address passes
 * rw_answer_kind()'s martian test for the same reason: it becomes the source of the pod's reset.
 */
static __always_inline int rw_revoke_applies(const struct rw_pkt *p, __u8 dir, const void *ct,
					     __u8 refusal)
{
	__u8 peer_first =
		dir == RW_DIR_EGRESS ? ((const __u8 *)&p->daddr)[0] : ((const __u8 *)&p->saddr)[0];

	if (refusal != RW_REFUSAL_ANSWER || !ct || p->is_arp || p->proto != IPPROTO_TCP)
		return 0;
	if ((p->tcp_flags & (TCP_FLAG_SYN_ | TCP_FLAG_RST_ | TCP_FLAG_ACK_)) != TCP_FLAG_ACK_)
		return 0;
	return peer_first && peer_first != 127 && peer_first < 224;
}

/* rw_revoke_applies() for IPv6: ct is the flow's entry of the veth's rw_conntrack6 table. */
static __always_inline int rw_revoke6_applies(const struct rw_pkt *p, __u8 dir, const void *ct,
					      __u8 refusal)
{
	const volatile struct rw_pkt *v = p; /* see rw_ip6_may_answer_from() */

	if (refusal != RW_REFUSAL_ANSWER || !ct || v->nexthdr != RW_NH_TCP)
		return 0;
	if ((v->tcp_flags & (TCP_FLAG_SYN_ | TCP_FLAG_RST_ | TCP_FLAG_ACK_)) != TCP_FLAG_ACK_)
		return 0;
	return rw_ip6_may_answer_from(dir == RW_DIR_EGRESS ? v->daddr6 : v->saddr6);
}

/* Writes over the packet (already cut to RW_RST_LEN) a bare reset <SEQ=seq><CTL=RST> of the
 * segment's flow, the segment's way or, with `back`, toward its sender. The TCP checksum is
 * written through bpf_l4_csum_replace(), which knows the skb's checksum state: a packet a pod
 * sent is usually CHECKSUM_PARTIAL, whose field must hold the pseudo-header sum for the device
 * that completes it (the remote's reset may leave through a NIC), and any other the full sum.
 * From a field of zero, the pseudo-header's sum is added as a pseudo-header change (kept in
 * either state) and the header's as a data change (dropped when the device sums the data).
 */
static __always_inline int rw_revoke_write(struct __sk_buff *skb, const struct ethhdr *eth,
					   const struct iphdr *ip, const struct tcphdr *tcp,
					   int back, __be32 seq)
{
	struct rw_rst_frame f = {};
	__s64 pseudo, hdr;

	__builtin_memcpy(f.eth.h_dest, back ? eth->h_source : eth->h_dest, ETH_ALEN);
	__builtin_memcpy(f.eth.h_source, back ? eth->h_dest : eth->h_source, ETH_ALEN);
	f.eth.h_proto = eth->h_proto;
	rw_rst_ip(&f.ip, back ? ip->daddr : ip->saddr, back ? ip->saddr : ip->daddr);
	f.tcp.source = back ? tcp->dest : tcp->source;
	f.tcp.dest = back ? tcp->source : tcp->dest;
	f.tcp.seq = seq;
	((__u8 *)&f.tcp)[13] = TCP_FLAG_RST_;
	f.tcp.doff = 5;

	pseudo = rw_rst_pseudo_sum(&f.ip);
	hdr = bpf_csum_diff(NULL, 0, (__be32 *)&f.tcp, sizeof(f.tcp), 0);
	if (pseudo < 0 || hdr < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, 0, &f.eth, RW_RST_LEN, BPF_F_RECOMPUTE_CSUM))
		return -1;
	if (bpf_l4_csum_replace(skb, RW_RST_CSUM_OFF, 0, (__u32)pseudo, BPF_F_PSEUDO_HDR))
		return -1;
	return bpf_l4_csum_replace(skb, RW_RST_CSUM_OFF, 0, (__u32)hdr, 0);
}

/* Turns the refused segment into the pod's reset, after sending a clone of the remote's. A
 * subprogram: called from every refusal of both programs. Returns 0 when the packet now is the
 * pod's reset; else the packet is to be dropped as it is. A failed clone (the veth down, no
 * memory) still leaves the pod's reset.
 */
/* The segment's headers as rw_revoke_build() reads them: in the per-CPU scratch frame, off the
 * stack, which the calling program's frame nearly fills (bpf/maps.h, rw_scratch).
 */
struct rw_revoke_in {
	struct ethhdr eth;
	struct iphdr ip;
	struct tcphdr tcp;
};

static __noinline int rw_revoke_build(struct __sk_buff *skb, __u32 from_pod)
{
	struct rw_revoke_in *in = rw_scratch_frame(sizeof(struct rw_revoke_in));
	__u32 mark = skb->mark;

	if (!in || bpf_skb_load_bytes(skb, 0, &in->eth, sizeof(in->eth)) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_, &in->ip, sizeof(in->ip)) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_ + sizeof(in->ip), &in->tcp, sizeof(in->tcp)))
		return -1;
	/* Shrinking never fails for want of room, and resets a GSO skb to one frame. */
	if (bpf_skb_change_tail(skb, RW_RST_LEN, 0))
		return -1;
	if (rw_revoke_write(skb, &in->eth, &in->ip, &in->tcp, !from_pod,
			    from_pod ? in->tcp.seq : in->tcp.ack_seq))
		return -1;
	skb->mark = RW_MARK_REVOKE;
	bpf_clone_redirect(skb, skb->ifindex, BPF_F_INGRESS);
	skb->mark = mark;
	return rw_revoke_write(skb, &in->eth, &in->ip, &in->tcp, from_pod,
			       from_pod ? in->tcp.ack_seq : in->tcp.seq);
}

/* rw_revoke_write() for IPv6: the frame f, already turned the way the reset goes, finished as a
 * bare reset <SEQ=seq><CTL=RST> and written over the packet (already cut to RW_RST6_LEN), its
 * checksum through bpf_l4_csum_replace() as IPv4's.
 */
static __always_inline int rw_revoke6_write(struct __sk_buff *skb, struct rw_rst6_frame *f,
					    __be32 seq)
{
	rw_rst6_finish(f, seq, 0, TCP_FLAG_RST_);
	if (bpf_skb_store_bytes(skb, 0, &f->eth, RW_RST6_LEN, BPF_F_RECOMPUTE_CSUM))
		return -1;
	if (bpf_l4_csum_replace(skb, RW_RST6_CSUM_OFF, 0,
				rw_ip6_pseudo_sum(&f->ip6, 20, IPPROTO_TCP), BPF_F_PSEUDO_HDR))
		return -1;
	return bpf_l4_csum_replace(skb, RW_RST6_CSUM_OFF, 0, rw_sum16(&f->tcp, sizeof(f->tcp), 0),
				   0);
}

/* rw_revoke_build() for IPv6, a global function of its own as answer.h's IPv6 builders are
 * (verified once; IPv4's programs never call it; a small frame). l4_off is struct rw_pkt's: the
 * TCP header's offset, behind any extension headers, which the resets do not carry. One frame
 * serves both resets: the remote's is the segment's way when it came from the pod, the pod's the
 * other way.
 */
__noinline int rw_revoke6_build(struct __sk_buff *skb, __u32 from_pod, __u32 l4_off)
{
	struct rw_rst6_frame *f = rw_scratch_frame(sizeof(*f));
	__be32 first, second;
	__u32 mark;

	if (!f || rw_rst6_load(skb, l4_off, f))
		return -1;
	first = from_pod ? f->tcp.seq : f->tcp.ack_seq;
	second = from_pod ? f->tcp.ack_seq : f->tcp.seq;
	if (!from_pod)
		rw_rst6_turn(f);
	if (rw_ip6_cut_to_reset(skb, l4_off) || rw_revoke6_write(skb, f, first))
		return -1;
	mark = skb->mark;
	skb->mark = RW_MARK_REVOKE;
	bpf_clone_redirect(skb, skb->ifindex, BPF_F_INGRESS);
	skb->mark = mark;
	rw_rst6_turn(f);
	return rw_revoke6_write(skb, f, second);
}

/* rw_egress's first test: a remote's reset made above, back on the host veth's ingress. Its
 * mark is cleared so that it means nothing to the node's routing and filters.
 */
static __always_inline int rw_revoke_own(struct __sk_buff *skb)
{
	if (skb->mark != RW_MARK_REVOKE)
		return 0;
	skb->mark = 0;
	return 1;
}

#endif /* RUNWALL_BPF_REVOKE_H */
