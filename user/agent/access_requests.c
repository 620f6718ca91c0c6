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
#include "reasons.h"

#define POST_TIMEOUT_MS	 5000
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS	 10000

enum req_state { REQ_FREE, REQ_PENDING, REQ_SENT, REQ_FAILED };

struct req {
	enum req_state state;
	uint64_t seq;
	char run[RW_RUN_ID_LEN];
	__u32 gen;
	__be32 pod, dst;
	__be16 port;
	__u8 proto;
	int64_t first_ns, sent_ns;
	uint64_t count;
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
	size_t n_used;
	uint64_t next_seq;
	struct rw_access_stats st;
	CURL *curl;
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

bool rw_access_eligible(const struct rw_event *ev)
{
	return ev->verdict == RW_VERDICT_DROP && ev->reason == RW_REASON_NOT_ALLOWLISTED &&
	       ev->dir == RW_DIR_EGRESS && ev->run_id[0] && (ev->proto == 6 || ev->proto == 17);
}

static bool same_key(const struct req *r, const struct rw_event *ev)
{
	return r->gen == ev->run_gen && r->dst == ev->daddr && r->port == ev->dport &&
	       r->proto == ev->proto && !strncmp(r->run, ev->run_id, RW_RUN_ID_LEN);
}

/* A slot for a new request: a free one, else the oldest that is not waiting to be sent. */
static struct req *slot(struct rw_access *a)
{
	struct req *best = NULL;

	for (size_t i = 0; i < RW_ACCESS_KEYS_MAX; i++) {
		struct req *r = &a->reqs[i];

		if (r->state == REQ_FREE)
			return r;
		if (r->state != REQ_PENDING && (!best || r->seq < best->seq))
			best = r;
	}
	return best;
}

bool rw_access_note(struct rw_access *a, const struct rw_event *ev, int64_t real_ns)
{
	struct req *r;
	bool queued = false;

	if (!a || !rw_access_eligible(ev))
		return false;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < RW_ACCESS_KEYS_MAX; i++) {
		r = &a->reqs[i];
		if (r->state != REQ_FREE && same_key(r, ev)) {
			r->count++;
			goto out;
		}
	}
	if (a->st.pending >= a->queue_max || !(r = slot(a))) {
		a->st.dropped++;
		goto out;
	}
	memset(r, 0, sizeof(*r));
	r->state = REQ_PENDING;
	r->seq = a->next_seq++;
	memcpy(r->run, ev->run_id, sizeof(r->run));
	r->run[sizeof(r->run) - 1] = '\0';
	r->gen = ev->run_gen;
	r->pod = ev->saddr;
	r->dst = ev->daddr;
	r->port = ev->dport;
	r->proto = ev->proto;
	r->first_ns = real_ns;
	r->count = 1;
	a->st.queued++;
	a->st.pending++;
	queued = true;
	pthread_cond_signal(&a->cond);
out:
	pthread_mutex_unlock(&a->lock);
	return queued;
}

static json_t *req_json(const struct rw_access *a, const struct req *r, bool full)
{
	char pod[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN], first[40];
	json_t *o;

	inet_ntop(AF_INET, &r->pod, pod, sizeof(pod));
	inet_ntop(AF_INET, &r->dst, dst, sizeof(dst));
	rw_format_time(r->first_ns, first, sizeof(first));
	o = json_pack("{s:s, s:s, s:i, s:s, s:s, s:i, s:s, s:s, s:I, s:s}", "node", a->node, "run",
		      r->run, "generation", (int)r->gen, "pod", pod, "destination", dst, "port",
		      (int)ntohs(r->port), "protocol", rw_proto_name(r->proto), "first_seen", first,
		      "count", (json_int_t)r->count, "reason", "not-allowlisted");
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

/* One at a time, oldest first: while the receiver is down the head waits (with backoff) and
 * the rest queue up behind it, so that nothing within the queue bound is lost.
 */
static void *worker(void *data)
{
	struct rw_access *a = data;

	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		struct req *r = next_pending(a);
		int64_t now = mono_ns();
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
		o = req_json(a, r, false);
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!body) {
			r->next_try_ns = now + BACKOFF_MAX_MS * 1000000LL;
			continue;
		}
		/* The slot stays PENDING while unlocked: nothing else reuses or moves it. */
		pthread_mutex_unlock(&a->lock);
		ret = post(a, body, &status, err, sizeof(err));
		free(body);
		pthread_mutex_lock(&a->lock);
		r->attempts++;
		r->last_status = status;
		snprintf(r->last_error, sizeof(r->last_error), "%s", ret ? err : "");
		if (ret == 0) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			r->sent_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
			r->state = REQ_SENT;
			a->st.sent++;
			a->st.pending--;
		} else if (ret < 0 || r->attempts >= RW_ACCESS_MAX_ATTEMPTS) {
			r->state = REQ_FAILED;
			a->st.failed++;
			a->st.pending--;
		} else if (!a->stop) {
			int64_t ms = (int64_t)BACKOFF_FIRST_MS << (r->attempts - 1);

			a->st.retries++;
			r->next_try_ns =
				mono_ns() + (ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms) * 1000000LL;
		}
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
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
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	a->curl = curl_easy_init();
	if (!a->url || !a->reqs || !a->curl) {
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
	o = json_pack("{s:b, s:s, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:o}", "ok", 1, "url",
		      a->url, "queue_max", (json_int_t)a->queue_max, "stats", "queued",
		      (json_int_t)a->st.queued, "sent", (json_int_t)a->st.sent, "failed",
		      (json_int_t)a->st.failed, "dropped", (json_int_t)a->st.dropped, "retries",
		      (json_int_t)a->st.retries, "pending", (json_int_t)a->st.pending, "requests",
		      list);
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
	if (a->started) {
		pthread_mutex_lock(&a->lock);
		a->stop = true;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
		pthread_join(a->thread, NULL);
	}
	if (a->curl)
		curl_easy_cleanup(a->curl);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a->reqs);
	free(a->url);
	free(a);
}
