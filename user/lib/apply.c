// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* apply.c: a snapshot becomes fresh inner maps in the idle slot, then one flip makes it live. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>

#include "apply.h"
#include "log.h"
#include "util.h"

#define POLICY_TABLES (RW_M_INBOUND - RW_M_PODS + 1)

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
	[RW_M_PODS - RW_M_PODS] = { BPF_MAP_TYPE_HASH, "rw_pods_i", sizeof(__be32),
				    sizeof(struct rw_pod), RW_MAX_PODS, 0 },
	[RW_M_ALLOW_EXACT - RW_M_PODS] = { BPF_MAP_TYPE_HASH, "rw_allow_x_i",
					   sizeof(struct rw_allow_key), sizeof(struct rw_rule),
					   RW_MAX_ALLOW_EXACT, 0 },
	[RW_M_ALLOW_CIDR - RW_M_PODS] = { BPF_MAP_TYPE_LPM_TRIE, "rw_allow_c_i",
					  sizeof(struct rw_allow_lpm_key), sizeof(struct rw_rule),
					  RW_MAX_ALLOW_CIDR, BPF_F_NO_PREALLOC },
	[RW_M_DENY - RW_M_PODS] = { BPF_MAP_TYPE_LPM_TRIE, "rw_deny_i",
				    sizeof(struct rw_cidr_lpm_key), sizeof(__u32), RW_MAX_DENY,
				    BPF_F_NO_PREALLOC },
	[RW_M_INBOUND - RW_M_PODS] = { BPF_MAP_TYPE_LPM_TRIE, "rw_inbound_i",
				       sizeof(struct rw_inbound_lpm_key), sizeof(struct rw_rule),
				       RW_MAX_INBOUND, BPF_F_NO_PREALLOC },
};

struct build {
	const struct rw_datapath *dp;
	int fd[POLICY_TABLES];
	unsigned int count[POLICY_TABLES];
	char *err;
	size_t errlen;
};

/* Test hook (tests/netns/test_faults.sh): RUNWALL_APPLY_FAULT=STEP[:REVISION] aborts the process
 * at a named step of an apply (before-write, half, after-flip), to show that a crash at any step
 * leaves the old or the new snapshot in force, never a mix. Unset, it costs one getenv().
 */
static void fault_point(const char *step, uint64_t revision)
{
	const char *f = getenv("RUNWALL_APPLY_FAULT");
	size_t n = strlen(step);

	if (f && !strncmp(f, step, n) &&
	    (!f[n] || (f[n] == ':' && strtoull(f + n + 1, NULL, 10) == revision)))
		abort();
}

static int fail(struct build *b, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->err, b->errlen, fmt, ap);
	va_end(ap);
	return err;
}

static int put(struct build *b, enum rw_map_id table, const void *key, const void *value)
{
	int t = table - RW_M_PODS;

	if (b->count[t] >= inner_specs[t].max_entries)
		return fail(b, -E2BIG, "%s: more than %u entries", rw_map_names[table],
			    inner_specs[t].max_entries);
	if (bpf_map_update_elem(b->fd[t], key, value, BPF_ANY))
		return fail(b, -errno, "%s: update: %s", rw_map_names[table], strerror(errno));
	b->count[t]++;
	return 0;
}

/* One entry per protocol and port of a rule. Allow rules: /32 destinations in the exact hash,
 * wider ones in the LPM trie, under `scope`. Inbound rules: the peer CIDR in the inbound trie.
 */
