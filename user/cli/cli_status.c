// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* cli_status.c: `runwall status`: is this node enforcing, which policy, on which veths, how
 * full the maps are, what happened to the events. With the agent its own view is merged in;
 * without it everything still comes from the pinned maps and the hooks themselves.
 *
 * Exit codes: 0 the kernel enforces a policy (ready), 1 not ready, 2 nothing pinned at --bpffs
 * and no agent.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <bpf/bpf.h>

#include "attach.h"
#include "cli_text.h"
#include "cli_pins.h"
#include "commands.h"
#include "ctl.h"
#include "eventfmt.h"
#include "status.h"

static const char status_usage[] = "status";

struct sctx {
	struct rw_datapath dp;
	const char *bpffs;
	json_t *agent; /* the agent's status reply, NULL without one */
	int agent_err;
};

/* "tcx first", "tc first, 1 after", "tcx NOT FIRST (2 others)", "NOT ATTACHED" */
static void hook_str(json_t *h, char *buf, size_t len)
{
	long long others = rw_cli_jint(h, "others");
	const char *mode = json_string_value(json_object_get(h, "mode")) ?: "?";

	if (!json_is_true(json_object_get(h, "attached")))
		snprintf(buf, len, "NOT ATTACHED");
	else if (json_is_true(json_object_get(h, "first")) && others)
		snprintf(buf, len, "%s first, %lld after", mode, others);
	else if (json_is_true(json_object_get(h, "first")))
		snprintf(buf, len, "%s first", mode);
	else
		snprintf(buf, len, "%s NOT FIRST (%lld others)", mode, others);
}

/* The node: ready and the revision in force, the lease, the last apply. */
static void print_node(json_t *o, json_t *ag)
{
	const char *since = json_string_value(json_object_get(o, "ready_since"));
	const char *applied = json_string_value(json_object_get(o, "applied"));

	if (json_is_true(json_object_get(o, "ready")))
		printf("node:       READY, enforcing revision %llu%s%s\n",
		       (unsigned long long)rw_cli_jint(o, "revision"), since ? " since " : "",
		       since ? since : "");
	else
		printf("node:       NOT READY: no policy applied, every sandbox packet is dropped "
		       "(not-ready)\n");
	if (json_is_object(json_object_get(o, "lease"))) {
		json_t *lease = json_object_get(o, "lease");
		long long left = rw_cli_jint(lease, "remaining_ms");

		if (json_is_true(json_object_get(lease, "expired")))
			printf("lease:      EXPIRED %lld ms ago: services and inbound only, the rest "
			       "is refused (lease-expired)\n",
			       -left);
		else
			printf("lease:      %lld ms left (until %s)\n", left,
			       json_string_value(json_object_get(lease, "deadline")));
	}
	if (applied) {
		json_t *ms = json_object_get(ag, "apply_ms");

		printf("last apply: %s", applied);
		if (json_is_number(ms) && json_number_value(ms) > 0)
			printf(" (%.1f ms)", json_number_value(ms));
		printf("\n");
	}
}

