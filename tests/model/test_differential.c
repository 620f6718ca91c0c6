// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* test_differential.c: random snapshots through the real parser and rw_apply(), random and
 * mutated packets judged by the reference model (model.c) and by the production programs
 * through BPF_PROG_TEST_RUN. Verdict, reason, allow path, the rule, the counters and the
 * events must agree; any difference is a bug in one of them and is printed with everything
 * needed to replay it (seed, snapshot, packet bytes).
 *
 *   test_differential [--seed N] [--packets N] [--snapshots N] [--flips N] [-v]
 *
 * Without --seed, RW_DIFF_SEED from the environment, else a fresh seed; it is printed first.
 *
 * The production programs are pinned in a private bpffs folder and a dry-run copy (the one
 * `runwall explain` uses) runs over the same maps: it reports the path and rule of every
 * packet, where the production copy only reports new flows. Runs in its own network namespace.
 * A last phase flips the state word back and forth under reader threads (flip_phase()).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "cli_private.h"
#include "datapath.h"
#include "log.h"
#include "model.h"
#include "pkt.h"
#include "pod_lookups.h"
#include "policy.h"
#include "reasons.h"
#include "runwall.skel.h"

#define N_VETH		 6
#define TCX_NEXT_	 (-1)
#define TCX_DROP_	 2
#define TC_ACT_REDIRECT_ 7

static struct rw_datapath dp, dry;
static struct ring_buffer *ring;
static char pin_dir[128];
static int ifindex_of[N_VETH];
static int verbose;

/* ---- random numbers: splitmix64, so a seed replays exactly ---- */

static __u64 rng_state;

static __u64 rnd64(void)
{
	__u64 z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static __u32 rnd(__u32 n)
{
	return n ? (__u32)(rnd64() % n) : 0;
}

static int chance(int percent)
{
	return (int)rnd(100) < percent;
}

/* ---- addresses: host byte order here, anchored where the rules and ranges are ---- */

static const __u32 metadata[] = {
#define M(host, str) host,
	RW_METADATA_ADDRS(M)
#undef M
};
static const struct {
	__u32 net;
	int len;
} special[] = {
#define S(net_, len_, str, label) {net_, len_},
	RW_SPECIAL_RANGES(S)
#undef S
};
#define NMETA	 (sizeof(metadata) / sizeof(metadata[0]))
#define NSPECIAL (sizeof(special) / sizeof(special[0]))

static __u32 mask_of(int len)
{
	return len ? 0xffffffffu << (32 - len) : 0;
}

static __u32 pick_addr(void)
{
	switch (rnd(11)) {
	case 0:
		return (__u32)rnd64();
	case 1: {
		int i = rnd(NSPECIAL);

		return special[i].net | ((__u32)rnd64() & ~mask_of(special[i].len));
	}
	case 2:
		return metadata[rnd(NMETA)] + rnd(3) - 1;
	case 3:
	case 4:
		return 0xac140000 | rnd(4) << 8 | rnd(24); /* 172.20.x.y */
	case 5:
		return 0xac150000 | rnd(256); /* 172.21.0.x */
	case 6:
		return 0x01020300 | rnd(256); /* 1.2.3.x */
	case 7:
		return 0x5db8d800 | rnd(256); /* 93.184.216.x */
	case 8:
		return 0x08080800 | rnd(8); /* 8.8.8.x */
	case 9:
		return chance(50) ? 0x64400000 | rnd(1024) : 0x0a000000 | rnd(1024);
	default:
		return 0x0a010200 | rnd(32); /* pods: 10.1.2.x */
	}
}

static int covers_metadata(__u32 net, int len)
{
	for (size_t i = 0; i < NMETA; i++)
		if ((metadata[i] & mask_of(len)) == net)
			return 1;
	return 0;
}

/* ---- IPv6 addresses: 16 bytes in network order, anchored like the IPv4 ones ---- */

struct a6 {
	__u8 b[16];
};

static struct a6 words_a6(__u32 w0, __u32 w1, __u32 w2, __u32 w3)
{
	__u32 w[4] = {htonl(w0), htonl(w1), htonl(w2), htonl(w3)};
	struct a6 a;

	memcpy(a.b, w, 16);
	return a;
}

static const struct {
	__u32 w[4];
	int len;
} special6[] =
	{
#define S(w0, w1, w2, w3, len_, str, label) {{w0, w1, w2, w3}, len_},
		RW_SPECIAL6_RANGES(S)
#undef S
},
  embedded6[] =
	  {
#define E(w0, w1, w2, w3, len_, str, label) {{w0, w1, w2, w3}, len_},
		  RW_EMBEDDED4_RANGES(E)
#undef E
},
  metadata6[] = {
#define M(w0, w1, w2, w3, str) {{w0, w1, w2, w3}, 128},
	  RW_METADATA6_ADDRS(M)
#undef M
};
#define NSPECIAL6  (sizeof(special6) / sizeof(special6[0]))
#define NEMBEDDED6 (sizeof(embedded6) / sizeof(embedded6[0]))
#define NMETA6	   (sizeof(metadata6) / sizeof(metadata6[0]))

/* The address pools: a prefix of the table and how many low bits are random. */
static const struct {
	__u32 w[4];
	int host_bits;
} pool6[] = {
	{{0xfd123456, 0x789a0000, 0, 0}, 10},	  /* ULA services, like 172.20.x.y */
	{{0x26001f18, 0x12340005, 0, 0}, 8},	  /* public services */
	{{0x26064700, 0x47000000, 0, 0}, 8},	  /* public, like 1.2.3.x */
	{{0x2a001450, 0x40010800, 0, 0}, 8},	  /* public, like 93.184.216.x */
	{{0x20014860, 0x48600000, 0, 0x8800}, 3}, /* public, like 8.8.8.x */
	{{0x26001f14, 0x00ff0000, 0, 0}, 80},	  /* the node's VPC: deny lists */
	{{0x26001f14, 0x0abc0001, 0, 0}, 5},	  /* pods */
	{{0x26001f14, 0x0abc0003, 0, 0}, 6},	  /* pods of no run */
};

static struct a6 pool_addr6(int i)
{
	struct a6 a = words_a6(pool6[i].w[0], pool6[i].w[1], pool6[i].w[2], pool6[i].w[3]);

	for (int bit = 0; bit < pool6[i].host_bits; bit++)
		if (chance(50))
			a.b[15 - bit / 8] ^= 1u << (bit % 8);
	/* Pods of two subnets' /64s: a pod of the other one is private by rw_pods6 alone. */
	if (i == 6 && chance(50))
		a.b[7] ^= 1;
	return a;
}

static int in6(const struct a6 *a, const __u32 w[4], int len)
{
	struct a6 n = words_a6(w[0], w[1], w[2], w[3]);

	for (int i = 0; i < 16 && len > 0; i++, len -= 8) {
		__u8 mask = len >= 8 ? 0xff : (__u8)(0xff << (8 - len));

		if ((a->b[i] & mask) != (n.b[i] & mask))
			return 0;
	}
	return 1;
}

static void mask6(struct a6 *a, int len)
{
	for (int i = 0; i < 16; i++, len -= 8)
		a->b[i] &= len >= 8 ? 0xff : len <= 0 ? 0 : (__u8)(0xff << (8 - len));
}

/* Whether net/len and the table's entry share an address (one holds the other). */
static int overlaps6(const struct a6 *net, int len, const __u32 w[4], int wlen)
{
	return in6(net, w, len < wlen ? len : wlen);
}

static void put_v4(__u8 *p, __u32 host, __u8 x)
{
	p[0] = (host >> 24) ^ x;
	p[1] = (host >> 16) ^ x;
	p[2] = (host >> 8) ^ x;
	p[3] = host ^ x;
}

/* The snapshot's "nat64" (gen_snapshot()): none, 64:ff9b::/96, or the network-specific
 * 2600:1f18:64::/96, under which no service names an address and no run rule reaches.
 */
#define NSP_W0 0x26001f18
#define NSP_W1 0x00640000
static int gen_nat64; /* 0 none, 1 64:ff9b::/96, 2 the network-specific one */

/* An IPv6 form of an IPv4 address: mapped, NAT64, 6to4, Teredo (a server, the client inverted),
 * an address under the network-specific NAT64 prefix, and the local NAT64 /48 reading
 * (64:ff9b:1::/48, a special range: such an address must be private whatever IPv4 address a /48
 * translator would read in it); the other bits random where the form leaves them.
 */
static struct a6 embed4(__u32 v4, int form)
{
	struct a6 a = {};

	switch (form) {
	case 0:
		a.b[10] = a.b[11] = 0xff;
		put_v4(a.b + 12, v4, 0);
		break;
	case 1:
		a = words_a6(0x0064ff9b, 0, 0, 0);
		put_v4(a.b + 12, v4, 0);
		break;
	case 2:
		a = words_a6(0x0064ff9b, 0x00010000, 0, 0);
		a.b[6] = v4 >> 24;
		a.b[7] = v4 >> 16;
		a.b[9] = v4 >> 8;
		a.b[10] = v4;
		if (chance(30))
			a.b[15] = rnd(256);
		break;
	case 3:
		a = words_a6(0x20020000, 0, 0, 0);
		put_v4(a.b + 2, v4, 0);
		for (int i = 6; i < 16; i++)
			a.b[i] = chance(50) ? rnd(256) : 0;
		break;
	case 5: /* under the network-specific NAT64 prefix some snapshots declare */
		a = words_a6(NSP_W0, NSP_W1, 0, 0);
		put_v4(a.b + 12, v4, 0);
		break;
	default:
		a = words_a6(0x20010000, 0, 0, 0);
		put_v4(a.b + 4, chance(50) ? 0x41424344 : (__u32)v4 ^ 0x00ff0000, 0);
		a.b[8] = chance(50) ? 0x80 : 0;
		a.b[10] = rnd(256);
		a.b[11] = rnd(256);
		put_v4(a.b + 12, v4, 0xff);
		break;
	}
	return a;
}

static struct a6 pick_addr6(void)
{
	struct a6 a;

	switch (rnd(13)) {
	case 0:
		for (int i = 0; i < 16; i++)
			a.b[i] = rnd(256);
		return a;
	case 1: {
		int i = rnd(NSPECIAL6), len = special6[i].len;

		a = words_a6(special6[i].w[0], special6[i].w[1], special6[i].w[2],
			     special6[i].w[3]);
		for (int bit = len; bit < 128; bit++)
			if (chance(len >= 96 ? 50 : 10))
				a.b[bit / 8] ^= 0x80 >> (bit % 8);
		return a;
	}
	case 2: {
		int i = rnd(NMETA6);

		a = words_a6(metadata6[i].w[0], metadata6[i].w[1], metadata6[i].w[2],
			     metadata6[i].w[3]);
		a.b[15] += rnd(3) - 1;
		return a;
	}
	case 3:
	case 4:
		return embed4(pick_addr(), rnd(6));
	case 5:
	case 6:
		return pool_addr6(rnd(2));
	case 7:
		return pool_addr6(2 + rnd(3));
	case 8:
		return pool_addr6(5);
	case 9:
		return pool_addr6(7);
	default:
		return pool_addr6(6);
	}
}

static int covers_metadata6(const struct a6 *net, int len)
{
	for (size_t i = 0; i < NMETA6; i++)
		if (overlaps6(net, len, metadata6[i].w, 128))
			return 1;
	return 0;
}

/* Inside an embedded-IPv4 form (which the parser refuses in any list: write the IPv4). */
static int in_embedded6(const struct a6 *net, int len)
{
	for (size_t i = 0; i < NEMBEDDED6; i++)
		if (len >= embedded6[i].len && in6(net, embedded6[i].w, embedded6[i].len))
			return 1;
	return 0;
}

static int overlaps_special6(const struct a6 *net, int len)
{
	for (size_t i = 0; i < NSPECIAL6; i++)
		if (overlaps6(net, len, special6[i].w, special6[i].len))
			return 1;
	for (size_t i = 0; i < NEMBEDDED6; i++)
		if (overlaps6(net, len, embedded6[i].w, embedded6[i].len))
			return 1;
	return 0;
}

/* What the parser takes as a pod's IPv6: global unicast or unique local, no metadata, no
 * embedded-IPv4 form.
 */
static int pod6_ok(const struct a6 *a)
{
	return ((a->b[0] & 0xe0) == 0x20 || (a->b[0] & 0xfe) == 0xfc) &&
	       !covers_metadata6(a, 128) && !in_embedded6(a, 128);
}

static void ip6_str(const struct a6 *a, char *out)
{
	inet_ntop(AF_INET6, a->b, out, INET6_ADDRSTRLEN);
}

static const __u16 port_pool[] = {53, 80, 443, 8080, 1, 65535, 4096, 3128, 5432, 54};

static __u16 pick_port(void)
{
	if (chance(70))
		return port_pool[rnd(sizeof(port_pool) / sizeof(port_pool[0]))];
	return 1 + rnd(65535);
}

/* ---- snapshots as JSON text, so they go through the real parser ---- */

struct sbuf {
	char *s;
	size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && b->len + n < b->cap)
			break;
		b->cap = (b->cap + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		if (!b->s) {
			printf("Bail out! out of memory\n");
			exit(1);
		}
	}
	b->len += n;
}

