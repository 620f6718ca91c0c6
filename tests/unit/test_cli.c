// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_cli.c: the parts of the operator commands that need no kernel (user/cli/cli_text.c,
 * cli_counters_fmt.c, cli_event_filter.c, cli_probe.c, cli_pins.c): what people type (addresses,
 * ports, names with "did you mean"), aligned tables, the counters table and JSON, the event
 * filter of `runwall drops`, the packets and lines of `runwall explain`.
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
#include <netinet/in.h>

#include "cli_text.h"
#include "cli_counters_fmt.h"
#include "cli_event_filter.h"
#include "cli_probe.h"
#include "cli_pins.h"
#include "datapath.h"
#include "runwall.skel.h"
#include "eventfmt.h"
#include "reasons.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static __be32 ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

/* Whatever a function printed to a FILE, as a string (free it). */
struct capture {
	char *buf;
	size_t len;
	FILE *f;
};

static FILE *capture_start(struct capture *c)
{
	c->f = open_memstream(&c->buf, &c->len);
	assert_non_null(c->f);
	return c->f;
}

static char *capture_end(struct capture *c)
{
	fclose(c->f);
	return c->buf;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static void test_parse_ip(void **state)
{
	static const char *const bad[] = {"1.2.3", "1.2.3.256", "10.1.2.3 ", "10.1.2.3/32",
					  "",	   "eni1a2b",	"::1",	     NULL};
	__be32 a = 0;

	assert_int_equal(rw_parse_ip("10.1.2.3", &a), 0);
	assert_int_equal(a, ip("10.1.2.3"));
	assert_int_equal(rw_parse_ip("255.255.255.255", &a), 0);
	for (size_t i = 0; i < N_OF(bad); i++)
		if (rw_parse_ip(bad[i], &a) != -EINVAL)
			fail_msg("rw_parse_ip(\"%s\") is not -EINVAL", bad[i] ?: "(null)");
}

static void test_parse_port(void **state)
{
	static const char *const good[] = {"1", "65535", "443"};
	static const __u16 value[] = {1, 65535, 443};
	static const char *const bad[] = {"0",	 "65536", "-1", "+1",
					  "44a", " 44",	  "",	"99999999999999999999999"};
	__u16 p = 0;

	for (size_t i = 0; i < N_OF(good); i++) {
		assert_int_equal(rw_parse_port(good[i], &p), 0);
		assert_int_equal(p, value[i]);
	}
	for (size_t i = 0; i < N_OF(bad); i++)
		if (rw_parse_port(bad[i], &p) != -EINVAL)
			fail_msg("rw_parse_port(\"%s\") is not -EINVAL", bad[i]);
}

static void test_parse_ip_port(void **state)
{
	static const char *const bad[] = {
		"172.20.0.10:", "172.20.0.10:0",     "172.20.0.10:70000",    ":443",
		"172.20.0:443", "172.20.0.10:443:1", "255.255.255.255.255:1"};
	__be32 a = 0;
	__u16 p = 7;

	assert_int_equal(rw_parse_ip_port("172.20.0.10", &a, &p), 0);
	assert_int_equal(a, ip("172.20.0.10"));
	assert_int_equal(p, 0);
	assert_int_equal(rw_parse_ip_port("172.20.0.10:443", &a, &p), 0);
	assert_int_equal(a, ip("172.20.0.10"));
	assert_int_equal(p, 443);
	for (size_t i = 0; i < N_OF(bad); i++)
		if (rw_parse_ip_port(bad[i], &a, &p) != -EINVAL)
			fail_msg("rw_parse_ip_port(\"%s\") is not -EINVAL", bad[i]);
}

static void test_parse_uint(void **state)
{
	unsigned long long v = 0;

	assert_int_equal(rw_parse_uint("0", 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(rw_parse_uint("10", 10, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(rw_parse_uint("11", 10, &v), -ERANGE);
	assert_int_equal(rw_parse_uint("18446744073709551615", ~0ULL, &v), 0);
	assert_true(v == ~0ULL);
	assert_int_equal(rw_parse_uint("18446744073709551616", ~0ULL, &v), -ERANGE);
	assert_int_equal(rw_parse_uint("1e3", 10000, &v), -EINVAL);
	assert_int_equal(rw_parse_uint("", 10, &v), -EINVAL);
}

/* The agent's --event-rate: N or N/BURST, range-checked, BURST 2N by default. */
static void test_parse_rate(void **state)
{
	unsigned long long r = 7, b = 7;

	assert_int_equal(rw_parse_rate("200", 1000, &r, &b), 0);
	assert_true(r == 200 && b == 400);
	assert_int_equal(rw_parse_rate("0", 1000, &r, &b), 0);
	assert_true(r == 0 && b == 0);
	assert_int_equal(rw_parse_rate("10/3", 1000, &r, &b), 0);
	assert_true(r == 10 && b == 3);
	r = b = 7;
	assert_int_equal(rw_parse_rate("10/0", 1000, &r, &b), -ERANGE);
	assert_int_equal(rw_parse_rate("1001", 1000, &r, &b), -ERANGE);
	assert_true(r == 7 && b == 7); /* nothing written on an error */
	assert_int_equal(rw_parse_rate("-1", 1000, &r, &b), -EINVAL);
	assert_int_equal(rw_parse_rate("10/", 1000, &r, &b), -EINVAL);
	assert_int_equal(rw_parse_rate("/10", 1000, &r, &b), -EINVAL);
	assert_int_equal(rw_parse_rate("10/5/2", 1000, &r, &b), -EINVAL);
	assert_int_equal(rw_parse_rate(NULL, 1000, &r, &b), -EINVAL);
}

static void test_parse_proto_flags(void **state)
{
	__u8 v = 0;

	assert_int_equal(rw_parse_proto("tcp", &v), 0);
	assert_int_equal(v, IPPROTO_TCP);
	assert_int_equal(rw_parse_proto("UDP", &v), 0);
	assert_int_equal(v, IPPROTO_UDP);
	assert_int_equal(rw_parse_proto("icmp", &v), -EINVAL);
	assert_int_equal(rw_parse_tcp_flags("syn", &v), 0);
	assert_int_equal(v, 0x02);
	assert_int_equal(rw_parse_tcp_flags("ack", &v), 0);
	assert_int_equal(v, 0x10);
	assert_int_equal(rw_parse_tcp_flags("synack", &v), 0);
	assert_int_equal(v, 0x12);
	assert_int_equal(rw_parse_tcp_flags("fin", &v), -EINVAL);
}

/* ---- names ------------------------------------------------------------------------------- */

/* lookup refuses typo (-EINVAL) with "(did you mean 'want'?)" in its message; want NULL: with
 * no guess at all.
 */
static void expect_guess(int (*lookup)(const char *, char *, size_t), const char *typo,
			 const char *want)
{
	char err[1024], hint[96];

	assert_int_equal(lookup(typo, err, sizeof(err)), -EINVAL);
	if (!want) {
		assert_null(strstr(err, "did you mean"));
		return;
	}
	snprintf(hint, sizeof(hint), "(did you mean '%s'?)", want);
	assert_non_null(strstr(err, hint));
}

static void test_distance(void **state)
{
	assert_int_equal(rw_name_distance("allow", "allow"), 0);
	assert_int_equal(rw_name_distance("alow", "allow"), 1);
	assert_int_equal(rw_name_distance("dupm", "dump"), 1); /* a transposition */
	assert_int_equal(rw_name_distance("Conntrack", "conntrack"), 0);
	assert_int_equal(rw_name_distance("", "abc"), 3);
	assert_int_equal(rw_name_distance("deny", "pods"), 4);
}

static void test_lookup_names(void **state)
{
	static const char *const subs[] = {"list", "dump", "lookup"};
	char err[512];

	assert_int_equal(rw_name_lookup("lookup", "map subcommand", subs, 3, err, sizeof(err)), 2);
	assert_int_equal(rw_name_lookup("dupm", "map subcommand", subs, 3, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "unknown map subcommand 'dupm' (did you mean 'dump'?); "
				 "valid: list, dump, lookup");
	assert_int_equal(rw_name_lookup("show", "map subcommand", subs, 3, err, sizeof(err)),
			 -EINVAL);
	assert_string_equal(err, "unknown map subcommand 'show'; valid: list, dump, lookup");
	/* Too short to be sure: no guess. */
	assert_int_equal(rw_name_lookup("x", "map subcommand", subs, 3, err, sizeof(err)), -EINVAL);
	assert_null(strstr(err, "did you mean"));
	/* A message cut to the buffer stays a string. */
	assert_int_equal(rw_name_lookup("nope", "map subcommand", subs, 3, err, 20), -EINVAL);
	assert_int_equal(strlen(err), 19);
}

static void test_map_names(void **state)
{
	char err[512];

	assert_int_equal(rw_cli_map_lookup("allow", err, sizeof(err)), RW_M_ALLOW_EXACT);
	assert_int_equal(rw_cli_map_lookup("rw_allow_cidr", err, sizeof(err)), RW_M_ALLOW_EXACT);
	assert_int_equal(rw_cli_map_lookup("rw_allow_exact", err, sizeof(err)), RW_M_ALLOW_EXACT);
	assert_int_equal(rw_cli_map_lookup("rw_event_budget", err, sizeof(err)), RW_M_EVENT_BUDGET);
	assert_int_equal(rw_cli_map_lookup("budget", err, sizeof(err)), RW_M_EVENT_BUDGET);
	assert_int_equal(rw_cli_map_lookup("revs", err, sizeof(err)), RW_M_RUN_REVS);
	assert_int_equal(rw_cli_map_lookup("conntrak", err, sizeof(err)), -EINVAL);
	assert_string_equal(
		err, "unknown map 'conntrak' (did you mean 'conntrack'?); valid: "
		     "config, endpoints, pods, allow, deny, inbound, conntrack, "
		     "counters, budget, events, revs, progs, scratch, linklocal, principals");
	expect_guess(rw_cli_map_lookup, "alow", "allow");
	expect_guess(rw_cli_map_lookup, "routes", NULL);
	/* Every shown and every pinned name resolves to the map shown under it. */
	for (int i = 0; i < RW_M__COUNT; i++) {
		assert_int_equal(rw_cli_map_lookup(rw_map_shown_names[i], err, sizeof(err)),
				 rw_cli_map_of(i));
		assert_int_equal(rw_cli_map_lookup(rw_map_names[i], err, sizeof(err)),
				 rw_cli_map_of(i));
	}
}

/* Every map of RW_MAPS is shown under the first map of its shown name, which is its own. */
static void test_map_list(void **state)
{
	for (int i = 0; i < RW_M__COUNT; i++) {
		enum rw_map_id m = rw_cli_map_of(i);

		assert_true(m <= (enum rw_map_id)i);
		assert_string_equal(rw_map_shown_names[m], rw_map_shown_names[i]);
		assert_int_equal(rw_cli_map_of(m), m);
	}
	assert_int_equal(rw_cli_map_of(RW_M_ALLOW_CIDR), RW_M_ALLOW_EXACT);
}

/* RW_MAPS is the built object's map list: bpf/maps.h defines every map of it (a _Static_assert
 * there), and here the object has no map it lacks. Opening parses the ELF only: no root.
 */
static void test_map_list_is_the_object(void **state)
{
	struct runwall_bpf *skel = runwall_bpf__open();
	struct bpf_map *map;
	int n = 0;

	assert_non_null(skel);
	bpf_object__for_each_map(map, skel->obj)
	{
		int i = 0;

		if (bpf_map__is_internal(map)) /* .rodata, .bss: the globals */
			continue;
		while (i < RW_M__COUNT && strcmp(bpf_map__name(map), rw_map_names[i]))
			i++;
		if (i == RW_M__COUNT)
			fail_msg("map %s of the BPF object is not in RW_MAPS", bpf_map__name(map));
		n++;
	}
	assert_int_equal(n, RW_M__COUNT);
	runwall_bpf__destroy(skel);
}

static void test_reason_names(void **state)
{
	char err[1024];

	for (int r = 0; r < RW_REASON_COUNT; r++)
		assert_int_equal(rw_cli_reason_lookup(rw_reason_name(r), err, sizeof(err)), r);
	assert_int_equal(rw_cli_reason_lookup("allowed", err, sizeof(err)), RW_REASON_ALLOWED);
	assert_int_equal(rw_cli_reason_lookup("privat-destination", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "unknown reason 'privat-destination' (did you mean "
				 "'private-destination'?); valid: allowed, not-ready, "
				 "unknown-source, spoofed-source, malformed, unsupported-l2, "
				 "ip-options, fragment, unsupported-protocol, dns, metadata, "
				 "private-destination, not-allowlisted, inbound-denied, "
				 "conntrack-full, lease-expired, ipv6-routing, "
				 "ipv6-ext-headers, ipv6-next-header, ipv6-jumbogram, "
				 "icmpv6-type, icmp-unrelated, wrong-principal");
	/* A unique prefix is a good guess too. */
	expect_guess(rw_cli_reason_lookup, "inbound", "inbound-denied");
	expect_guess(rw_cli_reason_lookup, "drop", NULL);
}

/* ---- text -------------------------------------------------------------------------------- */

static void test_table(void **state)
{
	static const char *const heads[] = {"NAME", "COUNT", "NOTE"};
	struct rw_table t;
	struct capture c;
	char *out;

	rw_table_init(&t, 3, heads, RW_TABLE_RIGHT(1));
	assert_int_equal(rw_table_cell(&t, "x"), -EINVAL); /* no row yet */
	rw_table_row(&t);
	rw_table_cell(&t, "%s", "conntrack");
	rw_table_cell(&t, "%d", 7);
	rw_table_cell(&t, "%s", "lru");
	rw_table_row(&t);
	rw_table_cell(&t, "%s", "pods");
	rw_table_cell(&t, "%d", 12345678);
	rw_table_row(&t); /* a short row: the rest is blank */
	rw_table_cell(&t, "config");
	assert_int_equal(rw_table_cell(&t, "a"), 0);
	assert_int_equal(rw_table_cell(&t, "b"), 0);
	assert_int_equal(rw_table_cell(&t, "c"), -EINVAL); /* one cell too many */
	rw_table_print(&t, capture_start(&c), "  ");
	out = capture_end(&c);
	assert_string_equal(out, "  NAME          COUNT  NOTE\n"
				 "  conntrack         7  lru\n"
				 "  pods       12345678\n"
				 "  config            a  b\n");
	free(out);
	rw_table_free(&t);

	/* Without a header, and the last column is never padded. */
	rw_table_init(&t, 2, NULL, 0);
	rw_table_row(&t);
	rw_table_cell(&t, "a");
	rw_table_cell(&t, "long value");
	rw_table_row(&t);
	rw_table_cell(&t, "bbb");
	rw_table_cell(&t, "v");
	rw_table_print(&t, capture_start(&c), NULL);
	out = capture_end(&c);
	assert_string_equal(out, "a    long value\nbbb  v\n");
	free(out);
	rw_table_free(&t);
}

static void test_small_formats(void **state)
{
	char b[64];

	rw_cli_duration(800000000ULL, b, sizeof(b));
	assert_string_equal(b, "0.8s");
	rw_cli_duration(42000000000ULL, b, sizeof(b));
	assert_string_equal(b, "42s");
	rw_cli_duration(312000000000ULL, b, sizeof(b));
	assert_string_equal(b, "5m12s");
	rw_cli_duration(3ULL * 3600 * 1000000000ULL + 7 * 60 * 1000000000ULL, b, sizeof(b));
	assert_string_equal(b, "3h07m");
	rw_cli_duration(52ULL * 3600 * 1000000000ULL, b, sizeof(b));
	assert_string_equal(b, "2d04h");
	rw_cli_bytes(512, b, sizeof(b));
	assert_string_equal(b, "512 B");
	rw_cli_bytes(4 << 20, b, sizeof(b));
	assert_string_equal(b, "4.0 MiB");
	rw_cli_fill_pct(2, 8192, b, sizeof(b));
	assert_string_equal(b, "<0.1%");
	rw_cli_fill_pct(0, 8192, b, sizeof(b));
	assert_string_equal(b, "0.0%");
	rw_cli_fill_pct(3, 8, b, sizeof(b));
	assert_string_equal(b, "37.5%");
	rw_cli_fill_pct(-2, 8, b, sizeof(b));
	assert_string_equal(b, "-");
	rw_cli_cidr(ip("172.21.0.0"), 24, b, sizeof(b));
	assert_string_equal(b, "172.21.0.0/24");
	rw_cli_cidr(ip("172.21.0.1"), 32, b, sizeof(b));
	assert_string_equal(b, "172.21.0.1");
	rw_cli_ip_port(ip("10.1.2.3"), 40000, b, sizeof(b));
	assert_string_equal(b, "10.1.2.3:40000");
	rw_cli_ip_port(ip("10.1.2.3"), 0, b, sizeof(b));
	assert_string_equal(b, "10.1.2.3");
	{
		__be32 a6[4];

		assert_int_equal(inet_pton(AF_INET6, "2001:db8:0:0:0:0:0:1", a6), 1);
		rw_cli_ip6_port(a6, 443, b, sizeof(b));
		assert_string_equal(b, "[2001:db8::1]:443");
		rw_cli_ip6_port(a6, 0, b, sizeof(b));
		assert_string_equal(b, "2001:db8::1");
		rw_cli_ip6(a6, b, sizeof(b));
		assert_string_equal(b, "2001:db8::1");
		rw_cli_cidr6(a6, 32, b, sizeof(b));
		assert_string_equal(b, "2001:db8::1/32");
		rw_cli_cidr6(a6, 128, b, sizeof(b));
		assert_string_equal(b, "2001:db8::1");
		rw_cli_host_port("2001:db8::1", 443, b, sizeof(b));
		assert_string_equal(b, "[2001:db8::1]:443");
		rw_cli_host_port("10.1.2.3", 443, b, sizeof(b));
		assert_string_equal(b, "10.1.2.3:443");
	}
}

/* ---- counters ---------------------------------------------------------------------------- */

static void sample_counters(struct rw_counters *c)
{
	memset(c, 0, sizeof(*c));
	c->packets[RW_DIR_EGRESS][RW_REASON_ALLOWED] = 1203;
	c->bytes[RW_DIR_EGRESS][RW_REASON_ALLOWED] = 150000;
	c->packets[RW_DIR_EGRESS][RW_REASON_NOT_ALLOWLISTED] = 40;
	c->bytes[RW_DIR_EGRESS][RW_REASON_NOT_ALLOWLISTED] = 2400;
	c->packets[RW_DIR_EGRESS][RW_REASON_METADATA] = 4;
	c->bytes[RW_DIR_EGRESS][RW_REASON_METADATA] = 296;
	c->packets[RW_DIR_INGRESS][RW_REASON_INBOUND_DENIED] = 3;
	c->bytes[RW_DIR_INGRESS][RW_REASON_INBOUND_DENIED] = 180;
	c->events_sent = 3;
	c->events_suppressed = 44;
	c->answers[RW_ANSWER_RST] = 5;
	c->answers[RW_ANSWER_ICMP] = 2;
	c->answers[RW_ANSWER_BUDGET] = 1;
}

static void test_counters_table(void **state)
{
	struct rw_counters c;
	struct capture cap;
	char *out, line[256];

	sample_counters(&c);
	assert_int_equal(rw_cli_counters_drops(&c), 47);
	assert_int_equal(rw_cli_counters_allowed(&c), 1203);
	rw_cli_counters_print(capture_start(&cap), &c, "  ");
	out = capture_end(&cap);
	/* Only the non-zero rows, in contract order, numbers right-aligned. */
	assert_string_equal(
		out,
		"  DIR      REASON           PACKETS   BYTES\n"
		"  egress   allowed             1203  150000\n"
		"  egress   metadata               4     296\n"
		"  egress   not-allowlisted       40    2400\n"
		"  ingress  inbound-denied         3     180\n"
		"  47 drops, 1203 allowed; events: 3 sent, 44 suppressed, 0 lost; answers: 5 rst, "
		"2 icmp, 1 over budget\n");
	free(out);

	memset(&c, 0, sizeof(c));
	rw_cli_counters_print(capture_start(&cap), &c, "");
	out = capture_end(&cap);
	assert_string_equal(out, "no packets\n0 drops, 0 allowed; events: 0 sent, 0 suppressed, "
				 "0 lost; answers: 0 rst, 0 icmp, 0 over budget\n");
	free(out);

	c.packets[RW_DIR_INGRESS][RW_REASON_NOT_READY] = 1;
	rw_cli_counters_summary(&c, line, sizeof(line));
	assert_string_equal(line, "1 drop, 0 allowed; events: 0 sent, 0 suppressed, 0 lost; "
				  "answers: 0 rst, 0 icmp, 0 over budget");
}

static void test_counters_json(void **state)
{
	struct rw_counters c;
	json_t *o, *eg, *in, *ev;

	sample_counters(&c);
	o = rw_cli_counters_json(&c);
	eg = json_object_get(o, "egress");
	in = json_object_get(o, "ingress");
	ev = json_object_get(o, "events");
	assert_non_null(eg);
	assert_non_null(in);
	assert_non_null(ev);
	/* Every reason is a key, zero or not, in both directions. */
	assert_int_equal(json_object_size(eg), RW_REASON_COUNT);
	assert_int_equal(json_object_size(in), RW_REASON_COUNT);
	for (int r = 0; r < RW_REASON_COUNT; r++) {
		assert_non_null(json_object_get(eg, rw_reason_name(r)));
		assert_non_null(json_object_get(json_object_get(in, rw_reason_name(r)), "bytes"));
	}
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(eg, "allowed"), "packets")),
		1203);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(eg, "allowed"), "bytes")),
		150000);
	assert_int_equal(json_integer_value(
				 json_object_get(json_object_get(in, "inbound-denied"), "packets")),
			 3);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(in, "not-ready"), "packets")),
		0);
	assert_int_equal(json_integer_value(json_object_get(ev, "sent")), 3);
	assert_int_equal(json_integer_value(json_object_get(ev, "lost")), 0);
	assert_int_equal(json_integer_value(json_object_get(ev, "suppressed")), 44);
	assert_int_equal(json_object_size(ev), 3);
	ev = json_object_get(o, "answers");
	assert_int_equal(json_integer_value(json_object_get(ev, "rst")), 5);
	assert_int_equal(json_integer_value(json_object_get(ev, "icmp")), 2);
	assert_int_equal(json_integer_value(json_object_get(ev, "budget")), 1);
	assert_int_equal(json_object_size(o), 4);
	json_decref(o);
}

