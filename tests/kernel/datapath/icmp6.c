// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* icmp6.c (test_datapath): ICMPv6 by type (bpf/icmp6.h) on a dual-stack pod: echo refused as
 * unsupported-protocol; errors allowed only about a flow of the veth's IPv6 table (out of the
 * pod only to that flow's peer), else icmp-unrelated; every other type icmpv6-type; without its
 * ICMPv6 program, unsupported-protocol. Also the fixture ndp.c shares: the dual-stack binding of
 * rwt0, its snapshot, and the runner of a case on a hand-built ICMPv6 frame (pkt_build() has no
 * hop limit, code or message body to set).
 */
#include "dp_suite.h"
#include "icmp6_suite.h"

/* Ethernet, the IPv6 header (hop limit `hop`), then the ICMPv6 message `msg` (its checksum
 * written over the pseudo-header, RFC 4443 2.3). Returns the frame's length.
 */
static size_t frame6(__u8 *buf, const char *src, const char *dst, __u8 hop, const __u8 *msg,
		     size_t len)
{
	__u8 *ip = buf + 14, *icmp = buf + 14 + 40, pseudo[40];
	__u16 sum;

	memset(buf, 0, PKT_MAX);
	memcpy(buf, gw_mac, 6);
	memcpy(buf + 6, pod_mac, 6);
	put16be(buf + 12, 0x86dd);
	ip[0] = 0x60;
	put16be(ip + 4, len);
	ip[6] = 58;
	ip[7] = hop;
	if (inet_pton(AF_INET6, src, ip + 8) != 1 || inet_pton(AF_INET6, dst, ip + 24) != 1)
		FATAL("frame6: %s -> %s is not IPv6", src, dst);
	memcpy(icmp, msg, len);
	icmp[2] = icmp[3] = 0;
	memcpy(pseudo, ip + 8, 32);
	put32be(pseudo + 32, len);
	put32be(pseudo + 36, 58);
	sum = pkt_csum_sum(icmp, len, pkt_csum_sum(pseudo, sizeof(pseudo), 0));
	put16be(icmp + 2, ~sum & 0xffff);
	return 14 + 40 + len;
}

/* The ICMPv6 message of a case: NDP with its target at offset 8, or an error quoting an IPv6
 * header and 8 bytes (the ports), or 8 bytes of a bare type. Returns its length.
 */
static size_t message6(const struct icase *c, __u8 *m)
{
	size_t len = 8;

	memset(m, 0, 256);
	m[0] = c->type;
	m[1] = c->code;
	if (c->target) {
		if (inet_pton(AF_INET6, c->target, m + 8) != 1)
			FATAL("%s: target %s", c->name, c->target);
		len = 24;
	} else if (c->q_src) {
		__u8 *q = m + 8;

		put32be(m + 4, c->type == 2 ? 1280 : 0); /* a packet too big's MTU */
		q[0] = 0x60;
		put16be(q + 4, c->q_proto == TCP ? 20 : 8);
		q[6] = c->q_proto;
		q[7] = 64;
		if (inet_pton(AF_INET6, c->q_src, q + 8) != 1 ||
		    inet_pton(AF_INET6, c->q_dst, q + 24) != 1)
			FATAL("%s: quote %s -> %s", c->name, c->q_src, c->q_dst);
		put16be(q + 40, c->q_sport);
		put16be(q + 42, c->q_dport);
		len = 8 + 40 + 8;
	}
	len += c->len_delta;
	memcpy(m + len, c->opts, c->opts_len);
	return len + c->opts_len;
}

void icmp6_setup(void)
{
	struct rw_endpoint ep = {.flags = RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6};
	char json[1024];

	snprintf(json, sizeof(json),
		 "{\"revision\": %llu, \"runs\": ["
		 "{\"id\": \"run-7f3a\", \"pods\": [\"%s\", \"%s\"]},"
		 " {\"id\": \"run-9c01\", \"pods\": [\"%s\", \"%s\"], \"egress\": \"open\"}]}",
		 (unsigned long long)revision_now() + 1, POD_A, POD6_A, POD_B, POD6_B);
	apply_json(json, 0, "ICMPv6: run-7f3a and run-9c01 dual-stack");
	inet_pton(AF_INET, POD_A, &ep.pod_ip);
	inet_pton(AF_INET6, POD6_A, ep.pod_ip6);
	inet_pton(AF_INET6, GW6, ep.gw_ip6);
	if (rw_endpoint_bind_addrs(&dp, ifindex_of[0], &ep))
		FATAL("binding rwt0 to %s, %s and gateway %s: %s", POD_A, POD6_A, GW6,
		      strerror(errno));
	/* rwt1 stays POD_B's IPv4 alone: a veth with no IPv6 bound. */
}

