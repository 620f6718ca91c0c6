// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_requests.c: `runwall requests`: the network-access requests the agent raised (the `requests`
 * request on its control socket; the same list as its /api/requests).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>

#include "cli_text.h"
#include "commands.h"
#include "ctl.h"

static const char requests_usage[] = "requests [--run ID]";
static const char requests_options[] = "  --run ID    that run's requests only\n";

static int cmd_requests(int argc, char **argv)
{
	static const char *const heads[] = {"FIRST SEEN", "RUN",	 "GEN",
					    "POD",	  "DESTINATION", "COUNT",
					    "STATE",	  "ATTEMPTS",	 "LAST ERROR"};
	const char *run = NULL, *url;
	struct rw_table t;
	json_t *reply = NULL, *list, *item, *stats;
	size_t i, shown = 0;
	const struct rw_cmd_opt opts[] = {{"run", .str = &run}, {}};
	int err;

	err = rw_cmd_options(&rw_cmd_requests, argc, argv, opts);
	if (err >= 0)
		return err;
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_requests, "unexpected argument '%s'",
					  argv[optind]);
	err = rw_ctl_call(rw_g.socket, "requests", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &reply);
	if (err)
		return rw_fail(RW_EXIT_USAGE, "requests: no agent on %s (%s)", rw_g.socket,
			       strerror(-err));
	if (!json_is_true(json_object_get(reply, "ok"))) {
		const char *e = json_string_value(json_object_get(reply, "error"));
		int ret = rw_fail(RW_EXIT_REFUSED, "requests: %s", e ? e : "the agent refused");

		json_decref(reply);
		return ret;
	}
	list = json_object_get(reply, "requests");
	if (run) {
		json_t *kept = json_array();

		json_array_foreach(
			list, i,
			item) if (!strcmp(json_string_value(json_object_get(item, "run")) ?: "",
					  run)) json_array_append(kept, item);
		json_object_set_new(reply, "requests", kept);
		list = kept;
	}
	if (rw_g.json) {
		rw_cli_json_print(reply);
		return RW_EXIT_OK;
	}
	url = json_string_value(json_object_get(reply, "url"));
	stats = json_object_get(reply, "stats");
	if (!url) {
		printf("network-access requests: off (the agent runs without --access-request-url)\n");
		json_decref(reply);
		return RW_EXIT_OK;
	}
	printf("network-access requests to %s: %lld queued, %lld sent, %lld pending, %lld failed, "
	       "%lld dropped (queue full), %lld displaced (for another run's share), %lld retries\n",
	       url, rw_cli_jint(stats, "queued"), rw_cli_jint(stats, "sent"),
	       rw_cli_jint(stats, "pending"), rw_cli_jint(stats, "failed"),
	       rw_cli_jint(stats, "dropped"), rw_cli_jint(stats, "displaced"),
	       rw_cli_jint(stats, "retries"));
	rw_table_init(&t, 9, heads, RW_TABLE_RIGHT(2) | RW_TABLE_RIGHT(5) | RW_TABLE_RIGHT(7));
	json_array_foreach(list, i, item)
	{
		const char *le = json_string_value(json_object_get(item, "last_error"));
		char dst[80];

		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(item, "first_seen")));
		rw_table_cell(&t, "%s", json_string_value(json_object_get(item, "run")));
		rw_table_cell(&t, "%lld", rw_cli_jint(item, "generation"));
		rw_table_cell(&t, "%s", json_string_value(json_object_get(item, "pod")));
		rw_cli_host_port(json_string_value(json_object_get(item, "destination")),
				 rw_cli_jint(item, "port"), dst, sizeof(dst));
		rw_table_cell(&t, "%s/%s", dst,
			      json_string_value(json_object_get(item, "protocol")));
		rw_table_cell(&t, "%lld", rw_cli_jint(item, "count"));
		rw_table_cell(&t, "%s", json_string_value(json_object_get(item, "state")));
		rw_table_cell(&t, "%lld", rw_cli_jint(item, "attempts"));
		rw_table_cell(&t, "%s", le ? le : "");
		shown++;
	}
	if (shown)
		rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
	json_decref(reply);
	return RW_EXIT_OK;
}

RW_COMMAND(requests,
	   .summary = "the network-access requests the agent raised (--access-request-url)",
	   .grammar = requests_usage, .options = requests_options);
