// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_attach.c: user/lib/attach.c against the running kernel, on veths in a network namespace of
 * the test's own (unshare(CLONE_NEWNET) at start; nothing of the machine's is touched) and
 * with pins in a private directory /sys/fs/bpf/rwtest-<pid> removed at the end. Needs root
 * (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN). On a kernel without tcx (before 6.6, EKS's 6.1)
 * each tcx test proves the fallback instead (tcx_or_fallback()).
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <setjmp.h>
#include <sys/utsname.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cmocka.h>
#include "attach.h"
#include "bpf_compat.h"
#include "netns_env.h"

#define MAX_IDS 64

static char pin_dir[128];
static char links_dir[160];
static bool have_tcx;
static int prog_a = -1, prog_b = -1, prog_f1 = -1, prog_f2 = -1, prog_h = -1;

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!getenv("RW_TEST_VERBOSE"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* A veth pair NAME / NAMEp in the test's netns; returns NAME's ifindex. */
static int veth(const char *name)
{
	sh("ip link del %s >/dev/null 2>&1", name);
	assert_int_equal(sh("ip link add %s type veth peer name %sp", name, name), 0);
	assert_int_equal(sh("ip link set %s up", name), 0);
	return (int)if_nametoindex(name);
}

/* `r0 = ret; exit`: TC_ACT_UNSPEC (-1, also TCX_NEXT) for runwall's stand-ins. */
static int load_prog(const char *name, int ret)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = ret},
		{.code = BPF_JMP | BPF_EXIT},
	};
	int fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, name, "GPL", insns, 2, NULL);

	assert_true(fd >= 0);
	return fd;
}

static __u32 prog_id(int fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	return info.id;
}

/* Link id and program id of a pinned link; 0 when there is no such pin. */
static __u32 pin_link(const char *path, __u32 *pid)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return 0;
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	close(fd);
	if (pid)
		*pid = info.prog_id;
	return info.id;
}

static void pin_path(char *buf, size_t len, const char *kind, int ifindex, const char *dir,
		     const char *ifname)
{
	snprintf(buf, len, "%s/%s_%d_%s_%s", links_dir, kind, ifindex, dir, ifname);
}

/* A new veth `name`, prog_a attached on its egress hook (auto mode: tcx here): its ifindex, and
 * where the link's pin is (pin, len).
 */
static int veth_with_a(const char *name, char *pin, size_t len)
{
	int idx = veth(name);

	pin_path(pin, len, "tcx", idx, "egress", name);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	return idx;
}

static bool exists(const char *path)
{
	struct stat st;

	return !lstat(path, &st);
}

static int count_entries(void)
{
	struct dirent *de;
	DIR *d = opendir(links_dir);
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* tcx program ids on a TC hook (BPF_TCX_INGRESS / _EGRESS). */
static __u32 tcx_ids(int ifindex, int type, __u32 *ids)
{
	LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = MAX_IDS);

	assert_int_equal(bpf_prog_query_opts(ifindex, type, &q), 0);
	return q.prog_cnt;
}

static int foreign_link(int ifindex, int type, int prog, bool before)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = before ? BPF_F_BEFORE : 0);
	int fd = bpf_link_create(prog, ifindex, type, &opts);

	assert_true(fd >= 0);
	return fd;
}

static void foreign_filter(int ifindex, enum bpf_tc_attach_point point, int prog, __u32 handle,
			   __u32 prio)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = point);
	LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog, .handle = handle, .priority = prio);
	int err = bpf_tc_hook_create(&hook);

	assert_true(!err || err == -EEXIST);
	assert_int_equal(bpf_tc_attach(&hook, &opts), 0);
}

static bool filter_present(int ifindex, enum bpf_tc_attach_point point, __u32 handle, __u32 prio)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = point);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = prio);

	return !bpf_tc_query(&hook, &opts);
}

static void query(int ifindex, enum rw_dir dir, struct rw_hook_info *info)
{
	memset(info, 0, sizeof(*info));
	assert_int_equal(rw_hook_query_pinned(pin_dir, ifindex, dir, info), 0);
}

