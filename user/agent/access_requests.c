// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* access_requests.c: network-access requests over libcurl, on a worker thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>

#include "access_requests.h"
#include "eventfmt.h"
#include "ipaddr.h"
#include "reasons.h"
#include "rulename.h"
#include "run_shares.h"
#include "util.h"

#define POST_TIMEOUT_MS	 5000
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS	 10000

enum req_state { REQ_FREE, REQ_PENDING, REQ_SENT, REQ_FAILED };

/* What a request is remembered by, hashed and compared as bytes. */
struct req_key {
	char run[RW_RUN_ID_LEN];
	__u32 gen;
	struct rw_ip dst; /* either family */
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct req {
	enum req_state state;
	struct req_key key;
	struct req *hnext;	    /* in its bucket, or on the free list */
	struct rw_share_link share; /* in the queue's shares while pending, else the records' */
	uint64_t seq;
	char run[RW_RUN_ID_LEN];
	__u32 gen;
	struct rw_ip pod, dst;
	__be16 port;
	__u8 proto;
	int64_t first_ns, sent_ns;
	uint64_t count;
	/* The evidence (rw_access_evidence_fn), counted before the first attempt; 0: none. */
	uint64_t evidence_count;
	int64_t evidence_first_ns, evidence_last_ns;
	int attempts;
	int64_t next_try_ns; /* CLOCK_MONOTONIC */
	long last_status;
	char last_error[160];
};

struct rw_access {
	char *url;
	char node[64];
	size_t queue_max;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct req *reqs; /* RW_ACCESS_KEYS_MAX slots */
	size_t n_used;	  /* slots ever taken: reqs[n_used..] were never used */
	struct req *free_reqs;
	struct req **buckets;
	size_t n_buckets;
	struct rw_hash_key hash_key;
	struct rw_shares queue;	  /* the pending requests, per run */
	struct rw_shares records; /* the sent and failed ones, per run */
	struct req *inflight;	  /* being POSTed, unlocked: never displaced */
	rw_access_evidence_fn evidence;
	void *evidence_arg;
	uint64_t next_seq;
	struct rw_access_stats st;
	CURL *curl;
};

bool rw_access_eligible(const struct rw_event *ev)
{
	return ev->verdict == RW_VERDICT_DROP && ev->reason == RW_REASON_NOT_ALLOWLISTED &&
	       ev->dir == RW_DIR_EGRESS && ev->run_id[0] && (ev->proto == 6 || ev->proto == 17);
}

static void req_key_of(struct req_key *k, const struct rw_event *ev)
{
	memset(k, 0, sizeof(*k));
	memcpy(k->run, ev->run_id, strnlen(ev->run_id, RW_RUN_ID_LEN - 1));
	k->gen = ev->run_gen;
	k->dst = rw_event_dst(ev);
	k->port = ev->dport;
	k->proto = ev->proto;
}

static struct req **bucket(struct rw_access *a, const struct req_key *k)
{
	return &a->buckets[rw_siphash(&a->hash_key, k, sizeof(*k)) % a->n_buckets];
}

static void forget(struct rw_access *a, struct req *r)
{
	struct req **pp;

	for (pp = bucket(a, &r->key); *pp; pp = &(*pp)->hnext)
		if (*pp == r) {
			*pp = r->hnext;
			break;
		}
	rw_shares_del(r->state == REQ_PENDING ? &a->queue : &a->records, &r->share);
	r->state = REQ_FREE;
	r->hnext = a->free_reqs;
	a->free_reqs = r;
}

#define REQ_OF(l) ((struct req *)((char *)(l)-offsetof(struct req, share)))

/* The queue is full and run's request would join it. A run under its share of the queue takes
 * the place of the newest request of the run holding the most (whose overflow it is, as if it
 * had come last); a run at its share or over it has its own new request dropped: the queue
 * keeps each run's first requests, sends them in order, and one run's burst cannot take the
 * places of another's. True when a place was freed.
 */
static bool queue_room(struct rw_access *a, const char *run)
{
	struct rw_share_run *most = rw_shares_heaviest(&a->queue);
	struct req *victim;

	if (rw_shares_count(&a->queue, run) >= rw_shares_fair(&a->queue, run) || !most)
		return false;
	victim = REQ_OF(most->newest);
	if (victim == a->inflight)
		return false;
	forget(a, victim);
	a->st.pending--;
	a->st.displaced_queue++;
	return true;
}

/* A slot for a new request: a free one, else a remembered (sent or failed) one goes, chosen by
 * the records' shares: pending requests are never forgotten.
 */
static struct req *slot(struct rw_access *a, const char *run)
{
	enum rw_share_cause cause = RW_SHARE_OWN;
	struct rw_share_link *l;
	struct req *r = a->free_reqs;

