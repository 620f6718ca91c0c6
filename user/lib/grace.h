/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* grace.h: the RCU grace period a flip owes, waited for on a thread of its own. See grace.c. */
#ifndef RUNWALL_GRACE_H
#define RUNWALL_GRACE_H

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

/* Stops the thread (after the wait it is in, if any) and frees g. NULL: nothing. */
void rw_grace_free(struct rw_grace *g);

#endif /* RUNWALL_GRACE_H */
