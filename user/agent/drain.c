// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* drain.c: the ring buffer drained in bounded steps. libbpf 1.1's ring_buffer__consume() loops
 * while records keep arriving (it has no ring_buffer__consume_n()), so a sandbox that floods
 * faster than the agent reads would hold the loop for as long as it likes. A sample callback
 * that returns a negative value makes libbpf store the consumer position after that record and
 * return (ringbuf_process_ring()), so agent_ring_cb() counts and stops the drain there; the
 * rest waits for the next tick.
 *
 * A drain stops at whichever comes first: RING_DRAIN_BUDGET records (what the ring holds, so a
 * tick can empty a full ring when the work per event is cheap) or RING_DRAIN_MS of work (so a
 * flood, or events made costly by subscribers and the HTTP view, take a bounded share of the
 * loop, and the control socket, netlink and HTTP stay served). A PolicyWatch change that comes
 * meanwhile is applied between two records (agent_follow_urgent()), and the drain goes on.
 */
#include <errno.h>

#include "agent.h"
#include "log.h"
#include "util.h"

#define RW_DRAIN_STOP  (-ENOSPC) /* our own stop, told apart from the callback's errors */
#define RW_DRAIN_YIELD (-EAGAIN) /* a PolicyWatch change waits: serve it, then go on */

int agent_ring_cb(void *ctx, void *data, size_t size)
{
	struct agent *a = ctx;
	int ret = agent_on_event(ctx, data, size);

	if (--a->drain.ring_budget <= 0)
		return RW_DRAIN_STOP;
	/* The clock every RING_DRAIN_CLOCK_EVERY records: a vDSO call, cheap next to them; and
	 * whether a PolicyWatch change waits (a lock taken and let go), which goes first.
	 */
	if (!(a->drain.ring_budget % RING_DRAIN_CLOCK_EVERY)) {
		if (rw_now_mono_ns() >= a->drain.ring_deadline_ns)
			return RW_DRAIN_STOP;
		if (ret >= 0 && agent_follow_pending(a))
			return RW_DRAIN_YIELD;
	}
	return ret;
}

void agent_drain_ring(struct agent *a)
{
	int ret;

	a->drain.last_ns = rw_now_mono_ns();
	a->drain.ring_budget = RING_DRAIN_BUDGET;
	a->drain.ring_deadline_ns = a->drain.last_ns + (int64_t)RING_DRAIN_MS * 1000000;
	/* The same drain goes on after each change served: its budget and deadline stand. */
	while ((ret = ring_buffer__consume(a->ring)) == RW_DRAIN_YIELD)
		agent_follow_urgent(a);
	if (ret == RW_DRAIN_STOP)
		a->drain.ring_capped++;
	else if (ret < 0)
		rw_debug("ring buffer: %d", ret);
}
