// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_policy.c: the snapshot parser (user/lib/policy.c): what it accepts, the exact message of
 * every refusal (positions included), the same refusals from rw_policy_parse_json() without
 * positions, and rw_policy_run_equal / rw_policy_diff.
 *
 * Expected columns were counted by hand on the documents below. They count from 1; every
 * string that can precede a semantic error is ASCII (names and ids are checked before anything
 * after them), so bytes and characters agree here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "policy.h"
#include "../policy_error_text.h"

/* The snapshot of docs/policy.md "Policy snapshot", byte for byte: line numbers below refer to it. */
static const char example[] =
	"{\n"						      /* 1 */
	"  \"revision\": 12,\n"				      /* 2 */
	"  \"egress\": \"allowlist\",\n"		      /* 3 */
	"  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"],\n" /* 4 */
	"  \"services\": [\n"				      /* 5 */
	"    {\"name\": \"egress-proxy\",    \"ip\": \"172.20.0.10\", \"tcp\": [443, 8443, 3128]},\n"
	"    {\"name\": \"identity-broker\", \"ip\": \"172.20.0.11\", \"tcp\": [3443]},\n"
	"    {\"name\": \"app-tier\",        \"ip\": \"172.20.0.12\", \"tcp\": [3000]},\n"
	"    {\"name\": \"drive-gateway\",   \"ip\": \"172.20.0.13\", \"tcp\": [8080]}\n" /* 9 */
	"  ],\n"									  /* 10 */
	"  \"inbound\": [\n"								  /* 11 */
	"    {\"name\": \"app-tier\", \"cidr\": \"172.20.0.12/32\", \"tcp\": [4096, 4098, 4999, 6085]}\n"
	"  ],\n"									   /* 13 */
	"  \"runs\": [\n"								   /* 14 */
	"    {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]},\n"			   /* 15 */
	"    {\"id\": \"run-9c01\", \"pods\": [\"10.1.2.4\"], \"egress\": \"open\",\n"	   /* 16 */
	"     \"allow\": [{\"cidr\": \"52.194.9.0/24\", \"tcp\": [5432], \"udp\": []}]}\n" /* 17 */
	"  ]\n"										   /* 18 */
	"}\n";										   /* 19 */

/* The example with one piece of text replaced; the piece must occur exactly once. */
static char *example_with(const char *from, const char *to)
{
	const char *at = strstr(example, from);
	size_t head, out_len;
	char *out;

	assert_non_null(at);
	assert_null(strstr(at + 1, from));
	head = at - example;
	out_len = strlen(example) - strlen(from) + strlen(to);
	out = malloc(out_len + 1);
	assert_non_null(out);
	memcpy(out, example, head);
	strcpy(out + head, to);
	strcat(out, at + strlen(from));
	return out;
}

static void parse_ok(const char *json, struct rw_policy *p)
{
	struct rw_policy_error err;
	int rc;

	rc = rw_policy_parse(json, strlen(json), "policy.json", p, &err);
	if (rc)
		fail_msg("refused (%d): %s", rc, err.text);
	assert_string_equal(err.text, "");
}

/* json parses, and nothing more is asked of it. */
static void expect_parses(const char *json)
{
	struct rw_policy p;

	parse_ok(json, &p);
	rw_policy_free(&p);
}

/* The document of `json` as PolicyWatch's message parse makes it, or NULL when it is no JSON. */
static json_t *load_doc(const char *json)
{
	return json_loadb(json, strlen(json), JSON_REJECT_DUPLICATES, NULL);
}

/* rw_policy_parse_json() refuses what rw_policy_parse() refuses with `expected`, at the same
 * path with the same words, and no position.
 */
static void expect_doc_refused(const char *json, const char *expected)
{
	struct rw_policy_error err;
	json_t *doc = load_doc(json);
	struct rw_policy p, zero;
	char want[600];

	if (!doc)
		return;
	rw_test_error_unplaced(expected, "policy.json", want, sizeof(want));
	memset(&zero, 0, sizeof(zero));
	memset(&p, 0xa5, sizeof(p));
	assert_int_equal(rw_policy_parse_json(doc, "policy.json", 0, &p, &err), -EINVAL);
	assert_string_equal(err.text, want);
	assert_int_equal(err.line, 0);
	assert_int_equal(err.column, 0);
	assert_memory_equal(&p, &zero, sizeof(p));
	json_decref(doc);
}

/* The full message, the position fields matching the LINE:COL in it, and `out` zeroed (it is
 * filled with garbage first, so a parser that left it alone would be caught too).
 */
static void expect_refused(const char *json, const char *expected)
{
	struct rw_policy p, zero;
	struct rw_policy_error err;
	int line, col, rc;

	memset(&zero, 0, sizeof(zero));
	memset(&p, 0xa5, sizeof(p));
	rc = rw_policy_parse(json, strlen(json), "policy.json", &p, &err);
	assert_string_equal(err.text, expected);
	assert_int_equal(rc, -EINVAL);
	assert_memory_equal(&p, &zero, sizeof(p));
	if (sscanf(expected, "policy.json:%d:%d:", &line, &col) != 2)
		line = col = 0;
	assert_int_equal(err.line, line);
	assert_int_equal(err.column, col);
	expect_doc_refused(json, expected);
}

static void expect_example_refused(const char *from, const char *to, const char *expected)
{
	char *json = example_with(from, to);

	expect_refused(json, expected);
	free(json);
}

struct refusal {
	const char *json;
	const char *expected;
};

static void expect_all_refused(const struct refusal *cases, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		expect_refused(cases[i].json, cases[i].expected);
}

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Accepted snapshots ----------------------------------------------------------------- */

static void test_example_parses(void **state)
{
	struct rw_policy p;
	const struct rw_policy_rule *r;

	parse_ok(example, &p);
	assert_int_equal(p.revision, 12);
	assert_int_equal(p.egress, RW_EGRESS_ALLOWLIST);

	assert_int_equal(p.n_deny, 2);
	assert_int_equal(p.deny[0].addr, htonl(0x0a000000));
	assert_int_equal(p.deny[0].prefixlen, 16);
	assert_int_equal(p.deny[1].addr, htonl(0x64400000));
	assert_int_equal(p.deny[1].prefixlen, 16);

	assert_int_equal(p.n_services, 4);
	r = &p.services[0];
	assert_string_equal(r->name, "egress-proxy");
	assert_int_equal(r->addr, htonl(0xac14000a));
	assert_int_equal(r->prefixlen, 32);
	assert_int_equal(r->n_tcp, 3);
	assert_int_equal(r->tcp[0], 443);
	assert_int_equal(r->tcp[1], 8443);
	assert_int_equal(r->tcp[2], 3128);
	assert_int_equal(r->n_udp, 0);
	assert_null(r->udp);
	r = &p.services[3];
	assert_string_equal(r->name, "drive-gateway");
	assert_int_equal(r->addr, htonl(0xac14000d));
	assert_int_equal(r->n_tcp, 1);
	assert_int_equal(r->tcp[0], 8080);

	assert_int_equal(p.n_inbound, 1);
	r = &p.inbound[0];
	assert_string_equal(r->name, "app-tier");
	assert_int_equal(r->addr, htonl(0xac14000c));
	assert_int_equal(r->prefixlen, 32);
	assert_int_equal(r->n_tcp, 4);
	assert_int_equal(r->tcp[3], 6085);

	assert_int_equal(p.n_runs, 2);
	assert_string_equal(p.runs[0].id, "run-7f3a");
	assert_int_equal(p.runs[0].n_pods, 1);
	assert_int_equal(p.runs[0].pods[0], htonl(0x0a010203));
	assert_int_equal(p.runs[0].egress, -1);
	assert_int_equal(rw_policy_run_egress(&p, &p.runs[0]), RW_EGRESS_ALLOWLIST);
	assert_int_equal(p.runs[0].n_allow, 0);
	assert_null(p.runs[0].allow);

	assert_string_equal(p.runs[1].id, "run-9c01");
	assert_int_equal(p.runs[1].pods[0], htonl(0x0a010204));
	assert_int_equal(p.runs[1].egress, RW_EGRESS_OPEN);
	assert_int_equal(rw_policy_run_egress(&p, &p.runs[1]), RW_EGRESS_OPEN);
	assert_int_equal(p.runs[1].n_allow, 1);
	r = &p.runs[1].allow[0];
	assert_string_equal(r->name, "");
	assert_int_equal(r->addr, htonl(0x34c20900));
	assert_int_equal(r->prefixlen, 24);
	assert_int_equal(r->n_tcp, 1);
	assert_int_equal(r->tcp[0], 5432);
	assert_int_equal(r->n_udp, 0);

	rw_policy_free(&p);
	assert_int_equal(p.n_runs, 0);
	assert_null(p.runs);
}

static void test_defaults(void **state)
{
	struct rw_policy p;

	parse_ok("{\"revision\": 1}", &p);
	assert_int_equal(p.revision, 1);
	assert_int_equal(p.egress, RW_EGRESS_ALLOWLIST);
	assert_int_equal(p.n_deny + p.n_services + p.n_inbound + p.n_runs, 0);
	assert_null(p.deny);
	assert_null(p.services);
	assert_null(p.inbound);
	assert_null(p.runs);
	rw_policy_free(&p);

	/* A run without "egress" follows the node; "pods" may be empty. */
	parse_ok("{\"revision\": 2, \"egress\": \"open\", \"deny\": [],"
		 " \"runs\": [{\"id\": \"a\", \"pods\": [], \"allow\": []}]}",
		 &p);
	assert_int_equal(p.egress, RW_EGRESS_OPEN);
	assert_int_equal(p.n_deny, 0);
	assert_int_equal(p.n_runs, 1);
	assert_int_equal(p.runs[0].egress, -1);
	assert_int_equal(rw_policy_run_egress(&p, &p.runs[0]), RW_EGRESS_OPEN);
	assert_int_equal(p.runs[0].n_pods, 0);
	assert_null(p.runs[0].pods);
	assert_int_equal(p.runs[0].n_allow, 0);
	rw_policy_free(&p);

	/* udp alone is enough; a run's own "allowlist" overrides an open node. */
	parse_ok(
		"{\"revision\": 3, \"egress\": \"open\", \"runs\": [{\"id\": \"A.b_c-9\", \"pods\": "
		"[\"10.0.0.1\"], \"egress\": \"allowlist\", \"allow\": [{\"ip\": \"52.94.2.53\", "
		"\"udp\": [53]}]}]}",
		&p);
	assert_int_equal(p.runs[0].egress, RW_EGRESS_ALLOWLIST);
	assert_int_equal(rw_policy_run_egress(&p, &p.runs[0]), RW_EGRESS_ALLOWLIST);
	assert_int_equal(p.runs[0].allow[0].n_tcp, 0);
	assert_int_equal(p.runs[0].allow[0].n_udp, 1);
	assert_int_equal(p.runs[0].allow[0].udp[0], 53);
	rw_policy_free(&p);
}

/* ---- Revision ------------------------------------------------------------------------------ */

static void test_missing_revision(void **state)
{
	expect_refused("{}", "policy.json:1:1: revision: required key is missing");
	expect_refused("\n  {\"egress\": \"open\"}",
		       "policy.json:2:3: revision: required key is missing");
}

/* The agent refuses a revision that is not above the one in force, with its position. */
static void test_revision_not_newer(void **state)
{
	const char *text = "{\n  \"revision\": 16\n}\n";
	struct rw_policy_error err;
	struct rw_policy p;

	assert_int_equal(rw_policy_parse_newer(text, strlen(text), "old.json", 17, &p, &err),
			 -EINVAL);
	assert_string_equal(err.text,
			    "old.json:2:15: revision: 16 is not newer than 17, the one in force");
	assert_int_equal(rw_policy_parse_newer(text, strlen(text), "old.json", 16, &p, &err),
			 -EINVAL);
	assert_string_equal(err.text,
			    "old.json:2:15: revision: 16 is not newer than 16, the one in force");
	assert_int_equal(rw_policy_parse_newer(text, strlen(text), "old.json", 15, &p, &err), 0);
	assert_int_equal(p.revision, 16);
	rw_policy_free(&p);
}

/* The document's entry: the example parses to what its text does, run by run, and a revision not
 * above the one in force is refused at its path.
 */
static void test_parse_json(void **state)
{
	json_t *doc = load_doc(example);
	struct rw_policy_error err;
	struct rw_policy t, d;
	char diff[256];

	assert_non_null(doc);
	parse_ok(example, &t);
	assert_int_equal(rw_policy_parse_json(doc, "policy-watch", 0, &d, &err), 0);
	assert_string_equal(err.text, "");
	assert_int_equal(d.revision, t.revision);
	assert_int_equal(d.n_deny, t.n_deny);
	assert_int_equal(d.n_services, t.n_services);
	assert_int_equal(d.n_inbound, t.n_inbound);
	assert_int_equal(d.n_runs, t.n_runs);
	for (size_t r = 0; r < t.n_runs; r++)
		assert_true(rw_policy_run_equal(&t, &t.runs[r], &d, &d.runs[r]));
	assert_int_equal(rw_policy_diff(&t, &d, diff, sizeof(diff)), 0);
	rw_policy_free(&d);
	assert_int_equal(rw_policy_parse_json(doc, "policy-watch", t.revision, &d, &err), -EINVAL);
	assert_string_equal(err.text, "policy-watch: revision: 12 is not newer than 12, the one "
				      "in force");
	rw_policy_free(&t);
	json_decref(doc);
}

static void test_revision_range(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 0}",
		 "policy.json:1:14: revision: 0 is not a revision (1..72057594037927935)"},
		{"{\"revision\": -1}",
		 "policy.json:1:14: revision: -1 is not a revision (1..72057594037927935)"},
		{"{\"revision\": 72057594037927936}",
		 "policy.json:1:14: revision: 72057594037927936 is too large: the kernel keeps "
		 "56 bits of revision (at most 72057594037927935)"},
		{"{\"revision\": 9223372036854775807}",
		 "policy.json:1:14: revision: 9223372036854775807 is too large: the kernel keeps "
		 "56 bits of revision (at most 72057594037927935)"},
		{"{\"revision\": 12.0}",
		 "policy.json:1:14: revision: expected an integer, got a real number"},
		{"{\"revision\": \"12\"}",
		 "policy.json:1:14: revision: expected an integer, got a string"},
		{"{\"revision\": null}",
		 "policy.json:1:14: revision: expected an integer, got null"},
	};
	struct rw_policy p;

	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok("{\"revision\": 72057594037927935}", &p);
	assert_int_equal(p.revision, (1ULL << 56) - 1);
	rw_policy_free(&p);
}

/* ---- Ports --------------------------------------------------------------------------------- */

/* One service with the given tcp list; the list starts at column 71. */
#define SERVICE_TCP(ports)                                                                           \
	"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": \"52.94.2.1\", \"tcp\": [" ports \
	"]}]}"