/* On a kernel without tcx a tcx test checks what runwall does there instead: forcing tcx fails
 * with an error, AUTO attaches with tc. A 6.6+ kernel without tcx fails the test.
 */
static bool tcx_or_fallback(void)
{
	enum rw_attach_mode used = RW_ATTACH_AUTO;
	int major = 0, minor = 0, idx;
	struct utsname u;

	if (have_tcx)
		return true;
	uname(&u);
	sscanf(u.release, "%d.%d", &major, &minor);
	if (major > 6 || (major == 6 && minor >= 6))
		fail_msg("kernel %s is 6.6 or later but has no tcx", u.release);
	idx = veth("rwfb0");
	assert_true(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TCX, &used) < 0);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(used, RW_ATTACH_TC);
	return false;
}

/* --- fixtures --------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	libbpf_set_print(quiet_print);
	if (test_netns_enter())
		return -1;
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/rwtest-%d", (int)getpid());
	snprintf(links_dir, sizeof(links_dir), "%s/%s", pin_dir, RW_LINKS_DIR);
	if (mkdir(pin_dir, 0700)) {
		perror(pin_dir);
		return -1;
	}
	prog_a = load_prog("rwt_a", TC_ACT_UNSPEC);
	prog_b = load_prog("rwt_b", TC_ACT_UNSPEC);
	prog_f1 = load_prog("rwt_f1", TC_ACT_UNSPEC);
	prog_f2 = load_prog("rwt_f2", TC_ACT_UNSPEC);
	prog_h = load_prog("rwt_h", TC_ACT_SHOT);
	{
		LIBBPF_OPTS(bpf_prog_query_opts, q);

		have_tcx = bpf_prog_query_opts(1, BPF_TCX_INGRESS, &q) != -EINVAL;
	}
	if (!have_tcx)
		fprintf(stderr,
			"kernel without tcx: the tcx tests check the tc fallback instead\n");
	return 0;
}

static int group_teardown(void **state)
{
	char path[256];

	rw_detach_all(pin_dir);
	snprintf(path, sizeof(path), "%s/foreign", pin_dir);
	unlink(path);
	rmdir(links_dir);
	if (rmdir(pin_dir))
		perror(pin_dir);
	close(prog_a);
	close(prog_b);
	close(prog_f1);
	close(prog_f2);
	close(prog_h);
	return 0;
}

/* Each test starts and ends with no veth of ours and nothing in links/. */
static int cleanup(void **state)
{
	sh("for i in $(ip -o link show type veth | awk -F'[ :@]+' '{print $2}'); do "
	   "ip link del $i 2>/dev/null; done");
	rw_detach_all(pin_dir);
	return 0;
}

/* --- tcx -------------------------------------------------------------------------------- */

static void test_tcx_attach_first(void **state)
{
	__u32 ids[MAX_IDS], lid, pid = 0;
	struct rw_hook_info info;
	enum rw_attach_mode used = RW_ATTACH_AUTO;
	char path[256];
	int idx;

	if (!tcx_or_fallback())
		return;
	idx = veth("rwa0");
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(used, RW_ATTACH_TCX);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_b, RW_ATTACH_TCX, &used), 0);
	assert_int_equal(used, RW_ATTACH_TCX);

	/* runwall's egress is the TC ingress hook, its ingress the TC egress hook. */
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 1);
	assert_int_equal(ids[0], prog_id(prog_a));
	assert_int_equal(tcx_ids(idx, BPF_TCX_EGRESS, ids), 1);
	assert_int_equal(ids[0], prog_id(prog_b));

	pin_path(path, sizeof(path), "tcx", idx, "egress", "rwa0");
	lid = pin_link(path, &pid);
	assert_int_not_equal(lid, 0);
	assert_int_equal(pid, prog_id(prog_a));
	pin_path(path, sizeof(path), "tcx", idx, "ingress", "rwa0");
	assert_int_not_equal(pin_link(path, NULL), 0);
	assert_int_equal(count_entries(), 2);

	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found);
	assert_int_equal(info.mode, RW_ATTACH_TCX);
	assert_true(info.first);
	assert_int_equal(info.prog_id, prog_id(prog_a));
	assert_int_equal(info.n_other, 0);
	assert_int_equal(info.n_tcx, 1);
	assert_int_equal(info.n_tc, 0);
	assert_int_equal(info.n_progs, 1);
	assert_true(info.progs[0].tcx && info.progs[0].runwall);
	assert_string_equal(rw_attach_mode_str(info.mode), "tcx");

	/* Without runwall's prog id a tcx program is just a program. */
	memset(&info, 0, sizeof(info));
	assert_int_equal(rw_hook_query(idx, RW_DIR_EGRESS, &info), 0);
	assert_false(info.found);
	assert_int_equal(info.n_other, 1);
	info.prog_id = prog_id(prog_a);
	assert_int_equal(rw_hook_query(idx, RW_DIR_EGRESS, &info), 0);
	assert_true(info.found && info.first);
}

