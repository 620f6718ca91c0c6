/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bpf_net.h: constants the kernel side needs that Debian's 6.1 UAPI headers lack.
 *
 * API
 *   offers: (no functions) tc/tcx verdicts and protocol constants
 *   needs:  (nothing)
 */
#ifndef RUNWALL_BPF_NET_H
#define RUNWALL_BPF_NET_H

#include <linux/pkt_cls.h>

/* tcx verdicts (kernel >= 6.6, include/uapi/linux/bpf.h) share their values with the tc ones,
 * so one program serves both the tcx link and the cls_bpf direct-action fallback.
 */
#ifndef TCX_NEXT
#define TCX_NEXT -1 /* == TC_ACT_UNSPEC: hand on to the next program on the hook */
#define TCX_PASS 0  /* == TC_ACT_OK: never used; it would skip the enforcers after us */
#define TCX_DROP 2  /* == TC_ACT_SHOT */
#endif

#define ETH_HLEN_ 14
#ifndef ETH_ALEN
#define ETH_ALEN 6
#endif
#define ETH_P_IP_   0x0800
#define ETH_P_ARP_  0x0806
#define ETH_P_IPV6_ 0x86DD

#define IP_DF_	   0x4000
#define IP_MF_	   0x2000
#define IP_OFFSET_ 0x1fff

/* IPv6 next header values (IANA "Assigned Internet Protocol Numbers"; RFC 7045 lists which are
 * extension headers). <linux/in6.h> names some; these are the ones the parser needs.
 */
#define RW_NH_HOPOPTS  0
#define RW_NH_TCP      6
#define RW_NH_UDP      17
#define RW_NH_ROUTING  43
#define RW_NH_FRAGMENT 44
#define RW_NH_ESP      50
#define RW_NH_AH       51
#define RW_NH_ICMPV6   58
#define RW_NH_NONE     59
#define RW_NH_DSTOPTS  60
#define RW_NH_MOBILITY 135
#define RW_NH_HIP      139
#define RW_NH_SHIM6    140
#define RW_NH_EXP1     253
#define RW_NH_EXP2     254

#define TCP_FLAG_FIN_ 0x01
#define TCP_FLAG_SYN_ 0x02
#define TCP_FLAG_RST_ 0x04
#define TCP_FLAG_ACK_ 0x10

/* ICMP types that are queries or their replies (RFC 792, RFC 950): the only ICMP a refusal
 * answers. An ICMP error, or any type not known to be informational, is never answered with an
 * ICMP error (RFC 1122 3.2.2).
 */
#define RW_ICMP_INFO_TYPES                                                                        \
	((1u << 0) | (1u << 8) | (1u << 13) | (1u << 14) | (1u << 15) | (1u << 16) | (1u << 17) | \
	 (1u << 18))

#define EEXIST_ 17 /* what bpf_map_update_elem(BPF_NOEXIST) returns, negated */

#endif /* RUNWALL_BPF_NET_H */
