// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* metrics.c: the Prometheus exposition of /metrics (text format 0.0.4). Names follow the
 * conventions: runwall_ prefix, _total on counters, base units (bytes, seconds).
 */
#include <stdarg.h>
#include <stddef.h>
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

/* A sample's value, a field of the snapshot: U64(f) for a uint64_t, FLAG(f) for a bool. A field
 * of another type is a build error (FIELD_IS(), 0 otherwise): no row reads a field as what it is
 * not.
 */
#define FIELD_IS(f, t) _Generic(((struct rw_metrics_snap *)0)->f, t : 0)
#define U64(f)	       offsetof(struct rw_metrics_snap, f) + FIELD_IS(f, uint64_t), false
#define FLAG(f)	       offsetof(struct rw_metrics_snap, f) + FIELD_IS(f, bool), true

#define SERIES_SAMPLES 5 /* the most samples a row has: runwall_access_requests_total's */

/* A family whose samples are fields of the snapshot: its name, type and help, then each sample's
 * labels ("" for none) and value, up to the first without labels.
 */
struct series {
	const char *name, *type, *help;
	struct {
		const char *labels;
		size_t off;
		bool flag;
	} samples[SERIES_SAMPLES];
};

/* The samples of a per-run share's displacements, one per cause (run_shares.h). */
/* clang-format off */
#define BY_CAUSE(f) {"cause=\"own_share\"", U64(f[RW_SHARE_OWN])}, \
		    {"cause=\"fair_share\"", U64(f[RW_SHARE_FAIR])}
/* clang-format on */

static void series_write(struct out *o, const struct rw_metrics_snap *s, const struct series *t,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		family(o, t[i].name, t[i].type, t[i].help);
		for (int j = 0; j < SERIES_SAMPLES && t[i].samples[j].labels; j++) {
			const char *v = (const char *)s + t[i].samples[j].off;

			sample(o, t[i].name, t[i].samples[j].labels,
			       t[i].samples[j].flag ? *(const bool *)v : *(const uint64_t *)v);
		}
	}
}

#define SERIES(o, s, t) series_write(o, s, t, sizeof(t) / sizeof(t[0]))

static const struct series subscriber_series[] = {
	{"runwall_subscriber_events_total",
	 "counter",
	 "Events the agent wrote to its control socket subscribers, or skipped for a slow one.",
	 {{"outcome=\"delivered\"", U64(delivered)}, {"outcome=\"skipped\"", U64(skipped)}}},
	{"runwall_subscribers",
	 "gauge",
	 "Control socket event subscribers now.",
	 {{"", U64(subscribers)}}},
};

static const struct series apply_outcome_series[] = {
	{"runwall_policy_refused_total",
	 "counter",
	 "Snapshots refused (nothing applied).",
	 {{"", U64(applies_refused)}}},
	{"runwall_revoke_probes_total",
	 "counter",
	 "TCP connections whose verdict an apply made stale, by what the probe after it did: "
	 "probed (two ACKs into the pod), capped (over the bounds), no-mac (no neighbour entry "
	 "for the pod), send-failed (segments the veth did not take).",
	 {{"outcome=\"probed\"", U64(probes_sent)},
	  {"outcome=\"capped\"", U64(probes_capped)},
	  {"outcome=\"no-mac\"", U64(probes_no_mac)},
	  {"outcome=\"send-failed\"", U64(probes_failed)}}},
};

/* With --policy-url only. */
static const struct series watch_series[] = {
	{"runwall_policy_watch_connected",
	 "gauge",
	 "1 while the PolicyWatch stream (--policy-url) is up.",
	 {{"", FLAG(watch_connected)}}},
	{"runwall_policy_watch_connects_total",
	 "counter",
	 "PolicyWatch streams established.",
	 {{"", U64(watch_connects)}}},
	{"runwall_policy_watch_messages_total",
	 "counter",
	 "PolicyWatch messages received (heartbeats included).",
	 {{"", U64(watch_messages)}}},
	{"runwall_policy_watch_refusals_total",
	 "counter",
	 "PolicyWatch messages refused: malformed, on a stale base, or a change the "
	 "policy parser or the apply refused.",
	 {{"", U64(watch_refusals)}}},
	{"runwall_policy_watch_acks_total",
	 "counter",
	 "Acknowledgements POSTed to the control plane, sent or failed for good.",
	 {{"outcome=\"sent\"", U64(watch_acks_sent)},
	  {"outcome=\"failed\"", U64(watch_acks_failed)}}},
	{"runwall_policy_watch_revision_received",
	 "gauge",
	 "The highest revision a PolicyWatch message carried (the one in force: "
	 "runwall_policy_revision).",
	 {{"", U64(watch_revision_received)}}},
};

