// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* model.c: the reference model, written from the contract (docs/architecture.md "The datapath",
 * docs/reasons.md, the planned order of issue 13, and for IPv6 docs/ipv6.md and issue 22's
 * design), not from bpf/. Plain C over the parsed snapshot: no maps, no tries, no hashes, just
 * the rules as the snapshot lists them.
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
 * extension headers of RW_IPV6_EXT_BYTES together, the upper layer. ICMPv6 (docs/ipv6.md
 * "NDP and ICMPv6"): an NS or NA holds its 16-byte target after the 8-byte header; an error
 * (types 1 to 4) quotes the packet it is about after its 8 bytes, of which the fixed IPv6
 * header and the first 8 bytes of a TCP or UDP header are read.
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
	p->hop_limit = ip[7];
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
	p->proto = (__u8)nh;
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
	} else if (nh == IPPROTO_ICMPV6) {
		if (left < 4)
			return RW_REASON_MALFORMED;
		p->icmp6_type = l4[0];
		p->icmp6_code = l4[1];
		p->icmp6_len = left;
		if (l4[0] >= 133 && l4[0] <= 136) {
			/* The options after the fixed part (RFC 4861 4.6): each of a length above
			 * 0 and within the message, no source link-layer address (1) from ::, at
			 * most 8 of them.
			 */
			static const size_t fixed[] = {8, 16, 24, 24}; /* RS, RA, NS, NA */
			static const __u8 unspecified[16];
			size_t off = fixed[l4[0] - 133];
			int n_opts = 0;

			while (off < left && !p->nd_opts_bad) {
				p->nd_opts_bad =
					++n_opts > 8 || off + 2 > left || !l4[off + 1] ||
					(l4[off] == 1 && !memcmp(p->saddr6, unspecified, 16)) ||
					off + l4[off + 1] * 8 > left;
				if (off + 2 <= left)
					off += l4[off + 1] * 8;
			}
		}
		if ((l4[0] == 135 || l4[0] == 136) && left >= 24) {
			p->has_target = 1;
			memcpy(p->target, l4 + 8, 16);
		} else if (l4[0] >= 1 && l4[0] <= 4 && left >= 8 + 40 + 8) {
			const __u8 *in = l4 + 8;

			p->in_proto = in[6];
			p->has_inner =
				(in[0] >> 4) == 6 && (in[6] == IPPROTO_TCP || in[6] == IPPROTO_UDP);
			memcpy(p->in_saddr6, in + 8, 16);
			memcpy(p->in_daddr6, in + 24, 16);
			memcpy(&p->in_sport, in + 40, 2);
			memcpy(&p->in_dport, in + 42, 2);
		}
	}
	return RW_REASON_ALLOWED;
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
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) {
		/* Both headers begin with the ports; TCP's is 20 bytes at least, UDP's 8. */
		const __u8 *l4 = f + 34;
		int tcp = p->proto == IPPROTO_TCP;

		if (tot_len < 20 + (tcp ? 20 : 8)) {
			p->reason = RW_REASON_MALFORMED;
			return;
		}
		memcpy(&p->sport, l4, 2);
		memcpy(&p->dport, l4 + 2, 2);
		if (tcp) {
			p->tcp_flags = l4[13];
			if ((l4[12] >> 4) < 5 || (size_t)(l4[12] >> 4) * 4 > tot_len - 20)
				p->reason = RW_REASON_MALFORMED;
		} else if (get16(l4 + 4) < 8 || get16(l4 + 4) > tot_len - 20) {
			p->reason = RW_REASON_MALFORMED;
		}
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
		if (s->deny[i].family != AF_INET6 &&
		    in_cidr(addr, s->deny[i].addr, s->deny[i].prefixlen))
			return 1;
	return 0;
}

/* ---- IPv6 addresses: 16 bytes in network order, the tables' host-order words spelled out ---- */

static void words6(__u32 w0, __u32 w1, __u32 w2, __u32 w3, __u8 out[16])
{
	__u32 w[4] = {htonl(w0), htonl(w1), htonl(w2), htonl(w3)};

	memcpy(out, w, 16);
}

