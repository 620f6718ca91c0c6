/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* harness.h: TAP output and named checks that print actual against expected. */
#ifndef RUNWALL_TEST_HARNESS_H
#define RUNWALL_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

extern int t_failed;
extern int t_count;

#define CHECK(cond, name, fmt, ...)                                          \
	({                                                                   \
		int __ok = !!(cond);                                         \
		if (!__ok) {                                                 \
			t_failed++;                                          \
			printf("  FAIL %s: " fmt "\n", name, ##__VA_ARGS__); \
		}                                                            \
		__ok;                                                        \
	})

#define CHECK_EQ(actual, expected, name)                                                      \
	CHECK((long long)(actual) == (long long)(expected), name, "%s = %lld, expected %lld", \
	      #actual, (long long)(actual), (long long)(expected))

/* A fatal setup problem: the suite cannot go on, and says so. */
#define FATAL(fmt, ...)                                       \
	do {                                                  \
		printf("Bail out! " fmt "\n", ##__VA_ARGS__); \
		exit(1);                                      \
	} while (0)

#endif /* RUNWALL_TEST_HARNESS_H */
