// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* lookups.bpf.c: one map lookup per program, for bench_lookups (what each kind of lookup the
 * datapath could use costs on the running kernel). Each program picks its key from a counter in
 * .bss that every run advances, so that the repeats of one BPF_PROG_TEST_RUN walk the table
 * instead of looking up one hot key; lk_pick() is a multiply and two shifts, the same in every
 * program but lk_empty. Every lookup's outcome is known (a hit or a miss); one that differs
 * counts in lk_wrong, which bench_lookups requires to stay 0.
 *
 * The verifier's rewrite of bpf_map_lookup_elem() is what is measured: for ARRAY, ARRAY_OF_MAPS,
 * HASH(_OF_MAPS) and, on 6.18 but not on 6.1, PERCPU_ARRAY it inlines the map's gen_lookup (a
 * bounds check and a load for arrays; a direct call of __htab_map_lookup_elem() for hashes), for
 * LPM_TRIE it calls trie_lookup_elem() (kernel/bpf/verifier.c, do_misc_fixups(); seen with
 * `bpftool prog dump xlated` on both kernels).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "runwall.h"
#include "map_defs.h" /* bpf/: the datapath's own map shapes */
#include "ranges.h"   /* bpf/: rw_is_special(), the datapath's own compares */
#include "lookups.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

__u32 lk_seq;	/* advanced by every run */
__u64 lk_wrong; /* lookups whose outcome was not the expected one */

/* A key index in [0, n), spread over the table by a multiplicative hash of the counter. */
static __always_inline __u32 lk_pick(__u32 n)
{
	__u32 h = lk_seq++ * 2654435761u;

	return (__u32)(((__u64)(h >> 16) * n) >> 16);
}

/* rw_run_revs' shape. */
RW_MAP(lk_array, ARRAY, LK_RUNS, __u32, __u64, LIBBPF_PIN_NONE);

/* The policy's shape: two slots, each an inner map (here an ARRAY of the same size, which the
 * verifier can inline because all inner arrays have the template's max_entries).
 */
RW_MAP_INNER(lk_array_inner, ARRAY, LK_RUNS, 0, sizeof(__u32), sizeof(__u64));
RW_MAP_OUTER(lk_slots_array, ARRAY_OF_MAPS, LK_SLOTS, lk_array_inner, LIBBPF_PIN_NONE);

/* rw_counters' shape. */
RW_MAP(lk_percpu, PERCPU_ARRAY, LK_RUNS, __u32, struct rw_counters, LIBBPF_PIN_NONE);

/* rw_endpoints' shape: a 4-byte key. */
RW_MAP(lk_hash4, HASH, RW_MAX_ENDPOINTS, __u32, struct rw_endpoint, LIBBPF_PIN_NONE);

/* A map of `entries` key_type keys and value_type values, not preallocated: the conntrack
 * tables as rw_endpoint_bind() makes them, and the tries.
 */
#define LK_MAP(name, map_type, key_type, value_type, entries) \
	struct {                                              \
		__uint(type, map_type);                       \
		__uint(max_entries, entries);                 \
		__uint(map_flags, BPF_F_NO_PREALLOC);         \
		__type(key, key_type);                        \
		__type(value, value_type);                    \
	} name SEC(".maps")

/* One sandbox's conntrack table, IPv4 and IPv6. */
LK_MAP(lk_ct_sandbox, BPF_MAP_TYPE_HASH, struct rw_ct_key, struct rw_ct_value, RW_CT_PER_SANDBOX);
LK_MAP(lk_ct6_sandbox, BPF_MAP_TYPE_HASH, struct rw_ct6_key, struct rw_ct_value, RW_CT_PER_SANDBOX);

/* One node table holding every sandbox's flows (the key has the ifindex already). */
LK_MAP(lk_ct_node, BPF_MAP_TYPE_HASH, struct rw_ct_key, struct rw_ct_value, LK_NODE_FLOWS);

/* The same sandbox tables behind runwall's outer map (keyed by ifindex) and behind an array
 * indexed by a slot number that the datapath would hold already (rw_endpoint, say).
 */
RW_MAP_INNER(lk_ct_inner, HASH, RW_CT_PER_SANDBOX, BPF_F_NO_PREALLOC, sizeof(struct rw_ct_key),
	     sizeof(struct rw_ct_value));
RW_MAP_OUTER(lk_ct_by_ifindex, HASH_OF_MAPS, RW_MAX_ENDPOINTS, lk_ct_inner, LIBBPF_PIN_NONE);

