// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ndp.c (test_datapath): NDP on a dual-stack pod's veth (bpf/icmp6.h): the messages a pod's
 * stack sends to resolve its gateway, answer for itself and detect duplicates are allowed, with
 * no event; a message a receiver would discard (hop limit below 255, a code, too short, a
 * multicast target) is malformed; one that claims another's address (the gateway's, another
 * pod's, a global address not its own) is spoofed-source; router advertisements and redirects
 * from a pod, and NDP not addressed within the veth, are icmpv6-type. Into the pod, NDP from
 * the node's link-local with hop limit 255.
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
	{"RA from the pod", .dir = E, .src = POD6_LL, .dst = "ff02::1", .type = RA,
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

void test_ndp(void)
{
	run_itable(ndp_cases, sizeof(ndp_cases) / sizeof(ndp_cases[0]));
}
