// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ipv6_policy.c (test_datapath): the sandbox network paths over IPv6, on crafted frames judged by
 * the IPv6 programs under real snapshots (rw_policy_parse(), rw_apply()): the services on their
 * ports, metadata, the special ranges, the forms that embed an IPv4 address (refused by what it
 * refuses, never allowed by it; NAT64 judged by the IPv4 policy under a declared nat64), DNS,
 * the egress modes, inbound from the platform's peers only, spoofing, replies and the verdict
 * cache, the node and the snapshot's pods (private), the deny list over the embedded forms, the
 * lease-expired policy, one apply cutting an IPv6 and an IPv4 flow of one run, and the IPv6
 * table of a full sandbox. run_case() checks each case's verdict, counters and event, whose
 * addresses are the IPv6 ones.
 *
 * rwt0 and rwt1 are bound dual-stack here (their IPv4 as in the other parts); both runs refuse
 * in silence (refusal "drop"), so that the cases hold whatever IPv6 answers a refusal gets.
 */
#include "dp_suite.h"

#define POD_A6	 "2600:1f14:abc:1::3" /* run-d6a (allowlist), on rwt0 */
#define POD_B6	 "2600:1f14:abc:1::4" /* run-d6b (open), on rwt1 */
#define PROXY6	 "2600:1f14:100::10"
#define TELEM6	 "2600:1f14:100::14"
#define ULA_SVC6 "fd00:1::20"
#define PEER6	 "2600:1f14:300::12" /* the inbound peer */
#define PUBLIC6	 "2606:4700::1111"
#define RULE6	 "2a00:1450::1"
#define NODE6	 "2600:1f14:abc:1:8f3a::1" /* the node's ENI address: the pods' subnet /64 */
#define POD_C6	 "2600:1f14:abc:7::5"	   /* run-d6c's pod, on a node of another subnet */

/* The snapshot: IPv6 services (one in a ULA range, as only services may), an IPv6 deny CIDR, an
 * IPv6 inbound peer, two runs of a dual-stack pod each and a run of a pod of another node;
 * run-d6a's rules name an IPv6 host, an IPv6 CIDR, an IPv4 host (which its NAT64 and Teredo forms
 * reach) and the whole VPC /48 on the kubelet's and a web port (a wide public rule: the pods and
 * the node are in it). `cut`: run-d6a's 2a00:1450::1 and 8.8.4.4 rules gone. deny_more: more
 * deny entries.
 */
static const char *deny_more = "";
static const char *nat64_key = ""; /* "\"nat64\": ...," or none */

static char *snapshot(unsigned long long rev, int cut)
{
	char *s = malloc(4096);

	snprintf(s, 4096,
		 "{\"revision\": %llu, %s\"egress\": \"allowlist\", \"refusal\": \"drop\",\n"
		 " \"deny\": [\"10.0.0.0/16\", \"2600:1f14:dead::/48\"%s],\n"
		 " \"services\": [\n"
		 "  {\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443]},\n"
		 "  {\"name\": \"proxy6\", \"ip\": \"" PROXY6 "\", \"tcp\": [443, 8443]},\n"
		 "  {\"name\": \"telemetry6\", \"ip\": \"" TELEM6 "\", \"udp\": [4317]},\n"
		 "  {\"name\": \"model6\", \"cidr\": \"2600:1f14:200::/64\", \"tcp\": [443]},\n"
		 "  {\"name\": \"internal6\", \"ip\": \"" ULA_SVC6 "\", \"tcp\": [9000]}],\n"
		 " \"inbound\": [{\"name\": \"app6\", \"cidr\": \"" PEER6
		 "/128\", \"tcp\": [4096]}],\n"
		 " \"runs\": [\n"
		 "  {\"id\": \"run-d6a\", \"pods\": [\"" POD_A "\", \"" POD_A6 "\"],\n"
		 "   \"allow\": [{\"cidr\": \"2a00:1451::/32\", \"udp\": [123]},"
		 " {\"cidr\": \"2600:1f14:abc::/48\", \"tcp\": [80, 10250]}%s]},\n"
		 "  {\"id\": \"run-d6b\", \"pods\": [\"" POD_B "\", \"" POD_B6 "\"],"
		 " \"egress\": \"open\"},\n"
		 "  {\"id\": \"run-d6c\", \"pods\": [\"" POD_C6 "\"], \"egress\": \"open\"}]}\n",
		 rev, nat64_key, deny_more,
		 cut ? ""
		     : ", {\"ip\": \"" RULE6 "\", \"tcp\": [443]},"
		       " {\"ip\": \"8.8.4.4\", \"tcp\": [443]}");
	return s;
}

static struct applied series;

/* snapshot(rev, cut) applied over the one before. */
static void apply6(unsigned long long rev, int cut, const char *what)
{
	char *json = snapshot(rev, cut), err[512];
	struct rw_apply_result res;
	int ret;

	t_count++;
	ret = apply_over(&series, json, what, &res, err, sizeof(err));
	free(json);
	if (!CHECK(ret == 0, what, "rw_apply: %s", err))
		FATAL("cannot go on without the snapshot");
	printf("ok %d - %s: revision %llu live\n", t_count, what, (unsigned long long)res.revision);
	dp_policy = &series.last;
}

