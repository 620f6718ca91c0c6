// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* model.c: the reference model, written from the contract (docs/architecture.md "The datapath",
 * docs/reasons.md, the planned order of issue 13), not from bpf/. Plain C over the parsed
 * snapshot: no maps, no tries, no hashes, just the rules as the snapshot lists them.
 */
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "model.h"

static __u16 get16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

/* IPv6 per docs/reasons.md ("IPv6 parsing"): the fixed header, at most RW_IPV6_EXT_MAX
 * extension headers of RW_IPV6_EXT_BYTES together, the upper layer; a packet that gets through
 * is unsupported-l2 all the same (no IPv6 identity or policy yet).
 */
static int model_parse_ipv6(const __u8 *f, size_t len, struct model_pkt *p)
{
	const __u8 *ip = f + 14, *l4;
	size_t payload, chain = 0, left;
	int nh, n = 0;

	p->is_ipv6 = 1;
	if (len < 14 + 40)
		return RW_REASON_MALFORMED;
	memcpy(p->saddr6, ip + 8, 16);
	memcpy(p->daddr6, ip + 24, 16);
	if ((ip[0] >> 4) != 6)
		return RW_REASON_MALFORMED;
	payload = get16(ip + 4);
	if (payload == 0)
		return RW_REASON_IPV6_JUMBOGRAM;
	if (payload > len - 14 - 40)
		return RW_REASON_MALFORMED;
	nh = ip[6];
	while (nh == 0 || nh == 43 || nh == 44 || nh == 60) {
		const __u8 *h = ip + 40 + chain;
		size_t hlen;

		if (n == RW_IPV6_EXT_MAX)
			return RW_REASON_IPV6_EXT_HEADERS;
		if (nh == 0 && n > 0)
			return RW_REASON_MALFORMED; /* hop-by-hop comes first */
		if (payload - chain < 8)
			return RW_REASON_MALFORMED;
		if (nh == 44)
			return RW_REASON_FRAGMENT;
		if (nh == 43 && h[3] != 0)
			return RW_REASON_IPV6_ROUTING;
		hlen = (h[1] + 1) * 8;
		if (chain + hlen > RW_IPV6_EXT_BYTES)
			return RW_REASON_IPV6_EXT_HEADERS;
		if (chain + hlen > payload)
			return RW_REASON_MALFORMED;
		chain += hlen;
		nh = h[0];
		n++;
	}
	p->nexthdr = nh;
	switch (nh) {
	case 50:
	case 51:
	case 59:
	case 135:
	case 139:
	case 140:
	case 253:
	case 254:
		return RW_REASON_IPV6_NEXT_HEADER;
	}
	l4 = ip + 40 + chain;
	left = payload - chain;
	if (nh == IPPROTO_TCP) {
		if (left < 20)
			return RW_REASON_MALFORMED;
		memcpy(&p->sport, l4, 2);
		memcpy(&p->dport, l4 + 2, 2);
		p->tcp_flags = l4[13];
		if ((l4[12] >> 4) < 5 || (size_t)(l4[12] >> 4) * 4 > left)
			return RW_REASON_MALFORMED;
	} else if (nh == IPPROTO_UDP) {
		if (left < 8)
			return RW_REASON_MALFORMED;
		memcpy(&p->sport, l4, 2);
		memcpy(&p->dport, l4 + 2, 2);
		if (get16(l4 + 4) < 8 || get16(l4 + 4) > left)
			return RW_REASON_MALFORMED;
	} else if (nh == 58) {
		if (left < 4)
			return RW_REASON_MALFORMED;
		p->icmp6_type = l4[0];
	}
	return RW_REASON_UNSUPPORTED_L2;
}

