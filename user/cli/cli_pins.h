/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_pins.h: the kernel's state read only: the pinned maps opened with a clear error, the map a name
 * shows under, the veth of a pod; and the snapshot in force, from the agent, for naming rules.
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return, so that every function here can be unit tested on its own (tests/unit/test_cli.c).
 * Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_CLI_PINS_H
#define RUNWALL_CLI_PINS_H

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

/* Open the maps pinned at bpffs, read only in spirit (nothing is created). -ENOENT: nothing is
 * pinned there (the commands exit 2); other errors: they are there but unusable. `err` says
 * what, for people.
 */
int rw_cli_open(struct rw_datapath *dp, const char *bpffs, char *err, size_t errlen);

/* The map `runwall map` shows `id` under: the first of RW_MAPS with its shown name
 * (RW_M_ALLOW_EXACT for both allow maps).
 */
enum rw_map_id rw_cli_map_of(enum rw_map_id id);

/* The veth a pod address (either family) is bound to in rw_endpoints (-ENOENT: none). */
int rw_cli_pod_ifindex_of(const struct rw_datapath *dp, const struct rw_ip *pod, __u32 *ifindex);

/* The snapshot in force, for naming rules: the agent's (the `policy` request on `socket`), else
 * the policy file its status names when that is still the revision in force. -ENOENT when there
 * is none to use.
 */
int rw_cli_agent_policy(const char *socket, json_t *status, __u64 live_revision,
			struct rw_policy *out);

#endif /* RUNWALL_CLI_PINS_H */
