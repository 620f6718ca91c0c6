// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* policy_apply.c: the agent's policy in force, whatever its source (the --policy file, the
 * control socket, PolicyWatch): a snapshot or one run's change parsed, applied, and kept for
 * status and `runwall explain`; the probes of cut connections asked for after the answer
 * (agent_settle()).
 */
#include <libgen.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ctl.h"
#include "liveruns.h"
#include "log.h"
#include "util.h"

/* The run's generation as the kernel holds it: its rw_pod value, read through any one of its pods
 * (IPv4 or IPv6: the same value); the apply's revision when it has none live.
 */
static __u32 run_gen(const struct agent *a, const struct rw_policy_run *run)
{
	struct rw_pod pod;

	if (run->n_pods && rw_live_pod(&a->dp, run->pods[0], &pod) == 0)
		return pod.run_gen;
	if (run->n_pods6 && rw_live_pod6(&a->dp, run->pods6[0], &pod) == 0)
		return pod.run_gen;
	return a->pol.last_apply.revision;
}

/* The runs' state after an apply: the generation of each run `changed` marks (by its place in
 * the policy; NULL: every run) read back from the kernel, the others' carried over. Only a
 * changed run's generation moves: a batch of changes reads its own runs, not the node's.
 */
static void runs_update(struct agent *a, const bool *changed)
{
	struct run_state *next =
		calloc(a->pol.policy.n_runs ? a->pol.policy.n_runs : 1, sizeof(*next));
	int64_t now = rw_now_real_ns();

	if (!next)
		return;
	for (size_t r = 0; r < a->pol.policy.n_runs; r++) {
		const struct run_state *old = NULL;

		snprintf(next[r].id, sizeof(next[r].id), "%s", a->pol.policy.runs[r].id);
		/* Where the policy is still in a->pol.runs' order, run r's old state is at r. */
		for (size_t k = 0; k < a->pol.n_runs; k++) {
			size_t o = (r + k) % a->pol.n_runs;

			if (!strcmp(a->pol.runs[o].id, next[r].id)) {
				old = &a->pol.runs[o];
				break;
			}
		}
		next[r].gen = old && changed && !changed[r] ? old->gen
							    : run_gen(a, &a->pol.policy.runs[r]);
		next[r].since = old && old->gen == next[r].gen ? old->since : now;
	}
	free(a->pol.runs);
	a->pol.runs = next;
	a->pol.n_runs = a->pol.policy.n_runs;
}

void agent_runs_update(struct agent *a)
{
	runs_update(a, NULL);
}

const struct run_state *agent_run_state(const struct agent *a, size_t r)
{
	const char *id = a->pol.policy.runs[r].id;

	if (r < a->pol.n_runs && !strcmp(a->pol.runs[r].id, id))
		return &a->pol.runs[r];
	for (size_t i = 0; i < a->pol.n_runs; i++)
		if (!strcmp(a->pol.runs[i].id, id))
			return &a->pol.runs[i];
	return NULL;
}

/* The run state of one run change (agent_runs_update() for that run alone): a->pol.runs follows the
 * policy's order, as the change moved it.
 */
static void run_state_change(struct agent *a, size_t at, bool added, bool removed)
{
	const struct rw_policy_run *run = removed ? NULL : &a->pol.policy.runs[at];
	struct run_state st = {}, *grown;

	if (a->pol.n_runs != a->pol.policy.n_runs + removed - added) {
		agent_runs_update(
			a); /* a->pol.runs fell behind (no memory at some point): all of them */
		return;
	}
	if (removed) {
		memmove(&a->pol.runs[at], &a->pol.runs[at + 1],
			(a->pol.n_runs - at - 1) * sizeof(*a->pol.runs));
		a->pol.n_runs--;
		return;
	}
	snprintf(st.id, sizeof(st.id), "%s", run->id);
	st.gen = run_gen(a, run);
	st.since = rw_now_real_ns();
	if (added) {
		grown = realloc(a->pol.runs, (a->pol.n_runs + 1) * sizeof(*a->pol.runs));
		if (!grown) {
			agent_runs_update(a);
			return;
		}
		a->pol.runs = grown;
		a->pol.runs[a->pol.n_runs++] = st;
		return;
	}
	if (!strcmp(a->pol.runs[at].id, st.id) && a->pol.runs[at].gen == st.gen)
		st.since = a->pol.runs[at].since;
	a->pol.runs[at] = st;
}

