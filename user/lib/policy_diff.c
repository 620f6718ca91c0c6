// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* policy_diff.c: two policies compared: whether two runs are the same (rw_policy_run_equal(),
 * which keeps a run's generation across snapshots), and the diff an apply logs
 * (rw_policy_diff()); and the names of the egress and refusal modes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "sbuf.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Comparison ---------------------------------------------------------------------------
 * Order never matters: a snapshot generator that lists the same pods, ports or rules in another
 * order has not changed the policy, and must not make a run lose its generation. Sets rely on
 * the parser's guarantee that ports and pods have no duplicates.
 */
static bool ports_equal(const __u16 *a, size_t na, const __u16 *b, size_t nb)
{
	uint64_t seen[65536 / 64];
	size_t i, j;

	if (na != nb)
		return false;
	if (!na || !memcmp(a, b, na * sizeof(*a)))
		return true;
	if (na <= 64) {
		for (i = 0; i < na; i++) {
			for (j = 0; j < nb && b[j] != a[i]; j++)
				;
			if (j == nb)
				return false;
		}
		return true;
	}
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < na; i++)
		seen[a[i] / 64] |= 1ULL << (a[i] % 64);
	for (i = 0; i < nb; i++)
		if (!(seen[b[i] / 64] & (1ULL << (b[i] % 64))))
			return false;
	return true;
}

static int be32_cmp(const void *a, const void *b)
{
	__be32 x = *(const __be32 *)a, y = *(const __be32 *)b;

	return x < y ? -1 : x > y;
}

static int addr6_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 4 * sizeof(__be32));
}

/* The same pods in any order, of one family (addresses of `size` bytes, ordered by `cmp`):
 * sorted copies compared, O(n log n) (a pairwise search of a reordered list of thousands is
 * seconds of the agent's loop). Pairwise only when there is no memory for the copies.
 */
static bool addr_lists_equal(const void *a, size_t na, const void *b, size_t nb, size_t size,
			     int (*cmp)(const void *, const void *))
{
	size_t i, j;
	char *sa;
	bool eq;

	if (na != nb)
		return false;
	if (!na || !memcmp(a, b, na * size))
		return true;
	sa = malloc(2 * na * size);
	if (sa) {
		char *sb = sa + na * size;

		memcpy(sa, a, na * size);
		memcpy(sb, b, nb * size);
		qsort(sa, na, size, cmp);
		qsort(sb, nb, size, cmp);
		eq = !memcmp(sa, sb, na * size);
		free(sa);
		return eq;
	}
	for (i = 0; i < na; i++) {
		for (j = 0;
		     j < nb && memcmp((const char *)b + j * size, (const char *)a + i * size, size);
		     j++)
			;
		if (j == nb)
			return false;
	}
	return true;
}

/* A run's pods of both families, each in any order. */
static bool pods_equal(const struct rw_policy_run *x, const struct rw_policy_run *y)
{
	return addr_lists_equal(x->pods, x->n_pods, y->pods, y->n_pods, sizeof(*x->pods),
				be32_cmp) &&
	       addr_lists_equal(x->pods6, x->n_pods6, y->pods6, y->n_pods6, sizeof(*x->pods6),
				addr6_cmp);
}

/* Two "from" selectors as written (the parser zeroes what a list does not use): a reordered
 * list counts as a change, which re-judges the rule's flows and allows nothing more.
 */
int rw_policy_from_cmp(const struct rw_policy_from *a, const struct rw_policy_from *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return memcmp(a, b, sizeof(*a));
}

static bool rule_equal(const struct rw_policy_rule *a, const struct rw_policy_rule *b)
{
	return rw_policy_rule_same_addr(a, b) && ports_equal(a->tcp, a->n_tcp, b->tcp, b->n_tcp) &&
	       ports_equal(a->udp, a->n_udp, b->udp, b->n_udp) &&
	       !rw_policy_from_cmp(a->from, b->from);
}

/* Every rule of one list is in the other: a rule listed twice allows nothing more. Pairwise:
 * only when there is no memory for rules_same_set()'s sorted copies.
 */
