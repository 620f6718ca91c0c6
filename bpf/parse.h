/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* parse.h: packet parsing into struct rw_pkt. Anything that does not parse is a drop reason.
 *
 * API
 *   offers: rw_parse(), rw_parse6(), rw_tcp_is_syn()
 *   needs:  runwall.h, bpf_net.h
 */
#ifndef RUNWALL_BPF_PARSE_H
#define RUNWALL_BPF_PARSE_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "bpf_net.h"

struct rw_pkt {
	__be32 saddr; /* IPv4 source, or ARP sender; 0 for IPv6 */
	__be32 daddr; /* IPv4 destination, or ARP target; 0 for IPv6 */
	__be16 sport;
	__be16 dport;
	__u8 proto; /* IPPROTO_* of IPv4; IPv6's upper layer (its next header); 0 for ARP */
	__u8 tcp_flags;
	__u8 is_arp;
	__u8 icmp_info;	  /* ICMP whose type is a query or its reply (answer.h), not an error */
	__be16 ethertype; /* the frame's, or the out-of-band tag's protocol */
	__u8 is_ipv6;
	__u8 nexthdr;	  /* IPv6: the next header after the extension headers */
	__u8 icmp6_type;  /* ICMPv6's type byte */
	__u16 l4_off;	  /* IPv6: the upper-layer header's offset in the frame */
	__be32 saddr6[4]; /* IPv6 source */
	__be32 daddr6[4]; /* IPv6 destination */
	__u8 hop_limit;	  /* IPv6's: NDP is only ever sent with 255 (bpf/icmp6.h) */
	__u16 icmp6_len;  /* ICMPv6: the message's length, to the payload length's end */
};

/* Each header is copied out of the packet: with a direct load when it sits in the linear area
 * (the common case, and much cheaper than a helper call), else with bpf_skb_load_bytes(), which
 * works whatever part of the packet is linear (GRO'd or paged skbs on a veth, where direct access
 * alone would see a short data_end and misjudge a well-formed packet). Returns 0 or < 0.
 */
#define RW_LOAD(skb, data, end, off, dst)                                              \
	({                                                                             \
		void *__p = (data) + (off);                                            \
		int __r = 0;                                                           \
		if (__p + sizeof(*(dst)) <= (end))                                     \
			__builtin_memcpy((dst), __p, sizeof(*(dst)));                  \
		else                                                                   \
			__r = bpf_skb_load_bytes((skb), (off), (dst), sizeof(*(dst))); \
		__r;                                                                   \
	})
struct rw_arp_ipv4 {
	__be16 htype;
	__be16 ptype;
	__u8 hlen;
	__u8 plen;
	__be16 op;
	__u8 sha[6];
	__be32 spa;
	__u8 tha[6];
	__be32 tpa;
} __attribute__((packed));

/* The first 8 bytes of every extension header the walk knows (RFC 8200 4.3-4.6): the next
 * header, the length in 8-byte units beyond the first 8 (a fragment header's is reserved, its
 * size fixed at 8), and for a routing header its type and segments left.
 */
struct rw_ipv6_ext {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 routing_type;
	__u8 segments_left;
	__be32 rest;
};

/* Next headers that are extension headers the walk does not go through (RFC 7045: ESP, AH,
 * Mobility, HIP, Shim6 and the two experimental values), and No Next Header: the ports or the
 * upper-layer header behind them cannot be read, so nothing can be judged.
 */
static __always_inline int rw_ipv6_opaque(__u8 nh)
{
	return nh == RW_NH_ESP || nh == RW_NH_AH || nh == RW_NH_MOBILITY || nh == RW_NH_HIP ||
	       nh == RW_NH_SHIM6 || nh == RW_NH_EXP1 || nh == RW_NH_EXP2 || nh == RW_NH_NONE;
}

