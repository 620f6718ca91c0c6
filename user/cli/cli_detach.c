// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_detach.c: `runwall detach`: take runwall off every hook and unpin its maps. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <jansson.h>

#include "attach.h"
#include "commands.h"
#include "ctl.h"
#include "datapath.h"

static const char detach_usage[] = "detach";

/* An agent that still runs would attach again at its next resync: ask it to leave first. */
static void stop_agent(void)
{
	json_t *reply = NULL;
	struct stat st;

	if (rw_ctl_call(rw_g.socket, "shutdown", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &reply))
		return;
	json_decref(reply);
	for (int i = 0; i < 100 && stat(rw_g.socket, &st) == 0; i++)
		usleep(50000);
}

static int cmd_detach(int argc, char **argv)
{
	int layout, links, maps;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		rw_cmd_help(&rw_cmd_detach, stdout);
		return RW_EXIT_OK;
	}
	if (argc != 1)
		return rw_cmd_usage_error(&rw_cmd_detach, "takes no arguments; --bpffs and "
							  "--socket name the instance");
	layout = rw_datapath_pinned_layout(rw_g.bpffs);
	stop_agent();
	links = rw_detach_all(rw_g.bpffs);
	if (links < 0)
		return rw_fail(RW_EXIT_REFUSED, "detach: %s/%s: %s", rw_g.bpffs, RW_LINKS_DIR,
			       strerror(-links));
	maps = rw_datapath_unpin(rw_g.bpffs);
	if (maps < 0)
		return rw_fail(RW_EXIT_REFUSED, "detach: unpinning maps under %s: %s", rw_g.bpffs,
			       strerror(-maps));
	if (layout <= 0 && maps == 0)
		return rw_fail(RW_EXIT_REFUSED, "detach: nothing of runwall's is pinned at %s",
			       rw_g.bpffs);
	if (rw_g.json)
		printf("{\"ok\":true,\"bpffs\":\"%s\",\"maps_unpinned\":%d}\n", rw_g.bpffs, maps);
	else
		printf("detached: programs taken off every hook runwall held, %d maps unpinned "
		       "from %s\n",
		       maps, rw_g.bpffs);
	return RW_EXIT_OK;
}

RW_COMMAND(detach, .summary = "remove everything runwall attached and pinned",
	   .grammar = detach_usage);