static bool rules_subset(const struct rw_policy_rule *a, size_t na, const struct rw_policy_rule *b,
			 size_t nb)
{
	size_t i, j;

	for (i = 0; i < na; i++) {
		for (j = 0; j < nb && !rule_equal(&a[i], &b[j]); j++)
			;
		if (j == nb)
			return false;
	}
	return true;
}

/* A rule in canonical form: its port lists sorted (the parser guarantees no duplicates). */
struct rule_canon {
	__u8 ipv6;
	__be32 addr;
	__be32 addr6[4];
	__u8 prefixlen;
	const __u16 *tcp, *udp;
	size_t n_tcp, n_udp;
	const struct rw_policy_from *from;
};

static int u16_cmp(const void *a, const void *b)
{
	return (int)*(const __u16 *)a - (int)*(const __u16 *)b;
}

/* The n ports, sorted, copied into p at *at (which moves past them). */
static __u16 *ports_sorted(__u16 *p, size_t *at, const __u16 *ports, size_t n)
{
	__u16 *out = p + *at;

	if (n)
		memcpy(out, ports, n * sizeof(*p));
	qsort(out, n, sizeof(*p), u16_cmp);
	*at += n;
	return out;
}

static int ports_cmp(const __u16 *a, size_t na, const __u16 *b, size_t nb)
{
	if (na != nb)
		return na < nb ? -1 : 1;
	return na ? memcmp(a, b, na * sizeof(*a)) : 0;
}

static int canon_cmp(const void *pa, const void *pb)
{
	const struct rule_canon *a = pa, *b = pb;
	int c;

	if (a->ipv6 != b->ipv6)
		return a->ipv6 < b->ipv6 ? -1 : 1;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	c = memcmp(a->addr6, b->addr6, sizeof(a->addr6));
	if (c)
		return c;
	if (a->prefixlen != b->prefixlen)
		return a->prefixlen < b->prefixlen ? -1 : 1;
	c = ports_cmp(a->tcp, a->n_tcp, b->tcp, b->n_tcp);
	if (!c)
		c = ports_cmp(a->udp, a->n_udp, b->udp, b->n_udp);
	return c ? c : rw_policy_from_cmp(a->from, b->from);
}

/* The rules sorted and without repeats, their ports in *buf (freed by the caller); NULL when
 * out of memory.
 */
static struct rule_canon *rules_canon(const struct rw_policy_rule *r, size_t n, size_t *out_n,
				      __u16 **buf)
{
	struct rule_canon *c;
	size_t ports = 0, at = 0, k = 0;
	__u16 *p;

	for (size_t i = 0; i < n; i++)
		ports += r[i].n_tcp + r[i].n_udp;
	c = malloc((n ? n : 1) * sizeof(*c));
	p = malloc((ports ? ports : 1) * sizeof(*p));
	if (!c || !p) {
		free(c);
		free(p);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		c[i] = (struct rule_canon){.ipv6 = rw_policy_rule_is6(&r[i]),
					   .addr = r[i].addr,
					   .prefixlen = r[i].prefixlen,
					   .from = r[i].from};
		memcpy(c[i].addr6, r[i].addr6, sizeof(c[i].addr6));
		c[i].tcp = ports_sorted(p, &at, r[i].tcp, r[i].n_tcp);
		c[i].n_tcp = r[i].n_tcp;
		c[i].udp = ports_sorted(p, &at, r[i].udp, r[i].n_udp);
		c[i].n_udp = r[i].n_udp;
	}
	qsort(c, n, sizeof(*c), canon_cmp);
	for (size_t i = 0; i < n; i++)
		if (!k || canon_cmp(&c[k - 1], &c[i]))
			c[k++] = c[i];
	*out_n = k;
	*buf = p;
	return c;
}

/* The same set of rules, whatever their order and repeats (a rule listed twice allows nothing
 * more): both lists sorted into canonical form and compared, O(n log n). The pairwise search it
 * replaces took seconds of the agent's loop for a reordered run of 65 536 rules.
 */
