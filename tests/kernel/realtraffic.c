// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* realtraffic.c: the egress program attached to a veth's TC ingress hook, fed by a packet socket
 * on the peer.
 *
 * - Headers outside the linear area: BPF_PROG_TEST_RUN always builds a linear skb. A packet
 *   socket with PACKET_VNET_HDR and hdr_len 14 makes the kernel put only the Ethernet header in
 *   the linear part and the rest in page fragments (packet_snd() -> packet_alloc_skb(), for
 *   frames of a page or more), and veth forwards the skb as it is. A probe program behind ours
 *   on the hook records the linear length it saw, so the test knows the case really happened.
 * - An out-of-band VLAN tag: a program on the peer's TC egress hook calls bpf_skb_vlan_push(),
 *   which puts the tag in skb->vlan_tci (as a VLAN device on a NIC with tag offload would; this
 *   kernel has no 8021q module). veth forwards the skb with its tag, and the tag is still out of
 *   band at the TC ingress hook (sch_handle_ingress() runs before vlan_do_receive()).
 * - A frame cut inside its IPv4 header: this kernel's BPF_PROG_TEST_RUN refuses to build an skb
 *   shorter than the L3 header its ethertype announces, but such a frame can still cross a veth.
 * - The same two for IPv6: extension headers outside the linear area, a frame cut inside its
 *   IPv6 header.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "harness.h"
#include "pkt.h"
#include "realtraffic.h"
#include "reasons.h"

#define BIG_FRAME 5000 /* >= PAGE_SIZE, or packet_alloc_skb() makes it linear anyway */

/* The programs' end: return TC_ACT_UNSPEC. */
#define RETURN_UNSPEC                               \
	{BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, -1}, \
	{                                           \
		BPF_JMP | BPF_EXIT, 0, 0, 0, 0      \
	}

static int load_cls(const char *name, const struct bpf_insn *insns, size_t n)
{
	return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, name, "GPL", insns, n, NULL);
}

/* probe: linear[0] = skb->data_end - skb->data; return TC_ACT_UNSPEC. */
static int load_probe(int map_fd)
{
	struct bpf_insn insns[] = {
		{BPF_LDX | BPF_MEM | BPF_W, 2, 1, offsetof(struct __sk_buff, data), 0},
		{BPF_LDX | BPF_MEM | BPF_W, 3, 1, offsetof(struct __sk_buff, data_end), 0},
		{BPF_ALU64 | BPF_SUB | BPF_X, 3, 2, 0, 0},
		{BPF_STX | BPF_MEM | BPF_DW, 10, 3, -8, 0},
		{BPF_ST | BPF_MEM | BPF_W, 10, 0, -12, 0},
		{BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd},
		{0, 0, 0, 0, 0},
		{BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0},
		{BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -12},
		{BPF_ALU64 | BPF_MOV | BPF_X, 3, 10, 0, 0},
		{BPF_ALU64 | BPF_ADD | BPF_K, 3, 0, 0, -8},
		{BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0},
		{BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_update_elem},
		RETURN_UNSPEC,
	};

	return load_cls("rw_lin_probe", insns, sizeof(insns) / sizeof(insns[0]));
}

/* pusher: bpf_skb_vlan_push(skb, htons(ETH_P_8021Q), 10); return TC_ACT_UNSPEC. */
static int load_vlan_pusher(void)
{
	struct bpf_insn insns[] = {
		{BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 0x0081}, /* htons(0x8100) */
		{BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, 10},
		{BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_skb_vlan_push},
		RETURN_UNSPEC,
	};

	return load_cls("rw_vlan_push", insns, sizeof(insns) / sizeof(insns[0]));
}

static int packet_socket(const char *dev, int vnet)
{
	struct sockaddr_ll sll = {.sll_family = AF_PACKET};
	int fd = socket(AF_PACKET, SOCK_RAW, 0), one = 1;

	if (fd < 0)
		FATAL("AF_PACKET socket: %s", strerror(errno));
	if (vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		FATAL("PACKET_VNET_HDR: %s", strerror(errno));
	sll.sll_ifindex = if_nametoindex(dev);
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		FATAL("bind to %s: %s", dev, strerror(errno));
	return fd;
}

/* A frame of BIG_FRAME bytes: the crafted headers, lengths covering a zero payload (IPv4's
 * tot_len and a UDP length; IPv6's payload length).
 */
static size_t big_frame(const struct pkt_spec *s, __u8 *buf)
{
	memset(buf, 0, BIG_FRAME);
	if (pkt_build(s, buf) > BIG_FRAME)
		FATAL("headers longer than the frame");
	if (s->ipv6) {
		buf[18] = (BIG_FRAME - 54) >> 8;
		buf[19] = (BIG_FRAME - 54) & 0xff;
		return BIG_FRAME;
	}
	buf[16] = (BIG_FRAME - 14) >> 8;
	buf[17] = (BIG_FRAME - 14) & 0xff;
	if (s->proto == IPPROTO_UDP) {
		buf[38] = (BIG_FRAME - 34) >> 8;
		buf[39] = (BIG_FRAME - 34) & 0xff;
	}
	return BIG_FRAME;
}

static void send_vnet(int fd, const __u8 *frame, size_t len)
{
	struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_NONE, .hdr_len = 14};
	struct iovec iov[2] = {{&vh, sizeof(vh)}, {(void *)frame, len}};
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};

	if (sendmsg(fd, &msg, 0) < 0)
		FATAL("sendmsg with a vnet header: %s", strerror(errno));
}

