// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* answers.c (test_datapath): answers to refusals (a TCP reset, an ICMP unreachable), checked byte by byte, the answer
 * budget and the refusal modes.
 */
#include <fcntl.h>

#include "dp_suite.h"

/* ---- answers to refusals ---- */

void set_answer_budget(__u32 rate, __u32 burst)
{
	struct rw_config cfg = config_get();

	cfg.answer_rate = rate;
	cfg.answer_burst = burst;
	config_put(&cfg);
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

/* A bare TCP header at t (20 bytes, no options), its checksum left to the caller. */
void put_tcp(__u8 *t, __u16 sport, __u16 dport, __u32 seq, __u32 ack, __u8 flags, __u16 win)
{
	put16be(t, sport);
	put16be(t + 2, dport);
	put32be(t + 4, seq);
	put32be(t + 8, ack);
	t[12] = 5 << 4;
	t[13] = flags;
	put16be(t + 14, win);
}

const __u8 pod_mac[6] = {0x02, 0, 0, 0, 0, 0x01}, gw_mac[6] = {0x02, 0, 0, 0, 0, 0xfe};

/* An IPv4 frame's head from smac to dmac, saddr to daddr, hop limit 64, its header sum. */
static void want_head(__u8 *w, const __u8 *dmac, const __u8 *smac, const char *saddr,
		      const char *daddr, __u8 tos, __u16 tot_len, __u16 frag, __u8 proto)
{
	struct in_addr src, dst;

	inet_pton(AF_INET, saddr, &src);
	inet_pton(AF_INET, daddr, &dst);
	memcpy(w, dmac, 6);
	memcpy(w + 6, smac, 6);
	put16be(w + 12, 0x0800);
	w[14] = 0x45;
	w[15] = tos;
	put16be(w + 16, tot_len);
	put16be(w + 20, frag);
	w[22] = 64;
	w[23] = proto;
	memcpy(w + 26, &src, 4);
	memcpy(w + 30, &dst, 4);
	put16be(w + 24, ~pkt_csum_sum(w + 14, 20, 0) & 0xffff);
}

/* A bare TCP segment <SEQ=seq><ACK=ack><CTL=flags> from saddr:sport to daddr:dport over IPv4
 * (DF set), window `win`, byte by byte, as want_tcp6() builds one over IPv6. Returns its length.
 */
size_t want_tcp4(const __u8 *dmac, const __u8 *smac, const char *saddr, const char *daddr,
		 __u16 sport, __u16 dport, __u32 seq, __u32 ack, __u8 flags, __u16 win, __u8 *w)
{
	memset(w, 0, PKT_MAX);
	want_head(w, dmac, smac, saddr, daddr, 0, 40, 0x4000, IPPROTO_TCP);
	put_tcp(w + 34, sport, dport, seq, ack, flags, win);
	put16be(w + 50, tcp_csum(w + 14, w + 34, 20));
	return 54;
}

/* ICMP destination unreachable, code 13, quoting the first `quote` bytes of the refused IP
 * datagram in.
 */
size_t want_icmp(const struct pkt_spec *s, const __u8 *in, size_t quote, __u8 *w)
{
	memset(w, 0, PKT_MAX);
	want_head(w, pod_mac, gw_mac, s->dst, s->src, 0xc0, 20 + 8 + quote, 0, IPPROTO_ICMP);
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

/* One case, IPv4 or IPv6 as its packet is: the program's verdict, the counters and event, and
 * the answer (or the packet dropped as it came) compared byte by byte with the one built here.
 */
void run_answer_case(const struct acase *c)
{
	const struct pkt_spec *s = &c->pkt;
	__u8 in[PKT_MAX], out[PKT_MAX], want[PKT_MAX];
	size_t len = pkt_build(s, in), want_len = len;
	int (*sums_ok)(const __u8 *, size_t) = s->ipv6 ? answer6_sums_ok : answer_sums_ok;
	struct rw_counters n0, n1;
	int retval, err, failed_before = t_failed;
	__u32 out_len = 0;

	/* The reset RFC 793 3.4 makes of the segment, or the ICMP error quoting it. */
	if (c->answer == RW_ANSWER_RST && s->ipv6)
		want_len = want_tcp6(pod_mac, gw_mac, s->dst, s->src, s->dport, s->sport, c->seq,
				     c->ack, c->flags, 0, want);
	else if (c->answer == RW_ANSWER_RST)
		want_len = want_tcp4(pod_mac, gw_mac, s->dst, s->src, s->dport, s->sport, c->seq,
				     c->ack, c->flags, 0, want);
	else if (c->answer == RW_ANSWER_ICMP)
		want_len = (s->ipv6 ? want_icmp6 : want_icmp)(s, in, c->quote, want);
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
	if (c->reason != ANY_ICMP) {
		CHECK_EQ(n1.packets[E][c->reason] - n0.packets[E][c->reason], 1, "reason counter");
		CHECK_EQ(n1.bytes[E][c->reason] - n0.bytes[E][c->reason], len,
			 "bytes counted are the refused packet's");
	}
	if (c->answer)
		CHECK_EQ(n1.answers[c->answer] - n0.answers[c->answer], 1, "answer counter");
	CHECK(n_events == 1 && events[0].answer == c->answer &&
		      (c->reason == ANY_ICMP || events[0].reason == c->reason),
	      "event", "%d events, reason %s, answer %s", n_events,
	      n_events ? rw_reason_name(events[0].reason) : "-",
	      n_events ? rw_answer_name(events[0].answer) : "-");
	CHECK(out_len == want_len && !memcmp(out, want, want_len), "output packet",
	      "%u bytes, expected %zu%s", out_len, want_len,
	      out_len == want_len ? " (contents differ)" : "");
	if (c->answer)
		CHECK(sums_ok(out, out_len), "checksums", "an IP, TCP or ICMP sum is wrong");
	if (t_failed != failed_before) {
		dump_hex("got", out, out_len);
		dump_hex("want", want, want_len);
	}
	printf("%s %d - answer%s: %s: %s, %s (%u bytes out)\n",
	       t_failed == failed_before ? "ok" : "not ok", t_count, s->ipv6 ? "6" : "", c->name,
	       c->reason != ANY_ICMP ? rw_reason_name(c->reason)
	       : n_events	     ? rw_reason_name(events[0].reason)
				     : "-",
	       rw_answer_name(c->answer), out_len);
}

#define PUB "93.184.216.34" /* not allowlisted for run-7f3a */

static const struct acase answer_cases[] = {
	ANSWER_CASE("a refused SYN: RST|ACK, seq 0, ack SEG.SEQ+1", 0, RW_REASON_NOT_ALLOWLISTED,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK), FLOW(POD_A, PUB, TCP, 40100, 443),
		    .tcp_flags = SYN),
	ANSWER_CASE("a refused SYN with 5 bytes of data (TFO) and options: ack SEG.SEQ+1+5", 0,
		    RW_REASON_NOT_ALLOWLISTED, RST_ANSWER(0, SEQ0 + 6, RST | ACK),
		    FLOW(POD_A, PUB, TCP, 40101, 443), .tcp_flags = SYN, .tcp_doff = 8,
		    .payload = 5),
	ANSWER_CASE("a refused segment with ACK (a revoked flow's next): RST, seq SEG.ACK", 0,
		    RW_REASON_NOT_ALLOWLISTED, RST_ANSWER(0xa1b2c3d4, 0, RST),
		    FLOW(POD_A, PUB, TCP, 40102, 443), .tcp_flags = ACK | 0x08,
		    .tcp_ack = 0xa1b2c3d4, .payload = 100),
	ANSWER_CASE("a refused bare FIN: RST|ACK, ack SEG.SEQ+1", 0, RW_REASON_NOT_ALLOWLISTED,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK), FLOW(POD_A, PUB, TCP, 40103, 443),
		    .tcp_flags = 0x01),
	ANSWER_CASE("a refused SYN from and to port 0: the reset names ports 0", 0,
		    RW_REASON_NOT_ALLOWLISTED, RST_ANSWER(0, SEQ0 + 1, RST | ACK),
		    FLOW(POD_A, PUB, TCP, 0, 0), .tcp_flags = SYN),
	ANSWER_CASE("a refused SYN to the metadata address", 1, RW_REASON_METADATA,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK),
		    FLOW(POD_B, "169.254.169.254", TCP, 40104, 80), .tcp_flags = SYN),
	ANSWER_CASE("a refused reset is never answered", 0, RW_REASON_NOT_ALLOWLISTED, NO_ANSWER,
		    FLOW(POD_A, PUB, TCP, 40105, 443), .tcp_flags = RST | ACK),
	ANSWER_CASE("refused UDP (DNS) with 40 bytes: ICMP 3/13 quoting header + 8 bytes", 0,
		    RW_REASON_DNS, ICMP_ANSWER(28), FLOW(POD_A, "8.8.8.8", UDP, 40106, 53),
		    .payload = 40),
	ANSWER_CASE("refused UDP from port 0 to port 0", 0, RW_REASON_NOT_ALLOWLISTED,
		    ICMP_ANSWER(28), FLOW(POD_A, PUB, UDP, 0, 0)),
	ANSWER_CASE("refused GRE: ICMP 3/13", 1, RW_REASON_UNSUPPORTED_PROTOCOL, ICMP_ANSWER(28),
		    FLOW(POD_B, "1.1.1.1", 47, 0, 0), .payload = 12),
	ANSWER_CASE("refused IP with 4 bytes of payload: the quote is the whole datagram", 1,
		    RW_REASON_UNSUPPORTED_PROTOCOL, ICMP_ANSWER(24),
		    FLOW(POD_B, "1.1.1.1", 47, 0, 0), .tot_len_delta = -4, .truncate = 4),
	ANSWER_CASE("refused ICMP echo request: ICMP 3/13", 0, RW_REASON_UNSUPPORTED_PROTOCOL,
		    ICMP_ANSWER(28), FLOW(POD_A, PUB, 1, 0x0800, 0), .payload = 56),
	ANSWER_CASE("a refused ICMP error (port unreachable) is never answered", 0,
		    RW_REASON_UNSUPPORTED_PROTOCOL, NO_ANSWER, FLOW(POD_A, PUB, 1, 0x0303, 0),
		    .payload = 28),
	ANSWER_CASE("a refused ICMP of an unknown type is never answered", 0,
		    RW_REASON_UNSUPPORTED_PROTOCOL, NO_ANSWER, FLOW(POD_A, PUB, 1, 0x2a00, 0),
		    .payload = 8),
	/* No answer before the source is proven, nor where the answer's source could not be. */
	ANSWER_CASE("spoofed source: no answer", 0, RW_REASON_SPOOFED_SOURCE, NO_ANSWER,
		    FLOW(POD_B, PUB, TCP, 40107, 443), .tcp_flags = SYN),
	ANSWER_CASE("unbound veth: no answer", 2, RW_REASON_UNKNOWN_SOURCE, NO_ANSWER,
		    FLOW("10.1.2.77", PUB, TCP, 40108, 443), .tcp_flags = SYN),
	ANSWER_CASE("a pod no run owns: no answer", 3, RW_REASON_UNKNOWN_SOURCE, NO_ANSWER,
		    FLOW(POD_X, PUB, UDP, 40109, 53)),
	ANSWER_CASE("IP options: no answer (refused before the source is proven)", 0,
		    RW_REASON_IP_OPTIONS, NO_ANSWER, FLOW(POD_A, PUB, TCP, 40110, 443),
		    .tcp_flags = SYN, .ihl = 6),
	ANSWER_CASE("an 802.1Q tag in the header: no answer (unsupported-l2)", 0,
		    RW_REASON_UNSUPPORTED_L2, NO_ANSWER, FLOW(POD_A, PUB, TCP, 40111, 443),
		    .tcp_flags = SYN, .vlan = 1),
	ANSWER_CASE("a truncated TCP header: no answer (malformed)", 0, RW_REASON_MALFORMED,
		    NO_ANSWER, FLOW(POD_A, PUB, TCP, 40112, 443), .tcp_flags = SYN,
		    .tot_len_delta = -10, .truncate = 10),
	ANSWER_CASE("a fragment: no answer", 0, RW_REASON_FRAGMENT, NO_ANSWER,
		    FLOW(POD_A, PUB, UDP, 40113, 53), .frag = 0x2000),
	ANSWER_CASE("to 0.0.0.0: no answer (it would come from a martian source)", 0,
		    RW_REASON_PRIVATE_DESTINATION, NO_ANSWER,
		    FLOW(POD_A, "0.0.0.1", TCP, 40114, 443), .tcp_flags = SYN),
	ANSWER_CASE("to multicast: no answer", 1, RW_REASON_PRIVATE_DESTINATION, NO_ANSWER,
		    FLOW(POD_B, "239.1.2.3", UDP, 40115, 5000)),
};

