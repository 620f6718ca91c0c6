// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* pw_stream.c: PolicyWatch over libcurl: the stream thread (one GET, lines to the loop, cut
 * when it stalls, reconnected with backoff and jitter) and the ack thread (POSTs, in order).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <curl/curl.h>

#include "pw_stream.h"
#include "util.h"
#include "pw_msg.h"

#define CONNECT_TIMEOUT_MS 5000 /* name, TCP and TLS: libcurl's connect phase */
#define ACK_TIMEOUT_MS	   5000 /* an ack's whole exchange */
#define ACK_ATTEMPTS	   4
#define TOKEN_MAX	   4096

struct rw_watch {
	struct rw_pw_opts o;
	char *url, *ack_url;
	bool loopback, ack_loopback; /* plain http allowed to each: its host is loopback */
	int efd;
	pthread_t stream_thread, ack_thread;
	bool stream_started, ack_started;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* queue room, acks waiting, a drop, stop */
	bool stop;
	uint64_t revision;  /* in force: what a reconnection asks for */
	bool drop;	    /* the loop asked for the stream to be dropped */
	bool drop_snapshot; /* ... and for a whole snapshot on the next connection */
	struct rw_pw_item queue[RW_WATCH_QUEUE];
	size_t q_head, q_len, q_bytes;
	char *acks[RW_WATCH_ACK_QUEUE];
	size_t a_head, a_len;
	struct rw_pw_stats st;
	/* the stream thread's own */
	CURL *curl;
	struct rw_pw_framer framer;
	int64_t last_msg_ns;
	int64_t request_ns; /* when the request went out on a connection made; 0 before */
	bool got_200;
	bool refused; /* the stream was cut for a message refused on the wire */
	char abort_reason[256];
	unsigned int rand_state;
};

/* Under the lock: wake the loop. */
static void push_locked(struct rw_watch *w, enum rw_pw_item_kind kind, const char *text, size_t len,
			unsigned int retry_ms, bool refused)
{
	struct rw_pw_item *it = &w->queue[(w->q_head + w->q_len) % RW_WATCH_QUEUE];
	uint64_t one = 1;

	it->kind = kind;
	it->text = malloc(len + 1);
	if (it->text) {
		memcpy(it->text, text, len);
		it->text[len] = '\0';
	}
	it->len = it->text ? len : 0;
	w->q_bytes += it->len;
	it->retry_ms = retry_ms;
	it->refused = refused;
	it->received_ns = rw_now_mono_ns();
	w->q_len++;
	if (write(w->efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the loop is woken already */
	}
}

/* A notice (connected, disconnected): waits for room like a message, but never past stop. */
static void push_notice(struct rw_watch *w, enum rw_pw_item_kind kind, const char *text,
			unsigned int retry_ms, bool refused)
{
	pthread_mutex_lock(&w->lock);
	while (w->q_len == RW_WATCH_QUEUE && !w->stop)
		pthread_cond_wait(&w->cond, &w->lock);
	if (!w->stop)
		push_locked(w, kind, text, strlen(text), retry_ms, refused);
	pthread_mutex_unlock(&w->lock);
}

static int on_line(void *ctx, const char *line, size_t len)
{
	struct rw_watch *w = ctx;
	int ret = 0;

	pthread_mutex_lock(&w->lock);
	/* A server sending big messages faster than they are applied waits here: the queue holds
	 * at most RW_WATCH_QUEUE_BYTES (or one message), not 64 of 16 MiB.
	 */
	while ((w->q_len == RW_WATCH_QUEUE ||
		(w->q_len && w->q_bytes + len > RW_WATCH_QUEUE_BYTES)) &&
	       !w->stop && !w->drop)
		pthread_cond_wait(&w->cond, &w->lock);
	if (w->stop || w->drop) {
		ret = -ECANCELED;
	} else {
		push_locked(w, RW_WATCH_ITEM_MESSAGE, line, len, 0, false);
		w->st.messages++;
	}
	pthread_mutex_unlock(&w->lock);
	w->last_msg_ns = rw_now_mono_ns();
	return ret;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct rw_watch *w = ctx;
	size_t n = size * nmemb;
	int ret;

	ret = rw_pw_feed(&w->framer, data, n, on_line, w);
	if (ret == -EMSGSIZE) {
		snprintf(w->abort_reason, sizeof(w->abort_reason),
			 "refused a message of more than %u bytes (the limit)", RW_WATCH_MAX_MSG);
		w->refused = true;
		return 0;
	}
	if (ret == -ENOMEM) {
		snprintf(w->abort_reason, sizeof(w->abort_reason), "out of memory");
		return 0;
	}
	return ret ? 0 : n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct rw_watch *w = ctx;
	size_t n = size * nmemb;
	long code = 0;

	/* The blank line that ends the headers: the stream is up when the answer is 200. */
	if (n <= 2 && !w->got_200) {
		curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &code);
		if (code == 200) {
			w->got_200 = true;
			w->last_msg_ns = rw_now_mono_ns();
			pthread_mutex_lock(&w->lock);
			w->st.connected = true;
			w->st.connects++;
			w->st.connected_since_ns = rw_now_mono_ns();
			pthread_mutex_unlock(&w->lock);
			push_notice(w, RW_WATCH_ITEM_CONNECTED, w->url, 0, false);
		}
	}
	return n;
}