static const struct series sandbox_series[] = {
	{"runwall_sandboxes",
	 "gauge",
	 "Sandbox veths on this node by state.",
	 {{"state=\"enforced\"", U64(sandboxes[RW_SBX_ENFORCED])},
	  {"state=\"unbound\"", U64(sandboxes[RW_SBX_UNBOUND])},
	  {"state=\"no-run\"", U64(sandboxes[RW_SBX_NO_RUN])},
	  {"state=\"not-attached\"", U64(sandboxes[RW_SBX_NOT_ATTACHED])}}},
	{"runwall_attach_failures_total",
	 "counter",
	 "Programs that could not be attached to a sandbox veth hook.",
	 {{"", U64(attach_failures)}}},
	{"runwall_hook_repairs_total",
	 "counter",
	 "Sandbox veth hooks found without runwall first (a program deleted or put before "
	 "it behind the agent's back), and put back.",
	 {{"", U64(hook_repairs)}}},
};

/* With --cni-conf-dir only. */
static const struct series cni_series[] = {
	{"runwall_cni_chained",
	 "gauge",
	 "1 when the CNI conf file the runtime loads chains runwall-cni, 0 when not.",
	 {{"", FLAG(cni_chained)}}},
	{"runwall_cni_repairs_total",
	 "counter",
	 "Times the agent put runwall-cni's entry back into the CNI conf file.",
	 {{"", U64(cni_repairs)}}},
};

static const struct series view_series[] = {
	{"runwall_view_events",
	 "gauge",
	 "Verdict events held in memory for the API.",
	 {{"", U64(events_buffered)}}},
	{"runwall_view_events_evicted_total",
	 "counter",
	 "Events dropped from memory to make room (every cause).",
	 {{"", U64(events_evicted)}}},
	{"runwall_view_events_displaced_total",
	 "counter",
	 "Events dropped to make room, by cause: own_share, the run's own oldest (it held "
	 "its share or more); fair_share, the oldest of the run holding the most, for a run "
	 "under its share.",
	 {BY_CAUSE(events_displaced)}},
	{"runwall_view_events_deferred_total",
	 "counter",
	 "Events the agent's loop set aside because a query held the view's store.",
	 {{"", U64(events_deferred)}}},
	{"runwall_view_events_deferred_dropped_total",
	 "counter",
	 "Events not kept for the view: more were set aside than the loop may hold.",
	 {{"", U64(events_deferred_dropped)}}},
	{"runwall_view_aggregates",
	 "gauge",
	 "Per (run, destination, port, protocol) aggregates held in memory.",
	 {{"", U64(aggregates)}}},
	{"runwall_view_aggregates_evicted_total",
	 "counter",
	 "Aggregates dropped, least recently updated first, to make room (every cause).",
	 {{"", U64(aggregates_evicted)}}},
	{"runwall_view_aggregates_displaced_total",
	 "counter",
	 "Aggregates dropped to make room, by cause: own_share, the run's own least recently "
	 "updated; fair_share, that of the run holding the most, for a run under its share.",
	 {BY_CAUSE(aggregates_displaced)}},
};

static const struct series request_series[] = {
	{"runwall_access_requests_total",
	 "counter",
	 "Network-access requests: queued, sent (2xx), failed for good, dropped (queue full, "
	 "the run at its share of it), displaced (queued, then dropped for a run under its "
	 "share).",
	 {{"outcome=\"queued\"", U64(requests_queued)},
	  {"outcome=\"sent\"", U64(requests_sent)},
	  {"outcome=\"failed\"", U64(requests_failed)},
	  {"outcome=\"dropped\"", U64(requests_dropped)},
	  {"outcome=\"displaced\"", U64(requests_displaced)}}},
	{"runwall_access_requests_forgotten_total",
	 "counter",
	 "Sent or failed requests no longer remembered for dedup, to make room, by cause: "
	 "own_share, the run's own oldest; fair_share, the oldest of the run holding the most.",
	 {BY_CAUSE(requests_forgotten)}},
	{"runwall_access_request_retries_total",
	 "counter",
	 "Retries of network-access requests (the receiver was down or answered 5xx).",
	 {{"", U64(requests_retries)}}},
	{"runwall_access_requests_pending",
	 "gauge",
	 "Network-access requests queued and not sent yet.",
	 {{"", U64(requests_pending)}}},
};

