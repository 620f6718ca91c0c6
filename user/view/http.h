/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* http.h: the read-only HTTP API and page of `runwall agent --listen` and `runwall view`
 * (libmicrohttpd, one thread per connection so that a slow client only slows itself). The
 * agent's loop never waits for it: it hands over events and snapshots through the feed (feed.h).
 */
#ifndef RUNWALL_HTTP_H
#define RUNWALL_HTTP_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "feed.h"

/* Answers computed on an HTTP thread (thread-safe): malloc'd text, NULL on error (500). */
struct rw_http_ops {
	char *(*metrics)(void *data);
	char *(*requests)(void *data);
	/* /api/status from the status text the front end published (the feed's); NULL: that
	 * text as it is.
	 */
	char *(*status)(void *data, const char *published);
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
	unsigned int max_connections; /* 0: 256, shared fairly between addresses (http.c) */
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

#endif /* RUNWALL_HTTP_H */
