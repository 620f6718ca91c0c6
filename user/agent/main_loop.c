// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* agent.c: `runwall agent`, the node agent. It loads the programs (adopting the pinned maps and
 * links of a previous agent), attaches them to every sandbox veth, binds pod IPs to veths from
 * the CNI's /32 routes, applies policy snapshots (file, control socket), and fans the ring
 * buffer's verdict events out to the socket's subscribers. It never detaches on exit: the
 * kernel keeps enforcing what was last applied.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libgen.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <jansson.h>

#include "apply.h"
#include "attach.h"
#include "commands.h"
#include "ctl.h"
#include "datapath.h"
#include "eventfmt.h"
#include "health.h"
#include "log.h"
#include "netlink.h"
#include "policy.h"
#include "reasons.h"

#define TICK_MS			50	/* ring buffer drain and subscriber flush period */
#define MAX_SUBS		64
#define SUB_BUF_MAX		(1u << 20)	/* per subscriber; beyond it events are skipped */
#define REQUEST_TIMEOUT_MS	2000

struct subscriber {
	int fd;
	char *buf;
	size_t len;
	unsigned long long delivered;
	unsigned long long skipped;
};

struct run_state {
	char id[RW_RUN_ID_LEN];
	__u32 gen;
	int64_t since;		/* realtime ns at which this generation became enforced */
};

struct sandbox {
	int ifindex;
	char ifname[IF_NAMESIZE];
	__be32 pod;		/* bound pod IP, 0 when none */
	enum rw_attach_mode mode[RW_DIR_COUNT];
	bool attached[RW_DIR_COUNT];
	bool seen;		/* mark for a full resync */
};

struct agent {
	struct rw_datapath dp;
	const char *policy_path;
	const char *ifprefix;
	enum rw_attach_mode attach_mode;
	int resync_sec;
	const char *health_addr;

	struct rw_policy policy;	/* the snapshot in force, when this agent knows it */
	bool have_policy;
	char *policy_text;		/* its text, for `runwall explain` to name rules */
	size_t policy_text_len;
	char policy_source[256];
	char *policy_bytes;		/* the file's last content, to ignore no-op rewrites */
	size_t policy_len;
	struct rw_apply_result last_apply;
	int64_t ready_since, applied_at;
	char last_error[800];
	struct run_state *runs;
	size_t n_runs;

	struct sandbox *sbx;
	size_t n_sbx;
	bool links_dirty;		/* netlink overran or failed: dump everything again */

	int epfd, listen_fd, inotify_fd, tick_fd, resync_fd, sig_fd;
	struct rw_nl_sub *nl;
	struct ring_buffer *ring;
	struct subscriber subs[MAX_SUBS];
	int n_subs;
	unsigned long long delivered_gone;	/* of subscribers that left */
	unsigned long long skipped_gone;
	int64_t mono_to_real;
	bool reload_pending;
	bool stop;
};

static int64_t now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *ip_str(__be32 ip, char *buf)
{
	return inet_ntop(AF_INET, &ip, buf, INET_ADDRSTRLEN);
}

/* ---- sandboxes: attach, bind, forget ---- */

static struct sandbox *sbx_find(struct agent *a, int ifindex)
{
	for (size_t i = 0; i < a->n_sbx; i++)
		if (a->sbx[i].ifindex == ifindex)
			return &a->sbx[i];
	return NULL;
}

static void sbx_attach(struct agent *a, struct sandbox *s)
{
	for (int d = 0; d < RW_DIR_COUNT; d++) {
		int err = rw_attach(a->dp.pin_dir, s->ifindex, d, a->dp.prog_fd[d], a->attach_mode,
				    &s->mode[d]);

		if (err) {
			rw_err("%s: attaching the %s program: %s", s->ifname, rw_dir_name(d),
			       strerror(-err));
			snprintf(a->last_error, sizeof(a->last_error), "%s: attach %s: %s",
				 s->ifname, rw_dir_name(d), strerror(-err));
			s->attached[d] = false;
			continue;
		}
		s->attached[d] = true;
	}
}

static struct sandbox *sbx_add(struct agent *a, int ifindex, const char *name)
{
	struct sandbox *s = sbx_find(a, ifindex), *grown;

	if (s) {
		if (strcmp(s->ifname, name)) {
			rw_info("%s: renamed to %s", s->ifname, name);
			snprintf(s->ifname, sizeof(s->ifname), "%s", name);
		}
		return s;
	}
	grown = realloc(a->sbx, (a->n_sbx + 1) * sizeof(*a->sbx));
	if (!grown)
		return NULL;
	a->sbx = grown;
	s = &a->sbx[a->n_sbx++];
	memset(s, 0, sizeof(*s));
	s->ifindex = ifindex;
	snprintf(s->ifname, sizeof(s->ifname), "%s", name);
	/* Programs first, before the pod is known: an unbound veth is deny-all. */
	sbx_attach(a, s);
	rw_info("%s (ifindex %d): attached (%s, %s), deny-all until its pod is known", s->ifname,
		ifindex, rw_attach_mode_str(s->mode[RW_DIR_EGRESS]),
		rw_attach_mode_str(s->mode[RW_DIR_INGRESS]));
	return s;
}

