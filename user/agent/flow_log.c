// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* flow_log.c: the flow log. Each line is the event's JSON (eventfmt.c) with "type" ("drop" or
 * "flow") and "node" added, written by one write(2) of the whole line to a descriptor opened
 * O_APPEND | O_NONBLOCK, so that lines are never torn and a reader that does not keep up (a
 * full pipe on stdout) costs lines, counted as lost, never the loop's time. A token bucket
 * per sandbox (its veth and run) bounds its lines; the ones over it are counted and reported
 * by one {"type":"suppressed"} line, when that sandbox's next line passes or on the tick once
 * it is quiet, at most one a second. FILE is renamed FILE.1 before a line would take it past
 * max_bytes, so the log holds at most twice that on disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>

#include "eventfmt.h"
#include "flow_log.h"
#include "log.h"
#include "util.h"

#define NS_PER_SEC	 1000000000LL
#define SUPPRESSED_EVERY NS_PER_SEC	   /* a sandbox's suppressed lines, at most one a second */
#define SLOT_IDLE_NS	 (60 * NS_PER_SEC) /* a slot this quiet may be taken back */

struct flow_slot {
	int ifindex; /* 0: free */
	char run[RW_RUN_ID_LEN];
	int64_t tat;		       /* its bucket (rw_flow_bucket_take) */
	int64_t last_ns;	       /* its last event */
	int64_t last_supp_ns;	       /* its last suppressed line */
	unsigned long long suppressed; /* lines not written since then */
};

struct rw_flow_log {
	struct rw_flow_log_opts o;
	char node[256];
	char *rotated; /* FILE.1 */
	int fd;
	bool stdout_fd;
	unsigned long long size; /* FILE's, as we have written it */
	struct rw_flow_log_stats st;
	struct flow_slot slots[RW_FLOW_LOG_SLOTS];
};

bool rw_flow_bucket_take(int64_t *tat, unsigned long long rate, unsigned long long burst,
			 int64_t now_ns)
{
	int64_t t, next;

	if (!rate)
		return true;
	t = NS_PER_SEC / (int64_t)rate; /* the time one line's token takes to come back */
	next = (*tat > now_ns ? *tat : now_ns) + t;
	if (next - now_ns > t * (int64_t)(burst ? burst : 1))
		return false;
	*tat = next;
	return true;
}

static int open_file(struct rw_flow_log *fl, char *err, size_t errlen)
{
	struct stat sb;

	fl->fd = open(fl->o.path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0640);
	if (fl->fd < 0)
		return rw_fail_msg(err, errlen, -errno, "--flow-log %s: %s", fl->o.path,
				   strerror(errno));
	fl->size = fstat(fl->fd, &sb) ? 0 : (unsigned long long)sb.st_size;
	return 0;
}

struct rw_flow_log *rw_flow_log_open(const struct rw_flow_log_opts *o, const char *node, char *err,
				     size_t errlen)
{
	struct rw_flow_log *fl = calloc(1, sizeof(*fl));

	if (!fl) {
		rw_fail_msg(err, errlen, -ENOMEM, "--flow-log: out of memory");
		return NULL;
	}
	fl->o = *o;
	snprintf(fl->node, sizeof(fl->node), "%s", node ? node : "");
	if (!strcmp(o->path, "-")) {
		fl->stdout_fd = true;
		fl->fd = STDOUT_FILENO;
		fcntl(fl->fd, F_SETFL, fcntl(fl->fd, F_GETFL) | O_NONBLOCK);
		return fl;
	}
	if (asprintf(&fl->rotated, "%s.1", o->path) < 0) {
		fl->rotated = NULL;
		rw_fail_msg(err, errlen, -ENOMEM, "--flow-log: out of memory");
	} else if (!open_file(fl, err, errlen)) {
		return fl;
	}
	free(fl->rotated);
	free(fl);
	return NULL;
}

void rw_flow_log_reopen(struct rw_flow_log *fl)
{
	char err[300];

	if (!fl || fl->stdout_fd)
		return;
	if (fl->fd >= 0)
		close(fl->fd);
	if (open_file(fl, err, sizeof(err)))
		rw_err("%s; flow log lines are lost until the next SIGHUP", err);
	else
		rw_info("flow log %s reopened", fl->o.path);
}

static void rotate(struct rw_flow_log *fl)
{
	char err[300];

	if (rename(fl->o.path, fl->rotated))
		rw_warn("--flow-log: rename %s to %s: %s", fl->o.path, fl->rotated,
			strerror(errno));
	close(fl->fd);
	fl->st.rotations++;
	if (open_file(fl, err, sizeof(err)))
		rw_err("%s; flow log lines are lost until the next SIGHUP", err);
}

/* The object as one line, by one write(2); it takes o's reference. */
static void write_line(struct rw_flow_log *fl, json_t *o)
{
	char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	size_t len;
	ssize_t n;

	json_decref(o);
	if (!line) {
		fl->st.lost++;
		return;
	}
	len = strlen(line);
	line[len++] = '\n'; /* json_dumps leaves room: we overwrite its NUL */
	if (!fl->stdout_fd && fl->o.max_bytes && fl->size && fl->size + len > fl->o.max_bytes)
		rotate(fl);
	n = fl->fd >= 0 ? write(fl->fd, line, len) : -1;
	if (n == (ssize_t)len) {
		fl->st.written++;
		fl->size += len;
	} else {
		/* EAGAIN (the reader is behind), a full disk, no file: the line is lost, not
		 * waited for. A short write cannot happen for a line under PIPE_BUF on a pipe.
		 */
		fl->st.lost++;
		if (n > 0)
			fl->size += n;
	}
	free(line);
}