/* libcurl calls it at least once a second, data or not: the stall timer and the loop's drop. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct rw_watch *w = ctx;
	unsigned int stall = w->o.stall_sec ? w->o.stall_sec : RW_WATCH_STALL_DEFAULT;
	bool stop, drop;

	pthread_mutex_lock(&w->lock);
	stop = w->stop;
	drop = w->drop;
	pthread_mutex_unlock(&w->lock);
	if (stop) {
		snprintf(w->abort_reason, sizeof(w->abort_reason), "the agent is stopping");
		return 1;
	}
	if (drop) {
		if (!w->abort_reason[0])
			snprintf(w->abort_reason, sizeof(w->abort_reason), "dropped by the agent");
		return 1;
	}
	/* The answer's status and headers, however they trickle, within the stall timeout of the
	 * request: a server that completes TLS and then says nothing does not hold the stream.
	 */
	if (!w->got_200 && w->request_ns &&
	    rw_now_mono_ns() - w->request_ns > (int64_t)stall * 1000000000LL) {
		snprintf(w->abort_reason, sizeof(w->abort_reason),
			 "no response headers in %u s after the request (the --policy-stall limit)",
			 stall);
		return 1;
	}
	if (w->got_200 && rw_now_mono_ns() - w->last_msg_ns > (int64_t)stall * 1000000000LL) {
		snprintf(w->abort_reason, sizeof(w->abort_reason),
			 "stalled: no complete message in %u s (a heartbeat is expected at least "
			 "every %u s)",
			 stall, stall / 3 ? stall / 3 : 1);
		return 1;
	}
	return 0;
}

/* libcurl calls it once the connection (TCP and TLS) is made, just before it sends the request. */
static int on_request(void *ctx, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	struct rw_watch *w = ctx;

	w->request_ns = rw_now_mono_ns();
	return CURL_PREREQFUNC_OK;
}

/* The bearer token: one line of printable ASCII (a header's value cannot carry more). */
static int read_token(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
	return rw_read_token("--policy-token-file", path, 1, out, outlen, err, errlen);
}

