/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* flow_log.h: `runwall agent --flow-log FILE|-`: one JSON line per refused packet (and per new
 * flow with --flow-log-flows), the event stream's fields plus the node, rate-limited per sandbox
 * and bounded on disk (docs/operations.md, "Flow log").
 */
#ifndef RUNWALL_FLOW_LOG_H
#define RUNWALL_FLOW_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "policy.h"
#include "runwall.h"

/* --flow-log-rate's default, the same as the kernel's event budget (docs/reasons.md). */
#define RW_FLOW_LOG_RATE      200
#define RW_FLOW_LOG_BURST     400
#define RW_FLOW_LOG_MAX_BYTES (100ull << 20)
/* Sandboxes whose buckets the log keeps; an idle one's slot is taken back when all are used. */
#define RW_FLOW_LOG_SLOTS 8192

struct rw_flow_log_opts {
	const char *path;	 /* FILE, or "-" for stdout (no rotation); NULL: no flow log */
	bool flows;		 /* --flow-log-flows: new flows too, not only refusals */
	unsigned long long rate; /* lines per second per sandbox; 0: no limit */
	unsigned long long burst;
	unsigned long long max_bytes; /* FILE is rotated to FILE.1 before it would pass this */
};

struct rw_flow_log;

/* A token bucket as GCRA: *tat is when the bucket is full again (CLOCK_MONOTONIC ns, 0 at
 * first). True when a line may pass at now_ns (and takes its token): at most burst lines at
 * once, then rate a second. rate 0: always true. Pure: no clock, no state elsewhere.
 */
bool rw_flow_bucket_take(int64_t *tat, unsigned long long rate, unsigned long long burst,
			 int64_t now_ns);

/* Opens the log (O_APPEND, non-blocking). NULL with err set when FILE cannot be opened. */
struct rw_flow_log *rw_flow_log_open(const struct rw_flow_log_opts *o, const char *node, char *err,
				     size_t errlen);
/* One event: a line when it is a refusal (or a new flow with flows) and its sandbox's bucket
 * lets it pass; else counted for that sandbox's next suppressed line.
 */
void rw_flow_log_event(struct rw_flow_log *fl, const struct rw_event *ev, const struct rw_policy *p,
		       int64_t mono_to_real);
/* rw_flow_log_event(), the line carrying `staged` (the verdict under the staged snapshot where it
 * differs, staged.c; borrowed) when not NULL.
 */
void rw_flow_log_event_staged(struct rw_flow_log *fl, const struct rw_event *ev,
			      const struct rw_policy *p, int64_t mono_to_real, json_t *staged);
/* The tick: a suppressed line for each quiet sandbox whose last one is a second old. */
void rw_flow_log_tick(struct rw_flow_log *fl);
/* SIGHUP: FILE closed and opened again (logrotate moved it). */
void rw_flow_log_reopen(struct rw_flow_log *fl);
/* Every pending suppressed count written, then closed. NULL is fine. */
void rw_flow_log_close(struct rw_flow_log *fl);

struct rw_flow_log_stats {
	unsigned long long written, suppressed, lost, rotations;
};
void rw_flow_log_stats(const struct rw_flow_log *fl, struct rw_flow_log_stats *st);

#endif /* RUNWALL_FLOW_LOG_H */