static void test_tcx_reattach_idempotent(void **state)
{
	__u32 ids[MAX_IDS], lid, lid2;
	char path[256];
	int idx, i;

	if (!tcx_or_fallback())
		return;
	idx = veth_with_a("rwi0", path, sizeof(path));
	lid = pin_link(path, NULL);
	for (i = 0; i < 3; i++)
		assert_int_equal(
			rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	lid2 = pin_link(path, NULL);
	assert_int_equal(lid, lid2);
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 1);
	assert_int_equal(count_entries(), 1);
}

static void test_tcx_replace(void **state)
{
	__u32 ids[MAX_IDS], lid, pid = 0;
	struct rw_hook_info info;
	char path[256];
	int idx;

	if (!tcx_or_fallback())
		return;
	idx = veth_with_a("rwp0", path, sizeof(path));
	lid = pin_link(path, NULL);

	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_AUTO, NULL), 0);
	assert_int_equal(pin_link(path, &pid), lid); /* same link, program swapped */
	assert_int_equal(pid, prog_id(prog_b));
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 1);
	assert_int_equal(ids[0], prog_id(prog_b));
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.prog_id, prog_id(prog_b));

	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	assert_int_equal(pin_link(path, &pid), lid);
	assert_int_equal(pid, prog_id(prog_a));
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 1);
	assert_int_equal(count_entries(), 1);
}

static void test_tcx_foreign_first_restored(void **state)
{
	__u32 ids[MAX_IDS], lid, lid2, pid = 0;
	struct rw_hook_info info;
	char path[256];
	int idx, f1, f2;

	if (!tcx_or_fallback())
		return;
	idx = veth_with_a("rwf0", path, sizeof(path));
	lid = pin_link(path, NULL);

	/* Appended after runwall: runwall is still first. */
	f2 = foreign_link(idx, BPF_TCX_INGRESS, prog_f2, false);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.n_other, 1);

	/* In front of runwall: the query says so... */
	f1 = foreign_link(idx, BPF_TCX_INGRESS, prog_f1, true);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found);
	assert_false(info.first);
	assert_int_equal(info.n_other, 2);
	assert_int_equal(info.progs[0].prog_id, prog_id(prog_f1));
	assert_false(info.progs[0].runwall);
	assert_true(info.progs[1].runwall);

	/* ...and a re-attach puts runwall in front again, with a new link, and swaps the
	 * program in the same go.
	 */
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_AUTO, NULL), 0);
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 3);
	assert_int_equal(ids[0], prog_id(prog_b));
	assert_int_equal(ids[1], prog_id(prog_f1));
	assert_int_equal(ids[2], prog_id(prog_f2));
	lid2 = pin_link(path, &pid);
	assert_int_not_equal(lid2, 0);
	assert_int_not_equal(lid2, lid);
	assert_int_equal(pid, prog_id(prog_b));
	assert_int_equal(count_entries(), 1);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.n_other, 2);

	/* And stays put after that. */
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_AUTO, NULL), 0);
	assert_int_equal(pin_link(path, NULL), lid2);

	/* rw_detach takes runwall's only. */
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), 0);
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 2);
	assert_int_equal(ids[0], prog_id(prog_f1));
	assert_false(exists(path));
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), -ENOENT);
	close(f1);
	close(f2);
}

