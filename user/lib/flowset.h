/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* flowset.h: recorded verdicts folded into distinct flows, one per (run, pod, direction,
 * protocol, peer, port), each with its count, first and last seen and its last recorded
 * verdict: what `runwall replay` judges again, built by the agent from its event store (the
 * control socket's `recorded`) or by the CLI from a flow log. Plain data: no locking, no
 * printing.
 */
#ifndef RUNWALL_FLOWSET_H
#define RUNWALL_FLOWSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <linux/types.h>

#include "ipaddr.h"
#include "runwall.h"

/* Zeroed before it is filled, so that keys compare with memcmp(). */
struct rw_flow_key {
	char run[RW_RUN_ID_LEN];
	struct rw_ip pod;  /* the sandbox's side: source of egress, destination of ingress */
	struct rw_ip peer; /* the other side */
	__u16 port;	   /* host order: the destination port (the pod's own for ingress) */
	__u8 proto;	   /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 dir;	   /* enum rw_dir */
};

struct rw_flow {
	struct rw_flow_key key;
	uint64_t count;
	int64_t first_ns, last_ns; /* realtime */
	__u8 verdict, reason;	   /* the latest recorded */
};

struct rw_flowset {
	struct rw_flow *v;
	size_t n, cap;
	size_t merged;	  /* v[0, merged) is sorted with no two of one key */
	uint64_t skipped; /* verdicts no packet can be rebuilt for: no run, not TCP or UDP */
};

/* The flow of a recorded verdict, zeroed and filled; false when no packet can be rebuilt for it
 * (no run, not TCP or UDP, neither IPv4 nor IPv6).
 */
bool rw_flow_key_of(const struct rw_event *ev, struct rw_flow_key *k);
/* Add one recorded verdict judged at real_ns; one that cannot be rebuilt as a packet is only
 * counted in `skipped`. 0 or -ENOMEM. The set is merged whenever it would grow, so it holds
 * about twice its distinct flows at most.
 */
int rw_flowset_add_event(struct rw_flowset *s, const struct rw_event *ev, int64_t real_ns);
/* Add a flow as it is (counts of one key add up). 0 or -ENOMEM. */
int rw_flowset_add(struct rw_flowset *s, const struct rw_flow *f);
/* Sort by key (run, pod, direction, protocol, peer, port) and fold each key into one flow. */
void rw_flowset_merge(struct rw_flowset *s);
void rw_flowset_free(struct rw_flowset *s);

/* {"run","pod","dir","proto","peer","port","count","first","last","verdict","reason"} (times as
 * rw_format_time() text, plus first_ns and last_ns). New reference.
 */
json_t *rw_flow_json(const struct rw_flow *f);
/* Back from rw_flow_json()'s object. 0, or -EINVAL with err naming the field. */
int rw_flow_from_json(json_t *o, struct rw_flow *f, char *err, size_t errlen);

/* "2026-11-29T23:52:52.123456Z" (rw_format_time()'s text; fewer fractional digits, or none,
 * are taken too) into realtime ns. 0 or -EINVAL.
 */
int rw_parse_time(const char *s, int64_t *real_ns);

#endif /* RUNWALL_FLOWSET_H */
