// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* sandboxes.c: the agent's sandbox veths: attach runwall's programs to every veth whose name has
 * the prefix (no other kind of device), bind each to the pod its routes name (the /32 of its IPv4,
 * the /128 of its IPv6, as the VPC CNI makes them, with the host veth's own link-local address as
 * the pod's IPv6 gateway), forget what goes away, and a full resync that makes the kernel's
 * picture match the system's.
 *
 * A netlink event, or a dump, says what was true when the kernel sent it. By the time the agent
 * acts on it, the veth behind an ifindex may be another one: the pod deleted, the next pod's veth
 * created with the same ifindex (and even the same name) and already protected and bound by
 * runwall-cni. So events and dumps only say which veth to look at: every change to a veth's
 * programs or binding is made under the veth lock that runwall-cni takes too (rw_veth_lock()),
 * after asking the kernel again what the veth is now (its name) and which pod its route names.
 */
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <linux/rtnetlink.h>

#include "agent.h"
#include "log.h"
#include "netlink.h"
#include "podaddr.h"
#include "reasons.h"
#include "veth.h"

static struct sandbox *sbx_find(struct agent *a, int ifindex)
{
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++)
		if (a->sandboxes.sbx[i].ifindex == ifindex)
			return &a->sandboxes.sbx[i];
	return NULL;
}

int64_t agent_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* runwall-cni holds the veth lock for a few map updates and attaches. */
#define VETH_LOCK_MS 1000

/* The veth lock (a runwall-cni in a sandbox-heavy cgroup may hold it for tens of milliseconds
 * without a CPU). On the link thread the loop applies PolicyWatch's changes meanwhile
 * (link_thread.c); where the link work runs on the loop itself (no thread), the wait applies
 * them (agent_follow_urgent() does nothing elsewhere). An apply changes no sandbox, so the
 * caller's struct sandbox stays where it was, and every caller asks the kernel what the veth
 * is again under the lock.
 */
static int veth_lock(struct agent *a)
{
	return rw_veth_lock_meanwhile(a->dp.pin_dir, VETH_LOCK_MS, agent_follow_urgent_cb, a);
}

/* The veth lock, or a negative errno: then the change waits for a resync. */
static int sbx_lock(struct agent *a)
{
	int fd = veth_lock(a);

	if (fd < 0) {
		rw_err("veth lock on %s: %s; the change waits for the next resync", a->dp.pin_dir,
		       strerror(-fd));
		a->sandboxes.links_dirty = true;
	}
	return fd;
}

/* Called by agent_full_resync() after its dumps, before it acts on them. Tests replace it to
 * change the system at exactly that moment; here it does nothing.
 */
__attribute__((weak)) void agent_resync_after_dump(struct agent *a)
{
}

/* Both programs on the veth (rw_veth_attach(), the code runwall-cni uses too). A failure is
 * counted, shown in status and tried again after a backoff by the tick (agent_sandboxes_tick()),
 * so a veth is not left open until the next resync.
 */
