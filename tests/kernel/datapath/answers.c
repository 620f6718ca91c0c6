// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* answers.c (test_datapath): answers to refusals (a TCP reset, an ICMP unreachable), checked byte by byte, the answer
 * budget and the refusal modes.
 */
#include "dp_suite.h"

/* ---- answers to refusals ---- */

void set_answer_budget(__u32 rate, __u32 burst)
{
	struct rw_config cfg;

	if (rw_config_read(&dp, &cfg))
		FATAL("reading config");
	cfg.answer_rate = rate;
	cfg.answer_burst = burst;
	if (rw_config_write(&dp, &cfg))
		FATAL("writing config");
}

int test_run_out(int dir, int ifindex, const void *pkt, size_t len, __u8 *out, __u32 *out_len,
		 int *retval)
{
	struct __sk_buff ctx = {.ifindex = ifindex};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .data_out = out,
		    .data_size_out = PKT_MAX, .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
		    .repeat = 1);
	int err;

	err = bpf_prog_test_run_opts(dp.prog_fd[dir], &opts);
	*retval = (int)opts.retval;
	*out_len = opts.data_size_out;
	return err;
}

void put16be(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

void put32be(__u8 *p, __u32 v)
{
	put16be(p, v >> 16);
	put16be(p + 2, v);
}

/* The TCP checksum field's value for the segment at tcp (RFC 793 3.1 pseudo-header). */
__u16 tcp_csum(const __u8 *ip, const __u8 *tcp, size_t tcp_len)
{
	__u8 ph[12] = {0};

	memcpy(ph, ip + 12, 8);
	ph[9] = IPPROTO_TCP;
	put16be(ph + 10, tcp_len);
	return ~pkt_csum_sum(tcp, tcp_len, pkt_csum_sum(ph, 12, 0)) & 0xffff;
}

const __u8 pod_mac[6] = {0x02, 0, 0, 0, 0, 0x01}, gw_mac[6] = {0x02, 0, 0, 0, 0, 0xfe};

/* The frame head every answer has: to the pod's MAC from the gateway's, IPv4 from the refused
 * destination to the pod.
 */
static void want_head(const struct pkt_spec *s, __u8 *w, __u8 tos, __u16 tot_len, __u16 frag,
		      __u8 proto)
{
	struct in_addr src, dst;

	inet_pton(AF_INET, s->src, &src);
	inet_pton(AF_INET, s->dst, &dst);
	memcpy(w, pod_mac, 6);
	memcpy(w + 6, gw_mac, 6);
	put16be(w + 12, 0x0800);
	w[14] = 0x45;
	w[15] = tos;
	put16be(w + 16, tot_len);
	put16be(w + 20, frag);
	w[22] = 64;
	w[23] = proto;
	memcpy(w + 26, &dst, 4);
	memcpy(w + 30, &src, 4);
	put16be(w + 24, ~pkt_csum_sum(w + 14, 20, 0) & 0xffff);
}

/* The reset RFC 793 3.4 makes of the segment s: built here byte by byte from the spec. */
static size_t want_rst(const struct pkt_spec *s, __u32 seq, __u32 ack, __u8 flags, __u8 *w)
{
	memset(w, 0, PKT_MAX);
	want_head(s, w, 0, 40, 0x4000, IPPROTO_TCP);
	put16be(w + 34, s->dport);
	put16be(w + 36, s->sport);
	put32be(w + 38, seq);
	put32be(w + 42, ack);
	w[46] = 5 << 4;
	w[47] = flags;
	put16be(w + 50, tcp_csum(w + 14, w + 34, 20));
	return 54;
}

/* ICMP destination unreachable, code 13, quoting the first `quote` bytes of the refused IP
 * datagram in.
 */
static size_t want_icmp(const struct pkt_spec *s, const __u8 *in, size_t quote, __u8 *w)
{
	memset(w, 0, PKT_MAX);
	want_head(s, w, 0xc0, 20 + 8 + quote, 0, IPPROTO_ICMP);
	w[34] = 3;
	w[35] = 13;
	memcpy(w + 42, in + 14, quote);
	put16be(w + 36, ~pkt_csum_sum(w + 34, 8 + quote, 0) & 0xffff);
	return 42 + quote;
}

/* The checksums of an answer, summed over what the program wrote, not compared with ours. */
int answer_sums_ok(const __u8 *f, size_t len)
{
	size_t ip_len = len - 14;

	if (len < 34 || pkt_csum_sum(f + 14, 20, 0) != 0xffff)
		return 0;
	if (f[23] == IPPROTO_TCP) {
		__u8 ph[12] = {0};

		memcpy(ph, f + 26, 8);
		ph[9] = IPPROTO_TCP;
		put16be(ph + 10, ip_len - 20);
		return pkt_csum_sum(f + 34, ip_len - 20, pkt_csum_sum(ph, 12, 0)) == 0xffff;
	}
	return f[23] == IPPROTO_ICMP && pkt_csum_sum(f + 34, ip_len - 20, 0) == 0xffff;
}

struct acase {
	const char *name;
	int dev;
	struct pkt_spec pkt;
	int reason;
	int answer;	/* enum rw_answer */
	__u32 seq, ack; /* RW_ANSWER_RST: the reset's numbers */
	__u8 flags;
	size_t quote; /* RW_ANSWER_ICMP: bytes of the datagram quoted */
};

static void run_answer_case(const struct acase *c)
{
	__u8 in[PKT_MAX], out[PKT_MAX], want[PKT_MAX];
	size_t len = pkt_build(&c->pkt, in), want_len = len;
	struct rw_counters n0, n1;
	int retval, err, failed_before = t_failed;
	__u32 out_len = 0;

	if (c->answer == RW_ANSWER_RST)
		want_len = want_rst(&c->pkt, c->seq, c->ack, c->flags, want);
	else if (c->answer == RW_ANSWER_ICMP)
		want_len = want_icmp(&c->pkt, in, c->quote, want);
	else
		memcpy(want, in, len); /* no answer: the packet is dropped as it came */
	t_count++;
	drain_events();
	rw_counters_read(&dp, 0, &n0);
	err = test_run_out(E, ifindex_of[c->dev], in, len, out, &out_len, &retval);
	rw_counters_read(&dp, 0, &n1);
	ring_buffer__consume(ring);
	CHECK_EQ(err, 0, "test_run");
	CHECK(retval == (c->answer ? 7 : 2), "verdict", "returned %d (%s)", retval,
	      ret_name(retval));
	CHECK_EQ(n1.packets[E][c->reason] - n0.packets[E][c->reason], 1, "reason counter");
	CHECK_EQ(n1.bytes[E][c->reason] - n0.bytes[E][c->reason], len,
		 "bytes counted are the refused packet's");
	if (c->answer)
		CHECK_EQ(n1.answers[c->answer] - n0.answers[c->answer], 1, "answer counter");
	CHECK(n_events == 1 && events[0].answer == c->answer && events[0].reason == c->reason,
	      "event", "%d events, answer %s", n_events,
	      n_events ? rw_answer_name(events[0].answer) : "-");
	CHECK(out_len == want_len && !memcmp(out, want, want_len), "output packet",
	      "%u bytes, expected %zu%s", out_len, want_len,
	      out_len == want_len ? " (contents differ)" : "");
	if (c->answer)
		CHECK(answer_sums_ok(out, out_len), "checksums", "an IP, TCP or ICMP sum is wrong");
	if (t_failed != failed_before) {
		printf("  # got: ");
		for (__u32 i = 0; i < out_len; i++)
			printf("%02x", out[i]);
		printf("\n  # want:");
		for (size_t i = 0; i < want_len; i++)
			printf("%02x", want[i]);
		printf("\n");
	}
	printf("%s %d - answer: %s: %s, %s (%u bytes out)\n",
	       t_failed == failed_before ? "ok" : "not ok", t_count, c->name,
	       rw_reason_name(c->reason), rw_answer_name(c->answer), out_len);
}

static const struct acase answer_cases[] = {
	{"a refused SYN: RST|ACK, seq 0, ack SEG.SEQ+1",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40100,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused SYN with 5 bytes of data (TFO) and options: ack SEG.SEQ+1+5",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40101,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .tcp_doff = 8,
	  .payload = 5},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 6,
	 RST | ACK,
	 0},
	{"a refused segment with ACK (a revoked flow's next): RST, seq SEG.ACK",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40102,
	  .dport = 443,
	  .tcp_flags = ACK | 0x08,
	  .tcp_ack = 0xa1b2c3d4,
	  .payload = 100},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0xa1b2c3d4,
	 0,
	 RST,
	 0},
	{"a refused bare FIN: RST|ACK, ack SEG.SEQ+1",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40103,
	  .dport = 443,
	  .tcp_flags = 0x01},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused SYN from and to port 0: the reset names ports 0",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 0,
	  .dport = 0,
	  .tcp_flags = SYN},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused SYN to the metadata address",
	 1,
	 {.src = POD_B,
	  .dst = "169.254.169.254",
	  .proto = TCP,
	  .sport = 40104,
	  .dport = 80,
	  .tcp_flags = SYN},
	 RW_REASON_METADATA,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused reset is never answered",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40105,
	  .dport = 443,
	  .tcp_flags = RST | ACK},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"refused UDP (DNS) with 40 bytes: ICMP 3/13 quoting header + 8 bytes",
	 0,
	 {.src = POD_A, .dst = "8.8.8.8", .proto = UDP, .sport = 40106, .dport = 53, .payload = 40},
	 RW_REASON_DNS,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"refused UDP from port 0 to port 0",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = UDP, .sport = 0, .dport = 0},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"refused GRE: ICMP 3/13",
	 1,
	 {.src = POD_B, .dst = "1.1.1.1", .proto = 47, .payload = 12},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"refused IP with 4 bytes of payload: the quote is the whole datagram",
	 1,
	 {.src = POD_B, .dst = "1.1.1.1", .proto = 47, .tot_len_delta = -4, .truncate = 4},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_ICMP,
	 .quote = 24},
	{"refused ICMP echo request: ICMP 3/13",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = 1, .sport = 0x0800, .payload = 56},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"a refused ICMP error (port unreachable) is never answered",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = 1, .sport = 0x0303, .payload = 28},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a refused ICMP of an unknown type is never answered",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = 1, .sport = 0x2a00, .payload = 8},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	/* No answer before the source is proven, nor where the answer's source could not be. */
	{"spoofed source: no answer",
	 0,
	 {.src = POD_B,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40107,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_SPOOFED_SOURCE,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"unbound veth: no answer",
	 2,
	 {.src = "10.1.2.77",
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40108,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_UNKNOWN_SOURCE,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a pod no run owns: no answer",
	 3,
	 {.src = POD_X, .dst = "93.184.216.34", .proto = UDP, .sport = 40109, .dport = 53},
	 RW_REASON_UNKNOWN_SOURCE,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"IP options: no answer (refused before the source is proven)",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40110,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .ihl = 6},
	 RW_REASON_IP_OPTIONS,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"an 802.1Q tag in the header: no answer (unsupported-l2)",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40111,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .vlan = 1},
	 RW_REASON_UNSUPPORTED_L2,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a truncated TCP header: no answer (malformed)",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40112,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .tot_len_delta = -10,
	  .truncate = 10},
	 RW_REASON_MALFORMED,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a fragment: no answer",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = UDP,
	  .sport = 40113,
	  .dport = 53,
	  .frag = 0x2000},
	 RW_REASON_FRAGMENT,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"to 0.0.0.0: no answer (it would come from a martian source)",
	 0,
	 {.src = POD_A,
	  .dst = "0.0.0.1",
	  .proto = TCP,
	  .sport = 40114,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_PRIVATE_DESTINATION,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"to multicast: no answer",
	 1,
	 {.src = POD_B, .dst = "239.1.2.3", .proto = UDP, .sport = 40115, .dport = 5000},
	 RW_REASON_PRIVATE_DESTINATION,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
};

