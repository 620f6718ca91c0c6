// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* main_loop.c: `runwall agent`, the node agent. It loads the programs (adopting the pinned maps and
 * links of a previous agent), attaches them to every sandbox veth, binds pod IPs to veths from
 * the CNI's /32 routes, applies policy snapshots (file, control socket), and fans the ring
 * buffer's verdict events out to the socket's subscribers. It never detaches on exit: the
 * kernel keeps enforcing what was last applied. This file: setup from struct agent_opts (agent_run.h;
 * user/cli/cli_agent.c parses the options), the epoll loop; agent.h says where the rest lives.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agent.h"
#include "agent_run.h"
#include "ctl.h"
#include "eventfmt.h"
#include "flow_log.h"
#include "access_requests.h"
#include "log.h"
#include "util.h"

static int epoll_add(struct agent *a, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	return epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static int timer(int period_ms)
{
	struct itimerspec its = {
		.it_interval = {period_ms / 1000, (period_ms % 1000) * 1000000L},
		.it_value = {period_ms / 1000, (period_ms % 1000) * 1000000L},
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

/* The link thread's pieces and the applies served meanwhile both set or clear it. */
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

void agent_set_error(struct agent *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pthread_mutex_lock(&error_lock);
	vsnprintf(a->last_error, sizeof(a->last_error), fmt, ap);
	pthread_mutex_unlock(&error_lock);
	va_end(ap);
}

void agent_clear_error(struct agent *a)
{
	pthread_mutex_lock(&error_lock);
	a->last_error[0] = '\0';
	pthread_mutex_unlock(&error_lock);
}

void agent_stop(struct agent *a)
{
	a->stop = true;
}

static void on_signal(struct agent *a)
{
	struct signalfd_siginfo si;

	while (read(a->sig_fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			rw_info("SIGHUP: reloading the policy file");
			rw_flow_log_reopen(a->flow_log);
			agent_policy_forget_file(a);
			a->reload_pending = true;
		} else {
			rw_info("signal %d: exiting; enforcement stays in place", si.ssi_signo);
			a->stop = true;
		}
	}
}

/* The pieces of link work agent_beside() hands to the link thread. */
static int nl_read_piece(struct agent *a, void *h)
{
	return rw_nl_sub_read(a->nl, h);
}

static int tick_piece(struct agent *a, void *arg)
{
	agent_sandboxes_tick(a);
	if (a->sandboxes.links_dirty)
		agent_full_resync(a);
	return 0;
}

static int resync_piece(struct agent *a, void *arg)
{
	struct timespec ts;

	agent_full_resync(a);
	/* Idle flows leave the sandboxes' tables, a bounded slice per resync. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	rw_conntrack_expire(&a->dp, ts.tv_sec * 1000000000ULL + ts.tv_nsec, &a->ct_cursor, 65536);
	return 0;
}

static int agent_run(struct agent *a)
{
	/* A burst of links under CNI churn is many datagrams: PolicyWatch's changes between them
	 * where the loop reads them itself (no link thread; on it, the loop serves them meanwhile).
	 */
	static const struct rw_nl_handlers handlers = {.on_link = agent_on_link,
						       .on_route = agent_on_route,
						       .on_addr = agent_on_addr,
						       .on_tc = agent_on_tc,
						       .between = agent_follow_urgent_cb};
	struct rw_nl_handlers h = handlers;
	struct epoll_event evs[16];
	sigset_t mask;
	int nl_fd, err;

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
	    (a->inotify_fd >= 0 && epoll_add(a, a->inotify_fd)) ||
	    (a->cni.inotify_fd >= 0 && epoll_add(a, a->cni.inotify_fd)) ||
	    (a->containers.inotify_fd >= 0 && epoll_add(a, a->containers.inotify_fd)) ||
	    (a->containers.timer_fd >= 0 && epoll_add(a, a->containers.timer_fd))) {
		rw_err("epoll: %s", strerror(errno));
		return -errno;
	}

	err = agent_link_thread_start(a);
	if (err)
		rw_warn("link thread: %s; the loop does the link work itself", strerror(-err));
	while (!a->stop) {
		int n;

		/* The last apply's reply or ack went out in the last round: its probes now, on the
		 * prober's thread.
		 */
		agent_settle(a);
		n = epoll_wait(a->epfd, evs, 16, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd != a->tick_fd)
				agent_view_changed(a);
			if (fd == a->listen_fd) {
				agent_on_client(a);
			} else if (fd == nl_fd) {
				int ret = agent_beside(a, nl_read_piece, &h);

				if (ret) {
					if (ret != RW_NL_RESYNC)
						rw_warn("netlink: %s; resyncing", strerror(-ret));
					agent_links_lost(a);
				}
			} else if (fd == a->sig_fd) {
				on_signal(a);
			} else if (fd == a->inotify_fd) {
				drain_fd(fd);
				a->reload_pending = true;
			} else if (fd == a->cni.inotify_fd) {
				agent_cni_on_inotify(a);
			} else if (fd == a->containers.inotify_fd || fd == a->containers.timer_fd) {
				containers_poll(a);
			} else if (fd == a->tick_fd) {
				drain_fd(fd);
				/* Events were submitted without wakeups: drain on the tick. */
				agent_drain_ring(a);
				rw_agent_view_tick(a->view);
				agent_flush_subscribers(a);
				rw_flow_log_tick(a->flow_log);
				agent_ctl_tick(a);
				agent_follow_tick(a);
				if (a->reload_pending && a->policy_path) {
					a->reload_pending = false;
					agent_load_policy_file(a, false);
				}
				agent_beside(a, tick_piece, NULL);
				/* The publish renders the whole status: a change waiting goes first. */
				agent_follow_urgent(a);
				agent_view_tick(a);
			} else if (fd == a->resync_fd) {
				drain_fd(fd);
				agent_beside(a, resync_piece, NULL);
				agent_cni_check(a); /* in case an event was missed */
			} else if (agent_follow_is_fd(a, fd)) {
				agent_follow_on_fd(a);
			} else if (agent_ctl_on_fd(a, fd, evs[i].events)) {
				/* a control socket client, served without blocking */
			} else {
				for (int s = 0; s < a->subscribers.n_subs; s++)
					if (a->subscribers.subs[s].fd == fd) {
						agent_sub_close(a, s);
						break;
					}
			}
			/* A change that came while this one was served goes before the next. */
			agent_follow_urgent(a);
		}
	}
	agent_link_thread_stop(a);
	agent_drain_ring(a);
	agent_flush_subscribers(a);
	agent_sandboxes_tick(a);
	/* The shutdown request's reply, if it did not all go out at once. */
	for (int i = 0; i < 20 && a->ctl.n_clients; i++) {
		int n = epoll_wait(a->epfd, evs, 16, 10);

		for (int k = 0; k < n; k++)
			agent_ctl_on_fd(a, evs[k].data.fd, evs[k].events);
	}
	agent_ctl_close_all(a);
	return 0;
}

/* Someone answers on the control socket's path: another agent runs there. Checked before
 * anything is loaded or pinned, so that this refusal leaves the node exactly as it was
 * (rw_ctl_listen() checks again when it binds).
 */
static bool socket_answers(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	bool answers;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	answers = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return answers;
}

_Static_assert(RW_AGENT_REQUEST_QUEUE_MAX <= RW_ACCESS_KEYS_MAX / 2,
	       "the queue holds at most half of the requests remembered");

/* The options' limits over the pinned configuration, the programs pinned for runwall-cni.
 * Returns 0 or the exit code of the refusal.
 */
static int agent_configure(struct agent *a, const struct agent_opts *o)
{
	struct rw_config cfg;
	char msg[256];
	int err;

	/* The slots' inner maps exist from the start and live as long as the pins. */
	err = rw_apply_prepare(&a->dp, msg, sizeof(msg));
	if (err) {
		rw_err("%s", msg);
		return RW_EXIT_REFUSED;
	}
	rw_config_read(&a->dp, &cfg);
	if (o->have_rate) {
		cfg.event_rate = o->rate;
		cfg.event_burst = o->burst;
	}
	if (o->have_answer_rate) {
		cfg.answer_rate = o->answer_rate;
		cfg.answer_burst = o->answer_burst;
	}
	if (o->ct_per_sandbox > 0)
		cfg.ct_per_sandbox = o->ct_per_sandbox;
	if (o->ct_node > 0)
		cfg.ct_node = o->ct_node;
	if (cfg.ct_per_sandbox > cfg.ct_node) {
		rw_err("agent: --ct-per-sandbox %u is more than the node's %u (--ct-node)",
		       cfg.ct_per_sandbox, cfg.ct_node);
		return RW_EXIT_USAGE;
	}
	if (o->max_endpoints) {
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(a->dp.map_fd[RW_M_ENDPOINTS], &info, &len) == 0 &&
		    info.max_entries != o->max_endpoints)
			rw_warn("--max-endpoints %llu: the pinned endpoint table holds %u veths and "
				"keeps that size (runwall detach, then start again, to change it)",
				o->max_endpoints, info.max_entries);
	}
	/* For runwall-cni: a pod created while this agent is away gets these programs. */
	err = rw_datapath_pin_progs(&a->dp);
	if (err) {
		rw_err("%s/%s: pinning the programs: %s", a->dp.pin_dir, RW_PROGS_DIR,
		       strerror(-err));
		return RW_EXIT_REFUSED;
	}
	if (RW_STATE_READY(cfg.state))
		rw_info("adopting %s: revision %llu in force", a->dp.pin_dir,
			(unsigned long long)RW_STATE_REVISION(cfg.state));
	else
		rw_info("%s: no snapshot applied yet: every sandbox packet is dropped not-ready",
			a->dp.pin_dir);
	if (o->have_rate || o->have_answer_rate || o->ct_per_sandbox > 0 || o->ct_node > 0)
		rw_config_write(&a->dp, &cfg);
	return 0;
}

