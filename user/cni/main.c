/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* runwall-cni: a CNI plugin chained after the node's network plugin (the VPC CNI), so that a
 * sandbox pod's veth is enforced before the pod's first packet, whether or not the agent runs.
 *
 *   ADD    attach the programs pinned under "bpffs" to the host-side veth of prevResult, bind
 *          the pod IP, pass prevResult on. Fails (and the runtime retries) when runwall is not
 *          set up on the node or the attach fails: the pod never runs unprotected.
 *   DEL    unbind the veth (and forget what runwall held for veths that are gone); succeeds
 *          when there is nothing left to do.
 *   CHECK  runwall's program first on both hooks, and the pod IP bound.
 *   VERSION
 *
 *   runwall-cni install --bin-dir DIR --conf-dir DIR [--bpffs DIR] [--ifprefix LIST]
 *                       [--attach-mode auto|tcx|tc]
 *   runwall-cni uninstall --bin-dir DIR --conf-dir DIR
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "conf.h"
#include "datapath.h"
#include "install.h"
#include "log.h"
#include "netlink.h"
#include "reasons.h"
#include "veth.h"

/* The veth lock (rw_veth_lock()): the agent holds it for one veth's change at a time. */
#define CNI_LOCK_MS 10000

/* The CNI error result (spec "Error"), on stdout; the exit code is non-zero. */
static int cni_error(const char *version, int code, const char *msg, const char *fmt, ...)
{
	char details[512] = "";
	json_t *o;

	if (fmt) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(details, sizeof(details), fmt, ap);
		va_end(ap);
	}
	o = json_pack("{s:s, s:i, s:s, s:s}", "cniVersion", version && *version ? version : "1.0.0",
		      "code", code, "msg", msg, "details", details);
	if (o) {
		json_dumpf(o, stdout, JSON_COMPACT);
		fputc('\n', stdout);
		json_decref(o);
	}
	rw_err("%s: %s", msg, details);
	fflush(stdout);
	return 1;
}

static int cni_version(void)
{
	printf("{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\","
	       "\"1.0.0\"]}\n");
	return 0;
}

static int read_stdin(char **out, size_t *len)
{
	size_t cap = 1 << 14, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		size_t got;

		if (n == cap) {
			char *grown;

			if (cap >= RW_CNI_MAX_INPUT) {
				free(buf);
				return -EFBIG;
			}
			grown = realloc(buf, cap * 2);
			if (!grown) {
				free(buf);
				return -ENOMEM;
			}
			buf = grown;
			cap *= 2;
		}
		got = fread(buf + n, 1, cap - n, stdin);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(stdin)) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* Open the node's runwall: pinned maps of our layout and the agent's pinned programs. */
static int open_node(const struct rw_cni_req *req, struct rw_datapath *dp, bool progs)
{
	char msg[512];
	int err = rw_datapath_open_pinned(dp, req->bpffs, msg, sizeof(msg));

	if (err == -EPROTO)
		return cni_error(
			req->cni_version, RW_CNI_E_LAYOUT,
			"runwall on this node has another layout",
			"%s (this runwall-cni reads layout %d): update runwall-cni with the "
			"agent",
			msg, RW_LAYOUT_VERSION);
	if (err)
		return cni_error(req->cni_version, RW_CNI_E_TRY_LATER,
				 "runwall is not set up on this node",
				 "%s: no runwall maps pinned there (%s): the runwall agent has not "
				 "run on this node, or \"bpffs\" names another folder",
				 req->bpffs, msg);
	if (progs) {
		err = rw_datapath_open_pinned_progs(dp, msg, sizeof(msg));
		if (err) {
			rw_datapath_close(dp);
			return cni_error(req->cni_version, RW_CNI_E_TRY_LATER,
					 "runwall is not set up on this node",
					 "the agent's programs are not pinned: %s", msg);
		}
	}
	return 0;
}