static void sbx_bind(struct agent *a, struct sandbox *s, __be32 pod)
{
	char ip[INET_ADDRSTRLEN];
	int err;

	if (s->pod == pod)
		return;
	if (s->pod && pod)
		rw_warn("%s: pod %s replaced by %s", s->ifname, ip_str(s->pod, ip),
			ip_str(pod, (char[INET_ADDRSTRLEN]){}));
	err = pod ? rw_endpoint_bind(&a->dp, s->ifindex, pod) :
		    rw_endpoint_unbind(&a->dp, s->ifindex);
	if (err) {
		rw_err("%s: %s: %s", s->ifname, pod ? "bind" : "unbind", strerror(-err));
		return;
	}
	if (pod)
		rw_info("%s: bound to pod %s", s->ifname, ip_str(pod, ip));
	else
		rw_info("%s: pod %s gone, deny-all", s->ifname, ip_str(s->pod, ip));
	s->pod = pod;
}

/* The interface went away: its tcx links died with it; forget the pins, the binding and the
 * veth's flows so that nothing carries over to whatever reuses the ifindex.
 */
static void sbx_remove(struct agent *a, int ifindex)
{
	struct sandbox *s = sbx_find(a, ifindex);

	for (int d = 0; d < RW_DIR_COUNT; d++)
		rw_detach(a->dp.pin_dir, ifindex, d);
	rw_endpoint_unbind(&a->dp, ifindex);
	if (!s)
		return;
	rw_info("%s (ifindex %d): gone", s->ifname, ifindex);
	*s = a->sbx[--a->n_sbx];
}

/* ---- netlink ---- */

static int on_link(bool add, const struct rw_nl_link *l, void *data)
{
	struct agent *a = data;

	if (!add) {
		if (sbx_find(a, l->ifindex))
			sbx_remove(a, l->ifindex);
		return 0;
	}
	if (!rw_ifname_match(l->name, a->ifprefix)) {
		/* Renamed away from the prefix: no longer ours. */
		if (sbx_find(a, l->ifindex))
			sbx_remove(a, l->ifindex);
		return 0;
	}
	if (!sbx_add(a, l->ifindex, l->name))
		return -ENOMEM;
	a->links_dirty = true;	/* routes may have come before the link */
	return 0;
}

static int on_route(bool add, const struct rw_nl_route *r, void *data)
{
	struct agent *a = data;
	struct sandbox *s;

	if (r->prefixlen != 32)
		return 0;
	s = sbx_find(a, r->oif);
	if (!s)
		return 0;
	if (add)
		sbx_bind(a, s, r->dst);
	else if (s->pod == r->dst)
		sbx_bind(a, s, 0);
	return 0;
}

static int dump_link(const struct rw_nl_link *l, void *data)
{
	struct agent *a = data;
	struct sandbox *s;

	if (!rw_ifname_match(l->name, a->ifprefix))
		return 0;
	s = sbx_add(a, l->ifindex, l->name);
	if (!s)
		return -ENOMEM;
	s->seen = true;
	return 0;
}

struct route_want {
	int ifindex;
	__be32 pod;
};

struct route_dump {
	struct route_want *w;
	size_t n;
};

static int dump_route(const struct rw_nl_route *r, void *data)
{
	struct route_dump *rd = data;
	struct route_want *grown;

	grown = realloc(rd->w, (rd->n + 1) * sizeof(*rd->w));
	if (!grown)
		return -ENOMEM;
	rd->w = grown;
	rd->w[rd->n].ifindex = r->oif;
	rd->w[rd->n].pod = r->dst;
	rd->n++;
	return 0;
}

/* Remove runwall's link pins of interfaces that no longer exist (an agent that was down when
 * a veth went away never saw it go).
 */
static void prune_link_pins(struct agent *a)
{
	char path[PATH_MAX + 8];
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/%s", a->dp.pin_dir, RW_LINKS_DIR);
	dir = opendir(path);
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		int ifindex;
		char dirname[16];

		if (sscanf(de->d_name, "tcx_%d_%15[a-z]", &ifindex, dirname) != 2 &&
		    sscanf(de->d_name, "tc_%d_%15[a-z]", &ifindex, dirname) != 2)
			continue;
		if (sbx_find(a, ifindex))
			continue;
		rw_info("links/%s: interface %d is gone, removing runwall's pin", de->d_name,
			ifindex);
		rw_detach(a->dp.pin_dir, ifindex, strcmp(dirname, "egress") ? RW_DIR_INGRESS :
								      RW_DIR_EGRESS);
	}
	closedir(dir);
}

