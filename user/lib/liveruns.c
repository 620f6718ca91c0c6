// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* liveruns.c: the runs of the live slot, as its pods maps say (liveruns.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "apply.h"
#include "liveruns.h"

void rw_live_runs_free(struct rw_live_run *runs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(runs[i].pods);
		free(runs[i].pods6);
	}
	free(runs);
}

static int run_cmp(const void *a, const void *b)
{
	const struct rw_live_run *x = a, *y = b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int ip_cmp(const void *a, const void *b)
{
	__u32 x = ntohl(*(const __be32 *)a), y = ntohl(*(const __be32 *)b);

	return x < y ? -1 : x > y;
}

static int ip6_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 4 * sizeof(__be32));
}

/* A pod of either family (`six`: ip is four words) into its run, made on its first pod. */
static int add_pod(struct rw_live_run **runs, size_t *n, size_t *cap, const __be32 *ip, bool six,
		   const struct rw_pod *pod)
{
	struct rw_live_run *r = NULL;

	for (size_t i = 0; i < *n; i++) {
		if ((*runs)[i].idx == pod->run_idx &&
		    !strncmp((*runs)[i].id, pod->run_id, RW_RUN_ID_LEN)) {
			r = &(*runs)[i];
			break;
		}
	}
	if (!r) {
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 16;
			struct rw_live_run *grown = realloc(*runs, c * sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			*runs = grown;
			*cap = c;
		}
		r = &(*runs)[(*n)++];
		memset(r, 0, sizeof(*r));
		snprintf(r->id, sizeof(r->id), "%.*s", RW_RUN_ID_LEN - 1, pod->run_id);
		r->idx = pod->run_idx;
		r->gen = pod->run_gen;
		r->egress = pod->egress_mode;
	}
	if (six) {
		__be32(*pods6)[4] = realloc(r->pods6, (r->n_pods6 + 1) * sizeof(*pods6));

		if (!pods6)
			return -ENOMEM;
		r->pods6 = pods6;
		memcpy(r->pods6[r->n_pods6++], ip, sizeof(*pods6));
	} else {
		__be32 *pods = realloc(r->pods, (r->n_pods + 1) * sizeof(*pods));

		if (!pods)
			return -ENOMEM;
		r->pods = pods;
		r->pods[r->n_pods++] = *ip;
	}
	return 0;
}

/* Every pod of one pod table of the live slot into runs[] (-ENOENT: no live slot). */
static int add_pods_of(const struct rw_datapath *dp, enum rw_map_id table,
		       struct rw_live_run **runs, size_t *n, size_t *cap)
{
	int fd = rw_live_inner_fd(dp, table), err = 0;
	__be32 key[4], prev[4];
	bool first = true;
	struct rw_pod pod;

	if (fd < 0)
		return fd;
	while (!err && bpf_map_get_next_key(fd, first ? NULL : prev, key) == 0) {
		memcpy(prev, key, sizeof(prev));
		first = false;
		if (bpf_map_lookup_elem(fd, key, &pod))
			continue;
		err = add_pod(runs, n, cap, key, table == RW_M_PODS6, &pod);
	}
	close(fd);
	return err;
}

int rw_live_runs(const struct rw_datapath *dp, struct rw_live_run **out, size_t *n_out)
{
	struct rw_live_run *runs = NULL;
	size_t n = 0, cap = 0;
	int err;

	*out = NULL;
	*n_out = 0;
	err = add_pods_of(dp, RW_M_PODS, &runs, &n, &cap);
	if (!err)
		err = add_pods_of(dp, RW_M_PODS6, &runs, &n, &cap);
	if (err == -ENOENT)
		err = 0;
	if (err)
		goto cleanup;
	qsort(runs, n, sizeof(*runs), run_cmp);
	for (size_t i = 0; i < n; i++) {
		if (runs[i].n_pods)
			qsort(runs[i].pods, runs[i].n_pods, sizeof(__be32), ip_cmp);
		if (runs[i].n_pods6)
			qsort(runs[i].pods6, runs[i].n_pods6, sizeof(*runs[i].pods6), ip6_cmp);
	}
	*out = runs;
	*n_out = n;
	runs = NULL;
	n = 0;
cleanup:
	rw_live_runs_free(runs, n);
	return err;
}

int rw_live_run_find(const struct rw_live_run *runs, size_t n, const char *id, __u32 idx)
{
	for (size_t i = 0; i < n; i++) {
		if (id ? !strcmp(runs[i].id, id) : runs[i].idx == idx)
			return (int)i;
	}
	return -ENOENT;
}
