// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* conntrack.c (test_datapath): the per-sandbox conntrack tables: isolation, conntrack-full, expiry.
 */
#include "dp_suite.h"

/* Conntrack tables are per sandbox: one sandbox's full table refuses its own new flows
 * (conntrack-full, counted for its run) and leaves its known flows and every other sandbox
 * alone; a pod change starts an empty table; a veth without a table is fail-closed.
 */
void set_ct_share(__u32 per_sandbox)
{
	struct rw_config cfg = config_get();

	cfg.ct_per_sandbox = per_sandbox;
	config_put(&cfg);
}

void test_conntrack_isolation(void)
{
	char name[64];
	int fd, n = 0;

	/* rwt0 gets a table of 4 flows: unbind and bind again (a fresh table of the new size). */
	set_ct_share(4);
	rw_endpoint_unbind(&dp, ifindex_of[0]);
	bind_veth(0, POD_A);
	set_ct_share(RW_CT_PER_SANDBOX);
	fd = rw_conntrack_table_fd(&dp, ifindex_of[0]);
	t_count++;
	if (CHECK(fd >= 0, "table", "rwt0 has no conntrack table after bind: %s", strerror(-fd))) {
		struct bpf_map_info info = {};
		__u32 l = sizeof(info);

		bpf_obj_get_info_by_fd(fd, &info, &l);
		CHECK_EQ(info.max_entries, 4, "rwt0's table size");
		close(fd);
	}
	printf("%s %d - bind makes the sandbox's own table (4 flows)\n", fd >= 0 ? "ok" : "not ok",
	       t_count);

	for (int i = 0; i < 4; i++) {
		struct tcase c = {NULL, EG(0, POD_A, "172.20.0.11", TCP, 41100 + i, 3443, SYN),
				  ALLOWED(RW_PATH_RULE, 1, "run-7f3a")};

		snprintf(name, sizeof(name), "flow %d of 4 in rwt0's table", i + 1);
		c.name = name;
		run_case(&c);
	}
	{
		static const struct tcase cases[] = {
			{"a 5th new flow: conntrack-full, for this sandbox only",
			 EG(0, POD_A, "172.20.0.11", TCP, 41104, 3443, SYN),
			 REFUSED_RST(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
			{"a 5th new UDP flow: conntrack-full",
			 EG(0, POD_A, "172.20.0.14", UDP, 41105, 4317, 0),
			 REFUSED_ICMP(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
			{"a new inbound connection into the full sandbox: conntrack-full",
			 IN(0, "172.20.0.20", POD_A, TCP, 50100, 4999, SYN),
			 DROPPED(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
			{"the full sandbox's known flows go on: next packet",
			 EG(0, POD_A, "172.20.0.11", TCP, 41100, 3443, ACK),
			 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
			{"the full sandbox's known flows go on: the server speaks",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41103, ACK),
			 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
			{"another sandbox opens flows as before",
			 EG(1, POD_B, "172.20.0.11", TCP, 41106, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-b77e")},
		};

		run_table(cases, sizeof(cases) / sizeof(cases[0]));
	}

	/* Flows are in the sandbox's own table only. */
	fd = rw_conntrack_table_fd(&dp, ifindex_of[1]);
	if (fd >= 0) {
		struct rw_ct_key k, *prev = NULL;

		while (bpf_map_get_next_key(fd, prev, &k) == 0) {
			prev = &k;
			n += k.ifindex != (__u32)ifindex_of[1];
		}
		close(fd);
	}
	t_count++;
	printf("%s %d - rwt1's table holds only rwt1's flows\n",
	       CHECK(fd >= 0 && n == 0, "isolation", "fd %d, %d foreign entries", fd, n) ? "ok"
											 : "not ok",
	       t_count);

	/* The pod moves (flush by pod IP, as an apply does): a fresh, empty table. */
	t_count++;
	{
		struct in_addr a;

		inet_pton(AF_INET, POD_A, &a);
		n = rw_conntrack_flush(&dp, 0, a.s_addr);
	}
	printf("%s %d - flushing the pod's flows replaces its one table\n",
	       CHECK_EQ(n, 1, "tables replaced") ? "ok" : "not ok", t_count);
	{
		static const struct tcase cases[] = {
			{"after the flush, its old flow's reply is a new inbound connection",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41100, ACK),
			 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
			{"after the flush, a new flow fits again",
			 EG(0, POD_A, "172.20.0.11", TCP, 41107, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		};

		run_table(cases, sizeof(cases) / sizeof(cases[0]));
	}

	/* No table at all (bound by an older agent, or deleted under us): fail closed. */
	{
		__u32 key = ifindex_of[0];
		static const struct tcase cases[] = {
			{"no table: a known flow is unknown, its reply is refused",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41107, ACK),
			 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
			{"no table: a new flow is conntrack-full",
			 EG(0, POD_A, "172.20.0.11", TCP, 41108, 3443, SYN),
			 REFUSED_RST(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
		};

		static const struct tcase healed[] = {
			{"binding the veth to the same pod again gives it a table: new flows fit",
			 EG(0, POD_A, "172.20.0.11", TCP, 41109, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		};

		__u32 slot = RW_VETH_SLOT(key);

		bpf_map_delete_elem(dp.map_fd[RW_M_CT_SLOTS], &slot);
		bpf_map_delete_elem(dp.map_fd[RW_M_CONNTRACK], &key);
		run_table(cases, sizeof(cases) / sizeof(cases[0]));
		bind_veth(0, POD_A); /* what the agent's resync does */
		run_table(healed, 1);
	}
}

/* Idle flows leave the tables: one made to look an hour and a bit idle goes, a fresh one stays
 * (an expired TCP flow's next packet is judged as a new one: the policy decides again).
 */
void test_conntrack_expire(void)
{
	struct pkt_spec a = {FLOW(POD_A, "172.20.0.11", TCP, 41200, 3443), .tcp_flags = SYN};
	struct pkt_spec b = {FLOW(POD_A, "172.20.0.11", TCP, 41201, 3443), .tcp_flags = SYN};
	struct rw_ct_key k = {.ifindex = ifindex_of[0],
			      .pod_port = htons(41200),
			      .peer_port = htons(3443),
			      .proto = TCP};
	struct rw_ct_value v;
	__u8 buf[PKT_MAX];
	__u32 cursor = 0;
	int retval, fd, expired, ok;

	test_run(E, ifindex_of[0], buf, pkt_build(&a, buf), 1, &retval);
	test_run(E, ifindex_of[0], buf, pkt_build(&b, buf), 1, &retval);
	inet_pton(AF_INET, POD_A, &k.pod_ip);
	inet_pton(AF_INET, "172.20.0.11", &k.peer_ip);
	fd = rw_conntrack_table_fd(&dp, ifindex_of[0]);
	if (fd < 0 || bpf_map_lookup_elem(fd, &k, &v))
		FATAL("the flow of the expiry case is not in rwt0's table");
	/* Seen at boot, judged 10 s short of an hour from now: only the aged flow is over the
	 * hour (the machine has been up for more than 10 s), whatever the uptime.
	 */
	v.seen_ns = 1;
	if (bpf_map_update_elem(fd, &k, &v, BPF_EXIST))
		FATAL("ageing the flow of the expiry case: %s", strerror(errno));
	expired = rw_conntrack_expire(&dp, mono_ns() + 3590ULL * 1000000000ULL, &cursor, 1 << 20);
	k.pod_port = htons(41200);
	t_count++;
	ok = CHECK_EQ(expired, 1, "flows expired");
	ok &= CHECK(bpf_map_lookup_elem(fd, &k, &v) != 0, "expired",
		    "the idle flow is still there");
	k.pod_port = htons(41201);
	ok &= CHECK(bpf_map_lookup_elem(fd, &k, &v) == 0, "kept", "the fresh flow is gone");
	ok &= CHECK_EQ(cursor, 0, "cursor back at the start after a full walk");
	close(fd);
	printf("%s %d - conntrack expiry: an idle flow goes, a fresh one stays\n",
	       ok ? "ok" : "not ok", t_count);
}

/* A TCP connection's close is noted in its entry, for the revoke probe: a FIN from the pod, a
 * FIN from the peer, an RST from either side; a SYN on the same ports (a new connection) clears
 * them (bpf/conntrack.h's rw_ct_note_close()).
 */
void test_conntrack_close(void)
{
	static const struct tcase cases[] = {
		{"close: a first flow", EG(0, POD_A, "172.20.0.11", TCP, 41300, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"close: its pod's FIN", EG(0, POD_A, "172.20.0.11", TCP, 41300, 3443, FINACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"close: a second flow", EG(0, POD_A, "172.20.0.11", TCP, 41301, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"close: its pod's FIN", EG(0, POD_A, "172.20.0.11", TCP, 41301, 3443, FINACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"close: its peer's FIN", IN(0, "172.20.0.11", POD_A, TCP, 3443, 41301, FINACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"close: a third flow", EG(0, POD_A, "172.20.0.11", TCP, 41302, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"close: its peer's RST", IN(0, "172.20.0.11", POD_A, TCP, 3443, 41302, RST),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"close: the first flow's ports reused: a SYN",
		 EG(0, POD_A, "172.20.0.11", TCP, 41300, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"close: a fourth flow, no close",
		 EG(0, POD_A, "172.20.0.11", TCP, 41303, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"close: its next segment", EG(0, POD_A, "172.20.0.11", TCP, 41303, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
	};
	/* fin_pod, fin_peer, rst of each flow, by its pod port 41300 + i: the first's FIN was
	 * cleared by the SYN of a new connection on its ports.
	 */
	static const __u8 want[4][3] = {{0, 0, 0}, {1, 1, 0}, {0, 0, 1}, {0, 0, 0}};
	struct rw_ct_key k = {.ifindex = ifindex_of[0], .peer_port = htons(3443), .proto = TCP};
	int fd, ok = 1;

	run_table(cases, sizeof(cases) / sizeof(cases[0]));
	inet_pton(AF_INET, POD_A, &k.pod_ip);
	inet_pton(AF_INET, "172.20.0.11", &k.peer_ip);
	fd = rw_conntrack_table_fd(&dp, ifindex_of[0]);
	if (fd < 0)
		FATAL("rwt0 has no conntrack table");
	t_count++;
	for (int i = 0; i < 4; i++) {
		struct rw_ct_value v;

		k.pod_port = htons(41300 + i);
		if (!CHECK(bpf_map_lookup_elem(fd, &k, &v) == 0, "close",
			   "flow %d is not in the table", 41300 + i)) {
			ok = 0;
			continue;
		}
		ok &= CHECK(
			v.fin_pod == want[i][0] && v.fin_peer == want[i][1] && v.rst == want[i][2],
			"close", "flow %d: fin_pod %u fin_peer %u rst %u, want %u %u %u", 41300 + i,
			v.fin_pod, v.fin_peer, v.rst, want[i][0], want[i][1], want[i][2]);
	}
	close(fd);
	printf("%s %d - conntrack close: a FIN each way and an RST are noted, a new SYN clears them\n",
	       ok ? "ok" : "not ok", t_count);
}

/* Flows of the veth's table, each checked to name the veth (-1: no table). */
static int own_flows(int ifindex)
{
	int fd = rw_conntrack_table_fd(&dp, ifindex), n = 0;
	struct rw_ct_key k, *prev = NULL;

	if (fd < 0)
		return -1;
	while (bpf_map_get_next_key(fd, prev, &k) == 0) {
		prev = &k;
		n += k.ifindex == (__u32)ifindex ? 1 : 1000; /* a foreign entry shows */
	}
	close(fd);
	return n;
}

/* The veth's index in rw_veth_slots (its slot, or the overflow index rw_veth_overflow names),
 * checked: the binding there is the veth's, the one rw_endpoints holds, and the table of
 * rw_ct_slots there is its IPv4 table (the same map as rw_conntrack's). -1 when not all of that
 * holds.
 */
static int index_of(int ifindex)
{
	__u32 key = ifindex, idx = RW_VETH_SLOT(key), zero = 0, id, in_slot, in_hash;
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	struct rw_endpoint ep;
	struct rw_veth v = {0};
	int fd;

	for (int tries = 0; tries < 2; tries++) {
		if (bpf_map_lookup_elem(dp.map_fd[RW_M_VETH_SLOTS], &idx, &id) == 0) {
			fd = bpf_map_get_fd_by_id(id);
			if (fd < 0 || bpf_map_lookup_elem(fd, &zero, &v))
				FATAL("reading index %u of rw_veth_slots", idx);
			close(fd);
			if (v.ifindex == key)
				break;
		}
		if (tries || bpf_map_lookup_elem(dp.map_fd[RW_M_VETH_OVERFLOW], &key, &idx))
			return -1;
	}
	if (v.ifindex != key || bpf_map_lookup_elem(dp.map_fd[RW_M_ENDPOINTS], &key, &ep) ||
	    memcmp(&ep, &v.ep, sizeof(ep)) ||
	    bpf_map_lookup_elem(dp.map_fd[RW_M_CT_SLOTS], &idx, &in_slot))
		return -1;
	fd = rw_conntrack_table_fd(&dp, ifindex);
	if (fd < 0)
		return -1;
	in_hash = bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
	close(fd);
	return in_slot == in_hash ? (int)idx : -1;
}

static int owns_slot(int ifindex)
{
	return index_of(ifindex) == (int)RW_VETH_SLOT((__u32)ifindex);
}

static int in_overflow(int ifindex)
{
	return index_of(ifindex) >= RW_VETH_SLOTS;
}

static int slot_empty(int ifindex)
{
	__u32 slot = RW_VETH_SLOT((__u32)ifindex), id;

	return bpf_map_lookup_elem(dp.map_fd[RW_M_VETH_SLOTS], &slot, &id) &&
	       bpf_map_lookup_elem(dp.map_fd[RW_M_CT_SLOTS], &slot, &id) &&
	       bpf_map_lookup_elem(dp.map_fd[RW_M_CT6_SLOTS], &slot, &id);
}

/* Two veths whose ifindexes are RW_VETH_SLOTS apart share a slot: the first bound owns it (its
 * binding in rw_veth_slots, its tables in rw_ct_slots), the second gets an overflow index for
 * both (rw_veth_overflow); each one's packets find their own binding and table, never the
 * other's. Each one's
 * flows go into its own table, both are allowed the same, and the slot passes on only when its
 * owner lets go of it (unbound, or its binding gone).
 */
void test_conntrack_slots(void)
{
	const int save0 = ifindex_of[0], save1 = ifindex_of[1];
	const int a = 200, b = 200 + RW_VETH_SLOTS;
	char cmd[128];
	int ok;

	snprintf(cmd, sizeof(cmd), "ip link add rwsa index %d type veth peer name rwsap", a);
	if (system(cmd))
		FATAL("%s failed", cmd);
	snprintf(cmd, sizeof(cmd), "ip link add rwsb index %d type veth peer name rwsbp", b);
	if (system(cmd))
		FATAL("%s failed", cmd);
	ifindex_of[0] = a;
	ifindex_of[1] = b;
	bind_veth(0, POD_A);
	bind_veth(1, POD_B);
	t_count++;
	ok = CHECK(owns_slot(a), "first", "rwsa (ifindex %d) does not own slot %d", a,
		   RW_VETH_SLOT(a));
	ok &= CHECK(in_overflow(b), "second", "rwsb (ifindex %d) is not at an overflow index (%d)",
		    b, index_of(b));
	ok &= CHECK_EQ(own_flows(b), 0, "rwsb has its own empty table");
	printf("%s %d - two veths %d apart: the first bound owns the slot, the second is at an "
	       "overflow index with its own table\n",
	       ok ? "ok" : "not ok", t_count, RW_VETH_SLOTS);
	{
		static const struct tcase cases[] = {
			{"slots: the owner's new flow",
			 EG(0, POD_A, "172.20.0.11", TCP, 41300, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
			{"slots: the other veth's new flow, the same ports",
			 EG(1, POD_B, "172.20.0.11", TCP, 41300, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-b77e")},
			{"slots: the other veth's next packet (its own table, at its index)",
			 EG(1, POD_B, "172.20.0.11", TCP, 41300, 3443, ACK),
			 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
			{"slots: the other veth's reply",
			 IN(1, "172.20.0.11", POD_B, TCP, 3443, 41300, ACK),
			 ALLOWED(RW_PATH_REPLY, 0, "run-b77e")},
			{"slots: the owner's reply",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41300, ACK),
			 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
			{"slots: the owner's next packet (the fast path)",
			 EG(0, POD_A, "172.20.0.11", TCP, 41300, 3443, ACK),
			 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
			{"slots: the other veth sending as the slot owner's pod: spoofed",
			 EG(1, POD_A, "172.20.0.11", TCP, 41300, 3443, ACK),
			 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-b77e")},
			{"slots: the owner sending as the other veth's pod: spoofed",
			 EG(0, POD_B, "172.20.0.11", TCP, 41300, 3443, ACK),
			 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
		};

		run_table(cases, sizeof(cases) / sizeof(cases[0]));
	}
	t_count++;
	ok = CHECK_EQ(own_flows(a), 1, "rwsa's flows, in its own table");
	ok &= CHECK_EQ(own_flows(b), 1, "rwsb's flows, in its own table");
	printf("%s %d - slots: each veth's flow is in its own table only\n", ok ? "ok" : "not ok",
	       t_count);

	/* The owner unbound: the slot is empty; the other veth bound again (its resync) keeps
	 * its index and its flow, and the next veth bound at the slot takes it.
	 */
	{
		struct rw_budget spent = {.tat = {~0ULL >> 1, ~0ULL >> 1, ~0ULL >> 1}};

		rw_budget_set(&dp, a, &spent); /* the owner's bucket, empty */
	}
	rw_endpoint_unbind(&dp, a);
	t_count++;
	ok = CHECK(slot_empty(a), "released", "the unbound owner's slot still holds a table");
	bind_veth(1, POD_B);
	ok &= CHECK(in_overflow(b), "kept", "rwsb left its overflow index (%d)", index_of(b));
	ok &= CHECK_EQ(own_flows(b), 1, "rwsb keeps its flow");
	bind_veth(0, POD_A);
	ok &= CHECK(owns_slot(a), "taken", "rwsa did not take the free slot (%d)", index_of(a));
	{
		struct rw_budget got = {.tat = {1}};

		ok &= CHECK(rw_budget_get(&dp, a, &got) == 0 && !got.tat[0] && !got.tat[1] &&
				    !got.tat[2],
			    "budget", "the slot's next veth did not start with a full bucket");
		got.tat[0] = 1;
		ok &= CHECK(rw_budget_get(&dp, b, &got) == 0 && !got.tat[0], "own budget",
			    "the overflow veth's bucket is not its own");
	}
	printf("%s %d - slots: an unbound owner frees the slot; the other veth keeps its index, "
	       "flows and bucket, the next one bound there takes the slot with a full bucket\n",
	       ok ? "ok" : "not ok", t_count);
	{
		static const struct tcase cases[] = {
			{"slots: the overflow veth's known flow, after the slot changed hands",
			 IN(1, "172.20.0.11", POD_B, TCP, 3443, 41300, ACK),
			 ALLOWED(RW_PATH_REPLY, 0, "run-b77e")},
		};

		run_table(cases, 1);
	}

	/* A slot whose owner's binding is gone from rw_endpoints (an agent stopped between the
	 * two) passes on; the overflow index is freed with its veth's unbind.
	 */
	rw_endpoint_unbind(&dp, b);
	t_count++;
	ok = CHECK_EQ(index_of(b), -1, "rwsb unbound has no index");
	{
		__u32 key = a, o;

		ok &= CHECK(bpf_map_lookup_elem(dp.map_fd[RW_M_VETH_OVERFLOW], &key, &o) != 0,
			    "no overflow", "rwsa, at its slot, has an overflow entry");
		key = b;
		ok &= CHECK(bpf_map_lookup_elem(dp.map_fd[RW_M_VETH_OVERFLOW], &key, &o) != 0,
			    "overflow freed", "rwsb's overflow entry outlived its unbind");
		key = a;
		bpf_map_delete_elem(dp.map_fd[RW_M_ENDPOINTS], &key);
	}
	bind_veth(1, POD_B);
	ok &= CHECK(owns_slot(b), "stale", "rwsb did not take the slot of a binding gone (%d)",
		    index_of(b));
	printf("%s %d - slots: an unbound veth's overflow index goes with it; a slot whose owner's "
	       "binding is gone passes to the next veth bound there\n",
	       ok ? "ok" : "not ok", t_count);

	rw_endpoint_unbind(&dp, a);
	rw_endpoint_unbind(&dp, b);
	ifindex_of[0] = save0;
	ifindex_of[1] = save1;
	if (system("ip link del rwsa") || system("ip link del rwsb"))
		FATAL("deleting the slot test's veths");
}