void test_answers(void)
{
	for (size_t i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++)
		run_answer_case(&answer_cases[i]);
}

/* Before any snapshot nothing is proven: a refusal is a plain drop. */
void test_answer_not_ready(void)
{
	static const struct acase c =
		ANSWER_CASE("not ready: no answer", 0, RW_REASON_NOT_READY, NO_ANSWER,
			    FLOW(POD_A, PUB, TCP, 40116, 443), .tcp_flags = SYN);

	run_answer_case(&c);
}

/* n refused SYNs on rwt0 from syn's port on, each its own test run: a repeated run would judge
 * the reset the first one made of the packet.
 */
void syn_flood(const struct pkt_spec *syn, int n, struct syn_flood *f)
{
	struct pkt_spec s = *syn;
	__u8 buf[PKT_MAX], out[PKT_MAX];
	__u32 out_len;
	int retval;
	__u64 t0 = mono_ns();

	f->redirected = f->dropped = 0;
	for (int i = 0; i < n; i++) {
		s.sport = syn->sport + i;
		test_run_out(E, ifindex_of[0], buf, pkt_build(&s, buf), out, &out_len, &retval);
		f->redirected += retval == 7;
		f->dropped += retval == 2;
	}
	f->ns = mono_ns() - t0;
}

/* A flood at 1/s: every SYN answered or dropped, the answers the burst's, plus the loop's ticks
 * (at most its duration in seconds, plus one).
 */
