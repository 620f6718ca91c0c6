// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_netlink.c: user/lib/netlink.c against the running kernel, in a network namespace of the
 * test's own (unshare(CLONE_NEWNET) at start): veths, routes and a bridge made with ip(8)
 * there, never on the machine's own interfaces. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "netlink.h"
#include "netns_env.h"

struct ev {
	bool link; /* else route */
	bool add;
	int ifindex; /* link: ifindex, route: oif */
	char name[RW_NL_IFNAMSIZ];
	__be32 dst;
	__u8 prefixlen;
	bool admin_up;
	bool oper_up;
	char kind[16];
	bool veth;
};

struct evlog {
	struct ev ev[1024];
	int n;
	int fail; /* handlers return this when set */
};

static __be32 ip4(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static int veth(const char *name)
{
	sh("ip link del %s >/dev/null 2>&1", name);
	assert_int_equal(sh("ip link add %s type veth peer name %sp", name, name), 0);
	return (int)if_nametoindex(name);
}

/* The log's next entry, zeroed, for an event `add`; NULL when the log is full or its handlers
 * fail (they return log->fail).
 */
static struct ev *log_next(struct evlog *log, bool add)
{
	struct ev *e;

	if (log->fail || log->n == (int)(sizeof(log->ev) / sizeof(log->ev[0])))
		return NULL;
	e = &log->ev[log->n++];
	memset(e, 0, sizeof(*e));
	e->add = add;
	return e;
}

static int log_link(bool add, const struct rw_nl_link *l, void *data)
{
	struct evlog *log = data;
	struct ev *e = log_next(log, add);

	if (!e)
		return log->fail;
	e->link = true;
	e->ifindex = l->ifindex;
	memcpy(e->name, l->name, sizeof(e->name));
	e->admin_up = l->admin_up;
	e->oper_up = l->oper_up;
	memcpy(e->kind, l->kind, sizeof(e->kind));
	e->veth = l->veth;
	return 0;
}

static int log_route(bool add, const struct rw_nl_route *r, void *data)
{
	struct evlog *log = data;
	struct ev *e = log_next(log, add);

	if (!e)
		return log->fail;
	e->ifindex = r->oif;
	e->dst = r->dst;
	e->prefixlen = r->prefixlen;
	return 0;
}

static int dump_link_cb(const struct rw_nl_link *l, void *data)
{
	return log_link(true, l, data);
}

static int dump_route_cb(const struct rw_nl_route *r, void *data)
{
	return log_route(true, r, data);
}

/* The event in the log matching `want` (link: add + name; route: add + dst + oif), or NULL. */
static const struct ev *find(const struct evlog *log, const struct ev *want)
{
	int i;

	for (i = 0; i < log->n; i++) {
		const struct ev *e = &log->ev[i];

		if (e->link != want->link || e->add != want->add)
			continue;
		if (e->link && !strcmp(e->name, want->name))
			return e;
		if (!e->link && e->dst == want->dst && e->ifindex == want->ifindex &&
		    e->prefixlen == want->prefixlen)
			return e;
	}
	return NULL;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Poll and read the subscription until `want` shows up (then true) or ms pass (false); with
 * want NULL, just read for ms. Fails the test on a read error or a resync.
 */
static bool pump(struct rw_nl_sub *sub, struct evlog *log, const struct ev *want, int ms)
{
	const struct rw_nl_handlers h = {.on_link = log_link, .on_route = log_route, .data = log};
	struct pollfd pfd = {.fd = rw_nl_sub_fd(sub), .events = POLLIN};
	long end = now_ms() + ms;

	while (!(want && find(log, want))) {
		long left = end - now_ms();

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, (int)left) > 0)
			assert_int_equal(rw_nl_sub_read(sub, &h), 0);
	}
	return true;
}

static const struct ev *link_ev(const struct evlog *log, bool add, const char *name)
{
	struct ev want = {.link = true, .add = add};

	snprintf(want.name, sizeof(want.name), "%s", name);
	return find(log, &want);
}

