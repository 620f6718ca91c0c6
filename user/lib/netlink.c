// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* netlink.c: link and route dumps and the link/route subscription; see netlink.h. Messages are
 * taken apart with libmnl's helpers only.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/if.h> /* after <net/if.h>: libc-compat.h then skips what glibc has */
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_addr.h>
#include <linux/net_namespace.h>
#include <libmnl/libmnl.h>
#include "netlink.h"
#include "nlutil.h"

_Static_assert(RW_NL_IFNAMSIZ == IF_NAMESIZE, "RW_NL_IFNAMSIZ");

/* Receive queue of the subscription: room for a burst of pod churn (a RTM_NEWLINK of a veth is
 * about 1.5 KiB). Only raised when the caller may (SO_RCVBUFFORCE needs CAP_NET_ADMIN, then
 * SO_RCVBUF, capped by net.core.rmem_max).
 */
#define SUB_RCVBUF (4 << 20)
/* recvmsg() calls per rw_nl_sub_read(). */
#define SUB_READS 64

struct rw_nl_sub {
	struct mnl_socket *nl;
	char *buf;
};

/* What the message callbacks need: the user's callbacks and the first error. */
struct nl_ctx {
	rw_nl_link_fn link_fn; /* dumps */
	rw_nl_route_fn route_fn;
	rw_nl_addr_fn addr_fn;
	void *data;
	__u16 msg_type;			/* the dump's: RTM_NEWLINK, RTM_NEWROUTE or RTM_NEWADDR */
	const struct rw_nl_handlers *h; /* subscription */
	bool intr;			/* a dump message carried NLM_F_DUMP_INTR */
	int err;			/* a callback's error */
};

static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

/* --- parsing ------------------------------------------------------------------------------ */

/* The attributes a parser reads, each with the type it must have: tb[type] is set for each one
 * found; an attribute it does not read, or newer than our headers, is passed over.
 */
struct attr_parse {
	const struct nlattr **tb;
	int max;
	const enum mnl_attr_data_type *types; /* [type]: MNL_TYPE_UNSPEC for one not read */
};

static int attr_cb(const struct nlattr *attr, void *data)
{
	const struct attr_parse *p = data;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, p->max) < 0 || p->types[type] == MNL_TYPE_UNSPEC)
		return MNL_CB_OK;
	if (mnl_attr_validate(attr, p->types[type]) < 0)
		return MNL_CB_ERROR;
	p->tb[type] = attr;
	return MNL_CB_OK;
}

static const enum mnl_attr_data_type link_attrs[IFLA_MAX + 1] = {
	[IFLA_IFNAME] = MNL_TYPE_NUL_STRING,
	[IFLA_OPERSTATE] = MNL_TYPE_U8,
	[IFLA_LINKINFO] = MNL_TYPE_NESTED,
	[IFLA_LINK_NETNSID] = MNL_TYPE_U32,
};
static const enum mnl_attr_data_type linkinfo_attrs[IFLA_INFO_MAX + 1] = {
	[IFLA_INFO_KIND] = MNL_TYPE_NUL_STRING,
};
/* RTA_DST: 4 bytes for IPv4, 16 for IPv6: route_parse() checks the length. */
static const enum mnl_attr_data_type route_attrs[RTA_MAX + 1] = {
	[RTA_DST] = MNL_TYPE_BINARY,
	[RTA_OIF] = MNL_TYPE_U32,
	[RTA_TABLE] = MNL_TYPE_U32,
};
static const enum mnl_attr_data_type addr_attrs[IFA_MAX + 1] = {
	[IFA_ADDRESS] = MNL_TYPE_BINARY,
	[IFA_LOCAL] = MNL_TYPE_BINARY,
	[IFA_FLAGS] = MNL_TYPE_U32,
};

