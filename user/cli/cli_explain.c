// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_explain.c: `runwall explain`: why a packet would be allowed or refused, answered by the
 * production programs themselves. A private copy of them is loaded with rw_dry_run set (it
 * judges but changes nothing: no counters, conntrack or events) and run on a crafted packet
 * through BPF_PROG_TEST_RUN, on the maps pinned by the agent (the policy in force) and/or on
 * private maps filled from a policy file ("what would this change do").
 *
 * Exit codes: 0 allowed, 1 refused (or the question cannot be answered here), 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <net/if.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_text.h"
#include "cli_probe.h"
#include "cli_pins.h"
#include "cli_private.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "policy.h"
#include "reasons.h"
#include "runwall.skel.h"

#define DEFAULT_SPORT 40000

static const char explain_usage[] =
	"explain {--pod IP | --run ID} DST PORT [tcp|udp|icmpv6] "
	"[--ingress] [--sport N] [--flags syn|ack|synack] [--policy FILE]";
static const char explain_options[] =
	"  --pod IP          the pod whose packet it is (IPv4 or IPv6, DST's family)\n"
	"  --run ID          or the run's first pod of DST's family bound to a veth here\n"
	"  DST PORT          the peer and the port; then tcp (default) or udp\n"
	"  DST TYPE icmpv6   or an ICMPv6 message of that type (IPv6)\n"
	"  --ingress         from the peer DST to the pod's PORT\n"
	"  --egress          from the pod to DST:PORT (the default)\n"
	"  --sport N         the source port (default 40000)\n"
	"  --flags F         syn (default), ack or synack\n"
	"  --policy FILE     also judge the packet under FILE's snapshot (nothing live changes)\n";

/* Addresses of either family (ipaddr.h); the pod's and DST's are of one family. */
struct question {
	bool has_pod;
	struct rw_ip pod;
	const char *run;
	struct rw_ip dst;
	__u16 dport;
	__u16 sport;
	__u8 proto;
	__u8 flags;
	bool flags_set;
	bool ingress;
	const char *policy;
};

/* Ingress: from the peer DST into the pod's PORT. */
static void make_probe(const struct question *q, const struct rw_ip *pod, struct rw_cli_probe *p)
{
	rw_cli_probe_make(p, q->ingress ? RW_DIR_INGRESS : RW_DIR_EGRESS, q->proto, q->flags,
			  q->sport, q->dport, pod, &q->dst);
}

/* The pod of a run whose family is DST's: the first bound to a veth of this node (ifindex set),
 * else the first. False when the run has none of that family.
 */
static bool run_pod(const struct rw_datapath *pinned, const struct rw_live_run *r, bool ipv6,
		    struct rw_ip *pod, __u32 *ifindex)
{
	size_t n = ipv6 ? r->n_pods6 : r->n_pods;

	for (size_t i = 0; i < n; i++) {
		struct rw_ip ip = ipv6 ? rw_ip6(r->pods6[i]) : rw_ip4(r->pods[i]);

		if (!i)
			*pod = ip;
		if (pinned && rw_cli_pod_ifindex_of(pinned, &ip, ifindex) == 0) {
			*pod = ip;
			break;
		}
	}
	return n > 0;
}

static __u64 live_revision(const struct rw_datapath *dp)
{
	struct rw_config cfg;

	if (rw_config_read(dp, &cfg) || !RW_STATE_READY(cfg.state))
		return 0;
	return RW_STATE_REVISION(cfg.state);
}

/* Only the programs that judge this packet: its direction's, the IPv6 one only for IPv6, and
 * the ICMPv6 one only for ICMPv6.
 */
static unsigned int judging_progs(const struct question *q)
{
	return (q->ingress ? RW_DP_SKIP_EGRESS : RW_DP_SKIP_INGRESS) |
	       (q->dst.family == AF_INET6 ? 0 : RW_DP_SKIP_IPV6) |
	       (q->proto == IPPROTO_ICMPV6 ? 0 : RW_DP_SKIP_ICMP6);
}

/* q's packet from pod judged by dp's programs on ifindex, and the run and the principal it was
 * judged for. Returns 0, or the exit code after reporting why it could not be.
 */
