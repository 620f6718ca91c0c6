/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* event_store.h: the latest verdict events in memory (a bounded ring with a cursor), the
 * per-destination aggregates behind the graph, and the filters of the HTTP API. Plain data
 * structures: no locking (the caller holds one), no printing, nothing on disk.
 */
#ifndef RUNWALL_EVENT_STORE_H
#define RUNWALL_EVENT_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "ipaddr.h"
#include "run_shares.h"
#include "runwall.h"
#include "util.h"

#define RW_NODE_LEN	   64  /* node name of an event ("" on an agent's own) */
#define RW_NAME_LEN	   160 /* rule and service names (RW_RULE_NAME_LEN) */
#define RW_EVSTORE_DEFAULT 10000
#define RW_EVSTORE_MAX	   1000000
#define RW_AGGS_DEFAULT	   4096
#define RW_QUERY_MAX_LIMIT 10000 /* events one /api/events answer holds at most */

/* Which events a client wants. Zeroed, then rw_evfilter_init(): every event. */
struct rw_evfilter {
	char run[RW_RUN_ID_LEN]; /* "": any */
	char node[RW_NODE_LEN];	 /* "": any */
	bool has_pod;
	struct rw_ip pod; /* the pod's side: source of egress, destination of ingress */
	int verdict;	  /* -1 any, RW_VERDICT_DROP, RW_VERDICT_ALLOW */
	int reason;	  /* -1 any */
	bool has_dst;
	struct rw_ip dst;   /* the peer: destination of egress, source of ingress */
	__u16 dport;	    /* host order, 0: any */
	uint64_t since;	    /* events with an id above this one */
	unsigned int limit; /* at most this many (the newest), 0: RW_QUERY_MAX_LIMIT */
};

void rw_evfilter_init(struct rw_evfilter *f);
bool rw_evfilter_match(const struct rw_evfilter *f, const struct rw_event *ev, const char *node);

/* Set one query parameter of /api/events, /api/events/stream, /api/graph: run, pod, verdict
 * (allow|drop), reason (a reason name), dst (IP, IP:PORT or [IPv6]:PORT), node, since (an event id), limit
 * (1..RW_QUERY_MAX_LIMIT). Returns 0, or -EINVAL with err naming the parameter and what is
 * wrong with it (the HTTP layer answers 400 with it).
 */
int rw_query_set(struct rw_evfilter *f, const char *key, const char *value, char *err,
		 size_t errlen);
/* A whole query string ("run=x&reason=dns", percent-encoded, no leading '?'), len bytes, not
 * necessarily NUL-terminated: split, decoded and set one by one. At most 16 parameters of
 * 256 bytes each. 0 or -EINVAL (err says why). The entry point of the HTTP query fuzzer.
 */
int rw_query_parse(const char *qs, size_t len, struct rw_evfilter *f, char *err, size_t errlen);

/* ---- recent events ---- */

struct rw_evstore_entry {
	uint64_t id; /* 1, 2, 3, ...: the cursor; never reused */
	struct rw_event ev;
	char node[RW_NODE_LEN];
	char *json; /* the event as JSON without its id: "{...}" */
	size_t json_len;
	/* private */
	struct rw_share_link share;
	size_t pos; /* in order[] */
};

/* One place of the id order: e is NULL once the entry was displaced (its id stays, for the
 * binary search by cursor).
 */
struct rw_evstore_pos {
	uint64_t id;
	struct rw_evstore_entry *e;
};

/* The entries sit in slots[]; order[head, head + len) lists them by id, oldest first, with a
 * hole where a run's entry was displaced from the middle. order[] has room for twice cap: when
 * its end is reached the holes are squeezed out, at most once per cap events.
 */
struct rw_evstore {
	struct rw_evstore_entry *slots;
	size_t cap;
	size_t count;
	struct rw_evstore_pos *order;
	size_t order_cap, head, len;
	uint64_t next_id;
	uint64_t evicted; /* entries dropped to make room (all causes) */
	uint64_t displaced[RW_SHARE__CAUSES];
	struct rw_shares shares;
};

