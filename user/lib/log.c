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

#include "log.h"

int rw_log_verbosity = RW_LOG_INFO;

static rw_log_print_fn print_fn;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

rw_log_print_fn rw_log_set_print(rw_log_print_fn fn)
{
	rw_log_print_fn old = __atomic_exchange_n(&print_fn, fn, __ATOMIC_ACQ_REL);

	return old;
}

/* newline: end the line when the message does not (libbpf's messages carry their own). */
static void vlog(enum rw_log_level level, bool newline, const char *fmt, va_list ap)
{
	rw_log_print_fn fn = __atomic_load_n(&print_fn, __ATOMIC_ACQUIRE);
	char stamp[32], *msg = NULL, *line = NULL;
	struct timespec ts;
	struct tm tm;
	size_t n;

	if (!fn || (int)level > rw_log_verbosity || vasprintf(&msg, fmt, ap) < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = strlen(msg);
	if (asprintf(&line, "%s.%03ldZ %s %s%s", stamp, ts.tv_nsec / 1000000, level_names[level],
		     msg, newline && n && msg[n - 1] != '\n' ? "\n" : "") >= 0)
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
