// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* rulename.c: the rule that decided a verdict event, by name. The datapath carries the id of
 * an allowing rule (rw_event.rule_id); what refused a packet is derived here from the reason,
 * the peer's address and the snapshot in force, in the datapath's order (bpf/policy.h), and
 * only when the snapshot is the revision the event was judged under.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipaddr.h"
#include "reasons.h"
#include "rulename.h"

static const char *const reason_rules[RW_REASON_COUNT] = {
	[RW_REASON_NOT_READY] = "built-in: no snapshot in force",
	[RW_REASON_UNKNOWN_SOURCE] = "built-in: a veth bound to a run's pod",
	[RW_REASON_SPOOFED_SOURCE] = "built-in: the pod's own source address",
	[RW_REASON_MALFORMED] = "built-in: well-formed headers",
	[RW_REASON_UNSUPPORTED_L2] = "built-in: IPv4, ARP and IPv6 only",
	[RW_REASON_IP_OPTIONS] = "built-in: no IPv4 options",
	[RW_REASON_FRAGMENT] = "built-in: no fragments",
	[RW_REASON_UNSUPPORTED_PROTOCOL] = "built-in: TCP, UDP and ICMPv6 only",
	[RW_REASON_DNS] = "built-in: port 53 by a rule only",
	[RW_REASON_NOT_ALLOWLISTED] = "egress allowlist: no rule",
	[RW_REASON_INBOUND_DENIED] = "inbound: no rule",
	[RW_REASON_CONNTRACK_FULL] = "built-in: the sandbox's conntrack table",
	[RW_REASON_LEASE_EXPIRED] = "lease expired: services only",
	[RW_REASON_IPV6_ROUTING] = "built-in: no IPv6 routing header with segments left",
	[RW_REASON_IPV6_EXT_HEADERS] = "built-in: 4 IPv6 extension headers, 256 bytes",
	[RW_REASON_IPV6_NEXT_HEADER] = "built-in: IPv6 next headers the walk sees past",
	[RW_REASON_IPV6_JUMBOGRAM] = "built-in: no IPv6 jumbograms",
	[RW_REASON_ICMPV6_TYPE] = "built-in: the ICMPv6 types allowed",
	[RW_REASON_ICMP_UNRELATED] = "built-in: ICMPv6 errors of the sandbox's own flows",
	[RW_REASON_WRONG_PRINCIPAL] = "built-in: a rule's \"from\"",
};

static const char *const path_rules[RW_PATH_COUNT] = {
	[RW_PATH_ARP] = "built-in: ARP of the pod's own address",
	[RW_PATH_REPLY] = "built-in: the reply of a tracked flow",
	[RW_PATH_OPEN] = "egress open: a public destination",
	[RW_PATH_NDP] = "built-in: NDP on the pod's veth",
	[RW_PATH_RELATED] = "built-in: an ICMPv6 error of a tracked flow",
};

const char *rw_reason_rule(unsigned int reason)
{
	return reason < RW_REASON_COUNT && reason_rules[reason] ? reason_rules[reason] : "";
}

const char *rw_path_rule(unsigned int path)
{
	return path < RW_PATH_COUNT && path_rules[path] ? path_rules[path] : "";
}

/* Whether the snapshot is the one the event was judged under. */
static bool in_force(const struct rw_event *ev, const struct rw_policy *p)
{
	return p && p->revision == ev->revision;
}

static int not_in_force(const struct rw_event *ev, const char *what, char *buf, size_t len)
{
	return snprintf(buf, len, "%s (revision %llu, not in force)", what,
			(unsigned long long)ev->revision);
}

static bool in_prefix6(const __be32 a[4], const __be32 net[4], unsigned int prefixlen)
{
	for (unsigned int i = 0; i < 4 && prefixlen > 32 * i; i++) {
		unsigned int bits = prefixlen - 32 * i;
		__u32 mask = bits >= 32 ? ~0u : ~0u << (32 - bits);

		if ((ntohl(a[i]) ^ ntohl(net[i])) & mask)
			return false;
	}
	return true;
}

static bool cidr_has(const struct rw_policy_cidr *c, const struct rw_ip *ip)
{
	if ((c->family == AF_INET6) != (ip->family == AF_INET6))
		return false;
	if (ip->family == AF_INET6)
		return in_prefix6(ip->a, c->addr6, c->prefixlen);
	return c->prefixlen == 0 ||
	       !((ntohl(ip->a[0]) ^ ntohl(c->addr)) & (~0u << (32 - c->prefixlen)));
}

