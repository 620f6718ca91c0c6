/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* answer.h: the answer to a refused packet, built from the packet itself and sent back into the
 * pod it came from: a TCP reset (RFC 793 reset generation) or, for IPv4, an ICMP destination
 * unreachable, code 13 "communication administratively prohibited" (RFC 1812 5.2.7.1), quoting the
 * refused datagram's header and its first 8 bytes (RFC 792); for IPv6, an ICMPv6 destination
 * unreachable, code 1 "administratively prohibited" (RFC 4443 3.1), quoting the refused packet
 * through its extension headers and the upper layer's first bytes.
 *
 * Only rw_egress answers, and only once rw_identify() has proven the source is the veth's own
 * pod: the answer goes to the packet's source, so an unproven source would make the node send
 * packets to an address the sandbox chose. It is aimed with bpf_redirect_peer() at the veth the
 * packet came in on: from the host veth's TC ingress that delivers to the peer's ingress (the
 * pod's eth0, skb_do_redirect() in net/core/filter.c), so the answer can only reach the pod that
 * sent the packet, never the destination, another pod or the node, and it does not cross the
 * host veth's egress hook (rw_ingress): it is neither judged nor counted twice.
 *
 * API
 *   offers: rw_ip6_may_answer_from(), rw_answer_kind(), rw_answer6_kind(), rw_rst_ip(),
 *           rw_rst_pseudo_sum(), rw_scratch_frame(), rw_sum16(), rw_ip6_pseudo_sum(),
 *           rw_rst6_load(), rw_rst6_turn(), rw_rst6_finish(), rw_ip6_cut_to_reset(),
 *           rw_answer6_build(), rw_answer_build()
 *   needs:  runwall.h, bpf_net.h, parse.h, maps.h
 */
#ifndef RUNWALL_BPF_ANSWER_H
#define RUNWALL_BPF_ANSWER_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "bpf_net.h"
#include "parse.h"
#include "maps.h"

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

/* Whether an IPv6 address may be an answer's source: the pod's stack drops a packet from a
 * multicast address (ff00::/8), and one from the loopback address arriving on a device that is
 * not loopback (ip6_rcv_core() in net/ipv6/ip6_input.c); the unspecified address is no sender's
 * (RFC 4291 2.5.2). The words are read through a volatile pointer, from the packet's context
 * where they lie: kept in registers instead, across the many inlined refusals of a program,
 * clang spilled them into the program's own stack frame, whose size and a subprogram's together
 * the verifier bounds at 512 bytes.
 */
static __always_inline int rw_ip6_may_answer_from(const volatile __be32 *a)
{
	return (a[0] & bpf_htonl(0xff000000)) != bpf_htonl(0xff000000) &&
	       (a[0] | a[1] | a[2] | (a[3] & ~bpf_htonl(1)));
}

/* rw_answer_kind() for IPv6: a reset for TCP, else ICMPv6 1/1; of ICMPv6 only echo (128, 129)
 * is answered, as ICMP's queries are for IPv4: never an error (RFC 4443 2.4 (e)), nor NDP or MLD,
 * whose destinations are the link's own.
 */
static __always_inline __u8 rw_answer6_kind(const struct rw_pkt *p, const struct rw_pod *pod,
					    __u8 dir, __u8 identified)
{
	const volatile struct rw_pkt *v = p; /* see rw_ip6_may_answer_from() */

	if (!identified || dir != RW_DIR_EGRESS || !pod || pod->refusal != RW_REFUSAL_ANSWER)
		return RW_ANSWER_NONE;
	if (!rw_ip6_may_answer_from(v->daddr6))
		return RW_ANSWER_NONE;
	if (v->nexthdr == RW_NH_TCP)
		return v->tcp_flags & TCP_FLAG_RST_ ? RW_ANSWER_NONE : RW_ANSWER_RST;
	if (v->nexthdr == RW_NH_ICMPV6)
		return v->icmp6_type == ICMPV6_ECHO_REQUEST || v->icmp6_type == ICMPV6_ECHO_REPLY
			       ? RW_ANSWER_ICMP
			       : RW_ANSWER_NONE;
	return RW_ANSWER_ICMP;
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

/* The sum of the pseudo-header of a reset whose IPv4 header is `ip` (a 20-byte TCP header, no
 * payload), for its TCP checksum: bpf_csum_diff()'s, negative on an error.
 */
static __always_inline __s64 rw_rst_pseudo_sum(const struct iphdr *ip)
{
	struct rw_tcp_pseudo ph = {
		.saddr = ip->saddr,
		.daddr = ip->daddr,
		.proto = IPPROTO_TCP,
		.len = bpf_htons(20),
	};

	return bpf_csum_diff(NULL, 0, (__be32 *)&ph, sizeof(ph), 0);
}

/* Rewrites the refused segment into its reset (RFC 793 3.4, "Reset Generation"): from an
 * ACK-bearing segment, <SEQ=SEG.ACK><CTL=RST>; from any other (a SYN), <SEQ=0><ACK=SEG.SEQ+
 * SEG.LEN><CTL=RST,ACK>, SEG.LEN counting the payload, SYN and FIN. parse.h proved the header
 * has no IP options and a TCP header within tot_len.
 */
static __always_inline int rw_answer_rst(struct __sk_buff *skb)
{
	struct rw_rst_frame f = {};
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
	sum = rw_rst_pseudo_sum(&f.ip);
	sum = bpf_csum_diff(NULL, 0, (__be32 *)&f.tcp, sizeof(f.tcp), (__wsum)sum);
	f.tcp.check = rw_csum_fold(sum);

	/* Shrinking never fails for want of room; bpf_skb_change_tail() also resets a GSO skb's
	 * segmentation state (skb_gso_reset()), so a refused GSO segment becomes one frame.
	 */
	if (bpf_skb_change_tail(skb, RW_RST_LEN, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &f.eth, RW_RST_LEN, BPF_F_RECOMPUTE_CSUM);
}

/* Makes an IPv4 frame exactly `len` bytes long, to be overwritten by an answer as long.
 * bpf_skb_change_tail() never cuts in front of the skb's transport header (__bpf_skb_min_len() in
 * net/core/filter.c), and that header is where the sender's kernel put it: for a frame a packet
 * socket sends, where its flow dissector ended (packet_snd() -> skb_probe_transport_header()),
 * which goes through a tunnel's payload: behind a whole inner IPv6 header of 6in4 (41) or GRE
 * (47), or an inner IPv4 header of IPIP (4), past the 28 bytes an ICMP answer quotes. The bytes
 * after the IPv4 header are then taken out with bpf_skb_adjust_room() at the network header,
 * which moves no header's offset and checks none: every byte of the answer is written after.
 */
static __always_inline int rw_ip_cut_to(struct __sk_buff *skb, __u32 len)
{
	__u32 have = skb->len;

	if (!bpf_skb_change_tail(skb, len, 0))
		return 0;
	if (have <= len)
		return -1;
	return bpf_skb_adjust_room(skb, -(__s32)(have - len), BPF_ADJ_ROOM_NET, 0);
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

	if (rw_ip_cut_to(skb, RW_ICMP_HDRS_LEN + quote))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &f.eth, RW_ICMP_HDRS_LEN + quote, BPF_F_RECOMPUTE_CSUM);
}

/* ---- IPv6 ---- */

/* The frames are laid out as IPv4's, so that the IPv6 header is 4-byte aligned on the stack. */
struct rw_rst6_frame {
	__u8 pad[2];
	struct ethhdr eth;
	struct ipv6hdr ip6;
	struct tcphdr tcp;
};
_Static_assert(sizeof(struct rw_rst6_frame) <= RW_SCRATCH_BYTES, "rw_rst6_frame in rw_scratch");
#define RW_IP6_HLEN    40
#define RW_RST6_LEN    (ETH_HLEN_ + RW_IP6_HLEN + 20)
#define RW_L4_OFF6_MAX (ETH_HLEN_ + RW_IP6_HLEN + RW_IPV6_EXT_BYTES)

/* The refused packet quoted by an ICMPv6 answer, from its IPv6 header on: the fixed header, the
 * longest chain of extension headers the parse lets through, and 24 bytes of the upper layer (its
 * ports, and a checksum field within 24 bytes, which a CHECKSUM_PARTIAL packet's trim must keep:
 * __bpf_skb_min_len() in net/core/filter.c). RFC 4443 2.4 (c) asks for as much as fits 1280
 * bytes; the pod's stack needs the extension headers and 8 bytes after them to find the socket
 * (icmpv6_notify() in net/ipv6/icmp.c). The quote is summed a chunk at a time.
 */
#define RW_ICMP6_QUOTE_MAX   (RW_IP6_HLEN + RW_IPV6_EXT_BYTES + 24)
#define RW_ICMP6_QUOTE_CHUNK 64		       /* RW_ICMP6_QUOTE_MAX is 5 of them */
#define RW_ICMP6_ROOM	     (RW_IP6_HLEN + 8) /* the answer's IPv6 and ICMPv6 headers */

struct rw_icmp6_head {
	__u8 pad[2];
	struct ethhdr eth;
	struct ipv6hdr ip6;
	struct rw_icmp_unreach icmp;
};

/* rw_answer_icmp6()'s frame: the quote's chunks are summed in the bytes its headers are built in
 * after them.
 */
union rw_icmp6_frame {
	struct rw_icmp6_head f;
	__u8 chunk[RW_ICMP6_QUOTE_CHUNK];
};
_Static_assert(sizeof(union rw_icmp6_frame) <= RW_SCRATCH_BYTES, "rw_icmp6_frame in rw_scratch");

/* The IPv6 builders are subprograms whose stack adds to the calling program's, and the verifier
 * bounds the two together at 512 bytes (check_max_stack_depth(), each frame rounded up to 32
 * bytes on 6.1), while the IPv6 programs' own frames are near 400 bytes: so the builders' frames
 * are the CPU's rw_scratch entry (maps.h), and what is left on their stack is kept small. The
 * headers' sums are taken 16-bit word by word in registers, not by bpf_csum_diff() over buffers
 * of their own, and addresses and ports are swapped in registers. A sum of the words as loaded
 * (the host's byte order) is the one's complement sum of RFC 1071 in that order, which is what a
 * checksum field holds once stored the same way (RFC 1071 2 (B)); it is also a partial sum as
 * bpf_csum_diff() and bpf_l4_csum_replace() take them.
 */
/* The CPU's rw_scratch entry (maps.h), zeroed to `len` bytes: a builder's frame. */
static __always_inline void *rw_scratch_frame(const int len)
{
	__u32 zero = 0;
	void *f = bpf_map_lookup_elem(&rw_scratch, &zero);

	if (f)
		__builtin_memset(f, 0, len);
	return f;
}

static __always_inline __u32 rw_sum16(const void *p, const int len, __u32 sum)
{
	const __u16 *w = p;

#pragma unroll
	for (int i = 0; i < len / 2; i++)
		sum += w[i];
	return sum;
}

/* A partial sum folded to 16 bits, not complemented. */
static __always_inline __u32 rw_csum_fold16(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	return (s & 0xffff) + (s >> 16);
}

/* The IPv6 pseudo-header (RFC 8200 8.1) of the frame's IPv6 header: its two addresses, the
 * upper-layer length (32 bits) and the next header (in the low byte of the last 32 bits).
 */
static __always_inline __u32 rw_ip6_pseudo_sum(const struct ipv6hdr *ip6, __u32 len, __u8 nexthdr)
{
	return rw_sum16(&ip6->saddr, 32, 0) + bpf_htons(len >> 16) + bpf_htons(len & 0xffff) +
	       bpf_htons(nexthdr);
}

/* A bare reset is built in one frame on the stack: the segment's Ethernet addresses, IPv6
 * addresses and first TCP bytes are loaded where the reset holds them, then turned around or
 * not, then finished. l4_off is where the parse found the TCP header, behind any extension
 * headers; the reset has none.
 */
static __always_inline int rw_rst6_load(struct __sk_buff *skb, __u32 l4_off,
					struct rw_rst6_frame *f)
{
	if (l4_off < ETH_HLEN_ + RW_IP6_HLEN || l4_off > RW_L4_OFF6_MAX)
		return -1;
	if (bpf_skb_load_bytes(skb, 0, &f->eth, sizeof(f->eth)) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_ + 8, &f->ip6.saddr, 32) ||
	    bpf_skb_load_bytes(skb, l4_off, &f->tcp, sizeof(f->tcp)))
		return -1;
	return 0;
}

/* Swaps the frame's Ethernet and IPv6 addresses and its ports: the reset toward the sender. */
static __always_inline void rw_rst6_turn(struct rw_rst6_frame *f)
{
	__u16 *dmac = (__u16 *)f->eth.h_dest, *smac = (__u16 *)f->eth.h_source, t16;
	__u32 *sa = f->ip6.saddr.in6_u.u6_addr32, *da = f->ip6.daddr.in6_u.u6_addr32, t32;

#pragma unroll
	for (int i = 0; i < ETH_ALEN / 2; i++) {
		t16 = dmac[i];
		dmac[i] = smac[i];
		smac[i] = t16;
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		t32 = sa[i];
		sa[i] = da[i];
		da[i] = t32;
	}
	t16 = f->tcp.source;
	f->tcp.source = f->tcp.dest;
	f->tcp.dest = t16;
}

/* Makes the frame a bare reset <SEQ=seq><ACK=ack><CTL=flags>: an IPv6 header of no traffic
 * class or flow label, hop limit 64 as IPv4's TTL, and a TCP header of 20 bytes, window 0, its
 * checksum field zero. The sums are taken by the caller when it needs them, so that no sum is
 * kept in a register across a helper call (a spill, on the stack this frame is to spare).
 */
static __always_inline void rw_rst6_finish(struct rw_rst6_frame *f, __be32 seq, __be32 ack,
					   __u8 flags)
{
	__be16 sport = f->tcp.source, dport = f->tcp.dest;

	__builtin_memset(&f->ip6, 0, 8);
	f->ip6.version = 6;
	f->ip6.payload_len = bpf_htons(20);
	f->ip6.nexthdr = IPPROTO_TCP;
	f->ip6.hop_limit = 64;
	__builtin_memset(&f->tcp, 0, sizeof(f->tcp));
	f->tcp.source = sport;
	f->tcp.dest = dport;
	f->tcp.seq = seq;
	f->tcp.ack_seq = ack;
	f->tcp.doff = 5;
	((__u8 *)&f->tcp)[13] = flags;
}

/* Cuts a refused TCP segment down to a bare reset's length, its IPv6 header followed at once by
 * its TCP header. The extension headers between them go first (bpf_skb_adjust_room() at the
 * network header): a CHECKSUM_PARTIAL packet may not be cut in front of its checksum field
 * (__bpf_skb_min_len() in net/core/filter.c), and the field moves up with the TCP header.
 * Shrinking never fails for want of room; bpf_skb_change_tail() also resets a GSO skb's
 * segmentation state.
 */
static __always_inline int rw_ip6_cut_to_reset(struct __sk_buff *skb, __u32 l4_off)
{
	__u32 chain = l4_off - ETH_HLEN_ - RW_IP6_HLEN;

	if (chain && bpf_skb_adjust_room(skb, -(__s32)chain, BPF_ADJ_ROOM_NET, 0))
		return -1;
	return bpf_skb_change_tail(skb, RW_RST6_LEN, 0);
}

/* rw_answer_rst() for IPv6: the same reset (RFC 793 3.4), its checksum over the IPv6
 * pseudo-header. A global function (see rw_answer6_build()).
 */
__noinline int rw_answer6_rst(struct __sk_buff *skb, __u32 l4_off)
{
	struct rw_rst6_frame *f = rw_scratch_frame(sizeof(*f));
	__u32 seg_len, seq, ack;
	__be16 payload_len;
	__u8 flags;

	if (!f || rw_rst6_load(skb, l4_off, f) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_ + 4, &payload_len, sizeof(payload_len)))
		return -1;
	flags = ((__u8 *)&f->tcp)[13];
	seg_len = bpf_ntohs(payload_len) - (l4_off - ETH_HLEN_ - RW_IP6_HLEN) - f->tcp.doff * 4;
	seg_len += !!(flags & TCP_FLAG_SYN_) + !!(flags & TCP_FLAG_FIN_);
	seq = f->tcp.seq;
	ack = f->tcp.ack_seq;

	rw_rst6_turn(f);
	if (flags & TCP_FLAG_ACK_)
		rw_rst6_finish(f, ack, 0, TCP_FLAG_RST_);
	else
		rw_rst6_finish(f, 0, bpf_htonl(bpf_ntohl(seq) + seg_len),
			       TCP_FLAG_RST_ | TCP_FLAG_ACK_);
	f->tcp.check = rw_csum_fold(rw_ip6_pseudo_sum(&f->ip6, 20, IPPROTO_TCP) +
				    rw_sum16(&f->tcp, sizeof(f->tcp), 0));

	if (rw_ip6_cut_to_reset(skb, l4_off))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &f->eth, RW_RST6_LEN, BPF_F_RECOMPUTE_CSUM);
}

