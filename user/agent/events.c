// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* events.c: the ring buffer's verdict events, fanned out to the control socket's subscribers. */
#include <fcntl.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ctl.h"
#include "eventfmt.h"
#include "flow_log.h"
#include "log.h"

void agent_sub_close(struct agent *a, int i)
{
	rw_debug("subscriber %d gone: %llu events delivered, %llu skipped",
		 a->subscribers.subs[i].fd, a->subscribers.subs[i].delivered,
		 a->subscribers.subs[i].skipped);
	a->subscribers.delivered_gone += a->subscribers.subs[i].delivered;
	a->subscribers.skipped_gone += a->subscribers.subs[i].skipped;
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->subscribers.subs[i].fd, NULL);
	close(a->subscribers.subs[i].fd);
	free(a->subscribers.subs[i].buf);
	a->subscribers.subs[i] = a->subscribers.subs[--a->subscribers.n_subs];
}

int agent_on_event(void *ctx, void *data, size_t size)
{
	struct agent *a = ctx;
	const struct rw_event *ev = data;
	json_t *o, *staged;
	char *line;
	size_t len;

	if (size < sizeof(*ev))
		return 0;
	if (rw_log_verbosity >= RW_LOG_DEBUG) {
		char text[256];

		rw_event_line(ev, NULL, a->mono_to_real, text, sizeof(text));
		rw_debug("%s", text);
	}
	/* Judged under the staged snapshot too, when one is: its verdict where it differs. */
	staged = agent_staged_judge(a, ev);
	rw_flow_log_event_staged(a->flow_log, ev, a->pol.have_policy ? &a->pol.policy : NULL,
				 a->mono_to_real, staged);
	if (!a->subscribers.n_subs && !a->view) {
		json_decref(staged);
		return 0;
	}
	/* The view keeps it (with the node and the service at the peer) and may raise a
	 * network-access request; the subscribers get the same text.
	 */
	if (a->view) {
		line = rw_agent_view_event(a->view, ev, a->pol.have_policy ? &a->pol.policy : NULL,
					   a->mono_to_real, staged);
	} else {
		o = rw_event_json(ev, a->pol.have_policy ? &a->pol.policy : NULL, a->mono_to_real);
		if (o && staged)
			json_object_set(o, "staged", staged);
		line = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
	}
	json_decref(staged);
	if (!line || !a->subscribers.n_subs) {
		free(line);
		return 0;
	}
	len = strlen(line);
	line[len++] = '\n'; /* json_dumps leaves room: we overwrite its NUL */
	for (int i = 0; i < a->subscribers.n_subs; i++) {
		struct subscriber *s = &a->subscribers.subs[i];

		/* A slow subscriber skips events (counted); it never holds up the ring. */
		if (s->len + len > SUB_BUF_MAX) {
			s->skipped++;
			continue;
		}
		memcpy(s->buf + s->len, line, len);
		s->len += len;
	}
	free(line);
	return 0;
}

void agent_flush_subscribers(struct agent *a)
{
	for (int i = 0; i < a->subscribers.n_subs;) {
		struct subscriber *s = &a->subscribers.subs[i];
		ssize_t n = s->len ? write(s->fd, s->buf, s->len) : 0;

		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			agent_sub_close(a, i);
			continue;
		}
		if (n > 0) {
			/* Count the events whose last byte went out. */
			for (ssize_t b = 0; b < n; b++)
				s->delivered += s->buf[b] == '\n';
			memmove(s->buf, s->buf + n, s->len - n);
			s->len -= n;
		}
		i++;
	}
}

void agent_add_subscriber(struct agent *a, int fd)
{
	/* The client has shut down its writing side already (the request ends that way), so
	 * EPOLLRDHUP would fire at once: wait for the full hangup (always reported) instead.
	 */
	struct epoll_event ev = {.events = 0, .data.fd = fd};

	if (a->subscribers.n_subs == MAX_SUBS) {
		json_t *o = json_pack("{s:b, s:s}", "ok", 0, "error", "too many subscribers");

		rw_ctl_reply(fd, o);
		json_decref(o);
		close(fd);
		return;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	a->subscribers.subs[a->subscribers.n_subs] =
		(struct subscriber){.fd = fd, .buf = malloc(SUB_BUF_MAX)};
	if (!a->subscribers.subs[a->subscribers.n_subs].buf) {
		close(fd);
		return;
	}
	a->subscribers.n_subs++;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev);
	rw_debug("subscriber %d joined", fd);
}
