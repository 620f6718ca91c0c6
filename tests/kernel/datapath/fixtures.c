// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fixtures.c (test_datapath): the suite's fixtures: the test node's veths and policies, the programs under test, the ring
 * buffer reader, and the helpers that run one case or one table of cases.
 */
#include "dp_suite.h"

const char *const devs[] = {"rwt0", "rwt1", "rwt2", "rwt3"};
int ifindex_of[4];

/* The services of both revisions but the egress proxy, and the start of their inbound list. */
#define SHARED_SERVICES                                                                                     \
	"    {\"name\": \"identity-broker\", \"ip\": \"172.20.0.11\", \"tcp\": [3443]},\n"                  \
	"    {\"name\": \"app-tier\", \"ip\": \"172.20.0.12\", \"tcp\": [3000]},\n"                         \
	"    {\"name\": \"drive-gateway\", \"ip\": \"172.20.0.13\", \"tcp\": [8080]},\n"                    \
	"    {\"name\": \"telemetry\", \"ip\": \"172.20.0.14\", \"tcp\": [4317, 4318], \"udp\": [4317]},\n" \
	"    {\"name\": \"internal-api\", \"ip\": \"10.0.0.20\", \"tcp\": [9000]},\n"                       \
	"    {\"name\": \"model-gateway\", \"cidr\": \"172.21.0.0/24\", \"tcp\": [443]}\n"                  \
	"  ],\n"                                                                                            \
	"  \"inbound\": [\n"

/* Seed 001's release defaults with the example's deny list, plus the shapes the table needs: a
 * CIDR service, a UDP service, an allowed /32 inside a denied range, DNS allowed on 53 for one
 * run, and the three inbound peers.
 */
const char policy_v1[] =
	"{\n"
	"  \"revision\": 1,\n"
	"  \"egress\": \"allowlist\",\n"
	"  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"],\n"
	"  \"services\": [\n"
	"    {\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443, 8443, 3128]},\n" SHARED_SERVICES
	"    {\"name\": \"app-tier\", \"cidr\": \"172.20.0.12/32\", \"tcp\": [4096, 4098, 4999, 6085]},\n"
	"    {\"name\": \"temporal-worker\", \"cidr\": \"172.20.0.20/32\", \"tcp\": [4096, 4098, 4999, 6085]},\n"
	"    {\"name\": \"streaming\", \"cidr\": \"172.20.0.21/32\", \"tcp\": [4096, 4098, 4999, 6085]}\n"
	"  ],\n"
	"  \"runs\": [\n"
	"    {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]},\n"
	"    {\"id\": \"run-9c01\", \"pods\": [\"10.1.2.4\"], \"egress\": \"open\",\n"
	"     \"allow\": [{\"cidr\": \"52.94.9.0/24\", \"tcp\": [5432], \"udp\": []},\n"
	"               {\"ip\": \"9.9.9.9\", \"udp\": [53]}]}\n"
	"  ]\n"
	"}\n";

/* Revision 2: the egress proxy and the app tier's inbound rule are revoked, and POD_B now
 * belongs to another run.
 */
const char policy_v2[] =
	"{\n"
	"  \"revision\": 2,\n"
	"  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"],\n"
	"  \"services\": [\n" SHARED_SERVICES
	"    {\"name\": \"temporal-worker\", \"cidr\": \"172.20.0.20/32\", \"tcp\": [4096, 4098, 4999, 6085]},\n"
	"    {\"name\": \"streaming\", \"cidr\": \"172.20.0.21/32\", \"tcp\": [4096, 4098, 4999, 6085]}\n"
	"  ],\n"
	"  \"runs\": [\n"
	"    {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]},\n"
	"    {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]}\n"
	"  ]\n"
	"}\n";

/* ---- the kernel side under test ---- */

struct rw_datapath dp;
const struct rw_policy *dp_policy;
struct ring_buffer *ring;
struct rw_event events[64];
int n_events;
static long long events_overflow;

