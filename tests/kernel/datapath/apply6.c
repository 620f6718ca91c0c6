// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* apply6.c (test_datapath): the apply's IPv6 tables, read back from the live slot: rw_pods6
 * with the run's own rw_pod (the index and generation of its IPv4 pods), the IPv6 allow, deny
 * and inbound entries with their scopes and rule ids, a change to a run's IPv6 rule cutting that
 * run's cached verdicts (rw_run_revs) and no other's, an IPv6 pod moving between runs, and an
 * IPv6-only run found again in the maps by an agent that restarted.
 */
#include <jansson.h>

#include "dp_suite.h"

#define V6_POD_A  "2600:1f18:6::a"
#define V6_POD_B  "2600:1f18:6::b"
#define V4_POD_A6 "10.1.6.1"

/* run-6a's pods (dual-stack) and run-6b's (IPv6 only), as most snapshots here hold them. */
#define PODS_A "\"" V4_POD_A6 "\", \"" V6_POD_A "\""
#define PODS_B "\"" V6_POD_B "\", \"2600:1f18:6::c\""

/* The snapshot at `rev`: run-6a (an IPv4 and an IPv6 pod; IPv6 rules, the exact one to `exact`,
 * and its egress), run-6b (IPv6 pods only, an IPv4 rule), IPv6 services, inbound and deny.
 */
static char *snapshot6(unsigned long long rev, const char *exact, const char *egress_a,
		       const char *pods_a, const char *pods_b)
{
	char *s = malloc(4096);

	snprintf(
		s, 4096,
		"{\"revision\": %llu, \"deny\": [\"10.0.0.0/8\", \"fd00::/8\"],"
		" \"services\": [{\"name\": \"proxy6\", \"ip\": \"2600:1f18::10\", \"tcp\": [443]},"
		"  {\"name\": \"dns6\", \"cidr\": \"2600:1f18:53::/48\", \"udp\": [53]}],"
		" \"inbound\": [{\"name\": \"app6\", \"cidr\": \"fd12:3456:1::/48\", \"tcp\": [4096]}],"
		" \"runs\": [{\"id\": \"run-6a\", \"pods\": [%s], \"egress\": \"%s\","
		"   \"allow\": [{\"ip\": \"%s\", \"tcp\": [443]},"
		"    {\"cidr\": \"2a00:1450:1::/48\", \"udp\": [53, 123]}]},"
		"  {\"id\": \"run-6b\", \"pods\": [%s],"
		"   \"allow\": [{\"ip\": \"52.94.2.1\", \"tcp\": [80]}]}]}",
		rev, pods_a, egress_a, exact, pods_b);
	return s;
}

static struct applied series6;

static void apply6(const char *json, const char *what, struct rw_apply_result *res)
{
	char err[512];

	if (apply_over(&series6, json, what, res, err, sizeof(err)))
		FATAL("%s: rw_apply: %s", what, err);
}

static void v6(const char *text, __be32 out[4])
{
	if (inet_pton(AF_INET6, text, out) != 1)
		FATAL("%s is not an IPv6 address", text);
}

/* The value of `key` in the live slot's inner map of `table` (0), or -ENOENT. */
static int live_lookup(enum rw_map_id table, const void *key, void *val)
{
	int fd = rw_live_inner_fd(&dp, table), ret = 0;

	if (fd < 0)
		FATAL("live %s: %s", rw_map_names[table], strerror(-fd));
	if (bpf_map_lookup_elem(fd, key, val))
		ret = -errno;
	close(fd);
	return ret;
}

static int live_entries_fd(int fd)
{
	__u8 key[64], prev[64];
	int n = 0;

	while (bpf_map_get_next_key(fd, n ? prev : NULL, key) == 0) {
		memcpy(prev, key, sizeof(key));
		n++;
	}
	return n;
}

static int live_entries(enum rw_map_id table)
{
	int fd = rw_live_inner_fd(&dp, table), n;

	if (fd < 0)
		FATAL("live %s: %s", rw_map_names[table], strerror(-fd));
	n = live_entries_fd(fd);
	close(fd);
	return n;
}

