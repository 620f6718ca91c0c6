// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* reasons.c (test_datapath): the case tables (not ready, policy v1, policy v2): verdict, reason, path, counters and
 * event of each, and the rules the kernel refuses whatever the live map says.
 */
#include "dp_suite.h"

const struct tcase not_ready_cases[] = {
	{"before any snapshot, egress is not-ready",
	 EG(0, POD_A, "172.20.0.10", TCP, 40000, 443, SYN), DROPPED(RW_REASON_NOT_READY, NULL)},
	{"before any snapshot, ingress is not-ready",
	 IN(0, "172.20.0.12", POD_A, TCP, 50000, 4096, SYN), DROPPED(RW_REASON_NOT_READY, NULL)},
	{"before any snapshot, ARP is not-ready", .dev = 0, .dir = E,
	 .pkt = {.arp = 1, .src = POD_A, .dst = "169.254.1.1"}, DROPPED(RW_REASON_NOT_READY, NULL)},
};
const size_t n_not_ready_cases = sizeof(not_ready_cases) / sizeof(not_ready_cases[0]);

const struct tcase v1_cases[] = {
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
	{"inbound IPv4 header under the IPv6 ethertype", .dev = 0, .dir = I,
	 .pkt = {.ethertype = 0x86dd, .src = "0.0.0.0", .dst = "0.0.0.0", .payload = 40},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},

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
	 .pkt = {FLOW(POD_A, "172.20.0.10", 132, 40037, 443)},
	 REFUSED_ICMP(RW_REASON_UNSUPPORTED_PROTOCOL, "run-7f3a")},
	{"UDP-Lite to an allowed IP and port", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.14", 136, 40038, 4317)},
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
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40042, 443), .ihl = 6},
	 DROPPED(RW_REASON_IP_OPTIONS, "run-7f3a")},
	{"a tiny first fragment", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", UDP, 40043, 4317), .frag = 0x2000},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"a later fragment whose payload looks like port 443", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40044, 443), .frag = 185},
	 DROPPED(RW_REASON_FRAGMENT, "run-7f3a")},
	{"VLAN-tagged packet to an allowed service", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40045, 443), .vlan = 1},
	 DROPPED(RW_REASON_UNSUPPORTED_L2, "run-7f3a")},
	{"IPv4 header under the IPv6 ethertype", .dev = 0, .dir = E,
	 .pkt = {.ethertype = 0x86dd, .src = "0.0.0.0", .dst = "0.0.0.0", .payload = 40},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"IHL 4", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40046, 443), .ihl = 4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"IP version 6 under an IPv4 ethertype", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40047, 443), .ip_version = 6},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"tot_len longer than the frame", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40048, 443), .tot_len_delta = 20},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a truncated TCP header (tot_len leaves 10 bytes)", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40049, 443), .tot_len_delta = -10, .truncate = 10},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a frame cut inside the TCP header", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40050, 443), .truncate = 12},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"TCP data offset 4", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.10", TCP, 40051, 443), .tcp_doff = 4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"UDP length below 8", .dev = 0, .dir = E,
	 .pkt = {FLOW(POD_A, "172.20.0.14", UDP, 40052, 4317), .udp_len_delta = -4},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"ARP with a 8-byte hardware address", .dev = 0, .dir = E,
	 .pkt = {.arp = 1, .src = POD_A, .dst = "169.254.1.1", .arp_hlen = 8},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
	{"a malformed packet into the pod", .dev = 0, .dir = I,
	 .pkt = {FLOW("172.20.0.12", POD_A, TCP, 50008, 4096), .tcp_doff = 3},
	 DROPPED(RW_REASON_MALFORMED, "run-7f3a")},
};
const size_t n_v1_cases = sizeof(v1_cases) / sizeof(v1_cases[0]);

const struct tcase v2_cases[] = {
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
const size_t n_v2_cases = sizeof(v2_cases) / sizeof(v2_cases[0]);

/* A rule that names a metadata address never gets into a snapshot (the parser refuses it), so
 * write one straight into the live map: the kernel must still refuse the address.
 */
void test_metadata_beats_rules(void)
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

/* The key of the flow (pod:pod_port <-> peer:peer_port) in the veth's IPv4 table. */
static struct rw_ct_key ct_key(int dev, const char *pod, __u16 pod_port, const char *peer,
			       __u16 peer_port, __u8 proto)
{
	struct rw_ct_key k = {.ifindex = ifindex_of[dev],
			      .pod_port = htons(pod_port),
			      .peer_port = htons(peer_port),
			      .proto = proto};

	inet_pton(AF_INET, pod, &k.pod_ip);
	inet_pton(AF_INET, peer, &k.peer_ip);
	return k;
}

/* The flow's entry in its sandbox's table (0), or -1. */
int ct_entry(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port,
	     __u8 proto, struct rw_ct_value *v)
{
	struct rw_ct_key k = ct_key(dev, pod, pod_port, peer, peer_port, proto);
	int fd = rw_conntrack_table_fd(&dp, ifindex_of[dev]), err;

	if (fd < 0)
		return -1;
	err = bpf_map_lookup_elem(fd, &k, v) ? -1 : 0;
	close(fd);
	return err;
}

/* Write the flow's entry into its sandbox's table behind the datapath's back (a failure is
 * fatal): an entry as an earlier agent's policy, or an earlier run, left it.
 */
void ct_put(int dev, const char *pod, __u16 pod_port, const char *peer, __u16 peer_port, __u8 proto,
	    const struct rw_ct_value *v)
{
	struct rw_ct_key k = ct_key(dev, pod, pod_port, peer, peer_port, proto);
	int fd = rw_conntrack_table_fd(&dp, ifindex_of[dev]);

	if (fd < 0 || bpf_map_update_elem(fd, &k, v, BPF_ANY))
		FATAL("writing an entry into %s's table: %s", devs[dev],
		      fd < 0 ? "no table" : strerror(errno));
	close(fd);
}

/* A run rule naming a private address never gets into a snapshot (the parser refuses it), so
 * write one straight into the live map, exact and CIDR: the kernel checks run rules after the
 * private ranges and the deny list, and still refuses the address (defence in depth).
 */
void test_run_rules_after_ranges(void)
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
