/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* conf.h: what runwall-cni reads from the runtime: its network configuration on stdin, with the
 * result of the plugins before it (prevResult), as the CNI spec (0.3.0 to 1.0.0) defines them.
 * Parsing is one pure function (no I/O, no kernel), so that a fuzzer can drive it directly.
 */
#ifndef RUNWALL_CNI_CONF_H
#define RUNWALL_CNI_CONF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <linux/types.h>
#include "attach.h"

/* CNI error codes (spec "Error codes"), and runwall-cni's own (100 and up). */
enum rw_cni_code {
	RW_CNI_E_VERSION = 1,	 /* incompatible CNI version */
	RW_CNI_E_CONFIG = 4,	 /* invalid network config */
	RW_CNI_E_ENV = 7,	 /* invalid environment variables */
	RW_CNI_E_IO = 5,	 /* I/O failure (reading stdin) */
	RW_CNI_E_DECODE = 6,	 /* failed to decode content */
	RW_CNI_E_TRY_LATER = 11, /* try again later: runwall is not set up on this node */
	RW_CNI_E_PREV = 100,	 /* prevResult lacks the host veth or a pod's address */
	RW_CNI_E_ATTACH = 101,	 /* attaching or binding failed */
	RW_CNI_E_CHECK = 102,	 /* CHECK: the pod is not protected as it should be */
	RW_CNI_E_LAYOUT = 103,	 /* the pins on the node are another runwall's layout */
};

#include "netlink.h" /* RW_DEFAULT_IFPREFIX */
#define RW_CNI_DEFAULT_IFPREFIX RW_DEFAULT_IFPREFIX
#define RW_CNI_VERSIONS		"0.3.0", "0.3.1", "0.4.0", "1.0.0"
#define RW_CNI_MAX_INPUT	(1 << 20)

struct rw_cni_req {
	char cni_version[16];
	char bpffs[PATH_MAX];	  /* "bpffs", default RW_DEFAULT_BPFFS */
	enum rw_attach_mode mode; /* "attachMode": auto|tcx|tc */
	char ifprefix[128];	  /* "ifPrefix", default RW_CNI_DEFAULT_IFPREFIX */
	json_t *prev;		  /* prevResult (a reference we own), NULL when absent */
	/* From prevResult, when present and complete: */
	char host_if[16]; /* the host-side interface (no "sandbox" key) */
	/* The pod's addresses in ips[], one of each family at most, each one a pod can have:
	 * the IPv4 (which may be an IPv6 EKS node's 169.254.172.0/22 one) and the IPv6.
	 */
	bool has_ip4, has_ip6;
	__be32 pod_ip;		     /* 0 without has_ip4 */
	__be32 pod_ip6[4];	     /* zeros without has_ip6 */
	size_t ip4_index, ip6_index; /* where in ips[] */
	bool prev_complete;	     /* host_if and an address of either family were found */
	char prev_error[256];	     /* why not, when !prev_complete */
};

/* Parse stdin's network configuration (len bytes, not NUL-terminated). 0 on success; otherwise
 * an rw_cni_code and a message in err naming the key. A prevResult that lacks the host veth or
 * an address, that has an address no pod can have (rw_pod_cidr_check(), rw_pod_cidr6_check()),
 * one that is neither family's, or two of one family, is not an error here (DEL must still
 * work): prev_complete says, and ADD and CHECK fail with RW_CNI_E_PREV and prev_error.
 * rw_cni_req_free() releases what a successful or failed parse holds.
 */
int rw_cni_parse(const char *buf, size_t len, struct rw_cni_req *req, char *err, size_t errlen);
void rw_cni_req_free(struct rw_cni_req *req);

/* Whether a CNI version is one runwall-cni speaks, and whether it has CHECK (0.4.0+). */
bool rw_cni_version_ok(const char *v);
bool rw_cni_version_has_check(const char *v);

#endif /* RUNWALL_CNI_CONF_H */
