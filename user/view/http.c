// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* http.c: the HTTP API and page over libmicrohttpd (replaces health.c: /healthz and /readyz
 * answer as they did). Read-only: GET and HEAD only. Loopback unless a token is configured
 * (sent as a bearer token, or by the page as a cookie). One thread per connection, a request-size
 * limit (MHD's memory pool: a bigger request line or header gets 414/431 from MHD itself), a short
 * inactivity timeout until a request's headers are in and a longer one after: a client that never
 * reads blocks its own thread only, until the timeout closes it. The slots are shared fairly
 * between client addresses, and a request's headers have a deadline (see "slots" below). With
 * probes_only (--probe-listen) the same daemon serves /healthz and /readyz only, on loopback.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <microhttpd.h>

#include "eventfmt.h"
#include "http.h"
#include "log.h"
#include "reasons.h"
#include "view_page.h" /* generated from view.html: rw_view_page[], rw_view_page_len */

#define CONN_TIMEOUT_S	  30
#define HEADER_TIMEOUT_S  5  /* until a request's headers are in (inactivity, see header_timeout) */
#define HEADER_DEADLINE_S 10 /* the same, in all (see slots_reaper) */
#define CONN_DEFAULT	  256
#define PER_IP_DEFAULT	  16
#define SLOTS_SPARE	  64	      /* MHD's own limit is ours plus these: see slot_start() */
#define REQUEST_MEMORY	  (16 * 1024) /* request line + headers, per connection */
#define SSE_KEEPALIVE_S	  5
#define SSE_BLOCK	  (64 * 1024)
#define TOKEN_MAX	  512

/* A connection as the slots see it (its MHD socket context, from MHD_CONNECTION_NOTIFY_STARTED
 * to MHD_CONNECTION_NOTIFY_CLOSED, both on MHD's daemon thread).
 */
enum slot_state {
	SLOT_HEADERS,	/* waiting for a request's headers (the deadline runs) */
	SLOT_ANSWERING, /* answering a request that did not prove the token */
	SLOT_TRUSTED,	/* answering a request that did (or no token is required) */
	SLOT_CLOSING,	/* shut down by the slots, no longer counted; MHD closes it */
};

/* A client address: its connections counted (n), and the slots that name it (refs). */
struct peer {
	uint32_t addr; /* IPv4, network order (the listener is IPv4) */
	unsigned int n, refs;
};

struct slot {
	struct slot *prev, *next;
	struct peer *peer;
	int fd;
	uint64_t since_ms; /* CLOCK_MONOTONIC: when it began to wait for headers */
	enum slot_state state;
};

struct rw_http {
	struct MHD_Daemon *daemon;
	struct rw_feed *feed;
	struct rw_http_ops ops;
	char token[TOKEN_MAX]; /* "" when none is required */
	unsigned int port;
	bool probes_only;
	/* The slots: every connection MHD holds, under lock. */
	pthread_mutex_t lock;
	pthread_cond_t wake; /* the reaper's tick, and its stop */
	pthread_t reaper;
	bool reaper_started, stopping;
	struct slot *slots;
	unsigned int counted; /* connections not SLOT_CLOSING */
	unsigned int limit;   /* of those, at most */
};

/* ---- answering ---- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned int status, const char *type,
				 const char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"runwall\"");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_json_error(struct MHD_Connection *c, unsigned int status,
				       const char *msg)
{
	json_t *o = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", msg, "status", (int)status);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	enum MHD_Result ret;

	json_decref(o);
	if (!text)
		return MHD_NO;
	ret = send_text(c, status, "application/json", text, strlen(text), MHD_RESPMEM_MUST_FREE);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (!text)
		return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return send_text(c, MHD_HTTP_OK, "application/json", text, strlen(text),
			 MHD_RESPMEM_MUST_FREE);
}

/* The query, checked parameter by parameter with the same function the fuzzer drives. */
struct query_walk {
	struct rw_evfilter *f;
	char err[320];
	int ret;
};

static enum MHD_Result query_one(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct query_walk *q = cls;

	if (q->ret)
		return MHD_NO;
	q->ret = rw_query_set(q->f, key, value, q->err, sizeof(q->err));
	return q->ret ? MHD_NO : MHD_YES;
}

static int parse_query(struct MHD_Connection *c, struct rw_evfilter *f, char *err, size_t len)
{
	struct query_walk q = {.f = f};
	int n;

	rw_evfilter_init(f);
	n = MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_one, &q);
	if (!q.ret && n > 16) {
		snprintf(err, len, "more than 16 query parameters");
		return -EINVAL;
	}
	if (q.ret)
		snprintf(err, len, "%s", q.err);
	return q.ret;
}

