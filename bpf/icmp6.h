/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* icmp6.h: ICMPv6 (next header 58) by type, the one IPv6 upper layer that is not judged as TCP
 * and UDP are (docs/ipv6.md, phase 3; docs/reasons.md#icmpv6):
 *
 *   NDP (133-136): between the pod and the node on the pod's own veth only, hop limit 255;
 *     what a pod can lie about is the target, so each target must be its own or the gateway's;
 *   echo (128, 129): unsupported-protocol, as ICMP is for IPv4;
 *   errors (1-4): only about a flow of the veth's IPv6 table whose verdict is current, and out
 *     of the pod only to that flow's peer;
 *   anything else (MLD, router advertisements and redirects from a pod, node information, ...):
 *     icmpv6-type.
 *
 * The programs call these for every ICMPv6 packet that parsed, after the source identity was
 * judged but before its verdict ends anything: NDP speaks from addresses identity refuses (a
 * link-local source, ::). `ep` is the veth's binding (NULL: none), `id_reason` what identity
 * said of the packet's pod-side address (x->pod is the veth's run, if any, and x->identified is
 * set when id_reason is RW_REASON_ALLOWED). `table` is the veth's IPv6 flow table (NULL: none).
 * Each returns the packet's reason, which the program finishes with. An allowed NDP message or
 * error is no flow: nothing is noted in conntrack, and no event is sent (as for ARP).
 *
 * API
 *   offers: rw_icmp6_egress(), rw_icmp6_ingress()
 *   needs:  runwall.h, bpf_net.h, maps.h, parse.h, ctx.h, policy.h, principal.h
 */
#ifndef RUNWALL_BPF_ICMP6_H
#define RUNWALL_BPF_ICMP6_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "runwall.h"
#include "bpf_net.h"
#include "maps.h"
#include "parse.h"
#include "ctx.h"
#include "policy.h"
#include "principal.h"

/* ICMPv6 types (RFC 4443 2.1, RFC 4861 4). */
#define RW_ICMP6_DEST_UNREACH	1
#define RW_ICMP6_PARAM_PROB	4 /* the last error type judged: 1 to 4 */
#define RW_ICMP6_ECHO_REQUEST	128
#define RW_ICMP6_ECHO_REPLY	129
#define RW_ND_ROUTER_SOLICIT	133
#define RW_ND_ROUTER_ADVERT	134
#define RW_ND_NEIGHBOUR_SOLICIT 135
#define RW_ND_NEIGHBOUR_ADVERT	136

/* The hop limit every NDP message is sent with and must arrive with (RFC 4861 6.1, 7.1): a
 * router would have decremented it, so 255 proves the sender is on the link (the veth).
 */
#define RW_ND_HOP_LIMIT 255

/* The fixed part of an NS or NA (RFC 4861 4.3, 4.4): type, code, checksum, flags or reserved,
 * then the target address at offset 8. An RS is the first 8 bytes alone (4.1), an RA 16 (4.2).
 */
struct rw_nd_msg {
	__u8 type;
	__u8 code;
	__sum16 check;
	__be32 flags;
	__be32 target[4];
};
#define RW_ND_RS_LEN 8
#define RW_ND_RA_LEN 16 /* with the hop limit, flags, lifetime and the two timers (4.2) */

/* The options after the fixed part (RFC 4861 4.6): a type, a length in units of 8 bytes, then
 * the option. The walk reads at most RW_ND_OPTS_MAX of them: a pod's stack sends one or two (its
 * link-layer address, a DAD nonce), the node's RA a handful. Option 1 is the source link-layer
 * address, which a message from :: never carries (6.1.1, 7.1.1).
 */
#define RW_ND_OPTS_MAX 8
#define RW_ND_OPT_SLLA 1

/* An ICMPv6 error (RFC 4443 3): 8 bytes of header, then as much of the invoking packet as fits,
 * of which the datapath reads its IPv6 header and the first 8 bytes after it (the ports of TCP
 * and UDP): RW_ICMP6_QUOTE_MIN bytes in all. An error quoting less cannot be tied to a flow.
 * The quote's addresses are loaded straight into the flow's key, and only its first 8 bytes
 * (version, next header) and the ports beside it: a copy of the whole quote beside the key took
 * rw_egress6's stack 48 bytes deeper, and IPv6's programs are the ones near the verifier's 512
 * (docs/ipv6.md). The four loads cost verified instructions instead (about 21 000 on 6.18).
 */
