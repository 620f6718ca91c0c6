// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* revoke.c (test_datapath): revoke: a refused segment of a known flow resets both ends.
 */
#include "dp_suite.h"

/* ---- revoke: a refused segment of a known flow resets both ends ---- */

int wait_scale(void)
{
	const char *s = getenv("RW_WAIT_SCALE");
	int n = s ? atoi(s) : 1;

	return n > 0 ? n : 1;
}

/* A packet socket on the host veth: it sees what enters the veth's ingress, the remote's reset
 * a revoke injects there, before any tc hook.
 */
int revoke_tap_open(int dev)
{
	struct sockaddr_ll sll = {.sll_family = AF_PACKET,
				  .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = ifindex_of[dev]};
	char cmd[256];
	int fd;

	/* No IPv6: the veth must stay silent for the tap to see only what the test makes. */
	snprintf(cmd, sizeof(cmd),
		 "sysctl -qw net.ipv6.conf.%s.disable_ipv6=1 && ip link set %s up", devs[dev],
		 devs[dev]);
	if (system(cmd))
		FATAL("%s failed", cmd);
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		FATAL("packet socket on %s: %s", devs[dev], strerror(errno));
	return fd;
}

void revoke_tap_close(int fd, int dev)
{
	char cmd[128];

	close(fd);
	snprintf(cmd, sizeof(cmd), "ip link set %s down", devs[dev]);
	if (system(cmd))
		FATAL("%s failed", cmd);
}

/* The next TCP frame of the family (IPv6 when ipv6) entering the veth within the deadline;
 * 0 when none came.
 */
static size_t revoke_tap_next(int fd, __u8 *f, int wait_ms, int ipv6)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct sockaddr_ll from;
	socklen_t fl = sizeof(from);
	ssize_t n;

	while (poll(&p, 1, wait_ms) == 1) {
		n = recvfrom(fd, f, PKT_MAX, 0, (struct sockaddr *)&from, &fl);
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (ipv6 && n >= 74 && f[12] == 0x86 && f[13] == 0xdd && f[20] == IPPROTO_TCP)
			return n;
		if (!ipv6 && n >= 54 && f[12] == 0x08 && f[13] == 0 && f[23] == IPPROTO_TCP)
			return n;
	}
	return 0;
}

/* Notes the TCP flow as the pod's own, opened under an earlier verdict (stamp 0: judged again),
 * in the veth's table of the addresses' family.
 */
static void revoke_ct_note(int dev, const char *pod, __u16 pod_port, const char *peer,
			   __u16 peer_port, const char *run)
{
	struct rw_ct_key k = {.ifindex = ifindex_of[dev],
			      .pod_port = htons(pod_port),
			      .peer_port = htons(peer_port),
			      .proto = IPPROTO_TCP};
	struct rw_ct6_key k6 = {.ifindex = ifindex_of[dev],
				.pod_port = htons(pod_port),
				.peer_port = htons(peer_port),
				.proto = IPPROTO_TCP};
	struct rw_ct_value v = {.opened_by = RW_DIR_EGRESS, .run_idx = run_idx_of(run)};
	int ipv6 = strchr(pod, ':') != NULL, fd;

	if (ipv6) {
		inet_pton(AF_INET6, pod, k6.pod_ip);
		inet_pton(AF_INET6, peer, k6.peer_ip);
		fd = rw_conntrack6_table_fd(&dp, ifindex_of[dev]);
	} else {
		inet_pton(AF_INET, pod, &k.pod_ip);
		inet_pton(AF_INET, peer, &k.peer_ip);
		fd = rw_conntrack_table_fd(&dp, ifindex_of[dev]);
	}
	v.created_ns = mono_ns();
	v.seen_ns = v.created_ns;
	if (fd < 0 || bpf_map_update_elem(fd, ipv6 ? (void *)&k6 : (void *)&k, &v, BPF_ANY))
		FATAL("noting a flow in %s's %s table: %s", devs[dev], ipv6 ? "IPv6" : "IPv4",
		      strerror(errno));
	close(fd);
}

