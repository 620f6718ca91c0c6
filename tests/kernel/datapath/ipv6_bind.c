// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ipv6_bind.c (test_datapath): a dual-stack binding and the veth's two conntrack tables: made
 * with the binding, kept for the same pod, fresh for a changed one, flushed, expired, counted
 * against ct_node together, and deleted with the binding.
 */
#include "dp_suite.h"

#define BIND_POD4 "10.1.2.9" /* rwt3's POD_X, bound again as it was at the end */
#define BIND_POD6 "2600:1f14:abc:1::9"
#define BIND_GW6  "fe80::1"

static struct rw_endpoint dual(const char *ip6)
{
	struct rw_endpoint ep = {.flags = RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6};

	inet_pton(AF_INET, BIND_POD4, &ep.pod_ip);
	inet_pton(AF_INET6, ip6, ep.pod_ip6);
	inet_pton(AF_INET6, BIND_GW6, ep.gw_ip6);
	return ep;
}

/* The number of flows in a veth's table of one family: -1 when it has none. */
static int flows_in(int dev, int ipv6)
{
	int fd = ipv6 ? rw_conntrack6_table_fd(&dp, ifindex_of[dev])
		      : rw_conntrack_table_fd(&dp, ifindex_of[dev]);
	__u8 key[sizeof(struct rw_ct6_key)], *prev = NULL;
	int n = 0;

	if (fd < 0)
		return -1;
	while (bpf_map_get_next_key(fd, prev, key) == 0) {
		prev = key;
		n++;
	}
	close(fd);
	return n;
}

/* A flow put straight into the veth's table (idle since seen_ns, not active). */
static void put_flow(int dev, int ipv6, __u16 port, __u64 seen_ns)
{
	struct rw_ct_value v = {.created_ns = seen_ns, .seen_ns = seen_ns, .opened_by = E};
	int fd = ipv6 ? rw_conntrack6_table_fd(&dp, ifindex_of[dev])
		      : rw_conntrack_table_fd(&dp, ifindex_of[dev]);
	int err;

	if (fd < 0)
		FATAL("%s has no IPv%d table", devs[dev], ipv6 ? 6 : 4);
	if (ipv6) {
		struct rw_ct6_key k = {.ifindex = ifindex_of[dev], .proto = UDP};

		inet_pton(AF_INET6, BIND_POD6, k.pod_ip);
		inet_pton(AF_INET6, "2606:4700::1111", k.peer_ip);
		k.pod_port = htons(port);
		k.peer_port = htons(443);
		err = bpf_map_update_elem(fd, &k, &v, BPF_ANY);
	} else {
		struct rw_ct_key k = {.ifindex = ifindex_of[dev], .proto = UDP};

		inet_pton(AF_INET, BIND_POD4, &k.pod_ip);
		inet_pton(AF_INET, "1.1.1.1", &k.peer_ip);
		k.pod_port = htons(port);
		k.peer_port = htons(443);
		err = bpf_map_update_elem(fd, &k, &v, BPF_ANY);
	}
	close(fd);
	if (err)
		FATAL("putting a flow in %s's IPv%d table: %s", devs[dev], ipv6 ? 6 : 4,
		      strerror(errno));
}

/* The room the node's tables take now, both families. */
static __u64 tables_room(void)
{
	__u64 room = 0;

	for (int ipv6 = 0; ipv6 < 2; ipv6++) {
		int outer = dp.map_fd[ipv6 ? RW_M_CONNTRACK6 : RW_M_CONNTRACK];
		__u32 key, *prev = NULL;

		while (bpf_map_get_next_key(outer, prev, &key) == 0) {
			struct bpf_map_info info = {};
			__u32 len = sizeof(info), id;
			int fd;

			prev = &key;
			if (bpf_map_lookup_elem(outer, &key, &id))
				continue;
			fd = bpf_map_get_fd_by_id(id);
			if (fd < 0)
				continue;
			if (!bpf_obj_get_info_by_fd(fd, &info, &len))
				room += info.max_entries;
			close(fd);
		}
	}
	return room;
}

