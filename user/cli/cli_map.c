// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_map.c: `runwall map { list | dump MAP | lookup MAP KEY }`: the pinned maps, decoded into
 * named fields. Reads only, works without the agent (the policy maps are read in the live
 * slot, the one packets are judged by now).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_text.h"
#include "cli_counters_fmt.h"
#include "cli_pins.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "reasons.h"

struct mctx {
	struct rw_datapath dp;
	struct rw_config cfg;
	bool ready;
	__u32 slot;
	__u64 revision;
	struct rw_live_run *runs;
	size_t n_runs;
	struct rw_policy policy;
	bool have_policy;
	char policy_file[512];
	int64_t mono_to_real;
	__u64 now_mono;
	/* The map shown; while each_entry() walks one, that one: its rows read their key by it. */
	enum rw_map_id map;
	json_t *entries;   /* -j */
	struct rw_table t; /* plain */
};

/* What `lookup` looks for; `dump` leaves it empty (everything matches). */
struct mkey {
	bool any;
	bool has_ip;
	bool ipv6;     /* the key is IPv6: ip6, not ip */
	__be32 ip;     /* IPv4 */
	__be32 ip6[4]; /* IPv6 */
	__u16 port;    /* host order, 0: any */
	__u8 proto;    /* 0: any */
	bool has_ifindex;
	__u32 ifindex;
	bool has_idx;
	__u32 idx;
	const char *text; /* the key as typed, for messages */
};

static const char map_usage[] = "map { list | dump MAP | lookup MAP KEY }";
static const char map_options[] =
	"  list              every map: type, entries, size, pinned path\n"
	"  dump MAP          every entry of MAP, decoded\n"
	"  lookup MAP KEY    one entry (KEY as dump prints it: an IP, a rule key, an ifindex...)\n";

/* ---- small helpers ----------------------------------------------------------------------- */

static __u64 mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static const char *run_of_idx(const struct mctx *c, __u32 idx)
{
	int i = rw_live_run_find(c->runs, c->n_runs, NULL, idx);

	return i < 0 ? NULL : c->runs[i].id;
}

/* The run whose pods hold ip (either family), or NULL. */
static const char *run_of_pod(const struct mctx *c, const struct rw_ip *ip)
{
	for (size_t r = 0; r < c->n_runs; r++) {
		const struct rw_live_run *run = &c->runs[r];

		for (size_t i = 0; ip->family == AF_INET && i < run->n_pods; i++)
			if (run->pods[i] == ip->a[0])
				return run->id;
		for (size_t i = 0; ip->family == AF_INET6 && i < run->n_pods6; i++)
			if (!memcmp(run->pods6[i], ip->a, sizeof(run->pods6[i])))
				return run->id;
	}
	return NULL;
}

/* Whether the key names IPv4 address ip (an IPv6 key names no IPv4 entry). */
static bool key_is4(const struct mkey *k, __be32 ip)
{
	return k->has_ip && !k->ipv6 && k->ip == ip;
}

static bool key_is6(const struct mkey *k, const __be32 ip[4])
{
	return k->has_ip && k->ipv6 && !memcmp(k->ip6, ip, sizeof(k->ip6));
}

static bool key_is(const struct mkey *k, const struct rw_ip *ip)
{
	return ip->family == AF_INET6 ? key_is6(k, ip->a) : key_is4(k, ip->a[0]);
}

static void ifname_of(__u32 ifindex, char *buf)
{
	if (!if_indextoname(ifindex, buf))
		snprintf(buf, IF_NAMESIZE, "?");
}

static void rule_name(struct mctx *c, __u32 id, char *buf, size_t len)
{
	rw_rule_name(c->have_policy ? &c->policy : NULL, id, buf, len);
}

/* Rule names come from the agent's policy file when it is the revision in force. */
static void load_policy(struct mctx *c)
{
	json_t *status;

	if (rw_ctl_call(rw_g.socket, "status", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &status))
		return;
	c->have_policy = rw_cli_agent_policy(rw_g.socket, status, c->ready ? c->revision : 0,
					     &c->policy) == 0;
	if (c->have_policy)
		snprintf(c->policy_file, sizeof(c->policy_file), "%s",
			 json_string_value(json_object_get(status, "policy_file")));
	json_decref(status);
}

static json_t *jstr_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

/* All entries of a map: keys and values side by side in two arrays. */
static int collect(int fd, size_t ks, size_t vs, void **keys, void **vals, size_t *n)
{
	__u8 *k = NULL, *v = NULL, cur[64], next[64];
	size_t cap = 0, cnt = 0;
	void *prev = NULL;

	*keys = *vals = NULL;
	*n = 0;
	if (ks > sizeof(next))
		return -E2BIG;
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(cur, next, ks);
		prev = cur;
		if (cnt == cap) {
			__u8 *gk, *gv;

			cap = cap ? cap * 2 : 64;
			gk = realloc(k, cap * ks);
			if (gk)
				k = gk;
			gv = gk ? realloc(v, cap * vs) : NULL;
			if (gv)
				v = gv;
			if (!gk || !gv) {
				free(k);
				free(v);
				return -ENOMEM;
			}
		}
		/* An entry deleted between the two calls is skipped. */
		if (bpf_map_lookup_elem(fd, cur, v + cnt * vs) == 0) {
			memcpy(k + cnt * ks, cur, ks);
			cnt++;
		}
	}
	*keys = k;
	*vals = v;
	*n = cnt;
	return 0;
}

/* A key's fields in sort order: where each is, how wide, and whether it is in network byte
 * order (compared byte by byte, most significant first: the order of ntohl()'s values) or a
 * host-order integer of 1, 2, 4 or 8 bytes. A zero width ends the list.
 */
struct key_field {
	unsigned char off, len;
	bool net;
};

/* clang-format off */
#define HOST(type, f) {offsetof(type, f), sizeof(((type *)0)->f), false}
#define NET(type, f)  {offsetof(type, f), sizeof(((type *)0)->f), true}

static const struct key_field order_u32[] = {{0, sizeof(__u32), false}, {}};
static const struct key_field order_be32[] = {{0, sizeof(__be32), true}, {}};
static const struct key_field order_ip6[] = {{0, 4 * sizeof(__be32), true}, {}};

/* The keys of both families sort the same way: the IPv6 one has a wider address. */
#define ALLOW_ORDER(t) {HOST(t, scope), NET(t, daddr), HOST(t, proto), NET(t, dport), {}}
static const struct key_field order_allow[] = ALLOW_ORDER(struct rw_allow_key);
static const struct key_field order_allow6[] = ALLOW_ORDER(struct rw_allow6_key);
#define ALLOW_LPM_ORDER(t) \
	{HOST(t, scope), NET(t, daddr), HOST(t, prefixlen), HOST(t, proto), NET(t, dport), {}}
static const struct key_field order_allow_lpm[] = ALLOW_LPM_ORDER(struct rw_allow_lpm_key);
static const struct key_field order_allow6_lpm[] = ALLOW_LPM_ORDER(struct rw_allow6_lpm_key);
#define CIDR_ORDER(t) {NET(t, addr), HOST(t, prefixlen), {}}
static const struct key_field order_cidr[] = CIDR_ORDER(struct rw_cidr_lpm_key);
static const struct key_field order_cidr6[] = CIDR_ORDER(struct rw_cidr6_lpm_key);
#define INBOUND_ORDER(t) {NET(t, saddr), HOST(t, prefixlen), HOST(t, proto), NET(t, dport), {}}
static const struct key_field order_inbound[] = INBOUND_ORDER(struct rw_inbound_lpm_key);
static const struct key_field order_inbound6[] = INBOUND_ORDER(struct rw_inbound6_lpm_key);
#define CT_ORDER(t) \
	{HOST(t, ifindex), NET(t, pod_ip), NET(t, peer_ip), HOST(t, proto), NET(t, peer_port), \
	 NET(t, pod_port), {}}
static const struct key_field order_ct[] = CT_ORDER(struct rw_ct_key);
static const struct key_field order_ct6[] = CT_ORDER(struct rw_ct6_key);
/* clang-format on */

