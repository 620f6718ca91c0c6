/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* ctl.h: the agent's control socket (Unix stream, root only).
 *
 * A request is one line "VERB [ARG]\n", then an optional body, then the client shuts down its
 * writing side. The agent answers one JSON object line and closes, except for "events", which
 * streams one JSON object per line until the client goes away.
 *
 *   status            -> {"ok":true, "ready":..., ...}
 *   apply SOURCE      body: a snapshot  -> {"ok":true,"revision":N,...} | {"ok":false,"error":"..."}
 *   policy            -> {"ok":true,"revision":N,"source":"...","snapshot":"<the JSON text>"}
 *   events            -> a stream of event objects
 *   shutdown          -> {"ok":true}; the agent exits, leaving enforcement in place
 */
#ifndef RUNWALL_CTL_H
#define RUNWALL_CTL_H

#include <stddef.h>
#include <jansson.h>

#define RW_DEFAULT_SOCKET "/run/runwall/runwall.sock"
#define RW_CTL_MAX_BODY (16u << 20)

/* Listen on path (its folder is made 0700 when missing; a stale socket is replaced). */
int rw_ctl_listen(const char *path);

/* Read one request from a freshly accepted client (waits at most timeout_ms). On success *verb
 * and *arg point into *buf (free it), and so do *body and *body_len.
 */
int rw_ctl_read_request(int fd, int timeout_ms, char **buf, char **verb, char **arg, char **body,
			size_t *body_len);

/* Write a JSON object as one line (blocking) and return 0 or -errno. */
int rw_ctl_reply(int fd, json_t *obj);

/* Client: connect and send a request; returns the connected fd (for reading the reply or the
 * stream) or a negative errno: -ENOENT/-ECONNREFUSED mean no agent on that socket.
 */
int rw_ctl_send(const char *path, const char *verb, const char *arg, const void *body,
		size_t body_len);

/* Client: send and read the one-line JSON reply. */
int rw_ctl_call(const char *path, const char *verb, const char *arg, const void *body,
		size_t body_len, json_t **reply);

#endif /* RUNWALL_CTL_H */
