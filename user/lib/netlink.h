/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* netlink.h: what runwall needs from rtnetlink, through libmnl: the interfaces, the per-pod /32
 * routes (EKS's VPC CNI installs "10.1.2.3 dev eniXXXX scope link" in the main table for each
 * pod: that route is what ties a pod IP to its host-side veth), and a subscription to changes
 * of both. Everything works in the caller's network namespace.
 *
 * The usual order: open the subscription, then dump links and routes, then poll the
 * subscription's fd and call rw_nl_sub_read() when it is readable. Opening first means no
 * change between the dump and the subscription is missed (a change seen twice is harmless:
 * events are "this is the state now", not deltas to add up).
 *
 * Functions return 0 or a negative errno unless said otherwise, and do not log.
 */
#ifndef RUNWALL_NETLINK_H
#define RUNWALL_NETLINK_H

#include <stdbool.h>
#include <linux/types.h>

#define RW_NL_IFNAMSIZ 16 /* IF_NAMESIZE, without pulling <net/if.h> into every user */

struct rw_nl_link {
	int ifindex;
	char name[RW_NL_IFNAMSIZ];
	unsigned int flags; /* IFF_* as the kernel reports them (ifi_flags) */
	__u8 operstate;	    /* IF_OPER_* (RFC 2863); IF_OPER_UNKNOWN when not reported */
	bool admin_up;	    /* IFF_UP: "ip link set up" */
	bool oper_up;	    /* IFF_RUNNING: operstate UP (or UNKNOWN, for devices without
				 * carrier, like lo); a veth is up only when its peer is too */
	char kind[16];	    /* IFLA_INFO_KIND: "veth", "vlan", "bridge"...; "" for none */
	bool veth;	    /* kind is "veth": the only kind a sandbox's host side has */
	int link_netnsid;   /* IFLA_LINK_NETNSID: the id (in this namespace) of the namespace
			     * of a veth's peer; -1 when not reported (peer here, or no peer) */
};

/* A route of the main table with an output interface: IPv4, or IPv6 (on an IPv6 node the VPC
 * CNI installs a /128 per pod toward its veth, "2600:1f14:abc::7 dev eniXXXX").
 */
struct rw_nl_route {
	__be32 dst; /* IPv4, network byte order; 0 for a default route and for IPv6 */
	__u8 prefixlen;
	__u8 family;	/* AF_INET or AF_INET6 */
	__be32 dst6[4]; /* IPv6, network byte order; zeros for IPv4 */
	int oif;
};

/* An interface's address (RTM_NEWADDR / RTM_DELADDR). */
struct rw_nl_addr {
	int ifindex;
	__u8 family; /* AF_INET or AF_INET6 */
	__u8 prefixlen;
	__u8 scope;	/* RT_SCOPE_*: RT_SCOPE_LINK for a link-local address */
	__u32 flags;	/* IFA_F_* */
	__be32 addr[4]; /* IPv4 in addr[0] */
};

/* Callbacks return 0 to go on or a negative errno, which stops the walk and is returned. */
typedef int (*rw_nl_link_fn)(const struct rw_nl_link *link, void *data);
typedef int (*rw_nl_route_fn)(const struct rw_nl_route *route, void *data);
typedef int (*rw_nl_addr_fn)(const struct rw_nl_addr *addr, void *data);

/* Every interface. -EAGAIN when the kernel flagged the dump as interrupted by a change
 * (NLM_F_DUMP_INTR): what was reported may be inconsistent, dump again.
 */
int rw_nl_dump_links(rw_nl_link_fn fn, void *data);

/* The unicast routes of the main table with an output interface and a host prefix, IPv4 /32
 * then IPv6 /128 (the per-pod routes). A multipath route (no single output interface) is not
 * reported; a kernel without IPv6 has only the IPv4 ones. -EAGAIN as for rw_nl_dump_links().
 */
int rw_nl_dump_routes(rw_nl_route_fn fn, void *data);

/* The same routes, only those whose output interface is oif: what names oif's pod now, asked
 * of the kernel at the moment of the call. -ENODEV when no interface has that index.
 */
