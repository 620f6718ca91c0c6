// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* datapath.c: load the programs, pin and adopt the maps, small map operations. */
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
		dp->prog_fd[i] = dp->prog6_fd[i] = -1;
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
	/* A dry run's IPv6 programs are its own: the pinned rw_progs6 holds the node's, which the
	 * programs attached on the veths tail-call.
	 */
	if (flags & RW_DP_DRY_RUN)
		bpf_map__set_pin_path(skel->maps.rw_progs6, NULL);
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
	/* Each slot is replaced whole: a packet tail-calls the old IPv6 program or the new one. */
	for (__u32 d = 0; d < RW_DIR_COUNT; d++) {
		if (dp->prog6_fd[d] >= 0 &&
		    bpf_map_update_elem(dp->map_fd[RW_M_PROGS6], &d, &dp->prog6_fd[d], BPF_ANY)) {
			err = rw_fail_msg(errbuf, errlen, -errno, "%s[%s]: %s",
					  rw_map_names[RW_M_PROGS6], rw_dir_name(d),
					  strerror(errno));
			goto cleanup;
		}
	}
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

int rw_config_read(const struct rw_datapath *dp, struct rw_config *cfg)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(dp->map_fd[RW_M_CONFIG], &zero, cfg) ? -errno : 0;
}

int rw_config_write(const struct rw_datapath *dp, const struct rw_config *cfg)
{
	struct rw_config cur, next = *cfg;
	__u32 zero = 0;
	int err;

	/* The state word read here is still the one in force when the copy below rewrites it, so
	 * the copy stores the bytes they already hold. Nothing can flip in between: the word's one
	 * writer is rw_config_flip(), and only the process that owns the datapath calls either,
	 * from one thread (the agent, one per pin folder: its main loop makes every apply and every
	 * config write; `runwall explain --policy` and the tests, on private maps of their own).
	 * The CLI and runwall-cni only open the pins, and never write rw_config.
	 */
	err = rw_config_read(dp, &cur);
	if (err)
		return err;
	next.state = cur.state;
	/* The same for the lease, which rw_flip and rw_lease write. */
	next.lease_deadline_ns = cur.lease_deadline_ns;
	next.lease_seconds = cur.lease_seconds;
	return bpf_map_update_elem(dp->map_fd[RW_M_CONFIG], &zero, &next, BPF_ANY) ? -errno : 0;
}

static int flip(const struct rw_datapath *dp, struct rw_flip_args *args, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(*args));
	const char *cfg = rw_map_names[RW_M_CONFIG];
	int ret;

	if (dp->flip_fd < 0)
		return rw_fail_msg(
			err, errlen, -ENOTSUP,
			"%s: flip: this datapath was loaded without rw_flip (a dry run "
			"over the pins, or the pins only), which never changes the state",
			cfg);
	/* The kernel copies the context back into args when the program returns. */
	if (bpf_prog_test_run_opts(dp->flip_fd, &opts)) {
		ret = -errno;
		return rw_fail_msg(err, errlen, ret, "%s: flip: running rw_flip: %s", cfg,
				   strerror(-ret));
	}
	switch (opts.retval) {
	case RW_FLIP_DONE:
		return 0;
	case RW_FLIP_CHANGED:
		return rw_fail_msg(err, errlen, -ESTALE,
				   "%s: flip: the state word is %#llx, not the %#llx this change "
				   "started from (another writer%s%s?); nothing flipped%s",
				   cfg, (unsigned long long)args->found,
				   (unsigned long long)args->expect,
				   dp->pin_dir[0] ? ": a second agent on " : "", dp->pin_dir,
				   args->flags & RW_FLIP_LEASE ? ", no lease written" : "");
	default:
		return rw_fail_msg(err, errlen, -ENOENT, "%s: flip: rw_flip answered %u", cfg,
				   opts.retval);
	}
}

int rw_config_flip(const struct rw_datapath *dp, __u64 expect, __u64 next, char *err, size_t errlen)
{
	struct rw_flip_args args = {.expect = expect, .next = next};

	return flip(dp, &args, err, errlen);
}

int rw_config_flip_leased(const struct rw_datapath *dp, __u64 expect, __u64 next,
			  __u32 lease_seconds, char *err, size_t errlen)
{
	struct rw_flip_args args = {.expect = expect,
				    .next = next,
				    .lease_seconds = lease_seconds,
				    .flags = RW_FLIP_LEASE};

	return flip(dp, &args, err, errlen);
}

