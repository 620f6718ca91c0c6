// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* policy_file.c: the --policy file (a ConfigMap's mount): its folder watched with inotify, the
 * file read again on every event, and applied through agent_apply() when newer than the policy in
 * force, adopted when it is that policy (a restarted agent), refused when older.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>

#include "agent.h"
#include "ctl.h"
#include "log.h"
#include "util.h"

/* The policy file: applied when it is newer than what is in force, adopted when it is what
 * is in force (a restarted agent), refused when older.
 */
void agent_load_policy_file(struct agent *a, bool at_start)
{
	struct rw_policy_error perr = {};
	struct rw_policy p;
	char *buf = NULL;
	size_t len = 0;
	json_t *reply = NULL;
	uint64_t in_force;
	int err;

	err = rw_read_file(a->policy_path, RW_CTL_MAX_BODY, &buf, &len);
	if (err) {
		/* A ConfigMap swap removes the file for a moment; the next event brings it back. */
		if (at_start || err != -ENOENT)
			rw_warn("%s: %s", a->policy_path, strerror(-err));
		return;
	}
	if (a->pol.policy_bytes && len == a->pol.policy_len &&
	    !memcmp(buf, a->pol.policy_bytes, len)) {
		free(buf);
		return;
	}
	free(a->pol.policy_bytes);
	a->pol.policy_bytes = buf;
	a->pol.policy_len = len;

	in_force = agent_revision_in_force(a);
	if (rw_policy_parse(buf, len, a->policy_path, &p, &perr)) {
		a->pol.metrics.applies_refused++;
		rw_warn("refused snapshot: %s", perr.text);
		agent_set_error(a, "%s", perr.text);
		return;
	}
	if (in_force && p.revision == in_force && !a->pol.have_policy) {
		/* What the kernel enforces already: adopt it, do not apply it again. Its content is
		 * only as good as its revision number: the next apply judges every run's flows
		 * again, and PolicyWatch builds no change on it (pw_follow.c): a snapshot from
		 * the stream confirms it or replaces it first.
		 */
		rw_info("%s: revision %llu is the one in force; adopted (the content in force is not "
			"known: the next apply judges every run's flows again, and the control "
			"plane's changes wait for its snapshot)",
			a->policy_path, (unsigned long long)in_force);
		a->pol.policy = p;
		a->pol.have_policy = true;
		a->pol.policy_adopted = true;
		agent_policy_keep_text(a, buf, len, a->policy_path);
		agent_runs_update(a);
		return;
	}
	if (in_force && p.revision <= in_force) {
		rw_warn("%s: revision %llu is not newer than %llu, the one in force; keeping %llu",
			a->policy_path, (unsigned long long)p.revision,
			(unsigned long long)in_force, (unsigned long long)in_force);
		rw_policy_free(&p);
		return;
	}
	rw_policy_free(&p);
	agent_apply(a, buf, len, a->policy_path, &reply);
	json_decref(reply);
}

int agent_watch_policy(struct agent *a)
{
	char copy[PATH_MAX];
	int fd;

	snprintf(copy, sizeof(copy), "%s", a->policy_path);
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Watch the folder, not the file: a ConfigMap update swaps a symlink (..data) and editors
	 * rename a new file over the old one; either way the old inode is not the file any more.
	 */
	if (inotify_add_watch(fd, dirname(copy),
			      IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB) <
	    0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

void agent_policy_forget_file(struct agent *a)
{
	free(a->pol.policy_bytes);
	a->pol.policy_bytes = NULL;
}
