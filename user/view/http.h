/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* http.h: the read-only HTTP API and page of `runwall agent --listen` and `runwall view`
 * (libmicrohttpd, one thread per connection so that a slow client only slows itself). The
 * agent's loop never waits for it: it hands over events and snapshots under the feed's lock.
 */
#ifndef RUNWALL_HTTP_H
#define RUNWALL_HTTP_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	char *status;	      /* the status JSON (text), NULL until the first one */
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

/* Answers computed on an HTTP thread (thread-safe): malloc'd text, NULL on error (500). */
struct rw_http_ops {
	char *(*metrics)(void *data);
	char *(*requests)(void *data);
	void *data;
};

/* The cookie the page keeps the token in (SameSite=Strict, Path=/), percent-encoded: the
 * server takes it as it takes `Authorization: Bearer`.
 */
#define RW_HTTP_COOKIE "runwall_token"

struct rw_http_opts {
	const char *listen;	      /* "ADDR:PORT", ":PORT" or "PORT" (loopback) */
	const char *token_file;	      /* required for any address but loopback */
	const char *flag;	      /* "--listen", for messages */
	unsigned int max_connections; /* 0: 256 */
	unsigned int per_ip_limit;    /* connections from one address at most; 0: 16 */
	bool probes_only; /* /healthz and /readyz only, no token, loopback only (--probe-listen) */
};

struct rw_http;

/* Parse ADDR:PORT (":PORT" and "PORT" mean 127.0.0.1), read the token, listen. NULL with a
 * message in err (a usage error when *usage is set) on failure.
 */
struct rw_http *rw_http_start(const struct rw_http_opts *o, struct rw_feed *feed,
			      const struct rw_http_ops *ops, char *err, size_t errlen, bool *usage);
/* The same checks as rw_http_start() without listening (for a flag check before anything
 * else is set up): 0 or -EINVAL with err.
 */
int rw_http_check(const struct rw_http_opts *o, char *err, size_t errlen);
/* The port it listens on (useful with port 0). */
unsigned int rw_http_port(const struct rw_http *h);
void rw_http_stop(struct rw_http *h);

/* The /api/graph answer from the aggregates that pass the filter (run, pod, dst, node,
 * verdict, reason). Caller holds the feed's lock. New reference.
 */
#include <jansson.h>
json_t *rw_graph_json(const struct rw_aggs *a, const struct rw_evfilter *f);

#endif /* RUNWALL_HTTP_H */
