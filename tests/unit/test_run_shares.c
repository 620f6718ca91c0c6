// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_run_shares.c: one run's burst cannot push another run out of the agent's node-wide
 * tables. Run A refuses many distinct destinations, run B one or a few; B's events, aggregates,
 * access request and dedup record survive, A's own oldest are the ones displaced, and every
 * displacement is counted by cause. The access requests go to a real HTTP receiver on
 * loopback (libmicrohttpd), which answers 503 while closed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include "access_requests.h"
#include "event_store.h"
#include "reasons.h"
#include "unit_event.h"

static struct rw_event refusal(const char *run, unsigned int n)
{
	/* to 93.184.x.y: public, one per n */
	return tcp_out_event(run, htonl(0x0a000001u), htonl(0x5db80000u + n), 443, RW_VERDICT_DROP,
			     RW_REASON_NOT_ALLOWLISTED);
}

static uint64_t add_event(struct rw_evstore *s, const char *run, unsigned int n)
{
	struct rw_event ev = refusal(run, n);
	char json[64];
	int len = snprintf(json, sizeof(json), "{\"run\":\"%s\",\"n\":%u}", run, n);
	uint64_t id = rw_evstore_add(s, &ev, "", json, (size_t)len);

	assert_true(id > 0);
	return id;
}

struct ids {
	uint64_t id[16384];
	size_t n;
};

static int collect(const struct rw_evstore_entry *e, void *data)
{
	struct ids *c = data;

	assert_true(c->n < 16384);
	c->id[c->n++] = e->id;
	return 0;
}

static size_t query(const struct rw_evstore *s, const char *run, uint64_t since, struct ids *c)
{
	struct rw_evfilter f;

	rw_evfilter_init(&f);
	if (run)
		snprintf(f.run, sizeof(f.run), "%s", run);
	f.since = since;
	c->n = 0;
	return rw_evstore_query(s, &f, collect, c);
}

/* The store's default 10 000: B's 5 events, then A's burst of 12 000 (and of 400 distinct
 * refusals many times over, as a sandbox within its event budget sends in seconds).
 */
static void test_events_burst(void **state)
{
	static struct ids c;
	struct rw_evstore s;
	uint64_t b_ids[5];

	(void)state;
	assert_int_equal(rw_evstore_init(&s, RW_EVSTORE_DEFAULT), 0);
	for (unsigned int i = 0; i < 5; i++)
		b_ids[i] = add_event(&s, "run-b", i);
	for (unsigned int i = 0; i < 12000; i++)
		add_event(&s, "run-a", i % 400);
	assert_int_equal(s.count, RW_EVSTORE_DEFAULT);
	assert_int_equal(s.evicted, 2005);
	assert_int_equal(s.displaced[RW_SHARE_OWN], 2005);
	assert_int_equal(s.displaced[RW_SHARE_FAIR], 0);
	/* B's five are all there, in order */
	assert_int_equal(query(&s, "run-b", 0, &c), 5);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(c.id[i], b_ids[i]);
	/* A's oldest went: it keeps its newest 9 995 (ids 2011..12005) */
	assert_int_equal(query(&s, "run-a", 0, &c), 9995);
	assert_int_equal(c.id[0], 2011);
	assert_int_equal(c.id[9994], 12005);
	assert_int_equal(rw_evstore_first_id(&s), 1);
	assert_int_equal(rw_evstore_last_id(&s), 12005);
	/* the cursor across the hole left by A's displaced events */
	assert_int_equal(query(&s, NULL, 3, &c), 2 + 9995);
	assert_int_equal(c.id[0], 4);
	assert_int_equal(c.id[1], 5);
	assert_int_equal(c.id[2], 2011);
	assert_int_equal(query(&s, NULL, 2500, &c), 12005 - 2500);
	assert_int_equal(c.id[0], 2501);
	rw_evstore_free(&s);
}

/* A run under its share that finds the store full takes the slot of the run holding the most;
 * one at its share displaces its own.
 */