#define RW_ICMP6_ERROR_HDR 8
#define RW_ICMP6_QUOTE_MIN (RW_ICMP6_ERROR_HDR + 40 + 8)
#define RW_QUOTE_SADDR	   8 /* offsets in the quoted IPv6 header (RFC 8200 3) */
#define RW_QUOTE_DADDR	   24
#define RW_QUOTE_PORTS	   40 /* the source and destination ports of TCP and UDP */

/* fe80::/10 (RFC 4291 2.5.6): scoped to the link, here the veth, which only the pod and the
 * node share.
 */
static __always_inline int rw_ip6_linklocal(const __be32 *a)
{
	return (a[0] & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000);
}

static __always_inline int rw_ip6_unspecified(const __be32 *a)
{
	return !(a[0] | a[1] | a[2] | a[3]);
}

static __always_inline int rw_ip6_multicast(const __be32 *a)
{
	return (a[0] & bpf_htonl(0xff000000)) == bpf_htonl(0xff000000);
}

/* ff02::1:ffXX:XXXX, a solicited-node address (RFC 4291 2.7.1): where an NS for an address
 * whose low 24 bits are XX:XXXX goes.
 */
static __always_inline int rw_ip6_solicited_node(const __be32 *a)
{
	return a[0] == bpf_htonl(0xff020000) && !a[1] && a[2] == bpf_htonl(1) &&
	       (a[3] & bpf_htonl(0xff000000)) == bpf_htonl(0xff000000);
}

/* ff02::N, a link-scope group: 1 all nodes, 2 all routers (RFC 4291 2.7.1). */
static __always_inline int rw_ip6_link_group(const __be32 *a, __u32 n)
{
	return a[0] == bpf_htonl(0xff020000) && !a[1] && !a[2] && a[3] == bpf_htonl(n);
}

/* The veth's bound IPv6 (the pod's) or its gateway (the host veth's link-local). */
static __always_inline int rw_ep_pod6(const struct rw_endpoint *ep, const __be32 *a)
{
	return (ep->flags & RW_EP_IP6) && rw_addr6_eq(a, ep->pod_ip6);
}

static __always_inline int rw_ep_gw6(const struct rw_endpoint *ep, const __be32 *a)
{
	return (ep->flags & RW_EP_GW6) && rw_addr6_eq(a, ep->gw_ip6);
}

/* The checks of RFC 4861 6.1.1, 6.1.2, 7.1.1 and 7.1.2 every receiver makes (hop limit 255, code
 * 0, the length, a target that is no multicast address, every option of a length above 0 and
 * within the message, no source link-layer address option from ::), so that a message a
 * receiver would discard is never let through to be read some other way: malformed. A message
 * with more than RW_ND_OPTS_MAX options is malformed too: what is not read is not let through.
 * The checksum is the receiver's. Loads the message into *m (the target only for an NS or NA).
 * Returns RW_REASON_ALLOWED or the reason.
 */
static __always_inline int rw_nd_valid(struct rw_ctx *x, struct rw_nd_msg *m)
{
	const struct rw_pkt *p = &x->pkt;
	__u8 type = p->icmp6_type;
	int with_target = type == RW_ND_NEIGHBOUR_SOLICIT || type == RW_ND_NEIGHBOUR_ADVERT;
	__u32 len = with_target			  ? sizeof(*m)
		    : type == RW_ND_ROUTER_ADVERT ? RW_ND_RA_LEN
						  : RW_ND_RS_LEN;

	if (p->hop_limit != RW_ND_HOP_LIMIT || p->icmp6_len < len)
		return RW_REASON_MALFORMED;
	if (with_target) {
		if (bpf_skb_load_bytes(x->skb, p->l4_off, m, sizeof(*m)) ||
		    rw_ip6_multicast(m->target))
			return RW_REASON_MALFORMED;
	} else if (bpf_skb_load_bytes(x->skb, p->l4_off, m, RW_ND_RS_LEN)) {
		return RW_REASON_MALFORMED;
	}
	if (m->code)
		return RW_REASON_MALFORMED;
		/* Each option's type and length go through m's checksum field, which nothing reads: a
	 * buffer of its own would deepen rw_egress6's stack (docs/ipv6.md).
	 */
#pragma unroll
	for (int i = 0; i <= RW_ND_OPTS_MAX; i++) {
		__u8 *opt = (__u8 *)&m->check;

		if (len >= p->icmp6_len)
			break;
		if (i == RW_ND_OPTS_MAX || len + 2 > p->icmp6_len ||
		    bpf_skb_load_bytes(x->skb, p->l4_off + len, opt, 2) || !opt[1] ||
		    (opt[0] == RW_ND_OPT_SLLA && rw_ip6_unspecified(p->saddr6)))
			return RW_REASON_MALFORMED;
		len += opt[1] * 8;
		if (len > p->icmp6_len)
			return RW_REASON_MALFORMED;
	}
	return RW_REASON_ALLOWED;
}