static void sbx_attach(struct agent *a, struct sandbox *s)
{
	int errs[RW_DIR_COUNT] = {};
	char msg[sizeof(s->attach_error)] = "", name[IF_NAMESIZE];
	/* Attaching to a sandbox veth is never wrong, so a lock that cannot be had does not stop
	 * it; the lock keeps it from crossing runwall-cni's attach of the same hook.
	 */
	int lock = veth_lock(a);

	if (!rw_veth_is_sandbox(s->ifindex, a->ifprefix, name)) {
		/* Gone, or another interface has its ifindex now: nothing of ours to attach to.
		 * Its RTM_DELLINK or the next resync forgets it.
		 */
		s->retry_at_ms = 0;
		rw_veth_unlock(lock);
		return;
	}
	if (strcmp(s->ifname, name))
		snprintf(s->ifname, sizeof(s->ifname), "%s", name);
	rw_veth_attach(&a->dp, s->ifindex, a->attach_mode, s->mode, errs);
	rw_veth_unlock(lock);
	for (int d = 0; d < RW_DIR_COUNT; d++) {
		s->attached[d] = !errs[d];
		if (errs[d] && !msg[0])
			snprintf(msg, sizeof(msg), "attach %s: %s", rw_dir_name(d),
				 rw_attach_strerror(errs[d]));
	}
	if (!msg[0]) {
		if (s->attach_failures)
			rw_info("%s: attached after %u failed attempts", s->ifname,
				s->attach_failures);
		s->attach_failures = 0;
		s->backoff_ms = 0;
		s->retry_at_ms = 0;
		s->attach_error[0] = '\0';
		return;
	}
	a->sandboxes.attach_failures++;
	s->attach_failures++;
	s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : ATTACH_RETRY_MIN_MS;
	if (s->backoff_ms > ATTACH_RETRY_MAX_MS)
		s->backoff_ms = ATTACH_RETRY_MAX_MS;
	s->retry_at_ms = agent_now_ms() + s->backoff_ms;
	snprintf(s->attach_error, sizeof(s->attach_error), "%s", msg);
	rw_err("%s: %s (attempt %u; again in %u ms)", s->ifname, msg, s->attach_failures,
	       s->backoff_ms);
	agent_set_error(a, "%s: %s", s->ifname, msg);
}

static struct sandbox *sbx_add(struct agent *a, int ifindex, const char *name)
{
	struct sandbox *s = sbx_find(a, ifindex), *grown;

	if (s) {
		if (strcmp(s->ifname, name)) {
			rw_info("%s: renamed to %s", s->ifname, name);
			snprintf(s->ifname, sizeof(s->ifname), "%s", name);
		}
		return s;
	}
	grown = realloc(a->sandboxes.sbx, (a->sandboxes.n_sbx + 1) * sizeof(*a->sandboxes.sbx));
	if (!grown)
		return NULL;
	a->sandboxes.sbx = grown;
	s = &a->sandboxes.sbx[a->sandboxes.n_sbx++];
	memset(s, 0, sizeof(*s));
	s->ifindex = ifindex;
	snprintf(s->ifname, sizeof(s->ifname), "%s", name);
	/* Programs first, before the pod is known: an unbound veth is deny-all. */
	sbx_attach(a, s);
	rw_info("%s (ifindex %d): attached (%s, %s), deny-all until its pod is known", s->ifname,
		ifindex, rw_attach_mode_str(s->mode[RW_DIR_EGRESS]),
		rw_attach_mode_str(s->mode[RW_DIR_INGRESS]));
	return s;
}

/* A sandbox waits for room: ask for a full resync at the next tick, which binds it if the
 * room that was just freed is enough.
 */
static void sbx_room_freed(struct agent *a)
{
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++)
		if (a->sandboxes.sbx[i].waiting_pod.flags) {
			a->sandboxes.links_dirty = true;
			return;
		}
}

/* Whether a binding holds an address of either family (a gateway alone binds nothing). */
static bool ep_bound(const struct rw_endpoint *ep)
{
	return ep->flags & (RW_EP_IP4 | RW_EP_IP6);
}

