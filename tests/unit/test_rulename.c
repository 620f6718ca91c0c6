// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_rulename.c: rw_event_rule_name() on crafted events against a parsed snapshot: allowed
 * services, run and inbound rules with their text; each refusal's built-in entry, IPv4 and IPv6,
 * the forms that carry an IPv4 address and a declared nat64; the deny list, the more specific
 * entry first; a pod's /64 and the snapshot's pods; the fixed text of every other reason and
 * allow path; and an event of another revision named by position, "not in force".
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "ipaddr.h"
#include "reasons.h"
#include "rulename.h"

static const char snap[] =
	"{\"revision\": 7, \"egress\": \"allowlist\", \"nat64\": \"64:ff9b::/96\",\n"
	" \"deny\": [\"10.0.0.0/16\", \"52.94.0.0/16\", \"2600:1f14:dead::/48\", \"10.0.0.0/8\"],\n"
	" \"services\": [{\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443, 3128]},\n"
	"  {\"name\": \"model6\", \"cidr\": \"2600:1f14:200::/64\", \"tcp\": [443]}],\n"
	" \"inbound\": [{\"name\": \"streaming\", \"cidr\": \"172.20.0.0/24\", \"tcp\": [8080]}],\n"
	" \"runs\": [{\"id\": \"run-a\", \"pods\": [\"10.1.2.3\", \"2600:1f14:abc:1::5\"]},\n"
	"  {\"id\": \"run-b\", \"pods\": [\"10.1.2.4\", \"2600:1f14:abc:2::9\"],\n"
	"   \"allow\": [{\"ip\": \"8.8.4.4\", \"udp\": [123]},\n"
	"    {\"cidr\": \"52.95.9.0/24\", \"tcp\": [5432, 5433]},\n"
	"    {\"ip\": \"2a00:1450::1\", \"tcp\": [443]}]}]}\n";

static struct rw_policy pol;

static int setup(void **state)
{
	struct rw_policy_error err;

	(void)state;
	if (rw_policy_parse(snap, strlen(snap), "snap.json", &pol, &err)) {
		fprintf(stderr, "%s\n", err.text);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rw_policy_free(&pol);
	return 0;
}

/* An event of revision 7 from pod `src` (egress) to dst:port. */
static struct rw_event event(const char *src, const char *dst, unsigned int proto,
			     unsigned int port, unsigned int reason)
{
	struct rw_event ev = {.revision = 7, .proto = proto, .reason = reason};
	struct rw_ip s, d;

	assert_int_equal(rw_ip_parse(src, &s), 0);
	assert_int_equal(rw_ip_parse(dst, &d), 0);
	rw_event_set_addrs(&ev, &s, &d);
	ev.dport = htons(port);
	ev.sport = htons(40000);
	ev.dir = RW_DIR_EGRESS;
	ev.verdict = reason == RW_REASON_ALLOWED ? RW_VERDICT_ALLOW : RW_VERDICT_DROP;
	return ev;
}

static void expect(const struct rw_event *ev, const struct rw_policy *p, const char *want)
{
	char got[RW_RULE_NAME_LEN];

	rw_event_rule_name(ev, p, got, sizeof(got));
	assert_string_equal(got, want);
}

/* One event of revision 7 and what rw_event_rule_name() calls its rule. */
struct named_case {
	const char *src, *dst;
	unsigned int proto, port, reason, dir, path, rule_id;
	const char *want;
};

static void expect_cases(const struct named_case *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rw_event ev = event(t[i].src, t[i].dst, t[i].proto, t[i].port, t[i].reason);

		ev.dir = t[i].dir;
		ev.path = t[i].path;
		ev.rule_id = t[i].rule_id;
		expect(&ev, &pol, t[i].want);
	}
}

