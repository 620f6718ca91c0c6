// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* endpoint.c: a sandbox veth's binding (rw_endpoints: its pod's addresses), its index
 * (rw_veth_slots) and what hangs off it: its two conntrack tables (one per family), their
 * flush and expiry, and its event and answer budget.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "datapath.h"
#include "grace.h"
#include "util.h"

/* ---- conntrack: two tables per sandbox veth, one per family ------------------------------- */

/* The outer map of a family's tables: rw_conntrack (IPv4) or rw_conntrack6 (IPv6). */
static int ct_outer(const struct rw_datapath *dp, bool ipv6)
{
	return dp->map_fd[ipv6 ? RW_M_CONNTRACK6 : RW_M_CONNTRACK];
}

/* ---- veth indexes (runwall.h, rw_veth_slots): a bound veth's binding and tables by index --- */

/* The same tables by veth index. */
static int ct_slots(const struct rw_datapath *dp, bool ipv6)
{
	return dp->map_fd[ipv6 ? RW_M_CT6_SLOTS : RW_M_CT_SLOTS];
}

/* The binding at `idx`, in *v (all zero: none). 0, or -errno when it cannot be told (an index
 * that cannot be read is never taken for an empty one).
 */
static int index_binding(const struct rw_datapath *dp, __u32 idx, struct rw_veth *v)
{
	__u32 id, zero = 0;
	int fd, err = 0;

	memset(v, 0, sizeof(*v));
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_VETH_SLOTS], &idx, &id))
		return errno == ENOENT ? 0 : -errno;
	fd = bpf_map_get_fd_by_id(id);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* ENOENT: freed since */
	if (bpf_map_lookup_elem(fd, &zero, v)) {
		err = -errno;
		memset(v, 0, sizeof(*v));
	}
	close(fd);
	return err;
}

/* The veth whose binding is at `idx`, in *owner (0: none): index_binding()'s. */
static int index_owner(const struct rw_datapath *dp, __u32 idx, __u32 *owner)
{
	struct rw_veth v;
	int err = index_binding(dp, idx, &v);

	*owner = v.ifindex;
	return err;
}

/* Empty `idx`: its binding first, then its tables, and those of `ifindex` in rw_conntrack
 * (0: none; NO_INDEX: no index, only those). Each delete waits for the programs running on what
 * it held (maybe_wait_bpf_programs(), on 6.1 whether or not there was anything to delete: so only
 * what is there is deleted), so the index can be given to another veth afterwards without any
 * packet of the old one still on it; the tables' deletes wait side by side, once the binding's
 * has passed (no packet reaches them without it). Returns the first error of the rw_conntrack
 * deletes but -ENOENT, else 0.
 */
#define NO_INDEX ((__u32)-1)
static int index_empty(const struct rw_datapath *dp, __u32 idx, __u32 ifindex)
{
	const int slots[2] = {dp->map_fd[RW_M_CT_SLOTS], dp->map_fd[RW_M_CT6_SLOTS]};
	struct rw_outer_write w[4];
	struct rw_budget full = {{0}};
	size_t n = 0, n_idx;
	__u32 id;

	if (idx != NO_INDEX && bpf_map_lookup_elem(dp->map_fd[RW_M_VETH_SLOTS], &idx, &id) == 0)
		bpf_map_delete_elem(dp->map_fd[RW_M_VETH_SLOTS], &idx);
	for (int i = 0; idx != NO_INDEX && i < 2; i++)
		if (bpf_map_lookup_elem(slots[i], &idx, &id) == 0)
			w[n++] = (struct rw_outer_write){
				.map_fd = slots[i], .key = &idx, .inner_fd = -1};
	n_idx = n;
	for (int ipv6 = 0; ifindex && ipv6 < 2; ipv6++)
		if (bpf_map_lookup_elem(ct_outer(dp, ipv6), &ifindex, &id) == 0)
			w[n++] = (struct rw_outer_write){
				.map_fd = ct_outer(dp, ipv6), .key = &ifindex, .inner_fd = -1};
	rw_outer_writes(w, n);
	/* No packet reads the bucket at idx any more: the next veth there starts with a full one. */
	if (idx != NO_INDEX)
		bpf_map_update_elem(dp->map_fd[RW_M_VETH_BUDGET], &idx, &full, BPF_ANY);
	for (size_t i = n_idx; i < n; i++)
		if (w[i].err && w[i].err != -ENOENT)
			return w[i].err;
	return 0;
}

