/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_probe.h: `runwall explain`'s probe: the crafted packet the programs judge, and the verdict as a
 * line and as JSON.
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return, so that every function here can be unit tested on its own (tests/unit/test_cli.c).
 * Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_CLI_PROBE_H
#define RUNWALL_CLI_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <linux/types.h>

#include "runwall.h"
#include "datapath.h"
#include "ipaddr.h"
#include "liveruns.h"
#include "mapfill.h"
#include "parse.h"
#include "policy.h"

#include "dryrun.h"

/* After a judgement whose rule has a "from", or refused wrong-principal: say whom the datapath
 * judged the packet as. BPF_PROG_TEST_RUN gives the packet a socket of its own (uid 0, made in
 * this command's cgroup), not a sandbox's.
 */
void rw_cli_judge_principal(struct rw_cli_verdict *v);

/* "egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp", "egress [2600::7]:40000 -> [2a00::1]:443 tcp",
 * "egress 2600::7 -> 2a00::1 icmpv6 type 128"
 */
void rw_cli_probe_str(const struct rw_cli_probe *p, char *buf, size_t len);

/* "allowed via rule services[0] egress-proxy", "allowed via open", "refused: dns",
 * "refused: not-allowlisted, answered with rst"
 */
void rw_cli_verdict_str(const struct rw_cli_verdict *v, char *buf, size_t len);

/* "run run-7f3a gen 12, revision 12" or "no run, revision 12" */
void rw_cli_verdict_context(const struct rw_cli_verdict *v, char *buf, size_t len);

/* The line explain prints. `now` and/or `with` (the verdict under --policy; `with->source`
 * names the file); at least one.
 *   PROBE (CONTEXT): VERDICT
 *   PROBE (CONTEXT): now: VERDICT; with FILE (revision N): VERDICT
 */
void rw_cli_explain_line(const struct rw_cli_probe *p, const struct rw_cli_verdict *now,
			 const struct rw_cli_verdict *with, char *buf, size_t len);

/* {"verdict":"allow","reason":...,"path":...,"answer":...,"rule":...,"rule_id":N,"run":...,"gen":N,
 *  "revision":N,"dir":...,"src":...,"sport":N,"dst":...,"dport":N,"proto":...,"source":...,
 *  "family":"ipv4"|"ipv6"} (ICMPv6: "icmp_type" in place of the ports)
 */
json_t *rw_cli_verdict_json(const struct rw_cli_probe *p, const struct rw_cli_verdict *v);

#endif /* RUNWALL_CLI_PROBE_H */
