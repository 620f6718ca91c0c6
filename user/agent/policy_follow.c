// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* policy_follow.c: the agent's side of PolicyWatch (--policy-url, docs/policy-watch.md): the
 * messages policy_stream.c hands over are judged and applied here, on the loop, through
 * agent_apply() (the validation and the apply of `runwall apply`), and each outcome is
 * acknowledged. A run's change is the snapshot in force with that run replaced or removed:
 * rw_apply() re-judges the flows of that run only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "agent.h"
#include "log.h"
#include "policy_stream.h"
#include "util.h"
#include "watch_msg.h"

#define ITEMS_PER_WAKEUP 16 /* then back to the loop's other fds; the eventfd stays readable */

static uint64_t revision_in_force(struct agent *a)
{
	struct rw_config cfg = {};

	rw_config_read(&a->dp, &cfg);
	return RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0;
}

static void send_ack(struct agent *a, json_t *o)
{
	char *body;

	json_object_set_new(o, "node", json_string(a->view_opts.node));
	body = json_dumps(o, JSON_COMPACT);
	if (body) {
		rw_watch_ack(a->follow.watch, body);
		free(body);
	}
	json_decref(o);
}

static const char *const type_names[] = {
	[RW_WATCH_SNAPSHOT] = "snapshot",
	[RW_WATCH_RUN_UPSERT] = "run-upsert",
	[RW_WATCH_RUN_DELETE] = "run-delete",
	[RW_WATCH_HEARTBEAT] = "heartbeat",
};

/* A refusal: counted, logged, acknowledged. need: the stream is dropped, and reconnected asking
 * for that revision (0: a whole snapshot).
 */
static void refuse(struct agent *a, const struct rw_watch_msg *m, uint64_t revision,
		   const char *path, const char *error, bool drop, uint64_t need)
{
	json_t *o;

	a->follow.refusals++;
	rw_warn("policy watch: refused %s%s%s: %s%s%s", m ? type_names[m->type] : "a message",
		m && m->id[0] ? " " : "", m ? m->id : "", path, path[0] ? ": " : "", error);
	snprintf(a->follow.last_refusal, sizeof(a->follow.last_refusal), "%s%s%s", path,
		 path[0] ? ": " : "", error);
	o = json_pack("{s:b, s:s, s:s, s:I}", "ok", 0, "error", error, "path", path, "in_force",
		      (json_int_t)revision_in_force(a));
	if (m) {
		json_object_set_new(o, "type", json_string(type_names[m->type]));
		if (revision)
			json_object_set_new(o, "revision", json_integer(revision));
		if (m->type == RW_WATCH_RUN_UPSERT || m->type == RW_WATCH_RUN_DELETE)
			json_object_set_new(o, "base", json_integer(m->base));
		if (m->id[0])
			json_object_set_new(o, "id", json_string(m->id));
	}
	if (drop)
		json_object_set_new(o, "need", json_string(need ? "resume" : "snapshot"));
	send_ack(a, o);
	if (drop)
		rw_watch_drop(a->follow.watch, need);
}

/* The generation the run enforces now (its revision of last change), 0 when not in force. */
static uint64_t run_generation(struct agent *a, const char *id)
{
	long at = rw_policy_index_run(&a->pol.policy_index, &a->pol.policy, id);

	/* pol.runs follows the policy's order: the index says where (after a run change). */
	if (at >= 0 && a->pol.n_runs == a->pol.policy.n_runs && !strcmp(a->pol.runs[at].id, id))
		return a->pol.runs[at].gen;
	for (size_t r = 0; r < a->pol.n_runs; r++)
		if (!strcmp(a->pol.runs[r].id, id))
			return a->pol.runs[r].gen;
	return 0;
}

/* The ack of a refused apply: the policy parser's path and message from `reply` (taken over).
 * A snapshot's paths go under "snapshot."; a run change's "run..." is the run the message
 * carried, and "id", "revision" are the message's own, anything else ("runs": the node's
 * limit) the snapshot's.
 */