static void sbx_bind(struct agent *a, struct sandbox *s, const struct rw_endpoint *pod)
{
	char ip[RW_EP_STRLEN], old[RW_EP_STRLEN], why[sizeof(s->bind_error)];
	struct rw_endpoint now = {};
	bool bind = ep_bound(pod);
	int err;

	if (!bind || !rw_endpoint_same(pod, &s->waiting_pod)) {
		memset(&s->waiting_pod, 0, sizeof(s->waiting_pod));
		s->bind_error[0] = '\0';
	}
	if (rw_endpoint_same(&s->pod, pod))
		return;
	rw_endpoint_str(pod, true, ip, sizeof(ip));
	rw_endpoint_str(&s->pod, true, old, sizeof(old));
	if (ep_bound(&s->pod) && bind) {
		struct rw_endpoint x = s->pod, y = *pod;

		/* The same addresses with another gateway (its link-local came or went) is the
		 * same pod: its flows stay (rw_endpoint_bind_addrs()).
		 */
		x.flags &= ~RW_EP_GW6;
		y.flags &= ~RW_EP_GW6;
		if (!rw_endpoint_same(&x, &y))
			rw_warn("%s: pod %s replaced by %s", s->ifname, old, ip);
	}
	err = bind ? rw_endpoint_bind_addrs(&a->dp, s->ifindex, pod)
		   : rw_endpoint_unbind(&a->dp, s->ifindex);
	if (err && bind) {
		/* The veth stays (or is now) bound to nothing: deny-all, its packets dropped
		 * unknown-source. Said once per pod and cause, tried again by every resync.
		 */
		a->sandboxes.bind_failures++;
		rw_bind_error_str(&a->dp, err, why, sizeof(why));
		if (!rw_endpoint_same(&s->waiting_pod, pod) || strcmp(s->bind_error, why)) {
			rw_err("%s (ifindex %d): pod %s not bound, deny-all: %s; bound by the next "
			       "resync that finds room",
			       s->ifname, s->ifindex, ip, why);
			agent_set_error(a, "%s: pod %s not bound: %s", s->ifname, ip, why);
		}
		s->waiting_pod = *pod;
		snprintf(s->bind_error, sizeof(s->bind_error), "%s", why);
		if (rw_endpoint_get(&a->dp, s->ifindex, &now))
			memset(&now, 0, sizeof(now));
		if (ep_bound(&s->pod) && !ep_bound(&now))
			sbx_room_freed(a); /* the old pod's binding went with the attempt */
		s->pod = now;
		return;
	}
	if (err) {
		rw_err("%s: unbind: %s", s->ifname, strerror(-err));
		return;
	}
	if (bind && s->waiting_pod.flags)
		rw_info("%s: bound to pod %s (it waited for room: %s)", s->ifname, ip,
			s->bind_error);
	else if (bind)
		rw_info("%s: bound to pod %s", s->ifname, ip);
	else
		rw_info("%s: pod %s gone, deny-all", s->ifname, old);
	memset(&s->waiting_pod, 0, sizeof(s->waiting_pod));
	s->bind_error[0] = '\0';
	if (!bind)
		sbx_room_freed(a);
	s->pod = *pod;
	/* A new pod's containers get their veth now, not at the next rescan: on the link thread,
	 * as soon as this piece is done (it writes the admissions an apply reads).
	 */
	if (bind && agent_beside_running(a))
		a->link.containers_due = true;
	else if (bind)
		containers_poll(a);
}

void agent_sandboxes_tick(struct agent *a)
{
	int64_t now = agent_now_ms();

	for (size_t i = 0; i < a->sandboxes.n_sbx; i++) {
		struct sandbox *s = &a->sandboxes.sbx[i];

		if (!s->retry_at_ms || now < s->retry_at_ms)
			continue;
		a->sandboxes.attach_retries++;
		sbx_attach(a, s);
	}
}

static void sbx_forget(struct agent *a, struct sandbox *s)
{
	int ifindex = s->ifindex;

	rw_info("%s (ifindex %d): gone", s->ifname, ifindex);
	*s = a->sandboxes.sbx[--a->sandboxes.n_sbx];
	sbx_room_freed(a);
}

/* Whether a route is a pod's: a host route (/32, /128) to an address a pod can have. A route to
 * an address no pod can have (loopback, link-local, broadcast...) names no pod: it is not bound,
 * and it cannot hide the veth's pod route.
 */
static bool pod_route(const struct rw_nl_route *r)
{
	if (!rw_nl_route_is_host(r))
		return false;
	if (r->family == AF_INET6)
		return !rw_pod_addr6_refusal(r->dst6);
	return !rw_pod_addr_refusal(r->dst);
}

