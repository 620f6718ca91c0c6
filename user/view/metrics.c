// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* metrics.c: the Prometheus exposition of /metrics (text format 0.0.4). Names follow the
 * conventions: runwall_ prefix, _total on counters, base units (bytes, seconds).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapfill.h"
#include "metrics.h"
#include "reasons.h"

static const double apply_bounds[RW_APPLY_N_BUCKETS] = {
#define RW_BOUND(x) x,
	RW_APPLY_BUCKETS(RW_BOUND)
#undef RW_BOUND
};

void rw_metrics_apply(struct rw_metrics_snap *s, double seconds)
{
	s->applies++;
	s->apply_seconds += seconds;
	for (int i = 0; i < RW_APPLY_N_BUCKETS; i++)
		if (seconds <= apply_bounds[i]) {
			s->apply_bucket[i]++;
			return;
		}
}

struct out {
	FILE *f;
	char *buf;
	size_t len;
};

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	fprintf(o->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(struct out *o, const char *name, const char *labels, unsigned long long v)
{
	fprintf(o->f, "%s%s%s%s %llu\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
		v);
}

/* One sample per cause of a per-run share's displacements (run_shares.h). */
static void share_samples(struct out *o, const char *name, const uint64_t *by_cause)
{
	sample(o, name, "cause=\"own_share\"", by_cause[RW_SHARE_OWN]);
	sample(o, name, "cause=\"fair_share\"", by_cause[RW_SHARE_FAIR]);
}

static void counters_family(struct out *o, const struct rw_datapath *dp,
			    const struct rw_metrics_snap *s, bool bytes)
{
	const char *node = bytes ? "runwall_bytes_total" : "runwall_packets_total";
	const char *run = bytes ? "runwall_run_bytes_total" : "runwall_run_packets_total";
	struct rw_counters c;
	char labels[200];

	family(o, node, "counter",
	       bytes ? "Bytes judged on this node's sandbox veths, by direction and reason (allowed: not a drop)."
		     : "Packets judged on this node's sandbox veths, by direction and reason (allowed: not a drop).");
	if (rw_counters_read(dp, 0, &c) == 0)
		for (int d = 0; d < RW_DIR_COUNT; d++)
			for (int r = 0; r < RW_REASON_COUNT; r++) {
				snprintf(labels, sizeof(labels), "direction=\"%s\",reason=\"%s\"",
					 rw_dir_name(d), rw_reason_name(r));
				sample(o, node, labels, bytes ? c.bytes[d][r] : c.packets[d][r]);
			}
	family(o, run, "counter",
	       bytes ? "Bytes per run with a sandbox on this node, by direction and reason."
		     : "Packets per run with a sandbox on this node, by direction and reason.");
	for (size_t i = 0; i < s->n_runs; i++) {
		if (rw_counters_read(dp, s->runs[i].idx, &c))
			continue;
		for (int d = 0; d < RW_DIR_COUNT; d++)
			for (int r = 0; r < RW_REASON_COUNT; r++) {
				snprintf(labels, sizeof(labels),
					 "run=\"%s\",direction=\"%s\",reason=\"%s\"", s->runs[i].id,
					 rw_dir_name(d), rw_reason_name(r));
				sample(o, run, labels, bytes ? c.bytes[d][r] : c.packets[d][r]);
			}
	}
}

/* The answers to refusals: sent back into the pod (rst, icmp) or not sent, over the sandbox's
 * answer budget (budget), node-wide and per run.
 */
static void answers_family(struct out *o, const struct rw_datapath *dp,
			   const struct rw_metrics_snap *s, const struct rw_counters *node)
{
	struct rw_counters c;
	char labels[200];

	family(o, "runwall_answers_total", "counter",
	       "Refused packets by the answer they got: a TCP reset (rst) or ICMP unreachable (icmp) sent back into the pod, or none over the sandbox's answer budget (budget).");
	for (int a = 1; a < RW_ANSWER_COUNT; a++) {
		snprintf(labels, sizeof(labels), "answer=\"%s\"", rw_answer_name(a));
		sample(o, "runwall_answers_total", labels, node->answers[a]);
	}
	family(o, "runwall_run_answers_total", "counter",
	       "Refused packets per run with a sandbox on this node, by the answer they got.");
	for (size_t i = 0; i < s->n_runs; i++) {
		if (rw_counters_read(dp, s->runs[i].idx, &c))
			continue;
		for (int a = 1; a < RW_ANSWER_COUNT; a++) {
			snprintf(labels, sizeof(labels), "run=\"%s\",answer=\"%s\"", s->runs[i].id,
				 rw_answer_name(a));
			sample(o, "runwall_run_answers_total", labels, c.answers[a]);
		}
	}
}

char *rw_metrics_text(const struct rw_datapath *dp, const struct rw_metrics_snap *s)
{
	static const char *const sbx_state[RW_SBX__COUNT] = {"enforced", "unbound", "no-run",
							     "not-attached"};
	struct rw_map_fill fill[RW_M__COUNT];
	struct rw_counters c = {};
	struct rw_config cfg = {};
	struct out o = {};
	char labels[160];
	uint64_t cum = 0;

	o.f = open_memstream(&o.buf, &o.len);
	if (!o.f)
		return NULL;
	counters_family(&o, dp, s, false);
	counters_family(&o, dp, s, true);

	rw_counters_read(dp, 0, &c);
	family(&o, "runwall_events_total", "counter",
	       "Verdict events of the kernel: sent to the ring, lost (ring full), suppressed (over a sandbox's budget).");
	sample(&o, "runwall_events_total", "outcome=\"sent\"", c.events_sent);
	sample(&o, "runwall_events_total", "outcome=\"lost\"", c.events_lost);
	sample(&o, "runwall_events_total", "outcome=\"suppressed\"", c.events_suppressed);
	answers_family(&o, dp, s, &c);
	family(&o, "runwall_subscriber_events_total", "counter",
	       "Events the agent wrote to its control socket subscribers, or skipped for a slow one.");
	sample(&o, "runwall_subscriber_events_total", "outcome=\"delivered\"", s->delivered);
	sample(&o, "runwall_subscriber_events_total", "outcome=\"skipped\"", s->skipped);
	family(&o, "runwall_subscribers", "gauge", "Control socket event subscribers now.");
	sample(&o, "runwall_subscribers", "", s->subscribers);

	rw_config_read(dp, &cfg);
	family(&o, "runwall_ready", "gauge", "1 when a policy snapshot is enforced on this node.");
	sample(&o, "runwall_ready", "", RW_STATE_READY(cfg.state));
	{
		int64_t left;
		enum rw_lease_state lease = rw_lease_state(&cfg, &left);

		family(&o, "runwall_lease_expired", "gauge",
		       "1 while the control plane's lease has expired: services and inbound only.");
		sample(&o, "runwall_lease_expired", "", lease == RW_LEASE_EXPIRED);
		if (lease != RW_LEASE_NONE) {
			family(&o, "runwall_lease_remaining_seconds", "gauge",
			       "Seconds until the control plane's lease expires (negative: since).");
			fprintf(o.f, "runwall_lease_remaining_seconds %.3f\n", left / 1e9);
		}
	}
	family(&o, "runwall_policy_revision", "gauge",
	       "Revision of the snapshot in force (0: none).");
	sample(&o, "runwall_policy_revision", "",
	       RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0);
	family(&o, "runwall_policy_apply_duration_seconds", "histogram",
	       "Time to apply a snapshot, from parse to the flip (with any grace period owed).");
	for (int i = 0; i < RW_APPLY_N_BUCKETS; i++) {
		cum += s->apply_bucket[i];
		snprintf(labels, sizeof(labels), "le=\"%g\"", apply_bounds[i]);
		sample(&o, "runwall_policy_apply_duration_seconds_bucket", labels, cum);
	}
	sample(&o, "runwall_policy_apply_duration_seconds_bucket", "le=\"+Inf\"", s->applies);
	fprintf(o.f, "runwall_policy_apply_duration_seconds_sum %.6f\n", s->apply_seconds);
	sample(&o, "runwall_policy_apply_duration_seconds_count", "", s->applies);
	family(&o, "runwall_policy_refused_total", "counter",
	       "Snapshots refused (nothing applied).");
	sample(&o, "runwall_policy_refused_total", "", s->applies_refused);
	family(&o, "runwall_revoke_probes_total", "counter",
	       "TCP connections whose verdict an apply made stale, by what the probe after it did: "
	       "probed (two ACKs into the pod), capped (over the bounds), no-mac (no neighbour entry "
	       "for the pod), send-failed (segments the veth did not take).");
	sample(&o, "runwall_revoke_probes_total", "outcome=\"probed\"", s->probes_sent);
	sample(&o, "runwall_revoke_probes_total", "outcome=\"capped\"", s->probes_capped);
	sample(&o, "runwall_revoke_probes_total", "outcome=\"no-mac\"", s->probes_no_mac);
	sample(&o, "runwall_revoke_probes_total", "outcome=\"send-failed\"", s->probes_failed);

	if (s->watch_enabled) {
		family(&o, "runwall_policy_watch_connected", "gauge",
		       "1 while the PolicyWatch stream (--policy-url) is up.");
		sample(&o, "runwall_policy_watch_connected", "", s->watch_connected);
		family(&o, "runwall_policy_watch_connects_total", "counter",
		       "PolicyWatch streams established.");
		sample(&o, "runwall_policy_watch_connects_total", "", s->watch_connects);
		family(&o, "runwall_policy_watch_messages_total", "counter",
		       "PolicyWatch messages received (heartbeats included).");
		sample(&o, "runwall_policy_watch_messages_total", "", s->watch_messages);
		family(&o, "runwall_policy_watch_refusals_total", "counter",
		       "PolicyWatch messages refused: malformed, on a stale base, or a change the "
		       "policy parser or the apply refused.");
		sample(&o, "runwall_policy_watch_refusals_total", "", s->watch_refusals);
		family(&o, "runwall_policy_watch_acks_total", "counter",
		       "Acknowledgements POSTed to the control plane, sent or failed for good.");
		sample(&o, "runwall_policy_watch_acks_total", "outcome=\"sent\"",
		       s->watch_acks_sent);
		sample(&o, "runwall_policy_watch_acks_total", "outcome=\"failed\"",
		       s->watch_acks_failed);
		family(&o, "runwall_policy_watch_revision_received", "gauge",
		       "The highest revision a PolicyWatch message carried (the one in force: "
		       "runwall_policy_revision).");
		sample(&o, "runwall_policy_watch_revision_received", "",
		       s->watch_revision_received);
		if (s->watch_message_age >= 0) {
			family(&o, "runwall_policy_watch_last_message_age_seconds", "gauge",
			       "Seconds since the last PolicyWatch message.");
			fprintf(o.f, "runwall_policy_watch_last_message_age_seconds %.3f\n",
				s->watch_message_age);
		}
	}

	if (rw_map_fill(dp, fill) == 0) {
		family(&o, "runwall_map_entries", "gauge",
		       "Entries in each pinned map (policy maps: the live slot; events: bytes not read yet).");
		for (int i = 0; i < RW_M__COUNT; i++) {
			snprintf(labels, sizeof(labels), "map=\"%s\",pin=\"%s\"", fill[i].name,
				 fill[i].pin);
			sample(&o, "runwall_map_entries", labels,
			       fill[i].entries < 0 ? 0 : (unsigned long long)fill[i].entries);
		}
		family(&o, "runwall_map_capacity", "gauge",
		       "Capacity of each pinned map (max_entries; events: the ring's bytes).");
		for (int i = 0; i < RW_M__COUNT; i++) {
			snprintf(labels, sizeof(labels), "map=\"%s\",pin=\"%s\"", fill[i].name,
				 fill[i].pin);
			sample(&o, "runwall_map_capacity", labels, fill[i].max_entries);
		}
	}

	family(&o, "runwall_sandboxes", "gauge", "Sandbox veths on this node by state.");
	for (int i = 0; i < RW_SBX__COUNT; i++) {
		snprintf(labels, sizeof(labels), "state=\"%s\"", sbx_state[i]);
		sample(&o, "runwall_sandboxes", labels, s->sandboxes[i]);
	}
	family(&o, "runwall_attach_failures_total", "counter",
	       "Programs that could not be attached to a sandbox veth hook.");
	sample(&o, "runwall_attach_failures_total", "", s->attach_failures);
	family(&o, "runwall_hook_repairs_total", "counter",
	       "Sandbox veth hooks found without runwall first (a program deleted or put before "
	       "it behind the agent's back), and put back.");
	sample(&o, "runwall_hook_repairs_total", "", s->hook_repairs);
	if (s->cni_watched) {
		family(&o, "runwall_cni_chained", "gauge",
		       "1 when the CNI conf file the runtime loads chains runwall-cni, 0 when not.");
		sample(&o, "runwall_cni_chained", "", s->cni_chained);
		family(&o, "runwall_cni_repairs_total", "counter",
		       "Times the agent put runwall-cni's entry back into the CNI conf file.");
		sample(&o, "runwall_cni_repairs_total", "", s->cni_repairs);
	}

	family(&o, "runwall_view_events", "gauge", "Verdict events held in memory for the API.");
	sample(&o, "runwall_view_events", "", s->events_buffered);
	family(&o, "runwall_view_events_evicted_total", "counter",
	       "Events dropped from memory to make room (every cause).");
	sample(&o, "runwall_view_events_evicted_total", "", s->events_evicted);
	family(&o, "runwall_view_events_displaced_total", "counter",
	       "Events dropped to make room, by cause: own_share, the run's own oldest (it held "
	       "its share or more); fair_share, the oldest of the run holding the most, for a run "
	       "under its share.");
	share_samples(&o, "runwall_view_events_displaced_total", s->events_displaced);
	family(&o, "runwall_view_events_deferred_total", "counter",
	       "Events the agent's loop set aside because a query held the view's store.");
	sample(&o, "runwall_view_events_deferred_total", "", s->events_deferred);
	family(&o, "runwall_view_events_deferred_dropped_total", "counter",
	       "Events not kept for the view: more were set aside than the loop may hold.");
	sample(&o, "runwall_view_events_deferred_dropped_total", "", s->events_deferred_dropped);
	family(&o, "runwall_view_aggregates", "gauge",
	       "Per (run, destination, port, protocol) aggregates held in memory.");
	sample(&o, "runwall_view_aggregates", "", s->aggregates);
	family(&o, "runwall_view_aggregates_evicted_total", "counter",
	       "Aggregates dropped, least recently updated first, to make room (every cause).");
	sample(&o, "runwall_view_aggregates_evicted_total", "", s->aggregates_evicted);
	family(&o, "runwall_view_aggregates_displaced_total", "counter",
	       "Aggregates dropped to make room, by cause: own_share, the run's own least recently "
	       "updated; fair_share, that of the run holding the most, for a run under its share.");
	share_samples(&o, "runwall_view_aggregates_displaced_total", s->aggregates_displaced);

	family(&o, "runwall_refused_destination_top", "gauge",
	       "Refused egress events among those held in memory (the latest --events), for the "
	       "10 (destination, port, protocol, reason) with the most.");
	for (size_t i = 0; i < s->n_refused_top; i++) {
		const struct rw_refused_top *t = &s->refused_top[i];
		char dst[RW_IP_STRLEN];

		snprintf(labels, sizeof(labels),
			 "dst=\"%s\",port=\"%u\",proto=\"%s\",reason=\"%s\"",
			 rw_ip_str(&t->dst, dst, sizeof(dst)), t->port,
			 rw_packet_proto_name(t->ethertype, t->proto), rw_reason_name(t->reason));
		sample(&o, "runwall_refused_destination_top", labels, t->count);
	}

	family(&o, "runwall_access_requests_total", "counter",
	       "Network-access requests: queued, sent (2xx), failed for good, dropped (queue full, "
	       "the run at its share of it), displaced (queued, then dropped for a run under its "
	       "share).");
	sample(&o, "runwall_access_requests_total", "outcome=\"queued\"", s->requests_queued);
	sample(&o, "runwall_access_requests_total", "outcome=\"sent\"", s->requests_sent);
	sample(&o, "runwall_access_requests_total", "outcome=\"failed\"", s->requests_failed);
	sample(&o, "runwall_access_requests_total", "outcome=\"dropped\"", s->requests_dropped);
	sample(&o, "runwall_access_requests_total", "outcome=\"displaced\"", s->requests_displaced);
	family(&o, "runwall_access_requests_forgotten_total", "counter",
	       "Sent or failed requests no longer remembered for dedup, to make room, by cause: "
	       "own_share, the run's own oldest; fair_share, the oldest of the run holding the most.");
	share_samples(&o, "runwall_access_requests_forgotten_total", s->requests_forgotten);
	family(&o, "runwall_access_request_retries_total", "counter",
	       "Retries of network-access requests (the receiver was down or answered 5xx).");
	sample(&o, "runwall_access_request_retries_total", "", s->requests_retries);
	family(&o, "runwall_access_requests_pending", "gauge",
	       "Network-access requests queued and not sent yet.");
	sample(&o, "runwall_access_requests_pending", "", s->requests_pending);

	if (fclose(o.f)) {
		free(o.buf);
		return NULL;
	}
	return o.buf;
}
