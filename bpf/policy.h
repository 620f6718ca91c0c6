/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* policy.h: the decisions: metadata, special ranges, allow rules, inbound rules. */
#ifndef RUNWALL_BPF_POLICY_H
#define RUNWALL_BPF_POLICY_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "maps.h"

/* The inner maps of the live slot, looked up once per packet. */
struct rw_view {
	__u64 revision;
	__u8 lease_expired; /* the lease-expired policy: services and inbound only */
	void *pods;
	void *allow_exact;
	void *allow_cidr;
	void *deny;
	void *inbound;
};

/* The node's state word (readiness, live slot, revision) and whether the control plane's lease
 * has expired: one lookup, two loads, and a clock read only while a lease is set. The coarse
 * clock (CLOCK_MONOTONIC at the last tick) is a load, not a clocksource read; it lags by at most
 * a jiffy, so a lease expires at most that much late. Each word is read whole: rw_flip and
 * rw_lease store them with one atomic instruction each. Returns 0 when ready.
 */
static __always_inline int rw_state_load(__u64 *state, __u8 *lease_expired)
{
	struct rw_config *cfg;
	__u64 deadline;
	__u32 zero = 0;

	*lease_expired = 0;
	cfg = bpf_map_lookup_elem(&rw_config, &zero);
	if (!cfg)
		return -1;
	*state = *(volatile __u64 *)&cfg->state;
	deadline = *(volatile __u64 *)&cfg->lease_deadline_ns;
	if (deadline && bpf_ktime_get_coarse_ns() >= deadline)
		*lease_expired = 1;
	return RW_STATE_READY(*state) ? 0 : -1;
}

/* Every inner map of the live slot of `state`, or -1 when a slot is empty (not ready). */
static __always_inline int rw_view_load(struct rw_view *v, __u64 state)
{
	__u32 slot = RW_STATE_SLOT(state);

	v->revision = RW_STATE_REVISION(state);
	v->pods = bpf_map_lookup_elem(&rw_pods, &slot);
	v->allow_exact = bpf_map_lookup_elem(&rw_allow_exact, &slot);
	v->allow_cidr = bpf_map_lookup_elem(&rw_allow_cidr, &slot);
	v->deny = bpf_map_lookup_elem(&rw_deny, &slot);
	v->inbound = bpf_map_lookup_elem(&rw_inbound, &slot);
	if (!v->pods || !v->allow_exact || !v->allow_cidr || !v->deny || !v->inbound)
		return -1;
	return 0;
}

static __always_inline int rw_is_metadata(__be32 addr)
{
	__u32 a = bpf_ntohl(addr);

#define RW_IS_METADATA(host, str) \
	if (a == (host))          \
		return 1;
	RW_METADATA_ADDRS(RW_IS_METADATA)
#undef RW_IS_METADATA
	return 0;
}

/* Built into the program, not loaded from a map, so no snapshot can forget them. */
static __always_inline int rw_is_special(__be32 addr)
{
	__u32 a = bpf_ntohl(addr);

#define RW_IS_SPECIAL(net, len, str, label)                        \
	if ((a & (__u32)(0xffffffffULL << (32 - (len)))) == (net)) \
		return 1;
	RW_SPECIAL_RANGES(RW_IS_SPECIAL)
#undef RW_IS_SPECIAL
	return 0;
}

/* An explicit allow rule of one scope (0: the platform's services, else a run's index) for
 * (daddr, dport, proto): the exact entry by hash first, then CIDR entries by LPM.
 */
static __always_inline struct rw_rule *rw_find_allow(const struct rw_view *v, __u32 scope,
						     __be32 daddr, __be16 dport, __u8 proto,
						     __u8 *path)
{
	struct rw_allow_key k = {.scope = scope, .daddr = daddr, .dport = dport, .proto = proto};
	struct rw_allow_lpm_key lk = {
		.prefixlen = RW_ALLOW_LPM_FIXED_BITS + 32,
		.scope = scope,
		.dport = dport,
		.proto = proto,
		.daddr = daddr,
	};
	struct rw_rule *r;

	*path = RW_PATH_RULE;
	r = bpf_map_lookup_elem(v->allow_exact, &k);
	if (r)
		return r;
	*path = RW_PATH_RULE_CIDR;
	return bpf_map_lookup_elem(v->allow_cidr, &lk);
}

/* The egress policy for a pod talking to daddr:dport over TCP or UDP, in contract order:
 * metadata, the platform's services, private and special ranges and the deny list, the run's
 * own rules, DNS (port 53 that no rule allowed), then the egress mode. Run rules come after the
 * ranges: only `services` may name a private address (the parser refuses run rules that do;
 * this is the same rule once more, in the kernel). Under an expired lease the run's rules and
 * its egress mode are not consulted: what services do not allow is lease-expired.
 */
static __always_inline int rw_egress_policy(const struct rw_view *v, const struct rw_pod *pod,
					    __be32 daddr, __be16 dport, __u8 proto, __u32 *rule_id,
					    __u8 *path)
{
	struct rw_cidr_lpm_key dk = {.prefixlen = 32, .addr = daddr};
	struct rw_rule *rule;
	__u8 rule_path = RW_PATH_NONE;
	int special;

	if (rw_is_metadata(daddr))
		return RW_REASON_METADATA;
	rule = rw_find_allow(v, 0, daddr, dport, proto, &rule_path);
	if (rule)
		goto allowed;
	special = rw_is_special(daddr) || bpf_map_lookup_elem(v->deny, &dk);
	/* The lease-expired policy ends here: the run's rules and egress mode are not consulted. */
	if (v->lease_expired)
		return dport == bpf_htons(53) ? RW_REASON_DNS
		       : special	      ? RW_REASON_PRIVATE_DESTINATION
					      : RW_REASON_LEASE_EXPIRED;
	if (!special) {
		rule = rw_find_allow(v, pod->run_idx, daddr, dport, proto, &rule_path);
		if (rule)
			goto allowed;
	}
	if (dport == bpf_htons(53))
		return RW_REASON_DNS;
	if (special)
		return RW_REASON_PRIVATE_DESTINATION;
	if (pod->egress_mode == RW_EGRESS_OPEN) {
		*path = RW_PATH_OPEN;
		return RW_REASON_ALLOWED;
	}
	return RW_REASON_NOT_ALLOWLISTED;
allowed:
	*rule_id = rule->rule_id;
	*path = rule_path;
	return RW_REASON_ALLOWED;
}

/* May `peer` open (or keep) a connection to the sandbox's pod_port? */
static __always_inline struct rw_rule *rw_find_inbound(const struct rw_view *v, __be32 peer,
						       __be16 pod_port, __u8 proto)
{
	struct rw_inbound_lpm_key k = {
		.prefixlen = RW_INBOUND_LPM_FIXED_BITS + 32,
		.dport = pod_port,
		.proto = proto,
		.saddr = peer,
	};

	return bpf_map_lookup_elem(v->inbound, &k);
}

#endif /* RUNWALL_BPF_POLICY_H */
