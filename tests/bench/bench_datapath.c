// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* bench_datapath.c: what runwall costs, measured on the real kernel in a private netns.
 *
 *   per-packet  each verdict path through BPF_PROG_TEST_RUN next to an empty TC program in the
 *               same round, at 10, 1 000, 10 000 and 100 000 rules, over 1024 flows to
 *               destinations drawn across the runs' rules, from 16 veths bound to pods spread
 *               across the table (one hot key would hide cache misses). Each flow 32 times per
 *               test_run (the targets' method), and once per test_run ("cold": every packet a new
 *               key after a syscall; a new flow for SYNs: the only way to measure a new flow,
 *               its row is the cold one). Median over rounds of the mean. The snapshot is
 *               dual-stack and the veths too: each path again in IPv6 in the same round, with
 *               its ratio to the same path in IPv4.
 *   apply       10 000 pods / 100 000 rules: a full apply from empty, then 1 % changes.
 *   first-packet  from the start of an apply to the first packet judged by the new snapshot,
 *               seen by a thread that sends packets all along: p50 and p99 over 100 changes.
 *   events      the real agent drains the ring while packets produce drop events at rising
 *               rates: the highest rate without one lost event.
 *   memory      kernel memory of every map at 100 000 rules (memlock), per rule; the agent's RSS
 *               with that snapshot loaded.
 *
 *   bench_datapath --json FILE [--runwall BIN] [--quick] [SECTION...]
 * Results are rows {name, value, unit, target, cmp, met, ...} in FILE (tests/bench/report.py
 * prints them and regenerates the table of docs/benchmarks.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/pkt_cls.h>

#define BENCH_NAME "bench"
#include "bench.h"
#include "apply.h"
#include "datapath.h"
#include "log.h"
#include "pkt.h"
#include "policy.h"

#define NVETH	     16
#define PODS_PER_RUN 10
#define TCP	     IPPROTO_TCP

static int ifindex[NVETH];
static char lerr[512]; /* what rw_datapath_load() says when it fails */
static int quick;
static json_t *rows;
static const char *runwall_bin = "build/runwall";

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One result row. cmp "<=" or ">=" against target; target 0 with cmp NULL: information. */
static void row(const char *section, const char *name, double value, const char *unit,
		const char *cmp, double target, json_t *extra)
{
	json_t *o = json_pack("{s:s, s:s, s:f, s:s}", "section", section, "name", name, "value",
			      value, "unit", unit);
	int met = 1;

	if (cmp) {
		met = !strcmp(cmp, "<=") ? value <= target : value >= target;
		json_object_set_new(o, "cmp", json_string(cmp));
		json_object_set_new(o, "target", json_real(target));
		json_object_set_new(o, "met", json_boolean(met));
		/* How far from the target: positive = better than it, as a fraction of it. */
		json_object_set_new(o, "margin",
				    json_real(!strcmp(cmp, "<=") ? (target - value) / target
								 : (value - target) / target));
	}
	if (extra)
		json_object_update(o, extra), json_decref(extra);
	json_array_append_new(rows, o);
	printf("  %-58s %12.3f %-8s", name, value, unit);
	if (cmp)
		printf(" target %s %-10g %s", cmp, target, met ? "met" : "MISSED");
	printf("\n");
}

/* ---- Snapshots ------------------------------------------------------------------------ */

/* Pod p of run r: 10.(100 + id/65536).(id/256).(id%256), id = r * PODS_PER_RUN + p. */
static __be32 pod_ip(int r, int p)
{
	__u32 id = r * PODS_PER_RUN + p;

	return htonl((10u << 24) | ((100 + id / 65536) << 16) | (((id >> 8) & 255) << 8) |
		     (id & 255));
}

/* Rule i of run r: every tenth a /24 in 45/8 and up, the others one address in 44/8. */
static int rule_is_cidr(int i)
{
	return i % 10 == 9;
}

static __be32 rule_addr(int r, int i)
{
	__u32 n = (__u32)r * 128 + i;

	return rule_is_cidr(i) ? htonl((45u << 24) + n * 256) : htonl((44u << 24) + n + 1);
}

static int rule_port(int r, int i, int shift)
{
	return 1000 + (i + shift) % 1000;
}

static char *ipstr(__be32 a, char *buf)
{
	inet_ntop(AF_INET, &a, buf, 16);
	return buf;
}

/* The IPv6 half, the same numbering: pod p of run r is 2600:1f14:a::(id + 1); rule i of run r
 * (n = r * 128 + i) one address in 2a00:1450:(n >> 16):(n & 0xffff)::/64, every tenth that
 * whole /64 in 2a01:1450::/32 (a destination inside it: its ::1).
 */
static char *pod6str(int r, int p, char *buf)
{
	snprintf(buf, INET6_ADDRSTRLEN, "2600:1f14:a::%x", r * PODS_PER_RUN + p + 1);
	return buf;
}

static char *rule6str(int r, int i, int prefix, char *buf)
{
	__u32 n = (__u32)r * 128 + i;

	snprintf(buf, INET6_ADDRSTRLEN + 4, "2a0%d:1450:%x:%x::%s", rule_is_cidr(i), n >> 16,
		 n & 0xffff, rule_is_cidr(i) && prefix ? "/64" : "1");
	return buf;
}

/* A snapshot of `runs` runs of PODS_PER_RUN pods and `rules` allow rules each. Runs with
 * r % 100 == changed % 100 (1 %) have their ports shifted by `changed` (a 1 % change per step);
 * a negative `changed` shifts run 0's alone, by -changed (one run's change). With `probe`, run 0
 * also allows 44.255.0.1:9999.
 */
static char *make_policy_refusal(unsigned long long revision, int runs, int rules, int changed,
				 int probe, const char *refusal, int v6)
{
	size_t cap = 4096 + (size_t)runs * (200 + PODS_PER_RUN * 60 + rules * 150), len = 0;
	char *s = malloc(cap), a[INET6_ADDRSTRLEN + 4];

	if (!s)
		DIE("out of memory");
	len += snprintf(
		s + len, cap - len,
		"{\"revision\": %llu, \"refusal\": \"%s\", \"deny\": [\"10.0.0.0/16\"%s], "
		"\"services\": ["
		"{\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443, 8443]},"
		"{\"name\": \"model\", \"cidr\": \"172.21.0.0/24\", \"tcp\": [443]}%s],"
		"\"inbound\": [{\"name\": \"app-tier\", \"cidr\": \"172.20.0.12/32\", "
		"\"tcp\": [4096]}%s], \"runs\": [",
		revision, refusal, v6 ? ", \"2600:1f14:dead::/48\"" : "",
		v6 ? ",{\"name\": \"egress-proxy6\", \"ip\": \"2600:1f14:100::10\", "
		     "\"tcp\": [443, 8443]},"
		     "{\"name\": \"model6\", \"cidr\": \"2600:1f14:200::/64\", \"tcp\": [443]}"
		   : "",
		v6 ? ",{\"name\": \"app-tier6\", \"cidr\": \"2600:1f14:300::12/128\", "
		     "\"tcp\": [4096]}"
		   : "");
	for (int r = 0; r < runs; r++) {
		int shift = changed < 0				  ? (r ? 0 : -changed)
			    : changed && r % 100 == changed % 100 ? changed
								  : 0;

		len += snprintf(s + len, cap - len, "%s{\"id\": \"run-%d\", \"pods\": [",
				r ? "," : "", r);
		for (int p = 0; p < PODS_PER_RUN; p++)
			len += snprintf(s + len, cap - len, "%s\"%s\"", p ? "," : "",
					ipstr(pod_ip(r, p), a));
		for (int p = 0; v6 && p < PODS_PER_RUN; p++)
			len += snprintf(s + len, cap - len, ",\"%s\"", pod6str(r, p, a));
		len += snprintf(s + len, cap - len, "], \"allow\": [");
		for (int i = 0; i < rules; i++)
			len += snprintf(s + len, cap - len, "%s{\"%s\": \"%s%s\", \"tcp\": [%d]}",
					i ? "," : "", rule_is_cidr(i) ? "cidr" : "ip",
					ipstr(rule_addr(r, i), a), rule_is_cidr(i) ? "/24" : "",
					rule_port(r, i, shift));
		for (int i = 0; v6 && i < rules; i++)
			len += snprintf(s + len, cap - len, ",{\"%s\": \"%s\", \"tcp\": [%d]}",
					rule_is_cidr(i) ? "cidr" : "ip", rule6str(r, i, 1, a),
					rule_port(r, i, shift));
		if (probe && r == 0)
			len += snprintf(s + len, cap - len,
					",{\"ip\": \"44.255.0.1\", \"tcp\": [9999]}");
		len += snprintf(s + len, cap - len, "]}");
	}
	snprintf(s + len, cap - len, "]}");
	return s;
}

/* "refusal": "drop", except where an answer is measured: test_run's repeats run on one skb, and
 * an answer would make the first repeat's packet the reset that the others then judge. The drop
 * path measured is the refusal's judgement and event, as before answers existed. IPv4 only: the
 * per-packet section's dual-stack snapshot is make_policy_refusal(..., 1).
 */
static char *make_policy(unsigned long long revision, int runs, int rules, int changed, int probe)
{
	return make_policy_refusal(revision, runs, rules, changed, probe, "drop", 0);
}

/* Parse a snapshot, and settle the heap after it. Parsing 100 000 rules frees about a million
 * small blocks of jansson's; glibc keeps them in its fast bins and merges them all at the next
 * allocation of 1 KiB or more (malloc_consolidate()), 30-80 ms here. Without this, whichever
 * allocation comes first (the apply's) pays for the parse.
 */
static void parse(const char *json, struct rw_policy *p)
{
	struct rw_policy_error perr;
	void *volatile big;

	if (rw_policy_parse(json, strlen(json), "bench", p, &perr))
		DIE("snapshot: %s", perr.text);
	big = malloc(4096);
	free(big);
}

static void apply(struct rw_datapath *dp, const struct rw_policy *prev, const struct rw_policy *p,
		  struct rw_apply_result *res)
{
	char err[512];

	if (rw_apply(dp, prev, p, res, err, sizeof(err)))
		DIE("apply: %s", err);
}

static double pct(double *v, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);

	qsort(v, n, sizeof(*v), cmp_double);
	return v[i < n ? i : n - 1];
}