/* The agent's own lines (its policy source, PolicyWatch, the CNI chain), or why there is none. */
static void print_agent(struct sctx *c, json_t *ag)
{
	if (ag) {
		const char *pf = json_string_value(json_object_get(ag, "policy_file"));
		const char *le = json_string_value(json_object_get(ag, "last_error"));

		printf("agent:      running (socket %s, ifprefix %s, policy %s)\n", rw_g.socket,
		       json_string_value(json_object_get(ag, "ifprefix")) ?: "-",
		       pf ? pf : "from the socket only");
		printf("last error: %s\n", le ? le : "none");
		if (json_is_object(json_object_get(ag, "attach"))) {
			json_t *at = json_object_get(ag, "attach");

			printf("attach:     %lld failed, %lld retries, %lld veths waiting for a "
			       "retry\n",
			       rw_cli_jint(at, "failures"), rw_cli_jint(at, "retries"),
			       rw_cli_jint(at, "pending"));
		}
		if (json_is_object(json_object_get(ag, "policy_watch"))) {
			json_t *pw = json_object_get(ag, "policy_watch");
			json_t *age = json_object_get(pw, "last_message_age_ms");

			printf("watch:      %s %s; revision %lld received, %lld enforced; %lld "
			       "refused",
			       json_is_true(json_object_get(pw, "connected")) ? "following"
									      : "NOT CONNECTED to",
			       json_string_value(json_object_get(pw, "url")),
			       rw_cli_jint(pw, "revision_received"),
			       rw_cli_jint(pw, "revision_enforced"), rw_cli_jint(pw, "refusals"));
			if (json_is_integer(age))
				printf("; last message %lld ms ago", json_integer_value(age));
			printf("\n");
		}
		if (json_is_object(json_object_get(ag, "staged"))) {
			json_t *st = json_object_get(ag, "staged"), *line;
			size_t i;

			printf("staged:     revision %lld from %s since %s, never enforced: %lld "
			       "events judged, %lld differ (sampled by the event budget)\n",
			       rw_cli_jint(st, "revision"),
			       json_string_value(json_object_get(st, "source")) ?: "",
			       json_string_value(json_object_get(st, "since")) ?: "",
			       rw_cli_jint(st, "judged"), rw_cli_jint(st, "differences"));
			json_array_foreach(json_object_get(st, "changes"), i, line)
				printf("              %s\n", json_string_value(line));
		}
		if (json_is_object(json_object_get(ag, "cni"))) {
			json_t *cn = json_object_get(ag, "cni");
			json_t *w = json_object_get(cn, "last_repair_window_ms");

			if (json_is_true(json_object_get(cn, "chained")))
				printf("cni:        chained in %s/%s; %lld repairs",
				       json_string_value(json_object_get(cn, "conf_dir")),
				       json_string_value(json_object_get(cn, "file")),
				       rw_cli_jint(cn, "repairs"));
			else
				printf("cni:        NOT CHAINED: %s; %lld repairs",
				       json_string_value(json_object_get(cn, "why")) ?: "?",
				       rw_cli_jint(cn, "repairs"));
			if (json_is_integer(w))
				printf(" (the last after %lld ms without the entry)",
				       json_integer_value(w));
			printf("\n");
		}
	} else if (rw_ctl_no_agent(c->agent_err)) {
		printf("agent:      not running (enforcement continues from the pinned state; no "
		       "agent on %s)\n",
		       rw_g.socket);
	} else {
		printf("agent:      not answering on %s (%s); enforcement continues from the "
		       "pinned state\n",
		       rw_g.socket, strerror(-c->agent_err));
	}
}

static void print_limits(struct sctx *c, json_t *o)
{
	json_t *limits = json_object_get(o, "limits");

	printf("bpffs:      %s\n", c->bpffs);
	printf("limits:     events %lld/s burst %lld per sandbox for drops and for new flows; "
	       "answers %lld/s burst %lld per sandbox; conntrack %lld flows per sandbox, %lld per "
	       "node\n",
	       rw_cli_jint(limits, "event_rate"), rw_cli_jint(limits, "event_burst"),
	       rw_cli_jint(limits, "answer_rate"), rw_cli_jint(limits, "answer_burst"),
	       rw_cli_jint(limits, "ct_per_sandbox"), rw_cli_jint(limits, "ct_node"));
}

static void print_runs(json_t *o)
{
	json_t *runs = json_object_get(o, "runs"), *v;
	struct rw_table t;
	size_t i;

	printf("\nruns: %zu\n", json_array_size(runs));
	rw_table_init(&t, 5, NULL, 0);
	json_array_foreach(runs, i, v)
	{
		const char *rs = json_string_value(json_object_get(v, "since"));
		json_t *pods = json_object_get(v, "pods"), *p;
		char list[512] = "";
		size_t j, off = 0;

		json_array_foreach(pods, j, p)
		{
			if (off < sizeof(list))
				off += snprintf(list + off, sizeof(list) - off, "%s%s",
						j ? "," : "", json_string_value(p));
		}
		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "id")));
		rw_table_cell(&t, "enforcing generation %lld%s%s", rw_cli_jint(v, "gen"),
			      rs ? " since " : "", rs ? rs : "");
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "egress")));
		rw_table_cell(&t, "idx %lld", rw_cli_jint(v, "idx"));
		rw_table_cell(&t, "pods %s", list);
	}
	rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
}

