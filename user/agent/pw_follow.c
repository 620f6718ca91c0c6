// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* pw_follow.c: the agent's side of PolicyWatch (--policy-url, docs/policy-watch.md): the
 * messages pw_stream.c hands over are judged and applied here, on the loop, through
 * agent_apply_doc() (the validation and the apply of `runwall apply`, on the snapshot as the
 * message's parse left it), and each outcome is acknowledged. A run's change is the snapshot
 * in force with that run replaced or removed: rw_apply() re-judges the flows of that run only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "agent.h"
#include "log.h"
#include "pw_stream.h"
#include "util.h"
#include "pw_msg.h"

#define ITEMS_PER_WAKEUP 16 /* then back to the loop's other fds; the eventfd stays readable */

/* The run changes of one wakeup that were checked and kept (agent_change_compose()), applied
 * together and then acked in their order: the changes that queued while the agent was busy
 * (an apply waiting for the grace period of the one before, a veth's sync) take one apply,
 * one flip and one grace period between them.
 */
struct held {
	struct held_change {
		struct rw_pw_msg m;
		int64_t received_ns;
		double parse_ms;
	} c[ITEMS_PER_WAKEUP];
	size_t n;
};

static void send_ack(struct agent *a, json_t *o)
{
	char *body;

	json_object_set_new(o, "node", json_string(a->view_opts.node));
	body = json_dumps(o, JSON_COMPACT);
	if (body) {
		rw_pw_ack(a->follow.watch, body);
		free(body);
	}
	json_decref(o);
}

static const char *const type_names[] = {
	[RW_WATCH_SNAPSHOT] = "snapshot",     [RW_WATCH_RUN_UPSERT] = "run-upsert",
	[RW_WATCH_RUN_DELETE] = "run-delete", [RW_WATCH_HEARTBEAT] = "heartbeat",
	[RW_WATCH_STAGED] = "staged",	      [RW_WATCH_UNSTAGE] = "unstage",
};

/* What a refusal asks of the server (docs/policy-watch.md, Errors): nothing (the stream is
 * kept), a whole snapshot (reconnect with revision=0) or a resume (reconnect, after the backoff,
 * with the revision in force).
 */
enum need { NEED_NONE, NEED_SNAPSHOT, NEED_RESUME };

static const char *const need_names[] = {
	[NEED_SNAPSHOT] = "snapshot",
	[NEED_RESUME] = "resume",
};

/* A refusal: counted, logged, acknowledged; the stream dropped when `need` says so. A message
 * that is not one (`m` NULL: path "(message)", "type", a key) has no type, revision or id to
 * name: its ack is known by its place among the others.
 */
static void refuse(struct agent *a, const struct rw_pw_msg *m, uint64_t revision, const char *path,
		   const char *error, enum need need)
{
	json_t *o;

	a->follow.refusals++;
	rw_warn("policy watch: refused %s%s%s: %s%s%s", m ? type_names[m->type] : "a message",
		m && m->id[0] ? " " : "", m ? m->id : "", path, path[0] ? ": " : "", error);
	snprintf(a->follow.last_refusal, sizeof(a->follow.last_refusal), "%s%s%s", path,
		 path[0] ? ": " : "", error);
	o = json_pack("{s:b, s:s, s:s, s:I}", "ok", 0, "error", error, "path", path, "in_force",
		      (json_int_t)agent_revision_in_force(a));
	if (m) {
		json_object_set_new(o, "type", json_string(type_names[m->type]));
		if (revision)
			json_object_set_new(o, "revision", json_integer(revision));
		if (m->type == RW_WATCH_RUN_UPSERT || m->type == RW_WATCH_RUN_DELETE)
			json_object_set_new(o, "base", json_integer(m->base));
		if (m->id[0])
			json_object_set_new(o, "id", json_string(m->id));
	}
	if (need != NEED_NONE)
		json_object_set_new(o, "need", json_string(need_names[need]));
	send_ack(a, o);
	if (need != NEED_NONE)
		rw_pw_drop(a->follow.watch, need == NEED_RESUME ? agent_revision_in_force(a) : 0);
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
static void ack_refusal(struct agent *a, const struct rw_pw_msg *m, uint64_t revision,
			json_t *reply, bool run_change)
{
	const char *error = json_string_value(json_object_get(reply, "error")), *msg;
	char path[256], mapped[300];
	json_t *o;

	if (!error)
		error = "refused";
	if (rw_pw_error_path(error, path, sizeof(path), &msg)) {
		bool own =
			run_change && ((!strncmp(path, "run", 3) && (path[3] == '.' || !path[3])) ||
				       !strcmp(path, "id") || !strcmp(path, "revision"));

		snprintf(mapped, sizeof(mapped), "%s%s", own ? "" : "snapshot.", path);
	} else {
		msg = error;
		mapped[0] = '\0';
	}
	/* The apply counted and logged it as any refused snapshot; ack it as this message's. */
	a->follow.refusals++;
	snprintf(a->follow.last_refusal, sizeof(a->follow.last_refusal), "%s%s%s", mapped,
		 mapped[0] ? ": " : "", msg);
	o = json_pack("{s:b, s:s, s:s, s:s, s:I, s:I}", "ok", 0, "type", type_names[m->type],
		      "error", msg, "path", mapped, "revision", (json_int_t)revision, "in_force",
		      (json_int_t)agent_revision_in_force(a));
	if (m->id[0])
		json_object_set_new(o, "id", json_string(m->id));
	send_ack(a, o);
	json_decref(reply);
}

/* Apply a snapshot as its message's parse left it, and ack what became of it. */
static void apply_and_ack(struct agent *a, const struct rw_pw_msg *m, uint64_t revision,
			  int64_t received_ns)
{
	json_t *reply = NULL, *o;
	int64_t t0 = rw_now_mono_ns();
	int ret = agent_apply_doc(a, m->body, "policy-watch", &reply);

	if (ret == 0) {
		/* apply_ms: rw_apply(), the maps and the flip; parse_ms: the rest of
		 * agent_apply_doc() (the policy parser's checks on the document the message's parse
		 * made, and the diff for the log), both O(node) in CPU, not in kernel work.
		 * A snapshot composes nothing: no compose_ms. The probes follow the ack.
		 */
		double apply_ms = json_real_value(json_object_get(reply, "apply_ms"));

		o = json_pack("{s:b, s:s, s:I, s:f, s:f, s:f}", "ok", 1, "type",
			      type_names[m->type], "revision", (json_int_t)revision, "apply_ms",
			      apply_ms, "parse_ms", (rw_now_mono_ns() - t0) / 1e6 - apply_ms,
			      "queued_ms", (rw_now_mono_ns() - received_ns) / 1e6);
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

/* Whether the file adopted at start is, key for key, the snapshot `body` (its text is kept
 * until a change edits it, and an adopted policy takes no change).
 */
static bool adopted_equals(struct agent *a, json_t *body)
{
	json_t *doc = a->pol.policy_text
			      ? json_loadb(a->pol.policy_text, a->pol.policy_text_len, 0, NULL)
			      : NULL;
	bool same = doc && json_equal(doc, body);

	json_decref(doc);
	return same;
}

static void on_snapshot(struct agent *a, const struct rw_pw_msg *m, int64_t received_ns)
{
	json_t *rev = json_object_get(m->body, "revision");
	uint64_t in_force = agent_revision_in_force(a);
	uint64_t revision = json_is_integer(rev) && json_integer_value(rev) > 0
				    ? (uint64_t)json_integer_value(rev)
				    : 0;

	/* The revision in force again (a server that resends what the agent told it it has):
	 * nothing to apply, and the flows stay cached. A policy adopted from the file at start is
	 * only as good as its revision number: the stream's snapshot of that revision confirms it
	 * when their contents are equal, and is refused when not (the kernel takes no revision
	 * twice: the server sends it again above the revision in force).
	 */
	if (revision && revision == in_force && a->pol.have_policy) {
		if (a->pol.policy_adopted && !adopted_equals(a, m->body)) {
			char err[400];

			snprintf(err, sizeof(err),
				 "%llu is the revision in force, adopted from %s with other "
				 "content: send this snapshot at a revision above %llu",
				 (unsigned long long)revision, a->pol.policy_source,
				 (unsigned long long)in_force);
			refuse(a, m, revision, "snapshot.revision", err, NEED_NONE);
			return;
		}
		if (a->pol.policy_adopted)
			rw_info("policy watch: the snapshot of revision %llu is the content "
				"adopted from %s: confirmed",
				(unsigned long long)revision, a->pol.policy_source);
		a->pol.policy_adopted = false;
		send_ack(a, json_pack("{s:b, s:s, s:I, s:I, s:b}", "ok", 1, "type", "snapshot",
				      "revision", (json_int_t)revision, "generation",
				      (json_int_t)revision, "unchanged", 1));
		return;
	}
	apply_and_ack(a, m, revision, received_ns);
}

/* The ack of a run change refused or applied, one of `batch` applied together. */
static void ack_change(struct agent *a, const struct rw_pw_msg *m, int ret, json_t *reply,
		       int64_t received_ns, size_t batch)
{
	json_t *o;

	if (ret == 0) {
		double apply_ms = json_real_value(json_object_get(reply, "apply_ms"));
		double compose_ms = json_real_value(json_object_get(reply, "compose_ms"));
		double parse_ms = json_real_value(json_object_get(reply, "parse_ms"));

		o = json_pack("{s:b, s:s, s:I, s:f, s:f, s:f, s:f}", "ok", 1, "type",
			      type_names[m->type], "revision", (json_int_t)m->revision, "apply_ms",
			      apply_ms, "parse_ms", parse_ms, "compose_ms", compose_ms, "queued_ms",
			      (rw_now_mono_ns() - received_ns) / 1e6);
		json_object_set_new(o, "generation",
				    json_integer(m->type == RW_WATCH_RUN_UPSERT
							 ? run_generation(a, m->id)
							 : m->revision));
		json_object_set_new(o, "id", json_string(m->id));
		json_object_set_new(o, "batch", json_integer((json_int_t)batch));
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

/* Apply the run changes held, and ack each: all in force, or all refused with the apply's
 * error. Then the revision a reconnection resumes from is the one in force.
 */
static void flush(struct agent *a, struct held *h)
{
	json_t *reply = NULL;
	int ret;

	if (!h->n)
		return;
	ret = agent_changes_apply(a, "policy-watch", &reply);
	for (size_t i = 0; i < h->n; i++) {
		struct held_change *c = &h->c[i];
		json_t *r = i + 1 < h->n ? json_deep_copy(reply) : json_incref(reply);

		if (!ret && r)
			json_object_set_new(r, "parse_ms", json_real(c->parse_ms));
		ack_change(a, &c->m, ret, r, c->received_ns, h->n);
		rw_pw_msg_free(&c->m);
	}
	json_decref(reply);
	h->n = 0;
	rw_pw_set_revision(a->follow.watch, agent_revision_in_force(a));
}

/* A run's change: that run parsed and checked against the index of the policy in force, and
 * applied as the policy in force with that run replaced or removed (agent_apply_change()).
 * Nothing of the other runs is parsed or written out again.
 */
static bool on_run_change(struct agent *a, const struct rw_pw_msg *m, int64_t received_ns,
			  struct held *h)
{
	uint64_t in_force = agent_revision_in_force(a);
	const char *refused_at;
	json_t *reply = NULL;
	char err[400];
	int64_t t0;
	int ret;

	/* The message's own order first: a change that goes nowhere is refused whatever the node
	 * enforces, and the stream goes on. Every refusal comes after the changes held are
	 * applied and acked: acks go in the messages' order.
	 */
	if (m->revision <= m->base) {
		snprintf(err, sizeof(err), "%llu is not above its base %llu",
			 (unsigned long long)m->revision, (unsigned long long)m->base);
		flush(a, h);
		refuse(a, m, m->revision, "revision", err, NEED_NONE);
		return false;
	}
	if (!a->pol.have_policy || (!a->pol.policy_text && !a->pol.policy_doc)) {
		flush(a, h);
		refuse(a, m, m->revision, "base",
		       "no snapshot in force: a whole snapshot is needed", NEED_SNAPSHOT);
		return false;
	}
	/* in_force: the revision of the last change held, as if it were applied. */
	if (m->base != in_force) {
		flush(a, h);
		snprintf(err, sizeof(err),
			 "%llu is not the revision in force (%llu): a whole snapshot is needed",
			 (unsigned long long)m->base,
			 (unsigned long long)agent_revision_in_force(a));
		refuse(a, m, m->revision, "base", err, NEED_SNAPSHOT);
		return false;
	}
	/* A file adopted at start carries the revision in force, not necessarily its content
	 * (a ConfigMap written for another node, or before the stream moved on): a change built
	 * on it would enforce the file's services, deny list, runs and lease. Only a snapshot
	 * from the stream makes a base.
	 */
	if (a->pol.policy_adopted) {
		flush(a, h);
		snprintf(err, sizeof(err),
			 "revision %llu in force was adopted from %s at start, and the kernel "
			 "cannot confirm its content: a whole snapshot is needed",
			 (unsigned long long)in_force, a->pol.policy_source);
		refuse(a, m, m->revision, "base", err, NEED_SNAPSHOT);
		return false;
	}
	t0 = rw_now_mono_ns();
	ret = agent_change_compose(a, m->revision, m->type == RW_WATCH_RUN_DELETE ? NULL : m->body,
				   m->id, "policy-watch", &refused_at, &reply);
	if (ret) {
		flush(a, h);
		if (refused_at) {
			/* The message's own: "base" wants a whole snapshot, "id" names no run. */
			refuse(a, m, m->revision, refused_at,
			       json_string_value(json_object_get(reply, "error")),
			       !strcmp(refused_at, "base") ? NEED_SNAPSHOT : NEED_NONE);
			json_decref(reply);
			return false;
		}
		ack_change(a, m, ret, reply, received_ns, 1);
		return false;
	}
	h->c[h->n++] = (struct held_change){*m, received_ns, (rw_now_mono_ns() - t0) / 1e6};
	if (h->n == ITEMS_PER_WAKEUP)
		flush(a, h);
	return true;
}

/* A snapshot or a run staged, never enforced; or the staged snapshot dropped. Acked as the
 * others; a refusal keeps the stream and the slot as it was, its path under "snapshot." (a
 * staged run: the snapshot in force with that run, at the revision in force + 1).
 */
static void on_staged(struct agent *a, const struct rw_pw_msg *m, int64_t received_ns)
{
	json_t *reply = NULL, *o;
	uint64_t revision;
	int ret;

	if (m->type == RW_WATCH_UNSTAGE) {
		agent_unstage(a, &reply);
		o = json_pack("{s:b, s:s, s:O}", "ok", 1, "type", "unstage", "dropped",
			      json_object_get(reply, "dropped"));
		json_decref(reply);
		send_ack(a, o);
		return;
	}
	ret = m->run_staged ? agent_stage_run(a, m->body, "policy-watch", &reply)
			    : agent_stage_doc(a, m->body, "policy-watch", &reply);
	if (ret) {
		json_t *rev = json_object_get(m->body, "revision");

		revision = json_is_integer(rev) && json_integer_value(rev) > 0
				   ? (uint64_t)json_integer_value(rev)
				   : 0;
		ack_refusal(a, m, revision, reply, false);
		return;
	}
	revision = a->staged.policy.revision;
	o = json_pack("{s:b, s:s, s:I, s:f, s:f}", "ok", 1, "type", "staged", "revision",
		      (json_int_t)revision, "load_ms", a->staged.load_ms, "queued_ms",
		      (rw_now_mono_ns() - received_ns) / 1e6);
	if (m->id[0])
		json_object_set_new(o, "id", json_string(m->id));
	rw_debug("policy watch: staged revision %llu", (unsigned long long)revision);
	json_decref(reply);
	send_ack(a, o);
}

static void on_message(struct agent *a, const struct rw_pw_item *it, struct held *h)
{
	struct rw_pw_msg m;
	char err[300];

	a->follow.last_message_ns = it->received_ns;
	if (rw_pw_msg_parse(it->text, it->len, &m, err, sizeof(err))) {
		const char *colon = strstr(err, ": ");
		char path[80] = "";

		flush(a, h);
		if (colon && colon - err < (long)sizeof(path))
			snprintf(path, sizeof(path), "%.*s", (int)(colon - err), err);
		refuse(a, NULL, 0, path, colon ? colon + 2 : err, NEED_RESUME);
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
		flush(a, h);
		on_snapshot(a, &m, it->received_ns);
	} else if (m.type == RW_WATCH_RUN_UPSERT || m.type == RW_WATCH_RUN_DELETE) {
		if (on_run_change(a, &m, it->received_ns, h))
			return; /* held: acked by flush(), which frees it */
	} else if (m.type == RW_WATCH_STAGED || m.type == RW_WATCH_UNSTAGE) {
		flush(a, h);
		on_staged(a, &m, it->received_ns);
	}
	rw_pw_msg_free(&m);
	if (!h->n)
		rw_pw_set_revision(a->follow.watch, agent_revision_in_force(a));
}

void agent_follow_on_fd(struct agent *a)
{
	struct held h = {.n = 0};
	struct rw_pw_item it;

	for (int i = 0; i < ITEMS_PER_WAKEUP && rw_pw_pop(a->follow.watch, &it); i++) {
		if (it.kind != RW_WATCH_ITEM_MESSAGE)
			flush(a, &h);
		switch (it.kind) {
		case RW_WATCH_ITEM_CONNECTED:
			rw_info("policy watch: connected to %s (revision %llu in force)",
				it.text ? it.text : "",
				(unsigned long long)agent_revision_in_force(a));
			a->follow.last_message_ns = it.received_ns;
			break;
		case RW_WATCH_ITEM_DISCONNECTED:
			if (it.refused && it.text) {
				/* Oversized or truncated: acked like a malformed message. The stream
				 * thread has dropped the stream already, and resumes after the backoff.
				 */
				a->follow.refusals++;
				snprintf(a->follow.last_refusal, sizeof(a->follow.last_refusal),
					 "(message): %s", it.text);
				send_ack(a, json_pack("{s:b, s:s, s:s, s:I, s:s}", "ok", 0, "error",
						      it.text, "path", "(message)", "in_force",
						      (json_int_t)agent_revision_in_force(a),
						      "need", need_names[NEED_RESUME]));
			}
			rw_warn("policy watch: %s; reconnecting in %u ms (enforcing revision %llu "
				"meanwhile)",
				it.text ? it.text : "", it.retry_ms,
				(unsigned long long)agent_revision_in_force(a));
			break;
		case RW_WATCH_ITEM_MESSAGE:
			if (it.text)
				on_message(a, &it, &h);
			break;
		}
		free(it.text);
	}
	flush(a, &h);
	agent_view_changed(a);
}

int agent_follow_start(struct agent *a, char *err, size_t errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};

	a->follow.opts.node = a->view_opts.node;
	a->follow.watch = rw_pw_start(&a->follow.opts, agent_revision_in_force(a), err, errlen);
	if (!a->follow.watch)
		return -EINVAL;
	ev.data.fd = rw_pw_fd(a->follow.watch);
	if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev)) {
		snprintf(err, errlen, "epoll: %s", strerror(errno));
		return -errno;
	}
	rw_info("policy watch: following %s, acknowledging to %s", a->follow.opts.url,
		rw_pw_ack_url(a->follow.watch));
	return 0;
}

bool agent_follow_pending(struct agent *a)
{
	return a->follow.watch && rw_pw_waiting(a->follow.watch);
}

void agent_follow_urgent(struct agent *a)
{
	/* The loop's only: on the link thread (a veth lock's wait, a resync between sandboxes)
	 * the loop serves the changes itself meanwhile.
	 */
	if (agent_on_loop(a) && agent_follow_pending(a))
		agent_follow_on_fd(a);
}

void agent_follow_urgent_cb(void *data)
{
	agent_follow_urgent(data);
}

bool agent_follow_is_fd(const struct agent *a, int fd)
{
	return a->follow.watch && fd == rw_pw_fd(a->follow.watch);
}

void agent_follow_tick(struct agent *a)
{
	struct rw_pw_stats st;

	if (!a->follow.watch)
		return;
	/* A snapshot from the file or the socket moves the revision a reconnection resumes from. */
	rw_pw_set_revision(a->follow.watch, agent_revision_in_force(a));
	rw_pw_get_stats(a->follow.watch, &st);
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
	struct rw_pw_stats st;

	if (!a->follow.watch)
		return json_null();
	rw_pw_get_stats(a->follow.watch, &st);
	return json_pack(
		"{s:s, s:s, s:b, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
		"url", a->follow.opts.url, "ack_url", rw_pw_ack_url(a->follow.watch), "connected",
		st.connected, "connects", (json_int_t)st.connects, "disconnects",
		(json_int_t)st.disconnects, "messages", (json_int_t)st.messages,
		"last_message_age_ms",
		a->follow.last_message_ns
			? json_integer((rw_now_mono_ns() - a->follow.last_message_ns) / 1000000)
			: json_null(),
		"revision_received", (json_int_t)a->follow.received, "revision_enforced",
		(json_int_t)agent_revision_in_force(a), "applied", (json_int_t)a->follow.applied,
		"refusals", (json_int_t)a->follow.refusals, "acks_sent", (json_int_t)st.acks_sent,
		"acks_failed", (json_int_t)st.acks_failed, "acks_dropped",
		(json_int_t)st.acks_dropped, "last_error",
		st.last_error[0] ? json_string(st.last_error) : json_null(), "last_refusal",
		a->follow.last_refusal[0] ? json_string(a->follow.last_refusal) : json_null());
}

void agent_follow_stop(struct agent *a)
{
	rw_pw_stop(a->follow.watch);
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
