/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* pw_stream.h: PolicyWatch's transport (docs/policy-watch.md). One thread keeps one
 * long-lived HTTPS GET open with libcurl and hands each complete line to the agent's loop
 * through a bounded queue and an eventfd; another POSTs the loop's acknowledgements. Neither
 * ever holds the loop: the loop only pops what is ready.
 */
#ifndef RUNWALL_PW_STREAM_H
#define RUNWALL_PW_STREAM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RW_WATCH_STALL_DEFAULT	15 /* seconds without a complete message: the stream is cut */
#define RW_WATCH_QUEUE		64 /* messages waiting for the loop at most */
#define RW_WATCH_QUEUE_BYTES	(32u << 20) /* and their bytes (one message always fits) */
#define RW_WATCH_ACK_QUEUE	1024
#define RW_WATCH_BACKOFF_MIN_MS 250
#define RW_WATCH_BACKOFF_MAX_MS 30000

struct rw_pw_opts {
	const char *url;	/* --policy-url */
	const char *ack_url;	/* --policy-ack-url; NULL: derived from url */
	const char *ca;		/* --policy-ca */
	const char *cert, *key; /* --policy-cert, --policy-key */
	const char *token_file; /* --policy-token-file */
	const char *node;
	unsigned int stall_sec; /* --policy-stall; 0: RW_WATCH_STALL_DEFAULT */
	unsigned int seed;	/* the backoff's jitter (RW_SEED, else time and pid) */
};

enum rw_pw_item_kind {
	RW_WATCH_ITEM_MESSAGE,	    /* text: one line */
	RW_WATCH_ITEM_CONNECTED,    /* text: the URL asked */
	RW_WATCH_ITEM_DISCONNECTED, /* text: why; retry_ms: when it tries again */
};

struct rw_pw_item {
	enum rw_pw_item_kind kind;
	char *text;
	size_t len;
	unsigned int retry_ms;
	bool refused; /* DISCONNECTED for a message refused on the wire (oversized, truncated) */
	int64_t received_ns; /* CLOCK_MONOTONIC */
};

struct rw_pw_stats {
	bool connected;
	uint64_t connects, disconnects, messages, acks_sent, acks_failed, acks_dropped;
	int64_t connected_since_ns; /* CLOCK_MONOTONIC */
	char last_error[256];
};

struct rw_watch;

/* Check the options (URL scheme, files readable) without starting: 0, or -EINVAL with err. */
int rw_pw_check(const struct rw_pw_opts *o, char *err, size_t errlen);
/* Start both threads. NULL with err on failure. */
struct rw_watch *rw_pw_start(const struct rw_pw_opts *o, uint64_t revision, char *err,
			     size_t errlen);
/* The eventfd the loop polls: readable when items wait. */
int rw_pw_fd(struct rw_watch *w);
/* The next item (the caller frees item->text), false when none waits. */
bool rw_pw_pop(struct rw_watch *w, struct rw_pw_item *item);
/* Whether an item waits, without taking it or reading the eventfd. */
bool rw_pw_waiting(struct rw_watch *w);
/* The revision in force, for the next (re)connection's ?revision=. */
void rw_pw_set_revision(struct rw_watch *w, uint64_t revision);
/* Drop the stream now: reconnect after the backoff, asking for `revision` (0: a whole snapshot,
 * at once).
 */
void rw_pw_drop(struct rw_watch *w, uint64_t revision);
/* Queue an acknowledgement (a JSON object, compact text) for the ack thread. */
void rw_pw_ack(struct rw_watch *w, const char *body);
void rw_pw_get_stats(struct rw_watch *w, struct rw_pw_stats *s);
const char *rw_pw_ack_url(struct rw_watch *w);
void rw_pw_stop(struct rw_watch *w);

#endif /* RUNWALL_PW_STREAM_H */