/* The veth's index: its slot, or the overflow index rw_veth_overflow names; -ENOENT for none,
 * another -errno when it cannot be told.
 */
static int veth_index(const struct rw_datapath *dp, __u32 ifindex, __u32 *idx)
{
	__u32 slot = RW_VETH_SLOT(ifindex), o, owner;
	int err = index_owner(dp, slot, &owner);

	if (err)
		return err;
	if (owner == ifindex) {
		*idx = slot;
		return 0;
	}
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_VETH_OVERFLOW], &ifindex, &o))
		return errno == ENOENT ? -ENOENT : -errno;
	if (o >= RW_VETH_INDEXES)
		return -ENOENT;
	err = index_owner(dp, o, &owner);
	if (err)
		return err;
	if (owner != ifindex)
		return -ENOENT;
	*idx = o;
	return 0;
}

/* Whether `idx` may be given to the veth (1, 0, or -errno): nobody is there, or one whose
 * binding is gone from rw_endpoints (left by an agent stopped half-way through an unbind).
 */
static int index_free(const struct rw_datapath *dp, __u32 idx, __u32 ifindex)
{
	struct rw_endpoint ep;
	__u32 owner;
	int err = index_owner(dp, idx, &owner);

	if (err)
		return err;
	if (!owner || owner == ifindex)
		return 1;
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &owner, &ep) == 0)
		return 0;
	return errno == ENOENT ? 1 : -errno;
}

/* The index of a veth being bound: the one it has, else its slot, else the first free overflow
 * index (-ENOSPC: none, more veths than RW_MAX_ENDPOINTS collide). An index new to the veth is
 * emptied first, of whatever an interrupted unbind or bind left there (a binding, tables of
 * either family, a bucket). Called under rw_veth_lock(), like every binding, so two veths never
 * take one index at once.
 */
static int veth_index_claim(const struct rw_datapath *dp, __u32 ifindex, __u32 *idx)
{
	int err = veth_index(dp, ifindex, idx), free;

	if (err != -ENOENT)
		return err;
	*idx = RW_VETH_SLOT(ifindex);
	free = index_free(dp, *idx, ifindex);
	for (__u32 o = RW_VETH_SLOTS; free == 0 && o < RW_VETH_INDEXES; o++) {
		*idx = o;
		free = index_free(dp, o, ifindex);
	}
	if (free < 0)
		return free;
	if (!free)
		return -ENOSPC;
	index_empty(dp, *idx, 0);
	return 0;
}

/* The veth's binding at its index: a new inner map, swapped in whole; an overflow index is named
 * in rw_veth_overflow after it (a packet finding the name finds the binding).
 */
static int index_publish(const struct rw_datapath *dp, __u32 ifindex, __u32 idx,
			 const struct rw_endpoint *ep)
{
	struct rw_veth v = {.ifindex = ifindex, .ep = *ep};
	char name[BPF_OBJ_NAME_LEN];
	__u32 zero = 0;
	int fd, err = 0;

	snprintf(name, sizeof(name), "rwveth_%x", ifindex);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, name, sizeof(__u32), sizeof(v), 1, NULL);
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(fd, &zero, &v, BPF_ANY) ||
	    bpf_map_update_elem(dp->map_fd[RW_M_VETH_SLOTS], &idx, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	if (!err && idx >= RW_VETH_SLOTS &&
	    bpf_map_update_elem(dp->map_fd[RW_M_VETH_OVERFLOW], &ifindex, &idx, BPF_ANY))
		err = -errno;
	return err;
}

static int ct_table_fd(const struct rw_datapath *dp, __u32 ifindex, bool ipv6)
{
	__u32 id;
	int fd;

	if (bpf_map_lookup_elem(ct_outer(dp, ipv6), &ifindex, &id))
		return -errno;
	fd = bpf_map_get_fd_by_id(id);
	return fd < 0 ? -errno : fd;
}

int rw_conntrack_table_fd(const struct rw_datapath *dp, __u32 ifindex)
{
	return ct_table_fd(dp, ifindex, false);
}