/* A growing text buffer. */
struct buf {
	char *p;
	size_t len, cap;
	bool failed;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *grown;

		while (cap < b->len + n + 1)
			cap *= 2;
		grown = realloc(b->p, cap);
		if (!grown) {
			b->failed = true;
			return;
		}
		b->p = grown;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* An entry as {"id":N,...the event...}. */
static void buf_event(struct buf *b, const struct rw_evstore_entry *e)
{
	char head[48];
	int n = snprintf(head, sizeof(head), "{\"id\":%llu%s", (unsigned long long)e->id,
			 e->json_len > 2 ? "," : "");

	buf_add(b, head, n);
	buf_add(b, e->json + 1, e->json_len - 1);
}

struct events_walk {
	struct buf *b;
	size_t n;
	uint64_t last;
};

static int events_one(const struct rw_evstore_entry *e, void *data)
{
	struct events_walk *w = data;

	if (w->n++)
		buf_add(w->b, ",", 1);
	buf_event(w->b, e);
	w->last = e->id;
	return 0;
}

static enum MHD_Result answer_events(struct rw_http *h, struct MHD_Connection *c,
				     const struct rw_evfilter *f)
{
	struct buf b = {};
	struct events_walk w = {.b = &b};
	char tail[224];
	uint64_t first, last, evicted, own, fair;

	buf_add(&b, "{\"ok\":true,\"events\":[", 21);
	pthread_mutex_lock(&h->feed->lock);
	rw_evstore_query(&h->feed->events, f, events_one, &w);
	first = rw_evstore_first_id(&h->feed->events);
	last = rw_evstore_last_id(&h->feed->events);
	evicted = h->feed->events.evicted;
	own = h->feed->events.displaced[RW_SHARE_OWN];
	fair = h->feed->events.displaced[RW_SHARE_FAIR];
	pthread_mutex_unlock(&h->feed->lock);
	/* "cursor": what to pass as `since` next time (the newest id scanned, matching or not). */
	snprintf(tail, sizeof(tail),
		 "],\"count\":%zu,\"first\":%llu,\"last\":%llu,\"cursor\":%llu,"
		 "\"evicted\":%llu,\"displaced\":{\"own_share\":%llu,\"fair_share\":%llu}}",
		 w.n, (unsigned long long)first, (unsigned long long)last,
		 (unsigned long long)(last > f->since ? last : f->since),
		 (unsigned long long)evicted, (unsigned long long)own, (unsigned long long)fair);
	buf_add(&b, tail, strlen(tail));
	if (b.failed) {
		free(b.p);
		return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	return send_text(c, MHD_HTTP_OK, "application/json", b.p, b.len, MHD_RESPMEM_MUST_FREE);
}

/* ---- server-sent events ---- */

struct sse {
	struct rw_http *h;
	struct rw_evfilter f; /* f.since: the cursor */
	struct buf out;
	size_t off;
	uint64_t sent_last;
	bool started;
};

static int sse_one(const struct rw_evstore_entry *e, void *data)
{
	struct sse *s = data;
	char head[48];
	int n = snprintf(head, sizeof(head), "id: %llu\ndata: ", (unsigned long long)e->id);

	buf_add(&s->out, head, n);
	buf_event(&s->out, e);
	buf_add(&s->out, "\n\n", 2);
	s->sent_last = e->id;
	return s->out.len >= SSE_BLOCK;
}

/* MHD calls this on the connection's own thread whenever it can send more: it waits here
 * (up to the keepalive period) for events past the cursor. Returning 0 is not allowed with
 * internal threads (MHD would spin), so an idle stream sends a comment line instead.
 */
static ssize_t sse_read(void *cls, uint64_t pos, char *dst, size_t max)
{
	struct sse *s = cls;
	struct rw_feed *feed = s->h->feed;
	size_t n;

	if (s->off == s->out.len) {
		struct timespec until;

		s->off = s->out.len = 0;
		if (!s->started) {
			/* The browser's reconnection delay after an agent restart. */
			buf_add(&s->out, "retry: 1000\n\n", 13);
			s->started = true;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += SSE_KEEPALIVE_S;
		pthread_mutex_lock(&feed->lock);
		for (;;) {
			uint64_t last = rw_evstore_last_id(&feed->events);

			if (feed->closing) {
				pthread_mutex_unlock(&feed->lock);
				return MHD_CONTENT_READER_END_OF_STREAM;
			}
			if (last > s->f.since) {
				s->sent_last = 0;
				rw_evstore_query(&feed->events, &s->f, sse_one, s);
				/* Past what was sent when the block filled, else past all scanned. */
				s->f.since = s->out.len >= SSE_BLOCK ? s->sent_last : last;
			}
			if (s->out.len)
				break;
			if (pthread_cond_timedwait(&feed->cond, &feed->lock, &until) == ETIMEDOUT)
				break;
		}
		pthread_mutex_unlock(&feed->lock);
		if (!s->out.len)
			buf_add(&s->out, ": keepalive\n\n", 13);
		if (s->out.failed)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	n = s->out.len - s->off;
	if (n > max)
		n = max;
	memcpy(dst, s->out.p + s->off, n);
	s->off += n;
	return (ssize_t)n;
}

static void sse_free(void *cls)
{
	struct sse *s = cls;

	free(s->out.p);
	free(s);
}

static enum MHD_Result answer_stream(struct rw_http *h, struct MHD_Connection *c,
				     const struct rw_evfilter *f)
{
	const char *last_id =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_LAST_EVENT_ID);
	const char *since = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since");
	struct MHD_Response *r;
	struct sse *s;
	enum MHD_Result ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	s->h = h;
	s->f = *f;
	s->f.limit = 0;
	/* Resume after Last-Event-ID (what a browser sends when it reconnects), else after
	 * ?since=, else from now on.
	 */
	if (last_id) {
		struct rw_evfilter tmp;
		char err[128];

		rw_evfilter_init(&tmp);
		if (rw_query_set(&tmp, "since", last_id, err, sizeof(err))) {
			free(s);
			return send_json_error(c, MHD_HTTP_BAD_REQUEST,
					       "Last-Event-ID: expected an event id");
		}
		s->f.since = tmp.since;
	} else if (!since) {
		pthread_mutex_lock(&h->feed->lock);
		s->f.since = rw_evstore_last_id(&h->feed->events);
		if (!s->f.since)
			s->f.since = h->feed->events.next_id - 1;
		pthread_mutex_unlock(&h->feed->lock);
	}
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SSE_BLOCK, sse_read, s, sse_free);
	if (!r) {
		free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---- slots ----
 *
 * MHD's own limits are a total and a per-address one, both first come first served, and its
 * timeouts are inactivity timeouts: a few addresses that open connections and send a header byte
 * every few seconds would hold every slot. So the slots keep their own count, below MHD's:
 *
 * - Fair: when all `limit` are taken, a new connection takes the place of one still waiting for
 *   its headers, or answering without the token: the longest waiting of the address holding the
 *   most, if that address holds at least two more than the new one's (so it still holds as many
 *   after); else the new one is closed. One address can thus take only what the others leave:
 *   with k addresses each keeps limit/k at least, and a client with a single connection gets
 *   in while any address holds two or more, one of them still before its token.
 * - A deadline: a connection that has waited HEADER_DEADLINE_S in all for a request's headers
 *   (since it was accepted, or since its previous request was answered) is closed, however often
 *   it sends a byte (the reaper, each second).
 *
 * A connection is closed with shutdown(2) on its socket: its thread reads the end, and MHD closes
 * it. The descriptor is still MHD's until MHD_CONNECTION_NOTIFY_CLOSED, which takes the lock.
 */
static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool slot_evictable(const struct slot *s)
{
	return s->state == SLOT_HEADERS || s->state == SLOT_ANSWERING;
}

/* Closes s (under lock): its socket shut down, its slot no longer counted. */
static void slot_close(struct rw_http *h, struct slot *s, const char *why)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &s->peer->addr, ip, sizeof(ip));
	rw_debug("http: closing a connection from %s: %s", ip, why);
	(void)shutdown(s->fd, SHUT_RDWR);
	s->state = SLOT_CLOSING;
	s->peer->n--;
	h->counted--;
}

/* The place a connection from an address holding `mine` takes when all are taken: the longest
 * waiting evictable connection of the address holding the most, when that is mine + 2 or more.
 */
static struct slot *slot_victim(struct rw_http *h, unsigned int mine)
{
	struct slot *best = NULL;
	unsigned int best_n = 0;

