// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_counters_fmt.c: see cli_counters_fmt.h. */
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
#include "cli_counters_fmt.h"
#include "cli_text.h"
#include "ctl.h"
#include "eventfmt.h"
#include "reasons.h"

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