/* NDP out of the pod: RS, NS, NA; an RA that a receiver would take is icmpv6-type. The source is the pod's: its one
 * link-local address (rw_ll6: the first link-local source of its NDP, learned once it is
 * allowed; never the gateway's), its bound IPv6, or :: for an NS of duplicate address detection
 * (RFC 4862 5.4.2, to the target's solicited-node address); else spoofed-source. One link-local
 * source per veth because the node makes a neighbour entry for the source of each NS (and RS)
 * it receives, in a table all pods share (docs/architecture.md, threat model). The destination
 * is on the veth: a link-local address, a solicited-node address (an NS), all nodes (an NA) or
 * all routers (an RS); else icmpv6-type. The target is what NDP claims, so it is checked
 * against the binding: an NS may ask for the gateway or any link-local address, but DAD only
 * for the pod's own (its bound IPv6, its learned link-local: a DAD answered for the gateway's
 * tentative address would take it from the node); an NA may only answer for its bound IPv6 or
 * for the link-local address it speaks from, never the gateway's, and while the gateway is not
 * known (RW_EP_GW6 clear) only for a link-local already learned, since it may be the
 * gateway's. Another's target is spoofed-source.
 */
static __always_inline int rw_nd_egress(struct rw_ctx *x, const struct rw_endpoint *ep,
					int id_reason)
{
	const struct rw_pkt *p = &x->pkt;
	__u8 type = p->icmp6_type;
	struct rw_nd_msg m;
	int reason, dad;
	__be32 *ll; /* looked up where needed: a pointer kept across the checks costs stack */
	__u32 *key; /* the veth's ifindex, in rw_ll6 */

	reason = rw_nd_valid(x, &m);
	if (reason != RW_REASON_ALLOWED)
		return reason;
	/* A pod is no router (RFC 4861 6.2.6, 8.2): it never advertises one. */
	if (type == RW_ND_ROUTER_ADVERT)
		return RW_REASON_ICMPV6_TYPE;
	/* rw_ll6's key and value go through m, whose flags nothing reads once the message is
	 * valid (and whose target is done with when the value is stored): a pointer into x given
	 * to a helper would keep all of x in memory (24 bytes more of rw_egress6's stack), and a
	 * local key of its own 8 (32 with 6.1's rounding of each frame); IPv6's programs are the
	 * ones near the verifier's 512 with their subprograms' frames (docs/ipv6.md).
	 */
	key = (__u32 *)&m.flags;
	*key = x->ifindex;
	dad = rw_ip6_unspecified(p->saddr6);
	if (dad) {
		if (type != RW_ND_NEIGHBOUR_SOLICIT || !rw_ip6_solicited_node(p->daddr6))
			return RW_REASON_SPOOFED_SOURCE;
	} else if (rw_ep_gw6(ep, p->saddr6)) {
		return RW_REASON_SPOOFED_SOURCE;
	} else if (rw_ip6_linklocal(p->saddr6)) {
		ll = bpf_map_lookup_elem(&rw_ll6, key);
		if (ll && !rw_addr6_eq(ll, p->saddr6))
			return RW_REASON_SPOOFED_SOURCE;
	} else if (id_reason != RW_REASON_ALLOWED) {
		return id_reason;
	}
	if (!rw_ip6_linklocal(p->daddr6) &&
	    !(type == RW_ND_NEIGHBOUR_SOLICIT && rw_ip6_solicited_node(p->daddr6)) &&
	    !(type == RW_ND_NEIGHBOUR_ADVERT && rw_ip6_link_group(p->daddr6, 1)) &&
	    !(type == RW_ND_ROUTER_SOLICIT && rw_ip6_link_group(p->daddr6, 2)))
		return RW_REASON_ICMPV6_TYPE;
	if (type == RW_ND_NEIGHBOUR_SOLICIT && dad) {
		if (!rw_ep_pod6(ep, m.target)) {
			ll = bpf_map_lookup_elem(&rw_ll6, key);
			if (!ll || !rw_addr6_eq(ll, m.target) || rw_ep_gw6(ep, m.target))
				return RW_REASON_SPOOFED_SOURCE;
		}
	} else if (type == RW_ND_NEIGHBOUR_SOLICIT) {
		if (!rw_ep_gw6(ep, m.target) && !rw_ip6_linklocal(m.target))
			return RW_REASON_SPOOFED_SOURCE;
	} else if (type == RW_ND_NEIGHBOUR_ADVERT && !rw_ep_pod6(ep, m.target)) {
		if (!rw_ip6_linklocal(m.target) || !rw_addr6_eq(m.target, p->saddr6) ||
		    (!(ep->flags & RW_EP_GW6) && !bpf_map_lookup_elem(&rw_ll6, key)))
			return RW_REASON_SPOOFED_SOURCE;
	}
	/* The veth's link-local, learned by the first allowed message from one (on any CPU:
	 * BPF_NOEXIST); a later one finds it stored, and must be it. A dry run judges as if it
	 * had been learned.
	 */
	if (rw_ip6_linklocal(p->saddr6) && !*x->dry_run) {
		__builtin_memcpy(m.target, p->saddr6, sizeof(m.target));
		if (bpf_map_update_elem(&rw_ll6, key, m.target, BPF_NOEXIST)) {
			ll = bpf_map_lookup_elem(&rw_ll6, key);
			if (!ll || !rw_addr6_eq(ll, p->saddr6))
				return RW_REASON_SPOOFED_SOURCE;
		}
	}
	x->path = RW_PATH_NDP;
	return RW_REASON_ALLOWED;
}