/* A move to the front cut short (agent killed): the old link holds the stand-in and the new
 * one is pinned under the temporary name. The next attach straightens it out.
 */
static void test_tcx_interrupted_move(void **state)
{
	__u32 ids[MAX_IDS], pid = 0;
	char path[256], tmp[300];
	int idx, f1, fd, nfd;

	if (!tcx_or_fallback())
		return;
	idx = veth("rwm0");
	pin_path(path, sizeof(path), "tcx", idx, "egress", "rwm0");
	snprintf(tmp, sizeof(tmp), "%s/tmp_tcx_%d_egress_rwm0", links_dir, idx);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	f1 = foreign_link(idx, BPF_TCX_INGRESS, prog_f1, true);

	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	assert_int_equal(bpf_link_update(fd, prog_h, NULL), 0);
	nfd = foreign_link(idx, BPF_TCX_INGRESS, prog_a, true);
	assert_int_equal(bpf_obj_pin(nfd, tmp), 0);
	close(nfd);
	close(fd);
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 3);

	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 2);
	assert_int_equal(ids[0], prog_id(prog_a));
	assert_int_equal(ids[1], prog_id(prog_f1));
	assert_false(exists(tmp));
	assert_int_not_equal(pin_link(path, &pid), 0);
	assert_int_equal(pid, prog_id(prog_a));
	close(f1);

	/* Only the stand-in left in the old link (killed right after the first step). */
	fd = bpf_obj_get(path);
	assert_int_equal(bpf_link_update(fd, prog_h, NULL), 0);
	close(fd);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	assert_int_equal(tcx_ids(idx, BPF_TCX_INGRESS, ids), 1);
	assert_int_equal(ids[0], prog_id(prog_a));
}

static void test_tcx_stale_pin(void **state)
{
	__u32 ids[MAX_IDS], lid, lid2;
	char path[256], old[256];
	struct rw_hook_info info;
	int idx, idx2;

	if (!tcx_or_fallback())
		return;
	idx = veth_with_a("rws0", old, sizeof(old));
	assert_true(exists(old));

	/* The pod's veth goes and comes back under the same name, with a new ifindex: a new
	 * link, and the old (defunct) pin is gone.
	 */
	assert_int_equal(sh("ip link del rws0"), 0);
	idx2 = veth("rws0");
	assert_int_not_equal(idx, idx2);
	assert_int_equal(rw_attach(pin_dir, idx2, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	assert_false(exists(old));
	pin_path(path, sizeof(path), "tcx", idx2, "egress", "rws0");
	lid = pin_link(path, NULL);
	assert_int_not_equal(lid, 0);
	assert_int_equal(count_entries(), 1);
	assert_int_equal(tcx_ids(idx2, BPF_TCX_INGRESS, ids), 1);

	/* Same name and the same ifindex again: the pin is there under the very name it would
	 * get, but its link is defunct; a fresh one replaces it.
	 */
	assert_int_equal(sh("ip link del rws0"), 0);
	assert_int_equal(sh("ip link add rws0 index %d type veth peer name rws0p", idx2), 0);
	assert_int_equal((int)if_nametoindex("rws0"), idx2);
	assert_true(exists(path));
	query(idx2, RW_DIR_EGRESS, &info);
	assert_false(info.found);
	assert_int_equal(rw_attach(pin_dir, idx2, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	lid2 = pin_link(path, NULL);
	assert_int_not_equal(lid2, 0);
	assert_int_not_equal(lid2, lid);
	assert_int_equal(tcx_ids(idx2, BPF_TCX_INGRESS, ids), 1);
	assert_int_equal(ids[0], prog_id(prog_a));
	assert_int_equal(count_entries(), 1);
	query(idx2, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
}

static void test_tcx_renamed_interface(void **state)
{
	char path[256], path2[256];
	__u32 lid;
	int idx;

	if (!tcx_or_fallback())
		return;
	idx = veth_with_a("rwr0", path, sizeof(path));
	pin_path(path2, sizeof(path2), "tcx", idx, "egress", "rwr1");
	lid = pin_link(path, NULL);
	assert_int_equal(sh("ip link set rwr0 down && ip link set rwr0 name rwr1"), 0);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL), 0);
	assert_false(exists(path));
	assert_int_equal(pin_link(path2, NULL), lid);
	assert_int_equal(count_entries(), 1);
	sh("ip link del rwr1");
}

/* bpffs refuses names with a dot; interface names may have one ("eth0.100"). */
static void test_dotted_ifname(void **state)
{
	struct rw_hook_info info;
	char pin[256], mark[256];
	int idx;

	idx = veth("rw.d0");
	pin_path(pin, sizeof(pin), "tcx", idx, "egress", "rw-d0");
	pin_path(mark, sizeof(mark), "tc", idx, "ingress", "rw-d0");
	if (have_tcx) {
		assert_int_equal(
			rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TCX, NULL), 0);
		assert_true(exists(pin));
		query(idx, RW_DIR_EGRESS, &info);
		assert_true(info.found && info.first);
		assert_int_equal(info.mode, RW_ATTACH_TCX);
	}
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	assert_true(exists(mark));
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_INGRESS), 0);
	assert_false(exists(mark));
	if (have_tcx) {
		assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), 0);
		assert_false(exists(pin));
	}
	assert_int_equal(count_entries(), 0);
}

