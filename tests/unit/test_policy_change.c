// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_policy_change.c: one run's change without parsing the node (rw_policy_change_*() and
 * rw_policy_index_*() in user/lib/policy.c): each change gives the policy rw_policy_parse()
 * makes of the same snapshot written out whole, or the same refusal at "run" instead of
 * "runs[K]", and a refused change leaves the policy in force and its index as they were.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "policy.h"

#define SOURCE "policy-watch"

/* The node every test starts from: node-wide parts, and three runs. */
static const char base_snapshot[] =
	"{\"revision\": 10, \"egress\": \"allowlist\", \"deny\": [\"52.200.0.0/16\", "
	"\"2600:1f18:dead::/48\"],"
	" \"services\": [{\"name\": \"proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [3128]}],"
	" \"inbound\": [{\"name\": \"app\", \"cidr\": \"172.20.0.12/32\", \"tcp\": [4096]}],"
	" \"runs\": ["
	"  {\"id\": \"run-a\", \"pods\": [\"10.1.0.1\", \"10.1.0.2\"],"
	"   \"allow\": [{\"ip\": \"52.1.1.1\", \"tcp\": [443]}]},"
	"  {\"id\": \"run-b\", \"pods\": [\"10.1.0.3\"], \"egress\": \"open\"},"
	"  {\"id\": \"run-c\", \"pods\": [\"10.1.0.4\", \"10.1.0.5\"],"
	"   \"allow\": [{\"cidr\": \"52.2.0.0/24\", \"tcp\": [443, 80], \"udp\": [53]}]}"
	" ]}";

/* A dual-stack node: IPv6 pods between and after IPv4 ones, IPv6 rules. */
static const char base6_snapshot[] =
	"{\"revision\": 10, \"deny\": [\"52.200.0.0/16\", \"2600:1f18:dead::/48\"],"
	" \"services\": [{\"name\": \"proxy\", \"ip\": \"2600:1f18::10\", \"tcp\": [3128]}],"
	" \"runs\": ["
	"  {\"id\": \"run-a\", \"pods\": [\"10.1.0.1\", \"2600:1f18::a1\", \"10.1.0.2\"],"
	"   \"allow\": [{\"ip\": \"2a00:1450::1\", \"tcp\": [443]}]},"
	"  {\"id\": \"run-b\", \"pods\": [\"2600:1f18::b1\", \"2600:1f18::b2\"]}"
	" ]}";

/* ---- Equality, field by field --------------------------------------------------------------- */

static void assert_ports(const __u16 *a, size_t na, const __u16 *b, size_t nb)
{
	assert_int_equal(na, nb);
	if (na)
		assert_memory_equal(a, b, na * sizeof(*a));
}

static void assert_rules(const struct rw_policy_rule *a, size_t na, const struct rw_policy_rule *b,
			 size_t nb)
{
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		assert_string_equal(a[i].name, b[i].name);
		assert_int_equal(a[i].family, b[i].family);
		assert_int_equal(a[i].addr, b[i].addr);
		assert_memory_equal(a[i].addr6, b[i].addr6, sizeof(a[i].addr6));
		assert_int_equal(a[i].prefixlen, b[i].prefixlen);
		assert_ports(a[i].tcp, a[i].n_tcp, b[i].tcp, b[i].n_tcp);
		assert_ports(a[i].udp, a[i].n_udp, b[i].udp, b[i].n_udp);
	}
}

static void assert_policy_equal(const struct rw_policy *a, const struct rw_policy *b)
{
	assert_int_equal(a->revision, b->revision);
	assert_int_equal(a->egress, b->egress);
	assert_int_equal(a->refusal, b->refusal);
	assert_int_equal(a->n_deny, b->n_deny);
	for (size_t i = 0; i < a->n_deny; i++) {
		assert_int_equal(a->deny[i].family, b->deny[i].family);
		assert_int_equal(a->deny[i].addr, b->deny[i].addr);
		assert_memory_equal(a->deny[i].addr6, b->deny[i].addr6, sizeof(a->deny[i].addr6));
		assert_int_equal(a->deny[i].prefixlen, b->deny[i].prefixlen);
	}
	assert_rules(a->services, a->n_services, b->services, b->n_services);
	assert_rules(a->inbound, a->n_inbound, b->inbound, b->n_inbound);
	assert_int_equal(a->n_runs, b->n_runs);
	for (size_t r = 0; r < a->n_runs; r++) {
		const struct rw_policy_run *x = &a->runs[r], *y = &b->runs[r];

		assert_string_equal(x->id, y->id);
		assert_int_equal(x->n_pods, y->n_pods);
		if (x->n_pods)
			assert_memory_equal(x->pods, y->pods, x->n_pods * sizeof(*x->pods));
		assert_int_equal(x->n_pods6, y->n_pods6);
		if (x->n_pods6) {
			assert_memory_equal(x->pods6, y->pods6, x->n_pods6 * sizeof(*x->pods6));
			assert_memory_equal(x->pods6_at, y->pods6_at,
					    x->n_pods6 * sizeof(*x->pods6_at));
		}
		assert_int_equal(x->egress, y->egress);
		assert_int_equal(x->refusal, y->refusal);
		assert_rules(x->allow, x->n_allow, y->allow, y->n_allow);
		assert_memory_equal(x->digest, y->digest, sizeof(x->digest));
	}
}