/* ---- drops ------------------------------------------------------------------------------- */

static struct rw_event event(int dir, int verdict, int reason, const char *src, int sport,
			     const char *dst, int dport, const char *run)
{
	struct rw_event ev = {
		.ts_ns = 1000,
		.revision = 12,
		.ifindex = 5,
		.run_idx = 1,
		.run_gen = 12,
		.proto = IPPROTO_TCP,
		.dir = dir,
		.verdict = verdict,
		.reason = reason,
	};

	ev.saddr = ip(src);
	ev.daddr = ip(dst);
	ev.sport = htons(sport);
	ev.dport = htons(dport);
	snprintf(ev.run_id, sizeof(ev.run_id), "%s", run);
	return ev;
}

static void test_filter(void **state)
{
	struct rw_event drop = event(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED,
				     "10.1.2.3", 40000, "93.184.216.34", 443, "run-7f3a");
	struct rw_event allow = event(RW_DIR_EGRESS, RW_VERDICT_ALLOW, RW_REASON_ALLOWED,
				      "10.1.2.3", 40001, "172.20.0.10", 443, "run-7f3a");
	struct rw_event in = event(RW_DIR_INGRESS, RW_VERDICT_DROP, RW_REASON_INBOUND_DENIED,
				   "172.20.0.13", 50000, "10.1.2.3", 4096, "run-7f3a");
	struct rw_event spoof = event(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_SPOOFED_SOURCE,
				      "10.9.9.9", 1, "8.8.8.8", 53, "run-7f3a");
	static const struct {
		const char *ip;
		__u16 port;
		bool match;
	} dsts[] = {
		{"93.184.216.34", 0, true},
		{"93.184.216.34", 443, true},
		{"93.184.216.34", 80, false},
		{"172.20.0.10", 0, false},
	};
	struct rw_cli_filter f;

	/* Default: every drop, no allowed flow. */
	rw_cli_filter_init(&f);
	assert_true(rw_cli_filter_match(&f, &drop));
	assert_true(rw_cli_filter_match(&f, &in));
	assert_false(rw_cli_filter_match(&f, &allow));
	f.all = true;
	assert_true(rw_cli_filter_match(&f, &allow));

	/* --reason allowed shows allowed flows without --all. */
	rw_cli_filter_init(&f);
	f.reason = RW_REASON_ALLOWED;
	assert_true(rw_cli_filter_match(&f, &allow));
	assert_false(rw_cli_filter_match(&f, &drop));
	f.reason = RW_REASON_NOT_ALLOWLISTED;
	assert_true(rw_cli_filter_match(&f, &drop));
	assert_false(rw_cli_filter_match(&f, &in));

	/* --run */
	rw_cli_filter_init(&f);
	f.run = "run-7f3a";
	assert_true(rw_cli_filter_match(&f, &drop));
	f.run = "run-7f3";
	assert_false(rw_cli_filter_match(&f, &drop));

	/* --pod: the pod's side of the event, and its veth's events with a forged source. */
	rw_cli_filter_init(&f);
	f.has_pod = true;
	f.pod = rw_ip4(ip("10.1.2.3"));
	assert_true(rw_cli_filter_match(&f, &drop));
	assert_true(rw_cli_filter_match(&f, &in));
	assert_false(rw_cli_filter_match(&f, &spoof));
	f.pod_ifindex = 5;
	assert_true(rw_cli_filter_match(&f, &spoof));
	f.pod = rw_ip4(ip("10.1.2.4"));
	f.pod_ifindex = 6;
	assert_false(rw_cli_filter_match(&f, &drop));
	assert_false(rw_cli_filter_match(&f, &in));

	/* --dst IP[:PORT] (port 0: none given), against the drop to 93.184.216.34:443 */
	for (size_t i = 0; i < sizeof(dsts) / sizeof(dsts[0]); i++) {
		rw_cli_filter_init(&f);
		f.has_dst = true;
		f.dst = rw_ip4(ip(dsts[i].ip));
		f.dport = dsts[i].port;
		assert_int_equal(rw_cli_filter_match(&f, &drop), dsts[i].match);
	}
}

