// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fake_libcurl.c: a "libcurl.so.4" with one of the names runwall calls, for test_netlibs. The
 * Makefile builds it into BUILD/tests/unit/fakelibs/, and the test runs itself again with that
 * folder first on LD_LIBRARY_PATH, so that netlibs.c's dlopen("libcurl.so.4") opens it.
 */
int curl_global_init(long flags)
{
	return flags == 3 ? 0 : 2; /* CURLE_OK for CURL_GLOBAL_ALL, else CURLE_FAILED_INIT */
}
