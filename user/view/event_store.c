// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* event_store.c: recent verdict events, per-destination aggregates, and the API's filters. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_store.h"
#include "reasons.h"

#define QUERY_MAX_PARAMS 16
#define QUERY_MAX_VALUE	 256

void rw_evfilter_init(struct rw_evfilter *f)
{
	memset(f, 0, sizeof(*f));
	f->verdict = -1;
	f->reason = -1;
}

bool rw_evfilter_match(const struct rw_evfilter *f, const struct rw_event *ev, const char *node)
{
	if (f->verdict >= 0 && ev->verdict != f->verdict)
		return false;
	if (f->reason >= 0 && ev->reason != f->reason)
		return false;
	if (f->run[0] && strncmp(ev->run_id, f->run, RW_RUN_ID_LEN))
		return false;
	if (f->node[0] && strcmp(node ? node : "", f->node))
		return false;
	if (f->has_pod) {
		struct rw_ip pod = rw_event_pod_ip(ev);

		if (!rw_ip_eq(&pod, &f->pod))
			return false;
	}
	return !f->has_dst || rw_event_at(ev, rw_event_peer_ip(ev), &f->dst, f->dport);
}

static int set_err(char *err, size_t errlen, const char *fmt, const char *key, const char *value)
{
	snprintf(err, errlen, fmt, key, value);
	return -EINVAL;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

static bool valid_id(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n >= max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-' || *s == ':'))
			return false;
	return true;
}

/* A run id or a node name (valid_id(), shorter than size) into id; fmt says why not. */
static int set_id(char *id, size_t size, const char *value, const char *fmt, char *err,
		  size_t errlen)
{
	if (!valid_id(value, size))
		return set_err(err, errlen, fmt, value, "");
	snprintf(id, size, "%s", value);
	return 0;
}

int rw_query_set(struct rw_evfilter *f, const char *key, const char *value, char *err,
		 size_t errlen)
{
	struct rw_ip ip;
	uint64_t n;
	__u16 port;
	int bad;

	if (!value)
		value = "";
	if (strlen(value) >= QUERY_MAX_VALUE)
		return set_err(err, errlen, "%s: value longer than 255 bytes%s", key, "");
	if (!strcmp(key, "run"))
		return set_id(f->run, sizeof(f->run), value,
			      "run '%s': expected a run id (1-63 of [A-Za-z0-9._-])%s", err,
			      errlen);
	if (!strcmp(key, "node"))
		return set_id(f->node, sizeof(f->node), value,
			      "node '%s': expected a node name (1-63 of [A-Za-z0-9._:-])%s", err,
			      errlen);
	if (!strcmp(key, "pod")) {
		if (rw_ip_parse(value, &ip))
			return set_err(err, errlen, "pod '%s': expected an IPv4 or IPv6 address%s",
				       value, "");
		f->has_pod = true;
		f->pod = ip;
	} else if (!strcmp(key, "verdict")) {
		if (!strcmp(value, "allow") || !strcmp(value, "allowed"))
			f->verdict = RW_VERDICT_ALLOW;
		else if (!strcmp(value, "drop") || !strcmp(value, "dropped"))
			f->verdict = RW_VERDICT_DROP;
		else
			return set_err(err, errlen, "verdict '%s': expected allow or drop%s", value,
				       "");
	} else if (!strcmp(key, "reason")) {
		int r = rw_reason_parse(value);

		if (r < 0)
			return set_err(err, errlen, "reason '%s': not a reason name%s", value, "");
		f->reason = r;
	} else if (!strcmp(key, "dst")) {
		bad = rw_ip_port_parse(value, &ip, &port);
		if (bad == -ERANGE)
			return set_err(err, errlen, "dst '%s': port must be 1-65535%s", value, "");
		if (bad)
			return set_err(err, errlen,
				       "dst '%s': expected IP, IP:PORT or [IPv6]:PORT%s", value,
				       "");
		f->dport = port;
		f->has_dst = true;
		f->dst = ip;
	} else if (!strcmp(key, "since")) {
		if (parse_u64(value, UINT64_MAX, &n))
			return set_err(err, errlen,
				       "since '%s': expected an event id (an unsigned "
				       "integer)%s",
				       value, "");
		f->since = n;
	} else if (!strcmp(key, "limit")) {
		if (parse_u64(value, RW_QUERY_MAX_LIMIT, &n) || n == 0)
			return set_err(err, errlen, "limit '%s': expected 1-10000%s", value, "");
		f->limit = (unsigned int)n;
	} else {
		return set_err(err, errlen,
			       "unknown parameter '%s'; valid: run, pod, verdict, "
			       "reason, dst, node, since, limit%s",
			       key, "");
	}
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode in[0..len) into out (size cap, NUL-terminated). -EINVAL: a bad escape, an
 * embedded NUL; -E2BIG: longer than cap - 1.
 */
static int decode(const char *in, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EINVAL;
			hi = hexval(in[i + 1]);
			lo = hexval(in[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == '\0')
			return -EINVAL;
		if (o + 1 >= cap)
			return -E2BIG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

int rw_query_parse(const char *qs, size_t len, struct rw_evfilter *f, char *err, size_t errlen)
{
	char key[32], value[QUERY_MAX_VALUE];
	size_t pos = 0;
	int n = 0, ret;

	while (pos < len) {
		const char *p = qs + pos, *amp = memchr(p, '&', len - pos), *eq;
		size_t plen = amp ? (size_t)(amp - p) : len - pos;

		pos += plen + 1;
		if (!plen)
			continue;
		if (++n > QUERY_MAX_PARAMS) {
			snprintf(err, errlen, "more than %d query parameters", QUERY_MAX_PARAMS);
			return -EINVAL;
		}
		eq = memchr(p, '=', plen);
		ret = decode(p, eq ? (size_t)(eq - p) : plen, key, sizeof(key));
		if (ret) {
			snprintf(err, errlen, "query parameter %d: %s name", n,
				 ret == -E2BIG ? "too long a" : "badly encoded");
			return -EINVAL;
		}
		ret = eq ? decode(eq + 1, plen - (size_t)(eq + 1 - p), value, sizeof(value)) : 0;
		if (!eq)
			value[0] = '\0';
		if (ret) {
			snprintf(err, errlen, "%s: %s value", key,
				 ret == -E2BIG ? "too long a" : "badly encoded");
			return -EINVAL;
		}
		ret = rw_query_set(f, key, value, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- recent events ---- */

int rw_evstore_init(struct rw_evstore *s, size_t cap)
{
	int err;

	memset(s, 0, sizeof(*s));
	if (!cap || cap > RW_EVSTORE_MAX)
		return -EINVAL;
	s->slots = calloc(cap, sizeof(*s->slots));
	s->order = calloc(cap * 2, sizeof(*s->order));
	err = rw_shares_init(&s->shares, cap, RW_SHARE_FLOOR, rw_hash_key());
	if (!s->slots || !s->order || err) {
		rw_evstore_free(s);
		return -ENOMEM;
	}
	s->cap = cap;
	s->order_cap = cap * 2;
	s->next_id = 1;
	return 0;
}

void rw_evstore_free(struct rw_evstore *s)
{
	for (size_t i = 0; s->slots && i < s->cap; i++)
		free(s->slots[i].json);
	free(s->slots);
	free(s->order);
	rw_shares_free(&s->shares);
	memset(s, 0, sizeof(*s));
}

static void order_squeeze(struct rw_evstore *s)
{
	size_t n = 0;

	for (size_t i = s->head; i < s->head + s->len; i++) {
		struct rw_evstore_entry *e = s->order[i].e;

		if (!e)
			continue;
		e->pos = n;
		s->order[n++] = s->order[i];
	}
	s->head = 0;
	s->len = n;
}

uint64_t rw_evstore_add(struct rw_evstore *s, const struct rw_event *ev, const char *node,
			const char *json, size_t json_len)
{
	struct rw_evstore_entry *e;
	char *copy = malloc(json_len + 1);

	if (!copy)
		return 0;
	memcpy(copy, json, json_len);
	copy[json_len] = '\0';
	if (s->count == s->cap) {
		enum rw_share_cause cause = RW_SHARE_OWN;
		struct rw_share_link *l = rw_shares_victim(&s->shares, ev->run_id, &cause);

		e = (struct rw_evstore_entry *)((char *)l -
						offsetof(struct rw_evstore_entry, share));
		rw_shares_del(&s->shares, &e->share);
		s->order[e->pos].e = NULL;
		free(e->json);
		e->json = NULL;
		s->count--;
		s->evicted++;
		s->displaced[cause]++;
		while (s->len && !s->order[s->head].e) {
			s->head++;
			s->len--;
		}
	} else {
		e = &s->slots[s->count];
	}
	if (s->head + s->len == s->order_cap)
		order_squeeze(s);
	e->id = s->next_id++;
	e->ev = *ev;
	snprintf(e->node, sizeof(e->node), "%s", node ? node : "");
	e->json = copy;
	e->json_len = json_len;
	e->pos = s->head + s->len;
	s->order[e->pos] = (struct rw_evstore_pos){.id = e->id, .e = e};
	s->len++;
	s->count++;
	rw_shares_add(&s->shares, &e->share, ev->run_id);
	return e->id;
}

uint64_t rw_evstore_first_id(const struct rw_evstore *s)
{
	return s->count ? s->order[s->head].id : 0;
}

uint64_t rw_evstore_last_id(const struct rw_evstore *s)
{
	return s->count ? s->next_id - 1 : 0;
}

size_t rw_evstore_query(const struct rw_evstore *s, const struct rw_evfilter *f,
			int (*fn)(const struct rw_evstore_entry *e, void *data), void *data)
{
	size_t lo = s->head, hi = s->head + s->len, start, visited = 0;
	size_t limit = f->limit ? f->limit : RW_QUERY_MAX_LIMIT;

	if (!s->count)
		return 0;
	/* Ids rise along order[]: a binary search finds the first past the cursor. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->order[mid].id <= f->since)
			lo = mid + 1;
		else
			hi = mid;
	}
	start = lo;
	/* Only the newest `limit` matches: find where they begin by counting from the end. */
	{
		size_t matched = 0;

		for (size_t i = s->head + s->len; i-- > start;) {
			const struct rw_evstore_entry *e = s->order[i].e;

			if (!e || !rw_evfilter_match(f, &e->ev, e->node))
				continue;
			if (++matched == limit) {
				start = i;
				break;
			}
		}
	}
	for (size_t i = start; i < s->head + s->len && visited < limit; i++) {
		const struct rw_evstore_entry *e = s->order[i].e;

		if (!e || !rw_evfilter_match(f, &e->ev, e->node))
			continue;
		visited++;
		if (fn(e, data))
			break;
	}
	return visited;
}

/* ---- aggregates ---- */

/* Keyed: a sandbox chooses much of the key (its destinations and ports), and with a fixed hash
 * could pick keys offline that share one chain.
 */
static size_t agg_hash(const struct rw_aggs *a, const struct rw_agg_key *k)
{
	return rw_siphash(&a->hash_key, k, sizeof(*k)) % a->n_buckets;
}

static void agg_key(struct rw_agg_key *k, const struct rw_event *ev, const char *node)
{
	memset(k, 0, sizeof(*k)); /* the key is hashed and compared as bytes */
	snprintf(k->node, sizeof(k->node), "%s", node ? node : "");
	memcpy(k->run, ev->run_id, sizeof(k->run));
	k->run[sizeof(k->run) - 1] = '\0';
	for (size_t i = strlen(k->run); i < sizeof(k->run); i++)
		k->run[i] = '\0';
	k->peer = rw_event_peer_ip(ev);
	k->port = ev->dport;
	k->proto = ev->proto;
	k->dir = ev->dir;
}

int rw_aggs_init(struct rw_aggs *a, size_t cap)
{
	return rw_aggs_init_keyed(a, cap, rw_hash_key());
}

int rw_aggs_init_keyed(struct rw_aggs *a, size_t cap, const struct rw_hash_key *key)
{
	memset(a, 0, sizeof(*a));
	a->hash_key = *key;
	if (!cap || cap > RW_EVSTORE_MAX)
		return -EINVAL;
	a->n_buckets = cap * 2 + 1;
	a->buckets = calloc(a->n_buckets, sizeof(*a->buckets));
	if (!a->buckets || rw_shares_init(&a->shares, cap, RW_SHARE_FLOOR, key)) {
		free(a->buckets);
		a->buckets = NULL;
		return -ENOMEM;
	}
	a->cap = cap;
	return 0;
}

void rw_aggs_free(struct rw_aggs *a)
{
	struct rw_agg *g = a->newest, *next;

	for (; g; g = next) {
		next = g->older;
		free(g);
	}
	free(a->buckets);
	rw_shares_free(&a->shares);
	memset(a, 0, sizeof(*a));
}

/* Room for one more aggregate of run: the victim rw_shares_victim() names goes. */
static void agg_make_room(struct rw_aggs *a, const char *run)
{
	enum rw_share_cause cause = RW_SHARE_OWN;
	struct rw_share_link *l = rw_shares_victim(&a->shares, run, &cause);
	struct rw_agg *g, **pp;

	if (!l)
		return;
	g = (struct rw_agg *)((char *)l - offsetof(struct rw_agg, share));
	rw_shares_del(&a->shares, &g->share);
	RW_LRU_UNLINK(a, g);
	for (pp = &a->buckets[agg_hash(a, &g->key)]; *pp; pp = &(*pp)->hnext)
		if (*pp == g) {
			*pp = g->hnext;
			break;
		}
	free(g);
	a->count--;
	a->evicted++;
	a->displaced[cause]++;
}

const struct rw_agg *rw_aggs_find(const struct rw_aggs *a, const struct rw_agg_key *k)
{
	struct rw_agg *g = a->buckets[agg_hash(a, k)];

	for (; g; g = g->hnext)
		if (!memcmp(&g->key, k, sizeof(*k)))
			return g;
	return NULL;
}

struct rw_agg *rw_aggs_add(struct rw_aggs *a, const struct rw_event *ev, const char *node,
			   int64_t real_ns, const char *rule, const char *peer_name)
{
	struct rw_agg_key k;
	struct rw_agg *g;
	size_t b;

	agg_key(&k, ev, node);
	b = agg_hash(a, &k); /* once: the lookup and the insert share it */
	for (g = a->buckets[b]; g; g = g->hnext)
		if (!memcmp(&g->key, &k, sizeof(k)))
			break;
	if (g) {
		RW_LRU_UNLINK(a, g);
		rw_shares_touch(&a->shares, &g->share);
	} else {
		if (a->count == a->cap)
			agg_make_room(a, k.run);
		g = calloc(1, sizeof(*g));
		if (!g)
			return NULL;
		g->key = k;
		rw_shares_add(&a->shares, &g->share, k.run);
		g->first_ns = real_ns;
		g->hnext = a->buckets[b];
		a->buckets[b] = g;
		a->count++;
	}
	RW_LRU_PUSH(a, g);
	g->pod = rw_event_pod_ip(ev);
	g->verdict = ev->verdict;
	g->reason = ev->reason;
	g->count++;
	if (ev->reason < RW_REASON_COUNT)
		g->by_reason[ev->reason]++;
	g->last_ns = real_ns;
	if (rule)
		snprintf(g->rule, sizeof(g->rule), "%s", rule);
	if (peer_name)
		snprintf(g->peer_name, sizeof(g->peer_name), "%s", peer_name);
	return g;
}

void rw_aggs_each(const struct rw_aggs *a, int (*fn)(const struct rw_agg *g, void *data),
		  void *data)
{
	for (const struct rw_agg *g = a->newest; g; g = g->older)
		if (fn(g, data))
			break;
}