/* The index says where every run and every pod of `p` is, and of no other run id. */
static void assert_index_of(const struct rw_policy_index *ix, const struct rw_policy *p)
{
	size_t pods = 0;

	assert_int_equal(ix->n_runs, p->n_runs);
	for (size_t r = 0; r < p->n_runs; r++) {
		assert_int_equal(rw_policy_index_run(ix, p, p->runs[r].id), (long)r);
		pods += p->runs[r].n_pods + p->runs[r].n_pods6;
	}
	assert_int_equal(ix->n_pods, pods);
	assert_int_equal(rw_policy_index_run(ix, p, "no-such-run"), -1);
}

/* ---- A node: its document, its policy and its index ------------------------------------------ */

struct node {
	json_t *doc;
	struct rw_policy policy;
	struct rw_policy_index ix;
};

static struct rw_policy parse_doc(json_t *doc, int *rc, struct rw_policy_error *err)
{
	char *text = json_dumps(doc, JSON_COMPACT);
	struct rw_policy p;

	assert_non_null(text);
	*rc = rw_policy_parse(text, strlen(text), SOURCE, &p, err);
	free(text);
	return p;
}

static void node_init(struct node *n, const char *text)
{
	struct rw_policy_error err;
	json_error_t jerr;
	int rc;

	memset(n, 0, sizeof(*n));
	n->doc = json_loads(text, 0, &jerr);
	assert_non_null(n->doc);
	n->policy = parse_doc(n->doc, &rc, &err);
	if (rc)
		fail_msg("%s", err.text);
	assert_int_equal(rw_policy_index_build(&n->ix, &n->policy), 0);
}

static void node_free(struct node *n)
{
	json_decref(n->doc);
	rw_policy_free(&n->policy);
	rw_policy_index_free(&n->ix);
}

static long doc_run(json_t *doc, const char *id)
{
	json_t *runs = json_object_get(doc, "runs");

	for (size_t i = 0; i < json_array_size(runs); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(runs, i), "id")), id))
			return i;
	return -1;
}

/* The node's document with the change made as a whole snapshot would carry it: the run replaced
 * where it is, or added last, or removed.
 */
static json_t *doc_changed(json_t *doc, uint64_t revision, json_t *run, const char *del_id)
{
	json_t *next = json_deep_copy(doc), *runs = json_object_get(next, "runs");
	const char *id = run ? json_string_value(json_object_get(run, "id")) : del_id;
	long at = id ? doc_run(next, id) : -1;

	json_object_set_new(next, "revision", json_integer(revision));
	if (!run)
		json_array_remove(runs, at);
	else if (at < 0)
		json_array_append(runs, run);
	else
		json_array_set(runs, at, run);
	return next;
}

/* The error text without its source, and "runs[K]" (K: the changed run's position) as "run". */
static void expected_error(const char *full, long at, char *out, size_t size)
{
	const char *t = full + strlen(SOURCE ":");
	char prefix[32];

	/* "SOURCE:LINE:COL: PATH: ...": the change's errors have no position. */
	assert_int_equal(strncmp(full, SOURCE ":", strlen(SOURCE ":")), 0);
	t += strspn(t, "0123456789:");
	assert_int_equal(*t++, ' ');
	snprintf(prefix, sizeof(prefix), "runs[%ld]", at);
	if (at >= 0 && !strncmp(t, prefix, strlen(prefix)))
		snprintf(out, size, "run%s", t + strlen(prefix));
	else
		snprintf(out, size, "%s", t);
}

/* Upsert `run_text` (or delete `del_id`) at the next revision; check it against the full parse
 * of the same snapshot; commit it when accepted. Returns the change's rc; `why` gets the
 * refusal without its source.
 */