/* The kernel's verdict events, node-wide. */
static void events_family(struct out *o, const struct rw_counters *node)
{
	family(o, "runwall_events_total", "counter",
	       "Verdict events of the kernel: sent to the ring, lost (ring full), suppressed (over a sandbox's budget).");
	sample(o, "runwall_events_total", "outcome=\"sent\"", node->events_sent);
	sample(o, "runwall_events_total", "outcome=\"lost\"", node->events_lost);
	sample(o, "runwall_events_total", "outcome=\"suppressed\"", node->events_suppressed);
}

/* What the state word and the lease say: a snapshot in force, its lease, its revision. */
static void state_families(struct out *o, const struct rw_datapath *dp)
{
	struct rw_config cfg = {};
	enum rw_lease_state lease;
	int64_t left;

	rw_config_read(dp, &cfg);
	family(o, "runwall_ready", "gauge", "1 when a policy snapshot is enforced on this node.");
	sample(o, "runwall_ready", "", RW_STATE_READY(cfg.state));
	lease = rw_lease_state(&cfg, &left);
	family(o, "runwall_lease_expired", "gauge",
	       "1 while the control plane's lease has expired: services and inbound only.");
	sample(o, "runwall_lease_expired", "", lease == RW_LEASE_EXPIRED);
	if (lease != RW_LEASE_NONE) {
		family(o, "runwall_lease_remaining_seconds", "gauge",
		       "Seconds until the control plane's lease expires (negative: since).");
		fprintf(o->f, "runwall_lease_remaining_seconds %.3f\n", left / 1e9);
	}
	family(o, "runwall_policy_revision", "gauge",
	       "Revision of the snapshot in force (0: none).");
	sample(o, "runwall_policy_revision", "",
	       RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0);
}

static void apply_duration_family(struct out *o, const struct rw_metrics_snap *s)
{
	uint64_t cum = 0;
	char labels[32];

	family(o, "runwall_policy_apply_duration_seconds", "histogram",
	       "Time to apply a snapshot, from parse to the flip (with any grace period owed).");
	for (int i = 0; i < RW_APPLY_N_BUCKETS; i++) {
		cum += s->apply_bucket[i];
		snprintf(labels, sizeof(labels), "le=\"%g\"", apply_bounds[i]);
		sample(o, "runwall_policy_apply_duration_seconds_bucket", labels, cum);
	}
	sample(o, "runwall_policy_apply_duration_seconds_bucket", "le=\"+Inf\"", s->applies);
	fprintf(o->f, "runwall_policy_apply_duration_seconds_sum %.6f\n", s->apply_seconds);
	sample(o, "runwall_policy_apply_duration_seconds_count", "", s->applies);
}

/* With --policy-url only, and once a message has come. */
static void watch_age_family(struct out *o, const struct rw_metrics_snap *s)
{
	family(o, "runwall_policy_watch_last_message_age_seconds", "gauge",
	       "Seconds since the last PolicyWatch message.");
	fprintf(o->f, "runwall_policy_watch_last_message_age_seconds %.3f\n", s->watch_message_age);
}

/* How full each pinned map is; nothing when the maps cannot be counted. */
static void map_families(struct out *o, const struct rw_datapath *dp)
{
	struct rw_map_fill fill[RW_M__COUNT];
	char labels[160];

	if (rw_map_fill(dp, fill))
		return;
	family(o, "runwall_map_entries", "gauge",
	       "Entries in each pinned map (policy maps: the live slot; events: bytes not read yet).");
	for (int i = 0; i < RW_M__COUNT; i++) {
		snprintf(labels, sizeof(labels), "map=\"%s\",pin=\"%s\"", fill[i].name,
			 fill[i].pin);
		sample(o, "runwall_map_entries", labels,
		       fill[i].entries < 0 ? 0 : (unsigned long long)fill[i].entries);
	}
	family(o, "runwall_map_capacity", "gauge",
	       "Capacity of each pinned map (max_entries; events: the ring's bytes).");
	for (int i = 0; i < RW_M__COUNT; i++) {
		snprintf(labels, sizeof(labels), "map=\"%s\",pin=\"%s\"", fill[i].name,
			 fill[i].pin);
		sample(o, "runwall_map_capacity", labels, fill[i].max_entries);
	}
}

