// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_datapath.c: the production programs judged on crafted packets through BPF_PROG_TEST_RUN,
 * with their maps filled by the same code the agent uses (policy parser, rw_apply, endpoint
 * binding). Each case checks the verdict, the reason, the allow path, the exact counters and
 * the ring buffer event. A last part sends real frames through a veth for what test_run cannot
 * build: headers outside the linear area and an out-of-band VLAN tag.
 *
 * Runs in a network namespace of its own (unshare), so the veths it makes vanish with it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "datapath.h"
#include "harness.h"
#include "log.h"
#include "pkt.h"
#include "policy.h"
#include "reasons.h"
#include "realtraffic.h"

int t_failed;
int t_count;

#define TCP	IPPROTO_TCP
#define UDP	IPPROTO_UDP
#define SYN	0x02
#define ACK	0x10
#define SYNACK	0x12
#define RST	0x04
#define E	RW_DIR_EGRESS
#define I	RW_DIR_INGRESS
#define ALLOW	RW_VERDICT_ALLOW
#define DROP	RW_VERDICT_DROP
#define NO_PATH 0xff

/* Sandboxes of the test node: rwt0 and rwt1 are bound to pods of the snapshot, rwt2 to nothing,
 * rwt3 to a pod IP no snapshot names.
 */
#define POD_A "10.1.2.3" /* run-7f3a, allowlist */
#define POD_B "10.1.2.4" /* run-9c01, open */
#define POD_X "10.1.2.9" /* bound, unknown to the policy */
static const char *const devs[] = {"rwt0", "rwt1", "rwt2", "rwt3"};
static int ifindex_of[4];

/* Seed 001's release defaults with the example's deny list, plus the shapes the table needs: a
 * CIDR service, a UDP service, an allowed /32 inside a denied range, DNS allowed on 53 for one
 * run, and the three inbound peers.
 */
static const char policy_v1[] =
	"{\n"
	"  \"revision\": 1,\n"
	"  \"egress\": \"allowlist\",\n"
	"  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"],\n"
	"  \"services\": [\n"
	"    {\"name\": \"egress-proxy\", \"ip\": \"172.20.0.10\", \"tcp\": [443, 8443, 3128]},\n"
	"    {\"name\": \"identity-broker\", \"ip\": \"172.20.0.11\", \"tcp\": [3443]},\n"
	"    {\"name\": \"app-tier\", \"ip\": \"172.20.0.12\", \"tcp\": [3000]},\n"
	"    {\"name\": \"drive-gateway\", \"ip\": \"172.20.0.13\", \"tcp\": [8080]},\n"
	"    {\"name\": \"telemetry\", \"ip\": \"172.20.0.14\", \"tcp\": [4317, 4318], \"udp\": [4317]},\n"
	"    {\"name\": \"internal-api\", \"ip\": \"10.0.0.20\", \"tcp\": [9000]},\n"
	"    {\"name\": \"model-gateway\", \"cidr\": \"172.21.0.0/24\", \"tcp\": [443]}\n"
	"  ],\n"
	"  \"inbound\": [\n"
	"    {\"name\": \"app-tier\", \"cidr\": \"172.20.0.12/32\", \"tcp\": [4096, 4098, 4999, 6085]},\n"
	"    {\"name\": \"temporal-worker\", \"cidr\": \"172.20.0.20/32\", \"tcp\": [4096, 4098, 4999, 6085]},\n"
	"    {\"name\": \"streaming\", \"cidr\": \"172.20.0.21/32\", \"tcp\": [4096, 4098, 4999, 6085]}\n"
	"  ],\n"
	"  \"runs\": [\n"
	"    {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]},\n"
	"    {\"id\": \"run-9c01\", \"pods\": [\"10.1.2.4\"], \"egress\": \"open\",\n"
	"     \"allow\": [{\"cidr\": \"52.94.9.0/24\", \"tcp\": [5432], \"udp\": []},\n"
	"               {\"ip\": \"9.9.9.9\", \"udp\": [53]}]}\n"
	"  ]\n"
	"}\n";

/* Revision 2: the egress proxy and the app tier's inbound rule are revoked, and POD_B now
 * belongs to another run.
 */
static const char policy_v2[] =
	"{\n"
	"  \"revision\": 2,\n"
	"  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"],\n"
	"  \"services\": [\n"
	"    {\"name\": \"identity-broker\", \"ip\": \"172.20.0.11\", \"tcp\": [3443]},\n"
	"    {\"name\": \"app-tier\", \"ip\": \"172.20.0.12\", \"tcp\": [3000]},\n"
	"    {\"name\": \"drive-gateway\", \"ip\": \"172.20.0.13\", \"tcp\": [8080]},\n"
	"    {\"name\": \"telemetry\", \"ip\": \"172.20.0.14\", \"tcp\": [4317, 4318], \"udp\": [4317]},\n"
	"    {\"name\": \"internal-api\", \"ip\": \"10.0.0.20\", \"tcp\": [9000]},\n"
	"    {\"name\": \"model-gateway\", \"cidr\": \"172.21.0.0/24\", \"tcp\": [443]}\n"
	"  ],\n"
	"  \"inbound\": [\n"
	"    {\"name\": \"temporal-worker\", \"cidr\": \"172.20.0.20/32\", \"tcp\": [4096, 4098, 4999, 6085]},\n"
	"    {\"name\": \"streaming\", \"cidr\": \"172.20.0.21/32\", \"tcp\": [4096, 4098, 4999, 6085]}\n"
	"  ],\n"
	"  \"runs\": [\n"
	"    {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]},\n"
	"    {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]}\n"
	"  ]\n"
	"}\n";

struct tcase {
	const char *name;
	int dev; /* index into devs[] */
	int dir;
	struct pkt_spec pkt;
	int verdict;
	int reason;
	int path;	 /* expected allow path, NO_PATH for drops */
	int event;	 /* an event is expected */
	const char *run; /* run id expected in counters and event, NULL: none */
	int answer;	 /* enum rw_answer the refusal gets (RW_ANSWER_NONE: a plain drop) */
};

#define EG(dev_, src_, dst_, proto_, sport_, dport_, flags_) \
	.dev = dev_, .dir = E,                               \
	.pkt = {.src = src_,                                 \
		.dst = dst_,                                 \
		.proto = proto_,                             \
		.sport = sport_,                             \
		.dport = dport_,                             \
		.tcp_flags = flags_}
#define IN(dev_, src_, dst_, proto_, sport_, dport_, flags_) \
	.dev = dev_, .dir = I,                               \
	.pkt = {.src = src_,                                 \
		.dst = dst_,                                 \
		.proto = proto_,                             \
		.sport = sport_,                             \
		.dport = dport_,                             \
		.tcp_flags = flags_}
#define ALLOWED(path_, event_, run_) \
	.verdict = ALLOW, .reason = RW_REASON_ALLOWED, .path = path_, .event = event_, .run = run_
#define DROPPED(reason_, run_) \
	.verdict = DROP, .reason = reason_, .path = NO_PATH, .event = 1, .run = run_
/* A refusal of the pod's own packet, answered into the pod (a redirect to the veth's peer). */
#define REFUSED_RST(reason_, run_)  DROPPED(reason_, run_), .answer = RW_ANSWER_RST
#define REFUSED_ICMP(reason_, run_) DROPPED(reason_, run_), .answer = RW_ANSWER_ICMP
/* A refused remote's segment of a known flow: it goes on into the pod as the pod's reset, and a
 * clone resets the remote (bpf/revoke.h).
 */
#define REVOKED(reason_, run_) DROPPED(reason_, run_), .answer = RW_ANSWER_RST

static const struct tcase not_ready_cases[] = {
	{"before any snapshot, egress is not-ready",
	 EG(0, POD_A, "172.20.0.10", TCP, 40000, 443, SYN), DROPPED(RW_REASON_NOT_READY, NULL)},
	{"before any snapshot, ingress is not-ready",
	 IN(0, "172.20.0.12", POD_A, TCP, 50000, 4096, SYN), DROPPED(RW_REASON_NOT_READY, NULL)},
	{"before any snapshot, ARP is not-ready", .dev = 0, .dir = E,
	 .pkt = {.arp = 1, .src = POD_A, .dst = "169.254.1.1"}, DROPPED(RW_REASON_NOT_READY, NULL)},
};

