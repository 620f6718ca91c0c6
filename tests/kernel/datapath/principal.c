// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* principal.c (test_datapath): rules that name who inside the pod may use them ("from"). The
 * packet of BPF_PROG_TEST_RUN carries the kernel's dummy socket (net/bpf/test_run.c: owned by
 * uid 0, made in this test's own cgroup), so the datapath's socket reads run for real: by uid,
 * by container (this test's cgroup, admitted as one), the veth an admission names, the fast
 * path a restricted flow never takes, the answers, and the sender in the event.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include "dp_suite.h"
#include "principals.h"

#define BROKER "172.20.0.11"

/* The cgroup v2 mount, and this process's cgroup under it ("/..."). */
static void cgroup2_where(char *root, size_t rlen, char *rel, size_t relen)
{
	char line[4096];
	FILE *f;

	root[0] = rel[0] = '\0';
	f = fopen("/proc/self/mountinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char mnt[1024];

		if (strstr(line, " - cgroup2 ") &&
		    sscanf(line, "%*d %*d %*s %*s %1023s", mnt) == 1) {
			snprintf(root, rlen, "%s", mnt);
			break;
		}
	}
	if (f)
		fclose(f);
	f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(rel, relen, "%s", line + 3);
		}
	if (f)
		fclose(f);
	if (!root[0] || !rel[0])
		FATAL("no cgroup v2 mount or no cgroup v2 path of this process (\"%s\", \"%s\")",
		      root, rel);
}

/* A cgroup v2 directory's id: its kernfs id, what bpf_skb_cgroup_id() reports. */
static __u64 cgroup_id_of(const char *dir)
{
	struct {
		struct file_handle fh;
		__u64 id;
	} h = {.fh.handle_bytes = sizeof(__u64)};
	int mount_id;

	if (name_to_handle_at(AT_FDCWD, dir, &h.fh, &mount_id, 0))
		FATAL("name_to_handle_at(%s): %s", dir, strerror(errno));
	return h.id;
}

static void move_self(const char *dir)
{
	char procs[4200];
	FILE *f;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	f = fopen(procs, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f))
		FATAL("moving this test into %s: %s", dir, strerror(errno));
}

static unsigned int principal_rev;

/* The broker restricted by `from`, the runs of policy v1; each at the next revision. */
static void apply_from(const char *from, const char *what)
{
	char json[2048];

	snprintf(
		json, sizeof(json),
		"{\"revision\": %u, \"services\": [{\"name\": \"identity-broker\", \"ip\": \"" BROKER
		"\", \"tcp\": [3443], \"udp\": [3443], \"from\": %s}], \"runs\": ["
		"{\"id\": \"run-7f3a\", \"pods\": [\"" POD_A "\"]},"
		"{\"id\": \"run-9c01\", \"pods\": [\"" POD_B "\"]}]}",
		++principal_rev, from);
	apply_json(json, 0, what);
}

static void check_sender(const char *what, __u32 uid, __u64 cgroup_id)
{
	const struct rw_event *ev = n_events ? &events[n_events - 1] : NULL;
	int ok;

	t_count++;
	ok = CHECK(ev != NULL, what, "no event");
	ok = ok && CHECK(ev->uid == uid && ev->cgroup_id == cgroup_id, what,
			 "uid %u cgroup %llu, expected uid %u cgroup %llu", ev->uid,
			 (unsigned long long)ev->cgroup_id, uid, (unsigned long long)cgroup_id);
	printf("%s %d - %s: uid %u, cgroup %llu\n", ok ? "ok" : "not ok", t_count, what, uid,
	       (unsigned long long)cgroup_id);
}

