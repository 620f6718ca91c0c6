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

static int slurp(FILE *f, char **out, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (!got)
			break;
		if (n == cap) {
			char *grown = cap < RW_CTL_MAX_BODY ? realloc(buf, cap * 2) : NULL;

			if (!grown) {
				free(buf);
				return -EFBIG;
			}
			buf = grown;
			cap *= 2;
		}
	}
	if (!buf)
		return -ENOMEM;
	*out = buf;
	*len = n;
	return 0;
}

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

int cmd_apply(int argc, char **argv)
{
	const char *path, *source;
	json_t *reply = NULL, *changes;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int err, ret;

	if (argc != 2 || argv[1][0] == '\0')
		return rw_fail(RW_EXIT_USAGE, "usage: runwall apply FILE|-");
	path = argv[1];
	source = strcmp(path, "-") ? path : "<stdin>";
	f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (!f)
		return rw_fail(RW_EXIT_USAGE, "apply: %s: %s", path, strerror(errno));
	err = slurp(f, &buf, &len);
	if (f != stdin)
		fclose(f);
	if (err)
		return rw_fail(RW_EXIT_USAGE, "apply: %s: %s", path, strerror(-err));

	err = rw_ctl_call(rw_g.socket, "apply", source, buf, len, &reply);
	free(buf);
	if (err == -ENOENT || err == -ECONNREFUSED)
		return no_agent(err);
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
		json_array_foreach(changes, i, line)
			printf("  %s\n", json_string_value(line));
	}
	json_decref(reply);
	return ret;
}