/* Make the kernel's picture match the system's: every prefixed interface attached (and
 * runwall first on each hook), every veth bound to the pod its /32 route names, nothing bound
 * that is not.
 */
static int full_resync(struct agent *a)
{
	struct route_dump rd = {};
	__u32 key, *prev = NULL;
	int err;

	for (size_t i = 0; i < a->n_sbx; i++)
		a->sbx[i].seen = false;
	for (int tries = 0; (err = rw_nl_dump_links(dump_link, a)) == -EAGAIN && tries < 5; tries++)
		;
	if (err) {
		rw_err("netlink: dumping links: %s", strerror(-err));
		return err;
	}
	for (size_t i = 0; i < a->n_sbx;) {
		if (!a->sbx[i].seen) {
			sbx_remove(a, a->sbx[i].ifindex);
			continue;
		}
		i++;
	}
	for (int tries = 0; (err = rw_nl_dump_routes(dump_route, &rd)) == -EAGAIN && tries < 5;
	     tries++) {
		free(rd.w);
		rd = (struct route_dump){};
	}
	if (err) {
		free(rd.w);
		rw_err("netlink: dumping routes: %s", strerror(-err));
		return err;
	}
	for (size_t i = 0; i < a->n_sbx; i++) {
		struct sandbox *s = &a->sbx[i];
		struct rw_hook_info hi;
		__be32 want = 0;

		for (size_t r = 0; r < rd.n; r++)
			if (rd.w[r].ifindex == s->ifindex) {
				want = rd.w[r].pod;
				break;
			}
		sbx_bind(a, s, want);
		/* Check the order on the hooks; rw_attach() puts runwall back in front. */
		for (int d = 0; d < RW_DIR_COUNT; d++) {
			memset(&hi, 0, sizeof(hi));
			if (rw_hook_query_pinned(a->dp.pin_dir, s->ifindex, d, &hi) == 0 &&
			    hi.found && hi.first)
				continue;
			rw_warn("%s: runwall %s on the %s hook; attaching again", s->ifname,
				hi.found ? "was not first" : "was missing", rw_dir_name(d));
			sbx_attach(a, s);
			break;
		}
	}
	free(rd.w);

	/* Bindings of interfaces that are not sandboxes (any more). */
	while (bpf_map_get_next_key(a->dp.map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		if (!sbx_find(a, key)) {
			rw_endpoint_unbind(&a->dp, key);
			prev = NULL;	/* the walk restarts after a delete */
			continue;
		}
		prev = &key;
	}
	prune_link_pins(a);
	a->links_dirty = false;
	return 0;
}

/* ---- policy ---- */

static void runs_update(struct agent *a)
{
	struct run_state *next = calloc(a->policy.n_runs ? a->policy.n_runs : 1, sizeof(*next));
	int64_t now = now_real();

	if (!next)
		return;
	for (size_t r = 0; r < a->policy.n_runs; r++) {
		struct rw_pod pod;

		snprintf(next[r].id, sizeof(next[r].id), "%s", a->policy.runs[r].id);
		next[r].gen = a->last_apply.revision;
		if (a->policy.runs[r].n_pods &&
		    rw_live_pod(&a->dp, a->policy.runs[r].pods[0], &pod) == 0)
			next[r].gen = pod.run_gen;
		next[r].since = now;
		for (size_t o = 0; o < a->n_runs; o++)
			if (!strcmp(a->runs[o].id, next[r].id) && a->runs[o].gen == next[r].gen)
				next[r].since = a->runs[o].since;
	}
	free(a->runs);
	a->runs = next;
	a->n_runs = a->policy.n_runs;
}

static void keep_text(struct agent *a, const char *buf, size_t len, const char *source)
{
	char *copy = malloc(len + 1);

	if (!copy)
		return;
	memcpy(copy, buf, len);
	copy[len] = '\0';
	free(a->policy_text);
	a->policy_text = copy;
	a->policy_text_len = len;
	snprintf(a->policy_source, sizeof(a->policy_source), "%s", source);
}

/* Parse and apply a snapshot. On refusal nothing changes and *reply says why. */
static int agent_apply(struct agent *a, const char *buf, size_t len, const char *source,
		       json_t **reply)
{
	struct rw_policy_error perr = {};
	struct rw_apply_result res;
	struct rw_policy next;
	struct rw_config cfg = {};
	char err[600], *diff = NULL;
	json_t *changes;
	int ret, n;

	rw_config_read(&a->dp, &cfg);
	ret = rw_policy_parse_newer(buf, len, source,
				    RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0,
				    &next, &perr);
	if (ret) {
		rw_warn("refused snapshot: %s", perr.text);
		snprintf(a->last_error, sizeof(a->last_error), "%s", perr.text);
		*reply = json_pack("{s:b, s:s, s:i, s:i}", "ok", 0, "error", perr.text, "line",
				   perr.line, "column", perr.column);
		return ret;
	}
	ret = rw_apply(&a->dp, a->have_policy ? &a->policy : NULL, &next, &res, err, sizeof(err));
	if (ret) {
		char msg[700];

		snprintf(msg, sizeof(msg), "%s: %s", source, err);
		rw_warn("refused snapshot: %s", msg);
		snprintf(a->last_error, sizeof(a->last_error), "%s", msg);
		*reply = json_pack("{s:b, s:s}", "ok", 0, "error", msg);
		rw_policy_free(&next);
		return ret;
	}
	diff = malloc(65536);
	n = diff ? rw_policy_diff(a->have_policy ? &a->policy : NULL, &next, diff, 65536) : 0;
	changes = json_array();
	for (char *line = diff ? strtok(diff, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		json_array_append_new(changes, json_string(line));
		rw_debug("  %s", line);
	}
	rw_info("applied revision %llu from %s (previous %llu): %d changes, %u runs, %u pods, "
		"%u entries, %.1f ms (build %.1f, flip %.1f), %u flows forgotten",
		(unsigned long long)res.revision, source, (unsigned long long)res.previous, n,
		res.runs, res.pods, res.entries, res.total_ms, res.build_ms, res.flip_ms,
		res.flows_flushed);
	if (a->have_policy)
		rw_policy_free(&a->policy);
	a->policy = next;
	a->have_policy = true;
	keep_text(a, buf, len, source);
	a->last_apply = res;
	a->applied_at = now_real();
	if (!res.previous && !a->ready_since)
		a->ready_since = a->applied_at;
	a->last_error[0] = '\0';
	runs_update(a);
	*reply = json_pack("{s:b, s:I, s:I, s:f, s:f, s:f, s:i, s:i, s:o}", "ok", 1,
			   "revision", (json_int_t)res.revision, "previous",
			   (json_int_t)res.previous, "apply_ms", res.total_ms, "build_ms",
			   res.build_ms, "flip_ms", res.flip_ms, "runs", (int)res.runs, "pods",
			   (int)res.pods, "changes", changes);
	free(diff);
	return 0;
}

static int read_file(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "r");
	size_t cap = 65536, n = 0;
	char *buf;

	if (!f)
		return -errno;
	buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			char *grown = cap < RW_CTL_MAX_BODY ? realloc(buf, cap * 2) : NULL;

			if (!grown) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = grown;
			cap *= 2;
		}
	}
	fclose(f);
	if (!buf)
		return -EFBIG;
	*out = buf;
	*len = n;
	return 0;
}

