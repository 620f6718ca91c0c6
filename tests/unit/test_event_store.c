// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_event_store.c: the agent's recent events (cursor, eviction, filters, limit), the
 * per-destination aggregates (counts per reason, oldest dropped first and counted, buckets under a
 * per-process random key), the top refused destinations of /metrics (rw_refused_top: most first,
 * ties by key, at most K, refused egress only) and the HTTP API's query parsing (every parameter,
 * every refusal).
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
#include <sys/wait.h>
#include <unistd.h>

#include "event_store.h"
#include "refused_top.h"
#include "unit_event.h"

static __be32 ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

/* An address of either family, as the filters and the aggregates hold it. */
static struct rw_ip ipa(const char *s)
{
	struct rw_ip a;

	assert_int_equal(rw_ip_parse(s, &a), 0);
	return a;
}

/* The aggregate key of run's TCP refusals or flows out to peer:port. */
static struct rw_agg_key egress_key(const char *run, const char *peer, __u16 port)
{
	struct rw_agg_key k = {
		.peer = ipa(peer), .port = htons(port), .proto = IPPROTO_TCP, .dir = RW_DIR_EGRESS};

	snprintf(k.run, sizeof(k.run), "%s", run);
	return k;
}

static bool ip_is(const struct rw_ip *a, const char *s)
{
	struct rw_ip b = ipa(s);

	return rw_ip_eq(a, &b);
}

static struct rw_event mkev(const char *run, const char *pod, const char *dst, int port,
			    int verdict, int reason)
{
	return tcp_out_event(run, ip(pod), ip(dst), port, verdict, reason);
}

static void add(struct rw_evstore *s, const struct rw_event *ev, const char *tag)
{
	char json[64];
	int n = snprintf(json, sizeof(json), "{\"tag\":\"%s\"}", tag);

	assert_true(rw_evstore_add(s, ev, "", json, n) > 0);
}

struct collect {
	uint64_t ids[64];
	char tags[64][16];
	size_t n;
	size_t stop_after;
};

static int collect(const struct rw_evstore_entry *e, void *data)
{
	struct collect *c = data;

	c->ids[c->n] = e->id;
	sscanf(e->json, "{\"tag\":\"%15[^\"]", c->tags[c->n]);
	c->n++;
	return c->stop_after && c->n == c->stop_after;
}

/* The entries s gives for f, collected into c (cleared first): how many. */
static size_t query(struct rw_evstore *s, const struct rw_evfilter *f, struct collect *c)
{
	memset(c, 0, sizeof(*c));
	return rw_evstore_query(s, f, collect, c);
}

/* The same for f holding the one query parameter key=value (rw_query_set()). */
static size_t query_by(struct rw_evstore *s, struct rw_evfilter *f, const char *key,
		       const char *value, struct collect *c)
{
	char err[256];

	rw_evfilter_init(f);
	assert_int_equal(rw_query_set(f, key, value, err, sizeof(err)), 0);
	return query(s, f, c);
}

