// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_text.c: see cli_text.h. */
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
#include "cli_text.h"
#include "cli_pins.h"
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

/* ---- tables, numbers, addresses ---- */

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

json_int_t rw_cli_jint(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

void rw_cli_json_print(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;

	printf("%s\n", s ? s : "{\"ok\":false,\"error\":\"out of memory\"}");
	fflush(stdout);
	free(s);
	json_decref(o);
}
