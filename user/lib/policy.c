// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* policy.c: parse, compare and diff policy snapshots (docs/policy.md), and change one run of a
 * policy without parsing the others (PolicyWatch, docs/policy-watch.md).
 *
 * jansson does the JSON; this file checks the snapshot against its schema and turns every
 * refusal into one line "SOURCE:LINE:COL: PATH: what is wrong" that an operator can act on
 * without reading the code. The parser is all or nothing: a refused snapshot leaves nothing
 * behind, so the caller keeps enforcing the revision in force.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "podaddr.h"
#include "policy.h"
#include "sbuf.h"
#include "util.h"

#define MAX_FILE_BYTES (16u << 20)
/* rw_config.state keeps the revision in its top 56 bits (RW_STATE): a larger one would wrap. */
#define MAX_REVISION ((1ULL << 56) - 1)
/* Deepest path the schema has: runs[i].allow[j].tcp[k]. Unknown keys are refused before
 * anything below them is looked at, so no document can go deeper.
 */
#define MAX_DEPTH 8
/* Bytes of a user string repeated in an error: enough to recognise it, short enough to leave
 * room for the rest of the message in rw_policy_error.text.
 */
#define QUOTE_MAX 64
#define QUOTE_BUF (QUOTE_MAX * 6 + 16)

static const struct {
	__u32 addr; /* host byte order */
	__u8 prefixlen;
	const char *name;
	const char *label;
} special[] = {
#define RW_SPECIAL_ENTRY(a, l, s, label) {a, l, s, label},
	RW_SPECIAL_RANGES(RW_SPECIAL_ENTRY)
#undef RW_SPECIAL_ENTRY
};

static const struct {
	__u32 addr; /* host byte order */
	const char *name;
} metadata[] = {
#define RW_MD_ENTRY(a, s) {a, s},
	RW_METADATA_ADDRS(RW_MD_ENTRY)
#undef RW_MD_ENTRY
};

/* The IPv6 tables of runwall.h, each address as four host-order words. */
struct range6 {
	__u32 w[4];
	__u8 prefixlen;
	const char *name;
	const char *label;
};

static const struct range6 special6[] = {
#define RW_SPECIAL6_ENTRY(a, b, c, d, l, s, label) {{a, b, c, d}, l, s, label},
	RW_SPECIAL6_RANGES(RW_SPECIAL6_ENTRY)
#undef RW_SPECIAL6_ENTRY
};

static const struct {
	__u32 w[4];
	const char *name;
} metadata6[] = {
#define RW_MD6_ENTRY(a, b, c, d, s) {{a, b, c, d}, s},
	RW_METADATA6_ADDRS(RW_MD6_ENTRY)
#undef RW_MD6_ENTRY
};

/* The forms that embed an IPv4 address, in RW_EMBEDDED4_RANGES' order (embedded4_of()). */
enum embedded4_form { EMB_MAPPED, EMB_NAT64, EMB_6TO4, EMB_TEREDO };

static const struct range6 embedded4[] = {
#define RW_EMB4_ENTRY(a, b, c, d, l, s, label) {{a, b, c, d}, l, s, label},
	RW_EMBEDDED4_RANGES(RW_EMB4_ENTRY)
#undef RW_EMB4_ENTRY
};
_Static_assert(sizeof(embedded4) / sizeof(embedded4[0]) == EMB_TEREDO + 1, "embedded4 forms");

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void words6(__be32 out[4], const __u32 w[4])
{
	for (int i = 0; i < 4; i++)
		out[i] = htonl(w[i]);
}

/* a & the mask of a /prefixlen, into out (which may be a). */
static void mask6(__be32 out[4], const __be32 a[4], unsigned int prefixlen)
{
	for (unsigned int i = 0; i < 4; i++) {
		unsigned int bits = prefixlen > 32 * i ? prefixlen - 32 * i : 0;

		out[i] = bits >= 32 ? a[i] : bits ? a[i] & htonl(~0u << (32 - bits)) : 0;
	}
}

static bool in_prefix6(const __be32 a[4], const __be32 net[4], unsigned int prefixlen)
{
	__be32 m[4];

	mask6(m, a, prefixlen);
	return !memcmp(m, net, sizeof(m));
}

static bool cidrs6_overlap(const __be32 a[4], unsigned int alen, const __be32 b[4],
			   unsigned int blen)
{
	__be32 ma[4], mb[4];
	unsigned int len = alen < blen ? alen : blen;

	mask6(ma, a, len);
	mask6(mb, b, len);
	return !memcmp(ma, mb, sizeof(ma));
}

/* The embedded-IPv4 form an address is in, or -1. */
static int embedded4_of(const __be32 a[4])
{
	for (size_t i = 0; i < N_OF(embedded4); i++) {
		__be32 net[4];

		words6(net, embedded4[i].w);
		if (in_prefix6(a, net, embedded4[i].prefixlen))
			return (int)i;
	}
	return -1;
}

static unsigned int clamp_bits(int bits, int max)
{
	return bits < 0 ? 0 : bits > max ? (unsigned int)max : (unsigned int)bits;
}

/* The IPv4 address an address of form `f` carries (the datapath's reading of it: RFC 6052 for
 * NAT64, the Teredo client), and for a CIDR of `prefixlen` bits how many of its bits that CIDR
 * fixes.
 */
static __be32 embedded4_addr(int f, const __be32 a[4], unsigned int prefixlen, __u8 *v4len)
{
	__u32 w0 = ntohl(a[0]), w1 = ntohl(a[1]), w3 = ntohl(a[3]), v4;
	int len = prefixlen;

	switch (f) {
	case EMB_6TO4: /* bits 16-47 */
		v4 = w0 << 16 | w1 >> 16;
		*v4len = clamp_bits(len - 16, 32);
		break;
	case EMB_TEREDO: /* the client: bits 96-127, inverted */
		v4 = ~w3;
		*v4len = clamp_bits(len - 96, 32);
		break;
	default: /* IPv4-mapped and NAT64: the low 32 bits */
		v4 = w3;
		*v4len = clamp_bits(len - 96, 32);
	}
	return htonl(*v4len ? v4 & (~0u << (32 - *v4len)) : 0);
}

const char *rw_builtin_range6(const __be32 addr[4], const char **label)
{
	const char *name = NULL;
	int best = -1;

	*label = NULL;
	for (size_t i = 0; i < N_OF(metadata6); i++) {
		__be32 m[4];

		words6(m, metadata6[i].w);
		if (!memcmp(m, addr, sizeof(m))) {
			*label = "metadata";
			return metadata6[i].name;
		}
	}
	for (size_t i = 0; i < N_OF(embedded4); i++) {
		__be32 net[4];

		words6(net, embedded4[i].w);
		if (in_prefix6(addr, net, embedded4[i].prefixlen) &&
		    embedded4[i].prefixlen > best) {
			name = embedded4[i].name;
			*label = embedded4[i].label;
			best = embedded4[i].prefixlen;
		}
	}
	for (size_t i = 0; i < N_OF(special6); i++) {
		__be32 net[4];

		words6(net, special6[i].w);
		if (in_prefix6(addr, net, special6[i].prefixlen) && special6[i].prefixlen > best) {
			name = special6[i].name;
			*label = special6[i].label;
			best = special6[i].prefixlen;
		}
	}
	return name;
}

const char *rw_builtin_label6(const __be32 addr[4])
{
	const char *label;

	rw_builtin_range6(addr, &label);
	return label;
}

bool rw_policy_rule_same_addr(const struct rw_policy_rule *a, const struct rw_policy_rule *b)
{
	return rw_policy_rule_is6(a) == rw_policy_rule_is6(b) && a->addr == b->addr &&
	       a->prefixlen == b->prefixlen && !memcmp(a->addr6, b->addr6, sizeof(a->addr6));
}

bool rw_policy_cidr_equal(const struct rw_policy_cidr *a, const struct rw_policy_cidr *b)
{
	return (a->family == AF_INET6) == (b->family == AF_INET6) && a->addr == b->addr &&
	       a->prefixlen == b->prefixlen && !memcmp(a->addr6, b->addr6, sizeof(a->addr6));
}

const char *rw_builtin_range(__be32 addr, const char **label)
{
	const char *name = NULL;
	int best = -1;
	__u32 a = ntohl(addr);

	*label = NULL;
	for (size_t i = 0; i < N_OF(metadata); i++)
		if (a == metadata[i].addr) {
			*label = "metadata";
			return metadata[i].name;
		}
	for (size_t i = 0; i < N_OF(special); i++) {
		__u32 mask = special[i].prefixlen ? ~0u << (32 - special[i].prefixlen) : 0;

		if ((a & mask) == special[i].addr && special[i].prefixlen > best) {
			name = special[i].name;
			*label = special[i].label;
			best = special[i].prefixlen;
		}
	}
	return name;
}

const char *rw_builtin_label(__be32 addr)
{
	const char *label;

	rw_builtin_range(addr, &label);
	return label;
}

/* A user string as a JSON-style literal, control characters escaped so that a hostile
 * snapshot cannot forge log lines, cut after QUOTE_MAX bytes (on a character boundary).
 */
