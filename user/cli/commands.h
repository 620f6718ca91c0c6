/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* commands.h: the runwall subcommands, the options every one of them shares, and the table that
 * says a command's own options.
 */
#ifndef RUNWALL_COMMANDS_H
#define RUNWALL_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>
#include <getopt.h>

#include "util.h" /* RW_EXIT_* */

struct rw_globals {
	const char *bpffs;  /* --bpffs: the pin folder */
	const char *socket; /* --socket: the agent's control socket */
	bool json;	    /* -j/--json: JSON on stdout, errors included */
	int verbose;	    /* -v, -vv */
};

extern struct rw_globals rw_g;

/* One command, bpftool-style: each lives in its own file (user/cli/cli_NAME.c) with its usage,
 * its options and its handler, defined there by RW_COMMAND() below, and is one line of the
 * table in main.c. The usage text is written here once: `runwall help NAME`, `runwall NAME
 * --help` and every usage error print it from this struct.
 */
struct rw_cmd {
	const char *name;
	const char *summary; /* one line for `runwall help` */
	const char *grammar; /* "drops [--all] [--run ID] ...", after "runwall " */
	const char *options; /* "  --run ID   ...\n" lines, or NULL */
	/* Takes its own arguments (argv[0] is the command's name; the global options are taken
	 * out wherever they were) and returns an exit code.
	 */
	int (*func)(int argc, char **argv);
};

/* Defines `const struct rw_cmd rw_cmd_NAME`: the command "NAME", run by cmd_NAME(), its other
 * fields given by name. Each cli_NAME.c holds its NAME_usage (and NAME_options) text and ends
 * with RW_COMMAND(NAME, .summary = "...", .grammar = NAME_usage, .options = NAME_options);
 * a command without options leaves .options out (NULL). `grep -rn 'RW_COMMAND(drops'` finds
 * where rw_cmd_drops is defined.
 */
#define RW_COMMAND(NAME, ...) \
	const struct rw_cmd rw_cmd_##NAME = {.name = #NAME, .func = cmd_##NAME, __VA_ARGS__}

extern const struct rw_cmd rw_cmd_agent, rw_cmd_apply, rw_cmd_status, rw_cmd_map, rw_cmd_counters,
	rw_cmd_drops, rw_cmd_explain, rw_cmd_replay, rw_cmd_detach, rw_cmd_requests, rw_cmd_view;

/* The command's whole help: "Usage: runwall GRAMMAR", the summary, the options. */
void rw_cmd_help(const struct rw_cmd *cmd, FILE *f);

/* A usage error: "NAME: MESSAGE (usage: runwall GRAMMAR)" through rw_fail(), exit 2. */
int rw_cmd_usage_error(const struct rw_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* One of a command's own options, a line of the table rw_cmd_options() reads: --NAME, and -LETTER
 * too where LETTER is set. An option with neither str nor set takes no value: it sets *flag (to
 * false where unset is set). One with a value keeps it in *str, gives it to set() (which reports
 * a refused value itself and returns the exit code, or 0), or both; *flag then says it was given.
 */
struct rw_cmd_opt {
	const char *name;
	char letter;	  /* the short form, or 0: the long form only */
	bool *flag;	  /* set when the option is given */
	bool unset;	  /* *flag is set to false instead */
	const char **str; /* the value, as it is */
	int (*set)(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val);
	void *data; /* where set() puts the value */
};

/* The command's options by getopt_long(), as its table `opts` (ended by {0}) says; -h and --help
 * print the command's help. {"json", 'j', .flag = &rw_g.json} takes -j where main.c did not: in a
 * cluster of the command's short options (`drops -aj`). Returns -1 to go on, the arguments that
 * are not options from argv[optind]; else the exit code: RW_EXIT_OK after the help, a refused
 * value's, or RW_EXIT_USAGE after "bad option" through rw_cmd_usage_error().
 */
#define RW_CMD_OPTS_MAX 16 /* lines of a command's table */
int rw_cmd_options(const struct rw_cmd *cmd, int argc, char **argv, const struct rw_cmd_opt *opts);

/* --NAME's value an IPv4 or IPv6 address, in the struct rw_ip at o->data; else "CMD --NAME:
 * 'VAL' is not an IPv4 or IPv6 address" through rw_fail(), exit 2. A set() for the table.
 */
int rw_cmd_ip_arg(const struct rw_cmd *cmd, const struct rw_cmd_opt *o, const char *val);

/* The last case of `runwall agent`'s getopt_long() loop, for an option its own cases did not
 * take: -h prints the command's help and gives RW_EXIT_OK; any other is "bad option" through
 * rw_cmd_usage_error() (RW_EXIT_USAGE). `opt` is what getopt_long() returned.
 */
int rw_cmd_option_end(const struct rw_cmd *cmd, int opt, char **argv);

/* An error for people (stderr) or, with -j, as {"ok":false,"error":"..."} on stdout. Returns
 * `code` so that commands can `return rw_fail(RW_EXIT_USAGE, ...)`.
 */
int rw_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* RUNWALL_COMMANDS_H */