static int judge(const struct question *q, const struct rw_ip *pod, struct rw_datapath *dp,
		 __u32 ifindex, struct rw_cli_probe *p, struct rw_cli_verdict *v)
{
	char err[512];

	make_probe(q, pod, p);
	if (rw_cli_judge(dp, p, ifindex, v, err, sizeof(err)))
		return rw_fail(RW_EXIT_REFUSED, "%s", err);
	rw_cli_judged_run(dp, v);
	rw_cli_judge_principal(v);
	return 0;
}

/* The policy in force, judged by the pinned maps. Returns 0, a negative errno when this node
 * cannot judge the packet (said by the caller), or the exit code (1 or 2, never 0) after
 * reporting why the question cannot be answered.
 */
static int judge_live(const struct question *q, struct rw_ip *pod, bool need,
		      struct rw_cli_probe *p, struct rw_cli_verdict *v, __u32 *ifindex_out)
{
	struct rw_datapath pinned, dry = {.skel = NULL};
	struct rw_live_run *runs = NULL;
	struct rw_policy names;
	bool have_names = false;
	json_t *status = NULL;
	char err[512], ifname[IF_NAMESIZE];
	size_t n_runs = 0;
	__u32 ifindex = 0;
	int ret;

	ret = rw_cli_open(&pinned, rw_g.bpffs, err, sizeof(err));
	if (ret)
		return rw_fail(ret == -ENOENT ? RW_EXIT_USAGE : RW_EXIT_REFUSED, "%s", err);
	ret = rw_live_runs(&pinned, &runs, &n_runs);
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "reading the live pods: %s", strerror(-ret));
		goto cleanup;
	}
	if (q->run) {
		int r = rw_live_run_find(runs, n_runs, q->run, 0);

		if (r < 0) {
			ret = need ? rw_fail(RW_EXIT_REFUSED, "no run '%s' in the live slot%s",
					     q->run,
					     live_revision(&pinned) ? ""
								    : " (the node is not ready)")
				   : -ENOENT;
			goto cleanup;
		}
		/* The run's first pod of DST's family that has a veth on this node. */
		if (!run_pod(&pinned, &runs[r], q->dst.family == AF_INET6, pod, &ifindex)) {
			ret = need ? rw_fail(RW_EXIT_REFUSED,
					     "run '%s' has no %s pod in the live slot", q->run,
					     q->dst.family == AF_INET6 ? "IPv6" : "IPv4")
				   : -ENOENT;
			goto cleanup;
		}
	}
	if (!ifindex && rw_cli_pod_ifindex_of(&pinned, pod, &ifindex)) {
		char ip[RW_IP_STRLEN];

		rw_ip_str(pod, ip, sizeof(ip));
		ret = need ? rw_fail(RW_EXIT_REFUSED,
				     "%s is bound to no sandbox veth here "
				     "(rw_endpoints): none of its packets reaches runwall on "
				     "this node",
				     ip)
			   : -ENOENT;
		goto cleanup;
	}
	if (!if_indextoname(ifindex, ifname)) {
		ret = rw_fail(RW_EXIT_REFUSED,
			      "the pod's veth (ifindex %u) is not in this "
			      "network namespace: run explain in the node's",
			      ifindex);
		goto cleanup;
	}

	/* Our own copy of the programs on the pinned maps; rw_dry_run makes it change nothing.
	 * The pins were all checked above, so libbpf reuses them and creates none.
	 */
	ret = rw_datapath_load(&dry, rw_g.bpffs, RW_DP_DRY_RUN | judging_progs(q), err,
			       sizeof(err));
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "loading the dry-run programs: %s", err);
		goto cleanup;
	}
	v->revision = live_revision(&dry);
	ret = judge(q, pod, &dry, ifindex, p, v);
	if (ret)
		goto cleanup;
	if (rw_ctl_call(rw_g.socket, "status", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &status) == 0)
		have_names = rw_cli_agent_policy(rw_g.socket, status, v->revision, &names) == 0;
	rw_rule_name(have_names ? &names : NULL, v->rule_id, v->rule, sizeof(v->rule));
	v->source = "live";
	*ifindex_out = ifindex;
	ret = 0;
cleanup:
	if (have_names)
		rw_policy_free(&names);
	json_decref(status);
	if (dry.skel)
		rw_datapath_close(&dry);
	rw_live_runs_free(runs, n_runs);
	rw_datapath_close(&pinned);
	return ret;
}

