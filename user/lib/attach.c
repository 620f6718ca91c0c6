// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* attach.c: tcx links and the tc (cls_bpf) fallback for runwall's programs; see attach.h.
 *
 * libbpf 1.1 (Debian 12) predates tcx: it has no bpf_program__attach_tcx(), no tcx section
 * names and its UAPI copy has no BPF_TCX_* nor a tcx member in struct bpf_link_info. Its
 * bpf_link_create() still passes any attach type and flags through to BPF_LINK_CREATE (the
 * tcx relative_fd/expected_revision fields it cannot set stay zero, which is what we want:
 * BPF_F_BEFORE with no relative object means "at the head"), and bpf_prog_query_opts() fills
 * prog_ids in execution order for a tcx hook, so the plain syscall wrappers are enough.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <libmnl/libmnl.h>
#include "attach.h"
#include "bpf_compat.h"
#include "nlutil.h"

#define RW_LINK_TYPE_TCX 11 /* BPF_LINK_TYPE_TCX: an enum constant, so no #ifndef test */

/* struct bpf_link_info as a 6.6+ kernel fills it for a tcx link: type, id, prog_id, then the
 * union (8-byte aligned: some members hold __aligned_u64) whose tcx member is
 * { __u32 ifindex; __u32 attach_type; }. The kernel copies back min(info_len, its size) bytes,
 * so asking for just these 24 bytes is fine. For a link whose device is gone (unregistering a
 * netdev makes its tcx links defunct: tcx_uninstall() clears the link's dev) the kernel
 * reports ifindex 0.
 */
struct rw_tcx_link_info {
	__u32 type;
	__u32 id;
	__u32 prog_id;
	__u32 pad;
	__u32 ifindex;
	__u32 attach_type;
};
_Static_assert(offsetof(struct rw_tcx_link_info, ifindex) ==
		       offsetof(struct bpf_link_info, xdp.ifindex),
	       "tcx link info must sit where the UAPI union starts");

#define ARRAY_SIZE(a)  (sizeof(a) / sizeof((a)[0]))
#define TMP_PREFIX     "tmp_"
#define TC_MARK_TARGET "runwall-tc-filter"

enum pin_kind { PIN_TCX, PIN_TC };

static const char *const kind_str[] = {[PIN_TCX] = "tcx", [PIN_TC] = "tc"};

/* What a name in links/ says: kind_ifindex_dir_ifname. */
struct pin_id {
	enum pin_kind kind;
	int ifindex;
	enum rw_dir dir;
	char ifname[IF_NAMESIZE];
};

/* One hook and what runwall has in links/ for it. */
struct hook {
	int ifindex;
	enum rw_dir dir;
	char ifname[IF_NAMESIZE]; /* as in pin names (ifname_for_pin()); "" if it is gone */
	char links[PATH_MAX];
	char pin[2][PATH_MAX]; /* by enum pin_kind: path of the entry found, or "" */
};

/* A tc filter on the hook, from a dump. */
struct tc_filter {
	__u32 handle;
	__u32 prog_id;
	__u16 prio;
	bool bpf;
};

struct tc_list {
	struct tc_filter f[RW_HOOK_MAX_PROGS];
	__u32 n;     /* entries in f[] */
	__u32 total; /* filters seen */
	bool shared; /* the TC egress hook's dump showed the ingress hook's filters (tc_list()) */
};

static const char *dir_str(enum rw_dir dir)
{
	return dir == RW_DIR_EGRESS ? "egress" : "ingress";
}

/* runwall's egress (pod -> world) is what the host-side veth receives: its TC ingress hook. */
static int tcx_type(enum rw_dir dir)
{
	return dir == RW_DIR_EGRESS ? BPF_TCX_INGRESS : BPF_TCX_EGRESS;
}

static enum bpf_tc_attach_point tc_point(enum rw_dir dir)
{
	return dir == RW_DIR_EGRESS ? BPF_TC_INGRESS : BPF_TC_EGRESS;
}

static __u32 tc_parent(enum rw_dir dir)
{
	return TC_H_MAKE(TC_H_CLSACT, dir == RW_DIR_EGRESS ? TC_H_MIN_INGRESS : TC_H_MIN_EGRESS);
}

const char *rw_attach_mode_str(enum rw_attach_mode mode)
{
	switch (mode) {
	case RW_ATTACH_AUTO:
		return "auto";
	case RW_ATTACH_TCX:
		return "tcx";
	case RW_ATTACH_TC:
		return "tc";
	}
	return "?";
}

