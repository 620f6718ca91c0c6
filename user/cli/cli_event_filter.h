/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_event_filter.h: which events `runwall drops` shows, and the header over their columns.
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return, so that every function here can be unit tested on its own (tests/unit/test_cli.c).
 * Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_CLI_EVENT_FILTER_H
#define RUNWALL_CLI_EVENT_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <linux/types.h>

#include "runwall.h"
#include "datapath.h"
#include "ipaddr.h"
#include "liveruns.h"
#include "mapfill.h"
#include "parse.h"
#include "policy.h"

/* Which events `runwall drops` shows. Zeroed = every drop. */
struct rw_cli_filter {
	bool all;	 /* allowed new flows too */
	const char *run; /* run id, or NULL */
	bool has_pod;
	struct rw_ip pod;  /* the pod's side of the event (source of egress, dst of ingress) */
	__u32 pod_ifindex; /* the pod's veth when known (0: not known): its events match too */
	int reason;	   /* -1: any */
	bool has_dst;
	struct rw_ip dst; /* either family: an event of the other never matches */
	__u16 dport;	  /* host order, 0: any */
};

void rw_cli_filter_init(struct rw_cli_filter *f);
bool rw_cli_filter_match(const struct rw_cli_filter *f, const struct rw_event *ev);

/* The header over rw_event_line()'s columns. */
void rw_cli_event_header(char *buf, size_t len);

#endif /* RUNWALL_CLI_EVENT_FILTER_H */
