// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_worker.c: the thread that runs the flips' grace periods and the probes of cut
 * connections (user/lib/worker.c). Asks made while a run is under way are all served by one run
 * after it; a wait returns only after a run begun after its ask; a failed run is made again by
 * the waiter in its own thread, as is an ask no run has begun for (a stopped worker's). The job
 * is held at a gate the test opens, so every order below is forced, not timed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "worker.h"

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int started, ended; /* runs of the job begun and ended */
	int open;	    /* runs the test lets end */
	int fail_until;	    /* the runs up to this one fail in the worker's thread */
	int in_caller;	    /* runs made in a thread other than the worker's */
	pthread_t worker;
};

static struct gate g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int job(void *arg)
{
	struct rw_worker *w = arg;
	int ret = 0, n;

	pthread_mutex_lock(&g.lock);
	n = ++g.started;
	pthread_cond_broadcast(&g.cond);
	if (!pthread_equal(pthread_self(), w->thread)) {
		g.in_caller++;
	} else {
		while (g.open < n)
			pthread_cond_wait(&g.cond, &g.lock);
		if (n <= g.fail_until)
			ret = -EIO;
	}
	g.ended++;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	return ret;
}

static void reset(int fail_until)
{
	pthread_mutex_lock(&g.lock);
	g.started = g.ended = g.open = g.in_caller = 0;
	g.fail_until = fail_until;
	pthread_mutex_unlock(&g.lock);
}

static void wait_started(int n)
{
	pthread_mutex_lock(&g.lock);
	while (g.started < n)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
}

static void let_end(int n)
{
	pthread_mutex_lock(&g.lock);
	g.open = n;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

struct waiter {
	struct rw_worker *w;
	uint64_t ticket;
	int ret, ended_at_return;
};

static void *wait_main(void *arg)
{
	struct waiter *x = arg;

	x->ret = rw_worker_wait(x->w, x->ticket);
	pthread_mutex_lock(&g.lock);
	x->ended_at_return = g.ended;
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

/* The worker started on job(), no run let end yet, the runs up to fail_until failing. */
static void start(struct rw_worker *w, int fail_until)
{
	reset(fail_until);
	assert_true(rw_worker_start(w, job, w));
}

/* One ask, its run begun by the thread (a waiter finding no run begun would make it itself),
 * the gates opened to the n-th run, and a wait for the ask that succeeds.
 */
static uint64_t ask_and_wait(struct rw_worker *w, int n)
{
	uint64_t t = rw_worker_ask(w);

	wait_started(n);
	let_end(n);
	assert_int_equal(rw_worker_wait(w, t), 0);
	return t;
}

/* Three asks while the first run is held are served by one second run, not three. */
static void test_asks_during_a_run_take_one_run(void **state)
{
	struct rw_worker w;
	uint64_t t;

	(void)state;
	start(&w, 0);
	rw_worker_ask(&w);
	wait_started(1);
	rw_worker_ask(&w);
	rw_worker_ask(&w);
	t = rw_worker_ask(&w);
	assert_int_equal(t, 4);
	let_end(2);
	assert_int_equal(rw_worker_wait(&w, t), 0);
	rw_worker_stop(&w);
	assert_int_equal(g.started, 2);
	assert_int_equal(g.in_caller, 0);
}

/* A wait for an ask made during a run does not return when that run ends: that run began
 * before the ask (for the grace period: before the flip), so it proves nothing for it.
 */
static void test_wait_needs_a_run_begun_after_the_ask(void **state)
{
	struct waiter x = {0};
	struct rw_worker w;
	pthread_t th;

	(void)state;
	start(&w, 0);
	rw_worker_ask(&w);
	wait_started(1);
	x.w = &w;
	x.ticket = rw_worker_ask(&w);
	assert_int_equal(pthread_create(&th, NULL, wait_main, &x), 0);
	let_end(1);
	wait_started(2); /* the first run has ended, the waiter still waits */
	let_end(2);
	pthread_join(th, NULL);
	rw_worker_stop(&w);
	assert_int_equal(x.ret, 0);
	assert_int_equal(x.ended_at_return, 2);
}

/* A run that fails leaves the ask to its waiter, which runs the job in its own thread. */
static void test_failed_run_is_made_by_the_waiter(void **state)
{
	struct rw_worker w;

	(void)state;
	start(&w, 1);
	ask_and_wait(&w, 1);
	rw_worker_stop(&w);
	assert_int_equal(g.started, 2);
	assert_int_equal(g.in_caller, 1);
}

/* A wait whose ask was served returns at once, without a run. */
static void test_served_ask_waits_for_nothing(void **state)
{
	struct rw_worker w;
	uint64_t t;

	(void)state;
	start(&w, 0);
	t = ask_and_wait(&w, 1);
	assert_int_equal(rw_worker_wait(&w, t), 0);
	rw_worker_stop(&w);
	assert_int_equal(g.started, 1);
}

/* An ask that no run has begun for is run by its waiter, in its own thread, at once: here the
 * thread has stopped (the same path as a thread not scheduled since the ask).
 */
static void test_ask_not_begun_is_run_by_the_waiter(void **state)
{
	struct rw_worker w;
	uint64_t t;

	(void)state;
	start(&w, 0);
	ask_and_wait(&w, 1);
	pthread_mutex_lock(&w.lock);
	w.stop = true; /* the thread ends at its next look, as rw_worker_stop() makes it */
	pthread_cond_broadcast(&w.cond);
	pthread_mutex_unlock(&w.lock);
	pthread_join(w.thread, NULL);
	w.stop = false;
	t = rw_worker_ask(&w);
	assert_int_equal(rw_worker_wait(&w, t), 0);
	assert_int_equal(g.started, 2);
	assert_int_equal(g.in_caller, 1);
	assert_true(w.done >= t);
	w.threaded = false;
	rw_worker_stop(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_asks_during_a_run_take_one_run),
		cmocka_unit_test(test_wait_needs_a_run_begun_after_the_ask),
		cmocka_unit_test(test_failed_run_is_made_by_the_waiter),
		cmocka_unit_test(test_served_ask_waits_for_nothing),
		cmocka_unit_test(test_ask_not_begun_is_run_by_the_waiter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
