// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* log.c: stderr logging with levels; libbpf's messages routed through it. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <bpf/libbpf.h>

#include "log.h"

int rw_log_verbosity = RW_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

static void vlog(enum rw_log_level level, const char *fmt, va_list ap)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	if ((int)level > rw_log_verbosity)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ldZ %s ", stamp, ts.tv_nsec / 1000000, level_names[level]);
	vfprintf(stderr, fmt, ap);
}

void rw_log(enum rw_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
	if ((int)level <= rw_log_verbosity && fmt[0] && fmt[__builtin_strlen(fmt) - 1] != '\n')
		fputc('\n', stderr);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's warnings (a verifier log, "couldn't reuse pinned map") are warnings at the default
	 * level; its info is our debug (-v), its debug our trace (-vv).
	 */
	enum rw_log_level ours = level == LIBBPF_WARN	? RW_LOG_WARN
				 : level == LIBBPF_INFO ? RW_LOG_DEBUG
							: RW_LOG_TRACE;

	vlog(ours, fmt, ap);
	return 0;
}

void rw_log_setup_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
