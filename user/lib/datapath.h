/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* datapath.h: the kernel side as user space holds it: the programs and the pinned maps. */
#ifndef RUNWALL_DATAPATH_H
#define RUNWALL_DATAPATH_H

#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <linux/types.h>
#include "runwall.h"

#define RW_DEFAULT_BPFFS "/sys/fs/bpf/runwall"

/* The agent pins its two programs as <pin_dir>/progs/egress and <pin_dir>/progs/ingress (the
 * rw_dir_name()s), so that something else on the node (runwall-cni, at pod creation) can attach
 * exactly the programs the agent enforces with, while the agent is away.
 */
#define RW_PROGS_DIR "progs"

/* The maps of RW_MAPS (runwall.h), as user space indexes them. An X-macro list, then the
 * count: clang-format would indent the count.
 */
/* clang-format off */
enum rw_map_id {
#define X(id, pin, shown) RW_M_##id,
	RW_MAPS(X)
#undef X
	RW_M__COUNT
};
/* clang-format on */

/* The pinned names ("rw_config", ...) and the names `runwall map` shows ("config", ...). */
extern const char *const rw_map_names[RW_M__COUNT];
extern const char *const rw_map_shown_names[RW_M__COUNT];

enum rw_datapath_flags {
	RW_DP_NO_PIN = 1 << 0,	/* private maps, nothing pinned (tests, `explain --policy`) */
	RW_DP_DRY_RUN = 1 << 1, /* judge only: no counters, conntrack or events (explain) */
	/* A dry run that judges one kind of packet loads only the programs that judge it: each
	 * program left out is one the verifier does not check at this load (rw_egress6 alone is
	 * most of the object's verification on 6.1). prog_fd/prog6_fd of one left out: -1, and an
	 * IPv6 packet without rw_egress6/rw_ingress6 would be unsupported-l2.
	 */
	RW_DP_SKIP_EGRESS = 1 << 2,
	RW_DP_SKIP_INGRESS = 1 << 3,
	RW_DP_SKIP_IPV6 = 1 << 4,
	RW_DP_SKIP_ICMP6 = 1 << 5, /* an ICMPv6 packet would be unsupported-protocol */
};

struct runwall_bpf;
struct rw_apply_cache;
struct rw_principal;

struct rw_datapath {
	struct runwall_bpf *skel; /* NULL when only the pinned maps were opened */
	char pin_dir[PATH_MAX];	  /* "" with RW_DP_NO_PIN */
	int map_fd[RW_M__COUNT];
	int prog_fd[RW_DIR_COUNT];  /* [RW_DIR_EGRESS] = rw_egress, -1 when not loaded */
	int prog6_fd[RW_DIR_COUNT]; /* rw_egress6, rw_ingress6 (never attached: rw_progs6) */
	int icmp6_fd[RW_DIR_COUNT]; /* rw_egress_icmp6, ... (never attached: rw_progs_icmp6) */
	int flip_fd;		    /* rw_flip; -1 where no flip can happen (rw_config_flip()) */
	int lease_fd;		    /* rw_lease; -1 where no flip can happen either */
	unsigned int flags;
	/* The slots' inner maps and what they hold (apply.c), and how rw_datapath_close() frees
	 * them: set by rw_apply_prepare(), as libbpf's bpf_map__set_priv() takes a clear_priv.
	 */
	struct rw_apply_cache *apply;
	void (*apply_free)(struct rw_apply_cache *c);
	/* The containers rw_apply() admits to rules that name them ("from", principals.h): the
	 * caller's, kept current by it; none: such rules admit no container.
	 */
	const struct rw_principal *principals;
	size_t n_principals;
	/* Per run index, the last revision whose apply could refuse one of its flows that the
	 * revision before allowed (apply_revs.c; UINT64_MAX: not known). Written by the apply,
	 * read by the probes' thread (revoke_probe.c): each word whole, with atomic accesses.
	 */
	__u64 *cut_revs;
};

/* Load the programs; with a pin dir, reuse the maps pinned there (after checking their layout
 * version) or create and pin them. Fresh maps get the default config (not ready).
 * Like every library function: 0 or a negative errno, and on error a sentence saying what and
 * where in err (may be NULL); it prints nothing (libbpf's own messages go to the log).
 */
int rw_datapath_load(struct rw_datapath *dp, const char *pin_dir, unsigned int flags, char *err,
		     size_t errlen);

