/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* runwall.h: the contract between the kernel programs and user space: map names, key and value
 * layouts, reasons, events and the built-in address tables. No includes of its own: the BPF side
 * includes it after <linux/types.h>, user space after <linux/types.h> too.
 *
 * Byte order: every address and port is in network byte order (__be32/__be16) in keys, values
 * and events, exactly as it sits in the packet, so the datapath never swaps.
 */
#ifndef RUNWALL_H
#define RUNWALL_H

/* Bumped whenever a pinned map changes layout; a restarted agent refuses pins of another layout. */
#define RW_LAYOUT_VERSION 10

/* Every map of the datapath, once: X(ID, its name (the BPF object's variable and the pin's),
 * the name `runwall map` shows it under). bpf/maps.h defines each (and checks that it does);
 * user space makes enum rw_map_id (RW_M_ID), rw_map_names[] and rw_map_shown_names[] from it
 * (user/lib/datapath.h), and `runwall map` its table. Maps shown under one name ("allow") are
 * shown together, under the first's ID.
 */
#define RW_MAPS(X)                                      \
	X(CONFIG, rw_config, "config")                  \
	X(ENDPOINTS, rw_endpoints, "endpoints")         \
	X(VETH_SLOTS, rw_veth_slots, "endpoints")       \
	X(VETH_OVERFLOW, rw_veth_overflow, "endpoints") \
	X(PODS, rw_pods, "pods")                        \
	X(PODS6, rw_pods6, "pods")                      \
	X(ALLOW_EXACT, rw_allow_exact, "allow")         \
	X(ALLOW_CIDR, rw_allow_cidr, "allow")           \
	X(ALLOW_EXACT6, rw_allow_exact6, "allow")       \
	X(ALLOW_CIDR6, rw_allow_cidr6, "allow")         \
	X(DENY, rw_deny, "deny")                        \
	X(DENY6, rw_deny6, "deny")                      \
	X(INBOUND, rw_inbound, "inbound")               \
	X(INBOUND6, rw_inbound6, "inbound")             \
	X(CONNTRACK, rw_conntrack, "conntrack")         \
	X(CONNTRACK6, rw_conntrack6, "conntrack")       \
	X(CT_SLOTS, rw_ct_slots, "conntrack")           \
	X(CT6_SLOTS, rw_ct6_slots, "conntrack")         \
	X(COUNTERS, rw_counters, "counters")            \
	X(EVENT_BUDGET, rw_event_budget, "budget")      \
	X(VETH_BUDGET, rw_veth_budget, "budget")        \
	X(EVENTS, rw_events, "events")                  \
	X(RUN_REVS, rw_run_revs, "revs")                \
	X(PROGS6, rw_progs6, "progs")                   \
	X(PROGS_ICMP6, rw_progs_icmp6, "progs")         \
	X(SCRATCH, rw_scratch, "scratch")               \
	X(LL6, rw_ll6, "linklocal")                     \
	X(FROM, rw_from, "principals")                  \
	X(ADMIT, rw_admit, "principals")

/* Sizes; each can be overridden at build time (-DRW_MAX_PODS=...). */
#ifndef RW_MAX_ENDPOINTS
#define RW_MAX_ENDPOINTS 4096 /* sandbox veths on one node */
#endif
#ifndef RW_MAX_PODS
#define RW_MAX_PODS 16384 /* pod IPs named by one snapshot */
#endif
#ifndef RW_MAX_RUNS
#define RW_MAX_RUNS 1024 /* runs with their own counters; index 0 is the node total */
#endif
#ifndef RW_MAX_ALLOW_EXACT
#define RW_MAX_ALLOW_EXACT 131072 /* (scope, ip, port, proto) allow entries */
#endif
#ifndef RW_MAX_ALLOW_CIDR
#define RW_MAX_ALLOW_CIDR 16384 /* (scope, port, proto, cidr) allow entries */
#endif
#ifndef RW_MAX_DENY
#define RW_MAX_DENY 4096 /* configured deny CIDRs (the node's VPC, pod, service CIDRs) */
#endif
#ifndef RW_MAX_INBOUND
#define RW_MAX_INBOUND 4096 /* (port, proto, peer cidr) inbound entries */
#endif
/* Conntrack: one table per sandbox veth (an inner map of rw_conntrack), sized by the agent
 * (--ct-per-sandbox, --ct-node); these are the defaults.
 */
#ifndef RW_CT_PER_SANDBOX
#define RW_CT_PER_SANDBOX 8192 /* flows one sandbox may hold at once */
#endif
/* rw_veth_slots, rw_ct_slots, rw_ct6_slots: a sandbox veth's binding and tables again, by veth
 * index: its slot (ifindex modulo RW_VETH_SLOTS, a power of two), or, when another veth holds
 * that, one of RW_MAX_ENDPOINTS overflow indexes after the slots (rw_veth_overflow).
 */
#ifndef RW_VETH_SLOTS
#define RW_VETH_SLOTS 16384
#endif
_Static_assert((RW_VETH_SLOTS & (RW_VETH_SLOTS - 1)) == 0, "RW_VETH_SLOTS is a power of two");
#define RW_VETH_INDEXES	      (RW_VETH_SLOTS + RW_MAX_ENDPOINTS)
#define RW_VETH_SLOT(ifindex) ((ifindex) & (RW_VETH_SLOTS - 1))
#ifndef RW_CT_NODE
/* Flows of all sandboxes of the node together: 512 tables of RW_CT_PER_SANDBOX, for EKS's 250
 * pods a node (above 30 vCPUs) each with an IPv4 and an IPv6 table, the pods being replaced
 * beside them. The tables grow with their flows (no preallocation): docs/operations.md, Sizing.
 */
