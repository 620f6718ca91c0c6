// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* answers6.c (test_datapath): the answers to IPv6 refusals, checked byte by byte: a TCP reset
 * over the IPv6 pseudo-header, an ICMPv6 destination unreachable 1/1 quoting the refused packet
 * through its extension headers; none for a multicast, unspecified or loopback destination, a
 * reset, an unproven source; none under "refusal": "drop" or over the answer budget. Every
 * checksum is summed here over what the program wrote (answer6_sums_ok()), besides the frame
 * being compared with the one built here. rwt0 is bound dual-stack here (POD_A and POD_A6), and
 * run-7f3a holds both addresses from revision 1100 on (the end of the suite: every revision
 * before is the other parts').
 */
#include <fcntl.h>
#include <sys/ioctl.h>

#include "dp_suite.h"

#ifndef POD_A6
#define POD_A6 "2600:1f14:abc:1::3" /* rwt0's IPv6 here, as ipv6.c names it */
#endif
#define ICMPV6 58
#define PUB6   "2606:4700::1111" /* not allowlisted for run-7f3a */

/* run-7f3a with the dual-stack pod, refusal modes as test_refusal_modes()'s. */
static const char policy6[] =
	"{\"revision\": %u, %s\"runs\": [\n"
	"  {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\", \"" POD_A6 "\"]%s},\n"
	"  {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]}]}\n";

void apply_policy6(unsigned int revision, const char *node, const char *run, const char *what)
{
	char json[512];

	snprintf(json, sizeof(json), policy6, revision, node, run);
	apply_json(json, 0, what);
}

/* ICMPv6 destination unreachable, code 1, from the refused destination to the pod, quoting the
 * first `quote` bytes of the refused packet in from its IPv6 header.
 */
size_t want_icmp6(const struct pkt_spec *s, const __u8 *in, size_t quote, __u8 *w)
{
	struct in6_addr src, dst;
	__u8 tail[8] = {0};

	inet_pton(AF_INET6, s->src, &src);
	inet_pton(AF_INET6, s->dst, &dst);
	memset(w, 0, PKT_MAX);
	memcpy(w, pod_mac, 6);
	memcpy(w + 6, gw_mac, 6);
	put16be(w + 12, 0x86dd);
	w[14] = 0x60;
	put16be(w + 18, 8 + quote);
	w[20] = ICMPV6;
	w[21] = 64;
	memcpy(w + 22, &dst, 16);
	memcpy(w + 38, &src, 16);
	w[54] = 1; /* destination unreachable */
	w[55] = 1; /* administratively prohibited */
	memcpy(w + 62, in + 14, quote);
	put32be(tail, 8 + quote);
	tail[7] = ICMPV6;
	put16be(w + 56, ~pkt_csum_sum(w + 54, 8 + quote,
				      pkt_csum_sum(tail, 8, pkt_csum_sum(w + 22, 32, 0))) &
				0xffff);
	return 62 + quote;
}

/* From the dual-stack pod on rwt0. */
#define FROM_POD(proto_, dst_, sport_, dport_) .ipv6 = 1, FLOW(POD_A6, dst_, proto_, sport_, dport_)

static const struct acase answer6_cases[] = {
	ANSWER_CASE("a refused SYN: RST|ACK, seq 0, ack SEG.SEQ+1", 0, RW_REASON_NOT_ALLOWLISTED,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK), FROM_POD(TCP, PUB6, 40700, 443),
		    .tcp_flags = SYN),
	ANSWER_CASE("a refused SYN with 5 bytes of data (TFO) and options: ack SEG.SEQ+1+5", 0,
		    RW_REASON_NOT_ALLOWLISTED, RST_ANSWER(0, SEQ0 + 6, RST | ACK),
		    FROM_POD(TCP, PUB6, 40701, 443), .tcp_flags = SYN, .tcp_doff = 8, .payload = 5),
	ANSWER_CASE(
		"a refused SYN behind destination options and hop-by-hop: a reset without them, ack "
		"SEG.SEQ+1",
		0, RW_REASON_NOT_ALLOWLISTED, RST_ANSWER(0, SEQ0 + 4, RST | ACK),
		FROM_POD(TCP, PUB6, 40702, 443), .tcp_flags = SYN, .n_ext = 2, .ext = {0, 60},
		.ext_len = {1, 2}, .payload = 3),
	ANSWER_CASE("a refused segment with ACK: RST, seq SEG.ACK", 0, RW_REASON_NOT_ALLOWLISTED,
		    RST_ANSWER(0xa1b2c3d4, 0, RST), FROM_POD(TCP, PUB6, 40703, 443),
		    .tcp_flags = ACK | 0x08, .tcp_ack = 0xa1b2c3d4, .payload = 100),
	ANSWER_CASE("a refused bare FIN: RST|ACK, ack SEG.SEQ+1", 0, RW_REASON_NOT_ALLOWLISTED,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK), FROM_POD(TCP, PUB6, 40704, 443),
		    .tcp_flags = 0x01),
	ANSWER_CASE("a refused SYN from and to port 0", 0, RW_REASON_NOT_ALLOWLISTED,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK), FROM_POD(TCP, PUB6, 0, 0),
		    .tcp_flags = SYN),
	ANSWER_CASE("a refused SYN to the metadata address fd00:ec2::254", 0, RW_REASON_METADATA,
		    RST_ANSWER(0, SEQ0 + 1, RST | ACK), FROM_POD(TCP, "fd00:ec2::254", 40705, 80),
		    .tcp_flags = SYN),
	ANSWER_CASE("a refused reset is never answered", 0, RW_REASON_NOT_ALLOWLISTED, NO_ANSWER,
		    FROM_POD(TCP, PUB6, 40706, 443), .tcp_flags = RST | ACK),
	ANSWER_CASE("refused UDP (DNS) with 40 bytes: ICMPv6 1/1 quoting all 88 bytes", 0,
		    RW_REASON_DNS, ICMP_ANSWER(40 + 8 + 40), FROM_POD(UDP, PUB6, 40707, 53),
		    .payload = 40),
	ANSWER_CASE("refused UDP of 400 bytes: the quote stops at 320", 0,
		    RW_REASON_NOT_ALLOWLISTED, ICMP_ANSWER(320), FROM_POD(UDP, PUB6, 40708, 443),
		    .payload = 392),
	ANSWER_CASE(
		"refused UDP behind 256 bytes of extension headers: the quote reaches past its ports",
		0, RW_REASON_NOT_ALLOWLISTED, ICMP_ANSWER(320), FROM_POD(UDP, PUB6, 40709, 443),
		.n_ext = 2, .ext = {0, 60}, .ext_len = {15, 15}, .payload = 100),
	ANSWER_CASE("refused UDP with an odd length (5 bytes): quoted whole, the sum padded", 0,
		    RW_REASON_NOT_ALLOWLISTED, ICMP_ANSWER(40 + 8 + 5),
		    FROM_POD(UDP, PUB6, 40710, 443), .payload = 5),
	ANSWER_CASE("refused SCTP: ICMPv6 1/1", 0, RW_REASON_UNSUPPORTED_PROTOCOL,
		    ICMP_ANSWER(40 + 8 + 12), FROM_POD(132, PUB6, 40711, 443), .payload = 12),
	ANSWER_CASE("refused ICMPv6 echo request: ICMPv6 1/1", 0, ANY_ICMP,
		    ICMP_ANSWER(40 + 8 + 56), FROM_POD(ICMPV6, PUB6, 0, 0), .icmp6_type = 128,
		    .payload = 56),
	ANSWER_CASE("refused ICMPv6 echo reply: ICMPv6 1/1", 0, ANY_ICMP, ICMP_ANSWER(40 + 8 + 8),
		    FROM_POD(ICMPV6, PUB6, 0, 0), .icmp6_type = 129, .payload = 8),
	ANSWER_CASE("a refused ICMPv6 error (destination unreachable) is never answered", 0,
		    ANY_ICMP, NO_ANSWER, FROM_POD(ICMPV6, PUB6, 0, 0), .icmp6_type = 1,
		    .payload = 48),
	ANSWER_CASE("a refused ICMPv6 of an unknown type is never answered", 0,
		    RW_REASON_ICMPV6_TYPE, NO_ANSWER, FROM_POD(ICMPV6, PUB6, 0, 0),
		    .icmp6_type = 200, .payload = 8),
	ANSWER_CASE("refused UDP to a link-local address: answered from it", 0,
		    RW_REASON_PRIVATE_DESTINATION, ICMP_ANSWER(40 + 8 + 8),
		    FROM_POD(UDP, "fe80::77", 40712, 5000), .payload = 8),
	/* No answer where its source could not be. */
	ANSWER_CASE("to multicast ff0e::1: no answer", 0, RW_REASON_PRIVATE_DESTINATION, NO_ANSWER,
		    FROM_POD(UDP, "ff0e::1", 40713, 5000)),
	ANSWER_CASE("a SYN to multicast ff02::2: no answer", 0, RW_REASON_PRIVATE_DESTINATION,
		    NO_ANSWER, FROM_POD(TCP, "ff02::2", 40714, 443), .tcp_flags = SYN),
	ANSWER_CASE("to ::: no answer", 0, RW_REASON_PRIVATE_DESTINATION, NO_ANSWER,
		    FROM_POD(UDP, "::", 40715, 443)),
	ANSWER_CASE("a SYN to ::1: no answer", 0, RW_REASON_PRIVATE_DESTINATION, NO_ANSWER,
		    FROM_POD(TCP, "::1", 40716, 443), .tcp_flags = SYN),
	/* No answer before the source is proven. */
	ANSWER_CASE("an IPv6 source the veth does not hold: no answer", 0, RW_REASON_SPOOFED_SOURCE,
		    NO_ANSWER, .ipv6 = 1, FLOW("2600:1f14:abc:1::77", PUB6, TCP, 40717, 443),
		    .tcp_flags = SYN),
	ANSWER_CASE("a veth bound to an IPv4 address only: no answer", 1, RW_REASON_UNKNOWN_SOURCE,
		    NO_ANSWER, FROM_POD(TCP, PUB6, 40718, 443), .tcp_flags = SYN),
	ANSWER_CASE("an unbound veth: no answer", 2, RW_REASON_UNKNOWN_SOURCE, NO_ANSWER,
		    FROM_POD(UDP, PUB6, 40721, 443)),
	ANSWER_CASE("a fragment: no answer", 0, RW_REASON_FRAGMENT, NO_ANSWER,
		    FROM_POD(UDP, PUB6, 40719, 53), .n_ext = 1, .ext = {44}, .frag6 = 1),
	ANSWER_CASE("a truncated TCP header: no answer", 0, RW_REASON_MALFORMED, NO_ANSWER,
		    FROM_POD(TCP, PUB6, 40720, 443), .tcp_flags = SYN, .tot_len_delta = -10,
		    .truncate = 10),
};

