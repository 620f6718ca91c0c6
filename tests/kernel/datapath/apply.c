// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* apply.c (test_datapath): applies in place: generations, an interrupted apply, a snapshot big enough for two
 * writer threads.
 */
#include "dp_suite.h"

/* A run whose policy did not change keeps its generation; a new run starts at the revision. */
void test_generations(void)
{
	struct rw_pod a = {}, b = {};
	__be32 ip;
	int ok;

	inet_pton(AF_INET, POD_A, &ip);
	rw_live_pod(&dp, ip, &a);
	inet_pton(AF_INET, POD_B, &ip);
	rw_live_pod(&dp, ip, &b);
	t_count++;
	ok = CHECK_EQ(a.run_gen, 1, "unchanged run-7f3a keeps generation 1");
	ok &= CHECK_EQ(b.run_gen, 2, "new run-b77e gets generation 2");
	ok &= CHECK(a.run_idx != b.run_idx && b.run_idx != 0, "run indexes", "%u and %u", a.run_idx,
		    b.run_idx);
	printf("%s %d - generations: run-7f3a gen %u idx %u, run-b77e gen %u idx %u\n",
	       ok ? "ok" : "not ok", t_count, a.run_gen, a.run_idx, b.run_gen, b.run_idx);
}

/* ---- Apply in place ------------------------------------------------------------------ */

/* policy v2 at another revision, or ("v3") with the drive gateway's rule revoked and a new
 * service added: the two flip each other's verdict for two destinations.
 */
char *policy_at(unsigned int revision, int v3)
{
	const char *from =
		v3 ? "{\"name\": \"drive-gateway\", \"ip\": \"172.20.0.13\", \"tcp\": [8080]}"
		   : NULL;
	const char *to = "{\"name\": \"new-svc\", \"ip\": \"172.20.0.15\", \"tcp\": [7000]}";
	char *out = malloc((strlen(policy_v2) + 1) + 256), *at;
	char rev[32];

	snprintf(rev, sizeof(rev), "\"revision\": %u", revision);
	at = strstr(policy_v2, "\"revision\": 2");
	sprintf(out, "%.*s%s%s", (int)(at - policy_v2), policy_v2, rev,
		at + strlen("\"revision\": 2"));
	if (from) {
		char *tail, *f = strstr(out, from);

		tail = strdup(f + strlen(from));
		strcpy(f, to);
		strcat(f, tail);
		free(tail);
	}
	return out;
}

static int live_count(enum rw_map_id table)
{
	int fd = rw_live_inner_fd(&dp, table), n = 0;
	__u8 key[64], prev[64];

	if (fd < 0)
		FATAL("live %s: %s", rw_map_names[table], strerror(-fd));
	while (bpf_map_get_next_key(fd, n ? prev : NULL, key) == 0) {
		memcpy(prev, key, sizeof(key));
		n++;
	}
	close(fd);
	return n;
}