static void allowed(void **state)
{
	/* The first by the path of a rule; the others with no path, by the rule id alone. */
	static const struct named_case t[] = {
		{"10.1.2.4", "172.20.0.10", IPPROTO_TCP, 3128, 0, RW_DIR_EGRESS, RW_PATH_RULE,
		 RW_RULE_ID(RW_RULE_KIND_SERVICE, 0, 0), "egress-proxy 172.20.0.10 tcp/3128"},
		{"2600:1f14:abc:2::9", "2600:1f14:200::7", IPPROTO_TCP, 443, 0, RW_DIR_EGRESS, 0,
		 RW_RULE_ID(RW_RULE_KIND_SERVICE, 1, 0), "model6 2600:1f14:200::/64 tcp/443"},
		{"10.1.2.4", "52.95.9.5", IPPROTO_TCP, 5433, 0, RW_DIR_EGRESS, 0,
		 RW_RULE_ID(RW_RULE_KIND_RUN, 1, 1), "run-b allow[1] 52.95.9.0/24 tcp/5433"},
		{"10.1.2.4", "8.8.4.4", IPPROTO_UDP, 123, 0, RW_DIR_EGRESS, 0,
		 RW_RULE_ID(RW_RULE_KIND_RUN, 1, 0), "run-b allow[0] 8.8.4.4 udp/123"},
		{"2600:1f14:abc:2::9", "2a00:1450::1", IPPROTO_TCP, 443, 0, RW_DIR_EGRESS, 0,
		 RW_RULE_ID(RW_RULE_KIND_RUN, 1, 2), "run-b allow[2] 2a00:1450::1 tcp/443"},
		/* A port the rule has not (no datapath gives one): the rule's own ports. */
		{"10.1.2.4", "52.95.9.5", IPPROTO_TCP, 80, 0, RW_DIR_EGRESS, 0,
		 RW_RULE_ID(RW_RULE_KIND_RUN, 1, 1), "run-b allow[1] 52.95.9.0/24 tcp/5432,5433"},
		{"172.20.0.7", "10.1.2.3", IPPROTO_TCP, 8080, 0, RW_DIR_INGRESS, 0,
		 RW_RULE_ID(RW_RULE_KIND_INBOUND, 0, 0),
		 "inbound streaming 172.20.0.0/24 tcp/8080"},
	};
	struct rw_event ev = event("172.20.0.7", "10.1.2.3", IPPROTO_TCP, 8080, 0);

	(void)state;
	expect_cases(t, sizeof(t) / sizeof(t[0]));
	ev.dir = RW_DIR_INGRESS;
	/* Paths no snapshot entry names. */
	ev.rule_id = 0;
	ev.path = RW_PATH_OPEN;
	expect(&ev, &pol, "egress open: a public destination");
	ev.path = RW_PATH_ARP;
	expect(&ev, &pol, "built-in: ARP of the pod's own address");
	ev.path = RW_PATH_NDP;
	expect(&ev, &pol, "built-in: NDP on the pod's veth");
}