void bind_dual(int dev, const char *ip4, const char *ip6)
{
	struct rw_endpoint ep = {.flags = RW_EP_IP4 | RW_EP_IP6};

	inet_pton(AF_INET, ip4, &ep.pod_ip);
	inet_pton(AF_INET6, ip6, ep.pod_ip6);
	if (rw_endpoint_bind_addrs(&dp, ifindex_of[dev], &ep))
		FATAL("binding %s to %s and %s", devs[dev], ip4, ip6);
}

/* Out of rwt0's pod (run-d6a) or rwt1's (run-d6b), and into them. */
#define V6(dev_, dir_, src_, dst_, proto_, sport_, dport_, flags_) \
	.dev = dev_, .dir = dir_,                                  \
	.pkt = {.ipv6 = 1, FLOW(src_, dst_, proto_, sport_, dport_), .tcp_flags = flags_}
#define OUT_A(dst_, proto_, sport_, dport_, flags_) \
	V6(0, E, POD_A6, dst_, proto_, sport_, dport_, flags_)
#define OUT_B(dst_, proto_, sport_, dport_, flags_) \
	V6(1, E, POD_B6, dst_, proto_, sport_, dport_, flags_)
#define INTO_A(src_, proto_, sport_, dport_, flags_) \
	V6(0, I, src_, POD_A6, proto_, sport_, dport_, flags_)
#define A "run-d6a"
#define B "run-d6b"

