// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* pod_lookups.c: the RW_SKIP_* bits of a run's pods (pod_lookups.h), from the snapshot whose
 * tables the same slot holds. Which table an entry lands in is apply.c's add_rule(): an IPv4
 * /32 or an IPv6 /128 in the exact hash, any other prefix in the trie; every deny entry in its
 * family's trie. A rule with no port makes no entry, and is counted as if it made one: a bit
 * left clear costs a lookup, a bit set wrongly a verdict.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>

#include "apply.h"
#include "pod_lookups.h"

/* Whether the IPv4 prefix addr/len (network byte order) lies inside a special range. */
static bool in_special(__be32 addr, unsigned int len)
{
	__u32 a = ntohl(addr);

#define RW_IN_SPECIAL(net, plen, str, label)                                         \
	if (len >= (plen) && (a & (__u32)(0xffffffffULL << (32 - (plen)))) == (net)) \
		return true;
	RW_SPECIAL_RANGES(RW_IN_SPECIAL)
#undef RW_IN_SPECIAL
	return false;
}

/* The bits of word i of a /plen prefix (RW_WORD_BITS() of bpf/policy.h). */
static __u32 word_mask(unsigned int plen, unsigned int i)
{
	unsigned int bits = plen <= 32 * i ? 0 : plen >= 32 * (i + 1) ? 32 : plen - 32 * i;

	return bits ? (__u32)(0xffffffffULL << (32 - bits)) : 0;
}

/* Whether the IPv6 prefix addr/len (network byte order) lies inside a special range. */
static bool in_special6(const __be32 addr[4], unsigned int len)
{
	static const struct {
		__u32 w[4];
		unsigned int len;
	} ranges[] = {
#define RW_RANGE6(h0, h1, h2, h3, plen, str, label) {{h0, h1, h2, h3}, plen},
		RW_SPECIAL6_RANGES(RW_RANGE6)
#undef RW_RANGE6
	};

	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
		bool in = len >= ranges[r].len;

		for (unsigned int i = 0; in && i < 4; i++) {
			__u32 m = word_mask(ranges[r].len, i);

			in = (ntohl(addr[i]) & m) == (ranges[r].w[i] & m);
		}
		if (in)
			return true;
	}
	return false;
}

/* What a list of allow rules puts in its scope's tables, as bits of one family's byte: the
 * exact and CIDR bits of a table that holds nothing, and with `services` the bit that says every
 * entry is inside a special range. Both families' bytes at once (RW_SKIP6()).
 */
static __u16 rules_skip(const struct rw_policy_rule *rules, size_t n, __u16 no_exact, __u16 no_cidr,
			__u16 all_special)
{
	__u16 skip =
		(no_exact | no_cidr | all_special) | RW_SKIP6(no_exact | no_cidr | all_special);

	/* Every apply computes this for every run: it stops once no bit is left to clear (a run
	 * with rules of both kinds and families after a few of them).
	 */
	for (size_t i = 0; i < n && skip; i++) {
		const struct rw_policy_rule *r = &rules[i];
		bool six = rw_policy_rule_is6(r);
		__u16 shift = six ? 8 : 0;

		if (r->prefixlen == (six ? 128 : 32))
			skip &= ~(no_exact << shift);
		else
			skip &= ~(no_cidr << shift);
		if ((skip & (all_special << shift)) && (six ? !in_special6(r->addr6, r->prefixlen)
							    : !in_special(r->addr, r->prefixlen)))
			skip &= ~(all_special << shift);
	}
	return skip;
}

/* The run's bits of the runs seen last, by their digest (rw_policy_run_digest(), which apply.c
 * already takes as the run's identity). An apply takes an unchanged run's bits from the live
 * slot; it asks here for the others, every run when the live slot is unknown (after a restart)
 * or the run moved in the snapshot, and reading every rule of 100 000 again took a 1 % change's
 * planning from 1.7 ms to 3.6-3.9 ms.
 */
#define RUN_CACHE 16384 /* 384 KiB; a node of 1 000 runs collides in about 3 % */
static struct {
	uint64_t digest[2];
	__u16 skip;
	bool set;
} run_cache[RUN_CACHE];
static pthread_mutex_t run_cache_lock = PTHREAD_MUTEX_INITIALIZER;