static void ack_refusal(struct agent *a, const struct rw_watch_msg *m, uint64_t revision,
			json_t *reply, bool run_change)
{
	const char *error = json_string_value(json_object_get(reply, "error")), *msg;
	char path[256], mapped[300];
	json_t *o;

	if (!error)
		error = "refused";
	if (rw_watch_error_path(error, path, sizeof(path), &msg)) {
		bool own =
			run_change && ((!strncmp(path, "run", 3) && (path[3] == '.' || !path[3])) ||
				       !strcmp(path, "id") || !strcmp(path, "revision"));

		snprintf(mapped, sizeof(mapped), "%s%s", own ? "" : "snapshot.", path);
	} else {
		msg = error;
		mapped[0] = '\0';
	}
	/* agent_apply() counted and logged it as any refused snapshot; ack it as this message's. */
	a->follow.refusals++;
	snprintf(a->follow.last_refusal, sizeof(a->follow.last_refusal), "%s%s%s", mapped,
		 mapped[0] ? ": " : "", msg);
	o = json_pack("{s:b, s:s, s:s, s:s, s:I, s:I}", "ok", 0, "type", type_names[m->type],
		      "error", msg, "path", mapped, "revision", (json_int_t)revision, "in_force",
		      (json_int_t)revision_in_force(a));
	if (m->id[0])
		json_object_set_new(o, "id", json_string(m->id));
	send_ack(a, o);
	json_decref(reply);
}

/* Apply a snapshot's `text`, and ack what became of it. */
static void apply_text(struct agent *a, const struct rw_watch_msg *m, uint64_t revision,
		       const char *text, size_t len, int64_t received_ns)
{
	json_t *reply = NULL, *o;
	int64_t t0 = rw_now_mono_ns();
	int ret = agent_apply(a, text, len, "policy-watch", &reply);

	if (ret == 0) {
		/* apply_ms: rw_apply(), the maps and the flip; parse_ms: the rest of agent_apply()
		 * (the parser and the diff for the log), both O(node) in CPU, not in kernel work.
		 */
		double apply_ms = json_real_value(json_object_get(reply, "apply_ms"));

		o = json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f}", "ok", 1, "type",
			      type_names[m->type], "revision", (json_int_t)revision, "apply_ms",
			      apply_ms, "parse_ms", (rw_now_mono_ns() - t0) / 1e6 - apply_ms,
			      "compose_ms", 0.0, "queued_ms",
			      (rw_now_mono_ns() - received_ns) / 1e6);
		json_object_set_new(o, "generation", json_integer(revision));
		a->follow.applied++;
		rw_debug("policy watch: %s: revision %llu, apply %.2f ms", type_names[m->type],
			 (unsigned long long)revision,
			 json_real_value(json_object_get(reply, "apply_ms")));
		send_ack(a, o);
		json_decref(reply);
		return;
	}
	ack_refusal(a, m, revision, reply, false);
}

static void on_snapshot(struct agent *a, const struct rw_watch_msg *m, int64_t received_ns)
{
	json_t *rev = json_object_get(m->body, "revision");
	uint64_t in_force = revision_in_force(a);
	uint64_t revision = json_is_integer(rev) && json_integer_value(rev) > 0
				    ? (uint64_t)json_integer_value(rev)
				    : 0;
	char *text;

	/* The revision in force again (a server that resends what the agent told it it has):
	 * nothing to apply, and the flows stay cached.
	 */
	if (revision && revision == in_force && a->pol.have_policy) {
		send_ack(a, json_pack("{s:b, s:s, s:I, s:I, s:b}", "ok", 1, "type", "snapshot",
				      "revision", (json_int_t)revision, "generation",
				      (json_int_t)revision, "unchanged", 1));
		return;
	}
	text = json_dumps(m->body, JSON_COMPACT);
	if (!text) {
		refuse(a, m, revision, "snapshot", "out of memory", false, 0);
		return;
	}
	apply_text(a, m, revision, text, strlen(text), received_ns);
	free(text);
}

/* The ack of a run change agent_apply_change() refused or applied. */
static void ack_change(struct agent *a, const struct rw_watch_msg *m, int ret, json_t *reply,
		       int64_t received_ns)
{
	json_t *o;

	if (ret == 0) {
		double apply_ms = json_real_value(json_object_get(reply, "apply_ms"));
		double compose_ms = json_real_value(json_object_get(reply, "compose_ms"));
		double parse_ms = json_real_value(json_object_get(reply, "parse_ms"));

		o = json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f, s:f}", "ok", 1, "type",
			      type_names[m->type], "revision", (json_int_t)m->revision, "apply_ms",
			      apply_ms, "parse_ms", parse_ms, "compose_ms", compose_ms, "probe_ms",
			      json_real_value(json_object_get(reply, "probe_ms")), "queued_ms",
			      (rw_now_mono_ns() - received_ns) / 1e6);
		json_object_set_new(o, "generation",
				    json_integer(m->type == RW_WATCH_RUN_UPSERT
							 ? run_generation(a, m->id)
							 : m->revision));
		json_object_set_new(o, "id", json_string(m->id));
		a->follow.applied++;
		rw_debug("policy watch: %s %s: revision %llu, parse %.2f ms, apply %.2f ms",
			 type_names[m->type], m->id, (unsigned long long)m->revision, parse_ms,
			 apply_ms);
		send_ack(a, o);
		json_decref(reply);
		return;
	}
	ack_refusal(a, m, m->revision, reply, true);
}

