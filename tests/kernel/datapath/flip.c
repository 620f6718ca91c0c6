// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* flip.c (test_datapath): the flip: the state word moves only through rw_flip, also on pinned maps.
 */
#include <signal.h>
#include <sys/wait.h>
#include "dp_suite.h"

/* ---- the flip: the state word moves only through rw_flip ---- */

static int apply_rev(struct rw_datapath *d, unsigned int revision, char *err, size_t errlen)
{
	char *json = policy_at(revision, revision & 1);
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	int ret;

	if (rw_policy_parse(json, strlen(json), "flip", &p, &perr))
		FATAL("flip: %s", perr.text);
	ret = rw_apply(d, NULL, &p, &res, err, errlen);
	rw_policy_free(&p);
	free(json);
	return ret;
}

/* An apply flips the state word to exactly (revision, ready, idle slot) and the kernel's clock
 * stamps applied_ns; a flip from a state that is not the one in force stores nothing and says
 * what it found; rw_config_write() never changes the state word, whatever its caller's copy
 * holds; without rw_flip an apply fails with a sentence naming it and nothing moves, so
 * rw_flip is what moves the state.
 */
void test_flip(void)
{
	struct rw_config before, cfg;
	char err[512] = "", msg[512];
	__u64 t0, t1, s;
	unsigned int rev;
	int ret, ok, fd;

	rw_config_read(&dp, &before);
	rev = (unsigned int)RW_STATE_REVISION(before.state) + 1;
	t_count++;
	ok = CHECK(dp.flip_fd >= 0, "rw_flip", "not loaded in a private datapath");
	t0 = mono_ns();
	ret = apply_rev(&dp, rev, err, sizeof(err));
	t1 = mono_ns();
	rw_config_read(&dp, &cfg);
	s = RW_STATE(rev, 1, !RW_STATE_SLOT(before.state));
	ok &= CHECK(ret == 0, "apply", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx, expected %#llx", (unsigned long long)cfg.state,
		    (unsigned long long)s);
	ok &= CHECK(cfg.applied_ns >= t0 && cfg.applied_ns <= t1, "applied_ns",
		    "%llu, not in [%llu, %llu]", (unsigned long long)cfg.applied_ns,
		    (unsigned long long)t0, (unsigned long long)t1);
	ok &= CHECK(cfg.layout_version == before.layout_version &&
			    cfg.event_rate == before.event_rate &&
			    cfg.ct_per_sandbox == before.ct_per_sandbox &&
			    cfg.ct_node == before.ct_node,
		    "other fields", "changed by the flip");
	printf("%s %d - apply flips the state word by rw_flip to exactly %#llx (revision %u, slot "
	       "%u), applied_ns from the kernel's clock\n",
	       ok ? "ok" : "not ok", t_count, (unsigned long long)s, rev, RW_STATE_SLOT(s));

	t_count++;
	ret = rw_config_flip(&dp, before.state, RW_STATE(rev + 100, 1, 0), err, sizeof(err));
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, -ESTALE, "stale flip");
	ok &= CHECK(cfg.state == s, "state", "%#llx after a refused flip",
		    (unsigned long long)cfg.state);
	ok &= CHECK(strstr(err, "nothing flipped") != NULL, "message", "%s", err);
	printf("%s %d - a flip from a state not in force is refused: %s\n", ok ? "ok" : "not ok",
	       t_count, err);

	t_count++;
	cfg.state = RW_STATE(rev + 200, 0, 1); /* a stale or made-up copy of the word */
	cfg.event_burst = before.event_burst + 7;
	ret = rw_config_write(&dp, &cfg);
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, 0, "rw_config_write");
	ok &= CHECK(cfg.state == s, "state", "%#llx after rw_config_write, expected %#llx",
		    (unsigned long long)cfg.state, (unsigned long long)s);
	ok &= CHECK_EQ(cfg.event_burst, before.event_burst + 7, "event_burst written");
	cfg.event_burst = before.event_burst;
	rw_config_write(&dp, &cfg);
	printf("%s %d - rw_config_write writes the other fields and keeps the state word in "
	       "force\n",
	       ok ? "ok" : "not ok", t_count);

	t_count++;
	fd = dp.flip_fd;
	dp.flip_fd = -1;
	ret = apply_rev(&dp, rev + 1, err, sizeof(err));
	dp.flip_fd = fd;
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, -ENOTSUP, "apply without rw_flip");
	ok &= CHECK(strstr(err, "rw_flip") != NULL, "message", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx after the failed apply",
		    (unsigned long long)cfg.state);
	snprintf(msg, sizeof(msg), "%s", err);
	ret = apply_rev(&dp, rev + 1, err, sizeof(err));
	rw_config_read(&dp, &cfg);
	s = RW_STATE(rev + 1, 1, RW_STATE_SLOT(before.state));
	ok &= CHECK(ret == 0, "apply", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx, expected %#llx", (unsigned long long)cfg.state,
		    (unsigned long long)s);
	printf("%s %d - without rw_flip an apply fails (%s) and the state stays; with it, %#llx\n",
	       ok ? "ok" : "not ok", t_count, msg, (unsigned long long)s);
}