/* The same, with the endpoints map (the sandbox veths the node can bind) made with room for
 * max_endpoints veths instead of RW_MAX_ENDPOINTS (0 or more: the default). Only a fresh map
 * takes it: pinned endpoints keep the size they were made with, whatever max_endpoints says.
 */
int rw_datapath_load_sized(struct rw_datapath *dp, const char *pin_dir, unsigned int flags,
			   __u32 max_endpoints, char *err, size_t errlen);

/* Open the pinned maps only (the CLI, with or without a running agent). */
int rw_datapath_open_pinned(struct rw_datapath *dp, const char *pin_dir, char *err, size_t errlen);

/* After rw_datapath_open_pinned(): open the pinned programs too (prog_fd[] set, closed by
 * rw_datapath_close()). -ENOENT when one is not pinned (an agent that never ran here, or one
 * from before programs were pinned).
 */
int rw_datapath_open_pinned_progs(struct rw_datapath *dp, char *err, size_t errlen);

/* Pin the loaded programs under <pin_dir>/progs, replacing what is there atomically (a
 * temporary pin renamed over the old one): the agent calls it after every load.
 */
int rw_datapath_pin_progs(const struct rw_datapath *dp);

void rw_datapath_close(struct rw_datapath *dp);

/* The layout version recorded in pin_dir's config: 0 when nothing is pinned there, a negative
 * errno when it cannot be read.
 */
int rw_datapath_pinned_layout(const char *pin_dir);

/* Remove every map pin under pin_dir (links are removed by rw_detach_all()). */
int rw_datapath_unpin(const char *pin_dir);

int rw_config_read(const struct rw_datapath *dp, struct rw_config *cfg);

/* Write every field of cfg but the state word and the lease (deadline and lease_seconds), which
 * keep the values in force: the copy rewrites their bytes with the values they hold (re-read
 * here), so a packet reading a word during the copy sees it whole. Only rw_config_flip() and
 * rw_config_flip_leased() change the state word; only they and rw_lease_write() the lease.
 */
int rw_config_write(const struct rw_datapath *dp, const struct rw_config *cfg);

/* Store `next` as the state word with one atomic 64-bit store (the rw_flip program), provided
 * the word is still `expect`, and note the time in applied_ns. 0; -ESTALE when the word was
 * something else (nothing stored); -ENOTSUP when dp has no flip program (loaded as a dry run
 * over the pins, or only the pins opened: the CLI and runwall-cni never flip).
 */
int rw_config_flip(const struct rw_datapath *dp, __u64 expect, __u64 next, char *err,
		   size_t errlen);

/* An apply's flip: as rw_config_flip(), and in the same run of rw_flip, before the state word,
 * the lease of the snapshot flipped to: rw_config.lease_seconds and the deadline now +
 * lease_seconds by the kernel's clock, or none (0). Both or neither: on any error nothing is
 * stored, the lease in force stays with the policy in force.
 */
int rw_config_flip_leased(const struct rw_datapath *dp, __u64 expect, __u64 next,
			  __u32 lease_seconds, char *err, size_t errlen);

/* Store the lease deadline (CLOCK_MONOTONIC ns; 0: no lease) with one atomic 64-bit exchange
 * (the rw_lease program; for renewals: an apply's lease comes with its flip): from then on
 * packets are judged by the lease-expired policy once the clock passes it. -ENOTSUP where dp
 * has no rw_lease (as rw_config_flip()).
 */
int rw_lease_write(const struct rw_datapath *dp, __u64 deadline_ns, char *err, size_t errlen);

/* A message of the control plane: the deadline moves to now + rw_config.lease_seconds, the
 * lease of the snapshot in force as the kernel holds it (so an agent that restarted renews it
 * without the snapshot's text); 0 and nothing written without a lease.
 */
int rw_lease_renew(const struct rw_datapath *dp, char *err, size_t errlen);

/* The lease as packets see it now: RW_LEASE_NONE (no deadline), RW_LEASE_IN_FORCE or
 * RW_LEASE_EXPIRED, judged by the coarse clock the programs read. *remaining_ns (may be NULL):
 * until the deadline, negative once it is behind.
 */
enum rw_lease_state { RW_LEASE_NONE = 0, RW_LEASE_IN_FORCE = 1, RW_LEASE_EXPIRED = 2 };
enum rw_lease_state rw_lease_state(const struct rw_config *cfg, int64_t *remaining_ns);