	for (struct slot *s = h->slots; s; s = s->next) {
		unsigned int n = s->peer->n;

		if (!slot_evictable(s))
			continue;
		if (n > best_n || (n == best_n && best && s->since_ms < best->since_ms)) {
			best = s;
			best_n = n;
		}
	}
	return best && best_n >= mine + 2 ? best : NULL;
}

static void slot_start(struct rw_http *h, struct MHD_Connection *c, void **socket_context)
{
	const union MHD_ConnectionInfo *fd =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ca =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	uint32_t addr = 0;
	struct slot *s = calloc(1, sizeof(*s));
	struct peer *peer = NULL;

	if (ca && ca->client_addr && ca->client_addr->sa_family == AF_INET)
		addr = ((const struct sockaddr_in *)ca->client_addr)->sin_addr.s_addr;
	pthread_mutex_lock(&h->lock);
	for (struct slot *o = h->slots; o && !peer; o = o->next)
		if (o->peer->addr == addr)
			peer = o->peer;
	if (!peer && s) {
		peer = calloc(1, sizeof(*peer));
		if (peer)
			peer->addr = addr;
	}
	if (!s || !peer || !fd) {
		/* No slot, no connection: closed as one over the limits is. */
		pthread_mutex_unlock(&h->lock);
		if (fd)
			(void)shutdown(fd->connect_fd, SHUT_RDWR);
		if (peer && !peer->refs)
			free(peer);
		free(s);
		return;
	}
	s->peer = peer;
	s->fd = fd->connect_fd;
	s->since_ms = now_ms();
	s->state = SLOT_HEADERS;
	peer->refs++;
	peer->n++;
	s->next = h->slots;
	if (h->slots)
		h->slots->prev = s;
	h->slots = s;
	h->counted++;
	if (h->counted > h->limit) {
		struct slot *victim = slot_victim(h, peer->n - 1);

		slot_close(h, victim ? victim : s,
			   victim ? "all connections taken: its address holds the most"
				  : "all connections taken, fairly");
	}
	pthread_mutex_unlock(&h->lock);
	*socket_context = s;
}

static void slot_end(struct rw_http *h, struct slot *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&h->lock);
	if (s->state != SLOT_CLOSING) {
		s->peer->n--;
		h->counted--;
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		h->slots = s->next;
	if (s->next)
		s->next->prev = s->prev;
	if (!--s->peer->refs)
		free(s->peer);
	pthread_mutex_unlock(&h->lock);
	free(s);
}

/* A state change on the connection's own thread; a slot being closed stays closing. */
static void slot_mark(struct rw_http *h, struct MHD_Connection *c, enum slot_state state)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct slot *s = ci ? ci->socket_context : NULL;