int rw_lease_write(const struct rw_datapath *dp, __u64 deadline_ns, char *err, size_t errlen)
{
	struct rw_lease_args args = {.deadline_ns = deadline_ns};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &args, .ctx_size_in = sizeof(args));
	const char *cfg = rw_map_names[RW_M_CONFIG];
	int ret;

	if (dp->lease_fd < 0)
		return rw_fail_msg(err, errlen, -ENOTSUP,
				   "%s: lease: this datapath was loaded without rw_lease (a dry "
				   "run over the pins, or the pins only)",
				   cfg);
	if (bpf_prog_test_run_opts(dp->lease_fd, &opts)) {
		ret = -errno;
		return rw_fail_msg(err, errlen, ret, "%s: lease: running rw_lease: %s", cfg,
				   strerror(-ret));
	}
	if (opts.retval != RW_FLIP_DONE)
		return rw_fail_msg(err, errlen, -ENOENT, "%s: lease: rw_lease answered %u", cfg,
				   opts.retval);
	return 0;
}

static int lease_from_now(const struct rw_datapath *dp, __u32 lease_seconds, char *err,
			  size_t errlen)
{
	/* From CLOCK_MONOTONIC, bpf_ktime_get_ns()'s clock; the coarse one packets read lags it. */
	return rw_lease_write(dp, (__u64)rw_now_mono_ns() + (__u64)lease_seconds * 1000000000ULL,
			      err, errlen);
}

int rw_lease_renew(const struct rw_datapath *dp, char *err, size_t errlen)
{
	struct rw_config cfg;
	int ret = rw_config_read(dp, &cfg);

	if (ret)
		return rw_fail_msg(err, errlen, ret, "%s: lease: %s", rw_map_names[RW_M_CONFIG],
				   strerror(-ret));
	return cfg.lease_seconds ? lease_from_now(dp, cfg.lease_seconds, err, errlen) : 0;
}

enum rw_lease_state rw_lease_state(const struct rw_config *cfg, int64_t *remaining_ns)
{
	struct timespec ts;
	int64_t left;

	if (remaining_ns)
		*remaining_ns = 0;
	if (!cfg->lease_deadline_ns)
		return RW_LEASE_NONE;
	/* bpf_ktime_get_coarse_ns() is CLOCK_MONOTONIC_COARSE: the clock the programs judge by. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	left = (int64_t)(cfg->lease_deadline_ns - ((__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec));
	if (remaining_ns)
		*remaining_ns = left;
	return left > 0 ? RW_LEASE_IN_FORCE : RW_LEASE_EXPIRED;
}

/* ---- conntrack: two tables per sandbox veth, one per family ------------------------------- */

/* The outer map of a family's tables: rw_conntrack (IPv4) or rw_conntrack6 (IPv6). */
static int ct_outer(const struct rw_datapath *dp, bool six)
{
	return dp->map_fd[six ? RW_M_CONNTRACK6 : RW_M_CONNTRACK];
}

/* ---- veth indexes (runwall.h, rw_veth_slots): a bound veth's binding and tables by index --- */

/* The same tables by veth index. */
static int ct_slots(const struct rw_datapath *dp, bool six)
{
	return dp->map_fd[six ? RW_M_CT6_SLOTS : RW_M_CT_SLOTS];
}

/* The veth whose binding is at `idx`, in *owner (0: none). 0, or -errno when it cannot be told
 * (an index that cannot be read is never taken for an empty one).
 */
static int index_owner(const struct rw_datapath *dp, __u32 idx, __u32 *owner)
{
	struct rw_veth v = {0};
	__u32 id, zero = 0;
	int fd, err = 0;

	*owner = 0;
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_VETH_SLOTS], &idx, &id))
		return errno == ENOENT ? 0 : -errno;
	fd = bpf_map_get_fd_by_id(id);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* ENOENT: freed since */
	if (bpf_map_lookup_elem(fd, &zero, &v))
		err = -errno;
	close(fd);
	*owner = v.ifindex;
	return err;
}

