// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* main.c: `runwall [OPTIONS] COMMAND [ARGS]`: the global options (before or after the command),
 * the command table, each command's own options parsed from its table (rw_cmd_options()), and
 * the one place where errors become output and exit codes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#include <jansson.h>

#include "commands.h"
#include "ctl.h"
#include "datapath.h"
#include "ipaddr.h"
#include "log.h"

struct rw_globals rw_g = {
	.bpffs = RW_DEFAULT_BPFFS,
	.socket = RW_DEFAULT_SOCKET,
};

/* The commands, in the order `runwall help` lists them. A new command: its file, and one line. */
static const struct rw_cmd *const commands[] = {
	&rw_cmd_agent,	  &rw_cmd_apply, &rw_cmd_status,  &rw_cmd_map,
	&rw_cmd_counters, &rw_cmd_drops, &rw_cmd_explain, &rw_cmd_replay,
	&rw_cmd_requests, &rw_cmd_view,	 &rw_cmd_detach,
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

int rw_fail(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (rw_g.json) {
		json_t *o = json_pack("{s:b, s:s, s:i}", "ok", 0, "error", msg, "exit", code);
		char *s = json_dumps(o, JSON_COMPACT);

		printf("%s\n", s ? s : "{\"ok\":false}");
		free(s);
		json_decref(o);
	} else {
		fprintf(stderr, "runwall: %s\n", msg);
	}
	return code;
}

void rw_cmd_help(const struct rw_cmd *cmd, FILE *f)
{
	fprintf(f, "Usage: runwall %s\n  %s\n", cmd->grammar, cmd->summary);
	if (cmd->options)
		fprintf(f, "\n%s", cmd->options);
	fprintf(f,
		"\nGlobal options (before or after COMMAND): --bpffs DIR, --socket PATH, -j|--json, "
		"-v|--verbose.\n");
}

int rw_cmd_usage_error(const struct rw_cmd *cmd, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rw_fail(RW_EXIT_USAGE, "%s: %s (usage: runwall %s)", cmd->name, msg, cmd->grammar);
}

int rw_cmd_options(const struct rw_cmd *cmd, int argc, char **argv, const struct rw_cmd_opt *opts)
{
	struct option longs[RW_CMD_OPTS_MAX + 2] = {0};
	char shorts[2 * RW_CMD_OPTS_MAX + 2] = "", *at = shorts;
	const struct rw_cmd_opt *o;
	size_t n = 0;
	int c, ret;

	/* A long option's val is 256 + its line, beyond any letter, or its letter. */
	for (o = opts; o->name && n < RW_CMD_OPTS_MAX; o++, n++) {
		bool value = o->str || o->set;

		longs[n] = (struct option){o->name, value ? required_argument : no_argument, NULL,
					   o->letter ?: 256 + (int)n};
		if (o->letter) {
			*at++ = o->letter;
			if (value)
				*at++ = ':';
		}
	}
	longs[n] = (struct option){"help", no_argument, NULL, 'h'};
	*at = 'h';
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		if (c >= 256)
			o = &opts[c - 256];
		else /* a letter; 'h' and '?' find the end of the table */
			for (o = opts; o->name && o->letter != c; o++)
				;
		if (!o->name)
			return rw_cmd_option_end(cmd, c, argv);
		if (o->flag)
			*o->flag = !o->unset;
		if (o->str)
			*o->str = optarg;
		ret = o->set ? o->set(cmd, o, optarg) : 0;
		if (ret)
			return ret;
	}
	return -1;
}

int rw_cmd_ip_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val)
{
	if (rw_ip_parse(val, o->data))
		return rw_fail(RW_EXIT_USAGE, "%s --%s: '%s' is not an IPv4 or IPv6 address",
			       cmd->name, o->name, val);
	return 0;
}

int rw_cmd_option_end(const struct rw_cmd *cmd, int opt, char **argv)
{
	if (opt == 'h') {
		rw_cmd_help(cmd, stdout);
		return RW_EXIT_OK;
	}
	return rw_cmd_usage_error(cmd, "bad option '%s'", argv[optind - 1]);
}