void test_answers(void)
{
	for (size_t i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++)
		run_answer_case(&answer_cases[i]);
}

/* Before any snapshot nothing is proven: a refusal is a plain drop. */
void test_answer_not_ready(void)
{
	static const struct acase c = {"not ready: no answer",
				       0,
				       {.src = POD_A,
					.dst = "93.184.216.34",
					.proto = TCP,
					.sport = 40116,
					.dport = 443,
					.tcp_flags = SYN},
				       RW_REASON_NOT_READY,
				       RW_ANSWER_NONE,
				       0,
				       0,
				       0,
				       0};

	run_answer_case(&c);
}

/* The answer budget: a sandbox's refused SYNs past its burst are plain drops, counted as
 * such, while another sandbox's answers still go out. Each SYN is its own test run: a repeated
 * run would judge the reset the first one made of the packet.
 */
void test_answer_budget(void)
{
	struct pkt_spec syn = {.src = POD_A,
			       .dst = "93.184.216.34",
			       .proto = TCP,
			       .sport = 40120,
			       .dport = 443,
			       .tcp_flags = SYN};
	struct pkt_spec other = syn;
	const int n = 40, burst = 5;
	struct rw_counters n0, n1, r0, r1;
	__u32 run_a = run_idx_of("run-7f3a"), out_len;
	__u8 buf[PKT_MAX], out[PKT_MAX];
	int retval, redirected = 0, dropped = 0, other_ret, ok;
	__u64 t0, t1;

	other.src = POD_B;
	set_answer_budget(1, burst);
	rw_counters_read(&dp, 0, &n0);
	rw_counters_read(&dp, run_a, &r0);
	t0 = mono_ns();
	for (int i = 0; i < n; i++) {
		syn.sport = 40120 + i;
		test_run_out(E, ifindex_of[0], buf, pkt_build(&syn, buf), out, &out_len, &retval);
		redirected += retval == 7;
		dropped += retval == 2;
	}
	t1 = mono_ns();
	test_run_out(E, ifindex_of[1], buf, pkt_build(&other, buf), out, &out_len, &other_ret);
	rw_counters_read(&dp, 0, &n1);
	rw_counters_read(&dp, run_a, &r1);
	set_answer_budget(0, 0);
	drain_events();

	t_count++;
	/* At 1/s the loop's ticks add at most its duration in seconds, plus one. */
	ok = CHECK(redirected >= burst && redirected <= burst + 1 + (int)((t1 - t0) / 1000000000),
		   "answers within the budget", "%d answered", redirected);
	ok &= CHECK_EQ(redirected + dropped, n, "every SYN answered or dropped");
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST], redirected + 1,
		       "node's rst answers (the other sandbox's too)");
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_BUDGET] - n0.answers[RW_ANSWER_BUDGET], dropped,
		       "node's over-budget refusals");
	ok &= CHECK_EQ(r1.answers[RW_ANSWER_BUDGET] - r0.answers[RW_ANSWER_BUDGET], dropped,
		       "run's over-budget refusals");
	ok &= CHECK_EQ(n1.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			       n0.packets[E][RW_REASON_NOT_ALLOWLISTED],
		       n + 1, "every refusal counted under its reason");
	ok &= CHECK_EQ(other_ret, 7, "the other sandbox is still answered");
	printf("%s %d - answer budget 1/s burst %d: %d refused SYNs from one sandbox give %d "
	       "resets and %d plain drops in %.1f ms; the other sandbox is answered\n",
	       ok ? "ok" : "not ok", t_count, burst, n, redirected, dropped, (t1 - t0) / 1e6);
}