int rw_conntrack6_table_fd(const struct rw_datapath *dp, __u32 ifindex)
{
	return ct_table_fd(dp, ifindex, true);
}

static bool ct_table_exists(const struct rw_datapath *dp, __u32 ifindex, bool ipv6)
{
	__u32 id;

	return bpf_map_lookup_elem(ct_outer(dp, ipv6), &ifindex, &id) == 0;
}

static __u32 table_size(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.max_entries;
}

/* Room the node's tables of both families take together (ct_node counts each table's size, so a
 * dual-stack veth takes twice a single-stack one's), leaving out the table being replaced.
 */
static int ct_node_used(const struct rw_datapath *dp, __u32 skip, bool skip_six, __u64 *used)
{
	*used = 0;
	for (int ipv6 = 0; ipv6 < 2; ipv6++) {
		__u32 key, *prev = NULL;
		int fd;

		while (bpf_map_get_next_key(ct_outer(dp, ipv6), prev, &key) == 0) {
			prev = &key;
			if (key == skip && ipv6 == skip_six)
				continue;
			fd = ct_table_fd(dp, key, ipv6);
			if (fd < 0)
				continue; /* deleted under our feet */
			*used += table_size(fd);
			close(fd);
		}
		if (errno != ENOENT)
			return -errno;
	}
	return 0;
}

/* The veth's table of the family, as rw_conntrack holds it, at its index too. */
static int ct_index_sync(const struct rw_datapath *dp, __u32 ifindex, bool ipv6, __u32 idx)
{
	int fd = ct_table_fd(dp, ifindex, ipv6), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_update_elem(ct_slots(dp, ipv6), &idx, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	return err;
}

/* Put a fresh, empty table of the configured size in for `ifindex`'s family, replacing any
 * table it had (the packets in flight on the old one finish on it; it is freed after them),
 * in rw_conntrack and at the veth's index `idx` (-1: it has none yet). `replace`: only if it has
 * one (rw_conntrack_flush()).
 */
static int ct_table_reset(const struct rw_datapath *dp, __u32 ifindex, bool ipv6, int idx,
			  bool replace)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	char name[BPF_OBJ_NAME_LEN];
	struct rw_config cfg;
	__u64 used;
	__u32 size;
	int fd, err;

	err = rw_config_read(dp, &cfg);
	if (err)
		return err;
	size = cfg.ct_per_sandbox ? cfg.ct_per_sandbox : RW_CT_PER_SANDBOX;
	if (cfg.ct_node) {
		err = ct_node_used(dp, ifindex, ipv6, &used);
		if (err)
			return err;
		if (used + size > cfg.ct_node)
			return -ENOSPC;
	}
	snprintf(name, sizeof(name), "rwct%c_%x", ipv6 ? '6' : '4', ifindex);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, name,
			    ipv6 ? sizeof(struct rw_ct6_key) : sizeof(struct rw_ct_key),
			    sizeof(struct rw_ct_value), size, &opts);
	if (fd < 0)
		return -errno;
	if (!replace && idx >= 0) {
		/* A new table: both places at once, their grace periods side by side. */
		struct rw_outer_write w[2] = {
			{.map_fd = ct_outer(dp, ipv6), .key = &ifindex, .inner_fd = fd},
			{.map_fd = ct_slots(dp, ipv6), .key = &idx, .inner_fd = fd},
		};

		err = rw_outer_writes(w, 2);
		if (w[0].err && !w[1].err)
			bpf_map_delete_elem(ct_slots(dp, ipv6), &idx);
		close(fd);
		return err;
	}
	/* A replacement only replaces: a veth unbound meanwhile does not get its table back. */
	err = bpf_map_update_elem(ct_outer(dp, ipv6), &ifindex, &fd, replace ? BPF_EXIST : BPF_ANY)
		      ? -errno
		      : 0;
	if (!err && idx >= 0 && bpf_map_update_elem(ct_slots(dp, ipv6), &idx, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	return err;
}

int rw_conntrack_flush(const struct rw_datapath *dp, __u32 ifindex, __be32 pod_ip)
{
	struct rw_endpoint ep;
	__u32 key, *prev = NULL;
	int replaced = 0, err;

	if (ifindex) {
		for (int ipv6 = 0; ipv6 < 2; ipv6++) {
			if (!ct_table_exists(dp, ifindex, ipv6))
				continue;
			__u32 idx;
			int at = veth_index(dp, ifindex, &idx);

			if (at && at != -ENOENT)
				return at; /* the table the programs read could stay: no flush */
			err = ct_table_reset(dp, ifindex, ipv6, at ? -1 : (int)idx, true);
			if (err)
				return err;
			replaced++;
		}
		return replaced;
	}
	/* The veths bound to the pod: a walk of the endpoints, never of the flows. */
	while (bpf_map_get_next_key(dp->map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		prev = &key;
		if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &key, &ep) ||
		    !(ep.flags & RW_EP_IP4) || ep.pod_ip != pod_ip)
			continue;
		err = rw_conntrack_flush(dp, key, 0);
		if (err < 0)
			return err;
		replaced += err;
	}
	return replaced;
}