__u16 rw_run_lookups(const struct rw_policy_run *run)
{
	bool known = run->digest[0] || run->digest[1]; /* 0: not set (a run made otherwise) */
	size_t i = run->digest[0] % RUN_CACHE;
	bool hit = false;
	__u16 skip = 0;

	if (known) {
		pthread_mutex_lock(&run_cache_lock);
		hit = run_cache[i].set && run_cache[i].digest[0] == run->digest[0] &&
		      run_cache[i].digest[1] == run->digest[1];
		skip = run_cache[i].skip;
		pthread_mutex_unlock(&run_cache_lock);
	}
	if (hit)
		return skip;
	skip = rules_skip(run->allow, run->n_allow, RW_SKIP_RUN_EXACT, RW_SKIP_RUN_CIDR, 0);
	if (known) {
		pthread_mutex_lock(&run_cache_lock);
		run_cache[i].digest[0] = run->digest[0];
		run_cache[i].digest[1] = run->digest[1];
		run_cache[i].skip = skip;
		run_cache[i].set = true;
		pthread_mutex_unlock(&run_cache_lock);
	}
	return skip;
}

__u16 rw_node_lookups(const struct rw_policy *p)
{
	__u16 skip = rules_skip(p->services, p->n_services, RW_SKIP_SVC_EXACT, RW_SKIP_SVC_CIDR,
				RW_SKIP_SVC_PUBLIC);
	bool deny_special = true;

	for (size_t i = 0; i < p->n_deny && deny_special; i++)
		if (p->deny[i].family != AF_INET6)
			deny_special = in_special(p->deny[i].addr, p->deny[i].prefixlen);
	if (p->nat64.family != AF_INET6) /* apply.c writes the prefix of an AF_INET6 one only */
		skip |= RW_SKIP_NAT64;
	return deny_special ? skip | RW_SKIP_DENY : skip;
}

__u16 rw_pod_lookups(const struct rw_policy *p, const struct rw_policy_run *run)
{
	return rw_node_lookups(p) | rw_run_lookups(run);
}

/* ---- The invariant, read back from the live slot ----------------------------------------- */

/* What the slot's tables justify, per scope (0: the services, else a run's index): the bits
 * that may be set, both families' bytes; the deny bit is node-wide.
 */
struct justified {
	__u16 scope[RW_MAX_RUNS];
	__u16 deny, nat64;
};

/* An entry of `scope` in an allow table of family `six`, the trie's (`cidr`) or the exact
 * hash's; `special`: it lies inside a special range.
 */
static void saw_entry(struct justified *j, __u32 scope, bool cidr, bool six, bool special)
{
	__u16 shift = six ? 8 : 0;

	if (scope == RW_SCOPE_NAT64)
		j->nat64 = 0;
	if (scope >= RW_MAX_RUNS)
		return;
	if (!scope) {
		j->scope[0] &= ~((cidr ? RW_SKIP_SVC_CIDR : RW_SKIP_SVC_EXACT) << shift);
		if (!special)
			j->scope[0] &= ~(RW_SKIP_SVC_PUBLIC << shift);
	} else {
		j->scope[scope] &= ~((cidr ? RW_SKIP_RUN_CIDR : RW_SKIP_RUN_EXACT) << shift);
	}
}

/* Each key of the live slot's `table`, key_size bytes, to fn. */
static int each_key(const struct rw_datapath *dp, enum rw_map_id table, size_t key_size,
		    struct justified *j, void (*fn)(struct justified *j, const void *key))
{
	__u8 key[64], prev[64];
	bool first = true;
	int fd = rw_live_inner_fd(dp, table), ret = 0;

	if (fd < 0)
		return fd;
	while (bpf_map_get_next_key(fd, first ? NULL : prev, key) == 0) {
		fn(j, key);
		memcpy(prev, key, key_size);
		first = false;
	}
	if (errno != ENOENT)
		ret = -errno;
	close(fd);
	return ret;
}

static void saw_exact(struct justified *j, const void *key)
{
	const struct rw_allow_key *k = key;

	saw_entry(j, k->scope, false, false, in_special(k->daddr, 32));
}

static void saw_cidr(struct justified *j, const void *key)
{
	const struct rw_allow_lpm_key *k = key;
	unsigned int len = k->prefixlen - RW_ALLOW_LPM_FIXED_BITS;

	saw_entry(j, k->scope, true, false, in_special(k->daddr, len));
}