static int in_cidr6(const __u8 a[16], const __u8 net[16], int len)
{
	for (int i = 0; i < 16 && len > 0; i++, len -= 8) {
		__u8 mask = len >= 8 ? 0xff : (__u8)(0xff << (8 - len));

		if ((a[i] & mask) != (net[i] & mask))
			return 0;
	}
	return 1;
}

static int same6(const __u8 a[16], const void *b)
{
	return !memcmp(a, b, 16);
}

static int is_metadata6(const __u8 a[16])
{
	__u8 m[16];

#define M(w0, w1, w2, w3, str)     \
	words6(w0, w1, w2, w3, m); \
	if (same6(a, m))           \
		return 1;
	RW_METADATA6_ADDRS(M)
#undef M
	return 0;
}

static int is_special6(const __u8 a[16])
{
	__u8 net[16];

#define S(w0, w1, w2, w3, len, str, label) \
	words6(w0, w1, w2, w3, net);       \
	if (in_cidr6(a, net, len))         \
		return 1;
	RW_SPECIAL6_RANGES(S)
#undef S
	return 0;
}

static int is_denied6(const struct rw_policy *s, const __u8 a[16])
{
	for (size_t i = 0; i < s->n_deny; i++)
		if (s->deny[i].family == AF_INET6 &&
		    in_cidr6(a, (const __u8 *)s->deny[i].addr6, s->deny[i].prefixlen))
			return 1;
	return 0;
}

static int is_link_local6(const __u8 a[16])
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

static int is_unspecified6(const __u8 a[16])
{
	static const __u8 zero[16];

	return same6(a, zero);
}

/* ff02::1:ffXX:XXXX, the solicited-node group of the addresses ending in XX:XXXX. */
static int is_solicited_node6(const __u8 a[16])
{
	static const __u8 prefix[13] = {0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};

	return !memcmp(a, prefix, sizeof(prefix));
}

/* ff02::N: all nodes (1), all routers (2). */
static int is_link_group6(const __u8 a[16], __u8 n)
{
	static const __u8 prefix[15] = {0xff, 2};

	return !memcmp(a, prefix, sizeof(prefix)) && a[15] == n;
}

/* Where an answer may not come from: multicast, unspecified, loopback. */
static int is_martian6(const __u8 a[16])
{
	static const __u8 loopback[16] = {[15] = 1};

	return a[0] == 0xff || is_unspecified6(a) || same6(a, loopback);
}

static __be32 v4_of(const __u8 *b0, const __u8 *b1, const __u8 *b2, const __u8 *b3, __u8 x)
{
	__u8 b[4] = {*b0 ^ x, *b1 ^ x, *b2 ^ x, *b3 ^ x};
	__be32 a;

	memcpy(&a, b, 4);
	return a;
}

/* The IPv4 address an embedded-IPv4 form (RW_EMBEDDED4_RANGES) carries, and for Teredo the
 * server's too. Returns 0 when `a` is no such form, 1 for v4-mapped and NAT64, 2 for Teredo's
 * pair, 3 for 6to4.
 */
static int embedded4(const __u8 a[16], __be32 *v4, __be32 *server)
{
	static const __u8 mapped[12] = {[10] = 0xff, [11] = 0xff};
	static const __u8 nat64[12] = {0, 0x64, 0xff, 0x9b};

	if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12)) {
		*v4 = v4_of(a + 12, a + 13, a + 14, a + 15, 0);
		return 1;
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		*v4 = v4_of(a + 2, a + 3, a + 4, a + 5, 0);
		return 3;
	}
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) { /* Teredo, RFC 4380 */
		*server = v4_of(a + 4, a + 5, a + 6, a + 7, 0);
		*v4 = v4_of(a + 12, a + 13, a + 14, a + 15, 0xff);
		return 2;
	}
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
	/* The rule the datapath holds for the key: the last one listed (the apply keeps the last
	 * of equal keys), and with it the principals it admits.
	 */
	const struct rw_policy_from *from;
};

enum { EXACT, CIDR, ANY_LEN };

/* addr6 NULL: an IPv4 destination (addr), else an IPv6 one; each family's rules only. */
static void match_rules_of(const struct rw_policy_rule *rules, size_t n, int kind, int a,
			   int is_run, __be32 addr, const __u8 *addr6, __u16 port, __u8 proto,
			   struct match *m)
{
	int host = addr6 ? 128 : 32;