/* The veth lock (rw_veth_lock()), or -1 with the error result written and dp closed. */
static int lock_node(const struct rw_cni_req *req, struct rw_datapath *dp)
{
	int lock = rw_veth_lock(req->bpffs, CNI_LOCK_MS);

	if (lock < 0) {
		rw_datapath_close(dp);
		cni_error(req->cni_version, RW_CNI_E_TRY_LATER, "runwall's veth lock is held",
			  "%s: %s after %d ms", req->bpffs, strerror(-lock), CNI_LOCK_MS);
		return -1;
	}
	return lock;
}

/* open_node() with the programs, then the pod's host-side veth: its ifindex, or 0 with the error
 * result written and nothing left open.
 */
static int open_veth(const struct rw_cni_req *req, struct rw_datapath *dp)
{
	int ifindex;

	if (open_node(req, dp, true))
		return 0;
	ifindex = if_nametoindex(req->host_if);
	if (!ifindex) {
		cni_error(req->cni_version, RW_CNI_E_PREV, "the pod's host-side veth is missing",
			  "prevResult names %s: %s", req->host_if, strerror(errno));
		rw_datapath_close(dp);
	}
	return ifindex;
}

static int print_prev(const struct rw_cni_req *req)
{
	json_object_set_new(req->prev, "cniVersion", json_string(req->cni_version));
	if (json_dumpf(req->prev, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER))
		return cni_error(req->cni_version, RW_CNI_E_IO, "writing the result", "stdout");
	fputc('\n', stdout);
	return fflush(stdout) ? 1 : 0;
}

static int require_prev(const struct rw_cni_req *req, const char *cmd)
{
	if (!req->prev)
		return cni_error(
			req->cni_version, RW_CNI_E_CONFIG, "no prevResult",
			"%s: runwall-cni must be chained after the plugin that creates the "
			"pod's veth (the VPC CNI), in a conflist",
			cmd);
	if (!req->prev_complete)
		return cni_error(req->cni_version, RW_CNI_E_PREV,
				 "prevResult names no host veth and pod address to bind", "%s",
				 req->prev_error);
	return 0;
}

/* The pod's addresses of prevResult as a binding (no gateway). */
static struct rw_endpoint req_endpoint(const struct rw_cni_req *req)
{
	struct rw_endpoint ep = {};

	if (req->has_ip4) {
		ep.pod_ip = req->pod_ip;
		ep.flags |= RW_EP_IP4;
	}
	if (req->has_ip6) {
		memcpy(ep.pod_ip6, req->pod_ip6, sizeof(ep.pod_ip6));
		ep.flags |= RW_EP_IP6;
	}
	return ep;
}

/* Whether the binding holds exactly the pod's addresses (its gateway aside). */
static bool binds_pod(const struct rw_endpoint *bound, const struct rw_cni_req *req)
{
	struct rw_endpoint want = req_endpoint(req), b = *bound;

	b.flags &= ~RW_EP_GW6;
	memset(b.gw_ip6, 0, sizeof(b.gw_ip6));
	return rw_endpoint_same(&b, &want);
}