/* IPv6 after the Ethernet header: the fixed header, a bounded walk of the extension headers
 * (hop-by-hop, routing, fragment, destination options), then the upper-layer header. At most
 * RW_IPV6_EXT_MAX extension headers of at most RW_IPV6_EXT_BYTES together; the upper-layer
 * header must follow within the payload length. Returns the drop reason of a chain that is
 * refused, else RW_REASON_ALLOWED with `p` filled.
 */
static __always_inline int rw_parse_ipv6(struct __sk_buff *skb, void *data, void *end,
					 struct rw_pkt *p)
{
	__u32 payload_len, chain = 0, l4_off, left;
	struct ipv6hdr ip6;
	__u8 nh;

	p->is_ipv6 = 1;
	if (RW_LOAD(skb, data, end, ETH_HLEN_, &ip6))
		return RW_REASON_MALFORMED;
	__builtin_memcpy(p->saddr6, &ip6.saddr, sizeof(p->saddr6));
	__builtin_memcpy(p->daddr6, &ip6.daddr, sizeof(p->daddr6));
	p->hop_limit = ip6.hop_limit;
	if (ip6.version != 6)
		return RW_REASON_MALFORMED;
	/* Payload length 0 is a jumbogram's (RFC 2675), its real length in a hop-by-hop option:
	 * never a pod's packet on a veth. A jumbo option with any other payload length is an
	 * error the receiver drops (RFC 2675 3), so the length alone decides.
	 */
	payload_len = bpf_ntohs(ip6.payload_len);
	if (!payload_len)
		return RW_REASON_IPV6_JUMBOGRAM;
	/* Ethernet may pad short frames, so the skb can be longer than the payload, never shorter. */
	if (payload_len > skb->len - ETH_HLEN_ - sizeof(ip6))
		return RW_REASON_MALFORMED;

	/* From here on every load is a helper's: with RW_LOAD's two ways to each header, the
	 * verifier walks every combination of them through the rest of the program (about 7 000
	 * more verified instructions of rw_egress on 6.18). IPv6 with extension headers is rare;
	 * the helper costs one call per header.
	 */
	nh = ip6.nexthdr;
#pragma unroll
	for (int i = 0; i <= RW_IPV6_EXT_MAX; i++) {
		struct rw_ipv6_ext ext;
		__u32 len;

		if (nh != RW_NH_HOPOPTS && nh != RW_NH_ROUTING && nh != RW_NH_FRAGMENT &&
		    nh != RW_NH_DSTOPTS)
			break;
		if (i == RW_IPV6_EXT_MAX)
			return RW_REASON_IPV6_EXT_HEADERS;
		/* Hop-by-hop options come first or not at all (RFC 8200 4.1). */
		if (nh == RW_NH_HOPOPTS && i)
			return RW_REASON_MALFORMED;
		if (chain + sizeof(ext) > payload_len ||
		    bpf_skb_load_bytes(skb, ETH_HLEN_ + sizeof(ip6) + chain, &ext, sizeof(ext)))
			return RW_REASON_MALFORMED;
		/* Any fragment, an atomic one (offset 0, no more fragments) too: the ports of a
		 * later fragment are not in it, and reassembly is the receiver's.
		 */
		if (nh == RW_NH_FRAGMENT)
			return RW_REASON_FRAGMENT;
		/* A routing header with segments left names where the packet goes next, whatever
		 * its destination address says (RFC 8200 4.4; type 0 is RFC 5095's, type 4 SRv6's).
		 */
		if (nh == RW_NH_ROUTING && ext.segments_left)
			return RW_REASON_IPV6_ROUTING;
		len = (ext.hdrlen + 1) * 8;
		if (chain + len > RW_IPV6_EXT_BYTES)
			return RW_REASON_IPV6_EXT_HEADERS;
		if (chain + len > payload_len)
			return RW_REASON_MALFORMED;
		chain += len;
		nh = ext.nexthdr;
	}
	p->nexthdr = nh;
	if (rw_ipv6_opaque(nh))
		return RW_REASON_IPV6_NEXT_HEADER;
	/* The upper layer, as IPv4's protocol: TCP and UDP are judged by the same code. */
	p->proto = nh;

