/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* policy.h: the decisions: metadata, special ranges, allow rules, inbound rules.
 *
 * API
 *   offers: rw_view6_of(), rw_state_load(), rw_view_load(), rw_view_load6(), rw_egress_policy(),
 *           rw_addr6_eq(), rw_egress_policy6(), rw_find_inbound(), rw_find_inbound6()
 *   needs:  runwall.h, maps.h, ranges.h
 */
#ifndef RUNWALL_BPF_POLICY_H
#define RUNWALL_BPF_POLICY_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "maps.h"
#include "ranges.h"

/* The inner maps of the live slot, looked up once per packet. */
/* Every byte here is on the programs' stack, which the verifier bounds (512 bytes for the
 * deepest chain of frames, the answer builders' included): the revision is the context's.
 */
struct rw_view {
	__u8 lease_expired; /* the lease-expired policy: services and inbound only */
	__u32 slot;	    /* the live slot, for rw_egress_judge() (in lease_expired's padding) */
	void *pods;
	void *allow_exact;
	void *allow_cidr;
	void *deny;
	void *inbound;
};

/* The IPv6 program's view: the IPv4 tables (an embedded IPv4 address is judged by them) and
 * the IPv6 ones. Only the IPv6 program holds one, so IPv4's stack stays as it was.
 */
struct rw_view6 {
	struct rw_view v;
	__u32 slot; /* the live slot, for rw_embedded4_check() */
	void *pods6;
	void *allow_exact6;
	void *allow_cidr6;
	void *deny6;
	void *inbound6;
};

/* The IPv6 view a struct rw_view of the IPv6 program is the first member of. */
static __always_inline const struct rw_view6 *rw_view6_of(const struct rw_view *v)
{
	return (const struct rw_view6 *)v;
}

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

/* Looks up the five tables of one family in `slot` into *v (f: the suffix of their maps and
 * fields, empty for IPv4's, 6 for IPv6's), and is true when one is missing.
 */
#define RW_TABLES_MISSING(v, slot, f)                                                            \
	({                                                                                       \
		(v)->pods##f = bpf_map_lookup_elem(&rw_pods##f, &(slot));                        \
		(v)->allow_exact##f = bpf_map_lookup_elem(&rw_allow_exact##f, &(slot));          \
		(v)->allow_cidr##f = bpf_map_lookup_elem(&rw_allow_cidr##f, &(slot));            \
		(v)->deny##f = bpf_map_lookup_elem(&rw_deny##f, &(slot));                        \
		(v)->inbound##f = bpf_map_lookup_elem(&rw_inbound##f, &(slot));                  \
		!(v)->pods##f || !(v)->allow_exact##f || !(v)->allow_cidr##f || !(v)->deny##f || \
			!(v)->inbound##f;                                                        \
	})

/* Every inner map of the live slot of `state`, or -1 when a slot is empty (not ready). */
static __always_inline int rw_view_load(struct rw_view *v, __u64 state)
{
	__u32 slot = RW_STATE_SLOT(state);

	v->slot = slot;
	if (RW_TABLES_MISSING(v, slot, ))
		return -1;
	return 0;
}

/* The IPv6 tables of the same slot, for an IPv6 packet (whose embedded IPv4 forms use the
 * IPv4 tables too): -1 when one is empty (not ready).
 */
static __always_inline int rw_view_load6(struct rw_view6 *v, __u64 state)
{
	__u32 slot = RW_STATE_SLOT(state);

	v->slot = slot;
	if (RW_TABLES_MISSING(v, slot, 6))
		return -1;
	return 0;
}

/* An explicit allow rule of one scope (0: the platform's services, else a run's index) for
 * (daddr, dport, proto) in a slot's tables: the exact entry by hash first, then CIDR entries by
 * LPM, each unless no_exact or no_cidr (the pod's RW_SKIP_* bits) says the scope has none.
 */
static __always_inline struct rw_rule *rw_find_allow(void *allow_exact, void *allow_cidr,
						     __u32 scope, __be32 daddr, __be16 dport,
						     __u8 proto, __u32 no_exact, __u32 no_cidr,
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

	/* *path is written only with a rule found, so that every path that finds none leaves the
	 * verifier the same state, skipped lookups or not.
	 */
	if (!no_exact) {
		r = bpf_map_lookup_elem(allow_exact, &k);
		if (r) {
			*path = RW_PATH_RULE;
			return r;
		}
	}
	if (no_cidr)
		return NULL;
	r = bpf_map_lookup_elem(allow_cidr, &lk);
	if (r)
		*path = RW_PATH_RULE_CIDR;
	return r;
}

