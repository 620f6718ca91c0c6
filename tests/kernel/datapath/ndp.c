// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ndp.c (test_datapath): NDP on a dual-stack pod's veth (bpf/icmp6.h): the messages a pod's
 * stack sends to resolve its gateway, answer for itself and detect duplicates are allowed, with
 * no event; a message a receiver would discard (hop limit below 255, a code, too short, a
 * multicast target, an option of length 0 or past the message, a source link-layer address
 * from ::, more than 8 options) is malformed, an RA from the pod too, before icmpv6-type; one that claims another's address (the gateway's, another
 * pod's, a global address not its own), or speaks from a second link-local address of the veth
 * (a flood of them would fill the node's neighbour table), is spoofed-source, as is duplicate
 * address detection for an address not the pod's and, before the gateway is known, an NA for a
 * link-local address not learned; router advertisements and redirects from a pod, and NDP not
 * addressed within the veth, are icmpv6-type. Into the pod, NDP from the node's link-local with
 * hop limit 255.
 */
#include "icmp6_suite.h"

#define NS 135
#define NA 136
#define RS 133
#define RA 134

#define SOL_GW	 "ff02::1:ff00:1" /* the gateway's solicited-node address */
#define SOL_POD	 "ff02::1:ff00:3" /* POD6_A's */
#define OTHER_LL "fe80::bad"

static const struct icase ndp_cases[] = {
	/* Out of the pod: what its stack sends. */
	{"NS for the gateway, from the pod's link-local, to its solicited-node address", .dir = E,
	 .src = POD6_LL, .dst = SOL_GW, .type = NS, .target = GW6, .reason = RW_REASON_ALLOWED},
	{"NS for the gateway, unicast (unreachability detection)", .dir = E, .src = POD6_LL,
	 .dst = GW6, .type = NS, .target = GW6, .reason = RW_REASON_ALLOWED},
	{"NS for the gateway from the pod's bound IPv6", .dir = E, .src = POD6_A, .dst = SOL_GW,
	 .type = NS, .target = GW6, .reason = RW_REASON_ALLOWED},
	{"NA for the pod's bound IPv6, to the gateway", .dir = E, .src = POD6_LL, .dst = GW6,
	 .type = NA, .target = POD6_A, .reason = RW_REASON_ALLOWED},
	{"NA for the link-local address it speaks from", .dir = E, .src = POD6_LL, .dst = GW6,
	 .type = NA, .target = POD6_LL, .reason = RW_REASON_ALLOWED},
	{"unsolicited NA for its bound IPv6, to all nodes", .dir = E, .src = POD6_LL,
	 .dst = "ff02::1", .type = NA, .target = POD6_A, .reason = RW_REASON_ALLOWED},
	{"DAD: NS from :: for its bound IPv6", .dir = E, .src = "::", .dst = SOL_POD, .type = NS,
	 .target = POD6_A, .reason = RW_REASON_ALLOWED},
	{"DAD: NS from :: for its link-local", .dir = E, .src = "::", .dst = "ff02::1:ff00:3",
	 .type = NS, .target = POD6_LL, .reason = RW_REASON_ALLOWED},
	{"RS to all routers", .dir = E, .src = POD6_LL, .dst = "ff02::2", .type = RS,
	 .reason = RW_REASON_ALLOWED},
	{"NS with its link-layer address and 7 more options (8, the most read)", .dir = E,
	 .src = POD6_LL, .dst = SOL_GW, .type = NS, .target = GW6,
	 .opts = {1, 1, 2,  0, 0,  0, 0, 1, 14, 1, 0,  0, 0,  0, 0, 0, 14, 1, 0,  0, 0, 0,
		  0, 0, 14, 1, 0,  0, 0, 0, 0,	0, 14, 1, 0,  0, 0, 0, 0,  0, 14, 1, 0, 0,
		  0, 0, 0,  0, 14, 1, 0, 0, 0,	0, 0,  0, 14, 1, 0, 0, 0,  0, 0,  0},
	 .opts_len = 64, .reason = RW_REASON_ALLOWED},
	{"NA with its link-layer address (an option of 16 bytes)", .dir = E, .src = POD6_LL,
	 .dst = GW6, .type = NA, .target = POD6_A,
	 .opts = {2, 2, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, .opts_len = 16,
	 .reason = RW_REASON_ALLOWED},
	{"DAD: NS from :: with a nonce option", .dir = E, .src = "::", .dst = SOL_POD, .type = NS,
	 .target = POD6_A, .opts = {14, 1, 1, 2, 3, 4, 5, 6}, .opts_len = 8,
	 .reason = RW_REASON_ALLOWED},
	{"RS with its link-layer address", .dir = E, .src = POD6_LL, .dst = "ff02::2", .type = RS,
	 .opts = {1, 1, 2, 0, 0, 0, 0, 1}, .opts_len = 8, .reason = RW_REASON_ALLOWED},

	/* What a receiver discards (RFC 4861 6.1.1, 7.1.1, 7.1.2). */
	{"NS with hop limit 254", .dir = E, .src = POD6_LL, .dst = SOL_GW, .hop = 254, .type = NS,
	 .target = GW6, .reason = RW_REASON_MALFORMED},
	{"NA with hop limit 64", .dir = E, .src = POD6_LL, .dst = GW6, .hop = 64, .type = NA,
	 .target = POD6_A, .reason = RW_REASON_MALFORMED},
	{"RS with hop limit 1", .dir = E, .src = POD6_LL, .dst = "ff02::2", .hop = 1, .type = RS,
	 .reason = RW_REASON_MALFORMED},
	{"NS with code 1", .dir = E, .src = POD6_LL, .dst = SOL_GW, .type = NS, .code = 1,
	 .target = GW6, .reason = RW_REASON_MALFORMED},
	{"NS of 20 bytes (its target cut)", .dir = E, .src = POD6_LL, .dst = SOL_GW, .type = NS,
	 .target = GW6, .len_delta = -4, .reason = RW_REASON_MALFORMED},
	{"NA for a multicast target", .dir = E, .src = POD6_LL, .dst = GW6, .type = NA,
	 .target = "ff02::1", .reason = RW_REASON_MALFORMED},
	{"RA from the pod with hop limit 254 (malformed before icmpv6-type)", .dir = E,
	 .src = POD6_LL, .dst = "ff02::1", .hop = 254, .type = RA, .len_delta = 8,
	 .reason = RW_REASON_MALFORMED},
	{"RA from the pod of 8 bytes (malformed before icmpv6-type)", .dir = E, .src = POD6_LL,
	 .dst = "ff02::1", .type = RA, .reason = RW_REASON_MALFORMED},
	{"RA from the pod with code 1 (malformed before icmpv6-type)", .dir = E, .src = POD6_LL,
	 .dst = "ff02::1", .type = RA, .code = 1, .len_delta = 8, .reason = RW_REASON_MALFORMED},
	{"NS with a zero-length option", .dir = E, .src = POD6_LL, .dst = SOL_GW, .type = NS,
	 .target = GW6, .opts = {1, 0, 0, 0, 0, 0, 0, 0}, .opts_len = 8,
	 .reason = RW_REASON_MALFORMED},
	{"NS with its link-layer address, then a zero-length option", .dir = E, .src = POD6_LL,
	 .dst = SOL_GW, .type = NS, .target = GW6,
	 .opts = {1, 1, 2, 0, 0, 0, 0, 1, 14, 0, 0, 0, 0, 0, 0, 0}, .opts_len = 16,
	 .reason = RW_REASON_MALFORMED},
	{"NA with a zero-length option", .dir = E, .src = POD6_LL, .dst = GW6, .type = NA,
	 .target = POD6_A, .opts = {2, 0, 0, 0, 0, 0, 0, 0}, .opts_len = 8,
	 .reason = RW_REASON_MALFORMED},
	{"RS with a zero-length option", .dir = E, .src = POD6_LL, .dst = "ff02::2", .type = RS,
	 .opts = {1, 0, 0, 0, 0, 0, 0, 0}, .opts_len = 8, .reason = RW_REASON_MALFORMED},
	{"NS with an option running past the message", .dir = E, .src = POD6_LL, .dst = SOL_GW,
	 .type = NS, .target = GW6, .opts = {1, 2, 2, 0, 0, 0, 0, 1}, .opts_len = 8,
	 .reason = RW_REASON_MALFORMED},
	{"NS with 1 byte after its options", .dir = E, .src = POD6_LL, .dst = SOL_GW, .type = NS,
	 .target = GW6, .opts = {1, 1, 2, 0, 0, 0, 0, 1, 0}, .opts_len = 9,
	 .reason = RW_REASON_MALFORMED},
	{"NS with 9 options", .dir = E, .src = POD6_LL, .dst = SOL_GW, .type = NS, .target = GW6,
	 .opts = {1,  1, 2, 0, 0, 0, 0, 1, 14, 1, 0, 0, 0, 0, 0, 0, 14, 1, 0, 0, 0, 0, 0, 0,
		  14, 1, 0, 0, 0, 0, 0, 0, 14, 1, 0, 0, 0, 0, 0, 0, 14, 1, 0, 0, 0, 0, 0, 0,
		  14, 1, 0, 0, 0, 0, 0, 0, 14, 1, 0, 0, 0, 0, 0, 0, 14, 1, 0, 0, 0, 0, 0, 0},
	 .opts_len = 72, .reason = RW_REASON_MALFORMED},
	{"DAD: NS from :: with a source link-layer address option", .dir = E,
	 .src = "::", .dst = SOL_POD, .type = NS, .target = POD6_A,
	 .opts = {1, 1, 2, 0, 0, 0, 0, 1}, .opts_len = 8, .reason = RW_REASON_MALFORMED},
	{"into the pod: the node's NA with a zero-length option", .dir = I, .src = GW6,
	 .dst = POD6_LL, .type = NA, .target = GW6, .opts = {2, 0, 0, 0, 0, 0, 0, 0}, .opts_len = 8,
	 .reason = RW_REASON_MALFORMED},

	/* Another's address, as source or target. */
	{"NA claiming the gateway's address", .dir = E, .src = POD6_LL, .dst = "ff02::1",
	 .type = NA, .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NA claiming the gateway's address, from the gateway's address", .dir = E, .src = GW6,
	 .dst = "ff02::1", .type = NA, .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NS from the gateway's address", .dir = E, .src = GW6, .dst = SOL_GW, .type = NS,
	 .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NA claiming another pod's address", .dir = E, .src = POD6_LL, .dst = GW6, .type = NA,
	 .target = POD6_B, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NA claiming a global address not its own", .dir = E, .src = POD6_LL, .dst = GW6,
	 .type = NA, .target = PUBLIC6, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NA for a link-local address it does not speak from", .dir = E, .src = POD6_LL, .dst = GW6,
	 .type = NA, .target = OTHER_LL, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NA for its bound IPv6, from ::", .dir = E, .src = "::", .dst = "ff02::1", .type = NA,
	 .target = POD6_A, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NS for another pod's address", .dir = E, .src = POD6_LL, .dst = "ff02::1:ff00:4",
	 .type = NS, .target = POD6_B, .reason = RW_REASON_SPOOFED_SOURCE},
	{"DAD: NS from :: for another pod's address", .dir = E, .src = "::",
	 .dst = "ff02::1:ff00:4", .type = NS, .target = POD6_B, .reason = RW_REASON_SPOOFED_SOURCE},
	{"DAD from :: sent unicast to the gateway", .dir = E, .src = "::", .dst = GW6, .type = NS,
	 .target = POD6_A, .reason = RW_REASON_SPOOFED_SOURCE},
	{"NS from another pod's address", .dir = E, .src = POD6_B, .dst = SOL_GW, .type = NS,
	 .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
	{"RS from ::", .dir = E, .src = "::", .dst = "ff02::2", .type = RS,
	 .reason = RW_REASON_SPOOFED_SOURCE},

	/* Not NDP of this veth, or never a pod's. */
	{"RA from the pod", .dir = E, .src = POD6_LL, .dst = "ff02::1", .type = RA, .len_delta = 8,
	 .reason = RW_REASON_ICMPV6_TYPE},
	{"redirect from the pod", .dir = E, .src = POD6_LL, .dst = GW6, .type = 137, .target = GW6,
	 .reason = RW_REASON_ICMPV6_TYPE},
	{"NS to a global destination", .dir = E, .src = POD6_A, .dst = PUBLIC6, .type = NS,
	 .target = GW6, .reason = RW_REASON_ICMPV6_TYPE},
	{"NS to all nodes", .dir = E, .src = POD6_LL, .dst = "ff02::1", .type = NS, .target = GW6,
	 .reason = RW_REASON_ICMPV6_TYPE},
	{"NA to all routers", .dir = E, .src = POD6_LL, .dst = "ff02::2", .type = NA,
	 .target = POD6_A, .reason = RW_REASON_ICMPV6_TYPE},
	{"NS on a veth with no IPv6 bound", .dev = 1, .dir = E, .src = POD6_LL, .dst = SOL_GW,
	 .type = NS, .target = GW6, .reason = RW_REASON_UNKNOWN_SOURCE},

	/* Into the pod: the node's NDP. */
	{"into the pod: the node's NS for the pod's IPv6", .dir = I, .src = GW6, .dst = SOL_POD,
	 .type = NS, .target = POD6_A, .reason = RW_REASON_ALLOWED},
	{"into the pod: the node's NS, unicast to the pod's IPv6", .dir = I, .src = GW6,
	 .dst = POD6_A, .type = NS, .target = POD6_A, .reason = RW_REASON_ALLOWED},
	{"into the pod: the node's NA for the gateway", .dir = I, .src = GW6, .dst = POD6_LL,
	 .type = NA, .target = GW6, .reason = RW_REASON_ALLOWED},
	{"into the pod: the node's RA to all nodes", .dir = I, .src = GW6, .dst = "ff02::1",
	 .type = RA, .len_delta = 8, .reason = RW_REASON_ALLOWED},
	{"into the pod: the node's RA with its link-layer address and a prefix", .dir = I,
	 .src = GW6, .dst = "ff02::1", .type = RA, .len_delta = 8,
	 .opts = {1, 1, 2, 0, 0, 0, 0, 0xfe, 3, 4, 64}, .opts_len = 40,
	 .reason = RW_REASON_ALLOWED},
	{"into the pod: an RA of 8 bytes", .dir = I, .src = GW6, .dst = "ff02::1", .type = RA,
	 .reason = RW_REASON_MALFORMED},
	{"into the pod: NS with hop limit 254", .dir = I, .src = GW6, .dst = SOL_POD, .hop = 254,
	 .type = NS, .target = POD6_A, .reason = RW_REASON_MALFORMED},
	{"into the pod: NA from a global source", .dir = I, .src = "2600:1f14:ffff::1",
	 .dst = POD6_A, .type = NA, .target = "2600:1f14:ffff::1",
	 .reason = RW_REASON_INBOUND_DENIED},
	{"into the pod: NS to another group", .dir = I, .src = GW6, .dst = "ff02::16", .type = NS,
	 .target = POD6_A, .reason = RW_REASON_ICMPV6_TYPE},
	{"into the pod: NS to another pod's address", .dir = I, .src = GW6, .dst = POD6_B,
	 .type = NS, .target = POD6_B, .reason = RW_REASON_INBOUND_DENIED},
	{"into the pod: a redirect from the node", .dir = I, .src = GW6, .dst = POD6_LL,
	 .type = 137, .target = GW6, .reason = RW_REASON_ICMPV6_TYPE},
};

/* rwt0 bound as icmp6_setup() binds it, the gateway known or not (`flags`). `new_pod`: bound to
 * its IPv4 alone in between, so that the binding's pod changes (its IPv6 dropped) and then is
 * a new one.
 */
static void bind_rwt0(__u32 flags, int new_pod)
{
	struct rw_endpoint ep = {.flags = flags};

	if (new_pod)
		bind_veth(0, POD_A);
	inet_pton(AF_INET, POD_A, &ep.pod_ip);
	inet_pton(AF_INET6, POD6_A, ep.pod_ip6);
	inet_pton(AF_INET6, GW6, ep.gw_ip6);
	if (rw_endpoint_bind_addrs(&dp, ifindex_of[0], &ep))
		FATAL("binding rwt0 to %s, %s: %s", POD_A, POD6_A, strerror(errno));
}

/* One link-local source per veth (bpf/icmp6.h, rw_ll6): the node makes a neighbour entry for
 * the source of each NS it receives, so a pod speaking from ever new link-local addresses would
 * fill the node's table. After ndp_cases, POD6_LL is rwt0's.
 */
static void test_ndp_one_link_local(void)
{
	static const struct icase learned[] = {
		{"NS for the gateway from a second link-local source", .dir = E, .src = OTHER_LL,
		 .dst = SOL_GW, .type = NS, .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
		{"RS from a second link-local source", .dir = E, .src = OTHER_LL, .dst = "ff02::2",
		 .type = RS, .reason = RW_REASON_SPOOFED_SOURCE},
		{"NA for itself from a second link-local source", .dir = E, .src = OTHER_LL,
		 .dst = GW6, .type = NA, .target = OTHER_LL, .reason = RW_REASON_SPOOFED_SOURCE},
		{"NA for its bound IPv6 from a second link-local source", .dir = E, .src = OTHER_LL,
		 .dst = GW6, .type = NA, .target = POD6_A, .reason = RW_REASON_SPOOFED_SOURCE},
		{"the first link-local source still speaks", .dir = E, .src = POD6_LL,
		 .dst = SOL_GW, .type = NS, .target = GW6, .reason = RW_REASON_ALLOWED},
		{"DAD: NS from :: for the gateway's address", .dir = E, .src = "::", .dst = SOL_GW,
		 .type = NS, .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
		{"DAD: NS from :: for a link-local address not its own", .dir = E,
		 .src = "::", .dst = "ff02::1:ff00:bad", .type = NS, .target = OTHER_LL,
		 .reason = RW_REASON_SPOOFED_SOURCE},
	};
	static const struct icase same_pod = {"the same pod bound again keeps its link-local",
					      .dir = E,
					      .src = OTHER_LL,
					      .dst = SOL_GW,
					      .type = NS,
					      .target = GW6,
					      .reason = RW_REASON_SPOOFED_SOURCE};
	static const struct icase new_pod[] = {
		{"a new pod on the veth: its link-local is learned afresh", .dir = E,
		 .src = OTHER_LL, .dst = SOL_GW, .type = NS, .target = GW6,
		 .reason = RW_REASON_ALLOWED},
		{"a new pod on the veth: the old pod's link-local is another's now", .dir = E,
		 .src = POD6_LL, .dst = SOL_GW, .type = NS, .target = GW6,
		 .reason = RW_REASON_SPOOFED_SOURCE},
	};
	struct icase flood = {NULL, .dir = E, .dst = GW6, .type = NS, .target = GW6};
	struct rw_counters n0, n1;
	char src[INET6_ADDRSTRLEN], name[96];
	__u64 seed = 0x2545f4914f6cdd1dULL;
	int allowed = 0, failed_before = t_failed;

	run_itable(learned, sizeof(learned) / sizeof(learned[0]));
	bind_rwt0(RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6, 0);
	run_icase(&same_pod);
	bind_rwt0(RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6, 1);
	run_itable(new_pod, sizeof(new_pod) / sizeof(new_pod[0]));

	/* The flood of the review (H1): NS for the gateway, each from a new random link-local. */
	bind_rwt0(RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6, 1);
	rw_counters_read(&dp, 0, &n0);
	t_count++;
	for (int i = 0; i < 256; i++) {
		__be32 a[4] = {htonl(0xfe800000), 0};

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		a[2] = htonl((__u32)(seed >> 32));
		a[3] = htonl((__u32)seed | 1); /* never ::, never GW6 (fe80::1 has a[2] 0) */
		inet_ntop(AF_INET6, a, src, sizeof(src));
		snprintf(name, sizeof(name), "NS from %s", src);
		flood.name = name;
		flood.src = src;
		allowed += icase_retval(&flood) == -1;
	}
	rw_counters_read(&dp, 0, &n1);
	CHECK(allowed == 1, "flood", "%d of 256 link-local sources allowed, expected 1", allowed);
	CHECK(n1.packets[E][RW_REASON_SPOOFED_SOURCE] - n0.packets[E][RW_REASON_SPOOFED_SOURCE] ==
		      255,
	      "flood counter", "spoofed-source grew by %llu, expected 255",
	      (unsigned long long)(n1.packets[E][RW_REASON_SPOOFED_SOURCE] -
				   n0.packets[E][RW_REASON_SPOOFED_SOURCE]));
	printf("%s %d - a flood of 256 NS from distinct link-local sources: the first allowed, "
	       "255 spoofed-source\n",
	       t_failed == failed_before ? "ok" : "not ok", t_count);
	drain_events();
}

/* Before the gateway is known (RW_EP_GW6 clear, the agent learns it later), a link-local
 * address may be the gateway's: no NA answers for one that is not the veth's learned
 * link-local. A new pod, so none is learned yet.
 */
static void test_ndp_gateway_unknown(void)
{
	static const struct icase cases[] = {
		{"gateway unknown: NA for the gateway's address, from it", .dir = E, .src = GW6,
		 .dst = "ff02::1", .type = NA, .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
		{"gateway unknown: NA for a link-local, none learned yet", .dir = E, .src = POD6_LL,
		 .dst = "ff02::1", .type = NA, .target = POD6_LL,
		 .reason = RW_REASON_SPOOFED_SOURCE},
		{"gateway unknown: DAD for a link-local, none learned yet", .dir = E, .src = "::",
		 .dst = SOL_GW, .type = NS, .target = GW6, .reason = RW_REASON_SPOOFED_SOURCE},
		{"gateway unknown: the pod's RS makes its link-local the veth's", .dir = E,
		 .src = POD6_LL, .dst = "ff02::2", .type = RS, .reason = RW_REASON_ALLOWED},
		{"gateway unknown: NA for the learned link-local", .dir = E, .src = POD6_LL,
		 .dst = "ff02::1", .type = NA, .target = POD6_LL, .reason = RW_REASON_ALLOWED},
		{"gateway unknown: DAD for the learned link-local", .dir = E,
		 .src = "::", .dst = "ff02::1:ff00:3", .type = NS, .target = POD6_LL,
		 .reason = RW_REASON_ALLOWED},
		{"gateway unknown: NA for the gateway's address, from the learned link-local",
		 .dir = E, .src = POD6_LL, .dst = "ff02::1", .type = NA, .target = GW6,
		 .reason = RW_REASON_SPOOFED_SOURCE},
	};

	bind_rwt0(RW_EP_IP4 | RW_EP_IP6, 1);
	run_itable(cases, sizeof(cases) / sizeof(cases[0]));
	bind_rwt0(RW_EP_IP4 | RW_EP_IP6 | RW_EP_GW6, 1);
}

void test_ndp(void)
{
	run_itable(ndp_cases, sizeof(ndp_cases) / sizeof(ndp_cases[0]));
	test_ndp_one_link_local();
	test_ndp_gateway_unknown();
}
