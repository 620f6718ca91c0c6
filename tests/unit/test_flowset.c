// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_flowset.c: recorded verdicts folded into flows (flowset.h), what `runwall replay` judges:
 * one flow per (run, pod, direction, protocol, peer, port) whatever the source port, counts
 * added, first and last seen and the latest verdict kept, across the merges that bound the set;
 * what no packet can be rebuilt for only counted; a flow through its JSON and back; the time
 * text of the flow log.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <jansson.h>

#include "flowset.h"

static struct rw_event event(const char *run, const char *pod, const char *peer, __u16 sport,
			     __u16 dport, __u8 proto, __u8 verdict)
{
	struct rw_event ev;
	struct rw_ip src, dst;

	memset(&ev, 0, sizeof(ev));
	snprintf(ev.run_id, sizeof(ev.run_id), "%s", run);
	assert_int_equal(rw_ip_parse(pod, &src), 0);
	assert_int_equal(rw_ip_parse(peer, &dst), 0);
	rw_event_set_addrs(&ev, &src, &dst);
	ev.ethertype = htons(src.family == AF_INET6 ? 0x86dd : 0x0800);
	ev.sport = htons(sport);
	ev.dport = htons(dport);
	ev.proto = proto;
	ev.dir = RW_DIR_EGRESS;
	ev.verdict = verdict;
	ev.reason = verdict == RW_VERDICT_ALLOW ? RW_REASON_ALLOWED : RW_REASON_NOT_ALLOWLISTED;
	return ev;
}

static void folds_by_flow(void **state)
{
	struct rw_flowset s = {0};
	struct rw_event ev;

	(void)state;
	/* 5000 verdicts of 3 flows, interleaved, each from another source port: the set merges
	 * as it goes and never holds more than a few thousand entries.
	 */
	for (int i = 0; i < 5000; i++) {
		const char *peer = i % 3 == 0	? "93.184.216.34"
				   : i % 3 == 1 ? "52.94.9.5"
						: "2a00::1";
		const char *pod = i % 3 == 2 ? "2600::3" : "10.1.3.3";

		ev = event("run-a", pod, peer, (__u16)(40000 + i), 443, IPPROTO_UDP,
			   i == 4998 ? RW_VERDICT_ALLOW : RW_VERDICT_DROP);
		assert_int_equal(rw_flowset_add_event(&s, &ev, 1000 + i), 0);
		assert_true(s.cap <= 4096);
	}
	ev = event("", "10.1.3.9", "1.1.1.1", 1, 2, IPPROTO_UDP, RW_VERDICT_DROP);
	assert_int_equal(rw_flowset_add_event(&s, &ev, 1), 0);
	ev = event("run-a", "10.1.3.3", "1.1.1.1", 0, 0, IPPROTO_ICMP, RW_VERDICT_DROP);
	assert_int_equal(rw_flowset_add_event(&s, &ev, 1), 0);
	rw_flowset_merge(&s);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.skipped, 2);
	for (size_t i = 0; i < s.n; i++) {
		const struct rw_flow *f = &s.v[i];
		char peer[RW_IP_STRLEN];

		rw_ip_str(&f->key.peer, peer, sizeof(peer));
		if (!strcmp(peer, "93.184.216.34")) {
			assert_int_equal(f->count, 1667);
			assert_int_equal(f->first_ns, 1000);
			assert_int_equal(f->last_ns, 1000 + 4998);
			assert_int_equal(f->verdict, RW_VERDICT_ALLOW); /* the latest */
		} else {
			assert_int_equal(f->count, 1667 - (!strcmp(peer, "2a00::1")));
			assert_int_equal(f->verdict, RW_VERDICT_DROP);
		}
		assert_int_equal(f->key.port, 443);
	}
	rw_flowset_free(&s);
}

static void json_round_trip(void **state)
{
	struct rw_flowset s = {0};
	struct rw_event ev = event("run-b", "2600::3", "2a00:1450::93", 40000, 8443, IPPROTO_TCP,
				   RW_VERDICT_DROP);
	struct rw_flow back;
	char err[200];
	json_t *o;

	(void)state;
	assert_int_equal(rw_flowset_add_event(&s, &ev, 1796452649610929632LL), 0);
	rw_flowset_merge(&s);
	o = rw_flow_json(&s.v[0]);
	assert_string_equal(json_string_value(json_object_get(o, "first")),
			    "2026-12-05T06:37:29.610929Z");
	assert_int_equal(rw_flow_from_json(o, &back, err, sizeof(err)), 0);
	assert_memory_equal(&back, &s.v[0], sizeof(back));
	json_object_set_new(o, "proto", json_string("icmp"));
	assert_int_equal(rw_flow_from_json(o, &back, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "proto"));
	json_decref(o);
	rw_flowset_free(&s);
}

static void time_text(void **state)
{
	int64_t ns;

	(void)state;
	assert_int_equal(rw_parse_time("2026-12-05T06:37:29.610929Z", &ns), 0);
	assert_int_equal(ns, 1796452649610929000LL);
	assert_int_equal(rw_parse_time("2026-12-05T06:37:29Z", &ns), 0);
	assert_int_equal(ns, 1796452649000000000LL);
	assert_int_equal(rw_parse_time("2026-12-05 06:37:29", &ns), -EINVAL);
	assert_int_equal(rw_parse_time("2026-12-05T06:37:29.5+01:00", &ns), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(folds_by_flow),
		cmocka_unit_test(json_round_trip),
		cmocka_unit_test(time_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
