// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_policy.c: libFuzzer target for the snapshot parser (any bytes, as a file or the body of
 * `apply` would carry), IPv4 and IPv6. An accepted snapshot must survive the things done with it
 * next: the diff against itself is empty, and a second parse of the same bytes gives equal runs
 * with equal digests.
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
	for (size_t r = 0; r < p.n_runs; r++) {
		if (r >= q.n_runs || !rw_policy_run_equal(&p, &p.runs[r], &q, &q.runs[r]))
			abort();
		/* The digest by which an apply keeps a run: the same bytes, the same digest. */
		if (memcmp(p.runs[r].digest, q.runs[r].digest, sizeof(p.runs[r].digest)))
			abort();
		/* Each family in its own array, where it was written: no position twice. */
		for (size_t i = 1; i < p.runs[r].n_pods6; i++)
			if (p.runs[r].pods6_at[i] <= p.runs[r].pods6_at[i - 1])
				abort();
	}
	rw_policy_free(&q);
	rw_policy_free(&p);
	return 0;
}
