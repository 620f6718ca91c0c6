// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_flow_log.c: the flow log's token bucket (rw_flow_bucket_take: burst at once, then rate a
 * second, never more over any span; rate 0 unlimited), and the log itself on a real file: lines
 * over a sandbox's bucket counted exactly in its suppressed line, another sandbox's lines
 * untouched, every line whole JSON, and rotation to FILE.1 within max_bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>

#include "flow_log.h"

#define SEC 1000000000LL

static void bucket_burst_then_rate(void **state)
{
	int64_t tat = 0, t0 = 5 * SEC;
	int n = 0;

	(void)state;
	for (int i = 0; i < 100; i++)
		n += rw_flow_bucket_take(&tat, 5, 10, t0);
	assert_int_equal(n, 10); /* the burst, at one instant */
	assert_false(rw_flow_bucket_take(&tat, 5, 10, t0 + SEC / 5 - 1));
	assert_true(rw_flow_bucket_take(&tat, 5, 10, t0 + SEC / 5)); /* one token back per 1/5 s */
	assert_false(rw_flow_bucket_take(&tat, 5, 10, t0 + SEC / 5));
}

static void bucket_bounded_over_any_span(void **state)
{
	int64_t tat = 0, t0 = SEC;
	int n = 0;

	(void)state;
	/* A packet every ms for 10 s: at most burst + rate x 10 s pass, and at least rate x 10 s. */
	for (int64_t t = 0; t <= 10 * SEC; t += SEC / 1000)
		n += rw_flow_bucket_take(&tat, 200, 400, t0 + t);
	assert_true(n <= 400 + 200 * 10 + 1);
	assert_true(n >= 200 * 10);
	/* A quiet sandbox's bucket refills to its burst, no more. */
	n = 0;
	for (int i = 0; i < 1000; i++)
		n += rw_flow_bucket_take(&tat, 200, 400, t0 + 100 * SEC);
	assert_int_equal(n, 400);
}

static void bucket_unlimited(void **state)
{
	int64_t tat = 0;

	(void)state;
	for (int i = 0; i < 10000; i++)
		assert_true(rw_flow_bucket_take(&tat, 0, 0, SEC));
}

static struct rw_event refusal(const char *run, int ifindex, int n)
{
	struct rw_event ev = {};

	snprintf(ev.run_id, sizeof(ev.run_id), "%s", run);
	ev.ifindex = ifindex;
	ev.saddr = htonl(0x0a000001u);
	ev.daddr = htonl(0x5db8d822u);
	ev.ethertype = htons(0x0800);
	ev.proto = 17;
	ev.sport = htons(40000 + n);
	ev.dport = htons(443);
	ev.verdict = RW_VERDICT_DROP;
	return ev;
}

/* Sums over FILE's lines: the drop lines of run, and its suppressed counts; every line JSON. */
static void tally(const char *path, const char *run, long *lines, long *suppressed, long *bad)
{
	char buf[4096];
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (fgets(buf, sizeof(buf), f)) {
		json_t *o = json_loads(buf, 0, NULL);
		const char *type, *r;

		if (!o || json_unpack(o, "{s:s, s:s}", "type", &type, "run", &r)) {
			++*bad;
		} else if (!strcmp(r, run)) {
			if (!strcmp(type, "drop"))
				++*lines;
			else if (!strcmp(type, "suppressed"))
				*suppressed += json_integer_value(json_object_get(o, "count"));
		}
		json_decref(o);
	}
	fclose(f);
}

static void log_counts_exact(void **state)
{
	char dir[] = "/tmp/rw-flowlog-XXXXXX", path[64], rotated[80];
	struct rw_flow_log_opts o = {.rate = 5, .burst = 10, .max_bytes = 0};
	struct rw_flow_log_stats st;
	long a = 0, as = 0, b = 0, bs = 0, bad = 0;
	struct rw_flow_log *fl;
	char err[256];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/flow.log", dir);
	o.path = path;
	fl = rw_flow_log_open(&o, "node-1", err, sizeof(err));
	assert_non_null(fl);
	for (int i = 0; i < 500; i++) {
		struct rw_event ev = refusal("run-a", 7, i);

		rw_flow_log_event(fl, &ev, NULL, 0);
	}
	for (int i = 0; i < 4; i++) {
		struct rw_event ev = refusal("run-b", 8, i);

		rw_flow_log_event(fl, &ev, NULL, 0);
	}
	rw_flow_log_stats(fl, &st);
	assert_int_equal(st.written + st.suppressed, 504);
	rw_flow_log_close(fl); /* writes the pending suppressed counts */
	tally(path, "run-a", &a, &as, &bad);
	tally(path, "run-b", &b, &bs, &bad);
	assert_int_equal(bad, 0);
	assert_true(a >= 10); /* the burst, and what refilled while the loop ran */
	assert_int_equal(a + as, 500);
	assert_int_equal(b, 4);
	assert_int_equal(bs, 0);

	/* Rotation: FILE.1 appears, neither file passes max_bytes, nothing else is left. */
	o = (struct rw_flow_log_opts){.path = path, .rate = 0, .max_bytes = 4096};
	unlink(path);
	fl = rw_flow_log_open(&o, "node-1", err, sizeof(err));
	assert_non_null(fl);
	for (int i = 0; i < 200; i++) {
		struct rw_event ev = refusal("run-a", 7, i);

		rw_flow_log_event(fl, &ev, NULL, 0);
	}
	rw_flow_log_stats(fl, &st);
	assert_true(st.rotations > 1);
	assert_int_equal(st.written, 200);
	rw_flow_log_close(fl);
	snprintf(rotated, sizeof(rotated), "%s.1", path);
	{
		struct stat s1, s2;

		assert_int_equal(stat(path, &s1), 0);
		assert_int_equal(stat(rotated, &s2), 0);
		assert_true(s1.st_size <= 4096 && s2.st_size <= 4096 && s2.st_size > 0);
	}
	unlink(path);
	unlink(rotated);
	assert_int_equal(rmdir(dir), 0);
}

static void open_refused(void **state)
{
	struct rw_flow_log_opts o = {.path = "/nonexistent-dir/flow.log", .rate = 1, .burst = 1};
	char err[256] = "";

	(void)state;
	assert_null(rw_flow_log_open(&o, "n", err, sizeof(err)));
	assert_non_null(strstr(err, "--flow-log /nonexistent-dir/flow.log"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bucket_burst_then_rate),
		cmocka_unit_test(bucket_bounded_over_any_span),
		cmocka_unit_test(bucket_unlimited),
		cmocka_unit_test(log_counts_exact),
		cmocka_unit_test(open_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