void test_answers6(void)
{
	struct rw_endpoint ep = {.flags = RW_EP_IP4 | RW_EP_IP6};

	inet_pton(AF_INET, POD_A, &ep.pod_ip);
	inet_pton(AF_INET6, POD_A6, ep.pod_ip6);
	if (rw_endpoint_bind_addrs(&dp, ifindex_of[0], &ep))
		FATAL("binding %s to %s and %s: %s", devs[0], POD_A, POD_A6, strerror(errno));
	apply_policy6(1100, "", "", "run-7f3a dual-stack");
	for (size_t i = 0; i < sizeof(answer6_cases) / sizeof(answer6_cases[0]); i++)
		run_answer_case(&answer6_cases[i]);
}

/* The answer budget is the sandbox's, whatever the family: IPv6 SYNs past the burst are plain
 * drops, counted as such. Each SYN is its own test run.
 */
void test_answer6_budget(void)
{
	struct pkt_spec syn = {FROM_POD(TCP, PUB6, 40800, 443), .tcp_flags = SYN};
	const int n = 30, burst = 4;
	struct rw_counters n0, n1;
	struct rw_budget full = {};
	struct syn_flood f;
	int ok;

	/* A full bucket: the veth's buckets start again from none (the IPv4 test before emptied
	 * its answer bucket).
	 */
	rw_budget_set(&dp, ifindex_of[0], &full);
	set_answer_budget(1, burst);
	rw_counters_read(&dp, 0, &n0);
	syn_flood(&syn, n, &f);
	rw_counters_read(&dp, 0, &n1);
	set_answer_budget(0, 0);
	drain_events();

	t_count++;
	ok = syn_flood_within(&f, n, burst);
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST], f.redirected,
		       "rst answers");
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_BUDGET] - n0.answers[RW_ANSWER_BUDGET], f.dropped,
		       "over-budget refusals");
	printf("%s %d - answer6 budget 1/s burst %d: %d refused IPv6 SYNs give %d resets and %d "
	       "plain drops in %.1f ms\n",
	       ok ? "ok" : "not ok", t_count, burst, n, f.redirected, f.dropped, f.ns / 1e6);
}

