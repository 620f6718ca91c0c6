/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* policy.h: a node's policy snapshot (docs/policy.md) as the agent holds it in memory. */
#ifndef RUNWALL_POLICY_H
#define RUNWALL_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <linux/types.h>
#include "runwall.h"

/* A destination (or an inbound peer) and the ports it is allowed on. One of two families: an
 * IPv4 address in `addr` (addr6 all zero), or an IPv6 one in `addr6` (addr zero); a rule made
 * without `family` (0) is IPv4.
 */
/* Who inside a pod may use a rule ("from", docs/principals.md): any of `uids` (when n_uids) and
 * any of `containers` (when n_containers); both given, both must hold.
 */
struct rw_policy_from {
	__u32 uids[RW_FROM_UIDS];
	size_t n_uids;
	char containers[RW_FROM_CONTAINERS][64];
	size_t n_containers;
};

struct rw_policy_rule {
	char name[64];		     /* services[] and inbound[] only; "" elsewhere */
	struct rw_policy_from *from; /* services[] and runs[].allow[]; NULL: anyone in the pod */
	__u8 family;		     /* AF_INET, AF_INET6 */
	__be32 addr;		     /* network byte order, host bits clear */
	__be32 addr6[4];	     /* network byte order, host bits clear */
	__u8 prefixlen;		     /* 32 (IPv4) or 128 (IPv6) for "ip" */
	__u16 *tcp;		     /* host byte order, 1..65535, no duplicates */
	size_t n_tcp;
	__u16 *udp;
	size_t n_udp;
};

struct rw_policy_cidr {
	__u8 family; /* AF_INET, AF_INET6 (0: AF_INET) */
	__be32 addr;
	__be32 addr6[4];
	__u8 prefixlen;
};

struct rw_policy_run {
	char id[RW_RUN_ID_LEN];
	__be32 *pods; /* the IPv4 ones of "pods" */
	size_t n_pods;
	__be32 (*pods6)[4]; /* the IPv6 ones, the same run */
	size_t n_pods6;
	/* The position of each pods6[i] in the snapshot's "pods" (ascending), for messages that
	 * name a pod where the author wrote it; NULL: after the IPv4 ones.
	 */
	__u32 *pods6_at;
	int egress;  /* enum rw_egress_mode, or -1: the node's */
	int refusal; /* enum rw_refusal_mode, or -1: the node's */
	struct rw_policy_rule *allow;
	size_t n_allow;
	size_t n_from;	    /* allow rules that name a "from", counted by the parser */
	uint64_t digest[2]; /* rw_policy_run_digest(), set by the parser */
};

struct rw_policy {
	uint64_t revision;
	int egress;	     /* enum rw_egress_mode */
	int refusal;	     /* enum rw_refusal_mode */
	__u32 lease_seconds; /* the dead-man lease (RW_LEASE_MIN..RW_LEASE_MAX), 0: none */
	/* The cluster's NAT64 prefix ("nat64", a /96; family AF_INET6), or family 0: none. */
	struct rw_policy_cidr nat64;
	struct rw_policy_cidr *deny;
	size_t n_deny;
	struct rw_policy_rule *services;
	size_t n_services;
	struct rw_policy_rule *inbound;
	size_t n_inbound;
	struct rw_policy_run *runs;
	size_t n_runs;
};

/* How many rules of p name a "from" (services and runs' allow rules): the services' walked, the
 * runs' n_from added (O(runs), not O(rules)).
 */
size_t rw_policy_from_count(const struct rw_policy *p);

/* The bounds of a snapshot's lease_seconds: at least a second (the agent renews it on every
 * message), at most a day.
 */
#define RW_LEASE_MIN 1
#define RW_LEASE_MAX 86400

/* Why a snapshot was refused: "FILE:LINE:COL: JSON.PATH: what is wrong". */
struct rw_policy_error {
	char text[512];
	int line;   /* 1-based; 0 when unknown */
	int column; /* 1-based; 0 when unknown */
};

/* Parse a snapshot. `source` names it in errors (a path, or "<stdin>"). On error returns a
 * negative errno (-EINVAL for a refused snapshot, -ENOENT/-EACCES/... for I/O), fills `err`
 * and leaves `out` zeroed; on success fills `out`, which the caller frees with
 * rw_policy_free().
 */
int rw_policy_parse(const char *buf, size_t len, const char *source, struct rw_policy *out,
		    struct rw_policy_error *err);