	if (r) {
		a->free_reqs = r->hnext;
		return r;
	}
	if (a->n_used < RW_ACCESS_KEYS_MAX)
		return &a->reqs[a->n_used++];
	l = rw_shares_victim(&a->records, run, &cause);
	if (!l)
		return NULL;
	r = REQ_OF(l);
	forget(a, r);
	a->free_reqs = r->hnext;
	a->st.forgotten[cause]++;
	return r;
}

bool rw_access_note(struct rw_access *a, const struct rw_event *ev, int64_t real_ns)
{
	struct req_key k;
	struct req *r, **b;
	bool queued = false;

	if (!a || !rw_access_eligible(ev))
		return false;
	req_key_of(&k, ev);
	pthread_mutex_lock(&a->lock);
	b = bucket(a, &k);
	for (r = *b; r; r = r->hnext)
		if (!memcmp(&r->key, &k, sizeof(k))) {
			r->count++;
			goto out;
		}
	if (a->st.pending >= a->queue_max && !queue_room(a, k.run)) {
		a->st.dropped++;
		goto out;
	}
	if (!(r = slot(a, k.run))) {
		a->st.dropped++;
		goto out;
	}
	memset(r, 0, sizeof(*r));
	r->state = REQ_PENDING;
	r->key = k;
	r->seq = a->next_seq++;
	memcpy(r->run, k.run, sizeof(r->run));
	r->gen = ev->run_gen;
	r->pod = rw_event_src(ev);
	r->dst = rw_event_dst(ev);
	r->port = ev->dport;
	r->proto = ev->proto;
	r->first_ns = real_ns;
	r->count = 1;
	r->hnext = *b;
	*b = r;
	rw_shares_add(&a->queue, &r->share, k.run);
	a->st.queued++;
	a->st.pending++;
	queued = true;
	pthread_cond_signal(&a->cond);
out:
	pthread_mutex_unlock(&a->lock);
	return queued;
}

/* The rule that would allow the request: one element of its run's allow list. */
static json_t *allow_rule_json(const struct req *r, const char *dst)
{
	return json_pack("{s:s, s:[i]}", "ip", dst, r->proto == IPPROTO_UDP ? "udp" : "tcp",
			 (int)ntohs(r->port));
}

static json_t *req_json(const struct rw_access *a, const struct req *r, bool full)
{
	char pod[RW_IP_STRLEN], dst[RW_IP_STRLEN], first[40];
	json_t *o;

	rw_ip_str(&r->pod, pod, sizeof(pod));
	rw_ip_str(&r->dst, dst, sizeof(dst));
	rw_format_time(r->first_ns, first, sizeof(first));
	/* Only not-allowlisted refusals are requests: their rule is the allowlist's, whatever the
	 * event (rw_access_eligible()).
	 */
	o = json_pack("{s:s, s:s, s:i, s:s, s:s, s:i, s:s, s:s, s:I, s:s, s:s}", "node", a->node,
		      "run", r->run, "generation", (int)r->gen, "pod", pod, "destination", dst,
		      "port", (int)ntohs(r->port), "protocol", rw_proto_name(r->proto),
		      "first_seen", first, "count", (json_int_t)r->count, "reason",
		      "not-allowlisted", "rule", rw_reason_rule(RW_REASON_NOT_ALLOWLISTED));
	if (o)
		json_object_set_new(o, "allow_rule", allow_rule_json(r, dst));
	if (o && r->evidence_count) {
		char efirst[40], elast[40];

		rw_format_time(r->evidence_first_ns, efirst, sizeof(efirst));
		rw_format_time(r->evidence_last_ns, elast, sizeof(elast));
		json_object_set_new(o, "evidence",
				    json_pack("{s:I, s:s, s:s}", "refusals",
					      (json_int_t)r->evidence_count, "first", efirst,
					      "last", elast));
	}
	if (o && full) {
		static const char *const names[] = {"free", "pending", "sent", "failed"};
		char sent[40];

		rw_format_time(r->sent_ns, sent, sizeof(sent));
		json_object_set_new(o, "state", json_string(names[r->state]));
		json_object_set_new(o, "attempts", json_integer(r->attempts));
		json_object_set_new(o, "sent",
				    r->state == REQ_SENT ? json_string(sent) : json_null());
		json_object_set_new(o, "last_error",
				    r->last_error[0] ? json_string(r->last_error) : json_null());
	}
	return o;
}

static size_t discard(char *p, size_t size, size_t n, void *data)
{
	return size * n;
}

static int abort_on_stop(void *data, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct rw_access *acc = data;
	bool stop;

	pthread_mutex_lock(&acc->lock);
	stop = acc->stop;
	pthread_mutex_unlock(&acc->lock);
	return stop;
}

/* POST one request: 0 sent, 1 to retry, -1 refused for good (a 4xx other than 408 and 429). */
static int post(struct rw_access *a, const char *body, long *status, char *err, size_t errlen)
{
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	CURLcode rc;

	*status = 0;
	curl_easy_reset(a->curl);
	curl_easy_setopt(a->curl, CURLOPT_URL, a->url);
	curl_easy_setopt(a->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(a->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(a->curl, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(a->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->curl, CURLOPT_TIMEOUT_MS, (long)POST_TIMEOUT_MS);
	curl_easy_setopt(a->curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(a->curl, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(a->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(a->curl, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
	curl_easy_setopt(a->curl, CURLOPT_XFERINFODATA, a);
	rc = curl_easy_perform(a->curl);
	curl_slist_free_all(hdr);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s", curl_easy_strerror(rc));
		return 1;
	}
	curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, status);
	if (*status >= 200 && *status < 300)
		return 0;
	snprintf(err, errlen, "HTTP %ld", *status);
	if (*status >= 400 && *status < 500 && *status != 408 && *status != 429)
		return -1;
	return 1;
}

static struct req *next_pending(struct rw_access *a)
{
	struct req *best = NULL;

	for (size_t i = 0; i < RW_ACCESS_KEYS_MAX; i++) {
		struct req *r = &a->reqs[i];

		if (r->state == REQ_PENDING && (!best || r->seq < best->seq))
			best = r;
	}
	return best;
}

/* A request leaves the queue and is remembered, in the records' shares. */
static void settle(struct rw_access *a, struct req *r, enum req_state state)
{
	rw_shares_del(&a->queue, &r->share);
	r->state = state;
	rw_shares_add(&a->records, &r->share, r->key.run);
}

/* One at a time, oldest first: while the receiver is down the head waits (with backoff) and
 * the rest queue up behind it, so that nothing within the queue bound is lost.
 */
static void *worker(void *data)
{
	struct rw_access *a = data;

	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		struct req *r = next_pending(a);
		int64_t now = rw_now_mono_ns();
		char *body, err[160] = "";
		long status;
		json_t *o;
		int ret;

		if (!r) {
			pthread_cond_wait(&a->cond, &a->lock);
			continue;
		}
		if (r->next_try_ns > now) {
			struct timespec until;
			int64_t wait = r->next_try_ns - now;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += wait / 1000000000LL;
			until.tv_nsec += wait % 1000000000LL;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&a->cond, &a->lock, &until);
			continue;
		}
		if (a->evidence && !r->attempts && !r->evidence_count) {
			struct req_key k = r->key;
			int64_t until = r->first_ns;

			/* Off the lock: the counting reads the view's store. The slot is in
			 * flight: nothing reuses it meanwhile.
			 */
			uint64_t n = 0;
			int64_t first = 0, last = 0;

			a->inflight = r;
			pthread_mutex_unlock(&a->lock);

			a->evidence(a->evidence_arg, k.run, &k.dst, k.port, k.proto, until, &n,
				    &first, &last);
			pthread_mutex_lock(&a->lock);
			a->inflight = NULL;
			r->evidence_count = n;
			r->evidence_first_ns = first;
			r->evidence_last_ns = last;
			if (a->stop)
				break;
		}
		o = req_json(a, r, false);
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!body) {
			r->next_try_ns = now + BACKOFF_MAX_MS * 1000000LL;
			continue;
		}
		/* The slot stays PENDING while unlocked, and in flight: nothing reuses it. */
		a->inflight = r;
		pthread_mutex_unlock(&a->lock);
		ret = post(a, body, &status, err, sizeof(err));
		free(body);
		pthread_mutex_lock(&a->lock);
		a->inflight = NULL;
		r->attempts++;
		r->last_status = status;
		snprintf(r->last_error, sizeof(r->last_error), "%s", ret ? err : "");
		if (ret == 0) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			r->sent_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
			settle(a, r, REQ_SENT);
			a->st.sent++;
			a->st.pending--;
		} else if (ret < 0 || r->attempts >= RW_ACCESS_MAX_ATTEMPTS) {
			settle(a, r, REQ_FAILED);
			a->st.failed++;
			a->st.pending--;
		} else if (!a->stop) {
			int64_t ms = (int64_t)BACKOFF_FIRST_MS << (r->attempts - 1);

			a->st.retries++;
			r->next_try_ns = rw_now_mono_ns() +
					 (ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms) * 1000000LL;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

void rw_access_set_evidence(struct rw_access *a, rw_access_evidence_fn fn, void *arg)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->evidence = fn;
	a->evidence_arg = arg;
	pthread_mutex_unlock(&a->lock);
}

struct rw_access *rw_access_start(const char *url, const char *node, size_t queue_max)
{
	struct rw_access *a;
	int err;

	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		errno = EINVAL;
		return NULL;
	}
	if (!queue_max || queue_max > RW_ACCESS_KEYS_MAX / 2) {
		errno = ERANGE;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->url = strdup(url);
	a->reqs = calloc(RW_ACCESS_KEYS_MAX, sizeof(*a->reqs));
	snprintf(a->node, sizeof(a->node), "%s", node ? node : "");
	a->queue_max = queue_max;
	a->next_seq = 1;
	a->hash_key = *rw_hash_key();
	a->n_buckets = RW_ACCESS_KEYS_MAX * 2 + 1;
	a->buckets = calloc(a->n_buckets, sizeof(*a->buckets));
	/* A run's share of the queue has no floor but one request: the queue may be 4 long. */
	err = rw_shares_init(&a->queue, queue_max, 1, &a->hash_key) ||
	      rw_shares_init(&a->records, RW_ACCESS_KEYS_MAX, RW_SHARE_FLOOR, &a->hash_key);
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	a->curl = curl_easy_init();
	if (!a->url || !a->reqs || !a->buckets || err || !a->curl) {
		errno = ENOMEM;
		goto fail;
	}
	err = pthread_create(&a->thread, NULL, worker, a);
	if (err) {
		errno = err;
		goto fail;
	}
	a->started = true;
	return a;
fail:
	err = errno;
	rw_access_stop(a);
	errno = err;
	return NULL;
}

json_t *rw_access_json(struct rw_access *a)
{
	json_t *list = json_array(), *o;
	struct req **order;
	size_t n = 0;

	if (!a)
		return json_pack("{s:b, s:o, s:o}", "ok", 1, "url", json_null(), "requests", list);
	pthread_mutex_lock(&a->lock);
	order = calloc(RW_ACCESS_KEYS_MAX, sizeof(*order));
	for (size_t i = 0; order && i < RW_ACCESS_KEYS_MAX; i++)
		if (a->reqs[i].state != REQ_FREE)
			order[n++] = &a->reqs[i];
	/* oldest first (insertion sort: the array is small and nearly in order) */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && order[j - 1]->seq > order[j]->seq; j--) {
			struct req *t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, req_json(a, order[i], true));
	o = json_pack("{s:b, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I}}, s:o}",
		      "ok", 1, "url", a->url, "queue_max", (json_int_t)a->queue_max, "stats",
		      "queued", (json_int_t)a->st.queued, "sent", (json_int_t)a->st.sent, "failed",
		      (json_int_t)a->st.failed, "dropped", (json_int_t)a->st.dropped, "retries",
		      (json_int_t)a->st.retries, "pending", (json_int_t)a->st.pending, "displaced",
		      (json_int_t)a->st.displaced_queue, "forgotten", "own_share",
		      (json_int_t)a->st.forgotten[RW_SHARE_OWN], "fair_share",
		      (json_int_t)a->st.forgotten[RW_SHARE_FAIR], "requests", list);
	pthread_mutex_unlock(&a->lock);
	free(order);
	return o;
}

void rw_access_get_stats(struct rw_access *a, struct rw_access_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	*s = a->st;
	pthread_mutex_unlock(&a->lock);
}

void rw_access_stop(struct rw_access *a)
{
	if (!a)
		return;
	if (a->started)
		rw_thread_stop(a->thread, &a->lock, &a->cond, &a->stop);
	if (a->curl)
		curl_easy_cleanup(a->curl);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a->reqs);
	free(a->buckets);
	rw_shares_free(&a->queue);
	rw_shares_free(&a->records);
	free(a->url);
	free(a);
}