static void ip_str(__u32 host, char *out)
{
	struct in_addr a = {htonl(host)};

	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

static void gen_ports(struct sbuf *b)
{
	int tcp = 0, udp = 0;

	while (!tcp && !udp) {
		tcp = chance(70) ? 1 + rnd(3) : 0;
		udp = chance(45) ? 1 + rnd(3) : 0;
	}
	for (int p = 0; p < 2; p++) {
		__u16 ports[3];
		int n = p ? udp : tcp, k = 0;

		if (!n)
			continue;
		while (k < n) {
			__u16 port = pick_port();
			int dup = 0;

			for (int j = 0; j < k; j++)
				dup |= ports[j] == port;
			if (!dup)
				ports[k++] = port;
		}
		sb_printf(b, ", \"%s\": [", p ? "udp" : "tcp");
		for (int j = 0; j < k; j++)
			sb_printf(b, "%s%u", j ? ", " : "", ports[j]);
		sb_printf(b, "]");
	}
}

/* A rule's "from", one rule in five: the test run's packets are sent by the kernel's dummy
 * socket (uid 0, the test's cgroup, no container), so some selectors admit them and some not.
 */
static void gen_from(struct sbuf *b)
{
	static const char *const from[] = {
		"{\"uid\": [0]}",
		"{\"uid\": [1001]}",
		"{\"uid\": [1000, 0]}",
		"{\"container\": [\"identity-sidecar\"]}",
		"{\"uid\": [0], \"container\": [\"identity-sidecar\"]}",
	};

	if (chance(20))
		sb_printf(b, ", \"from\": %s", from[rnd(sizeof(from) / sizeof(from[0]))]);
}

/* An address or CIDR of any length 0..32 (weighted to the lengths rules have), never one that
 * covers a metadata address (the parser refuses those, rightly).
 */
static int overlaps_special(__u32 net, int len)
{
	for (size_t i = 0; i < NSPECIAL; i++) {
		int l = len < special[i].len ? len : special[i].len;

		if ((net & mask_of(l)) == (special[i].net & mask_of(l)))
			return 1;
	}
	return 0;
}

/* public_only: a run's rule, which may name public destinations only (in the planned order;
 * one in twenty does not, so that the parser's refusal is exercised too).
 */
static void gen_target(struct sbuf *b, int allow_ip, int public_only)
{
	char s[INET_ADDRSTRLEN];
	__u32 net;
	int len;

	public_only = public_only && !chance(5);
	do {
		len = chance(40) ? 32 : chance(50) ? 16 + rnd(17) : rnd(33);
		net = pick_addr() & mask_of(len);
	} while (covers_metadata(net, len) || (public_only && overlaps_special(net, len)));
	ip_str(net, s);
	if (len == 32 && allow_ip && chance(70))
		sb_printf(b, "\"ip\": \"%s\"", s);
	else
		sb_printf(b, "\"cidr\": \"%s/%d\"", s, len);
}

/* An IPv6 address or CIDR of any length (weighted to the lengths rules have), never one that
 * covers a metadata address or lies in an embedded-IPv4 form; public_only as gen_target().
 */
static void gen_target6(struct sbuf *b, int allow_ip, int public_only)
{
	static const __u32 nsp_w[4] = {NSP_W0, NSP_W1, 0, 0};
	char s[INET6_ADDRSTRLEN];
	struct a6 net;
	int len;

	public_only = public_only && !chance(5);
	do {
		len = chance(40) ? 128 : chance(70) ? 48 + rnd(81) : rnd(129);
		net = pick_addr6();
		mask6(&net, len);
	} while (covers_metadata6(&net, len) || in_embedded6(&net, len) ||
		 (public_only && overlaps_special6(&net, len)) ||
		 (gen_nat64 == 2 && (public_only || len >= 96) && overlaps6(&net, len, nsp_w, 96)));
	ip6_str(&net, s);
	if (len == 128 && allow_ip && chance(70))
		sb_printf(b, "\"ip\": \"%s\"", s);
	else
		sb_printf(b, "\"cidr\": \"%s/%d\"", s, len);
}

/* One list entry's address, either family: IPv6 in `percent6` of them. */
static void gen_any_target(struct sbuf *b, int allow_ip, int public_only, int percent6)
{
	if (chance(percent6))
		gen_target6(b, allow_ip, public_only);
	else
		gen_target(b, allow_ip, public_only);
}

/* A prefix inside a special range (its length or longer), for deny lists and services that the
 * pods' RW_SKIP_* bits can skip; one in six a bit shorter than its range, which is not inside
 * it (the bits must then stay clear). Never one that covers a metadata address.
 */
static __u32 special_sub(int *len)
{
	__u32 net;

	do {
		int i = rnd(NSPECIAL), l = special[i].len;

		*len = chance(16) && l > 1 ? l - 1 - rnd(l > 4 ? 4 : l - 1) : l + rnd(33 - l);
		net = (special[i].net | ((__u32)rnd64() & ~mask_of(l))) & mask_of(*len);
	} while (covers_metadata(net, *len));
	return net;
}

static const char *const egress_modes[] = {"allowlist", "open"};
static const char *const refusal_modes[] = {"answer", "drop"};

static char *gen_snapshot(__u64 revision)
{
	struct sbuf b = {};
	__u32 used_pods[64];
	struct a6 used_pods6[64];
	int n_used = 0, n_used6 = 0, n, dual = chance(75), p6 = dual ? 40 : 0;
	/* Snapshots whose IPv4 deny list, or services, lie inside the special ranges, or that have
	 * none: the pods' RW_SKIP_* bits skip those lookups (pod_lookups.c).
	 */
	int deny_special = chance(35), svc_special = chance(35);

	sb_printf(&b, "{\"revision\": %llu", (unsigned long long)revision);
	if (chance(70))
		sb_printf(&b, ", \"egress\": \"%s\"", egress_modes[rnd(2)]);
	if (chance(30))
		sb_printf(&b, ", \"refusal\": \"%s\"", refusal_modes[rnd(2)]);
	if (chance(20)) /* the phase's lease is set after the apply (pick_lease) */
		sb_printf(&b, ", \"lease_seconds\": %u", 1 + rnd(86400));
	gen_nat64 = chance(50) ? 0 : 1 + rnd(2);
	if (gen_nat64)
		sb_printf(&b, ", \"nat64\": \"%s\"",
			  gen_nat64 == 1 ? "64:ff9b::/96" : "2600:1f18:64::/96");
	n = rnd(5) + (dual ? rnd(3) : 0);
	sb_printf(&b, ", \"deny\": [");
	for (int i = 0; i < n; i++) {
		char s[INET6_ADDRSTRLEN];
		int len = 8 + rnd(25);

		if (dual && chance(40)) {
			struct a6 net;

			do {
				len = 16 + rnd(113);
				net = pick_addr6();
				mask6(&net, len);
			} while (covers_metadata6(&net, len) || in_embedded6(&net, len));
			ip6_str(&net, s);
		} else if (deny_special) {
			ip_str(special_sub(&len), s);
		} else {
			ip_str(pick_addr() & mask_of(len), s);
		}
		sb_printf(&b, "%s\"%s/%d\"", i ? ", " : "", s, len);
	}
	sb_printf(&b, "], \"services\": [");
	n = rnd(9);
	for (int i = 0; i < n; i++) {
		sb_printf(&b, "%s{\"name\": \"svc-%d\", ", i ? ", " : "", i);
		if (svc_special && !chance(p6)) {
			char s[INET_ADDRSTRLEN];
			int len;

			ip_str(special_sub(&len), s);
			if (len == 32 && chance(50))
				sb_printf(&b, "\"ip\": \"%s\"", s);
			else
				sb_printf(&b, "\"cidr\": \"%s/%d\"", s, len);
		} else {
			gen_any_target(&b, 1, 0, p6);
		}
		gen_ports(&b);
		gen_from(&b);
		sb_printf(&b, "}");
	}
	sb_printf(&b, "], \"inbound\": [");
	n = rnd(5);
	for (int i = 0; i < n; i++) {
		sb_printf(&b, "%s{\"name\": \"peer-%d\", ", i ? ", " : "", i);
		gen_any_target(&b, 0, 0, p6);
		gen_ports(&b);
		sb_printf(&b, "}");
	}
	sb_printf(&b, "], \"runs\": [");
	n = 1 + rnd(6);
	for (int r = 0; r < n; r++) {
		/* IPv4-only runs, dual-stack ones and IPv6-only ones. */
		int pods = rnd(4), pods6 = dual && chance(85) ? 1 + rnd(3) : 0, allow = rnd(6),
		    first = 1;

		/* Run ids from a small set so that runs come back, move and keep their index. */
		sb_printf(&b, "%s{\"id\": \"run-%u-%d\", \"pods\": [", r ? ", " : "", rnd(3), r);
		for (int i = 0; i < pods && n_used < 64; i++) {
			__u32 ip = chance(85) ? 0x0a010200 | rnd(32) : pick_addr();
			char s[INET_ADDRSTRLEN];
			int dup = covers_metadata(ip, 32) || ip == 0xffffffff;

			for (int j = 0; j < n_used; j++)
				dup |= used_pods[j] == ip;
			if (dup)
				continue;
			used_pods[n_used++] = ip;
			ip_str(ip, s);
			sb_printf(&b, "%s\"%s\"", first ? "" : ", ", s);
			first = 0;
		}
		for (int i = 0; i < pods6 && n_used6 < 64; i++) {
			struct a6 ip = chance(85) ? pool_addr6(6) : pick_addr6();
			char s[INET6_ADDRSTRLEN];
			int dup = !pod6_ok(&ip);

			for (int j = 0; j < n_used6; j++)
				dup |= !memcmp(&used_pods6[j], &ip, sizeof(ip));
			if (dup)
				continue;
			used_pods6[n_used6++] = ip;
			ip6_str(&ip, s);
			sb_printf(&b, "%s\"%s\"", first ? "" : ", ", s);
			first = 0;
		}
		sb_printf(&b, "]");
		if (chance(50))
			sb_printf(&b, ", \"egress\": \"%s\"", egress_modes[rnd(2)]);
		if (chance(30))
			sb_printf(&b, ", \"refusal\": \"%s\"", refusal_modes[rnd(2)]);
		if (allow) {
			sb_printf(&b, ", \"allow\": [");
			for (int i = 0; i < allow; i++) {
				sb_printf(&b, "%s{", i ? ", " : "");
				gen_any_target(&b, 1, 1, p6);
				gen_ports(&b);
				gen_from(&b);
				sb_printf(&b, "}");
			}
			sb_printf(&b, "]");
		}
		sb_printf(&b, "}");
	}
	sb_printf(&b, "]}\n");
	return b.s;
}

/* The snapshot in force at another revision, its egress modes narrowed ("open" becomes
 * "allowlist") or, when none is open, widened: the same runs with the same pods, so their flows
 * stay in their tables and a narrowing cuts them (a revoke).
 */
static char *derive_snapshot(const char *now, __u64 revision)
{
	const char *rest = strchr(now, ','),
		   *from = strstr(now, "\"open\"") ? "\"open\"" : "\"allowlist\"";
	const char *to = from[1] == 'o' ? "\"allowlist\"" : "\"open\"";
	struct sbuf b = {};

	if (!rest)
		return gen_snapshot(revision);
	sb_printf(&b, "{\"revision\": %llu", (unsigned long long)revision);
	for (const char *p = rest, *hit; *p; p = hit + strlen(from)) {
		hit = strstr(p, from);
		if (!hit) {
			sb_printf(&b, "%s", p);
			break;
		}
		sb_printf(&b, "%.*s%s", (int)(hit - p), p, to);
	}
	return b.s;
}

/* ---- the model's conntrack: who opened which flow on which veth ---- */

struct ct_entry {
	__u32 ifindex;
	int v6; /* the family's table: IPv4 in the first 4 bytes of pod, peer */
	__u8 pod[16], peer[16];
	__be16 pod_port, peer_port;
	__u8 proto;
	enum model_ct by;
};

static struct ct_entry *ct_tab;
static size_t ct_n, ct_cap;
static unsigned int ct_share; /* rw_config.ct_per_sandbox: one sandbox's conntrack table */

static int ct_full(__u32 ifindex, int v6)
{
	unsigned int n = 0;

	for (size_t i = 0; i < ct_n; i++)
		n += ct_tab[i].ifindex == ifindex && ct_tab[i].v6 == v6;
	return ct_share && n >= ct_share;
}

static void ct_key(const struct model_pkt *p, int dir, __u32 ifindex, struct ct_entry *k)
{
	int out = dir == RW_DIR_EGRESS;

	memset(k, 0, sizeof(*k));
	k->ifindex = ifindex;
	k->proto = p->proto;
	k->v6 = p->is_ipv6;
	if (p->is_ipv6) {
		memcpy(k->pod, out ? p->saddr6 : p->daddr6, 16);
		memcpy(k->peer, out ? p->daddr6 : p->saddr6, 16);
	} else {
		memcpy(k->pod, out ? &p->saddr : &p->daddr, 4);
		memcpy(k->peer, out ? &p->daddr : &p->saddr, 4);
	}
	k->pod_port = out ? p->sport : p->dport;
	k->peer_port = out ? p->dport : p->sport;
}

static struct ct_entry *ct_find(const struct ct_entry *k)
{
	for (size_t i = 0; i < ct_n; i++) {
		struct ct_entry *e = &ct_tab[i];

		if (e->ifindex == k->ifindex && e->v6 == k->v6 && !memcmp(e->pod, k->pod, 16) &&
		    !memcmp(e->peer, k->peer, 16) && e->pod_port == k->pod_port &&
		    e->peer_port == k->peer_port && e->proto == k->proto)
			return e;
	}
	return NULL;
}

static void ct_add(const struct ct_entry *k, enum model_ct by)
{
	if (ct_n == ct_cap) {
		ct_cap = ct_cap ? ct_cap * 2 : 256;
		ct_tab = realloc(ct_tab, ct_cap * sizeof(*ct_tab));
		if (!ct_tab) {
			printf("Bail out! out of memory\n");
			exit(1);
		}
	}
	ct_tab[ct_n] = *k;
	ct_tab[ct_n++].by = by;
}

/* Forget the flows of one veth (ifindex != 0, both families, as its tables are replaced), or
 * all (0).
 */
static void ct_forget(__u32 ifindex)
{
	size_t j = 0;

	for (size_t i = 0; i < ct_n; i++)
		if (ifindex && ct_tab[i].ifindex != ifindex)
			ct_tab[j++] = ct_tab[i];
	ct_n = j;
}

/* ---- one packet through both ---- */

struct stats {
	unsigned long long packets, diffs, snapshots, refused, skipped;
	unsigned long long by_reason[RW_REASON_COUNT + 1], by_path[RW_PATH_COUNT];
	unsigned long long by_answer[RW_ANSWER_COUNT];
	unsigned long long revokes, revokes_ended; /* refused segments of known flows reset */
	unsigned long long ipv6, ipv6_allowed, ndp, icmp6_errors, revokes6;
	unsigned long long by_reason6[RW_REASON_COUNT + 1];
	/* runs applied whose pods skip each lookup (bit i: RW_SKIP_* 1 << i, IPv6's from 8) */
	unsigned long long runs, by_skip[16];
};

static struct stats st;
static const struct rw_policy *cur_snap;
static const char *cur_json;
static unsigned long long cur_snap_no;
static struct model_binding binding[N_VETH];
static struct rw_event last_event;
static int n_events;

/* The control plane's lease, an input of both: none, ahead, expired for a whole snapshot, or
 * "cut": each flow a packet opens is opened under a lease ahead, and its next packet sent once
 * the lease has expired (the verdict cache of the flow must not outlive the lease).
 */
enum lease_mode { LEASE_NONE, LEASE_AHEAD, LEASE_EXPIRED, LEASE_CUT };
static const char *const lease_names[] = {"none", "ahead", "expired", "cut"};
static enum lease_mode lease_mode;
static int lease_expired;
static unsigned long long lease_packets; /* judged under an expired lease */

static int on_event(void *ctx, void *data, size_t len)
{
	if (len >= sizeof(struct rw_event))
		memcpy(&last_event, data, sizeof(last_event));
	n_events++;
	return 0;
}

static const char *reason_name(int r)
{
	return r == RW_MODEL_REASON_CONNTRACK_FULL && r >= RW_REASON_COUNT ? "conntrack-full"
									   : rw_reason_name(r);
}

/* Verdict differences by (the model's reason, the datapath's): each pair's first is printed
 * whatever came before it, and the table at the end counts them.
 */
static unsigned long long diff_pairs[RW_REASON_COUNT + 1][RW_REASON_COUNT + 1];
static int report_first;

static void report(const char *what, int veth, int dir, const __u8 *buf, size_t len,
		   enum model_ct ct, const struct model_verdict *m, const char *fmt, ...)
{
	char ip[INET_ADDRSTRLEN + 2 * INET6_ADDRSTRLEN + 16] = "-";
	const struct model_binding *b = &binding[veth];
	va_list ap;

	st.diffs++;
	if (st.diffs > 20 && !report_first)
		return;
	report_first = 0;
	if (b->bound) {
		size_t n = 0;

		if (b->flags & RW_EP_IP4) {
			inet_ntop(AF_INET, &b->pod_ip, ip, INET_ADDRSTRLEN);
			n = strlen(ip);
		}
		if (b->flags & RW_EP_IP6) {
			n += sprintf(ip + n, n ? " and " : "");
			inet_ntop(AF_INET6, b->pod_ip6, ip + n, INET6_ADDRSTRLEN);
			n = strlen(ip);
		}
		if (b->flags & RW_EP_GW6) {
			n += sprintf(ip + n, " (gateway ");
			inet_ntop(AF_INET6, b->gw_ip6, ip + n, INET6_ADDRSTRLEN);
			strcat(ip, ")");
		}
	}
	printf("  DIFF %s: snapshot %llu, packet %llu, lease %s (%s), veth %d bound to %s, %s, "
	       "conntrack %s\n",
	       what, cur_snap_no, st.packets, lease_names[lease_mode],
	       lease_expired ? "expired" : "in force", veth, ip, dir ? "ingress" : "egress",
	       ct == MODEL_CT_NONE	  ? "none"
	       : ct == MODEL_CT_BY_EGRESS ? "opened by the pod"
					  : "opened by the peer");
	printf("    model: %s, %s, path %s, answer %s, %d rule(s)%s%x\n",
	       m->verdict ? "allow" : "drop", reason_name(m->reason), rw_path_name(m->path),
	       rw_answer_name(m->answer), m->n_rules, m->n_rules ? " first " : "",
	       m->n_rules ? m->rules[0] : 0);
	printf("    ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n    frame (%zu bytes):", len);
	for (size_t i = 0; i < len; i++)
		printf("%s%02x", i % 32 ? "" : "\n      ", buf[i]);
	printf("\n");
	if (cur_json && st.diffs <= 3)
		printf("    snapshot: %s", cur_json);
}

static int test_run(int prog_fd, __u32 ifindex, const __u8 *buf, size_t len, int *retval)
{
	struct __sk_buff ctx = {.ifindex = ifindex};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = buf, .data_size_in = len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx));
	int err = bpf_prog_test_run_opts(prog_fd, &opts);

	*retval = (int)opts.retval;
	return err ? -errno : 0;
}