static int pod6(const char *text, struct rw_pod *pod)
{
	__be32 a[4];

	v6(text, a);
	return live_lookup(RW_M_PODS6, a, pod);
}

static __u32 exact6_rule(__u32 scope, const char *daddr, __u16 port, __u8 proto)
{
	struct rw_allow6_key k = {.scope = scope, .dport = htons(port), .proto = proto};
	struct rw_rule r;

	v6(daddr, k.daddr);
	return live_lookup(RW_M_ALLOW_EXACT6, &k, &r) ? 0 : r.rule_id;
}

/* The rule an LPM lookup of one address finds (0: none). */
static __u32 cidr6_rule(__u32 scope, const char *daddr, __u16 port, __u8 proto)
{
	struct rw_allow6_lpm_key k = {.prefixlen = RW_ALLOW_LPM_FIXED_BITS + 128,
				      .scope = scope,
				      .dport = htons(port),
				      .proto = proto};
	struct rw_rule r;

	v6(daddr, k.daddr);
	return live_lookup(RW_M_ALLOW_CIDR6, &k, &r) ? 0 : r.rule_id;
}

/* Flows in a veth's IPv6 conntrack table (-1: it has none). */
static int ct6_flows(int dev)
{
	int fd = rw_conntrack6_table_fd(&dp, ifindex_of[dev]), n;

	if (fd < 0)
		return -1;
	n = live_entries_fd(fd);
	close(fd);
	return n;
}

/* A flow of the pod's, as the datapath would have left it. */
static void ct6_put(int dev, const char *pod, const char *peer)
{
	struct rw_ct6_key k = {.ifindex = ifindex_of[dev],
			       .pod_port = htons(40000),
			       .peer_port = htons(443),
			       .proto = TCP};
	struct rw_ct_value v = {.opened_by = RW_DIR_EGRESS};
	int fd = rw_conntrack6_table_fd(&dp, ifindex_of[dev]);

	v6(pod, k.pod_ip);
	v6(peer, k.peer_ip);
	if (fd < 0 || bpf_map_update_elem(fd, &k, &v, BPF_ANY))
		FATAL("%s's IPv6 conntrack table: %s", devs[dev], strerror(fd < 0 ? -fd : errno));
	close(fd);
}

static __u64 run_rev(__u32 idx)
{
	__u64 v = 0;

	bpf_map_lookup_elem(dp.map_fd[RW_M_RUN_REVS], &idx, &v);
	return v;
}