static const struct ev *route_ev(const struct evlog *log, bool add, const char *dst, __u8 prefixlen,
				 int oif)
{
	struct ev want = {.add = add, .dst = ip4(dst), .prefixlen = prefixlen, .ifindex = oif};

	return find(log, &want);
}

static bool pump_link(struct rw_nl_sub *sub, struct evlog *log, bool add, const char *name)
{
	struct ev want = {.link = true, .add = add};

	snprintf(want.name, sizeof(want.name), "%s", name);
	return pump(sub, log, &want, 3000);
}

static bool pump_route(struct rw_nl_sub *sub, struct evlog *log, bool add, const char *dst,
		       __u8 prefixlen, int oif)
{
	struct ev want = {.add = add, .dst = ip4(dst), .prefixlen = prefixlen, .ifindex = oif};

	return pump(sub, log, &want, 3000);
}

/* --- fixtures --------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	if (unshare(CLONE_NEWNET)) {
		perror("unshare(CLONE_NEWNET)");
		return -1;
	}
	return sh("ip link set lo up");
}

static int setup(void **state)
{
	struct evlog *log = calloc(1, sizeof(*log));

	if (!log)
		return -1;
	*state = log;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	/* One ip(8) for all the links, not one per link (the dump's case leaves 200, and under
	 * emulation each process takes long to start); a veth's peer goes with it, so -force goes
	 * on past the error of deleting it again.
	 */
	sh("ip -o link show | awk -F'[ :@]+' '$2 != \"lo\" {print \"link del \" $2}' | "
	   "ip -force -batch - >/dev/null 2>&1");
	sh("ip route flush table 100 2>/dev/null");
	return 0;
}

/* --- tests -------------------------------------------------------------------------------- */

static void test_ifname_match(void **state)
{
	assert_true(rw_ifname_match("eni1a2b3c", "eni,vlan"));
	assert_true(rw_ifname_match("vlan.7", "eni,vlan"));
	assert_true(rw_ifname_match("vlan.7", " eni , vlan "));
	assert_true(rw_ifname_match("eni", "eni"));
	assert_true(rw_ifname_match("cali123", ",,cali,"));
	assert_false(rw_ifname_match("eth0", "eni,vlan"));
	assert_false(rw_ifname_match("en", "eni"));
	assert_false(rw_ifname_match("xeni1", "eni"));
	assert_false(rw_ifname_match("eni1", ""));
	assert_false(rw_ifname_match("eni1", ","));
	assert_false(rw_ifname_match("eni1", " , "));
	assert_false(rw_ifname_match("eni1", NULL));
	assert_false(rw_ifname_match(NULL, "eni"));
}

/* Links dumped again until link `name`'s operational state is `up` (10 s at most): its entry. */
static const struct ev *dump_until_oper(struct evlog *log, const char *name, bool up)
{
	const struct ev *e;

	for (int i = 0; i < 400; i++) {
		log->n = 0;
		assert_int_equal(rw_nl_dump_links(dump_link_cb, log), 0);
		e = link_ev(log, true, name);
		assert_non_null(e);
		if (e->oper_up == up)
			break;
		usleep(25000);
	}
	return e;
}

static void test_dump_links(void **state)
{
	struct evlog *log = *state;
	const struct ev *e;
	int idx;

	/* The operational state follows the carrier through the kernel's linkwatch work, which
	 * may run a second or more later (linkwatch_fire_event()); until it has run, a new link's
	 * operstate is still UNKNOWN. Poll for the state rather than catch it in passing.
	 */
	idx = veth("rwn0");
	assert_int_equal(sh("ip link set rwn0 up"), 0);
	e = dump_until_oper(log, "rwn0", false);
	assert_int_equal(e->ifindex, idx);
	assert_true(e->admin_up);
	assert_false(e->oper_up); /* its peer is down */
	e = link_ev(log, true, "rwn0p");
	assert_non_null(e);
	assert_false(e->admin_up);
	assert_non_null(link_ev(log, true, "lo"));

	assert_int_equal(sh("ip link set rwn0p up"), 0);
	e = dump_until_oper(log, "rwn0", true);
	assert_true(e->admin_up && e->oper_up);

	/* A callback's error stops the dump and comes back. */
	log->fail = -ECANCELED;
	assert_int_equal(rw_nl_dump_links(dump_link_cb, log), -ECANCELED);
	assert_int_equal(rw_nl_dump_links(NULL, log), -EINVAL);
}