static int rule_ok(const struct model_verdict *m, __u32 id)
{
	if (m->verdict != RW_VERDICT_ALLOW)
		return 1; /* a drop names no rule */
	if (!m->n_rules)
		return id == 0; /* open, arp, or the reply of an open flow */
	for (int i = 0; i < m->n_rules; i++)
		if (m->rules[i] == id)
			return 1;
	return 0;
}

static __u32 run_idx_of(int run)
{
	const struct rw_policy_run *r;
	struct rw_pod pod;
	int fd, err;

	if (run < 0)
		return 0;
	r = &cur_snap->runs[run];
	if (r->n_pods)
		return rw_live_pod(&dp, r->pods[0], &pod) ? 0 : pod.run_idx;
	if (!r->n_pods6)
		return 0;
	fd = rw_live_inner_fd(&dp, RW_M_PODS6);
	if (fd < 0)
		return 0;
	err = bpf_map_lookup_elem(fd, r->pods6[0], &pod);
	close(fd);
	return err ? 0 : pod.run_idx;
}

/* Whether the kernel's entry of an IPv6 flow holds a verdict of the policy in force (the fast
 * path's test: rw_run_revs[run_idx] <= stamp <= the revision in force), and its rule.
 */
static int ct6_current(const struct ct_entry *q, __u32 *rule)
{
	struct rw_ct6_key k = {.ifindex = q->ifindex, .proto = q->proto};
	int fd = rw_conntrack6_table_fd(&dp, q->ifindex), found;
	struct rw_ct_value v;
	struct rw_config cfg;
	__u64 rev = 0;

	if (fd < 0)
		return 0;
	memcpy(k.pod_ip, q->pod, 16);
	memcpy(k.peer_ip, q->peer, 16);
	k.pod_port = q->pod_port;
	k.peer_port = q->peer_port;
	found = bpf_map_lookup_elem(fd, &k, &v) == 0;
	close(fd);
	if (!found || rw_config_read(&dp, &cfg) ||
	    bpf_map_lookup_elem(dp.map_fd[RW_M_RUN_REVS], &v.run_idx, &rev))
		return 0;
	*rule = v.rule_id;
	return v.stamp && v.stamp >= rev && v.stamp <= RW_STATE_REVISION(cfg.state);
}

/* Judge one frame on veth `veth` in `dir` by the model and by both copies of the programs. */
static void judge(int veth, int dir, const __u8 *buf, size_t len)
{
	struct rw_explain *ex = &dry.skel->bss->rw_explain_result;
	__u32 ifindex = ifindex_of[veth], runs_before, run_idx = 0;
	struct rw_counters n0, n1, r0, r1;
	struct model_verdict m;
	struct model_pkt p;
	struct ct_entry k, *e = NULL;
	enum model_ct ct = MODEL_CT_NONE;
	int retval, err, want_ret, want_events, is_error = 0;
	__u32 related_rule = 0;

	if (len < 14) { /* BPF_PROG_TEST_RUN refuses frames shorter than Ethernet */
		st.skipped++;
		return;
	}
	st.packets++;
	lease_packets += lease_expired;
	model_parse(buf, len, 0, &p);
	if (p.reason == RW_REASON_ALLOWED && !p.is_arp) {
		struct ct_entry q = {.ifindex = ifindex, .v6 = 1};

		ct_key(&p, dir, ifindex, &k);
		/* An ICMPv6 error is judged by the flow it quotes, when that flow's verdict is
		 * still current (the kernel's stamp; the model keeps no revisions of its own).
		 */
		is_error = model_error_flow(&p, dir, q.pod, q.peer, &q.pod_port, &q.peer_port,
					    &q.proto);
		if (is_error) {
			e = ct_find(&q);
			if (e && !ct6_current(&q, &related_rule))
				e = NULL;
		} else {
			e = ct_find(&k);
		}
		ct = e ? e->by : MODEL_CT_NONE;
		st.ipv6 += p.is_ipv6;
	}
	model_judge(cur_snap, &binding[veth], dir, &p, ct, ct_full(ifindex, p.is_ipv6),
		    lease_expired, &m);
	if (is_error && m.path == RW_PATH_RELATED && related_rule) {
		/* The flow's rule, as its entry caches it. */
		m.rules[0] = related_rule;
		m.n_rules = 1;
	}
	st.by_reason[m.reason < RW_REASON_COUNT ? m.reason : RW_REASON_COUNT]++;
	st.by_path[m.path]++;

	/* The dry-run copy: reason, path and rule of every packet, no state changed. */
	runs_before = ex->runs;
	err = test_run(dry.prog_fd[dir], ifindex, buf, len, &retval);
	if (err == -EINVAL && len < 14 + 40) {
		/* test_run itself refuses an IPv4 (IPv6) frame too short for the IP header; the
		 * datapath suite sends those through a real veth instead.
		 */
		st.skipped++;
		st.packets--;
		return;
	}
	if (err || ex->runs != runs_before + 1) {
		report("dry run", veth, dir, buf, len, ct, &m, "test_run: %s, runs %u -> %u",
		       strerror(-err), runs_before, ex->runs);
		return;
	}
	if (ex->verdict != m.verdict || ex->reason != m.reason || ex->path != m.path ||
	    ex->answer != m.answer || !rule_ok(&m, ex->rule_id)) {
		unsigned long long *pair =
			&diff_pairs[m.reason < RW_REASON_COUNT ? m.reason : RW_REASON_COUNT]
				   [ex->reason < RW_REASON_COUNT ? ex->reason : RW_REASON_COUNT];

		report_first = !(*pair)++;
		report("verdict", veth, dir, buf, len, ct, &m,
		       "datapath: %s, %s, path %s, answer %s, rule %x",
		       ex->verdict ? "allow" : "drop", reason_name(ex->reason),
		       rw_path_name(ex->path), rw_answer_name(ex->answer), ex->rule_id);
	}

	/* The production copy: its return code, exact counters, and the event. */
	if (cur_snap)
		run_idx = run_idx_of(m.run);
	rw_counters_read(&dp, 0, &n0);
	if (run_idx)
		rw_counters_read(&dp, run_idx, &r0);
	n_events = 0;
	err = test_run(dp.prog_fd[dir], ifindex, buf, len, &retval);
	ring_buffer__consume(ring);
	rw_counters_read(&dp, 0, &n1);
	/* An answer goes to the veth's peer; a revoke's reset into the pod is on its way there. */
	want_ret = m.verdict == RW_VERDICT_ALLOW			     ? TCX_NEXT_
		   : m.answer && dir == RW_DIR_INGRESS			     ? TCX_NEXT_
		   : m.answer == RW_ANSWER_RST || m.answer == RW_ANSWER_ICMP ? TC_ACT_REDIRECT_
									     : TCX_DROP_;
	if (err || retval != want_ret)
		report("return code", veth, dir, buf, len, ct, &m,
		       "production: err %d, returned %d", err, retval);
	if (m.reason < RW_REASON_COUNT &&
	    n1.packets[dir][m.reason] - n0.packets[dir][m.reason] != 1)
		report("node counter", veth, dir, buf, len, ct, &m,
		       "production: packets[%s] grew by %llu", reason_name(m.reason),
		       (unsigned long long)(n1.packets[dir][m.reason] - n0.packets[dir][m.reason]));
	if (run_idx) {
		rw_counters_read(&dp, run_idx, &r1);
		if (m.reason < RW_REASON_COUNT &&
		    r1.packets[dir][m.reason] - r0.packets[dir][m.reason] != 1)
			report("run counter", veth, dir, buf, len, ct, &m,
			       "production: run %u packets[%s] grew by %llu", run_idx,
			       reason_name(m.reason),
			       (unsigned long long)(r1.packets[dir][m.reason] -
						    r0.packets[dir][m.reason]));
	}
	want_events = m.verdict == RW_VERDICT_DROP || m.new_flow;
	if (n_events != want_events)
		report("events", veth, dir, buf, len, ct, &m, "production: %d events, expected %d",
		       n_events, want_events);
	else if (n_events && (last_event.reason != m.reason || last_event.verdict != m.verdict ||
			      last_event.path != m.path || last_event.ifindex != ifindex ||
			      last_event.answer != m.answer || !rule_ok(&m, last_event.rule_id)))
		report("event", veth, dir, buf, len, ct, &m,
		       "event: %s, %s, path %s, answer %s, rule %x, ifindex %u",
		       last_event.verdict ? "allow" : "drop", reason_name(last_event.reason),
		       rw_path_name(last_event.path), rw_answer_name(last_event.answer),
		       last_event.rule_id, last_event.ifindex);
	/* An IPv6 event carries the frame's IPv6 addresses, its family the ethertype. */
	if (n_events == want_events && n_events && p.is_ipv6 && p.reason == RW_REASON_ALLOWED &&
	    (last_event.ethertype != htons(0x86dd) || memcmp(last_event.saddr6, p.saddr6, 16) ||
	     memcmp(last_event.daddr6, p.daddr6, 16)))
		report("event addresses", veth, dir, buf, len, ct, &m,
		       "event: ethertype %#x, the frame's IPv6 addresses %s",
		       ntohs(last_event.ethertype),
		       memcmp(last_event.saddr6, p.saddr6, 16) ||
				       memcmp(last_event.daddr6, p.daddr6, 16)
			       ? "not carried"
			       : "carried");
	if (m.answer && n1.answers[m.answer] - n0.answers[m.answer] != 1)
		report("answer counter", veth, dir, buf, len, ct, &m,
		       "production: answers[%s] grew by %llu", rw_answer_name(m.answer),
		       (unsigned long long)(n1.answers[m.answer] - n0.answers[m.answer]));
	st.by_answer[m.answer < RW_ANSWER_COUNT ? m.answer : 0]++;
	if (m.answer == RW_ANSWER_RST && ct != MODEL_CT_NONE && (p.tcp_flags & 0x16) == 0x10) {
		st.revokes++;
		st.revokes_ended += m.reason == RW_REASON_UNKNOWN_SOURCE;
		st.revokes6 += p.is_ipv6;
	}
	if (p.is_ipv6 && p.reason == RW_REASON_ALLOWED) {
		st.by_reason6[m.reason < RW_REASON_COUNT ? m.reason : RW_REASON_COUNT]++;
		st.ipv6_allowed += m.verdict == RW_VERDICT_ALLOW;
		st.ndp += p.proto == IPPROTO_ICMPV6 && p.icmp6_type >= 133 && p.icmp6_type <= 137;
		st.icmp6_errors +=
			p.proto == IPPROTO_ICMPV6 && p.icmp6_type >= 1 && p.icmp6_type <= 4;
	}

	if (m.ct_create)
		ct_add(&k, dir == RW_DIR_EGRESS ? MODEL_CT_BY_EGRESS : MODEL_CT_BY_INGRESS);
	if (m.learn_ll6) { /* the production copy stored it; the dry run never does */
		binding[veth].has_ll6 = 1;
		memcpy(binding[veth].ll6, p.saddr6, 16);
	}
}

