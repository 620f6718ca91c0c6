// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ctl_server.c: the agent's side of the control socket (ctl.h says what is asked and answered). */
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ctl.h"
#include "eventfmt.h"
#include "veth.h"
#include "log.h"
#include "pw_msg.h"

json_t *agent_status_part(struct agent *a)
{
	char when[40];
	json_t *runs = json_array(), *sbx = json_array(), *o;
	unsigned long long delivered = a->subscribers.delivered_gone,
			   skipped = a->subscribers.skipped_gone;
	int64_t now_ms = agent_now_ms();
	int attach_pending = 0, bind_waiting = 0;

	rw_format_time(a->pol.ready_since, when, sizeof(when));
	/* Since when each run of the snapshot in force enforces its generation. */
	for (size_t r = 0; a->pol.have_policy && r < a->pol.policy.n_runs; r++) {
		const char *id = a->pol.policy.runs[r].id;
		char since[40] = "";

		const struct run_state *st = agent_run_state(a, r);

		if (st)
			rw_format_time(st->since, since, sizeof(since));
		json_array_append_new(runs, json_pack("{s:s, s:o}", "id", id, "since",
						      *since ? json_string(since) : json_null()));
	}
	/* The veths of --ifprefix, attached or not; their pods and hooks are the kernel's. */
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++) {
		struct sandbox *s = &a->sandboxes.sbx[i];
		json_t *e = json_pack("{s:s, s:i}", "ifname", s->ifname, "ifindex", s->ifindex);

		/* A failed attach, until a retry succeeds: what failed, how often, when next. */
		if (e && s->attach_error[0]) {
			int64_t in = s->retry_at_ms - now_ms;

			json_object_set_new(e, "attach_error", json_string(s->attach_error));
			json_object_set_new(e, "attach_failures", json_integer(s->attach_failures));
			json_object_set_new(e, "attach_retry_in_ms", json_integer(in > 0 ? in : 0));
			attach_pending++;
		}
		/* Routed to a pod the node has no room to bind: deny-all, and why. */
		if (e && s->waiting_pod.flags) {
			char ip[RW_EP_STRLEN];

			json_object_set_new(e, "waiting_pod",
					    json_string(rw_endpoint_str(&s->waiting_pod, false, ip,
									sizeof(ip))));
			json_object_set_new(e, "bind_error", json_string(s->bind_error));
			bind_waiting++;
		}
		json_array_append_new(sbx, e);
	}
	for (int i = 0; i < a->subscribers.n_subs; i++) {
		delivered += a->subscribers.subs[i].delivered;
		skipped += a->subscribers.subs[i].skipped;
	}
	/* bpffs: where this agent pins, for a CLI started with another --bpffs. */
	o = json_pack("{s:b, s:s, s:s, s:s, s:o, s:o, s:f, s:o, s:o, s:o, "
		      "s:{s:i, s:I, s:I, s:I}}",
		      "ok", 1, "socket", a->socket, "bpffs", a->dp.pin_dir, "ifprefix", a->ifprefix,
		      "policy_file", a->policy_path ? json_string(a->policy_path) : json_null(),
		      "ready_since", a->pol.ready_since ? json_string(when) : json_null(),
		      "apply_ms", a->pol.last_apply.total_ms, "last_error",
		      a->last_error[0] ? json_string(a->last_error) : json_null(), "runs", runs,
		      "sandboxes", sbx, "events", "subscribers", a->subscribers.n_subs, "delivered",
		      (json_int_t)delivered, "skipped", (json_int_t)skipped, "ring_drains_capped",
		      (json_int_t)a->drain.ring_capped);
	if (o) {
		json_object_set_new(o, "attach",
				    json_pack("{s:I, s:I, s:i, s:I}", "failures",
					      (json_int_t)a->sandboxes.attach_failures, "retries",
					      (json_int_t)a->sandboxes.attach_retries, "pending",
					      attach_pending, "repairs",
					      (json_int_t)a->sandboxes.hook_repairs));
		json_object_set_new(o, "bind",
				    json_pack("{s:I, s:i}", "failures",
					      (json_int_t)a->sandboxes.bind_failures, "waiting",
					      bind_waiting));
		json_object_set_new(o, "cni", agent_cni_status(a));
		json_object_set_new(o, "containers", containers_status(a));
		json_object_set_new(o, "policy_watch", agent_follow_status(a));
		json_object_set_new(o, "staged", agent_staged_status(a));
	}
	return o;
}

