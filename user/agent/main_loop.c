// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* main_loop.c: `runwall agent`, the node agent. It loads the programs (adopting the pinned maps and
 * links of a previous agent), attaches them to every sandbox veth, binds pod IPs to veths from
 * the CNI's /32 routes, applies policy snapshots (file, control socket), and fans the ring
 * buffer's verdict events out to the socket's subscribers. It never detaches on exit: the
 * kernel keeps enforcing what was last applied. This file: options, setup, the epoll loop; agent.h
 * says where the rest lives.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
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
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "access_requests.h"
#include "http.h"
#include "log.h"
#include "util.h"
#include "parse.h"

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
	static const struct rw_nl_handlers handlers = {
		.on_link = agent_on_link, .on_route = agent_on_route, .on_tc = agent_on_tc};
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
	    (a->inotify_fd >= 0 && epoll_add(a, a->inotify_fd)) ||
	    (a->cni.inotify_fd >= 0 && epoll_add(a, a->cni.inotify_fd))) {
		rw_err("epoll: %s", strerror(errno));
		return -errno;
	}

	while (!a->stop) {
		int n = epoll_wait(a->epfd, evs, 16, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd != a->tick_fd)
				a->view_dirty = true;
			if (fd == a->listen_fd) {
				agent_on_client(a);
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
			} else if (fd == a->cni.inotify_fd) {
				agent_cni_on_inotify(a);
			} else if (fd == a->tick_fd) {
				drain_fd(fd);
				/* Events were submitted without wakeups: drain on the tick. */
				agent_drain_ring(a);
				rw_agent_view_tick(a->view);
				agent_flush_subscribers(a);
				agent_sandboxes_tick(a);
				agent_ctl_tick(a);
				if (a->reload_pending && a->policy_path) {
					a->reload_pending = false;
					agent_load_policy_file(a, false);
				}
				if (a->links_dirty)
					agent_full_resync(a);
				if (a->view &&
				    (a->view_dirty || ++a->ticks % (1000 / TICK_MS) == 0))
					agent_view_publish(a);
			} else if (fd == a->resync_fd) {
				struct timespec ts;

				drain_fd(fd);
				agent_full_resync(a);
				agent_cni_check(a); /* in case an event was missed */
				/* Idle flows leave the sandboxes' tables, a bounded slice per resync. */
				clock_gettime(CLOCK_MONOTONIC, &ts);
				rw_conntrack_expire(&a->dp, ts.tv_sec * 1000000000ULL + ts.tv_nsec,
						    &a->ct_cursor, 65536);
			} else if (agent_ctl_on_fd(a, fd, evs[i].events)) {
				/* a control socket client, served without blocking */
			} else {
				for (int s = 0; s < a->n_subs; s++)
					if (a->subs[s].fd == fd) {
						agent_sub_close(a, s);
						break;
					}
			}
		}
	}
	agent_drain_ring(a);
	agent_flush_subscribers(a);
	agent_sandboxes_tick(a);
	/* The shutdown request's reply, if it did not all go out at once. */
	for (int i = 0; i < 20 && a->n_clients; i++) {
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

#define MAX_RESYNC_SEC	  86400
#define MAX_EVENT_RATE	  1000000
#define MAX_CT_FLOWS	  (1u << 30)
#define MAX_REQUEST_QUEUE (RW_ACCESS_KEYS_MAX / 2)

static const char agent_options[] =
	"  --policy FILE          snapshot to apply at start and whenever it changes\n"
	"  --ifprefix LIST        interfaces to enforce on (default eni,vlan)\n"
	"  --cni-conf-dir DIR     keep runwall-cni chained in the CNI conf file the runtime\n"
	"                         loads from DIR, putting its entry back when it is rewritten\n"
	"  --attach-mode MODE     auto (tcx, else tc), tcx or tc (default auto)\n"
	"  --resync SECONDS       full resync period (default 10)\n"
	"  --event-rate N[/BURST] events per second per sandbox, for drops and for new flows\n"
	"                         each (default 200/400; 0: no limit)\n"
	"  --answer-rate N[/BURST] answers to refused packets (TCP resets, ICMP unreachables)\n"
	"                         per second per sandbox (default 100/100; 0: no limit)\n"
	"  --ct-per-sandbox N     flows one sandbox may track (default 8192; new tables)\n"
	"  --ct-node N            flows all sandboxes may track together (default 1048576)\n"
	"  --max-endpoints N      sandbox veths the node binds at most (default and maximum\n"
	"                         4096; fresh pins only: pinned ones keep their size)\n"
	"  --listen ADDR:PORT     HTTP: /healthz, /readyz, /metrics, /api/..., the page (PORT\n"
	"                         alone: 127.0.0.1; any other address needs --http-token-file)\n"
	"  --probe-listen ADDR:PORT  /healthz and /readyz only, on a listener of their own\n"
	"                         (loopback only; for the kubelet's probes)\n"
	"  --http-token-file FILE bearer token the HTTP API requires (not /healthz, /readyz)\n"
	"  --events N             recent events kept in memory for the API (default 10000)\n"
	"  --node NAME            this node's name in events and requests (default: host name)\n"
	"  --access-request-url URL  POST a network-access request for the first not-allowlisted\n"
	"                         refusal of each run, generation, destination, port, protocol\n"
	"  --access-request-queue N  requests waiting to be sent at most (default 256)\n"
	"  -v, --verbose          more log lines (-vv: libbpf's debug too)\n";

static int cmd_agent(int argc, char **argv)
{
	static const struct option opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"ifprefix", required_argument, NULL, 'i'},
		{"cni-conf-dir", required_argument, NULL, 'K'},
		{"attach-mode", required_argument, NULL, 'm'},
		{"resync", required_argument, NULL, 'r'},
		{"event-rate", required_argument, NULL, 'e'},
		{"answer-rate", required_argument, NULL, 'A'},
		{"ct-per-sandbox", required_argument, NULL, 'C'},
		{"ct-node", required_argument, NULL, 'N'},
		{"max-endpoints", required_argument, NULL, 'M'},
		{"listen", required_argument, NULL, 'H'},
		{"health", required_argument, NULL, 'H'}, /* the old name of --listen */
		{"probe-listen", required_argument, NULL, 'P'},
		{"http-token-file", required_argument, NULL, 'T'},
		{"events", required_argument, NULL, 'E'},
		{"node", required_argument, NULL, 'n'},
		{"access-request-url", required_argument, NULL, 'U'},
		{"access-request-queue", required_argument, NULL, 'Q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{}};
	struct agent a = {.ifprefix = RW_DEFAULT_IFPREFIX,
			  .cni = {.inotify_fd = -1},
			  .resync_sec = 10,
			  .listen_fd = -1,
			  .inotify_fd = -1,
			  .epfd = -1,
			  .tick_fd = -1,
			  .resync_fd = -1,
			  .sig_fd = -1};
	char node[RW_NODE_LEN] = "", verr[400];
	bool vusage;
	static const char *const attach_modes[] = {
		[RW_ATTACH_AUTO] = "auto", [RW_ATTACH_TCX] = "tcx", [RW_ATTACH_TC] = "tc"};
	unsigned long long v, rate = 0, burst = 0, ct_sbx = 0, ct_node = 0, max_ep = 0;
	unsigned long long answer_rate = 0, answer_burst = 0;
	bool fresh;
	bool have_rate = false, have_answer_rate = false;
	char msg[256];
	struct rw_config cfg;
	int c, err, ret = RW_EXIT_REFUSED;

	/* The key of the tables a sandbox's traffic fills, taken before any of it is seen. */
	(void)rw_hash_key();
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
		case 'K':
			a.cni.conf_dir = optarg;
			break;
		case 'm':
			err = rw_name_lookup(optarg, "--attach-mode", attach_modes,
					     sizeof(attach_modes) / sizeof(attach_modes[0]), msg,
					     sizeof(msg));
			if (err < 0)
				return rw_fail(RW_EXIT_USAGE, "agent: %s", msg);
			a.attach_mode = err;
			break;
		case 'r':
			if (rw_parse_uint(optarg, MAX_RESYNC_SEC, &v) || v < 1)
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --resync '%s': expected "
					       "seconds, 1 to %d",
					       optarg, MAX_RESYNC_SEC);
			a.resync_sec = (int)v;
			break;
		case 'e':
			if (rw_parse_rate(optarg, MAX_EVENT_RATE, &rate, &burst))
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --event-rate '%s': expected "
					       "N or N/BURST, 0 to %d (BURST at least 1)",
					       optarg, MAX_EVENT_RATE);
			have_rate = true;
			break;
		case 'A':
			if (rw_parse_rate(optarg, MAX_EVENT_RATE, &answer_rate, &answer_burst))
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --answer-rate '%s': expected "
					       "N or N/BURST, 0 to %d (BURST at least 1)",
					       optarg, MAX_EVENT_RATE);
			have_answer_rate = true;
			break;
		case 'C':
		case 'N':
			if (rw_parse_uint(optarg, MAX_CT_FLOWS, &v) || v < 1)
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --%s '%s': expected a number of "
					       "flows, 1 to %u",
					       c == 'C' ? "ct-per-sandbox" : "ct-node", optarg,
					       MAX_CT_FLOWS);
			*(c == 'C' ? &ct_sbx : &ct_node) = v;
			break;
		case 'M':
			if (rw_parse_uint(optarg, RW_MAX_ENDPOINTS, &v) || v < 1)
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --max-endpoints '%s': expected a number of "
					       "veths, 1 to %d",
					       optarg, RW_MAX_ENDPOINTS);
			max_ep = v;
			break;
		case 'H':
			a.view_opts.listen = optarg;
			break;
		case 'P':
			a.view_opts.probe_listen = optarg;
			break;
		case 'T':
			a.view_opts.token_file = optarg;
			break;
		case 'n':
			if (!*optarg || strlen(optarg) >= sizeof(node))
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --node '%s': expected 1 to %zu "
					       "characters",
					       optarg, sizeof(node) - 1);
			snprintf(node, sizeof(node), "%s", optarg);
			break;
		case 'U':
			a.view_opts.request_url = optarg;
			break;
		case 'E':
			if (rw_parse_uint(optarg, RW_EVSTORE_MAX, &v) || v < 1)
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --events '%s': expected 1 to %d", optarg,
					       RW_EVSTORE_MAX);
			a.view_opts.events = v;
			break;
		case 'Q':
			if (rw_parse_uint(optarg, MAX_REQUEST_QUEUE, &v) || v < 1)
				return rw_fail(RW_EXIT_USAGE,
					       "agent: --access-request-queue '%s': "
					       "expected 1 to %d",
					       optarg, MAX_REQUEST_QUEUE);
			a.view_opts.request_queue = v;
			break;
		case 'h':
			rw_cmd_help(&rw_cmd_agent, stdout);
			return RW_EXIT_OK;
		default:
			return rw_cmd_usage_error(&rw_cmd_agent, "bad option '%s'",
						  argv[optind - 1]);
		}
	}
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_agent, "unexpected argument '%s'", argv[optind]);
	if (a.view_opts.token_file && !a.view_opts.listen)
		return rw_fail(RW_EXIT_USAGE, "agent: --http-token-file needs --listen");
	if (!node[0] && gethostname(node, sizeof(node) - 1))
		snprintf(node, sizeof(node), "node");
	a.view_opts.node = node;
	if (a.view_opts.listen) {
		struct rw_http_opts ho = {.listen = a.view_opts.listen,
					  .token_file = a.view_opts.token_file,
					  .flag = "agent: --listen"};

		if (rw_http_check(&ho, verr, sizeof(verr)))
			return rw_fail(RW_EXIT_USAGE, "%s", verr);
	}
	if (a.view_opts.probe_listen) {
		struct rw_http_opts po = {.listen = a.view_opts.probe_listen,
					  .flag = "agent: --probe-listen",
					  .probes_only = true};

		if (rw_http_check(&po, verr, sizeof(verr)))
			return rw_fail(RW_EXIT_USAGE, "%s", verr);
	}

	/* Every refusal below leaves the node as it found it: checks that need nothing loaded
	 * come first, and a refusal after a first load removes what that load pinned.
	 */
	if (ct_sbx && ct_node && ct_sbx > ct_node)
		return rw_fail(RW_EXIT_USAGE,
			       "agent: --ct-per-sandbox %llu is more than the node's %llu "
			       "(--ct-node)",
			       ct_sbx, ct_node);
	if (socket_answers(rw_g.socket))
		return rw_fail(RW_EXIT_REFUSED, "%s: another agent answers on this socket",
			       rw_g.socket);
	fresh = rw_datapath_pinned_layout(rw_g.bpffs) == 0;

	a.mono_to_real = rw_mono_to_real_offset();
	err = rw_datapath_load_sized(&a.dp, rw_g.bpffs, 0, max_ep, msg, sizeof(msg));
	if (err) {
		rw_err("%s", msg);
		if (fresh && a.dp.pin_dir[0] == '\0')
			rw_datapath_unpin(rw_g.bpffs); /* what a failed first load left */
		return RW_EXIT_REFUSED;
	}
	rw_config_read(&a.dp, &cfg);
	if (have_rate) {
		cfg.event_rate = rate;
		cfg.event_burst = burst;
	}
	if (have_answer_rate) {
		cfg.answer_rate = answer_rate;
		cfg.answer_burst = answer_burst;
	}
	if (ct_sbx > 0)
		cfg.ct_per_sandbox = ct_sbx;
	if (ct_node > 0)
		cfg.ct_node = ct_node;
	if (cfg.ct_per_sandbox > cfg.ct_node) {
		rw_err("agent: --ct-per-sandbox %u is more than the node's %u (--ct-node)",
		       cfg.ct_per_sandbox, cfg.ct_node);
		ret = RW_EXIT_USAGE;
		goto refused;
	}
	if (max_ep) {
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(a.dp.map_fd[RW_M_ENDPOINTS], &info, &len) == 0 &&
		    info.max_entries != max_ep)
			rw_warn("--max-endpoints %llu: the pinned endpoint table holds %u veths and "
				"keeps that size (runwall detach, then start again, to change it)",
				max_ep, info.max_entries);
	}
	/* For runwall-cni: a pod created while this agent is away gets these programs. */
	err = rw_datapath_pin_progs(&a.dp);
	if (err) {
		rw_err("%s/%s: pinning the programs: %s", a.dp.pin_dir, RW_PROGS_DIR,
		       strerror(-err));
		goto refused;
	}
	if (RW_STATE_READY(cfg.state))
		rw_info("adopting %s: revision %llu in force", a.dp.pin_dir,
			(unsigned long long)RW_STATE_REVISION(cfg.state));
	else
		rw_info("%s: no snapshot applied yet: every sandbox packet is dropped not-ready",
			a.dp.pin_dir);
	if (have_rate || have_answer_rate || ct_sbx > 0 || ct_node > 0)
		rw_config_write(&a.dp, &cfg);

	a.ring = ring_buffer__new(a.dp.map_fd[RW_M_EVENTS], agent_ring_cb, &a, NULL);
	a.epfd = epoll_create1(EPOLL_CLOEXEC);
	err = rw_nl_sub_open(&a.nl);
	if (!a.ring || a.epfd < 0 || err) {
		rw_err("setting up: %s", strerror(err ? -err : errno));
		goto refused;
	}
	a.listen_fd = rw_ctl_listen(rw_g.socket);
	if (a.listen_fd < 0) {
		rw_err("%s: %s", rw_g.socket,
		       a.listen_fd == -EADDRINUSE ? "another agent answers on this socket"
						  : strerror(-a.listen_fd));
		goto refused;
	}
	/* Programs on every sandbox veth first, then the policy: a restarted agent swaps the
	 * programs of its predecessor's links in place, never detaching.
	 */
	if (agent_full_resync(&a))
		goto refused;
	err = agent_cni_watch(&a);
	if (err) {
		rw_err("--cni-conf-dir %s: %s", a.cni.conf_dir, strerror(-err));
		ret = RW_EXIT_USAGE;
		goto refused;
	}
	if (a.policy_path) {
		a.inotify_fd = agent_watch_policy(&a);
		if (a.inotify_fd < 0)
			rw_warn("%s: cannot watch for changes: %s", a.policy_path,
				strerror(-a.inotify_fd));
		agent_load_policy_file(&a, true);
	}
	if (a.view_opts.listen || a.view_opts.probe_listen || a.view_opts.request_url) {
		/* The HTTP and access-request threads inherit this thread's signal mask: block the
		 * signals agent_run() takes through its signalfd before they exist, or the kernel
		 * may deliver the kubelet's SIGTERM to one of them and kill the agent by the
		 * default action (exit 143, socket left behind) instead of a clean exit.
		 */
		sigset_t mask;

		sigemptyset(&mask);
		sigaddset(&mask, SIGINT);
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGHUP);
		sigprocmask(SIG_BLOCK, &mask, NULL);
		a.view = rw_agent_view_start(&a.view_opts, &a.dp, verr, sizeof(verr), &vusage);
		if (!a.view) {
			ret = rw_fail(vusage ? RW_EXIT_USAGE : RW_EXIT_REFUSED, "%s", verr);
			goto refused;
		}
		agent_view_publish(&a);
		if (a.view_opts.listen)
			rw_info("HTTP on %s: the page at /, the API under /api, /metrics, /healthz, "
				"/readyz%s",
				a.view_opts.listen,
				a.view_opts.token_file
					? " (bearer token required but for /healthz and /readyz)"
					: "");
		if (a.view_opts.probe_listen)
			rw_info("probes on %s: /healthz, /readyz", a.view_opts.probe_listen);
		if (a.view_opts.request_url)
			rw_info("network-access requests to %s", a.view_opts.request_url);
	}
	rw_info("agent running: %zu sandbox veths (prefix %s), socket %s", a.n_sbx, a.ifprefix,
		rw_g.socket);
	ret = agent_run(&a) ? RW_EXIT_REFUSED : RW_EXIT_OK;
	goto cleanup;