	if (!s)
		return;
	pthread_mutex_lock(&h->lock);
	if (s->state != SLOT_CLOSING) {
		s->state = state;
		if (state == SLOT_HEADERS)
			s->since_ms = now_ms();
	}
	pthread_mutex_unlock(&h->lock);
}

/* The header deadline, each second, until rw_http_stop(). */
static void *slots_reaper(void *arg)
{
	struct rw_http *h = arg;

	pthread_mutex_lock(&h->lock);
	while (!h->stopping) {
		struct timespec until;
		uint64_t now = now_ms();

		for (struct slot *s = h->slots; s; s = s->next)
			if (s->state == SLOT_HEADERS &&
			    now - s->since_ms >= HEADER_DEADLINE_S * 1000ull)
				slot_close(h, s, "no request headers within the deadline");
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec++;
		pthread_cond_timedwait(&h->wake, &h->lock, &until);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/* ---- routing ---- */

/* Whether GOT (LEN bytes) is the token, in time that depends on the token's length only. */
static bool token_eq(const struct rw_http *h, const char *got, size_t len)
{
	size_t want = strlen(h->token);
	unsigned char diff = 0;

	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)h->token[i] ^ (unsigned char)(i < len ? got[i] : 0);
	return diff == 0 && len == want;
}

/* A cookie value percent-decoded (the page stores it with encodeURIComponent) into OUT;
 * its length, or -1 when it is malformed or too long.
 */
static ssize_t cookie_decode(const char *in, char *out, size_t cap)
{
	size_t n = 0;

	for (; *in; in++) {
		unsigned int hex;

		if (n + 1 >= cap)
			return -1;
		if (*in != '%') {
			out[n++] = *in;
			continue;
		}
		if (sscanf(in + 1, "%2x", &hex) != 1 || !isxdigit((unsigned char)in[1]) ||
		    !isxdigit((unsigned char)in[2]))
			return -1;
		out[n++] = (char)hex;
		in += 2;
	}
	out[n] = '\0';
	return (ssize_t)n;
}

/* The token as `Authorization: Bearer TOKEN`, or as the cookie the page sets (an EventSource
 * cannot send headers; the token never goes in the URL, where logs and history keep it).
 */
static bool token_ok(const struct rw_http *h, struct MHD_Connection *c)
{
	const char *auth =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, RW_HTTP_COOKIE);
	char buf[TOKEN_MAX];
	ssize_t n;

	if (!h->token[0])
		return true;
	if (auth && !strncmp(auth, "Bearer ", 7) && token_eq(h, auth + 7, strlen(auth + 7)))
		return true;
	if (!cookie || (n = cookie_decode(cookie, buf, sizeof(buf))) < 0)
		return false;
	return token_eq(h, buf, (size_t)n);
}

