/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* veth.c: a sandbox veth protected as a whole (see veth.h). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <net/if.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <time.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>

#include "netlink.h"
#include "util.h"
#include "veth.h"

int rw_veth_lock_meanwhile(const char *pin_dir, int timeout_ms, void (*meanwhile)(void *data),
			   void *data)
{
	struct timespec pause = {.tv_nsec = 1000 * 1000};
	int fd = open(pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int64_t deadline = rw_now_mono_ns() + (int64_t)timeout_ms * 1000000;

	if (fd < 0)
		return -errno;
	/* Holders keep it for a few map updates and attaches: milliseconds. */
	for (;;) {
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int err = -errno;

			close(fd);
			return err;
		}
		if (rw_now_mono_ns() >= deadline) {
			close(fd);
			return -ETIMEDOUT;
		}
		if (meanwhile)
			meanwhile(data);
		nanosleep(&pause, NULL);
	}
}

int rw_veth_lock(const char *pin_dir, int timeout_ms)
{
	return rw_veth_lock_meanwhile(pin_dir, timeout_ms, NULL, NULL);
}

void rw_veth_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* the last close drops the flock */
}

/* The driver behind an interface name, as ethtool -i says it ("veth"). */
static bool driver_is_veth(const char *name)
{
	struct ethtool_drvinfo info = {.cmd = ETHTOOL_GDRVINFO};
	struct ifreq ifr = {.ifr_data = (void *)&info};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool veth;

	if (fd < 0)
		return false;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	veth = ioctl(fd, SIOCETHTOOL, &ifr) == 0 && !strcmp(info.driver, "veth");
	close(fd);
	return veth;
}

bool rw_veth_is_sandbox(int ifindex, const char *prefixes, char *name)
{
	name[0] = '\0';
	if (ifindex <= 0 || !if_indextoname(ifindex, name)) {
		name[0] = '\0';
		return false;
	}
	return rw_ifname_match(name, prefixes) && driver_is_veth(name);
}

int rw_veth_attach(const struct rw_datapath *dp, int ifindex, enum rw_attach_mode mode,
		   enum rw_attach_mode used[RW_DIR_COUNT], int errs[RW_DIR_COUNT])
{
	int first_err = 0;

	for (int d = 0; d < RW_DIR_COUNT; d++) {
		enum rw_attach_mode m = RW_ATTACH_AUTO;
		int err;

		if (dp->prog_fd[d] < 0)
			err = -EBADF;
		else
			err = rw_attach(dp->pin_dir, ifindex, d, dp->prog_fd[d], mode, &m);
		if (used)
			used[d] = m;
		if (errs)
			errs[d] = err;
		if (err && !first_err)
			first_err = err;
	}
	return first_err;
}

/* rw_veth_attach()'s arguments and result, for a thread of its own. */
struct attach_job {
	const struct rw_datapath *dp;
	int ifindex;
	enum rw_attach_mode mode;
	enum rw_attach_mode *used;
	int *errs;
	int err;
};

static void *attach_job_run(void *arg)
{
	struct attach_job *j = arg;

	j->err = rw_veth_attach(j->dp, j->ifindex, j->mode, j->used, j->errs);
	return NULL;
}

int rw_veth_protect_addrs(const struct rw_datapath *dp, int ifindex, const struct rw_endpoint *want,
			  enum rw_attach_mode mode, enum rw_attach_mode used[RW_DIR_COUNT],
			  int errs[RW_DIR_COUNT])
{
	struct attach_job j = {
		.dp = dp, .ifindex = ifindex, .mode = mode, .used = used, .errs = errs};
	struct rw_endpoint before;
	bool was_bound = rw_endpoint_get(dp, (__u32)ifindex, &before) == 0;
	struct rw_beside attach;
	int err;

	/* Each tcx attach and each write of the binding's outer maps returns only after an RCU
	 * grace period (tcx_entry_sync(), maybe_wait_bpf_programs()): the attach on a thread of
	 * its own and the bind here wait for theirs side by side.
	 */
	rw_beside_start(&attach, attach_job_run, &j);
	err = rw_endpoint_bind_addrs(dp, (__u32)ifindex, want);
	rw_beside_join(&attach);
	if (j.err) {
		/* Not protected: a veth that was bound to nothing stays so. */
		if (!err && !was_bound)
			rw_endpoint_unbind(dp, (__u32)ifindex);
		return j.err;
	}
	return err;
}

int rw_veth_protect(const struct rw_datapath *dp, int ifindex, __be32 pod_ip,
		    enum rw_attach_mode mode, enum rw_attach_mode used[RW_DIR_COUNT],
		    int errs[RW_DIR_COUNT])
{
	struct rw_endpoint want = {.pod_ip = pod_ip, .flags = RW_EP_IP4};

	return rw_veth_protect_addrs(dp, ifindex, &want, mode, used, errs);
}

const char *rw_endpoint_str(const struct rw_endpoint *ep, bool show_gw, char *buf, size_t len)
{
	char a4[INET_ADDRSTRLEN] = "", a6[INET6_ADDRSTRLEN] = "", gw[INET6_ADDRSTRLEN] = "";

	if (ep->flags & RW_EP_IP4)
		inet_ntop(AF_INET, &ep->pod_ip, a4, sizeof(a4));
	if (ep->flags & RW_EP_IP6)
		inet_ntop(AF_INET6, ep->pod_ip6, a6, sizeof(a6));
	if (show_gw && (ep->flags & RW_EP_GW6))
		inet_ntop(AF_INET6, ep->gw_ip6, gw, sizeof(gw));
	snprintf(buf, len, "%s%s%s%s%s%s", a4, a4[0] && a6[0] ? " and " : "", a6,
		 gw[0] ? " (gateway " : "", gw, gw[0] ? ")" : "");
	if (!a4[0] && !a6[0])
		snprintf(buf, len, "nothing");
	return buf;
}

