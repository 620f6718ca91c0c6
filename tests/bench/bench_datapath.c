// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bench_datapath.c: what a verdict costs. Each path of the production programs runs through
 * BPF_PROG_TEST_RUN with `repeat`, next to a program that only returns TC_ACT_UNSPEC (the cost
 * of test_run itself), in the same run; the median of several rounds is reported, and the
 * ratio to the baseline. Policy size is varied to show the lookups stay O(1).
 *
 *   bench_datapath [ROUNDS] [REPEAT]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "datapath.h"
#include "harness.h"
#include "log.h"
#include "pkt.h"
#include "policy.h"

int t_failed;
int t_count;

static struct rw_datapath dp;
static int ifindex;

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

/* Median ns per packet over `rounds` test runs of `repeat` packets each. */
static __u32 measure(int prog_fd, const struct pkt_spec *spec, int rounds, __u32 repeat)
{
	struct __sk_buff ctx = { .ifindex = ifindex };
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(spec, buf);
	__u32 *d = calloc(rounds, sizeof(*d)), med;

	for (int r = 0; r < rounds; r++) {
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = buf, .data_size_in = len,
			    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = repeat);

		if (bpf_prog_test_run_opts(prog_fd, &opts))
			FATAL("test_run: %s", strerror(errno));
		d[r] = opts.duration;
	}
	qsort(d, rounds, sizeof(*d), cmp_u32);
	med = d[rounds / 2];
	free(d);
	return med;
}

static int load_baseline(void)
{
	struct bpf_insn insns[] = {
		{ BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, -1 },
		{ BPF_JMP | BPF_EXIT, 0, 0, 0, 0 },
	};

	return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "rw_baseline", "GPL", insns, 2, NULL);
}

/* A snapshot with `runs` runs of one pod and `rules` allow rules each (half exact, half CIDR),
 * and the seed's services. The benchmark pod is the last run's.
 */
