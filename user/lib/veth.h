/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* veth.h: one sandbox veth as a whole: both programs on it, first on their hooks, and its pod
 * bound. What the agent does when a veth appears and what runwall-cni does at pod creation are
 * the same calls, so the two can never disagree on what "protected" means.
 */
#ifndef RUNWALL_VETH_H
#define RUNWALL_VETH_H

#include <stdbool.h>
#include <linux/types.h>
#include "attach.h"
#include "datapath.h"

/* Attach dp->prog_fd[] on both hooks of ifindex (rw_attach(): idempotent, first in line).
 * used[] (may be NULL) gets the mode of each hook, errs[] (may be NULL) the result of each
 * (0 or a negative errno): a failed hook does not stop the other. Returns the first error.
 */
int rw_veth_attach(const struct rw_datapath *dp, int ifindex, enum rw_attach_mode mode,
		   enum rw_attach_mode used[RW_DIR_COUNT], int errs[RW_DIR_COUNT]);

/* Everything a sandbox veth needs before its pod sends a packet: both programs attached and the
 * pod bound, before the call returns (runwall-cni's ADD: the pod runs nothing before the
 * runtime has its result). The two are made side by side, each waiting for the kernel's grace
 * periods; when the attach fails, a veth that was bound to nothing is left so, and the attach's
 * error returned. One call, so that whatever a veth gains later (its own conntrack table) is
 * set up in one place.
 */
int rw_veth_protect(const struct rw_datapath *dp, int ifindex, __be32 pod_ip,
		    enum rw_attach_mode mode, enum rw_attach_mode used[RW_DIR_COUNT],
		    int errs[RW_DIR_COUNT]);
/* The same with the pod's addresses of both families (rw_endpoint_bind_addrs()'s want). */
int rw_veth_protect_addrs(const struct rw_datapath *dp, int ifindex, const struct rw_endpoint *want,
			  enum rw_attach_mode mode, enum rw_attach_mode used[RW_DIR_COUNT],
			  int errs[RW_DIR_COUNT]);

/* A binding for people: "10.1.2.3", "10.1.2.3 and 2600:1f14:abc::7", "2600:1f14:abc::7 (gateway
 * fe80::1)" with show_gw, "nothing" for none. Returns buf (RW_EP_STRLEN bytes or more).
 */
#define RW_EP_STRLEN 128
const char *rw_endpoint_str(const struct rw_endpoint *ep, bool show_gw, char *buf, size_t len);
/* Whether two bindings hold the same addresses (what their flags say; the gateway too). */
bool rw_endpoint_same(const struct rw_endpoint *x, const struct rw_endpoint *y);

/* What a failed rw_endpoint_bind() (or rw_veth_protect()'s binding) means, for an operator: the
 * node's limit that was reached, with its size, or the error itself. The veth stays bound to
 * nothing, so deny-all (its packets are dropped unknown-source), until a binding succeeds.
 *   -E2BIG   "endpoint table full (N)": the node binds at most N sandbox veths
 *   -ENOSPC  "conntrack budget for the node exhausted (...)": --ct-node over --ct-per-sandbox
 * Returns buf.
 */
const char *rw_bind_error_str(const struct rw_datapath *dp, int err, char *buf, size_t len);

/* What a veth looks like to the kernel, for a check (runwall-cni CHECK, status): whether
 * runwall's program (the one pinned under pin_dir) is first on each hook, and the pod bound.
 */
struct rw_veth_state {
	bool first[RW_DIR_COUNT]; /* runwall's program found and first on the hook */
	bool found[RW_DIR_COUNT];
	__be32 pod_ip;		  /* 0: no IPv4 bound */
	struct rw_endpoint ep;	  /* the whole binding; flags 0: not bound */
	bool ct_table, ct_table6; /* the veth has its own IPv4 and IPv6 conntrack tables */
};

int rw_veth_query(const struct rw_datapath *dp, int ifindex, struct rw_veth_state *st);

/* Forget what runwall holds for interfaces that no longer exist in this network namespace:
 * their link pins and markers (rw_detach()) and their bindings (rw_endpoint_unbind()). What
 * runwall-cni DEL and an agent that was away need, since a veth's deletion leaves both behind.
 */
int rw_veth_prune_gone(const struct rw_datapath *dp);

/* The node's veth lock: the agent and every runwall-cni call change a veth's programs and
 * binding only while they hold it, and check the kernel's picture of the veth (its name, its
 * route) after taking it. Between a check and the change it decides, nothing else of runwall's
 * can then act on the same ifindex, even when the veth behind it was deleted and another one
 * created with that ifindex (the plugin before runwall-cni, or the agent's stale events).
 * An flock(2) on the pin folder: the kernel drops it when its holder exits, killed or not.
 * Returns the lock's fd (give it to rw_veth_unlock()), -ETIMEDOUT after timeout_ms, or another
 * negative errno.
 */
int rw_veth_lock(const char *pin_dir, int timeout_ms);
/* The same, calling meanwhile(data) between two tries (every millisecond while another holder
 * has it): the agent applies PolicyWatch's changes there, so a claim does not wait for a
 * runwall-cni that holds the lock and has no CPU. timeout_ms is of the clock, whatever
 * meanwhile takes.
 */
int rw_veth_lock_meanwhile(const char *pin_dir, int timeout_ms, void (*meanwhile)(void *data),
			   void *data);
void rw_veth_unlock(int fd);

/* Whether ifindex is, right now, a veth (its driver, as ethtool -i says) whose name starts with
 * one of prefixes (rw_ifname_match()); its name in name[IF_NAMESIZE] when it exists at all, ""
 * otherwise.
 */
bool rw_veth_is_sandbox(int ifindex, const char *prefixes, char *name);

#endif /* RUNWALL_VETH_H */