static bool rules_same_set(const struct rw_policy_rule *a, size_t na,
			   const struct rw_policy_rule *b, size_t nb)
{
	struct rule_canon *ca = NULL, *cb = NULL;
	__u16 *pa = NULL, *pb = NULL;
	size_t ka = 0, kb = 0, i;
	bool eq;

	if (na == nb) {
		for (i = 0; i < na; i++)
			if (!rw_policy_rule_same_addr(&a[i], &b[i]) ||
			    ports_cmp(a[i].tcp, a[i].n_tcp, b[i].tcp, b[i].n_tcp) ||
			    ports_cmp(a[i].udp, a[i].n_udp, b[i].udp, b[i].n_udp) ||
			    rw_policy_from_cmp(a[i].from, b[i].from))
				break;
		if (i == na)
			return true; /* the same rules written the same way: the usual case */
	}
	ca = rules_canon(a, na, &ka, &pa);
	cb = ca ? rules_canon(b, nb, &kb, &pb) : NULL;
	if (!cb) {
		free(ca);
		free(pa);
		return rules_subset(a, na, b, nb) && rules_subset(b, nb, a, na);
	}
	eq = ka == kb;
	for (i = 0; eq && i < ka; i++)
		eq = !canon_cmp(&ca[i], &cb[i]);
	free(ca);
	free(pa);
	free(cb);
	free(pb);
	return eq;
}

int rw_policy_run_equal(const struct rw_policy *a, const struct rw_policy_run *ra,
			const struct rw_policy *b, const struct rw_policy_run *rb)
{
	return !strcmp(ra->id, rb->id) &&
	       rw_policy_run_egress(a, ra) == rw_policy_run_egress(b, rb) &&
	       rw_policy_run_refusal(a, ra) == rw_policy_run_refusal(b, rb) && pods_equal(ra, rb) &&
	       rules_same_set(ra->allow, ra->n_allow, rb->allow, rb->n_allow);
}

/* ---- Diff ------------------------------------------------------------------------------------ */

/* The modes of a policy by name (RW_EGRESS_MODES, RW_REFUSAL_MODES). */
struct mode_name {
	int mode;
	const char *name;
};

#define MODE_NAME(m, n) {(m), (n)},
static const struct mode_name egress_modes[] = {RW_EGRESS_MODES(MODE_NAME)};
static const struct mode_name refusal_modes[] = {RW_REFUSAL_MODES(MODE_NAME)};
#undef MODE_NAME

static const char *mode_name(const struct mode_name *t, size_t n, int mode)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].mode == mode)
			return t[i].name;
	return "?";
}

static int mode_parse(const struct mode_name *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(t[i].name, name))
			return t[i].mode;
	return -EINVAL;
}

const char *rw_egress_name(int mode)
{
	return mode_name(egress_modes, N_OF(egress_modes), mode);
}

int rw_egress_parse(const char *name)
{
	return mode_parse(egress_modes, N_OF(egress_modes), name);
}

const char *rw_refusal_name(int mode)
{
	return mode_name(refusal_modes, N_OF(refusal_modes), mode);
}

int rw_refusal_parse(const char *name)
{
	return mode_parse(refusal_modes, N_OF(refusal_modes), name);
}

static void sb_rule_addr(struct rw_sbuf *sb, const struct rw_policy_rule *r)
{
	if (rw_policy_rule_is6(r)) {
		if (r->prefixlen == 128)
			rw_sb_addr6(sb, r->addr6);
		else
			rw_sb_cidr6(sb, r->addr6, r->prefixlen);
	} else if (r->prefixlen == 32)
		rw_sb_addr(sb, r->addr);
	else
		rw_sb_cidr(sb, r->addr, r->prefixlen);
}

static void sb_ports(struct rw_sbuf *sb, const __u16 *ports, size_t n)
{
	size_t i;

	if (!n)
		rw_sb_printf(sb, "none");
	for (i = 0; i < n; i++)
		rw_sb_printf(sb, "%s%u", i ? "," : "", ports[i]);
}

