// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_feed.c: the view's feed (user/view/feed.c) between its writer (the agent's loop) and its
 * readers (HTTP threads scanning under the feed's lock): a writer never waits for a reader.
 * While a reader holds the lock, events and a status set meanwhile wait aside, in order, and go
 * in at the next add or flush that finds the lock free; past RW_FEED_PENDING_MAX an event is
 * counted, never waited for (cmocka).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_view.h"
#include "http.h"
#include "rulename.h"

/* A writer that waits for the reader below waits forever (the reader lets go only when told,
 * after the writes): the alarm turns that hang into a failure.
 */
static void on_alarm(int sig)
{
	static const char msg[] = "test_feed: a writer blocked behind a reader holding the lock\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

struct reader {
	struct rw_feed *f;
	pthread_t t;
	pthread_mutex_t m;
	pthread_cond_t c;
	bool holding, release;
};

/* A query: takes the feed's lock and holds it until released. */
static void *reader_main(void *data)
{
	struct reader *r = data;

	pthread_mutex_lock(&r->f->lock);
	pthread_mutex_lock(&r->m);
	r->holding = true;
	pthread_cond_broadcast(&r->c);
	while (!r->release)
		pthread_cond_wait(&r->c, &r->m);
	pthread_mutex_unlock(&r->m);
	pthread_mutex_unlock(&r->f->lock);
	return NULL;
}

static void reader_start(struct reader *r, struct rw_feed *f)
{
	memset(r, 0, sizeof(*r));
	r->f = f;
	pthread_mutex_init(&r->m, NULL);
	pthread_cond_init(&r->c, NULL);
	assert_int_equal(pthread_create(&r->t, NULL, reader_main, r), 0);
	pthread_mutex_lock(&r->m);
	while (!r->holding)
		pthread_cond_wait(&r->c, &r->m);
	pthread_mutex_unlock(&r->m);
}

/* From here a writer blocked for 30 s is a failure (on_alarm()), until alarm(0). */
static void watchdog_start(void)
{
	signal(SIGALRM, on_alarm);
	alarm(30);
}

static void reader_stop(struct reader *r)
{
	pthread_mutex_lock(&r->m);
	r->release = true;
	pthread_cond_broadcast(&r->c);
	pthread_mutex_unlock(&r->m);
	assert_int_equal(pthread_join(r->t, NULL), 0);
	pthread_mutex_destroy(&r->m);
	pthread_cond_destroy(&r->c);
}

static void add(struct rw_feed *f, int i)
{
	struct rw_event ev = {.verdict = RW_VERDICT_DROP, .reason = RW_REASON_NOT_ALLOWLISTED};
	char json[64];

	ev.daddr = htonl(0x5db80000u + (unsigned int)i);
	ev.dport = htons(443);
	snprintf(json, sizeof(json), "{\"n\":%d}", i);
	rw_feed_add(f, &ev, "", 1000 + i, json, strlen(json), "", NULL);
}

static int nth_json(const struct rw_evstore_entry *e, void *data)
{
	int *want = data;
	char buf[64];

	snprintf(buf, sizeof(buf), "{\"n\":%d}", (*want)++);
	assert_string_equal(e->json, buf);
	return 0;
}

/* The store holds n events, {"n":0} to {"n":n-1}, in the order they were added. */
static void assert_in_order(struct rw_feed *f, int n)
{
	struct rw_evfilter all = {};
	int next = 0;

	rw_evfilter_init(&all);
	rw_evstore_query(&f->events, &all, nth_json, &next);
	assert_int_equal(next, n);
}

static void test_writer_never_waits(void **state)
{
	struct rw_feed f;
	struct reader r;

	(void)state;
	assert_int_equal(rw_feed_init(&f, 1000, 1000), 0);
	add(&f, 0);
	reader_start(&r, &f);
	watchdog_start();
	for (int i = 1; i <= 100; i++)
		add(&f, i);
	rw_feed_set_status(&f, strdup("{\"status\":2}"), true, "ready 2\n");
	rw_feed_flush(&f); /* the lock is still held: nothing goes in */
	alarm(0);
	assert_int_equal(f.n_pending, 100);
	assert_int_equal(f.deferred, 100);
	assert_int_equal(f.deferred_dropped, 0);
	reader_stop(&r);
	assert_int_equal(f.events.count, 1);
	assert_null(f.status);
	rw_feed_flush(&f);
	assert_int_equal(f.n_pending, 0);
	assert_int_equal(f.events.count, 101);
	assert_int_equal(f.aggs.count, 101);
	assert_string_equal(f.status, "{\"status\":2}");
	assert_true(f.ready);
	assert_string_equal(f.ready_text, "ready 2\n");
	assert_in_order(&f, 101);
	rw_feed_free(&f);
}

/* Past RW_FEED_PENDING_MAX an event is counted, not kept and not waited for. */
static void test_pending_bound(void **state)
{
	struct rw_feed f;
	struct reader r;

	(void)state;
	assert_int_equal(rw_feed_init(&f, RW_FEED_PENDING_MAX + 100, 1000), 0);
	reader_start(&r, &f);
	watchdog_start();
	for (int i = 0; i < RW_FEED_PENDING_MAX + 10; i++)
		add(&f, i);
	alarm(0);
	assert_int_equal(f.n_pending, RW_FEED_PENDING_MAX);
	assert_int_equal(f.deferred, RW_FEED_PENDING_MAX);
	assert_int_equal(f.deferred_dropped, 10);
	reader_stop(&r);
	rw_feed_flush(&f);
	assert_int_equal(f.events.count, RW_FEED_PENDING_MAX);
	rw_feed_free(&f);
}

/* The next add that finds the lock free hands over what waited first, then itself. */
static void test_next_add_hands_over_first(void **state)
{
	struct rw_feed f;
	struct reader r;

	(void)state;
	assert_int_equal(rw_feed_init(&f, 1000, 1000), 0);
	reader_start(&r, &f);
	for (int i = 0; i < 3; i++)
		add(&f, i);
	reader_stop(&r);
	add(&f, 3);
	assert_int_equal(f.n_pending, 0);
	assert_int_equal(f.events.count, 4);
	assert_in_order(&f, 4);
	rw_feed_free(&f);
}

/* The graph of IPv6 events: the sandbox's pod and the destination in RFC 5952 text, the
 * destination's id and edge keyed by it, and dst= with a bracketed port selecting them.
 */
static void test_graph_ipv6(void **state)
{
	struct rw_event ev = {.verdict = RW_VERDICT_DROP, .reason = RW_REASON_NOT_ALLOWLISTED};
	struct rw_event v4 = ev;
	struct rw_evfilter f;
	struct rw_feed feed;
	json_t *g, *d, *e, *sb;
	const char *key;
	char err[128];

	(void)state;
	snprintf(ev.run_id, sizeof(ev.run_id), "run-6");
	ev.ethertype = htons(0x86dd);
	ev.proto = 6;
	ev.dport = htons(443);
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14:abc::7", ev.saddr6), 1);
	assert_int_equal(inet_pton(AF_INET6, "2606:4700:0:0::1111", ev.daddr6), 1);
	v4.ethertype = htons(0x0800);
	v4.proto = 6;
	v4.dport = htons(443);
	v4.saddr = htonl(0x0a010203);
	v4.daddr = ev.daddr6[0];
	snprintf(v4.run_id, sizeof(v4.run_id), "run-4");
	assert_int_equal(rw_feed_init(&feed, 100, 100), 0);
	rw_feed_add(&feed, &ev, "", 1000, "{}", 2, "", NULL);
	rw_feed_add(&feed, &v4, "", 1001, "{}", 2, "", NULL);
	rw_evfilter_init(&f);
	assert_int_equal(rw_query_set(&f, "dst", "[2606:4700::1111]:443", err, sizeof(err)), 0);
	g = rw_graph_json(&feed.aggs, &f);
	assert_non_null(g);
	assert_int_equal(json_array_size(json_object_get(g, "destinations")), 1);
	d = json_array_get(json_object_get(g, "destinations"), 0);
	assert_string_equal(json_string_value(json_object_get(d, "ip")), "2606:4700::1111");
	assert_string_equal(json_string_value(json_object_get(d, "id")), "2606:4700::1111");
	assert_int_equal(json_array_size(json_object_get(g, "sandboxes")), 1);
	sb = json_array_get(json_object_get(g, "sandboxes"), 0);
	assert_string_equal(json_string_value(json_object_get(sb, "pod")), "2600:1f14:abc::7");
	assert_string_equal(json_string_value(json_object_get(sb, "id")), "run-6/2600:1f14:abc::7");
	assert_int_equal(json_array_size(json_object_get(g, "edges")), 1);
	e = json_array_get(json_object_get(g, "edges"), 0);
	key = json_string_value(json_object_get(e, "destination"));
	assert_string_equal(key, "2606:4700::1111");
	json_decref(g);
	rw_feed_free(&feed);
}

/* The view names an IPv6 peer by the snapshot's IPv6 services (the longest prefix), never by an
 * IPv4 service whose address is its first word, and an IPv4 peer never by an IPv6 service.
 */
static void test_service_names_by_family(void **state)
{
	struct rw_policy_rule svc[3] = {};
	struct rw_policy p = {};
	__be32 a6[4];

	(void)state;
	snprintf(svc[0].name, sizeof(svc[0].name), "proxy6-net");
	svc[0].family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14::", svc[0].addr6), 1);
	svc[0].prefixlen = 32;
	snprintf(svc[1].name, sizeof(svc[1].name), "proxy6");
	svc[1].family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14:0:1::10", svc[1].addr6), 1);
	svc[1].prefixlen = 128;
	snprintf(svc[2].name, sizeof(svc[2].name), "proxy4");
	svc[2].family = AF_INET;
	svc[2].addr = htonl(0x26001f14); /* 38.0.31.20: 2600:1f14::'s first word */
	svc[2].prefixlen = 32;
	p.services = svc;
	p.n_services = 3;
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14:0:1::10", a6), 1);
	assert_string_equal(rw_policy_service_at6(&p, a6), "proxy6");
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14:ffff::1", a6), 1);
	assert_string_equal(rw_policy_service_at6(&p, a6), "proxy6-net");
	assert_int_equal(inet_pton(AF_INET6, "2600:1f15::1", a6), 1);
	assert_string_equal(rw_policy_service_at6(&p, a6), "");
	assert_string_equal(rw_policy_service_at(&p, htonl(0x26001f14)), "proxy4");
	assert_string_equal(rw_policy_service_at(&p, 0), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writer_never_waits),
		cmocka_unit_test(test_next_add_hands_over_first),
		cmocka_unit_test(test_pending_bound),
		cmocka_unit_test(test_graph_ipv6),
		cmocka_unit_test(test_service_names_by_family),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
