// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* agent_view.c: the agent's side of the live traffic view (see agent_view.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "access_requests.h"
#include "agent_view.h"
#include "eventfmt.h"
#include "flowset.h"
#include "http.h"
#include "ipaddr.h"
#include "rulename.h"
#include "staged_diffs.h"
#include "status.h"

struct rw_agent_view {
	const struct rw_datapath *dp;
	char node[RW_NODE_LEN];
	struct rw_feed feed;
	bool feed_ok;
	struct rw_http *http;
	struct rw_http *probe_http; /* --probe-listen: the same server, the probes only */
	struct rw_access *access;
	pthread_mutex_t snap_lock; /* the metrics snapshot */
	struct rw_metrics_snap snap;
	/* The per-run series the event path counts for /metrics: the refusals by principal and
	 * the staged snapshot's differences.
	 */
	pthread_mutex_t series_lock;
	struct rw_principal_refusals principals;
	/* The agent's CLOCK_MONOTONIC to CLOCK_REALTIME offset, as its events were timed with
	 * (atomic: the access-request worker reads it for the evidence).
	 */
	int64_t mono_to_real;
	struct rw_staged_diffs staged_diffs;
};

/* A run of the metrics snapshot: one with a sandbox on this node. */
static bool run_live(const char *run, void *arg)
{
	const struct rw_metrics_snap *s = arg;

	for (size_t i = 0; i < s->n_runs; i++)
		if (!strcmp(s->runs[i].id, run))
			return true;
	return false;
}

/* A copy of n series of `size` bytes for the metrics snapshot: *n_out is n, or 0 without
 * memory.
 */
static void *series_copy(const void *src, size_t n, size_t size, size_t *n_out)
{
	void *c = malloc(size * (n ?: 1));

	*n_out = c ? n : 0;
	if (c)
		memcpy(c, src, size * *n_out);
	return c;
}

static char *metrics_text(void *data)
{
	struct rw_agent_view *v = data;
	struct rw_metrics_snap s;
	struct rw_access_stats as;
	bool runs_read;
	char *text;
	int n;

	pthread_mutex_lock(&v->snap_lock);
	s = v->snap;
	s.runs = s.n_runs ? malloc(s.n_runs * sizeof(*s.runs)) : NULL;
	if (s.runs)
		memcpy(s.runs, v->snap.runs, s.n_runs * sizeof(*s.runs));
	else
		s.n_runs = 0;
	runs_read = s.runs || !v->snap.n_runs; /* else the runs are not known: none is dropped */
	pthread_mutex_unlock(&v->snap_lock);
	pthread_mutex_lock(&v->series_lock);
	if (runs_read) {
		rw_principal_refusals_keep(&v->principals, run_live, &s);
		rw_staged_diffs_keep(&v->staged_diffs, run_live, &s);
	}
	s.principals = series_copy(v->principals.series, v->principals.n,
				   sizeof(v->principals.series[0]), &s.n_principals);
	s.principals_overflow = v->principals.overflow;
	s.staged = series_copy(v->staged_diffs.series, v->staged_diffs.n,
			       sizeof(v->staged_diffs.series[0]), &s.n_staged);
	s.staged_overflow = v->staged_diffs.overflow;
	pthread_mutex_unlock(&v->series_lock);
	pthread_mutex_lock(&v->feed.lock);
	s.events_buffered = v->feed.events.count;
	s.events_evicted = v->feed.events.evicted;
	s.aggregates = v->feed.aggs.count;
	s.aggregates_evicted = v->feed.aggs.evicted;
	memcpy(s.events_displaced, v->feed.events.displaced, sizeof(s.events_displaced));
	memcpy(s.aggregates_displaced, v->feed.aggs.displaced, sizeof(s.aggregates_displaced));
	n = rw_refused_top(&v->feed.events, s.refused_top, RW_REFUSED_TOP_K);
	s.n_refused_top = n < 0 ? 0 : (size_t)n;
	pthread_mutex_unlock(&v->feed.lock);
	pthread_mutex_lock(&v->feed.pending_lock);
	s.events_deferred = v->feed.deferred;
	s.events_deferred_dropped = v->feed.deferred_dropped;
	pthread_mutex_unlock(&v->feed.pending_lock);
	rw_access_get_stats(v->access, &as);
	s.requests_queued = as.queued;
	s.requests_sent = as.sent;
	s.requests_failed = as.failed;
	s.requests_dropped = as.dropped;
	s.requests_retries = as.retries;
	s.requests_pending = as.pending;
	s.requests_displaced = as.displaced_queue;
	memcpy(s.requests_forgotten, as.forgotten, sizeof(s.requests_forgotten));
	text = rw_metrics_text(v->dp, &s);
	free(s.runs);
	free(s.principals);
	free(s.staged);
	return text;
}