static int node_change_in(struct node *n, struct rw_policy_batch *b, const char *run_text,
			  const char *del_id, char *why, size_t whylen)
{
	uint64_t revision = n->policy.revision + 1;
	struct rw_policy_error err, ferr;
	struct rw_policy_change c;
	struct rw_policy full, before;
	json_t *run = NULL, *next;
	json_error_t jerr;
	int rc, frc, brc;

	if (run_text) {
		run = json_loads(run_text, 0, &jerr);
		assert_non_null(run);
	}
	next = doc_changed(n->doc, revision, run, del_id);
	full = parse_doc(next, &frc, &ferr);
	if (!run && doc_run(n->doc, del_id) < 0 && !frc) {
		rw_policy_free(&full);
		frc = -EINVAL; /* no such run to delete: what a snapshot cannot say */
	}
	before = parse_doc(n->doc, &brc, &err);
	assert_int_equal(brc, 0);

	rc = run ? rw_policy_change_upsert(&n->policy, &n->ix, revision, run, SOURCE, &c, &err)
		 : rw_policy_change_delete(&n->policy, &n->ix, revision, del_id, SOURCE, &c, &err);
	if (why)
		snprintf(why, whylen, "%s", rc ? err.text + strlen(SOURCE ": ") : "");
	if (rc) {
		/* Refused as the whole snapshot is, and nothing in force moved. */
		if (!frc)
			fail_msg("the change was refused, the snapshot accepted: %s", err.text);
		assert_policy_equal(&n->policy, &before);
		assert_index_of(&n->ix, &n->policy);
		json_decref(next);
	} else {
		if (frc)
			fail_msg("the change was accepted, the snapshot refused: %s", ferr.text);
		assert_policy_equal(&c.next, &full);
		/* The policy in force is untouched until the commit (an apply may still fail). */
		assert_policy_equal(&n->policy, &before);
		if (b)
			assert_int_equal(rw_policy_batch_commit(b, &n->policy, &n->ix, &c), 0);
		else
			rw_policy_change_commit(&n->policy, &n->ix, &c);
		assert_policy_equal(&n->policy, &full);
		assert_index_of(&n->ix, &n->policy);
		json_decref(n->doc);
		n->doc = next;
	}
	if (!frc)
		rw_policy_free(&full);
	rw_policy_free(&before);
	json_decref(run);
	return rc;
}

static int node_change(struct node *n, const char *run_text, const char *del_id, char *why,
		       size_t whylen)
{
	return node_change_in(n, NULL, run_text, del_id, why, whylen);
}

/* ---- Tests ---------------------------------------------------------------------------------- */

/* The change upserting run (JSON) is taken. A macro: a failure names the caller's line. */
#define UPSERT_OK(n, run) assert_int_equal(node_change(n, run, NULL, NULL, 0), 0)

/* A run (JSON) whose upsert is refused, and the refusal's text. */
struct refused_run {
	const char *run, *why;
};

/* Each run's upsert is refused with its text, and the node's revision stays `revision`. */
static void assert_each_refused(struct node *n, const struct refused_run *bad, size_t n_bad,
				unsigned long long revision)
{
	char why[512];

	for (size_t i = 0; i < n_bad; i++) {
		assert_int_equal(node_change(n, bad[i].run, NULL, why, sizeof(why)), -EINVAL);
		assert_string_equal(why, bad[i].why);
	}
	assert_int_equal(n->policy.revision, revision);
}

static void test_upsert_new_run(void **state)
{
	struct node n;

	node_init(&n, base_snapshot);
	UPSERT_OK(&n, "{\"id\": \"run-d\", \"pods\": [\"10.1.0.9\"], \"allow\": "
		      "[{\"ip\": \"52.9.9.9\", \"udp\": [123]}]}");
	assert_int_equal(n.policy.n_runs, 4);
	assert_string_equal(n.policy.runs[3].id, "run-d");
	assert_int_equal(n.policy.revision, 11);
	node_free(&n);
}

static void test_upsert_replaces_run_in_place(void **state)
{
	struct node n;

	node_init(&n, base_snapshot);
	UPSERT_OK(&n, "{\"id\": \"run-b\", \"pods\": [\"10.1.0.3\", \"10.1.0.7\"], "
		      "\"refusal\": \"drop\"}");
	assert_int_equal(n.policy.n_runs, 3);
	assert_string_equal(n.policy.runs[1].id, "run-b");
	assert_int_equal(n.policy.runs[1].n_pods, 2);
	assert_int_equal(n.policy.runs[1].egress, -1);
	assert_int_equal(n.policy.runs[1].refusal, RW_REFUSAL_DROP);
	node_free(&n);
}

