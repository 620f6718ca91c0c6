// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mapfill.c: how full each pinned map is (mapfill.h). Reads only: walks keys, map info, and the
 * ring's two position pages.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "apply.h"
#include "liveruns.h"
#include "mapfill.h"

static const char *map_type(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	const char *s;

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return "?";
	s = libbpf_bpf_map_type_str(info.type);
	return s ? s : "?";
}

int rw_map_fill(const struct rw_datapath *dp, struct rw_map_fill fill[RW_M__COUNT])
{
	static const __u32 inner_max[RW_M__COUNT] = {
		[RW_M_PODS] = RW_MAX_PODS,
		[RW_M_ALLOW_EXACT] = RW_MAX_ALLOW_EXACT,
		[RW_M_ALLOW_CIDR] = RW_MAX_ALLOW_CIDR,
		[RW_M_DENY] = RW_MAX_DENY,
		[RW_M_INBOUND] = RW_MAX_INBOUND,
		[RW_M_PODS6] = RW_MAX_PODS,
		[RW_M_ALLOW_EXACT6] = RW_MAX_ALLOW_EXACT,
		[RW_M_ALLOW_CIDR6] = RW_MAX_ALLOW_CIDR,
		[RW_M_DENY6] = RW_MAX_DENY,
		[RW_M_INBOUND6] = RW_MAX_INBOUND,
	};
	for (int i = 0; i < RW_M__COUNT; i++) {
		struct rw_map_fill *f = &fill[i];
		int fd = dp->map_fd[i];

		f->name = rw_map_shown_names[i];
		f->pin = rw_map_names[i];
		f->type = map_type(fd);
		f->max_entries = rw_map_max_entries(fd);
		switch (i) {
		case RW_M_PODS:
		case RW_M_ALLOW_EXACT:
		case RW_M_ALLOW_CIDR:
		case RW_M_DENY:
		case RW_M_INBOUND:
		case RW_M_PODS6:
		case RW_M_ALLOW_EXACT6:
		case RW_M_ALLOW_CIDR6:
		case RW_M_DENY6:
		case RW_M_INBOUND6: {
			int inner = rw_live_inner_fd(dp, i);

			f->max_entries = inner_max[i];
			if (inner == -ENOENT) {
				f->entries = 0;
				break;
			}
			if (inner < 0) {
				f->entries = inner;
				break;
			}
			f->type = map_type(inner);
			f->max_entries = rw_map_max_entries(inner);
			f->entries = rw_map_count_entries(inner);
			close(inner);
			break;
		}
		case RW_M_COUNTERS:
		case RW_M_RUN_REVS: {
			struct rw_live_run *runs;
			size_t n_runs;

			f->entries = rw_live_runs(dp, &runs, &n_runs);
			if (!f->entries) {
				f->entries =
					1 + (long long)n_runs; /* the node's own, then the runs' */
				rw_live_runs_free(runs, n_runs);
			}
			break;
		}
		case RW_M_CONNTRACK:
		case RW_M_CONNTRACK6: {
			/* Flows of every sandbox's table of the family, against the node's size
			 * (which counts both families).
			 */
			bool ipv6 = i == RW_M_CONNTRACK6;
			struct rw_config cfg;
			__u32 key, *prev = NULL;

			f->entries = 0;
			while (bpf_map_get_next_key(fd, prev, &key) == 0) {
				int inner = ipv6 ? rw_conntrack6_table_fd(dp, key)
						 : rw_conntrack_table_fd(dp, key);

				prev = &key;
				if (inner < 0)
					continue;
				f->entries += rw_map_count_entries(inner);
				close(inner);
			}
			if (rw_config_read(dp, &cfg) == 0 && cfg.ct_node)
				f->max_entries = cfg.ct_node;
			break;
		}
		case RW_M_VETH_SLOTS:
		case RW_M_CT_SLOTS:
		case RW_M_CT6_SLOTS:
		case RW_M_VETH_BUDGET: {
			/* The veth indexes in use, counted where they are named, not by a walk of
			 * the arrays (20 480 lookups each): every bound veth has an index with its
			 * binding and bucket, and its tables there are those rw_conntrack and
			 * rw_conntrack6 hold.
			 */
			enum rw_map_id by = i == RW_M_CT_SLOTS	  ? RW_M_CONNTRACK
					    : i == RW_M_CT6_SLOTS ? RW_M_CONNTRACK6
								  : RW_M_ENDPOINTS;

			f->entries = rw_map_count_entries(dp->map_fd[by]);
			break;
		}
		case RW_M_EVENTS: {
			__u32 size;

			f->entries = rw_ring_pending(fd, &size);
			f->max_entries = size;
			break;
		}
		default:
			f->entries = rw_map_count_entries(fd);
		}
	}
	return 0;
}

long rw_map_count_entries(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info), key_size;
	__u8 key[64], next[64];
	void *prev = NULL;
	long n = 0;

	/* The key's size as the kernel has it (a walk with a 0-byte key never ends). */
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	key_size = info.key_size;
	if (!key_size || key_size > sizeof(key))
		return -E2BIG;
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		memcpy(key, next, key_size);
		prev = key;
		n++;
	}
	return errno == ENOENT ? n : -errno;
}

__u32 rw_map_max_entries(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return 0;
	return info.max_entries;
}

long long rw_ring_pending(int fd, __u32 *size)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long cons, prod;
	void *m;

	*size = rw_map_max_entries(fd);
	/* The consumer position page, then the producer's: both readable by anyone with the fd. */
	m = mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	cons = __atomic_load_n((unsigned long *)m, __ATOMIC_ACQUIRE);
	prod = __atomic_load_n((unsigned long *)((char *)m + page), __ATOMIC_ACQUIRE);
	munmap(m, 2 * page);
	return (long long)(prod - cons);
}
