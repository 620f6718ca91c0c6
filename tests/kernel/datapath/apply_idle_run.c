// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* apply_idle_run.c (test_datapath): a run without pods keeps its index, its counters and its
 * revision across an apply that does not change it: the apply plans it from the live slot's
 * shadow, as it plans the runs with pods.
 */
#include "dp_suite.h"

#define IDLE_RUN \
	"{\"id\": \"run-idle\", \"pods\": [], \"allow\": [{\"ip\": \"52.1.2.3\", \"tcp\": [443]}]}"
#define IDLE_DEST "52.1.2.3"

/* policy v2 at `revision`, with run-idle after its runs and, if `more`, a rule more for
 * run-b77e (a change to another run).
 */
static char *idle_policy(unsigned int revision, bool more)
{
	const char *b77e = "{\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]}";
	char *v2 = policy_at(revision, 0), *out, *at;
	size_t cap = strlen(v2) + 512;

	out = malloc(cap);
	at = strstr(v2, b77e);
	if (!out || !at)
		FATAL("run-idle's snapshot: no room, or no run-b77e in policy v2");
	snprintf(out, cap, "%.*s%s%s,\n    %s%s", (int)(at - v2), v2,
		 more ? "{\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"], \"allow\": [{\"ip\": "
			"\"52.1.2.4\", \"tcp\": [443]}]}"
		      : b77e,
		 "", IDLE_RUN, at + strlen(b77e));
	free(v2);
	return out;
}

/* Apply json over `prev` (NULL: unknown), parsed into *p (the caller frees it). */
static void apply_idle(const char *json, const struct rw_policy *prev, struct rw_policy *p,
		       const char *what)
{
	struct rw_policy_error perr;
	struct rw_apply_result res;
	char err[512];

	if (rw_policy_parse(json, strlen(json), what, p, &perr))
		FATAL("%s: %s", what, perr.text);
	if (rw_apply(&dp, prev, p, &res, err, sizeof(err)))
		FATAL("%s: rw_apply: %s", what, err);
}

/* run-idle's index: the scope of its rule in the live slot's exact table (0: none). */
static __u32 idle_index(void)
{
	int fd = rw_live_inner_fd(&dp, RW_M_ALLOW_EXACT);
	struct rw_allow_key k, prev;
	__u32 scope = 0;
	__be32 dest;
	bool first = true;

	if (fd < 0)
		FATAL("live %s: %s", rw_map_names[RW_M_ALLOW_EXACT], strerror(-fd));
	inet_pton(AF_INET, IDLE_DEST, &dest);
	while (bpf_map_get_next_key(fd, first ? NULL : &prev, &k) == 0) {
		first = false;
		prev = k;
		if (k.daddr == dest && k.scope)
			scope = k.scope;
	}
	close(fd);
	return scope;
}

void test_idle_run(void)
{
	unsigned int rev = (unsigned int)revision_now() + 1;
	int ncpu = libbpf_num_possible_cpus(), ok;
	struct rw_counters *per_cpu = calloc(ncpu, sizeof(*per_cpu)), sum;
	struct rw_policy first, second, last;
	__u64 run_rev0 = 0, run_rev1 = 0;
	__u32 idx0, idx1;
	char *json;

	if (!per_cpu)
		FATAL("no memory");
	json = idle_policy(rev, false);
	apply_idle(json, NULL, &first, "run-idle");
	free(json);
	idx0 = idle_index();
	if (!idx0)
		FATAL("run-idle: its rule is not in the live slot");
	/* Counts as if its pods had sent, then left: they are its own, not to be zeroed. */
	per_cpu[0].packets[RW_DIR_EGRESS][RW_REASON_ALLOWED] = 7;
	if (bpf_map_update_elem(dp.map_fd[RW_M_COUNTERS], &idx0, per_cpu, BPF_ANY))
		FATAL("rw_counters[%u]: %s", idx0, strerror(errno));
	bpf_map_lookup_elem(dp.map_fd[RW_M_RUN_REVS], &idx0, &run_rev0);

	json = idle_policy(rev + 1, true);
	apply_idle(json, &first, &second, "run-idle, run-b77e changed");
	free(json);
	idx1 = idle_index();
	rw_counters_read(&dp, idx1, &sum);
	bpf_map_lookup_elem(dp.map_fd[RW_M_RUN_REVS], &idx1, &run_rev1);
	t_count++;
	ok = CHECK_EQ(idx1, idx0, "run-idle's index after another run's change");
	ok &= CHECK_EQ(sum.packets[RW_DIR_EGRESS][RW_REASON_ALLOWED], 7, "run-idle's counter");
	ok &= CHECK_EQ(run_rev1, run_rev0, "run-idle's revision in rw_run_revs");
	printf("%s %d - a run without pods keeps its index (%u -> %u), its counters (%llu) and its "
	       "revision (%llu -> %llu) across another run's change\n",
	       ok ? "ok" : "not ok", t_count, idx0, idx1,
	       (unsigned long long)sum.packets[RW_DIR_EGRESS][RW_REASON_ALLOWED],
	       (unsigned long long)run_rev0, (unsigned long long)run_rev1);

	/* Back to policy v2, as the steps after this one expect. */
	json = policy_at(rev + 2, 0);
	apply_idle(json, NULL, &last, "v2 again");
	free(json);
	rw_policy_free(&first);
	rw_policy_free(&second);
	rw_policy_free(&last);
	free(per_cpu);
}