/* The event ring, the epoll set, the netlink subscription and the control socket. */
static int agent_channels(struct agent *a)
{
	int err;

	a->ring = ring_buffer__new(a->dp.map_fd[RW_M_EVENTS], agent_ring_cb, a, NULL);
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	err = rw_nl_sub_open(&a->nl);
	if (!a->ring || a->epfd < 0 || err) {
		rw_err("setting up: %s", strerror(err ? -err : errno));
		return RW_EXIT_REFUSED;
	}
	a->listen_fd = rw_ctl_listen(a->socket);
	if (a->listen_fd < 0) {
		rw_err("%s: %s", a->socket,
		       a->listen_fd == -EADDRINUSE ? "another agent answers on this socket"
						   : strerror(-a->listen_fd));
		return RW_EXIT_REFUSED;
	}
	return 0;
}

/* What the agent enforces and for whom: the sandboxes, their containers, the CNI chain and the
 * --policy file.
 */
static int agent_sources(struct agent *a)
{
	int err;

	/* Programs on every sandbox veth first, then the policy: a restarted agent swaps the
	 * programs of its predecessor's links in place, never detaching.
	 */
	if (agent_full_resync(a))
		return RW_EXIT_REFUSED;
	/* After the sandboxes: a pod's containers take its veth. */
	admissions_init(a);
	err = containers_init(a);
	if (err)
		return RW_EXIT_USAGE;
	err = agent_cni_watch(a);
	if (err) {
		rw_err("--cni-conf-dir %s: %s", a->cni.conf_dir, strerror(-err));
		return RW_EXIT_USAGE;
	}
	if (a->policy_path) {
		a->inotify_fd = agent_watch_policy(a);
		if (a->inotify_fd < 0)
			rw_warn("%s: cannot watch for changes: %s", a->policy_path,
				strerror(-a->inotify_fd));
		agent_load_policy_file(a, true);
	}
	return 0;
}