/* /api/status: the node's document, the one `runwall -j status` prints, built here from the
 * agent's part its loop last published and the maps as they are now (as /metrics, off the loop:
 * the map fill walks every conntrack table), plus the node's name.
 */
static char *status_text(void *data, const char *part_text)
{
	struct rw_agent_view *v = data;
	json_t *part = json_loads(part_text, 0, NULL), *o;
	char err[256], *text;

	if (!part)
		return NULL;
	o = rw_status_node(v->dp, v->dp->pin_dir,
			   json_string_value(json_object_get(part, "socket")) ?: "", part, 0, err,
			   sizeof(err));
	json_decref(part);
	if (o)
		json_object_set_new(o, "node", json_string(v->node));
	text = o ? json_dumps(o, RW_STATUS_JSON_FLAGS) : NULL;
	json_decref(o);
	return text;
}

static char *requests_text(void *data)
{
	struct rw_agent_view *v = data;
	json_t *o = rw_agent_view_requests(v);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return text;
}

/* A network-access request's evidence: the store's refusals of `run` to dst:port/proto that the
 * rule it asks for would have let through (not-allowlisted, egress), up to until_ns.
 */
struct evidence {
	const char *run;
	const struct rw_ip *dst;
	__be16 port;
	__u8 proto;
	int64_t until_ns, mono_to_real;
	uint64_t count;
	int64_t first_ns, last_ns;
};

static int evidence_one(const struct rw_evstore_entry *e, void *data)
{
	struct evidence *x = data;
	int64_t real_ns = (int64_t)e->ev.ts_ns + x->mono_to_real;
	struct rw_ip dst = rw_event_dst(&e->ev);

	if (e->ev.verdict != RW_VERDICT_DROP || e->ev.reason != RW_REASON_NOT_ALLOWLISTED ||
	    e->ev.dir != RW_DIR_EGRESS || e->ev.dport != x->port || e->ev.proto != x->proto ||
	    real_ns > x->until_ns || strcmp(e->ev.run_id, x->run) || !rw_ip_eq(&dst, x->dst))
		return 0;
	if (!x->count++ || real_ns < x->first_ns)
		x->first_ns = real_ns;
	if (real_ns > x->last_ns)
		x->last_ns = real_ns;
	return 0;
}

static void evidence(void *arg, const char *run, const struct rw_ip *dst, __be16 port, __u8 proto,
		     int64_t until_ns, uint64_t *count, int64_t *first_ns, int64_t *last_ns)
{
	struct rw_agent_view *v = arg;
	struct evidence x = {.run = run,
			     .dst = dst,
			     .port = port,
			     .proto = proto,
			     .until_ns = until_ns,
			     .mono_to_real = __atomic_load_n(&v->mono_to_real, __ATOMIC_RELAXED)};
	struct rw_evfilter f;

	rw_evfilter_init(&f);
	snprintf(f.run, sizeof(f.run), "%s", run);
	pthread_mutex_lock(&v->feed.lock);
	f.limit = v->feed.events.count ? (unsigned int)v->feed.events.count : 1;
	rw_evstore_query(&v->feed.events, &f, evidence_one, &x);
	pthread_mutex_unlock(&v->feed.lock);
	*count = x.count;
	*first_ns = x.first_ns;
	*last_ns = x.last_ns;
}