/* ---- Per packet ----------------------------------------------------------------------- */

static int load_baseline(void)
{
	struct bpf_insn insns[] = {
		{BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, -1},
		{BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
	};

	return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "rw_baseline", "GPL", insns, 2, NULL);
}

/* The programs, unpinned, with their config in cfg; returns the baseline program's fd. */
static int load_unpinned(struct rw_datapath *dp, struct rw_config *cfg)
{
	int base;

	if (rw_datapath_load(dp, NULL, RW_DP_NO_PIN, lerr, sizeof(lerr)))
		DIE("loading the programs: %s", lerr);
	base = load_baseline();
	if (base < 0)
		DIE("baseline program: %s", strerror(errno));
	rw_config_read(dp, cfg);
	return base;
}

struct probe_pkt {
	int veth;
	__u8 buf[PKT_MAX];
	size_t len;
};

static int run_n(int prog, const struct probe_pkt *p, __u32 repeat, __u32 *ns)
{
	struct __sk_buff ctx = {.ifindex = ifindex[p->veth]};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = p->buf, .data_size_in = p->len,
		    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = repeat);

	if (bpf_prog_test_run_opts(prog, &opts))
		DIE("test_run: %s", strerror(errno));
	if (ns)
		*ns = opts.duration;
	return opts.retval;
}

static int run_once(int prog, const struct probe_pkt *p, __u32 *ns)
{
	return run_n(prog, p, 1, ns);
}

static void build_probe(struct probe_pkt *p, int veth, const struct pkt_spec *spec)
{
	p->veth = veth;
	p->len = pkt_build(spec, p->buf);
}

static void build_pkt_proto(struct probe_pkt *p, int veth, int proto, __be32 src, __be32 dst,
			    int sport, int dport, int flags)
{
	char s[16], d[16];

	build_probe(p, veth,
		    &(struct pkt_spec){.src = ipstr(src, s),
				       .dst = ipstr(dst, d),
				       .proto = proto,
				       .sport = sport,
				       .dport = dport,
				       .tcp_flags = flags});
}

static void build_pkt(struct probe_pkt *p, int veth, __be32 src, __be32 dst, int sport, int dport,
		      int flags)
{
	build_pkt_proto(p, veth, TCP, src, dst, sport, dport, flags);
}

static void build_pkt6(struct probe_pkt *p, int veth, const char *src, const char *dst, int sport,
		       int dport, int flags)
{
	build_probe(p, veth,
		    &(struct pkt_spec){.src = src,
				       .dst = dst,
				       .proto = TCP,
				       .sport = sport,
				       .dport = dport,
				       .tcp_flags = flags,
				       .ipv6 = 1});
}

static struct ring_buffer *ring;

/* Mean ns per packet of one pass over `pkts`, each sent `repeat` times in one test_run (the
 * kernel reports the mean of the repeats). Events are drained as the agent would.
 */
static double pass(int prog, struct probe_pkt *pkts, int n, int want_ret, __u32 repeat)
{
	double sum = 0;
	__u32 ns;

	for (int k = 0; k < n; k++) {
		int ret = run_n(prog, &pkts[k], repeat, &ns);

		if (want_ret != 99 && ret != want_ret)
			DIE("packet %d: verdict %d, expected %d", k, ret, want_ret);
		sum += ns;
		if (ring && k % 128 == 127)
			ring_buffer__consume(ring);
	}
	return sum / n;
}

enum { P_EST_EG, P_EST_IN, P_NEW, P_DROP, P_COUNT };
static const char *const path_names[P_COUNT] = {
	"established flow, egress (pod -> world)",
	"established flow, ingress (reply into the pod)",
	"new allowed flow (SYN)",
	"drop with its event (not allowlisted)",
};
static const char *const path_keys[P_COUNT] = {"established_egress", "established_ingress",
					       "new_allowed", "drop_event"};
/* Issue 23's goals: the established flow <= 3 x empty, a new flow's insert <= 10 x, a refusal
 * with its event <= 5 x (a known flow's SYN, <= 5 x, below).
 */
static const double path_targets[P_COUNT] = {3, 3, 10, 5};
/* The warm SYNs of P_NEW's flows: [0] its verdict current, [1] its run changed. */
static const char *const syn_names[2] = {
	"SYN of a known flow, its verdict current (no insert)",
	"SYN of a known flow, its run changed (judged in full, no insert)",
};
static const char *const syn_keys[2] = {"syn_known", "syn_judged"};