/* The sandbox veths, then those whose attach is being retried or whose pod waits for room. */
static void print_sandboxes(json_t *o)
{
	static const char *const sb_heads[] = {"VETH", "IFINDEX",     "POD",
					       "RUN",  "EGRESS HOOK", "INGRESS HOOK"};
	json_t *sbx = json_object_get(o, "sandboxes"), *v;
	struct rw_table t;
	size_t i;

	printf("\nsandboxes: %zu\n", json_array_size(sbx));
	rw_table_init(&t, 6, sb_heads, RW_TABLE_RIGHT(1));
	json_array_foreach(sbx, i, v)
	{
		json_t *hooks = json_object_get(v, "hooks");
		const char *pod = json_string_value(json_object_get(v, "pod"));
		const char *pod6 = json_string_value(json_object_get(v, "pod6"));
		const char *run = json_string_value(json_object_get(v, "run"));
		char eg[64], in[64], pods[128];

		hook_str(json_object_get(hooks, "egress"), eg, sizeof(eg));
		hook_str(json_object_get(hooks, "ingress"), in, sizeof(in));
		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "ifname")));
		rw_table_cell(&t, "%lld", rw_cli_jint(v, "ifindex"));
		/* A dual-stack pod's two addresses: "10.1.2.3 2600:1f14:abc::7". */
		snprintf(pods, sizeof(pods), "%s%s%s", pod ? pod : "", pod && pod6 ? " " : "",
			 pod6 ? pod6 : "");
		rw_table_cell(&t, "%s", pod || pod6 ? pods : "- (unbound)");
		rw_table_cell(&t, "%s", run ? run : "-");
		rw_table_cell(&t, "%s", eg);
		rw_table_cell(&t, "%s", in);
	}
	if (t.rows)
		rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
	/* Failed attaches the agent is retrying (with backoff). */
	json_array_foreach(sbx, i, v)
	{
		const char *ae = json_string_value(json_object_get(v, "attach_error"));

		if (ae)
			printf("  %s: %s (%lld failed attempts; retrying in %lld ms)\n",
			       json_string_value(json_object_get(v, "ifname")), ae,
			       rw_cli_jint(v, "attach_failures"),
			       rw_cli_jint(v, "attach_retry_in_ms"));
	}
	/* Veths routed to a pod the node has no room to bind: deny-all until there is room. */
	json_array_foreach(sbx, i, v)
	{
		const char *be = json_string_value(json_object_get(v, "bind_error"));

		if (be)
			printf("  %s: pod %s not bound, deny-all: %s (bound by the resync that "
			       "finds room)\n",
			       json_string_value(json_object_get(v, "ifname")),
			       json_string_value(json_object_get(v, "waiting_pod")), be);
	}
}

/* The pods' containers the agent knows, and how many wait for their cgroup or their veth. */
static void print_containers(json_t *o)
{
	static const char *const heads[] = {"POD", "CONTAINER", "ID", "CGROUP ID", "VETH"};
	json_t *ct = json_object_get(o, "containers"), *v;
	struct rw_table t;
	size_t i;

	if (!json_is_object(ct))
		return;
	printf("\ncontainers: %lld in %lld pods, %lld waiting for their cgroup or veth (%s%s)\n",
	       rw_cli_jint(ct, "count"), rw_cli_jint(ct, "pods"), rw_cli_jint(ct, "waiting"),
	       json_string_value(json_object_get(ct, "dir")),
	       json_is_true(json_object_get(ct, "watching")) ? "" : ", not there");
	rw_table_init(&t, 5, heads, RW_TABLE_RIGHT(3));
	json_array_foreach(json_object_get(ct, "list"), i, v)
	{
		long long cg = rw_cli_jint(v, "cgroup_id");
		const char *ifname = json_string_value(json_object_get(v, "ifname"));

		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "pod")));
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "name")));
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "id")));
		if (cg)
			rw_table_cell(&t, "%lld", cg);
		else
			rw_table_cell(&t, "- (no cgroup yet)");
		rw_table_cell(&t, "%s", ifname ? ifname : "- (not known)");
	}
	if (t.rows)
		rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
}

static void print_maps(json_t *o)
{
	static const char *const map_heads[] = {"MAP", "PINNED AS", "ENTRIES", "MAX", "FILL"};
	json_t *maps = json_object_get(o, "maps"), *v;
	struct rw_table t;
	size_t i;

	printf("\nmaps:\n");
	rw_table_init(&t, 5, map_heads, RW_TABLE_RIGHT(2) | RW_TABLE_RIGHT(3) | RW_TABLE_RIGHT(4));
	json_array_foreach(maps, i, v)
	{
		long long e = rw_cli_jint(v, "entries");
		long long m = rw_cli_jint(v, "max_entries");
		const char *pin = json_string_value(json_object_get(v, "pin"));
		bool ring = !strcmp(pin, rw_map_names[RW_M_EVENTS]);
		char a[32], b[32];

		rw_table_row(&t);
		rw_table_cell(&t, "%s", json_string_value(json_object_get(v, "name")));
		rw_table_cell(&t, "%s", pin);
		if (ring) {
			rw_cli_bytes(e < 0 ? 0 : e, a, sizeof(a));
			rw_cli_bytes(m, b, sizeof(b));
			rw_table_cell(&t, "%s", e < 0 ? "?" : a);
			rw_table_cell(&t, "%s", b);
		} else {
			if (e < 0)
				rw_table_cell(&t, "?");
			else
				rw_table_cell(&t, "%lld", e);
			rw_table_cell(&t, "%lld", m);
		}
		rw_cli_fill_pct(e, m, a, sizeof(a));
		rw_table_cell(&t, "%s", a);
	}
	rw_table_print(&t, stdout, "  ");
	rw_table_free(&t);
}