int syn_flood_within(const struct syn_flood *f, int n, int burst)
{
	int ok = CHECK(f->redirected >= burst &&
			       f->redirected <= burst + 1 + (int)(f->ns / 1000000000),
		       "answers within the budget", "%d answered", f->redirected);

	ok &= CHECK_EQ(f->redirected + f->dropped, n, "every SYN answered or dropped");
	return ok;
}

/* The answer budget: a sandbox's refused SYNs past its burst are plain drops, counted as
 * such, while another sandbox's answers still go out. Each SYN is its own test run: a repeated
 * run would judge the reset the first one made of the packet.
 */
void test_answer_budget(void)
{
	struct pkt_spec syn = {FLOW(POD_A, PUB, TCP, 40120, 443), .tcp_flags = SYN};
	struct pkt_spec other = syn;
	const int n = 40, burst = 5;
	struct rw_counters n0, n1, r0, r1;
	__u32 run_a = run_idx_of("run-7f3a"), out_len;
	__u8 buf[PKT_MAX], out[PKT_MAX];
	struct syn_flood f;
	int other_ret, ok;

	other.src = POD_B;
	set_answer_budget(1, burst);
	rw_counters_read(&dp, 0, &n0);
	rw_counters_read(&dp, run_a, &r0);
	syn_flood(&syn, n, &f);
	test_run_out(E, ifindex_of[1], buf, pkt_build(&other, buf), out, &out_len, &other_ret);
	rw_counters_read(&dp, 0, &n1);
	rw_counters_read(&dp, run_a, &r1);
	set_answer_budget(0, 0);
	drain_events();

	t_count++;
	ok = syn_flood_within(&f, n, burst);
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST], f.redirected + 1,
		       "node's rst answers (the other sandbox's too)");
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_BUDGET] - n0.answers[RW_ANSWER_BUDGET], f.dropped,
		       "node's over-budget refusals");
	ok &= CHECK_EQ(r1.answers[RW_ANSWER_BUDGET] - r0.answers[RW_ANSWER_BUDGET], f.dropped,
		       "run's over-budget refusals");
	ok &= CHECK_EQ(n1.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			       n0.packets[E][RW_REASON_NOT_ALLOWLISTED],
		       n + 1, "every refusal counted under its reason");
	ok &= CHECK_EQ(other_ret, 7, "the other sandbox is still answered");
	printf("%s %d - answer budget 1/s burst %d: %d refused SYNs from one sandbox give %d "
	       "resets and %d plain drops in %.1f ms; the other sandbox is answered\n",
	       ok ? "ok" : "not ok", t_count, burst, n, f.redirected, f.dropped, f.ns / 1e6);
}

