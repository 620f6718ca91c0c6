/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_counters_fmt.h: the verdict counters as a table, a summary line and JSON (`runwall counters`,
 * `runwall map dump counters`).
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return, so that every function here can be unit tested on its own (tests/unit/test_cli.c).
 * Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_CLI_COUNTERS_FMT_H
#define RUNWALL_CLI_COUNTERS_FMT_H

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
#include "cli_text.h"

/* {"egress":{"allowed":{"packets":N,"bytes":N},...every reason...},"ingress":{...},
 *  "events":{"sent":N,"lost":N,"suppressed":N}}
 */
json_t *rw_cli_counters_json(const struct rw_counters *c);

/* Packets allowed / dropped, both directions. */
uint64_t rw_cli_counters_allowed(const struct rw_counters *c);
uint64_t rw_cli_counters_drops(const struct rw_counters *c);

/* The non-zero rows (DIR REASON PACKETS BYTES), then the summary line
 * "47 drops, 1203 allowed; events: 3 sent, 44 suppressed, 0 lost". With no packet at all,
 * "no packets" instead of the table.
 */
void rw_cli_counters_print(FILE *f, const struct rw_counters *c, const char *indent);
void rw_cli_counters_summary(const struct rw_counters *c, char *buf, size_t len);

#endif /* RUNWALL_CLI_COUNTERS_FMT_H */