static __u64 host_value(const __u8 *p, size_t len)
{
	__u16 v16;
	__u32 v32;
	__u64 v64;

	switch (len) {
	case 1:
		return *p;
	case 2:
		memcpy(&v16, p, sizeof(v16));
		return v16;
	case 4:
		memcpy(&v32, p, sizeof(v32));
		return v32;
	}
	memcpy(&v64, p, sizeof(v64));
	return v64;
}

/* qsort_r()'s comparison of two keys, field by field in the order `fields` gives. */
static int cmp_key(const void *a, const void *b, void *fields)
{
	for (const struct key_field *f = fields; f->len; f++) {
		const __u8 *x = (const __u8 *)a + f->off, *y = (const __u8 *)b + f->off;
		__u64 vx, vy;
		int c;

		if (f->net) {
			c = memcmp(x, y, f->len);
			if (c)
				return c;
			continue;
		}
		vx = host_value(x, f->len);
		vy = host_value(y, f->len);
		if (vx != vy)
			return vx < vy ? -1 : 1;
	}
	return 0;
}

/* Sorts n key/value pairs (keys[i] goes with vals[i]) by key, in the order `order` gives. */
static void sort_pairs(void *keys, void *vals, size_t n, size_t ks, size_t vs,
		       const struct key_field *order)
{
	size_t rs = ks + vs;
	__u8 *rec = malloc(n * rs + 1);

	if (!rec)
		return;
	for (size_t i = 0; i < n; i++) {
		memcpy(rec + i * rs, (__u8 *)keys + i * ks, ks);
		memcpy(rec + i * rs + ks, (__u8 *)vals + i * vs, vs);
	}
	qsort_r(rec, n, rs, cmp_key, (void *)order);
	for (size_t i = 0; i < n; i++) {
		memcpy((__u8 *)keys + i * ks, rec + i * rs, ks);
		memcpy((__u8 *)vals + i * vs, rec + i * rs + ks, vs);
	}
	free(rec);
}

/* Whether IPv6 address ip is in net/prefixlen. */
static bool in_cidr6(const __be32 ip[4], const __be32 net[4], unsigned int prefixlen)
{
	for (unsigned int w = 0; w < 4 && prefixlen > 32 * w; w++) {
		unsigned int bits = prefixlen - 32 * w;
		__u32 mask = bits >= 32 ? ~0u : ~0u << (32 - bits);

		if ((ntohl(ip[w]) & mask) != (ntohl(net[w]) & mask))
			return false;
	}
	return true;
}

static bool in_cidr(__be32 ip, __be32 net, unsigned int prefixlen)
{
	__u32 mask = prefixlen ? ~0u << (32 - prefixlen) : 0;

	return (ntohl(ip) & mask) == (ntohl(net) & mask);
}

/* Whether the key's address is in net/plen, of either family (an IPv6 key is in no IPv4 net). */
static bool key_in_net(const struct mkey *k, const struct rw_ip *net, unsigned int plen)
{
	if (net->family == AF_INET6)
		return k->ipv6 && in_cidr6(k->ip6, net->a, plen);
	return !k->ipv6 && in_cidr(k->ip, net->a[0], plen);
}

/* A CIDR map's prefix as text, its length always written: "10.0.0.0/8", "10.0.0.5/32",
 * "2001:db8::/32"; the address alone past the family's length (no such entry is written).
 */
static void net_str(const struct rw_ip *net, unsigned int plen, char *buf, size_t len)
{
	char a[RW_IP_STRLEN];

	rw_ip_str(net, a, sizeof(a));
	if (plen <= (net->family == AF_INET6 ? 128u : 32u))
		snprintf(buf, len, "%s/%u", a, plen);
	else
		snprintf(buf, len, "%s", a);
}

/* The fd of the live slot's inner map of a policy table (-ENOENT: not ready). */
static int live_fd(struct mctx *c, enum rw_map_id id)
{
	return rw_live_inner_fd(&c->dp, id);
}

/* What each_entry() calls for every entry, in order: 1 when it showed the entry, 0 when the
 * key passes it over.
 */
typedef int (*row_fn)(struct mctx *c, const struct mkey *k, const void *key, const void *val);

/* Every entry of map `id` (the live slot's inner map when `slotted`: none when the node has no
 * live slot), sorted in `order`, through `row` (with c->map = id): how many it showed, or a
 * negative errno.
 */
static int each_entry(struct mctx *c, const struct mkey *k, enum rw_map_id id, bool slotted,
		      size_t ks, size_t vs, const struct key_field *order, row_fn row)
{
	int fd = slotted ? live_fd(c, id) : c->dp.map_fd[id], shown = 0, err;
	void *keys, *vals;
	size_t n;

	if (slotted && fd == -ENOENT)
		return 0;
	if (slotted && fd < 0)
		return fd;
	err = collect(fd, ks, vs, &keys, &vals, &n);
	if (slotted)
		close(fd);
	if (err)
		return err;
	sort_pairs(keys, vals, n, ks, vs, order);
	c->map = id;
	for (size_t i = 0; i < n; i++)
		shown += row(c, k, (__u8 *)keys + i * ks, (__u8 *)vals + i * vs);
	free(keys);
	free(vals);
	return shown;
}

/* ---- one function per map: entries into c->entries (-j) or c->t (plain) ------------------- */

static int show_config(struct mctx *c, const struct mkey *k)
{
	char applied[40] = "";
	json_t *o;

	if (c->cfg.applied_ns)
		rw_format_time((int64_t)c->cfg.applied_ns + c->mono_to_real, applied,
			       sizeof(applied));
	o = json_pack("{s:b, s:I, s:i, s:I, s:i, s:i, s:i, s:o, s:I}", "ready", c->ready,
		      "revision", (json_int_t)RW_STATE_REVISION(c->cfg.state), "slot",
		      (int)RW_STATE_SLOT(c->cfg.state), "state", (json_int_t)c->cfg.state,
		      "layout_version", (int)c->cfg.layout_version, "event_rate",
		      (int)c->cfg.event_rate, "event_burst", (int)c->cfg.event_burst, "applied",
		      jstr_or_null(applied), "applied_ns", (json_int_t)c->cfg.applied_ns);
	json_object_set_new(o, "lease_seconds", json_integer(c->cfg.lease_seconds));
	json_object_set_new(o, "lease_deadline_ns",
			    json_integer((json_int_t)c->cfg.lease_deadline_ns));
	if (c->entries) {
		json_array_append_new(c->entries, o);
		return 1;
	}
	json_decref(o);
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "ready");
	rw_table_cell(&c->t, "%s",
		      c->ready ? "yes"
			       : "no (every sandbox packet is dropped: "
				 "not-ready)");
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "revision");
	rw_table_cell(&c->t, "%llu", (unsigned long long)RW_STATE_REVISION(c->cfg.state));
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "live slot");
	rw_table_cell(&c->t, "%u", RW_STATE_SLOT(c->cfg.state));
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "state");
	rw_table_cell(&c->t, "%#llx (revision << 8 | ready << 1 | slot)",
		      (unsigned long long)c->cfg.state);
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "applied");
	rw_table_cell(&c->t, "%s", applied[0] ? applied : "never");
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "layout version");
	rw_table_cell(&c->t, "%u", c->cfg.layout_version);
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "event budget");
	rw_table_cell(&c->t, "%u events/s per sandbox veth, burst %u", c->cfg.event_rate,
		      c->cfg.event_burst);
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "lease deadline");
	if (c->cfg.lease_deadline_ns)
		rw_table_cell(&c->t, "%llu ns (CLOCK_MONOTONIC), lease %u s",
			      (unsigned long long)c->cfg.lease_deadline_ns, c->cfg.lease_seconds);
	else
		rw_table_cell(&c->t, "none");
	return 1;
}