static void refused_top_family(struct out *o, const struct rw_metrics_snap *s)
{
	char labels[160];

	family(o, "runwall_refused_destination_top", "gauge",
	       "Refused egress events among those held in memory (the latest --events), for the "
	       "10 (destination, port, protocol, reason) with the most.");
	for (size_t i = 0; i < s->n_refused_top; i++) {
		const struct rw_refused_top *t = &s->refused_top[i];
		char dst[RW_IP_STRLEN];

		snprintf(labels, sizeof(labels),
			 "dst=\"%s\",port=\"%u\",proto=\"%s\",reason=\"%s\"",
			 rw_ip_str(&t->dst, dst, sizeof(dst)), t->port,
			 rw_packet_proto_name(t->ethertype, t->proto), rw_reason_name(t->reason));
		sample(o, "runwall_refused_destination_top", labels, t->count);
	}
}

/* A label value as the text format wants it: backslash, quote and newline escaped. */
static void label_value(char *out, size_t size, const char *v)
{
	size_t n = 0;

	for (; *v && n + 3 < size; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n')
			out[n++] = '\\';
		out[n++] = *v == '\n' ? 'n' : *v;
	}
	out[n] = '\0';
}

static void staged_family(struct out *o, const struct rw_metrics_snap *s)
{
	char labels[256], run[2 * RW_RUN_ID_LEN];

	family(o, "runwall_staged_differences_total", "counter",
	       "Events whose verdict under the staged snapshot (runwall apply --staged) differs "
	       "from the kernel's, by run, the kernel's verdict (from) and the staged one (to), "
	       "since the agent started. Events, not packets: the kernel's event budget samples "
	       "them (--event-rate 0 makes them every refusal and new flow). A run's series while "
	       "it has a sandbox on this node. At most 1024 series; later keys count in run "
	       "\"other\".");
	for (size_t i = 0; i < s->n_staged; i++) {
		const struct rw_staged_series *d = &s->staged[i];

		label_value(run, sizeof(run), d->run);
		snprintf(labels, sizeof(labels), "run=\"%s\",from=\"%s\",to=\"%s\"", run,
			 d->from_allow ? "allow" : "drop", d->from_allow ? "drop" : "allow");
		sample(o, "runwall_staged_differences_total", labels, d->count);
	}
	if (s->staged_overflow)
		sample(o, "runwall_staged_differences_total",
		       "run=\"other\",from=\"other\",to=\"other\"", s->staged_overflow);
}

static void principal_family(struct out *o, const struct rw_metrics_snap *s)
{
	char labels[512], run[2 * RW_RUN_ID_LEN], container[2 * RW_PRINCIPAL_CONTAINER_LEN];

	family(o, "runwall_principal_refusals_total", "counter",
	       "Refused events that name their sender inside the pod (its uid read from the "
	       "packet's socket), by run, container, uid and reason, since the agent started. "
	       "Events, not packets: the kernel's event budget samples them. A run's series while "
	       "it has a sandbox on this node. At most 1024 series; "
	       "later keys count in run, container, uid and reason \"other\".");
	for (size_t i = 0; i < s->n_principals; i++) {
		const struct rw_principal_series *p = &s->principals[i];

		label_value(run, sizeof(run), p->run);
		label_value(container, sizeof(container), p->container);
		snprintf(labels, sizeof(labels),
			 "run=\"%s\",container=\"%s\",uid=\"%u\",reason=\"%s\"", run, container,
			 p->uid, rw_reason_name(p->reason));
		sample(o, "runwall_principal_refusals_total", labels, p->count);
	}
	if (s->principals_overflow)
		sample(o, "runwall_principal_refusals_total",
		       "run=\"other\",container=\"other\",uid=\"other\",reason=\"other\"",
		       s->principals_overflow);
}

char *rw_metrics_text(const struct rw_datapath *dp, const struct rw_metrics_snap *s)
{
	struct rw_counters node = {};
	struct out o = {};

	o.f = open_memstream(&o.buf, &o.len);
	if (!o.f)
		return NULL;
	counters_family(&o, dp, s, false);
	counters_family(&o, dp, s, true);
	rw_counters_read(dp, 0, &node);
	events_family(&o, &node);
	answers_family(&o, dp, s, &node);
	SERIES(&o, s, subscriber_series);
	state_families(&o, dp);
	apply_duration_family(&o, s);
	SERIES(&o, s, apply_outcome_series);
	if (s->watch_enabled) {
		SERIES(&o, s, watch_series);
		if (s->watch_message_age >= 0)
			watch_age_family(&o, s);
	}
	map_families(&o, dp);
	SERIES(&o, s, sandbox_series);
	if (s->cni_watched)
		SERIES(&o, s, cni_series);
	SERIES(&o, s, view_series);
	refused_top_family(&o, s);
	principal_family(&o, s);
	staged_family(&o, s);
	SERIES(&o, s, request_series);

	if (fclose(o.f)) {
		free(o.buf);
		return NULL;
	}
	return o.buf;
}
