// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* feed.c: the view's feed (feed.h): the events and aggregates its writers hand over and the HTTP
 * threads read, the status text, and the graph query over the aggregates.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventfmt.h"
#include "feed.h"
#include "reasons.h"

/* ---- the feed ---- */

int rw_feed_init(struct rw_feed *f, size_t events, size_t aggs)
{
	int err;

	memset(f, 0, sizeof(*f));
	err = rw_evstore_init(&f->events, events);
	if (err)
		return err;
	err = rw_aggs_init(&f->aggs, aggs);
	if (err) {
		rw_evstore_free(&f->events);
		return err;
	}
	/* Ids go on growing across restarts (a browser resuming with Last-Event-ID after an
	 * agent restart must not hold a cursor above every new id): start at the clock, in
	 * microseconds, below 2^53 so that JavaScript holds them exactly.
	 */
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		f->events.next_id = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->pending_lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	snprintf(f->ready_text, sizeof(f->ready_text), "not ready: starting\n");
	return 0;
}

static void pending_free(struct rw_feed_pending *p)
{
	free(p->json);
	free(p->rule);
	free(p->peer_name);
}

void rw_feed_free(struct rw_feed *f)
{
	for (size_t i = 0; i < f->n_pending; i++)
		pending_free(&f->pending[i]);
	free(f->pending);
	free(f->pending_status);
	rw_evstore_free(&f->events);
	rw_aggs_free(&f->aggs);
	free(f->status);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->pending_lock);
	pthread_cond_destroy(&f->cond);
}

/* With lock and pending_lock held: what waits aside goes in, oldest first; the old status is
 * returned, to be freed outside the locks.
 */
static char *hand_over(struct rw_feed *f)
{
	char *old = NULL;

	for (size_t i = 0; i < f->n_pending; i++) {
		struct rw_feed_pending *p = &f->pending[i];

		rw_evstore_add(&f->events, &p->ev, p->node, p->json, p->json_len);
		rw_aggs_add(&f->aggs, &p->ev, p->node, p->real_ns, p->rule, p->peer_name);
		pending_free(p);
	}
	f->n_pending = 0;
	if (f->pending_status) {
		old = f->status;
		f->status = f->pending_status;
		f->ready = f->pending_ready;
		snprintf(f->ready_text, sizeof(f->ready_text), "%s", f->pending_ready_text);
		f->pending_status = NULL;
	}
	return old;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* With pending_lock held: keep the event aside, copied; false when there is no room. */
static bool defer(struct rw_feed *f, const struct rw_event *ev, const char *node, int64_t real_ns,
		  const char *json, size_t json_len, const char *rule, const char *peer_name)
{
	struct rw_feed_pending *p;

	if (!f->pending) {
		f->pending = calloc(RW_FEED_PENDING_MAX, sizeof(*f->pending));
		if (!f->pending)
			return false;
	}
	if (f->n_pending == RW_FEED_PENDING_MAX)
		return false;
	p = &f->pending[f->n_pending];
	memset(p, 0, sizeof(*p));
	p->json = malloc(json_len + 1);
	if (!p->json)
		return false;
	memcpy(p->json, json, json_len);
	p->json[json_len] = '\0';
	p->json_len = json_len;
	p->ev = *ev;
	snprintf(p->node, sizeof(p->node), "%s", node ? node : "");
	p->real_ns = real_ns;
	p->rule = dup_or_null(rule);
	p->peer_name = dup_or_null(peer_name);
	f->n_pending++;
	return true;
}

void rw_feed_add(struct rw_feed *f, const struct rw_event *ev, const char *node, int64_t real_ns,
		 const char *json, size_t json_len, const char *rule, const char *peer_name)
{
	char *old = NULL;

	pthread_mutex_lock(&f->pending_lock);
	if (pthread_mutex_trylock(&f->lock) == 0) {
		old = hand_over(f);
		rw_evstore_add(&f->events, ev, node, json, json_len);
		rw_aggs_add(&f->aggs, ev, node, real_ns, rule, peer_name);
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->lock);
	} else if (defer(f, ev, node, real_ns, json, json_len, rule, peer_name)) {
		f->deferred++;
	} else {
		f->deferred_dropped++;
	}
	pthread_mutex_unlock(&f->pending_lock);
	free(old);
}

void rw_feed_set_status(struct rw_feed *f, char *status, bool ready, const char *ready_text)
{
	char *old;

	pthread_mutex_lock(&f->pending_lock);
	old = f->pending_status;
	f->pending_status = status;
	f->pending_ready = ready;
	snprintf(f->pending_ready_text, sizeof(f->pending_ready_text), "%s", ready_text);
	pthread_mutex_unlock(&f->pending_lock);
	free(old);
	rw_feed_flush(f);
}

void rw_feed_flush(struct rw_feed *f)
{
	char *old = NULL;

	pthread_mutex_lock(&f->pending_lock);
	if ((f->n_pending || f->pending_status) && pthread_mutex_trylock(&f->lock) == 0) {
		bool events = f->n_pending;

		old = hand_over(f);
		if (events)
			pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&f->pending_lock);
	free(old);
}

/* ---- the graph ---- */

static void edge_key(const struct rw_agg *g, char *sbx, size_t sl, char *dst, size_t dl)
{
	char pod[RW_IP_STRLEN], peer[RW_IP_STRLEN];

	rw_ip_str(&g->pod, pod, sizeof(pod));
	rw_ip_str(&g->key.peer, peer, sizeof(peer));
	snprintf(sbx, sl, "%s%s%s/%s", g->key.node, g->key.node[0] ? "/" : "", g->key.run, pod);
	snprintf(dst, dl, "%s", peer);
}

