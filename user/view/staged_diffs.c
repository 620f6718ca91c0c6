// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* staged_diffs.c: events the staged snapshot would judge otherwise, by (run, from, to). A run has
 * two series at most, and a node a few hundred runs: a scan of the table is the index.
 */
#include <stdio.h>
#include <string.h>

#include "staged_diffs.h"

void rw_staged_diffs_add(struct rw_staged_diffs *t, const char *run, const char *from,
			 const char *to)
{
	bool from_allow;

	if (!run || !from || !to || !strcmp(from, to) ||
	    (strcmp(from, "allow") && strcmp(from, "drop")) ||
	    (strcmp(to, "allow") && strcmp(to, "drop")))
		return;
	from_allow = !strcmp(from, "allow");
	for (size_t i = 0; i < t->n; i++) {
		if (t->series[i].from_allow == from_allow && !strcmp(t->series[i].run, run)) {
			t->series[i].count++;
			return;
		}
	}
	if (t->n == RW_STAGED_SERIES_MAX) {
		t->overflow++;
		return;
	}
	snprintf(t->series[t->n].run, sizeof(t->series[t->n].run), "%s", run);
	t->series[t->n].from_allow = from_allow;
	t->series[t->n].count = 1;
	t->n++;
}

void rw_staged_diffs_keep(struct rw_staged_diffs *t, bool (*keep)(const char *run, void *arg),
			  void *arg)
{
	size_t out = 0;

	for (size_t i = 0; i < t->n; i++)
		if (keep(t->series[i].run, arg))
			t->series[out++] = t->series[i];
	t->n = out;
}