/* Free the kept forms of the policy: its document, its index and its text. */
static void policy_forms_free(struct agent *a)
{
	json_decref(a->pol.policy_doc);
	a->pol.policy_doc = NULL;
	rw_policy_index_free(&a->pol.policy_index);
	free(a->pol.policy_text);
	a->pol.policy_text = NULL;
	a->pol.policy_text_len = 0;
}

/* Forget the kept forms of the policy replaced; `source` names the one now in force. */
static void policy_forget(struct agent *a, const char *source)
{
	policy_forms_free(a);
	snprintf(a->pol.policy_source, sizeof(a->pol.policy_source), "%s", source);
}

/* A whole snapshot's text: what the control socket's `policy` returns. */
void agent_policy_keep_text(struct agent *a, const char *buf, size_t len, const char *source)
{
	char *copy = malloc(len + 1);

	policy_forget(a, source);
	if (!copy)
		return;
	memcpy(copy, buf, len);
	copy[len] = '\0';
	a->pol.policy_text = copy;
	a->pol.policy_text_len = len;
}

/* A whole snapshot's document (PolicyWatch's): written out as its text only when read. */
static void policy_keep_doc(struct agent *a, json_t *doc, const char *source)
{
	policy_forget(a, source);
	a->pol.policy_doc = json_incref(doc);
}

json_t *agent_policy_doc(struct agent *a)
{
	json_t *runs;

	/* Once per snapshot kept as text: every change after it edits the document. */
	if (!a->pol.policy_doc && a->pol.policy_text)
		a->pol.policy_doc = json_loadb(a->pol.policy_text, a->pol.policy_text_len, 0, NULL);
	if (!a->pol.policy_doc)
		return NULL;
	runs = json_object_get(a->pol.policy_doc, "runs");
	if (!runs)
		json_object_set_new(a->pol.policy_doc, "runs", runs = json_array());
	if (!json_is_array(runs) || json_array_size(runs) != a->pol.policy.n_runs) {
		json_decref(a->pol.policy_doc);
		a->pol.policy_doc = NULL;
	}
	return a->pol.policy_doc;
}

const char *agent_policy_text(struct agent *a, size_t *len)
{
	if (!a->pol.policy_text && a->pol.policy_doc) {
		a->pol.policy_text = json_dumps(a->pol.policy_doc, JSON_COMPACT);
		a->pol.policy_text_len = a->pol.policy_text ? strlen(a->pol.policy_text) : 0;
	}
	*len = a->pol.policy_text_len;
	return a->pol.policy_text;
}

/* The lines of rw_policy_diff(old, new), appended to `lines`. */
static void diff_lines(json_t *lines, const struct rw_policy *old, const struct rw_policy *new)
{
	char *diff = malloc(65536);

	if (!diff || rw_policy_diff(old, new, diff, 65536) < 0) {
		free(diff);
		return;
	}
	for (char *line = strtok(diff, "\n"); line; line = strtok(NULL, "\n"))
		json_array_append_new(lines, json_string(line));
	free(diff);
}

/* rw_apply() of `next` over `prev` (the policy in force, or NULL: none this agent can vouch
 * for), counted and logged with `changes` (the diff's lines, taken over); on success *reply
 * holds the result, and the caller makes `next` the policy in force and calls applied().
 */
static int apply_next(struct agent *a, const struct rw_policy *prev, const struct rw_policy *next,
		      json_t *changes, const char *source, struct rw_apply_result *res,
		      json_t **reply)
{
	char err[600];
	int ret;

	admissions_refresh(a); /* the containers the new slot's rw_admit admits */
	ret = rw_apply(&a->dp, prev, next, res, err, sizeof(err));
	if (ret) {
		char msg[700];

		json_decref(changes);
		/* Not every failure inside rw_apply() writes a sentence (a map opened by id without
		 * CAP_SYS_ADMIN fails with EPERM before any): never log an empty reason.
		 */
		if (!err[0])
			snprintf(
				err, sizeof(err), "%s%s", strerror(-ret),
				ret == -EPERM || ret == -EACCES
					? " (a capability is missing: the agent needs BPF, NET_ADMIN "
					  "and SYS_ADMIN)"
					: "");
		snprintf(msg, sizeof(msg), "%s: %s", source, err);
		a->pol.metrics.applies_refused++;
		rw_warn("refused snapshot: %s", msg);
		agent_set_error(a, "%s", msg);
		*reply = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
		return ret;
	}
	for (size_t i = 0; i < json_array_size(changes); i++)
		rw_debug("  %s", json_string_value(json_array_get(changes, i)));
	rw_info("applied revision %llu from %s (previous %llu): %zu changes, %u runs, %u pods, "
		"%u entries, %.1f ms (grace owed %.1f, build %.1f, flip %.1f), %u flows forgotten",
		(unsigned long long)res->revision, source, (unsigned long long)res->previous,
		json_array_size(changes), res->runs, res->pods, res->entries, res->total_ms,
		res->wait_ms, res->build_ms, res->flip_ms, res->flows_flushed);
	*reply = json_pack("{s:b, s:I, s:I, s:f, s:f, s:f, s:i, s:i, s:o}", "ok", 1, "revision",
			   (json_int_t)res->revision, "previous", (json_int_t)res->previous,
			   "apply_ms", res->total_ms, "build_ms", res->build_ms, "flip_ms",
			   res->flip_ms, "runs", (int)res->runs, "pods", (int)res->pods, "changes",
			   changes);
	return 0;
}