	m->n = 0;
	m->prefixlen = -1;
	m->from = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct rw_policy_rule *r = &rules[i];
		__u32 id;

		if ((r->family == AF_INET6) != !!addr6)
			continue;
		if (kind == EXACT && r->prefixlen != host)
			continue;
		if (kind == CIDR && r->prefixlen == host)
			continue;
		if (addr6 ? !in_cidr6(addr6, (const __u8 *)r->addr6, r->prefixlen)
			  : !in_cidr(addr, r->addr, r->prefixlen))
			continue;
		if (!has_port(r, port, proto))
			continue;
		if (r->prefixlen < m->prefixlen)
			continue;
		if (r->prefixlen > m->prefixlen) {
			m->n = 0;
			m->prefixlen = r->prefixlen;
		}
		id = is_run ? RW_RULE_ID(RW_RULE_KIND_RUN, a, i)
			    : RW_RULE_ID(a, i, 0); /* a: the kind, for services and inbound */
		if (r->from)
			id |= RW_RULE_FROM;
		if (m->n < MODEL_MAX_RULES)
			m->rules[m->n++] = id;
		m->from = r->from;
	}
}

static void match_rules(const struct rw_policy_rule *rules, size_t n, int kind, int a, int is_run,
			__be32 addr, __u16 port, __u8 proto, struct match *m)
{
	match_rules_of(rules, n, kind, a, is_run, addr, NULL, port, proto, m);
}

/* Is the sender one a rule's "from" admits? The model's packets are BPF_PROG_TEST_RUN's, whose
 * skb carries the kernel's dummy socket (net/bpf/test_run.c): owned by uid 0, made in the
 * test's own cgroup, which is no container the agent admitted.
 */
static int principal_ok(const struct rw_policy_from *f)
{
	if (f->n_containers)
		return 0;
	for (size_t i = 0; i < f->n_uids; i++)
		if (f->uids[i] == 0)
			return 1;
	return 0;
}

static void take(struct model_verdict *v, const struct match *m, int path)
{
	v->verdict = RW_VERDICT_ALLOW;
	v->reason = RW_REASON_ALLOWED;
	v->path = path;
	memcpy(v->rules, m->rules, sizeof(m->rules));
	v->n_rules = m->n;
	v->from = m->from;
}

/* Out of the pod, a rule with a "from" allows only the senders it admits: the others are
 * wrong-principal (the rule still named). Packets into the pod have no sender of the pod's.
 */
static void judge_principal(struct model_verdict *v)
{
	if (v->verdict == RW_VERDICT_ALLOW && v->from && !principal_ok(v->from)) {
		v->verdict = RW_VERDICT_DROP;
		v->reason = RW_REASON_WRONG_PRINCIPAL;
	}
}

/* A list's exact rules' match, else its CIDR rules' (RW_PATH_RULE, RW_PATH_RULE_CIDR): 1 when
 * one allows, taken into v.
 */
static int take_match(struct model_verdict *v, const struct match *exact, const struct match *cidr)
{
	if (exact->n)
		take(v, exact, RW_PATH_RULE);
	else if (cidr->n)
		take(v, cidr, RW_PATH_RULE_CIDR);
	return exact->n || cidr->n;
}

/* The order both families share, from DNS on, given the rules that match the destination (the
 * services' exact and CIDR, the run's exact and CIDR) and whether it is private (special).
 */
static void egress_order(const struct rw_policy *s, const struct rw_policy_run *run, __u16 dport,
			 const struct match *se, const struct match *sc, const struct match *re,
			 const struct match *rc, int special, int lease_expired,
			 struct model_verdict *v)
{
	/* DNS: port 53 to any destination no rule allows explicitly on 53 (a run's rule cannot
	 * allow a private or denied destination, so it does not count there).
	 */
	if (dport == 53 && !se->n && !sc->n && (special || (!re->n && !rc->n))) {
		v->reason = RW_REASON_DNS;
		return;
	}
	/* The platform's services first... */
	if (take_match(v, se, sc))
		return;
	if (special) {
		v->reason = RW_REASON_PRIVATE_DESTINATION;
		return;
	}
	/* ...the run's rules after the ranges: they can never open a private destination. */
	if (take_match(v, re, rc))
		return;
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
	egress_order(s, run, dport, &se, &sc, &re, &rc, special, lease_expired, v);
}

