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
	const struct {
		const char *name;
		const int *fd;
	} progs[] = {
		{"rw_egress", &dp.prog_fd[RW_DIR_EGRESS]},
		{"rw_ingress", &dp.prog_fd[RW_DIR_INGRESS]},
		{"rw_egress6", &dp.prog6_fd[RW_DIR_EGRESS]},
		{"rw_ingress6", &dp.prog6_fd[RW_DIR_INGRESS]},
		{"rw_egress_icmp6", &dp.icmp6_fd[RW_DIR_EGRESS]},
		{"rw_ingress_icmp6", &dp.icmp6_fd[RW_DIR_INGRESS]},
	};

	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(*progs[i].fd, &info, &len))
			FATAL("prog info: %s", strerror(errno));
		printf("# %s: %u instructions verified, %u translated bytes\n", progs[i].name,
		       info.verified_insns, info.xlated_prog_len);
	}
}

/* The steps in the order they run: later ones rely on the state earlier ones leave (the policy
 * applied, the veths bound), so the order is the table's. Each step's name is printed before its
 * checks, and the steps with failed checks are named again at the end.
 */
static void step_not_ready(void)
{
	run_table(not_ready_cases, n_not_ready_cases);
}

static void step_policy_v1(void)
{
	apply_json(policy_v1, 0, "policy v1");
	run_table(v1_cases, n_v1_cases);
}

static void step_same_revision(void)
{
	apply_json(policy_v1, -ESTALE, "the same revision again");
}

static void step_policy_v2(void)
{
	apply_json(policy_v2, 0, "policy v2");
	run_table(v2_cases, n_v2_cases);
}

static void step_real_traffic(void)
{
	test_real_traffic(&dp, devs[0], ifindex_of[0], POD_A);
}

static const struct dp_step {
	const char *name;
	void (*fn)(void);
} steps[] = {
	{"not ready", step_not_ready},
	{"ipv6 not ready", test_ipv6_not_ready},
	{"answer not ready", test_answer_not_ready},
	{"policy v1", step_policy_v1},
	{"ipv6", test_ipv6},
	{"answers", test_answers},
	{"answer tunnels", test_answer_tunnels},
	{"revoke", test_revoke},
	{"revoke probe6", test_revoke_probe6},
	{"revoke probe shares", test_revoke_probe_shares},
	{"metadata beats rules", test_metadata_beats_rules},
	{"run rules after ranges", test_run_rules_after_ranges},
	{"verdict cache", test_verdict_cache},
	{"lease", test_lease},
	{"lease apply", test_lease_apply},
	{"the same revision again", step_same_revision},
	{"policy v2", step_policy_v2},
	{"stale stamp", test_stale_stamp},
	{"generations", test_generations},
	{"event budget", test_event_budget},
	{"event budget exact", test_event_budget_exact},
	{"answer budget", test_answer_budget},
	{"conntrack isolation", test_conntrack_isolation},
	{"conntrack expire", test_conntrack_expire},
	{"conntrack close", test_conntrack_close},
	{"conntrack slots", test_conntrack_slots},
	{"ipv6 binding", test_ipv6_binding},
	{"ring full", test_ring_full},
	{"interrupted apply", test_interrupted_apply},
	{"big apply", test_big_apply},
	{"idle run", test_idle_run},
	{"flip", test_flip},
	{"flip pinned", test_flip_pinned},
	{"flip lease", test_flip_lease},
	{"real traffic", step_real_traffic},
	{"run generations", test_run_generations},
	{"refusal modes", test_refusal_modes},
	{"revoke drop mode", test_revoke_drop_mode},
	{"revoke ended", test_revoke_ended},
	{"answers6", test_answers6},
	{"answers6 sockets", test_answers6_sockets},
	{"answer6 budget", test_answer6_budget},
	{"revoke6", test_revoke6},
	{"refusal modes6", test_refusal_modes6},
	{"apply6", test_apply6},
	{"ipv6 policy", test_ipv6_policy},
	{"rule names", test_rule_names},
	{"principals", test_principals},
	{"icmp6 setup", icmp6_setup},
	{"ndp", test_ndp},
	{"icmp6", test_icmp6},
	{"icmp6 teardown", icmp6_teardown},
	{"lookups", test_lookups},
	{"probe scope", test_probe_scope},
};

int main(void)
{
	const char *failed_steps[sizeof(steps) / sizeof(steps[0])];
	size_t n_failed_steps = 0;
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

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int before = t_failed;

		printf("# -- %s\n", steps[i].name);
		steps[i].fn();
		if (t_failed > before)
			failed_steps[n_failed_steps++] = steps[i].name;
	}

	printf("1..%d\n", t_count);
	printf("# %s: %d checks failed\n", t_failed ? "FAIL" : "PASS", t_failed);
	for (size_t i = 0; i < n_failed_steps; i++)
		printf("# failed in step: %s\n", failed_steps[i]);
	ring_buffer__free(ring);
	rw_datapath_close(&dp);
	return t_failed ? 1 : 0;
}
