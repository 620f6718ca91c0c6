// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_view.c: `runwall view`: the page and API of several agents, merged. The agents are given
 * as URLs (--agent) or as a DNS name (--agents-dns NAME:PORT: every address it resolves to is
 * one agent, as a headless Service gives one per pod; the name is resolved again every
 * --dns-refresh seconds, new agents followed, those gone dropped). Names are resolved with
 * glibc's getaddrinfo_a(): its own threads wait for the resolver, and a completion is a queued
 * signal the main loop takes with SIGTERM, so a resolver that never answers stalls neither the
 * status nor the exit. One thread per agent follows its /api/events/stream with libcurl
 * (resuming with Last-Event-ID, reconnecting after a restart) and tags each event with the
 * agent's node; the merged events feed the same HTTP server as the agent's own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <curl/curl.h>
#include <jansson.h>

#include "commands.h"
#include "eventfmt.h"
#include "http.h"
#include "log.h"
#include "util.h"

#define MAX_AGENTS	    256
#define MAX_DNS		    8
#define DNS_REFRESH_DEFAULT 10
#define RECONNECT_MS	    1000
#define SSE_MAX_EVENT	    (256 * 1024)

struct upstream {
	struct view *v;
	bool used;		/* the slot holds an agent (under v->lock) */
	volatile int stop;	/* this one only: its address is gone from DNS */
	int dns;		/* the --agents-dns it came from, -1 for --agent */
	char url[512];		/* base URL, no trailing slash */
	char node[RW_NODE_LEN]; /* the agent's node (its status), else host:port */
	pthread_t thread;
	/* SSE parsing */
	char *pending; /* bytes of an unfinished line */
	size_t pending_len;
	char *data; /* data: lines of the event being read */
	size_t data_len;
	uint64_t id, last_id; /* id: of the event being read; the last one dispatched */
	/* what /api/status shows, under v->lock */
	bool connected;
	uint64_t events, connects;
	char last_error[256];
	json_t *status;
};

/* One getaddrinfo_a() request with everything it points to: glibc's resolver thread writes
 * into it until it completes, so it lives apart from the view (see dns_stop).
 */
struct dns_query {
	struct gaicb cb;
	struct addrinfo hints;
	char name[256], port[8];
};

/* A name whose every address is an agent. */
struct dns_source {
	char name[256], port[8];
	unsigned int addresses;	 /* what the last answer held */
	char last_error[200];	 /* of the last resolution, "" when it worked */
	struct dns_query *query; /* the resolution in flight, NULL when none */
};

struct view {
	struct rw_feed feed;
	struct upstream up[MAX_AGENTS];
	size_t n_up; /* slots ever used: up[0..n_up), some of them free again */
	struct dns_source dns[MAX_DNS];
	size_t n_dns;
	char auth[600]; /* "Authorization: Bearer ..." or "" */
	pthread_mutex_t lock;
	volatile int stop;
};

struct body {
	char *p;
	size_t len;
};

static size_t body_write(char *p, size_t size, size_t n, void *data)
{
	struct body *b = data;
	char *grown;

	if (b->len + size * n > (4u << 20))
		return 0;
	grown = realloc(b->p, b->len + size * n + 1);
	if (!grown)
		return 0;
	b->p = grown;
	memcpy(b->p + b->len, p, size * n);
	b->len += size * n;
	b->p[b->len] = '\0';
	return size * n;
}

static void common_opts(struct view *v, CURL *c, struct curl_slist **hdr)
{
	if (v->auth[0])
		*hdr = curl_slist_append(*hdr, v->auth);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdr);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
}