/* The id of the map that holds the veth's binding at its index (its slot: no other veth of the
 * suite collides with it), of the table of one family there (ipv6 0 or 1); 0 for none.
 */
static __u32 at_index(int dev, int map)
{
	__u32 idx = RW_VETH_SLOT(ifindex_of[dev]), id = 0;

	return bpf_map_lookup_elem(dp.map_fd[map], &idx, &id) ? 0 : id;
}

static void set_ct_node(__u32 ct_node)
{
	struct rw_config cfg = config_get();

	cfg.ct_node = ct_node;
	config_put(&cfg);
}

void test_ipv6_binding(void)
{
	struct rw_endpoint want = dual(BIND_POD6), got, none = {.pod_ip = 1};
	struct rw_config cfg;
	__u32 cursor = 0;
	int ok, expired = 0;

	rw_endpoint_unbind(&dp, ifindex_of[3]);
	t_count++;
	ok = CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), 0, "dual-stack bind");
	ok &= CHECK_EQ(rw_endpoint_get(&dp, ifindex_of[3], &got), 0, "rw_endpoint_get");
	ok &= CHECK(!memcmp(&got, &want, sizeof(got)), "binding",
		    "the binding read back is not the one bound (flags %#x)", got.flags);
	ok &= CHECK_EQ(flows_in(3, 0), 0, "the IPv4 table, empty");
	ok &= CHECK_EQ(flows_in(3, 1), 0, "the IPv6 table, empty");
	{
		int fd = rw_conntrack6_table_fd(&dp, ifindex_of[3]);
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);

		rw_config_read(&dp, &cfg);
		ok &= CHECK(fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len), "IPv6 table",
			    "no IPv6 table: %s", strerror(-fd));
		ok &= CHECK_EQ(info.key_size, sizeof(struct rw_ct6_key), "IPv6 table key size");
		ok &= CHECK_EQ(info.max_entries, cfg.ct_per_sandbox, "IPv6 table size");
		if (fd >= 0)
			close(fd);
	}
	printf("%s %d - a dual-stack bind makes the veth's IPv4 and IPv6 tables, read back by "
	       "rw_endpoint_get\n",
	       ok ? "ok" : "not ok", t_count);

	t_count++;
	put_flow(3, 0, 41000, 1);
	put_flow(3, 1, 41000, 1);
	{
		__u32 binding = at_index(3, RW_M_VETH_SLOTS), table6 = at_index(3, RW_M_CT6_SLOTS);
		__u32 idx = RW_VETH_SLOT(ifindex_of[3]);

		ok = CHECK(binding && table6, "in place", "no binding or IPv6 table at the index");
		ok &= CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), 0,
			       "the same pod again");
		ok &= CHECK_EQ(
			at_index(3, RW_M_VETH_SLOTS), binding,
			"the same binding again writes none (the map at the index is the same)");
		/* The IPv6 table gone from the index (an interrupted bind): written again. */
		bpf_map_delete_elem(dp.map_fd[RW_M_CT6_SLOTS], &idx);
		ok &= CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), 0,
			       "the same pod, its IPv6 table missing at its index");
		ok &= CHECK_EQ(at_index(3, RW_M_CT6_SLOTS), table6,
			       "the IPv6 table back at the index");
		ok &= CHECK(at_index(3, RW_M_VETH_SLOTS) != binding, "binding rewritten",
			    "a bind that wrote a table did not publish the binding after it");
	}
	ok &= CHECK_EQ(flows_in(3, 0), 1, "the same pod keeps its IPv4 flow");
	ok &= CHECK_EQ(flows_in(3, 1), 1, "the same pod keeps its IPv6 flow");
	want = dual("2600:1f14:abc:1::10");
	ok &= CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), 0, "a new IPv6 address");
	ok &= CHECK_EQ(flows_in(3, 0), 0, "a changed pod: a fresh IPv4 table");
	ok &= CHECK_EQ(flows_in(3, 1), 0, "a changed pod: a fresh IPv6 table");
	printf("%s %d - the same pod bound again keeps both tables' flows, and writes nothing when "
	       "all is in place (a table missing at the index is put back); a changed IPv6 address "
	       "is a new pod, with both tables fresh\n",
	       ok ? "ok" : "not ok", t_count);

	/* IPv4 only, then the IPv6 added: the IPv4 flows stay, the IPv6 table is made. */
	t_count++;
	bind_veth(3, BIND_POD4);
	ok = CHECK_EQ(flows_in(3, 1), -1, "an IPv4-only veth has no IPv6 table");
	ok &= CHECK_EQ(rw_endpoint_get(&dp, ifindex_of[3], &got), 0, "rw_endpoint_get");
	ok &= CHECK_EQ(got.flags, RW_EP_IP4, "rw_endpoint_bind binds IPv4 only");
	put_flow(3, 0, 41001, 1);
	want = dual(BIND_POD6);
	ok &= CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), 0, "IPv6 added");
	ok &= CHECK_EQ(flows_in(3, 0), 1, "the IPv4 flow of the same pod stays");
	ok &= CHECK_EQ(flows_in(3, 1), 0, "the new family's table");
	ok &= CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &none), -EINVAL,
		       "a binding of no address");
	ok &= CHECK_EQ(flows_in(3, 0), 1, "a refused binding changes nothing");
	printf("%s %d - a family added to a binding gets its table and keeps the other's flows; a "
	       "binding of no address is refused\n",
	       ok ? "ok" : "not ok", t_count);

	t_count++;
	put_flow(3, 1, 41002, 1);
	ok = CHECK_EQ(rw_conntrack_flush(&dp, ifindex_of[3], 0), 2, "flush: tables replaced");
	ok &= CHECK_EQ(flows_in(3, 0), 0, "flushed: IPv4");
	ok &= CHECK_EQ(flows_in(3, 1), 0, "flushed: IPv6");
	put_flow(3, 0, 41003, 1);
	put_flow(3, 1, 41003, 1);
	ok &= CHECK_EQ(rw_conntrack_flush(&dp, 0, want.pod_ip), 2, "flush by the pod's IPv4");
	ok &= CHECK_EQ(flows_in(3, 1), 0, "flushed by the pod's IPv4: IPv6 too");
	/* Idle since 1 ns after boot: a pass at a time past the UDP idle limit forgets both. */
	put_flow(3, 0, 41004, 1);
	put_flow(3, 1, 41004, 1);
	for (int pass = 0; pass < 4 && (pass == 0 || cursor); pass++)
		expired +=
			rw_conntrack_expire(&dp, mono_ns() + 3600ULL * 1000000000ULL, &cursor, 1);
	cursor = 0;
	expired += rw_conntrack_expire(&dp, mono_ns() + 3600ULL * 1000000000ULL, &cursor, 1 << 20);
	ok &= CHECK(expired >= 2, "expire", "%d flows expired, 2 or more expected", expired);
	ok &= CHECK_EQ(flows_in(3, 0), 0, "expired: IPv4");
	ok &= CHECK_EQ(flows_in(3, 1), 0, "expired: IPv6");
	printf("%s %d - flush (by veth, by pod) and expiry cover both tables\n",
	       ok ? "ok" : "not ok", t_count);

	/* ct_node counts both: room for one more table is not room for a dual-stack pod. */
	t_count++;
	rw_endpoint_unbind(&dp, ifindex_of[3]);
	ok = CHECK_EQ(flows_in(3, 0), -1, "unbind deletes the IPv4 table");
	ok &= CHECK_EQ(flows_in(3, 1), -1, "unbind deletes the IPv6 table");
	rw_config_read(&dp, &cfg);
	set_ct_node(tables_room() + cfg.ct_per_sandbox);
	ok &= CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), -ENOSPC,
		       "a dual-stack pod where one table fits");
	ok &= CHECK_EQ(rw_endpoint_get(&dp, ifindex_of[3], &got), -ENOENT, "not bound");
	ok &= CHECK_EQ(flows_in(3, 0), -1, "no IPv4 table left behind");
	ok &= CHECK_EQ(flows_in(3, 1), -1, "no IPv6 table left behind");
	set_ct_node(cfg.ct_node);
	printf("%s %d - ct_node counts a veth's two tables: where one fits, a dual-stack bind is "
	       "-ENOSPC and leaves nothing\n",
	       ok ? "ok" : "not ok", t_count);

	/* An unbind stopped after its first step (the binding gone from its index, its tables
	 * still there), then the veth bound again to IPv4 only: the old pod's IPv6 table is no
	 * longer at the index, and one planted there is never read (no family, no table).
	 */
	want = dual(BIND_POD6);
	ok = CHECK_EQ(rw_endpoint_bind_addrs(&dp, ifindex_of[3], &want), 0, "dual-stack bind");
	{
		__u32 slot = RW_VETH_SLOT((__u32)ifindex_of[3]), id;
		int planted;

		bpf_map_delete_elem(dp.map_fd[RW_M_VETH_SLOTS], &slot);
		rw_endpoint_unbind(&dp, ifindex_of[3]);
		ok &= CHECK(bpf_map_lookup_elem(dp.map_fd[RW_M_CT6_SLOTS], &slot, &id) == 0, "left",
			    "the case needs the IPv6 table left at the index");
		bind_veth(3, BIND_POD4);
		ok &= CHECK(bpf_map_lookup_elem(dp.map_fd[RW_M_CT6_SLOTS], &slot, &id) != 0,
			    "emptied",
			    "the IPv4-only binding's index holds the old pod's IPv6 table");

		/* A table at the index with the old pod's flow, its verdict current. */
		planted = bpf_map_create(
			BPF_MAP_TYPE_HASH, "rwct6_planted", sizeof(struct rw_ct6_key),
			sizeof(struct rw_ct_value), 16,
			&(struct bpf_map_create_opts){.sz = sizeof(struct bpf_map_create_opts),
						      .map_flags = BPF_F_NO_PREALLOC});
		if (planted < 0 || rw_config_read(&dp, &cfg))
			FATAL("planting a table: %s", strerror(errno));
		{
			struct rw_ct6_key k = {.ifindex = ifindex_of[3], .proto = UDP};
			struct rw_ct_value v = {.opened_by = E,
						.stamp = RW_STATE_REVISION(cfg.state),
						.path = RW_PATH_OPEN};

			inet_pton(AF_INET6, BIND_POD6, k.pod_ip);
			inet_pton(AF_INET6, "2606:4700::1111", k.peer_ip);
			k.pod_port = htons(41500);
			k.peer_port = htons(443);
			if (bpf_map_update_elem(planted, &k, &v, BPF_ANY) ||
			    bpf_map_update_elem(dp.map_fd[RW_M_CT6_SLOTS], &slot, &planted,
						BPF_ANY))
				FATAL("planting a table: %s", strerror(errno));
			close(planted);
		}
		{
			struct tcase c = {
				"a planted IPv6 table at an IPv4-only veth's index is not read",
				.dev = 3, .dir = E,
				.pkt = {.ipv6 = 1,
					FLOW(BIND_POD6, "2606:4700::1111", UDP, 41500, 443)},
				DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)};

			run_case(&c);
		}
		bpf_map_delete_elem(dp.map_fd[RW_M_CT6_SLOTS], &slot);
	}
	t_count++;
	printf("%s %d - an unbind stopped half-way: the next IPv4-only bind there empties the "
	       "index of the old pod's IPv6 table\n",
	       ok ? "ok" : "not ok", t_count);
	bind_veth(3, BIND_POD4);
}