#define RW_CT_NODE 4194304
#endif
/* The IPv6 answer builders' frame (bpf/answer.h): per CPU, off the stack. */
#define RW_SCRATCH_BYTES 128
#ifndef RW_RINGBUF_BYTES
#define RW_RINGBUF_BYTES (1 << 22)
#endif

/* The policy maps come in two slots (outer ARRAY_OF_MAPS of 2); rw_config says which is live. */
#define RW_SLOTS 2

#define RW_RUN_ID_LEN 64 /* 1..63 chars of [A-Za-z0-9._-] and a NUL */

/* Reasons: a numbered contract shared with the docs (docs/reasons.md) and the CLI. Never
 * renumber; add at the end. RW_REASON_ALLOWED is the verdict "allowed", not a drop.
 */
#define RW_REASONS(X)                                      \
	X(ALLOWED, 0, "allowed")                           \
	X(NOT_READY, 1, "not-ready")                       \
	X(UNKNOWN_SOURCE, 2, "unknown-source")             \
	X(SPOOFED_SOURCE, 3, "spoofed-source")             \
	X(MALFORMED, 4, "malformed")                       \
	X(UNSUPPORTED_L2, 5, "unsupported-l2")             \
	X(IP_OPTIONS, 6, "ip-options")                     \
	X(FRAGMENT, 7, "fragment")                         \
	X(UNSUPPORTED_PROTOCOL, 8, "unsupported-protocol") \
	X(DNS, 9, "dns")                                   \
	X(METADATA, 10, "metadata")                        \
	X(PRIVATE_DESTINATION, 11, "private-destination")  \
	X(NOT_ALLOWLISTED, 12, "not-allowlisted")          \
	X(INBOUND_DENIED, 13, "inbound-denied")            \
	X(CONNTRACK_FULL, 14, "conntrack-full")            \
	X(LEASE_EXPIRED, 15, "lease-expired")              \
	X(IPV6_ROUTING, 16, "ipv6-routing")                \
	X(IPV6_EXT_HEADERS, 17, "ipv6-ext-headers")        \
	X(IPV6_NEXT_HEADER, 18, "ipv6-next-header")        \
	X(IPV6_JUMBOGRAM, 19, "ipv6-jumbogram")            \
	X(ICMPV6_TYPE, 20, "icmpv6-type")                  \
	X(ICMP_UNRELATED, 21, "icmp-unrelated")            \
	X(WRONG_PRINCIPAL, 22, "wrong-principal")

/* The IPv6 extension-header walk's bounds (bpf/parse.h): more headers than RW_IPV6_EXT_MAX, or
 * more than RW_IPV6_EXT_BYTES of them together, is ipv6-ext-headers. Four is every header a
 * packet that is not a fragment may carry, each once (RFC 8200 4.1: hop-by-hop, destination
 * options, routing, destination options).
 */
#define RW_IPV6_EXT_MAX	  4
#define RW_IPV6_EXT_BYTES 256

/* An X-macro list, then the count: clang-format would indent the count. */
/* clang-format off */
enum rw_reason {
#define RW_REASON_ENUM(name, num, str) RW_REASON_##name = num,
	RW_REASONS(RW_REASON_ENUM)
#undef RW_REASON_ENUM
	RW_REASON_COUNT
};
/* clang-format on */

/* Which path allowed a packet (the "rule that matched" in events and explain). */
#define RW_ALLOW_PATHS(X)                                                        \
	X(NONE, 0, "none")                                                       \
	X(ARP, 1, "arp")	     /* ARP with the pod's own sender address */ \
	X(REPLY, 2, "reply")	     /* reply of a flow the other side opened */ \
	X(RULE, 3, "rule")	     /* an exact ip:port allow rule */           \
	X(RULE_CIDR, 4, "rule-cidr") /* a CIDR allow rule (LPM) */               \
	X(OPEN, 5, "open")	     /* egress mode open, public destination */  \
	X(INBOUND, 6, "inbound")     /* an inbound rule */                       \
	X(NDP, 7, "ndp")	     /* NDP on the pod's veth (bpf/icmp6.h) */   \
	X(RELATED, 8, "related")     /* ICMPv6 error of a tracked flow */

/* An X-macro list, then the count: clang-format would indent the count. */
/* clang-format off */
enum rw_allow_path {
#define RW_PATH_ENUM(name, num, str) RW_PATH_##name = num,
	RW_ALLOW_PATHS(RW_PATH_ENUM)
#undef RW_PATH_ENUM
	RW_PATH_COUNT
};
/* clang-format on */

enum rw_dir {
	RW_DIR_EGRESS = 0,  /* pod -> world: TC ingress hook of the host-side veth */
	RW_DIR_INGRESS = 1, /* world -> pod: TC egress hook of the host-side veth */
	RW_DIR_COUNT
};

enum rw_verdict {
	RW_VERDICT_DROP = 0,
	RW_VERDICT_ALLOW = 1,
};

enum rw_egress_mode {
	RW_EGRESS_ALLOWLIST = 0,
	RW_EGRESS_OPEN = 1,
};

/* What a sandbox hears when its packet is refused (the snapshot's "refusal"). */
enum rw_refusal_mode {
	RW_REFUSAL_ANSWER = 0, /* a TCP reset or an ICMP unreachable back into the pod */
	RW_REFUSAL_DROP = 1,   /* nothing: the packet is dropped silently */
};

