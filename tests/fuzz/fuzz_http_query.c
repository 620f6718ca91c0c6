// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_http_query.c: libFuzzer target for the live view's query parser (any bytes, as the query
 * string of /api/events, /api/events/stream or /api/graph would carry them, from any client that
 * holds the token). A refusal always says why; an accepted filter is usable as it is, and
 * matches the event it describes, of either family, either way.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "event_store.h"
#include "ipaddr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rw_evfilter f;
	struct rw_event ev;
	char err[256] = "";

	rw_evfilter_init(&f);
	if (rw_query_parse((const char *)data, size, &f, err, sizeof(err))) {
		if (!err[0])
			abort();
		return 0;
	}
	if (f.limit > RW_QUERY_MAX_LIMIT)
		abort();
	memset(&ev, 0, sizeof(ev));
	rw_evfilter_match(&f, &ev, "node");
	/* The event the filter describes (an IPv6 one when its addresses are) matches it, out of
	 * the pod and into it: the pod's side and the peer's are the family's own fields.
	 */
	if (!f.has_pod || !f.has_dst || f.pod.family == f.dst.family) {
		struct rw_ip any4 = rw_ip4(0);
		const struct rw_ip *fam = f.has_pod ? &f.pod : f.has_dst ? &f.dst : &any4;
		struct rw_ip pod = f.has_pod ? f.pod : *fam, peer = f.has_dst ? f.dst : *fam;

		ev.verdict = f.verdict >= 0 ? f.verdict : 0;
		ev.reason = f.reason >= 0 ? f.reason : 0;
		memcpy(ev.run_id, f.run, sizeof(ev.run_id));
		ev.dport = htons(f.dport);
		for (int dir = RW_DIR_EGRESS; dir <= RW_DIR_INGRESS; dir++) {
			ev.dir = dir;
			if (dir == RW_DIR_EGRESS)
				rw_event_set_addrs(&ev, &pod, &peer);
			else
				rw_event_set_addrs(&ev, &peer, &pod);
			if (!rw_evfilter_match(&f, &ev, f.node))
				abort();
		}
	}
	return 0;
}