static void saw_exact6(struct justified *j, const void *key)
{
	const struct rw_allow6_key *k = key;

	saw_entry(j, k->scope, false, true, in_special6(k->daddr, 128));
}

static void saw_cidr6(struct justified *j, const void *key)
{
	const struct rw_allow6_lpm_key *k = key;
	unsigned int len = k->prefixlen - RW_ALLOW_LPM_FIXED_BITS;

	saw_entry(j, k->scope, true, true, in_special6(k->daddr, len));
}

static void saw_deny(struct justified *j, const void *key)
{
	const struct rw_cidr_lpm_key *k = key;

	if (!in_special(k->addr, k->prefixlen))
		j->deny &= ~RW_SKIP_DENY;
}

/* The bits of one pod's value that the tables do not justify (0: none). */
static __u16 unjustified(const struct justified *j, const struct rw_pod *pod)
{
	__u16 svc = RW_SKIP_SVC_EXACT | RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC,
	      run = RW_SKIP_RUN_EXACT | RW_SKIP_RUN_CIDR;
	__u16 ok = (j->scope[0] & (svc | RW_SKIP6(svc))) | j->deny | j->nat64;

	if (pod->run_idx && pod->run_idx < RW_MAX_RUNS)
		ok |= j->scope[pod->run_idx] & (run | RW_SKIP6(run));
	return pod->skip & ~ok;
}

/* Each pod of the live slot's pods table (IPv4 or IPv6) against j. */
static int check_pods(const struct rw_datapath *dp, bool six, const struct justified *j, char *err,
		      size_t errlen)
{
	__u8 key[16], prev[16];
	size_t ks = six ? 16 : 4;
	bool first = true;
	struct rw_pod pod;
	int fd = rw_live_inner_fd(dp, six ? RW_M_PODS6 : RW_M_PODS), ret = 0;

	if (fd < 0)
		return fd;
	while (!ret && bpf_map_get_next_key(fd, first ? NULL : prev, key) == 0) {
		__u16 bad;

		memcpy(prev, key, ks);
		first = false;
		if (bpf_map_lookup_elem(fd, key, &pod))
			continue;
		bad = unjustified(j, &pod);
		if (bad) {
			char ip[INET6_ADDRSTRLEN];

			inet_ntop(six ? AF_INET6 : AF_INET, key, ip, sizeof(ip));
			snprintf(err, errlen,
				 "pod %s (run %.*s, index %u) skips lookups 0x%04x that its slot's "
				 "tables can match (its bits 0x%04x)",
				 ip, RW_RUN_ID_LEN - 1, pod.run_id, pod.run_idx, bad, pod.skip);
			ret = -EPROTO;
		}
	}
	close(fd);
	return ret;
}

int rw_pod_lookups_check(const struct rw_datapath *dp, char *err, size_t errlen)
{
	struct justified *j = malloc(sizeof(*j));
	__u16 all = 0x3f | RW_SKIP6(0x3f);
	int ret;

	if (!j)
		return -ENOMEM;
	for (size_t s = 0; s < RW_MAX_RUNS; s++)
		j->scope[s] = all;
	j->deny = RW_SKIP_DENY;
	j->nat64 = RW_SKIP_NAT64;
	ret = each_key(dp, RW_M_ALLOW_EXACT, sizeof(struct rw_allow_key), j, saw_exact);
	if (!ret)
		ret = each_key(dp, RW_M_ALLOW_CIDR, sizeof(struct rw_allow_lpm_key), j, saw_cidr);
	if (!ret)
		ret = each_key(dp, RW_M_ALLOW_EXACT6, sizeof(struct rw_allow6_key), j, saw_exact6);
	if (!ret)
		ret = each_key(dp, RW_M_ALLOW_CIDR6, sizeof(struct rw_allow6_lpm_key), j,
			       saw_cidr6);
	if (!ret)
		ret = each_key(dp, RW_M_DENY, sizeof(struct rw_cidr_lpm_key), j, saw_deny);
	if (ret)
		snprintf(err, errlen, "reading the live slot's tables: %s", strerror(-ret));
	if (!ret)
		ret = check_pods(dp, false, j, err, errlen);
	if (!ret)
		ret = check_pods(dp, true, j, err, errlen);
	free(j);
	return ret;
}