/* Empty `idx`: its binding first, then its tables. Each delete waits for the programs running on
 * what it held (maybe_wait_bpf_programs(), on 6.1 whether or not there was anything to
 * delete: so only what is there is deleted), so the index can be given to another veth
 * afterwards without any packet of the old one still on it.
 */
static void index_empty(const struct rw_datapath *dp, __u32 idx)
{
	const int fds[3] = {dp->map_fd[RW_M_VETH_SLOTS], dp->map_fd[RW_M_CT_SLOTS],
			    dp->map_fd[RW_M_CT6_SLOTS]};
	struct rw_budget full = {{0}};
	__u32 id;

	for (int i = 0; i < 3; i++)
		if (bpf_map_lookup_elem(fds[i], &idx, &id) == 0)
			bpf_map_delete_elem(fds[i], &idx);
	/* No packet reads the bucket at idx any more: the next veth there starts with a full one. */
	bpf_map_update_elem(dp->map_fd[RW_M_VETH_BUDGET], &idx, &full, BPF_ANY);
}

/* The veth's index: its slot, or the overflow index rw_veth_overflow names; -ENOENT for none,
 * another -errno when it cannot be told.
 */
static int veth_index(const struct rw_datapath *dp, __u32 ifindex, __u32 *idx)
{
	__u32 slot = RW_VETH_SLOT(ifindex), o, owner;
	int err = index_owner(dp, slot, &owner);

	if (err)
		return err;
	if (owner == ifindex) {
		*idx = slot;
		return 0;
	}
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_VETH_OVERFLOW], &ifindex, &o))
		return errno == ENOENT ? -ENOENT : -errno;
	if (o >= RW_VETH_INDEXES)
		return -ENOENT;
	err = index_owner(dp, o, &owner);
	if (err)
		return err;
	if (owner != ifindex)
		return -ENOENT;
	*idx = o;
	return 0;
}

/* Whether `idx` may be given to the veth (1, 0, or -errno): nobody is there, or one whose
 * binding is gone from rw_endpoints (left by an agent stopped half-way through an unbind).
 */
static int index_free(const struct rw_datapath *dp, __u32 idx, __u32 ifindex)
{
	struct rw_endpoint ep;
	__u32 owner;
	int err = index_owner(dp, idx, &owner);

	if (err)
		return err;
	if (!owner || owner == ifindex)
		return 1;
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &owner, &ep) == 0)
		return 0;
	return errno == ENOENT ? 1 : -errno;
}

/* The index of a veth being bound: the one it has, else its slot, else the first free overflow
 * index (-ENOSPC: none, more veths than RW_MAX_ENDPOINTS collide). An index new to the veth is
 * emptied first, of whatever an interrupted unbind or bind left there (a binding, tables of
 * either family, a bucket). Called under rw_veth_lock(), like every binding, so two veths never
 * take one index at once.
 */
static int veth_index_claim(const struct rw_datapath *dp, __u32 ifindex, __u32 *idx)
{
	int err = veth_index(dp, ifindex, idx), free;

	if (err != -ENOENT)
		return err;
	*idx = RW_VETH_SLOT(ifindex);
	free = index_free(dp, *idx, ifindex);
	for (__u32 o = RW_VETH_SLOTS; free == 0 && o < RW_VETH_INDEXES; o++) {
		*idx = o;
		free = index_free(dp, o, ifindex);
	}
	if (free < 0)
		return free;
	if (!free)
		return -ENOSPC;
	index_empty(dp, *idx);
	return 0;
}

/* The veth's binding at its index: a new inner map, swapped in whole; an overflow index is named
 * in rw_veth_overflow after it (a packet finding the name finds the binding).
 */
static int index_publish(const struct rw_datapath *dp, __u32 ifindex, __u32 idx,
			 const struct rw_endpoint *ep)
{
	struct rw_veth v = {.ifindex = ifindex, .ep = *ep};
	char name[BPF_OBJ_NAME_LEN];
	__u32 zero = 0;
	int fd, err = 0;

	snprintf(name, sizeof(name), "rwveth_%x", ifindex);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, name, sizeof(__u32), sizeof(v), 1, NULL);
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(fd, &zero, &v, BPF_ANY) ||
	    bpf_map_update_elem(dp->map_fd[RW_M_VETH_SLOTS], &idx, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	if (!err && idx >= RW_VETH_SLOTS &&
	    bpf_map_update_elem(dp->map_fd[RW_M_VETH_OVERFLOW], &ifindex, &idx, BPF_ANY))
		err = -errno;
	return err;
}