/* Rewrites the refused packet into an ICMPv6 destination unreachable, code 1, from the refused
 * destination to the pod, quoting the packet from its IPv6 header up to RW_ICMP6_QUOTE_MAX bytes
 * (all of it when it is shorter). The quote is the packet itself, left where it is: it is cut to
 * its length, and the answer's two headers are inserted in front of it behind the Ethernet header
 * (bpf_skb_adjust_room() at the MAC header), so that no more than a chunk of it is ever on the
 * stack, in the same bytes as the headers that are built after it. The pod's stack finds the
 * socket by the quote and reports EACCES (icmpv6_err_convert(): code 1 is a hard error). A
 * global function (see rw_answer6_build()).
 */
__noinline int rw_answer_icmp6(struct __sk_buff *skb)
{
	union rw_icmp6_frame *u = rw_scratch_frame(0);
	__be16 payload_len;
	__u32 quote, sum = 0;

	if (!u)
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN_ + 4, &payload_len, sizeof(payload_len)))
		return -1;
	quote = RW_IP6_HLEN + bpf_ntohs(payload_len);
	if (quote > RW_ICMP6_QUOTE_MAX)
		quote = RW_ICMP6_QUOTE_MAX;

		/* Each chunk is zero-filled first: the zeros after an odd-length end are RFC 1071's
	 * padding and add nothing to the sum; the chunks start at even offsets, so the words line
	 * up. Each chunk's sum is folded before it is added: no carry is lost.
	 */