/* GET URL/path as JSON (new reference), NULL with err on failure. */
static json_t *get_json(struct view *v, const char *base, const char *path, char *err,
			size_t errlen)
{
	struct curl_slist *hdr = NULL;
	struct body b = {};
	char url[700];
	CURL *c = curl_easy_init();
	json_t *o = NULL;
	long status = 0;
	CURLcode rc;

	if (!c)
		return NULL;
	snprintf(url, sizeof(url), "%s%s", base, path);
	common_opts(v, c, &hdr);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK)
		snprintf(err, errlen, "%.200s: %s", url, curl_easy_strerror(rc));
	else if (status != 200)
		snprintf(err, errlen, "%.200s: HTTP %ld", url, status);
	else if (!(o = json_loads(b.p ? b.p : "", 0, NULL)))
		snprintf(err, errlen, "%.200s: not JSON", url);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(c);
	free(b.p);
	return o;
}

/* One complete server-sent event from an agent: tag it with the node and keep it. */
static void dispatch(struct upstream *u)
{
	struct rw_event ev;
	char rule[RW_NAME_LEN] = "", *text;
	const char *service;
	json_t *o;

	u->data[u->data_len] = '\0';
	o = json_loads(u->data, 0, NULL);
	if (!o || rw_event_from_json(o, &ev, rule, sizeof(rule))) {
		json_decref(o);
		return;
	}
	service = json_string_value(json_object_get(o, "service"));
	json_object_del(o, "id");
	json_object_set_new(o, "node", json_string(u->node));
	text = json_dumps(o, JSON_COMPACT);
	if (text) {
		rw_feed_add(&u->v->feed, &ev, u->node, rw_now_real_ns(), text, strlen(text), rule,
			    service);
		free(text);
	}
	json_decref(o);
	if (u->id)
		u->last_id = u->id;
	pthread_mutex_lock(&u->v->lock);
	u->events++;
	pthread_mutex_unlock(&u->v->lock);
}

static void sse_line(struct upstream *u, const char *line, size_t len)
{
	if (!len) {
		if (u->data_len)
			dispatch(u);
		u->data_len = 0;
		u->id = 0;
		return;
	}
	if (len > 4 && !strncmp(line, "id: ", 4)) {
		char *end;
		unsigned long long id = strtoull(line + 4, &end, 10);

		u->id = *end ? 0 : id;
	} else if (len > 6 && !strncmp(line, "data: ", 6)) {
		if (u->data_len + len - 6 + 2 > SSE_MAX_EVENT)
			return;
		if (u->data_len)
			u->data[u->data_len++] = '\n';
		memcpy(u->data + u->data_len, line + 6, len - 6);
		u->data_len += len - 6;
	}
}

static size_t sse_write(char *p, size_t size, size_t n, void *data)
{
	struct upstream *u = data;
	size_t total = size * n;

	for (size_t i = 0; i < total; i++) {
		if (p[i] == '\n') {
			u->pending[u->pending_len] = '\0'; /* the id: line is parsed as a string */
			sse_line(u, u->pending, u->pending_len);
			u->pending_len = 0;
			continue;
		}
		if (u->pending_len + 1 >= SSE_MAX_EVENT)
			return 0; /* a line longer than any event: drop the stream */
		u->pending[u->pending_len++] = p[i];
	}
	return total;
}

static bool stopping(const struct upstream *u)
{
	return u->v->stop || u->stop;
}

static int stop_check(void *data, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	return stopping(data);
}

static void set_state(struct upstream *u, bool connected, const char *err)
{
	pthread_mutex_lock(&u->v->lock);
	u->connected = connected;
	if (connected)
		u->connects++;
	if (err)
		snprintf(u->last_error, sizeof(u->last_error), "%s", err);
	pthread_mutex_unlock(&u->v->lock);
}

static size_t on_header(char *p, size_t size, size_t n, void *data)
{
	struct upstream *u = data;

	/* The status line of the stream's answer: connected once it is 200. */
	if (size * n >= 12 && !strncmp(p, "HTTP/", 5) && strstr(p, " 200"))
		set_state(u, true, "");
	return size * n;
}