/* ---- the pod's own stack takes the answers: real sockets ---- */

static int ns_fd(void)
{
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		FATAL("/proc/self/ns/net: %s", strerror(errno));
	return fd;
}

/* What one socket call met: its errno (0 when it succeeded), and when, in ms. */
struct sock_result {
	int err;
	double ms;
};

static int wait_ms(void)
{
	return 2000 * wait_scale();
}

/* A TCP connect() to [dst]:port, non-blocking, waited for within the deadline: ETIMEDOUT
 * when nothing came.
 */
static struct sock_result tcp6_connect(const char *dst, __u16 port)
{
	struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	struct sock_result r = {ETIMEDOUT, 0};
	socklen_t el = sizeof(r.err);
	__u64 t0 = mono_ns();

	inet_pton(AF_INET6, dst, &to.sin6_addr);
	if (fd < 0)
		FATAL("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) && errno != EINPROGRESS)
		r.err = errno;
	else if (poll(&p, 1, wait_ms()) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &r.err, &el))
		r.err = errno;
	r.ms = (mono_ns() - t0) / 1e6;
	close(fd);
	return r;
}

/* A connected UDP socket to [dst]:port sends a datagram (behind a destination options header
 * when dstopts), then waits for its next call to fail: the error an ICMPv6 answer leaves on it.
 */