/* 1 and *link filled for an interface message, 0 for one to skip, -1 on a malformed one. */
static int link_parse(const struct nlmsghdr *nlh, struct rw_nl_link *link)
{
	const struct nlattr *tb[IFLA_MAX + 1] = {};
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const char *name;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
		return -1;
	/* RTNLGRP_LINK also carries the bridge's per-port messages (br_ifinfo_notify(),
	 * ifi_family AF_BRIDGE): a RTM_DELLINK there means "left the bridge", not "gone".
	 */
	if (ifi->ifi_family != AF_UNSPEC)
		return 0;
	if (mnl_attr_parse(nlh, sizeof(*ifi), attr_cb,
			   &(struct attr_parse){tb, IFLA_MAX, link_attrs}) < 0)
		return -1;
	memset(link, 0, sizeof(*link));
	link->ifindex = ifi->ifi_index;
	link->flags = ifi->ifi_flags;
	link->admin_up = ifi->ifi_flags & IFF_UP;
	link->oper_up = ifi->ifi_flags & IFF_RUNNING;
	link->link_netnsid =
		tb[IFLA_LINK_NETNSID] ? (int)mnl_attr_get_u32(tb[IFLA_LINK_NETNSID]) : -1;
	link->operstate =
		tb[IFLA_OPERSTATE] ? mnl_attr_get_u8(tb[IFLA_OPERSTATE]) : IF_OPER_UNKNOWN;
	if (tb[IFLA_IFNAME]) {
		name = mnl_attr_get_str(tb[IFLA_IFNAME]);
		strncpy(link->name, name, sizeof(link->name) - 1);
	}
	/* The kernel puts IFLA_LINKINFO in every RTM_NEWLINK (dumps and notifications) of a
	 * device with rtnl_link_ops; a physical NIC has none, and its kind stays "".
	 */
	if (tb[IFLA_LINKINFO]) {
		const struct nlattr *info[IFLA_INFO_MAX + 1] = {};

		if (mnl_attr_parse_nested(
			    tb[IFLA_LINKINFO], attr_cb,
			    &(struct attr_parse){info, IFLA_INFO_MAX, linkinfo_attrs}) < 0)
			return -1;
		if (info[IFLA_INFO_KIND])
			strncpy(link->kind, mnl_attr_get_str(info[IFLA_INFO_KIND]),
				sizeof(link->kind) - 1);
	}
	link->veth = !strcmp(link->kind, "veth");
	return 1;
}

/* 1 and *route filled for a unicast route of the main table with an output interface (IPv4 or
 * IPv6), 0 for anything else, -1 on a malformed message.
 */
static int route_parse(const struct nlmsghdr *nlh, struct rw_nl_route *route)
{
	const struct nlattr *tb[RTA_MAX + 1] = {};
	const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	__u32 table;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*rtm))
		return -1;
	if ((rtm->rtm_family != AF_INET && rtm->rtm_family != AF_INET6) ||
	    rtm->rtm_type != RTN_UNICAST || (rtm->rtm_flags & RTM_F_CLONED) ||
	    rtm->rtm_dst_len > (rtm->rtm_family == AF_INET ? 32 : 128))
		return 0;
	if (mnl_attr_parse(nlh, sizeof(*rtm), attr_cb,
			   &(struct attr_parse){tb, RTA_MAX, route_attrs}) < 0)
		return -1;
	/* rtm_table is 8 bits; tables above 255 are only in RTA_TABLE. */
	table = tb[RTA_TABLE] ? mnl_attr_get_u32(tb[RTA_TABLE]) : rtm->rtm_table;
	if (table != RT_TABLE_MAIN || !tb[RTA_OIF])
		return 0;
	memset(route, 0, sizeof(*route));
	route->family = rtm->rtm_family;
	route->prefixlen = rtm->rtm_dst_len;
	route->oif = (int)mnl_attr_get_u32(tb[RTA_OIF]);
	if (tb[RTA_DST]) {
		size_t want = rtm->rtm_family == AF_INET ? 4 : 16;

		if (mnl_attr_get_payload_len(tb[RTA_DST]) != want)
			return -1;
		/* Both stay big-endian. */
		memcpy(rtm->rtm_family == AF_INET ? (void *)&route->dst : (void *)route->dst6,
		       mnl_attr_get_payload(tb[RTA_DST]), want);
	}
	return 1;
}

static int addr_parse(const struct nlmsghdr *nlh, struct rw_nl_addr *a);

/* --- delivery: a link, route or address message to the caller ------------------------------ */

/* What a message is about. */
enum nl_kind { NL_NONE, NL_LINK, NL_ROUTE, NL_ADDR };