/* The same packet judged by a policy file in private maps. Returns 0, or the exit code (1 or 2)
 * after reporting why it cannot.
 */
static int judge_file(const struct question *q, struct rw_ip *pod, bool have_pod,
		      struct rw_cli_probe *p, struct rw_cli_verdict *v)
{
	struct rw_datapath dp = {.skel = NULL};
	struct rw_policy_error perr;
	struct rw_policy pol;
	char err[512];
	int ret;

	ret = rw_policy_parse_file(q->policy, &pol, &perr);
	if (ret)
		return rw_fail(ret == -EINVAL ? RW_EXIT_REFUSED : RW_EXIT_USAGE, "%s", perr.text);
	if (!have_pod) {
		/* --run: the run's first pod in the file of DST's family. */
		const struct rw_policy_run *run = NULL;
		bool ipv6 = q->dst.family == AF_INET6;

		for (size_t i = 0; i < pol.n_runs && !run; i++)
			if (!strcmp(pol.runs[i].id, q->run))
				run = &pol.runs[i];
		if (!run || !(ipv6 ? run->n_pods6 : run->n_pods)) {
			ret = rw_fail(RW_EXIT_REFUSED, "%s: no run '%s' with %s pods", q->policy,
				      q->run, ipv6 ? "IPv6" : "IPv4");
			goto cleanup;
		}
		*pod = ipv6 ? rw_ip6(run->pods6[0]) : rw_ip4(run->pods[0]);
	}
	ret = rw_cli_private_load(&dp, &pol, judging_progs(q), err, sizeof(err));
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "%s: %s", q->policy, err);
		goto cleanup;
	}
	ret = rw_cli_private_bind(&dp, pod);
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "binding the pod in the private maps: %s",
			      strerror(-ret));
		goto cleanup;
	}
	v->revision = pol.revision;
	ret = judge(q, pod, &dp, RW_CLI_PRIVATE_IFINDEX, p, v);
	if (ret)
		goto cleanup;
	rw_rule_name(&pol, v->rule_id, v->rule, sizeof(v->rule));
	v->source = q->policy;
	ret = 0;
cleanup:
	if (dp.skel)
		rw_datapath_close(&dp);
	rw_policy_free(&pol);
	return ret;
}

static int sport_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	if (rw_parse_port(val, o->data))
		return rw_fail(RW_EXIT_USAGE, "explain --sport: '%s' is not a port (1-65535)", val);
	return 0;
}

static int flags_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	if (rw_parse_tcp_flags(val, o->data))
		return rw_fail(RW_EXIT_USAGE,
			       "explain --flags: unknown flags '%s'; valid: syn, ack, synack", val);
	return 0;
}

/* `runwall explain`'s options and arguments into q. Returns -1 to go on, else the exit code
 * (--help, or a usage error already reported).
 */