/* Take the veth off its index: the overflow name first, then the index (index_empty()). 0, or
 * -errno when its index cannot be told (the caller's unbind fails, to be tried again).
 */
static int index_release(const struct rw_datapath *dp, __u32 ifindex)
{
	__u32 idx;
	int err = veth_index(dp, ifindex, &idx);

	bpf_map_delete_elem(dp->map_fd[RW_M_VETH_OVERFLOW], &ifindex);
	if (err == -ENOENT)
		return 0;
	if (!err)
		index_empty(dp, idx);
	return err;
}

static int ct_table_fd(const struct rw_datapath *dp, __u32 ifindex, bool six)
{
	__u32 id;
	int fd;

	if (bpf_map_lookup_elem(ct_outer(dp, six), &ifindex, &id))
		return -errno;
	fd = bpf_map_get_fd_by_id(id);
	return fd < 0 ? -errno : fd;
}

int rw_conntrack_table_fd(const struct rw_datapath *dp, __u32 ifindex)
{
	return ct_table_fd(dp, ifindex, false);
}

int rw_conntrack6_table_fd(const struct rw_datapath *dp, __u32 ifindex)
{
	return ct_table_fd(dp, ifindex, true);
}

static bool ct_table_exists(const struct rw_datapath *dp, __u32 ifindex, bool six)
{
	__u32 id;

	return bpf_map_lookup_elem(ct_outer(dp, six), &ifindex, &id) == 0;
}

static __u32 table_size(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.max_entries;
}

/* Room the node's tables of both families take together (ct_node counts each table's size, so a
 * dual-stack veth takes twice a single-stack one's), leaving out the table being replaced.
 */
static int ct_node_used(const struct rw_datapath *dp, __u32 skip, bool skip_six, __u64 *used)
{
	*used = 0;
	for (int six = 0; six < 2; six++) {
		__u32 key, *prev = NULL;
		int fd;

		while (bpf_map_get_next_key(ct_outer(dp, six), prev, &key) == 0) {
			prev = &key;
			if (key == skip && six == skip_six)
				continue;
			fd = ct_table_fd(dp, key, six);
			if (fd < 0)
				continue; /* deleted under our feet */
			*used += table_size(fd);
			close(fd);
		}
		if (errno != ENOENT)
			return -errno;
	}
	return 0;
}

/* The veth's table of the family, as rw_conntrack holds it, at its index too. */
static int ct_index_sync(const struct rw_datapath *dp, __u32 ifindex, bool six, __u32 idx)
{
	int fd = ct_table_fd(dp, ifindex, six), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_update_elem(ct_slots(dp, six), &idx, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	return err;
}

/* Put a fresh, empty table of the configured size in for `ifindex`'s family, replacing any
 * table it had (the packets in flight on the old one finish on it; it is freed after them),
 * in rw_conntrack and at the veth's index `idx` (-1: it has none yet). `replace`: only if it has
 * one (rw_conntrack_flush()).
 */
static int ct_table_reset(const struct rw_datapath *dp, __u32 ifindex, bool six, int idx,
			  bool replace)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_NO_PREALLOC);
	char name[BPF_OBJ_NAME_LEN];
	struct rw_config cfg;
	__u64 used;
	__u32 size;
	int fd, err;

	err = rw_config_read(dp, &cfg);
	if (err)
		return err;
	size = cfg.ct_per_sandbox ? cfg.ct_per_sandbox : RW_CT_PER_SANDBOX;
	if (cfg.ct_node) {
		err = ct_node_used(dp, ifindex, six, &used);
		if (err)
			return err;
		if (used + size > cfg.ct_node)
			return -ENOSPC;
	}
	snprintf(name, sizeof(name), "rwct%c_%x", six ? '6' : '4', ifindex);
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, name,
			    six ? sizeof(struct rw_ct6_key) : sizeof(struct rw_ct_key),
			    sizeof(struct rw_ct_value), size, &opts);
	if (fd < 0)
		return -errno;
	/* A replacement only replaces: a veth unbound meanwhile does not get its table back. */
	err = bpf_map_update_elem(ct_outer(dp, six), &ifindex, &fd, replace ? BPF_EXIST : BPF_ANY)
		      ? -errno
		      : 0;
	if (!err && idx >= 0 && bpf_map_update_elem(ct_slots(dp, six), &idx, &fd, BPF_ANY))
		err = -errno;
	close(fd);
	return err;
}

