/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* access_requests.h: network-access requests. The first not-allowlisted refusal of each (run,
 * generation, destination, port, protocol) is POSTed once as JSON to --access-request-url, by a
 * worker thread with libcurl: retried with backoff while the receiver is down or answers 5xx,
 * from a bounded queue whose overflow is counted. Never for any other reason: metadata,
 * private, DNS or malformed refusals are not requests a person should approve.
 */
#ifndef RUNWALL_ACCESS_REQUESTS_H
#define RUNWALL_ACCESS_REQUESTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <linux/types.h>
#include "runwall.h"

#define RW_ACCESS_QUEUE_DEFAULT 256  /* requests waiting to be sent */
#define RW_ACCESS_KEYS_MAX	4096 /* requests remembered (for dedup and /api/requests) */
#define RW_ACCESS_MAX_ATTEMPTS	12

struct rw_access;

struct rw_access_stats {
	uint64_t queued, sent, failed, dropped, retries, pending;
};

/* Start the worker. queue_max: 1..65536. NULL with errno on failure. */
struct rw_access *rw_access_start(const char *url, const char *node, size_t queue_max);
/* The agent's loop, for each event: queues a request when it is the first not-allowlisted
 * refusal of its key, counts it otherwise. Never blocks (a full queue drops, counted).
 * Returns true when a request was queued.
 */
bool rw_access_note(struct rw_access *a, const struct rw_event *ev, int64_t real_ns);
/* Whether an event can raise a request at all (the rule above, without the dedup). */
bool rw_access_eligible(const struct rw_event *ev);
/* /api/requests and the control socket's `requests`: every request remembered (new ref). */
json_t *rw_access_json(struct rw_access *a);
void rw_access_get_stats(struct rw_access *a, struct rw_access_stats *s);
void rw_access_stop(struct rw_access *a);

#endif /* RUNWALL_ACCESS_REQUESTS_H */
