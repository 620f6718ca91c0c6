/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* bpf_compat.h: Linux 6.6 UAPI values that Debian 12's 6.1 headers lack (tcx), and the
 * kernel-internal ENOTSUPP that bpf() returns.
 */
#ifndef RUNWALL_BPF_COMPAT_H
#define RUNWALL_BPF_COMPAT_H

#include <linux/bpf.h>

#ifndef BPF_TCX_INGRESS
#define BPF_TCX_INGRESS 46 /* enum bpf_attach_type */
#endif
#ifndef BPF_TCX_EGRESS
#define BPF_TCX_EGRESS 47
#endif
#ifndef BPF_F_BEFORE
#define BPF_F_BEFORE (1U << 3) /* attach before the relative program (none: at the head) */
#endif
/* Not UAPI at all: the kernel's own "no such operation" (for a map type without batch
 * operations, a tcx attach on a kernel without it) reaches user space as this errno.
 */
#ifndef ENOTSUPP
#define ENOTSUPP 524
#endif

#endif /* RUNWALL_BPF_COMPAT_H */