int on_event(void *ctx, void *data, size_t len)
{
	if (len < sizeof(struct rw_event))
		return 0;
	if (n_events < (int)(sizeof(events) / sizeof(events[0])))
		memcpy(&events[n_events++], data, sizeof(struct rw_event));
	else
		events_overflow++;
	return 0;
}

void drain_events(void)
{
	ring_buffer__consume(ring);
	n_events = 0;
	events_overflow = 0;
}

__u32 run_idx_of(const char *run)
{
	struct rw_pod pod;
	__be32 ip;

	if (!run)
		return 0;
	/* The test's runs each have one pod: find the run through the live pods map. */
	for (int i = 0; i < 4; i++) {
		const char *ips[] = {POD_A, POD_B, POD_X, "0.0.0.0"};

		inet_pton(AF_INET, ips[i], &ip);
		if (rw_live_pod(&dp, ip, &pod) == 0 && !strcmp(pod.run_id, run))
			return pod.run_idx;
	}
	return 0;
}

int test_run(int dir, int ifindex, const void *pkt, size_t len, __u32 repeat, int *retval)
{
	struct __sk_buff ctx = {.ifindex = ifindex};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = repeat);
	int err;

	err = bpf_prog_test_run_opts(dp.prog_fd[dir], &opts);
	*retval = (int)opts.retval;
	return err;
}

const char *ret_name(int ret)
{
	return ret == -1 ? "TCX_NEXT" : ret == 2 ? "TCX_DROP" : ret == 7 ? "TC_ACT_REDIRECT" : "?";
}