static void test_store_cursor_and_eviction(void **state)
{
	struct rw_evstore s;
	struct rw_evfilter f;
	struct collect c;
	struct rw_event ev = mkev("run-a", "10.1.2.3", "93.184.216.34", 443, RW_VERDICT_DROP,
				  RW_REASON_NOT_ALLOWLISTED);
	char tag[16];

	assert_int_equal(rw_evstore_init(&s, 4), 0);
	assert_int_equal(rw_evstore_first_id(&s), 0);
	assert_int_equal(rw_evstore_last_id(&s), 0);
	rw_evfilter_init(&f);
	assert_int_equal(query(&s, &f, &c), 0);
	for (int i = 1; i <= 6; i++) {
		snprintf(tag, sizeof(tag), "e%d", i);
		add(&s, &ev, tag);
	}
	/* 6 added into 4 places: ids 3..6 left, the two oldest evicted and counted. */
	assert_int_equal(rw_evstore_first_id(&s), 3);
	assert_int_equal(rw_evstore_last_id(&s), 6);
	assert_int_equal(s.evicted, 2);
	assert_int_equal(query(&s, &f, &c), 4);
	assert_int_equal(c.ids[0], 3);
	assert_int_equal(c.ids[3], 6);
	assert_string_equal(c.tags[0], "e3");
	assert_string_equal(c.tags[3], "e6");

	/* since: strictly after the cursor; a cursor older than the buffer gets all it holds. */
	f.since = 4;
	assert_int_equal(query(&s, &f, &c), 2);
	assert_int_equal(c.ids[0], 5);
	f.since = 1;
	assert_int_equal(query(&s, &f, &c), 4);
	f.since = 6;
	assert_int_equal(query(&s, &f, &c), 0);
	f.since = 1000;
	assert_int_equal(query(&s, &f, &c), 0);

	/* limit: the newest N, still oldest first. */
	f.since = 0;
	f.limit = 2;
	assert_int_equal(query(&s, &f, &c), 2);
	assert_int_equal(c.ids[0], 5);
	assert_int_equal(c.ids[1], 6);

	/* the callback stops the walk */
	memset(&c, 0, sizeof(c));
	f.limit = 0;
	c.stop_after = 1;
	assert_int_equal(rw_evstore_query(&s, &f, collect, &c), 1);
	rw_evstore_free(&s);
	assert_int_equal(rw_evstore_init(&s, 0), -EINVAL);
}

static void test_store_filters(void **state)
{
	struct rw_evstore s;
	struct rw_evfilter f;
	struct collect c = {};
	struct rw_event e1 = mkev("run-a", "10.1.2.3", "169.254.169.254", 80, RW_VERDICT_DROP,
				  RW_REASON_METADATA);
	struct rw_event e2 = mkev("run-b", "10.1.2.4", "93.184.216.34", 443, RW_VERDICT_ALLOW,
				  RW_REASON_ALLOWED);
	struct rw_event e3 = mkev("run-a", "10.1.2.3", "93.184.216.34", 8443, RW_VERDICT_DROP,
				  RW_REASON_NOT_ALLOWLISTED);
	struct rw_event e4 = mkev("run-a", "10.1.2.3", "172.20.0.12", 4096, RW_VERDICT_DROP,
				  RW_REASON_INBOUND_DENIED);

	/* inbound: the peer is the source, the pod the destination */
	e4.dir = RW_DIR_INGRESS;
	e4.saddr = ip("172.20.0.12");
	e4.daddr = ip("10.1.2.3");
	assert_int_equal(rw_evstore_init(&s, 16), 0);
	add(&s, &e1, "e1");
	add(&s, &e2, "e2");
	add(&s, &e3, "e3");
	add(&s, &e4, "e4");

#define EXPECT(field_setup, n_expected, first_tag)                 \
	do {                                                       \
		rw_evfilter_init(&f);                              \
		field_setup;                                       \
		assert_int_equal(query(&s, &f, &c), n_expected);   \
		if (n_expected)                                    \
			assert_string_equal(c.tags[0], first_tag); \
	} while (0)

	EXPECT((void)0, 4, "e1");
	EXPECT(snprintf(f.run, sizeof(f.run), "run-b"), 1, "e2");
	EXPECT(snprintf(f.run, sizeof(f.run), "run-a"), 3, "e1");
	EXPECT(f.verdict = RW_VERDICT_ALLOW, 1, "e2");
	EXPECT(f.verdict = RW_VERDICT_DROP, 3, "e1");
	EXPECT(f.reason = RW_REASON_NOT_ALLOWLISTED, 1, "e3");
	EXPECT((f.has_pod = true, f.pod = ipa("10.1.2.3")), 3, "e1");
	EXPECT((f.has_pod = true, f.pod = ipa("10.1.2.9")), 0, "");
	EXPECT((f.has_dst = true, f.dst = ipa("93.184.216.34")), 2, "e2");
	EXPECT((f.has_dst = true, f.dst = ipa("93.184.216.34"), f.dport = 8443), 1, "e3");
	EXPECT((f.has_dst = true, f.dst = ipa("172.20.0.12")), 1, "e4");
	EXPECT((f.has_dst = true, f.dst = ipa("93.184.216.34"), f.verdict = RW_VERDICT_DROP), 1,
	       "e3");
	EXPECT(snprintf(f.node, sizeof(f.node), "node-a"), 0, "");
	/* the limit counts matches, not entries scanned */
	EXPECT((f.verdict = RW_VERDICT_DROP, f.limit = 2), 2, "e3");
#undef EXPECT
	rw_evstore_free(&s);
}

