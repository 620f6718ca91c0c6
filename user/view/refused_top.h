/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* refused_top.h: the destinations refused most among the events in memory, for /metrics'
 * runwall_refused_destination_top: a fixed number of series, whatever the traffic.
 */
#ifndef RUNWALL_REFUSED_TOP_H
#define RUNWALL_REFUSED_TOP_H
#include <stddef.h>
#include <stdint.h>
#include "event_store.h"
#include "ipaddr.h"

/* K: the series the metric has at most. */
#define RW_REFUSED_TOP_K 10

struct rw_refused_top {
	struct rw_ip dst;
	__u16 port;	  /* host order; 0 for a protocol without ports */
	__u8 proto;	  /* the IP protocol (the upper layer's for IPv6) */
	__u8 reason;	  /* enum rw_reason */
	__be16 ethertype; /* the event's, for the protocol's name */
	uint64_t count;	  /* refused egress events of the store with this key */
};

/* The `k` (destination, port, protocol, reason) keys with the most refused egress events among
 * those `s` holds, most first; equal counts by key, so the answer is the same for the same
 * store. Returns how many were written (fewer when fewer keys exist), or -ENOMEM.
 */
int rw_refused_top(const struct rw_evstore *s, struct rw_refused_top *out, size_t k);

#endif /* RUNWALL_REFUSED_TOP_H */