/* rw_egress_judge()'s last argument: the pod's RW_SKIP_* bits (the low 16), and these. */
#define RW_JUDGE_LEASE_EXPIRED (1u << 16)
#define RW_JUDGE_OPEN	       (1u << 17) /* the pod's egress mode is open */

/* What rw_egress_judge() returns: the reason, the allow path and the rule id in one number. */
#define RW_JUDGED(reason, path, rule_id) \
	((__u64)(reason) | (__u64)(path) << 8 | (__u64)(rule_id) << 32)

/* The egress policy for a pod talking to daddr:dport over TCP or UDP, in contract order:
 * metadata, the platform's services, private and special ranges and the deny list, the run's
 * own rules, DNS (port 53 that no rule allowed), then the egress mode. Run rules come after the
 * ranges: only `services` may name a private address (the parser refuses run rules that do;
 * this is the same rule once more, in the kernel). Under an expired lease the run's rules and
 * its egress mode are not consulted: what services do not allow is lease-expired.
 *
 * A lookup that the pod's RW_SKIP_* bits say cannot match is not made (the services' where
 * every service is inside a special range and daddr is in none; the deny list where every
 * entry is inside one, so it can only say what rw_is_special() said; a table with no entry of
 * that scope). The verdict is the same as with every lookup made, as long as the bits describe
 * the slot's own tables: the invariant the agent keeps by writing each pod's value from the
 * snapshot that fills that slot (user/lib/pod_lookups.c), and that test_datapath's "lookups"
 * step and the differential test check.
 *
 * A global function (verified once, on its own, not at each of its callers: the bits' branches
 * would multiply the verifier's paths wherever it was inlined), so its arguments are plain
 * numbers: the live slot, the pod's run index, daddr, dport | proto << 16, and the pod's bits
 * with RW_JUDGE_*. It returns RW_JUDGED(reason, path, rule id); the path and rule id only with
 * RW_REASON_ALLOWED. A slot's table that is missing refuses (private-destination).
 */
__noinline __u64 rw_egress_judge(__u32 slot, __u32 run_idx, __u32 daddr, __u32 port_proto,
				 __u32 bits)
{
	__be16 dport = (__be16)port_proto;
	__u8 proto = port_proto >> 16, rule_path = RW_PATH_NONE;
	struct rw_cidr_lpm_key dk = {.prefixlen = 32, .addr = daddr};
	void *allow_exact, *allow_cidr, *deny;
	struct rw_rule *rule;
	int special;

	if (rw_is_metadata(daddr))
		return RW_REASON_METADATA;
	allow_exact = bpf_map_lookup_elem(&rw_allow_exact, &slot);
	allow_cidr = bpf_map_lookup_elem(&rw_allow_cidr, &slot);
	deny = bpf_map_lookup_elem(&rw_deny, &slot);
	if (!allow_exact || !allow_cidr || !deny)
		return RW_REASON_PRIVATE_DESTINATION;
	special = rw_is_special(daddr);
	if (special || !(bits & RW_SKIP_SVC_PUBLIC)) {
		rule = rw_find_allow(allow_exact, allow_cidr, 0, daddr, dport, proto,
				     bits & RW_SKIP_SVC_EXACT, bits & RW_SKIP_SVC_CIDR, &rule_path);
		if (rule)
			goto allowed;
	}
	if (!special && !(bits & RW_SKIP_DENY))
		special = bpf_map_lookup_elem(deny, &dk) != NULL;
	/* The lease-expired policy ends here: the run's rules and egress mode are not consulted. */
	if (bits & RW_JUDGE_LEASE_EXPIRED)
		return dport == bpf_htons(53) ? RW_REASON_DNS
		       : special	      ? RW_REASON_PRIVATE_DESTINATION
					      : RW_REASON_LEASE_EXPIRED;
	if (!special) {
		rule = rw_find_allow(allow_exact, allow_cidr, run_idx, daddr, dport, proto,
				     bits & RW_SKIP_RUN_EXACT, bits & RW_SKIP_RUN_CIDR, &rule_path);
		if (rule)
			goto allowed;
	}
	if (dport == bpf_htons(53))
		return RW_REASON_DNS;
	if (special)
		return RW_REASON_PRIVATE_DESTINATION;
	if (bits & RW_JUDGE_OPEN)
		return RW_JUDGED(RW_REASON_ALLOWED, RW_PATH_OPEN, 0);
	return RW_REASON_NOT_ALLOWLISTED;
allowed:
	return RW_JUDGED(RW_REASON_ALLOWED, rule_path, rule->rule_id);
}