/* ---- the lease ---- */

static void set_lease(int expired)
{
	struct timespec ts;
	char err[256];
	__u64 deadline;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* Expired: 1 ns after boot. Ahead: an hour from now, far past any run of the suite. */
	deadline = expired ? 1 : (__u64)(ts.tv_sec + 3600) * 1000000000ULL;
	if (lease_mode == LEASE_NONE && !expired)
		deadline = 0;
	if (rw_lease_write(&dp, deadline, err, sizeof(err))) {
		printf("Bail out! %s\n", err);
		exit(1);
	}
	lease_expired = expired;
}

static void pick_lease(void)
{
	__u32 r = rnd(100);

	lease_mode = r < 55   ? LEASE_NONE
		     : r < 70 ? LEASE_AHEAD
		     : r < 85 ? LEASE_EXPIRED
			      : LEASE_CUT;
	set_lease(lease_mode == LEASE_EXPIRED);
}

/* ---- packets ---- */

/* An address at the edge of something the snapshot or the contract names: first, last, one
 * outside either end, or inside.
 */
static __u32 edge_of(__u32 net, int len)
{
	__u32 first = net & mask_of(len), last = first | ~mask_of(len);

	switch (rnd(5)) {
	case 0:
		return first;
	case 1:
		return last;
	case 2:
		return first - 1;
	case 3:
		return last + 1;
	default:
		return first | ((__u32)rnd64() & ~mask_of(len));
	}
}

static const struct rw_policy_rule *pick_rule(int *is_inbound)
{
	const struct rw_policy *s = cur_snap;
	size_t n_allow = 0;

	*is_inbound = 0;
	for (size_t r = 0; r < s->n_runs; r++)
		n_allow += s->runs[r].n_allow;
	for (int tries = 0; tries < 4; tries++) {
		const struct rw_policy_rule *rule = NULL;

		switch (rnd(3)) {
		case 0:
			if (s->n_services)
				rule = &s->services[rnd(s->n_services)];
			break;
		case 1:
			if (s->n_inbound) {
				*is_inbound = 1;
				rule = &s->inbound[rnd(s->n_inbound)];
			}
			break;
		default:
			if (n_allow) {
				const struct rw_policy_run *run = &s->runs[rnd(s->n_runs)];

				if (run->n_allow)
					rule = &run->allow[rnd(run->n_allow)];
			}
		}
		if (rule && rule->family != AF_INET6) /* the IPv4 ones: pick_rule6() for IPv6 */
			return rule;
		*is_inbound = 0;
	}
	return NULL;
}

static __u16 rule_port(const struct rw_policy_rule *r, __u8 *proto)
{
	if (r->n_tcp && (!r->n_udp || chance(50))) {
		*proto = IPPROTO_TCP;
		return r->tcp[rnd(r->n_tcp)];
	}
	if (r->n_udp) {
		*proto = IPPROTO_UDP;
		return r->udp[rnd(r->n_udp)];
	}
	return pick_port();
}

/* The far end of a packet (destination of egress, source of ingress) and its port. */
static __u32 pick_peer(__u16 *port, __u8 *proto)
{
	const struct rw_policy_rule *r;
	int inbound;

	*port = pick_port();
	switch (cur_snap ? rnd(6) : 5) {
	case 0:
	case 1:
	case 2:
		r = pick_rule(&inbound);
		if (r) {
			if (chance(75))
				*port = rule_port(r, proto);
			return edge_of(ntohl(r->addr), r->prefixlen);
		}
		break;
	case 3:
		if (cur_snap->n_deny) {
			const struct rw_policy_cidr *d = &cur_snap->deny[rnd(cur_snap->n_deny)];

			if (d->family != AF_INET6)
				return edge_of(ntohl(d->addr), d->prefixlen);
		}
		break;
	case 4: {
		int i = rnd(NSPECIAL);

		return edge_of(special[i].net, special[i].len);
	}
	}
	return pick_addr();
}

static const __u8 tcp_flag_pool[] = {0x02, 0x10, 0x12, 0x04, 0x11, 0x18, 0x00, 0x03, 0x14, 0xff};

static void pick_spec(struct pkt_spec *s, char *src, char *dst, int veth, int dir)
{
	__u32 pod = binding[veth].bound ? ntohl(binding[veth].pod_ip) : pick_addr();
	__u32 self = chance(88) ? pod : chance(50) ? pick_addr() : pod ^ (1u << rnd(32));
	__u16 port;
	__u8 proto = chance(50) ? IPPROTO_TCP : IPPROTO_UDP;
	__u32 peer = pick_peer(&port, &proto);

	memset(s, 0, sizeof(*s));
	if (chance(6))
		proto = rnd(256); /* every protocol number */
	s->proto = proto;
	s->tcp_flags = chance(80) ? tcp_flag_pool[rnd(sizeof(tcp_flag_pool))] : rnd(256);
	if (!s->tcp_flags)
		s->tcp_flags =
			0x10; /* pkt_build makes 0 a SYN; keep "no flags" for the flag pool */
	if (dir == RW_DIR_EGRESS) {
		ip_str(self, src);
		ip_str(peer, dst);
		s->sport = chance(80) ? 30000 + rnd(30000) : pick_port();
		s->dport = port;
	} else {
		ip_str(peer, src);
		ip_str(self, dst);
		s->sport = port;
		s->dport = chance(70) ? pick_port() : 30000 + rnd(30000);
	}
	s->src = src;
	s->dst = dst;
	s->payload = rnd(4) ? rnd(40) : 0;
}

/* ---- IPv6 packets ---- */

/* An address at the edge of an IPv6 prefix: first, last, one outside either end, or inside. */
static struct a6 edge6_of(const void *net_, int len)
{
	struct a6 a;
	int carry;

	memcpy(a.b, net_, 16);
	mask6(&a, len);
	switch (rnd(5)) {
	case 0:
		return a;
	case 2: /* first - 1 */
		for (int i = 15, borrow = 1; i >= 0 && borrow; i--)
			borrow = a.b[i]-- == 0;
		return a;
	case 1:
	case 3: /* last, last + 1 */
		for (int bit = len; bit < 128; bit++)
			a.b[bit / 8] |= 0x80 >> (bit % 8);
		if (rnd(2))
			return a;
		carry = 1;
		for (int i = 15; i >= 0 && carry; i--)
			carry = ++a.b[i] == 0;
		return a;
	default:
		for (int bit = len; bit < 128; bit++)
			if (chance(bit >= 120 ? 50 : 5))
				a.b[bit / 8] ^= 0x80 >> (bit % 8);
		return a;
	}
}

static const struct rw_policy_rule *pick_rule6(void)
{
	const struct rw_policy *s = cur_snap;

	for (int tries = 0; tries < 8; tries++) {
		const struct rw_policy_rule *r = NULL;
		int which = rnd(3);

		if (which == 0 && s->n_services)
			r = &s->services[rnd(s->n_services)];
		else if (which == 1 && s->n_inbound)
			r = &s->inbound[rnd(s->n_inbound)];
		else if (which == 2 && s->n_runs) {
			const struct rw_policy_run *run = &s->runs[rnd(s->n_runs)];

			if (run->n_allow)
				r = &run->allow[rnd(run->n_allow)];
		}
		if (r && r->family == AF_INET6)
			return r;
	}
	return NULL;
}

/* The far end of an IPv6 packet: at the IPv6 rules, deny list and ranges, or an IPv4 one (a
 * rule's, the deny list's, a range's) in an embedded form.
 */
static struct a6 pick_peer6(__u16 *port, __u8 *proto)
{
	const struct rw_policy_rule *r;

	*port = pick_port();
	switch (cur_snap ? rnd(9) : 8) {
	case 0:
	case 1:
	case 2:
		r = pick_rule6();
		if (r) {
			if (chance(75))
				*port = rule_port(r, proto);
			return edge6_of(r->addr6, r->prefixlen);
		}
		break;
	case 3:
	case 4:
		return embed4(pick_peer(port, proto), rnd(6));
	case 5:
		for (size_t i = 0, n = cur_snap->n_deny; i < 4 && n; i++) {
			const struct rw_policy_cidr *d = &cur_snap->deny[rnd(n)];

			if (d->family == AF_INET6)
				return edge6_of(d->addr6, d->prefixlen);
		}
		break;
	case 6: {
		int i = rnd(NSPECIAL6);
		struct a6 net = words_a6(special6[i].w[0], special6[i].w[1], special6[i].w[2],
					 special6[i].w[3]);

		return edge6_of(net.b, special6[i].len);
	}
	}
	return pick_addr6();
}

/* The pod's own IPv6 (or a neighbour of it, another pod's, anything), as pick_spec's self. */
static struct a6 pick_self6(int veth)
{
	struct a6 pod;

	if (binding[veth].flags & RW_EP_IP6)
		memcpy(pod.b, binding[veth].pod_ip6, 16);
	else
		pod = pool_addr6(6);
	if (chance(88))
		return pod;
	if (chance(50))
		return pool_addr6(6);
	pod.b[15 - rnd(8)] ^= 1u << rnd(8);
	return pod;
}

