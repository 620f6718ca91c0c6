/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* dryrun.h: the production programs loaded privately with rw_dry_run set (RW_DP_NO_PIN |
 * RW_DP_DRY_RUN: nothing pinned, nothing attached, private maps filled from a snapshot), and a
 * crafted packet judged by them through BPF_PROG_TEST_RUN. `runwall explain` and `runwall
 * replay` judge packets this way, and the agent judges its events under a staged snapshot
 * (user/agent/staged.c). The names keep the rw_cli_ prefix of the CLI, where this began.
 *
 * Nothing here uses rw_g or rw_fail(): functions return 0 or a negative errno, with `err`
 * saying what for people.
 */
#ifndef RUNWALL_DRYRUN_H
#define RUNWALL_DRYRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "runwall.h"
#include "datapath.h"
#include "ipaddr.h"
#include "policy.h"

/* A packet to judge, as explain describes it. Addresses in network order, ports host order. */
struct rw_cli_probe {
	__u8 dir; /* enum rw_dir */
	__be32 src, dst;
	__u16 sport, dport; /* IPPROTO_ICMPV6: dport is the type */
	__u8 proto;	    /* IPPROTO_TCP, IPPROTO_UDP, or (IPv6) IPPROTO_ICMPV6 */
	__u8 tcp_flags;
	bool ipv6; /* IPv6: src6 and dst6, not src and dst */
	__be32 src6[4], dst6[4];
};

/* What the program decided, and under which policy. */
struct rw_cli_verdict {
	__u8 verdict; /* enum rw_verdict */
	__u8 reason;
	__u8 path;
	__u8 answer; /* enum rw_answer the refusal gets, its budget aside */
	__u32 rule_id;
	char rule[128];		 /* rw_rule_name() */
	char run[RW_RUN_ID_LEN]; /* "" when the pod belongs to no run */
	__u32 gen;
	__u64 revision;
	const char *source; /* "live" or the policy file */
	/* Whom a rule with a "from" judged the packet as (rw_cli_judge_principal()): "" when none
	 * did.
	 */
	char principal[160];
};

/* A probe between a pod and a peer (one family): egress from the pod to the peer's dport,
 * ingress from the peer to the pod's dport; tcp_flags for TCP only, no source port for ICMPv6.
 */
void rw_cli_probe_make(struct rw_cli_probe *p, __u8 dir, __u8 proto, __u8 tcp_flags, __u16 sport,
		       __u16 dport, const struct rw_ip *pod, const struct rw_ip *peer);

#define RW_CLI_PKT_MAX 128

/* Ethernet + IPv4 (no options) or IPv6 (no extension headers) + TCP (doff 5) or UDP, or an
 * ICMPv6 message of the probe's type, no payload. Returns the length.
 */
size_t rw_cli_build_packet(const struct rw_cli_probe *p, __u8 *buf, size_t len);

/* test_run's device for ctx.ifindex <= 1: the one a private datapath binds its pod to. */
#define RW_CLI_PRIVATE_IFINDEX 1

/* The programs loaded with private maps (RW_DP_NO_PIN | RW_DP_DRY_RUN, and `skip`: the
 * RW_DP_SKIP_* of the programs no packet to judge needs), the layout written and `pol` applied
 * to them. On error dp is closed.
 */
int rw_cli_private_load(struct rw_datapath *dp, const struct rw_policy *pol, unsigned int skip,
			char *err, size_t errlen);

/* Bind `pod` (either family) to RW_CLI_PRIVATE_IFINDEX in a private datapath, in place of the
 * pod bound there before.
 */
int rw_cli_private_bind(const struct rw_datapath *dp, const struct rw_ip *pod);

/* Run the dry-run programs of dp on the probe as if it arrived on ifindex; fill v's verdict,
 * reason, path, answer and rule id from the program's rw_explain_result. -EPROTO when the
 * program left no verdict or one that disagrees with what it returned.
 */
int rw_cli_judge(struct rw_datapath *dp, const struct rw_cli_probe *p, __u32 ifindex,
		 struct rw_cli_verdict *v, char *err, size_t errlen);

/* v's run and generation: the run the program saw last (its counter index), from dp's pods. */
void rw_cli_judged_run(const struct rw_datapath *dp, struct rw_cli_verdict *v);

#endif /* RUNWALL_DRYRUN_H */
