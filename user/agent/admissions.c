// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* admissions.c: the containers the datapath admits to rules with a "from" (docs/principals.md):
 * the container table (containers.c) as the list every apply writes into its slot's rw_admit,
 * the live slot's rw_admit kept in step with the table between applies, and the table's names
 * for the cgroup ids events carry.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "eventfmt.h"
#include "log.h"
#include "principals.h"

static int by_cgroup(const void *x, const void *y)
{
	const struct rw_principal *a = x, *b = y;

	return a->cgroup_id < b->cgroup_id ? -1 : a->cgroup_id > b->cgroup_id;
}

/* The table's containers with a cgroup, sorted by cgroup id, into a->admissions and the
 * datapath handle (rw_apply() reads dp.principals). The names point into the table, which
 * only containers_poll() changes, and every change bumps its gen: the list is rebuilt then.
 */
void admissions_refresh(struct agent *a)
{
	struct agent_admissions *s = &a->admissions;
	size_t n = 0;

	if (s->built && s->gen == a->containers.gen)
		return;
	if (a->containers.n > s->cap) {
		struct rw_principal *p = realloc(s->p, a->containers.n * sizeof(*p));

		if (!p) {
			rw_err("admissions: no memory for %zu containers; the last list stays",
			       a->containers.n);
			return;
		}
		s->p = p;
		s->cap = a->containers.n;
	}
	for (size_t i = 0; i < a->containers.n; i++) {
		const struct rw_container *c = &a->containers.c[i];

		if (c->cgroup_id)
			s->p[n++] = (struct rw_principal){c->name, c->cgroup_id, c->ifindex};
	}
	qsort(s->p, n, sizeof(*s->p), by_cgroup);
	s->n = n;
	s->gen = a->containers.gen;
	s->built = true;
	a->dp.principals = s->p;
	a->dp.n_principals = n;
}

/* After the table changed: the live slot's rw_admit made the table's, under the snapshot in
 * force (whose rule ids the live slot's rw_from holds). Additions before removals, so that a
 * container that stays admitted is never missing in between.
 */
void admissions_sync(struct agent *a)
{
	struct agent_admissions *s = &a->admissions;
	unsigned long long gen = s->gen;
	struct rw_config cfg;
	char err[512];
	int ret;

	admissions_refresh(a);
	if ((s->written && gen == s->gen) || !a->pol.have_policy)
		return;
	ret = rw_config_read(&a->dp, &cfg);
	if (!ret && RW_STATE_READY(cfg.state))
		ret = rw_admit_write(&a->dp, RW_STATE_SLOT(cfg.state), &a->pol.policy, s->p, s->n,
				     err, sizeof(err));
	else if (!ret)
		return;
	else
		snprintf(err, sizeof(err), "%s: %s", rw_map_names[RW_M_CONFIG], strerror(-ret));
	if (ret) {
		s->failures++;
		rw_err("admissions: %s; the live slot keeps the containers it admitted", err);
		return;
	}
	s->writes++;
	s->written = true;
}

/* The name of the container whose cgroup is cgroup_id, for an event (eventfmt.h). */
static const char *container_of(uint64_t cgroup_id, void *arg)
{
	const struct agent_admissions *s = arg;
	struct rw_principal key = {.cgroup_id = cgroup_id};
	const struct rw_principal *p;

	if (!cgroup_id || !s->n)
		return NULL;
	p = bsearch(&key, s->p, s->n, sizeof(key), by_cgroup);
	return p ? p->name : NULL;
}

void admissions_init(struct agent *a)
{
	rw_event_set_container_namer(container_of, &a->admissions);
}

void admissions_free(struct agent *a)
{
	rw_event_set_container_namer(NULL, NULL);
	a->dp.principals = NULL;
	a->dp.n_principals = 0;
	free(a->admissions.p);
	memset(&a->admissions, 0, sizeof(a->admissions));
}