/* A run's change: that run parsed and checked against the index of the policy in force, and
 * applied as the policy in force with that run replaced or removed (agent_apply_change()).
 * Nothing of the other runs is parsed or written out again.
 */
static void on_run_change(struct agent *a, const struct rw_watch_msg *m, int64_t received_ns)
{
	uint64_t in_force = revision_in_force(a);
	const char *refused_at;
	json_t *reply = NULL;
	char err[200];
	int ret;

	if (!a->pol.have_policy || (!a->pol.policy_text && !a->pol.policy_doc)) {
		refuse(a, m, m->revision, "base",
		       "no snapshot in force: a whole snapshot is needed", true, 0);
		return;
	}
	if (m->base != in_force) {
		snprintf(err, sizeof(err),
			 "%llu is not the revision in force (%llu): a whole snapshot is needed",
			 (unsigned long long)m->base, (unsigned long long)in_force);
		refuse(a, m, m->revision, "base", err, true, 0);
		return;
	}
	ret = agent_apply_change(a, m->revision, m->type == RW_WATCH_RUN_DELETE ? NULL : m->body,
				 m->id, "policy-watch", &refused_at, &reply);
	if (ret && refused_at) {
		/* The message's own: "base" wants a whole snapshot, "id" names no run. */
		refuse(a, m, m->revision, refused_at,
		       json_string_value(json_object_get(reply, "error")),
		       !strcmp(refused_at, "base"), 0);
		json_decref(reply);
		return;
	}
	ack_change(a, m, ret, reply, received_ns);
}

static void on_message(struct agent *a, const struct rw_watch_item *it)
{
	struct rw_watch_msg m;
	char err[300];

	a->follow.last_message_ns = it->received_ns;
	if (rw_watch_msg_parse(it->text, it->len, &m, err, sizeof(err))) {
		const char *colon = strstr(err, ": ");
		char path[80] = "";

		if (colon && colon - err < (long)sizeof(path))
			snprintf(path, sizeof(path), "%.*s", (int)(colon - err), err);
		refuse(a, NULL, 0, path, colon ? colon + 2 : err, true, revision_in_force(a));
		return;
	}
	/* Any message the control plane sends, a heartbeat too, says it is there: the lease of the
	 * snapshot in force runs again from now (a snapshot it carries sets its own when applied).
	 */
	if (rw_lease_renew(&a->dp, err, sizeof(err)))
		rw_warn("policy watch: renewing the lease: %s", err);
	if (m.revision > a->follow.received)
		a->follow.received = m.revision;
	if (m.type == RW_WATCH_SNAPSHOT) {
		json_t *rev = json_object_get(m.body, "revision");

		if (json_is_integer(rev) && json_integer_value(rev) > 0 &&
		    (uint64_t)json_integer_value(rev) > a->follow.received)
			a->follow.received = json_integer_value(rev);
		on_snapshot(a, &m, it->received_ns);
	} else if (m.type == RW_WATCH_RUN_UPSERT || m.type == RW_WATCH_RUN_DELETE) {
		on_run_change(a, &m, it->received_ns);
	}
	rw_watch_msg_free(&m);
	rw_watch_set_revision(a->follow.watch, revision_in_force(a));
}

void agent_follow_on_fd(struct agent *a)
{
	struct rw_watch_item it;

	for (int i = 0; i < ITEMS_PER_WAKEUP && rw_watch_pop(a->follow.watch, &it); i++) {
		switch (it.kind) {
		case RW_WATCH_ITEM_CONNECTED:
			rw_info("policy watch: connected to %s (revision %llu in force)",
				it.text ? it.text : "", (unsigned long long)revision_in_force(a));
			a->follow.last_message_ns = it.received_ns;
			break;
		case RW_WATCH_ITEM_DISCONNECTED:
			if (it.refused && it.text) {
				/* Oversized or truncated: acked like a malformed message. */
				a->follow.refusals++;
				snprintf(a->follow.last_refusal, sizeof(a->follow.last_refusal),
					 "(message): %s", it.text);
				send_ack(a, json_pack("{s:b, s:s, s:s, s:I}", "ok", 0, "error",
						      it.text, "path", "(message)", "in_force",
						      (json_int_t)revision_in_force(a)));
			}
			rw_warn("policy watch: %s; reconnecting in %u ms (enforcing revision %llu "
				"meanwhile)",
				it.text ? it.text : "", it.retry_ms,
				(unsigned long long)revision_in_force(a));
			break;
		case RW_WATCH_ITEM_MESSAGE:
			if (it.text)
				on_message(a, &it);
			break;
		}
		free(it.text);
	}
	agent_view_changed(a);
}

