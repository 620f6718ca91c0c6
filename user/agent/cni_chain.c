// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cni_chain.c: the agent keeps runwall-cni chained (--cni-conf-dir). The node's network plugin
 * owns its conf file and rewrites it whole when it starts (aws-node writes 10-aws.conflist on
 * every start: a rollout, a crash, a reboot where it starts after runwall's init container),
 * which takes runwall-cni's entry out; pods created from then on would get no program from
 * runwall-cni while the agent is away. The folder is watched (inotify) and checked at every
 * resync; a missing entry is put back in the file the runtime loads (cnichain.h), within the
 * time the agent takes to read the event. Until the entry is there, status, /readyz and
 * /metrics say "not chained", and why.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/inotify.h>

#include "agent.h"
#include "cnichain.h"
#include "datapath.h"
#include "log.h"

/* The entry runwall-cni install writes by default: with the installer's defaults, the same
 * {"type": "runwall-cni"}; otherwise the agent's own --bpffs, --ifprefix and --attach-mode.
 */
static json_t *chain_entry(const struct agent *a)
{
	json_t *e = json_pack("{s:s}", "type", RW_CNI_TYPE);

	if (!e)
		return NULL;
	if (strcmp(a->dp.pin_dir, RW_DEFAULT_BPFFS))
		json_object_set_new(e, "bpffs", json_string(a->dp.pin_dir));
	if (strcmp(a->ifprefix, RW_DEFAULT_IFPREFIX))
		json_object_set_new(e, "ifPrefix", json_string(a->ifprefix));
	if (a->attach_mode != RW_ATTACH_AUTO)
		json_object_set_new(e, "attachMode",
				    json_string(rw_attach_mode_str(a->attach_mode)));
	return e;
}

void agent_cni_check(struct agent *a)
{
	struct agent_cni *c = &a->cni;
	struct rw_cni_chain st;
	json_t *entry;
	int64_t now = agent_now_ms();
	int err;

	if (!c->conf_dir)
		return;
	entry = chain_entry(a);
	if (!entry)
		return;
	err = rw_cni_chain_ensure(c->conf_dir, entry, &st);
	json_decref(entry);
	if (st.repaired) {
		/* The entry was missing from the event that said the file changed (or the last
		 * check that found it there) until now.
		 */
		c->repairs++;
		c->last_window_ms = now - (c->changed_at_ms ? c->changed_at_ms : now);
		rw_warn("%s/%s: runwall-cni's entry was missing (the file was rewritten); put back "
			"after %lld ms",
			c->conf_dir, st.file, (long long)c->last_window_ms);
		agent_view_changed(a);
	}
	if (err) {
		if (c->chained || strcmp(c->why, st.why))
			rw_err("runwall-cni not chained: %s", st.why);
		if (c->chained || !c->unchained_since_ms)
			c->unchained_since_ms = now;
	} else if (!c->chained && c->checks) {
		rw_info("%s/%s: runwall-cni chained", c->conf_dir, st.file);
	}
	if (!err)
		c->unchained_since_ms = 0;
	c->chained = !err;
	c->checks++;
	c->changed_at_ms = 0;
	snprintf(c->file, sizeof(c->file), "%s", st.file);
	snprintf(c->why, sizeof(c->why), "%s", err ? st.why : "");
}

int agent_cni_watch(struct agent *a)
{
	struct agent_cni *c = &a->cni;
	int fd;

	c->inotify_fd = -1;
	if (!c->conf_dir)
		return 0;
	fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Writers rename a whole file over the old one (IN_MOVED_TO), or write it in place
	 * (IN_CLOSE_WRITE); a deleted or renamed-away file may make another one the first.
	 */
	if (inotify_add_watch(fd, c->conf_dir,
			      IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE |
				      IN_DELETE) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	c->inotify_fd = fd;
	agent_cni_check(a);
	return 0;
}

void agent_cni_on_inotify(struct agent *a)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool ours_only = true, any = false;
	ssize_t n;

	while ((n = read(a->cni.inotify_fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			any = true;
			/* The agent's own rewrite goes through ".NAME.runwall.tmp". */
			if (!ev->len || !strstr(ev->name, ".runwall.tmp"))
				ours_only = false;
			p += sizeof(*ev) + ev->len;
		}
	}
	if (!any || ours_only)
		return;
	if (!a->cni.changed_at_ms)
		a->cni.changed_at_ms = agent_now_ms();
	agent_cni_check(a);
}

json_t *agent_cni_status(const struct agent *a)
{
	const struct agent_cni *c = &a->cni;
	int64_t now = agent_now_ms();

	if (!c->conf_dir)
		return json_null();
	return json_pack(
		"{s:s, s:s, s:b, s:o, s:I, s:o, s:o}", "conf_dir", c->conf_dir, "file", c->file,
		"chained", c->chained, "why", c->why[0] ? json_string(c->why) : json_null(),
		"repairs", (json_int_t)c->repairs, "last_repair_window_ms",
		c->repairs ? json_integer(c->last_window_ms) : json_null(), "unchained_for_ms",
		c->unchained_since_ms ? json_integer(now - c->unchained_since_ms) : json_null());
}