/* rw_egress_judge() for a pod's packet under the view: its reason, with *rule_id and *path set
 * as the rule or mode that allowed it says (untouched for a refusal; *rule_id untouched for
 * open egress).
 */
static __always_inline int rw_egress_policy(const struct rw_view *v, const struct rw_pod *pod,
					    __be32 daddr, __be16 dport, __u8 proto, __u32 *rule_id,
					    __u8 *path)
{
	__u32 bits = pod->skip | (v->lease_expired ? RW_JUDGE_LEASE_EXPIRED : 0) |
		     (pod->egress_mode == RW_EGRESS_OPEN ? RW_JUDGE_OPEN : 0);
	__u64 r = rw_egress_judge(v->slot, pod->run_idx, daddr, dport | (__u32)proto << 16, bits);
	int reason = r & 0xff;

	/* Bounded for the verifier, which knows nothing of what the global function returns. */
	if (reason >= RW_REASON_COUNT)
		return RW_REASON_PRIVATE_DESTINATION;
	if (reason != RW_REASON_ALLOWED)
		return reason;
	*path = r >> 8 & 0xff;
	if (*path != RW_PATH_OPEN)
		*rule_id = r >> 32;
	return reason;
}

/* ---- IPv6 ---------------------------------------------------------------------------------- */

