// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* state.c: rw_config, the node's one word of truth: the layout, the state word (revision, ready,
 * live slot) that one atomic flip changes, the lease and its deadline, and the settings the
 * programs read.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "datapath.h"
#include "util.h"

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

/* Runs one of the programs that write rw_config (fd: rw_flip or rw_lease, named prog, for the
 * step named step) on its context args; the kernel copies the context back into args when the
 * program returns (a syscall program's ctx_in is its ctx_out too). *retval is the program's
 * answer. unloaded ends the message for a datapath loaded without the program.
 */
static int run_config_prog(int fd, const char *step, const char *prog, const char *unloaded,
			   void *args, __u32 size, __u32 *retval, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = size);
	const char *cfg = rw_map_names[RW_M_CONFIG];
	int ret;

	if (fd < 0)
		return rw_fail_msg(
			err, errlen, -ENOTSUP,
			"%s: %s: this datapath was loaded without %s (a dry run over the "
			"pins, or the pins only)%s",
			cfg, step, prog, unloaded);
	if (bpf_prog_test_run_opts(fd, &opts)) {
		ret = -errno;
		return rw_fail_msg(err, errlen, ret, "%s: %s: running %s: %s", cfg, step, prog,
				   strerror(-ret));
	}
	*retval = opts.retval;
	return 0;
}

static int flip(const struct rw_datapath *dp, struct rw_flip_args *args, char *err, size_t errlen)
{
	const char *cfg = rw_map_names[RW_M_CONFIG];
	__u32 retval;
	int ret;

	ret = run_config_prog(dp->flip_fd, "flip", "rw_flip", ", which never changes the state",
			      args, sizeof(*args), &retval, err, errlen);
	if (ret)
		return ret;
	switch (retval) {
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
				   retval);
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
	__u32 retval;
	int ret;

	ret = run_config_prog(dp->lease_fd, "lease", "rw_lease", "", &args, sizeof(args), &retval,
			      err, errlen);
	if (ret)
		return ret;
	if (retval != RW_FLIP_DONE)
		return rw_fail_msg(err, errlen, -ENOENT, "%s: lease: rw_lease answered %u",
				   rw_map_names[RW_M_CONFIG], retval);
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