/* --- tc --------------------------------------------------------------------------------- */

static void test_tc_forced(void **state)
{
	struct rw_hook_info info;
	enum rw_attach_mode used = RW_ATTACH_AUTO;
	char mark[256];
	int idx, f;

	idx = veth("rwt0");
	pin_path(mark, sizeof(mark), "tc", idx, "egress", "rwt0");
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TC, &used), 0);
	assert_int_equal(used, RW_ATTACH_TC);
	assert_true(exists(mark));
	assert_true(filter_present(idx, BPF_TC_INGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	assert_false(filter_present(idx, BPF_TC_EGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.mode, RW_ATTACH_TC);
	assert_int_equal(info.prog_id, prog_id(prog_a));
	assert_int_equal(info.n_tc, 1);
	assert_int_equal(info.n_other, 0);
	assert_int_equal(info.progs[0].handle, RW_TC_HANDLE);
	assert_int_equal(info.progs[0].prio, RW_TC_PRIO);

	/* Idempotent. */
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	query(idx, RW_DIR_EGRESS, &info);
	assert_int_equal(info.n_tc, 1);

	/* A foreign filter behind runwall (prio 2) changes nothing. */
	foreign_filter(idx, BPF_TC_INGRESS, prog_f1, 1, 2);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.n_other, 1);

	/* Replace: same handle, new program, one runwall filter. */
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_TC, NULL), 0);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.prog_id, prog_id(prog_b));
	assert_int_equal(info.n_tc, 2);
	assert_int_equal(info.progs[0].handle, RW_TC_HANDLE);

	/* A foreign filter at prio 1 added later runs first (cls_bpf adds at the head of the
	 * list); a re-attach puts runwall in front again under its other handle.
	 */
	foreign_filter(idx, BPF_TC_INGRESS, prog_f2, 1, 1);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found);
	assert_false(info.first);
	assert_int_equal(info.progs[0].handle, 1);
	assert_int_equal(info.n_other, 2);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_TC, NULL), 0);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.n_tc, 3);
	assert_int_equal(info.progs[0].handle, RW_TC_HANDLE_ALT);
	assert_int_equal(info.progs[0].prog_id, prog_id(prog_b));
	assert_false(filter_present(idx, BPF_TC_INGRESS, RW_TC_HANDLE, RW_TC_PRIO));

	/* A tcx program runs before every tc filter: runwall in tc mode is then not first. */
	if (have_tcx) {
		f = foreign_link(idx, BPF_TCX_INGRESS, prog_f1, false);
		query(idx, RW_DIR_EGRESS, &info);
		assert_true(info.found);
		assert_false(info.first);
		assert_int_equal(info.n_other, 3);
		/* Nothing rw_attach can do in tc mode: it leaves it (and does not loop). */
		assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_TC, NULL),
				 0);
		query(idx, RW_DIR_EGRESS, &info);
		assert_int_equal(info.progs[1].handle, RW_TC_HANDLE_ALT);
		close(f);
	}

	/* Detach: runwall's filter goes; the foreign ones and clsact stay. */
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), 0);
	assert_false(filter_present(idx, BPF_TC_INGRESS, RW_TC_HANDLE_ALT, RW_TC_PRIO));
	assert_true(filter_present(idx, BPF_TC_INGRESS, 1, 1));
	assert_true(filter_present(idx, BPF_TC_INGRESS, 1, 2));
	assert_int_equal(sh("tc qdisc show dev rwt0 | grep -q clsact"), 0);
	assert_false(exists(mark));
	query(idx, RW_DIR_EGRESS, &info);
	assert_false(info.found);
	assert_int_equal(info.n_other, 2);
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), -ENOENT);
}

