// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_sandboxes.c: the agent's sandbox veths (user/agent/sandboxes.c) against the running
 * kernel, with the interleavings of pod churn driven exactly: a veth made and protected by
 * runwall-cni between the agent's resync dumps and its prune, stale netlink events read after
 * the veth behind their ifindex was replaced, a retry pending on an ifindex that another
 * interface took, and routes to addresses no pod can have. After every step the kernel is
 * asked (hooks, binding) whether the live pod is still protected and bound to its own address. Also: only veths are taken, and a snapshot
 * adopted after a restart is not trusted as the one in force, and an IPv6 node's pod is bound
 * from its /128 and /32 routes with its veth's link-local as gateway; and PolicyWatch's items
 * are served while a piece of link work runs on the link thread. In a network namespace of the
 * test's own; needs root.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <cmocka.h>

#include "agent.h"
#include "log.h"
#include "pw_stream.h"
#include "veth.h"
#include "netns_env.h"

static struct agent a;
static char pin_dir[128];

/* What the hook does when agent_full_resync() calls it; NULL: nothing. */
static void (*after_dump)(void);

void agent_resync_after_dump(struct agent *ag)
{
	void (*fn)(void) = after_dump;

	after_dump = NULL;
	if (fn)
		fn();
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

/* A shell command the test needs to succeed. */
#define SH(...) assert_int_equal(sh(__VA_ARGS__), 0)

static __be32 ip4(const char *s)
{
	struct in_addr in;

	assert_int_equal(inet_pton(AF_INET, s, &in), 1);
	return in.s_addr;
}

/* A pod's host veth as the VPC CNI makes it: a fixed ifindex (so that the next pod reuses it,
 * as churn does), up, and the pod's /32 route through it. The peer (rwxN) stands for the pod's
 * eth0; its name is not the agent's prefix.
 */
static void make_pod(const char *name, int ifindex, const char *ip)
{
	SH("ip link add %s index %d type veth peer name rwx%d && ip link set %s up && "
	   "ip link set rwx%d up && ip route add %s/32 dev %s scope link",
	   name, ifindex, ifindex, name, ifindex, ip, name);
}

/* runwall-cni ADD: programs and binding, under the veth lock. */
static void cni_add(int ifindex, const char *ip)
{
	int lock = rw_veth_lock(pin_dir, 1000);

	assert_true(lock >= 0);
	assert_int_equal(rw_veth_protect(&a.dp, ifindex, ip4(ip), RW_ATTACH_AUTO, NULL, NULL), 0);
	rw_veth_unlock(lock);
}

/* runwall-cni DEL and the veth's deletion. */
static void del_pod(const char *name, int ifindex)
{
	int lock = rw_veth_lock(pin_dir, 1000);

	assert_true(lock >= 0);
	rw_endpoint_unbind(&a.dp, ifindex);
	rw_veth_unlock(lock);
	SH("ip link del %s", name);
}

/* The kernel's word: runwall first on both hooks of ifindex, and the pod bound is ip. */
static bool protected_as(int ifindex, const char *ip)
{
	struct rw_veth_state st;

	if (rw_veth_query(&a.dp, ifindex, &st))
		return false;
	return st.first[RW_DIR_EGRESS] && st.first[RW_DIR_INGRESS] && st.pod_ip == ip4(ip);
}

/* The agent's netlink handlers, with the live pod checked after each event. */
struct watch {
	int ifindex;
	const char *ip;
	int events, broken;
};

static struct watch *watching;

static void watch_check(void)
{
	if (!watching)
		return;
	watching->events++;
	if (!protected_as(watching->ifindex, watching->ip)) {
		watching->broken++;
		fprintf(stderr, "# after event %d: ifindex %d is not protected as pod %s\n",
			watching->events, watching->ifindex, watching->ip);
	}
}

static int on_link(bool add, const struct rw_nl_link *l, void *data)
{
	int ret = agent_on_link(add, l, data);

	watch_check();
	return ret;
}

static int on_route(bool add, const struct rw_nl_route *r, void *data)
{
	int ret = agent_on_route(add, r, data);

	watch_check();
	return ret;
}

static int on_addr(bool add, const struct rw_nl_addr *addr, void *data)
{
	int ret = agent_on_addr(add, addr, data);

	watch_check();
	return ret;
}

static int on_tc(int ifindex, void *data)
{
	int ret = agent_on_tc(ifindex, data);

	watch_check();
	return ret;
}

/* Read every event the kernel has queued for the agent, as its loop does. */
static void drain_events(struct watch *w)
{
	const struct rw_nl_handlers h = {.on_link = on_link,
					 .on_route = on_route,
					 .on_addr = on_addr,
					 .on_tc = on_tc,
					 .data = &a};
	int ret;

	watching = w;
	do {
		ret = rw_nl_sub_read(a.nl, &h);
		assert_true(ret >= 0);
		assert_int_not_equal(ret, RW_NL_RESYNC);
	} while (ret == 0 && recv(rw_nl_sub_fd(a.nl), &(char){0}, 1, MSG_PEEK | MSG_DONTWAIT) > 0);
	watching = NULL;
}

static int count_bindings(void)
{
	__u32 key, *prev = NULL;
	int n = 0;

	while (bpf_map_get_next_key(a.dp.map_fd[RW_M_ENDPOINTS], prev, &key) == 0) {
		n++;
		prev = &key;
	}
	return n;
}

/* The binding of ifindex, as the kernel holds it (zeroed: none). */
static struct rw_endpoint bound_ep(int ifindex)
{
	struct rw_endpoint ep = {};

	if (rw_endpoint_get(&a.dp, (__u32)ifindex, &ep))
		memset(&ep, 0, sizeof(ep));
	return ep;
}

static bool ip6_is(const __be32 got[4], const char *want)
{
	__be32 w[4];

	assert_int_equal(inet_pton(AF_INET6, want, w), 1);
	return !memcmp(got, w, sizeof(w));
}

/* The agent's events drained until ifindex is bound with `flags`, for at most 30 s (a deadline,
 * not a measure). A link-local address, and so its event, comes only once the kernel sees the
 * carrier, which linkwatch reports after the link is set up, at most once a second: drained
 * once, the events may not hold it yet.
 */
static struct rw_endpoint bound_ep_after_events(int ifindex, __u32 flags)
{
	struct rw_endpoint ep = {};

	for (int i = 0; i < 3000; i++) {
		drain_events(NULL);
		ep = bound_ep(ifindex);
		if (ep.flags == flags)
			break;
		usleep(10000);
	}
	return ep;
}

/* The veth's own link-local address as `ip` lists it. */
static void link_local_of(const char *dev, __be32 out[4])
{
	char cmd[160], text[INET6_ADDRSTRLEN + 8] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "ip -6 -o addr show dev %s scope link | awk '{print $4}' | cut -d/ -f1", dev);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(text, sizeof(text), f));
	pclose(f);
	text[strcspn(text, "\n")] = '\0';
	assert_int_equal(inet_pton(AF_INET6, text, out), 1);
}

