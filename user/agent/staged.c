// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* staged.c: the staged snapshot: a policy held beside the one in force and never enforced. It is
 * parsed and checked as an apply would, then applied to the production programs loaded
 * privately (dryrun.h: private maps, nothing pinned, nothing attached), and every event the agent
 * drains is judged again under it: one packet rebuilt from the event (a TCP SYN or a UDP
 * datagram, as `runwall replay` rebuilds a flow) through BPF_PROG_TEST_RUN. Where the staged
 * verdict differs from the kernel's, the event carries it (`staged`).
 *
 * The cost is bounded twice: the events are what the kernel's budgets let through, and a
 * verdict is kept per distinct (run, pod, direction, protocol, peer, port) for the staged
 * revision (a table of STAGED_CACHE_SLOTS slots, emptied when three quarters are used), so a
 * flow seen again costs a lookup, not a test run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "dryrun.h"
#include "eventfmt.h"
#include "flowset.h"
#include "log.h"
#include "pw_msg.h"
#include "reasons.h"
#include "util.h"

#define STAGED_SPORT	   40000
#define STAGED_DIFF_MAX	   65536
#define STAGED_CHANGES_MAX 32 /* lines of the difference status shows */

struct staged_slot {
	struct rw_flow_key key;
	bool used;
	__u8 verdict, reason;
	bool judged; /* false: the packet cannot be judged here (its sender matters) */
	__u32 rule_id;
};

static uint32_t key_hash(const struct rw_flow_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void cache_clear(struct agent_staged *s)
{
	if (s->cache)
		memset(s->cache, 0, STAGED_CACHE_SLOTS * sizeof(*s->cache));
	s->cache_used = 0;
}

/* The slot of key: its own, or the empty one where it goes. */
static struct staged_slot *cache_slot(struct agent_staged *s, const struct rw_flow_key *k)
{
	uint32_t i = key_hash(k) & (STAGED_CACHE_SLOTS - 1);

	while (s->cache[i].used && memcmp(&s->cache[i].key, k, sizeof(*k)))
		i = (i + 1) & (STAGED_CACHE_SLOTS - 1);
	return &s->cache[i];
}

static void slot_drop(struct agent_staged *s)
{
	if (!s->have)
		return;
	rw_datapath_close(&s->dp);
	rw_policy_free(&s->policy);
	free(s->changes);
	s->changes = NULL;
	s->have = false;
	s->bound_valid = false;
	cache_clear(s);
}

/* The lines of what the staged snapshot changes from the one in force (rw_policy_diff()). */
static json_t *changes_json(const char *diff, size_t max)
{
	json_t *arr = json_array();
	const char *p = diff;
	size_t n = 0;

	while (p && *p && n < max) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		json_array_append_new(arr, json_stringn(p, len));
		n++;
		p = nl ? nl + 1 : NULL;
	}
	return arr;
}

/* `next` (parsed) loaded privately and made the staged snapshot in place of the one before. */
static int stage(struct agent *a, struct rw_policy *next, const char *source, json_t **reply)
{
	struct agent_staged *s = &a->staged;
	struct rw_datapath dp = {.skel = NULL};
	char err[600], *diff;
	double t0 = rw_now_ms();
	int ret, n;

	if (!s->cache) {
		s->cache = calloc(STAGED_CACHE_SLOTS, sizeof(*s->cache));
		if (!s->cache) {
			rw_policy_free(next);
			*reply = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", strerror(ENOMEM),
					   "path", "");
			return -ENOMEM;
		}
	}
	/* ICMPv6 events are not judged again: no program of theirs is needed. */
	ret = rw_cli_private_load(&dp, next, RW_DP_SKIP_ICMP6, err, sizeof(err));
	if (ret) {
		char msg[700];

		snprintf(msg, sizeof(msg), "%s: %s", source, err);
		rw_policy_free(next);
		rw_warn("refused staged snapshot: %s", msg);
		*reply = json_pack("{s:b, s:s, s:s}", "ok", 0, "error", msg, "path", "");
		return ret;
	}
	diff = malloc(STAGED_DIFF_MAX);
	n = diff ? rw_policy_diff(a->pol.have_policy ? &a->pol.policy : NULL, next, diff,
				  STAGED_DIFF_MAX)
		 : 0;
	slot_drop(s);
	s->have = true;
	s->policy = *next;
	s->dp = dp;
	s->changes = diff;
	s->n_changes = n;
	s->since = rw_now_real_ns();
	s->load_ms = rw_now_ms() - t0;
	s->judged = s->differences = s->unjudged = s->failures = 0;
	snprintf(s->source, sizeof(s->source), "%s", source);
	rw_info("staged revision %llu from %s (in force %llu): %d changes, loaded privately in "
		"%.1f ms, never enforced",
		(unsigned long long)s->policy.revision, source,
		(unsigned long long)agent_revision_in_force(a), n, s->load_ms);
	*reply = json_pack("{s:b, s:o}", "ok", 1, "staged", agent_staged_status(a));
	return 0;
}