static const char *cidr_str(const struct rw_policy_cidr *c, char *buf, size_t len)
{
	struct rw_ip ip = c->family == AF_INET6 ? rw_ip6(c->addr6) : rw_ip4(c->addr);
	char a[RW_IP_STRLEN];

	snprintf(buf, len, "%s/%u", rw_ip_str(&ip, a, sizeof(a)), c->prefixlen);
	return buf;
}

/* The deny entry the datapath's trie finds for ip (the longest prefix), or -1. */
static int deny_of(const struct rw_policy *p, const struct rw_ip *ip)
{
	int best = -1;

	for (size_t i = 0; i < p->n_deny; i++)
		if (cidr_has(&p->deny[i], ip) &&
		    (best < 0 || p->deny[i].prefixlen > p->deny[best].prefixlen))
			best = (int)i;
	return best;
}

static int deny_name(const struct rw_policy *p, int i, char *buf, size_t len)
{
	char c[RW_IP_STRLEN + 8];

	return snprintf(buf, len, "deny[%d] %s", i, cidr_str(&p->deny[i], c, sizeof(c)));
}

/* The prefix length of a built-in entry's text: "169.254.0.0/16" 16, an address its family's. */
static unsigned int builtin_len(const char *name, unsigned int full)
{
	const char *slash = strchr(name, '/');

	return slash ? (unsigned int)atoi(slash + 1) : full;
}

/* What refuses an IPv4 destination: the most specific of the built-in entry and (p in force) the
 * deny list's, the built-in one on a tie. 0, or -1 when neither holds it.
 */
static int refused4(__be32 a, const struct rw_policy *p, char *buf, size_t len)
{
	struct rw_ip ip = rw_ip4(a);
	const char *label, *name = rw_builtin_range(a, &label);
	int i = p ? deny_of(p, &ip) : -1;

	if (i >= 0 && (!name || p->deny[i].prefixlen > builtin_len(name, 32))) {
		deny_name(p, i, buf, len);
		return 0;
	}
	if (name) {
		snprintf(buf, len, "%s %s", name, label);
		return 0;
	}
	return -1;
}

/* The IPv4 address an IPv6 form carries, as bpf/policy.h's rw_embedded4() reads it: the form's
 * range and label, or NULL. *server is the Teredo relay's server (0 otherwise).
 */
static const char *embedded4(const __be32 a[4], __be32 *v4, __be32 *server, const char **label)
{
	__u32 w0 = ntohl(a[0]), w1 = ntohl(a[1]), w2 = ntohl(a[2]);

	*server = 0;
	if (w0 == 0 && w1 == 0 && w2 == 0x0000ffff) {
		*v4 = a[3], *label = "IPv4-mapped";
		return "::ffff:0:0/96";
	}
	if (w0 == 0x0064ff9b && !w1 && !w2) {
		*v4 = a[3], *label = "NAT64";
		return "64:ff9b::/96";
	}
	if ((w0 >> 16) == 0x2002) {
		*v4 = htonl((w0 & 0xffff) << 16 | w1 >> 16), *label = "6to4";
		return "2002::/16";
	}
	if (w0 == 0x20010000) {
		*server = a[1], *v4 = ~a[3], *label = "Teredo";
		return "2001::/32";
	}
	return NULL;
}

/* An IPv4 address carried by a form refuses it: metadata first, the Teredo server's as its
 * client's (rw_embedded4_check()).
 */
static int refused_embedded(const __be32 a[4], const struct rw_policy *p, char *buf, size_t len)
{
	const char *flabel, *label, *form;
	char v4name[RW_RULE_NAME_LEN];
	__be32 v4, server;

	form = embedded4(a, &v4, &server, &flabel);
	if (!form)
		return -1;
	if (rw_builtin_range(v4, &label) && !strcmp(label, "metadata")) {
		refused4(v4, p, v4name, sizeof(v4name));
		snprintf(buf, len, "%s in %s %s", v4name, form, flabel);
		return 0;
	}
	if (server && rw_builtin_range(server, &label) && !strcmp(label, "metadata")) {
		refused4(server, p, v4name, sizeof(v4name));
		snprintf(buf, len, "%s in %s %s server", v4name, form, flabel);
		return 0;
	}
	if (!refused4(v4, p, v4name, sizeof(v4name))) {
		snprintf(buf, len, "%s in %s %s", v4name, form, flabel);
		return 0;
	}
	if (server && !refused4(server, p, v4name, sizeof(v4name))) {
		snprintf(buf, len, "%s in %s %s server", v4name, form, flabel);
		return 0;
	}
	return -1;
}