/* An IPv6 EKS node's pod, as the VPC CNI makes it: a /128 route to the pod's IPv6 toward its
 * veth, and the node-local IPv4 (169.254.172.0/22) as a /32. The agent binds both, with the host
 * veth's own link-local address as the gateway; each route change rebinds (a /128 gone, another
 * one come); a /128 to an address no pod can have (link-local, multicast) binds nothing; a
 * gateway that comes after the routes (the link up later) is bound by its address event; the
 * resync agrees with the events.
 */
static void test_ipv6_identity(void **state)
{
	struct rw_endpoint ep;
	__be32 gw[4];

	drain_events(NULL);
	SH("ip link add rwsb6 index 7006 type veth peer name rwx7006 && ip link set rwsb6 up && "
	   "ip link set rwx7006 up && ip -6 route add 2600:1f14:abc::7/128 dev rwsb6 && "
	   "ip route add 169.254.172.9/32 dev rwsb6 scope link");
	ep = bound_ep_after_events(7006, RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6);
	link_local_of("rwsb6", gw);
	assert_int_equal(ep.flags, RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6);
	assert_int_equal(ep.pod_ip, ip4("169.254.172.9"));
	assert_true(ip6_is(ep.pod_ip6, "2600:1f14:abc::7"));
	assert_memory_equal(ep.gw_ip6, gw, sizeof(gw));

	/* Routes that name no pod: never bound, and they do not hide the pod's. */
	SH("ip -6 route add fe80::99/128 dev rwsb6 && ip -6 route add ff05::7/128 dev rwsb6");
	drain_events(NULL);
	ep = bound_ep(7006);
	assert_true(ip6_is(ep.pod_ip6, "2600:1f14:abc::7"));

	/* The /128 gone: IPv4 only (the IPv6 identity with it); another one: that one. */
	SH("ip -6 route del 2600:1f14:abc::7/128 dev rwsb6");
	drain_events(NULL);
	ep = bound_ep(7006);
	assert_int_equal(ep.flags & (RW_EP_IP4 | RW_EP_IP6), RW_EP_IP4);
	assert_int_equal(ep.pod_ip, ip4("169.254.172.9"));
	SH("ip -6 route add 2600:1f14:abc::8/128 dev rwsb6");
	drain_events(NULL);
	ep = bound_ep(7006);
	assert_int_equal(ep.flags, RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6);
	assert_true(ip6_is(ep.pod_ip6, "2600:1f14:abc::8"));
	/* IPv6 only: the /32 gone. */
	SH("ip route del 169.254.172.9/32 dev rwsb6");
	drain_events(NULL);
	ep = bound_ep(7006);
	assert_int_equal(ep.flags, RW_EP_IP6 | RW_EP_GW6);
	assert_true(ip6_is(ep.pod_ip6, "2600:1f14:abc::8"));
	assert_int_equal(agent_full_resync(&a), 0);
	ep = bound_ep(7006);
	assert_int_equal(ep.flags, RW_EP_IP6 | RW_EP_GW6);
	assert_true(ip6_is(ep.pod_ip6, "2600:1f14:abc::8"));
	assert_memory_equal(ep.gw_ip6, gw, sizeof(gw));
	SH("ip link del rwsb6");
	drain_events(NULL);
	assert_int_equal(bound_ep(7006).flags, 0);

	/* The peer down: no carrier, so no link-local yet. Bound without a gateway, which its
	 * address event brings when the link comes up.
	 */
	SH("ip link add rwsb7 index 7007 type veth peer name rwx7007 && ip link set rwsb7 up && "
	   "ip -6 route add 2600:1f14:abc::9/128 dev rwsb7");
	drain_events(NULL);
	ep = bound_ep(7007);
	assert_int_equal(ep.flags, RW_EP_IP6);
	SH("ip link set rwx7007 up");
	ep = bound_ep_after_events(7007, RW_EP_IP6 | RW_EP_GW6);
	link_local_of("rwsb7", gw);
	assert_int_equal(ep.flags, RW_EP_IP6 | RW_EP_GW6);
	assert_memory_equal(ep.gw_ip6, gw, sizeof(gw));
}