/* A link dump while links come and go: the kernel flags the dump it cannot keep consistent
 * (NLM_F_DUMP_INTR) and rw_nl_dump_links() says -EAGAIN, which its callers dump again on; an
 * uninterrupted one has every link that stayed, once. 100 veth pairs make the dump span several
 * 32 KiB reads; `ip -batch` adds and deletes a bridge meanwhile. The churn ends once both kinds
 * of dump have been seen DUMP_ENOUGH times each (under emulation the whole batch took ~100 s),
 * or at the batch's end, whichever comes first; a churn that ends without both fails as before.
 */
#define DUMP_STAYING 200  /* links: 100 veth pairs */
#define DUMP_CHURN   1000 /* add and delete pairs, at most */
#define DUMP_ENOUGH  5	  /* interrupted and complete dumps each */

static void test_dump_interrupted(void **state)
{
	struct evlog *log = *state;
	char batch[] = "/tmp/rw-test-netlink-XXXXXX";
	int fd, status, complete = 0, interrupted = 0;
	bool stopped = false;
	FILE *f;
	pid_t pid;

	fd = mkstemp(batch);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	for (int i = 0; i < DUMP_STAYING / 2; i++)
		fprintf(f, "link add rwd%d type veth peer name rwd%dp\n", i, i);
	fclose(f);
	assert_int_equal(sh("ip -batch %s", batch), 0);
	f = fopen(batch, "w");
	assert_non_null(f);
	for (int i = 0; i < DUMP_CHURN; i++)
		fprintf(f, "link add rwdc type bridge\nlink del rwdc\n");
	fclose(f);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execlp("ip", "ip", "-batch", batch, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, WNOHANG) == 0) {
		int err, staying = 0;

		if (interrupted >= DUMP_ENOUGH && complete >= DUMP_ENOUGH) {
			kill(pid, SIGTERM);
			assert_int_equal(waitpid(pid, &status, 0), pid);
			stopped = true;
			break;
		}
		log->n = 0;
		err = rw_nl_dump_links(dump_link_cb, log);
		if (err == -EAGAIN) {
			interrupted++;
			continue;
		}
		assert_int_equal(err, 0);
		for (int i = 0; i < log->n; i++)
			staying += !strncmp(log->ev[i].name, "rwd", 3) &&
				   strcmp(log->ev[i].name, "rwdc");
		assert_int_equal(staying, DUMP_STAYING);
		complete++;
	}
	unlink(batch);
	if (stopped)
		assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) ||
			    (WIFEXITED(status) && WEXITSTATUS(status) == 0));
	else
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("# link dumps during %s%d link changes: %d complete, %d interrupted\n",
	       stopped ? "at most " : "", 2 * DUMP_CHURN, complete, interrupted);
	/* Both, or the churn did not test what it is for. */
	assert_true(interrupted > 0);
	assert_true(complete > 0);
}

static void test_dump_routes(void **state)
{
	struct evlog *log = *state;
	const struct ev *e;
	int idx, i, n32 = 0;

	idx = veth("rwn1");
	assert_int_equal(sh("ip link set rwn1 up && ip link set rwn1p up"), 0);
	/* The VPC CNI's per-pod route... */
	assert_int_equal(sh("ip route add 10.99.0.2/32 dev rwn1 scope link"), 0);
	/* ...and what is not one: a wider prefix, another table, a local address (its /32
	 * goes in the local table).
	 */
	assert_int_equal(sh("ip route add 10.99.1.0/24 dev rwn1"), 0);
	assert_int_equal(sh("ip route add 10.99.0.3/32 dev rwn1 table 100"), 0);
	assert_int_equal(sh("ip addr add 10.98.0.1/32 dev rwn1"), 0);

	assert_int_equal(rw_nl_dump_routes(dump_route_cb, log), 0);
	e = route_ev(log, true, "10.99.0.2", 32, idx);
	assert_non_null(e);
	for (i = 0; i < log->n; i++) {
		assert_false(log->ev[i].link);
		assert_int_equal(log->ev[i].prefixlen, 32);
		assert_int_not_equal(log->ev[i].dst, ip4("10.99.0.3"));
		assert_int_not_equal(log->ev[i].dst, ip4("10.98.0.1"));
		n32++;
	}
	assert_int_equal(n32, 1);

	log->fail = -ECANCELED;
	assert_int_equal(rw_nl_dump_routes(dump_route_cb, log), -ECANCELED);
}

