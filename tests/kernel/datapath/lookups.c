// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* lookups.c: the pods' RW_SKIP_* bits (include/runwall.h, bpf/policy.h). Each apply writes a
 * run's bits into its pods' values beside the tables of the same slot; the datapath trusts them.
 * Snapshots that change only the node's lists (deny, services) or only the run's rules, each
 * followed by the packets a stale bit would judge otherwise, and rw_pod_lookups_check() (the
 * invariant, read back from the live slot) after each; then a bit that the tables do not
 * justify, set by hand: the check names it, and the packet shows what the bit would cost.
 */
#include "dp_suite.h"
#include "pod_lookups.h"

#define LOOK_RUN "run-look"
#define LOOK_REV 1000000 /* past every revision of the steps before */

/* Apply a snapshot of one run (POD_A on rwt0) with these deny, services and allow lists, and
 * check the pod's bits: want_skip exactly, and justified by the slot's tables.
 */
static void look_apply(unsigned int step, const char *deny, const char *services, const char *allow,
		       __u16 want_skip)
{
	char json[2048], what[96], err[256] = "";
	struct rw_pod pod = {};
	__be32 ip;

	snprintf(json, sizeof(json),
		 "{\"revision\": %u, \"deny\": [%s], \"services\": [%s], \"runs\": [{\"id\": "
		 "\"" LOOK_RUN "\", \"pods\": [\"" POD_A "\"], \"allow\": [%s]}]}",
		 LOOK_REV + step, deny, services, allow);
	snprintf(what, sizeof(what), "lookups, snapshot %u", step);
	apply_json(json, 0, what);
	inet_pton(AF_INET, POD_A, &ip);
	t_count++;
	CHECK(rw_live_pod(&dp, ip, &pod) == 0 && pod.skip == want_skip, what,
	      "the pod's skip bits are 0x%04x, expected 0x%04x", pod.skip, want_skip);
	t_count++;
	CHECK(rw_pod_lookups_check(&dp, err, sizeof(err)) == 0, what, "%s", err);
}

#define PROXY		  "{\"name\": \"proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443]}"
#define CDN		  "{\"name\": \"cdn\", \"cidr\": \"93.184.216.0/24\", \"tcp\": [443]}"
#define HOST_RULE	  "{\"ip\": \"52.1.2.3\", \"tcp\": [443]}"
#define CIDR_RULE	  "{\"cidr\": \"52.9.0.0/16\", \"tcp\": [443]}"
#define OUT(sport_, dst_) EG(0, POD_A, dst_, TCP, sport_, 443, SYN)
/* IPv6 has no service, no rule and no NAT64 prefix in these snapshots: every IPv6 bit but the
 * deny list's, which IPv6 has not.
 */
#define SKIP6_ALL                                                                                 \
	(RW_SKIP6(RW_SKIP_SVC_EXACT | RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC | RW_SKIP_RUN_EXACT | \
		  RW_SKIP_RUN_CIDR) |                                                             \
	 RW_SKIP_NAT64)