/* After a full resync, ifindex has no program on either hook and no pod bound. */
static void assert_gone_after_resync(int ifindex)
{
	struct rw_veth_state st;

	drain_events(NULL);
	assert_int_equal(agent_full_resync(&a), 0);
	assert_int_equal(rw_veth_query(&a.dp, ifindex, &st), 0);
	assert_false(st.found[RW_DIR_EGRESS]);
	assert_false(st.found[RW_DIR_INGRESS]);
	assert_int_equal(st.pod_ip, 0);
}

/* --- fixtures ------------------------------------------------------------------------------ */

static int group_setup(void **state)
{
	char err[256];

	libbpf_set_print(quiet);
	if (test_netns_enter())
		return -1;
	if (system("ip link set lo up"))
		return -1;
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/rwtest-sbx-%d", (int)getpid());
	if (mkdir(pin_dir, 0700)) {
		perror(pin_dir);
		return -1;
	}
	a.ifprefix = "rwsb";
	a.attach_mode = RW_ATTACH_AUTO;
	if (rw_datapath_load(&a.dp, pin_dir, 0, err, sizeof(err))) {
		fprintf(stderr, "loading the datapath: %s\n", err);
		return -1;
	}
	if (rw_nl_sub_open(&a.nl))
		return -1;
	return agent_full_resync(&a);
}

