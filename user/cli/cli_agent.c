// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_agent.c: `runwall agent`: its options, checked before anything is loaded, into struct
 * agent_opts for rw_agent_run() (user/agent/agent_run.h, the agent's one entry point).
 */
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_run.h"
#include "cgroup2.h"
#include "commands.h"
#include "event_store.h"
#include "http.h"
#include "log.h"
#include "netlink.h" /* RW_DEFAULT_IFPREFIX */
#include "parse.h"
#include "runwall.h"
#include "util.h"

#define MAX_RESYNC_SEC 86400
#define MAX_EVENT_RATE 1000000
#define MAX_CT_FLOWS   (1u << 30)

static const char agent_usage[] =
	"agent [--policy FILE] [--ifprefix LIST] [--attach-mode auto|tcx|tc] "
	"[--resync SECONDS] [--event-rate N[/BURST]] [--answer-rate N[/BURST]] "
	"[--ct-per-sandbox N] [--ct-node N] "
	"[--max-endpoints N] [--cni-conf-dir DIR] [--containers DIR] "
	"[--cgroup-root DIR] "
	"[--listen ADDR:PORT] [--probe-listen ADDR:PORT] [--http-token-file FILE] "
	"[--events N] [--node NAME] "
	"[--access-request-url URL] [--access-request-queue N] "
	"[--policy-url URL [--policy-ack-url URL] [--policy-ca FILE] "
	"[--policy-cert FILE --policy-key FILE] [--policy-token-file FILE] "
	"[--policy-stall SECONDS]] [--flow-log FILE|- [--flow-log-flows] "
	"[--flow-log-rate N[/BURST]] [--flow-log-max-bytes N]] "
	"[--log-format text|json] [-v]";
static const char agent_options[] =
	"  --policy FILE          snapshot to apply at start and whenever it changes\n"
	"  --ifprefix LIST        interfaces to enforce on (default eni,vlan)\n"
	"  --cni-conf-dir DIR     keep runwall-cni chained in the CNI conf file the runtime\n"
	"                         loads from DIR, putting its entry back when it is rewritten\n"
	"  --containers DIR       the runtime's OCI bundles, one folder per container, from which\n"
	"                         the pods' containers are learned (default containerd's\n"
	"                         /run/containerd/io.containerd.runtime.v2.task/k8s.io)\n"
	"  --cgroup-root DIR      the cgroup v2 folder the bundles' cgroupsPath are under, or a\n"
	"                         hybrid host's cgroup folder whose unified/ is (default: where\n"
	"                         cgroup2 is mounted)\n"
	"  --attach-mode MODE     auto (tcx, else tc), tcx or tc (default auto)\n"
	"  --resync SECONDS       full resync period (default 10)\n"
	"  --event-rate N[/BURST] events per second per sandbox, for drops and for new flows\n"
	"                         each (default 200/400; 0: no limit)\n"
	"  --answer-rate N[/BURST] answers to refused packets (TCP resets, ICMP unreachables)\n"
	"                         per second per sandbox (default 100/100; 0: no limit)\n"
	"  --ct-per-sandbox N     flows one sandbox may track (default 8192; new tables)\n"
	"  --ct-node N            flows all sandboxes may track together (default 4194304)\n"
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
	"  --policy-url URL       follow the control plane (PolicyWatch, docs/policy-watch.md):\n"
	"                         one long-lived https GET of snapshots and per-run changes\n"
	"                         (plain http only to a literal loopback address)\n"
	"  --policy-ack-url URL   where outcomes are POSTed (default: the --policy-url path's\n"
	"                         last segment replaced by ack)\n"
	"  --policy-ca FILE       CA bundle the server's certificate must chain to, and the only\n"
	"                         one trusted (default: the system's CAs)\n"
	"  --policy-cert FILE, --policy-key FILE  client certificate (mutual TLS)\n"
	"  --policy-token-file FILE  bearer token sent with every request\n"
	"  --policy-stall SECONDS cut the stream after this long without a complete message,\n"
	"                         or without the answer's headers after the request\n"
	"                         (default 15; heartbeats expected every third of it)\n"
	"  --flow-log FILE|-      a JSON line per refused packet, with the node (docs/operations.md,\n"
	"                         \"Flow log\"); -: stdout; SIGHUP reopens FILE\n"
	"  --flow-log-flows       new flows too, not only refusals\n"
	"  --flow-log-rate N[/BURST] lines per second per sandbox (default 200/400; 0: no\n"
	"                         limit); the rest counted in a \"suppressed\" line\n"
	"  --flow-log-max-bytes N FILE renamed FILE.1 before it would pass N bytes (default\n"
	"                         104857600; 0: never)\n"
	"  --log-format text|json the agent's own log lines on stderr (default text)\n"
	"  -v, --verbose          more log lines (-vv: libbpf's debug too)\n";

/* The long options' codes (-v and -h are their short letters). */
enum {
	OPT_POLICY = 1000,
	OPT_IFPREFIX,
	OPT_CNI_CONF_DIR,
	OPT_ATTACH_MODE,
	OPT_RESYNC,
	OPT_EVENT_RATE,
	OPT_ANSWER_RATE,
	OPT_CT_PER_SANDBOX,
	OPT_CT_NODE,
	OPT_MAX_ENDPOINTS,
	OPT_LISTEN,
	OPT_PROBE_LISTEN,
	OPT_HTTP_TOKEN_FILE,
	OPT_EVENTS,
	OPT_NODE,
	OPT_ACCESS_REQUEST_URL,
	OPT_ACCESS_REQUEST_QUEUE,
	OPT_POLICY_URL,
	OPT_POLICY_ACK_URL,
	OPT_POLICY_CA,
	OPT_POLICY_CERT,
	OPT_POLICY_KEY,
	OPT_POLICY_TOKEN_FILE,
	OPT_POLICY_STALL,
	OPT_FLOW_LOG,
	OPT_FLOW_LOG_FLOWS,
	OPT_FLOW_LOG_RATE,
	OPT_FLOW_LOG_MAX_BYTES,
	OPT_LOG_FORMAT,
	OPT_CONTAINERS,
	OPT_CGROUP_ROOT,
};

static const struct option agent_long_opts[] = {
	{"policy", required_argument, NULL, OPT_POLICY},
	{"ifprefix", required_argument, NULL, OPT_IFPREFIX},
	{"cni-conf-dir", required_argument, NULL, OPT_CNI_CONF_DIR},
	{"containers", required_argument, NULL, OPT_CONTAINERS},
	{"cgroup-root", required_argument, NULL, OPT_CGROUP_ROOT},
	{"attach-mode", required_argument, NULL, OPT_ATTACH_MODE},
	{"resync", required_argument, NULL, OPT_RESYNC},
	{"event-rate", required_argument, NULL, OPT_EVENT_RATE},
	{"answer-rate", required_argument, NULL, OPT_ANSWER_RATE},
	{"ct-per-sandbox", required_argument, NULL, OPT_CT_PER_SANDBOX},
	{"ct-node", required_argument, NULL, OPT_CT_NODE},
	{"max-endpoints", required_argument, NULL, OPT_MAX_ENDPOINTS},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"health", required_argument, NULL, OPT_LISTEN}, /* the old name of --listen */
	{"probe-listen", required_argument, NULL, OPT_PROBE_LISTEN},
	{"http-token-file", required_argument, NULL, OPT_HTTP_TOKEN_FILE},
	{"events", required_argument, NULL, OPT_EVENTS},
	{"node", required_argument, NULL, OPT_NODE},
	{"access-request-url", required_argument, NULL, OPT_ACCESS_REQUEST_URL},
	{"access-request-queue", required_argument, NULL, OPT_ACCESS_REQUEST_QUEUE},
	{"policy-url", required_argument, NULL, OPT_POLICY_URL},
	{"policy-ack-url", required_argument, NULL, OPT_POLICY_ACK_URL},
	{"policy-ca", required_argument, NULL, OPT_POLICY_CA},
	{"policy-cert", required_argument, NULL, OPT_POLICY_CERT},
	{"policy-key", required_argument, NULL, OPT_POLICY_KEY},
	{"policy-token-file", required_argument, NULL, OPT_POLICY_TOKEN_FILE},
	{"policy-stall", required_argument, NULL, OPT_POLICY_STALL},
	{"flow-log", required_argument, NULL, OPT_FLOW_LOG},
	{"flow-log-flows", no_argument, NULL, OPT_FLOW_LOG_FLOWS},
	{"flow-log-rate", required_argument, NULL, OPT_FLOW_LOG_RATE},
	{"flow-log-max-bytes", required_argument, NULL, OPT_FLOW_LOG_MAX_BYTES},
	{"log-format", required_argument, NULL, OPT_LOG_FORMAT},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{}};