/* "tcp 80 -> 80,443" (after *sep) when a rule's ports of that protocol changed. */
static void sb_ports_change(struct rw_sbuf *sb, const char **sep, const char *proto, const __u16 *o,
			    size_t no, const __u16 *n, size_t nn)
{
	if (ports_equal(o, no, n, nn))
		return;
	rw_sb_printf(sb, "%s%s ", *sep, proto);
	sb_ports(sb, o, no);
	rw_sb_printf(sb, " -> ");
	sb_ports(sb, n, nn);
	*sep = "; ";
}

/* "uid 1001 container identity-sidecar", "anyone" for NULL: a selector as the CLI shows it. */
static void sb_from(struct rw_sbuf *sb, const struct rw_policy_from *f)
{
	const char *sep = "";

	if (!f) {
		rw_sb_printf(sb, "anyone");
		return;
	}
	if (f->n_uids) {
		rw_sb_printf(sb, "uid ");
		for (size_t i = 0; i < f->n_uids; i++)
			rw_sb_printf(sb, "%s%u", i ? "," : "", f->uids[i]);
		sep = " ";
	}
	if (f->n_containers) {
		rw_sb_printf(sb, "%scontainer ", sep);
		for (size_t i = 0; i < f->n_containers; i++)
			rw_sb_printf(sb, "%s%s", i ? "," : "", f->containers[i]);
	}
}

const char *rw_policy_from_text(const struct rw_policy_from *f, char *buf, size_t len)
{
	struct rw_sbuf sb;

	rw_sb_init(&sb, buf, len);
	sb_from(&sb, f);
	return buf;
}

static void sb_rule_summary(struct rw_sbuf *sb, const struct rw_policy_rule *r)
{
	sb_rule_addr(sb, r);
	if (r->n_tcp) {
		rw_sb_printf(sb, " tcp ");
		sb_ports(sb, r->tcp, r->n_tcp);
	}
	if (r->n_udp) {
		rw_sb_printf(sb, " udp ");
		sb_ports(sb, r->udp, r->n_udp);
	}
	if (r->from) {
		rw_sb_printf(sb, " from ");
		sb_from(sb, r->from);
	}
}

static const char *plural(size_t n)
{
	return n == 1 ? "" : "s";
}

/* Entries with the same name are paired in order of appearance: names need not be unique. */
static const struct rw_policy_rule *find_named(const struct rw_policy_rule *in, size_t n_in,
					       const struct rw_policy_rule *from, size_t n_from,
					       size_t idx)
{
	size_t nth = 0, i;

	for (i = 0; i < idx; i++)
		nth += !strcmp(from[i].name, from[idx].name);
	for (i = 0; i < n_in; i++)
		if (!strcmp(in[i].name, from[idx].name) && !nth--)
			return &in[i];
	return NULL;
}

static int diff_rules(struct rw_sbuf *sb, const char *kind, const struct rw_policy_rule *old,
		      size_t n_old, const struct rw_policy_rule *new, size_t n_new)
{
	const struct rw_policy_rule *o, *n;
	const char *sep;
	int count = 0;
	size_t i;

	for (i = 0; i < n_old; i++) {
		o = &old[i];
		n = find_named(new, n_new, old, n_old, i);
		if (!n) {
			rw_sb_printf(sb, "- %s %s\n", kind, o->name);
			count++;
			continue;
		}
		if (rule_equal(o, n))
			continue;
		rw_sb_printf(sb, "~ %s %s:", kind, o->name);
		sep = " ";
		if (!rw_policy_rule_same_addr(o, n)) {
			rw_sb_printf(sb, "%s", sep);
			sb_rule_addr(sb, o);
			rw_sb_printf(sb, " -> ");
			sb_rule_addr(sb, n);
			sep = "; ";
		}
		sb_ports_change(sb, &sep, "tcp", o->tcp, o->n_tcp, n->tcp, n->n_tcp);
		sb_ports_change(sb, &sep, "udp", o->udp, o->n_udp, n->udp, n->n_udp);
		if (rw_policy_from_cmp(o->from, n->from)) {
			rw_sb_printf(sb, "%sfrom ", sep);
			sb_from(sb, o->from);
			rw_sb_printf(sb, " -> ");
			sb_from(sb, n->from);
		}
		rw_sb_printf(sb, "\n");
		count++;
	}
	for (i = 0; i < n_new; i++) {
		if (find_named(old, n_old, new, n_new, i))
			continue;
		rw_sb_printf(sb, "+ %s %s (", kind, new[i].name);
		sb_rule_summary(sb, &new[i]);
		rw_sb_printf(sb, ")\n");
		count++;
	}
	return count;
}