static void *follow(void *data)
{
	struct upstream *u = data;
	struct view *v = u->v;

	while (!stopping(u)) {
		struct curl_slist *hdr = NULL;
		char url[700], err[300] = "", idh[64];
		json_t *st = get_json(v, u->url, "/api/status", err, sizeof(err));
		CURL *c;
		CURLcode rc;
		long status = 0;

		if (st) {
			const char *node = json_string_value(json_object_get(st, "node"));

			pthread_mutex_lock(&v->lock);
			if (node && *node)
				snprintf(u->node, sizeof(u->node), "%s", node);
			json_decref(u->status);
			u->status = st;
			pthread_mutex_unlock(&v->lock);
		}
		c = curl_easy_init();
		if (!c)
			break;
		snprintf(url, sizeof(url), "%s/api/events/stream?since=0", u->url);
		if (u->last_id) {
			snprintf(idh, sizeof(idh), "Last-Event-ID: %llu",
				 (unsigned long long)u->last_id);
			hdr = curl_slist_append(hdr, idh);
		}
		common_opts(v, c, &hdr);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sse_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, u);
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, u);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stop_check);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, u);
		/* The agent sends a keepalive every 5 s: 15 s of silence is a dead agent. */
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 15L);
		u->pending_len = u->data_len = 0;
		u->id = 0;
		rc = curl_easy_perform(c);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (rc != CURLE_OK)
			snprintf(err, sizeof(err), "%.200s: %s", url, curl_easy_strerror(rc));
		else
			snprintf(err, sizeof(err), "%.200s: %s", url,
				 status == 200	 ? "the agent closed the stream"
				 : status == 401 ? "HTTP 401: missing or wrong token (--token-file)"
						 : "unexpected answer");
		curl_slist_free_all(hdr);
		curl_easy_cleanup(c);
		set_state(u, false, err);
		if (!stopping(u))
			rw_warn("%s: %s; reconnecting", u->node, err);
		for (int i = 0; i < RECONNECT_MS / 100 && !stopping(u); i++)
			nanosleep(&(struct timespec){0, 100000000L}, NULL);
	}
	return NULL;
}

/* ---- the agents: a fixed --agent list, and every address of each --agents-dns name ---- */

/* Start following URL in a free slot. 0, or -ENOSPC / -ENOMEM / the thread's error. */
static int agent_add(struct view *v, const char *url, int dns)
{
	struct upstream *u = NULL;
	int err;

	pthread_mutex_lock(&v->lock);
	for (size_t i = 0; i < MAX_AGENTS && !u; i++)
		if (!v->up[i].used)
			u = &v->up[i];
	if (u) {
		json_decref(u->status);
		memset(u, 0, sizeof(*u));
		u->v = v;
		u->dns = dns;
		u->used = true;
		snprintf(u->url, sizeof(u->url), "%s", url);
		snprintf(u->node, sizeof(u->node), "%s", strstr(u->url, "://") + 3);
		if ((size_t)(u - v->up) >= v->n_up)
			v->n_up = (size_t)(u - v->up) + 1;
	}
	pthread_mutex_unlock(&v->lock);
	if (!u)
		return -ENOSPC;
	u->pending = malloc(SSE_MAX_EVENT);
	u->data = malloc(SSE_MAX_EVENT + 1);
	err = !u->pending || !u->data ? ENOMEM : pthread_create(&u->thread, NULL, follow, u);
	if (!err)
		return 0;
	free(u->pending);
	free(u->data);
	pthread_mutex_lock(&v->lock);
	u->used = false;
	pthread_mutex_unlock(&v->lock);
	return -err;
}

/* Stop following an agent and free its slot (its events stay in the feed). */
static void agent_drop(struct upstream *u)
{
	struct view *v = u->v;

	u->stop = 1;
	pthread_join(u->thread, NULL); /* within a request's timeout: transfers check `stop` */
	free(u->pending);
	free(u->data);
	pthread_mutex_lock(&v->lock);
	u->used = false;
	u->pending = u->data = NULL;
	json_decref(u->status);
	u->status = NULL;
	pthread_mutex_unlock(&v->lock);
}

