/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bench.h: what bench_datapath and bench_lookups share: dying with a message, sorting their
 * samples, and their --json FILE (the option and the writing of the rows). Each defines
 * BENCH_NAME, the prefix of its messages, before it includes this.
 */
#ifndef RUNWALL_TEST_BENCH_H
#define RUNWALL_TEST_BENCH_H

#include <getopt.h>
#include <jansson.h>
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

/* getopt_long() over opts (long options only), --json FILE ('j') taken here into *json_path:
 * returns the next other option, or -1 at the end, as getopt_long() does.
 */
static inline int bench_getopt(int argc, char **argv, const struct option *opts,
			       const char **json_path)
{
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) == 'j')
		*json_path = optarg;
	return c;
}

/* The rows to json_path where --json gave one, then freed. */
static inline void bench_write_json(json_t *rows, const char *json_path)
{
	if (json_path && json_dump_file(rows, json_path, JSON_INDENT(1)))
		DIE("%s: cannot write", json_path);
	json_decref(rows);
}

#endif /* RUNWALL_TEST_BENCH_H */