/* skb->mark of the remote's reset a revoke sends (bpf/revoke.h): injected into the host veth's
 * ingress, where only this mark lets it past rw_egress unjudged. A pod cannot set it: the mark
 * is scrubbed when a packet crosses the veth into the node's namespace.
 */
#define RW_MARK_REVOKE 0x72770001u

/* The answer a refused packet got, in events, explain and the counters. Never renumber. */
#define RW_ANSWERS(X)                                                                          \
	X(NONE, 0, "none")     /* no answer: not a refusal of a proven source, or drop mode */ \
	X(RST, 1, "rst")       /* a TCP reset */                                               \
	X(ICMP, 2, "icmp")     /* ICMP destination unreachable, code 13 */                     \
	X(BUDGET, 3, "budget") /* would have been answered: over the sandbox's budget */

/* An X-macro list, then the count: clang-format would indent the count. */
/* clang-format off */
enum rw_answer {
#define RW_ANSWER_ENUM(name, num, str) RW_ANSWER_##name = num,
	RW_ANSWERS(RW_ANSWER_ENUM)
#undef RW_ANSWER_ENUM
	RW_ANSWER_COUNT
};
/* clang-format on */

/* Rule ids name the snapshot entry that allowed a packet: kind in the top 4 bits, then the
 * index of the entry (12 bits) and the index inside it (16 bits: runs[a].allow[b]). The parser
 * refuses lists longer than these fields (RW_RULE_MAX_A, RW_RULE_MAX_B): ids never wrap.
 */
#define RW_RULE_KIND_SERVICE 1	    /* services[a] */
#define RW_RULE_KIND_RUN     2	    /* runs[a].allow[b] */
#define RW_RULE_KIND_INBOUND 3	    /* inbound[a] */
#define RW_RULE_MAX_A	     4096u  /* services, inbound rules, runs */
#define RW_RULE_MAX_B	     65536u /* allow rules of one run */
#define RW_RULE_ID(kind, a, b) \
	(((__u32)(kind) << 28) | (((__u32)(a)&0xfff) << 16) | ((__u32)(b)&0xffff))
#define RW_RULE_KIND(id) (((id) >> 28) & 0x7)
/* The rule names who inside the pod may use it ("from"): its selector is rw_from's entry for
 * (slot, id without this bit). Set in the id the allow tables hold, the flow's entry caches and
 * events carry, so that a packet allowed by such a rule is known to need its sender proven.
 */
#define RW_RULE_FROM  (1u << 31)
#define RW_RULE_A(id) (((id) >> 16) & 0xfff)
#define RW_RULE_B(id) ((id)&0xffff)

/* rw_config[0]: node-wide state. `state` is one 64-bit word so that a packet reads readiness,
 * the live slot and the revision with a single load while the agent flips them with a single
 * atomic store (rw_flip): revision << 8 | ready << 1 | slot.
 */
#define RW_STATE_SLOT(s)	   ((__u32)((s)&1))
#define RW_STATE_READY(s)	   (((s) >> 1) & 1)
#define RW_STATE_REVISION(s)	   ((s) >> 8)
#define RW_STATE(rev, ready, slot) (((__u64)(rev) << 8) | ((__u64)(!!(ready)) << 1) | ((slot)&1))

struct rw_config {
	__u64 state;
	__u32 layout_version; /* RW_LAYOUT_VERSION of whoever created the pins */
	__u32 event_rate;     /* events per second per sandbox veth and kind (0: no budget) */
	__u32 event_burst;    /* bucket depth, in events */
	__u32 ct_per_sandbox; /* size of each sandbox's conntrack table (new tables) */
	__u64 applied_ns;     /* CLOCK_MONOTONIC (bpf_ktime_get_ns) of the last flip */
	__u32 ct_node;	      /* all sandboxes' tables together may hold this many flows */
	__u32 answer_rate;    /* refusal answers per second per sandbox veth (0: no budget) */
	__u32 answer_burst;   /* bucket depth, in answers */
	__u8 refusal;	      /* enum rw_refusal_mode of the snapshot in force, node-wide: what a
			       * sandbox whose run has ended hears (bpf/revoke.h) */
	__u8 pad[3];
	/* The control plane's dead-man lease: CLOCK_MONOTONIC (the bpf_ktime_get_coarse_ns()
	 * domain) after which packets are judged by the lease-expired policy (services and
	 * inbound only); 0: no lease. Written only by rw_flip (an apply's lease, in the run that
	 * flips to its snapshot) and rw_lease (renewals), read by packets with one load.
	 */
	__u64 lease_deadline_ns;
	/* The lease of the snapshot in force (0: none): what a renewal adds. Written only by
	 * rw_flip, with the deadline; packets never read it.
	 */
	__u32 lease_seconds;
	__u32 pad2;
};
_Static_assert(sizeof(struct rw_config) == 64, "rw_config layout");

/* rw_flip, the one writer of rw_config.state: a BPF_PROG_TYPE_SYSCALL program that user space
 * runs with BPF_PROG_TEST_RUN, this as its context (in and out). It stores `next` with one
 * compare-and-exchange when the state word is `expect`, and says what it found. With
 * RW_FLIP_LEASE in `flags` the same run first stores the lease of the snapshot it flips to:
 * lease_seconds, and the deadline now + lease_seconds by the kernel's clock (0: no lease), so
 * the policy and its lease come into force together or not at all.
 */