/* The view's completions: a queued real-time signal, blocked in every thread and taken by
 * the main loop's sigtimedwait() with SIGINT and SIGTERM.
 */
#define DNS_DONE_SIGNAL (SIGRTMIN + 1)

/* Start resolving name k unless a resolution of it is still in flight. */
static void dns_start(struct view *v, int k)
{
	struct dns_source *d = &v->dns[k];
	struct sigevent done = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = DNS_DONE_SIGNAL};
	struct gaicb *list[1];
	struct dns_query *q;
	int rc;

	if (d->query)
		return;
	q = calloc(1, sizeof(*q));
	if (!q)
		return;
	snprintf(q->name, sizeof(q->name), "%s", d->name);
	snprintf(q->port, sizeof(q->port), "%s", d->port);
	q->hints = (struct addrinfo){.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	q->cb = (struct gaicb){.ar_name = q->name, .ar_service = q->port, .ar_request = &q->hints};
	list[0] = &q->cb;
	rc = getaddrinfo_a(GAI_NOWAIT, list, 1, &done);
	if (rc) {
		pthread_mutex_lock(&v->lock);
		snprintf(d->last_error, sizeof(d->last_error), "cannot start a resolution: %s",
			 gai_strerror(rc));
		pthread_mutex_unlock(&v->lock);
		free(q);
		return;
	}
	d->query = q;
}

/* A resolution of name k ended with rc and res: follow exactly its addresses, new ones added,
 * those gone dropped. A name that resolves to nothing (NXDOMAIN, no address: a headless Service
 * without pods) has no agents; any other failure (the resolver down) keeps the agents as they
 * are.
 */
static void dns_apply(struct view *v, int k, int rc, const struct addrinfo *res)
{
	struct dns_source *d = &v->dns[k];
	char(*urls)[80] = NULL;
	size_t n = 0;
	int family = AF_INET6;

	if (rc && rc != EAI_NONAME && rc != EAI_NODATA) {
		/* No strerror(errno) for EAI_SYSTEM: the errno was glibc's resolver thread's. */
		const char *why = gai_strerror(rc);

		pthread_mutex_lock(&v->lock);
		snprintf(d->last_error, sizeof(d->last_error), "%s", why);
		pthread_mutex_unlock(&v->lock);
		rw_warn("view: --agents-dns %s: %s; keeping its %u agents", d->name, why,
			d->addresses);
		return;
	}
	urls = calloc(MAX_AGENTS, sizeof(*urls));
	if (!urls)
		return;
	/* One family: a dual-stack Service names each agent by both, and the view must follow each
	 * agent once. IPv4 when the name has any, else IPv6 (an IPv6 cluster's pods).
	 */
	for (const struct addrinfo *ai = rc ? NULL : res; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET)
			family = AF_INET;
	for (const struct addrinfo *ai = rc ? NULL : res; ai && n < MAX_AGENTS; ai = ai->ai_next) {
		const struct sockaddr_in *sa = (const struct sockaddr_in *)ai->ai_addr;
		const struct sockaddr_in6 *sa6 = (const struct sockaddr_in6 *)ai->ai_addr;
		char ip[INET6_ADDRSTRLEN], url[80];
		bool dup = false;

		if (ai->ai_family != family)
			continue;
		if (family == AF_INET) {
			inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
			snprintf(url, sizeof(url), "http://%s:%u", ip, ntohs(sa->sin_port));
		} else {
			inet_ntop(AF_INET6, &sa6->sin6_addr, ip, sizeof(ip));
			snprintf(url, sizeof(url), "http://[%s]:%u", ip, ntohs(sa6->sin6_port));
		}
		for (size_t i = 0; i < n && !dup; i++)
			dup = !strcmp(urls[i], url);
		if (!dup)
			snprintf(urls[n++], sizeof(urls[0]), "%s", url);
	}
	/* Gone: a slot of this name whose address is not in the answer. */
	for (size_t i = 0; i < v->n_up; i++) {
		struct upstream *u = &v->up[i];
		bool keep = false;

		if (!u->used || u->dns != k)
			continue;
		for (size_t j = 0; j < n && !keep; j++)
			keep = !strcmp(urls[j], u->url);
		if (!keep) {
			rw_info("view: agent %s (%s) is gone from %s: dropped", u->url, u->node,
				d->name);
			agent_drop(u);
		}
	}
	/* New: an address no slot follows yet (an --agent of the same URL counts). */
	for (size_t j = 0; j < n; j++) {
		bool known = false;
		int err;

		for (size_t i = 0; i < v->n_up && !known; i++)
			known = v->up[i].used && !strcmp(v->up[i].url, urls[j]);
		if (known)
			continue;
		err = agent_add(v, urls[j], k);
		if (err)
			rw_warn("view: agent %s from %s: cannot follow it: %s", urls[j], d->name,
				strerror(-err));
		else
			rw_info("view: agent %s found by %s", urls[j], d->name);
	}
	pthread_mutex_lock(&v->lock);
	d->addresses = (unsigned int)n;
	d->last_error[0] = '\0';
	pthread_mutex_unlock(&v->lock);
	free(urls);
}