struct graph_walk {
	const struct rw_evfilter *f;
	json_t *sandboxes, *dests, *edges, *by_edge;
};

static bool agg_match(const struct rw_evfilter *f, const struct rw_agg *g)
{
	if (f->run[0] && strcmp(f->run, g->key.run))
		return false;
	if (f->node[0] && strcmp(f->node, g->key.node))
		return false;
	if (f->has_pod && !rw_ip_eq(&f->pod, &g->pod))
		return false;
	if (f->has_dst &&
	    (!rw_ip_eq(&f->dst, &g->key.peer) || (f->dport && ntohs(g->key.port) != f->dport)))
		return false;
	if (f->reason >= 0 && !g->by_reason[f->reason])
		return false;
	if (f->verdict == RW_VERDICT_ALLOW && !g->by_reason[RW_REASON_ALLOWED])
		return false;
	if (f->verdict == RW_VERDICT_DROP && g->count == g->by_reason[RW_REASON_ALLOWED])
		return false;
	return true;
}

static int graph_one(const struct rw_agg *g, void *data)
{
	struct graph_walk *w = data;
	char sbx[256], dst[RW_IP_STRLEN], ek[320], pod[RW_IP_STRLEN], when[40];
	json_t *e, *reasons;

	if (!agg_match(w->f, g))
		return 0;
	edge_key(g, sbx, sizeof(sbx), dst, sizeof(dst));
	rw_ip_str(&g->pod, pod, sizeof(pod));
	if (!json_object_get(w->sandboxes, sbx))
		json_object_set_new(w->sandboxes, sbx,
				    json_pack("{s:s, s:s, s:s, s:s}", "id", sbx, "node",
					      g->key.node, "run", g->key.run, "pod", pod));
	{
		json_t *d = json_object_get(w->dests, dst);

		if (!d)
			json_object_set_new(w->dests, dst,
					    json_pack("{s:s, s:s, s:s}", "id", dst, "ip", dst,
						      "name", g->peer_name));
		else if (g->peer_name[0] && !json_string_length(json_object_get(d, "name")))
			json_object_set_new(d, "name", json_string(g->peer_name));
	}
	snprintf(ek, sizeof(ek), "%s|%s|%s", sbx, rw_dir_name(g->key.dir), dst);
	e = json_object_get(w->by_edge, ek);
	rw_format_time(g->last_ns, when, sizeof(when));
	if (!e) {
		e = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:s, s:s}", "sandbox", sbx,
			      "destination", dst, "dir", rw_dir_name(g->key.dir), "count",
			      (json_int_t)0, "allowed", (json_int_t)0, "dropped", (json_int_t)0,
			      "reasons", json_object(), "ports", json_array(), "last", when, "rule",
			      g->rule);
		json_object_set_new(w->by_edge, ek, e);
		json_array_append(w->edges, e);
	}
	json_object_set_new(e, "count",
			    json_integer(json_integer_value(json_object_get(e, "count")) +
					 (json_int_t)g->count));
	json_object_set_new(e, "allowed",
			    json_integer(json_integer_value(json_object_get(e, "allowed")) +
					 (json_int_t)g->by_reason[0]));
	json_object_set_new(e, "dropped",
			    json_integer(json_integer_value(json_object_get(e, "dropped")) +
					 (json_int_t)(g->count - g->by_reason[0])));
	reasons = json_object_get(e, "reasons");
	for (int r = 0; r < RW_REASON_COUNT; r++) {
		const char *name = rw_reason_name(r);

		if (!g->by_reason[r])
			continue;
		json_object_set_new(
			reasons, name,
			json_integer(json_integer_value(json_object_get(reasons, name)) +
				     (json_int_t)g->by_reason[r]));
	}
	{
		char first[40];

		rw_format_time(g->first_ns, first, sizeof(first));
		json_array_append_new(json_object_get(e, "ports"),
				      json_pack("{s:i, s:s, s:I, s:s, s:s, s:s, s:s, s:s}", "port",
						(int)ntohs(g->key.port), "proto",
						rw_proto_name(g->key.proto), "count",
						(json_int_t)g->count, "verdict",
						g->verdict == RW_VERDICT_ALLOW ? "allow" : "drop",
						"reason", rw_reason_name(g->reason), "rule",
						g->rule, "first", first, "last", when));
	}
	return 0;
}

json_t *rw_graph_json(const struct rw_aggs *a, const struct rw_evfilter *f)
{
	struct graph_walk w = {.f = f,
			       .sandboxes = json_object(),
			       .dests = json_object(),
			       .edges = json_array(),
			       .by_edge = json_object()};
	json_t *sbx = json_array(), *dst = json_array(), *v;
	const char *k;

	rw_aggs_each(a, graph_one, &w);
	json_object_foreach(w.sandboxes, k, v) json_array_append(sbx, v);
	json_object_foreach(w.dests, k, v) json_array_append(dst, v);
	json_decref(w.sandboxes);
	json_decref(w.dests);
	json_decref(w.by_edge);
	return json_pack("{s:b, s:o, s:o, s:o, s:I, s:I, s:I, s:{s:I, s:I}}", "ok", 1, "sandboxes",
			 sbx, "destinations", dst, "edges", w.edges, "aggregates",
			 (json_int_t)a->count, "capacity", (json_int_t)a->cap, "evicted",
			 (json_int_t)a->evicted, "displaced", "own_share",
			 (json_int_t)a->displaced[RW_SHARE_OWN], "fair_share",
			 (json_int_t)a->displaced[RW_SHARE_FAIR]);
}