static void test_ports_edge_cases(void **state)
{
	static const struct refusal cases[] = {
		{SERVICE_TCP("0"),
		 "policy.json:1:71: services[0].tcp[0]: 0 is not a port (1..65535)"},
		{SERVICE_TCP("65536"),
		 "policy.json:1:71: services[0].tcp[0]: 65536 is not a port (1..65535)"},
		{SERVICE_TCP("-1"),
		 "policy.json:1:71: services[0].tcp[0]: -1 is not a port (1..65535)"},
		{SERVICE_TCP("443.5"),
		 "policy.json:1:71: services[0].tcp[0]: expected a port number (an integer), "
		 "got a real number"},
		{SERVICE_TCP("443.0"),
		 "policy.json:1:71: services[0].tcp[0]: expected a port number (an integer), "
		 "got a real number"},
		{SERVICE_TCP("\"443\""),
		 "policy.json:1:71: services[0].tcp[0]: expected a port number (an integer), "
		 "got a string"},
		{SERVICE_TCP("80, 4294967297"),
		 "policy.json:1:75: services[0].tcp[1]: 4294967297 is not a port (1..65535)"},
		{"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": \"52.94.2.1\", "
		 "\"udp\": 53}]}",
		 "policy.json:1:70: services[0].udp: expected an array of ports, got an integer"},
	};
	struct rw_policy p;

	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok(SERVICE_TCP("1, 65535"), &p);
	assert_int_equal(p.services[0].n_tcp, 2);
	assert_int_equal(p.services[0].tcp[0], 1);
	assert_int_equal(p.services[0].tcp[1], 65535);
	rw_policy_free(&p);
}

static void test_duplicate_port(void **state)
{
	struct rw_policy p;

	expect_example_refused(
		"[443, 8443, 3128]", "[443, 8443, 443]",
		"policy.json:6:73: services[0].tcp[2]: port 443 is already listed at "
		"services[0].tcp[0]");
	/* the same port over tcp and udp is two different things */
	parse_ok("{\"revision\": 1, \"inbound\": [{\"name\": \"dns\", \"cidr\": \"10.0.0.0/8\", "
		 "\"tcp\": [53], \"udp\": [53]}]}",
		 &p);
	assert_int_equal(p.inbound[0].tcp[0], 53);
	assert_int_equal(p.inbound[0].udp[0], 53);
	rw_policy_free(&p);
}

static void test_rule_without_port(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": \"52.94.2.1\"}]}",
		 "policy.json:1:30: services[0]: allows no port (give \"tcp\" and/or \"udp\" "
		 "ports)"},
		{"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": \"52.94.2.1\", "
		 "\"tcp\": [], \"udp\": []}]}",
		 "policy.json:1:30: services[0]: allows no port (give \"tcp\" and/or \"udp\" "
		 "ports)"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused("\"tcp\": [5432], \"udp\": []", "\"tcp\": [], \"udp\": []",
			       "policy.json:17:16: runs[1].allow[0]: allows no port (give \"tcp\" "
			       "and/or \"udp\" ports)");
}

/* ---- Keys and types ------------------------------------------------------------------------ */

static void test_unknown_keys(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 1, \"servics\": []}",
		 "policy.json:1:17: servics: unknown key (expected one of: revision, egress, refusal, "
		 "lease_seconds, nat64, deny, services, inbound, runs)"},
		{"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": \"52.94.2.1\", "
		 "\"port\": 80}]}",
		 "policy.json:1:63: services[0].port: unknown key (expected one of: name, ip, "
		 "cidr, tcp, udp, from)"},
		/* keys that are not plain words are quoted, control characters escaped */
		{"{\"revision\": 1, \"a b\\n\": 1}",
		 "policy.json:1:17: [\"a b\\u000a\"]: unknown key (expected one of: revision, "
		 "egress, refusal, lease_seconds, nat64, deny, services, inbound, runs)"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused("\"allow\": [", "\"alow\": [",
			       "policy.json:17:6: runs[1].alow: unknown key (expected one of: id, "
			       "pods, egress, refusal, allow)");
	/* a run's allow rule has no name */
	expect_example_refused(
		"{\"cidr\": \"52.194.9.0/24\"", "{\"name\": \"db\", \"cidr\": \"52.194.9.0/24\"",
		"policy.json:17:17: runs[1].allow[0].name: unknown key (expected one "
		"of: ip, cidr, tcp, udp, from)");
}

/* ---- Principals ("from") ------------------------------------------------------------------- */

#define SVC_FROM(from)                                                                 \
	"{\"revision\": 1, \"services\": [{\"name\": \"b\", \"ip\": \"172.20.0.11\", " \
	"\"tcp\": [3443], \"from\": " from "}]}"

static void test_from(void **state)
{
	static const struct refusal cases[] = {
		{SVC_FROM("[1001]"),
		 "policy.json:1:88: services[0].from: expected an object, got an array"},
		{SVC_FROM("{}"),
		 "policy.json:1:88: services[0].from: names no principal (give \"uid\" and/or \"container\")"},
		{SVC_FROM("{\"user\": [1]}"),
		 "policy.json:1:89: services[0].from.user: unknown key (expected one of: uid, container)"},
		{SVC_FROM("{\"uid\": []}"),
		 "policy.json:1:96: services[0].from.uid: lists 0 uids (1..8)"},
		{SVC_FROM("{\"uid\": [1,2,3,4,5,6,7,8,9]}"),
		 "policy.json:1:96: services[0].from.uid: lists 9 uids (1..8)"},
		{SVC_FROM("{\"uid\": [-1]}"),
		 "policy.json:1:97: services[0].from.uid[0]: -1 is not a uid (0..4294967294)"},
		{SVC_FROM("{\"uid\": [4294967295]}"),
		 "policy.json:1:97: services[0].from.uid[0]: 4294967295 is not a uid (0..4294967294)"},
		{SVC_FROM("{\"uid\": [65534]}"),
		 "policy.json:1:97: services[0].from.uid[0]: uid 65534 is what the kernel reports for a packet with no socket: it cannot name a principal"},
		{SVC_FROM("{\"uid\": [1001, 1001]}"),
		 "policy.json:1:103: services[0].from.uid[1]: uid 1001 is already listed at services[0].from.uid[0]"},
		{SVC_FROM("{\"uid\": [\"1001\"]}"),
		 "policy.json:1:97: services[0].from.uid[0]: expected a uid (an integer), got a string"},
		{SVC_FROM("{\"container\": [\"Sidecar\"]}"),
		 "policy.json:1:103: services[0].from.container[0]: \"Sidecar\" is not a container name (1..63 of a-z, 0-9 and '-', starting and ending with a letter or digit)"},
		{SVC_FROM("{\"container\": [\"-a\"]}"),
		 "policy.json:1:103: services[0].from.container[0]: \"-a\" is not a container name (1..63 of a-z, 0-9 and '-', starting and ending with a letter or digit)"},
		{SVC_FROM("{\"container\": [\"a\", \"a\"]}"),
		 "policy.json:1:108: services[0].from.container[1]: \"a\" is already listed at services[0].from.container[0]"},
		{SVC_FROM("{\"container\": [7]}"),
		 "policy.json:1:103: services[0].from.container[0]: expected a container name (a string), got an integer"},
		/* inbound rules judge packets into the pod: no sender of the pod's to name */
		{"{\"revision\": 1, \"inbound\": [{\"name\": \"i\", \"cidr\": \"10.0.0.0/8\", "
		 "\"tcp\": [80], \"from\": {\"uid\": [1]}}]}",
		 "policy.json:1:78: inbound[0].from: an inbound rule has no \"from\": it judges "
		 "packets into the pod, which no sender inside the pod sent"},
	};
	struct rw_policy p, q;
	char text[128];

	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok(SVC_FROM("{\"uid\": [1001, 0], \"container\": [\"identity-sidecar\"]}"), &p);
	assert_non_null(p.services[0].from);
	assert_int_equal(p.services[0].from->n_uids, 2);
	assert_int_equal(p.services[0].from->uids[0], 1001);
	assert_int_equal(p.services[0].from->uids[1], 0);
	assert_int_equal(p.services[0].from->n_containers, 1);
	assert_string_equal(p.services[0].from->containers[0], "identity-sidecar");
	assert_string_equal(rw_policy_from_text(p.services[0].from, text, sizeof(text)),
			    "uid 1001,0 container identity-sidecar");
	assert_int_equal(rw_policy_from_count(&p), 1);
	/* a changed "from" is a changed rule: the diff says so, and the snapshots differ */
	parse_ok(SVC_FROM("{\"uid\": [1001]}"), &q);
	assert_int_not_equal(rw_policy_from_cmp(p.services[0].from, q.services[0].from), 0);
	{
		char diff[256];

		assert_int_equal(rw_policy_diff(&q, &p, diff, sizeof(diff)), 1);
		assert_string_equal(diff, "~ service b: from uid 1001 -> uid 1001,0 container "
					  "identity-sidecar\n");
	}
	rw_policy_free(&q);
	rw_policy_free(&p);
	/* a run's rule may name one too */
	parse_ok("{\"revision\": 1, \"runs\": [{\"id\": \"r\", \"pods\": [\"10.1.2.3\"], "
		 "\"allow\": [{\"ip\": \"52.94.2.1\", \"tcp\": [443], \"from\": "
		 "{\"uid\": [1000]}}]}]}",
		 &p);
	assert_int_equal(p.runs[0].allow[0].from->uids[0], 1000);
	assert_null(p.services);
	rw_policy_free(&p);
}