static void print_events(json_t *o, json_t *ag)
{
	json_t *ev = json_object_get(o, "events");

	printf("\nevents: %lld sent, %lld lost, %lld suppressed (kernel, node total)",
	       rw_cli_jint(ev, "sent"), rw_cli_jint(ev, "lost"), rw_cli_jint(ev, "suppressed"));
	if (ag)
		printf("; %lld delivered, %lld skipped to %lld subscriber%s (agent)",
		       rw_cli_jint(ev, "delivered"), rw_cli_jint(ev, "skipped"),
		       rw_cli_jint(ev, "subscribers"),
		       rw_cli_jint(ev, "subscribers") == 1 ? "" : "s");
	printf("\n");
}

static void print_plain(struct sctx *c, json_t *o)
{
	json_t *ag = c->agent ? json_object_get(o, "agent") : NULL; /* the agent's, as merged */

	print_node(o, ag);
	print_agent(c, ag);
	print_limits(c, o);
	print_runs(o);
	print_sandboxes(o);
	print_containers(o);
	print_maps(o);
	print_events(o, ag);
}

static int cmd_status(int argc, char **argv)
{
	static const struct rw_cmd_opt opts[] = {{"json", 'j', .flag = &rw_g.json}, {}};
	struct sctx c = {.bpffs = rw_g.bpffs};
	char err[512];
	bool ready;
	json_t *o;
	int opt, ret;

	opt = rw_cmd_options(&rw_cmd_status, argc, argv, opts);
	if (opt >= 0)
		return opt;
	if (optind < argc)
		return rw_cmd_usage_error(&rw_cmd_status, "unexpected '%s'", argv[optind]);

	c.agent_err =
		rw_ctl_call(rw_g.socket, "status", NULL, NULL, 0, RW_CTL_TIMEOUT_MS, &c.agent);
	if (c.agent_err)
		c.agent = NULL;
	if (c.agent && !json_is_true(json_object_get(c.agent, "ok"))) {
		c.agent_err = -EPROTO;
		json_decref(c.agent);
		c.agent = NULL;
	}
	/* The agent knows where its maps are: a CLI without --bpffs still finds them. */
	if (c.agent) {
		const char *dir = json_string_value(json_object_get(c.agent, "bpffs"));

		if (dir && *dir && strcmp(dir, c.bpffs)) {
			if (!rw_g.json)
				fprintf(stderr,
					"runwall: the agent on %s pins under %s, not %s: "
					"reading %s\n",
					rw_g.socket, dir, c.bpffs, dir);
			c.bpffs = dir;
		}
	}
	ret = rw_cli_open(&c.dp, c.bpffs, err, sizeof(err));
	if (ret) {
		bool agent = c.agent;

		json_decref(c.agent);
		if (ret == -ENOENT && !agent)
			return rw_fail(RW_EXIT_USAGE, "%s; and no agent on %s (%s)", err,
				       rw_g.socket, strerror(-c.agent_err));
		return rw_fail(RW_EXIT_REFUSED, "%s", err);
	}
	o = rw_status_node(&c.dp, c.bpffs, rw_g.socket, c.agent, c.agent_err, err, sizeof(err));
	if (!o) {
		ret = rw_fail(RW_EXIT_REFUSED, "%s", err);
		goto cleanup;
	}
	ready = json_is_true(json_object_get(o, "ready"));
	if (rw_g.json) {
		rw_cli_json_print(o);
	} else {
		print_plain(&c, o);
		json_decref(o);
	}
	ret = ready ? RW_EXIT_OK : RW_EXIT_REFUSED;
cleanup:
	rw_datapath_close(&c.dp);
	json_decref(c.agent);
	return ret;
}

RW_COMMAND(status, .summary = "is this node enforcing, and what", .grammar = status_usage);
