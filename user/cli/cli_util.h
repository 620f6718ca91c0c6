/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cli_util.h: what the operator commands (status, map, counters, drops, explain) share:
 * parsing of what people type, names with "did you mean", aligned tables, counters and verdict
 * formatting, the event filter, the crafted packets of explain, and read-only helpers over the
 * pinned maps and the agent's control socket.
 *
 * Nothing here uses rw_g or rw_fail(): the commands decide what to print and which exit code to
 * return, so that every function here can be unit tested on its own (tests/unit/test_cli.c).
 * Functions return 0 or a negative errno unless said otherwise.
 */
#ifndef RUNWALL_CLI_UTIL_H
#define RUNWALL_CLI_UTIL_H

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

/* ---- what people type ---------------------------------------------------------------------- */

/* The parsers of what people type are the library's (parse.h), shared with the agent. */

/* A reason name (rw_reason_name()) into its number, with the same message. */
int rw_cli_reason_lookup(const char *word, char *err, size_t errlen);

/* A map name as users type it ("allow": a shown name of RW_MAPS) or as it is pinned
 * ("rw_allow_cidr"), into the map `runwall map` shows it under (rw_cli_map_of()).
 */
int rw_cli_map_lookup(const char *word, char *err, size_t errlen);

/* ---- text -------------------------------------------------------------------------------- */

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

/* Print a JSON value as one compact line and flush (other programs read it through a pipe).
 * Takes the reference.
 */
void rw_cli_json_print(json_t *o);

/* ---- counters ---------------------------------------------------------------------------- */

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

/* ---- drops ------------------------------------------------------------------------------- */

/* Which events `runwall drops` shows. Zeroed = every drop. */
struct rw_cli_filter {
	bool all;	 /* allowed new flows too */
	const char *run; /* run id, or NULL */
	bool has_pod;
	struct rw_ip pod;  /* the pod's side of the event (source of egress, dst of ingress) */
	__u32 pod_ifindex; /* the pod's veth when known (0: not known): its events match too */
	int reason;	   /* -1: any */
	bool has_dst;
	struct rw_ip dst; /* either family: an event of the other never matches */
	__u16 dport;	  /* host order, 0: any */
};

void rw_cli_filter_init(struct rw_cli_filter *f);
bool rw_cli_filter_match(const struct rw_cli_filter *f, const struct rw_event *ev);

/* The header over rw_event_line()'s columns. */
void rw_cli_event_header(char *buf, size_t len);

/* ---- explain ----------------------------------------------------------------------------- */

/* A packet to judge, as explain describes it. Addresses in network order, ports host order. */
struct rw_cli_probe {
	__u8 dir; /* enum rw_dir */
	__be32 src, dst;
	__u16 sport, dport; /* IPPROTO_ICMPV6: dport is the type */
	__u8 proto;	    /* IPPROTO_TCP, IPPROTO_UDP, or (IPv6) IPPROTO_ICMPV6 */
	__u8 tcp_flags;
	bool six; /* IPv6: src6 and dst6, not src and dst */
	__be32 src6[4], dst6[4];
};

/* What the program decided, and under which policy. */
struct rw_cli_verdict {
	__u8 verdict; /* enum rw_verdict */
	__u8 reason;
	__u8 path;
	__u8 answer; /* enum rw_answer the refusal gets, its budget aside */
	__u32 rule_id;
	char rule[128];		 /* rw_rule_name() */
	char run[RW_RUN_ID_LEN]; /* "" when the pod belongs to no run */
	__u32 gen;
	__u64 revision;
	const char *source; /* "live" or the policy file */
};

#define RW_CLI_PKT_MAX 128

/* Ethernet + IPv4 (no options) or IPv6 (no extension headers) + TCP (doff 5) or UDP, or an
 * ICMPv6 message of the probe's type, no payload. Returns the length.
 */
size_t rw_cli_build_packet(const struct rw_cli_probe *p, __u8 *buf, size_t len);

/* "egress 10.1.2.3:40000 -> 172.20.0.10:443 tcp", "egress [2600::7]:40000 -> [2a00::1]:443 tcp",
 * "egress 2600::7 -> 2a00::1 icmpv6 type 128"
 */
void rw_cli_probe_str(const struct rw_cli_probe *p, char *buf, size_t len);

/* "allowed via rule services[0] egress-proxy", "allowed via open", "refused: dns",
 * "refused: not-allowlisted, answered with rst"
 */
void rw_cli_verdict_str(const struct rw_cli_verdict *v, char *buf, size_t len);

/* "run run-7f3a gen 12, revision 12" or "no run, revision 12" */
void rw_cli_verdict_context(const struct rw_cli_verdict *v, char *buf, size_t len);

/* The line explain prints. `now` and/or `with` (the verdict under --policy; `with->source`
 * names the file); at least one.
 *   PROBE (CONTEXT): VERDICT
 *   PROBE (CONTEXT): now: VERDICT; with FILE (revision N): VERDICT
 */
void rw_cli_explain_line(const struct rw_cli_probe *p, const struct rw_cli_verdict *now,
			 const struct rw_cli_verdict *with, char *buf, size_t len);

/* {"verdict":"allow","reason":...,"path":...,"answer":...,"rule":...,"rule_id":N,"run":...,"gen":N,
 *  "revision":N,"dir":...,"src":...,"sport":N,"dst":...,"dport":N,"proto":...,"source":...,
 *  "family":"ipv4"|"ipv6"} (ICMPv6: "icmp_type" in place of the ports)
 */
json_t *rw_cli_verdict_json(const struct rw_cli_probe *p, const struct rw_cli_verdict *v);

/* ---- the kernel's state, read only ------------------------------------------------------- */

/* Open the maps pinned at bpffs, read only in spirit (nothing is created). -ENOENT: nothing is
 * pinned there (the commands exit 2); other errors: they are there but unusable. `err` says
 * what, for people.
 */
int rw_cli_open(struct rw_datapath *dp, const char *bpffs, char *err, size_t errlen);

/* The map `runwall map` shows `id` under: the first of RW_MAPS with its shown name
 * (RW_M_ALLOW_EXACT for both allow maps).
 */
enum rw_map_id rw_cli_map_of(enum rw_map_id id);

/* The veth a pod address (either family) is bound to in rw_endpoints (-ENOENT: none);
 * rw_cli_pod_ifindex() of an IPv4 one.
 */
int rw_cli_pod_ifindex_of(const struct rw_datapath *dp, const struct rw_ip *pod, __u32 *ifindex);
int rw_cli_pod_ifindex(const struct rw_datapath *dp, __be32 pod, __u32 *ifindex);

/* ---- the agent ----------------------------------------------------------------------------- */

/* The snapshot in force, for naming rules: the agent's (the `policy` request on `socket`), else
 * the policy file its status names when that is still the revision in force. -ENOENT when there
 * is none to use.
 */
int rw_cli_agent_policy(const char *socket, json_t *status, __u64 live_revision,
			struct rw_policy *out);

#endif /* RUNWALL_CLI_UTIL_H */