/* Every resolution that has ended: its answer applied, its request freed. */
static void dns_collect(struct view *v)
{
	for (size_t k = 0; k < v->n_dns; k++) {
		struct dns_query *q = v->dns[k].query;
		int rc;

		if (!q || (rc = gai_error(&q->cb)) == EAI_INPROGRESS)
			continue;
		v->dns[k].query = NULL;
		dns_apply(v, (int)k, rc, q->cb.ar_result);
		freeaddrinfo(q->cb.ar_result);
		free(q);
	}
}

/* At exit: a resolution still in flight is cancelled, or, when glibc's thread is already
 * waiting for the resolver and cannot be stopped, left to it: it writes into the request when
 * the resolver answers, so the request is never freed (the process is ending; the pointer kept
 * here says the memory is not lost).
 */
static struct dns_query *dns_abandoned[MAX_DNS];

static void dns_stop(struct view *v)
{
	for (size_t k = 0; k < v->n_dns; k++) {
		struct dns_query *q = v->dns[k].query;
		int rc;

		if (!q)
			continue;
		v->dns[k].query = NULL;
		rc = gai_cancel(&q->cb);
		if (rc == EAI_NOTCANCELED) {
			dns_abandoned[k] = q;
			continue;
		}
		if (rc == EAI_ALLDONE)
			freeaddrinfo(q->cb.ar_result);
		free(q);
	}
}

static void publish_status(struct view *v)
{
	json_t *agents = json_array(), *dns = json_array(), *o;
	size_t n = 0;
	bool all = true;
	char *text;

	pthread_mutex_lock(&v->lock);
	for (size_t i = 0; i < v->n_up; i++) {
		struct upstream *u = &v->up[i];
		json_t *st = u->status;

		if (!u->used)
			continue;
		n++;
		all &= u->connected;
		json_array_append_new(
			agents, json_pack("{s:s, s:s, s:s, s:b, s:I, s:I, s:s?, s:O?, s:O?}", "url",
					  u->url, "node", u->node, "source",
					  u->dns < 0 ? "--agent" : v->dns[u->dns].name, "connected",
					  u->connected, "events", (json_int_t)u->events, "connects",
					  (json_int_t)u->connects, "last_error",
					  u->last_error[0] ? u->last_error : NULL, "ready",
					  st ? json_object_get(st, "ready") : NULL, "revision",
					  st ? json_object_get(st, "revision") : NULL));
	}
	for (size_t i = 0; i < v->n_dns; i++)
		json_array_append_new(
			dns, json_pack("{s:s, s:s, s:i, s:b, s:s?}", "name", v->dns[i].name, "port",
				       v->dns[i].port, "addresses", (int)v->dns[i].addresses,
				       "resolving", v->dns[i].query != NULL, "last_error",
				       v->dns[i].last_error[0] ? v->dns[i].last_error : NULL));
	pthread_mutex_unlock(&v->lock);
	all &= n > 0;
	o = json_pack("{s:b, s:b, s:o, s:o}", "ok", 1, "view", 1, "agents", agents, "dns", dns);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text)
		rw_feed_set_status(&v->feed, text, all,
				   all ? "every agent connected\n" : "not every agent connected\n");
}

