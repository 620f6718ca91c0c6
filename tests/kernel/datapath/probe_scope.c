// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* probe_scope.c (test_datapath): a probe pass walks only the sandboxes whose run may have been
 * cut since the last pass (rw_revoke_probe()'s `seen`, the apply's dp.cut_revs): a rule added to
 * a run probes nothing, a rule taken from it probes that run's stale flows and not another's, and
 * a flow the pass had to leave (its pod had no neighbour entry) is probed by the next pass,
 * though nothing moved in between; a connection the datapath saw close is not probed.
 *
 * Two sandboxes of their own, each the one pod of its run, each with one stale TCP flow. What
 * each pass sent is read from the veths' far ends; a marker frame sent after the pass, on the
 * same CPU, is the end of what it sent (a veth hands frames to the CPU's backlog in order).
 */
#include <sched.h>

#include "dp_suite.h"
#include "revoke_probe.h"

#define SCOPE_PEER "93.184.216.34"
#define SCOPE_PORT 10001

static const char *const scope_pod[2] = {"10.77.1.1", "10.77.1.2"};

/* The snapshot at `revision`: run-s0 and run-s1, each one pod and one rule; run-s1 with a second
 * rule after its first if `more` (a change of run-s1 only: a grant, and without it a revoke).
 */
static void scope_apply(unsigned int revision, bool more, const char *what)
{
	char json[1024];

	snprintf(json, sizeof(json),
		 "{\"revision\": %u, \"runs\": ["
		 "{\"id\": \"run-s0\", \"pods\": [\"%s\"], \"allow\": [{\"ip\": \"%s\", \"tcp\": "
		 "[443]}]}, "
		 "{\"id\": \"run-s1\", \"pods\": [\"%s\"], \"allow\": [{\"ip\": \"%s\", \"tcp\": "
		 "[443]}%s]}]}",
		 revision, scope_pod[0], SCOPE_PEER, scope_pod[1], SCOPE_PEER,
		 more ? ", {\"ip\": \"52.1.2.5\", \"tcp\": [443]}" : "");
	apply_json(json, 0, what);
}

/* The key of sandbox i's flow: SCOPE_PORT of its pod to SCOPE_PEER:443, TCP. */
static struct rw_ct_key scope_key(__u32 ifindex, int i)
{
	struct rw_ct_key k = {.ifindex = ifindex,
			      .peer_port = htons(443),
			      .pod_port = htons(SCOPE_PORT),
			      .proto = IPPROTO_TCP};

	inet_pton(AF_INET, scope_pod[i], &k.pod_ip);
	inet_pton(AF_INET, SCOPE_PEER, &k.peer_ip);
	return k;
}

/* One stale TCP flow of sandbox i: stamp 0 under its run, whose revision is above 0. */
static void scope_flow(__u32 ifindex, int i)
{
	struct rw_ct_key k = scope_key(ifindex, i);
	struct rw_ct_value v = {.opened_by = RW_DIR_EGRESS, .created_ns = 0x5c5c0000u};
	int fd = rw_conntrack_table_fd(&dp, ifindex);
	struct rw_pod pod;

	if (rw_live_pod(&dp, k.pod_ip, &pod))
		FATAL("%s is in no run of the live slot", scope_pod[i]);
	v.run_idx = pod.run_idx;
	v.seen_ns = mono_ns();
	if (fd < 0 || bpf_map_update_elem(fd, &k, &v, BPF_ANY))
		FATAL("noting the flow of %s: %s", scope_pod[i], strerror(fd < 0 ? -fd : errno));
	close(fd);
}

/* Sandbox i's flow as the datapath leaves it once it saw a FIN from the pod, from the peer, an
 * RST (bpf/conntrack.h's rw_ct_note_close()).
 */
static void scope_close(__u32 ifindex, int i, __u8 fin_pod, __u8 fin_peer, __u8 rst)
{
	struct rw_ct_key k = scope_key(ifindex, i);
	int fd = rw_conntrack_table_fd(&dp, ifindex);
	struct rw_ct_value v;

	if (fd < 0 || bpf_map_lookup_elem(fd, &k, &v))
		FATAL("sandbox %d's flow is not in its table", i);
	v.fin_pod = fin_pod;
	v.fin_peer = fin_peer;
	v.rst = rst;
	if (bpf_map_update_elem(fd, &k, &v, BPF_EXIST))
		FATAL("closing sandbox %d's flow: %s", i, strerror(errno));
	close(fd);
}

/* Whether frame f is a probe of sandbox i's flow: a bare ACK from SCOPE_PEER:443. */
static bool scope_is_probe(const __u8 *f, size_t len, int i)
{
	__be32 peer, pod;

	inet_pton(AF_INET, SCOPE_PEER, &peer);
	inet_pton(AF_INET, scope_pod[i], &pod);
	return len >= 54 && f[12] == 0x08 && f[13] == 0 && f[23] == IPPROTO_TCP &&
	       !memcmp(f + 26, &peer, 4) && !memcmp(f + 30, &pod, 4) && f[36] == SCOPE_PORT >> 8 &&
	       f[37] == (SCOPE_PORT & 0xff) && f[47] == ACK;
}

/* The probes sandbox i's far end got before the marker, which is sent now into its veth. */
static int scope_probes(int tap, __u32 ifindex, int i)
{
	static const __u8 marker[60] = {[0] = 0x02, [5] = 0x5c, [12] = 0x88, [13] = 0xb5};
	struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_ifindex = (int)ifindex};
	struct pollfd p = {.fd = tap, .events = POLLIN};
	int fd = socket(AF_PACKET, SOCK_RAW, 0), probes = 0, one = 1;
	__u8 f[PKT_MAX];
	ssize_t n;

	/* Past the qdisc as the probes go (dev_direct_xmit()). */
	if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) ||
	    sendto(fd, marker, sizeof(marker), 0, (struct sockaddr *)&to, sizeof(to)) !=
		    sizeof(marker))
		FATAL("the marker into sandbox %d: %s", i, strerror(errno));
	close(fd);
	for (;;) {
		if (poll(&p, 1, 5000 * wait_scale()) != 1)
			FATAL("sandbox %d's marker did not arrive", i);
		n = recv(tap, f, sizeof(f), 0);
		if (n == sizeof(marker) && !memcmp(f, marker, sizeof(marker)))
			return probes;
		if (n > 0 && scope_is_probe(f, (size_t)n, i))
			probes++;
	}
}

