// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* datapath.c: load the programs, pin and adopt the maps (the handle the other lib files use). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <netinet/in.h>
#include <linux/magic.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "datapath.h"
#include "reasons.h"
#include "runwall.skel.h"
#include "util.h"

const char *const rw_map_names[RW_M__COUNT] = {
#define X(id, pin, shown) [RW_M_##id] = #pin,
	RW_MAPS(X)
#undef X
};

const char *const rw_map_shown_names[RW_M__COUNT] = {
#define X(id, pin, shown) [RW_M_##id] = shown,
	RW_MAPS(X)
#undef X
};

/* Event budget of a fresh node: enough for a sandbox's normal flows, not for a flood. */
#define RW_DEFAULT_EVENT_RATE  200
#define RW_DEFAULT_EVENT_BURST 400
/* Answers to refused packets, per sandbox: enough for every connect() a program makes at once
 * to fail fast, far below what a flood could make the node send.
 */
#define RW_DEFAULT_ANSWER_RATE	100
#define RW_DEFAULT_ANSWER_BURST 100

static void datapath_init(struct rw_datapath *dp, unsigned int flags)
{
	memset(dp, 0, sizeof(*dp));
	dp->flags = flags;
	for (int i = 0; i < RW_M__COUNT; i++)
		dp->map_fd[i] = -1;
	for (int i = 0; i < RW_DIR_COUNT; i++)
		dp->prog_fd[i] = dp->prog6_fd[i] = dp->icmp6_fd[i] = -1;
	dp->flip_fd = -1;
	dp->lease_fd = -1;
}

static int mkdir_p(const char *path)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Pins only work on a bpf filesystem. The usual trap: `ip netns exec` remounts /sys in a new
 * mount namespace, which hides the host's /sys/fs/bpf.
 */
static int check_bpffs(const char *pin_dir, char *err, size_t errlen)
{
	char dir[PATH_MAX], *slash;
	struct statfs st;

	snprintf(dir, sizeof(dir), "%s", pin_dir);
	while (statfs(dir, &st)) {
		slash = strrchr(dir, '/');
		if (!slash || slash == dir)
			return -ENOENT;
		*slash = '\0';
	}
	if (st.f_type == BPF_FS_MAGIC)
		return 0;
	return rw_fail_msg(
		err, errlen, -ENOTSUP,
		"%s: %s is not a bpf filesystem (mount -t bpf bpf %s; inside `ip netns exec`, "
		"/sys is remounted without it: enter the netns with `nsenter "
		"--net=/run/netns/NAME`)",
		pin_dir, dir, dir);
}

int rw_datapath_pinned_layout(const char *pin_dir)
{
	char path[PATH_MAX];
	struct rw_config cfg;
	__u32 zero = 0;
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, rw_map_names[RW_M_CONFIG]);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	err = bpf_map_lookup_elem(fd, &zero, &cfg) ? -errno : (int)cfg.layout_version;
	close(fd);
	return err;
}

/* A fresh config: not ready (state 0), our layout, the default event budget. */
static int config_init(struct rw_datapath *dp)
{
	struct rw_config cfg;
	int err;

	err = rw_config_read(dp, &cfg);
	if (err)
		return err;
	if (cfg.layout_version == RW_LAYOUT_VERSION)
		return 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.layout_version = RW_LAYOUT_VERSION;
	cfg.event_rate = RW_DEFAULT_EVENT_RATE;
	cfg.event_burst = RW_DEFAULT_EVENT_BURST;
	cfg.answer_rate = RW_DEFAULT_ANSWER_RATE;
	cfg.answer_burst = RW_DEFAULT_ANSWER_BURST;
	cfg.ct_per_sandbox = RW_CT_PER_SANDBOX;
	cfg.ct_node = RW_CT_NODE;
	return rw_config_write(dp, &cfg);
}

/* max_entries of a map pinned under pin_dir: 0 when it is not pinned there. */
static __u32 pinned_max_entries(const char *pin_dir, enum rw_map_id id)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, rw_map_names[id]);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		info.max_entries = 0;
	close(fd);
	return info.max_entries;
}

