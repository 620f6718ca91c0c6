/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* ranges.h: the addresses compiled into the programs, not loaded from a map, so that no
 * snapshot can forget them: the metadata addresses and the special ranges of both families
 * (runwall.h's tables). No map: the bench (tests/bench/lookups.bpf.c) times these very compares.
 *
 * API
 *   offers: rw_is_metadata(), rw_is_special(), rw_is_metadata6(), rw_is_special6()
 *   needs:  runwall.h
 */
#ifndef RUNWALL_BPF_RANGES_H
#define RUNWALL_BPF_RANGES_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"

/* Whether addr is a metadata address (RW_METADATA_ADDRS). */
static __always_inline int rw_is_metadata(__be32 addr)
{
	__u32 a = bpf_ntohl(addr);

#define RW_IS_METADATA(host, str) \
	if (a == (host))          \
		return 1;
	RW_METADATA_ADDRS(RW_IS_METADATA)
#undef RW_IS_METADATA
	return 0;
}

/* Whether addr is in a special range (RW_SPECIAL_RANGES): one mask and compare each. */
static __always_inline int rw_is_special(__be32 addr)
{
	__u32 a = bpf_ntohl(addr);

#define RW_IS_SPECIAL(net, len, str, label)                        \
	if ((a & (__u32)(0xffffffffULL << (32 - (len)))) == (net)) \
		return 1;
	RW_SPECIAL_RANGES(RW_IS_SPECIAL)
#undef RW_IS_SPECIAL
	return 0;
}

/* The same of IPv6 (RW_METADATA6_ADDRS, RW_SPECIAL6_RANGES). */
static __always_inline int rw_is_metadata6(const __be32 *addr)
{
	__u32 w0 = bpf_ntohl(addr[0]), w1 = bpf_ntohl(addr[1]), w2 = bpf_ntohl(addr[2]),
	      w3 = bpf_ntohl(addr[3]);

#define RW_IS_METADATA6(h0, h1, h2, h3, str)                      \
	if (w0 == (h0) && w1 == (h1) && w2 == (h2) && w3 == (h3)) \
		return 1;
	RW_METADATA6_ADDRS(RW_IS_METADATA6)
#undef RW_IS_METADATA6
	return 0;
}

/* Word i (host order) of an address against word i of a prefix of `len` bits: the mask of the
 * bits of the prefix that fall in that word. Every argument but w is a constant of the tables,
 * so each test folds to at most four compares.
 */
#define RW_WORD_BITS(len, i) ((len) <= 32 * (i) ? 0 : (len) >= 32 * ((i) + 1) ? 32 : (len)-32 * (i))
#define RW_WORD_MASK(len, i) \
	((__u32)(RW_WORD_BITS(len, i) ? 0xffffffffULL << (32 - RW_WORD_BITS(len, i)) : 0))
#define RW_WORD_IN(w, h, len, i) (((w)&RW_WORD_MASK(len, i)) == ((h)&RW_WORD_MASK(len, i)))

/* The special ranges of IPv6, compiled in as the IPv4 ones are. */
static __always_inline int rw_is_special6(const __be32 *addr)
{
	__u32 w0 = bpf_ntohl(addr[0]), w1 = bpf_ntohl(addr[1]), w2 = bpf_ntohl(addr[2]),
	      w3 = bpf_ntohl(addr[3]);

#define RW_IS_SPECIAL6(h0, h1, h2, h3, len, str, label)                 \
	if (RW_WORD_IN(w0, h0, len, 0) && RW_WORD_IN(w1, h1, len, 1) && \
	    RW_WORD_IN(w2, h2, len, 2) && RW_WORD_IN(w3, h3, len, 3))   \
		return 1;
	RW_SPECIAL6_RANGES(RW_IS_SPECIAL6)
#undef RW_IS_SPECIAL6
	return 0;
}

#endif /* RUNWALL_BPF_RANGES_H */