void model_parse(const __u8 *f, size_t len, int vlan_out_of_band, struct model_pkt *p)
{
	size_t ihl, tot_len;

	memset(p, 0, sizeof(*p));
	p->icmp_type = -1;
	p->icmp6_type = -1;
	/* unsupported-l2: VLAN tags, in the header or out of band. */
	if (vlan_out_of_band) {
		p->reason = RW_REASON_UNSUPPORTED_L2;
		return;
	}
	if (len < 14) {
		p->reason = RW_REASON_MALFORMED;
		return;
	}
	if (get16(f + 12) == 0x0806) {
		/* ARP must be Ethernet/IPv4: a whole 28-byte body, htype 1, ptype IPv4, 6 and 4. */
		p->is_arp = 1;
		if (len < 14 + 28) {
			p->reason = RW_REASON_MALFORMED;
			return;
		}
		memcpy(&p->saddr, f + 14 + 14, 4);
		memcpy(&p->daddr, f + 14 + 24, 4);
		if (get16(f + 14) != 1 || get16(f + 16) != 0x0800 || f[18] != 6 || f[19] != 4)
			p->reason = RW_REASON_MALFORMED;
		return;
	}
	if (get16(f + 12) == 0x86dd) {
		p->reason = model_parse_ipv6(f, len, p);
		return;
	}
	/* Any ethertype but IPv4, IPv6 and ARP. */
	if (get16(f + 12) != 0x0800) {
		p->reason = RW_REASON_UNSUPPORTED_L2;
		return;
	}
	if (len < 14 + 20) {
		p->reason = RW_REASON_MALFORMED;
		return;
	}
	memcpy(&p->saddr, f + 14 + 12, 4);
	memcpy(&p->daddr, f + 14 + 16, 4);
	p->proto = f[14 + 9];
	ihl = (f[14] & 0xf) * 4;
	tot_len = get16(f + 14 + 2);
	/* IHL < 5, not version 4, tot_len beyond the frame or below the header. */
	if ((f[14] >> 4) != 4 || ihl < 20 || tot_len < ihl || tot_len > len - 14) {
		p->reason = RW_REASON_MALFORMED;
		return;
	}
	if (ihl > 20) {
		p->reason = RW_REASON_IP_OPTIONS;
		return;
	}
	/* Any fragment, first (MF) or later (offset): DF alone is not one. */
	if (get16(f + 14 + 6) & 0x3fff) {
		p->reason = RW_REASON_FRAGMENT;
		return;
	}
	if (p->proto == IPPROTO_TCP) {
		const __u8 *t = f + 34;

		if (tot_len < 20 + 20) {
			p->reason = RW_REASON_MALFORMED;
			return;
		}
		memcpy(&p->sport, t, 2);
		memcpy(&p->dport, t + 2, 2);
		p->tcp_flags = t[13];
		if ((t[12] >> 4) < 5 || (size_t)(t[12] >> 4) * 4 > tot_len - 20)
			p->reason = RW_REASON_MALFORMED;
	} else if (p->proto == IPPROTO_UDP) {
		const __u8 *u = f + 34;

		if (tot_len < 20 + 8) {
			p->reason = RW_REASON_MALFORMED;
			return;
		}
		memcpy(&p->sport, u, 2);
		memcpy(&p->dport, u + 2, 2);
		if (get16(u + 4) < 8 || get16(u + 4) > tot_len - 20)
			p->reason = RW_REASON_MALFORMED;
	} else if (p->proto == IPPROTO_ICMP && tot_len > 20) {
		p->icmp_type = f[34];
	}
}

/* ---- the address tables of the contract (include/runwall.h, docs/reasons.md) ---- */

static int is_metadata(__be32 addr)
{
	__u32 a = ntohl(addr);

#define M(host, str)     \
	if (a == (host)) \
		return 1;
	RW_METADATA_ADDRS(M)
#undef M
	return 0;
}

static int in_cidr(__be32 addr, __be32 net, int len)
{
	__u32 mask = len ? 0xffffffffu << (32 - len) : 0;

	return (ntohl(addr) & mask) == (ntohl(net) & mask);
}

