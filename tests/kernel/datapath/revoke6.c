// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* revoke6.c (test_datapath): the revoke for IPv6: a refused segment of a flow in the veth's
 * rw_conntrack6 table resets both ends, each reset checked byte by byte with its sequence number
 * and its checksum summed here; and the apply's probe of idle flows reaches the IPv6 table.
 */
#include <sys/ioctl.h>

#include "dp_suite.h"
#include "revoke_probe.h"

#ifndef POD_A6
#define POD_A6 "2600:1f14:abc:1::3"
#endif

#define PROBE_DEV   3 /* rwt3: bound to POD_X, no run's; rebound dual-stack here and back */
#define PROBE_POD6  "2600:1f14:abc:1::99"
#define PROBE_PEER  "2606:4700::6666"
#define PROBE_PEER4 "93.184.216.34"

/* The sum of the IPv6 pseudo-header (RFC 8200 8.1) of the packet whose IPv6 header is at ip6. */
static __u32 pseudo6_sum(const __u8 *ip6, __u32 len, __u8 nexthdr)
{
	__u8 tail[8] = {0};

	put32be(tail, len);
	tail[7] = nexthdr;
	return pkt_csum_sum(tail, 8, pkt_csum_sum(ip6 + 8, 32, 0));
}

/* The TCP or ICMPv6 checksum of an IPv6 frame f with no extension headers, summed over what is
 * in it: 1 when it is right.
 */
int answer6_sums_ok(const __u8 *f, size_t len)
{
	size_t l4_len = len - 14 - 40;

	if (len < 14 + 40 + 8 || f[12] != 0x86 || f[13] != 0xdd ||
	    (size_t)((f[18] << 8) | f[19]) != l4_len)
		return 0;
	return pkt_csum_sum(f + 54, l4_len, pseudo6_sum(f + 14, l4_len, f[20])) == 0xffff;
}

/* A bare TCP segment <SEQ=seq><ACK=ack><CTL=flags>, window `win`, from saddr:sport to
 * daddr:dport over IPv6 with hop limit 64, byte by byte. Returns its length.
 */
size_t want_tcp6(const __u8 *dmac, const __u8 *smac, const char *saddr, const char *daddr,
		 __u16 sport, __u16 dport, __u32 seq, __u32 ack, __u8 flags, __u16 win, __u8 *w)
{
	struct in6_addr src, dst;

	inet_pton(AF_INET6, saddr, &src);
	inet_pton(AF_INET6, daddr, &dst);
	memset(w, 0, PKT_MAX);
	memcpy(w, dmac, 6);
	memcpy(w + 6, smac, 6);
	put16be(w + 12, 0x86dd);
	w[14] = 0x60;
	put16be(w + 18, 20);
	w[20] = IPPROTO_TCP;
	w[21] = 64;
	memcpy(w + 22, &src, 16);
	memcpy(w + 38, &dst, 16);
	put_tcp(w + 54, sport, dport, seq, ack, flags, win);
	put16be(w + 70, ~pkt_csum_sum(w + 54, 20, pseudo6_sum(w + 14, 20, IPPROTO_TCP)) & 0xffff);
	return 74;
}

/* ---- the probe: an idle IPv6 flow of a stale verdict is made to speak ---- */

/* The next TCP frame, IPv4 or IPv6, that the pod's side of the veth receives within a generous
 * deadline; 0 when none came.
 */
static size_t peer_tap_next(int fd, __u8 *f, int wait_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	while (poll(&p, 1, wait_ms) == 1) {
		n = recv(fd, f, PKT_MAX, 0);
		if (n >= 74 && f[12] == 0x86 && f[13] == 0xdd && f[20] == IPPROTO_TCP)
			return n;
		if (n >= 54 && f[12] == 0x08 && f[13] == 0 && f[23] == IPPROTO_TCP)
			return n;
	}
	return 0;
}

/* An IPv6 flow and an IPv4 flow of the dual-stack sandbox, both noted under an earlier verdict
 * (stamp 0, stale once the run's revision has moved): rw_revoke_probe() sends each two bare ACKs
 * from the remote, sequence numbers 2^31 apart, to the pod's MAC, which only the IPv6
 * neighbour entry names.
 */