void icmp6_teardown(void)
{
	bind_veth(0, POD_A);
}

void put_flow6(const char *pod, __u16 pod_port, const char *peer, __u16 peer_port, __u8 proto,
	       __u64 stamp, const char *run)
{
	struct rw_ct_value v = {.opened_by = E, .stamp = stamp, .run_idx = run_idx_of(run)};
	struct rw_ct6_key k = {.ifindex = ifindex_of[0], .proto = proto};
	int fd = rw_conntrack6_table_fd(&dp, ifindex_of[0]), err;

	if (fd < 0)
		FATAL("rwt0 has no IPv6 table");
	inet_pton(AF_INET6, pod, k.pod_ip);
	inet_pton(AF_INET6, peer, k.peer_ip);
	k.pod_port = htons(pod_port);
	k.peer_port = htons(peer_port);
	v.created_ns = v.seen_ns = mono_ns();
	err = bpf_map_update_elem(fd, &k, &v, BPF_ANY);
	close(fd);
	if (err)
		FATAL("a flow in rwt0's IPv6 table: %s", strerror(errno));
}

void run_icase(const struct icase *c)
{
	struct rw_counters node0, node1, run0, run1;
	__u8 buf[PKT_MAX], msg[256];
	size_t len = frame6(buf, c->src, c->dst, c->hop ? c->hop : 255, msg, message6(c, msg));
	const char *run = c->dev == 0 ? "run-7f3a" : NULL;
	__u32 run_idx = run_idx_of(run);
	int want_ret = c->reason == RW_REASON_ALLOWED ? -1 : 2, retval, failed_before = t_failed;
	int want_events = c->reason != RW_REASON_ALLOWED;

	t_count++;
	drain_events();
	rw_counters_read(&dp, 0, &node0);
	if (run_idx)
		rw_counters_read(&dp, run_idx, &run0);
	CHECK_EQ(test_run(c->dir, ifindex_of[c->dev], buf, len, 1, &retval), 0, "test_run");
	/* An echo out of a proven pod is answered, as IPv4's query and reply are (answers6.c
	 * judges the answer itself): redirected back into the pod.
	 */
	if ((c->type == 128 || c->type == 129) && c->dir == E &&
	    c->reason == RW_REASON_UNSUPPORTED_PROTOCOL)
		want_ret = 7;
	CHECK(retval == want_ret, "verdict", "returned %d (%s), expected %d (%s)", retval,
	      ret_name(retval), want_ret, ret_name(want_ret));
	rw_counters_read(&dp, 0, &node1);
	check_one_packet("node counter", "the node", &node0, &node1, c->dir, c->reason);
	if (want_ret != 7)
		for (int a = 1; a < RW_ANSWER_COUNT; a++)
			CHECK(node1.answers[a] == node0.answers[a], "never answered",
			      "answers[%s] grew by %llu", rw_answer_name(a),
			      (unsigned long long)(node1.answers[a] - node0.answers[a]));
	if (run_idx) {
		rw_counters_read(&dp, run_idx, &run1);
		check_one_packet("run counter", run, &run0, &run1, c->dir, c->reason);
	}
	/* A drop is reported; an allowed NDP message or error is no new flow, so it is not. */
	ring_buffer__consume(ring);
	CHECK(n_events == want_events, "events", "%d events, expected %d", n_events, want_events);
	if (n_events == 1 && want_events) {
		const struct rw_event *ev = &events[0];
		__be32 s6[4], d6[4];

		inet_pton(AF_INET6, c->src, s6);
		inet_pton(AF_INET6, c->dst, d6);
		CHECK(ev->reason == c->reason, "event reason", "%s, expected %s",
		      rw_reason_name(ev->reason), rw_reason_name(c->reason));
		CHECK_EQ(ev->dir, c->dir, "event direction");
		CHECK_EQ(ntohs(ev->ethertype), 0x86dd, "event ethertype");
		CHECK_EQ(ev->proto, 58, "event protocol");
		CHECK(!memcmp(ev->saddr6, s6, 16) && !memcmp(ev->daddr6, d6, 16), "event addresses",
		      "not %s -> %s", c->src, c->dst);
		CHECK(!strcmp(ev->run_id, run ? run : ""), "event run", "\"%s\", expected \"%s\"",
		      ev->run_id, run ? run : "");
	}
	printf("%s %d - %s: %s\n", t_failed == failed_before ? "ok" : "not ok", t_count, c->name,
	       rw_reason_name(c->reason));
}