static int run_of6(const struct rw_policy *s, const __u8 ip[16]);

/* The egress policy for an IPv6 destination of the pod bound to pod6 (docs/ipv6.md "Forms that
 * carry an IPv4 address"): under the snapshot's nat64 prefix, private-destination in the IPv6
 * deny list, else the IPv4 policy of its low 32 bits; in another embedded-IPv4 form, metadata
 * when the IPv4 address it carries (or Teredo's server) is, then private-destination when one
 * is in a range or the IPv4 deny list, and never allowed by them: past that, the IPv6 order
 * with v4-mapped and NAT64 among the special ranges. Any destination: metadata6, services,
 * DNS, special6, pod6's /64, the snapshot's pods and the IPv6 deny list, the run's rules, the
 * lease, the egress mode.
 */
static void egress_policy6(const struct rw_policy *s, int ri, const __u8 pod6[16],
			   const __u8 daddr[16], __be16 dport_be, __u8 proto, int lease_expired,
			   struct model_verdict *v)
{
	const struct rw_policy_run *run = &s->runs[ri];
	__u16 dport = ntohs(dport_be);
	struct match se, sc, re, rc;
	__be32 v4 = 0, server = 0;
	int special, kind;

	v->verdict = RW_VERDICT_DROP;
	v->path = RW_PATH_NONE;
	v->n_rules = 0;
	if (s->nat64.family == AF_INET6 && !memcmp(daddr, s->nat64.addr6, 12)) {
		if (is_denied6(s, daddr)) {
			v->reason = RW_REASON_PRIVATE_DESTINATION;
			return;
		}
		return egress_policy(s, ri,
				     v4_of(daddr + 12, daddr + 13, daddr + 14, daddr + 15, 0),
				     dport_be, proto, lease_expired, v);
	}
	kind = embedded4(daddr, &v4, &server);
	if (kind && (is_metadata(v4) || (kind == 2 && is_metadata(server)))) {
		v->reason = RW_REASON_METADATA;
		return;
	}
	if (kind && (is_special(v4) || is_denied(s, v4) ||
		     (kind == 2 && (is_special(server) || is_denied(s, server))))) {
		v->reason = RW_REASON_PRIVATE_DESTINATION;
		return;
	}
	if (is_metadata6(daddr)) {
		v->reason = RW_REASON_METADATA;
		return;
	}
	match_rules_of(s->services, s->n_services, EXACT, RW_RULE_KIND_SERVICE, 0, 0, daddr, dport,
		       proto, &se);
	match_rules_of(s->services, s->n_services, CIDR, RW_RULE_KIND_SERVICE, 0, 0, daddr, dport,
		       proto, &sc);
	match_rules_of(run->allow, lease_expired ? 0 : run->n_allow, EXACT, ri, 1, 0, daddr, dport,
		       proto, &re);
	match_rules_of(run->allow, lease_expired ? 0 : run->n_allow, CIDR, ri, 1, 0, daddr, dport,
		       proto, &rc);
	/* The pod's own /64 (its node's subnet on EKS) and the snapshot's pods are private too. */
	special = kind == 1 || is_special6(daddr) || is_denied6(s, daddr) ||
		  !memcmp(daddr, pod6, 8) || run_of6(s, daddr) >= 0;
	egress_order(s, run, dport, &se, &sc, &re, &rc, special, lease_expired, v);
}

