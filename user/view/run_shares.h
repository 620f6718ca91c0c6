/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* run_shares.h: per-run shares of a bounded table (the view's events and aggregates, the
 * access requests' queue and dedup records), so that one run filling it displaces its own
 * entries and not other runs'. The table keeps its entries; each embeds a struct
 * rw_share_link, which this module keeps on its run's list, oldest first, and counts.
 *
 * When the table is full and a run adds an entry, rw_shares_victim() names the entry to make
 * room with: the run's own oldest when it holds its fair share or more (the capacity over the
 * runs holding entries, never under a floor), else the oldest of the run holding the most.
 * Finding a run is a hash lookup (keyed: run ids are not the sandbox's choice, but cheap to
 * keep so), the run holding the most is the top of a max-heap: O(1) and O(log runs).
 * Plain data structure: no locking, no allocation after rw_shares_init().
 */
#ifndef RUNWALL_RUN_SHARES_H
#define RUNWALL_RUN_SHARES_H
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "runwall.h"
#include "util.h"

/* Runs a table tells apart; entries of any further run are held by the run "" (with those of
 * no known run), so that a table never allocates on its hot path.
 */
#define RW_SHARE_RUNS_MAX 4096
#define RW_SHARE_FLOOR	  8 /* entries a run's share never falls under (nor the capacity) */

/* Why an entry was displaced. */
enum rw_share_cause {
	RW_SHARE_OWN,  /* its run was at or over its share: its own oldest went */
	RW_SHARE_FAIR, /* a run under its share took the slot from the run holding the most */
	RW_SHARE__CAUSES,
};

/* A list kept newest first in O(1): head has members newest and oldest, each entry e members
 * newer and older (NULL at the ends). A run's entries here, and the aggregates by last update
 * (event_store.c), are such lists. RW_LRU_PUSH makes e the newest; RW_LRU_UNLINK takes it out.
 */
#define RW_LRU_PUSH(head, e)                         \
	do {                                         \
		(e)->newer = NULL;                   \
		(e)->older = (head)->newest;         \
		if ((head)->newest)                  \
			(head)->newest->newer = (e); \
		(head)->newest = (e);                \
		if (!(head)->oldest)                 \
			(head)->oldest = (e);        \
	} while (0)
#define RW_LRU_UNLINK(head, e)                          \
	do {                                            \
		if ((e)->newer)                         \
			(e)->newer->older = (e)->older; \
		else                                    \
			(head)->newest = (e)->older;    \
		if ((e)->older)                         \
			(e)->older->newer = (e)->newer; \
		else                                    \
			(head)->oldest = (e)->newer;    \
		(e)->newer = (e)->older = NULL;         \
	} while (0)

struct rw_share_run;

struct rw_share_link {
	struct rw_share_link *newer, *older; /* within its run */
	struct rw_share_run *run;
};

struct rw_share_run {
	char id[RW_RUN_ID_LEN]; /* NUL-padded: hashed and compared as bytes */
	size_t count;
	struct rw_share_link *oldest, *newest;
	size_t heap_pos;
	struct rw_share_run *hnext;
};

struct rw_shares {
	size_t cap, floor;
	struct rw_share_run *pool, *free_runs;
	struct rw_share_run *catch_all; /* the run "", always there */
	struct rw_share_run **buckets;
	size_t n_buckets;
	struct rw_share_run **heap; /* by count, most first */
	size_t n_runs;		    /* runs holding entries (the catch-all when it holds any) */
	struct rw_hash_key hash_key;
	struct rw_share_run *last; /* the run looked up last (a cache) */
};

/* cap: the table's capacity; floor: a run's share at the least (clamped to cap). */
int rw_shares_init(struct rw_shares *s, size_t cap, size_t floor, const struct rw_hash_key *key);
void rw_shares_free(struct rw_shares *s);
/* Account a new entry to run (a run id, or "" / NULL) as its newest. */
void rw_shares_add(struct rw_shares *s, struct rw_share_link *l, const char *run);
/* The entry leaves the table. */
void rw_shares_del(struct rw_shares *s, struct rw_share_link *l);
/* The entry was used again: it becomes its run's newest. */
void rw_shares_touch(struct rw_shares *s, struct rw_share_link *l);
/* Entries run holds, and its fair share now (counting run among the holders). */
size_t rw_shares_count(const struct rw_shares *s, const char *run);
size_t rw_shares_fair(const struct rw_shares *s, const char *run);
/* The run holding the most (NULL when the table is empty). */
struct rw_share_run *rw_shares_heaviest(const struct rw_shares *s);
/* The table is full and run adds an entry: the one to displace and why (NULL when the table
 * holds nothing). Does not remove it: the caller does, with rw_shares_del().
 */
struct rw_share_link *rw_shares_victim(const struct rw_shares *s, const char *run,
				       enum rw_share_cause *cause);

#endif /* RUNWALL_RUN_SHARES_H */