/* /api/requests of the view: every agent's, tagged with its node. */
static char *merged_requests(void *data)
{
	struct view *v = data;
	json_t *list = json_array(), *o;
	struct {
		char url[512], node[RW_NODE_LEN];
	} * agents;
	size_t n = 0;
	char *text;

	/* The agents of now (slots come and go with DNS), then one request each, unlocked. */
	agents = calloc(MAX_AGENTS, sizeof(*agents));
	if (!agents) {
		json_decref(list);
		return NULL;
	}
	pthread_mutex_lock(&v->lock);
	for (size_t i = 0; i < v->n_up; i++) {
		if (!v->up[i].used)
			continue;
		snprintf(agents[n].url, sizeof(agents[n].url), "%s", v->up[i].url);
		snprintf(agents[n].node, sizeof(agents[n].node), "%s", v->up[i].node);
		n++;
	}
	pthread_mutex_unlock(&v->lock);
	for (size_t i = 0; i < n; i++) {
		char err[300];
		const char *node = agents[i].node;
		json_t *r = get_json(v, agents[i].url, "/api/requests", err, sizeof(err)), *item;
		size_t k;

		json_array_foreach(json_object_get(r, "requests"), k, item)
		{
			if (!json_string_length(json_object_get(item, "node")))
				json_object_set_new(item, "node", json_string(node));
			json_array_append(list, item);
		}
		json_decref(r);
	}
	free(agents);
	o = json_pack("{s:b, s:o}", "ok", 1, "requests", list);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

static const char view_usage[] =
	"view {--agent URL | --agents-dns NAME:PORT} ... [--dns-refresh SECONDS] "
	"[--listen ADDR:PORT] [--token-file FILE] [--http-token-file FILE] [--events N]";
static const char view_options[] =
	"  --agent URL             an agent's --listen address (http://10.0.1.5:9100); repeat it\n"
	"  --agents-dns NAME:PORT  every IPv4 address NAME resolves to is an agent on PORT (a\n"
	"                          headless Service: one per pod); repeat it for several names\n"
	"  --dns-refresh SECONDS   resolve the --agents-dns names again this often: new agents\n"
	"                          are followed, those gone dropped (default 10)\n"
	"  --token-file FILE       bearer token the agents require\n"
	"  --listen ADDR:PORT      where to serve the merged page and API (default 127.0.0.1:9180)\n"
	"  --http-token-file FILE  token this view requires (needed off loopback): a bearer token,\n"
	"                          or the cookie the page stores when it asks for it\n"
	"  --events N              merged events kept in memory (default 10000)\n";

/* What `runwall view`'s options ask for, beside what they add to the view itself. */
struct view_args {
	struct rw_http_opts ho;
	const char *token_file;
	char (*urls)[512]; /* the --agent URLs: MAX_AGENTS of them */
	size_t n_urls;
	long events, refresh;
	bool help; /* -h: the help is printed, nothing else is done */
};

/* --agent URL: checked and kept for the start. */
static int add_static(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *arg)
{
	struct view_args *a = o->data;
	char(*urls)[512] = a->urls;
	size_t len = strlen(arg), *n = &a->n_urls;

	if (*n == MAX_AGENTS)
		return rw_fail(RW_EXIT_USAGE, "view: at most %d --agent", MAX_AGENTS);
	if ((strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8)) || len >= 512 || len < 8)
		return rw_fail(RW_EXIT_USAGE, "view: --agent '%s': expected http://HOST:PORT", arg);
	snprintf(urls[*n], 512, "%s", arg);
	while (len && urls[*n][len - 1] == '/')
		urls[*n][--len] = '\0';
	(*n)++;
	return 0;
}