struct rw_agent_view *rw_agent_view_start(const struct rw_agent_view_opts *o,
					  const struct rw_datapath *dp, char *err, size_t errlen,
					  bool *usage)
{
	struct rw_http_opts ho = {
		.listen = o->listen, .token_file = o->token_file, .flag = "agent: --listen"};
	struct rw_http_ops ops = {
		.metrics = metrics_text, .requests = requests_text, .status = status_text};
	struct rw_agent_view *v = calloc(1, sizeof(*v));

	*usage = false;
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	v->dp = dp;
	snprintf(v->node, sizeof(v->node), "%s", o->node ? o->node : "");
	pthread_mutex_init(&v->snap_lock, NULL);
	pthread_mutex_init(&v->series_lock, NULL);
	if (rw_feed_init(&v->feed, o->events ? o->events : RW_EVSTORE_DEFAULT, RW_AGGS_DEFAULT)) {
		snprintf(err, errlen, "out of memory for %zu events", o->events);
		goto fail;
	}
	v->feed_ok = true;
	if (o->request_url) {
		v->access = rw_access_start(o->request_url, v->node,
					    o->request_queue ? o->request_queue
							     : RW_ACCESS_QUEUE_DEFAULT);
		if (!v->access) {
			int e = errno;

			*usage = e == EINVAL || e == ERANGE;
			if (e == EINVAL)
				snprintf(err, errlen,
					 "agent: --access-request-url '%s': expected an "
					 "http:// or https:// URL",
					 o->request_url);
			else if (e == ERANGE)
				snprintf(err, errlen,
					 "agent: --access-request-queue %zu: expected "
					 "1-%d",
					 o->request_queue, RW_ACCESS_KEYS_MAX / 2);
			else
				snprintf(err, errlen,
					 "agent: --access-request-url %s: cannot start: "
					 "%s",
					 o->request_url, strerror(e));
			goto fail;
		}
		rw_access_set_evidence(v->access, evidence, v);
	}
	if (o->listen) {
		ops.data = v;
		v->http = rw_http_start(&ho, &v->feed, &ops, err, errlen, usage);
		if (!v->http)
			goto fail;
	}
	if (o->probe_listen) {
		/* Its own daemon, so that clients of the main listener cannot fill its slots:
		 * the kubelet's probes are its only expected clients.
		 */
		struct rw_http_opts po = {.listen = o->probe_listen,
					  .flag = "agent: --probe-listen",
					  .max_connections = 32,
					  .per_ip_limit = 32,
					  .probes_only = true};

		v->probe_http = rw_http_start(&po, &v->feed, NULL, err, errlen, usage);
		if (!v->probe_http)
			goto fail;
	}
	return v;
fail:
	rw_agent_view_stop(v);
	return NULL;
}

char *rw_agent_view_event(struct rw_agent_view *v, const struct rw_event *ev,
			  const struct rw_policy *p, int64_t mono_to_real, json_t *staged)
{
	json_t *o = rw_event_json(ev, p, mono_to_real);
	__be32 peer = ev->dir == RW_DIR_EGRESS ? ev->daddr : ev->saddr;
	const char *service, *label;
	char *text;

	if (!o)
		return NULL;
	__atomic_store_n(&v->mono_to_real, mono_to_real, __ATOMIC_RELAXED);
	/* The page names what a peer is: DNS (port 53, refused wherever it goes), else the built-in
	 * range it is in. An IPv6 peer by its own family's services and ranges.
	 */
	if (rw_event_is_ipv6(ev)) {
		const __be32 *peer6 = ev->dir == RW_DIR_EGRESS ? ev->daddr6 : ev->saddr6;

		service = rw_policy_service_at6(p, peer6);
		label = ev->reason == RW_REASON_DNS ? "DNS" : rw_builtin_label6(peer6);
	} else {
		service = rw_policy_service_at(p, peer);
		label = ev->reason == RW_REASON_DNS ? "DNS" : rw_builtin_label(peer);
	}
	/* Every drained event passes here once: a refusal that names its sender is counted by
	 * its container (rw_event_json()'s name of its cgroup) for /metrics.
	 */
	pthread_mutex_lock(&v->series_lock);
	rw_principal_refusals_add(&v->principals, ev,
				  json_string_value(json_object_get(o, "container")));
	pthread_mutex_unlock(&v->series_lock);
	json_object_set_new(o, "node", json_string(v->node));
	json_object_set_new(o, "service", json_string(service));
	json_object_set_new(o, "label", label ? json_string(label) : json_null());
	if (staged) {
		json_object_set(o, "staged", staged);
		pthread_mutex_lock(&v->series_lock);
		rw_staged_diffs_add(&v->staged_diffs, ev->run_id,
				    ev->verdict == RW_VERDICT_ALLOW ? "allow" : "drop",
				    json_string_value(json_object_get(staged, "verdict")));
		pthread_mutex_unlock(&v->series_lock);
	}
	text = json_dumps(o, JSON_COMPACT);
	if (text)
		rw_feed_add(&v->feed, ev, v->node, (int64_t)ev->ts_ns + mono_to_real, text,
			    strlen(text), json_string_value(json_object_get(o, "rule")),
			    *service ? service
			    : label  ? label
				     : "");
	json_decref(o);
	rw_access_note(v->access, ev, (int64_t)ev->ts_ns + mono_to_real);
	return text;
}