static void write_suppressed(struct rw_flow_log *fl, struct flow_slot *s, int64_t now_ns,
			     int64_t mono_to_real)
{
	char when[40];

	rw_format_time(now_ns + mono_to_real, when, sizeof(when));
	write_line(fl, json_pack("{s:s, s:s, s:s, s:i, s:I, s:s}", "type", "suppressed", "run",
				 s->run, "node", fl->node, "ifindex", s->ifindex, "count",
				 (json_int_t)s->suppressed, "time", when));
	s->suppressed = 0;
	s->last_supp_ns = now_ns;
}

static struct flow_slot *slot_of(struct rw_flow_log *fl, const struct rw_event *ev, int64_t now)
{
	size_t h = (size_t)ev->ifindex * 2654435761u;

	for (const char *c = ev->run_id; *c; c++)
		h = h * 31 + (unsigned char)*c;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < RW_FLOW_LOG_SLOTS; i++) {
			struct flow_slot *s = &fl->slots[(h + i) % RW_FLOW_LOG_SLOTS];

			if (s->ifindex == (int)ev->ifindex && !strcmp(s->run, ev->run_id))
				return s;
			if (!s->ifindex) {
				*s = (struct flow_slot){.ifindex = (int)ev->ifindex};
				snprintf(s->run, sizeof(s->run), "%s", ev->run_id);
				return s;
			}
		}
		/* All taken: free the quiet ones (their pending count written first). */
		for (size_t i = 0; i < RW_FLOW_LOG_SLOTS; i++) {
			struct flow_slot *s = &fl->slots[i];

			if (now - s->last_ns < SLOT_IDLE_NS)
				continue;
			if (s->suppressed)
				write_suppressed(fl, s, now, rw_mono_to_real_offset());
			s->ifindex = 0;
		}
	}
	return NULL;
}

void rw_flow_log_event(struct rw_flow_log *fl, const struct rw_event *ev, const struct rw_policy *p,
		       int64_t mono_to_real)
{
	rw_flow_log_event_staged(fl, ev, p, mono_to_real, NULL);
}

void rw_flow_log_event_staged(struct rw_flow_log *fl, const struct rw_event *ev,
			      const struct rw_policy *p, int64_t mono_to_real, json_t *staged)
{
	int64_t now = rw_now_mono_ns();
	struct flow_slot *s;
	json_t *o;

	if (!fl || (ev->verdict == RW_VERDICT_ALLOW && !fl->o.flows))
		return;
	s = slot_of(fl, ev, now);
	if (!s) {
		fl->st.lost++;
		return;
	}
	s->last_ns = now;
	if (!rw_flow_bucket_take(&s->tat, fl->o.rate, fl->o.burst, now)) {
		s->suppressed++;
		fl->st.suppressed++;
		return;
	}
	if (s->suppressed && now - s->last_supp_ns >= SUPPRESSED_EVERY)
		write_suppressed(fl, s, now, mono_to_real);
	o = rw_event_json(ev, p, mono_to_real);
	if (o) {
		json_object_set_new(o, "type",
				    json_string(ev->verdict == RW_VERDICT_ALLOW ? "flow" : "drop"));
		json_object_set_new(o, "node", json_string(fl->node));
		if (staged)
			json_object_set(o, "staged", staged);
	}
	write_line(fl, o);
}

void rw_flow_log_tick(struct rw_flow_log *fl)
{
	int64_t now = rw_now_mono_ns(), off;

	if (!fl)
		return;
	off = rw_mono_to_real_offset();
	for (size_t i = 0; i < RW_FLOW_LOG_SLOTS; i++) {
		struct flow_slot *s = &fl->slots[i];

		if (s->ifindex && s->suppressed && now - s->last_supp_ns >= SUPPRESSED_EVERY)
			write_suppressed(fl, s, now, off);
	}
}

void rw_flow_log_stats(const struct rw_flow_log *fl, struct rw_flow_log_stats *st)
{
	*st = fl ? fl->st : (struct rw_flow_log_stats){};
}

void rw_flow_log_close(struct rw_flow_log *fl)
{
	int64_t now = rw_now_mono_ns(), off = rw_mono_to_real_offset();

	if (!fl)
		return;
	for (size_t i = 0; i < RW_FLOW_LOG_SLOTS; i++)
		if (fl->slots[i].ifindex && fl->slots[i].suppressed)
			write_suppressed(fl, &fl->slots[i], now, off);
	rw_info("flow log: %llu lines written, %llu suppressed, %llu lost, %llu rotations",
		fl->st.written, fl->st.suppressed, fl->st.lost, fl->st.rotations);
	if (!fl->stdout_fd && fl->fd >= 0)
		close(fl->fd);
	free(fl->rotated);
	free(fl);
}