static void refused_builtin(void **state)
{
	static const struct {
		const char *dst, *want;
		unsigned int reason;
	} t[] = {
		{"169.254.169.254", "169.254.169.254 metadata", RW_REASON_METADATA},
		{"100.100.100.200", "100.100.100.200 metadata", RW_REASON_METADATA},
		{"169.254.1.1", "169.254.0.0/16 link-local", RW_REASON_PRIVATE_DESTINATION},
		{"192.168.4.4", "192.168.0.0/16 private", RW_REASON_PRIVATE_DESTINATION},
		{"100.64.0.1", "100.64.0.0/10 CGNAT", RW_REASON_PRIVATE_DESTINATION},
		{"255.255.255.255", "255.255.255.255/32 broadcast", RW_REASON_PRIVATE_DESTINATION},
		{"239.1.1.1", "224.0.0.0/4 multicast", RW_REASON_PRIVATE_DESTINATION},
		{"fd00:ec2::254", "fd00:ec2::254 metadata", RW_REASON_METADATA},
		{"fe80::1", "fe80::/10 link-local", RW_REASON_PRIVATE_DESTINATION},
		{"fd12::1", "fc00::/7 unique local", RW_REASON_PRIVATE_DESTINATION},
		{"2001:db8::1", "2001:db8::/32 documentation", RW_REASON_PRIVATE_DESTINATION},
		{"64:ff9b:1::1", "64:ff9b:1::/48 local NAT64", RW_REASON_PRIVATE_DESTINATION},
		{"::ffff:8.8.8.8", "::ffff:0:0/96 IPv4-mapped", RW_REASON_PRIVATE_DESTINATION},
		{"::ffff:169.254.1.1", "169.254.0.0/16 link-local in ::ffff:0:0/96 IPv4-mapped",
		 RW_REASON_PRIVATE_DESTINATION},
		{"2002:a9fe:a9fe::1", "169.254.169.254 metadata in 2002::/16 6to4",
		 RW_REASON_METADATA},
		{"2002:c0a8:101::1", "192.168.0.0/16 private in 2002::/16 6to4",
		 RW_REASON_PRIVATE_DESTINATION},
		/* Teredo: the server 10.1.1.1 (private), the client 8.8.8.8 inverted */
		{"2001:0:a01:101::f7f7:f7f7", "10.0.0.0/8 private in 2001::/32 Teredo server",
		 RW_REASON_PRIVATE_DESTINATION},
	};
	char what[96];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		bool six = strchr(t[i].dst, ':') != NULL;
		struct rw_event ev = event(six ? "2600:1f14:abc:1::5" : "10.1.2.3", t[i].dst,
					   IPPROTO_TCP, 443, t[i].reason);
		char got[RW_RULE_NAME_LEN];

		snprintf(what, sizeof(what), "%s", t[i].dst);
		rw_event_rule_name(&ev, &pol, got, sizeof(got));
		if (strcmp(got, t[i].want))
			fail_msg("%s: got \"%s\", want \"%s\"", what, got, t[i].want);
		/* Built-in entries hold whatever the revision. */
		ev.revision = 6;
		rw_event_rule_name(&ev, &pol, got, sizeof(got));
		if (strcmp(got, t[i].want))
			fail_msg("%s at revision 6: got \"%s\"", what, got);
	}
}

static void refused_snapshot(void **state)
{
	static const struct named_case t[] = {
		/* deny[0] 10.0.0.0/16 is more specific than 10.0.0.0/8, built-in or deny[3]. */
		{"10.1.2.3", "10.0.5.6", IPPROTO_TCP, 443, RW_REASON_PRIVATE_DESTINATION,
		 RW_DIR_EGRESS, 0, 0, "deny[0] 10.0.0.0/16"},
		{"10.1.2.3", "10.9.5.6", IPPROTO_TCP, 443, RW_REASON_PRIVATE_DESTINATION,
		 RW_DIR_EGRESS, 0, 0, "10.0.0.0/8 private"},
		{"10.1.2.3", "52.94.9.5", IPPROTO_TCP, 5432, RW_REASON_PRIVATE_DESTINATION,
		 RW_DIR_EGRESS, 0, 0, "deny[1] 52.94.0.0/16"},
		{"2600:1f14:abc:1::5", "2600:1f14:dead::1", IPPROTO_TCP, 443,
		 RW_REASON_PRIVATE_DESTINATION, RW_DIR_EGRESS, 0, 0, "deny[2] 2600:1f14:dead::/48"},
		/* The declared nat64: the address it carries, by the IPv4 tables. */
		{"2600:1f14:abc:1::5", "64:ff9b::345e:905", IPPROTO_TCP, 443,
		 RW_REASON_PRIVATE_DESTINATION, RW_DIR_EGRESS, 0, 0,
		 "deny[1] 52.94.0.0/16 in nat64 64:ff9b::/96"},
		{"2600:1f14:abc:1::5", "64:ff9b::a9fe:a9fe", IPPROTO_TCP, 80, RW_REASON_METADATA,
		 RW_DIR_EGRESS, 0, 0, "169.254.169.254 metadata in nat64 64:ff9b::/96"},
		/* The pod's own /64, another run's pod. */
		{"2600:1f14:abc:1::5", "2600:1f14:abc:1::77", IPPROTO_TCP, 443,
		 RW_REASON_PRIVATE_DESTINATION, RW_DIR_EGRESS, 0, 0,
		 "2600:1f14:abc:1::/64 of the pod"},
		{"2600:1f14:abc:1::5", "2600:1f14:abc:2::9", IPPROTO_TCP, 443,
		 RW_REASON_PRIVATE_DESTINATION, RW_DIR_EGRESS, 0, 0, "pod of run-b"},
		/* A reply into the pod is named by its peer, the source. */
		{"10.0.5.6", "10.1.2.3", IPPROTO_TCP, 40000, RW_REASON_PRIVATE_DESTINATION,
		 RW_DIR_INGRESS, 0, 0, "deny[0] 10.0.0.0/16"},
	};

	(void)state;
	expect_cases(t, sizeof(t) / sizeof(t[0]));
}