#pragma unroll
	for (int i = 0; i < RW_ICMP6_QUOTE_MAX / RW_ICMP6_QUOTE_CHUNK; i++) {
		__u32 off = i * RW_ICMP6_QUOTE_CHUNK, n;

		if (off < quote) {
			n = quote - off < RW_ICMP6_QUOTE_CHUNK ? quote - off : RW_ICMP6_QUOTE_CHUNK;
			/* n is 1 to 64 here, but 6.1's verifier loses quote's bounds and sees 0 to
			 * 63 ("invalid zero-sized read"): the same n again, in a form whose bounds
			 * it computes itself; the empty asm keeps clang from folding it away.
			 */
			asm volatile("" : "+r"(n));
			n = ((n - 1) & (RW_ICMP6_QUOTE_CHUNK - 1)) + 1;
			__builtin_memset(u->chunk, 0, sizeof(u->chunk));
			if (bpf_skb_load_bytes(skb, ETH_HLEN_ + off, u->chunk, n))
				return -1;
			sum += rw_csum_fold16(
				bpf_csum_diff(NULL, 0, (__be32 *)u->chunk, sizeof(u->chunk), 0));
		}
	}

	__builtin_memset(&u->f, 0, sizeof(u->f));
	if (bpf_skb_load_bytes(skb, 0, u->f.eth.h_source, ETH_ALEN) ||
	    bpf_skb_load_bytes(skb, ETH_ALEN, u->f.eth.h_dest, ETH_ALEN) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_ + 8, &u->f.ip6.daddr, 16) ||
	    bpf_skb_load_bytes(skb, ETH_HLEN_ + 24, &u->f.ip6.saddr, 16))
		return -1;
	u->f.eth.h_proto = bpf_htons(ETH_P_IPV6_);
	u->f.ip6.version = 6;
	u->f.ip6.payload_len = bpf_htons(8 + quote);
	u->f.ip6.nexthdr = RW_NH_ICMPV6;
	u->f.ip6.hop_limit = 64;
	u->f.icmp.type = ICMPV6_DEST_UNREACH;
	u->f.icmp.code = ICMPV6_ADM_PROHIBITED;
	sum += rw_sum16(&u->f.icmp, sizeof(u->f.icmp), 0);
	sum += rw_ip6_pseudo_sum(&u->f.ip6, 8 + quote, RW_NH_ICMPV6);
	u->f.icmp.check = rw_csum_fold(sum);

	if (bpf_skb_change_tail(skb, ETH_HLEN_ + quote, 0) ||
	    bpf_skb_adjust_room(skb, RW_ICMP6_ROOM, BPF_ADJ_ROOM_MAC, 0))
		return -1;
	return bpf_skb_store_bytes(skb, 0, &u->f.eth, ETH_HLEN_ + RW_ICMP6_ROOM,
				   BPF_F_RECOMPUTE_CSUM);
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

/* rw_answer_build() for IPv6. Each builder is a global function of its own, called from here:
 * the verifier checks a global function once, on arguments it knows nothing of (hence the
 * builders' own bounds on l4_off), where a static subprogram is walked again from every refusal
 * that calls it (rw_egress6: 225 247 verified instructions so, 98 459 this way, on 6.18). IPv4's
 * programs never call them, and each adds only its own frame to the calling program's. l4_off is
 * struct rw_pkt's: the upper-layer header's offset in the frame. No packet pointer of the
 * caller's outlives the call, which changes the packet.
 */
static __always_inline int rw_answer6_build(struct __sk_buff *skb, __u32 kind, __u32 l4_off)
{
	if (kind == RW_ANSWER_RST)
		return rw_answer6_rst(skb, l4_off);
	if (kind == RW_ANSWER_ICMP)
		return rw_answer_icmp6(skb);
	return -1;
}

#endif /* RUNWALL_BPF_ANSWER_H */