/* Every run's rw_run_revs entry set to `to` (saving the old ones in `saved`), or put back
 * from `saved` (`to` 0): with every entry above every stamp, each known flow's next packet is
 * judged in full, as after an apply that changed every run.
 */
static void run_revs_set(struct rw_datapath *dp, __u64 *saved, __u64 to)
{
	int fd = dp->map_fd[RW_M_RUN_REVS];

	for (__u32 i = 0; i < RW_MAX_RUNS; i++) {
		if (to && bpf_map_lookup_elem(fd, &i, &saved[i]))
			DIE("rw_run_revs[%u]: %s", i, strerror(errno));
		if (bpf_map_update_elem(fd, &i, to ? &to : &saved[i], BPF_ANY))
			DIE("rw_run_revs[%u]: %s", i, strerror(errno));
	}
}

/* A refusal with its event and its answer: the same table, the node's refusal "answer", no
 * answer budget. An answer rewrites the packet test_run hands the program, so each packet is
 * its own test_run (the cold method, next to the empty program run the same way in the same
 * round): a TCP SYN answered with a reset, a UDP datagram with ICMP code 13. `*p` is the
 * snapshot in force; it is replaced by its answering twin (revision `revision`).
 */
static void answered(struct rw_datapath *dp, int base_prog, struct probe_pkt *tcp,
		     struct probe_pkt *udp, int n, int rounds, unsigned long long revision,
		     int runs, int rules, struct rw_policy *p)
{
	static const char *const names[] = {"refused SYN with its event and its reset",
					    "refused UDP with its event and its ICMP answer"};
	static const char *const keys[] = {"answer_rst", "answer_icmp"};
	char *json = make_policy_refusal(revision, runs, rules, 0, 0, "answer", 1), name[128];
	double base[16], ans[2][16], cbase;
	struct rw_apply_result ar;
	struct rw_policy next;

	parse(json, &next);
	apply(dp, p, &next, &ar);
	rw_policy_free(p);
	*p = next;
	for (int rd = 0; rd < rounds; rd++) {
		base[rd] = pass(base_prog, tcp, n, 99, 1);
		ans[0][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], tcp, n, TC_ACT_REDIRECT, 1);
		ans[1][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], udp, n, TC_ACT_REDIRECT, 1);
	}
	cbase = pct(base, rounds, 0.5);
	for (int c = 0; c < 2; c++) {
		double ns = pct(ans[c], rounds, 0.5);

		snprintf(name, sizeof(name), "%s, %d rules, cold", names[c], runs * rules);
		row("per-packet", name, ns / cbase, "x empty", "<=", 5,
		    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules, "path", keys[c], "ns",
			      ns, "empty_ns", cbase));
	}
	free(json);
}

/* What a refusal's event costs (issue 35): the warm drop path of the same packets with no
 * budget (event_rate 0: no bucket read, every event sent), through a budget that never runs
 * out (the token bucket read and moved, every event sent), and with the budget spent (the
 * bucket read; no ring reserve or submit, no clock read, no socket reads). The difference of
 * the last two is the event itself. "No budget" again after.
 */
static void event_cost(struct rw_datapath *dp, int base_prog, struct probe_pkt *drop, int n,
		       int rounds, int nrules)
{
	static const struct {
		const char *name, *key;
		__u32 rate, burst;
	} modes[] = {
		{"no budget, every event sent", "drop_event_nobudget", 0, 0},
		{"a budget never spent, every event sent", "drop_event_budget", 2000000000u,
		 2000000000u},
		{"the budget spent, no event", "drop_event_spent", 1, 1},
	};
	double base[16], ns[3][16], b;
	struct rw_config cfg;
	char name[160];

	for (int rd = 0; rd < rounds; rd++) {
		base[rd] = pass(base_prog, drop, n, 99, 32);
		for (int m = 0; m < 3; m++) {
			rw_config_read(dp, &cfg);
			cfg.event_rate = modes[m].rate;
			cfg.event_burst = modes[m].burst;
			rw_config_write(dp, &cfg);
			ns[m][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], drop, n, 2, 32);
		}
	}
	rw_config_read(dp, &cfg);
	cfg.event_rate = 0;
	rw_config_write(dp, &cfg);
	b = pct(base, rounds, 0.5);
	for (int m = 0; m < 3; m++) {
		double v = pct(ns[m], rounds, 0.5);

		snprintf(name, sizeof(name), "drop (not allowlisted), %s, %d rules", modes[m].name,
			 nrules);
		row("per-packet", name, v / b, "x empty", NULL, 0,
		    json_pack("{s:i, s:s, s:f, s:f}", "rules", nrules, "path", modes[m].key, "ns",
			      v, "empty_ns", b));
	}
}

