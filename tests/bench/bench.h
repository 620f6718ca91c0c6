/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bench.h: what bench_datapath and bench_lookups share: dying with a message, and sorting
 * their samples. Each defines BENCH_NAME, the prefix of its messages, before it includes this.
 */
#ifndef RUNWALL_TEST_BENCH_H
#define RUNWALL_TEST_BENCH_H

#include <stdio.h>
#include <stdlib.h>

/* "BENCH_NAME: what" on stderr, then exit 1. */
#define DIE(...)                                              \
	do {                                                  \
		fprintf(stderr, BENCH_NAME ": " __VA_ARGS__); \
		fputc('\n', stderr);                          \
		exit(1);                                      \
	} while (0)

/* qsort()'s order of doubles, smallest first. */
static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#endif /* RUNWALL_TEST_BENCH_H */
