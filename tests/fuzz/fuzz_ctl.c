// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fuzz_ctl.c: libFuzzer target for the control socket's requests, parsed as the agent parses
 * them (user/agent/ctl_server.c): the input is what a client writes before it shuts down its
 * side. rw_ctl_parse_request() splits it; then each verb's own parse runs: `apply`'s body goes
 * to the snapshot parser, `apply-run` and `delete-run` take their "BASE REVISION NAME" argument
 * (and apply-run's body is read as JSON, as the agent reads it before the run's checks).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ctl.h"
#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned long long base, revision;
	struct rw_policy_error perr;
	struct rw_ctl_request req;
	struct rw_policy p;
	const char *name;
	char *buf;
	int err;

	buf = malloc(size + 1);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	err = rw_ctl_parse_request(buf, size, &req);
	if (err) {
		/* Without a newline there is no request; nothing else may fail here. */
		if (err != -EBADMSG || memchr(data, '\n', size))
			abort();
		free(buf);
		return 0;
	}
	/* The request line and the body are the input, split at the first newline. */
	if (req.verb != buf || req.body < buf || req.body + req.body_len != buf + size ||
	    strchr(req.verb, '\n') || (req.arg && strchr(req.arg, '\n')) ||
	    (req.arg && req.arg <= req.verb))
		abort();
	if (!strcmp(req.verb, "apply")) {
		if (rw_policy_parse_newer(req.body, req.body_len,
					  req.arg && *req.arg ? req.arg : "<socket>", 0, &p,
					  &perr) == 0)
			rw_policy_free(&p);
	} else if (!strcmp(req.verb, "apply-run") || !strcmp(req.verb, "delete-run")) {
		if (rw_ctl_parse_run_change(req.arg, &base, &revision, &name) == 0) {
			/* The name is the argument's non-empty rest. */
			if (!*name || name < req.arg || name >= req.arg + strlen(req.arg))
				abort();
			if (req.verb[0] == 'a') {
				json_error_t jerr;
				json_t *run = json_loadb(req.body, req.body_len,
							 JSON_REJECT_DUPLICATES, &jerr);

				json_decref(run);
			}
		}
	}
	free(buf);
	return 0;
}