/* Threads inherit this thread's signal mask: block the signals agent_run() takes through its
 * signalfd before they exist, or the kernel may deliver the kubelet's SIGTERM to one of them and
 * kill the agent by the default action (exit 143, socket left behind) instead of a clean exit.
 */
static void agent_block_signals(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
}

/* The threads: the HTTP listeners and the access requests, then PolicyWatch's stream. */
static int agent_threads(struct agent *a, char *refusal, size_t refusal_len)
{
	bool vusage;

	if (a->view_opts.listen || a->view_opts.probe_listen || a->view_opts.request_url) {
		agent_block_signals();
		a->view = rw_agent_view_start(&a->view_opts, &a->dp, refusal, refusal_len, &vusage);
		if (!a->view)
			return vusage ? RW_EXIT_USAGE : RW_EXIT_REFUSED;
		agent_view_publish(a);
		if (a->view_opts.listen)
			rw_info("HTTP on %s: the page at /, the API under /api, /metrics, /healthz, "
				"/readyz%s",
				a->view_opts.listen,
				a->view_opts.token_file
					? " (bearer token required but for /healthz and /readyz)"
					: "");
		if (a->view_opts.probe_listen)
			rw_info("probes on %s: /healthz, /readyz", a->view_opts.probe_listen);
		if (a->view_opts.request_url)
			rw_info("network-access requests to %s", a->view_opts.request_url);
	}
	if (a->follow.opts.url) {
		char werr[400];

		agent_block_signals();
		if (agent_follow_start(a, werr, sizeof(werr))) {
			rw_err("--policy-url: %s", werr);
			return RW_EXIT_REFUSED;
		}
	}
	return 0;
}

