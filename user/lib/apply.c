// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* apply.c: a snapshot is written into the idle slot's inner maps by diff, then one flip makes it
 * live and one grace period retires the old slot.
 *
 * Each policy table has two inner maps, one per slot, created once (when the pins are created;
 * adopted from the pins after a restart) and never replaced. The agent remembers what each slot
 * holds (a shadow: per run, its pods and its entries, sorted), so an apply writes only what
 * differs between the idle slot's last snapshot and the next one, with batch operations where
 * the map type has them. A slot whose contents are not known (adopted after a restart, or left
 * half-written by a failed apply) is cleared and rewritten in full.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "apply_revs.h"
#include "grace.h"
#include "bpf_compat.h"
#include "log.h"
#include "pod_lookups.h"
#include "principals.h"
#include "util.h"
#include "veth.h"

#define POLICY_TABLES (RW_M_INBOUND6 - RW_M_PODS + 1)
#define T_PODS	      (RW_M_PODS - RW_M_PODS)
#define T_PODS6	      (RW_M_PODS6 - RW_M_PODS)
#define ENT_KEY_MAX   28 /* sizeof(struct rw_allow6_lpm_key), the largest */

struct inner_spec {
	enum bpf_map_type type;
	const char *name;
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 flags;
};

/* Must match the inner templates in bpf/maps.h: the kernel refuses an inner map of another
 * type, key size, value size or flags (bpf_map_meta_equal()).
 */
static const struct inner_spec inner_specs[POLICY_TABLES] = {
	[RW_M_PODS - RW_M_PODS] = {BPF_MAP_TYPE_HASH, "rw_pods_i", sizeof(__be32),
				   sizeof(struct rw_pod), RW_MAX_PODS, 0},
	[RW_M_ALLOW_EXACT - RW_M_PODS] = {BPF_MAP_TYPE_HASH, "rw_allow_x_i",
					  sizeof(struct rw_allow_key), sizeof(struct rw_rule),
					  RW_MAX_ALLOW_EXACT, 0},
	[RW_M_ALLOW_CIDR - RW_M_PODS] = {BPF_MAP_TYPE_LPM_TRIE, "rw_allow_c_i",
					 sizeof(struct rw_allow_lpm_key), sizeof(struct rw_rule),
					 RW_MAX_ALLOW_CIDR, BPF_F_NO_PREALLOC},
	[RW_M_DENY - RW_M_PODS] = {BPF_MAP_TYPE_LPM_TRIE, "rw_deny_i",
				   sizeof(struct rw_cidr_lpm_key), sizeof(__u32), RW_MAX_DENY,
				   BPF_F_NO_PREALLOC},
	[RW_M_INBOUND - RW_M_PODS] = {BPF_MAP_TYPE_LPM_TRIE, "rw_inbound_i",
				      sizeof(struct rw_inbound_lpm_key), sizeof(struct rw_rule),
				      RW_MAX_INBOUND, BPF_F_NO_PREALLOC},
	[RW_M_PODS6 - RW_M_PODS] = {BPF_MAP_TYPE_HASH, "rw_pods6_i", 4 * sizeof(__be32),
				    sizeof(struct rw_pod), RW_MAX_PODS, 0},
	[RW_M_ALLOW_EXACT6 - RW_M_PODS] = {BPF_MAP_TYPE_HASH, "rw_allow_x6_i",
					   sizeof(struct rw_allow6_key), sizeof(struct rw_rule),
					   RW_MAX_ALLOW_EXACT, 0},
	[RW_M_ALLOW_CIDR6 - RW_M_PODS] = {BPF_MAP_TYPE_LPM_TRIE, "rw_allow_c6_i",
					  sizeof(struct rw_allow6_lpm_key), sizeof(struct rw_rule),
					  RW_MAX_ALLOW_CIDR, BPF_F_NO_PREALLOC},
	[RW_M_DENY6 - RW_M_PODS] = {BPF_MAP_TYPE_LPM_TRIE, "rw_deny6_i",
				    sizeof(struct rw_cidr6_lpm_key), sizeof(__u32), RW_MAX_DENY,
				    BPF_F_NO_PREALLOC},
	[RW_M_INBOUND6 - RW_M_PODS] = {BPF_MAP_TYPE_LPM_TRIE, "rw_inbound6_i",
				       sizeof(struct rw_inbound6_lpm_key), sizeof(struct rw_rule),
				       RW_MAX_INBOUND, BPF_F_NO_PREALLOC},
};

/* One entry of a rule table (every table but the IPv4 pods): value is a rule id (or 1 for
 * deny). Sorted by (table, key); the key is zero-padded to ENT_KEY_MAX bytes. An IPv6 pod is an
 * entry of T_PODS6 too, its key the address and its value (0 here) its group's pod.
 */
struct ent {
	__u8 table;
	__u8 pad[3];
	__u32 val;
	__u8 key[ENT_KEY_MAX];
	__u32 seq; /* order of generation while a group is built, then 0 */
};

/* What one source of entries put into a slot: a run (its pods and its allow rules) or, with id
 * "", the node's services, inbound rules and deny list. Offsets into the shadow's arrays.
 */
struct group {
	char id[RW_RUN_ID_LEN];
	struct rw_pod pod;	/* the value of each of the run's pods, of both families */
	size_t pod_off, n_pods; /* sorted: the IPv4 pods */
	size_t n_pods6;		/* its entries of T_PODS6 */
	size_t ent_off, n_ents; /* sorted by (table, key), no duplicate keys */
};

struct shadow {
	bool known; /* false: the slot holds something we do not know */
	struct group *groups;
	size_t n_groups, cap_groups;
	__be32 *pods;
	size_t n_pods, cap_pods;
	struct ent *ents;
	size_t n_ents, cap_ents;
	__u32 *index; /* open addressing, group index + 1, 0 = free */
	size_t index_mask;
	unsigned int count[POLICY_TABLES];
};

struct rw_apply_cache {
	int fd[RW_SLOTS][POLICY_TABLES]; /* the inner maps, created once */
	struct shadow shadow[RW_SLOTS];
	struct shadow spare;	      /* arrays of a retired shadow, reused by the next one */
	bool no_batch[POLICY_TABLES]; /* the kernel has no batch ops for this type (atomic) */
	long fault_after;	      /* tests: fail after this many writes, -1 never */
	long writes;
	struct rw_grace *grace; /* the grace periods the flips owe (grace.c) */
};

#ifdef RW_TEST_FAULTS
static long fault_after_next = -1;

void rw_apply_inject_fault(long after_writes)
{
	fault_after_next = after_writes;
}

/* The count rw_apply_inject_fault() set for this apply, once. */
static long fault_after_take(void)
{
	long n = fault_after_next;

	fault_after_next = -1;
	return n;
}

/* Whether RUNWALL_APPLY_FAULT=STEP[:REVISION] names this step of this apply. */
static bool fault_named(const char *step, uint64_t revision)
{
	const char *f = getenv("RUNWALL_APPLY_FAULT");
	size_t n = strlen(step);

	return f && !strncmp(f, step, n) &&
	       (!f[n] || (f[n] == ':' && strtoull(f + n + 1, NULL, 10) == revision));
}

/* Test hook (tests/netns/test_faults.sh), in the test build only (build/tests/runwall-faults):
 * RUNWALL_APPLY_FAULT=STEP[:REVISION] aborts the process at a named step of an apply
 * (before-write, half, after-flip), to show that a crash at any step leaves the old or the new
 * snapshot in force, never a mix.
 */
static void fault_point(const char *step, uint64_t revision)
{
	if (fault_named(step, revision))
		abort();
}

/* RUNWALL_APPLY_FAULT=lease-write[:REVISION] makes the write of the snapshot's lease fail (the
 * flip that carries it, which then never reaches the kernel), as a write the kernel refused.
 */
static bool fault_lease_write(uint64_t revision)
{
	return fault_named("lease-write", revision);
}

static bool fault_hook_set(void)
{
	return getenv("RUNWALL_APPLY_FAULT") != NULL;
}
#else
static long fault_after_take(void)
{
	return -1;
}

static void fault_point(const char *step, uint64_t revision)
{
}

static bool fault_lease_write(uint64_t revision)
{
	return false;
}

static bool fault_hook_set(void)
{
	return false;
}
#endif

/* ---- Shadows --------------------------------------------------------------------------- */

static void shadow_reset(struct shadow *s)
{
	free(s->groups);
	free(s->pods);
	free(s->ents);
	free(s->index);
	memset(s, 0, sizeof(*s));
}