int rw_conntrack_flush(const struct rw_datapath *dp, __u32 ifindex, __be32 pod_ip)
{
	struct rw_endpoint ep;
	__u32 key, *prev = NULL;
	int replaced = 0, err;

	if (ifindex) {
		for (int six = 0; six < 2; six++) {
			if (!ct_table_exists(dp, ifindex, six))
				continue;
			__u32 idx;
			int at = veth_index(dp, ifindex, &idx);

			if (at && at != -ENOENT)
				return at; /* the table the programs read could stay: no flush */
			err = ct_table_reset(dp, ifindex, six, at ? -1 : (int)idx, true);
			if (err)
				return err;
			replaced++;
		}
		return replaced;
	}
	/* The veths bound to the pod: a walk of the endpoints, never of the flows. */
	while (bpf_map_get_next_key(dp->map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		prev = &key;
		if (bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &key, &ep) ||
		    !(ep.flags & RW_EP_IP4) || ep.pod_ip != pod_ip)
			continue;
		err = rw_conntrack_flush(dp, key, 0);
		if (err < 0)
			return err;
		replaced += err;
	}
	return replaced;
}

/* How long a flow may stay idle before rw_conntrack_expire() forgets it. */
#define RW_CT_IDLE_TCP_NS   (3600ULL * 1000000000ULL)
#define RW_CT_IDLE_OTHER_NS (180ULL * 1000000000ULL)

/* Either family's key, walked as bytes; the protocol is at its own offset in each. */
union ct_any_key {
	struct rw_ct_key k4;
	struct rw_ct6_key k6;
};

/* Packets mark a flow active (no clock on the datapath's fast path); the pass turns that into
 * a time. An update racing a packet at worst writes back an older stamp, which only costs the
 * flow one full judgement.
 */
static int ct_expire_one(int fd, const union ct_any_key *key, bool six, struct rw_ct_value *v,
			 __u64 now_ns)
{
	__u8 proto = six ? key->k6.proto : key->k4.proto;

	if (v->active) {
		v->active = 0;
		v->seen_ns = now_ns;
		bpf_map_update_elem(fd, key, v, BPF_EXIST);
		return 0;
	}
	if (now_ns <= v->seen_ns ||
	    now_ns - v->seen_ns <= (proto == IPPROTO_TCP ? RW_CT_IDLE_TCP_NS : RW_CT_IDLE_OTHER_NS))
		return 0;
	return bpf_map_delete_elem(fd, key) == 0;
}

/* The cursor's top bit says which family's outer map the walk is in (ifindexes are positive
 * ints, so the bit is free); the rest is the last veth visited there.
 */
#define RW_CT_CURSOR_SIX (1u << 31)

int rw_conntrack_expire(const struct rw_datapath *dp, __u64 now_ns, __u32 *cursor,
			unsigned int budget)
{
	bool six = *cursor & RW_CT_CURSOR_SIX;
	__u32 at = *cursor & ~RW_CT_CURSOR_SIX, ifindex, *prev = at ? &at : NULL;
	unsigned int visited = 0;
	int expired = 0;

	while (visited < budget) {
		union ct_any_key key, next, *kprev = NULL;
		struct rw_ct_value v;
		int fd;

		if (bpf_map_get_next_key(ct_outer(dp, six), prev, &ifindex)) {
			if (six)
				break;
			six = true; /* the IPv4 tables are done: on to the IPv6 ones */
			prev = NULL;
			continue;
		}
		at = ifindex;
		prev = &at;
		*cursor = ifindex | (six ? RW_CT_CURSOR_SIX : 0);
		fd = ct_table_fd(dp, ifindex, six);
		if (fd < 0)
			continue;
		/* Delete one step behind the walk: deleting the current key would restart it. */
		for (int more = 1; more;) {
			more = bpf_map_get_next_key(fd, kprev, &next) == 0;
			if (kprev && bpf_map_lookup_elem(fd, &key, &v) == 0)
				expired += ct_expire_one(fd, &key, six, &v, now_ns);
			key = next;
			kprev = &key;
			visited++;
		}
		close(fd);
	}
	if (visited < budget)
		*cursor = 0; /* the walk reached the end: start over next time */
	return expired;
}