/* The IPv6 routes a dump reports, for test_dump_routes6(). */
struct routes6 {
	struct rw_nl_route r[64];
	int n;
};

static int collect6(const struct rw_nl_route *r, void *data)
{
	struct routes6 *c = data;

	if (c->n < 64)
		c->r[c->n++] = *r;
	return 0;
}

/* An IPv6 node's per-pod route (a /128 toward the veth, as the VPC CNI makes it) is reported
 * with its 16-byte destination, in the whole dump and in the one of its interface; a /64, a /128
 * of another table and the kernel's own fe80::/64 are not; and the veth's own link-local address
 * is the one ip(8) lists, none before the link has carrier nor for an interface that does not exist.
 */
static void test_dump_routes6(void **state)
{
	struct routes6 all = {}, via = {};
	__be32 want[4], ll[4], got[4];
	char text[INET6_ADDRSTRLEN + 4] = "";
	int idx, n6 = 0;
	FILE *f;

	(void)state;
	assert_int_equal(sh("sysctl -qw net.ipv6.conf.default.disable_ipv6=0 "
			    "net.ipv6.conf.default.accept_dad=0"),
			 0);
	idx = veth("rwn6");
	assert_int_equal(sh("ip link set rwn6 up"), 0);
	assert_int_equal(rw_nl_link_local6(idx, ll), -ENOENT); /* no carrier: no address yet */
	assert_int_equal(sh("ip link set rwn6p up && ip -6 route add 2600:1f14:abc::7/128 dev rwn6 "
			    "&& ip -6 route add 2600:1f14:abc:1::/64 dev rwn6 && "
			    "ip -6 route add 2600:1f14:abc::8/128 dev rwn6 table 100"),
			 0);
	assert_int_equal(inet_pton(AF_INET6, "2600:1f14:abc::7", want), 1);
	assert_int_equal(rw_nl_dump_routes(collect6, &all), 0);
	assert_int_equal(rw_nl_dump_routes_via(idx, collect6, &via), 0);
	for (int i = 0; i < all.n; i++) {
		if (all.r[i].family != AF_INET6)
			continue;
		n6++;
		assert_int_equal(all.r[i].prefixlen, 128);
		assert_int_equal(all.r[i].oif, idx);
		assert_int_equal(all.r[i].dst, 0);
		assert_memory_equal(all.r[i].dst6, want, sizeof(want));
		assert_true(rw_nl_route_is_host(&all.r[i]));
	}
	assert_int_equal(n6, 1);
	assert_int_equal(via.n, 1);
	assert_int_equal(via.r[0].family, AF_INET6);
	assert_memory_equal(via.r[0].dst6, want, sizeof(want));

	f = popen("ip -6 -o addr show dev rwn6 scope link | awk '{print $4}' | cut -d/ -f1", "r");
	assert_non_null(f);
	assert_non_null(fgets(text, sizeof(text), f));
	pclose(f);
	text[strcspn(text, "\n")] = '\0';
	assert_int_equal(inet_pton(AF_INET6, text, ll), 1);
	assert_int_equal(rw_nl_link_local6(idx, got), 0);
	assert_memory_equal(got, ll, sizeof(ll));
	assert_int_equal(rw_nl_link_local6(999999, got), -ENOENT);
	sh("ip link del rwn6");
}

/* The log's link `name` (added) is there, of kind `kind` (NULL: not checked), a veth or not. */
static void assert_link_kind(const struct evlog *log, const char *name, const char *kind, bool veth)
{
	const struct ev *e = link_ev(log, true, name);

	assert_non_null(e);
	if (kind)
		assert_string_equal(e->kind, kind);
	assert_int_equal(e->veth, veth);
}