/* rw_policy_parse(), and a revision not above `in_force` is refused like any other error, with
 * its line and column (in_force 0: no such check).
 */
int rw_policy_parse_newer(const char *buf, size_t len, const char *source, uint64_t in_force,
			  struct rw_policy *out, struct rw_policy_error *err);
struct json_t;
/* rw_policy_parse_newer() of a document already parsed (PolicyWatch's snapshot, parsed with its
 * message, duplicate keys refused): the same checks and messages, without a line and column
 * ("SOURCE: JSON.PATH: what is wrong"). `root` is only read.
 */
int rw_policy_parse_json(struct json_t *root, const char *source, uint64_t in_force,
			 struct rw_policy *out, struct rw_policy_error *err);
int rw_policy_parse_file(const char *path, struct rw_policy *out, struct rw_policy_error *err);
void rw_policy_free(struct rw_policy *p);

/* One run's change (PolicyWatch's run-upsert and run-delete) without parsing the node again:
 * the policy in force indexed (run id and pod IP to position), the one run parsed and checked
 * as rw_policy_parse() checks a snapshot's runs, its errors at "run" ("SOURCE: run.pods[0]:
 * ..."), and the next policy made of the one in force with that run replaced, added last, or
 * removed (the runs after it move up), sharing every other array with it.
 */
struct rw_policy_index_pod;
struct rw_policy_index_run;
struct rw_policy_index {
	struct rw_policy_index_pod *pods; /* NULL: not built */
	size_t pod_mask, n_pods;
	struct rw_policy_index_run *runs;
	size_t run_mask, n_runs;
};

/* Index `p` (freeing what `ix` held): 0 or -ENOMEM, with `ix` then empty. */
int rw_policy_index_build(struct rw_policy_index *ix, const struct rw_policy *p);
void rw_policy_index_free(struct rw_policy_index *ix);
/* The position of run `id` in `p`, which `ix` indexes, or -1. */
long rw_policy_index_run(const struct rw_policy_index *ix, const struct rw_policy *p,
			 const char *id);

struct rw_policy_change {
	struct rw_policy next; /* shares all but runs[] and runs[at] with the policy in force */
	size_t at;	       /* the position of the run upserted or removed */
	bool added, removed;
	struct rw_policy_run old; /* the run replaced or removed (still the policy in force's) */
};

/* The policy in force `cur` (indexed by `ix`) at `revision` with run `obj_run` (a JSON object,
 * as in a snapshot's runs[]) in place of the run of its id, or added last. 0, or -EINVAL /
 * -ENOMEM with `err` and `out` zeroed; `cur` and `ix` are never changed.
 */
int rw_policy_change_upsert(const struct rw_policy *cur, const struct rw_policy_index *ix,
			    uint64_t revision, struct json_t *obj_run, const char *source,
			    struct rw_policy_change *out, struct rw_policy_error *err);
/* `cur` at `revision` without run `id` ("SOURCE: id: no run ... in force" when it has none). */
int rw_policy_change_delete(const struct rw_policy *cur, const struct rw_policy_index *ix,
			    uint64_t revision, const char *id, const char *source,
			    struct rw_policy_change *out, struct rw_policy_error *err);
/* The change is in force: `cur` becomes `c->next`, `ix` follows, and what `cur` no longer holds
 * is freed. Or it is not: abort frees what the change made, and `cur` stays as it was.
 */
void rw_policy_change_commit(struct rw_policy *cur, struct rw_policy_index *ix,
			     struct rw_policy_change *c);
void rw_policy_change_abort(struct rw_policy_change *c);

/* Run changes made one after another on the policy in force and applied together, in one
 * rw_apply() from `base` (the policy in force when the batch began, kept whole until the batch
 * ends) to the policy the last change made. Each change is built on `cur` as the one before
 * left it (rw_policy_change_upsert() or _delete()) and committed with rw_policy_batch_commit()
 * (-ENOMEM: not committed, abort it); rw_policy_batch_end() frees what the outcome no longer
 * holds: the runs the changes replaced when the apply succeeded (`applied`), else the runs
 * they made, `cur` back to `base` and `ix` rebuilt.
 */
struct rw_policy_batch {
	struct rw_policy base;
	struct rw_policy_run *made, *gone; /* runs parsed by the changes, runs they replaced */
	size_t n_made, n_gone, n;	   /* n: changes committed */
};
void rw_policy_batch_begin(struct rw_policy_batch *b, const struct rw_policy *cur);
int rw_policy_batch_commit(struct rw_policy_batch *b, struct rw_policy *cur,
			   struct rw_policy_index *ix, struct rw_policy_change *c);