/* The first pod route of each family into the binding it names. */
static void route_into(struct rw_endpoint *ep, const struct rw_nl_route *r)
{
	if (!pod_route(r))
		return;
	if (r->family == AF_INET6 && !(ep->flags & RW_EP_IP6)) {
		memcpy(ep->pod_ip6, r->dst6, sizeof(ep->pod_ip6));
		ep->flags |= RW_EP_IP6;
	} else if (r->family == AF_INET && !(ep->flags & RW_EP_IP4)) {
		ep->pod_ip = r->dst;
		ep->flags |= RW_EP_IP4;
	}
}

static int first_route(const struct rw_nl_route *r, void *data)
{
	route_into(data, r);
	return 0;
}

/* The pod the main table's /32 and /128 routes name for ifindex now (flags 0: none), with the
 * veth's own link-local address as its IPv6 gateway when it has one. -ENODEV: no such
 * interface.
 */
static int route_pod(int ifindex, struct rw_endpoint *pod)
{
	int err;

	for (int tries = 0; tries < 5; tries++) {
		memset(pod, 0, sizeof(*pod));
		err = rw_nl_dump_routes_via(ifindex, first_route, pod);
		if (err != -EAGAIN)
			break;
	}
	if (err || !ep_bound(pod))
		return err;
	/* Bound with the pod's addresses: the gateway, which no NDP message of the pod may
	 * claim. None yet (the link is not up): its RTM_NEWADDR brings it.
	 */
	err = rw_nl_link_local6(ifindex, pod->gw_ip6);
	if (!err)
		pod->flags |= RW_EP_GW6;
	else
		memset(pod->gw_ip6, 0, sizeof(pod->gw_ip6));
	return err == -ENOENT ? 0 : err;
}

/* Bind s to the pod its route names now, as the kernel says under the veth lock, whatever the
 * event that brought the agent here said: that event may be about the veth that had this
 * ifindex before, and the binding now in the map may be runwall-cni's for the veth that has
 * it now.
 */
static void sbx_sync_pod(struct agent *a, struct sandbox *s)
{
	char name[IF_NAMESIZE];
	struct rw_endpoint want, bound;
	int lock = sbx_lock(a), err;

	if (lock < 0)
		return;
	if (!rw_veth_is_sandbox(s->ifindex, a->ifprefix, name))
		goto out; /* gone or not ours: its RTM_DELLINK (or a resync) takes it off */
	err = route_pod(s->ifindex, &want);
	if (err) {
		if (err != -ENODEV) {
			rw_err("%s: asking for its route: %s; resyncing", s->ifname,
			       strerror(-err));
			a->sandboxes.links_dirty = true;
		}
		goto out;
	}
	err = rw_endpoint_get(&a->dp, s->ifindex, &bound);
	if (err == -ENOENT)
		memset(&bound, 0, sizeof(bound));
	if (!err || err == -ENOENT)
		s->pod = bound; /* whoever wrote it: runwall-cni, or this agent before a restart */
	sbx_bind(a, s, &want);
out:
	rw_veth_unlock(lock);
}

/* Take runwall off ifindex (its pins, binding and flows) unless a sandbox veth has that ifindex
 * now: that one's programs and binding are its own (runwall-cni's ADD, done before this was
 * read). True when taken off (or nothing could be checked: false, and a resync is asked for).
 */
static bool sbx_remove(struct agent *a, int ifindex)
{
	char name[IF_NAMESIZE];
	struct sandbox *s;
	int lock = sbx_lock(a);

	if (lock < 0)
		return false;
	if (rw_veth_is_sandbox(ifindex, a->ifprefix, name)) {
		rw_veth_unlock(lock);
		return false;
	}
	for (int d = 0; d < RW_DIR_COUNT; d++)
		rw_detach(a->dp.pin_dir, ifindex, d);
	rw_endpoint_unbind(&a->dp, ifindex);
	rw_veth_unlock(lock);
	s = sbx_find(a, ifindex);
	if (s)
		sbx_forget(a, s);
	return true;
}