void run_case(const struct tcase *c)
{
	struct rw_counters node0, node1, run0, run1;
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(&c->pkt, buf);
	__u32 run_idx = run_idx_of(c->run);
	int retval, err, failed_before = t_failed;
	char rule[RW_RULE_NAME_LEN] = "";
	/* TCX_NEXT, TC_ACT_REDIRECT (the answer, to the veth's peer), TCX_DROP; a reset made
	 * of a remote's segment is on its way into the pod (TCX_NEXT)
	 */
	int want_ret = c->verdict == ALLOW ? -1 : c->answer && c->dir == I ? -1 : c->answer ? 7 : 2;

	t_count++;
	drain_events();
	rw_counters_read(&dp, 0, &node0);
	if (run_idx)
		rw_counters_read(&dp, run_idx, &run0);

	err = test_run(c->dir, ifindex_of[c->dev], buf, len, 1, &retval);
	CHECK_EQ(err, 0, "test_run");
	CHECK(retval == want_ret, "verdict", "returned %d (%s), expected %d (%s)", retval,
	      ret_name(retval), want_ret, ret_name(want_ret));

	/* Counters: exactly one packet under (direction, reason), node-wide and for the run. */
	rw_counters_read(&dp, 0, &node1);
	check_one_packet("node counter", "the node", &node0, &node1, c->dir, c->reason);
	CHECK(node1.bytes[c->dir][c->reason] - node0.bytes[c->dir][c->reason] == len,
	      "byte counter", "bytes grew by %llu, expected %zu",
	      (unsigned long long)(node1.bytes[c->dir][c->reason] - node0.bytes[c->dir][c->reason]),
	      len);
	for (int a = 1; a < RW_ANSWER_COUNT; a++)
		CHECK(node1.answers[a] - node0.answers[a] == (a == c->answer), "answer counter",
		      "answers[%s] grew by %llu", rw_answer_name(a),
		      (unsigned long long)(node1.answers[a] - node0.answers[a]));
	if (c->run) {
		CHECK(run_idx != 0, "run", "run %s not found in the live pods map", c->run);
		rw_counters_read(&dp, run_idx, &run1);
		if (c->answer)
			CHECK_EQ(run1.answers[c->answer] - run0.answers[c->answer], 1,
				 "run's answer counter");
		check_one_packet("run counter", c->run, &run0, &run1, c->dir, c->reason);
	}

	/* The event: one per drop and per new allowed flow, saying what the counters say. */
	ring_buffer__consume(ring);
	CHECK(n_events == c->event, "events", "%d events, expected %d", n_events, c->event);
	if (n_events == 1 && c->event) {
		const struct rw_event *ev = &events[0];
		struct in_addr want_src, want_dst;

		inet_pton(AF_INET, c->pkt.src, &want_src);
		inet_pton(AF_INET, c->pkt.dst, &want_dst);
		CHECK(ev->reason == c->reason, "event reason", "%s, expected %s",
		      rw_reason_name(ev->reason), rw_reason_name(c->reason));
		CHECK_EQ(ev->verdict, c->verdict, "event verdict");
		CHECK(ev->answer == c->answer, "event answer", "%s, expected %s",
		      rw_answer_name(ev->answer), rw_answer_name(c->answer));
		CHECK_EQ(ev->dir, c->dir, "event direction");
		CHECK_EQ(ntohs(ev->ethertype),
			 c->pkt.vlan	    ? 0x8100
			 : c->pkt.arp	    ? 0x0806
			 : c->pkt.ethertype ? c->pkt.ethertype
			 : c->pkt.ipv6	    ? 0x86dd
					    : 0x0800,
			 "event ethertype");
		CHECK_EQ(ev->ifindex, ifindex_of[c->dev], "event ifindex");
		CHECK(!strcmp(ev->run_id, c->run ? c->run : ""), "event run",
		      "\"%s\", expected \"%s\"", ev->run_id, c->run ? c->run : "");
		CHECK(!c->run || ev->run_gen > 0, "event generation", "%u", ev->run_gen);
		if (c->pkt.ipv6) {
			/* The IPv6 header's addresses, whatever came after it. */
			__be32 src6[4], dst6[4];
			char got_s[INET6_ADDRSTRLEN], got_d[INET6_ADDRSTRLEN];

			inet_pton(AF_INET6, c->pkt.src, src6);
			inet_pton(AF_INET6, c->pkt.dst, dst6);
			inet_ntop(AF_INET6, ev->saddr6, got_s, sizeof(got_s));
			inet_ntop(AF_INET6, ev->daddr6, got_d, sizeof(got_d));
			CHECK(!memcmp(ev->saddr6, src6, 16) && !memcmp(ev->daddr6, dst6, 16),
			      "event addresses", "%s -> %s, expected %s -> %s", got_s, got_d,
			      c->pkt.src, c->pkt.dst);
			int frag = 0;

			for (int e = 0; e < c->pkt.n_ext; e++)
				frag |= c->pkt.ext[e] == 44;
			/* Past the extension headers: the upper layer and its ports were read. */
			if (!frag && c->reason != RW_REASON_MALFORMED &&
			    c->reason != RW_REASON_IPV6_ROUTING &&
			    c->reason != RW_REASON_IPV6_EXT_HEADERS &&
			    c->reason != RW_REASON_IPV6_NEXT_HEADER &&
			    c->reason != RW_REASON_IPV6_JUMBOGRAM) {
				CHECK_EQ(ev->proto, c->pkt.proto, "event protocol");
				if (c->pkt.proto == TCP || c->pkt.proto == UDP)
					CHECK(ntohs(ev->sport) == c->pkt.sport &&
						      ntohs(ev->dport) == c->pkt.dport,
					      "event ports", "%u -> %u", ntohs(ev->sport),
					      ntohs(ev->dport));
			}
		} else if (c->reason != RW_REASON_UNSUPPORTED_L2 &&
			   c->reason != RW_REASON_MALFORMED && c->reason != RW_REASON_IP_OPTIONS &&
			   c->reason != RW_REASON_FRAGMENT) {
			CHECK(ev->saddr == want_src.s_addr && ev->daddr == want_dst.s_addr,
			      "event addresses", "%08x -> %08x", ntohl(ev->saddr),
			      ntohl(ev->daddr));
			CHECK_EQ(ev->proto, c->pkt.arp ? 0 : c->pkt.proto, "event protocol");
			if (c->pkt.proto == TCP || c->pkt.proto == UDP)
				CHECK(ntohs(ev->sport) == c->pkt.sport &&
					      ntohs(ev->dport) == c->pkt.dport,
				      "event ports", "%u -> %u", ntohs(ev->sport),
				      ntohs(ev->dport));
		}
		if (c->path != NO_PATH)
			CHECK(ev->path == c->path, "event path", "%s, expected %s",
			      rw_path_name(ev->path), rw_path_name(c->path));
		if (c->run)
			CHECK(ev->revision > 0, "event revision", "%llu",
			      (unsigned long long)ev->revision);
		/* Every event names its rule: the case's, else a refusal's built-in text. */
		rw_event_rule_name(ev, dp_policy, rule, sizeof(rule));
		CHECK(rule[0], "event rule", "no rule named");
		if (c->rule)
			CHECK(!strcmp(rule, c->rule), "event rule", "\"%s\", expected \"%s\"", rule,
			      c->rule);
		else if (c->verdict == DROP && rw_reason_rule(c->reason)[0])
			CHECK(!strcmp(rule, rw_reason_rule(c->reason)), "event rule",
			      "\"%s\", expected \"%s\"", rule, rw_reason_rule(c->reason));
	}
	printf("%s %d - %s: %s%s%s%s%s%s%s\n", t_failed == failed_before ? "ok" : "not ok", t_count,
	       c->name, c->verdict == ALLOW ? "allowed" : rw_reason_name(c->reason),
	       c->path != NO_PATH && c->verdict == ALLOW ? " via " : "",
	       c->path != NO_PATH && c->verdict == ALLOW ? rw_path_name(c->path) : "",
	       c->answer ? ", answered: " : "", c->answer ? rw_answer_name(c->answer) : "",
	       c->rule ? ", rule: " : "", c->rule ? rule : "");
}

