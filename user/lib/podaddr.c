/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* podaddr.c: which IPv4 and IPv6 addresses can be a pod's (podaddr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "podaddr.h"
#include "runwall.h"

const char *rw_pod_addr_refusal(__be32 addr)
{
	__u32 h = ntohl(addr);

	if ((h >> 24) == 0)
		return "\"this network\" (0.0.0.0/8)";
	if ((h >> 24) == 127)
		return "a loopback address";
	/* On an IPv6 EKS node the VPC CNI gives each pod a node-local IPv4 address from
	 * 169.254.172.0/22 (its egress-cni plugin), which the node SNATs: a source the pod may use.
	 * Nothing else of link-local is a pod's.
	 */
	if ((h >> 16) == 0xa9fe && (h >> 10) != (0xa9feac00u >> 10))
		return "a link-local address";
	if ((h >> 28) == 0xe)
		return "a multicast address";
	if (h == 0xffffffff)
		return "the broadcast address";
	if ((h >> 28) == 0xf)
		return "a reserved address (240.0.0.0/4)";
	return NULL;
}

/* Decimal 0..max, no sign, no leading zero, nothing after it; max + 1 when it is not. */
static unsigned int prefix_len(const char *s, unsigned int max)
{
	unsigned int v = 0;
	size_t n = strlen(s);

	if (!n || n > 3 || (n > 1 && s[0] == '0'))
		return max + 1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return max + 1;
		v = v * 10 + (unsigned int)(s[i] - '0');
	}
	return v > max ? max + 1 : v;
}

/* "ADDR[/LEN]": ADDR in family's form (struct in_addr or in6_addr), and LEN (the family's
 * whole length when there is none). -EAFNOSUPPORT when ADDR is not of the family, -EINVAL
 * (why says) when LEN is not a prefix length.
 */
static int cidr_split(int family, const char *cidr, void *addr, unsigned int *len, char *why,
		      size_t whylen)
{
	unsigned int max = family == AF_INET ? 32 : 128;
	const char *slash = strchr(cidr, '/');
	size_t alen = slash ? (size_t)(slash - cidr) : strlen(cidr);
	char buf[INET6_ADDRSTRLEN];

	if (alen >= sizeof(buf))
		return -EAFNOSUPPORT;
	memcpy(buf, cidr, alen);
	buf[alen] = '\0';
	if (inet_pton(family, buf, addr) != 1)
		return -EAFNOSUPPORT;
	*len = slash ? prefix_len(slash + 1, max) : max;
	if (*len > max) {
		snprintf(why, whylen, "\"/%.8s%s\" is not a prefix length (0 to %u)", slash + 1,
			 strlen(slash + 1) > 8 ? "..." : "", max);
		return -EINVAL;
	}
	return 0;
}

int rw_pod_cidr_check(const char *cidr, __be32 *addr, char *why, size_t whylen)
{
	char net[INET_ADDRSTRLEN];
	const char *reason;
	unsigned int len;
	struct in_addr in;
	__u32 h, mask;
	int err;

	err = cidr_split(AF_INET, cidr, &in, &len, why, whylen);
	if (err)
		return err;
	reason = rw_pod_addr_refusal(in.s_addr);
	if (reason) {
		snprintf(why, whylen, "%s", reason);
		return -EINVAL;
	}
	if (len < 31) {
		h = ntohl(in.s_addr);
		mask = len ? 0xffffffffu << (32 - len) : 0;
		if ((h & ~mask) == 0 || (h & ~mask) == ~mask) {
			struct in_addr n = {.s_addr = htonl(h & mask)};

			inet_ntop(AF_INET, &n, net, sizeof(net));
			snprintf(why, whylen, "the %s address of %s/%u",
				 (h & ~mask) ? "broadcast" : "network", net, len);
			return -EINVAL;
		}
	}
	*addr = in.s_addr;
	return 0;
}

/* Is addr (network byte order) inside net/len (host-order words)? */
static bool rw_addr6_in(const __be32 addr[4], const __u32 net[4], unsigned int len)
{
	for (unsigned int w = 0; w < 4 && len; w++) {
		unsigned int bits = len < 32 ? len : 32;
		__u32 mask = bits == 32 ? 0xffffffffu : ~(0xffffffffu >> bits);

		if ((ntohl(addr[w]) & mask) != (net[w] & mask))
			return false;
		len -= bits;
	}
	return true;
}

const char *rw_pod_addr6_refusal(const __be32 addr[4])
{
	__u32 w0 = ntohl(addr[0]);

	if (!addr[0] && !addr[1] && !addr[2] && !addr[3])
		return "the unspecified address (::)";
	if (!addr[0] && !addr[1] && !addr[2] && ntohl(addr[3]) == 1)
		return "the loopback address (::1)";
	if ((w0 >> 22) == (0xfe800000u >> 22))
		return "a link-local address (fe80::/10)";
	if ((w0 >> 24) == 0xff)
		return "a multicast address (ff00::/8)";
	/* Global unicast (2000::/3) and unique local (fc00::/7): what a pod's IPv6 comes from (the
	 * ENI's prefix, a cluster's ULA). The rest of the space is unassigned or special.
	 */
	if ((w0 >> 29) != 1 && (w0 >> 25) != (0xfc000000u >> 25))
		return "not a global unicast (2000::/3) or unique local (fc00::/7) address";
		/* 6to4 and Teredo are global unicast, but an address there is an IPv4 one's tunnel form
	 * (the datapath judges such a destination as IPv4): never a pod's own.
	 */
#define RW_POD_EMBEDDED(a0, a1, a2, a3, len, text, label)             \
	if (rw_addr6_in(addr, (const __u32[4]){a0, a1, a2, a3}, len)) \
		return "an address of an IPv4-embedding form (" label ", " text ")";
	RW_EMBEDDED4_RANGES(RW_POD_EMBEDDED)
#undef RW_POD_EMBEDDED
	return NULL;
}

int rw_pod_cidr6_check(const char *cidr, __be32 addr[4], char *why, size_t whylen)
{
	char net[INET6_ADDRSTRLEN];
	bool host_zero = true;
	const char *reason;
	struct in6_addr in;
	unsigned int len;
	int err;

	err = cidr_split(AF_INET6, cidr, &in, &len, why, whylen);
	if (err)
		return err;
	reason = rw_pod_addr6_refusal((const __be32 *)in.s6_addr);
	if (reason) {
		snprintf(why, whylen, "%s", reason);
		return -EINVAL;
	}
	/* With host bits all zero, the address is the prefix's subnet-router anycast (RFC 4291
	 * 2.6.1): a router's, never a pod's. A /127 (RFC 6164) and a /128 have none.
	 */
	if (len < 127) {
		struct in6_addr n = in;

		for (unsigned int b = len; b < 128; b++)
			if (in.s6_addr[b / 8] & (0x80 >> (b % 8)))
				host_zero = false;
		if (host_zero) {
			for (unsigned int b = len; b < 128; b++)
				n.s6_addr[b / 8] &= (__u8) ~(0x80 >> (b % 8));
			inet_ntop(AF_INET6, &n, net, sizeof(net));
			snprintf(why, whylen, "the subnet-router anycast address of %s/%u", net,
				 len);
			return -EINVAL;
		}
	}
	memcpy(addr, in.s6_addr, 16);
	return 0;
}
