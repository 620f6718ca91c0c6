// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_util.c: shared pieces of the operator commands (see cli_util.h). */
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
#include "cli_util.h"
#include "ctl.h"
#include "eventfmt.h"
#include "reasons.h"

int rw_cli_reason_lookup(const char *word, char *err, size_t errlen)
{
	const char *names[RW_REASON_COUNT];

	for (unsigned int r = 0; r < RW_REASON_COUNT; r++)
		names[r] = rw_reason_name(r);
	return rw_name_lookup(word, "reason", names, RW_REASON_COUNT, err, errlen);
}

int rw_cli_map_lookup(const char *word, char *err, size_t errlen)
{
	const char *names[RW_M__COUNT];
	enum rw_map_id ids[RW_M__COUNT];
	int n = 0, i;

	for (int m = 0; m < RW_M__COUNT; m++) {
		/* A pinned name ("rw_allow_cidr") names its map too. */
		if (!strcmp(word, rw_map_names[m]))
			return rw_cli_map_of(m);
		if (rw_cli_map_of(m) == (enum rw_map_id)m) {
			names[n] = rw_map_shown_names[m];
			ids[n++] = m;
		}
	}
	i = rw_name_lookup(word, "map", names, n, err, errlen);
	return i < 0 ? i : (int)ids[i];
}

/* ---- text -------------------------------------------------------------------------------- */

void rw_table_init(struct rw_table *t, size_t ncols, const char *const *heads,
		   unsigned int right_mask)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->heads = heads;
	t->right_mask = right_mask;
}

int rw_table_row(struct rw_table *t)
{
	if (t->rows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **grown = realloc(t->cells, cap * t->ncols * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		t->cells = grown;
		t->cap = cap;
	}
	for (size_t c = 0; c < t->ncols; c++)
		t->cells[t->rows * t->ncols + c] = NULL;
	t->rows++;
	t->cur = 0;
	return 0;
}

int rw_table_cell(struct rw_table *t, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	if (!t->rows || t->cur >= t->ncols)
		return -EINVAL;
	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	t->cells[(t->rows - 1) * t->ncols + t->cur++] = s;
	return 0;
}

static const char *cell(const struct rw_table *t, size_t r, size_t c)
{
	const char *s = t->cells[r * t->ncols + c];

	return s ? s : "";
}

void rw_table_print(const struct rw_table *t, FILE *f, const char *indent)
{
	size_t width[32] = {0}, ncols = t->ncols < 32 ? t->ncols : 32;
	char *line = NULL;
	size_t size = 0;

	for (size_t c = 0; c < ncols; c++) {
		if (t->heads)
			width[c] = strlen(t->heads[c]);
		for (size_t r = 0; r < t->rows; r++)
			if (strlen(cell(t, r, c)) > width[c])
				width[c] = strlen(cell(t, r, c));
	}
	/* Row 0 is the header. Each line is built whole, then cut after its last character. */
	for (size_t r = t->heads ? 0 : 1; r <= t->rows; r++) {
		FILE *m = open_memstream(&line, &size);
		size_t len;

		if (!m)
			return;
		fputs(indent ? indent : "", m);
		for (size_t c = 0; c < ncols; c++) {
			const char *s = r ? cell(t, r - 1, c) : t->heads[c];

			if (t->right_mask & RW_TABLE_RIGHT(c))
				fprintf(m, "%*s", (int)width[c], s);
			else
				fprintf(m, "%-*s", (int)width[c], s);
			if (c + 1 < ncols)
				fputs("  ", m);
		}
		fclose(m);
		len = strlen(line);
		while (len && line[len - 1] == ' ')
			line[--len] = '\0';
		fprintf(f, "%s\n", line);
		free(line);
		line = NULL;
	}
}

void rw_table_free(struct rw_table *t)
{
	for (size_t i = 0; i < t->rows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->rows = t->cap = t->cur = 0;
}

void rw_cli_duration(uint64_t ns, char *buf, size_t len)
{
	uint64_t s = ns / 1000000000ULL;

	if (s < 10)
		snprintf(buf, len, "%.1fs", ns / 1e9);
	else if (s < 60)
		snprintf(buf, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else
		snprintf(buf, len, "%llud%02lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
}

void rw_cli_bytes(uint64_t n, char *buf, size_t len)
{
	if (n < 1024)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else if (n < 1024 * 1024)
		snprintf(buf, len, "%.1f KiB", n / 1024.0);
	else if (n < 1024ULL * 1024 * 1024)
		snprintf(buf, len, "%.1f MiB", n / (1024.0 * 1024));
	else
		snprintf(buf, len, "%.1f GiB", n / (1024.0 * 1024 * 1024));
}

void rw_cli_fill_pct(long long entries, long long max, char *buf, size_t len)
{
	double pct = max > 0 ? 100.0 * entries / max : 0;

	if (entries < 0 || max <= 0)
		snprintf(buf, len, "-");
	else if (entries > 0 && pct < 0.1)
		snprintf(buf, len, "<0.1%%");
	else
		snprintf(buf, len, "%.1f%%", pct);
}

void rw_cli_ip(__be32 ip, char *buf, size_t len)
{
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &ip, s, sizeof(s));
	snprintf(buf, len, "%s", s);
}

void rw_cli_cidr(__be32 ip, unsigned int prefixlen, char *buf, size_t len)
{
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &ip, s, sizeof(s));
	if (prefixlen < 32)
		snprintf(buf, len, "%s/%u", s, prefixlen);
	else
		snprintf(buf, len, "%s", s);
}

void rw_cli_ip_port(__be32 ip, __u16 port, char *buf, size_t len)
{
	char s[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &ip, s, sizeof(s));
	if (port)
		snprintf(buf, len, "%s:%u", s, port);
	else
		snprintf(buf, len, "%s", s);
}

void rw_cli_ip6(const __be32 ip[4], char *buf, size_t len)
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, ip, s, sizeof(s));
	snprintf(buf, len, "%s", s);
}