int icase_retval(const struct icase *c)
{
	__u8 buf[PKT_MAX], msg[256];
	size_t len = frame6(buf, c->src, c->dst, c->hop ? c->hop : 255, msg, message6(c, msg));
	int retval = 0;

	if (test_run(c->dir, ifindex_of[c->dev], buf, len, 1, &retval))
		FATAL("%s: test_run: %s", c->name, strerror(errno));
	return retval;
}

void run_itable(const struct icase *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_icase(&cases[i]);
}

#define ROUTER6	 "2600:1f14:ffff::1" /* a router on the path */
#define THIRD6	 "2a00:1450:4001::5" /* anyone else */
#define UNTRACK6 "2606:4700::2222"

static const struct icase icmp6_cases[] = {
	/* Echo, as ICMP for IPv4: unsupported-protocol; a spoofed echo is spoofed first. */
	{"echo request out of the pod", .dir = E, .src = POD6_A, .dst = PUBLIC6, .hop = 64,
	 .type = 128, .reason = RW_REASON_UNSUPPORTED_PROTOCOL},
	{"echo reply out of the pod", .dir = E, .src = POD6_A, .dst = PUBLIC6, .hop = 64,
	 .type = 129, .reason = RW_REASON_UNSUPPORTED_PROTOCOL},
	{"echo request into the pod", .dir = I, .src = PUBLIC6, .dst = POD6_A, .hop = 50,
	 .type = 128, .reason = RW_REASON_UNSUPPORTED_PROTOCOL},
	{"echo request from another pod's address", .dir = E, .src = POD6_B, .dst = PUBLIC6,
	 .hop = 64, .type = 128, .reason = RW_REASON_SPOOFED_SOURCE},
	{"echo request on a veth with no IPv6 bound", .dev = 1, .dir = E, .src = POD6_B,
	 .dst = PUBLIC6, .hop = 64, .type = 128, .reason = RW_REASON_UNKNOWN_SOURCE},

	/* Every other type, whatever its source: MLD, node information, unknown ones. */
	{"MLDv2 report from the pod's link-local", .dir = E, .src = POD6_LL, .dst = "ff02::16",
	 .hop = 1, .type = 143, .reason = RW_REASON_ICMPV6_TYPE},
	{"MLDv1 report", .dir = E, .src = POD6_LL, .dst = "ff02::1:ff00:3", .hop = 1, .type = 131,
	 .reason = RW_REASON_ICMPV6_TYPE},
	{"MLD done", .dir = E, .src = POD6_LL, .dst = "ff02::2", .hop = 1, .type = 132,
	 .reason = RW_REASON_ICMPV6_TYPE},
	{"MLD query into the pod from the node", .dir = I, .src = GW6, .dst = "ff02::1", .hop = 1,
	 .type = 130, .reason = RW_REASON_ICMPV6_TYPE},
	{"node information query (139)", .dir = E, .src = POD6_A, .dst = PUBLIC6, .hop = 64,
	 .type = 139, .reason = RW_REASON_ICMPV6_TYPE},
	{"an unassigned error type (5)", .dir = E, .src = POD6_A, .dst = PUBLIC6, .hop = 64,
	 .type = 5, .reason = RW_REASON_ICMPV6_TYPE},
	{"a private experimentation type (200) into the pod", .dir = I, .src = PUBLIC6,
	 .dst = POD6_A, .hop = 50, .type = 200, .reason = RW_REASON_ICMPV6_TYPE},

	/* Errors into the pod: about a flow the pod sent, from any router on the path. */
	{"packet too big into the pod for its tracked TCP flow", .dir = I, .src = ROUTER6,
	 .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A, .q_dst = PUBLIC6, .q_proto = TCP,
	 .q_sport = 40100, .q_dport = 443, .reason = RW_REASON_ALLOWED},
	{"time exceeded into the pod for its tracked UDP flow", .dir = I, .src = ROUTER6,
	 .dst = POD6_A, .hop = 60, .type = 3, .q_src = POD6_A, .q_dst = PUBLIC6, .q_proto = UDP,
	 .q_sport = 40101, .q_dport = 443, .reason = RW_REASON_ALLOWED},
	{"packet too big into the pod for an untracked flow", .dir = I, .src = ROUTER6,
	 .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A, .q_dst = UNTRACK6, .q_proto = TCP,
	 .q_sport = 40100, .q_dport = 443, .reason = RW_REASON_ICMP_UNRELATED},
	{"packet too big whose quote is the flow the wrong way round", .dir = I, .src = ROUTER6,
	 .dst = POD6_A, .hop = 60, .type = 2, .q_src = PUBLIC6, .q_dst = POD6_A, .q_proto = TCP,
	 .q_sport = 443, .q_dport = 40100, .reason = RW_REASON_ICMP_UNRELATED},
	{"packet too big quoting 4 bytes after the IPv6 header (truncated quote)", .dir = I,
	 .src = ROUTER6, .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A, .q_dst = PUBLIC6,
	 .q_proto = TCP, .q_sport = 40100, .q_dport = 443, .len_delta = -4,
	 .reason = RW_REASON_ICMP_UNRELATED},
	{"packet too big quoting a packet with an extension header", .dir = I, .src = ROUTER6,
	 .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A, .q_dst = PUBLIC6, .q_proto = 60,
	 .q_sport = 40100, .q_dport = 443, .reason = RW_REASON_ICMP_UNRELATED},
	{"packet too big for a flow the last apply cut (stale verdict)", .dir = I, .src = ROUTER6,
	 .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A, .q_dst = PUBLIC6, .q_proto = TCP,
	 .q_sport = 40102, .q_dport = 443, .reason = RW_REASON_ICMP_UNRELATED},
	{"packet too big for a tracked flow, addressed to another pod", .dir = I, .src = ROUTER6,
	 .dst = POD6_B, .hop = 60, .type = 2, .q_src = POD6_A, .q_dst = PUBLIC6, .q_proto = TCP,
	 .q_sport = 40100, .q_dport = 443, .reason = RW_REASON_INBOUND_DENIED},

	/* Errors out of the pod: about a packet it received, only to that packet's sender. */
	{"port unreachable out of the pod to its tracked UDP flow's peer", .dir = E, .src = POD6_A,
	 .dst = PUBLIC6, .hop = 64, .type = 1, .code = 4, .q_src = PUBLIC6, .q_dst = POD6_A,
	 .q_proto = UDP, .q_sport = 443, .q_dport = 40101, .reason = RW_REASON_ALLOWED},
	{"the same error aimed at a third address", .dir = E, .src = POD6_A, .dst = THIRD6,
	 .hop = 64, .type = 1, .code = 4, .q_src = PUBLIC6, .q_dst = POD6_A, .q_proto = UDP,
	 .q_sport = 443, .q_dport = 40101, .reason = RW_REASON_ICMP_UNRELATED},
	{"an error out of the pod quoting a third address as the sender", .dir = E, .src = POD6_A,
	 .dst = THIRD6, .hop = 64, .type = 1, .code = 4, .q_src = THIRD6, .q_dst = POD6_A,
	 .q_proto = UDP, .q_sport = 443, .q_dport = 40101, .reason = RW_REASON_ICMP_UNRELATED},
	{"parameter problem out of the pod for an untracked flow", .dir = E, .src = POD6_A,
	 .dst = UNTRACK6, .hop = 64, .type = 4, .q_src = UNTRACK6, .q_dst = POD6_A, .q_proto = TCP,
	 .q_sport = 443, .q_dport = 40100, .reason = RW_REASON_ICMP_UNRELATED},
	{"an error out of the pod from its link-local address", .dir = E, .src = POD6_LL,
	 .dst = PUBLIC6, .hop = 64, .type = 1, .code = 4, .q_src = PUBLIC6, .q_dst = POD6_A,
	 .q_proto = UDP, .q_sport = 443, .q_dport = 40101, .reason = RW_REASON_SPOOFED_SOURCE},
	{"an error on a veth with no IPv6 bound", .dev = 1, .dir = I, .src = ROUTER6, .dst = POD6_B,
	 .hop = 60, .type = 2, .q_src = POD6_B, .q_dst = PUBLIC6, .q_proto = TCP, .q_sport = 40100,
	 .q_dport = 443, .reason = RW_REASON_UNKNOWN_SOURCE},
};