/* Each connection has a thread of its own (MHD_USE_THREAD_PER_CONNECTION). On Linux the nice value
 * is a thread's own (setpriority(2) with a thread id), so a query thread can give way to the
 * agent's loop: at nice 10 a thread weighs a tenth of the loop in the scheduler's share, and 200
 * clients building /api/graph on a node of two CPUs do not take the CPU the ring drain, the
 * control socket and netlink need.
 */
#define QUERY_THREAD_NICE 10

static void query_thread_yields(void)
{
	static __thread bool done;

	if (!done) {
		done = true;
		(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), QUERY_THREAD_NICE);
	}
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **state)
{
	struct rw_http *h = cls;
	struct rw_evfilter f;
	char err[320];

	query_thread_yields();
	/* The headers are in: the request's answer (a stream too) gets the normal timeout. */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S);
	slot_mark(h, c, SLOT_ANSWERING);
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return send_json_error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				       "read-only: GET and HEAD only");
	/* Probes answer without the token: they tell no more than whether the node enforces. */
	if (!strcmp(url, "/healthz"))
		return send_text(c, MHD_HTTP_OK, "text/plain", "ok\n", 3, MHD_RESPMEM_PERSISTENT);
	if (!strcmp(url, "/readyz")) {
		char body[256];
		bool ready;

		pthread_mutex_lock(&h->feed->lock);
		ready = h->feed->ready;
		snprintf(body, sizeof(body), "%s", h->feed->ready_text);
		pthread_mutex_unlock(&h->feed->lock);
		return send_text(c, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
				 "text/plain", body, strlen(body), MHD_RESPMEM_MUST_COPY);
	}
	if (h->probes_only)
		return send_json_error(
			c, MHD_HTTP_NOT_FOUND,
			"this listener (--probe-listen) serves /healthz and /readyz only");
	/* The page holds no data (it fetches /api/... with the token): it loads without one, so
	 * that it can ask for it.
	 */
	if (!strcmp(url, "/") || !strcmp(url, "/index.html"))
		return send_text(c, MHD_HTTP_OK, "text/html; charset=utf-8",
				 (const char *)rw_view_page, rw_view_page_len,
				 MHD_RESPMEM_PERSISTENT);
	if (!token_ok(h, c))
		return send_json_error(
			c, MHD_HTTP_UNAUTHORIZED,
			"missing or wrong token (Authorization: Bearer TOKEN, or the "
			"page's " RW_HTTP_COOKIE " cookie)");
	slot_mark(h, c, SLOT_TRUSTED);
	if (!strcmp(url, "/metrics") || !strcmp(url, "/api/requests")) {
		bool metrics = url[1] == 'm';
		char *(*fn)(void *) = metrics ? h->ops.metrics : h->ops.requests;
		char *text;

		if (!fn)
			return send_json_error(c, MHD_HTTP_NOT_FOUND, "not served here");
		text = fn(h->ops.data);
		if (!text)
			return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
					       "cannot build it");
		return send_text(c, MHD_HTTP_OK,
				 metrics ? "text/plain; version=0.0.4" : "application/json", text,
				 strlen(text), MHD_RESPMEM_MUST_FREE);
	}
	if (!strcmp(url, "/api/status")) {
		char *text = NULL;

		pthread_mutex_lock(&h->feed->lock);
		if (h->feed->status)
			text = strdup(h->feed->status);
		pthread_mutex_unlock(&h->feed->lock);
		if (!text)
			return send_json_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no status yet");
		if (h->ops.status) {
			char *doc = h->ops.status(h->ops.data, text);

			free(text);
			if (!doc)
				return send_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
						       "cannot build it");
			text = doc;
		}
		return send_text(c, MHD_HTTP_OK, "application/json", text, strlen(text),
				 MHD_RESPMEM_MUST_FREE);
	}
	if (!strcmp(url, "/api/events") || !strcmp(url, "/api/events/stream") ||
	    !strcmp(url, "/api/graph")) {
		if (parse_query(c, &f, err, sizeof(err)))
			return send_json_error(c, MHD_HTTP_BAD_REQUEST, err);
		if (!strcmp(url, "/api/events"))
			return answer_events(h, c, &f);
		if (!strcmp(url, "/api/events/stream"))
			return answer_stream(h, c, &f);
		{
			json_t *g;

			pthread_mutex_lock(&h->feed->lock);
			g = rw_graph_json(&h->feed->aggs, &f);
			pthread_mutex_unlock(&h->feed->lock);
			return send_json(c, g);
		}
	}
	snprintf(err, sizeof(err),
		 "no such path; valid: /, /healthz, /readyz, /metrics, "
		 "/api/status, /api/events, /api/events/stream, /api/graph, /api/requests");
	return send_json_error(c, MHD_HTTP_NOT_FOUND, err);
}