static int inbound_policy6(const struct rw_policy *s, const __u8 peer[16], __be16 port, __u8 proto,
			   struct match *m)
{
	match_rules_of(s->inbound, s->n_inbound, ANY_LEN, RW_RULE_KIND_INBOUND, 0, 0, peer,
		       ntohs(port), proto, m);
	return m->n > 0;
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

static int run_of6(const struct rw_policy *s, const __u8 ip[16])
{
	for (size_t r = 0; r < s->n_runs; r++)
		for (size_t i = 0; i < s->runs[r].n_pods6; i++)
			if (same6(ip, s->runs[r].pods6[i]))
				return (int)r;
	return -1;
}

/* The veth's identity in the packet's family: bound in it, and its address. */
static int bound4(const struct model_binding *ep)
{
	return ep->bound && (ep->flags & RW_EP_IP4);
}

static int bound6(const struct model_binding *ep)
{
	return ep->bound && (ep->flags & RW_EP_IP6);
}

int model_run_of(const struct rw_policy *s, const struct model_binding *ep,
		 const struct model_pkt *p)
{
	if (!s)
		return -1;
	if (p->is_ipv6)
		return bound6(ep) ? run_of6(s, ep->pod_ip6) : -1;
	return bound4(ep) ? run_of(s, ep->pod_ip) : -1;
}

int model_error_flow(const struct model_pkt *p, int dir, __u8 pod[16], __u8 peer[16],
		     __be16 *pod_port, __be16 *peer_port, __u8 *proto)
{
	int out = dir == RW_DIR_EGRESS;

	if (p->reason != RW_REASON_ALLOWED || !p->is_ipv6 || p->proto != IPPROTO_ICMPV6 ||
	    p->icmp6_type < 1 || p->icmp6_type > 4 || !p->has_inner)
		return 0;
	/* Out of the pod it quotes what the pod received (peer to pod), into it what it sent. */
	memcpy(pod, out ? p->in_daddr6 : p->in_saddr6, 16);
	memcpy(peer, out ? p->in_saddr6 : p->in_daddr6, 16);
	*pod_port = out ? p->in_dport : p->in_sport;
	*peer_port = out ? p->in_sport : p->in_dport;
	*proto = p->in_proto;
	return 1;
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
	v->ct_create = ct == MODEL_CT_NONE;
	/* A sandbox's new flow over its own conntrack share is dropped, never let in by evicting
	 * another's.
	 */
	if (v->ct_create && ct_full) {
		v->ct_create = 0;
		return drop(v, RW_MODEL_REASON_CONNTRACK_FULL);
	}
	/* Every new conntrack entry is reported, whatever its protocol and flags. */
	v->new_flow = v->ct_create;
}

static void allow_path(struct model_verdict *v, int path)
{
	v->verdict = RW_VERDICT_ALLOW;
	v->reason = RW_REASON_ALLOWED;
	v->path = path;
	v->n_rules = 0;
}

/* NDP (docs/ipv6.md "NDP and ICMPv6", docs/reasons.md "ICMPv6"): what every receiver
 * discards (RFC 4861: a hop limit other than 255, a code other than 0, a message shorter than its
 * fixed part, a multicast target, an option of length 0 or past the message, a source
 * link-layer address option from ::; and more than 8 options) is malformed, first. Out of the pod the source is the pod's (a
 * link-local that is not the gateway's, the bound pod_ip6, or :: for an NS of DAD to a
 * solicited-node group; a link-local source only the veth's one: the first allowed, learned),
 * else spoofed-source; the destination is on the veth (a link-local, a solicited-node group for
 * an NS, ff02::1 for an NA, ff02::2 for an RS), else icmpv6-type; the target is the pod's to
 * claim (an NS's: a link-local or the gateway's, in DAD only its own pod_ip6 or learned
 * link-local; an NA's: its pod_ip6 or the link-local it speaks from, that one only once learned
 * while the gateway is unknown), else spoofed-source. Into the pod,
 * from a link-local source (the node), else inbound-denied, to the pod (a link-local, its
 * pod_ip6, a solicited-node group, ff02::1), else inbound-denied or, for another group,
 * icmpv6-type. A valid RA out of the pod is icmpv6-type: a pod is no router.
 */
static void judge_ndp(const struct model_binding *ep, int dir, const struct model_pkt *p,
		      struct model_verdict *v)
{
	static const size_t fixed[] = {8, 16, 24, 24}; /* RS, RA, NS, NA */
	int type = p->icmp6_type, dad = is_unspecified6(p->saddr6);
	int gw_src = (ep->flags & RW_EP_GW6) && same6(p->saddr6, ep->gw_ip6);
	int gw_target = (ep->flags & RW_EP_GW6) && same6(p->target, ep->gw_ip6);

