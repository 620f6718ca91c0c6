/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* answer.h: the answer to a refused packet, built from the packet itself and sent back into the
 * pod it came from: a TCP reset (RFC 793 reset generation) or an ICMP destination unreachable,
 * code 13 "communication administratively prohibited" (RFC 1812 5.2.7.1), quoting the refused
 * datagram's header and its first 8 bytes (RFC 792).
 *
 * Only rw_egress answers, and only once rw_identify() has proven the source is the veth's own
 * pod: the answer goes to the packet's source, so an unproven source would make the node send
 * packets to an address the sandbox chose. It is aimed with bpf_redirect_peer() at the veth the
 * packet came in on: from the host veth's TC ingress that delivers to the peer's ingress (the
 * pod's eth0, skb_do_redirect() in net/core/filter.c), so the answer can only reach the pod that
 * sent the packet, never the destination, another pod or the node, and it does not cross the
 * host veth's egress hook (rw_ingress): it is neither judged nor counted twice.
 */
#ifndef RUNWALL_BPF_ANSWER_H
#define RUNWALL_BPF_ANSWER_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "bpf_net.h"
#include "parse.h"

/* The frames are built on the stack behind two bytes of padding so that the IP header (and the
 * words bpf_csum_diff() sums) are 4-byte aligned: the verifier refuses misaligned stack access.
 */
struct rw_rst_frame {
	__u8 pad[2];
	struct ethhdr eth;
	struct iphdr ip;
	struct tcphdr tcp;
};
#define RW_RST_LEN (ETH_HLEN_ + 20 + 20)

struct rw_icmp_unreach {
	__u8 type;
	__u8 code;
	__sum16 check;
	__be32 unused;
};

#define RW_ICMP_QUOTE_MAX (20 + 8) /* the refused IP header (no options) and 8 bytes after it */
struct rw_icmp_frame {
	__u8 pad[2];
	struct ethhdr eth;
	struct iphdr ip;
	struct rw_icmp_unreach icmp;
	__u8 quote[RW_ICMP_QUOTE_MAX];
};
#define RW_ICMP_HDRS_LEN (ETH_HLEN_ + 20 + 8)

/* The pseudo-header of RFC 793 3.1, summed ahead of the TCP header. */
struct rw_tcp_pseudo {
	__be32 saddr;
	__be32 daddr;
	__u8 zero;
	__u8 proto;
	__be16 len;
};

/* The 16-bit one's complement of the one's complement sum (RFC 1071), from bpf_csum_diff()'s
 * 32-bit partial sum.
 */
static __always_inline __sum16 rw_csum_fold(__s64 sum)
{
	__u32 s = (__u32)sum;

	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__sum16)~s;
}

/* The answer a refused packet deserves, budget aside: RW_ANSWER_NONE, _RST or _ICMP. */
static __always_inline __u8 rw_answer_kind(const struct rw_pkt *p, const struct rw_pod *pod,
					   __u8 dir, __u8 identified)
{
	__u8 first = ((const __u8 *)&p->daddr)[0];

	if (!identified || dir != RW_DIR_EGRESS || !pod || pod->refusal != RW_REFUSAL_ANSWER ||
	    p->is_arp)
		return RW_ANSWER_NONE;
	/* The answer's source is the refused destination: never one the pod's stack would take
	 * for a martian (0/8, 127/8) or a multicast or broadcast address (RFC 1122 3.2.2, 4.2.3.10).
	 */
	if (first == 0 || first == 127 || first >= 224)
		return RW_ANSWER_NONE;
	if (p->proto == IPPROTO_TCP)
		return p->tcp_flags & TCP_FLAG_RST_ ? RW_ANSWER_NONE : RW_ANSWER_RST;
	if (p->proto == IPPROTO_ICMP)
		return p->icmp_info ? RW_ANSWER_ICMP : RW_ANSWER_NONE;
	return RW_ANSWER_ICMP;
}

/* The IPv4 header of a bare reset (no options, no payload), from saddr to daddr, its checksum
 * written: the answer's and both of a revoke's (revoke.h).
 */
static __always_inline void rw_rst_ip(struct iphdr *ip, __be32 saddr, __be32 daddr)
{
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = bpf_htons(20 + 20);
	ip->frag_off = bpf_htons(IP_DF_);
	ip->ttl = 64;
	ip->protocol = IPPROTO_TCP;
	ip->saddr = saddr;
	ip->daddr = daddr;
	ip->check = rw_csum_fold(bpf_csum_diff(NULL, 0, (__be32 *)ip, sizeof(*ip), 0));
}

/* Rewrites the refused segment into its reset (RFC 793 3.4, "Reset Generation"): from an
 * ACK-bearing segment, <SEQ=SEG.ACK><CTL=RST>; from any other (a SYN), <SEQ=0><ACK=SEG.SEQ+
 * SEG.LEN><CTL=RST,ACK>, SEG.LEN counting the payload, SYN and FIN. parse.h proved the header
 * has no IP options and a TCP header within tot_len.
 */