struct scope {
	__u32 ifindex[2];
	int tap[2];
	__u64 seen[RW_MAX_RUNS];
};

/* One pass with the scope's baseline (or none); checks which sandboxes it probed (two ACKs
 * each) and how many flows it left for want of a neighbour entry.
 */
static void scope_pass(struct scope *s, bool baseline, bool want0, bool want1,
		       unsigned int want_no_mac, const char *what)
{
	struct rw_probe_stats st;
	int err = rw_revoke_probe(&dp, baseline ? s->seen : NULL, &st), got[2], ok;

	for (int i = 0; i < 2; i++)
		got[i] = scope_probes(s->tap[i], s->ifindex[i], i);
	t_count++;
	ok = CHECK_EQ(err, 0, "rw_revoke_probe");
	ok &= CHECK(got[0] == (want0 ? 2 : 0), what, "sandbox 0 got %d probes, want %d", got[0],
		    want0 ? 2 : 0);
	ok &= CHECK(got[1] == (want1 ? 2 : 0), what, "sandbox 1 got %d probes, want %d", got[1],
		    want1 ? 2 : 0);
	ok &= CHECK(st.no_mac >= want_no_mac, what, "%u flows of no neighbour, want %u", st.no_mac,
		    want_no_mac);
	printf("%s %d - probe scope: %s (%u sandboxes walked, %u probed, %u of no neighbour)\n",
	       ok ? "ok" : "not ok", t_count, what, st.walked, st.probed, st.no_mac);
}

