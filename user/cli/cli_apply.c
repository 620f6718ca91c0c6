// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_apply.c: `runwall apply`: push a policy snapshot to the agent. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>

#include "attach.h"
#include "commands.h"
#include "ctl.h"
#include "datapath.h"
#include "util.h"

static int no_agent(int err)
{
	return rw_fail(RW_EXIT_USAGE, "no agent on %s (%s); start `runwall agent` or pass --socket",
		       rw_g.socket, strerror(-err));
}

static void print_json(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	printf("%s\n", s ? s : "{}");
	free(s);
}

static int cmd_apply(int argc, char **argv)
{
	const char *path, *source;
	json_t *reply = NULL, *changes;
	char *buf = NULL;
	size_t len = 0;
	int err, ret;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		rw_cmd_help(&rw_cmd_apply, stdout);
		return RW_EXIT_OK;
	}
	if (argc != 2 || argv[1][0] == '\0')
		return rw_cmd_usage_error(&rw_cmd_apply, "one FILE, or - for standard input");
	path = argv[1];
	source = strcmp(path, "-") ? path : "<stdin>";
	err = rw_read_file(path, RW_CTL_MAX_BODY, &buf, &len);
	if (err)
		return rw_fail(RW_EXIT_USAGE, "apply: %s: %s", path, strerror(-err));

	err = rw_ctl_call(rw_g.socket, "apply", source, buf, len, RW_CTL_APPLY_TIMEOUT_MS, &reply);
	free(buf);
	if (rw_ctl_no_agent(err))
		return no_agent(err);
	if (err == -ETIMEDOUT)
		return rw_fail(RW_EXIT_USAGE, "apply: the agent on %s did not answer within %d s",
			       rw_g.socket, RW_CTL_APPLY_TIMEOUT_MS / 1000);
	if (err)
		return rw_fail(RW_EXIT_USAGE, "apply: talking to the agent on %s: %s", rw_g.socket,
			       strerror(-err));
	if (!json_is_true(json_object_get(reply, "ok"))) {
		const char *msg = json_string_value(json_object_get(reply, "error"));

		if (rw_g.json) {
			json_object_set_new(reply, "exit", json_integer(RW_EXIT_REFUSED));
			print_json(reply);
		} else {
			fprintf(stderr, "runwall: refused: %s\n", msg ? msg : "(no reason given)");
		}
		json_decref(reply);
		return RW_EXIT_REFUSED;
	}
	ret = RW_EXIT_OK;
	if (rw_g.json) {
		print_json(reply);
	} else {
		size_t i;
		json_t *line;

		printf("applied revision %lld (previous %lld) in %.1f ms\n",
		       (long long)json_integer_value(json_object_get(reply, "revision")),
		       (long long)json_integer_value(json_object_get(reply, "previous")),
		       json_real_value(json_object_get(reply, "apply_ms")));
		changes = json_object_get(reply, "changes");
		json_array_foreach(changes, i, line) printf("  %s\n", json_string_value(line));
	}
	json_decref(reply);
	return ret;
}

const struct rw_cmd rw_cmd_apply = {
	.name = "apply",
	.summary = "push a policy snapshot to the agent",
	.grammar = "apply FILE|-",
	.options = "  FILE|-   the snapshot (docs/policy.md); - reads standard input\n",
	.func = cmd_apply,
};
