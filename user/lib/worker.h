/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* worker.h: a thread that runs one job whenever it is asked to; the asks made while it runs are
 * all served by one run after it. See worker.c.
 */
#ifndef RUNWALL_WORKER_H
#define RUNWALL_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* The job: 0, or a negative errno when it did not do what it is for. */
typedef int (*rw_job_fn)(void *arg);

struct rw_worker {
	rw_job_fn job;
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool threaded, stop;
	bool running;	 /* a run is in progress, the thread's or a waiter's */
	uint64_t asked;	 /* asks so far: the ticket of the last one */
	uint64_t done;	 /* the asks the last successful run began after */
	uint64_t failed; /* the asks the last failed run began after */
};

/* Starts the thread, every signal blocked in it (a process that takes its signals through a
 * signalfd must never have one delivered there). Without a thread (false: the reason is in
 * errno) the job runs in rw_worker_wait()'s caller.
 */
bool rw_worker_start(struct rw_worker *w, rw_job_fn job, void *arg);

/* Asks for a run of the job begun from now on; returns at once with the ask's ticket. */
uint64_t rw_worker_ask(struct rw_worker *w);

/* Returns once a run begun after the ask `ticket` has succeeded: at once if one has; else, after
 * the run in progress (if any) ends, the caller runs the job itself when no run has served the ask
 * by then (the thread not yet scheduled, its run failed, or no thread), and returns its result.
 * 0 or a negative errno.
 */
int rw_worker_wait(struct rw_worker *w, uint64_t ticket);

/* Stops the thread after the run it is in, if any; the asks not served are dropped. */
void rw_worker_stop(struct rw_worker *w);

#endif /* RUNWALL_WORKER_H */