	l4_off = ETH_HLEN_ + sizeof(ip6) + chain;
	p->l4_off = l4_off;
	left = payload_len - chain;
	if (nh == RW_NH_TCP) {
		struct tcphdr tcp;

		if (left < sizeof(tcp) || bpf_skb_load_bytes(skb, l4_off, &tcp, sizeof(tcp)))
			return RW_REASON_MALFORMED;
		p->sport = tcp.source;
		p->dport = tcp.dest;
		p->tcp_flags = ((__u8 *)&tcp)[13];
		if (tcp.doff < 5 || tcp.doff * 4 > left)
			return RW_REASON_MALFORMED;
	} else if (nh == RW_NH_UDP) {
		struct udphdr udp;
		__u32 udp_len;

		if (left < sizeof(udp) || bpf_skb_load_bytes(skb, l4_off, &udp, sizeof(udp)))
			return RW_REASON_MALFORMED;
		p->sport = udp.source;
		p->dport = udp.dest;
		udp_len = bpf_ntohs(udp.len);
		if (udp_len < sizeof(udp) || udp_len > left)
			return RW_REASON_MALFORMED;
	} else if (nh == RW_NH_ICMPV6) {
		/* Type, code and checksum (RFC 4443 2.1). */
		__u8 icmp6[4];

		if (left < sizeof(icmp6) || bpf_skb_load_bytes(skb, l4_off, &icmp6, sizeof(icmp6)))
			return RW_REASON_MALFORMED;
		p->icmp6_type = icmp6[0];
		p->icmp6_len = left;
	}
	/* Other upper layers parse without ports, as for IPv4. */
	return RW_REASON_ALLOWED;
}

/* rw_parse()'s result for an IPv6 frame, which it leaves to rw_parse6() in the IPv6 program. */
#define RW_PARSE_IPV6 0xff

/* How both parses start: a tag the NIC or veth carries out of band (skb->vlan_tci) never
 * reaches the headers (unsupported-l2, its type in p->ethertype); then the Ethernet header,
 * read into *eth. Returns RW_REASON_ALLOWED with the header read, else the reason.
 */
static __always_inline int rw_parse_eth(struct __sk_buff *skb, void *data, void *end,
					struct rw_pkt *p, struct ethhdr *eth)
{
	if (skb->vlan_present) {
		p->ethertype = skb->vlan_proto;
		return RW_REASON_UNSUPPORTED_L2;
	}
	if (RW_LOAD(skb, data, end, 0, eth))
		return RW_REASON_MALFORMED;
	return RW_REASON_ALLOWED;
}

/* Returns RW_REASON_ALLOWED when the packet parsed, else the drop reason, or RW_PARSE_IPV6 for
 * an IPv6 frame (not parsed further). `p` is filled as far as parsing got, so that events of
 * malformed packets still say what could be read.
 */