static int group_teardown(void **state)
{
	rw_nl_sub_close(a.nl);
	rw_detach_all(a.dp.pin_dir);
	rw_datapath_close(&a.dp);
	rw_datapath_unpin(pin_dir);
	if (rmdir(pin_dir) && errno != ENOENT)
		perror(pin_dir);
	free(a.sandboxes.sbx);
	return 0;
}

/* Each test ends with no veth of ours, and the agent has seen them go. */
static int cleanup(void **state)
{
	if (system("for i in $(ip -o link show | awk -F'[ :@]+' '/ rwsb|rwx/ {print $2}'); do "
		   "ip link del $i 2>/dev/null; done; true"))
		return -1;
	drain_events(NULL);
	agent_full_resync(&a);
	return 0;
}

/* --- the interleavings --------------------------------------------------------------------- */

static void make_and_protect_7001(void)
{
	make_pod("rwsb1", 7001, "10.9.0.1");
	cni_add(7001, "10.9.0.1");
}

/* A pod created and protected by runwall-cni after the resync's dumps and before its prune:
 * the resync knows nothing of the veth, and must not take its programs or binding off.
 */
static void test_resync_keeps_veth_made_after_dump(void **state)
{
	struct watch w = {.ifindex = 7001, .ip = "10.9.0.1"};

	after_dump = make_and_protect_7001;
	assert_int_equal(agent_full_resync(&a), 0);
	assert_null(after_dump);
	assert_true(protected_as(7001, "10.9.0.1"));
	/* Its events, read afterwards, leave it as it is. */
	drain_events(&w);
	assert_int_equal(w.broken, 0);
	assert_true(protected_as(7001, "10.9.0.1"));
	/* And once it is gone, nothing of it is left. */
	del_pod("rwsb1", 7001);
	drain_events(NULL);
	assert_int_equal(agent_full_resync(&a), 0);
	assert_int_equal(count_bindings(), 0);
	assert_int_equal(a.sandboxes.n_sbx, 0);
}

/* Pod A deleted and pod B created on the same ifindex and name, B protected by runwall-cni,
 * all before the agent reads a single event: A's events (its route, its veth's deletion) then
 * describe a veth that is gone. After each event B is still protected and bound to B.
 */
static void test_stale_events_on_reused_ifindex(void **state)
{
	struct watch w = {.ifindex = 7002, .ip = "10.9.0.3"};

	drain_events(NULL);
	make_pod("rwsb2", 7002, "10.9.0.2");
	cni_add(7002, "10.9.0.2");
	del_pod("rwsb2", 7002);
	make_pod("rwsb2", 7002, "10.9.0.3");
	cni_add(7002, "10.9.0.3");
	drain_events(&w);
	assert_true(w.events >= 4);
	assert_int_equal(w.broken, 0);
	/* The resync the events asked for agrees. */
	assert_int_equal(agent_full_resync(&a), 0);
	assert_true(protected_as(7002, "10.9.0.3"));
	del_pod("rwsb2", 7002);
	drain_events(NULL);
	assert_int_equal(agent_full_resync(&a), 0);
	assert_int_equal(count_bindings(), 0);
}