#define RW_FLIP_LEASE (1u << 0)
struct rw_flip_args {
	__u64 expect;	     /* the state word the flip starts from */
	__u64 next;	     /* the state word to store */
	__u64 found;	     /* out: the state word that was there (== expect: `next` is stored) */
	__u32 lease_seconds; /* with RW_FLIP_LEASE: the lease of `next`'s snapshot (0: none) */
	__u32 flags;	     /* RW_FLIP_* */
};
_Static_assert(sizeof(struct rw_flip_args) == 32, "rw_flip_args layout");

enum rw_flip_result {
	RW_FLIP_DONE = 0,
	RW_FLIP_NO_CONFIG = 1, /* rw_config has no entry 0 (cannot happen to an ARRAY) */
	RW_FLIP_CHANGED = 2,   /* the state word was not `expect`: nothing stored */
};

/* rw_lease, the writer of rw_config.lease_deadline_ns between flips (a flip stores its snapshot's
 * lease itself, RW_FLIP_LEASE): a BPF_PROG_TYPE_SYSCALL program run like rw_flip, this as its
 * context. It exchanges the deadline with one atomic 64-bit
 * exchange and says what was there.
 */
struct rw_lease_args {
	__u64 deadline_ns; /* the deadline to store (0: no lease) */
	__u64 found;	   /* out: the deadline that was there */
};
_Static_assert(sizeof(struct rw_lease_args) == 16, "rw_lease_args layout");

/* rw_endpoints: host-side veth ifindex -> the pod bound to it: the /32 and the /128 the node
 * routes to the veth, and the host veth's own link-local address (the pod's IPv6 gateway, which
 * no NDP message of the pod may claim). `flags` says which are set (RW_EP_*); an address whose
 * flag is clear is nobody's, whatever the field holds. The pod's own link-local address is never
 * bound: its scope is the veth, which only the pod and the node share.
 */
#define RW_EP_IP4 (1u << 0) /* pod_ip */
#define RW_EP_IP6 (1u << 1) /* pod_ip6 */
#define RW_EP_GW6 (1u << 2) /* gw_ip6 */
struct rw_endpoint {
	__be32 pod_ip;
	__u32 flags; /* RW_EP_* */
	__be32 pod_ip6[4];
	__be32 gw_ip6[4];
};
_Static_assert(sizeof(struct rw_endpoint) == 40, "rw_endpoint layout");

/* rw_veth_slots: ARRAY_OF_MAPS, veth index -> an ARRAY of one rw_veth: the binding again, so that
 * a packet finds its veth's binding by inlined array lookups instead of a hash. A veth's index is
 * its slot, RW_VETH_SLOT(ifindex), unless another bound veth holds that (ifindexes RW_VETH_SLOTS
 * apart); then it is an overflow index, which rw_veth_overflow (HASH, ifindex -> index) gives.
 * A veth reading an index that is not its own finds another ifindex there. The tables of
 * rw_ct_slots and rw_ct6_slots at the same index are the veth's. Each binding is a new inner map
 * swapped in whole, so a packet never reads half of one.
 */
struct rw_veth {
	__u32 ifindex; /* the owner */
	__u32 pad;
	struct rw_endpoint ep;
};
_Static_assert(sizeof(struct rw_veth) == 48, "rw_veth layout");

/* rw_pods[slot]: pod IPv4 (__be32) -> its run; rw_pods6[slot]: pod IPv6 (__be32[4]) -> its run,
 * the same value, so that one run_idx (counters, rw_run_revs, the verdict cache) covers both
 * families of a run and one apply cuts both. The run id travels with each event, so an event
 * names the run that really sent it even after the IP has moved on.
 */
struct rw_pod {
	char run_id[RW_RUN_ID_LEN];
	__u32 run_idx;	  /* 1..RW_MAX_RUNS-1: index of the run's counters */
	__u32 run_gen;	  /* revision in which this run's policy last changed */
	__u8 egress_mode; /* enum rw_egress_mode */
	__u8 refusal;	  /* enum rw_refusal_mode: the run's, or the node's when it has none */
	__u16 skip;	  /* RW_SKIP_*: the egress lookups that cannot match (0: make them all) */
	__u8 pad[4];
};
_Static_assert(sizeof(struct rw_pod) == 80, "rw_pod layout");

/* rw_pod.skip: which of the egress policy's lookups (bpf/policy.h) cannot match for this pod,
 * as the agent found them in the snapshot that fills the same slot (rw_pod_lookups(), in
 * user/lib/pod_lookups.c). The pod's value is written with the slot's tables, before the flip
 * that makes them live, so a flag always describes the tables it is read beside. A bit set
 * means "skip"; 0 means "look it up", so a value with none (an older agent's, a test's) is only
 * slower, never another verdict. The low byte is for IPv4 destinations (and a declared NAT64
 * prefix's, judged as IPv4), the same bits << 8 (RW_SKIP6()) for IPv6 ones.
 */
#define RW_SKIP_SVC_EXACT (1u << 0) /* the services have no exact (/32, /128) entry */
#define RW_SKIP_SVC_CIDR  (1u << 1) /* the services have no CIDR entry */
/* Every service lies inside a compiled-in special range (RW_SPECIAL_RANGES): a destination in
 * none of them matches no service.
 */
#define RW_SKIP_SVC_PUBLIC (1u << 2)
/* Every deny entry lies inside a special range (or there is none): the deny list can only refuse
 * what rw_is_special() refuses already. IPv4 only (the IPv6 deny list also weighs on NAT64).
 */
