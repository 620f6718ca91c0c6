/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* status.h: the status JSON, built once. rw_status_node() builds the node's document, the one
 * `runwall status` prints (with or without an agent) and the agent's /api/status serves; the
 * agent's `status` reply on the control socket is only the agent's part of it (what the kernel
 * does not hold), which rw_status_node() merges in. A run, a sandbox and a hook are built by the
 * functions below, so they look the same with the agent and without (docs/cli/status.md).
 *
 * Each returns a new reference, or NULL when out of memory.
 */
#ifndef RUNWALL_STATUS_H
#define RUNWALL_STATUS_H

#include <stddef.h>
#include <jansson.h>
#include <linux/types.h>

#include "datapath.h"
#include "runwall.h"

/* {"attached":B, "mode":"tcx"|"tc"|"none", "first":B, "others":N}: who is on the hook of `dir`
 * of ifindex, runwall's program taken from the link pinned under pin_dir; {"attached":false}
 * when the hook cannot be queried.
 */
json_t *rw_status_hook(const char *pin_dir, int ifindex, enum rw_dir dir);

/* {"ifname", "ifindex", "pod" (its IPv4, null when none is bound), "pod6" (its IPv6, null when
 * none), "gateway6" (the host veth's link-local the binding holds, null when none), "run" (null
 * when none), "hooks":{"egress", "ingress"}}. ep NULL: unbound.
 */
json_t *rw_status_sandbox(const char *pin_dir, const char *ifname, int ifindex,
			  const struct rw_endpoint *ep, const char *run);

/* {"id", "idx", "gen", "since" (null when unknown), "egress":"allowlist"|"open", "pods":[IP]}:
 * the IPv4 pods, then the IPv6 ones (pods6, n_pods6; NULL, 0 for none).
 */
/* The control plane's lease as the kernel judges it (rw_lease_state()): {"seconds", "expired",
 * "deadline" (UTC), "remaining_ms" (negative once expired)}, or null without one.
 */
json_t *rw_status_lease(const struct rw_config *cfg, int64_t mono_to_real);

json_t *rw_status_run(const char *id, __u32 idx, __u32 gen, const char *since, int egress,
		      const __be32 *pods, size_t n_pods, const __be32 (*pods6)[4], size_t n_pods6);

/* The node's status: {"ok", "ready", "revision", "ready_since", "applied", "bpffs", "agent",
 * "runs", "sandboxes", "maps", "events", "lease", "limits"} from the maps pinned at bpffs (dp) and, when
 * the agent answered, its part `agent` (its `status` reply, borrowed; NULL without one,
 * agent_err saying why): the agent's settings and counters, when the node became ready, each
 * run's since, the veths it knows with their failed attaches and waiting pods. NULL with err
 * when the maps cannot be read.
 */
json_t *rw_status_node(const struct rw_datapath *dp, const char *bpffs, const char *socket,
		       json_t *agent, int agent_err, char *err, size_t errlen);

/* How /api/status writes the document: as `runwall -j` does (rw_cli_json_print()), compact,
 * reals to 9 significant digits.
 */
#define RW_STATUS_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

#endif /* RUNWALL_STATUS_H */