void test_lookups(void)
{
	/* 1: a private service, no deny entry, one host rule. */
	const struct tcase c1[] = {
		{"the run's host rule", OUT(41001, "52.1.2.3"), ALLOWED(RW_PATH_RULE, 1, LOOK_RUN)},
		{"the private service", OUT(41002, "172.20.0.10"),
		 ALLOWED(RW_PATH_RULE, 1, LOOK_RUN)},
		{"a public host no rule names", OUT(41003, "93.184.216.34"),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, LOOK_RUN)},
	};
	/* 2: only the deny list changes, to a public range: the pod's value must change with it. */
	const struct tcase c2[] = {
		{"the deny list's new public range", OUT(41011, "93.184.216.34"),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, LOOK_RUN)},
		{"the run's host rule still", OUT(41012, "52.1.2.3"),
		 ALLOWED(RW_PATH_RULE, 1, LOOK_RUN)},
	};
	/* 3: a deny entry inside a special range (skipped) and a public CIDR service. */
	const struct tcase c3[] = {
		{"the public CIDR service", OUT(41021, "93.184.216.34"),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, LOOK_RUN)},
		{"the deny entry inside 10/8", OUT(41022, "10.0.5.6"),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, LOOK_RUN)},
		{"the private service still", OUT(41023, "172.20.0.10"),
		 ALLOWED(RW_PATH_RULE, 1, LOOK_RUN)},
	};
	/* 4: only the run changes: a CIDR rule beside its host rule. */
	const struct tcase c4[] = {
		{"the run's new CIDR rule", OUT(41031, "52.9.1.2"),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, LOOK_RUN)},
		{"the service's range, gone", OUT(41032, "93.184.216.34"),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, LOOK_RUN)},
	};
	/* 5: the run has no rule left. */
	const struct tcase c5[] = {
		{"the host rule, gone", OUT(41041, "52.1.2.3"),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, LOOK_RUN)},
		{"the private service still", OUT(41042, "172.20.0.10"),
		 ALLOWED(RW_PATH_RULE, 1, LOOK_RUN)},
	};
	const struct tcase stale = {"a refusal the deny list owes, with a wrong bit",
				    OUT(41051, "93.184.216.34"),
				    REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, LOOK_RUN)};
	char err[256] = "";
	struct rw_pod pod;
	__be32 ip;
	int fd;

	bind_veth(0, POD_A);
	look_apply(1, "", PROXY, HOST_RULE,
		   RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC | RW_SKIP_DENY | RW_SKIP_RUN_CIDR |
			   SKIP6_ALL);
	run_table(c1, sizeof(c1) / sizeof(c1[0]));
	look_apply(2, "\"93.184.216.0/24\"", PROXY, HOST_RULE,
		   RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC | RW_SKIP_RUN_CIDR | SKIP6_ALL);
	run_table(c2, sizeof(c2) / sizeof(c2[0]));
	look_apply(3, "\"10.0.0.0/16\"", PROXY "," CDN, HOST_RULE,
		   RW_SKIP_DENY | RW_SKIP_RUN_CIDR | SKIP6_ALL);
	run_table(c3, sizeof(c3) / sizeof(c3[0]));
	look_apply(4, "\"10.0.0.0/16\"", PROXY, HOST_RULE "," CIDR_RULE,
		   RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC | RW_SKIP_DENY | SKIP6_ALL);
	run_table(c4, sizeof(c4) / sizeof(c4[0]));
	look_apply(5, "\"10.0.0.0/16\"", PROXY, "",
		   RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC | RW_SKIP_DENY | RW_SKIP_RUN_EXACT |
			   RW_SKIP_RUN_CIDR | SKIP6_ALL);
	run_table(c5, sizeof(c5) / sizeof(c5[0]));

	/* 6: the deny list's public range again, and then its bit set by hand, as a writer that
	 * broke the invariant would: the check must name the pod, and the refusal the deny list
	 * owes is lost (the datapath trusts the bit: this is the case the check is for).
	 */
	look_apply(6, "\"93.184.216.0/24\"", PROXY, HOST_RULE,
		   RW_SKIP_SVC_CIDR | RW_SKIP_SVC_PUBLIC | RW_SKIP_RUN_CIDR | SKIP6_ALL);
	inet_pton(AF_INET, POD_A, &ip);
	fd = rw_live_inner_fd(&dp, RW_M_PODS);
	if (fd < 0 || bpf_map_lookup_elem(fd, &ip, &pod))
		FATAL("reading the pod's value: %s", strerror(errno));
	pod.skip |= RW_SKIP_DENY;
	if (bpf_map_update_elem(fd, &ip, &pod, BPF_EXIST))
		FATAL("writing the pod's value: %s", strerror(errno));
	t_count++;
	CHECK(rw_pod_lookups_check(&dp, err, sizeof(err)) == -EPROTO && strstr(err, POD_A),
	      "a deny bit the slot does not justify", "the check said: %s", err);
	printf("# the check on a wrong deny bit: %s\n", err);
	run_case(&stale);
	pod.skip &= ~RW_SKIP_DENY;
	if (bpf_map_update_elem(fd, &ip, &pod, BPF_EXIST))
		FATAL("restoring the pod's value: %s", strerror(errno));
	close(fd);
	{
		const struct tcase again = {"... refused again once the bit is right",
					    OUT(41052, "93.184.216.34"),
					    REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, LOOK_RUN)};

		run_case(&again);
	}
}