/* The options that take their argument as it is: where each goes in struct agent_opts. */
static const struct {
	int opt;
	size_t off;
} agent_text_opts[] = {
	{OPT_POLICY, offsetof(struct agent_opts, policy_path)},
	{OPT_IFPREFIX, offsetof(struct agent_opts, ifprefix)},
	{OPT_CNI_CONF_DIR, offsetof(struct agent_opts, cni_conf_dir)},
	{OPT_CONTAINERS, offsetof(struct agent_opts, containers_dir)},
	{OPT_CGROUP_ROOT, offsetof(struct agent_opts, cgroup_root)},
	{OPT_LISTEN, offsetof(struct agent_opts, view.listen)},
	{OPT_PROBE_LISTEN, offsetof(struct agent_opts, view.probe_listen)},
	{OPT_HTTP_TOKEN_FILE, offsetof(struct agent_opts, view.token_file)},
	{OPT_ACCESS_REQUEST_URL, offsetof(struct agent_opts, view.request_url)},
	{OPT_POLICY_URL, offsetof(struct agent_opts, watch.url)},
	{OPT_POLICY_ACK_URL, offsetof(struct agent_opts, watch.ack_url)},
	{OPT_POLICY_CA, offsetof(struct agent_opts, watch.ca)},
	{OPT_POLICY_CERT, offsetof(struct agent_opts, watch.cert)},
	{OPT_POLICY_KEY, offsetof(struct agent_opts, watch.key)},
	{OPT_POLICY_TOKEN_FILE, offsetof(struct agent_opts, watch.token_file)},
};