static void test_wrong_types(void **state)
{
	static const struct refusal cases[] = {
		{"[]", "policy.json:1:1: (document): expected an object, got an array"},
		{"{\"revision\": 1, \"services\": {}}",
		 "policy.json:1:29: services: expected an array, got an object"},
		{"{\"revision\": 1, \"runs\": [\"run-1\"]}",
		 "policy.json:1:26: runs[0]: expected an object, got a string"},
		{"{\"revision\": 1, \"deny\": [10]}",
		 "policy.json:1:26: deny[0]: expected a string, got an integer"},
		{"{\"revision\": 1, \"egress\": true}",
		 "policy.json:1:27: egress: expected a string, got a boolean"},
		{"{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": \"10.1.2.3\"}]}",
		 "policy.json:1:46: runs[0].pods: expected an array, got a string"},
		{"{\"revision\": 1, \"runs\": [{\"id\": 7, \"pods\": []}]}",
		 "policy.json:1:33: runs[0].id: expected a string, got an integer"},
		{"{\"revision\": 1, \"inbound\": [[]]}",
		 "policy.json:1:29: inbound[0]: expected an object, got an array"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
}

static void test_missing_keys(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 1, \"services\": [{\"ip\": \"52.94.2.1\", \"tcp\": [80]}]}",
		 "policy.json:1:30: services[0].name: required key is missing"},
		{"{\"revision\": 1, \"inbound\": [{\"cidr\": \"10.0.0.0/8\", \"tcp\": [80]}]}",
		 "policy.json:1:29: inbound[0].name: required key is missing"},
		{"{\"revision\": 1, \"runs\": [{\"pods\": []}]}",
		 "policy.json:1:26: runs[0].id: required key is missing"},
		{"{\"revision\": 1, \"runs\": [{\"id\": \"a\"}]}",
		 "policy.json:1:26: runs[0].pods: required key is missing"},
		{"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"tcp\": [80]}]}",
		 "policy.json:1:30: services[0]: needs \"ip\" or \"cidr\""},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
}

static void test_ip_and_cidr(void **state)
{
	expect_refused("{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": \"52.94.2.1\", "
		       "\"cidr\": \"192.0.2.0/24\", \"tcp\": [80]}]}",
		       "policy.json:1:63: services[0].cidr: a rule has either \"ip\" or \"cidr\", "
		       "not both");
}

/* ---- Addresses ----------------------------------------------------------------------------- */

/* One service with the given "ip" value, at column 50. */
#define SERVICE_IP(ip) \
	"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"ip\": " ip ", \"tcp\": [80]}]}"

/* inet_pton(AF_INET) decides: four decimal parts, no leading zeros, nothing around them. */
static void test_bad_ipv4(void **state)
{
	static const struct refusal cases[] = {
		{SERVICE_IP("\"10.1.2.300\""),
		 "policy.json:1:50: services[0].ip: \"10.1.2.300\" is not an IPv4 address"},
		{SERVICE_IP("\"010.1.1.1\""),
		 "policy.json:1:50: services[0].ip: \"010.1.1.1\" is not an IPv4 address"},
		{SERVICE_IP("\"10.1\""),
		 "policy.json:1:50: services[0].ip: \"10.1\" is not an IPv4 address"},
		{SERVICE_IP("\" 10.1.1.1\""),
		 "policy.json:1:50: services[0].ip: \" 10.1.1.1\" is not an IPv4 address"},
		{SERVICE_IP("\"\""),
		 "policy.json:1:50: services[0].ip: \"\" is not an IPv4 address"},
		{SERVICE_IP("\"10.0.0.0/8\""),
		 "policy.json:1:50: services[0].ip: \"10.0.0.0/8\" is not an IPv4 address (use "
		 "\"cidr\" for a range)"},
		{SERVICE_IP("167772161"),
		 "policy.json:1:50: services[0].ip: expected a string, got an integer"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused("\"10.1.2.4\"", "\"10.1.2.300\"",
			       "policy.json:16:33: runs[1].pods[0]: \"10.1.2.300\" is not an IPv4 "
			       "address");
}

/* One deny CIDR, at column 26. */
#define DENY(cidr) "{\"revision\": 1, \"deny\": [" cidr "]}"
#define NOT_A_CIDR(s) \
	"policy.json:1:26: deny[0]: \"" s "\" is not a CIDR (a.b.c.d/n with n in 0..32)"

static void test_bad_cidr(void **state)
{
	static const struct refusal cases[] = {
		{DENY("\"10.0.0.0/33\""), NOT_A_CIDR("10.0.0.0/33")},
		{DENY("\"10.0.0.0\""), NOT_A_CIDR("10.0.0.0")},
		{DENY("\"10.0.0.0/\""), NOT_A_CIDR("10.0.0.0/")},
		{DENY("\"10.0.0.0/08\""), NOT_A_CIDR("10.0.0.0/08")},
		{DENY("\"10.0.0.0/-1\""), NOT_A_CIDR("10.0.0.0/-1")},
		{DENY("\"10.0.0.0/+8\""), NOT_A_CIDR("10.0.0.0/+8")},
		{DENY("\"10.0.0.0/8 \""), NOT_A_CIDR("10.0.0.0/8 ")},
		{DENY("\"10.0.0.0/8/8\""), NOT_A_CIDR("10.0.0.0/8/8")},
		{DENY("\"10.0.0/8\""), NOT_A_CIDR("10.0.0/8")},
		{DENY("\"010.0.0.0/8\""), NOT_A_CIDR("010.0.0.0/8")},
		{DENY("\"/8\""), NOT_A_CIDR("/8")},
	};
	struct rw_policy p;

	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok(DENY("\"0.0.0.0/0\", \"192.0.2.7/32\", \"10.0.0.0/8\""), &p);
	assert_int_equal(p.n_deny, 3);
	assert_int_equal(p.deny[0].addr, 0);
	assert_int_equal(p.deny[0].prefixlen, 0);
	assert_int_equal(p.deny[1].addr, htonl(0xc0000207));
	assert_int_equal(p.deny[1].prefixlen, 32);
	assert_int_equal(p.deny[2].prefixlen, 8);
	rw_policy_free(&p);
}

static void test_cidr_host_bits(void **state)
{
	expect_refused(DENY("\"10.0.0.1/8\""),
		       "policy.json:1:26: deny[0]: \"10.0.0.1/8\" has host bits set: did you mean "
		       "10.0.0.0/8?");
	expect_refused(DENY("\"1.2.3.4/0\""),
		       "policy.json:1:26: deny[0]: \"1.2.3.4/0\" has host bits set: did you mean "
		       "0.0.0.0/0?");
	expect_example_refused(
		"\"52.194.9.0/24\"", "\"52.194.9.1/24\"",
		"policy.json:17:25: runs[1].allow[0].cidr: \"52.194.9.1/24\" has host "
		"bits set: did you mean 52.194.9.0/24?");
}

/* One service with the given "cidr" value, at column 52. */
#define SERVICE_CIDR(cidr) \
	"{\"revision\": 1, \"services\": [{\"name\": \"s\", \"cidr\": " cidr ", \"tcp\": [80]}]}"

static void test_metadata_coverage(void **state)
{
	static const struct refusal cases[] = {
		{SERVICE_IP("\"169.254.169.254\""),
		 "policy.json:1:50: services[0].ip: \"169.254.169.254\" covers the metadata "
		 "address 169.254.169.254"},
		{SERVICE_CIDR("\"169.254.170.2/32\""),
		 "policy.json:1:52: services[0].cidr: \"169.254.170.2/32\" covers the metadata "
		 "address 169.254.170.2"},
		{SERVICE_CIDR("\"169.254.0.0/16\""),
		 "policy.json:1:52: services[0].cidr: \"169.254.0.0/16\" covers the metadata "
		 "address 169.254.169.254"},
		{SERVICE_CIDR("\"169.254.169.252/31\""),
		 "policy.json:1:52: services[0].cidr: \"169.254.169.252/31\" covers the metadata "
		 "address 169.254.169.253"},
		{SERVICE_CIDR("\"0.0.0.0/0\""),
		 "policy.json:1:52: services[0].cidr: \"0.0.0.0/0\" covers the metadata address "
		 "169.254.169.254"},
		{SERVICE_CIDR("\"100.100.100.0/24\""),
		 "policy.json:1:52: services[0].cidr: \"100.100.100.0/24\" covers the metadata "
		 "address 100.100.100.200"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused("{\"cidr\": \"52.194.9.0/24\"", "{\"ip\": \"169.254.170.23\"",
			       "policy.json:17:23: runs[1].allow[0].ip: \"169.254.170.23\" covers "
			       "the metadata address 169.254.170.23");
	expect_example_refused("\"172.20.0.12/32\"", "\"0.0.0.0/0\"",
			       "policy.json:12:34: inbound[0].cidr: \"0.0.0.0/0\" covers the "
			       "metadata address 169.254.169.254");
	/* right next to metadata is fine, and deny may cover it */
	expect_parses(SERVICE_CIDR("\"169.254.169.252/32\""));
	expect_parses(SERVICE_IP("\"169.254.169.255\""));
	expect_parses(DENY("\"169.254.0.0/16\""));
}

/* Run rules name public destinations only: overlapping a built-in range or the deny list is
 * refused with the rule's path and the range. Services may still name private addresses.
 */
#define RUN_RULE_TAIL                                                        \
	": run rules name public destinations only (only services may name " \
	"private addresses)"

static void test_run_rules_public_only(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 1, \"deny\": [\"52.194.0.0/16\"], \"runs\": [{\"id\": \"a\", "
		 "\"pods\": [\"10.1.2.3\"], \"allow\": [{\"cidr\": \"52.194.9.0/24\", \"tcp\": "
		 "[5432]}]}]}",
		 "policy.json:1:106: runs[0].allow[0].cidr: \"52.194.9.0/24\" overlaps "
		 "52.194.0.0/16 (deny[0]), denied by the snapshot" RUN_RULE_TAIL},
		{"{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.1.2.3\"], \"allow\": "
		 "[{\"ip\": \"52.1.2.3\", \"tcp\": [443]}, {\"cidr\": \"52.0.0.0/6\", \"udp\": [53]}]}],"
		 " \"deny\": [\"53.0.0.0/8\"]}",
		 "policy.json:1:113: runs[0].allow[1].cidr: \"52.0.0.0/6\" overlaps 53.0.0.0/8 "
		 "(deny[0]), denied by the snapshot" RUN_RULE_TAIL},
	};

	expect_example_refused("\"52.194.9.0/24\"", "\"0.0.0.0/2\"",
			       "policy.json:17:25: runs[1].allow[0].cidr: \"0.0.0.0/2\" overlaps "
			       "0.0.0.0/8, a private or special-purpose range" RUN_RULE_TAIL);
	expect_example_refused("{\"cidr\": \"52.194.9.0/24\"", "{\"ip\": \"10.0.5.6\"",
			       "policy.json:17:23: runs[1].allow[0].ip: \"10.0.5.6\" overlaps "
			       "10.0.0.0/8, a private or special-purpose range" RUN_RULE_TAIL);
	expect_example_refused("{\"cidr\": \"52.194.9.0/24\"", "{\"ip\": \"127.0.0.1\"",
			       "policy.json:17:23: runs[1].allow[0].ip: \"127.0.0.1\" overlaps "
			       "127.0.0.0/8, a private or special-purpose range" RUN_RULE_TAIL);
	expect_example_refused("{\"cidr\": \"52.194.9.0/24\"", "{\"ip\": \"169.254.1.1\"",
			       "policy.json:17:23: runs[1].allow[0].ip: \"169.254.1.1\" overlaps "
			       "169.254.0.0/16, a private or special-purpose range" RUN_RULE_TAIL);
	expect_example_refused(
		"{\"cidr\": \"52.194.9.0/24\"", "{\"cidr\": \"100.64.0.0/12\"",
		"policy.json:17:25: runs[1].allow[0].cidr: \"100.64.0.0/12\" overlaps "
		"100.64.0.0/10, a private or special-purpose range" RUN_RULE_TAIL);
	expect_example_refused(
		"{\"cidr\": \"52.194.9.0/24\"", "{\"cidr\": \"172.20.9.0/24\"",
		"policy.json:17:25: runs[1].allow[0].cidr: \"172.20.9.0/24\" overlaps "
		"172.16.0.0/12, a private or special-purpose range" RUN_RULE_TAIL);
	expect_all_refused(cases, ARRAY_LEN(cases));
	/* The same address is fine for the platform's services, and a public neighbour of a
	 * range is fine for a run.
	 */
	expect_parses(
		"{\"revision\": 1, \"services\": [{\"name\": \"db\", \"cidr\": \"10.0.5.0/24\", "
		"\"tcp\": [5432]}]}");
	expect_parses("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.1.2.3\"], "
		      "\"allow\": [{\"cidr\": \"11.0.0.0/8\", \"tcp\": [443]}]}]}");
}

/* A JSON snapshot with `services` services, and one run with `rules` allow rules. */
static char *many_rules(size_t services, size_t rules)
{
	size_t cap = 256 + services * 80 + rules * 64, len = 0;
	char *s = malloc(cap);

	assert_non_null(s);
	len += snprintf(s + len, cap - len, "{\"revision\": 1, \"services\": [");
	for (size_t i = 0; i < services; i++)
		len += snprintf(s + len, cap - len,
				"%s{\"name\": \"s%zu\", \"ip\": \"52.%zu.%zu.1\", "
				"\"tcp\": [443]}",
				i ? ", " : "", i, i / 256, i % 256);
	len += snprintf(s + len, cap - len,
			"], \"runs\": [{\"id\": \"a\", \"pods\": [\"10.1.2.3\"], "
			"\"allow\": [");
	for (size_t i = 0; i < rules; i++)
		len += snprintf(s + len, cap - len, "%s{\"ip\": \"53.%zu.%zu.1\", \"tcp\": [%zu]}",
				i ? ", " : "", i / 256 % 256, i % 256, 1 + i / 65536);
	snprintf(s + len, cap - len, "]}]}");
	return s;
}

/* Rule ids never wrap: the longest lists that fit parse, and their last ids decode back to
 * their indexes; one more is refused.
 */
static void test_rule_id_limits(void **state)
{
	struct rw_policy_error err;
	struct rw_policy p;
	__u32 id;
	char *json;

	json = many_rules(RW_RULE_MAX_A, RW_RULE_MAX_B);
	parse_ok(json, &p);
	assert_int_equal(p.n_services, RW_RULE_MAX_A);
	assert_int_equal(p.runs[0].n_allow, RW_RULE_MAX_B);
	rw_policy_free(&p);
	free(json);
	id = RW_RULE_ID(RW_RULE_KIND_RUN, RW_RULE_MAX_A - 1, RW_RULE_MAX_B - 1);
	assert_int_equal(RW_RULE_KIND(id), RW_RULE_KIND_RUN);
	assert_int_equal(RW_RULE_A(id), RW_RULE_MAX_A - 1);
	assert_int_equal(RW_RULE_B(id), RW_RULE_MAX_B - 1);
	id = RW_RULE_ID(RW_RULE_KIND_SERVICE, RW_RULE_MAX_A - 1, 0);
	assert_int_equal(RW_RULE_KIND(id), RW_RULE_KIND_SERVICE);
	assert_int_equal(RW_RULE_A(id), RW_RULE_MAX_A - 1);

	json = many_rules(RW_RULE_MAX_A + 1, 1);
	assert_int_equal(rw_policy_parse(json, strlen(json), "policy.json", &p, &err), -EINVAL);
	assert_string_equal(err.text, "policy.json:1:29: services: 4097 entries: at most 4096 fit "
				      "in a rule id");
	free(json);
	json = many_rules(1, RW_RULE_MAX_B + 1);
	assert_int_equal(rw_policy_parse(json, strlen(json), "policy.json", &p, &err), -EINVAL);
	assert_string_equal(err.text, "policy.json:1:131: runs[0].allow: 65537 rules: a run has at "
				      "most 65536 (they must fit in a rule id)");
	free(json);
}

/* One run with the given pods, the first at column 47. */
#define RUN_PODS(pods) "{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [" pods "]}]}"

static void test_pod_addresses(void **state)
{
	static const struct refusal cases[] = {
		{RUN_PODS("\"169.254.169.254\""),
		 "policy.json:1:47: runs[0].pods[0]: \"169.254.169.254\" is not a pod address: "
		 "a metadata address"},
		{RUN_PODS("\"100.100.100.200\""),
		 "policy.json:1:47: runs[0].pods[0]: \"100.100.100.200\" is not a pod address: "
		 "a metadata address"},
		{RUN_PODS("\"0.0.0.0\""),
		 "policy.json:1:47: runs[0].pods[0]: \"0.0.0.0\" is not a pod address: \"this "
		 "network\" (0.0.0.0/8)"},
		{RUN_PODS("\"0.255.255.255\""),
		 "policy.json:1:47: runs[0].pods[0]: \"0.255.255.255\" is not a pod address: \"this "
		 "network\" (0.0.0.0/8)"},
		{RUN_PODS("\"10.1.2.3\", \"127.0.0.1\""),
		 "policy.json:1:59: runs[0].pods[1]: \"127.0.0.1\" is not a pod address: a "
		 "loopback address"},
		{RUN_PODS("\"127.255.255.254\""),
		 "policy.json:1:47: runs[0].pods[0]: \"127.255.255.254\" is not a pod address: a "
		 "loopback address"},
		{RUN_PODS("\"169.254.1.1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"169.254.1.1\" is not a pod address: a "
		 "link-local address"},
		{RUN_PODS("\"169.254.0.0\""),
		 "policy.json:1:47: runs[0].pods[0]: \"169.254.0.0\" is not a pod address: a "
		 "link-local address"},
		{RUN_PODS("\"255.255.255.255\""),
		 "policy.json:1:47: runs[0].pods[0]: \"255.255.255.255\" is not a pod address: "
		 "the broadcast address"},
		{RUN_PODS("\"224.0.0.1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"224.0.0.1\" is not a pod address: a "
		 "multicast address"},
		{RUN_PODS("\"239.255.255.255\""),
		 "policy.json:1:47: runs[0].pods[0]: \"239.255.255.255\" is not a pod address: a "
		 "multicast address"},
		{RUN_PODS("\"240.0.0.1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"240.0.0.1\" is not a pod address: a "
		 "reserved address (240.0.0.0/4)"},
		{RUN_PODS("\"255.255.255.254\""),
		 "policy.json:1:47: runs[0].pods[0]: \"255.255.255.254\" is not a pod address: a "
		 "reserved address (240.0.0.0/4)"},
		{RUN_PODS("\"10.0.0.0/32\""),
		 "policy.json:1:47: runs[0].pods[0]: \"10.0.0.0/32\" is not an IPv4 address"},
	};
	struct rw_policy p;

	expect_all_refused(cases, ARRAY_LEN(cases));
	/* The neighbours of each refused range can be pods; so can a /24's .0 and .255, as a
	 * snapshot names addresses, not prefixes.
	 */
	parse_ok(RUN_PODS("\"223.255.255.255\", \"1.0.0.0\", \"126.255.255.255\", \"128.0.0.0\", "
			  "\"169.253.255.255\", \"169.255.0.0\", \"10.1.4.0\", \"10.1.4.255\""),
		 &p);
	assert_int_equal(p.runs[0].n_pods, 8);
	assert_int_equal(p.runs[0].pods[0], htonl(0xdfffffff));
	rw_policy_free(&p);
}

static void test_duplicate_pod(void **state)
{
	expect_example_refused("\"pods\": [\"10.1.2.4\"]", "\"pods\": [\"10.1.2.3\"]",
			       "policy.json:16:33: runs[1].pods[0]: pod 10.1.2.3 is already listed "
			       "at runs[0].pods[0] (run run-7f3a)");
	expect_refused(RUN_PODS("\"10.1.2.3\", \"10.1.2.4\", \"10.1.2.3\""),
		       "policy.json:1:71: runs[0].pods[2]: pod 10.1.2.3 is already listed at "
		       "runs[0].pods[0] (run a)");
	/* two repeats in one run: the earlier one, though its address sorts higher */
	expect_refused("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.0.0.1\", "
		       "\"10.0.0.5\"]}, {\"id\": \"b\", \"pods\": [\"10.0.0.5\", \"10.0.0.1\"]}]}",
		       "policy.json:1:94: runs[1].pods[0]: pod 10.0.0.5 is already listed at "
		       "runs[0].pods[1] (run a)");
	/* three times: the second names the first */
	expect_refused(RUN_PODS("\"10.0.0.7\", \"10.0.0.7\", \"10.0.0.7\""),
		       "policy.json:1:59: runs[0].pods[1]: pod 10.0.0.7 is already listed at "
		       "runs[0].pods[0] (run a)");
	/* three repeats: the one reported is the first in the text, neither the lowest nor the
	 * highest address, nor the first of the run that repeats most
	 */
	expect_refused("{\"revision\": 1, \"runs\": [\n"
		       "  {\"id\": \"a\", \"pods\": [\"10.0.0.1\", \"10.0.0.5\", \"10.0.0.9\"]},\n"
		       "  {\"id\": \"b\", \"pods\": [\"10.0.0.5\"]},\n"
		       "  {\"id\": \"c\", \"pods\": [\"10.0.0.1\", \"10.0.0.9\"]}]}",
		       "policy.json:3:24: runs[1].pods[0]: pod 10.0.0.5 is already listed at "
		       "runs[0].pods[1] (run a)");
}

static void test_duplicate_run_id(void **state)
{
	expect_example_refused("\"id\": \"run-9c01\"", "\"id\": \"run-7f3a\"",
			       "policy.json:16:12: runs[1].id: run \"run-7f3a\" is already defined "
			       "at runs[0]");
	/* the first repeat in the text ("y"), neither the lowest nor the highest id; each run
	 * below is 23 characters and the next starts 25 further, so runs[3].id is at 26 + 75 + 7
	 */
	expect_refused("{\"revision\": 1, \"runs\": [{\"id\": \"x\", \"pods\": []}, "
		       "{\"id\": \"y\", \"pods\": []}, {\"id\": \"z\", \"pods\": []}, "
		       "{\"id\": \"y\", \"pods\": []}, {\"id\": \"x\", \"pods\": []}, "
		       "{\"id\": \"z\", \"pods\": []}]}",
		       "policy.json:1:108: runs[3].id: run \"y\" is already defined at runs[1]");
}

/* One run with the given id, at column 33. */
#define RUN_ID(id) "{\"revision\": 1, \"runs\": [{\"id\": " id ", \"pods\": []}]}"
#define NOT_A_RUN_ID(s)                                                                         \
	"policy.json:1:33: runs[0].id: \"" s "\" is not a run id (1..63 characters of A-Z a-z " \
	"0-9 . _ -)"
#define ID_63 "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789."
/* One service with the given name, at column 39. */
#define SERVICE_NAME(name)                                  \
	"{\"revision\": 1, \"services\": [{\"name\": " name \
	", \"ip\": \"52.94.2.1\", \"tcp\": [80]}]}"
#define NOT_A_NAME(s)                                                                         \
	"policy.json:1:39: services[0].name: \"" s "\" is not a name (1..63 printable ASCII " \
	"characters)"

static void test_run_ids_and_names(void **state)
{
	static const struct refusal cases[] = {
		{RUN_ID("\"run 1\""), NOT_A_RUN_ID("run 1")},
		{RUN_ID("\"\""), NOT_A_RUN_ID("")},
		{RUN_ID("\"run/1\""), NOT_A_RUN_ID("run/1")},
		{RUN_ID("\"r\\u00fcn\""), NOT_A_RUN_ID("r\xc3\xbcn")},
		{RUN_ID("\"" ID_63 "x\""), NOT_A_RUN_ID(ID_63 "x")},
		{SERVICE_NAME("\"\""), NOT_A_NAME("")},
		{SERVICE_NAME("\"a\\tb\""), NOT_A_NAME("a\\u0009b")},
		{SERVICE_NAME("\"" ID_63 "x\""), NOT_A_NAME(ID_63 "x")},
		{SERVICE_NAME("\"caf\\u00e9\""), NOT_A_NAME("caf\xc3\xa9")},
	};
	struct rw_policy p;

	assert_int_equal(strlen(ID_63), 63);
	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok(RUN_ID("\"" ID_63 "\""), &p);
	assert_string_equal(p.runs[0].id, ID_63);
	rw_policy_free(&p);
	parse_ok(SERVICE_NAME("\"web proxy #1\""), &p);
	assert_string_equal(p.services[0].name, "web proxy #1");
	rw_policy_free(&p);
}

static void test_egress_values(void **state)
{
	expect_refused("{\"revision\": 1, \"egress\": \"closed\"}",
		       "policy.json:1:27: egress: \"closed\" is not an egress mode (expected "
		       "\"allowlist\" or \"open\")");
	expect_example_refused("\"egress\": \"open\"", "\"egress\": \"Open\"",
			       "policy.json:16:56: runs[1].egress: \"Open\" is not an egress mode "
			       "(expected \"allowlist\" or \"open\")");
}

/* "refusal": "answer" by default, "drop" node-wide, a run's own; anything else is refused. */
static void test_refusal_values(void **state)
{
	struct rw_policy p;

	(void)state;
	parse_ok("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": []}]}", &p);
	assert_int_equal(p.refusal, RW_REFUSAL_ANSWER);
	assert_int_equal(p.runs[0].refusal, -1);
	assert_int_equal(rw_policy_run_refusal(&p, &p.runs[0]), RW_REFUSAL_ANSWER);
	rw_policy_free(&p);
	parse_ok("{\"revision\": 1, \"refusal\": \"drop\", \"runs\": [{\"id\": \"a\", "
		 "\"pods\": []}, {\"id\": \"b\", \"pods\": [], \"refusal\": \"answer\"}]}",
		 &p);
	assert_int_equal(p.refusal, RW_REFUSAL_DROP);
	assert_int_equal(rw_policy_run_refusal(&p, &p.runs[0]), RW_REFUSAL_DROP);
	assert_int_equal(rw_policy_run_refusal(&p, &p.runs[1]), RW_REFUSAL_ANSWER);
	rw_policy_free(&p);
	expect_refused("{\"revision\": 1, \"refusal\": \"reject\"}",
		       "policy.json:1:28: refusal: \"reject\" is not a refusal mode (expected "
		       "\"answer\" or \"drop\")");
	expect_refused("{\"revision\": 1, \"refusal\": true}",
		       "policy.json:1:28: refusal: expected a string, got a boolean");
	expect_example_refused("\"egress\": \"open\"", "\"refusal\": \"Drop\"",
			       "policy.json:16:57: runs[1].refusal: \"Drop\" is not a refusal mode "
			       "(expected \"answer\" or \"drop\")");
}

/* "lease_seconds": none by default, an integer of RW_LEASE_MIN..RW_LEASE_MAX, kept by the parse;
 * anything else refused at its path.
 */
/* "nat64": none by default; a /96 IPv6 prefix outside the other forms and the special ranges
 * (64:ff9b:1::/48 aside); under a network-specific one no service names an address and no run
 * rule overlaps it; a change of it is a diff line.
 */
static void test_nat64(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 1, \"nat64\": \"10.0.0.0/8\"}",
		 "policy.json:1:26: nat64: \"10.0.0.0/8\" is not an IPv6 prefix (the cluster's NAT64 "
		 "prefix, such as 64:ff9b::/96)"},
		{"{\"revision\": 1, \"nat64\": \"64:ff9b::/64\"}",
		 "policy.json:1:26: nat64: \"64:ff9b::/64\" is a /64: the NAT64 prefix is a /96 (the "
		 "IPv4 address in its low 32 bits, RFC 6052; the other lengths are not taken)"},
		{"{\"revision\": 1, \"nat64\": \"64:ff9b::1/96\"}",
		 "policy.json:1:26: nat64: \"64:ff9b::1/96\" has host bits set: did you mean "
		 "64:ff9b::/96?"},
		{"{\"revision\": 1, \"nat64\": \"2002:ac14:a::/96\"}",
		 "policy.json:1:26: nat64: \"2002:ac14:a::/96\" is in 2002::/16, the 6to4 form: not a "
		 "NAT64 prefix"},
		{"{\"revision\": 1, \"nat64\": \"fd00:64::/96\"}",
		 "policy.json:1:26: nat64: \"fd00:64::/96\" is in fc00::/7 (unique local): not a "
		 "NAT64 prefix (64:ff9b::/96, one in 64:ff9b:1::/48, or a global one of the "
		 "cluster's)"},
		{"{\"revision\": 1, \"nat64\": 96}",
		 "policy.json:1:26: nat64: expected a string, got an integer"},
		{"{\"revision\": 1, \"nat64\": \"2600:1f14:64::/96\", \"services\": [{\"name\": "
		 "\"p\", \"ip\": \"2600:1f14:64::ac14:a\", \"tcp\": [443]}]}",
		 "policy.json:1:80: services[0].ip: \"2600:1f14:64::ac14:a\" is under the snapshot's "
		 "nat64 prefix 2600:1f14:64::/96: write the IPv4 address 172.20.0.10 (a destination "
		 "there is judged by the IPv4 rules)"},
		{"{\"revision\": 1, \"nat64\": \"2600:1f14:64::/96\", \"runs\": [{\"id\": \"r\", "
		 "\"pods\": [\"10.1.2.3\"], \"allow\": [{\"cidr\": \"2600:1f14::/32\", \"tcp\": "
		 "[443]}]}]}",
		 "policy.json:1:109: runs[0].allow[0].cidr: \"2600:1f14::/32\" overlaps "
		 "2600:1f14:64::/96, the snapshot's nat64 prefix (write IPv4 rules for it): run rules "
		 "name public destinations only (only services may name private addresses)"},
	};
	struct rw_policy p, q;
	char diff[256];

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok("{\"revision\": 1}", &p);
	assert_int_equal(p.nat64.family, 0);
	parse_ok("{\"revision\": 2, \"nat64\": \"64:ff9b::/96\"}", &q);
	assert_int_equal(q.nat64.family, AF_INET6);
	assert_int_equal(q.nat64.prefixlen, 96);
	assert_int_equal(rw_policy_diff(&p, &q, diff, sizeof(diff)), 1);
	assert_string_equal(diff, "~ nat64 none -> 64:ff9b::/96\n");
	rw_policy_free(&p);
	rw_policy_free(&q);
	/* A network-specific prefix, one in the local-use range, and a service CIDR wider than one */
	expect_parses(
		"{\"revision\": 1, \"nat64\": \"2600:1f14:64::/96\", \"services\": [{\"name\": "
		"\"v\", \"cidr\": \"2600:1f14::/32\", \"tcp\": [443]}]}");
	expect_parses("{\"revision\": 1, \"nat64\": \"64:ff9b:1:ffff::/96\"}");
}

static void test_lease_seconds(void **state)
{
	static const struct refusal cases[] = {
		{"{\"revision\": 1, \"lease_seconds\": 0}",
		 "policy.json:1:34: lease_seconds: 0 is not a lease (1..86400 seconds; leave the "
		 "key out for no lease)"},
		{"{\"revision\": 1, \"lease_seconds\": -5}",
		 "policy.json:1:34: lease_seconds: -5 is not a lease (1..86400 seconds; leave the "
		 "key out for no lease)"},
		{"{\"revision\": 1, \"lease_seconds\": 86401}",
		 "policy.json:1:34: lease_seconds: 86401 is not a lease (1..86400 seconds; leave "
		 "the key out for no lease)"},
		{"{\"revision\": 1, \"lease_seconds\": 2.5}",
		 "policy.json:1:34: lease_seconds: expected an integer, got a real number"},
		{"{\"revision\": 1, \"lease_seconds\": \"10\"}",
		 "policy.json:1:34: lease_seconds: expected an integer, got a string"},
		{"{\"revision\": 1, \"lease_seconds\": null}",
		 "policy.json:1:34: lease_seconds: expected an integer, got null"},
	};
	struct rw_policy p;
	char diff[256];

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok("{\"revision\": 1}", &p);
	assert_int_equal(p.lease_seconds, 0);
	rw_policy_free(&p);
	parse_ok("{\"revision\": 1, \"lease_seconds\": 1}", &p);
	assert_int_equal(p.lease_seconds, 1);
	rw_policy_free(&p);
	parse_ok("{\"revision\": 1, \"lease_seconds\": 86400}", &p);
	assert_int_equal(p.lease_seconds, 86400);
	{
		struct rw_policy q;

		parse_ok("{\"revision\": 2, \"lease_seconds\": 30}", &q);
		assert_int_equal(rw_policy_diff(&p, &q, diff, sizeof(diff)), 1);
		assert_string_equal(diff, "~ lease_seconds 86400 -> 30\n");
		rw_policy_free(&q);
	}
	rw_policy_free(&p);
}

/* ---- JSON level ---------------------------------------------------------------------------- */

static void test_duplicate_key(void **state)
{
	expect_refused("{\n  \"revision\": 1,\n  \"revision\": 2\n}",
		       "policy.json:3:12: (document): duplicate object key near '\"revision\"'");
	expect_example_refused("\"egress\": \"open\"",
			       "\"egress\": \"open\", \"egress\": \"allowlist\"",
			       "policy.json:16:71: (document): duplicate object key near "
			       "'\"egress\"'");
}

static void test_syntax_errors(void **state)
{
	static const struct refusal cases[] = {
		{"", "policy.json:1:1: (document): '[' or '{' expected near end of file"},
		{"{\"revision\": 1,}",
		 "policy.json:1:16: (document): string or '}' expected near '}'"},
		{"{\"revision\": 1} x",
		 "policy.json:1:17: (document): end of file expected near 'x'"},
		{"{\"revision\": 99999999999999999999}",
		 "policy.json:1:33: (document): too big integer near '99999999999999999999'"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused("\"egress\": \"allowlist\",", "\"egress\": \"allowlist\"",
			       "policy.json:4:8: (document): '}' expected near '\"deny\"'");
}

/* The locator follows members by position, so escaped keys, strings full of brackets and
 * quotes, and nested containers before the error must not throw it off.
 */
static void test_error_positions(void **state)
{
	static const struct refusal cases[] = {
		/* each escaped key is 5 characters longer than its plain spelling: 71 + 10 */
		{"{\"r\\u0065vision\": 1, \"\\u0073ervices\": [{\"name\": \"s\", \"ip\": "
		 "\"52.94.2.1\", \"tcp\": [0]}]}",
		 "policy.json:1:81: services[0].tcp[0]: 0 is not a port (1..65535)"},
		{"{\"revision\": 1, \"services\": [{\"name\": \"a]},\\\"[{\", \"ip\": \"52.94.2.1\", "
		 "\"tcp\": [80]}, {\"name\": \"b\", \"ip\": \"192.0.2.2\", \"tcp\": [0]}]}",
		 "policy.json:1:125: services[1].tcp[0]: 0 is not a port (1..65535)"},
		/* members after nested containers; a tab is one column, lines end at \n only */
		{"{\"deny\": [], \"services\": [{\"name\": \"x\", \"ip\": \"52.94.2.1\", \"tcp\": [80]}],"
		 "\r\n\t\"egress\": 5, \"revision\": 1}",
		 "policy.json:2:12: egress: expected a string, got an integer"},
		{"{\"revision\": 1, \"runs\": [{\"pods\": [], \"allow\": [{\"ip\": \"52.94.2.1\", "
		 "\"tcp\": [80], \"udp\": [53]}], \"id\": \"a b\"}]}",
		 "policy.json:1:103: runs[0].id: \"a b\" is not a run id (1..63 characters of "
		 "A-Z a-z 0-9 . _ -)"},
	};

	expect_all_refused(cases, ARRAY_LEN(cases));
}

/* ---- Files ------------------------------------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static int make_tmpdir(void **state)
{
	strcpy(tmpdir, "/tmp/test_policy.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_parse_file(void **state)
{
	struct rw_policy p, zero;
	struct rw_policy_error err;
	char path[128], expected[256];
	int rc;

	memset(&zero, 0, sizeof(zero));
	snprintf(path, sizeof(path), "%s/good.json", tmpdir);
	write_file(path, example);
	rc = rw_policy_parse_file(path, &p, &err);
	assert_string_equal(err.text, "");
	assert_int_equal(rc, 0);
	assert_int_equal(p.n_runs, 2);
	rw_policy_free(&p);

	/* the path is the source in messages */
	snprintf(path, sizeof(path), "%s/bad.json", tmpdir);
	write_file(path, "{\n  \"revision\": 0\n}\n");
	memset(&p, 0xa5, sizeof(p));
	rc = rw_policy_parse_file(path, &p, &err);
	snprintf(expected, sizeof(expected),
		 "%s:2:15: revision: 0 is not a revision (1..72057594037927935)", path);
	assert_string_equal(err.text, expected);
	assert_int_equal(rc, -EINVAL);
	assert_int_equal(err.line, 2);
	assert_int_equal(err.column, 15);
	assert_memory_equal(&p, &zero, sizeof(p));

	snprintf(path, sizeof(path), "%s/missing.json", tmpdir);
	memset(&p, 0xa5, sizeof(p));
	rc = rw_policy_parse_file(path, &p, &err);
	snprintf(expected, sizeof(expected), "%s: No such file or directory", path);
	assert_string_equal(err.text, expected);
	assert_int_equal(rc, -ENOENT);
	assert_int_equal(err.line, 0);
	assert_memory_equal(&p, &zero, sizeof(p));

	rc = rw_policy_parse_file(tmpdir, &p, &err);
	snprintf(expected, sizeof(expected), "%s: Is a directory", tmpdir);
	assert_string_equal(err.text, expected);
	assert_int_equal(rc, -EISDIR);
}

/* 16 MiB is accepted, one byte more is not. */
static void test_parse_file_size_limit(void **state)
{
	static const char doc[] = "{\"revision\": 1}";
	struct rw_policy p;
	struct rw_policy_error err;
	char path[128], expected[256];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/big.json", tmpdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, doc, strlen(doc)), strlen(doc));
	/* pad with spaces (a sparse file would pad with NULs, which JSON refuses) */
	{
		static char spaces[1 << 16];
		size_t left = (16u << 20) - strlen(doc), n;

		memset(spaces, ' ', sizeof(spaces));
		while (left) {
			n = left < sizeof(spaces) ? left : sizeof(spaces);
			assert_int_equal(write(fd, spaces, n), n);
			left -= n;
		}
	}
	rc = rw_policy_parse_file(path, &p, &err);
	assert_string_equal(err.text, "");
	assert_int_equal(rc, 0);
	assert_int_equal(p.revision, 1);
	rw_policy_free(&p);

	assert_int_equal(write(fd, " ", 1), 1);
	assert_int_equal(close(fd), 0);
	rc = rw_policy_parse_file(path, &p, &err);
	snprintf(expected, sizeof(expected), "%s: File too large (the limit is 16 MiB)", path);
	assert_string_equal(err.text, expected);
	assert_int_equal(rc, -EFBIG);
}

static void test_parse_stdin(void **state)
{
	struct rw_policy p;
	struct rw_policy_error err;
	char path[128];
	int saved, fd, rc;

	snprintf(path, sizeof(path), "%s/stdin.json", tmpdir);
	write_file(path, "{\"revision\": 3, \"egress\": \"shut\"}");
	saved = dup(STDIN_FILENO);
	fd = open(path, O_RDONLY);
	assert_true(saved >= 0 && fd >= 0);
	assert_int_equal(dup2(fd, STDIN_FILENO), STDIN_FILENO);
	close(fd);
	rc = rw_policy_parse_file("-", &p, &err);
	assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
	close(saved);
	assert_string_equal(err.text, "<stdin>:1:27: egress: \"shut\" is not an egress mode "
				      "(expected \"allowlist\" or \"open\")");
	assert_int_equal(rc, -EINVAL);
}

/* ---- Comparison and diff ------------------------------------------------------------------- */

static int run_equal(const char *a, const char *b)
{
	struct rw_policy pa, pb;
	int eq;

	parse_ok(a, &pa);
	parse_ok(b, &pb);
	assert_int_equal(pa.n_runs, 1);
	assert_int_equal(pb.n_runs, 1);
	eq = rw_policy_run_equal(&pa, &pa.runs[0], &pb, &pb.runs[0]);
	assert_int_equal(eq, rw_policy_run_equal(&pb, &pb.runs[0], &pa, &pa.runs[0]));
	rw_policy_free(&pa);
	rw_policy_free(&pb);
	return eq;
}

#define ONE_RUN(node, run) "{\"revision\": 1" node ", \"runs\": [{\"id\": \"a\"" run "}]}"
#define R1                                                       \
	", \"pods\": [\"10.0.0.1\", \"10.0.0.2\"], \"allow\": [" \
	"{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}, {\"cidr\": \"52.195.100.0/24\", \"udp\": [53]}]"

/* The digest by which an apply leaves unchanged runs alone: equal for the same run written the
 * same way (whatever else the snapshot changes), different for any change, including order (rule
 * ids name positions).
 */
static void test_run_digest(void **state)
{
	static const char base[] =
		"{\"revision\": %d, \"runs\": [{\"id\": \"run-a\", \"pods\": [\"10.1.0.1\"], \"allow\": ["
		"{\"ip\": \"44.0.0.1\", \"tcp\": [443, 80]}, {\"cidr\": \"45.0.0.0/24\", \"udp\": [53]}]}"
		"%s]}";
	const char *variants[] = {
		"{\"ip\": \"44.0.0.1\", \"tcp\": [443, 81]}, {\"cidr\": \"45.0.0.0/24\", \"udp\": [53]}",
		"{\"ip\": \"44.0.0.1\", \"tcp\": [80, 443]}, {\"cidr\": \"45.0.0.0/24\", \"udp\": [53]}",
		"{\"cidr\": \"45.0.0.0/24\", \"udp\": [53]}, {\"ip\": \"44.0.0.1\", \"tcp\": [443, 80]}",
		"{\"ip\": \"44.0.0.1\", \"tcp\": [443, 80]}, {\"cidr\": \"45.0.0.0/23\", \"udp\": [53]}",
		"{\"ip\": \"44.0.0.1\", \"tcp\": [443, 80]}, {\"cidr\": \"45.0.0.0/24\", \"tcp\": [53]}",
	};
	struct rw_policy a, b, v;
	char json[1024], *at;
	uint64_t d[2];

	(void)state;
	snprintf(json, sizeof(json), base, 1, "");
	parse_ok(json, &a);
	snprintf(json, sizeof(json), base, 2, ", {\"id\": \"run-b\", \"pods\": [\"10.1.0.2\"]}");
	parse_ok(json, &b);
	assert_memory_equal(a.runs[0].digest, b.runs[0].digest, sizeof(d));
	assert_memory_not_equal(a.runs[0].digest, b.runs[1].digest, sizeof(d));
	rw_policy_run_digest(&a.runs[0], d);
	assert_memory_equal(a.runs[0].digest, d, sizeof(d));
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		snprintf(json, sizeof(json), base, 3, "");
		at = strstr(json, "{\"ip\"");
		snprintf(at, sizeof(json) - (at - json), "%s]}]}", variants[i]);
		parse_ok(json, &v);
		if (!memcmp(a.runs[0].digest, v.runs[0].digest, sizeof(d)))
			fail_msg("variant %zu has the digest of the original run", i);
		rw_policy_free(&v);
	}
	rw_policy_free(&a);
	rw_policy_free(&b);
}

static void test_run_equal(void **state)
{
	struct rw_policy p;

	parse_ok(example, &p);
	assert_true(rw_policy_run_equal(&p, &p.runs[0], &p, &p.runs[0]));
	assert_false(rw_policy_run_equal(&p, &p.runs[0], &p, &p.runs[1]));
	rw_policy_free(&p);

	assert_true(run_equal(ONE_RUN("", R1), ONE_RUN(", \"egress\": \"allowlist\"", R1)));
	/* order-insensitive: pods, rules and ports in another order are the same policy */
	assert_true(run_equal(
		ONE_RUN("", R1),
		ONE_RUN("", ", \"allow\": [{\"cidr\": \"52.195.100.0/24\", \"udp\": "
			    "[53]}, {\"tcp\": [443, 80], \"ip\": \"52.94.2.1\"}], \"pods\": "
			    "[\"10.0.0.2\", \"10.0.0.1\"]")));
	/* the effective egress counts: explicit "allowlist" under an allowlist node is equal,
	 * an inherited mode changes with the node's
	 */
	assert_true(run_equal(ONE_RUN("", R1), ONE_RUN("", R1 ", \"egress\": \"allowlist\"")));
	assert_false(run_equal(ONE_RUN("", R1), ONE_RUN(", \"egress\": \"open\"", R1)));
	assert_true(run_equal(ONE_RUN(", \"egress\": \"open\"", R1),
			      ONE_RUN("", R1 ", \"egress\": \"open\"")));
	assert_false(run_equal(ONE_RUN("", R1), ONE_RUN("", R1 ", \"egress\": \"open\"")));

	assert_false(
		run_equal(ONE_RUN("", R1), "{\"revision\": 1, \"runs\": [{\"id\": \"b\"" R1 "}]}"));
	assert_false(
		run_equal(ONE_RUN("", R1),
			  ONE_RUN("", ", \"pods\": [\"10.0.0.1\", \"10.0.0.3\"], \"allow\": ["
				      "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}, {\"cidr\": "
				      "\"52.195.100.0/24\", \"udp\": [53]}]")));
	assert_false(
		run_equal(ONE_RUN("", R1),
			  ONE_RUN("", ", \"pods\": [\"10.0.0.1\"], \"allow\": ["
				      "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}, {\"cidr\": "
				      "\"52.195.100.0/24\", \"udp\": [53]}]")));
	/* a port, a protocol, a prefix length or a whole rule of difference */
	assert_false(
		run_equal(ONE_RUN("", R1),
			  ONE_RUN("", ", \"pods\": [\"10.0.0.1\", \"10.0.0.2\"], \"allow\": ["
				      "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 444]}, {\"cidr\": "
				      "\"52.195.100.0/24\", \"udp\": [53]}]")));
	assert_false(
		run_equal(ONE_RUN("", R1),
			  ONE_RUN("", ", \"pods\": [\"10.0.0.1\", \"10.0.0.2\"], \"allow\": ["
				      "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}, {\"cidr\": "
				      "\"52.195.100.0/24\", \"tcp\": [53]}]")));
	assert_false(
		run_equal(ONE_RUN("", R1),
			  ONE_RUN("", ", \"pods\": [\"10.0.0.1\", \"10.0.0.2\"], \"allow\": ["
				      "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}, {\"cidr\": "
				      "\"52.195.100.0/25\", \"udp\": [53]}]")));
	assert_false(run_equal(ONE_RUN("", R1),
			       ONE_RUN("", ", \"pods\": [\"10.0.0.1\", \"10.0.0.2\"], \"allow\": ["
					   "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}]")));
}

/* Port lists long enough to be compared as sets through a bitmap rather than pairwise. */
static void test_run_equal_long_port_lists(void **state)
{
	char a[1024], b[1024], c[1024];
	int i, la, lb, lc;

	la = snprintf(a, sizeof(a),
		      "{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [], "
		      "\"allow\": [{\"ip\": \"52.94.2.1\", \"tcp\": [");
	lb = snprintf(b, sizeof(b), "%s", a);
	lc = snprintf(c, sizeof(c), "%s", a);
	/* a: 1000..1099; b: the same backwards; c: 1000..1098 and 2000 */
	for (i = 0; i < 100; i++) {
		la += snprintf(a + la, sizeof(a) - la, "%s%d", i ? ", " : "", 1000 + i);
		lb += snprintf(b + lb, sizeof(b) - lb, "%s%d", i ? ", " : "", 1099 - i);
		lc += snprintf(c + lc, sizeof(c) - lc, "%s%d", i ? ", " : "",
			       i < 99 ? 1000 + i : 2000);
	}
	assert_true(la < (int)sizeof(a) - 8 && lb < (int)sizeof(b) - 8 && lc < (int)sizeof(c) - 8);
	strcat(a, "]}]}]}");
	strcat(b, "]}]}]}");
	strcat(c, "]}]}]}");
	assert_true(run_equal(a, b));
	assert_false(run_equal(a, c));
	assert_false(run_equal(b, c));
}

/* Rules as sets: a repeated rule allows nothing more, so [r, r, s] equals [s, r] and [r, s, s];
 * a rule with its ports in another order is the same rule.
 */
static void test_run_equal_repeated_rules(void **state)
{
#define RA	    "{\"ip\": \"52.94.2.1\", \"tcp\": [80, 443]}"
#define RA2	    "{\"ip\": \"52.94.2.1\", \"tcp\": [443, 80]}"
#define RB	    "{\"cidr\": \"52.195.100.0/24\", \"udp\": [53]}"
#define RC	    "{\"ip\": \"52.94.2.2\", \"tcp\": [80, 443]}"
#define ALLOW(list) ONE_RUN("", ", \"pods\": [], \"allow\": [" list "]")
	(void)state;
	assert_true(run_equal(ALLOW(RA ", " RA ", " RB), ALLOW(RB ", " RA)));
	assert_true(run_equal(ALLOW(RA ", " RA ", " RB), ALLOW(RA ", " RB ", " RB)));
	assert_true(run_equal(ALLOW(RA ", " RB), ALLOW(RB ", " RA2)));
	assert_true(run_equal(ALLOW(RA ", " RA2), ALLOW(RA)));
	assert_true(run_equal(ALLOW(""), ALLOW("")));
	assert_false(run_equal(ALLOW(RA ", " RA), ALLOW(RA ", " RB)));
	assert_false(run_equal(ALLOW(RA ", " RB ", " RA), ALLOW(RA ", " RB ", " RC)));
	assert_false(run_equal(ALLOW(RA), ALLOW("")));
	assert_false(run_equal(ALLOW(RA ", " RB), ALLOW(RB ", " RC)));
#undef RA
#undef RA2
#undef RB
#undef RC
#undef ALLOW
}

/* A run of 65 536 rules compared with the same rules reversed (and with one rule changed): the
 * pairwise comparison took seconds of the agent's loop for this; the sorted one is immediate.
 */
static void test_run_equal_many_rules(void **state)
{
	enum { N = 65536 };
	struct rw_policy p = {.egress = RW_EGRESS_ALLOWLIST};
	struct rw_policy_run ra = {.id = "a", .egress = -1}, rb = ra;
	struct rw_policy_rule *a = calloc(N, sizeof(*a)), *b = calloc(N, sizeof(*b));
	__u16 ports[2] = {443, 80}, rports[2] = {80, 443};

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	for (size_t i = 0; i < N; i++) {
		a[i].addr = htonl(0x34000000u + (__u32)i);
		a[i].prefixlen = 32;
		a[i].tcp = ports;
		a[i].n_tcp = 2;
		b[N - 1 - i] = a[i];
		b[N - 1 - i].tcp = rports;
	}
	ra.allow = a;
	ra.n_allow = N;
	rb.allow = b;
	rb.n_allow = N;
	assert_true(rw_policy_run_equal(&p, &ra, &p, &rb));
	assert_true(rw_policy_run_equal(&p, &rb, &p, &ra));
	b[N / 2].addr = htonl(0x35000000u);
	assert_false(rw_policy_run_equal(&p, &ra, &p, &rb));
	assert_false(rw_policy_run_equal(&p, &rb, &p, &ra));
	/* a repeat in place of the changed rule: one rule of a is missing from b */
	b[N / 2] = b[N / 2 + 1];
	assert_false(rw_policy_run_equal(&p, &ra, &p, &rb));
	free(a);
	free(b);
}

static const char example_next[] =
	"{\n"
	"  \"revision\": 13,\n"
	"  \"deny\": [\"10.0.0.0/16\", \"192.168.0.0/16\"],\n"
	"  \"services\": [\n"
	"    {\"name\": \"egress-proxy\",    \"ip\": \"172.20.0.10\", \"tcp\": [3128, 443]},\n"
	"    {\"name\": \"identity-broker\", \"ip\": \"172.20.0.21\", \"tcp\": [3443]},\n"
	"    {\"name\": \"app-tier\",        \"ip\": \"172.20.0.12\", \"tcp\": [3000]},\n"
	"    {\"name\": \"cache\",           \"cidr\": \"172.20.1.0/24\", \"udp\": [11211]}\n"
	"  ],\n"
	"  \"inbound\": [\n"
	"    {\"name\": \"app-tier\", \"cidr\": \"172.20.0.12/32\", \"tcp\": [6085, 4999, 4098, 4096]}\n"
	"  ],\n"
	"  \"runs\": [\n"
	"    {\"id\": \"run-9c01\", \"pods\": [\"10.1.2.5\", \"10.1.2.4\"], \"egress\": \"allowlist\",\n"
	"     \"allow\": [{\"cidr\": \"52.194.9.0/24\", \"tcp\": [5432], \"udp\": []}]},\n"
	"    {\"id\": \"run-b2b2\", \"pods\": [\"10.1.2.6\", \"10.1.2.7\"]}\n"
	"  ]\n"
	"}\n";

/* The live view's names for the built-in ranges: metadata before link-local, the most specific
 * range, nothing for a public address.
 */
static void test_builtin_label(void **state)
{
	static const struct {
		const char *ip, *label;
	} cases[] = {
		{"169.254.169.254", "metadata"}, {"169.254.170.2", "metadata"},
		{"169.254.1.1", "link-local"},	 {"10.0.5.5", "private"},
		{"172.20.0.53", "private"},	 {"192.168.1.1", "private"},
		{"100.64.0.1", "CGNAT"},	 {"127.0.0.1", "loopback"},
		{"224.0.0.251", "multicast"},	 {"255.255.255.255", "broadcast"},
		{"93.184.216.34", NULL},	 {"52.94.9.5", NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct in_addr a;
		const char *got;

		assert_int_equal(inet_pton(AF_INET, cases[i].ip, &a), 1);
		got = rw_builtin_label(a.s_addr);
		if (!cases[i].label)
			assert_null(got);
		else
			assert_string_equal(got, cases[i].label);
	}
}

static void test_diff(void **state)
{
	struct rw_policy a, b;
	char buf[2048], small[16];
	int n;

	parse_ok(example, &a);
	parse_ok(example_next, &b);

	n = rw_policy_diff(NULL, &a, buf, sizeof(buf));
	assert_string_equal(buf, "+ deny 10.0.0.0/16\n"
				 "+ deny 100.64.0.0/16\n"
				 "+ service egress-proxy (172.20.0.10 tcp 443,8443,3128)\n"
				 "+ service identity-broker (172.20.0.11 tcp 3443)\n"
				 "+ service app-tier (172.20.0.12 tcp 3000)\n"
				 "+ service drive-gateway (172.20.0.13 tcp 8080)\n"
				 "+ inbound app-tier (172.20.0.12 tcp 4096,4098,4999,6085)\n"
				 "+ run run-7f3a (1 pod)\n"
				 "+ run run-9c01 (1 pod, egress open, 1 allow rule)\n");
	assert_int_equal(n, 9);

	n = rw_policy_diff(&a, &a, buf, sizeof(buf));
	assert_string_equal(buf, "");
	assert_int_equal(n, 0);

	n = rw_policy_diff(&a, &b, buf, sizeof(buf));
	assert_string_equal(buf, "- deny 100.64.0.0/16\n"
				 "+ deny 192.168.0.0/16\n"
				 "~ service egress-proxy: tcp 443,8443,3128 -> 3128,443\n"
				 "~ service identity-broker: 172.20.0.11 -> 172.20.0.21\n"
				 "- service drive-gateway\n"
				 "+ service cache (172.20.1.0/24 udp 11211)\n"
				 "- run run-7f3a\n"
				 "~ run run-9c01: egress open -> allowlist; pods +10.1.2.5\n"
				 "+ run run-b2b2 (2 pods)\n");
	assert_int_equal(n, 9);

	n = rw_policy_diff(&b, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "- deny 10.0.0.0/16\n"
				 "- deny 192.168.0.0/16\n"
				 "- service egress-proxy\n"
				 "- service identity-broker\n"
				 "- service app-tier\n"
				 "- service cache\n"
				 "- inbound app-tier\n"
				 "- run run-9c01\n"
				 "- run run-b2b2\n");
	assert_int_equal(n, 9);

	/* a short buffer keeps a NUL-terminated prefix; the count is unaffected */
	n = rw_policy_diff(&a, &b, small, sizeof(small));
	assert_string_equal(small, "- deny 100.64.0");
	assert_int_equal(n, 9);
	assert_int_equal(rw_policy_diff(&a, &b, NULL, 0), 9);

	rw_policy_free(&a);
	rw_policy_free(&b);
}

/* The node's egress changes the runs that inherit it, and only those. */
static void test_diff_node_egress(void **state)
{
	struct rw_policy a, b;
	char buf[512];
	int n;

	parse_ok("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.0.0.1\"]}, "
		 "{\"id\": \"b\", \"pods\": [\"10.0.0.2\"], \"egress\": \"open\"}, "
		 "{\"id\": \"c\", \"pods\": [\"10.0.0.3\"], \"allow\": [{\"ip\": \"52.94.2.1\", "
		 "\"tcp\": [80]}]}]}",
		 &a);
	parse_ok(
		"{\"revision\": 2, \"egress\": \"open\", \"runs\": [{\"id\": \"a\", \"pods\": "
		"[\"10.0.0.1\"]}, {\"id\": \"b\", \"pods\": [\"10.0.0.2\"], \"egress\": \"open\"}, "
		"{\"id\": \"c\", \"pods\": [\"10.0.0.4\"], \"egress\": \"allowlist\", \"allow\": "
		"[{\"ip\": \"52.94.2.1\", \"tcp\": [81]}]}]}",
		&b);
	n = rw_policy_diff(&a, &b, buf, sizeof(buf));
	assert_string_equal(buf,
			    "~ egress allowlist -> open\n"
			    "~ run a: egress allowlist -> open\n"
			    "~ run c: pods +10.0.0.4 -10.0.0.3; allow rules changed (1 -> 1)\n");
	assert_int_equal(n, 3);
	rw_policy_free(&a);
	rw_policy_free(&b);
}

/* The node's refusal mode changes the runs that inherit it; a run's own is shown as it comes. */
static void test_diff_refusal(void **state)
{
	struct rw_policy a, b;
	char buf[512];
	int n;

	(void)state;
	parse_ok("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.0.0.1\"]}, "
		 "{\"id\": \"b\", \"pods\": [\"10.0.0.2\"], \"refusal\": \"drop\"}]}",
		 &a);
	parse_ok("{\"revision\": 2, \"refusal\": \"drop\", \"runs\": [{\"id\": \"a\", \"pods\": "
		 "[\"10.0.0.1\"]}, {\"id\": \"b\", \"pods\": [\"10.0.0.2\"], \"refusal\": "
		 "\"drop\"}, {\"id\": \"c\", \"pods\": [], \"refusal\": \"answer\"}]}",
		 &b);
	n = rw_policy_diff(&a, &b, buf, sizeof(buf));
	assert_string_equal(buf, "~ refusal answer -> drop\n"
				 "~ run a: refusal answer -> drop\n"
				 "+ run c (0 pods, refusal answer)\n");
	assert_int_equal(n, 3);
	assert_false(rw_policy_run_equal(&a, &a.runs[0], &b, &b.runs[0]));
	assert_true(rw_policy_run_equal(&a, &a.runs[1], &b, &b.runs[1]));
	rw_policy_free(&a);
	rw_policy_free(&b);
}

/* ---- IPv6 --------------------------------------------------------------------------------- */

static void addr6(const char *text, __be32 out[4])
{
	assert_int_equal(inet_pton(AF_INET6, text, out), 1);
}

#define assert_addr6(got, text)                                 \
	do {                                                    \
		__be32 _want[4];                                \
		addr6(text, _want);                             \
		assert_memory_equal(got, _want, sizeof(_want)); \
	} while (0)

/* IPv6 everywhere IPv4 is: services (ip, cidr), inbound, deny, runs' pods (mixed with IPv4 ones,
 * each family in its own array, where they were written kept) and allow rules.
 */
static void test_ipv6_accepted(void **state)
{
	static const char json[] =
		"{\"revision\": 3, \"deny\": [\"10.0.0.0/8\", \"fd00::/8\", \"2600:1f18:1234::/48\"],\n"
		" \"services\": [{\"name\": \"proxy\", \"ip\": \"2600:1F18::10\", \"tcp\": [443]},\n"
		"  {\"name\": \"ula\", \"cidr\": \"fd12:3456::/32\", \"udp\": [53]},\n"
		"  {\"name\": \"lo\", \"ip\": \"::1\", \"tcp\": [80]},\n"
		"  {\"name\": \"v4\", \"ip\": \"172.20.0.10\", \"tcp\": [443]}],\n"
		" \"inbound\": [{\"name\": \"app\", \"cidr\": \"fd12:3456:1::/48\", \"tcp\": [4096]},\n"
		"  {\"name\": \"one\", \"ip\": \"2600:1f18::12\", \"tcp\": [4098]}],\n"
		" \"runs\": [{\"id\": \"a\", \"pods\": [\"10.1.2.3\", \"2600:1f18:abcd::7\", "
		"\"10.1.2.4\", \"fd01::3\"],\n"
		"  \"allow\": [{\"ip\": \"2a00:1450:4001:0:0:0:0:1\", \"tcp\": [443]}, "
		"{\"cidr\": \"2a00:1450::/32\", \"udp\": [53]}, {\"ip\": \"2600::1.2.3.4\", \"tcp\": [80]},"
		" {\"ip\": \"52.94.2.1\", \"tcp\": [80]}]},\n"
		"  {\"id\": \"b\", \"pods\": [\"2001:db8::5\"]}]}";
	struct rw_policy p;
	const struct rw_policy_run *r;

	(void)state;
	parse_ok(json, &p);
	assert_int_equal(p.n_deny, 3);
	assert_int_equal(p.deny[0].family, AF_INET);
	assert_int_equal(p.deny[1].family, AF_INET6);
	assert_addr6(p.deny[1].addr6, "fd00::");
	assert_int_equal(p.deny[1].prefixlen, 8);
	assert_int_equal(p.deny[1].addr, 0);
	assert_addr6(p.deny[2].addr6, "2600:1f18:1234::");
	assert_int_equal(p.deny[2].prefixlen, 48);

	assert_int_equal(p.n_services, 4);
	assert_int_equal(p.services[0].family, AF_INET6);
	assert_true(rw_policy_rule_is6(&p.services[0]));
	assert_addr6(p.services[0].addr6, "2600:1f18::10");
	assert_int_equal(p.services[0].prefixlen, 128);
	assert_int_equal(p.services[0].addr, 0);
	assert_addr6(p.services[1].addr6, "fd12:3456::");
	assert_int_equal(p.services[1].prefixlen, 32);
	assert_addr6(p.services[2].addr6, "::1");
	assert_int_equal(p.services[3].family, AF_INET);
	assert_false(rw_policy_rule_is6(&p.services[3]));
	assert_int_equal(p.services[3].prefixlen, 32);

	assert_int_equal(p.n_inbound, 2);
	assert_addr6(p.inbound[0].addr6, "fd12:3456:1::");
	assert_int_equal(p.inbound[0].prefixlen, 48);
	assert_int_equal(p.inbound[1].prefixlen, 128);

	r = &p.runs[0];
	assert_int_equal(r->n_pods, 2);
	assert_int_equal(r->pods[0], htonl(0x0a010203));
	assert_int_equal(r->pods[1], htonl(0x0a010204));
	assert_int_equal(r->n_pods6, 2);
	assert_addr6(r->pods6[0], "2600:1f18:abcd::7");
	assert_addr6(r->pods6[1], "fd01::3");
	assert_int_equal(r->pods6_at[0], 1);
	assert_int_equal(r->pods6_at[1], 3);
	assert_int_equal(r->n_allow, 4);
	assert_addr6(r->allow[0].addr6, "2a00:1450:4001::1");
	assert_int_equal(r->allow[0].prefixlen, 128);
	assert_addr6(r->allow[1].addr6, "2a00:1450::");
	assert_int_equal(r->allow[1].prefixlen, 32);
	assert_addr6(r->allow[2].addr6, "2600::102:304");
	assert_int_equal(r->allow[3].family, AF_INET);
	/* an IPv6-only run holds no IPv4 array */
	assert_int_equal(p.runs[1].n_pods, 0);
	assert_null(p.runs[1].pods);
	assert_int_equal(p.runs[1].n_pods6, 1);
	assert_int_equal(p.runs[1].pods6_at[0], 0);
	rw_policy_free(&p);
}

#define NOT_A_CIDR6(s)                                   \
	"policy.json:1:26: deny[0]: \"" s "\" is not a " \
	"CIDR (an IPv6 address/n with n in 0..128)"

static void test_bad_ipv6(void **state)
{
	static const struct refusal cases[] = {
		{SERVICE_IP("\"2600:1f18::g\""),
		 "policy.json:1:50: services[0].ip: \"2600:1f18::g\" is not an IPv6 address"},
		{SERVICE_IP("\"fe80::1%eth0\""),
		 "policy.json:1:50: services[0].ip: \"fe80::1%eth0\" is not an IPv6 address"},
		{SERVICE_IP("\"[2600::1]\""),
		 "policy.json:1:50: services[0].ip: \"[2600::1]\" is not an IPv6 address"},
		{SERVICE_IP("\"1:2:3:4:5:6:7:8:9\""),
		 "policy.json:1:50: services[0].ip: \"1:2:3:4:5:6:7:8:9\" is not an IPv6 address"},
		{SERVICE_IP("\"2600::1::2\""),
		 "policy.json:1:50: services[0].ip: \"2600::1::2\" is not an IPv6 address"},
		{SERVICE_IP("\"2600::/64\""),
		 "policy.json:1:50: services[0].ip: \"2600::/64\" is not an IPv6 address (use "
		 "\"cidr\" for a range)"},
		{DENY("\"2600::/129\""), NOT_A_CIDR6("2600::/129")},
		{DENY("\"2600::/064\""), NOT_A_CIDR6("2600::/064")},
		{DENY("\"2600::/1000\""), NOT_A_CIDR6("2600::/1000")},
		{DENY("\"2600::\""), NOT_A_CIDR6("2600::")},
		{DENY("\"2600::/\""), NOT_A_CIDR6("2600::/")},
		{DENY("\"2600::/+8\""), NOT_A_CIDR6("2600::/+8")},
		{DENY("\"2600::/ 8\""), NOT_A_CIDR6("2600::/ 8")},
		/* an IPv4 CIDR keeps its own bound */
		{DENY("\"10.0.0.0/64\""), NOT_A_CIDR("10.0.0.0/64")},
		{DENY("\"2600:1f18::1/32\""), "policy.json:1:26: deny[0]: \"2600:1f18::1/32\" has "
					      "host bits set: did you mean 2600:1f18::/32?"},
		{DENY("\"fd00::1/127\""), "policy.json:1:26: deny[0]: \"fd00::1/127\" has host "
					  "bits set: did you mean fd00::/127?"},
		{DENY("\"2600:1f18:ffff::/33\""), "policy.json:1:26: deny[0]: "
						  "\"2600:1f18:ffff::/33\" has host bits set: did "
						  "you mean 2600:1f18:8000::/33?"},
	};
	struct rw_policy p;

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok(DENY("\"::/0\", \"2600::1/128\", \"2600:1f18:8000::/33\""), &p);
	assert_int_equal(p.deny[0].prefixlen, 0);
	assert_int_equal(p.deny[1].prefixlen, 128);
	rw_policy_free(&p);
}

static void test_ipv6_metadata(void **state)
{
	static const struct refusal cases[] = {
		{SERVICE_IP("\"fd00:ec2::254\""),
		 "policy.json:1:50: services[0].ip: \"fd00:ec2::254\" covers the metadata address "
		 "fd00:ec2::254"},
		{SERVICE_IP("\"fd00:ec2:0::23\""),
		 "policy.json:1:50: services[0].ip: \"fd00:ec2:0::23\" covers the metadata address "
		 "fd00:ec2::23"},
		{SERVICE_CIDR("\"fd00:ec2::/64\""),
		 "policy.json:1:52: services[0].cidr: \"fd00:ec2::/64\" covers the metadata address "
		 "fd00:ec2::254"},
		{SERVICE_CIDR("\"fd00:ec2::120/126\""),
		 "policy.json:1:52: services[0].cidr: \"fd00:ec2::120/126\" covers the metadata "
		 "address fd00:ec2::123"},
		{SERVICE_CIDR("\"::/0\""),
		 "policy.json:1:52: services[0].cidr: \"::/0\" covers the metadata address "
		 "fd00:ec2::254"},
	};

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused(
		"\"172.20.0.12/32\"", "\"fd00:ec2::20/123\"",
		"policy.json:12:34: inbound[0].cidr: \"fd00:ec2::20/123\" covers the "
		"metadata address fd00:ec2::23");
	expect_example_refused("{\"cidr\": \"52.194.9.0/24\"", "{\"ip\": \"fd00:ec2::253\"",
			       "policy.json:17:23: runs[1].allow[0].ip: \"fd00:ec2::253\" covers "
			       "the metadata address fd00:ec2::253");
	/* a neighbour is fine, and deny may cover metadata */
	expect_parses(SERVICE_IP("\"fd00:ec2::255\""));
	expect_parses(SERVICE_CIDR("\"fd00:ec2::124/126\""));
	expect_parses(DENY("\"fd00:ec2::/32\""));
}

#define EMB_TAIL                                                                               \
	" (a destination in it is judged by the IPv4 address it carries, which may refuse it " \
	"and allows it only under the snapshot's nat64 prefix)"

/* No rule of any list names an IPv6 form of an IPv4 address: the message says which IPv4 address
 * (or CIDR) to write.
 */
static void test_ipv6_embedded_forms(void **state)
{
	static const struct refusal cases[] = {
		{SERVICE_IP("\"64:ff9b::a00:506\""),
		 "policy.json:1:50: services[0].ip: \"64:ff9b::a00:506\" is the NAT64 form "
		 "(64:ff9b::/96) of 10.0.5.6: write the IPv4 address 10.0.5.6" EMB_TAIL},
		{SERVICE_IP("\"::ffff:10.0.5.6\""),
		 "policy.json:1:50: services[0].ip: \"::ffff:10.0.5.6\" is the IPv4-mapped form "
		 "(::ffff:0:0/96) of 10.0.5.6: write the IPv4 address 10.0.5.6" EMB_TAIL},
		{SERVICE_IP("\"2002:3401:203::1\""),
		 "policy.json:1:50: services[0].ip: \"2002:3401:203::1\" is the 6to4 form "
		 "(2002::/16) of 52.1.2.3: write the IPv4 address 52.1.2.3" EMB_TAIL},
		{SERVICE_IP("\"2001:0:4136:e378:8000:63bf:cbfe:fdfc\""),
		 "policy.json:1:50: services[0].ip: \"2001:0:4136:e378:8000:63bf:cbfe:fdfc\" is the "
		 "Teredo form (2001::/32) of 52.1.2.3: write the IPv4 address 52.1.2.3" EMB_TAIL},
		{SERVICE_CIDR("\"64:ff9b::a00:0/120\""),
		 "policy.json:1:52: services[0].cidr: \"64:ff9b::a00:0/120\" is the NAT64 form "
		 "(64:ff9b::/96) of 10.0.0.0/24: write the IPv4 CIDR 10.0.0.0/24" EMB_TAIL},
		{SERVICE_CIDR("\"2002:3401::/32\""),
		 "policy.json:1:52: services[0].cidr: \"2002:3401::/32\" is the 6to4 form "
		 "(2002::/16) of 52.1.0.0/16: write the IPv4 CIDR 52.1.0.0/16" EMB_TAIL},
		{DENY("\"64:ff9b::/96\""),
		 "policy.json:1:26: deny[0]: \"64:ff9b::/96\" is the NAT64 form (64:ff9b::/96) of "
		 "IPv4 addresses: write IPv4 rules instead" EMB_TAIL},
		{DENY("\"2001::/32\""),
		 "policy.json:1:26: deny[0]: \"2001::/32\" is the Teredo form (2001::/32) of IPv4 "
		 "addresses: write IPv4 rules instead" EMB_TAIL},
	};

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	expect_example_refused("\"172.20.0.12/32\"", "\"::ffff:172.20.0.0/120\"",
			       "policy.json:12:34: inbound[0].cidr: \"::ffff:172.20.0.0/120\" is "
			       "the IPv4-mapped form (::ffff:0:0/96) of 172.20.0.0/24: write the "
			       "IPv4 CIDR 172.20.0.0/24" EMB_TAIL);
	expect_example_refused("{\"cidr\": \"52.194.9.0/24\"", "{\"ip\": \"64:ff9b::3401:203\"",
			       "policy.json:17:23: runs[1].allow[0].ip: \"64:ff9b::3401:203\" is "
			       "the NAT64 form (64:ff9b::/96) of 52.1.2.3: write the IPv4 address "
			       "52.1.2.3" EMB_TAIL);
	/* A wider CIDR that holds a form is a run rule's overlap (below), not a service's. */
	expect_parses(SERVICE_CIDR("\"2000::/3\""));
	/* the neighbours of the forms */
	expect_parses(SERVICE_IP("\"64:ff9c::1\""));
	expect_parses(SERVICE_IP("\"::fffe:a00:506\""));
	expect_parses(SERVICE_IP("\"2001:1::1\""));
	expect_parses(SERVICE_IP("\"2003::1\""));
	/* 64:ff9b:1::/48 is a special range, not a form: a service may name it, as any private
	 * address (a run rule may not: test_ipv6_run_rules_public_only)
	 */
	expect_parses(SERVICE_IP("\"64:ff9b:1:3401:2:300::\""));
}

#define RUN6_RULE(rule)                                                                           \
	"{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"2600::7\"], \"allow\": [" rule \
	"]}]}"
/* The rule's address is at column 76 ("ip") or 78 ("cidr"). */
#define RUN6_AT(key, col) "policy.json:1:" #col ": runs[0].allow[0]." key ": "

static void test_ipv6_run_rules_public_only(void **state)
{
	static const struct refusal cases[] = {
		{RUN6_RULE("{\"ip\": \"fd00::5\", \"tcp\": [443]}"),
		 RUN6_AT("ip", 76) "\"fd00::5\" overlaps fc00::/7, a private or special-purpose "
				   "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"cidr\": \"fe80::/64\", \"tcp\": [443]}"),
		 RUN6_AT("cidr",
			 78) "\"fe80::/64\" overlaps fe80::/10, a private or special-purpose "
			     "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"2001:db8::1\", \"tcp\": [443]}"),
		 RUN6_AT("ip", 76) "\"2001:db8::1\" overlaps 2001:db8::/32, a private or "
				   "special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"ff02::1\", \"udp\": [5353]}"),
		 RUN6_AT("ip", 76) "\"ff02::1\" overlaps ff00::/8, a private or special-purpose "
				   "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"::1\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"::1\" overlaps ::/96, a private or special-purpose "
				   "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"::\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"::\" overlaps ::/96, a private or special-purpose "
				   "range" RUN_RULE_TAIL},
		/* IPv4-compatible (deprecated): no form of IPv4, a special range */
		{RUN6_RULE("{\"ip\": \"::a9fe:a9fe\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"::a9fe:a9fe\" overlaps ::/96, a private or special-purpose "
				   "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"::ffff:0:808:808\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"::ffff:0:808:808\" overlaps ::ffff:0:0:0/96, a private or "
				   "special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"64:ff9b:1:808:8:800:a9fe:a9fe\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"64:ff9b:1:808:8:800:a9fe:a9fe\" overlaps 64:ff9b:1::/48, a "
				   "private or special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"cidr\": \"64:ff9b:1:ff00::/56\", \"tcp\": [80]}"),
		 RUN6_AT("cidr",
			 78) "\"64:ff9b:1:ff00::/56\" overlaps 64:ff9b:1::/48, a private or "
			     "special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"2001:2::1\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"2001:2::1\" overlaps 2001:2::/48, a private or "
				   "special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"cidr\": \"3fff:fff::/32\", \"tcp\": [80]}"),
		 RUN6_AT("cidr", 78) "\"3fff:fff::/32\" overlaps 3fff::/20, a private or "
				     "special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"fec0::1\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"fec0::1\" overlaps fec0::/10, a private or special-purpose "
				   "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"ip\": \"5f00:1:2::3\", \"tcp\": [80]}"),
		 RUN6_AT("ip", 76) "\"5f00:1:2::3\" overlaps 5f00::/16, a private or "
				   "special-purpose range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"cidr\": \"100::/64\", \"tcp\": [80]}"),
		 RUN6_AT("cidr", 78) "\"100::/64\" overlaps 100::/64, a private or special-purpose "
				     "range" RUN_RULE_TAIL},
		{RUN6_RULE("{\"cidr\": \"2000::/3\", \"tcp\": [80]}"),
		 RUN6_AT("cidr", 78) "\"2000::/3\" overlaps 2001:db8::/32, a private or "
				     "special-purpose range" RUN_RULE_TAIL},
		/* wider than a form: refused for holding it */
		{RUN6_RULE("{\"cidr\": \"2002::/15\", \"tcp\": [80]}"),
		 RUN6_AT("cidr", 78) "\"2002::/15\" overlaps 2002::/16, a range of IPv6 forms of "
				     "IPv4 addresses (write IPv4 rules for those)" RUN_RULE_TAIL},
		{RUN6_RULE("{\"cidr\": \"2001::/31\", \"tcp\": [80]}"),
		 RUN6_AT("cidr", 78) "\"2001::/31\" overlaps 2001::/32, a range of IPv6 forms of "
				     "IPv4 addresses (write IPv4 rules for those)" RUN_RULE_TAIL},
		/* the IPv6 deny list, named */
		{"{\"revision\": 1, \"deny\": [\"52.0.0.0/8\", \"2600:1f18::/32\"], \"runs\": [{\"id\": "
		 "\"a\", \"pods\": [\"2600::7\"], \"allow\": [{\"cidr\": \"2600:1f18:5::/48\", \"tcp\": "
		 "[443]}]}]}",
		 "policy.json:1:120: runs[0].allow[0].cidr: \"2600:1f18:5::/48\" overlaps "
		 "2600:1f18::/32 (deny[1]), denied by the snapshot" RUN_RULE_TAIL},
	};
	struct rw_policy p;

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	/* public, and neither family's deny list touches the other's rules */
	parse_ok(
		"{\"revision\": 1, \"deny\": [\"52.0.0.0/8\", \"2600:1f18::/32\"], \"runs\": "
		"[{\"id\": \"a\", \"pods\": [\"2600::7\"], \"allow\": [{\"cidr\": "
		"\"2a00:1450:4001::/48\", \"tcp\": [443]}, {\"ip\": \"53.1.2.3\", \"tcp\": [443]}, "
		"{\"cidr\": \"2003::/16\", \"tcp\": [443]}]}]}",
		&p);
	assert_int_equal(p.runs[0].n_allow, 3);
	rw_policy_free(&p);
	expect_parses(
		"{\"revision\": 1, \"deny\": [\"::/0\"], \"runs\": [{\"id\": \"a\", \"pods\": [], "
		"\"allow\": [{\"ip\": \"52.1.2.3\", \"tcp\": [443]}]}]}");
}