static const struct tcase egress_cases[] = {
	/* The platform's services, on their ports only. */
	{"IPv6 service 443 (SYN)", OUT_A(PROXY6, TCP, 40001, 443, SYN),
	 ALLOWED(RW_PATH_RULE, 1, A)},
	{"IPv6 service 8443", OUT_A(PROXY6, TCP, 40002, 8443, SYN), ALLOWED(RW_PATH_RULE, 1, A)},
	{"the service's next segment: no new flow", OUT_A(PROXY6, TCP, 40001, 443, ACK),
	 ALLOWED(RW_PATH_RULE, 0, A)},
	{"IPv6 service on a port it does not list", OUT_A(PROXY6, TCP, 40003, 22, SYN),
	 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	{"IPv6 UDP service, first datagram", OUT_A(TELEM6, UDP, 41000, 4317, 0),
	 ALLOWED(RW_PATH_RULE, 1, A)},
	{"IPv6 UDP service, second datagram", OUT_A(TELEM6, UDP, 41000, 4317, 0),
	 ALLOWED(RW_PATH_RULE, 0, A)},
	{"IPv6 UDP service over TCP", OUT_A(TELEM6, TCP, 41001, 4317, SYN),
	 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	{"IPv6 CIDR service (LPM)", OUT_A("2600:1f14:200::9", TCP, 40004, 443, SYN),
	 ALLOWED(RW_PATH_RULE_CIDR, 1, A)},
	{"a service in a unique local range", OUT_A(ULA_SVC6, TCP, 40005, 9000, SYN),
	 ALLOWED(RW_PATH_RULE, 1, A)},
	{"its unique local neighbour", OUT_A("fd00:1::21", TCP, 40006, 9000, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},

	/* Metadata, before any rule, DNS included. */
	{"IMDS fd00:ec2::254", OUT_A("fd00:ec2::254", TCP, 40010, 80, SYN),
	 DROPPED(RW_REASON_METADATA, A)},
	{"Pod Identity fd00:ec2::23", OUT_A("fd00:ec2::23", TCP, 40011, 80, SYN),
	 DROPPED(RW_REASON_METADATA, A)},
	{"the resolver fd00:ec2::253 on 53", OUT_A("fd00:ec2::253", UDP, 40012, 53, 0),
	 DROPPED(RW_REASON_METADATA, A)},
	{"time sync fd00:ec2::123", OUT_A("fd00:ec2::123", UDP, 40013, 123, 0),
	 DROPPED(RW_REASON_METADATA, A)},
	{"IMDS from the open run", OUT_B("fd00:ec2::254", TCP, 40014, 80, SYN),
	 DROPPED(RW_REASON_METADATA, B)},

	/* The special ranges, and the snapshot's IPv6 deny list. */
	{"unique local fd12::5", OUT_A("fd12::5", TCP, 40020, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"link-local fe80::1", OUT_A("fe80::1", TCP, 40021, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"multicast ff02::1", OUT_A("ff02::1", UDP, 40022, 5353, 0),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"multicast ff0e::5 from the open run", OUT_B("ff0e::5", UDP, 40023, 9999, 0),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"documentation 2001:db8::1", OUT_A("2001:db8::1", TCP, 40024, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"discard 100::1", OUT_A("100::1", TCP, 40025, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"loopback ::1", OUT_A("::1", TCP, 40026, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"unspecified ::", OUT_A("::", TCP, 40027, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"the deny list's 2600:1f14:dead::/48, open run",
	 OUT_B("2600:1f14:dead::5", TCP, 40028, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"unique local from the open run", OUT_B("fd00:5::5", TCP, 40029, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"IPv4-compatible ::169.254.169.254, open run", OUT_B("::a9fe:a9fe", TCP, 40120, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"IPv4-compatible ::8.8.8.8, open run", OUT_B("::808:808", TCP, 40121, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"SIIT ::ffff:0:8.8.8.8, open run", OUT_B("::ffff:0:808:808", TCP, 40122, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"benchmarking 2001:2::1, open run", OUT_B("2001:2::1", TCP, 40123, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"documentation 3fff:fff:ffff::1, open run",
	 OUT_B("3fff:fff:ffff::1", TCP, 40124, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"site-local fec0::1, open run", OUT_B("fec0::1", TCP, 40125, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"SRv6 SID 5f00:1:2::3, open run", OUT_B("5f00:1:2::3", UDP, 40126, 9999, 0),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"neighbour of the ranges 3fff:1000::1, open run",
	 OUT_B("3fff:1000::1", TCP, 40127, 443, SYN), ALLOWED(RW_PATH_OPEN, 1, B)},

	/* The node and the snapshot's pods: the pod's own /64 (the node's ENI subnet on EKS) and
	 * every pod's /128 are private, whatever the egress mode or a wide run rule says.
	 */
	{"the node's address in the pod's /64, open run", OUT_B(NODE6, TCP, 40130, 10250, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"the node's address, under a run rule for the VPC /48",
	 OUT_A(NODE6, TCP, 40131, 10250, SYN), DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"another address of the pod's /64, open run",
	 OUT_B("2600:1f14:abc:1::99", TCP, 40132, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"another address of the pod's /64, under the /48 rule",
	 OUT_A("2600:1f14:abc:1:ffff:ffff:ffff:ffff", TCP, 40133, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"the other pod (of the same /64), open run", OUT_B(POD_A6, TCP, 40134, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"a pod of another subnet, open run", OUT_B(POD_C6, TCP, 40135, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"a pod of another subnet, under the /48 rule", OUT_A(POD_C6, TCP, 40136, 10250, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"the /48 rule: a non-pod address of another subnet",
	 OUT_A("2600:1f14:abc:7::6", TCP, 40137, 80, SYN), ALLOWED(RW_PATH_RULE_CIDR, 1, A)},
	{"the next /64, open run", OUT_B("2600:1f14:abc:2::4", TCP, 40138, 443, SYN),
	 ALLOWED(RW_PATH_OPEN, 1, B)},

	/* The run's own IPv6 rules, DNS, and the egress modes. */
	{"run rule 2a00:1450::1 443", OUT_A(RULE6, TCP, 40030, 443, SYN),
	 ALLOWED(RW_PATH_RULE, 1, A)},
	{"run rule's host on another port", OUT_A(RULE6, TCP, 40031, 80, SYN),
	 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	{"run CIDR rule 2a00:1451::/32 UDP 123", OUT_A("2a00:1451::7", UDP, 40032, 123, 0),
	 ALLOWED(RW_PATH_RULE_CIDR, 1, A)},
	{"run rule is not the other run's", OUT_B(RULE6, TCP, 40033, 80, SYN),
	 ALLOWED(RW_PATH_OPEN, 1, B)},
	{"DNS over IPv6 (UDP)", OUT_A("2606:4700:4700::1111", UDP, 40034, 53, 0),
	 DROPPED(RW_REASON_DNS, A)},
	{"DNS over IPv6 (TCP)", OUT_A("2606:4700:4700::1111", TCP, 40035, 53, SYN),
	 DROPPED(RW_REASON_DNS, A)},
	{"DNS over IPv6 from the open run", OUT_B("2606:4700:4700::1111", UDP, 40036, 53, 0),
	 DROPPED(RW_REASON_DNS, B)},
	{"public IPv6, allowlist run", OUT_A(PUBLIC6, TCP, 40037, 443, SYN),
	 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	{"public IPv6, open run", OUT_B(PUBLIC6, TCP, 40038, 443, SYN),
	 ALLOWED(RW_PATH_OPEN, 1, B)},
	{"public IPv6 UDP, open run", OUT_B(PUBLIC6, UDP, 40039, 9999, 0),
	 ALLOWED(RW_PATH_OPEN, 1, B)},

	/* Forms that embed an IPv4 address leave by IPv6: what they carry may refuse them, never
	 * allow them. No nat64 prefix is declared here (test_nat64_declared()).
	 */
	{"NAT64 of 10.0.5.6 (64:ff9b::a00:506)", OUT_B("64:ff9b::a00:506", TCP, 40040, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"NAT64 of 169.254.169.254", OUT_B("64:ff9b::a9fe:a9fe", TCP, 40041, 80, SYN),
	 DROPPED(RW_REASON_METADATA, B)},
	{"v4-mapped 10.0.5.6", OUT_B("::ffff:10.0.5.6", TCP, 40042, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"v4-mapped 169.254.169.254", OUT_B("::ffff:169.254.169.254", TCP, 40043, 80, SYN),
	 DROPPED(RW_REASON_METADATA, B)},
	/* 64:ff9b:1::/48 is a special range: its translator's prefix length (RFC 8215: /48 to /96)
	 * says where the IPv4 address is, so no reading of it can be trusted.
	 */
	{"local NAT64 64:ff9b:1:a00:5:600:: is private",
	 OUT_B("64:ff9b:1:a00:5:600::", TCP, 40044, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"local NAT64: 8.8.8.8 as a /48, 169.254.169.254 as a /96",
	 OUT_B("64:ff9b:1:808:8:800:a9fe:a9fe", TCP, 40045, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"6to4 of 10.0.5.6 (2002:a00:506::1)", OUT_B("2002:a00:506::1", TCP, 40046, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"6to4 of 169.254.169.254", OUT_B("2002:a9fe:a9fe::1", TCP, 40047, 80, SYN),
	 DROPPED(RW_REASON_METADATA, B)},
	{"Teredo with a private server", OUT_B("2001:0:a00:506::f7f7:fbfb", TCP, 40048, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"Teredo with the metadata address as server",
	 OUT_B("2001:0:a9fe:a9fe::f7f7:fbfb", TCP, 40049, 443, SYN),
	 DROPPED(RW_REASON_METADATA, B)},
	{"Teredo of a private client (10.0.5.6, inverted)",
	 OUT_B("2001:0:102:304::f5ff:faf9", TCP, 40050, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	/* The egress proxy 172.20.0.10:443, a service, in each form: the IPv4 service allows the
	 * IPv4 address only; its forms would leave by IPv6 toward a relay, and it is private.
	 */
	{"6to4 of the egress proxy (2002:ac14:a::1)", OUT_A("2002:ac14:a::1", TCP, 40057, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"6to4 of the egress proxy, another address of its /48",
	 OUT_A("2002:ac14:a:ffff::5", TCP, 40058, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"Teredo whose inverted client is the egress proxy",
	 OUT_A("2001:0:4136:e378:8000:63bf:53eb:fff5", TCP, 40059, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"NAT64 of the egress proxy, no nat64 declared (64:ff9b::ac14:a)",
	 OUT_A("64:ff9b::ac14:a", TCP, 40065, 443, SYN), DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"v4-mapped egress proxy (::ffff:172.20.0.10)",
	 OUT_A("::ffff:172.20.0.10", TCP, 40054, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	/* A public IPv4 address a run rule allows (8.8.4.4:443): its forms are not allowed by it. */
	{"NAT64 of 8.8.4.4, no nat64 declared: a special range",
	 OUT_A("64:ff9b::808:404", TCP, 40051, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"6to4 of 8.8.4.4: not the IPv4 rule's", OUT_A("2002:808:404::1", TCP, 40052, 443, SYN),
	 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	{"Teredo of 8.8.4.4: not the IPv4 rule's",
	 OUT_A("2001:0:102:304::f7f7:fbfb", TCP, 40053, 443, SYN),
	 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	{"v4-mapped 8.8.4.4: a special range", OUT_A("::ffff:8.8.4.4", TCP, 40066, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
	{"6to4 of a public address, open run: a global IPv6 destination",
	 OUT_B("2002:101:101::1", TCP, 40067, 443, SYN), ALLOWED(RW_PATH_OPEN, 1, B)},
	{"NAT64 of a public address, open run, no nat64 declared",
	 OUT_B("64:ff9b::101:101", TCP, 40055, 443, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
	{"NAT64 DNS", OUT_B("64:ff9b::808:808", UDP, 40056, 53, 0), DROPPED(RW_REASON_DNS, B)},

	/* Spoofing. */
	{"the other pod's IPv6 as source", .dev = 0, .dir = E,
	 .pkt = {.ipv6 = 1, FLOW(POD_B6, PROXY6, TCP, 40060, 443)},
	 DROPPED(RW_REASON_SPOOFED_SOURCE, A)},
	{"an IPv6 source the veth does not hold", .dev = 0, .dir = E,
	 .pkt = {.ipv6 = 1, FLOW("2600:1f14:abc:1::99", PROXY6, TCP, 40061, 443)},
	 DROPPED(RW_REASON_SPOOFED_SOURCE, A)},
	{"a link-local source for TCP", .dev = 0, .dir = E,
	 .pkt = {.ipv6 = 1, FLOW("fe80::3", PROXY6, TCP, 40062, 443)},
	 DROPPED(RW_REASON_SPOOFED_SOURCE, A)},
	{"the pod's IPv6 on an unbound veth", .dev = 2, .dir = E,
	 .pkt = {.ipv6 = 1, FLOW(POD_A6, PROXY6, TCP, 40063, 443)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"IPv6 on a veth bound to IPv4 only", .dev = 3, .dir = E,
	 .pkt = {.ipv6 = 1, FLOW("2600:1f14:abc:1::9", PROXY6, TCP, 40064, 443)},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},

	/* Inbound: from the platform's peer, on its port, only. */
	{"inbound from the IPv6 peer to 4096", INTO_A(PEER6, TCP, 50000, 4096, SYN),
	 ALLOWED(RW_PATH_INBOUND, 1, A)},
	{"the pod answers the inbound connection", OUT_A(PEER6, TCP, 4096, 50000, SYNACK),
	 ALLOWED(RW_PATH_REPLY, 0, A)},
	{"inbound from the peer's neighbour", INTO_A("2600:1f14:300::13", TCP, 50001, 4096, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"inbound from the peer to a port it may not", INTO_A(PEER6, TCP, 50002, 4097, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"inbound from the internet", INTO_A(PUBLIC6, TCP, 50003, 4096, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"inbound UDP from the peer", INTO_A(PEER6, UDP, 50004, 4096, 0),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"into the pod, to an address the veth does not hold", .dev = 0, .dir = I,
	 .pkt = {.ipv6 = 1, FLOW(PEER6, "2600:1f14:abc:1::99", TCP, 50005, 4096), .tcp_flags = SYN},
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"into the pod on an unbound veth", .dev = 2, .dir = I,
	 .pkt = {.ipv6 = 1, FLOW(PEER6, POD_A6, TCP, 50006, 4096), .tcp_flags = SYN},
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},

	/* Replies of the pod's flows, while the policy still allows them. */
	{"SYN-ACK of the IPv6 service", INTO_A(PROXY6, TCP, 443, 40001, SYNACK),
	 ALLOWED(RW_PATH_REPLY, 0, A)},
	{"UDP reply of the IPv6 service", INTO_A(TELEM6, UDP, 4317, 41000, 0),
	 ALLOWED(RW_PATH_REPLY, 0, A)},
	{"no reply for a refused NAT64 flow", INTO_A("64:ff9b::808:404", TCP, 443, 40051, SYNACK),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"reply of the open run's flow", .dev = 1, .dir = I,
	 .pkt = {.ipv6 = 1, FLOW(PUBLIC6, POD_B6, TCP, 443, 40038), .tcp_flags = SYNACK},
	 ALLOWED(RW_PATH_REPLY, 0, B)},
	{"a segment of no flow of the pod", INTO_A(PUBLIC6, TCP, 443, 40037, ACK),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"a refused flow's reply", INTO_A(RULE6, TCP, 80, 40031, SYNACK),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"a bare SYN on a known flow's ports is no reply", INTO_A(PROXY6, TCP, 443, 40002, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, A)},
	{"SCTP out of the pod", OUT_A(PROXY6, 132, 40070, 443, 0),
	 DROPPED(RW_REASON_UNSUPPORTED_PROTOCOL, A)},
	{"ICMPv6 echo: by type (bpf/icmp6.h)", .dev = 0, .dir = E,
	 .pkt = {.ipv6 = 1, .src = POD_A6, .dst = PROXY6, .proto = 58, .icmp6_type = 128},
	 DROPPED(RW_REASON_UNSUPPORTED_PROTOCOL, A)},
};

/* The flow's entry in rwt0's IPv6 table: 0 when found. */
static int ct6_entry(const char *peer, __u16 pod_port, __u16 peer_port, __u8 proto,
		     struct rw_ct_value *v)
{
	int fd = rw_conntrack6_table_fd(&dp, ifindex_of[0]), err;
	struct rw_ct6_key k = {.ifindex = ifindex_of[0], .proto = proto};

	if (fd < 0)
		return fd;
	inet_pton(AF_INET6, POD_A6, k.pod_ip);
	inet_pton(AF_INET6, peer, k.peer_ip);
	k.pod_port = htons(pod_port);
	k.peer_port = htons(peer_port);
	err = bpf_map_lookup_elem(fd, &k, v) ? -errno : 0;
	close(fd);
	return err;
}

/* A flow of rwt0's pod as an older policy allowed it: stamped 0, never current, so that its
 * next packet is judged again.
 */
static void put_old_flow6(const char *peer, __u16 pod_port, __u16 peer_port)
{
	put_flow6(POD_A6, pod_port, peer, peer_port, TCP, 0, A);
}

/* Replies into the pod are judged by the egress policy of their peer: from the node or a pod of
 * the snapshot they are private-destination, even on a flow that an older policy allowed.
 */
static void test_node_replies6(void)
{
	static const struct tcase cases[] = {
		{"the node's reply into the pod, on a flow of an older policy",
		 INTO_A(NODE6, TCP, 10250, 40140, ACK), DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
		{"a reply of a pod of another subnet", INTO_A(POD_C6, TCP, 80, 40141, ACK),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, A)},
		{"a reply of the /48 rule's non-pod address",
		 INTO_A("2600:1f14:abc:7::6", TCP, 80, 40142, ACK), ALLOWED(RW_PATH_REPLY, 0, A)},
	};

	put_old_flow6(NODE6, 40140, 10250);
	put_old_flow6(POD_C6, 40141, 80);
	put_old_flow6("2600:1f14:abc:7::6", 40142, 80);
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
}

/* The IPv6 deny list holds for the forms that embed an IPv4 address too, after what their IPv4
 * address refuses (a deny entry may not sit inside a form, but a wider one holds it).
 */
static void test_deny6_embedded(unsigned long long *rev)
{
	static const struct tcase cases[] = {
		{"6to4 of 8.8.8.8 inside deny 2002::/15, open run",
		 OUT_B("2002:808:808::1", TCP, 40150, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
		{"6to4 of 169.254.169.254 inside the deny: metadata first",
		 OUT_B("2002:a9fe:a9fe::1", TCP, 40151, 80, SYN), DROPPED(RW_REASON_METADATA, B)},
		{"2003::1, native, inside the deny", OUT_B("2003::1", TCP, 40152, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
		{"Teredo of a public client outside the deny, open run",
		 OUT_B("2001:0:102:304::fefe:fefe", TCP, 40153, 443, SYN),
		 ALLOWED(RW_PATH_OPEN, 1, B)},
	};

	deny_more = ", \"2002::/15\"";
	apply6(++*rev, 0, "deny 2002::/15, which holds 6to4");
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
	deny_more = "";
	apply6(++*rev, 0, "the deny list as it was");
}

/* Under a declared nat64 prefix a NAT64 destination goes to the cluster's translator: it is
 * judged by the IPv4 policy, every part of it, and no other form is. The declaration withdrawn,
 * a NAT64 flow it allowed is cut at its next packet (its verdict was node-wide).
 */
static void test_nat64_declared(unsigned long long *rev)
{
	static const struct tcase declared[] = {
		{"nat64: NAT64 of 8.8.4.4 by the IPv4 rule",
		 OUT_A("64:ff9b::808:404", TCP, 40160, 443, SYN), ALLOWED(RW_PATH_RULE, 1, A),
		 .rule = "run-d6a allow[3] 8.8.4.4 tcp/443"},
		{"nat64: its reply", INTO_A("64:ff9b::808:404", TCP, 443, 40160, SYNACK),
		 ALLOWED(RW_PATH_REPLY, 0, A)},
		{"nat64: its next segment (cached)",
		 OUT_A("64:ff9b::808:404", TCP, 40160, 443, ACK), ALLOWED(RW_PATH_RULE, 0, A)},
		{"nat64: the same address on a port no rule names",
		 OUT_A("64:ff9b::808:404", TCP, 40161, 80, SYN),
		 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
		{"nat64: the egress proxy, an IPv4 service",
		 OUT_A("64:ff9b::ac14:a", TCP, 40162, 443, SYN), ALLOWED(RW_PATH_RULE, 1, A),
		 .rule = "egress-proxy 172.20.0.10 tcp/443"},
		{"nat64: the metadata address", OUT_A("64:ff9b::a9fe:a9fe", TCP, 40163, 80, SYN),
		 DROPPED(RW_REASON_METADATA, A),
		 .rule = "169.254.169.254 metadata in nat64 64:ff9b::/96"},
		{"nat64: 10.0.5.6, private", OUT_B("64:ff9b::a00:506", TCP, 40164, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, B),
		 .rule = "deny[0] 10.0.0.0/16 in nat64 64:ff9b::/96"},
		{"nat64: a public address, open run",
		 OUT_B("64:ff9b::101:101", TCP, 40165, 443, SYN), ALLOWED(RW_PATH_OPEN, 1, B)},
		{"nat64: DNS", OUT_B("64:ff9b::808:808", UDP, 40166, 53, 0),
		 DROPPED(RW_REASON_DNS, B)},
		{"nat64: the 6to4 form of the egress proxy is still refused",
		 OUT_A("2002:ac14:a::1", TCP, 40167, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, A),
		 .rule = "172.16.0.0/12 private in 2002::/16 6to4"},
		{"nat64: the v4-mapped egress proxy is still refused",
		 OUT_A("::ffff:172.20.0.10", TCP, 40168, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, A),
		 .rule = "172.16.0.0/12 private in ::ffff:0:0/96 IPv4-mapped"},
		{"nat64: the Teredo form of 8.8.4.4 is still not the IPv4 rule's",
		 OUT_A("2001:0:102:304::f7f7:fbfb", TCP, 40169, 443, SYN),
		 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
	};
	static const struct tcase withdrawn[] = {
		{"nat64 withdrawn: the NAT64 flow's next segment is cut",
		 OUT_A("64:ff9b::808:404", TCP, 40160, 443, ACK),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, A), .rule = "64:ff9b::/96 NAT64"},
		{"nat64 withdrawn: a new NAT64 flow to the proxy",
		 OUT_A("64:ff9b::ac14:a", TCP, 40170, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, A),
		 .rule = "172.16.0.0/12 private in 64:ff9b::/96 NAT64"},
	};

	nat64_key = "\"nat64\": \"64:ff9b::/96\", ";
	apply6(++*rev, 0, "nat64 64:ff9b::/96 declared");
	run_table(declared, sizeof(declared) / sizeof(declared[0]));
	nat64_key = "";
	apply6(++*rev, 0, "nat64 withdrawn");
	run_table(withdrawn, sizeof(withdrawn) / sizeof(withdrawn[0]));
}

/* The verdict cache: a flow's entry is in the IPv6 table, stamped with the revision it was
 * judged under; its next packet takes the fast path (counted allowed, no event).
 */
static void test_cache6(unsigned long long rev)
{
	struct rw_ct_value v;
	int ok;

	t_count++;
	ok = CHECK_EQ(ct6_entry(PROXY6, 40001, 443, TCP, &v), 0, "the service flow's IPv6 entry");
	ok &= CHECK_EQ(v.stamp, rev, "its stamp");
	ok &= CHECK_EQ(v.opened_by, E, "opened by the pod");
	ok &= CHECK_EQ(v.path, RW_PATH_RULE, "its cached path");
	ok &= CHECK_EQ(v.run_idx, run_idx_of(A), "its cached run");
	ok &= CHECK(ct6_entry(PROXY6, 40003, 22, TCP, &v) == -ENOENT, "refused flow",
		    "a refused flow has an entry");
	printf("%s %d - an IPv6 flow is in the veth's rw_conntrack6 table, its verdict cached\n",
	       ok ? "ok" : "not ok", t_count);
}

/* The time of a cached segment of each family's flow (BPF_PROG_TEST_RUN's average over
 * repeats), reported, not judged: the IPv6 one pays the tail call and a longer key.
 */
static void report_fast_path(const struct tcase *ipv6, const struct tcase *four)
{
	const struct tcase *c[2] = {four, ipv6};
	__u32 ns[2] = {0, 0};

	for (int i = 0; i < 2; i++) {
		struct __sk_buff ctx = {.ifindex = ifindex_of[c[i]->dev]};
		__u8 buf[PKT_MAX];
		size_t len = pkt_build(&c[i]->pkt, buf);
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = buf, .data_size_in = len,
			    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = 100000);

		if (bpf_prog_test_run_opts(dp.prog_fd[c[i]->dir], &opts) == 0 &&
		    (int)opts.retval == -1)
			ns[i] = opts.duration;
	}
	printf("# fast path, a cached segment of one run's flow: IPv4 %u ns, IPv6 %u ns "
	       "(BPF_PROG_TEST_RUN, 100 000 repeats, reported only)\n",
	       ns[0], ns[1]);
}

/* One apply cuts both families of a run: an IPv6 and an IPv4 flow on the fast path, then the
 * rules that allowed them removed; the next packet of each, either way, is refused.
 */
static void test_one_apply_cuts_both(unsigned long long *rev)
{
	static const struct tcase before[] = {
		{"IPv6 flow of run-d6a on its rule", OUT_A(RULE6, TCP, 40080, 443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, A)},
		{"IPv6 flow, next segment (cached)", OUT_A(RULE6, TCP, 40080, 443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, A)},
		{"IPv4 flow of run-d6a on its rule", EG(0, POD_A, "8.8.4.4", TCP, 40081, 443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, A)},
		{"IPv4 flow, next segment (cached)", EG(0, POD_A, "8.8.4.4", TCP, 40081, 443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, A)},
		{"the other run's IPv6 flow", OUT_B(PUBLIC6, TCP, 40082, 443, SYN),
		 ALLOWED(RW_PATH_OPEN, 1, B)},
	};
	static const struct tcase after[] = {
		{"after the apply: the IPv6 flow's next segment",
		 OUT_A(RULE6, TCP, 40080, 443, ACK), DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
		{"after the apply: the IPv6 flow's reply", INTO_A(RULE6, TCP, 443, 40080, ACK),
		 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
		{"after the apply: the IPv4 flow's next segment",
		 EG(0, POD_A, "8.8.4.4", TCP, 40081, 443, ACK),
		 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
		{"after the apply: the IPv4 flow's reply",
		 IN(0, "8.8.4.4", POD_A, TCP, 443, 40081, ACK),
		 DROPPED(RW_REASON_NOT_ALLOWLISTED, A)},
		{"after the apply: the other run's IPv6 flow goes on",
		 OUT_B(PUBLIC6, TCP, 40082, 443, ACK), ALLOWED(RW_PATH_OPEN, 0, B)},
	};

	run_table(before, sizeof(before) / sizeof(before[0]));
	report_fast_path(&before[1], &before[3]);
	apply6(++*rev, 1, "run-d6a's IPv6 and IPv4 rules removed");
	run_table(after, sizeof(after) / sizeof(after[0]));
}

/* A full IPv6 table refuses the sandbox's next IPv6 flow (conntrack-full); its IPv4 table, and
 * the IPv6 flows it holds, are not touched.
 */
static void test_conntrack6_full(void)
{
	static const struct tcase cases[] = {
		{"a 5th new IPv6 flow: conntrack-full", OUT_A(PROXY6, TCP, 40094, 443, SYN),
		 DROPPED(RW_REASON_CONNTRACK_FULL, A)},
		{"a new inbound IPv6 connection into the full table: conntrack-full",
		 INTO_A(PEER6, TCP, 50090, 4096, SYN), DROPPED(RW_REASON_CONNTRACK_FULL, A)},
		{"the full table's known flow goes on", OUT_A(PROXY6, TCP, 40090, 443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, A)},
		{"an IPv4 flow: its own table has room",
		 EG(0, POD_A, "172.20.0.10", TCP, 40095, 443, SYN), ALLOWED(RW_PATH_RULE, 1, A)},
	};
	char name[64];

	set_ct_share(4);
	rw_endpoint_unbind(&dp, ifindex_of[0]);
	bind_dual(0, POD_A, POD_A6);
	set_ct_share(RW_CT_PER_SANDBOX);
	for (int i = 0; i < 4; i++) {
		struct tcase c = {NULL, OUT_A(PROXY6, TCP, 40090 + i, 443, SYN),
				  ALLOWED(RW_PATH_RULE, 1, A)};

		snprintf(name, sizeof(name), "IPv6 flow %d of 4 in rwt0's IPv6 table", i + 1);
		c.name = name;
		run_case(&c);
	}
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
	rw_endpoint_unbind(&dp, ifindex_of[0]);
	bind_dual(0, POD_A, POD_A6);
}

/* The lease-expired policy judges IPv6 as it judges IPv4: services and inbound only; a cached
 * flow of a run rule is judged again and cut; the other refusals keep their reasons, an
 * embedded IPv4 address's among them.
 */
static void test_lease6(void)
{
	static const struct tcase before[] = {
		{"lease 0: an IPv6 run-rule flow opens", OUT_A("2a00:1451::8", UDP, 40100, 123, 0),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, A)},
		{"lease 0: it goes on (cached)", OUT_A("2a00:1451::8", UDP, 40100, 123, 0),
		 ALLOWED(RW_PATH_RULE_CIDR, 0, A)},
	};
	static const struct tcase expired[] = {
		{"lease expired: the IPv6 run-rule flow is cut",
		 OUT_A("2a00:1451::8", UDP, 40100, 123, 0), DROPPED(RW_REASON_LEASE_EXPIRED, A)},
		{"lease expired: an IPv6 service still opens", OUT_A(PROXY6, TCP, 40101, 443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, A)},
		{"lease expired: open mode over IPv6", OUT_B(PUBLIC6, TCP, 40102, 443, SYN),
		 DROPPED(RW_REASON_LEASE_EXPIRED, B)},
		{"lease expired: unique local stays private",
		 OUT_B("fd12::5", TCP, 40103, 443, SYN), DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
		{"lease expired: DNS over IPv6 stays dns", OUT_B(PUBLIC6, UDP, 40104, 53, 0),
		 DROPPED(RW_REASON_DNS, B)},
		{"lease expired: metadata stays metadata",
		 OUT_B("fd00:ec2::254", TCP, 40105, 80, SYN), DROPPED(RW_REASON_METADATA, B)},
		{"lease expired: 6to4 of a public address",
		 OUT_B("2002:101:101::1", TCP, 40106, 443, SYN),
		 DROPPED(RW_REASON_LEASE_EXPIRED, B)},
		{"lease expired: v4-mapped IPv4 service",
		 OUT_B("::ffff:172.20.0.10", TCP, 40107, 443, SYN),
		 DROPPED(RW_REASON_PRIVATE_DESTINATION, B)},
		{"lease expired: inbound from the IPv6 peer", INTO_A(PEER6, TCP, 50100, 4096, SYN),
		 ALLOWED(RW_PATH_INBOUND, 1, A)},
	};

	run_table(before, sizeof(before) / sizeof(before[0]));
	set_lease(1);
	run_table(expired, sizeof(expired) / sizeof(expired[0]));
	set_lease(0);
}

/* A veth bound to an IPv6 address no run names (a pod whose run has ended): the source is the
 * veth's own, but there is no run to judge it by: unknown-source, no run, as for IPv4.
 */
static void test_runless6(void)
{
	static const struct tcase cases[] = {
		{"IPv6 of a pod no run names", .dev = 3, .dir = E,
		 .pkt = {.ipv6 = 1, FLOW("2600:1f14:abc:1::9", PROXY6, TCP, 40110, 443)},
		 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
		{"another pod's IPv6 from that veth", .dev = 3, .dir = E,
		 .pkt = {.ipv6 = 1, FLOW(POD_A6, PROXY6, TCP, 40111, 443)},
		 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
		{"into that pod from the IPv6 peer", .dev = 3, .dir = I,
		 .pkt = {.ipv6 = 1,
			 FLOW(PEER6, "2600:1f14:abc:1::9", TCP, 50110, 4096),
			 .tcp_flags = SYN},
		 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	};

	bind_dual(3, POD_X, "2600:1f14:abc:1::9");
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
	rw_endpoint_unbind(&dp, ifindex_of[3]);
	bind_veth(3, POD_X);
}

void test_ipv6_policy(void)
{
	unsigned long long rev = revision_now() + 1;

	bind_dual(0, POD_A, POD_A6);
	bind_dual(1, POD_B, POD_B6);
	apply6(rev, 0, "a dual-stack snapshot");
	run_table(egress_cases, sizeof(egress_cases) / sizeof(egress_cases[0]));
	test_cache6(rev);
	test_runless6();
	test_lease6();
	test_node_replies6();
	test_deny6_embedded(&rev);
	test_nat64_declared(&rev);
	test_one_apply_cuts_both(&rev);
	test_conntrack6_full();
	bind_veth(0, POD_A);
	bind_veth(1, POD_B);
}