/* "refusal": "drop" node-wide with a run's "answer", then the other way round. */
static const char refusal_policy[] = "{\"revision\": %u, %s\"runs\": [\n"
				     "  {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]%s},\n"
				     "  {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]%s}]}\n";

void test_refusal_modes(void)
{
	struct acase a = ANSWER_CASE("", 0, RW_REASON_NOT_ALLOWLISTED, NO_ANSWER,
				     FLOW(POD_A, PUB, TCP, 40200, 443), .tcp_flags = SYN);
	struct acase b = ANSWER_CASE("", 1, RW_REASON_NOT_ALLOWLISTED, ICMP_ANSWER(28),
				     FLOW(POD_B, PUB, UDP, 40201, 443));
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

/* ---- a tunnel's packet from a real pod ---- */

/* A packet socket sends the pod's frame, and the kernel gives the skb the transport header its
 * flow dissector finds (packet_snd() -> skb_probe_transport_header()): through a 6in4 (41) or
 * GRE (47) payload that holds a whole IPv6 header, or an IPIP (4) one that holds an IPv4 header,
 * that is the inner header's end, past the 28 bytes an ICMP answer quotes. BPF_PROG_TEST_RUN
 * sets no such header, so these are sent through a real veth: rwt1's peer in a network namespace
 * of its own (bpf_redirect_peer() delivers only across namespaces), rw_egress on rwt1's TC
 * ingress hook, the answer caught by a packet socket on the peer.
 */
struct tunnel_case {
	const char *name;
	__u8 proto;
	size_t payload; /* pkt_build()'s: the inner bytes are payload + 8 */
	size_t gre;	/* bytes of GRE header before the inner one (proto 0x86dd) */
	int inner;	/* 6: an IPv6 header, 4: an IPv4 one, 0: zeros */
};

static const struct tunnel_case tunnel_cases[] = {
	{"6in4 (41) holding a whole IPv6 header", 41, 32, 0, 6},
	{"6in4 (41) holding an IPv6 header and 24 bytes after it", 41, 56, 0, 6},
	{"GRE (47) holding a GRE header and a whole IPv6 header", 47, 36, 4, 6},
	{"IPIP (4) holding a whole IPv4 header of 60 bytes (options)", 4, 52, 0, 4},
	{"GRE (47) holding 20 bytes of zeros", 47, 12, 0, 0},
};

static void ns_enter(int fd)
{
	if (setns(fd, CLONE_NEWNET))
		FATAL("setns: %s", strerror(errno));
}

static void tunnel_frame(const struct tunnel_case *c, __u8 *in, size_t *len)
{
	struct pkt_spec s = {
		.src = POD_B, .dst = "1.1.1.1", .proto = c->proto, .payload = c->payload};
	__u8 *h;

	*len = pkt_build(&s, in);
	memset(in + 34, 0, *len - 34);
	h = in + 34 + c->gre;
	if (c->gre)
		put16be(in + 36, 0x86dd);
	if (c->inner == 6) {
		h[0] = 0x60;
		put16be(h + 4, *len - 34 - c->gre - 40);
		h[6] = 59; /* no next header */
		h[7] = 64;
		inet_pton(AF_INET6, "2001:db8::1", h + 8);
		inet_pton(AF_INET6, "2001:db8::2", h + 24);
	} else if (c->inner == 4) {
		h[0] = 0x4f; /* 40 bytes of options: no-operations (1) */
		memset(h + 20, 1, 40);
		put16be(h + 2, 60);
		h[8] = 64;
		h[9] = 59;
		inet_pton(AF_INET, "192.0.2.1", h + 12);
		inet_pton(AF_INET, "192.0.2.2", h + 16);
		put16be(h + 10, ~pkt_csum_sum(h, 60, 0) & 0xffff);
	}
}

/* The next IPv4 ICMP frame into the pod within the deadline; 0 when none came. */
static size_t icmp_next(int fd, __u8 *f)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct sockaddr_ll from;
	socklen_t fl = sizeof(from);
	ssize_t n;

	while (poll(&p, 1, 2000 * wait_scale()) == 1) {
		n = recvfrom(fd, f, PKT_MAX, 0, (struct sockaddr *)&from, &fl);
		if (n >= 34 && from.sll_pkttype != PACKET_OUTGOING && f[12] == 0x08 && f[13] == 0 &&
		    f[23] == IPPROTO_ICMP)
			return n;
	}
	return 0;
}