void rw_policy_batch_end(struct rw_policy_batch *b, struct rw_policy *cur,
			 struct rw_policy_index *ix, bool applied);

/* The egress modes (enum rw_egress_mode in runwall.h) and the names snapshots, status and
 * `runwall map` give them, once.
 */
#define RW_EGRESS_MODES(X)                  \
	X(RW_EGRESS_ALLOWLIST, "allowlist") \
	X(RW_EGRESS_OPEN, "open")

/* What the built-in ranges call `addr` ("metadata", "private", "CGNAT", "link-local", ...), the
 * most specific first, or NULL for an address in none of them.
 */
const char *rw_builtin_label(__be32 addr);

/* rw_builtin_label() for an IPv6 address (network byte order): "metadata", "link-local",
 * "unique local", "NAT64", ... (the special and embedded-IPv4 ranges of runwall.h), or NULL.
 */
const char *rw_builtin_label6(const __be32 addr[4]);

/* The built-in entry behind rw_builtin_label() and rw_builtin_label6(): its text (the metadata
 * address "169.254.169.254", the range "169.254.0.0/16", "fe80::/10") with *label set to its
 * label, or NULL (and *label NULL) for an address in none of them.
 */
const char *rw_builtin_range(__be32 addr, const char **label);
const char *rw_builtin_range6(const __be32 addr[4], const char **label);

/* Whether a rule's family is IPv6. */
static inline bool rw_policy_rule_is6(const struct rw_policy_rule *r)
{
	return r->family == AF_INET6;
}

/* Whether two rules name the same addresses (family, address, prefix length). */
bool rw_policy_rule_same_addr(const struct rw_policy_rule *a, const struct rw_policy_rule *b);

/* Two "from" selectors compared as written (NULL: anyone); 0 when the same. */
int rw_policy_from_cmp(const struct rw_policy_from *a, const struct rw_policy_from *b);

/* A selector as the CLI shows it: "uid 1001 container identity-sidecar", or "anyone". */
const char *rw_policy_from_text(const struct rw_policy_from *f, char *buf, size_t len);
bool rw_policy_cidr_equal(const struct rw_policy_cidr *a, const struct rw_policy_cidr *b);

/* "allowlist", "open"; "?" for anything else. */
const char *rw_egress_name(int mode);

/* The mode a name says, or -EINVAL. */
int rw_egress_parse(const char *name);

/* The egress mode a run runs under. */
static inline int rw_policy_run_egress(const struct rw_policy *p, const struct rw_policy_run *r)
{
	return r->egress >= 0 ? r->egress : p->egress;
}

/* The refusal modes (enum rw_refusal_mode in runwall.h) and their names, once. */
#define RW_REFUSAL_MODES(X)            \
	X(RW_REFUSAL_ANSWER, "answer") \
	X(RW_REFUSAL_DROP, "drop")

/* "answer", "drop"; "?" for anything else. */
const char *rw_refusal_name(int mode);

/* The mode a name says, or -EINVAL. */
int rw_refusal_parse(const char *name);

/* What a run's refused packets get. */
static inline int rw_policy_run_refusal(const struct rw_policy *p, const struct rw_policy_run *r)
{
	return r->refusal >= 0 ? r->refusal : p->refusal;
}

/* Whether two runs have the same policy (id, pods, egress, refusal, allow rules): used to keep a run's
 * generation across snapshots that do not change it.
 */
int rw_policy_run_equal(const struct rw_policy *a, const struct rw_policy_run *ra,
			const struct rw_policy *b, const struct rw_policy_run *rb);

/* A 128-bit fingerprint of a run as written (id, pods, egress, refusal and allow rules, in order), so
 * that an apply finds the runs that did not change without reading both snapshots whole. The
 * parser sets it while the run is fresh in the cache. Not cryptographic: equal digests are
 * taken as equal runs.
 */
void rw_policy_run_digest(const struct rw_policy_run *r, uint64_t digest[2]);

/* Differences between two snapshots, for logs and `runwall apply`: one line per added, removed
 * or changed run, service, inbound rule and deny CIDR, written to buf. Returns the number of
 * differences. `old` may be NULL (everything is added).
 */
int rw_policy_diff(const struct rw_policy *old, const struct rw_policy *new, char *buf,
		   size_t buflen);

#endif /* RUNWALL_POLICY_H */