RW_MAP_OUTER(lk_ct_by_slot, ARRAY_OF_MAPS, RW_MAX_ENDPOINTS, lk_ct_inner, LIBBPF_PIN_NONE);

/* The slot as the ifindex itself: an outer array indexed by ifindex modulo its size, and beside
 * it the ifindex that owns each slot, checked first, so that two veths whose ifindexes share a
 * slot can never share a table (the agent would refuse to bind the second).
 */
RW_MAP_OUTER(lk_ct_by_ifindex_slot, ARRAY_OF_MAPS, LK_IFINDEX_SLOTS, lk_ct_inner, LIBBPF_PIN_NONE);

RW_MAP(lk_slot_owner, ARRAY, LK_IFINDEX_SLOTS, __u32, __u32, LIBBPF_PIN_NONE);

/* Allow tries of 10, 100, 1 000, 10 000 and 100 000 prefixes (lk_allow_prefix()), IPv4 and IPv6 keys. */
#define LK_TRIE(name, key_type) \
	LK_MAP(name, BPF_MAP_TYPE_LPM_TRIE, key_type, struct rw_rule, LK_PREFIXES_MAX);
LK_TRIE(lk_trie4_10, struct rw_allow_lpm_key)
LK_TRIE(lk_trie4_100, struct rw_allow_lpm_key)
LK_TRIE(lk_trie4_1k, struct rw_allow_lpm_key)
LK_TRIE(lk_trie4_10k, struct rw_allow_lpm_key)
LK_TRIE(lk_trie4_100k, struct rw_allow_lpm_key)
LK_TRIE(lk_trie6_10, struct rw_allow6_lpm_key)
LK_TRIE(lk_trie6_100, struct rw_allow6_lpm_key)
LK_TRIE(lk_trie6_1k, struct rw_allow6_lpm_key)
LK_TRIE(lk_trie6_10k, struct rw_allow6_lpm_key)
LK_TRIE(lk_trie6_100k, struct rw_allow6_lpm_key)

/* The node's special ranges (RW_SPECIAL_RANGES) as a trie, for the compares' comparison. */
LK_MAP(lk_special, BPF_MAP_TYPE_LPM_TRIE, struct rw_cidr_lpm_key, __u32, 64);

#define LK_EXPECT(found, want)           \
	do {                             \
		if (!(found) != !(want)) \
			lk_wrong++;      \
	} while (0)

SEC("tc")
int lk_empty(struct __sk_buff *skb)
{
	return 0;
}

/* The key arithmetic alone, which every program below but lk_empty also does. */
SEC("tc")
int lk_pick_only(struct __sk_buff *skb)
{
	return lk_pick(LK_RUNS) > LK_RUNS;
}

SEC("tc")
int lk_array_lookup(struct __sk_buff *skb)
{
	__u32 i = lk_pick(LK_RUNS);

	LK_EXPECT(bpf_map_lookup_elem(&lk_array, &i), 1);
	return 0;
}

SEC("tc")
int lk_slots_array_lookup(struct __sk_buff *skb)
{
	__u32 i = lk_pick(LK_RUNS), slot = i & 1;
	void *inner = bpf_map_lookup_elem(&lk_slots_array, &slot);

	LK_EXPECT(inner && bpf_map_lookup_elem(inner, &i), 1);
	return 0;
}

/* Looked up and one counter added to, as rw_count() does. */
SEC("tc")
int lk_percpu_count(struct __sk_buff *skb)
{
	__u32 i = lk_pick(LK_RUNS);
	struct rw_counters *c = bpf_map_lookup_elem(&lk_percpu, &i);

	LK_EXPECT(c, 1);
	if (c)
		c->packets[0][0]++;
	return 0;
}

SEC("tc")
int lk_hash4_lookup(struct __sk_buff *skb)
{
	__u32 ifindex = LK_IFINDEX0 + lk_pick(LK_ENDPOINTS);

	LK_EXPECT(bpf_map_lookup_elem(&lk_hash4, &ifindex), 1);
	return 0;
}

/* A flow of sandbox 0's table `table`, its key of key_type made by make_key(). */
#define LK_SANDBOX_LOOKUP(table, key_type, make_key)           \
	SEC("tc")                                              \
	int table##_lookup(struct __sk_buff *skb)              \
	{                                                      \
		key_type k;                                    \
                                                               \
		make_key(&k, 0, lk_pick(LK_FLOWS));            \
		LK_EXPECT(bpf_map_lookup_elem(&table, &k), 1); \
		return 0;                                      \
	}