/* TLS and credentials, the same for the stream and the acks. */
static struct curl_slist *setup_common(struct rw_watch *w, CURL *c, const char *url, bool loopback,
				       char *err, size_t errlen)
{
	struct curl_slist *hdr = NULL;
	char token[TOKEN_MAX + 32];

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, loopback ? "http,https" : "https");
	/* A loopback address is reached directly: libcurl would otherwise send even a request to
	 * 127.0.0.1 to the environment's http_proxy, in clear, token included.
	 */
	if (loopback)
		curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	if (w->o.ca) {
		/* That bundle and nothing else. Without CAPATH set to NULL, Debian's libcurl also
		 * loads its built-in folder (/etc/ssl/certs), and OpenSSL trusts both. With no cache,
		 * the bundle is read again at each connection: a rotated file is picked up.
		 */
		curl_easy_setopt(c, CURLOPT_CAINFO, w->o.ca);
		curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
		curl_easy_setopt(c, CURLOPT_CA_CACHE_TIMEOUT, 0L);
	}
	if (w->o.cert)
		curl_easy_setopt(c, CURLOPT_SSLCERT, w->o.cert);
	if (w->o.key)
		curl_easy_setopt(c, CURLOPT_SSLKEY, w->o.key);
	if (w->o.token_file) {
		/* Read at each connection: a rotated secret is picked up without a restart. */
		strcpy(token, "Authorization: Bearer ");
		if (read_token(w->o.token_file, token + strlen(token),
			       sizeof(token) - strlen(token), err, errlen))
			return NULL;
		hdr = curl_slist_append(hdr, token);
	}
	hdr = curl_slist_append(hdr, "Cache-Control: no-cache");
	return hdr;
}

static void *stream_main(void *data)
{
	struct rw_watch *w = data;
	unsigned int backoff = RW_WATCH_BACKOFF_MIN_MS;

	for (;;) {
		char url[4096], err[256] = "", errbuf[CURL_ERROR_SIZE] = "", *node;
		struct curl_slist *hdr;
		uint64_t revision, messages_before;
		unsigned int delay;
		struct timespec until;
		bool snapshot, stop;
		CURLcode rc;

		pthread_mutex_lock(&w->lock);
		stop = w->stop;
		snapshot = w->drop_snapshot;
		revision = snapshot ? 0 : w->revision;
		w->drop = false;
		w->drop_snapshot = false;
		messages_before = w->st.messages;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
		node = curl_easy_escape(w->curl, w->o.node, 0);
		snprintf(url, sizeof(url), "%s%snode=%s&revision=%llu", w->url,
			 strchr(w->url, '?') ? "&" : "?", node ? node : "",
			 (unsigned long long)revision);
		curl_free(node);
		curl_easy_reset(w->curl);
		/* A 16 MiB line's buffer does not outlive its stream. */
		if (w->framer.cap > (1u << 20))
			rw_pw_framer_free(&w->framer);
		rw_pw_framer_reset(&w->framer);
		w->abort_reason[0] = '\0';
		w->got_200 = false;
		w->request_ns = 0;
		w->refused = false;
		w->last_msg_ns = rw_now_mono_ns();
		hdr = setup_common(w, w->curl, url, w->loopback, err, sizeof(err));
		if (!hdr) {
			rc = CURLE_READ_ERROR;
			snprintf(w->abort_reason, sizeof(w->abort_reason), "%s", err);
		} else {
			hdr = curl_slist_append(hdr, "Accept: application/x-ndjson");
			curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, hdr);
			curl_easy_setopt(w->curl, CURLOPT_ERRORBUFFER, errbuf);
			curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, on_data);
			curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, w);
			curl_easy_setopt(w->curl, CURLOPT_HEADERFUNCTION, on_header);
			curl_easy_setopt(w->curl, CURLOPT_HEADERDATA, w);
			curl_easy_setopt(w->curl, CURLOPT_PREREQFUNCTION, on_request);
			curl_easy_setopt(w->curl, CURLOPT_PREREQDATA, w);
			curl_easy_setopt(w->curl, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(w->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
			curl_easy_setopt(w->curl, CURLOPT_XFERINFODATA, w);
			curl_easy_setopt(w->curl, CURLOPT_TCP_KEEPALIVE, 1L);
			rc = curl_easy_perform(w->curl);
			curl_slist_free_all(hdr);
		}
		if (!w->abort_reason[0]) {
			if (rc != CURLE_OK)
				snprintf(w->abort_reason, sizeof(w->abort_reason), "%s",
					 errbuf[0] ? errbuf : curl_easy_strerror(rc));
			else
				snprintf(w->abort_reason, sizeof(w->abort_reason),
					 "the server ended the stream");
			if (rw_pw_pending(&w->framer)) {
				size_t l = strlen(w->abort_reason);

				snprintf(w->abort_reason + l, sizeof(w->abort_reason) - l,
					 "; refused a truncated message (%zu bytes without their "
					 "newline)",
					 rw_pw_pending(&w->framer));
				w->refused = true;
			}
		}
		pthread_mutex_lock(&w->lock);
		if (w->got_200) {
			w->st.connected = false;
			w->st.disconnects++;
		}
		snprintf(w->st.last_error, sizeof(w->st.last_error), "%s", w->abort_reason);
		/* A whole snapshot asked for is asked for at once; anything else waits. */
		snapshot = w->drop_snapshot;
		stop = w->stop;
		pthread_mutex_unlock(&w->lock);
		if (stop)
			break;
		/* A stream that brought a message was a good one: start the backoff over. */
		if (w->got_200 && w->st.messages > messages_before)
			backoff = RW_WATCH_BACKOFF_MIN_MS;
		delay = snapshot ? 0 : backoff / 2 + rand_r(&w->rand_state) % (backoff / 2 + 1);
		if (!snapshot && backoff < RW_WATCH_BACKOFF_MAX_MS)
			backoff = backoff * 2 > RW_WATCH_BACKOFF_MAX_MS ? RW_WATCH_BACKOFF_MAX_MS
									: backoff * 2;
		push_notice(w, RW_WATCH_ITEM_DISCONNECTED, w->abort_reason, delay, w->refused);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += delay / 1000;
		until.tv_nsec += (delay % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&w->lock);
		while (!w->stop && !w->drop_snapshot &&
		       pthread_cond_timedwait(&w->cond, &w->lock, &until) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&w->lock);
	}
	return NULL;
}

