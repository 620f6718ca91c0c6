// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* dryrun.c: see dryrun.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "dryrun.h"
#include "liveruns.h"
#include "parse.h"
#include "runwall.skel.h"

static void put16(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static __u16 ip_csum(const __u8 *p, size_t len)
{
	__u32 sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (__u32)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* The L4 header of a probe at th: TCP (doff 5), UDP, or an ICMPv6 message. No checksum: the
 * datapath judges headers, it does not verify sums.
 */
static void put_l4(const struct rw_cli_probe *p, __u8 *th)
{
	if (p->proto == IPPROTO_ICMPV6) {
		th[0] = (__u8)p->dport; /* type, code 0 */
		return;
	}
	put16(th, p->sport);
	put16(th + 2, p->dport);
	if (p->proto == IPPROTO_UDP) {
		put16(th + 4, 8);
	} else {
		th[7] = 1; /* seq 1 */
		if (p->tcp_flags & RW_TCP_ACK)
			th[11] = 1; /* ack 1 */
		th[12] = 5 << 4;
		th[13] = p->tcp_flags;
		put16(th + 14, 65535);
	}
}

/* ICMPv6: 8 bytes, and for the NDP types (133-137) the 16 bytes of a target (::), which is
 * where their bodies start.
 */
static size_t l4_len(const struct rw_cli_probe *p)
{
	if (p->proto == IPPROTO_ICMPV6)
		return p->dport >= 133 && p->dport <= 137 ? 24 : 8;
	return p->proto == IPPROTO_UDP ? 8 : 20;
}

size_t rw_cli_build_packet(const struct rw_cli_probe *p, __u8 *buf, size_t len)
{
	/* Locally administered MACs: the program never looks at them. */
	static const __u8 a_mac[6] = {0x02, 0x72, 0x77, 0, 0, 0x01};
	static const __u8 b_mac[6] = {0x02, 0x72, 0x77, 0, 0, 0x02};
	size_t l4 = l4_len(p), l3 = p->ipv6 ? 40 : 20, total = 14 + l3 + l4;
	__u8 *ip = buf + 14, *th = buf + 14 + l3;

	if (len < total)
		return 0;
	memset(buf, 0, total);
	memcpy(buf, b_mac, 6);
	memcpy(buf + 6, a_mac, 6);
	if (p->ipv6) {
		put16(buf + 12, 0x86dd);
		ip[0] = 0x60;
		put16(ip + 4, (__u16)l4);
		ip[6] = p->proto;
		/* NDP is only ever judged with the hop limit that proves it on-link (RFC 4861). */
		ip[7] = p->proto == IPPROTO_ICMPV6 && p->dport >= 133 && p->dport <= 137 ? 255 : 64;
		memcpy(ip + 8, p->src6, 16);
		memcpy(ip + 24, p->dst6, 16);
		put_l4(p, th);
		return total;
	}
	put16(buf + 12, 0x0800);
	ip[0] = 0x45;
	put16(ip + 2, (__u16)(20 + l4));
	put16(ip + 4, 1);
	put16(ip + 6, 0x4000); /* DF, not a fragment */
	ip[8] = 64;
	ip[9] = p->proto;
	memcpy(ip + 12, &p->src, 4);
	memcpy(ip + 16, &p->dst, 4);
	put16(ip + 10, ip_csum(ip, 20));
	put_l4(p, th);
	return total;
}

void rw_cli_probe_make(struct rw_cli_probe *p, __u8 dir, __u8 proto, __u8 tcp_flags, __u16 sport,
		       __u16 dport, const struct rw_ip *pod, const struct rw_ip *peer)
{
	const struct rw_ip *src = dir == RW_DIR_INGRESS ? peer : pod;
	const struct rw_ip *dst = dir == RW_DIR_INGRESS ? pod : peer;

	memset(p, 0, sizeof(*p));
	p->dir = dir;
	p->proto = proto;
	p->tcp_flags = proto == IPPROTO_TCP ? tcp_flags : 0;
	p->sport = proto == IPPROTO_ICMPV6 ? 0 : sport;
	p->dport = dport;
	p->ipv6 = peer->family == AF_INET6;
	if (p->ipv6) {
		memcpy(p->src6, src->a, sizeof(p->src6));
		memcpy(p->dst6, dst->a, sizeof(p->dst6));
	} else {
		p->src = src->a[0];
		p->dst = dst->a[0];
	}
}

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