static void pick_spec6(struct pkt_spec *s, char *src, char *dst, int veth, int dir)
{
	struct a6 self = pick_self6(veth), peer;
	__u8 proto = chance(50) ? IPPROTO_TCP : IPPROTO_UDP;
	__u16 port;

	peer = pick_peer6(&port, &proto);
	memset(s, 0, sizeof(*s));
	s->ipv6 = 1;
	if (chance(4))
		proto = chance(50) ? IPPROTO_ICMPV6 : rnd(256);
	s->proto = proto;
	s->icmp6_type = chance(70) ? 128 + rnd(2) : rnd(256);
	s->tcp_flags = chance(80) ? tcp_flag_pool[rnd(10)] : rnd(256);
	if (!s->tcp_flags)
		s->tcp_flags = 0x10;
	ip6_str(dir == RW_DIR_EGRESS ? &self : &peer, src);
	ip6_str(dir == RW_DIR_EGRESS ? &peer : &self, dst);
	if (dir == RW_DIR_EGRESS) {
		s->sport = chance(80) ? 30000 + rnd(30000) : pick_port();
		s->dport = port;
	} else {
		s->sport = port;
		s->dport = chance(70) ? pick_port() : 30000 + rnd(30000);
	}
	s->src = src;
	s->dst = dst;
	s->payload = rnd(4) ? rnd(40) : 0;
	/* Extension headers the walk takes, now and then: destination options, hop-by-hop first. */
	if (chance(8)) {
		s->n_ext = 1 + rnd(2);
		for (int i = 0; i < s->n_ext; i++) {
			s->ext[i] = i == 0 && chance(50) ? 0 : 60;
			s->ext_len[i] = rnd(3);
		}
	}
}

/* An ICMPv6 message in an Ethernet frame: the IPv6 header (hop limit `hop`), type, code, a right
 * checksum, and `body` (what follows the 4-byte header).
 */
static size_t build_icmp6(__u8 *buf, const struct a6 *src, const struct a6 *dst, __u8 hop,
			  __u8 type, __u8 code, const __u8 *body, size_t body_len)
{
	static const __u8 macs[12] = {0x02, 0, 0, 0, 0, 0xfe, 0x02, 0, 0, 0, 0, 0x01};
	size_t len = 14 + 40 + 4 + body_len > PKT_MAX ? PKT_MAX - 14 - 40 : 4 + body_len;
	__u8 *ip = buf + 14, *m = ip + 40, pseudo[8] = {0, 0, len >> 8, len & 0xff, 0, 0, 0, 58};
	__u16 sum;

	memset(buf, 0, 14 + 40 + 4);
	memcpy(buf, macs, 12);
	buf[12] = 0x86;
	buf[13] = 0xdd;
	ip[0] = 0x60;
	ip[4] = len >> 8;
	ip[5] = len;
	ip[6] = 58;
	ip[7] = hop;
	memcpy(ip + 8, src->b, 16);
	memcpy(ip + 24, dst->b, 16);
	m[0] = type;
	m[1] = code;
	memcpy(m + 4, body, len - 4);
	sum = pkt_csum_sum(ip + 8, 32, pkt_csum_sum(pseudo, 8, 0));
	sum = ~pkt_csum_sum(m, len, sum);
	m[2] = sum >> 8;
	m[3] = sum;
	return 14 + 40 + len;
}

/* The solicited-node group of an address: ff02::1:ff and its last 24 bits. */
static struct a6 solicited_of(const struct a6 *a)
{
	struct a6 g = words_a6(0xff020000, 0, 1, 0xff000000);

	memcpy(g.b + 13, a->b + 13, 3);
	return g;
}

/* The host veth's link-local: the pod's gateway. */
static struct a6 gw_of(int v)
{
	return words_a6(0xfe800000, 0, 0, 0x100 + v);
}

static struct a6 pod_ll_of(int veth)
{
	return words_a6(0xfe800000, 0, 0x00000200, 0x10 + veth); /* the pod's own link-local */
}

/* NDP of every kind, right and wrong: hop limit, source, destination, target. */
static size_t ndp_frame(__u8 *buf, int veth, int dir)
{
	static const __u8 types[] = {133, 134, 135, 135, 135, 136, 136, 136, 137};
	const struct model_binding *b = &binding[veth];
	struct a6 pod, ll = pod_ll_of(veth), gw = gw_of(veth),
		       any_ll = words_a6(0xfe800000, 0, 0, rnd(1 << 16));
	struct a6 other = pool_addr6(6), zero = {}, src, dst, target;
	__u8 type = types[rnd(sizeof(types))], body[48] = {0};
	__u8 hop = chance(80) ? 255 : chance(50) ? 64 : rnd(256);
	size_t len;

	if (b->flags & RW_EP_IP6)
		memcpy(pod.b, b->pod_ip6, 16);
	else
		pod = pool_addr6(6);
	if (b->flags & RW_EP_GW6)
		memcpy(gw.b, b->gw_ip6, 16);
	if (dir == RW_DIR_EGRESS) {
		const struct a6 *srcs[] = {&ll, &ll, &pod, &zero, &gw, &other, &any_ll};
		struct a6 dsts[] = {gw,
				    solicited_of(&gw),
				    solicited_of(&pod),
				    words_a6(0xff020000, 0, 0, 1),
				    words_a6(0xff020000, 0, 0, 2),
				    any_ll,
				    other};

		src = *srcs[rnd(sizeof(srcs) / sizeof(srcs[0]))];
		dst = dsts[rnd(sizeof(dsts) / sizeof(dsts[0]))];
		if (type == 135 && chance(60))
			dst = chance(70) ? gw : solicited_of(&gw);
	} else {
		const struct a6 *srcs[] = {&gw, &gw, &any_ll, &other, &pod};
		struct a6 dsts[] = {ll, pod, solicited_of(&pod), words_a6(0xff020000, 0, 0, 1),
				    other};

		src = *srcs[rnd(sizeof(srcs) / sizeof(srcs[0]))];
		dst = dsts[rnd(sizeof(dsts) / sizeof(dsts[0]))];
	}
	{
		const struct a6 *targets[] = {&pod, &src, &gw, &ll, &any_ll, &other, &zero};

		target = *targets[rnd(sizeof(targets) / sizeof(targets[0]))];
		if (type == 135 && dir == RW_DIR_EGRESS && chance(50))
			target = gw;
		if (type == 136 && dir == RW_DIR_EGRESS && chance(50))
			target = chance(50) ? pod : src;
	}
	/* body: 4 bytes (flags, reserved), the target, a link-layer address option */
	memcpy(body + 4, target.b, 16);
	body[20] = type == 135 ? 1 : 2;
	body[21] = 1;
	len = type == 133 ? 4 : type == 134 ? 12 : type == 137 ? 36 : 20;
	if (chance(50))
		len += 8;
	if (chance(3))
		len = rnd(len); /* too short for its target */
	return build_icmp6(buf, &src, &dst, hop, type, 0, body, len);
}

/* An ICMPv6 error (unreachable, packet too big, time exceeded, parameter problem) quoting a
 * packet of a flow of the veth's table, the way the error's direction needs (out of the pod:
 * a packet the pod received; into it: one it sent), or of no flow; right and wrong addresses.
 */
static size_t error_frame(__u8 *buf, int veth, int dir)
{
	const struct model_binding *b = &binding[veth];
	char qs[INET6_ADDRSTRLEN], qd[INET6_ADDRSTRLEN];
	struct a6 pod, peer, src, dst, router = pool_addr6(3);
	struct pkt_spec q = {.ipv6 = 1};
	__u8 qbuf[PKT_MAX], body[PKT_MAX];
	__be16 pod_port = htons(40000 + rnd(4)), peer_port = htons(pick_port());
	size_t qlen, keep;
	int tracked = 0;

	if (b->flags & RW_EP_IP6)
		memcpy(pod.b, b->pod_ip6, 16);
	else
		pod = pool_addr6(6);
	peer = pick_addr6();
	q.proto = chance(50) ? IPPROTO_TCP : IPPROTO_UDP;
	for (int tries = 0; ct_n && tries < 8 && chance(80); tries++) {
		const struct ct_entry *e = &ct_tab[rnd(ct_n)];

		if (e->v6 && e->ifindex == (__u32)ifindex_of[veth]) {
			memcpy(pod.b, e->pod, 16);
			memcpy(peer.b, e->peer, 16);
			pod_port = e->pod_port;
			peer_port = e->peer_port;
			q.proto = e->proto;
			tracked = 1;
			break;
		}
	}
	if (chance(5)) /* a neighbouring port: no flow */
		pod_port = htons(ntohs(pod_port) + 1);
	/* The quoted packet: the pod's (pod -> peer) into the pod, the peer's out of it. */
	if (dir == RW_DIR_EGRESS) {
		ip6_str(&peer, qs);
		ip6_str(&pod, qd);
		q.sport = ntohs(peer_port);
		q.dport = ntohs(pod_port);
	} else {
		ip6_str(&pod, qs);
		ip6_str(&peer, qd);
		q.sport = ntohs(pod_port);
		q.dport = ntohs(peer_port);
	}
	q.src = qs;
	q.dst = qd;
	q.tcp_flags = 0x10;
	q.payload = rnd(64);
	if (chance(5))
		q.n_ext = 1, q.ext[0] = 60; /* the quoted header with an extension: not parsed */
	qlen = pkt_build(&q, qbuf) - 14;
	keep = chance(85) ? (qlen < 40 + 8 + 64 ? qlen : 40 + 8 + 64) : rnd(qlen + 1);
	if (chance(3))
		qbuf[14] = 0x40; /* not IPv6 inside */
	memset(body, 0, 4);
	if (chance(30)) /* packet too big: the MTU */
		body[2] = 0x05, body[3] = 0x00;
	memcpy(body + 4, qbuf + 14, keep);
	/* Out of the pod: from the pod to the quoted packet's source (the flow's peer), or aimed
	 * elsewhere; into it: from a router on the way, or the peer.
	 */
	if (dir == RW_DIR_EGRESS) {
		src = pick_self6(veth);
		dst = chance(80) ? peer : pick_addr6();
	} else {
		src = chance(50) ? router : peer;
		dst = pick_self6(veth);
	}
	(void)tracked;
	return build_icmp6(buf, &src, &dst, chance(90) ? 64 : 255, 1 + rnd(4), rnd(7), body,
			   4 + keep);
}

/* An IPv6 packet instead, with a chain of extension headers: mostly the four the walk knows,
 * at and past its bounds, routing headers with and without segments left, fragments, next
 * headers it cannot see past, jumbograms. The knobs the other mutations set still apply.
 */
static void pick_ipv6(struct pkt_spec *s)
{
	static const char *const addrs[] = {
		"2600:1f14:abc:1::3", "2606:4700::1111", "fe80::1",	     "ff02::1:ff00:1",
		"fd00:ec2::254",      "::ffff:10.0.0.1", "64:ff9b::a00:506", "::"};
	static const __u8 ext_pool[] = {0, 43, 44, 60, 60, 60, 0, 43};
	static const __u8 upper_pool[] = {6, 17, 58, 6, 17, 50, 51, 59, 135, 132, 253};

	if (!s->ipv6 || chance(30)) {
		s->src = addrs[rnd(sizeof(addrs) / sizeof(addrs[0]))];
		s->dst = addrs[rnd(sizeof(addrs) / sizeof(addrs[0]))];
	}
	s->ipv6 = 1;
	s->n_ext = chance(40) ? 0 : (int)rnd(PKT_EXT_MAX + 1);
	for (int i = 0; i < s->n_ext; i++) {
		s->ext[i] = chance(95) ? ext_pool[rnd(sizeof(ext_pool))] : rnd(256);
		s->ext_len[i] = chance(80) ? rnd(3) : chance(50) ? 15 + rnd(2) : rnd(256);
	}
	s->rh_type = rnd(5);
	s->segments_left = chance(60) ? 0 : rnd(256);
	s->frag6 = chance(30) ? 0 : chance(50) ? 1 : rnd(0x10000);
	s->jumbo = chance(5);
	if (chance(50))
		s->proto = upper_pool[rnd(sizeof(upper_pool))];
	s->icmp6_type = chance(50) ? 128 + rnd(9) : rnd(256);
}

/* Mutations: the header knobs of the packet builder, then raw byte damage. */
static size_t mutate(struct pkt_spec *s, __u8 *buf)
{
	size_t len;

	if (chance(25))
		pick_ipv6(s);
	switch (rnd(12)) {
	case 0:
		s->ihl = chance(50) ? 6 + rnd(10) : rnd(5);
		break;
	case 1:
		s->frag = chance(50) ? 0x2000 : chance(50) ? 0x4000 : rnd(0x10000);
		break;
	case 2:
		s->vlan = 1;
		break;
	case 3:
		s->arp = 1;
		s->arp_hlen = chance(70) ? 6 : rnd(256);
		break;
	case 4:
		s->ethertype = chance(30) ? 0x86dd : chance(30) ? 0x88a8 : rnd(0x10000);
		break;
	case 5:
		s->tot_len_delta = (int)rnd(80) - 40;
		break;
	case 6:
		s->tcp_doff = rnd(16);
		break;
	case 7:
		s->udp_len_delta = (int)rnd(80) - 40;
		break;
	case 8:
		s->ip_version = rnd(16);
		break;
	default:
		break;
	}
	len = pkt_build(s, buf);
	if (chance(25) && len > 14)
		len -= rnd(len - 14); /* truncation */
	if (chance(30)) {	      /* bit flips anywhere past the MACs */
		int flips = 1 + rnd(3);

		for (int i = 0; i < flips; i++)
			buf[12 + rnd(len - 12)] ^= 1u << rnd(8);
	}
	return len;
}