/* How long a flow may stay idle before rw_conntrack_expire() forgets it. */
#define RW_CT_IDLE_TCP_NS   (3600ULL * 1000000000ULL)
#define RW_CT_IDLE_OTHER_NS (180ULL * 1000000000ULL)

/* Either family's key, walked as bytes; the protocol is at its own offset in each. */
union ct_any_key {
	struct rw_ct_key k4;
	struct rw_ct6_key k6;
};

enum ct_fate { CT_KEEP, CT_TOUCHED, CT_EXPIRED };

/* What the pass does with one flow (key of the family ipv6 says): packets mark a flow active
 * (no clock on the datapath's fast path), and the pass turns that into a time in *v, to write
 * back (CT_TOUCHED); a flow idle past its protocol's limit goes (CT_EXPIRED). A write-back
 * racing a packet at worst stores an older stamp, which only costs the flow one full judgement.
 */
static enum ct_fate ct_fate(const void *key, bool ipv6, struct rw_ct_value *v, __u64 now_ns)
{
	__u8 proto = ipv6 ? ((const struct rw_ct6_key *)key)->proto
			  : ((const struct rw_ct_key *)key)->proto;

	if (v->active) {
		v->active = 0;
		v->seen_ns = now_ns;
		return CT_TOUCHED;
	}
	if (now_ns > v->seen_ns &&
	    now_ns - v->seen_ns > (proto == IPPROTO_TCP ? RW_CT_IDLE_TCP_NS : RW_CT_IDLE_OTHER_NS))
		return CT_EXPIRED;
	return CT_KEEP;
}

/* ct_fate() carried out on one flow: 1 when it was forgotten. */
static int ct_expire_one(int fd, const union ct_any_key *key, bool ipv6, struct rw_ct_value *v,
			 __u64 now_ns)
{
	switch (ct_fate(key, ipv6, v, now_ns)) {
	case CT_TOUCHED:
		bpf_map_update_elem(fd, key, v, BPF_EXIST);
		return 0;
	case CT_EXPIRED:
		return bpf_map_delete_elem(fd, key) == 0;
	default:
		return 0;
	}
}

/* One table walked key by key (where the kernel has no batch lookup for it): the entries
 * visited, each expired one deleted one step behind the walk (deleting the current key would
 * restart it).
 */
static unsigned int ct_expire_by_key(int fd, bool ipv6, __u64 now_ns, int *expired)
{
	union ct_any_key key, next, *kprev = NULL;
	unsigned int visited = 0;
	struct rw_ct_value v;

	for (int more = 1; more;) {
		more = bpf_map_get_next_key(fd, kprev, &next) == 0;
		if (kprev && bpf_map_lookup_elem(fd, &key, &v) == 0)
			*expired += ct_expire_one(fd, &key, ipv6, &v, now_ns);
		key = next;
		kprev = &key;
		visited++;
	}
	return visited;
}

int rw_conntrack_batches(int fd, rw_ct_batch_fn fn, void *ctx)
{
	/* Keys as the kernel writes them: key_size apart. */
	__u8 keys[RW_CT_BATCH * sizeof(struct rw_ct6_key)];
	struct rw_ct_value vals[RW_CT_BATCH];
	__u64 in = 0, out = 0;

	for (bool first = true;; first = false) {
		__u32 count = RW_CT_BATCH;
		int err =
			bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &count, NULL)
				? -errno
				: 0;

		/* EINVAL: no batch for this map here; ENOSPC: a bucket over a batch. */
		if (err && err != -ENOENT)
			return first ? err : 0;
		fn(ctx, keys, vals, count);
		if (err == -ENOENT)
			return 0; /* the last batch */
		in = out;
	}
}