#define RW_SKIP_DENY	  (1u << 3)
#define RW_SKIP_RUN_EXACT (1u << 4) /* the run has no exact entry */
#define RW_SKIP_RUN_CIDR  (1u << 5) /* the run has no CIDR entry */
#define RW_SKIP6(bits)	  ((bits) << 8)
/* The snapshot declares no NAT64 prefix (RW_SCOPE_NAT64): an IPv6 destination is not looked up
 * under it. IPv6's byte only.
 */
#define RW_SKIP_NAT64 RW_SKIP6(1u << 6)

/* rw_allow_exact[slot]: O(1) exact allow. scope 0 = services (every sandbox), otherwise the
 * run_idx of the run the rule belongs to. proto is IPPROTO_TCP or IPPROTO_UDP.
 */
struct rw_allow_key {
	__u32 scope;
	__be32 daddr;
	__be16 dport;
	__u8 proto;
	__u8 pad;
};
_Static_assert(sizeof(struct rw_allow_key) == 12, "rw_allow_key layout");

struct rw_rule {
	__u32 rule_id; /* RW_RULE_ID() */
};

/* rw_allow_cidr[slot]: LPM trie. The fixed part (scope, port, proto, pad = 64 bits) comes
 * first so that one trie holds every scope and port: prefixlen = 64 + CIDR length.
 */
struct rw_allow_lpm_key {
	__u32 prefixlen;
	__u32 scope;
	__be16 dport;
	__u8 proto;
	__u8 pad;
	__be32 daddr;
};
_Static_assert(sizeof(struct rw_allow_lpm_key) == 16, "rw_allow_lpm_key layout");
#define RW_ALLOW_LPM_FIXED_BITS 64

/* The IPv6 keys: the same fields, the address as four words in network byte order. */
struct rw_allow6_key {
	__u32 scope;
	__be32 daddr[4];
	__be16 dport;
	__u8 proto;
	__u8 pad;
};
_Static_assert(sizeof(struct rw_allow6_key) == 24, "rw_allow6_key layout");

struct rw_allow6_lpm_key {
	__u32 prefixlen; /* RW_ALLOW_LPM_FIXED_BITS + CIDR length (0..128) */
	__u32 scope;
	__be16 dport;
	__u8 proto;
	__u8 pad;
	__be32 daddr[4];
};
_Static_assert(sizeof(struct rw_allow6_lpm_key) == 28, "rw_allow6_lpm_key layout");

struct rw_cidr6_lpm_key {
	__u32 prefixlen;
	__be32 addr[4];
};
_Static_assert(sizeof(struct rw_cidr6_lpm_key) == 20, "rw_cidr6_lpm_key layout");

struct rw_inbound6_lpm_key {
	__u32 prefixlen; /* RW_INBOUND_LPM_FIXED_BITS + CIDR length (0..128) */
	__be16 dport;
	__u8 proto;
	__u8 pad;
	__be32 saddr[4];
};
_Static_assert(sizeof(struct rw_inbound6_lpm_key) == 24, "rw_inbound6_lpm_key layout");

/* rw_deny[slot]: LPM trie of configured deny CIDRs (the built-in ranges are compiled in). */
struct rw_cidr_lpm_key {
	__u32 prefixlen;
	__be32 addr;
};
_Static_assert(sizeof(struct rw_cidr_lpm_key) == 8, "rw_cidr_lpm_key layout");

/* rw_inbound[slot]: LPM trie of who may open connections into sandboxes: (port, proto) fixed,
 * then the peer CIDR: prefixlen = 32 + CIDR length.
 */
struct rw_inbound_lpm_key {
	__u32 prefixlen;
	__be16 dport;
	__u8 proto;
	__u8 pad;
	__be32 saddr;
};
_Static_assert(sizeof(struct rw_inbound_lpm_key) == 12, "rw_inbound_lpm_key layout");
#define RW_INBOUND_LPM_FIXED_BITS 32

/* rw_conntrack: HASH_OF_MAPS, host-side veth ifindex -> that sandbox's own table (a HASH of
 * rw_ct_key -> rw_ct_value, ct_per_sandbox entries, created by rw_endpoint_bind()). One
 * sandbox's flows can only ever fill its own table: a full table refuses the sandbox's new flows
 * (conntrack-full) and never touches another's. The key is the flow as seen from the pod, the
 * same for both directions; ifindex repeats the outer key so that an entry read on its own
 * still names its veth, and so that a lookup in another veth's table finds nothing. The entry
 * only says who opened the flow: every packet is still judged by the policy, and a missing
 * entry grants nothing.
 *
 * rw_ct_slots (rw_ct6_slots for IPv6): ARRAY_OF_MAPS, veth index (rw_veth_slots) -> the same
 * table: the one the programs use, at the index where they found the veth's binding.
 */
struct rw_ct_key {
	__u32 ifindex;
	__be32 pod_ip;
	__be32 peer_ip;
	__be16 pod_port;
	__be16 peer_port;
	__u8 proto;
	__u8 pad[3];
};
_Static_assert(sizeof(struct rw_ct_key) == 20, "rw_ct_key layout");

/* rw_conntrack6: the same, for IPv6 flows: a second outer map, since every inner map of one
 * outer map has the template's key size. A veth's two tables have ct_per_sandbox entries each;
 * ct_node counts the flows of both.
 */
struct rw_ct6_key {
	__u32 ifindex;
	__be32 pod_ip[4];
	__be32 peer_ip[4];
	__be16 pod_port;
	__be16 peer_port;
	__u8 proto;
	__u8 pad[3];
};
_Static_assert(sizeof(struct rw_ct6_key) == 44, "rw_ct6_key layout");