static void not_in_force(void **state)
{
	struct rw_event ev;

	(void)state;
	ev = event("10.1.2.3", "52.94.9.5", IPPROTO_TCP, 5432, RW_REASON_PRIVATE_DESTINATION);
	ev.revision = 6;
	expect(&ev, &pol, "deny list or pods (revision 6, not in force)");
	expect(&ev, NULL, "deny list or pods (revision 6, not in force)");
	/* What a built-in entry holds stays exact. */
	ev = event("10.1.2.3", "10.0.5.6", IPPROTO_TCP, 443, RW_REASON_PRIVATE_DESTINATION);
	ev.revision = 8;
	expect(&ev, &pol, "10.0.0.0/8 private");
	ev = event("10.1.2.4", "52.95.9.5", IPPROTO_TCP, 5433, 0);
	ev.rule_id = RW_RULE_ID(RW_RULE_KIND_RUN, 1, 1);
	ev.revision = 8;
	expect(&ev, &pol, "runs[1].allow[1] (revision 8, not in force)");
	ev.rule_id = RW_RULE_ID(RW_RULE_KIND_SERVICE, 0, 0);
	expect(&ev, NULL, "services[0] (revision 8, not in force)");
	/* In force, an id past the snapshot's lists (no datapath gives one). */
	ev.revision = 7;
	ev.rule_id = RW_RULE_ID(RW_RULE_KIND_RUN, 5, 0);
	expect(&ev, &pol, "runs[5].allow[0]: not in revision 7");
}

static void fixed_texts(void **state)
{
	(void)state;
	/* Every reason but the two the snapshot names has a fixed text, and no two are alike. */
	for (unsigned int r = 1; r < RW_REASON_COUNT; r++) {
		bool named = r == RW_REASON_METADATA || r == RW_REASON_PRIVATE_DESTINATION;

		if (named != !rw_reason_rule(r)[0])
			fail_msg("reason %s: \"%s\"", rw_reason_name(r), rw_reason_rule(r));
		for (unsigned int q = 1; q < r; q++)
			if (rw_reason_rule(r)[0] && !strcmp(rw_reason_rule(r), rw_reason_rule(q)))
				fail_msg("%s and %s share a text", rw_reason_name(r),
					 rw_reason_name(q));
	}
	assert_string_equal(rw_reason_rule(RW_REASON_COUNT), "");
	assert_string_equal(rw_path_rule(RW_PATH_RULE), "");
	struct rw_event ev = event("10.1.2.3", "8.8.8.8", IPPROTO_UDP, 53, RW_REASON_DNS);

	expect(&ev, &pol, "built-in: port 53 by a rule only");
	ev.reason = RW_REASON_NOT_ALLOWLISTED;
	expect(&ev, NULL, "egress allowlist: no rule");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(allowed),	    cmocka_unit_test(refused_builtin),
		cmocka_unit_test(refused_snapshot), cmocka_unit_test(not_in_force),
		cmocka_unit_test(fixed_texts),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
