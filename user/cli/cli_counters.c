// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_counters.c: `runwall counters [--run ID]`: the exact verdict counters of the node and of
 * each live run, per direction and reason, next to what happened to the events.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_text.h"
#include "cli_counters_fmt.h"
#include "cli_pins.h"
#include "commands.h"
#include "ctl.h"

static const char counters_usage[] = "counters [--run ID]";
static const char counters_options[] =
	"  --run ID    one run's counters (its pods' packets only)\n";

/* Appends ip to buf at *off, after a comma when buf already holds a pod. */
static void pods_append(char *buf, size_t len, size_t *off, const char *ip)
{
	int n = snprintf(buf + *off, len - *off, "%s%s", *off ? "," : "", ip);

	*off += n < 0 ? 0 : (size_t)n;
}

static void pods_str(const struct rw_live_run *r, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < r->n_pods && off < len; i++) {
		rw_cli_ip(r->pods[i], ip, sizeof(ip));
		pods_append(buf, len, &off, ip);
	}
	/* Then its IPv6 pods. */
	for (size_t i = 0; i < r->n_pods6 && off < len; i++) {
		rw_cli_ip6(r->pods6[i], ip, sizeof(ip));
		pods_append(buf, len, &off, ip);
	}
}

static json_t *agent_events(json_t *status)
{
	json_t *ev = status ? json_object_get(status, "events") : NULL;

	if (!json_is_object(ev))
		return json_null();
	return json_pack("{s:b, s:O, s:O, s:O}", "running", 1, "subscribers",
			 json_object_get(ev, "subscribers") ?: json_null(), "delivered",
			 json_object_get(ev, "delivered") ?: json_null(), "skipped",
			 json_object_get(ev, "skipped") ?: json_null());
}

static int cmd_counters(int argc, char **argv)
{
	struct rw_live_run *runs = NULL;
	struct rw_counters node;
	struct rw_datapath dp;
	struct rw_config cfg;
	const char *run = NULL;
	json_t *status = NULL;
	size_t n_runs = 0;
	char err[512];
	int ret, want = -1;
	const struct rw_cmd_opt opts[] = {
		{"run", 'r', .str = &run}, {"json", 'j', .flag = &rw_g.json}, {}};

	ret = rw_cmd_options(&rw_cmd_counters, argc, argv, opts);
	if (ret >= 0)
		return ret;
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_counters, "unexpected '%s'", argv[optind]);

	ret = rw_cli_open(&dp, rw_g.bpffs, err, sizeof(err));
	if (ret)
		return rw_fail(ret == -ENOENT ? RW_EXIT_USAGE : RW_EXIT_REFUSED, "%s", err);
	ret = rw_config_read(&dp, &cfg);
	if (!ret)
		ret = rw_live_runs(&dp, &runs, &n_runs);
	if (!ret)
		ret = rw_counters_read(&dp, 0, &node);
	if (ret) {
		ret = rw_fail(RW_EXIT_REFUSED, "reading the pinned maps: %s", strerror(-ret));
		goto cleanup;
	}
	if (run) {
		want = rw_live_run_find(runs, n_runs, run, 0);
		if (want < 0) {
			char names[400] = "";
			size_t off = 0;

			for (size_t i = 0; i < n_runs && off < sizeof(names); i++)
				off += snprintf(names + off, sizeof(names) - off, "%s%s",
						i ? ", " : "", runs[i].id);
			ret = rw_fail(RW_EXIT_REFUSED,
				      "counters: no run '%s' in the live slot%s%s%s", run,
				      RW_STATE_READY(cfg.state) ? "" : " (the node is not ready)",
				      n_runs ? "; live runs: " : "", names);
			goto cleanup;
		}
	}
	/* What the agent did with the events, when one runs; counters never need it. */
	if (rw_ctl_call(rw_g.socket, "status", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &status))
		status = NULL;

	if (rw_g.json) {
		json_int_t rev = RW_STATE_READY(cfg.state) ? RW_STATE_REVISION(cfg.state) : 0;
		json_t *arr = json_array(), *o;

		for (size_t i = 0; i < n_runs; i++) {
			struct rw_counters c;
			json_t *v;

			if (want >= 0 && (size_t)want != i)
				continue;
			if (rw_counters_read(&dp, runs[i].idx, &c))
				memset(&c, 0, sizeof(c));
			v = rw_cli_counters_json(&c);
			o = json_pack("{s:s, s:i, s:i}", "id", runs[i].id, "idx", (int)runs[i].idx,
				      "gen", (int)runs[i].gen);
			json_object_update(o, v);
			json_decref(v);
			json_array_append_new(arr, o);
		}
		o = json_pack("{s:b, s:b, s:I, s:o, s:o, s:o}", "ok", 1, "ready",
			      (int)RW_STATE_READY(cfg.state), "revision", rev, "node",
			      rw_cli_counters_json(&node), "runs", arr, "agent",
			      agent_events(status));
		rw_cli_json_print(o);
		ret = RW_EXIT_OK;
		goto cleanup;
	}

	if (want < 0) {
		printf("node: every sandbox veth (%s)\n",
		       RW_STATE_READY(cfg.state) ? "ready" : "NOT READY");
		rw_cli_counters_print(stdout, &node, "  ");
		if (status) {
			json_t *ev = json_object_get(status, "events");
			long long subs = rw_cli_jint(ev, "subscribers");
			long long delivered = rw_cli_jint(ev, "delivered");
			long long skipped = rw_cli_jint(ev, "skipped");

			printf("  agent: %lld events delivered to %lld subscriber%s, "
			       "%lld skipped\n",
			       delivered, subs, subs == 1 ? "" : "s", skipped);
		} else {
			printf("  agent: not running (%s)\n", rw_g.socket);
		}
	}
	for (size_t i = 0; i < n_runs; i++) {
		struct rw_counters c;
		char pods[256];

		if (want >= 0 && (size_t)want != i)
			continue;
		if (rw_counters_read(&dp, runs[i].idx, &c))
			memset(&c, 0, sizeof(c));
		pods_str(&runs[i], pods, sizeof(pods));
		printf("run %s (idx %u, gen %u, pods %s)\n", runs[i].id, runs[i].idx, runs[i].gen,
		       pods);
		rw_cli_counters_print(stdout, &c, "  ");
	}
	ret = RW_EXIT_OK;
cleanup:
	json_decref(status);
	rw_live_runs_free(runs, n_runs);
	rw_datapath_close(&dp);
	return ret;
}

RW_COMMAND(counters, .summary = "exact verdict counters, per reason and per run",
	   .grammar = counters_usage, .options = counters_options);