static const char *quote(char out[QUOTE_BUF], const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0, i;

	out[o++] = '"';
	for (i = 0; u[i]; i++) {
		if (i >= QUOTE_MAX && (u[i] & 0xc0) != 0x80) {
			o += sprintf(out + o, "...");
			break;
		}
		if (u[i] == '"' || u[i] == '\\')
			o += sprintf(out + o, "\\%c", u[i]);
		else if (u[i] < 0x20 || u[i] == 0x7f)
			o += sprintf(out + o, "\\u%04x", u[i]);
		else
			out[o++] = u[i];
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

static __be32 prefix_mask(unsigned int prefixlen)
{
	return prefixlen ? htonl(~0u << (32 - prefixlen)) : 0;
}

/* ---- Where an error is: the JSON path and its position in the text ------------------------ */

struct step {
	const char *key; /* member name; NULL for an array element */
	size_t index;	 /* the member's position in its object, or the element's index */
};

struct parser {
	const char *buf;
	size_t len;
	const char *source;
	struct rw_policy_error *err;
	uint64_t in_force; /* refuse revisions not above it (0: no check) */
	struct step path[MAX_DEPTH];
	int depth;
};

static void push_key(struct parser *ps, const char *key, size_t index)
{
	ps->path[ps->depth++] = (struct step){.key = key, .index = index};
}

static void push_index(struct parser *ps, size_t index)
{
	ps->path[ps->depth++] = (struct step){.key = NULL, .index = index};
}

static void pop(struct parser *ps)
{
	ps->depth--;
}

static bool key_is_plain(const char *key)
{
	const char *k;

	for (k = key; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		      (*k >= '0' && *k <= '9') || *k == '_' || *k == '-'))
			return false;
	return k != key;
}

/* "runs[1].pods[0]"; a key that is not a plain word is quoted: `runs[0]["a b"]`. */
static void sb_path(struct rw_sbuf *sb, const struct parser *ps, int depth)
{
	char q[QUOTE_BUF];
	int i;

	if (!depth)
		rw_sb_printf(sb, "(document)");
	for (i = 0; i < depth; i++) {
		const struct step *s = &ps->path[i];

		if (!s->key)
			rw_sb_printf(sb, "[%zu]", s->index);
		else if (!key_is_plain(s->key))
			rw_sb_printf(sb, "[%s]", quote(q, s->key));
		else
			rw_sb_printf(sb, "%s%s", i ? "." : "", s->key);
	}
}

/* The path of the current step's sibling `index` (an earlier duplicate), for messages. */
static const char *sibling_path(struct parser *ps, size_t index, char *out, size_t size)
{
	struct step *top = &ps->path[ps->depth - 1];
	size_t saved = top->index;
	struct rw_sbuf sb;

	top->index = index;
	rw_sb_init(&sb, out, size);
	sb_path(&sb, ps, ps->depth);
	top->index = saved;
	return out;
}

/* ---- Locator --------------------------------------------------------------------------------
 * jansson records no positions for values, so to put LINE:COL on a semantic error the text is
 * walked once more along the error's path. This is not a parser: it only ever runs on text that
 * jansson has just accepted, so it validates nothing. It skips whitespace, strings (minding
 * backslash escapes) and whole values (by bracket depth), and counts members and elements.
 *
 * Members are followed by their position in the object, never by name: jansson keeps members
 * in text order and duplicate keys are refused, so the n-th member jansson iterates is the n-th
 * key in the text, and escaped keys ("na\u006de") need no decoding here. On any surprise it
 * gives up and the message goes out without a position.
 */
static size_t loc_ws(const char *b, size_t len, size_t p)
{
	while (p < len && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r'))
		p++;
	return p;
}

/* From an opening quote to just past its closing quote. */
static size_t loc_skip_string(const char *b, size_t len, size_t p)
{
	for (p++; p < len; p++) {
		if (b[p] == '\\')
			p++;
		else if (b[p] == '"')
			return p + 1;
	}
	return len;
}

static size_t loc_skip_value(const char *b, size_t len, size_t p)
{
	int depth = 0;

	if (p < len && b[p] == '"')
		return loc_skip_string(b, len, p);
	if (p < len && (b[p] == '{' || b[p] == '[')) {
		while (p < len) {
			if (b[p] == '"') {
				p = loc_skip_string(b, len, p);
				continue;
			}
			if (b[p] == '{' || b[p] == '[')
				depth++;
			else if ((b[p] == '}' || b[p] == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return len;
	}
	/* number, true, false, null */
	while (p < len && !strchr(",]} \t\r\n", b[p]))
		p++;
	return p;
}

/* Offset of the value at the first `depth` steps of the path, or of the last step's key. */
static bool loc_find(const struct parser *ps, int depth, bool want_key, size_t *off)
{
	const char *b = ps->buf;
	size_t len = ps->len, p = loc_ws(b, len, 0);
	int i;

	for (i = 0; i < depth; i++) {
		const struct step *s = &ps->path[i];
		char open = s->key ? '{' : '[', close = s->key ? '}' : ']';
		size_t k, key;

		if (p >= len || b[p] != open)
			return false;
		p = loc_ws(b, len, p + 1);
		for (k = 0;; k++) {
			key = p;
			if (p >= len || b[p] == close)
				return false;
			if (s->key) {
				if (b[p] != '"')
					return false;
				p = loc_ws(b, len, loc_skip_string(b, len, p));
				if (p >= len || b[p] != ':')
					return false;
				p = loc_ws(b, len, p + 1);
			}
			if (k == s->index)
				break;
			p = loc_ws(b, len, loc_skip_value(b, len, p));
			if (p >= len || b[p] != ',')
				return false;
			p = loc_ws(b, len, p + 1);
		}
		if (want_key && s->key && i == depth - 1)
			p = key;
	}
	if (p >= len)
		return false;
	*off = p;
	return true;
}

/* Columns count characters, not bytes, as jansson's own do (and as editors show them). */
static void loc_line_col(const char *b, size_t off, int *line, int *col)
{
	size_t i;

	*line = 1;
	*col = 1;
	for (i = 0; i < off; i++) {
		if (b[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)b[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

/* ---- Errors ------------------------------------------------------------------------------- */

enum where {
	AT_VALUE,  /* the value at the current path */
	AT_KEY,	   /* the key of the path's last member (unknown or conflicting keys) */
	AT_PARENT, /* the object that should hold the current path (missing keys) */
};

__attribute__((format(printf, 3, 4))) static int fail(struct parser *ps, enum where where,
						      const char *fmt, ...)
{
	struct rw_policy_error *err = ps->err;
	int depth = where == AT_PARENT ? ps->depth - 1 : ps->depth;
	struct rw_sbuf sb;
	size_t off;
	va_list ap;

	err->line = 0;
	err->column = 0;
	if (depth >= 0 && loc_find(ps, depth, where == AT_KEY, &off))
		loc_line_col(ps->buf, off, &err->line, &err->column);

	rw_sb_init(&sb, err->text, sizeof(err->text));
	rw_sb_printf(&sb, "%s:", ps->source);
	if (err->line)
		rw_sb_printf(&sb, "%d:%d:", err->line, err->column);
	rw_sb_printf(&sb, " ");
	sb_path(&sb, ps, ps->depth);
	rw_sb_printf(&sb, ": ");
	va_start(ap, fmt);
	rw_sb_vprintf(&sb, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int fail_nomem(struct parser *ps)
{
	snprintf(ps->err->text, sizeof(ps->err->text), "%s: out of memory", ps->source);
	ps->err->line = 0;
	ps->err->column = 0;
	return -ENOMEM;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "an unknown type";
}

static int fail_type(struct parser *ps, const json_t *v, const char *want)
{
	return fail(ps, AT_VALUE, "expected %s, got %s", want, type_name(v));
}

/* Position of `key` among the members of `obj`, in text order (see the locator). */
static size_t member_index(json_t *obj, const char *key)
{
	const char *k;
	json_t *v;
	size_t i = 0;

	json_object_foreach(obj, k, v)
	{
		if (!strcmp(k, key))
			break;
		i++;
	}
	return i;
}

/* The path down to obj[key], obj being element `index` of the array parent[array]. */
static void push_elem_key(struct parser *ps, json_t *parent, const char *array, size_t index,
			  json_t *obj, const char *key)
{
	push_key(ps, array, member_index(parent, array));
	push_index(ps, index);
	push_key(ps, key, member_index(obj, key));
}

/* ---- Values --------------------------------------------------------------------------------- */

static int parse_string(struct parser *ps, json_t *v, const char **s)
{
	if (!json_is_string(v))
		return fail_type(ps, v, "a string");
	*s = json_string_value(v);
	return 0;
}

/* A mode by name: `parse` gives its value, or a negative number for a name it does not know. */
static int parse_mode(struct parser *ps, json_t *v, int (*parse)(const char *), const char *what,
		      int *mode)
{
	char q[QUOTE_BUF];
	const char *s = NULL;
	int rc;

	rc = parse_string(ps, v, &s);
	if (rc)
		return rc;
	rc = parse(s);
	if (rc < 0)
		return fail(ps, AT_VALUE, "%s is not %s", quote(q, s), what);
	*mode = rc;
	return 0;
}

static int parse_egress(struct parser *ps, json_t *v, int *mode)
{
	return parse_mode(ps, v, rw_egress_parse,
			  "an egress mode (expected \"allowlist\" or \"open\")", mode);
}

static int parse_refusal(struct parser *ps, json_t *v, int *mode)
{
	return parse_mode(ps, v, rw_refusal_parse,
			  "a refusal mode (expected \"answer\" or \"drop\")", mode);
}

/* "egress" or "refusal" (key): a snapshot's modes, or a run's own. */
static int parse_modes(struct parser *ps, const char *key, json_t *v, int *egress, int *refusal)
{
	return !strcmp(key, "egress") ? parse_egress(ps, v, egress) : parse_refusal(ps, v, refusal);
}

static int parse_revision(struct parser *ps, json_t *v, uint64_t *revision)
{
	json_int_t r;

	if (!json_is_integer(v))
		return fail_type(ps, v, "an integer");
	r = json_integer_value(v);
	if (r < 1)
		return fail(ps, AT_VALUE, "%" JSON_INTEGER_FORMAT " is not a revision (1..%llu)", r,
			    MAX_REVISION);
	if ((unsigned long long)r > MAX_REVISION)
		return fail(ps, AT_VALUE,
			    "%" JSON_INTEGER_FORMAT " is too large: the kernel keeps 56 bits of "
			    "revision (at most %llu)",
			    r, MAX_REVISION);
	if (ps->in_force && (uint64_t)r <= ps->in_force)
		return fail(ps, AT_VALUE,
			    "%" JSON_INTEGER_FORMAT " is not newer than %llu, the one "
			    "in force",
			    r, (unsigned long long)ps->in_force);
	*revision = r;
	return 0;
}

static int parse_lease(struct parser *ps, json_t *v, __u32 *seconds)
{
	json_int_t n;

	if (!json_is_integer(v))
		return fail_type(ps, v, "an integer");
	n = json_integer_value(v);
	if (n < RW_LEASE_MIN || n > RW_LEASE_MAX)
		return fail(ps, AT_VALUE,
			    "%" JSON_INTEGER_FORMAT
			    " is not a lease (%d..%d seconds; leave the key "
			    "out for no lease)",
			    n, RW_LEASE_MIN, RW_LEASE_MAX);
	*seconds = (__u32)n;
	return 0;
}

/* Dotted quad exactly as inet_pton(AF_INET) takes it: four decimal parts, no leading zeros
 * (glibc refuses "010.1.1.1" rather than guess octal), no spaces, no shorthand like "10.1".
 */
static bool parse_ipv4(const char *s, __be32 *addr)
{
	struct in_addr a;

	if (inet_pton(AF_INET, s, &a) != 1)
		return false;
	*addr = a.s_addr;
	return true;
}

/* An address of either family into c (family, addr or addr6; the other left zero): IPv4 as
 * above, IPv6 as inet_pton(AF_INET6) takes it (RFC 4291 text, a dotted quad allowed in the
 * last 32 bits, no zone index, no brackets).
 */
static bool parse_ip(const char *s, struct rw_policy_cidr *c)
{
	struct in6_addr a6;

	memset(c, 0, sizeof(*c));
	if (parse_ipv4(s, &c->addr)) {
		c->family = AF_INET;
		c->prefixlen = 32;
		return true;
	}
	if (inet_pton(AF_INET6, s, &a6) != 1)
		return false;
	memcpy(c->addr6, &a6, sizeof(c->addr6));
	c->family = AF_INET6;
	c->prefixlen = 128;
	return true;
}

/* What the author meant to write, for messages: a text with a colon is meant as IPv6. */
static bool meant_ipv6(const char *s)
{
	return strchr(s, ':') != NULL;
}

/* "a.b.c.d/n" with n in 0..32, or "IPv6/n" with n in 0..128, n written without sign or
 * leading zeros, like the address.
 */
static bool parse_cidr_text(const char *s, struct rw_policy_cidr *c)
{
	char ip[INET6_ADDRSTRLEN];
	const char *slash = strchr(s, '/'), *n;
	unsigned int len = 0;
	size_t digits;

	if (!slash || (size_t)(slash - s) >= sizeof(ip))
		return false;
	memcpy(ip, s, slash - s);
	ip[slash - s] = '\0';
	if (!parse_ip(ip, c))
		return false;
	n = slash + 1;
	digits = strspn(n, "0123456789");
	if (!digits || n[digits] || digits > 3 || (n[0] == '0' && digits > 1))
		return false;
	for (size_t i = 0; i < digits; i++)
		len = len * 10 + (n[i] - '0');
	if (len > (c->family == AF_INET6 ? 128u : 32u))
		return false;
	c->prefixlen = len;
	return true;
}

static bool host_bits_set(const struct rw_policy_cidr *c)
{
	__be32 m[4];

	if (c->family != AF_INET6)
		return (c->addr & ~prefix_mask(c->prefixlen)) != 0;
	mask6(m, c->addr6, c->prefixlen);
	return memcmp(m, c->addr6, sizeof(m)) != 0;
}

static int parse_cidr(struct parser *ps, json_t *v, struct rw_policy_cidr *c)
{
	char q[QUOTE_BUF], net[64];
	struct rw_policy_cidr m;
	const char *s = NULL;
	struct rw_sbuf sb;
	int rc;

	rc = parse_string(ps, v, &s);
	if (rc)
		return rc;
	if (!parse_cidr_text(s, c))
		return fail(ps, AT_VALUE, "%s is not a CIDR (%s)", quote(q, s),
			    meant_ipv6(s) ? "an IPv6 address/n with n in 0..128"
					  : "a.b.c.d/n with n in 0..32");
	/* A typo here widens or narrows a rule silently, so no rounding down behind the user's
	 * back: say what the network would be and let them write it.
	 */
	if (host_bits_set(c)) {
		m = *c;
		if (m.family == AF_INET6)
			mask6(m.addr6, m.addr6, m.prefixlen);
		else
			m.addr &= prefix_mask(m.prefixlen);
		rw_sb_init(&sb, net, sizeof(net));
		rw_sb_cidr_of(&sb, &m);
		return fail(ps, AT_VALUE, "%s has host bits set: did you mean %s?", quote(q, s),
			    net);
	}
	return 0;
}

/* "nat64": the cluster's NAT64 prefix, a /96 (the IPv4 address in its low 32 bits, RFC 6052):
 * 64:ff9b::/96, or a network-specific prefix outside every special range (64:ff9b:1::/48, the
 * local-use range RFC 8215 gives NAT64, aside) and the other forms that carry an IPv4 address.
 */
static int parse_nat64(struct parser *ps, json_t *v, struct rw_policy_cidr *c)
{
	char q[QUOTE_BUF];
	__be32 net[4];
	int rc;

	rc = parse_cidr(ps, v, c);
	if (rc)
		return rc;
	if (c->family != AF_INET6)
		return fail(ps, AT_VALUE,
			    "%s is not an IPv6 prefix (the cluster's NAT64 prefix, such as "
			    "64:ff9b::/96)",
			    quote(q, json_string_value(v)));
	if (c->prefixlen != RW_NAT64_PREFIXLEN)
		return fail(
			ps, AT_VALUE,
			"%s is a /%u: the NAT64 prefix is a /96 (the IPv4 address in its low 32 "
			"bits, RFC 6052; the other lengths are not taken)",
			quote(q, json_string_value(v)), c->prefixlen);
	for (size_t i = 0; i < N_OF(embedded4); i++) {
		words6(net, embedded4[i].w);
		if (i != EMB_NAT64 && in_prefix6(c->addr6, net, embedded4[i].prefixlen))
			return fail(ps, AT_VALUE, "%s is in %s, the %s form: not a NAT64 prefix",
				    quote(q, json_string_value(v)), embedded4[i].name,
				    embedded4[i].label);
	}
	for (size_t i = 0; i < N_OF(special6); i++) {
		words6(net, special6[i].w);
		if (strcmp(special6[i].label, "local NAT64") &&
		    in_prefix6(c->addr6, net, special6[i].prefixlen))
			return fail(ps, AT_VALUE,
				    "%s is in %s (%s): not a NAT64 prefix (64:ff9b::/96, one in "
				    "64:ff9b:1::/48, or a global one of the cluster's)",
				    quote(q, json_string_value(v)), special6[i].name,
				    special6[i].label);
	}
	c->family = AF_INET6;
	return 0;
}

/* Metadata is never allowed whatever a rule says (the datapath enforces that too): a rule that
 * covers it is a mistake at best, so refuse it here where the author can see which one.
 */
static int check_metadata(struct parser *ps, const char *text, const struct rw_policy_cidr *c)
{
	char q[QUOTE_BUF];
	size_t i;

	if (c->family == AF_INET6) {
		for (i = 0; i < N_OF(metadata6); i++) {
			__be32 m[4];

			words6(m, metadata6[i].w);
			if (in_prefix6(m, c->addr6, c->prefixlen))
				return fail(ps, AT_VALUE, "%s covers the metadata address %s",
					    quote(q, text), metadata6[i].name);
		}
		return 0;
	}
	for (i = 0; i < N_OF(metadata); i++)
		if ((htonl(metadata[i].addr) & prefix_mask(c->prefixlen)) == c->addr)
			return fail(ps, AT_VALUE, "%s covers the metadata address %s",
				    quote(q, text), metadata[i].name);
	return 0;
}

/* No rule names an IPv6 form of an IPv4 address: the datapath refuses such a destination for
 * what the IPv4 address it carries refuses, and allows one only under the snapshot's declared
 * NAT64 prefix, by the IPv4 rules; so an IPv6 rule for one would allow nothing, or allow it
 * twice. The message says which IPv4 address (or CIDR) to write instead.
 */
#define EMBEDDED4_WHY                                                                          \
	" (a destination in it is judged by the IPv4 address it carries, which may refuse it " \
	"and allows it only under the snapshot's nat64 prefix)"

static int check_embedded4(struct parser *ps, const char *text, const struct rw_policy_cidr *c)
{
	char q[QUOTE_BUF], v4[32];
	struct rw_sbuf sb;
	__be32 a;
	__u8 v4len;
	int f;

	if (c->family != AF_INET6)
		return 0;
	f = embedded4_of(c->addr6);
	if (f < 0 || c->prefixlen < embedded4[f].prefixlen)
		return 0;
	a = embedded4_addr(f, c->addr6, c->prefixlen, &v4len);
	if (!v4len)
		return fail(ps, AT_VALUE,
			    "%s is the %s form (%s) of IPv4 addresses: write IPv4 rules "
			    "instead" EMBEDDED4_WHY,
			    quote(q, text), embedded4[f].label, embedded4[f].name);
	rw_sb_init(&sb, v4, sizeof(v4));
	if (v4len == 32)
		rw_sb_addr(&sb, a);
	else
		rw_sb_cidr(&sb, a, v4len);
	return fail(ps, AT_VALUE,
		    "%s is the %s form (%s) of %s: write the IPv4 %s %s" EMBEDDED4_WHY,
		    quote(q, text), embedded4[f].label, embedded4[f].name, v4,
		    v4len == 32 ? "address" : "CIDR", v4);
}

/* What every list's address or CIDR gets: metadata and the embedded forms refused. */
static int check_list_addr(struct parser *ps, const char *text, const struct rw_policy_cidr *c)
{
	int rc = check_metadata(ps, text, c);

	return rc ? rc : check_embedded4(ps, text, c);
}

static void rule_set_addr(struct rw_policy_rule *r, const struct rw_policy_cidr *c)
{
	r->family = c->family;
	r->addr = c->addr;
	memcpy(r->addr6, c->addr6, sizeof(r->addr6));
	r->prefixlen = c->prefixlen;
}

/* An IPv4 or IPv6 address as a string, into *c; one that is refused names the family it looks
 * like, and `slash` follows when it holds a '/'.
 */
static int parse_addr(struct parser *ps, json_t *v, const char *slash, struct rw_policy_cidr *c)
{
	char q[QUOTE_BUF];
	const char *s = NULL;
	int rc = parse_string(ps, v, &s);

	if (rc || parse_ip(s, c))
		return rc;
	return fail(ps, AT_VALUE, "%s is not an %s address%s", quote(q, s),
		    meant_ipv6(s) ? "IPv6" : "IPv4", strchr(s, '/') ? slash : "");
}

static int parse_rule_addr(struct parser *ps, json_t *v, bool is_cidr, struct rw_policy_rule *r)
{
	struct rw_policy_cidr c;
	int rc = is_cidr ? parse_cidr(ps, v, &c)
			 : parse_addr(ps, v, " (use \"cidr\" for a range)", &c);

	if (rc)
		return rc;
	rule_set_addr(r, &c);
	return check_list_addr(ps, json_string_value(v), &c);
}

/* What parse_array() calls for each element: parse `e` into `item` (arg: the caller's). */
typedef int (*parse_elem_fn)(struct parser *ps, json_t *e, void *item, void *arg);

/* An array of `size`-byte items, each element parsed by `elem` with its index on the path, into
 * a new array: *items and *n, both left alone when the array is empty.
 */
static int parse_array(struct parser *ps, json_t *v, size_t size, void **items, size_t *n,
		       parse_elem_fn elem, void *arg)
{
	size_t i;
	json_t *e;
	int rc;

	if (!json_is_array(v))
		return fail_type(ps, v, "an array");
	if (!json_array_size(v))
		return 0;
	*items = calloc(json_array_size(v), size);
	if (!*items)
		return fail_nomem(ps);
	*n = json_array_size(v);

	json_array_foreach(v, i, e)
	{
		push_index(ps, i);
		rc = elem(ps, e, (char *)*items + i * size, arg);
		if (rc)
			return rc;
		pop(ps);
	}
	return 0;
}

/* What parse_object() calls for each member: parse `e`, the value of `key` (arg: the caller's). */
typedef int (*parse_member_fn)(struct parser *ps, const char *key, json_t *e, void *arg);

/* An object, each member parsed by `member` with its key on the path. */
static int parse_object(struct parser *ps, json_t *v, parse_member_fn member, void *arg)
{
	const char *key;
	size_t k = 0;
	json_t *e;
	int rc;

	if (!json_is_object(v))
		return fail_type(ps, v, "an object");
	json_object_foreach(v, key, e)
	{
		push_key(ps, key, k++);
		rc = member(ps, key, e, arg);
		if (rc)
			return rc;
		pop(ps);
	}
	return 0;
}

/* What port_elem() needs: the list being filled, and the ports in it so far, by bit. */
struct port_list {
	__u16 **ports;
	uint64_t seen[65536 / 64];
};

static int port_elem(struct parser *ps, json_t *e, void *item, void *arg)
{
	struct port_list *l = arg;
	size_t i = (size_t)((__u16 *)item - *l->ports), j;
	char other[128];
	json_int_t port;

	if (!json_is_integer(e))
		return fail_type(ps, e, "a port number (an integer)");
	port = json_integer_value(e);
	if (port < 1 || port > 65535)
		return fail(ps, AT_VALUE, "%" JSON_INTEGER_FORMAT " is not a port (1..65535)",
			    port);
	if (l->seen[port / 64] & (1ULL << (port % 64))) {
		for (j = 0; j < i && (*l->ports)[j] != port; j++)
			;
		return fail(ps, AT_VALUE, "port %" JSON_INTEGER_FORMAT " is already listed at %s",
			    port, sibling_path(ps, j, other, sizeof(other)));
	}
	l->seen[port / 64] |= 1ULL << (port % 64);
	*(__u16 *)item = (__u16)port;
	return 0;
}

static int parse_ports(struct parser *ps, json_t *v, __u16 **ports, size_t *n)
{
	struct port_list l = {.ports = ports};

	if (!json_is_array(v))
		return fail_type(ps, v, "an array of ports");
	return parse_array(ps, v, sizeof(**ports), (void **)ports, n, port_elem, &l);
}

/* A string of 1..max characters that `ok` each accepts, copied into out (max + 1 bytes);
 * anything else is refused as "not <what>".
 */
static int parse_word(struct parser *ps, json_t *v, bool (*ok)(char), size_t max, const char *what,
		      char *out)
{
	char q[QUOTE_BUF];
	const char *s = NULL, *c;
	int rc;

	rc = parse_string(ps, v, &s);
	if (rc)
		return rc;
	for (c = s; ok(*c); c++)
		;
	if (!*s || *c || (size_t)(c - s) > max)
		return fail(ps, AT_VALUE, "%s is not %s", quote(q, s), what);
	strcpy(out, s);
	return 0;
}

static bool name_char(char c)
{
	return c >= 0x20 && c <= 0x7e;
}

static bool run_id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* Names show up in logs and `runwall` output: printable ASCII only, no control characters. */
static int parse_name(struct parser *ps, json_t *v, char name[64])
{
	return parse_word(ps, v, name_char, 63, "a name (1..63 printable ASCII characters)", name);
}

static int parse_run_id(struct parser *ps, json_t *v, char id[RW_RUN_ID_LEN])
{
	char what[80];

	snprintf(what, sizeof(what), "a run id (1..%d characters of A-Z a-z 0-9 . _ -)",
		 RW_RUN_ID_LEN - 1);
	return parse_word(ps, v, run_id_char, RW_RUN_ID_LEN - 1, what, id);
}

/* Why an IPv6 address cannot be a pod's, or NULL: metadata, an embedded IPv4 form (whose IPv4 is
 * what the pod would be judged as: write that one), then the one answer of every path that
 * names or binds a pod (podaddr.h: global unicast or unique local only). The phrase follows
 * "is not a pod address: ".
 */
static const char *pod6_refusal(const __be32 a[4], char *buf, size_t len)
{
	int f = embedded4_of(a);

	for (size_t i = 0; i < N_OF(metadata6); i++) {
		__be32 m[4];

		words6(m, metadata6[i].w);
		if (!memcmp(m, a, sizeof(m)))
			return "a metadata address";
	}
	if (f >= 0) {
		__u8 v4len;
		__be32 v4 = embedded4_addr(f, a, 128, &v4len);
		char t[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &v4, t, sizeof(t));
		snprintf(buf, len, "the %s form (%s) of %s (write the IPv4 address %s)",
			 embedded4[f].label, embedded4[f].name, t, t);
		return buf;
	}
	return rw_pod_addr6_refusal(a);
}

static int parse_pod(struct parser *ps, json_t *v, struct rw_policy_cidr *c)
{
	char q[QUOTE_BUF], buf[160];
	const char *why;
	size_t i;
	int rc = parse_addr(ps, v, "", c);

	if (rc)
		return rc;
	if (c->family == AF_INET6) {
		why = pod6_refusal(c->addr6, buf, sizeof(buf));
	} else {
		/* The one answer of every path that names or binds a pod (podaddr.h), metadata
		 * first.
		 */
		why = rw_pod_addr_refusal(c->addr);
		for (i = 0; i < N_OF(metadata); i++)
			if (ntohl(c->addr) == metadata[i].addr)
				why = "a metadata address";
	}
	if (why)
		return fail(ps, AT_VALUE, "%s is not a pod address: %s",
			    quote(q, json_string_value(v)), why);
	return 0;
}

/* A container's name in its pod, as Kubernetes allows it (a DNS-1123 label). */
static bool is_container_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

/* "from": {"uid": [...], "container": [...]}, each a list of 1..8 without duplicates. uid 65534
 * is refused: it is what the kernel reports for a packet with no socket behind it.
 */
static int parse_from(struct parser *ps, json_t *v, struct rw_policy_from **out)
{
	struct rw_policy_from *f;
	char q[QUOTE_BUF], other[128];
	const char *key;
	size_t k = 0, i, j;
	json_t *list, *e;

	if (!json_is_object(v))
		return fail_type(ps, v, "an object");
	f = calloc(1, sizeof(*f));
	if (!f)
		return fail_nomem(ps);
	*out = f;
	json_object_foreach(v, key, list)
	{
		bool uid = !strcmp(key, "uid");

		push_key(ps, key, k++);
		if (!uid && strcmp(key, "container"))
			return fail(ps, AT_KEY, "unknown key (expected one of: uid, container)");
		if (!json_is_array(list))
			return fail_type(ps, list, uid ? "an array of uids" : "an array of names");
		if (!json_array_size(list) ||
		    json_array_size(list) > (uid ? RW_FROM_UIDS : RW_FROM_CONTAINERS))
			return fail(ps, AT_VALUE, "lists %zu %s (1..%d)", json_array_size(list),
				    uid ? "uids" : "containers",
				    uid ? RW_FROM_UIDS : RW_FROM_CONTAINERS);
		json_array_foreach(list, i, e)
		{
			push_index(ps, i);
			if (uid) {
				json_int_t u;

				if (!json_is_integer(e))
					return fail_type(ps, e, "a uid (an integer)");
				u = json_integer_value(e);
				if (u < 0 || u >= RW_UID_NONE)
					return fail(ps, AT_VALUE,
						    "%" JSON_INTEGER_FORMAT
						    " is not a uid (0..4294967294)",
						    u);
				if (u == RW_UID_OVERFLOW)
					return fail(
						ps, AT_VALUE,
						"uid 65534 is what the kernel reports for a packet "
						"with no socket: it cannot name a principal");
				for (j = 0; j < f->n_uids && f->uids[j] != u; j++)
					;
				if (j < f->n_uids)
					return fail(ps, AT_VALUE,
						    "uid %" JSON_INTEGER_FORMAT
						    " is already listed at %s",
						    u, sibling_path(ps, j, other, sizeof(other)));
				f->uids[f->n_uids++] = u;
			} else {
				const char *name = json_string_value(e);

				if (!name)
					return fail_type(ps, e, "a container name (a string)");
				if (!is_container_name(name))
					return fail(ps, AT_VALUE,
						    "%s is not a container name (1..63 of a-z, 0-9 "
						    "and '-', starting and ending with a letter or "
						    "digit)",
						    quote(q, name));
				for (j = 0; j < f->n_containers && strcmp(f->containers[j], name);
				     j++)
					;
				if (j < f->n_containers)
					return fail(ps, AT_VALUE, "%s is already listed at %s",
						    quote(q, name),
						    sibling_path(ps, j, other, sizeof(other)));
				strcpy(f->containers[f->n_containers++], name);
			}
			pop(ps);
		}
		pop(ps);
	}
	if (!f->n_uids && !f->n_containers)
		return fail(ps, AT_VALUE, "names no principal (give \"uid\" and/or \"container\")");
	return 0;
}

/* ---- Objects -------------------------------------------------------------------------------- */

/* What a list's rules may hold: a name (services[], inbound[]), a "from" (services[],
 * runs[].allow[]: inbound rules judge packets into the pod, which carry no sender of it).
 */
struct rule_kind {
	bool named;
	bool from;
};

/* A rule being parsed, and which of its required keys were seen. */
struct rule_parse {
	const struct rule_kind *kind;
	struct rw_policy_rule *r;
	bool have_name, have_addr;
};

static int rule_member(struct parser *ps, const char *key, json_t *e, void *arg)
{
	struct rule_parse *rp = arg;
	const struct rule_kind *kind = rp->kind;
	struct rw_policy_rule *r = rp->r;

	if (kind->named && !strcmp(key, "name")) {
		rp->have_name = true;
		return parse_name(ps, e, r->name);
	} else if (!strcmp(key, "ip") || !strcmp(key, "cidr")) {
		if (rp->have_addr)
			return fail(ps, AT_KEY, "a rule has either \"ip\" or \"cidr\", not both");
		rp->have_addr = true;
		return parse_rule_addr(ps, e, !strcmp(key, "cidr"), r);
	} else if (!strcmp(key, "tcp")) {
		return parse_ports(ps, e, &r->tcp, &r->n_tcp);
	} else if (!strcmp(key, "udp")) {
		return parse_ports(ps, e, &r->udp, &r->n_udp);
	} else if (kind->from && !strcmp(key, "from")) {
		return parse_from(ps, e, &r->from);
	} else if (!strcmp(key, "from")) {
		return fail(ps, AT_KEY,
			    "an inbound rule has no \"from\": it judges packets into the pod, "
			    "which no sender inside the pod sent");
	}
	return fail(ps, AT_KEY, "unknown key (expected one of: %s)",
		    !kind->from	  ? "name, ip, cidr, tcp, udp"
		    : kind->named ? "name, ip, cidr, tcp, udp, from"
				  : "ip, cidr, tcp, udp, from");
}

/* A destination with its ports: services[] and inbound[] (named) and runs[].allow[]. */
static int parse_rule(struct parser *ps, json_t *v, const struct rule_kind *kind,
		      struct rw_policy_rule *r)
{
	struct rule_parse rp = {.kind = kind, .r = r};
	bool named = kind->named;
	int rc = parse_object(ps, v, rule_member, &rp);

	if (rc)
		return rc;
	if (named && !rp.have_name) {
		push_key(ps, "name", 0);
		return fail(ps, AT_PARENT, "required key is missing");
	}
	if (!rp.have_addr)
		return fail(ps, AT_VALUE, "needs \"ip\" or \"cidr\"");
	if (!r->n_tcp && !r->n_udp)
		return fail(ps, AT_VALUE, "allows no port (give \"tcp\" and/or \"udp\" ports)");
	return 0;
}

static int rule_elem(struct parser *ps, json_t *e, void *item, void *kind)
{
	return parse_rule(ps, e, kind, item);
}

static int parse_rules(struct parser *ps, json_t *v, struct rule_kind kind,
		       struct rw_policy_rule **rules, size_t *n)
{
	return parse_array(ps, v, sizeof(**rules), (void **)rules, n, rule_elem, &kind);
}

static int deny_elem(struct parser *ps, json_t *e, void *item, void *arg)
{
	struct rw_policy_cidr *c = item;
	int rc = parse_cidr(ps, e, c);

	return rc ? rc : check_embedded4(ps, json_string_value(e), c);
}

static int parse_deny(struct parser *ps, json_t *v, struct rw_policy *p)
{
	return parse_array(ps, v, sizeof(*p->deny), (void **)&p->deny, &p->n_deny, deny_elem, NULL);
}

/* The pods of a run, each family into its own array (pods, pods6), both in the order written;
 * pods6_at says where each IPv6 one was.
 */
static int parse_pods(struct parser *ps, json_t *v, struct rw_policy_run *run)
{
	size_t n, i;
	json_t *e;
	int rc;

	if (!json_is_array(v))
		return fail_type(ps, v, "an array");
	n = json_array_size(v);
	if (!n)
		return 0;
	run->pods = calloc(n, sizeof(*run->pods));
	run->pods6 = calloc(n, sizeof(*run->pods6));
	run->pods6_at = calloc(n, sizeof(*run->pods6_at));
	if (!run->pods || !run->pods6 || !run->pods6_at)
		return fail_nomem(ps);
	json_array_foreach(v, i, e)
	{
		struct rw_policy_cidr c;

		push_index(ps, i);
		rc = parse_pod(ps, e, &c);
		if (rc)
			return rc;
		if (c.family == AF_INET6) {
			memcpy(run->pods6[run->n_pods6], c.addr6, sizeof(c.addr6));
			run->pods6_at[run->n_pods6++] = i;
		} else {
			run->pods[run->n_pods++] = c.addr;
		}
		pop(ps);
	}
	/* A run of one family holds no array for the other. */
	if (!run->n_pods) {
		free(run->pods);
		run->pods = NULL;
	}
	if (!run->n_pods6) {
		free(run->pods6);
		free(run->pods6_at);
		run->pods6 = NULL;
		run->pods6_at = NULL;
	}
	return 0;
}

/* A run being parsed, and which of its required keys were seen. */
struct run_parse {
	struct rw_policy_run *run;
	bool have_id, have_pods;
};

static int run_member(struct parser *ps, const char *key, json_t *e, void *arg)
{
	struct run_parse *rp = arg;
	struct rw_policy_run *run = rp->run;

	if (!strcmp(key, "id")) {
		rp->have_id = true;
		return parse_run_id(ps, e, run->id);
	} else if (!strcmp(key, "pods")) {
		rp->have_pods = true;
		return parse_pods(ps, e, run);
	} else if (!strcmp(key, "egress") || !strcmp(key, "refusal")) {
		return parse_modes(ps, key, e, &run->egress, &run->refusal);
	} else if (!strcmp(key, "allow")) {
		int rc = parse_rules(ps, e, (struct rule_kind){.from = true}, &run->allow,
				     &run->n_allow);

		for (size_t a = 0; !rc && a < run->n_allow; a++)
			run->n_from += run->allow[a].from != NULL;
		return rc;
	}
	return fail(ps, AT_KEY, "unknown key (expected one of: id, pods, egress, refusal, allow)");
}

static int parse_run(struct parser *ps, json_t *v, struct rw_policy_run *run)
{
	struct run_parse rp = {.run = run};
	int rc;

	run->egress = -1;
	run->refusal = -1;
	rc = parse_object(ps, v, run_member, &rp);
	if (rc)
		return rc;
	if (!rp.have_id || !rp.have_pods) {
		push_key(ps, rp.have_id ? "pods" : "id", 0);
		return fail(ps, AT_PARENT, "required key is missing");
	}
	rw_policy_run_digest(run, run->digest);
	return 0;
}

static int run_elem(struct parser *ps, json_t *e, void *item, void *arg)
{
	return parse_run(ps, e, item);
}

static int parse_runs(struct parser *ps, json_t *v, struct rw_policy *p)
{
	return parse_array(ps, v, sizeof(*p->runs), (void **)&p->runs, &p->n_runs, run_elem, NULL);
}

/* ---- Checks across runs ---------------------------------------------------------------------
 * Duplicates are found by sorting, as snapshots can name thousands of pods. Of all duplicates
 * the one reported is the earliest repeat in the text, whatever the sort order, so that the
 * message names what the author wrote second. Ties sort in text order, so a repeat's earlier
 * twin is the entry just before it.
 */
/* A pod's address as one key for both families: an IPv4 one as its IPv4-mapped form, which no
 * IPv6 pod can have (pod6_refusal()). Sorted as bytes: network order sorts by address.
 */
struct pod_key {
	__be32 ip[4];
	size_t pos; /* where it is written in its run's "pods" */
};

static void pod_key_v4(__be32 ip[4], __be32 addr)
{
	ip[0] = 0;
	ip[1] = 0;
	ip[2] = htonl(0xffff);
	ip[3] = addr;
}

static bool pod_key_is_v4(const __be32 ip[4])
{
	return !ip[0] && !ip[1] && ip[2] == htonl(0xffff);
}

static const char *pod_key_text(const __be32 ip[4], char out[INET6_ADDRSTRLEN])
{
	if (pod_key_is_v4(ip))
		return inet_ntop(AF_INET, &ip[3], out, INET6_ADDRSTRLEN);
	return inet_ntop(AF_INET6, ip, out, INET6_ADDRSTRLEN);
}

static size_t run_n_pods(const struct rw_policy_run *r)
{
	return r->n_pods + r->n_pods6;
}

/* The pods of run r in the order they were written (pods6_at; without it, the IPv6 ones after
 * the IPv4 ones) into out, run_n_pods(r) of them.
 */
static void run_pod_keys(const struct rw_policy_run *r, struct pod_key *out)
{
	size_t i4 = 0, i6 = 0, n = run_n_pods(r);

	for (size_t pos = 0; pos < n; pos++) {
		bool ipv6 =
			i6 < r->n_pods6 && (r->pods6_at ? r->pods6_at[i6] == pos : i4 == r->n_pods);

		if (ipv6)
			memcpy(out[pos].ip, r->pods6[i6++], sizeof(out[pos].ip));
		else
			pod_key_v4(out[pos].ip, r->pods[i4++]);
		out[pos].pos = pos;
	}
}

struct pod_ref {
	struct pod_key k;
	size_t run;
};

static int pod_ref_cmp(const void *a, const void *b)
{
	const struct pod_ref *x = a, *y = b;
	int c = memcmp(x->k.ip, y->k.ip, sizeof(x->k.ip));

	if (c)
		return c;
	if (x->run != y->run)
		return x->run < y->run ? -1 : 1;
	return x->k.pos < y->k.pos ? -1 : x->k.pos > y->k.pos;
}

static void select_runs_step(struct parser *ps, json_t *root, json_t *runs, size_t run,
			     const char *key)
{
	push_key(ps, "runs", member_index(root, "runs"));
	push_index(ps, run);
	push_key(ps, key, member_index(json_array_get(runs, run), key));
}

/* A pod in two places, of either family (an IPv4 and an IPv6 address are never the same). */
static int check_pods(struct parser *ps, json_t *root, const struct rw_policy *p)
{
	struct pod_ref *refs, dup = {0}, first = {0};
	struct pod_key *keys = NULL;
	size_t n = 0, most = 0, i, j;
	bool found = false;
	char addr[INET6_ADDRSTRLEN];

	for (i = 0; i < p->n_runs; i++) {
		n += run_n_pods(&p->runs[i]);
		if (run_n_pods(&p->runs[i]) > most)
			most = run_n_pods(&p->runs[i]);
	}
	if (n < 2)
		return 0;
	refs = malloc(n * sizeof(*refs));
	keys = malloc(most * sizeof(*keys));
	if (!refs || !keys) {
		free(refs);
		free(keys);
		return fail_nomem(ps);
	}
	n = 0;
	for (i = 0; i < p->n_runs; i++) {
		run_pod_keys(&p->runs[i], keys);
		for (j = 0; j < run_n_pods(&p->runs[i]); j++)
			refs[n++] = (struct pod_ref){keys[j], i};
	}
	free(keys);
	qsort(refs, n, sizeof(*refs), pod_ref_cmp);
	for (i = 1; i < n; i++) {
		if (memcmp(refs[i].k.ip, refs[i - 1].k.ip, sizeof(refs[i].k.ip)))
			continue;
		if (!found || refs[i].run < dup.run ||
		    (refs[i].run == dup.run && refs[i].k.pos < dup.k.pos)) {
			dup = refs[i];
			first = refs[i - 1];
			found = true;
		}
	}
	free(refs);
	if (!found)
		return 0;

	select_runs_step(ps, root, json_object_get(root, "runs"), dup.run, "pods");
	push_index(ps, dup.k.pos);
	return fail(ps, AT_VALUE, "pod %s is already listed at runs[%zu].pods[%zu] (run %s)",
		    pod_key_text(dup.k.ip, addr), first.run, first.k.pos, p->runs[first.run].id);
}

struct id_ref {
	const char *id;
	size_t run;
};

static int id_ref_cmp(const void *a, const void *b)
{
	const struct id_ref *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	if (c)
		return c;
	return x->run < y->run ? -1 : x->run > y->run;
}

static int check_run_ids(struct parser *ps, json_t *root, const struct rw_policy *p)
{
	struct id_ref *refs;
	size_t i, dup = 0, first = 0;
	bool found = false;
	char q[QUOTE_BUF];

	if (p->n_runs < 2)
		return 0;
	refs = malloc(p->n_runs * sizeof(*refs));
	if (!refs)
		return fail_nomem(ps);
	for (i = 0; i < p->n_runs; i++)
		refs[i] = (struct id_ref){p->runs[i].id, i};
	qsort(refs, p->n_runs, sizeof(*refs), id_ref_cmp);
	for (i = 1; i < p->n_runs; i++) {
		if (strcmp(refs[i].id, refs[i - 1].id))
			continue;
		if (!found || refs[i].run < dup) {
			dup = refs[i].run;
			first = refs[i - 1].run;
			found = true;
		}
	}
	free(refs);
	if (!found)
		return 0;

	select_runs_step(ps, root, json_object_get(root, "runs"), dup, "id");
	return fail(ps, AT_VALUE, "run %s is already defined at runs[%zu]",
		    quote(q, p->runs[dup].id), first);
}

static bool cidrs_overlap(__be32 a, unsigned int alen, __be32 b, unsigned int blen)
{
	__be32 m = prefix_mask(alen < blen ? alen : blen);

	return (a & m) == (b & m);
}

/* check_run_rules_of() for either family: the deny list's CIDRs of the rule's family. What it
 * overlaps goes into sb; returns what that is, or NULL.
 */
static const char *run_rule_denied(struct rw_sbuf *sb, const struct rw_policy_rule *rule,
				   const struct rw_policy *p)
{
	bool v6 = rw_policy_rule_is6(rule);

	for (size_t i = 0; i < p->n_deny; i++) {
		const struct rw_policy_cidr *d = &p->deny[i];

		if ((d->family == AF_INET6) != v6 ||
		    !(v6 ? cidrs6_overlap(rule->addr6, rule->prefixlen, d->addr6, d->prefixlen)
			 : cidrs_overlap(rule->addr, rule->prefixlen, d->addr, d->prefixlen)))
			continue;
		rw_sb_cidr_of(sb, d);
		rw_sb_printf(sb, " (deny[%zu])", i);
		return "denied by the snapshot";
	}
	return NULL;
}

/* check_run_rules_of() for an IPv4 rule: the special ranges. What it overlaps goes into sb;
 * returns what that is, or NULL.
 */
static const char *run_rule4_overlap(struct rw_sbuf *sb, const struct rw_policy_rule *rule)
{
	size_t i;

	for (i = 0; i < N_OF(special); i++) {
		if (cidrs_overlap(rule->addr, rule->prefixlen, htonl(special[i].addr),
				  special[i].prefixlen)) {
			rw_sb_printf(sb, "%s", special[i].name);
			return "a private or special-purpose range";
		}
	}
	return NULL;
}

/* check_run_rules_of() for an IPv6 rule: the special ranges, the embedded-IPv4 forms (a rule
 * inside one is refused by every list; a wider one that holds one is refused here) and the
 * nat64 prefix. What it overlaps goes into sb; returns what that is, or NULL.
 */
static const char *run_rule6_overlap(struct rw_sbuf *sb, const struct rw_policy_rule *rule,
				     const struct rw_policy *p)
{
	__be32 net[4];
	size_t i;

	for (i = 0; i < N_OF(special6); i++) {
		words6(net, special6[i].w);
		if (cidrs6_overlap(rule->addr6, rule->prefixlen, net, special6[i].prefixlen)) {
			rw_sb_printf(sb, "%s", special6[i].name);
			return "a private or special-purpose range";
		}
	}
	for (i = 0; i < N_OF(embedded4); i++) {
		words6(net, embedded4[i].w);
		if (cidrs6_overlap(rule->addr6, rule->prefixlen, net, embedded4[i].prefixlen)) {
			rw_sb_printf(sb, "%s", embedded4[i].name);
			return "a range of IPv6 forms of IPv4 addresses (write IPv4 rules for "
			       "those)";
		}
	}
	if (p->nat64.family == AF_INET6 &&
	    cidrs6_overlap(rule->addr6, rule->prefixlen, p->nat64.addr6, p->nat64.prefixlen)) {
		rw_sb_cidr6(sb, p->nat64.addr6, p->nat64.prefixlen);
		return "the snapshot's nat64 prefix (write IPv4 rules for it)";
	}
	return NULL;
}

/* Run rules name public destinations only: a run's destination must be none of "private,
 * loopback, link-local, CGNAT or a cluster address" (seed 003), so a run rule that overlaps a
 * built-in special range or the snapshot's deny list is refused, naming the range. Only the
 * platform's `services` may name private addresses. The datapath checks run rules after the
 * ranges as well, so a rule that got past this would still allow nothing private.
 */
static int check_run_rules_of(struct parser *ps, json_t *obj_run, const struct rw_policy_run *run,
			      const struct rw_policy *p)
{
	char q[QUOTE_BUF], range[80];
	struct rw_sbuf sb;

	for (size_t a = 0; a < run->n_allow; a++) {
		const struct rw_policy_rule *rule = &run->allow[a];
		json_t *obj = json_array_get(json_object_get(obj_run, "allow"), a);
		const char *key = json_object_get(obj, "ip") ? "ip" : "cidr";
		const char *text = json_string_value(json_object_get(obj, key));
		const char *what;

		rw_sb_init(&sb, range, sizeof(range));
		what = rw_policy_rule_is6(rule) ? run_rule6_overlap(&sb, rule, p)
						: run_rule4_overlap(&sb, rule);
		if (!what)
			what = run_rule_denied(&sb, rule, p);
		if (!what)
			continue;
		push_elem_key(ps, obj_run, "allow", a, obj, key);
		return fail(ps, AT_VALUE,
			    "%s overlaps %s, %s: run rules name public "
			    "destinations only (only services may name private addresses)",
			    quote(q, text ? text : "?"), range, what);
	}
	return 0;
}

/* The path at runs[r], for the checks of one run. */
static void select_run(struct parser *ps, json_t *root, size_t r)
{
	push_key(ps, "runs", member_index(root, "runs"));
	push_index(ps, r);
}

static int check_run_rules(struct parser *ps, json_t *root, const struct rw_policy *p)
{
	json_t *runs = json_object_get(root, "runs");

	for (size_t r = 0; r < p->n_runs; r++) {
		int rc;

		select_run(ps, root, r);
		rc = check_run_rules_of(ps, json_array_get(runs, r), &p->runs[r], p);
		if (rc)
			return rc;
		ps->depth -= 2;
	}
	return 0;
}

/* A run's rules fit in its rule ids' sub-index; the path is at the run. */
static int check_run_rule_count(struct parser *ps, json_t *obj_run, const struct rw_policy_run *run)
{
	if (run->n_allow <= RW_RULE_MAX_B)
		return 0;
	push_key(ps, "allow", member_index(obj_run, "allow"));
	return fail(ps, AT_VALUE,
		    "%zu rules: a run has at most %u (they must fit in a "
		    "rule id)",
		    run->n_allow, RW_RULE_MAX_B);
}

/* A run change keeps the node's restricted rules within what rw_from holds: the rules that name
 * a "from" in the other runs and services, plus this run's, at most RW_MAX_FROM / RW_SLOTS (as
 * check_rule_counts() holds a whole snapshot to). `self` is the run's position in force, or -1
 * for a new run. The path is at the run; a refusal names the first rule past the limit.
 */
static int check_run_from_count(struct parser *ps, json_t *obj_run, const struct rw_policy *cur,
				const struct rw_policy_run *run, long self)
{
	size_t others = rw_policy_from_count(cur), mine = run->n_from, seen = 0,
	       limit = RW_MAX_FROM / RW_SLOTS;
	json_t *allow = json_object_get(obj_run, "allow");

	if (self >= 0)
		others -= cur->runs[self].n_from;
	if (others + mine <= limit)
		return 0;
	for (size_t a = 0; a < run->n_allow; a++) {
		if (!run->allow[a].from || others + ++seen <= limit)
			continue;
		push_key(ps, "allow", member_index(obj_run, "allow"));
		push_index(ps, a);
		push_key(ps, "from", member_index(json_array_get(allow, a), "from"));
		break;
	}
	return fail(ps, AT_VALUE,
		    "%zu rules on the node would name a \"from\" (%zu in this run, %zu elsewhere): "
		    "a node has at most %zu (rw_from holds both slots' selectors)",
		    others + mine, mine, others, limit);
}

/* Rule ids (RW_RULE_ID) hold an index and a sub-index of fixed width: a longer list is refused
 * rather than wrapped onto another rule's id.
 */
static int check_rule_counts(struct parser *ps, json_t *root, const struct rw_policy *p)
{
	static const char *const lists[] = {"services", "inbound", "runs"};
	const size_t counts[] = {p->n_services, p->n_inbound, p->n_runs};
	json_t *runs = json_object_get(root, "runs");

	for (size_t l = 0; l < 3; l++) {
		if (counts[l] <= RW_RULE_MAX_A)
			continue;
		push_key(ps, lists[l], member_index(root, lists[l]));
		return fail(ps, AT_VALUE, "%zu entries: at most %u fit in a rule id", counts[l],
			    RW_RULE_MAX_A);
	}
	if (rw_policy_from_count(p) > RW_MAX_FROM / RW_SLOTS)
		return fail(ps, AT_VALUE,
			    "%zu rules name a \"from\": a snapshot has at most %u (rw_from holds "
			    "both slots' selectors)",
			    rw_policy_from_count(p), RW_MAX_FROM / RW_SLOTS);
	for (size_t r = 0; r < p->n_runs; r++) {
		int rc;

		if (p->runs[r].n_allow <= RW_RULE_MAX_B)
			continue;
		select_run(ps, root, r);
		rc = check_run_rule_count(ps, json_array_get(runs, r), &p->runs[r]);
		if (rc)
			return rc;
		ps->depth -= 2;
	}
	return 0;
}

/* No service names an address under the snapshot's nat64 prefix (a network-specific one: the
 * embedded-form check already refuses 64:ff9b::/96): the datapath judges such a destination by
 * the IPv4 rules, so the message says which IPv4 address to write. A wider CIDR is taken, as for
 * the other forms. Run rules that overlap the prefix are refused by check_run_rules().
 */
static int check_services_nat64(struct parser *ps, json_t *root, const struct rw_policy *p)
{
	char q[QUOTE_BUF], v4[INET_ADDRSTRLEN], net[64];
	struct rw_sbuf sb;

	if (p->nat64.family != AF_INET6)
		return 0;
	for (size_t i = 0; i < p->n_services; i++) {
		const struct rw_policy_rule *r = &p->services[i];
		json_t *obj = json_array_get(json_object_get(root, "services"), i);
		const char *key = json_object_get(obj, "ip") ? "ip" : "cidr";
		__be32 a = r->addr6[3];

		if (!rw_policy_rule_is6(r) || r->prefixlen < p->nat64.prefixlen ||
		    !in_prefix6(r->addr6, p->nat64.addr6, p->nat64.prefixlen))
			continue;
		inet_ntop(AF_INET, &a, v4, sizeof(v4));
		rw_sb_init(&sb, net, sizeof(net));
		rw_sb_cidr6(&sb, p->nat64.addr6, p->nat64.prefixlen);
		push_elem_key(ps, root, "services", i, obj, key);
		return fail(ps, AT_VALUE,
			    "%s is under the snapshot's nat64 prefix %s: write the IPv4 address "
			    "%s (a destination there is judged by the IPv4 rules)",
			    quote(q, json_string_value(json_object_get(obj, key))), net, v4);
	}
	return 0;
}

/* What is checked across the parsed snapshot, in this order: the first refusal is the error. */
static int (*const snapshot_checks[])(struct parser *, json_t *, const struct rw_policy *) = {
	check_run_ids, check_rule_counts, check_run_rules, check_services_nat64, check_pods,
};

/* A snapshot being parsed, and whether its revision was seen. */
struct root_parse {
	struct rw_policy *p;
	bool have_revision;
};

static int root_member(struct parser *ps, const char *key, json_t *v, void *arg)
{
	struct root_parse *rp = arg;
	struct rw_policy *p = rp->p;

	if (!strcmp(key, "revision")) {
		rp->have_revision = true;
		return parse_revision(ps, v, &p->revision);
	} else if (!strcmp(key, "egress") || !strcmp(key, "refusal")) {
		return parse_modes(ps, key, v, &p->egress, &p->refusal);
	} else if (!strcmp(key, "lease_seconds")) {
		return parse_lease(ps, v, &p->lease_seconds);
	} else if (!strcmp(key, "nat64")) {
		return parse_nat64(ps, v, &p->nat64);
	} else if (!strcmp(key, "deny")) {
		return parse_deny(ps, v, p);
	} else if (!strcmp(key, "services")) {
		return parse_rules(ps, v, (struct rule_kind){.named = true, .from = true},
				   &p->services, &p->n_services);
	} else if (!strcmp(key, "inbound")) {
		return parse_rules(ps, v, (struct rule_kind){.named = true}, &p->inbound,
				   &p->n_inbound);
	} else if (!strcmp(key, "runs")) {
		return parse_runs(ps, v, p);
	}
	return fail(ps, AT_KEY,
		    "unknown key (expected one of: revision, egress, refusal, lease_seconds, "
		    "nat64, deny, services, inbound, runs)");
}

static int parse_root(struct parser *ps, json_t *root, struct rw_policy *p)
{
	struct root_parse rp = {.p = p};
	int rc;

	p->egress = RW_EGRESS_ALLOWLIST;
	p->refusal = RW_REFUSAL_ANSWER;
	rc = parse_object(ps, root, root_member, &rp);
	if (rc)
		return rc;
	if (!rp.have_revision) {
		push_key(ps, "revision", 0);
		return fail(ps, AT_PARENT, "required key is missing");
	}
	for (size_t i = 0; i < N_OF(snapshot_checks); i++) {
		rc = snapshot_checks[i](ps, root, p);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- Entry points --------------------------------------------------------------------------- */

size_t rw_policy_from_count(const struct rw_policy *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n_services; i++)
		n += p->services[i].from != NULL;
	for (size_t r = 0; r < p->n_runs; r++)
		n += p->runs[r].n_from;
	return n;
}

static void free_rules(struct rw_policy_rule *rules, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free(rules[i].tcp);
		free(rules[i].udp);
		free(rules[i].from);
	}
	free(rules);
}

static void free_run(struct rw_policy_run *r)
{
	free(r->pods);
	free(r->pods6);
	free(r->pods6_at);
	free_rules(r->allow, r->n_allow);
}

void rw_policy_free(struct rw_policy *p)
{
	size_t i;

	if (!p)
		return;
	free(p->deny);
	free_rules(p->services, p->n_services);
	free_rules(p->inbound, p->n_inbound);
	for (i = 0; i < p->n_runs; i++)
		free_run(&p->runs[i]);
	free(p->runs);
	memset(p, 0, sizeof(*p));
}

int rw_policy_parse(const char *buf, size_t len, const char *source, struct rw_policy *out,
		    struct rw_policy_error *err)
{
	return rw_policy_parse_newer(buf, len, source, 0, out, err);
}

/* Parse `root` into `out` as parse_root() does, for both entry points: `out` filled, or zeroed
 * with `ps->err` saying why.
 */
static int parse_doc(struct parser *ps, json_t *root, struct rw_policy *out)
{
	struct rw_policy p = {0};
	int rc = parse_root(ps, root, &p);

	if (rc)
		rw_policy_free(&p);
	else
		*out = p;
	return rc;
}

static void parser_init(struct parser *ps, const char *buf, size_t len, const char *source,
			uint64_t in_force, struct rw_policy_error *err)
{
	memset(err, 0, sizeof(*err));
	memset(ps, 0, sizeof(*ps));
	ps->buf = buf;
	ps->len = len;
	ps->source = source ? source : "<input>";
	ps->err = err;
	ps->in_force = in_force;
}

int rw_policy_parse_newer(const char *buf, size_t len, const char *source, uint64_t in_force,
			  struct rw_policy *out, struct rw_policy_error *err)
{
	struct rw_policy_error scratch;
	struct parser ps;
	json_error_t jerr;
	json_t *root;
	int rc;

	if (!err)
		err = &scratch;
	parser_init(&ps, buf, len, source, in_force, err);
	memset(out, 0, sizeof(*out));

	/* Duplicate keys are refused: which of two "egress" values wins is not a question a
	 * security policy should leave to a library. Numbers stay as typed, so 443.0 or "443"
	 * is refused as a port rather than converted.
	 */
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (json_error_code(&jerr) == json_error_out_of_memory)
			return fail_nomem(&ps);
		/* jansson's column is 0 before the first character of a line (empty input) */
		err->line = jerr.line > 0 ? jerr.line : 0;
		err->column = err->line ? (jerr.column > 0 ? jerr.column : 1) : 0;
		if (err->line)
			snprintf(err->text, sizeof(err->text), "%s:%d:%d: (document): %s",
				 ps.source, err->line, err->column, jerr.text);
		else
			snprintf(err->text, sizeof(err->text), "%s: (document): %s", ps.source,
				 jerr.text);
		/* "near '...'" repeats raw input: keep control characters out of the log line */
		for (char *c = err->text; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		return -EINVAL;
	}
	rc = parse_doc(&ps, root, out);
	json_decref(root);
	return rc;
}

int rw_policy_parse_json(json_t *root, const char *source, uint64_t in_force, struct rw_policy *out,
			 struct rw_policy_error *err)
{
	struct rw_policy_error scratch;
	struct parser ps;

	if (!err)
		err = &scratch;
	/* No text: the document came in a message, whose line and column would name nothing the
	 * author wrote, so errors carry the path only.
	 */
	parser_init(&ps, "", 0, source, in_force, err);
	memset(out, 0, sizeof(*out));
	return parse_doc(&ps, root, out);
}

static int io_error(struct rw_policy_error *err, const char *source, int errnum)
{
	char msg[128];

	snprintf(err->text, sizeof(err->text), "%s: %s%s", source,
		 strerror_r(errnum, msg, sizeof(msg)),
		 errnum == EFBIG ? " (the limit is 16 MiB)" : "");
	return -errnum;
}

int rw_policy_parse_file(const char *path, struct rw_policy *out, struct rw_policy_error *err)
{
	const char *source = strcmp(path, "-") ? path : "<stdin>";
	struct rw_policy_error scratch;
	size_t len = 0;
	char *buf = NULL;
	int rc;

	if (!err)
		err = &scratch;
	memset(err, 0, sizeof(*err));
	memset(out, 0, sizeof(*out));
	rc = rw_read_file(path, MAX_FILE_BYTES, &buf, &len);
	if (rc)
		return io_error(err, source, -rc);
	rc = rw_policy_parse(buf, len, source, out, err);
	free(buf);
	return rc;
}

/* ---- One run's change ------------------------------------------------------------------------
 * PolicyWatch's run-upsert and run-delete (docs/policy-watch.md): the next policy is the one in
 * force with one run replaced, added or removed. Only that run is parsed, by parse_run() and the
 * checks a whole snapshot's runs get, its path "run"; what a check needs of the other runs comes
 * from an index (run id and pod IP to position), so a change costs the run's size, not the
 * node's. The result is what rw_policy_parse() makes of the same snapshot written out, and so is
 * every refusal (at "run" for "runs[K]"), but one: a pod that only a run after the changed one
 * lists is reported at the changed run's pod, where the whole snapshot names the later run's.
 */

struct rw_policy_index_pod {
	__be32 ip[4]; /* pod_key: IPv4 as IPv4-mapped */
	__u32 run;    /* position + 1; 0: a free slot */
	__u32 pod;    /* its position in the run's "pods" */
};

struct rw_policy_index_run {
	uint64_t hash;
	__u32 run; /* position + 1; 0: a free slot */
};

/* Keyed (rw_hash_key()), as apply.c's: ids and pod IPs are chosen outside the node. */
static uint64_t ix_hash(const void *data, size_t len)
{
	return rw_siphash(rw_hash_key(), data, len);
}

static size_t ix_pod_slot(const struct rw_policy_index *ix, const __be32 ip[4])
{
	size_t i = ix_hash(ip, 4 * sizeof(*ip)) & ix->pod_mask;

	while (ix->pods[i].run && memcmp(ix->pods[i].ip, ip, sizeof(ix->pods[i].ip)))
		i = (i + 1) & ix->pod_mask;
	return i;
}

static size_t ix_run_slot(const struct rw_policy_index *ix, const struct rw_policy *p,
			  const char *id, uint64_t h)
{
	size_t i = h & ix->run_mask;

	while (ix->runs[i].run &&
	       (ix->runs[i].hash != h || strcmp(p->runs[ix->runs[i].run - 1].id, id)))
		i = (i + 1) & ix->run_mask;
	return i;
}

/* Linear probing's deletion: the entries after the hole that may move into it do (Knuth's
 * algorithm R), so that no lookup stops at a hole before its key.
 */
#define IX_DELETE(tab, mask, i, home_of)                                                 \
	do {                                                                             \
		size_t _j = (i);                                                         \
		for (;;) {                                                               \
			size_t _k;                                                       \
			_j = (_j + 1) & (mask);                                          \
			if (!(tab)[_j].run)                                              \
				break;                                                   \
			_k = home_of((tab)[_j]) & (mask);                                \
			if ((i) <= _j ? ((i) < _k && _k <= _j) : ((i) < _k || _k <= _j)) \
				continue;                                                \
			(tab)[i] = (tab)[_j];                                            \
			(i) = _j;                                                        \
		}                                                                        \
		(tab)[i].run = 0;                                                        \
	} while (0)

#define IX_POD_HOME(e) ix_hash((e).ip, sizeof((e).ip))
#define IX_RUN_HOME(e) ((e).hash)

static void ix_pod_delete(struct rw_policy_index *ix, const __be32 ip[4])
{
	size_t i = ix_pod_slot(ix, ip);

	if (!ix->pods[i].run)
		return;
	IX_DELETE(ix->pods, ix->pod_mask, i, IX_POD_HOME);
	ix->n_pods--;
}

static void ix_run_delete(struct rw_policy_index *ix, const struct rw_policy *p, const char *id)
{
	uint64_t h = ix_hash(id, strlen(id));
	size_t i = ix_run_slot(ix, p, id, h);

	if (!ix->runs[i].run)
		return;
	IX_DELETE(ix->runs, ix->run_mask, i, IX_RUN_HOME);
	ix->n_runs--;
}

/* A table of at least twice `n` slots (and room for some growth before the next rebuild). */
static size_t ix_size(size_t n)
{
	size_t size = 64;

	while (size < 2 * n + 64)
		size *= 2;
	return size;
}

/* Every pod of a run, of both families, as pod keys in the order written; NULL (and *n 0) for
 * a run without pods, or out of memory (*n then SIZE_MAX).
 */
static struct pod_key *run_pods_keyed(const struct rw_policy_run *run, size_t *n)
{
	struct pod_key *k;

	*n = run_n_pods(run);
	if (!*n)
		return NULL;
	k = malloc(*n * sizeof(*k));
	if (!k) {
		*n = SIZE_MAX;
		return NULL;
	}
	run_pod_keys(run, k);
	return k;
}

/* fn(ix, pod key, to) on each pod of a run; -ENOMEM when there is no memory for the keys. */
static int ix_each_run_pod(struct rw_policy_index *ix, const struct rw_policy_run *run,
			   void (*fn)(struct rw_policy_index *, const struct pod_key *, __u32),
			   __u32 to)
{
	size_t n;
	struct pod_key *k = run_pods_keyed(run, &n);

	if (n == SIZE_MAX)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		fn(ix, &k[i], to);
	free(k);
	return 0;
}

/* The pod's entry, new or not, says run position to - 1 and the pod's place in that run. */
static void ix_pod_add(struct rw_policy_index *ix, const struct pod_key *k, __u32 to)
{
	size_t s = ix_pod_slot(ix, k->ip);

	if (!ix->pods[s].run)
		ix->n_pods++;
	memcpy(ix->pods[s].ip, k->ip, sizeof(ix->pods[s].ip));
	ix->pods[s].run = to;
	ix->pods[s].pod = k->pos;
}

/* ix_pod_delete() (to 0), or the pod's entry now says run position to - 1. */
static void ix_pod_move(struct rw_policy_index *ix, const struct pod_key *k, __u32 to)
{
	if (!to)
		ix_pod_delete(ix, k->ip);
	else
		ix->pods[ix_pod_slot(ix, k->ip)].run = to;
}

static int ix_add_run_pods(struct rw_policy_index *ix, const struct rw_policy_run *run, size_t r)
{
	return ix_each_run_pod(ix, run, ix_pod_add, r + 1);
}

/* Each pod of run r: ix_pod_delete() (run 0), or its entry now says position r. */
static int ix_run_pods_do(struct rw_policy_index *ix, const struct rw_policy_run *run, __u32 to)
{
	return ix_each_run_pod(ix, run, ix_pod_move, to);
}

int rw_policy_index_build(struct rw_policy_index *ix, const struct rw_policy *p)
{
	size_t pods = 0;

	rw_policy_index_free(ix);
	for (size_t r = 0; r < p->n_runs; r++)
		pods += run_n_pods(&p->runs[r]);
	ix->pod_mask = ix_size(pods) - 1;
	ix->run_mask = ix_size(p->n_runs) - 1;
	ix->pods = calloc(ix->pod_mask + 1, sizeof(*ix->pods));
	ix->runs = calloc(ix->run_mask + 1, sizeof(*ix->runs));
	if (!ix->pods || !ix->runs) {
		rw_policy_index_free(ix);
		return -ENOMEM;
	}
	for (size_t r = 0; r < p->n_runs; r++) {
		const char *id = p->runs[r].id;
		uint64_t h = ix_hash(id, strlen(id));
		size_t s = ix_run_slot(ix, p, id, h);

		/* A parsed policy has unique ids; the first of two would win here. */
		if (!ix->runs[s].run) {
			ix->runs[s] = (struct rw_policy_index_run){h, r + 1};
			ix->n_runs++;
		}
		if (ix_add_run_pods(ix, &p->runs[r], r)) {
			rw_policy_index_free(ix);
			return -ENOMEM;
		}
	}
	return 0;
}

void rw_policy_index_free(struct rw_policy_index *ix)
{
	free(ix->pods);
	free(ix->runs);
	memset(ix, 0, sizeof(*ix));
}

long rw_policy_index_run(const struct rw_policy_index *ix, const struct rw_policy *p,
			 const char *id)
{
	size_t s;

	if (!ix->runs)
		return -1;
	s = ix_run_slot(ix, p, id, ix_hash(id, strlen(id)));
	return ix->runs[s].run ? (long)ix->runs[s].run - 1 : -1;
}

static int pod_key_cmp(const void *a, const void *b)
{
	const struct pod_key *x = a, *y = b;
	int c = memcmp(x->ip, y->ip, sizeof(x->ip));

	if (c)
		return c;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* check_pods() for run `run` at position `at` of the next policy (`self`: the position of the
 * run it replaces in `cur`, or -1): a pod it lists twice, or that another run lists. The path
 * is at the run.
 */
static int check_run_pods(struct parser *ps, json_t *obj_run, const struct rw_policy *cur,
			  const struct rw_policy_index *ix, const struct rw_policy_run *run,
			  size_t at, long self)
{
	size_t best = SIZE_MAX, first = 0, other_run = 0, other_pod = 0, n;
	char addr[INET6_ADDRSTRLEN];
	struct pod_key *keys, *sorted;
	bool in_other = false;
	int rc;

	keys = run_pods_keyed(run, &n);
	if (n == SIZE_MAX)
		return fail_nomem(ps);
	if (n > 1) {
		sorted = malloc(n * sizeof(*sorted));
		if (!sorted) {
			free(keys);
			return fail_nomem(ps);
		}
		memcpy(sorted, keys, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), pod_key_cmp);
		for (size_t i = 1; i < n; i++)
			if (!memcmp(sorted[i].ip, sorted[i - 1].ip, sizeof(sorted[i].ip)) &&
			    sorted[i].pos < best) {
				best = sorted[i].pos;
				first = sorted[i - 1].pos;
			}
		free(sorted);
	}
	/* What a whole snapshot reports: the earliest repeat in its text, here a pod listed twice
	 * or listed by a run before this one. A pod that only a run after it lists is reported
	 * here too (the whole snapshot would name the later run's pod).
	 */
	for (int later = 0; later < 2 && (!later || best == SIZE_MAX); later++) {
		for (size_t i = 0; i < n && i < best; i++) {
			const struct rw_policy_index_pod *e =
				&ix->pods[ix_pod_slot(ix, keys[i].ip)];

			if (!e->run || (long)e->run - 1 == self || (e->run - 1 > at) != later)
				continue;
			best = i;
			in_other = true;
			other_run = e->run - 1;
			other_pod = e->pod;
		}
	}
	if (best == SIZE_MAX) {
		free(keys);
		return 0;
	}
	pod_key_text(keys[best].ip, addr);
	free(keys);
	push_key(ps, "pods", member_index(obj_run, "pods"));
	push_index(ps, best);
	if (in_other)
		rc = fail(ps, AT_VALUE, "pod %s is already listed at runs[%zu].pods[%zu] (run %s)",
			  addr, other_run, other_pod, cur->runs[other_run].id);
	else
		rc = fail(ps, AT_VALUE, "pod %s is already listed at runs[%zu].pods[%zu] (run %s)",
			  addr, at, first, run->id);
	return rc;
}

/* The next policy: `cur`'s node-wide parts and runs (shared, not copied), with position `at`
 * holding `run` (NULL: removed, the runs after it move up) or `run` added at the end.
 */
static int change_build(const struct rw_policy *cur, uint64_t revision, size_t at,
			const struct rw_policy_run *run, struct rw_policy_change *c)
{
	size_t n = cur->n_runs + (c->added ? 1 : 0) - (c->removed ? 1 : 0);
	struct rw_policy_run *runs = malloc((n ? n : 1) * sizeof(*runs));

	if (!runs)
		return -ENOMEM;
	if (c->removed) {
		memcpy(runs, cur->runs, at * sizeof(*runs));
		memcpy(runs + at, cur->runs + at + 1, (cur->n_runs - at - 1) * sizeof(*runs));
	} else {
		if (cur->n_runs)
			memcpy(runs, cur->runs, cur->n_runs * sizeof(*runs));
		runs[at] = *run;
	}
	if (!c->added)
		c->old = cur->runs[at];
	c->next = *cur;
	c->next.revision = revision;
	c->next.runs = runs;
	c->next.n_runs = n;
	c->at = at;
	return 0;
}

static int change_revision(struct parser *ps, const struct rw_policy *cur, uint64_t revision)
{
	push_key(ps, "revision", 0);
	if (revision < 1 || revision > MAX_REVISION)
		return fail(ps, AT_VALUE, "%llu is not a revision (1..%llu)",
			    (unsigned long long)revision, MAX_REVISION);
	if (revision <= cur->revision)
		return fail(ps, AT_VALUE, "%llu is not newer than %llu, the one in force",
			    (unsigned long long)revision, (unsigned long long)cur->revision);
	pop(ps);
	return 0;
}

/* A change's start: its parser, *out cleared, then the index and the revision checked. */
static int change_begin(struct parser *ps, const char *source, struct rw_policy_error *err,
			struct rw_policy_change *out, const struct rw_policy_index *ix,
			const struct rw_policy *cur, uint64_t revision)
{
	/* No text: the run came in a message, as rw_policy_parse_json()'s document does. */
	parser_init(ps, "", 0, source, 0, err);
	memset(out, 0, sizeof(*out));
	if (!ix->runs || !ix->pods)
		return fail_nomem(ps);
	return change_revision(ps, cur, revision);
}

int rw_policy_change_upsert(const struct rw_policy *cur, const struct rw_policy_index *ix,
			    uint64_t revision, struct json_t *obj_run, const char *source,
			    struct rw_policy_change *out, struct rw_policy_error *err)
{
	struct rw_policy_run run = {0};
	struct parser ps;
	long self;
	size_t at;
	int rc;

	rc = change_begin(&ps, source, err, out, ix, cur, revision);
	if (rc)
		return rc;
	push_key(&ps, "run", 0);
	rc = parse_run(&ps, obj_run, &run);
	if (rc)
		goto fail;
	self = rw_policy_index_run(ix, cur, run.id);
	at = self >= 0 ? (size_t)self : cur->n_runs;
	out->added = self < 0;
	/* The checks of parse_root(), in its order, on this run alone. */
	if (out->added && cur->n_runs + 1 > RW_RULE_MAX_A) {
		ps.depth = 0;
		push_key(&ps, "runs", 0);
		rc = fail(&ps, AT_VALUE, "%zu entries: at most %u fit in a rule id",
			  cur->n_runs + 1, RW_RULE_MAX_A);
		goto fail;
	}
	rc = check_run_rule_count(&ps, obj_run, &run);
	if (!rc)
		rc = check_run_from_count(&ps, obj_run, cur, &run, self);
	if (!rc)
		rc = check_run_rules_of(&ps, obj_run, &run, cur);
	if (!rc)
		rc = check_run_pods(&ps, obj_run, cur, ix, &run, at, self);
	if (rc)
		goto fail;
	rc = change_build(cur, revision, at, &run, out);
	if (rc) {
		rc = fail_nomem(&ps);
		goto fail;
	}
	return 0;
fail:
	free_run(&run);
	memset(out, 0, sizeof(*out));
	return rc;
}

int rw_policy_change_delete(const struct rw_policy *cur, const struct rw_policy_index *ix,
			    uint64_t revision, const char *id, const char *source,
			    struct rw_policy_change *out, struct rw_policy_error *err)
{
	char q[QUOTE_BUF];
	struct parser ps;
	long at;
	int rc;

	rc = change_begin(&ps, source, err, out, ix, cur, revision);
	if (rc)
		return rc;
	at = rw_policy_index_run(ix, cur, id);
	if (at < 0) {
		push_key(&ps, "id", 0);
		return fail(&ps, AT_VALUE, "no run %s in force", quote(q, id));
	}
	out->removed = true;
	rc = change_build(cur, revision, at, NULL, out);
	if (rc) {
		memset(out, 0, sizeof(*out));
		return fail_nomem(&ps);
	}
	return 0;
}

/* `cur` becomes c->next and `ix` follows; nothing is freed: the caller frees what `cur` no
 * longer holds (the replaced runs[] array, and c->old's run when the change did not add).
 */
static void change_commit(struct rw_policy *cur, struct rw_policy_index *ix,
			  const struct rw_policy_change *c)
{
	struct rw_policy prev = *cur;
	size_t at = c->at;

	*cur = c->next;
	if (ix->runs) {
		bool lost = false;

		if (!c->added)
			lost |= ix_run_pods_do(ix, &c->old, 0) != 0;
		if (c->removed) {
			ix_run_delete(ix, &prev, c->old.id);
			/* The runs after it moved up one place. */
			for (size_t r = at; r < cur->n_runs; r++) {
				const struct rw_policy_run *run = &cur->runs[r];
				uint64_t h = ix_hash(run->id, strlen(run->id));
				size_t s = h & ix->run_mask;

				/* Its entry still says r + 1 (position + 1 in prev). */
				while (ix->runs[s].run &&
				       (ix->runs[s].hash != h || ix->runs[s].run != r + 2))
					s = (s + 1) & ix->run_mask;
				ix->runs[s].run = r + 1;
				lost |= ix_run_pods_do(ix, run, r + 1) != 0;
			}
		} else {
			if (c->added) {
				const char *id = cur->runs[at].id;
				uint64_t h = ix_hash(id, strlen(id));

				ix->runs[ix_run_slot(ix, cur, id, h)] =
					(struct rw_policy_index_run){h, at + 1};
				ix->n_runs++;
			}
			lost |= ix_add_run_pods(ix, &cur->runs[at], at) != 0;
		}
		/* Past half full: rebuilt at twice the size; out of memory on the way, rebuilt
		 * from the policy (or, without memory, dropped, and rebuilt by the next change).
		 */
		if (lost || 2 * ix->n_pods > ix->pod_mask + 1 || 2 * ix->n_runs > ix->run_mask + 1)
			rw_policy_index_build(ix, cur);
	}
}

void rw_policy_change_commit(struct rw_policy *cur, struct rw_policy_index *ix,
			     struct rw_policy_change *c)
{
	struct rw_policy_run *prev_runs = cur->runs;

	change_commit(cur, ix, c);
	if (!c->added)
		free_run(&c->old);
	free(prev_runs);
	memset(c, 0, sizeof(*c));
}

void rw_policy_batch_begin(struct rw_policy_batch *b, const struct rw_policy *cur)
{
	memset(b, 0, sizeof(*b));
	b->base = *cur;
}

/* Room for one more run in a list of `n` (grown by doubling). */
static int runs_reserve(struct rw_policy_run **list, size_t n)
{
	struct rw_policy_run *grown;

	if (n & (n - 1) || (n && n < 8))
		return 0; /* not a power of two (or under 8): the last doubling left room */
	grown = realloc(*list, (n ? 2 * n : 8) * sizeof(**list));
	if (!grown)
		return -ENOMEM;
	*list = grown;
	return 0;
}

int rw_policy_batch_commit(struct rw_policy_batch *b, struct rw_policy *cur,
			   struct rw_policy_index *ix, struct rw_policy_change *c)
{
	struct rw_policy_run *prev_runs = cur->runs;

	if (runs_reserve(&b->made, b->n_made) || runs_reserve(&b->gone, b->n_gone))
		return -ENOMEM;
	if (!c->removed)
		b->made[b->n_made++] = c->next.runs[c->at];
	if (!c->added)
		b->gone[b->n_gone++] = c->old;
	change_commit(cur, ix, c);
	/* base's array stays whole until the batch ends: it is rw_apply()'s `prev`. */
	if (prev_runs != b->base.runs)
		free(prev_runs);
	b->n++;
	memset(c, 0, sizeof(*c));
	return 0;
}

void rw_policy_batch_end(struct rw_policy_batch *b, struct rw_policy *cur,
			 struct rw_policy_index *ix, bool applied)
{
	/* A run made and then replaced in the batch is in both lists: freed from one only. */
	if (applied) {
		for (size_t i = 0; i < b->n_gone; i++)
			free_run(&b->gone[i]);
		if (cur->runs != b->base.runs)
			free(b->base.runs);
	} else {
		for (size_t i = 0; i < b->n_made; i++)
			free_run(&b->made[i]);
		if (cur->runs != b->base.runs)
			free(cur->runs);
		*cur = b->base;
		if (b->n)
			rw_policy_index_build(ix, cur);
	}
	free(b->made);
	free(b->gone);
	memset(b, 0, sizeof(*b));
}

void rw_policy_change_abort(struct rw_policy_change *c)
{
	if (!c->removed && c->next.runs)
		free_run(&c->next.runs[c->at]);
	free(c->next.runs);
	memset(c, 0, sizeof(*c));
}

struct digest {
	uint64_t a, b;
};

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static void dg_word(struct digest *d, uint64_t w)
{
	d->a = rotl64(d->a ^ (w * 0x87c37b91114253d5ULL), 31) * 0x4cf5ad432745937fULL;
	d->b = rotl64(d->b ^ (w * 0xff51afd7ed558ccdULL), 33) * 0xc4ceb9fe1a85ec53ULL + d->a;
}

static uint64_t dg_final(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 33);
}

static void dg_ports(struct digest *d, const __u16 *p, size_t n)
{
	dg_word(d, n);
	for (size_t i = 0; i < n; i++)
		dg_word(d, p[i]);
}

void rw_policy_run_digest(const struct rw_policy_run *r, uint64_t digest[2])
{
	struct digest d = {0x9e3779b97f4a7c15ULL, 0x6a09e667f3bcc909ULL};
	size_t len = strnlen(r->id, sizeof(r->id));

	dg_word(&d, len);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = 0;

		memcpy(&w, r->id + i, len - i < 8 ? len - i : 8);
		dg_word(&d, w);
	}
	dg_word(&d, (uint64_t)(int64_t)r->egress);
	dg_word(&d, (uint64_t)(int64_t)r->refusal);
	dg_word(&d, r->n_pods);
	for (size_t i = 0; i < r->n_pods; i++)
		dg_word(&d, r->pods[i]);
	dg_word(&d, r->n_pods6);
	for (size_t i = 0; i < r->n_pods6; i++) {
		dg_word(&d, (uint64_t)r->pods6[i][0] << 32 | r->pods6[i][1]);
		dg_word(&d, (uint64_t)r->pods6[i][2] << 32 | r->pods6[i][3]);
		/* where it was written: a reordered list is another run as written */
		dg_word(&d, r->pods6_at ? r->pods6_at[i] : SIZE_MAX);
	}
	dg_word(&d, r->n_allow);
	for (size_t i = 0; i < r->n_allow; i++) {
		const struct rw_policy_rule *a = &r->allow[i];

		if (rw_policy_rule_is6(a)) {
			dg_word(&d, (uint64_t)AF_INET6 << 40 | a->prefixlen);
			dg_word(&d, (uint64_t)a->addr6[0] << 32 | a->addr6[1]);
			dg_word(&d, (uint64_t)a->addr6[2] << 32 | a->addr6[3]);
		} else {
			dg_word(&d, (uint64_t)a->addr << 8 | a->prefixlen);
		}
		dg_ports(&d, a->tcp, a->n_tcp);
		dg_ports(&d, a->udp, a->n_udp);
		dg_word(&d, a->from ? a->from->n_uids << 8 | a->from->n_containers : UINT64_MAX);
		for (size_t j = 0; a->from && j < a->from->n_uids; j++)
			dg_word(&d, a->from->uids[j]);
		for (size_t j = 0; a->from && j < a->from->n_containers; j++)
			for (size_t c = 0; c < sizeof(a->from->containers[j]); c += 8) {
				uint64_t w;

				memcpy(&w, a->from->containers[j] + c, 8);
				dg_word(&d, w);
			}
	}
	digest[0] = dg_final(d.a ^ d.b);
	digest[1] = dg_final(d.b + (d.a << 1));
}
