// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_apply.c: `runwall apply`: push a policy snapshot to the agent. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
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

static const char apply_usage[] =
	"apply [--staged] {FILE|- | --run FILE|- | --delete-run ID} [--base REV] "
	"[--revision REV] | apply --unstage";
static const char apply_options[] =
	"  FILE|-             the whole snapshot (docs/policy.md); - reads standard input\n"
	"  --run FILE|-       one run, added or replaced (a snapshot's runs[] element)\n"
	"  --delete-run ID    one run removed\n"
	"  --base REV         a run change applies only to this revision in force\n"
	"                     (default: the revision in force)\n"
	"  --revision REV     the revision a run change makes (default: base + 1)\n"
	"  --staged           hold FILE (or the snapshot in force with --run FILE) beside\n"
	"                     the policy in force, never enforced: each event is judged\n"
	"                     under it too; promoting it is applying FILE\n"
	"  --unstage          drop the staged snapshot\n";

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

/* A revision given on the command line: a decimal number from 1 (0 is the default's). */
static int revision_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *s)
{
	unsigned long long *v = o->data;
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] < '1' || s[0] > '9')
		return rw_cmd_usage_error(cmd, "--%s: '%s' is not a revision", o->name, s);
	return 0;
}

/* "staged revision N from SOURCE (in force M), never enforced", then its changes. */
static void print_staged(json_t *st)
{
	size_t i;
	json_t *line;

	printf("staged revision %lld from %s, loaded privately in %.1f ms; never enforced\n",
	       (long long)json_integer_value(json_object_get(st, "revision")),
	       json_string_value(json_object_get(st, "source")) ?: "",
	       json_real_value(json_object_get(st, "load_ms")));
	json_array_foreach(json_object_get(st, "changes"), i, line)
		printf("  %s\n", json_string_value(line));
}

/* `apply --unstage`: the staged snapshot dropped. */
static int unstage_call(void)
{
	json_t *reply = NULL, *dropped;
	int err = rw_ctl_call(rw_g.socket, "unstage", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &reply);

	if (rw_ctl_no_agent(err))
		return no_agent(err);
	if (err)
		return rw_fail(RW_EXIT_USAGE, "apply --unstage: talking to the agent on %s: %s",
			       rw_g.socket, strerror(-err));
	if (!json_is_true(json_object_get(reply, "ok"))) {
		err = rw_fail(RW_EXIT_REFUSED, "apply --unstage: %s",
			      json_string_value(json_object_get(reply, "error"))
				      ?: "refused (an older agent?)");
		json_decref(reply);
		return err;
	}
	dropped = json_object_get(reply, "dropped");
	if (rw_g.json)
		print_json(reply);
	else if (json_is_integer(dropped))
		printf("dropped staged revision %lld\n", (long long)json_integer_value(dropped));
	else
		printf("nothing was staged\n");
	json_decref(reply);
	return RW_EXIT_OK;
}

static int cmd_apply(int argc, char **argv)
{
	const char *path = NULL, *source, *del_id = NULL, *verb;
	unsigned long long base = 0, revision = 0;
	json_t *reply = NULL, *changes;
	char *buf = NULL, arg[PATH_MAX + 64];
	size_t len = 0;
	bool staged = false, unstage = false;
	int err, ret;
	const struct rw_cmd_opt opts[] = {{"run", .str = &path},
					  {"delete-run", .str = &del_id},
					  {"base", .set = revision_arg, .data = &base},
					  {"revision", .set = revision_arg, .data = &revision},
					  {"staged", .flag = &staged},
					  {"unstage", .flag = &unstage},
					  {}};

	ret = rw_cmd_options(&rw_cmd_apply, argc, argv, opts);
	if (ret >= 0)
		return ret;
	verb = path ? "apply-run" : del_id ? "delete-run" : "apply";
	if (path && del_id)
		return rw_cmd_usage_error(&rw_cmd_apply,
					  "--run and --delete-run: one change at a time");
	if (unstage && (staged || path || del_id || base || revision || optind < argc))
		return rw_cmd_usage_error(&rw_cmd_apply, "--unstage takes nothing else");
	if (staged && (del_id || base || revision))
		return rw_cmd_usage_error(
			&rw_cmd_apply, "--staged takes FILE or --run FILE (staged on the revision "
				       "in force)");
	if (unstage)
		return unstage_call();
	if (!path && !del_id) {
		if (base || revision)
			return rw_cmd_usage_error(
				&rw_cmd_apply,
				"--base and --revision are for --run and --delete-run "
				"(a snapshot carries its revision)");
		if (optind != argc - 1)
			return rw_cmd_usage_error(&rw_cmd_apply,
						  "one FILE, or - for standard input");
		path = argv[optind++];
	}
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_apply, "unexpected '%s'", argv[optind]);
	if (path && path[0] == '\0')
		return rw_cmd_usage_error(&rw_cmd_apply, "an empty FILE");
	if (del_id && (!del_id[0] || strpbrk(del_id, " \n")))
		return rw_cmd_usage_error(&rw_cmd_apply, "--delete-run: '%s' is not a run id",
					  del_id);
	source = path && strcmp(path, "-") ? path : "<stdin>";
	if (path && strchr(source, '\n'))
		return rw_cmd_usage_error(&rw_cmd_apply, "FILE: a name with a newline");
	if (path) {
		err = rw_read_file(path, RW_CTL_MAX_BODY, &buf, &len);
		if (err)
			return rw_fail(RW_EXIT_USAGE, "apply: %s: %s", path, strerror(-err));
	}
	/* The socket's run changes: "BASE REVISION SOURCE|ID", 0 for the agent's default. */
	if (staged)
		verb = strcmp(verb, "apply") ? "stage-run" : "stage";
	if (strcmp(verb, "apply") && !staged)
		snprintf(arg, sizeof(arg), "%llu %llu %s", base, revision,
			 del_id ? del_id : source);
	else
		snprintf(arg, sizeof(arg), "%s", source);

	err = rw_ctl_call(rw_g.socket, verb, arg, buf, len, RW_CTL_APPLY_TIMEOUT_MS, &reply);
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
	} else if (staged) {
		print_staged(json_object_get(reply, "staged"));
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

RW_COMMAND(apply,
	   .summary = "push a policy snapshot, or one run's change, to the agent; or stage one",
	   .grammar = apply_usage, .options = apply_options);
