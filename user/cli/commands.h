/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* commands.h: the runwall subcommands and the options every one of them shares. */
#ifndef RUNWALL_COMMANDS_H
#define RUNWALL_COMMANDS_H

#include <stdbool.h>

/* Exit codes, for every command (README "Exit codes"). */
#define RW_EXIT_OK		0	/* done / found / applied */
#define RW_EXIT_REFUSED		1	/* refused, not found, not ready, a check failed */
#define RW_EXIT_USAGE		2	/* bad usage, or no agent where one is needed */

struct rw_globals {
	const char *bpffs;	/* --bpffs: the pin folder */
	const char *socket;	/* --socket: the agent's control socket */
	bool json;		/* -j/--json: JSON on stdout, errors included */
	int verbose;		/* -v, -vv */
};

extern struct rw_globals rw_g;

/* Each takes its own arguments (argv[0] is the command's name) and returns an exit code. */
int cmd_agent(int argc, char **argv);
int cmd_apply(int argc, char **argv);
int cmd_detach(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_counters(int argc, char **argv);
int cmd_drops(int argc, char **argv);
int cmd_explain(int argc, char **argv);

/* An error for people (stderr) or, with -j, as {"ok":false,"error":"..."} on stdout. Returns
 * `code` so that commands can `return rw_fail(RW_EXIT_USAGE, ...)`.
 */
int rw_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* RUNWALL_COMMANDS_H */