/* --agents-dns NAME:PORT. */
static int add_dns(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *arg)
{
	struct view *v = o->data;
	const char *colon = strrchr(arg, ':');
	struct dns_source *d;
	char *end;
	unsigned long port;

	if (v->n_dns == MAX_DNS)
		return rw_fail(RW_EXIT_USAGE, "view: at most %d --agents-dns", MAX_DNS);
	errno = 0;
	port = colon ? strtoul(colon + 1, &end, 10) : 0;
	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(d->name) || !colon[1] ||
	    *end || errno || !port || port > 65535 || strchr(arg, '/'))
		return rw_fail(RW_EXIT_USAGE,
			       "view: --agents-dns '%s': expected NAME:PORT "
			       "(runwall-agent.runwall-system.svc.cluster.local:9750)",
			       arg);
	d = &v->dns[v->n_dns++];
	snprintf(d->name, sizeof(d->name), "%.*s", (int)(colon - arg), arg);
	snprintf(d->port, sizeof(d->port), "%lu", port);
	return 0;
}

static int refresh_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	long *refresh = o->data;
	char *end;

	errno = 0;
	*refresh = strtol(val, &end, 10);
	if (!*val || *end || errno || *refresh < 1 || *refresh > 3600)
		return rw_fail(RW_EXIT_USAGE, "view: --dns-refresh '%s': expected 1-3600 seconds",
			       val);
	return 0;
}

static int events_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	long *events = o->data;

	*events = strtol(val, NULL, 10);
	if (*events < 1 || *events > RW_EVSTORE_MAX)
		return rw_fail(RW_EXIT_USAGE, "view: --events '%s': expected 1-%d", val,
			       RW_EVSTORE_MAX);
	return 0;
}

static int view_parse(int argc, char **argv, struct view *v, struct view_args *a)
{
	const struct rw_cmd_opt opts[] = {{"agent", .set = add_static, .data = a},
					  {"agents-dns", .set = add_dns, .data = v},
					  {"dns-refresh", .set = refresh_arg, .data = &a->refresh},
					  {"token-file", .str = &a->token_file},
					  {"listen", .str = &a->ho.listen},
					  {"http-token-file", .str = &a->ho.token_file},
					  {"events", .set = events_arg, .data = &a->events},
					  {}};
	int ret = rw_cmd_options(&rw_cmd_view, argc, argv, opts);

	if (ret >= 0) {
		a->help = ret == RW_EXIT_OK;
		return ret;
	}
	if (optind < argc)
		return rw_fail(RW_EXIT_USAGE, "view: unexpected argument '%s'", argv[optind]);
	if (!a->n_urls && !v->n_dns)
		return rw_fail(
			RW_EXIT_USAGE,
			"view: at least one --agent URL or --agents-dns NAME:PORT is needed");
	return RW_EXIT_OK;
}

/* The bearer token the view sends its agents, and the event store it merges into. */
static int view_prepare(struct view *v, const struct view_args *a)
{
	char err[400];

	if (a->token_file) {
		char tok[520];

		if (rw_read_token("view: --token-file", a->token_file, 1, tok, sizeof(tok), err,
				  sizeof(err)))
			return rw_fail(RW_EXIT_USAGE, "%s", err);
		snprintf(v->auth, sizeof(v->auth), "Authorization: Bearer %s", tok);
	}
	if (rw_feed_init(&v->feed, a->events, RW_AGGS_DEFAULT))
		return rw_fail(RW_EXIT_REFUSED, "view: out of memory");
	return RW_EXIT_OK;
}

/* Until SIGINT or SIGTERM: collect the DNS answers, look the names up again every --dns-refresh
 * seconds, publish the view's own status. */