static __always_inline int rw_addr6_eq(const __be32 *a, const __be32 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

enum rw_embedded4_kind {
	RW_EMB4_NONE = 0,
	RW_EMB4_LOCAL = 1,  /* ::ffff:0:0/96, 64:ff9b::/96: only a translator's route reaches it */
	RW_EMB4_RELAY = 2,  /* 6to4: *v4 is the relay router the tunnel ends at */
	RW_EMB4_TEREDO = 3, /* *v4 is the Teredo client, *server the relay's server */
};

/* The IPv4 address a destination of RW_EMBEDDED4_RANGES carries, in the bits each form puts it
 * (runwall.h): ::ffff:0:0/96 and 64:ff9b::/96 the low 32 bits (RFC 4291 2.5.5.2, RFC 6052);
 * 2002::/16 bits 16-47 (RFC 3056); Teredo 2001::/32 the server in bits 32-63 and the client in
 * bits 96-127, inverted (RFC 4380 4). 64:ff9b:1::/48 is no such form but a special range: RFC
 * 8215 lets its translator use any RFC 6052 prefix length, so no one reading of it is the one
 * the translator makes.
 */
static __always_inline int rw_embedded4(const __be32 *addr, __be32 *v4, __be32 *server)
{
	__u32 w0 = bpf_ntohl(addr[0]), w1 = bpf_ntohl(addr[1]), w2 = bpf_ntohl(addr[2]);

	if ((w0 == 0 && w1 == 0 && w2 == 0x0000ffff) || (w0 == 0x0064ff9b && !w1 && !w2)) {
		*v4 = addr[3];
		return RW_EMB4_LOCAL;
	}
	if ((w0 >> 16) == 0x2002) {
		*v4 = bpf_htonl((w0 & 0xffff) << 16 | w1 >> 16);
		return RW_EMB4_RELAY;
	}
	if (w0 == 0x20010000) {
		*server = addr[1];
		*v4 = ~addr[3];
		return RW_EMB4_TEREDO;
	}
	return RW_EMB4_NONE;
}

/* What rw_embedded4_check() finds of an IPv6 destination: PASS, judge it as IPv6 (no form, or
 * 6to4 or Teredo that nothing refuses); SPECIAL, the same but private as a special range is (the
 * IPv6 deny list covers it, or v4-mapped or undeclared NAT64 that nothing refuses); METADATA,
 * the IPv4 address it carries or a Teredo server is metadata; PRIVATE, one is in a private or
 * special range or the IPv4 deny list (or it is under the declared NAT64 prefix and the IPv6
 * deny list); NAT64, under the declared nat64 prefix (judge its low 32 bits as IPv4).
 */
enum rw_embedded4_verdict {
	RW_EMB4_PASS = 0,
	RW_EMB4_SPECIAL = 1,
	RW_EMB4_METADATA = 2,
	RW_EMB4_PRIVATE = 3,
	RW_EMB4_NAT64 = 4,
};

/* rw_embedded4_check()'s first argument: the live slot, and this bit where the pod's
 * RW_SKIP_NAT64 says the snapshot declares no NAT64 prefix.
 */
#define RW_EMB4_NO_NAT64 0x100u

/* The lookups of an IPv6 destination (a0..a3, network byte order) under the slot of
 * `slot_arg` that its embedded IPv4 address needs: the IPv6 deny list, the declared NAT64
 * prefix (RW_SCOPE_NAT64 in the slot's rw_allow_cidr6; not where slot_arg has
 * RW_EMB4_NO_NAT64), then the forms of rw_embedded4(), metadata before private, a Teredo
 * server's as its client's. A global function (verified once, on its own), so its arguments
 * are plain numbers, and what it returns is one of five that its caller turns into constants:
 * the IPv6 judgement after it is walked once for every form, not once per form. A slot's table
 * that is missing refuses (private-destination).
 */
__noinline int rw_embedded4_check(__u32 slot_arg, __u32 a0, __u32 a1, __u32 a2, __u32 a3)
{
	__be32 addr[4] = {a0, a1, a2, a3}, v4 = 0, server = 0;
	struct rw_cidr_lpm_key dk = {.prefixlen = 32};
	__u32 slot = slot_arg & 0xff;
	void *deny, *deny6;
	int kind, denied6;

	deny6 = bpf_map_lookup_elem(&rw_deny6, &slot);
	if (!deny6)
		return RW_EMB4_PRIVATE;
	{
		struct rw_cidr6_lpm_key k = {.prefixlen = 128};

		__builtin_memcpy(k.addr, addr, sizeof(k.addr));
		denied6 = bpf_map_lookup_elem(deny6, &k) != NULL;
	}
	if (!(slot_arg & RW_EMB4_NO_NAT64)) {
		struct rw_allow6_lpm_key k = {
			.prefixlen = RW_ALLOW_LPM_FIXED_BITS + 128,
			.scope = RW_SCOPE_NAT64,
		};
		void *allow_cidr6 = bpf_map_lookup_elem(&rw_allow_cidr6, &slot);

		if (!allow_cidr6)
			return RW_EMB4_PRIVATE;
		__builtin_memcpy(k.daddr, addr, sizeof(k.daddr));
		if (bpf_map_lookup_elem(allow_cidr6, &k))
			return denied6 ? RW_EMB4_PRIVATE : RW_EMB4_NAT64;
	}
	kind = rw_embedded4(addr, &v4, &server);
	if (kind == RW_EMB4_NONE)
		return denied6 ? RW_EMB4_SPECIAL : RW_EMB4_PASS;
	/* server is 0 but for Teredo: 0.0.0.0 is no metadata address */
	if (rw_is_metadata(v4) || rw_is_metadata(server))
		return RW_EMB4_METADATA;
	deny = bpf_map_lookup_elem(&rw_deny, &slot);
	if (!deny || rw_is_special(v4))
		return RW_EMB4_PRIVATE;
	dk.addr = v4;
	if (bpf_map_lookup_elem(deny, &dk))
		return RW_EMB4_PRIVATE;
	if (kind == RW_EMB4_TEREDO) {
		dk.addr = server;
		if (rw_is_special(server) || bpf_map_lookup_elem(deny, &dk))
			return RW_EMB4_PRIVATE;
	}
	return kind == RW_EMB4_LOCAL || denied6 ? RW_EMB4_SPECIAL : RW_EMB4_PASS;
}

/* rw_find_allow() for an IPv6 destination. Each key lives in its own block, so that the two
 * share their stack (the IPv6 program's frame is near the verifier's 512 bytes with an answer
 * builder's on top).
 */
static __always_inline struct rw_rule *rw_find_allow6(const struct rw_view6 *v, __u32 scope,
						      const __be32 *daddr, __be16 dport, __u8 proto,
						      __u32 no_exact, __u32 no_cidr, __u8 *path)
{
	struct rw_rule *r = NULL;

	/* *path as rw_find_allow() writes it: only with a rule found. */
	if (!no_exact) {
		struct rw_allow6_key k = {.scope = scope, .dport = dport, .proto = proto};

		__builtin_memcpy(k.daddr, daddr, sizeof(k.daddr));
		r = bpf_map_lookup_elem(v->allow_exact6, &k);
	}
	if (r) {
		*path = RW_PATH_RULE;
		return r;
	}
	if (no_cidr)
		return NULL;
	{
		struct rw_allow6_lpm_key lk = {
			.prefixlen = RW_ALLOW_LPM_FIXED_BITS + 128,
			.scope = scope,
			.dport = dport,
			.proto = proto,
		};

		__builtin_memcpy(lk.daddr, daddr, sizeof(lk.daddr));
		r = bpf_map_lookup_elem(v->allow_cidr6, &lk);
	}
	if (r)
		*path = RW_PATH_RULE_CIDR;
	return r;
}

/* Whether addr is in the /64 of the veth's own pod_ip6. On EKS a node's pods (each an /80 of
 * its ENI's prefix) and the node itself (the ENI's address) share their subnet's /64: the node's
 * kubelet and its other pods are there, as RFC 1918 holds them for IPv4.
 */
static __always_inline int rw_in_pod64(const __be32 *addr, const __be32 *pod_ip6)
{
	return addr[0] == pod_ip6[0] && addr[1] == pod_ip6[1];
}

/* Whether addr is a pod of the snapshot. The key is a copy: a helper given the address of the
 * packet's context would make clang keep every field of it in memory across every call.
 */
static __always_inline int rw_is_pod6(const struct rw_view6 *v, const __be32 *addr)
{
	__be32 key[4];

	__builtin_memcpy(key, addr, sizeof(key));
	return bpf_map_lookup_elem(v->pods6, key) != NULL;
}

/* The egress policy for an IPv6 destination, of the pod whose bound address is pod_ip6. One under
 * the snapshot's declared NAT64 prefix goes to the cluster's translator: it is judged as IPv4 to
 * the address it carries, by the IPv4 tables and rw_egress_policy(), unless the IPv6 deny list
 * covers it (private-destination first). One of the other forms that carry an IPv4 address
 * (rw_embedded4()) is refused if that address, or a Teredo relay's server, is metadata (first)
 * or private; it can only refuse, for the packet leaves by IPv6. Past that it is judged as the
 * IPv6 address it is: 64:ff9b::/96 undeclared and ::ffff:0:0/96 as special ranges, 6to4 and
 * Teredo as any global address. Every IPv6 destination is judged as rw_egress_policy() judges
 * IPv4, by the IPv6 tables, in the same order, where the pod's own /64 and the snapshot's pods
 * are private as the special ranges are: no special range holds a node's global addresses.
 */
static __always_inline int rw_egress_policy6(const struct rw_view6 *v, const struct rw_pod *pod,
					     const __be32 *pod_ip6, const __be32 *daddr,
					     __be16 dport, __u8 proto, __u32 *rule_id, __u8 *path)
{
	__u32 skip = pod->skip;
	struct rw_rule *rule;
	__u8 rule_path = RW_PATH_NONE;
	int special, special6, emb;

	emb = rw_embedded4_check(v->slot | (skip & RW_SKIP_NAT64 ? RW_EMB4_NO_NAT64 : 0), daddr[0],
				 daddr[1], daddr[2], daddr[3]);
	if (emb == RW_EMB4_NAT64)
		return rw_egress_policy(&v->v, pod, daddr[3], dport, proto, rule_id, path);
	if (emb == RW_EMB4_METADATA)
		return RW_REASON_METADATA;
	if (emb == RW_EMB4_PRIVATE)
		return RW_REASON_PRIVATE_DESTINATION;
	special = emb == RW_EMB4_SPECIAL;

	if (rw_is_metadata6(daddr))
		return RW_REASON_METADATA;
	/* The pod's RW_SKIP_* as rw_egress_policy() reads them, IPv6's byte. */
	special6 = rw_is_special6(daddr);
	if (special6 || !(skip & RW_SKIP6(RW_SKIP_SVC_PUBLIC))) {
		rule = rw_find_allow6(v, 0, daddr, dport, proto, skip & RW_SKIP6(RW_SKIP_SVC_EXACT),
				      skip & RW_SKIP6(RW_SKIP_SVC_CIDR), &rule_path);
		if (rule)
			goto allowed;
	}
	special = special || special6 || rw_in_pod64(daddr, pod_ip6) || rw_is_pod6(v, daddr);
	if (v->v.lease_expired)
		return dport == bpf_htons(53) ? RW_REASON_DNS
		       : special	      ? RW_REASON_PRIVATE_DESTINATION
					      : RW_REASON_LEASE_EXPIRED;
	if (!special) {
		rule = rw_find_allow6(v, pod->run_idx, daddr, dport, proto,
				      skip & RW_SKIP6(RW_SKIP_RUN_EXACT),
				      skip & RW_SKIP6(RW_SKIP_RUN_CIDR), &rule_path);
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

/* rw_find_inbound() for an IPv6 peer. */
static __always_inline struct rw_rule *
rw_find_inbound6(const struct rw_view6 *v, const __be32 *peer, __be16 pod_port, __u8 proto)
{
	struct rw_inbound6_lpm_key k = {
		.prefixlen = RW_INBOUND_LPM_FIXED_BITS + 128,
		.dport = pod_port,
		.proto = proto,
	};

	__builtin_memcpy(k.saddr, peer, sizeof(k.saddr));
	return bpf_map_lookup_elem(v->inbound6, &k);
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
