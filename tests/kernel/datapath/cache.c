// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cache.c (test_datapath): the verdict cache of known flows (the fast path): stamps, stale stamps, and per-run
 * revisions, which re-judge only the flows of the runs an apply changes.
 */
#include "dp_suite.h"

/* The fast path: a known flow's verdict is cached in its entry, stamped with the revision, and
 * reused without a policy lookup: with its rule taken out of the live map behind the
 * datapath's back (no apply, same revision), the flow still passes both ways, with its rule and
 * path, and counted exactly (run_case checks the counters), and so does a SYN on its ports the
 * way it was opened; a SYN the other way, a new flow to the same service, are judged and
 * refused. The rule is put back after. (After the next apply the cached flows are
 * judged again: the v2 table's "revoked" cases run on flows cached here.)
 */
void test_verdict_cache(void)
{
	static const struct tcase opening[] = {
		{"cache: a flow to the identity broker opens",
		 EG(0, POD_A, "172.20.0.11", TCP, 40110, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	};
	static const struct tcase cached[] = {
		{"cache: with its rule gone from the live map, the flow's next packet is allowed from its cached verdict",
		 EG(0, POD_A, "172.20.0.11", TCP, 40110, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"cache: and its reply, as a reply",
		 IN(0, "172.20.0.11", POD_A, TCP, 3443, 40110, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"cache: a SYN on the flow's ports, the way it was opened (a client reusing them), is allowed from its cached verdict",
		 EG(0, POD_A, "172.20.0.11", TCP, 40110, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"cache: a SYN into the pod on the same ports is the peer's new connection, judged: refused",
		 IN(0, "172.20.0.11", POD_A, TCP, 3443, 40110, SYN),
		 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
		{"cache: a new flow to the same service is judged: refused",
		 EG(0, POD_A, "172.20.0.11", TCP, 40111, 3443, SYN),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
		{"cache: a bare ACK of an unknown flow to it is judged: refused",
		 EG(0, POD_A, "172.20.0.11", TCP, 40112, 3443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	};
	struct rw_ct_value v;
	int ok;

	run_table(opening, 1);
	t_count++;
	ok = CHECK(ct_entry(0, POD_A, 40110, "172.20.0.11", 3443, TCP, &v) == 0, "entry",
		   "the flow has no conntrack entry");
	ok &= CHECK_EQ(v.stamp, revision_now(), "stamp: the revision in force");
	ok &= CHECK_EQ(v.path, RW_PATH_RULE, "cached path");
	ok &= CHECK(v.rule_id == RW_RULE_ID(RW_RULE_KIND_SERVICE, 1, 0), "cached rule", "%#x",
		    v.rule_id);
	printf("%s %d - cache: a new flow's entry carries its verdict, stamped with revision %llu\n",
	       ok ? "ok" : "not ok", t_count, (unsigned long long)v.stamp);

	service_rule(1, "172.20.0.11", 3443, "identity broker");
	run_table(cached, sizeof(cached) / sizeof(cached[0]));
	service_rule(0, "172.20.0.11", 3443, "identity broker");
}

/* A stamp that is not the revision in force (an entry left by an earlier agent's policy, or by
 * a newer one rolled back) is never trusted: the flow is judged in full, in both directions.
 */
void test_stale_stamp(void)
{
	static const struct tcase cases[] = {
		{"stale stamp (older revision), allowed verdict: judged again, refused",
		 EG(0, POD_A, "172.20.0.10", TCP, 40120, 443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
		{"stale stamp (newer revision), allowed verdict: judged again, refused",
		 IN(0, "172.20.0.10", POD_A, TCP, 443, 40121, ACK),
		 REVOKED(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	};
	__u64 rev = revision_now();

	for (int i = 0; i < 2; i++) {
		struct rw_ct_value v = {.opened_by = E,
					.path = RW_PATH_RULE,
					.rule_id = RW_RULE_ID(RW_RULE_KIND_SERVICE, 0, 0),
					.stamp = i ? rev + 1 : rev - 1};

		ct_put(0, POD_A, 40120 + i, "172.20.0.10", 443, TCP, &v);
	}
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
}

/* ---- per-run revisions: an apply re-judges the flows of the runs it changes, only ---- */

/* Policy v2's shape at `revision`: one service (the identity broker), run-7f3a (POD_A, no
 * rules) first, then `b_id` (POD_B; none when NULL) with the allow list `b_allow`, one more
 * deny CIDR when `deny_more`, and from revision 104 on run-fill (POD_X) last.
 */
static char *gen_policy(unsigned int revision, const char *b_id, const char *b_allow, int deny_more)
{
	char *out = malloc(2048), b[512] = "";
	const char *fill =
		revision >= 104 ? ",\n    {\"id\": \"run-fill\", \"pods\": [\"" POD_X "\"]}" : "";

	if (b_id)
		snprintf(b, sizeof(b),
			 ",\n    {\"id\": \"%s\", \"pods\": [\"" POD_B "\"], \"allow\": [%s]}",
			 b_id, b_allow);
	snprintf(out, 2048,
		 "{\n  \"revision\": %u,\n"
		 "  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"%s],\n"
		 "  \"services\": [{\"name\": \"identity-broker\", \"ip\": \"172.20.0.11\", "
		 "\"tcp\": [3443]}],\n"
		 "  \"inbound\": [{\"name\": \"temporal-worker\", \"cidr\": \"172.20.0.20/32\", "
		 "\"tcp\": [4999]}],\n"
		 "  \"runs\": [\n    {\"id\": \"run-7f3a\", \"pods\": [\"" POD_A
		 "\"]}%s%s\n  ]\n}\n",
		 revision, deny_more ? ", \"52.95.0.0/16\"" : "", b, fill);
	return out;
}

static struct applied gens;

/* Apply a gen_policy() snapshot over the one applied before, or expect `expect`. */
static void gen_apply(const char *what, char *json, int expect)
{
	struct rw_apply_result res;
	char err[512];
	int ret;

	ret = apply_over(&gens, json, what, &res, err, sizeof(err));
	free(json);
	t_count++;
	if (!CHECK(ret == expect, what, "rw_apply returned %d (%s), expected %d", ret, err, expect))
		FATAL("cannot go on without the snapshot");
	printf("ok %d - %s: %s\n", t_count, what, ret ? err : "applied");
}

static __u64 run_rev(__u32 idx)
{
	__u64 v = 0;

	if (bpf_map_lookup_elem(dp.map_fd[RW_M_RUN_REVS], &idx, &v))
		FATAL("rw_run_revs[%u]: %s", idx, strerror(errno));
	return v;
}

static __u64 stamp_of(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port)
{
	struct rw_ct_value v;

	if (ct_entry(dev, pod, pod_port, peer, peer_port, TCP, &v))
		return 0;
	return v.stamp;
}

void test_run_generations(void)
{
	static const struct tcase open_both[] = {
		{"gens: run-7f3a opens a flow to the identity broker",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"gens: run-b77e opens a flow to the identity broker",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-b77e")},
		{"gens: run-7f3a's next packet (cached)",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"gens: run-b77e's next packet (cached)",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
	};
	static const struct tcase only_b[] = {
		{"gens: only run-b77e changed: run-7f3a's flow stays on its cached verdict (its rule is out of the live map)",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"gens: ... and its reply too", IN(0, "172.20.0.11", POD_A, TCP, 3443, 40200, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"gens: run-b77e's flow is judged in full: refused while the rule is out",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-b77e")},
	};
	static const struct tcase b_again[] = {
		{"gens: run-b77e's flow, judged in full again with the rule back",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
		{"gens: run-b77e opens a flow by its own new rule",
		 EG(1, POD_B, "52.94.9.7", TCP, 40202, 5432, SYN),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-b77e")},
		{"gens: its reply", IN(1, "52.94.9.7", POD_B, TCP, 5432, 40202, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-b77e")},
		{"gens: its next packet (cached)", EG(1, POD_B, "52.94.9.7", TCP, 40202, 5432, ACK),
		 ALLOWED(RW_PATH_RULE_CIDR, 0, "run-b77e")},
	};
	static const struct tcase revoked_b[] = {
		{"gens: run-b77e's rule revoked: its flow's next packet is refused",
		 EG(1, POD_B, "52.94.9.7", TCP, 40202, 5432, ACK),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-b77e")},
		{"gens: ... and its next reply", IN(1, "52.94.9.7", POD_B, TCP, 5432, 40202, ACK),
		 REVOKED(RW_REASON_NOT_ALLOWLISTED, "run-b77e")},
		{"gens: run-7f3a's flow is still cached",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
	};
	static const struct tcase both[] = {
		{"gens: a node-wide change: run-7f3a's flow is judged in full",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"gens: a node-wide change: run-b77e's flow is judged in full",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
	};
	static const struct tcase reused[] = {
		{"gens: a flow cached by the index's earlier run (rule-cidr, stamped before it was freed) is judged by the run now holding it: refused",
		 EG(1, POD_B, "52.94.9.7", TCP, 40203, 5432, ACK),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-c0de")},
	};
	const char *rule = "{\"cidr\": \"52.94.9.0/24\", \"tcp\": [5432]}";
	__u32 a, b, c;
	__u64 s;
	int ok;

	gen_apply("gens: base, revision 100", gen_policy(100, "run-b77e", "", 0), 0);
	a = run_idx_of("run-7f3a");
	b = run_idx_of("run-b77e");
	run_table(open_both, sizeof(open_both) / sizeof(open_both[0]));
	t_count++;
	ok = CHECK_EQ(stamp_of(0, POD_A, 40200, "172.20.0.11", 3443), 100, "run-7f3a's stamp");
	ok &= CHECK_EQ(stamp_of(1, POD_B, 40201, "172.20.0.11", 3443), 100, "run-b77e's stamp");
	ok &= CHECK_EQ(run_rev(a), 100, "rw_run_revs[run-7f3a]");
	ok &= CHECK_EQ(run_rev(b), 100, "rw_run_revs[run-b77e]");
	printf("%s %d - gens: both flows stamped 100, both runs at revision 100 (idx %u, %u)\n",
	       ok ? "ok" : "not ok", t_count, a, b);

	/* A run's generation bump re-judges its flows only. */
	gen_apply("gens: revision 101 adds a rule to run-b77e only",
		  gen_policy(101, "run-b77e", rule, 0), 0);
	t_count++;
	ok = CHECK_EQ(run_rev(a), 100, "rw_run_revs[run-7f3a] kept");
	ok &= CHECK_EQ(run_rev(b), 101, "rw_run_revs[run-b77e] moved");
	ok &= CHECK_EQ(run_rev(0), 101, "rw_run_revs[0] (no run) moved");
	printf("%s %d - gens: revision 101 moves run-b77e's revision only\n", ok ? "ok" : "not ok",
	       t_count);
	service_rule(1, "172.20.0.11", 3443, "identity broker");
	run_table(only_b, sizeof(only_b) / sizeof(only_b[0]));
	service_rule(0, "172.20.0.11", 3443, "identity broker");
	run_table(b_again, sizeof(b_again) / sizeof(b_again[0]));
	t_count++;
	ok = CHECK_EQ(stamp_of(0, POD_A, 40200, "172.20.0.11", 3443), 100,
		      "run-7f3a's flow keeps its stamp (fast path)");
	ok &= CHECK_EQ(stamp_of(1, POD_B, 40201, "172.20.0.11", 3443), 101,
		       "run-b77e's flow restamped (judged in full)");
	printf("%s %d - a run's generation bump re-judges its flows only: run-7f3a's flow stamped "
	       "100, run-b77e's 101\n",
	       ok ? "ok" : "not ok", t_count);

	/* The run's own rule revoked: cut at the next packet, both ways; the other run cached. */
	gen_apply("gens: revision 102 revokes run-b77e's rule", gen_policy(102, "run-b77e", "", 0),
		  0);
	run_table(revoked_b, sizeof(revoked_b) / sizeof(revoked_b[0]));

	/* A node-wide change re-judges every run's flows. */
	gen_apply("gens: revision 103 adds a deny CIDR (node-wide)",
		  gen_policy(103, "run-b77e", "", 1), 0);
	run_table(both, sizeof(both) / sizeof(both[0]));
	t_count++;
	ok = CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a]");
	ok &= CHECK_EQ(run_rev(b), 103, "rw_run_revs[run-b77e]");
	ok &= CHECK_EQ(stamp_of(0, POD_A, 40200, "172.20.0.11", 3443), 103, "run-7f3a's stamp");
	ok &= CHECK_EQ(stamp_of(1, POD_B, 40201, "172.20.0.11", 3443), 103, "run-b77e's stamp");
	printf("%s %d - gens: a node-wide change re-judges both runs' flows (stamps 103)\n",
	       ok ? "ok" : "not ok", t_count);

	/* A run removed, then its index reused: no verdict cached under the old run survives.
	 * run-fill takes the lowest free index at 104, so that run-c0de gets run-b77e's at 105.
	 */
	gen_apply("gens: revision 104 removes run-b77e, adds run-fill",
		  gen_policy(104, NULL, "", 1), 0);
	t_count++;
	ok = CHECK_EQ(run_rev(b), 104, "rw_run_revs[run-b77e's freed index]");
	ok &= CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a] kept");
	printf("%s %d - gens: a removed run's index moves to 104, the other run's stays\n",
	       ok ? "ok" : "not ok", t_count);
	gen_apply("gens: revision 105 gives POD_B to a new run", gen_policy(105, "run-c0de", "", 1),
		  0);
	c = run_idx_of("run-c0de");
	for (s = 101; s <= 104; s += 3) {
		struct rw_ct_value v = {.opened_by = E,
					.path = RW_PATH_RULE_CIDR,
					.rule_id = RW_RULE_ID(RW_RULE_KIND_RUN, 1, 0),
					.run_idx = c,
					.stamp = s};

		ct_put(1, POD_B, 40203, "52.94.9.7", 5432, TCP, &v);
		run_table(reused, 1);
	}
	t_count++;
	ok = CHECK_EQ(c, b, "run-c0de reuses run-b77e's index");
	ok &= CHECK_EQ(run_rev(c), 105, "rw_run_revs[reused index]");
	ok &= CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a] kept");
	printf("%s %d - gens: index %u reused by run-c0de at 105: entries stamped 101 and 104 are "
	       "judged again\n",
	       ok ? "ok" : "not ok", t_count, c);

	/* The revision never goes down: an older snapshot is refused, nothing moves. */
	gen_apply("gens: an older revision (50) is refused", gen_policy(50, "run-b77e", rule, 0),
		  -ESTALE);
	t_count++;
	ok = CHECK_EQ(run_rev(c), 105, "rw_run_revs[run-c0de]");
	ok &= CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a]");
	printf("%s %d - gens: a refused older revision moves no run's revision\n",
	       ok ? "ok" : "not ok", t_count);
	applied_end(&gens);
}
