// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* liveruns.c: the runs of the live slot, as its pods map says (liveruns.h). */
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

/* The pod at key (an IPv4 __be32, or with ipv6 an IPv6 __be32[4]) into its run. */
static int add_pod(struct rw_live_run **runs, size_t *n, size_t *cap, const void *key, bool ipv6,
		   const struct rw_pod *pod)
{
	struct rw_live_run *r = NULL;
	__be32 *pods;

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
	if (ipv6) {
		__be32(*pods6)[4] = realloc(r->pods6, (r->n_pods6 + 1) * sizeof(*pods6));

		if (!pods6)
			return -ENOMEM;
		r->pods6 = pods6;
		memcpy(r->pods6[r->n_pods6++], key, sizeof(*pods6));
		return 0;
	}
	pods = realloc(r->pods, (r->n_pods + 1) * sizeof(*pods));
	if (!pods)
		return -ENOMEM;
	r->pods = pods;
	memcpy(&r->pods[r->n_pods++], key, sizeof(*pods));
	return 0;
}

/* Every pod of one family's pods map of the live slot (-ENOENT: none such) into runs. */
static int read_pods(const struct rw_datapath *dp, bool ipv6, struct rw_live_run **runs, size_t *n,
		     size_t *cap)
{
	__be32 key[4], *prev = NULL;
	struct rw_pod pod;
	int fd = rw_live_inner_fd(dp, ipv6 ? RW_M_PODS6 : RW_M_PODS), err = 0;

	if (fd < 0)
		return fd;
	while (bpf_map_get_next_key(fd, prev, key) == 0) {
		prev = key;
		if (bpf_map_lookup_elem(fd, key, &pod))
			continue;
		err = add_pod(runs, n, cap, key, ipv6, &pod);
		if (err)
			break;
	}
	close(fd);
	return err;
}

int rw_live_pod6(const struct rw_datapath *dp, const __be32 pod_ip6[4], struct rw_pod *out)
{
	int fd = rw_live_inner_fd(dp, RW_M_PODS6), err = 0;

	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, pod_ip6, out))
		err = -errno;
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
	err = read_pods(dp, false, &runs, &n, &cap);
	if (err == -ENOENT)
		return 0;
	/* An older layout's slot has no IPv6 pods map. */
	if (!err) {
		err = read_pods(dp, true, &runs, &n, &cap);
		if (err == -ENOENT)
			err = 0;
	}
	if (err)
		goto cleanup;
	qsort(runs, n, sizeof(*runs), run_cmp);
	for (size_t i = 0; i < n; i++) {
		qsort(runs[i].pods, runs[i].n_pods, sizeof(__be32), ip_cmp);
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