/* Each link's kind, in dumps and in events: a veth is one, a bridge (standing for the VPC
 * CNI's vlan.eth.N trunk: this kernel has no vlan module) is not, and lo has no kind.
 */
static void test_link_kind(void **state)
{
	struct evlog *log = *state;
	struct rw_nl_sub *sub = NULL;

	assert_int_equal(rw_nl_sub_open(&sub), 0);
	veth("rwk0");
	sh("ip link del rwkbr >/dev/null 2>&1");
	assert_int_equal(sh("ip link add rwkbr type bridge"), 0);
	assert_true(pump_link(sub, log, true, "rwkbr"));
	assert_link_kind(log, "rwk0", "veth", true);
	assert_link_kind(log, "rwkbr", "bridge", false);
	rw_nl_sub_close(sub);

	log->n = 0;
	assert_int_equal(rw_nl_dump_links(dump_link_cb, log), 0);
	assert_link_kind(log, "rwk0", "veth", true);
	assert_link_kind(log, "rwk0p", NULL, true);
	assert_link_kind(log, "rwkbr", "bridge", false);
	assert_link_kind(log, "lo", "", false);
}

static void test_sub_link_events(void **state)
{
	struct evlog *log = *state;
	struct rw_nl_sub *sub = NULL;
	const struct ev *e;
	int idx;

	assert_int_equal(rw_nl_sub_open(&sub), 0);
	assert_true(rw_nl_sub_fd(sub) >= 0);
	idx = veth("rwl0");
	assert_true(pump_link(sub, log, true, "rwl0"));
	e = link_ev(log, true, "rwl0");
	assert_int_equal(e->ifindex, idx);
	assert_false(e->admin_up);

	assert_int_equal(sh("ip link set rwl0 up"), 0);
	log->n = 0;
	assert_true(pump_link(sub, log, true, "rwl0"));
	assert_true(link_ev(log, true, "rwl0")->admin_up);

	assert_int_equal(sh("ip link del rwl0"), 0);
	assert_true(pump_link(sub, log, false, "rwl0"));
	e = link_ev(log, false, "rwl0");
	assert_int_equal(e->ifindex, idx);
	/* The peer goes with it. */
	assert_true(pump_link(sub, log, false, "rwl0p"));
	rw_nl_sub_close(sub);
}

static void test_sub_route_events(void **state)
{
	struct evlog *log = *state;
	struct rw_nl_sub *sub = NULL;
	int idx, i;

	idx = veth("rwr0");
	assert_int_equal(sh("ip link set rwr0 up && ip link set rwr0p up"), 0);
	assert_int_equal(rw_nl_sub_open(&sub), 0);

	assert_int_equal(sh("ip route add 10.99.0.2/32 dev rwr0 scope link"), 0);
	assert_true(pump_route(sub, log, true, "10.99.0.2", 32, idx));
	assert_int_equal(sh("ip route add 10.99.2.0/24 dev rwr0"), 0);
	assert_true(pump_route(sub, log, true, "10.99.2.0", 24, idx));
	assert_int_equal(sh("ip route del 10.99.0.2/32 dev rwr0"), 0);
	assert_true(pump_route(sub, log, false, "10.99.0.2", 32, idx));

	/* Not the main table: nothing. */
	log->n = 0;
	assert_int_equal(sh("ip route add 10.99.0.4/32 dev rwr0 table 100"), 0);
	pump(sub, log, NULL, 300);
	for (i = 0; i < log->n; i++)
		assert_int_not_equal(log->ev[i].dst, ip4("10.99.0.4"));

	/* The interface goes: the link event comes, a RTM_DELROUTE for its routes does not
	 * (see netlink.h) — what callers must rely on is on_link(false).
	 */
	assert_int_equal(sh("ip route add 10.99.0.5/32 dev rwr0 scope link"), 0);
	assert_true(pump_route(sub, log, true, "10.99.0.5", 32, idx));
	assert_int_equal(sh("ip link del rwr0"), 0);
	assert_true(pump_link(sub, log, false, "rwr0"));
	pump(sub, log, NULL, 300);
	assert_null(route_ev(log, false, "10.99.0.5", 32, idx));
	rw_nl_sub_close(sub);
}

