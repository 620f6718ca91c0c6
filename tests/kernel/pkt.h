/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* pkt.h: hand-built packets for the verdict table: Ethernet, IPv4 or IPv6 with extension
 * headers, TCP/UDP/ICMPv6, ARP, with knobs for every way a header can be wrong.
 */
#ifndef RUNWALL_TEST_PKT_H
#define RUNWALL_TEST_PKT_H

#include <stdint.h>
#include <stddef.h>
#include <linux/types.h>

#define PKT_MAX	    512
#define PKT_EXT_MAX 8 /* IPv6 extension headers one packet may be built with */

/* Knobs: zero means "a normal packet". */
struct pkt_spec {
	const char *src; /* dotted quad */
	const char *dst;
	__u8 proto; /* IPPROTO_TCP, IPPROTO_UDP, or anything else */
	__u16 sport, dport;
	__u8 tcp_flags;	   /* default SYN for TCP */
	__u16 ethertype;   /* default 0x0800 */
	int vlan;	   /* insert an 802.1Q tag (VID 10) before the ethertype */
	int arp;	   /* build an ARP request instead (src = sender, dst = target) */
	__u8 arp_hlen;	   /* default 6 */
	__u8 ihl;	   /* default 5; > 5 adds a loose source route option */
	int ip_version;	   /* default 4 */
	__u16 frag;	   /* frag_off field, host order (IP_MF 0x2000 | offset) */
	int tot_len_delta; /* added to the right tot_len */
	__u8 tcp_doff;	   /* default 5 */
	size_t payload;	   /* L4 payload bytes */
	int truncate;	   /* drop this many bytes from the end of the frame */
	int udp_len_delta;
	__u32 tcp_ack; /* the acknowledgment number (default 0); the sequence number is 0x01020000 */
	/* IPv6 (src and dst are then IPv6 addresses): ethertype 0x86dd, version 6 unless
	 * ip_version says otherwise, tot_len_delta added to the payload length. proto is the
	 * upper layer after the extension headers: for 58 (ICMPv6) a 4-byte header of type
	 * icmp6_type and 4 more bytes, and `payload` after that.
	 */
	int ipv6;
	int n_ext;		   /* extension headers, in this order: */
	__u8 ext[PKT_EXT_MAX];	   /* each one's type (0, 43, 44, 60, or any next header) */
	__u8 ext_len[PKT_EXT_MAX]; /* its Hdr Ext Len: (n + 1) * 8 bytes, padded with PadN */
	__u8 rh_type;		   /* a routing header's type */
	__u8 segments_left;	   /* a routing header's segments left */
	__u16 frag6;		   /* a fragment header's offset << 3 | M, host order */
	int jumbo; /* payload length 0; a first hop-by-hop header gets a jumbo option */
	__u8 icmp6_type;
};

/* Builds the frame into buf; returns its length. */
size_t pkt_build(const struct pkt_spec *s, __u8 *buf);

/* RFC 1071: `sum` plus the one's complement sum of 16-bit words, an odd byte padded with zero,
 * folded to 16 bits. A header whose checksum is right sums to 0xffff; its checksum field is the
 * complement of the sum over the header with the field zero.
 */
__u16 pkt_csum_sum(const __u8 *p, size_t len, __u32 sum);

#endif /* RUNWALL_TEST_PKT_H */
