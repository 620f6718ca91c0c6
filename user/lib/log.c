// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* log.c: log lines with levels and a UTC timestamp, handed to the front end's print callback;
 * libbpf's messages routed through it.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf.h>
#include <jansson.h>

#include "log.h"

int rw_log_verbosity = RW_LOG_INFO;

static rw_log_print_fn print_fn;
static enum rw_log_format log_format = RW_LOG_TEXT;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

rw_log_print_fn rw_log_set_print(rw_log_print_fn fn)
{
	rw_log_print_fn old = __atomic_exchange_n(&print_fn, fn, __ATOMIC_ACQ_REL);

	return old;
}

void rw_log_set_format(enum rw_log_format format)
{
	log_format = format;
}

/* {"ts":...,"level":...,"msg":...} and a newline; msg without its own final newline. */
static char *json_line(const char *ts, enum rw_log_level level, const char *msg)
{
	size_t n = strlen(msg);
	json_t *o = json_pack("{s:s, s:s, s:s#}", "ts", ts, "level", level_names[level], "msg", msg,
			      n && msg[n - 1] == '\n' ? n - 1 : n);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL, *line = NULL;

	json_decref(o);
	if (s && asprintf(&line, "%s\n", s) < 0)
		line = NULL;
	free(s);
	return line;
}

/* newline: end the line when the message does not (libbpf's messages carry their own). */
static void vlog(enum rw_log_level level, bool newline, const char *fmt, va_list ap)
{
	rw_log_print_fn fn = __atomic_load_n(&print_fn, __ATOMIC_ACQUIRE);
	char date[32], stamp[48], *msg = NULL, *line = NULL;
	struct timespec ts;
	struct tm tm;
	size_t n;

	if (!fn || (int)level > rw_log_verbosity || vasprintf(&msg, fmt, ap) < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(stamp, sizeof(stamp), "%.20s.%03ldZ", date, ts.tv_nsec / 1000000);
	n = strlen(msg);
	if (log_format == RW_LOG_JSON) {
		line = json_line(stamp, level, msg);
		if (line)
			fn(level, line);
	} else if (asprintf(&line, "%s %s %s%s", stamp, level_names[level], msg,
			    newline && n && msg[n - 1] != '\n' ? "\n" : "") >= 0)
		fn(level, line);
	free(line);
	free(msg);
}

void rw_log(enum rw_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, true, fmt, ap);
	va_end(ap);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's warnings (a verifier log, "couldn't reuse pinned map") are warnings at the default
	 * level; its info is our debug (-v), its debug our trace (-vv).
	 */
	enum rw_log_level ours = level == LIBBPF_WARN	? RW_LOG_WARN
				 : level == LIBBPF_INFO ? RW_LOG_DEBUG
							: RW_LOG_TRACE;

	vlog(ours, false, fmt, ap);
	return 0;
}

void rw_log_setup_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
