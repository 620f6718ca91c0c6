// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* refused_top.c: the destinations refused most among the events in memory. The refused egress
 * events' keys are gathered, sorted so that equal keys sit together, counted by run, and the k
 * largest counts kept: O(n log n) in the events held (--events), once a scrape.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "refused_top.h"

struct gather {
	struct rw_refused_top *keys;
	size_t n;
};

static int gather_one(const struct rw_evstore_entry *e, void *data)
{
	struct gather *g = data;
	struct rw_refused_top *t;

	if (e->ev.dir != RW_DIR_EGRESS)
		return 0;
	t = &g->keys[g->n++];
	memset(t, 0, sizeof(*t));
	t->dst = rw_event_dst(&e->ev);
	t->proto = e->ev.proto;
	t->port = t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP ? ntohs(e->ev.dport) : 0;
	t->reason = e->ev.reason;
	t->ethertype = e->ev.ethertype;
	t->count = 1;
	return 0;
}

/* The key's order: address, port, protocol, reason, ethertype. */
static int key_cmp(const struct rw_refused_top *a, const struct rw_refused_top *b)
{
	int c = memcmp(&a->dst, &b->dst, sizeof(a->dst));

	if (c)
		return c;
	if (a->port != b->port)
		return a->port < b->port ? -1 : 1;
	if (a->proto != b->proto)
		return a->proto < b->proto ? -1 : 1;
	if (a->reason != b->reason)
		return a->reason < b->reason ? -1 : 1;
	return a->ethertype == b->ethertype ? 0 : a->ethertype < b->ethertype ? -1 : 1;
}

static int by_key(const void *x, const void *y)
{
	return key_cmp(x, y);
}

/* Most first, then by key. */
static int by_count(const void *x, const void *y)
{
	const struct rw_refused_top *a = x, *b = y;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return key_cmp(a, b);
}

int rw_refused_top(const struct rw_evstore *s, struct rw_refused_top *out, size_t k)
{
	struct rw_evfilter f;
	struct gather g = {0};
	size_t runs = 0;

	if (!s->count || !k)
		return 0;
	g.keys = malloc(s->count * sizeof(*g.keys));
	if (!g.keys)
		return -ENOMEM;
	rw_evfilter_init(&f);
	f.verdict = RW_VERDICT_DROP;
	f.limit = s->count; /* every one held, past the API's bound */
	rw_evstore_query(s, &f, gather_one, &g);
	qsort(g.keys, g.n, sizeof(*g.keys), by_key);
	for (size_t i = 0; i < g.n; i++) {
		if (runs && !key_cmp(&g.keys[runs - 1], &g.keys[i]))
			g.keys[runs - 1].count++;
		else
			g.keys[runs++] = g.keys[i];
	}
	qsort(g.keys, runs, sizeof(*g.keys), by_count);
	if (runs > k)
		runs = k;
	memcpy(out, g.keys, runs * sizeof(*out));
	free(g.keys);
	return (int)runs;
}