/* Empty `s` but keep its arrays, for the next shadow built into it. */
static void shadow_recycle(struct shadow *s)
{
	struct shadow keep = {
		.groups = s->groups,
		.cap_groups = s->cap_groups,
		.pods = s->pods,
		.cap_pods = s->cap_pods,
		.ents = s->ents,
		.cap_ents = s->cap_ents,
	};

	free(s->index);
	*s = keep;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Keyed (rw_hash_key()): run ids are chosen outside the node, and a fixed hash would let them
 * be chosen to share one probe sequence.
 */
static __u64 hash_id(const char *s)
{
	return rw_siphash(rw_hash_key(), s, strlen(s));
}

static int shadow_index(struct shadow *s)
{
	size_t size = 16;

	while (size < s->n_groups * 2)
		size *= 2;
	free(s->index);
	s->index = calloc(size, sizeof(*s->index));
	if (!s->index)
		return -ENOMEM;
	s->index_mask = size - 1;
	for (size_t g = 0; g < s->n_groups; g++) {
		size_t i = hash_id(s->groups[g].id) & s->index_mask;

		while (s->index[i])
			i = (i + 1) & s->index_mask;
		s->index[i] = g + 1;
	}
	return 0;
}

/* The group of run `id` (the node's: ""), or NULL. The index is a cache of the groups, built
 * at the first lookup (most lookups are shadow_find_at()'s, which need none); a shadow is never
 * const where it is made, so building it here is only a cache's write.
 */
static struct group *shadow_find(const struct shadow *s, const char *id)
{
	if (!s->index && s->n_groups && shadow_index((struct shadow *)s)) {
		for (size_t g = 0; g < s->n_groups; g++) /* no memory for an index */
			if (!strcmp(s->groups[g].id, id))
				return &s->groups[g];
		return NULL;
	}
	if (!s->index)
		return NULL;
	for (size_t i = hash_id(id) & s->index_mask; s->index[i]; i = (i + 1) & s->index_mask)
		if (!strcmp(s->groups[s->index[i] - 1].id, id))
			return &s->groups[s->index[i] - 1];
	return NULL;
}

/* shadow_find() where group `at` is the likely one: a shadow's groups are in its snapshot's
 * order (the node's first, then each run), and most applies keep the runs where they were, so a
 * comparison of ids mostly spares the hash.
 */
static struct group *shadow_find_at(const struct shadow *s, const char *id, size_t at)
{
	if (at < s->n_groups && !strcmp(s->groups[at].id, id))
		return &s->groups[at];
	return shadow_find(s, id);
}

static int ent_cmp_key(const struct ent *a, const struct ent *b)
{
	if (a->table != b->table)
		return a->table < b->table ? -1 : 1;
	return memcmp(a->key, b->key, ENT_KEY_MAX);
}

static int ent_qsort_cmp(const void *a, const void *b)
{
	int c = ent_cmp_key(a, b);

	/* Equal keys keep the order they were generated in: the last one wins. */
	if (c)
		return c;
	return ((const struct ent *)a)->seq < ((const struct ent *)b)->seq ? -1 : 1;
}

static int pod_cmp(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

static int add_ent(struct shadow *s, int table, const void *key, size_t klen, __u32 val)
{
	struct ent *e;

	if (grow((void **)&s->ents, &s->cap_ents, s->n_ents + 1, sizeof(*s->ents)))
		return -ENOMEM;
	e = &s->ents[s->n_ents++];
	memset(e, 0, sizeof(*e));
	e->table = table;
	e->val = val;
	e->seq = s->n_ents;
	memcpy(e->key, key, klen);
	return 0;
}

/* add_rule()'s entry for one port of an IPv6 rule. */
static int add_rule6(struct shadow *s, bool inbound, __u32 scope, const struct rw_policy_rule *r,
		     __be16 port, __u8 proto, __u32 rule_id)
{
	if (inbound) {
		struct rw_inbound6_lpm_key k = {
			.prefixlen = RW_INBOUND_LPM_FIXED_BITS + r->prefixlen,
			.dport = port,
			.proto = proto,
		};

		memcpy(k.saddr, r->addr6, sizeof(k.saddr));
		return add_ent(s, RW_M_INBOUND6 - RW_M_PODS, &k, sizeof(k), rule_id);
	}
	if (r->prefixlen == 128) {
		struct rw_allow6_key k = {.scope = scope, .dport = port, .proto = proto};

		memcpy(k.daddr, r->addr6, sizeof(k.daddr));
		return add_ent(s, RW_M_ALLOW_EXACT6 - RW_M_PODS, &k, sizeof(k), rule_id);
	}
	{
		struct rw_allow6_lpm_key k = {
			.prefixlen = RW_ALLOW_LPM_FIXED_BITS + r->prefixlen,
			.scope = scope,
			.dport = port,
			.proto = proto,
		};

		memcpy(k.daddr, r->addr6, sizeof(k.daddr));
		return add_ent(s, RW_M_ALLOW_CIDR6 - RW_M_PODS, &k, sizeof(k), rule_id);
	}
}

/* One entry per protocol and port of a rule. Allow rules: /32 (/128) destinations in the exact
 * hash, wider ones in the LPM trie, under `scope`. Inbound rules (`inbound`): the peer CIDR in
 * the inbound trie. Each family into its own tables.
 */
static int add_rule(struct shadow *s, bool inbound, __u32 scope, const struct rw_policy_rule *r,
		    __u32 rule_id)
{
	const __u16 *ports[2] = {r->tcp, r->udp};
	size_t n[2] = {r->n_tcp, r->n_udp};
	const __u8 protos[2] = {IPPROTO_TCP, IPPROTO_UDP};
	bool ipv6 = rw_policy_rule_is6(r);
	int err;

	for (int p = 0; p < 2; p++) {
		for (size_t i = 0; i < n[p]; i++) {
			__be16 port = htons(ports[p][i]);

			if (ipv6)
				err = add_rule6(s, inbound, scope, r, port, protos[p], rule_id);
			else if (inbound) {
				struct rw_inbound_lpm_key k = {
					.prefixlen = RW_INBOUND_LPM_FIXED_BITS + r->prefixlen,
					.dport = port,
					.proto = protos[p],
					.saddr = r->addr,
				};

				err = add_ent(s, RW_M_INBOUND - RW_M_PODS, &k, sizeof(k), rule_id);
			} else if (r->prefixlen == 32) {
				struct rw_allow_key k = {
					.scope = scope,
					.daddr = r->addr,
					.dport = port,
					.proto = protos[p],
				};

				err = add_ent(s, RW_M_ALLOW_EXACT - RW_M_PODS, &k, sizeof(k),
					      rule_id);
			} else {
				struct rw_allow_lpm_key k = {
					.prefixlen = RW_ALLOW_LPM_FIXED_BITS + r->prefixlen,
					.scope = scope,
					.dport = port,
					.proto = protos[p],
					.daddr = r->addr,
				};

				err = add_ent(s, RW_M_ALLOW_CIDR - RW_M_PODS, &k, sizeof(k),
					      rule_id);
			}
			if (err)
				return err;
		}
	}
	return 0;
}

static bool ents_sorted(const struct ent *e, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (ent_qsort_cmp(&e[i - 1], &e[i]) > 0)
			return false;
	return true;
}

/* Sort a group's entries as qsort() with ent_qsort_cmp() would, with less work in the usual
 * case: rules come in their tables' order interleaved (a run's /32s and CIDRs), often each
 * table already in order. A stable pass by table, then qsort() only for a table out of order.
 */
static void ents_sort(struct ent *e, size_t n)
{
	struct ent stack[256], *tmp;
	size_t start[POLICY_TABLES + 1] = {}, at[POLICY_TABLES];

	if (ents_sorted(e, n))
		return;
	tmp = n <= 256 ? stack : malloc(n * sizeof(*tmp));
	if (!tmp) {
		qsort(e, n, sizeof(*e), ent_qsort_cmp);
		return;
	}
	for (size_t i = 0; i < n; i++)
		start[e[i].table + 1]++;
	for (int t = 0; t < POLICY_TABLES; t++) {
		start[t + 1] += start[t];
		at[t] = start[t];
	}
	for (size_t i = 0; i < n; i++)
		tmp[at[e[i].table]++] = e[i];
	memcpy(e, tmp, n * sizeof(*e));
	if (tmp != stack)
		free(tmp);
	for (int t = 0; t < POLICY_TABLES; t++) {
		size_t m = start[t + 1] - start[t];

		if (m > 1 && !ents_sorted(e + start[t], m))
			qsort(e + start[t], m, sizeof(*e), ent_qsort_cmp);
	}
}

/* Close the group being built: sort its entries and keep the last of equal keys (what writing
 * them one after the other would leave), sort its pods, count.
 */
static void group_close(struct shadow *s, struct group *g)
{
	size_t n = s->n_ents - g->ent_off, out = 0;
	/* A run with no rules (or a shadow with none yet) has no array to point into: ents may be
	 * NULL, and qsort() of NULL is undefined even for 0 elements.
	 */
	struct ent *e = n ? s->ents + g->ent_off : NULL;

	if (n > 1)
		ents_sort(e, n);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n && !ent_cmp_key(&e[i], &e[i + 1]))
			continue;
		e[out] = e[i];
		e[out++].seq = 0;
	}
	s->n_ents = g->ent_off + out;
	g->n_ents = out;
	for (size_t i = 0; i < out; i++)
		s->count[e[i].table]++;
	g->n_pods6 = 0;
	for (size_t i = 0; i < out; i++)
		g->n_pods6 += e[i].table == T_PODS6;
	g->n_pods = s->n_pods - g->pod_off;
	if (g->n_pods > 1)
		qsort(s->pods + g->pod_off, g->n_pods, sizeof(*s->pods), pod_cmp);
	s->count[T_PODS] += g->n_pods;
}