static int put_rule(struct build *b, enum rw_map_id table, __u32 scope,
		    const struct rw_policy_rule *r, __u32 rule_id)
{
	struct rw_rule val = { .rule_id = rule_id };
	const __u16 *ports[2] = { r->tcp, r->udp };
	size_t n[2] = { r->n_tcp, r->n_udp };
	const __u8 protos[2] = { IPPROTO_TCP, IPPROTO_UDP };
	int err;

	for (int p = 0; p < 2; p++) {
		for (size_t i = 0; i < n[p]; i++) {
			__be16 port = htons(ports[p][i]);

			if (table == RW_M_INBOUND) {
				struct rw_inbound_lpm_key k = {
					.prefixlen = RW_INBOUND_LPM_FIXED_BITS + r->prefixlen,
					.dport = port, .proto = protos[p], .saddr = r->addr,
				};

				err = put(b, RW_M_INBOUND, &k, &val);
			} else if (r->prefixlen == 32) {
				struct rw_allow_key k = {
					.scope = scope, .daddr = r->addr, .dport = port,
					.proto = protos[p],
				};

				err = put(b, RW_M_ALLOW_EXACT, &k, &val);
			} else {
				struct rw_allow_lpm_key k = {
					.prefixlen = RW_ALLOW_LPM_FIXED_BITS + r->prefixlen,
					.scope = scope, .dport = port, .proto = protos[p],
					.daddr = r->addr,
				};

				err = put(b, RW_M_ALLOW_CIDR, &k, &val);
			}
			if (err)
				return err;
		}
	}
	return 0;
}

/* Map run ids to counter indexes: a run keeps its index across snapshots; a new run gets the
 * lowest index that no run of the live slot uses, with its counters zeroed.
 */
struct run_slot {
	__u32 idx;
	__u32 gen;
};

static int live_runs(const struct rw_datapath *dp, struct rw_pod **pods_out, size_t *n_out)
{
	int fd = rw_live_inner_fd(dp, RW_M_PODS);
	struct rw_pod *pods = NULL;
	__be32 key, *prev = NULL;
	size_t n = 0, cap = 0;

	*pods_out = NULL;
	*n_out = 0;
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	while (bpf_map_get_next_key(fd, prev, &key) == 0) {
		if (n == cap) {
			struct rw_pod *grown = realloc(pods, (cap = cap ? cap * 2 : 64) * sizeof(*pods));

			if (!grown) {
				free(pods);
				close(fd);
				return -ENOMEM;
			}
			pods = grown;
		}
		if (bpf_map_lookup_elem(fd, &key, &pods[n]) == 0)
			n++;
		prev = &key;
	}
	close(fd);
	*pods_out = pods;
	*n_out = n;
	return 0;
}

static const struct rw_policy_run *find_run(const struct rw_policy *p, const char *id)
{
	for (size_t i = 0; p && i < p->n_runs; i++)
		if (!strcmp(p->runs[i].id, id))
			return &p->runs[i];
	return NULL;
}

static int assign_runs(const struct rw_datapath *dp, const struct rw_policy *prev,
		       const struct rw_policy *next, struct run_slot *slots, char *err,
		       size_t errlen)
{
	unsigned char *used = calloc(RW_MAX_RUNS, 1);
	struct rw_pod *live = NULL;
	size_t n_live = 0;
	__u32 cursor = 1;
	int ret;

	if (!used)
		return -ENOMEM;
	ret = live_runs(dp, &live, &n_live);
	if (ret)
		goto cleanup;
	for (size_t i = 0; i < n_live; i++)
		if (live[i].run_idx < RW_MAX_RUNS)
			used[live[i].run_idx] = 1;

	for (size_t r = 0; r < next->n_runs; r++) {
		const struct rw_policy_run *run = &next->runs[r];
		const struct rw_policy_run *old = find_run(prev, run->id);

		slots[r].idx = 0;
		for (size_t i = 0; i < n_live; i++) {
			if (!strncmp(live[i].run_id, run->id, RW_RUN_ID_LEN)) {
				slots[r].idx = live[i].run_idx;
				slots[r].gen = live[i].run_gen;
				break;
			}
		}
		/* A run keeps its generation only when we know its policy did not change. */
		if (!slots[r].idx || !old || !rw_policy_run_equal(prev, old, next, run))
			slots[r].gen = (__u32)next->revision;
		if (slots[r].idx)
			continue;
		while (cursor < RW_MAX_RUNS && used[cursor])
			cursor++;
		if (cursor >= RW_MAX_RUNS) {
			snprintf(err, errlen, "runs: more than %d runs on one node", RW_MAX_RUNS - 1);
			ret = -E2BIG;
			goto cleanup;
		}
		used[cursor] = 1;
		slots[r].idx = cursor;
		ret = rw_counters_zero(dp, cursor);
		if (ret) {
			snprintf(err, errlen, "%s: zeroing run counters: %s",
				 rw_map_names[RW_M_COUNTERS], strerror(-ret));
			goto cleanup;
		}
	}
cleanup:
	free(live);
	free(used);
	return ret;
}