/* An IPv6 event (ethertype 0x86dd), its addresses in saddr6/daddr6. */
static struct rw_event event6(int dir, int verdict, int reason, const char *src, unsigned int sport,
			      const char *dst, unsigned int dport)
{
	struct rw_event ev =
		event(dir, verdict, reason, "0.0.0.0", sport, "0.0.0.0", dport, "run-7f3a");

	ev.ethertype = htons(0x86dd);
	assert_int_equal(inet_pton(AF_INET6, src, ev.saddr6), 1);
	assert_int_equal(inet_pton(AF_INET6, dst, ev.daddr6), 1);
	return ev;
}

/* --pod and --dst of either family, parsed as cli_drops.c does: an IPv6 filter matches the
 * IPv6 event only, and an IPv4 one never an IPv6 event whose first word is the same.
 */
static void test_filter_ipv6(void **state)
{
	struct rw_event out = event6(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED,
				     "2600:1f14:abc::7", 40000, "2606:4700::1111", 443);
	struct rw_event in = event6(RW_DIR_INGRESS, RW_VERDICT_DROP, RW_REASON_INBOUND_DENIED,
				    "2600:1f14:abc::9", 50000, "2600:1f14:abc::7", 4096);
	struct rw_event v4 = event(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED,
				   "10.1.2.3", 40000, "38.6.71.0", 443, "run-7f3a");
	struct rw_cli_filter f;
	__u16 port;

	rw_cli_filter_init(&f);
	f.has_pod = true;
	assert_int_equal(rw_ip_parse("2600:1f14:abc::7", &f.pod), 0);
	assert_true(rw_cli_filter_match(&f, &out));
	assert_true(rw_cli_filter_match(&f, &in));
	assert_false(rw_cli_filter_match(&f, &v4));
	assert_int_equal(rw_ip_parse("2600:1f14:abc::8", &f.pod), 0);
	assert_false(rw_cli_filter_match(&f, &out));

	rw_cli_filter_init(&f);
	f.has_dst = true;
	assert_int_equal(rw_ip_port_parse("[2606:4700::1111]:443", &f.dst, &f.dport), 0);
	assert_int_equal(f.dport, 443);
	assert_true(rw_cli_filter_match(&f, &out));
	assert_false(rw_cli_filter_match(&f, &v4));
	assert_int_equal(rw_ip_port_parse("2606:4700::1111", &f.dst, &f.dport), 0);
	assert_int_equal(f.dport, 0);
	assert_true(rw_cli_filter_match(&f, &out));
	assert_int_equal(rw_ip_port_parse("[2606:4700::1111]:80", &f.dst, &f.dport), 0);
	assert_false(rw_cli_filter_match(&f, &out));
	/* The IPv4 address whose bits are the IPv6 event's first word matches nothing of it. */
	f.dst = rw_ip4(out.daddr6[0]);
	f.dport = 0;
	assert_false(rw_cli_filter_match(&f, &out));

	assert_int_equal(rw_ip_port_parse("2606:4700::1111:443", &f.dst, &port), 0);
	assert_int_equal(port, 0); /* a bare IPv6 address: its last group is no port */
	assert_int_equal(rw_ip_port_parse("[2606:4700::1111]:0", &f.dst, &port), -ERANGE);
	assert_int_equal(rw_ip_port_parse("[10.1.2.3]:80", &f.dst, &port), -EINVAL);
	assert_int_equal(rw_ip_port_parse("[2606:4700::1111]x", &f.dst, &port), -EINVAL);
	assert_int_equal(rw_ip_port_parse("[2606:4700::1111", &f.dst, &port), -EINVAL);
	assert_int_equal(rw_ip_port_parse("10.1.2.3:80", &f.dst, &port), 0);
	assert_int_equal(port, 80);
	assert_int_equal(rw_ip_port_parse("fe80::1%eth0", &f.dst, &port), -EINVAL);
}