/* rw_egress on the TC ingress hook of devs[dev] (what the pod sends), as the agent attaches it
 * on a kernel without tcx; and off again.
 */
void egress_attach_tc(struct bpf_tc_hook *hook, struct bpf_tc_opts *ours, int dev)
{
	int ret = bpf_tc_hook_create(hook);

	if (ret && ret != -EEXIST)
		FATAL("clsact on %s: %s", devs[dev], strerror(-ret));
	ours->prog_fd = dp.prog_fd[RW_DIR_EGRESS];
	if (bpf_tc_attach(hook, ours))
		FATAL("attaching rw_egress to %s: %s", devs[dev], strerror(errno));
}

void egress_detach_tc(struct bpf_tc_hook *hook, struct bpf_tc_opts *ours)
{
	ours->prog_fd = ours->flags = ours->prog_id = 0;
	bpf_tc_detach(hook, ours);
}

void test_answer_tunnels(void)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex_of[1],
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, ours, .handle = 8, .priority = 8);
	char cmd[512], peer[IFNAMSIZ + 2];
	int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), pod_ns, fd;
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};

	snprintf(peer, sizeof(peer), "%sp", devs[1]);
	if (host_ns < 0)
		FATAL("/proc/self/ns/net: %s", strerror(errno));
	egress_attach_tc(&hook, &ours, 1);
	if (unshare(CLONE_NEWNET))
		FATAL("unshare(CLONE_NEWNET): %s", strerror(errno));
	pod_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (pod_ns < 0)
		FATAL("/proc/self/ns/net: %s", strerror(errno));
	ns_enter(host_ns);
	/* No IPv6 on either end: the pod's socket is to see only what the test makes. */
	snprintf(cmd, sizeof(cmd),
		 "sysctl -qw net.ipv6.conf.%s.disable_ipv6=1 && ip link set %s up && "
		 "ip link set %s netns /proc/%d/fd/%d",
		 devs[1], devs[1], peer, getpid(), pod_ns);
	if (system(cmd))
		FATAL("%s failed", cmd);
	ns_enter(pod_ns);
	snprintf(cmd, sizeof(cmd),
		 "sysctl -qw net.ipv6.conf.%s.disable_ipv6=1 && ip link set %s up", peer, peer);
	if (system(cmd))
		FATAL("%s failed", cmd);
	sll.sll_ifindex = if_nametoindex(peer);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0 || !sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		FATAL("packet socket on %s: %s", peer, strerror(errno));

	for (size_t i = 0; i < sizeof(tunnel_cases) / sizeof(tunnel_cases[0]); i++) {
		const struct tunnel_case *c = &tunnel_cases[i];
		struct pkt_spec s = {.src = POD_B, .dst = "1.1.1.1"};
		__u8 in[PKT_MAX], out[PKT_MAX], want[PKT_MAX];
		struct rw_counters n0, n1;
		size_t len, want_len, out_len;
		int failed_before = t_failed;

		tunnel_frame(c, in, &len);
		want_len = want_icmp(&s, in, 28, want);
		t_count++;
		drain_events();
		rw_counters_read(&dp, 0, &n0);
		if (send(fd, in, len, 0) != (ssize_t)len)
			FATAL("send on %s: %s", peer, strerror(errno));
		out_len = icmp_next(fd, out);
		rw_counters_read(&dp, 0, &n1);
		ring_buffer__consume(ring);
		CHECK_EQ(n1.packets[E][RW_REASON_UNSUPPORTED_PROTOCOL] -
				 n0.packets[E][RW_REASON_UNSUPPORTED_PROTOCOL],
			 1, "unsupported-protocol counted");
		CHECK_EQ(n1.answers[RW_ANSWER_ICMP] - n0.answers[RW_ANSWER_ICMP], 1,
			 "icmp answer counted");
		CHECK(n_events == 1 && events[0].answer == RW_ANSWER_ICMP, "event",
		      "%d events, answer %s", n_events,
		      n_events ? rw_answer_name(events[0].answer) : "-");
		CHECK(out_len == want_len && !memcmp(out, want, want_len), "answer in the pod",
		      "%zu bytes, expected %zu%s", out_len, want_len,
		      out_len == want_len ? " (contents differ)" : "");
		if (out_len)
			CHECK(answer_sums_ok(out, out_len), "checksums",
			      "an IP or ICMP sum is wrong");
		printf("%s %d - answer, real veth: %s (%zu bytes): icmp (%zu bytes in the pod)\n",
		       t_failed == failed_before ? "ok" : "not ok", t_count, c->name, len, out_len);
	}

	close(fd);
	snprintf(cmd, sizeof(cmd), "ip link set %s down && ip link set %s netns /proc/%d/fd/%d",
		 peer, peer, getpid(), host_ns);
	if (system(cmd))
		FATAL("%s failed", cmd);
	ns_enter(host_ns);
	close(pod_ns);
	close(host_ns);
	egress_detach_tc(&hook, &ours);
	snprintf(cmd, sizeof(cmd),
		 "ip link set %s down && sysctl -qw net.ipv6.conf.%s.disable_ipv6=0", devs[1],
		 devs[1]);
	if (system(cmd))
		FATAL("%s failed", cmd);
}