/* Bind a host-side veth to the pod routed through it, or unbind it. This is the one call that
 * makes a veth a sandbox for the datapath (the agent and runwall-cni both use it). It binds what
 * want->flags says (RW_EP_IP4 pod_ip, RW_EP_IP6 pod_ip6, RW_EP_GW6 gw_ip6; the fields of a clear
 * flag are stored as zeros), at least one address; -EINVAL for none. Each bound family gets its
 * own conntrack table (rw_conntrack for IPv4, rw_conntrack6 for IPv6), made before the binding
 * itself, of rw_config.ct_per_sandbox entries each; rw_config.ct_node counts every table of the
 * node, so a dual-stack veth takes twice the room of a single-stack one (-ENOSPC when the
 * node's tables would exceed it). The same pod bound again (every address it had, unchanged;
 * a family added or the gateway changed) keeps its flows, and a table it lost is made again; a
 * changed pod (either address changed or dropped) is unbound first and gets fresh, empty tables:
 * nothing of the old pod carries over to the new one (its flows, its NDP link-local in rw_ll6).
 * Unbinding deletes the binding, both tables, the event budget and the link-local. A veth that is bound to nothing is deny-all, and a family it has no
 * address of is deny-all for that family.
 */
int rw_endpoint_bind_addrs(const struct rw_datapath *dp, __u32 ifindex,
			   const struct rw_endpoint *want);
/* The IPv4-only form: rw_endpoint_bind_addrs() of {pod_ip, RW_EP_IP4}. */
int rw_endpoint_bind(const struct rw_datapath *dp, __u32 ifindex, __be32 pod_ip);
int rw_endpoint_unbind(const struct rw_datapath *dp, __u32 ifindex);

/* A veth's event budget (struct rw_budget): a bound veth's is at its veth index
 * (rw_veth_budget), any other's in rw_event_budget. 0 or -errno (-ENOENT: no bucket yet, a full
 * one). Setting a bucket of zeros fills it.
 */
int rw_budget_get(const struct rw_datapath *dp, __u32 ifindex, struct rw_budget *out);
int rw_budget_set(const struct rw_datapath *dp, __u32 ifindex, const struct rw_budget *b);

/* A veth's binding (zeroed first): 0, -ENOENT when it is bound to nothing, or a negative errno. */
int rw_endpoint_get(const struct rw_datapath *dp, __u32 ifindex, struct rw_endpoint *out);

/* Forget the flows of one veth (ifindex != 0) or of the veths bound to one pod IPv4 address
 * (pod_ip != 0) by replacing their tables, both families', with empty ones: no walk of the
 * flows. Returns the number of tables replaced or a negative errno.
 */
int rw_conntrack_flush(const struct rw_datapath *dp, __u32 ifindex, __be32 pod_ip);

/* fd of a veth's IPv4 (IPv6) conntrack table (to close), or a negative errno (-ENOENT: it has
 * none).
 */
int rw_conntrack_table_fd(const struct rw_datapath *dp, __u32 ifindex);
int rw_conntrack6_table_fd(const struct rw_datapath *dp, __u32 ifindex);

/* One veth's conntrack table (fd) read a batch at a time: fn is called
 * for each batch of n keys (struct rw_ct_key or rw_ct6_key, their size apart) and values, and may
 * delete or rewrite them (a hash map's batch ends at a bucket's end, so the rest of the walk
 * is not disturbed). 0 when walked; a negative errno when not even a first batch could be read
 * (EINVAL: the kernel has no batch lookup for it): the caller walks it key by key.
 */
#define RW_CT_BATCH 256
typedef void (*rw_ct_batch_fn)(void *ctx, const __u8 *keys, struct rw_ct_value *vals, __u32 n);
int rw_conntrack_batches(int fd, rw_ct_batch_fn fn, void *ctx);

/* Forget flows idle for more than an hour (TCP) or three minutes (UDP), walking the tables of
 * both families round-robin from *cursor (opaque; 0 starts over) and stopping after about
 * `budget` entries, so that one call never holds its caller long. A flow is idle from the first
 * pass that finds it inactive (packets mark it active; each pass clears the mark and notes the
 * time). now_ns is CLOCK_MONOTONIC. Returns the number of flows forgotten.
 */
int rw_conntrack_expire(const struct rw_datapath *dp, __u64 now_ns, __u32 *cursor,
			unsigned int budget);

/* Sum a per-CPU counters entry over all CPUs. */
int rw_counters_read(const struct rw_datapath *dp, __u32 idx, struct rw_counters *sum);
int rw_counters_zero(const struct rw_datapath *dp, __u32 idx);

#endif /* RUNWALL_DATAPATH_H */