static void one_packet(void)
{
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	int veth = rnd(N_VETH), dir = chance(55) ? RW_DIR_EGRESS : RW_DIR_INGRESS, kind;
	__u8 buf[PKT_MAX];
	struct pkt_spec s;
	size_t len;

	if (cur_snap && ct_n && chance(12)) {
		/* A segment of a flow some earlier packet opened, maybe under an earlier snapshot
		 * (that may have cut it, or ended its run), either way: a revoke when refused.
		 */
		const struct ct_entry *e = &ct_tab[rnd(ct_n)];
		int v;

		for (v = 0; v < N_VETH && (__u32)ifindex_of[v] != e->ifindex; v++)
			;
		if (v < N_VETH && (e->proto == IPPROTO_TCP || e->proto == IPPROTO_UDP)) {
			memset(&s, 0, sizeof(s));
			s.ipv6 = e->v6;
			inet_ntop(e->v6 ? AF_INET6 : AF_INET,
				  dir == RW_DIR_EGRESS ? e->pod : e->peer, src, sizeof(src));
			inet_ntop(e->v6 ? AF_INET6 : AF_INET,
				  dir == RW_DIR_EGRESS ? e->peer : e->pod, dst, sizeof(dst));
			s.src = src;
			s.dst = dst;
			s.proto = e->proto;
			s.sport = ntohs(dir == RW_DIR_EGRESS ? e->pod_port : e->peer_port);
			s.dport = ntohs(dir == RW_DIR_EGRESS ? e->peer_port : e->pod_port);
			s.tcp_flags = chance(75) ? 0x10 : tcp_flag_pool[rnd(sizeof(tcp_flag_pool))];
			s.tcp_ack = (__u32)rnd64();
			s.payload = chance(50) ? rnd(200) : 0;
			len = pkt_build(&s, buf);
			judge(v, dir, buf, len);
			return;
		}
	}
	/* IPv6: NDP, ICMPv6 errors, and TCP/UDP as for IPv4 (more where the veth has an IPv6). */
	kind = rnd(100);
	if (kind < ((binding[veth].flags & RW_EP_IP6) ? 9 : 3)) {
		len = kind < 5 ? ndp_frame(buf, veth, dir) : error_frame(buf, veth, dir);
		judge(veth, dir, buf, len);
		return;
	}
	if (chance(binding[veth].flags & RW_EP_IP6 ? 50 : 8))
		pick_spec6(&s, src, dst, veth, dir);
	else
		pick_spec(&s, src, dst, veth, dir);
	if (cur_snap && chance(35)) {
		/* A flow first opened from the other side (clean), then this packet on it. */
		struct pkt_spec open = s;
		char osrc[INET6_ADDRSTRLEN], odst[INET6_ADDRSTRLEN];

		memcpy(osrc, dst, sizeof(osrc));
		memcpy(odst, src, sizeof(odst));
		open.src = osrc;
		open.dst = odst;
		open.sport = s.dport;
		open.dport = s.sport;
		open.tcp_flags = 0x02;
		if (open.proto != IPPROTO_TCP && open.proto != IPPROTO_UDP)
			open.proto = s.proto = IPPROTO_TCP;
		len = pkt_build(&open, buf);
		judge(veth, !dir, buf, len);
		if (s.proto == IPPROTO_TCP)
			s.tcp_flags = chance(70) ? 0x10 : tcp_flag_pool[rnd(sizeof(tcp_flag_pool))];
		if (lease_mode == LEASE_CUT)
			set_lease(1);
	}
	if (chance(22))
		len = mutate(&s, buf);
	else
		len = pkt_build(&s, buf);
	judge(veth, dir, buf, len);
	if (lease_mode == LEASE_CUT && lease_expired)
		set_lease(0);
}

/* ---- snapshots into the kernel ---- */

static struct rw_policy snaps[2];
static int have_snap;
static char *json_now;

static const char *run_id_of(const struct rw_policy *p, __be32 ip)
{
	for (size_t r = 0; r < p->n_runs; r++)
		for (size_t i = 0; i < p->runs[r].n_pods; i++)
			if (p->runs[r].pods[i] == ip)
				return p->runs[r].id;
	return NULL;
}

static const char *run_id_of6(const struct rw_policy *p, const void *ip)
{
	for (size_t r = 0; r < p->n_runs; r++)
		for (size_t i = 0; i < p->runs[r].n_pods6; i++)
			if (!memcmp(p->runs[r].pods6[i], ip, 16))
				return p->runs[r].id;
	return NULL;
}

/* A veth's pod moved into `run` (from another run, or from none)? Either of its addresses. */
static int moved_into(const struct rw_policy *prev, const struct model_binding *b,
		      const struct rw_policy *next)
{
	const char *was, *now;

	if ((b->flags & RW_EP_IP4) && (now = run_id_of(next, b->pod_ip)) &&
	    (!(was = run_id_of(prev, b->pod_ip)) || strcmp(was, now)))
		return 1;
	if ((b->flags & RW_EP_IP6) && (now = run_id_of6(next, b->pod_ip6)) &&
	    (!(was = run_id_of6(prev, b->pod_ip6)) || strcmp(was, now)))
		return 1;
	return 0;
}

static int next_snapshot(__u64 revision)
{
	struct rw_policy_error perr;
	struct rw_apply_result res;
	struct rw_policy next;
	char err[512], *json;

	json = have_snap && json_now && chance(30) ? derive_snapshot(json_now, revision)
						   : gen_snapshot(revision);
	if (rw_policy_parse(json, strlen(json), "generated", &next, &perr)) {
		st.refused++;
		if (verbose)
			printf("# refused: %s\n", perr.text);
		free(json);
		return -1;
	}
	if (rw_apply(&dp, have_snap ? &snaps[0] : NULL, &next, &res, err, sizeof(err))) {
		printf("  DIFF apply refused a snapshot the parser took: %s\n    %s", err, json);
		st.diffs++;
		rw_policy_free(&next);
		free(json);
		return -1;
	}
	/* The model's conntrack follows the contract: a pod joining a run (from another, or from
	 * none) loses its flows; a pod whose run ended and that no run names keeps them.
	 */
	if (have_snap) {
		for (int v = 0; v < N_VETH; v++)
			if (binding[v].bound && moved_into(&snaps[0], &binding[v], &next))
				ct_forget(ifindex_of[v]);
		rw_policy_free(&snaps[0]);
	}
	/* The pods' RW_SKIP_* bits, read back from the slot now live, against its own tables. */
	if (rw_pod_lookups_check(&dp, err, sizeof(err))) {
		printf("  DIFF the pods' lookup bits: %s\n    %s", err, json);
		st.diffs++;
	}
	for (size_t r = 0; r < next.n_runs; r++) {
		__u16 skip = rw_pod_lookups(&next, &next.runs[r]);

		st.runs++;
		for (int i = 0; i < 16; i++)
			st.by_skip[i] += skip >> i & 1;
	}
	snaps[0] = next;
	have_snap = 1;
	cur_snap = &snaps[0];
	free(json_now);
	json_now = json;
	cur_json = json;
	st.snapshots++;
	return 0;
}

/* Bind each veth: mostly to a pod of the snapshot (its IPv4, its IPv6 or both, both of one
 * run), sometimes to addresses no run has, or to nothing; the host veth's link-local as the
 * gateway, mostly. Rebinding the same pod keeps its flows (a family added or the gateway changed
 * too); a changed or dropped address, or unbinding, forgets them (user/lib/datapath.h).
 */
static void rebind(void)
{
	for (int v = 0; v < N_VETH; v++) {
		struct model_binding b = {}, *o = &binding[v];
		const struct rw_policy_run *run;
		struct rw_endpoint want = {};
		int keep;

		/* Keep it, with its flows: mostly when its pod is still in a run, and often enough
		 * when its run has ended (its flows are revoked).
		 */
		if (o->bound && cur_snap &&
		    chance(((o->flags & RW_EP_IP4) && run_id_of(cur_snap, o->pod_ip)) ||
					   ((o->flags & RW_EP_IP6) &&
					    run_id_of6(cur_snap, o->pod_ip6))
				   ? 50
				   : 30))
			continue;
		if (chance(85) && cur_snap && cur_snap->n_runs) {
			run = &cur_snap->runs[rnd(cur_snap->n_runs)];
			for (int tries = 0; tries < 4 && !run->n_pods && !run->n_pods6; tries++)
				run = &cur_snap->runs[rnd(cur_snap->n_runs)];
			if (run->n_pods && (!run->n_pods6 || chance(85))) {
				b.flags |= RW_EP_IP4;
				b.pod_ip = run->pods[rnd(run->n_pods)];
			}
			if (run->n_pods6 && (!b.flags || chance(85))) {
				b.flags |= RW_EP_IP6;
				memcpy(b.pod_ip6, run->pods6[rnd(run->n_pods6)], 16);
			} else if (b.flags && chance(10)) {
				struct a6 other = pool_addr6(7); /* no run's */

				b.flags |= RW_EP_IP6;
				memcpy(b.pod_ip6, other.b, 16);
			}
		} else if (chance(50)) {
			struct a6 other = pool_addr6(7);

			b.flags = chance(70) ? RW_EP_IP4 : 0;
			b.pod_ip = b.flags ? htonl(0x0a010300 | rnd(64)) : 0;
			if (!b.flags || chance(50)) {
				b.flags |= RW_EP_IP6;
				memcpy(b.pod_ip6, other.b, 16);
			}
		}
		b.bound = b.flags != 0;
		if (b.bound && (b.flags & RW_EP_IP6) && chance(85)) {
			struct a6 gw = gw_of(v);

			b.flags |= RW_EP_GW6;
			memcpy(b.gw_ip6, gw.b, 16);
		}
		if (b.bound) {
			want.pod_ip = b.pod_ip;
			want.flags = b.flags;
			memcpy(want.pod_ip6, b.pod_ip6, 16);
			memcpy(want.gw_ip6, b.gw_ip6, 16);
			if (rw_endpoint_bind_addrs(&dp, ifindex_of[v], &want)) {
				printf("Bail out! binding veth %d: %s\n", v, strerror(errno));
				exit(1);
			}
		} else {
			rw_endpoint_unbind(&dp, ifindex_of[v]);
		}
		keep = b.bound && o->bound &&
		       (!(o->flags & RW_EP_IP4) ||
			((b.flags & RW_EP_IP4) && b.pod_ip == o->pod_ip)) &&
		       (!(o->flags & RW_EP_IP6) ||
			((b.flags & RW_EP_IP6) && !memcmp(b.pod_ip6, o->pod_ip6, 16)));
		if (!keep)
			ct_forget(ifindex_of[v]);
		else if (o->has_ll6) { /* the same pod keeps its NDP link-local */
			b.has_ll6 = 1;
			memcpy(b.ll6, o->ll6, 16);
		}
		*o = b;
	}
}

/* ---- setup and teardown ---- */

static void set_no_budget(void)
{
	struct rw_config cfg;

	if (rw_config_read(&dp, &cfg))
		goto fail;
	cfg.event_rate = 0;
	cfg.event_burst = 0;
	cfg.answer_rate = 0; /* every answer the model expects is sent */
	cfg.answer_burst = 0;
	if (rw_config_write(&dp, &cfg))
		goto fail;
	ct_share = cfg.ct_per_sandbox;
	return;
fail:
	printf("Bail out! rw_config: %s\n", strerror(errno));
	exit(1);
}

static void setup(void)
{
	char cmd[128], err[512];

	if (unshare(CLONE_NEWNET)) {
		printf("Bail out! unshare(CLONE_NEWNET): %s (needs root)\n", strerror(errno));
		exit(1);
	}
	for (int i = 0; i < N_VETH; i++) {
		snprintf(cmd, sizeof(cmd), "ip link add rwd%d type veth peer name rwd%dp", i, i);
		if (system(cmd)) {
			printf("Bail out! %s failed\n", cmd);
			exit(1);
		}
		snprintf(cmd, sizeof(cmd), "rwd%d", i);
		ifindex_of[i] = if_nametoindex(cmd);
	}
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/rw-proof-diff-%d", getpid());
	if (rw_datapath_load(&dp, pin_dir, 0, err, sizeof(err))) {
		/* The maps may be pinned already: a program the verifier refused leaves none. */
		printf("Bail out! loading the programs pinned at %s: %s\n", pin_dir, err);
		rw_datapath_unpin(pin_dir);
		rmdir(pin_dir);
		exit(1);
	}
	if (rw_datapath_load(&dry, pin_dir, RW_DP_DRY_RUN, err, sizeof(err))) {
		printf("Bail out! loading the dry-run copy over %s: %s\n", pin_dir, err);
		rw_datapath_close(&dp);
		rw_datapath_unpin(pin_dir);
		exit(1);
	}
	ring = ring_buffer__new(dp.map_fd[RW_M_EVENTS], on_event, NULL, NULL);
	if (!ring) {
		printf("Bail out! ring_buffer__new: %s\n", strerror(errno));
		exit(1);
	}
	set_no_budget();
}