LK_SANDBOX_LOOKUP(lk_ct_sandbox, struct rw_ct_key, lk_ct_key)
LK_SANDBOX_LOOKUP(lk_ct6_sandbox, struct rw_ct6_key, lk_ct6_key)

/* Flow f of the node's LK_NODE_FLOWS, or, with `warm`, one of a working set of LK_FLOWS flows
 * spread over every sandbox (LK_FLOWS / LK_SANDBOXES each): the same count of flows as one
 * sandbox's table, so that the difference from it is what the layout costs, not the cache.
 */
static __always_inline void lk_node_flow(__u32 *s, __u32 *f, int warm)
{
	if (warm) {
		__u32 w = lk_pick(LK_FLOWS);

		*s = w % LK_SANDBOXES;
		*f = w / LK_SANDBOXES;
	} else {
		__u32 n = lk_pick(LK_NODE_FLOWS);

		*s = n / LK_FLOWS;
		*f = n % LK_FLOWS;
	}
}

static __always_inline int lk_ct_node_lookup(int warm)
{
	struct rw_ct_key k;
	__u32 s, f;

	lk_node_flow(&s, &f, warm);
	lk_ct_key(&k, s, f);
	LK_EXPECT(bpf_map_lookup_elem(&lk_ct_node, &k), 1);
	return 0;
}

/* runwall's conntrack today: the outer map by the veth's ifindex, then the sandbox's table. */
static __always_inline int lk_ct_by_ifindex_lookup(int warm)
{
	struct rw_ct_key k;
	__u32 s, f, ifindex;
	void *table;

	lk_node_flow(&s, &f, warm);
	ifindex = LK_IFINDEX0 + s;
	table = bpf_map_lookup_elem(&lk_ct_by_ifindex, &ifindex);
	lk_ct_key(&k, s, f);
	LK_EXPECT(table && bpf_map_lookup_elem(table, &k), 1);
	return 0;
}

static __always_inline int lk_ct_by_slot_lookup(int warm)
{
	struct rw_ct_key k;
	void *table;
	__u32 s, f;

	lk_node_flow(&s, &f, warm);
	table = bpf_map_lookup_elem(&lk_ct_by_slot, &s);
	lk_ct_key(&k, s, f);
	LK_EXPECT(table && bpf_map_lookup_elem(table, &k), 1);
	return 0;
}

static __always_inline int lk_ct_by_ifindex_slot_lookup(int warm)
{
	__u32 s, f, ifindex, slot, *owner;
	struct rw_ct_key k;
	void *table = NULL;

	lk_node_flow(&s, &f, warm);
	ifindex = LK_IFINDEX0 + s;
	slot = ifindex % LK_IFINDEX_SLOTS;
	owner = bpf_map_lookup_elem(&lk_slot_owner, &slot);
	if (owner && *owner == ifindex)
		table = bpf_map_lookup_elem(&lk_ct_by_ifindex_slot, &slot);
	lk_ct_key(&k, s, f);
	LK_EXPECT(table && bpf_map_lookup_elem(table, &k), 1);
	return 0;
}

/* A conntrack layout's two programs: a flow of any sandbox of the node (_all), or of the warm
 * few (_warm), as lk_node_flow() picks them.
 */
#define LK_CT_PROGS(layout)                      \
	SEC("tc")                                \
	int layout##_all(struct __sk_buff *skb)  \
	{                                        \
		return layout##_lookup(0);       \
	}                                        \
	SEC("tc")                                \
	int layout##_warm(struct __sk_buff *skb) \
	{                                        \
		return layout##_lookup(1);       \
	}
LK_CT_PROGS(lk_ct_by_ifindex_slot)
LK_CT_PROGS(lk_ct_node)
LK_CT_PROGS(lk_ct_by_ifindex)
LK_CT_PROGS(lk_ct_by_slot)