/* A bare reset <SEQ=seq><CTL=RST> of the family, byte by byte. */
static size_t want_reset(int ipv6, const __u8 *dmac, const __u8 *smac, const char *saddr,
			 const char *daddr, __u16 sport, __u16 dport, __u32 seq, __u8 *w)
{
	if (ipv6)
		return want_tcp6(dmac, smac, saddr, daddr, sport, dport, seq, 0, RST, 0, w);
	return want_tcp4(dmac, smac, saddr, daddr, sport, dport, seq, 0, RST, 0, w);
}

/* One case, IPv4 or IPv6 as its packet is: the program's verdict and output, the counters and
 * event, and the remote's reset the tap sees entering the veth.
 */
void run_revoke_case(const struct rcase *c, int tap)
{
	__u8 in[PKT_MAX], out[PKT_MAX], want_pod[PKT_MAX], want_remote[PKT_MAX], got[PKT_MAX];
	size_t len = pkt_build(&c->pkt, in), pod_len = len, remote_len = 0, got_len;
	const char *pod = c->dir == E ? c->pkt.src : c->pkt.dst;
	const char *remote = c->dir == E ? c->pkt.dst : c->pkt.src;
	__u16 pod_port = c->dir == E ? c->pkt.sport : c->pkt.dport;
	__u16 remote_port = c->dir == E ? c->pkt.dport : c->pkt.sport;
	/* pkt_build() frames run from pod_mac to gw_mac whichever way: a reset back toward a
	 * frame's sender swaps them.
	 */
	const __u8 *pod_dmac = c->dir == E ? pod_mac : gw_mac;
	const __u8 *pod_smac = c->dir == E ? gw_mac : pod_mac;
	int (*sums_ok)(const __u8 *, size_t) = c->pkt.ipv6 ? answer6_sums_ok : answer_sums_ok;
	struct rw_counters n0, n1;
	int retval, err, failed_before = t_failed;
	__u32 out_len = 0;

	if (c->tracked)
		revoke_ct_note(0, pod, pod_port, remote, remote_port, "run-7f3a");
	if (c->resets) {
		pod_len = want_reset(c->pkt.ipv6, pod_dmac, pod_smac, remote, pod, remote_port,
				     pod_port, c->pod_seq, want_pod);
		remote_len = want_reset(c->pkt.ipv6, pod_smac, pod_dmac, pod, remote, pod_port,
					remote_port, c->remote_seq, want_remote);
	} else {
		memcpy(want_pod, in, len);
	}
	t_count++;
	drain_events();
	rw_counters_read(&dp, 0, &n0);
	err = test_run_out(c->dir, ifindex_of[0], in, len, out, &out_len, &retval);
	rw_counters_read(&dp, 0, &n1);
	ring_buffer__consume(ring);
	got_len = revoke_tap_next(tap, got, (c->resets ? 2000 : 200) * wait_scale(), c->pkt.ipv6);
	CHECK_EQ(err, 0, "test_run");
	CHECK(retval == c->ret, "verdict", "returned %d (%s), expected %d", retval,
	      ret_name(retval), c->ret);
	CHECK_EQ(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST], c->resets ? 1 : 0,
		 "rst answers");
	CHECK(n_events == 1 && events[0].answer == (c->resets ? RW_ANSWER_RST : RW_ANSWER_NONE),
	      "event", "%d events, answer %s", n_events,
	      n_events ? rw_answer_name(events[0].answer) : "-");
	CHECK(out_len == pod_len && !memcmp(out, want_pod, pod_len), "the packet (pod's reset)",
	      "%u bytes, expected %zu", out_len, pod_len);
	CHECK(got_len == remote_len && (!remote_len || !memcmp(got, want_remote, remote_len)),
	      "the remote's reset", "%zu bytes entered the veth, expected %zu", got_len,
	      remote_len);
	if (c->resets) {
		CHECK(sums_ok(out, out_len), "pod reset checksums", "a sum is wrong");
		CHECK(got_len && sums_ok(got, got_len), "remote reset checksums", "a sum is wrong");
	}
	if (t_failed != failed_before) {
		dump_hex("out", out, out_len);
		dump_hex("tap", got, got_len);
	}
	printf("%s %d - revoke%s: %s\n", t_failed == failed_before ? "ok" : "not ok", t_count,
	       c->pkt.ipv6 ? "6" : "", c->name);
}