/* A bridge port's messages (ifi_family AF_BRIDGE) ride on RTNLGRP_LINK too; leaving the bridge
 * sends a RTM_DELLINK of that family, which must not read as "the interface is gone".
 */
static void test_sub_bridge_port(void **state)
{
	struct evlog *log = *state;
	struct rw_nl_sub *sub = NULL;
	int i;

	veth("rwb0");
	assert_int_equal(sh("ip link add rwbr type bridge && ip link set rwbr up && "
			    "ip link set rwb0 up && ip link set rwb0 master rwbr"),
			 0);
	assert_int_equal(rw_nl_sub_open(&sub), 0);
	assert_int_equal(sh("ip link set rwb0 nomaster"), 0);
	assert_true(pump_link(sub, log, true, "rwb0"));
	pump(sub, log, NULL, 300);
	for (i = 0; i < log->n; i++)
		assert_false(log->ev[i].link && !log->ev[i].add &&
			     !strcmp(log->ev[i].name, "rwb0"));
	rw_nl_sub_close(sub);
}

static void test_sub_overrun(void **state)
{
	const struct rw_nl_handlers h = {
		.on_link = log_link, .on_route = log_route, .data = *state};
	struct evlog *log = *state;
	struct rw_nl_sub *sub = NULL;
	struct pollfd pfd;
	int one = 1, ret, i;

	veth("rwo0");
	assert_int_equal(sh("ip link set rwo0 up && ip link set rwo0p up"), 0);
	assert_int_equal(rw_nl_sub_open(&sub), 0);
	/* The smallest queue the kernel allows (SOCK_MIN_RCVBUF): a handful of messages. */
	assert_int_equal(setsockopt(rw_nl_sub_fd(sub), SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)),
			 0);
	assert_int_equal(sh("for i in $(seq 1 60); do ip route add 10.97.0.$i/32 dev rwo0; done"),
			 0);
	ret = rw_nl_sub_read(sub, &h);
	for (i = 0; i < 10 && ret == 0; i++)
		ret = rw_nl_sub_read(sub, &h);
	assert_int_equal(ret, RW_NL_RESYNC);

	/* Drained: nothing pending, and the socket works on. */
	pfd.fd = rw_nl_sub_fd(sub);
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 0), 0);
	assert_int_equal(rw_nl_sub_read(sub, &h), 0);
	log->n = 0;
	assert_int_equal(sh("ip route add 10.97.1.1/32 dev rwo0"), 0);
	assert_true(pump_route(sub, log, true, "10.97.1.1", 32, (int)if_nametoindex("rwo0")));
	rw_nl_sub_close(sub);
}

static void test_sub_handler_error(void **state)
{
	const struct rw_nl_handlers h = {.on_link = log_link, .data = *state};
	struct evlog *log = *state;
	struct rw_nl_sub *sub = NULL;
	struct pollfd pfd;
	int ret = 0;

	assert_int_equal(rw_nl_sub_open(&sub), 0);
	log->fail = -EIO;
	veth("rwh0");
	pfd.fd = rw_nl_sub_fd(sub);
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, 3000), 1);
	ret = rw_nl_sub_read(sub, &h);
	assert_int_equal(ret, -EIO);
	rw_nl_sub_close(sub);
	rw_nl_sub_close(NULL);
	assert_int_equal(rw_nl_sub_open(NULL), -EINVAL);
	assert_int_equal(rw_nl_sub_read(NULL, &h), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ifname_match),
		cmocka_unit_test_setup_teardown(test_dump_links, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dump_interrupted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dump_routes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dump_routes6, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_kind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sub_link_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sub_route_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sub_bridge_port, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sub_overrun, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sub_handler_error, setup, teardown),
	};

	if (geteuid()) {
		fprintf(stderr, "test_netlink: needs root (netns)\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