static void per_packet(struct rw_datapath *dp, int base_prog, double ratios[][P_COUNT], int si,
		       int runs, int rules)
{
	const int n = quick ? 256 : 1024, rounds = quick ? 3 : 7;
	struct probe_pkt *est = calloc(n, sizeof(*est)), *rep = calloc(n, sizeof(*rep));
	struct probe_pkt *syn = calloc(n, sizeof(*syn)), *drop = calloc(n, sizeof(*drop));
	struct probe_pkt *udp = calloc(n, sizeof(*udp));
	/* The IPv6 half: the same flows, pods and rules in IPv6 (a [P_COUNT] row of pkts6 each). */
	struct probe_pkt *pkts6 = calloc((size_t)P_COUNT * n, sizeof(*pkts6));
	double res[P_COUNT + 1][16], cold[P_COUNT + 1][16], res6[P_COUNT][16], cold6[P_COUNT][16];
	/* A known flow's SYN judged in full, [0] IPv4, [1] IPv6 (run_revs_set()). */
	double judged[2][16];
	static __u64 saved_revs[RW_MAX_RUNS];
	const __u32 warm = 32;
	struct rw_apply_result ar;
	struct rw_policy p;
	char *json = make_policy_refusal(100 + 2 * si, runs, rules, 0, 0, "drop", 1), name[128];
	char a6[INET6_ADDRSTRLEN + 4], d6[INET6_ADDRSTRLEN + 4];
	static int sport_base = 10000;

	parse(json, &p);
	apply(dp, NULL, &p, &ar);
	for (int v = 0; v < NVETH; v++) {
		int r = v * runs / NVETH;
		struct rw_endpoint ep = {.pod_ip = pod_ip(r, v % PODS_PER_RUN),
					 .flags = RW_EP_IP4 | RW_EP_IP6};

		inet_pton(AF_INET6, pod6str(r, v % PODS_PER_RUN, a6), ep.pod_ip6);
		if (rw_endpoint_bind_addrs(dp, ifindex[v], &ep))
			DIE("binding veth %d", v);
	}
	srand(42 + si);
	for (int k = 0; k < n; k++) {
		int v = k % NVETH, r = v * runs / NVETH, i;
		__be32 pod = pod_ip(r, v % PODS_PER_RUN), dst;
		struct probe_pkt *q = &pkts6[k];

		do
			i = rand() % rules;
		while (rule_is_cidr(i) && rules > 1);
		pod6str(r, v % PODS_PER_RUN, a6);
		rule6str(r, i, 0, d6);
		build_pkt6(&q[P_EST_EG * n], v, a6, d6, sport_base + k, rule_port(r, i, 0), 0x10);
		build_pkt6(&q[P_EST_IN * n], v, d6, a6, rule_port(r, i, 0), sport_base + k, 0x10);
		snprintf(name, sizeof(name), "2606:4700:%x::1", k);
		build_pkt6(&q[P_DROP * n], v, a6, name, 30000 + k, 443, 0x02);
		build_pkt6(&q[P_NEW * n], v, a6, d6, sport_base + k, rule_port(r, i, 0), 0x02);
		if (run_once(dp->prog_fd[RW_DIR_EGRESS], &q[P_NEW * n], NULL) != -1)
			DIE("opening IPv6 flow %d to %s: denied", k, d6);
		dst = rule_addr(r, i);
		build_pkt(&est[k], v, pod, dst, sport_base + k, rule_port(r, i, 0), 0x10);
		build_pkt(&rep[k], v, dst, pod, rule_port(r, i, 0), sport_base + k, 0x10);
		build_pkt(&drop[k], v, pod, htonl((93u << 24) | (k << 8) | 1), 30000 + k, 443,
			  0x02);
		build_pkt_proto(&udp[k], v, IPPROTO_UDP, pod, htonl((93u << 24) | (k << 8) | 1),
				30000 + k, 443, 0);
		/* Open each flow once: the measured packets are its later ones. */
		build_pkt(&syn[k], v, pod, dst, sport_base + k, rule_port(r, i, 0), 0x02);
		if (run_once(dp->prog_fd[RW_DIR_EGRESS], &syn[k], NULL) != -1)
			DIE("opening flow %d to %s: denied", k, ipstr(dst, name));
	}
	sport_base += n;
	for (int rd = 0; rd < rounds; rd++) {
		for (int k = 0; k < n; k++) {
			struct probe_pkt *s = &syn[k];
			int v = k % NVETH, r = v * runs / NVETH, i;

			do
				i = rand() % rules;
			while (rule_is_cidr(i) && rules > 1);
			build_pkt(s, v, pod_ip(r, v % PODS_PER_RUN), rule_addr(r, i),
				  sport_base + k, rule_port(r, i, 0), 0x02);
			build_pkt6(&pkts6[P_NEW * n + k], v, pod6str(r, v % PODS_PER_RUN, a6),
				   rule6str(r, i, 0, d6), sport_base + k, rule_port(r, i, 0), 0x02);
		}
		sport_base += n;
		if (sport_base > 60000)
			sport_base = 10000;
		/* Cold: one packet per test_run, a new flow for SYNs. */
		cold[P_COUNT][rd] = pass(base_prog, est, n, 99, 1);
		cold[P_EST_EG][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], est, n, -1, 1);
		cold[P_EST_IN][rd] = pass(dp->prog_fd[RW_DIR_INGRESS], rep, n, -1, 1);
		cold[P_NEW][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], syn, n, -1, 1);
		cold[P_DROP][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], drop, n, 2, 1);
		cold6[P_EST_EG][rd] =
			pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_EST_EG * n], n, -1, 1);
		cold6[P_EST_IN][rd] =
			pass(dp->prog_fd[RW_DIR_INGRESS], &pkts6[P_EST_IN * n], n, -1, 1);
		cold6[P_NEW][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_NEW * n], n, -1, 1);
		cold6[P_DROP][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_DROP * n], n, 2, 1);
		/* Warm: each of those flows `warm` times in one test_run (the method of the
		 * figures in issue 11). The SYNs' flows were opened by the cold pass: every one
		 * of these is a SYN of a known flow, the way it was opened, its verdict current
		 * (the fast path); then the same judged in full without an insert, as after an
		 * apply that changed its run.
		 */
		res[P_COUNT][rd] = pass(base_prog, est, n, 99, warm);
		res[P_EST_EG][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], est, n, -1, warm);
		res[P_EST_IN][rd] = pass(dp->prog_fd[RW_DIR_INGRESS], rep, n, -1, warm);
		res[P_NEW][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], syn, n, -1, warm);
		res[P_DROP][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], drop, n, 2, warm);
		res6[P_EST_EG][rd] =
			pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_EST_EG * n], n, -1, warm);
		res6[P_EST_IN][rd] =
			pass(dp->prog_fd[RW_DIR_INGRESS], &pkts6[P_EST_IN * n], n, -1, warm);
		res6[P_NEW][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_NEW * n], n, -1, warm);
		res6[P_DROP][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_DROP * n], n, 2, warm);
		run_revs_set(dp, saved_revs, UINT64_MAX);
		judged[0][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], syn, n, -1, warm);
		judged[1][rd] = pass(dp->prog_fd[RW_DIR_EGRESS], &pkts6[P_NEW * n], n, -1, warm);
		run_revs_set(dp, saved_revs, 0);
	}
	{
		double base = pct(res[P_COUNT], rounds, 0.5),
		       cbase = pct(cold[P_COUNT], rounds, 0.5);

		snprintf(name, sizeof(name), "empty TC program, %d rules", runs * rules);
		row("per-packet", name, base, "ns", NULL, 0,
		    json_pack("{s:i, s:s, s:f}", "rules", runs * rules, "path", "empty", "cold_ns",
			      cbase));
		for (int c = 0; c < P_COUNT; c++) {
			double ns = pct(res[c], rounds, 0.5), cns = pct(cold[c], rounds, 0.5);

			if (c == P_NEW) {
				/* Only the first of a test_run's repeats can open a flow: a new
				 * flow is measured cold (each SYN another flow, one test_run
				 * each, next to the empty program run the same way); the warm
				 * figures are a SYN of a flow that exists, its verdict current,
				 * and the same judged in full.
				 */
				ratios[si][c] = cns / cbase;
				snprintf(name, sizeof(name), "%s, %d rules, cold", path_names[c],
					 runs * rules);
				row("per-packet", name, cns / cbase, "x empty",
				    "<=", path_targets[c],
				    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules, "path",
					      path_keys[c], "ns", cns, "empty_ns", cbase));
				for (int j = 0; j < 2; j++) {
					double sns = j ? pct(judged[0], rounds, 0.5) : ns;

					snprintf(name, sizeof(name), "%s, %d rules", syn_names[j],
						 runs * rules);
					row("per-packet", name, sns / base, "x empty", "<=", 5,
					    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules,
						      "path", syn_keys[j], "ns", sns, "empty_ns",
						      base));
				}
				continue;
			}
			ratios[si][c] = ns / base;
			snprintf(name, sizeof(name), "%s, %d rules", path_names[c], runs * rules);
			row("per-packet", name, ns / base, "x empty", "<=", path_targets[c],
			    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules, "path",
				      path_keys[c], "ns", ns, "empty_ns", base));
			snprintf(name, sizeof(name), "%s, %d rules, cold", path_names[c],
				 runs * rules);
			row("per-packet-cold", name, cns / cbase, "x empty", NULL, 0,
			    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules, "path",
				      path_keys[c], "ns", cns, "empty_ns", cbase));
		}
		/* IPv6 beside IPv4: the same path's figure (a new flow cold, the others warm; then
		 * the known flow's SYN, current and judged in full), then IPv6 over IPv4 in ns of
		 * the same rounds' medians; the target 1.2 for every path.
		 */
		for (int c = 0; c <= P_COUNT + 1; c++) {
			int c_cold = c == P_NEW, js = c - P_COUNT;
			double *s4 = js == 1   ? judged[0]
				     : js == 0 ? res[P_NEW]
				     : c_cold  ? cold[c]
					       : res[c],
			       *s6 = js == 1   ? judged[1]
				     : js == 0 ? res6[P_NEW]
				     : c_cold  ? cold6[c]
					       : res6[c];
			double ns4 = pct(s4, rounds, 0.5), ns6 = pct(s6, rounds, 0.5),
			       b = c_cold ? cbase : base;
			const char *what = js >= 0 ? syn_names[js] : path_names[c];
			char key[64];

			snprintf(key, sizeof(key), "%s_ip6", js >= 0 ? syn_keys[js] : path_keys[c]);
			snprintf(name, sizeof(name), "IPv6 %s, %d rules%s", what, runs * rules,
				 c_cold ? ", cold" : "");
			row("per-packet", name, ns6 / b, "x empty", NULL, 0,
			    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules, "path", key,
				      "ns", ns6, "empty_ns", b));
			snprintf(name, sizeof(name), "IPv6 / IPv4, %s, %d rules%s", what,
				 runs * rules, c_cold ? ", cold" : "");
			row("per-packet", name, ns6 / ns4, "x IPv4", "<=", 1.2, /* every path */
			    json_pack("{s:i, s:s, s:f, s:f}", "rules", runs * rules, "path", key,
				      "ns", ns6, "ip4_ns", ns4));
		}
	}
	if (si == 1)
		event_cost(dp, base_prog, drop, n, rounds, runs * rules);
	answered(dp, base_prog, drop, udp, n, rounds, 101 + 2 * si, runs, rules, &p);
	for (int v = 0; v < NVETH; v++)
		rw_endpoint_unbind(dp, ifindex[v]);
	rw_policy_free(&p);
	free(json);
	free(est), free(rep), free(syn), free(drop), free(udp), free(pkts6);
}

