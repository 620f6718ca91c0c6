// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ipaddr.c: addresses of either family and their text (ipaddr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ipaddr.h"

#define ETH_P_IPV6_BE htons(0x86dd)

struct rw_ip rw_ip4(__be32 addr)
{
	struct rw_ip ip = {.family = AF_INET};

	ip.a[0] = addr;
	return ip;
}

struct rw_ip rw_ip6(const __be32 addr[4])
{
	struct rw_ip ip = {.family = AF_INET6};

	memcpy(ip.a, addr, sizeof(ip.a));
	return ip;
}

bool rw_ip_eq(const struct rw_ip *x, const struct rw_ip *y)
{
	return x->family == y->family && !memcmp(x->a, y->a, sizeof(x->a));
}

const char *rw_ip_str(const struct rw_ip *ip, char *buf, size_t len)
{
	if ((ip->family != AF_INET && ip->family != AF_INET6) ||
	    !inet_ntop(ip->family, ip->a, buf, (socklen_t)len))
		snprintf(buf, len, "-");
	return buf;
}

const char *rw_ip_port_str(const struct rw_ip *ip, unsigned int port, char *buf, size_t len)
{
	char a[RW_IP_STRLEN];

	rw_ip_str(ip, a, sizeof(a));
	if (ip->family == AF_INET6)
		snprintf(buf, len, "[%s]:%u", a, port);
	else
		snprintf(buf, len, "%s:%u", a, port);
	return buf;
}

int rw_ip_parse(const char *s, struct rw_ip *ip)
{
	memset(ip, 0, sizeof(*ip));
	if (inet_pton(AF_INET, s, ip->a) == 1) {
		ip->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, ip->a) == 1) {
		ip->family = AF_INET6;
		return 0;
	}
	memset(ip, 0, sizeof(*ip));
	return -EINVAL;
}

/* Decimal 1..65535, nothing else. */
static int port_parse(const char *s, __u16 *port)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return -ERANGE;
	}
	if (!v)
		return -ERANGE;
	*port = (__u16)v;
	return 0;
}

int rw_ip_port_parse(const char *s, struct rw_ip *ip, __u16 *port)
{
	char host[RW_IP_STRLEN];
	const char *end, *colon;
	size_t hl;

	*port = 0;
	memset(ip, 0, sizeof(*ip));
	if (s[0] == '[') {
		/* "[v6]" or "[v6]:port": the brackets are IPv6's only. */
		end = strchr(s, ']');
		if (!end || (end[1] && end[1] != ':'))
			return -EINVAL;
		hl = (size_t)(end - s - 1);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if (inet_pton(AF_INET6, host, ip->a) != 1)
			return -EINVAL;
		ip->family = AF_INET6;
		return end[1] ? port_parse(end + 2, port) : 0;
	}
	colon = strchr(s, ':');
	if (colon && strchr(colon + 1, ':')) {
		/* Two colons or more: a bare IPv6 address, which a port cannot follow. */
		return rw_ip_parse(s, ip) || ip->family != AF_INET6 ? -EINVAL : 0;
	}
	hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (inet_pton(AF_INET, host, ip->a) != 1)
		return -EINVAL;
	ip->family = AF_INET;
	return colon ? port_parse(colon + 1, port) : 0;
}

bool rw_event_is_ipv6(const struct rw_event *ev)
{
	return ev->ethertype == ETH_P_IPV6_BE;
}

struct rw_ip rw_event_src(const struct rw_event *ev)
{
	return rw_event_is_ipv6(ev) ? rw_ip6(ev->saddr6) : rw_ip4(ev->saddr);
}

struct rw_ip rw_event_dst(const struct rw_event *ev)
{
	return rw_event_is_ipv6(ev) ? rw_ip6(ev->daddr6) : rw_ip4(ev->daddr);
}

struct rw_ip rw_event_pod_ip(const struct rw_event *ev)
{
	return ev->dir == RW_DIR_EGRESS ? rw_event_src(ev) : rw_event_dst(ev);
}

struct rw_ip rw_event_peer_ip(const struct rw_event *ev)
{
	return ev->dir == RW_DIR_EGRESS ? rw_event_dst(ev) : rw_event_src(ev);
}

bool rw_event_at(const struct rw_event *ev, struct rw_ip at, const struct rw_ip *ip, __u16 dport)
{
	return rw_ip_eq(&at, ip) && (!dport || ntohs(ev->dport) == dport);
}

void rw_event_set_addrs(struct rw_event *ev, const struct rw_ip *src, const struct rw_ip *dst)
{
	memset(ev->saddr6, 0, sizeof(ev->saddr6));
	memset(ev->daddr6, 0, sizeof(ev->daddr6));
	if (src->family == AF_INET6 || dst->family == AF_INET6) {
		memcpy(ev->saddr6, src->a, sizeof(ev->saddr6));
		memcpy(ev->daddr6, dst->a, sizeof(ev->daddr6));
		ev->ethertype = ETH_P_IPV6_BE;
		return;
	}
	ev->saddr = src->a[0];
	ev->daddr = dst->a[0];
}
