/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* podaddr.c: which IPv4 addresses can be a pod's (podaddr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "podaddr.h"

const char *rw_pod_addr_refusal(__be32 addr)
{
	__u32 h = ntohl(addr);

	if ((h >> 24) == 0)
		return "\"this network\" (0.0.0.0/8)";
	if ((h >> 24) == 127)
		return "a loopback address";
	if ((h >> 16) == 0xa9fe)
		return "a link-local address";
	if ((h >> 28) == 0xe)
		return "a multicast address";
	if (h == 0xffffffff)
		return "the broadcast address";
	if ((h >> 28) == 0xf)
		return "a reserved address (240.0.0.0/4)";
	return NULL;
}

int rw_pod_cidr_check(const char *cidr, __be32 *addr, char *why, size_t whylen)
{
	char buf[INET_ADDRSTRLEN], net[INET_ADDRSTRLEN];
	const char *slash = strchr(cidr, '/'), *len_s, *reason;
	size_t alen = slash ? (size_t)(slash - cidr) : strlen(cidr);
	unsigned int len = 32;
	struct in_addr in;
	__u32 h, mask;

	if (alen >= sizeof(buf))
		return -EAFNOSUPPORT;
	memcpy(buf, cidr, alen);
	buf[alen] = '\0';
	if (inet_pton(AF_INET, buf, &in) != 1)
		return -EAFNOSUPPORT;
	if (slash) {
		len_s = slash + 1;
		/* Decimal 0..32, no sign, no leading zero, nothing after it. */
		if (len_s[0] >= '0' && len_s[0] <= '9' && !len_s[1])
			len = len_s[0] - '0';
		else if (len_s[0] >= '1' && len_s[0] <= '9' && len_s[1] >= '0' && len_s[1] <= '9' &&
			 !len_s[2])
			len = (len_s[0] - '0') * 10 + (len_s[1] - '0');
		else
			len = 33;
		if (len > 32) {
			snprintf(why, whylen, "\"/%.8s%s\" is not a prefix length (0 to 32)", len_s,
				 strlen(len_s) > 8 ? "..." : "");
			return -EINVAL;
		}
	}
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