/* ---- start and stop ---- */

/* The header timeout: a connection starts with HEADER_TIMEOUT_S, answer() raises it to
 * CONN_TIMEOUT_S once a request's headers are in, and a finished request drops it back for the
 * next one on the same connection. MHD's timeouts are inactivity timeouts: a client that sends
 * a byte every few seconds is closed by the slots' deadline instead (HEADER_DEADLINE_S).
 */
static void header_timeout(struct MHD_Connection *c)
{
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)HEADER_TIMEOUT_S);
}

static void conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	struct rw_http *h = cls;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		header_timeout(c);
		slot_start(h, c, socket_context);
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		slot_end(h, *socket_context);
		*socket_context = NULL;
	}
}

static void request_done(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode code)
{
	(void)state;
	if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
		header_timeout(c);
		slot_mark(cls, c, SLOT_HEADERS);
	}
}

/* MHD's own messages (a client that hung up mid-request, ...) are about clients, not about the
 * node: debug level (-v), through the agent's logger.
 */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	if (rw_log_verbosity < RW_LOG_DEBUG)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	rw_debug("http: %s", msg);
}

/* ADDR:PORT (":PORT" and "PORT": 127.0.0.1), and the token rule. */
static int parse_listen(const struct rw_http_opts *o, struct sockaddr_in *sa, char *token,
			size_t token_len, char *err, size_t errlen)
{
	const char *colon = strrchr(o->listen, ':'), *port_s = colon ? colon + 1 : o->listen;
	char host[64] = "127.0.0.1", *end;
	unsigned long port;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (colon && colon != o->listen) {
		if ((size_t)(colon - o->listen) >= sizeof(host)) {
			snprintf(err, errlen, "%s '%s': expected ADDR:PORT", o->flag, o->listen);
			return -EINVAL;
		}
		memcpy(host, o->listen, colon - o->listen);
		host[colon - o->listen] = '\0';
	}
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (!*port_s || *end || errno || port > 65535 ||
	    inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
		snprintf(err, errlen, "%s '%s': expected IPV4:PORT (or PORT for 127.0.0.1:PORT)",
			 o->flag, o->listen);
		return -EINVAL;
	}
	sa->sin_port = htons(port);
	if (!o->probes_only && o->token_file)
		return rw_read_token("--http-token-file", o->token_file, 16, token, token_len - 1,
				     err, errlen);
	/* No token: loopback only. */
	if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127) {
		snprintf(err, errlen, "%s %s: %s", o->flag, o->listen,
			 o->probes_only
				 ? "the probes answer without a token: a loopback address only"
				 : "an address other than loopback needs --http-token-file "
				   "(clients then send Authorization: Bearer TOKEN)");
		return -EINVAL;
	}
	return 0;
}