/* What follows an apply, once `a->pol.policy` is the policy applied. */
static void applied(struct agent *a, const struct rw_apply_result *res)
{
	a->pol.have_policy = true;
	a->pol.policy_adopted = false;
	a->pol.last_apply = *res;
	rw_metrics_apply(&a->pol.metrics, res->total_ms / 1000.0);
	agent_view_changed(a);
	if (!res->previous && !a->pol.ready_since)
		a->pol.ready_since = rw_now_real_ns();
	agent_clear_error(a);
	agent_staged_applied(a);
}

uint64_t agent_revision_in_force(struct agent *a)
{
	struct rw_config cfg = {};

	/* Only this agent's applies change the state word (the flip, in rw_apply()), and each that
	 * flips makes its policy the one in force here; a policy adopted at start is the revision
	 * the kernel holds. Without one the kernel may still enforce an earlier agent's.
	 */
	if (a->pol.have_policy)
		return a->pol.policy.revision;
	rw_config_read(&a->dp, &cfg);
	return RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0;
}

/* A whole snapshot parsed into `next` (`parsed`: the parser's return, `perr` its refusal),
 * applied and made the policy in force, kept as its text `buf` or its document `doc`.
 */
static int apply_snapshot(struct agent *a, int parsed, struct rw_policy *next,
			  const struct rw_policy_error *perr, const char *buf, size_t len,
			  json_t *doc, const char *source, json_t **reply)
{
	const struct rw_policy *prev;
	struct rw_apply_result res;
	json_t *changes;
	int ret;

	if (parsed) {
		a->pol.metrics.applies_refused++;
		rw_warn("refused snapshot: %s", perr->text);
		agent_set_error(a, "%s", perr->text);
		*reply = json_pack("{s:b, s:s, s:i, s:i}", "ok", 0, "error", perr->text, "line",
				   perr->line, "column", perr->column);
		return parsed;
	}
	/* An adopted snapshot is only as good as its revision number: a file with the revision in
	 * force but other content taken as `prev` would let runs it happens to share with `next`
	 * keep verdicts cached under what was really in force (a revocation kept).
	 */
	prev = a->pol.have_policy && !a->pol.policy_adopted ? &a->pol.policy : NULL;
	changes = json_array();
	diff_lines(changes, prev, next);
	ret = apply_next(a, prev, next, changes, source, &res, reply);
	if (ret) {
		rw_policy_free(next);
		return ret;
	}
	if (a->pol.have_policy)
		rw_policy_free(&a->pol.policy);
	a->pol.policy = *next;
	if (doc)
		policy_keep_doc(a, doc, source);
	else
		agent_policy_keep_text(a, buf, len, source);
	applied(a, &res);
	agent_runs_update(a);
	a->pol.settle_pending = true; /* after the reply: agent_settle() */
	return 0;
}

int agent_apply(struct agent *a, const char *buf, size_t len, const char *source, json_t **reply)
{
	struct rw_policy_error perr;
	struct rw_policy next;
	int ret = rw_policy_parse_newer(buf, len, source, agent_revision_in_force(a), &next, &perr);

	return apply_snapshot(a, ret, &next, &perr, buf, len, NULL, source, reply);
}