static int refused6(const struct rw_event *ev, const struct rw_ip *peer, const struct rw_policy *p,
		    char *buf, size_t len)
{
	struct rw_ip pod = rw_event_pod_ip(ev);
	const char *label, *name;
	char a[RW_RULE_NAME_LEN], c[RW_IP_STRLEN + 8];
	int i;

	/* The declared NAT64 prefix: the IPv6 deny list, then the address it carries as IPv4. */
	if (p && p->nat64.family == AF_INET6 && cidr_has(&p->nat64, peer)) {
		if ((i = deny_of(p, peer)) >= 0)
			return deny_name(p, i, buf, len);
		if (!refused4(peer->a[3], p, a, sizeof(a)))
			return snprintf(buf, len, "%s in nat64 %s", a,
					cidr_str(&p->nat64, c, sizeof(c)));
		return -1;
	}
	if (!refused_embedded(peer->a, p, buf, len))
		return 0;
	/* 6to4 and Teredo refuse only by what they carry: they are no special range. */
	name = rw_builtin_range6(peer->a, &label);
	if (name && (!strcmp(label, "6to4") || !strcmp(label, "Teredo")))
		name = NULL;
	i = p ? deny_of(p, peer) : -1;
	if (i >= 0 && (!name || p->deny[i].prefixlen > builtin_len(name, 128)))
		return deny_name(p, i, buf, len);
	if (name)
		return snprintf(buf, len, "%s %s", name, label);
	if (pod.family == AF_INET6 && pod.a[0] == peer->a[0] && pod.a[1] == peer->a[1]) {
		struct rw_ip net = pod;

		net.a[2] = net.a[3] = 0;
		return snprintf(buf, len, "%s/64 of the pod", rw_ip_str(&net, a, sizeof(a)));
	}
	for (size_t r = 0; p && r < p->n_runs; r++)
		for (size_t k = 0; k < p->runs[r].n_pods6; k++)
			if (!memcmp(p->runs[r].pods6[k], peer->a, sizeof(peer->a)))
				return snprintf(buf, len, "pod of %s", p->runs[r].id);
	return -1;
}

/* A metadata or private-destination refusal: the entry that refuses the peer. */
static void refused_name(const struct rw_event *ev, const struct rw_policy *p, char *buf,
			 size_t len)
{
	struct rw_ip peer = rw_event_peer_ip(ev);
	const struct rw_policy *now = in_force(ev, p) ? p : NULL;
	int rc;

	if (peer.family == AF_INET6)
		rc = refused6(ev, &peer, now, buf, len) < 0 ? -1 : 0;
	else
		rc = refused4(peer.a[0], now, buf, len);
	if (rc < 0 && now)
		snprintf(buf, len, "%s: no entry of revision %llu", rw_reason_name(ev->reason),
			 (unsigned long long)ev->revision);
	else if (rc < 0)
		not_in_force(ev,
			     ev->reason == RW_REASON_METADATA ? "metadata" : "deny list or pods",
			     buf, len);
}

static bool has_port(const __u16 *ports, size_t n, unsigned int port)
{
	for (size_t i = 0; i < n; i++)
		if (ports[i] == port)
			return true;
	return false;
}

static void append_ports(char *buf, size_t len, const char *proto, const __u16 *ports, size_t n)
{
	size_t at = strlen(buf);

	for (size_t i = 0; i < n && at < len; i++, at = strlen(buf))
		if (i)
			snprintf(buf + at, len - at, ",%u", ports[i]);
		else
			snprintf(buf + at, len - at, " %s/%u", proto, ports[i]);
}

/* "52.94.9.5 tcp/5432": the rule's address and the port the event matched, or every port of the
 * rule when it has not that one.
 */
static void rule_text(const struct rw_policy_rule *r, unsigned int proto, unsigned int port,
		      char *buf, size_t len)
{
	struct rw_ip ip = r->family == AF_INET6 ? rw_ip6(r->addr6) : rw_ip4(r->addr);
	unsigned int full = r->family == AF_INET6 ? 128 : 32;
	char a[RW_IP_STRLEN];

	rw_ip_str(&ip, a, sizeof(a));
	if (r->prefixlen == full)
		snprintf(buf, len, "%s", a);
	else
		snprintf(buf, len, "%s/%u", a, r->prefixlen);
	if (proto == IPPROTO_TCP && has_port(r->tcp, r->n_tcp, port))
		snprintf(buf + strlen(buf), len - strlen(buf), " tcp/%u", port);
	else if (proto == IPPROTO_UDP && has_port(r->udp, r->n_udp, port))
		snprintf(buf + strlen(buf), len - strlen(buf), " udp/%u", port);
	else {
		append_ports(buf, len, "tcp", r->tcp, r->n_tcp);
		append_ports(buf, len, "udp", r->udp, r->n_udp);
	}
	if (r->from) {
		char f[RW_RULE_NAME_LEN];

		snprintf(buf + strlen(buf), len - strlen(buf), " from %s",
			 rw_policy_from_text(r->from, f, sizeof(f)));
	}
}