static struct group *group_open(struct shadow *s, const char *id)
{
	struct group *g;

	if (grow((void **)&s->groups, &s->cap_groups, s->n_groups + 1, sizeof(*s->groups)))
		return NULL;
	free(s->index); /* it no longer holds every group: built again when needed */
	s->index = NULL;
	g = &s->groups[s->n_groups++];
	memset(g, 0, sizeof(*g));
	memcpy(g->id, id, strnlen(id, sizeof(g->id) - 1));
	g->pod_off = s->n_pods;
	g->ent_off = s->n_ents;
	return g;
}

/* The same run written the same way, in the same order: the common case. The parser's digests
 * tell without reading either run; a run made by other means is compared in full.
 */
/* memcmp() of two arrays of n bytes, either of which may be NULL when n is 0. */
static bool bytes_equal(const void *a, const void *b, size_t n)
{
	return !n || !memcmp(a, b, n);
}

static bool run_same(const struct rw_policy_run *a, const struct rw_policy_run *b)
{
	if ((a->digest[0] || a->digest[1]) && (b->digest[0] || b->digest[1]))
		return a->digest[0] == b->digest[0] && a->digest[1] == b->digest[1];
	if (a->n_pods != b->n_pods || a->n_pods6 != b->n_pods6 || a->egress != b->egress ||
	    a->refusal != b->refusal || a->n_allow != b->n_allow ||
	    !bytes_equal(a->pods, b->pods, a->n_pods * sizeof(*a->pods)) ||
	    !bytes_equal(a->pods6, b->pods6, a->n_pods6 * sizeof(*a->pods6)))
		return false;
	for (size_t i = 0; i < a->n_allow; i++) {
		const struct rw_policy_rule *x = &a->allow[i], *y = &b->allow[i];

		if (!rw_policy_rule_same_addr(x, y) || x->n_tcp != y->n_tcp ||
		    x->n_udp != y->n_udp ||
		    !bytes_equal(x->tcp, y->tcp, x->n_tcp * sizeof(*x->tcp)) ||
		    !bytes_equal(x->udp, y->udp, x->n_udp * sizeof(*x->udp)) ||
		    rw_policy_from_cmp(x->from, y->from))
			return false;
	}
	return true;
}

/* The shadow of a snapshot: what the slot must hold for `p`, built into `s`, empty (zeroed,
 * or recycled with its arrays).
 */
static int shadow_build(struct shadow *s, const struct rw_policy *p, const struct run_slot *slots,
			const struct shadow *live)
{
	struct group *g;
	__u16 node_skip;
	int err = -ENOMEM;

	g = group_open(s, "");
	if (!g)
		goto fail;
	for (size_t i = 0; i < p->n_services; i++)
		if ((err = add_rule(s, false, 0, &p->services[i],
				    RW_SERVICE_RULE_ID(i) |
					    (p->services[i].from ? RW_RULE_FROM : 0))))
			goto fail;
	for (size_t i = 0; i < p->n_inbound; i++)
		if ((err = add_rule(s, true, 0, &p->inbound[i],
				    RW_RULE_ID(RW_RULE_KIND_INBOUND, i, 0))))
			goto fail;
	for (size_t i = 0; i < p->n_deny; i++) {
		struct rw_cidr_lpm_key k = {.prefixlen = p->deny[i].prefixlen,
					    .addr = p->deny[i].addr};
		struct rw_cidr6_lpm_key k6 = {.prefixlen = p->deny[i].prefixlen};

		memcpy(k6.addr, p->deny[i].addr6, sizeof(k6.addr));
		if (p->deny[i].family == AF_INET6)
			err = add_ent(s, RW_M_DENY6 - RW_M_PODS, &k6, sizeof(k6), 1);
		else
			err = add_ent(s, RW_M_DENY - RW_M_PODS, &k, sizeof(k), 1);
		if (err)
			goto fail;
	}
	if (p->nat64.family == AF_INET6) {
		/* The declared NAT64 prefix (RW_SCOPE_NAT64): in the slot, so it flips with it. */
		struct rw_allow6_lpm_key k = {
			.prefixlen = RW_ALLOW_LPM_FIXED_BITS + p->nat64.prefixlen,
			.scope = RW_SCOPE_NAT64,
		};

		memcpy(k.daddr, p->nat64.addr6, sizeof(k.daddr));
		if ((err = add_ent(s, RW_M_ALLOW_CIDR6 - RW_M_PODS, &k, sizeof(k), 0)))
			goto fail;
	}
	group_close(s, g);

	node_skip = rw_node_lookups(p);
	for (size_t r = 0; r < p->n_runs; r++) {
		const struct rw_policy_run *run = &p->runs[r];
		/* The live slot's group of a run that did not change: its rules' lookup bits, its
		 * id as written, and (when its pod value is ours) its sorted entries are ours.
		 */
		const struct group *lg = slots[r].same && live && live->known
						 ? shadow_find_at(live, run->id, r + 1)
						 : NULL;

		err = -ENOMEM;
		g = group_open(s, run->id);
		if (!g)
			goto fail;
		g->pod.run_idx = slots[r].idx;
		g->pod.run_gen = slots[r].gen;
		g->pod.egress_mode = rw_policy_run_egress(p, run);
		g->pod.refusal = rw_policy_run_refusal(p, run);
		/* in the pod's value, so a change rewrites it */
		g->pod.skip =
			node_skip | (lg ? lg->pod.skip & RW_SKIP_RUN_BITS : rw_run_lookups(run));
		if (lg)
			memcpy(g->pod.run_id, lg->pod.run_id, sizeof(g->pod.run_id));
		else
			snprintf(g->pod.run_id, sizeof(g->pod.run_id), "%s", run->id);
		if (lg && !memcmp(&lg->pod, &g->pod, sizeof(g->pod))) {
			if (grow((void **)&s->pods, &s->cap_pods, s->n_pods + lg->n_pods,
				 sizeof(*s->pods)) ||
			    grow((void **)&s->ents, &s->cap_ents, s->n_ents + lg->n_ents,
				 sizeof(*s->ents)))
				goto fail;
			if (lg->n_pods)
				memcpy(s->pods + s->n_pods, live->pods + lg->pod_off,
				       lg->n_pods * sizeof(*s->pods));
			if (lg->n_ents)
				memcpy(s->ents + s->n_ents, live->ents + lg->ent_off,
				       lg->n_ents * sizeof(*s->ents));
			s->n_pods += lg->n_pods;
			s->n_ents += lg->n_ents;
			g->n_pods = lg->n_pods;
			g->n_pods6 = lg->n_pods6;
			g->n_ents = lg->n_ents;
			for (size_t i = 0; i < lg->n_ents; i++)
				s->count[s->ents[g->ent_off + i].table]++;
			s->count[T_PODS] += g->n_pods;
			continue;
		}
		if (grow((void **)&s->pods, &s->cap_pods, s->n_pods + run->n_pods,
			 sizeof(*s->pods)))
			goto fail;
		if (run->n_pods)
			memcpy(s->pods + s->n_pods, run->pods, run->n_pods * sizeof(*s->pods));
		s->n_pods += run->n_pods;
		for (size_t i = 0; i < run->n_pods6; i++)
			if ((err = add_ent(s, T_PODS6, run->pods6[i], sizeof(run->pods6[i]), 0)))
				goto fail;
		for (size_t i = 0; i < run->n_allow; i++)
			if ((err = add_rule(s, false, slots[r].idx, &run->allow[i],
					    RW_RUN_RULE_ID(r, i) |
						    (run->allow[i].from ? RW_RULE_FROM : 0))))
				goto fail;
		group_close(s, g);
	}
	s->known = true; /* its index is built when first needed (shadow_find()) */
	return 0;
fail:
	shadow_reset(s);
	return err;
}

/* ---- Writing --------------------------------------------------------------------------- */

/* Keys to delete and (key, value) pairs to write, per table, in the map's own layouts. */
struct oplist {
	__u8 *keys;
	__u8 *vals;
	size_t n, cap;
};

struct ops {
	struct oplist del[POLICY_TABLES];
	struct oplist upd[POLICY_TABLES];
};

static void ops_free(struct ops *o)
{
	for (int t = 0; t < POLICY_TABLES; t++) {
		free(o->del[t].keys);
		free(o->upd[t].keys);
		free(o->upd[t].vals);
	}
}

static int op_push(struct oplist *l, int t, const void *key, const void *val)
{
	size_t ks = inner_specs[t].key_size, vs = inner_specs[t].value_size;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		__u8 *k = realloc(l->keys, cap * ks), *v;

		if (!k)
			return -ENOMEM;
		l->keys = k;
		if (val) {
			v = realloc(l->vals, cap * vs);
			if (!v)
				return -ENOMEM;
			l->vals = v;
		}
		l->cap = cap;
	}
	memcpy(l->keys + l->n * ks, key, ks);
	if (val)
		memcpy(l->vals + l->n * vs, val, vs);
	l->n++;
	return 0;
}