void rw_cli_cidr6(const __be32 ip[4], unsigned int prefixlen, char *buf, size_t len)
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, ip, s, sizeof(s));
	if (prefixlen < 128)
		snprintf(buf, len, "%s/%u", s, prefixlen);
	else
		snprintf(buf, len, "%s", s);
}

void rw_cli_ip6_port(const __be32 ip[4], __u16 port, char *buf, size_t len)
{
	char s[INET6_ADDRSTRLEN];

	inet_ntop(AF_INET6, ip, s, sizeof(s));
	if (port)
		snprintf(buf, len, "[%s]:%u", s, port);
	else
		snprintf(buf, len, "%s", s);
}

void rw_cli_host_port(const char *host, long long port, char *buf, size_t len)
{
	if (!host)
		host = "-";
	snprintf(buf, len, strchr(host, ':') ? "[%s]:%lld" : "%s:%lld", host, port);
}

void rw_cli_json_print(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;

	printf("%s\n", s ? s : "{\"ok\":false,\"error\":\"out of memory\"}");
	fflush(stdout);
	free(s);
	json_decref(o);
}

/* ---- counters ---------------------------------------------------------------------------- */

json_t *rw_cli_counters_json(const struct rw_counters *c)
{
	json_t *o = json_object();

	for (unsigned int d = 0; d < RW_DIR_COUNT; d++) {
		json_t *dir = json_object();

		for (unsigned int r = 0; r < RW_REASON_COUNT; r++)
			json_object_set_new(dir, rw_reason_name(r),
					    json_pack("{s:I, s:I}", "packets",
						      (json_int_t)c->packets[d][r], "bytes",
						      (json_int_t)c->bytes[d][r]));
		json_object_set_new(o, rw_dir_name(d), dir);
	}
	json_object_set_new(o, "events",
			    json_pack("{s:I, s:I, s:I}", "sent", (json_int_t)c->events_sent, "lost",
				      (json_int_t)c->events_lost, "suppressed",
				      (json_int_t)c->events_suppressed));
	json_object_set_new(o, "answers",
			    json_pack("{s:I, s:I, s:I}", "rst",
				      (json_int_t)c->answers[RW_ANSWER_RST], "icmp",
				      (json_int_t)c->answers[RW_ANSWER_ICMP], "budget",
				      (json_int_t)c->answers[RW_ANSWER_BUDGET]));
	return o;
}

