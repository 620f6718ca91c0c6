// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* log_stderr.c: the suites print the library's log lines (and libbpf's, a verifier log among
 * them) to stderr, as the front ends do. Linked into every suite as an object, not from the
 * helpers' archive: nothing calls it, the constructor sets the print callback before main().
 */
#include <stdio.h>

#include "log.h"

static void print_stderr(enum rw_log_level level, const char *line)
{
	fputs(line, stderr);
}

__attribute__((constructor)) static void log_to_stderr(void)
{
	rw_log_set_print(print_stderr);
}