/* A link, route or address message, parsed. */
union nl_obj {
	struct rw_nl_link link;
	struct rw_nl_route route;
	struct rw_nl_addr addr;
};

/* A message's kind; *add: it says new (else deleted). */
static enum nl_kind kind_of(__u16 type, bool *add)
{
	*add = type == RTM_NEWLINK || type == RTM_NEWROUTE || type == RTM_NEWADDR;
	if (type == RTM_NEWLINK || type == RTM_DELLINK)
		return NL_LINK;
	if (type == RTM_NEWROUTE || type == RTM_DELROUTE)
		return NL_ROUTE;
	if (type == RTM_NEWADDR || type == RTM_DELADDR)
		return NL_ADDR;
	return NL_NONE;
}

/* 1 and *o filled, 0 to skip, -1 when malformed. */
static int kind_parse(const struct nlmsghdr *nlh, enum nl_kind kind, union nl_obj *o)
{
	if (kind == NL_LINK)
		return link_parse(nlh, &o->link);
	if (kind == NL_ROUTE)
		return route_parse(nlh, &o->route);
	return addr_parse(nlh, &o->addr);
}

/* The caller's answer: the dump's function, or the subscription's handler. */
static int kind_call(const struct nl_ctx *ctx, enum nl_kind kind, bool add, const union nl_obj *o)
{
	const struct rw_nl_handlers *h = ctx->h;

	if (kind == NL_LINK)
		return h ? h->on_link(add, &o->link, h->data) : ctx->link_fn(&o->link, ctx->data);
	if (kind == NL_ROUTE)
		return h ? h->on_route(add, &o->route, h->data)
			 : ctx->route_fn(&o->route, ctx->data);
	return h ? h->on_addr(add, &o->addr, h->data) : ctx->addr_fn(&o->addr, ctx->data);
}

/* A link, route or address message of a dump or of the subscription, parsed and handed to the
 * caller (a subscription's only when it has a handler for the kind; a dump's routes: host
 * routes only, a pod's /32 or /128). -1 for a malformed message, 0 for one skipped, 1 for one
 * delivered (ctx->err then holds the caller's answer).
 */
static int deliver(const struct nlmsghdr *nlh, struct nl_ctx *ctx)
{
	const struct rw_nl_handlers *h = ctx->h;
	union nl_obj o;
	enum nl_kind kind;
	bool add;
	int ret;

	kind = kind_of(nlh->nlmsg_type, &add);
	if (kind == NL_NONE ||
	    (h && ((kind == NL_LINK && !h->on_link) || (kind == NL_ROUTE && !h->on_route) ||
		   (kind == NL_ADDR && !h->on_addr))))
		return 0;
	ret = kind_parse(nlh, kind, &o);
	if (ret <= 0 || (!h && kind == NL_ROUTE && !rw_nl_route_is_host(&o.route)))
		return ret < 0 ? ret : 0;
	ctx->err = kind_call(ctx, kind, add, &o);
	return 1;
}

/* --- dumps --------------------------------------------------------------------------------- */

/* One callback for every dump: a message of the dump's type is delivered. */
static int dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nl_ctx *ctx = data;
	int ret;

	if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
		ctx->intr = true;
	if (nlh->nlmsg_type != ctx->msg_type)
		return MNL_CB_OK;
	ret = deliver(nlh, ctx);
	if (ret < 0)
		return MNL_CB_ERROR;
	return ret && ctx->err ? MNL_CB_ERROR : MNL_CB_OK;
}

/* Run a dump: a callback's error first, then rw_mnl_dump()'s, then -EAGAIN
 * when the kernel flagged the dump as interrupted.
 */
static int dump_run(struct nlmsghdr *nlh, struct nl_ctx *ctx, bool strict)
{
	int err = rw_mnl_dump_opts(nlh, dump_cb, ctx, strict);

	if (err)
		return ctx->err ? ctx->err : err;
	return ctx->intr ? -EAGAIN : 0;
}

