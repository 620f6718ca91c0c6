/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* attach.h: putting one runwall SCHED_CLS program on one hook of one interface, idempotently,
 * first in line, and taking away only what runwall put there.
 *
 * Hooks. runwall's RW_DIR_EGRESS program (pod -> world) sits on the TC *ingress* hook of the
 * host-side veth, its RW_DIR_INGRESS program on the TC *egress* hook. Every function here takes
 * an enum rw_dir and maps it, so callers never name a TC hook themselves.
 *
 * Two ways to attach:
 *  - tcx (Linux 6.6+): a BPF link made with BPF_F_BEFORE and no relative program, i.e. at the
 *    head of the hook's program list. The link is pinned as
 *        <pin_dir>/links/tcx_<ifindex>_<egress|ingress>_<ifname>
 *    so that a restarted agent finds and reuses it (the ifname is there for people; the lookup
 *    key is ifindex + dir, and a pin whose interface was renamed is renamed with it).
 *  - tc (older kernels, or forced): a direct-action cls_bpf filter on the clsact qdisc, priority
 *    RW_TC_PRIO, handle RW_TC_HANDLE (or RW_TC_HANDLE_ALT, see below). A tc filter cannot be
 *    pinned, so runwall leaves a marker, a symlink in bpffs,
 *        <pin_dir>/links/tc_<ifindex>_<egress|ingress>_<ifname>
 *    that lets rw_detach_all() find the interfaces it must clean.
 * bpffs refuses names with a '.' (reserved by the kernel), so a '.' in an ifname ("eth0.100")
 * is written '-' in these names. Names in links/ that start with "tmp_" are runwall's
 * temporary pins (see attach.c); anything else whose name does not parse is left alone.
 *
 * Every function returns 0 or a negative errno and does not log: callers log. None of them is
 * safe to call concurrently for the same (ifindex, dir); different hooks are independent.
 * libbpf itself prints kernel extack messages for failed netlink requests ("Kernel error
 * message: ...") through its print callback; set libbpf_set_print() to route or mute them.
 */
#ifndef RUNWALL_ATTACH_H
#define RUNWALL_ATTACH_H

#include <stdbool.h>
#include <linux/types.h>
#include "runwall.h"

enum rw_attach_mode {
	RW_ATTACH_AUTO, /* tcx when the kernel has it, tc otherwise */
	RW_ATTACH_TCX,
	RW_ATTACH_TC,
};

/* The tc fallback's filter: priority 1 is the lowest the kernel accepts from user space (0 asks
 * it to pick one), so no filter of another prio runs before it. Within one priority cls_bpf
 * runs filters newest first, so to get back in front of a filter added later at prio 1 runwall
 * adds itself again under the other handle and then deletes the old one: a runwall filter is
 * either handle, never both for longer than that swap. Handles 1, 2, ... are what other tools
 * use (the AWS network policy agent uses handle 1 prio 1), hence "RW" in the upper half.
 */
#define RW_TC_PRIO	 1
#define RW_TC_HANDLE	 0x52570001
#define RW_TC_HANDLE_ALT 0x52570002

#define RW_LINKS_DIR "links"

/* Attach prog_fd (a BPF_PROG_TYPE_SCHED_CLS program) for `dir` on ifindex (in the caller's
 * network namespace) and make it the first program on the hook:
 *  - nothing of runwall's there: attach;
 *  - runwall's link/filter there with another program: swap the program atomically
 *    (bpf_link_update() / tc filter replace), never detach first;
 *  - the same program there and first: nothing changes;
 *  - runwall there but no longer first: move it to the front (see attach.c for how);
 *  - attached in the other mode: attach in the requested one, then take the old one away.
 * Creates <pin_dir> and <pin_dir>/links (in a bpffs mount) when missing. `used` (may be NULL)
 * receives RW_ATTACH_TCX or RW_ATTACH_TC. AUTO picks tcx when the kernel knows the tcx attach
 * types and falls back to tc when it does not or when the tcx attach says -EOPNOTSUPP.
 * Returns -ENODEV when ifindex names no interface, -EEXIST (tcx) when prog_fd is already on
 * the hook through something that is not runwall's pinned link (the kernel takes a program
 * once per hook).
 */
int rw_attach(const char *pin_dir, int ifindex, enum rw_dir dir, int prog_fd,
	      enum rw_attach_mode mode, enum rw_attach_mode *used);

/* rw_attach()'s errors for people: strerror(), except -EBUSY from tc, which rw_attach() returns
 * when the interface's qdisc at the ingress handle is not clsact (a plain `ingress` qdisc has
 * no egress hook; a filter meant for it would land on the ingress hook).
 */
const char *rw_attach_strerror(int err);

/* Take runwall's program off one hook: its pinned tcx link (detached, pin removed) and/or its
 * tc filter(s) (runwall's handles at RW_TC_PRIO only; the clsact qdisc and everyone else's
 * filters stay) and the marker. -ENOENT when runwall had nothing there.
 */
int rw_detach(const char *pin_dir, int ifindex, enum rw_dir dir);

/* Take away every link pinned under <pin_dir>/links and runwall's tc filters on the interfaces
 * the markers there name (when that ifindex still has the name the marker records), then the
 * pins and markers themselves and links/ if it is empty. Nothing else: not pin_dir, not other
 * pins, not other programs. 0 when links/ does not exist; the first error otherwise, after
 * trying everything.
 */
int rw_detach_all(const char *pin_dir);

/* One program on a hook, in the order the kernel runs them: tcx programs first (they run
 * before the clsact qdisc's filters on a 6.6+ kernel), then the tc filters of chain 0.
 */
struct rw_hook_prog {
	__u32 prog_id; /* 0 for a tc filter that is not cls_bpf */
	__u32 handle;  /* tc filter handle; 0 for tcx */
	__u16 prio;    /* tc filter priority; 0 for tcx */
	bool tcx;
	bool runwall;
};

#define RW_HOOK_MAX_PROGS 128

struct rw_hook_info {
	/* In: the id of runwall's program, which is how a tcx program is recognised as
	 * runwall's (0: unknown, then only runwall's tc filter, known by its handle, can be
	 * found; rw_hook_query_pinned() takes it from the pinned link).
	 * Out: the id of runwall's program on the hook, 0 if none.
	 */
	__u32 prog_id;
	bool found;		  /* runwall's program is on the hook */
	enum rw_attach_mode mode; /* RW_ATTACH_TCX or RW_ATTACH_TC when found */
	bool first;		  /* runwall runs before every other program on the hook */
	__u32 n_other;		  /* other programs on the hook: tcx programs + tc filters */
	__u32 n_tcx;		  /* tcx programs on the hook (runwall's included) */
	__u32 n_tc;		  /* tc filters on the hook (runwall's included) */
	__u32 n_progs;		  /* entries in progs[]: min(n_tcx + n_tc, max) */
	struct rw_hook_prog progs[RW_HOOK_MAX_PROGS];
};

/* Who is on the hook for `dir` of ifindex, in order. Set out->prog_id before the call (see
 * above); the rest of *out is overwritten. tcx is looked at only when the kernel has it.
 * An agent's resync: query with its prog id and call rw_attach() unless found && first &&
 * prog_id matches (rw_attach() does the same checks itself and changes nothing when all is
 * well, so calling it unconditionally is fine too).
 */
int rw_hook_query(int ifindex, enum rw_dir dir, struct rw_hook_info *out);

/* rw_hook_query() with runwall's tcx program taken from the link pinned under pin_dir for
 * (ifindex, dir), when there is a live one: what `runwall status` prints
 * ("eni1a2b3c tcx first").
 */
int rw_hook_query_pinned(const char *pin_dir, int ifindex, enum rw_dir dir,
			 struct rw_hook_info *out);

/* One of runwall's entries in <pin_dir>/links, as its name ("tcx_12_egress_eni1a2b") says. */
struct rw_link_pin {
	int ifindex;
	enum rw_dir dir;
	enum rw_attach_mode mode; /* RW_ATTACH_TCX: a pinned link; RW_ATTACH_TC: a marker */
	char ifname[16];	  /* IF_NAMESIZE; a '.' of the interface's name is a '-' */
	const char *name;	  /* the entry's file name, valid during the callback */
};

/* The one parser of those names: true when `name` is one of runwall's (not a "tmp_" one). */
bool rw_link_pin_parse(const char *name, struct rw_link_pin *out);

/* Call fn for each of runwall's entries in <pin_dir>/links (others are skipped); stops at and
 * returns fn's first non-zero return. 0 when links/ does not exist.
 */
int rw_link_pins(const char *pin_dir, int (*fn)(const struct rw_link_pin *pin, void *data),
		 void *data);

/* "auto", "tcx", "tc" ("?" for anything else). */
const char *rw_attach_mode_str(enum rw_attach_mode mode);

#endif /* RUNWALL_ATTACH_H */