struct ct_expire {
	bool ipv6;
	int fd;
	__u64 now_ns;
	unsigned int visited;
	int expired;
};

/* One batch of a table's expiry pass: ct_fate() for each flow, the writes and the deletes made
 * with one call each per batch where the kernel can (the walk was three bpf(2) calls per flow,
 * on the agent's loop).
 */
static void ct_expire_batch(void *arg, const __u8 *keys, struct rw_ct_value *vals, __u32 count)
{
	LIBBPF_OPTS(bpf_map_batch_opts, upd_opts, .elem_flags = BPF_EXIST);
	struct ct_expire *x = arg;
	size_t ksz = x->ipv6 ? sizeof(struct rw_ct6_key) : sizeof(struct rw_ct_key);
	__u8 upd_keys[RW_CT_BATCH * sizeof(struct rw_ct6_key)];
	__u8 del_keys[RW_CT_BATCH * sizeof(struct rw_ct6_key)];
	struct rw_ct_value upd_vals[RW_CT_BATCH];
	__u32 n_upd = 0, n_del = 0;

	for (__u32 i = 0; i < count; i++) {
		const __u8 *k = keys + i * ksz;

		x->visited++;
		switch (ct_fate(k, x->ipv6, &vals[i], x->now_ns)) {
		case CT_TOUCHED:
			memcpy(upd_keys + n_upd * ksz, k, ksz);
			upd_vals[n_upd++] = vals[i];
			break;
		case CT_EXPIRED:
			memcpy(del_keys + n_del++ * ksz, k, ksz);
			break;
		default:
			break;
		}
	}
	if (n_upd) {
		__u32 c = n_upd;

		/* A flow gone meanwhile fails its BPF_EXIST update: the rest one by one. */
		if (bpf_map_update_batch(x->fd, upd_keys, upd_vals, &c, &upd_opts))
			for (__u32 i = c; i < n_upd; i++)
				bpf_map_update_elem(x->fd, upd_keys + i * ksz, &upd_vals[i],
						    BPF_EXIST);
	}
	if (n_del) {
		__u32 c = n_del;

		/* Stopped at a key gone meanwhile (ENOENT): the rest one by one. */
		if (bpf_map_delete_batch(x->fd, del_keys, &c, NULL))
			for (__u32 i = c; i < n_del; i++)
				c += bpf_map_delete_elem(x->fd, del_keys + i * ksz) == 0;
		x->expired += (int)c;
	}
}

/* One table's expiry pass, in batches, or key by key where the kernel has none for it. */
static unsigned int ct_expire_table(int fd, bool ipv6, __u64 now_ns, int *expired)
{
	struct ct_expire x = {.ipv6 = ipv6, .fd = fd, .now_ns = now_ns};

	if (rw_conntrack_batches(fd, ct_expire_batch, &x))
		return ct_expire_by_key(fd, ipv6, now_ns, expired);
	*expired += x.expired;
	return x.visited;
}

/* The cursor's top bit says which family's outer map the walk is in (ifindexes are positive
 * ints, so the bit is free); the rest is the last veth visited there.
 */
#define RW_CT_CURSOR_IPV6 (1u << 31)

int rw_conntrack_expire(const struct rw_datapath *dp, __u64 now_ns, __u32 *cursor,
			unsigned int budget)
{
	bool ipv6 = *cursor & RW_CT_CURSOR_IPV6;
	__u32 at = *cursor & ~RW_CT_CURSOR_IPV6, ifindex, *prev = at ? &at : NULL;
	unsigned int visited = 0;
	int expired = 0;

	while (visited < budget) {
		int fd;

		if (bpf_map_get_next_key(ct_outer(dp, ipv6), prev, &ifindex)) {
			if (ipv6)
				break;
			ipv6 = true; /* the IPv4 tables are done: on to the IPv6 ones */
			prev = NULL;
			continue;
		}
		at = ifindex;
		prev = &at;
		*cursor = ifindex | (ipv6 ? RW_CT_CURSOR_IPV6 : 0);
		fd = ct_table_fd(dp, ifindex, ipv6);
		if (fd < 0)
			continue;
		visited += ct_expire_table(fd, ipv6, now_ns, &expired);
		close(fd);
	}
	if (visited < budget)
		*cursor = 0; /* the walk reached the end: start over next time */
	return expired;
}

