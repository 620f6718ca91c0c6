/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* eventfmt.h: verdict events as JSON (the socket's stream, `-j`) and as one line for people. */
#ifndef RUNWALL_EVENTFMT_H
#define RUNWALL_EVENTFMT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <linux/types.h>
#include "runwall.h"
#include "policy.h"

/* Offset to add to a CLOCK_MONOTONIC time (bpf_ktime_get_ns) to get CLOCK_REALTIME. */
int64_t rw_mono_to_real_offset(void);

/* "services[0] egress-proxy", "runs[1].allow[0]", "inbound[2] streaming"; "" for 0. The policy
 * may be NULL (then only the position is named).
 */
void rw_rule_name(const struct rw_policy *p, uint32_t rule_id, char *buf, size_t len);

/* The event as a JSON object (new reference). Field names are stable and documented in the
 * docs/reasons.md ("Event fields").
 */
json_t *rw_event_json(const struct rw_event *ev, const struct rw_policy *p, int64_t mono_to_real);

/* Who names the cgroup ids of events: the agent's container table (the events' "container"),
 * called from the thread that makes the events' JSON; NULL: none.
 */
void rw_event_set_container_namer(const char *(*namer)(uint64_t cgroup_id, void *arg), void *arg);

/* The JSON object back into an event (what the CLI receives from the agent). 0 or -EINVAL. */
int rw_event_from_json(json_t *obj, struct rw_event *ev, char *rule, size_t rule_len);

/* Who in the pod sent the event's packet, for people: "uid 1000 container harness" (container:
 * the agent's name for ev->cgroup_id, or NULL), "uid 1000 cgroup 4242", "no socket", or "" when
 * the datapath did not read it.
 */
void rw_event_principal(const struct rw_event *ev, const char *container, char *buf, size_t len);

/* One aligned line for people:
 * TIME  DIR  VERDICT REASON  RUN  SRC:PORT -> DST:PORT PROTO  [rule]
 */
void rw_event_line(const struct rw_event *ev, const char *rule, int64_t mono_to_real, char *buf,
		   size_t len);

/* "2026-11-29T23:52:52.123456Z" */
void rw_format_time(int64_t real_ns, char *buf, size_t len);

#endif /* RUNWALL_EVENTFMT_H */
