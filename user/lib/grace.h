/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* grace.h: the RCU grace period a flip owes, waited for on a thread of its own; outer map writes
 * side by side. See grace.c.
 */
#ifndef RUNWALL_GRACE_H
#define RUNWALL_GRACE_H

#include <stddef.h>

struct rw_grace;

/* A waiter that rewrites outer_fd's entry 0 with inner_fd, the map it holds, to wait for the
 * programs running; its thread starts now (without one, every wait is made by its caller).
 * NULL: no memory.
 */
struct rw_grace *rw_grace_new(int outer_fd, int inner_fd);

/* A flip has just happened: a grace period is owed, and the thread begins it at once. */
void rw_grace_owe(struct rw_grace *g);

/* Returns once every grace period owed before the call has passed: at once when the thread has
 * waited already, else when its wait ends (or the caller's own, if the thread's failed).
 * 0 or -errno (then it is still owed).
 */
int rw_grace_wait(struct rw_grace *g);

/* One grace period begun now, owed or not (a flip another process made): 0 or -errno. */
int rw_grace_now(struct rw_grace *g);

/* One write of a map-in-map's outer entry, or its delete: it returns after a grace period. */
struct rw_outer_write {
	int map_fd;
	const void *key;
	int inner_fd; /* -1: delete the entry */
	int err;      /* set by rw_outer_writes(): 0 or -errno (-ENOENT: no entry to delete) */
};

/* The n writes side by side, each on a thread of its own but the last, which the caller makes
 * (and any no thread could be made for), so that their grace periods overlap: the time of about
 * one for all. Returns the first error in w[] order, or 0.
 */
int rw_outer_writes(struct rw_outer_write *w, size_t n);

/* Stops the thread (after the wait it is in, if any) and frees g. NULL: nothing. */
void rw_grace_free(struct rw_grace *g);

#endif /* RUNWALL_GRACE_H */