void test_probe_scope(void)
{
	struct scope s = {0};
	struct rw_config cfg = config_get();
	unsigned int rev = (unsigned int)RW_STATE_REVISION(cfg.state) + 1;
	cpu_set_t one, all;
	char cmd[256], ip[16];
	__be32 pod_ip;

	/* One CPU, so that each marker follows the pass's probes through the same backlog. */
	if (sched_getaffinity(0, sizeof(all), &all))
		FATAL("sched_getaffinity: %s", strerror(errno));
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &one);
			break;
		}
	if (sched_setaffinity(0, sizeof(one), &one))
		FATAL("sched_setaffinity: %s", strerror(errno));

	scope_apply(rev++, false, "probe scope: run-s0 and run-s1");
	for (int i = 0; i < 2; i++) {
		struct sockaddr_ll sll = {.sll_family = AF_PACKET,
					  .sll_protocol = htons(ETH_P_ALL)};

		snprintf(cmd, sizeof(cmd),
			 "ip link add rws%d type veth peer name rws%dp && ip link set rws%d up && "
			 "ip link set rws%dp up && ip neigh replace %s lladdr 02:00:00:00:5c:%02x "
			 "dev rws%d nud permanent",
			 i, i, i, i, scope_pod[i], i + 1, i);
		sh(cmd);
		snprintf(ip, sizeof(ip), "rws%d", i);
		s.ifindex[i] = if_nametoindex(ip);
		inet_pton(AF_INET, scope_pod[i], &pod_ip);
		if (!s.ifindex[i] || rw_endpoint_bind(&dp, s.ifindex[i], pod_ip))
			FATAL("binding rws%d to %s", i, scope_pod[i]);
		snprintf(ip, sizeof(ip), "rws%dp", i);
		s.tap[i] = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
		sll.sll_ifindex = (int)if_nametoindex(ip);
		if (s.tap[i] < 0 || bind(s.tap[i], (struct sockaddr *)&sll, sizeof(sll)))
			FATAL("packet socket on %s: %s", ip, strerror(errno));
		scope_flow(s.ifindex[i], i);
	}

	scope_pass(&s, true, true, true, 0, "a first pass walks every run that ever moved");
	scope_pass(&s, true, false, false, 0, "nothing moved: no sandbox is probed again");
	scope_apply(rev++, true, "probe scope: a rule added to run-s1");
	scope_pass(&s, true, false, false, 0, "run-s1 gained a rule: nothing is cut, none probed");
	scope_apply(rev++, false, "probe scope: that rule taken back");
	scope_pass(&s, true, false, true, 0, "run-s1 lost a rule: its sandbox alone is probed");
	snprintf(cmd, sizeof(cmd), "ip neigh del %s dev rws1", scope_pod[1]);
	sh(cmd);
	scope_apply(rev++, true, "probe scope: a rule added to run-s1 again");
	scope_apply(rev++, false, "probe scope: taken back again");
	scope_pass(&s, true, false, false, 1, "run-s1 lost a rule, its pod has no neighbour entry");
	snprintf(cmd, sizeof(cmd),
		 "ip neigh replace %s lladdr 02:00:00:00:5c:02 dev rws1 nud permanent",
		 scope_pod[1]);
	sh(cmd);
	scope_pass(&s, true, false, true, 0, "nothing moved: the flow left is probed now");
	scope_pass(&s, false, true, true, 0, "no baseline: every sandbox is walked");
	scope_close(s.ifindex[0], 0, 1, 1, 0);
	scope_close(s.ifindex[1], 1, 1, 0, 0);
	scope_pass(&s, false, false, true, 0,
		   "a FIN each way: closed, not probed; a FIN from the pod alone: probed");
	scope_close(s.ifindex[0], 0, 0, 0, 1);
	scope_close(s.ifindex[1], 1, 0, 1, 0);
	scope_pass(&s, false, false, true, 0,
		   "an RST: closed, not probed; a FIN from the peer alone: probed");

	for (int i = 0; i < 2; i++) {
		close(s.tap[i]);
		if (rw_endpoint_unbind(&dp, s.ifindex[i]))
			FATAL("unbinding rws%d", i);
		snprintf(cmd, sizeof(cmd), "ip link del rws%d", i);
		sh(cmd);
	}
	if (sched_setaffinity(0, sizeof(all), &all))
		FATAL("sched_setaffinity: %s", strerror(errno));
}
