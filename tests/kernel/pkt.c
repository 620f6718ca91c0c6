// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* pkt.c: the packet builder of the verdict table. */
#include <arpa/inet.h>
#include <string.h>
#include <netinet/in.h>

#include "pkt.h"

static void put16(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

__u16 pkt_csum_sum(const __u8 *p, size_t len, __u32 sum)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (p[i] << 8) | p[i + 1];
	if (len & 1)
		sum += p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

static __u16 csum(const __u8 *p, size_t len)
{
	return ~pkt_csum_sum(p, len, 0) & 0xffff;
}

/* IPv6 after the Ethernet header at buf + off: the fixed header, s->ext[] in order (every one
 * of them 8 bytes and more as ext_len says, so a header the walk does not know still has room
 * for its first bytes), the upper layer.
 */
/* The L4 header at l4 (TCP, UDP, ICMPv6's type when icmp6, else the ports of whatever header
 * starts with two): returns its length with the payload.
 */
static size_t put_l4(const struct pkt_spec *s, __u8 *l4, int icmp6)
{
	if (s->proto == IPPROTO_TCP) {
		__u8 doff = s->tcp_doff ? s->tcp_doff : 5;

		put16(l4, s->sport);
		put16(l4 + 2, s->dport);
		put16(l4 + 4, 0x0102);
		put16(l4 + 8, s->tcp_ack >> 16);
		put16(l4 + 10, s->tcp_ack & 0xffff);
		l4[12] = doff << 4;
		l4[13] = s->tcp_flags ? s->tcp_flags : 0x02;
		put16(l4 + 14, 65535);
		return doff * 4 + s->payload;
	}
	if (s->proto == IPPROTO_UDP) {
		put16(l4, s->sport);
		put16(l4 + 2, s->dport);
		put16(l4 + 4, (__u16)(8 + s->payload + s->udp_len_delta));
	} else if (icmp6) {
		l4[0] = s->icmp6_type;
	} else {
		put16(l4, s->sport); /* ICMP echo, SCTP common header, ... */
		put16(l4 + 2, s->dport);
	}
	return 8 + s->payload;
}

static size_t build_ipv6(const struct pkt_spec *s, __u8 *buf, size_t off)
{
	size_t ip_off = off, l4_off, l4_len, len;
	struct in6_addr src = {}, dst = {};
	__u8 *nh;

	inet_pton(AF_INET6, s->src, &src);
	inet_pton(AF_INET6, s->dst, &dst);
	buf[ip_off] = (s->ip_version ? s->ip_version : 6) << 4;
	buf[ip_off + 7] = 64; /* hop limit */
	memcpy(buf + ip_off + 8, &src, 16);
	memcpy(buf + ip_off + 24, &dst, 16);
	nh = buf + ip_off + 6;
	off = ip_off + 40;
	for (int i = 0; i < s->n_ext && i < PKT_EXT_MAX; i++) {
		size_t hlen = (s->ext_len[i] + 1) * 8;

		/* The last 64 bytes are the upper layer's. A header longer than the rest can hold:
		 * its first 8 bytes claim the length.
		 */
		if (off + 8 > PKT_MAX - 64)
			break;
		if (off + hlen > PKT_MAX - 64)
			hlen = 8;
		*nh = s->ext[i];
		nh = buf + off;
		buf[off + 1] = s->ext_len[i];
		if (s->ext[i] == 43) {
			buf[off + 2] = s->rh_type;
			buf[off + 3] = s->segments_left;
		} else if (s->ext[i] == 44) {
			buf[off + 1] = 0; /* reserved: a fragment header is 8 bytes */
			hlen = 8;
			put16(buf + off + 2, s->frag6);
			put16(buf + off + 4, 0x1234);
		} else if (s->ext[i] == 0 && i == 0 && s->jumbo) {
			buf[off + 2] = 0xc2; /* Jumbo Payload (RFC 2675) */
			buf[off + 3] = 4;
			put16(buf + off + 6, 70000 & 0xffff);
			buf[off + 5] = 70000 >> 16;
			if (hlen > 8) {
				buf[off + 8] = 1; /* PadN */
				buf[off + 9] = hlen - 10;
			}
		} else {
			buf[off + 2] = 1; /* PadN over the rest */
			buf[off + 3] = hlen - 4;
		}
		off += hlen;
	}
	*nh = s->proto;
	l4_off = off;
	l4_len = put_l4(s, buf + l4_off, s->proto == 58);
	len = l4_off + l4_len;
	if (len > PKT_MAX)
		len = PKT_MAX;
	put16(buf + ip_off + 4, s->jumbo ? 0 : (__u16)(len - ip_off - 40 + s->tot_len_delta));
	return len - s->truncate;
}

size_t pkt_build(const struct pkt_spec *s, __u8 *buf)
{
	static const __u8 pod_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
	static const __u8 gw_mac[6] = {0x02, 0, 0, 0, 0, 0xfe};
	__u8 ihl = s->ihl ? s->ihl : 5;
	size_t off = 0, ip_off, l4_off, l4_len, len;
	struct in_addr src = {}, dst = {};

	memset(buf, 0, PKT_MAX);
	inet_pton(AF_INET, s->src, &src);
	inet_pton(AF_INET, s->dst, &dst);
	memcpy(buf, gw_mac, 6);
	memcpy(buf + 6, pod_mac, 6);
	off = 12;
	if (s->vlan) {
		put16(buf + off, 0x8100);
		put16(buf + off + 2, 10);
		off += 4;
	}
	if (s->arp) {
		put16(buf + off, 0x0806);
		off += 2;
		put16(buf + off, 1);	      /* Ethernet */
		put16(buf + off + 2, 0x0800); /* IPv4 */
		buf[off + 4] = s->arp_hlen ? s->arp_hlen : 6;
		buf[off + 5] = 4;
		put16(buf + off + 6, 1); /* request */
		memcpy(buf + off + 8, pod_mac, 6);
		memcpy(buf + off + 14, &src, 4);
		memcpy(buf + off + 24, &dst, 4);
		len = off + 28;
		return len - s->truncate;
	}
	put16(buf + off, s->ethertype ? s->ethertype : s->ipv6 ? 0x86dd : 0x0800);
	off += 2;
	if (s->ipv6)
		return build_ipv6(s, buf, off);

	ip_off = off;
	l4_off = ip_off + ihl * 4;
	if (ihl < 5)
		l4_off = ip_off + 20; /* keep the bytes where a real header would be */

	buf[ip_off] = ((s->ip_version ? s->ip_version : 4) << 4) | (ihl & 0xf);
	put16(buf + ip_off + 4, 0x1234);
	put16(buf + ip_off + 6, s->frag);
	buf[ip_off + 8] = 64;
	buf[ip_off + 9] = s->proto;
	memcpy(buf + ip_off + 12, &src, 4);
	memcpy(buf + ip_off + 16, &dst, 4);
	if (ihl > 5) {
		/* Loose source and record route (type 131) naming one hop, padded with EOL. */
		__u8 *opt = buf + ip_off + 20;

		opt[0] = 131;
		opt[1] = 7;
		opt[2] = 4;
		memcpy(opt + 3, &dst, 4);
	}
	/* After the option: with ihl 6 its last bytes are where the L4 header begins. */
	l4_len = put_l4(s, buf + l4_off, 0);
	put16(buf + ip_off + 2, (__u16)(l4_off - ip_off + l4_len + s->tot_len_delta));
	put16(buf + ip_off + 10, csum(buf + ip_off, ihl >= 5 ? ihl * 4 : 20));

	len = l4_off + l4_len;
	return len - s->truncate;
}