static void test_events_fair_share(void **state)
{
	static struct ids c;
	struct rw_evstore s;

	(void)state;
	assert_int_equal(rw_evstore_init(&s, 30), 0);
	for (unsigned int i = 0; i < 20; i++)
		add_event(&s, "run-a", i); /* ids 1..20 */
	for (unsigned int i = 0; i < 10; i++)
		add_event(&s, "run-c", i); /* ids 21..30 */
	add_event(&s, "run-b", 0);	   /* 31: B holds nothing, share 10: A's oldest (1) goes */
	assert_int_equal(s.displaced[RW_SHARE_FAIR], 1);
	add_event(&s, "run-c", 10); /* 32: C holds 10 of a share of 10: its own oldest (21) */
	assert_int_equal(s.displaced[RW_SHARE_OWN], 1);
	add_event(&s, "run-b", 1); /* 33: B holds 1: A's oldest (2) */
	assert_int_equal(s.displaced[RW_SHARE_FAIR], 2);
	assert_int_equal(query(&s, "run-a", 0, &c), 18);
	assert_int_equal(c.id[0], 3);
	assert_int_equal(query(&s, "run-c", 0, &c), 10);
	assert_int_equal(c.id[0], 22);
	assert_int_equal(query(&s, "run-b", 0, &c), 2);
	assert_int_equal(rw_evstore_first_id(&s), 3);
	/* many times round: holes squeezed out of the id order, B's two stay */
	for (unsigned int i = 0; i < 1000; i++)
		add_event(&s, "run-a", i);
	assert_int_equal(query(&s, "run-b", 0, &c), 2);
	assert_int_equal(c.id[0], 31);
	assert_int_equal(c.id[1], 33);
	assert_int_equal(query(&s, NULL, 0, &c), 30);
	for (size_t i = 1; i < c.n; i++)
		assert_true(c.id[i] > c.id[i - 1]);
	assert_int_equal(c.id[c.n - 1], 1033);
	assert_int_equal(s.evicted, s.displaced[RW_SHARE_OWN] + s.displaced[RW_SHARE_FAIR]);
	assert_int_equal(s.evicted, 1033 - 30);
	rw_evstore_free(&s);
}

static bool has_agg(const struct rw_aggs *a, const char *run, unsigned int n)
{
	struct rw_event ev = refusal(run, n);
	struct rw_agg_key k = {};

	snprintf(k.run, sizeof(k.run), "%s", run);
	k.peer = rw_ip4(ev.daddr);
	k.port = ev.dport;
	k.proto = ev.proto;
	k.dir = ev.dir;
	return rw_aggs_find(a, &k) != NULL;
}

/* The default 4 096 aggregates: B's 3, then A's 5 000 distinct destinations. */
static void test_aggregates_burst(void **state)
{
	struct rw_aggs a;
	struct rw_event ev;

	(void)state;
	assert_int_equal(rw_aggs_init(&a, RW_AGGS_DEFAULT), 0);
	for (unsigned int i = 0; i < 3; i++) {
		ev = refusal("run-b", i);
		assert_non_null(rw_aggs_add(&a, &ev, "", 1000 + i, NULL, NULL));
	}
	for (unsigned int i = 0; i < 5000; i++) {
		ev = refusal("run-a", i);
		assert_non_null(rw_aggs_add(&a, &ev, "", 2000 + i, NULL, NULL));
		if (i == 2000) { /* A's first aggregate, updated: it is now one of its newest */
			ev = refusal("run-a", 0);
			rw_aggs_add(&a, &ev, "", 2000 + i, NULL, NULL);
		}
	}
	assert_int_equal(a.count, RW_AGGS_DEFAULT);
	assert_int_equal(a.evicted, 5003 - RW_AGGS_DEFAULT);
	assert_int_equal(a.displaced[RW_SHARE_OWN], 5003 - RW_AGGS_DEFAULT);
	assert_int_equal(a.displaced[RW_SHARE_FAIR], 0);
	for (unsigned int i = 0; i < 3; i++)
		assert_true(has_agg(&a, "run-b", i));
	/* A's least recently updated went: 1..907; 0 was updated, 908.. are newer */
	assert_true(has_agg(&a, "run-a", 0));
	assert_false(has_agg(&a, "run-a", 1));
	assert_false(has_agg(&a, "run-a", 907));
	assert_true(has_agg(&a, "run-a", 908));
	assert_true(has_agg(&a, "run-a", 4999));
	rw_aggs_free(&a);
}

/* ---- a receiver for access requests ---- */

struct receiver {
	struct MHD_Daemon *d;
	pthread_mutex_t m;
	bool open;	    /* 503 while closed */
	char got[8192][96]; /* "run destination" of each accepted POST */
	size_t n_got;
	char url[64];
};

static struct receiver recv_;