/* ---- clients, without blocking ---- */

static void client_close(struct agent *a, int i)
{
	struct ctl_client *c = &a->ctl.clients[i];

	epoll_ctl(a->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->buf);
	a->ctl.clients[i] = a->ctl.clients[--a->ctl.n_clients];
}

/* Hand the fd on (a subscriber) without closing it. */
static void client_release(struct agent *a, int i)
{
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->ctl.clients[i].fd, NULL);
	free(a->ctl.clients[i].buf);
	a->ctl.clients[i] = a->ctl.clients[--a->ctl.n_clients];
}

/* Write what is left of the reply; the client is closed once all of it went out. */
static void client_write(struct agent *a, int i)
{
	struct ctl_client *c = &a->ctl.clients[i];

	while (c->off < c->len) {
		ssize_t n = write(c->fd, c->buf + c->off, c->len - c->off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* EPOLLOUT brings us back */
		if (n <= 0)
			break;
		c->off += n;
	}
	client_close(a, i);
}

static void client_reply(struct agent *a, int i, json_t *reply)
{
	struct ctl_client *c = &a->ctl.clients[i];
	struct epoll_event ev = {.events = EPOLLOUT, .data.fd = c->fd};
	char *line = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
	size_t len;

	json_decref(reply);
	if (!line) {
		client_close(a, i);
		return;
	}
	len = strlen(line);
	line[len++] = '\n'; /* json_dumps leaves room: we overwrite its NUL */
	free(c->buf);
	c->buf = line;
	c->len = len;
	c->cap = len;
	c->off = 0;
	c->replying = true;
	epoll_ctl(a->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	client_write(a, i);
}

static json_t *error_json(const char *msg)
{
	return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
}

/* `recorded SINCE_NS [RUN]`: the event store's flows for `runwall replay`. */
static json_t *recorded(struct agent *a, const char *arg)
{
	unsigned long long since;
	char *end;

	if (!a->view)
		return error_json("this agent keeps no event store (it runs without --listen, "
				  "--probe-listen or --access-request-url): nothing recorded to "
				  "replay; replay its --flow-log FILE instead");
	errno = 0;
	since = arg ? strtoull(arg, &end, 10) : 0;
	if (!arg || errno || end == arg || (*end && *end != ' ') || (*end == ' ' && !end[1]))
		return error_json("usage: recorded SINCE_NS [RUN]");
	return rw_agent_view_recorded(a->view, *end ? end + 1 : NULL, (int64_t)since);
}

/* A run change refused: the error, its JSON path ("base", "id", "run.pods[0]", ...; "" when the
 * kernel side refused it) and the revision still in force.
 */
static json_t *change_refused(uint64_t in_force, const char *path, const char *msg)
{
	return json_pack("{s:b, s:s, s:s, s:I}", "ok", 0, "error", msg, "path", path, "in_force",
			 (json_int_t)in_force);
}

/* "apply-run BASE REVISION SOURCE" (body: one run, as in a snapshot's runs[]) and "delete-run
 * BASE REVISION ID": PolicyWatch's run-upsert and run-delete through agent_apply_change(), with
 * their checks and paths. BASE 0: the revision in force; REVISION 0: BASE + 1.
 */
static json_t *run_change(struct agent *a, bool upsert, const char *arg, const char *body,
			  size_t body_len)
{
	unsigned long long base, revision;
	const char *refused_at, *msg, *name;
	json_t *run = NULL, *reply = NULL;
	json_error_t jerr;
	uint64_t in_force;
	char err[300], path[256];
	int ret;

	if (rw_ctl_parse_run_change(arg, &base, &revision, &name))
		return error_json(upsert ? "usage: apply-run BASE REVISION SOURCE (body: the run)"
					 : "usage: delete-run BASE REVISION ID");
	in_force = agent_revision_in_force(a);
	if (!a->pol.have_policy || (!a->pol.policy_text && !a->pol.policy_doc))
		return change_refused(in_force, "base",
				      "base: no snapshot in force that this agent knows: apply a "
				      "whole snapshot first");
	if (!base)
		base = in_force;
	if (base != in_force) {
		snprintf(err, sizeof(err), "base: %llu is not the revision in force (%llu)", base,
			 (unsigned long long)in_force);
		return change_refused(in_force, "base", err);
	}
	if (!revision)
		revision = base + 1;
	if (upsert) {
		run = json_loadb(body, body_len, JSON_REJECT_DUPLICATES, &jerr);
		if (!run) {
			snprintf(err, sizeof(err), "%s:%d:%d: run: %s", name, jerr.line,
				 jerr.column, jerr.text);
			reply = change_refused(in_force, "run", err);
			json_object_set_new(reply, "line", json_integer(jerr.line));
			json_object_set_new(reply, "column", json_integer(jerr.column));
			return reply;
		}
		if (!json_is_object(run)) {
			json_decref(run);
			snprintf(err, sizeof(err), "%s: run: expected an object", name);
			return change_refused(in_force, "run", err);
		}
	}
	ret = agent_apply_change(a, revision, run, upsert ? NULL : name, upsert ? name : "<socket>",
				 &refused_at, &reply);
	if (ret) {
		json_decref(run);
		msg = json_string_value(json_object_get(reply, "error"));
		if (!msg)
			msg = strerror(-ret);
		if (refused_at) {
			/* The request's own key: named in the error as the run's paths are. */
			snprintf(err, sizeof(err), "%s: %s", refused_at, msg);
			json_decref(reply);
			return change_refused(in_force, refused_at, err);
		}
		if (!rw_pw_error_path(msg, path, sizeof(path), &msg))
			path[0] = '\0';
		json_object_set_new(reply, "path", json_string(path));
		json_object_set_new(reply, "in_force", json_integer(in_force));
		return reply;
	}
	/* The run's generation now: the revision in which its policy last changed. */
	for (size_t r = 0; upsert && r < a->pol.n_runs; r++)
		if (!strcmp(a->pol.runs[r].id, json_string_value(json_object_get(run, "id")) ?: ""))
			json_object_set_new(reply, "generation", json_integer(a->pol.runs[r].gen));
	json_decref(run);
	json_object_set_new(reply, "base", json_integer(base));
	return reply;
}

/* "stage-run SOURCE" (body: one run, as in a snapshot's runs[]): the snapshot in force with that
 * run, staged.
 */
static json_t *stage_run(struct agent *a, const char *source, const char *body, size_t body_len)
{
	json_t *run, *reply = NULL;
	json_error_t jerr;
	char err[300];

	run = json_loadb(body, body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(run)) {
		if (run)
			snprintf(err, sizeof(err), "%s: run: expected an object", source);
		else
			snprintf(err, sizeof(err), "%s:%d:%d: run: %s", source, jerr.line,
				 jerr.column, jerr.text);
		json_decref(run);
		return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", err, "path", "run");
	}
	agent_stage_run(a, run, source, &reply);
	json_decref(run);
	return reply;
}

/* The whole request is in: "VERB [ARG]\n" and the body (ctl.h). */
static void client_request(struct agent *a, int i)
{
	struct ctl_client *c = &a->ctl.clients[i];
	struct rw_ctl_request req;
	const char *verb, *arg, *body;
	size_t body_len;
	json_t *reply;

	if (rw_ctl_parse_request(c->buf, c->len, &req)) {
		client_reply(a, i, error_json(strerror(EBADMSG)));
		return;
	}
	verb = req.verb;
	arg = req.arg;
	body = req.body;
	body_len = req.body_len;
	if (!strcmp(verb, "status")) {
		reply = agent_status_part(a);
	} else if (!strcmp(verb, "apply")) {
		reply = NULL;
		agent_apply(a, body, body_len, arg && *arg ? arg : "<socket>", &reply);
	} else if (!strcmp(verb, "apply-run") || !strcmp(verb, "delete-run")) {
		reply = run_change(a, verb[0] == 'a', arg, body, body_len);
	} else if (!strcmp(verb, "stage")) {
		reply = NULL;
		agent_stage(a, body, body_len, arg && *arg ? arg : "<socket>", &reply);
	} else if (!strcmp(verb, "stage-run")) {
		reply = stage_run(a, arg && *arg ? arg : "<socket>", body, body_len);
	} else if (!strcmp(verb, "unstage")) {
		agent_unstage(a, &reply);
	} else if (!strcmp(verb, "policy")) {
		size_t text_len = 0;
		const char *text = agent_policy_text(a, &text_len);

		reply = text ? json_pack("{s:b, s:I, s:s, s:s%}", "ok", 1, "revision",
					 (json_int_t)a->pol.policy.revision, "source",
					 a->pol.policy_source, "snapshot", text, text_len)
			     : error_json(
				       "this agent does not know the snapshot in force (applied before "
				       "it started); apply it again or pass --policy");
	} else if (!strcmp(verb, "events")) {
		int fd = c->fd;

		client_release(a, i);
		agent_add_subscriber(a, fd);
		return;
	} else if (!strcmp(verb, "recorded")) {
		reply = recorded(a, arg);
	} else if (!strcmp(verb, "requests")) {
		reply = rw_agent_view_requests(a->view);
	} else if (!strcmp(verb, "shutdown")) {
		rw_info("shutdown requested on the control socket; enforcement stays in place");
		reply = json_pack("{s:b}", "ok", 1);
		agent_stop(a);
	} else {
		reply = error_json("unknown request");
	}
	client_reply(a, i, reply);
}

/* Read what has arrived; the request is complete when the client shuts down its writing side. */
static void client_read(struct agent *a, int i)
{
	struct ctl_client *c = &a->ctl.clients[i];

	for (;;) {
		ssize_t n;

		if (c->len == c->cap) {
			size_t cap = c->cap * 2;
			char *grown;

			if (c->cap >= RW_CTL_MAX_BODY + 4096) {
				client_reply(a, i, error_json(strerror(E2BIG)));
				return;
			}
			grown = realloc(c->buf, cap + 1);
			if (!grown) {
				client_reply(a, i, error_json(strerror(ENOMEM)));
				return;
			}
			c->buf = grown;
			c->cap = cap;
		}
		n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			client_close(a, i);
			return;
		}
		if (n == 0) {
			client_request(a, i);
			return;
		}
		c->len += n;
	}
}

bool agent_ctl_on_fd(struct agent *a, int fd, __u32 events)
{
	for (int i = 0; i < a->ctl.n_clients; i++) {
		if (a->ctl.clients[i].fd != fd)
			continue;
		if (a->ctl.clients[i].replying)
			client_write(a, i);
		else if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
			client_read(a, i);
		return true;
	}
	return false;
}

void agent_ctl_tick(struct agent *a)
{
	int64_t now = agent_now_ms();

	for (int i = 0; i < a->ctl.n_clients;) {
		if (now >= a->ctl.clients[i].deadline_ms) {
			rw_debug("control socket client %d: no %s within %d ms, dropped",
				 a->ctl.clients[i].fd,
				 a->ctl.clients[i].replying ? "room for the reply"
							    : "complete request",
				 REQUEST_TIMEOUT_MS);
			a->ctl.clients_dropped++;
			client_close(a, i);
			continue;
		}
		i++;
	}
}

void agent_ctl_close_all(struct agent *a)
{
	while (a->ctl.n_clients)
		client_close(a, 0);
}

/* Accept what is waiting (a bounded number per call: the listening fd stays readable). */
void agent_on_client(struct agent *a)
{
	for (int k = 0; k < 16; k++) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		struct ctl_client *c;
		int fd;

		fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		/* The socket file is 0600 root already; check the peer too. */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.uid != 0) {
			close(fd);
			continue;
		}
		if (a->ctl.n_clients == MAX_CLIENTS) {
			static const char busy[] =
				"{\"ok\":false,\"error\":\"too many clients\"}\n";

			a->ctl.clients_dropped++;
			if (write(fd, busy, sizeof(busy) - 1) < 0)
				rw_debug("control socket: %s", strerror(errno));
			close(fd);
			continue;
		}
		c = &a->ctl.clients[a->ctl.n_clients];
		*c = (struct ctl_client){
			.fd = fd, .cap = 4096, .deadline_ms = agent_now_ms() + REQUEST_TIMEOUT_MS};
		c->buf = malloc(c->cap + 1);
		ev.data.fd = fd;
		if (!c->buf || epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			free(c->buf);
			close(fd);
			continue;
		}
		a->ctl.n_clients++;
	}
}
