// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* policy_error_text.h: for the tests of the snapshot parser's two entries. The text entry
 * (rw_policy_parse()) words a refusal "SOURCE:LINE:COL: what"; the document entry
 * (rw_policy_parse_json()) has no positions and words the same refusal "SOURCE: what".
 */
#ifndef RUNWALL_TESTS_POLICY_ERROR_TEXT_H
#define RUNWALL_TESTS_POLICY_ERROR_TEXT_H

#include <stdio.h>
#include <string.h>

/* The text entry's refusal `text` as the document entry words it, into out[len]: the
 * ":LINE:COL" after `source` dropped; a text without a position keeps all after "SOURCE:".
 */
static inline void rw_test_error_unplaced(const char *text, const char *source, char *out,
					  size_t len)
{
	size_t n = strlen(source);
	int skip = 0;

	if (!strncmp(text, source, n))
		sscanf(text + n, ":%*d:%*d:%n", &skip);
	snprintf(out, len, "%s:%s", source, text + n + (skip ? skip : 1));
}

#endif /* RUNWALL_TESTS_POLICY_ERROR_TEXT_H */
