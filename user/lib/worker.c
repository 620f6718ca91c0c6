// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* worker.c: a thread that runs one job whenever it is asked to. A run begins with the asks made
 * so far, so the asks made while it runs are all served by one run after it: a burst of asks
 * costs two runs, not one each. A waiter whose ask no run has begun for yet runs the job itself
 * (one run at a time, whoever runs it): on a busy machine the thread may not be scheduled for
 * milliseconds after an ask, and a waiter would wait for that and for its own wakeup after it.
 */
#include <errno.h>

#include "util.h"
#include "worker.h"

/* One run of the job, for the asks made so far, by the calling thread (the worker's or a
 * waiter's): called and returning with w->lock held, which the run itself does not hold. Its end
 * is recorded and said to every waiter; its result returned.
 */
static int run_job(struct rw_worker *w)
{
	uint64_t begun = w->asked;
	int ret;

	w->running = true;
	pthread_mutex_unlock(&w->lock);
	ret = w->job(w->arg);
	pthread_mutex_lock(&w->lock);
	if (ret && begun > w->failed)
		w->failed = begun;
	else if (!ret && begun > w->done)
		w->done = begun;
	w->running = false;
	pthread_cond_broadcast(&w->cond);
	return ret;
}

static void *worker_main(void *arg)
{
	struct rw_worker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		/* Idle while every ask is served, or the last run for them failed (each waiter then
		 * runs the job itself), or a waiter's run is under way.
		 */
		while (!w->stop && (w->running || w->done >= w->asked || w->failed >= w->asked))
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		run_job(w);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

bool rw_worker_start(struct rw_worker *w, rw_job_fn job, void *arg)
{
	int err;

	*w = (struct rw_worker){.job = job, .arg = arg};
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	err = rw_thread_start(&w->thread, worker_main, w);
	w->threaded = !err;
	errno = err;
	return w->threaded;
}

uint64_t rw_worker_ask(struct rw_worker *w)
{
	uint64_t ticket;

	pthread_mutex_lock(&w->lock);
	ticket = ++w->asked;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return ticket;
}

int rw_worker_wait(struct rw_worker *w, uint64_t ticket)
{
	int ret;

	pthread_mutex_lock(&w->lock);
	/* A run in progress may have begun before the ask: wait for it, then look again. */
	while (w->running && w->done < ticket)
		pthread_cond_wait(&w->cond, &w->lock);
	if (w->done >= ticket) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	/* No run serves the ask yet (the thread not scheduled since, or its run for it failed, or
	 * there is no thread): this one does, begun now, after the ask, as the thread's would
	 * have been. The thread finds the asks served and stays idle.
	 */
	ret = run_job(w);
	pthread_mutex_unlock(&w->lock);
	return ret;
}

void rw_worker_stop(struct rw_worker *w)
{
	if (w->threaded) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
		w->threaded = false;
	}
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
}