bool rw_endpoint_same(const struct rw_endpoint *x, const struct rw_endpoint *y)
{
	__u32 f = RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6;

	if ((x->flags & f) != (y->flags & f))
		return false;
	if ((x->flags & RW_EP_IP4) && x->pod_ip != y->pod_ip)
		return false;
	if ((x->flags & RW_EP_IP6) && memcmp(x->pod_ip6, y->pod_ip6, sizeof(x->pod_ip6)))
		return false;
	if ((x->flags & RW_EP_GW6) && memcmp(x->gw_ip6, y->gw_ip6, sizeof(x->gw_ip6)))
		return false;
	return true;
}

const char *rw_bind_error_str(const struct rw_datapath *dp, int err, char *buf, size_t len)
{
	struct bpf_map_info info = {};
	__u32 info_len = sizeof(info);
	struct rw_config cfg = {};

	if (err == -E2BIG &&
	    bpf_obj_get_info_by_fd(dp->map_fd[RW_M_ENDPOINTS], &info, &info_len) == 0) {
		snprintf(buf, len, "endpoint table full (%u)", info.max_entries);
	} else if (err == -ENOSPC && rw_config_read(dp, &cfg) == 0 && cfg.ct_per_sandbox) {
		snprintf(buf, len,
			 "conntrack budget for the node exhausted (--ct-node %u: %u tables of "
			 "--ct-per-sandbox %u flows)",
			 cfg.ct_node, cfg.ct_node / cfg.ct_per_sandbox, cfg.ct_per_sandbox);
	} else {
		snprintf(buf, len, "%s", strerror(-err));
	}
	return buf;
}

/* A conntrack table fd, or -ENOENT for a veth without one: *has says which; 0 or the error. */
static int has_table(int fd, bool *has)
{
	*has = fd >= 0;
	if (fd >= 0)
		close(fd);
	return fd >= 0 || fd == -ENOENT ? 0 : fd;
}

int rw_veth_query(const struct rw_datapath *dp, int ifindex, struct rw_veth_state *st)
{
	struct rw_hook_info *hi;
	int err = 0;

	memset(st, 0, sizeof(*st));
	/* struct rw_hook_info holds 128 programs: too big for a stack that libbpf callbacks
	 * may share.
	 */
	hi = calloc(1, sizeof(*hi));
	if (!hi)
		return -ENOMEM;
	for (int d = 0; d < RW_DIR_COUNT && !err; d++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		memset(hi, 0, sizeof(*hi));
		if (dp->prog_fd[d] >= 0 && bpf_obj_get_info_by_fd(dp->prog_fd[d], &info, &len) == 0)
			hi->prog_id = info.id;
		err = hi->prog_id ? rw_hook_query(ifindex, d, hi)
				  : rw_hook_query_pinned(dp->pin_dir, ifindex, d, hi);
		if (err)
			break;
		st->found[d] = hi->found;
		st->first[d] = hi->found && hi->first;
	}
	free(hi);
	if (err)
		return err;
	err = has_table(rw_conntrack_table_fd(dp, ifindex), &st->ct_table);
	if (!err)
		err = has_table(rw_conntrack6_table_fd(dp, ifindex), &st->ct_table6);
	if (err)
		return err;
	err = rw_endpoint_get(dp, ifindex, &st->ep);
	if (err == -ENOENT)
		return 0;
	if (!err && (st->ep.flags & RW_EP_IP4))
		st->pod_ip = st->ep.pod_ip;
	return err;
}

static bool ifindex_gone(int ifindex)
{
	char name[IF_NAMESIZE];

	return !if_indextoname(ifindex, name) && errno == ENXIO;
}

int rw_veth_prune_gone(const struct rw_datapath *dp)
{
	char path[PATH_MAX + 8];
	__u32 key, next, *prev = NULL, gone[64];
	int n_gone = 0, err = 0;
	struct dirent *de;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/%s", dp->pin_dir, RW_LINKS_DIR);
	dir = opendir(path);
	while (dir && (de = readdir(dir))) {
		char dirname[16];
		int ifindex;

		if (sscanf(de->d_name, "tcx_%d_%15[a-z]", &ifindex, dirname) != 2 &&
		    sscanf(de->d_name, "tc_%d_%15[a-z]", &ifindex, dirname) != 2)
			continue;
		if (ifindex > 0 && ifindex_gone(ifindex))
			rw_detach(dp->pin_dir, ifindex,
				  strcmp(dirname, "egress") ? RW_DIR_INGRESS : RW_DIR_EGRESS);
	}
	if (dir)
		closedir(dir);
	/* Collect, then unbind: deleting while walking would restart the walk. A full batch is
	 * done in the next call (every DEL calls this).
	 */
	while (n_gone < (int)(sizeof(gone) / sizeof(gone[0])) &&
	       bpf_map_get_next_key(dp->map_fd[RW_M_ENDPOINTS], prev, &next) == 0) {
		if (ifindex_gone(next))
			gone[n_gone++] = next;
		key = next;
		prev = &key;
	}
	for (int i = 0; i < n_gone; i++) {
		int ret = rw_endpoint_unbind(dp, gone[i]);

		if (ret && !err)
			err = ret;
	}
	return err;
}