	if (p->hop_limit != 255 || p->icmp6_code != 0 || p->icmp6_len < fixed[type - 133] ||
	    (p->has_target && p->target[0] == 0xff) || p->nd_opts_bad)
		return drop(v, RW_REASON_MALFORMED);
	if (dir == RW_DIR_EGRESS && type == 134)
		return drop(v, RW_REASON_ICMPV6_TYPE);
	if (dir == RW_DIR_INGRESS) {
		if (!is_link_local6(p->saddr6))
			return drop(v, RW_REASON_INBOUND_DENIED);
		if (is_link_local6(p->daddr6) || same6(p->daddr6, ep->pod_ip6) ||
		    is_solicited_node6(p->daddr6) || is_link_group6(p->daddr6, 1))
			return allow_path(v, RW_PATH_NDP);
		return drop(v, p->daddr6[0] == 0xff ? RW_REASON_ICMPV6_TYPE
						    : RW_REASON_INBOUND_DENIED);
	}
	if (dad ? type != 135 || !is_solicited_node6(p->daddr6)
		: gw_src || (!is_link_local6(p->saddr6) && !same6(p->saddr6, ep->pod_ip6)) ||
			    (is_link_local6(p->saddr6) && ep->has_ll6 &&
			     !same6(p->saddr6, ep->ll6)))
		return drop(v, RW_REASON_SPOOFED_SOURCE);
	if (!is_link_local6(p->daddr6) && !(type == 135 && is_solicited_node6(p->daddr6)) &&
	    !(type == 136 && is_link_group6(p->daddr6, 1)) &&
	    !(type == 133 && is_link_group6(p->daddr6, 2)))
		return drop(v, RW_REASON_ICMPV6_TYPE);
	if (type == 135 && dad && !same6(p->target, ep->pod_ip6) &&
	    !(ep->has_ll6 && same6(p->target, ep->ll6) && !gw_target))
		return drop(v, RW_REASON_SPOOFED_SOURCE);
	if (type == 135 && !dad && !is_link_local6(p->target) && !gw_target)
		return drop(v, RW_REASON_SPOOFED_SOURCE);
	if (type == 136 && !same6(p->target, ep->pod_ip6) &&
	    !(is_link_local6(p->target) && same6(p->target, p->saddr6) &&
	      (ep->has_ll6 || (ep->flags & RW_EP_GW6))))
		return drop(v, RW_REASON_SPOOFED_SOURCE);
	allow_path(v, RW_PATH_NDP);
	v->learn_ll6 = is_link_local6(p->saddr6) && !ep->has_ll6;
}

/* The run's egress policy for the remote end of p's flow (its destination out of the pod, its
 * source into it), in p's family.
 */
static void egress_of(const struct rw_policy *s, int run, const struct model_binding *ep, int dir,
		      const struct model_pkt *p, int lease_expired, struct model_verdict *v)
{
	int out = dir == RW_DIR_EGRESS;
	__be16 port = out ? p->dport : p->sport;

	if (p->is_ipv6)
		egress_policy6(s, run, ep->pod_ip6, out ? p->daddr6 : p->saddr6, port, p->proto,
			       lease_expired, v);
	else
		egress_policy(s, run, out ? p->daddr : p->saddr, port, p->proto, lease_expired, v);
}

/* The inbound rules that admit the remote end of p's flow to the pod's port, in p's family. */
static int inbound_of(const struct rw_policy *s, int dir, const struct model_pkt *p,
		      struct match *m)
{
	int out = dir == RW_DIR_EGRESS;
	__be16 port = out ? p->sport : p->dport;