/* RTM_DELLINK, read late: when a new sandbox veth already has the ifindex again (a pod deleted
 * and the next one created, runwall-cni's ADD done before this event is read), the pins and the
 * binding under that ifindex are the new veth's. The old veth's tcx links died with it and
 * runwall-cni's DEL unbound it; the sandbox is looked at again as the veth it is now (attach is
 * idempotent and replaces a defunct link's pin, the binding follows the route).
 */
static void sbx_gone(struct agent *a, int ifindex)
{
	struct sandbox *s;

	if (sbx_remove(a, ifindex))
		return;
	s = sbx_find(a, ifindex);
	a->sandboxes.links_dirty = true;
	if (!s)
		return;
	rw_info("ifindex %d: gone and already reused; looking at it again", ifindex);
	sbx_attach(a, s);
	sbx_sync_pod(a, s);
}

/* Only a veth is a sandbox's host side. Another device with the prefix (the VPC CNI's
 * vlan.eth.N trunk of branch-ENI pods has no /32 route of its own: attached, it would drop all
 * its pods' traffic as unknown-source) is left alone, and said once.
 */
static bool not_veth(struct agent *a, const struct rw_nl_link *l)
{
	size_t n = sizeof(a->sandboxes.not_veth) / sizeof(a->sandboxes.not_veth[0]);

	if (l->veth)
		return false;
	for (size_t i = 0; i < n; i++)
		if (a->sandboxes.not_veth[i] == l->ifindex)
			return true;
	a->sandboxes.not_veth[a->sandboxes.n_not_veth++ % n] = l->ifindex;
	rw_info("%s (ifindex %d): has the prefix but is a %s, not a veth; left alone", l->name,
		l->ifindex, l->kind[0] ? l->kind : "device of no kind");
	return true;
}

int agent_on_link(bool add, const struct rw_nl_link *l, void *data)
{
	struct agent *a = data;
	struct sandbox *s;

	if (!add) {
		if (sbx_find(a, l->ifindex))
			sbx_gone(a, l->ifindex);
		return 0;
	}
	if (!rw_ifname_match(l->name, a->ifprefix) || not_veth(a, l)) {
		/* Renamed away from the prefix: no longer ours (sbx_remove() asks again). */
		if (sbx_find(a, l->ifindex))
			sbx_remove(a, l->ifindex);
		return 0;
	}
	s = sbx_add(a, l->ifindex, l->name);
	if (!s)
		return -ENOMEM;
	/* Routes may have come before the link: sbx_sync_pod() asks the kernel for this veth's
	 * route now. Nothing else of the node changed, so no full resync: at EKS's density, with
	 * pods coming and going, one per link event would walk every sandbox's hooks many times
	 * a second on the loop that applies PolicyWatch's changes.
	 */
	sbx_sync_pod(a, s);
	return 0;
}

int agent_on_route(bool add, const struct rw_nl_route *r, void *data)
{
	struct agent *a = data;

	if (!pod_route(r))
		return 0;
	/* The route's veth, and every veth bound to its address: the VPC CNI moves a pod IP with
	 * RouteReplace, one RTM_NEWROUTE for the new interface and no RTM_DELROUTE for the old,
	 * and a /32 (or /128) names one interface at a time. Each is bound to what its routes say
	 * now.
	 */
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++) {
		struct sandbox *s = &a->sandboxes.sbx[i];
		bool holds = r->family == AF_INET6
				     ? (s->pod.flags & RW_EP_IP6) &&
					       !memcmp(s->pod.pod_ip6, r->dst6, sizeof(r->dst6))
				     : (s->pod.flags & RW_EP_IP4) && s->pod.pod_ip == r->dst;

		if (s->ifindex == r->oif || holds)
			sbx_sync_pod(a, s);
	}
	return 0;
}

/* An IPv6 address of a sandbox veth came or went: its link-local is the pod's gateway in the
 * binding (the kernel adds it when the link goes up, after the agent may have bound the pod).
 */