static bool has_cidr(const struct rw_policy_cidr *set, size_t n, const struct rw_policy_cidr *c)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (rw_policy_cidr_equal(&set[i], c))
			return true;
	return false;
}

/* A line "SIGN deny CIDR" for each deny entry of a that b has not: how many. */
static int sb_deny_missing(struct rw_sbuf *sb, char sign, const struct rw_policy *a,
			   const struct rw_policy *b)
{
	int count = 0;

	for (size_t i = 0; i < a->n_deny; i++) {
		if (has_cidr(b->deny, b->n_deny, &a->deny[i]))
			continue;
		rw_sb_printf(sb, "%c deny ", sign);
		rw_sb_cidr_of(sb, &a->deny[i]);
		rw_sb_printf(sb, "\n");
		count++;
	}
	return count;
}

static int diff_deny(struct rw_sbuf *sb, const struct rw_policy *old, const struct rw_policy *new)
{
	int removed = sb_deny_missing(sb, '-', old, new);

	return removed + sb_deny_missing(sb, '+', new, old);
}

static const struct rw_policy_run *find_run(const struct rw_policy *p, const char *id)
{
	size_t i;

	for (i = 0; i < p->n_runs; i++)
		if (!strcmp(p->runs[i].id, id))
			return &p->runs[i];
	return NULL;
}

/* The pods of `a` that `b` lacks, "+" or "-" each; a few only, a run may have many. */
/* Whether a missing pod is shown: the first 8 are, after `sign`; the others are counted in
 * *more.
 */
static bool pod_room(struct rw_sbuf *sb, char sign, size_t *shown, size_t *more)
{
	if (*shown >= 8) {
		(*more)++;
		return false;
	}
	rw_sb_printf(sb, " %c", sign);
	(*shown)++;
	return true;
}

static void sb_pods_missing(struct rw_sbuf *sb, char sign, const struct rw_policy_run *a,
			    const struct rw_policy_run *b, size_t *shown)
{
	size_t i, j, more = 0;

	for (i = 0; i < a->n_pods; i++) {
		for (j = 0; j < b->n_pods && b->pods[j] != a->pods[i]; j++)
			;
		if (j == b->n_pods && pod_room(sb, sign, shown, &more))
			rw_sb_addr(sb, a->pods[i]);
	}
	for (i = 0; i < a->n_pods6; i++) {
		for (j = 0; j < b->n_pods6 && memcmp(b->pods6[j], a->pods6[i], sizeof(a->pods6[i]));
		     j++)
			;
		if (j == b->n_pods6 && pod_room(sb, sign, shown, &more))
			rw_sb_addr6(sb, a->pods6[i]);
	}
	if (more)
		rw_sb_printf(sb, " (%c%zu more)", sign, more);
}

/* "WHAT OLD -> NEW" (after *sep) when a run's mode changed. */
static void sb_mode_change(struct rw_sbuf *sb, const char **sep, const char *what, int o, int n,
			   const char *(*name)(int))
{
	if (o == n)
		return;
	rw_sb_printf(sb, "%s%s %s -> %s", *sep, what, name(o), name(n));
	*sep = "; ";
}