#define RV_REMOTE "93.184.216.34" /* not allowlisted for run-7f3a under policy_v1 */

static const struct rcase revoke_cases[] = {
	REVOKE_CASE(
		"the pod's segment of a known flow: pod RST seq SEG.ACK, remote RST seq SEG.SEQ", E,
		TRACKED, 7, RESETS(0xa1b2c3d4, SEQ0), SEG_OUT(POD_A, RV_REMOTE, 40300),
		.tcp_flags = ACK | 0x08, .tcp_ack = 0xa1b2c3d4, .payload = 100),
	REVOKE_CASE(
		"the remote's segment of a known flow: pod RST seq SEG.SEQ, remote RST seq SEG.ACK",
		I, TRACKED, -1, RESETS(SEQ0, 0x0badf00d), SEG_IN(RV_REMOTE, POD_A, 40301),
		.tcp_flags = ACK, .tcp_ack = 0x0badf00d, .payload = 50),
	REVOKE_CASE("the remote's bare ACK with options of a known flow: both reset", I, TRACKED,
		    -1, RESETS(SEQ0, 0x77777777), SEG_IN(RV_REMOTE, POD_A, 40302), .tcp_flags = ACK,
		    .tcp_doff = 8, .tcp_ack = 0x77777777),
	REVOKE_CASE("a remote's segment of a flow not in the table: dropped, no reset either way",
		    I, UNTRACKED, 2, NO_RESETS, SEG_IN(RV_REMOTE, POD_A, 40303), .tcp_flags = ACK,
		    .tcp_ack = 0x12345678),
	REVOKE_CASE("a known flow's refused reset from the remote: never answered", I, TRACKED, 2,
		    NO_RESETS, SEG_IN(RV_REMOTE, POD_A, 40304), .tcp_flags = RST | ACK,
		    .tcp_ack = 0x12345678),
};

/* The mark of a revoke's own reset lets a packet past rw_egress only (where a pod cannot set
 * it), cleared; on rw_ingress, where the node may have marked it, it means nothing.
 */
static void test_revoke_mark(void)
{
	struct pkt_spec eg = {SEG_OUT(POD_A, RV_REMOTE, 40310), .tcp_flags = SYN};
	struct pkt_spec in = {SEG_IN(RV_REMOTE, POD_A, 40311), .tcp_flags = SYN};
	struct __sk_buff ctx = {.ifindex = ifindex_of[0], .mark = RW_MARK_REVOKE}, ctx_out = {};
	__u8 buf[PKT_MAX], out[PKT_MAX];
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = buf, .data_out = out,
		    .data_size_out = PKT_MAX, .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
		    .ctx_out = &ctx_out, .ctx_size_out = sizeof(ctx_out), .repeat = 1);
	struct rw_counters n0, n1;
	int ok;

	t_count++;
	drain_events();
	opts.data_size_in = pkt_build(&eg, buf);
	rw_counters_read(&dp, 0, &n0);
	ok = CHECK_EQ(bpf_prog_test_run_opts(dp.prog_fd[E], &opts), 0, "test_run egress");
	rw_counters_read(&dp, 0, &n1);
	ok &= CHECK((int)opts.retval == -1, "marked egress passes", "returned %d",
		    (int)opts.retval);
	ok &= CHECK_EQ(ctx_out.mark, 0, "mark cleared");
	ok &= CHECK_EQ(n1.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			       n0.packets[E][RW_REASON_NOT_ALLOWLISTED],
		       0, "not judged");

	opts.data_size_in = pkt_build(&in, buf);
	opts.data_size_out = PKT_MAX;
	ok &= CHECK_EQ(bpf_prog_test_run_opts(dp.prog_fd[I], &opts), 0, "test_run ingress");
	ok &= CHECK((int)opts.retval == 2, "marked ingress judged", "returned %d",
		    (int)opts.retval);
	ring_buffer__consume(ring);
	ok &= CHECK_EQ(n_events, 1, "the ingress refusal reported");
	printf("%s %d - revoke: its mark passes rw_egress only (cleared), rw_ingress judges it\n",
	       ok ? "ok" : "not ok", t_count);
}