	if (p->is_ipv6)
		return inbound_policy6(s, out ? p->daddr6 : p->saddr6, port, p->proto, m);
	return inbound_policy(s, out ? p->daddr : p->saddr, port, p->proto, m);
}

/* A TCP or UDP packet's flow, past its family's identity checks (both families): a reply
 * judged again by the policy that opened its flow, else the protocol, then the policy of its
 * direction.
 */
static void judge_flow(const struct rw_policy *s, const struct model_binding *ep, int dir,
		       const struct model_pkt *p, enum model_ct ct, int ct_full, int lease_expired,
		       int run, struct model_verdict *v)
{
	struct match m;

	if (dir == RW_DIR_EGRESS) {
		/* reply of an allowed inbound connection (a bare SYN is never a reply) */
		if (ct == MODEL_CT_BY_INGRESS && !is_syn(p)) {
			if (!inbound_of(s, dir, p, &m))
				return drop(v, RW_REASON_INBOUND_DENIED);
			return take(v, &m, RW_PATH_REPLY);
		}
		/* protocol */
		if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
			return drop(v, RW_REASON_UNSUPPORTED_PROTOCOL);
		egress_of(s, run, ep, dir, p, lease_expired, v);
		judge_principal(v);
		if (v->verdict == RW_VERDICT_ALLOW)
			open_flow(p, ct, ct_full, dir, v);
		return;
	}
	/* reply of a flow the pod opened, judged again by the pod's egress policy */
	if (ct == MODEL_CT_BY_EGRESS && !is_syn(p)) {
		egress_of(s, run, ep, dir, p, lease_expired, v);
		if (v->verdict == RW_VERDICT_ALLOW)
			v->path = RW_PATH_REPLY;
		return;
	}
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
		return drop(v, RW_REASON_UNSUPPORTED_PROTOCOL);
	if (!inbound_of(s, dir, p, &m))
		return drop(v, RW_REASON_INBOUND_DENIED);
	take(v, &m, RW_PATH_INBOUND);
	open_flow(p, ct, ct_full, dir, v);
}

/* An IPv6 packet that parsed, charged to `run` (the veth's IPv6 pod's). */
static void judge6(const struct rw_policy *s, const struct model_binding *ep, int dir,
		   const struct model_pkt *p, enum model_ct ct, int ct_full, int lease_expired,
		   int run, struct model_verdict *v)
{
	const __u8 *self = dir == RW_DIR_EGRESS ? p->saddr6 : p->daddr6;
	int icmp6 = p->proto == IPPROTO_ICMPV6, type = p->icmp6_type;

	/* Identity: a veth bound in IPv6, to a pod of a run; NDP's addresses are the link's, and
	 * an ICMPv6 type the datapath never allows is that whatever its addresses.
	 */
	if (!bound6(ep) || run < 0)
		return drop(v, RW_REASON_UNKNOWN_SOURCE);
	if (icmp6 && type >= 133 && type <= 136)
		return judge_ndp(ep, dir, p, v);
	if (icmp6 && !(type >= 1 && type <= 4) && type != 128 && type != 129)
		return drop(v, RW_REASON_ICMPV6_TYPE);
	if (!same6(self, ep->pod_ip6))
		return drop(v, dir == RW_DIR_EGRESS ? RW_REASON_SPOOFED_SOURCE
						    : RW_REASON_INBOUND_DENIED);
	if (icmp6) {
		if (type == 128 || type == 129)
			return drop(v, RW_REASON_UNSUPPORTED_PROTOCOL);
		/* An error about a flow of the sandbox's table whose verdict is of the policy in
		 * force (`ct`, given so by the caller), and no cached verdict is under an expired
		 * lease; out of the pod, sent to that flow's peer (the quoted packet's source), so
		 * that it cannot be aimed elsewhere.
		 */
		if (ct == MODEL_CT_NONE || lease_expired || !p->has_inner ||
		    (dir == RW_DIR_EGRESS && !same6(p->daddr6, p->in_saddr6)))
			return drop(v, RW_REASON_ICMP_UNRELATED);
		return allow_path(v, RW_PATH_RELATED);
	}
	judge_flow(s, ep, dir, p, ct, ct_full, lease_expired, run, v);
}

static void judge(const struct rw_policy *s, const struct model_binding *ep, int dir,
		  const struct model_pkt *p, enum model_ct ct, int ct_full, int lease_expired,
		  struct model_verdict *v)
{
	int run = -1;

	memset(v, 0, sizeof(*v));
	v->run = -1;
	/* ready */
	if (!s)
		return drop(v, RW_REASON_NOT_READY);
	/* Everything a sandbox tries is charged to the run of the pod its veth is bound to. */
	run = model_run_of(s, ep, p);
	v->run = run;
	/* parse */
	if (p->reason != RW_REASON_ALLOWED)
		return drop(v, p->reason);
	if (p->is_ipv6)
		return judge6(s, ep, dir, p, ct, ct_full, lease_expired, run, v);

