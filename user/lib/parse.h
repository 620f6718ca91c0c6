/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* parse.h: the range-checked parsers of what people type, shared by the agent's and the CLI's
 * options (no atoi, no sscanf: trailing junk, signs, overflow are errors). Each returns 0, or
 * -EINVAL (not that kind of thing) / -ERANGE (out of range), and writes its output only on 0.
 */
#ifndef RUNWALL_PARSE_H
#define RUNWALL_PARSE_H

#include <stddef.h>
#include <linux/types.h>

/* A dotted quad, nothing else ("10.1.2.3"). -EINVAL otherwise. */
int rw_parse_ip(const char *s, __be32 *ip);

/* A port, 1..65535, decimal. */
int rw_parse_port(const char *s, __u16 *port);

/* "IP" or "IP:PORT"; *port (host order) is 0 when there is none. */
int rw_parse_ip_port(const char *s, __be32 *ip, __u16 *port);

/* A decimal number 0..max. */
int rw_parse_uint(const char *s, unsigned long long max, unsigned long long *out);

/* "tcp" or "udp" (any case) into IPPROTO_TCP / IPPROTO_UDP. */
int rw_parse_proto(const char *s, __u8 *proto);

/* TCP flag bits as on the wire. */
#define RW_TCP_SYN 0x02
#define RW_TCP_ACK 0x10

/* "syn", "ack" or "synack" into TCP flag bits. */
int rw_parse_tcp_flags(const char *s, __u8 *flags);

/* Edit distance between two words (for "did you mean"). */
unsigned int rw_name_distance(const char *a, const char *b);

/* Index of `word` in names[], or -EINVAL with `err` saying so: "unknown WHAT 'alow' (did you
 * mean 'allow'?); valid: config, endpoints, ...". The suggestion is there only when one name is
 * close enough to be a typo.
 */
int rw_name_lookup(const char *word, const char *what, const char *const *names, size_t n,
		   char *err, size_t errlen);

/* "N" or "N/BURST", each 0..max (BURST >= 1); BURST is 2N when not given. */
int rw_parse_rate(const char *s, unsigned long long max, unsigned long long *rate,
		  unsigned long long *burst);

#endif /* RUNWALL_PARSE_H */