static int on_event(void *ctx, void *data, size_t size)
{
	return 0;
}

static void section_per_packet(void)
{
	static const int sizes[][2] = {{1, 10}, {100, 10}, {1000, 10}, {1000, 100}};
	const int nsizes = sizeof(sizes) / sizeof(sizes[0]);
	double ratios[4][P_COUNT];
	struct rw_datapath dp;
	struct rw_config cfg;
	int base;

	printf("# per packet: BPF_PROG_TEST_RUN over 1024 flows spread across the table, each 32 "
	       "times per run (cold: once); median over rounds of the mean\n");
	base = load_unpinned(&dp, &cfg);
	cfg.event_rate = 0;  /* no budget: every drop sends its event */
	cfg.answer_rate = 0; /* and every refusal of an answering run its answer */
	rw_config_write(&dp, &cfg);
	ring = ring_buffer__new(dp.map_fd[RW_M_EVENTS], on_event, NULL, NULL);
	for (int s = 0; s < nsizes; s++)
		per_packet(&dp, base, ratios, s, sizes[s][0], sizes[s][1]);
	for (int c = 0; c < P_COUNT; c++) {
		char name[128];

		snprintf(name, sizeof(name), "%s: growth 10 -> 100 000 rules", path_names[c]);
		row("per-packet", name, ratios[nsizes - 1][c] / ratios[0][c], "x", "<=", 1.2,
		    json_pack("{s:s}", "path", path_keys[c]));
	}
	ring_buffer__free(ring);
	ring = NULL;
	close(base);
	rw_datapath_close(&dp);
}

/* ---- Principals ----------------------------------------------------------------------- */

/* A rule with a "from" (docs/principals.md) against the same rule without one, in one round:
 * the SYN of a known flow (judged in full: the restricted one adds the socket check) and the
 * established flow (the restricted one is judged in full at every packet out of the pod, never
 * from its cached verdict). test_run's packet carries the kernel's dummy socket, owned by uid 0,
 * which {"uid": [0]} admits: the allowed path is the one measured.
 */
static void section_principals(void)
{
	const int n = quick ? 256 : 1024, rounds = quick ? 3 : 7;
	static const char *const names[] = {
		"SYN of a known flow to a service",
		"SYN of a known flow to a service with \"from\" (uid)",
		"established flow to a service",
		"established flow to a service with \"from\" (uid): the sidecar's",
	};
	static const char *const keys[] = {"syn_open", "syn_from", "est_open", "est_from"};
	struct probe_pkt *pkts = calloc(4 * (size_t)n, sizeof(*pkts));
	double res[5][16], v[5];
	char *json, name[160];
	struct rw_apply_result ar;
	struct rw_datapath dp;
	struct rw_config cfg;
	struct rw_policy p;
	int base;

	printf("# principals: a service with \"from\" next to one without, %d flows\n", n);
	if (!pkts)
		DIE("out of memory");
	base = load_unpinned(&dp, &cfg);
	cfg.event_rate = 0;
	rw_config_write(&dp, &cfg);
	json = make_policy(300, 100, 10, 0, 0);
	/* the broker with a "from", beside the proxy without: same table, same lookups */
	{
		const char *at = strstr(json, "{\"name\": \"model\"");
		size_t head = at - json;
		char *with = malloc(strlen(json) + 256);

		memcpy(with, json, head);
		sprintf(with + head,
			"{\"name\": \"broker\", \"ip\": \"172.20.0.11\", \"tcp\": [443, 8443], "
			"\"from\": {\"uid\": [0]}},%s",
			at);
		free(json);
		json = with;
	}
	parse(json, &p);
	apply(&dp, NULL, &p, &ar);
	for (int vi = 0; vi < NVETH; vi++) {
		struct rw_endpoint ep = {.pod_ip = pod_ip(vi, 0), .flags = RW_EP_IP4};

		if (rw_endpoint_bind_addrs(&dp, ifindex[vi], &ep))
			DIE("binding veth %d", vi);
	}
	for (int k = 0; k < n; k++) {
		int vi = k % NVETH;
		__be32 pod = pod_ip(vi, 0), proxy = inet_addr("172.20.0.10"),
		       broker = inet_addr("172.20.0.11");

		build_pkt(&pkts[0 * n + k], vi, pod, proxy, 20000 + k, 443, 0x02);
		build_pkt(&pkts[1 * n + k], vi, pod, broker, 20000 + k, 443, 0x02);
		build_pkt(&pkts[2 * n + k], vi, pod, proxy, 20000 + k, 443, 0x10);
		build_pkt(&pkts[3 * n + k], vi, pod, broker, 20000 + k, 443, 0x10);
		/* open both flows: what is measured is their later packets */
		if (run_once(dp.prog_fd[RW_DIR_EGRESS], &pkts[k], NULL) != -1 ||
		    run_once(dp.prog_fd[RW_DIR_EGRESS], &pkts[n + k], NULL) != -1)
			DIE("opening flow %d: denied", k);
	}
	for (int rd = 0; rd < rounds; rd++) {
		res[4][rd] = pass(base, pkts, n, 99, 32);
		for (int c = 0; c < 4; c++)
			res[c][rd] = pass(dp.prog_fd[RW_DIR_EGRESS], &pkts[c * n], n, -1, 32);
	}
	for (int c = 0; c < 5; c++)
		v[c] = pct(res[c], rounds, 0.5);
	for (int c = 0; c < 4; c++) {
		snprintf(name, sizeof(name), "%s, 1 000 rules", names[c]);
		row("principals", name, v[c] / v[4], "x empty", NULL, 0,
		    json_pack("{s:s, s:f, s:f}", "path", keys[c], "ns", v[c], "empty_ns", v[4]));
	}
	row("principals", "SYN of a known flow: with \"from\" / without", v[1] / v[0], "x", NULL, 0,
	    json_pack("{s:s}", "path", "syn_ratio"));
	row("principals", "established flow: with \"from\" / without", v[3] / v[2], "x", NULL, 0,
	    json_pack("{s:s}", "path", "est_ratio"));
	for (int vi = 0; vi < NVETH; vi++)
		rw_endpoint_unbind(&dp, ifindex[vi]);
	rw_policy_free(&p);
	free(json);
	free(pkts);
	close(base);
	rw_datapath_close(&dp);
}