void test_principals(void)
{
	static const struct tcase by_uid[] = {
		{"from uid 0: the test socket's SYN to the broker is allowed",
		 EG(0, POD_A, BROKER, TCP, 40200, 3443, SYN), ALLOWED(RW_PATH_RULE, 1, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from uid 0"},
		{"from uid 0: and its next segment, judged again",
		 EG(0, POD_A, BROKER, TCP, 40200, 3443, ACK), ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"from uid 0: a datagram", EG(0, POD_A, BROKER, UDP, 40201, 3443, 0),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"from uid 0: the broker's reply comes in (no sender inside the pod to prove)",
		 IN(0, BROKER, POD_A, TCP, 3443, 40200, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
	};
	static const struct tcase not_fast[] = {
		{"from uid 0, rule gone from the live map: the flow's segment passes from its cached "
		 "verdict, its sender proven again",
		 EG(0, POD_A, BROKER, TCP, 40200, 3443, ACK), ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"from uid 0, rule gone from the live map: a SYN on the flow's ports passes the same "
		 "way",
		 EG(0, POD_A, BROKER, TCP, 40200, 3443, SYN), ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
	};
	static const struct tcase other_uid[] = {
		{"from uid 1001: a SYN from uid 0 is wrong-principal, answered with a reset",
		 EG(0, POD_A, BROKER, TCP, 40210, 3443, SYN),
		 REFUSED_RST(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from uid 1001"},
		{"from uid 1001: a segment copying a known flow is dropped: no answer, no revoke",
		 EG(0, POD_A, BROKER, TCP, 40202, 3443, ACK),
		 DROPPED(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from uid 1001"},
		{"from uid 1001: a datagram is dropped unanswered (an ICMP error would reach the "
		 "socket whose flow it copies)",
		 EG(0, POD_A, BROKER, UDP, 40201, 3443, 0),
		 DROPPED(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 udp/3443 from uid 1001"},
	};
	static const struct tcase by_container[] = {
		{"from container identity-sidecar, this cgroup admitted on veth 0: allowed",
		 EG(0, POD_A, BROKER, TCP, 40220, 3443, SYN), ALLOWED(RW_PATH_RULE, 1, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from container identity-sidecar"},
		{"from container identity-sidecar: its next segment, from the cached verdict",
		 EG(0, POD_A, BROKER, TCP, 40220, 3443, ACK), ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"from container identity-sidecar: the same socket's packet on another pod's veth "
		 "is wrong-principal",
		 EG(1, POD_B, BROKER, TCP, 40221, 3443, SYN),
		 REFUSED_RST(RW_REASON_WRONG_PRINCIPAL, "run-9c01"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from container identity-sidecar"},
	};
	static const struct tcase not_admitted[] = {
		{"admission moved, no apply: the established flow's next segment is wrong-principal "
		 "on the fast path's proof, dropped unanswered",
		 EG(0, POD_A, BROKER, TCP, 40220, 3443, ACK),
		 DROPPED(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from container identity-sidecar"},
		{"admission moved, no apply: a SYN reusing the established flow's ports is "
		 "wrong-principal on the fast path's proof, then judged: answered",
		 EG(0, POD_A, BROKER, TCP, 40220, 3443, SYN),
		 REFUSED_RST(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from container identity-sidecar"},
		{"from container identity-sidecar, this cgroup is the harness: wrong-principal",
		 EG(0, POD_A, BROKER, TCP, 40230, 3443, SYN),
		 REFUSED_RST(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from container identity-sidecar"},
	};
	static const struct tcase both[] = {
		{"from uid 1001 and container identity-sidecar: the container's uid 0 is "
		 "wrong-principal",
		 EG(0, POD_A, BROKER, TCP, 40240, 3443, SYN),
		 REFUSED_RST(RW_REASON_WRONG_PRINCIPAL, "run-7f3a"),
		 .rule = "identity-broker 172.20.0.11 tcp/3443 from uid 1001 container "
			 "identity-sidecar"},
	};
	char root[1024], rel[4096], back[5200], own[1100];
	__u64 self, before;
	struct rw_principal sidecar, harness;
	struct rw_config cfg = config_get();
	struct rw_ct_value v;

	/* A cgroup of its own for this test, so that its sockets' cgroup is one no other
	 * process's is: the sockets test_run makes are made in it from here on.
	 */
	cgroup2_where(root, sizeof(root), rel, sizeof(rel));
	snprintf(back, sizeof(back), "%s%s", root, rel);
	snprintf(own, sizeof(own), "%s/rwt-principal-%d", root, getpid());
	if (mkdir(own, 0755) && errno != EEXIST)
		FATAL("mkdir %s: %s", own, strerror(errno));
	before = cgroup_id_of(back);
	move_self(own);
	self = cgroup_id_of(own);
	sidecar = (struct rw_principal){"identity-sidecar", self, ifindex_of[0]};
	harness = (struct rw_principal){"harness", self, ifindex_of[0]};
	printf("# this test's cgroup v2 id: %llu (%s), before: %llu\n", (unsigned long long)self,
	       own, (unsigned long long)before);

	principal_rev = (unsigned int)RW_STATE_REVISION(cfg.state);
	apply_from("{\"uid\": [0]}", "principals: broker from uid 0");
	run_table(by_uid, 1);
	check_sender("the new flow's event names its sender", 0, self);
	run_table(by_uid + 1, sizeof(by_uid) / sizeof(by_uid[0]) - 1);
	t_count++;
	CHECK(ct_entry(0, POD_A, 40200, BROKER, 3443, TCP, &v) == 0, "entry", "no entry");
	printf("%s %d - a restricted flow's entry carries the rule's \"from\" bit (%#x)\n",
	       v.rule_id & RW_RULE_FROM ? "ok" : "not ok", t_count, v.rule_id);
	if (!(v.rule_id & RW_RULE_FROM))
		t_failed++;

	service_rule(1, BROKER, 3443, "broker");
	run_table(not_fast, sizeof(not_fast) / sizeof(not_fast[0]));
	service_rule(0, BROKER, 3443, "broker");

	/* A flow of uid 0 to the broker known before the next revision: 40202 opened now. */
	run_case(&(struct tcase){"from uid 0: a flow opened before the change",
				 EG(0, POD_A, BROKER, TCP, 40202, 3443, SYN),
				 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")});
	apply_from("{\"uid\": [1001]}", "principals: broker from uid 1001");
	run_table(other_uid, sizeof(other_uid) / sizeof(other_uid[0]));
	check_sender("the wrong-principal event names the sender", 0, self);

	dp.principals = &sidecar;
	dp.n_principals = 1;
	apply_from("{\"container\": [\"identity-sidecar\"]}",
		   "principals: broker from container identity-sidecar");
	run_table(by_container, sizeof(by_container) / sizeof(by_container[0]));

	/* The live slot's admissions follow the containers without an apply: this cgroup is now
	 * the harness, and the sidecar is the cgroup the test came from.
	 */
	{
		struct rw_principal now[2] = {harness, {"identity-sidecar", before, ifindex_of[0]}};
		char err[256];

		cfg = config_get();
		if (rw_admit_write(&dp, RW_STATE_SLOT(cfg.state), dp_policy, now, 2, err,
				   sizeof(err)))
			FATAL("%s", err);
	}
	run_table(not_admitted, sizeof(not_admitted) / sizeof(not_admitted[0]));

	dp.principals = &sidecar;
	apply_from("{\"uid\": [1001], \"container\": [\"identity-sidecar\"]}",
		   "principals: broker from uid 1001 and container identity-sidecar");
	run_table(both, 1);
	dp.principals = NULL;
	dp.n_principals = 0;
	move_self(back);
	if (rmdir(own))
		FATAL("rmdir %s: %s", own, strerror(errno));
}