/* The agent knew pod A's veth and had an attach retry pending; the veth went and an interface
 * that is not a sandbox's took its ifindex before the retry: the retry must not put runwall's
 * programs (deny-all) on it.
 */
static void test_retry_on_ifindex_taken_by_other(void **state)
{
	struct rw_veth_state st;
	struct sandbox *s = NULL;

	drain_events(NULL);
	make_pod("rwsb3", 7003, "10.9.0.4");
	drain_events(NULL);
	for (size_t i = 0; i < a.sandboxes.n_sbx; i++)
		if (a.sandboxes.sbx[i].ifindex == 7003)
			s = &a.sandboxes.sbx[i];
	assert_non_null(s);
	s->retry_at_ms = 1; /* due */
	SH("ip link del rwsb3 && ip link add rwx3 index 7003 type veth peer name rwx3p && "
	   "ip link set rwx3 up");
	agent_sandboxes_tick(&a);
	assert_int_equal(rw_veth_query(&a.dp, 7003, &st), 0);
	assert_false(st.found[RW_DIR_EGRESS]);
	assert_false(st.found[RW_DIR_INGRESS]);
	/* Its deletion read (no runwall-cni DEL ran): the old veth's binding goes too. */
	assert_gone_after_resync(7003);
}

/* An interface with the agent's prefix that is not a veth (a bridge here, standing for the VPC
 * CNI's vlan.eth.N trunk, which has no /32 route of its own) is left alone by the events and
 * the resync: no programs on it, no sandbox for it. A veth made beside it is still taken.
 */
static void test_not_veth_left_alone(void **state)
{
	struct rw_veth_state st;

	drain_events(NULL);
	SH("ip link add rwsbbr index 7010 type bridge && ip link set rwsbbr up");
	make_pod("rwsb5", 7011, "10.9.0.5");
	drain_events(NULL);
	assert_int_equal(agent_full_resync(&a), 0);
	assert_int_equal(rw_veth_query(&a.dp, 7010, &st), 0);
	assert_false(st.found[RW_DIR_EGRESS]);
	assert_false(st.found[RW_DIR_INGRESS]);
	for (size_t i = 0; i < a.sandboxes.n_sbx; i++)
		assert_int_not_equal(a.sandboxes.sbx[i].ifindex, 7010);
	assert_int_equal(rw_veth_query(&a.dp, 7011, &st), 0);
	assert_true(st.first[RW_DIR_EGRESS] && st.first[RW_DIR_INGRESS]);
	assert_int_equal(st.pod_ip, ip4("10.9.0.5"));
	SH("ip link del rwsbbr");
	del_pod("rwsb5", 7011);
}

/* rw_run_revs of the run that pod_ip belongs to. */
static __u64 run_rev_of(const char *pod_ip)
{
	struct rw_pod pod;
	__u64 rev = 0;

	assert_int_equal(rw_live_pod(&a.dp, ip4(pod_ip), &pod), 0);
	assert_int_equal(bpf_map_lookup_elem(a.dp.map_fd[RW_M_RUN_REVS], &pod.run_idx, &rev), 0);
	return rev;
}

static void apply_text(const char *text)
{
	json_t *reply = NULL;

	assert_int_equal(agent_apply(&a, text, strlen(text), "test", &reply), 0);
	json_decref(reply);
}

#define SNAP(rev, allow)                                                                         \
	"{\"revision\": " #rev ", \"runs\": [{\"id\": \"run-adopt\", \"pods\": [\"10.9.1.1\"], " \
	"\"allow\": [" allow "]}]}"

/* A restarted agent adopts the file's snapshot when its revision is the one in force. Here the
 * file has that revision but other content (run-adopt without 52.0.0.1), and the next snapshot
 * revokes 52.0.0.1, leaving run-adopt as the file wrote it: the run's cached verdicts (an allow
 * to 52.0.0.1, judged under revision 5) must go, so rw_run_revs of the run moves to 6.
 */