/* A refused staged snapshot: the parser's error, its JSON path and position; the slot as it
 * was.
 */
static int stage_refused(struct agent *a, int ret, const struct rw_policy_error *perr,
			 json_t **reply)
{
	char path[256];
	const char *msg;

	if (!rw_pw_error_path(perr->text, path, sizeof(path), &msg))
		path[0] = '\0';
	rw_warn("refused staged snapshot: %s", perr->text);
	*reply = json_pack("{s:b, s:s, s:s, s:i, s:i, s:o}", "ok", 0, "error", perr->text, "path",
			   path, "line", perr->line, "column", perr->column, "staged",
			   a->staged.have ? json_integer((json_int_t)a->staged.policy.revision)
					  : json_null());
	return ret;
}

/* A text (doc NULL) or a document parsed as a snapshot newer than the one in force, staged. */
static int stage_parse(struct agent *a, const char *buf, size_t len, json_t *doc,
		       const char *source, json_t **reply)
{
	struct rw_policy_error perr;
	struct rw_policy next;
	uint64_t in_force = agent_revision_in_force(a);
	int ret = doc ? rw_policy_parse_json(doc, source, in_force, &next, &perr)
		      : rw_policy_parse_newer(buf, len, source, in_force, &next, &perr);

	if (ret)
		return stage_refused(a, ret, &perr, reply);
	return stage(a, &next, source, reply);
}

int agent_stage(struct agent *a, const char *buf, size_t len, const char *source, json_t **reply)
{
	return stage_parse(a, buf, len, NULL, source, reply);
}

int agent_stage_doc(struct agent *a, json_t *doc, const char *source, json_t **reply)
{
	return stage_parse(a, NULL, 0, doc, source, reply);
}

int agent_stage_run(struct agent *a, json_t *run, const char *source, json_t **reply)
{
	json_t *doc = agent_policy_doc(a), *copy, *runs, *r;
	const char *id = json_string_value(json_object_get(run, "id"));
	uint64_t in_force = agent_revision_in_force(a);
	bool replaced = false;
	size_t i;
	int ret;

	if (!a->pol.have_policy || !doc) {
		*reply = json_pack("{s:b, s:s, s:s}", "ok", 0, "error",
				   "base: no snapshot in force that this agent knows: stage a "
				   "whole snapshot",
				   "path", "base");
		return -ENOENT;
	}
	/* The snapshot in force with the run replaced (by its id) or added, one revision on. */
	copy = json_deep_copy(doc);
	runs = json_object_get(copy, "runs");
	json_array_foreach(runs, i, r)
	{
		if (id && !strcmp(json_string_value(json_object_get(r, "id")) ?: "", id)) {
			json_array_set(runs, i, run);
			replaced = true;
			break;
		}
	}
	if (!replaced)
		json_array_append(runs, run);
	json_object_set_new(copy, "revision", json_integer((json_int_t)in_force + 1));
	ret = stage_parse(a, NULL, 0, copy, source, reply);
	json_decref(copy);
	return ret;
}

void agent_unstage(struct agent *a, json_t **reply)
{
	uint64_t rev = a->staged.have ? a->staged.policy.revision : 0;

	if (a->staged.have)
		rw_info("dropped staged revision %llu (%llu events judged, %llu differed)",
			(unsigned long long)rev, (unsigned long long)a->staged.judged,
			(unsigned long long)a->staged.differences);
	slot_drop(&a->staged);
	*reply = json_pack("{s:b, s:o}", "ok", 1, "dropped",
			   rev ? json_integer((json_int_t)rev) : json_null());
}

void agent_staged_applied(struct agent *a)
{
	/* Promoted (or passed): the staged revision could no longer be applied. */
	if (a->staged.have && agent_revision_in_force(a) >= a->staged.policy.revision) {
		rw_info("staged revision %llu dropped: revision %llu is in force",
			(unsigned long long)a->staged.policy.revision,
			(unsigned long long)agent_revision_in_force(a));
		slot_drop(&a->staged);
	}
}