/* "refusal": "drop" node-wide with a run's "answer", then the other way round. */
static const char refusal_policy[] = "{\"revision\": %u, %s\"runs\": [\n"
				     "  {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]%s},\n"
				     "  {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]%s}]}\n";

void test_refusal_modes(void)
{
	struct acase a = {"",
			  0,
			  {.src = POD_A,
			   .dst = "93.184.216.34",
			   .proto = TCP,
			   .sport = 40200,
			   .dport = 443,
			   .tcp_flags = SYN},
			  RW_REASON_NOT_ALLOWLISTED,
			  RW_ANSWER_NONE,
			  0,
			  0,
			  0,
			  0};
	struct acase b = {
		"",
		1,
		{.src = POD_B, .dst = "93.184.216.34", .proto = UDP, .sport = 40201, .dport = 443},
		RW_REASON_NOT_ALLOWLISTED,
		RW_ANSWER_ICMP,
		.quote = 28};
	char json[512];

	snprintf(json, sizeof(json), refusal_policy, 1000, "\"refusal\": \"drop\", ", "",
		 ", \"refusal\": \"answer\"");
	apply_json(json, 0, "node-wide drop, run-b77e answers");
	a.name = "node-wide \"drop\": a refused SYN is a plain drop";
	run_answer_case(&a);
	b.name = "node-wide \"drop\", run's \"answer\": refused UDP is answered";
	run_answer_case(&b);

	snprintf(json, sizeof(json), refusal_policy, 1001, "", ", \"refusal\": \"drop\"", "");
	apply_json(json, 0, "node-wide answer, run-7f3a drops");
	a.name = "run's \"drop\": a refused SYN is a plain drop";
	run_answer_case(&a);
	b.name = "node default (answer): refused UDP is answered";
	run_answer_case(&b);
}