static void test_adopted_snapshot_is_not_prev(void **state)
{
	char path[] = "/tmp/rwtest-adopt-XXXXXX";
	const char *file = SNAP(5, "");
	int fd;

	apply_text(SNAP(5, "{\"ip\": \"52.0.0.1\", \"tcp\": [443]}"));
	assert_int_equal(run_rev_of("10.9.1.1"), 5);
	/* The restart: the new agent knows nothing but the kernel's state and the file. */
	rw_policy_free(&a.pol.policy);
	a.pol.have_policy = false;
	free(a.pol.policy_bytes);
	a.pol.policy_bytes = NULL;
	a.pol.policy_len = 0;
	a.pol.last_apply = (struct rw_apply_result){};
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, file, strlen(file)), (ssize_t)strlen(file));
	close(fd);
	a.policy_path = path;
	agent_load_policy_file(&a, true);
	unlink(path); /* read once: a failing check below leaves nothing in /tmp */
	assert_true(a.pol.have_policy);
	assert_int_equal(a.pol.policy.revision, 5);
	assert_int_equal(a.pol.last_apply.revision, 0); /* adopted, not applied again */

	apply_text(SNAP(6, ""));
	assert_int_equal(run_rev_of("10.9.1.1"), 6);
	/* Once applied by this agent, its snapshot is a `prev` again: an unchanged run keeps. */
	apply_text(SNAP(7, ""));
	assert_int_equal(run_rev_of("10.9.1.1"), 6);
	a.policy_path = NULL;
}

/* A bound sandbox veth deleted (no runwall-cni DEL) and a bridge made with its name and ifindex:
 * the name has the prefix, but the device is no veth, so the old veth's binding and pins go.
 */
static void test_ifindex_taken_by_prefixed_non_veth(void **state)
{
	drain_events(NULL);
	make_pod("rwsb5", 7005, "10.9.0.6");
	cni_add(7005, "10.9.0.6");
	drain_events(NULL);
	assert_true(protected_as(7005, "10.9.0.6"));
	SH("ip link del rwsb5 && ip link add rwsb5 index 7005 type bridge && ip link set rwsb5 up");
	assert_gone_after_resync(7005);
	assert_int_equal(count_bindings(), 0);
}

/* tc mode (6.1 kernels): another tool's filter added at runwall's priority runs first (cls_bpf
 * puts a new filter at the head of its priority's list). Its RTM_NEWTFILTER is enough for the
 * agent to put runwall back in front, without waiting for a resync; so is a deleted clsact.
 */
static void test_foreign_tc_filter_seen_at_once(void **state)
{
	struct rw_veth_state st;

	a.attach_mode = RW_ATTACH_TC;
	drain_events(NULL);
	make_pod("rwsb6", 7006, "10.9.0.7");
	drain_events(NULL);
	assert_true(protected_as(7006, "10.9.0.7"));
	SH("tc filter add dev rwsb6 ingress prio 1 handle 0x77 bpf bytecode '1,6 0 0 0,'");
	assert_int_equal(rw_veth_query(&a.dp, 7006, &st), 0);
	assert_false(st.first[RW_DIR_EGRESS]); /* the foreign filter is in front */
	drain_events(NULL);
	assert_true(protected_as(7006, "10.9.0.7"));
	SH("tc qdisc del dev rwsb6 clsact");
	drain_events(NULL);
	assert_true(protected_as(7006, "10.9.0.7"));
	a.attach_mode = RW_ATTACH_AUTO;
}

/* A /32 route to an address no pod can have names no pod: a link-local one alone binds
 * nothing, and beside the pod's own route (whichever the kernel lists first) it changes nothing.
 */