/* --NAME's argument as a whole number from min to max: 0, or the exit code of the refusal
 * "expected [UNIT, ]MIN to MAX".
 */
static int agent_uint(const char *name, const char *unit, unsigned long long min,
		      unsigned long long max, unsigned long long *v)
{
	if (!rw_parse_uint(optarg, max, v) && *v >= min)
		return 0;
	return rw_fail(RW_EXIT_USAGE, "agent: --%s '%s': expected %s%s%llu to %llu", name, optarg,
		       unit, *unit ? ", " : "", min, max);
}

/* --NAME's argument as a budget, N or N/BURST: 0, or the exit code of the refusal. */
static int agent_rate(const char *name, unsigned long long *rate, unsigned long long *burst)
{
	if (!rw_parse_rate(optarg, MAX_EVENT_RATE, rate, burst))
		return 0;
	return rw_fail(RW_EXIT_USAGE,
		       "agent: --%s '%s': expected N or N/BURST, 0 to %d (BURST at least 1)", name,
		       optarg, MAX_EVENT_RATE);
}

/* The parse of one option into *a (node: --node's buffer): 0, the exit code of a refusal that
 * names the option and what it expects, or -1 for what is no option of the agent.
 */
static int agent_option(int c, struct agent_opts *a, char *node, size_t node_len,
			bool *flow_log_opt)
{
	static const char *const log_formats[] = {[RW_LOG_TEXT] = "text", [RW_LOG_JSON] = "json"};
	static const char *const attach_modes[] = {
		[RW_ATTACH_AUTO] = "auto", [RW_ATTACH_TCX] = "tcx", [RW_ATTACH_TC] = "tc"};
	unsigned long long v;
	char msg[256];
	int err;

	for (size_t i = 0; i < sizeof(agent_text_opts) / sizeof(agent_text_opts[0]); i++) {
		if (agent_text_opts[i].opt == c) {
			*(const char **)((char *)a + agent_text_opts[i].off) = optarg;
			return 0;
		}
	}
	switch (c) {
	case 'v':
		rw_log_verbosity++;
		return 0;
	case OPT_ATTACH_MODE:
		err = rw_name_lookup(optarg, "--attach-mode", attach_modes,
				     sizeof(attach_modes) / sizeof(attach_modes[0]), msg,
				     sizeof(msg));
		if (err < 0)
			return rw_fail(RW_EXIT_USAGE, "agent: %s", msg);
		a->attach_mode = err;
		return 0;
	case OPT_RESYNC:
		err = agent_uint("resync", "seconds", 1, MAX_RESYNC_SEC, &v);
		if (!err)
			a->resync_sec = (int)v;
		return err;
	case OPT_EVENT_RATE:
		err = agent_rate("event-rate", &a->rate, &a->burst);
		if (!err)
			a->have_rate = true;
		return err;
	case OPT_ANSWER_RATE:
		err = agent_rate("answer-rate", &a->answer_rate, &a->answer_burst);
		if (!err)
			a->have_answer_rate = true;
		return err;
	case OPT_CT_PER_SANDBOX:
	case OPT_CT_NODE:
		err = agent_uint(c == OPT_CT_PER_SANDBOX ? "ct-per-sandbox" : "ct-node",
				 "a number of flows", 1, MAX_CT_FLOWS, &v);
		if (!err)
			*(c == OPT_CT_PER_SANDBOX ? &a->ct_per_sandbox : &a->ct_node) = v;
		return err;
	case OPT_MAX_ENDPOINTS:
		err = agent_uint("max-endpoints", "a number of veths", 1, RW_MAX_ENDPOINTS, &v);
		if (!err)
			a->max_endpoints = v;
		return err;
	case OPT_NODE:
		if (!*optarg || strlen(optarg) >= node_len)
			return rw_fail(RW_EXIT_USAGE,
				       "agent: --node '%s': expected 1 to %zu "
				       "characters",
				       optarg, node_len - 1);
		snprintf(node, node_len, "%s", optarg);
		return 0;
	case OPT_EVENTS:
		err = agent_uint("events", "", 1, RW_EVSTORE_MAX, &v);
		if (!err)
			a->view.events = v;
		return err;
	case OPT_ACCESS_REQUEST_QUEUE:
		err = agent_uint("access-request-queue", "", 1, RW_AGENT_REQUEST_QUEUE_MAX, &v);
		if (!err)
			a->view.request_queue = v;
		return err;
	case OPT_POLICY_STALL:
		err = agent_uint("policy-stall", "seconds", 3, 3600, &v);
		if (!err)
			a->watch.stall_sec = v;
		return err;
	case OPT_FLOW_LOG:
		if (!*optarg)
			return rw_fail(RW_EXIT_USAGE, "agent: --flow-log '': expected FILE or -");
		a->flow_log.path = optarg;
		return 0;
	case OPT_FLOW_LOG_FLOWS:
		a->flow_log.flows = *flow_log_opt = true;
		return 0;
	case OPT_FLOW_LOG_RATE:
		err = agent_rate("flow-log-rate", &a->flow_log.rate, &a->flow_log.burst);
		if (!err)
			*flow_log_opt = true;
		return err;
	case OPT_FLOW_LOG_MAX_BYTES:
		if (rw_parse_uint(optarg, 1ull << 50, &v) || (v && v < 4096))
			return rw_fail(RW_EXIT_USAGE,
				       "agent: --flow-log-max-bytes '%s': expected 0 or "
				       "4096 to 2^50 bytes",
				       optarg);
		a->flow_log.max_bytes = v;
		*flow_log_opt = true;
		return 0;
	case OPT_LOG_FORMAT:
		err = rw_name_lookup(optarg, "--log-format", log_formats, 2, msg, sizeof(msg));
		if (err < 0)
			return rw_fail(RW_EXIT_USAGE, "agent: %s", msg);
		rw_log_set_format(err);
		return 0;
	default:
		return -1;
	}
}