int rw_evstore_init(struct rw_evstore *s, size_t cap);
void rw_evstore_free(struct rw_evstore *s);
/* Keep one event (json copied). When full, one entry goes: the oldest of the event's run when
 * it holds its share of the store or more, else the oldest of the run holding the most
 * (rw_shares_victim()). Returns its id, 0 on ENOMEM.
 */
uint64_t rw_evstore_add(struct rw_evstore *s, const struct rw_event *ev, const char *node,
			const char *json, size_t json_len);
/* Oldest and newest ids held (0 when empty). */
uint64_t rw_evstore_first_id(const struct rw_evstore *s);
uint64_t rw_evstore_last_id(const struct rw_evstore *s);
/* Call fn on the entries with id > f->since matching f, oldest first; with f->limit, only the
 * newest f->limit of them. fn returns nonzero to stop. Returns the number visited.
 */
size_t rw_evstore_query(const struct rw_evstore *s, const struct rw_evfilter *f,
			int (*fn)(const struct rw_evstore_entry *e, void *data), void *data);

/* ---- aggregates: one per (node, run, direction, peer, port, protocol) ---- */

struct rw_agg_key {
	char node[RW_NODE_LEN];
	char run[RW_RUN_ID_LEN];
	struct rw_ip peer; /* either family: an IPv6 peer is another aggregate */
	__be16 port;	   /* the destination port (the pod's own for ingress) */
	__u8 proto;
	__u8 dir;
};

struct rw_agg {
	struct rw_agg_key key;
	struct rw_ip pod; /* the last pod seen on it */
	__u8 verdict;	  /* the last verdict and reason */
	__u8 reason;
	uint64_t count;
	uint64_t by_reason[RW_REASON_COUNT]; /* [RW_REASON_ALLOWED]: allowed */
	int64_t first_ns, last_ns;	     /* realtime */
	char rule[RW_NAME_LEN];		     /* the rule that decided the last event */
	char peer_name[RW_NAME_LEN];	     /* the service the snapshot names at the peer, or "" */
	/* private */
	struct rw_agg *hnext, *newer, *older;
	struct rw_share_link share;
};

struct rw_aggs {
	struct rw_agg **buckets;
	size_t n_buckets;
	size_t cap, count;
	struct rw_agg *newest, *oldest; /* by last update */
	uint64_t evicted;		/* aggregates dropped to make room (all causes) */
	uint64_t displaced[RW_SHARE__CAUSES];
	struct rw_hash_key hash_key; /* the buckets' (rw_siphash()) */
	struct rw_shares shares;     /* which one goes when full: see rw_evstore_add() */
};

/* Hashed under the process's key (rw_hash_key()); _keyed under the one given (tests). */
int rw_aggs_init(struct rw_aggs *a, size_t cap);
int rw_aggs_init_keyed(struct rw_aggs *a, size_t cap, const struct rw_hash_key *key);
void rw_aggs_free(struct rw_aggs *a);
/* Count one event; rule and peer_name may be NULL. When full, a new aggregate displaces the least
 * recently updated one of its run, or of the run holding the most, as rw_evstore_add() does.
 * Returns the aggregate (NULL on ENOMEM).
 */
struct rw_agg *rw_aggs_add(struct rw_aggs *a, const struct rw_event *ev, const char *node,
			   int64_t real_ns, const char *rule, const char *peer_name);
const struct rw_agg *rw_aggs_find(const struct rw_aggs *a, const struct rw_agg_key *k);
/* Newest first; fn returns nonzero to stop. */
void rw_aggs_each(const struct rw_aggs *a, int (*fn)(const struct rw_agg *g, void *data),
		  void *data);

#endif /* RUNWALL_EVENT_STORE_H */