/* An entry's write; an IPv6 pod's value is its group's pod. */
static int op_ent(struct ops *o, const struct ent *e, bool del, const struct group *g)
{
	if (del)
		return op_push(&o->del[e->table], e->table, e->key, NULL);
	return op_push(&o->upd[e->table], e->table, e->key,
		       e->table == T_PODS6 ? (const void *)&g->pod : (const void *)&e->val);
}

/* What turns group `o` (NULL: nothing) into group `n` (NULL: nothing). */
static int diff_group(struct ops *ops, const struct shadow *os, const struct group *o,
		      const struct shadow *ns, const struct group *n)
{
	const __be32 *op = o ? os->pods + o->pod_off : NULL, *np = n ? ns->pods + n->pod_off : NULL;
	const struct ent *oe = o ? os->ents + o->ent_off : NULL;
	const struct ent *ne = n ? ns->ents + n->ent_off : NULL;
	size_t on = o ? o->n_pods : 0, nn = n ? n->n_pods : 0, i = 0, j = 0;
	bool same_pod = o && n && !memcmp(&o->pod, &n->pod, sizeof(o->pod));
	int err = 0;

	while (!err && (i < on || j < nn)) {
		__u32 a = i < on ? op[i] : 0, b = j < nn ? np[j] : 0;

		if (j == nn || (i < on && a < b)) {
			err = op_push(&ops->del[T_PODS], T_PODS, &op[i++], NULL);
		} else if (i == on || b < a) {
			err = op_push(&ops->upd[T_PODS], T_PODS, &np[j++], &n->pod);
		} else {
			if (!same_pod)
				err = op_push(&ops->upd[T_PODS], T_PODS, &np[j], &n->pod);
			i++;
			j++;
		}
	}
	on = o ? o->n_ents : 0;
	nn = n ? n->n_ents : 0;
	i = j = 0;
	if (same_pod && on == nn && on && !memcmp(oe, ne, on * sizeof(*oe)))
		return err;
	while (!err && (i < on || j < nn)) {
		int c = i == on ? 1 : j == nn ? -1 : ent_cmp_key(&oe[i], &ne[j]);

		if (c < 0) {
			err = op_ent(ops, &oe[i++], true, o);
		} else if (c > 0) {
			err = op_ent(ops, &ne[j++], false, n);
		} else {
			if (oe[i].val != ne[j].val || (ne[j].table == T_PODS6 && !same_pod))
				err = op_ent(ops, &ne[j], false, n);
			i++;
			j++;
		}
	}
	return err;
}

/* Everything that turns what slot shadow `os` holds into `ns`. */
static int diff_shadows(struct ops *ops, const struct shadow *os, const struct shadow *ns)
{
	/* The groups of os that ns keeps: the others are deleted. */
	unsigned char *kept = calloc(os->n_groups ? os->n_groups : 1, 1);
	int err = kept ? 0 : -ENOMEM;

	for (size_t g = 0; !err && g < ns->n_groups; g++) {
		const struct group *og = shadow_find_at(os, ns->groups[g].id, g);

		if (og)
			kept[og - os->groups] = 1;
		err = diff_group(ops, os, og, ns, &ns->groups[g]);
	}
	for (size_t g = 0; !err && g < os->n_groups; g++)
		if (!kept[g])
			err = diff_group(ops, os, &os->groups[g], ns, NULL);
	free(kept);
	return err;
}

/* Writes are counted only for an injected fault (and then made by one thread). */
#ifdef RW_TEST_FAULTS
static int count_write(struct rw_apply_cache *c, long n)
{
	if (c->fault_after < 0)
		return 0;
	if (c->writes + n > c->fault_after) {
		c->writes = c->fault_after;
		return -EIO;
	}
	c->writes += n;
	return 0;
}
#else
static int count_write(struct rw_apply_cache *c, long n)
{
	return 0;
}
#endif

/* Write (or delete, with vals NULL) n keys: one batch call where the map type has batch
 * operations, one call per key where it does not (LPM tries in 6.1 and 6.18).
 */
static int write_keys(struct rw_apply_cache *c, int t, int fd, const __u8 *keys, const __u8 *vals,
		      size_t n, char *err, size_t errlen)
{
	const char *what = vals ? "update" : "delete";
	size_t ks = inner_specs[t].key_size, vs = inner_specs[t].value_size;
	int ret;

	if (!n)
		return 0;
	if (!__atomic_load_n(&c->no_batch[t], __ATOMIC_RELAXED) && c->fault_after < 0) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
		__u32 count = n;

		ret = vals ? bpf_map_update_batch(fd, keys, vals, &count, &opts)
			   : bpf_map_delete_batch(fd, keys, &count, &opts);
		if (!ret)
			return 0;
		ret = -errno;
		if ((ret != -ENOTSUPP && ret != -EOPNOTSUPP) || count)
			return rw_fail_msg(
				err, errlen, ret, "%s: batch %s of %zu entries: %s (%u done)",
				rw_map_names[RW_M_PODS + t], what, n, strerror(-ret), count);
		__atomic_store_n(&c->no_batch[t], true, __ATOMIC_RELAXED);
	}
	for (size_t i = 0; i < n; i++) {
		if (count_write(c, 1))
			return rw_fail_msg(err, errlen, -EIO,
					   "%s: %s: injected fault after %ld writes",
					   rw_map_names[RW_M_PODS + t], what, c->writes);
		ret = vals ? bpf_map_update_elem(fd, keys + i * ks, vals + i * vs, BPF_ANY)
			   : bpf_map_delete_elem(fd, keys + i * ks);
		if (ret && !(vals == NULL && errno == ENOENT))
			return rw_fail_msg(err, errlen, -errno, "%s: %s: %s",
					   rw_map_names[RW_M_PODS + t], what, strerror(errno));
	}
	return 0;
}

/* Above this many writes (weighted by table_cost()) a phase of writes is shared by two
 * threads; below it one thread is quicker than starting another.
 */
#define PARALLEL_MIN_WRITES 8192
#define CHUNK_WRITES	    4096 /* one piece of a phase, in the same weight */

/* What a key's write costs, roughly: a batch write in the kernel, or a syscall of its own where
 * the map has no batch operations (the LPM tries).
 */
static size_t key_cost(const struct rw_apply_cache *c, int t)
{
	return inner_specs[t].type == BPF_MAP_TYPE_LPM_TRIE ||
			       __atomic_load_n(&c->no_batch[t], __ATOMIC_RELAXED)
		       ? 4
		       : 1;
}

/* A phase of writes (every table's deletes, or every table's updates) cut into pieces that two
 * threads take in turn. The tables are separate maps, and within a phase no key appears twice,
 * so pieces are independent; the deletes end before any update starts.
 */
struct piece {
	int t;
	size_t off, n;
};

struct phase {
	struct rw_apply_cache *c;
	__u32 slot;
	const struct oplist *l; /* per table: ops->del or ops->upd */
	bool upd;
	struct piece *p;
	size_t n_p;
	size_t next; /* the next piece to take (atomic) */
	int failed;  /* atomic */
	int ret;
	char err[256];
};

static void *phase_work(void *arg)
{
	struct phase *ph = arg;
	char err[256];
	size_t i;

	while (!__atomic_load_n(&ph->failed, __ATOMIC_RELAXED) &&
	       (i = __atomic_fetch_add(&ph->next, 1, __ATOMIC_RELAXED)) < ph->n_p) {
		const struct piece *p = &ph->p[i];
		const struct oplist *l = &ph->l[p->t];
		size_t ks = inner_specs[p->t].key_size, vs = inner_specs[p->t].value_size;
		int ret =
			write_keys(ph->c, p->t, ph->c->fd[ph->slot][p->t], l->keys + p->off * ks,
				   ph->upd ? l->vals + p->off * vs : NULL, p->n, err, sizeof(err));

		if (ret && !__atomic_exchange_n(&ph->failed, 1, __ATOMIC_ACQ_REL)) {
			ph->ret = ret;
			snprintf(ph->err, sizeof(ph->err), "%s", err);
		}
	}
	return NULL;
}

static int run_phase(struct rw_apply_cache *c, __u32 slot, const struct oplist *l, bool upd,
		     char *err, size_t errlen)
{
	struct phase ph = {.c = c, .slot = slot, .l = l, .upd = upd};
	size_t cost = 0;
	pthread_t th;
	bool threaded;

	for (int t = 0; t < POLICY_TABLES; t++) {
		size_t per = CHUNK_WRITES / key_cost(c, t);

		cost += l[t].n * key_cost(c, t);
		ph.n_p += (l[t].n + per - 1) / per;
	}
	if (!ph.n_p)
		return 0;
	ph.p = calloc(ph.n_p, sizeof(*ph.p));
	if (!ph.p)
		return rw_fail_msg(err, errlen, -ENOMEM, "out of memory");
	ph.n_p = 0;
	for (int t = 0; t < POLICY_TABLES; t++) {
		size_t per = CHUNK_WRITES / key_cost(c, t);

		for (size_t off = 0; off < l[t].n; off += per)
			ph.p[ph.n_p++] =
				(struct piece){t, off, l[t].n - off < per ? l[t].n - off : per};
	}
	threaded = cost >= PARALLEL_MIN_WRITES && !pthread_create(&th, NULL, phase_work, &ph);
	phase_work(&ph);
	if (threaded)
		pthread_join(th, NULL);
	free(ph.p);
	return ph.ret ? rw_fail_msg(err, errlen, ph.ret, "%s", ph.err) : 0;
}