static int parse(int argc, char **argv, struct question *q)
{
	const struct rw_cmd_opt opts[] = {
		{"pod", 'p', .flag = &q->has_pod, .set = rw_cmd_ip_arg, .data = &q->pod},
		{"run", 'r', .str = &q->run},
		{"ingress", 'i', .flag = &q->ingress},
		{"egress", 'e', .flag = &q->ingress, .unset = true},
		{"sport", 's', .set = sport_arg, .data = &q->sport},
		{"flags", 'f', .flag = &q->flags_set, .set = flags_arg, .data = &q->flags},
		{"policy", 'P', .str = &q->policy},
		{"json", 'j', .flag = &rw_g.json},
		{}};
	int ret, npos;

	memset(q, 0, sizeof(*q));
	q->sport = DEFAULT_SPORT;
	q->proto = IPPROTO_TCP;
	q->flags = 0x02; /* SYN */
	ret = rw_cmd_options(&rw_cmd_explain, argc, argv, opts);
	if (ret >= 0)
		return ret;
	if (q->has_pod == !!q->run)
		return rw_fail(RW_EXIT_USAGE,
			       "explain: say whose packet, with --pod IP or --run ID "
			       "(one of them)");
	npos = argc - optind;
	if (npos < 2 || npos > 3)
		return rw_cmd_usage_error(&rw_cmd_explain, "%s",
					  npos < 2 ? "DST and PORT are needed"
						   : "too many arguments");
	if (rw_ip_parse(argv[optind], &q->dst))
		return rw_fail(RW_EXIT_USAGE, "explain: '%s' is not an IPv4 or IPv6 address",
			       argv[optind]);
	if (q->has_pod && q->pod.family != q->dst.family)
		return rw_fail(RW_EXIT_USAGE,
			       "explain: the pod and DST are of two families: give the pod's %s "
			       "address",
			       q->dst.family == AF_INET6 ? "IPv6" : "IPv4");
	if (npos == 3 && !strcasecmp(argv[optind + 2], "icmpv6")) {
		unsigned long long type;

		if (q->dst.family != AF_INET6)
			return rw_fail(RW_EXIT_USAGE, "explain: icmpv6 is for an IPv6 DST");
		/* PORT is the message's type. */
		if (rw_parse_uint(argv[optind + 1], 255, &type) || !type)
			return rw_fail(RW_EXIT_USAGE, "explain: '%s' is not an ICMPv6 type (1-255)",
				       argv[optind + 1]);
		q->proto = IPPROTO_ICMPV6;
		q->dport = (__u16)type;
	} else {
		if (rw_parse_port(argv[optind + 1], &q->dport))
			return rw_fail(RW_EXIT_USAGE, "explain: '%s' is not a port (1-65535)",
				       argv[optind + 1]);
		if (npos == 3 && rw_parse_proto(argv[optind + 2], &q->proto))
			return rw_fail(RW_EXIT_USAGE,
				       "explain: unknown protocol '%s'; valid: tcp, udp, icmpv6 "
				       "(IPv6)",
				       argv[optind + 2]);
	}
	if (q->flags_set && q->proto != IPPROTO_TCP)
		return rw_fail(RW_EXIT_USAGE, "explain: --flags is for tcp");
	return -1;
}

static int cmd_explain(int argc, char **argv)
{
	struct rw_cli_verdict now = {0}, with = {0};
	struct rw_cli_probe p;
	const struct rw_cli_verdict *top;
	struct question q;
	bool have_now = false, have_with = false;
	__u32 ifindex = 0;
	struct rw_ip pod = {0};
	char line[1280];
	int ret, layout;

	ret = parse(argc, argv, &q);
	if (ret >= 0)
		return ret;
	pod = q.pod;

	/* Never load with pins where nothing is pinned: that would create them. */
	layout = rw_datapath_pinned_layout(rw_g.bpffs);
	if (layout == 0 && !q.policy)
		return rw_fail(RW_EXIT_USAGE,
			       "nothing pinned at %s: no policy in force to explain "
			       "(use --policy FILE to judge against a snapshot file)",
			       rw_g.bpffs);
	if (layout > 0 || !q.policy) {
		ret = judge_live(&q, &pod, !q.policy, &p, &now, &ifindex);
		if (ret > 0)
			return ret;
		have_now = ret == 0;
		if (!have_now && !rw_g.json)
			fprintf(stderr,
				"runwall: explain: the live policy cannot judge this "
				"packet on this node; judging it with %s only\n",
				q.policy);
	}
	if (q.policy) {
		ret = judge_file(&q, &pod, q.has_pod || have_now, &p, &with);
		if (ret > 0)
			return ret;
		have_with = true;
	}

	top = have_with ? &with : &now;
	if (rw_g.json) {
		json_t *o = json_pack("{s:b}", "ok", 1), *v = rw_cli_verdict_json(&p, top);
		char ip[RW_IP_STRLEN];

		json_object_update(o, v);
		json_decref(v);
		rw_ip_str(&pod, ip, sizeof(ip));
		json_object_set_new(o, "pod", json_string(ip));
		json_object_set_new(o, "ifindex", have_now ? json_integer(ifindex) : json_null());
		if (have_with)
			json_object_set_new(o, "policy", json_string(q.policy));
		if (have_now && have_with)
			json_object_set_new(o, "now", rw_cli_verdict_json(&p, &now));
		rw_cli_json_print(o);
	} else {
		rw_cli_explain_line(&p, have_now ? &now : NULL, have_with ? &with : NULL, line,
				    sizeof(line));
		printf("%s\n", line);
	}
	return top->verdict == RW_VERDICT_ALLOW ? RW_EXIT_OK : RW_EXIT_REFUSED;
}

RW_COMMAND(explain, .summary = "why a packet would be allowed or refused, by the real program",
	   .grammar = explain_usage, .options = explain_options);
