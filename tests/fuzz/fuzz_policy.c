// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_policy.c: libFuzzer target for the snapshot parser (any bytes, as a file or the body of
 * `apply` would carry). An accepted snapshot must survive the things done with it next: the
 * diff against itself is empty, and a second parse of the same bytes gives equal runs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rw_policy p, q;
	struct rw_policy_error err;
	char diff[4096];

	if (rw_policy_parse((const char *)data, size, "fuzz", &p, &err)) {
		/* A refusal always says why. */
		if (!err.text[0])
			abort();
		return 0;
	}
	if (rw_policy_diff(&p, &p, diff, sizeof(diff)) != 0)
		abort();
	rw_policy_diff(NULL, &p, diff, sizeof(diff));
	if (rw_policy_parse_newer((const char *)data, size, "fuzz", p.revision, &q, &err) == 0)
		abort(); /* the same revision again must be refused */
	if (rw_policy_parse((const char *)data, size, "fuzz", &q, &err))
		abort();
	for (size_t r = 0; r < p.n_runs; r++)
		if (r >= q.n_runs || !rw_policy_run_equal(&p, &p.runs[r], &q, &q.runs[r]))
			abort();
	rw_policy_free(&q);
	rw_policy_free(&p);
	return 0;
}