/* ---- conntrack full: one sandbox opens more flows than the table holds ----
 *
 * Every new flow is still judged (each verdict is the model's), and eviction never lets
 * anything in: the reply of another sandbox's flow is either still a reply (its entry
 * survived) or judged as if the flow never existed, exactly what the model says for each. With
 * the planned per-sandbox shares, the flood may only displace the flooder's own flows: the other
 * sandbox's reply must still get in, and the flooder's excess is dropped conntrack-full.
 */
static int ct_kernel_has(__u32 ifindex, const struct model_pkt *p, int dir)
{
	struct rw_ct_key k = {.ifindex = ifindex, .proto = p->proto};
	struct rw_ct_value v;
	int fd = rw_conntrack_table_fd(&dp, ifindex), found;

	if (dir == RW_DIR_EGRESS) {
		k.pod_ip = p->saddr;
		k.peer_ip = p->daddr;
		k.pod_port = p->sport;
		k.peer_port = p->dport;
	} else {
		k.pod_ip = p->daddr;
		k.peer_ip = p->saddr;
		k.pod_port = p->dport;
		k.peer_port = p->sport;
	}
	if (fd < 0)
		return 0;
	found = bpf_map_lookup_elem(fd, &k, &v) == 0;
	close(fd);
	return found;
}

static int run_once(int veth, int dir, const struct pkt_spec *spec, struct model_pkt *p)
{
	__u8 buf[PKT_MAX];
	size_t len = pkt_build(spec, buf);
	int retval;

	model_parse(buf, len, 0, p);
	if (test_run(dp.prog_fd[dir], ifindex_of[veth], buf, len, &retval))
		return -1;
	return retval;
}

static int conntrack_full_phase(__u64 revision)
{
	const char *json_fmt =
		"{\"revision\": %llu, \"services\": [{\"name\": \"proxy\", \"ip\": \"172.20.0.10\","
		" \"tcp\": [443]}], \"runs\": [{\"id\": \"run-quiet\", \"pods\": [\"10.9.0.1\"]},"
		" {\"id\": \"run-flood\", \"pods\": [\"10.9.0.2\"], \"egress\": \"open\"}]}";
	struct pkt_spec syn = {.src = "10.9.0.1",
			       .dst = "172.20.0.10",
			       .proto = IPPROTO_TCP,
			       .sport = 40000,
			       .dport = 443,
			       .tcp_flags = 0x02};
	struct pkt_spec reply = {.src = "172.20.0.10",
				 .dst = "10.9.0.1",
				 .proto = IPPROTO_TCP,
				 .sport = 443,
				 .dport = 40000,
				 .tcp_flags = 0x12};
	const unsigned int flows = ct_share + ct_share / 4;
	unsigned long long allowed = 0, full = 0;
	struct model_verdict with, without;
	struct model_pkt p;
	char json[512], dst[INET_ADDRSTRLEN];
	struct rw_policy snap;
	struct rw_policy_error perr;
	struct rw_apply_result res;
	char err[256];
	int ret, fails = 0, has;

	snprintf(json, sizeof(json), json_fmt, (unsigned long long)revision);
	if (rw_policy_parse(json, strlen(json), "conntrack-full", &snap, &perr) ||
	    rw_apply(&dp, cur_snap, &snap, &res, err, sizeof(err))) {
		printf("Bail out! conntrack phase snapshot: %s %s\n", perr.text, err);
		exit(1);
	}
	for (int v = 0; v < N_VETH; v++)
		rw_conntrack_flush(&dp, ifindex_of[v], 0);
	rw_endpoint_bind(&dp, ifindex_of[0], inet_addr("10.9.0.1"));
	rw_endpoint_bind(&dp, ifindex_of[1], inet_addr("10.9.0.2"));
	binding[0] = (struct model_binding){
		.bound = 1, .pod_ip = inet_addr("10.9.0.1"), .flags = RW_EP_IP4};

	ret = run_once(0, RW_DIR_EGRESS, &syn, &p);
	fails += ret != TCX_NEXT_;
	ret = run_once(0, RW_DIR_INGRESS, &reply, &p);
	fails += ret != TCX_NEXT_;
	if (fails)
		printf("  FAIL conntrack phase: the quiet sandbox's flow did not open\n");

	/* The flood: new UDP flows from the open sandbox to public addresses. */
	for (unsigned int i = 0; i < flows; i++) {
		struct pkt_spec f = {.src = "10.9.0.2",
				     .dst = dst,
				     .proto = IPPROTO_UDP,
				     .sport = 1024 + i % 60000,
				     .dport = 443};

		ip_str(0x01000000 + i / 60000 * 256 + 1, dst); /* 1.0.x.1 */
		ret = run_once(1, RW_DIR_EGRESS, &f, &p);
		if (ret == TCX_NEXT_)
			allowed++;
		else
			full++;
	}
	/* The quiet sandbox's reply: the model's verdict for whatever the table still holds. */
	reply.tcp_flags = 0x10;
	{
		__u8 buf[PKT_MAX];
		size_t len = pkt_build(&reply, buf);

		model_parse(buf, len, 0, &p);
		has = ct_kernel_has(ifindex_of[0], &p, RW_DIR_INGRESS);
		model_judge(&snap, &binding[0], RW_DIR_INGRESS, &p, MODEL_CT_BY_EGRESS, 0, 0,
			    &with);
		model_judge(&snap, &binding[0], RW_DIR_INGRESS, &p, MODEL_CT_NONE, 0, 0, &without);
		if (test_run(dp.prog_fd[RW_DIR_INGRESS], ifindex_of[0], buf, len, &ret))
			ret = -100;
	}
	if (ret !=
	    ((has ? with.verdict : without.verdict) == RW_VERDICT_ALLOW ? TCX_NEXT_ : TCX_DROP_)) {
		printf("  FAIL conntrack phase: quiet sandbox's reply returned %d with its entry %s\n",
		       ret, has ? "present" : "evicted");
		fails++;
	}
	if (!has || allowed != ct_share || allowed + full != flows) {
		printf("  FAIL conntrack phase: the flood displaced the quiet sandbox's flow"
		       " (%s) or was never refused conntrack-full (%llu)\n",
		       has ? "kept" : "evicted", full);
		fails++;
	}
	printf("%s 2 - conntrack full: %u new flows from one sandbox (its share %u): %llu allowed, "
	       "%llu refused conntrack-full; the other sandbox's flow %s, its reply %s as the model says\n",
	       fails ? "not ok" : "ok", flows, ct_share, allowed, full, has ? "kept" : "evicted",
	       ret == TCX_NEXT_ ? "allowed" : "dropped");
	for (int v = 0; v < N_VETH; v++)
		rw_conntrack_flush(&dp, ifindex_of[v], 0);
	rw_policy_free(&snap);
	return fails;
}

/* ---- the flip under concurrent readers ----
 *
 * The main thread flips the pinned state word between two values that differ in every byte,
 * through rw_config_flip() as an apply does, while reader threads run a small program with
 * BPF_PROG_TEST_RUN that loads the word exactly as rw_state_load() does (one aligned 8-byte
 * load of rw_config[0]) and counts, in a per-CPU map, each value it saw: the one, the other, or
 * anything else (and keeps the last such). Any other value is a torn read: a packet judging
 * under a slot and a revision that were never stored together. The readers must also have seen
 * both values, or they did not run while the word moved and the phase proves nothing.
 */
#define FLIP_A	     0x5a5a5a5a5a5a5a02ULL /* ready, slot 0 */
#define FLIP_B	     0xa5a5a5a5a5a5a503ULL /* ready, slot 1: every byte differs from FLIP_A */
#define FLIP_READERS 2
#define FLIP_REPEAT  2000 /* loads per BPF_PROG_TEST_RUN call */

struct flip_seen {
	__u64 torn, saw_a, saw_b, last_torn;
};

static volatile int flip_done, flip_started;
static int flip_prog = -1;
static unsigned long long flip_reads;

#define INSN(c, d, s, o, i) \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define LD_IMM64(d, src, v) \
	INSN(BPF_LD | BPF_DW | BPF_IMM, d, src, 0, (__u32)(v)), INSN(0, 0, 0, 0, (__u64)(v) >> 32)

static int flip_reader_load(int cfg_fd, int seen_fd)
{
	const struct bpf_insn insns[] = {
		INSN(BPF_ST | BPF_W | BPF_MEM, BPF_REG_10, 0, -4, 0), /* key 0 */
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
		INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4),
		LD_IMM64(BPF_REG_1, BPF_PSEUDO_MAP_FD, cfg_fd),
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
		INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 21, 0), /* -> exit */
		/* The load rw_state_load() makes. */
		INSN(BPF_LDX | BPF_DW | BPF_MEM, BPF_REG_6, BPF_REG_0, 0, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_8, 0, 0, 8), /* saw_a */
		LD_IMM64(BPF_REG_1, 0, FLIP_A),
		INSN(BPF_JMP | BPF_JEQ | BPF_X, BPF_REG_6, BPF_REG_1, 5, 0), /* -> count */
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_8, 0, 0, 16),	     /* saw_b */
		LD_IMM64(BPF_REG_1, 0, FLIP_B),
		INSN(BPF_JMP | BPF_JEQ | BPF_X, BPF_REG_6, BPF_REG_1, 1, 0), /* -> count */
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_8, 0, 0, 0),	     /* torn */
		/* count: */
		INSN(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
		INSN(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4),
		LD_IMM64(BPF_REG_1, BPF_PSEUDO_MAP_FD, seen_fd),
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
		INSN(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 5, 0), /* -> exit */
		INSN(BPF_ALU64 | BPF_ADD | BPF_X, BPF_REG_0, BPF_REG_8, 0, 0),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_1, 0, 0, 1),
		INSN(BPF_STX | BPF_DW | BPF_ATOMIC, BPF_REG_0, BPF_REG_1, 0, BPF_ADD),
		INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_8, 0, 1, 0),	       /* -> exit */
		INSN(BPF_STX | BPF_DW | BPF_MEM, BPF_REG_0, BPF_REG_6, 24, 0), /* last_torn */
		/* exit: */
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};

	return bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "rw_flip_reader", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), NULL);
}

