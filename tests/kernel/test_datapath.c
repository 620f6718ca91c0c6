// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_datapath.c: the production programs judged on crafted packets through BPF_PROG_TEST_RUN,
 * with their maps filled by the same code the agent uses (policy parser, rw_apply, endpoint
 * binding). Each case checks the verdict, the reason, the allow path, the exact counters and
 * the ring buffer event. A last part sends real frames through a veth for what test_run cannot
 * build: headers outside the linear area and an out-of-band VLAN tag.
 *
 * Runs in a network namespace of its own (unshare), so the veths it makes vanish with it.
 */
#include "dp_suite.h"

int t_failed;
int t_count;

static void print_verified_insns(void)
{
	const char *names[2 * RW_DIR_COUNT] = {"rw_egress", "rw_ingress", "rw_egress6",
					       "rw_ingress6"};

	for (int d = 0; d < 2 * RW_DIR_COUNT; d++) {
		int fd = d < RW_DIR_COUNT ? dp.prog_fd[d] : dp.prog6_fd[d - RW_DIR_COUNT];
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			FATAL("prog info: %s", strerror(errno));
		printf("# %s: %u instructions verified, %u translated bytes\n", names[d],
		       info.verified_insns, info.xlated_prog_len);
	}
}

int main(void)
{
	struct utsname u;

	uname(&u);
	setvbuf(stdout, NULL, _IOLBF, 0);
	rw_log_setup_libbpf();
	printf("# runwall datapath suite on kernel %s\n", u.release);

	make_veths();
	char load_err[512];

	if (rw_datapath_load(&dp, NULL, RW_DP_NO_PIN, load_err, sizeof(load_err)))
		FATAL("loading the programs failed: %s", load_err);
	print_verified_insns();
	ring = ring_buffer__new(dp.map_fd[RW_M_EVENTS], on_event, NULL, NULL);
	if (!ring)
		FATAL("ring_buffer__new: %s", strerror(errno));
	set_budget(0, 0);	 /* no budget while the table checks one event per case */
	set_answer_budget(0, 0); /* nor for answers: every refusal of the tables is answered */

	bind_veth(0, POD_A);
	bind_veth(1, POD_B);
	bind_veth(3, POD_X);

	run_table(not_ready_cases, n_not_ready_cases);
	test_ipv6_not_ready();
	test_answer_not_ready();
	apply_json(policy_v1, 0, "policy v1");
	run_table(v1_cases, n_v1_cases);
	test_ipv6();
	test_answers();
	test_revoke();
	test_revoke_probe6();
	test_metadata_beats_rules();
	test_run_rules_after_ranges();
	test_verdict_cache();
	test_lease();
	test_lease_apply();
	apply_json(policy_v1, -ESTALE, "the same revision again");
	apply_json(policy_v2, 0, "policy v2");
	run_table(v2_cases, n_v2_cases);
	test_stale_stamp();
	test_generations();
	test_event_budget();
	test_event_budget_exact();
	test_answer_budget();
	test_conntrack_isolation();
	test_conntrack_expire();
	test_conntrack_slots();
	test_ipv6_binding();
	test_ring_full();
	test_interrupted_apply();
	test_big_apply();
	test_flip();
	test_flip_pinned();
	test_flip_lease();
	test_real_traffic(&dp, devs[0], ifindex_of[0], POD_A);
	test_run_generations();
	test_refusal_modes();
	test_revoke_drop_mode();
	test_revoke_ended();
	test_answers6();
	test_answers6_sockets();
	test_answer6_budget();
	test_revoke6();
	test_refusal_modes6();
	test_apply6();
	test_ipv6_policy();
	icmp6_setup();
	test_ndp();
	test_icmp6();
	icmp6_teardown();

	printf("1..%d\n", t_count);
	printf("# %s: %d checks failed\n", t_failed ? "FAIL" : "PASS", t_failed);
	ring_buffer__free(ring);
	rw_datapath_close(&dp);
	return t_failed ? 1 : 0;
}