void run_table(const struct tcase *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_case(&cases[i]);
}

/* Take the service rule (scope 0) for daddr tcp/dport out of the live map behind the datapath's
 * back (out 1), or put it back (out 0): no apply and the same revision, so a flow judged in full
 * is refused while it is out and a cached one is not. One rule is out at a time.
 */
void service_rule(int out, const char *daddr, __u16 dport, const char *what)
{
	static struct rw_rule saved;
	struct rw_allow_key k = {.scope = 0, .dport = htons(dport), .proto = TCP};
	int fd = rw_live_inner_fd(&dp, RW_M_ALLOW_EXACT);

	inet_pton(AF_INET, daddr, &k.daddr);
	if (out && (fd < 0 || bpf_map_lookup_elem(fd, &k, &saved) || bpf_map_delete_elem(fd, &k)))
		FATAL("taking the %s's rule out of the live map: %s", what, strerror(errno));
	if (!out && (fd < 0 || bpf_map_update_elem(fd, &k, &saved, BPF_NOEXIST)))
		FATAL("putting the %s's rule back: %s", what, strerror(errno));
	close(fd);
}

/* Set the lease deadline through rw_lease, as the agent does: 0 none, 1 (1 ns after boot)
 * behind the kernel's clock, expired.
 */
void set_lease(__u64 deadline_ns)
{
	char err[256];

	if (rw_lease_write(&dp, deadline_ns, err, sizeof(err)))
		FATAL("rw_lease_write: %s", err);
}

/* Parse `json` (a parse error is fatal) and apply it over the series' last snapshot, as the
 * agent applies one over the one in force: 0, the series now ending at it, or rw_apply()'s
 * error (err filled), the series as it was.
 */
int apply_over(struct applied *s, const char *json, const char *what, struct rw_apply_result *res,
	       char *err, size_t errlen)
{
	struct rw_policy_error perr;
	struct rw_policy p;
	int ret;

	if (rw_policy_parse(json, strlen(json), what, &p, &perr))
		FATAL("%s: %s", what, perr.text);
	ret = rw_apply(&dp, s->have ? &s->last : NULL, &p, res, err, errlen);
	if (ret) {
		rw_policy_free(&p);
		return ret;
	}
	applied_end(s);
	s->last = p;
	s->have = 1;
	return 0;
}