static int path_join(char *buf, size_t len, const char *dir, const char *prefix, const char *name)
{
	int n = snprintf(buf, len, "%s/%s%s", dir, prefix, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int pin_name(char *buf, size_t len, enum pin_kind kind, int ifindex, enum rw_dir dir,
		    const char *ifname)
{
	int n = snprintf(buf, len, "%s_%d_%s_%s", kind_str[kind], ifindex, dir_str(dir), ifname);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The path an entry of the hook has under its current interface name; prefix "" or TMP_PREFIX. */
static int hook_path(const struct hook *h, enum pin_kind kind, const char *prefix, char *buf,
		     size_t len)
{
	char name[NAME_MAX + 1];
	int err;

	err = pin_name(name, sizeof(name), kind, h->ifindex, h->dir, h->ifname);
	if (!err)
		err = path_join(buf, len, h->links, prefix, name);
	return err;
}

static bool pin_parse(const char *name, struct pin_id *id)
{
	unsigned long v;
	const char *p;
	char *end;
	size_t len;

	if (!strncmp(name, "tcx_", 4)) {
		id->kind = PIN_TCX;
		p = name + 4;
	} else if (!strncmp(name, "tc_", 3)) {
		id->kind = PIN_TC;
		p = name + 3;
	} else {
		return false;
	}
	if (!isdigit((unsigned char)*p))
		return false;
	errno = 0;
	v = strtoul(p, &end, 10);
	if (errno || !v || v > INT_MAX || *end != '_')
		return false;
	id->ifindex = (int)v;
	p = end + 1;
	if (!strncmp(p, "egress_", 7)) {
		id->dir = RW_DIR_EGRESS;
		p += 7;
	} else if (!strncmp(p, "ingress_", 8)) {
		id->dir = RW_DIR_INGRESS;
		p += 8;
	} else {
		return false;
	}
	len = strlen(p);
	if (!len || len >= IF_NAMESIZE)
		return false;
	memcpy(id->ifname, p, len + 1);
	return true;
}

bool rw_link_pin_parse(const char *name, struct rw_link_pin *out)
{
	struct pin_id id;

	if (!pin_parse(name, &id))
		return false;
	out->ifindex = id.ifindex;
	out->dir = id.dir;
	out->mode = id.kind == PIN_TCX ? RW_ATTACH_TCX : RW_ATTACH_TC;
	_Static_assert(sizeof(out->ifname) == sizeof(id.ifname), "IF_NAMESIZE");
	memcpy(out->ifname, id.ifname, sizeof(out->ifname));
	out->name = name;
	return true;
}

int rw_link_pins(const char *pin_dir, int (*fn)(const struct rw_link_pin *pin, void *data),
		 void *data)
{
	char path[PATH_MAX];
	struct rw_link_pin pin;
	struct dirent *de;
	int err = 0;
	DIR *d;

	err = path_join(path, sizeof(path), pin_dir, "", RW_LINKS_DIR);
	if (err)
		return err;
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!err && (de = readdir(d)))
		if (rw_link_pin_parse(de->d_name, &pin))
			err = fn(&pin, data);
	closedir(d);
	return err;
}

/* An interface name as it appears in a pin name. bpffs refuses names with a '.' in them
 * (bpf_lookup(): dots are reserved for the kernel's own files), and "eth0.100" is a valid
 * interface name, so a '.' is written '-'. The name is for people and for recognising the
 * pins of a recreated interface; the key is the ifindex, so the rare clash does no harm.
 */
static char *ifname_for_pin(char *name)
{
	char *p;

	for (p = name; *p; p++)
		if (*p == '.')
			*p = '-';
	return name;
}

static int hook_init(struct hook *h, const char *pin_dir, int ifindex, enum rw_dir dir)
{
	int err;

	memset(h, 0, sizeof(*h));
	h->ifindex = ifindex;
	h->dir = dir;
	err = path_join(h->links, sizeof(h->links), pin_dir, "", RW_LINKS_DIR);
	if (err)
		return err;
	if (!if_indextoname(ifindex, h->ifname)) {
		h->ifname[0] = '\0';
		return -ENODEV;
	}
	ifname_for_pin(h->ifname);
	return 0;
}

/* hook_init() on a new hook, *out (free() it; NULL only when out of memory): hook_init()'s
 * error, or -ENOMEM.
 */
static int hook_new(const char *pin_dir, int ifindex, enum rw_dir dir, struct hook **out)
{
	*out = malloc(sizeof(**out));
	if (!*out)
		return -ENOMEM;
	return hook_init(*out, pin_dir, ifindex, dir);
}

/* A tcx link's state: 0 and its program id when it is attached to ifindex on dir's hook,
 * -ESTALE when it is not (defunct, elsewhere, or not a tcx link at all).
 */
static int tcx_link_state(int link_fd, int ifindex, enum rw_dir dir, __u32 *prog_id)
{
	struct rw_tcx_link_info info = {};
	__u32 len = sizeof(info);
	int err;

	err = bpf_obj_get_info_by_fd(link_fd, &info, &len);
	if (err)
		goto out;
	if (info.type != RW_LINK_TYPE_TCX || info.ifindex != (__u32)ifindex ||
	    info.attach_type != (__u32)tcx_type(dir)) {
		err = -ESTALE;
		goto out;
	}
	if (prog_id)
		*prog_id = info.prog_id;
out:
	return err;
}

/* Program ids on dir's tcx hook in execution order; *cnt: capacity in, total out. -EINVAL from
 * a kernel before 6.6, whose BPF_PROG_QUERY does not know the tcx attach types.
 */
static int tcx_list(int ifindex, enum rw_dir dir, __u32 *ids, __u32 *cnt)
{
	LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = *cnt);
	int err;

	/* bpf_mprog_query() stores the total count and returns -ENOSPC when it is larger than
	 * the array (at most 64 programs fit on a hook, BPF_MPROG_MAX, so it does not here).
	 */
	err = bpf_prog_query_opts(ifindex, tcx_type(dir), &q);
	if (err == -ENOSPC)
		err = 0;
	if (!err)
		*cnt = q.prog_cnt;
	return err;
}

static bool tcx_supported(int ifindex)
{
	__u32 cnt = 0;

	return tcx_list(ifindex, RW_DIR_EGRESS, NULL, &cnt) != -EINVAL;
}

static int tcx_is_first(int ifindex, enum rw_dir dir, __u32 prog_id, bool *first)
{
	__u32 ids[RW_HOOK_MAX_PROGS], cnt = ARRAY_SIZE(ids);
	int err;

	err = tcx_list(ifindex, dir, ids, &cnt);
	if (!err)
		*first = cnt > 0 && ids[0] == prog_id;
	return err;
}

/* The stand-in that holds runwall's old link while it moves to the front: drops (TC_ACT_SHOT
 * is also TCX_DROP), so that the few packets that reach it fail closed.
 */
static int hold_prog_load(void)
{
	const struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = TC_ACT_SHOT},
		{.code = BPF_JMP | BPF_EXIT},
	};

	return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "rw_hold", "GPL", insns, ARRAY_SIZE(insns),
			     NULL);
}