int agent_apply_doc(struct agent *a, json_t *doc, const char *source, json_t **reply)
{
	struct rw_policy_error perr;
	struct rw_policy next;
	int ret = rw_policy_parse_json(doc, source, agent_revision_in_force(a), &next, &perr);

	return apply_snapshot(a, ret, &next, &perr, NULL, 0, doc, source, reply);
}

/* ---- run changes: made one by one on the policy, applied together ------------------------- */

/* A change's edit of the kept document, made once the batch is in force. */
struct doc_edit {
	size_t at;
	bool added, removed;
	json_t *run;
};

static void batch_forget(struct agent *a)
{
	struct agent_batch *b = &a->pol.batch;

	for (size_t i = 0; i < b->n_edits; i++)
		json_decref(b->edits[i].run);
	free(b->edits);
	json_decref(b->changes);
	memset(b, 0, sizeof(*b));
}

/* The batch's edits of the document, in their order (each `at` is where the change before it
 * left its run). No memory: a document that is not the policy in force is no document; the
 * next change asks for a whole snapshot, and `policy` says the agent does not know.
 */
static void doc_edit(struct agent *a)
{
	const struct agent_batch *b = &a->pol.batch;
	json_t *doc = a->pol.policy_doc, *runs = json_object_get(doc, "runs");
	bool lost = !doc;

	for (size_t i = 0; i < b->n_edits && !lost; i++) {
		const struct doc_edit *e = &b->edits[i];

		lost = e->removed ? json_array_remove(runs, e->at)
		       : e->added ? json_array_append(runs, e->run)
				  : json_array_set(runs, e->at, e->run);
	}
	if (lost || json_object_set_new(doc, "revision", json_integer(a->pol.policy.revision))) {
		json_decref(a->pol.policy_doc);
		a->pol.policy_doc = NULL;
	}
	/* Written out again when read (agent_policy_text()), not at every change. */
	free(a->pol.policy_text);
	a->pol.policy_text = NULL;
	a->pol.policy_text_len = 0;
}

int agent_change_compose(struct agent *a, uint64_t revision, json_t *obj_run, const char *del_id,
			 const char *source, const char **refused_at, json_t **reply)
{
	struct rw_policy_index *ix = &a->pol.policy_index;
	struct agent_batch *b = &a->pol.batch;
	struct rw_policy_error perr;
	struct rw_policy_change c;
	struct doc_edit *grown;
	char msg[200];
	int ret;

	*refused_at = NULL;
	*reply = NULL;
	/* Once per snapshot, both in proportion to the node: the document and the index. */
	if (!b->open && (!json_is_array(json_object_get(agent_policy_doc(a), "runs")) ||
			 (!ix->runs && rw_policy_index_build(ix, &a->pol.policy)))) {
		*refused_at = "base";
		*reply = json_pack("{s:b, s:s}", "ok", 0, "error",
				   "the snapshot in force cannot be read back");
		return -ENOMEM;
	}
	if (!obj_run && rw_policy_index_run(ix, &a->pol.policy, del_id) < 0) {
		*refused_at = "id";
		snprintf(msg, sizeof(msg), "no run %s in force", del_id);
		*reply = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
		return -ENOENT;
	}
	ret = obj_run ? rw_policy_change_upsert(&a->pol.policy, ix, revision, obj_run, source, &c,
						&perr)
		      : rw_policy_change_delete(&a->pol.policy, ix, revision, del_id, source, &c,
						&perr);
	if (ret) {
		a->pol.metrics.applies_refused++;
		rw_warn("refused run change: %s", perr.text);
		agent_set_error(a, "%s", perr.text);
		*reply = json_pack("{s:b, s:s}", "ok", 0, "error", perr.text);
		return ret;
	}
	if (!b->open) {
		rw_policy_batch_begin(&b->runs, &a->pol.policy);
		b->changes = json_array();
		b->open = true;
	}
	grown = realloc(b->edits, (b->n_edits + 1) * sizeof(*b->edits));
	if (grown)
		b->edits = grown;
	if (grown && b->changes) {
		/* The one run that changed, not the node: the diff of two one-run policies. */
		struct rw_policy o = {.egress = a->pol.policy.egress,
				      .refusal = a->pol.policy.refusal},
				 nw = o;

		o.runs = &c.old;
		o.n_runs = !c.added;
		nw.runs = &c.next.runs[c.at];
		nw.n_runs = !c.removed;
		diff_lines(b->changes, &o, &nw);
		b->edits[b->n_edits] = (struct doc_edit){c.at, c.added, c.removed, obj_run};
	}
	if (!grown || !b->changes || rw_policy_batch_commit(&b->runs, &a->pol.policy, ix, &c)) {
		rw_policy_change_abort(&c);
		if (!b->runs.n) {
			rw_policy_batch_end(&b->runs, &a->pol.policy, ix, true);
			batch_forget(a);
		}
		*reply = json_pack("{s:b, s:s}", "ok", 0, "error", "out of memory");
		return -ENOMEM;
	}
	json_incref(b->edits[b->n_edits++].run);
	return 0;
}