/* An allowing rule by its id: the snapshot entry's name and text. */
static void allowed_name(const struct rw_event *ev, const struct rw_policy *p, char *buf,
			 size_t len)
{
	unsigned int a = RW_RULE_A(ev->rule_id), b = RW_RULE_B(ev->rule_id);
	unsigned int kind = RW_RULE_KIND(ev->rule_id);
	const struct rw_policy *now = in_force(ev, p) ? p : NULL;
	const struct rw_policy_rule *rule = NULL;
	char text[RW_RULE_NAME_LEN], pos[48];

	if (kind == RW_RULE_KIND_SERVICE || kind == RW_RULE_KIND_INBOUND) {
		bool service = kind == RW_RULE_KIND_SERVICE;
		size_t n = !now ? 0 : service ? now->n_services : now->n_inbound;

		if (a < n) {
			rule = service ? &now->services[a] : &now->inbound[a];
			snprintf(buf, len, "%s%s", service ? "" : "inbound ", rule->name);
		}
		snprintf(pos, sizeof(pos), "%s[%u]", service ? "services" : "inbound", a);
	} else if (kind == RW_RULE_KIND_RUN) {
		if (now && a < now->n_runs && b < now->runs[a].n_allow) {
			rule = &now->runs[a].allow[b];
			snprintf(buf, len, "%s allow[%u]", now->runs[a].id, b);
		}
		snprintf(pos, sizeof(pos), "runs[%u].allow[%u]", a, b);
	} else {
		snprintf(buf, len, "rule %#x", ev->rule_id);
		return;
	}
	if (rule) {
		rule_text(rule, ev->proto, ntohs(ev->dport), text, sizeof(text));
		snprintf(buf + strlen(buf), len - strlen(buf), " %s", text);
	} else if (now) {
		snprintf(buf, len, "%s: not in revision %llu", pos,
			 (unsigned long long)ev->revision);
	} else {
		not_in_force(ev, pos, buf, len);
	}
}

void rw_event_rule_name(const struct rw_event *ev, const struct rw_policy *p, char *buf, size_t len)
{
	buf[0] = '\0';
	if (ev->verdict == RW_VERDICT_ALLOW) {
		if (ev->rule_id)
			allowed_name(ev, p, buf, len);
		else
			snprintf(buf, len, "%s", rw_path_rule(ev->path));
		return;
	}
	if (ev->reason == RW_REASON_METADATA || ev->reason == RW_REASON_PRIVATE_DESTINATION)
		refused_name(ev, p, buf, len);
	else if (ev->reason == RW_REASON_WRONG_PRINCIPAL && ev->rule_id)
		allowed_name(ev, p, buf, len); /* the rule whose "from" the sender is not */
	else
		snprintf(buf, len, "%s", rw_reason_rule(ev->reason));
}

const char *rw_policy_service_at(const struct rw_policy *p, __be32 ip)
{
	const char *best = "";
	int best_len = -1;

	for (size_t i = 0; p && i < p->n_services; i++) {
		const struct rw_policy_rule *r = &p->services[i];
		__u32 mask;

		if (rw_policy_rule_is6(r) || r->prefixlen > 32)
			continue; /* an IPv6 service's: never an IPv4 address's */
		mask = r->prefixlen ? htonl(~0u << (32 - r->prefixlen)) : 0;
		if ((ip & mask) == r->addr && r->prefixlen > best_len) {
			best = r->name;
			best_len = r->prefixlen;
		}
	}
	return best;
}

const char *rw_policy_service_at6(const struct rw_policy *p, const __be32 ip[4])
{
	const char *best = "";
	int best_len = -1;

	for (size_t i = 0; p && i < p->n_services; i++) {
		const struct rw_policy_rule *r = &p->services[i];
		bool in = rw_policy_rule_is6(r) && r->prefixlen <= 128;

		/* The prefix's whole words, then the bits of the next one. */
		for (unsigned int w = 0; in && w < 4; w++) {
			int bits = (int)r->prefixlen - 32 * (int)w;
			__u32 mask = bits >= 32 ? ~0u : bits <= 0 ? 0 : ~0u << (32 - bits);

			in = (ntohl(ip[w]) & mask) == (ntohl(r->addr6[w]) & mask);
		}
		if (in && r->prefixlen > best_len) {
			best = r->name;
			best_len = r->prefixlen;
		}
	}
	return best;
}