struct recorded {
	struct rw_flowset set;
	const char *run;
	int64_t since_ns, mono_to_real;
	int err;
};

static int recorded_one(const struct rw_evstore_entry *e, void *data)
{
	struct recorded *r = data;
	int64_t real_ns = (int64_t)e->ev.ts_ns + r->mono_to_real;

	if (real_ns < r->since_ns || (r->run && strcmp(r->run, e->ev.run_id)))
		return 0;
	r->err = rw_flowset_add_event(&r->set, &e->ev, real_ns);
	return r->err;
}

json_t *rw_agent_view_recorded(struct rw_agent_view *v, const char *run, int64_t since_ns)
{
	struct recorded r = {
		.run = run, .since_ns = since_ns, .mono_to_real = rw_mono_to_real_offset()};
	struct rw_evfilter f;
	char oldest[40] = "";
	json_t *flows, *o;
	size_t held;

	rw_evfilter_init(&f);
	pthread_mutex_lock(&v->feed.lock);
	held = v->feed.events.count;
	f.limit = held ? (unsigned int)held : 1;
	rw_evstore_query(&v->feed.events, &f, recorded_one, &r);
	if (held) {
		const struct rw_evstore_pos *first = &v->feed.events.order[v->feed.events.head];

		for (size_t i = 0; !first->e && i < v->feed.events.len; i++)
			first = &v->feed.events.order[v->feed.events.head + i];
		if (first->e)
			rw_format_time((int64_t)first->e->ev.ts_ns + r.mono_to_real, oldest,
				       sizeof(oldest));
	}
	o = json_pack("{s:b, s:s, s:I, s:I, s:I}", "ok", 1, "node", v->node, "held",
		      (json_int_t)held, "capacity", (json_int_t)v->feed.events.cap, "evicted",
		      (json_int_t)v->feed.events.evicted);
	pthread_mutex_unlock(&v->feed.lock);
	if (r.err) {
		rw_flowset_free(&r.set);
		json_decref(o);
		return json_pack("{s:b, s:s}", "ok", 0, "error",
				 "out of memory folding the recorded events");
	}
	rw_flowset_merge(&r.set);
	flows = json_array();
	for (size_t i = 0; i < r.set.n; i++)
		json_array_append_new(flows, rw_flow_json(&r.set.v[i]));
	json_object_set_new(o, "oldest", oldest[0] ? json_string(oldest) : json_null());
	json_object_set_new(o, "skipped", json_integer((json_int_t)r.set.skipped));
	json_object_set_new(o, "flows", flows);
	rw_flowset_free(&r.set);
	return o;
}

void rw_agent_view_tick(struct rw_agent_view *v)
{
	if (v)
		rw_feed_flush(&v->feed);
}

void rw_agent_view_publish(struct rw_agent_view *v, json_t *status, bool ready,
			   const char *ready_text, const struct rw_metrics_snap *snap)
{
	char *text;
	struct rw_metrics_run *runs = NULL;

	if (!v) {
		json_decref(status);
		return;
	}
	if (status) {
		text = json_dumps(status, JSON_COMPACT);
		json_decref(status);
		if (text)
			rw_feed_set_status(&v->feed, text, ready, ready_text);
	}
	if (snap) {
		if (snap->n_runs) {
			runs = malloc(snap->n_runs * sizeof(*runs));
			if (runs)
				memcpy(runs, snap->runs, snap->n_runs * sizeof(*runs));
		}
		pthread_mutex_lock(&v->snap_lock);
		free(v->snap.runs);
		v->snap = *snap;
		v->snap.runs = runs;
		v->snap.n_runs = runs ? snap->n_runs : 0;
		pthread_mutex_unlock(&v->snap_lock);
	}
}

json_t *rw_agent_view_requests(struct rw_agent_view *v)
{
	return rw_access_json(v ? v->access : NULL);
}

void rw_agent_view_stop(struct rw_agent_view *v)
{
	if (!v)
		return;
	rw_http_stop(v->http); /* first: their threads read the feed */
	rw_http_stop(v->probe_http);
	rw_access_stop(v->access);
	if (v->feed_ok)
		rw_feed_free(&v->feed);
	free(v->snap.runs);
	pthread_mutex_destroy(&v->snap_lock);
	pthread_mutex_destroy(&v->series_lock);
	free(v);
}