static size_t discard(char *data, size_t size, size_t nmemb, void *ctx)
{
	return size * nmemb;
}

static bool stopping(struct rw_watch *w)
{
	bool stop;

	pthread_mutex_lock(&w->lock);
	stop = w->stop;
	pthread_mutex_unlock(&w->lock);
	return stop;
}

/* An agent told to exit does not wait for an ack server that does not answer. */
static int ack_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
			curl_off_t ulnow)
{
	return stopping(ctx);
}

static int post_ack(struct rw_watch *w, CURL *c, const char *body, char *err, size_t errlen)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdr;
	CURLcode rc;

	curl_easy_reset(c);
	hdr = setup_common(w, c, w->ack_url, w->ack_loopback, err, errlen);
	if (!hdr)
		return -EINVAL;
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ACK_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, ack_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
	rc = curl_easy_perform(c);
	curl_slist_free_all(hdr);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return -EIO;
	}
	return 0;
}

static void *ack_main(void *data)
{
	struct rw_watch *w = data;
	CURL *c = curl_easy_init();

	for (;;) {
		char *body, err[256];
		int ret = -EIO;

		pthread_mutex_lock(&w->lock);
		while (!w->stop && !w->a_len)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->a_len) {
			pthread_mutex_unlock(&w->lock);
			break;
		}
		body = w->acks[w->a_head];
		w->a_head = (w->a_head + 1) % RW_WATCH_ACK_QUEUE;
		w->a_len--;
		pthread_mutex_unlock(&w->lock);
		for (int attempt = 0; c && attempt < ACK_ATTEMPTS && ret; attempt++) {
			if (attempt && stopping(w))
				break;
			if (attempt)
				usleep((250u << attempt) * 1000);
			ret = post_ack(w, c, body, err, sizeof(err));
		}
		pthread_mutex_lock(&w->lock);
		if (ret) {
			w->st.acks_failed++;
			snprintf(w->st.last_error, sizeof(w->st.last_error), "ack: %.200s", err);
		} else {
			w->st.acks_sent++;
		}
		pthread_mutex_unlock(&w->lock);
		free(body);
	}
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

/* Whether the URL's host (as libcurl parsed it: IPv6 in brackets, IPv4 in dotted quad) is a
 * literal loopback address, 127.0.0.0/8 or ::1. A name is never loopback, whatever it spells:
 * "127.ctl.example" or "localhost" go wherever the resolver sends them.
 */