/* Detach and unlink a pinned tcx link. -ENOENT when there is no such pin. */
static int tcx_pin_drop(const char *path)
{
	int fd, err = 0;

	fd = bpf_obj_get(path);
	if (fd < 0) {
		err = fd;
		goto out;
	}
	/* Detach even though unpinning would release it: another process (bpftool, a CLI)
	 * may hold an fd, and a link stays on its hook as long as anyone does.
	 */
	bpf_link_detach(fd);
	close(fd);
	if (unlink(path))
		err = -errno;
out:
	return err;
}

/* --- tc filters, listed with an RTM_GETTFILTER dump ------------------------------------ */

static int tc_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, TCA_MAX) < 0)
		return MNL_CB_OK; /* newer than our headers */
	switch (type) {
	case TCA_KIND:
		if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
			return MNL_CB_ERROR;
		break;
	case TCA_CHAIN:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
			return MNL_CB_ERROR;
		break;
	case TCA_OPTIONS:
		if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0)
			return MNL_CB_ERROR;
		break;
	}
	tb[type] = attr;
	return MNL_CB_OK;
}

static int tc_bpf_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, TCA_BPF_MAX) < 0)
		return MNL_CB_OK;
	if (type == TCA_BPF_ID && mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
		return MNL_CB_ERROR;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int tc_filter_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[TCA_MAX + 1] = {}, *opt[TCA_BPF_MAX + 1] = {};
	const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
	struct tc_list *l = data;
	struct tc_filter f = {};

	if (nlh->nlmsg_type != RTM_NEWTFILTER)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*tcm), tc_attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	/* The dump (tcf_chain_dump()) sends one message per classifier instance (a priority)
	 * with handle 0 before the filters it holds; only the filters count.
	 */
	if (!tcm->tcm_handle)
		return MNL_CB_OK;
	if (tb[TCA_CHAIN] && mnl_attr_get_u32(tb[TCA_CHAIN]))
		return MNL_CB_OK;
	f.handle = tcm->tcm_handle;
	f.prio = TC_H_MAJ(tcm->tcm_info) >> 16;
	if (tb[TCA_KIND] && !strcmp(mnl_attr_get_str(tb[TCA_KIND]), "bpf")) {
		f.bpf = true;
		if (tb[TCA_OPTIONS] &&
		    mnl_attr_parse_nested(tb[TCA_OPTIONS], tc_bpf_attr_cb, opt) >= 0 &&
		    opt[TCA_BPF_ID])
			f.prog_id = mnl_attr_get_u32(opt[TCA_BPF_ID]);
	}
	if (l->n < ARRAY_SIZE(l->f))
		l->f[l->n++] = f;
	l->total++;
	return MNL_CB_OK;
}

/* The filters of chain 0 on dir's clsact hook, in the order the kernel runs them: by priority,
 * and within one priority cls_bpf's list order (a new filter goes to the head of the list,
 * cls_bpf_change() uses list_add_rcu(), and the dump walks that list). Empty when there is no
 * clsact qdisc or no such interface (tc_dump_tfilter() then sends nothing).
 */
static int tc_dump(int ifindex, enum rw_dir dir, struct tc_list *l)
{
	struct nlmsghdr *nlh;
	struct tcmsg *tcm;
	int err;

	memset(l, 0, sizeof(*l));
	tcm = rw_mnl_dump_request(RTM_GETTFILTER, sizeof(*tcm), &nlh);
	if (!tcm)
		return -ENOMEM;
	tcm->tcm_family = AF_UNSPEC;
	tcm->tcm_ifindex = ifindex;
	tcm->tcm_parent = tc_parent(dir);
	mnl_attr_put_u32(nlh, TCA_CHAIN, 0);
	err = rw_mnl_dump(nlh, tc_filter_cb, l);
	free(nlh);
	return err;
}

static bool tc_list_same(const struct tc_list *a, const struct tc_list *b)
{
	if (a->total != b->total || a->n != b->n)
		return false;
	for (__u32 i = 0; i < a->n; i++)
		if (a->f[i].handle != b->f[i].handle || a->f[i].prog_id != b->f[i].prog_id ||
		    a->f[i].prio != b->f[i].prio)
			return false;
	return true;
}