static int fill(struct build *b, const struct rw_policy *p, const struct run_slot *slots)
{
	int err;

	for (size_t r = 0; r < p->n_runs; r++) {
		const struct rw_policy_run *run = &p->runs[r];
		struct rw_pod pod = {
			.run_idx = slots[r].idx,
			.run_gen = slots[r].gen,
			.egress_mode = rw_policy_run_egress(p, run),
		};

		snprintf(pod.run_id, sizeof(pod.run_id), "%s", run->id);
		for (size_t i = 0; i < run->n_pods; i++) {
			err = put(b, RW_M_PODS, &run->pods[i], &pod);
			if (err)
				return err;
		}
		for (size_t i = 0; i < run->n_allow; i++) {
			err = put_rule(b, RW_M_ALLOW_EXACT, slots[r].idx, &run->allow[i],
				       RW_RULE_ID(RW_RULE_KIND_RUN, r, i));
			if (err)
				return err;
		}
	}
	for (size_t i = 0; i < p->n_services; i++) {
		err = put_rule(b, RW_M_ALLOW_EXACT, 0, &p->services[i],
			       RW_RULE_ID(RW_RULE_KIND_SERVICE, i, 0));
		if (err)
			return err;
	}
	for (size_t i = 0; i < p->n_inbound; i++) {
		err = put_rule(b, RW_M_INBOUND, 0, &p->inbound[i],
			       RW_RULE_ID(RW_RULE_KIND_INBOUND, i, 0));
		if (err)
			return err;
	}
	for (size_t i = 0; i < p->n_deny; i++) {
		struct rw_cidr_lpm_key k = { .prefixlen = p->deny[i].prefixlen,
					     .addr = p->deny[i].addr };
		__u32 one = 1;

		err = put(b, RW_M_DENY, &k, &one);
		if (err)
			return err;
	}
	return 0;
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

static const char *run_of_pod(const struct rw_policy *p, __be32 ip)
{
	for (size_t r = 0; r < p->n_runs; r++)
		for (size_t i = 0; i < p->runs[r].n_pods; i++)
			if (p->runs[r].pods[i] == ip)
				return p->runs[r].id;
	return NULL;
}

/* Pods of the old slot whose run changed or went away: their flows were opened under another
 * run, so they are forgotten.
 */
static int flush_moved_pods(const struct rw_datapath *dp, __u32 old_slot,
			    const struct rw_policy *next)
{
	int flushed = 0, fd, ret;
	__be32 key, *prev = NULL;

	fd = slot_inner_fd(dp, RW_M_PODS, old_slot);
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	while (bpf_map_get_next_key(fd, prev, &key) == 0) {
		const char *now_run = run_of_pod(next, key);
		struct rw_pod old;

		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &old))
			continue;
		if (now_run && !strncmp(now_run, old.run_id, RW_RUN_ID_LEN))
			continue;
		ret = rw_conntrack_flush(dp, 0, key);
		if (ret > 0)
			flushed += ret;
	}
	close(fd);
	return flushed;
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