/* The entry also caches the flow's last verdict (the fast path): `stamp` is the policy revision
 * it was judged under. A packet of the flow reuses rule_id, path and run_idx after this one
 * lookup while rw_run_revs[run_idx] <= stamp <= the revision in force: nothing the verdict
 * depends on (the run's pods, egress mode and rules, or any node-wide part of the policy) has
 * changed since it was judged. An apply that changes run A moves rw_run_revs[A] only, so A's
 * flows are judged in full at their next packet in either direction (and stamp again) while
 * run B's stay on the fast path. Only allowed verdicts are cached. The entry's key (pod_ip) was
 * checked against the veth's pod when the entry was made, and the table is replaced whenever
 * the veth's pod changes, so a hit proves the source.
 */
struct rw_ct_value {
	__u64 created_ns; /* bpf_ktime_get_ns() at the first packet */
	__u64 seen_ns;	  /* created_ns, then moved on by the agent's expiry pass while active */
	__u64 stamp;	  /* revision the cached verdict was judged under; 0: none */
	__u32 rule_id;	  /* the rule that allows the flow */
	__u32 run_idx;	  /* cached with the verdict: whose counters */
	__u8 opened_by;	  /* enum rw_dir: RW_DIR_EGRESS = the pod opened it */
	__u8 active;	  /* set by packets, cleared by the agent's expiry pass */
	__u8 path;	  /* cached allow path, as seen from the opening direction */
	/* TCP: set by the datapath at the first allowed segment of the flow with a FIN from the
	 * pod, a FIN from the peer, an RST from either; cleared by a SYN (the ports reused). A
	 * closed connection (an RST, or a FIN each way) needs no revoke probe
	 * (user/lib/revoke_probe.c). Never read by a verdict.
	 */
	__u8 fin_pod;
	__u8 fin_peer;
	__u8 rst;
	__u8 pad[2];
};
_Static_assert(sizeof(struct rw_ct_value) == 40, "rw_ct_value layout");

/* rw_counters: per-CPU array; index 0 is the node total, index run_idx the run's own. Bumped
 * before any event is sent: the counters are exact, events are a sample.
 */
struct rw_counters {
	__u64 packets[RW_DIR_COUNT][RW_REASON_COUNT];
	__u64 bytes[RW_DIR_COUNT][RW_REASON_COUNT];
	__u64 events_sent;
	__u64 events_lost;	 /* ring buffer full */
	__u64 events_suppressed; /* over the sandbox's event budget */
	/* Refusals by the answer they got: [RW_ANSWER_RST], [RW_ANSWER_ICMP] sent back into the
	 * pod, [RW_ANSWER_BUDGET] dropped plainly over the sandbox's answer budget. [0] unused.
	 */
	__u64 answers[RW_ANSWER_COUNT];
};
_Static_assert(sizeof(struct rw_counters) == 792, "rw_counters layout");

/* rw_run_revs: ARRAY of __u64 indexed by run_idx, like the counters: the revision in which
 * anything run_idx's verdicts depend on last changed (its pods, egress mode or rules, its index
 * given to another run or freed, or any node-wide part: services, deny list, inbound rules,
 * the node's egress mode). Written by the agent before the flip that makes that revision live
 * (user/lib/apply_revs.c). Revisions only grow while the pins exist (an apply at or below the
 * revision in force is refused, and the pinned state outlives the agent), so a `>=` test on
 * the stamp is sound.
 */

/* Principals inside a pod (docs/principals.md). A rule whose id has RW_RULE_FROM set allows
 * only the senders its selector names; the datapath reads the sender from the packet's socket,
 * which crosses the veth with it (skb->sk: bpf_get_socket_uid(), bpf_skb_cgroup_id()).
 *
 * rw_from: HASH, (slot, rule id without RW_RULE_FROM) -> the rule's selector, written for a
 * slot with its other tables, before the flip that makes it live. A uid list (RW_FROM_UID) is
 * matched against the socket's owner; a container list (RW_FROM_CONTAINER) by rw_admit. Both
 * set: both must match. A rule id with the bit and no entry here admits no one.
 */
#define RW_FROM_UIDS	   8 /* uids one selector may name */
#define RW_FROM_CONTAINERS 8 /* containers one selector may name */
#define RW_FROM_UID	   (1u << 0)
#define RW_FROM_CONTAINER  (1u << 1)
#define RW_UID_NONE	   0xffffffffu /* no uid read */
#define RW_UID_OVERFLOW	   65534u      /* what bpf_get_socket_uid() returns without a full socket */
#ifndef RW_MAX_FROM
#define RW_MAX_FROM 4096 /* restricted rules of both slots together */
#endif
#ifndef RW_MAX_ADMIT
#define RW_MAX_ADMIT 65536 /* (container cgroup, slot, rule) admissions */
#endif
struct rw_from_key {
	__u32 slot;
	__u32 rule_id;
};
_Static_assert(sizeof(struct rw_from_key) == 8, "rw_from_key layout");

struct rw_from {
	__u32 flags; /* RW_FROM_UID, RW_FROM_CONTAINER */
	__u32 n_uids;
	__u32 uids[RW_FROM_UIDS];
};
_Static_assert(sizeof(struct rw_from) == 40, "rw_from layout");

