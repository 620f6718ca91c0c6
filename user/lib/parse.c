// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* parse.c: what people type, parsed strictly (see parse.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>

#include "parse.h"

int rw_parse_ip(const char *s, __be32 *ip)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*ip = a.s_addr;
	return 0;
}

int rw_parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	unsigned long long v = 0;

	if (!s || !*s || strlen(s) > 20)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		unsigned int d = (unsigned int)(*p - '0');

		if (v > max / 10 || d > max - v * 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int rw_parse_port(const char *s, __u16 *port)
{
	unsigned long long v;
	int err = rw_parse_uint(s, 65535, &v);

	if (err || v == 0)
		return -EINVAL;
	*port = (__u16)v;
	return 0;
}

int rw_parse_ip_port(const char *s, __be32 *ip, __u16 *port)
{
	char host[INET_ADDRSTRLEN];
	const char *colon;
	size_t n;

	if (!s)
		return -EINVAL;
	colon = strchr(s, ':');
	*port = 0;
	if (!colon)
		return rw_parse_ip(s, ip);
	n = colon - s;
	if (n >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (rw_parse_ip(host, ip) || rw_parse_port(colon + 1, port))
		return -EINVAL;
	return 0;
}

int rw_parse_proto(const char *s, __u8 *proto)
{
	if (!strcasecmp(s, "tcp"))
		*proto = IPPROTO_TCP;
	else if (!strcasecmp(s, "udp"))
		*proto = IPPROTO_UDP;
	else
		return -EINVAL;
	return 0;
}

int rw_parse_tcp_flags(const char *s, __u8 *flags)
{
	if (!strcasecmp(s, "syn"))
		*flags = RW_TCP_SYN;
	else if (!strcasecmp(s, "ack"))
		*flags = RW_TCP_ACK;
	else if (!strcasecmp(s, "synack") || !strcasecmp(s, "syn-ack") || !strcasecmp(s, "syn,ack"))
		*flags = RW_TCP_SYN | RW_TCP_ACK;
	else
		return -EINVAL;
	return 0;
}

#define DIST_MAX 64

/* Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
 * two neighbours ("dupm" -> "dump") cost one each; case is ignored.
 */
unsigned int rw_name_distance(const char *a, const char *b)
{
	unsigned int d[DIST_MAX + 1][DIST_MAX + 1];
	size_t la = strnlen(a, DIST_MAX), lb = strnlen(b, DIST_MAX);

	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]);
			int cb = tolower((unsigned char)b[j - 1]);
			unsigned int best = d[i - 1][j - 1] + (ca != cb);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* The one name `word` is most likely a typo of, or NULL. */
static const char *suggest(const char *word, const char *const *names, size_t n)
{
	size_t wl = strlen(word), prefix_hits = 0;
	unsigned int best = ~0u, limit;
	const char *hit = NULL, *prefix = NULL;
	bool tie = false;

	for (size_t i = 0; i < n; i++) {
		unsigned int d = rw_name_distance(word, names[i]);

		if (wl >= 3 && !strncasecmp(word, names[i], wl)) {
			prefix = names[i];
			prefix_hits++;
		}
		if (d < best) {
			best = d;
			hit = names[i];
			tie = false;
		} else if (d == best) {
			tie = true;
		}
	}
	limit = wl <= 4 ? 1 : wl <= 8 ? 2 : 3;
	if (hit && !tie && best <= limit)
		return hit;
	return prefix_hits == 1 ? prefix : NULL;
}

int rw_name_lookup(const char *word, const char *what, const char *const *names, size_t n,
		   char *err, size_t errlen)
{
	const char *hint;
	size_t off;
	int w;

	for (size_t i = 0; i < n; i++)
		if (!strcmp(word, names[i]))
			return (int)i;
	if (!err || !errlen)
		return -EINVAL;
	hint = suggest(word, names, n);
	w = snprintf(err, errlen, "unknown %s '%s'%s%s%s; valid: ", what, word,
		     hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
	off = w < 0 ? 0 : (size_t)w;
	for (size_t i = 0; i < n && off < errlen; i++) {
		w = snprintf(err + off, errlen - off, "%s%s", i ? ", " : "", names[i]);
		off += w < 0 ? 0 : (size_t)w;
	}
	return -EINVAL;
}

int rw_parse_rate(const char *s, unsigned long long max, unsigned long long *rate,
		  unsigned long long *burst)
{
	unsigned long long r, b;
	char num[24];
	const char *slash;
	size_t n;
	int err;

	if (!s)
		return -EINVAL;
	slash = strchr(s, '/');
	if (!slash) {
		err = rw_parse_uint(s, max, &r);
		b = r * 2;
	} else {
		n = slash - s;
		if (n >= sizeof(num))
			return -EINVAL;
		memcpy(num, s, n);
		num[n] = '\0';
		err = rw_parse_uint(num, max, &r);
		if (!err)
			err = rw_parse_uint(slash + 1, max, &b);
		if (!err && !b)
			err = -ERANGE;
	}
	if (err)
		return err;
	*rate = r;
	*burst = b;
	return 0;
}
