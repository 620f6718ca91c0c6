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
