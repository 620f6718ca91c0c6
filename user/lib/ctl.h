/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* ctl.h: the agent's control socket (Unix stream, root only).
 *
 * A request is one line "VERB [ARG]\n", then an optional body, then the client shuts down its
 * writing side. The agent answers one JSON object line and closes, except for "events", which
 * streams one JSON object per line until the client goes away.
 *
 *   status            -> {"ok":true, ...}: the agent's part of the node's status (status.h)
 *   apply SOURCE      body: a snapshot  -> {"ok":true,"revision":N,...} | {"ok":false,"error":"..."}
 *   apply-run BASE REVISION SOURCE     body: one run  -> as apply, or {"ok":false,"error":"...",
 *   delete-run BASE REVISION ID         "path":"...","in_force":N}: one run's change (0: BASE is
 *                                       the revision in force, REVISION is BASE + 1)
 *   stage SOURCE      body: a snapshot  -> {"ok":true,"staged":{...}} | {"ok":false,"error":"...",
 *   stage-run SOURCE  body: one run      "path":"...",...}: held beside the policy in force and
 *                                       never enforced (stage-run: the one in force with that run)
 *   unstage           -> {"ok":true,"dropped":REVISION|null}
 *   policy            -> {"ok":true,"revision":N,"source":"...","snapshot":"<the JSON text>"}
 *   events            -> a stream of event objects
 *   recorded SINCE_NS [RUN] -> {"ok":true,"flows":[...],...}: the event store's verdicts since
 *                       SINCE_NS (realtime) folded into flows (flowset.h), for `runwall replay`
 *   shutdown          -> {"ok":true}; the agent exits, leaving enforcement in place
 */
#ifndef RUNWALL_CTL_H
#define RUNWALL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#define RW_DEFAULT_SOCKET "/run/runwall/runwall.sock"
#define RW_CTL_MAX_BODY	  (16u << 20)

/* Listen on path (its folder is made 0700 when missing; a stale socket is replaced). */
int rw_ctl_listen(const char *path);

/* One request as read whole (the client shut down its writing side): the line split into its
 * verb and argument, and the body after the line's newline.
 */
struct rw_ctl_request {
	char *verb;
	char *arg; /* after the verb's first space; NULL when the line has none */
	char *body;
	size_t body_len;
};

/* Split buf[0..len) in place (buf must have room for a NUL at buf[len]); the request's
 * pointers point into buf. -EBADMSG when there is no newline, so no request line.
 */
int rw_ctl_parse_request(char *buf, size_t len, struct rw_ctl_request *req);

/* apply-run's "BASE REVISION SOURCE" and delete-run's "BASE REVISION ID": two decimal numbers,
 * each followed by one space, then a non-empty name (*name points into arg). 0 or -EINVAL.
 */
int rw_ctl_parse_run_change(const char *arg, unsigned long long *base, unsigned long long *revision,
			    const char **name);

/* Write a JSON object as one line (blocking) and return 0 or -errno. */
int rw_ctl_reply(int fd, json_t *obj);

/* The client's deadlines: a query (status, policy, shutdown), and an apply, which parses and
 * loads a snapshot of up to RW_CTL_MAX_BODY bytes before it answers.
 */
#define RW_CTL_TIMEOUT_MS	2000
#define RW_CTL_APPLY_TIMEOUT_MS 10000

/* Client: connect and send a request, all within timeout_ms; returns the connected fd (blocking,
 * for reading the reply or the stream) or a negative errno: see rw_ctl_no_agent(); -ETIMEDOUT
 * when the agent does not take the request in time.
 */
int rw_ctl_send(const char *path, const char *verb, const char *arg, const void *body,
		size_t body_len, int timeout_ms);

/* Client, the one every command uses: send a request and read the agent's one-line JSON object
 * reply, all within timeout_ms (-ETIMEDOUT after it: a stuck agent never hangs a command).
 * -EBADMSG when the reply is not a JSON object.
 */
int rw_ctl_call(const char *path, const char *verb, const char *arg, const void *body,
		size_t body_len, int timeout_ms, json_t **reply);

/* True for the errors of rw_ctl_send()/rw_ctl_call() that mean "no agent listens there". */
bool rw_ctl_no_agent(int err);

#endif /* RUNWALL_CTL_H */