/* ---- Apply ---------------------------------------------------------------------------- */

#define BIG_RUNS  1000
#define BIG_RULES 100

static struct {
	int prog;
	struct probe_pkt pkt;
	volatile int stop;
	volatile int expect;  /* verdict the current change brings */
	volatile double seen; /* when a packet first got it (ms), 0 not yet */
} prober;

static void *prober_main(void *arg)
{
	while (!prober.stop) {
		int ret = run_once(prober.prog, &prober.pkt, NULL);

		if (ret == prober.expect && !prober.seen)
			prober.seen = now_ms();
		/* A packet every ~20 us: enough resolution, and the apply keeps its CPU. */
		usleep(20);
	}
	return NULL;
}

/* The CPU time this thread has used, in ms: an apply's own work, without the grace periods it
 * waits for.
 */
static double thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One run's change (its ports moved) on a node of `runs` runs of RUN_RULES rules: the p50 of
 * the apply's planning (wall) and of the whole rw_apply()'s CPU, in cost[0] and cost[1].
 */
enum { RUN_RULES = 4, RUN_CHANGES = 200 };

static void run_change_cost(int runs, double cost[2])
{
	const int n = quick ? 40 : RUN_CHANGES;
	double p[RUN_CHANGES], cpu[RUN_CHANGES];
	struct rw_apply_result res;
	struct rw_policy prev, next;
	struct rw_datapath dp;
	char *json;

	if (rw_datapath_load(&dp, NULL, RW_DP_NO_PIN, lerr, sizeof(lerr)))
		DIE("loading the programs: %s", lerr);
	json = make_policy(1, runs, RUN_RULES, 0, 0);
	parse(json, &prev);
	free(json);
	apply(&dp, NULL, &prev, &res);
	for (int c = 0; c <= n; c++) {
		double t0;

		json = make_policy(2 + c, runs, RUN_RULES, -(c + 1), 0);
		parse(json, &next);
		free(json);
		t0 = thread_cpu_ms();
		apply(&dp, &prev, &next, &res);
		/* The first change fills the other slot: not counted. */
		if (c) {
			p[c - 1] = res.plan_ms;
			cpu[c - 1] = thread_cpu_ms() - t0;
		}
		rw_policy_free(&prev);
		prev = next;
	}
	rw_policy_free(&prev);
	rw_datapath_close(&dp);
	cost[0] = pct(p, n, 0.5);
	cost[1] = pct(cpu, n, 0.5);
}

/* Planning in proportion to the change: one run's change costs the same on a node of 8 runs and
 * on one of 1 000 (issue 36), both measured in this round.
 */
static void run_change_rows(void)
{
	double small[2], big[2];

	run_change_cost(8, small);
	run_change_cost(BIG_RUNS, big);
	row("apply", "one run's change, planning p50, node of 8 runs", small[0], "ms", NULL, 0,
	    NULL);
	row("apply", "one run's change, planning p50, node of 1 000 runs", big[0], "ms", NULL, 0,
	    NULL);
	row("apply", "one run's change, rw_apply()'s CPU p50, node of 8 runs", small[1], "ms", NULL,
	    0, NULL);
	row("apply", "one run's change, rw_apply()'s CPU p50, node of 1 000 runs", big[1], "ms",
	    NULL, 0, NULL);
	row("apply", "one run's change, rw_apply()'s CPU, 1 000 runs / 8 runs", big[1] / small[1],
	    "x", "<=", 1.2, NULL);
}

static void section_apply(void)
{
	const int changes = quick ? 20 : 100, fulls = quick ? 1 : 3;
	double full[3], full_build[3], change[100], change_total[100], first[100], written = 0;
	double plan[100], wr[100];
	double parse_ms;
	struct rw_apply_result res;
	struct rw_policy prev, next;
	struct rw_datapath dp;
	unsigned long long rev = 1;
	char *json;
	pthread_t th;

	printf("# apply: %d pods in %d runs, %d rules (%d%% CIDR), with rw_apply as the agent calls "
	       "it\n",
	       BIG_RUNS * PODS_PER_RUN, BIG_RUNS, BIG_RUNS * BIG_RULES, 10);
	for (int f = 0; f < fulls; f++) {
		if (rw_datapath_load(&dp, NULL, RW_DP_NO_PIN, lerr, sizeof(lerr)))
			DIE("loading the programs: %s", lerr);
		json = make_policy(rev++, BIG_RUNS, BIG_RULES, 0, 0);
		parse_ms = now_ms();
		parse(json, &next);
		parse_ms = now_ms() - parse_ms;
		apply(&dp, NULL, &next, &res);
		full[f] = res.total_ms;
		full_build[f] = res.write_ms;
		free(json);
		if (f + 1 < fulls) {
			rw_policy_free(&next);
			rw_datapath_close(&dp);
		}
	}
	row("apply", "full apply from empty (10 000 pods, 100 000 rules)", pct(full, fulls, 0.5),
	    "ms", "<=", 60,
	    json_pack("{s:f, s:i}", "write_ms", pct(full_build, fulls, 0.5), "entries",
		      res.entries + res.pods));
	row("apply", "parsing that snapshot (not part of the apply)", parse_ms, "ms", NULL, 0,
	    NULL);

	/* Steady state: both slots hold a snapshot; then 1 % changes, each with the probe's rule
	 * toggled, while a thread sends the probe's packet all along.
	 */
	json = make_policy(rev++, BIG_RUNS, BIG_RULES, 0, 0);
	parse(json, &prev);
	free(json);
	/* With the snapshot in force as the agent passes it: runs keep their generation, so the
	 * first change is a 1 % change like the others, not a rewrite of every pod.
	 */
	apply(&dp, &next, &prev, &res);
	rw_policy_free(&next);
	if (rw_endpoint_bind(&dp, ifindex[0], pod_ip(0, 0)))
		DIE("binding the probe's veth");
	prober.prog = dp.prog_fd[RW_DIR_EGRESS];
	build_pkt(&prober.pkt, 0, pod_ip(0, 0), htonl((44u << 24) | (255 << 16) | 1), 45000, 9999,
		  0x10);
	/* The 1 % changes alone, then again with the probe toggled while it sends. */
	for (int c = 0; c < 2 * changes; c++) {
		int probe = c >= changes && !(c % 2);
		double t0;

		json = make_policy(rev++, BIG_RUNS, BIG_RULES, c + 1, probe);
		parse(json, &next);
		free(json);
		if (c == changes) {
			prober.expect = 99;
			pthread_create(&th, NULL, prober_main, NULL);
		}
		prober.seen = 0;
		prober.expect = probe ? -1 : 2;
		t0 = now_ms();
		apply(&dp, &prev, &next, &res);
		if (c < changes) {
			change[c] = res.build_ms;
			change_total[c] = res.total_ms;
			plan[c] = res.plan_ms;
			wr[c] = res.write_ms;
			written += res.written;
		} else {
			while (!prober.seen && now_ms() - t0 < 2000)
				usleep(50);
			if (!prober.seen)
				DIE("change %d: no packet got the new verdict within 2 s", c);
			first[c - changes] = prober.seen - t0;
		}
		rw_policy_free(&prev);
		prev = next;
	}
	prober.stop = 1;
	pthread_join(th, NULL);
	row("apply", "1 % change, p50 (apply until the flip)", pct(change, changes, 0.5), "ms",
	    "<=", 5, json_pack("{s:f}", "writes", written / changes));
	row("apply", "1 % change, p99 (apply until the flip)", pct(change, changes, 0.99), "ms",
	    NULL, 0, NULL);
	row("apply", "1 % change, p50 of its planning (runs, entries, diff)",
	    pct(plan, changes, 0.5), "ms", NULL, 0, NULL);
	row("apply", "1 % change, p50 of its writes", pct(wr, changes, 0.5), "ms", NULL, 0, NULL);
	row("apply", "1 % change with its grace period, p50", pct(change_total, changes, 0.5), "ms",
	    NULL, 0, NULL);
	row("apply", "apply to the first packet with the new verdict, p50",
	    pct(first, changes, 0.5), "ms", NULL, 0, NULL);
	row("apply", "apply to the first packet with the new verdict, p99",
	    pct(first, changes, 0.99), "ms", "<=", 10, json_pack("{s:i}", "changes", changes));
	rw_endpoint_unbind(&dp, ifindex[0]);
	rw_policy_free(&prev);
	rw_datapath_close(&dp);
	run_change_rows();
}

