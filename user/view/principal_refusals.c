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

/* The index slot of a series' key: its own, or the empty one where it would go. */
static size_t slot_of(const struct rw_principal_refusals *t, const char *run, const char *name,
		      __u32 uid, __u8 reason)
{
	size_t i = key_hash(run, name, uid, reason) & (N_SLOTS - 1);

	for (;; i = (i + 1) & (N_SLOTS - 1)) {
		const struct rw_principal_series *s;

		if (!t->slot[i])
			return i;
		s = &t->series[t->slot[i] - 1];
		if (s->uid == uid && s->reason == reason && !strcmp(s->run, run) &&
		    !strcmp(s->container, name))
			return i;
	}
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
	i = slot_of(t, run, name, ev->uid, ev->reason);
	if (t->slot[i]) {
		t->series[t->slot[i] - 1].count++;
		return;
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

void rw_principal_refusals_keep(struct rw_principal_refusals *t,
				bool (*keep)(const char *run, void *arg), void *arg)
{
	size_t n = 0;

	memset(t->slot, 0, sizeof(t->slot));
	for (size_t k = 0; k < t->n; k++) {
		const struct rw_principal_series *s;

		if (t->series[k].run[0] && !keep(t->series[k].run, arg))
			continue;
		t->series[n] = t->series[k];
		s = &t->series[n];
		t->slot[slot_of(t, s->run, s->container, s->uid, s->reason)] = (uint16_t)++n;
	}
	t->n = n;
}
