/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* nlutil.h: the rtnetlink dump round trip through libmnl that netlink.c (links, routes) and
 * attach.c (tc filters) share: build a dump request, send it on a socket of its own, run a
 * callback over every answer up to NLMSG_DONE.
 */
#ifndef RUNWALL_NLUTIL_H
#define RUNWALL_NLUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include <libmnl/libmnl.h>

/* The kernel fills a dump skb up to 32 KiB when the reader's buffer is that large
 * (netlink_dump() sizes it from the last recvmsg()); a smaller buffer would see MSG_TRUNC.
 */
#define RW_NL_BUFSZ 32768

/* A dump request (NLM_F_REQUEST | NLM_F_DUMP) of `type` at the start of a new RW_NL_BUFSZ
 * buffer, *nlh (free() it), with a zeroed family header of `extra_len` bytes: returns that
 * header, where the caller fills in the family and then adds attributes to *nlh. NULL when out
 * of memory.
 */
void *rw_mnl_dump_request(__u16 type, size_t extra_len, struct nlmsghdr **nlh);

/* Send the request nlh (from rw_mnl_dump_request(); its buffer is reused for the answers) on a
 * NETLINK_ROUTE socket of its own and run cb over the answer up to NLMSG_DONE. 0 or a negative
 * errno: an error from the kernel comes back as its -errno, a callback's MNL_CB_ERROR as
 * -errno, or -EIO when the callback left errno at 0; -EAGAIN when the kernel flagged the dump
 * as interrupted by a change (NLM_F_DUMP_INTR): the callback saw part of it, dump again.
 */
int rw_mnl_dump(struct nlmsghdr *nlh, mnl_cb_t cb, void *data);

/* The same; with strict, on a socket with NETLINK_GET_STRICT_CHK, where the kernel (4.20+)
 * takes the request's header and attributes as filters (a route dump of one table and one
 * output interface) and refuses what it cannot filter on instead of ignoring it.
 */
int rw_mnl_dump_opts(struct nlmsghdr *nlh, mnl_cb_t cb, void *data, bool strict);

/* A dump of every object of `type` in the namespace, of every family: a request with a zeroed
 * family header of `extra_len` bytes (AF_UNSPEC, no attribute) run through rw_mnl_dump().
 */
int rw_mnl_dump_all(__u16 type, size_t extra_len, mnl_cb_t cb, void *data);

#endif /* RUNWALL_NLUTIL_H */