void test_revoke_probe6(void)
{
	struct rw_endpoint ep = {.flags = RW_EP_IP4 | RW_EP_IP6};
	struct rw_ct6_key k6 = {.ifindex = ifindex_of[PROBE_DEV],
				.pod_port = htons(40600),
				.peer_port = htons(443),
				.proto = IPPROTO_TCP};
	struct rw_ct_key k4 = {.ifindex = ifindex_of[PROBE_DEV],
			       .pod_port = htons(40601),
			       .peer_port = htons(443),
			       .proto = IPPROTO_TCP};
	struct rw_ct_value v = {.opened_by = RW_DIR_EGRESS, .run_idx = run_idx_of("run-7f3a")};
	__u8 veth_mac[6], got[PKT_MAX], want[4][PKT_MAX];
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	struct rw_probe_stats st;
	size_t want_len[4], got_len;
	char cmd[256], peer[IFNAMSIZ + 2];
	struct ifreq ifr = {0};
	int fd, tap, err, ok, seen = 0;

	inet_pton(AF_INET, POD_X, &ep.pod_ip);
	inet_pton(AF_INET6, PROBE_POD6, ep.pod_ip6);
	if (rw_endpoint_bind_addrs(&dp, ifindex_of[PROBE_DEV], &ep))
		FATAL("binding %s dual-stack: %s", devs[PROBE_DEV], strerror(errno));
	memcpy(k6.pod_ip, ep.pod_ip6, 16);
	inet_pton(AF_INET6, PROBE_PEER, k6.peer_ip);
	k4.pod_ip = ep.pod_ip;
	inet_pton(AF_INET, PROBE_PEER4, &k4.peer_ip);
	v.created_ns = 0x5a5a0000u;
	v.seen_ns = mono_ns();
	fd = rw_conntrack6_table_fd(&dp, ifindex_of[PROBE_DEV]);
	if (fd < 0 || bpf_map_update_elem(fd, &k6, &v, BPF_ANY))
		FATAL("noting a flow in %s's IPv6 table: %s", devs[PROBE_DEV], strerror(errno));
	close(fd);
	v.created_ns = 0x4b4b0000u;
	fd = rw_conntrack_table_fd(&dp, ifindex_of[PROBE_DEV]);
	if (fd < 0 || bpf_map_update_elem(fd, &k4, &v, BPF_ANY))
		FATAL("noting a flow in %s's table: %s", devs[PROBE_DEV], strerror(errno));
	close(fd);

	/* The host veth up with IPv6 (its neighbour table), its peer up and silent: the tap on
	 * the peer sees what the probe writes into the veth.
	 */
	snprintf(peer, sizeof(peer), "%sp", devs[PROBE_DEV]);
	snprintf(cmd, sizeof(cmd),
		 "sysctl -qw net.ipv6.conf.%s.disable_ipv6=1 && ip link set %s up && "
		 "ip link set %s up && ip -6 neigh replace %s lladdr 02:00:00:00:00:01 dev %s "
		 "nud permanent",
		 peer, peer, devs[PROBE_DEV], PROBE_POD6, devs[PROBE_DEV]);
	sh(cmd);
	tap = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	sll.sll_ifindex = if_nametoindex(peer);
	if (tap < 0 || bind(tap, (struct sockaddr *)&sll, sizeof(sll)))
		FATAL("packet socket on %s: %s", peer, strerror(errno));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", devs[PROBE_DEV]);
	if (ioctl(tap, SIOCGIFHWADDR, &ifr))
		FATAL("the MAC of %s: %s", devs[PROBE_DEV], strerror(errno));
	memcpy(veth_mac, ifr.ifr_hwaddr.sa_data, 6);

	err = rw_revoke_probe(&dp, NULL, &st);

	t_count++;
	ok = CHECK_EQ(err, 0, "rw_revoke_probe");
	/* The IPv6 flow's two ACKs, then the IPv4 flow's, of the same pod: its MAC from the IPv6
	 * neighbour entry.
	 */
	for (int half = 0; half < 2; half++) {
		want_len[half] = want_tcp6(pod_mac, veth_mac, PROBE_PEER, PROBE_POD6, 443, 40600,
					   0x5a5a0000u + half * 0x80000000u, 0x9a5a0000u, ACK,
					   0xffff, want[half]);
		want_len[2 + half] = want_tcp4(pod_mac, veth_mac, PROBE_PEER4, POD_X, 443, 40601,
					       0x4b4b0000u + half * 0x80000000u, 0x8b4b0000u, ACK,
					       0xffff, want[2 + half]);
	}
	while (seen != 0xf && (got_len = peer_tap_next(tap, got, 2000 * wait_scale())))
		for (int i = 0; i < 4; i++)
			if (got_len == want_len[i] && !memcmp(got, want[i], got_len))
				seen |= 1 << i;
	ok &= CHECK((seen & 3) == 3, "the IPv6 flow's two ACKs", "seen %#x of 0x3", seen & 3);
	ok &= CHECK((seen >> 2) == 3, "the IPv4 flow's two ACKs", "seen %#x of 0x3", seen >> 2);
	ok &= CHECK(st.probed >= 2, "probed", "%u connections probed", st.probed);
	printf("%s %d - revoke probe: a stale IPv6 flow and a stale IPv4 flow of a dual-stack pod "
	       "get two ACKs each (%u probed, %u without a MAC)\n",
	       ok ? "ok" : "not ok", t_count, st.probed, st.no_mac);

	close(tap);
	snprintf(cmd, sizeof(cmd), "ip link set %s down && ip link set %s down", devs[PROBE_DEV],
		 peer);
	sh(cmd);
	bind_veth(PROBE_DEV, POD_X);
}