/* NDP into the pod: from a link-local source with hop limit 255, which only the node can send
 * on the veth (a router never forwards a link-local source, RFC 4291 2.5.6, and would have
 * decremented the hop limit), to the pod: a link-local address, its bound IPv6, its
 * solicited-node address or all nodes. The node is trusted with what it claims. A global source,
 * or another unicast destination, is inbound-denied; another group icmpv6-type.
 */
static __always_inline int rw_nd_ingress(struct rw_ctx *x, int id_reason)
{
	const struct rw_pkt *p = &x->pkt;
	struct rw_nd_msg m;
	int reason;

	reason = rw_nd_valid(x, &m);
	if (reason != RW_REASON_ALLOWED)
		return reason;
	if (!rw_ip6_linklocal(p->saddr6))
		return RW_REASON_INBOUND_DENIED;
	if (id_reason != RW_REASON_ALLOWED && !rw_ip6_linklocal(p->daddr6) &&
	    !rw_ip6_solicited_node(p->daddr6) && !rw_ip6_link_group(p->daddr6, 1))
		return rw_ip6_multicast(p->daddr6) ? RW_REASON_ICMPV6_TYPE : id_reason;
	x->path = RW_PATH_NDP;
	return RW_REASON_ALLOWED;
}

/* An ICMPv6 error (1 to 4) of a flow of the veth's IPv6 table: the quoted packet's IPv6 header
 * (no extension headers: a packet of a tracked flow has none the error would need to be read
 * past) and its first 8 bytes give the flow, seen from the pod: out of the pod the quote is a
 * packet the pod received (peer to pod), into it one the pod sent (pod to peer). Out of the pod
 * the error must go to that flow's peer, the quote's source, so that a pod cannot aim it
 * anywhere else; into the pod any router on the path may send it (a packet too big). The flow's
 * entry must carry a verdict of the policy in force, as the fast path's test (runwall.bpf.c,
 * rw_fast()) says: a flow an apply has cut carries no more errors, and under an expired lease
 * no cached verdict is trusted (the lease-expired policy would judge the flow's own packets
 * again, and may refuse them). Anything else, a quote too
 * short to name a flow included, is icmp-unrelated.
 */