static int is_special(__be32 addr)
{
#define S(net, len, str, label)             \
	if (in_cidr(addr, htonl(net), len)) \
		return 1;
	RW_SPECIAL_RANGES(S)
#undef S
	return 0;
}

static int is_denied(const struct rw_policy *s, __be32 addr)
{
	for (size_t i = 0; i < s->n_deny; i++)
		if (in_cidr(addr, s->deny[i].addr, s->deny[i].prefixlen))
			return 1;
	return 0;
}

static int has_port(const struct rw_policy_rule *r, __u16 port, __u8 proto)
{
	const __u16 *ports = proto == IPPROTO_TCP ? r->tcp : proto == IPPROTO_UDP ? r->udp : NULL;
	size_t n = proto == IPPROTO_TCP ? r->n_tcp : proto == IPPROTO_UDP ? r->n_udp : 0;

	for (size_t i = 0; i < n; i++)
		if (ports[i] == port)
			return 1;
	return 0;
}

/* The rules of one list that match: exact (a /32: "exact IP:port") or CIDR (the longest prefix
 * that matches; every rule of that length is a candidate).
 */
struct match {
	__u32 rules[MODEL_MAX_RULES];
	int n;
	int prefixlen;
};

enum { EXACT, CIDR, ANY_LEN };

static void match_rules(const struct rw_policy_rule *rules, size_t n, int kind, int a, int is_run,
			__be32 addr, __u16 port, __u8 proto, struct match *m)
{
	m->n = 0;
	m->prefixlen = -1;
	for (size_t i = 0; i < n; i++) {
		const struct rw_policy_rule *r = &rules[i];
		__u32 id;

		if (kind == EXACT && r->prefixlen != 32)
			continue;
		if (kind == CIDR && r->prefixlen == 32)
			continue;
		if (!in_cidr(addr, r->addr, r->prefixlen) || !has_port(r, port, proto))
			continue;
		if (r->prefixlen < m->prefixlen)
			continue;
		if (r->prefixlen > m->prefixlen) {
			m->n = 0;
			m->prefixlen = r->prefixlen;
		}
		id = is_run ? RW_RULE_ID(RW_RULE_KIND_RUN, a, i)
			    : RW_RULE_ID(a, i, 0); /* a: the kind, for services and inbound */
		if (m->n < MODEL_MAX_RULES)
			m->rules[m->n++] = id;
	}
}

static void take(struct model_verdict *v, const struct match *m, int path)
{
	v->verdict = RW_VERDICT_ALLOW;
	v->reason = RW_REASON_ALLOWED;
	v->path = path;
	memcpy(v->rules, m->rules, sizeof(m->rules));
	v->n_rules = m->n;
}

/* The egress policy of run `ri` for daddr:dport (docs/architecture.md verdict order, from "protocol" on).
 * Under an expired lease (docs/policy-watch.md "The lease") the run has no rules and no egress
 * mode: what the services do not allow is lease-expired, past the contract's other refusals.
 */