refused:
	/* A first start that cannot serve takes back the pins it made. */
	if (fresh) {
		rw_datapath_close(&a.dp);
		rw_detach_all(rw_g.bpffs);
		rw_datapath_unpin(rw_g.bpffs);
	}
cleanup:
	rw_agent_view_stop(a.view);
	while (a.n_subs)
		agent_sub_close(&a, 0);
	if (a.listen_fd >= 0) {
		close(a.listen_fd);
		unlink(rw_g.socket);
	}
	{
		int fds[] = {a.inotify_fd, a.cni.inotify_fd, a.tick_fd,
			     a.resync_fd,  a.sig_fd,	     a.epfd};

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

const struct rw_cmd rw_cmd_agent = {
	.name = "agent",
	.summary = "run the node agent (the DaemonSet's process)",
	.grammar =
		"agent [--policy FILE] [--ifprefix LIST] [--attach-mode auto|tcx|tc] "
		"[--resync SECONDS] [--event-rate N[/BURST]] [--answer-rate N[/BURST]] [--ct-per-sandbox N] [--ct-node N] "
		"[--max-endpoints N] [--cni-conf-dir DIR] "
		"[--listen ADDR:PORT] [--probe-listen ADDR:PORT] [--http-token-file FILE] "
		"[--events N] [--node NAME] "
		"[--access-request-url URL] [--access-request-queue N] [-v]",
	.options = agent_options,
	.func = cmd_agent,
};