/* The AWS network policy agent's layout: its filter at handle 1 prio 1 on both hooks before
 * runwall comes; runwall must not touch it, and goes in front of it.
 */
static void test_tc_existing_clsact(void **state)
{
	struct rw_hook_info info;
	int idx;

	idx = veth("rwc0");
	foreign_filter(idx, BPF_TC_INGRESS, prog_f1, 1, 1);
	foreign_filter(idx, BPF_TC_EGRESS, prog_f1, 1, 1);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	query(idx, RW_DIR_INGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.n_other, 1);
	assert_true(filter_present(idx, BPF_TC_EGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_INGRESS), 0);
	assert_true(filter_present(idx, BPF_TC_EGRESS, 1, 1));
	assert_true(filter_present(idx, BPF_TC_INGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	assert_int_equal(count_entries(), 1);
}

/* A plain `ingress` qdisc (not clsact) has no egress hook, yet takes a filter asked for at the
 * egress parent and puts it on its one (ingress) block: attached that way, runwall's ingress
 * program would replace its egress program there and the egress hook would run nothing. The
 * egress hook is refused with -EBUSY instead, in either order, the ingress hook keeps runwall's
 * egress program, and a query does not report the egress hook as attached.
 */
static void test_tc_plain_ingress_qdisc(void **state)
{
	struct rw_hook_info info;
	int idx;

	for (int order = 0; order < 2; order++) {
		idx = veth("rwq0");
		assert_int_equal(sh("tc qdisc add dev rwq0 ingress"), 0);
		if (order == 0)
			assert_int_equal(
				rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TC, NULL),
				0);
		assert_int_equal(
			rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_b, RW_ATTACH_TC, NULL),
			-EBUSY);
		if (order == 1)
			assert_int_equal(
				rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_TC, NULL),
				0);
		query(idx, RW_DIR_EGRESS, &info);
		assert_true(info.found);
		assert_int_equal(info.prog_id, prog_id(prog_a));
		query(idx, RW_DIR_INGRESS, &info);
		assert_false(info.found);
		assert_int_equal(sh("tc qdisc show dev rwq0 | grep -q 'qdisc ingress'"), 0);
		assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), 0);
		assert_int_equal(sh("ip link del rwq0"), 0);
	}
	assert_string_not_equal(rw_attach_strerror(-EBUSY), strerror(EBUSY));
}

