/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* netns_env.h: what the cmocka kernel suites (test_attach, test_netlink, test_sandboxes) share:
 * a shell command by format, and a network namespace with a bpffs of the test's own.
 */
#ifndef RUNWALL_TEST_NETNS_ENV_H
#define RUNWALL_TEST_NETNS_ENV_H

/* system() of the formatted command: its status. */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Enters a network namespace of the process's own, and mounts a bpffs in a mount namespace of
 * its own unless the machine's is mounted, so that nothing outlives the test. 0, or -1 with
 * the cause on stderr.
 */
int test_netns_enter(void);

#endif /* RUNWALL_TEST_NETNS_ENV_H */