static void egress_policy(const struct rw_policy *s, int ri, __be32 daddr, __be16 dport_be,
			  __u8 proto, int lease_expired, struct model_verdict *v)
{
	const struct rw_policy_run *run = &s->runs[ri];
	__u16 dport = ntohs(dport_be);
	struct match se, sc, re, rc;
	int special;

	v->verdict = RW_VERDICT_DROP;
	v->path = RW_PATH_NONE;
	v->n_rules = 0;
	if (is_metadata(daddr)) {
		v->reason = RW_REASON_METADATA;
		return;
	}
	match_rules(s->services, s->n_services, EXACT, RW_RULE_KIND_SERVICE, 0, daddr, dport, proto,
		    &se);
	match_rules(s->services, s->n_services, CIDR, RW_RULE_KIND_SERVICE, 0, daddr, dport, proto,
		    &sc);
	match_rules(run->allow, lease_expired ? 0 : run->n_allow, EXACT, ri, 1, daddr, dport, proto,
		    &re);
	match_rules(run->allow, lease_expired ? 0 : run->n_allow, CIDR, ri, 1, daddr, dport, proto,
		    &rc);
	special = is_special(daddr) || is_denied(s, daddr);
	/* DNS: port 53 to any destination no rule allows explicitly on 53 (in the planned order a
	 * run's rule cannot allow a private or denied destination, so it does not count there).
	 */
	if (dport == 53 && !se.n && !sc.n &&
	    (RW_MODEL_PLANNED ? special || (!re.n && !rc.n) : !re.n && !rc.n)) {
		v->reason = RW_REASON_DNS;
		return;
	}
	if (!RW_MODEL_PLANNED) {
		/* Today (docs "explicit allow rules (services, then the run's own; exact IP:port
		 * by hash, CIDRs by LPM)"): every exact rule, services' then the run's, then every
		 * CIDR rule the same way, all before the private and special ranges.
		 */
		if (se.n)
			return take(v, &se, RW_PATH_RULE);
		if (re.n)
			return take(v, &re, RW_PATH_RULE);
		if (sc.n)
			return take(v, &sc, RW_PATH_RULE_CIDR);
		if (rc.n)
			return take(v, &rc, RW_PATH_RULE_CIDR);
	}
	/* Planned: the platform's services (exact, then CIDR) first... */
	if (se.n)
		return take(v, &se, RW_PATH_RULE);
	if (sc.n)
		return take(v, &sc, RW_PATH_RULE_CIDR);
	if (special) {
		v->reason = RW_REASON_PRIVATE_DESTINATION;
		return;
	}
	/* Planned: run rules after the ranges; they can never open a private destination. */
	if (re.n)
		return take(v, &re, RW_PATH_RULE);
	if (rc.n)
		return take(v, &rc, RW_PATH_RULE_CIDR);
	if (lease_expired) {
		v->reason = RW_REASON_LEASE_EXPIRED;
		return;
	}
	if (rw_policy_run_egress(s, run) == RW_EGRESS_OPEN) {
		v->verdict = RW_VERDICT_ALLOW;
		v->reason = RW_REASON_ALLOWED;
		v->path = RW_PATH_OPEN;
		return;
	}
	v->reason = RW_REASON_NOT_ALLOWLISTED;
}

/* May `peer` open (or keep) a connection to the sandbox's port? (longest peer CIDR wins) */
static int inbound_policy(const struct rw_policy *s, __be32 peer, __be16 port, __u8 proto,
			  struct match *m)
{
	match_rules(s->inbound, s->n_inbound, ANY_LEN, RW_RULE_KIND_INBOUND, 0, peer, ntohs(port),
		    proto, m);
	return m->n > 0;
}

static int run_of(const struct rw_policy *s, __be32 ip)
{
	for (size_t r = 0; r < s->n_runs; r++)
		for (size_t i = 0; i < s->runs[r].n_pods; i++)
			if (s->runs[r].pods[i] == ip)
				return (int)r;
	return -1;
}

static int is_syn(const struct model_pkt *p)
{
	return p->proto == IPPROTO_TCP && (p->tcp_flags & 0x12) == 0x02;
}

static void drop(struct model_verdict *v, int reason)
{
	v->verdict = RW_VERDICT_DROP;
	v->reason = reason;
	v->path = RW_PATH_NONE;
	v->n_rules = 0;
}

/* An allowed packet that opens (or continues) a flow from `dir`: its conntrack entry, and
 * whether it is reported as a new flow.
 */
static void open_flow(const struct model_pkt *p, enum model_ct ct, int ct_full, int dir,
		      struct model_verdict *v)
{
	enum model_ct mine = dir == RW_DIR_EGRESS ? MODEL_CT_BY_EGRESS : MODEL_CT_BY_INGRESS;

