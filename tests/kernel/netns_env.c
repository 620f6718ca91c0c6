// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* netns_env.c: a shell command by format, and a network namespace with a bpffs of the test's
 * own, for the cmocka kernel suites.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "netns_env.h"

int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

int test_netns_enter(void)
{
	struct statfs sfs;

	if (unshare(CLONE_NEWNET)) {
		perror("unshare(CLONE_NEWNET)");
		return -1;
	}
	if (statfs("/sys/fs/bpf", &sfs) || sfs.f_type != BPF_FS_MAGIC) {
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700")) {
			perror("mount bpffs");
			return -1;
		}
	}
	return 0;
}