static void test_query_parse(void **state)
{
	struct rw_evfilter f;
	char err[256];
	static const char ok[] = "run=run-7f3a&pod=10.1.2.3&verdict=drop&reason=not-allowlisted"
				 "&dst=93.184.216.34%3A443&since=42&limit=10&node=node-a";

	rw_evfilter_init(&f);
	assert_int_equal(rw_query_parse(ok, strlen(ok), &f, err, sizeof(err)), 0);
	assert_string_equal(f.run, "run-7f3a");
	assert_true(f.has_pod);
	assert_true(ip_is(&f.pod, "10.1.2.3"));
	assert_int_equal(f.verdict, RW_VERDICT_DROP);
	assert_int_equal(f.reason, RW_REASON_NOT_ALLOWLISTED);
	assert_true(f.has_dst);
	assert_true(ip_is(&f.dst, "93.184.216.34"));
	assert_int_equal(f.dport, 443);
	assert_int_equal(f.since, 42);
	assert_int_equal(f.limit, 10);
	assert_string_equal(f.node, "node-a");

	/* empty pieces are ignored; allowed is a verdict name too; a query need not end in NUL */
	rw_evfilter_init(&f);
	assert_int_equal(rw_query_parse("&&verdict=allowed&XYZ", 18, &f, err, sizeof(err)), 0);
	assert_int_equal(f.verdict, RW_VERDICT_ALLOW);
	assert_int_equal(rw_query_parse("", 0, &f, err, sizeof(err)), 0);

	static const struct {
		const char *qs;
		const char *err;
	} bad[] = {
		{"colour=red",
		 "unknown parameter 'colour'; valid: run, pod, verdict, reason, dst, node, since, limit"},
		{"run=", "run '': expected a run id (1-63 of [A-Za-z0-9._-])"},
		{"run=a%20b", "run 'a b': expected a run id (1-63 of [A-Za-z0-9._-])"},
		{"pod=10.1.2.300", "pod '10.1.2.300': expected an IPv4 or IPv6 address"},
		{"pod=fe80::1%25eth0", "pod 'fe80::1%eth0': expected an IPv4 or IPv6 address"},
		{"verdict=maybe", "verdict 'maybe': expected allow or drop"},
		{"reason=privat-destination", "reason 'privat-destination': not a reason name"},
		{"dst=1.2.3.4:0", "dst '1.2.3.4:0': port must be 1-65535"},
		{"dst=1.2.3.4:65536", "dst '1.2.3.4:65536': port must be 1-65535"},
		{"dst=example.com", "dst 'example.com': expected IP, IP:PORT or [IPv6]:PORT"},
		{"dst=[2001:db8::1]:0", "dst '[2001:db8::1]:0': port must be 1-65535"},
		{"dst=[10.1.2.3]:80", "dst '[10.1.2.3]:80': expected IP, IP:PORT or [IPv6]:PORT"},
		{"dst=[2001:db8::1", "dst '[2001:db8::1': expected IP, IP:PORT or [IPv6]:PORT"},
		{"since=-1", "since '-1': expected an event id (an unsigned integer)"},
		{"since=18446744073709551616",
		 "since '18446744073709551616': expected an event id (an unsigned integer)"},
		{"limit=0", "limit '0': expected 1-10000"},
		{"limit=10001", "limit '10001': expected 1-10000"},
		{"run=%zz", "run: badly encoded value"},
		{"run=%4", "run: badly encoded value"},
		{"run=%00", "run: badly encoded value"},
		{"%=1", "query parameter 1: badly encoded name"},
		{"limit=1&limit=1&limit=1&limit=1&limit=1&limit=1&limit=1&limit=1&limit=1&limit=1&"
		 "limit=1&limit=1&limit=1&limit=1&limit=1&limit=1&limit=1",
		 "more than 16 query parameters"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rw_evfilter_init(&f);
		err[0] = '\0';
		assert_int_equal(rw_query_parse(bad[i].qs, strlen(bad[i].qs), &f, err, sizeof(err)),
				 -EINVAL);
		if (strcmp(err, bad[i].err))
			fail_msg("query '%s': error '%s', expected '%s'", bad[i].qs, err,
				 bad[i].err);
	}

	/* oversized values and names */
	{
		char big[600];

		memset(big, 'a', sizeof(big));
		memcpy(big, "run=", 4);
		assert_int_equal(rw_query_parse(big, sizeof(big), &f, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, "run: too long a value");
		assert_int_equal(rw_query_parse(big + 4, 100, &f, err, sizeof(err)), -EINVAL);
		assert_string_equal(err, "query parameter 1: too long a name");
	}
}

/* An IPv6 event (ethertype 0x86dd, saddr6/daddr6) of the pod to dst. */
static struct rw_event mkev6(const char *run, const char *pod, const char *dst, int port,
			     int verdict, int reason)
{
	struct rw_event ev = mkev(run, "0.0.0.0", "0.0.0.0", port, verdict, reason);

	ev.ethertype = htons(0x86dd);
	assert_int_equal(inet_pton(AF_INET6, pod, ev.saddr6), 1);
	assert_int_equal(inet_pton(AF_INET6, dst, ev.daddr6), 1);
	return ev;
}

/* The filters and the aggregates take IPv6 events by their 16-byte addresses: pod= and dst=
 * (bracketed with a port) select them, an IPv4 filter never does (not even the address of the
 * IPv6 one's first word), and an IPv6 peer is an aggregate of its own.
 */
static void test_ipv6(void **state)
{
	struct rw_evstore s;
	struct rw_evfilter f;
	struct collect c;
	struct rw_aggs a;
	struct rw_agg_key k = {};
	const struct rw_agg *g;
	char err[256];
	struct rw_event e6 = mkev6("run-a", "2600:1f14:abc::7", "2606:4700::1111", 443,
				   RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED);
	struct rw_event e6b = mkev6("run-a", "2600:1f14:abc::7", "2606:4700::2222", 443,
				    RW_VERDICT_DROP, RW_REASON_NOT_ALLOWLISTED);
	struct rw_event e4 = mkev("run-a", "10.1.2.3", "38.6.71.0", 443, RW_VERDICT_DROP,
				  RW_REASON_NOT_ALLOWLISTED);
	static const char q[] =
		"pod=2600%3A1f14%3Aabc%3A%3A7&dst=%5B2606%3A4700%3A%3A1111%5D%3A443";

	assert_int_equal(rw_evstore_init(&s, 16), 0);
	add(&s, &e6, "e6");
	add(&s, &e6b, "e6b");
	add(&s, &e4, "e4");
	rw_evfilter_init(&f);
	assert_int_equal(rw_query_parse(q, strlen(q), &f, err, sizeof(err)), 0);
	assert_true(ip_is(&f.pod, "2600:1f14:abc::7"));
	assert_true(ip_is(&f.dst, "2606:4700::1111"));
	assert_int_equal(f.dport, 443);
	assert_int_equal(query(&s, &f, &c), 1);
	assert_string_equal(c.tags[0], "e6");
	assert_int_equal(query_by(&s, &f, "pod", "2600:1f14:abc::7", &c), 2);
	assert_int_equal(query_by(&s, &f, "dst", "2606:4700::2222", &c), 1);
	assert_int_equal(f.dport, 0);
	assert_string_equal(c.tags[0], "e6b");
	/* 38.6.71.0 is 0x26064700, the first word of 2606:4700::1111 */
	assert_int_equal(query_by(&s, &f, "dst", "38.6.71.0", &c), 1);
	assert_string_equal(c.tags[0], "e4");
	rw_evstore_free(&s);

	assert_int_equal(rw_aggs_init(&a, 8), 0);
	assert_non_null(rw_aggs_add(&a, &e6, "", 100, NULL, NULL));
	assert_non_null(rw_aggs_add(&a, &e6b, "", 200, NULL, NULL));
	assert_non_null(rw_aggs_add(&a, &e4, "", 300, NULL, NULL));
	assert_int_equal(a.count, 3);
	k = egress_key("run-a", "2606:4700::1111", 443);
	g = rw_aggs_find(&a, &k);
	assert_non_null(g);
	assert_int_equal(g->count, 1);
	assert_true(ip_is(&g->pod, "2600:1f14:abc::7"));
	rw_aggs_free(&a);
}

static void test_aggregates(void **state)
{
	struct rw_aggs a;
	struct rw_agg_key k = {};
	const struct rw_agg *g;
	struct rw_event d1 = mkev("run-a", "10.1.2.3", "93.184.216.34", 443, RW_VERDICT_DROP,
				  RW_REASON_NOT_ALLOWLISTED);
	struct rw_event ok =
		mkev("run-a", "10.1.2.3", "172.20.0.10", 443, RW_VERDICT_ALLOW, RW_REASON_ALLOWED);
	struct rw_event other = mkev("run-b", "10.1.2.4", "93.184.216.34", 443, RW_VERDICT_DROP,
				     RW_REASON_NOT_ALLOWLISTED);

	assert_int_equal(rw_aggs_init(&a, 2), 0);
	assert_non_null(rw_aggs_add(&a, &d1, "", 100, NULL, NULL));
	assert_non_null(rw_aggs_add(&a, &d1, "", 200, NULL, NULL));
	/* another source port is the same aggregate */
	d1.sport = htons(40001);
	assert_non_null(rw_aggs_add(&a, &d1, "", 300, NULL, NULL));
	assert_non_null(rw_aggs_add(&a, &ok, "", 150, "services[0] egress-proxy", "egress-proxy"));
	assert_int_equal(a.count, 2);

	k = egress_key("run-a", "93.184.216.34", 443);
	g = rw_aggs_find(&a, &k);
	assert_non_null(g);
	assert_int_equal(g->count, 3);
	assert_int_equal(g->by_reason[RW_REASON_NOT_ALLOWLISTED], 3);
	assert_int_equal(g->first_ns, 100);
	assert_int_equal(g->last_ns, 300);
	assert_int_equal(g->verdict, RW_VERDICT_DROP);
	assert_true(ip_is(&g->pod, "10.1.2.3"));

	k.peer = ipa("172.20.0.10");
	g = rw_aggs_find(&a, &k);
	assert_non_null(g);
	assert_string_equal(g->rule, "services[0] egress-proxy");
	assert_string_equal(g->peer_name, "egress-proxy");
	assert_int_equal(g->by_reason[RW_REASON_ALLOWED], 1);

	/* Full: a new key drops the one updated least recently (the egress-proxy one was
	 * touched last, so the drops to 93.184.216.34 go), and the drop is counted.
	 */
	assert_non_null(rw_aggs_add(&a, &d1, "", 400, NULL, NULL)); /* touch: now newest */
	assert_non_null(rw_aggs_add(&a, &other, "", 500, NULL, NULL));
	assert_int_equal(a.count, 2);
	assert_int_equal(a.evicted, 1);
	assert_null(rw_aggs_find(&a, &k)); /* egress-proxy went */
	k.peer = ipa("93.184.216.34");
	g = rw_aggs_find(&a, &k);
	assert_non_null(g);
	assert_int_equal(g->count, 4);
	snprintf(k.run, sizeof(k.run), "run-b");
	assert_non_null(rw_aggs_find(&a, &k));
	/* a node is part of the key */
	snprintf(k.node, sizeof(k.node), "node-b");
	assert_null(rw_aggs_find(&a, &k));
	rw_aggs_free(&a);
}

static int count_each(const struct rw_agg *g, void *data)
{
	(*(int *)data)++;
	return 0;
}

static void test_aggregates_many(void **state)
{
	struct rw_aggs a;
	int n = 0;

	/* More keys than places, in a loop: the count never passes the bound. */
	assert_int_equal(rw_aggs_init(&a, 100), 0);
	for (int i = 0; i < 1000; i++) {
		char dst[32];
		struct rw_event ev;

		snprintf(dst, sizeof(dst), "93.184.%d.%d", i / 250, i % 250 + 1);
		ev = mkev("run-a", "10.1.2.3", dst, 443, RW_VERDICT_DROP,
			  RW_REASON_NOT_ALLOWLISTED);
		assert_non_null(rw_aggs_add(&a, &ev, "", i, NULL, NULL));
		assert_true(a.count <= 100);
	}
	assert_int_equal(a.count, 100);
	assert_int_equal(a.evicted, 900);
	rw_aggs_each(&a, count_each, &n);
	assert_int_equal(n, 100);
	/* the newest first */
	assert_int_equal(a.newest->last_ns, 999);
	assert_int_equal(a.oldest->last_ns, 900);
	rw_aggs_free(&a);
}

/* ---- the aggregates' keyed hash ---- */

/* The reference vectors of SipHash-2-4 (Aumasson and Bernstein): key 00..0f, messages 00..(n-1). */
static void test_siphash_vectors(void **state)
{
	const struct rw_hash_key k = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
	unsigned char m[16];

	(void)state;
	for (int i = 0; i < 16; i++)
		m[i] = i;
	assert_true(rw_siphash(&k, m, 0) == 0x726fdb47dd0e0e31ULL);
	assert_true(rw_siphash(&k, m, 8) == 0x93f5f5799a932462ULL);
	assert_true(rw_siphash(&k, m, 15) == 0xa129ca6149be45e5ULL);
}

#define N_KEYS 64

/* Which bucket holds each of N_KEYS aggregates (one per destination). */
static void agg_buckets(struct rw_aggs *a, size_t out[N_KEYS])
{
	for (int i = 0; i < N_KEYS; i++) {
		char dst[32];
		struct rw_event ev;
		const struct rw_agg *g;

		snprintf(dst, sizeof(dst), "93.184.0.%d", i + 1);
		ev = mkev("run-a", "10.1.2.3", dst, 443, RW_VERDICT_DROP,
			  RW_REASON_NOT_ALLOWLISTED);
		assert_non_null(g = rw_aggs_add(a, &ev, "", i, NULL, NULL));
		out[i] = a->n_buckets;
		for (size_t b = 0; b < a->n_buckets; b++)
			for (const struct rw_agg *c = a->buckets[b]; c; c = c->hnext)
				if (c == g)
					out[i] = b;
		assert_true(out[i] < a->n_buckets);
	}
}

/* The same keys land in other buckets under another key, and are all found again. */
static void test_aggregates_keyed(void **state)
{
	const struct rw_hash_key k1 = {1, 2}, k2 = {3, 4};
	struct rw_aggs a, b;
	size_t ba[N_KEYS], bb[N_KEYS];
	int differ = 0;

	(void)state;
	assert_int_equal(rw_aggs_init_keyed(&a, 100, &k1), 0);
	assert_int_equal(rw_aggs_init_keyed(&b, 100, &k2), 0);
	agg_buckets(&a, ba);
	agg_buckets(&b, bb);
	for (int i = 0; i < N_KEYS; i++)
		differ += ba[i] != bb[i];
	assert_true(differ > N_KEYS / 2);
	for (struct rw_aggs *x = &a; x; x = x == &a ? &b : NULL) {
		assert_int_equal(x->count, N_KEYS);
		for (const struct rw_agg *g = x->newest; g; g = g->older)
			assert_ptr_equal(rw_aggs_find(x, &g->key), g);
	}
	rw_aggs_free(&a);
	rw_aggs_free(&b);
}

/* Each process has its own key: two agents (here two runs of this program, which print their
 * buckets when RW_TEST_BUCKETS is set) put the same keys in other buckets, so chains cannot be
 * built offline against a known hash.
 */
static int print_buckets(void)
{
	struct rw_aggs a;
	size_t b[N_KEYS];
	ssize_t n;

	if (rw_aggs_init(&a, 100))
		return 1;
	agg_buckets(&a, b);
	rw_aggs_free(&a);
	n = write(STDOUT_FILENO, b, sizeof(b));
	return n == (ssize_t)sizeof(b) ? 0 : 1;
}

static void child_buckets(size_t out[N_KEYS])
{
	int fds[2];
	pid_t pid;
	int status;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		char *argv[] = {"test_event_store", NULL};

		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		setenv("RW_TEST_BUCKETS", "1", 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], out, sizeof(size_t) * N_KEYS),
			 (ssize_t)(sizeof(size_t) * N_KEYS));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_aggregates_key_per_process(void **state)
{
	size_t b1[N_KEYS], b2[N_KEYS];

	(void)state;
	child_buckets(b1);
	child_buckets(b2);
	assert_memory_not_equal(b1, b2, sizeof(b1));
}

static void test_refused_top(void **state)
{
	struct rw_refused_top top[RW_REFUSED_TOP_K + 4];
	struct rw_event ev;
	struct rw_evstore s;
	char tag[16];
	int n;

	(void)state;
	assert_int_equal(rw_evstore_init(&s, 1000), 0);
	assert_int_equal(rw_refused_top(&s, top, RW_REFUSED_TOP_K), 0);
	/* 12 destinations, destination i refused i + 1 times; allowed and ingress events, many,
	 * count for nothing.
	 */
	for (int i = 0; i < 12; i++) {
		char dst[32];

		snprintf(dst, sizeof(dst), "93.184.216.%d", i);
		ev = mkev("run-a", "10.1.2.3", dst, 443, RW_VERDICT_DROP,
			  RW_REASON_NOT_ALLOWLISTED);
		for (int k = 0; k <= i; k++) {
			snprintf(tag, sizeof(tag), "d%d.%d", i, k);
			add(&s, &ev, tag);
		}
		ev.verdict = RW_VERDICT_ALLOW;
		ev.reason = RW_REASON_ALLOWED;
		for (int k = 0; k < 30; k++)
			add(&s, &ev, "allowed");
		ev.verdict = RW_VERDICT_DROP;
		ev.reason = RW_REASON_INBOUND_DENIED;
		ev.dir = RW_DIR_INGRESS;
		for (int k = 0; k < 30; k++)
			add(&s, &ev, "ingress");
	}
	/* The same destination and port, another reason and another port: keys of their own. */
	ev = mkev("run-b", "10.1.2.4", "93.184.216.11", 443, RW_VERDICT_DROP, RW_REASON_DNS);
	add(&s, &ev, "dns");
	n = rw_refused_top(&s, top, RW_REFUSED_TOP_K);
	assert_int_equal(n, RW_REFUSED_TOP_K);
	for (int i = 0; i < n; i++) {
		char want[32];

		snprintf(want, sizeof(want), "93.184.216.%d", 11 - i);
		assert_true(ip_is(&top[i].dst, want));
		assert_int_equal(top[i].count, 12 - i);
		assert_int_equal(top[i].port, 443);
		assert_int_equal(top[i].proto, IPPROTO_TCP);
		assert_int_equal(top[i].reason, RW_REASON_NOT_ALLOWLISTED);
	}
	/* k above the 13 keys: every key, ties by key (the two of 1 event: .0 before .11's dns). */
	n = rw_refused_top(&s, top, RW_REFUSED_TOP_K + 4);
	assert_int_equal(n, 13);
	assert_true(ip_is(&top[11].dst, "93.184.216.0") && top[11].count == 1);
	assert_true(ip_is(&top[12].dst, "93.184.216.11") && top[12].count == 1 &&
		    top[12].reason == RW_REASON_DNS);
	rw_evstore_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_cursor_and_eviction),
		cmocka_unit_test(test_store_filters),
		cmocka_unit_test(test_query_parse),
		cmocka_unit_test(test_aggregates),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_aggregates_many),
		cmocka_unit_test(test_siphash_vectors),
		cmocka_unit_test(test_aggregates_keyed),
		cmocka_unit_test(test_aggregates_key_per_process),
		cmocka_unit_test(test_refused_top),
	};

	if (getenv("RW_TEST_BUCKETS"))
		return print_buckets();

	return cmocka_run_group_tests(tests, NULL, NULL);
}