/* The runs a batch's edits upserted, marked by their place in the policy it made (a deleted
 * run has no place); NULL without memory.
 */
static bool *edited_runs(struct agent *a)
{
	const struct agent_batch *b = &a->pol.batch;
	bool *changed = calloc(a->pol.policy.n_runs ? a->pol.policy.n_runs : 1, sizeof(*changed));

	for (size_t i = 0; changed && i < b->n_edits; i++) {
		const char *id = json_string_value(json_object_get(b->edits[i].run, "id"));
		long at = id ? rw_policy_index_run(&a->pol.policy_index, &a->pol.policy, id) : -1;

		if (at >= 0)
			changed[at] = true;
	}
	return changed;
}

int agent_changes_apply(struct agent *a, const char *source, json_t **reply)
{
	struct agent_batch *b = &a->pol.batch;
	struct rw_apply_result res;
	bool one = b->n_edits == 1;
	size_t at = one ? b->edits[0].at : 0;
	bool added = one && b->edits[0].added, removed = one && b->edits[0].removed;
	double t1, compose_ms;
	bool *changed;
	int ret;

	*reply = NULL;
	if (!b->open)
		return 0;
	ret = apply_next(a, &b->runs.base, &a->pol.policy, json_incref(b->changes), source, &res,
			 reply);
	rw_policy_batch_end(&b->runs, &a->pol.policy, &a->pol.policy_index, ret == 0);
	if (ret) {
		batch_forget(a);
		return ret;
	}
	t1 = rw_now_ms();
	doc_edit(a);
	snprintf(a->pol.policy_source, sizeof(a->pol.policy_source), "%s", source);
	compose_ms = rw_now_ms() - t1;
	changed = one ? NULL : edited_runs(a);
	batch_forget(a);
	applied(a, &res);
	if (one)
		run_state_change(a, at, added, removed);
	else
		runs_update(a, changed); /* NULL (no memory): every run read back */
	free(changed);
	json_object_set_new(*reply, "compose_ms", json_real(compose_ms));
	a->pol.settle_pending = true; /* after the reply: agent_settle() */
	return 0;
}

int agent_apply_change(struct agent *a, uint64_t revision, json_t *obj_run, const char *del_id,
		       const char *source, const char **refused_at, json_t **reply)
{
	double t0 = rw_now_ms(), apply_ms, compose_ms;
	int ret = agent_change_compose(a, revision, obj_run, del_id, source, refused_at, reply);

	if (ret)
		return ret;
	ret = agent_changes_apply(a, source, reply);
	if (ret)
		return ret;
	apply_ms = json_real_value(json_object_get(*reply, "apply_ms"));
	compose_ms = json_real_value(json_object_get(*reply, "compose_ms"));
	/* parse_ms: the run's parse and checks, the next policy, the log's diff and the run's
	 * state: all of the change but the apply and the document's edit.
	 */
	json_object_set_new(*reply, "parse_ms",
			    json_real(rw_now_ms() - t0 - apply_ms - compose_ms));
	return 0;
}

/* An idle connection an apply cut sends nothing for the datapath to reset: the prober makes it
 * send (revoke_probe.c), bounded per sandbox and per apply.
 */
void agent_settle(struct agent *a)
{
	if (!a->pol.settle_pending)
		return;
	a->pol.settle_pending = false;
	agent_probe_cut_connections(a);
}

void agent_policy_free(struct agent *a)
{
	if (a->pol.batch.open) {
		rw_policy_batch_end(&a->pol.batch.runs, &a->pol.policy, &a->pol.policy_index,
				    false);
		batch_forget(a);
	}
	if (a->pol.have_policy)
		rw_policy_free(&a->pol.policy);
	a->pol.have_policy = false;
	free(a->pol.policy_bytes);
	a->pol.policy_bytes = NULL;
	policy_forms_free(a);
	free(a->pol.runs);
	a->pol.runs = NULL;
	a->pol.n_runs = 0;
}
