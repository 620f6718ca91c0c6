// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_cli_args.c: libFuzzer target for the CLI's option and value parsers (what an operator
 * types after --pod, --dst, --sport, --flags, --reason, --event-rate, `map dump`, ...; an
 * address of either family, with or without a port, as ipaddr.c parses it). The first byte picks
 * the parser, the rest is the argument. Each parser either refuses or returns a value that
 * prints back to something it accepts again.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_text.h"
#include "ipaddr.h"
#include "parse.h"

static const char *const words[] = {"config", "endpoints", "pods", "allow", "deny"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[512], back[64], err[512];
	struct rw_ip a, a2;
	unsigned long long u;
	__be32 ip, ip2;
	__u16 port, port2;
	__u8 b;

	if (size < 1 || size > sizeof(s))
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 11) {
	case 0:
		if (rw_parse_ip(s, &ip) == 0) {
			inet_ntop(AF_INET, &ip, back, sizeof(back));
			if (rw_parse_ip(back, &ip2) || ip2 != ip)
				abort();
		}
		/* Either family (--pod, --dst of drops, the view's filters): RFC 5952 text back. */
		if (rw_ip_parse(s, &a) == 0) {
			rw_ip_str(&a, back, sizeof(back));
			if (rw_ip_parse(back, &a2) || !rw_ip_eq(&a, &a2))
				abort();
		}
		break;
	case 1:
		if (rw_parse_port(s, &port) == 0 && port == 0)
			abort();
		break;
	case 2:
		if (rw_parse_ip_port(s, &ip, &port) == 0 && port) {
			rw_cli_ip_port(ip, port, back, sizeof(back));
			if (rw_parse_ip_port(back, &ip2, &port2) || ip2 != ip || port2 != port)
				abort();
		}
		/* "[2001:db8::1]:443" and "10.1.2.3:443": printed bracketed, parsed back the same. */
		if (rw_ip_port_parse(s, &a, &port) == 0 && port) {
			rw_ip_port_str(&a, port, back, sizeof(back));
			if (rw_ip_port_parse(back, &a2, &port2) || !rw_ip_eq(&a, &a2) ||
			    port2 != port)
				abort();
		}
		break;
	case 3:
		if (rw_parse_uint(s, data[0] & 0x80 ? 65535 : ~0ULL, &u) == 0) {
			snprintf(back, sizeof(back), "%llu", u);
			if (strcmp(back, s) && s[0] != '0')
				abort();
		}
		break;
	case 4:
		rw_parse_proto(s, &b);
		break;
	case 5:
		rw_parse_tcp_flags(s, &b);
		break;
	case 6:
		if (rw_cli_reason_lookup(s, err, sizeof(err)) < 0 && !err[0])
			abort();
		break;
	case 7:
		if (rw_cli_map_lookup(s, err, sizeof(err)) < 0 && !err[0])
			abort();
		break;
	case 8:
		if (rw_name_lookup(s, "thing", words, sizeof(words) / sizeof(words[0]), err,
				   sizeof(err)) < 0 &&
		    !err[0])
			abort();
		break;
	case 10: {
		/* --event-rate N[/BURST]: a BURST given is >= 1, else it is 2N. */
		unsigned long long rate, burst;

		if (rw_parse_rate(s, 1000000, &rate, &burst) == 0 &&
		    (rate > 1000000 ||
		     (strchr(s, '/') ? burst > 1000000 || !burst : burst != 2 * rate)))
			abort();
		break;
	}
	default: {
		/* Two words for the edit distance: symmetric, and zero only for equal words. */
		char *half = s + strlen(s) / 2, other[256];

		snprintf(other, sizeof(other), "%s", half);
		*half = '\0';
		if (rw_name_distance(s, other) != rw_name_distance(other, s))
			abort();
		break;
	}
	}
	return 0;
}