/* ---- a refused segment of a known IPv6 flow resets both ends ---- */

#define RV6_REMOTE "2606:4700::1111" /* not allowlisted for run-7f3a */

static const struct rcase revoke6_cases[] = {
	REVOKE_CASE(
		"the pod's segment of a known flow: pod RST seq SEG.ACK, remote RST seq SEG.SEQ", E,
		TRACKED, 7, RESETS(0xa1b2c3d4, SEQ0), SEG_OUT(POD_A6, RV6_REMOTE, 40900), .ipv6 = 1,
		.tcp_flags = ACK | 0x08, .tcp_ack = 0xa1b2c3d4, .payload = 100),
	REVOKE_CASE(
		"the remote's segment of a known flow: pod RST seq SEG.SEQ, remote RST seq SEG.ACK",
		I, TRACKED, -1, RESETS(SEQ0, 0x0badf00d), SEG_IN(RV6_REMOTE, POD_A6, 40901),
		.ipv6 = 1, .tcp_flags = ACK, .tcp_ack = 0x0badf00d, .payload = 50),
	REVOKE_CASE("the pod's segment behind destination options: both resets without them", E,
		    TRACKED, 7, RESETS(0x11223344, SEQ0), SEG_OUT(POD_A6, RV6_REMOTE, 40902),
		    .ipv6 = 1, .tcp_flags = ACK, .tcp_ack = 0x11223344, .n_ext = 1, .ext = {60},
		    .ext_len = {3}, .payload = 20),
	REVOKE_CASE("the remote's bare ACK with options behind hop-by-hop: both reset", I, TRACKED,
		    -1, RESETS(SEQ0, 0x77777777), SEG_IN(RV6_REMOTE, POD_A6, 40903), .ipv6 = 1,
		    .tcp_flags = ACK, .tcp_doff = 8, .tcp_ack = 0x77777777, .n_ext = 1, .ext = {0}),
	REVOKE_CASE("a remote's segment of a flow not in the table: dropped, no reset either way",
		    I, UNTRACKED, 2, NO_RESETS, SEG_IN(RV6_REMOTE, POD_A6, 40904), .ipv6 = 1,
		    .tcp_flags = ACK, .tcp_ack = 0x12345678),
	REVOKE_CASE("a known flow's refused reset from the remote: never answered", I, TRACKED, 2,
		    NO_RESETS, SEG_IN(RV6_REMOTE, POD_A6, 40905), .ipv6 = 1, .tcp_flags = RST | ACK,
		    .tcp_ack = 0x12345678),
};

/* After test_answers6(): rwt0 bound dual-stack, run-7f3a holding POD_A6. */
void test_revoke6(void)
{
	int tap = revoke_tap_open(0);

	for (size_t i = 0; i < sizeof(revoke6_cases) / sizeof(revoke6_cases[0]); i++)
		run_revoke_case(&revoke6_cases[i], tap);
	revoke_tap_close(tap, 0);
}

/* Under run-7f3a's "refusal": "drop" (test_refusal_modes6()): a known IPv6 flow's refused
 * segments are dropped in silence, both ways.
 */
void test_revoke6_drop_mode(void)
{
	revoke_drop_mode(revoke6_cases, 40920, " IPv6");
}