/* A program's fd, or -1 when it was left out of the load (RW_DP_SKIP_*). */
static int prog_fd_loaded(const struct bpf_program *prog)
{
	return bpf_program__autoload(prog) ? bpf_program__fd(prog) : -1;
}

/* A program array's slot per direction, for each program loaded (fd >= 0). */
static int progs_fill(struct rw_datapath *dp, int map, const int fd[RW_DIR_COUNT], char *errbuf,
		      size_t errlen)
{
	for (__u32 d = 0; d < RW_DIR_COUNT; d++)
		if (fd[d] >= 0 && bpf_map_update_elem(dp->map_fd[map], &d, &fd[d], BPF_ANY))
			return rw_fail_msg(errbuf, errlen, -errno, "%s[%s]: %s", rw_map_names[map],
					   rw_dir_name(d), strerror(errno));
	return 0;
}

int rw_datapath_load(struct rw_datapath *dp, const char *pin_dir, unsigned int flags, char *errbuf,
		     size_t errlen)
{
	return rw_datapath_load_sized(dp, pin_dir, flags, 0, errbuf, errlen);
}

int rw_datapath_load_sized(struct rw_datapath *dp, const char *pin_dir, unsigned int flags,
			   __u32 max_endpoints, char *errbuf, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct runwall_bpf *skel = NULL;
	struct bpf_map *map;
	__u32 ep_size = 0;
	int err, layout;

	datapath_init(dp, flags);
	if (!(flags & RW_DP_NO_PIN)) {
		err = check_bpffs(pin_dir, errbuf, errlen);
		if (err)
			return err;
		/* Check the layout before libbpf tries to reuse the pins, to name the problem. */
		layout = rw_datapath_pinned_layout(pin_dir);
		if (layout < 0)
			return rw_fail_msg(errbuf, errlen, layout,
					   "%s: cannot read pinned config: %s", pin_dir,
					   strerror(-layout));
		if (layout && layout != RW_LAYOUT_VERSION)
			return rw_fail_msg(
				errbuf, errlen, -EPROTO,
				"%s: pinned maps have layout %d, this runwall has %d; run "
				"`runwall detach` first",
				pin_dir, layout, RW_LAYOUT_VERSION);
		err = mkdir_p(pin_dir);
		if (err)
			return rw_fail_msg(errbuf, errlen, err, "%s: %s", pin_dir, strerror(-err));
		snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", pin_dir);
		opts.pin_root_path = dp->pin_dir;
		/* Pinned endpoints keep the size they were made with: libbpf reuses a pin only
		 * when every attribute matches.
		 */
		ep_size = pinned_max_entries(pin_dir, RW_M_ENDPOINTS);
	}
	if (!ep_size)
		ep_size = max_endpoints;

	skel = runwall_bpf__open_opts(&opts);
	if (!skel) {
		err = -errno;
		return rw_fail_msg(errbuf, errlen, err, "opening the BPF object: %s",
				   strerror(-err));
	}
	if (flags & RW_DP_NO_PIN) {
		bpf_object__for_each_map(map, skel->obj) bpf_map__set_pin_path(map, NULL);
	}
	skel->rodata->rw_dry_run = !!(flags & RW_DP_DRY_RUN);
	/* A dry run's IPv6 programs are its own: the pinned rw_progs6 and rw_progs_icmp6 hold the
	 * node's, which the programs attached on the veths tail-call.
	 */
	if (flags & RW_DP_DRY_RUN) {
		bpf_map__set_pin_path(skel->maps.rw_progs6, NULL);
		bpf_map__set_pin_path(skel->maps.rw_progs_icmp6, NULL);
	}
	/* The flip only where one can happen: not in a dry run over the pins (`runwall explain`
	 * against the node's policy), which must never write them.
	 */
	bpf_program__set_autoload(skel->progs.rw_flip,
				  !(flags & RW_DP_DRY_RUN) || (flags & RW_DP_NO_PIN));
	bpf_program__set_autoload(skel->progs.rw_lease,
				  !(flags & RW_DP_DRY_RUN) || (flags & RW_DP_NO_PIN));
	/* Only a dry run may leave judging programs out: the agent's must all be there. */
	if (flags & RW_DP_DRY_RUN) {
		bool v6 = !(flags & RW_DP_SKIP_IPV6);

		bpf_program__set_autoload(skel->progs.rw_egress, !(flags & RW_DP_SKIP_EGRESS));
		bpf_program__set_autoload(skel->progs.rw_ingress, !(flags & RW_DP_SKIP_INGRESS));
		bpf_program__set_autoload(skel->progs.rw_egress6,
					  v6 && !(flags & RW_DP_SKIP_EGRESS));
		bpf_program__set_autoload(skel->progs.rw_ingress6,
					  v6 && !(flags & RW_DP_SKIP_INGRESS));
		v6 = v6 && !(flags & RW_DP_SKIP_ICMP6);
		bpf_program__set_autoload(skel->progs.rw_egress_icmp6,
					  v6 && !(flags & RW_DP_SKIP_EGRESS));
		bpf_program__set_autoload(skel->progs.rw_ingress_icmp6,
					  v6 && !(flags & RW_DP_SKIP_INGRESS));
	}
	if (ep_size && ep_size < RW_MAX_ENDPOINTS)
		bpf_map__set_max_entries(skel->maps.rw_endpoints, ep_size);
	err = runwall_bpf__load(skel);
	if (err) {
		rw_fail_msg(errbuf, errlen, err,
			    "loading the BPF programs: %s (libbpf's warnings above say "
			    "more)",
			    strerror(-err));
		goto cleanup;
	}
	dp->skel = skel;
	dp->prog_fd[RW_DIR_EGRESS] = prog_fd_loaded(skel->progs.rw_egress);
	dp->prog_fd[RW_DIR_INGRESS] = prog_fd_loaded(skel->progs.rw_ingress);
	if (bpf_program__autoload(skel->progs.rw_flip))
		dp->flip_fd = bpf_program__fd(skel->progs.rw_flip);
	if (bpf_program__autoload(skel->progs.rw_lease))
		dp->lease_fd = bpf_program__fd(skel->progs.rw_lease);
	for (int i = 0; i < RW_M__COUNT; i++) {
		map = bpf_object__find_map_by_name(skel->obj, rw_map_names[i]);
		dp->map_fd[i] = map ? bpf_map__fd(map) : -1;
		if (dp->map_fd[i] < 0) {
			err = rw_fail_msg(errbuf, errlen, -ENOENT,
					  "map %s missing from the BPF object", rw_map_names[i]);
			goto cleanup;
		}
	}
	dp->prog6_fd[RW_DIR_EGRESS] = prog_fd_loaded(skel->progs.rw_egress6);
	dp->prog6_fd[RW_DIR_INGRESS] = prog_fd_loaded(skel->progs.rw_ingress6);
	dp->icmp6_fd[RW_DIR_EGRESS] = prog_fd_loaded(skel->progs.rw_egress_icmp6);
	dp->icmp6_fd[RW_DIR_INGRESS] = prog_fd_loaded(skel->progs.rw_ingress_icmp6);
	/* The ICMPv6 programs first, so that a new IPv6 program, once in its slot, finds its own
	 * ICMPv6 program (an old one holds its ICMPv6 judgement, or tail-calls the new one, which
	 * judges as it did). Each slot is replaced whole: a packet tail-calls the old program or
	 * the new one.
	 */
	err = progs_fill(dp, RW_M_PROGS_ICMP6, dp->icmp6_fd, errbuf, errlen);
	if (!err)
		err = progs_fill(dp, RW_M_PROGS6, dp->prog6_fd, errbuf, errlen);
	if (err)
		goto cleanup;
	if (!(flags & RW_DP_DRY_RUN)) {
		err = config_init(dp);
		if (err) {
			rw_fail_msg(errbuf, errlen, err, "initialising %s: %s",
				    rw_map_names[RW_M_CONFIG], strerror(-err));
			goto cleanup;
		}
	}
	return 0;

cleanup:
	runwall_bpf__destroy(skel);
	datapath_init(dp, flags);
	return err;
}