/* What one option alone cannot check: options that need another, and the listeners' addresses.
 * Nothing is loaded yet, so a refusal leaves the node as it found it.
 */
static int agent_check(struct agent_opts *a, char *node, size_t node_len, bool flow_log_opt)
{
	char verr[400], root[PATH_MAX];

	if (flow_log_opt && !a->flow_log.path)
		return rw_fail(RW_EXIT_USAGE, "agent: the --flow-log-* options need --flow-log");
	if (a->view.token_file && !a->view.listen)
		return rw_fail(RW_EXIT_USAGE, "agent: --http-token-file needs --listen");
	if (!node[0] && gethostname(node, node_len - 1))
		snprintf(node, node_len, "node");
	a->view.node = node;
	if (!a->watch.url && (a->watch.ack_url || a->watch.ca || a->watch.cert || a->watch.key ||
			      a->watch.token_file || a->watch.stall_sec))
		return rw_fail(RW_EXIT_USAGE, "agent: the --policy-* options need --policy-url");
	if (a->watch.url) {
		const char *seed = getenv("RW_SEED");

		a->watch.node = node;
		/* The backoff's jitter: RW_SEED makes a test's reconnections the same every run. */
		a->watch.seed = seed && *seed ? (unsigned int)strtoul(seed, NULL, 0)
					      : (unsigned int)(time(NULL) ^ getpid());
	}
	if (a->view.listen) {
		struct rw_http_opts ho = {.listen = a->view.listen,
					  .token_file = a->view.token_file,
					  .flag = "agent: --listen"};

		if (rw_http_check(&ho, verr, sizeof(verr)))
			return rw_fail(RW_EXIT_USAGE, "%s", verr);
	}
	if (a->view.probe_listen) {
		struct rw_http_opts po = {.listen = a->view.probe_listen,
					  .flag = "agent: --probe-listen",
					  .probes_only = true};

		if (rw_http_check(&po, verr, sizeof(verr)))
			return rw_fail(RW_EXIT_USAGE, "%s", verr);
	}
	if (a->cgroup_root &&
	    rw_cgroup2_root(a->cgroup_root, root, sizeof(root), verr, sizeof(verr)))
		return rw_fail(RW_EXIT_USAGE, "agent: --cgroup-root %s", verr);
	if (a->ct_per_sandbox && a->ct_node && a->ct_per_sandbox > a->ct_node)
		return rw_fail(RW_EXIT_USAGE,
			       "agent: --ct-per-sandbox %llu is more than the node's %llu "
			       "(--ct-node)",
			       a->ct_per_sandbox, a->ct_node);
	return 0;
}