/* ---- bindings ------------------------------------------------------------------------------ */

/* Is `want` the pod `cur` is bound to, as far as cur goes: every address cur binds is bound by
 * want, unchanged? A family want adds to it, or a new gateway, is the same pod; an address
 * changed or dropped is another pod.
 */
static bool ep_same_pod(const struct rw_endpoint *cur, const struct rw_endpoint *want)
{
	if ((cur->flags & RW_EP_IP4) && (!(want->flags & RW_EP_IP4) || cur->pod_ip != want->pod_ip))
		return false;
	if ((cur->flags & RW_EP_IP6) && (!(want->flags & RW_EP_IP6) ||
					 memcmp(cur->pod_ip6, want->pod_ip6, sizeof(cur->pod_ip6))))
		return false;
	return true;
}

/* The binding as it is stored: the fields of a clear flag zeroed, so that they say nothing. */
static void ep_clean(struct rw_endpoint *ep, const struct rw_endpoint *want)
{
	memset(ep, 0, sizeof(*ep));
	ep->flags = want->flags & (RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6);
	if (ep->flags & RW_EP_IP4)
		ep->pod_ip = want->pod_ip;
	if (ep->flags & RW_EP_IP6)
		memcpy(ep->pod_ip6, want->pod_ip6, sizeof(ep->pod_ip6));
	if (ep->flags & RW_EP_GW6)
		memcpy(ep->gw_ip6, want->gw_ip6, sizeof(ep->gw_ip6));
}

/* Where a veth's bucket is: at its veth index of rw_veth_budget when it has one, else in
 * rw_event_budget by its ifindex. Returns the map's fd and sets *key.
 */
static int budget_at(const struct rw_datapath *dp, __u32 ifindex, __u32 *key)
{
	if (veth_index(dp, ifindex, key) == 0)
		return dp->map_fd[RW_M_VETH_BUDGET];
	*key = ifindex;
	return dp->map_fd[RW_M_EVENT_BUDGET];
}

int rw_budget_get(const struct rw_datapath *dp, __u32 ifindex, struct rw_budget *out)
{
	__u32 key;
	int fd = budget_at(dp, ifindex, &key);

	return bpf_map_lookup_elem(fd, &key, out) ? -errno : 0;
}

int rw_budget_set(const struct rw_datapath *dp, __u32 ifindex, const struct rw_budget *b)
{
	__u32 key;
	int fd = budget_at(dp, ifindex, &key);

	return bpf_map_update_elem(fd, &key, b, BPF_ANY) ? -errno : 0;
}

/* Whether the veth is bound as `ep` (ep_clean()) says already, everywhere the programs read it:
 * in rw_endpoints, its binding at its index, and each family's table in rw_conntrack and at the
 * index. Then a bind has nothing to write: the agent's sync of a veth runwall-cni has bound
 * finds it so, and skips two writes of outer maps, a grace period each.
 */
static bool binding_in_place(const struct rw_datapath *dp, __u32 ifindex,
			     const struct rw_endpoint *ep)
{
	static const __u32 family_flag[2] = {RW_EP_IP4, RW_EP_IP6};
	struct rw_endpoint cur;
	struct rw_veth v;
	__u32 idx, id, at_idx;
	bool same;

	if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &ifindex, &cur) ||
	    memcmp(&cur, ep, sizeof(cur)) || veth_index(dp, ifindex, &idx) ||
	    index_binding(dp, idx, &v))
		return false;
	same = v.ifindex == ifindex && !memcmp(&v.ep, ep, sizeof(*ep));
	for (int ipv6 = 0; same && ipv6 < 2; ipv6++)
		if (ep->flags & family_flag[ipv6])
			same = bpf_map_lookup_elem(ct_outer(dp, ipv6), &ifindex, &id) == 0 &&
			       bpf_map_lookup_elem(ct_slots(dp, ipv6), &idx, &at_idx) == 0 &&
			       id == at_idx;
	return same;
}

