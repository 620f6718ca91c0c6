/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* principal_refusals.h: refused events that name their sender inside the pod, counted by (run,
 * container, uid, reason) for /metrics' runwall_principal_refusals_total. A fixed number of
 * series: past RW_PRINCIPAL_SERIES_MAX, events count in one overflow series, never lost.
 */
#ifndef RUNWALL_PRINCIPAL_REFUSALS_H
#define RUNWALL_PRINCIPAL_REFUSALS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "runwall.h"

/* The series a node has at most, the overflow series besides. */
#define RW_PRINCIPAL_SERIES_MAX	   1024
#define RW_PRINCIPAL_CONTAINER_LEN 64 /* a Kubernetes container name is a DNS label (63) */

struct rw_principal_series {
	char run[RW_RUN_ID_LEN];
	char container
		[RW_PRINCIPAL_CONTAINER_LEN]; /* "unknown": no container of its cgroup known */
	__u32 uid;			      /* RW_UID_OVERFLOW with no cgroup: no socket */
	__u8 reason;			      /* enum rw_reason */
	uint64_t count;			      /* events */
};

/* The series in first-seen order, and an open-addressing index of them (twice as many slots,
 * so a lookup ends at an empty slot after a few probes): O(1) per event.
 */
struct rw_principal_refusals {
	struct rw_principal_series series[RW_PRINCIPAL_SERIES_MAX];
	size_t n;
	uint16_t slot[2 * RW_PRINCIPAL_SERIES_MAX]; /* series index + 1; 0: empty */
	uint64_t overflow;			    /* events of keys past the cap */
};

/* Count `ev` when it is a refusal that names its sender (a uid read by the datapath);
 * `container`: the name of its cgroup's container, NULL when unknown. Other events are not
 * counted. A gone container's series stays while its run does.
 */
void rw_principal_refusals_add(struct rw_principal_refusals *t, const struct rw_event *ev,
			       const char *container);

/* Keep only the series whose run `keep` accepts (and those of no run), in their order, and
 * index them again: an ended run's series leave the table and free their places under the cap.
 */
void rw_principal_refusals_keep(struct rw_principal_refusals *t,
				bool (*keep)(const char *run, void *arg), void *arg);

#endif /* RUNWALL_PRINCIPAL_REFUSALS_H */
