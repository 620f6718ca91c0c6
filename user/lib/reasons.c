// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* reasons.c: the reason contract of include/runwall.h, as strings. */
#include <errno.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <string.h>

#include "reasons.h"

static const char *const reason_names[RW_REASON_COUNT] = {
#define RW_REASON_STR(name, num, str) [num] = str,
	RW_REASONS(RW_REASON_STR)
#undef RW_REASON_STR
};

static const char *const path_names[RW_PATH_COUNT] = {
#define RW_PATH_STR(name, num, str) [num] = str,
	RW_ALLOW_PATHS(RW_PATH_STR)
#undef RW_PATH_STR
};

static const char *const answer_names[RW_ANSWER_COUNT] = {
#define RW_ANSWER_STR(name, num, str) [num] = str,
	RW_ANSWERS(RW_ANSWER_STR)
#undef RW_ANSWER_STR
};

const char *rw_answer_name(unsigned int answer)
{
	return answer < RW_ANSWER_COUNT ? answer_names[answer] : "?";
}

const char *rw_reason_name(unsigned int reason)
{
	return reason < RW_REASON_COUNT ? reason_names[reason] : "?";
}

int rw_reason_parse(const char *name)
{
	for (int r = 0; r < RW_REASON_COUNT; r++)
		if (!strcmp(reason_names[r], name))
			return r;
	return -EINVAL;
}

const char *rw_path_name(unsigned int path)
{
	return path < RW_PATH_COUNT ? path_names[path] : "?";
}

const char *rw_dir_name(unsigned int dir)
{
	return dir == RW_DIR_EGRESS ? "egress" : dir == RW_DIR_INGRESS ? "ingress" : "?";
}

const char *rw_proto_name(unsigned int proto)
{
	static __thread char num[8];

	switch (proto) {
	case 1:
		return "icmp";
	case 6:
		return "tcp";
	case 17:
		return "udp";
	default:
		snprintf(num, sizeof(num), "%u", proto);
		return num;
	}
}

const char *rw_packet_proto_name(__be16 ethertype, unsigned int proto)
{
	static __thread char hex[8];

	switch (ntohs(ethertype)) {
	case 0x0800:
		return rw_proto_name(proto);
	case 0x0806:
		return "arp";
	case 0x86dd:
		/* The upper layer after the extension headers; none for a frame refused before. */
		if (proto == 58)
			return "icmpv6";
		return proto ? rw_proto_name(proto) : "ipv6";
	case 0x8100:
		return "vlan";
	case 0x88a8:
		return "qinq";
	case 0:
		return proto ? rw_proto_name(proto) : "-";
	default:
		snprintf(hex, sizeof(hex), "%#06x", ntohs(ethertype));
		return hex;
	}
}