static int cmd_agent(int argc, char **argv)
{
	struct agent_opts a = {.ifprefix = RW_DEFAULT_IFPREFIX,
			       .resync_sec = 10,
			       .flow_log = {.rate = RW_FLOW_LOG_RATE,
					    .burst = RW_FLOW_LOG_BURST,
					    .max_bytes = RW_FLOW_LOG_MAX_BYTES}};
	char node[RW_NODE_LEN] = "", verr[400];
	bool flow_log_opt = false;
	int c, ret;

	/* The key of the tables a sandbox's traffic fills, taken before any of it is seen. */
	(void)rw_hash_key();
	while ((c = getopt_long(argc, argv, "vh", agent_long_opts, NULL)) != -1) {
		ret = agent_option(c, &a, node, sizeof(node), &flow_log_opt);
		if (ret < 0)
			return rw_cmd_option_end(&rw_cmd_agent, c, argv);
		if (ret)
			return ret;
	}
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_agent, "unexpected argument '%s'", argv[optind]);
	ret = agent_check(&a, node, sizeof(node), flow_log_opt);
	if (ret)
		return ret;
	a.bpffs = rw_g.bpffs;
	a.socket = rw_g.socket;
	verr[0] = '\0';
	ret = rw_agent_run(&a, verr, sizeof(verr));
	if (verr[0])
		return rw_fail(ret, "%s", verr);
	return ret;
}

RW_COMMAND(agent, .summary = "run the node agent (the DaemonSet's process)", .grammar = agent_usage,
	   .options = agent_options);
