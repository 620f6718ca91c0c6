// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ipv6.c (test_datapath): IPv6 parsing (docs/ipv6.md, phase 1): every way the extension-header
 * walk refuses a chain gets its reason, charged to the veth's run; a packet that parses goes on
 * to the judgement, which on rwt0 (bound to POD_A's IPv4 only) finds no IPv6 identity:
 * unknown-source, no run (ipv6_policy.c judges a dual-stack pod). run_case() checks each: the
 * drop (never an answer), the reason's counters node-wide and for the veth's run, and the event
 * (the reason, the IPv6 ethertype, the IPv6 addresses).
 */
#include "dp_suite.h"

#define ICMPV6	58
#define POD_A6	"2600:1f14:abc:1::3" /* not bound to rwt0 here */
#define PUBLIC6 "2606:4700::1111"

/* The addresses and ports of a packet from the pod to the internet, or back into the pod. */
#define OUT6(proto_, sport_, dport_) \
	.ipv6 = 1, .src = POD_A6, .dst = PUBLIC6, .proto = proto_, .sport = sport_, .dport = dport_
#define INTO6(proto_, sport_, dport_) \
	.ipv6 = 1, .src = PUBLIC6, .dst = POD_A6, .proto = proto_, .sport = sport_, .dport = dport_
/* An ICMPv6 message of a link-local source to a multicast group (NDP, MLD). */
#define LINK_LOCAL6(group_, type_) \
	.ipv6 = 1, .src = "fe80::1", .dst = group_, .proto = ICMPV6, .icmp6_type = type_

#define HBH 0
#define RH  43
#define FH  44
#define DST 60

static const struct tcase ipv6_not_ready_cases[] = {
	{"before any snapshot, IPv6 is not-ready", .dir = E, .pkt = {OUT6(TCP, 40000, 443)},
	 DROPPED(RW_REASON_NOT_READY, NULL)},
	{"before any snapshot, an IPv6 fragment is not-ready", .dir = E,
	 .pkt = {OUT6(TCP, 40000, 443), .n_ext = 1, .ext = {FH}, .frag6 = 1},
	 DROPPED(RW_REASON_NOT_READY, NULL)},
};

static const struct tcase ipv6_cases[] = {
	/* Well-formed: the walk goes through, and the judgement finds no IPv6 bound to the veth,
	 * for ICMPv6 too (NDP and errors on a dual-stack pod: ndp.c, icmp6.c).
	 */
	{"TCP SYN to a public address", .dir = E, .pkt = {OUT6(TCP, 40001, 443)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"UDP to a public resolver", .dir = E, .pkt = {OUT6(UDP, 40002, 53)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"ICMPv6 echo request", .dir = E, .pkt = {OUT6(ICMPV6, 0, 0), .icmp6_type = 128},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"NDP neighbour solicitation for the gateway", .dev = 0, .dir = E,
	 .pkt = {LINK_LOCAL6("ff02::1:ff00:1", 135), .payload = 16},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"MLDv2 report behind a hop-by-hop header", .dev = 0, .dir = E,
	 .pkt = {LINK_LOCAL6("ff02::16", 143), .n_ext = 1, .ext = {HBH}, .payload = 20},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"TCP behind destination options", .dir = E,
	 .pkt = {OUT6(TCP, 40003, 443), .n_ext = 1, .ext = {DST}},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"a routing header with segments left 0 is walked past", .dir = E,
	 .pkt = {OUT6(TCP, 40004, 443), .n_ext = 1, .ext = {RH}, .ext_len = {2}, .rh_type = 4},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"four extension headers (the bound): hop-by-hop, dst opts, routing, dst opts", .dir = E,
	 .pkt = {OUT6(UDP, 40005, 443), .n_ext = 4, .ext = {HBH, DST, RH, DST}},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"a chain of exactly 256 bytes", .dir = E,
	 .pkt = {OUT6(TCP, 40006, 443), .n_ext = 2, .ext = {HBH, DST}, .ext_len = {15, 15}},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"SCTP: an upper layer without ports", .dir = E, .pkt = {OUT6(132, 40007, 443)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"into the pod: TCP SYN", .dir = I, .pkt = {INTO6(TCP, 443, 40008)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"into the pod: ICMPv6 packet too big", .dir = I,
	 .pkt = {INTO6(ICMPV6, 0, 0), .icmp6_type = 2, .payload = 48},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"on an unbound veth", .dev = 2, .dir = E,
	 .pkt = {.ipv6 = 1, FLOW(POD_A6, PUBLIC6, TCP, 40009, 443)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},

	/* Routing headers that still name hops. */
	{"routing header type 0 with segments left 1", .dir = E,
	 .pkt = {OUT6(TCP, 40010, 443), .n_ext = 1, .ext = {RH}, .ext_len = {2}, .rh_type = 0,
		 .segments_left = 1},
	 DROPPED(RW_REASON_IPV6_ROUTING, "run-7f3a")},
	{"segment routing header (type 4) with segments left 2", .dir = E,
	 .pkt = {OUT6(TCP, 40011, 443), .n_ext = 1, .ext = {RH}, .ext_len = {4}, .rh_type = 4,
		 .segments_left = 2},
	 DROPPED(RW_REASON_IPV6_ROUTING, "run-7f3a")},
	{"mobile IPv6 routing header (type 2) behind hop-by-hop", .dir = E,
	 .pkt = {OUT6(UDP, 40012, 443), .n_ext = 2, .ext = {HBH, RH}, .ext_len = {0, 2},
		 .rh_type = 2, .segments_left = 1},
	 DROPPED(RW_REASON_IPV6_ROUTING, "run-7f3a")},
	{"into the pod: a routing header with segments left", .dir = I,
	 .pkt = {INTO6(TCP, 443, 40013), .n_ext = 1, .ext = {RH}, .ext_len = {2},
		 .segments_left = 1},
	 DROPPED(RW_REASON_IPV6_ROUTING, "run-7f3a")},

	/* Fragments, every kind. */
	{"a first fragment (offset 0, M)", .dir = E,
	 .pkt = {OUT6(TCP, 40014, 443), .n_ext = 1, .ext = {FH}, .frag6 = 1},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"a later fragment whose payload looks like port 443", .dir = E,
	 .pkt = {OUT6(TCP, 40015, 443), .n_ext = 1, .ext = {FH}, .frag6 = 185 << 3},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"an atomic fragment (offset 0, no M)", .dir = E,
	 .pkt = {OUT6(TCP, 40016, 443), .n_ext = 1, .ext = {FH}},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"a fragment header behind destination options", .dir = E,
	 .pkt = {OUT6(UDP, 40017, 443), .n_ext = 2, .ext = {DST, FH}},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"a fragment on an unbound veth", .dev = 2, .dir = E,
	 .pkt = {.ipv6 = 1, .src = POD_A6, .dst = PUBLIC6, .proto = TCP, .n_ext = 1, .ext = {FH}},
	 DROPPED(RW_REASON_FRAGMENT, NULL)},

	/* Chains past the walk's bounds. */
	{"five extension headers", .dir = E,
	 .pkt = {OUT6(TCP, 40018, 443), .n_ext = 5, .ext = {HBH, DST, DST, DST, DST}},
	 DROPPED(RW_REASON_IPV6_EXT_HEADERS, "run-7f3a")},
	{"eight destination options headers", .dir = E,
	 .pkt = {OUT6(TCP, 40019, 443), .n_ext = 8,
		 .ext = {DST, DST, DST, DST, DST, DST, DST, DST}},
	 DROPPED(RW_REASON_IPV6_EXT_HEADERS, "run-7f3a")},
	{"a chain of 264 bytes (two headers)", .dir = E,
	 .pkt = {OUT6(TCP, 40020, 443), .n_ext = 2, .ext = {HBH, DST}, .ext_len = {15, 16}},
	 DROPPED(RW_REASON_IPV6_EXT_HEADERS, "run-7f3a")},
	{"one hop-by-hop header of 2 048 bytes, claimed", .dir = E,
	 .pkt = {OUT6(TCP, 40021, 443), .n_ext = 1, .ext = {HBH}, .ext_len = {255}},
	 DROPPED(RW_REASON_IPV6_EXT_HEADERS, "run-7f3a")},

	/* Next headers the walk cannot see past. */
	{"ESP", .dir = E, .pkt = {OUT6(50, 0, 0)}, DROPPED(RW_REASON_IPV6_NEXT_HEADER, "run-7f3a")},
	{"AH", .dir = E, .pkt = {OUT6(51, 0, 0)}, DROPPED(RW_REASON_IPV6_NEXT_HEADER, "run-7f3a")},
	{"no next header (59)", .dir = E, .pkt = {OUT6(59, 0, 0)},
	 DROPPED(RW_REASON_IPV6_NEXT_HEADER, "run-7f3a")},
	{"mobility header (135) behind destination options", .dir = E,
	 .pkt = {OUT6(135, 0, 0), .n_ext = 1, .ext = {DST}},
	 DROPPED(RW_REASON_IPV6_NEXT_HEADER, "run-7f3a")},
	{"experimental next header 253", .dir = E, .pkt = {OUT6(253, 0, 0)},
	 DROPPED(RW_REASON_IPV6_NEXT_HEADER, "run-7f3a")},

	/* Jumbograms. */
	{"a jumbogram: payload length 0 and a jumbo option", .dir = E,
	 .pkt = {OUT6(TCP, 40022, 443), .n_ext = 1, .ext = {HBH}, .jumbo = 1},
	 DROPPED(RW_REASON_IPV6_JUMBOGRAM, "run-7f3a")},
	{"payload length 0 without a hop-by-hop header", .dir = E,
	 .pkt = {OUT6(TCP, 40023, 443), .jumbo = 1}, DROPPED(RW_REASON_IPV6_JUMBOGRAM, "run-7f3a")},

	/* Truncated or inconsistent. */
	{"version 4 under the IPv6 ethertype", .dir = E,
	 .pkt = {OUT6(TCP, 40024, 443), .ip_version = 4}, DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"payload length beyond the frame", .dir = E,
	 .pkt = {OUT6(TCP, 40025, 443), .tot_len_delta = 1},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a frame cut inside the TCP header", .dir = E,
	 .pkt = {OUT6(TCP, 40026, 443), .truncate = 10, .tot_len_delta = -10},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"payload length ends inside an extension header", .dir = E,
	 .pkt = {OUT6(TCP, 40027, 443), .n_ext = 1, .ext = {DST}, .ext_len = {1},
		 .tot_len_delta = -30},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"payload length ends inside a fragment header", .dir = E,
	 .pkt = {OUT6(TCP, 40028, 443), .n_ext = 1, .ext = {FH}, .frag6 = 1, .tot_len_delta = -24},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"hop-by-hop options not first", .dir = E,
	 .pkt = {OUT6(TCP, 40029, 443), .n_ext = 2, .ext = {DST, HBH}},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"TCP data offset 4", .dir = E, .pkt = {OUT6(TCP, 40030, 443), .tcp_doff = 4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"TCP data offset beyond the payload", .dir = E,
	 .pkt = {OUT6(TCP, 40031, 443), .tcp_doff = 15, .tot_len_delta = -40, .truncate = 40},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"UDP length below 8", .dir = E, .pkt = {OUT6(UDP, 40032, 443), .udp_len_delta = -1},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"UDP length beyond the payload", .dir = E,
	 .pkt = {OUT6(UDP, 40033, 443), .udp_len_delta = 1},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"ICMPv6 of 2 bytes", .dir = E,
	 .pkt = {OUT6(ICMPV6, 0, 0), .icmp6_type = 128, .tot_len_delta = -6, .truncate = 6},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"into the pod: a truncated UDP header", .dir = I,
	 .pkt = {INTO6(UDP, 53, 40034), .tot_len_delta = -4, .truncate = 4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
};

/* Before any snapshot: not-ready, whatever the chain. */
void test_ipv6_not_ready(void)
{
	run_table(ipv6_not_ready_cases,
		  sizeof(ipv6_not_ready_cases) / sizeof(ipv6_not_ready_cases[0]));
}

/* Under policy v1: rwt0 is run-7f3a's pod, rwt2 is bound to nothing. */
void test_ipv6(void)
{
	run_table(ipv6_cases, sizeof(ipv6_cases) / sizeof(ipv6_cases[0]));
}