static struct sock_result udp6_send(const char *dst, __u16 port, int dstopts)
{
	struct sockaddr_in6 to = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	/* An 8-byte destination options header: next header (the kernel's), length 0, PadN. */
	__u8 opts[8] = {0, 0, 1, 4, 0, 0, 0, 0}, buf[64] = "runwall";
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct sock_result r = {ETIMEDOUT, 0};
	__u64 t0;

	inet_pton(AF_INET6, dst, &to.sin6_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)))
		FATAL("udp socket to [%s]:%u: %s", dst, port, strerror(errno));
	if (dstopts && setsockopt(fd, IPPROTO_IPV6, IPV6_DSTOPTS, opts, sizeof(opts)))
		FATAL("IPV6_DSTOPTS: %s", strerror(errno));
	t0 = mono_ns();
	if (send(fd, buf, 7, 0) < 0)
		r.err = errno;
	else if (poll(&p, 1, wait_ms()) == 1 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
		r.err = errno;
	r.ms = (mono_ns() - t0) / 1e6;
	close(fd);
	return r;
}

/* The pod: veth 0's peer moved into a network namespace of its own with POD_A6 and a default
 * route through the node's link-local address (fe80::1, a static neighbour: no NDP is needed),
 * rw_egress on the host veth's TC ingress. A refused connect() fails with ECONNREFUSED and a
 * refused datagram's socket with EACCES (icmpv6_err_convert(): 1/1), each long before any
 * timeout, so the pod's own stack took each answer: its checksum, its addresses, and for the
 * datagram behind a destination options header the quote that icmpv6_notify() walks through
 * to find the socket. The times are reported, not asserted.
 */
