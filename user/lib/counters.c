// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* counters.c: the per-CPU counters of a veth index (or the node's, index 0), summed and zeroed. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "datapath.h"
#include "util.h"

/* One struct rw_counters per possible CPU, zeroed: a per-CPU map's value is read and written
 * for all of them at once. *ncpu is their number. NULL with errno set when the CPUs cannot be
 * counted or there is no memory.
 */
static struct rw_counters *per_cpu_alloc(int *ncpu)
{
	struct rw_counters *per;

	*ncpu = libbpf_num_possible_cpus();
	if (*ncpu < 0) {
		errno = -*ncpu;
		return NULL;
	}
	per = calloc(*ncpu, sizeof(*per));
	if (!per)
		errno = ENOMEM;
	return per;
}

int rw_counters_read(const struct rw_datapath *dp, __u32 idx, struct rw_counters *sum)
{
	int ncpu, err = 0;
	struct rw_counters *per = per_cpu_alloc(&ncpu);

	if (!per)
		return -errno;
	memset(sum, 0, sizeof(*sum));
	if (bpf_map_lookup_elem(dp->map_fd[RW_M_COUNTERS], &idx, per)) {
		err = -errno;
		goto cleanup;
	}
	for (int c = 0; c < ncpu; c++) {
		for (int d = 0; d < RW_DIR_COUNT; d++) {
			for (int r = 0; r < RW_REASON_COUNT; r++) {
				sum->packets[d][r] += per[c].packets[d][r];
				sum->bytes[d][r] += per[c].bytes[d][r];
			}
		}
		sum->events_sent += per[c].events_sent;
		sum->events_lost += per[c].events_lost;
		sum->events_suppressed += per[c].events_suppressed;
		for (int a = 0; a < RW_ANSWER_COUNT; a++)
			sum->answers[a] += per[c].answers[a];
	}
cleanup:
	free(per);
	return err;
}

int rw_counters_zero(const struct rw_datapath *dp, __u32 idx)
{
	int ncpu, err = 0;
	struct rw_counters *per = per_cpu_alloc(&ncpu);

	if (!per)
		return -errno;
	if (bpf_map_update_elem(dp->map_fd[RW_M_COUNTERS], &idx, per, BPF_ANY))
		err = -errno;
	free(per);
	return err;
}