	v->ct_create = ct == MODEL_CT_NONE;
	if (RW_MODEL_PLANNED) {
		/* A sandbox's new flow over its own conntrack share is dropped, never let in by
		 * evicting another's.
		 */
		if (v->ct_create && ct_full) {
			v->ct_create = 0;
			return drop(v, RW_MODEL_REASON_CONNTRACK_FULL);
		}
		/* Every new conntrack entry is reported, whatever its protocol and flags. */
		v->new_flow = v->ct_create;
	} else {
		/* Today: a TCP SYN, or the first UDP packet of a flow. */
		v->new_flow = is_syn(p) || (p->proto == IPPROTO_UDP && v->ct_create);
	}
	(void)mine;
}

static void judge(const struct rw_policy *s, const struct model_binding *ep, int dir,
		  const struct model_pkt *p, enum model_ct ct, int ct_full, int lease_expired,
		  struct model_verdict *v)
{
	int run = -1;
	struct match m;

	memset(v, 0, sizeof(*v));
	v->run = -1;
	/* ready */
	if (!s)
		return drop(v, RW_REASON_NOT_READY);
	/* Everything a sandbox tries is charged to the run of the pod its veth is bound to. */
	if (ep->bound)
		run = run_of(s, ep->pod_ip);
	v->run = run;
	/* parse */
	if (p->reason != RW_REASON_ALLOWED)
		return drop(v, p->reason);

	if (dir == RW_DIR_EGRESS) {
		/* source identity: bound veth, the pod's own address, a pod of a run */
		if (!ep->bound || run < 0)
			return drop(v, RW_REASON_UNKNOWN_SOURCE);
		if (p->saddr != ep->pod_ip)
			return drop(v, RW_REASON_SPOOFED_SOURCE);
		if (p->is_arp) {
			v->verdict = RW_VERDICT_ALLOW;
			v->path = RW_PATH_ARP;
			return;
		}
		/* reply of an allowed inbound connection (a bare SYN is never a reply) */
		if (ct == MODEL_CT_BY_INGRESS && !is_syn(p)) {
			if (!inbound_policy(s, p->daddr, p->sport, p->proto, &m))
				return drop(v, RW_REASON_INBOUND_DENIED);
			take(v, &m, RW_PATH_REPLY);
			return;
		}
		/* protocol */
		if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
			return drop(v, RW_REASON_UNSUPPORTED_PROTOCOL);
		egress_policy(s, run, p->daddr, p->dport, p->proto, lease_expired, v);
		if (v->verdict == RW_VERDICT_ALLOW)
			open_flow(p, ct, ct_full, dir, v);
		return;
	}

	/* Into the pod: ARP once the veth is bound to a pod of a run. */
	if (p->is_arp) {
		if (!ep->bound || run < 0)
			return drop(v, RW_REASON_UNKNOWN_SOURCE);
		v->verdict = RW_VERDICT_ALLOW;
		v->path = RW_PATH_ARP;
		return;
	}
	if (!ep->bound || run < 0)
		return drop(v, RW_REASON_UNKNOWN_SOURCE);
	/* a packet into the pod for another address */
	if (p->daddr != ep->pod_ip)
		return drop(v, RW_REASON_INBOUND_DENIED);
	/* reply of a flow the pod opened, judged again by the pod's egress policy */
	if (ct == MODEL_CT_BY_EGRESS && !is_syn(p)) {
		egress_policy(s, run, p->saddr, p->sport, p->proto, lease_expired, v);
		if (v->verdict == RW_VERDICT_ALLOW)
			v->path = RW_PATH_REPLY;
		return;
	}
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
		return drop(v, RW_REASON_UNSUPPORTED_PROTOCOL);
	if (!inbound_policy(s, p->saddr, p->dport, p->proto, &m))
		return drop(v, RW_REASON_INBOUND_DENIED);
	take(v, &m, RW_PATH_INBOUND);
	open_flow(p, ct, ct_full, dir, v);
}