/* rw_admit: HASH, (cgroup v2 id of a container, slot, rule id without RW_RULE_FROM) -> the host
 * veth of that container's pod. Written by the agent from the containers it found (their
 * cgroups and pods, user/agent/containers.c) for every rule whose selector names the
 * container: for a slot before its flip, and for the live slot as containers come and go. A
 * packet is the container's when its socket's cgroup has an entry for the rule AND it came in
 * on that veth: a socket of one pod's sidecar cannot speak for another pod.
 */
struct rw_admit_key {
	__u64 cgroup_id;
	__u32 slot;
	__u32 rule_id;
};
_Static_assert(sizeof(struct rw_admit_key) == 16, "rw_admit_key layout");

struct rw_admit {
	__u32 ifindex;
	__u32 pad;
};
_Static_assert(sizeof(struct rw_admit) == 8, "rw_admit layout");

/* rw_event_budget: three token buckets per veth ifindex, one for drops and one for new-flow
 * reports, so that one flooding sandbox cannot drown the events of the others and its junk
 * drops cannot hide its new flows, and one for the answers to its refused packets (its own
 * rate, rw_config.answer_rate), so that a refused-SYN flood cannot make the node send
 * unbounded resets. Each bucket is one word, a GCRA "theoretical arrival time"
 * in ticks of 1/event_rate s since boot: an event is allowed when tat < now + burst, and moves
 * tat to max(tat, now) + 1 with one compare-and-exchange. Over any interval a bucket allows at
 * most rate x time + burst events, whatever the CPUs interleave, and the refill is exact
 * (ticks are derived from the clock, never accumulated).
 */
enum rw_budget_kind {
	RW_BUDGET_DROP = 0,
	RW_BUDGET_FLOW = 1,
	RW_BUDGET_ANSWER = 2,
	RW_BUDGET_KINDS
};

struct rw_budget {
	__u64 tat[RW_BUDGET_KINDS]; /* ticks; 0: a full bucket */
};
_Static_assert(sizeof(struct rw_budget) == 24, "rw_budget layout");

/* Ticks of 1/rate s in `ns` nanoseconds, without overflow for any uptime and rate < 2^32. */
#define RW_BUDGET_TICKS(ns, rate)                   \
	((((__u64)(ns) / 1000000000ULL) * (rate)) + \
	 (((__u64)(ns) % 1000000000ULL) * (rate)) / 1000000000ULL)

/* One verdict, sent through rw_events for each drop and each new allowed flow. */
struct rw_event {
	__u64 ts_ns;	/* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 revision; /* policy revision the verdict was made under */
	__u32 ifindex;
	__u32 run_idx;
	__u32 run_gen;
	__u32 rule_id;		    /* allowed by this rule (0: none) */
	char run_id[RW_RUN_ID_LEN]; /* "" when the source is unknown */
	/* The family is the ethertype's: IPv4 and ARP in saddr/daddr, IPv6 in saddr6/daddr6. */
	union {
		__be32 saddr;
		__be32 saddr6[4];
	};
	union {
		__be32 daddr;
		__be32 daddr6[4];
	};
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 dir;	  /* enum rw_dir */
	__u8 verdict;	  /* enum rw_verdict */
	__u8 reason;	  /* enum rw_reason */
	__u8 path;	  /* enum rw_allow_path */
	__u8 answer;	  /* enum rw_answer: what the refused packet got back */
	__be16 ethertype; /* 0x0800 IPv4, 0x0806 ARP, 0x86dd IPv6; what an unsupported-l2 drop
			   * carried */
	/* The sender inside the pod, read from the packet's socket where a rule's "from" made
	 * the datapath look (a wrong-principal refusal): its uid (RW_UID_NONE: not read, or no
	 * socket) and its cgroup v2 id (0: the same).
	 */
	__u32 uid;
	__u64 cgroup_id;
};
_Static_assert(sizeof(struct rw_event) == 152, "rw_event layout");

/* `runwall explain` runs its own copy of the programs with rw_dry_run set: they judge but
 * change no state, and leave their decision in .bss (rw_explain_result).
 */
struct rw_explain {
	__u32 runs;   /* bumped by every dry run */
	__u8 reason;  /* enum rw_reason */
	__u8 path;    /* enum rw_allow_path */
	__u8 verdict; /* enum rw_verdict */
	__u8 answer;  /* enum rw_answer the packet would get (never RW_ANSWER_BUDGET) */
	__u32 rule_id;
	__u32 run_idx;
};
_Static_assert(sizeof(struct rw_explain) == 16, "rw_explain layout");

/* Cloud metadata addresses, host byte order: never allowed, whatever a rule says. AWS IMDS,
 * ECS task metadata, EKS Pod Identity agent, the Amazon DNS resolver and time sync service on
 * link-local, and Alibaba's metadata address (others share 169.254.169.254).
 */
#define RW_METADATA_ADDRS(X)             \
	X(0xa9fea9fe, "169.254.169.254") \
	X(0xa9feaa02, "169.254.170.2")   \
	X(0xa9feaa17, "169.254.170.23")  \
	X(0xa9fea9fd, "169.254.169.253") \
	X(0xa9fea97b, "169.254.169.123") \
	X(0x646464c8, "100.100.100.200")

/* Special-purpose and private ranges (RFC 6890 and friends), host byte order: denied unless an
 * explicit rule allows that exact destination and port. The last column is what the live view
 * calls a destination in the range.
 */