int rw_apply(const struct rw_datapath *dp, const struct rw_policy *prev,
	     const struct rw_policy *next, struct rw_apply_result *res, char *err, size_t errlen)
{
	struct build b = { .dp = dp, .err = err, .errlen = errlen };
	double t0 = rw_now_ms(), t1;
	struct run_slot *slots = NULL;
	struct rw_config cfg;
	__u32 idle;
	int ret;

	memset(res, 0, sizeof(*res));
	for (int t = 0; t < POLICY_TABLES; t++)
		b.fd[t] = -1;
	err[0] = '\0';

	ret = rw_config_read(dp, &cfg);
	if (ret)
		return fail(&b, ret, "%s: read: %s", rw_map_names[RW_M_CONFIG], strerror(-ret));
	if (RW_STATE_READY(cfg.state) && next->revision <= RW_STATE_REVISION(cfg.state))
		return fail(&b, -ESTALE, "revision: %llu is not newer than %llu, the one in force",
			    (unsigned long long)next->revision,
			    (unsigned long long)RW_STATE_REVISION(cfg.state));
	res->previous = RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0;
	/* Before the first snapshot both slots are empty; either can be filled. */
	idle = RW_STATE_READY(cfg.state) ? !RW_STATE_SLOT(cfg.state) : 0;

	slots = calloc(next->n_runs ? next->n_runs : 1, sizeof(*slots));
	if (!slots)
		return fail(&b, -ENOMEM, "out of memory");
	ret = assign_runs(dp, prev, next, slots, err, errlen);
	if (ret)
		goto cleanup;

	for (int t = 0; t < POLICY_TABLES; t++) {
		LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = inner_specs[t].flags);

		b.fd[t] = bpf_map_create(inner_specs[t].type, inner_specs[t].name,
					 inner_specs[t].key_size, inner_specs[t].value_size,
					 inner_specs[t].max_entries, &opts);
		if (b.fd[t] < 0) {
			ret = fail(&b, -errno, "%s: creating an inner map: %s",
				   rw_map_names[RW_M_PODS + t], strerror(errno));
			goto cleanup;
		}
	}
	ret = fill(&b, next, slots);
	if (ret)
		goto cleanup;
	/* Each update of an ARRAY_OF_MAPS waits for a grace period; the idle slot is not read by
	 * any packet, so these only make the new maps reachable.
	 */
	fault_point("before-write", next->revision);
	for (int t = 0; t < POLICY_TABLES; t++) {
		if (t == POLICY_TABLES / 2)
			fault_point("half", next->revision);
		if (bpf_map_update_elem(dp->map_fd[RW_M_PODS + t], &idle, &b.fd[t], BPF_ANY)) {
			ret = fail(&b, -errno, "%s[%u]: update: %s", rw_map_names[RW_M_PODS + t],
				   idle, strerror(errno));
			goto cleanup;
		}
	}
	t1 = rw_now_ms();
	res->build_ms = t1 - t0;

	/* The flip: one 64-bit store that packets read with one load. */
	cfg.state = RW_STATE(next->revision, 1, idle);
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		cfg.applied_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	}
	ret = rw_config_write(dp, &cfg);
	if (ret) {
		fail(&b, ret, "%s: flip: %s", rw_map_names[RW_M_CONFIG], strerror(-ret));
		goto cleanup;
	}
	fault_point("after-flip", next->revision);
	/* Rewriting an outer slot with the map it already holds costs nothing but the grace period
	 * it waits for: afterwards no program still runs with the old slot's maps.
	 */
	bpf_map_update_elem(dp->map_fd[RW_M_PODS], &idle, &b.fd[0], BPF_ANY);
	res->flip_ms = rw_now_ms() - t1;

	if (res->previous) {
		ret = flush_moved_pods(dp, !idle, next);
		res->flows_flushed = ret > 0 ? ret : 0;
	}
	ret = 0;

	res->revision = next->revision;
	res->slot = idle;
	res->runs = next->n_runs;
	res->pods = b.count[0];
	for (int t = 1; t < POLICY_TABLES; t++)
		res->entries += b.count[t];
	res->total_ms = rw_now_ms() - t0;
cleanup:
	/* The outer maps hold their own references: our fds can go either way. */
	for (int t = 0; t < POLICY_TABLES; t++)
		if (b.fd[t] >= 0)
			close(b.fd[t]);
	free(slots);
	return ret;
}