/* The tc marker of a deleted veth goes when the veth comes back under its name. */
static void test_tc_stale_marker(void **state)
{
	char old[256], mark[256];
	int idx, idx2;

	idx = veth("rwz0");
	pin_path(old, sizeof(old), "tc", idx, "ingress", "rwz0");
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	assert_true(exists(old));
	assert_int_equal(sh("ip link del rwz0"), 0);
	idx2 = veth("rwz0");
	assert_int_equal(rw_attach(pin_dir, idx2, RW_DIR_INGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	pin_path(mark, sizeof(mark), "tc", idx2, "ingress", "rwz0");
	assert_true(exists(mark));
	assert_false(exists(old));
	assert_int_equal(count_entries(), 1);
	assert_true(filter_present(idx2, BPF_TC_EGRESS, RW_TC_HANDLE, RW_TC_PRIO));
}

static void test_mode_switch(void **state)
{
	__u32 ids[MAX_IDS];
	char pin[256], mark[256];
	enum rw_attach_mode used;
	struct rw_hook_info info;
	int idx;

	if (!tcx_or_fallback())
		return;
	idx = veth("rwx0");
	pin_path(pin, sizeof(pin), "tcx", idx, "ingress", "rwx0");
	pin_path(mark, sizeof(mark), "tc", idx, "ingress", "rwx0");
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_a, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(used, RW_ATTACH_TCX);

	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_a, RW_ATTACH_TC, &used), 0);
	assert_int_equal(used, RW_ATTACH_TC);
	assert_int_equal(tcx_ids(idx, BPF_TCX_EGRESS, ids), 0);
	assert_false(exists(pin));
	assert_true(exists(mark));
	assert_true(filter_present(idx, BPF_TC_EGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	query(idx, RW_DIR_INGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.mode, RW_ATTACH_TC);

	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_INGRESS, prog_b, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(used, RW_ATTACH_TCX);
	assert_int_equal(tcx_ids(idx, BPF_TCX_EGRESS, ids), 1);
	assert_int_equal(ids[0], prog_id(prog_b));
	assert_true(exists(pin));
	assert_false(exists(mark));
	assert_false(filter_present(idx, BPF_TC_EGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	assert_int_equal(count_entries(), 1);
}

/* AUTO on whatever this kernel is: tcx on 6.6+, the tc fallback before (on 6.1 this is the
 * test of the fallback). Attach, re-attach, replace, and a veth recreated under its name.
 */
static void test_auto_mode(void **state)
{
	enum rw_attach_mode used = RW_ATTACH_AUTO, want = have_tcx ? RW_ATTACH_TCX : RW_ATTACH_TC;
	const char *kind = have_tcx ? "tcx" : "tc";
	struct rw_hook_info info;
	char path[256], old[256];
	int idx, idx2;

	idx = veth("rwu0");
	pin_path(old, sizeof(old), kind, idx, "egress", "rwu0");
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(used, want);
	assert_true(exists(old));
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, prog_b, RW_ATTACH_AUTO, &used), 0);
	query(idx, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.mode, want);
	assert_int_equal(info.prog_id, prog_id(prog_b));
	assert_int_equal(info.n_other, 0);
	assert_int_equal(info.n_tcx + info.n_tc, 1);
	assert_int_equal(count_entries(), 1);

	assert_int_equal(sh("ip link del rwu0"), 0);
	idx2 = veth("rwu0");
	assert_int_equal(rw_attach(pin_dir, idx2, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, &used), 0);
	assert_int_equal(used, want);
	pin_path(path, sizeof(path), kind, idx2, "egress", "rwu0");
	assert_true(exists(path));
	assert_false(exists(old));
	assert_int_equal(count_entries(), 1);
	query(idx2, RW_DIR_EGRESS, &info);
	assert_true(info.found && info.first);
	assert_int_equal(info.prog_id, prog_id(prog_a));
	assert_int_equal(rw_detach(pin_dir, idx2, RW_DIR_EGRESS), 0);
	assert_int_equal(count_entries(), 0);
}

/* --- detach_all, errors -------------------------------------------------------------------- */

static void test_detach_all(void **state)
{
	char foreign[256], other[256];
	__u32 ids[MAX_IDS];
	int a, b, c, fl, fl2;

	a = veth("rwd0");
	b = veth("rwd1");
	c = veth("rwd2");
	if (have_tcx) {
		assert_int_equal(rw_attach(pin_dir, a, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL),
				 0);
		assert_int_equal(
			rw_attach(pin_dir, a, RW_DIR_INGRESS, prog_b, RW_ATTACH_AUTO, NULL), 0);
		assert_int_equal(rw_attach(pin_dir, b, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL),
				 0);
		/* Someone else's links: one pinned next to links/, one in it under a name that
		 * is not runwall's.
		 */
		fl = foreign_link(a, BPF_TCX_INGRESS, prog_f1, false);
		fl2 = foreign_link(b, BPF_TCX_INGRESS, prog_f1, false);
		snprintf(foreign, sizeof(foreign), "%s/foreign", pin_dir);
		snprintf(other, sizeof(other), "%s/other", links_dir);
		assert_int_equal(bpf_obj_pin(fl, foreign), 0);
		assert_int_equal(bpf_obj_pin(fl2, other), 0);
		close(fl);
		close(fl2);
	}
	assert_int_equal(rw_attach(pin_dir, c, RW_DIR_EGRESS, prog_a, RW_ATTACH_TC, NULL), 0);
	foreign_filter(c, BPF_TC_INGRESS, prog_f1, 1, 1);

	assert_int_equal(rw_detach_all(pin_dir), 0);
	assert_false(filter_present(c, BPF_TC_INGRESS, RW_TC_HANDLE, RW_TC_PRIO));
	assert_true(filter_present(c, BPF_TC_INGRESS, 1, 1));
	if (have_tcx) {
		assert_int_equal(tcx_ids(a, BPF_TCX_INGRESS, ids), 1);
		assert_int_equal(ids[0], prog_id(prog_f1));
		assert_int_equal(tcx_ids(a, BPF_TCX_EGRESS, ids), 0);
		assert_int_equal(tcx_ids(b, BPF_TCX_INGRESS, ids), 1);
		assert_int_equal(ids[0], prog_id(prog_f1));
		assert_true(exists(foreign));
		assert_true(exists(other));
		assert_int_equal(count_entries(), 1);
		unlink(foreign);
		unlink(other);
	} else {
		assert_int_equal(count_entries(), 0);
	}
	/* Nothing left: a no-op. */
	assert_int_equal(rw_detach_all(pin_dir), 0);
}

static void test_errors(void **state)
{
	struct rw_hook_info info = {};
	int idx;

	idx = veth("rwe0");
	assert_int_equal(rw_detach(pin_dir, idx, RW_DIR_EGRESS), -ENOENT);
	assert_int_equal(rw_attach(pin_dir, 999999, RW_DIR_EGRESS, prog_a, RW_ATTACH_AUTO, NULL),
			 -ENODEV);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_COUNT, prog_a, RW_ATTACH_AUTO, NULL),
			 -EINVAL);
	assert_int_equal(rw_attach(pin_dir, idx, RW_DIR_EGRESS, -1, RW_ATTACH_AUTO, NULL), -EINVAL);
	assert_int_equal(rw_hook_query(999999, RW_DIR_EGRESS, &info), -ENODEV);
	assert_int_equal(rw_hook_query(idx, RW_DIR_EGRESS, &info), 0);
	assert_false(info.found);
	assert_int_equal(info.n_progs, 0);
	assert_string_equal(rw_attach_mode_str(RW_ATTACH_TC), "tc");
	assert_string_equal(rw_attach_mode_str(RW_ATTACH_AUTO), "auto");
	assert_int_equal(count_entries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_tcx_attach_first, cleanup),
		cmocka_unit_test_teardown(test_tcx_reattach_idempotent, cleanup),
		cmocka_unit_test_teardown(test_tcx_replace, cleanup),
		cmocka_unit_test_teardown(test_tcx_foreign_first_restored, cleanup),
		cmocka_unit_test_teardown(test_tcx_interrupted_move, cleanup),
		cmocka_unit_test_teardown(test_tcx_stale_pin, cleanup),
		cmocka_unit_test_teardown(test_tcx_renamed_interface, cleanup),
		cmocka_unit_test_teardown(test_dotted_ifname, cleanup),
		cmocka_unit_test_teardown(test_tc_forced, cleanup),
		cmocka_unit_test_teardown(test_tc_existing_clsact, cleanup),
		cmocka_unit_test_teardown(test_tc_plain_ingress_qdisc, cleanup),
		cmocka_unit_test_teardown(test_tc_stale_marker, cleanup),
		cmocka_unit_test_teardown(test_mode_switch, cleanup),
		cmocka_unit_test_teardown(test_auto_mode, cleanup),
		cmocka_unit_test_teardown(test_detach_all, cleanup),
		cmocka_unit_test_teardown(test_errors, cleanup),
	};

	if (geteuid()) {
		fprintf(stderr, "test_attach: needs root (BPF, netns, bpffs)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
