/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* revoke_probe.h: after an apply, make every open TCP connection whose cached verdict it
 * invalidated send a segment, so that the datapath can judge it, and reset it if it is cut
 * (bpf/revoke.h). See revoke_probe.c.
 */
#ifndef RUNWALL_REVOKE_PROBE_H
#define RUNWALL_REVOKE_PROBE_H

#include "datapath.h"

#define RW_PROBE_PER_SANDBOX 256 /* connections probed in one sandbox per apply */
#define RW_PROBE_PER_APPLY   4096

struct rw_probe_stats {
	unsigned int walked;	/* sandboxes whose tables were read */
	unsigned int sandboxes; /* sandboxes with at least one connection probed */
	unsigned int probed;	/* connections probed (two segments each) */
	unsigned int capped;	/* stale connections left unprobed over the bounds */
	unsigned int no_mac;	/* connections of a pod the node has no neighbour entry for */
	unsigned int failed;	/* segments the veth did not take */
};

/* Probes the TCP connections in the sandboxes' own conntrack tables whose verdict an apply may
 * have cut (stamp below the run's rw_run_revs entry, or below the last apply that could refuse
 * the run's flows where dp->cut_revs says). Never blocks: the sends are non-blocking, and what
 * the bounds leave out is counted. Returns 0 or a negative errno (nothing was probed).
 *
 * seen (RW_MAX_RUNS revisions, or NULL): those limits as the caller's last pass found them. Only
 * the sandboxes whose pod's run has moved since, or whose pod is in no run, are walked; so a
 * change of one run reads that run's sandboxes, not the node's. The pass then writes what it
 * found into seen, but for the runs of a sandbox it left a stale flow in (no neighbour entry,
 * over the bounds, a send that failed): those are walked again by the next pass. All zeros
 * (a new caller) walk every sandbox whose run has ever moved; NULL walks every sandbox.
 */
int rw_revoke_probe(const struct rw_datapath *dp, __u64 *seen, struct rw_probe_stats *st);

#endif /* RUNWALL_REVOKE_PROBE_H */