int rw_nl_dump_links(rw_nl_link_fn fn, void *data)
{
	struct nl_ctx ctx = {.link_fn = fn, .data = data, .msg_type = RTM_NEWLINK};
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifi;
	int err;

	if (!fn)
		return -EINVAL;
	ifi = rw_mnl_dump_request(RTM_GETLINK, sizeof(*ifi), &nlh);
	if (!ifi)
		return -ENOMEM;
	ifi->ifi_family = AF_UNSPEC;
	/* Leave out the statistics: they are most of a RTM_NEWLINK and runwall has no use
	 * for them.
	 */
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	err = dump_run(nlh, &ctx, false);
	free(nlh);
	return err;
}

static int nsid_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[NETNSA_MAX + 1] = {};
	static const enum mnl_attr_data_type types[NETNSA_MAX + 1] = {[NETNSA_NSID] = MNL_TYPE_U32};

	if (nlh->nlmsg_type != RTM_NEWNSID)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(struct rtgenmsg), attr_cb,
			   &(struct attr_parse){tb, NETNSA_MAX, types}) < 0)
		return MNL_CB_ERROR;
	if (tb[NETNSA_NSID])
		*(int *)data = (int)mnl_attr_get_u32(tb[NETNSA_NSID]);
	return MNL_CB_STOP;
}

int rw_nl_netns_id(int fd, int *nsid)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtgenmsg *g;
	struct mnl_socket *nl;
	unsigned int seq, portid;
	int ret, id = NETNSA_NSID_NOT_ASSIGNED;

	nlh->nlmsg_type = RTM_GETNSID;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = seq = (unsigned int)time(NULL);
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (__u32)fd);
	nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl)
		return neg_errno();
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
	    mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		ret = neg_errno();
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	ret = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (ret < 0) {
		ret = neg_errno();
		goto out;
	}
	errno = 0;
	/* The answer is one RTM_NEWNSID, or an error. */
	ret = mnl_cb_run(buf, ret, seq, portid, nsid_cb, &id);
	if (ret < 0) {
		ret = neg_errno();
		goto out;
	}
	ret = id < 0 ? -ENOENT : 0;
	if (!ret)
		*nsid = id;
out:
	mnl_socket_close(nl);
	return ret;
}

/* One family's routes: the whole table, or strictly those of oif in the main table. */
static int dump_routes_family(int family, int oif, rw_nl_route_fn fn, void *data)
{
	struct nl_ctx ctx = {.route_fn = fn, .data = data, .msg_type = RTM_NEWROUTE};
	struct nlmsghdr *nlh;
	struct rtmsg *rtm;
	int err;

	rtm = rw_mnl_dump_request(RTM_GETROUTE, sizeof(*rtm), &nlh);
	if (!rtm)
		return -ENOMEM;
	rtm->rtm_family = (unsigned char)family;
	if (oif > 0) {
		rtm->rtm_table = RT_TABLE_MAIN;
		mnl_attr_put_u32(nlh, RTA_OIF, (__u32)oif);
	}
	/* Strict for one interface: the kernel filters on the table and the interface (and says
	 * -ENODEV when no interface has that index) instead of sending the whole table.
	 */
	err = dump_run(nlh, &ctx, oif > 0);
	free(nlh);
	/* A kernel booted with ipv6.disable=1 has no IPv6 routes to dump. */
	return family == AF_INET6 && err == -EAFNOSUPPORT ? 0 : err;
}

int rw_nl_dump_routes(rw_nl_route_fn fn, void *data)
{
	int err;

	if (!fn)
		return -EINVAL;
	err = dump_routes_family(AF_INET, 0, fn, data);
	return err ? err : dump_routes_family(AF_INET6, 0, fn, data);
}

int rw_nl_dump_routes_via(int oif, rw_nl_route_fn fn, void *data)
{
	int err;

	if (!fn || oif <= 0)
		return -EINVAL;
	err = dump_routes_family(AF_INET, oif, fn, data);
	return err ? err : dump_routes_family(AF_INET6, oif, fn, data);
}

bool rw_nl_route_is_host(const struct rw_nl_route *r)
{
	if (r->family == AF_INET)
		return r->prefixlen == 32 && r->dst;
	return r->family == AF_INET6 && r->prefixlen == 128;
}

