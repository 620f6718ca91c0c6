/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* parse.h: packet parsing into struct rw_pkt. Anything that does not parse is a drop reason. */
#ifndef RUNWALL_BPF_PARSE_H
#define RUNWALL_BPF_PARSE_H

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

struct rw_pkt {
	__be32 saddr; /* IPv4 source, or ARP sender */
	__be32 daddr; /* IPv4 destination, or ARP target */
	__be16 sport;
	__be16 dport;
	__u8 proto; /* IPPROTO_*, 0 for ARP */
	__u8 tcp_flags;
	__u8 is_arp;
	__u8 icmp_info;	  /* ICMP whose type is a query or its reply (answer.h), not an error */
	__be16 ethertype; /* the frame's, or the out-of-band tag's protocol */
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

/* Returns RW_REASON_ALLOWED when the packet parsed, else the drop reason. `p` is filled as far
 * as parsing got, so that events of malformed packets still say what could be read.
 */
static __always_inline int rw_parse(struct __sk_buff *skb, struct rw_pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr eth;
	struct iphdr ip;
	__u32 ip_len, tot_len, l4_off;

	/* A tag the NIC or veth carries out of band (skb->vlan_tci) never reaches the headers. */
	if (skb->vlan_present) {
		p->ethertype = skb->vlan_proto;
		return RW_REASON_UNSUPPORTED_L2;
	}
	if (RW_LOAD(skb, data, end, 0, &eth))
		return RW_REASON_MALFORMED;
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
	/* IPv6, 802.1Q/802.1ad tags in the header, and everything else. */
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

static __always_inline int rw_tcp_is_syn(const struct rw_pkt *p)
{
	return p->proto == IPPROTO_TCP &&
	       (p->tcp_flags & (TCP_FLAG_SYN_ | TCP_FLAG_ACK_)) == TCP_FLAG_SYN_;
}

#endif /* RUNWALL_BPF_PARSE_H */
