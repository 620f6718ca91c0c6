/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* containers.h: the agent's table of the sandbox pods' containers (issue 34): each container's
 * name, pod, cgroup v2 id (what bpf_skb_cgroup_id() returns for its sockets) and its pod's
 * host-side veth, learned from the runtime's OCI bundles (containerd's CRI writes one per
 * container, docs/principals.md "How the agent learns the containers") and kept current by
 * inotify and a rescan every second. A pod's sandbox (pause) container is not in the table:
 * only its network namespace is used, to find the pod's veth.
 */
#ifndef RUNWALL_CONTAINERS_H
#define RUNWALL_CONTAINERS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* The bundles containerd's CRI plugin writes (its "k8s.io" namespace): --containers' default. */
#define RW_CONTAINERS_DIR     "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
#define RW_MAX_CONTAINERS     16384 /* entries of the table; a container past it is left out */
#define RW_MAX_CONTAINER_PODS 16384 /* sandbox bundles followed */
#define RW_CONTAINERS_POLL_MS 1000  /* the rescan */

struct agent;

struct rw_container {
	char id[72];   /* runtime container id */
	char name[64]; /* io.kubernetes.cri.container-name */
	char pod_uid[64];
	char pod[320];	    /* namespace/name */
	uint64_t cgroup_id; /* 0 while its cgroup v2 directory is not there */
	uint32_t ifindex;   /* its pod's host-side veth, 0 while not known */
};

struct container_meta; /* containers.c: what the table's entries need besides */
struct container_pod;  /* containers.c: a sandbox bundle */
struct container_bad;  /* containers.c: a bundle refused, not read again until it changes */

/* The containers (containers.c writes it). */
struct agent_containers {
	struct rw_container *c; /* n entries, no order */
	size_t n;
	struct container_meta *meta; /* [n]: its cgroup directory and sandbox id */
	struct container_pod *pods;
	size_t n_pods;
	struct container_bad *bad;
	size_t n_bad;
	bool on;			 /* containers_init() done */
	const char *dir;		 /* --containers */
	const char *cgroup_root_opt;	 /* --cgroup-root; NULL: the cgroup2 mount */
	char cgroup_root[PATH_MAX];	 /* "" when no cgroup v2 is mounted */
	int inotify_fd, watch, timer_fd; /* watch -1: the folder is not there (yet) */
	unsigned long long veths_sig;	 /* the sandbox veths when the pods' veths were resolved */
	bool resolve;			 /* a pod came or went: resolve the veths again */
	unsigned long long left_out;	 /* containers past RW_MAX_CONTAINERS, counted per scan */
	unsigned long long refused;	 /* bundles refused (logged once each) */
	double scan_ms;			 /* the last scan's duration */
	unsigned long long
		gen; /* bumped on every change to (name, cgroup_id, ifindex) of any entry */
};

/* After the sandboxes are known: the cgroup v2 root (--cgroup-root, checked to be cgroup2, or
 * the mount), the inotify and timer fds, a first scan. A bad --cgroup-root is an error, logged
 * naming it (a negative errno); a missing bundle folder is not (watched from when it appears).
 */
int containers_init(struct agent *a);
/* inotify readable or 1 s timer: rescan (also after a sandbox veth is bound). */
void containers_poll(struct agent *a);
void containers_free(struct agent *a);
/* What status shows: the table, with each veth's name, and how many wait for their cgroup or
 * their veth.
 */
json_t *containers_status(struct agent *a);

#endif /* RUNWALL_CONTAINERS_H */