struct qdisc_probe {
	int ifindex;
	char kind[32]; /* of the qdisc at TC_H_INGRESS; "" when there is none */
};

static int tc_qdisc_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[TCA_MAX + 1] = {};
	const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);
	struct qdisc_probe *p = data;

	if (nlh->nlmsg_type != RTM_NEWQDISC || tcm->tcm_ifindex != p->ifindex ||
	    tcm->tcm_parent != TC_H_INGRESS)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*tcm), tc_attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	if (tb[TCA_KIND])
		snprintf(p->kind, sizeof(p->kind), "%s", mnl_attr_get_str(tb[TCA_KIND]));
	return MNL_CB_OK;
}

/* 1 when ifindex's qdisc at the ingress handle is clsact, 0 when it is another kind. A qdisc
 * dump walks every interface of the namespace (the kernel does not filter it by tcm_ifindex;
 * iproute2 filters in user space too), so it is only asked in the two cases that cannot be
 * told apart otherwise: the two hooks list the same filters (tc_list()), or a qdisc was
 * already there and neither hook holds a filter (attach_tc()). A single RTM_GETQDISC would
 * do, but tc_get_qdisc() answers by notifying every RTNLGRP_TC listener.
 */
static int tc_hook_is_clsact(int ifindex)
{
	struct qdisc_probe p = {.ifindex = ifindex};
	int err = rw_mnl_dump_all(RTM_GETQDISC, sizeof(struct tcmsg), tc_qdisc_cb, &p);

	if (err)
		return err;
	return !strcmp(p.kind, "clsact");
}

/* Only the clsact qdisc has an egress hook for filters. A plain `ingress` qdisc (handle ffff:,
 * what `tc qdisc add dev X ingress` makes) holds the same place, so bpf_tc_hook_create() of
 * clsact fails with -EEXIST, and yet a filter asked for at parent ffff:fff3 is accepted: the
 * ingress qdisc's class lookup takes any minor (ingress_find()) and it has one block
 * (ingress_tcf_block()), so the filter lands on the *ingress* hook and the egress hook has
 * none. A dump of "the egress hook" then shows the ingress hook's filters. So, for the egress
 * hook: when its filters are exactly the ingress hook's (on clsact that takes the same filters
 * with the same programs on both hooks, which runwall never does: each direction has its own
 * program), the qdisc itself is asked (tc_hook_is_clsact()); if it is not clsact, the list is
 * empty and marked shared. attach_tc() asks it too when both hooks are empty.
 */
static int tc_list(int ifindex, enum rw_dir dir, struct tc_list *l)
{
	struct tc_list *other;
	int err;

	err = tc_dump(ifindex, dir, l);
	if (err || dir != RW_DIR_INGRESS || !l->total)
		return err;
	other = malloc(sizeof(*other));
	if (!other)
		return -ENOMEM;
	err = tc_dump(ifindex, RW_DIR_EGRESS, other);
	if (!err && tc_list_same(l, other)) {
		err = tc_hook_is_clsact(ifindex);
		if (err == 0) {
			memset(l, 0, sizeof(*l));
			l->shared = true;
		}
		err = err < 0 ? err : 0;
	}
	free(other);
	return err;
}

/* tc_list() into a new list, *out (free() it; NULL only when out of memory). */
static int tc_list_new(int ifindex, enum rw_dir dir, struct tc_list **out)
{
	*out = malloc(sizeof(**out));
	if (!*out)
		return -ENOMEM;
	return tc_list(ifindex, dir, *out);
}

static bool tc_is_runwall(const struct tc_filter *f)
{
	return f->bpf && f->prio == RW_TC_PRIO &&
	       (f->handle == RW_TC_HANDLE || f->handle == RW_TC_HANDLE_ALT);
}

/* "tc filter replace ... prio 1 handle H bpf da": creates the filter or swaps its program in
 * place (cls_bpf_change() replaces the list entry, keeping its position).
 */
static int tc_put(int ifindex, enum rw_dir dir, __u32 handle, int prog_fd)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = tc_point(dir));
	LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE,
		    .handle = handle, .priority = RW_TC_PRIO);

	return bpf_tc_attach(&hook, &opts);
}

static int tc_del(int ifindex, enum rw_dir dir, __u32 handle)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = tc_point(dir));
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = RW_TC_PRIO);

	return bpf_tc_detach(&hook, &opts);
}

/* Delete runwall's filters from the hook: 0 when there was one, -ENOENT when not. */
static int tc_remove_filters(int ifindex, enum rw_dir dir)
{
	struct tc_list *l;
	bool found = false;
	int err, err2;
	__u32 i;

	err = tc_list_new(ifindex, dir, &l);
	if (err)
		goto out;
	for (i = 0; i < l->n; i++) {
		if (!tc_is_runwall(&l->f[i]))
			continue;
		found = true;
		err2 = tc_del(ifindex, dir, l->f[i].handle);
		if (err2 && err2 != -ENOENT && !err)
			err = err2;
	}
	if (!err && !found)
		err = -ENOENT;
out:
	free(l);
	return err;
}