static int diff_runs(struct rw_sbuf *sb, const struct rw_policy *old, const struct rw_policy *new)
{
	const struct rw_policy_run *o, *n;
	int count = 0;
	const char *sep;
	size_t i, shown;

	for (i = 0; i < old->n_runs; i++) {
		o = &old->runs[i];
		n = find_run(new, o->id);
		if (!n) {
			rw_sb_printf(sb, "- run %s\n", o->id);
			count++;
			continue;
		}
		if (rw_policy_run_equal(old, o, new, n))
			continue;
		rw_sb_printf(sb, "~ run %s:", o->id);
		sep = " ";
		sb_mode_change(sb, &sep, "egress", rw_policy_run_egress(old, o),
			       rw_policy_run_egress(new, n), rw_egress_name);
		sb_mode_change(sb, &sep, "refusal", rw_policy_run_refusal(old, o),
			       rw_policy_run_refusal(new, n), rw_refusal_name);
		if (!pods_equal(o, n)) {
			rw_sb_printf(sb, "%spods", sep);
			shown = 0;
			sb_pods_missing(sb, '+', n, o, &shown);
			sb_pods_missing(sb, '-', o, n, &shown);
			sep = "; ";
		}
		if (!rules_same_set(o->allow, o->n_allow, n->allow, n->n_allow))
			rw_sb_printf(sb, "%sallow rules changed (%zu -> %zu)", sep, o->n_allow,
				     n->n_allow);
		rw_sb_printf(sb, "\n");
		count++;
	}
	for (i = 0; i < new->n_runs; i++) {
		n = &new->runs[i];
		if (find_run(old, n->id))
			continue;
		rw_sb_printf(sb, "+ run %s (%zu pod%s", n->id, n->n_pods + n->n_pods6,
			     plural(n->n_pods + n->n_pods6));
		if (n->egress >= 0)
			rw_sb_printf(sb, ", egress %s", rw_egress_name(n->egress));
		if (n->refusal >= 0)
			rw_sb_printf(sb, ", refusal %s", rw_refusal_name(n->refusal));
		if (n->n_allow)
			rw_sb_printf(sb, ", %zu allow rule%s", n->n_allow, plural(n->n_allow));
		rw_sb_printf(sb, ")\n");
		count++;
	}
	return count;
}

/* A snapshot's nat64 prefix, or "none". */
static void nat64_text(struct rw_sbuf *sb, const struct rw_policy_cidr *c)
{
	if (c->family == AF_INET6)
		rw_sb_cidr6(sb, c->addr6, c->prefixlen);
	else
		rw_sb_printf(sb, "none");
}

int rw_policy_diff(const struct rw_policy *old, const struct rw_policy *new, char *buf,
		   size_t buflen)
{
	static const struct rw_policy empty = {.egress = RW_EGRESS_ALLOWLIST};
	struct rw_sbuf sb;
	int count = 0;

	if (!old)
		old = &empty;
	if (!new)
		new = &empty;
	rw_sb_init(&sb, buf, buflen);
	if (old != &empty && new != &empty && old->egress != new->egress) {
		rw_sb_printf(&sb, "~ egress %s -> %s\n", rw_egress_name(old->egress),
			     rw_egress_name(new->egress));
		count++;
	}
	if (old != &empty && new != &empty && old->refusal != new->refusal) {
		rw_sb_printf(&sb, "~ refusal %s -> %s\n", rw_refusal_name(old->refusal),
			     rw_refusal_name(new->refusal));
		count++;
	}
	if (old != &empty && new != &empty && old->lease_seconds != new->lease_seconds) {
		rw_sb_printf(&sb, "~ lease_seconds %u -> %u\n", old->lease_seconds,
			     new->lease_seconds);
		count++;
	}
	if (old != &empty && new != &empty && !rw_policy_cidr_equal(&old->nat64, &new->nat64)) {
		rw_sb_printf(&sb, "~ nat64 ");
		nat64_text(&sb, &old->nat64);
		rw_sb_printf(&sb, " -> ");
		nat64_text(&sb, &new->nat64);
		rw_sb_printf(&sb, "\n");
		count++;
	}
	count += diff_deny(&sb, old, new);
	count += diff_rules(&sb, "service", old->services, old->n_services, new->services,
			    new->n_services);
	count += diff_rules(&sb, "inbound", old->inbound, old->n_inbound, new->inbound,
			    new->n_inbound);
	count += diff_runs(&sb, old, new);
	return count;
}