static int cmd_add(struct rw_cni_req *req)
{
	enum rw_attach_mode used[RW_DIR_COUNT];
	struct rw_datapath dp;
	struct rw_endpoint want = req_endpoint(req);
	char ip[RW_EP_STRLEN], why[200];
	int ifindex, err, errs[RW_DIR_COUNT] = {}, dir = -1, lock;

	if (require_prev(req, "ADD"))
		return 1;
	/* The agent keeps only the veths its --ifprefix names, and takes runwall off the others
	 * at its next resync: a pod on such a veth would be protected only until then.
	 */
	if (!rw_ifname_match(req->host_if, req->ifprefix))
		return cni_error(req->cni_version, RW_CNI_E_CONFIG,
				 "the pod's veth is not one the agent keeps",
				 "%s does not start with a prefix of ifPrefix \"%s\" (the agent's "
				 "--ifprefix)",
				 req->host_if, req->ifprefix);
	ifindex = open_veth(req, &dp);
	if (!ifindex)
		return 1;
	/* The host veth's own link-local address is the pod's IPv6 gateway, which no NDP message
	 * of the pod may claim. None yet (the link not up): the agent adds it when it comes.
	 */
	if (!rw_nl_link_local6(ifindex, want.gw_ip6))
		want.flags |= RW_EP_GW6;
	else
		memset(want.gw_ip6, 0, sizeof(want.gw_ip6));
	rw_endpoint_str(&want, false, ip, sizeof(ip));
	/* Under the veth lock, which the agent takes for every change it makes to a veth: its
	 * stale events about the veth that had this ifindex before cannot undo what is done here.
	 */
	lock = lock_node(req, &dp);
	if (lock < 0)
		return 1;
	/* A runwall-cni of another version, or an agent without the lock, may attach to the same
	 * new veth at the same moment: whichever comes second finds the program already on the
	 * hook (-EEXIST) before the other's link is pinned. Once it is pinned, attaching again is
	 * a no-op.
	 */
	for (int tries = 0;; tries++) {
		err = rw_veth_protect_addrs(&dp, ifindex, &want, req->mode, used, errs);
		if (err != -EEXIST || tries == 20)
			break;
		usleep(50 * 1000);
	}
	rw_veth_unlock(lock);
	for (int d = RW_DIR_COUNT - 1; d >= 0; d--)
		if (errs[d])
			dir = d;
	/* A binding refused for want of room says which limit ("endpoint table full (4096)"). */
	if (err && dir < 0)
		rw_bind_error_str(&dp, err, why, sizeof(why));
	rw_datapath_close(&dp);
	if (err)
		return cni_error(req->cni_version, RW_CNI_E_ATTACH,
				 "runwall could not protect the pod's veth",
				 "%s (ifindex %d), pod %s: %s%s: %s", req->host_if, ifindex, ip,
				 dir >= 0 ? "attaching the " : "binding",
				 dir >= 0 ? rw_dir_name(dir) : "",
				 dir >= 0 ? rw_attach_strerror(err) : why);
	rw_info("%s (ifindex %d): attached (%s, %s), bound to pod %s", req->host_if, ifindex,
		rw_attach_mode_str(used[RW_DIR_EGRESS]), rw_attach_mode_str(used[RW_DIR_INGRESS]),
		ip);
	return print_prev(req);
}

static int cmd_check(struct rw_cni_req *req)
{
	struct rw_veth_state st;
	struct rw_datapath dp;
	struct rw_endpoint want = req_endpoint(req);
	char ip[RW_EP_STRLEN], bound[RW_EP_STRLEN];
	int ifindex, err;

	if (!rw_cni_version_has_check(req->cni_version))
		return cni_error(req->cni_version, RW_CNI_E_VERSION, "CHECK is not in this version",
				 "cniVersion %s: CHECK needs 0.4.0 or later", req->cni_version);
	if (require_prev(req, "CHECK"))
		return 1;
	ifindex = open_veth(req, &dp);
	if (!ifindex)
		return 1;
	err = rw_veth_query(&dp, ifindex, &st);
	rw_datapath_close(&dp);
	if (err)
		return cni_error(req->cni_version, RW_CNI_E_CHECK, "cannot query the pod's veth",
				 "%s: %s", req->host_if, strerror(-err));
	rw_endpoint_str(&want, false, ip, sizeof(ip));
	rw_endpoint_str(&st.ep, false, bound, sizeof(bound));
	for (int d = 0; d < RW_DIR_COUNT; d++)
		if (!st.first[d])
			return cni_error(
				req->cni_version, RW_CNI_E_CHECK, "the pod's veth is not protected",
				"%s: runwall's %s program is %s", req->host_if, rw_dir_name(d),
				st.found[d] ? "not first on its hook" : "not attached");
	if (!binds_pod(&st.ep, req))
		return cni_error(req->cni_version, RW_CNI_E_CHECK, "the pod's veth is not bound",
				 "%s: bound to %s, the pod is %s", req->host_if, bound, ip);
	if ((req->has_ip4 && !st.ct_table) || (req->has_ip6 && !st.ct_table6))
		return cni_error(
			req->cni_version, RW_CNI_E_CHECK, "the pod's veth has no conntrack table",
			"%s: bound to %s but without its own %s conntrack table (every %s flow of "
			"the pod is refused)",
			req->host_if, ip, req->has_ip4 && !st.ct_table ? "IPv4" : "IPv6",
			req->has_ip4 && !st.ct_table ? "IPv4" : "IPv6");
	return 0;
}