/* Whether runwall's tc filter is on the hook (for markers: a marker without one is stale). */
static int tc_has_runwall(int ifindex, enum rw_dir dir, bool *has)
{
	struct tc_list *l;
	__u32 i;
	int err;

	err = tc_list_new(ifindex, dir, &l);
	if (err)
		goto out;
	*has = false;
	for (i = 0; i < l->n; i++)
		if (tc_is_runwall(&l->f[i]))
			*has = true;
out:
	free(l);
	return err;
}

/* --- links/ ------------------------------------------------------------------------------ */

/* Whether an entry named for another hook is stale: a pinned link that is no longer attached
 * where its name says, a marker for a hook without runwall's filter. When in doubt, not.
 */
static bool entry_stale(const struct pin_id *id, const char *path)
{
	bool has = true;
	int fd, err;

	if (id->kind == PIN_TC)
		return !tc_has_runwall(id->ifindex, id->dir, &has) && !has;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return false;
	err = tcx_link_state(fd, id->ifindex, id->dir, NULL);
	close(fd);
	return err == -ESTALE;
}

/* Find runwall's entries for the hook. Their names carry the interface name, so the usual
 * case is an lstat() per kind. When the entry of kind `want` (an enum pin_kind, or -1 for
 * "always scan") is not where the current name puts it (nothing yet, or the interface was
 * renamed), scan links/ once; with `tidy` the scan also removes stale entries of the same
 * name and dir: those of an interface that was deleted, e.g. a pod's veth recreated under
 * the same name with a new ifindex. Unlinking while reading the directory is safe: bpffs
 * lists with dcache_readdir(), whose cursor only moves past entries already returned.
 */
static int hook_find(struct hook *h, int want, bool tidy)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct pin_id id;
	struct stat st;
	DIR *d = NULL;
	int k, err = 0;

	h->pin[PIN_TCX][0] = h->pin[PIN_TC][0] = '\0';
	if (h->ifname[0]) {
		for (k = PIN_TCX; k <= PIN_TC; k++) {
			err = hook_path(h, k, "", path, sizeof(path));
			if (err)
				goto out;
			if (!lstat(path, &st))
				strcpy(h->pin[k], path);
		}
		if (want >= 0 && h->pin[want][0])
			goto out;
	}
	d = opendir(h->links);
	if (!d) {
		err = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	while ((de = readdir(d))) {
		if (!pin_parse(de->d_name, &id) || id.dir != h->dir)
			continue;
		err = path_join(path, sizeof(path), h->links, "", de->d_name);
		if (err)
			goto out;
		if (id.ifindex == h->ifindex) {
			if (!strcmp(h->pin[id.kind], path))
				continue;
			if (tidy && entry_stale(&id, path)) {
				unlink(path);
				continue;
			}
			if (!h->pin[id.kind][0])
				strcpy(h->pin[id.kind], path);
			else if (tidy && id.kind == PIN_TC)
				unlink(path); /* a second marker says nothing more */
			continue;
		}
		if (tidy && h->ifname[0] && !strcmp(id.ifname, h->ifname) && entry_stale(&id, path))
			unlink(path);
	}
	err = 0;
out:
	if (d)
		closedir(d);
	return err;
}

/* Give an entry the name the interface has now. */
static int hook_rename(struct hook *h, enum pin_kind kind)
{
	char path[PATH_MAX];
	int err;

	err = hook_path(h, kind, "", path, sizeof(path));
	if (err || !strcmp(path, h->pin[kind]))
		return err;
	if (rename(h->pin[kind], path))
		return -errno;
	strcpy(h->pin[kind], path);
	return 0;
}

static int mkdir_ok(const char *path)
{
	return mkdir(path, 0700) && errno != EEXIST ? -errno : 0;
}

/* --- tcx --------------------------------------------------------------------------------- */

/* Put runwall's link back at the head of the hook. A tcx link cannot move, so runwall makes a
 * new one with BPF_F_BEFORE; but the kernel refuses a program that is already on the hook
 * (bpf_mprog_attach(): -EEXIST), so the old link first takes a stand-in program
 * (bpf_link_update(), atomic), then the new link comes in front with runwall's program, takes
 * over the pin (pinned under a temporary name and renamed over the old pin, which bpffs does
 * atomically), and the old link is detached. Runwall's program is on the hook throughout
 * except between the first two steps, when the stand-in drops what the programs in front
 * let through. Cut short, this leaves either the old link holding the stand-in (the next
 * attach swaps the program back and moves again) or a new link pinned at the temporary name,
 * dropped here first. On failure the old link gets runwall's program back, or, when even
 * that fails, the program it had (old_prog_id).
 */
