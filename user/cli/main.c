// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* main.c: `runwall [OPTIONS] COMMAND [ARGS]`: global options, then dispatch by name. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "commands.h"
#include "ctl.h"
#include "datapath.h"
#include "log.h"

struct rw_globals rw_g = {
	.bpffs = RW_DEFAULT_BPFFS,
	.socket = RW_DEFAULT_SOCKET,
};

static const struct command {
	const char *name;
	int (*func)(int argc, char **argv);
	const char *grammar;
	const char *summary;
} commands[] = {
	{ "agent", cmd_agent, "agent [--policy FILE] [--ifprefix LIST] [--attach-mode auto|tcx|tc] "
	  "[--resync SECONDS] [--health ADDR:PORT]", "run the node agent (the DaemonSet's process)" },
	{ "apply", cmd_apply, "apply FILE|-", "push a policy snapshot to the agent" },
	{ "status", cmd_status, "status", "is this node enforcing, and what" },
	{ "map", cmd_map, "map { list | dump MAP | lookup MAP KEY }", "read the pinned maps" },
	{ "counters", cmd_counters, "counters [--run ID]", "exact verdict counters" },
	{ "drops", cmd_drops, "drops [--all] [--run ID] [--pod IP] [--reason REASON] "
	  "[--dst IP[:PORT]] [--count N] [--timeout SEC]", "follow live verdicts" },
	{ "explain", cmd_explain, "explain {--pod IP | --run ID} DST PORT [tcp|udp] [--ingress] "
	  "[--sport N] [--flags syn|ack|synack] [--policy FILE]",
	  "why a packet would be allowed or refused, by the real program" },
	{ "detach", cmd_detach, "detach", "remove everything runwall attached and pinned" },
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

static void usage(FILE *f)
{
	fprintf(f, "Usage: runwall [OPTIONS] COMMAND [ARGS]\n\n"
		   "OPTIONS := { --bpffs DIR | --socket PATH | -j|--json | -v|--verbose | -h|--help }\n"
		   "  --bpffs DIR    pinned maps and links (default %s)\n"
		   "  --socket PATH  the agent's control socket (default %s)\n\n"
		   "COMMAND :=\n", RW_DEFAULT_BPFFS, RW_DEFAULT_SOCKET);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nGrammar:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  runwall %s\n", commands[i].grammar);
	fprintf(f, "\n`runwall help COMMAND` for one command. Exit codes: 0 ok, 1 refused or not found, "
		   "2 usage or no agent.\n");
}

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bpffs", required_argument, NULL, 'b' },
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const struct command *cmd;
	int c;

	/* "+": stop at the command, whose own options follow it. */
	while ((c = getopt_long(argc, argv, "+b:s:jvh", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			rw_g.bpffs = optarg;
			break;
		case 's':
			rw_g.socket = optarg;
			break;
		case 'j':
			rw_g.json = true;
			break;
		case 'v':
			rw_g.verbose++;
			break;
		case 'h':
			usage(stdout);
			return RW_EXIT_OK;
		default:
			usage(stderr);
			return RW_EXIT_USAGE;
		}
	}
	rw_log_verbosity = RW_LOG_INFO + rw_g.verbose;
	rw_log_setup_libbpf();
	if (optind >= argc) {
		usage(stderr);
		return RW_EXIT_USAGE;
	}
	if (!strcmp(argv[optind], "help")) {
		if (optind + 1 >= argc) {
			usage(stdout);
			return RW_EXIT_OK;
		}
		cmd = find(argv[optind + 1]);
		if (!cmd)
			return rw_fail(RW_EXIT_USAGE, "help: unknown command '%s'", argv[optind + 1]);
		printf("Usage: runwall %s\n  %s\n", cmd->grammar, cmd->summary);
		return RW_EXIT_OK;
	}
	cmd = find(argv[optind]);
	if (!cmd)
		return rw_fail(RW_EXIT_USAGE, "unknown command '%s' (try `runwall help`)",
			       argv[optind]);
	/* Commands parse their own options with getopt; optind = 0 makes glibc start afresh. */
	c = optind;
	optind = 0;
	return cmd->func(argc - c, argv + c);
}