uint64_t rw_cli_counters_allowed(const struct rw_counters *c)
{
	uint64_t n = 0;

	for (unsigned int d = 0; d < RW_DIR_COUNT; d++)
		n += c->packets[d][RW_REASON_ALLOWED];
	return n;
}

uint64_t rw_cli_counters_drops(const struct rw_counters *c)
{
	uint64_t n = 0;

	for (unsigned int d = 0; d < RW_DIR_COUNT; d++)
		for (unsigned int r = 1; r < RW_REASON_COUNT; r++)
			n += c->packets[d][r];
	return n;
}

void rw_cli_counters_summary(const struct rw_counters *c, char *buf, size_t len)
{
	uint64_t drops = rw_cli_counters_drops(c);

	snprintf(buf, len,
		 "%llu drop%s, %llu allowed; events: %llu sent, %llu suppressed, %llu lost; "
		 "answers: %llu rst, %llu icmp, %llu over budget",
		 (unsigned long long)drops, drops == 1 ? "" : "s",
		 (unsigned long long)rw_cli_counters_allowed(c), (unsigned long long)c->events_sent,
		 (unsigned long long)c->events_suppressed, (unsigned long long)c->events_lost,
		 (unsigned long long)c->answers[RW_ANSWER_RST],
		 (unsigned long long)c->answers[RW_ANSWER_ICMP],
		 (unsigned long long)c->answers[RW_ANSWER_BUDGET]);
}

void rw_cli_counters_print(FILE *f, const struct rw_counters *c, const char *indent)
{
	static const char *const heads[] = {"DIR", "REASON", "PACKETS", "BYTES"};
	struct rw_table t;
	char line[256];

	rw_table_init(&t, 4, heads, RW_TABLE_RIGHT(2) | RW_TABLE_RIGHT(3));
	for (unsigned int d = 0; d < RW_DIR_COUNT; d++) {
		for (unsigned int r = 0; r < RW_REASON_COUNT; r++) {
			if (!c->packets[d][r] && !c->bytes[d][r])
				continue;
			rw_table_row(&t);
			rw_table_cell(&t, "%s", rw_dir_name(d));
			rw_table_cell(&t, "%s", rw_reason_name(r));
			rw_table_cell(&t, "%llu", (unsigned long long)c->packets[d][r]);
			rw_table_cell(&t, "%llu", (unsigned long long)c->bytes[d][r]);
		}
	}
	if (t.rows)
		rw_table_print(&t, f, indent);
	else
		fprintf(f, "%sno packets\n", indent ? indent : "");
	rw_table_free(&t);
	rw_cli_counters_summary(c, line, sizeof(line));
	fprintf(f, "%s%s\n", indent ? indent : "", line);
}

/* ---- drops ------------------------------------------------------------------------------- */

void rw_cli_filter_init(struct rw_cli_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->reason = -1;
}

bool rw_cli_filter_match(const struct rw_cli_filter *f, const struct rw_event *ev)
{
	/* Allowed flows only with --all, or when the reason asked for is "allowed". */
	if (ev->verdict != RW_VERDICT_DROP && !f->all && f->reason != RW_REASON_ALLOWED)
		return false;
	if (f->reason >= 0 && ev->reason != f->reason)
		return false;
	if (f->run && strncmp(ev->run_id, f->run, RW_RUN_ID_LEN))
		return false;
	if (f->has_pod) {
		struct rw_ip side = rw_event_pod_ip(ev);

		if (!rw_ip_eq(&side, &f->pod) && !(f->pod_ifindex && ev->ifindex == f->pod_ifindex))
			return false;
	}
	if (f->has_dst) {
		struct rw_ip dst = rw_event_dst(ev);

		if (!rw_ip_eq(&dst, &f->dst))
			return false;
		if (f->dport && ntohs(ev->dport) != f->dport)
			return false;
	}
	return true;
}