static int cmd_del(struct rw_cni_req *req)
{
	struct rw_datapath dp;
	struct rw_endpoint bound;
	int ifindex, err, lock, layout = rw_datapath_pinned_layout(req->bpffs);

	/* Nothing of runwall's on the node: nothing to undo. Pins of another layout: nothing this
	 * plugin can undo, and a failed DEL would be retried forever.
	 */
	if (layout <= 0)
		return 0;
	if (layout != RW_LAYOUT_VERSION) {
		rw_warn("%s: pinned maps have layout %d, this runwall-cni reads %d: nothing unbound",
			req->bpffs, layout, RW_LAYOUT_VERSION);
		return 0;
	}
	if (open_node(req, &dp, false))
		return 1;
	lock = lock_node(req, &dp);
	if (lock < 0)
		return 1;
	err = 0;
	/* The veth stays deny-all (its programs stay) until the plugin before us deletes it:
	 * taking them off would open it for that moment.
	 */
	ifindex = req->prev_complete ? (int)if_nametoindex(req->host_if) : 0;
	if (ifindex && rw_endpoint_get(&dp, ifindex, &bound) == 0 && binds_pod(&bound, req))
		err = rw_endpoint_unbind(&dp, ifindex);
	/* Under the lock: no veth made since with a gone veth's ifindex can be protected (by
	 * runwall-cni or the agent) between the check that it is gone and the removal.
	 */
	if (!err)
		err = rw_veth_prune_gone(&dp);
	rw_veth_unlock(lock);
	rw_datapath_close(&dp);
	if (err)
		return cni_error(req->cni_version, RW_CNI_E_ATTACH, "unbinding the pod failed",
				 "%s: %s", req->host_if, strerror(-err));
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: runwall-cni                     (a CNI plugin: CNI_COMMAND=ADD|DEL|CHECK|VERSION, config on stdin)\n"
		"       runwall-cni install --bin-dir DIR --conf-dir DIR [--bpffs DIR] [--ifprefix LIST]\n"
		"                           [--attach-mode auto|tcx|tc]\n"
		"       runwall-cni uninstall --bin-dir DIR --conf-dir DIR\n");
}