/* The policy file: applied when it is newer than what is in force, adopted when it is what
 * is in force (a restarted agent), refused when older.
 */
static void load_policy_file(struct agent *a, bool at_start)
{
	struct rw_policy_error perr = {};
	struct rw_config cfg;
	struct rw_policy p;
	char *buf = NULL;
	size_t len = 0;
	json_t *reply = NULL;
	uint64_t in_force;
	int err;

	err = read_file(a->policy_path, &buf, &len);
	if (err) {
		/* A ConfigMap swap removes the file for a moment; the next event brings it back. */
		if (at_start || err != -ENOENT)
			rw_warn("%s: %s", a->policy_path, strerror(-err));
		return;
	}
	if (a->policy_bytes && len == a->policy_len && !memcmp(buf, a->policy_bytes, len)) {
		free(buf);
		return;
	}
	free(a->policy_bytes);
	a->policy_bytes = buf;
	a->policy_len = len;

	rw_config_read(&a->dp, &cfg);
	in_force = RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0;
	if (rw_policy_parse(buf, len, a->policy_path, &p, &perr)) {
		rw_warn("refused snapshot: %s", perr.text);
		snprintf(a->last_error, sizeof(a->last_error), "%s", perr.text);
		return;
	}
	if (in_force && p.revision == in_force && !a->have_policy) {
		/* What the kernel enforces already: adopt it, do not apply it again. */
		rw_info("%s: revision %llu is the one in force; adopted", a->policy_path,
			(unsigned long long)in_force);
		a->policy = p;
		a->have_policy = true;
		keep_text(a, buf, len, a->policy_path);
		runs_update(a);
		return;
	}
	if (in_force && p.revision <= in_force) {
		rw_warn("%s: revision %llu is not newer than %llu, the one in force; keeping %llu",
			a->policy_path, (unsigned long long)p.revision,
			(unsigned long long)in_force, (unsigned long long)in_force);
		rw_policy_free(&p);
		return;
	}
	rw_policy_free(&p);
	agent_apply(a, buf, len, a->policy_path, &reply);
	json_decref(reply);
}

