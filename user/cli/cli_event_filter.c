// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_event_filter.c: see cli_event_filter.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_event_filter.h"
#include "ctl.h"
#include "eventfmt.h"
#include "reasons.h"

void rw_cli_filter_init(struct rw_cli_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->reason = -1;
}

bool rw_cli_filter_match(const struct rw_cli_filter *f, const struct rw_event *ev)
{
	/* Allowed flows only with --all, or when the reason asked for is "allowed". */
	if (ev->verdict != RW_VERDICT_DROP && !f->all && f->reason != RW_REASON_ALLOWED)
		return false;
	if (f->reason >= 0 && ev->reason != f->reason)
		return false;
	if (f->run && strncmp(ev->run_id, f->run, RW_RUN_ID_LEN))
		return false;
	if (f->has_pod) {
		struct rw_ip side = rw_event_pod_ip(ev);

		if (!rw_ip_eq(&side, &f->pod) && !(f->pod_ifindex && ev->ifindex == f->pod_ifindex))
			return false;
	}
	return !f->has_dst || rw_event_at(ev, rw_event_dst(ev), &f->dst, f->dport);
}

void rw_cli_event_header(char *buf, size_t len)
{
	/* The widths of rw_event_line(): a 27-character time, then its fields. */
	snprintf(buf, len, "%-27s  %-7s %-5s %-20s %-12s %21s    %-21s %s", "TIME", "DIR", "VERD",
		 "REASON/PATH", "RUN", "SOURCE", "DESTINATION", "PROTO RULE");
}
