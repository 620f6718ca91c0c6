// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* link_thread.c: the loop's link work (netlink events, the full resync, attach retries, the
 * conntrack expiry slice) on a thread of its own, while the loop applies PolicyWatch's changes.
 *
 * That work waits in the kernel for things no claim needs: RTNL (tcx attaches, link and route
 * dumps, ethtool), a grace period per outer-map write of a binding (maybe_wait_bpf_programs():
 * 8-30 ms each where rcu_expedited is 0), the veth lock runwall-cni holds. agent_beside() hands one
 * piece of it to the thread and, until it is done, serves PolicyWatch's changes on the loop
 * (agent_follow_on_fd()), woken by either, and drains the ring on the tick's period. The loop's
 * other work waits, as before: link events stay in their order, one piece at a time.
 *
 * What the two threads share while a piece runs: an apply and an event touch no sandbox
 * (struct sandbox, a->sandboxes), and the link work touches no policy, event or view; a bind's
 * containers_poll() (which writes the admissions an apply reads) waits until the piece is done
 * (containers_due, run by agent_beside()); the last error is written under a lock
 * (agent_set_error()). In the kernel, an apply's flush of moved pods' flows takes the veth lock
 * as runwall-cni's binds do: if the link thread holds it, the flush waits for it, and the link
 * thread never waits for the loop.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "agent.h"
#include "log.h"
#include "pw_stream.h"
#include "util.h"

static void *link_thread_main(void *arg)
{
	struct agent *a = arg;
	struct agent_link_thread *t = &a->link;
	uint64_t one = 1;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		while (!t->fn && !t->stop)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->stop)
			break;
		pthread_mutex_unlock(&t->lock);
		t->ret = t->fn(a, t->arg);
		pthread_mutex_lock(&t->lock);
		t->fn = NULL;
		if (write(t->done_fd, &one, sizeof(one)) < 0) {
			/* the counter is saturated: the loop is woken already */
		}
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int agent_link_thread_start(struct agent *a)
{
	struct agent_link_thread *t = &a->link;
	int err;

	t->loop = pthread_self();
	t->done_fd = eventfd(0, EFD_CLOEXEC);
	if (t->done_fd < 0)
		return -errno;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	err = rw_thread_start(&t->thread, link_thread_main, a);
	if (err) {
		close(t->done_fd);
		t->done_fd = -1;
		return -err;
	}
	t->started = true;
	return 0;
}

void agent_link_thread_stop(struct agent *a)
{
	struct agent_link_thread *t = &a->link;

	if (!t->started)
		return;
	rw_thread_stop(t->thread, &t->lock, &t->cond, &t->stop);
	close(t->done_fd);
	t->done_fd = -1;
	t->started = false;
}

bool agent_on_loop(const struct agent *a)
{
	return !a->link.started || pthread_equal(pthread_self(), a->link.loop);
}

/* The loop's wait for the piece: PolicyWatch's eventfd and the thread's, whichever first; and
 * the ring drained on the tick's period meanwhile, so that a long piece loses no event.
 */
static void serve_until_done(struct agent *a)
{
	struct agent_link_thread *t = &a->link;
	struct pollfd p[2] = {
		{.fd = t->done_fd, .events = POLLIN},
		{.fd = a->follow.watch ? rw_pw_fd(a->follow.watch) : -1, .events = POLLIN}};
	uint64_t n;

	for (;;) {
		int64_t due = a->drain.last_ns + (int64_t)TICK_MS * 1000000 - rw_now_mono_ns();
		/* No ring (a test's agent): nothing to drain, no period to keep. */
		int ready = poll(p, 2, !a->ring ? -1 : due > 0 ? (int)(due / 1000000) + 1 : 0);

		if (ready < 0) {
			if (errno == EINTR)
				continue;
			rw_err("link thread: poll: %s", strerror(errno));
			break;
		}
		if (ready == 0) {
			agent_drain_ring(a);
			agent_flush_subscribers(a);
			continue;
		}
		if (p[1].revents & POLLIN) {
			agent_follow_on_fd(a);
			/* A revoke's probes follow its ack now, not the piece's end: the prober's
			 * thread reads only the datapath.
			 */
			agent_settle(a);
		}
		if (p[0].revents & POLLIN)
			break;
	}
	/* After a failed poll() this read waits for the piece: the eventfd blocks. */
	while (read(t->done_fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
}

int agent_beside(struct agent *a, int (*fn)(struct agent *a, void *arg), void *arg)
{
	struct agent_link_thread *t = &a->link;
	int ret;

	if (!t->started || !agent_on_loop(a) || t->busy) {
		ret = fn(a, arg);
	} else {
		t->busy = true;
		pthread_mutex_lock(&t->lock);
		t->arg = arg;
		t->fn = fn;
		pthread_cond_signal(&t->cond);
		pthread_mutex_unlock(&t->lock);
		serve_until_done(a);
		/* The thread's writes before its eventfd's are seen after the lock. */
		pthread_mutex_lock(&t->lock);
		ret = t->ret;
		pthread_mutex_unlock(&t->lock);
		t->busy = false;
	}
	if (a->link.containers_due) {
		a->link.containers_due = false;
		containers_poll(a);
	}
	return ret;
}

bool agent_beside_running(const struct agent *a)
{
	return a->link.busy;
}