static int endpoint_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	__u32 ifindex = *(const __u32 *)key;
	const struct rw_endpoint *ep = val;
	bool has4 = ep->flags & RW_EP_IP4, has6 = ep->flags & RW_EP_IP6;
	char name[IF_NAMESIZE], pod[INET_ADDRSTRLEN] = "", pod6[INET6_ADDRSTRLEN] = "",
				gw6[INET6_ADDRSTRLEN] = "", both[80];
	struct rw_ip ip4 = rw_ip4(ep->pod_ip), ip6 = rw_ip6(ep->pod_ip6);
	const char *run = has4 ? run_of_pod(c, &ip4) : NULL;

	if (!run && has6)
		run = run_of_pod(c, &ip6);
	if (!k->any && !(k->has_ifindex && ifindex == k->ifindex) &&
	    !(has4 && key_is4(k, ep->pod_ip)) && !(has6 && key_is6(k, ep->pod_ip6)))
		return 0;
	ifname_of(ifindex, name);
	if (has4)
		rw_cli_ip(ep->pod_ip, pod, sizeof(pod));
	if (has6)
		rw_cli_ip6(ep->pod_ip6, pod6, sizeof(pod6));
	if (ep->flags & RW_EP_GW6)
		rw_cli_ip6(ep->gw_ip6, gw6, sizeof(gw6));
	if (c->entries) {
		json_array_append_new(c->entries,
				      json_pack("{s:i, s:s, s:o, s:o, s:o, s:o, s:i}", "ifindex",
						(int)ifindex, "ifname", name, "pod",
						jstr_or_null(pod), "pod6", jstr_or_null(pod6),
						"gw6", jstr_or_null(gw6), "run", jstr_or_null(run),
						"flags", (int)ep->flags));
		return 1;
	}
	snprintf(both, sizeof(both), "%s%s%s", pod, pod[0] && pod6[0] ? " " : "", pod6);
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%u", ifindex);
	rw_table_cell(&c->t, "%s", name);
	rw_table_cell(&c->t, "%s", both[0] ? both : "-");
	rw_table_cell(&c->t, "%s", run ? run : "- (in no run: unknown-source)");
	return 1;
}

static int show_endpoints(struct mctx *c, const struct mkey *k)
{
	return each_entry(c, k, RW_M_ENDPOINTS, false, sizeof(__u32), sizeof(struct rw_endpoint),
			  order_u32, endpoint_row);
}

/* One row of the pods maps, either family: the address as text, its veth (0: none). */
static int pod_row_of(struct mctx *c, const char *pod, __u32 ifindex, const struct rw_pod *v)
{
	const char *egress = rw_egress_name(v->egress_mode);

	if (c->entries) {
		json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:s, s:i}", "pod", pod, "run",
				      v->run_id, "idx", (int)v->run_idx, "gen", (int)v->run_gen,
				      "egress", egress, "ifindex", (int)ifindex);

		json_array_append_new(c->entries, o);
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%s", pod);
	rw_table_cell(&c->t, "%.*s", RW_RUN_ID_LEN, v->run_id);
	rw_table_cell(&c->t, "%u", v->run_idx);
	rw_table_cell(&c->t, "%u", v->run_gen);
	rw_table_cell(&c->t, "%s", egress);
	if (ifindex) {
		char name[IF_NAMESIZE];

		ifname_of(ifindex, name);
		rw_table_cell(&c->t, "%s (%u)", name, ifindex);
	} else {
		rw_table_cell(&c->t, "- (no veth bound)");
	}
	return 1;
}

static int pod_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	struct rw_ip ip = c->map == RW_M_PODS6 ? rw_ip6(key) : rw_ip4(*(const __be32 *)key);
	char pod[RW_IP_STRLEN];
	__u32 ifindex = 0;

	if (!k->any && !key_is(k, &ip))
		return 0;
	rw_ip_str(&ip, pod, sizeof(pod));
	rw_cli_pod_ifindex_of(&c->dp, &ip, &ifindex);
	return pod_row_of(c, pod, ifindex, val);
}

/* One row of the allow maps, exact or CIDR: 1, the row shown. */
static int allow_row(struct mctx *c, const char *kind, __u32 scope, const char *dst, __u8 proto,
		     __u16 port, __u32 rule_id)
{
	const char *run = scope ? run_of_idx(c, scope) : NULL;
	char rule[128];

	rule_name(c, rule_id, rule, sizeof(rule));
	if (c->entries) {
		json_array_append_new(c->entries,
				      json_pack("{s:s, s:s, s:o, s:i, s:s, s:s, s:i, s:i, s:s}",
						"kind", kind, "scope", scope ? "run" : "services",
						"run", jstr_or_null(run), "run_idx", (int)scope,
						"dst", dst, "proto", rw_proto_name(proto), "port",
						(int)port, "rule_id", (int)rule_id, "rule", rule));
		return 1;
	}
	rw_table_row(&c->t);
	if (!scope)
		rw_table_cell(&c->t, "services");
	else
		rw_table_cell(&c->t, "run %s", run ? run : "?");
	rw_table_cell(&c->t, "%s", dst);
	rw_table_cell(&c->t, "%s/%u", rw_proto_name(proto), port);
	rw_table_cell(&c->t, "%s", kind);
	rw_table_cell(&c->t, "%s", rule);
	return 1;
}

static bool port_proto_match(const struct mkey *k, __u8 proto, __u16 port)
{
	return (!k->port || k->port == port) && (!k->proto || k->proto == proto);
}

/* An entry of the allow maps as the rows need it: dst alone (exact) or dst/plen (cidr). */
struct allow_entry {
	struct rw_ip dst;
	unsigned int plen;
	__u32 scope;
	__u8 proto;
	__u16 port; /* host order */
};

/* The fields every one of the four allow keys has by the same name, its address through ip_of
 * (rw_ip4 or rw_ip6).
 */
#define ALLOW_ENTRY(key, ip_of, plen)                                                  \
	((struct allow_entry){ip_of((key)->daddr), (plen), (key)->scope, (key)->proto, \
			      ntohs((key)->dport)})

/* An entry of any of the allow maps, exact or CIDR, either family: c->map says which key. */
static int allow_entry_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	const struct rw_allow_key *ak = key;
	const struct rw_allow6_key *ak6 = key;
	const struct rw_allow_lpm_key *lk = key;
	const struct rw_allow6_lpm_key *lk6 = key;
	bool cidr = c->map == RW_M_ALLOW_CIDR || c->map == RW_M_ALLOW_CIDR6;
	struct allow_entry e;
	char dst[RW_IP_STRLEN + 8];

	if (c->map == RW_M_ALLOW_EXACT)
		e = ALLOW_ENTRY(ak, rw_ip4, 0);
	else if (c->map == RW_M_ALLOW_EXACT6)
		e = ALLOW_ENTRY(ak6, rw_ip6, 0);
	else if (c->map == RW_M_ALLOW_CIDR)
		e = ALLOW_ENTRY(lk, rw_ip4, lk->prefixlen - RW_ALLOW_LPM_FIXED_BITS);
	else
		e = ALLOW_ENTRY(lk6, rw_ip6, lk6->prefixlen - RW_ALLOW_LPM_FIXED_BITS);
	if (!k->any && (!(cidr ? key_in_net(k, &e.dst, e.plen) : key_is(k, &e.dst)) ||
			!port_proto_match(k, e.proto, e.port)))
		return 0;
	if (cidr)
		net_str(&e.dst, e.plen, dst, sizeof(dst));
	else
		rw_ip_str(&e.dst, dst, sizeof(dst));
	return allow_row(c, cidr ? "cidr" : "exact", e.scope, dst, e.proto, e.port,
			 ((const struct rw_rule *)val)->rule_id);
}

/* An entry of the deny maps, either family: c->map says which key. */
static int deny_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	const struct rw_cidr_lpm_key *dk = key;
	const struct rw_cidr6_lpm_key *dk6 = key;
	bool ipv6 = c->map == RW_M_DENY6;
	struct rw_ip net = ipv6 ? rw_ip6(dk6->addr) : rw_ip4(dk->addr);
	unsigned int plen = ipv6 ? dk6->prefixlen : dk->prefixlen;
	char cidr[RW_IP_STRLEN + 8];

	if (!k->any && !key_in_net(k, &net, plen))
		return 0;
	net_str(&net, plen, cidr, sizeof(cidr));
	if (c->entries) {
		json_array_append_new(c->entries, json_pack("{s:s}", "cidr", cidr));
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%s", cidr);
	return 1;
}

