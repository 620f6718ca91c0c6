/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* model.h: the reference model of the datapath, test-only code. It decides a packet from the
 * documented contract (docs/architecture.md "The datapath", docs/reasons.md, the planned
 * verdict order of issue 13's brief, docs/ipv6.md for IPv6), never from bpf/: the differential
 * test (test_differential.c) holds the production programs to it.
 */
#ifndef RUNWALL_TEST_MODEL_H
#define RUNWALL_TEST_MODEL_H

#include <stddef.h>
#include <linux/types.h>
#include "runwall.h"
#include "policy.h"

/* Reason 14: a new flow over the sandbox's conntrack share. */
#define RW_MODEL_REASON_CONNTRACK_FULL 14

/* What the model knows of a packet's frame, parsed from its bytes by the contract. */
struct model_pkt {
	int reason; /* RW_REASON_ALLOWED when it parsed, else the drop reason */
	int is_arp;
	__be32 saddr, daddr; /* IPv4, or ARP sender/target */
	__be16 sport, dport; /* TCP/UDP only, else 0 */
	__u8 proto;	     /* IPPROTO_*, 0 for ARP */
	__u8 tcp_flags;
	int icmp_type; /* ICMP's type byte, -1: not ICMP or no byte */
	int is_ipv6;
	__u8 saddr6[16], daddr6[16];
	int nexthdr;	/* IPv6: the next header after the extension headers */
	int icmp6_type; /* ICMPv6's type byte, -1: not ICMPv6 */
	int icmp6_code;
	size_t icmp6_len; /* the ICMPv6 message's bytes, its header included */
	int nd_opts_bad;  /* NDP: an option a receiver discards the message for, or more than 8 */
	__u8 hop_limit;
	/* An NS's or NA's target address (its body holds one). */
	int has_target;
	__u8 target[16];
	/* An ICMPv6 error's quoted packet, when its fixed IPv6 header (no extension headers) and
	 * a TCP or UDP header's ports are all there: the flow it is about.
	 */
	int has_inner;
	__u8 in_saddr6[16], in_daddr6[16];
	__u8 in_proto;
	__be16 in_sport, in_dport;
};

/* Conntrack as the model sees it: who opened the flow of this packet on this veth. For an
 * ICMPv6 error, the state of the flow its quoted packet belongs to (the key the harness makes
 * with model_error_flow()), MODEL_CT_NONE unless that flow's cached verdict is of the policy in
 * force (docs/reasons.md "ICMPv6": a flow an apply has cut carries no more errors).
 */
enum model_ct { MODEL_CT_NONE = 0, MODEL_CT_BY_EGRESS, MODEL_CT_BY_INGRESS };

/* The veth's state: the pod bound to it (bound = 0: none), and which of its addresses are
 * (flags, RW_EP_*: an address whose flag is clear is not bound; RW_EP_GW6: gw_ip6 is the host
 * veth's link-local, the pod's IPv6 gateway). has_ll6: ll6 is the one link-local address the
 * pod's NDP speaks from (rw_ll6), learned from the first allowed NDP message of one (the
 * verdict's learn_ll6) and forgotten when the veth is unbound or its pod changes.
 */
struct model_binding {
	int bound;
	__be32 pod_ip;
	__u32 flags;
	__u8 pod_ip6[16];
	__u8 gw_ip6[16];
	int has_ll6;
	__u8 ll6[16];
};

/* The flow of the sandbox's table an ICMPv6 error is about, from the pod's side, as the key
 * rw_ct6_key names it: the quoted packet, reversed as the error's direction needs (out of the
 * pod it quotes a packet the pod received). Returns 0 when the error quotes no flow.
 */
int model_error_flow(const struct model_pkt *p, int dir, __u8 pod[16], __u8 peer[16],
		     __be16 *pod_port, __be16 *peer_port, __u8 *proto);

#define MODEL_MAX_RULES 16

struct model_verdict {
	int verdict; /* enum rw_verdict */
	int reason;  /* enum rw_reason (or 14) */
	int path;    /* enum rw_allow_path */
	/* Rules that could be "the" rule: equally specific matches of the winning lookup (a
	 * snapshot may list the same destination twice); the datapath must name one of them.
	 */
	__u32 rules[MODEL_MAX_RULES];
	int n_rules;
	int run; /* index into snapshot->runs charged with it, -1: none */
	/* Conntrack effect: an entry is created (opened by this direction). */
	int ct_create;
	int new_flow;  /* an allowed packet that is reported as a new flow */
	int answer;    /* enum rw_answer the refusal gets, its budget aside (a revoke's: rst) */
	int learn_ll6; /* allowed NDP whose link-local source is now the veth's (has_ll6) */
	const struct rw_policy_from *from; /* the deciding rule's "from" (NULL: anyone) */
};

/* Parse a frame (what the veth carries, Ethernet first) per docs/reasons.md. */
void model_parse(const __u8 *frame, size_t len, int vlan_out_of_band, struct model_pkt *p);

/* The run a veth's packets are charged to: its IPv6 pod's for an IPv6 frame (is_ipv6), its
 * IPv4 pod's for any other; -1: none.
 */
int model_run_of(const struct rw_policy *snap, const struct model_binding *ep,
		 const struct model_pkt *p);

/* Judge one packet. `snap` NULL: no snapshot applied yet. `ct` is the conntrack state of the
 * packet's flow on this veth; `ct_full` says the sandbox's conntrack share is full (planned);
 * `lease_expired` says the control plane's lease has run out (the lease-expired policy).
 */
void model_judge(const struct rw_policy *snap, const struct model_binding *ep, int dir,
		 const struct model_pkt *p, enum model_ct ct, int ct_full, int lease_expired,
		 struct model_verdict *v);

#endif /* RUNWALL_TEST_MODEL_H */