static int watch_policy(struct agent *a)
{
	char copy[PATH_MAX];
	int fd;

	snprintf(copy, sizeof(copy), "%s", a->policy_path);
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Watch the folder, not the file: a ConfigMap update swaps a symlink (..data) and editors
	 * rename a new file over the old one; either way the old inode is not the file any more.
	 */
	if (inotify_add_watch(fd, dirname(copy), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
				  IN_DELETE | IN_ATTRIB) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* ---- events ---- */

static void sub_close(struct agent *a, int i)
{
	rw_debug("subscriber %d gone: %llu events delivered, %llu skipped", a->subs[i].fd,
		 a->subs[i].delivered, a->subs[i].skipped);
	a->delivered_gone += a->subs[i].delivered;
	a->skipped_gone += a->subs[i].skipped;
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->subs[i].fd, NULL);
	close(a->subs[i].fd);
	free(a->subs[i].buf);
	a->subs[i] = a->subs[--a->n_subs];
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct agent *a = ctx;
	const struct rw_event *ev = data;
	json_t *o;
	char *line;
	size_t len;

	if (size < sizeof(*ev))
		return 0;
	if (rw_log_verbosity >= RW_LOG_DEBUG) {
		char text[256];

		rw_event_line(ev, NULL, a->mono_to_real, text, sizeof(text));
		rw_debug("%s", text);
	}
	if (!a->n_subs)
		return 0;
	o = rw_event_json(ev, a->have_policy ? &a->policy : NULL, a->mono_to_real);
	line = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!line)
		return 0;
	len = strlen(line);
	line[len++] = '\n';	/* json_dumps leaves room: we overwrite its NUL */
	for (int i = 0; i < a->n_subs; i++) {
		struct subscriber *s = &a->subs[i];

		/* A slow subscriber skips events (counted); it never holds up the ring. */
		if (s->len + len > SUB_BUF_MAX) {
			s->skipped++;
			continue;
		}
		memcpy(s->buf + s->len, line, len);
		s->len += len;
	}
	free(line);
	return 0;
}

static void flush_subscribers(struct agent *a)
{
	for (int i = 0; i < a->n_subs;) {
		struct subscriber *s = &a->subs[i];
		ssize_t n = s->len ? write(s->fd, s->buf, s->len) : 0;

		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			sub_close(a, i);
			continue;
		}
		if (n > 0) {
			/* Count the events whose last byte went out. */
			for (ssize_t b = 0; b < n; b++)
				s->delivered += s->buf[b] == '\n';
			memmove(s->buf, s->buf + n, s->len - n);
			s->len -= n;
		}
		i++;
	}
}

/* ---- control socket ---- */

static json_t *hook_json(struct agent *a, struct sandbox *s, int d)
{
	struct rw_hook_info hi;

	memset(&hi, 0, sizeof(hi));
	if (rw_hook_query_pinned(a->dp.pin_dir, s->ifindex, d, &hi))
		return json_pack("{s:b}", "attached", 0);
	return json_pack("{s:b, s:s, s:b, s:i}", "attached", hi.found, "mode",
			 hi.found ? rw_attach_mode_str(hi.mode) : "none", "first", hi.first,
			 "others", (int)hi.n_other);
}