static const struct tcase v1_cases[] = {
	/* Every allow path. */
	{"egress proxy 443 (SYN)", EG(0, POD_A, "172.20.0.10", TCP, 40001, 443, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"egress proxy 8443", EG(0, POD_A, "172.20.0.10", TCP, 40002, 8443, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"egress proxy forwarding route 3128", EG(0, POD_A, "172.20.0.10", TCP, 40003, 3128, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"identity broker 3443", EG(0, POD_A, "172.20.0.11", TCP, 40004, 3443, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"app tier 3000", EG(0, POD_A, "172.20.0.12", TCP, 40005, 3000, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"drive gateway 8080", EG(0, POD_A, "172.20.0.13", TCP, 40006, 8080, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"established ACK to the egress proxy: allowed, no new-flow event",
	 EG(0, POD_A, "172.20.0.10", TCP, 40001, 443, ACK), ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
	{"UDP service, first packet of the flow: event",
	 EG(0, POD_A, "172.20.0.14", UDP, 41000, 4317, 0), ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"UDP service, second packet of the flow: no event",
	 EG(0, POD_A, "172.20.0.14", UDP, 41000, 4317, 0), ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
	{"CIDR service rule (LPM)", EG(0, POD_A, "172.21.0.9", TCP, 40007, 443, SYN),
	 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-7f3a")},
	{"allowed /32 inside the denied 10.0.0.0/16",
	 EG(0, POD_A, "10.0.0.20", TCP, 40008, 9000, SYN), ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"its denied neighbour 10.0.0.21", EG(0, POD_A, "10.0.0.21", TCP, 40009, 9000, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"open run: public host any port", EG(1, POD_B, "1.1.1.1", TCP, 40010, 8443, SYN),
	 ALLOWED(RW_PATH_OPEN, 1, "run-9c01")},
	{"open run: public host UDP", EG(1, POD_B, "1.1.1.1", UDP, 40011, 9999, 0),
	 ALLOWED(RW_PATH_OPEN, 1, "run-9c01")},
	{"open run: a flow opened by a bare ACK is a new flow: event",
	 EG(1, POD_B, "1.1.1.1", TCP, 40016, 8443, ACK), ALLOWED(RW_PATH_OPEN, 1, "run-9c01")},
	{"open run: the bare-ACK flow's next packet: no event",
	 EG(1, POD_B, "1.1.1.1", TCP, 40016, 8443, ACK), ALLOWED(RW_PATH_OPEN, 0, "run-9c01")},
	{"open run: a retransmitted SYN of a known flow: no event",
	 EG(1, POD_B, "1.1.1.1", TCP, 40016, 8443, SYN), ALLOWED(RW_PATH_OPEN, 0, "run-9c01")},
	{"run's own CIDR rule", EG(1, POD_B, "52.94.9.7", TCP, 40012, 5432, SYN),
	 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-9c01")},
	{"run's rule is not another run's", EG(0, POD_A, "52.94.9.7", TCP, 40013, 5432, SYN),
	 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")},
	{"DNS explicitly allowed on 53 for one run", EG(1, POD_B, "9.9.9.9", UDP, 40014, 53, 0),
	 ALLOWED(RW_PATH_RULE, 1, "run-9c01")},
	{"DNS to the same resolver from another run", EG(0, POD_A, "9.9.9.9", UDP, 40015, 53, 0),
	 REFUSED_ICMP(RW_REASON_DNS, "run-7f3a")},
	{"ARP from the pod's own address", .dev = 0, .dir = E,
	 .pkt = {.arp = 1, .src = POD_A, .dst = "169.254.1.1"},
	 ALLOWED(RW_PATH_ARP, 0, "run-7f3a")},
	{"ARP into the pod", .dev = 0, .dir = I,
	 .pkt = {.arp = 1, .src = "169.254.1.1", .dst = POD_A},
	 ALLOWED(RW_PATH_ARP, 0, "run-7f3a")},

	/* Replies and inbound connections. */
	{"SYN-ACK reply from the egress proxy",
	 IN(0, "172.20.0.10", POD_A, TCP, 443, 40001, SYNACK),
	 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
	{"UDP reply from the telemetry service", IN(0, "172.20.0.14", POD_A, UDP, 4317, 41000, 0),
	 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
	{"reply from the open internet to the open run",
	 IN(1, "1.1.1.1", POD_B, TCP, 8443, 40010, SYNACK), ALLOWED(RW_PATH_REPLY, 0, "run-9c01")},
	{"inbound from the app tier to 4096", IN(0, "172.20.0.12", POD_A, TCP, 50000, 4096, SYN),
	 ALLOWED(RW_PATH_INBOUND, 1, "run-7f3a")},
	{"inbound from the Temporal worker to 4999",
	 IN(0, "172.20.0.20", POD_A, TCP, 50001, 4999, SYN),
	 ALLOWED(RW_PATH_INBOUND, 1, "run-7f3a")},
	{"inbound from the streaming service to 6085",
	 IN(0, "172.20.0.21", POD_A, TCP, 50002, 6085, SYN),
	 ALLOWED(RW_PATH_INBOUND, 1, "run-7f3a")},
	{"the pod's SYN-ACK to the app tier", EG(0, POD_A, "172.20.0.12", TCP, 4096, 50000, SYNACK),
	 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
	{"a bare SYN on the inbound flow's ports is a request, not a reply",
	 EG(0, POD_A, "172.20.0.12", TCP, 4096, 50000, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"a request posing as a reply (ACK from 4096, no flow)",
	 EG(0, POD_A, "8.8.4.4", TCP, 4096, 50000, ACK),
	 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")},
	{"posing as a reply to the app tier on another port",
	 EG(0, POD_A, "172.20.0.12", TCP, 4096, 50009, ACK),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"inbound from the app tier to port 22", IN(0, "172.20.0.12", POD_A, TCP, 50003, 22, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
	{"inbound from the internet to 4096", IN(0, "8.8.8.8", POD_A, TCP, 50004, 4096, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
	{"inbound UDP from the app tier to 4096", IN(0, "172.20.0.12", POD_A, UDP, 50005, 4096, 0),
	 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
	{"a stateless ACK into the pod (no flow)",
	 IN(0, "172.20.0.10", POD_A, TCP, 443, 40099, ACK),
	 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
	{"inbound to an address that is not the veth's pod",
	 IN(0, "172.20.0.12", "10.1.2.99", TCP, 50006, 4096, SYN),
	 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
	{"inbound ICMP", .dev = 0, .dir = I,
	 .pkt = {.src = "172.20.0.12", .dst = POD_A, .proto = 1},
	 DROPPED(RW_REASON_UNSUPPORTED_PROTOCOL, "run-7f3a")},
	{"inbound on an unbound veth", IN(2, "172.20.0.12", "10.1.2.77", TCP, 50007, 4096, SYN),
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"inbound IPv6", .dev = 0, .dir = I,
	 .pkt = {.ethertype = 0x86dd, .src = "0.0.0.0", .dst = "0.0.0.0", .payload = 40},
	 DROPPED(RW_REASON_UNSUPPORTED_L2, "run-7f3a")},

	/* Refusals, one or more per reason. */
	{"a stateless ACK to a denied host", EG(0, POD_A, "8.8.8.8", TCP, 40020, 443, ACK),
	 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")},
	{"public internet in allowlist mode", EG(0, POD_A, "93.184.216.34", TCP, 40021, 443, SYN),
	 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")},
	{"connectors service 8080", EG(0, POD_A, "172.20.0.30", TCP, 40022, 8080, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"another port of an allowed host", EG(0, POD_A, "172.20.0.10", TCP, 40023, 22, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"UDP to a TCP-only service (QUIC)", EG(0, POD_A, "172.20.0.10", UDP, 40024, 443, 0),
	 REFUSED_ICMP(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"instance metadata 169.254.169.254", EG(0, POD_A, "169.254.169.254", TCP, 40025, 80, SYN),
	 REFUSED_RST(RW_REASON_METADATA, "run-7f3a")},
	{"ECS task metadata 169.254.170.2", EG(0, POD_A, "169.254.170.2", TCP, 40026, 80, SYN),
	 REFUSED_RST(RW_REASON_METADATA, "run-7f3a")},
	{"EKS pod identity 169.254.170.23", EG(0, POD_A, "169.254.170.23", TCP, 40027, 80, SYN),
	 REFUSED_RST(RW_REASON_METADATA, "run-7f3a")},
	{"metadata from the open run", EG(1, POD_B, "169.254.169.254", TCP, 40028, 80, SYN),
	 REFUSED_RST(RW_REASON_METADATA, "run-9c01")},
	{"metadata over UDP on 53 is metadata first",
	 EG(0, POD_A, "169.254.169.253", UDP, 40029, 53, 0),
	 REFUSED_ICMP(RW_REASON_METADATA, "run-7f3a")},
	{"DNS over UDP to cluster DNS", EG(0, POD_A, "172.20.0.53", UDP, 40030, 53, 0),
	 REFUSED_ICMP(RW_REASON_DNS, "run-7f3a")},
	{"DNS over TCP to a public resolver", EG(0, POD_A, "8.8.8.8", TCP, 40031, 53, SYN),
	 REFUSED_RST(RW_REASON_DNS, "run-7f3a")},
	{"DNS over UDP from the open run", EG(1, POD_B, "8.8.8.8", UDP, 40032, 53, 0),
	 REFUSED_ICMP(RW_REASON_DNS, "run-9c01")},
	{"127.0.0.1 sent out of the pod (no answer from a loopback source)",
	 EG(0, POD_A, "127.0.0.1", TCP, 40033, 80, SYN),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"open run to another pod", EG(1, POD_B, POD_A, TCP, 40034, 22, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
	{"open run to a configured deny CIDR (100.64.0.0/16)",
	 EG(1, POD_B, "100.64.3.3", TCP, 40035, 443, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
	{"open run to multicast (never answered)", EG(1, POD_B, "224.0.0.251", UDP, 5353, 5353, 0),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
	{"open run to broadcast (never answered)", EG(1, POD_B, "255.255.255.255", UDP, 68, 67, 0),
	 DROPPED(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
	{"open run to TEST-NET-3", EG(1, POD_B, "203.0.113.5", TCP, 40036, 443, SYN),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
	{"SCTP to an allowed IP and port", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A, .dst = "172.20.0.10", .proto = 132, .sport = 40037, .dport = 443},
	 REFUSED_ICMP(RW_REASON_UNSUPPORTED_PROTOCOL, "run-7f3a")},
	{"UDP-Lite to an allowed IP and port", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A, .dst = "172.20.0.14", .proto = 136, .sport = 40038, .dport = 4317},
	 REFUSED_ICMP(RW_REASON_UNSUPPORTED_PROTOCOL, "run-7f3a")},
	{"ICMP echo", .dev = 0, .dir = E, .pkt = {.src = POD_A, .dst = "172.20.0.10", .proto = 1},
	 REFUSED_ICMP(RW_REASON_UNSUPPORTED_PROTOCOL, "run-7f3a")},
	{"GRE", .dev = 1, .dir = E, .pkt = {.src = POD_B, .dst = "1.1.1.1", .proto = 47},
	 REFUSED_ICMP(RW_REASON_UNSUPPORTED_PROTOCOL, "run-9c01")},
	{"IPIP", .dev = 1, .dir = E, .pkt = {.src = POD_B, .dst = "1.1.1.1", .proto = 4},
	 REFUSED_ICMP(RW_REASON_UNSUPPORTED_PROTOCOL, "run-9c01")},
	{"spoofed source (the other sandbox's IP)",
	 EG(0, POD_B, "172.20.0.10", TCP, 40039, 443, SYN),
	 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
	/* Addresses no pod can have (rw_pod_addr_refusal()): never bound, so never a veth's own. */
	{"source 0.0.0.0 from a bound veth", EG(0, "0.0.0.0", "172.20.0.10", UDP, 68, 67, 0),
	 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
	{"source 255.255.255.255 from a bound veth",
	 EG(0, "255.255.255.255", "172.20.0.10", TCP, 40039, 443, SYN),
	 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
	{"source 127.0.0.1 from a bound veth",
	 EG(0, "127.0.0.1", "172.20.0.10", TCP, 40039, 443, SYN),
	 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
	{"spoofed ARP sender", .dev = 0, .dir = E,
	 .pkt = {.arp = 1, .src = POD_B, .dst = "169.254.1.1"},
	 DROPPED(RW_REASON_SPOOFED_SOURCE, "run-7f3a")},
	{"unbound veth", EG(2, "10.1.2.77", "172.20.0.10", TCP, 40040, 443, SYN),
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"veth bound to a pod no run owns", EG(3, POD_X, "172.20.0.10", TCP, 40041, 443, SYN),
	 DROPPED(RW_REASON_UNKNOWN_SOURCE, NULL)},
	{"IPv4 with IHL 6 and a loose source route", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40042,
		 .dport = 443,
		 .ihl = 6},
	 DROPPED(RW_REASON_IP_OPTIONS, "run-7f3a")},
	{"a tiny first fragment", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = UDP,
		 .sport = 40043,
		 .dport = 4317,
		 .frag = 0x2000},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"a later fragment whose payload looks like port 443", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40044,
		 .dport = 443,
		 .frag = 185},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"VLAN-tagged packet to an allowed service", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40045,
		 .dport = 443,
		 .vlan = 1},
	 DROPPED(RW_REASON_UNSUPPORTED_L2, "run-7f3a")},
	{"IPv6", .dev = 0, .dir = E,
	 .pkt = {.ethertype = 0x86dd, .src = "0.0.0.0", .dst = "0.0.0.0", .payload = 40},
	 DROPPED(RW_REASON_UNSUPPORTED_L2, "run-7f3a")},
	{"IHL 4", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40046,
		 .dport = 443,
		 .ihl = 4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"IP version 6 under an IPv4 ethertype", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40047,
		 .dport = 443,
		 .ip_version = 6},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"tot_len longer than the frame", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40048,
		 .dport = 443,
		 .tot_len_delta = 20},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a truncated TCP header (tot_len leaves 10 bytes)", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40049,
		 .dport = 443,
		 .tot_len_delta = -10,
		 .truncate = 10},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a frame cut inside the TCP header", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40050,
		 .dport = 443,
		 .truncate = 12},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"TCP data offset 4", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.10",
		 .proto = TCP,
		 .sport = 40051,
		 .dport = 443,
		 .tcp_doff = 4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"UDP length below 8", .dev = 0, .dir = E,
	 .pkt = {.src = POD_A,
		 .dst = "172.20.0.14",
		 .proto = UDP,
		 .sport = 40052,
		 .dport = 4317,
		 .udp_len_delta = -4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"ARP with a 8-byte hardware address", .dev = 0, .dir = E,
	 .pkt = {.arp = 1, .src = POD_A, .dst = "169.254.1.1", .arp_hlen = 8},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a malformed packet into the pod", .dev = 0, .dir = I,
	 .pkt = {.src = "172.20.0.12",
		 .dst = POD_A,
		 .proto = TCP,
		 .sport = 50008,
		 .dport = 4096,
		 .tcp_doff = 3},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
};

static const struct tcase v2_cases[] = {
	{"revoked: the next ACK of an open flow to the egress proxy",
	 EG(0, POD_A, "172.20.0.10", TCP, 40001, 443, ACK),
	 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"revoked: the egress proxy's next reply",
	 IN(0, "172.20.0.10", POD_A, TCP, 443, 40001, ACK),
	 REVOKED(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	{"revoked inbound rule: the pod's next reply to the app tier",
	 EG(0, POD_A, "172.20.0.12", TCP, 4096, 50000, ACK),
	 REFUSED_RST(RW_REASON_INBOUND_DENIED, "run-7f3a")},
	{"kept: the identity broker", EG(0, POD_A, "172.20.0.11", TCP, 40060, 3443, SYN),
	 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	{"kept: the Temporal worker's flow", EG(0, POD_A, "172.20.0.20", TCP, 4999, 50001, ACK),
	 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
	{"moved pod: its old run's open flow is gone",
	 IN(1, "1.1.1.1", POD_B, TCP, 8443, 40010, ACK),
	 DROPPED(RW_REASON_INBOUND_DENIED, "run-b77e")},
	{"moved pod: judged by its new run (allowlist)",
	 EG(1, POD_B, "1.1.1.1", TCP, 40061, 8443, SYN),
	 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-b77e")},
};

/* ---- the kernel side under test ---- */

static struct rw_datapath dp;
static struct ring_buffer *ring;
static struct rw_event events[64];
static int n_events;
static long long events_overflow;

static int on_event(void *ctx, void *data, size_t len)
{
	if (len < sizeof(struct rw_event))
		return 0;
	if (n_events < (int)(sizeof(events) / sizeof(events[0])))
		memcpy(&events[n_events++], data, sizeof(struct rw_event));
	else
		events_overflow++;
	return 0;
}

static void drain_events(void)
{
	ring_buffer__consume(ring);
	n_events = 0;
	events_overflow = 0;
}

static __u32 run_idx_of(const char *run)
{
	struct rw_pod pod;
	__be32 ip;

	if (!run)
		return 0;
	/* The test's runs each have one pod: find the run through the live pods map. */
	for (int i = 0; i < 4; i++) {
		const char *ips[] = {POD_A, POD_B, POD_X, "0.0.0.0"};

		inet_pton(AF_INET, ips[i], &ip);
		if (rw_live_pod(&dp, ip, &pod) == 0 && !strcmp(pod.run_id, run))
			return pod.run_idx;
	}
	return 0;
}

static int test_run(int dir, int ifindex, const void *pkt, size_t len, __u32 repeat, int *retval)
{
	struct __sk_buff ctx = {.ifindex = ifindex};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = repeat);
	int err;

	err = bpf_prog_test_run_opts(dp.prog_fd[dir], &opts);
	*retval = (int)opts.retval;
	return err;
}

static const char *ret_name(int ret)
{
	return ret == -1 ? "TCX_NEXT" : ret == 2 ? "TCX_DROP" : ret == 7 ? "TC_ACT_REDIRECT" : "?";
}

static void run_case(const struct tcase *c)
{
	struct rw_counters node0, node1, run0, run1;
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(&c->pkt, buf);
	__u32 run_idx = run_idx_of(c->run);
	int retval, err, failed_before = t_failed;
	/* TCX_NEXT, TC_ACT_REDIRECT (the answer, to the veth's peer), TCX_DROP; a reset made
	 * of a remote's segment is on its way into the pod (TCX_NEXT)
	 */
	int want_ret = c->verdict == ALLOW ? -1 : c->answer && c->dir == I ? -1 : c->answer ? 7 : 2;

	t_count++;
	drain_events();
	rw_counters_read(&dp, 0, &node0);
	if (run_idx)
		rw_counters_read(&dp, run_idx, &run0);

	err = test_run(c->dir, ifindex_of[c->dev], buf, len, 1, &retval);
	CHECK_EQ(err, 0, "test_run");
	CHECK(retval == want_ret, "verdict", "returned %d (%s), expected %d (%s)", retval,
	      ret_name(retval), want_ret, ret_name(want_ret));

	/* Counters: exactly one packet under (direction, reason), node-wide and for the run. */
	rw_counters_read(&dp, 0, &node1);
	CHECK(node1.packets[c->dir][c->reason] - node0.packets[c->dir][c->reason] == 1,
	      "node counter", "packets[%s][%s] grew by %llu, expected 1",
	      c->dir ? "ingress" : "egress", rw_reason_name(c->reason),
	      (unsigned long long)(node1.packets[c->dir][c->reason] -
				   node0.packets[c->dir][c->reason]));
	CHECK(node1.bytes[c->dir][c->reason] - node0.bytes[c->dir][c->reason] == len,
	      "byte counter", "bytes grew by %llu, expected %zu",
	      (unsigned long long)(node1.bytes[c->dir][c->reason] - node0.bytes[c->dir][c->reason]),
	      len);
	for (int a = 1; a < RW_ANSWER_COUNT; a++)
		CHECK(node1.answers[a] - node0.answers[a] == (a == c->answer), "answer counter",
		      "answers[%s] grew by %llu", rw_answer_name(a),
		      (unsigned long long)(node1.answers[a] - node0.answers[a]));
	if (c->run) {
		CHECK(run_idx != 0, "run", "run %s not found in the live pods map", c->run);
		rw_counters_read(&dp, run_idx, &run1);
		if (c->answer)
			CHECK_EQ(run1.answers[c->answer] - run0.answers[c->answer], 1,
				 "run's answer counter");
		CHECK(run1.packets[c->dir][c->reason] - run0.packets[c->dir][c->reason] == 1,
		      "run counter", "%s packets[%s] grew by %llu, expected 1", c->run,
		      rw_reason_name(c->reason),
		      (unsigned long long)(run1.packets[c->dir][c->reason] -
					   run0.packets[c->dir][c->reason]));
	}

	/* The event: one per drop and per new allowed flow, saying what the counters say. */
	ring_buffer__consume(ring);
	CHECK(n_events == c->event, "events", "%d events, expected %d", n_events, c->event);
	if (n_events == 1 && c->event) {
		const struct rw_event *ev = &events[0];
		struct in_addr want_src, want_dst;

		inet_pton(AF_INET, c->pkt.src, &want_src);
		inet_pton(AF_INET, c->pkt.dst, &want_dst);
		CHECK(ev->reason == c->reason, "event reason", "%s, expected %s",
		      rw_reason_name(ev->reason), rw_reason_name(c->reason));
		CHECK_EQ(ev->verdict, c->verdict, "event verdict");
		CHECK(ev->answer == c->answer, "event answer", "%s, expected %s",
		      rw_answer_name(ev->answer), rw_answer_name(c->answer));
		CHECK_EQ(ev->dir, c->dir, "event direction");
		CHECK_EQ(ntohs(ev->ethertype),
			 c->pkt.vlan	    ? 0x8100
			 : c->pkt.arp	    ? 0x0806
			 : c->pkt.ethertype ? c->pkt.ethertype
					    : 0x0800,
			 "event ethertype");
		CHECK_EQ(ev->ifindex, ifindex_of[c->dev], "event ifindex");
		CHECK(!strcmp(ev->run_id, c->run ? c->run : ""), "event run",
		      "\"%s\", expected \"%s\"", ev->run_id, c->run ? c->run : "");
		CHECK(!c->run || ev->run_gen > 0, "event generation", "%u", ev->run_gen);
		if (c->reason != RW_REASON_UNSUPPORTED_L2 && c->reason != RW_REASON_MALFORMED &&
		    c->reason != RW_REASON_IP_OPTIONS && c->reason != RW_REASON_FRAGMENT) {
			CHECK(ev->saddr == want_src.s_addr && ev->daddr == want_dst.s_addr,
			      "event addresses", "%08x -> %08x", ntohl(ev->saddr),
			      ntohl(ev->daddr));
			CHECK_EQ(ev->proto, c->pkt.arp ? 0 : c->pkt.proto, "event protocol");
			if (c->pkt.proto == TCP || c->pkt.proto == UDP)
				CHECK(ntohs(ev->sport) == c->pkt.sport &&
					      ntohs(ev->dport) == c->pkt.dport,
				      "event ports", "%u -> %u", ntohs(ev->sport),
				      ntohs(ev->dport));
		}
		if (c->path != NO_PATH)
			CHECK(ev->path == c->path, "event path", "%s, expected %s",
			      rw_path_name(ev->path), rw_path_name(c->path));
		if (c->run)
			CHECK(ev->revision > 0, "event revision", "%llu",
			      (unsigned long long)ev->revision);
	}
	printf("%s %d - %s: %s%s%s%s%s\n", t_failed == failed_before ? "ok" : "not ok", t_count,
	       c->name, c->verdict == ALLOW ? "allowed" : rw_reason_name(c->reason),
	       c->path != NO_PATH && c->verdict == ALLOW ? " via " : "",
	       c->path != NO_PATH && c->verdict == ALLOW ? rw_path_name(c->path) : "",
	       c->answer ? ", answered: " : "", c->answer ? rw_answer_name(c->answer) : "");
}

static void run_table(const struct tcase *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_case(&cases[i]);
}

static void apply_json(const char *json, int expect_err, const char *what)
{
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	static struct rw_policy prev;
	static int have_prev;
	char err[512];
	int ret;

	ret = rw_policy_parse(json, strlen(json), what, &p, &perr);
	if (ret)
		FATAL("%s: %s", what, perr.text);
	ret = rw_apply(&dp, have_prev ? &prev : NULL, &p, &res, err, sizeof(err));
	t_count++;
	if (expect_err) {
		CHECK(ret == expect_err, what, "rw_apply returned %d (%s), expected %d", ret, err,
		      expect_err);
		printf("%s %d - %s: refused: %s\n", ret == expect_err ? "ok" : "not ok", t_count,
		       what, err);
		rw_policy_free(&p);
		return;
	}
	if (!CHECK(ret == 0, what, "rw_apply: %s", err))
		FATAL("cannot go on without the snapshot");
	printf("ok %d - %s: revision %llu live in slot %u: %u runs, %u pods, %u entries; "
	       "built in %.2f ms, flipped in %.2f ms, %u flows flushed\n",
	       t_count, what, (unsigned long long)res.revision, res.slot, res.runs, res.pods,
	       res.entries, res.build_ms, res.flip_ms, res.flows_flushed);
	if (have_prev)
		rw_policy_free(&prev);
	prev = p;
	have_prev = 1;
}

static void bind_veth(int dev, const char *ip)
{
	struct in_addr a;

	inet_pton(AF_INET, ip, &a);
	if (rw_endpoint_bind(&dp, ifindex_of[dev], a.s_addr))
		FATAL("binding %s to %s: %s", devs[dev], ip, strerror(errno));
}

static void make_veths(void)
{
	char cmd[256];

	if (unshare(CLONE_NEWNET))
		FATAL("unshare(CLONE_NEWNET): %s (the suite needs root)", strerror(errno));
	if (system("ip link set lo up"))
		FATAL("ip link set lo up failed");
	for (int i = 0; i < 4; i++) {
		snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %sp", devs[i],
			 devs[i]);
		if (system(cmd))
			FATAL("%s failed", cmd);
		ifindex_of[i] = if_nametoindex(devs[i]);
		if (!ifindex_of[i])
			FATAL("%s has no ifindex", devs[i]);
	}
}

/* A rule that names a metadata address never gets into a snapshot (the parser refuses it), so
 * write one straight into the live map: the kernel must still refuse the address.
 */
static void test_metadata_beats_rules(void)
{
	struct rw_allow_key k = {.scope = 0, .dport = htons(80), .proto = TCP};
	struct rw_rule r = {.rule_id = 0xdead};
	struct tcase c = {"metadata is refused even with a rule for it",
			  EG(0, POD_A, "169.254.169.254", TCP, 40070, 80, SYN),
			  REFUSED_RST(RW_REASON_METADATA, "run-7f3a")};
	int fd = rw_live_inner_fd(&dp, RW_M_ALLOW_EXACT);

	inet_pton(AF_INET, "169.254.169.254", &k.daddr);
	if (fd < 0 || bpf_map_update_elem(fd, &k, &r, BPF_ANY))
		FATAL("writing a metadata rule into the live map: %s", strerror(errno));
	run_case(&c);
	bpf_map_delete_elem(fd, &k);
	close(fd);
}

/* The flow's entry in its sandbox's table (0), or -1. */
static int ct_entry(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port,
		    __u8 proto, struct rw_ct_value *v, struct rw_ct_key *kout)
{
	struct rw_ct_key k = {.ifindex = ifindex_of[dev],
			      .pod_port = htons(pod_port),
			      .peer_port = htons(peer_port),
			      .proto = proto};
	int fd = rw_conntrack_table_fd(&dp, ifindex_of[dev]), err;

	inet_pton(AF_INET, pod, &k.pod_ip);
	inet_pton(AF_INET, peer, &k.peer_ip);
	if (fd < 0)
		return -1;
	err = bpf_map_lookup_elem(fd, &k, v) ? -1 : 0;
	if (kout)
		*kout = k;
	close(fd);
	return err;
}

/* The fast path: a known flow's verdict is cached in its entry, stamped with the revision, and
 * reused without a policy lookup: with its rule taken out of the live map behind the
 * datapath's back (no apply, same revision), the flow still passes both ways, with its rule and
 * path, and counted exactly (run_case checks the counters). A new flow to the same service is
 * judged and refused. The rule is put back after. (After the next apply the cached flows are
 * judged again: the v2 table's "revoked" cases run on flows cached here.)
 */
static void test_verdict_cache(void)
{
	struct rw_allow_key k = {.scope = 0, .dport = htons(3443), .proto = TCP};
	static const struct tcase opening[] = {
		{"cache: a flow to the identity broker opens",
		 EG(0, POD_A, "172.20.0.11", TCP, 40110, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	};
	static const struct tcase cached[] = {
		{"cache: with its rule gone from the live map, the flow's next packet is allowed from its cached verdict",
		 EG(0, POD_A, "172.20.0.11", TCP, 40110, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"cache: and its reply, as a reply",
		 IN(0, "172.20.0.11", POD_A, TCP, 3443, 40110, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"cache: a new flow to the same service is judged: refused",
		 EG(0, POD_A, "172.20.0.11", TCP, 40111, 3443, SYN),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
		{"cache: a bare ACK of an unknown flow to it is judged: refused",
		 EG(0, POD_A, "172.20.0.11", TCP, 40112, 3443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	};
	struct rw_config cfg;
	struct rw_ct_value v;
	struct rw_rule r;
	int fd, ok;

	run_table(opening, 1);
	rw_config_read(&dp, &cfg);
	t_count++;
	ok = CHECK(ct_entry(0, POD_A, 40110, "172.20.0.11", 3443, TCP, &v, NULL) == 0, "entry",
		   "the flow has no conntrack entry");
	ok &= CHECK_EQ(v.stamp, RW_STATE_REVISION(cfg.state), "stamp: the revision in force");
	ok &= CHECK_EQ(v.path, RW_PATH_RULE, "cached path");
	ok &= CHECK(v.rule_id == RW_RULE_ID(RW_RULE_KIND_SERVICE, 1, 0), "cached rule", "%#x",
		    v.rule_id);
	printf("%s %d - cache: a new flow's entry carries its verdict, stamped with revision %llu\n",
	       ok ? "ok" : "not ok", t_count, (unsigned long long)v.stamp);

	inet_pton(AF_INET, "172.20.0.11", &k.daddr);
	fd = rw_live_inner_fd(&dp, RW_M_ALLOW_EXACT);
	if (fd < 0 || bpf_map_lookup_elem(fd, &k, &r) || bpf_map_delete_elem(fd, &k))
		FATAL("taking the identity broker's rule out of the live map: %s", strerror(errno));
	run_table(cached, sizeof(cached) / sizeof(cached[0]));
	if (bpf_map_update_elem(fd, &k, &r, BPF_NOEXIST))
		FATAL("putting the identity broker's rule back: %s", strerror(errno));
	close(fd);
}

/* A stamp that is not the revision in force (an entry left by an earlier agent's policy, or by
 * a newer one rolled back) is never trusted: the flow is judged in full, in both directions.
 */
static void test_stale_stamp(void)
{
	static const struct tcase cases[] = {
		{"stale stamp (older revision), allowed verdict: judged again, refused",
		 EG(0, POD_A, "172.20.0.10", TCP, 40120, 443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
		{"stale stamp (newer revision), allowed verdict: judged again, refused",
		 IN(0, "172.20.0.10", POD_A, TCP, 443, 40121, ACK),
		 REVOKED(RW_REASON_PRIVATE_DESTINATION, "run-7f3a")},
	};
	struct rw_config cfg;
	struct rw_ct_key k;
	__u64 rev;
	int fd;

	rw_config_read(&dp, &cfg);
	rev = RW_STATE_REVISION(cfg.state);
	fd = rw_conntrack_table_fd(&dp, ifindex_of[0]);
	if (fd < 0)
		FATAL("rwt0 has no conntrack table");
	for (int i = 0; i < 2; i++) {
		struct rw_ct_value v = {.opened_by = E,
					.path = RW_PATH_RULE,
					.rule_id = RW_RULE_ID(RW_RULE_KIND_SERVICE, 0, 0),
					.stamp = i ? rev + 1 : rev - 1};
		struct rw_ct_value dummy;

		ct_entry(0, POD_A, 40120 + i, "172.20.0.10", 443, TCP, &dummy, &k);
		if (bpf_map_update_elem(fd, &k, &v, BPF_ANY))
			FATAL("writing a stale entry: %s", strerror(errno));
	}
	close(fd);
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
}

/* A run rule naming a private address never gets into a snapshot (the parser refuses it), so
 * write one straight into the live map, exact and CIDR: the kernel checks run rules after the
 * private ranges and the deny list, and still refuses the address (defence in depth).
 */
static void test_run_rules_after_ranges(void)
{
	struct tcase c[] = {
		{"a run's exact rule for a private host (written past the parser) opens nothing",
		 EG(1, POD_B, "10.0.5.6", TCP, 40130, 22, SYN),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
		{"a run's 0.0.0.0/2 rule (written past the parser) opens nothing private",
		 EG(1, POD_B, "10.0.5.7", TCP, 40131, 22, SYN),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
		{"... nor CGNAT (100.64.0.0/10, also in the deny list)",
		 EG(1, POD_B, "100.64.3.4", TCP, 40132, 22, SYN),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-9c01")},
		{"... but a public host on it is the run's own rule",
		 EG(1, POD_B, "52.1.2.3", TCP, 40133, 22, SYN),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-9c01")},
	};
	__u32 run_idx = run_idx_of("run-9c01");
	struct rw_allow_key k = {.scope = run_idx, .dport = htons(22), .proto = TCP};
	struct rw_allow_lpm_key lk = {.prefixlen = RW_ALLOW_LPM_FIXED_BITS + 2,
				      .scope = run_idx,
				      .dport = htons(22),
				      .proto = TCP};
	struct rw_rule r = {.rule_id = RW_RULE_ID(RW_RULE_KIND_RUN, 1, 7)};
	int fd = rw_live_inner_fd(&dp, RW_M_ALLOW_EXACT);
	int lfd = rw_live_inner_fd(&dp, RW_M_ALLOW_CIDR);

	inet_pton(AF_INET, "10.0.5.6", &k.daddr);
	lk.daddr = 0;
	if (fd < 0 || lfd < 0 || bpf_map_update_elem(fd, &k, &r, BPF_ANY) ||
	    bpf_map_update_elem(lfd, &lk, &r, BPF_ANY))
		FATAL("writing private run rules into the live maps: %s", strerror(errno));
	run_table(c, sizeof(c) / sizeof(c[0]));
	bpf_map_delete_elem(fd, &k);
	bpf_map_delete_elem(lfd, &lk);
	close(fd);
	close(lfd);
}

/* A run whose policy did not change keeps its generation; a new run starts at the revision. */
static void test_generations(void)
{
	struct rw_pod a = {}, b = {};
	__be32 ip;
	int ok;

	inet_pton(AF_INET, POD_A, &ip);
	rw_live_pod(&dp, ip, &a);
	inet_pton(AF_INET, POD_B, &ip);
	rw_live_pod(&dp, ip, &b);
	t_count++;
	ok = CHECK_EQ(a.run_gen, 1, "unchanged run-7f3a keeps generation 1");
	ok &= CHECK_EQ(b.run_gen, 2, "new run-b77e gets generation 2");
	ok &= CHECK(a.run_idx != b.run_idx && b.run_idx != 0, "run indexes", "%u and %u", a.run_idx,
		    b.run_idx);
	printf("%s %d - generations: run-7f3a gen %u idx %u, run-b77e gen %u idx %u\n",
	       ok ? "ok" : "not ok", t_count, a.run_gen, a.run_idx, b.run_gen, b.run_idx);
}

static void set_budget(__u32 rate, __u32 burst)
{
	struct rw_config cfg;

	if (rw_config_read(&dp, &cfg))
		FATAL("reading config");
	cfg.event_rate = rate;
	cfg.event_burst = burst;
	if (rw_config_write(&dp, &cfg))
		FATAL("writing config");
}

/* One flooding sandbox spends its own budget, not the others'; suppressed events are counted
 * and the counters stay exact. Drops and new flows have separate buckets.
 */
static void test_event_budget(void)
{
	struct pkt_spec flood = {.src = POD_A,
				 .dst = "8.8.8.8",
				 .proto = TCP,
				 .sport = 40080,
				 .dport = 443,
				 .tcp_flags =
					 RST | ACK}; /* repeatable: a reset is never answered */
	struct pkt_spec other = {
		.src = POD_B, .dst = "8.8.8.8", .proto = UDP, .sport = 40081, .dport = 53};
	struct pkt_spec flow = {.src = POD_A,
				.dst = "172.20.0.11",
				.proto = TCP,
				.sport = 40082,
				.dport = 3443,
				.tcp_flags = SYN};
	struct rw_counters before, after;
	__u8 buf[PKT_MAX];
	size_t len;
	int retval, ok;

	set_budget(1, 3);
	drain_events();
	rw_counters_read(&dp, 0, &before);
	len = pkt_build(&flood, buf);
	test_run(E, ifindex_of[0], buf, len, 10, &retval);
	len = pkt_build(&other, buf);
	test_run(E, ifindex_of[1], buf, len, 1, &retval);
	len = pkt_build(&flow, buf);
	test_run(E, ifindex_of[0], buf, len, 1, &retval);
	ring_buffer__consume(ring);
	rw_counters_read(&dp, 0, &after);
	set_budget(0, 0);

	t_count++;
	ok = CHECK_EQ(after.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			      before.packets[E][RW_REASON_NOT_ALLOWLISTED],
		      10, "flood counted");
	ok &= CHECK_EQ(n_events, 5,
		       "events: 3 of the flood's budget, the other sandbox's one, "
		       "the flooding sandbox's new flow");
	ok &= CHECK_EQ(after.events_suppressed - before.events_suppressed, 7, "suppressed events");
	ok &= CHECK(n_events >= 4 && events[3].ifindex == (__u32)ifindex_of[1], "other sandbox",
		    "its event was not delivered");
	ok &= CHECK(n_events == 5 && events[4].verdict == ALLOW &&
			    events[4].ifindex == (__u32)ifindex_of[0],
		    "new flow",
		    "the flooding sandbox's new flow was not reported (its own bucket)");
	printf("%s %d - event budget: 10 drops from one sandbox at 1/s burst 3 give %d events, "
	       "%llu suppressed; the other sandbox and the flooder's new flow still report\n",
	       ok ? "ok" : "not ok", t_count, n_events,
	       (unsigned long long)(after.events_suppressed - before.events_suppressed));
}

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* ---- answers to refusals ---- */

static void set_answer_budget(__u32 rate, __u32 burst)
{
	struct rw_config cfg;

	if (rw_config_read(&dp, &cfg))
		FATAL("reading config");
	cfg.answer_rate = rate;
	cfg.answer_burst = burst;
	if (rw_config_write(&dp, &cfg))
		FATAL("writing config");
}

static int test_run_out(int dir, int ifindex, const void *pkt, size_t len, __u8 *out,
			__u32 *out_len, int *retval)
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

static void put16be(__u8 *p, __u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32be(__u8 *p, __u32 v)
{
	put16be(p, v >> 16);
	put16be(p + 2, v);
}

/* The TCP checksum field's value for the segment at tcp (RFC 793 3.1 pseudo-header). */
static __u16 tcp_csum(const __u8 *ip, const __u8 *tcp, size_t tcp_len)
{
	__u8 ph[12] = {0};

	memcpy(ph, ip + 12, 8);
	ph[9] = IPPROTO_TCP;
	put16be(ph + 10, tcp_len);
	return ~pkt_csum_sum(tcp, tcp_len, pkt_csum_sum(ph, 12, 0)) & 0xffff;
}

static const __u8 pod_mac[6] = {0x02, 0, 0, 0, 0, 0x01}, gw_mac[6] = {0x02, 0, 0, 0, 0, 0xfe};

/* The frame head every answer has: to the pod's MAC from the gateway's, IPv4 from the refused
 * destination to the pod.
 */
static void want_head(const struct pkt_spec *s, __u8 *w, __u8 tos, __u16 tot_len, __u16 frag,
		      __u8 proto)
{
	struct in_addr src, dst;

	inet_pton(AF_INET, s->src, &src);
	inet_pton(AF_INET, s->dst, &dst);
	memcpy(w, pod_mac, 6);
	memcpy(w + 6, gw_mac, 6);
	put16be(w + 12, 0x0800);
	w[14] = 0x45;
	w[15] = tos;
	put16be(w + 16, tot_len);
	put16be(w + 20, frag);
	w[22] = 64;
	w[23] = proto;
	memcpy(w + 26, &dst, 4);
	memcpy(w + 30, &src, 4);
	put16be(w + 24, ~pkt_csum_sum(w + 14, 20, 0) & 0xffff);
}

/* The reset RFC 793 3.4 makes of the segment s: built here byte by byte from the spec. */
static size_t want_rst(const struct pkt_spec *s, __u32 seq, __u32 ack, __u8 flags, __u8 *w)
{
	memset(w, 0, PKT_MAX);
	want_head(s, w, 0, 40, 0x4000, IPPROTO_TCP);
	put16be(w + 34, s->dport);
	put16be(w + 36, s->sport);
	put32be(w + 38, seq);
	put32be(w + 42, ack);
	w[46] = 5 << 4;
	w[47] = flags;
	put16be(w + 50, tcp_csum(w + 14, w + 34, 20));
	return 54;
}

/* ICMP destination unreachable, code 13, quoting the first `quote` bytes of the refused IP
 * datagram in.
 */
static size_t want_icmp(const struct pkt_spec *s, const __u8 *in, size_t quote, __u8 *w)
{
	memset(w, 0, PKT_MAX);
	want_head(s, w, 0xc0, 20 + 8 + quote, 0, IPPROTO_ICMP);
	w[34] = 3;
	w[35] = 13;
	memcpy(w + 42, in + 14, quote);
	put16be(w + 36, ~pkt_csum_sum(w + 34, 8 + quote, 0) & 0xffff);
	return 42 + quote;
}

/* The checksums of an answer, summed over what the program wrote, not compared with ours. */
static int answer_sums_ok(const __u8 *f, size_t len)
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

struct acase {
	const char *name;
	int dev;
	struct pkt_spec pkt;
	int reason;
	int answer;	/* enum rw_answer */
	__u32 seq, ack; /* RW_ANSWER_RST: the reset's numbers */
	__u8 flags;
	size_t quote; /* RW_ANSWER_ICMP: bytes of the datagram quoted */
};

static void run_answer_case(const struct acase *c)
{
	__u8 in[PKT_MAX], out[PKT_MAX], want[PKT_MAX];
	size_t len = pkt_build(&c->pkt, in), want_len = len;
	struct rw_counters n0, n1;
	int retval, err, failed_before = t_failed;
	__u32 out_len = 0;

	if (c->answer == RW_ANSWER_RST)
		want_len = want_rst(&c->pkt, c->seq, c->ack, c->flags, want);
	else if (c->answer == RW_ANSWER_ICMP)
		want_len = want_icmp(&c->pkt, in, c->quote, want);
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
	CHECK_EQ(n1.packets[E][c->reason] - n0.packets[E][c->reason], 1, "reason counter");
	CHECK_EQ(n1.bytes[E][c->reason] - n0.bytes[E][c->reason], len,
		 "bytes counted are the refused packet's");
	if (c->answer)
		CHECK_EQ(n1.answers[c->answer] - n0.answers[c->answer], 1, "answer counter");
	CHECK(n_events == 1 && events[0].answer == c->answer && events[0].reason == c->reason,
	      "event", "%d events, answer %s", n_events,
	      n_events ? rw_answer_name(events[0].answer) : "-");
	CHECK(out_len == want_len && !memcmp(out, want, want_len), "output packet",
	      "%u bytes, expected %zu%s", out_len, want_len,
	      out_len == want_len ? " (contents differ)" : "");
	if (c->answer)
		CHECK(answer_sums_ok(out, out_len), "checksums", "an IP, TCP or ICMP sum is wrong");
	if (t_failed != failed_before) {
		printf("  # got: ");
		for (__u32 i = 0; i < out_len; i++)
			printf("%02x", out[i]);
		printf("\n  # want:");
		for (size_t i = 0; i < want_len; i++)
			printf("%02x", want[i]);
		printf("\n");
	}
	printf("%s %d - answer: %s: %s, %s (%u bytes out)\n",
	       t_failed == failed_before ? "ok" : "not ok", t_count, c->name,
	       rw_reason_name(c->reason), rw_answer_name(c->answer), out_len);
}

#define SEQ0 0x01020000u /* pkt_build()'s sequence number */

static const struct acase answer_cases[] = {
	{"a refused SYN: RST|ACK, seq 0, ack SEG.SEQ+1",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40100,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused SYN with 5 bytes of data (TFO) and options: ack SEG.SEQ+1+5",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40101,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .tcp_doff = 8,
	  .payload = 5},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 6,
	 RST | ACK,
	 0},
	{"a refused segment with ACK (a revoked flow's next): RST, seq SEG.ACK",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40102,
	  .dport = 443,
	  .tcp_flags = ACK | 0x08,
	  .tcp_ack = 0xa1b2c3d4,
	  .payload = 100},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0xa1b2c3d4,
	 0,
	 RST,
	 0},
	{"a refused bare FIN: RST|ACK, ack SEG.SEQ+1",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40103,
	  .dport = 443,
	  .tcp_flags = 0x01},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused SYN from and to port 0: the reset names ports 0",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 0,
	  .dport = 0,
	  .tcp_flags = SYN},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused SYN to the metadata address",
	 1,
	 {.src = POD_B,
	  .dst = "169.254.169.254",
	  .proto = TCP,
	  .sport = 40104,
	  .dport = 80,
	  .tcp_flags = SYN},
	 RW_REASON_METADATA,
	 RW_ANSWER_RST,
	 0,
	 SEQ0 + 1,
	 RST | ACK,
	 0},
	{"a refused reset is never answered",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40105,
	  .dport = 443,
	  .tcp_flags = RST | ACK},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"refused UDP (DNS) with 40 bytes: ICMP 3/13 quoting header + 8 bytes",
	 0,
	 {.src = POD_A, .dst = "8.8.8.8", .proto = UDP, .sport = 40106, .dport = 53, .payload = 40},
	 RW_REASON_DNS,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"refused UDP from port 0 to port 0",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = UDP, .sport = 0, .dport = 0},
	 RW_REASON_NOT_ALLOWLISTED,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"refused GRE: ICMP 3/13",
	 1,
	 {.src = POD_B, .dst = "1.1.1.1", .proto = 47, .payload = 12},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"refused IP with 4 bytes of payload: the quote is the whole datagram",
	 1,
	 {.src = POD_B, .dst = "1.1.1.1", .proto = 47, .tot_len_delta = -4, .truncate = 4},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_ICMP,
	 .quote = 24},
	{"refused ICMP echo request: ICMP 3/13",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = 1, .sport = 0x0800, .payload = 56},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_ICMP,
	 .quote = 28},
	{"a refused ICMP error (port unreachable) is never answered",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = 1, .sport = 0x0303, .payload = 28},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a refused ICMP of an unknown type is never answered",
	 0,
	 {.src = POD_A, .dst = "93.184.216.34", .proto = 1, .sport = 0x2a00, .payload = 8},
	 RW_REASON_UNSUPPORTED_PROTOCOL,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	/* No answer before the source is proven, nor where the answer's source could not be. */
	{"spoofed source: no answer",
	 0,
	 {.src = POD_B,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40107,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_SPOOFED_SOURCE,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"unbound veth: no answer",
	 2,
	 {.src = "10.1.2.77",
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40108,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_UNKNOWN_SOURCE,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a pod no run owns: no answer",
	 3,
	 {.src = POD_X, .dst = "93.184.216.34", .proto = UDP, .sport = 40109, .dport = 53},
	 RW_REASON_UNKNOWN_SOURCE,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"IP options: no answer (refused before the source is proven)",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40110,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .ihl = 6},
	 RW_REASON_IP_OPTIONS,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"an 802.1Q tag in the header: no answer (unsupported-l2)",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40111,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .vlan = 1},
	 RW_REASON_UNSUPPORTED_L2,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a truncated TCP header: no answer (malformed)",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = TCP,
	  .sport = 40112,
	  .dport = 443,
	  .tcp_flags = SYN,
	  .tot_len_delta = -10,
	  .truncate = 10},
	 RW_REASON_MALFORMED,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"a fragment: no answer",
	 0,
	 {.src = POD_A,
	  .dst = "93.184.216.34",
	  .proto = UDP,
	  .sport = 40113,
	  .dport = 53,
	  .frag = 0x2000},
	 RW_REASON_FRAGMENT,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"to 0.0.0.0: no answer (it would come from a martian source)",
	 0,
	 {.src = POD_A,
	  .dst = "0.0.0.1",
	  .proto = TCP,
	  .sport = 40114,
	  .dport = 443,
	  .tcp_flags = SYN},
	 RW_REASON_PRIVATE_DESTINATION,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
	{"to multicast: no answer",
	 1,
	 {.src = POD_B, .dst = "239.1.2.3", .proto = UDP, .sport = 40115, .dport = 5000},
	 RW_REASON_PRIVATE_DESTINATION,
	 RW_ANSWER_NONE,
	 0,
	 0,
	 0,
	 0},
};

static void test_answers(void)
{
	for (size_t i = 0; i < sizeof(answer_cases) / sizeof(answer_cases[0]); i++)
		run_answer_case(&answer_cases[i]);
}

/* Before any snapshot nothing is proven: a refusal is a plain drop. */
static void test_answer_not_ready(void)
{
	static const struct acase c = {"not ready: no answer",
				       0,
				       {.src = POD_A,
					.dst = "93.184.216.34",
					.proto = TCP,
					.sport = 40116,
					.dport = 443,
					.tcp_flags = SYN},
				       RW_REASON_NOT_READY,
				       RW_ANSWER_NONE,
				       0,
				       0,
				       0,
				       0};

	run_answer_case(&c);
}

/* The answer budget: a sandbox's refused SYNs past its burst are plain drops, counted as
 * such, while another sandbox's answers still go out. Each SYN is its own test run: a repeated
 * run would judge the reset the first one made of the packet.
 */
static void test_answer_budget(void)
{
	struct pkt_spec syn = {.src = POD_A,
			       .dst = "93.184.216.34",
			       .proto = TCP,
			       .sport = 40120,
			       .dport = 443,
			       .tcp_flags = SYN};
	struct pkt_spec other = syn;
	const int n = 40, burst = 5;
	struct rw_counters n0, n1, r0, r1;
	__u32 run_a = run_idx_of("run-7f3a"), out_len;
	__u8 buf[PKT_MAX], out[PKT_MAX];
	int retval, redirected = 0, dropped = 0, other_ret, ok;
	__u64 t0, t1;

	other.src = POD_B;
	set_answer_budget(1, burst);
	rw_counters_read(&dp, 0, &n0);
	rw_counters_read(&dp, run_a, &r0);
	t0 = mono_ns();
	for (int i = 0; i < n; i++) {
		syn.sport = 40120 + i;
		test_run_out(E, ifindex_of[0], buf, pkt_build(&syn, buf), out, &out_len, &retval);
		redirected += retval == 7;
		dropped += retval == 2;
	}
	t1 = mono_ns();
	test_run_out(E, ifindex_of[1], buf, pkt_build(&other, buf), out, &out_len, &other_ret);
	rw_counters_read(&dp, 0, &n1);
	rw_counters_read(&dp, run_a, &r1);
	set_answer_budget(0, 0);
	drain_events();

	t_count++;
	/* At 1/s the loop's ticks add at most its duration in seconds, plus one. */
	ok = CHECK(redirected >= burst && redirected <= burst + 1 + (int)((t1 - t0) / 1000000000),
		   "answers within the budget", "%d answered", redirected);
	ok &= CHECK_EQ(redirected + dropped, n, "every SYN answered or dropped");
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_RST] - n0.answers[RW_ANSWER_RST], redirected + 1,
		       "node's rst answers (the other sandbox's too)");
	ok &= CHECK_EQ(n1.answers[RW_ANSWER_BUDGET] - n0.answers[RW_ANSWER_BUDGET], dropped,
		       "node's over-budget refusals");
	ok &= CHECK_EQ(r1.answers[RW_ANSWER_BUDGET] - r0.answers[RW_ANSWER_BUDGET], dropped,
		       "run's over-budget refusals");
	ok &= CHECK_EQ(n1.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			       n0.packets[E][RW_REASON_NOT_ALLOWLISTED],
		       n + 1, "every refusal counted under its reason");
	ok &= CHECK_EQ(other_ret, 7, "the other sandbox is still answered");
	printf("%s %d - answer budget 1/s burst %d: %d refused SYNs from one sandbox give %d "
	       "resets and %d plain drops in %.1f ms; the other sandbox is answered\n",
	       ok ? "ok" : "not ok", t_count, burst, n, redirected, dropped, (t1 - t0) / 1e6);
}

/* "refusal": "drop" node-wide with a run's "answer", then the other way round. */
static const char refusal_policy[] = "{\"revision\": %u, %s\"runs\": [\n"
				     "  {\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]%s},\n"
				     "  {\"id\": \"run-b77e\", \"pods\": [\"10.1.2.4\"]%s}]}\n";

static void test_refusal_modes(void)
{
	struct acase a = {"",
			  0,
			  {.src = POD_A,
			   .dst = "93.184.216.34",
			   .proto = TCP,
			   .sport = 40200,
			   .dport = 443,
			   .tcp_flags = SYN},
			  RW_REASON_NOT_ALLOWLISTED,
			  RW_ANSWER_NONE,
			  0,
			  0,
			  0,
			  0};
	struct acase b = {
		"",
		1,
		{.src = POD_B, .dst = "93.184.216.34", .proto = UDP, .sport = 40201, .dport = 443},
		RW_REASON_NOT_ALLOWLISTED,
		RW_ANSWER_ICMP,
		.quote = 28};
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

/* ---- revoke: a refused segment of a known flow resets both ends ---- */

/* A bare reset <SEQ=seq><CTL=RST> from saddr:sport to daddr:dport, byte by byte. */
static size_t want_bare_rst(const __u8 *dmac, const __u8 *smac, const char *saddr,
			    const char *daddr, __u16 sport, __u16 dport, __u32 seq, __u8 *w)
{
	struct in_addr src, dst;

	inet_pton(AF_INET, saddr, &src);
	inet_pton(AF_INET, daddr, &dst);
	memset(w, 0, PKT_MAX);
	memcpy(w, dmac, 6);
	memcpy(w + 6, smac, 6);
	put16be(w + 12, 0x0800);
	w[14] = 0x45;
	put16be(w + 16, 40);
	put16be(w + 20, 0x4000);
	w[22] = 64;
	w[23] = IPPROTO_TCP;
	memcpy(w + 26, &src, 4);
	memcpy(w + 30, &dst, 4);
	put16be(w + 24, ~pkt_csum_sum(w + 14, 20, 0) & 0xffff);
	put16be(w + 34, sport);
	put16be(w + 36, dport);
	put32be(w + 38, seq);
	w[46] = 5 << 4;
	w[47] = RST;
	put16be(w + 50, tcp_csum(w + 14, w + 34, 20));
	return 54;
}

static int wait_scale(void)
{
	const char *s = getenv("RW_WAIT_SCALE");
	int n = s ? atoi(s) : 1;

	return n > 0 ? n : 1;
}

/* A packet socket on the host veth: it sees what enters the veth's ingress, the remote's reset
 * a revoke injects there, before any tc hook.
 */
static int revoke_tap_open(int dev)
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

static void revoke_tap_close(int fd, int dev)
{
	char cmd[128];

	close(fd);
	snprintf(cmd, sizeof(cmd), "ip link set %s down", devs[dev]);
	if (system(cmd))
		FATAL("%s failed", cmd);
}

/* The next TCP frame entering the veth within a generous deadline; 0 when none came. */
static size_t revoke_tap_next(int fd, __u8 *f, int wait_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct sockaddr_ll from;
	socklen_t fl = sizeof(from);
	ssize_t n;

	while (poll(&p, 1, wait_ms) == 1) {
		n = recvfrom(fd, f, PKT_MAX, 0, (struct sockaddr *)&from, &fl);
		if (n >= 54 && from.sll_pkttype != PACKET_OUTGOING && f[12] == 0x08 && f[13] == 0 &&
		    f[23] == IPPROTO_TCP)
			return n;
	}
	return 0;
}

/* Notes the flow as the pod's own, opened under an earlier verdict (stamp 0: judged again). */
static void revoke_ct_note(int dev, const char *pod, __u16 pod_port, const char *peer,
			   __u16 peer_port, const char *run)
{
	struct rw_ct_key k = {.ifindex = ifindex_of[dev],
			      .pod_port = htons(pod_port),
			      .peer_port = htons(peer_port),
			      .proto = IPPROTO_TCP};
	struct rw_ct_value v = {.opened_by = RW_DIR_EGRESS, .run_idx = run_idx_of(run)};
	int fd = rw_conntrack_table_fd(&dp, ifindex_of[dev]);

	inet_pton(AF_INET, pod, &k.pod_ip);
	inet_pton(AF_INET, peer, &k.peer_ip);
	v.created_ns = mono_ns();
	v.seen_ns = v.created_ns;
	if (fd < 0 || bpf_map_update_elem(fd, &k, &v, BPF_ANY))
		FATAL("noting a flow in %s's table: %s", devs[dev], strerror(errno));
	close(fd);
}

struct rcase {
	const char *name;
	int dir;
	struct pkt_spec pkt; /* a segment on veth 0 (POD_A, run-7f3a) */
	int tracked;	     /* its flow is in the sandbox's table */
	int ret;	     /* the program's verdict */
	/* The pod's reset (the packet out of the run) and the remote's (entering the veth); a
	 * zero seq with no reset expected: the packet is dropped as it came, nothing is sent.
	 */
	int resets;
	__u32 pod_seq, remote_seq;
};

static void run_revoke_case(const struct rcase *c, int tap)
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
	struct rw_counters n0, n1;
	int retval, err, failed_before = t_failed;
	__u32 out_len = 0;

	if (c->tracked)
		revoke_ct_note(0, pod, pod_port, remote, remote_port, "run-7f3a");
	if (c->resets) {
		pod_len = want_bare_rst(pod_dmac, pod_smac, remote, pod, remote_port, pod_port,
					c->pod_seq, want_pod);
		remote_len = want_bare_rst(pod_smac, pod_dmac, pod, remote, pod_port, remote_port,
					   c->remote_seq, want_remote);
	} else {
		memcpy(want_pod, in, len);
	}
	t_count++;
	drain_events();
	rw_counters_read(&dp, 0, &n0);
	err = test_run_out(c->dir, ifindex_of[0], in, len, out, &out_len, &retval);
	rw_counters_read(&dp, 0, &n1);
	ring_buffer__consume(ring);
	got_len = revoke_tap_next(tap, got, (c->resets ? 2000 : 200) * wait_scale());
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
		CHECK(answer_sums_ok(out, out_len), "pod reset checksums", "a sum is wrong");
		CHECK(got_len && answer_sums_ok(got, got_len), "remote reset checksums",
		      "a sum is wrong");
	}
	if (t_failed != failed_before) {
		printf("  # out: ");
		for (__u32 i = 0; i < out_len; i++)
			printf("%02x", out[i]);
		printf("\n  # tap: ");
		for (size_t i = 0; i < got_len; i++)
			printf("%02x", got[i]);
		printf("\n");
	}
	printf("%s %d - revoke: %s\n", t_failed == failed_before ? "ok" : "not ok", t_count,
	       c->name);
}

#define RV_REMOTE "93.184.216.34" /* not allowlisted for run-7f3a under policy_v1 */

static const struct rcase revoke_cases[] = {
	{"the pod's segment of a known flow: pod RST seq SEG.ACK, remote RST seq SEG.SEQ",
	 E,
	 {.src = POD_A,
	  .dst = RV_REMOTE,
	  .proto = TCP,
	  .sport = 40300,
	  .dport = 443,
	  .tcp_flags = ACK | 0x08,
	  .tcp_ack = 0xa1b2c3d4,
	  .payload = 100},
	 1,
	 7,
	 1,
	 0xa1b2c3d4,
	 SEQ0},
	{"the remote's segment of a known flow: pod RST seq SEG.SEQ, remote RST seq SEG.ACK",
	 I,
	 {.src = RV_REMOTE,
	  .dst = POD_A,
	  .proto = TCP,
	  .sport = 443,
	  .dport = 40301,
	  .tcp_flags = ACK,
	  .tcp_ack = 0x0badf00d,
	  .payload = 50},
	 1,
	 -1,
	 1,
	 SEQ0,
	 0x0badf00d},
	{"the remote's bare ACK with options of a known flow: both reset",
	 I,
	 {.src = RV_REMOTE,
	  .dst = POD_A,
	  .proto = TCP,
	  .sport = 443,
	  .dport = 40302,
	  .tcp_flags = ACK,
	  .tcp_doff = 8,
	  .tcp_ack = 0x77777777},
	 1,
	 -1,
	 1,
	 SEQ0,
	 0x77777777},
	{"a remote's segment of a flow not in the table: dropped, no reset either way",
	 I,
	 {.src = RV_REMOTE,
	  .dst = POD_A,
	  .proto = TCP,
	  .sport = 443,
	  .dport = 40303,
	  .tcp_flags = ACK,
	  .tcp_ack = 0x12345678},
	 0,
	 2,
	 0,
	 0,
	 0},
	{"a known flow's refused reset from the remote: never answered",
	 I,
	 {.src = RV_REMOTE,
	  .dst = POD_A,
	  .proto = TCP,
	  .sport = 443,
	  .dport = 40304,
	  .tcp_flags = RST | ACK,
	  .tcp_ack = 0x12345678},
	 1,
	 2,
	 0,
	 0,
	 0},
};

/* The mark of a revoke's own reset lets a packet past rw_egress only (where a pod cannot set
 * it), cleared; on rw_ingress, where the node may have marked it, it means nothing.
 */
static void test_revoke_mark(void)
{
	struct pkt_spec eg = {.src = POD_A,
			      .dst = RV_REMOTE,
			      .proto = TCP,
			      .sport = 40310,
			      .dport = 443,
			      .tcp_flags = SYN};
	struct pkt_spec in = {.src = RV_REMOTE,
			      .dst = POD_A,
			      .proto = TCP,
			      .sport = 443,
			      .dport = 40311,
			      .tcp_flags = SYN};
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

static void test_revoke(void)
{
	int tap = revoke_tap_open(0);

	for (size_t i = 0; i < sizeof(revoke_cases) / sizeof(revoke_cases[0]); i++)
		run_revoke_case(&revoke_cases[i], tap);
	test_revoke_mark();
	revoke_tap_close(tap, 0);
}

/* "refusal": "drop" (run-7f3a's, after test_refusal_modes): a known flow's refused segments
 * are dropped in silence, both ways.
 */
static void test_revoke_drop_mode(void)
{
	struct rcase eg = revoke_cases[0], in = revoke_cases[1];
	int tap = revoke_tap_open(0);

	eg.name = "\"drop\": the pod's segment of a known flow is a plain drop";
	eg.pkt.sport = 40320;
	eg.ret = 2;
	eg.resets = 0;
	in.name = "\"drop\": the remote's segment of a known flow is a plain drop";
	in.pkt.dport = 40321;
	in.ret = 2;
	in.resets = 0;
	run_revoke_case(&eg, tap);
	run_revoke_case(&in, tap);
	revoke_tap_close(tap, 0);
}

struct flood_arg {
	int cpu;
	__u32 repeat;
	int rounds;
	const __u8 *pkt;
	size_t len;
	int err;
};

static void *flood_thread(void *p)
{
	struct flood_arg *f = p;
	cpu_set_t set;
	int retval;

	CPU_ZERO(&set);
	CPU_SET(f->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
		f->err = -EINVAL;
	for (int i = 0; i < f->rounds && !f->err; i++)
		f->err = test_run(E, ifindex_of[0], f->pkt, f->len, f->repeat, &retval);
	return NULL;
}

static __u64 coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* The budget is exact: N denied packets from one sandbox, as fast as the kernel runs them (well
 * under 5 µs apart), on one CPU and then on two at once. On one CPU the count is exact, with no
 * timing in the bounds: the programs read the coarse clock (bpf_ktime_get_coarse_ns(), the
 * clock user space reads as CLOCK_MONOTONIC_COARSE), a full bucket gives `burst` events at the
 * first packet, then one per tick of 1/rate s while packets keep coming, so the flood gets
 * burst + ticks(last packet) - ticks(first packet) events exactly, and those two clock reads
 * are bracketed by our own reads of the same clock around the first and the last packet. The
 * burst covers a minute of ticks, so no stall of this process (preemption, a stolen vCPU, a
 * late tick) can fill the bucket and lose refill; what could lose refill is rounding, which is
 * what this proves absent. A bucket another CPU moved ahead is never read as an underflow.
 */
static void test_event_budget_exact(void)
{
	const __u32 rate = 200, burst = 5, n = 200000, burst1 = rate * 60, edge = 20000;
	struct pkt_spec flood = {.src = POD_A,
				 .dst = "8.8.8.8",
				 .proto = TCP,
				 .sport = 40083,
				 .dport = 443,
				 .tcp_flags =
					 RST | ACK}; /* repeatable: a reset is never answered */
	struct rw_counters before, after;
	struct rw_budget b = {};
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(&flood, buf);
	__u32 key = ifindex_of[0];
	long long sent, lo, hi, pkts;
	double wall_s;
	__u64 t0, t1, c0_before, c0_after, c1_before, c1_after;
	int ok, err, rounds, retval, ncpu = libbpf_num_possible_cpus();

	/* One CPU: rounds of n packets until a second has passed, between a first and a last
	 * round of edge packets with the clock read around each. Every round is dense (more
	 * packets than the ticks the burst holds), so whatever refill a pause between rounds left
	 * in the bucket, the next round takes it all; the edge rounds are short, so the bounds
	 * are tight.
	 */
	set_budget(rate, burst1);
	bpf_map_delete_elem(dp.map_fd[RW_M_EVENT_BUDGET], &key);
	drain_events();
	rw_counters_read(&dp, 0, &before);
	t0 = mono_ns();
	c0_before = coarse_ns();
	err = test_run(E, ifindex_of[0], buf, len, edge, &retval);
	c0_after = coarse_ns();
	rounds = 0;
	while (!err && mono_ns() - t0 < 1000000000ULL && rounds < 1000) {
		err = test_run(E, ifindex_of[0], buf, len, n, &retval);
		rounds++;
	}
	c1_before = coarse_ns();
	err = err ? err : test_run(E, ifindex_of[0], buf, len, edge, &retval);
	c1_after = coarse_ns();
	t1 = mono_ns();
	rw_counters_read(&dp, 0, &after);
	wall_s = (t1 - t0) / 1e9;
	pkts = (long long)n * rounds + 2 * edge;
	sent = after.events_sent - before.events_sent;
	lo = burst1 +
	     (long long)(RW_BUDGET_TICKS(c1_before, rate) - RW_BUDGET_TICKS(c0_after, rate));
	hi = burst1 +
	     (long long)(RW_BUDGET_TICKS(c1_after, rate) - RW_BUDGET_TICKS(c0_before, rate));
	t_count++;
	ok = CHECK_EQ(err, 0, "test_run");
	ok &= CHECK(wall_s < burst1 / rate, "no refill capped",
		    "the flood took %.1f s, more than the %u s of ticks the burst holds", wall_s,
		    burst1 / rate);
	ok &= CHECK(sent >= lo && sent <= hi, "one CPU",
		    "%lld events, expected %lld..%lld (%.1f ms wall)", sent, lo, hi, wall_s * 1e3);
	ok &= CHECK(sent < pkts, "suppressed", "all %lld drops sent an event", pkts);
	ok &= CHECK_EQ(after.events_sent + after.events_suppressed - before.events_sent -
			       before.events_suppressed,
		       pkts, "every drop's event sent or suppressed");
	printf("%s %d - exact budget, one CPU: %lld drops over %.0f ms at %u/s burst %u: %lld "
	       "events (bounds %lld..%lld from the coarse clock around the first and last rounds)\n",
	       ok ? "ok" : "not ok", t_count, pkts, wall_s * 1e3, rate, burst1, sent, lo, hi);
	set_budget(rate, burst);

	/* Another CPU has moved the bucket ahead of our clock: nothing to take, no underflow. */
	drain_events();
	rw_counters_read(&dp, 0, &before);
	b.tat[RW_BUDGET_DROP] = RW_BUDGET_TICKS(mono_ns(), rate) + burst + 1;
	bpf_map_update_elem(dp.map_fd[RW_M_EVENT_BUDGET], &key, &b, BPF_ANY);
	{
		int retval;

		test_run(E, ifindex_of[0], buf, len, 100, &retval);
	}
	rw_counters_read(&dp, 0, &after);
	t_count++;
	ok = CHECK_EQ(after.events_sent - before.events_sent, 0,
		      "events from a bucket another CPU emptied at a later time");
	printf("%s %d - exact budget: a bucket stamped ahead of this CPU's clock gives nothing\n",
	       ok ? "ok" : "not ok", t_count);

	/* Two CPUs at once on the same veth. */
	if (ncpu < 2) {
		t_count++;
		CHECK(0, "two CPUs", "this machine has %d CPU: the two-CPU case needs two", ncpu);
		printf("not ok %d - exact budget, two CPUs\n", t_count);
		set_budget(0, 0);
		return;
	}
	bpf_map_delete_elem(dp.map_fd[RW_M_EVENT_BUDGET], &key);
	drain_events();
	rw_counters_read(&dp, 0, &before);
	{
		struct flood_arg f[2] = {
			{.cpu = 0, .repeat = 20000, .rounds = 10, .pkt = buf, .len = len},
			{.cpu = 1, .repeat = 20000, .rounds = 10, .pkt = buf, .len = len},
		};
		pthread_t th[2];

		t0 = mono_ns();
		for (int i = 0; i < 2; i++)
			pthread_create(&th[i], NULL, flood_thread, &f[i]);
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		t1 = mono_ns();
		err = f[0].err ? f[0].err : f[1].err;
	}
	rw_counters_read(&dp, 0, &after);
	set_budget(0, 0);
	wall_s = (t1 - t0) / 1e9;
	sent = after.events_sent - before.events_sent;
	hi = burst + (long long)(rate * wall_s) + 1;
	t_count++;
	ok = CHECK_EQ(err, 0, "test_run on two CPUs");
	ok &= CHECK(sent >= burst && sent <= hi, "two CPUs",
		    "%lld events, expected %u..%lld "
		    "(%.1f ms wall)",
		    sent, burst, hi, wall_s * 1e3);
	ok &= CHECK_EQ(after.events_sent + after.events_suppressed - before.events_sent -
			       before.events_suppressed,
		       400000, "every drop's event sent or suppressed");
	drain_events();
	printf("%s %d - exact budget, two CPUs: 400000 drops in %.1f ms at %u/s burst %u: %lld "
	       "events (at most %lld)\n",
	       ok ? "ok" : "not ok", t_count, wall_s * 1e3, rate, burst, sent, hi);
}

/* Conntrack tables are per sandbox: one sandbox's full table refuses its own new flows
 * (conntrack-full, counted for its run) and leaves its known flows and every other sandbox
 * alone; a pod change starts an empty table; a veth without a table is fail-closed.
 */
static void set_ct_share(__u32 per_sandbox)
{
	struct rw_config cfg;

	if (rw_config_read(&dp, &cfg))
		FATAL("reading config");
	cfg.ct_per_sandbox = per_sandbox;
	if (rw_config_write(&dp, &cfg))
		FATAL("writing config");
}

static void test_conntrack_isolation(void)
{
	char name[64];
	int fd, n = 0;

	/* rwt0 gets a table of 4 flows: unbind and bind again (a fresh table of the new size). */
	set_ct_share(4);
	rw_endpoint_unbind(&dp, ifindex_of[0]);
	bind_veth(0, POD_A);
	set_ct_share(RW_CT_PER_SANDBOX);
	fd = rw_conntrack_table_fd(&dp, ifindex_of[0]);
	t_count++;
	if (CHECK(fd >= 0, "table", "rwt0 has no conntrack table after bind: %s", strerror(-fd))) {
		struct bpf_map_info info = {};
		__u32 l = sizeof(info);

		bpf_obj_get_info_by_fd(fd, &info, &l);
		CHECK_EQ(info.max_entries, 4, "rwt0's table size");
		close(fd);
	}
	printf("%s %d - bind makes the sandbox's own table (4 flows)\n", fd >= 0 ? "ok" : "not ok",
	       t_count);

	for (int i = 0; i < 4; i++) {
		struct tcase c = {NULL, EG(0, POD_A, "172.20.0.11", TCP, 41100 + i, 3443, SYN),
				  ALLOWED(RW_PATH_RULE, 1, "run-7f3a")};

		snprintf(name, sizeof(name), "flow %d of 4 in rwt0's table", i + 1);
		c.name = name;
		run_case(&c);
	}
	{
		static const struct tcase cases[] = {
			{"a 5th new flow: conntrack-full, for this sandbox only",
			 EG(0, POD_A, "172.20.0.11", TCP, 41104, 3443, SYN),
			 REFUSED_RST(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
			{"a 5th new UDP flow: conntrack-full",
			 EG(0, POD_A, "172.20.0.14", UDP, 41105, 4317, 0),
			 REFUSED_ICMP(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
			{"a new inbound connection into the full sandbox: conntrack-full",
			 IN(0, "172.20.0.20", POD_A, TCP, 50100, 4999, SYN),
			 DROPPED(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
			{"the full sandbox's known flows go on: next packet",
			 EG(0, POD_A, "172.20.0.11", TCP, 41100, 3443, ACK),
			 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
			{"the full sandbox's known flows go on: the server speaks",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41103, ACK),
			 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
			{"another sandbox opens flows as before",
			 EG(1, POD_B, "172.20.0.11", TCP, 41106, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-b77e")},
		};

		run_table(cases, sizeof(cases) / sizeof(cases[0]));
	}

	/* Flows are in the sandbox's own table only. */
	fd = rw_conntrack_table_fd(&dp, ifindex_of[1]);
	if (fd >= 0) {
		struct rw_ct_key k, *prev = NULL;

		while (bpf_map_get_next_key(fd, prev, &k) == 0) {
			prev = &k;
			n += k.ifindex != (__u32)ifindex_of[1];
		}
		close(fd);
	}
	t_count++;
	printf("%s %d - rwt1's table holds only rwt1's flows\n",
	       CHECK(fd >= 0 && n == 0, "isolation", "fd %d, %d foreign entries", fd, n) ? "ok"
											 : "not ok",
	       t_count);

	/* The pod moves (flush by pod IP, as an apply does): a fresh, empty table. */
	t_count++;
	{
		struct in_addr a;

		inet_pton(AF_INET, POD_A, &a);
		n = rw_conntrack_flush(&dp, 0, a.s_addr);
	}
	printf("%s %d - flushing the pod's flows replaces its one table\n",
	       CHECK_EQ(n, 1, "tables replaced") ? "ok" : "not ok", t_count);
	{
		static const struct tcase cases[] = {
			{"after the flush, its old flow's reply is a new inbound connection",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41100, ACK),
			 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
			{"after the flush, a new flow fits again",
			 EG(0, POD_A, "172.20.0.11", TCP, 41107, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		};

		run_table(cases, sizeof(cases) / sizeof(cases[0]));
	}

	/* No table at all (bound by an older agent, or deleted under us): fail closed. */
	{
		__u32 key = ifindex_of[0];
		static const struct tcase cases[] = {
			{"no table: a known flow is unknown, its reply is refused",
			 IN(0, "172.20.0.11", POD_A, TCP, 3443, 41107, ACK),
			 DROPPED(RW_REASON_INBOUND_DENIED, "run-7f3a")},
			{"no table: a new flow is conntrack-full",
			 EG(0, POD_A, "172.20.0.11", TCP, 41108, 3443, SYN),
			 REFUSED_RST(RW_REASON_CONNTRACK_FULL, "run-7f3a")},
		};

		static const struct tcase healed[] = {
			{"binding the veth to the same pod again gives it a table: new flows fit",
			 EG(0, POD_A, "172.20.0.11", TCP, 41109, 3443, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		};

		bpf_map_delete_elem(dp.map_fd[RW_M_CONNTRACK], &key);
		run_table(cases, sizeof(cases) / sizeof(cases[0]));
		bind_veth(0, POD_A); /* what the agent's resync does */
		run_table(healed, 1);
	}
}

/* Idle flows leave the tables: one made to look an hour and a bit idle goes, a fresh one stays
 * (an expired TCP flow's next packet is judged as a new one: the policy decides again).
 */
static void test_conntrack_expire(void)
{
	struct pkt_spec a = {.src = POD_A,
			     .dst = "172.20.0.11",
			     .proto = TCP,
			     .sport = 41200,
			     .dport = 3443,
			     .tcp_flags = SYN};
	struct pkt_spec b = {.src = POD_A,
			     .dst = "172.20.0.11",
			     .proto = TCP,
			     .sport = 41201,
			     .dport = 3443,
			     .tcp_flags = SYN};
	struct rw_ct_key k = {.ifindex = ifindex_of[0],
			      .pod_port = htons(41200),
			      .peer_port = htons(3443),
			      .proto = TCP};
	struct rw_ct_value v;
	__u8 buf[PKT_MAX];
	__u32 cursor = 0;
	int retval, fd, expired, ok;

	test_run(E, ifindex_of[0], buf, pkt_build(&a, buf), 1, &retval);
	test_run(E, ifindex_of[0], buf, pkt_build(&b, buf), 1, &retval);
	inet_pton(AF_INET, POD_A, &k.pod_ip);
	inet_pton(AF_INET, "172.20.0.11", &k.peer_ip);
	fd = rw_conntrack_table_fd(&dp, ifindex_of[0]);
	if (fd < 0 || bpf_map_lookup_elem(fd, &k, &v))
		FATAL("the flow of the expiry case is not in rwt0's table");
	/* Seen at boot, judged 10 s short of an hour from now: only the aged flow is over the
	 * hour (the machine has been up for more than 10 s), whatever the uptime.
	 */
	v.seen_ns = 1;
	if (bpf_map_update_elem(fd, &k, &v, BPF_EXIST))
		FATAL("ageing the flow of the expiry case: %s", strerror(errno));
	expired = rw_conntrack_expire(&dp, mono_ns() + 3590ULL * 1000000000ULL, &cursor, 1 << 20);
	k.pod_port = htons(41200);
	t_count++;
	ok = CHECK_EQ(expired, 1, "flows expired");
	ok &= CHECK(bpf_map_lookup_elem(fd, &k, &v) != 0, "expired",
		    "the idle flow is still there");
	k.pod_port = htons(41201);
	ok &= CHECK(bpf_map_lookup_elem(fd, &k, &v) == 0, "kept", "the fresh flow is gone");
	ok &= CHECK_EQ(cursor, 0, "cursor back at the start after a full walk");
	close(fd);
	printf("%s %d - conntrack expiry: an idle flow goes, a fresh one stays\n",
	       ok ? "ok" : "not ok", t_count);
}

/* A full ring loses events, never verdicts or counts. */
static void test_ring_full(void)
{
	struct pkt_spec p = {.src = POD_A,
			     .dst = "93.184.216.34",
			     .proto = TCP,
			     .sport = 40090,
			     .dport = 443,
			     .tcp_flags = RST | ACK}; /* repeatable: a reset is never answered */
	const __u32 n = 50000; /* more than the 4 MiB ring holds (120-byte events + headers) */
	struct rw_counters before, after;
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(&p, buf);
	long long sent, lost;
	int retval, ok;

	drain_events();
	rw_counters_read(&dp, 0, &before);
	test_run(E, ifindex_of[0], buf, len, n, &retval);
	rw_counters_read(&dp, 0, &after);
	sent = after.events_sent - before.events_sent;
	lost = after.events_lost - before.events_lost;
	t_count++;
	ok = CHECK_EQ(retval, 2, "verdict with a full ring");
	ok &= CHECK_EQ(after.packets[E][RW_REASON_NOT_ALLOWLISTED] -
			       before.packets[E][RW_REASON_NOT_ALLOWLISTED],
		       n, "every drop counted");
	ok &= CHECK(lost > 0, "lost", "no event was lost: the ring did not fill");
	ok &= CHECK_EQ(sent + lost, n, "sent + lost");
	drain_events();
	printf("%s %d - ring full: %u drops counted, %lld events sent, %lld lost\n",
	       ok ? "ok" : "not ok", t_count, n, sent, lost);
}

/* ---- Apply in place ------------------------------------------------------------------ */

/* policy v2 at another revision, or ("v3") with the drive gateway's rule revoked and a new
 * service added: the two flip each other's verdict for two destinations.
 */
static char *policy_at(unsigned int revision, int v3)
{
	const char *from =
		v3 ? "{\"name\": \"drive-gateway\", \"ip\": \"172.20.0.13\", \"tcp\": [8080]}"
		   : NULL;
	const char *to = "{\"name\": \"new-svc\", \"ip\": \"172.20.0.15\", \"tcp\": [7000]}";
	char *out = malloc(sizeof(policy_v2) + 256), *at;
	char rev[32];

	snprintf(rev, sizeof(rev), "\"revision\": %u", revision);
	at = strstr(policy_v2, "\"revision\": 2");
	sprintf(out, "%.*s%s%s", (int)(at - policy_v2), policy_v2, rev,
		at + strlen("\"revision\": 2"));
	if (from) {
		char *tail, *f = strstr(out, from);

		tail = strdup(f + strlen(from));
		strcpy(f, to);
		strcat(f, tail);
		free(tail);
	}
	return out;
}

static int live_count(enum rw_map_id table)
{
	int fd = rw_live_inner_fd(&dp, table), n = 0;
	__u8 key[64], prev[64];

	if (fd < 0)
		FATAL("live %s: %s", rw_map_names[table], strerror(-fd));
	while (bpf_map_get_next_key(fd, n ? prev : NULL, key) == 0) {
		memcpy(prev, key, sizeof(key));
		n++;
	}
	close(fd);
	return n;
}

/* Verdicts of the two destinations v2 and v3 disagree on, on fresh flows. */
static void check_v3(int v3, const char *when)
{
	static __u16 sport = 41000;
	char n1[160], n2[160];
	struct tcase c[2] = {
		{n1, EG(0, POD_A, "172.20.0.13", TCP, sport++, 8080, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{n2, EG(0, POD_A, "172.20.0.15", TCP, sport++, 7000, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
	};

	snprintf(n1, sizeof(n1), "%s: the drive gateway is %s", when, v3 ? "revoked" : "allowed");
	snprintf(n2, sizeof(n2), "%s: the new service is %s", when, v3 ? "allowed" : "denied");
	if (v3) {
		c[0].verdict = DROP, c[0].reason = RW_REASON_PRIVATE_DESTINATION;
		c[0].path = NO_PATH, c[0].answer = RW_ANSWER_RST;
	} else {
		c[1].verdict = DROP, c[1].reason = RW_REASON_PRIVATE_DESTINATION;
		c[1].path = NO_PATH, c[1].answer = RW_ANSWER_RST;
	}
	run_table(c, 2);
}

/* Apply one snapshot; check the live slot holds exactly its entries, no leftovers. */
static void apply_checked(unsigned int revision, int v3, int expect_full, const char *what)
{
	char *json = policy_at(revision, v3), err[512];
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	int ret, ok, entries;

	if (rw_policy_parse(json, strlen(json), what, &p, &perr))
		FATAL("%s: %s", what, perr.text);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	t_count++;
	ok = CHECK(ret == 0, what, "rw_apply: %s", err);
	entries = live_count(RW_M_ALLOW_EXACT) + live_count(RW_M_ALLOW_CIDR) +
		  live_count(RW_M_DENY) + live_count(RW_M_INBOUND);
	ok &= CHECK_EQ(live_count(RW_M_PODS), (int)res.pods, "pods in the live slot");
	ok &= CHECK_EQ(entries, (int)res.entries, "entries in the live slot");
	ok &= CHECK_EQ(res.full, expect_full, "written in full");
	printf("%s %d - %s: revision %u %s, %u writes, %d entries live\n", ok ? "ok" : "not ok",
	       t_count, what, revision, res.full ? "written in full" : "written by diff",
	       res.written, entries);
	rw_policy_free(&p);
	free(json);
}

/* An apply that stops half way (an error between two writes, as if the agent died there)
 * leaves the live slot as it was; the next apply rewrites the half-written slot and converges,
 * and later applies go back to writing by diff. A restarted agent rewrites what it does not know.
 */
static void test_interrupted_apply(void)
{
	char *json = policy_at(4, 1), err[512];
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_config cfg;
	struct rw_policy p;
	int ret, ok;

	apply_checked(3, 0, 0, "v2 again by diff");
	check_v3(0, "revision 3");
	if (rw_policy_parse(json, strlen(json), "v3", &p, &perr))
		FATAL("v3: %s", perr.text);
	rw_apply_inject_fault(2);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	rw_config_read(&dp, &cfg);
	t_count++;
	ok = CHECK(ret == -EIO, "interrupted apply", "returned %d (%s), expected -EIO", ret, err);
	ok &= CHECK_EQ(RW_STATE_REVISION(cfg.state), 3, "revision in force");
	printf("%s %d - an apply interrupted after 2 writes fails (%s); revision %llu stays live\n",
	       ok ? "ok" : "not ok", t_count, err,
	       (unsigned long long)RW_STATE_REVISION(cfg.state));
	rw_policy_free(&p);
	free(json);
	check_v3(0, "after the interrupted apply");

	apply_checked(4, 1, 1, "v3 over the half-written slot");
	check_v3(1, "revision 4");
	apply_checked(5, 0, 0, "v2 by diff");
	check_v3(0, "revision 5");
	apply_checked(6, 1, 0, "v3 by diff into the slot rewritten in full");
	check_v3(1, "revision 6");
	rw_apply_forget(&dp);
	apply_checked(7, 0, 1, "v2 after a restart (slots unknown)");
	check_v3(0, "revision 7");
	apply_checked(8, 1, 1, "v3 after a restart, the other slot");
	check_v3(1, "revision 8");
	apply_checked(9, 0, 0, "v2 by diff again");
	check_v3(0, "revision 9");
}

/* ---- per-run revisions: an apply re-judges the flows of the runs it changes, only ---- */

/* Policy v2's shape at `revision`: one service (the identity broker), run-7f3a (POD_A, no
 * rules) first, then `b_id` (POD_B; none when NULL) with the allow list `b_allow`, one more
 * deny CIDR when `deny_more`, and from revision 104 on run-fill (POD_X) last.
 */
static char *gen_policy(unsigned int revision, const char *b_id, const char *b_allow, int deny_more)
{
	char *out = malloc(2048), b[512] = "";
	const char *fill =
		revision >= 104 ? ",\n    {\"id\": \"run-fill\", \"pods\": [\"" POD_X "\"]}" : "";

	if (b_id)
		snprintf(b, sizeof(b),
			 ",\n    {\"id\": \"%s\", \"pods\": [\"" POD_B "\"], \"allow\": [%s]}",
			 b_id, b_allow);
	snprintf(out, 2048,
		 "{\n  \"revision\": %u,\n"
		 "  \"deny\": [\"10.0.0.0/16\", \"100.64.0.0/16\"%s],\n"
		 "  \"services\": [{\"name\": \"identity-broker\", \"ip\": \"172.20.0.11\", "
		 "\"tcp\": [3443]}],\n"
		 "  \"inbound\": [{\"name\": \"temporal-worker\", \"cidr\": \"172.20.0.20/32\", "
		 "\"tcp\": [4999]}],\n"
		 "  \"runs\": [\n    {\"id\": \"run-7f3a\", \"pods\": [\"" POD_A
		 "\"]}%s%s\n  ]\n}\n",
		 revision, deny_more ? ", \"52.95.0.0/16\"" : "", b, fill);
	return out;
}

static struct rw_policy gen_prev;
static int gen_have_prev;

/* Apply a gen_policy() snapshot over the one applied before (its prev), or expect `expect`. */
static void gen_apply(const char *what, char *json, int expect)
{
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	char err[512];
	int ret;

	if (rw_policy_parse(json, strlen(json), what, &p, &perr))
		FATAL("%s: %s", what, perr.text);
	free(json);
	ret = rw_apply(&dp, gen_have_prev ? &gen_prev : NULL, &p, &res, err, sizeof(err));
	t_count++;
	if (!CHECK(ret == expect, what, "rw_apply returned %d (%s), expected %d", ret, err, expect))
		FATAL("cannot go on without the snapshot");
	printf("ok %d - %s: %s\n", t_count, what, ret ? err : "applied");
	if (ret) {
		rw_policy_free(&p);
		return;
	}
	if (gen_have_prev)
		rw_policy_free(&gen_prev);
	gen_prev = p;
	gen_have_prev = 1;
}

static __u64 run_rev(__u32 idx)
{
	__u64 v = 0;

	if (bpf_map_lookup_elem(dp.map_fd[RW_M_RUN_REVS], &idx, &v))
		FATAL("rw_run_revs[%u]: %s", idx, strerror(errno));
	return v;
}

static __u64 stamp_of(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port)
{
	struct rw_ct_value v;

	if (ct_entry(dev, pod, pod_port, peer, peer_port, TCP, &v, NULL))
		return 0;
	return v.stamp;
}

/* Take the identity broker's service rule out of the live map behind the datapath's back (1),
 * or put it back (0): a flow judged in full is refused while it is out, a cached one is not.
 */
static void broker_rule(int out)
{
	static struct rw_rule saved;
	struct rw_allow_key k = {.scope = 0, .dport = htons(3443), .proto = TCP};
	int fd = rw_live_inner_fd(&dp, RW_M_ALLOW_EXACT);

	inet_pton(AF_INET, "172.20.0.11", &k.daddr);
	if (fd < 0 || (out ? bpf_map_lookup_elem(fd, &k, &saved) || bpf_map_delete_elem(fd, &k)
			   : bpf_map_update_elem(fd, &k, &saved, BPF_NOEXIST)))
		FATAL("identity broker rule %s: %s", out ? "out" : "back", strerror(errno));
	close(fd);
}

static void test_run_generations(void)
{
	static const struct tcase open_both[] = {
		{"gens: run-7f3a opens a flow to the identity broker",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
		{"gens: run-b77e opens a flow to the identity broker",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, SYN),
		 ALLOWED(RW_PATH_RULE, 1, "run-b77e")},
		{"gens: run-7f3a's next packet (cached)",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"gens: run-b77e's next packet (cached)",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
	};
	static const struct tcase only_b[] = {
		{"gens: only run-b77e changed: run-7f3a's flow stays on its cached verdict (its rule is out of the live map)",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"gens: ... and its reply too", IN(0, "172.20.0.11", POD_A, TCP, 3443, 40200, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-7f3a")},
		{"gens: run-b77e's flow is judged in full: refused while the rule is out",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 REFUSED_RST(RW_REASON_PRIVATE_DESTINATION, "run-b77e")},
	};
	static const struct tcase b_again[] = {
		{"gens: run-b77e's flow, judged in full again with the rule back",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
		{"gens: run-b77e opens a flow by its own new rule",
		 EG(1, POD_B, "52.94.9.7", TCP, 40202, 5432, SYN),
		 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-b77e")},
		{"gens: its reply", IN(1, "52.94.9.7", POD_B, TCP, 5432, 40202, ACK),
		 ALLOWED(RW_PATH_REPLY, 0, "run-b77e")},
		{"gens: its next packet (cached)", EG(1, POD_B, "52.94.9.7", TCP, 40202, 5432, ACK),
		 ALLOWED(RW_PATH_RULE_CIDR, 0, "run-b77e")},
	};
	static const struct tcase revoked_b[] = {
		{"gens: run-b77e's rule revoked: its flow's next packet is refused",
		 EG(1, POD_B, "52.94.9.7", TCP, 40202, 5432, ACK),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-b77e")},
		{"gens: ... and its next reply", IN(1, "52.94.9.7", POD_B, TCP, 5432, 40202, ACK),
		 REVOKED(RW_REASON_NOT_ALLOWLISTED, "run-b77e")},
		{"gens: run-7f3a's flow is still cached",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
	};
	static const struct tcase both[] = {
		{"gens: a node-wide change: run-7f3a's flow is judged in full",
		 EG(0, POD_A, "172.20.0.11", TCP, 40200, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-7f3a")},
		{"gens: a node-wide change: run-b77e's flow is judged in full",
		 EG(1, POD_B, "172.20.0.11", TCP, 40201, 3443, ACK),
		 ALLOWED(RW_PATH_RULE, 0, "run-b77e")},
	};
	static const struct tcase reused[] = {
		{"gens: a flow cached by the index's earlier run (rule-cidr, stamped before it was freed) is judged by the run now holding it: refused",
		 EG(1, POD_B, "52.94.9.7", TCP, 40203, 5432, ACK),
		 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-c0de")},
	};
	const char *rule = "{\"cidr\": \"52.94.9.0/24\", \"tcp\": [5432]}";
	__u32 a, b, c;
	__u64 s;
	int ok, fd;

	gen_apply("gens: base, revision 100", gen_policy(100, "run-b77e", "", 0), 0);
	a = run_idx_of("run-7f3a");
	b = run_idx_of("run-b77e");
	run_table(open_both, sizeof(open_both) / sizeof(open_both[0]));
	t_count++;
	ok = CHECK_EQ(stamp_of(0, POD_A, 40200, "172.20.0.11", 3443), 100, "run-7f3a's stamp");
	ok &= CHECK_EQ(stamp_of(1, POD_B, 40201, "172.20.0.11", 3443), 100, "run-b77e's stamp");
	ok &= CHECK_EQ(run_rev(a), 100, "rw_run_revs[run-7f3a]");
	ok &= CHECK_EQ(run_rev(b), 100, "rw_run_revs[run-b77e]");
	printf("%s %d - gens: both flows stamped 100, both runs at revision 100 (idx %u, %u)\n",
	       ok ? "ok" : "not ok", t_count, a, b);

	/* A run's generation bump re-judges its flows only. */
	gen_apply("gens: revision 101 adds a rule to run-b77e only",
		  gen_policy(101, "run-b77e", rule, 0), 0);
	t_count++;
	ok = CHECK_EQ(run_rev(a), 100, "rw_run_revs[run-7f3a] kept");
	ok &= CHECK_EQ(run_rev(b), 101, "rw_run_revs[run-b77e] moved");
	ok &= CHECK_EQ(run_rev(0), 101, "rw_run_revs[0] (no run) moved");
	printf("%s %d - gens: revision 101 moves run-b77e's revision only\n", ok ? "ok" : "not ok",
	       t_count);
	broker_rule(1);
	run_table(only_b, sizeof(only_b) / sizeof(only_b[0]));
	broker_rule(0);
	run_table(b_again, sizeof(b_again) / sizeof(b_again[0]));
	t_count++;
	ok = CHECK_EQ(stamp_of(0, POD_A, 40200, "172.20.0.11", 3443), 100,
		      "run-7f3a's flow keeps its stamp (fast path)");
	ok &= CHECK_EQ(stamp_of(1, POD_B, 40201, "172.20.0.11", 3443), 101,
		       "run-b77e's flow restamped (judged in full)");
	printf("%s %d - a run's generation bump re-judges its flows only: run-7f3a's flow stamped "
	       "100, run-b77e's 101\n",
	       ok ? "ok" : "not ok", t_count);

	/* The run's own rule revoked: cut at the next packet, both ways; the other run cached. */
	gen_apply("gens: revision 102 revokes run-b77e's rule", gen_policy(102, "run-b77e", "", 0),
		  0);
	run_table(revoked_b, sizeof(revoked_b) / sizeof(revoked_b[0]));

	/* A node-wide change re-judges every run's flows. */
	gen_apply("gens: revision 103 adds a deny CIDR (node-wide)",
		  gen_policy(103, "run-b77e", "", 1), 0);
	run_table(both, sizeof(both) / sizeof(both[0]));
	t_count++;
	ok = CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a]");
	ok &= CHECK_EQ(run_rev(b), 103, "rw_run_revs[run-b77e]");
	ok &= CHECK_EQ(stamp_of(0, POD_A, 40200, "172.20.0.11", 3443), 103, "run-7f3a's stamp");
	ok &= CHECK_EQ(stamp_of(1, POD_B, 40201, "172.20.0.11", 3443), 103, "run-b77e's stamp");
	printf("%s %d - gens: a node-wide change re-judges both runs' flows (stamps 103)\n",
	       ok ? "ok" : "not ok", t_count);

	/* A run removed, then its index reused: no verdict cached under the old run survives.
	 * run-fill takes the lowest free index at 104, so that run-c0de gets run-b77e's at 105.
	 */
	gen_apply("gens: revision 104 removes run-b77e, adds run-fill",
		  gen_policy(104, NULL, "", 1), 0);
	t_count++;
	ok = CHECK_EQ(run_rev(b), 104, "rw_run_revs[run-b77e's freed index]");
	ok &= CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a] kept");
	printf("%s %d - gens: a removed run's index moves to 104, the other run's stays\n",
	       ok ? "ok" : "not ok", t_count);
	gen_apply("gens: revision 105 gives POD_B to a new run", gen_policy(105, "run-c0de", "", 1),
		  0);
	c = run_idx_of("run-c0de");
	fd = rw_conntrack_table_fd(&dp, ifindex_of[1]);
	if (fd < 0)
		FATAL("rwt1 has no conntrack table");
	for (s = 101; s <= 104; s += 3) {
		struct rw_ct_value v = {.opened_by = E,
					.path = RW_PATH_RULE_CIDR,
					.rule_id = RW_RULE_ID(RW_RULE_KIND_RUN, 1, 0),
					.run_idx = c,
					.stamp = s};
		struct rw_ct_value dummy;
		struct rw_ct_key k;

		ct_entry(1, POD_B, 40203, "52.94.9.7", 5432, TCP, &dummy, &k);
		if (bpf_map_update_elem(fd, &k, &v, BPF_ANY))
			FATAL("writing an entry of the old run: %s", strerror(errno));
		run_table(reused, 1);
	}
	close(fd);
	t_count++;
	ok = CHECK_EQ(c, b, "run-c0de reuses run-b77e's index");
	ok &= CHECK_EQ(run_rev(c), 105, "rw_run_revs[reused index]");
	ok &= CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a] kept");
	printf("%s %d - gens: index %u reused by run-c0de at 105: entries stamped 101 and 104 are "
	       "judged again\n",
	       ok ? "ok" : "not ok", t_count, c);

	/* The revision never goes down: an older snapshot is refused, nothing moves. */
	gen_apply("gens: an older revision (50) is refused", gen_policy(50, "run-b77e", rule, 0),
		  -ESTALE);
	t_count++;
	ok = CHECK_EQ(run_rev(c), 105, "rw_run_revs[run-c0de]");
	ok &= CHECK_EQ(run_rev(a), 103, "rw_run_revs[run-7f3a]");
	printf("%s %d - gens: a refused older revision moves no run's revision\n",
	       ok ? "ok" : "not ok", t_count);
	if (gen_have_prev)
		rw_policy_free(&gen_prev);
	gen_have_prev = 0;
}

/* A snapshot big enough that its writes are split between two threads (one table each way):
 * v2's services with 12 000 rules for run-7f3a, 10 % of them CIDRs. Every entry is live after
 * the flip, a rule from each table decides, and the way back to v2 (in the big snapshot's slot:
 * 12 000 deletes, two threads too) leaves no leftover.
 */
static void test_big_apply(void)
{
	const int rules = 12000;
	size_t cap = sizeof(policy_v2) + (size_t)rules * 64;
	char *json = malloc(cap), err[512];
	const char *run = "{\"id\": \"run-7f3a\", \"pods\": [\"10.1.2.3\"]", *rev, *at;
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	size_t len;
	int ret, ok, entries;

	rev = strstr(policy_v2, "\"revision\": 2");
	at = strstr(policy_v2, run);
	if (!json || !rev || !at)
		FATAL("big snapshot: no room, no revision or no run-7f3a");
	/* Revision 10, after test_interrupted_apply's. */
	len = snprintf(json, cap, "%.*s\"revision\": 10%.*s%s, \"allow\": [",
		       (int)(rev - policy_v2), policy_v2,
		       (int)(at - rev - strlen("\"revision\": 2")), rev + strlen("\"revision\": 2"),
		       run);
	for (int i = 0; i < rules; i++)
		len += snprintf(json + len, cap - len,
				i % 10 == 9 ? "%s{\"cidr\": \"45.%d.%d.0/24\", \"tcp\": [%d]}"
					    : "%s{\"ip\": \"44.%d.%d.1\", \"tcp\": [%d]}",
				i ? "," : "", i / 256, i % 256, 1000 + i % 1000);
	snprintf(json + len, cap - len, "]%s", at + strlen(run));
	if (rw_policy_parse(json, strlen(json), "big", &p, &perr))
		FATAL("big snapshot: %s", perr.text);
	ret = rw_apply(&dp, NULL, &p, &res, err, sizeof(err));
	t_count++;
	ok = CHECK(ret == 0, "big apply", "rw_apply: %s", err);
	entries = live_count(RW_M_ALLOW_EXACT) + live_count(RW_M_ALLOW_CIDR) +
		  live_count(RW_M_DENY) + live_count(RW_M_INBOUND);
	ok &= CHECK_EQ(live_count(RW_M_PODS), (int)res.pods, "pods in the live slot");
	ok &= CHECK_EQ(entries, (int)res.entries, "entries in the live slot");
	ok &= CHECK(res.written >= (unsigned int)rules, "big apply", "%u writes", res.written);
	printf("%s %d - a big snapshot (%d rules) written by two threads: %u writes, %d entries "
	       "live\n",
	       ok ? "ok" : "not ok", t_count, rules, res.written, entries);
	rw_policy_free(&p);
	free(json);
	{
		struct tcase c[] = {
			{"big snapshot: its last exact rule allows",
			 EG(0, POD_A, "44.46.222.1", TCP, 42001, 1998, SYN),
			 ALLOWED(RW_PATH_RULE, 1, "run-7f3a")},
			{"big snapshot: its last CIDR rule allows",
			 EG(0, POD_A, "45.46.223.7", TCP, 42002, 1999, SYN),
			 ALLOWED(RW_PATH_RULE_CIDR, 1, "run-7f3a")},
			{"big snapshot: another port of that CIDR is not allowlisted",
			 EG(0, POD_A, "45.46.223.7", TCP, 42003, 1998, SYN),
			 REFUSED_RST(RW_REASON_NOT_ALLOWLISTED, "run-7f3a")},
		};

		run_table(c, sizeof(c) / sizeof(c[0]));
	}
	apply_checked(11, 0, 0, "v2 by diff after the big snapshot");
	check_v3(0, "revision 11");
	apply_checked(12, 0, 0, "v2 by diff into the big snapshot's slot (its rules deleted)");
	check_v3(0, "revision 12");
}

/* ---- the flip: the state word moves only through rw_flip ---- */

static int apply_rev(struct rw_datapath *d, unsigned int revision, char *err, size_t errlen)
{
	char *json = policy_at(revision, revision & 1);
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy p;
	int ret;

	if (rw_policy_parse(json, strlen(json), "flip", &p, &perr))
		FATAL("flip: %s", perr.text);
	ret = rw_apply(d, NULL, &p, &res, err, errlen);
	rw_policy_free(&p);
	free(json);
	return ret;
}

/* An apply flips the state word to exactly (revision, ready, idle slot) and the kernel's clock
 * stamps applied_ns; a flip from a state that is not the one in force stores nothing and says
 * what it found; rw_config_write() never changes the state word, whatever its caller's copy
 * holds; without rw_flip an apply fails with a sentence naming it and nothing moves, so
 * rw_flip is what moves the state.
 */
static void test_flip(void)
{
	struct rw_config before, cfg;
	char err[512] = "", msg[512];
	__u64 t0, t1, s;
	unsigned int rev;
	int ret, ok, fd;

	rw_config_read(&dp, &before);
	rev = (unsigned int)RW_STATE_REVISION(before.state) + 1;
	t_count++;
	ok = CHECK(dp.flip_fd >= 0, "rw_flip", "not loaded in a private datapath");
	t0 = mono_ns();
	ret = apply_rev(&dp, rev, err, sizeof(err));
	t1 = mono_ns();
	rw_config_read(&dp, &cfg);
	s = RW_STATE(rev, 1, !RW_STATE_SLOT(before.state));
	ok &= CHECK(ret == 0, "apply", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx, expected %#llx", (unsigned long long)cfg.state,
		    (unsigned long long)s);
	ok &= CHECK(cfg.applied_ns >= t0 && cfg.applied_ns <= t1, "applied_ns",
		    "%llu, not in [%llu, %llu]", (unsigned long long)cfg.applied_ns,
		    (unsigned long long)t0, (unsigned long long)t1);
	ok &= CHECK(cfg.layout_version == before.layout_version &&
			    cfg.event_rate == before.event_rate &&
			    cfg.ct_per_sandbox == before.ct_per_sandbox &&
			    cfg.ct_node == before.ct_node,
		    "other fields", "changed by the flip");
	printf("%s %d - apply flips the state word by rw_flip to exactly %#llx (revision %u, slot "
	       "%u), applied_ns from the kernel's clock\n",
	       ok ? "ok" : "not ok", t_count, (unsigned long long)s, rev, RW_STATE_SLOT(s));

	t_count++;
	ret = rw_config_flip(&dp, before.state, RW_STATE(rev + 100, 1, 0), err, sizeof(err));
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, -ESTALE, "stale flip");
	ok &= CHECK(cfg.state == s, "state", "%#llx after a refused flip",
		    (unsigned long long)cfg.state);
	ok &= CHECK(strstr(err, "nothing flipped") != NULL, "message", "%s", err);
	printf("%s %d - a flip from a state not in force is refused: %s\n", ok ? "ok" : "not ok",
	       t_count, err);

	t_count++;
	cfg.state = RW_STATE(rev + 200, 0, 1); /* a stale or made-up copy of the word */
	cfg.event_burst = before.event_burst + 7;
	ret = rw_config_write(&dp, &cfg);
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, 0, "rw_config_write");
	ok &= CHECK(cfg.state == s, "state", "%#llx after rw_config_write, expected %#llx",
		    (unsigned long long)cfg.state, (unsigned long long)s);
	ok &= CHECK_EQ(cfg.event_burst, before.event_burst + 7, "event_burst written");
	cfg.event_burst = before.event_burst;
	rw_config_write(&dp, &cfg);
	printf("%s %d - rw_config_write writes the other fields and keeps the state word in "
	       "force\n",
	       ok ? "ok" : "not ok", t_count);

	t_count++;
	fd = dp.flip_fd;
	dp.flip_fd = -1;
	ret = apply_rev(&dp, rev + 1, err, sizeof(err));
	dp.flip_fd = fd;
	rw_config_read(&dp, &cfg);
	ok = CHECK_EQ(ret, -ENOTSUP, "apply without rw_flip");
	ok &= CHECK(strstr(err, "rw_flip") != NULL, "message", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx after the failed apply",
		    (unsigned long long)cfg.state);
	snprintf(msg, sizeof(msg), "%s", err);
	ret = apply_rev(&dp, rev + 1, err, sizeof(err));
	rw_config_read(&dp, &cfg);
	s = RW_STATE(rev + 1, 1, RW_STATE_SLOT(before.state));
	ok &= CHECK(ret == 0, "apply", "%s", err);
	ok &= CHECK(cfg.state == s, "state", "%#llx, expected %#llx", (unsigned long long)cfg.state,
		    (unsigned long long)s);
	printf("%s %d - without rw_flip an apply fails (%s) and the state stays; with it, %#llx\n",
	       ok ? "ok" : "not ok", t_count, msg, (unsigned long long)s);
}

/* Pinned, as the agent has it: a fresh node is not ready (state 0), the first apply flips to
 * slot 0, a dry run over the pins (`runwall explain`) and the pins alone (the CLI, runwall-cni)
 * have no rw_flip and cannot flip, the state outlives the agent, and a restarted agent adopts
 * it and flips from it with its own rw_flip.
 */
static void test_flip_pinned(void)
{
	struct rw_datapath a, dry, ro;
	struct rw_config cfg;
	char pins[64], err[512] = "";
	int ret, ok = 0;

	/* Closed at the end whether or not they were opened: nothing open to begin with. */
	memset(&a, 0, sizeof(a));
	for (int i = 0; i < RW_M__COUNT; i++)
		a.map_fd[i] = -1;
	for (int d = 0; d < RW_DIR_COUNT; d++)
		a.prog_fd[d] = -1;
	a.flip_fd = -1;
	ro = a;
	snprintf(pins, sizeof(pins), "/sys/fs/bpf/rwtest-flip-%d", (int)getpid());
	t_count++;
	if (!CHECK(rw_datapath_load(&a, pins, 0, err, sizeof(err)) == 0, "load", "%s: %s", pins,
		   err))
		goto out;
	rw_config_read(&a, &cfg);
	ok = CHECK(cfg.state == 0, "fresh state", "%#llx", (unsigned long long)cfg.state);
	ok &= CHECK(a.flip_fd >= 0, "rw_flip", "not loaded by the agent's load");
	ret = apply_rev(&a, 1, err, sizeof(err));
	rw_config_read(&a, &cfg);
	ok &= CHECK(ret == 0, "first apply", "%s", err);
	ok &= CHECK(cfg.state == RW_STATE(1, 1, 0), "state", "%#llx after the first apply",
		    (unsigned long long)cfg.state);
	if (!CHECK(rw_datapath_load(&dry, pins, RW_DP_DRY_RUN, err, sizeof(err)) == 0, "dry load",
		   "%s", err))
		goto out_fail;
	ok &= CHECK(dry.flip_fd < 0, "dry run", "has rw_flip");
	ret = rw_config_flip(&dry, cfg.state, RW_STATE(9, 1, 1), err, sizeof(err));
	ok &= CHECK(ret == -ENOTSUP && strstr(err, "rw_flip"), "dry-run flip", "%d: %s", ret, err);
	rw_datapath_close(&dry);
	if (!CHECK(rw_datapath_open_pinned(&ro, pins, err, sizeof(err)) == 0, "open pinned", "%s",
		   err))
		goto out_fail;
	ok &= CHECK(ro.flip_fd < 0, "pins only", "have rw_flip");
	ok &= CHECK_EQ(rw_config_flip(&ro, cfg.state, RW_STATE(9, 1, 1), err, sizeof(err)),
		       -ENOTSUP, "pins-only flip");
	rw_datapath_close(&a); /* the agent exits */
	rw_config_read(&ro, &cfg);
	ok &= CHECK(cfg.state == RW_STATE(1, 1, 0), "state", "%#llx once the agent is gone",
		    (unsigned long long)cfg.state);
	if (!CHECK(rw_datapath_load(&a, pins, 0, err, sizeof(err)) == 0, "reload", "%s", err))
		goto out_fail;
	rw_config_read(&a, &cfg);
	ok &= CHECK(cfg.state == RW_STATE(1, 1, 0), "state", "%#llx after the restart's load",
		    (unsigned long long)cfg.state);
	ret = apply_rev(&a, 2, err, sizeof(err));
	rw_config_read(&ro, &cfg);
	ok &= CHECK(ret == 0, "apply after the restart", "%s", err);
	ok &= CHECK(cfg.state == RW_STATE(2, 1, 1), "state", "%#llx after the restarted apply",
		    (unsigned long long)cfg.state);
	goto out;
out_fail:
	ok = 0;
out:
	printf("%s %d - pinned: fresh state 0, revision 1 in slot 0, no flip from a dry run or the "
	       "pins alone, adopted after a restart and flipped to revision 2 in slot 1\n",
	       ok ? "ok" : "not ok", t_count);
	rw_datapath_close(&ro);
	rw_datapath_close(&a);
	rw_datapath_unpin(pins);
}

static void print_verified_insns(void)
{
	const char *names[RW_DIR_COUNT] = {"rw_egress", "rw_ingress"};

	for (int d = 0; d < RW_DIR_COUNT; d++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(dp.prog_fd[d], &info, &len))
			FATAL("prog info: %s", strerror(errno));
		printf("# %s: %u instructions verified, %u translated bytes\n", names[d],
		       info.verified_insns, info.xlated_prog_len);
	}
}

int main(void)
{
	struct utsname u;

	uname(&u);
	setvbuf(stdout, NULL, _IOLBF, 0);
	rw_log_setup_libbpf();
	printf("# runwall datapath suite on kernel %s\n", u.release);

	make_veths();
	char load_err[512];

	if (rw_datapath_load(&dp, NULL, RW_DP_NO_PIN, load_err, sizeof(load_err)))
		FATAL("loading the programs failed: %s", load_err);
	print_verified_insns();
	ring = ring_buffer__new(dp.map_fd[RW_M_EVENTS], on_event, NULL, NULL);
	if (!ring)
		FATAL("ring_buffer__new: %s", strerror(errno));
	set_budget(0, 0);	 /* no budget while the table checks one event per case */
	set_answer_budget(0, 0); /* nor for answers: every refusal of the tables is answered */

	bind_veth(0, POD_A);
	bind_veth(1, POD_B);
	bind_veth(3, POD_X);

	run_table(not_ready_cases, sizeof(not_ready_cases) / sizeof(not_ready_cases[0]));
	test_answer_not_ready();
	apply_json(policy_v1, 0, "policy v1");
	run_table(v1_cases, sizeof(v1_cases) / sizeof(v1_cases[0]));
	test_answers();
	test_revoke();
	test_metadata_beats_rules();
	test_run_rules_after_ranges();
	test_verdict_cache();
	apply_json(policy_v1, -ESTALE, "the same revision again");
	apply_json(policy_v2, 0, "policy v2");
	run_table(v2_cases, sizeof(v2_cases) / sizeof(v2_cases[0]));
	test_stale_stamp();
	test_generations();
	test_event_budget();
	test_event_budget_exact();
	test_answer_budget();
	test_conntrack_isolation();
	test_conntrack_expire();
	test_ring_full();
	test_interrupted_apply();
	test_big_apply();
	test_flip();
	test_flip_pinned();
	test_real_traffic(&dp, devs[0], ifindex_of[0], POD_A);
	test_run_generations();
	test_refusal_modes();
	test_revoke_drop_mode();

	printf("1..%d\n", t_count);
	printf("# %s: %d checks failed\n", t_failed ? "FAIL" : "PASS", t_failed);
	ring_buffer__free(ring);
	rw_datapath_close(&dp);
	return t_failed ? 1 : 0;
}
