/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* cgroup2.h: the cgroup v2 hierarchy as the agent reads it: where it is mounted, the directory a
 * container's OCI `linux.cgroupsPath` names under it (both of the kubelet's cgroup drivers), and
 * a directory's cgroup id, the id bpf_skb_cgroup_id() returns for a socket in it.
 *
 * Functions return 0 or a negative errno, with the sentence in err, and do not log.
 */
#ifndef RUNWALL_CGROUP2_H
#define RUNWALL_CGROUP2_H

#include <stddef.h>
#include <stdint.h>

/* The mount point of the first cgroup2 file system in mountinfo (NULL: /proc/self/mountinfo):
 * /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one. -ENOENT when none.
 */
int rw_cgroup2_mount(const char *mountinfo, char *out, size_t outlen, char *err, size_t errlen);

/* The cgroup v2 root that --cgroup-root DIR names, into out: DIR itself when it is a directory
 * of a cgroup v2 file system (a unified host's /sys/fs/cgroup), else DIR/unified when that is (a
 * hybrid host's /sys/fs/cgroup, as a DaemonSet mounts it whole). 0, or -errno of statfs(2) on
 * DIR, or -EINVAL "not a cgroup v2 file system, nor is DIR/unified"; err starts with DIR.
 */
int rw_cgroup2_root(const char *dir, char *out, size_t outlen, char *err, size_t errlen);

/* The directory, relative to the cgroup v2 root (no leading '/'), of an OCI cgroupsPath:
 *   systemd driver  "SLICE:PREFIX:NAME", e.g. "kubepods-besteffort-pod1a2b.slice:cri-containerd:ID"
 *                   -> "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b.slice/
 *                       cri-containerd-ID.scope" (a slice a-b-c.slice is a.slice/a-b.slice/
 *                       a-b-c.slice, "-.slice" the root; NAME ending in .slice is used as is)
 *   cgroupfs driver "/kubepods/besteffort/pod<uid>/ID" -> "kubepods/besteffort/pod<uid>/ID"
 * -EINVAL, with the reason, for anything else: a relative cgroupfs path, an empty part, "." or
 * "..", a '/' inside a systemd part, a slice name systemd would refuse; -ENAMETOOLONG past
 * outlen or PATH_MAX.
 */
int rw_cgroup2_dir(const char *cgroups_path, char *out, size_t outlen, char *err, size_t errlen);

/* The cgroup id of the cgroup v2 directory path: its kernfs node id, read as the 8-byte file
 * handle name_to_handle_at(2) gives (the kernel's selftests' get_cgroup_id()). -ENOENT when the
 * directory is not there (yet), -EPROTO when the handle is not 8 bytes (not cgroup2).
 */
int rw_cgroup2_id(const char *path, uint64_t *id, char *err, size_t errlen);

/* The cgroup id of this process's own cgroup v2 (/proc/self/cgroup's "0::" line, under the
 * mount): what bpf_skb_cgroup_id() returns for a socket it makes, BPF_PROG_TEST_RUN's included.
 */
int rw_cgroup2_self_id(uint64_t *id, char *err, size_t errlen);

#endif /* RUNWALL_CGROUP2_H */