/* An entry of the inbound maps, either family: c->map says which key. */
static int inbound_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	const struct rw_inbound_lpm_key *ik = key;
	const struct rw_inbound6_lpm_key *ik6 = key;
	bool ipv6 = c->map == RW_M_INBOUND6;
	struct rw_ip net = ipv6 ? rw_ip6(ik6->saddr) : rw_ip4(ik->saddr);
	unsigned int plen = (ipv6 ? ik6->prefixlen : ik->prefixlen) - RW_INBOUND_LPM_FIXED_BITS;
	__u16 port = ntohs(ipv6 ? ik6->dport : ik->dport);
	__u8 proto = ipv6 ? ik6->proto : ik->proto;
	__u32 rule_id = ((const struct rw_rule *)val)->rule_id;
	char peer[RW_IP_STRLEN + 8], rule[128];

	if (!k->any && (!key_in_net(k, &net, plen) || !port_proto_match(k, proto, port)))
		return 0;
	net_str(&net, plen, peer, sizeof(peer));
	rule_name(c, rule_id, rule, sizeof(rule));
	if (c->entries) {
		json_array_append_new(c->entries,
				      json_pack("{s:s, s:s, s:i, s:i, s:s}", "peer", peer, "proto",
						rw_proto_name(proto), "port", (int)port, "rule_id",
						(int)rule_id, "rule", rule));
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%s", peer);
	rw_table_cell(&c->t, "%s/%u", rw_proto_name(proto), port);
	rw_table_cell(&c->t, "%s", rule);
	return 1;
}

/* An address and a port (host order) as `map` prints a flow's end: "10.0.0.5:443",
 * "[2600::7]:443", the address alone when the port is 0.
 */
static void flow_end_str(const struct rw_ip *ip, __u16 port, char *buf, size_t len)
{
	if (port)
		rw_ip_port_str(ip, port, buf, len);
	else
		rw_ip_str(ip, buf, len);
}

/* One flow of either family: key is a struct rw_ct6_key when ipv6, else a struct rw_ct_key. */
static int conntrack_row(struct mctx *c, const struct mkey *k, bool ipv6, const void *key,
			 const struct rw_ct_value *cv)
{
	const struct rw_ct_key *ck = key;
	const struct rw_ct6_key *ck6 = key;
	struct rw_ip pod_ip = ipv6 ? rw_ip6(ck6->pod_ip) : rw_ip4(ck->pod_ip),
		     peer_ip = ipv6 ? rw_ip6(ck6->peer_ip) : rw_ip4(ck->peer_ip);
	__u32 ifindex = ipv6 ? ck6->ifindex : ck->ifindex;
	__u16 pod_port = ntohs(ipv6 ? ck6->pod_port : ck->pod_port),
	      peer_port = ntohs(ipv6 ? ck6->peer_port : ck->peer_port);
	__u8 proto = ipv6 ? ck6->proto : ck->proto;
	__u64 age = c->now_mono > cv->created_ns ? c->now_mono - cv->created_ns : 0;
	/* Active since the agent's last expiry pass: idle for less than a resync. */
	__u64 idle = !cv->active && c->now_mono > cv->seen_ns ? c->now_mono - cv->seen_ns : 0;
	char name[IF_NAMESIZE], rule[128], sage[16], sidle[16];
	char pod[RW_IP_PORT_STRLEN], peer[RW_IP_PORT_STRLEN], spod[RW_IP_STRLEN],
		speer[RW_IP_STRLEN];
	const char *by = cv->opened_by == RW_DIR_EGRESS ? "pod" : "peer";
	const char *run = run_of_pod(c, &pod_ip);
	/* What the datapath saw of a TCP connection's close (bpf/conntrack.h) */
	const char *closing = cv->rst			    ? "rst"
			      : cv->fin_pod && cv->fin_peer ? "fin"
			      : cv->fin_pod		    ? "fin-pod"
			      : cv->fin_peer		    ? "fin-peer"
							    : NULL;

	if (!k->any && !key_is(k, &pod_ip) && !key_is(k, &peer_ip))
		return 0;
	ifname_of(ifindex, name);
	rule_name(c, cv->rule_id, rule, sizeof(rule));
	rw_cli_duration(age, sage, sizeof(sage));
	rw_cli_duration(idle, sidle, sizeof(sidle));
	if (c->entries) {
		json_t *o = json_pack(
			"{s:i, s:s, s:s, s:i, s:s, s:i, s:s, s:o, s:s, s:o, s:I, "
			"s:I, s:i, s:s}",
			"ifindex", (int)ifindex, "ifname", name, "pod",
			rw_ip_str(&pod_ip, spod, sizeof(spod)), "pod_port", (int)pod_port, "peer",
			rw_ip_str(&peer_ip, speer, sizeof(speer)), "peer_port", (int)peer_port,
			"proto", rw_proto_name(proto), "run", jstr_or_null(run), "opened_by", by,
			"closing", jstr_or_null(closing), "age_ms", (json_int_t)(age / 1000000),
			"idle_ms", (json_int_t)(idle / 1000000), "rule_id", (int)cv->rule_id,
			"rule", rule);

		json_array_append_new(c->entries, o);
		return 1;
	}
	flow_end_str(&pod_ip, pod_port, pod, sizeof(pod));
	flow_end_str(&peer_ip, peer_port, peer, sizeof(peer));
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%s", name);
	rw_table_cell(&c->t, "%s", pod);
	rw_table_cell(&c->t, "%s", peer);
	rw_table_cell(&c->t, "%s", rw_proto_name(proto));
	rw_table_cell(&c->t, "%s", by);
	rw_table_cell(&c->t, "%s", sage);
	rw_table_cell(&c->t, "%s", sidle);
	rw_table_cell(&c->t, "%s", run ? run : "-");
	rw_table_cell(&c->t, "%s", rule);
	return 1;
}

/* rw_conntrack and rw_conntrack6 hold one table per sandbox veth and family: the entries of
 * each, veth by veth, IPv4 first.
 */
static int show_conntrack(struct mctx *c, const struct mkey *k)
{
	int shown = 0, err = 0;

	for (int ipv6 = 0; ipv6 < 2 && !err; ipv6++) {
		const size_t ks = ipv6 ? sizeof(struct rw_ct6_key) : sizeof(struct rw_ct_key),
			     vs = sizeof(struct rw_ct_value);
		void *veths, *ids, *keys, *vals;
		size_t n_veths, n;

		err = collect(c->dp.map_fd[ipv6 ? RW_M_CONNTRACK6 : RW_M_CONNTRACK], sizeof(__u32),
			      sizeof(__u32), &veths, &ids, &n_veths);
		if (err)
			return err;
		sort_pairs(veths, ids, n_veths, sizeof(__u32), sizeof(__u32), order_u32);
		for (size_t i = 0; i < n_veths && err == 0; i++) {
			__u32 ifindex = ((__u32 *)veths)[i];
			int fd = ipv6 ? rw_conntrack6_table_fd(&c->dp, ifindex)
				      : rw_conntrack_table_fd(&c->dp, ifindex);

			if (fd < 0)
				continue; /* gone since the walk */
			err = collect(fd, ks, vs, &keys, &vals, &n);
			close(fd);
			if (err)
				break;
			sort_pairs(keys, vals, n, ks, vs, ipv6 ? order_ct6 : order_ct);
			for (size_t j = 0; j < n; j++)
				shown += conntrack_row(c, k, ipv6, (__u8 *)keys + j * ks,
						       (const void *)((__u8 *)vals + j * vs));
			free(keys);
			free(vals);
		}
		free(veths);
		free(ids);
	}
	return err ? err : shown;
}

static bool counters_zero(const struct rw_counters *s)
{
	static const struct rw_counters zero;

	return !memcmp(s, &zero, sizeof(zero));
}

static int show_counters(struct mctx *c, const struct mkey *k)
{
	__u32 max = rw_map_max_entries(c->dp.map_fd[RW_M_COUNTERS]);
	int shown = 0, err;

	for (__u32 idx = 0; idx < max; idx++) {
		const char *run = idx ? run_of_idx(c, idx) : NULL;
		struct rw_counters s;

		if (!k->any && idx != k->idx)
			continue;
		err = rw_counters_read(&c->dp, idx, &s);
		if (err)
			return err;
		/* Indexes of no live run with nothing counted are unused. */
		if (k->any && idx && !run && counters_zero(&s))
			continue;
		shown++;
		if (c->entries) {
			json_t *o =
				json_pack("{s:i, s:o}", "idx", (int)idx, "run", jstr_or_null(run));
			json_t *v = rw_cli_counters_json(&s);

			json_object_update(o, v);
			json_decref(v);
			json_array_append_new(c->entries, o);
			continue;
		}
		if (!idx)
			printf("idx 0: node (every sandbox)\n");
		else
			printf("idx %u: %s%s\n", idx, run ? "run " : "",
			       run ? run
				   : "no live run (counters of a run gone from the snapshot)");
		rw_cli_counters_print(stdout, &s, "  ");
	}
	return shown;
}