int rw_nl_dump_routes_via(int oif, rw_nl_route_fn fn, void *data);

/* The host side's own IPv6 link-local address on ifindex (scope link, not failed DAD: the
 * address a pod's NDP finds its gateway at): 0 and addr set, -ENOENT when it has none (yet:
 * the kernel adds it when the link comes up; or the kernel has no IPv6, or no interface has
 * that index).
 */
int rw_nl_link_local6(int ifindex, __be32 addr[4]);

/* The id this network namespace has for the network namespace open on fd (RTM_GETNSID with
 * NETNSA_FD): what IFLA_LINK_NETNSID says of a veth whose peer is there. -ENOENT when none is
 * assigned (the kernel assigns one when it first reports a link whose peer is there).
 */
int rw_nl_netns_id(int fd, int *nsid);

/* A subscription to RTNLGRP_LINK, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV6_IFADDR and
 * RTNLGRP_TC on a non-blocking socket.
 */
struct rw_nl_sub;

/* What rw_nl_sub_read() calls; either may be NULL. `add` is true for RTM_NEWLINK/RTM_NEWROUTE
 * and false for RTM_DELLINK/RTM_DELROUTE. The kernel sends RTM_NEWLINK for every change of an
 * interface (up, down, carrier, rename...), not only for a new one: treat it as "this is the
 * interface now". on_route gets the main table's unicast routes of both families with an output
 * interface, of any prefix length. on_addr gets IPv6 addresses added and removed (a veth's
 * link-local comes some time after the link, when it goes up).
 *
 * When an interface goes away, the kernel drops its IPv4 routes without a RTM_DELROUTE
 * (fib_sync_down_dev() / fib_flush() do not notify): on_link(false) means its routes are gone.
 */
struct rw_nl_handlers {
	int (*on_link)(bool add, const struct rw_nl_link *link, void *data);
	int (*on_route)(bool add, const struct rw_nl_route *route, void *data);
	int (*on_addr)(bool add, const struct rw_nl_addr *addr, void *data);
	void *data;
	/* A tc filter or qdisc of ifindex was added, changed or removed (RTNLGRP_TC): someone
	 * may have put a filter before runwall's, or taken runwall's clsact away.
	 */
	int (*on_tc)(int ifindex, void *data);
	/* After each datagram's notifications are handled (a read may take many): the caller's
	 * more urgent work may run there, between two of them.
	 */
	void (*between)(void *data);
};

/* rw_nl_sub_read() return value after the socket overran (ENOBUFS: the kernel dropped
 * notifications because the receive queue was full). What was pending has been thrown away;
 * the caller must dump links and routes again, after this return, to learn the state.
 */
#define RW_NL_RESYNC 1

int rw_nl_sub_open(struct rw_nl_sub **out);

/* The fd to poll for POLLIN. */
int rw_nl_sub_fd(const struct rw_nl_sub *sub);

/* Read what is pending (a bounded amount per call, so that one busy socket does not starve the
 * caller's other work: poll again, the fd stays readable while messages remain) and call the
 * handlers. 0 when done, RW_NL_RESYNC after an overrun, a negative errno on error (a handler's
 * error stops the read and is returned; the messages after it in the same read are lost, so
 * a caller that goes on should resync).
 */
int rw_nl_sub_read(struct rw_nl_sub *sub, const struct rw_nl_handlers *h);

void rw_nl_sub_close(struct rw_nl_sub *sub);

/* Whether a route is a host route of its family: IPv4 /32, IPv6 /128 (a per-pod route). */
bool rw_nl_route_is_host(const struct rw_nl_route *route);

/* The agent's and runwall-cni's --ifprefix / ifPrefix by default: the VPC CNI's pod veths. */
#define RW_DEFAULT_IFPREFIX "eni,vlan"

/* Whether `name` starts with one of the comma-separated prefixes in `prefixes` ("eni,vlan").
 * Blanks around a prefix are ignored, and so are empty ones: NULL, "" or "," match nothing.
 */
bool rw_ifname_match(const char *name, const char *prefixes);

#endif /* RUNWALL_NETLINK_H */