/* 1 and *a filled for an address message of either family, 0 to skip, -1 when malformed. */
static int addr_parse(const struct nlmsghdr *nlh, struct rw_nl_addr *a)
{
	const struct nlattr *tb[IFA_MAX + 1] = {};
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *at;
	size_t want;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifa))
		return -1;
	if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
		return 0;
	if (mnl_attr_parse(nlh, sizeof(*ifa), attr_cb,
			   &(struct attr_parse){tb, IFA_MAX, addr_attrs}) < 0)
		return -1;
	/* IFA_LOCAL is the interface's own address where a peer address differs; IPv6 sends
	 * IFA_ADDRESS alone.
	 */
	at = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	want = ifa->ifa_family == AF_INET ? 4 : 16;
	if (!at || mnl_attr_get_payload_len(at) != want)
		return 0;
	memset(a, 0, sizeof(*a));
	a->ifindex = (int)ifa->ifa_index;
	a->family = ifa->ifa_family;
	a->prefixlen = ifa->ifa_prefixlen;
	a->scope = ifa->ifa_scope;
	/* IFA_FLAGS holds all 32 bits; ifa_flags only the first 8. */
	a->flags = tb[IFA_FLAGS] ? mnl_attr_get_u32(tb[IFA_FLAGS]) : ifa->ifa_flags;
	memcpy(a->addr, mnl_attr_get_payload(at), want);
	return 1;
}

struct link_local_want {
	int ifindex;
	bool found;
	__be32 addr[4];
};

static int link_local_cb(const struct rw_nl_addr *a, void *data)
{
	struct link_local_want *w = data;

	if (w->found || a->ifindex != w->ifindex || a->family != AF_INET6 ||
	    a->scope != RT_SCOPE_LINK || (a->flags & IFA_F_DADFAILED))
		return 0;
	memcpy(w->addr, a->addr, sizeof(w->addr));
	w->found = true;
	return 0;
}

int rw_nl_link_local6(int ifindex, __be32 addr[4])
{
	struct link_local_want w = {.ifindex = ifindex};
	struct nl_ctx ctx = {.addr_fn = link_local_cb, .data = &w, .msg_type = RTM_NEWADDR};
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	int err;

	if (ifindex <= 0)
		return -EINVAL;
	for (int tries = 0; tries < 5; tries++) {
		ifa = rw_mnl_dump_request(RTM_GETADDR, sizeof(*ifa), &nlh);
		if (!ifa)
			return -ENOMEM;
		ifa->ifa_family = AF_INET6;
		ifa->ifa_index = (unsigned int)ifindex;
		/* Strict: the kernel sends only ifindex's addresses (-ENODEV for none such). */
		ctx.intr = false;
		ctx.err = 0;
		w.found = false;
		err = dump_run(nlh, &ctx, true);
		free(nlh);
		if (err != -EAGAIN)
			break;
	}
	if (err == -EAFNOSUPPORT) /* ipv6.disable=1: no link-local anywhere */
		return -ENOENT;
	if (err)
		return err;
	if (!w.found)
		return -ENOENT;
	memcpy(addr, w.addr, sizeof(w.addr));
	return 0;
}

/* --- subscription ------------------------------------------------------------------------- */

int rw_nl_sub_open(struct rw_nl_sub **out)
{
	static const unsigned int groups[] = {RTNLGRP_LINK, RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE,
					      RTNLGRP_IPV6_IFADDR, RTNLGRP_TC};
	struct rw_nl_sub *sub = NULL;
	int err, fd, sz = SUB_RCVBUF;
	size_t i;

	if (!out)
		return -EINVAL;
	*out = NULL;
	sub = calloc(1, sizeof(*sub));
	if (!sub) {
		err = -ENOMEM;
		goto out;
	}
	sub->buf = malloc(RW_NL_BUFSZ);
	if (!sub->buf) {
		err = -ENOMEM;
		goto out;
	}
	sub->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (!sub->nl) {
		err = neg_errno();
		goto out;
	}
	if (mnl_socket_bind(sub->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err = neg_errno();
		goto out;
	}
	for (i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
		if (mnl_socket_setsockopt(sub->nl, NETLINK_ADD_MEMBERSHIP, (void *)&groups[i],
					  sizeof(groups[i])) < 0) {
			err = neg_errno();
			goto out;
		}
	}
	fd = mnl_socket_get_fd(sub->nl);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)); /* best effort */
	*out = sub;
	sub = NULL;
	err = 0;