static char *make_policy(unsigned int revision, int runs, int rules)
{
	size_t cap = 1024 + (size_t)runs * (200 + rules * 80), len = 0;
	char *s = malloc(cap);

	len += snprintf(s + len, cap - len,
			"{\"revision\": %u, \"deny\": [\"10.0.0.0/16\"], \"services\": ["
			"{\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443, 8443]},"
			"{\"name\": \"model\", \"cidr\": \"172.21.0.0/24\", \"tcp\": [443]}],"
			"\"inbound\": [{\"name\": \"app-tier\", \"cidr\": \"172.20.0.12/32\", "
			"\"tcp\": [4096]}], \"runs\": [", revision);
	for (int r = 0; r < runs; r++) {
		len += snprintf(s + len, cap - len, "%s{\"id\": \"run-%d\", \"pods\": [\"10.%d.%d.%d\"]"
				", \"allow\": [", r ? "," : "", r, 1 + r / 65536, (r / 256) % 256,
				r % 256);
		for (int i = 0; i < rules; i++)
			len += snprintf(s + len, cap - len, "%s{\"%s\": \"44.%d.%d.%s\", \"tcp\": [%d]}",
					i ? "," : "", i % 2 ? "cidr" : "ip", r % 256, i % 256,
					i % 2 ? "0/24" : "1", 1000 + i);
		len += snprintf(s + len, cap - len, "]}");
	}
	snprintf(s + len, cap - len, "]}");
	return s;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 15;
	__u32 repeat = argc > 2 ? atoi(argv[2]) : 200000;
	static const int sizes[][2] = { { 1, 1 }, { 250, 40 }, { 1000, 30 } };
	int baseline = -1;
	char pod[32];

	setvbuf(stdout, NULL, _IOLBF, 0);
	rw_log_setup_libbpf();
	if (unshare(CLONE_NEWNET) || system("ip link add rwb0 type veth peer name rwb0p"))
		FATAL("a private netns with a veth (root needed)");
	ifindex = if_nametoindex("rwb0");
	char load_err[512];

	if (rw_datapath_load(&dp, NULL, RW_DP_NO_PIN, load_err, sizeof(load_err)))
		FATAL("loading the programs: %s", load_err);
	baseline = load_baseline();
	if (baseline < 0)
		FATAL("baseline program: %s", strerror(errno));

	printf("# %d rounds of %u packets per case; median ns/packet; ratio to an empty program "
	       "in the same run\n", rounds, repeat);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int runs = sizes[s][0], rules = sizes[s][1], r = runs - 1;
		struct rw_policy_error perr;
		struct rw_apply_result res;
		struct rw_policy p;
		char *json = make_policy(s + 1, runs, rules), err[512];
		struct in_addr a;
		__u32 base;

		if (rw_policy_parse(json, strlen(json), "bench", &p, &perr))
			FATAL("%s", perr.text);
		if (rw_apply(&dp, NULL, &p, &res, err, sizeof(err)))
			FATAL("apply: %s", err);
		snprintf(pod, sizeof(pod), "10.%d.%d.%d", 1 + r / 65536, (r / 256) % 256, r % 256);
		inet_pton(AF_INET, pod, &a);
		rw_endpoint_bind(&dp, ifindex, a.s_addr);
		printf("\n## %d runs x %d rules: %u map entries, apply %.1f ms (build %.1f, flip %.1f)\n",
		       runs, rules, res.entries + res.pods, res.total_ms, res.build_ms, res.flip_ms);

		struct {
			const char *name;
			int dir;
			struct pkt_spec pkt;
		} cases[] = {
			{ "allowed, service exact ip:port (SYN)", RW_DIR_EGRESS,
			  { .src = pod, .dst = "172.20.0.10", .proto = IPPROTO_TCP, .sport = 40000,
			    .dport = 443, .tcp_flags = 0x02 } },
			{ "allowed, established ACK", RW_DIR_EGRESS,
			  { .src = pod, .dst = "172.20.0.10", .proto = IPPROTO_TCP, .sport = 40000,
			    .dport = 443, .tcp_flags = 0x10 } },
			{ "allowed, run's CIDR rule (LPM)", RW_DIR_EGRESS,
			  { .src = pod, .dst = "44.0.1.9", .proto = IPPROTO_TCP, .sport = 40001,
			    .dport = 1001, .tcp_flags = 0x10 } },
			{ "reply into the pod", RW_DIR_INGRESS,
			  { .src = "172.20.0.10", .dst = pod, .proto = IPPROTO_TCP, .sport = 443,
			    .dport = 40000, .tcp_flags = 0x10 } },
			{ "drop not-allowlisted (every lookup)", RW_DIR_EGRESS,
			  { .src = pod, .dst = "93.184.216.34", .proto = IPPROTO_TCP, .sport = 40002,
			    .dport = 443, .tcp_flags = 0x10 } },
			{ "drop metadata", RW_DIR_EGRESS,
			  { .src = pod, .dst = "169.254.169.254", .proto = IPPROTO_TCP,
			    .sport = 40003, .dport = 80, .tcp_flags = 0x02 } },
			{ "drop fragment (parse only)", RW_DIR_EGRESS,
			  { .src = pod, .dst = "172.20.0.10", .proto = IPPROTO_TCP, .sport = 40004,
			    .dport = 443, .frag = 0x2000 } },
		};

		base = measure(baseline, &cases[0].pkt, rounds, repeat);
		printf("%-40s %6u ns\n", "empty program (test_run overhead)", base);
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			__u32 ns = measure(dp.prog_fd[cases[c].dir], &cases[c].pkt, rounds, repeat);

			printf("%-40s %6u ns  %5.2fx  (+%d ns)\n", cases[c].name, ns,
			       base ? (double)ns / base : 0, (int)ns - (int)base);
		}
		rw_policy_free(&p);
		free(json);
	}
	close(baseline);
	rw_datapath_close(&dp);
	return 0;
}