static bool host_is_loopback(const char *host)
{
	size_t len = strlen(host);
	char v6[INET6_ADDRSTRLEN];
	struct in6_addr a6;
	struct in_addr a4;

	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (len < 3 || host[0] != '[' || host[len - 1] != ']' || len - 2 >= sizeof(v6))
		return false;
	memcpy(v6, host + 1, len - 2);
	v6[len - 2] = '\0';
	return inet_pton(AF_INET6, v6, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Parse the URL; *loopback when its host is a literal loopback address; the ack URL when asked
 * for (the policy URL's last path segment replaced by "ack", without its query).
 */
static int check_url(const char *url, const char *flag, bool *loopback, char **ack_url, char *err,
		     size_t errlen)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *path = NULL;
	int ret = -EINVAL;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0)) {
		snprintf(err, errlen, "%s '%s': not a URL", flag, url);
		goto out;
	}
	*loopback = host_is_loopback(host);
	if (strcmp(scheme, "https") && !(strcmp(scheme, "http") == 0 && *loopback)) {
		snprintf(err, errlen,
			 "%s '%s': expected https:// (plain http:// only to a literal loopback "
			 "address, 127.0.0.0/8 or [::1]; not to a name)",
			 flag, url);
		goto out;
	}
	if (ack_url) {
		char *slash, *joined;

		if (curl_url_get(u, CURLUPART_PATH, &path, 0) || !path)
			goto out;
		slash = strrchr(path, '/');
		joined = malloc(strlen(path) + 8);
		if (!joined)
			goto out;
		snprintf(joined, strlen(path) + 8, "%.*s/ack", slash ? (int)(slash - path) : 0,
			 path);
		curl_url_set(u, CURLUPART_PATH, joined, 0);
		curl_url_set(u, CURLUPART_QUERY, NULL, 0);
		curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
		free(joined);
		if (curl_url_get(u, CURLUPART_URL, ack_url, 0))
			goto out;
	}
	ret = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(path);
	curl_url_cleanup(u);
	return ret;
}

int rw_pw_check(const struct rw_pw_opts *o, char *err, size_t errlen)
{
	const char *files[] = {o->ca, o->cert, o->key};
	const char *flags[] = {"--policy-ca", "--policy-cert", "--policy-key"};
	char token[TOKEN_MAX];
	bool loopback, ack_loopback;

	if (check_url(o->url, "--policy-url", &loopback, NULL, err, errlen))
		return -EINVAL;
	if (o->ack_url &&
	    check_url(o->ack_url, "--policy-ack-url", &ack_loopback, NULL, err, errlen))
		return -EINVAL;
	if (!o->cert != !o->key) {
		snprintf(err, errlen, "--policy-cert and --policy-key go together");
		return -EINVAL;
	}
	for (int i = 0; i < 3; i++)
		if (files[i] && access(files[i], R_OK)) {
			snprintf(err, errlen, "%s %s: %s", flags[i], files[i], strerror(errno));
			return -EINVAL;
		}
	if (o->token_file && read_token(o->token_file, token, sizeof(token), err, errlen))
		return -EINVAL;
	return 0;
}

struct rw_watch *rw_pw_start(const struct rw_pw_opts *o, uint64_t revision, char *err,
			     size_t errlen)
{
	struct rw_watch *w = calloc(1, sizeof(*w));
	char *ack = NULL;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->o = *o;
	w->efd = -1;
	pthread_condattr_t ca;

	pthread_mutex_init(&w->lock, NULL);
	/* The backoff's waits are on CLOCK_MONOTONIC: a clock step neither skips nor stretches one. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (rw_pw_check(o, err, errlen) ||
	    check_url(o->url, "--policy-url", &w->loopback, o->ack_url ? NULL : &ack, err, errlen))
		goto fail;
	w->ack_loopback = w->loopback; /* a derived ack URL has the policy URL's host */
	if (o->ack_url &&
	    check_url(o->ack_url, "--policy-ack-url", &w->ack_loopback, NULL, err, errlen))
		goto fail;
	w->url = strdup(o->url);
	w->ack_url = o->ack_url ? strdup(o->ack_url) : strdup(ack);
	curl_free(ack);
	w->revision = revision;
	w->rand_state = o->seed;
	w->framer.max = RW_WATCH_MAX_MSG;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	w->curl = curl_easy_init();
	if (!w->url || !w->ack_url || w->efd < 0 || !w->curl) {
		snprintf(err, errlen, "setting up: %s", strerror(errno ? errno : ENOMEM));
		goto fail;
	}
	if (pthread_create(&w->stream_thread, NULL, stream_main, w)) {
		snprintf(err, errlen, "starting the stream thread: %s", strerror(errno));
		goto fail;
	}
	w->stream_started = true;
	if (pthread_create(&w->ack_thread, NULL, ack_main, w)) {
		snprintf(err, errlen, "starting the ack thread: %s", strerror(errno));
		goto fail;
	}
	w->ack_started = true;
	return w;
fail:
	rw_pw_stop(w);
	return NULL;
}