static json_t *status_json(struct agent *a)
{
	char when[40], applied[40], ip[INET_ADDRSTRLEN];
	json_t *runs = json_array(), *sbx = json_array(), *o;
	struct rw_config cfg = {};
	unsigned long long delivered = a->delivered_gone, skipped = a->skipped_gone;
	bool ready;

	rw_config_read(&a->dp, &cfg);
	ready = RW_STATE_READY(cfg.state);
	rw_format_time(a->ready_since, when, sizeof(when));
	rw_format_time(a->applied_at, applied, sizeof(applied));
	for (size_t r = 0; a->have_policy && r < a->policy.n_runs; r++) {
		const struct rw_policy_run *run = &a->policy.runs[r];
		json_t *pods = json_array();
		struct rw_pod pod = {};
		char since[40] = "";

		for (size_t i = 0; i < run->n_pods; i++)
			json_array_append_new(pods, json_string(ip_str(run->pods[i], ip)));
		if (run->n_pods)
			rw_live_pod(&a->dp, run->pods[0], &pod);
		for (size_t i = 0; i < a->n_runs; i++)
			if (!strcmp(a->runs[i].id, run->id))
				rw_format_time(a->runs[i].since, since, sizeof(since));
		json_array_append_new(runs, json_pack("{s:s, s:i, s:i, s:s, s:s, s:o}", "id", run->id,
						      "idx", (int)pod.run_idx, "gen",
						      (int)pod.run_gen, "since", since, "egress",
						      rw_policy_run_egress(&a->policy, run) ==
								      RW_EGRESS_OPEN ?
							      "open" :
							      "allowlist",
						      "pods", pods));
	}
	for (size_t i = 0; i < a->n_sbx; i++) {
		struct sandbox *s = &a->sbx[i];
		struct rw_pod pod;
		bool known = s->pod && rw_live_pod(&a->dp, s->pod, &pod) == 0;

		json_array_append_new(sbx, json_pack("{s:s, s:i, s:o, s:o, s:{s:o, s:o}}",
						     "ifname", s->ifname, "ifindex", s->ifindex,
						     "pod", s->pod ? json_string(ip_str(s->pod, ip)) :
								     json_null(),
						     "run", known ? json_string(pod.run_id) :
								    json_null(),
						     "hooks", "egress", hook_json(a, s, RW_DIR_EGRESS),
						     "ingress", hook_json(a, s, RW_DIR_INGRESS)));
	}
	for (int i = 0; i < a->n_subs; i++) {
		delivered += a->subs[i].delivered;
		skipped += a->subs[i].skipped;
	}
	o = json_pack("{s:b, s:b, s:I, s:o, s:o, s:f, s:s, s:s, s:s, s:o, s:o, s:o, "
		      "s:{s:i, s:I, s:I}, s:o}",
		      "ok", 1, "ready", ready, "revision",
		      (json_int_t)(ready ? RW_STATE_REVISION(cfg.state) : 0),
		      "ready_since", a->ready_since ? json_string(when) : json_null(),
		      "applied", a->applied_at ? json_string(applied) : json_null(),
		      "apply_ms", a->last_apply.total_ms,
		      "bpffs", a->dp.pin_dir, "socket", rw_g.socket, "ifprefix", a->ifprefix,
		      "policy_file", a->policy_path ? json_string(a->policy_path) : json_null(),
		      "runs", runs, "sandboxes", sbx,
		      "events", "subscribers", a->n_subs, "delivered", (json_int_t)delivered,
		      "skipped", (json_int_t)skipped,
		      "last_error", a->last_error[0] ? json_string(a->last_error) : json_null());
	return o;
}

static void add_subscriber(struct agent *a, int fd)
{
	/* The client has shut down its writing side already (the request ends that way), so
	 * EPOLLRDHUP would fire at once: wait for the full hangup (always reported) instead.
	 */
	struct epoll_event ev = { .events = 0, .data.fd = fd };

	if (a->n_subs == MAX_SUBS) {
		json_t *o = json_pack("{s:b, s:s}", "ok", 0, "error", "too many subscribers");

		rw_ctl_reply(fd, o);
		json_decref(o);
		close(fd);
		return;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	a->subs[a->n_subs] = (struct subscriber){ .fd = fd, .buf = malloc(SUB_BUF_MAX) };
	if (!a->subs[a->n_subs].buf) {
		close(fd);
		return;
	}
	a->n_subs++;
	epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev);
	rw_debug("subscriber %d joined", fd);
}

static void on_client(struct agent *a)
{
	char *buf, *verb, *arg, *body;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	size_t body_len;
	json_t *reply = NULL;
	int fd, err;

	fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	/* The socket file is 0600 root already; check the peer too. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.uid != 0) {
		close(fd);
		return;
	}
	err = rw_ctl_read_request(fd, REQUEST_TIMEOUT_MS, &buf, &verb, &arg, &body, &body_len);
	if (err) {
		reply = json_pack("{s:b, s:s}", "ok", 0, "error", strerror(-err));
		goto out;
	}
	if (!strcmp(verb, "status")) {
		reply = status_json(a);
	} else if (!strcmp(verb, "apply")) {
		agent_apply(a, body, body_len, arg && *arg ? arg : "<socket>", &reply);
	} else if (!strcmp(verb, "policy")) {
		reply = a->policy_text ?
			json_pack("{s:b, s:I, s:s, s:s%}", "ok", 1, "revision",
				  (json_int_t)a->policy.revision, "source", a->policy_source,
				  "snapshot", a->policy_text, a->policy_text_len) :
			json_pack("{s:b, s:s}", "ok", 0, "error",
				  "this agent does not know the snapshot in force (applied before "
				  "it started); apply it again or pass --policy");
	} else if (!strcmp(verb, "events")) {
		free(buf);
		add_subscriber(a, fd);
		return;
	} else if (!strcmp(verb, "shutdown")) {
		rw_info("shutdown requested on the control socket; enforcement stays in place");
		reply = json_pack("{s:b}", "ok", 1);
		a->stop = true;
	} else {
		reply = json_pack("{s:b, s:s}", "ok", 0, "error", "unknown request");
	}
	free(buf);
out:
	if (reply)
		rw_ctl_reply(fd, reply);
	json_decref(reply);
	close(fd);
}

/* ---- the loop ---- */

static int epoll_add(struct agent *a, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static int timer(int period_ms)
{
	struct itimerspec its = {
		.it_interval = { period_ms / 1000, (period_ms % 1000) * 1000000L },
		.it_value = { period_ms / 1000, (period_ms % 1000) * 1000000L },
	};
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

	if (fd >= 0)
		timerfd_settime(fd, 0, &its, NULL);
	return fd;
}

static void drain_fd(int fd)
{
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			rw_info("SIGHUP: reloading the policy file");
			free(a->policy_bytes);
			a->policy_bytes = NULL;
			a->reload_pending = true;
		} else {
			rw_info("signal %d: exiting; enforcement stays in place", si.ssi_signo);
			a->stop = true;
		}
	}
}