/* Verdicts of the two destinations v2 and v3 disagree on, on fresh flows. */
static void check_v3(int v3, const char *when)
{
	static __u16 sport = 41000;
	char n1[160], n2[160];
	struct tcase c[2] = {
		{n1, EG(0, POD_A, "172.20.0.13", TCP, sport++, 8080, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{n2, EG(0, POD_A, "172.20.0.15", TCP, sport++, 7000, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	};

	snprintf(n1, sizeof(n1), "%s: the drive gateway is %s", when, v3 ? "revoked" : "allowed");
	snprintf(n2, sizeof(n2), "%s: the new service is %s", when, v3 ? "allowed" : "denied");
	if (v3) {
		c[0].verdict = DROP, c[0].reason = RW_REASON_PRIVATE_DESTINATION;
		c[0].path = NO_PATH, c[0].answer = RW_ANSWER_RST;
	} else {
		c[1].verdict = DROP, c[1].reason = RW_REASON_PRIVATE_DESTINATION;
		c[1].path = NO_PATH, c[1].answer = RW_ANSWER_RST;
	}
	run_table(c, 2);
}

/* Apply one snapshot; check the live slot holds exactly its entries, no leftovers, and judges
 * as v3 or v2 (check_v3()).
 */
static void apply_checked(unsigned int revision, int v3, int expect_full, const char *what)
{
	char *json = policy_at(revision, v3), err[512], when[32];
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	int ret, ok, entries;

	if (rw_policy_parse(json, strlen(json), what, &p, &perr))
		FATAL("%s: %s", what, perr.text);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	t_count++;
	ok = CHECK(ret == 0, what, "rw_apply: %s", err);
	entries = live_count(RW_M_ALLOW_EXACT) + live_count(RW_M_ALLOW_CIDR) +
		  live_count(RW_M_DENY) + live_count(RW_M_INBOUND);
	ok &= CHECK_EQ(live_count(RW_M_PODS), (int)res.pods, "pods in the live slot");
	ok &= CHECK_EQ(entries, (int)res.entries, "entries in the live slot");
	ok &= CHECK_EQ(res.full, expect_full, "written in full");
	printf("%s %d - %s: revision %u %s, %u writes, %d entries live\n", ok ? "ok" : "not ok",
	       t_count, what, revision, res.full ? "written in full" : "written by diff",
	       res.written, entries);
	rw_policy_free(&p);
	free(json);
	snprintf(when, sizeof(when), "revision %u", revision);
	check_v3(v3, when);
}

/* An apply that stops half way (an error between two writes, as if the agent died there)
 * leaves the live slot as it was; the next apply rewrites the half-written slot and converges,
 * and later applies go back to writing by diff. A restarted agent rewrites what it does not know.
 */
void test_interrupted_apply(void)
{
	char *json = policy_at(4, 1), err[512];
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_config cfg;
	struct rw_policy p;
	int ret, ok;

	apply_checked(3, 0, 0, "v2 again by diff");
	if (rw_policy_parse(json, strlen(json), "v3", &p, &perr))
		FATAL("v3: %s", perr.text);
	rw_apply_inject_fault(2);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	rw_config_read(&dp, &cfg);
	t_count++;
	ok = CHECK(ret == -EIO, "interrupted apply", "returned %d (%s), expected -EIO", ret, err);
	ok &= CHECK_EQ(RW_STATE_REVISION(cfg.state), 3, "revision in force");
	printf("%s %d - an apply interrupted after 2 writes fails (%s); revision %llu stays live\n",
	       ok ? "ok" : "not ok", t_count, err,
	       (unsigned long long)RW_STATE_REVISION(cfg.state));
	rw_policy_free(&p);
	free(json);
	check_v3(0, "after the interrupted apply");

	apply_checked(4, 1, 1, "v3 over the half-written slot");
	apply_checked(5, 0, 0, "v2 by diff");
	apply_checked(6, 1, 0, "v3 by diff into the slot rewritten in full");
	rw_apply_forget(&dp);
	apply_checked(7, 0, 1, "v2 after a restart (slots unknown)");
	apply_checked(8, 1, 1, "v3 after a restart, the other slot");
	apply_checked(9, 0, 0, "v2 by diff again");
}

/* A snapshot big enough that its writes are split between two threads (one table each way):
 * v2's services with 12 000 rules for run-7f3a, 10 % of them CIDRs. Every entry is live after
 * the flip, a rule from each table decides, and the way back to v2 (in the big snapshot's slot:
 * 12 000 deletes, two threads too) leaves no leftover.
 */
void test_big_apply(void)
{
	const int rules = 12000;
	size_t cap = (strlen(policy_v2) + 1) + (size_t)rules * 64;
	char *json = malloc(cap), err[512];
	const char *run = "{\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]", *rev, *at;
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	size_t len;
	int ret, ok, entries;

	rev = strstr(policy_v2, "\"revision\": 2");
	at = strstr(policy_v2, run);
	if (!json || !rev || !at)
		FATAL("big snapshot: no room, no revision or no run-7f3a");
	/* Revision 10, after test_interrupted_apply's. */
	len = snprintf(json, cap, "%.*s\"revision\": 10%.*s%s, \"allow\": [",
		       (int)(rev - policy_v2), policy_v2,
		       (int)(at - rev - strlen("\"revision\": 2")), rev + strlen("\"revision\": 2"),
		       run);
	for (int i = 0; i < rules; i++)
		len += snprintf(json + len, cap - len,
				i % 10 == 9 ? "%s{\"cidr\": \"45.%d.%d.0/24\", \"tcp\": [%d]}"
					    : "%s{\"ip\": \"44.%d.%d.1\", \"tcp\": [%d]}",
				i ? "," : "", i / 256, i % 256, 1000 + i % 1000);
	snprintf(json + len, cap - len, "]%s", at + strlen(run));
	if (rw_policy_parse(json, strlen(json), "big", &p, &perr))
		FATAL("big snapshot: %s", perr.text);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	t_count++;
	ok = CHECK(ret == 0, "big apply", "rw_apply: %s", err);
	entries = live_count(RW_M_ALLOW_EXACT) + live_count(RW_M_ALLOW_CIDR) +
		  live_count(RW_M_DENY) + live_count(RW_M_INBOUND);
	ok &= CHECK_EQ(live_count(RW_M_PODS), (int)res.pods, "pods in the live slot");
	ok &= CHECK_EQ(entries, (int)res.entries, "entries in the live slot");
	ok &= CHECK(res.written >= (unsigned int)rules, "big apply", "%u writes", res.written);
	printf("%s %d - a big snapshot (%d rules) written by two threads: %u writes, %d entries "
	       "live\n",
	       ok ? "ok" : "not ok", t_count, rules, res.written, entries);
	rw_policy_free(&p);
	free(json);
	{
		struct tcase c[] = {
			{"big snapshot: its last exact rule allows",
			 EG(0, POD_A, "44.46.222.1", TCP, 42001, 1998, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
			{"big snapshot: its last CIDR rule allows",
			 EG(0, POD_A, "45.46.223.7", TCP, 42002, 1999, SYN),
			 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-7f3a")},
			{"big snapshot: another port of that CIDR is not allowlisted",
			 EG(0, POD_A, "45.46.223.7", TCP, 42003, 1998, SYN),
			 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")},
		};

		run_table(c, sizeof(c) / sizeof(c[0]));
	}
	apply_checked(11, 0, 0, "v2 by diff after the big snapshot");
	apply_checked(12, 0, 0, "v2 by diff into the big snapshot's slot (its rules deleted)");
}
