/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* icmp6_suite.h: what ndp.c and icmp6.c share: the dual-stack pod on rwt0, and a case on a
 * hand-built ICMPv6 frame.
 */
#ifndef RUNWALL_TEST_ICMP6_SUITE_H
#define RUNWALL_TEST_ICMP6_SUITE_H

#include "dp_suite.h"

/* rwt0 is POD_A's veth, bound to its IPv6 too, with the host veth's link-local as gateway;
 * POD6_B is run-9c01's, bound nowhere (rwt1 keeps POD_B's IPv4 alone).
 */
#define POD6_A	"2600:1f14:abc:1::3"
#define POD6_B	"2600:1f14:abc:1::4"
#define POD6_LL "fe80::a8c1:abff:fe00:3" /* the pod's own link-local: never bound */
#define GW6	"fe80::1"
#define PUBLIC6 "2606:4700::1111"

/* One ICMPv6 message: rwt0 (dev 0, run-7f3a) unless `dev` says, from `src` to `dst` with hop
 * limit `hop` (0: 255). `target` makes it an NS or NA (24 bytes); `q_*` an error quoting an
 * IPv6 header and 8 bytes; else 8 bytes of the type. `len_delta` adds to (cuts) the message;
 * `opts` follow it.
 * Expected: `reason` (RW_REASON_ALLOWED: allowed, with no event), counted for the veth's run.
 */
struct icase {
	const char *name;
	int dev;
	int dir;
	const char *src, *dst;
	__u8 hop;
	__u8 type, code;
	const char *target;
	const char *q_src, *q_dst;
	__u8 q_proto;
	__u16 q_sport, q_dport;
	int len_delta;
	__u8 opts[72]; /* NDP options, appended after the message and len_delta's bytes */
	__u8 opts_len;
	int reason;
};

void run_icase(const struct icase *c);
void run_itable(const struct icase *cases, size_t n);
/* The program's return code for a case's frame, nothing else checked (a flood of them). */
int icase_retval(const struct icase *c);

#endif /* RUNWALL_TEST_ICMP6_SUITE_H */
