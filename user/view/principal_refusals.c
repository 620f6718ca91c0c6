// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* principal_refusals.c: refused events by (run, container, uid, reason), a bounded table. */
#include <stdio.h>
#include <string.h>

#include "principal_refusals.h"

#define N_SLOTS (2 * RW_PRINCIPAL_SERIES_MAX)

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t key_hash(const char *run, const char *container, __u32 uid, __u8 reason)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = fnv(h, run, strlen(run) + 1);
	h = fnv(h, container, strlen(container) + 1);
	h = fnv(h, &uid, sizeof(uid));
	return fnv(h, &reason, sizeof(reason));
}

void rw_principal_refusals_add(struct rw_principal_refusals *t, const struct rw_event *ev,
			       const char *container)
{
	char run[RW_RUN_ID_LEN], name[RW_PRINCIPAL_CONTAINER_LEN];
	size_t i;

	if (ev->verdict != RW_VERDICT_DROP || ev->uid == RW_UID_NONE)
		return;
	snprintf(run, sizeof(run), "%.*s", (int)sizeof(ev->run_id), ev->run_id);
	snprintf(name, sizeof(name), "%s", container && container[0] ? container : "unknown");
	i = key_hash(run, name, ev->uid, ev->reason) & (N_SLOTS - 1);
	for (;; i = (i + 1) & (N_SLOTS - 1)) {
		struct rw_principal_series *s;

		if (!t->slot[i])
			break;
		s = &t->series[t->slot[i] - 1];
		if (s->uid == ev->uid && s->reason == ev->reason && !strcmp(s->run, run) &&
		    !strcmp(s->container, name)) {
			s->count++;
			return;
		}
	}
	if (t->n == RW_PRINCIPAL_SERIES_MAX) {
		t->overflow++;
		return;
	}
	t->series[t->n] =
		(struct rw_principal_series){.uid = ev->uid, .reason = ev->reason, .count = 1};
	memcpy(t->series[t->n].run, run, sizeof(run));
	memcpy(t->series[t->n].container, name, sizeof(name));
	t->slot[i] = (uint16_t)++t->n;
}