/* An IPv6 event's line: its addresses bracketed before their ports, its protocol the upper
 * layer's; and its JSON carries the text, which reads back into the same event.
 */
static void test_event_ipv6(void **state)
{
	struct rw_event ev = event6(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED,
				    "2600:1f14:abc::7", 40000, "2606:4700::1111", 443);
	struct rw_event back, icmp;
	char line[512], rule[64];
	json_t *o;

	rw_event_line(&ev, "", 0, line, sizeof(line));
	assert_non_null(strstr(line, "[2600:1f14:abc::7]:40000 -> [2606:4700::1111]:443 tcp"));
	o = rw_event_json(&ev, NULL, 0);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "src")), "2600:1f14:abc::7");
	assert_string_equal(json_string_value(json_object_get(o, "dst")), "2606:4700::1111");
	assert_string_equal(json_string_value(json_object_get(o, "proto")), "tcp");
	assert_int_equal(rw_event_from_json(o, &back, rule, sizeof(rule)), 0);
	json_decref(o);
	assert_int_equal(ntohs(back.ethertype), 0x86dd);
	assert_memory_equal(back.saddr6, ev.saddr6, sizeof(ev.saddr6));
	assert_memory_equal(back.daddr6, ev.daddr6, sizeof(ev.daddr6));
	assert_int_equal(back.proto, IPPROTO_TCP);

	/* ICMPv6 has no ports, and its name. */
	icmp = event6(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_UNSUPPORTED_PROTOCOL,
		      "2600:1f14:abc::7", 0, "2606:4700::1111", 0);
	icmp.proto = 58;
	rw_event_line(&icmp, "", 0, line, sizeof(line));
	assert_non_null(strstr(line, "2600:1f14:abc::7 -> 2606:4700::1111"));
	assert_non_null(strstr(line, " icmpv6"));
	o = rw_event_json(&icmp, NULL, 0);
	assert_int_equal(rw_event_from_json(o, &back, rule, sizeof(rule)), 0);
	json_decref(o);
	assert_int_equal(back.proto, 58);
	assert_int_equal(ntohs(back.ethertype), 0x86dd);
}

