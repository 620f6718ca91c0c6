/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* oci_bundle.h: what the agent reads of a container's OCI bundle, its config.json as containerd's
 * CRI plugin writes it (/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/config.json):
 * the CRI annotations (containerd's pkg/cri/annotations: io.kubernetes.cri.container-type,
 * -container-name, -sandbox-id, -sandbox-uid, -sandbox-name, -sandbox-namespace),
 * linux.cgroupsPath and, for a pod's sandbox (pause) container, the path of its network
 * namespace.
 */
#ifndef RUNWALL_OCI_BUNDLE_H
#define RUNWALL_OCI_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>

/* A config.json larger than this is refused (they are a few KiB). */
#define RW_OCI_CONFIG_MAX (1u << 20)

struct rw_oci_bundle {
	bool sandbox;	     /* container-type "sandbox" (the pause container), else "container" */
	char name[64];	     /* container-name ("" for a sandbox) */
	char sandbox_id[72]; /* sandbox-id: the pause container's id */
	char pod_uid[64];    /* sandbox-uid */
	char pod_name[256];  /* sandbox-name */
	char pod_ns[64];     /* sandbox-namespace */
	char cgroups_path[4096]; /* linux.cgroupsPath */
	char netns[4096];	 /* a sandbox's linux.namespaces "network" path; "": none (host
				* network, or not a sandbox) */
};

/* Parse a config.json's text (len bytes; file names it in errors). 0, or -EINVAL with err
 * naming the file and the field: "FILE: annotations.io.kubernetes.cri.container-name: missing",
 * "FILE: linux.cgroupsPath: not a string", "FILE: ...: longer than 63 bytes".
 */
int rw_oci_bundle_parse(const char *text, size_t len, const char *file, struct rw_oci_bundle *b,
			char *err, size_t errlen);

/* Read and parse the file: also -EFBIG past RW_OCI_CONFIG_MAX, -errno of open or read. */
int rw_oci_bundle_read(const char *path, struct rw_oci_bundle *b, char *err, size_t errlen);

#endif /* RUNWALL_OCI_BUNDLE_H */
