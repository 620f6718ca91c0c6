// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* grace.c: the RCU grace period a flip owes, waited for on a thread of its own (worker.c) from
 * the moment of the flip, so that neither the flip's acknowledgement nor the caller's loop waits
 * for it.
 *
 * The kernel offers user space one way to wait for every running BPF program to finish: an
 * update of a map-in-map outer map ends with synchronize_rcu() (maybe_wait_bpf_programs() in
 * kernel/bpf/syscall.c), and a TC program runs entirely inside an RCU read-side section. So
 * rewriting an outer entry with the map it already holds waits for exactly the programs that
 * started before the call, and changes nothing. Begun right after a flip, that wait covers
 * every program that could have loaded the old state word; it takes milliseconds on a quiet
 * machine, tens of them on a busy one, and is mostly over by the time the next change comes.
 *
 * The same wait ends every write of an outer map that puts a new inner map in: writes that need
 * not follow one another are made side by side (rw_outer_writes()), one grace period for all.
 */
#include <errno.h>
#include <stdlib.h>
#include <bpf/bpf.h>

#include "grace.h"
#include "util.h"
#include "worker.h"

struct rw_grace {
	int outer_fd, inner_fd; /* the entry rewritten with what it holds: key 0 */
	struct rw_worker worker;
	uint64_t owed; /* the ask of the last flip: 0, none yet */
};

/* One grace period, in the calling thread: 0 or -errno (then it did not pass). */
static int wait_programs(void *arg)
{
	const struct rw_grace *g = arg;
	__u32 key = 0;

	return bpf_map_update_elem(g->outer_fd, &key, &g->inner_fd, BPF_ANY) ? -errno : 0;
}

struct rw_grace *rw_grace_new(int outer_fd, int inner_fd)
{
	struct rw_grace *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->outer_fd = outer_fd;
	g->inner_fd = inner_fd;
	/* Without a thread each wait is made by rw_grace_wait()'s caller. */
	rw_worker_start(&g->worker, wait_programs, g);
	return g;
}

void rw_grace_owe(struct rw_grace *g)
{
	g->owed = rw_worker_ask(&g->worker);
}

int rw_grace_wait(struct rw_grace *g)
{
	return g->owed ? rw_worker_wait(&g->worker, g->owed) : 0;
}

int rw_grace_now(struct rw_grace *g)
{
	return wait_programs(g);
}

void rw_grace_free(struct rw_grace *g)
{
	if (!g)
		return;
	rw_worker_stop(&g->worker);
	free(g);
}

static void *outer_write_run(void *arg)
{
	struct rw_outer_write *w = arg;

	if (w->inner_fd < 0)
		w->err = bpf_map_delete_elem(w->map_fd, w->key) ? -errno : 0;
	else
		w->err = bpf_map_update_elem(w->map_fd, w->key, &w->inner_fd, BPF_ANY) ? -errno : 0;
	return NULL;
}

int rw_outer_writes(struct rw_outer_write *w, size_t n)
{
	struct rw_beside *others = n > 1 ? calloc(n - 1, sizeof(*others)) : NULL;
	size_t i;

	/* Concurrent synchronize_rcu() callers share grace periods: n writes wait about as long
	 * as one. Without memory for the threads, one after another.
	 */
	for (i = 0; i + 1 < n; i++) {
		if (others)
			rw_beside_start(&others[i], outer_write_run, &w[i]);
		else
			outer_write_run(&w[i]);
	}
	if (n)
		outer_write_run(&w[n - 1]);
	for (i = 0; others && i + 1 < n; i++)
		rw_beside_join(&others[i]);
	free(others);
	for (i = 0; i < n; i++)
		if (w[i].err)
			return w[i].err;
	return 0;
}
