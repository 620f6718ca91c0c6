/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* sbuf.h: bounded text output, with the addresses and CIDRs of a policy. */
#ifndef RUNWALL_SBUF_H
#define RUNWALL_SBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <linux/types.h>

#include "policy.h"

/* Appends never overflow: `len` counts what would have been written, the buffer keeps what
 * fits and stays NUL-terminated.
 */
struct rw_sbuf {
	char *buf;
	size_t size;
	size_t len;
};

void rw_sb_init(struct rw_sbuf *sb, char *buf, size_t size);
void rw_sb_vprintf(struct rw_sbuf *sb, const char *fmt, va_list ap);
__attribute__((format(printf, 2, 3))) void rw_sb_printf(struct rw_sbuf *sb, const char *fmt, ...);
void rw_sb_addr(struct rw_sbuf *sb, __be32 addr);
void rw_sb_cidr(struct rw_sbuf *sb, __be32 addr, unsigned int prefixlen);
void rw_sb_addr6(struct rw_sbuf *sb, const __be32 addr[4]);
void rw_sb_cidr6(struct rw_sbuf *sb, const __be32 addr[4], unsigned int prefixlen);
/* A CIDR of either family (IPv4: addr, IPv6: addr6). */
void rw_sb_cidr_of(struct rw_sbuf *sb, const struct rw_policy_cidr *c);

#endif /* RUNWALL_SBUF_H */
