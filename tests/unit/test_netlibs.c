// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_netlibs.c: user/lib/netlibs.c against a libcurl that lacks names runwall calls
 * (fake_libcurl.c): a name found is called, a name missing answers the library's own failure at
 * every call and is logged once, not at every call; a library that cannot be opened likewise.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <microhttpd.h>

#include "log.h"

static int errors_logged;
static char last_error[512];

static void count_errors(enum rw_log_level level, const char *line)
{
	if (level != RW_LOG_ERROR)
		return;
	errors_logged++;
	snprintf(last_error, sizeof(last_error), "%s", line);
}

static void test_found_name_is_called(void **state)
{
	(void)state;
	assert_int_equal(curl_global_init(CURL_GLOBAL_ALL), CURLE_OK);
	assert_int_equal(curl_global_init(0), CURLE_FAILED_INIT);
}

static void test_missing_name_logged_once(void **state)
{
	int before = errors_logged;

	(void)state;
	for (int i = 0; i < 5; i++)
		assert_null(curl_easy_init());
	assert_int_equal(errors_logged - before, 1);
	assert_non_null(strstr(last_error, "libcurl.so.4"));
	assert_non_null(strstr(last_error, "curl_easy_init"));

	before = errors_logged;
	for (int i = 0; i < 5; i++)
		assert_null(curl_slist_append(NULL, "a: b"));
	assert_int_equal(errors_logged - before, 1);
	assert_non_null(strstr(last_error, "curl_slist_append"));
}

/* The folder has no libmicrohttpd.so.12: the library is logged once, its functions fail. */
static void test_missing_library_logged_once(void **state)
{
	int before = errors_logged;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_null(MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, NULL,
					     NULL, MHD_OPTION_END));
	assert_int_equal(errors_logged - before, 1);
	assert_non_null(strstr(last_error, "libmicrohttpd.so.12"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_found_name_is_called),
		cmocka_unit_test(test_missing_name_logged_once),
		cmocka_unit_test(test_missing_library_logged_once),
	};
	char dir[PATH_MAX], *slash;

	(void)argc;
	/* dlopen() reads LD_LIBRARY_PATH as the process started: run again with fakelibs/ alone on
	 * it, and no system folder searched first for these two sonames.
	 */
	if (!getenv("RW_TEST_FAKELIBS")) {
		if (!realpath("/proc/self/exe", dir) || !(slash = strrchr(dir, '/'))) {
			fprintf(stderr, "test_netlibs: cannot find its own binary: %s\n",
				strerror(errno));
			return 1;
		}
		snprintf(slash, sizeof(dir) - (size_t)(slash - dir), "/fakelibs");
		if (access(dir, R_OK) != 0) {
			fprintf(stderr, "test_netlibs: %s: %s (make builds it)\n", dir,
				strerror(errno));
			return 1;
		}
		setenv("RW_TEST_FAKELIBS", dir, 1);
		setenv("LD_LIBRARY_PATH", dir, 1);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "test_netlibs: exec: %s\n", strerror(errno));
		return 1;
	}
	rw_log_set_print(count_errors);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