/* The header names the columns of rw_event_line() where they are. */
static void test_event_header(void **state)
{
	struct rw_event ev = event(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED,
				   "10.1.2.3", 40000, "93.184.216.34", 443, "run-7f3a");
	char head[256], line[512];
	const char *arrow;

	rw_cli_event_header(head, sizeof(head));
	rw_event_line(&ev, "", 0, line, sizeof(line));
	assert_int_equal(strstr(head, "DIR") - head, strstr(line, "egress") - line);
	assert_int_equal(strstr(head, "VERD") - head, strstr(line, "drop") - line);
	assert_int_equal(strstr(head, "REASON") - head, strstr(line, "not-allowlisted") - line);
	assert_int_equal(strstr(head, "RUN") - head, strstr(line, "run-7f3a") - line);
	/* The source is right-aligned against the arrow, the destination starts after it. */
	arrow = strstr(line, " -> ");
	assert_non_null(arrow);
	assert_int_equal(strstr(head, "SOURCE") - head + 6, arrow - line);
	assert_int_equal(strstr(head, "DESTINATION") - head, arrow + 4 - line);
	assert_int_equal(strstr(head, "PROTO") - head, strstr(line, " tcp") + 1 - line);
}

/* The answer a refusal got: in the event's JSON, back from it, and at the end of the line. */
static void test_event_answer(void **state)
{
	struct rw_event ev = event(RW_DIR_EGRESS, RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED,
				   "10.1.2.3", 40000, "93.184.216.34", 443, "run-7f3a"),
			back;
	static const char *const notes[RW_ANSWER_COUNT] = {
		[RW_ANSWER_NONE] = "tcp",
		[RW_ANSWER_RST] = "tcp  answered: rst",
		[RW_ANSWER_ICMP] = "tcp  answered: icmp",
		[RW_ANSWER_BUDGET] = "tcp  unanswered: over the answer budget"};
	char line[512];
	json_t *o;

	(void)state;
	for (int a = 0; a < RW_ANSWER_COUNT; a++) {
		ev.answer = a;
		o = rw_event_json(&ev, NULL, 0);
		assert_non_null(o);
		assert_string_equal(json_string_value(json_object_get(o, "answer")),
				    rw_answer_name(a));
		assert_int_equal(rw_event_from_json(o, &back, NULL, 0), 0);
		assert_int_equal(back.answer, a);
		json_decref(o);
		rw_event_line(&ev, "", 0, line, sizeof(line));
		assert_string_equal(line + strlen(line) - strlen(notes[a]), notes[a]);
	}
	/* An older agent's event has no "answer": none. */
	o = rw_event_json(&ev, NULL, 0);
	json_object_del(o, "answer");
	assert_int_equal(rw_event_from_json(o, &back, NULL, 0), 0);
	assert_int_equal(back.answer, RW_ANSWER_NONE);
	json_decref(o);
}

