/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* metrics.h: /metrics in the Prometheus text format. The counters come from the kernel's maps
 * at scrape time (the truth); what only the agent knows comes from a snapshot it hands over.
 */
#ifndef RUNWALL_METRICS_H
#define RUNWALL_METRICS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "datapath.h"
#include "principal_refusals.h"
#include "staged_diffs.h"
#include "refused_top.h"
#include "run_shares.h"

/* Upper bounds (seconds) of the apply duration histogram's buckets (+Inf is implied). */
#define RW_APPLY_BUCKETS(X) X(0.005) X(0.01) X(0.025) X(0.05) X(0.1) X(0.25) X(0.5) X(1) X(2.5) X(5)
#define RW_APPLY_N_BUCKETS  10

enum rw_sbx_state {
	RW_SBX_ENFORCED,     /* both hooks attached, bound to a pod of a run */
	RW_SBX_UNBOUND,	     /* attached, no pod routed through it yet: deny-all */
	RW_SBX_NO_RUN,	     /* attached, its pod is in no run of the snapshot: deny-all */
	RW_SBX_NOT_ATTACHED, /* a hook is missing (attach failed): not enforced here */
	RW_SBX__COUNT
};

struct rw_metrics_run {
	char id[RW_RUN_ID_LEN];
	__u32 idx;
};

struct rw_metrics_snap {
	struct rw_metrics_run *runs; /* runs with a sandbox bound on this node */
	size_t n_runs;
	uint64_t applies; /* apply duration histogram */
	double apply_seconds;
	uint64_t apply_bucket[RW_APPLY_N_BUCKETS]; /* per bucket, not cumulative */
	uint64_t applies_refused;
	/* The probes of connections an apply may have cut (revoke_probe.c), by outcome. */
	uint64_t probes_sent, probes_capped, probes_no_mac, probes_failed;
	uint64_t sandboxes[RW_SBX__COUNT];
	uint64_t attach_failures;
	uint64_t hook_repairs;	       /* hooks found without runwall first, and put back */
	bool cni_watched, cni_chained; /* --cni-conf-dir, and whether runwall-cni is chained */
	uint64_t cni_repairs;
	uint64_t subscribers, delivered, skipped;
	uint64_t events_buffered, events_evicted, aggregates, aggregates_evicted;
	uint64_t events_displaced[RW_SHARE__CAUSES], aggregates_displaced[RW_SHARE__CAUSES];
	uint64_t events_deferred, events_deferred_dropped;
	uint64_t requests_queued, requests_sent, requests_failed, requests_dropped,
		requests_retries, requests_pending, requests_suppressed, requests_displaced;
	uint64_t requests_forgotten[RW_SHARE__CAUSES];
	/* PolicyWatch (--policy-url); message_age < 0: no message yet */
	bool watch_enabled, watch_connected;
	uint64_t watch_connects, watch_messages, watch_refusals, watch_acks_sent, watch_acks_failed,
		watch_revision_received;
	double watch_message_age;
	/* The destinations refused most among the events in memory (refused_top.c). */
	struct rw_refused_top refused_top[RW_REFUSED_TOP_K];
	size_t n_refused_top;
	/* Refused events that name their sender, by principal (principal_refusals.c). */
	struct rw_principal_series *principals;
	size_t n_principals;
	uint64_t principals_overflow;
	/* Events the staged snapshot would judge otherwise, by run and verdicts (staged_diffs.c). */
	struct rw_staged_series *staged;
	size_t n_staged;
	uint64_t staged_overflow;
};

/* Count one apply that took `seconds`. */
void rw_metrics_apply(struct rw_metrics_snap *s, double seconds);
/* The exposition text (malloc'd), NULL on ENOMEM. dp's maps are read now. */
char *rw_metrics_text(const struct rw_datapath *dp, const struct rw_metrics_snap *s);

#endif /* RUNWALL_METRICS_H */