static int cmd_admin(int argc, char **argv)
{
	/* Every option but --help takes a string, kept in val[] at the option's place. */
	enum { BIN_DIR, CONF_DIR, BPFFS, IFPREFIX, MODE, N_VALS };
	static const struct option opts[] = {[BIN_DIR] = {"bin-dir", required_argument, NULL, 0},
					     [CONF_DIR] = {"conf-dir", required_argument, NULL, 0},
					     [BPFFS] = {"bpffs", required_argument, NULL, 0},
					     [IFPREFIX] = {"ifprefix", required_argument, NULL, 0},
					     [MODE] = {"attach-mode", required_argument, NULL, 0},
					     [N_VALS] = {"help", no_argument, NULL, 'h'},
					     {}};
	const char *val[N_VALS] = {0}, *bin_dir, *conf_dir, *bpffs, *ifprefix, *mode;
	bool install = !strcmp(argv[1], "install");
	char err[768];
	json_t *entry;
	int c, at, ret;

	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, &at)) != -1) {
		if (c == 0) {
			val[at] = optarg;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	bin_dir = val[BIN_DIR];
	conf_dir = val[CONF_DIR];
	bpffs = val[BPFFS];
	ifprefix = val[IFPREFIX];
	mode = val[MODE];
	if (optind < argc || !bin_dir || !conf_dir || (!install && (bpffs || ifprefix || mode))) {
		fprintf(stderr, "runwall-cni: %s: %s\n", argv[1],
			optind < argc ? "unexpected argument"
			: !bin_dir || !conf_dir
				? "--bin-dir and --conf-dir are required"
				: "--bpffs, --ifprefix and --attach-mode are for install");
		usage(stderr);
		return 2;
	}
	if (!install) {
		ret = rw_cni_uninstall(bin_dir, conf_dir, err, sizeof(err));
		if (ret) {
			fprintf(stderr, "runwall-cni: uninstall: %s\n", err);
			return 1;
		}
		printf("runwall-cni: removed from %s and %s\n", bin_dir, conf_dir);
		return 0;
	}
	if (mode && strcmp(mode, "auto") && strcmp(mode, "tcx") && strcmp(mode, "tc")) {
		fprintf(stderr,
			"runwall-cni: install: --attach-mode %s: not one of auto, tcx, tc\n", mode);
		return 2;
	}
	if (bpffs && bpffs[0] != '/') {
		fprintf(stderr, "runwall-cni: install: --bpffs %s: not an absolute path\n", bpffs);
		return 2;
	}
	entry = json_pack("{s:s}", "type", RW_CNI_TYPE);
	if (bpffs)
		json_object_set_new(entry, "bpffs", json_string(bpffs));
	if (ifprefix)
		json_object_set_new(entry, "ifPrefix", json_string(ifprefix));
	if (mode)
		json_object_set_new(entry, "attachMode", json_string(mode));
	ret = rw_cni_install("/proc/self/exe", bin_dir, conf_dir, entry, err, sizeof(err));
	json_decref(entry);
	if (ret) {
		fprintf(stderr, "runwall-cni: install: %s\n", err);
		return 1;
	}
	printf("runwall-cni: installed in %s and %s\n", bin_dir, conf_dir);
	return 0;
}

/* The library's log lines go to stderr, the runtime's log. */
static void print_stderr(enum rw_log_level level, const char *line)
{
	fputs(line, stderr);
}

int main(int argc, char **argv)
{
	const char *cmd = getenv("CNI_COMMAND");
	struct rw_cni_req req;
	char err[512], *buf;
	size_t len;
	int code, ret;

	if (argc > 1 && (!strcmp(argv[1], "install") || !strcmp(argv[1], "uninstall")))
		return cmd_admin(argc, argv);
	if (argc > 1) {
		usage(!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ? stdout : stderr);
		return strcmp(argv[1], "--help") && strcmp(argv[1], "-h") ? 2 : 0;
	}
	/* stdout carries the result and nothing else; messages go to stderr (the runtime's log). */
	rw_log_set_print(print_stderr);
	rw_log_setup_libbpf();
	if (!cmd || !*cmd)
		return cni_error(NULL, RW_CNI_E_ENV, "CNI_COMMAND is not set",
				 "runwall-cni is a CNI plugin; see runwall-cni --help");
	if (!strcmp(cmd, "VERSION"))
		return cni_version();
	if (strcmp(cmd, "ADD") && strcmp(cmd, "DEL") && strcmp(cmd, "CHECK"))
		return cni_error(NULL, RW_CNI_E_ENV, "CNI_COMMAND is not one runwall-cni knows",
				 "CNI_COMMAND=%.32s (ADD, DEL, CHECK, VERSION)", cmd);
	ret = read_stdin(&buf, &len);
	if (ret)
		return cni_error(NULL, RW_CNI_E_IO, "reading the network config", "stdin: %s",
				 strerror(-ret));
	code = rw_cni_parse(buf, len, &req, err, sizeof(err));
	free(buf);
	if (code)
		return cni_error(NULL, code, "invalid network config", "%s", err);
	if (!strcmp(cmd, "ADD"))
		ret = cmd_add(&req);
	else if (!strcmp(cmd, "CHECK"))
		ret = cmd_check(&req);
	else
		ret = cmd_del(&req);
	rw_cni_req_free(&req);
	return ret;
}
