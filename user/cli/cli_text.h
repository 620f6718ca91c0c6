/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_text.h: what people type and the text the commands print: reason and map names with "did you
 * mean", aligned tables, durations, sizes, addresses, one-line JSON.
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return, so that every function here can be unit tested on its own (tests/unit/test_cli.c).
 * Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_CLI_TEXT_H
#define RUNWALL_CLI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <linux/types.h>

#include "runwall.h"
#include "datapath.h"
#include "ipaddr.h"
#include "liveruns.h"
#include "mapfill.h"
#include "parse.h"
#include "policy.h"

/* The parsers of what people type are the library's (parse.h), shared with the agent. */

/* A reason name (rw_reason_name()) into its number, with the same message. */
int rw_cli_reason_lookup(const char *word, char *err, size_t errlen);

/* A map name as users type it ("allow": a shown name of RW_MAPS) or as it is pinned
 * ("rw_allow_cidr"), into the map `runwall map` shows it under (rw_cli_map_of()).
 */
int rw_cli_map_lookup(const char *word, char *err, size_t errlen);

/* An aligned table: columns as wide as their widest cell, two blanks between columns, numbers
 * right-aligned (columns in right_mask), no trailing blanks. heads may be NULL (no header).
 */
struct rw_table {
	size_t ncols;
	const char *const *heads;
	unsigned int right_mask;
	char **cells; /* rows * ncols, row-major */
	size_t rows;
	size_t cap; /* rows allocated */
	size_t cur; /* cells filled in the last row */
};

#define RW_TABLE_RIGHT(col) (1u << (col))

void rw_table_init(struct rw_table *t, size_t ncols, const char *const *heads,
		   unsigned int right_mask);
/* Start a row, then add its cells in order; a row left short is filled with "". */
int rw_table_row(struct rw_table *t);
int rw_table_cell(struct rw_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rw_table_print(const struct rw_table *t, FILE *f, const char *indent);
void rw_table_free(struct rw_table *t);

/* "0.8s", "42s", "5m12s", "3h07m", "2d04h". */
void rw_cli_duration(uint64_t ns, char *buf, size_t len);

/* "4.0 MiB", "512 B". */
void rw_cli_bytes(uint64_t n, char *buf, size_t len);

/* "37.5%", "<0.1%" (some, but not 0.1%), "-" (unknown). */
void rw_cli_fill_pct(long long entries, long long max, char *buf, size_t len);

/* "10.1.2.3", "172.21.0.0/24" (prefixlen < 32), "10.1.2.3:443" (port != 0, host order). */
void rw_cli_ip(__be32 ip, char *buf, size_t len);
void rw_cli_cidr(__be32 ip, unsigned int prefixlen, char *buf, size_t len);
void rw_cli_ip_port(__be32 ip, __u16 port, char *buf, size_t len);
/* The same of an IPv6 address (network order): "2001:db8::1", "2001:db8::/32" (prefixlen <
 * 128), "[2001:db8::1]:443" (port != 0).
 */
void rw_cli_ip6(const __be32 ip[4], char *buf, size_t len);
void rw_cli_cidr6(const __be32 ip[4], unsigned int prefixlen, char *buf, size_t len);
void rw_cli_ip6_port(const __be32 ip[4], __u16 port, char *buf, size_t len);
/* An address's text and a port, as a JSON answer carries them: "10.1.2.3:443",
 * "[2001:db8::1]:443" (the text has a colon: IPv6). NULL host: "-".
 */
void rw_cli_host_port(const char *host, long long port, char *buf, size_t len);

/* The integer at key in a JSON object of the agent's (0 when it is not there, or not one). */
json_int_t rw_cli_jint(const json_t *o, const char *key);

/* Print a JSON value as one compact line and flush (other programs read it through a pipe).
 * Takes the reference.
 */
void rw_cli_json_print(json_t *o);

#endif /* RUNWALL_CLI_TEXT_H */