#define RW_SPECIAL_RANGES(X)                                  \
	X(0x00000000, 8, "0.0.0.0/8", "this network")         \
	X(0x0a000000, 8, "10.0.0.0/8", "private")             \
	X(0x64400000, 10, "100.64.0.0/10", "CGNAT")           \
	X(0x7f000000, 8, "127.0.0.0/8", "loopback")           \
	X(0xa9fe0000, 16, "169.254.0.0/16", "link-local")     \
	X(0xac100000, 12, "172.16.0.0/12", "private")         \
	X(0xc0000000, 24, "192.0.0.0/24", "IETF protocol")    \
	X(0xc0000200, 24, "192.0.2.0/24", "documentation")    \
	X(0xc0a80000, 16, "192.168.0.0/16", "private")        \
	X(0xc6120000, 15, "198.18.0.0/15", "benchmarking")    \
	X(0xc6336400, 24, "198.51.100.0/24", "documentation") \
	X(0xcb007100, 24, "203.0.113.0/24", "documentation")  \
	X(0xe0000000, 4, "224.0.0.0/4", "multicast")          \
	X(0xf0000000, 4, "240.0.0.0/4", "reserved")           \
	X(0xffffffff, 32, "255.255.255.255/32", "broadcast")

/* The IPv6 tables, each address as four 32-bit words in host byte order. Cloud metadata on
 * IPv6 (EKS on an IPv6 cluster): IMDS, Pod Identity, the Amazon DNS resolver and time sync.
 */
#define RW_METADATA6_ADDRS(X)                            \
	X(0xfd000ec2, 0, 0, 0x00000254, "fd00:ec2::254") \
	X(0xfd000ec2, 0, 0, 0x00000023, "fd00:ec2::23")  \
	X(0xfd000ec2, 0, 0, 0x00000253, "fd00:ec2::253") \
	X(0xfd000ec2, 0, 0, 0x00000123, "fd00:ec2::123")

/* Special-purpose IPv6 ranges (RFC 6890, RFC 4291 and the IANA registry): private-destination,
 * as the IPv4 ones. ::/96 holds the unspecified address, loopback and the deprecated
 * IPv4-compatible form (RFC 4291 2.5.5.1), which no translator serves; 64:ff9b:1::/48 is a local
 * NAT64 (RFC 8215) whose prefix length, and so where it carries the IPv4 address, only its
 * translator knows.
 */
#define RW_SPECIAL6_RANGES(X)                                                                  \
	X(0x00000000, 0, 0, 0x00000000, 96, "::/96", "unspecified, loopback, IPv4-compatible") \
	X(0x00000000, 0, 0xffff0000, 0x00000000, 96, "::ffff:0:0:0/96", "IPv4-translated")     \
	X(0xfe800000, 0, 0, 0x00000000, 10, "fe80::/10", "link-local")                         \
	X(0xfec00000, 0, 0, 0x00000000, 10, "fec0::/10", "site-local")                         \
	X(0xfc000000, 0, 0, 0x00000000, 7, "fc00::/7", "unique local")                         \
	X(0xff000000, 0, 0, 0x00000000, 8, "ff00::/8", "multicast")                            \
	X(0x20010db8, 0, 0, 0x00000000, 32, "2001:db8::/32", "documentation")                  \
	X(0x3fff0000, 0, 0, 0x00000000, 20, "3fff::/20", "documentation")                      \
	X(0x20010002, 0, 0, 0x00000000, 48, "2001:2::/48", "benchmarking")                     \
	X(0x01000000, 0, 0, 0x00000000, 64, "100::/64", "discard")                             \
	X(0x5f000000, 0, 0, 0x00000000, 16, "5f00::/16", "SRv6 SIDs")                          \
	X(0x0064ff9b, 0x00010000, 0, 0x00000000, 48, "64:ff9b:1::/48", "local NAT64")

/* IPv6 forms that carry an IPv4 address, and the bits that hold it. A destination in one of
 * them leaves the node by IPv6: a 6to4 or Teredo one toward whichever relay announces the
 * prefix, a NAT64 one toward whatever routes 64:ff9b::/96, never to the IPv4 service it names.
 * So the IPv4 address it carries may refuse it (metadata, a private or special range, the IPv4
 * deny list; a Teredo server as well as its client) but never allows it: past those it is
 * judged as the IPv6 address it is. The one exception is the cluster's NAT64 prefix where the
 * snapshot declares it (RW_SCOPE_NAT64). No rule may name one of these forms (the parser says:
 * write the IPv4 address). X(w0, w1, w2, w3, prefix length, text, label).
 */
#define RW_EMBEDDED4_RANGES(X)                                              \
	X(0x00000000, 0, 0x0000ffff, 0, 96, "::ffff:0:0/96", "IPv4-mapped") \
	X(0x0064ff9b, 0, 0, 0, 96, "64:ff9b::/96", "NAT64")                 \
	X(0x20020000, 0, 0, 0, 16, "2002::/16", "6to4")                     \
	X(0x20010000, 0, 0, 0, 32, "2001::/32", "Teredo")

/* The snapshot's declared NAT64 prefix (its "nat64" key, a /96 whose low 32 bits are the IPv4
 * address, RFC 6052) is one entry of the slot's rw_allow_cidr6 under this scope, port 0 and
 * protocol 0: it flips with the slot it belongs to. No run index reaches it (RW_MAX_RUNS). A
 * destination under it is judged as IPv4 to the address it carries, by every IPv4 rule.
 */
#define RW_SCOPE_NAT64	   0xffffffffu
#define RW_NAT64_PREFIXLEN 96
_Static_assert(RW_MAX_RUNS < RW_SCOPE_NAT64, "no run index is the NAT64 scope");

#endif /* RUNWALL_H */