static void test_route_to_non_pod_address(void **state)
{
	struct rw_veth_state st;

	drain_events(NULL);
	SH("ip link add rwsb4 index 7004 type veth peer name rwx7004 && ip link set rwsb4 up && "
	   "ip link set rwx7004 up && ip route add 169.254.9.9/32 dev rwsb4 scope link");
	drain_events(NULL);
	assert_int_equal(agent_full_resync(&a), 0);
	assert_int_equal(rw_veth_query(&a.dp, 7004, &st), 0);
	assert_true(st.first[RW_DIR_EGRESS] && st.first[RW_DIR_INGRESS]);
	assert_int_equal(st.pod_ip, 0);
	SH("ip route add 10.9.0.5/32 dev rwsb4 scope link && "
	   "ip route add 169.254.9.1/32 dev rwsb4 scope link");
	drain_events(NULL);
	assert_true(protected_as(7004, "10.9.0.5"));
	assert_int_equal(agent_full_resync(&a), 0);
	assert_true(protected_as(7004, "10.9.0.5"));
}

/* The lock is exclusive between holders, and a waiter gives up after its time. */
static void test_lock_excludes(void **state)
{
	int first = rw_veth_lock(pin_dir, 0), second;

	assert_true(first >= 0);
	second = rw_veth_lock(pin_dir, 20);
	assert_int_equal(second, -ETIMEDOUT);
	rw_veth_unlock(first);
	second = rw_veth_lock(pin_dir, 0);
	assert_true(second >= 0);
	rw_veth_unlock(second);
}

/* The loop's log lines that say it served a PolicyWatch notice (pw_follow.c). */
static int served_notices;

static void count_notices(enum rw_log_level level, const char *line)
{
	if (strstr(line, "policy watch: ") && strstr(line, "reconnecting in"))
		__atomic_add_fetch(&served_notices, 1, __ATOMIC_RELAXED);
}

/* A piece of link work that lasts until the loop has served a PolicyWatch item (20 s at most:
 * under emulation a connection's first attempt takes its time).
 */
static int until_served(struct agent *ag, void *arg)
{
	for (int i = 0; i < 20000; i++) {
		if (__atomic_load_n(&served_notices, __ATOMIC_RELAXED))
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

/* The link work does not hold up PolicyWatch (link_thread.c): while a piece runs on the link
 * thread, the loop takes what the stream queued. The stream here is refused at once (a loopback
 * port nothing listens on), so its thread queues a notice; the piece ends only once the loop has
 * served it. Run on the loop itself, as all link work was, the piece would wait for nothing.
 */
static void test_link_thread_serves_changes(void **state)
{
	struct rw_pw_opts o = {.url = "http://127.0.0.1:9/v1/watch", .node = "t", .seed = 1};
	rw_log_print_fn old = rw_log_set_print(count_notices);
	char err[256];
	int ret;

	a.follow.watch = rw_pw_start(&o, 0, err, sizeof(err));
	assert_non_null(a.follow.watch);
	assert_int_equal(agent_link_thread_start(&a), 0);
	ret = agent_beside(&a, until_served, NULL);
	agent_link_thread_stop(&a);
	rw_pw_stop(a.follow.watch);
	a.follow.watch = NULL;
	rw_log_set_print(old);
	assert_int_equal(ret, 0);
	assert_true(served_notices > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_resync_keeps_veth_made_after_dump, cleanup),
		cmocka_unit_test_teardown(test_stale_events_on_reused_ifindex, cleanup),
		cmocka_unit_test_teardown(test_retry_on_ifindex_taken_by_other, cleanup),
		cmocka_unit_test_teardown(test_not_veth_left_alone, cleanup),
		cmocka_unit_test_teardown(test_route_to_non_pod_address, cleanup),
		cmocka_unit_test_teardown(test_foreign_tc_filter_seen_at_once, cleanup),
		cmocka_unit_test_teardown(test_ifindex_taken_by_prefixed_non_veth, cleanup),
		cmocka_unit_test_teardown(test_ipv6_identity, cleanup),
		cmocka_unit_test(test_lock_excludes),
		cmocka_unit_test(test_adopted_snapshot_is_not_prev),
		cmocka_unit_test(test_link_thread_serves_changes),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_sandboxes: needs root (BPF, netns, bpffs)\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
