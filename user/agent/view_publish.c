// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* view_publish.c: the agent's state handed to the HTTP view on the loop's tick (when something
 * changed, at most every 100 ms, and every second): the agent's part of the status (the control
 * socket's reply, which the view makes the node's document of for /api/status), readiness for
 * /readyz (a snapshot is enforced, its lease, if it has one, has not expired, and every known
 * sandbox veth has both programs attached) and what /metrics needs of the agent. The HTTP threads
 * never read the agent's own structures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "agent.h"
#include "liveruns.h"

void agent_view_publish(struct agent *a)
{
	struct rw_metrics_snap snap = a->pol.metrics;
	struct rw_metrics_run *runs =
		calloc(a->sandboxes.n_sbx ? a->sandboxes.n_sbx : 1, sizeof(*runs));
	struct rw_config cfg = {};
	char text[256];
	size_t detached = 0;
	int64_t lease_left;
	bool ready, lease_expired;
	/* The live slot's pod tables, opened once for every sandbox (applies run on this thread,
	 * so the slot stays live meanwhile).
	 */
	int pods_fd = rw_live_inner_fd(&a->dp, RW_M_PODS),
	    pods6_fd = rw_live_inner_fd(&a->dp, RW_M_PODS6);

	rw_config_read(&a->dp, &cfg);
	lease_expired = rw_lease_state(&cfg, &lease_left) == RW_LEASE_EXPIRED;
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++) {
		struct sandbox *s = &a->sandboxes.sbx[i];
		struct rw_pod pod;

		if (!s->attached[RW_DIR_EGRESS] || !s->attached[RW_DIR_INGRESS]) {
			snap.sandboxes[RW_SBX_NOT_ATTACHED]++;
			detached++;
		} else if (!(s->pod.flags & (RW_EP_IP4 | RW_EP_IP6))) {
			snap.sandboxes[RW_SBX_UNBOUND]++;
		} else if ((s->pod.flags & RW_EP_IP4)
				   ? pods_fd < 0 ||
					     bpf_map_lookup_elem(pods_fd, &s->pod.pod_ip, &pod)
				   : pods6_fd < 0 ||
					     bpf_map_lookup_elem(pods6_fd, s->pod.pod_ip6, &pod)) {
			snap.sandboxes[RW_SBX_NO_RUN]++;
		} else {
			bool dup = false;

			snap.sandboxes[RW_SBX_ENFORCED]++;
			/* Runs with a sandbox here: their counters are this node's to export. */
			for (size_t r = 0; runs && r < snap.n_runs; r++)
				dup |= runs[r].idx == pod.run_idx;
			if (runs && !dup) {
				snprintf(runs[snap.n_runs].id, sizeof(runs[0].id), "%s",
					 pod.run_id);
				runs[snap.n_runs++].idx = pod.run_idx;
			}
		}
	}
	if (pods_fd >= 0)
		close(pods_fd);
	if (pods6_fd >= 0)
		close(pods6_fd);
	if (!runs)
		snap.n_runs = 0;
	agent_follow_metrics(a, &snap);
	agent_probe_metrics(a, &snap);
	snap.runs = runs;
	snap.attach_failures = a->sandboxes.attach_failures;
	snap.hook_repairs = a->sandboxes.hook_repairs;
	snap.subscribers = a->subscribers.n_subs;
	snap.delivered = a->subscribers.delivered_gone;
	snap.skipped = a->subscribers.skipped_gone;
	for (int i = 0; i < a->subscribers.n_subs; i++) {
		snap.delivered += a->subscribers.subs[i].delivered;
		snap.skipped += a->subscribers.subs[i].skipped;
	}
	snap.cni_watched = a->cni.conf_dir;
	snap.cni_chained = a->cni.chained;
	snap.cni_repairs = a->cni.repairs;
	ready = RW_STATE_READY(cfg.state) && !lease_expired && !detached &&
		(!a->cni.conf_dir || a->cni.chained);
	if (!RW_STATE_READY(cfg.state))
		snprintf(text, sizeof(text), "not ready: no snapshot applied\n");
	else if (lease_expired)
		snprintf(text, sizeof(text),
			 "not ready: the control plane's lease expired %lld ms ago: services and "
			 "inbound only (lease-expired)\n",
			 (long long)(-lease_left / 1000000));
	else if (detached)
		snprintf(text, sizeof(text), "not ready: %zu of %zu sandbox veths not attached\n",
			 detached, a->sandboxes.n_sbx);
	else if (a->cni.conf_dir && !a->cni.chained)
		snprintf(text, sizeof(text), "not ready: runwall-cni not chained: %.200s\n",
			 a->cni.why);
	else
		snprintf(text, sizeof(text), "ready revision %llu, %zu sandbox veths attached\n",
			 (unsigned long long)RW_STATE_REVISION(cfg.state), a->sandboxes.n_sbx);
	rw_agent_view_publish(a->view, agent_status_part(a), ready, text, &snap);
	free(runs);
	a->publish.dirty = false;
}

void agent_view_changed(struct agent *a)
{
	a->publish.dirty = true;
}

/* A publish renders the whole status (every run and sandbox: a millisecond or two on a node of
 * 1 000 runs, on the loop that applies PolicyWatch's changes), so changes coming faster than
 * this are published together.
 */
#define PUBLISH_MIN_MS 100

void agent_view_tick(struct agent *a)
{
	unsigned int since;

	if (!a->view)
		return;
	since = ++a->publish.ticks - a->publish.last;
	if ((a->publish.dirty && since * TICK_MS >= PUBLISH_MIN_MS) || since * TICK_MS >= 1000) {
		a->publish.last = a->publish.ticks;
		agent_view_publish(a);
	}
}
