// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* principals.c: rw_from and rw_admit for one slot (principals.h). Both maps are small (a
 * snapshot's restricted rules, and the containers they name): each write lists the slot's
 * entries and diffs them against what they must be, so a repeat writes nothing.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>

#include "principals.h"
#include "util.h"

/* Calls fn for each rule of p that names a "from", with its rule id (no RW_RULE_FROM). */
typedef int (*from_fn)(const struct rw_policy_from *f, __u32 rule_id, void *arg);

static int each_from(const struct rw_policy *p, from_fn fn, void *arg)
{
	int ret;

	for (size_t i = 0; p && i < p->n_services; i++)
		if (p->services[i].from &&
		    (ret = fn(p->services[i].from, RW_SERVICE_RULE_ID(i), arg)))
			return ret;
	/* A run's rules are read only where the parser counted one with a "from". */
	for (size_t r = 0; p && r < p->n_runs; r++)
		for (size_t i = 0; p->runs[r].n_from && i < p->runs[r].n_allow; i++)
			if (p->runs[r].allow[i].from &&
			    (ret = fn(p->runs[r].allow[i].from, RW_RUN_RULE_ID(r, i), arg)))
				return ret;
	return 0;
}

/* The keys of `fd` whose slot (at slot_off in the key) is `slot`, into *keys. */
static int slot_keys(int fd, size_t key_size, size_t slot_off, __u32 slot, void **keys, size_t *n)
{
	__u8 cur[32], next[32];
	size_t cap = 0;
	void *k = NULL;
	int ret;

	*keys = NULL;
	*n = 0;
	while (!(ret = bpf_map_get_next_key(fd, k, next))) {
		memcpy(cur, next, key_size);
		k = cur;
		if (*(const __u32 *)(cur + slot_off) != slot)
			continue;
		if (*n == cap) {
			void *grown = realloc(*keys, (cap = cap ? 2 * cap : 64) * key_size);

			if (!grown) {
				free(*keys);
				*keys = NULL;
				return -ENOMEM;
			}
			*keys = grown;
		}
		memcpy((__u8 *)*keys + *n * key_size, cur, key_size);
		(*n)++;
	}
	return ret == -ENOENT ? 0 : ret;
}

struct from_write {
	int fd;
	__u32 slot;
};

static int from_put(const struct rw_policy_from *f, __u32 rule_id, void *arg)
{
	const struct from_write *w = arg;
	struct rw_from_key k = {.slot = w->slot, .rule_id = rule_id};
	struct rw_from v = {.n_uids = f->n_uids};

	v.flags = (f->n_uids ? RW_FROM_UID : 0) | (f->n_containers ? RW_FROM_CONTAINER : 0);
	memcpy(v.uids, f->uids, f->n_uids * sizeof(v.uids[0]));
	return bpf_map_update_elem(w->fd, &k, &v, BPF_ANY) ? -errno : 0;
}

/* Is rule_id of `slot` one of p's restricted rules? */
static int from_has(const struct rw_policy_from *f, __u32 rule_id, void *arg)
{
	(void)f;
	return rule_id == *(const __u32 *)arg;
}

static int from_write(const struct rw_datapath *dp, __u32 slot, const struct rw_policy *p,
		      char *err, size_t errlen)
{
	struct from_write w = {.fd = dp->map_fd[RW_M_FROM], .slot = slot};
	struct rw_from_key *keys;
	size_t n;
	int ret;

	/* Stale entries first: the map holds both slots, so room is only the idle slot's. */
	ret = slot_keys(w.fd, sizeof(*keys), offsetof(struct rw_from_key, slot), slot,
			(void **)&keys, &n);
	for (size_t i = 0; !ret && i < n; i++)
		if (each_from(p, from_has, &keys[i].rule_id) != 1 &&
		    bpf_map_delete_elem(w.fd, &keys[i]) && errno != ENOENT)
			ret = -errno;
	free(keys);
	if (!ret)
		ret = each_from(p, from_put, &w);
	if (ret)
		rw_fail_msg(err, errlen, ret, "%s[slot %u]: writing the rules' \"from\": %s",
			    rw_map_names[RW_M_FROM], slot, strerror(-ret));
	return ret;
}

struct admit_write {
	int fd;
	__u32 slot;
	const struct rw_principal *c;
	size_t n;
	const struct rw_admit_key *stale; /* the slot's keys before, sorted: what to keep */
	__u8 *keep;
	size_t n_stale;
};

static int admit_key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct rw_admit_key));
}

static int admit_put(const struct rw_policy_from *f, __u32 rule_id, void *arg)
{
	struct admit_write *w = arg;

	for (size_t i = 0; i < w->n; i++) {
		struct rw_admit_key k = {
			.cgroup_id = w->c[i].cgroup_id, .slot = w->slot, .rule_id = rule_id};
		struct rw_admit v = {.ifindex = w->c[i].ifindex}, cur;
		const struct rw_admit_key *at;
		size_t j;

		if (!k.cgroup_id || !v.ifindex || !w->c[i].name)
			continue;
		for (j = 0; j < f->n_containers && strcmp(f->containers[j], w->c[i].name); j++)
			;
		if (j == f->n_containers)
			continue;
		at = bsearch(&k, w->stale, w->n_stale, sizeof(k), admit_key_cmp);
		if (at)
			w->keep[at - w->stale] = 1;
		if (at && !bpf_map_lookup_elem(w->fd, &k, &cur) && cur.ifindex == v.ifindex)
			continue;
		if (bpf_map_update_elem(w->fd, &k, &v, BPF_ANY))
			return -errno;
	}
	return 0;
}

int rw_admit_write(const struct rw_datapath *dp, __u32 slot, const struct rw_policy *p,
		   const struct rw_principal *c, size_t n, char *err, size_t errlen)
{
	struct admit_write w = {.fd = dp->map_fd[RW_M_ADMIT], .slot = slot, .c = c, .n = n};
	struct rw_admit_key *keys;
	int ret;

	ret = slot_keys(w.fd, sizeof(*keys), offsetof(struct rw_admit_key, slot), slot,
			(void **)&keys, &w.n_stale);
	if (!ret && w.n_stale) {
		qsort(keys, w.n_stale, sizeof(*keys), admit_key_cmp);
		w.keep = calloc(w.n_stale, 1);
		if (!w.keep)
			ret = -ENOMEM;
	}
	w.stale = keys;
	/* Additions first, then what no container or rule holds any more: an entry that stays
	 * is never missing in between.
	 */
	if (!ret)
		ret = each_from(p, admit_put, &w);
	for (size_t i = 0; !ret && i < w.n_stale; i++)
		if (!w.keep[i] && bpf_map_delete_elem(w.fd, &keys[i]) && errno != ENOENT)
			ret = -errno;
	free(keys);
	free(w.keep);
	if (ret)
		rw_fail_msg(err, errlen, ret, "%s[slot %u]: writing the containers admitted: %s",
			    rw_map_names[RW_M_ADMIT], slot, strerror(-ret));
	return ret;
}

int rw_principals_write(const struct rw_datapath *dp, __u32 slot, const struct rw_policy *p,
			const struct rw_principal *c, size_t n, char *err, size_t errlen)
{
	int ret = from_write(dp, slot, p, err, errlen);

	return ret ? ret : rw_admit_write(dp, slot, p, c, n, err, errlen);
}