void rw_cli_event_header(char *buf, size_t len)
{
	/* The widths of rw_event_line(): a 27-character time, then its fields. */
	snprintf(buf, len, "%-27s  %-7s %-5s %-20s %-12s %21s    %-21s %s", "TIME", "DIR", "VERD",
		 "REASON/PATH", "RUN", "SOURCE", "DESTINATION", "PROTO RULE");
}

/* ---- explain ----------------------------------------------------------------------------- */

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
	size_t l4 = l4_len(p), l3 = p->six ? 40 : 20, total = 14 + l3 + l4;
	__u8 *ip = buf + 14, *th = buf + 14 + l3;

	if (len < total)
		return 0;
	memset(buf, 0, total);
	memcpy(buf, b_mac, 6);
	memcpy(buf + 6, a_mac, 6);
	if (p->six) {
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

void rw_cli_probe_str(const struct rw_cli_probe *p, char *buf, size_t len)
{
	char src[64], dst[64];

	if (p->six && p->proto == IPPROTO_ICMPV6) {
		rw_cli_ip6(p->src6, src, sizeof(src));
		rw_cli_ip6(p->dst6, dst, sizeof(dst));
		snprintf(buf, len, "%s %s -> %s icmpv6 type %u", rw_dir_name(p->dir), src, dst,
			 p->dport);
		return;
	}
	if (p->six) {
		rw_cli_ip6_port(p->src6, p->sport, src, sizeof(src));
		rw_cli_ip6_port(p->dst6, p->dport, dst, sizeof(dst));
	} else {
		rw_cli_ip_port(p->src, p->sport, src, sizeof(src));
		rw_cli_ip_port(p->dst, p->dport, dst, sizeof(dst));
	}
	snprintf(buf, len, "%s %s -> %s %s", rw_dir_name(p->dir), src, dst,
		 rw_proto_name(p->proto));
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
	char probe[128], ctx_now[160], ctx_with[160], v_now[200], v_with[200];

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

	if (p->six) {
		rw_cli_ip6(p->src6, src, sizeof(src));
		rw_cli_ip6(p->dst6, dst, sizeof(dst));
	} else {
		rw_cli_ip(p->src, src, sizeof(src));
		rw_cli_ip(p->dst, dst, sizeof(dst));
	}
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:i, s:I, s:s, s:s, s:i, s:s, s:i, "
		      "s:s, s:s}",
		      "verdict", v->verdict == RW_VERDICT_ALLOW ? "allow" : "drop", "reason",
		      rw_reason_name(v->reason), "path", rw_path_name(v->path), "answer",
		      rw_answer_name(v->answer), "rule", v->rule, "rule_id", (int)v->rule_id, "run",
		      v->run, "gen", (int)v->gen, "revision", (json_int_t)v->revision, "dir",
		      rw_dir_name(p->dir), "src", src, "sport", (int)p->sport, "dst", dst, "dport",
		      (int)p->dport, "proto",
		      p->proto == IPPROTO_ICMPV6 ? "icmpv6" : rw_proto_name(p->proto), "source",
		      v->source ? v->source : "live");
	json_object_set_new(o, "family", json_string(p->six ? "ipv6" : "ipv4"));
	if (p->proto == IPPROTO_ICMPV6) {
		json_object_set_new(o, "icmp_type", json_integer(p->dport));
		json_object_del(o, "sport");
		json_object_del(o, "dport");
	}
	return o;
}

/* ---- the kernel's state, read only ------------------------------------------------------- */

