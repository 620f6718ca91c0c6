/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* feed.h: what the view's writers (the agent's loop, `runwall view`'s readers) hand over and its
 * HTTP threads read: recent events, aggregates, the status text and readiness. Writers never
 * wait for a query: what they cannot hand over at once waits aside, in order.
 */
#ifndef RUNWALL_FEED_H
#define RUNWALL_FEED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "event_store.h"

/* What the HTTP threads read and the agent (or the view) writes, under `lock`. */
/* An event a writer could not hand over at once (a query held the feed's lock). */
struct rw_feed_pending {
	struct rw_event ev;
	char node[RW_NODE_LEN];
	int64_t real_ns;
	char *json, *rule, *peer_name;
	size_t json_len;
};

/* Writers keep at most this many events aside while queries hold the lock; beyond, an event
 * goes to the counters only (deferred_dropped), never to a wait.
 */
#define RW_FEED_PENDING_MAX 8192

struct rw_feed {
	pthread_mutex_t lock; /* what the queries (HTTP threads) hold while they scan */
	pthread_cond_t cond;  /* broadcast on every new event and on close */
	struct rw_evstore events;
	struct rw_aggs aggs;
	char *status;	      /* the status JSON (text) published, NULL until the first one */
	bool ready;	      /* /readyz: 200 or 503 */
	char ready_text[256]; /* its body */
	bool closing;
	/* The writers' side (the agent's loop, runwall view's readers): they never wait for
	 * `lock`. What they cannot hand over with a trylock waits here, in order, under
	 * pending_lock (which no query takes), until an add or rw_feed_flush() finds `lock` free.
	 */
	pthread_mutex_t pending_lock;
	struct rw_feed_pending *pending;
	size_t n_pending;
	char *pending_status; /* a status set while `lock` was held */
	bool pending_ready;
	char pending_ready_text[256];
	unsigned long long deferred;	     /* events that waited here */
	unsigned long long deferred_dropped; /* events past RW_FEED_PENDING_MAX: counted only */
};

int rw_feed_init(struct rw_feed *f, size_t events, size_t aggs);
void rw_feed_free(struct rw_feed *f);
/* Keep one event (JSON without its id, and aggregated with the rule that matched and the
 * service named at the peer); wakes the streams. Never waits for a query: when one holds the
 * lock, the event (copied) waits aside until the next add or rw_feed_flush().
 */
void rw_feed_add(struct rw_feed *f, const struct rw_event *ev, const char *node, int64_t real_ns,
		 const char *json, size_t json_len, const char *rule, const char *peer_name);
/* Replace the status text (taken over: freed by the feed) and the readiness; never waits for
 * a query either.
 */
void rw_feed_set_status(struct rw_feed *f, char *status, bool ready, const char *ready_text);
/* Hand over what waits aside, if the lock is free now (the agent's tick calls it). */
void rw_feed_flush(struct rw_feed *f);

/* The /api/graph answer from the aggregates that pass the filter (run, pod, dst, node,
 * verdict, reason). Caller holds the feed's lock. New reference.
 */
json_t *rw_graph_json(const struct rw_aggs *a, const struct rw_evfilter *f);

#endif /* RUNWALL_FEED_H */