struct upload {
	char body[2048];
	size_t len;
};

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **con_cls)
{
	struct receiver *r = cls;
	struct upload *u = *con_cls;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int status;

	if (!u) {
		u = calloc(1, sizeof(*u));
		*con_cls = u;
		return u ? MHD_YES : MHD_NO;
	}
	if (*size) {
		size_t n =
			*size < sizeof(u->body) - 1 - u->len ? *size : sizeof(u->body) - 1 - u->len;

		memcpy(u->body + u->len, data, n);
		u->len += n;
		*size = 0;
		return MHD_YES;
	}
	pthread_mutex_lock(&r->m);
	status = r->open ? 200 : 503;
	if (r->open && r->n_got < 8192) {
		json_t *o = json_loadb(u->body, u->len, 0, NULL);

		snprintf(r->got[r->n_got++], sizeof(r->got[0]), "%s %s",
			 json_string_value(json_object_get(o, "run")),
			 json_string_value(json_object_get(o, "destination")));
		json_decref(o);
	}
	pthread_mutex_unlock(&r->m);
	free(u);
	*con_cls = NULL;
	resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void receiver_start(struct receiver *r, bool open)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	const union MHD_DaemonInfo *info;

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->m, NULL);
	r->open = open;
	r->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				answer, r, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_END);
	assert_non_null(r->d);
	info = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_BIND_PORT);
	assert_non_null(info);
	snprintf(r->url, sizeof(r->url), "http://127.0.0.1:%u/requests", info->port);
}

static void receiver_open(struct receiver *r)
{
	pthread_mutex_lock(&r->m);
	r->open = true;
	pthread_mutex_unlock(&r->m);
}

/* The number of requests received for run to the destination text dst. */
static size_t received_text(struct receiver *r, const char *run, const char *dst)
{
	char want[96];
	size_t k = 0;

	snprintf(want, sizeof(want), "%s %s", run, dst);
	pthread_mutex_lock(&r->m);
	for (size_t i = 0; i < r->n_got; i++)
		k += !strcmp(r->got[i], want);
	pthread_mutex_unlock(&r->m);
	return k;
}

/* The number of requests received for run's refusal n (refusal()). */
static size_t received(struct receiver *r, const char *run, unsigned int n)
{
	struct rw_event ev = refusal(run, n);
	char dst[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &ev.daddr, dst, sizeof(dst));
	return received_text(r, run, dst);
}

static void receiver_stop(struct receiver *r)
{
	MHD_stop_daemon(r->d);
	pthread_mutex_destroy(&r->m);
}

/* Until nothing is pending: a generous deadline, scaled like the suites' (RW_WAIT_SCALE). */
static void wait_sent(struct rw_access *a)
{
	const char *sc = getenv("RW_WAIT_SCALE");
	int scale = sc && atoi(sc) > 0 ? atoi(sc) : 1;
	struct rw_access_stats st;

	for (int i = 0; i < 6000 * scale; i++) {
		rw_access_get_stats(a, &st);
		if (!st.pending)
			return;
		usleep(10000);
	}
	fail_msg("access requests still pending after %d s", 60 * scale);
}

static bool note(struct rw_access *a, const char *run, unsigned int n)
{
	struct rw_event ev = refusal(run, n);

	return rw_access_note(a, &ev, 1000);
}

/* The receiver answers 503: A's 400 distinct refusals fill the 256-place queue; B's one still
 * gets a place (A's newest queued one gives it up), and is sent exactly once when the receiver
 * comes back.
 */
static void test_access_queue_burst(void **state)
{
	struct rw_access_stats st;
	struct rw_access *a;

	(void)state;
	receiver_start(&recv_, false);
	a = rw_access_start(recv_.url, "node-1", RW_ACCESS_QUEUE_DEFAULT);
	assert_non_null(a);
	for (unsigned int i = 0; i < 400; i++)
		assert_int_equal(note(a, "run-a", i), i < RW_ACCESS_QUEUE_DEFAULT);
	assert_true(note(a, "run-b", 0));
	rw_access_get_stats(a, &st);
	assert_int_equal(st.queued, RW_ACCESS_QUEUE_DEFAULT + 1);
	assert_int_equal(st.pending, RW_ACCESS_QUEUE_DEFAULT);
	assert_int_equal(st.dropped, 400 - RW_ACCESS_QUEUE_DEFAULT);
	assert_int_equal(st.displaced_queue, 1);
	assert_int_equal(st.sent, 0);
	receiver_open(&recv_);
	wait_sent(a);
	rw_access_get_stats(a, &st);
	assert_int_equal(st.sent, RW_ACCESS_QUEUE_DEFAULT);
	assert_int_equal(received(&recv_, "run-b", 0), 1);
	assert_int_equal(received(&recv_, "run-a", 0), 1);
	assert_int_equal(received(&recv_, "run-a", 254), 1);
	/* A's newest queued one made room for B: not sent, not remembered */
	assert_int_equal(received(&recv_, "run-a", 255), 0);
	assert_int_equal(recv_.n_got, RW_ACCESS_QUEUE_DEFAULT);
	/* B's again: remembered, not sent again; A's displaced one is a request again */
	assert_false(note(a, "run-b", 0));
	assert_true(note(a, "run-a", 255));
	wait_sent(a);
	assert_int_equal(received(&recv_, "run-b", 0), 1);
	assert_int_equal(received(&recv_, "run-a", 255), 1);
	rw_access_stop(a);
	receiver_stop(&recv_);
}