void test_revoke(void)
{
	int tap = revoke_tap_open(0);

	for (size_t i = 0; i < sizeof(revoke_cases) / sizeof(revoke_cases[0]); i++)
		run_revoke_case(&revoke_cases[i], tap);
	test_revoke_mark();
	revoke_tap_close(tap, 0);
}

/* "refusal": "drop" (run-7f3a's, after test_refusal_modes): a known flow's refused segments
 * are dropped in silence, both ways. cases[0] is the pod's segment of a known flow, cases[1]
 * the remote's; port and port + 1 are theirs here.
 */
void revoke_drop_mode(const struct rcase cases[2], __u16 port, const char *family)
{
	struct rcase eg = cases[0], in = cases[1];
	char eg_name[96], in_name[96];
	int tap = revoke_tap_open(0);

	snprintf(eg_name, sizeof(eg_name),
		 "\"drop\": the pod's segment of a known%s flow is a plain drop", family);
	snprintf(in_name, sizeof(in_name),
		 "\"drop\": the remote's segment of a known%s flow is a plain drop", family);
	eg.name = eg_name;
	eg.pkt.sport = port;
	eg.ret = 2;
	eg.resets = 0;
	in.name = in_name;
	in.pkt.dport = port + 1;
	in.ret = 2;
	in.resets = 0;
	run_revoke_case(&eg, tap);
	run_revoke_case(&in, tap);
	revoke_tap_close(tap, 0);
}

void test_revoke_drop_mode(void)
{
	revoke_drop_mode(revoke_cases, 40320, "");
}

/* A run removed from the snapshot while its pod lives: the veth stays bound to the pod's
 * address, which no run names now (unknown-source). Its flows' refused segments still reset both
 * ends under the node's refusal mode, since the source is the veth's own; nothing else of it is
 * answered, nor a packet of another address, nor anything once the veth is unbound.
 */
static const char ended_policy[] = "{\"revision\": %u, %s\"runs\": [\n"
				   "  {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]}]}\n";
static const char back_policy[] = "{\"revision\": %u, \"runs\": [\n"
				  "  {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]},\n"
				  "  {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]}]}\n";

/* The last case's event says what the counters say: unknown-source, whatever the answer. */
static void ended_reason(const char *what)
{
	int ok;

	t_count++;
	ok = CHECK(n_events == 1 && events[0].reason == RW_REASON_UNKNOWN_SOURCE &&
			   !events[0].run_id[0],
		   "reason", "%d events, reason %s", n_events,
		   n_events ? rw_reason_name(events[0].reason) : "-");
	printf("%s %d - %s: reported as unknown-source, no run\n", ok ? "ok" : "not ok", t_count,
	       what);
}

