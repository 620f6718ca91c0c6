/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* access_requests.h: network-access requests. The first not-allowlisted refusal of each (run,
 * generation, destination, port, protocol) is POSTed once as JSON to --access-request-url, by a
 * worker thread with libcurl: retried with backoff while the receiver is down or answers 5xx,
 * from a bounded queue whose overflow is counted. Never for any other reason: metadata,
 * private, DNS or malformed refusals are not requests a person should approve. Each request
 * names the rule that would allow it (`allow_rule`, a run's allow element) and its evidence: the
 * run's recorded refusals that rule would have let through (rw_access_set_evidence()).
 */
#ifndef RUNWALL_ACCESS_REQUESTS_H
#define RUNWALL_ACCESS_REQUESTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <linux/types.h>
#include "run_shares.h"
#include "runwall.h"

#define RW_ACCESS_QUEUE_DEFAULT 256  /* requests waiting to be sent */
#define RW_ACCESS_KEYS_MAX	4096 /* requests remembered (for dedup and /api/requests) */
#define RW_ACCESS_MAX_ATTEMPTS	12

struct rw_access;

/* queued = sent + failed + pending + displaced. dropped: not queued, the queue being full and
 * the run at its share of it. displaced: queued, then dropped for a run under its share.
 * forgotten: sent or failed requests no longer remembered, by enum rw_share_cause (a later
 * refusal of theirs is a new request).
 */
struct rw_access_stats {
	uint64_t queued, sent, failed, dropped, retries, pending, displaced_queue;
	uint64_t forgotten[RW_SHARE__CAUSES];
};

/* The evidence a request carries: the run's refusals to its destination, port and protocol
 * that the rule it asks for would have let through, recorded up to and including `until_ns`
 * (realtime: the refusal that raised it). Called by the worker, off the agent's loop; fills
 * *count and the first and last seen (realtime ns).
 */
struct rw_ip;
typedef void (*rw_access_evidence_fn)(void *arg, const char *run, const struct rw_ip *dst,
				      __be16 port, __u8 proto, int64_t until_ns, uint64_t *count,
				      int64_t *first_ns, int64_t *last_ns);

/* Start the worker. queue_max: 1..65536. NULL with errno on failure. */
struct rw_access *rw_access_start(const char *url, const char *node, size_t queue_max);
/* The agent's loop, for each event: queues a request when it is the first not-allowlisted
 * refusal of its key, counts it otherwise. Never blocks. The queue and the records are shared
 * per run (run_shares.h): a full queue drops a run's request when the run holds its share of
 * the queue, else it drops the newest of the run holding the most; the records forget a sent
 * one of the run itself at its share, else of the run holding the most.
 * Returns true when a request was queued.
 */
bool rw_access_note(struct rw_access *a, const struct rw_event *ev, int64_t real_ns);
/* Who counts a request's evidence (before the first event; NULL: requests carry none). */
void rw_access_set_evidence(struct rw_access *a, rw_access_evidence_fn fn, void *arg);
/* Whether an event can raise a request at all (the rule above, without the dedup). */
bool rw_access_eligible(const struct rw_event *ev);
/* /api/requests and the control socket's `requests`: every request remembered (new ref). */
json_t *rw_access_json(struct rw_access *a);
void rw_access_get_stats(struct rw_access *a, struct rw_access_stats *s);
void rw_access_stop(struct rw_access *a);

#endif /* RUNWALL_ACCESS_REQUESTS_H */