/* Pinned, as the agent has it: a fresh node is not ready (state 0), the first apply flips to
 * slot 0, a dry run over the pins (`runwall explain`) and the pins alone (the CLI, runwall-cni)
 * have no rw_flip and cannot flip, the state outlives the agent, and a restarted agent adopts
 * it and flips from it with its own rw_flip.
 */
void test_flip_pinned(void)
{
	struct rw_datapath a, dry, ro;
	struct rw_config cfg;
	char pins[64], err[512] = "";
	int ret, ok = 0;

	/* Closed at the end whether or not they were opened: nothing open to begin with. */
	memset(&a, 0, sizeof(a));
	for (int i = 0; i < RW_M__COUNT; i++)
		a.map_fd[i] = -1;
	for (int d = 0; d < RW_DIR_COUNT; d++)
		a.prog_fd[d] = -1;
	a.flip_fd = -1;
	a.lease_fd = -1;
	ro = a;
	snprintf(pins, sizeof(pins), "/sys/fs/bpf/rwtest-flip-%d", (int)getpid());
	t_count++;
	if (!CHECK(rw_datapath_load(&a, pins, 0, err, sizeof(err)) == 0, "load", "%s: %s", pins,
		   err))
		goto out;
	rw_config_read(&a, &cfg);
	ok = CHECK(cfg.state == 0, "fresh state", "%#llx", (unsigned long long)cfg.state);
	ok &= CHECK(a.flip_fd >= 0, "rw_flip", "not loaded by the agent's load");
	ret = apply_rev(&a, 1, err, sizeof(err));
	rw_config_read(&a, &cfg);
	ok &= CHECK(ret == 0, "first apply", "%s", err);
	ok &= CHECK(cfg.state == RW_STATE(1, 1, 0), "state", "%#llx after the first apply",
		    (unsigned long long)cfg.state);
	if (!CHECK(rw_datapath_load(&dry, pins, RW_DP_DRY_RUN, err, sizeof(err)) == 0, "dry load",
		   "%s", err))
		goto out_fail;
	ok &= CHECK(dry.flip_fd < 0, "dry run", "has rw_flip");
	ret = rw_config_flip(&dry, cfg.state, RW_STATE(9, 1, 1), err, sizeof(err));
	ok &= CHECK(ret == -ENOTSUP && strstr(err, "rw_flip"), "dry-run flip", "%d: %s", ret, err);
	rw_datapath_close(&dry);
	if (!CHECK(rw_datapath_open_pinned(&ro, pins, err, sizeof(err)) == 0, "open pinned", "%s",
		   err))
		goto out_fail;
	ok &= CHECK(ro.flip_fd < 0, "pins only", "have rw_flip");
	ok &= CHECK_EQ(rw_config_flip(&ro, cfg.state, RW_STATE(9, 1, 1), err, sizeof(err)),
		       -ENOTSUP, "pins-only flip");
	rw_datapath_close(&a); /* the agent exits */
	rw_config_read(&ro, &cfg);
	ok &= CHECK(cfg.state == RW_STATE(1, 1, 0), "state", "%#llx once the agent is gone",
		    (unsigned long long)cfg.state);
	if (!CHECK(rw_datapath_load(&a, pins, 0, err, sizeof(err)) == 0, "reload", "%s", err))
		goto out_fail;
	rw_config_read(&a, &cfg);
	ok &= CHECK(cfg.state == RW_STATE(1, 1, 0), "state", "%#llx after the restart's load",
		    (unsigned long long)cfg.state);
	ret = apply_rev(&a, 2, err, sizeof(err));
	rw_config_read(&ro, &cfg);
	ok &= CHECK(ret == 0, "apply after the restart", "%s", err);
	ok &= CHECK(cfg.state == RW_STATE(2, 1, 1), "state", "%#llx after the restarted apply",
		    (unsigned long long)cfg.state);
	goto out;
out_fail:
	ok = 0;
out:
	printf("%s %d - pinned: fresh state 0, revision 1 in slot 0, no flip from a dry run or the "
	       "pins alone, adopted after a restart and flipped to revision 2 in slot 1\n",
	       ok ? "ok" : "not ok", t_count);
	rw_datapath_close(&ro);
	rw_datapath_close(&a);
	rw_datapath_unpin(pins);
}

/* ---- the lease comes with the flip ---- */