/* The series forgotten: the next apply_over() applies as if nothing was. */
void applied_end(struct applied *s)
{
	if (s->have)
		rw_policy_free(&s->last);
	s->have = 0;
}

void apply_json(const char *json, int expect_err, const char *what)
{
	static struct applied suite;
	struct rw_apply_result res;
	char err[512];
	int ret;

	ret = apply_over(&suite, json, what, &res, err, sizeof(err));
	t_count++;
	if (expect_err) {
		CHECK(ret == expect_err, what, "rw_apply returned %d (%s), expected %d", ret, err,
		      expect_err);
		printf("%s %d - %s: refused: %s\n", ret == expect_err ? "ok" : "not ok", t_count,
		       what, err);
		return;
	}
	if (!CHECK(ret == 0, what, "rw_apply: %s", err))
		FATAL("cannot go on without the snapshot");
	printf("ok %d - %s: revision %llu live in slot %u: %u runs, %u pods, %u entries; "
	       "built in %.2f ms, flipped in %.2f ms, %u flows flushed\n",
	       t_count, what, (unsigned long long)res.revision, res.slot, res.runs, res.pods,
	       res.entries, res.build_ms, res.flip_ms, res.flows_flushed);
	dp_policy = &suite.last;
}

void bind_veth(int dev, const char *ip)
{
	struct in_addr a;

	inet_pton(AF_INET, ip, &a);
	if (rw_endpoint_bind(&dp, ifindex_of[dev], a.s_addr))
		FATAL("binding %s to %s: %s", devs[dev], ip, strerror(errno));
}

void make_veths(void)
{
	char cmd[256];

	if (unshare(CLONE_NEWNET))
		FATAL("unshare(CLONE_NEWNET): %s (the suite needs root)", strerror(errno));
	if (system("ip link set lo up"))
		FATAL("ip link set lo up failed");
	for (int i = 0; i < 4; i++) {
		snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %sp", devs[i],
			 devs[i]);
		if (system(cmd))
			FATAL("%s failed", cmd);
		ifindex_of[i] = if_nametoindex(devs[i]);
		if (!ifindex_of[i])
			FATAL("%s has no ifindex", devs[i]);
	}
}

void sh(const char *cmd)
{
	if (system(cmd))
		FATAL("%s failed", cmd);
}

__u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* A frame as a TAP diagnostic line: "  # what: " and its bytes in hex. */
void dump_hex(const char *what, const __u8 *b, size_t len)
{
	printf("  # %s: ", what);
	for (size_t i = 0; i < len; i++)
		printf("%02x", b[i]);
	printf("\n");
}

/* The node's config as the datapath holds it, and written back: a failure is fatal. */
struct rw_config config_get(void)
{
	struct rw_config cfg;

	if (rw_config_read(&dp, &cfg))
		FATAL("reading config: %s", strerror(errno));
	return cfg;
}

/* The revision in force, as the datapath's state word holds it. */
__u64 revision_now(void)
{
	struct rw_config cfg = config_get();

	return RW_STATE_REVISION(cfg.state);
}

void config_put(const struct rw_config *cfg)
{
	if (rw_config_write(&dp, cfg))
		FATAL("writing config: %s", strerror(errno));
}

/* One packet more under (dir, reason) in the counters of who (the node or a run). */
int check_one_packet(const char *name, const char *who, const struct rw_counters *before,
		     const struct rw_counters *after, int dir, int reason)
{
	__u64 grew = after->packets[dir][reason] - before->packets[dir][reason];

	return CHECK(grew == 1, name, "%s: packets[%s][%s] grew by %llu, expected 1", who,
		     dir ? "ingress" : "egress", rw_reason_name(reason), (unsigned long long)grew);
}