/* The 4 096 dedup records: B's sent request, then A's 4 196 distinct ones, all sent. B's record
 * stays (its next refusal raises nothing); A's 101 oldest are forgotten, A's own.
 */
static void test_access_records_burst(void **state)
{
	const unsigned int n_a = RW_ACCESS_KEYS_MAX + 100;
	struct rw_access_stats st;
	struct rw_access *a;
	struct timespec t0, t1;

	(void)state;
	receiver_start(&recv_, true);
	a = rw_access_start(recv_.url, "node-1", RW_ACCESS_QUEUE_DEFAULT);
	assert_non_null(a);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_true(note(a, "run-b", 0));
	wait_sent(a);
	for (unsigned int i = 0; i < n_a; i++) {
		assert_true(note(a, "run-a", i));
		if (i % 200 == 199)
			wait_sent(a);
	}
	wait_sent(a);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("%u requests sent in %.2f s\n", n_a + 1,
		      (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	rw_access_get_stats(a, &st);
	assert_int_equal(st.sent, n_a + 1);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.forgotten[RW_SHARE_OWN], n_a + 1 - RW_ACCESS_KEYS_MAX);
	assert_int_equal(st.forgotten[RW_SHARE_FAIR], 0);
	assert_false(note(a, "run-b", 0));
	assert_false(note(a, "run-a", 101)); /* A's oldest remembered */
	assert_true(note(a, "run-a", 100));  /* forgotten: a request again (A's 101 goes) */
	wait_sent(a);
	assert_true(note(a, "run-a", 101));
	wait_sent(a);
	rw_access_get_stats(a, &st);
	assert_int_equal(st.forgotten[RW_SHARE_OWN], n_a + 3 - RW_ACCESS_KEYS_MAX);
	assert_int_equal(received(&recv_, "run-b", 0), 1);
	assert_int_equal(received(&recv_, "run-a", 100), 2);
	rw_access_stop(a);
	receiver_stop(&recv_);
}

/* An access request for an IPv6 destination names it in RFC 5952 text, and is its own: the IPv4
 * destination whose address is the IPv6 one's first word (38.6.71.0, 2606:4700::) is another
 * request, and the same IPv6 one again is remembered.
 */
static void test_access_ipv6(void **state)
{
	struct rw_event v6 = refusal("run-c", 0), v4 = refusal("run-c", 0);
	struct rw_access_stats st;
	struct rw_access *a;

	(void)state;
	v6.ethertype = htons(0x86dd);
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14:abc::7", v6.saddr6), 1);
	assert_int_equal(inet_pton(AF_INET6, "2606:4700::1111", v6.daddr6), 1);
	v4.ethertype = htons(0x0800);
	v4.daddr = v6.daddr6[0];
	receiver_start(&recv_, true);
	a = rw_access_start(recv_.url, "node-1", RW_ACCESS_QUEUE_DEFAULT);
	assert_non_null(a);
	assert_true(rw_access_note(a, &v6, 1000));
	assert_true(rw_access_note(a, &v4, 1000));
	assert_false(rw_access_note(a, &v6, 1000));
	wait_sent(a);
	rw_access_get_stats(a, &st);
	assert_int_equal(st.sent, 2);
	assert_int_equal(received_text(&recv_, "run-c", "2606:4700::1111"), 1);
	assert_int_equal(received_text(&recv_, "run-c", "38.6.71.0"), 1);
	rw_access_stop(a);
	receiver_stop(&recv_);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events_burst),
		cmocka_unit_test(test_events_fair_share),
		cmocka_unit_test(test_aggregates_burst),
		cmocka_unit_test(test_access_queue_burst),
		cmocka_unit_test(test_access_records_burst),
		cmocka_unit_test(test_access_ipv6),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