/* Under an expired lease no cached verdict is trusted (rw_fast()), so no error is related to a
 * flow: the lease-expired policy may refuse the flow's own packets (a run rule's UDP flow is
 * cut), and its errors must not carry data past it. Both directions, on the flows
 * icmp6_cases allowed errors of.
 */
static void test_icmp6_lease(void)
{
	static const struct icase cases[] = {
		{"lease expired: port unreachable out of the pod to its tracked UDP flow's peer",
		 .dir = E, .src = POD6_A, .dst = PUBLIC6, .hop = 64, .type = 1, .code = 4,
		 .q_src = PUBLIC6, .q_dst = POD6_A, .q_proto = UDP, .q_sport = 443,
		 .q_dport = 40101, .len_delta = 128, .reason = RW_REASON_ICMP_UNRELATED},
		{"lease expired: time exceeded out of the pod for its tracked UDP flow", .dir = E,
		 .src = POD6_A, .dst = PUBLIC6, .hop = 64, .type = 3, .q_src = PUBLIC6,
		 .q_dst = POD6_A, .q_proto = UDP, .q_sport = 443, .q_dport = 40101,
		 .reason = RW_REASON_ICMP_UNRELATED},
		{"lease expired: packet too big into the pod for its tracked TCP flow", .dir = I,
		 .src = "2600:1f14:ffff::1", .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A,
		 .q_dst = PUBLIC6, .q_proto = TCP, .q_sport = 40100, .q_dport = 443,
		 .reason = RW_REASON_ICMP_UNRELATED},
		{"lease renewed: the same error is related again", .dir = E, .src = POD6_A,
		 .dst = PUBLIC6, .hop = 64, .type = 1, .code = 4, .q_src = PUBLIC6, .q_dst = POD6_A,
		 .q_proto = UDP, .q_sport = 443, .q_dport = 40101, .reason = RW_REASON_ALLOWED},
	};

	set_lease(1); /* 1 ns after boot: behind the kernel's clock */
	run_itable(cases, 3);
	set_lease(0);
	run_icase(&cases[3]);
}

