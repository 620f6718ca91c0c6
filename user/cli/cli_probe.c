// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_probe.c: see cli_probe.h. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_probe.h"
#include "cgroup2.h"
#include "cli_text.h"
#include "ctl.h"
#include "eventfmt.h"
#include "reasons.h"

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

void rw_cli_probe_str(const struct rw_cli_probe *p, char *buf, size_t len)
{
	char src[64], dst[64];

	if (p->ipv6 && p->proto == IPPROTO_ICMPV6) {
		rw_cli_ip6(p->src6, src, sizeof(src));
		rw_cli_ip6(p->dst6, dst, sizeof(dst));
		snprintf(buf, len, "%s %s -> %s icmpv6 type %u", rw_dir_name(p->dir), src, dst,
			 p->dport);
		return;
	}
	if (p->ipv6) {
		rw_cli_ip6_port(p->src6, p->sport, src, sizeof(src));
		rw_cli_ip6_port(p->dst6, p->dport, dst, sizeof(dst));
	} else {
		rw_cli_ip_port(p->src, p->sport, src, sizeof(src));
		rw_cli_ip_port(p->dst, p->dport, dst, sizeof(dst));
	}
	snprintf(buf, len, "%s %s -> %s %s", rw_dir_name(p->dir), src, dst,
		 rw_proto_name(p->proto));
}

void rw_cli_judge_principal(struct rw_cli_verdict *v)
{
	char err[96];
	uint64_t id = 0;

	v->principal[0] = '\0';
	if (!(v->rule_id & RW_RULE_FROM) && v->reason != RW_REASON_WRONG_PRINCIPAL)
		return;
	if (rw_cgroup2_self_id(&id, err, sizeof(err)))
		snprintf(v->principal, sizeof(v->principal),
			 "uid 0, this command's own test socket (its cgroup: %.90s)", err);
	else
		snprintf(v->principal, sizeof(v->principal),
			 "uid 0 cgroup %llu, this command's own test socket, no sandbox's",
			 (unsigned long long)id);
}

void rw_cli_verdict_str(const struct rw_cli_verdict *v, char *buf, size_t len)
{
	if (v->verdict == RW_VERDICT_ALLOW)
		snprintf(buf, len, "allowed via %s%s%s", rw_path_name(v->path),
			 v->rule[0] ? " " : "", v->rule);
	else if (v->answer == RW_ANSWER_NONE)
		snprintf(buf, len, "refused: %s", rw_reason_name(v->reason));
	else
		snprintf(buf, len, "refused: %s, answered with %s", rw_reason_name(v->reason),
			 rw_answer_name(v->answer));
	/* A rule whose "from" refused: which one. */
	if (v->verdict != RW_VERDICT_ALLOW && v->reason == RW_REASON_WRONG_PRINCIPAL && v->rule[0])
		snprintf(buf + strlen(buf), len - strlen(buf), "; by rule %s", v->rule);
	if (v->principal[0])
		snprintf(buf + strlen(buf), len - strlen(buf), "; judged as principal: %s",
			 v->principal);
}

void rw_cli_verdict_context(const struct rw_cli_verdict *v, char *buf, size_t len)
{
	if (!v->revision)
		snprintf(buf, len, "node not ready");
	else if (v->run[0])
		snprintf(buf, len, "run %s gen %u, revision %llu", v->run, v->gen,
			 (unsigned long long)v->revision);
	else
		snprintf(buf, len, "no run, revision %llu", (unsigned long long)v->revision);
}

void rw_cli_explain_line(const struct rw_cli_probe *p, const struct rw_cli_verdict *now,
			 const struct rw_cli_verdict *with, char *buf, size_t len)
{
	char probe[128], ctx_now[160], ctx_with[160], v_now[480], v_with[480];

	rw_cli_probe_str(p, probe, sizeof(probe));
	if (now) {
		rw_cli_verdict_context(now, ctx_now, sizeof(ctx_now));
		rw_cli_verdict_str(now, v_now, sizeof(v_now));
	}
	if (with) {
		rw_cli_verdict_context(with, ctx_with, sizeof(ctx_with));
		rw_cli_verdict_str(with, v_with, sizeof(v_with));
	}
	if (now && with)
		snprintf(buf, len, "%s (%s): now: %s; with %s (%s): %s", probe, ctx_now, v_now,
			 with->source ? with->source : "the policy", ctx_with, v_with);
	else if (now)
		snprintf(buf, len, "%s (%s): %s", probe, ctx_now, v_now);
	else if (with)
		snprintf(buf, len, "%s (%s): with %s: %s", probe, ctx_with,
			 with->source ? with->source : "the policy", v_with);
	else
		snprintf(buf, len, "%s", probe);
}

json_t *rw_cli_verdict_json(const struct rw_cli_probe *p, const struct rw_cli_verdict *v)
{
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	json_t *o;

	if (p->ipv6) {
		rw_cli_ip6(p->src6, src, sizeof(src));
		rw_cli_ip6(p->dst6, dst, sizeof(dst));
	} else {
		rw_cli_ip(p->src, src, sizeof(src));
		rw_cli_ip(p->dst, dst, sizeof(dst));
	}
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:i, s:I, s:s, s:s, s:i, s:s, s:i, "
		      "s:s, s:s}",
		      "verdict", v->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", "reason",
		      rw_reason_name(v->reason), "path", rw_path_name(v->path), "answer",
		      rw_answer_name(v->answer), "rule", v->rule, "rule_id", (json_int_t)v->rule_id,
		      "run", v->run, "gen", (int)v->gen, "revision", (json_int_t)v->revision, "dir",
		      rw_dir_name(p->dir), "src", src, "sport", (int)p->sport, "dst", dst, "dport",
		      (int)p->dport, "proto",
		      p->proto == IPPROTO_ICMPV6 ? "icmpv6" : rw_proto_name(p->proto), "source",
		      v->source ? v->source : "live");
	json_object_set_new(o, "family", json_string(p->ipv6 ? "ipv6" : "ipv4"));
	if (v->principal[0])
		json_object_set_new(o, "principal", json_string(v->principal));
	if (p->proto == IPPROTO_ICMPV6) {
		json_object_set_new(o, "icmp_type", json_integer(p->dport));
		json_object_del(o, "sport");
		json_object_del(o, "dport");
	}
	return o;
}