int rw_pw_fd(struct rw_watch *w)
{
	return w->efd;
}

bool rw_pw_waiting(struct rw_watch *w)
{
	bool pending;

	pthread_mutex_lock(&w->lock);
	pending = w->q_len > 0;
	pthread_mutex_unlock(&w->lock);
	return pending;
}

bool rw_pw_pop(struct rw_watch *w, struct rw_pw_item *item)
{
	bool got = false;
	uint64_t n;

	pthread_mutex_lock(&w->lock);
	if (w->q_len) {
		*item = w->queue[w->q_head];
		w->q_head = (w->q_head + 1) % RW_WATCH_QUEUE;
		w->q_len--;
		w->q_bytes -= item->len;
		got = true;
		pthread_cond_broadcast(&w->cond);
	} else if (read(w->efd, &n, sizeof(n)) < 0) {
		/* nothing was counted: nothing waits */
	}
	pthread_mutex_unlock(&w->lock);
	return got;
}

void rw_pw_set_revision(struct rw_watch *w, uint64_t revision)
{
	pthread_mutex_lock(&w->lock);
	w->revision = revision;
	pthread_mutex_unlock(&w->lock);
}

void rw_pw_drop(struct rw_watch *w, uint64_t revision)
{
	pthread_mutex_lock(&w->lock);
	w->drop = true;
	if (!revision)
		w->drop_snapshot = true;
	/* What the old stream queued after the message that made the loop drop it is moot. */
	while (w->q_len) {
		struct rw_pw_item *it = &w->queue[w->q_head];

		if (it->kind != RW_WATCH_ITEM_MESSAGE)
			break;
		w->q_bytes -= it->len;
		free(it->text);
		w->q_head = (w->q_head + 1) % RW_WATCH_QUEUE;
		w->q_len--;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void rw_pw_ack(struct rw_watch *w, const char *body)
{
	char *copy = strdup(body);

	if (!copy)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->a_len == RW_WATCH_ACK_QUEUE) {
		/* The oldest outcome goes: the newest says what is in force. */
		free(w->acks[w->a_head]);
		w->a_head = (w->a_head + 1) % RW_WATCH_ACK_QUEUE;
		w->a_len--;
		w->st.acks_dropped++;
	}
	w->acks[(w->a_head + w->a_len) % RW_WATCH_ACK_QUEUE] = copy;
	w->a_len++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void rw_pw_get_stats(struct rw_watch *w, struct rw_pw_stats *s)
{
	pthread_mutex_lock(&w->lock);
	*s = w->st;
	pthread_mutex_unlock(&w->lock);
}

const char *rw_pw_ack_url(struct rw_watch *w)
{
	return w->ack_url;
}

void rw_pw_stop(struct rw_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (w->stream_started)
		pthread_join(w->stream_thread, NULL);
	if (w->ack_started)
		pthread_join(w->ack_thread, NULL);
	while (w->q_len) {
		free(w->queue[w->q_head].text);
		w->q_head = (w->q_head + 1) % RW_WATCH_QUEUE;
		w->q_len--;
	}
	while (w->a_len) {
		free(w->acks[w->a_head]);
		w->a_head = (w->a_head + 1) % RW_WATCH_ACK_QUEUE;
		w->a_len--;
	}
	if (w->curl)
		curl_easy_cleanup(w->curl);
	rw_pw_framer_free(&w->framer);
	if (w->efd >= 0)
		close(w->efd);
	free(w->url);
	free(w->ack_url);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}
