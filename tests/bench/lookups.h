/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* lookups.h: the tables of bench_lookups and the keys in them, shared by the BPF side
 * (lookups.bpf.c, which looks them up) and user space (bench_lookups.c, which fills them), so
 * that both make every key the same way. The keys are runwall's own (include/runwall.h); the
 * sizes are the datapath's where it has one. Include after <linux/types.h> and runwall.h.
 */
#ifndef RUNWALL_BENCH_LOOKUPS_H
#define RUNWALL_BENCH_LOOKUPS_H

#define LK_INLINE static inline __attribute__((always_inline))

/* Byte order: the keys hold network byte order, as the datapath's do; an LPM trie matches from
 * the first byte of its key, so its prefixes are only prefixes that way round.
 */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lookups.h swaps bytes for a little-endian host"
#endif
#define LK_BE32(x) __builtin_bswap32(x)
#define LK_BE16(x) __builtin_bswap16(x)

#define LK_RUNS		 1024 /* ARRAY and PERCPU_ARRAY entries: RW_MAX_RUNS */
#define LK_SLOTS	 2    /* the policy's two slots: RW_SLOTS */
#define LK_ENDPOINTS	 1024 /* bound veths in the 4-byte-key HASH (of RW_MAX_ENDPOINTS) */
#define LK_SANDBOXES	 16   /* conntrack tables in the outer maps */
#define LK_FLOWS	 4096 /* flows in each sandbox's table (of RW_CT_PER_SANDBOX) */
#define LK_NODE_FLOWS	 (LK_SANDBOXES * LK_FLOWS) /* one node table holding all of them */
#define LK_IFINDEX0	 100			   /* sandbox s is veth LK_IFINDEX0 + s */
#define LK_PREFIXES_MAX	 100000
#define LK_IFINDEX_SLOTS 65536 /* the ifindex-indexed outer array: ifindex % this */

/* Flow f of sandbox s, the pod's side, as rw_ct_key_make() makes it. */
LK_INLINE void lk_ct_key(struct rw_ct_key *k, __u32 s, __u32 f)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->ifindex = LK_IFINDEX0 + s;
	k->pod_ip = LK_BE32(0x0a640000 | s);  /* 10.100.0.s */
	k->peer_ip = LK_BE32(0x2c000000 | f); /* 44.0.x.y */
	k->pod_port = LK_BE16((__u16)(10000 + f));
	k->peer_port = LK_BE16(443);
	k->proto = 6;
}

/* The same flow over IPv6: 2001:db8:100::s to 2600::f. */
LK_INLINE void lk_ct6_key(struct rw_ct6_key *k, __u32 s, __u32 f)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->ifindex = LK_IFINDEX0 + s;
	k->pod_ip[0] = LK_BE32(0x20010db8);
	k->pod_ip[1] = LK_BE32(0x01000000);
	k->pod_ip[3] = LK_BE32(s);
	k->peer_ip[0] = LK_BE32(0x26000000);
	k->peer_ip[3] = LK_BE32(f);
	k->pod_port = LK_BE16((__u16)(10000 + f));
	k->peer_port = LK_BE16(443);
	k->proto = 6;
}

/* Prefix i of an allow trie, laid out as a snapshot's CIDR rules are: 100 to a run (scope),
 * TCP 443, each a /24 of its own in 45/8 and up, every tenth a /32 (its .1) instead.
 */
LK_INLINE int lk_prefix_is_host(__u32 i)
{
	return i % 10 == 9;
}

/* What every allow key of either family starts with: zeros, then run 1 + i / 100, TCP 443, and
 * `bits` of destination address.
 */
#define LK_ALLOW_KEY(k, i, bits)                                   \
	do {                                                       \
		__builtin_memset(k, 0, sizeof(*(k)));              \
		(k)->prefixlen = RW_ALLOW_LPM_FIXED_BITS + (bits); \
		(k)->scope = 1 + (i) / 100;                        \
		(k)->dport = LK_BE16(443);                         \
		(k)->proto = 6;                                    \
	} while (0)

LK_INLINE void lk_allow_prefix(struct rw_allow_lpm_key *k, __u32 i)
{
	LK_ALLOW_KEY(k, i, lk_prefix_is_host(i) ? 32 : 24);
	k->daddr = LK_BE32(0x2d000000 + (i << 8) + (lk_prefix_is_host(i) ? 1 : 0));
}

/* What the datapath looks up for a packet of run 1 + i / 100 to port 443: the .1 of prefix i's
 * /24 (a hit, whichever form the prefix has), or an address in 93/8 no prefix covers (a miss in
 * the same run's part of the trie: a refused destination).
 */
LK_INLINE void lk_allow_lookup(struct rw_allow_lpm_key *k, __u32 i, int hit)
{
	LK_ALLOW_KEY(k, i, 32);
	k->daddr = LK_BE32((hit ? 0x2d000000 : 0x5d000000) + (i << 8) + 1);
}

/* The IPv6 trie the same way: prefix i is 2001:db8:0:i::/64, every tenth 2001:db8:0:i::1/128. */
LK_INLINE void lk_allow6_prefix(struct rw_allow6_lpm_key *k, __u32 i)
{
	LK_ALLOW_KEY(k, i, lk_prefix_is_host(i) ? 128 : 64);
	k->daddr[0] = LK_BE32(0x20010db8);
	k->daddr[1] = LK_BE32(i);
	k->daddr[3] = LK_BE32(lk_prefix_is_host(i) ? 1 : 0);
}

/* 2001:db8:0:i::1 (a hit) or 2001:db9:0:i::1 (a miss). */
LK_INLINE void lk_allow6_lookup(struct rw_allow6_lpm_key *k, __u32 i, int hit)
{
	LK_ALLOW_KEY(k, i, 128);
	k->daddr[0] = LK_BE32(hit ? 0x20010db8 : 0x20010db9);
	k->daddr[1] = LK_BE32(i);
	k->daddr[3] = LK_BE32(1);
}

#endif /* RUNWALL_BENCH_LOOKUPS_H */
