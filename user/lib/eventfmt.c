// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* eventfmt.c: verdict events as JSON and as text. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eventfmt.h"
#include "ipaddr.h"
#include "reasons.h"
#include "rulename.h"

int64_t rw_mono_to_real_offset(void)
{
	struct timespec mono, real;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	return (real.tv_sec - mono.tv_sec) * 1000000000LL + (real.tv_nsec - mono.tv_nsec);
}

void rw_format_time(int64_t real_ns, char *buf, size_t len)
{
	time_t sec = real_ns / 1000000000LL;
	struct tm tm;
	char date[32];

	gmtime_r(&sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.20s.%06uZ", date, (unsigned int)((real_ns % 1000000000LL) / 1000));
}

void rw_rule_name(const struct rw_policy *p, uint32_t id, char *buf, size_t len)
{
	unsigned int a = RW_RULE_A(id), b = RW_RULE_B(id);

	buf[0] = '\0';
	switch (RW_RULE_KIND(id)) {
	case RW_RULE_KIND_SERVICE:
		snprintf(buf, len, "services[%u]%s%s", a, p && a < p->n_services ? " " : "",
			 p && a < p->n_services ? p->services[a].name : "");
		break;
	case RW_RULE_KIND_RUN:
		snprintf(buf, len, "runs[%u].allow[%u]", a, b);
		break;
	case RW_RULE_KIND_INBOUND:
		snprintf(buf, len, "inbound[%u]%s%s", a, p && a < p->n_inbound ? " " : "",
			 p && a < p->n_inbound ? p->inbound[a].name : "");
		break;
	default:
		if (id)
			snprintf(buf, len, "rule %#x", id);
	}
	/* The principals a rule with a "from" admits (principals.md). */
	if ((id & RW_RULE_FROM) && p) {
		const struct rw_policy_from *f = NULL;
		char text[160];

		if (RW_RULE_KIND(id) == RW_RULE_KIND_SERVICE && a < p->n_services)
			f = p->services[a].from;
		else if (RW_RULE_KIND(id) == RW_RULE_KIND_RUN && a < p->n_runs &&
			 b < p->runs[a].n_allow)
			f = p->runs[a].allow[b].from;
		if (f)
			snprintf(buf + strlen(buf), len - strlen(buf), " from %s",
				 rw_policy_from_text(f, text, sizeof(text)));
	}
}

static const char *(*container_namer)(uint64_t cgroup_id, void *arg);
static void *container_namer_arg;

void rw_event_set_container_namer(const char *(*namer)(uint64_t cgroup_id, void *arg), void *arg)
{
	container_namer = namer;
	container_namer_arg = arg;
}

json_t *rw_event_json(const struct rw_event *ev, const struct rw_policy *p, int64_t mono_to_real)
{
	char src[RW_IP_STRLEN], dst[RW_IP_STRLEN], when[40], rule[RW_RULE_NAME_LEN];
	struct rw_ip s = rw_event_src(ev), d = rw_event_dst(ev);
	json_t *o;

	rw_ip_str(&s, src, sizeof(src));
	rw_ip_str(&d, dst, sizeof(dst));
	rw_format_time((int64_t)ev->ts_ns + mono_to_real, when, sizeof(when));
	rw_event_rule_name(ev, p, rule, sizeof(rule));
	o = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:s, s:i, s:s, "
		      "s:i, s:I, s:s, s:I}",
		      "time", when, "ts_ns", (json_int_t)ev->ts_ns, "dir", rw_dir_name(ev->dir),
		      "verdict", ev->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", "reason",
		      rw_reason_name(ev->reason), "path", rw_path_name(ev->path), "answer",
		      rw_answer_name(ev->answer), "run", ev->run_id, "gen", (int)ev->run_gen, "src",
		      src, "sport", (int)ntohs(ev->sport), "dst", dst, "dport",
		      (int)ntohs(ev->dport), "proto",
		      rw_packet_proto_name(ev->ethertype, ev->proto), "ifindex", (int)ev->ifindex,
		      "rule_id", (json_int_t)ev->rule_id, "rule", rule, "revision",
		      (json_int_t)ev->revision);
	/* The sender inside the pod, where the datapath read it (packets out of the pod). */
	if (o && ev->uid != RW_UID_NONE) {
		const char *c = container_namer && ev->cgroup_id
					? container_namer(ev->cgroup_id, container_namer_arg)
					: NULL;

		json_object_set_new(o, "uid", json_integer(ev->uid));
		json_object_set_new(o, "cgroup_id", json_integer((json_int_t)ev->cgroup_id));
		if (c)
			json_object_set_new(o, "container", json_string(c));
	}
	return o;
}

void rw_event_principal(const struct rw_event *ev, const char *container, char *buf, size_t len)
{
	buf[0] = '\0';
	if (ev->uid == RW_UID_NONE)
		return;
	if (ev->uid == RW_UID_OVERFLOW && !ev->cgroup_id)
		snprintf(buf, len, "no socket");
	else if (container && container[0])
		snprintf(buf, len, "uid %u container %s", ev->uid, container);
	else
		snprintf(buf, len, "uid %u cgroup %llu", ev->uid,
			 (unsigned long long)ev->cgroup_id);
}

static int lookup_name(const char *s, const char *(*name)(unsigned int), unsigned int max)
{
	for (unsigned int i = 0; i < max; i++)
		if (!strcmp(name(i), s))
			return i;
	return -1;
}