/* Events a GCRA bucket (struct rw_budget) would let through now. */
static __u64 budget_left(const struct rw_config *cfg, __u64 tat, __u64 now_mono)
{
	__u64 now = RW_BUDGET_TICKS(now_mono, cfg->event_rate);

	if (tat <= now)
		return cfg->event_burst;
	return tat - now >= cfg->event_burst ? 0 : cfg->event_burst - (tat - now);
}

static int budget_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	__u32 ifindex = *(const __u32 *)key;
	const struct rw_budget *b = val;
	__u64 drops = budget_left(&c->cfg, b->tat[RW_BUDGET_DROP], c->now_mono);
	__u64 flows = budget_left(&c->cfg, b->tat[RW_BUDGET_FLOW], c->now_mono);
	char name[IF_NAMESIZE];

	if (!k->any && ifindex != k->ifindex)
		return 0;
	ifname_of(ifindex, name);
	if (c->entries) {
		json_t *o = json_pack("{s:i, s:s, s:I, s:I}", "ifindex", (int)ifindex, "ifname",
				      name, "drop_events_left", (json_int_t)drops,
				      "flow_events_left", (json_int_t)flows);

		json_array_append_new(c->entries, o);
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%u", ifindex);
	rw_table_cell(&c->t, "%s", name);
	rw_table_cell(&c->t, "%llu", (unsigned long long)drops);
	rw_table_cell(&c->t, "%llu", (unsigned long long)flows);
	return 1;
}

/* Every bound veth's bucket (at its veth index, rw_veth_budget) and every other veth's that has
 * one (rw_event_budget), once each, by ifindex.
 */
static int show_budget(struct mctx *c, const struct mkey *k)
{
	static const enum rw_map_id from[2] = {RW_M_ENDPOINTS, RW_M_EVENT_BUDGET};
	static const size_t vs[2] = {sizeof(struct rw_endpoint), sizeof(struct rw_budget)};
	struct rw_budget *buckets = NULL;
	__u32 *ifindexes = NULL;
	size_t n = 0;
	int err = 0, shown = 0;

	for (int m = 0; m < 2 && !err; m++) {
		void *keys, *vals;
		size_t got;
		__u32 *ni;
		struct rw_budget *nb;

		err = collect(c->dp.map_fd[from[m]], sizeof(__u32), vs[m], &keys, &vals, &got);
		if (err)
			break;
		ni = realloc(ifindexes, (n + got) * sizeof(*ni) + 1);
		nb = ni ? realloc(buckets, (n + got) * sizeof(*nb) + 1) : NULL;
		if (ni)
			ifindexes = ni;
		if (nb)
			buckets = nb;
		for (size_t i = 0; nb && i < got; i++) {
			__u32 ifindex = ((__u32 *)keys)[i];
			bool seen = false;

			for (size_t j = 0; j < n && !seen; j++)
				seen = ifindexes[j] == ifindex;
			if (!seen && rw_budget_get(&c->dp, ifindex, &buckets[n]) == 0)
				ifindexes[n++] = ifindex;
		}
		if (!nb)
			err = -ENOMEM;
		free(keys);
		free(vals);
	}
	if (!err) {
		sort_pairs(ifindexes, buckets, n, sizeof(*ifindexes), sizeof(*buckets), order_u32);
		for (size_t i = 0; i < n; i++)
			shown += budget_row(c, k, &ifindexes[i], &buckets[i]);
	}
	free(ifindexes);
	free(buckets);
	return err ? err : shown;
}

/* rw_ll6: the one link-local address each sandbox veth's pod speaks NDP from (bpf/icmp6.h). */
static int ll6_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	__u32 ifindex = *(const __u32 *)key;
	char name[IF_NAMESIZE], addr[INET6_ADDRSTRLEN];

	if (!k->any && ifindex != k->ifindex)
		return 0;
	ifname_of(ifindex, name);
	inet_ntop(AF_INET6, val, addr, sizeof(addr));
	if (c->entries) {
		json_array_append_new(c->entries,
				      json_pack("{s:i, s:s, s:s}", "ifindex", (int)ifindex,
						"ifname", name, "link_local", addr));
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%u", ifindex);
	rw_table_cell(&c->t, "%s", name);
	rw_table_cell(&c->t, "%s", addr);
	return 1;
}

static int show_ll6(struct mctx *c, const struct mkey *k)
{
	return each_entry(c, k, RW_M_LL6, false, sizeof(__u32), 4 * sizeof(__be32), order_u32,
			  ll6_row);
}

/* rw_from and rw_admit (principals.md): the live slot's rules with a "from", each followed by the
 * containers admitted to it (their cgroup ids and the veth of their pod). Both maps hold both
 * slots; the idle slot's entries are the next apply's to replace, not shown.
 */
static const struct key_field order_admit[] = {
	HOST(struct rw_admit_key, rule_id), HOST(struct rw_admit_key, cgroup_id), {}};
static const struct key_field order_from[] = {HOST(struct rw_from_key, rule_id), {}};