	if (dir == RW_DIR_EGRESS) {
		/* source identity: bound veth, the pod's own address, a pod of a run */
		if (!bound4(ep) || run < 0)
			return drop(v, RW_REASON_UNKNOWN_SOURCE);
		if (p->saddr != ep->pod_ip)
			return drop(v, RW_REASON_SPOOFED_SOURCE);
		if (p->is_arp) {
			v->verdict = RW_VERDICT_ALLOW;
			v->path = RW_PATH_ARP;
			return;
		}
		return judge_flow(s, ep, dir, p, ct, ct_full, lease_expired, run, v);
	}

	/* Into the pod: ARP once the veth is bound to a pod of a run. */
	if (p->is_arp) {
		if (!bound4(ep) || run < 0)
			return drop(v, RW_REASON_UNKNOWN_SOURCE);
		v->verdict = RW_VERDICT_ALLOW;
		v->path = RW_PATH_ARP;
		return;
	}
	if (!bound4(ep) || run < 0)
		return drop(v, RW_REASON_UNKNOWN_SOURCE);
	/* a packet into the pod for another address */
	if (p->daddr != ep->pod_ip)
		return drop(v, RW_REASON_INBOUND_DENIED);
	judge_flow(s, ep, dir, p, ct, ct_full, lease_expired, run, v);
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
	if (p->is_ipv6 ? is_martian6(p->daddr6) : first == 0 || first == 127 || first >= 224)
		return RW_ANSWER_NONE;
	if (p->proto == IPPROTO_TCP)
		return p->tcp_flags & 0x04 ? RW_ANSWER_NONE : RW_ANSWER_RST;
	if (p->proto == IPPROTO_ICMP && !p->is_ipv6)
		return p->icmp_type == 0 || p->icmp_type == 8 ||
				       (p->icmp_type >= 13 && p->icmp_type <= 18)
			       ? RW_ANSWER_ICMP
			       : RW_ANSWER_NONE;
	/* ICMPv6: echo only (an ICMPv6 1/1); an error, NDP or any other type never. */
	if (p->proto == IPPROTO_ICMPV6 && p->is_ipv6)
		return p->icmp6_type == 128 || p->icmp6_type == 129 ? RW_ANSWER_ICMP
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
	int out = dir == RW_DIR_EGRESS;
	__be32 pod = out ? p->saddr : p->daddr;
	__u8 peer_first = ntohl(out ? p->daddr : p->saddr) >> 24;
	int mode = run >= 0 ? rw_policy_run_refusal(s, &s->runs[run]) : s->refusal;

	if (ct == MODEL_CT_NONE || p->proto != IPPROTO_TCP || (p->tcp_flags & 0x16) != 0x10)
		return 0;
	if (mode != RW_REFUSAL_ANSWER)
		return 0;
	if (p->is_ipv6 ? !bound6(ep) || !same6(out ? p->saddr6 : p->daddr6, ep->pod_ip6)
		       : !bound4(ep) || pod != ep->pod_ip)
		return 0;
	if (run < 0 && reason != RW_REASON_UNKNOWN_SOURCE)
		return 0;
	if (p->is_ipv6)
		return !is_martian6(out ? p->daddr6 : p->saddr6);
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
	run = model_run_of(s, ep, p);
	/* wrong-principal: the flow of its 4-tuple is another principal's; no revoke, and only a
	 * SYN is answered (a reset of sequence 0, which no established socket takes).
	 */
	if (v->reason == RW_REASON_WRONG_PRINCIPAL) {
		if (is_syn(p))
			v->answer = answer_of(s, run, p);
		return;
	}
	if (revokes(s, ep, dir, p, ct, run, v->reason)) {
		v->answer = RW_ANSWER_RST;
		return;
	}
	if (run < 0 || dir != RW_DIR_EGRESS ||
	    (p->is_ipv6 ? !same6(p->saddr6, ep->pod_ip6) : p->saddr != ep->pod_ip))
		return;
	v->answer = answer_of(s, run, p);
}
