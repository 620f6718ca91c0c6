/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* unit_event.h: the verdict event the unit suites of the view's stores feed them (test_event_store,
 * test_run_shares): run's TCP packet out of its pod, from saddr:40000 to daddr:dport.
 */
#ifndef RUNWALL_TEST_UNIT_EVENT_H
#define RUNWALL_TEST_UNIT_EVENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include "runwall.h"

static inline struct rw_event tcp_out_event(const char *run, __be32 saddr, __be32 daddr,
					    __u16 dport, int verdict, int reason)
{
	struct rw_event ev = {};

	snprintf(ev.run_id, sizeof(ev.run_id), "%s", run);
	ev.saddr = saddr;
	ev.daddr = daddr;
	ev.dport = htons(dport);
	ev.sport = htons(40000);
	ev.proto = IPPROTO_TCP;
	ev.dir = RW_DIR_EGRESS;
	ev.verdict = verdict;
	ev.reason = reason;
	return ev;
}

#endif /* RUNWALL_TEST_UNIT_EVENT_H */
