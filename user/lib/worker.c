// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* worker.c: a thread that runs one job whenever it is asked to. A run begins with the asks made
 * so far, so the asks made while it runs are all served by one run after it: a burst of asks
 * costs two runs, not one each.
 */
#include <errno.h>
#include <signal.h>

#include "worker.h"

static void *worker_main(void *arg)
{
	struct rw_worker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		uint64_t begun;
		int ret;

		/* Idle while every ask is served, or the last run for them failed (each waiter then
		 * runs the job itself).
		 */
		while (!w->stop && (w->done >= w->asked || w->failed >= w->asked))
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		begun = w->asked;
		pthread_mutex_unlock(&w->lock);
		ret = w->job(w->arg);
		pthread_mutex_lock(&w->lock);
		if (ret && begun > w->failed)
			w->failed = begun;
		else if (!ret && begun > w->done)
			w->done = begun;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

bool rw_worker_start(struct rw_worker *w, rw_job_fn job, void *arg)
{
	sigset_t all, old;
	int err;

	*w = (struct rw_worker){.job = job, .arg = arg};
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
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
	bool served;
	int ret;

	pthread_mutex_lock(&w->lock);
	while (w->threaded && !w->stop && w->done < ticket && w->failed < ticket)
		pthread_cond_wait(&w->cond, &w->lock);
	served = w->done >= ticket;
	pthread_mutex_unlock(&w->lock);
	if (served)
		return 0;
	/* Begun now, after the ask: it serves the ask as the thread's would have. */
	ret = w->job(w->arg);
	if (!ret) {
		pthread_mutex_lock(&w->lock);
		if (w->done < ticket)
			w->done = ticket;
		pthread_mutex_unlock(&w->lock);
	}
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