#define LK_TRIE_PROG(trie, n, key_type, make, hit)                       \
	SEC("tc")                                                        \
	int trie##_##hit(struct __sk_buff *skb)                          \
	{                                                                \
		key_type k;                                              \
                                                                         \
		make(&k, lk_pick(n), LK_HIT_##hit);                      \
		LK_EXPECT(bpf_map_lookup_elem(&trie, &k), LK_HIT_##hit); \
		return 0;                                                \
	}
#define LK_HIT_hit  1
#define LK_HIT_miss 0
LK_TRIE_PROG(lk_trie4_10, 10, struct rw_allow_lpm_key, lk_allow_lookup, hit)
LK_TRIE_PROG(lk_trie4_10, 10, struct rw_allow_lpm_key, lk_allow_lookup, miss)
LK_TRIE_PROG(lk_trie4_100, 100, struct rw_allow_lpm_key, lk_allow_lookup, hit)
LK_TRIE_PROG(lk_trie4_100, 100, struct rw_allow_lpm_key, lk_allow_lookup, miss)
LK_TRIE_PROG(lk_trie4_1k, 1000, struct rw_allow_lpm_key, lk_allow_lookup, hit)
LK_TRIE_PROG(lk_trie4_1k, 1000, struct rw_allow_lpm_key, lk_allow_lookup, miss)
LK_TRIE_PROG(lk_trie4_10k, 10000, struct rw_allow_lpm_key, lk_allow_lookup, hit)
LK_TRIE_PROG(lk_trie4_10k, 10000, struct rw_allow_lpm_key, lk_allow_lookup, miss)
LK_TRIE_PROG(lk_trie4_100k, 100000, struct rw_allow_lpm_key, lk_allow_lookup, hit)
LK_TRIE_PROG(lk_trie4_100k, 100000, struct rw_allow_lpm_key, lk_allow_lookup, miss)
LK_TRIE_PROG(lk_trie6_10, 10, struct rw_allow6_lpm_key, lk_allow6_lookup, hit)
LK_TRIE_PROG(lk_trie6_10, 10, struct rw_allow6_lpm_key, lk_allow6_lookup, miss)
LK_TRIE_PROG(lk_trie6_100, 100, struct rw_allow6_lpm_key, lk_allow6_lookup, hit)
LK_TRIE_PROG(lk_trie6_100, 100, struct rw_allow6_lpm_key, lk_allow6_lookup, miss)
LK_TRIE_PROG(lk_trie6_1k, 1000, struct rw_allow6_lpm_key, lk_allow6_lookup, hit)
LK_TRIE_PROG(lk_trie6_1k, 1000, struct rw_allow6_lpm_key, lk_allow6_lookup, miss)
LK_TRIE_PROG(lk_trie6_10k, 10000, struct rw_allow6_lpm_key, lk_allow6_lookup, hit)
LK_TRIE_PROG(lk_trie6_10k, 10000, struct rw_allow6_lpm_key, lk_allow6_lookup, miss)
LK_TRIE_PROG(lk_trie6_100k, 100000, struct rw_allow6_lpm_key, lk_allow6_lookup, hit)
LK_TRIE_PROG(lk_trie6_100k, 100000, struct rw_allow6_lpm_key, lk_allow6_lookup, miss)

/* The 100 000-prefix tries again, every lookup in one run's part of them (its 100 prefixes): what
 * one sandbox's packets meet, however many runs the node has.
 */
#define LK_RUN_PROG(trie, key_type, make, hit)                           \
	SEC("tc")                                                        \
	int trie##_one_run_##hit(struct __sk_buff *skb)                  \
	{                                                                \
		key_type k;                                              \
                                                                         \
		make(&k, 50000 + lk_pick(100), LK_HIT_##hit);            \
		LK_EXPECT(bpf_map_lookup_elem(&trie, &k), LK_HIT_##hit); \
		return 0;                                                \
	}
LK_RUN_PROG(lk_trie4_100k, struct rw_allow_lpm_key, lk_allow_lookup, hit)
LK_RUN_PROG(lk_trie4_100k, struct rw_allow_lpm_key, lk_allow_lookup, miss)
LK_RUN_PROG(lk_trie6_100k, struct rw_allow6_lpm_key, lk_allow6_lookup, hit)
LK_RUN_PROG(lk_trie6_100k, struct rw_allow6_lpm_key, lk_allow6_lookup, miss)

/* A destination drawn from the whole address space (about 1 in 8 is special: 224/3 alone). */
static __always_inline __be32 lk_any_addr(void)
{
	return lk_seq++ * 2654435761u;
}

SEC("tc")
int lk_special_compares(struct __sk_buff *skb)
{
	return rw_is_special(lk_any_addr());
}

SEC("tc")
int lk_special_trie(struct __sk_buff *skb)
{
	struct rw_cidr_lpm_key k = {.prefixlen = 32, .addr = lk_any_addr()};

	return bpf_map_lookup_elem(&lk_special, &k) != NULL;
}

/* Not timed: the trie and the compares agree on every address drawn. */
SEC("tc")
int lk_special_agree(struct __sk_buff *skb)
{
	struct rw_cidr_lpm_key k = {.prefixlen = 32, .addr = lk_any_addr()};

	LK_EXPECT(bpf_map_lookup_elem(&lk_special, &k), rw_is_special(k.addr));
	return 0;
}
