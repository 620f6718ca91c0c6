// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* rulename.c (test_datapath): the rule each verdict names. The production programs judge crafted
 * packets under a dual-stack snapshot, and rw_event_rule_name(), the agent's own namer, names
 * each event: every allow path that sends one (a service, a run's exact and CIDR rule, IPv4 and
 * IPv6, open egress, an inbound rule), every metadata address and built-in range of both
 * families, the forms that carry an IPv4 address, the deny list, a pod's /64 and another run's
 * pod, DNS and the egress allowlist; then the same event once a newer revision is in force.
 * (Every other reason's fixed text is checked by run_case() in every table.)
 */
#include "dp_suite.h"
#include "icmp6_suite.h"

#define N_A  "10.1.2.3"
#define N_B  "10.1.2.4"
#define N_A6 "2600:1f14:abc:1::3" /* run-n1 (allowlist), on rwt0 */
#define N_B6 "2600:1f14:abc:1::4" /* run-n2 (open), on rwt1 */
#define N_C6 "2600:1f14:abc:7::5" /* run-n3's pod, on another node */

static const char snapshot_fmt[] =
	"{\"revision\": %llu, \"egress\": \"allowlist\", \"refusal\": \"drop\",\n"
	" \"deny\": [\"10.0.0.0/16\", \"52.94.0.0/16\", \"2600:1f14:dead::/48\"],\n"
	" \"services\": [{\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443]},\n"
	"  {\"name\": \"proxy6\", \"ip\": \"2600:1f14:100::10\", \"tcp\": [443, 8443]}],\n"
	" \"inbound\": [{\"name\": \"streaming\", \"cidr\": \"172.20.0.21/32\", \"tcp\": [4096]}],\n"
	" \"runs\": [\n"
	"  {\"id\": \"run-n1\", \"pods\": [\"" N_A "\", \"" N_A6 "\"],\n"
	"   \"allow\": [{\"ip\": \"8.8.4.4\", \"udp\": [123]},\n"
	"    {\"cidr\": \"52.95.9.0/24\", \"tcp\": [5432]}, {\"ip\": \"2a00:1450::1\", \"tcp\": [443]}]},\n"
	"  {\"id\": \"run-n2\", \"pods\": [\"" N_B "\", \"" N_B6 "\"], \"egress\": \"open\"},\n"
	"  {\"id\": \"run-n3\", \"pods\": [\"" N_C6 "\"]}]}\n";

/* A pod's packet, and one refused without an answer (a reset is never answered, and the
 * snapshot's refusal mode is drop).
 */
#define OUT(dev_, src_, dst_, proto_, sport_, dport_, flags_, six_) \
	.dev = dev_, .dir = E,                                      \
	.pkt = {.ipv6 = six_,                                       \
		.src = src_,                                        \
		.dst = dst_,                                        \
		.proto = proto_,                                    \
		.sport = sport_,                                    \
		.dport = dport_,                                    \
		.tcp_flags = flags_}
#define TO4(dst_, port_)	OUT(0, N_A, dst_, TCP, 41000, port_, RST | ACK, 0)
#define TO6(dst_, port_)	OUT(0, N_A6, dst_, TCP, 41000, port_, RST | ACK, 1)
#define REFUSED(reason_, rule_) DROPPED(reason_, "run-n1"), .rule = rule_
#define MD			RW_REASON_METADATA
#define PRIV			RW_REASON_PRIVATE_DESTINATION

static const struct tcase cases[] = {
	/* Allow paths that send an event: the rule and its text. */
	{"service", OUT(0, N_A, "172.20.0.10", TCP, 41001, 443, SYN, 0),
	 ALLOWED(RW_PATH_RULE, 1, "run-n1"), .rule = "egress-proxy 172.20.0.10 tcp/443"},
	{"run rule", OUT(0, N_A, "8.8.4.4", UDP, 41002, 123, 0, 0),
	 ALLOWED(RW_PATH_RULE, 1, "run-n1"), .rule = "run-n1 allow[0] 8.8.4.4 udp/123"},
	{"run CIDR rule", OUT(0, N_A, "52.95.9.5", TCP, 41003, 5432, SYN, 0),
	 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-n1"), .rule = "run-n1 allow[1] 52.95.9.0/24 tcp/5432"},
	{"IPv6 service", OUT(0, N_A6, "2600:1f14:100::10", TCP, 41004, 8443, SYN, 1),
	 ALLOWED(RW_PATH_RULE, 1, "run-n1"), .rule = "proxy6 2600:1f14:100::10 tcp/8443"},
	{"IPv6 run rule", OUT(0, N_A6, "2a00:1450::1", TCP, 41005, 443, SYN, 1),
	 ALLOWED(RW_PATH_RULE, 1, "run-n1"), .rule = "run-n1 allow[2] 2a00:1450::1 tcp/443"},
	{"open egress", OUT(1, N_B, "93.184.216.34", TCP, 41006, 443, SYN, 0),
	 ALLOWED(RW_PATH_OPEN, 1, "run-n2"), .rule = "egress open: a public destination"},
	{"inbound rule", .dev = 0, .dir = I,
	 .pkt = {.src = "172.20.0.21",
		 .dst = N_A,
		 .proto = TCP,
		 .sport = 50001,
		 .dport = 4096,
		 .tcp_flags = SYN},
	 ALLOWED(RW_PATH_INBOUND, 1, "run-n1"), .rule = "inbound streaming 172.20.0.21 tcp/4096"},

	/* Refusals the snapshot names. */
	{"deny over a built-in range", TO4("10.0.5.6", 443), REFUSED(PRIV, "deny[0] 10.0.0.0/16")},
	{"deny", TO4("52.94.9.5", 5432), REFUSED(PRIV, "deny[1] 52.94.0.0/16")},
	{"IPv6 deny", TO6("2600:1f14:dead::1", 443), REFUSED(PRIV, "deny[2] 2600:1f14:dead::/48")},
	{"the pod's /64", TO6("2600:1f14:abc:1::99", 443),
	 REFUSED(PRIV, "2600:1f14:abc:1::/64 of the pod")},
	{"another run's pod", TO6(N_C6, 443), REFUSED(PRIV, "pod of run-n3")},
	{"DNS", TO4("8.8.8.8", 53), REFUSED(RW_REASON_DNS, "built-in: port 53 by a rule only")},
	{"allowlist", TO4("93.184.216.34", 443),
	 REFUSED(RW_REASON_NOT_ALLOWLISTED, "egress allowlist: no rule")},

	/* Every metadata address and built-in range, IPv4. */
	{"metadata", TO4("169.254.169.254", 80), REFUSED(MD, "169.254.169.254 metadata")},
	{"metadata", TO4("169.254.170.2", 80), REFUSED(MD, "169.254.170.2 metadata")},
	{"metadata", TO4("169.254.170.23", 80), REFUSED(MD, "169.254.170.23 metadata")},
	{"metadata", TO4("169.254.169.253", 80), REFUSED(MD, "169.254.169.253 metadata")},
	{"metadata", TO4("169.254.169.123", 80), REFUSED(MD, "169.254.169.123 metadata")},
	{"metadata", TO4("100.100.100.200", 80), REFUSED(MD, "100.100.100.200 metadata")},
	{"range", TO4("0.1.2.3", 443), REFUSED(PRIV, "0.0.0.0/8 this network")},
	{"range", TO4("10.9.0.1", 443), REFUSED(PRIV, "10.0.0.0/8 private")},
	{"range", TO4("100.64.0.1", 443), REFUSED(PRIV, "100.64.0.0/10 CGNAT")},
	{"range", TO4("127.0.0.1", 443), REFUSED(PRIV, "127.0.0.0/8 loopback")},
	{"range", TO4("169.254.1.1", 443), REFUSED(PRIV, "169.254.0.0/16 link-local")},
	{"range", TO4("172.20.0.30", 443), REFUSED(PRIV, "172.16.0.0/12 private")},
	{"range", TO4("192.0.0.9", 443), REFUSED(PRIV, "192.0.0.0/24 IETF protocol")},
	{"range", TO4("192.0.2.1", 443), REFUSED(PRIV, "192.0.2.0/24 documentation")},
	{"range", TO4("192.168.1.1", 443), REFUSED(PRIV, "192.168.0.0/16 private")},
	{"range", TO4("198.18.0.1", 443), REFUSED(PRIV, "198.18.0.0/15 benchmarking")},
	{"range", TO4("198.51.100.1", 443), REFUSED(PRIV, "198.51.100.0/24 documentation")},
	{"range", TO4("203.0.113.1", 443), REFUSED(PRIV, "203.0.113.0/24 documentation")},
	{"range", TO4("239.1.2.3", 443), REFUSED(PRIV, "224.0.0.0/4 multicast")},
	{"range", TO4("240.0.0.1", 443), REFUSED(PRIV, "240.0.0.0/4 reserved")},
	{"range", TO4("255.255.255.255", 443), REFUSED(PRIV, "255.255.255.255/32 broadcast")},

	/* IPv6: metadata, every special range, and the forms that carry an IPv4 address. */
	{"metadata6", TO6("fd00:ec2::254", 80), REFUSED(MD, "fd00:ec2::254 metadata")},
	{"metadata6", TO6("fd00:ec2::23", 80), REFUSED(MD, "fd00:ec2::23 metadata")},
	{"metadata6", TO6("fd00:ec2::253", 80), REFUSED(MD, "fd00:ec2::253 metadata")},
	{"metadata6", TO6("fd00:ec2::123", 80), REFUSED(MD, "fd00:ec2::123 metadata")},
	{"range6", TO6("::5", 443), REFUSED(PRIV, "::/96 unspecified, loopback, IPv4-compatible")},
	{"range6", TO6("::ffff:0:102:304", 443), REFUSED(PRIV, "::ffff:0:0:0/96 IPv4-translated")},
	{"range6", TO6("fe80::1", 443), REFUSED(PRIV, "fe80::/10 link-local")},
	{"range6", TO6("fec0::1", 443), REFUSED(PRIV, "fec0::/10 site-local")},
	{"range6", TO6("fd12::1", 443), REFUSED(PRIV, "fc00::/7 unique local")},
	{"range6", TO6("ff0e::1", 443), REFUSED(PRIV, "ff00::/8 multicast")},
	{"range6", TO6("2001:db8::1", 443), REFUSED(PRIV, "2001:db8::/32 documentation")},
	{"range6", TO6("3fff::1", 443), REFUSED(PRIV, "3fff::/20 documentation")},
	{"range6", TO6("2001:2::1", 443), REFUSED(PRIV, "2001:2::/48 benchmarking")},
	{"range6", TO6("100::1", 443), REFUSED(PRIV, "100::/64 discard")},
	{"range6", TO6("5f00::1", 443), REFUSED(PRIV, "5f00::/16 SRv6 SIDs")},
	{"range6", TO6("64:ff9b:1::1", 443), REFUSED(PRIV, "64:ff9b:1::/48 local NAT64")},
	{"v4-mapped, public", TO6("::ffff:8.8.8.8", 443),
	 REFUSED(PRIV, "::ffff:0:0/96 IPv4-mapped")},
	{"NAT64 undeclared, public", TO6("64:ff9b::808:808", 443),
	 REFUSED(PRIV, "64:ff9b::/96 NAT64")},
	{"NAT64 of metadata", TO6("64:ff9b::a9fe:a9fe", 80),
	 REFUSED(MD, "169.254.169.254 metadata in 64:ff9b::/96 NAT64")},
	{"v4-mapped link-local", TO6("::ffff:169.254.1.1", 443),
	 REFUSED(PRIV, "169.254.0.0/16 link-local in ::ffff:0:0/96 IPv4-mapped")},
	{"6to4 of a private address", TO6("2002:c0a8:101::1", 443),
	 REFUSED(PRIV, "192.168.0.0/16 private in 2002::/16 6to4")},
	{"6to4 of a denied address", TO6("2002:345e:905::1", 443),
	 REFUSED(PRIV, "deny[1] 52.94.0.0/16 in 2002::/16 6to4")},
	{"Teredo, a private server", TO6("2001:0:a01:101::f7f7:f7f7", 443),
	 REFUSED(PRIV, "10.0.0.0/8 private in 2001::/32 Teredo server")},
	{"Teredo, a metadata client", TO6("2001:0:808:808::5601:5601", 80),
	 REFUSED(MD, "169.254.169.254 metadata in 2001::/32 Teredo")},
};

void test_rule_names(void)
{
	unsigned long long rev = revision_now() + 1;
	char json[2048], what[64], got[RW_RULE_NAME_LEN];
	struct rw_event last;
	const char *want = "runs[0].allow[1] (revision %llu, not in force)";
	char want_text[96];
	struct tcase again = cases[2];

	bind_dual(0, N_A, N_A6);
	bind_dual(1, N_B, N_B6);
	snprintf(json, sizeof(json), snapshot_fmt, rev);
	snprintf(what, sizeof(what), "rule names: revision %llu", rev);
	apply_json(json, 0, what);
	run_table(cases, sizeof(cases) / sizeof(cases[0]));

	/* The run CIDR rule's event, named once the next revision is in force: by position. */
	again.name = "run CIDR rule, another flow";
	again.pkt.sport = 41099;
	run_case(&again);
	last = events[0];
	snprintf(json, sizeof(json), snapshot_fmt, rev + 1);
	snprintf(what, sizeof(what), "rule names: revision %llu", rev + 1);
	apply_json(json, 0, what);
	rw_event_rule_name(&last, dp_policy, got, sizeof(got));
	snprintf(want_text, sizeof(want_text), want, rev);
	t_count++;
	printf("%s %d - an event of revision %llu under revision %llu: %s\n",
	       CHECK(!strcmp(got, want_text), "stale rule", "\"%s\", expected \"%s\"", got,
		     want_text)
		       ? "ok"
		       : "not ok",
	       t_count, rev, rev + 1, got);
	bind_veth(0, POD_A);
	bind_veth(1, POD_B);
}