int agent_follow_start(struct agent *a, char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};

	a->follow.opts.node = a->view_opts.node;
	a->follow.watch = rw_watch_start(&a->follow.opts, revision_in_force(a), err, errlen);
	if (!a->follow.watch)
		return -EINVAL;
	ev.data.fd = rw_watch_fd(a->follow.watch);
	if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev)) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		return -errno;
	}
	rw_info("policy watch: following %s, acknowledging to %s", a->follow.opts.url,
		rw_watch_ack_url(a->follow.watch));
	return 0;
}

bool agent_follow_is_fd(const struct agent *a, int fd)
{
	return a->follow.watch && fd == rw_watch_fd(a->follow.watch);
}

void agent_follow_tick(struct agent *a)
{
	struct rw_watch_stats st;

	if (!a->follow.watch)
		return;
	/* A snapshot from the file or the socket moves the revision a reconnection resumes from. */
	rw_watch_set_revision(a->follow.watch, revision_in_force(a));
	rw_watch_get_stats(a->follow.watch, &st);
	a->follow.metrics.watch_enabled = true;
	a->follow.metrics.watch_connected = st.connected;
	a->follow.metrics.watch_connects = st.connects;
	a->follow.metrics.watch_messages = st.messages;
	a->follow.metrics.watch_refusals = a->follow.refusals;
	a->follow.metrics.watch_acks_sent = st.acks_sent;
	a->follow.metrics.watch_acks_failed = st.acks_failed;
	a->follow.metrics.watch_revision_received = a->follow.received;
	a->follow.metrics.watch_message_age =
		a->follow.last_message_ns ? (rw_now_mono_ns() - a->follow.last_message_ns) / 1e9
					  : -1;
}

json_t *agent_follow_status(struct agent *a)
{
	struct rw_watch_stats st;

	if (!a->follow.watch)
		return json_null();
	rw_watch_get_stats(a->follow.watch, &st);
	return json_pack(
		"{s:s, s:s, s:b, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
		"url", a->follow.opts.url, "ack_url", rw_watch_ack_url(a->follow.watch),
		"connected", st.connected, "connects", (json_int_t)st.connects, "disconnects",
		(json_int_t)st.disconnects, "messages", (json_int_t)st.messages,
		"last_message_age_ms",
		a->follow.last_message_ns
			? json_integer((rw_now_mono_ns() - a->follow.last_message_ns) / 1000000)
			: json_null(),
		"revision_received", (json_int_t)a->follow.received, "revision_enforced",
		(json_int_t)revision_in_force(a), "applied", (json_int_t)a->follow.applied,
		"refusals", (json_int_t)a->follow.refusals, "acks_sent", (json_int_t)st.acks_sent,
		"acks_failed", (json_int_t)st.acks_failed, "acks_dropped",
		(json_int_t)st.acks_dropped, "last_error",
		st.last_error[0] ? json_string(st.last_error) : json_null(), "last_refusal",
		a->follow.last_refusal[0] ? json_string(a->follow.last_refusal) : json_null());
}

void agent_follow_stop(struct agent *a)
{
	rw_watch_stop(a->follow.watch);
	a->follow.watch = NULL;
}

void agent_follow_metrics(const struct agent *a, struct rw_metrics_snap *snap)
{
	const struct rw_metrics_snap *m = &a->follow.metrics;

	snap->watch_enabled = m->watch_enabled;
	snap->watch_connected = m->watch_connected;
	snap->watch_connects = m->watch_connects;
	snap->watch_messages = m->watch_messages;
	snap->watch_refusals = m->watch_refusals;
	snap->watch_acks_sent = m->watch_acks_sent;
	snap->watch_acks_failed = m->watch_acks_failed;
	snap->watch_revision_received = m->watch_revision_received;
	snap->watch_message_age = m->watch_message_age;
}