int rw_cli_open(struct rw_datapath *dp, const char *bpffs, char *err, size_t errlen)
{
	int layout = rw_datapath_pinned_layout(bpffs);

	if (layout == 0) {
		snprintf(err, errlen,
			 "nothing pinned at %s: runwall is not set up on this node, "
			 "or its maps are under another --bpffs",
			 bpffs);
		return -ENOENT;
	}
	if (layout < 0) {
		snprintf(err, errlen, "%s/%s: %s", bpffs, rw_map_names[RW_M_CONFIG],
			 strerror(-layout));
		return layout;
	}
	if (layout != RW_LAYOUT_VERSION) {
		snprintf(err, errlen, "the maps pinned at %s have layout %d, this runwall reads %d",
			 bpffs, layout, RW_LAYOUT_VERSION);
		return -EPROTO;
	}
	return rw_datapath_open_pinned(dp, bpffs, err, errlen);
}

enum rw_map_id rw_cli_map_of(enum rw_map_id id)
{
	for (int m = 0; m < (int)id; m++)
		if (!strcmp(rw_map_shown_names[m], rw_map_shown_names[id]))
			return m;
	return id;
}

/* Whether ep binds pod (an address whose flag is clear is not bound). */
static bool endpoint_binds(const struct rw_endpoint *ep, const struct rw_ip *pod)
{
	if (pod->family == AF_INET6)
		return (ep->flags & RW_EP_IP6) && !memcmp(ep->pod_ip6, pod->a, sizeof(ep->pod_ip6));
	return (ep->flags & RW_EP_IP4) && ep->pod_ip == pod->a[0];
}

int rw_cli_pod_ifindex_of(const struct rw_datapath *dp, const struct rw_ip *pod, __u32 *ifindex)
{
	int fd = dp->map_fd[RW_M_ENDPOINTS];
	__u32 key, *prev = NULL, found = 0;
	struct rw_endpoint ep;

	while (bpf_map_get_next_key(fd, prev, &key) == 0) {
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &ep) == 0 && endpoint_binds(&ep, pod) &&
		    (!found || key < found))
			found = key;
	}
	if (!found)
		return -ENOENT;
	*ifindex = found;
	return 0;
}

int rw_cli_pod_ifindex(const struct rw_datapath *dp, __be32 pod, __u32 *ifindex)
{
	struct rw_ip ip = rw_ip4(pod);

	return rw_cli_pod_ifindex_of(dp, &ip, ifindex);
}

/* ---- the agent ----------------------------------------------------------------------------- */

/* The snapshot in force as the agent holds it (`policy` on the control socket), whichever way
 * it came (file or `runwall apply`); else the agent's policy file if it is still that revision.
 */
static int policy_from_agent(const char *socket, __u64 live_revision, struct rw_policy *out)
{
	struct rw_policy_error perr;
	json_t *reply = NULL, *text;
	int err = -ENOENT;

	if (!socket || rw_ctl_call(socket, "policy", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &reply))
		return -ENOENT;
	text = json_object_get(reply, "snapshot");
	if (json_is_true(json_object_get(reply, "ok")) && json_is_string(text) &&
	    rw_policy_parse(json_string_value(text), json_string_length(text), "agent", out,
			    &perr) == 0) {
		if (out->revision == live_revision)
			err = 0;
		else
			rw_policy_free(out);
	}
	json_decref(reply);
	return err;
}

int rw_cli_agent_policy(const char *socket, json_t *status, __u64 live_revision,
			struct rw_policy *out)
{
	struct rw_policy_error perr;
	const char *path;

	memset(out, 0, sizeof(*out));
	if (!live_revision)
		return -ENOENT;
	if (policy_from_agent(socket, live_revision, out) == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	if (!status)
		return -ENOENT;
	path = json_string_value(json_object_get(status, "policy_file"));
	if (!path || rw_policy_parse_file(path, out, &perr))
		return -ENOENT;
	/* The file may have moved on since it was applied: its names would be wrong then. */
	if (out->revision != live_revision) {
		rw_policy_free(out);
		memset(out, 0, sizeof(*out));
		return -ENOENT;
	}
	return 0;
}