int agent_on_addr(bool add, const struct rw_nl_addr *addr, void *data)
{
	struct agent *a = data;
	struct sandbox *s;

	if (addr->family != AF_INET6 || addr->scope != RT_SCOPE_LINK)
		return 0;
	s = sbx_find(a, addr->ifindex);
	if (s && ep_bound(&s->pod))
		sbx_sync_pod(a, s);
	return 0;
}

/* runwall first on both hooks of s, as the kernel lists them; rw_attach() puts it back in
 * front when it is not.
 */
static void sbx_check_hooks(struct agent *a, struct sandbox *s)
{
	struct rw_hook_info hi;

	for (int d = 0; d < RW_DIR_COUNT; d++) {
		memset(&hi, 0, sizeof(hi));
		if (rw_hook_query_pinned(a->dp.pin_dir, s->ifindex, d, &hi) == 0 && hi.found &&
		    hi.first)
			continue;
		rw_warn("%s: runwall %s on the %s hook; attaching again", s->ifname,
			hi.found ? "was not first" : "was missing", rw_dir_name(d));
		a->sandboxes.hook_repairs++;
		sbx_attach(a, s);
		return;
	}
}

/* A tc filter or qdisc of a sandbox veth changed (another tool's filter added before runwall's
 * in tc mode, or its clsact deleted): the hooks are checked now, not at the next resync. A
 * program put before runwall's on a tcx hook sends no netlink event: the resync finds that one.
 */
int agent_on_tc(int ifindex, void *data)
{
	struct agent *a = data;
	struct sandbox *s = sbx_find(a, ifindex);

	if (s && !s->retry_at_ms)
		sbx_check_hooks(a, s);
	return 0;
}

static int dump_link(const struct rw_nl_link *l, void *data)
{
	struct agent *a = data;
	struct sandbox *s;

	if (!rw_ifname_match(l->name, a->ifprefix) || not_veth(a, l))
		return 0;
	s = sbx_add(a, l->ifindex, l->name);
	if (!s)
		return -ENOMEM;
	s->seen = true;
	return 0;
}

struct route_want {
	int ifindex;
	struct rw_endpoint pod; /* its addresses only: the gateway is not dumped */
};

struct route_dump {
	struct route_want *w;
	size_t n;
};

static int dump_route(const struct rw_nl_route *r, void *data)
{
	struct route_dump *rd = data;
	struct route_want *grown;

	if (!pod_route(r))
		return 0; /* as first_route() */
	for (size_t i = 0; i < rd->n; i++)
		if (rd->w[i].ifindex == r->oif) {
			route_into(&rd->w[i].pod, r);
			return 0;
		}
	grown = realloc(rd->w, (rd->n + 1) * sizeof(*rd->w));
	if (!grown)
		return -ENOMEM;
	rd->w = grown;
	memset(&rd->w[rd->n], 0, sizeof(rd->w[0]));
	rd->w[rd->n].ifindex = r->oif;
	route_into(&rd->w[rd->n].pod, r);
	rd->n++;
	return 0;
}

/* A binding or a link pin of an ifindex the agent does not know: taken off unless a sandbox
 * veth has that ifindex now (one made after the dump, which runwall-cni protected: its
 * RTM_NEWLINK is on its way). True when taken off.
 */
static bool prune_unknown(struct agent *a, int ifindex, int dir)
{
	char name[IF_NAMESIZE];
	int lock;

	if (sbx_find(a, ifindex))
		return false;
	lock = sbx_lock(a);
	if (lock < 0)
		return false;
	if (rw_veth_is_sandbox(ifindex, a->ifprefix, name)) {
		rw_veth_unlock(lock);
		return false;
	}
	if (dir < 0) {
		rw_endpoint_unbind(&a->dp, ifindex);
	} else {
		rw_info("links: interface %d is gone, removing runwall's %s pin", ifindex,
			rw_dir_name(dir));
		rw_detach(a->dp.pin_dir, ifindex, dir);
	}
	rw_veth_unlock(lock);
	return true;
}