static __always_inline int rw_icmp6_related(struct rw_ctx *x, void *table)
{
	const struct rw_pkt *p = &x->pkt;
	__u32 quote = p->l4_off + RW_ICMP6_ERROR_HDR, idx;
	__be32 *qsrc, *qdst; /* where the quote's addresses go in the key */
	struct rw_ct_value *ct;
	struct rw_ct6_key k;
	__be16 ports[2];
	__u8 head[8];
	__u64 *run_rev;

	__builtin_memset(&k, 0, sizeof(k));
	/* The quote is a packet the pod received (peer to pod) out of it, one it sent into it. */
	qsrc = x->dir == RW_DIR_EGRESS ? k.peer_ip : k.pod_ip;
	qdst = x->dir == RW_DIR_EGRESS ? k.pod_ip : k.peer_ip;
	if (!table || p->icmp6_len < RW_ICMP6_QUOTE_MIN ||
	    bpf_skb_load_bytes(x->skb, quote, head, sizeof(head)) ||
	    bpf_skb_load_bytes(x->skb, quote + RW_QUOTE_SADDR, qsrc, 16) ||
	    bpf_skb_load_bytes(x->skb, quote + RW_QUOTE_DADDR, qdst, 16) ||
	    bpf_skb_load_bytes(x->skb, quote + RW_QUOTE_PORTS, ports, sizeof(ports)))
		return RW_REASON_ICMP_UNRELATED;
	/* head: version in the top 4 bits of byte 0, the next header at byte 6. */
	if (head[0] >> 4 != 6 || (head[6] != RW_NH_TCP && head[6] != RW_NH_UDP))
		return RW_REASON_ICMP_UNRELATED;
	k.ifindex = x->ifindex;
	k.proto = head[6];
	if (x->dir == RW_DIR_EGRESS) {
		/* Out of the pod: only to the quoted packet's sender, the flow's peer. */
		if (!rw_addr6_eq(p->daddr6, k.peer_ip))
			return RW_REASON_ICMP_UNRELATED;
		k.pod_port = ports[1];
		k.peer_port = ports[0];
	} else {
		k.pod_port = ports[0];
		k.peer_port = ports[1];
	}
	ct = bpf_map_lookup_elem(table, &k);
	if (!ct)
		return RW_REASON_ICMP_UNRELATED;
	idx = ct->run_idx;
	run_rev = bpf_map_lookup_elem(&rw_run_revs, &idx);
	if (x->lease_expired || !run_rev || !ct->stamp || ct->stamp < *run_rev ||
	    ct->stamp > x->revision)
		return RW_REASON_ICMP_UNRELATED;
	x->rule_id = ct->rule_id;
	x->path = RW_PATH_RELATED;
	/* Out of the pod, an error about a flow of a rule with a "from" is that rule's principal's
	 * to send, like the flow's own packets (principal.h).
	 */
	if (x->dir == RW_DIR_EGRESS && (ct->rule_id & RW_RULE_FROM))
		return rw_principal_check(x);
	return RW_REASON_ALLOWED;
}

/* By type, the same in both directions but for NDP: a veth with no IPv6 pod of a run (no
 * binding, or no run naming it) has nothing to speak NDP or errors for: unknown-source. NDP is
 * judged by its own rules, since it speaks from addresses identity refuses; echo and errors
 * need the identity proven (the pod's own address); every other type is refused.
 */
static __always_inline int rw_icmp6_judge(struct rw_ctx *x, void *table,
					  const struct rw_endpoint *ep, int id_reason)
{
	__u8 type = x->pkt.icmp6_type;

	if (!ep || id_reason == RW_REASON_UNKNOWN_SOURCE)
		return RW_REASON_UNKNOWN_SOURCE;
	if (type >= RW_ND_ROUTER_SOLICIT && type <= RW_ND_NEIGHBOUR_ADVERT) {
		if (x->dir == RW_DIR_INGRESS)
			return rw_nd_ingress(x, id_reason);
		return rw_nd_egress(x, ep, id_reason);
	}
	if (type == RW_ICMP6_ECHO_REQUEST || type == RW_ICMP6_ECHO_REPLY)
		return id_reason == RW_REASON_ALLOWED ? RW_REASON_UNSUPPORTED_PROTOCOL : id_reason;
	if (type >= RW_ICMP6_DEST_UNREACH && type <= RW_ICMP6_PARAM_PROB)
		return id_reason == RW_REASON_ALLOWED ? rw_icmp6_related(x, table) : id_reason;
	return RW_REASON_ICMPV6_TYPE;
}

/* Out of the pod (rw_egress). */
static __always_inline int rw_icmp6_egress(struct rw_ctx *x, const struct rw_view *v, void *table,
					   const struct rw_endpoint *ep, int id_reason)
{
	return rw_icmp6_judge(x, table, ep, id_reason);
}

/* Into the pod (rw_ingress). */
static __always_inline int rw_icmp6_ingress(struct rw_ctx *x, const struct rw_view *v, void *table,
					    const struct rw_endpoint *ep, int id_reason)
{
	return rw_icmp6_judge(x, table, ep, id_reason);
}

#endif /* RUNWALL_BPF_ICMP6_H */
