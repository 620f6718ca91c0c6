// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* nlutil.c: the libmnl dump round trip shared by netlink.c and attach.c; see nlutil.h. */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <linux/netlink.h>
#include <libmnl/libmnl.h>
#include "nlutil.h"

/* errno as a negative return value, -EIO when a failure left it unset. */
static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

void *rw_mnl_dump_request(__u16 type, size_t extra_len, struct nlmsghdr **nlh)
{
	char *buf = malloc(RW_NL_BUFSZ);

	*nlh = NULL;
	if (!buf)
		return NULL;
	*nlh = mnl_nlmsg_put_header(buf);
	(*nlh)->nlmsg_type = type;
	(*nlh)->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	return mnl_nlmsg_put_extra_header(*nlh, extra_len);
}

int rw_mnl_dump(struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	return rw_mnl_dump_opts(nlh, cb, data, false);
}

int rw_mnl_dump_all(__u16 type, size_t extra_len, mnl_cb_t cb, void *data)
{
	struct nlmsghdr *nlh;
	int err;

	if (!rw_mnl_dump_request(type, extra_len, &nlh))
		return -ENOMEM;
	err = rw_mnl_dump(nlh, cb, data);
	free(nlh);
	return err;
}

int rw_mnl_dump_opts(struct nlmsghdr *nlh, mnl_cb_t cb, void *data, bool strict)
{
	char *buf = (char *)nlh;
	unsigned int seq, portid;
	struct mnl_socket *nl;
	int ret, err, one = 1;

	nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl)
		return neg_errno();
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err = neg_errno();
		goto out;
	}
	if (strict && mnl_socket_setsockopt(nl, NETLINK_GET_STRICT_CHK, &one, sizeof(one)) < 0) {
		err = neg_errno();
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	nlh->nlmsg_seq = seq = (unsigned int)time(NULL);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		err = neg_errno();
		goto out;
	}
	for (;;) {
		ret = mnl_socket_recvfrom(nl, buf, RW_NL_BUFSZ);
		if (ret < 0) {
			err = neg_errno();
			goto out;
		}
		errno = 0;
		ret = mnl_cb_run(buf, ret, seq, portid, cb, data);
		if (ret < 0) {
			/* libmnl (1.0.4+) stops at a message flagged NLM_F_DUMP_INTR with EINTR,
			 * before the callback sees it: the table changed during the dump (the
			 * kernel's nl_dump_check_consistent()). Not a signal: dump again.
			 */
			err = errno == EINTR ? -EAGAIN : neg_errno();
			goto out;
		}
		if (ret == MNL_CB_STOP)
			break;
	}
	err = 0;
out:
	mnl_socket_close(nl);
	return err;
}