static __always_inline int rw_answer_rst(struct __sk_buff *skb)
{
	struct rw_rst_frame f = {};
	struct rw_tcp_pseudo ph = {};
	struct iphdr ip;
	struct tcphdr tcp;
	__u32 seg_len;
	__u8 flags;
	__s64 sum;

	if (bpf_skb_load_bytes(skb, 0, &f.eth, sizeof(f.eth)) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_, &ip, sizeof(ip)) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_ + sizeof(ip), &tcp, sizeof(tcp)))
		return -1;
	flags = ((__u8 *)&tcp)[13];
	seg_len = bpf_ntohs(ip.tot_len) - sizeof(ip) - tcp.doff * 4;
	seg_len += !!(flags & TCP_FLAG_SYN_) + !!(flags & TCP_FLAG_FIN_);

	__builtin_memcpy(f.eth.h_dest, f.eth.h_source, ETH_ALEN);
	bpf_skb_load_bytes(skb, 0, f.eth.h_source, ETH_ALEN);
	rw_rst_ip(&f.ip, ip.daddr, ip.saddr);

	f.tcp.source = tcp.dest;
	f.tcp.dest = tcp.source;
	if (flags & TCP_FLAG_ACK_) {
		f.tcp.seq = tcp.ack_seq;
		((__u8 *)&f.tcp)[13] = TCP_FLAG_RST_;
	} else {
		f.tcp.ack_seq = bpf_htonl(bpf_ntohl(tcp.seq) + seg_len);
		((__u8 *)&f.tcp)[13] = TCP_FLAG_RST_ | TCP_FLAG_ACK_;
	}
	f.tcp.doff = 5;
	ph.saddr = f.ip.saddr;
	ph.daddr = f.ip.daddr;
	ph.proto = IPPROTO_TCP;
	ph.len = bpf_htons(20);
	sum = bpf_csum_diff(NULL, 0, (__be32 *)&ph, sizeof(ph), 0);
	sum = bpf_csum_diff(NULL, 0, (__be32 *)&f.tcp, sizeof(f.tcp), (__wsum)sum);
	f.tcp.check = rw_csum_fold(sum);

	/* Shrinking never fails for want of room; bpf_skb_change_tail() also resets a GSO skb's
	 * segmentation state (skb_gso_reset()), so a refused GSO segment becomes one frame.
	 */
	if (bpf_skb_change_tail(skb, RW_RST_LEN, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &f.eth, RW_RST_LEN, BPF_F_RECOMPUTE_CSUM);
}

/* Rewrites the refused datagram into an ICMP destination unreachable, code 13, from the
 * refused destination to the pod, quoting the datagram's IP header and the first 8 bytes after
 * it (all of it when it is shorter). The pod's stack finds the socket by the quote and reports
 * EHOSTUNREACH (icmp_err_convert[] in net/ipv4/icmp.c: code 13 is a hard error).
 */
static __always_inline int rw_answer_icmp(struct __sk_buff *skb)
{
	struct rw_icmp_frame f = {};
	__u32 tot_len, quote;
	struct iphdr ip;

	if (bpf_skb_load_bytes(skb, 0, &f.eth, sizeof(f.eth)) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_, &ip, sizeof(ip)))
		return -1;
	tot_len = bpf_ntohs(ip.tot_len);
	quote = tot_len < RW_ICMP_QUOTE_MAX ? tot_len : RW_ICMP_QUOTE_MAX;
	if (quote < sizeof(ip)) /* parse.h refuses it first; the verifier needs the bound */
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN_, f.quote, quote))
		return -1;

	__builtin_memcpy(f.eth.h_dest, f.eth.h_source, ETH_ALEN);
	bpf_skb_load_bytes(skb, 0, f.eth.h_source, ETH_ALEN);
	f.ip.version = 4;
	f.ip.ihl = 5;
	f.ip.tos = 0xc0; /* IPTOS_PREC_INTERNETCONTROL, as the kernel's own icmp_send() */
	f.ip.tot_len = bpf_htons(20 + 8 + quote);
	f.ip.ttl = 64;
	f.ip.protocol = IPPROTO_ICMP;
	f.ip.saddr = ip.daddr;
	f.ip.daddr = ip.saddr;
	f.ip.check = rw_csum_fold(bpf_csum_diff(NULL, 0, (__be32 *)&f.ip, sizeof(f.ip), 0));
	f.icmp.type = 3;  /* ICMP_DEST_UNREACH */
	f.icmp.code = 13; /* ICMP_PKT_FILTERED */
	/* The quote is zero-padded to its 28 bytes: zeros after the data are RFC 1071's padding
	 * of an odd length and add nothing to the sum.
	 */
	f.icmp.check = rw_csum_fold(
		bpf_csum_diff(NULL, 0, (__be32 *)&f.icmp, sizeof(f.icmp) + RW_ICMP_QUOTE_MAX, 0));

	if (bpf_skb_change_tail(skb, RW_ICMP_HDRS_LEN + quote, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &f.eth, RW_ICMP_HDRS_LEN + quote, BPF_F_RECOMPUTE_CSUM);
}

/* Builds the answer of `kind` in place of the refused packet. A subprogram, not inlined: it is
 * called from every refusal of rw_egress, and one copy keeps the program small. Returns 0 when
 * the packet now is the answer; else the packet is to be dropped as it is.
 *
 * Every checksum is written in full. A packet a pod sends through its veth is usually
 * CHECKSUM_PARTIAL (the checksum left to an offload that never comes on a veth); the answer keeps
 * that state, which the pod's stack takes as verified on local delivery (skb_csum_unnecessary()),
 * and its checksums are right for any reader that sums them anyway.
 */
static __noinline int rw_answer_build(struct __sk_buff *skb, __u32 kind)
{
	if (kind == RW_ANSWER_RST)
		return rw_answer_rst(skb);
	if (kind == RW_ANSWER_ICMP)
		return rw_answer_icmp(skb);
	return -1;
}

#endif /* RUNWALL_BPF_ANSWER_H */
