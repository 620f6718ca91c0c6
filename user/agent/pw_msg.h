/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* pw_msg.h: PolicyWatch's wire format (docs/policy-watch.md): the stream is cut into lines of
 * at most RW_WATCH_MAX_MSG bytes, each one JSON message: a snapshot, one run's upsert or delete,
 * a heartbeat, or a snapshot or run to stage (never enforced) and its drop. Pure functions (no I/O, no agent state): the stream thread frames, the agent's
 * loop parses, tests/fuzz/fuzz_pw_msg.c drives both.
 */
#ifndef RUNWALL_PW_MSG_H
#define RUNWALL_PW_MSG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <linux/types.h>
#include "runwall.h"

/* A message is at most what the control socket takes as a body (RW_CTL_MAX_BODY). */
#define RW_WATCH_MAX_MSG (16u << 20)

enum rw_pw_type {
	RW_WATCH_SNAPSHOT,
	RW_WATCH_RUN_UPSERT,
	RW_WATCH_RUN_DELETE,
	RW_WATCH_HEARTBEAT,
	RW_WATCH_STAGED, /* a snapshot, or one run on the policy in force, staged: never enforced */
	RW_WATCH_UNSTAGE, /* the staged snapshot dropped */
};

struct rw_pw_msg {
	enum rw_pw_type type;
	uint64_t revision, base; /* run-upsert and run-delete */
	char id[RW_RUN_ID_LEN];	 /* run-delete; run-upsert: the run's "id" when it has one */
	/* snapshot: the snapshot object; run-upsert: the run; staged: either (run_staged says
	 * which). Borrowed.
	 */
	json_t *body;
	bool run_staged;
	json_t *root; /* owns body */
};

/* Parse one line (without its newline). 0, or -EINVAL with `err` saying what and where ("type:
 * ...", "base: ..."); on success the caller frees with rw_pw_msg_free(). Only the envelope
 * is judged here, what makes a line no message (the stream is dropped): what is inside a
 * snapshot or a run is the policy parser's to judge, and a revision not above its base is the
 * caller's (a change refused, the stream kept).
 */
int rw_pw_msg_parse(const char *buf, size_t len, struct rw_pw_msg *m, char *err, size_t errlen);
void rw_pw_msg_free(struct rw_pw_msg *m);

/* The framer: bytes in, complete lines out. `max` bounds a line (RW_WATCH_MAX_MSG); a longer
 * one is refused (-EMSGSIZE) before it is all buffered. Blank lines (SSE-style keep-alives
 * of a proxy) are skipped.
 */
struct rw_pw_framer {
	char *buf;
	size_t len, cap, max;
};

typedef int (*rw_pw_line_fn)(void *ctx, const char *line, size_t len);
/* Feed n bytes: calls fn for each complete line, stops at fn's first non-zero return (and
 * returns it). -EMSGSIZE for a line over max, -ENOMEM.
 */
int rw_pw_feed(struct rw_pw_framer *f, const char *data, size_t n, rw_pw_line_fn fn, void *ctx);
/* Bytes of a line begun but not ended (at the end of a stream: a truncated message). */
static inline size_t rw_pw_pending(const struct rw_pw_framer *f)
{
	return f->len;
}
void rw_pw_framer_reset(struct rw_pw_framer *f);
void rw_pw_framer_free(struct rw_pw_framer *f);

/* The JSON path in a policy parser's error text ("SOURCE:[L:C:] PATH: message"): copies PATH
 * and points *msg at the message. false when the text has no path.
 */
bool rw_pw_error_path(const char *text, char *path, size_t pathlen, const char **msg);

#endif /* RUNWALL_PW_MSG_H */
