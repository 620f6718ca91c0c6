/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* ctx.h: struct rw_ctx, what is known about a packet by the time it is judged, handed to every
 * step of a program. The program's globals reach the steps through it (dry_run, explain), so
 * that no header defines a global or names one of runwall.bpf.c's.
 *
 * API
 *   offers: (no functions) struct rw_ctx
 *   needs:  runwall.h, parse.h
 */
#ifndef RUNWALL_BPF_CTX_H
#define RUNWALL_BPF_CTX_H
#include <linux/types.h>
#include <linux/bpf.h>

#include "runwall.h"
#include "parse.h"

struct rw_ctx {
	struct __sk_buff *skb;
	__u32 ifindex; /* skb->ifindex, read once: clang would keep &skb->ifindex, a modified ctx
			* pointer the verifier refuses to dereference */
	struct rw_pkt pkt;
	const struct rw_pod *pod; /* NULL while the source is unknown */
	__u64 revision;
	__u32 rule_id;
	__u8 dir;
	__u8 path;
	__u8 new_flow;	    /* report an allowed packet: it made a new conntrack entry */
	__u8 ct_path;	    /* the path to cache in ct, as seen from the opening side */
	__u8 identified;    /* rw_identify() proved the source: a refusal may be answered */
	__u8 runless;	    /* the source is the veth's own pod, but no run of the snapshot
				 * names it: only a revoke may answer (revoke.h) */
	__u8 node_refusal;  /* with runless: rw_config.refusal */
	__u8 lease_expired; /* the control plane's lease ran out (rw_state_load) */
	__u8 slot;	    /* the live slot of the state word (rw_begin) */
	const struct rw_endpoint *ep; /* the veth's binding, NULL: not bound (veth.h) */
	__u32 veth_idx;		      /* with ep: the veth's index (rw_veth_slots) */
	__u8 bound;		      /* ep is set */
	struct rw_ct_value *ct;	      /* the flow's entry, stamped when the packet is allowed */
	/* &rw_dry_run (runwall.bpf.c). Set: judge, but change no state. Each read is a load from
	 * .rodata, which libbpf freezes at load: the verifier reads the value itself and never walks
	 * the other mode's branches, in either copy of the programs (a copy of the byte kept on
	 * the stack loses that in the dry-run copy, and prunes worse in the production one).
	 */
	const volatile __u8 *dry_run;
	struct rw_explain *explain; /* where a dry run leaves its verdict (rw_explain_result) */
};

#endif /* RUNWALL_BPF_CTX_H */
