/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* reasons.h: names of reasons, allow paths, answers and directions, as users see them. */
#ifndef RUNWALL_REASONS_H
#define RUNWALL_REASONS_H

#include <linux/types.h>
#include "runwall.h"

const char *rw_reason_name(unsigned int reason); /* "not-allowlisted"; "?" if unknown */
int rw_reason_parse(const char *name);		 /* reason number, or -EINVAL */
const char *rw_path_name(unsigned int path);	 /* "rule-cidr" */
const char *rw_answer_name(unsigned int answer); /* "none", "rst", "icmp", "budget" */
const char *rw_dir_name(unsigned int dir);	 /* "egress" / "ingress" */
const char *rw_proto_name(unsigned int proto);	 /* "tcp", "udp", "icmp", or "132" */

/* What a packet was: the IPv4 protocol's name for IPv4 ("tcp"), the upper layer's for IPv6
 * ("tcp", "udp", "icmpv6"; "ipv6" when it has none), else the ethertype's ("arp", "vlan",
 * "qinq", "0x88cc"); ethertype in network byte order, 0 when unknown.
 */
const char *rw_packet_proto_name(__be16 ethertype, unsigned int proto);

#endif /* RUNWALL_REASONS_H */
