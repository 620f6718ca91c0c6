// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ring.c (test_datapath): a full ring buffer loses events, never verdicts or counts.
 */
#include "dp_suite.h"

/* A full ring loses events, never verdicts or counts. */
void test_ring_full(void)
{
	struct pkt_spec p = {FLOW(POD_A, "93.184.216.34", TCP, 40090, 443),
			     .tcp_flags = RST | ACK}; /* repeatable: a reset is never answered */
	const __u32 n = 50000; /* more than the 4 MiB ring holds (120-byte events + headers) */
	struct rw_counters before, after;
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(&p, buf);
	long long sent, lost;
	int retval, ok;

	drain_events();
	rw_counters_read(&dp, 0, &before);
	test_run(E, ifindex_of[0], buf, len, n, &retval);
	rw_counters_read(&dp, 0, &after);
	sent = after.events_sent - before.events_sent;
	lost = after.events_lost - before.events_lost;
	t_count++;
	ok = CHECK_EQ(retval, 2, "verdict with a full ring");
	ok &= CHECK_EQ(after.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			       before.packets[E][RW_REASON_NOT_ALLOWLISTED],
		       n, "every drop counted");
	ok &= CHECK(lost > 0, "lost", "no event was lost: the ring did not fill");
	ok &= CHECK_EQ(sent + lost, n, "sent + lost");
	drain_events();
	printf("%s %d - ring full: %u drops counted, %lld events sent, %lld lost\n",
	       ok ? "ok" : "not ok", t_count, n, sent, lost);
}