static int principal_row(struct mctx *c, __u32 rule_id, const struct rw_from *f,
			 const struct rw_admit_key *ak, const struct rw_admit *a)
{
	char rule[256], uids[96] = "", name[IF_NAMESIZE] = "";
	size_t at = 0;

	rule_name(c, rule_id | RW_RULE_FROM, rule, sizeof(rule));
	for (__u32 i = 0; f && i < f->n_uids && i < RW_FROM_UIDS; i++)
		at += snprintf(uids + at, sizeof(uids) - at, "%s%u", i ? "," : "", f->uids[i]);
	if (a)
		ifname_of(a->ifindex, name);
	if (c->entries) {
		json_t *o = json_pack("{s:i, s:I, s:s}", "slot", (int)c->slot, "rule_id",
				      (json_int_t)(rule_id | RW_RULE_FROM), "rule", rule);
		json_t *u = json_array();

		if (f) {
			for (__u32 i = 0; i < f->n_uids && i < RW_FROM_UIDS; i++)
				json_array_append_new(u, json_integer(f->uids[i]));
			json_object_set_new(o, "uids", u);
			json_object_set_new(o, "containers",
					    json_boolean(f->flags & RW_FROM_CONTAINER));
		} else {
			json_decref(u);
			json_object_set_new(o, "cgroup_id",
					    json_integer((json_int_t)ak->cgroup_id));
			json_object_set_new(o, "ifindex", json_integer(a->ifindex));
			json_object_set_new(o, "ifname", json_string(name));
		}
		json_array_append_new(c->entries, o);
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%s", rule);
	if (f) {
		rw_table_cell(&c->t, "%s", uids[0] ? uids : "any");
		rw_table_cell(&c->t, "%s", f->flags & RW_FROM_CONTAINER ? "admitted:" : "any");
		rw_table_cell(&c->t, "-");
	} else {
		rw_table_cell(&c->t, "%s", "");
		rw_table_cell(&c->t, "%llu", (unsigned long long)ak->cgroup_id);
		rw_table_cell(&c->t, "%s", name);
	}
	return 1;
}

static int show_principals(struct mctx *c, const struct mkey *k)
{
	void *fkeys = NULL, *fvals = NULL, *akeys = NULL, *avals = NULL;
	size_t nf = 0, na = 0;
	int err, shown = 0;

	(void)k;
	err = collect(c->dp.map_fd[RW_M_FROM], sizeof(struct rw_from_key), sizeof(struct rw_from),
		      &fkeys, &fvals, &nf);
	if (!err)
		err = collect(c->dp.map_fd[RW_M_ADMIT], sizeof(struct rw_admit_key),
			      sizeof(struct rw_admit), &akeys, &avals, &na);
	if (!err) {
		sort_pairs(fkeys, fvals, nf, sizeof(struct rw_from_key), sizeof(struct rw_from),
			   order_from);
		sort_pairs(akeys, avals, na, sizeof(struct rw_admit_key), sizeof(struct rw_admit),
			   order_admit);
	}
	for (size_t i = 0; !err && i < nf; i++) {
		const struct rw_from_key *fk = (const struct rw_from_key *)fkeys + i;

		if (fk->slot != c->slot)
			continue;
		shown += principal_row(c, fk->rule_id, (const struct rw_from *)fvals + i, NULL,
				       NULL);
		for (size_t j = 0; j < na; j++) {
			const struct rw_admit_key *ak = (const struct rw_admit_key *)akeys + j;

			if (ak->slot == c->slot && ak->rule_id == fk->rule_id)
				shown += principal_row(c, fk->rule_id, NULL, ak,
						       (const struct rw_admit *)avals + j);
		}
	}
	free(fkeys);
	free(fvals);
	free(akeys);
	free(avals);
	return err ? err : shown;
}

/* rw_run_revs: per run index, the revision its cached verdicts must be stamped at or after.
 * Indexes no live run holds are left out of a dump (the array has RW_MAX_RUNS entries).
 */
static int revs_row(struct mctx *c, const struct mkey *k, const void *key, const void *val)
{
	__u32 idx = *(const __u32 *)key;
	__u64 rev = *(const __u64 *)val;
	const char *run = idx ? run_of_idx(c, idx) : NULL;

	if (k->any ? !run : idx != k->idx)
		return 0;
	if (c->entries) {
		json_array_append_new(c->entries,
				      json_pack("{s:i, s:o, s:I}", "idx", (int)idx, "run",
						jstr_or_null(run), "revision", (json_int_t)rev));
		return 1;
	}
	rw_table_row(&c->t);
	rw_table_cell(&c->t, "%u", idx);
	rw_table_cell(&c->t, "%s", run ? run : "-");
	rw_table_cell(&c->t, "%llu", (unsigned long long)rev);
	return 1;
}

static int show_revs(struct mctx *c, const struct mkey *k)
{
	return each_entry(c, k, RW_M_RUN_REVS, false, sizeof(__u32), sizeof(__u64), order_u32,
			  revs_row);
}

/* rw_progs6 and rw_progs_icmp6: the IPv6 program each direction tail-calls, and the ICMPv6
 * program each IPv6 one tail-calls (an ID: the kernel's lookup answer).
 */
static int show_progs(struct mctx *c, const struct mkey *k)
{
	static const int arrays[] = {RW_M_PROGS6, RW_M_PROGS_ICMP6};
	int shown = 0;

	for (size_t m = 0; m < sizeof(arrays) / sizeof(arrays[0]); m++)
		for (__u32 d = 0; d < RW_DIR_COUNT; d++) {
			struct bpf_prog_info info = {};
			__u32 id, len = sizeof(info);
			int fd;

			if (bpf_map_lookup_elem(c->dp.map_fd[arrays[m]], &d, &id))
				continue;
			fd = bpf_prog_get_fd_by_id(id);
			if (fd >= 0) {
				bpf_obj_get_info_by_fd(fd, &info, &len);
				close(fd);
			}
			if (c->entries) {
				json_array_append_new(c->entries,
						      json_pack("{s:s, s:s, s:I, s:s}", "map",
								rw_map_names[arrays[m]], "dir",
								rw_dir_name(d), "prog_id",
								(json_int_t)id, "prog", info.name));
			} else {
				rw_table_row(&c->t);
				rw_table_cell(&c->t, "%s", rw_dir_name(d));
				rw_table_cell(&c->t, "%u", id);
				rw_table_cell(&c->t, "%s", info.name);
			}
			shown++;
		}
	return shown;
}

/* The policy maps' keys and values (the live slot's inner maps, in pairs IPv4 and IPv6) and the
 * order `map` shows their entries in; 0s for the other maps.
 */
static const struct {
	size_t ks, vs;
	const struct key_field *order;
} layouts[RW_M__COUNT] = {
	[RW_M_PODS] = {sizeof(__be32), sizeof(struct rw_pod), order_be32},
	[RW_M_PODS6] = {4 * sizeof(__be32), sizeof(struct rw_pod), order_ip6},
	[RW_M_ALLOW_EXACT] = {sizeof(struct rw_allow_key), sizeof(struct rw_rule), order_allow},
	[RW_M_ALLOW_CIDR] = {sizeof(struct rw_allow_lpm_key), sizeof(struct rw_rule),
			     order_allow_lpm},
	[RW_M_ALLOW_EXACT6] = {sizeof(struct rw_allow6_key), sizeof(struct rw_rule), order_allow6},
	[RW_M_ALLOW_CIDR6] = {sizeof(struct rw_allow6_lpm_key), sizeof(struct rw_rule),
			      order_allow6_lpm},
	[RW_M_DENY] = {sizeof(struct rw_cidr_lpm_key), sizeof(__u32), order_cidr},
	[RW_M_DENY6] = {sizeof(struct rw_cidr6_lpm_key), sizeof(__u32), order_cidr6},
	[RW_M_INBOUND] = {sizeof(struct rw_inbound_lpm_key), sizeof(struct rw_rule), order_inbound},
	[RW_M_INBOUND6] = {sizeof(struct rw_inbound6_lpm_key), sizeof(struct rw_rule),
			   order_inbound6},
};

/* What `map` shows of a policy table: each entry of the maps of `walk` in turn (a list shorter
 * than 4 ends with 0s, RW_M_CONFIG, which has no layout) through one row function, which reads
 * c->map for the key it is given.
 */
struct listing {
	row_fn row;
	enum rw_map_id walk[4];
};

/* The policy tables, each under its first map's name. */
static const struct listing listings[RW_M__COUNT] = {
	[RW_M_PODS] = {pod_row, {RW_M_PODS, RW_M_PODS6}},
	[RW_M_ALLOW_EXACT] = {allow_entry_row,
			      {RW_M_ALLOW_EXACT, RW_M_ALLOW_CIDR, RW_M_ALLOW_EXACT6,
			       RW_M_ALLOW_CIDR6}},
	[RW_M_DENY] = {deny_row, {RW_M_DENY, RW_M_DENY6}},
	[RW_M_INBOUND] = {inbound_row, {RW_M_INBOUND, RW_M_INBOUND6}},
};

/* The policy table of c->map (listings[]): how many entries it showed, or the first negative
 * errno.
 */
static int show_listing(struct mctx *c, const struct mkey *k)
{
	const struct listing *l = &listings[c->map];
	int shown = 0;

	for (size_t i = 0; i < 4 && layouts[l->walk[i]].ks; i++) {
		enum rw_map_id id = l->walk[i];
		int r = each_entry(c, k, id, true, layouts[id].ks, layouts[id].vs,
				   layouts[id].order, l->row);

		if (r < 0)
			return r;
		shown += r;
	}
	return shown;
}

/* ---- the subcommands ---------------------------------------------------------------------- */

static const struct {
	int (*show)(struct mctx *c, const struct mkey *k);
	const char *const heads[9];
	size_t ncols;
	unsigned int right;
	bool slotted;	 /* read in the live slot */
	bool rules;	 /* has rule ids to name */
	const char *key; /* what lookup takes */
} maps[RW_M__COUNT] = {
	[RW_M_CONFIG] = {show_config, {"FIELD", "VALUE"}, 2, 0, false, false, ""},
	[RW_M_ENDPOINTS] = {show_endpoints,
			    {"IFINDEX", "IFNAME", "POD", "RUN"},
			    4,
			    RW_TABLE_RIGHT(0),
			    false,
			    false,
			    "IFINDEX|IFNAME|POD-IP"},
	[RW_M_PODS] = {show_listing,
		       {"POD", "RUN", "IDX", "GEN", "EGRESS", "VETH"},
		       6,
		       RW_TABLE_RIGHT(2) | RW_TABLE_RIGHT(3),
		       true,
		       false,
		       "POD-IP"},
	[RW_M_ALLOW_EXACT] = {show_listing,
			      {"SCOPE", "DST", "PORT", "KIND", "RULE"},
			      5,
			      0,
			      true,
			      true,
			      "IP[:PORT] [tcp|udp]"},
	[RW_M_DENY] = {show_listing, {"CIDR"}, 1, 0, true, false, "IP"},
	[RW_M_INBOUND] = {show_listing,
			  {"PEER", "PORT", "RULE"},
			  3,
			  0,
			  true,
			  true,
			  "PEER-IP[:PORT] [tcp|udp]"},
	[RW_M_CONNTRACK] = {show_conntrack,
			    {"VETH", "POD", "PEER", "PROTO", "OPENED-BY", "AGE", "IDLE", "RUN",
			     "RULE"},
			    9,
			    RW_TABLE_RIGHT(5) | RW_TABLE_RIGHT(6),
			    false,
			    true,
			    "IP"},
	[RW_M_COUNTERS] = {show_counters, {""}, 0, 0, false, false, "RUN-ID|IDX|node"},
	[RW_M_EVENT_BUDGET] = {show_budget,
			       {"IFINDEX", "IFNAME", "DROP-EVENTS", "FLOW-EVENTS"},
			       4,
			       RW_TABLE_RIGHT(0) | RW_TABLE_RIGHT(2) | RW_TABLE_RIGHT(3),
			       false,
			       false,
			       "IFINDEX|IFNAME"},
	[RW_M_LL6] = {show_ll6,
		      {"IFINDEX", "IFNAME", "LINK-LOCAL"},
		      3,
		      RW_TABLE_RIGHT(0),
		      false,
		      false,
		      "IFINDEX|IFNAME"},
	[RW_M_FROM] = {show_principals,
		       {"RULE", "UIDS", "CONTAINERS", "CGROUP", "VETH"},
		       5,
		       RW_TABLE_RIGHT(3),
		       false,
		       false,
		       ""},
	[RW_M_PROGS6] =
		{show_progs, {"DIR", "PROG-ID", "PROGRAM"}, 3, RW_TABLE_RIGHT(1), false, false, ""},
	[RW_M_RUN_REVS] = {show_revs,
			   {"IDX", "RUN", "REVISION"},
			   3,
			   RW_TABLE_RIGHT(0) | RW_TABLE_RIGHT(2),
			   false,
			   false,
			   "RUN-ID|IDX"},
};

/* An address of either family into the key: 0 or -EINVAL. */
static int key_set(struct mkey *k, const struct rw_ip *ip)
{
	k->has_ip = true;
	k->ipv6 = ip->family == AF_INET6;
	if (k->ipv6)
		memcpy(k->ip6, ip->a, sizeof(k->ip6));
	else
		k->ip = ip->a[0];
	return 0;
}

static int key_ip(const char *s, struct mkey *k)
{
	struct rw_ip ip;

	return rw_ip_parse(s, &ip) ? -EINVAL : key_set(k, &ip);
}

/* "IP", "IP:PORT", "ADDR6", "[ADDR6]", "[ADDR6]:PORT". */
static int key_ip_port(const char *s, struct mkey *k)
{
	struct rw_ip ip;

	return rw_ip_port_parse(s, &ip, &k->port) ? -EINVAL : key_set(k, &ip);
}

/* "map lookup MAP: MESSAGE" through rw_fail(): what `map lookup` refuses, with `code`. */
static int lookup_fail(enum rw_map_id map, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int lookup_fail(enum rw_map_id map, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rw_fail(code, "map lookup %s: %s", rw_map_shown_names[map], msg);
}

/* An interface by its index or its name, as the key of `map lookup MAP`. */
static int key_ifindex(enum rw_map_id map, const char *s, struct mkey *k)
{
	unsigned long long v;

	if (rw_parse_uint(s, 0xffffffffULL, &v) == 0) {
		k->ifindex = (__u32)v;
	} else {
		k->ifindex = if_nametoindex(s);
		if (!k->ifindex)
			return lookup_fail(map, RW_EXIT_REFUSED,
					   "no interface '%s' in this network namespace", s);
	}
	k->has_ifindex = true;
	return 0;
}

static int parse_key(struct mctx *c, enum rw_map_id map, int argc, char **argv, struct mkey *k)
{
	const char *s = argv[0];
	unsigned long long v;

	memset(k, 0, sizeof(*k));
	k->text = s;
	switch (map) {
	case RW_M_CONFIG:
		k->any = true;
		return 0;
	case RW_M_PODS:
	case RW_M_DENY:
	case RW_M_CONNTRACK:
	case RW_M_ENDPOINTS:
	case RW_M_EVENT_BUDGET:
	case RW_M_LL6:
		if (argc > 1)
			return lookup_fail(map, RW_EXIT_USAGE, "one key, %s", maps[map].key);
		if (map == RW_M_EVENT_BUDGET || map == RW_M_LL6)
			return key_ifindex(map, s, k);
		if (key_ip(s, k) == 0)
			return 0;
		if (map == RW_M_ENDPOINTS)
			return key_ifindex(map, s, k);
		return lookup_fail(map, RW_EXIT_USAGE, "'%s' is not an IP address", s);
	case RW_M_ALLOW_EXACT:
	case RW_M_INBOUND:
		if (argc > 2)
			return lookup_fail(map, RW_EXIT_USAGE, "the key is %s", maps[map].key);
		if (key_ip_port(s, k))
			return lookup_fail(map, RW_EXIT_USAGE,
					   "'%s' is not IP or IP:PORT (IPv6: ADDR or [ADDR]:PORT)",
					   s);
		if (argc == 2 && rw_parse_proto(argv[1], &k->proto))
			return lookup_fail(map, RW_EXIT_USAGE,
					   "unknown protocol '%s'; valid: tcp, udp", argv[1]);
		return 0;
	case RW_M_COUNTERS:
	case RW_M_RUN_REVS: {
		int i;

		if (argc > 1)
			return rw_fail(RW_EXIT_USAGE, "map lookup counters: one key, %s",
				       maps[map].key);
		k->has_idx = true;
		if (!strcmp(s, "node")) {
			k->idx = 0;
			return 0;
		}
		if (rw_parse_uint(s, RW_MAX_RUNS - 1, &v) == 0) {
			k->idx = (__u32)v;
			return 0;
		}
		i = rw_live_run_find(c->runs, c->n_runs, s, 0);
		if (i < 0)
			return rw_fail(RW_EXIT_REFUSED,
				       "map lookup counters: no run '%s' in the live slot%s", s,
				       c->ready ? "" : " (the node is not ready)");
		k->idx = c->runs[i].idx;
		return 0;
	}
	default:
		return rw_fail(RW_EXIT_USAGE, "map lookup: cannot look up %s",
			       rw_map_shown_names[map]);
	}
}

static void title(struct mctx *c, enum rw_map_id map, int shown, const struct mkey *k)
{
	char where[160] = "";

	if (maps[map].slotted) {
		if (c->ready)
			snprintf(where, sizeof(where), ", live slot %u, revision %llu", c->slot,
				 (unsigned long long)c->revision);
		else
			snprintf(where, sizeof(where), ", node not ready: no live slot");
	}
	if (k->any)
		printf("%s%s: %d entr%s\n", rw_map_shown_names[map], where, shown,
		       shown == 1 ? "y" : "ies");
	else
		printf("%s%s: %d entr%s for %s\n", rw_map_shown_names[map], where, shown,
		       shown == 1 ? "y" : "ies", k->text);
}

static int show(struct mctx *c, enum rw_map_id map, const struct mkey *k, bool lookup)
{
	int shown;

	if (rw_g.json)
		c->entries = json_array();
	else
		rw_table_init(&c->t, maps[map].ncols, maps[map].heads, maps[map].right);
	if (maps[map].rules)
		load_policy(c);
	if (!rw_g.json && map == RW_M_COUNTERS)
		printf("counters (summed over CPUs; idx 0 is the node, the others runs)\n");
	c->map = map;
	shown = maps[map].show(c, k);
	if (shown < 0 || (lookup && !shown)) {
		json_decref(c->entries);
		c->entries = NULL;
	}
	if (shown < 0) {
		rw_table_free(&c->t);
		return rw_fail(RW_EXIT_REFUSED, "map %s: reading %s: %s",
			       lookup ? "lookup" : "dump", rw_map_shown_names[map],
			       strerror(-shown));
	}
	if (lookup && !shown) {
		rw_table_free(&c->t);
		return lookup_fail(map, RW_EXIT_REFUSED, "nothing for %s%s", k->text,
				   maps[map].slotted && !c->ready ? " (the node is not ready)"
								  : "");
	}
	if (rw_g.json) {
		json_t *o =
			json_pack("{s:b, s:s, s:b, s:I}", "ok", 1, "map", rw_map_shown_names[map],
				  "ready", c->ready, "revision", (json_int_t)c->revision);

		if (maps[map].slotted && c->ready)
			json_object_set_new(o, "slot", json_integer(c->slot));
		if (!k->any)
			json_object_set_new(o, "key", json_string(k->text));
		json_object_set_new(o, "entries", c->entries);
		c->entries = NULL;
		rw_cli_json_print(o);
		return RW_EXIT_OK;
	}
	if (map != RW_M_COUNTERS) {
		if (map != RW_M_CONFIG)
			title(c, map, shown, k);
		if (c->t.rows)
			rw_table_print(&c->t, stdout, map == RW_M_CONFIG ? "" : "  ");
		if (c->have_policy && c->t.rows)
			printf("  (rule names from the snapshot in force, revision %llu)\n",
			       (unsigned long long)c->policy.revision);
	}
	rw_table_free(&c->t);
	return RW_EXIT_OK;
}

static int list(struct mctx *c)
{
	static const char *const heads[] = {"MAP", "PINNED AS", "TYPE", "ENTRIES", "MAX", "FILL"};
	struct rw_map_fill fill[RW_M__COUNT];
	struct rw_table t;
	json_t *arr;

	rw_map_fill(&c->dp, fill);
	if (rw_g.json) {
		arr = json_array();
		for (int i = 0; i < RW_M__COUNT; i++)
			json_array_append_new(
				arr, json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", fill[i].name,
					       "pin", fill[i].pin, "type", fill[i].type, "entries",
					       (json_int_t)fill[i].entries, "max_entries",
					       (json_int_t)fill[i].max_entries));
		rw_cli_json_print(json_pack("{s:b, s:s, s:b, s:I, s:o}", "ok", 1, "bpffs",
					    c->dp.pin_dir, "ready", c->ready, "revision",
					    (json_int_t)c->revision, "maps", arr));
		return RW_EXIT_OK;
	}
	printf("maps pinned at %s", c->dp.pin_dir);
	if (c->ready)
		printf(" (policy maps: live slot %u, revision %llu)\n", c->slot,
		       (unsigned long long)c->revision);
	else
		printf(" (node not ready: the policy maps have no live slot)\n");
	rw_table_init(&t, 6, heads, RW_TABLE_RIGHT(3) | RW_TABLE_RIGHT(4) | RW_TABLE_RIGHT(5));
	for (int i = 0; i < RW_M__COUNT; i++) {
		const struct rw_map_fill *f = &fill[i];
		char pct[16];

		rw_table_row(&t);
		rw_table_cell(&t, "%s", f->name);
		rw_table_cell(&t, "%s", f->pin);
		rw_table_cell(&t, "%s", f->type);
		if (i == RW_M_EVENTS) {
			char pend[32], size[32];

			rw_cli_bytes(f->entries < 0 ? 0 : f->entries, pend, sizeof(pend));
			rw_cli_bytes(f->max_entries, size, sizeof(size));
			rw_table_cell(&t, "%s", f->entries < 0 ? "?" : pend);
			rw_table_cell(&t, "%s", size);
		} else if (f->entries < 0) {
			rw_table_cell(&t, "? (%s)", strerror((int)-f->entries));
			rw_table_cell(&t, "%u", f->max_entries);
		} else {
			rw_table_cell(&t, "%lld", f->entries);
			rw_table_cell(&t, "%u", f->max_entries);
		}
		rw_cli_fill_pct(f->entries, f->max_entries, pct, sizeof(pct));
		rw_table_cell(&t, "%s", pct);
	}
	rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
	printf("  (pods, allow, deny, inbound: the live slot, IPv4 and IPv6 tables; conntrack: flows "
	       "of each family; counters, revs: indexes in use; events: bytes not read yet)\n");
	return RW_EXIT_OK;
}

static int cmd_map(int argc, char **argv)
{
	static const struct rw_cmd_opt opts[] = {{"json", 'j', .flag = &rw_g.json}, {}};
	static const char *const subs[] = {"list", "dump", "lookup"};
	struct mctx c = {0};
	char err[512];
	int sub, map, ret, opt;
	struct mkey k = {.any = true};

	opt = rw_cmd_options(&rw_cmd_map, argc, argv, opts);
	if (opt >= 0)
		return opt;
	argc -= optind;
	argv += optind;
	if (argc < 1)
		return rw_cmd_usage_error(&rw_cmd_map, "what? list, dump or lookup");
	sub = rw_name_lookup(argv[0], "map subcommand", subs, 3, err, sizeof(err));
	if (sub < 0)
		return rw_fail(RW_EXIT_USAGE, "%s", err);
	map = -1;
	if (sub > 0) {
		if (argc < 2) {
			char valid[256] = "";
			size_t at = 0;

			/* Every map this command shows, once (RW_MAPS' shown names). */
			for (int m = 0; m < RW_M__COUNT; m++)
				if (maps[m].show && at < sizeof(valid))
					at += snprintf(valid + at, sizeof(valid) - at, "%s%s",
						       at ? ", " : "", rw_map_shown_names[m]);
			return rw_fail(RW_EXIT_USAGE, "map %s: which map? valid: %s", subs[sub],
				       valid);
		}
		map = rw_cli_map_lookup(argv[1], err, sizeof(err));
		if (map < 0)
			return rw_fail(RW_EXIT_USAGE, "%s", err);
		if (map == RW_M_EVENTS)
			return rw_fail(RW_EXIT_USAGE,
				       "events is the ring buffer of verdict events: follow it "
				       "with `runwall drops`");
		if (map == RW_M_SCRATCH)
			return rw_fail(RW_EXIT_USAGE,
				       "scratch is the IPv6 answer builders' memory, one per CPU: "
				       "it holds nothing between packets");
		if (sub == 1 && argc > 2)
			return rw_fail(RW_EXIT_USAGE, "map dump %s: unexpected '%s'", argv[1],
				       argv[2]);
		if (sub == 2 && argc < 3 && map != RW_M_CONFIG)
			return rw_fail(RW_EXIT_USAGE, "map lookup %s: which key? %s", argv[1],
				       maps[map].key);
	} else if (argc > 1) {
		return rw_fail(RW_EXIT_USAGE, "map list: unexpected '%s'", argv[1]);
	}

	ret = rw_cli_open(&c.dp, rw_g.bpffs, err, sizeof(err));
	if (ret)
		return rw_fail(ret == -ENOENT ? RW_EXIT_USAGE : RW_EXIT_REFUSED, "%s", err);
	ret = rw_config_read(&c.dp, &c.cfg);
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "reading %s: %s", rw_map_names[RW_M_CONFIG],
			      strerror(-ret));
		goto cleanup;
	}
	c.ready = RW_STATE_READY(c.cfg.state);
	c.slot = RW_STATE_SLOT(c.cfg.state);
	c.revision = c.ready ? RW_STATE_REVISION(c.cfg.state) : 0;
	c.mono_to_real = rw_mono_to_real_offset();
	c.now_mono = mono_now();
	ret = rw_live_runs(&c.dp, &c.runs, &c.n_runs);
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "reading the live pods: %s", strerror(-ret));
		goto cleanup;
	}

	if (sub == 0) {
		ret = list(&c);
	} else if (sub == 1) {
		ret = show(&c, map, &k, false);
	} else {
		ret = parse_key(&c, map, argc - 2, argv + 2, &k);
		if (!ret)
			ret = show(&c, map, &k, true);
	}
cleanup:
	if (c.have_policy)
		rw_policy_free(&c.policy);
	rw_live_runs_free(c.runs, c.n_runs);
	rw_datapath_close(&c.dp);
	return ret;
}

RW_COMMAND(map, .summary = "read the pinned maps", .grammar = map_usage, .options = map_options);