int rw_endpoint_bind_addrs(const struct rw_datapath *dp, __u32 ifindex,
			   const struct rw_endpoint *want)
{
	static const __u32 family_flag[2] = {RW_EP_IP4, RW_EP_IP6};
	int fd = dp->map_fd[RW_M_ENDPOINTS], err = 0;
	bool made[2] = {false, false};
	__u32 idx = 0;
	struct rw_endpoint cur, ep;

	ep_clean(&ep, want);
	if (!(ep.flags & (RW_EP_IP4 | RW_EP_IP6)))
		return -EINVAL; /* a binding of no address: unbind the veth instead */
	if (binding_in_place(dp, ifindex, &ep))
		return 0;
	if (bpf_map_lookup_elem(fd, &ifindex, &cur))
		/* A veth bound to no pod has no link-local of its pod yet (an ifindex reused). */
		bpf_map_delete_elem(dp->map_fd[RW_M_LL6], &ifindex);
	else if (!ep_same_pod(&cur, &ep))
		/* Unbind first so that no packet sees the new pod with the old pod's flows or
		 * link-local.
		 */
		rw_endpoint_unbind(dp, ifindex);
	/* The tables before the binding: a bound family always has its table. A table the veth
	 * has already (the same pod bound again) keeps its flows; a missing one (lost, or the
	 * family is new) is made, fail-closed until then. Each is put at the veth's index too (its
	 * slot, or an overflow index when another veth holds that), before the binding is.
	 */
	err = veth_index_claim(dp, ifindex, &idx);
	for (int ipv6 = 0; ipv6 < 2 && !err; ipv6++) {
		if (!(ep.flags & family_flag[ipv6]))
			continue;
		if (ct_table_exists(dp, ifindex, ipv6)) {
			err = ct_index_sync(dp, ifindex, ipv6, idx);
			continue;
		}
		err = ct_table_reset(dp, ifindex, ipv6, (int)idx, false);
		made[ipv6] = !err;
	}
	if (!err && bpf_map_update_elem(fd, &ifindex, &ep, BPF_ANY))
		err = -errno;
	/* The binding at its index last: from then on the veth's packets find it. A binding that
	 * cannot get there is no binding (deny-all), not one half in place.
	 */
	if (!err) {
		err = index_publish(dp, ifindex, idx, &ep);
		if (err)
			rw_endpoint_unbind(dp, ifindex);
		return err;
	}
	for (int ipv6 = 0; ipv6 < 2; ipv6++) {
		if (!made[ipv6])
			continue;
		bpf_map_delete_elem(ct_slots(dp, ipv6), &idx);
		bpf_map_delete_elem(ct_outer(dp, ipv6), &ifindex);
	}
	return err;
}

int rw_endpoint_bind(const struct rw_datapath *dp, __u32 ifindex, __be32 pod_ip)
{
	struct rw_endpoint want = {.pod_ip = pod_ip, .flags = RW_EP_IP4};

	return rw_endpoint_bind_addrs(dp, ifindex, &want);
}

int rw_endpoint_get(const struct rw_datapath *dp, __u32 ifindex, struct rw_endpoint *out)
{
	memset(out, 0, sizeof(*out));
	return bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &ifindex, out) ? -errno : 0;
}

int rw_endpoint_unbind(const struct rw_datapath *dp, __u32 ifindex)
{
	__u32 idx;
	int err = veth_index(dp, ifindex, &idx);

	/* The overflow name first, then its index (the deletes wait for the packets on it), then
	 * the tables: from then on no packet of the veth finds its binding or takes the fast path.
	 * An index that cannot be told: still bound where the programs read it, nothing else undone.
	 */
	bpf_map_delete_elem(dp->map_fd[RW_M_VETH_OVERFLOW], &ifindex);
	if (err && err != -ENOENT)
		return err;
	err = index_empty(dp, err ? NO_INDEX : idx, ifindex);
	if (bpf_map_delete_elem(dp->map_fd[RW_M_ENDPOINTS], &ifindex) && errno != ENOENT && !err)
		err = -errno;
	bpf_map_delete_elem(dp->map_fd[RW_M_EVENT_BUDGET], &ifindex);
	bpf_map_delete_elem(dp->map_fd[RW_M_LL6], &ifindex);
	return err;
}