static int tcx_move_first(struct hook *h, int old_fd, __u32 old_prog_id, int prog_fd)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = BPF_F_BEFORE);
	int hold = -1, new_fd = -1, old_prog, err;
	char tmp[PATH_MAX];

	err = hook_path(h, PIN_TCX, TMP_PREFIX, tmp, sizeof(tmp));
	if (err)
		goto out;
	err = tcx_pin_drop(tmp);
	if (err && err != -ENOENT)
		goto out;
	hold = hold_prog_load();
	if (hold < 0) {
		err = hold;
		goto out;
	}
	err = bpf_link_update(old_fd, hold, NULL);
	if (err)
		goto out;
	new_fd = bpf_link_create(prog_fd, h->ifindex, tcx_type(h->dir), &opts);
	if (new_fd < 0) {
		err = new_fd;
		goto out;
	}
	err = bpf_obj_pin(new_fd, tmp);
	if (err)
		goto out;
	if (rename(tmp, h->pin[PIN_TCX])) {
		err = -errno;
		unlink(tmp);
		goto out;
	}
	bpf_link_detach(old_fd);
	close(new_fd);
	new_fd = -1;
out:
	if (new_fd >= 0) {
		/* Failed after the new link was made: take it off so that the old one can have
		 * runwall's program back.
		 */
		bpf_link_detach(new_fd);
		close(new_fd);
	}
	if (err && hold >= 0 && bpf_link_update(old_fd, prog_fd, NULL)) {
		old_prog = bpf_prog_get_fd_by_id(old_prog_id);
		if (old_prog >= 0) {
			bpf_link_update(old_fd, old_prog, NULL);
			close(old_prog);
		}
	}
	if (hold >= 0)
		close(hold);
	return err;
}

static int attach_tcx(struct hook *h, int prog_fd, __u32 prog_id)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = BPF_F_BEFORE);
	char path[PATH_MAX];
	int link_fd = -1, err;
	bool first = false;
	__u32 cur = 0;

	err = hook_path(h, PIN_TCX, "", path, sizeof(path));
	if (err)
		goto out;
	if (h->pin[PIN_TCX][0]) {
		link_fd = bpf_obj_get(h->pin[PIN_TCX]);
		if (link_fd < 0) {
			err = link_fd;
			goto out;
		}
		err = tcx_link_state(link_fd, h->ifindex, h->dir, &cur);
		if (err == -ESTALE) {
			/* Its interface went away (and the ifindex may now be another one's):
			 * the link is defunct, only the pin holds it.
			 */
			close(link_fd);
			link_fd = -1;
			if (unlink(h->pin[PIN_TCX]) && errno != ENOENT) {
				err = -errno;
				goto out;
			}
			h->pin[PIN_TCX][0] = '\0';
		} else if (err) {
			goto out;
		}
	}

	if (link_fd < 0) {
		link_fd = bpf_link_create(prog_fd, h->ifindex, tcx_type(h->dir), &opts);
		if (link_fd < 0) {
			err = link_fd;
			link_fd = -1;
			goto out;
		}
		/* On failure the link goes when link_fd is closed: nothing is left behind. */
		err = bpf_obj_pin(link_fd, path);
		if (err)
			goto out;
		strcpy(h->pin[PIN_TCX], path);
	} else {
		err = hook_rename(h, PIN_TCX);
		if (err)
			goto out;
		err = tcx_is_first(h->ifindex, h->dir, cur, &first);
		if (err)
			goto out;
		if (!first)
			err = tcx_move_first(h, link_fd, cur, prog_fd);
		else if (cur != prog_id)
			err = bpf_link_update(link_fd, prog_fd, NULL);
		if (err)
			goto out;
	}

	/* From tc to tcx: the link is in place (and runs before any tc filter), so runwall's tc
	 * filter can go.
	 */
	err = tc_remove_filters(h->ifindex, h->dir);
	if (err == -ENOENT)
		err = 0;
	if (!err && h->pin[PIN_TC][0] && unlink(h->pin[PIN_TC]) && errno != ENOENT)
		err = -errno;
out:
	if (link_fd >= 0)
		close(link_fd);
	return err;
}

/* --- tc ---------------------------------------------------------------------------------- */