/* The answer to a refusal (README "Answers"): only a refused packet out of the pod whose source
 * was proven (bound veth, the pod's own address, a run's pod), in a run whose refusal mode is
 * "answer", to a destination that can be an answer's source (not 0/8, 127/8, multicast,
 * broadcast or class E). TCP gets a reset unless it is one; ICMP an unreachable when it is a
 * query or a query's reply (types 0, 8, 13-18), never when it is an error; any other protocol,
 * UDP included, an unreachable.
 */
static int answer_of(const struct rw_policy *s, int run, const struct model_pkt *p)
{
	__u32 d = ntohl(p->daddr);
	__u8 first = d >> 24;

	if (rw_policy_run_refusal(s, &s->runs[run]) != RW_REFUSAL_ANSWER)
		return RW_ANSWER_NONE;
	if (first == 0 || first == 127 || first >= 224)
		return RW_ANSWER_NONE;
	if (p->proto == IPPROTO_TCP)
		return p->tcp_flags & 0x04 ? RW_ANSWER_NONE : RW_ANSWER_RST;
	if (p->proto == IPPROTO_ICMP)
		return p->icmp_type == 0 || p->icmp_type == 8 ||
				       (p->icmp_type >= 13 && p->icmp_type <= 18)
			       ? RW_ANSWER_ICMP
			       : RW_ANSWER_NONE;
	return RW_ANSWER_ICMP;
}

/* A revoke (docs/reasons.md "Closing a cut connection"): a refused TCP segment with ACK, neither
 * a SYN nor a reset, of a flow in the veth's table (opened from either side), whichever way it
 * goes, is reset at both ends when its pod-side address is the veth's own pod and the mode in
 * force is "answer": the run's, or the node's for a pod no run names ("A run that ends while its
 * pod lives"). The peer becomes the pod's reset's source: the answer's martian test, on it.
 * Only a packet the identity check let through or refused as unknown-source: a spoofed source,
 * or a packet into the pod for another address, is never one.
 */
static int revokes(const struct rw_policy *s, const struct model_binding *ep, int dir,
		   const struct model_pkt *p, enum model_ct ct, int run, int reason)
{
	__be32 pod = dir == RW_DIR_EGRESS ? p->saddr : p->daddr;
	__u8 peer_first = ntohl(dir == RW_DIR_EGRESS ? p->daddr : p->saddr) >> 24;
	int mode = run >= 0 ? rw_policy_run_refusal(s, &s->runs[run]) : s->refusal;

	if (ct == MODEL_CT_NONE || p->proto != IPPROTO_TCP || (p->tcp_flags & 0x16) != 0x10)
		return 0;
	if (pod != ep->pod_ip || mode != RW_REFUSAL_ANSWER)
		return 0;
	if (run < 0 && reason != RW_REASON_UNKNOWN_SOURCE)
		return 0;
	return peer_first && peer_first != 127 && peer_first < 224;
}

void model_judge(const struct rw_policy *s, const struct model_binding *ep, int dir,
		 const struct model_pkt *p, enum model_ct ct, int ct_full, int lease_expired,
		 struct model_verdict *v)
{
	int run;

	judge(s, ep, dir, p, ct, ct_full, lease_expired, v);
	if (v->verdict != RW_VERDICT_DROP || !s || p->reason != RW_REASON_ALLOWED || p->is_arp ||
	    !ep->bound)
		return;
	run = run_of(s, ep->pod_ip);
	if (revokes(s, ep, dir, p, ct, run, v->reason)) {
		v->answer = RW_ANSWER_RST;
		return;
	}
	if (run < 0 || dir != RW_DIR_EGRESS || p->saddr != ep->pod_ip)
		return;
	v->answer = answer_of(s, run, p);
}