static void test_delete_moves_later_runs_up(void **state)
{
	char why[512];
	struct node n;

	node_init(&n, base_snapshot);
	assert_int_equal(node_change(&n, NULL, "run-a", NULL, 0), 0);
	assert_int_equal(n.policy.n_runs, 2);
	assert_string_equal(n.policy.runs[0].id, "run-b");
	assert_string_equal(n.policy.runs[1].id, "run-c");
	/* run-a's pods are free again: another run may take them. */
	UPSERT_OK(&n, "{\"id\": \"run-e\", \"pods\": [\"10.1.0.2\"]}");
	struct rw_policy_change c;
	struct rw_policy_error err;

	assert_int_equal(rw_policy_change_delete(&n.policy, &n.ix, n.policy.revision + 1, "run-a",
						 SOURCE, &c, &err),
			 -EINVAL);
	snprintf(why, sizeof(why), "%s", err.text);
	assert_string_equal(why, SOURCE ": id: no run \"run-a\" in force");
	node_free(&n);
}

static void test_pod_moves_between_runs(void **state)
{
	char why[512];
	struct node n;

	node_init(&n, base_snapshot);
	/* run-c takes run-a's second pod while run-a still lists it: refused at run-c's pod. */
	assert_int_equal(node_change(&n,
				     "{\"id\": \"run-c\", \"pods\": [\"10.1.0.4\", \"10.1.0.2\"]}",
				     NULL, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "run.pods[1]: pod 10.1.0.2 is already listed at runs[0].pods[1] "
				 "(run run-a)");
	/* The same for a new run. */
	assert_int_equal(node_change(&n, "{\"id\": \"run-x\", \"pods\": [\"10.1.0.5\"]}", NULL, why,
				     sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "run.pods[0]: pod 10.1.0.5 is already listed at runs[2].pods[1] "
				 "(run run-c)");
	/* run-a lets it go, then run-c takes it: the way a pod moves. */
	UPSERT_OK(&n, "{\"id\": \"run-a\", \"pods\": [\"10.1.0.1\"], \"allow\": "
		      "[{\"ip\": \"52.1.1.1\", \"tcp\": [443]}]}");
	UPSERT_OK(&n, "{\"id\": \"run-c\", \"pods\": [\"10.1.0.4\", \"10.1.0.2\"]}");
	/* A run keeping its own pods is no conflict; listing one twice is. */
	assert_int_equal(node_change(&n,
				     "{\"id\": \"run-c\", \"pods\": [\"10.1.0.2\", \"10.1.0.4\", "
				     "\"10.1.0.2\"]}",
				     NULL, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "run.pods[2]: pod 10.1.0.2 is already listed at runs[2].pods[0] "
				 "(run run-c)");
	node_free(&n);
}

static void test_bad_run_refused_policy_unchanged(void **state)
{
	static const struct refused_run cases[] = {
		{"{\"id\": \"run-b\", \"pods\": [\"10.1.0.300\"]}",
		 "run.pods[0]: \"10.1.0.300\" is not an IPv4 address"},
		{"{\"id\": \"run-b\", \"pods\": [\"10.1.0.3\"], \"allow\": [{\"ip\": \"10.9.0.1\", "
		 "\"tcp\": [443]}]}",
		 "run.allow[0].ip: \"10.9.0.1\" overlaps 10.0.0.0/8, a private or special-purpose "
		 "range: run rules name public destinations only (only services may name private "
		 "addresses)"},
		{"{\"id\": \"run-b\", \"pods\": [\"10.1.0.3\"], \"allow\": [{\"cidr\": "
		 "\"52.200.1.0/24\", \"tcp\": [443]}]}",
		 "run.allow[0].cidr: \"52.200.1.0/24\" overlaps 52.200.0.0/16 (deny[0]), denied by "
		 "the snapshot: run rules name public destinations only (only services may name "
		 "private addresses)"},
		{"{\"id\": \"run-b\", \"pods\": [], \"color\": \"red\"}",
		 "run.color: unknown key (expected one of: id, pods, egress, refusal, allow)"},
		{"{\"id\": \"run-new\"}", "run.pods: required key is missing"},
		{"{\"id\": \"bad id\", \"pods\": []}",
		 "run.id: \"bad id\" is not a run id (1..63 characters of A-Z a-z 0-9 . _ -)"},
		{"[1]", "run: expected an object, got an array"},
		{"{\"id\": \"run-b\", \"pods\": [\"10.1.0.3\"], \"allow\": [{\"ip\": \"52.1.1.1\", "
		 "\"tcp\": [443, 443]}]}",
		 "run.allow[0].tcp[1]: port 443 is already listed at run.allow[0].tcp[0]"},
	};
	struct node n;

	node_init(&n, base_snapshot);
	assert_each_refused(&n, cases, sizeof(cases) / sizeof(cases[0]), 10);
	node_free(&n);
}

static void test_revision_and_node_limits(void **state)
{
	struct rw_policy_change c;
	struct rw_policy_error err;
	json_t *run = json_pack("{s:s, s:[]}", "id", "run-z", "pods");
	json_t *doc;
	struct node n;

	node_init(&n, base_snapshot);
	assert_int_equal(rw_policy_change_upsert(&n.policy, &n.ix, 10, run, SOURCE, &c, &err),
			 -EINVAL);
	assert_string_equal(err.text,
			    SOURCE ": revision: 10 is not newer than 10, the one in force");
	node_free(&n);

	/* A node of RW_RULE_MAX_A runs takes no more (their rule ids would wrap). */
	doc = json_pack("{s:i, s:[]}", "revision", 1, "runs");
	for (unsigned int i = 0; i < RW_RULE_MAX_A; i++) {
		char id[32];

		snprintf(id, sizeof(id), "r%u", i);
		json_array_append_new(json_object_get(doc, "runs"),
				      json_pack("{s:s, s:[]}", "id", id, "pods"));
	}
	{
		char *text = json_dumps(doc, JSON_COMPACT);

		node_init(&n, text);
		free(text);
	}
	json_decref(doc);
	char why[512];

	assert_int_equal(
		node_change(&n, "{\"id\": \"run-z\", \"pods\": []}", NULL, why, sizeof(why)),
		-EINVAL);
	assert_string_equal(why, "runs: 4097 entries: at most 4096 fit in a rule id");
	/* Replacing one of them is no new entry. */
	UPSERT_OK(&n, "{\"id\": \"r17\", \"pods\": [\"10.7.0.1\"]}");
	json_decref(run);
	node_free(&n);
}

/* A run of `n` rules to 52.0.x.y, each with a "from". */
static char *from_run(const char *id, size_t n)
{
	json_t *run = json_pack("{s:s, s:[s], s:[]}", "id", id, "pods", "10.1.0.9", "allow");
	char *text;

	for (size_t i = 0; i < n; i++) {
		char ip[32];

		snprintf(ip, sizeof(ip), "52.0.%zu.%zu", i / 250, i % 250 + 1);
		json_array_append_new(json_object_get(run, "allow"),
				      json_pack("{s:s, s:[i], s:{s:[i]}}", "ip", ip, "tcp", 443,
						"from", "uid", 1000));
	}
	text = json_dumps(run, JSON_COMPACT);
	json_decref(run);
	return text;
}

/* The node's rules that name a "from" stay within rw_from after a run change: with one service
 * restricted, a run of RW_MAX_FROM / RW_SLOTS - 1 such rules is taken (exactly the limit), one
 * more is refused at the first rule past it, and the policy in force stays.
 */
static void test_from_limit_of_a_run_change(void **state)
{
	const size_t limit = RW_MAX_FROM / RW_SLOTS;
	char why[512], want[512], *text;
	struct node n;

	node_init(&n, "{\"revision\": 10, \"services\": [{\"name\": \"proxy\", \"ip\": "
		      "\"172.20.0.10\", \"tcp\": [3128], \"from\": {\"uid\": [0]}}],"
		      " \"runs\": [{\"id\": \"run-a\", \"pods\": [\"10.1.0.1\"]}]}");
	text = from_run("run-d", limit - 1);
	UPSERT_OK(&n, text);
	free(text);
	assert_int_equal(rw_policy_from_count(&n.policy), limit);
	assert_int_equal(n.policy.revision, 11);

	/* One over: a new run's one restricted rule. */
	text = from_run("run-e", 1);
	assert_int_equal(node_change(&n, text, NULL, why, sizeof(why)), -EINVAL);
	free(text);
	snprintf(want, sizeof(want),
		 "run.allow[0].from: %zu rules on the node would name a \"from\" (1 in this run, "
		 "%zu elsewhere): a node has at most %zu (rw_from holds both slots' selectors)",
		 limit + 1, limit, limit);
	assert_string_equal(why, want);

	/* One over by growing the run in force: counted without its old rules. */
	text = from_run("run-d", limit);
	assert_int_equal(node_change(&n, text, NULL, why, sizeof(why)), -EINVAL);
	free(text);
	snprintf(want, sizeof(want),
		 "run.allow[%zu].from: %zu rules on the node would name a \"from\" (%zu in this "
		 "run, 1 elsewhere): a node has at most %zu (rw_from holds both slots' selectors)",
		 limit - 1, limit + 1, limit, limit);
	assert_string_equal(why, want);
	assert_int_equal(rw_policy_from_count(&n.policy), limit);
	assert_int_equal(n.policy.revision, 11);

	/* Replacing the run with as many is no growth. */
	text = from_run("run-d", limit - 1);
	UPSERT_OK(&n, text);
	free(text);
	node_free(&n);
}

/* ---- Many generated changes, each against the full parse (fixed seed) ------------------------ */

static uint64_t rng = 0x5eed2026;

static unsigned int rnd(unsigned int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned int)(rng % n);
}

/* A run drawn from small pools, so that changes collide: ids (replace, delete), pods (a pod in
 * two runs), destinations (the deny list, a private range), and now and then a broken value.
 */
static char *gen_run(char *out, size_t size)
{
	static const char *const bad[] = {
		"\"pods\": [\"10.5.0.999\"]",
		"\"pods\": [], \"allow\": [{\"ip\": \"192.168.1.1\", \"tcp\": [1]}]",
		"\"pods\": [], \"allow\": [{\"ip\": \"52.1.1.1\"}]",
		"\"pods\": [], \"egress\": \"wide\"",
		"\"pods\": [\"169.254.169.254\"]",
		"\"pods\": [\"fe80::1\"]",
		"\"pods\": [], \"allow\": [{\"ip\": \"fd00::1\", \"tcp\": [1]}]",
		"\"pods\": [], \"allow\": [{\"ip\": \"64:ff9b::3401:101\", \"tcp\": [1]}]",
		"\"pods\": [], \"allow\": [{\"cidr\": \"2600:1f18:dead:1::/64\", \"tcp\": [1]}]",
	};
	size_t o = 0;
	unsigned int n;

	o += snprintf(out + o, size - o, "{\"id\": \"g%u\", ", rnd(40));
	if (!rnd(25)) {
		snprintf(out + o, size - o, "%s}", bad[rnd(sizeof(bad) / sizeof(bad[0]))]);
		return out;
	}
	o += snprintf(out + o, size - o, "\"pods\": [");
	n = rnd(4);
	for (unsigned int i = 0; i < n; i++) {
		if (rnd(3))
			o += snprintf(out + o, size - o, "%s\"10.5.%u.%u\"", i ? ", " : "", rnd(2),
				      1 + rnd(60));
		else
			o += snprintf(out + o, size - o, "%s\"2600:5:%u::%x\"", i ? ", " : "",
				      rnd(2), 1 + rnd(60));
	}
	o += snprintf(out + o, size - o, "]");
	if (!rnd(4))
		o += snprintf(out + o, size - o, ", \"egress\": \"%s\"",
			      rnd(2) ? "open" : "allowlist");
	if (!rnd(6))
		o += snprintf(out + o, size - o, ", \"refusal\": \"drop\"");
	n = rnd(4);
	if (n) {
		o += snprintf(out + o, size - o, ", \"allow\": [");
		for (unsigned int i = 0; i < n; i++) {
			unsigned int kind = rnd(4);

			if (kind == 3)
				o += snprintf(out + o, size - o,
					      "%s{\"%s\": \"2a00:%x::%s\", \"tcp\": [%u]}",
					      i ? ", " : "", rnd(2) ? "ip" : "cidr", 1 + rnd(6),
					      rnd(2) ? "1" : "/32", 1 + rnd(3) * 100);
			else if (kind)
				o += snprintf(out + o, size - o,
					      "%s{\"ip\": \"52.%u.0.%u\", \"tcp\": [%u]}",
					      i ? ", " : "", 190 + rnd(12), 1 + rnd(9),
					      1 + rnd(3) * 100);
			else
				o += snprintf(out + o, size - o,
					      "%s{\"cidr\": \"52.%u.%u.0/24\", \"udp\": [53, %u]}",
					      i ? ", " : "", 195 + rnd(8), rnd(4), 54 + rnd(2));
		}
		o += snprintf(out + o, size - o, "]");
	}
	snprintf(out + o, size - o, "}");
	return out;
}

static void test_changes_match_full_parse(void **state)
{
	unsigned int accepted = 0, refused = 0, deleted = 0, pod_refusals = 0;
	char run[1024], why[512], id[RW_RUN_ID_LEN];
	struct node n;

	node_init(&n, base_snapshot);
	for (int i = 0; i < 4000; i++) {
		long k;

		if (!rnd(4) && n.policy.n_runs) {
			/* A delete, now and then of a run not in force. */
			k = rnd(n.policy.n_runs + 1);
			snprintf(id, sizeof(id), "%s",
				 (size_t)k < n.policy.n_runs ? n.policy.runs[k].id : "g-none");
			if (node_change(&n, NULL, id, why, sizeof(why)) == 0) {
				deleted++;
				accepted++;
			} else {
				assert_string_equal(why, "id: no run \"g-none\" in force");
				refused++;
			}
			continue;
		}
		gen_run(run, sizeof(run));
		{
			json_t *obj = json_loads(run, 0, NULL);
			const char *rid = json_string_value(json_object_get(obj, "id"));
			uint64_t revision = n.policy.revision + 1;
			json_t *next;
			struct rw_policy_error ferr;
			struct rw_policy full;
			char expect[512];
			int frc;

			k = doc_run(n.doc, rid);
			next = doc_changed(n.doc, revision, obj, NULL);
			full = parse_doc(next, &frc, &ferr);
			json_decref(next);
			if (!frc)
				rw_policy_free(&full);
			if (node_change(&n, run, NULL, why, sizeof(why)) == 0) {
				accepted++;
			} else {
				refused++;
				expected_error(ferr.text, k >= 0 ? k : (long)n.policy.n_runs,
					       expect, sizeof(expect));
				/* A pod another run lists: the whole snapshot names whichever of the
				 * two comes later; the change names its own run's pod.
				 */
				if (!strncmp(expect, "runs[", 5)) {
					pod_refusals++;
					assert_non_null(
						strstr(expect, "is already listed at runs["));
					assert_int_equal(strncmp(why, "run.pods[", 9), 0);
					assert_non_null(strstr(why, "is already listed at runs["));
				} else {
					assert_string_equal(why, expect);
				}
			}
			json_decref(obj);
		}
	}
	print_message(
		"%u changes accepted (%u deletes), %u refused (%u for a pod another run lists after it), "
		"%zu runs in force\n",
		accepted, deleted, refused, pod_refusals, n.policy.n_runs);
	/* The draw reaches every kind of change. */
	assert_true(accepted > 1000 && deleted > 300 && refused > 300 && pod_refusals > 20);
	node_free(&n);
}

/* Changes made one after another in batches of 1 to 8 (rw_policy_batch_*()), as the agent makes
 * the ones queued behind an apply: each is the full parse of its snapshot, as unbatched; the
 * policy in force when the batch began stays whole until it ends; an apply that succeeds
 * leaves the last change's policy, one that fails the policy and index of the batch's start.
 * Under ASan (make check-asan), every run made or replaced is freed once.
 */
static void test_batches_match_full_parse(void **state)
{
	unsigned int batches = 0, undone = 0, changes = 0;
	char run[1024], why[512], id[RW_RUN_ID_LEN];
	struct rw_policy_error err;
	struct node n;

	node_init(&n, base_snapshot);
	for (int i = 0; i < 600; i++) {
		struct rw_policy_batch b;
		json_t *base_doc = json_deep_copy(n.doc);
		bool apply_ok = rnd(4) != 0;
		long size = 1 + rnd(8);
		struct rw_policy before;
		int rc;

		before = parse_doc(base_doc, &rc, &err);
		assert_int_equal(rc, 0);
		rw_policy_batch_begin(&b, &n.policy);
		for (long k = 0; k < size; k++) {
			if (!rnd(4) && n.policy.n_runs) {
				long at = rnd(n.policy.n_runs);

				snprintf(id, sizeof(id), "%s", n.policy.runs[at].id);
				changes += node_change_in(&n, &b, NULL, id, why, sizeof(why)) == 0;
			} else {
				gen_run(run, sizeof(run));
				changes += node_change_in(&n, &b, run, NULL, why, sizeof(why)) == 0;
			}
			/* rw_apply()'s `prev`: the policy in force, whole. */
			assert_policy_equal(&b.base, &before);
		}
		if (apply_ok) {
			rw_policy_batch_end(&b, &n.policy, &n.ix, true);
			json_decref(base_doc);
		} else {
			rw_policy_batch_end(&b, &n.policy, &n.ix, false);
			assert_policy_equal(&n.policy, &before);
			assert_index_of(&n.ix, &n.policy);
			json_decref(n.doc);
			n.doc = base_doc;
			undone++;
		}
		rw_policy_free(&before);
		batches++;
	}
	print_message("%u batches (%u undone), %u changes taken\n", batches, undone, changes);
	assert_true(undone > 50 && changes > 1000);
	node_free(&n);
}

static void test_ipv6_pods_and_rules(void **state)
{
	static const struct refused_run bad[] = {
		{"{\"id\": \"run-b\", \"pods\": [\"2600:1f18::b1\", \"fe80::1\"]}",
		 "run.pods[1]: \"fe80::1\" is not a pod address: a link-local address (fe80::/10)"},
		{"{\"id\": \"run-b\", \"pods\": [\"2600:1f18::b1\"], \"allow\": [{\"cidr\": "
		 "\"2600:1f18:dead:1::/64\", \"tcp\": [443]}]}",
		 "run.allow[0].cidr: \"2600:1f18:dead:1::/64\" overlaps 2600:1f18:dead::/48 "
		 "(deny[1]), denied by the snapshot: run rules name public destinations only (only "
		 "services may name private addresses)"},
		{"{\"id\": \"run-b\", \"pods\": [], \"allow\": [{\"ip\": \"64:ff9b::3401:101\", "
		 "\"tcp\": [443]}]}",
		 "run.allow[0].ip: \"64:ff9b::3401:101\" is the NAT64 form (64:ff9b::/96) of "
		 "52.1.1.1: write the IPv4 address 52.1.1.1 (a destination in it is judged by the "
		 "IPv4 address it carries, which may refuse it and allows it only under the "
		 "snapshot's nat64 prefix)"},
		/* another run's IPv6 pod, named where that run wrote it */
		{"{\"id\": \"run-b\", \"pods\": [\"10.1.0.9\", \"2600:1f18::a1\"]}",
		 "run.pods[1]: pod 2600:1f18::a1 is already listed at runs[0].pods[1] (run run-a)"},
		{"{\"id\": \"run-new\", \"pods\": [\"2600:1f18::b2\"]}",
		 "run.pods[0]: pod 2600:1f18::b2 is already listed at runs[1].pods[1] (run run-b)"},
		{"{\"id\": \"run-b\", \"pods\": [\"2600:1f18::b1\", \"10.1.0.9\", "
		 "\"2600:1f18:0::b1\"]}",
		 "run.pods[2]: pod 2600:1f18::b1 is already listed at runs[1].pods[0] (run run-b)"},
	};
	char why[512];
	struct node n;

	(void)state;
	node_init(&n, base6_snapshot);
	assert_each_refused(&n, bad, sizeof(bad) / sizeof(bad[0]), 10);
	/* run-a lets its IPv6 pod go (keeping the IPv4 ones), then run-b takes it */
	UPSERT_OK(&n, "{\"id\": \"run-a\", \"pods\": [\"10.1.0.1\", \"10.1.0.2\"], "
		      "\"allow\": [{\"ip\": \"2a00:1450::2\", \"tcp\": [443]}]}");
	assert_int_equal(n.policy.runs[0].n_pods6, 0);
	UPSERT_OK(&n, "{\"id\": \"run-b\", \"pods\": [\"2600:1f18::b1\", "
		      "\"10.1.0.7\", \"2600:1f18::a1\"]}");
	assert_int_equal(n.policy.runs[1].n_pods6, 2);
	assert_int_equal(n.policy.runs[1].pods6_at[1], 2);
	/* run-a goes, run-b moves up: its IPv6 pods are named at runs[0] now */
	assert_int_equal(node_change(&n, NULL, "run-a", NULL, 0), 0);
	assert_int_equal(node_change(&n, "{\"id\": \"run-c\", \"pods\": [\"2600:1f18::a1\"]}", NULL,
				     why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "run.pods[0]: pod 2600:1f18::a1 is already listed at "
				 "runs[0].pods[2] (run run-b)");
	/* and run-a's IPv4 pods are free */
	UPSERT_OK(&n, "{\"id\": \"run-c\", \"pods\": [\"10.1.0.2\"]}");
	node_free(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_upsert_new_run),
		cmocka_unit_test(test_upsert_replaces_run_in_place),
		cmocka_unit_test(test_delete_moves_later_runs_up),
		cmocka_unit_test(test_pod_moves_between_runs),
		cmocka_unit_test(test_bad_run_refused_policy_unchanged),
		cmocka_unit_test(test_revision_and_node_limits),
		cmocka_unit_test(test_from_limit_of_a_run_change),
		cmocka_unit_test(test_ipv6_pods_and_rules),
		cmocka_unit_test(test_changes_match_full_parse),
		cmocka_unit_test(test_batches_match_full_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