int rw_event_from_json(json_t *o, struct rw_event *ev, char *rule, size_t rule_len)
{
	const char *dir, *verdict, *reason, *path, *run, *src, *dst, *proto, *r = "", *answer = "";
	json_int_t ts, revision, rule_id, uid = RW_UID_NONE, cgroup_id = 0;
	int gen, sport, dport, ifindex, n;
	struct rw_ip s, d;

	memset(ev, 0, sizeof(*ev));
	if (json_unpack(o,
			"{s:I, s:s, s:s, s:s, s:s, s?s, s:s, s:i, s:s, s:i, s:s, s:i, s:s, s:i, "
			"s:I, s?s, s:I, s?I, s?I}",
			"ts_ns", &ts, "dir", &dir, "verdict", &verdict, "reason", &reason, "path",
			&path, "answer", &answer, "run", &run, "gen", &gen, "src", &src, "sport",
			&sport, "dst", &dst, "dport", &dport, "proto", &proto, "ifindex", &ifindex,
			"rule_id", &rule_id, "rule", &r, "revision", &revision, "uid", &uid,
			"cgroup_id", &cgroup_id))
		return -EINVAL;
	ev->uid = (__u32)uid;
	ev->cgroup_id = (__u64)cgroup_id;
	ev->ts_ns = ts;
	ev->revision = revision;
	ev->dir = strcmp(dir, "ingress") == 0;
	ev->verdict = strcmp(verdict, "allow") == 0;
	n = rw_reason_parse(reason);
	ev->reason = n < 0 ? 0xff : n;
	n = lookup_name(path, rw_path_name, RW_PATH_COUNT);
	ev->path = n < 0 ? 0 : n;
	n = lookup_name(answer, rw_answer_name, RW_ANSWER_COUNT);
	ev->answer = n < 0 ? RW_ANSWER_NONE : n; /* an older agent's events have none */
	snprintf(ev->run_id, sizeof(ev->run_id), "%s", run);
	ev->run_gen = gen;
	ev->sport = htons(sport);
	ev->dport = htons(dport);
	ev->ethertype = htons(0x0800);
	if (!strcmp(proto, "arp"))
		ev->ethertype = htons(0x0806);
	else if (!strcmp(proto, "ipv6"))
		ev->ethertype = htons(0x86dd);
	else if (!strcmp(proto, "vlan"))
		ev->ethertype = htons(0x8100);
	else if (!strcmp(proto, "qinq"))
		ev->ethertype = htons(0x88a8);
	else if (!strcmp(proto, "-"))
		ev->ethertype = 0;
	else if (!strncmp(proto, "0x", 2))
		ev->ethertype = htons(strtoul(proto, NULL, 16));
	else if (!strcmp(proto, "icmp"))
		ev->proto = 1;
	else if (!strcmp(proto, "icmpv6"))
		ev->proto = 58;
	else if (!strcmp(proto, "tcp"))
		ev->proto = 6;
	else if (!strcmp(proto, "udp"))
		ev->proto = 17;
	else
		ev->proto = atoi(proto);
	/* The family is the addresses' text: an IPv6 event is "tcp" as an IPv4 one is. */
	if (rw_ip_parse(src, &s))
		s = rw_ip4(0);
	if (rw_ip_parse(dst, &d))
		d = rw_ip4(0);
	rw_event_set_addrs(ev, &s, &d);
	ev->ifindex = ifindex;
	ev->rule_id = (__u32)rule_id;
	if (rule)
		snprintf(rule, rule_len, "%s", r);
	return 0;
}

/* What the refused packet got back, for people: "" when nothing was due. */
static const char *answer_note(unsigned int answer)
{
	switch (answer) {
	case RW_ANSWER_RST:
		return "  answered: rst";
	case RW_ANSWER_ICMP:
		return "  answered: icmp";
	case RW_ANSWER_BUDGET:
		return "  unanswered: over the answer budget";
	default:
		return "";
	}
}

void rw_event_line(const struct rw_event *ev, const char *rule, int64_t mono_to_real, char *buf,
		   size_t len)
{
	char src[RW_IP_PORT_STRLEN], dst[RW_IP_PORT_STRLEN], when[40];
	const char *what = ev->verdict == RW_VERDICT_ALLOW ? rw_path_name(ev->path)
							   : rw_reason_name(ev->reason);
	struct rw_ip s = rw_event_src(ev), d = rw_event_dst(ev);

	if (ev->proto == 6 || ev->proto == 17) {
		rw_ip_port_str(&s, ntohs(ev->sport), src, sizeof(src));
		rw_ip_port_str(&d, ntohs(ev->dport), dst, sizeof(dst));
	} else {
		rw_ip_str(&s, src, sizeof(src));
		rw_ip_str(&d, dst, sizeof(dst));
	}
	rw_format_time((int64_t)ev->ts_ns + mono_to_real, when, sizeof(when));
	snprintf(buf, len, "%s  %-7s %-5s %-20s %-12s %21s -> %-21s %s%s%s%s", when,
		 rw_dir_name(ev->dir), ev->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", what,
		 ev->run_id[0] ? ev->run_id : "-", src, dst,
		 rw_packet_proto_name(ev->ethertype, ev->proto), answer_note(ev->answer),
		 rule && rule[0] ? "  " : "", rule ? rule : "");
}