static int attach_tc(struct hook *h, int prog_fd, __u32 prog_id)
{
	LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = h->ifindex, .attach_point = tc_point(h->dir));
	struct tc_list *l = NULL;
	const struct tc_filter *rw = NULL;
	bool fresh = false;
	char path[PATH_MAX];
	__u32 i, handle;
	int err;

	err = tc_list_new(h->ifindex, h->dir, &l);
	if (err)
		goto out;
	/* Create clsact when missing, never replace or delete it: other enforcers' filters
	 * (the AWS network policy agent's, Cilium's on older kernels) live on it too. A filter
	 * on the hook means the qdisc is there; only without one ask for it, because on an
	 * existing qdisc bpf_tc_hook_create() fails with -EEXIST and libbpf prints the kernel's
	 * "Exclusivity flag on, cannot modify" each time. (Asking with RTM_GETQDISC would do,
	 * but tc_get_qdisc() also broadcasts its answer to every RTNLGRP_TC listener, and a
	 * qdisc dump cannot be limited to one interface.)
	 */
	if (l->shared) {
		err = -EBUSY;
		goto out;
	}
	if (!l->total) {
		err = bpf_tc_hook_create(&tc_hook);
		if (err == -EEXIST && h->dir == RW_DIR_INGRESS) {
			err = tc_hook_is_clsact(h->ifindex);
			if (err == 0)
				err = -EBUSY;
		}
		if (err < 0 && err != -EEXIST)
			goto out;
		err = 0;
	}

	/* The marker first: whenever runwall's filter may be on the hook, links/ says so. */
	if (h->pin[PIN_TC][0]) {
		err = hook_rename(h, PIN_TC);
	} else {
		err = hook_path(h, PIN_TC, "", path, sizeof(path));
		if (!err && symlink(TC_MARK_TARGET, path) && errno != EEXIST)
			err = -errno;
		if (!err)
			strcpy(h->pin[PIN_TC], path);
	}
	if (err)
		goto out;

	for (i = 0; i < l->n; i++) {
		if (!tc_is_runwall(&l->f[i]))
			continue;
		if (!rw) {
			rw = &l->f[i];
			continue;
		}
		/* Two of runwall's filters only after a move to the front was cut short: keep the
		 * one that runs first.
		 */
		err = tc_del(h->ifindex, h->dir, l->f[i].handle);
		if (err && err != -ENOENT)
			goto out;
	}

	if (!rw) {
		fresh = true;
		err = tc_put(h->ifindex, h->dir, RW_TC_HANDLE, prog_fd);
	} else if (rw == &l->f[0]) {
		if (rw->prog_id != prog_id)
			err = tc_put(h->ifindex, h->dir, rw->handle, prog_fd);
	} else {
		/* Someone's filter runs before runwall's. A new filter at prio 1 goes to the
		 * head of the list, so add runwall's again under its other handle, then delete
		 * the old one: runwall stays on the hook throughout.
		 */
		handle = rw->handle == RW_TC_HANDLE ? RW_TC_HANDLE_ALT : RW_TC_HANDLE;
		err = tc_put(h->ifindex, h->dir, handle, prog_fd);
		if (!err)
			err = tc_del(h->ifindex, h->dir, rw->handle);
	}
	if (err)
		goto out;

	/* From tcx to tc: the filter is in place, runwall's link can go. */
	if (h->pin[PIN_TCX][0]) {
		err = tcx_pin_drop(h->pin[PIN_TCX]);
		if (err == -ENOENT)
			err = 0;
	}
out:
	if (err && fresh && h->pin[PIN_TC][0])
		unlink(h->pin[PIN_TC]);
	free(l);
	return err;
}

/* --- API ----------------------------------------------------------------------------------- */

static bool dir_valid(enum rw_dir dir)
{
	return dir == RW_DIR_EGRESS || dir == RW_DIR_INGRESS;
}

const char *rw_attach_strerror(int err)
{
	if (err == -EBUSY)
		return "its qdisc is not clsact (a plain ingress?), which tc mode needs for the "
		       "egress hook";
	return strerror(-err);
}

int rw_attach(const char *pin_dir, int ifindex, enum rw_dir dir, int prog_fd,
	      enum rw_attach_mode mode, enum rw_attach_mode *used)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	bool automatic = mode == RW_ATTACH_AUTO;
	struct hook *h = NULL;
	int err;

	if (!pin_dir || ifindex <= 0 || !dir_valid(dir) || prog_fd < 0 ||
	    (mode != RW_ATTACH_AUTO && mode != RW_ATTACH_TCX && mode != RW_ATTACH_TC)) {
		err = -EINVAL;
		goto out;
	}
	err = bpf_obj_get_info_by_fd(prog_fd, &info, &len);
	if (err)
		goto out;
	err = hook_new(pin_dir, ifindex, dir, &h);
	if (err)
		goto out;
	err = mkdir_ok(pin_dir);
	if (!err)
		err = mkdir_ok(h->links);
	if (err)
		goto out;

	if (automatic)
		mode = tcx_supported(ifindex) ? RW_ATTACH_TCX : RW_ATTACH_TC;
	err = hook_find(h, mode == RW_ATTACH_TCX ? PIN_TCX : PIN_TC, true);
	if (err)
		goto out;
	if (mode == RW_ATTACH_TCX) {
		err = attach_tcx(h, prog_fd, info.id);
		if (automatic && (err == -EOPNOTSUPP || err == -ENOTSUPP)) {
			mode = RW_ATTACH_TC;
			err = attach_tc(h, prog_fd, info.id);
		}
	} else {
		err = attach_tc(h, prog_fd, info.id);
	}
	if (!err && used)
		*used = mode;
out:
	free(h);
	return err;
}

int rw_detach(const char *pin_dir, int ifindex, enum rw_dir dir)
{
	struct hook *h = NULL;
	bool found = false;
	int err, err2;

	if (!pin_dir || ifindex <= 0 || !dir_valid(dir)) {
		err = -EINVAL;
		goto out;
	}
	/* A gone interface is fine: its pins and markers are still runwall's to remove. */
	err = hook_new(pin_dir, ifindex, dir, &h);
	if (err && err != -ENODEV)
		goto out;
	err = hook_find(h, -1, false);
	if (err)
		goto out;

	if (h->pin[PIN_TCX][0]) {
		err2 = tcx_pin_drop(h->pin[PIN_TCX]);
		if (!err2)
			found = true;
		else if (err2 != -ENOENT && !err)
			err = err2;
	}
	err2 = tc_remove_filters(ifindex, dir);
	if (!err2)
		found = true;
	else if (err2 != -ENOENT && !err)
		err = err2;
	if (h->pin[PIN_TC][0]) {
		if (!unlink(h->pin[PIN_TC]))
			found = true;
		else if (errno != ENOENT && !err)
			err = -errno;
	}
	if (!err && !found)
		err = -ENOENT;
out:
	free(h);
	return err;
}