out:
	rw_nl_sub_close(sub);
	return err;
}

int rw_nl_sub_fd(const struct rw_nl_sub *sub)
{
	return sub ? mnl_socket_get_fd(sub->nl) : -EINVAL;
}

void rw_nl_sub_close(struct rw_nl_sub *sub)
{
	if (!sub)
		return;
	if (sub->nl)
		mnl_socket_close(sub->nl);
	free(sub->buf);
	free(sub);
}

static int sub_msg_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nl_ctx *ctx = data;
	const struct rw_nl_handlers *h = ctx->h;
	int ret;

	switch (nlh->nlmsg_type) {
	case RTM_NEWTFILTER:
	case RTM_DELTFILTER:
	case RTM_NEWQDISC:
	case RTM_DELQDISC: {
		const struct tcmsg *tcm = mnl_nlmsg_get_payload(nlh);

		if (!h->on_tc)
			return MNL_CB_OK;
		if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*tcm))
			return MNL_CB_ERROR;
		ctx->err = h->on_tc(tcm->tcm_ifindex, h->data);
		break;
	}
	default:
		ret = deliver(nlh, ctx);
		if (ret <= 0)
			return ret < 0 ? MNL_CB_ERROR : MNL_CB_OK;
	}
	return ctx->err ? MNL_CB_ERROR : MNL_CB_OK;
}

/* After ENOBUFS the queue holds notifications from before and after the ones the kernel
 * dropped; applying them around a fresh dump could bring back state that the lost ones had
 * changed. Throw everything pending away, so that only notifications newer than the
 * caller's coming dump are read later.
 */
static void sub_drain(struct rw_nl_sub *sub)
{
	int fd = mnl_socket_get_fd(sub->nl), i;

	for (i = 0; i < 4096; i++) {
		if (recv(fd, sub->buf, RW_NL_BUFSZ, MSG_DONTWAIT) < 0 && errno != ENOBUFS &&
		    errno != EINTR)
			break;
	}
}

int rw_nl_sub_read(struct rw_nl_sub *sub, const struct rw_nl_handlers *h)
{
	struct nl_ctx ctx = {.h = h};
	struct sockaddr_nl sa;
	struct iovec iov;
	struct msghdr msg = {
		.msg_name = &sa,
		.msg_namelen = sizeof(sa),
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	ssize_t len;
	int i, ret, err = 0;

	if (!sub || !h)
		return -EINVAL;
	iov.iov_base = sub->buf;
	iov.iov_len = RW_NL_BUFSZ;
	for (i = 0; i < SUB_READS; i++) {
		msg.msg_namelen = sizeof(sa);
		len = recvmsg(mnl_socket_get_fd(sub->nl), &msg, MSG_DONTWAIT);
		if (len < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == ENOBUFS) {
				sub_drain(sub);
				err = RW_NL_RESYNC;
				break;
			}
			err = -errno;
			break;
		}
		/* Notifications come from the kernel (port 0); anyone else on the host may
		 * send to our port, so drop what is not the kernel's.
		 */
		if (msg.msg_namelen != sizeof(sa) || sa.nl_pid != 0)
			continue;
		if (msg.msg_flags & MSG_TRUNC) {
			/* A notification bigger than the buffer: it is lost, resync. */
			sub_drain(sub);
			err = RW_NL_RESYNC;
			break;
		}
		ctx.err = 0;
		errno = 0;
		ret = mnl_cb_run(sub->buf, len, 0, 0, sub_msg_cb, &ctx);
		if (ret < 0) {
			err = ctx.err ? ctx.err : neg_errno();
			break;
		}
		if (h->between)
			h->between(h->data);
	}
	return err;
}

bool rw_ifname_match(const char *name, const char *prefixes)
{
	const char *p, *end, *next;

	if (!name || !prefixes)
		return false;
	for (p = prefixes; *p; p = next) {
		end = strchr(p, ',');
		next = end ? end + 1 : p + strlen(p);
		if (!end)
			end = next;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (end > p && !strncmp(name, p, (size_t)(end - p)))
			return true;
	}
	return false;
}
