// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_view.c: `runwall view --agent URL [--agent URL ...]`: the page and API of several agents,
 * merged. One thread per agent follows its /api/events/stream with libcurl (resuming with
 * Last-Event-ID, reconnecting after a restart) and tags each event with the agent's node; the
 * merged events feed the same HTTP server as the agent's own.
 */
#include <errno.h>
#include <getopt.h>
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

#define MAX_AGENTS    64
#define RECONNECT_MS  1000
#define SSE_MAX_EVENT (256 * 1024)

struct upstream {
	struct view *v;
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

struct view {
	struct rw_feed feed;
	struct upstream up[MAX_AGENTS];
	size_t n_up;
	char auth[600]; /* "Authorization: Bearer ..." or "" */
	pthread_mutex_t lock;
	volatile int stop;
};

static int64_t now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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
		rw_feed_add(&u->v->feed, &ev, u->node, now_real(), text, strlen(text), rule,
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

static int stop_check(void *data, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct upstream *u = data;

	return u->v->stop;
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

	while (!v->stop) {
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
		if (!v->stop)
			rw_warn("%s: %s; reconnecting", u->node, err);
		for (int i = 0; i < RECONNECT_MS / 100 && !v->stop; i++)
			nanosleep(&(struct timespec){0, 100000000L}, NULL);
	}
	return NULL;
}

static void publish_status(struct view *v)
{
	json_t *agents = json_array(), *o;
	bool all = v->n_up > 0;
	char *text;

	pthread_mutex_lock(&v->lock);
	for (size_t i = 0; i < v->n_up; i++) {
		struct upstream *u = &v->up[i];
		json_t *st = u->status;

		all &= u->connected;
		json_array_append_new(
			agents,
			json_pack("{s:s, s:s, s:b, s:I, s:I, s:s?, s:O?, s:O?}", "url", u->url,
				  "node", u->node, "connected", u->connected, "events",
				  (json_int_t)u->events, "connects", (json_int_t)u->connects,
				  "last_error", u->last_error[0] ? u->last_error : NULL, "ready",
				  st ? json_object_get(st, "ready") : NULL, "revision",
				  st ? json_object_get(st, "revision") : NULL));
	}
	pthread_mutex_unlock(&v->lock);
	o = json_pack("{s:b, s:b, s:o}", "ok", 1, "view", 1, "agents", agents);
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
	char *text;

	for (size_t i = 0; i < v->n_up; i++) {
		char err[300], node[RW_NODE_LEN];
		json_t *r = get_json(v, v->up[i].url, "/api/requests", err, sizeof(err)), *item;
		size_t k;

		pthread_mutex_lock(&v->lock);
		snprintf(node, sizeof(node), "%s", v->up[i].node);
		pthread_mutex_unlock(&v->lock);
		json_array_foreach(json_object_get(r, "requests"), k, item)
		{
			if (!json_string_length(json_object_get(item, "node")))
				json_object_set_new(item, "node", json_string(node));
			json_array_append(list, item);
		}
		json_decref(r);
	}
	o = json_pack("{s:b, s:o}", "ok", 1, "requests", list);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

static const char view_options[] =
	"  --agent URL             an agent's --listen address (http://10.0.1.5:9100); repeat it\n"
	"  --token-file FILE       bearer token the agents require\n"
	"  --listen ADDR:PORT      where to serve the merged page and API (default 127.0.0.1:9180)\n"
	"  --http-token-file FILE  bearer token this view requires (needed off loopback)\n"
	"  --events N              merged events kept in memory (default 10000)\n";

static int cmd_view(int argc, char **argv)
{
	static const struct option opts[] = {{"agent", required_argument, NULL, 'a'},
					     {"token-file", required_argument, NULL, 't'},
					     {"listen", required_argument, NULL, 'l'},
					     {"http-token-file", required_argument, NULL, 'T'},
					     {"events", required_argument, NULL, 'e'},
					     {"help", no_argument, NULL, 'h'},
					     {}};
	struct rw_http_opts ho = {.listen = "127.0.0.1:9180", .flag = "view: --listen"};
	struct rw_http_ops ops = {.requests = merged_requests};
	const char *token_file = NULL;
	struct rw_http *http = NULL;
	struct view *v;
	long events = RW_EVSTORE_DEFAULT;
	char err[400];
	bool usage;
	sigset_t mask;
	int c, ret = RW_EXIT_REFUSED;

	v = calloc(1, sizeof(*v));
	if (!v)
		return rw_fail(RW_EXIT_REFUSED, "view: out of memory");
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a': {
			struct upstream *u;
			size_t len = strlen(optarg);

			if (v->n_up == MAX_AGENTS) {
				free(v);
				return rw_fail(RW_EXIT_USAGE, "view: at most %d --agent",
					       MAX_AGENTS);
			}
			if ((strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8)) ||
			    len >= sizeof(u->url) || len < 8) {
				free(v);
				return rw_fail(RW_EXIT_USAGE,
					       "view: --agent '%s': expected "
					       "http://HOST:PORT",
					       optarg);
			}
			u = &v->up[v->n_up++];
			snprintf(u->url, sizeof(u->url), "%s", optarg);
			while (len && u->url[len - 1] == '/')
				u->url[--len] = '\0';
			snprintf(u->node, sizeof(u->node), "%s", strstr(u->url, "://") + 3);
			break;
		}
		case 't':
			token_file = optarg;
			break;
		case 'l':
			ho.listen = optarg;
			break;
		case 'T':
			ho.token_file = optarg;
			break;
		case 'e':
			events = strtol(optarg, NULL, 10);
			if (events < 1 || events > RW_EVSTORE_MAX) {
				free(v);
				return rw_fail(RW_EXIT_USAGE, "view: --events '%s': expected 1-%d",
					       optarg, RW_EVSTORE_MAX);
			}
			break;
		case 'h':
			rw_cmd_help(&rw_cmd_view, stdout);
			free(v);
			return RW_EXIT_OK;
		default:
			free(v);
			return rw_cmd_usage_error(&rw_cmd_view, "bad option '%s'",
						  argv[optind - 1]);
		}
	}
	if (optind < argc || !v->n_up) {
		free(v);
		if (optind < argc)
			return rw_fail(RW_EXIT_USAGE, "view: unexpected argument '%s'",
				       argv[optind]);
		return rw_fail(RW_EXIT_USAGE, "view: at least one --agent URL is needed");
	}
	if (token_file) {
		char tok[520];
		FILE *f = fopen(token_file, "r");
		size_t n = f ? fread(tok, 1, sizeof(tok) - 1, f) : 0;

		if (f)
			fclose(f);
		tok[n] = '\0';
		while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
			tok[--n] = '\0';
		if (!f || !n) {
			free(v);
			return rw_fail(RW_EXIT_USAGE, "view: --token-file %s: %s", token_file,
				       f ? "empty" : strerror(errno));
		}
		snprintf(v->auth, sizeof(v->auth), "Authorization: Bearer %s", tok);
	}
	if (rw_feed_init(&v->feed, events, RW_AGGS_DEFAULT)) {
		free(v);
		return rw_fail(RW_EXIT_REFUSED, "view: out of memory");
	}
	pthread_mutex_init(&v->lock, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ops.data = v;
	/* Signals go to this thread only (sigtimedwait below), never to the workers. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	publish_status(v);
	http = rw_http_start(&ho, &v->feed, &ops, err, sizeof(err), &usage);
	if (!http) {
		ret = rw_fail(usage ? RW_EXIT_USAGE : RW_EXIT_REFUSED, "%s", err);
		goto out_feed;
	}
	for (size_t i = 0; i < v->n_up; i++) {
		v->up[i].v = v;
		v->up[i].pending = malloc(SSE_MAX_EVENT);
		v->up[i].data = malloc(SSE_MAX_EVENT + 1);
		if (!v->up[i].pending || !v->up[i].data ||
		    pthread_create(&v->up[i].thread, NULL, follow, &v->up[i])) {
			v->stop = 1;
			for (size_t k = 0; k < i; k++)
				pthread_join(v->up[k].thread, NULL);
			ret = rw_fail(RW_EXIT_REFUSED, "view: cannot start a thread");
			goto out_http;
		}
	}
	rw_info("view of %zu agents on http://%s:%u/", v->n_up,
		strchr(ho.listen, ':') && ho.listen[0] != ':'
			? strndupa(ho.listen, strrchr(ho.listen, ':') - ho.listen)
			: "127.0.0.1",
		rw_http_port(http));
	for (;;) {
		struct timespec one = {1, 0};
		int sig = sigtimedwait(&mask, NULL, &one);

		if (sig > 0)
			break;
		publish_status(v);
	}
	rw_info("view: exiting");
	v->stop = 1;
	for (size_t i = 0; i < v->n_up; i++)
		pthread_join(v->up[i].thread, NULL);
	ret = RW_EXIT_OK;
out_http:
	rw_http_stop(http);
out_feed:
	for (size_t i = 0; i < v->n_up; i++) {
		free(v->up[i].pending);
		free(v->up[i].data);
		json_decref(v->up[i].status);
	}
	rw_feed_free(&v->feed);
	pthread_mutex_destroy(&v->lock);
	free(v);
	return ret;
}

const struct rw_cmd rw_cmd_view = {
	.name = "view",
	.summary = "the live traffic page and API of several agents, merged",
	.grammar = "view --agent URL [--agent URL ...] [--listen ADDR:PORT] [--token-file FILE] "
		   "[--http-token-file FILE] [--events N]",
	.options = view_options,
	.func = cmd_view,
};