static void view_serve(struct view *v, const struct view_args *a, const sigset_t *mask)
{
	double next_dns = rw_now_ms() + a->refresh * 1000.0;

	publish_status(v);
	for (;;) {
		struct timespec one = {1, 0};
		int sig = sigtimedwait(mask, NULL, &one);

		if (sig == SIGINT || sig == SIGTERM)
			break;
		dns_collect(v);
		if (v->n_dns && rw_now_ms() >= next_dns) {
			next_dns = rw_now_ms() + a->refresh * 1000.0;
			for (size_t k = 0; k < v->n_dns; k++)
				dns_start(v, (int)k);
		}
		publish_status(v);
	}
}

/* The HTTP listener, every --agent followed and every --agents-dns name looked up, then
 * view_serve() until a signal; everything started is stopped on the way out. */
static int view_run(struct view *v, const struct view_args *a)
{
	struct rw_http_ops ops = {.requests = merged_requests, .data = v};
	const struct rw_http_opts *ho = &a->ho;
	struct rw_http *http;
	char err[400];
	bool usage;
	sigset_t mask;
	int ret = RW_EXIT_REFUSED;

	pthread_mutex_init(&v->lock, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* Signals go to this thread only (sigtimedwait in view_serve), never to the workers. */
	rw_signals_block(&mask, DNS_DONE_SIGNAL);
	publish_status(v);
	http = rw_http_start(ho, &v->feed, &ops, err, sizeof(err), &usage);
	if (!http) {
		ret = rw_fail(usage ? RW_EXIT_USAGE : RW_EXIT_REFUSED, "%s", err);
		goto out_feed;
	}
	for (size_t i = 0; i < a->n_urls; i++) {
		int rc = agent_add(v, a->urls[i], -1);

		if (rc) {
			ret = rw_fail(RW_EXIT_REFUSED, "view: %s: cannot follow it: %s", a->urls[i],
				      strerror(-rc));
			goto out_agents;
		}
	}
	for (size_t k = 0; k < v->n_dns; k++)
		dns_start(v, (int)k);
	rw_info("view of %zu --agent and %zu --agents-dns names on http://%s:%u/", a->n_urls,
		v->n_dns,
		strchr(ho->listen, ':') && ho->listen[0] != ':'
			? strndupa(ho->listen, strrchr(ho->listen, ':') - ho->listen)
			: "127.0.0.1",
		rw_http_port(http));
	view_serve(v, a, &mask);
	rw_info("view: exiting");
	ret = RW_EXIT_OK;
out_agents:
	dns_stop(v);
	v->stop = 1;
	for (size_t i = 0; i < v->n_up; i++)
		if (v->up[i].used)
			agent_drop(&v->up[i]);
	rw_http_stop(http);
out_feed:
	for (size_t i = 0; i < v->n_up; i++)
		json_decref(v->up[i].status);
	rw_feed_free(&v->feed);
	pthread_mutex_destroy(&v->lock);
	return ret;
}

static int cmd_view(int argc, char **argv)
{
	struct view_args a = {
		.ho = {.listen = "127.0.0.1:9180", .flag = "view: --listen"},
		.events = RW_EVSTORE_DEFAULT,
		.refresh = DNS_REFRESH_DEFAULT,
	};
	struct view *v = calloc(1, sizeof(*v));
	int ret;

	a.urls = calloc(MAX_AGENTS, sizeof(*a.urls));
	if (!v || !a.urls)
		ret = rw_fail(RW_EXIT_REFUSED, "view: out of memory");
	else
		ret = view_parse(argc, argv, v, &a);
	if (!ret && !a.help)
		ret = view_prepare(v, &a);
	if (!ret && !a.help)
		ret = view_run(v, &a);
	free(a.urls);
	free(v);
	return ret;
}

RW_COMMAND(view, .summary = "the live traffic page and API of several agents, merged",
	   .grammar = view_usage, .options = view_options);
