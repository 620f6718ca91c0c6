// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_principal_refusals.c: /metrics' refusals by principal (user/view/principal_refusals.c):
 * which events count, each key its own series in first-seen order, and past
 * RW_PRINCIPAL_SERIES_MAX series every further key's events in the overflow count, none lost
 * (cmocka).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdbool.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "principal_refusals.h"

static struct rw_event event(const char *run, __u32 uid, __u64 cgroup, __u8 reason)
{
	struct rw_event ev = {.verdict = RW_VERDICT_DROP,
			      .uid = uid,
			      .cgroup_id = cgroup,
			      .reason = reason,
			      .dir = RW_DIR_EGRESS};

	snprintf(ev.run_id, sizeof(ev.run_id), "%s", run);
	return ev;
}

static void test_what_counts(void **state)
{
	struct rw_principal_refusals *t = calloc(1, sizeof(*t));
	struct rw_event ev = event("run-a", 1000, 7, RW_REASON_WRONG_PRINCIPAL);

	assert_non_null(t);
	rw_principal_refusals_add(t, &ev, "harness");
	rw_principal_refusals_add(t, &ev, "harness");
	/* The same key from another cgroup of the same container: the same series. */
	ev.cgroup_id = 8;
	rw_principal_refusals_add(t, &ev, "harness");
	/* Another uid, another container, one unknown, another reason: a series each. */
	ev.uid = 1001;
	rw_principal_refusals_add(t, &ev, "harness");
	rw_principal_refusals_add(t, &ev, "identity-sidecar");
	rw_principal_refusals_add(t, &ev, NULL);
	rw_principal_refusals_add(t, &ev, "");
	ev.reason = RW_REASON_NOT_ALLOWLISTED;
	rw_principal_refusals_add(t, &ev, "harness");
	/* Not counted: an allowed packet, a refusal without a uid read. */
	ev.verdict = RW_VERDICT_ALLOW;
	rw_principal_refusals_add(t, &ev, "harness");
	ev = event("run-a", RW_UID_NONE, 0, RW_REASON_NOT_ALLOWLISTED);
	rw_principal_refusals_add(t, &ev, NULL);

	assert_int_equal(t->n, 5);
	assert_int_equal(t->overflow, 0);
	const struct {
		const char *container;
		__u32 uid;
		__u8 reason;
		uint64_t count;
	} want[] = {
		{"harness", 1000, RW_REASON_WRONG_PRINCIPAL, 3},
		{"harness", 1001, RW_REASON_WRONG_PRINCIPAL, 1},
		{"identity-sidecar", 1001, RW_REASON_WRONG_PRINCIPAL, 1},
		{"unknown", 1001, RW_REASON_WRONG_PRINCIPAL, 2},
		{"harness", 1001, RW_REASON_NOT_ALLOWLISTED, 1},
	};
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(t->series[i].run, "run-a");
		assert_string_equal(t->series[i].container, want[i].container);
		assert_int_equal(t->series[i].uid, want[i].uid);
		assert_int_equal(t->series[i].reason, want[i].reason);
		assert_int_equal(t->series[i].count, want[i].count);
	}
	free(t);
}

/* 3 000 keys (run r<k % 7>, uid k), key k sent k % 5 + 1 times, interleaved: the first 1 024
 * keys seen have their exact counts, every later key's events are in the overflow, the sum is
 * every event.
 */
static void test_cap(void **state)
{
	struct rw_principal_refusals *t = calloc(1, sizeof(*t));
	const unsigned int keys = 3000;
	uint64_t sent = 0, sum;

	assert_non_null(t);
	for (unsigned int round = 0; round < 5; round++)
		for (unsigned int k = 0; k < keys; k++) {
			char run[16];
			struct rw_event ev;

			if (round > k % 5)
				continue;
			snprintf(run, sizeof(run), "r%u", k % 7);
			ev = event(run, 2000 + k, k, RW_REASON_WRONG_PRINCIPAL);
			rw_principal_refusals_add(t, &ev, k % 2 ? "harness" : "worker");
			sent++;
		}
	assert_int_equal(t->n, RW_PRINCIPAL_SERIES_MAX);
	sum = t->overflow;
	for (size_t i = 0; i < t->n; i++) {
		unsigned int k = t->series[i].uid - 2000;
		char run[16];

		/* Round 0 sees every key in order: series i is key i. */
		assert_int_equal(k, i);
		snprintf(run, sizeof(run), "r%u", k % 7);
		assert_string_equal(t->series[i].run, run);
		assert_string_equal(t->series[i].container, k % 2 ? "harness" : "worker");
		assert_int_equal(t->series[i].count, k % 5 + 1);
		sum += t->series[i].count;
	}
	assert_int_equal(sum, sent);
	uint64_t past = 0;

	for (unsigned int k = RW_PRINCIPAL_SERIES_MAX; k < keys; k++)
		past += k % 5 + 1;
	assert_int_equal(t->overflow, past);
	free(t);
}

/* Only the runs in force keep their series: an ended run's leave the table, free their places
 * under the cap, and a key seen again after the prune counts from where it stood.
 */
static bool keep_run(const char *run, void *arg)
{
	return strcmp(run, arg) != 0;
}

static void test_keep(void **state)
{
	struct rw_principal_refusals *t = calloc(1, sizeof(*t));
	struct rw_event ev;

	assert_non_null(t);
	for (unsigned int k = 0; k < RW_PRINCIPAL_SERIES_MAX + 10; k++) {
		ev = event(k % 2 ? "ended" : "live", 3000 + k, k, RW_REASON_WRONG_PRINCIPAL);
		rw_principal_refusals_add(t, &ev, "harness");
	}
	ev = event("", 7, 0, RW_REASON_WRONG_PRINCIPAL);
	rw_principal_refusals_add(t, &ev, NULL); /* past the cap: overflow */
	assert_int_equal(t->n, RW_PRINCIPAL_SERIES_MAX);
	assert_int_equal(t->overflow, 11);
	rw_principal_refusals_keep(t, keep_run, "ended");
	assert_int_equal(t->n, RW_PRINCIPAL_SERIES_MAX / 2);
	assert_int_equal(t->overflow, 11); /* what was counted stays counted */
	for (size_t i = 0; i < t->n; i++) {
		assert_string_equal(t->series[i].run, "live");
		assert_int_equal(t->series[i].uid, 3000 + 2 * i);
	}
	/* A live key counts on in its own series; a new key has a place again. */
	ev = event("live", 3000, 0, RW_REASON_WRONG_PRINCIPAL);
	rw_principal_refusals_add(t, &ev, "harness");
	assert_int_equal(t->series[0].count, 2);
	ev = event("", 7, 0, RW_REASON_WRONG_PRINCIPAL);
	rw_principal_refusals_add(t, &ev, NULL);
	assert_int_equal(t->n, RW_PRINCIPAL_SERIES_MAX / 2 + 1);
	assert_string_equal(t->series[t->n - 1].container, "unknown");
	/* A series of no run stays whatever the runs are. */
	rw_principal_refusals_keep(t, keep_run, "live");
	assert_int_equal(t->n, 1);
	assert_string_equal(t->series[0].run, "");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_what_counts),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_keep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