/* ---- Memory and events: the real agent ------------------------------------------------ */

/* The number of the first line of the /proc file at path that matches fmt ("name: %ld"), or
 * -1.
 */
static long proc_number(const char *path, const char *fmt)
{
	char line[256];
	long v = -1;
	FILE *f = fopen(path, "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static long memlock_of(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	return proc_number(path, "memlock: %ld");
}

static long rss_kb(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	return proc_number(path, "VmRSS: %ld");
}

static char pin_dir[128], sock_path[128], policy_path[128];

/* The wall time of `runwall --socket SOCK apply [flag] path` (flag: NULL, or "--run"), its
 * output thrown away; a failure is fatal.
 */
static double cli_apply_ms(const char *flag, const char *path)
{
	char *argv[] = {(char *)runwall_bin,
			"--socket",
			(char *)sock_path,
			"apply",
			(char *)(flag ? flag : path),
			(char *)(flag ? path : NULL),
			NULL};
	posix_spawn_file_actions_t fa;
	double t0;
	pid_t pid;
	int st;

	/* posix_spawn() starts the command without copying this process's page tables (it is
	 * large here: the snapshots it wrote), as a shell's fork would not: the time measured is
	 * the command's.
	 */
	if (posix_spawn_file_actions_init(&fa) ||
	    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) ||
	    posix_spawn_file_actions_adddup2(&fa, 1, 2))
		DIE("posix_spawn_file_actions: %s", strerror(errno));
	t0 = now_ms();
	if (posix_spawn(&pid, runwall_bin, &fa, NULL, argv, environ) ||
	    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		DIE("runwall apply %s%s%s failed", flag ? flag : "", flag ? " " : "", path);
	posix_spawn_file_actions_destroy(&fa);
	return now_ms() - t0;
}
static pid_t agent_pid;

static void agent_stop(void)
{
	if (agent_pid > 0) {
		kill(agent_pid, SIGTERM);
		waitpid(agent_pid, NULL, 0);
		agent_pid = 0;
	}
	if (pin_dir[0])
		rw_datapath_unpin(pin_dir);
	unlink(sock_path);
	unlink(policy_path);
}

static void section_agent(void)
{
	struct rw_datapath dp;
	struct rw_config cfg;
	struct rw_counters c0, c1;
	struct probe_pkt pkt;
	long total = 0, policy_maps = 0;
	double best = 0;
	char *json;
	FILE *f;

	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/rwbench-%d", getpid());
	snprintf(sock_path, sizeof(sock_path), "/run/rwbench-%d.sock", getpid());
	snprintf(policy_path, sizeof(policy_path), "/tmp/rwbench-%d.json", getpid());
	atexit(agent_stop);
	json = make_policy(1, BIG_RUNS, BIG_RULES, 0, 0);
	f = fopen(policy_path, "w");
	if (!f || fputs(json, f) < 0 || fclose(f))
		DIE("%s: %s", policy_path, strerror(errno));
	free(json);

	agent_pid = fork();
	if (agent_pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(runwall_bin, runwall_bin, "--bpffs", pin_dir, "--socket", sock_path, "agent",
		      "--ifprefix", "rwnomatch", "--policy", policy_path, (char *)NULL);
		_exit(127);
	}
	/* The agent is up when the snapshot is in force. */
	for (int i = 0;; i++) {
		if (rw_datapath_pinned_layout(pin_dir) == RW_LAYOUT_VERSION &&
		    rw_datapath_open_pinned(&dp, pin_dir, lerr, sizeof(lerr)) == 0) {
			rw_config_read(&dp, &cfg);
			rw_datapath_close(&dp);
			if (RW_STATE_READY(cfg.state))
				break;
		}
		if (i > 600 || waitpid(agent_pid, NULL, WNOHANG) == agent_pid)
			DIE("the agent (%s) did not apply the snapshot", runwall_bin);
		usleep(50000);
	}
	row("memory", "agent RSS with 10 000 pods / 100 000 rules in force",
	    rss_kb(agent_pid) / 1024.0, "MiB", NULL, 0, NULL);

	/* Our own copy of the programs on the agent's maps, to make events with. */
	if (rw_datapath_load(&dp, pin_dir, 0, lerr, sizeof(lerr)))
		DIE("loading the programs on %s: %s", pin_dir, lerr);
	for (int m = 0; m < RW_M__COUNT; m++) {
		long v = memlock_of(dp.map_fd[m]);

		total += v > 0 ? v : 0;
	}
	for (int m = RW_M_PODS; m <= RW_M_INBOUND; m++) {
		for (__u32 s = 0; s < RW_SLOTS; s++) {
			__u32 id;
			int fd;
			long v;

			if (bpf_map_lookup_elem(dp.map_fd[m], &s, &id))
				continue;
			fd = bpf_map_get_fd_by_id(id);
			v = fd >= 0 ? memlock_of(fd) : -1;
			policy_maps += v > 0 ? v : 0;
			close(fd);
		}
	}
	total += policy_maps;
	row("memory", "kernel memory of every map (memlock)", total / 1048576.0, "MiB", NULL, 0,
	    NULL);
	row("memory", "policy maps, both slots, per rule at 100 000 rules",
	    (double)policy_maps / (BIG_RUNS * BIG_RULES), "bytes", NULL, 0,
	    json_pack("{s:f}", "policy_maps_mib", policy_maps / 1048576.0));

	/* A 1 % change through the CLI: `runwall apply FILE` against this agent, 10 runs' rules
	 * changed each time, the command's wall time until it exits. The CLI sends the whole
	 * snapshot and the agent parses all of it; the per-run change below sends one run.
	 */
	{
		const int n = quick ? 3 : 9;
		double wall[9];
		char change_path[160];

		snprintf(change_path, sizeof(change_path), "%s.change", policy_path);
		for (int i = 0; i < n; i++) {
			char *doc = make_policy(2 + i, BIG_RUNS, BIG_RULES, i + 1, 0);

			f = fopen(change_path, "w");
			if (!f || fputs(doc, f) < 0 || fclose(f))
				DIE("%s: %s", change_path, strerror(errno));
			free(doc);
			wall[i] = cli_apply_ms(NULL, change_path);
		}
		unlink(change_path);
		row("apply", "1 % change through the CLI (runwall apply FILE), p50 wall",
		    pct(wall, n, 0.5), "ms", "<=", 10, NULL);
	}

	/* The same 1 % through the CLI as one run's change: `runwall apply --run FILE` of a run
	 * of CLI_RULES rules (1 % of the node's 100 000) whose every port moves at each change,
	 * the command's wall time from its start to its exit. The first upsert adds the run and is
	 * not counted.
	 */
	{
		enum { CLI_RULES = BIG_RUNS * BIG_RULES / 100, CLI_CHANGES = 40 };
		const int n = quick ? 5 : CLI_CHANGES;
		double wall[CLI_CHANGES];
		char run_path[160], a[INET6_ADDRSTRLEN + 4];

		snprintf(run_path, sizeof(run_path), "%s.run", policy_path);
		for (int i = 0; i <= n; i++) {
			double ms;

			f = fopen(run_path, "w");
			if (!f)
				DIE("%s: %s", run_path, strerror(errno));
			fprintf(f, "{\"id\": \"run-cli\", \"pods\": [");
			for (int p = 0; p < PODS_PER_RUN; p++)
				fprintf(f, "%s\"%s\"", p ? "," : "", ipstr(pod_ip(BIG_RUNS, p), a));
			fprintf(f, "], \"allow\": [");
			for (int r = 0; r < CLI_RULES; r++)
				fprintf(f, "%s{\"%s\": \"%s%s\", \"tcp\": [%d]}", r ? "," : "",
					rule_is_cidr(r) ? "cidr" : "ip",
					ipstr(rule_addr(BIG_RUNS, r), a),
					rule_is_cidr(r) ? "/24" : "", rule_port(BIG_RUNS, r, i));
			if (fprintf(f, "]}\n") < 0 || fclose(f))
				DIE("%s: %s", run_path, strerror(errno));
			ms = cli_apply_ms("--run", run_path);
			if (i)
				wall[i - 1] = ms;
		}
		unlink(run_path);
		row("apply", "1 % change through the CLI (runwall apply --run FILE), p50 wall",
		    pct(wall, n, 0.5), "ms", "<=", 10, NULL);
		row("apply", "1 % change through the CLI (runwall apply --run FILE), p99 wall",
		    pct(wall, n, 0.99), "ms", NULL, 0, NULL);
	}

	/* Events: drops from a veth no pod is bound to (unknown-source), at rising rates. */
	rw_config_read(&dp, &cfg);
	cfg.event_rate = 0;
	rw_config_write(&dp, &cfg);
	build_pkt(&pkt, 0, htonl(0x0a630001), htonl(0x5db8d822), 40000, 443, 0x02);
	/* Rising rates, in finer steps around the target (the rate made is what counts). */
	static const long rates[] = {50000,  100000, 150000, 200000,  250000,  300000,
				     400000, 600000, 800000, 1200000, 1600000, 3200000};

	for (size_t ri = 0; ri < sizeof(rates) / sizeof(rates[0]); ri++) {
		const long rate = rates[ri];
		const double secs = quick ? 0.5 : 1.0, step_ms = 2;
		__u32 per = rate * step_ms / 1000;
		double t0 = now_ms(), t, achieved;
		long sent, lost;

		rw_counters_read(&dp, 0, &c0);
		for (int k = 0; (t = now_ms()) - t0 < secs * 1000; k++) {
			struct __sk_buff ctx = {.ifindex = ifindex[0]};
			LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt.buf,
				    .data_size_in = pkt.len, .ctx_in = &ctx,
				    .ctx_size_in = sizeof(ctx), .repeat = per);

			if (bpf_prog_test_run_opts(dp.prog_fd[RW_DIR_EGRESS], &opts))
				DIE("test_run: %s", strerror(errno));
			while (now_ms() < t0 + (k + 1) * step_ms)
				usleep(100);
		}
		usleep(200000); /* let the agent's last tick drain */
		rw_counters_read(&dp, 0, &c1);
		sent = c1.events_sent - c0.events_sent;
		lost = c1.events_lost - c0.events_lost;
		achieved = (sent + lost) / (t - t0) * 1000;
		printf("  # offered %ld/s: %.0f events/s made, %ld lost\n", rate, achieved, lost);
		if (lost)
			break;
		best = achieved;
		if (achieved < rate * 0.8)
			break; /* the generator cannot go faster on this machine */
	}
	row("events", "events drained per second by the agent, none lost", best, "events/s",
	    ">=", 200000, NULL);
	rw_datapath_close(&dp);
	agent_stop();
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"json", required_argument, NULL, 'j'},
					     {"runwall", required_argument, NULL, 'r'},
					     {"quick", no_argument, NULL, 'q'},
					     {}};
	const char *json_path = NULL;
	char cmd[128];
	int c, all;

	while ((c = bench_getopt(argc, argv, opts, &json_path)) != -1) {
		switch (c) {
		case 'r':
			runwall_bin = optarg;
			break;
		case 'q':
			quick = 1;
			break;
		default:
			fprintf(stderr,
				"usage: bench_datapath [--json FILE] [--runwall BIN] [--quick] "
				"[per-packet|apply|agent|principals...]\n");
			return 2;
		}
	}
	all = optind == argc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rw_log_setup_libbpf();
	rows = json_array();
	if (unshare(CLONE_NEWNET))
		DIE("a private netns: %s (root needed)", strerror(errno));
	for (int v = 0; v < NVETH; v++) {
		snprintf(cmd, sizeof(cmd), "ip link add rwb%d type veth peer name rwb%dp", v, v);
		if (system(cmd))
			DIE("%s failed", cmd);
		snprintf(cmd, sizeof(cmd), "rwb%d", v);
		ifindex[v] = if_nametoindex(cmd);
	}
	for (int i = optind; i <= argc; i++) {
		const char *s = i < argc ? argv[i] : NULL;

		if (!all && !s)
			break;
		if (all ? i == optind : !strcmp(s, "per-packet"))
			section_per_packet();
		if (all ? i == optind : !strcmp(s, "apply"))
			section_apply();
		if (all ? i == optind : !strcmp(s, "agent"))
			section_agent();
		if (all ? i == optind : !strcmp(s, "principals"))
			section_principals();
		if (all)
			break;
	}
	bench_write_json(rows, json_path);
	return 0;
}