static int run_ops(struct rw_apply_cache *c, __u32 slot, const struct ops *ops,
		   unsigned int *written, uint64_t revision, char *err, size_t errlen)
{
	int ret;

	for (int t = 0; t < POLICY_TABLES; t++)
		*written += ops->del[t].n + ops->upd[t].n;
	/* Big writes are shared by two threads, a phase at a time (run_phase()); one thread when a
	 * fault is injected, for its step to be exact.
	 */
	if (c->fault_after < 0 && !fault_hook_set()) {
		ret = run_phase(c, slot, ops->del, false, err, errlen);
		return ret ? ret : run_phase(c, slot, ops->upd, true, err, errlen);
	}
	/* Deletes first: a key that moved from one run to another is deleted, then written. */
	for (int t = 0; t < POLICY_TABLES; t++) {
		ret = write_keys(c, t, c->fd[slot][t], ops->del[t].keys, NULL, ops->del[t].n, err,
				 errlen);
		if (ret)
			return ret;
	}
	for (int t = 0; t < POLICY_TABLES; t++) {
		if (t == POLICY_TABLES / 2)
			fault_point("half", revision);
		ret = write_keys(c, t, c->fd[slot][t], ops->upd[t].keys, ops->upd[t].vals,
				 ops->upd[t].n, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* Every key of one inner map, for clearing a slot we know nothing about. */
static int list_keys(int fd, int t, struct oplist *l)
{
	__u8 key[64], prev[64];
	bool first = true;

	while (bpf_map_get_next_key(fd, first ? NULL : prev, key) == 0) {
		if (op_push(l, t, key, NULL))
			return -ENOMEM;
		memcpy(prev, key, inner_specs[t].key_size);
		first = false;
	}
	return errno == ENOENT ? 0 : -errno;
}

/* ---- Slots ----------------------------------------------------------------------------- */

static struct rw_apply_cache *cache_of(const struct rw_datapath *dp)
{
	return dp->apply;
}

/* The grace period the last flip owes before its old slot, the idle one now, is written: begun
 * by the flip on grace.c's thread, so only what is left of it is waited for here; nothing when
 * it has passed. On error it is still owed.
 */
static int settle(struct rw_apply_cache *c)
{
	return rw_grace_wait(c->grace);
}

static void cache_free(struct rw_apply_cache *c)
{
	rw_grace_free(c->grace); /* its thread may be rewriting an outer entry with c->fd[0][0] */
	shadow_reset(&c->spare);
	for (int s = 0; s < RW_SLOTS; s++) {
		shadow_reset(&c->shadow[s]);
		for (int t = 0; t < POLICY_TABLES; t++)
			if (c->fd[s][t] >= 0)
				close(c->fd[s][t]);
	}
	free(c);
}

int rw_apply_prepare(struct rw_datapath *dp, char *err, size_t errlen)
{
	static const __u32 slot_keys[RW_SLOTS] = {0, 1};
	struct rw_outer_write writes[RW_SLOTS * POLICY_TABLES];
	int write_table[RW_SLOTS * POLICY_TABLES];
	struct rw_apply_cache *c = dp->apply;
	bool created[RW_SLOTS] = {true, true};
	size_t n_writes = 0;

	if (c)
		return 0;
	c = calloc(1, sizeof(*c));
	if (!c)
		return rw_fail_msg(err, errlen, -ENOMEM, "out of memory");
	c->fault_after = -1;
	for (int s = 0; s < RW_SLOTS; s++)
		for (int t = 0; t < POLICY_TABLES; t++)
			c->fd[s][t] = -1;
	for (__u32 s = 0; s < RW_SLOTS; s++) {
		for (int t = 0; t < POLICY_TABLES; t++) {
			int outer = dp->map_fd[RW_M_PODS + t], ret;
			__u32 id;

			if (bpf_map_lookup_elem(outer, &s, &id) == 0) {
				c->fd[s][t] = bpf_map_get_fd_by_id(id);
				if (c->fd[s][t] < 0) {
					ret = -errno;
					goto fail_errno;
				}
				created[s] = false;
				continue;
			}
			if (errno != ENOENT) {
				ret = -errno;
				goto fail_errno;
			}
			LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = inner_specs[t].flags);
			c->fd[s][t] = bpf_map_create(
				inner_specs[t].type, inner_specs[t].name, inner_specs[t].key_size,
				inner_specs[t].value_size, inner_specs[t].max_entries, &opts);
			if (c->fd[s][t] < 0) {
				ret = -errno;
				goto fail_errno;
			}
			write_table[n_writes] = t;
			writes[n_writes++] = (struct rw_outer_write){
				.map_fd = outer, .key = &slot_keys[s], .inner_fd = c->fd[s][t]};
			continue;
		fail_errno:
			rw_fail_msg(err, errlen, ret, "%s[%u]: inner map: %s",
				    rw_map_names[RW_M_PODS + t], s, strerror(-ret));
			dp->apply = c;
			rw_apply_release(dp);
			return ret;
		}
	}
	/* Once per node (a first start): each outer write waits for a grace period, so all are
	 * made side by side.
	 */
	if (rw_outer_writes(writes, n_writes)) {
		for (size_t i = 0; i < n_writes; i++) {
			if (!writes[i].err)
				continue;
			rw_fail_msg(err, errlen, writes[i].err, "%s[%u]: inner map: %s",
				    rw_map_names[RW_M_PODS + write_table[i]],
				    *(const __u32 *)writes[i].key, strerror(-writes[i].err));
			dp->apply = c;
			rw_apply_release(dp);
			return writes[i].err;
		}
	}
	/* Fresh maps are known to be empty; adopted ones are cleared before their first use. */
	for (int s = 0; s < RW_SLOTS; s++)
		c->shadow[s].known = created[s];
	c->grace = rw_grace_new(dp->map_fd[RW_M_PODS], c->fd[0][0]);
	dp->apply = c;
	if (!c->grace) {
		rw_apply_release(dp);
		return rw_fail_msg(err, errlen, -ENOMEM, "out of memory");
	}
	dp->apply_free = cache_free;
	return 0;
}

void rw_apply_release(struct rw_datapath *dp)
{
	if (dp->apply)
		cache_free(dp->apply);
	dp->apply = NULL;
	dp->apply_free = NULL;
}

void rw_apply_forget(const struct rw_datapath *dp)
{
	struct rw_apply_cache *c = cache_of(dp);

	for (int s = 0; c && s < RW_SLOTS; s++) {
		shadow_reset(&c->shadow[s]);
		c->shadow[s].known = false;
	}
}

/* ---- Runs ------------------------------------------------------------------------------ */

/* A run keeps its counter index across snapshots; a new run gets the lowest index that no run
 * of the live slot uses, with its counters zeroed.
 */
struct live_run {
	char id[RW_RUN_ID_LEN];
	__u32 idx, gen;
};

static int group_id_cmp(const void *a, const void *b)
{
	return strcmp(((const struct group *)a)->id, ((const struct group *)b)->id);
}

/* One group per pod of one of the live slot's pod tables (IPv4 or IPv6), into out. */
static int live_pods_read(const struct rw_datapath *dp, enum rw_map_id table, struct shadow *out)
{
	int fd = rw_live_inner_fd(dp, table);
	__u8 key[16], prev[16];
	bool first = true;
	struct rw_pod pod;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	while (bpf_map_get_next_key(fd, first ? NULL : prev, key) == 0) {
		struct group *ng;

		memcpy(prev, key, sizeof(prev));
		first = false;
		if (bpf_map_lookup_elem(fd, key, &pod))
			continue;
		pod.run_id[RW_RUN_ID_LEN - 1] = '\0';
		ng = group_open(out, pod.run_id);
		if (!ng) {
			close(fd);
			return -ENOMEM;
		}
		ng->pod = pod;
	}
	close(fd);
	return 0;
}

/* The runs that have pods (of either family) in the live slot, read from its maps: one group
 * each, with its pod value, sorted by id and indexed.
 */
static int live_runs_read(const struct rw_datapath *dp, struct shadow *out)
{
	int ret;

	memset(out, 0, sizeof(*out));
	/* One group per pod first, then sorted by run id and made unique. */
	ret = live_pods_read(dp, RW_M_PODS, out);
	if (!ret)
		ret = live_pods_read(dp, RW_M_PODS6, out);
	if (ret)
		return ret;
	if (out->n_groups > 1)
		qsort(out->groups, out->n_groups, sizeof(*out->groups), group_id_cmp);
	{
		size_t n = 0;

		for (size_t g = 0; g < out->n_groups; g++)
			if (!n || strcmp(out->groups[n - 1].id, out->groups[g].id))
				out->groups[n++] = out->groups[g];
		out->n_groups = n;
	}
	return shadow_index(out);
}

/* Zero the counters of the runs that get a new index, in one call where the kernel can. */
static int zero_counters(const struct rw_datapath *dp, const __u32 *idx, size_t n)
{
	int ncpu = libbpf_num_possible_cpus(), ret = 0;
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
	__u32 count = n;
	void *zero;

	if (!n)
		return 0;
	if (ncpu < 0)
		return ncpu;
	zero = calloc(n, (size_t)ncpu * sizeof(struct rw_counters));
	if (!zero)
		return -ENOMEM;
	if (bpf_map_update_batch(dp->map_fd[RW_M_COUNTERS], idx, zero, &count, &opts)) {
		for (size_t i = 0; !ret && i < n; i++)
			ret = rw_counters_zero(dp, idx[i]);
	}
	free(zero);
	return ret;
}

/* Where run `id` of next (at `r` there) was in prev: at r itself mostly, else found by id in
 * `ix`, an index of prev's runs built at the first miss (a group per run, `pod_off` its place).
 * -1: not in prev; -ENOMEM.
 */
static long prev_at(const struct rw_policy *prev, size_t r, const char *id, struct shadow *ix)
{
	const struct group *g;

	if (!prev)
		return -1;
	if (r < prev->n_runs && !strcmp(prev->runs[r].id, id))
		return (long)r;
	if (!ix->n_groups) {
		for (size_t i = 0; i < prev->n_runs; i++) {
			struct group *ng = group_open(ix, prev->runs[i].id);

			if (!ng)
				return -ENOMEM;
			ng->pod_off = i;
		}
	}
	g = shadow_find(ix, id);
	return g ? (long)g->pod_off : -1;
}

/* Each run of next keeps the index (and the generation, if its policy did not change) it has in
 * the live slot: every run of the live slot's shadow when it is known, else the runs with pods
 * read from the live slot's maps (after a restart). The others get a free index, whose counters
 * are zeroed.
 */
static int assign_runs(const struct rw_datapath *dp, struct shadow *live_shadow,
		       const struct rw_policy *prev, const struct rw_policy *next,
		       struct run_slot *slots, char *err, size_t errlen)
{
	unsigned char *used = calloc(RW_MAX_RUNS, 1);
	struct shadow read = {}, prev_ix = {};
	const struct shadow *live = &read;
	bool known = live_shadow && live_shadow->known;
	__u32 *fresh = NULL;
	size_t n_fresh = 0, cap_fresh = 0;
	__u32 cursor = 1;
	int ret = 0;

	if (!used)
		return -ENOMEM;
	if (known)
		live = live_shadow; /* its group 0 is the node's, run r of next likely r + 1 */
	else if ((ret = live_runs_read(dp, &read)))
		goto cleanup;
	for (size_t g = 0; g < live->n_groups; g++)
		if (live->groups[g].id[0] && live->groups[g].pod.run_idx < RW_MAX_RUNS)
			used[live->groups[g].pod.run_idx] = 1;

	for (size_t r = 0; r < next->n_runs; r++) {
		const struct rw_policy_run *run = &next->runs[r];
		const struct group *lg = shadow_find_at(live, run->id, known ? r + 1 : r);
		long at = prev_at(prev, r, run->id, &prev_ix);
		const struct rw_policy_run *old = at >= 0 ? &prev->runs[at] : NULL;

		if (at == -ENOMEM) {
			ret = -ENOMEM;
			goto cleanup;
		}
		slots[r].idx = lg && lg->pod.run_idx < RW_MAX_RUNS ? lg->pod.run_idx : 0;
		slots[r].gen = slots[r].idx ? lg->pod.run_gen : 0;
		/* A run keeps its generation only when we know its policy did not change. */
		slots[r].same = old && at == (long)r && prev->egress == next->egress &&
				prev->refusal == next->refusal && run_same(old, run);
		if (!slots[r].idx || !old ||
		    (!slots[r].same && !rw_policy_run_equal(prev, old, next, run)))
			slots[r].gen = (__u32)next->revision;
		slots[r].old = slots[r].idx ? old : NULL;
		if (slots[r].idx)
			continue;
		while (cursor < RW_MAX_RUNS && used[cursor])
			cursor++;
		if (cursor >= RW_MAX_RUNS) {
			ret = rw_fail_msg(err, errlen, -E2BIG,
					  "runs: more than %d runs on one node", RW_MAX_RUNS - 1);
			goto cleanup;
		}
		used[cursor] = 1;
		slots[r].idx = cursor;
		if (grow((void **)&fresh, &cap_fresh, n_fresh + 1, sizeof(*fresh))) {
			ret = -ENOMEM;
			goto cleanup;
		}
		fresh[n_fresh++] = cursor;
	}
	ret = zero_counters(dp, fresh, n_fresh);
	if (ret)
		rw_fail_msg(err, errlen, ret, "%s: zeroing run counters: %s",
			    rw_map_names[RW_M_COUNTERS], strerror(-ret));
cleanup:
	free(fresh);
	shadow_reset(&read);
	shadow_reset(&prev_ix);
	free(used);
	return ret;
}

/* fd of one policy table's inner map in one slot, or -ENOENT when the slot is empty. */
static int slot_inner_fd(const struct rw_datapath *dp, enum rw_map_id table, __u32 slot)
{
	__u32 id;
	int fd;

	if (bpf_map_lookup_elem(dp->map_fd[table], &slot, &id))
		return errno == ENOENT ? -ENOENT : -errno;
	fd = bpf_map_get_fd_by_id(id);
	return fd < 0 ? -errno : fd;
}

int rw_live_inner_fd(const struct rw_datapath *dp, enum rw_map_id table)
{
	struct rw_config cfg;
	int err;

	err = rw_config_read(dp, &cfg);
	if (err)
		return err;
	if (!RW_STATE_READY(cfg.state))
		return -ENOENT;
	return slot_inner_fd(dp, table, RW_STATE_SLOT(cfg.state));
}

int rw_live_pod(const struct rw_datapath *dp, __be32 pod_ip, struct rw_pod *out)
{
	int fd = rw_live_inner_fd(dp, RW_M_PODS), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, &pod_ip, out))
		err = -errno;
	close(fd);
	return err;
}