/* policy_at(revision, v3) with lease_seconds (0: none). */
static void leased_at(unsigned int revision, int v3, __u32 lease_seconds, struct rw_policy *p)
{
	char *json = policy_at(revision, v3);
	struct rw_policy_error perr;

	if (rw_policy_parse(json, strlen(json), "flip-lease", p, &perr))
		FATAL("flip-lease: %s", perr.text);
	free(json);
	p->lease_seconds = lease_seconds;
}

/* An apply of `p` in a child killed (RUNWALL_APPLY_FAULT, the test build's hook) right after
 * its flip, as an agent that dies there; the datapath's maps are the parent's too. The parent
 * then forgets what the slots hold, as the restarted agent would. Whether it died there.
 */
static int apply_killed_after_flip(struct rw_policy *p)
{
	char fault[64], err[512];
	struct rw_apply_result res;
	int status;
	pid_t pid;

	snprintf(fault, sizeof(fault), "after-flip:%llu", (unsigned long long)p->revision);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		FATAL("fork: %s", strerror(errno));
	if (!pid) {
		setenv("RUNWALL_APPLY_FAULT", fault, 1);
		rw_apply(&dp, NULL, p, &res, err, sizeof(err));
		_exit(3); /* not killed at the step: the parent says so */
	}
	if (waitpid(pid, &status, 0) != pid)
		FATAL("waitpid: %s", strerror(errno));
	rw_apply_forget(&dp);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

/* The lease is in force with the policy that carries it, whatever happens to the agent:
 * killed right after the flip of a snapshot with a lease of 1 s, the kernel holds that lease
 * (lease_seconds, the deadline 1 s after the flip) and, once it passes, refuses the allowlist
 * run's other destinations lease-expired; a restarted agent's renewal moves it. Killed after
 * the flip of a snapshot without a lease, no lease is left: the old, expired deadline does not
 * judge the new policy. A lease write that fails (RUNWALL_APPLY_FAULT=lease-write) fails the
 * apply: nothing flipped, the lease in force unchanged, the same verdict as before; so does a
 * flip refused for its state word.
 */
void test_flip_lease(void)
{
	static const struct tcase expired = {
		"lease of the flipped snapshot expired: an allowlist run's other destination is "
		"lease-expired",
		EG(0, POD_A, "93.184.216.34", TCP, 41101, 443, SYN),
		REFUSED_RST(RW_REASON_LEASE_EXPIRED, "run-7f3a")};
	static const struct tcase unleased = {
		"no lease after the flip: the same destination is not-allowlisted",
		EG(0, POD_A, "93.184.216.34", TCP, 41102, 443, SYN),
		REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")};
	static const struct tcase kept = {
		"a failed lease write: the policy in force judges, unleased",
		EG(0, POD_A, "93.184.216.34", TCP, 41103, 443, SYN),
		REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")};
	struct rw_apply_result res;
	struct rw_config before, cfg;
	char err[512] = "";
	struct rw_policy p;
	unsigned int rev;
	__u64 t0, t1, s;
	int v3, ok, ret;

	rw_config_read(&dp, &before);
	rev = (unsigned int)RW_STATE_REVISION(before.state) + 1;
	v3 = (rev - 1) & 1; /* the variant in force: only the lease changes */

	t_count++;
	leased_at(rev, v3, 1, &p);
	t0 = mono_ns();
	ok = CHECK(apply_killed_after_flip(&p), "killed",
		   "the apply was not killed after its flip");
	t1 = mono_ns();
	rw_policy_free(&p);
	rw_config_read(&dp, &cfg);
	s = RW_STATE(rev, 1, !RW_STATE_SLOT(before.state));
	ok &= CHECK(cfg.state == s, "state", "%#llx, expected %#llx", (unsigned long long)cfg.state,
		    (unsigned long long)s);
	ok &= CHECK_EQ(cfg.lease_seconds, 1, "lease_seconds after the flip");
	ok &= CHECK(cfg.lease_deadline_ns >= t0 + 1000000000ULL &&
			    cfg.lease_deadline_ns <= t1 + 1000000000ULL,
		    "deadline", "%llu, not in [%llu, %llu] + 1 s",
		    (unsigned long long)cfg.lease_deadline_ns, (unsigned long long)t0,
		    (unsigned long long)t1);
	printf("%s %d - flip lease: the agent killed right after the flip of a snapshot with a "
	       "lease leaves that lease in force (1 s, deadline %llu)\n",
	       ok ? "ok" : "not ok", t_count, (unsigned long long)cfg.lease_deadline_ns);
	/* The kernel enforces it: wait (bounded) for the deadline to pass by the programs' clock. */
	for (int i = 0; i < 200 && rw_lease_state(&cfg, NULL) != RW_LEASE_EXPIRED; i++) {
		usleep(50000);
		rw_config_read(&dp, &cfg);
	}
	run_case(&expired);
	t_count++;
	t0 = mono_ns();
	ok = CHECK(rw_lease_renew(&dp, err, sizeof(err)) == 0, "renew", "%s", err);
	rw_config_read(&dp, &cfg);
	ok &= CHECK(cfg.lease_deadline_ns >= t0 + 1000000000ULL, "renewed deadline",
		    "%llu, before %llu + 1 s", (unsigned long long)cfg.lease_deadline_ns,
		    (unsigned long long)t0);
	printf("%s %d - flip lease: the restarted agent's renewal moves that lease\n",
	       ok ? "ok" : "not ok", t_count);
	rw_lease_write(&dp, 1, err, sizeof(err)); /* expired again, for the removal below */

	t_count++;
	leased_at(rev + 1, v3, 0, &p);
	ok = CHECK(apply_killed_after_flip(&p), "killed",
		   "the apply was not killed after its flip");
	rw_policy_free(&p);
	rw_config_read(&dp, &cfg);
	s = RW_STATE(rev + 1, 1, RW_STATE_SLOT(before.state));
	ok &= CHECK(cfg.state == s, "state", "%#llx, expected %#llx", (unsigned long long)cfg.state,
		    (unsigned long long)s);
	ok &= CHECK_EQ(cfg.lease_seconds, 0, "lease_seconds after the flip");
	ok &= CHECK_EQ(cfg.lease_deadline_ns, 0, "deadline after the flip");
	printf("%s %d - flip lease: killed right after the flip of a snapshot without a lease, no "
	       "lease is left (the old one had expired)\n",
	       ok ? "ok" : "not ok", t_count);
	run_case(&unleased);

	t_count++;
	leased_at(rev + 2, v3, 30, &p);
	setenv("RUNWALL_APPLY_FAULT", "lease-write", 1);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	unsetenv("RUNWALL_APPLY_FAULT");
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, -EIO, "apply with a failing lease write");
	ok &= CHECK(strstr(err, "lease") != NULL, "message", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx after the failed apply, expected %#llx",
		    (unsigned long long)cfg.state, (unsigned long long)s);
	ok &= CHECK_EQ(cfg.lease_seconds, 0, "lease_seconds after the failed apply");
	ok &= CHECK_EQ(cfg.lease_deadline_ns, 0, "deadline after the failed apply");
	printf("%s %d - flip lease: a lease write that fails fails the apply (%s), nothing moves\n",
	       ok ? "ok" : "not ok", t_count, err);
	run_case(&kept);
	/* A flip refused for its state word stores no lease either. */
	t_count++;
	ret = rw_config_flip_leased(&dp, s ^ 1, RW_STATE(rev + 50, 1, 0), 30, err, sizeof(err));
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, -ESTALE, "stale leased flip");
	ok &= CHECK(cfg.state == s && cfg.lease_seconds == 0 && cfg.lease_deadline_ns == 0,
		    "after the refused flip", "state %#llx, %u s, deadline %llu",
		    (unsigned long long)cfg.state, cfg.lease_seconds,
		    (unsigned long long)cfg.lease_deadline_ns);
	printf("%s %d - flip lease: a flip from a state not in force stores no lease: %s\n",
	       ok ? "ok" : "not ok", t_count, err);
	t_count++;
	t0 = mono_ns();
	ok = CHECK(rw_apply(&dp, NULL, &p, &res, err, sizeof(err)) == 0, "apply again", "%s", err);
	rw_policy_free(&p);
	rw_config_read(&dp, &cfg);
	ok &= CHECK_EQ(cfg.lease_seconds, 30, "lease_seconds");
	ok &= CHECK(cfg.lease_deadline_ns >= t0 + 30000000000ULL, "deadline",
		    "%llu, before %llu + 30 s", (unsigned long long)cfg.lease_deadline_ns,
		    (unsigned long long)t0);
	/* And none for the tests after this one. */
	leased_at(rev + 3, v3, 0, &p);
	ok &= CHECK(rw_apply(&dp, NULL, &p, &res, err, sizeof(err)) == 0, "apply", "%s", err);
	rw_policy_free(&p);
	rw_config_read(&dp, &cfg);
	ok &= CHECK(cfg.lease_seconds == 0 && cfg.lease_deadline_ns == 0, "no lease",
		    "%u s, deadline %llu", cfg.lease_seconds,
		    (unsigned long long)cfg.lease_deadline_ns);
	printf("%s %d - flip lease: the same apply, unfaulted, sets its lease; the next one, "
	       "without, clears it\n",
	       ok ? "ok" : "not ok", t_count);
}
