/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* status.h: the status JSON's parts, built once: the agent's `status` reply on the control socket
 * and `runwall status` (with or without an agent) use the same builders, so a run, a sandbox and
 * a hook look the same wherever they come from (docs/cli/status.md).
 *
 * Each returns a new reference, or NULL when out of memory.
 */
#ifndef RUNWALL_STATUS_H
#define RUNWALL_STATUS_H

#include <stddef.h>
#include <jansson.h>
#include <linux/types.h>

#include "runwall.h"

/* {"attached":B, "mode":"tcx"|"tc"|"none", "first":B, "others":N}: who is on the hook of `dir`
 * of ifindex, runwall's program taken from the link pinned under pin_dir; {"attached":false}
 * when the hook cannot be queried.
 */
json_t *rw_status_hook(const char *pin_dir, int ifindex, enum rw_dir dir);

/* {"ifname", "ifindex", "pod" (null when unbound), "run" (null when none), "hooks":{"egress",
 * "ingress"}}.
 */
json_t *rw_status_sandbox(const char *pin_dir, const char *ifname, int ifindex, __be32 pod,
			  const char *run);

/* {"id", "idx", "gen", "since" (null when unknown), "egress":"allowlist"|"open", "pods":[IP]}. */
json_t *rw_status_run(const char *id, __u32 idx, __u32 gen, const char *since, int egress,
		      const __be32 *pods, size_t n_pods);

#endif /* RUNWALL_STATUS_H */
