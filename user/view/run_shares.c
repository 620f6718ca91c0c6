// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* run_shares.c: per-run shares of a bounded table: a list per run, a max-heap of runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "run_shares.h"

static void run_key(char out[RW_RUN_ID_LEN], const char *run)
{
	size_t n = run ? strnlen(run, RW_RUN_ID_LEN - 1) : 0;

	memset(out, 0, RW_RUN_ID_LEN);
	memcpy(out, run ? run : "", n);
}

static size_t bucket_of(const struct rw_shares *s, const char id[RW_RUN_ID_LEN])
{
	return rw_siphash(&s->hash_key, id, strnlen(id, RW_RUN_ID_LEN)) % s->n_buckets;
}

int rw_shares_init(struct rw_shares *s, size_t cap, size_t floor, const struct rw_hash_key *key)
{
	size_t n_pool;

	memset(s, 0, sizeof(*s));
	if (!cap)
		return -EINVAL;
	/* A run holds one entry at the least: more runs than entries never hold any at once. */
	n_pool = cap < RW_SHARE_RUNS_MAX ? cap + 1 : RW_SHARE_RUNS_MAX;
	s->cap = cap;
	s->floor = floor < 1 ? 1 : floor > cap ? cap : floor;
	s->hash_key = *key;
	s->n_buckets = n_pool * 2 + 1;
	s->pool = calloc(n_pool, sizeof(*s->pool));
	s->buckets = calloc(s->n_buckets, sizeof(*s->buckets));
	s->heap = calloc(n_pool, sizeof(*s->heap));
	if (!s->pool || !s->buckets || !s->heap) {
		rw_shares_free(s);
		return -ENOMEM;
	}
	s->catch_all = &s->pool[0];
	for (size_t i = n_pool; i-- > 1;) {
		s->pool[i].hnext = s->free_runs;
		s->free_runs = &s->pool[i];
	}
	return 0;
}

void rw_shares_free(struct rw_shares *s)
{
	free(s->pool);
	free(s->buckets);
	free(s->heap);
	memset(s, 0, sizeof(*s));
}

/* One event asks for its run several times (victim, share, add): the last one found is kept. */
static struct rw_share_run *lookup(const struct rw_shares *s, const char id[RW_RUN_ID_LEN])
{
	struct rw_shares *m = (struct rw_shares *)s;
	struct rw_share_run *r;

	if (!id[0])
		return s->catch_all;
	if (s->last && !memcmp(s->last->id, id, RW_RUN_ID_LEN))
		return s->last;
	for (r = s->buckets[bucket_of(s, id)]; r; r = r->hnext)
		if (!memcmp(r->id, id, RW_RUN_ID_LEN)) {
			m->last = r;
			return r;
		}
	return NULL;
}

static void heap_swap(struct rw_shares *s, size_t i, size_t j)
{
	struct rw_share_run *t = s->heap[i];

	s->heap[i] = s->heap[j];
	s->heap[j] = t;
	s->heap[i]->heap_pos = i;
	s->heap[j]->heap_pos = j;
}

static void sift_up(struct rw_shares *s, size_t i)
{
	while (i > 0 && s->heap[(i - 1) / 2]->count < s->heap[i]->count) {
		heap_swap(s, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void sift_down(struct rw_shares *s, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, most = i;

		if (l < s->n_runs && s->heap[l]->count > s->heap[most]->count)
			most = l;
		if (r < s->n_runs && s->heap[r]->count > s->heap[most]->count)
			most = r;
		if (most == i)
			return;
		heap_swap(s, i, most);
		i = most;
	}
}

/* The run of id, made a holder when it held nothing (the catch-all when the pool is out). */
static struct rw_share_run *holder(struct rw_shares *s, const char *run)
{
	char id[RW_RUN_ID_LEN];
	struct rw_share_run *r;
	size_t b;

	run_key(id, run);
	r = lookup(s, id);
	if (!r && s->free_runs) {
		r = s->free_runs;
		s->free_runs = r->hnext;
		memset(r, 0, sizeof(*r));
		memcpy(r->id, id, RW_RUN_ID_LEN);
		b = bucket_of(s, id);
		r->hnext = s->buckets[b];
		s->buckets[b] = r;
	}
	if (!r)
		r = s->catch_all;
	if (!r->count) {
		r->heap_pos = s->n_runs;
		s->heap[s->n_runs++] = r;
	}
	return r;
}

static void release(struct rw_shares *s, struct rw_share_run *r)
{
	size_t i = r->heap_pos, last = --s->n_runs;
	struct rw_share_run **pp;

	if (i != last) {
		heap_swap(s, i, last);
		sift_down(s, i);
		sift_up(s, i);
	}
	if (r == s->catch_all)
		return;
	if (s->last == r)
		s->last = NULL;
	for (pp = &s->buckets[bucket_of(s, r->id)]; *pp; pp = &(*pp)->hnext)
		if (*pp == r) {
			*pp = r->hnext;
			break;
		}
	r->hnext = s->free_runs;
	s->free_runs = r;
}

void rw_shares_add(struct rw_shares *s, struct rw_share_link *l, const char *run)
{
	struct rw_share_run *r = holder(s, run);

	l->run = r;
	RW_LRU_PUSH(r, l);
	r->count++;
	sift_up(s, r->heap_pos);
}

void rw_shares_del(struct rw_shares *s, struct rw_share_link *l)
{
	struct rw_share_run *r = l->run;

	if (!r)
		return;
	RW_LRU_UNLINK(r, l);
	l->run = NULL;
	if (--r->count)
		sift_down(s, r->heap_pos);
	else
		release(s, r);
}

void rw_shares_touch(struct rw_shares *s, struct rw_share_link *l)
{
	struct rw_share_run *r = l->run;

	if (!r || r->newest == l)
		return;
	RW_LRU_UNLINK(r, l);
	RW_LRU_PUSH(r, l);
}

static const struct rw_share_run *find(const struct rw_shares *s, const char *run)
{
	char id[RW_RUN_ID_LEN];
	const struct rw_share_run *r;

	run_key(id, run);
	r = lookup(s, id);
	/* A run with no record of its own, the pool being out, is counted in the catch-all. */
	if (!r && !s->free_runs)
		r = s->catch_all;
	return r;
}

size_t rw_shares_count(const struct rw_shares *s, const char *run)
{
	const struct rw_share_run *r = find(s, run);

	return r ? r->count : 0;
}

size_t rw_shares_fair(const struct rw_shares *s, const char *run)
{
	const struct rw_share_run *r = find(s, run);
	size_t holders = s->n_runs + (r && r->count ? 0 : 1), share = s->cap / holders;

	return share < s->floor ? s->floor : share;
}

struct rw_share_run *rw_shares_heaviest(const struct rw_shares *s)
{
	return s->n_runs ? s->heap[0] : NULL;
}

struct rw_share_link *rw_shares_victim(const struct rw_shares *s, const char *run,
				       enum rw_share_cause *cause)
{
	const struct rw_share_run *r = find(s, run);
	struct rw_share_run *most = rw_shares_heaviest(s);

	if (r && r->count && r->count >= rw_shares_fair(s, run)) {
		*cause = RW_SHARE_OWN;
		return r->oldest;
	}
	if (!most)
		return NULL;
	*cause = most == r ? RW_SHARE_OWN : RW_SHARE_FAIR;
	return most->oldest;
}