/* ICMPv6 is judged by a program of its own, which the IPv6 program tail-calls through
 * rw_progs_icmp6: with the direction's slot empty, an error the ICMPv6 program allows is refused
 * by the IPv6 program as unsupported-protocol (absence means deny), and allowed again once the
 * slot holds its program.
 */
static void test_icmp6_slot_empty(void)
{
	static const struct icase cases[] = {
		{"ICMPv6 program missing: packet too big into the pod for its tracked TCP flow",
		 .dir = I, .src = "2600:1f14:ffff::1", .dst = POD6_A, .hop = 60, .type = 2,
		 .q_src = POD6_A, .q_dst = PUBLIC6, .q_proto = TCP, .q_sport = 40100,
		 .q_dport = 443, .reason = RW_REASON_UNSUPPORTED_PROTOCOL},
		{"ICMPv6 program back: the same error is related again", .dir = I,
		 .src = "2600:1f14:ffff::1", .dst = POD6_A, .hop = 60, .type = 2, .q_src = POD6_A,
		 .q_dst = PUBLIC6, .q_proto = TCP, .q_sport = 40100, .q_dport = 443,
		 .reason = RW_REASON_ALLOWED},
	};
	int map = dp.map_fd[RW_M_PROGS_ICMP6];
	__u32 dir = RW_DIR_INGRESS;

	if (bpf_map_delete_elem(map, &dir))
		FATAL("emptying rw_progs_icmp6[ingress]: %s", strerror(errno));
	run_icase(&cases[0]);
	if (bpf_map_update_elem(map, &dir, &dp.icmp6_fd[RW_DIR_INGRESS], BPF_ANY))
		FATAL("filling rw_progs_icmp6[ingress]: %s", strerror(errno));
	run_icase(&cases[1]);
}

/* Under the dual-stack snapshot (icmp6_setup()): the flows the errors name are put in rwt0's
 * IPv6 table as the datapath notes them, with a verdict of the revision in force, but one whose
 * verdict an apply has made stale since (its stamp below the run's rw_run_revs).
 */
void test_icmp6(void)
{
	__u64 rev = revision_now();

	put_flow6(POD6_A, 40100, PUBLIC6, 443, TCP, rev, "run-7f3a");
	put_flow6(POD6_A, 40101, PUBLIC6, 443, UDP, rev, "run-7f3a");
	put_flow6(POD6_A, 40102, PUBLIC6, 443, TCP, 1, "run-7f3a");
	run_itable(icmp6_cases, sizeof(icmp6_cases) / sizeof(icmp6_cases[0]));
	test_icmp6_lease();
	test_icmp6_slot_empty();
}