/* The library's log lines (the agent's log among them) go to stderr. */
static void print_stderr(enum rw_log_level level, const char *line)
{
	fputs(line, stderr);
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: runwall [OPTIONS] COMMAND [ARGS] [OPTIONS]\n\n"
		"OPTIONS := { --bpffs DIR | --socket PATH | -j|--json | -v|--verbose | -h|--help }\n"
		"  --bpffs DIR    pinned maps and links (default %s)\n"
		"  --socket PATH  the agent's control socket (default %s)\n"
		"  -j, --json     JSON on stdout, errors included\n"
		"  -v, --verbose  more log lines (-vv: libbpf's debug too)\n"
		"Global options go before or after COMMAND (`runwall status --socket S -j`); `--`\n"
		"ends them.\n\n"
		"COMMAND :=\n",
		RW_DEFAULT_BPFFS, RW_DEFAULT_SOCKET);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-9s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(f, "\nGrammar:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  runwall %s\n", commands[i]->grammar);
	fprintf(f,
		"\n`runwall help COMMAND` for one command. Exit codes: 0 ok, 1 refused or not found, "
		"2 usage or no agent.\n");
}

static const struct rw_cmd *find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (!strcmp(commands[i]->name, name))
			return commands[i];
	return NULL;
}

/* Take the global options out of argv, wherever they are, as kubectl and bpftool users expect;
 * argv keeps the command and its own arguments in order. Before the command the short forms
 * -b DIR, -s PATH and -h count too; after it only the long forms and -j/-v (commands have short
 * options of their own: explain's -s is --sport), and -h/--help is the command's. "--" ends the
 * global options; it stays for the command. Returns the new argc, or -1 after a usage error.
 */
static int take_globals(int argc, char **argv, bool *help)
{
	bool seen_cmd = false;
	int out = 1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		const char **dst = NULL;

		if (!strcmp(a, "--")) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (!strcmp(a, "--bpffs") || (!seen_cmd && !strcmp(a, "-b")))
			dst = &rw_g.bpffs;
		else if (!strcmp(a, "--socket") || (!seen_cmd && !strcmp(a, "-s")))
			dst = &rw_g.socket;
		else if (!strncmp(a, "--bpffs=", 8))
			rw_g.bpffs = a + 8;
		else if (!strncmp(a, "--socket=", 9))
			rw_g.socket = a + 9;
		else if (!strcmp(a, "--json"))
			rw_g.json = true;
		else if (!strcmp(a, "--verbose"))
			rw_g.verbose++;
		else if (!seen_cmd && (!strcmp(a, "-h") || !strcmp(a, "--help")))
			*help = true;
		else if (a[0] == '-' && a[1] && strspn(a + 1, "jv") == strlen(a + 1))
			for (const char *c = a + 1; *c; c++)
				*c == 'j' ? (void)(rw_g.json = true) : (void)rw_g.verbose++;
		else if (!seen_cmd && a[0] == '-' && a[1])
			return rw_fail(RW_EXIT_USAGE, "unknown option '%s' (try `runwall help`)",
				       a),
			       -1;
		else {
			seen_cmd = true;
			argv[out++] = argv[i];
			continue;
		}
		if (dst) {
			val = i + 1 < argc ? argv[++i] : NULL;
			if (!val || !*val)
				return rw_fail(RW_EXIT_USAGE, "%s needs a value", a), -1;
			*dst = val;
		}
	}
	argv[out] = NULL;
	return out;
}

int main(int argc, char **argv)
{
	const struct rw_cmd *cmd;
	bool help = false;

	argc = take_globals(argc, argv, &help);
	if (argc < 0)
		return RW_EXIT_USAGE;
	rw_log_verbosity = RW_LOG_INFO + rw_g.verbose;
	rw_log_set_print(print_stderr);
	rw_log_setup_libbpf();
	if (help) {
		usage(stdout);
		return RW_EXIT_OK;
	}
	if (argc < 2) {
		usage(stderr);
		return RW_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc < 3) {
			usage(stdout);
			return RW_EXIT_OK;
		}
		cmd = find(argv[2]);
		if (!cmd)
			return rw_fail(RW_EXIT_USAGE, "help: unknown command '%s'", argv[2]);
		rw_cmd_help(cmd, stdout);
		return RW_EXIT_OK;
	}
	cmd = find(argv[1]);
	if (!cmd)
		return rw_fail(RW_EXIT_USAGE, "unknown command '%s' (try `runwall help`)", argv[1]);
	/* Commands parse their own options with getopt; optind = 0 makes glibc start afresh. Its
	 * own messages are off: a usage error says the same once, in JSON too with -j.
	 */
	optind = 0;
	opterr = 0;
	return cmd->func(argc - 1, argv + 1);
}
