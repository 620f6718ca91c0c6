// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_http_query.c: libFuzzer target for the live view's query parser (any bytes, as the query
 * string of /api/events, /api/events/stream or /api/graph would carry them, from any client that
 * holds the token). A refusal always says why; an accepted filter is usable as it is.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "event_store.h"

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
	return 0;
}