void test_revoke_ended(void)
{
	struct rcase eg = revoke_cases[0], in = revoke_cases[1];
	struct rcase other_eg = revoke_cases[0], other_in = revoke_cases[1];
	struct rcase syn = revoke_cases[0];
	const char *other = "10.1.2.50"; /* in the table of POD_A's veth, but not its address */
	struct rw_ct_value v;
	char json[512];
	int tap, ok;

	/* The flows are the ended run's, noted while it lived: the apply must keep them. */
	revoke_ct_note(0, POD_A, 40330, RV_REMOTE, 443, "run-7f3a");
	revoke_ct_note(0, POD_A, 40331, RV_REMOTE, 443, "run-7f3a");
	revoke_ct_note(0, other, 40332, RV_REMOTE, 443, "run-7f3a");
	revoke_ct_note(0, other, 40333, RV_REMOTE, 443, "run-7f3a");
	snprintf(json, sizeof(json), ended_policy, 1002, "");
	apply_json(json, 0, "run-7f3a removed while its pod lives, node-wide answer");
	t_count++;
	ok = CHECK(ct_entry(0, POD_A, 40330, RV_REMOTE, 443, TCP, &v) == 0, "the ended run's flow",
		   "forgotten by the apply");
	printf("%s %d - ended run: its pod's flows stay in its veth's table\n",
	       ok ? "ok" : "not ok", t_count);

	tap = revoke_tap_open(0);
	eg.name =
		"ended run: the pod's segment of its known flow resets both ends (unknown-source)";
	eg.pkt.sport = 40330;
	in.name = "ended run: the remote's segment of its known flow resets both ends";
	in.pkt.dport = 40331;
	other_eg.name = "ended run: a known flow of an address not the veth's binding: plain drop";
	other_eg.pkt.src = other;
	other_eg.pkt.sport = 40332;
	other_eg.ret = 2;
	other_eg.resets = 0;
	other_in.name =
		"ended run: a remote's segment to an address not the veth's binding: plain drop";
	other_in.pkt.dst = other;
	other_in.pkt.dport = 40333;
	other_in.ret = 2;
	other_in.resets = 0;
	syn.name = "ended run: the pod's SYN is never answered (no run to name)";
	syn.pkt.sport = 40334;
	syn.pkt.tcp_flags = SYN;
	syn.pkt.payload = 0;
	syn.tracked = 0;
	syn.ret = 2;
	syn.resets = 0;
	eg.tracked = in.tracked = other_eg.tracked = other_in.tracked = 0; /* noted above */
	run_revoke_case(&eg, tap);
	ended_reason(eg.name);
	run_revoke_case(&in, tap);
	ended_reason(in.name);
	run_revoke_case(&other_eg, tap);
	run_revoke_case(&other_in, tap);
	run_revoke_case(&syn, tap);

	/* "refusal": "drop" node-wide: the ended run's flows are cut in silence. */
	snprintf(json, sizeof(json), ended_policy, 1003, "\"refusal\": \"drop\", ");
	apply_json(json, 0, "run-7f3a still gone, node-wide drop");
	eg.name = "ended run, node-wide \"drop\": the pod's segment of its known flow: plain drop";
	eg.pkt.sport = 40335;
	eg.tracked = 1;
	eg.ret = 2;
	eg.resets = 0;
	in.name = "ended run, node-wide \"drop\": the remote's segment: plain drop";
	in.pkt.dport = 40336;
	in.tracked = 1;
	in.ret = 2;
	in.resets = 0;
	run_revoke_case(&eg, tap);
	run_revoke_case(&in, tap);

	/* Unbound (CNI DEL): no proof of the source is left, nor a table. */
	snprintf(json, sizeof(json), ended_policy, 1004, "");
	apply_json(json, 0, "run-7f3a still gone, node-wide answer again");
	revoke_ct_note(0, POD_A, 40337, RV_REMOTE, 443, "run-7f3a");
	if (rw_endpoint_unbind(&dp, ifindex_of[0]))
		FATAL("unbinding %s: %s", devs[0], strerror(errno));
	eg.name = "unbound veth: the pod's segment of its once known flow: plain drop";
	eg.pkt.sport = 40337;
	eg.tracked = 0;
	run_revoke_case(&eg, tap);
	revoke_tap_close(tap, 0);

	/* Bound again and named by a run: what its ended run left is forgotten. */
	bind_veth(0, POD_A);
	revoke_ct_note(0, POD_A, 40338, RV_REMOTE, 443, "run-7f3a");
	snprintf(json, sizeof(json), back_policy, 1005);
	apply_json(json, 0, "run-7f3a back");
	t_count++;
	ok = CHECK(ct_entry(0, POD_A, 40338, RV_REMOTE, 443, TCP, &v) != 0,
		   "a flow from before the pod joined its run", "still in the table");
	printf("%s %d - a pod joining a run: its veth's table starts empty\n", ok ? "ok" : "not ok",
	       t_count);
}