/* Everything rw_agent_run() set up, in reverse; a first start that could not serve (fresh and
 * refused) also takes back the pins it made.
 */
static void agent_teardown(struct agent *a, bool unpin)
{
	int fds[] = {a->inotify_fd, a->cni.inotify_fd, a->tick_fd,
		     a->resync_fd,  a->sig_fd,	       a->epfd};

	agent_prober_stop(a); /* it reads the datapath's maps */
	if (unpin) {
		rw_datapath_close(&a->dp);
		rw_detach_all(a->bpffs);
		rw_datapath_unpin(a->bpffs);
	}
	agent_follow_stop(a);
	rw_agent_view_stop(a->view);
	while (a->subscribers.n_subs)
		agent_sub_close(a, 0);
	if (a->listen_fd >= 0) {
		close(a->listen_fd);
		unlink(a->socket);
	}
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	ring_buffer__free(a->ring);
	rw_nl_sub_close(a->nl);
	agent_staged_free(a);
	agent_policy_free(a);
	agent_sandboxes_free(a);
	admissions_free(a);
	containers_free(a);
	rw_datapath_close(&a->dp);
	rw_flow_log_close(a->flow_log);
}

int rw_agent_run(const struct agent_opts *o, char *refusal, size_t refusal_len)
{
	struct agent a = {.bpffs = o->bpffs,
			  .socket = o->socket,
			  .policy_path = o->policy_path,
			  .ifprefix = o->ifprefix,
			  .attach_mode = o->attach_mode,
			  .resync_sec = o->resync_sec,
			  .view_opts = o->view,
			  .cni = {.conf_dir = o->cni_conf_dir, .inotify_fd = -1},
			  .containers = {.dir = o->containers_dir,
					 .cgroup_root_opt = o->cgroup_root,
					 .inotify_fd = -1,
					 .timer_fd = -1},
			  .follow = {.opts = o->watch},
			  .listen_fd = -1,
			  .inotify_fd = -1,
			  .epfd = -1,
			  .tick_fd = -1,
			  .resync_fd = -1,
			  .sig_fd = -1};
	bool fresh;
	char msg[256];
	int err, ret;

	/* Every refusal below leaves the node as it found it: checks that need nothing loaded
	 * come first, and a refusal after a first load removes what that load pinned.
	 */
	if (o->watch.url && rw_pw_check(&o->watch, msg, sizeof(msg)))
		return rw_fail_msg(refusal, refusal_len, RW_EXIT_USAGE, "agent: %s", msg);
	if (socket_answers(o->socket))
		return rw_fail_msg(refusal, refusal_len, RW_EXIT_REFUSED,
				   "%s: another agent answers on this socket", o->socket);
	fresh = rw_datapath_pinned_layout(a.bpffs) == 0;

	a.mono_to_real = rw_mono_to_real_offset();
	if (o->flow_log.path) {
		a.flow_log = rw_flow_log_open(&o->flow_log, o->view.node, msg, sizeof(msg));
		if (!a.flow_log)
			return rw_fail_msg(refusal, refusal_len, RW_EXIT_USAGE, "agent: %s", msg);
	}
	err = rw_datapath_load_sized(&a.dp, a.bpffs, 0, o->max_endpoints, msg, sizeof(msg));
	if (err) {
		rw_err("%s", msg);
		if (fresh && a.dp.pin_dir[0] == '\0')
			rw_datapath_unpin(a.bpffs); /* what a failed first load left */
		rw_flow_log_close(a.flow_log);
		return RW_EXIT_REFUSED;
	}
	ret = agent_configure(&a, o);
	if (!ret)
		ret = agent_channels(&a);
	if (!ret)
		ret = agent_sources(&a);
	if (!ret)
		ret = agent_threads(&a, refusal, refusal_len);
	if (ret) {
		agent_teardown(&a, fresh);
		return ret;
	}
	rw_info("agent running: %zu sandbox veths (prefix %s), socket %s", a.sandboxes.n_sbx,
		a.ifprefix, a.socket);
	ret = agent_run(&a) ? RW_EXIT_REFUSED : RW_EXIT_OK;
	agent_teardown(&a, false);
	return ret;
}