int rw_datapath_open_pinned(struct rw_datapath *dp, const char *pin_dir, char *errbuf,
			    size_t errlen)
{
	char path[PATH_MAX];
	int err, layout;

	datapath_init(dp, 0);
	layout = rw_datapath_pinned_layout(pin_dir);
	if (layout <= 0) {
		err = layout ? layout : -ENOENT;
		return rw_fail_msg(errbuf, errlen, err,
				   "%s: no runwall maps pinned here (%s); is the agent "
				   "running with this --bpffs?",
				   pin_dir, strerror(-err));
	}
	if (layout != RW_LAYOUT_VERSION)
		return rw_fail_msg(errbuf, errlen, -EPROTO,
				   "%s: pinned maps have layout %d, this runwall "
				   "reads %d",
				   pin_dir, layout, RW_LAYOUT_VERSION);
	snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", pin_dir);
	for (int i = 0; i < RW_M__COUNT; i++) {
		snprintf(path, sizeof(path), "%s/%s", pin_dir, rw_map_names[i]);
		dp->map_fd[i] = bpf_obj_get(path);
		if (dp->map_fd[i] < 0) {
			err = rw_fail_msg(errbuf, errlen, -errno, "%s: %s", path, strerror(errno));
			rw_datapath_close(dp);
			return err;
		}
	}
	return 0;
}

