/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_private.h: the production programs loaded privately with rw_dry_run set, and a crafted
 * packet judged by them through BPF_PROG_TEST_RUN: on the pinned maps (the policy in force), or
 * on private maps filled from a snapshot (nothing pinned, nothing attached, nothing live
 * changes). `runwall explain` judges one packet this way, `runwall replay` many.
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return. Functions return 0 or a negative errno, with `err` saying what for people.
 */
#ifndef RUNWALL_CLI_PRIVATE_H
#define RUNWALL_CLI_PRIVATE_H

#include <stddef.h>
#include <linux/types.h>

#include "cli_probe.h"
#include "datapath.h"
#include "ipaddr.h"
#include "policy.h"

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

#endif /* RUNWALL_CLI_PRIVATE_H */