json_t *agent_staged_status(struct agent *a)
{
	struct agent_staged *s = &a->staged;
	char when[40];

	if (!s->have)
		return json_null();
	rw_format_time(s->since, when, sizeof(when));
	return json_pack("{s:I, s:s, s:s, s:i, s:i, s:o, s:f, s:I, s:I, s:I, s:I}", "revision",
			 (json_int_t)s->policy.revision, "source", s->source, "since", when, "runs",
			 (int)s->policy.n_runs, "n_changes", s->n_changes, "changes",
			 changes_json(s->changes, STAGED_CHANGES_MAX), "load_ms", s->load_ms,
			 "judged", (json_int_t)s->judged, "differences", (json_int_t)s->differences,
			 "unjudged", (json_int_t)s->unjudged, "failures", (json_int_t)s->failures);
}

/* The kernel's reasons that are the policy's answer to the packet: the others (not ready,
 * malformed, the conntrack budget, a lease, ...) are about the packet or the node, and a
 * rebuilt packet would not meet them.
 */
static bool policy_reason(__u8 reason)
{
	switch (reason) {
	case RW_REASON_ALLOWED:
	case RW_REASON_DNS:
	case RW_REASON_METADATA:
	case RW_REASON_PRIVATE_DESTINATION:
	case RW_REASON_NOT_ALLOWLISTED:
	case RW_REASON_INBOUND_DENIED:
		return true;
	default:
		return false;
	}
}

/* Judge the key's packet under the staged programs into slot. */
static int judge(struct agent_staged *s, const struct rw_flow_key *k, struct staged_slot *slot)
{
	struct rw_cli_verdict v;
	struct rw_cli_probe p;
	char err[400];
	int ret;

	if (!s->bound_valid || !rw_ip_eq(&s->bound, &k->pod)) {
		ret = rw_cli_private_bind(&s->dp, &k->pod);
		if (ret) {
			rw_debug("staged: binding a pod in the private maps: %s", strerror(-ret));
			s->bound_valid = false;
			return ret;
		}
		s->bound = k->pod;
		s->bound_valid = true;
	}
	rw_cli_probe_make(&p, k->dir, k->proto, 0x02, STAGED_SPORT, k->port, &k->pod, &k->peer);
	ret = rw_cli_judge(&s->dp, &p, RW_CLI_PRIVATE_IFINDEX, &v, err, sizeof(err));
	if (ret) {
		rw_debug("staged: %s", err);
		return ret;
	}
	slot->verdict = v.verdict;
	slot->reason = v.reason;
	slot->rule_id = v.rule_id;
	/* A rule's "from" judges the sender: the test run's socket is this agent's, not the
	 * pod's, so its verdict says nothing of the event's.
	 */
	slot->judged = !(v.rule_id & RW_RULE_FROM) && v.reason != RW_REASON_WRONG_PRINCIPAL;
	return 0;
}

json_t *agent_staged_judge(struct agent *a, const struct rw_event *ev)
{
	struct agent_staged *s = &a->staged;
	struct staged_slot *slot;
	struct rw_flow_key k;
	char rule[128];

	if (!s->have)
		return NULL;
	if (!policy_reason(ev->reason) || (ev->rule_id & RW_RULE_FROM) || !rw_flow_key_of(ev, &k)) {
		s->unjudged++;
		return NULL;
	}
	slot = cache_slot(s, &k);
	if (!slot->used) {
		if (s->cache_used >= STAGED_CACHE_SLOTS / 4 * 3) {
			cache_clear(s);
			slot = cache_slot(s, &k);
		}
		if (judge(s, &k, slot)) {
			s->failures++;
			return NULL;
		}
		slot->key = k;
		slot->used = true;
		s->cache_used++;
	}
	if (!slot->judged) {
		s->unjudged++;
		return NULL;
	}
	s->judged++;
	if (slot->verdict == ev->verdict)
		return NULL;
	s->differences++;
	rw_rule_name(&s->policy, slot->rule_id, rule, sizeof(rule));
	return json_pack("{s:s, s:s, s:s, s:I}", "verdict",
			 slot->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", "reason",
			 rw_reason_name(slot->reason), "rule", rule, "revision",
			 (json_int_t)s->policy.revision);
}

void agent_staged_free(struct agent *a)
{
	slot_drop(&a->staged);
	free(a->staged.cache);
	a->staged.cache = NULL;
}
