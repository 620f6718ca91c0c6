/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* ipaddr.h: an address of either family, as events, flows and bindings carry them, and its text:
 * RFC 5952 (inet_ntop) for IPv6, bracketed when a port follows ("[2001:db8::1]:443"). Every place
 * that prints, parses or compares an event's or a flow's address goes through these, so that the
 * CLI, the view, /metrics and access requests agree on one form.
 */
#ifndef RUNWALL_IPADDR_H
#define RUNWALL_IPADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include "runwall.h"

/* Zeroed: no address (family 0). IPv4 in a[0], the other words 0, so that two of the same
 * address compare equal with memcmp() and hash alike.
 */
struct rw_ip {
	__be32 a[4]; /* network byte order */
	__u8 family; /* 0, AF_INET or AF_INET6 */
	__u8 pad[3];
};

#define RW_IP_STRLEN	  46	   /* INET6_ADDRSTRLEN */
#define RW_IP_PORT_STRLEN (46 + 8) /* "[" addr "]:" port */

struct rw_ip rw_ip4(__be32 addr);
struct rw_ip rw_ip6(const __be32 addr[4]);
bool rw_ip_eq(const struct rw_ip *x, const struct rw_ip *y);

/* The address as text: "10.1.2.3", "2001:db8::1"; "-" when it has no family. Returns buf
 * (RW_IP_STRLEN bytes or more).
 */
const char *rw_ip_str(const struct rw_ip *ip, char *buf, size_t len);

/* The address and a port (host order) as text: "10.1.2.3:443", "[2001:db8::1]:443". Returns buf
 * (RW_IP_PORT_STRLEN bytes or more).
 */
const char *rw_ip_port_str(const struct rw_ip *ip, unsigned int port, char *buf, size_t len);

/* An IPv4 or IPv6 address as text (no port, no brackets, no scope). 0 or -EINVAL. */
int rw_ip_parse(const char *s, struct rw_ip *ip);

/* An address with an optional port: "10.1.2.3", "10.1.2.3:443", "2001:db8::1",
 * "[2001:db8::1]", "[2001:db8::1]:443". *port (host order) is 0 when none is given. 0, or
 * -EINVAL for anything else, -ERANGE for a port that is not 1..65535.
 */
int rw_ip_port_parse(const char *s, struct rw_ip *ip, __u16 *port);

/* An event's addresses in its family (the ethertype: IPv6 in saddr6/daddr6, IPv4 and ARP in
 * saddr/daddr; a frame of another ethertype has the IPv4 form, 0.0.0.0).
 */
bool rw_event_is_ipv6(const struct rw_event *ev);
struct rw_ip rw_event_src(const struct rw_event *ev);
struct rw_ip rw_event_dst(const struct rw_event *ev);
/* The pod's side (the source of egress, the destination of ingress) and the peer's. */
struct rw_ip rw_event_pod_ip(const struct rw_event *ev);
struct rw_ip rw_event_peer_ip(const struct rw_event *ev);
/* Whether `at`, one of ev's addresses above, is `ip`, and ev's destination port is `dport`
 * (host order; 0: any port): the address and port filters of `drops` and of the view's API.
 */
bool rw_event_at(const struct rw_event *ev, struct rw_ip at, const struct rw_ip *ip, __u16 dport);
/* Set an event's address from ip, and its ethertype to the family's (0x86dd for IPv6). */
void rw_event_set_addrs(struct rw_event *ev, const struct rw_ip *src, const struct rw_ip *dst);

#endif /* RUNWALL_IPADDR_H */
