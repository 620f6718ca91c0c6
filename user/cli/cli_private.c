// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_private.c: see cli_private.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_private.h"
#include "liveruns.h"
#include "runwall.skel.h"

#define TCX_NEXT_RET (-1)
#define TCX_DROP_RET 2

int rw_cli_private_load(struct rw_datapath *dp, const struct rw_policy *pol, unsigned int skip,
			char *err, size_t errlen)
{
	struct rw_config cfg = {.layout_version = RW_LAYOUT_VERSION};
	struct rw_apply_result res;
	char why[400];
	int ret;

	memset(dp, 0, sizeof(*dp));
	ret = rw_datapath_load(dp, NULL, RW_DP_NO_PIN | RW_DP_DRY_RUN | skip, why, sizeof(why));
	if (ret) {
		snprintf(err, errlen, "loading the dry-run programs: %s", why);
		dp->skel = NULL;
		return ret;
	}
	/* The loader leaves a dry run's config alone: give it our layout, not ready. */
	ret = rw_config_write(dp, &cfg);
	if (!ret)
		ret = rw_apply(dp, NULL, pol, &res, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s", strerror(-ret));
	if (ret) {
		snprintf(err, errlen, "cannot be applied: %s", why);
		rw_datapath_close(dp);
		dp->skel = NULL;
	}
	return ret;
}

int rw_cli_private_bind(const struct rw_datapath *dp, const struct rw_ip *pod)
{
	struct rw_endpoint ep = {0};

	if (pod->family == AF_INET6) {
		ep.flags = RW_EP_IP6;
		memcpy(ep.pod_ip6, pod->a, sizeof(ep.pod_ip6));
	} else {
		ep.flags = RW_EP_IP4;
		ep.pod_ip = pod->a[0];
	}
	return rw_endpoint_bind_addrs(dp, RW_CLI_PRIVATE_IFINDEX, &ep);
}

int rw_cli_judge(struct rw_datapath *dp, const struct rw_cli_probe *p, __u32 ifindex,
		 struct rw_cli_verdict *v, char *err, size_t errlen)
{
	struct __sk_buff ctx = {.ifindex = ifindex};
	__u8 pkt[RW_CLI_PKT_MAX];
	size_t len = rw_cli_build_packet(p, pkt, sizeof(pkt));
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = 1);
	struct rw_explain *res = &dp->skel->bss->rw_explain_result;
	__u32 before = res->runs;
	int ret;

	ret = bpf_prog_test_run_opts(dp->prog_fd[p->dir], &opts);
	if (ret) {
		ret = -errno;
		snprintf(err, errlen, "BPF_PROG_TEST_RUN on ifindex %u: %s%s", ifindex,
			 strerror(-ret),
			 ret == -ENODEV ? " (run it in the node's network namespace, where the "
					  "sandbox veths are)"
					: "");
		return ret;
	}
	/* The dry run must have reached its verdict exactly once, and said what it returned. */
	if (res->runs != before + 1) {
		snprintf(err, errlen,
			 "the dry run left no verdict (rw_explain_result.runs %u -> %u): is this "
			 "BPF object built with rw_dry_run support?",
			 before, res->runs);
		return -EPROTO;
	}
	if ((res->verdict == RW_VERDICT_ALLOW) != ((int)opts.retval == TCX_NEXT_RET) ||
	    (res->verdict != RW_VERDICT_ALLOW && (int)opts.retval != TCX_DROP_RET)) {
		snprintf(err, errlen, "the dry run returned %d but recorded verdict %u",
			 (int)opts.retval, res->verdict);
		return -EPROTO;
	}
	v->verdict = res->verdict;
	v->reason = res->reason;
	v->path = res->path;
	v->answer = res->answer;
	v->rule_id = res->rule_id;
	return 0;
}

void rw_cli_judged_run(const struct rw_datapath *dp, struct rw_cli_verdict *v)
{
	__u32 run_idx = dp->skel->bss->rw_explain_result.run_idx;
	struct rw_live_run *runs;
	size_t n;
	int i;

	v->run[0] = '\0';
	v->gen = 0;
	if (!run_idx || rw_live_runs(dp, &runs, &n))
		return;
	i = rw_live_run_find(runs, n, NULL, run_idx);
	if (i >= 0) {
		snprintf(v->run, sizeof(v->run), "%s", runs[i].id);
		v->gen = runs[i].gen;
	}
	rw_live_runs_free(runs, n);
}
