/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* agent_view.h: what `runwall agent --listen` adds to the agent: the recent events and
 * aggregates, the HTTP server, /metrics and the network-access requests. The agent's loop calls
 * in with each event and, on its tick, hands over a status snapshot; nothing here blocks it.
 */
#ifndef RUNWALL_AGENT_VIEW_H
#define RUNWALL_AGENT_VIEW_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "agent_run.h"
#include "datapath.h"
#include "event_store.h"
#include "metrics.h"
#include "policy.h"

struct rw_agent_view;

/* NULL with err (and *usage for a bad flag) on failure. dp must outlive the view. */
struct rw_agent_view *rw_agent_view_start(const struct rw_agent_view_opts *o,
					  const struct rw_datapath *dp, char *err, size_t errlen,
					  bool *usage);
/* One ring buffer event, on the agent's loop. p: the snapshot in force (names the rule and
 * the service at the peer), may be NULL; staged: the verdict under the staged snapshot where it
 * differs (staged.c; borrowed), carried as the event's "staged" and counted for /metrics, or
 * NULL. Returns the event's JSON text, the one the view keeps,
 * for the agent's own subscribers (free() it), or NULL.
 */
char *rw_agent_view_event(struct rw_agent_view *v, const struct rw_event *ev,
			  const struct rw_policy *p, int64_t mono_to_real, json_t *staged);
/* The agent's state for /api/status (status: the agent's part of the node's status, taken over
 * and freed here), /readyz and /metrics.
 */
void rw_agent_view_publish(struct rw_agent_view *v, json_t *status, bool ready,
			   const char *ready_text, const struct rw_metrics_snap *snap);
/* The tick's share: events set aside while a query held the view's store go in now, if it is
 * free (rw_feed_flush()).
 */
void rw_agent_view_tick(struct rw_agent_view *v);
/* /api/requests and `runwall requests` (new ref). */
json_t *rw_agent_view_requests(struct rw_agent_view *v);
/* The control socket's `recorded`: the events the store holds, judged at or after since_ns
 * (realtime) and of `run` (NULL: any), folded into distinct flows (flowset.h):
 * {"ok":true,"node","held","capacity","evicted","oldest","skipped","flows":[...]} (new ref).
 */
json_t *rw_agent_view_recorded(struct rw_agent_view *v, const char *run, int64_t since_ns);
void rw_agent_view_stop(struct rw_agent_view *v);

#endif /* RUNWALL_AGENT_VIEW_H */