int rw_datapath_open_pinned_progs(struct rw_datapath *dp, char *err, size_t errlen)
{
	char path[PATH_MAX + 16];

	for (int d = 0; d < RW_DIR_COUNT; d++) {
		snprintf(path, sizeof(path), "%s/%s/%s", dp->pin_dir, RW_PROGS_DIR, rw_dir_name(d));
		dp->prog_fd[d] = bpf_obj_get(path);
		if (dp->prog_fd[d] < 0)
			return rw_fail_msg(err, errlen, -errno, "%s: %s", path, strerror(errno));
	}
	return 0;
}

int rw_datapath_pin_progs(const struct rw_datapath *dp)
{
	char dir[PATH_MAX + 8], tmp[PATH_MAX + 32], path[PATH_MAX + 32];
	int err;

	snprintf(dir, sizeof(dir), "%s/%s", dp->pin_dir, RW_PROGS_DIR);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	for (int d = 0; d < RW_DIR_COUNT; d++) {
		snprintf(tmp, sizeof(tmp), "%s/tmp_%s", dir, rw_dir_name(d));
		snprintf(path, sizeof(path), "%s/%s", dir, rw_dir_name(d));
		unlink(tmp);
		if (bpf_obj_pin(dp->prog_fd[d], tmp))
			return -errno;
		if (rename(tmp, path)) {
			err = -errno;
			unlink(tmp);
			return err;
		}
	}
	return 0;
}

void rw_datapath_close(struct rw_datapath *dp)
{
	if (dp->apply && dp->apply_free)
		dp->apply_free(dp->apply);
	dp->apply = NULL;
	free(dp->cut_revs);
	if (dp->skel) {
		runwall_bpf__destroy(dp->skel);
	} else {
		for (int i = 0; i < RW_M__COUNT; i++)
			if (dp->map_fd[i] >= 0)
				close(dp->map_fd[i]);
		for (int d = 0; d < RW_DIR_COUNT; d++)
			if (dp->prog_fd[d] >= 0)
				close(dp->prog_fd[d]);
	}
	datapath_init(dp, dp->flags);
}

int rw_datapath_unpin(const char *pin_dir)
{
	char path[PATH_MAX + 16];
	int removed = 0;

	for (int i = 0; i < RW_M__COUNT; i++) {
		snprintf(path, sizeof(path), "%s/%s", pin_dir, rw_map_names[i]);
		if (unlink(path) == 0)
			removed++;
		else if (errno != ENOENT)
			return -errno;
	}
	for (int d = 0; d < RW_DIR_COUNT; d++) {
		snprintf(path, sizeof(path), "%s/%s/%s", pin_dir, RW_PROGS_DIR, rw_dir_name(d));
		if (unlink(path) == 0)
			removed++;
		else if (errno != ENOENT)
			return -errno;
	}
	snprintf(path, sizeof(path), "%s/%s", pin_dir, RW_PROGS_DIR);
	rmdir(path);
	/* The folder goes only if it is empty: whatever else is in it is not ours. */
	rmdir(pin_dir);
	return removed;
}