static int prune_pin(const struct rw_link_pin *pin, void *data)
{
	prune_unknown(data, pin->ifindex, pin->dir);
	return 0;
}

/* Make the kernel's picture match the system's: every prefixed interface attached (and
 * runwall first on each hook), every veth bound to the pod its /32 route names, nothing bound
 * that is not. The dumps say where to look; each change asks the kernel again (see the top).
 */
int agent_full_resync(struct agent *a)
{
	struct route_dump rd = {};
	__u32 key, *prev = NULL;
	bool freed = false;
	int err;

	/* Cleared first: room freed during this pass asks for another. */
	a->sandboxes.links_dirty = false;
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++)
		a->sandboxes.sbx[i].seen = false;
	for (int tries = 0; (err = rw_nl_dump_links(dump_link, a)) == -EAGAIN && tries < 5; tries++)
		;
	if (err) {
		rw_err("netlink: dumping links: %s", strerror(-err));
		a->sandboxes.links_dirty = true;
		return err;
	}
	for (int tries = 0; (err = rw_nl_dump_routes(dump_route, &rd)) == -EAGAIN && tries < 5;
	     tries++) {
		free(rd.w);
		rd = (struct route_dump){};
	}
	if (err) {
		free(rd.w);
		rw_err("netlink: dumping routes: %s", strerror(-err));
		a->sandboxes.links_dirty = true;
		return err;
	}
	agent_resync_after_dump(a);
	/* Not in the dump: gone, unless made since (sbx_remove() asks). */
	for (size_t i = 0; i < a->sandboxes.n_sbx;) {
		if (!a->sandboxes.sbx[i].seen && sbx_remove(a, a->sandboxes.sbx[i].ifindex))
			continue;
		i++;
	}
	for (size_t i = 0; i < a->sandboxes.n_sbx; i++) {
		struct sandbox *s = &a->sandboxes.sbx[i];
		struct rw_endpoint want = {}, bound = {};

		for (size_t r = 0; r < rd.n; r++)
			if (rd.w[r].ifindex == s->ifindex) {
				want = rd.w[r].pod;
				break;
			}
		/* Only what differs from the dump is looked at again: a resync of a quiet node
		 * costs three dumps (links, IPv4 and IPv6 routes). The gateway is not in them:
		 * each address event of a veth brings its own.
		 */
		if (rw_endpoint_get(&a->dp, s->ifindex, &bound))
			memset(&bound, 0, sizeof(bound));
		if (want.flags && (bound.flags & RW_EP_GW6)) {
			want.flags |= RW_EP_GW6;
			memcpy(want.gw_ip6, bound.gw_ip6, sizeof(want.gw_ip6));
		}
		if (!rw_endpoint_same(&want, &bound) || !rw_endpoint_same(&s->pod, &bound) ||
		    s->waiting_pod.flags)
			sbx_sync_pod(a, s);
		sbx_check_hooks(a, s);
		/* One sandbox's queries at a time: a PolicyWatch change waiting goes first (on the
		 * loop; on the link thread the loop serves it meanwhile).
		 */
		agent_follow_urgent(a);
	}
	free(rd.w);

	/* Bindings of interfaces that are not sandboxes (any more). */
	while (bpf_map_get_next_key(a->dp.map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		if (prune_unknown(a, key, -1)) {
			freed = true;
			prev = NULL; /* the walk restarts after a delete */
			continue;
		}
		prev = &key;
	}
	/* Link pins of interfaces that no longer exist (an agent that was down when a veth went
	 * away never saw it go).
	 */
	rw_link_pins(a->dp.pin_dir, prune_pin, a);
	if (freed)
		sbx_room_freed(a);
	return 0;
}

void agent_links_lost(struct agent *a)
{
	a->sandboxes.links_dirty = true;
}

void agent_sandboxes_free(struct agent *a)
{
	free(a->sandboxes.sbx);
	a->sandboxes.sbx = NULL;
	a->sandboxes.n_sbx = 0;
}
