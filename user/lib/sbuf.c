// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* sbuf.c: bounded text output: the policy's error messages and its diff are built with it. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>

#include "sbuf.h"
void rw_sb_init(struct rw_sbuf *sb, char *buf, size_t size)
{
	sb->buf = buf;
	sb->size = buf ? size : 0;
	sb->len = 0;
	if (sb->size)
		buf[0] = '\0';
}

void rw_sb_vprintf(struct rw_sbuf *sb, const char *fmt, va_list ap)
{
	size_t room = sb->len < sb->size ? sb->size - sb->len : 0;
	int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, ap);

	if (n > 0)
		sb->len += n;
}

__attribute__((format(printf, 2, 3))) void rw_sb_printf(struct rw_sbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rw_sb_vprintf(sb, fmt, ap);
	va_end(ap);
}

void rw_sb_addr(struct rw_sbuf *sb, __be32 addr)
{
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &addr, s, sizeof(s));
	rw_sb_printf(sb, "%s", s);
}

void rw_sb_cidr(struct rw_sbuf *sb, __be32 addr, unsigned int prefixlen)
{
	rw_sb_addr(sb, addr);
	rw_sb_printf(sb, "/%u", prefixlen);
}

void rw_sb_addr6(struct rw_sbuf *sb, const __be32 addr[4])
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, addr, s, sizeof(s));
	rw_sb_printf(sb, "%s", s);
}

void rw_sb_cidr6(struct rw_sbuf *sb, const __be32 addr[4], unsigned int prefixlen)
{
	rw_sb_addr6(sb, addr);
	rw_sb_printf(sb, "/%u", prefixlen);
}

/* A CIDR of either family (IPv4: addr, IPv6: addr6). */
void rw_sb_cidr_of(struct rw_sbuf *sb, const struct rw_policy_cidr *c)
{
	if (c->family == AF_INET6)
		rw_sb_cidr6(sb, c->addr6, c->prefixlen);
	else
		rw_sb_cidr(sb, c->addr, c->prefixlen);
}