void test_answers6_sockets(void)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex_of[0],
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, ours, .handle = 7, .priority = 7);
	struct rw_counters n0, n1;
	struct sock_result tcp, udp, udp_opts;
	char cmd[512], peer[IFNAMSIZ + 2], mac[18];
	struct ifreq ifr = {0};
	int host_ns = ns_fd(), pod_ns, s, ok;
	__u8 *m;

	snprintf(peer, sizeof(peer), "%sp", devs[0]);
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", devs[0]);
	if (s < 0 || ioctl(s, SIOCGIFHWADDR, &ifr))
		FATAL("the MAC of %s: %s", devs[0], strerror(errno));
	close(s);
	m = (__u8 *)ifr.ifr_hwaddr.sa_data;
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
		 m[5]);
	egress_attach_tc(&hook, &ours, 0);

	if (unshare(CLONE_NEWNET))
		FATAL("unshare(CLONE_NEWNET): %s", strerror(errno));
	pod_ns = ns_fd();
	if (setns(host_ns, CLONE_NEWNET))
		FATAL("setns: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "ip link set %s up && ip link set %s netns /proc/%d/fd/%d",
		 devs[0], peer, getpid(), pod_ns);
	sh(cmd);
	if (setns(pod_ns, CLONE_NEWNET))
		FATAL("setns: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd),
		 "ip link set lo up && ip link set %s up && "
		 "ip -6 addr add %s/128 dev %s nodad && "
		 "ip -6 neigh add fe80::1 lladdr %s dev %s nud permanent && "
		 "ip -6 route add default via fe80::1 dev %s",
		 peer, POD_A6, peer, mac, peer, peer);
	sh(cmd);

	rw_counters_read(&dp, 0, &n0);
	tcp = tcp6_connect(PUB6, 443);
	udp = udp6_send(PUB6, 443, 0);
	udp_opts = udp6_send(PUB6, 443, 1);
	rw_counters_read(&dp, 0, &n1);

	snprintf(cmd, sizeof(cmd), "ip link set %s down && ip link set %s netns /proc/%d/fd/%d",
		 peer, peer, getpid(), host_ns);
	sh(cmd);
	if (setns(host_ns, CLONE_NEWNET))
		FATAL("setns: %s", strerror(errno));
	close(pod_ns);
	close(host_ns);
	egress_detach_tc(&hook, &ours);
	snprintf(cmd, sizeof(cmd), "ip link set %s down", devs[0]);
	sh(cmd);
	drain_events();

	t_count++;
	ok = CHECK(tcp.err == ECONNREFUSED, "connect()", "%s after %.1f ms, expected ECONNREFUSED",
		   strerror(tcp.err), tcp.ms);
	ok &= CHECK(udp.err == EACCES, "UDP", "%s after %.1f ms, expected EACCES",
		    strerror(udp.err), udp.ms);
	ok &= CHECK(udp_opts.err == EACCES, "UDP behind destination options",
		    "%s after %.1f ms, expected EACCES", strerror(udp_opts.err), udp_opts.ms);
	ok &= CHECK(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST] >= 1 &&
			    n1.answers[RW_ANSWER_ICMP] - n0.answers[RW_ANSWER_ICMP] >= 2,
		    "answers", "rst +%llu, icmp +%llu",
		    (unsigned long long)(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST]),
		    (unsigned long long)(n1.answers[RW_ANSWER_ICMP] - n0.answers[RW_ANSWER_ICMP]));
	printf("%s %d - answer6, real sockets in the pod: connect() to [%s]:443 ECONNREFUSED in "
	       "%.1f ms; UDP EACCES in %.1f ms, behind destination options in %.1f ms\n",
	       ok ? "ok" : "not ok", t_count, PUB6, tcp.ms, udp.ms, udp_opts.ms);
}

/* "refusal": "drop" for run-7f3a, then node-wide with run-7f3a's "answer": IPv6 refusals follow
 * the same modes as IPv4's, the revoke's included (test_revoke6_drop_mode()).
 */
void test_refusal_modes6(void)
{
	struct acase syn = ANSWER_CASE("", 0, RW_REASON_NOT_ALLOWLISTED, NO_ANSWER,
				       FROM_POD(TCP, PUB6, 40850, 443), .tcp_flags = SYN);
	struct acase udp = ANSWER_CASE("", 0, RW_REASON_NOT_ALLOWLISTED, ICMP_ANSWER(40 + 8 + 4),
				       FROM_POD(UDP, PUB6, 40851, 443), .payload = 4);

	apply_policy6(1101, "", ", \"refusal\": \"drop\"", "run-7f3a drops");
	syn.name = "run's \"drop\": a refused IPv6 SYN is a plain drop";
	run_answer_case(&syn);
	udp.name = "run's \"drop\": refused IPv6 UDP is a plain drop";
	udp.answer = RW_ANSWER_NONE;
	udp.quote = 0;
	run_answer_case(&udp);
	test_revoke6_drop_mode();

	apply_policy6(1102, "\"refusal\": \"drop\", ", ", \"refusal\": \"answer\"",
		      "node-wide drop, run-7f3a answers");
	syn.name = "node-wide \"drop\", run's \"answer\": a refused IPv6 SYN is answered";
	syn.pkt.sport = 40852;
	syn.answer = RW_ANSWER_RST;
	syn.ack = SEQ0 + 1;
	syn.flags = RST | ACK;
	run_answer_case(&syn);
	udp.name = "node-wide \"drop\", run's \"answer\": refused IPv6 UDP is answered";
	udp.pkt.sport = 40853;
	udp.answer = RW_ANSWER_ICMP;
	udp.quote = 40 + 8 + 4;
	run_answer_case(&udp);
}