static void wait_counter(struct rw_datapath *dp, int reason, __u64 want)
{
	struct rw_counters c;

	/* netif_rx() queues to the backlog; give the softirq a moment. */
	for (int i = 0; i < 200; i++) {
		rw_counters_read(dp, 0, &c);
		if (c.packets[RW_DIR_EGRESS][reason] >= want)
			return;
		usleep(5000);
	}
}

/* How far the egress count of `reason` moved from before to after. */
static __u64 moved(const struct rw_counters *before, const struct rw_counters *after, int reason)
{
	return after->packets[RW_DIR_EGRESS][reason] - before->packets[RW_DIR_EGRESS][reason];
}

/* Send frame on fd, the socket on peer (behind a virtio-net header when vnet), wait for the
 * egress count of `reason` to move, and read the counters before and after it.
 */
static void send_counted(struct rw_datapath *dp, int fd, const char *peer, int vnet,
			 const __u8 *frame, size_t len, int reason, struct rw_counters *before,
			 struct rw_counters *after)
{
	rw_counters_read(dp, 0, before);
	if (vnet)
		send_vnet(fd, frame, len);
	else if (send(fd, frame, len, 0) < 0)
		FATAL("send on %s: %s", peer, strerror(errno));
	wait_counter(dp, reason, before->packets[RW_DIR_EGRESS][reason] + 1);
	rw_counters_read(dp, 0, after);
}

/* The first `cut` bytes of `frame` sent on fd: a frame cut inside its L3 header, which
 * BPF_PROG_TEST_RUN cannot build, must be malformed.
 */
static void expect_cut_malformed(struct rw_datapath *dp, int fd, const char *peer,
				 const __u8 *frame, size_t cut, const char *what)
{
	struct rw_counters before, after;
	int ok;

	send_counted(dp, fd, peer, 0, frame, cut, RW_REASON_MALFORMED, &before, &after);
	t_count++;
	ok = CHECK_EQ(moved(&before, &after, RW_REASON_MALFORMED), 1, "malformed");
	printf("%s %d - real veth: %s\n", ok ? "ok" : "not ok", t_count, what);
}

/* A SYN of the pod's. */
#define POD_SYN(dst_, sport_, dport_)                                              \
	{                                                                          \
		.src = pod_ip, .dst = dst_, .proto = IPPROTO_TCP, .sport = sport_, \
		.dport = dport_, .tcp_flags = 0x02                                 \
	}