static void *flip_reader(void *arg)
{
	__u8 frame[64] = {0};
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = sizeof(frame),
		    .repeat = FLIP_REPEAT);

	__atomic_add_fetch(&flip_started, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&flip_done, __ATOMIC_SEQ_CST)) {
		if (bpf_prog_test_run_opts(flip_prog, &opts))
			return (void *)(long)-errno;
		__atomic_add_fetch(&flip_reads, FLIP_REPEAT, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int flip_phase(unsigned long long flips, int tap)
{
	int ncpu = libbpf_num_possible_cpus(), cfg_fd = dp.map_fd[RW_M_CONFIG], seen_fd, fails = 0;
	struct flip_seen *per = calloc(ncpu > 0 ? ncpu : 1, sizeof(*per)), sum = {};
	pthread_t readers[FLIP_READERS];
	struct rw_config cfg, end;
	struct timespec t0, t1;
	unsigned long long n = 0;
	char err[512] = "";
	__u32 zero = 0;
	__u64 cur;
	int ret = 0;

	seen_fd =
		bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "rw_flip_seen", 4, sizeof(sum), 1, NULL);
	if (!per || seen_fd < 0 || rw_config_read(&dp, &cfg)) {
		printf("Bail out! flip phase: setting up: %s\n", strerror(errno));
		exit(1);
	}
	flip_prog = flip_reader_load(cfg_fd, seen_fd);
	if (flip_prog < 0) {
		printf("Bail out! flip phase: loading the reader: %s\n", strerror(errno));
		exit(1);
	}
	ret = rw_config_flip(&dp, cfg.state, FLIP_A, err, sizeof(err));
	flip_done = 0;
	for (int i = 0; !ret && i < FLIP_READERS; i++)
		if (pthread_create(&readers[i], NULL, flip_reader, NULL)) {
			printf("Bail out! flip phase: pthread_create failed\n");
			exit(1);
		}
	while (!ret && __atomic_load_n(&flip_started, __ATOMIC_SEQ_CST) < FLIP_READERS)
		sched_yield();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cur = FLIP_A;
	for (; !ret && n < flips; n++) {
		__u64 next = cur == FLIP_A ? FLIP_B : FLIP_A;

		ret = rw_config_flip(&dp, cur, next, err, sizeof(err));
		cur = next;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	__atomic_store_n(&flip_done, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < FLIP_READERS && flip_started; i++) {
		void *rr;

		pthread_join(readers[i], &rr);
		if (rr && !ret) {
			snprintf(err, sizeof(err), "reader: BPF_PROG_TEST_RUN: %s",
				 strerror(-(int)(long)rr));
			ret = -1;
		}
	}
	rw_config_read(&dp, &end);
	if (bpf_map_lookup_elem(seen_fd, &zero, per) == 0) {
		for (int c = 0; c < ncpu; c++) {
			sum.torn += per[c].torn;
			sum.saw_a += per[c].saw_a;
			sum.saw_b += per[c].saw_b;
			if (per[c].torn)
				sum.last_torn = per[c].last_torn;
		}
	}
	/* Back to the state the snapshots left. */
	if (rw_config_flip(&dp, end.state, cfg.state, err + strlen(err), sizeof(err) - strlen(err)))
		ret = ret ? ret : -1;
	printf("# flip phase: %llu flips in %.3f s by rw_flip; %d readers made %llu loads: %llu saw "
	       "%#llx, %llu saw %#llx, %llu saw anything else\n",
	       n, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, FLIP_READERS,
	       flip_reads, (unsigned long long)sum.saw_a, FLIP_A, (unsigned long long)sum.saw_b,
	       FLIP_B, (unsigned long long)sum.torn);
	if (ret) {
		printf("not ok %d - the flip under readers: %s\n", tap, err);
		fails++;
	} else if (sum.torn || end.state != cur) {
		printf("not ok %d - the flip under readers: %llu torn loads (the last %#llx), state "
		       "%#llx after the last flip to %#llx\n",
		       tap, (unsigned long long)sum.torn, (unsigned long long)sum.last_torn,
		       (unsigned long long)end.state, (unsigned long long)cur);
		fails++;
	} else if (!sum.saw_a || !sum.saw_b) {
		printf("not ok %d - the flip under readers: the readers never saw the word move "
		       "(%llu and %llu loads of each value)\n",
		       tap, (unsigned long long)sum.saw_a, (unsigned long long)sum.saw_b);
		fails++;
	} else {
		printf("ok %d - the flip under readers: every load saw one of the two stored states\n",
		       tap);
	}
	close(flip_prog);
	close(seen_fd);
	free(per);
	return fails;
}

static void teardown(void)
{
	ring_buffer__free(ring);
	rw_datapath_close(&dry);
	rw_datapath_close(&dp);
	rw_datapath_unpin(pin_dir);
	rmdir(pin_dir);
}

/* ---- replay: the CLI's private judge against the model ---- */

#define REPLAY_FLOWS_PER_POD 200

/* One new flow of `pod` (run `run`, bound alone as b says) judged by the private copy and by
 * the model. Returns 1 on a difference (printed, the first ten), else 0.
 */
static int replay_one(struct rw_datapath *priv, const struct rw_policy *pol,
		      const struct rw_policy_run *run, const struct model_binding *b,
		      const struct rw_ip *pod, int ipv6, const char *json)
{
	static unsigned long long printed;
	int dir = chance(70) ? RW_DIR_EGRESS : RW_DIR_INGRESS;
	struct rw_cli_verdict v;
	struct rw_cli_probe probe;
	struct model_verdict m;
	struct model_pkt mp;
	struct rw_ip peer;
	__u8 buf[RW_CLI_PKT_MAX], proto = chance(50) ? IPPROTO_TCP : IPPROTO_UDP;
	__u16 port;
	size_t len;
	char err[600], text[200];

	if (ipv6) {
		struct a6 a = pick_peer6(&port, &proto);

		peer = rw_ip6((const __be32 *)a.b);
	} else {
		peer = rw_ip4(htonl(pick_peer(&port, &proto)));
	}
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		proto = IPPROTO_UDP;
	if (!port)
		port = 1;
	rw_cli_probe_make(&probe, (__u8)dir, proto, 0x02, 40000, port, pod, &peer);
	len = rw_cli_build_packet(&probe, buf, sizeof(buf));
	model_parse(buf, len, 0, &mp);
	model_judge(pol, b, dir, &mp, MODEL_CT_NONE, 0, 0, &m);
	if (rw_cli_judge(priv, &probe, RW_CLI_PRIVATE_IFINDEX, &v, err, sizeof(err))) {
		printf("  DIFF replay: %s\n", err);
		return 1;
	}
	if (v.verdict == m.verdict && v.reason == m.reason && v.path == m.path &&
	    v.answer == m.answer && rule_ok(&m, v.rule_id))
		return 0;
	rw_cli_probe_str(&probe, text, sizeof(text));
	if (printed++ < 10)
		printf("  DIFF replay: %s (run %s): model %s, %s, path %s, answer %s; private judge "
		       "%s, %s, path %s, answer %s, rule %x\n    %s",
		       text, run->id, m.verdict ? "allow" : "drop", reason_name(m.reason),
		       rw_path_name(m.path), rw_answer_name(m.answer), v.verdict ? "allow" : "drop",
		       reason_name(v.reason), rw_path_name(v.path), rw_answer_name(v.answer),
		       v.rule_id, json);
	return 1;
}

/* `runwall replay` (and `explain --policy`) judge under a snapshot in private maps (cli_private.c):
 * the programs loaded unpinned with rw_dry_run, the snapshot applied, one pod bound to the loopback
 * index, a new flow's packet built by rw_cli_probe_make(). For `snapshots` generated snapshots,
 * the new flows of `pods` random runs' pods (REPLAY_FLOWS_PER_POD each; either family, either
 * direction) must get the model's verdict, reason, path, answer and rule (the model judging a new
 * flow on a veth bound to that pod alone). A private load per snapshot and a bind per pod are
 * the cost: a pod bound in place of another waits for its conntrack tables to be replaced.
 */
static int replay_phase(int snapshots, int pods, __u64 revision, int tap)
{
	const struct rw_policy *saved = cur_snap;
	unsigned long long judged = 0, diffs = 0;
	struct timespec t0, t1;
	int loaded = 0, bound = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int s = 0; s < snapshots * 4 && loaded < snapshots; s++) {
		char *json = gen_snapshot(revision++), err[600];
		struct rw_policy_error perr;
		struct rw_datapath priv;
		struct rw_policy pol;

		if (rw_policy_parse(json, strlen(json), "generated", &pol, &perr)) {
			free(json);
			continue;
		}
		if (rw_cli_private_load(&priv, &pol, 0, err, sizeof(err))) {
			printf("  DIFF replay: the private load refused a snapshot the parser took: %s\n",
			       err);
			diffs++;
			rw_policy_free(&pol);
			free(json);
			continue;
		}
		loaded++;
		cur_snap = &pol; /* what pick_peer() and pick_peer6() pick from */
		/* A few pods, many flows each: as replay judges them, sorted by pod. */
		for (int i = 0; i < pods && pol.n_runs; i++) {
			const struct rw_policy_run *run = &pol.runs[rnd(pol.n_runs)];
			int ipv6 = run->n_pods6 && (!run->n_pods || chance(40));
			struct model_binding b = {.bound = 1};
			struct rw_ip pod;

			if (!run->n_pods && !run->n_pods6)
				continue;
			if (ipv6) {
				pod = rw_ip6(run->pods6[rnd(run->n_pods6)]);
				b.flags = RW_EP_IP6;
				memcpy(b.pod_ip6, pod.a, 16);
			} else {
				pod = rw_ip4(run->pods[rnd(run->n_pods)]);
				b.flags = RW_EP_IP4;
				b.pod_ip = pod.a[0];
			}
			if (rw_cli_private_bind(&priv, &pod)) {
				printf("  DIFF replay: binding a pod of run %s refused\n", run->id);
				diffs++;
				continue;
			}
			bound++;
			for (int k = 0; k < REPLAY_FLOWS_PER_POD; k++)
				diffs += replay_one(&priv, &pol, run, &b, &pod, ipv6, json);
			judged += REPLAY_FLOWS_PER_POD;
		}
		cur_snap = saved;
		rw_datapath_close(&priv);
		rw_policy_free(&pol);
		free(json);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("# replay phase: %llu new flows of %d pods over %d snapshots in %.1f s\n", judged,
	       bound, loaded,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	printf("%s %d - replay's private judge agrees with the model: %llu new flows over %d "
	       "snapshots, %llu differences\n",
	       diffs || !judged ? "not ok" : "ok", tap, judged, loaded, diffs);
	return diffs || !judged;
}

int main(int argc, char **argv)
{
	unsigned long long seed = 0, packets = 100000, snapshots = 0, flips = 20000, per_snap;
	struct timespec t0, t1;
	int have_seed = 0, ct_fails = 0, flip_fails, replay_fails, no_ct_phase = 0;
	__u64 revision = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
			have_seed = 1;
		} else if (!strcmp(argv[i], "--packets") && i + 1 < argc) {
			packets = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--snapshots") && i + 1 < argc) {
			snapshots = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--flips") && i + 1 < argc) {
			flips = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--no-conntrack-phase")) {
			no_ct_phase = 1;
		} else if (!strcmp(argv[i], "-v")) {
			verbose = 1;
		} else {
			fprintf(stderr,
				"usage: %s [--seed N] [--packets N] [--snapshots N] [--flips N] "
				"[--no-conntrack-phase] [-v]\n",
				argv[0]);
			return 2;
		}
	}
	if (!have_seed && getenv("RW_DIFF_SEED") &&
	    *getenv("RW_DIFF_SEED")) { /* make check RW_DIFF_SEED=N */
		seed = strtoull(getenv("RW_DIFF_SEED"), NULL, 0);
		have_seed = 1;
	}
	if (!have_seed) {
		clock_gettime(CLOCK_REALTIME, &t0);
		seed = (unsigned long long)t0.tv_sec * 1000003ULL ^ (unsigned long long)t0.tv_nsec ^
		       (unsigned long long)getpid();
	}
	if (!snapshots)
		snapshots = packets / 500 ? packets / 500 : 1;
	per_snap = packets / snapshots;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rw_log_setup_libbpf();
	printf("# differential: seed %llu (replay: %s --seed %llu --packets %llu --snapshots %llu)\n",
	       seed, argv[0], seed, packets, snapshots);
	rng_state = seed;
	setup();
	clock_gettime(CLOCK_MONOTONIC, &t0);

	/* Before any snapshot: not-ready, whatever the packet. */
	rebind();
	while (st.packets + st.skipped < 200)
		one_packet();
	while (st.snapshots < snapshots) {
		if (next_snapshot(revision++))
			continue;
		if (st.snapshots % 50 == 0 || ct_n > 20000) {
			/* Keep the kernel's LRU far from full: an eviction is not a model bug. */
			for (int v = 0; v < N_VETH; v++)
				rw_conntrack_flush(&dp, ifindex_of[v], 0);
			ct_forget(0);
		}
		rebind();
		pick_lease();
		while (st.packets + st.skipped < st.snapshots * per_snap + 200)
			one_packet();
	}
	lease_mode = LEASE_NONE;
	set_lease(0);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	printf("# %llu packets over %llu snapshots (%llu generated snapshots refused by the parser,"
	       " %llu frames test_run cannot take) in %.1f s\n",
	       st.packets, st.snapshots, st.refused, st.skipped,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	printf("# reasons:");
	for (int r = 0; r <= RW_REASON_COUNT; r++)
		if (st.by_reason[r])
			printf(" %s %llu", r < RW_REASON_COUNT ? rw_reason_name(r) : "other",
			       st.by_reason[r]);
	printf("\n# paths:");
	for (int p = 0; p < RW_PATH_COUNT; p++)
		printf(" %s %llu", rw_path_name(p), st.by_path[p]);
	printf("\n# answers:");
	for (int a = 0; a < RW_ANSWER_COUNT; a++)
		printf(" %s %llu", rw_answer_name(a), st.by_answer[a]);
	printf("\n# revokes: %llu refused segments of known flows reset both ways, %llu of them of a "
	       "run that ended while its pod lives\n",
	       st.revokes, st.revokes_ended);
	printf("# IPv6: %llu packets that parsed (%llu allowed), %llu NDP, %llu ICMPv6 errors, %llu "
	       "revokes\n",
	       st.ipv6, st.ipv6_allowed, st.ndp, st.icmp6_errors, st.revokes6);
	printf("# IPv6 reasons:");
	for (int r = 0; r <= RW_REASON_COUNT; r++)
		if (st.by_reason6[r])
			printf(" %s %llu", r < RW_REASON_COUNT ? rw_reason_name(r) : "other",
			       st.by_reason6[r]);
	printf("\n");
	printf("# under an expired lease: %llu packets\n", lease_packets);
	printf("# lookups the pods skip, of %llu runs applied: services exact %llu, CIDR %llu, all "
	       "special %llu, deny %llu, run exact %llu, CIDR %llu; IPv6: %llu, %llu, %llu, -, %llu, "
	       "%llu, NAT64 %llu\n",
	       st.runs, st.by_skip[0], st.by_skip[1], st.by_skip[2], st.by_skip[3], st.by_skip[4],
	       st.by_skip[5], st.by_skip[8], st.by_skip[9], st.by_skip[10], st.by_skip[12],
	       st.by_skip[13], st.by_skip[14]);
	for (int a = 0; a <= RW_REASON_COUNT; a++)
		for (int b = 0; b <= RW_REASON_COUNT; b++)
			if (diff_pairs[a][b])
				printf("# verdicts differ: model %s, datapath %s: %llu packets\n",
				       a < RW_REASON_COUNT ? reason_name(a) : "other",
				       b < RW_REASON_COUNT ? reason_name(b) : "other",
				       diff_pairs[a][b]);
	printf("%s 1 - model and datapath agree on every packet (seed %llu): %llu differences\n",
	       st.diffs ? "not ok" : "ok", seed, st.diffs);
	ct_fails = no_ct_phase ? 0 : conntrack_full_phase(revision);
	flip_fails = flip_phase(flips, no_ct_phase ? 2 : 3);
	replay_fails = replay_phase(3, 10, revision + 1000000, no_ct_phase ? 3 : 4);
	teardown();
	printf("1..%d\n", no_ct_phase ? 3 : 4);
	rw_policy_free(&snaps[0]);
	free(json_now);
	free(ct_tab);
	return st.diffs || ct_fails || flip_fails || replay_fails ? 1 : 0;
}