static bool in_sorted(const __be32 *a, size_t n, __be32 x)
{
	/* An empty list may be NULL: bsearch() of NULL is undefined even for 0 elements. */
	return n && bsearch(&x, a, n, sizeof(*a), pod_cmp) != NULL;
}

/* Whether a sandbox's own conntrack tables (IPv4 or IPv6) hold any flow. */
static bool ct_table_used(const struct rw_datapath *dp, __u32 ifindex)
{
	int fd4 = rw_conntrack_table_fd(dp, ifindex), fd6 = rw_conntrack6_table_fd(dp, ifindex);
	struct rw_ct6_key k6;
	struct rw_ct_key k;
	bool used = false;

	if (fd4 >= 0) {
		used = bpf_map_get_next_key(fd4, NULL, &k) == 0;
		close(fd4);
	}
	if (fd6 >= 0) {
		used = used || bpf_map_get_next_key(fd6, NULL, &k6) == 0;
		close(fd6);
	}
	return used;
}

static int ent6_key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 4 * sizeof(__be32));
}

/* Whether group g of shadow s holds IPv6 pod ip (its T_PODS6 entries are sorted by key). */
static bool group_has_pod6(const struct shadow *s, const struct group *g, const __be32 ip[4])
{
	struct ent k = {.table = T_PODS6};
	const struct ent *e = s->ents + g->ent_off;
	size_t lo = 0, hi = g->n_ents;

	memcpy(k.key, ip, 4 * sizeof(*ip));
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = ent_cmp_key(&e[mid], &k);

		if (!c)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Whether a pod of the old slot (known by its shadow or read from its pod table `fd`) was in
 * run `id`, for flush_moved_pods().
 */
static bool pod_stayed(const struct shadow *old, const struct group *og, int fd, const void *ip,
		       bool ipv6, const char *id)
{
	struct rw_pod pod;

	if (old->known)
		return og &&
		       (ipv6 ? group_has_pod6(old, og, ip)
			     : in_sorted(old->pods + og->pod_off, og->n_pods, *(const __be32 *)ip));
	if (fd < 0 || bpf_map_lookup_elem(fd, ip, &pod))
		return false;
	pod.run_id[RW_RUN_ID_LEN - 1] = '\0';
	return !strcmp(pod.run_id, id);
}

/* Whether a pod of the old slot (as pod_stayed()) was in any run there. */
static bool pod_was_bound(const struct shadow *old, int fd, const void *ip, bool ipv6)
{
	struct rw_pod pod;

	if (!old->known)
		return fd >= 0 && !bpf_map_lookup_elem(fd, ip, &pod);
	for (size_t g = 0; g < old->n_groups; g++) {
		const struct group *og = &old->groups[g];

		if (ipv6 ? group_has_pod6(old, og, ip)
			 : in_sorted(old->pods + og->pod_off, og->n_pods, *(const __be32 *)ip))
			return true;
	}
	return false;
}

/* Pods of the new live slot that were not in the same run in the old one: a pod moved from
 * another run, or joining one from none, by either of its addresses. Their flows were opened
 * under another run, or under a run that has ended, so they are forgotten (both of the veth's
 * tables). A pod whose run ended and that no run names now keeps its flows: the datapath
 * still knows its veth's own addresses, and a segment of one of them is a revoke that resets
 * both ends (bpf/revoke.h, and the probe of revoke_probe.c).
 *
 * Called right after the flip, before the grace period it owes (settle()): a packet that loaded
 * the old state word may still be judged under the old slot and note a flow after the flush.
 * Under the old slot, a pod that was in no run had none of its packets allowed, and only an
 * allowed packet notes a flow (rw_allow_flow()), so a pod that joins a run from none needs no
 * wait. A pod that was in another run could have one noted under that run: for those the grace
 * period is waited for first, so that the flush comes after the last such packet.
 */
/* How long flush_moved_pods() waits for the veth lock (its holders keep it milliseconds). */
#define FLUSH_LOCK_MS 1000

static int flush_moved_pods(const struct rw_datapath *dp, struct rw_apply_cache *c,
			    const struct shadow *old, __u32 old_slot, const struct shadow *next)
{
	__be32 *moved = NULL, (*moved6)[4] = NULL;
	size_t n = 0, cap = 0, n6 = 0, cap6 = 0;
	int fd = -1, fd6 = -1, ret = 0;
	bool from_run = false;

	if (!old->known) {
		fd = slot_inner_fd(dp, RW_M_PODS, old_slot);
		if (fd < 0 && fd != -ENOENT)
			return fd;
		fd6 = slot_inner_fd(dp, RW_M_PODS6, old_slot);
		if (fd6 < 0 && fd6 != -ENOENT) {
			ret = fd6;
			goto out;
		}
	}
	for (size_t g = 0; g < next->n_groups; g++) {
		const struct group *ng = &next->groups[g];
		const struct group *og = old->known ? shadow_find_at(old, ng->id, g) : NULL;
		const struct ent *e = next->ents + ng->ent_off;

		/* The same pods as before, in the same run (the common case): none moved. */
		if (og && og->n_pods == ng->n_pods && og->n_pods6 == ng->n_pods6 &&
		    bytes_equal(old->pods + og->pod_off, next->pods + ng->pod_off,
				ng->n_pods * sizeof(*next->pods)) &&
		    (!ng->n_pods6 ||
		     (og->n_ents == ng->n_ents &&
		      bytes_equal(old->ents + og->ent_off, e, ng->n_ents * sizeof(*e)))))
			continue;
		for (size_t i = 0; i < ng->n_pods; i++) {
			__be32 ip = next->pods[ng->pod_off + i];

			if (pod_stayed(old, og, fd, &ip, false, ng->id))
				continue;
			if (grow((void **)&moved, &cap, n + 1, sizeof(*moved)))
				goto nomem;
			moved[n++] = ip;
			from_run = from_run || pod_was_bound(old, fd, &ip, false);
		}
		for (size_t i = 0; ng->n_pods6 && i < ng->n_ents; i++) {
			if (e[i].table != T_PODS6 ||
			    pod_stayed(old, og, fd6, e[i].key, true, ng->id))
				continue;
			if (grow((void **)&moved6, &cap6, n6 + 1, sizeof(*moved6)))
				goto nomem;
			memcpy(moved6[n6++], e[i].key, sizeof(*moved6));
			from_run = from_run || pod_was_bound(old, fd6, e[i].key, true);
		}
	}
	if (!n && !n6)
		goto out;
	if (n)
		qsort(moved, n, sizeof(*moved), pod_cmp);
	if (n6)
		qsort(moved6, n6, sizeof(*moved6), ent6_key_cmp);
	/* Failing that wait, the flush is made all the same; the grace stays owed. */
	if (from_run && (ret = settle(c)))
		rw_warn("waiting for a grace period before forgetting moved pods' flows: %s",
			strerror(-ret));
	ret = 0;
	/* Each sandbox has its own conntrack tables: reset those of the veths bound to a moved
	 * pod that hold any flow (most joining pods have none), in one walk of the endpoints.
	 * Under the veth lock, as bindings are (rw_veth_lock()): an unbind and a bind of another
	 * veth at the same index between a reset's reading of the index and its write there
	 * would give that veth this one's table. Without the lock (not had in its time) the flush
	 * is made all the same: the moved pod's flows must not outlive the move.
	 */
	{
		struct rw_endpoint ep;
		__u32 ifi, *iprev = NULL;
		int r, lock = dp->pin_dir[0] ? rw_veth_lock(dp->pin_dir, FLUSH_LOCK_MS) : -1;

		while (bpf_map_get_next_key(dp->map_fd[RW_M_ENDPOINTS], iprev, &ifi) == 0) {
			bool hit;

			iprev = &ifi;
			if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &ifi, &ep))
				continue;
			hit = ((ep.flags & RW_EP_IP4) && in_sorted(moved, n, ep.pod_ip)) ||
			      ((ep.flags & RW_EP_IP6) && n6 &&
			       bsearch(ep.pod_ip6, moved6, n6, sizeof(*moved6), ent6_key_cmp));
			if (!hit || !ct_table_used(dp, ifi))
				continue;
			r = rw_conntrack_flush(dp, ifi, 0);
			if (r > 0)
				ret += r;
		}
		rw_veth_unlock(lock);
	}
	goto out;