/* ---- explain ----------------------------------------------------------------------------- */

/* A packet of the pod 10.1.2.3 from port 40000 to dst:dport: a TCP SYN, or a UDP datagram. */
static struct rw_cli_probe probe4(const char *dst, __u16 dport, __u8 proto)
{
	struct rw_cli_probe p = {
		.dir = RW_DIR_EGRESS,
		.src = ip("10.1.2.3"),
		.dst = ip(dst),
		.sport = 40000,
		.dport = dport,
		.proto = proto,
		.tcp_flags = proto == IPPROTO_TCP ? 0x02 : 0,
	};

	return p;
}

static void test_packet(void **state)
{
	struct rw_cli_probe p = probe4("172.20.0.10", 443, IPPROTO_TCP);
	__u8 buf[RW_CLI_PKT_MAX], small[40];
	__u32 sum = 0;
	size_t len;

	len = rw_cli_build_packet(&p, buf, sizeof(buf));
	assert_int_equal(len, 14 + 20 + 20);
	assert_int_equal(buf[12], 0x08); /* IPv4 */
	assert_int_equal(buf[13], 0x00);
	assert_int_equal(buf[14], 0x45);			/* version 4, no options */
	assert_int_equal(buf[16] << 8 | buf[17], 40);		/* tot_len */
	assert_int_equal((buf[20] << 8 | buf[21]) & 0x3fff, 0); /* not a fragment */
	assert_int_equal(buf[23], IPPROTO_TCP);
	assert_memory_equal(buf + 26, &p.src, 4);
	assert_memory_equal(buf + 30, &p.dst, 4);
	for (int i = 14; i < 34; i += 2) /* the header checksum adds up */
		sum += buf[i] << 8 | buf[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	assert_int_equal(sum, 0xffff);
	assert_int_equal(buf[34] << 8 | buf[35], 40000);
	assert_int_equal(buf[36] << 8 | buf[37], 443);
	assert_int_equal(buf[46] >> 4, 5); /* doff */
	assert_int_equal(buf[47], 0x02);   /* SYN */

	p.proto = IPPROTO_UDP;
	len = rw_cli_build_packet(&p, buf, sizeof(buf));
	assert_int_equal(len, 14 + 20 + 8);
	assert_int_equal(buf[16] << 8 | buf[17], 28);
	assert_int_equal(buf[23], IPPROTO_UDP);
	assert_int_equal(buf[38] << 8 | buf[39], 8); /* UDP length */
	assert_int_equal(rw_cli_build_packet(&p, small, sizeof(small)), 0);
}

static void test_explain_line(void **state)
{
	struct rw_cli_probe p = probe4("172.20.0.10", 443, IPPROTO_TCP);
	struct rw_cli_verdict now = {
		.verdict = RW_VERDICT_ALLOW,
		.reason = RW_REASON_ALLOWED,
		.path = RW_PATH_RULE,
		.rule_id = RW_RULE_ID(RW_RULE_KIND_SERVICE, 0, 0),
		.rule = "services[0] egress-proxy",
		.run = "run-7f3a",
		.gen = 12,
		.revision = 12,
		.source = "live",
	};
	struct rw_cli_verdict with = {
		.verdict = RW_VERDICT_DROP,
		.reason = RW_REASON_PRIVATE_DESTINATION,
		.run = "run-7f3a",
		.gen = 13,
		.revision = 13,
		.source = "next.json",
	};
	char line[768];

	rw_cli_explain_line(&p, &now, NULL, line, sizeof(line));
	assert_string_equal(line, "egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp (run run-7f3a gen "
				  "12, revision 12): allowed via rule services[0] egress-proxy");
	rw_cli_explain_line(&p, &now, &with, line, sizeof(line));
	assert_string_equal(line, "egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp (run run-7f3a gen "
				  "12, revision 12): now: allowed via rule services[0] "
				  "egress-proxy; with next.json (run run-7f3a gen 13, revision "
				  "13): refused: private-destination");
	rw_cli_explain_line(&p, NULL, &with, line, sizeof(line));
	assert_string_equal(line, "egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp (run run-7f3a gen "
				  "13, revision 13): with next.json: refused: private-destination");

	/* Into the pod; the open path names no rule; an unknown pod has no run. */
	p.dir = RW_DIR_INGRESS;
	p.src = ip("172.20.0.12");
	p.dst = ip("10.1.2.3");
	p.dport = 4096;
	now.path = RW_PATH_INBOUND;
	snprintf(now.rule, sizeof(now.rule), "inbound[0] app-tier");
	rw_cli_explain_line(&p, &now, NULL, line, sizeof(line));
	assert_string_equal(line, "ingress 172.20.0.12:40000 -> 10.1.2.3:4096 tcp (run run-7f3a "
				  "gen 12, revision 12): allowed via inbound inbound[0] app-tier");
	now.path = RW_PATH_OPEN;
	now.rule[0] = '\0';
	rw_cli_verdict_str(&now, line, sizeof(line));
	assert_string_equal(line, "allowed via open");
	now.run[0] = '\0';
	rw_cli_verdict_context(&now, line, sizeof(line));
	assert_string_equal(line, "no run, revision 12");
	now.revision = 0;
	rw_cli_verdict_context(&now, line, sizeof(line));
	assert_string_equal(line, "node not ready");
}

static void test_explain_json(void **state)
{
	struct rw_cli_probe p = probe4("8.8.8.8", 53, IPPROTO_UDP);
	struct rw_cli_verdict v = {.verdict = RW_VERDICT_DROP,
				   .reason = RW_REASON_DNS,
				   .run = "run-7f3a",
				   .gen = 12,
				   .revision = 12};
	json_t *o = rw_cli_verdict_json(&p, &v);
	char *s = json_dumps(o, JSON_COMPACT);

	assert_string_equal(
		s, "{\"verdict\":\"drop\",\"reason\":\"dns\",\"path\":\"none\",\"answer\":\"none\","
		   "\"rule\":\"\",\"rule_id\":0,\"run\":\"run-7f3a\",\"gen\":12,"
		   "\"revision\":12,\"dir\":\"egress\",\"src\":\"10.1.2.3\","
		   "\"sport\":40000,\"dst\":\"8.8.8.8\",\"dport\":53,\"proto\":\"udp\","
		   "\"source\":\"live\",\"family\":\"ipv4\"}");
	free(s);
	json_decref(o);
}

/* explain's IPv6 frames: the fixed header (no extension headers), then TCP, UDP or an ICMPv6
 * message of the asked type (NDP with hop limit 255 and room for its target); the line and the
 * JSON in the family's text.
 */
static void test_explain_ipv6(void **state)
{
	struct rw_cli_probe p = {
		.dir = RW_DIR_EGRESS,
		.sport = 40000,
		.dport = 443,
		.proto = IPPROTO_TCP,
		.tcp_flags = 0x02,
		.ipv6 = true,
	};
	struct rw_cli_verdict v = {
		.verdict = RW_VERDICT_DROP, .reason = RW_REASON_DNS, .revision = 3};
	__u8 buf[RW_CLI_PKT_MAX], small[60];
	char line[256], *js;
	json_t *o;
	size_t len;

	assert_int_equal(inet_pton(AF_INET6, "2600:1f18::7", p.src6), 1);
	assert_int_equal(inet_pton(AF_INET6, "2a00:1450::1", p.dst6), 1);
	len = rw_cli_build_packet(&p, buf, sizeof(buf));
	assert_int_equal(len, 14 + 40 + 20);
	assert_int_equal(buf[12] << 8 | buf[13], 0x86dd);
	assert_int_equal(buf[14] >> 4, 6);
	assert_int_equal(buf[18] << 8 | buf[19], 20); /* payload length */
	assert_int_equal(buf[20], IPPROTO_TCP);	      /* next header */
	assert_int_equal(buf[21], 64);		      /* hop limit */
	assert_memory_equal(buf + 22, p.src6, 16);
	assert_memory_equal(buf + 38, p.dst6, 16);
	assert_int_equal(buf[54] << 8 | buf[55], 40000);
	assert_int_equal(buf[56] << 8 | buf[57], 443);
	assert_int_equal(buf[66] >> 4, 5); /* doff */
	assert_int_equal(buf[67], 0x02);   /* SYN */
	assert_int_equal(rw_cli_build_packet(&p, small, sizeof(small)), 0);
	rw_cli_probe_str(&p, line, sizeof(line));
	assert_string_equal(line, "egress [2600:1f18::7]:40000 -> [2a00:1450::1]:443 tcp");

	p.proto = IPPROTO_UDP;
	assert_int_equal(rw_cli_build_packet(&p, buf, sizeof(buf)), 14 + 40 + 8);
	assert_int_equal(buf[20], IPPROTO_UDP);
	assert_int_equal(buf[58] << 8 | buf[59], 8); /* UDP length */
	o = rw_cli_verdict_json(&p, &v);
	js = json_dumps(o, JSON_COMPACT);
	assert_non_null(strstr(js,
			       "\"src\":\"2600:1f18::7\",\"sport\":40000,\"dst\":\"2a00:1450::1\","
			       "\"dport\":443,\"proto\":\"udp\",\"source\":\"live\",\"family\":"
			       "\"ipv6\"}"));
	free(js);
	json_decref(o);

	p.proto = IPPROTO_ICMPV6;
	p.dport = 128;
	assert_int_equal(rw_cli_build_packet(&p, buf, sizeof(buf)), 14 + 40 + 8);
	assert_int_equal(buf[20], IPPROTO_ICMPV6);
	assert_int_equal(buf[21], 64);
	assert_int_equal(buf[54], 128); /* type */
	assert_int_equal(buf[55], 0);	/* code */
	rw_cli_probe_str(&p, line, sizeof(line));
	assert_string_equal(line, "egress 2600:1f18::7 -> 2a00:1450::1 icmpv6 type 128");
	o = rw_cli_verdict_json(&p, &v);
	assert_int_equal(json_integer_value(json_object_get(o, "icmp_type")), 128);
	assert_string_equal(json_string_value(json_object_get(o, "proto")), "icmpv6");
	assert_null(json_object_get(o, "dport"));
	assert_null(json_object_get(o, "sport"));
	json_decref(o);
	p.dport = 135; /* NS: on-link, and the target's 16 bytes */
	assert_int_equal(rw_cli_build_packet(&p, buf, sizeof(buf)), 14 + 40 + 24);
	assert_int_equal(buf[18] << 8 | buf[19], 24);
	assert_int_equal(buf[21], 255);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ip),
		cmocka_unit_test(test_parse_port),
		cmocka_unit_test(test_parse_ip_port),
		cmocka_unit_test(test_parse_uint),
		cmocka_unit_test(test_parse_rate),
		cmocka_unit_test(test_parse_proto_flags),
		cmocka_unit_test(test_distance),
		cmocka_unit_test(test_lookup_names),
		cmocka_unit_test(test_map_names),
		cmocka_unit_test(test_map_list),
		cmocka_unit_test(test_map_list_is_the_object),
		cmocka_unit_test(test_reason_names),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_small_formats),
		cmocka_unit_test(test_counters_table),
		cmocka_unit_test(test_counters_json),
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_filter_ipv6),
		cmocka_unit_test(test_event_ipv6),
		cmocka_unit_test(test_event_header),
		cmocka_unit_test(test_event_answer),
		cmocka_unit_test(test_packet),
		cmocka_unit_test(test_explain_line),
		cmocka_unit_test(test_explain_json),
		cmocka_unit_test(test_explain_ipv6),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