static int agent_run(struct agent *a)
{
	static const struct rw_nl_handlers handlers = { on_link, on_route, NULL };
	struct rw_nl_handlers h = handlers;
	struct epoll_event evs[16];
	sigset_t mask;
	int nl_fd;

	h.data = a;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	a->sig_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	a->tick_fd = timer(TICK_MS);
	a->resync_fd = timer(a->resync_sec * 1000);
	nl_fd = rw_nl_sub_fd(a->nl);
	if (epoll_add(a, a->listen_fd) || epoll_add(a, nl_fd) || epoll_add(a, a->sig_fd) ||
	    epoll_add(a, a->tick_fd) || epoll_add(a, a->resync_fd) ||
	    (a->inotify_fd >= 0 && epoll_add(a, a->inotify_fd))) {
		rw_err("epoll: %s", strerror(errno));
		return -errno;
	}

	while (!a->stop) {
		int n = epoll_wait(a->epfd, evs, 16, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == a->listen_fd) {
				on_client(a);
			} else if (fd == nl_fd) {
				int ret = rw_nl_sub_read(a->nl, &h);

				if (ret) {
					if (ret != RW_NL_RESYNC)
						rw_warn("netlink: %s; resyncing", strerror(-ret));
					a->links_dirty = true;
				}
			} else if (fd == a->sig_fd) {
				on_signal(a);
			} else if (fd == a->inotify_fd) {
				drain_fd(fd);
				a->reload_pending = true;
			} else if (fd == a->tick_fd) {
				drain_fd(fd);
				/* Events were submitted without wakeups: drain on the tick. */
				ring_buffer__consume(a->ring);
				flush_subscribers(a);
				if (a->reload_pending && a->policy_path) {
					a->reload_pending = false;
					load_policy_file(a, false);
				}
				if (a->links_dirty)
					full_resync(a);
			} else if (fd == a->resync_fd) {
				drain_fd(fd);
				full_resync(a);
			} else {
				for (int s = 0; s < a->n_subs; s++)
					if (a->subs[s].fd == fd) {
						sub_close(a, s);
						break;
					}
			}
		}
	}
	ring_buffer__consume(a->ring);
	flush_subscribers(a);
	return 0;
}

static void agent_usage(FILE *f)
{
	fprintf(f, "Usage: runwall [--bpffs DIR] [--socket PATH] [-v] agent [OPTIONS]\n"
		   "  --policy FILE          snapshot to apply at start and whenever it changes\n"
		   "  --ifprefix LIST        interfaces to enforce on (default eni,vlan)\n"
		   "  --attach-mode MODE     auto (tcx, else tc), tcx or tc (default auto)\n"
		   "  --resync SECONDS       full resync period (default 10)\n"
		   "  --event-rate N[/BURST] events per second per sandbox (default 200/400; 0: no limit)\n"
		   "  --health ADDR:PORT     serve /healthz and /readyz over HTTP\n"
		   "  -v, --verbose          more log lines (-vv: libbpf's too)\n");
}

