// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* lease.c: the control plane's dead-man lease in the datapath: no deadline, one ahead and one
 * behind the kernel's clock, set through rw_lease as the agent sets it, and an apply's lease.
 */
#include "dp_suite.h"

/* The dead-man lease. No deadline (0) and a deadline ahead judge by the whole policy, the
 * verdict cache included; a deadline behind the kernel's clock judges by the lease-expired
 * policy: services and inbound rules only. Cached flows are judged again, so a run rule's flow
 * is cut (its segments either way refused lease-expired, and closed like any refused segment of
 * a known flow) while a services flow stays allowed, judged in full (with its rule taken out of
 * the live map it is refused: no cached verdict let it through). Run rules and open mode are
 * refused lease-expired; the contract's other refusals keep their reasons. A deadline ahead
 * again restores the whole policy at the next packet.
 */
void test_lease(void)
{
	static const struct tcase open_flows[] = {
		{"lease 0: a run rule's flow opens",
		 EG(1, POD_B, "52.94.9.10", TCP, 41001, 5432, SYN),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-9c01")},
		{"lease 0: a services flow opens",
		 EG(1, POD_B, "172.20.0.10", TCP, 41002, 443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-9c01")},
		{"lease 0: open mode opens a flow",
		 EG(1, POD_B, "93.184.216.34", TCP, 41003, 80, SYN),
		 ALLOWED(RW_PATH_OPEN, 1, "run-9c01")},
	};
	static const struct tcase ahead[] = {
		{"lease ahead: the run rule's flow goes on (cached)",
		 EG(1, POD_B, "52.94.9.10", TCP, 41001, 5432, ACK),
		 ALLOWED(RW_PATH_RULE_CIDR, 0, "run-9c01")},
		{"lease ahead: a new run-rule flow opens",
		 EG(1, POD_B, "52.94.9.10", TCP, 41004, 5432, SYN),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-9c01")},
		{"lease ahead: open mode opens a flow",
		 EG(1, POD_B, "93.184.216.35", TCP, 41005, 80, SYN),
		 ALLOWED(RW_PATH_OPEN, 1, "run-9c01")},
	};
	static const struct tcase expired[] = {
		{"lease expired: the run rule's cached flow is cut",
		 EG(1, POD_B, "52.94.9.10", TCP, 41001, 5432, ACK),
		 REFUSED_RST(RW_REASON_LEASE_EXPIRED, "run-9c01")},
		{"lease expired: and its reply", IN(1, "52.94.9.10", POD_B, TCP, 5432, 41004, ACK),
		 REVOKED(RW_REASON_LEASE_EXPIRED, "run-9c01")},
		{"lease expired: a new run-rule flow is refused",
		 EG(1, POD_B, "52.94.9.10", TCP, 41006, 5432, SYN),
		 REFUSED_RST(RW_REASON_LEASE_EXPIRED, "run-9c01")},
		{"lease expired: a run's UDP rule is refused",
		 EG(1, POD_B, "9.9.9.9", UDP, 41007, 53, 0),
		 REFUSED_ICMP(RW_REASON_DNS, "run-9c01")},
		{"lease expired: open mode is refused",
		 EG(1, POD_B, "93.184.216.34", TCP, 41008, 80, SYN),
		 REFUSED_RST(RW_REASON_LEASE_EXPIRED, "run-9c01")},
		{"lease expired: open mode's cached flow is cut",
		 EG(1, POD_B, "93.184.216.34", TCP, 41003, 80, ACK),
		 REFUSED_RST(RW_REASON_LEASE_EXPIRED, "run-9c01")},
		{"lease expired: the services flow goes on",
		 EG(1, POD_B, "172.20.0.10", TCP, 41002, 443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-9c01")},
		{"lease expired: and its reply", IN(1, "172.20.0.10", POD_B, TCP, 443, 41002, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-9c01")},
		{"lease expired: a new services flow opens",
		 EG(0, POD_A, "172.20.0.11", TCP, 41009, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"lease expired: an inbound connection opens",
		 IN(0, "172.20.0.20", POD_A, TCP, 41010, 4096, SYN),
		 ALLOWED(RW_PATH_INBOUND, 1, "run-7f3a")},
		{"lease expired: and its reply goes out",
		 EG(0, POD_A, "172.20.0.20", TCP, 4096, 41010, SYNACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"lease expired: a private destination is still private-destination",
		 EG(0, POD_A, "10.9.9.9", TCP, 41011, 80, SYN),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
		{"lease expired: an allowlist run's other destination is lease-expired",
		 EG(0, POD_A, "93.184.216.34", TCP, 41012, 80, SYN),
		 REFUSED_RST(RW_REASON_LEASE_EXPIRED, "run-7f3a")},
		{"lease expired: a spoofed source is still spoofed-source",
		 EG(0, "10.1.2.77", "172.20.0.10", TCP, 41013, 443, SYN),
		 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
	};
	static const struct tcase rejudged[] = {
		{"lease expired: with its rule gone from the live map, the services flow is refused (judged, not cached)",
		 EG(1, POD_B, "172.20.0.10", TCP, 41002, 443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
	};
	static const struct tcase restored[] = {
		{"lease renewed: a new run-rule flow opens at once",
		 EG(1, POD_B, "52.94.9.10", TCP, 41014, 5432, SYN),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-9c01")},
		{"lease renewed: open mode opens a flow",
		 EG(1, POD_B, "93.184.216.34", TCP, 41015, 80, SYN),
		 ALLOWED(RW_PATH_OPEN, 1, "run-9c01")},
		{"lease renewed: the services flow goes on from its cached verdict",
		 EG(1, POD_B, "172.20.0.10", TCP, 41002, 443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-9c01")},
	};
	struct rw_config cfg;
	int ok;

	rw_config_read(&dp, &cfg);
	t_count++;
	ok = CHECK_EQ(cfg.lease_deadline_ns, 0, "a snapshot without lease_seconds: no deadline");
	printf("%s %d - lease: a snapshot without lease_seconds sets no deadline\n",
	       ok ? "ok" : "not ok", t_count);
	run_table(open_flows, sizeof(open_flows) / sizeof(open_flows[0]));
	set_lease(mono_ns() + 3600ULL * 1000000000ULL);
	run_table(ahead, sizeof(ahead) / sizeof(ahead[0]));
	set_lease(1);
	run_table(expired, sizeof(expired) / sizeof(expired[0]));

	service_rule(1, "172.20.0.10", 443, "egress proxy");
	run_table(rejudged, 1);
	service_rule(0, "172.20.0.10", 443, "egress proxy");

	/* rw_config_write() keeps the deadline in force, whatever its caller's copy says. */
	t_count++;
	rw_config_read(&dp, &cfg);
	cfg.lease_deadline_ns = 0;
	ok = CHECK_EQ(rw_config_write(&dp, &cfg), 0, "rw_config_write");
	rw_config_read(&dp, &cfg);
	ok &= CHECK_EQ(cfg.lease_deadline_ns, 1, "deadline after rw_config_write");
	printf("%s %d - lease: rw_config_write keeps the deadline rw_lease wrote\n",
	       ok ? "ok" : "not ok", t_count);

	set_lease(mono_ns() + 3600ULL * 1000000000ULL);
	run_table(restored, sizeof(restored) / sizeof(restored[0]));
	set_lease(0);
}

/* An apply sets the snapshot's lease: now + lease_seconds by the kernel's clock, or none. */
void test_lease_apply(void)
{
	static const char leased[] = "{\"revision\": %u, %s\"runs\": [{\"id\": \"run-1\", "
				     "\"pods\": [\"10.1.2.3\"]}]}";
	struct rw_datapath d;
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_config cfg;
	struct rw_policy p;
	char json[256], err[512] = "";
	__u64 t0, t1;
	int ok;

	t_count++;
	if (rw_datapath_load(&d, NULL, RW_DP_NO_PIN, err, sizeof(err)))
		FATAL("loading a second datapath: %s", err);
	snprintf(json, sizeof(json), leased, 1, "\"lease_seconds\": 30, ");
	if (rw_policy_parse(json, strlen(json), "lease", &p, &perr))
		FATAL("lease: %s", perr.text);
	t0 = mono_ns();
	ok = CHECK(rw_apply(&d, NULL, &p, &res, err, sizeof(err)) == 0, "apply", "%s", err);
	t1 = mono_ns();
	rw_policy_free(&p);
	rw_config_read(&d, &cfg);
	ok &= CHECK(cfg.lease_deadline_ns >= t0 + 30000000000ULL &&
			    cfg.lease_deadline_ns <= t1 + 30000000000ULL,
		    "deadline", "%llu, not in [%llu, %llu] + 30 s",
		    (unsigned long long)cfg.lease_deadline_ns, (unsigned long long)t0,
		    (unsigned long long)t1);
	ok &= CHECK_EQ(cfg.lease_seconds, 30, "the lease the kernel keeps for renewals");
	/* A message renews it from the kernel's copy, with no snapshot at hand. */
	t0 = mono_ns();
	ok &= CHECK(rw_lease_renew(&d, err, sizeof(err)) == 0, "renew", "%s", err);
	rw_config_read(&d, &cfg);
	ok &= CHECK(cfg.lease_deadline_ns >= t0 + 30000000000ULL, "renewed deadline",
		    "%llu, before %llu + 30 s", (unsigned long long)cfg.lease_deadline_ns,
		    (unsigned long long)t0);
	snprintf(json, sizeof(json), leased, 2, "");
	if (rw_policy_parse(json, strlen(json), "lease", &p, &perr))
		FATAL("lease: %s", perr.text);
	ok &= CHECK(rw_apply(&d, NULL, &p, &res, err, sizeof(err)) == 0, "apply", "%s", err);
	rw_policy_free(&p);
	rw_config_read(&d, &cfg);
	ok &= CHECK_EQ(cfg.lease_deadline_ns, 0, "deadline after a snapshot without a lease");
	ok &= CHECK_EQ(cfg.lease_seconds, 0, "no lease kept");
	ok &= CHECK(rw_lease_renew(&d, err, sizeof(err)) == 0, "renew", "%s", err);
	rw_config_read(&d, &cfg);
	ok &= CHECK_EQ(cfg.lease_deadline_ns, 0, "a renewal without a lease writes no deadline");
	printf("%s %d - lease: an apply of lease_seconds 30 sets the deadline 30 s ahead and keeps "
	       "the lease for renewals; one without lease_seconds clears both\n",
	       ok ? "ok" : "not ok", t_count);
	rw_datapath_close(&d);
}