nomem:
	ret = -ENOMEM;
out:
	if (fd >= 0)
		close(fd);
	if (fd6 >= 0)
		close(fd6);
	free(moved);
	free(moved6);
	return ret;
}

/* ---- The apply -------------------------------------------------------------------------- */

/* What one apply's steps pass on to each other. */
struct apply {
	struct rw_datapath *dp;
	struct rw_apply_cache *c;
	const struct rw_policy *prev, *next;
	struct rw_apply_result *res;
	char *err;
	size_t errlen;
	struct rw_config cfg;	/* as read at the start: the flip is from its state word */
	__u32 idle;		/* the slot written, then flipped to */
	struct run_slot *slots; /* per run of next: its counter index and generation */
	struct shadow ns;	/* next's entries, until they are the idle slot's shadow */
	struct ops ops;		/* the writes that make the idle slot hold next */
	double t0, t1;		/* when the apply started, when its last step ended */
};

/* The state in force: a revision not newer than it refused, the slots made if there are none,
 * the idle slot chosen.
 */
static int apply_start(struct apply *a)
{
	struct rw_config *cfg = &a->cfg;
	int ret;

	ret = rw_config_read(a->dp, cfg);
	if (ret)
		return rw_fail_msg(a->err, a->errlen, ret, "%s: read: %s",
				   rw_map_names[RW_M_CONFIG], strerror(-ret));
	if (RW_STATE_READY(cfg->state) && a->next->revision <= RW_STATE_REVISION(cfg->state))
		return rw_fail_msg(a->err, a->errlen, -ESTALE,
				   "revision: %llu is not newer than %llu, the one in force",
				   (unsigned long long)a->next->revision,
				   (unsigned long long)RW_STATE_REVISION(cfg->state));
	if (!a->dp->apply) {
		/* No slots yet (a dry run's datapath, a test's): its first apply prepares them. */
		ret = rw_apply_prepare(a->dp, a->err, a->errlen);
		if (ret)
			return ret;
	}
	a->c = cache_of(a->dp);
	a->c->fault_after = fault_after_take();
	a->c->writes = 0;
	a->res->previous = RW_STATE_READY(cfg->state) ? RW_STATE_REVISION(cfg->state) : 0;
	/* Before the first snapshot either slot can be filled. */
	a->idle = RW_STATE_READY(cfg->state) ? !RW_STATE_SLOT(cfg->state) : 0;
	return 0;
}

/* Nothing written yet: the runs' counter indexes, next's entries (refused over a table's
 * capacity) and the writes that turn what the idle slot holds into them.
 */
static int apply_plan(struct apply *a)
{
	struct rw_apply_cache *c = a->c;
	struct shadow *live = a->res->previous ? &c->shadow[!a->idle] : NULL;
	int ret;

	a->slots = calloc(a->next->n_runs ? a->next->n_runs : 1, sizeof(*a->slots));
	if (!a->slots)
		return rw_fail_msg(a->err, a->errlen, -ENOMEM, "out of memory");
	ret = assign_runs(a->dp, live, a->prev, a->next, a->slots, a->err, a->errlen);
	if (ret)
		return ret;
	/* Into the arrays of the shadow the last apply retired: no fresh megabytes to fault in. */
	a->ns = c->spare;
	memset(&c->spare, 0, sizeof(c->spare));
	ret = shadow_build(&a->ns, a->next, a->slots, live);
	if (ret)
		return rw_fail_msg(a->err, a->errlen, ret, "building the snapshot's entries: %s",
				   strerror(-ret));
	/* Refuse before writing anything. */
	for (int t = 0; t < POLICY_TABLES; t++) {
		if (a->ns.count[t] > inner_specs[t].max_entries)
			return rw_fail_msg(a->err, a->errlen, -E2BIG,
					   "%s: %u entries, more than the %u it holds",
					   rw_map_names[RW_M_PODS + t], a->ns.count[t],
					   inner_specs[t].max_entries);
	}

	if (c->shadow[a->idle].known) {
		ret = diff_shadows(&a->ops, &c->shadow[a->idle], &a->ns);
	} else {
		/* What the slot holds is unknown: an agent restart, or a failed apply. Clear it and
		 * write everything. A previous agent may have died between its flip and its grace
		 * period, so wait for one before touching the slot.
		 */
		a->res->full = 1;
		ret = rw_grace_now(c->grace);
		for (int t = 0; !ret && t < POLICY_TABLES; t++)
			ret = list_keys(c->fd[a->idle][t], t, &a->ops.del[t]);
		if (!ret) {
			struct shadow empty = {};

			ret = diff_shadows(&a->ops, &empty, &a->ns);
		}
	}
	if (ret)
		return rw_fail_msg(a->err, a->errlen, ret, "computing the writes: %s",
				   strerror(-ret));
	a->t1 = rw_now_ms();
	a->res->plan_ms = a->t1 - a->t0;
	return 0;
}