int rw_detach_all(const char *pin_dir)
{
	char links[PATH_MAX], path[PATH_MAX], ifname[IF_NAMESIZE];
	struct dirent *de;
	struct pin_id id;
	const char *name;
	DIR *d = NULL;
	int err, err2;

	if (!pin_dir) {
		err = -EINVAL;
		goto out;
	}
	err = path_join(links, sizeof(links), pin_dir, "", RW_LINKS_DIR);
	if (err)
		goto out;
	d = opendir(links);
	if (!d) {
		err = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	while ((de = readdir(d))) {
		name = de->d_name;
		if (!strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)))
			name += strlen(TMP_PREFIX);
		if (!pin_parse(name, &id))
			continue;
		err2 = path_join(path, sizeof(path), links, "", de->d_name);
		if (!err2 && id.kind == PIN_TCX) {
			err2 = tcx_pin_drop(path);
		} else if (!err2) {
			/* Only where the ifindex is still the interface the marker names: a
			 * runwall filter on another interface has a marker of its own.
			 */
			if (if_indextoname(id.ifindex, ifname) &&
			    !strcmp(ifname_for_pin(ifname), id.ifname)) {
				err2 = tc_remove_filters(id.ifindex, id.dir);
				if (err2 == -ENOENT)
					err2 = 0;
			}
			if (unlink(path) && errno != ENOENT && !err2)
				err2 = -errno;
		}
		if (err2 && err2 != -ENOENT && !err)
			err = err2;
	}
	rmdir(links); /* only when empty; pins that are not runwall's stay */
out:
	if (d)
		closedir(d);
	return err;
}

int rw_hook_query(int ifindex, enum rw_dir dir, struct rw_hook_info *out)
{
	__u32 ids[RW_HOOK_MAX_PROGS], cnt = ARRAY_SIZE(ids), i, rw_tcx = 0, rw_tc = 0, want;
	char ifname[IF_NAMESIZE];
	struct rw_hook_prog *p;
	struct tc_list *l = NULL;
	int err;

	if (ifindex <= 0 || !dir_valid(dir) || !out) {
		err = -EINVAL;
		goto out;
	}
	want = out->prog_id;
	memset(out, 0, sizeof(*out));
	if (!if_indextoname(ifindex, ifname)) {
		err = -ENODEV;
		goto out;
	}
	l = malloc(sizeof(*l));
	if (!l) {
		err = -ENOMEM;
		goto out;
	}

	err = tcx_list(ifindex, dir, ids, &cnt);
	if (err == -EINVAL) {
		cnt = 0; /* a kernel without tcx */
		err = 0;
	}
	if (err)
		goto out;
	out->n_tcx = cnt;
	for (i = 0; i < cnt && i < ARRAY_SIZE(ids); i++) {
		p = &out->progs[out->n_progs++];
		p->prog_id = ids[i];
		p->tcx = true;
		p->runwall = want && ids[i] == want;
		if (!p->runwall)
			continue;
		rw_tcx++;
		out->found = true;
		out->mode = RW_ATTACH_TCX;
		out->prog_id = want;
		out->first = i == 0;
	}

	err = tc_list(ifindex, dir, l);
	if (err)
		goto out;
	out->n_tc = l->total;
	for (i = 0; i < l->n; i++) {
		bool is_rw = tc_is_runwall(&l->f[i]);

		if (is_rw && !rw_tc++ && !out->found) {
			out->found = true;
			out->mode = RW_ATTACH_TC;
			out->prog_id = l->f[i].prog_id;
			/* tcx programs run before the clsact qdisc's filters (tcx_run() then
			 * tc_run() in the stack's ingress/egress path).
			 */
			out->first = cnt == 0 && i == 0;
		}
		if (out->n_progs >= RW_HOOK_MAX_PROGS)
			continue;
		p = &out->progs[out->n_progs++];
		p->prog_id = l->f[i].prog_id;
		p->handle = l->f[i].handle;
		p->prio = l->f[i].prio;
		p->runwall = is_rw;
	}
	out->n_other = out->n_tcx + out->n_tc - rw_tcx - rw_tc;
out:
	free(l);
	return err;
}

int rw_hook_query_pinned(const char *pin_dir, int ifindex, enum rw_dir dir,
			 struct rw_hook_info *out)
{
	struct hook *h = NULL;
	int fd = -1, err;
	__u32 prog_id = 0;

	if (!pin_dir || ifindex <= 0 || !dir_valid(dir) || !out) {
		err = -EINVAL;
		goto out;
	}
	err = hook_new(pin_dir, ifindex, dir, &h);
	if (!err)
		err = hook_find(h, PIN_TCX, false);
	if (err)
		goto out;
	if (h->pin[PIN_TCX][0]) {
		fd = bpf_obj_get(h->pin[PIN_TCX]);
		if (fd >= 0 && tcx_link_state(fd, ifindex, dir, &prog_id))
			prog_id = 0;
	}
	out->prog_id = prog_id;
	err = rw_hook_query(ifindex, dir, out);
out:
	if (fd >= 0)
		close(fd);
	free(h);
	return err;
}