void test_real_traffic(struct rw_datapath *dp, const char *dev, int ifindex, const char *pod_ip)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, ours, .handle = 1, .priority = 1);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, probe, .handle = 2, .priority = 2);
	struct pkt_spec allowed = POD_SYN("172.20.0.11", 40100, 3443);
	struct pkt_spec denied = POD_SYN("93.184.216.34", 40101, 443);
	struct rw_counters before, after;
	static __u8 frame[BIG_FRAME + 16];
	char cmd[512], peer[IFNAMSIZ + 4];
	__u64 linear = 0;
	__u32 zero = 0;
	int map_fd, probe_fd, fd, ok, ret;
	size_t len;

	snprintf(peer, sizeof(peer), "%sp", dev);
	snprintf(cmd, sizeof(cmd), "ip link set %s mtu 9000 up && ip link set %s mtu 9000 up", dev,
		 peer);
	if (system(cmd))
		FATAL("%s failed", cmd);

	map_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "rw_lin", 4, 8, 1, NULL);
	probe_fd = map_fd < 0 ? -1 : load_probe(map_fd);
	if (probe_fd < 0)
		FATAL("loading the linear-length probe: %s", strerror(errno));
	ret = bpf_tc_hook_create(&hook);
	if (ret && ret != -EEXIST)
		FATAL("clsact on %s: %s", dev, strerror(-ret));
	ours.prog_fd = dp->prog_fd[RW_DIR_EGRESS];
	probe.prog_fd = probe_fd;
	if (bpf_tc_attach(&hook, &ours) || bpf_tc_attach(&hook, &probe))
		FATAL("attaching to %s: %s", dev, strerror(errno));

	/* Headers outside the linear area, allowed. */
	fd = packet_socket(peer, 1);
	len = big_frame(&allowed, frame);
	send_counted(dp, fd, peer, 1, frame, len, RW_REASON_ALLOWED, &before, &after);
	bpf_map_lookup_elem(map_fd, &zero, &linear);
	t_count++;
	ok = CHECK(linear > 0 && linear < 14 + 20, "non-linear",
		   "the skb had %llu linear bytes: the headers were not outside the linear area",
		   (unsigned long long)linear);
	ok &= CHECK_EQ(moved(&before, &after, RW_REASON_ALLOWED), 1, "allowed");
	printf("%s %d - real veth: a %d-byte SYN with %llu linear bytes to the identity broker "
	       "is allowed\n",
	       ok ? "ok" : "not ok", t_count, BIG_FRAME, (unsigned long long)linear);

	/* Headers outside the linear area, refused for the right reason (not as malformed). */
	len = big_frame(&denied, frame);
	send_counted(dp, fd, peer, 1, frame, len, RW_REASON_NOT_ALLOWLISTED, &before, &after);
	t_count++;
	ok = CHECK_EQ(moved(&before, &after, RW_REASON_NOT_ALLOWLISTED), 1, "not-allowlisted");
	ok &= CHECK_EQ(moved(&before, &after, RW_REASON_MALFORMED), 0, "not malformed");
	printf("%s %d - real veth: a non-linear SYN to the internet is not-allowlisted\n",
	       ok ? "ok" : "not ok", t_count);
	close(fd);

	/* A frame cut inside its IPv4 header. */
	fd = packet_socket(peer, 0);
	len = pkt_build(&allowed, frame);
	expect_cut_malformed(dp, fd, peer, frame, 14 + 10,
			     "a frame cut inside its IPv4 header is malformed");

	/* An out-of-band VLAN tag on a packet to an allowed service. */
	{
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, peer_hook, .ifindex = if_nametoindex(peer),
				    .attach_point = BPF_TC_EGRESS);
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, push, .handle = 1, .priority = 1);
		int push_fd = load_vlan_pusher();

		if (push_fd < 0)
			FATAL("loading the VLAN pusher: %s", strerror(errno));
		ret = bpf_tc_hook_create(&peer_hook);
		if (ret && ret != -EEXIST)
			FATAL("clsact on %s: %s", peer, strerror(-ret));
		push.prog_fd = push_fd;
		if (bpf_tc_attach(&peer_hook, &push))
			FATAL("attaching the VLAN pusher: %s", strerror(errno));
		send_counted(dp, fd, peer, 0, frame, len, RW_REASON_UNSUPPORTED_L2, &before,
			     &after);
		peer_hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&peer_hook);
		close(push_fd);
	}
	t_count++;
	ok = CHECK_EQ(moved(&before, &after, RW_REASON_UNSUPPORTED_L2), 1, "unsupported-l2");
	ok &= CHECK_EQ(moved(&before, &after, RW_REASON_ALLOWED), 0, "not allowed");
	printf("%s %d - real veth: an out-of-band VLAN tag on a packet to an allowed service is "
	       "unsupported-l2\n",
	       ok ? "ok" : "not ok", t_count);
	close(fd);

	/* IPv6 whose extension headers and TCP header are outside the linear area (sent as the
	 * first SYN above, whose linear length the probe saw; a dropped packet never reaches the
	 * probe): the walk reads them with the helper, so a routing header with segments left is
	 * ipv6-routing and the same chain without reaches the judgement (rw_egress6, tail-called
	 * on the attached rw_egress), never malformed. Then a frame
	 * cut inside its IPv6 header, which BPF_PROG_TEST_RUN cannot build.
	 */
	{
		struct pkt_spec routed = {.ipv6 = 1,
					  .src = "2600:1f14:abc:1::3",
					  .dst = "2606:4700::1111",
					  .proto = IPPROTO_TCP,
					  .sport = 40102,
					  .dport = 443,
					  .n_ext = 2,
					  .ext = {60, 43},
					  .ext_len = {0, 2},
					  .segments_left = 1};
		const struct {
			const char *what;
			__u8 segments_left;
			int reason;
		} v6[] = {{"a non-linear IPv6 SYN behind a routing header with segments left is "
			   "ipv6-routing",
			   1, RW_REASON_IPV6_ROUTING},
			  {"a non-linear IPv6 SYN behind a routing header with segments left 0 is "
			   "judged by the IPv6 program: unknown-source on a veth bound to IPv4 "
			   "only",
			   0, RW_REASON_UNKNOWN_SOURCE}};

		fd = packet_socket(peer, 1);
		for (size_t i = 0; i < sizeof(v6) / sizeof(v6[0]); i++) {
			routed.segments_left = v6[i].segments_left;
			len = big_frame(&routed, frame);
			send_counted(dp, fd, peer, 1, frame, len, v6[i].reason, &before, &after);
			t_count++;
			ok = CHECK_EQ(moved(&before, &after, v6[i].reason), 1,
				      rw_reason_name(v6[i].reason));
			ok &= CHECK_EQ(moved(&before, &after, RW_REASON_MALFORMED), 0,
				       "not malformed");
			printf("%s %d - real veth: %s\n", ok ? "ok" : "not ok", t_count,
			       v6[i].what);
		}
		close(fd);

		fd = packet_socket(peer, 0);
		pkt_build(&routed, frame);
		expect_cut_malformed(dp, fd, peer, frame, 14 + 20,
				     "a frame cut inside its IPv6 header is malformed");
		close(fd);
	}

	hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
	bpf_tc_hook_destroy(&hook);
	close(probe_fd);
	close(map_fd);
}