void test_apply6(void)
{
	struct rw_pod a4 = {}, a6 = {}, b6 = {}, b6b = {};
	struct rw_apply_result res;
	unsigned long long rev;
	__u32 v, ia, ib;
	__be32 ip4;
	char *json;
	int ok;

	rev = revision_now() + 1;

	/* 1. Every IPv6 table, read back; applied twice, so that both slots hold it. */
	for (int i = 0; i < 2; i++) {
		json = snapshot6(rev + i, "2a00:1450::1", "allowlist", PODS_A, PODS_B);
		apply6(json, "dual-stack snapshot", &res);
		free(json);
	}
	rev++;
	t_count++;
	inet_pton(AF_INET, V4_POD_A6, &ip4);
	ok = CHECK(rw_live_pod(&dp, ip4, &a4) == 0, "run-6a's IPv4 pod", "not in rw_pods");
	ok &= CHECK(pod6(V6_POD_A, &a6) == 0, "run-6a's IPv6 pod", "not in rw_pods6");
	ok &= CHECK(pod6(V6_POD_B, &b6) == 0, "run-6b's IPv6 pod", "not in rw_pods6");
	ok &= CHECK(!memcmp(&a4, &a6, sizeof(a4)), "one run, one rw_pod",
		    "IPv4 idx %u gen %u, IPv6 idx %u gen %u", a4.run_idx, a4.run_gen, a6.run_idx,
		    a6.run_gen);
	ok &= CHECK(!strcmp(b6.run_id, "run-6b") && b6.run_idx && b6.run_idx != a6.run_idx,
		    "run-6b's own index", "run %s idx %u (run-6a's %u)", b6.run_id, b6.run_idx,
		    a6.run_idx);
	ok &= CHECK_EQ(live_entries(RW_M_PODS6), 3, "rw_pods6 entries");
	ok &= CHECK_EQ(live_entries(RW_M_PODS), 1, "rw_pods entries");
	ok &= CHECK_EQ(res.pods, 4, "pods of both families");
	ia = a6.run_idx;
	ib = b6.run_idx;
	ok &= CHECK_EQ(exact6_rule(0, "2600:1f18::10", 443, TCP),
		       RW_RULE_ID(RW_RULE_KIND_SERVICE, 0, 0), "service proxy6 (scope 0)");
	ok &= CHECK_EQ(exact6_rule(ia, "2600:1f18::10", 443, TCP), 0, "no service under a run");
	ok &= CHECK_EQ(cidr6_rule(0, "2600:1f18:53:1::5", 53, UDP),
		       RW_RULE_ID(RW_RULE_KIND_SERVICE, 1, 0), "service dns6 (a /48)");
	ok &= CHECK_EQ(exact6_rule(ia, "2a00:1450::1", 443, TCP),
		       RW_RULE_ID(RW_RULE_KIND_RUN, 0, 0), "run-6a's exact rule (its index)");
	ok &= CHECK_EQ(exact6_rule(ib, "2a00:1450::1", 443, TCP), 0, "not run-6b's");
	ok &= CHECK_EQ(cidr6_rule(ia, "2a00:1450:1:2::3", 123, UDP),
		       RW_RULE_ID(RW_RULE_KIND_RUN, 0, 1), "run-6a's /48, udp 123");
	ok &= CHECK_EQ(cidr6_rule(ia, "2a00:1450:2::3", 123, UDP), 0, "outside run-6a's /48");
	ok &= CHECK_EQ(live_entries(RW_M_ALLOW_EXACT6), 2, "rw_allow_exact6 entries");
	ok &= CHECK_EQ(live_entries(RW_M_ALLOW_CIDR6), 3, "rw_allow_cidr6 entries");
	ok &= CHECK_EQ(live_entries(RW_M_ALLOW_EXACT), 1, "rw_allow_exact entries (run-6b)");
	{
		struct rw_cidr6_lpm_key d = {.prefixlen = 128};
		struct rw_inbound6_lpm_key in = {.prefixlen = RW_INBOUND_LPM_FIXED_BITS + 128,
						 .dport = htons(4096),
						 .proto = TCP};
		struct rw_rule r = {};

		v6("fd99::1", d.addr);
		ok &= CHECK(live_lookup(RW_M_DENY6, &d, &v) == 0 && v == 1, "deny fd00::/8",
			    "fd99::1 not denied");
		v6("2600::1", d.addr);
		ok &= CHECK(live_lookup(RW_M_DENY6, &d, &v) == -ENOENT, "deny6 is fd00::/8 only",
			    "2600::1 denied");
		ok &= CHECK_EQ(live_entries(RW_M_DENY6), 1, "rw_deny6 entries");
		ok &= CHECK_EQ(live_entries(RW_M_DENY), 1, "rw_deny entries");
		v6("fd12:3456:1:9::9", in.saddr);
		ok &= CHECK(live_lookup(RW_M_INBOUND6, &in, &r) == 0 &&
				    r.rule_id == RW_RULE_ID(RW_RULE_KIND_INBOUND, 0, 0),
			    "inbound app6", "rule %#x", r.rule_id);
		ok &= CHECK_EQ(live_entries(RW_M_INBOUND6), 1, "rw_inbound6 entries");
	}
	printf("%s %d - apply6: IPv6 pods, services, run rules, deny and inbound read back "
	       "(run-6a idx %u, run-6b idx %u, %u entries)\n",
	       ok ? "ok" : "not ok", t_count, ia, ib, res.entries);

	/* 2. A change to run-6a's IPv6 rule alone: written by diff, run-6a's verdicts cut, run-6b's
	 * kept.
	 */
	{
		__u64 b_before = run_rev(ib);

		json = snapshot6(rev + 1, "2a00:1450::2", "allowlist", PODS_A, PODS_B);
		apply6(json, "run-6a's IPv6 rule changed", &res);
		free(json);
		t_count++;
		ok = CHECK_EQ(res.full, 0, "written by diff");
		/* the old key deleted, the new one written, the run's two pods rewritten (its new
		 * generation)
		 */
		ok &= CHECK_EQ(res.written, 4, "writes");
		ok &= CHECK_EQ(exact6_rule(ia, "2a00:1450::1", 443, TCP), 0, "the old rule gone");
		ok &= CHECK_EQ(exact6_rule(ia, "2a00:1450::2", 443, TCP),
			       RW_RULE_ID(RW_RULE_KIND_RUN, 0, 0), "the new rule");
		ok &= CHECK_EQ(run_rev(ia), rev + 1, "rw_run_revs[run-6a] moved");
		ok &= CHECK_EQ(run_rev(ib), b_before, "rw_run_revs[run-6b] kept");
		ok &= CHECK(pod6(V6_POD_A, &a6) == 0 && a6.run_gen == rev + 1,
			    "run-6a's new generation on its IPv6 pod", "gen %u", a6.run_gen);
		ok &= CHECK(rw_live_pod(&dp, ip4, &a4) == 0 && !memcmp(&a4, &a6, sizeof(a4)),
			    "and on its IPv4 pod", "gen %u", a4.run_gen);
		printf("%s %d - apply6: an IPv6 rule's change cuts its run only (run_revs %llu and "
		       "%llu), %u writes\n",
		       ok ? "ok" : "not ok", t_count, (unsigned long long)run_rev(ia),
		       (unsigned long long)run_rev(ib), res.written);
	}

	/* 2b. The same through one run's change (PolicyWatch's run-upsert): run-6a's IPv6 rule
	 * changed in the policy in force, the others shared with it.
	 */
	{
		const char *msg = "{\"id\": \"run-6a\", \"pods\": [\"" V4_POD_A6 "\", \"" V6_POD_A
				  "\"], \"allow\": [{\"ip\": \"2a00:1450::3\", \"tcp\": [443]}, "
				  "{\"cidr\": \"2a00:1450:1::/48\", \"udp\": [53, 123]}]}";
		struct rw_policy_index ix = {0};
		struct rw_policy_change chg;
		struct rw_policy_error perr;
		__u64 b_before = run_rev(ib);
		json_t *run = json_loads(msg, 0, NULL);
		char err[512];

		if (!run || rw_policy_index_build(&ix, &series6.last) ||
		    rw_policy_change_upsert(&series6.last, &ix, rev + 2, run, "apply6", &chg,
					    &perr))
			FATAL("run-6a's change: %s", perr.text);
		t_count++;
		ok = CHECK(rw_apply(&dp, &series6.last, &chg.next, &res, err, sizeof(err)) == 0,
			   "the change applied", "%s", err);
		rw_policy_change_commit(&series6.last, &ix, &chg);
		ok &= CHECK_EQ(exact6_rule(ia, "2a00:1450::2", 443, TCP), 0, "the old rule gone");
		ok &= CHECK_EQ(exact6_rule(ia, "2a00:1450::3", 443, TCP),
			       RW_RULE_ID(RW_RULE_KIND_RUN, 0, 0), "the changed rule");
		ok &= CHECK_EQ(run_rev(ia), rev + 2, "rw_run_revs[run-6a] moved");
		ok &= CHECK_EQ(run_rev(ib), b_before, "rw_run_revs[run-6b] kept");
		printf("%s %d - apply6: a run change to an IPv6 rule cuts its run only (run_revs "
		       "%llu and %llu)\n",
		       ok ? "ok" : "not ok", t_count, (unsigned long long)run_rev(ia),
		       (unsigned long long)run_rev(ib));
		rw_policy_index_free(&ix);
		json_decref(run);
	}

	/* 3. An agent that restarted knows nothing of the slots: the IPv6-only run-6b is found in
	 * rw_pods6 and keeps its index and generation; the slot is rewritten in full.
	 */
	rw_apply_forget(&dp);
	json = snapshot6(rev + 3, "2a00:1450::2", "allowlist", PODS_A, PODS_B);
	apply6(json, "after a restart", &res);
	free(json);
	t_count++;
	ok = CHECK_EQ(res.full, 1, "written in full");
	ok &= CHECK(pod6(V6_POD_B, &b6b) == 0, "run-6b's IPv6 pod", "gone");
	ok &= CHECK_EQ(b6b.run_idx, ib, "run-6b keeps its index");
	ok &= CHECK_EQ(b6b.run_gen, b6.run_gen, "run-6b keeps its generation");
	ok &= CHECK_EQ(live_entries(RW_M_PODS6), 3, "rw_pods6 entries");
	ok &= CHECK_EQ(live_entries(RW_M_ALLOW_EXACT6), 2, "rw_allow_exact6 entries");
	ok &= CHECK_EQ(live_entries(RW_M_ALLOW_CIDR6), 3, "rw_allow_cidr6 entries");
	printf("%s %d - apply6: a restarted agent finds the IPv6-only run (idx %u gen %u)\n",
	       ok ? "ok" : "not ok", t_count, b6b.run_idx, b6b.run_gen);

	/* 4. An IPv6 pod moves to run-6a, whose egress changes: each IPv6 pod gets the value of
	 * its run now, and the flows of the moved pod's veth (bound by its IPv6 address only) are
	 * forgotten, while run-6b's other pod, which stays, keeps its own.
	 */
	{
		struct rw_endpoint moved = {.flags = RW_EP_IP6}, stays = {.flags = RW_EP_IP6};

		v6("2600:1f18:6::c", moved.pod_ip6);
		v6(V6_POD_B, stays.pod_ip6);
		if (rw_endpoint_bind_addrs(&dp, ifindex_of[2], &moved) ||
		    rw_endpoint_bind_addrs(&dp, ifindex_of[3], &stays))
			FATAL("binding rwt2 and rwt3 to IPv6 pods");
		ct6_put(2, "2600:1f18:6::c", "2a00:1450::2");
		ct6_put(3, V6_POD_B, "2a00:1450::2");
	}
	json = snapshot6(rev + 4, "2a00:1450::2", "open",
			 "\"" V4_POD_A6 "\", \"" V6_POD_A "\", \"2600:1f18:6::c\"",
			 "\"" V6_POD_B "\"");
	apply6(json, "an IPv6 pod moved", &res);
	free(json);
	t_count++;
	ok = CHECK(rw_live_pod(&dp, ip4, &a4) == 0 && a4.egress_mode == RW_EGRESS_OPEN,
		   "run-6a open", "egress %u", a4.egress_mode);
	ok &= CHECK(pod6(V6_POD_A, &a6) == 0 && !memcmp(&a4, &a6, sizeof(a4)),
		    "run-6a's IPv6 pod follows its run", "egress %u gen %u", a6.egress_mode,
		    a6.run_gen);
	ok &= CHECK(pod6("2600:1f18:6::c", &b6) == 0 && !memcmp(&a4, &b6, sizeof(a4)),
		    "the moved pod is run-6a's", "run %s idx %u", b6.run_id, b6.run_idx);
	ok &= CHECK(pod6(V6_POD_B, &b6b) == 0 && b6b.run_idx == ib && !strcmp(b6b.run_id, "run-6b"),
		    "run-6b keeps its other pod", "run %s", b6b.run_id);
	ok &= CHECK_EQ(live_entries(RW_M_PODS6), 3, "rw_pods6 entries");
	ok &= CHECK_EQ(res.flows_flushed, 1, "one veth's tables flushed");
	ok &= CHECK_EQ(ct6_flows(2), 0, "the moved pod's IPv6 flows forgotten");
	ok &= CHECK_EQ(ct6_flows(3), 1, "the other pod's IPv6 flow kept");
	printf("%s %d - apply6: an IPv6 pod moved between runs, its veth's flows forgotten, %u "
	       "writes\n",
	       ok ? "ok" : "not ok", t_count, res.written);
	/* rwt2 and rwt3 as the suite bound them: to nothing, and to POD_X. */
	rw_endpoint_unbind(&dp, ifindex_of[2]);
	bind_veth(3, POD_X);
	applied_end(&series6);
}