int rw_http_check(const struct rw_http_opts *o, char *err, size_t errlen)
{
	struct sockaddr_in sa;
	char token[TOKEN_MAX];

	return parse_listen(o, &sa, token, sizeof(token), err, errlen);
}

struct rw_http *rw_http_start(const struct rw_http_opts *o, struct rw_feed *feed,
			      const struct rw_http_ops *ops, char *err, size_t errlen, bool *usage)
{
	struct sockaddr_in sa;
	struct rw_http *h;
	const union MHD_DaemonInfo *info;

	*usage = true;
	h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->feed = feed;
	h->probes_only = o->probes_only;
	h->limit = o->max_connections ? o->max_connections : (unsigned int)CONN_DEFAULT;
	pthread_mutex_init(&h->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* slots_reaper's tick */
		pthread_cond_init(&h->wake, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (ops)
		h->ops = *ops;
	if (parse_listen(o, &sa, h->token, sizeof(h->token), err, errlen))
		goto fail;
	*usage = false;
	/* MHD's total is above ours by SLOTS_SPARE: room for the connections the slots have shut
	 * down and MHD has not yet closed, so that a new one still reaches slot_start(). Its
	 * per-address limit stays the hard cap, at accept.
	 */
	h->daemon = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, answer, h, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT,
		h->limit + SLOTS_SPARE, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		o->per_ip_limit ? o->per_ip_limit : (unsigned int)PER_IP_DEFAULT,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S,
		MHD_OPTION_NOTIFY_CONNECTION, conn_notify, h, MHD_OPTION_NOTIFY_COMPLETED,
		request_done, h, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)REQUEST_MEMORY,
		MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024), MHD_OPTION_EXTERNAL_LOGGER,
		mhd_log, NULL, MHD_OPTION_END);
	if (!h->daemon) {
		snprintf(err, errlen, "%s %s: cannot listen (address in use or not on this host?)",
			 o->flag, o->listen);
		goto fail;
	}
	info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info ? info->port : ntohs(sa.sin_port);
	errno = pthread_create(&h->reaper, NULL, slots_reaper, h);
	if (errno) {
		snprintf(err, errlen, "%s %s: cannot start the header deadline's thread: %s",
			 o->flag, o->listen, strerror(errno));
		MHD_stop_daemon(h->daemon);
		goto fail;
	}
	h->reaper_started = true;
	return h;
fail:
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return NULL;
}

unsigned int rw_http_port(const struct rw_http *h)
{
	return h->port;
}

void rw_http_stop(struct rw_http *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->feed->lock);
	h->feed->closing = true;
	pthread_cond_broadcast(&h->feed->cond);
	pthread_mutex_unlock(&h->feed->lock);
	if (h->reaper_started)
		rw_thread_stop(h->reaper, &h->lock, &h->wake, &h->stopping);
	MHD_stop_daemon(h->daemon); /* closes every connection: the slots are freed */
	pthread_cond_destroy(&h->wake);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