static void test_ipv6_pod_addresses(void **state)
{
	static const struct refusal cases[] = {
		{RUN_PODS("\"::\""),
		 "policy.json:1:47: runs[0].pods[0]: \"::\" is not a pod address: the unspecified "
		 "address (::)"},
		{RUN_PODS("\"::1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"::1\" is not a pod address: the loopback "
		 "address (::1)"},
		{RUN_PODS("\"10.1.2.3\", \"fe80::1\""),
		 "policy.json:1:59: runs[0].pods[1]: \"fe80::1\" is not a pod address: a link-local "
		 "address (fe80::/10)"},
		{RUN_PODS("\"febf:ffff::1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"febf:ffff::1\" is not a pod address: a "
		 "link-local address (fe80::/10)"},
		{RUN_PODS("\"ff02::1:ff00:7\""),
		 "policy.json:1:47: runs[0].pods[0]: \"ff02::1:ff00:7\" is not a pod address: a "
		 "multicast address (ff00::/8)"},
		{RUN_PODS("\"fd00:ec2::254\""),
		 "policy.json:1:47: runs[0].pods[0]: \"fd00:ec2::254\" is not a pod address: a "
		 "metadata address"},
		{RUN_PODS("\"::ffff:10.1.2.3\""),
		 "policy.json:1:47: runs[0].pods[0]: \"::ffff:10.1.2.3\" is not a pod address: the "
		 "IPv4-mapped form (::ffff:0:0/96) of 10.1.2.3 (write the IPv4 address 10.1.2.3)"},
		{RUN_PODS("\"64:ff9b::a01:203\""),
		 "policy.json:1:47: runs[0].pods[0]: \"64:ff9b::a01:203\" is not a pod address: the "
		 "NAT64 form (64:ff9b::/96) of 10.1.2.3 (write the IPv4 address 10.1.2.3)"},
		{RUN_PODS("\"2002:a01:203::1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"2002:a01:203::1\" is not a pod address: the "
		 "6to4 form (2002::/16) of 10.1.2.3 (write the IPv4 address 10.1.2.3)"},
		{RUN_PODS("\"100::1\""),
		 "policy.json:1:47: runs[0].pods[0]: \"100::1\" is not a pod address: not a "
		 "global unicast (2000::/3) or unique local (fc00::/7) address"},
		{RUN_PODS("\"::10.1.2.3\""),
		 "policy.json:1:47: runs[0].pods[0]: \"::10.1.2.3\" is not a pod address: not a "
		 "global unicast (2000::/3) or unique local (fc00::/7) address"},
		{RUN_PODS("\"2600::7/128\""),
		 "policy.json:1:47: runs[0].pods[0]: \"2600::7/128\" is not an IPv6 address"},
		{RUN_PODS("\"2600::7::\""),
		 "policy.json:1:47: runs[0].pods[0]: \"2600::7::\" is not an IPv6 address"},
	};
	struct rw_policy p;

	(void)state;
	expect_all_refused(cases, ARRAY_LEN(cases));
	parse_ok(RUN_PODS("\"2001:db8::5\", \"fd00::1\", \"fc00::1\", \"2600:1f18::1\", "
			  "\"3fff:ffff::1\", \"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff\", "
			  "\"fd00:ec2::255\""),
		 &p);
	assert_int_equal(p.runs[0].n_pods, 0);
	assert_int_equal(p.runs[0].n_pods6, 7);
	rw_policy_free(&p);
}

/* Pods are unique across runs within each family, named where they were written. */
static void test_ipv6_duplicate_pod(void **state)
{

	(void)state;
	expect_refused(RUN_PODS("\"2600::1\", \"10.0.0.1\", \"2600:0::1\""),
		       "policy.json:1:70: runs[0].pods[2]: pod 2600::1 is already listed at "
		       "runs[0].pods[0] (run a)");
	expect_refused("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.0.0.1\", "
		       "\"2600::5\"]}, {\"id\": \"b\", \"pods\": [\"10.0.0.9\", \"2600::7\", "
		       "\"2600::5\"]}]}",
		       "policy.json:1:116: runs[1].pods[2]: pod 2600::5 is already listed at "
		       "runs[0].pods[1] (run a)");
	/* the first repeat in the text, whatever its family */
	expect_refused("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"2600::5\", "
		       "\"10.0.0.1\"]}, {\"id\": \"b\", \"pods\": [\"10.0.0.1\", \"2600::5\"]}]}",
		       "policy.json:1:93: runs[1].pods[0]: pod 10.0.0.1 is already listed at "
		       "runs[0].pods[1] (run a)");
	/* one pod's two addresses, and two pods of two runs */
	expect_parses("{\"revision\": 1, \"runs\": [{\"id\": \"a\", \"pods\": [\"10.0.0.1\", "
		      "\"2600::5\"]}, {\"id\": \"b\", \"pods\": [\"10.0.0.2\", \"2600::6\"]}]}");
}

/* The bounds of the lists (rule ids) count both families. */
static void test_ipv6_rule_id_limits(void **state)
{
	size_t cap = 256 + (RW_RULE_MAX_A + 1) * 80, len = 0;
	struct rw_policy_error err;
	struct rw_policy p;
	char *s = malloc(cap);

	(void)state;
	assert_non_null(s);
	len += snprintf(s + len, cap - len, "{\"revision\": 1, \"services\": [");
	for (size_t i = 0; i < RW_RULE_MAX_A + 1; i++)
		len += snprintf(
			s + len, cap - len,
			i % 2 ? "%s{\"name\": \"s%zu\", \"ip\": \"2600::%zx\", \"tcp\": [443]}"
			      : "%s{\"name\": \"s%zu\", \"ip\": \"52.0.%zu.1\", \"tcp\": [443]}",
			i ? ", " : "", i, i % 2 ? i : i % 256);
	snprintf(s + len, cap - len, "]}");
	assert_int_equal(rw_policy_parse(s, strlen(s), "policy.json", &p, &err), -EINVAL);
	assert_string_equal(err.text, "policy.json:1:29: services: 4097 entries: at most 4096 fit "
				      "in a rule id");
	/* one fewer fits */
	*strrchr(s, '{') = '\0';
	strcpy(strrchr(s, ','), "]}");
	parse_ok(s, &p);
	assert_int_equal(p.n_services, RW_RULE_MAX_A);
	assert_true(rw_policy_rule_is6(&p.services[RW_RULE_MAX_A - 1]));
	rw_policy_free(&p);
	free(s);
}

#define R6                                                                                  \
	", \"pods\": [\"10.0.0.1\", \"2600::1\", \"2600::2\"], \"allow\": ["                \
	"{\"ip\": \"2a00:1450::1\", \"tcp\": [80, 443]}, {\"cidr\": \"2a00:1450:1::/48\", " \
	"\"udp\": [53]}]"

/* A run's IPv6 parts count in its digest, its equality and the diff. */
static void test_ipv6_run_equal_digest_diff(void **state)
{
	static const char *const changed[] = {
		/* an IPv6 pod */
		", \"pods\": [\"10.0.0.1\", \"2600::1\", \"2600::3\"], \"allow\": ["
		"{\"ip\": \"2a00:1450::1\", \"tcp\": [80, 443]}, {\"cidr\": \"2a00:1450:1::/48\", "
		"\"udp\": [53]}]",
		/* an IPv6 rule's address, its prefix length */
		", \"pods\": [\"10.0.0.1\", \"2600::1\", \"2600::2\"], \"allow\": ["
		"{\"ip\": \"2a00:1450::2\", \"tcp\": [80, 443]}, {\"cidr\": \"2a00:1450:1::/48\", "
		"\"udp\": [53]}]",
		", \"pods\": [\"10.0.0.1\", \"2600::1\", \"2600::2\"], \"allow\": ["
		"{\"ip\": \"2a00:1450::1\", \"tcp\": [80, 443]}, {\"cidr\": \"2a00:1450::/47\", "
		"\"udp\": [53]}]",
		/* the same bits in IPv4 */
		", \"pods\": [\"10.0.0.1\", \"2600::1\", \"2600::2\"], \"allow\": ["
		"{\"ip\": \"42.0.20.80\", \"tcp\": [80, 443]}, {\"cidr\": \"2a00:1450:1::/48\", "
		"\"udp\": [53]}]",
	};
	struct rw_policy a, b;
	char buf[1024];

	(void)state;
	/* the same, in another order */
	assert_true(run_equal(
		ONE_RUN("", R6),
		ONE_RUN("", ", \"pods\": [\"2600::2\", \"10.0.0.1\", \"2600::1\"], \"allow\": ["
			    "{\"cidr\": \"2a00:1450:1::/48\", \"udp\": [53]}, {\"ip\": "
			    "\"2a00:1450:0::1\", \"tcp\": [443, 80]}]")));
	for (size_t i = 0; i < ARRAY_LEN(changed); i++) {
		char json[1024];

		snprintf(json, sizeof(json), ONE_RUN("", "%s"), changed[i]);
		parse_ok(ONE_RUN("", R6), &a);
		parse_ok(json, &b);
		if (rw_policy_run_equal(&a, &a.runs[0], &b, &b.runs[0]))
			fail_msg("change %zu: equal", i);
		if (!memcmp(a.runs[0].digest, b.runs[0].digest, sizeof(a.runs[0].digest)))
			fail_msg("change %zu: the same digest", i);
		rw_policy_free(&a);
		rw_policy_free(&b);
	}

	parse_ok("{\"revision\": 1, \"deny\": [\"fd00::/8\"], \"services\": [{\"name\": \"p\", "
		 "\"ip\": \"2600:1f18::10\", \"tcp\": [443]}], \"runs\": [{\"id\": \"a\"" R6 "}]}",
		 &a);
	parse_ok(
		"{\"revision\": 2, \"deny\": [\"fd00::/16\"], \"services\": [{\"name\": \"p\", "
		"\"cidr\": \"2600:1f18::/64\", \"tcp\": [443]}], \"runs\": [{\"id\": \"a\", \"pods\": "
		"[\"10.0.0.1\", \"2600::1\", \"2600::3\"]}, {\"id\": \"b\", \"pods\": "
		"[\"2600::9\"], \"allow\": [{\"ip\": \"2a00::1\", \"tcp\": [1]}]}]}",
		&b);
	assert_int_equal(rw_policy_diff(&a, &b, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "- deny fd00::/8\n"
				 "+ deny fd00::/16\n"
				 "~ service p: 2600:1f18::10 -> 2600:1f18::/64\n"
				 "~ run a: pods +2600::3 -2600::2; allow rules changed (2 -> 0)\n"
				 "+ run b (1 pod, 1 allow rule)\n");
	rw_policy_free(&a);
	rw_policy_free(&b);
}

static void test_builtin_label6(void **state)
{
	static const struct {
		const char *ip, *label;
	} cases[] = {
		{"fd00:ec2::254", "metadata"},
		{"fd00:ec2::1", "unique local"},
		{"fe80::1", "link-local"},
		{"ff02::1", "multicast"},
		{"::1", "unspecified, loopback, IPv4-compatible"},
		{"::", "unspecified, loopback, IPv4-compatible"},
		{"::a9fe:a9fe", "unspecified, loopback, IPv4-compatible"},
		{"::ffff:0:a9fe:a9fe", "IPv4-translated"},
		{"2001:2::1", "benchmarking"},
		{"3fff::1", "documentation"},
		{"fec0::1", "site-local"},
		{"5f00::1", "SRv6 SIDs"},
		{"2001:db8::1", "documentation"},
		{"64:ff9b::a00:1", "NAT64"},
		{"64:ff9b:1::1", "local NAT64"},
		{"64:ff9b:1:808:8:800:a9fe:a9fe", "local NAT64"},
		{"::ffff:1.2.3.4", "IPv4-mapped"},
		{"2002::1", "6to4"},
		{"2001::1", "Teredo"},
		{"2600:1f18::1", NULL},
		{"2a00:1450::1", NULL},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		__be32 a[4];
		const char *got;

		addr6(cases[i].ip, a);
		got = rw_builtin_label6(a);
		if (!cases[i].label) {
			if (got)
				fail_msg("%s: %s", cases[i].ip, got);
		} else {
			if (!got || strcmp(got, cases[i].label))
				fail_msg("%s: %s, not %s", cases[i].ip, got ? got : "NULL",
					 cases[i].label);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_example_parses),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_missing_revision),
		cmocka_unit_test(test_revision_range),
		cmocka_unit_test(test_revision_not_newer),
		cmocka_unit_test(test_parse_json),
		cmocka_unit_test(test_ports_edge_cases),
		cmocka_unit_test(test_duplicate_port),
		cmocka_unit_test(test_rule_without_port),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_missing_keys),
		cmocka_unit_test(test_ip_and_cidr),
		cmocka_unit_test(test_bad_ipv4),
		cmocka_unit_test(test_bad_cidr),
		cmocka_unit_test(test_cidr_host_bits),
		cmocka_unit_test(test_metadata_coverage),
		cmocka_unit_test(test_pod_addresses),
		cmocka_unit_test(test_run_rules_public_only),
		cmocka_unit_test(test_rule_id_limits),
		cmocka_unit_test(test_duplicate_pod),
		cmocka_unit_test(test_duplicate_run_id),
		cmocka_unit_test(test_run_ids_and_names),
		cmocka_unit_test(test_egress_values),
		cmocka_unit_test(test_refusal_values),
		cmocka_unit_test(test_lease_seconds),
		cmocka_unit_test(test_nat64),
		cmocka_unit_test(test_diff_refusal),
		cmocka_unit_test(test_ipv6_accepted),
		cmocka_unit_test(test_bad_ipv6),
		cmocka_unit_test(test_ipv6_metadata),
		cmocka_unit_test(test_ipv6_embedded_forms),
		cmocka_unit_test(test_ipv6_run_rules_public_only),
		cmocka_unit_test(test_ipv6_pod_addresses),
		cmocka_unit_test(test_ipv6_duplicate_pod),
		cmocka_unit_test(test_ipv6_rule_id_limits),
		cmocka_unit_test(test_ipv6_run_equal_digest_diff),
		cmocka_unit_test(test_builtin_label6),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_error_positions),
		cmocka_unit_test(test_parse_file),
		cmocka_unit_test(test_parse_file_size_limit),
		cmocka_unit_test(test_parse_stdin),
		cmocka_unit_test(test_run_equal),
		cmocka_unit_test(test_run_digest),
		cmocka_unit_test(test_run_equal_long_port_lists),
		cmocka_unit_test(test_run_equal_repeated_rules),
		cmocka_unit_test(test_run_equal_many_rules),
		cmocka_unit_test(test_builtin_label),
		cmocka_unit_test(test_from),
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_diff_node_egress),
	};

	return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
