// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_policy.c: libFuzzer target for the snapshot parser (any bytes, as a file or the body of
 * `apply` would carry), IPv4 and IPv6. An accepted snapshot must survive the things done with it
 * next: the diff against itself is empty, and a second parse of the same bytes gives equal runs
 * with equal digests. The document's entry (rw_policy_parse_json(), PolicyWatch's) judges the
 * same bytes' JSON as the text's does: the same refusal without its position, or equal runs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy.h"
#include "../policy_error_text.h"

static void check_runs_equal(const struct rw_policy *p, const struct rw_policy *q)
{
	if (p->n_runs != q->n_runs)
		abort();
	for (size_t r = 0; r < p->n_runs; r++) {
		if (!rw_policy_run_equal(p, &p->runs[r], q, &q->runs[r]))
			abort();
		/* The digest by which an apply keeps a run: the same bytes, the same digest. */
		if (memcmp(p->runs[r].digest, q->runs[r].digest, sizeof(p->runs[r].digest)))
			abort();
	}
}

/* rw_policy_parse_json() of the bytes' document: refused as `text_rc`/`text_err` says, the
 * message the same but for "LINE:COL:", or accepted as `p`.
 */
static void check_doc_entry(const uint8_t *data, size_t size, int text_rc,
			    const struct rw_policy_error *text_err, const struct rw_policy *p)
{
	json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	struct rw_policy_error err;
	struct rw_policy d;
	char want[sizeof(err.text) + 8];
	int rc;

	if (!doc)
		return;
	rc = rw_policy_parse_json(doc, "fuzz", 0, &d, &err);
	json_decref(doc);
	if (rc != text_rc)
		abort();
	if (rc) {
		rw_test_error_unplaced(text_err->text, "fuzz", want, sizeof(want));
		/* A refusal longer than the text holds is cut; the text entry's, with its
		 * ":LINE:COL", is cut sooner: then the document's starts with it.
		 */
		if (strlen(text_err->text) == sizeof(text_err->text) - 1
			    ? strncmp(err.text, want, strlen(want))
			    : strcmp(err.text, want))
			abort();
		if (err.line || err.column)
			abort();
		return;
	}
	check_runs_equal(p, &d);
	rw_policy_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rw_policy p, q;
	struct rw_policy_error err;
	char diff[4096];
	int rc;

	rc = rw_policy_parse((const char *)data, size, "fuzz", &p, &err);
	check_doc_entry(data, size, rc, &err, &p);
	if (rc) {
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
	check_runs_equal(&p, &q);
	for (size_t r = 0; r < p.n_runs; r++) {
		/* Each family in its own array, where it was written: no position twice. */
		for (size_t i = 1; i < p.runs[r].n_pods6; i++)
			if (p.runs[r].pods6_at[i] <= p.runs[r].pods6_at[i - 1])
				abort();
	}
	rw_policy_free(&q);
	rw_policy_free(&p);
	return 0;
}