/* ---- bindings ------------------------------------------------------------------------------ */

/* Is `want` the pod `cur` is bound to, as far as cur goes: every address cur binds is bound by
 * want, unchanged? A family want adds to it, or a new gateway, is the same pod; an address
 * changed or dropped is another pod.
 */
static bool ep_same_pod(const struct rw_endpoint *cur, const struct rw_endpoint *want)
{
	if ((cur->flags & RW_EP_IP4) && (!(want->flags & RW_EP_IP4) || cur->pod_ip != want->pod_ip))
		return false;
	if ((cur->flags & RW_EP_IP6) && (!(want->flags & RW_EP_IP6) ||
					 memcmp(cur->pod_ip6, want->pod_ip6, sizeof(cur->pod_ip6))))
		return false;
	return true;
}

/* The binding as it is stored: the fields of a clear flag zeroed, so that they say nothing. */
static void ep_clean(struct rw_endpoint *ep, const struct rw_endpoint *want)
{
	memset(ep, 0, sizeof(*ep));
	ep->flags = want->flags & (RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6);
	if (ep->flags & RW_EP_IP4)
		ep->pod_ip = want->pod_ip;
	if (ep->flags & RW_EP_IP6)
		memcpy(ep->pod_ip6, want->pod_ip6, sizeof(ep->pod_ip6));
	if (ep->flags & RW_EP_GW6)
		memcpy(ep->gw_ip6, want->gw_ip6, sizeof(ep->gw_ip6));
}

/* Where a veth's bucket is: at its veth index of rw_veth_budget when it has one, else in
 * rw_event_budget by its ifindex. Returns the map's fd and sets *key.
 */
static int budget_at(const struct rw_datapath *dp, __u32 ifindex, __u32 *key)
{
	if (veth_index(dp, ifindex, key) == 0)
		return dp->map_fd[RW_M_VETH_BUDGET];
	*key = ifindex;
	return dp->map_fd[RW_M_EVENT_BUDGET];
}

int rw_budget_get(const struct rw_datapath *dp, __u32 ifindex, struct rw_budget *out)
{
	__u32 key;
	int fd = budget_at(dp, ifindex, &key);

	return bpf_map_lookup_elem(fd, &key, out) ? -errno : 0;
}

int rw_budget_set(const struct rw_datapath *dp, __u32 ifindex, const struct rw_budget *b)
{
	__u32 key;
	int fd = budget_at(dp, ifindex, &key);

	return bpf_map_update_elem(fd, &key, b, BPF_ANY) ? -errno : 0;
}

int rw_endpoint_bind_addrs(const struct rw_datapath *dp, __u32 ifindex,
			   const struct rw_endpoint *want)
{
	static const __u32 family_flag[2] = {RW_EP_IP4, RW_EP_IP6};
	int fd = dp->map_fd[RW_M_ENDPOINTS], err = 0;
	bool made[2] = {false, false};
	__u32 idx = 0;
	struct rw_endpoint cur, ep;

	ep_clean(&ep, want);
	if (!(ep.flags & (RW_EP_IP4 | RW_EP_IP6)))
		return -EINVAL; /* a binding of no address: unbind the veth instead */
	if (bpf_map_lookup_elem(fd, &ifindex, &cur))
		/* A veth bound to no pod has no link-local of its pod yet (an ifindex reused). */
		bpf_map_delete_elem(dp->map_fd[RW_M_LL6], &ifindex);
	else if (!ep_same_pod(&cur, &ep))
		/* Unbind first so that no packet sees the new pod with the old pod's flows or
		 * link-local.
		 */
		rw_endpoint_unbind(dp, ifindex);
	/* The tables before the binding: a bound family always has its table. A table the veth
	 * has already (the same pod bound again) keeps its flows; a missing one (lost, or the
	 * family is new) is made, fail-closed until then. Each is put at the veth's index too (its
	 * slot, or an overflow index when another veth holds that), before the binding is.
	 */
	err = veth_index_claim(dp, ifindex, &idx);
	for (int six = 0; six < 2 && !err; six++) {
		if (!(ep.flags & family_flag[six]))
			continue;
		if (ct_table_exists(dp, ifindex, six)) {
			err = ct_index_sync(dp, ifindex, six, idx);
			continue;
		}
		err = ct_table_reset(dp, ifindex, six, (int)idx, false);
		made[six] = !err;
	}
	if (!err && bpf_map_update_elem(fd, &ifindex, &ep, BPF_ANY))
		err = -errno;
	/* The binding at its index last: from then on the veth's packets find it. A binding that
	 * cannot get there is no binding (deny-all), not one half in place.
	 */
	if (!err) {
		err = index_publish(dp, ifindex, idx, &ep);
		if (err)
			rw_endpoint_unbind(dp, ifindex);
		return err;
	}
	for (int six = 0; six < 2; six++) {
		if (!made[six])
			continue;
		bpf_map_delete_elem(ct_slots(dp, six), &idx);
		bpf_map_delete_elem(ct_outer(dp, six), &ifindex);
	}
	return err;
}

