// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_ctl.c: libFuzzer target for the control socket's request framing and verbs. The input
 * is what a client writes before shutting down its side: it goes through a real socket pair
 * into rw_ctl_read_request() (the function the agent calls on every accepted client), then the
 * verb is dispatched the way the agent does: `apply`'s body goes to the snapshot parser, the
 * other verbs take no body, anything else is an unknown request.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "ctl.h"
#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *verb, *arg, *body;
	struct rw_policy_error perr;
	struct rw_policy p;
	size_t body_len;
	int sv[2], err;

	if (size > 65536) /* stays within the socket buffer: one write, no reader thread */
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	if (size && write(sv[0], data, size) != (ssize_t)size)
		abort();
	shutdown(sv[0], SHUT_WR);
	err = rw_ctl_read_request(sv[1], 1000, &buf, &verb, &arg, &body, &body_len);
	close(sv[0]);
	close(sv[1]);
	if (err) {
		/* Without a newline there is no request; nothing else may fail here. */
		if (err != -EBADMSG || memchr(data, '\n', size))
			abort();
		return 0;
	}
	/* The request line and the body are the input, split at the first newline. */
	if (verb != buf || body < buf || body + body_len != buf + size || strchr(verb, '\n') ||
	    (arg && strchr(arg, '\n')))
		abort();
	if (!strcmp(verb, "apply")) {
		if (rw_policy_parse_newer(body, body_len, arg && *arg ? arg : "<socket>", 0, &p,
					  &perr) == 0)
			rw_policy_free(&p);
	}
	free(buf);
	return 0;
}
