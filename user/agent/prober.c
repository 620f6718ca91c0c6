// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* prober.c: the probes of the connections an apply cut (revoke_probe.c), on a thread of their
 * own (worker.c). A pass walks every sandbox's conntrack tables and sends into each pod a
 * segment for every connection whose verdict is stale: on a busy node, hundreds of milliseconds
 * to seconds, which on the loop's thread every PolicyWatch change queued behind it would carry.
 * Here it only shares the CPU. Applies made during a pass are served by one pass after it: the
 * flows they made stale are all there for it to find. Each pass walks only the sandboxes of the
 * runs a change may have cut since the last (`seen`, rw_revoke_probe()): a claim's revoke reads
 * its run's sandboxes' tables, not the node's, and its grant none.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "revoke_probe.h"
#include "worker.h"

struct prober {
	const struct rw_datapath *dp;
	struct rw_worker worker;
	__u64 seen[RW_MAX_RUNS]; /* each run's cut revision as the last pass left it: its own */
	pthread_mutex_t lock;	 /* the totals: written by the pass, read by the loop */
	uint64_t sent, capped, no_mac, failed; /* the passes' totals, for /metrics */
};

/* One pass, counted and logged. Always 0: a pass that failed is not made again before the
 * next apply asks for one.
 */
static int pass(void *arg)
{
	struct prober *p = arg;
	struct rw_probe_stats st;
	int err = rw_revoke_probe(p->dp, p->seen, &st);

	if (err) {
		rw_warn("probing the connections the apply may have cut: %s", strerror(-err));
		return 0;
	}
	pthread_mutex_lock(&p->lock);
	p->sent += st.probed;
	p->capped += st.capped;
	p->no_mac += st.no_mac;
	p->failed += st.failed;
	pthread_mutex_unlock(&p->lock);
	if (st.probed || st.capped || st.no_mac || st.failed)
		rw_info("probed %u connections in %u sandboxes whose verdicts the apply changed "
			"(%u over the bounds of %d per sandbox and %d per apply, %u of pods with no "
			"neighbour entry, %u segments not sent)",
			st.probed, st.sandboxes, st.capped, RW_PROBE_PER_SANDBOX,
			RW_PROBE_PER_APPLY, st.no_mac, st.failed);
	return 0;
}

void agent_probe_cut_connections(struct agent *a)
{
	struct prober *p = a->prober;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p) {
			rw_warn("probing the connections the apply may have cut: %s",
				strerror(ENOMEM));
			return;
		}
		p->dp = &a->dp;
		pthread_mutex_init(&p->lock, NULL);
		if (!rw_worker_start(&p->worker, pass, p))
			rw_warn("no thread for the probes of cut connections (%s): they run on the "
				"loop's",
				strerror(errno));
		a->prober = p;
	}
	if (p->worker.threaded)
		rw_worker_ask(&p->worker);
	else
		pass(p);
}

void agent_probe_metrics(const struct agent *a, struct rw_metrics_snap *snap)
{
	struct prober *p = a->prober;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	snap->probes_sent = p->sent;
	snap->probes_capped = p->capped;
	snap->probes_no_mac = p->no_mac;
	snap->probes_failed = p->failed;
	pthread_mutex_unlock(&p->lock);
}

void agent_prober_stop(struct agent *a)
{
	struct prober *p = a->prober;

	if (!p)
		return;
	rw_worker_stop(&p->worker);
	pthread_mutex_destroy(&p->lock);
	free(p);
	a->prober = NULL;
}