int rw_endpoint_bind(const struct rw_datapath *dp, __u32 ifindex, __be32 pod_ip)
{
	struct rw_endpoint want = {.pod_ip = pod_ip, .flags = RW_EP_IP4};

	return rw_endpoint_bind_addrs(dp, ifindex, &want);
}

int rw_endpoint_get(const struct rw_datapath *dp, __u32 ifindex, struct rw_endpoint *out)
{
	memset(out, 0, sizeof(*out));
	return bpf_map_lookup_elem(dp->map_fd[RW_M_ENDPOINTS], &ifindex, out) ? -errno : 0;
}

int rw_endpoint_unbind(const struct rw_datapath *dp, __u32 ifindex)
{
	int err = 0;

	/* Its index first (the deletes wait for the packets on it), then the tables: from then on
	 * no packet of the veth finds its binding or takes the fast path.
	 */
	err = index_release(dp, ifindex);
	if (err)
		return err; /* still bound where the programs read it: nothing else is undone */
	for (int six = 0; six < 2; six++)
		if (bpf_map_delete_elem(ct_outer(dp, six), &ifindex) && errno != ENOENT && !err)
			err = -errno;
	if (bpf_map_delete_elem(dp->map_fd[RW_M_ENDPOINTS], &ifindex) && errno != ENOENT && !err)
		err = -errno;
	bpf_map_delete_elem(dp->map_fd[RW_M_EVENT_BUDGET], &ifindex);
	bpf_map_delete_elem(dp->map_fd[RW_M_LL6], &ifindex);
	return err;
}

int rw_counters_read(const struct rw_datapath *dp, __u32 idx, struct rw_counters *sum)
{
	int ncpu = libbpf_num_possible_cpus(), err = 0;
	struct rw_counters *per;

	if (ncpu < 0)
		return ncpu;
	per = calloc(ncpu, sizeof(*per));
	if (!per)
		return -ENOMEM;
	memset(sum, 0, sizeof(*sum));
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_COUNTERS], &idx, per)) {
		err = -errno;
		goto cleanup;
	}
	for (int c = 0; c < ncpu; c++) {
		for (int d = 0; d < RW_DIR_COUNT; d++) {
			for (int r = 0; r < RW_REASON_COUNT; r++) {
				sum->packets[d][r] += per[c].packets[d][r];
				sum->bytes[d][r] += per[c].bytes[d][r];
			}
		}
		sum->events_sent += per[c].events_sent;
		sum->events_lost += per[c].events_lost;
		sum->events_suppressed += per[c].events_suppressed;
		for (int a = 0; a < RW_ANSWER_COUNT; a++)
			sum->answers[a] += per[c].answers[a];
	}
cleanup:
	free(per);
	return err;
}

int rw_counters_zero(const struct rw_datapath *dp, __u32 idx)
{
	int ncpu = libbpf_num_possible_cpus(), err = 0;
	struct rw_counters *per;

	if (ncpu < 0)
		return ncpu;
	per = calloc(ncpu, sizeof(*per));
	if (!per)
		return -ENOMEM;
	if (bpf_map_update_elem(dp->map_fd[RW_M_COUNTERS], &idx, per, BPF_ANY))
		err = -errno;
	free(per);
	return err;
}