/* The planned writes into the idle slot, and its principals; then the slot's shadow is next's. */
static int apply_write_idle(struct apply *a)
{
	struct rw_apply_cache *c = a->c;
	struct rw_apply_result *res = a->res;
	__u32 idle = a->idle;
	int ret;

	/* The idle slot was live before the last flip: the grace period that flip owes comes
	 * before its first write, so that no program still reads what is written.
	 */
	ret = settle(c);
	res->wait_ms = rw_now_ms() - a->t1;
	if (ret)
		return rw_fail_msg(
			a->err, a->errlen, ret,
			"%s[%u]: waiting for the grace period before writing this idle slot: %s; "
			"nothing written",
			rw_map_names[RW_M_PODS], idle, strerror(-ret));
	/* From here on the idle slot holds something between two snapshots until the writes end. */
	c->shadow[idle].known = false;
	fault_point("before-write", a->next->revision);
	ret = run_ops(c, idle, &a->ops, &res->written, a->next->revision, a->err, a->errlen);
	if (!ret)
		ret = rw_principals_write(a->dp, idle, a->next, a->dp->principals,
					  a->dp->n_principals, a->err, a->errlen);
	if (ret)
		return ret;
	shadow_recycle(&c->shadow[idle]);
	shadow_reset(&c->spare);
	c->spare = c->shadow[idle];
	c->shadow[idle] = a->ns;
	memset(&a->ns, 0, sizeof(a->ns));
	a->t1 = rw_now_ms();
	res->build_ms = a->t1 - a->t0 - res->wait_ms;
	res->write_ms = res->build_ms - res->plan_ms;
	return 0;
}

/* The writes outside the slots that must be in force by the time the flip makes next live. */
static int apply_before_flip(struct apply *a)
{
	struct rw_config *cfg = &a->cfg;
	int ret;

	/* Which runs' cached verdicts this revision may change. */
	ret = rw_apply_revs(a->dp, a->prev, a->next, a->slots, a->err, a->errlen);
	if (ret)
		return ret;
	/* And what a pod whose run has ended hears (bpf/revoke.h): the next snapshot's refusal mode
	 * is in force by the time its flip ends the run.
	 */
	if (cfg->refusal != (__u8)a->next->refusal) {
		cfg->refusal = (__u8)a->next->refusal;
		ret = rw_config_write(a->dp, cfg);
		if (ret)
			return rw_fail_msg(a->err, a->errlen, ret,
					   "%s: writing the refusal mode: %s",
					   rw_map_names[RW_M_CONFIG], strerror(-ret));
	}
	return 0;
}

static int apply_flip(struct apply *a)
{
	const struct rw_policy *next = a->next;
	int ret;

	/* The flip: one atomic 64-bit store (rw_flip) that packets read with one load, from the
	 * state read at the start of this apply. Why a packet that loads the new word sees the
	 * whole new slot and the new run_revs:
	 *   writer: every write of the idle slot's inner maps (apply_write_idle()) and of run_revs
	 *   (apply_before_flip()) was a bpf(2) call that had returned, in this thread's program
	 *   order, before the BPF_CMPXCHG, which is a full barrier (and a thread that moves
	 *   between CPUs keeps its order: the scheduler's switch is a barrier too). So they are
	 *   visible to any CPU before the new state word is.
	 *   reader: rw_state_load() loads the word once, whole (an aligned 8-byte load, and the
	 *   one store that changes it is 8 bytes: never a mix of two words); rw_view_load() then
	 *   looks the inner maps up with the slot taken from that value, loads that depend on it
	 *   by address, which no CPU performs before the load they depend on.
	 * The fast path needs no more: its run_revs load does not depend on the state word, but a
	 * packet that sees an old run_revs[r] gets what it would have got entirely before the flip
	 * (the old verdict, then still the policy in force), and the grace period the flip owes
	 * waits for it before the old slot is written again.
	 * The snapshot's lease (or none) comes with it, in the same run of rw_flip and before the
	 * state word: no packet judges the new policy under the old lease, and no crash of the
	 * agent leaves the new policy without its own. A lease that cannot be written is a flip
	 * that did not happen: the apply fails, and the policy in force keeps its lease.
	 */
	if (fault_lease_write(next->revision))
		ret = rw_fail_msg(a->err, a->errlen, -EIO,
				  "%s: flip: writing the lease of revision %llu: injected fault "
				  "(RUNWALL_APPLY_FAULT); nothing flipped, no lease written",
				  rw_map_names[RW_M_CONFIG], (unsigned long long)next->revision);
	else
		ret = rw_config_flip_leased(a->dp, a->cfg.state,
					    RW_STATE(next->revision, 1, a->idle),
					    next->lease_seconds, a->err, a->errlen);
	if (ret)
		return ret;
	fault_point("after-flip", next->revision);
	/* The flip owes one grace period, and the caller may say "enforced" without it. Why every
	 * packet whose program run starts after this return, and so every packet sent after an
	 * ack sent after it, is judged by `next` alone:
	 *   it loads the new state word: the BPF_CMPXCHG has returned, and the ack and the packet
	 *   that follows it are later in a chain of system calls, each ordered after the one
	 *   before; so, by the argument above, it sees the whole new slot and the new run_revs.
	 *   The grace period waits for the other programs only: those that loaded the old state
	 *   word, so started before the flip. What they can still do after it:
	 *   - read the old slot: nothing writes it until the grace period has passed (settle()
	 *     before the next apply's first write);
	 *   - stamp a flow with the old revision M (rw_finish()): for every run this revision
	 *     changed, run_revs[r] = N > M, so the flow's next packet is judged in full under the
	 *     new slot; a run it left alone has the same verdict under both;
	 *   - note a new flow (rw_ct_note()): an entry only says who opened the flow, and each
	 *     packet of it not on the fast path (above) is judged by the policy it loaded, so it
	 *     grants nothing the new policy does not; flush_moved_pods(), in apply_retire() after
	 *     this step, waits first when such an entry could belong to a pod that left its run.
	 * Nothing else a packet reads changes after the flip. So the grace period is only owed
	 * here, before the old slot is written again.
	 */
	rw_grace_owe(a->c->grace);
	a->res->flip_ms = rw_now_ms() - a->t1;
	return 0;
}

/* After the flip: the flows of pods that moved forgotten, and what was applied counted. The
 * old slot's grace period stays owed (settle()).
 */
static void apply_retire(struct apply *a)
{
	struct rw_apply_cache *c = a->c;
	struct rw_apply_result *res = a->res;
	__u32 idle = a->idle;
	int ret;

	if (res->previous) {
		ret = flush_moved_pods(a->dp, c, &c->shadow[!idle], !idle, &c->shadow[idle]);
		res->flows_flushed = ret > 0 ? ret : 0;
	}
	res->revision = a->next->revision;
	res->slot = idle;
	res->runs = a->next->n_runs;
	res->pods = c->shadow[idle].count[T_PODS] + c->shadow[idle].count[T_PODS6];
	for (int t = 1; t < POLICY_TABLES; t++)
		if (t != T_PODS6)
			res->entries += c->shadow[idle].count[t];
	res->total_ms = rw_now_ms() - a->t0;
}

int rw_apply(struct rw_datapath *dp, const struct rw_policy *prev, const struct rw_policy *next,
	     struct rw_apply_result *res, char *err, size_t errlen)
{
	struct apply a = {.dp = dp,
			  .prev = prev,
			  .next = next,
			  .res = res,
			  .err = err,
			  .errlen = errlen,
			  .t0 = rw_now_ms()};
	int ret;

	memset(res, 0, sizeof(*res));
	err[0] = '\0';

	ret = apply_start(&a);
	if (!ret)
		ret = apply_plan(&a);
	if (!ret)
		ret = apply_write_idle(&a);
	if (!ret)
		ret = apply_before_flip(&a);
	if (!ret)
		ret = apply_flip(&a);
	if (!ret)
		apply_retire(&a);
	ops_free(&a.ops);
	shadow_reset(&a.ns);
	free(a.slots);
	return ret;
}