int cmd_agent(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "ifprefix", required_argument, NULL, 'i' },
		{ "attach-mode", required_argument, NULL, 'm' },
		{ "resync", required_argument, NULL, 'r' },
		{ "event-rate", required_argument, NULL, 'e' },
		{ "health", required_argument, NULL, 'H' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct agent a = { .ifprefix = "eni,vlan", .resync_sec = 10, .listen_fd = -1,
			   .inotify_fd = -1, .epfd = -1, .tick_fd = -1, .resync_fd = -1,
			   .sig_fd = -1 };
	struct rw_health *health = NULL;
	long rate = -1, burst = -1;
	struct rw_config cfg;
	int c, err, ret = RW_EXIT_REFUSED;

	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			rw_log_verbosity++;
			break;
		case 'p':
			a.policy_path = optarg;
			break;
		case 'i':
			a.ifprefix = optarg;
			break;
		case 'm':
			if (!strcmp(optarg, "auto"))
				a.attach_mode = RW_ATTACH_AUTO;
			else if (!strcmp(optarg, "tcx"))
				a.attach_mode = RW_ATTACH_TCX;
			else if (!strcmp(optarg, "tc"))
				a.attach_mode = RW_ATTACH_TC;
			else
				return rw_fail(RW_EXIT_USAGE, "agent: --attach-mode '%s': expected "
					       "auto, tcx or tc", optarg);
			break;
		case 'r':
			a.resync_sec = atoi(optarg);
			if (a.resync_sec < 1)
				return rw_fail(RW_EXIT_USAGE, "agent: --resync '%s': expected "
					       "seconds >= 1", optarg);
			break;
		case 'e':
			if (sscanf(optarg, "%ld/%ld", &rate, &burst) < 1 || rate < 0 ||
			    (burst != -1 && burst < 1))
				return rw_fail(RW_EXIT_USAGE, "agent: --event-rate '%s': expected "
					       "N or N/BURST", optarg);
			if (burst == -1)
				burst = rate * 2;
			break;
		case 'H':
			a.health_addr = optarg;
			break;
		case 'h':
			agent_usage(stdout);
			return RW_EXIT_OK;
		default:
			agent_usage(stderr);
			return RW_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return rw_fail(RW_EXIT_USAGE, "agent: unexpected argument '%s'", argv[optind]);

	a.mono_to_real = rw_mono_to_real_offset();
	err = rw_datapath_load(&a.dp, rw_g.bpffs, 0);
	if (err)
		return RW_EXIT_REFUSED;
	rw_config_read(&a.dp, &cfg);
	if (RW_STATE_READY(cfg.state))
		rw_info("adopting %s: revision %llu in force", a.dp.pin_dir,
			(unsigned long long)RW_STATE_REVISION(cfg.state));
	else
		rw_info("%s: no snapshot applied yet: every sandbox packet is dropped not-ready",
			a.dp.pin_dir);
	if (rate >= 0) {
		cfg.event_rate = rate;
		cfg.event_burst = burst;
		rw_config_write(&a.dp, &cfg);
	}

	a.ring = ring_buffer__new(a.dp.map_fd[RW_M_EVENTS], on_event, &a, NULL);
	a.epfd = epoll_create1(EPOLL_CLOEXEC);
	err = rw_nl_sub_open(&a.nl);
	if (!a.ring || a.epfd < 0 || err) {
		rw_err("setting up: %s", strerror(err ? -err : errno));
		goto cleanup;
	}
	a.listen_fd = rw_ctl_listen(rw_g.socket);
	if (a.listen_fd < 0) {
		rw_err("%s: %s", rw_g.socket, a.listen_fd == -EADDRINUSE ?
			"another agent answers on this socket" : strerror(-a.listen_fd));
		goto cleanup;
	}
	/* Programs on every sandbox veth first, then the policy: a restarted agent swaps the
	 * programs of its predecessor's links in place, never detaching.
	 */
	if (full_resync(&a))
		goto cleanup;
	if (a.policy_path) {
		a.inotify_fd = watch_policy(&a);
		if (a.inotify_fd < 0)
			rw_warn("%s: cannot watch for changes: %s", a.policy_path,
				strerror(-a.inotify_fd));
		load_policy_file(&a, true);
	}
	if (a.health_addr) {
		health = rw_health_start(a.health_addr, &a.dp);
		if (!health)
			goto cleanup;
	}
	rw_info("agent running: %zu sandbox veths (prefix %s), socket %s", a.n_sbx, a.ifprefix,
		rw_g.socket);
	ret = agent_run(&a) ? RW_EXIT_REFUSED : RW_EXIT_OK;

cleanup:
	rw_health_stop(health);
	while (a.n_subs)
		sub_close(&a, 0);
	if (a.listen_fd >= 0) {
		close(a.listen_fd);
		unlink(rw_g.socket);
	}
	{
		int fds[] = { a.inotify_fd, a.tick_fd, a.resync_fd, a.sig_fd, a.epfd };

		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	ring_buffer__free(a.ring);
	rw_nl_sub_close(a.nl);
	if (a.have_policy)
		rw_policy_free(&a.policy);
	free(a.policy_bytes);
	free(a.policy_text);
	free(a.runs);
	free(a.sbx);
	rw_datapath_close(&a.dp);
	return ret;
}