static __always_inline int rw_parse(struct __sk_buff *skb, struct rw_pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr eth;
	struct iphdr ip;
	__u32 ip_len, tot_len, l4_off;
	int parsed = rw_parse_eth(skb, data, end, p, &eth);

	if (parsed != RW_REASON_ALLOWED)
		return parsed;
	p->ethertype = eth.h_proto;

	if (eth.h_proto == bpf_htons(ETH_P_ARP_)) {
		struct rw_arp_ipv4 arp;

		if (RW_LOAD(skb, data, end, ETH_HLEN_, &arp))
			return RW_REASON_MALFORMED;
		p->is_arp = 1;
		p->saddr = arp.spa;
		p->daddr = arp.tpa;
		if (arp.htype != bpf_htons(1) || arp.ptype != bpf_htons(ETH_P_IP_) ||
		    arp.hlen != 6 || arp.plen != 4)
			return RW_REASON_MALFORMED;
		return RW_REASON_ALLOWED;
	}
	if (eth.h_proto == bpf_htons(ETH_P_IPV6_)) {
		p->is_ipv6 = 1;
		return RW_PARSE_IPV6;
	}
	/* 802.1Q/802.1ad tags in the header, and everything else. */
	if (eth.h_proto != bpf_htons(ETH_P_IP_))
		return RW_REASON_UNSUPPORTED_L2;

	if (RW_LOAD(skb, data, end, ETH_HLEN_, &ip))
		return RW_REASON_MALFORMED;
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	p->proto = ip.protocol;
	if (ip.version != 4 || ip.ihl < 5)
		return RW_REASON_MALFORMED;
	ip_len = ip.ihl * 4;
	tot_len = bpf_ntohs(ip.tot_len);
	/* Ethernet may pad short frames, so the skb can be longer than tot_len, never shorter. */
	if (tot_len < ip_len || tot_len > skb->len - ETH_HLEN_)
		return RW_REASON_MALFORMED;
	if (ip.ihl > 5)
		return RW_REASON_IP_OPTIONS;
	if (ip.frag_off & bpf_htons(IP_MF_ | IP_OFFSET_))
		return RW_REASON_FRAGMENT;

	l4_off = ETH_HLEN_ + sizeof(ip);
	if (ip.protocol == IPPROTO_TCP) {
		struct tcphdr tcp;

		if (tot_len < sizeof(ip) + sizeof(tcp) || RW_LOAD(skb, data, end, l4_off, &tcp))
			return RW_REASON_MALFORMED;
		p->sport = tcp.source;
		p->dport = tcp.dest;
		p->tcp_flags = ((__u8 *)&tcp)[13];
		if (tcp.doff < 5 || tcp.doff * 4 > tot_len - sizeof(ip))
			return RW_REASON_MALFORMED;
	} else if (ip.protocol == IPPROTO_UDP) {
		struct udphdr udp;
		__u32 udp_len;

		if (tot_len < sizeof(ip) + sizeof(udp) || RW_LOAD(skb, data, end, l4_off, &udp))
			return RW_REASON_MALFORMED;
		p->sport = udp.source;
		p->dport = udp.dest;
		udp_len = bpf_ntohs(udp.len);
		if (udp_len < sizeof(udp) || udp_len > tot_len - sizeof(ip))
			return RW_REASON_MALFORMED;
	} else if (ip.protocol == IPPROTO_ICMP) {
		__u8 type;

		if (tot_len > sizeof(ip) && !RW_LOAD(skb, data, end, l4_off, &type) && type < 32)
			p->icmp_info = !!(RW_ICMP_INFO_TYPES & (1u << type));
	}
	/* Other protocols parse without ports and are refused later, after source identity. */
	return RW_REASON_ALLOWED;
}

/* rw_parse() of the IPv6 program: the same out-of-band tag and Ethernet checks, then IPv6 in
 * full. Any other ethertype (the skb changed between the two programs) is unsupported-l2.
 */
static __always_inline int rw_parse6(struct __sk_buff *skb, struct rw_pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr eth;
	int parsed;

	p->is_ipv6 = 1;
	parsed = rw_parse_eth(skb, data, end, p, &eth);
	if (parsed != RW_REASON_ALLOWED)
		return parsed;
	p->ethertype = eth.h_proto;
	if (eth.h_proto != bpf_htons(ETH_P_IPV6_))
		return RW_REASON_UNSUPPORTED_L2;
	return rw_parse_ipv6(skb, data, end, p);
}

static __always_inline int rw_tcp_is_syn(const struct rw_pkt *p)
{
	return p->proto == IPPROTO_TCP &&
	       (p->tcp_flags & (TCP_FLAG_SYN_ | TCP_FLAG_ACK_)) == TCP_FLAG_SYN_;
}

#endif /* RUNWALL_BPF_PARSE_H */
